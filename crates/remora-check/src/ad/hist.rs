//! `hist` by `f.max`, `f.min` and `f.*` under differentiation (`hist` by
//! `f.+` is linear: `Rule::Linear`).
//!
//! `((i-app hist m) op ne idx xs)` starts every bin from `ne` and combines
//! each item into its bin by `(op acc item)`, in order.
//!
//! * `f.max`, `f.min`: each bin's value is one contributor's, whose tangent
//!   (and cotangent) it takes: `ne` where the bin equals it (the
//!   accumulator wins a tie, as `f.max` passes the derivative to its first
//!   argument), else the first item of the bin equal to the bin's value.
//!   The winners are found by comparisons (Bool and Int code, no
//!   derivative): each item's position where it equals its bin, the least
//!   per bin by a `hist` by `min`.
//! * `f.*`: the derivative for an item is `ne` times the product of the
//!   bin's other items; for `ne`, the product of the bin's items. The
//!   products of the others are the bin's product of its nonzero factors,
//!   divided by the item when it is not zero, and zero when another factor
//!   is: right at zeros.
//!
//! Indices must be in range (each item reads its bin's value), as for
//! `hist` by `f.+`. Lifted over a frame, and by any other function (a
//! lambda), `hist` is a positioned error.

use super::{Env, Mode, Node, Rule, Walk, app, call, float, int, lam, static_dim, zeros};
use crate::typed::TExpr;
use remora_syntax::Diagnostic;
use remora_syntax::ast::{self, ExprKind};
use remora_types::{Atom, Lifted, Shape, Type};
use std::collections::HashMap;

/// `hist` by an extremum or a product, as reverse mode needs it.
pub(super) struct HistNode {
    /// The items' and `ne`'s names, when they depend on the parameter.
    xs_name: Option<String>,
    ne_name: Option<String>,
    idx: ast::Expr,
    /// `nth` of the bins' cotangents, instantiated.
    nth: ast::Expr,
    /// The factor each item's cotangent is taken by (`[Float n @s]`) and
    /// the factor of `ne`'s from each bin's (`[Float m @s]`).
    per_item: ast::Expr,
    per_bin: ast::Expr,
    bins: Shape,
    cell: Shape,
}

/// The primitive `f` calls on its two parameters, in order, when it is
/// `(λ (x) (λ (y) (op x y)))` (how the checker writes a scalar primitive
/// applied to cells: `f.min` on vectors).
fn eta_op(f: &TExpr) -> Option<&'static str> {
    let (params, body, _) = super::params_of(f, 2);
    let (head, args) = body.spine();
    let [(x, _), (y, _)] = args.as_slice() else {
        return None;
    };
    let is = |e: &TExpr, p: Option<&(crate::typed::VarId, Type)>| matches!((&e.kind, p), (crate::typed::TExprKind::Var(v), Some((q, _))) if v == q);
    (params.len() == 2 && is(x, params.first()) && is(y, params.get(1)))
        .then(|| super::head_name(head))
        .flatten()
}

/// `name` instantiated at `atom` and the indices `dims`.
fn instantiated(w: &super::Writer, name: &str, atom: Atom, dims: Vec<ast::Ispace>) -> ast::Expr {
    let t = super::node(ExprKind::TApp {
        func: Box::new(v(name)),
        arg: w.ty(&Type::scalar(atom)),
    });
    dims.into_iter().fold(t, |f, d| {
        super::node(ExprKind::IApp {
            func: Box::new(f),
            arg: d,
        })
    })
}

/// `(λ (a b) (f a b))` on cells of `cell`, for a scalar primitive `f`.
fn cell_fn(w: &super::Writer, f: &str, atom: Atom, cell: &Shape) -> ast::Expr {
    let (a, b) = (w.ad.fresh(), w.ad.fresh());
    let ty = Type {
        atom,
        shape: cell.clone(),
    };
    super::lambdas(
        w,
        &[(a.clone(), ty.clone()), (b.clone(), ty)],
        call(f, vec![v(&a), v(&b)]),
    )
}

/// Whether `f` is `f.+`, or a lambda that only applies it to its two
/// parameters in order (which the engines sum as they sum by `f.+`).
pub(super) fn adds(f: &TExpr) -> bool {
    super::head_name(f).or_else(|| eta_op(f)) == Some("f.+")
}

fn v(name: &str) -> ast::Expr {
    super::var(name)
}

fn select(c: ast::Expr, a: ast::Expr, b: ast::Expr) -> ast::Expr {
    call("select", vec![c, a, b])
}

impl Walk<'_, '_> {
    /// `e` as a `hist` by `f.max`, `f.min` or `f.*` (`None`: another form).
    #[allow(clippy::type_complexity)]
    pub(super) fn hist_form(
        &mut self,
        name: &str,
        e: &TExpr,
        spine: &[(&TExpr, &Lifted)],
        env: &Env,
    ) -> Option<Result<(ast::Expr, Option<ast::Expr>), Diagnostic>> {
        if name != "hist" || spine.len() != 4 {
            return None;
        }
        let written = spine.first().and_then(|(f, _)| super::head_name(f));
        let op = match written.or_else(|| spine.first().and_then(|(f, _)| eta_op(f))) {
            // `Rule::Linear`, unless the checker wrote it as a lambda (on
            // cells that are not scalars).
            Some("f.+") if written.is_some() => return None,
            Some("f.+") => "f.+",
            Some("f.max") => "f.max",
            Some("f.min") => "f.min",
            Some("f.*") => "f.*",
            _ => {
                return Some(Err(self.unsupported(
                    e,
                    "`hist` by a function other than `f.+`, `f.max`, `f.min` and `f.*`",
                )));
            }
        };
        if spine.iter().any(|(_, l)| !l.principal.is_scalar()) {
            return Some(Err(
                self.unsupported(e, &format!("`hist` by `{op}` lifted over a frame"))
            ));
        }
        Some(self.hist(op, e, spine, env))
    }

    #[allow(clippy::type_complexity)]
    fn hist(
        &mut self,
        op: &'static str,
        e: &TExpr,
        spine: &[(&TExpr, &Lifted)],
        env: &Env,
    ) -> Result<(ast::Expr, Option<ast::Expr>), Diagnostic> {
        let w = self.w;
        let (head, _) = e.spine();
        let float_hist = w.expr(head);
        let bins = Shape::from_segs(e.ty.shape.segs().first().cloned().into_iter().collect());
        let cell = spine.get(1).map(|(_, l)| l.arg_cell.clone()).unwrap_or_default();
        // The other `hist`s and scans, instantiated in full (inference
        // could lift them over a frame instead), by functions of cells.
        let items = spine.get(2).map(|(_, l)| l.arg_cell.clone()).unwrap_or_default();
        let (Some(m), Some(n)) = (
            static_dim(w, bins.segs().first()),
            static_dim(w, items.segs().first()),
        ) else {
            return Err(self.unsupported(e, &format!("`hist` by `{op}` of an unknown count of bins")));
        };
        let cell_ispace = ast::Ispace::Shape(w.shape(&cell));
        let hist_of = |atom: Atom, f: &str| {
            let head = instantiated(
                w,
                "hist",
                atom.clone(),
                vec![m.clone(), n.clone(), cell_ispace.clone()],
            );
            (head, cell_fn(w, f, atom, &cell))
        };
        // Each item's bin's cell (`nth` of the bins by the indices).
        let nth = |atom: Atom| instantiated(w, "nth", atom, vec![m.clone(), cell_ispace.clone()]);
        let int_scan = instantiated(w, "iscan", Atom::Int, vec![n.clone(), cell_ispace.clone()]);
        let mut ps = Vec::new();
        let mut ts = Vec::new();
        for (a, _) in spine.iter().skip(1) {
            let (p, t) = self.expr(a, env)?;
            ps.push(self.bind_named(p));
            ts.push(t);
        }
        let (Some(ne), Some(idx), Some(xs)) = (ps.first().cloned(), ps.get(1).cloned(), ps.get(2).cloned())
        else {
            return Err(self.unsupported(e, "`hist`"));
        };
        let (dne, dxs) = (ts.first().cloned().flatten(), ts.get(2).cloned().flatten());
        let op_code = spine.first().map(|(f, _)| w.expr(f)).unwrap_or_else(|| v(op));
        let out = self.bind(app(
            float_hist,
            vec![op_code, ne.clone(), idx.clone(), xs.clone()],
        ));
        if dne.is_none() && dxs.is_none() {
            return Ok((out, None));
        }
        let cell_ty = Type {
            atom: Atom::Float,
            shape: cell.clone(),
        };
        // f(bin, ne) for each bin: a function of cells lifted over the bins.
        let with_ne = |w: &super::Writer, bins: ast::Expr, f: &dyn Fn(ast::Expr, ast::Expr) -> ast::Expr| {
            let b = w.ad.fresh();
            app(lam(w, &b, &cell_ty, f(v(&b), ne.clone())), vec![bins])
        };
        // An Int cell of `k`s, of `ne`'s shape.
        let int_cell = |w: &super::Writer, k: i64| {
            let p = w.ad.fresh();
            app(lam(w, &p, &Type::scalar(Atom::Float), int(k)), vec![ne.clone()])
        };
        let (per_item, per_bin) = if op == "f.+" {
            let ones = |like: &ast::Expr| super::broadcast(w, float(1.0), like.clone(), &Atom::Float);
            (ones(&xs), ones(&out))
        } else if op == "f.*" {
            let nonzero = self.bind(call("f.!=", vec![xs.clone(), float(0.0)]));
            let factor = self.bind(select(nonzero.clone(), xs.clone(), float(1.0)));
            let ne_nonzero = self.bind(call("f.!=", vec![ne.clone(), float(0.0)]));
            // Each bin's product of its nonzero factors (`ne`'s among
            // them), and its count of zero factors.
            let (times, by) = hist_of(Atom::Float, "f.*");
            let product = self.bind(app(
                times.clone(),
                vec![
                    by.clone(),
                    select(ne_nonzero.clone(), ne.clone(), float(1.0)),
                    idx.clone(),
                    factor.clone(),
                ],
            ));
            let (plus_head, plus_fn) = hist_of(Atom::Int, "+");
            let zeros_in = self.bind(app(
                plus_head,
                vec![
                    plus_fn,
                    select(ne_nonzero, int(0), int(1)),
                    idx.clone(),
                    select(nonzero.clone(), int(0), int(1)),
                ],
            ));
            // The others' product: the bin's nonzero product over the
            // item's nonzero factor, where no other factor is zero.
            let others_zero = call(
                "-",
                vec![
                    app(nth(Atom::Int), vec![zeros_in, idx.clone()]),
                    select(nonzero, int(0), int(1)),
                ],
            );
            let per_item = select(
                call("==", vec![others_zero, int(0)]),
                call(
                    "f./",
                    vec![app(nth(Atom::Float), vec![product, idx.clone()]), factor],
                ),
                float(0.0),
            );
            // `ne`'s: the product of the bin's items.
            let ones = super::broadcast(w, float(1.0), ne.clone(), &Atom::Float);
            let per_bin = app(times, vec![by, ones, idx.clone(), xs.clone()]);
            (per_item, per_bin)
        } else {
            let at_item = app(nth(Atom::Float), vec![out.clone(), idx.clone()]);
            let equal = self.bind(call("f.==", vec![xs.clone(), at_item]));
            // Each item's position (from 1), where it equals its bin.
            let ones = app(
                lam(w, &w.ad.fresh(), &Type::scalar(Atom::Float), int(1)),
                vec![xs.clone()],
            );
            let position = self.bind(app(int_scan, vec![cell_fn(w, "+", Atom::Int, &cell), ones]));
            let candidate = select(equal.clone(), position.clone(), int(i64::MAX));
            let (least_head, least_fn) = hist_of(Atom::Int, "min");
            let first = app(
                least_head,
                vec![least_fn, int_cell(w, i64::MAX), idx.clone(), candidate],
            );
            let first = self.bind(first);
            let from_ne = self.bind(with_ne(w, out.clone(), &|b, n| call("f.==", vec![b, n])));
            let wins = call(
                "and",
                vec![
                    equal,
                    call(
                        "and",
                        vec![
                            call(
                                "==",
                                vec![position, app(nth(Atom::Int), vec![first, idx.clone()])],
                            ),
                            call(
                                "not",
                                vec![app(nth(Atom::Bool), vec![from_ne.clone(), idx.clone()])],
                            ),
                        ],
                    ),
                ],
            );
            (call("bool->f", vec![wins]), call("bool->f", vec![from_ne]))
        };
        let per_item = self.bind(per_item);
        let per_bin = self.bind(per_bin);
        if self.mode == Mode::Forward {
            let mut t: Option<ast::Expr> = None;
            if let Some(dx) = &dxs {
                let scaled = call("f.*", vec![per_item.clone(), dx.clone()]);
                let (sum, add) = hist_of(Atom::Float, "f.+");
                t = Some(app(sum, vec![add, zeros(w, ne.clone()), idx.clone(), scaled]));
            }
            if let Some(dn) = &dne {
                let b = w.ad.fresh();
                let from_ne = app(
                    lam(w, &b, &cell_ty, call("f.*", vec![v(&b), dn.clone()])),
                    vec![per_bin],
                );
                t = Some(match t {
                    Some(t) => call("f.+", vec![t, from_ne]),
                    None => from_ne,
                });
            }
            let t = t.map(|t| self.bind(t));
            return Ok((out, t));
        }
        let out_name = match &out.kind {
            ExprKind::Var(o) => o.name.clone(),
            _ => String::new(),
        };
        let node = HistNode {
            xs_name: super::varying_name(&dxs, &xs),
            ne_name: super::varying_name(&dne, &ne),
            idx,
            nth: nth(Atom::Float),
            per_item,
            per_bin,
            bins,
            cell,
        };
        self.nodes.push(Node {
            out: out_name,
            rule: Rule::Hist(Box::new(node)),
            head: v("∂hist"),
            args: Vec::new(),
            principal: Shape::scalar(),
            result_cell: Shape::scalar(),
            span: e.span,
        });
        Ok((out, Some(v("∂unused"))))
    }

    /// The adjoints of a `hist` by an extremum or a product: each item's
    /// its bin's cotangent by its factor; `ne`'s the bins' cotangents by
    /// theirs, summed over the bins.
    pub(super) fn hist_adjoint(
        &mut self,
        node: &HistNode,
        ct: &ast::Expr,
        adjoints: &mut HashMap<String, String>,
        span: remora_syntax::Span,
    ) -> Result<(), Diagnostic> {
        if let Some(xs) = &node.xs_name {
            let c = call(
                "f.*",
                vec![
                    node.per_item.clone(),
                    app(node.nth.clone(), vec![ct.clone(), node.idx.clone()]),
                ],
            );
            let c = self.bind(c);
            self.accumulate(xs, c, adjoints);
        }
        if let Some(ne) = &node.ne_name {
            let c = self.bind(call("f.*", vec![node.per_bin.clone(), ct.clone()]));
            let c = self.sum_axes(c, &node.bins, &node.cell, span)?;
            let c = self.bind(c);
            self.accumulate(ne, c, adjoints);
        }
        Ok(())
    }
}

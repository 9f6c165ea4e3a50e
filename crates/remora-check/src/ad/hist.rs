//! `hist` under differentiation, but by `f.+` (linear: `Rule::Linear`).
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
//! * Any other function (a lambda, a name, `f.-`, `f./`): each bin is a
//!   fold of its items, in item order. A stable grade of the indices brings
//!   each bin's items together; a scan along them finds the accumulator
//!   each item was combined with; tangents are scanned forward along them,
//!   cotangents back, by the function's own derivative (Schenck's rule for
//!   a general operator, thesis §3.4.2, but sequential within a bin, so
//!   the function need not be associative). Items whose indices are out
//!   of range get no derivative.
//!
//! Indices must be in range for the extrema and products (each item reads
//! its bin's value), as for `hist` by `f.+`. Lifted over a frame, `hist` is
//! a call of `(λ (ne idx xs) (hist op ne idx xs))` lifted over it, whose
//! derivative on cells is lifted (over a frame of functions, the frame
//! of their derivatives on cells).

use super::loops::{Step, fields, record_type};
use super::{
    Env, Mode, Node, Rule, Walk, app, call, field_of, float, int, lam, lambdas, let_in, record_of,
    static_dim, zeros,
};
use crate::typed::TExpr;
use remora_syntax::Diagnostic;
use remora_syntax::ast::{self, ExprKind};
use remora_types::{Atom, Lifted, Shape, Type};
use std::collections::HashMap;

/// A `hist` by an extremum, a product or a lambda, as reverse mode needs it.
pub(super) enum HistNode {
    Op(Box<OpHist>),
    By(Box<ByHist>),
}

/// A `hist`'s arguments as its rules read them.
struct HistArgs {
    /// The static counts of bins and items.
    m: ast::Ispace,
    n: ast::Ispace,
    bins: Shape,
    cell: Shape,
    ne: ast::Expr,
    idx: ast::Expr,
    xs: ast::Expr,
    dne: Option<ast::Expr>,
    dxs: Option<ast::Expr>,
    /// The primal, bound to a name.
    out: ast::Expr,
}

/// `hist` by a lambda: its items in the order of a stable grade of the
/// indices (each bin's items together, in item order), and the accumulator
/// each was combined with, found by a scan along them.
pub(super) struct ByHist {
    xs_name: Option<String>,
    ne_name: Option<String>,
    ne: ast::Expr,
    xs: ast::Expr,
    step: Step,
    /// The grade; the indices, items and accumulators in its order.
    perm: ast::Expr,
    sidx: ast::Expr,
    sxs: ast::Expr,
    accs: ast::Expr,
    /// Whether each item (in the grade's order) is its bin's first, and
    /// its last; whether its index is a bin's; whether each bin has none.
    first: ast::Expr,
    last: ast::Expr,
    valid: ast::Expr,
    empty: ast::Expr,
    items: Shape,
    bins: Shape,
    cell: Shape,
}

/// `hist` by an extremum or a product.
pub(super) struct OpHist {
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

fn if_(cond: ast::Expr, then: ast::Expr, otherwise: ast::Expr) -> ast::Expr {
    super::node(ExprKind::If {
        cond: Box::new(cond),
        then: Box::new(then),
        otherwise: Box::new(otherwise),
    })
}

fn bool_(b: bool) -> ast::Expr {
    super::node(ExprKind::Array {
        shape: Vec::new(),
        atoms: vec![ast::Atom {
            kind: ast::AtomKind::Bool(b),
            span: crate::elaborate::sp(),
        }],
    })
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
            _ => "a function",
        };
        if spine.iter().any(|(_, l)| !l.principal.is_scalar()) {
            return Some(self.lifted_on_cells("`hist`", e, spine, env));
        }
        if op == "a function" {
            return Some(self.hist_by(e, spine, env));
        }
        Some(self.hist(op, e, spine, env))
    }

    /// `hist` by a lambda `f` (Schenck's rule for any operator, thesis
    /// §3.4.2, run in item order, so `f` need not be associative): each
    /// bin's items are a fold by `f` from `ne`. A stable grade of the
    /// indices brings each bin's items together; a scan along them finds
    /// the accumulator each item was combined with. Forward mode scans the
    /// tangents along them the same way; reverse mode scans the
    /// cotangents back (`hist_by_adjoint`).
    #[allow(clippy::type_complexity)]
    fn hist_by(
        &mut self,
        e: &TExpr,
        spine: &[(&TExpr, &Lifted)],
        env: &Env,
    ) -> Result<(ast::Expr, Option<ast::Expr>), Diagnostic> {
        let w = self.w;
        let what = "`hist` by a function";
        let Some((fe, _)) = spine.first() else {
            return Err(self.unsupported(e, what));
        };
        if e.ty.atom != Atom::Float {
            return Err(self.unsupported(e, what));
        }
        let HistArgs {
            m,
            n,
            bins,
            cell,
            ne,
            idx,
            xs,
            dne,
            dxs,
            out,
        } = self.hist_args(what, e, spine, env)?;
        let cell_ty = Type {
            atom: Atom::Float,
            shape: cell.clone(),
        };
        let step = match super::head_name(fe) {
            // (`f.+`, the extrema and `f.*` have rules of their own.)
            Some(op @ ("f.-" | "f./")) => self.op_step(op, cell_ty.clone(), dxs.is_some(), false),
            _ => self.lambda_step(
                fe,
                cell_ty.clone(),
                Some(cell_ty.clone()),
                dxs.is_some(),
                false,
                env,
                e,
                what,
            )?,
        };
        if step.closed.iter().any(|(_, t, _)| t.atom != Atom::Float) {
            return Err(self.unsupported(e, &format!("{what} that closes over a varying record")));
        }
        if dne.is_none() && dxs.is_none() && step.closed.is_empty() {
            return Ok((out, None));
        }
        let items = spine.get(2).map(|(_, l)| l.arg_cell.clone()).unwrap_or_default();
        let cell_ispace = ast::Ispace::Shape(w.shape(&cell));
        let scalar = ast::Ispace::Shape(w.shape(&Shape::scalar()));
        let perm = self.bind(call("grade", vec![idx.clone()]));
        let sidx = self.bind(app(
            instantiated(w, "nth", Atom::Int, vec![n.clone(), scalar.clone()]),
            vec![idx.clone(), perm.clone()],
        ));
        let gather = instantiated(w, "nth", Atom::Float, vec![n.clone(), cell_ispace.clone()]);
        let sxs = self.bind(app(gather.clone(), vec![xs.clone(), perm.clone()]));
        let positions = super::node(ExprKind::IApp {
            func: Box::new(v("iota/static")),
            arg: ast::Ispace::Shape(w.shape(&items)),
        });
        let positions = self.bind(positions);
        // An item is its bin's first (last) where the one before (after)
        // it in the grade's order is another bin's, or there is none.
        let border = |by: i64, at: i64| {
            call(
                "or",
                vec![
                    call(
                        "==",
                        vec![call("rotate", vec![positions.clone(), int(at)]), int(0)],
                    ),
                    call(
                        "!=",
                        vec![sidx.clone(), call("rotate", vec![sidx.clone(), int(by)])],
                    ),
                ],
            )
        };
        let first = self.bind(border(-1, 0));
        let last = self.bind(border(1, 1));
        let m_int = super::node(ExprKind::IApp {
            func: Box::new(v("reify-dim")),
            arg: m.clone(),
        });
        let valid = self.bind(call(
            "and",
            vec![
                call(">=", vec![sidx.clone(), int(0)]),
                call("<", vec![sidx.clone(), m_int]),
            ],
        ));
        // The accumulator each item was combined with: `ne` at its bin's
        // first, else the state the item before it left.
        let acc_fields = fields(&[("f", &Type::scalar(Atom::Bool)), ("l", &cell_ty), ("x", &cell_ty)]);
        let (s, q, l) = (w.ad.fresh(), w.ad.fresh(), w.ad.fresh());
        let acc_ty = record_type(&acc_fields);
        let acc_step = lambdas(
            w,
            &[(s.clone(), acc_ty.clone()), (q.clone(), acc_ty)],
            let_in(
                vec![(
                    l.clone(),
                    if_(field_of(v(&q), "f"), ne.clone(), field_of(v(&s), "x")),
                )],
                record_of(w, &acc_fields, |f| match f {
                    "f" => field_of(v(&q), "f"),
                    "l" => v(&l),
                    _ => app(step.code.clone(), vec![v(&l), field_of(v(&q), "x")]),
                }),
            ),
        );
        let init = record_of(w, &acc_fields, |f| match f {
            "f" => bool_(true),
            _ => ne.clone(),
        });
        let along = record_of(w, &acc_fields, |f| match f {
            "f" => first.clone(),
            _ => sxs.clone(),
        });
        let states = call("tail", vec![call("scan", vec![acc_step, init, along])]);
        let accs = self.bind(field_of(states, "l"));
        if self.mode == Mode::Forward {
            // Each item's state's tangent, from `ne`'s at its bin's first;
            // each bin's, its last item's (`ne`'s where it has none).
            let dne = dne.unwrap_or_else(|| zeros(w, ne.clone()));
            let dsxs = dxs.map(|d| app(gather, vec![d, perm.clone()]));
            let t_fields = fields(&[
                ("f", &Type::scalar(Atom::Bool)),
                ("l", &cell_ty),
                ("x", &cell_ty),
                ("t", &cell_ty),
            ]);
            let t_ty = record_type(&t_fields);
            let (s, q) = (w.ad.fresh(), w.ad.fresh());
            let mut at = vec![field_of(v(&q), "l"), field_of(v(&q), "x")];
            at.extend(step.closed.iter().map(|(c, _, _)| v(c)));
            at.push(if_(field_of(v(&q), "f"), dne.clone(), field_of(v(&s), "t")));
            if step.item_varying {
                at.push(field_of(v(&q), "t"));
            }
            at.extend(step.closed.iter().map(|(_, _, dc)| v(dc)));
            let d = step.forward.clone().unwrap_or_else(|| v("undefined"));
            let t_step = lambdas(
                w,
                &[(s.clone(), t_ty.clone()), (q.clone(), t_ty)],
                record_of(w, &t_fields, |f| match f {
                    "t" => app(d.clone(), at.clone()),
                    f => field_of(v(&q), f),
                }),
            );
            let init = record_of(w, &t_fields, |f| match f {
                "f" => bool_(true),
                "t" => dne.clone(),
                _ => ne.clone(),
            });
            let along = record_of(w, &t_fields, |f| match f {
                "f" => first.clone(),
                "l" => accs.clone(),
                "t" => dsxs.clone().unwrap_or_else(|| sxs.clone()),
                _ => sxs.clone(),
            });
            let ts = field_of(call("tail", vec![call("scan", vec![t_step, init, along])]), "t");
            let to_bins = app(
                instantiated(
                    w,
                    "replicate",
                    Atom::Float,
                    vec![ast::Ispace::Shape(w.shape(&bins)), cell_ispace.clone()],
                ),
                vec![dne],
            );
            let scatter = instantiated(w, "scatter", Atom::Float, vec![m.clone(), n.clone(), cell_ispace]);
            let t = self.bind(app(scatter, vec![to_bins, sidx, ts]));
            return Ok((out, Some(t)));
        }
        let ones = app(
            lam(w, &w.ad.fresh(), &Type::scalar(Atom::Int), int(1)),
            vec![idx.clone()],
        );
        let count = app(
            instantiated(w, "hist", Atom::Int, vec![m.clone(), n.clone(), scalar]),
            vec![cell_fn(w, "+", Atom::Int, &Shape::scalar()), int(0), idx, ones],
        );
        let empty = self.bind(call("==", vec![count, int(0)]));
        let out_name = match &out.kind {
            ExprKind::Var(o) => o.name.clone(),
            _ => String::new(),
        };
        let node = ByHist {
            xs_name: super::varying_name(&dxs, &xs),
            ne_name: super::varying_name(&dne, &ne),
            ne,
            xs,
            step,
            perm,
            sidx,
            sxs,
            accs,
            first,
            last,
            valid,
            empty,
            items,
            bins,
            cell,
        };
        self.nodes.push(Node {
            out: out_name,
            rule: Rule::Hist(Box::new(HistNode::By(Box::new(node)))),
            head: v("∂hist"),
            args: Vec::new(),
            principal: Shape::scalar(),
            result_cell: Shape::scalar(),
            span: e.span,
        });
        Ok((out, Some(v("∂unused"))))
    }

    /// The adjoints of a `hist` by a lambda: the cotangent of each item's
    /// state, scanned back along the grade's order (its bin's cotangent at
    /// its bin's last item, else the next item's, taken back through `f`),
    /// gives each item's cotangent, `ne`'s (at each bin's first item, and
    /// each empty bin's own) and those of the variables `f` closes over.
    fn hist_by_adjoint(
        &mut self,
        node: &ByHist,
        ct: &ast::Expr,
        adjoints: &mut HashMap<String, String>,
        span: remora_syntax::Span,
    ) -> Result<(), Diagnostic> {
        let w = self.w;
        let step = &node.step;
        let cell_ty = Type {
            atom: Atom::Float,
            shape: node.cell.clone(),
        };
        let boolean = Type::scalar(Atom::Bool);
        let c_fields = fields(&[
            ("e", &boolean),
            ("v", &boolean),
            ("b", &Type::scalar(Atom::Int)),
            ("l", &cell_ty),
            ("x", &cell_ty),
            ("c", &cell_ty),
        ]);
        let c_ty = record_type(&c_fields);
        let (s, q) = (w.ad.fresh(), w.ad.fresh());
        let closed: Vec<ast::Expr> = step.closed.iter().map(|(c, _, _)| v(c)).collect();
        let through = |d: &Option<ast::Expr>, l: ast::Expr, x: ast::Expr, c: ast::Expr| {
            let mut at = vec![l, x];
            at.extend(closed.iter().cloned());
            at.push(c);
            app(d.clone().unwrap_or_else(|| v("undefined")), at)
        };
        let zero = zeros(w, node.ne.clone());
        let nth = instantiated(
            w,
            "nth",
            Atom::Float,
            vec![
                static_dim(w, node.bins.segs().first()).unwrap_or(ast::Ispace::Shape(w.shape(&node.bins))),
                ast::Ispace::Shape(w.shape(&node.cell)),
            ],
        );
        let of_bin = if_(
            field_of(v(&q), "v"),
            app(nth, vec![ct.clone(), field_of(v(&q), "b")]),
            zero.clone(),
        );
        let back = through(
            &step.for_state,
            field_of(v(&s), "l"),
            field_of(v(&s), "x"),
            field_of(v(&s), "c"),
        );
        let c_step = lambdas(
            w,
            &[(s.clone(), c_ty.clone()), (q.clone(), c_ty)],
            record_of(w, &c_fields, |f| match f {
                "c" => if_(field_of(v(&q), "e"), of_bin.clone(), back.clone()),
                f => field_of(v(&q), f),
            }),
        );
        let init = record_of(w, &c_fields, |f| match f {
            "e" => bool_(true),
            "v" => bool_(false),
            "b" => int(0),
            "c" => zero.clone(),
            _ => node.ne.clone(),
        });
        let along = record_of(w, &c_fields, |f| match f {
            "e" => node.last.clone(),
            "v" => node.valid.clone(),
            "b" => node.sidx.clone(),
            "l" => node.accs.clone(),
            _ => node.sxs.clone(),
        });
        let back_along = call("scan", vec![c_step, init, call("reverse", vec![along])]);
        let cs = call("reverse", vec![field_of(call("tail", vec![back_along]), "c")]);
        let cs = self.bind(cs);
        let (accs, sxs) = (node.accs.clone(), node.sxs.clone());
        if let Some(xs) = &node.xs_name {
            let c = self.bind(through(&step.for_item, accs.clone(), sxs.clone(), cs.clone()));
            let c = call("scatter", vec![zeros(w, node.xs.clone()), node.perm.clone(), c]);
            let c = self.bind(c);
            self.accumulate(xs, c, adjoints);
        }
        if let Some(ne) = &node.ne_name {
            let c = self.bind(through(&step.for_state, accs.clone(), sxs.clone(), cs.clone()));
            let at_first = call("select", vec![node.first.clone(), c, float(0.0)]);
            let at_first = self.sum_axes(at_first, &node.items, &node.cell, span)?;
            let unreached = call("select", vec![node.empty.clone(), ct.clone(), float(0.0)]);
            let unreached = self.sum_axes(unreached, &node.bins, &node.cell, span)?;
            let c = self.bind(call("f.+", vec![at_first, unreached]));
            self.accumulate(ne, c, adjoints);
        }
        for (k, (name, ty, _)) in step.closed.iter().enumerate() {
            let d = step.for_closed.get(k).cloned();
            let c = self.bind(through(&d, accs.clone(), sxs.clone(), cs.clone()));
            let c = self.sum_axes(c, &node.items, &ty.shape, span)?;
            let c = self.bind(c);
            self.accumulate(name, c, adjoints);
        }
        Ok(())
    }

    /// A `hist`'s arguments, primal and tangent, its static counts of bins
    /// and items, and its primal bound to a name.
    fn hist_args(
        &mut self,
        what: &str,
        e: &TExpr,
        spine: &[(&TExpr, &Lifted)],
        env: &Env,
    ) -> Result<HistArgs, Diagnostic> {
        let w = self.w;
        let (head, _) = e.spine();
        let bins = Shape::from_segs(e.ty.shape.segs().first().cloned().into_iter().collect());
        let cell = spine.get(1).map(|(_, l)| l.arg_cell.clone()).unwrap_or_default();
        // The other `hist`s, scans and gathers, instantiated in full
        // (inference could lift them over a frame instead), by functions
        // of cells.
        let items = spine.get(2).map(|(_, l)| l.arg_cell.clone()).unwrap_or_default();
        let (Some(m), Some(n)) = (
            static_dim(w, bins.segs().first()),
            static_dim(w, items.segs().first()),
        ) else {
            return Err(self.unsupported(e, &format!("{what} of an unknown count of bins")));
        };
        let mut ps = Vec::new();
        let mut ts = Vec::new();
        for (a, _) in spine.iter().skip(1) {
            let (p, t) = self.expr(a, env)?;
            ps.push(self.bind_named(p));
            ts.push(t);
        }
        let (Some(ne), Some(idx), Some(xs), Some((f, _))) = (
            ps.first().cloned(),
            ps.get(1).cloned(),
            ps.get(2).cloned(),
            spine.first(),
        ) else {
            return Err(self.unsupported(e, "`hist`"));
        };
        let out = self.bind(app(
            w.expr(head),
            vec![w.expr(f), ne.clone(), idx.clone(), xs.clone()],
        ));
        Ok(HistArgs {
            m,
            n,
            bins,
            cell,
            ne,
            idx,
            xs,
            dne: ts.first().cloned().flatten(),
            dxs: ts.get(2).cloned().flatten(),
            out,
        })
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
        let HistArgs {
            m,
            n,
            bins,
            cell,
            ne,
            idx,
            xs,
            dne,
            dxs,
            out,
        } = self.hist_args(&format!("`hist` by `{op}`"), e, spine, env)?;
        if dne.is_none() && dxs.is_none() {
            return Ok((out, None));
        }
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
        let node = HistNode::Op(Box::new(OpHist {
            xs_name: super::varying_name(&dxs, &xs),
            ne_name: super::varying_name(&dne, &ne),
            idx,
            nth: nth(Atom::Float),
            per_item,
            per_bin,
            bins,
            cell,
        }));
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
        match node {
            HistNode::Op(node) => self.op_hist_adjoint(node, ct, adjoints, span),
            HistNode::By(node) => self.hist_by_adjoint(node, ct, adjoints, span),
        }
    }

    fn op_hist_adjoint(
        &mut self,
        node: &OpHist,
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

//! `unbox` under differentiation: of a box that does not depend on the
//! parameter (`(range n)`…), whose body reads values that do (Float
//! arrays, records of them); and of `(filter mask xs)`, `(take* n xs)`
//! and `(drop* n xs)` with `xs` Floats that do (the mask and the count
//! constant: Bool and Int). The result's shape may not be the witness.
//!
//! The body is differentiated inside the unbox, where its witness is in
//! scope. Forward mode unboxes a record of the primal and the tangent
//! (`filter` of a record of the items and their tangents: the same items
//! kept; `take*` and `drop*` alike). Reverse mode, as for `if`, keeps the body's forward code and runs
//! it again in the adjoint, inside the unbox again, returning a record of
//! the adjoints of the varying variables the body reads; a filtered item's
//! adjoint goes back to its place by a scatter (the places filtered
//! beside the items).

use super::{
    Branch, Env, Fields, Mode, Node, Rule, Walk, call, field_of, float_record, head_name, let_in, record_of,
    var, varying_name, zeros,
};
use crate::typed::{TExpr, TExprKind};
use remora_syntax::Diagnostic;
use remora_syntax::ast::{self, ExprKind};
use remora_types::{Atom, Shape, Type};
use std::collections::{HashMap, HashSet};

pub(super) struct UnboxNode {
    witness: ast::IParam,
    /// The box unboxed (for `filter`, of records of item and place).
    boxed: ast::Expr,
    /// The name the unbox binds.
    var: String,
    /// Bindings at the top of the body (the items and places of a record).
    prelude: Vec<(String, ast::Expr)>,
    body: Branch,
    /// The varying variables the body reads, and their types.
    free: Vec<(String, Type)>,
    /// `filter` of varying items: their name and type, the unboxed items'
    /// name, and the places' name.
    filtered: Option<(String, Type, String, String)>,
}

impl Walk<'_, '_> {
    pub(super) fn unbox(
        &mut self,
        e: &TExpr,
        env: &Env,
    ) -> Result<(ast::Expr, Option<ast::Expr>), Diagnostic> {
        let TExprKind::Unbox {
            witness: escapes,
            binder,
            var: v,
            boxed,
            body,
        } = &e.kind
        else {
            return Err(self.unsupported(e, "this expression"));
        };
        // (The derivative code names the result's type outside the unbox.)
        if e.ty.mentions(*escapes) || e.ty.mentions(*binder) {
            return Err(self.unsupported(e, "`unbox` whose result's shape is its box's witness"));
        }
        let w = self.w;
        let witness = w.iparam(*binder);
        // A `filter` (`take*`, `drop*`) of varying Float items: the
        // function, its mask (count) and the items.
        let mut filtered = None;
        if Self::varying(boxed, env) {
            let (head, spine) = boxed.spine();
            let (Some(keep @ ("filter" | "take*" | "drop*")), [(mask, _), (xs, xl)]) =
                (head_name(head), spine.as_slice())
            else {
                return Err(self.unsupported(
                    e,
                    "`unbox` of a box that depends on the parameter, but `filter`'s, `take*`'s or `drop*`'s",
                ));
            };
            if xs.ty.atom != Atom::Float || !xl.principal.is_scalar() {
                return Err(self.unsupported(
                    e,
                    &format!("`unbox` of a `{keep}` lifted, or of items that are not Floats"),
                ));
            }
            filtered = Some((keep, *mask, *xs));
        }
        let result = &e.ty;
        let mut inner = env.clone();
        let v_name = self.rename(*v);
        let r = w.ad.fresh();
        let mut prelude = Vec::new();
        let boxed_code;
        let mut filter_info = None;
        if let Some((keep, mask, xs)) = filtered {
            let (p, t) = self.expr(xs, env)?;
            let p = if matches!(p.kind, ExprKind::Var(_)) {
                p
            } else {
                self.bind(p)
            };
            let cell = Shape::from_segs(xs.ty.shape.segs().get(1..).unwrap_or_default().to_vec());
            let float_cell = Type {
                atom: Atom::Float,
                shape: cell,
            };
            let mask_code = w.expr(mask);
            let dt = w.ad.fresh();
            if self.mode == Mode::Forward {
                let pair: Fields = vec![("p".into(), float_cell.clone()), ("t".into(), float_cell)];
                let t = t.unwrap_or_else(|| zeros(w, p.clone()));
                let rec = record_of(w, &pair, |f| if f == "p" { p.clone() } else { t.clone() });
                boxed_code = call(keep, vec![mask_code, rec]);
                prelude.push((v_name.clone(), field_of(var(&r), "p")));
                prelude.push((dt.clone(), field_of(var(&r), "t")));
            } else {
                let int = Type::scalar(Atom::Int);
                let pair: Fields = vec![("p".into(), float_cell), ("place".into(), int)];
                let Some(first) = super::static_dim(w, xs.ty.shape.segs().first()) else {
                    return Err(
                        self.unsupported(e, &format!("`unbox` of a `{keep}` of an array of unknown rank"))
                    );
                };
                let places = ast::Expr {
                    kind: ExprKind::IApp {
                        func: Box::new(var("iota/static")),
                        arg: ast::Ispace::Shape(ast::Shape {
                            kind: ast::ShapeKind::Splice(vec![first]),
                            span: crate::elaborate::sp(),
                        }),
                    },
                    span: crate::elaborate::sp(),
                };
                let rec = record_of(w, &pair, |f| if f == "p" { p.clone() } else { places.clone() });
                boxed_code = call(keep, vec![mask_code, rec]);
                let place_name = w.ad.fresh();
                prelude.push((v_name.clone(), field_of(var(&r), "p")));
                prelude.push((place_name.clone(), field_of(var(&r), "place")));
                if let Some(xs_name) = varying_name(&t, &p) {
                    filter_info = Some((xs_name, xs.ty.clone(), v_name.clone(), place_name));
                }
            }
            inner.insert(*v, Some(dt));
        } else {
            boxed_code = w.expr(boxed);
            prelude.push((v_name.clone(), var(&r)));
            inner.insert(*v, None);
        }
        let unboxed = |body: ast::Expr| ast::Expr {
            kind: ExprKind::Unbox {
                witness: witness.clone(),
                var: super::ident(&r),
                boxed: Box::new(boxed_code.clone()),
                body: Box::new(body),
            },
            span: crate::elaborate::sp(),
        };
        if self.mode == Mode::Forward {
            let saved = std::mem::take(&mut self.binds);
            let (p, t) = self.expr(body, &inner)?;
            let t = t.unwrap_or_else(|| zeros(w, p.clone()));
            let mut binds = std::mem::replace(&mut self.binds, saved);
            binds.splice(0..0, prelude);
            let pair: Fields = vec![("p".into(), result.clone()), ("t".into(), result.clone())];
            let rec = record_of(w, &pair, |f| if f == "p" { p.clone() } else { t.clone() });
            let res = self.bind(unboxed(let_in(binds, rec)));
            let out = self.bind(field_of(res.clone(), "p"));
            let t = self.bind(field_of(res, "t"));
            return Ok((out, Some(t)));
        }
        // Reverse: the body's forward code, kept to run again.
        let mut free = Vec::new();
        let mut seen = HashSet::new();
        body.any(&mut |x| {
            if let TExprKind::Var(u) = &x.kind
                && *u != *v
                && matches!(env.get(u), Some(Some(_)))
                && seen.insert(*u)
            {
                free.push((w.var(*u).name, x.ty.clone()));
            }
            false
        });
        if free
            .iter()
            .any(|(_, t)| t.atom != Atom::Float && float_record(&t.atom).is_none())
        {
            return Err(self.unsupported(e, "`unbox` whose body reads a varying value that is not Float"));
        }
        let mut sub = Walk::new(w, self.mode);
        sub.records = self.records.clone();
        let (p, t) = sub.expr(body, &inner)?;
        sub.restore();
        // The records the body bound (fresh names), for its adjoint.
        self.records.extend(sub.records.clone());
        let out = varying_name(&t, &p);
        let mut all = prelude.clone();
        all.extend(sub.binds.clone());
        let res = self.bind(unboxed(let_in(all, p)));
        let res_name = match &res.kind {
            ExprKind::Var(x) => x.name.clone(),
            _ => String::new(),
        };
        self.nodes.push(Node {
            out: res_name,
            rule: Rule::Unbox(Box::new(UnboxNode {
                witness,
                boxed: boxed_code,
                var: r,
                prelude,
                body: Branch {
                    binds: sub.binds,
                    nodes: sub.nodes,
                    out,
                },
                free,
                filtered: filter_info,
            })),
            head: var("∂unbox"),
            args: Vec::new(),
            principal: Shape::scalar(),
            result_cell: Shape::scalar(),
            span: e.span,
        });
        Ok((res, Some(var("∂unused"))))
    }

    /// The adjoints of an `unbox`: the body's forward code and adjoints run
    /// inside the unbox again, giving a record of the adjoints of the
    /// varying variables it reads (and of the filtered items).
    pub(super) fn unbox_adjoint(
        &mut self,
        node: &UnboxNode,
        ct: &ast::Expr,
        adjoints: &mut HashMap<String, String>,
    ) -> Result<(), Diagnostic> {
        let w = self.w;
        let mut sub = Walk::new(w, Mode::Reverse);
        sub.binds = node.prelude.clone();
        sub.binds.extend(node.body.binds.clone());
        sub.records = self.records.clone();
        let mut inner: HashMap<String, String> = HashMap::new();
        if let (Some(out), ExprKind::Var(c)) = (&node.body.out, &ct.kind) {
            inner.insert(out.clone(), c.name.clone());
        }
        for n in node.body.nodes.iter().rev() {
            sub.adjoint(n, &mut inner)?;
        }
        // One field per variable (per field of a record: `a{k}_{field}`).
        let mut fields: Fields = Vec::new();
        let mut values = Vec::new();
        for (k, (name, ty)) in node.free.iter().enumerate() {
            let adjoint = match sub.read_adjoint(name, &mut inner) {
                Some(a) => a,
                None => sub.zeros_of(name),
            };
            match float_record(&ty.atom) {
                Some(record) => {
                    let adjoint = sub.bind(adjoint);
                    for (f, fty) in record {
                        fields.push((format!("a{k}_{f}"), fty.lift(&ty.shape)));
                        values.push(field_of(adjoint.clone(), &f));
                    }
                }
                None => {
                    fields.push((format!("a{k}"), ty.clone()));
                    values.push(adjoint);
                }
            }
        }
        if let Some((xs, ty, items, places)) = &node.filtered {
            fields.push(("items".into(), ty.clone()));
            let ct_items = match sub.read_adjoint(items, &mut inner) {
                Some(a) => a,
                None => zeros(w, var(items)),
            };
            values.push(call("scatter", vec![zeros(w, var(xs)), var(places), ct_items]));
        }
        if fields.is_empty() {
            return Ok(());
        }
        let mut values = values.into_iter();
        let rec = record_of(w, &fields, |_| values.next().unwrap_or_else(|| var("undefined")));
        let code = ast::Expr {
            kind: ExprKind::Unbox {
                witness: node.witness.clone(),
                var: super::ident(&node.var),
                boxed: Box::new(node.boxed.clone()),
                body: Box::new(let_in(sub.binds, rec)),
            },
            span: crate::elaborate::sp(),
        };
        let res = self.bind(code);
        for (k, (name, ty)) in node.free.iter().enumerate() {
            let c = match float_record(&ty.atom) {
                Some(record) => record_of(w, &record, |f| field_of(res.clone(), &format!("a{k}_{f}"))),
                None => field_of(res.clone(), &format!("a{k}")),
            };
            let c = self.bind(c);
            self.accumulate(name, c, adjoints);
        }
        if let Some((xs, ..)) = &node.filtered {
            let c = self.bind(field_of(res, "items"));
            self.accumulate(xs, c, adjoints);
        }
        Ok(())
    }
}

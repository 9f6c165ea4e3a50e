//! `(outer f a b)` under differentiation: `f` applied over the frame
//! `[m n]` to `a`'s items replicated along `n` and `b`'s along `m`, so its
//! derivative is `f`'s lifted the same way. Forward mode applies `f`'s
//! forward derivative over `[m n]`; reverse mode its reverse derivatives,
//! each item's cotangent summed over the other axis (`a`'s over `n`,
//! `b`'s over `m`, a variable `f` closes over over both). `f` is a lambda,
//! a name bound to one, or a scalar primitive; lifted over a frame,
//! `outer` is differentiated on cells and lifted (`lifted_on_cells`).

use super::loops::Step;
use super::{Env, Mode, Node, Rule, Walk, app, head_name, lift, node, static_dim, var, varying_name, zeros};
use crate::typed::TExpr;
use remora_syntax::ast::{self, ExprKind};
use remora_syntax::{Diagnostic, Span};
use remora_types::{Atom, Lifted, Shape, Type};
use std::collections::HashMap;

/// An `outer`, as reverse mode needs it.
pub(super) struct OuterNode {
    a: ast::Expr,
    /// `b` replicated along `m`: `[m n @s2]`.
    b_rows: ast::Expr,
    a_name: Option<String>,
    b_name: Option<String>,
    step: Step,
    /// The frame `[m n]` and its axes, and the cells of `a` and `b`.
    m: Shape,
    n: Shape,
    a_cell: Shape,
    b_cell: Shape,
}

/// `name` instantiated at Float and the shapes `shapes`.
fn instantiated(w: &super::Writer, name: &str, shapes: &[&Shape]) -> ast::Expr {
    let t = node(ExprKind::TApp {
        func: Box::new(var(name)),
        arg: w.ty(&Type::scalar(Atom::Float)),
    });
    shapes.iter().fold(t, |f, s| {
        node(ExprKind::IApp {
            func: Box::new(f),
            arg: ast::Ispace::Shape(w.shape(s)),
        })
    })
}

impl Walk<'_, '_> {
    /// `e` as an `outer` (`None`: another form).
    #[allow(clippy::type_complexity)]
    pub(super) fn outer_form(
        &mut self,
        name: &str,
        e: &TExpr,
        spine: &[(&TExpr, &Lifted)],
        env: &Env,
    ) -> Option<Result<(ast::Expr, Option<ast::Expr>), Diagnostic>> {
        if name != "outer" || spine.len() != 3 {
            return None;
        }
        if spine.iter().any(|(_, l)| !l.principal.is_scalar()) {
            return Some(self.lifted_on_cells("`outer`", e, spine, env));
        }
        Some(self.outer(e, spine, env))
    }

    #[allow(clippy::type_complexity)]
    fn outer(
        &mut self,
        e: &TExpr,
        spine: &[(&TExpr, &Lifted)],
        env: &Env,
    ) -> Result<(ast::Expr, Option<ast::Expr>), Diagnostic> {
        let w = self.w;
        let what = "`outer`";
        let (Some((fe, _)), Some((a, la)), Some((b, lb))) = (spine.first(), spine.get(1), spine.get(2))
        else {
            return Err(self.unsupported(e, what));
        };
        if [&e.ty.atom, &a.ty.atom, &b.ty.atom]
            .iter()
            .any(|t| **t != Atom::Float)
        {
            return Err(self.unsupported(e, &format!("{what} of arrays that are not Float")));
        }
        let split = |cell: &Shape| {
            let segs = cell.segs();
            (
                Shape::from_segs(segs.first().cloned().into_iter().collect()),
                Shape::from_segs(segs.get(1..).unwrap_or_default().to_vec()),
            )
        };
        let ((m, a_cell), (n, b_cell)) = (split(&la.arg_cell), split(&lb.arg_cell));
        if static_dim(w, m.segs().first()).is_none() || static_dim(w, n.segs().first()).is_none() {
            return Err(self.unsupported(e, &format!("{what} of arrays of unknown rank")));
        }
        let result = Type {
            atom: Atom::Float,
            shape: Shape::from_segs(e.ty.shape.segs().get(2..).unwrap_or_default().to_vec()),
        };
        let (pa, ta) = self.expr(a, env)?;
        let (pb, tb) = self.expr(b, env)?;
        let (pa, pb) = (self.bind_named(pa), self.bind_named(pb));
        let float = |shape: &Shape| Type {
            atom: Atom::Float,
            shape: shape.clone(),
        };
        let b_varying = tb.is_some();
        let step = match head_name(fe) {
            Some(op @ ("f.+" | "f.-" | "f.*" | "f./" | "f.max" | "f.min"))
                if a_cell == b_cell && result.shape == a_cell =>
            {
                self.op_step(op, result.clone(), b_varying, false)
            }
            // (The step's "state" is `a`'s item; its cotangent is typed as
            // the result, which `lambda_step` takes as the state's type.)
            _ => self.lambda_step(
                fe,
                result.clone(),
                Some(float(&b_cell)),
                b_varying,
                false,
                env,
                e,
                what,
            )?,
        };
        if step.closed.iter().any(|(_, t, _)| t.atom != Atom::Float) {
            return Err(self.unsupported(
                e,
                &format!("{what} by a function that closes over a varying record"),
            ));
        }
        let out = self.bind(app(w.expr(e.spine().0), vec![w.expr(fe), pa.clone(), pb.clone()]));
        if ta.is_none() && tb.is_none() && step.closed.is_empty() {
            return Ok((out, None));
        }
        // `b`'s items replicated along `m`: with `a`'s frame `[m]` a prefix
        // of `[m n]`, the derivatives lift over the frame of pairs.
        let rows = |x: ast::Expr| app(instantiated(w, "replicate", &[&m, &lb.arg_cell]), vec![x]);
        let b_rows = self.bind(rows(pb.clone()));
        let closed: Vec<ast::Expr> = step.closed.iter().map(|(c, _, _)| var(c)).collect();
        if self.mode == Mode::Forward {
            let mut at = vec![pa.clone(), b_rows];
            at.extend(closed);
            at.push(ta.unwrap_or_else(|| zeros(w, pa.clone())));
            if let Some(tb) = tb {
                at.push(rows(tb));
            }
            at.extend(step.closed.iter().map(|(_, _, dc)| var(dc)));
            let d = step.forward.clone().unwrap_or_else(|| var("undefined"));
            let t = self.bind(app(d, at));
            return Ok((out, Some(t)));
        }
        let out_name = match &out.kind {
            ExprKind::Var(o) => o.name.clone(),
            _ => String::new(),
        };
        let node = OuterNode {
            a_name: varying_name(&ta, &pa),
            b_name: varying_name(&tb, &pb),
            a: pa,
            b_rows,
            step,
            m,
            n,
            a_cell,
            b_cell,
        };
        self.nodes.push(Node {
            out: out_name,
            rule: Rule::Outer(Box::new(node)),
            head: var("∂outer"),
            args: Vec::new(),
            principal: Shape::scalar(),
            result_cell: Shape::scalar(),
            span: e.span,
        });
        Ok((out, Some(var("∂unused"))))
    }

    /// The adjoints of an `outer`: `f`'s reverse derivatives over the frame
    /// of pairs, `a`'s summed over `n` (in each row), `b`'s over `m`, a
    /// closed variable's over both.
    pub(super) fn outer_adjoint(
        &mut self,
        node: &OuterNode,
        ct: &ast::Expr,
        adjoints: &mut HashMap<String, String>,
        span: Span,
    ) -> Result<(), Diagnostic> {
        let w = self.w;
        let step = &node.step;
        let through = |d: &Option<ast::Expr>| {
            let mut at = vec![node.a.clone(), node.b_rows.clone()];
            at.extend(step.closed.iter().map(|(c, _, _)| var(c)));
            at.push(ct.clone());
            app(d.clone().unwrap_or_else(|| var("undefined")), at)
        };
        if let Some(a) = &node.a_name {
            let c = self.bind(through(&step.for_state));
            // Each row's sum over `n`: a function of rows lifted over `m`.
            let row = Type {
                atom: Atom::Float,
                shape: node.n.concat(&node.a_cell),
            };
            let mut failed = None;
            let sum = lift(w, vec![(c, row)], |v| {
                let x = v.first().cloned().unwrap_or_else(|| var("undefined"));
                self.sum_axes(x.clone(), &node.n, &node.a_cell, span)
                    .unwrap_or_else(|d| {
                        failed = Some(d);
                        x
                    })
            });
            if let Some(d) = failed {
                return Err(d);
            }
            let c = self.bind(sum);
            self.accumulate(a, c, adjoints);
        }
        if let Some(b) = &node.b_name {
            let c = self.bind(through(&step.for_item));
            let c = self.sum_axes(c, &node.m, &node.n.concat(&node.b_cell), span)?;
            let c = self.bind(c);
            self.accumulate(b, c, adjoints);
        }
        let pairs = node.m.concat(&node.n);
        for (k, (name, ty, _)) in step.closed.iter().enumerate() {
            let c = self.bind(through(&step.for_closed.get(k).cloned()));
            let c = self.sum_axes(c, &pairs, &ty.shape, span)?;
            let c = self.bind(c);
            self.accumulate(name, c, adjoints);
        }
        Ok(())
    }
}

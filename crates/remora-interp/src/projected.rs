//! A selection of each state of a loop, `(g (iscan op xs))` with `g` a
//! lambda that only picks parts of its one parameter (`(fn ((p [Float
//! 2])) (index p 1))`, a field, a frame of such parts): the loop's cell
//! program (`cellprog.rs`) keeps just the parts `g` picks, and a state
//! register nothing kept reads, in a loop whose recurrences read only
//! their own state, is never stepped (dead-state elimination, as
//! Futhark drops a scan's unused results). The offset of an affine scan
//! is kept without the product of its decays, which (0.9 · 0.9 · …)
//! sinks to the smallest subnormal and stays there, each multiplication
//! a hundred cycles.
//!
//! The result is the same array `g` lifted over the loop's result makes:
//! the kept parts are the state's registers' bits. Whenever the cell
//! program gives up, the loop and `g` run as written on the arguments
//! already evaluated.

use crate::batch::{Batched, Try, lambda_params, pure};
use crate::eval::{Env, Fun, Interpreter, Run, Value};
use crate::mapped::intrinsic;
use remora_check::typed::{TAtomKind, TExpr, TExprKind, VarId};
use remora_types::Lifted;
use remora_value::{Atom, Data};

/// Whether `e` only picks parts of `p`: `p`, a field of such a part, an
/// item of one at a literal index (`index`, `nth`, `head`, `last`), or a
/// frame of such parts. (A quick test: the cell program decides.)
fn selects(e: &TExpr, p: VarId) -> bool {
    match &e.kind {
        TExprKind::Var(v) => *v == p,
        TExprKind::Field { record, .. } => selects(record, p),
        TExprKind::Frame { elems, .. } => !elems.is_empty() && elems.iter().all(|x| selects(x, p)),
        TExprKind::App { .. } => {
            let (head, spine) = e.spine();
            matches!(intrinsic(head), Some("index" | "nth" | "head" | "last"))
                && spine.iter().any(|(a, _)| selects(a, p))
                && spine.iter().all(|(a, _)| {
                    selects(a, p)
                        || matches!(&a.kind, TExprKind::Array { atoms, .. }
                            if atoms.iter().all(|x| matches!(x.kind, TAtomKind::Int(_))))
                })
        }
        _ => false,
    }
}

/// The one lambda of one parameter a value holds, when its body only
/// selects parts of the parameter and reads nothing of a batch.
pub(crate) fn selection<'p>(v: &Data<Fun<'p>>, shape: &[usize], offset: usize) -> Option<Fun<'p>> {
    let Data::Atoms(atoms) = v else {
        return None;
    };
    match atoms.get(offset)? {
        Atom::Fun(f @ Fun::Lambda { param, body, .. })
            if shape.is_empty() && lambda_params(body) == 0 && selects(body, *param) && !f.reads_batch() =>
        {
            Some(f.clone())
        }
        _ => None,
    }
}

/// `(g LOOP)`: `g`'s expression and `LOOP`'s intrinsic and arguments
/// (with their liftings), when `LOOP` is a `fold`, `scan`, `iscan` or
/// `reduce` applied in full and `g` costs nothing to evaluate.
#[allow(clippy::type_complexity)]
fn loop_selected(e: &TExpr) -> Option<(&TExpr, &TExpr, &'static str, &TExpr, Vec<(&TExpr, &Lifted)>)> {
    let TExprKind::App { func, arg, .. } = &e.kind else {
        return None;
    };
    if !pure(func) || !matches!(func.kind, TExprKind::Var(_) | TExprKind::Array { .. }) {
        return None;
    }
    // (The head first, with nothing made: this is asked of every
    // application `eval` meets.)
    let mut head = &**arg;
    while let TExprKind::App { func, .. } = &head.kind {
        head = func;
    }
    let name @ ("fold" | "scan" | "iscan" | "reduce") = intrinsic(head)? else {
        return None;
    };
    let (head, spine) = arg.spine();
    let seeded = matches!(name, "fold" | "scan");
    (spine.len() == 2 + usize::from(seeded) && pure(spine[0].0)).then_some((func, arg, name, head, spine))
}

impl<'p> Interpreter {
    /// The loop `name` over `args` (its batched rule's arguments) by a
    /// lambda that is not a scalar primitive, keeping the parts `g`
    /// selects of each state; `None` when its cell program gives up.
    fn loop_projected(
        &mut self,
        name: &str,
        args: &[(Batched<'p>, Vec<usize>)],
        g: &Fun<'p>,
    ) -> Try<Batched<'p>> {
        let op = &args.first()?.0;
        if op.nb != 0 || !op.v.shape.is_empty() {
            return None;
        }
        // (`reduce` by an η-expanded scalar primitive folds in its own order.)
        if crate::intrinsics::scalar_operator(&op.densify()?.v).is_some() {
            return None;
        }
        let (seed, (xs, xcell)) = match name {
            "reduce" | "iscan" => (None, args.get(1)?),
            _ => (Some(args.get(1)?), args.get(2)?),
        };
        self.fold_by_cell_program(name, op, seed, xs, xcell, Some(g))
    }

    /// `(g LOOP)` inside a batch (see the module comment); `None` when `e`
    /// is not one (nothing evaluated that matters), else the batched
    /// value (`Some(None)`: the batch gives up, as `spine_batched` would).
    pub(crate) fn projected_batched(&mut self, e: &'p TExpr, env: &Env<'p>) -> Option<Try<Batched<'p>>> {
        let (func, arg, name, head, spine) = loop_selected(e)?;
        let TExprKind::App { lifted, .. } = &e.kind else {
            return None;
        };
        let g_val = self.eval_batched(func, env)?;
        let g = selection(&g_val.v.data, &g_val.v.shape, g_val.offset).filter(|_| g_val.nb == 0)?;
        let op = self.eval_batched(spine[0].0, env)?;
        if op.nb != 0 || crate::intrinsics::scalar_operator(&op.densify()?.v).is_some() {
            return None;
        }
        Some(self.projected_batched_by(&g_val, &g, arg, name, head, &spine, lifted, env))
    }

    #[allow(clippy::too_many_arguments)]
    fn projected_batched_by(
        &mut self,
        g_val: &Batched<'p>,
        g: &Fun<'p>,
        arg: &'p TExpr,
        name: &str,
        head: &'p TExpr,
        spine: &[(&'p TExpr, &'p Lifted)],
        lifted: &'p Lifted,
        env: &Env<'p>,
    ) -> Try<Batched<'p>> {
        let f = self.eval_batched(head, env)?;
        let mut args = Vec::with_capacity(spine.len());
        for (a, l) in spine {
            let v = self.eval_batched(a, env)?;
            let cell = self.shape_of(&l.arg_cell, env, a.span).ok()?;
            args.push((v, cell));
        }
        self.at = arg.span;
        if let Some(r) = self.loop_projected(name, &args, g) {
            return Some(r);
        }
        // As written: the loop, then the selection lifted over its states.
        let states = self.apply_batched(&f, args)?;
        let cell = self.shape_of(&lifted.arg_cell, env, arg.span).ok()?;
        self.apply_batched(g_val, vec![(states, cell)])
    }

    /// `(g LOOP)` at the top level (see the module comment), `LOOP`'s
    /// arguments costing nothing to evaluate again (or its items a map of
    /// such, `mapped.rs`): its value, `Ok(None)` when it is not one or
    /// the cell program gave up, with nothing observable evaluated.
    pub(crate) fn projected(&mut self, e: &'p TExpr, env: &Env<'p>) -> Run<Option<Value<'p>>> {
        if self.reference_only || self.fuel.is_some() {
            return Ok(None);
        }
        let Some((func, arg, name, _, spine)) = loop_selected(e) else {
            return Ok(None);
        };
        let g_val = self.eval(func, env)?;
        let Some(g) = selection(&g_val.data, &g_val.shape, 0) else {
            return Ok(None);
        };
        if let Some(v) = self.scan_of_map_projected(arg, &g, env)? {
            return Ok(Some(v));
        }
        if spine.iter().any(|(a, _)| !crate::mapped::plain(a)) {
            return Ok(None);
        }
        for (_, lifted) in &spine {
            if !self.shape_of(&lifted.arg_frame, env, e.span)?.is_empty() {
                return Ok(None);
            }
        }
        let mut args = Vec::with_capacity(spine.len());
        for (a, l) in &spine {
            let v = self.eval_view(a, env)?;
            let cell = self.shape_of(&l.arg_cell, env, a.span)?;
            args.push((v, cell));
        }
        let saved = std::mem::take(&mut self.batch);
        self.at = arg.span;
        let r = self.loop_projected(name, &args, &g);
        self.batch = saved;
        Ok(r.filter(|r| r.nb == 0).and_then(|r| r.densify()).map(|r| r.v))
    }
}

//! A reduction of a lifted application, its items made a block at a time:
//! `(reduce op (f a1 … ak))` with `f` a lambda applied over a frame and
//! `op` a scalar primitive. As written, the application's result — every
//! item, say the `[n m p]` outer products of a matrix product written as
//! their sum — is built whole and then reduced; here the lambda runs on a
//! block of items at a time (the arguments' items read in place) and each
//! block is folded into the result at once, so no more than a block of
//! items (about `BLOCK_ATOMS` atoms, or one item) is ever held.
//!
//! The blocks follow `reduce`'s order, so the bits are the same: for
//! `f.+` (`kernel::Order::Tree`) every block is a whole subtree of the
//! tree (which splits a run of items in halves down to runs of
//! `PAIRWISE_LEAF`, folded left to right; a run too large for one block
//! is folded left to right a block at a time), for the other operators
//! the fold runs left to right over the blocks. Errors are the reference
//! path's: the blocks go in order of the items, and within a block the
//! lambda's batched application falls back to the reference path.

use crate::batch::Batched;
use crate::eval::{Env, Fun, Interpreter, Run, Value, atoms_in};
use crate::kernel::{Order, PAIRWISE_LEAF};
use remora_check::typed::{TExpr, TExprKind};
use remora_syntax::Span;
use remora_value::{Atom, Data};

/// A block of items holds about this many atoms (at least one item).
const BLOCK_ATOMS: usize = 1 << 20;

/// How the items go: the operator, the items per block (once the first
/// has been made), and each item's shape.
struct Stream<'o> {
    op: &'o str,
    per_block: Option<usize>,
    cell_shape: Vec<usize>,
}

/// The lambda, its arguments (each with its cell), and what the reference
/// path needs to apply it one argument at a time.
struct Application<'p, 'e> {
    f: Value<'p>,
    fun: Fun<'p>,
    args: Vec<(Batched<'p>, Vec<usize>)>,
    /// Each argument's own frame: empty, or starting with the items axis.
    framed: Vec<bool>,
    apps: Vec<&'p TExpr>,
    env: &'e Env<'p>,
}

impl<'p> Interpreter {
    /// `e` (an application of an intrinsic, at the top level) reduced a
    /// block of items at a time, when it is `(reduce op (f a1 … ak))` of
    /// that form; `Ok(None)` otherwise, with nothing but `op` and `f`
    /// evaluated.
    pub(crate) fn reduce_streamed(&mut self, e: &'p TExpr, env: &Env<'p>) -> Run<Option<Value<'p>>> {
        let (head, spine) = e.spine();
        let mut name = head;
        while let TExprKind::TApp { func, .. } | TExprKind::IApp { func, .. } = &name.kind {
            name = func;
        }
        let (TExprKind::Intrinsic("reduce"), [(op, _), (arg, lifted)]) = (&name.kind, spine.as_slice())
        else {
            return Ok(None);
        };
        if !self.shape_of(&lifted.arg_frame, env, e.span)?.is_empty() {
            return Ok(None);
        }
        // The application `(f a1 … ak)` of a lambda.
        let mut apps = Vec::new();
        let mut f_expr: &'p TExpr = arg;
        while let TExprKind::App { func, .. } = &f_expr.kind {
            apps.push(f_expr);
            f_expr = func;
        }
        apps.reverse();
        if apps.is_empty() || !crate::batch::pure(f_expr) {
            return Ok(None);
        }
        let op = self.eval(op, env)?;
        let Some(op) = crate::intrinsics::scalar_operator(&op) else {
            return Ok(None);
        };
        let f = self.eval(f_expr, env)?;
        let fun = match &f.data {
            Data::Atoms(atoms) if f.shape.is_empty() => match atoms.first() {
                Some(Atom::Fun(fun @ Fun::Lambda { body, .. }))
                    if crate::batch::lambda_params(body) + 1 >= apps.len() =>
                {
                    fun.clone()
                }
                _ => return Ok(None),
            },
            _ => return Ok(None),
        };
        let mut args = Vec::with_capacity(apps.len());
        for app in &apps {
            let TExprKind::App { arg, lifted, .. } = &app.kind else {
                return Ok(None);
            };
            let a = self.eval_view(arg, env)?;
            let cell = self.shape_of(&lifted.arg_cell, env, arg.span)?;
            args.push((a, cell));
        }
        // The items: the first axis of the principal frame.
        let frames: Vec<Vec<usize>> = args
            .iter()
            .map(|(a, cell)| {
                let frame = a.v.shape.len().saturating_sub(cell.len());
                a.v.shape.get(..frame).unwrap_or_default().to_vec()
            })
            .collect();
        let principal = frames.iter().max_by_key(|f| f.len()).cloned().unwrap_or_default();
        let items = principal.first().copied().unwrap_or(0);
        let app = Application {
            framed: frames.iter().map(|fr| !fr.is_empty()).collect(),
            f,
            fun,
            args,
            apps,
            env,
        };
        if items < 2
            || frames.iter().any(|fr| !principal.starts_with(fr))
            || app.args.iter().any(|(a, _)| a.nb != 0)
        {
            // As written (the arguments are already evaluated).
            let whole = self.block(&app, 0, items, e.span)?;
            return Ok(Some(self.reduce_written(&whole, e, env)?));
        }
        // The operator must fold the atoms the items hold (it folds some
        // kind of atom at all: the checker saw to the kind).
        let folds = [
            Data::Int(Vec::new().into()),
            Data::Float(Vec::new().into()),
            Data::Bool(Vec::new().into()),
        ]
        .iter()
        .any(|d| crate::intrinsics::fold_primitive(op, None, d, [0, 0, 0], Order::Left).is_some());
        if !folds {
            let whole = self.block(&app, 0, items, e.span)?;
            return Ok(Some(self.reduce_written(&whole, e, env)?));
        }
        let order = crate::intrinsics::fold_order("reduce", op);
        // (The block size is learnt from the first item made, which is
        // the first block: each item is made once, in order.)
        let mut stream = Stream {
            op,
            per_block: None,
            cell_shape: Vec::new(),
        };
        let data = match order {
            Order::Tree => self.subtree(&app, &mut stream, 0, items, e.span)?,
            _ => self.left(&app, &mut stream, 0, items, e.span)?,
        };
        Ok(Some(Value {
            shape: stream.cell_shape,
            data,
        }))
    }

    /// The reduction as written, of the application's whole result.
    fn reduce_written(&mut self, whole: &Value<'p>, e: &'p TExpr, env: &Env<'p>) -> Run<Value<'p>> {
        let (head, spine) = e.spine();
        let mut r = self.eval(head, env)?;
        let [(op, op_lifted), (_, lifted)] = spine.as_slice() else {
            return crate::eval::fail(e.span, "internal error: not a reduction");
        };
        let op_value = self.eval(op, env)?;
        let op_cell = self.shape_of(&op_lifted.arg_cell, env, op.span)?;
        let cell = self.shape_of(&lifted.arg_cell, env, e.span)?;
        let TExprKind::App { func, .. } = &e.kind else {
            return crate::eval::fail(e.span, "internal error: not a reduction");
        };
        r = self.apply(&r, op_value, &op_cell, &func.ty, env, func.span)?;
        self.apply(&r, whole.clone(), &cell, &e.ty, env, e.span)
    }

    /// The reduction of items `lo .. lo + len`, a subtree of `reduce`'s
    /// tree (`len ≥ 1`).
    fn subtree(
        &mut self,
        app: &Application<'p, '_>,
        stream: &mut Stream<'_>,
        lo: usize,
        len: usize,
        span: Span,
    ) -> Run<Data<Fun<'p>>> {
        if stream.per_block.is_some_and(|n| len <= n) {
            // One block: `reduce_axis` builds the same tree over it.
            return self.fold_block(app, stream, None, lo, len, Order::Tree, span);
        }
        if len <= PAIRWISE_LEAF {
            // A leaf, folded left to right a block at a time.
            return self.left(app, stream, lo, len, span);
        }
        let half = len / 2;
        let a = self.subtree(app, stream, lo, half, span)?;
        let b = self.subtree(app, stream, lo + half, len - half, span)?;
        let inner = atoms_in(&stream.cell_shape);
        combine(stream.op, &a, &b, inner, span)
    }

    /// Items `lo .. lo + len` folded left to right, a block at a time (the
    /// first item alone while the block size is not known yet).
    fn left(
        &mut self,
        app: &Application<'p, '_>,
        stream: &mut Stream<'_>,
        lo: usize,
        len: usize,
        span: Span,
    ) -> Run<Data<Fun<'p>>> {
        let mut acc: Option<Data<Fun<'p>>> = None;
        let mut at = lo;
        while at < lo + len {
            let n = stream.per_block.unwrap_or(1).min(lo + len - at);
            acc = Some(self.fold_block(app, stream, acc.as_ref(), at, n, Order::Left, span)?);
            at += n;
        }
        match acc {
            Some(acc) => Ok(acc),
            None => crate::eval::fail(span, "internal error: an empty run of items"),
        }
    }

    /// Items `lo .. lo + len` made and folded in `order` (onto `seed`).
    #[allow(clippy::too_many_arguments)]
    fn fold_block(
        &mut self,
        app: &Application<'p, '_>,
        stream: &mut Stream<'_>,
        seed: Option<&Data<Fun<'p>>>,
        lo: usize,
        len: usize,
        order: Order,
        span: Span,
    ) -> Run<Data<Fun<'p>>> {
        let block = self.block(app, lo, len, span)?;
        stream.cell_shape = block.shape.get(1..).unwrap_or_default().to_vec();
        let inner = atoms_in(&stream.cell_shape);
        if stream.per_block.is_none() {
            stream.per_block = Some((BLOCK_ATOMS / inner.max(1)).max(1));
        }
        match crate::intrinsics::fold_primitive(stream.op, seed, &block.data, [1, len, inner], order) {
            Some(Ok(d)) => Ok(d),
            Some(Err(m)) => crate::eval::fail(span, m),
            None => crate::eval::fail(span, "internal error: the operator does not fold the items"),
        }
    }

    /// The application's items `lo .. lo + len`: each framed argument's
    /// items read in place, the lambda applied batched (or on the
    /// reference path, one argument at a time, where batching gives up).
    fn block(&mut self, app: &Application<'p, '_>, lo: usize, len: usize, span: Span) -> Run<Value<'p>> {
        let args: Vec<(Batched<'p>, Vec<usize>)> = app
            .args
            .iter()
            .zip(&app.framed)
            .map(|((a, cell), &framed)| {
                if !framed {
                    return (a.clone(), cell.clone());
                }
                let mut shape = a.v.shape.clone();
                if let Some(first) = shape.first_mut() {
                    *first = len;
                }
                let step = a.strides.first().copied().unwrap_or(0);
                (
                    a.view(shape, 0, a.offset + lo * step, a.strides.clone()),
                    cell.clone(),
                )
            })
            .collect();
        if let Some(v) = self.apply_lambda_to_views(&app.fun, args.clone()) {
            return Ok(v);
        }
        crate::eval::check_starved(span)?;
        let mut f = app.f.clone();
        for ((a, cell), node) in args.into_iter().zip(&app.apps) {
            let a = match a.densify() {
                Some(a) => a.v,
                None => {
                    return crate::eval::fail(span, "internal error: an argument that cannot be laid out");
                }
            };
            f = self.apply(&f, a, &cell, &node.ty, app.env, node.span)?;
        }
        Ok(f)
    }
}

/// `a op b`, atom by atom (`inner` atoms each).
fn combine<'p>(
    op: &str,
    a: &Data<Fun<'p>>,
    b: &Data<Fun<'p>>,
    inner: usize,
    span: Span,
) -> Run<Data<Fun<'p>>> {
    match crate::intrinsics::fold_primitive(op, Some(a), b, [1, 1, inner], Order::Left) {
        Some(Ok(d)) => Ok(d),
        Some(Err(m)) => crate::eval::fail(span, m),
        None => crate::eval::fail(span, "internal error: the operator does not fold the items"),
    }
}

//! Batched application: a lambda lifted over a frame runs its body *once*,
//! over all its cells stacked, instead of once per cell (array-at-a-time, as
//! J and NumPy work; issue 4's performance plan).
//!
//! While a body runs batched, the interpreter holds a **batch frame**: the
//! principal frames of the enclosing batched applications, outermost first.
//! Every value inside is a [`Batched`]: an array whose first `nb` axes are
//! the first `nb` axes of the batch frame, followed by the value's own
//! shape (what the program sees). A value with fewer than all the batch axes
//! is the same along the rest; it is replicated by zero steps in the
//! kernels, not copied. Every primitive lifts over the batch frame as over
//! any other frame: a scalar primitive is one kernel over `batch ++ frame`,
//! a reduction by a scalar primitive one fold along the item axis, and a
//! lambda applied inside a batched body either runs on its cells directly
//! (no frame of its own) or opens a deeper batch level (its principal frame
//! appended to the batch frame).
//!
//! Anything batching does not cover — an unsupported form, an intrinsic
//! that would have to see each cell on its own, a function-valued result,
//! `trace`, or any run-time error — makes the batched evaluation give up,
//! and the application runs cell by cell as before. The per-cell path is the
//! reference; giving up costs time, never a different answer, and an error
//! is always reported as the per-cell evaluation reports it.

use crate::eval::{Binding, Env, Fun, Interpreter, Value, atoms_in, check_size};
use crate::gather::Pick;
use crate::intrinsics;
use crate::kernel::{self, Layout, row_major};
use crate::scalar;
use remora_check::typed::{TAtomKind, TExpr, TExprKind, VarId};
use remora_syntax::Span;
use remora_types::Atom as TyAtom;
use remora_value::{Array, Atom, Data};

/// A value in a batched evaluation: `v`'s first `nb` axes are the batch
/// frame's first `nb`; the rest of `v`'s shape is the value's own. Its
/// atoms lie in `v`'s buffer from `offset` at `strides` (row-major from 0
/// when dense; a zero step where it is replicated, so replication copies
/// nothing; an offset where it is an item or a slice of a larger array,
/// so selection copies nothing either).
#[derive(Clone, Debug)]
pub(crate) struct Batched<'p> {
    pub v: Value<'p>,
    pub nb: usize,
    pub offset: usize,
    pub strides: Vec<usize>,
}

impl<'p> Batched<'p> {
    pub fn plain(v: Value<'p>) -> Batched<'p> {
        Batched::dense(v, 0)
    }

    /// The same atoms laid out anew: `shape` (its first `nb` axes the
    /// batch's), read from `offset` by `strides`. A view: nothing copied.
    pub(crate) fn view(
        &self,
        shape: Vec<usize>,
        nb: usize,
        offset: usize,
        strides: Vec<usize>,
    ) -> Batched<'p> {
        Batched {
            v: Array {
                shape,
                data: self.v.data.clone(),
            },
            nb,
            offset,
            strides,
        }
    }

    pub(crate) fn dense(v: Value<'p>, nb: usize) -> Batched<'p> {
        let strides = row_major(&v.shape);
        Batched {
            v,
            nb,
            offset: 0,
            strides,
        }
    }

    /// The same value with its atoms in row-major order (copied out only
    /// when it was replicated).
    pub(crate) fn densify(&self) -> Try<Batched<'p>> {
        if self.is_dense() {
            return Some(self.clone());
        }
        let v = gather(&self.v, &self.v.shape, &self.layout())?;
        Some(Batched::dense(v, self.nb))
    }

    /// Whether its atoms are its whole buffer, in row-major order.
    pub(crate) fn is_dense(&self) -> bool {
        self.offset == 0
            && self.strides == row_major(&self.v.shape)
            && self.v.data.len() == atoms_in(&self.v.shape)
    }

    /// Its steps over `shape` (`[batch nb, frame up to outer, cell]`):
    /// zero along the axes it lacks, where it is replicated.
    pub(crate) fn steps_over(
        &self,
        cell: usize,
        nb: usize,
        outer: usize,
        shape: &[usize],
    ) -> Try<Vec<usize>> {
        if self.nb > nb {
            return None;
        }
        let own_frame = self.own().len().checked_sub(cell)?;
        let (batch_steps, rest) = self.strides.split_at_checked(self.nb)?;
        let (frame_steps, cell_steps) = rest.split_at_checked(own_frame)?;
        let mut strides = batch_steps.to_vec();
        strides.resize(nb, 0);
        strides.extend_from_slice(frame_steps);
        strides.resize(outer, 0);
        strides.extend_from_slice(cell_steps);
        let lacking = shape.len().checked_sub(strides.len())?;
        strides.extend(std::iter::repeat_n(0, lacking));
        Some(strides)
    }

    /// Where its atoms lie in its buffer.
    pub(crate) fn layout(&self) -> Layout {
        Layout {
            offset: self.offset,
            strides: self.strides.clone(),
        }
    }

    pub(crate) fn own(&self) -> &[usize] {
        self.v.shape.get(self.nb..).unwrap_or_default()
    }

    /// The value laid out densely over `shape`: `nb` batch axes, then its
    /// frame up to axis `outer`, then its cell (of `cell` axes); replicated
    /// (a zero step) along the batch, frame or cell axes it lacks.
    pub(crate) fn laid_over(&self, cell: usize, nb: usize, outer: usize, shape: &[usize]) -> Try<Value<'p>> {
        let strides = self.steps_over(cell, nb, outer, shape)?;
        if shape == self.v.shape.as_slice() && self.is_dense() {
            // Already laid out so: shared, not copied.
            return Some(self.v.clone());
        }
        gather(
            &self.v,
            shape,
            &Layout {
                offset: self.offset,
                strides,
            },
        )
    }
}

/// What a lambda's body makes inside a batch, taken back out to the
/// level of the application: the axes of the lambda's frame (batch axes
/// `outer .. depth`, the batch extended by them) become its own.
pub(crate) trait Lifts<'p>: Sized {
    fn outward(self, interp: &Interpreter, depth: usize, outer: usize) -> Try<Self>;
}

impl<'p> Lifts<'p> for Batched<'p> {
    fn outward(self, interp: &Interpreter, depth: usize, outer: usize) -> Try<Self> {
        let expanded = interp.expand(&self, depth)?;
        Some(Batched {
            nb: outer,
            ..expanded
        })
    }
}

/// How many positions of a frame a batched application runs at once (see
/// `apply_lambda_batched`).
pub(crate) const STRIP_CELLS: usize = 1 << 14;

/// Giving up on batching (the caller runs the cells one by one).
pub(crate) type Try<T> = Option<T>;

impl<'p> Interpreter {
    /// A lambda applied to arguments at once (their principal frame
    /// non-empty: the body runs once, batched; empty: the body runs on the
    /// arguments themselves); `None` when batching gives up.
    pub(crate) fn apply_lambda_batched(
        &mut self,
        fun: &Fun<'p>,
        args: Vec<(Value<'p>, Vec<usize>)>,
    ) -> Try<Value<'p>> {
        let args = args.into_iter().map(|(v, c)| (Batched::plain(v), c)).collect();
        self.apply_lambda_to_views(fun, args)
    }

    /// `apply_lambda_batched` on arguments that may be views (a `windows`
    /// or `transpose2d` passed straight to the lambda, read in place).
    pub(crate) fn apply_lambda_to_views(
        &mut self,
        fun: &Fun<'p>,
        args: Vec<(Batched<'p>, Vec<usize>)>,
    ) -> Try<Value<'p>> {
        if self.reference_only {
            return None;
        }
        // A closure made inside a batch holds one value per position of
        // that batch, which is not the frame it would be batched over here.
        // (Such a closure never leaves its batch, so outside every batch
        // there is no environment to search.)
        if self.batching > 0 && fun.reads_batch() {
            return None;
        }
        crate::eval::clear_starved();
        // Strip-mining: over a large frame, the body runs on runs of rows
        // of it in turn, so that its intermediate arrays (a cell's can be
        // far larger than the cell) stay the size of a run.
        let frames: Vec<&[usize]> = args
            .iter()
            .map(|(a, cell)| a.v.shape.get(..a.v.shape.len().checked_sub(cell.len())?))
            .collect::<Option<_>>()?;
        let principal: &[usize] = frames.iter().copied().max_by_key(|f| f.len()).unwrap_or_default();
        let positions = atoms_in(principal);
        if positions > 1
            && args
                .iter()
                .zip(&frames)
                .all(|((a, cell), frame)| frame.is_empty() || (atoms_in(cell) == 0 && a.v.data.is_empty()))
        {
            return self.apply_once_replicated(fun, &args, &frames, principal);
        }
        let rows = principal.first().copied().unwrap_or(0);
        let per_row: usize = principal.get(1..).unwrap_or_default().iter().product();
        let mut strip = if rows < 2 || rows.saturating_mul(per_row) <= STRIP_CELLS {
            rows
        } else {
            (STRIP_CELLS / per_row.max(1)).max(1)
        };
        // A strip whose intermediates are refused as too large is run again
        // as strips an eighth as long, down to single rows.
        crate::eval::take_refused();
        loop {
            let r = self.apply_in_strips(fun, &args, &frames, rows, strip);
            if r.is_some() || strip <= 1 || !crate::eval::take_refused() {
                return r;
            }
            strip = (strip / 8).max(1);
        }
    }

    /// A lambda over a frame whose cells are all empty (or not lifted at
    /// all): every cell is the same, so — a function being pure — the body
    /// runs once, on one cell, and its result is replicated over the frame
    /// (work in proportion to the atoms made, not to the frame's size).
    fn apply_once_replicated(
        &mut self,
        fun: &Fun<'p>,
        args: &[(Batched<'p>, Vec<usize>)],
        frames: &[&[usize]],
        principal: &[usize],
    ) -> Try<Value<'p>> {
        let one: Vec<(Batched<'p>, Vec<usize>)> = args
            .iter()
            .zip(frames)
            .map(|((a, cell), frame)| {
                if frame.is_empty() {
                    return (a.clone(), cell.clone());
                }
                let empty = Array {
                    shape: cell.clone(),
                    data: a.v.data.empty_like(),
                };
                (Batched::plain(empty), cell.clone())
            })
            .collect();
        let r = self.apply_lambda_batched_whole(fun, one)?;
        let positions = atoms_in(principal);
        check_size(positions.checked_mul(r.data.len())?, Span::default()).ok()?;
        let mut data = r.data.empty_like();
        if !r.data.is_empty() {
            for _ in 0..positions {
                data.append(r.data.clone()).ok()?;
            }
        }
        Some(Array {
            shape: principal.iter().chain(&r.shape).copied().collect(),
            data,
        })
    }

    /// `apply_lambda_batched` on runs of `strip` rows of the principal
    /// frame in turn (the whole frame at once when `strip` is all of it).
    fn apply_in_strips(
        &mut self,
        fun: &Fun<'p>,
        args: &[(Batched<'p>, Vec<usize>)],
        frames: &[&[usize]],
        rows: usize,
        strip: usize,
    ) -> Try<Value<'p>> {
        if strip >= rows {
            return self.apply_lambda_batched_whole(fun, args.to_vec());
        }
        let mut parts: Vec<Value<'p>> = Vec::with_capacity(rows.div_ceil(strip));
        for start in (0..rows).step_by(strip) {
            let len = strip.min(rows - start);
            let chunk = args
                .iter()
                .zip(frames)
                .map(|((a, cell), frame)| {
                    if frame.is_empty() {
                        return (a.clone(), cell.clone());
                    }
                    // The strip's rows: a view of the argument.
                    let mut strip = a.clone();
                    let step = strip.strides.first().copied().unwrap_or(0);
                    strip.offset += start * step;
                    if let Some(rows) = strip.v.shape.first_mut() {
                        *rows = len;
                    }
                    (strip, cell.clone())
                })
                .collect();
            let part = self.apply_lambda_batched_whole(fun, chunk)?;
            if parts.is_empty() {
                // The whole result must be allowed, however it is made: a
                // result too large is the reference path's error to
                // report, not something smaller strips would mend.
                let cell: usize = part.shape.get(1..)?.iter().product();
                if check_size(rows.saturating_mul(cell), Span::default()).is_err() {
                    crate::eval::take_refused();
                    return None;
                }
            }
            parts.push(part);
        }
        let rest: Vec<usize> = parts.first()?.shape.get(1..)?.to_vec();
        let atoms = rows.saturating_mul(rest.iter().product());
        let mut data = parts.first()?.data.with_capacity_like(atoms);
        for p in parts {
            if p.shape.get(1..)? != rest.as_slice() {
                return None;
            }
            data.append(p.data).ok()?;
        }
        Some(Array {
            shape: std::iter::once(rows).chain(rest).collect(),
            data,
        })
    }

    /// `apply_lambda_batched` over the whole frame at once.
    fn apply_lambda_batched_whole(
        &mut self,
        fun: &Fun<'p>,
        args: Vec<(Batched<'p>, Vec<usize>)>,
    ) -> Try<Value<'p>> {
        let saved = std::mem::take(&mut self.batch);
        self.batching += 1;
        let r = self.lambda_batched(fun, args);
        self.batching -= 1;
        self.batch = saved;
        // Only base values leave a batch: a closure made inside one may
        // hold batched variables.
        r.filter(|r| r.nb == 0 && !holds_atoms(&r.v.data))
            .and_then(|r| r.densify())
            .map(|r| r.v)
    }

    /// An intrinsic applied in full to whole arrays (each with its cell
    /// shape) outside any batch: its batched rule over their principal
    /// frame; `None` when it has none that applies (the caller then runs
    /// the reference path).
    pub(crate) fn apply_prim_framed(
        &mut self,
        p: &crate::eval::Prim<'p>,
        args: Vec<(Batched<'p>, Vec<usize>)>,
    ) -> Try<Value<'p>> {
        if self.reference_only {
            return None;
        }
        // (An allocation that failed in an earlier attempt, since
        // recovered from, is not this one's.)
        crate::eval::clear_starved();
        crate::eval::take_fault();
        if !crate::eval::admitted(args.iter().map(|(a, _)| a.v.data.len()).sum()) {
            return None;
        }
        let saved = std::mem::take(&mut self.batch);
        let follows = std::mem::replace(&mut self.plain_follows, std::ptr::from_ref(p) as usize);
        let r = self.prim_batched(p, args);
        self.plain_follows = follows;
        self.batch = saved;
        r.filter(|r| r.nb == 0).and_then(|r| r.densify()).map(|r| r.v)
    }

    /// `(((f a1) a2) … ak)` for a lambda `f` of at least `k` parameters,
    /// in ordinary evaluation: all the arguments at once over their
    /// principal frame, batched, instead of a frame of partial
    /// applications. `None` when `e` is not such a spine (nothing has then
    /// been evaluated that matters: the head is a variable or a literal).
    pub(crate) fn apply_spine(
        &mut self,
        e: &'p TExpr,
        env: &Env<'p>,
        chain: u64,
    ) -> crate::eval::Run<Option<Value<'p>>> {
        let mut spine = Vec::new();
        let mut head = e;
        while let TExprKind::App { func, arg, lifted } = &head.kind {
            spine.push((&**arg, lifted, head));
            head = func;
        }
        let pure_head = pure(head);
        if spine.is_empty() || !pure_head || self.reference_only {
            return Ok(None);
        }
        // One argument: only an intrinsic takes this path (a lambda of one
        // argument is batched by `apply`; evaluating its head here would
        // be done again by the caller).
        if spine.len() == 1 && !names_intrinsic(head) {
            return Ok(None);
        }
        spine.reverse();
        let f = self.eval(head, env)?;
        let fun = match &f.data {
            Data::Atoms(atoms) if f.shape.is_empty() => match atoms.first() {
                Some(Atom::Fun(fun @ Fun::Lambda { body, .. }))
                    if spine.len() >= 2 && lambda_params(body) + 1 >= spine.len() =>
                {
                    fun.clone()
                }
                Some(Atom::Fun(Fun::Prim(p))) if p.args.len() + spine.len() == p.sig.values => {
                    // A multiply-reduce: one pass, no product array.
                    let saved = std::mem::take(&mut self.batch);
                    let fused = self.contraction(e, env);
                    self.batch = saved;
                    if let Some(v) = fused.filter(|v| v.nb == 0).and_then(|v| v.densify()) {
                        return Ok(Some(v.v));
                    }
                    // The first or last items of a sort: selected, not sorted.
                    let saved = std::mem::take(&mut self.batch);
                    let ends = self.sorted_ends(e, env).flatten();
                    self.batch = saved;
                    if let Some(v) = ends.filter(|v| v.nb == 0).and_then(|v| v.densify()) {
                        return Ok(Some(v.v));
                    }
                    // The positions of set flags: no counting vector.
                    if let Some(v) = self.filter_of_iota(e, env)? {
                        return Ok(Some(v));
                    }
                    // A fold or scan of a map: the items made where the
                    // loop reads them.
                    if let Some(v) = self.scan_of_map(e, None, env)? {
                        return Ok(Some(v));
                    }
                    // A reduction of a lifted lambda: a block of items at a time.
                    if let Some(v) = self.reduce_streamed(e, env)? {
                        return Ok(Some(v));
                    }
                    // An intrinsic applied in full: its rule over the
                    // arguments' frames, if it has one.
                    let p = p.clone();
                    // A gather by a grade: a stable partition.
                    if let Some(v) = self.gather_by_grade(&p, &spine, env)? {
                        return Ok(Some(v));
                    }
                    let ruled = has_batched_rule(p.name);
                    // A loop's state is handed the chain (`moves.rs`): at
                    // its last read, the variable's value is the loop's.
                    let state = crate::moves::loop_state(p.name)
                        .filter(|_| p.args.is_empty() && spine.len() == p.sig.values);
                    let mut args = Vec::with_capacity(spine.len());
                    for (k, (arg, lifted, _)) in spine.iter().enumerate() {
                        let cell = self.shape_of(&lifted.arg_cell, env, arg.span)?;
                        let a = if state == Some(k)
                            && chain != 0
                            && crate::moves::is_path(arg)
                            && !matches!(arg.kind, TExprKind::Var(v) if env.view(v).is_some())
                        {
                            Batched::plain(self.eval_chained(arg, env, chain)?)
                        } else if ruled {
                            self.eval_view(arg, env)?
                        } else {
                            Batched::plain(self.eval(arg, env)?)
                        };
                        args.push((a, cell));
                    }
                    self.at = e.span;
                    if ruled {
                        if let Some(v) = self.apply_prim_framed(&p, args.clone()) {
                            return Ok(Some(v));
                        }
                        if let Some(message) = crate::eval::take_fault() {
                            let span = spine.last().map_or(e.span, |(_, _, app)| app.span);
                            return crate::eval::fail(span, message);
                        }
                    } else {
                        // Once per position either way: the reference path,
                        // which may reuse the arguments' buffers.
                        let name = p.name;
                        self.note_cell_by_cell(|| format!("`{name}` has no batched rule"));
                    }
                    return self.apply_in_turn(f, args, &spine, env, e.span).map(Some);
                }
                _ => return Ok(None),
            },
            _ => return Ok(None),
        };
        let mut args = Vec::with_capacity(spine.len());
        for (arg, lifted, _) in &spine {
            let a = self.eval_view(arg, env)?;
            let cell = self.shape_of(&lifted.arg_cell, env, arg.span)?;
            args.push((a, cell));
        }
        if let Some(v) = self.apply_lambda_to_views(&fun, args.clone()) {
            return Ok(Some(v));
        }
        self.apply_in_turn(f, args, &spine, env, e.span).map(Some)
    }

    /// An argument as it is evaluated outside any batch, except that a view
    /// (a transpose, windows, a replication) stays a view, for a batched
    /// rule or a lifted lambda to read in place.
    pub(crate) fn eval_view(&mut self, arg: &'p TExpr, env: &Env<'p>) -> crate::eval::Run<Batched<'p>> {
        if let TExprKind::Var(v) = arg.kind
            && let Some(view) = env.view(v)
        {
            return Ok(view.clone());
        }
        if makes_view(arg) || slices_variable(arg) {
            let saved = std::mem::take(&mut self.batch);
            let view = self.eval_batched(arg, env);
            self.batch = saved;
            if let Some(view) = view.filter(|v| v.nb == 0) {
                return Ok(view);
            }
        }
        Ok(Batched::plain(self.eval(arg, env)?))
    }

    /// Whether `eval_view` gives `arg` as a view: a view made there, or a
    /// variable a `let` bound to one.
    pub(crate) fn gives_view(&self, arg: &TExpr, env: &Env<'p>) -> bool {
        makes_view(arg)
            || slices_variable(arg)
            || matches!(arg.kind, TExprKind::Var(v) if env.view(v).is_some())
    }

    /// `(let ((val var e)) body)` for an `e` that makes a view (or a
    /// lifted lambda whose result is one), `var` read at most twice in
    /// `body` and never inside a lambda (each plain read lays the view out
    /// again): the environment with `var` bound to the view, not laid out
    /// (`None`: not such a `let`, nothing evaluated; a dense value, or a
    /// view that would be refused as too large laid out, is bound as
    /// usual).
    pub(crate) fn bind_view(
        &mut self,
        var: remora_check::typed::VarId,
        value: &'p TExpr,
        body: &'p TExpr,
        env: &Env<'p>,
    ) -> crate::eval::Run<Option<Env<'p>>> {
        let lambda_application = matches!(&value.kind, TExprKind::App { func, .. } if matches!(func.kind, TExprKind::Var(_) | TExprKind::Array { .. }));
        if self.reference_only
            || !(makes_view(value) || lambda_application)
            || crate::partition::reads_but(body, var, |x| selection_of(x, var)).is_none_or(|n| n > 2)
        {
            return Ok(None);
        }
        let view = if makes_view(value) {
            self.eval_view(value, env)?
        } else if let Some(view) = self.lambda_view(value, env)? {
            view
        } else {
            return Ok(None);
        };
        let binding = if view.is_dense() {
            crate::eval::Binding::Val(var, view.v)
        } else if check_size(atoms_in(&view.v.shape), value.span).is_ok() {
            crate::eval::Binding::View(var, view)
        } else {
            crate::eval::Binding::Val(var, self.eval(value, env)?)
        };
        Ok(Some(env.with(binding)))
    }

    /// `(f a)`, `f` a lambda lifted over a frame of at most `STRIP_CELLS`
    /// positions (run whole, not in strips), its batched result as it comes
    /// out of the batch: a view when the body's result is one (a slice or a
    /// rotation of an array from outside the lambda). `None` when `value`
    /// is not such an application (nothing evaluated that matters: `f` is
    /// a variable or a literal); an application that gives up batching
    /// runs as usual and its value comes back dense.
    fn lambda_view(&mut self, value: &'p TExpr, env: &Env<'p>) -> crate::eval::Run<Option<Batched<'p>>> {
        let TExprKind::App { func, arg, lifted } = &value.kind else {
            return Ok(None);
        };
        if !pure(func) || !matches!(func.kind, TExprKind::Var(_) | TExprKind::Array { .. }) {
            return Ok(None);
        }
        let f = self.eval(func, env)?;
        let fun = match &f.data {
            Data::Atoms(funs) if f.shape.is_empty() => match funs.first() {
                Some(Atom::Fun(fun @ Fun::Lambda { body, .. })) if lambda_params(body) == 0 => fun.clone(),
                _ => return Ok(None),
            },
            _ => return Ok(None),
        };
        let a = self.eval_view(arg, env)?;
        let cell = self.shape_of(&lifted.arg_cell, env, value.span)?;
        let frame =
            a.v.shape
                .get(..a.v.shape.len().saturating_sub(cell.len()))
                .unwrap_or_default();
        let whole = !frame.is_empty() && atoms_in(frame) <= STRIP_CELLS && atoms_in(&cell) > 0;
        if whole && !(self.batching > 0 && fun.reads_batch()) {
            crate::eval::clear_starved();
            let saved = std::mem::take(&mut self.batch);
            self.batching += 1;
            let r = self.lambda_batched(&fun, vec![(a.clone(), cell.clone())]);
            self.batching -= 1;
            self.batch = saved;
            if let Some(r) = r.filter(|r| r.nb == 0 && !holds_atoms(&r.v.data)) {
                return Ok(Some(r));
            }
        } else if self.gives_view(arg, env)
            && let Some(r) = self.apply_lambda_to_views(&fun, vec![(a.clone(), cell.clone())])
        {
            return Ok(Some(Batched::plain(r)));
        }
        // As the application runs anywhere else.
        let a = self.dense_or_eval(a, arg, env)?;
        let v = self.apply(&f, a, &cell, &value.ty, env, value.span)?;
        Ok(Some(Batched::plain(v)))
    }

    /// The reference path of a spine `(f a b …)` applied at `span`: `f`
    /// applied to one argument at a time, each laid out from its view (or
    /// evaluated again, `dense_or_eval`), at its application's position.
    pub(crate) fn apply_in_turn<L>(
        &mut self,
        f: Value<'p>,
        args: Vec<(Batched<'p>, Vec<usize>)>,
        spine: &[(&'p TExpr, L, &'p TExpr)],
        env: &Env<'p>,
        span: Span,
    ) -> crate::eval::Run<Value<'p>> {
        crate::eval::check_starved(span)?;
        // An intrinsic given all its arguments, none over a frame: one
        // application, the arguments handed to it (each partial
        // application would hold a copy of those before it).
        if let Data::Atoms(atoms) = &f.data
            && f.shape.is_empty()
            && let [Atom::Fun(Fun::Prim(p))] = &atoms[..]
            && p.completed_by(args.len())
            && self.fuel.is_none()
            && args
                .iter()
                .all(|(a, cell)| a.nb == 0 && a.own() == cell.as_slice())
            && let Some(app) = spine.last().map(|(_, _, app)| app.span)
        {
            let mut p = (**p).clone();
            for ((a, _), (arg, _, _)) in args.into_iter().zip(spine) {
                p.args.push(self.dense_or_eval(a, arg, env)?);
            }
            return self.saturate(p, app);
        }
        let mut f = f;
        for ((a, cell), (arg, _, app)) in args.into_iter().zip(spine) {
            let a = self.dense_or_eval(a, arg, env)?;
            f = self.apply(&f, a, &cell, &app.ty, env, app.span)?;
        }
        Ok(f)
    }

    /// An argument from `eval_view` laid out as an ordinary value (a view
    /// too large to lay out: the argument as the reference path evaluates
    /// it, and fails it).
    pub(crate) fn dense_or_eval(
        &mut self,
        a: Batched<'p>,
        arg: &'p TExpr,
        env: &Env<'p>,
    ) -> crate::eval::Run<Value<'p>> {
        match a.densify() {
            Some(a) => Ok(a.v),
            None => self.eval(arg, env),
        }
    }

    /// Whether a lambda body can run batched: built only of variables,
    /// literals, lambdas, `let`s, applications and intrinsics, and with a
    /// result of a base type (a function made inside a batch must not
    /// escape it). Decided once per body.
    pub(crate) fn batchable(&mut self, body: &TExpr) -> bool {
        let key = body as *const TExpr as usize;
        if let Some(&known) = self.batchable_bodies.get(&key)
            && (known || self.cell_log.is_none())
        {
            return known;
        }
        let why = if plain_atoms(&body.ty.atom) {
            unbatchable(body)
        } else {
            Some("a result that is not made of Ints, Floats, Bools and records of them")
        };
        self.batchable_bodies.insert(key, why.is_none());
        if let Some(why) = why {
            self.note_cell_by_cell(|| format!("the function's body has {why}, which does not run batched"));
        }
        why.is_none()
    }

    /// Evaluates `e` inside the current batch frame.
    pub(crate) fn eval_batched(&mut self, e: &'p TExpr, env: &Env<'p>) -> Try<Batched<'p>> {
        if let Some(fuel) = &mut self.fuel {
            // A step for every 256 cells of the batch frame: a loop over a
            // large frame spends its budget as its work grows, as the
            // reference path's cell by cell steps do.
            let cells = self.batch.iter().fold(1usize, |a, d| a.saturating_mul(*d));
            *fuel = fuel.checked_sub(1 + (cells / 256) as u64)?;
        }
        match &e.kind {
            TExprKind::Var(v) => env.lookup_batched(*v),
            TExprKind::Let { var, value, body } => {
                if let Some(r) = self.gather_let(*var, value, body, env) {
                    return r;
                }
                let b = self.eval_batched(value, env)?;
                let env = bind(env, *var, b);
                self.eval_batched(body, &env)
            }
            TExprKind::App { .. } => self.spine_batched(e, env),
            TExprKind::Frame { shape, elems } if !elems.is_empty() => self.frame_batched(shape, elems, env),
            TExprKind::Record(fields) => self.record_batched(e, fields, env),
            TExprKind::If {
                cond,
                then,
                otherwise,
            } => self.if_batched(cond, then, otherwise, env),
            TExprKind::Field { record, field } => {
                let r = self.eval_batched(record, env)?;
                let Data::Records(rs) = &r.v.data else {
                    return None;
                };
                let f = rs.fields.iter().find(|f| f.name == *field)?;
                let size = f.size();
                let mut strides: Vec<usize> = r.strides.iter().map(|s| s * size).collect();
                strides.extend(row_major(&f.cell));
                Some(Batched {
                    v: Array {
                        shape: r.v.shape.iter().chain(&f.cell).copied().collect(),
                        data: f.data.clone(),
                    },
                    nb: r.nb,
                    offset: r.offset * size,
                    strides,
                })
            }
            // Literals, lambdas, intrinsics and instantiations: the same in
            // every cell (a batched variable inside makes this fail, and
            // batching gives up). They run outside the batch frame.
            _ => {
                let saved = std::mem::take(&mut self.batch);
                let r = self.eval(e, env);
                self.batch = saved;
                r.ok().map(Batched::plain)
            }
        }
    }

    /// `if` inside the batch frame. A condition the same for every cell
    /// picks one branch; otherwise each branch runs on just the positions
    /// that take it (the batch restricted to them, as a mask would: each
    /// cell evaluates only its own branch, so a recursion ends where the
    /// cells' recursions end), and the two results are merged back in
    /// position order.
    fn if_batched(
        &mut self,
        cond: &'p TExpr,
        then: &'p TExpr,
        otherwise: &'p TExpr,
        env: &Env<'p>,
    ) -> Try<Batched<'p>> {
        let c = self.eval_batched(cond, env)?;
        if c.nb == 0 {
            let Data::Bool(b) = &c.v.data else {
                return None;
            };
            return self.eval_batched(if *b.get(c.offset)? { then } else { otherwise }, env);
        }
        // The condition at every position of the whole batch.
        let nb = self.batch.len();
        let c = self.expand(&c, nb)?.densify()?;
        let Data::Bool(go) = &c.v.data else {
            return None;
        };
        let positions = atoms_in(&self.batch);
        if go.len() != positions || positions == 0 {
            return None;
        }
        if total(then) && total(otherwise) {
            // Branches that cannot fail or loop: both over every cell, then
            // an elementwise choice (cheaper than restricting the batch).
            let yes = self.eval_batched(then, env)?;
            let no = self.eval_batched(otherwise, env)?;
            let own: Vec<usize> = yes.own().to_vec();
            if no.own() != own.as_slice() {
                return None;
            }
            let mut shape = self.batch.clone();
            shape.extend(&own);
            let (yes, no) = (self.expand(&yes, nb)?, self.expand(&no, nb)?);
            let yes = yes.laid_over(own.len(), nb, nb, &shape)?;
            let no = no.laid_over(own.len(), nb, nb, &shape)?;
            let data = choose_data(go, &yes.data, &no.data, atoms_in(&own))?;
            return Some(Batched::dense(Array { shape, data }, nb));
        }
        let taken: Vec<usize> = (0..positions).filter(|&p| go[p]).collect();
        let other: Vec<usize> = (0..positions).filter(|&p| !go[p]).collect();
        if other.is_empty() {
            return self.eval_batched(then, env);
        }
        if taken.is_empty() {
            return self.eval_batched(otherwise, env);
        }
        let go = go.clone();
        let yes = self.branch_at(then, env, &taken)?;
        let no = self.branch_at(otherwise, env, &other)?;
        if yes.v.shape.get(1..) != no.v.shape.get(1..) {
            return None;
        }
        let own: Vec<usize> = yes.v.shape.get(1..)?.to_vec();
        let data = merge_data(&go, &yes.v.data, &no.v.data, atoms_in(&own))?;
        let mut shape = self.batch.clone();
        shape.extend(own);
        Some(Batched::dense(Array { shape, data }, nb))
    }

    /// `e` evaluated on some positions of the batch only (row-major
    /// positions of the whole batch frame): every batched variable
    /// restricted to them, the batch one axis of that many positions. The
    /// result is dense over `[positions] ++ its own shape`.
    fn branch_at(&mut self, e: &'p TExpr, env: &Env<'p>, at: &[usize]) -> Try<Batched<'p>> {
        let batch = self.batch.clone();
        let nb = batch.len();
        let inner = env.map_batched(&mut |b| {
            let full = self.expand(b, nb)?;
            pick_positions(&full, &batch, at)
        })?;
        let saved = std::mem::replace(&mut self.batch, vec![at.len()]);
        let r = self.eval_batched(e, &inner);
        self.batch = saved;
        let r = r?;
        let mut shape = vec![at.len()];
        shape.extend(r.own());
        let r = if r.nb == 0 {
            Batched {
                strides: place(&r.strides, 0, 1, shape.len()),
                v: Array {
                    shape,
                    data: r.v.data,
                },
                nb: 1,
                offset: r.offset,
            }
        } else {
            r
        };
        r.densify()
    }

    /// A record literal inside the batch frame: each field laid out densely
    /// over the batch axes and the record's frame (one array per field).
    fn record_batched(
        &mut self,
        e: &'p TExpr,
        fields: &'p [(String, TExpr)],
        env: &Env<'p>,
    ) -> Try<Batched<'p>> {
        let TyAtom::Record(cell_tys) = &e.ty.atom else {
            return None;
        };
        let frame = self.shape_of(&e.ty.shape, env, e.span).ok()?;
        let mut parts = Vec::with_capacity(fields.len());
        for ((name, x), (_, cty)) in fields.iter().zip(cell_tys.iter()) {
            let cell = self.shape_of(&cty.shape, env, e.span).ok()?;
            parts.push((name, self.eval_batched(x, env)?, cell));
        }
        let nb = parts.iter().map(|(_, b, _)| b.nb).max().unwrap_or(0);
        let mut shape: Vec<usize> = self.batch.get(..nb)?.to_vec();
        shape.extend(&frame);
        let count = atoms_in(&shape);
        let mut columns = Vec::with_capacity(parts.len());
        for (name, b, cell) in parts {
            let mut full = shape.clone();
            full.extend(&cell);
            let laid = self
                .expand(&b, nb)?
                .laid_over(cell.len(), nb, shape.len(), &full)?;
            columns.push(remora_value::RecordField {
                name: name.clone(),
                cell,
                data: laid.data,
            });
        }
        let records = remora_value::Records {
            count,
            fields: columns,
        };
        Some(Batched::dense(
            Array {
                shape,
                data: Data::records(records),
            },
            nb,
        ))
    }

    /// A frame literal `[e1 e2 …]` whose elements may be batched: the
    /// elements' cells interleaved under each batch position.
    fn frame_batched(&mut self, shape: &[u64], elems: &'p [TExpr], env: &Env<'p>) -> Try<Batched<'p>> {
        let mut parts = Vec::with_capacity(elems.len());
        for x in elems {
            parts.push(self.eval_batched(x, env)?);
        }
        let nb = parts.iter().map(|b| b.nb).max()?;
        let own: Vec<usize> = parts.first()?.own().to_vec();
        if parts.iter().any(|b| b.own() != own.as_slice()) {
            return None;
        }
        let outer: usize = self.batch.get(..nb)?.iter().product();
        let cell: usize = own.iter().product();
        let k = parts.len();
        let frame: Vec<usize> = shape.iter().map(|d| *d as usize).collect();
        if nb > 0 && outer > 1 && k > 1 {
            // Over a batch: the elements laid out one after another (the
            // frame's axes outermost in memory), read through steps as the
            // batch's axes first — no weaving, and each element (`head`,
            // `index` at a constant, a field of a small vector state) is
            // again a contiguous run.
            if let Some(stacked) = self.stacked(&parts, nb, &frame, &own) {
                return Some(stacked);
            }
        }
        // One element at a time laid out densely and woven in, so that at
        // most one replicated element is ever copied out whole.
        let mut data: Option<Data<Fun<'p>>> = None;
        for (j, b) in parts.iter().enumerate() {
            let part = self.expand(b, nb)?.densify()?.v;
            let out = data.get_or_insert_with(|| part.data.empty_like());
            weave_into(out, &part.data, j, k, outer, cell)?;
        }
        let data = data?;
        let mut full: Vec<usize> = self.batch.get(..nb)?.to_vec();
        full.extend(frame);
        full.extend(own);
        Some(Batched::dense(Array { shape: full, data }, nb))
    }

    /// The elements of a frame literal over the batch (`nb` axes), each
    /// laid out densely one after another, viewed as `batch ++ frame ++
    /// own`. `None` for elements that are not plain atoms.
    fn stacked(&self, parts: &[Batched<'p>], nb: usize, frame: &[usize], own: &[usize]) -> Try<Batched<'p>> {
        let batch: Vec<usize> = self.batch.get(..nb)?.to_vec();
        let outer: usize = atoms_in(&batch);
        let cell: usize = atoms_in(own);
        let mut data: Option<Data<Fun<'p>>> = None;
        for b in parts {
            let part = self.expand(b, nb)?.densify()?.v.data;
            if !matches!(part, Data::Int(_) | Data::Float(_) | Data::Bool(_)) || part.len() != outer * cell {
                return None;
            }
            Data::append_to(&mut data, part, outer * cell * parts.len()).ok()?;
        }
        stacked_view(data?, nb, &batch, frame, own)
    }

    /// An application spine `(((f a1) a2) … ak)` inside the batch frame.
    fn spine_batched(&mut self, e: &'p TExpr, env: &Env<'p>) -> Try<Batched<'p>> {
        if let Some(r) = self.contraction(e, env) {
            return Some(r);
        }
        if let Some(r) = self.tally(e, env) {
            return r;
        }
        if let Some(r) = self.sorted_ends(e, env) {
            return r;
        }
        if let Some(r) = self.reduce_of_select(e, env) {
            return r;
        }
        if let Some(r) = self.gather_chain(e, env) {
            return r;
        }
        if let Some(r) = self.projected_batched(e, env) {
            return r;
        }
        let (head, spine) = e.spine();
        let f = self.eval_batched(head, env)?;
        let mut args = Vec::with_capacity(spine.len());
        for (arg, lifted) in &spine {
            let a = self.eval_batched(arg, env)?;
            let cell = self.shape_of(&lifted.arg_cell, env, arg.span).ok()?;
            args.push((a, cell));
        }
        self.at = e.span;
        self.apply_batched(&f, args)
    }

    /// A function (the same in every cell) applied to arguments, each with
    /// its cell shape.
    pub(crate) fn apply_batched(
        &mut self,
        f: &Batched<'p>,
        args: Vec<(Batched<'p>, Vec<usize>)>,
    ) -> Try<Batched<'p>> {
        if f.nb != 0 || !f.v.shape.is_empty() {
            return None;
        }
        let Data::Atoms(atoms) = &f.v.data else {
            return None;
        };
        match atoms.get(f.offset)? {
            Atom::Fun(Fun::Prim(p)) => self.prim_batched(p, args),
            Atom::Fun(fun @ Fun::Lambda { .. }) => self.lambda_batched(fun, args),
            _ => None,
        }
    }

    /// The own frames of the arguments and their principal frame (the
    /// longest; every other must be a prefix of it).
    pub(crate) fn principal(args: &[(Batched<'p>, Vec<usize>)]) -> Try<Vec<usize>> {
        let mut principal: &[usize] = &[];
        let mut frames = Vec::with_capacity(args.len());
        for (a, cell) in args {
            let own = a.own();
            let frame = own.get(..own.len().checked_sub(cell.len())?)?;
            if own.get(frame.len()..)? != cell.as_slice() {
                return None;
            }
            frames.push(frame);
            if frame.len() > principal.len() {
                principal = frame;
            }
        }
        frames
            .iter()
            .all(|fr| principal.starts_with(fr))
            .then(|| principal.to_vec())
    }

    /// A lambda's chain of parameters applied to the arguments at once.
    fn lambda_batched(&mut self, fun: &Fun<'p>, args: Vec<(Batched<'p>, Vec<usize>)>) -> Try<Batched<'p>> {
        self.lambda_batched_by(fun, args, Self::eval_batched)
    }

    /// `lambda_batched` with the body evaluated by `body_by` (which may
    /// give what it makes in another form than a value, see [`Lifts`]).
    pub(crate) fn lambda_batched_by<R: Lifts<'p>>(
        &mut self,
        fun: &Fun<'p>,
        args: Vec<(Batched<'p>, Vec<usize>)>,
        body_by: impl FnOnce(&mut Self, &'p TExpr, &Env<'p>) -> Try<R>,
    ) -> Try<R> {
        let Fun::Lambda { param, body, env } = fun else {
            return None;
        };
        // The parameters of `(fn ((x …) (y …)) e)`, desugared to nested lambdas.
        let mut params = vec![*param];
        let mut body: &'p TExpr = body;
        while params.len() < args.len() {
            let TExprKind::Array { shape, atoms } = &body.kind else {
                return None;
            };
            match (shape.as_slice(), atoms.as_slice()) {
                ([], [a]) => match &a.kind {
                    TAtomKind::Lambda { param, body: inner } => {
                        params.push(*param);
                        body = inner;
                    }
                    _ => return None,
                },
                _ => return None,
            }
        }
        if !self.batchable(body) {
            return None;
        }
        let frame = Self::principal(&args)?;
        let outer = self.batch.len();
        let depth = outer + frame.len();
        let mut inner = env.clone();
        for (p, (a, cell)) in params.iter().zip(args) {
            let a = if frame.is_empty() {
                a
            } else {
                // Every cell of the new level, replicated where the
                // argument's own frame is shorter (or the argument lacks
                // outer batch axes).
                let own_frame = a.own().len() - cell.len();
                let full = self.expand(&a, outer)?;
                let mut shape = self.batch.clone();
                shape.extend(&frame);
                shape.extend(&cell);
                let mut strides = full.strides;
                strides.splice(
                    outer + own_frame..outer + own_frame,
                    vec![0; frame.len() - own_frame],
                );
                Batched {
                    v: Array {
                        shape,
                        data: full.v.data,
                    },
                    nb: depth,
                    offset: full.offset,
                    strides,
                }
            };
            inner = bind(&inner, *p, a);
        }
        self.batch.extend(&frame);
        let result = body_by(self, body, &inner);
        self.batch.truncate(outer);
        let mut r = result?;
        if !frame.is_empty() {
            // Back in the outer level: the new axes become the result's frame.
            self.batch.extend(&frame);
            let outward = r.outward(self, depth, outer);
            self.batch.truncate(outer);
            r = outward?;
        }
        Some(r)
    }

    /// `b` with the batch axes up to `nb` (replicated by zero steps where
    /// it lacks them).
    pub(crate) fn expand(&self, b: &Batched<'p>, nb: usize) -> Try<Batched<'p>> {
        if b.nb >= nb {
            return Some(b.clone());
        }
        let mut shape: Vec<usize> = self.batch.get(..nb)?.to_vec();
        shape.extend(b.own());
        let strides = place(&b.strides, b.nb, nb, shape.len());
        Some(b.view(shape, nb, b.offset, strides))
    }

    /// An intrinsic applied inside the batch frame.
    pub(crate) fn prim_batched(
        &mut self,
        p: &crate::eval::Prim<'p>,
        args: Vec<(Batched<'p>, Vec<usize>)>,
    ) -> Try<Batched<'p>> {
        if matches!(p.name, "trace" | "trace-file") {
            return None;
        }
        if !p.completed_by(args.len()) {
            // A partial application: a function value, which must not
            // capture anything batched.
            return if args.iter().all(|(a, _)| a.nb == 0) {
                self.apply_plain(p, args)
            } else {
                None
            };
        }
        // Replicated along some batch axes: run once along them.
        if let Some(r) = self.hoisted(p, &args) {
            return r;
        }
        let mut all: Vec<(Batched<'p>, Vec<usize>)> = p
            .args
            .iter()
            .map(|a| (Batched::plain(a.clone()), a.shape.clone()))
            .collect();
        all.extend(args);
        if scalar::is_scalar_primitive(p.name) {
            return self.scalar_batched(p.name, all);
        }
        let batched = match p.name {
            "reduce" | "reduce/zero" | "fold" | "scan" | "iscan" | "iterate" | "f.sum" | "f.product"
            | "sum" | "product" | "any" | "all" | "count" => self.fold_batched(p.name, &all),
            "while" => self.while_batched(&all),
            "select" => self.select_batched(&all),
            "scatter" => crate::choose::scatter_whole(&all),
            "index" | "nth" if all.get(1).is_some_and(|(i, _)| i.nb > 0 || !i.v.shape.is_empty()) => {
                self.gather_batched(p.name, &all)
            }
            "index2d" => match all.as_slice() {
                [(xs, xcell), (is, _)] => self.gather_picks(xs, xcell, &[Pick::new("index2d", is.clone())]),
                _ => None,
            },
            "head" | "last" | "tail" | "curtail" | "take" | "drop" | "take-right" | "drop-right"
            | "index" | "nth" => items_batched(p, &all),
            "rotate" => match all.as_slice() {
                // Shifts stepping evenly over the batch: a view.
                [(xs, acell), (k, _)]
                    if let Some(v) = crate::strided::rotate_view(xs, acell, k, &self.batch) =>
                {
                    Some(v)
                }
                // One shift for the whole batch (a constant): given as it
                // is, not laid out once per position.
                [(xs, acell), (k, kcell)] if xs.nb > 0 && k.nb == 0 && k.v.shape.is_empty() => {
                    let xs = self.expand(xs, xs.nb)?.densify()?;
                    let args = [(xs.v, acell.clone()), (k.densify()?.v, kcell.clone())];
                    let r = intrinsics::rotate_framed(&args, Span::default()).ok()?;
                    Some(Batched::dense(r, xs.nb))
                }
                _ => self.framed(&all, |args| intrinsics::rotate_framed(args, Span::default()).ok()),
            },
            "transpose2d" | "windows" => view_batched(p, &all),
            "length" | "reshape" | "flatten" | "replicate" => reshape_batched(p, &all),
            "append" if let Some(joined) = append_whole(&all) => Some(joined),
            "reverse"
                if let [(xs, cell)] = all.as_slice()
                    && let Some(r) = xs
                        .own()
                        .len()
                        .checked_sub(cell.len())
                        .and_then(|frame| crate::strided::reverse_in_memory_order(xs, xs.nb + frame)) =>
            {
                Some(r)
            }
            "append" | "reverse" => self.framed(&all, |args| items_framed(p.name, args)),
            "sort" | "grade" | "f.sort" | "f.grade" => self.framed(&all, |args| sort_framed(p.name, args)),
            "sort-by" | "grade-by" => match all.as_slice() {
                [(less, _), (xs, xcell)] => self.sort_by_batched(p.name, less, xs, xcell),
                _ => None,
            },
            "unique" | "unique-counts" => self.framed(&all, |args| match args {
                [(xs, _)] => crate::search::unique_framed(p.name, xs).ok(),
                _ => None,
            }),
            "searchsorted" | "searchsorted/right" => self.search_batched(p.name, &all),
            name if crate::vocab::is_vocab(name) => self.vocab_batched(p, &all),
            _ => None,
        };
        match batched {
            Some(b) => Some(b),
            // Out of memory, or an error found: not again cell by cell
            // (the caller reports it).
            None if crate::eval::starved() || crate::eval::faulted() || crate::eval::take_doomed() => None,
            None => {
                let name = p.name;
                self.note_cell_by_cell(|| {
                    format!("`{name}` has no batched rule for these arguments, or an error in some cell")
                });
                self.prim_per_cell(p, all)
            }
        }
    }

    /// `index`/`nth` by indices that differ from cell to cell (a gather):
    /// for every position of the batch and the principal frame, the item
    /// its index names, read in place from the array (which is never
    /// replicated in memory, however many indices share it).
    pub(crate) fn gather_batched(
        &mut self,
        name: &str,
        all: &[(Batched<'p>, Vec<usize>)],
    ) -> Try<Batched<'p>> {
        let [(xs, xcell), (is, icell)] = all else {
            return None;
        };
        if !icell.is_empty() {
            return None;
        }
        let frame = Self::principal(all)?;
        let nb = xs.nb.max(is.nb);
        let mut outer: Vec<usize> = self.batch.get(..nb)?.to_vec();
        outer.extend(&frame);
        let (&items, item_cell) = xcell.split_first()?;
        let item: usize = item_cell.iter().product();
        // The array's cells laid in place: a step per outer axis (zero
        // where it lacks the axis), its cells row-major.
        // (Cells not laid row-major, a transposition's, are laid out
        // before the array is replicated over the batch, never once per
        // position.)
        let xframe = xs.own().len().checked_sub(xcell.len())?;
        let xs = if xs.strides.get(xs.nb + xframe..)? == row_major(xcell).as_slice() {
            self.expand(xs, nb)?
        } else {
            self.expand(&xs.densify()?, nb)?
        };
        let mut steps: Vec<usize> = xs.strides.get(..nb + xframe)?.to_vec();
        steps.resize(outer.len(), 0);
        let n = atoms_in(&outer);
        check_size(n.checked_mul(item)?, Span::default()).ok()?;
        // The indices read in place, a step per outer axis (zero where
        // they are replicated): never laid out over the frame.
        let isteps = is.steps_over(0, nb, outer.len(), &outer)?;
        let Data::Int(indices) = &is.v.data else {
            return None;
        };
        let lines = Lines {
            outer: &outer,
            steps: &steps,
            isteps: &isteps,
        };
        // Consecutive items of one array: its buffer from the first (a
        // view, unless outside a batch it would keep a much larger array
        // alive; inside one it is a step's intermediate).
        let keeps_little = !self.batch.is_empty() || n * item * 2 >= xs.v.data.len();
        if keeps_little && let Some(view) = lines.run_view(indices, is.offset, items) {
            let mut shape = outer.clone();
            shape.extend(item_cell);
            let strides = row_major(&shape);
            return Some(xs.view(shape, nb, xs.offset + view * item, strides));
        }
        // Plain atoms: a line at a time, which checks the indices itself
        // (only a gather that fails looks for the index to blame).
        let typed = match &xs.v.data {
            Data::Float(v) => Some(
                lines
                    .gather(v.get(xs.offset..)?, indices, is.offset, items, item)
                    .map(|v| Data::Float(v.into())),
            ),
            Data::Int(v) => Some(
                lines
                    .gather(v.get(xs.offset..)?, indices, is.offset, items, item)
                    .map(|v| Data::Int(v.into())),
            ),
            Data::Bool(v) => Some(
                lines
                    .gather(v.get(xs.offset..)?, indices, is.offset, items, item)
                    .map(|v| Data::Bool(v.into())),
            ),
            _ => None,
        };
        if let Some(Some(data)) = typed {
            outer.extend(item_cell);
            return Some(Batched::dense(Array { shape: outer, data }, nb));
        }
        let index = is.laid_over(0, nb, outer.len(), &outer)?;
        let Data::Int(index) = &index.data else {
            return None;
        };
        let index = index.get(..n)?;
        if let Some(&i) = index.iter().find(|&&i| !(0..items as i64).contains(&i)) {
            // At the top level the reference path meets this index first;
            // inside a batch, some cell fails.
            if self.batch.is_empty() {
                crate::eval::note_fault(match name {
                    "nth" => format!("nth: index {i} out of range for {items} items"),
                    _ => format!("index {i} out of range for a vector of length {items}"),
                });
            } else {
                crate::eval::note_doomed();
            }
            return None;
        }
        if typed.is_some() {
            return None;
        }
        let starts = GatherStarts {
            outer: &outer,
            steps: &steps,
            index: index.iter(),
            item,
            odometer: vec![0; outer.len()],
            base: xs.offset,
        };
        let data = pick_from(&xs.v.data, starts, n, item)?;
        outer.extend(item_cell);
        Some(Batched::dense(Array { shape: outer, data }, nb))
    }

    /// `searchsorted` and `searchsorted/right` over the batch and the
    /// principal frame: for every position, one binary search of its value
    /// in its row of breakpoints, read in place (a vector of breakpoints
    /// shared by every value is neither copied nor checked more than once).
    fn search_batched(&mut self, name: &str, all: &[(Batched<'p>, Vec<usize>)]) -> Try<Batched<'p>> {
        let [(rows, rcell), (values, vcell)] = all else {
            return None;
        };
        let [d] = rcell.as_slice() else {
            return None;
        };
        if !vcell.is_empty() {
            return None;
        }
        let frame = Self::principal(all)?;
        let nb = rows.nb.max(values.nb);
        let mut outer: Vec<usize> = self.batch.get(..nb)?.to_vec();
        outer.extend(&frame);
        let n = atoms_in(&outer);
        check_size(n, Span::default()).ok()?;
        let values = values.laid_over(0, nb, outer.len(), &outer)?;
        // The rows in place: a step per outer axis (zero where they lack
        // it), each row's atoms one apart.
        let rows = self.expand(rows, nb)?;
        let rframe = rows.own().len().checked_sub(1)?;
        let rows = if *d <= 1 || rows.strides.last() == Some(&1) {
            rows
        } else {
            rows.densify()?
        };
        let mut steps: Vec<usize> = rows.strides.get(..nb + rframe)?.to_vec();
        steps.resize(outer.len(), 0);
        let starts = Odometer {
            outer: &outer,
            steps: &steps,
            at: vec![0; outer.len()],
            base: rows.offset,
        };
        let found = crate::search::search(
            &rows.v.data,
            &values.data,
            starts.take(n),
            *d,
            name == "searchsorted/right",
        );
        match found {
            Ok(at) => Some(Batched::dense(
                Array {
                    shape: outer,
                    data: Data::Int(at.into()),
                },
                nb,
            )),
            Err(crate::kernel::OUT_OF_MEMORY) | Err(crate::search::UNORDERED) => None,
            Err(message) => {
                // At the top level the reference path meets this row
                // first; inside a batch, some cell fails.
                if self.batch.is_empty() {
                    crate::eval::note_fault(format!("{name}: {message}"));
                } else {
                    crate::eval::note_doomed();
                }
                None
            }
        }
    }

    /// An intrinsic's rule over frames (what it does at the top level,
    /// given whole arrays and their cells) run over the batch: every
    /// argument laid out densely over the batch axes it lacks, which then
    /// are just the outermost axes of its frame.
    fn framed(
        &mut self,
        all: &[(Batched<'p>, Vec<usize>)],
        rule: impl FnOnce(&[(Value<'p>, Vec<usize>)]) -> Option<Value<'p>>,
    ) -> Try<Batched<'p>> {
        let nb = all.iter().map(|(a, _)| a.nb).max()?;
        let mut dense = Vec::with_capacity(all.len());
        for (a, cell) in all {
            dense.push((self.expand(a, nb)?.densify()?.v, cell.clone()));
        }
        let saved = std::mem::take(&mut self.batch);
        let r = rule(&dense);
        self.batch = saved;
        Some(Batched::dense(r?, nb))
    }

    /// `while` with its cells batched: one test and one function, the
    /// cells of every batch position and frame position stepped together.
    fn while_batched(&mut self, all: &[(Batched<'p>, Vec<usize>)]) -> Try<Batched<'p>> {
        let [(test, _), (step, _), (xs, cell)] = all else {
            return None;
        };
        if test.nb != 0 || step.nb != 0 || !test.v.shape.is_empty() || !step.v.shape.is_empty() {
            return None;
        }
        let (test, step) = (test.densify()?, step.densify()?);
        let nb = xs.nb;
        let frame = xs.own().len().checked_sub(cell.len())?;
        if nb == 0 && frame == 0 && !captures_batch(&test) && !captures_batch(&step) {
            // One loop at the top level: the intrinsic's own, whose plain
            // calls of the step may update the state in place (`moves.rs`).
            return None;
        }
        let xs = xs.densify()?;
        let outer: Vec<usize> = xs.v.shape.get(..nb + frame)?.to_vec();
        let n = atoms_in(&outer);
        if n == 0 {
            return None;
        }
        let cells = Array {
            shape: std::iter::once(n).chain(cell.iter().copied()).collect(),
            data: xs.v.data.clone(),
        };
        let mut r = self.masked_while(&test.v, &step.v, cells, cell)?;
        r.shape = outer.into_iter().chain(cell.iter().copied()).collect();
        Some(Batched::dense(r, nb))
    }

    /// `select` over the batch and the principal frame: one elementwise
    /// choice, the condition replicated over the cells.
    fn select_batched(&mut self, all: &[(Batched<'p>, Vec<usize>)]) -> Try<Batched<'p>> {
        let frame = Self::principal(all)?;
        let nb = all.iter().map(|(a, _)| a.nb).max()?;
        let cell = all.get(1)?.1.clone();
        let mut shape: Vec<usize> = self.batch.get(..nb)?.to_vec();
        shape.extend(&frame);
        shape.extend(&cell);
        // Operands that lie contiguously, or are one atom replicated (a
        // scalar choice), are read where they are; records are laid out.
        if let Some(data) = crate::choose::select_in_place(all, nb, nb + frame.len(), &shape) {
            return Some(Batched::dense(Array { shape, data }, nb));
        }
        let mut laid = Vec::with_capacity(3);
        for (a, acell) in all {
            laid.push(a.laid_over(acell.len(), nb, nb + frame.len(), &shape)?.data);
        }
        let [Data::Bool(c), a, b] = laid.as_slice() else {
            return None;
        };
        let data = choose_data(c, a, b, 1)?;
        Some(Batched::dense(Array { shape, data }, nb))
    }

    /// An intrinsic with no batched rule, run once per position of the
    /// batch and the arguments' principal frame (the rest of the body stays
    /// batched).
    fn prim_per_cell(
        &mut self,
        p: &crate::eval::Prim<'p>,
        all: Vec<(Batched<'p>, Vec<usize>)>,
    ) -> Try<Batched<'p>> {
        let frame = Self::principal(&all)?;
        let nb = all.iter().map(|(a, _)| a.nb).max()?;
        let mut outer: Vec<usize> = self.batch.get(..nb)?.to_vec();
        outer.extend(&frame);
        let positions = atoms_in(&outer);
        if positions == 0 {
            return None;
        }
        if positions > 1 && all.iter().all(|(_, cell)| atoms_in(cell) == 0) {
            // Every cell is empty, so every cell is the same: the intrinsic
            // once, its result replicated over the frame by zero steps
            // (work in proportion to the atoms made, not to the frame:
            // `(sort (iota [2^62 0]))` is immediate).
            let mut prim = p.clone();
            prim.args = all
                .iter()
                .map(|(a, cell)| Array {
                    shape: cell.clone(),
                    data: a.v.data.empty_like(),
                })
                .collect();
            let saved = std::mem::take(&mut self.batch);
            let r = intrinsics::run(self, &mut prim, remora_syntax::Span::default());
            self.batch = saved;
            let r = r.ok()?;
            check_size(
                positions.checked_mul(r.data.len())?,
                remora_syntax::Span::default(),
            )
            .ok()?;
            let mut strides = vec![0; outer.len()];
            strides.extend(row_major(&r.shape));
            let shape = outer.into_iter().chain(r.shape.iter().copied()).collect();
            return Some(Batched {
                v: Array { shape, data: r.data },
                nb,
                offset: 0,
                strides,
            });
        }
        if outer.is_empty() && self.plain_follows == std::ptr::from_ref(p) as usize {
            // One application at the top level: the caller's own (`apply_in_turn`), made
            // with the arguments it alone then holds.
            return None;
        }
        check_size(positions, remora_syntax::Span::default()).ok()?;
        if all.iter().any(|(a, _)| captures_batch(a)) {
            // It could only fail: such a closure runs only batched.
            let name = p.name;
            self.note_cell_by_cell(|| {
                format!(
                    "a function made inside the batch is passed to `{name}`, which has no batched rule for it"
                )
            });
            return None;
        }
        self.log_cells(self.at, positions);
        // Each argument laid out densely over `outer ++ its cell`.
        let mut dense = Vec::with_capacity(all.len());
        for (a, cell) in &all {
            let mut shape = outer.clone();
            shape.extend(cell);
            dense.push((a.laid_over(cell.len(), nb, outer.len(), &shape)?, cell.clone()));
        }
        // (Dense arguments share their buffers with `all`, which holds
        // them no longer.)
        drop(all);
        let saved = std::mem::take(&mut self.batch);
        let mut results = Vec::with_capacity(positions);
        let mut failed = false;
        for pos in 0..positions {
            let mut prim = p.clone();
            prim.args = if positions == 1 {
                // One position: the arguments themselves, handed over (a
                // loop's state is then the intrinsic's alone, which its
                // step may update in place).
                std::mem::take(&mut dense)
                    .into_iter()
                    .map(|(v, cell)| Array {
                        shape: cell,
                        data: v.data,
                    })
                    .collect()
            } else {
                dense
                    .iter()
                    .map(|(v, cell)| {
                        let size: usize = cell.iter().product();
                        Array {
                            shape: cell.clone(),
                            data: v.data.slice(pos * size, size),
                        }
                    })
                    .collect()
            };
            match intrinsics::run(self, &mut prim, remora_syntax::Span::default()) {
                Ok(r) => results.push(r),
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        self.batch = saved;
        if failed {
            return None;
        }
        let mut v = crate::eval::stack(results, remora_syntax::Span::default()).ok()?;
        let cell_shape: Vec<usize> = v.shape.get(1..)?.to_vec();
        v.shape = outer.into_iter().chain(cell_shape).collect();
        Some(Batched::dense(v, nb))
    }

    /// No batch axes involved: the ordinary application, argument by argument.
    fn apply_plain(
        &mut self,
        p: &crate::eval::Prim<'p>,
        args: Vec<(Batched<'p>, Vec<usize>)>,
    ) -> Try<Batched<'p>> {
        if args.iter().any(|(a, _)| a.nb != 0) {
            return None;
        }
        if p.name == "rotate" && p.args.is_empty() && args.len() == 2 {
            let mut dense = Vec::with_capacity(2);
            for (a, cell) in args {
                dense.push((a.densify()?.v, cell));
            }
            let span = remora_syntax::Span::default();
            return intrinsics::rotate_framed(&dense, span).ok().map(Batched::plain);
        }
        let mut f = crate::eval::fun_value(Fun::Prim(std::rc::Rc::new(p.clone())));
        for (a, cell) in args {
            // With no empty frame the result type is never consulted.
            if a.v.shape.contains(&0) {
                return None;
            }
            let span = remora_syntax::Span::default();
            let a = a.densify()?;
            let any = remora_types::Type {
                atom: TyAtom::Int,
                shape: remora_types::Shape::from_segs(Vec::new()),
            };
            f = self.apply(&f, a.v, &cell, &any, &Env::default(), span).ok()?;
        }
        Some(Batched::plain(f))
    }

    /// A scalar primitive over `batch ++ principal frame`.
    fn scalar_batched(&mut self, name: &str, mut args: Vec<(Batched<'p>, Vec<usize>)>) -> Try<Batched<'p>> {
        let frame = Self::principal(&args)?;
        let nb = args.iter().map(|(a, _)| a.nb).max()?;
        let mut shape: Vec<usize> = self.batch.get(..nb)?.to_vec();
        shape.extend(&frame);
        let n = atoms_in(&shape);
        check_size(n, remora_syntax::Span::default()).ok()?;
        let layouts: Vec<Layout> = args
            .iter()
            .map(|(a, _)| Layout {
                offset: a.offset,
                strides: place(&a.strides, a.nb, nb, shape.len()),
            })
            .collect();
        // A temporary operand laid out as the result, that nothing else
        // holds: the result is written over it (as NumPy elides
        // temporaries).
        if let [(x, _), (y, _)] = args.as_mut_slice() {
            for target_first in [true, false] {
                let (t, (o, lo)) = if target_first {
                    (&mut *x, (&*y, &layouts[1]))
                } else {
                    (&mut *y, (&*x, &layouts[0]))
                };
                if t.nb == nb && t.v.shape == shape && t.is_dense() {
                    match scalar::apply_in_place(name, &mut t.v.data, (&o.v.data, lo), target_first, &shape) {
                        Some(Ok(())) => return Some(t.clone()),
                        Some(Err(_)) => return None,
                        None => {}
                    }
                }
            }
        }
        // An operand laid out as a transposition, and none along the last
        // axis: the result made in that operand's memory order (as NumPy's
        // elementwise operations keep their operands' order), so that it is
        // read along memory; the same atoms at the same positions, the
        // result's steps telling where.
        let order = memory_order(&layouts, &shape).unwrap_or_else(|| (0..shape.len()).collect());
        let permuted: Vec<usize> = order.iter().map(|&a| shape[a]).collect();
        let layouts: Vec<Layout> = layouts
            .iter()
            .map(|l| Layout {
                offset: l.offset,
                strides: order.iter().map(|&a| l.strides[a]).collect(),
            })
            .collect();
        let operands: Vec<(&Data<Fun<'p>>, &Layout)> =
            args.iter().map(|(a, _)| &a.v.data).zip(&layouts).collect();
        let data = scalar::apply(name, &operands, &permuted).ok()?;
        let mut strides = vec![0; shape.len()];
        for (&a, step) in order.iter().zip(row_major(&permuted)) {
            strides[a] = step;
        }
        Some(Batched {
            v: Array { shape, data },
            nb,
            offset: 0,
            strides,
        })
    }

    /// The folds — `reduce`, `reduce/zero`, `fold`, `scan`, `iscan`,
    /// `iterate`, and the sums over a whole cell (`f.sum` …) — over every
    /// cell of the batch and the argument's frame at once: by a scalar
    /// primitive (bare or η-expanded) one loop along the item axis
    /// (`kernel::reduce_axis`), by any other function one application per
    /// item (or step), batched over all the cells.
    fn fold_batched(&mut self, name: &str, args: &[(Batched<'p>, Vec<usize>)]) -> Try<Batched<'p>> {
        if matches!(
            name,
            "f.sum" | "f.product" | "sum" | "product" | "any" | "all" | "count"
        ) {
            return whole_cell_fold(name, args);
        }
        let op = &args.first()?.0;
        if op.nb != 0 || !op.v.shape.is_empty() {
            return None;
        }
        if name == "iterate" {
            return self.iterate_batched(args);
        }
        let (seed, (xs, xcell)) = match name {
            "reduce" | "iscan" => (None, args.get(1)?),
            _ => (Some(args.get(1)?), args.get(2)?),
        };
        let primitive = intrinsics::scalar_operator(&op.densify()?.v);
        if let Some(prim) = primitive
            && let Some(r) = self.fold_by_primitive(name, prim, seed, xs, xcell)
        {
            return Some(r);
        }
        // A fold keeping the index of the best item: a loop a cell.
        if name == "fold"
            && let Some(seed) = seed
            && let Some(r) = self.fold_arg_best(op, seed, xs, xcell)
        {
            return Some(r);
        }
        // A step atom by atom: each atom's loop one compiled program.
        if let Some(r) = self.fold_by_atoms(name, op, seed, xs, xcell) {
            return Some(r);
        }
        // A step on small cells: each cell's loop one compiled program.
        if let Some(r) = self.fold_by_cell_program(name, op, seed, xs, xcell, None) {
            return Some(r);
        }
        self.fold_by_items(name, &op.clone(), seed, xs, xcell)
    }

    /// A fold by a scalar primitive: one loop over `[outer, items, inner]`.
    fn fold_by_primitive(
        &mut self,
        name: &str,
        op: &'static str,
        seed: Option<&(Batched<'p>, Vec<usize>)>,
        xs: &Batched<'p>,
        xcell: &[usize],
    ) -> Try<Batched<'p>> {
        let xframe = xs.own().len().checked_sub(xcell.len())?;
        let nb = xs.nb.max(seed.map_or(0, |(s, _)| s.nb));
        let xs = self.expand(xs, nb)?;
        let outer_axes = nb + xframe;
        let item_shape = xs.v.shape.get(outer_axes + 1..)?.to_vec();
        let seed_data = match seed {
            None if xs.v.shape.get(outer_axes) == Some(&0) && name == "reduce" => return None,
            None => None,
            Some((s, scell)) => {
                // The seed laid out over [outer, inner]: its batch axes and
                // frame where it has them, replicated where it lacks them.
                let sframe = s.own().len().checked_sub(scell.len())?;
                if sframe > xframe || *scell != item_shape {
                    return None;
                }
                let mut shape: Vec<usize> = xs.v.shape.get(..outer_axes)?.to_vec();
                shape.extend(&item_shape);
                Some(s.laid_over(scell.len(), nb, outer_axes, &shape)?.data)
            }
        };
        // Items that lie next to each other with cells that do not (a
        // reduction along a transposed view): laid out [outer, inner,
        // items] instead, so every fold runs along memory, and folded as
        // outer·inner folds of single atoms (the same result, in the same
        // layout). Not for a view whose atoms overlap (windows: more atoms
        // than its buffer holds), which laid out would be as many times
        // larger as its windows are wide: that one is reduced where it
        // lies (`reduce_view`).
        let along_memory = xs.strides.get(outer_axes) == Some(&1)
            && xcell.len() > 1
            && atoms_in(xcell.get(1..)?) > 1
            && !matches!(name, "scan" | "iscan")
            && !xs.is_dense()
            && atoms_in(&xs.v.shape) <= xs.v.data.len();
        let (xs, dims_override) = if along_memory {
            let items = *xs.v.shape.get(outer_axes)?;
            let mut shape: Vec<usize> = xs.v.shape.get(..outer_axes)?.to_vec();
            let mut strides: Vec<usize> = xs.strides.get(..outer_axes)?.to_vec();
            shape.extend(xs.v.shape.get(outer_axes + 1..)?);
            strides.extend(xs.strides.get(outer_axes + 1..)?);
            shape.push(items);
            strides.push(1);
            let data = gather_data(
                &xs.v.data,
                &shape,
                &Layout {
                    offset: xs.offset,
                    strides,
                },
            )?;
            let lines = atoms_in(shape.get(..shape.len() - 1)?);
            (
                Batched::dense(
                    Array {
                        shape: xs.v.shape.clone(),
                        data,
                    },
                    nb,
                ),
                Some([lines, items, 1]),
            )
        } else if let Some(start) = match (name, &seed_data) {
            ("reduce", None) => Some(crate::strided::Start::First),
            // (`fold` only: `reduce/zero` by `f.+` adds its seed last.)
            ("fold", Some(s)) => Some(crate::strided::Start::Each(s)),
            _ => None,
        } && let Some(r) =
            crate::strided::reduce_view(op, intrinsics::fold_order(name, op), &xs, (outer_axes, 1), start)
        {
            // A view reduced (or folded from its seeds) where it lies,
            // never laid out.
            return Some(r);
        } else {
            (xs.densify()?, None)
        };
        // [outer, items, inner]: the batch axes and the argument's frame,
        // the items, and each item's atoms.
        let outer: usize = xs.v.shape.get(..outer_axes)?.iter().product();
        let items = *xs.v.shape.get(outer_axes)?;
        let inner: usize = item_shape.iter().product();
        let order = intrinsics::fold_order(name, op);
        let dims = dims_override.unwrap_or([outer, items, inner]);
        let folded = intrinsics::fold_primitive(op, seed_data.as_ref(), &xs.v.data, dims, order)?.ok()?;
        let mut shape: Vec<usize> = xs.v.shape.get(..outer_axes)?.to_vec();
        match (name, seed) {
            ("scan", _) => shape.push(items + 1),
            ("iscan", _) => shape.push(items),
            _ => {}
        }
        shape.extend(item_shape);
        Some(Batched::dense(Array { shape, data: folded }, nb))
    }

    /// A fold by any function over a frame (of the batch or the
    /// argument's own): for each item in turn, the function applied once
    /// to every cell's accumulator and item, batched. `scan` and `iscan`
    /// keep every accumulator, woven along a new item axis.
    fn fold_by_items(
        &mut self,
        name: &str,
        op: &Batched<'p>,
        seed: Option<&(Batched<'p>, Vec<usize>)>,
        xs: &Batched<'p>,
        xcell: &[usize],
    ) -> Try<Batched<'p>> {
        let xframe = xs.own().len().checked_sub(xcell.len())?;
        let frame: Vec<usize> = xs.own().get(..xframe)?.to_vec();
        let nb = xs.nb.max(seed.map_or(0, |(s, _)| s.nb));
        if nb == 0 && frame.is_empty() && !captures_batch(op) {
            // One fold: the intrinsic's own loop.
            return None;
        }
        let xs = self.expand(xs, nb)?;
        let axis = nb + xframe;
        let items = *xs.v.shape.get(axis)?;
        let step = *xs.strides.get(axis)?;
        let item_cell: Vec<usize> = xcell.get(1..)?.to_vec();
        let mut item_shape = xs.v.shape.clone();
        item_shape.remove(axis);
        let mut item_strides = xs.strides.clone();
        item_strides.remove(axis);
        // Each item a view of the argument (nothing copied) — unless the
        // items lie next to each other and their atoms far apart (a fold
        // along the rows of a matrix, lifted over the rows): then every
        // step would read one atom per cache line, so the argument is
        // laid out once with the items outermost, each item contiguous.
        let item_atoms = atoms_in(&item_shape);
        let spread = |shape: &[usize], strides: &[usize]| -> bool {
            shape
                .iter()
                .zip(strides)
                .any(|(&n, &s)| n > 1 && s != 0 && s > step)
        };
        let scattered = items > 1
            && item_atoms > 1
            && step != 0
            && spread(&item_shape, &item_strides)
            && item_shape
                .iter()
                .zip(&item_strides)
                .all(|(&n, &s)| n <= 1 || s != 0);
        let (source, base, item_step, item_strides) = if scattered {
            let mut shape = vec![items];
            shape.extend(&item_shape);
            let mut strides = vec![step];
            strides.extend(&item_strides);
            let data = gather_data(
                &xs.v.data,
                &shape,
                &Layout {
                    offset: xs.offset,
                    strides,
                },
            )?;
            let source = Batched::dense(Array { shape, data }, 0);
            (source, 0, item_atoms, row_major(&item_shape))
        } else {
            (xs.clone(), xs.offset, step, item_strides)
        };
        let item = |i: usize| -> Try<Batched<'p>> {
            Some(source.view(
                item_shape.clone(),
                nb,
                base.checked_add(i.checked_mul(item_step)?)?,
                item_strides.clone(),
            ))
        };
        let (mut acc, acell, first) = match seed {
            Some((s, scell)) => (s.clone(), scell.clone(), 0),
            None if items == 0 => return None,
            None => (item(0)?, item_cell.clone(), 1),
        };
        let scanning = matches!(name, "scan" | "iscan");
        let mut steps = Vec::new();
        if scanning {
            steps.push(acc.clone());
        }
        for i in first..items {
            if let Some(fuel) = &mut self.fuel {
                *fuel = fuel.checked_sub(1)?;
            }
            acc = self.apply_batched(op, vec![(acc, acell.clone()), (item(i)?, item_cell.clone())])?;
            if scanning {
                steps.push(acc.clone());
            }
        }
        if !scanning {
            return Some(acc);
        }
        // Every accumulator laid over [batch, frame, cell] (a step may
        // have gained batch axes from what the function captures), one
        // after another: the result is a view of them, the new item axis
        // outermost in memory. Each step is one contiguous copy (weaving
        // them under each cell would write one atom per cache line), and
        // each item of the scan, as a later loop over the items reads it,
        // is again a contiguous run.
        let nb = steps.iter().map(|s| s.nb).max().unwrap_or(nb).max(nb);
        let mut full: Vec<usize> = self.batch.get(..nb)?.to_vec();
        full.extend(&frame);
        full.extend(&acell);
        let outer_axes: Vec<usize> = full.get(..nb + xframe)?.to_vec();
        let outer: usize = atoms_in(&outer_axes);
        let size: usize = atoms_in(&acell);
        let k = steps.len();
        let element = outer.checked_mul(size)?;
        if !crate::eval::batch_fits(element.saturating_mul(k)) {
            return None;
        }
        let mut data: Option<Data<Fun<'p>>> = None;
        for b in &steps {
            let part = self
                .expand(b, nb)?
                .laid_over(acell.len(), nb, nb + xframe, &full)?
                .data;
            if part.len() != element {
                return None;
            }
            Data::append_to(&mut data, part, element * k).ok()?;
        }
        let data = data.unwrap_or_else(|| xs.v.data.empty_like());
        stacked_view(data, nb, &outer_axes, &[k], &acell)
    }

    /// For the lambda `f` holds, whose body `(g p)` applies one function
    /// (no frame of functions) to its parameter (a lift the checker
    /// wrote around `g`): the cell `g` takes (`None` for any other body,
    /// or when the shape is not known from the lambda's environment).
    fn param_cell(&self, f: &Batched<'p>) -> Option<Vec<usize>> {
        let Data::Atoms(atoms) = &f.v.data else {
            return None;
        };
        let Atom::Fun(Fun::Lambda { param, body, env }) = atoms.get(f.offset)? else {
            return None;
        };
        if f.nb != 0 || !f.v.shape.is_empty() || lambda_params(body) != 0 {
            return None;
        }
        let TExprKind::App { func, arg, lifted } = &body.kind else {
            return None;
        };
        if !matches!(arg.kind, TExprKind::Var(v) if v == *param)
            || !pure(func)
            || !self.shape_of(&lifted.fun_frame, env, arg.span).ok()?.is_empty()
        {
            return None;
        }
        self.shape_of(&lifted.arg_cell, env, arg.span).ok()
    }

    /// `(iterate n f x)` over a frame of cells `x`: `f` applied `n` times
    /// to all of them at once (`n` the same for every cell).
    fn iterate_batched(&mut self, args: &[(Batched<'p>, Vec<usize>)]) -> Try<Batched<'p>> {
        let [(n, _), (f, _), (x, xcell)] = args else {
            return None;
        };
        let times = match &n.v.data {
            Data::Int(v) if n.nb == 0 && n.v.shape.is_empty() => usize::try_from(*v.get(n.offset)?).ok()?,
            _ => return None,
        };
        let mut xcell = xcell.clone();
        if x.nb == 0 && x.own().len() == xcell.len() && !captures_batch(f) {
            // The whole array the state, stepped by a function of cells
            // of a shorter shape (lifted over the rest in each step):
            // each cell iterated on its own, as if `iterate` were lifted.
            match self.param_cell(f) {
                Some(cell) if cell.len() < xcell.len() && xcell.ends_with(&cell) => xcell = cell,
                // One loop: the intrinsic's own.
                _ => return None,
            }
        }
        let xcell = &xcell;
        // Small cells: the cells in lanes (over many cells, or a step
        // reading the batch), or each cell's loop a cell program.
        if f.nb == 0
            && f.v.shape.is_empty()
            && let Data::Atoms(atoms) = &f.v.data
            && let Some(Atom::Fun(step)) = atoms.get(f.offset)
            && let Some(r) = self.iterate_across(times as u64, step, x, xcell)
        {
            return Some(r);
        }
        if f.nb == 0
            && f.v.shape.is_empty()
            && let Some(step) = crate::masked::single_lambda(&f.densify()?.v)
        {
            let dense = x.densify()?;
            let outer = dense.v.shape.len().checked_sub(xcell.len())?;
            let cells = Array {
                shape: std::iter::once(atoms_in(dense.v.shape.get(..outer)?))
                    .chain(xcell.iter().copied())
                    .collect(),
                data: dense.v.data.clone(),
            };
            if let Some(r) = self.loop_by_cell_program(None, Some(times as u64), &step, &cells, xcell) {
                return Some(Batched::dense(
                    Array {
                        shape: dense.v.shape.clone(),
                        ..r
                    },
                    dense.nb,
                ));
            }
        }
        let mut x = x.clone();
        for _ in 0..times {
            if let Some(fuel) = &mut self.fuel {
                *fuel = fuel.checked_sub(1)?;
            }
            x = self.apply_batched(f, vec![(x, xcell.clone())])?;
        }
        Some(x)
    }
}

/// A sum or product over every atom of each cell (`f.sum`, `any` …): a
/// fold of the cell's atoms from the operator's unit, one loop for the
/// whole batch and frame.
pub(crate) fn whole_cell_fold<'p>(name: &str, args: &[(Batched<'p>, Vec<usize>)]) -> Try<Batched<'p>> {
    let (xs, xcell) = args.first()?;
    let xframe = xs.own().len().checked_sub(xcell.len())?;
    let nb = xs.nb;
    if name != "count"
        && let Some((op, unit)) = intrinsics::whole_fold(name, &xs.v.data)
        && let Some(r) = crate::strided::reduce_view(
            op,
            intrinsics::fold_order(name, op),
            xs,
            (nb + xframe, xcell.len()),
            crate::strided::Start::Unit(&unit),
        )
    {
        // A view (a block of a stencil) folded where it lies.
        return Some(r);
    }
    let xs = xs.densify()?;
    let outer_shape: Vec<usize> = xs.v.shape.get(..nb + xframe)?.to_vec();
    let outer = atoms_in(&outer_shape);
    let items = atoms_in(xcell);
    if name == "count" {
        let Data::Bool(b) = &xs.v.data else {
            return None;
        };
        let counts: Vec<i64> = if items == 0 {
            vec![0; outer]
        } else {
            b.chunks_exact(items)
                .take(outer)
                .map(|c| c.iter().filter(|x| **x).count() as i64)
                .collect()
        };
        return Some(Batched::dense(
            Array {
                shape: outer_shape,
                data: Data::Int(counts.into()),
            },
            nb,
        ));
    }
    let (op, unit) = intrinsics::whole_fold(name, &xs.v.data)?;
    let seed = unit.repeated(outer)?;
    let order = intrinsics::fold_order(name, op);
    let folded = intrinsics::fold_primitive(op, Some(&seed), &xs.v.data, [outer, items, 1], order)?.ok()?;
    Some(Batched::dense(
        Array {
            shape: outer_shape,
            data: folded,
        },
        nb,
    ))
}

/// Indices in a chunk of a gather checked at once (in cache).
const GATHER_CHUNK: usize = 1024;
/// A chunk whose indices break their run at most once per this many is
/// copied a block of this many at a time where a block is one run.
const RUN_BLOCK: usize = 64;

/// The positions of a gather (`outer`, row-major) as lines along the last
/// axis: the array's cells `steps[a]` atoms apart along axis `a`, the
/// indices `isteps[a]` apart (a zero step: one index for every position
/// along the axis).
struct Lines<'a> {
    outer: &'a [usize],
    steps: &'a [usize],
    isteps: &'a [usize],
}

impl Lines<'_> {
    /// The first index where every position reads the same array and the
    /// indices, laid contiguously, count up one at a time within `items`
    /// (a slice of the array's items): the result is a view.
    fn run_view(&self, indices: &[i64], offset: usize, items: usize) -> Option<usize> {
        let n = atoms_in(self.outer);
        if n == 0 || self.steps.iter().any(|&s| s != 0) || *self.isteps != row_major(self.outer) {
            return None;
        }
        let line = indices.get(offset..offset.checked_add(n)?)?;
        let first = usize::try_from(*line.first()?).ok()?;
        let run = |line: &[i64]| {
            line.chunks(GATHER_CHUNK)
                .enumerate()
                .all(|(c, chunk)| is_run(chunk, (first + c * GATHER_CHUNK) as i64))
        };
        (first.checked_add(n)? <= items
            && crate::fmath::widest(
                #[inline(always)]
                || run(line),
            ))
        .then_some(first)
    }

    /// The gathered items, row-major; `None` where an index is not below
    /// `items`.
    fn gather<T: Copy>(
        &self,
        v: &[T],
        indices: &[i64],
        offset: usize,
        items: usize,
        item: usize,
    ) -> Option<Vec<T>> {
        let n = atoms_in(self.outer);
        let mut out = Vec::with_capacity(n.checked_mul(item)?);
        if n == 0 {
            return Some(out);
        }
        let (len, lead) = match self.outer.split_last() {
            Some((&len, lead)) => (len, lead),
            None => (1, &[][..]),
        };
        let last = |s: &[usize]| s.last().copied().unwrap_or(0);
        let (step, istep) = (last(self.steps), last(self.isteps));
        let lead_steps = self.steps.get(..lead.len())?;
        let lead_isteps = self.isteps.get(..lead.len())?;
        let starts = Odometer {
            outer: lead,
            steps: lead_steps,
            at: vec![0; lead.len()],
            base: 0,
        };
        let istarts = Odometer {
            outer: lead,
            steps: lead_isteps,
            at: vec![0; lead.len()],
            base: offset,
        };
        let lines = atoms_in(lead);
        let mut spread = Vec::new();
        for (x, i) in starts.zip(istarts).take(lines) {
            let v = v.get(x..)?;
            match istep {
                1 => gather_line(
                    v,
                    indices.get(i..i.checked_add(len)?)?,
                    step,
                    items,
                    item,
                    &mut out,
                )?,
                0 => {
                    // One index for the whole line.
                    let at = usize::try_from(*indices.get(i)?).ok().filter(|&i| i < items)? * item;
                    for p in 0..len {
                        let s = p * step + at;
                        out.extend_from_slice(v.get(s..s + item)?);
                    }
                }
                _ => {
                    spread.clear();
                    spread.extend((0..len).map(|p| indices.get(i + p * istep).copied()));
                    let line: Option<Vec<i64>> = spread.iter().copied().collect();
                    gather_line(v, &line?, step, items, item, &mut out)?;
                }
            }
        }
        Some(out)
    }
}

/// [`gather_line`] where every position reads the same items.
#[inline(always)]
fn gather_shared<T: Copy>(v: &[T], index: &[i64], items: usize, item: usize, out: &mut Vec<T>) -> Option<()> {
    let v = v.get(..items.checked_mul(item)?)?;
    // The items of the runs met so far that continue one another, copied
    // as one when the next piece does not continue them.
    let mut run = 0..0;
    let flush = |run: &mut std::ops::Range<usize>, out: &mut Vec<T>| -> Option<()> {
        out.extend_from_slice(v.get(run.start * item..run.end * item)?);
        *run = 0..0;
        Some(())
    };
    for chunk in index.chunks(GATHER_CHUNK) {
        let first = *chunk.first()?;
        if is_run(chunk, first) {
            let lo = usize::try_from(first).ok()?;
            let hi = lo.checked_add(chunk.len()).filter(|&hi| hi <= items)?;
            if run.end != lo {
                flush(&mut run, out)?;
                run.start = lo;
            }
            run.end = hi;
            continue;
        }
        // The largest index (as unsigned: a negative one is larger
        // than any) and how many times the run breaks.
        let (top, breaks) = chunk
            .iter()
            .zip(chunk.iter().skip(1))
            .fold((first as u64, 0usize), |(m, b), (&i, &j)| {
                (m.max(j as u64), b + usize::from(j != i.wrapping_add(1)))
            });
        if top >= items as u64 {
            return None;
        }
        if breaks * RUN_BLOCK > chunk.len() {
            flush(&mut run, out)?;
            gather_checked(v, chunk, items, item, out)?;
            continue;
        }
        // Mostly runs (a shifted or wrapped range): a block that is one
        // is copied, any other gathered.
        for block in chunk.chunks(RUN_BLOCK) {
            let first = *block.first()?;
            if is_run(block, first) {
                let lo = first as usize;
                if run.end != lo {
                    flush(&mut run, out)?;
                    run.start = lo;
                }
                run.end = lo + block.len();
            } else {
                flush(&mut run, out)?;
                gather_checked(v, block, items, item, out)?;
            }
        }
    }
    flush(&mut run, out)
}

/// Items gathered by indices already known to be below `items`.
#[inline(always)]
fn gather_checked<T: Copy>(
    v: &[T],
    index: &[i64],
    items: usize,
    item: usize,
    out: &mut Vec<T>,
) -> Option<()> {
    if item == 1 {
        // Clamping changes no index (so `items` > 0), and lets the loads
        // go unchecked.
        let top = items.checked_sub(1)?;
        let v = v.get(..items)?;
        out.extend(index.iter().map(|&i| v[(i as usize).min(top)]));
    } else {
        for &i in index {
            let s = i as usize * item;
            out.extend_from_slice(v.get(s..s + item)?);
        }
    }
    Some(())
}

/// Whether `chunk` counts up by one from `first` (one vectorised pass).
#[inline(always)]
fn is_run(chunk: &[i64], first: i64) -> bool {
    chunk
        .iter()
        .zip(0i64..)
        .fold(0, |acc, (&i, k)| acc | (i ^ first.wrapping_add(k)))
        == 0
}

/// A gather along one axis, appended to `out`: the item at `p * step +
/// index[p] * item` for each position `p`; `None` where an index is not
/// below `items`. Where every position reads the same items (`step` 0),
/// the indices go by chunks: a chunk that counts up by one is one copy
/// of consecutive items; any other has its indices checked at once (a
/// vectorised pass over what is then in cache), then is copied by blocks
/// where it breaks its run rarely (a shifted range that wraps around),
/// else gathered in a loop without checks that can fail.
fn gather_line<T: Copy>(
    v: &[T],
    index: &[i64],
    step: usize,
    items: usize,
    item: usize,
    out: &mut Vec<T>,
) -> Option<()> {
    if step == 0 {
        return crate::fmath::widest(
            #[inline(always)]
            || gather_shared(v, index, items, item, out),
        );
    }
    let checked = |i: i64| usize::try_from(i).ok().filter(|&i| i < items);
    for (p, &i) in index.iter().enumerate() {
        let s = p * step + checked(i)? * item;
        out.extend_from_slice(v.get(s..s + item)?);
    }
    Some(())
}

fn pick<T: Clone>(v: &[T], starts: impl Iterator<Item = usize>, n: usize, item: usize) -> Option<Vec<T>> {
    let mut out = Vec::with_capacity(n.checked_mul(item)?);
    if item == 1 {
        // (Not `collect` into an `Option<Vec<_>>`: that cannot reserve
        // ahead and grows the vector by doubling.)
        for s in starts {
            out.push(v.get(s)?.clone());
        }
        return Some(out);
    }
    for s in starts {
        out.extend_from_slice(v.get(s..s.checked_add(item)?)?);
    }
    Some(out)
}

/// `item` atoms from each start, in order (records field by field).
pub(crate) fn pick_data<'p>(d: &Data<Fun<'p>>, starts: &[usize], item: usize) -> Option<Data<Fun<'p>>> {
    pick_from(d, starts.iter().copied(), starts.len(), item)
}

/// `item` atoms from each of the `n` starts the iterator gives.
fn pick_from<'p, I>(d: &Data<Fun<'p>>, starts: I, n: usize, item: usize) -> Option<Data<Fun<'p>>>
where
    I: Iterator<Item = usize>,
{
    Some(match d {
        Data::Int(v) => Data::Int(pick(v, starts, n, item)?.into()),
        Data::Float(v) => Data::Float(pick(v, starts, n, item)?.into()),
        Data::Bool(v) => Data::Bool(pick(v, starts, n, item)?.into()),
        Data::Atoms(v) => Data::Atoms(pick(v, starts, n, item)?.into()),
        Data::Records(r) => {
            let starts: Vec<usize> = starts.collect();
            Data::records(r.map_fields(n * item, |d, size| {
                let scaled: Vec<usize> = starts.iter().map(|s| s * size).collect();
                pick_data(d, &scaled, item * size)
            })?)
        }
    })
}

/// The first atom of each position's item in a gather: row-major over the
/// positions' axes `outer`, `steps[a]` atoms apart along axis `a`, plus
/// the position's index (already checked to be in bounds) times `item`.
/// The innermost axis runs as a plain loop, the outer ones by an odometer.
#[derive(Clone)]
struct GatherStarts<'a> {
    outer: &'a [usize],
    steps: &'a [usize],
    index: std::slice::Iter<'a, i64>,
    item: usize,
    odometer: Vec<usize>,
    base: usize,
}

impl Iterator for GatherStarts<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let i = *self.index.next()? as usize;
        let start = self.base + i * self.item;
        for axis in (0..self.outer.len()).rev() {
            self.odometer[axis] += 1;
            self.base += self.steps[axis];
            if self.odometer[axis] < self.outer[axis] {
                break;
            }
            self.base -= self.steps[axis] * self.outer[axis];
            self.odometer[axis] = 0;
        }
        Some(start)
    }
}

/// The offset of each position of `outer` in row-major order, `steps[a]`
/// atoms apart along axis `a`, from `base` (without end: take as many as
/// there are positions).
pub(crate) struct Odometer<'a> {
    pub outer: &'a [usize],
    pub steps: &'a [usize],
    pub at: Vec<usize>,
    pub base: usize,
}

impl Iterator for Odometer<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let start = self.base;
        for axis in (0..self.outer.len()).rev() {
            self.at[axis] += 1;
            self.base += self.steps[axis];
            if self.at[axis] < self.outer[axis] {
                break;
            }
            self.base -= self.steps[axis] * self.outer[axis];
            self.at[axis] = 0;
        }
        Some(start)
    }
}

/// The position `at[i]` (row-major over `batch`) of a value with all the
/// batch's axes, for each `i`: a value with one batch axis of `at.len()`
/// positions.
fn pick_positions<'p>(b: &Batched<'p>, batch: &[usize], at: &[usize]) -> Try<Batched<'p>> {
    let nb = batch.len();
    let steps = b.strides.get(..nb)?;
    let own: Vec<usize> = b.own().to_vec();
    let own_steps = b.strides.get(nb..)?.to_vec();
    let row = atoms_in(&own);
    // Each position's offset, then its own atoms gathered.
    let mut offsets = Vec::with_capacity(at.len());
    for &p in at {
        let mut rest = p;
        let mut offset = b.offset;
        for (d, s) in batch.iter().zip(steps).rev() {
            offset += (rest % d.max(&1)) * s;
            rest /= d.max(&1);
        }
        offsets.push(offset);
    }
    if own_steps == row_major(&own) {
        let mut shape = vec![at.len()];
        shape.extend(own);
        let data = pick_data(&b.v.data, &offsets, row)?;
        return Some(Batched::dense(Array { shape, data }, 1));
    }
    let mut data = b.v.data.with_capacity_like(at.len().saturating_mul(row));
    for offset in offsets {
        let cell = gather_data(
            &b.v.data,
            &own,
            &Layout {
                offset,
                strides: own_steps.clone(),
            },
        )?;
        data.append(cell).ok()?;
    }
    let mut shape = vec![at.len()];
    shape.extend(own);
    Some(Batched::dense(Array { shape, data }, 1))
}

/// Rows of `yes` where `go` holds and rows of `no` where it does not, in
/// order (`size` atoms a row; records field by field).
fn merge_data<'p>(go: &[bool], yes: &Data<Fun<'p>>, no: &Data<Fun<'p>>, size: usize) -> Try<Data<Fun<'p>>> {
    fn merge<T: Clone>(go: &[bool], yes: &[T], no: &[T], size: usize) -> Option<Vec<T>> {
        if size == 1 {
            let (mut y, mut n) = (yes.iter(), no.iter());
            return go
                .iter()
                .map(|g| if *g { y.next() } else { n.next() }.cloned())
                .collect();
        }
        let mut out = Vec::with_capacity(go.len() * size);
        let (mut y, mut n) = (yes.chunks_exact(size.max(1)), no.chunks_exact(size.max(1)));
        for g in go {
            if size == 0 {
                continue;
            }
            out.extend_from_slice(if *g { y.next()? } else { n.next()? });
        }
        Some(out)
    }
    Some(match (yes, no) {
        (Data::Int(a), Data::Int(b)) => Data::Int(merge(go, a, b, size)?.into()),
        (Data::Float(a), Data::Float(b)) => Data::Float(merge(go, a, b, size)?.into()),
        (Data::Bool(a), Data::Bool(b)) => Data::Bool(merge(go, a, b, size)?.into()),
        (Data::Atoms(a), Data::Atoms(b)) => Data::Atoms(merge(go, a, b, size)?.into()),
        (Data::Records(a), Data::Records(b)) => zip_records(a, b, go.len() * size, |x, y, atoms| {
            merge_data(go, x, y, size * atoms)
        })?,
        _ => return None,
    })
}

/// Two frames of the same records combined field by field by `f` (given
/// both fields' buffers and the field's atoms per record) into `count`
/// records; `None` when their fields differ.
fn zip_records<'p>(
    a: &remora_value::Records<Fun<'p>>,
    b: &remora_value::Records<Fun<'p>>,
    count: usize,
    mut f: impl FnMut(&Data<Fun<'p>>, &Data<Fun<'p>>, usize) -> Try<Data<Fun<'p>>>,
) -> Try<Data<Fun<'p>>> {
    if a.fields.len() != b.fields.len() {
        return None;
    }
    let mut fields = Vec::with_capacity(a.fields.len());
    for (fa, fb) in a.fields.iter().zip(&b.fields) {
        if fa.name != fb.name || fa.cell != fb.cell {
            return None;
        }
        fields.push(remora_value::RecordField {
            name: fa.name.clone(),
            cell: fa.cell.clone(),
            data: f(&fa.data, &fb.data, fa.size())?,
        });
    }
    Some(Data::records(remora_value::Records { count, fields }))
}

/// `select`'s elementwise choice: for each condition, `size` atoms of `a`
/// or of `b` (records field by field).
fn choose_data<'p>(c: &[bool], a: &Data<Fun<'p>>, b: &Data<Fun<'p>>, size: usize) -> Try<Data<Fun<'p>>> {
    fn choose<T: Clone>(c: &[bool], a: &[T], b: &[T], size: usize) -> Vec<T> {
        if size == 1 {
            return c
                .iter()
                .zip(a.iter().zip(b))
                .map(|(c, (a, b))| if *c { a.clone() } else { b.clone() })
                .collect();
        }
        let mut out = Vec::with_capacity(c.len() * size);
        for ((c, a), b) in c
            .iter()
            .zip(a.chunks_exact(size.max(1)))
            .zip(b.chunks_exact(size.max(1)))
        {
            out.extend_from_slice(if *c { a } else { b });
        }
        out
    }
    Some(match (a, b) {
        (Data::Int(a), Data::Int(b)) => Data::Int(choose(c, a, b, size).into()),
        (Data::Float(a), Data::Float(b)) => Data::Float(choose(c, a, b, size).into()),
        (Data::Bool(a), Data::Bool(b)) => Data::Bool(choose(c, a, b, size).into()),
        (Data::Atoms(a), Data::Atoms(b)) => Data::Atoms(choose(c, a, b, size).into()),
        (Data::Records(a), Data::Records(b)) => zip_records(a, b, c.len() * size, |x, y, atoms| {
            choose_data(c, x, y, size * atoms)
        })?,
        _ => return None,
    })
}

/// Element `j` of `k` of a frame literal (`outer` cells of `cell` atoms)
/// written into its place in the interleaved result: for each batch
/// position, the cells of every element in turn. `out` starts empty and
/// is sized by the first element.
fn weave_into<'p>(
    out: &mut Data<crate::eval::Fun<'p>>,
    part: &Data<crate::eval::Fun<'p>>,
    j: usize,
    k: usize,
    outer: usize,
    cell: usize,
) -> Try<()> {
    fn weave<T: Clone>(
        out: &mut remora_value::Buf<T>,
        part: &[T],
        j: usize,
        k: usize,
        outer: usize,
        cell: usize,
    ) -> Try<()> {
        let part = part.get(..outer * cell)?;
        if part.is_empty() {
            return Some(());
        }
        if out.is_empty() {
            *out = vec![part.first()?.clone(); outer * cell * k].into();
        }
        let out: &mut [T] = out;
        if cell == 1 {
            for (o, x) in out.iter_mut().skip(j).step_by(k).zip(part) {
                *o = x.clone();
            }
        } else {
            for (o, x) in out
                .chunks_exact_mut(cell)
                .skip(j)
                .step_by(k)
                .zip(part.chunks_exact(cell))
            {
                o.clone_from_slice(x);
            }
        }
        Some(())
    }
    match (out, part) {
        (Data::Int(o), Data::Int(p)) => weave(o, p, j, k, outer, cell),
        (Data::Float(o), Data::Float(p)) => weave(o, p, j, k, outer, cell),
        (Data::Bool(o), Data::Bool(p)) => weave(o, p, j, k, outer, cell),
        (Data::Atoms(o), Data::Atoms(p)) => weave(o, p, j, k, outer, cell),
        (o @ Data::Records(_), Data::Records(p)) => {
            // The first element sizes every field (an empty `out` has none).
            let taken = std::mem::replace(o, Data::Int(Vec::new().into()));
            let mut records = match taken {
                Data::Records(r) if r.count > 0 => {
                    std::sync::Arc::try_unwrap(r).unwrap_or_else(|r| (*r).clone())
                }
                _ => p.map_fields(outer * cell * k, |d, _| Some(d.empty_like()))?,
            };
            records.count = outer * cell * k;
            for (of, pf) in records.fields.iter_mut().zip(&p.fields) {
                let size = pf.size();
                weave_into(&mut of.data, &pf.data, j, k, outer, cell * size)?;
            }
            *o = Data::records(records);
            Some(())
        }
        _ => None,
    }
}

/// Leading-axis item selection inside a batch (`head`, `last`, `index`,
/// `nth` at an index the same for every cell; `tail`, `curtail`, `take`,
/// `drop` and the `-right`s): a view of the argument along the cells'
/// first axis (an offset and the same steps), nothing copied.
fn items_batched<'p>(p: &crate::eval::Prim<'p>, all: &[(Batched<'p>, Vec<usize>)]) -> Try<Batched<'p>> {
    let dim = |k: usize| -> Try<usize> { usize::try_from(*p.indices.get(k)?.dims().first()?).ok() };
    let ((xs, cell), rest) = all.split_first()?;
    if rest.iter().any(|(a, _)| a.nb != 0) {
        return None;
    }
    // One index for every cell: a scalar of its own (an index array lifts
    // `nth`/`index` over a frame of its own, which is not this rule).
    let at = || -> Try<usize> {
        let index = &rest.first()?.0;
        match &index.v.data {
            Data::Int(i) if index.v.shape.is_empty() => usize::try_from(*i.get(index.offset)?).ok(),
            _ => None,
        }
    };
    let items = *cell.first()?;
    // (first item, how many, whether the axis stays)
    let (start, len, keep) = match p.name {
        "head" => (0, 1, false),
        "last" => (dim(0)?, 1, false),
        "tail" => (1, dim(0)?, true),
        "curtail" => (0, dim(0)?, true),
        "take" => (0, dim(0)?, true),
        "drop" => (dim(0)?, dim(1)?, true),
        "take-right" => (dim(1)?, dim(0)?, true),
        "drop-right" => (0, dim(1)?, true),
        _ => (at()?, 1, false),
    };
    if start.checked_add(len)? > items {
        // Out of range: the reference path reports it.
        return None;
    }
    let axis = xs.nb + xs.own().len().checked_sub(cell.len())?;
    let step = *xs.strides.get(axis)?;
    let mut shape = xs.v.shape.clone();
    let mut strides = xs.strides.clone();
    if keep {
        shape[axis] = len;
    } else {
        shape.remove(axis);
        strides.remove(axis);
    }
    Some(xs.view(
        shape,
        xs.nb,
        xs.offset.checked_add(start.checked_mul(step)?)?,
        strides,
    ))
}

/// `transpose2d` and `windows` over the batch and the argument's frame:
/// each a strided view of the argument (the two axes' steps swapped; the
/// item axis read as `[k+1 windows, w items]` with the same step twice),
/// no atom copied.
fn view_batched<'p>(p: &crate::eval::Prim<'p>, all: &[(Batched<'p>, Vec<usize>)]) -> Try<Batched<'p>> {
    let [(xs, cell)] = all else {
        return None;
    };
    let axis = xs.nb + xs.own().len().checked_sub(cell.len())?;
    let mut shape = xs.v.shape.clone();
    let mut strides = xs.strides.clone();
    match p.name {
        "transpose2d" => {
            if cell.len() != 2 {
                return None;
            }
            shape.swap(axis, axis + 1);
            strides.swap(axis, axis + 1);
        }
        _ => {
            let w = usize::try_from(*p.indices.first()?.dims().first()?).ok()?;
            let items = *cell.first()?;
            let windows = items.checked_sub(w)?.checked_add(1)?;
            let step = *strides.get(axis)?;
            shape.splice(axis..=axis, [windows, w]);
            strides.splice(axis..=axis, [step, step]);
        }
    }
    // A view: the same atoms under other steps, copied only by what
    // needs them dense.
    check_size(atoms_in(&shape), Span::default()).ok()?;
    Some(xs.view(shape, xs.nb, xs.offset, strides))
}

/// `length`, `reshape`, `flatten` and `replicate` over the batch and the
/// argument's frame, none of which moves an atom: `length` is the item
/// count at every position (one atom, replicated), `reshape` and
/// `flatten` the same atoms under another cell shape, `replicate` the
/// cell repeated by zero steps.
fn reshape_batched<'p>(p: &crate::eval::Prim<'p>, all: &[(Batched<'p>, Vec<usize>)]) -> Try<Batched<'p>> {
    let [(xs, cell)] = all else {
        return None;
    };
    let axis = xs.nb + xs.own().len().checked_sub(cell.len())?;
    let outer = xs.v.shape.get(..axis)?.to_vec();
    let index = |k: usize| -> Try<Vec<usize>> {
        p.indices
            .get(k)?
            .dims()
            .into_iter()
            .map(|d| usize::try_from(d).ok())
            .collect()
    };
    match p.name {
        "length" => Some(Batched {
            strides: vec![0; outer.len()],
            v: Array {
                shape: outer,
                data: Data::Int(vec![i64::try_from(*cell.first()?).ok()?].into()),
            },
            nb: xs.nb,
            offset: 0,
        }),
        "replicate" => {
            let frame = index(0)?;
            let mut shape = outer.clone();
            shape.extend(&frame);
            shape.extend(cell);
            let mut strides = xs.strides.get(..axis)?.to_vec();
            strides.extend(std::iter::repeat_n(0, frame.len()));
            strides.extend(xs.strides.get(axis..)?);
            Some(xs.view(shape, xs.nb, xs.offset, strides))
        }
        _ => {
            let new_cell = if p.name == "flatten" {
                let (m, n) = (*index(0)?.first()?, *index(1)?.first()?);
                std::iter::once(m.checked_mul(n)?).chain(index(2)?).collect()
            } else {
                index(1)?
            };
            if atoms_in(&new_cell) != atoms_in(cell) || atoms_in(cell) == usize::MAX {
                return None;
            }
            let dense = xs.densify()?;
            let mut shape = outer;
            shape.extend(new_cell);
            Some(Batched::dense(
                Array {
                    shape,
                    data: dense.v.data,
                },
                xs.nb,
            ))
        }
    }
}

/// Parts laid one after another, each `lead ++ own` densely, viewed as
/// `lead ++ frame ++ own` (the parts counted by `frame`, outermost in
/// memory): each part, and each cell of `own`, stays one contiguous run.
fn stacked_view<'p>(
    data: Data<Fun<'p>>,
    nb: usize,
    lead: &[usize],
    frame: &[usize],
    own: &[usize],
) -> Try<Batched<'p>> {
    let cell = atoms_in(own);
    let part = atoms_in(lead).checked_mul(cell)?;
    let mut strides: Vec<usize> = row_major(lead).into_iter().map(|s| s * cell).collect();
    strides.extend(row_major(frame).into_iter().map(|s| s * part));
    strides.extend(row_major(own));
    let shape = lead.iter().chain(frame).chain(own).copied().collect();
    Some(Batched {
        v: Array { shape, data },
        nb,
        offset: 0,
        strides,
    })
}

/// `append` and `reverse` on dense arguments over their frames (the
/// batch axes included): for each position of the principal frame, the
/// items of both cells one after the other, or the cell's items in
/// reverse order. A shorter frame's cell serves a run of positions.
fn items_framed<'p>(name: &str, args: &[(Value<'p>, Vec<usize>)]) -> Option<Value<'p>> {
    let frame_of = |(v, cell): &(Value<'p>, Vec<usize>)| -> Option<Vec<usize>> {
        Some(v.shape.get(..v.rank().checked_sub(cell.len())?)?.to_vec())
    };
    match (name, args) {
        // No atoms: nothing moves (work in proportion to the atoms, not to
        // the dimensions).
        ("reverse", [(xs, _)]) if xs.data.is_empty() => Some(xs.clone()),
        ("reverse", [(xs, cell)]) => {
            let frame = frame_of(&args[0])?;
            let (&d, item) = cell.split_first()?;
            let item = atoms_in(item);
            let order: Vec<usize> = (0..atoms_in(&frame))
                .flat_map(|p| (0..d).rev().map(move |i| (p * d + i) * item))
                .collect();
            let data = pick_data(&xs.data, &order, item)?;
            Some(Array {
                shape: xs.shape.clone(),
                data,
            })
        }
        ("append", [a, b]) => {
            let (fa, fb) = (frame_of(a)?, frame_of(b)?);
            let frame = if fa.len() >= fb.len() {
                fa.clone()
            } else {
                fb.clone()
            };
            if !frame.starts_with(&fa) || !frame.starts_with(&fb) {
                return None;
            }
            let mut shape = frame.clone();
            shape.push(a.1.first()?.checked_add(*b.1.first()?)?);
            shape.extend(a.1.get(1..)?);
            if a.0.data.is_empty() && b.0.data.is_empty() {
                return Some(Array {
                    shape,
                    data: a.0.data.clone(),
                });
            }
            let n = atoms_in(&frame);
            let (ba, bb) = (atoms_in(&a.1), atoms_in(&b.1));
            let (ra, rb) = (n.checked_div(atoms_in(&fa))?, n.checked_div(atoms_in(&fb))?);
            // Each position's cell of `a`, then of `b`, read as blocks.
            let mut starts = Vec::with_capacity(2 * n);
            let joined = a.0.data.clone();
            let mut joined = joined;
            joined.append(b.0.data.clone()).ok()?;
            let b_at = a.0.data.len();
            for p in 0..n {
                starts.push((p / ra) * ba);
                starts.push(b_at + (p / rb) * bb);
            }
            let data = pick_blocks(&joined, &starts, ba, bb)?;
            Some(Array { shape, data })
        }
        _ => None,
    }
}

/// A sort of one row by its values (the radix sort of Ints).
type RowSort<T> = fn(&[T]) -> Result<Vec<T>, &'static str>;

/// Rows up to this long are ordered by a comparison sort of their keys
/// made unique by their positions (each row in cache), longer ones by the
/// radix sort.
const SHORT_ROW: usize = 1 << 12;

/// `sort`, `grade` and their Float forms over every row of a frame (the
/// batch axes included): each row ordered as the intrinsic orders one
/// vector (ascending, stable, NaN last), one pass over the rows.
pub(crate) fn sort_framed<'p>(name: &str, args: &[(Value<'p>, Vec<usize>)]) -> Option<Value<'p>> {
    use crate::sort::{Ends, rows_ordered};
    let [(xs, cell)] = args else {
        return None;
    };
    let d = *cell.first()?;
    if cell.len() != 1 || d == 0 {
        return None;
    }
    // Every row of `d` atoms of `v` sorted (`sort`) or graded, by `key`
    // (`wide`: keys of 64 bits, else in the high 32); `long` sorts a long
    // row by another way where there is one.
    fn by_rows<T: Copy + Default + Send + Sync>(
        v: &[T],
        d: usize,
        key: impl Fn(T) -> u64 + Sync,
        wide: bool,
        sort: bool,
        long: Option<RowSort<T>>,
    ) -> Result<(Vec<T>, Vec<i64>), &'static str> {
        if d <= SHORT_ROW {
            return Ok(if sort {
                (
                    rows_ordered(v, d, &key, wide, Ends::All, |row: &[T], i| row[i])?,
                    Vec::new(),
                )
            } else {
                (
                    Vec::new(),
                    rows_ordered(v, d, &key, wide, Ends::All, |_: &[T], i| i as i64)?,
                )
            });
        }
        let mut sorted = crate::kernel::buffer(if sort { v.len() } else { 0 })?;
        let mut graded = crate::kernel::buffer(if sort { 0 } else { v.len() })?;
        let mut keys = crate::kernel::buffer(d)?;
        for row in v.chunks_exact(d) {
            if let Some(long) = long.filter(|_| sort) {
                sorted.extend(long(row)?);
                continue;
            }
            keys.clear();
            keys.extend(row.iter().map(|&x| key(x)));
            let o = crate::sort::grade(&keys)?;
            if sort {
                sorted.extend(o.iter().map(|&i| row[i]));
            } else {
                graded.extend(o.iter().map(|&i| i as i64));
            }
        }
        Ok((sorted, graded))
    }
    // One row of Ints of a small range: graded by counting.
    if name == "grade"
        && let Data::Int(v) = &xs.data
        && v.len() == d
        && let Some(order) = crate::sort::grade_small_range(v)
    {
        return Some(Array {
            shape: xs.shape.clone(),
            data: Data::Int(order.ok()?.into()),
        });
    }
    let data = match (name, &xs.data) {
        // One row: the radix sort's own result, not copied into another.
        // (Out of memory: `None`, with the shortage noted, so that nothing
        // tries it again cell by cell.)
        ("sort", Data::Int(v)) if v.len() == d => Data::Int(crate::sort::sort_ints(v).ok()?.into()),
        ("sort" | "grade", Data::Int(v)) => {
            // Long rows: the radix sort of the values themselves.
            let long: RowSort<i64> = crate::sort::sort_ints;
            match by_rows(v, d, crate::sort::int_key, true, name == "sort", Some(long)).ok()? {
                (sorted, _) if name == "sort" => Data::Int(sorted.into()),
                (_, graded) => Data::Int(graded.into()),
            }
        }
        ("f.sort" | "f.grade", Data::Float(v)) => {
            match by_rows(v, d, crate::sort::float_key, false, name == "f.sort", None).ok()? {
                (sorted, _) if name == "f.sort" => Data::Float(sorted.into()),
                (_, graded) => Data::Int(graded.into()),
            }
        }
        _ => return None,
    };
    Some(Array {
        shape: xs.shape.clone(),
        data,
    })
}

/// Blocks alternately of `first` and `second` atoms from the starts, in
/// order (records field by field).
fn pick_blocks<'p>(
    d: &Data<Fun<'p>>,
    starts: &[usize],
    first: usize,
    second: usize,
) -> Option<Data<Fun<'p>>> {
    fn pick<T: Clone>(v: &[T], starts: &[usize], first: usize, second: usize) -> Option<Vec<T>> {
        let mut out = Vec::with_capacity(starts.len().div_ceil(2) * (first + second));
        for (k, &s) in starts.iter().enumerate() {
            let len = if k % 2 == 0 { first } else { second };
            out.extend_from_slice(v.get(s..s + len)?);
        }
        Some(out)
    }
    Some(match d {
        Data::Int(v) => Data::Int(pick(v, starts, first, second)?.into()),
        Data::Float(v) => Data::Float(pick(v, starts, first, second)?.into()),
        Data::Bool(v) => Data::Bool(pick(v, starts, first, second)?.into()),
        Data::Atoms(v) => Data::Atoms(pick(v, starts, first, second)?.into()),
        Data::Records(r) => Data::records(r.map_fields(
            starts.len().div_ceil(2) * (first + second),
            |f, size| {
                let scaled: Vec<usize> = starts.iter().map(|s| s * size).collect();
                pick_blocks(f, &scaled, first * size, second * size)
            },
        )?),
    })
}

/// Whether `e` is an intrinsic, instantiated or not.
fn names_intrinsic(e: &TExpr) -> bool {
    let mut head = e;
    while let TExprKind::TApp { func, .. } | TExprKind::IApp { func, .. } = &head.kind {
        head = func;
    }
    matches!(head.kind, TExprKind::Intrinsic(_))
}

/// Whether `e` applies an intrinsic whose batched rule gives a view of its
/// argument (no atom copied).
pub(crate) fn makes_view(e: &TExpr) -> bool {
    matches!(
        applied_intrinsic(e).0,
        Some("transpose2d" | "windows" | "replicate" | "transpose")
    )
}

/// For `e` an item selection from `var` at the top of its cells that
/// `items_batched` makes a view of (`(nth var 0)`, `(head var)`, `(take k
/// var)` …, an index a literal scalar): the expressions it reads besides
/// `var` (none: the literal), else `None`. A `let` bound to a view may be
/// read by any number of these, as none lays the view out.
fn selection_of(e: &TExpr, var: VarId) -> Option<Vec<&TExpr>> {
    let TExprKind::App { func, arg, .. } = &e.kind else {
        return None;
    };
    let is_var = |x: &TExpr| matches!(x.kind, TExprKind::Var(v) if v == var);
    let intrinsic = |mut x: &TExpr| loop {
        match &x.kind {
            TExprKind::TApp { func, .. } | TExprKind::IApp { func, .. } => x = func,
            TExprKind::Intrinsic(name) => break Some(*name),
            _ => break None,
        }
    };
    let literal_index = literal_int(arg);
    match &func.kind {
        TExprKind::App { func: f, arg: xs, .. }
            if literal_index && is_var(xs) && matches!(intrinsic(f), Some("nth" | "index")) =>
        {
            Some(Vec::new())
        }
        _ if is_var(arg)
            && matches!(
                intrinsic(func),
                Some("head" | "last" | "tail" | "curtail" | "take" | "drop" | "take-right" | "drop-right")
            ) =>
        {
            Some(Vec::new())
        }
        _ => None,
    }
}

/// Whether `e` is an Int literal of one atom (an index written out).
fn literal_int(e: &TExpr) -> bool {
    matches!(&e.kind, TExprKind::Array { atoms, .. }
        if atoms.len() == 1 && matches!(atoms[0].kind, TAtomKind::Int(_)))
}

/// Whether `e` takes leading items of a variable (`tail`, `curtail`,
/// `take`, `head` …) or one item at a literal index (`(nth planes 0)`): a
/// view from an offset of the variable's buffer, for an argument read in
/// place (a slice of anything else would be evaluated batched first, and
/// again where batching gave up).
fn slices_variable(e: &TExpr) -> bool {
    let is_var = |a: &TExpr| matches!(a.kind, TExprKind::Var(_));
    match applied_intrinsic(e) {
        (
            Some("head" | "last" | "tail" | "curtail" | "take" | "drop" | "take-right" | "drop-right"),
            Some(array),
        ) => is_var(array),
        (Some("nth" | "index"), Some(at)) => {
            literal_int(at)
                && matches!(&e.kind, TExprKind::App { func, .. }
                    if matches!(&func.kind, TExprKind::App { arg: array, .. } if is_var(array)))
        }
        _ => false,
    }
}

/// The intrinsic `e` applies (under its type and index applications), and
/// its last value argument.
fn applied_intrinsic(e: &TExpr) -> (Option<&'static str>, Option<&TExpr>) {
    let mut head = e;
    let mut last = None;
    while let TExprKind::App { func, .. } | TExprKind::TApp { func, .. } | TExprKind::IApp { func, .. } =
        &head.kind
    {
        if let TExprKind::App { arg, .. } = &head.kind {
            last = last.or(Some(&**arg));
        }
        head = func;
    }
    match head.kind {
        TExprKind::Intrinsic(name) => (Some(name), last),
        _ => (None, last),
    }
}

/// Whether `prim_batched` has a rule for the intrinsic (besides running it
/// once per position): the scalar primitives and the names its rules
/// match.
fn has_batched_rule(name: &str) -> bool {
    scalar::is_scalar_primitive(name)
        || crate::vocab::is_vocab(name)
        || matches!(
            name,
            "reduce"
                | "reduce/zero"
                | "fold"
                | "scan"
                | "iscan"
                | "iterate"
                | "f.sum"
                | "f.product"
                | "sum"
                | "product"
                | "any"
                | "all"
                | "count"
                | "while"
                | "select"
                | "scatter"
                | "index"
                | "index2d"
                | "nth"
                | "head"
                | "last"
                | "tail"
                | "curtail"
                | "take"
                | "drop"
                | "take-right"
                | "drop-right"
                | "rotate"
                | "transpose2d"
                | "windows"
                | "length"
                | "reshape"
                | "flatten"
                | "replicate"
                | "append"
                | "reverse"
                | "sort"
                | "grade"
                | "f.sort"
                | "f.grade"
                | "sort-by"
                | "grade-by"
                | "unique"
                | "unique-counts"
                | "searchsorted"
                | "searchsorted/right"
        )
}

/// `append` of two whole arrays (no frame, no batch): the atoms of each
/// copied once into the result from where they lie, a slice of a buffer
/// (`(drop 1 xs)`) read in place, not laid out first.
fn append_whole<'p>(all: &[(Batched<'p>, Vec<usize>)]) -> Try<Batched<'p>> {
    let [(a, acell), (b, bcell)] = all else {
        return None;
    };
    if a.nb != 0
        || b.nb != 0
        || a.v.shape != *acell
        || b.v.shape != *bcell
        || acell.get(1..) != bcell.get(1..)
    {
        return None;
    }
    let mut shape = acell.clone();
    *shape.first_mut()? = acell.first()?.checked_add(*bcell.first()?)?;
    let mut data = a.v.data.with_capacity_like(atoms_in(&shape));
    for x in [a, b] {
        let len = atoms_in(&x.v.shape);
        let from = if x.strides == row_major(&x.v.shape) || len <= 1 {
            x.offset..x.offset.checked_add(len)?
        } else {
            return None;
        };
        match (&mut data, &x.v.data) {
            (Data::Int(o), Data::Int(v)) => o.extend_from_slice(v.get(from)?),
            (Data::Float(o), Data::Float(v)) => o.extend_from_slice(v.get(from)?),
            (Data::Bool(o), Data::Bool(v)) => o.extend_from_slice(v.get(from)?),
            _ => return None,
        }
    }
    Some(Batched::dense(Array { shape, data }, 0))
}

/// The order of `shape`'s axes in which an operand's atoms lie one after
/// another (a transposition of a dense block: its steps decreasing, each
/// the atoms of the axes after it; axes of one item first), when no
/// operand steps by one along the last axis (row-major order reads that
/// one along memory already), or when one does but the runs row-major
/// order reads are short (a `[n 2]` state beside a frame literal laid out
/// `[2 n]`): then only if that order's runs are at least
/// `LONGER_RUNS` times as long (the kernel's inner loop runs along them).
fn memory_order(layouts: &[Layout], shape: &[usize]) -> Option<Vec<usize>> {
    if shape.len() < 2 || *shape.last()? < 2 {
        return None;
    }
    let along_last = layouts.iter().any(|l| l.strides.last() == Some(&1));
    let row_major: Vec<usize> = (0..shape.len()).collect();
    let short = inner_run(layouts, shape, &row_major);
    if along_last && short >= SHORT_RUN {
        return None;
    }
    layouts.iter().find_map(|l| {
        let step = |a: usize| l.strides.get(a).copied();
        let mut order: Vec<usize> = (0..shape.len()).collect();
        order.sort_by_key(|&a| (shape[a] > 1, std::cmp::Reverse(step(a))));
        let mut atoms = 1;
        for &a in order.iter().rev().filter(|&&a| shape[a] > 1) {
            if step(a)? != atoms {
                return None;
            }
            atoms *= shape[a];
        }
        (!along_last || inner_run(layouts, shape, &order) >= short.saturating_mul(LONGER_RUNS))
            .then_some(order)
    })
}

/// Row-major runs shorter than this may be read in another operand's
/// memory order ([`memory_order`]) …
const SHORT_RUN: usize = 16;
/// … where its runs are this many times as long.
const LONGER_RUNS: usize = 8;

/// The atoms of the innermost run the kernel's loop reads when the axes of
/// `shape` are visited in `order` (the last innermost): the innermost
/// axis of more than one position and the axes out from it that every
/// operand steps across as one (`kernel::coalesce`'s merge).
fn inner_run(layouts: &[Layout], shape: &[usize], order: &[usize]) -> usize {
    let mut axes = order.iter().rev().copied().filter(|&a| shape[a] > 1);
    let Some(inner) = axes.next() else {
        return 1;
    };
    let mut run = shape[inner];
    for a in axes {
        let merges = layouts.iter().all(|l| {
            let (outer, step) = (l.strides.get(a).copied(), l.strides.get(inner).copied());
            matches!((outer, step), (Some(o), Some(s)) if o == s.wrapping_mul(run))
        });
        if !merges {
            break;
        }
        run = run.saturating_mul(shape[a]);
    }
    run
}

/// Steps over a result of rank `rank` whose first `to_nb` axes are batch
/// axes, for an operand with steps `strides` and `nb` batch axes: its batch
/// axes' steps, zero for the batch axes it lacks, its own axes' steps, then
/// zero for the frame axes it lacks (prefix agreement).
pub(crate) fn place(strides: &[usize], nb: usize, to_nb: usize, rank: usize) -> Vec<usize> {
    let mut out = Vec::with_capacity(rank);
    out.extend_from_slice(&strides[..nb.min(strides.len())]);
    out.resize(to_nb, 0);
    out.extend_from_slice(strides.get(nb..).unwrap_or_default());
    out.resize(rank, 0);
    out
}

/// `v`'s atoms laid out over `shape`, copied into a contiguous array.
fn gather<'p>(v: &Value<'p>, shape: &[usize], layout: &Layout) -> Try<Value<'p>> {
    let n = atoms_in(shape);
    check_size(n, remora_syntax::Span::default()).ok()?;
    Some(Array {
        shape: shape.to_vec(),
        data: gather_data(&v.data, shape, layout)?,
    })
}

/// A buffer's atoms laid out over `shape`; records field by field (each
/// field's cell one more, innermost axis).
pub(crate) fn gather_data<'p>(data: &Data<Fun<'p>>, shape: &[usize], layout: &Layout) -> Try<Data<Fun<'p>>> {
    Some(match data {
        Data::Int(x) => Data::Int(kernel::gather(shape, x, layout).ok()?.into()),
        Data::Float(x) => Data::Float(kernel::gather(shape, x, layout).ok()?.into()),
        Data::Bool(x) => Data::Bool(kernel::gather(shape, x, layout).ok()?.into()),
        Data::Atoms(x) => Data::Atoms(kernel::gather(shape, x, layout).ok()?.into()),
        Data::Records(r) => {
            let records = r.map_fields(atoms_in(shape), |d, size| {
                let mut cells = shape.to_vec();
                cells.push(size);
                let mut strides: Vec<usize> = layout.strides.iter().map(|s| s * size).collect();
                strides.push(1);
                let inner = Layout {
                    offset: layout.offset.checked_mul(size)?,
                    strides,
                };
                gather_data(d, &cells, &inner)
            })?;
            Data::records(records)
        }
    })
}

pub(crate) fn bind<'p>(env: &Env<'p>, var: VarId, b: Batched<'p>) -> Env<'p> {
    if b.nb == 0 {
        match b.densify() {
            Some(d) => env.with(Binding::Val(var, d.v)),
            None => env.with(Binding::Batched(var, b)),
        }
    } else {
        env.with(Binding::Batched(var, b))
    }
}

/// Whether evaluating `e` can have no effect and costs next to nothing: a
/// variable, a lambda literal, an intrinsic and its instantiations.
pub(crate) fn pure(e: &TExpr) -> bool {
    match &e.kind {
        TExprKind::Var(_) | TExprKind::Intrinsic(_) => true,
        TExprKind::Array { atoms, .. } => {
            matches!(atoms.as_slice(), [a] if matches!(a.kind, TAtomKind::Lambda { .. }))
        }
        TExprKind::TApp { func, .. } | TExprKind::IApp { func, .. } => pure(func),
        _ => false,
    }
}

/// How many more parameters a lambda body takes directly (`(fn ((x …)
/// (y …)) e)` is a lambda whose body is a lambda literal).
pub(crate) fn lambda_params(body: &TExpr) -> usize {
    let mut n = 0;
    let mut e = body;
    while let TExprKind::Array { shape, atoms } = &e.kind {
        match (shape.as_slice(), atoms.as_slice()) {
            ([], [a]) => match &a.kind {
                TAtomKind::Lambda { body, .. } => {
                    n += 1;
                    e = body;
                }
                _ => break,
            },
            _ => break,
        }
    }
    n
}

/// Whether a function value is a closure made inside the batch (it holds
/// one value per batch position, so it runs only batched).
fn captures_batch(f: &Batched<'_>) -> bool {
    match &f.v.data {
        Data::Atoms(atoms) => atoms.iter().any(|a| matches!(a, Atom::Fun(f) if f.reads_batch())),
        _ => false,
    }
}

/// Whether evaluating `e` can neither fail nor run long: variables,
/// literals, `let`, records, frames, nested `if`, and the scalar
/// primitives that are total (no division by zero, no negative power).
/// Both branches of an `if` made of such expressions may run on every
/// cell.
fn total(e: &TExpr) -> bool {
    match &e.kind {
        TExprKind::Var(_) => true,
        TExprKind::Array { atoms, .. } => atoms.iter().all(|a| {
            matches!(
                a.kind,
                TAtomKind::Int(_) | TAtomKind::Float(_) | TAtomKind::Bool(_)
            )
        }),
        TExprKind::Frame { elems, .. } => elems.iter().all(total),
        TExprKind::Let { value, body, .. } => total(value) && total(body),
        TExprKind::Record(fields) => fields.iter().all(|(_, x)| total(x)),
        TExprKind::Field { record, .. } => total(record),
        TExprKind::If {
            cond,
            then,
            otherwise,
        } => total(cond) && total(then) && total(otherwise),
        TExprKind::App { .. } => {
            let (head, args) = e.spine();
            matches!(&head.kind, TExprKind::Intrinsic(name)
                if total_primitive(name) || total_by_literal(name, &args))
                && args.into_iter().all(|(a, _)| total(a))
        }
        _ => false,
    }
}

/// The scalar primitives that give a value for every argument.
fn total_primitive(name: &str) -> bool {
    scalar::is_scalar_primitive(name) && !matches!(name, "/" | "mod" | "^" | "shl" | "shr" | "random.int")
}

/// `(/ a k)`, `(mod a k)`, `(shl a k)` or `(shr a k)` whose `k` is a
/// literal for which it gives a value for every `a` (a halving, a parity,
/// a shift by a constant): a divisor other than 0 (and, for `/`, −1,
/// which overflows the least Int), a shift not negative.
fn total_by_literal(name: &str, args: &[(&TExpr, &remora_types::Lifted)]) -> bool {
    let [_, (k, _)] = args else {
        return false;
    };
    let TExprKind::Array { atoms, .. } = &k.kind else {
        return false;
    };
    atoms.iter().all(|a| match (name, &a.kind) {
        ("/", TAtomKind::Int(k)) => *k != 0 && *k != -1,
        ("mod", TAtomKind::Int(k)) => *k != 0,
        ("shl" | "shr", TAtomKind::Int(k)) => *k >= 0,
        _ => false,
    })
}

/// Whether values of this atom type hold only numbers and truth values
/// (what may leave a batch: never a function made inside it).
fn plain_atoms(a: &TyAtom) -> bool {
    match a {
        TyAtom::Int | TyAtom::Float | TyAtom::Bool => true,
        TyAtom::Record(fields) => fields.iter().all(|(_, t)| plain_atoms(&t.atom)),
        _ => false,
    }
}

/// Whether a buffer holds atoms other than numbers and truth values.
fn holds_atoms(d: &Data<Fun<'_>>) -> bool {
    match d {
        Data::Atoms(_) => true,
        Data::Records(r) => r.fields.iter().any(|f| holds_atoms(&f.data)),
        _ => false,
    }
}

/// The first form in `e` that does not run batched, if any.
fn unbatchable(e: &TExpr) -> Option<&'static str> {
    match &e.kind {
        TExprKind::Var(_) => None,
        TExprKind::Intrinsic(name) => matches!(*name, "trace" | "trace-file").then_some("`trace`"),
        TExprKind::Array { atoms, .. } => atoms
            .iter()
            .any(|a| {
                !matches!(
                    a.kind,
                    TAtomKind::Int(_)
                        | TAtomKind::Float(_)
                        | TAtomKind::Bool(_)
                        | TAtomKind::Lambda { .. }
                        | TAtomKind::TLambda { .. }
                        | TAtomKind::ILambda { .. }
                )
            })
            .then_some("a box literal"),
        TExprKind::Frame { elems, .. } => elems.iter().find_map(unbatchable),
        TExprKind::Let { value, body, .. } => unbatchable(value).or_else(|| unbatchable(body)),
        TExprKind::App { func, arg, .. } => unbatchable(func).or_else(|| unbatchable(arg)),
        TExprKind::TApp { func, .. } | TExprKind::IApp { func, .. } => unbatchable(func),
        TExprKind::Unbox { .. } => Some("`unbox` (its cells' shapes may differ)"),
        TExprKind::Record(fields) => fields.iter().find_map(|(_, x)| unbatchable(x)),
        TExprKind::Field { record, .. } => unbatchable(record),
        TExprKind::If {
            cond,
            then,
            otherwise,
        } => unbatchable(cond)
            .or_else(|| unbatchable(then))
            .or_else(|| unbatchable(otherwise)),
    }
}

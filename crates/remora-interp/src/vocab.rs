//! Vocabulary A of the prelude (docs/prelude.md, "Linear algebra and
//! statistics"): `argmax` `argmin` `f.argmax` `f.argmin` `mean` `f.mean`
//! `linspace` `outer` `dot` `f.dot` `matmul` `f.matmul` `transpose`
//! (`clip` and `f.clip` are scalar primitives, in scalar.rs).
//!
//! Each is written once, over a frame of cells: the rule the batched
//! evaluation runs over `batch ++ frame` (array-at-a-time: one loop over
//! every cell, never the interpreter once per cell) is the same code the
//! reference path runs on a single cell (an empty frame), so both give the
//! same bits. `outer` applies its function once, over the frame `[m n]`
//! its arguments are replicated along by zero steps; `transpose` is a
//! view (its steps permuted).

use crate::batch::{Batched, Try};
use crate::eval::{Interpreter, Prim, Run, Value, atoms_in, check_size, empty_data, fail};
use crate::kernel;
use remora_syntax::Span;
use remora_value::{Array, Data};

/// The names whose rules are here.
pub(crate) fn is_vocab(name: &str) -> bool {
    matches!(
        name,
        "argmax"
            | "argmin"
            | "f.argmax"
            | "f.argmin"
            | "mean"
            | "f.mean"
            | "linspace"
            | "outer"
            | "dot"
            | "f.dot"
            | "matmul"
            | "f.matmul"
            | "transpose"
    )
}

/// One cell of each argument (the reference path): the framed rule over
/// an empty frame, and `outer` by calling its function on every pair.
pub(crate) fn run<'p>(it: &mut Interpreter, p: &Prim<'p>, span: Span) -> Run<Value<'p>> {
    if p.name == "outer" {
        return outer_cells(it, p, span);
    }
    if p.name == "transpose" {
        let [a] = p.args.as_slice() else {
            return fail(span, "internal error: transpose without its argument");
        };
        let view = transpose_view(p, &Batched::plain(a.clone()), 0);
        return match view.and_then(|v| v.densify()) {
            Some(v) => Ok(v.v),
            None => fail(span, "transpose: the permutation does not fit the argument"),
        };
    }
    let args: Vec<(Value<'p>, Vec<usize>)> = p.args.iter().map(|a| (a.clone(), a.shape.clone())).collect();
    framed(p, &args).or_else(|m| fail(span, m))
}

impl Interpreter {
    /// The batched rule of a vocabulary name; `None` gives up (the caller
    /// then runs the cells one by one, which reports any error).
    pub(crate) fn vocab_batched<'p>(
        &mut self,
        p: &Prim<'p>,
        all: &[(Batched<'p>, Vec<usize>)],
    ) -> Try<Batched<'p>> {
        match p.name {
            "transpose" => {
                let [(xs, cell)] = all else {
                    return None;
                };
                let axis = xs.nb + xs.own().len().checked_sub(cell.len())?;
                transpose_view(p, xs, axis)
            }
            "outer" => self.outer_batched(all),
            "f.dot" if let Some(d) = self.dot_batched(all) => Some(d),
            "matmul" | "f.matmul" if let Some(c) = crate::matmul::matmul_batched(all) => Some(c),
            "dot" | "f.dot" => self.dot_batched(all),
            "f.mean"
                if let [(xs, cell)] = all
                    && let [d] = cell.as_slice()
                    && !xs.is_dense() =>
            {
                // A view (the windows of a signal): summed as `f.sum` sums,
                // where it lies, then each sum divided.
                let sums = crate::batch::whole_cell_fold("f.sum", all)?;
                let Data::Float(s) = &sums.v.data else {
                    return None;
                };
                let means: Vec<f32> = s.iter().map(|x| x / *d as f32).collect();
                let shape = sums.v.shape.clone();
                Some(Batched::dense(
                    Array {
                        shape,
                        data: Data::Float(means.into()),
                    },
                    sums.nb,
                ))
            }
            _ => {
                let nb = all.iter().map(|(a, _)| a.nb).max()?;
                let mut dense = Vec::with_capacity(all.len());
                for (a, cell) in all {
                    dense.push((self.expand(a, nb)?.densify()?.v, cell.clone()));
                }
                Some(Batched::dense(framed(p, &dense).ok()?, nb))
            }
        }
    }

    /// `dot` and `f.dot` over the batch and the arguments' principal
    /// frame, both vectors read in place through their steps — never laid
    /// out over the frame, however they are replicated along it: a lambda
    /// of `f.dot` by `outer` (the rows of one matrix against the rows of
    /// another, each replicated along the other's axis) is a matrix
    /// product, each sum the cell's own.
    fn dot_batched<'p>(&self, all: &[(Batched<'p>, Vec<usize>)]) -> Try<Batched<'p>> {
        let [(x, xcell), (y, _)] = all else {
            return None;
        };
        let &[d] = xcell.as_slice() else {
            return None;
        };
        let frame = Self::principal(all)?;
        let nb = x.nb.max(y.nb);
        let mut shape: Vec<usize> = self.batch.get(..nb)?.to_vec();
        shape.extend(&frame);
        let outer = shape.len();
        check_size(atoms_in(&shape), Span::default()).ok()?;
        shape.push(d);
        let (xs, ys) = (
            x.steps_over(1, nb, outer, &shape)?,
            y.steps_over(1, nb, outer, &shape)?,
        );
        let data = match (&x.v.data, &y.v.data) {
            (Data::Float(a), Data::Float(b)) => Data::Float(
                crate::contract::dot_in_place((a.get(x.offset..)?, &xs), (b.get(y.offset..)?, &ys), &shape)?
                    .into(),
            ),
            (Data::Int(a), Data::Int(b)) => {
                Data::Int(int_dots((a.get(x.offset..)?, &xs), (b.get(y.offset..)?, &ys), &shape)?.into())
            }
            _ => return None,
        };
        shape.pop();
        Some(Batched::dense(Array { shape, data }, nb))
    }

    /// `outer f a b` over the batch and the arguments' frame: `f` applied
    /// once to `a` and `b` laid over the frame `[m n]` (`a` replicated
    /// along `n`, `b` along `m`, by zero steps: nothing copied).
    fn outer_batched<'p>(&mut self, all: &[(Batched<'p>, Vec<usize>)]) -> Try<Batched<'p>> {
        let [(f, _), (a, acell), (b, bcell)] = all else {
            return None;
        };
        if f.nb != 0 || !f.v.shape.is_empty() {
            return None;
        }
        let nb = a.nb.max(b.nb);
        let (a, b) = (self.expand(a, nb)?, self.expand(b, nb)?);
        let (fa, fb) = (
            a.own().len().checked_sub(acell.len())?,
            b.own().len().checked_sub(bcell.len())?,
        );
        let frame: Vec<usize> = if fa >= fb { a.own() } else { b.own() }
            .get(..fa.max(fb))?
            .to_vec();
        if !frame.starts_with(a.own().get(..fa)?) || !frame.starts_with(b.own().get(..fb)?) {
            return None;
        }
        let (&m, s1) = acell.split_first()?;
        let (&n, s2) = bcell.split_first()?;
        if m == 0 || n == 0 {
            // No pair to apply `f` to: the result's shape is the type's
            // (the cells' rule, which knows `@s3`).
            return None;
        }
        // Each laid over `batch ++ frame ++ [m n] ++ its item`.
        let lay = |x: &Batched<'p>, own_frame: usize, at_m: bool, item: &[usize]| -> Try<Batched<'p>> {
            let mut shape: Vec<usize> = x.v.shape.get(..nb)?.to_vec();
            shape.extend(&frame);
            shape.extend([m, n]);
            shape.extend(item);
            let mut strides: Vec<usize> = x.strides.get(..nb + own_frame)?.to_vec();
            strides.resize(nb + frame.len(), 0);
            let step = *x.strides.get(nb + own_frame)?;
            strides.extend(if at_m { [step, 0] } else { [0, step] });
            strides.extend(x.strides.get(nb + own_frame + 1..)?);
            Some(x.view(shape, nb, x.offset, strides))
        };
        let a = lay(&a, fa, true, s1)?;
        let b = lay(&b, fb, false, s2)?;
        self.apply_batched(f, vec![(a, s1.to_vec()), (b, s2.to_vec())])
    }
}

/// `outer` on one cell of each argument: the function called on every
/// pair of items, row-major.
fn outer_cells<'p>(it: &mut Interpreter, p: &Prim<'p>, span: Span) -> Run<Value<'p>> {
    let [f, a, b] = p.args.as_slice() else {
        return fail(span, "internal error: outer without its arguments");
    };
    let index = |k: usize| -> Vec<usize> {
        p.indices
            .get(k)
            .map(|i| i.dims().into_iter().map(|d| d as usize).collect())
            .unwrap_or_default()
    };
    let (m, n) = (
        a.shape.first().copied().unwrap_or(0),
        b.shape.first().copied().unwrap_or(0),
    );
    let (s1, s2, s3) = (index(2), index(3), index(4));
    let (i1, i2) = (atoms_in(&s1), atoms_in(&s2));
    check_size(m.saturating_mul(n), span)?;
    let mut cells = Vec::with_capacity(m.saturating_mul(n));
    for i in 0..m {
        for j in 0..n {
            let x = Array {
                shape: s1.clone(),
                data: a.data.slice(i * i1, i1),
            };
            let y = Array {
                shape: s2.clone(),
                data: b.data.slice(j * i2, i2),
            };
            let r = it.call2(f, x, y, span)?;
            if cells.is_empty() {
                check_size(m.saturating_mul(n).saturating_mul(r.data.len()), span)?;
            }
            cells.push(r);
        }
    }
    let shape: Vec<usize> = [m, n].into_iter().chain(s3).collect();
    if cells.is_empty() {
        let atom = p.types.get(2).cloned().unwrap_or(remora_types::Atom::Int);
        return Ok(Array {
            shape,
            data: empty_data(&atom),
        });
    }
    let mut v = crate::eval::stack(cells, span)?;
    v.shape = shape;
    Ok(v)
}

/// `transpose` as a view of `xs` whose cell starts at axis `axis`: the
/// cell's axes and steps permuted (result axis k is the argument's axis
/// `P[k]`).
fn transpose_view<'p>(p: &Prim<'p>, xs: &Batched<'p>, axis: usize) -> Try<Batched<'p>> {
    let perm: Vec<usize> = p
        .indices
        .first()?
        .dims()
        .into_iter()
        .map(|d| usize::try_from(d).ok())
        .collect::<Option<_>>()?;
    let rank = perm.len();
    if xs.v.shape.len() != axis.checked_add(rank)? {
        return None;
    }
    let mut seen = vec![false; rank];
    for &k in &perm {
        if std::mem::replace(seen.get_mut(k)?, true) {
            return None;
        }
    }
    let mut shape = xs.v.shape.clone();
    let mut strides = xs.strides.clone();
    for (k, &from) in perm.iter().enumerate() {
        shape[axis + k] = xs.v.shape[axis + from];
        strides[axis + k] = xs.strides[axis + from];
    }
    Some(xs.view(shape, xs.nb, xs.offset, strides))
}

/// The principal frame of dense arguments, and for each argument how many
/// consecutive positions of it share one of its cells (its frame is a
/// prefix of the principal one).
fn principal(args: &[(Value<'_>, Vec<usize>)]) -> Result<(Vec<usize>, Vec<usize>), String> {
    let mut frames = Vec::with_capacity(args.len());
    for (v, cell) in args {
        let frame = v
            .shape
            .len()
            .checked_sub(cell.len())
            .and_then(|k| v.shape.get(..k))
            .ok_or("internal error: an argument smaller than its cell")?;
        frames.push(frame);
    }
    let frame = frames
        .iter()
        .max_by_key(|f| f.len())
        .copied()
        .unwrap_or_default()
        .to_vec();
    if !frames.iter().all(|f| frame.starts_with(f)) {
        return Err("internal error: frames not prefix-related".into());
    }
    let shares = frames.iter().map(|f| atoms_in(&frame[f.len()..])).collect();
    Ok((frame, shares))
}

fn floats<'a>(v: &'a Value<'_>) -> Result<&'a [f32], String> {
    match &v.data {
        Data::Float(x) => Ok(x.as_slice()),
        _ => Err("internal error: not a Float array".into()),
    }
}

fn ints<'a>(v: &'a Value<'_>) -> Result<&'a [i64], String> {
    match &v.data {
        Data::Int(x) => Ok(x.as_slice()),
        _ => Err("internal error: not an Int array".into()),
    }
}

/// The cell of argument `k` at position `pos` of the principal frame.
fn cell_at<T>(data: &[T], size: usize, share: usize, pos: usize) -> Result<&[T], String> {
    let start = pos.checked_div(share).unwrap_or(0) * size;
    data.get(start..start + size)
        .ok_or_else(|| "internal error: a cell out of its buffer".into())
}

/// Every name of this module but `outer` and `transpose`, over the frame
/// of dense arguments (each with its cell shape).
fn framed<'p>(p: &Prim<'p>, args: &[(Value<'p>, Vec<usize>)]) -> Result<Value<'p>, String> {
    let (frame, shares) = principal(args)?;
    let positions = atoms_in(&frame);
    check_size(positions, Span::default()).map_err(|e| e.message)?;
    let cell = |k: usize| -> &[usize] { args.get(k).map_or(&[], |(_, c)| c.as_slice()) };
    let share = |k: usize| shares.get(k).copied().unwrap_or(1);
    let value = |k: usize| -> Result<&Value<'p>, String> {
        args.get(k)
            .map(|(v, _)| v)
            .ok_or_else(|| format!("internal error: {} without its argument", p.name))
    };
    let name = p.name;
    let result = |extra: &[usize], data: Data<crate::eval::Fun<'p>>| -> Value<'p> {
        Array {
            shape: frame.iter().chain(extra).copied().collect(),
            data,
        }
    };
    match name {
        "argmax" | "argmin" | "f.argmax" | "f.argmin" => {
            let d = cell(0).first().copied().unwrap_or(0);
            if d == 0 && positions > 0 {
                let what = if name.ends_with("max") {
                    "greatest"
                } else {
                    "least"
                };
                return Err(format!("{name}: an empty vector has no {what} item"));
            }
            let greatest = name.ends_with("max");
            let out = match value(0)?.data {
                Data::Int(ref x) => arg_extremes(x, d, share(0), positions, greatest)?,
                Data::Float(ref x) => arg_extremes(x, d, share(0), positions, greatest)?,
                _ => return Err(format!("{name}: not a vector of numbers")),
            };
            Ok(result(&[], Data::Int(out.into())))
        }
        "mean" => {
            let d = cell(0).first().copied().unwrap_or(0);
            let x = ints(value(0)?)?;
            let mut out = kernel::buffer(positions)?;
            for pos in 0..positions {
                let row = cell_at(x, d, share(0), pos)?;
                let sum: i128 = row.iter().map(|&v| i128::from(v)).sum();
                out.push((sum as f64 / d as f64) as f32);
            }
            Ok(result(&[], Data::Float(out.into())))
        }
        "f.mean" => {
            // The sum as `f.sum` adds (the same bits), then one division.
            let d = cell(0).first().copied().unwrap_or(0);
            let x = floats(value(0)?)?;
            let rows = if share(0) == 1 {
                std::borrow::Cow::Borrowed(x)
            } else {
                let mut all = kernel::buffer(positions.saturating_mul(d))?;
                for pos in 0..positions {
                    all.extend_from_slice(cell_at(x, d, share(0), pos)?);
                }
                std::borrow::Cow::Owned(all)
            };
            let seed = vec![0.0f32; positions];
            let order = crate::intrinsics::fold_order("f.sum", "f.+");
            let sums = kernel::reduce_axis(
                rows.get(..positions * d).unwrap_or_default(),
                [positions, d, 1],
                Some(&seed),
                order,
                |a, b| a + b,
            )?;
            let out: Vec<f32> = sums.into_iter().map(|s| s / d as f32).collect();
            Ok(result(&[], Data::Float(out.into())))
        }
        "linspace" => {
            let n = p
                .indices
                .first()
                .and_then(|i| i.dims().first().copied())
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(0);
            let (start, stop) = (floats(value(0)?)?, floats(value(1)?)?);
            check_size(positions.saturating_mul(n), Span::default()).map_err(|e| e.message)?;
            let mut out = kernel::buffer(positions * n)?;
            for pos in 0..positions {
                let a = cell_at(start, 1, share(0), pos)?[0];
                let b = cell_at(stop, 1, share(1), pos)?[0];
                linspace_into(f64::from(a), f64::from(b), n, &mut out);
            }
            Ok(result(&[n], Data::Float(out.into())))
        }
        "dot" | "f.dot" => {
            let d = cell(0).first().copied().unwrap_or(0);
            match (&value(0)?.data, &value(1)?.data) {
                (Data::Int(x), Data::Int(y)) => {
                    let mut out = kernel::buffer(positions)?;
                    for pos in 0..positions {
                        let (u, v) = (cell_at(x, d, share(0), pos)?, cell_at(y, d, share(1), pos)?);
                        out.push(
                            u.iter()
                                .zip(v)
                                .fold(0i64, |s, (a, b)| s.wrapping_add(a.wrapping_mul(*b))),
                        );
                    }
                    Ok(result(&[], Data::Int(out.into())))
                }
                (Data::Float(x), Data::Float(y)) => {
                    // Each cell's items one after another, a cell shared
                    // by `share` positions in a row: the sums side by side.
                    let line = |data, share: usize| crate::contract::Line {
                        data,
                        outer: vec![(positions / share.max(1), d), (share, 0)],
                        item: 1,
                    };
                    let out = crate::contract::sums_along_items(
                        &line(x, share(0)),
                        &line(y, share(1)),
                        positions,
                        d,
                        Some(0.0),
                    )?;
                    Ok(result(&[], Data::Float(out.into())))
                }
                _ => Err(format!("{name}: not two vectors of numbers")),
            }
        }
        "matmul" | "f.matmul" => {
            let (&m, &k) = match cell(0) {
                [m, k] => (m, k),
                _ => return Err(format!("internal error: {name} of a non-matrix")),
            };
            let n = cell(1).get(1).copied().unwrap_or(0);
            let size = m.saturating_mul(n);
            check_size(positions.saturating_mul(size), Span::default()).map_err(|e| e.message)?;
            // One product per position of the frame, each cell read in
            // place (a shared argument's cell once for all).
            fn products<T: crate::matmul::Ring>(
                x: &[T],
                y: &[T],
                (m, k, n): (usize, usize, usize),
                positions: usize,
                shares: (usize, usize),
            ) -> Result<Vec<T>, String> {
                let mut out = kernel::buffer(positions * m * n)?;
                for pos in 0..positions {
                    let (a, b) = (
                        cell_at(x, m * k, shares.0, pos)?,
                        cell_at(y, k * n, shares.1, pos)?,
                    );
                    if !crate::matmul::small_product(a, b, [m, k, n], &mut out) {
                        out.extend(crate::matmul::matmul(a, b, m, k, n)?);
                    }
                }
                Ok(out)
            }
            let sizes = (m, k, n);
            let shares = (share(0), share(1));
            match (&value(0)?.data, &value(1)?.data) {
                (Data::Int(x), Data::Int(y)) => Ok(result(
                    &[m, n],
                    Data::Int(products(x, y, sizes, positions, shares)?.into()),
                )),
                (Data::Float(x), Data::Float(y)) => Ok(result(
                    &[m, n],
                    Data::Float(products(x, y, sizes, positions, shares)?.into()),
                )),
                _ => Err(format!("{name}: not two matrices of numbers")),
            }
        }
        _ => Err(format!("internal error: {name} is not in the vocabulary")),
    }
}

/// Int `dot` over `shape` (`[outer …, items]`): each vector read in place
/// through its steps (zero where it is replicated), each sum wrapping (in
/// any order the same).
fn int_dots((x, xs): (&[i64], &[usize]), (y, ys): (&[i64], &[usize]), shape: &[usize]) -> Option<Vec<i64>> {
    let (&d, outer) = shape.split_last()?;
    let (&xk, xo) = xs.split_last()?;
    let (&yk, yo) = ys.split_last()?;
    let n = atoms_in(outer);
    let mut out = kernel::buffer(n).ok()?;
    let starts = |steps, base| crate::batch::Odometer {
        outer,
        steps,
        at: vec![0; outer.len()],
        base,
    };
    for (bx, by) in starts(xo, 0).zip(starts(yo, 0)).take(n) {
        let mut sum = 0i64;
        for k in 0..d {
            sum = sum.wrapping_add(x.get(bx + k * xk)?.wrapping_mul(*y.get(by + k * yk)?));
        }
        out.push(sum);
    }
    Some(out)
}

/// Rows at least this many items in all are shared among the threads.
const PARALLEL_ITEMS: usize = 1 << 20;

/// The position of the greatest (or least) item of each of `positions`
/// rows of `d` items (each row read by `share` positions in turn), the
/// rows shared among the threads when there are many items.
fn arg_extremes<T: Copy + PartialOrd + Send + Sync>(
    x: &[T],
    d: usize,
    share: usize,
    positions: usize,
    greatest: bool,
) -> Result<Vec<i64>, String> {
    let mut out = kernel::buffer(positions)?;
    out.resize(positions, 0);
    let rows = |start: usize, out: &mut [i64]| -> bool {
        for (k, o) in out.iter_mut().enumerate() {
            let Ok(row) = cell_at(x, d, share, start + k) else {
                return false;
            };
            *o = arg_extreme(row, greatest) as i64;
        }
        true
    };
    let ok = crate::rows_in_parallel(&mut out, 1, positions.saturating_mul(d), PARALLEL_ITEMS, rows);
    if ok {
        Ok(out)
    } else {
        Err("internal error: a cell out of its buffer".into())
    }
}

/// The position of the greatest (or least) item, the first of equals; of
/// Floats, the first NaN if there is one (as NumPy).
fn arg_extreme<T: Copy + PartialOrd>(row: &[T], greatest: bool) -> usize {
    arg_extreme_by(row, greatest, true)
}

/// `arg_extreme`, or (`nan_first` false) where a scan from the first item
/// keeping the first strictly greater (less) stops: NaNs are never taken,
/// but a NaN first is never left.
pub(crate) fn arg_extreme_by<T: Copy + PartialOrd>(row: &[T], greatest: bool, nan_first: bool) -> usize {
    if greatest {
        crate::fmath::widest(
            #[inline(always)]
            || first_extreme(row, |a, b| a > b, nan_first),
        )
    } else {
        crate::fmath::widest(
            #[inline(always)]
            || first_extreme(row, |a, b| a < b, nan_first),
        )
    }
}

/// Lanes of the extreme's first pass (each lane keeps the extreme of its
/// own items), and items tested at once in the second.
const EXTREME_LANES: usize = 16;

/// Two passes that vectorise: the extreme item (`better` than every other
/// that is not equal to it) and whether there is a NaN (an item unequal
/// to itself; with `nan_first`, the first is the answer), then the first
/// item equal to the extreme — where a left to right scan keeping the
/// first strictly better item stops (a NaN is never better: the lanes
/// skip it).
#[inline(always)]
fn first_extreme<T: Copy + PartialOrd>(row: &[T], better: impl Fn(T, T) -> bool, nan_first: bool) -> usize {
    let Some(&first) = row.first() else {
        return 0;
    };
    #[allow(clippy::eq_op)]
    let unequal = |x: T| x != x;
    if unequal(first) {
        return 0;
    }
    let mut best = [first; EXTREME_LANES];
    let mut unordered = [false; EXTREME_LANES];
    let chunks = row.chunks_exact(EXTREME_LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..EXTREME_LANES {
            let x = c[l];
            unordered[l] |= unequal(x);
            best[l] = if better(x, best[l]) { x } else { best[l] };
        }
    }
    let mut extreme = first;
    let mut nan = unordered.iter().any(|&u| u) || unequal(first);
    for &x in best.iter().chain(rest) {
        nan |= unequal(x);
        if better(x, extreme) {
            extreme = x;
        }
    }
    if nan && nan_first {
        return row.iter().position(|&x| unequal(x)).unwrap_or(0);
    }
    let mut start = 0;
    for c in row.chunks(EXTREME_LANES * 4) {
        let mut hit = false;
        for &x in c {
            hit |= x == extreme;
        }
        if hit {
            return start + c.iter().position(|&x| x == extreme).unwrap_or(0);
        }
        start += c.len();
    }
    0
}

/// `n` points from `a` to `b`, both included (NumPy's `linspace` with
/// its endpoint rule: computed in f64, the last point exactly `b`).
fn linspace_into(a: f64, b: f64, n: usize, out: &mut Vec<f32>) {
    if n == 0 {
        return;
    }
    if n == 1 {
        out.push(a as f32);
        return;
    }
    let div = (n - 1) as f64;
    let delta = b - a;
    let step = delta / div;
    for i in 0..n - 1 {
        let y = if step == 0.0 {
            i as f64 / div * delta
        } else {
            i as f64 * step
        };
        out.push((y + a) as f32);
    }
    out.push(b as f32);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linspace_ends_exactly() {
        let mut v = Vec::new();
        linspace_into(0.0, 1.0, 5, &mut v);
        assert_eq!(v, [0.0, 0.25, 0.5, 0.75, 1.0]);
        v.clear();
        linspace_into(0.1, 0.7, 7, &mut v);
        assert_eq!(v.last(), Some(&0.7f32));
    }

    #[test]
    fn argmax_takes_the_first_nan() {
        assert_eq!(arg_extreme(&[1.0f32, f32::NAN, 3.0, f32::NAN], true), 1);
        assert_eq!(arg_extreme(&[1.0f32, 3.0, 3.0], true), 1);
        assert_eq!(arg_extreme(&[2.0f32, 1.0, 1.0], false), 1);
        assert_eq!(arg_extreme(&[5i64, 7, 7, 1], true), 1);
        assert_eq!(arg_extreme(&[0.0f32, -0.0, -1.0], true), 0);
        assert_eq!(arg_extreme(&[-0.0f32, 0.0, -1.0], true), 0);
        // A scan keeping the first strictly greater: NaNs never taken, a
        // NaN first never left.
        assert_eq!(arg_extreme_by(&[1.0f32, f32::NAN, 3.0, f32::NAN], true, false), 2);
        assert_eq!(arg_extreme_by(&[f32::NAN, 1.0, 3.0], true, false), 0);
        assert_eq!(arg_extreme_by(&[2.0f32, f32::NAN, 1.0, 1.0], false, false), 2);
    }

    #[test]
    fn argmax_agrees_with_a_left_to_right_scan() {
        // Rows longer than the lanes, the extreme in the lanes and in the
        // rest, ties across lanes, a NaN late in a long row.
        let scan = |row: &[f32], greatest: bool| {
            let mut best = 0;
            for (i, &x) in row.iter().enumerate() {
                if x.is_nan() {
                    return i;
                }
                if (greatest && x > row[best]) || (!greatest && x < row[best]) {
                    best = i;
                }
            }
            best
        };
        for n in [1usize, 15, 16, 17, 63, 64, 65, 200, 1000] {
            for seed in 0..20u32 {
                let mut row: Vec<f32> = (0..n)
                    .map(|i| ((i as u32).wrapping_mul(2654435761).wrapping_add(seed * 77) % 13) as f32)
                    .collect();
                for g in [true, false] {
                    assert_eq!(arg_extreme(&row, g), scan(&row, g), "{n} {seed} {g}");
                }
                if n > 40 {
                    row[n - 3] = f32::NAN;
                    assert_eq!(arg_extreme(&row, true), n - 3);
                }
            }
        }
    }
}

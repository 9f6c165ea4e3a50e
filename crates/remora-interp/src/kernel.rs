//! Loops over whole buffers: the array-at-a-time machinery under every
//! lifted scalar operation and every reduction.
//!
//! An operand is a flat buffer and a [`Layout`]: where its first atom is and
//! how far to step along each axis of the *result*. A step of 0 replicates
//! the operand along that axis, which is how a frame's replication is done
//! without copying anything (core.md §3's "replicated cell-wise", as NumPy
//! broadcasts). Axes that every operand steps through alike are merged
//! first, so the innermost loop is as long as possible and, when its
//! operands are contiguous or replicated, a plain slice loop the compiler
//! vectorises.

/// Where an operand's atoms lie over the result's axes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub offset: usize,
    pub strides: Vec<usize>,
}

/// Row-major steps for `shape`.
pub fn row_major(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![0; shape.len()];
    let mut step = 1usize;
    for (s, d) in strides.iter_mut().zip(shape).rev() {
        *s = step;
        step = step.saturating_mul(*d);
    }
    strides
}

impl Layout {
    /// A contiguous operand of the result's own shape.
    pub fn contiguous(shape: &[usize]) -> Layout {
        Layout {
            offset: 0,
            strides: row_major(shape),
        }
    }

    /// An operand of shape `own`, a prefix of the result's `shape`,
    /// replicated over the rest (Remora's prefix agreement of frames).
    pub fn prefix(own: &[usize], shape: &[usize]) -> Layout {
        let mut strides = row_major(own);
        strides.resize(shape.len(), 0);
        Layout { offset: 0, strides }
    }

    /// Whether every position of `shape` lies inside a buffer of `len`.
    pub(crate) fn fits(&self, shape: &[usize], len: usize) -> bool {
        if shape.contains(&0) {
            return true;
        }
        let last = shape
            .iter()
            .zip(&self.strides)
            .try_fold(self.offset, |acc, (d, s)| {
                acc.checked_add((d - 1).checked_mul(*s)?)
            });
        self.strides.len() == shape.len() && last.is_some_and(|l| l < len)
    }
}

/// The result's axes with runs merged where every operand steps alike, and
/// each operand's steps over them; never empty (a scalar is one axis of 1).
pub(crate) fn coalesce<const K: usize>(
    shape: &[usize],
    layouts: [&Layout; K],
) -> (Vec<usize>, [Vec<usize>; K]) {
    let mut dims: Vec<usize> = Vec::with_capacity(shape.len());
    let mut strides: [Vec<usize>; K] = std::array::from_fn(|_| Vec::with_capacity(shape.len()));
    for (axis, &d) in shape.iter().enumerate() {
        if d == 1 {
            continue;
        }
        let merge = match dims.last() {
            Some(_) => (0..K).all(|k| {
                let prev = strides[k].last().copied().unwrap_or(0);
                prev == layouts[k].strides[axis].wrapping_mul(d)
            }),
            None => false,
        };
        if merge {
            if let Some(last) = dims.last_mut() {
                *last *= d;
            }
            for k in 0..K {
                if let Some(s) = strides[k].last_mut() {
                    *s = layouts[k].strides[axis];
                }
            }
        } else {
            dims.push(d);
            for k in 0..K {
                strides[k].push(layouts[k].strides[axis]);
            }
        }
    }
    if dims.is_empty() {
        dims.push(1);
        for s in strides.iter_mut() {
            s.push(0);
        }
    }
    (dims, strides)
}

/// Calls `row(offsets, inner)` once per innermost run, in row-major order,
/// with each operand's offset of the run's first atom.
fn for_each_run<const K: usize>(
    shape: &[usize],
    layouts: [&Layout; K],
    mut row: impl FnMut([usize; K], usize, [usize; K]),
) {
    if shape.contains(&0) {
        return;
    }
    let (dims, strides) = coalesce(shape, layouts);
    let last = dims.len() - 1;
    let inner = dims[last];
    let steps: [usize; K] = std::array::from_fn(|k| strides[k][last]);
    let mut index = vec![0usize; last];
    let mut offsets: [usize; K] = std::array::from_fn(|k| layouts[k].offset);
    loop {
        row(offsets, inner, steps);
        // Advance the odometer over the outer axes.
        let mut axis = last;
        loop {
            if axis == 0 {
                return;
            }
            axis -= 1;
            index[axis] += 1;
            for k in 0..K {
                offsets[k] += strides[k][axis];
            }
            if index[axis] < dims[axis] {
                break;
            }
            for k in 0..K {
                offsets[k] -= strides[k][axis] * dims[axis];
            }
            index[axis] = 0;
        }
    }
}

/// The `n` atoms of a run from `offset` at a step `step` ≥ 1 (a strided
/// iterator: no index computed or checked per atom).
fn run<A>(a: &[A], offset: usize, n: usize, step: usize) -> std::iter::StepBy<std::slice::Iter<'_, A>> {
    let end = (offset + (n.max(1) - 1) * step + 1).min(a.len());
    a[offset.min(end)..end].iter().step_by(step.max(1))
}

/// A strided run of `n` ≥ 1 atoms from `offset` at a short step `S` (the
/// channels of interleaved pixels, a coordinate of packed 3-vectors): its
/// first `n - 1` atoms as the first of whole chunks of `S`, and where the
/// last atom lies (it may end the buffer, with no whole chunk after it).
/// A loop over chunks of a constant size unrolls and vectorises, where a
/// step known only at run time reads one atom at a time.
fn chunks_of<A, const S: usize>(a: &[A], offset: usize, n: usize) -> (&[[A; S]], usize) {
    let body = n - 1;
    (a[offset..offset + body * S].as_chunks::<S>().0, offset + body * S)
}

/// `$body` with `$s` a constant `$S` when the run-time step `$s` is a short
/// one ([`chunks_of`]), else `$other`.
macro_rules! by_short_step {
    ($s:expr, $S:ident => $body:expr, _ => $other:expr) => {
        match $s {
            2 => {
                const $S: usize = 2;
                $body
            }
            3 => {
                const $S: usize = 3;
                $body
            }
            4 => {
                const $S: usize = 4;
                $body
            }
            _ => $other,
        }
    };
}

/// `out` extended by `f` of each atom of a strided run of `a` (a short
/// step `S`, [`chunks_of`]).
fn extend_strided<A: Copy, R, const S: usize>(
    out: &mut Vec<R>,
    a: &[A],
    oa: usize,
    n: usize,
    f: impl Fn(A) -> R,
) {
    let (chunks, last) = chunks_of::<A, S>(a, oa, n);
    out.extend(chunks.iter().map(|c| f(c[0])));
    out.push(f(a[last]));
}

/// `out` extended by `f` of each pair of `n` contiguous atoms of `a` and
/// a strided run of `b` (a short step `S`).
fn extend_with_strided<A: Copy, B: Copy, R, const S: usize>(
    out: &mut Vec<R>,
    a: &[A],
    (b, ob): (&[B], usize),
    n: usize,
    f: impl Fn(A, B) -> R,
) {
    let (chunks, last) = chunks_of::<B, S>(b, ob, n);
    out.extend(a[..n - 1].iter().zip(chunks).map(|(x, c)| f(*x, c[0])));
    out.push(f(a[n - 1], b[last]));
}

/// Why a kernel could not run: an operand's layout reaches outside its
/// buffer (an interpreter bug, reported rather than panicking).
pub const OUT_OF_BOUNDS: &str = "internal error: an operand's layout leaves its buffer";

/// Why a kernel could not run: its result does not fit in the memory left.
pub const OUT_OF_MEMORY: &str = "not enough memory for the result";

/// An empty buffer with room for `n` atoms, or [`OUT_OF_MEMORY`] (never an
/// abort of the process).
pub fn buffer<T>(n: usize) -> Result<Vec<T>, &'static str> {
    remora_value::limits::try_vec(n).ok_or_else(|| {
        crate::eval::note_starved();
        OUT_OF_MEMORY
    })
}

/// `f` at every position of `shape`, on one operand.
pub fn map1<A: Copy, R>(
    shape: &[usize],
    a: &[A],
    la: &Layout,
    f: impl Fn(A) -> R,
) -> Result<Vec<R>, &'static str> {
    if !la.fits(shape, a.len()) {
        return Err(OUT_OF_BOUNDS);
    }
    let mut out = buffer(shape.iter().product())?;
    for_each_run(shape, [la], |[oa], n, [sa]| match sa {
        1 => out.extend(a[oa..oa + n].iter().map(|x| f(*x))),
        0 => {
            let x = a[oa];
            out.extend((0..n).map(|_| f(x)));
        }
        _ => by_short_step!(sa, S => extend_strided::<A, R, S>(&mut out, a, oa, n, &f),
            _ => out.extend(run(a, oa, n, sa).map(|x| f(*x)))),
    });
    Ok(out)
}

/// `f` at every position of `shape`, on two operands.
pub fn map2<A: Copy, B: Copy, R>(
    shape: &[usize],
    (a, la): (&[A], &Layout),
    (b, lb): (&[B], &Layout),
    f: impl Fn(A, B) -> R,
) -> Result<Vec<R>, &'static str> {
    if !la.fits(shape, a.len()) || !lb.fits(shape, b.len()) {
        return Err(OUT_OF_BOUNDS);
    }
    let mut out = buffer(shape.iter().product())?;
    for_each_run(shape, [la, lb], |[oa, ob], n, [sa, sb]| match (sa, sb) {
        (1, 1) => out.extend(a[oa..oa + n].iter().zip(&b[ob..ob + n]).map(|(x, y)| f(*x, *y))),
        (1, 0) => {
            let y = b[ob];
            out.extend(a[oa..oa + n].iter().map(|x| f(*x, y)));
        }
        (0, 1) => {
            let x = a[oa];
            out.extend(b[ob..ob + n].iter().map(|y| f(x, *y)));
        }
        (0, 0) => out.extend((0..n).map(|_| f(a[oa], b[ob]))),
        (0, _) => {
            let x = a[oa];
            by_short_step!(sb, S => extend_strided::<B, R, S>(&mut out, b, ob, n, |y| f(x, y)),
                _ => out.extend(run(b, ob, n, sb).map(|y| f(x, *y))))
        }
        (_, 0) => {
            let y = b[ob];
            by_short_step!(sa, S => extend_strided::<A, R, S>(&mut out, a, oa, n, |x| f(x, y)),
                _ => out.extend(run(a, oa, n, sa).map(|x| f(*x, y))))
        }
        (1, _) => {
            by_short_step!(sb, S => extend_with_strided::<A, B, R, S>(&mut out, &a[oa..oa + n], (b, ob), n, &f),
            _ => out.extend(a[oa..oa + n].iter().zip(run(b, ob, n, sb)).map(|(x, y)| f(*x, *y))))
        }
        (_, 1) => {
            by_short_step!(sa, S => extend_with_strided::<B, A, R, S>(&mut out, &b[ob..ob + n], (a, oa), n, |y, x| f(x, y)),
            _ => out.extend(run(a, oa, n, sa).zip(&b[ob..ob + n]).map(|(x, y)| f(*x, *y))))
        }
        _ => out.extend(run(a, oa, n, sa).zip(run(b, ob, n, sb)).map(|(x, y)| f(*x, *y))),
    });
    Ok(out)
}

/// `f` at every position of `shape`, on four operands of one type.
pub fn map4<A: Copy, R>(
    shape: &[usize],
    operands: [(&[A], &Layout); 4],
    f: impl Fn([A; 4]) -> R,
) -> Result<Vec<R>, &'static str> {
    if operands.iter().any(|(v, l)| !l.fits(shape, v.len())) {
        return Err(OUT_OF_BOUNDS);
    }
    let mut out = buffer(shape.iter().product())?;
    let layouts = operands.map(|(_, l)| l);
    for_each_run(shape, layouts, |offsets, n, steps| {
        out.extend((0..n).map(|i| f(std::array::from_fn(|k| operands[k].0[offsets[k] + i * steps[k]]))));
    });
    Ok(out)
}

/// `a[i] = f(a[i], b[i])` at every position of `shape`, where `a` is a
/// contiguous buffer of that shape (a temporary no other value holds,
/// reused for the result as NumPy reuses its temporaries).
pub fn zip_in_place<A: Copy, B: Copy>(
    shape: &[usize],
    a: &mut [A],
    (b, lb): (&[B], &Layout),
    f: impl Fn(A, B) -> A,
) -> Result<(), &'static str> {
    let la = Layout::contiguous(shape);
    if !la.fits(shape, a.len()) || !lb.fits(shape, b.len()) {
        return Err(OUT_OF_BOUNDS);
    }
    for_each_run(shape, [&la, lb], |[oa, ob], n, [_, sb]| match sb {
        1 => a[oa..oa + n]
            .iter_mut()
            .zip(&b[ob..ob + n])
            .for_each(|(x, y)| *x = f(*x, *y)),
        0 => {
            let y = b[ob];
            a[oa..oa + n].iter_mut().for_each(|x| *x = f(*x, y));
        }
        _ => by_short_step!(sb, S => {
            let (chunks, last) = chunks_of::<B, S>(b, ob, n);
            for (x, c) in a[oa..oa + n - 1].iter_mut().zip(chunks) {
                *x = f(*x, c[0]);
            }
            a[oa + n - 1] = f(a[oa + n - 1], b[last]);
        },
        _ => {
            for (x, y) in a[oa..oa + n].iter_mut().zip(run(b, ob, n, sb)) {
                *x = f(*x, *y);
            }
        }),
    });
    Ok(())
}

/// The atoms of an operand laid out over `shape`, as a contiguous buffer.
pub fn gather<A: Clone>(shape: &[usize], a: &[A], la: &Layout) -> Result<Vec<A>, &'static str> {
    if !la.fits(shape, a.len()) {
        return Err(OUT_OF_BOUNDS);
    }
    let total: usize = shape.iter().product();
    if let Some(out) = gather_transposed(shape, a, la, total)? {
        return Ok(out);
    }
    if let Some(out) = gather_deinterleaved(shape, a, la, total)? {
        return Ok(out);
    }
    let mut out = buffer(total)?;
    for_each_run(shape, [la], |[oa], n, [sa]| match sa {
        1 => out.extend_from_slice(&a[oa..oa + n]),
        0 => out.extend((0..n).map(|_| a[oa].clone())),
        _ => out.extend(run(a, oa, n, sa).cloned()),
    });
    Ok(out)
}

/// Tiles of a transposition ([`gather_transposed`]): `TILE × TILE` atoms.
const TILE: usize = 32;

/// [`gather`] of a transposition — the last axis steps through memory
/// far apart, the one before it contiguously — in tiles, so that every
/// cache line read is used whole (a gather in row-major order would read
/// one atom per line, and, at steps of a page or more, touch a page per
/// atom). `None` when the layout is not such a transposition.
fn gather_transposed<A: Clone>(
    shape: &[usize],
    a: &[A],
    la: &Layout,
    total: usize,
) -> Result<Option<Vec<A>>, &'static str> {
    let (dims, strides) = coalesce(shape, [la]);
    let [st] = &strides;
    let k = dims.len();
    if k < 2 || st[k - 2] != 1 || st[k - 1] < TILE || dims[k - 1] < TILE || dims[k - 2] < TILE {
        return Ok(None);
    }
    let Some(first) = a.get(la.offset) else {
        return Ok(None);
    };
    let (rows, cols, step) = (dims[k - 2], dims[k - 1], st[k - 1]);
    let mut out = buffer(total)?;
    out.resize(total, first.clone());
    // The outer axes: one `[rows, cols]` plane after another.
    let outer = &dims[..k - 2];
    let mut index = vec![0usize; outer.len()];
    let mut base = la.offset;
    // A tile's lines as they lie (one per column, contiguous), then
    // written out a row at a time, each row of the tile contiguous.
    let mut tile: Vec<A> = buffer(TILE * TILE)?;
    for plane in out.chunks_exact_mut(rows * cols) {
        for r0 in (0..rows).step_by(TILE) {
            let height = TILE.min(rows - r0);
            for c0 in (0..cols).step_by(TILE) {
                let width = TILE.min(cols - c0);
                tile.clear();
                for c in c0..c0 + width {
                    let from = base + r0 + c * step;
                    let Some(line) = a.get(from..from + height) else {
                        return Err(OUT_OF_BOUNDS);
                    };
                    tile.extend_from_slice(line);
                }
                for r in 0..height {
                    let at = (r0 + r) * cols + c0;
                    let Some(row) = plane.get_mut(at..at + width) else {
                        return Err(OUT_OF_BOUNDS);
                    };
                    for (slot, x) in row.iter_mut().zip(tile.iter().skip(r).step_by(height)) {
                        *slot = x.clone();
                    }
                }
            }
        }
        // Advance the odometer over the outer axes.
        for axis in (0..outer.len()).rev() {
            index[axis] += 1;
            base += st[axis];
            if index[axis] < outer[axis] {
                break;
            }
            base -= st[axis] * outer[axis];
            index[axis] = 0;
        }
    }
    Ok(Some(out))
}

/// Columns of [`gather_deinterleaved`] copied at a time.
const DEINTERLEAVE_BLOCK: usize = 1024;

/// [`gather`] of a transposition whose last axis steps far apart and
/// whose axis before it, of fewer than [`TILE`] atoms, lies contiguously:
/// the channels of an interleaved array brought to the front (`[h w 3]`
/// transposed to `[3 h w]`). Each group of channels is read where it lies
/// and its atoms written to the few rows they go to, so the array is read
/// once along memory (a gather in row-major order would read it once per
/// channel). `None` for any other layout.
fn gather_deinterleaved<A: Clone>(
    shape: &[usize],
    a: &[A],
    la: &Layout,
    total: usize,
) -> Result<Option<Vec<A>>, &'static str> {
    let (dims, strides) = coalesce(shape, [la]);
    let [st] = &strides;
    let k = dims.len();
    if k < 2
        || st[k - 2] != 1
        || dims[k - 2] < 2
        || dims[k - 2] >= TILE
        || st[k - 1] < dims[k - 2]
        || dims[k - 1] < TILE
    {
        return Ok(None);
    }
    let Some(first) = a.get(la.offset) else {
        return Ok(None);
    };
    let (rows, cols, step) = (dims[k - 2], dims[k - 1], st[k - 1]);
    let mut out = buffer(total)?;
    out.resize(total, first.clone());
    let outer = &dims[..k - 2];
    let mut index = vec![0usize; outer.len()];
    let mut base = la.offset;
    for plane in out.chunks_exact_mut(rows * cols) {
        let Some(from) = a.get(base..base + (cols - 1) * step + rows) else {
            return Err(OUT_OF_BOUNDS);
        };
        // A block of columns at a time (its groups in cache), each row's
        // atoms of the block copied through the step.
        for c0 in (0..cols).step_by(DEINTERLEAVE_BLOCK) {
            let width = DEINTERLEAVE_BLOCK.min(cols - c0);
            let Some(groups) = from.get(c0 * step..) else {
                return Err(OUT_OF_BOUNDS);
            };
            for (r, line) in plane.chunks_exact_mut(cols).enumerate() {
                let Some(line) = line.get_mut(c0..c0 + width) else {
                    return Err(OUT_OF_BOUNDS);
                };
                let Some(atoms) = groups.get(r..) else {
                    return Err(OUT_OF_BOUNDS);
                };
                for (slot, x) in line.iter_mut().zip(atoms.iter().step_by(step)) {
                    *slot = x.clone();
                }
            }
        }
        // Advance the odometer over the outer axes.
        for axis in (0..outer.len()).rev() {
            index[axis] += 1;
            base += st[axis];
            if index[axis] < outer[axis] {
                break;
            }
            base -= st[axis] * outer[axis];
            index[axis] = 0;
        }
    }
    Ok(Some(out))
}

/// A left fold along the middle axis of a contiguous `[outer, items,
/// inner]` buffer: for each outer position, `f(…f(f(seed, x0), x1)…)`
/// elementwise over the inner atoms, in exactly that order. Without a seed
/// the first item is the start (`items` must then be at least 1). `seed`
/// is contiguous `[outer, inner]`.
pub fn fold_axis<T: Copy>(
    data: &[T],
    [outer, items, inner]: [usize; 3],
    seed: Option<&[T]>,
    f: impl Fn(T, T) -> T,
) -> Result<Vec<T>, &'static str> {
    let need = outer.checked_mul(items).and_then(|x| x.checked_mul(inner));
    if need.is_none_or(|n| n > data.len()) || seed.is_some_and(|s| s.len() < outer * inner) {
        return Err(OUT_OF_BOUNDS);
    }
    if inner == 0 {
        return Ok(Vec::new());
    }
    let mut out = buffer(outer * inner)?;
    for o in 0..outer {
        let block = &data[o * items * inner..(o + 1) * items * inner];
        let (start, rest) = match seed {
            Some(s) => (&s[o * inner..(o + 1) * inner], block),
            None if items == 0 => return Err(OUT_OF_BOUNDS),
            None => block.split_at(inner),
        };
        if inner == 1 {
            out.push(rest.iter().fold(start[0], |acc, x| f(acc, *x)));
            continue;
        }
        let base = out.len();
        out.extend_from_slice(start);
        let acc = &mut out[base..];
        for item in rest.chunks_exact(inner) {
            for (a, x) in acc.iter_mut().zip(item) {
                *a = f(*a, *x);
            }
        }
    }
    Ok(out)
}

/// `fold_axis` by `scalar::fmax` (`greatest`) or `scalar::fmin` over items
/// of one atom, with the same result: NaN (`f32::NAN`) if any item is NaN,
/// else the item equal to the extreme that the left fold keeps — the last
/// of equals for `fmax` (it takes `b` when `a <= b`), the first for `fmin`
/// (it keeps `a`) — found by a pass that vectorises (and, when the
/// extreme is a zero, which of +0 and -0 it is by a second).
pub fn fold_float_extreme(
    data: &[f32],
    [outer, items]: [usize; 2],
    seed: Option<&[f32]>,
    greatest: bool,
) -> Result<Vec<f32>, &'static str> {
    if outer.checked_mul(items).is_none_or(|n| n > data.len()) || seed.is_some_and(|s| s.len() < outer) {
        return Err(OUT_OF_BOUNDS);
    }
    let mut out = buffer(outer)?;
    for o in 0..outer {
        let block = &data[o * items..(o + 1) * items];
        let (start, rest) = match seed {
            Some(s) => (s[o], block),
            None => match block.split_first() {
                Some((&first, rest)) => (first, rest),
                None => return Err(OUT_OF_BOUNDS),
            },
        };
        out.push(if greatest {
            crate::fmath::widest(
                #[inline(always)]
                || kept_extreme(start, rest, |a, b| a > b, true),
            )
        } else {
            crate::fmath::widest(
                #[inline(always)]
                || kept_extreme(start, rest, |a, b| a < b, false),
            )
        });
    }
    Ok(out)
}

/// See `fold_float_extreme`: the extreme in 16 lanes and whether there is
/// a NaN, then the item equal to it that the fold keeps (`last` of them).
#[inline(always)]
fn kept_extreme(start: f32, rest: &[f32], better: impl Fn(f32, f32) -> bool, last: bool) -> f32 {
    const LANES: usize = 16;
    if rest.is_empty() {
        return start;
    }
    let mut best = [start; LANES];
    let mut unordered = [false; LANES];
    let chunks = rest.chunks_exact(LANES);
    let tail = chunks.remainder();
    for c in chunks {
        for l in 0..LANES {
            let x = c[l];
            unordered[l] |= x.is_nan();
            best[l] = if better(x, best[l]) { x } else { best[l] };
        }
    }
    let mut nan = start.is_nan() || unordered.iter().any(|&u| u);
    let mut extreme = start;
    for &x in best.iter().chain(tail) {
        nan |= x.is_nan();
        if better(x, extreme) {
            extreme = x;
        }
    }
    if nan {
        return f32::NAN;
    }
    // Equal atoms other than zeros have the same bits: only ±0 needs the
    // one the fold keeps found.
    if extreme != 0.0 {
        return extreme;
    }
    if last {
        rest.iter()
            .rev()
            .find(|&&x| x == extreme)
            .copied()
            .unwrap_or(start)
    } else if start == extreme {
        start
    } else {
        rest.iter().find(|&&x| x == extreme).copied().unwrap_or(start)
    }
}

/// How a reduction along an axis combines its items.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// `fold`'s order: left to right, always.
    Left,
    /// `reduce`'s order for an associative operator: left to right up to
    /// [`PAIRWISE_LEAF`] items; beyond, the first ⌊n/2⌋ items and the rest
    /// reduced so and combined (a tree whose shape depends only on the
    /// number of items, never on threads: float sums stay accurate and
    /// the same bits on every run).
    Tree,
    /// Every partial left fold (`scan` with a seed, `iscan` without).
    Scan,
}

/// The most items a [`Order::Tree`] reduction combines left to right.
pub const PAIRWISE_LEAF: usize = 256;

/// A reduction along the middle axis of `[outer, items, inner]` in the
/// given order: [`fold_axis`] for `Left`, and for `Tree`, with a seed,
/// `f(seed, tree)`. For `Scan`, the result is `[outer, items (+1 with a
/// seed), inner]`.
pub fn reduce_axis<T: Copy>(
    data: &[T],
    dims: [usize; 3],
    seed: Option<&[T]>,
    order: Order,
    f: impl Fn(T, T) -> T,
) -> Result<Vec<T>, &'static str> {
    let [outer, items, inner] = dims;
    if inner == 0 {
        // Items of no atoms: nothing to combine, nothing to give.
        return Ok(Vec::new());
    }
    if order == Order::Left || (order == Order::Tree && items <= PAIRWISE_LEAF) {
        return fold_axis(data, dims, seed, f);
    }
    let need = outer.checked_mul(items).and_then(|x| x.checked_mul(inner));
    if need.is_none_or(|n| n > data.len()) || seed.is_some_and(|s| s.len() < outer * inner) {
        return Err(OUT_OF_BOUNDS);
    }
    if order == Order::Scan {
        let rows = items + usize::from(seed.is_some());
        let mut out = buffer(outer * rows * inner)?;
        for o in 0..outer {
            let block = &data[o * items * inner..(o + 1) * items * inner];
            let rest = match seed {
                Some(s) => {
                    out.extend_from_slice(&s[o * inner..(o + 1) * inner]);
                    block
                }
                None if items == 0 => continue,
                None => {
                    out.extend_from_slice(&block[..inner]);
                    &block[inner..]
                }
            };
            if inner == 1 {
                // Items of one atom: the running value kept at hand.
                let Some(mut acc) = out.last().copied() else {
                    return Err(OUT_OF_BOUNDS);
                };
                out.extend(rest.iter().map(|&x| {
                    acc = f(acc, x);
                    acc
                }));
                continue;
            }
            for item in rest.chunks_exact(inner) {
                let prev = out.len() - inner;
                for (k, x) in item.iter().enumerate() {
                    let next = f(out[prev + k], *x);
                    out.push(next);
                }
            }
        }
        return Ok(out);
    }
    let mut out = buffer(outer * inner)?;
    for o in 0..outer {
        let block = &data[o * items * inner..(o + 1) * items * inner];
        let mut acc = tree(block, items, inner, &f);
        if let Some(s) = seed {
            for (a, s) in acc.iter_mut().zip(&s[o * inner..(o + 1) * inner]) {
                *a = f(*s, *a);
            }
        }
        out.extend_from_slice(&acc);
    }
    Ok(out)
}

/// The tree reduction of `items ≥ 1` items of `inner` atoms (see
/// [`Order::Tree`]).
pub(crate) fn tree<T: Copy>(block: &[T], items: usize, inner: usize, f: &impl Fn(T, T) -> T) -> Vec<T> {
    if items <= PAIRWISE_LEAF {
        let (start, rest) = block.split_at(inner.min(block.len()));
        let mut acc = start.to_vec();
        if inner == 1 {
            if let Some(a) = acc.first_mut() {
                *a = rest.iter().fold(*a, |a, x| f(a, *x));
            }
            return acc;
        }
        for item in rest.chunks_exact(inner) {
            for (a, x) in acc.iter_mut().zip(item) {
                *a = f(*a, *x);
            }
        }
        return acc;
    }
    let half = items / 2;
    let (left, right) = block.split_at(half * inner);
    let mut acc = tree(left, half, inner, f);
    let r = tree(right, items - half, inner, f);
    for (a, b) in acc.iter_mut().zip(r) {
        *a = f(*a, b);
    }
    acc
}

/// Atoms computed a block of `L` at a time (by a function of arrays, such
/// as `fmath::exp_lanes`, whose steps vectorise): fed one at a time, in
/// order, across runs; the atoms of a last short block are computed one
/// at a time (by a function of one atom that gives the same results).
struct Lanes<A, const L: usize> {
    block: [A; L],
    n: usize,
}

impl<A: Copy + Default, const L: usize> Lanes<A, L> {
    fn new() -> Lanes<A, L> {
        Lanes {
            block: [A::default(); L],
            n: 0,
        }
    }

    /// Adds the first atoms of the run of `n` atoms of `a` from `offset`
    /// at a step `step`, as many as the block has room for (a slice
    /// copied, or one atom repeated, where the step is 1 or 0); how many.
    fn take_run(&mut self, a: &[A], offset: usize, n: usize, step: usize) -> usize {
        let take = (L - self.n).min(n);
        let Some(slots) = self.block.get_mut(self.n..self.n + take) else {
            return n;
        };
        match step {
            0 => slots.fill(atom(a, offset)),
            1 => match a.get(offset..offset + take) {
                Some(run) => slots.copy_from_slice(run),
                None => slots.fill(A::default()),
            },
            _ => {
                for (slot, x) in slots.iter_mut().zip(run(a, offset, take, step)) {
                    *slot = *x;
                }
            }
        }
        self.n += take;
        take
    }

    /// The block when it is full (then empty again).
    fn full(&mut self) -> Option<[A; L]> {
        (self.n == L).then(|| {
            self.n = 0;
            self.block
        })
    }

    /// The atoms of the last, short block.
    fn rest(&self) -> &[A] {
        self.block.get(..self.n).unwrap_or_default()
    }
}

/// The atom at `i` (a layout that fits was checked: never the default).
fn atom<A: Copy + Default>(a: &[A], i: usize) -> A {
    a.get(i).copied().unwrap_or_default()
}

/// `map1` by a function of `L` atoms at a time, `f`, and the same
/// function of one atom, `f1`.
pub fn map1_lanes<A: Copy + Default, R: Copy, const L: usize>(
    shape: &[usize],
    a: &[A],
    la: &Layout,
    (f, f1): (impl Fn([A; L]) -> [R; L], impl Fn(A) -> R),
) -> Result<Vec<R>, &'static str> {
    if !la.fits(shape, a.len()) {
        return Err(OUT_OF_BOUNDS);
    }
    let mut out = buffer(shape.iter().product())?;
    let mut xs = Lanes::new();
    for_each_run(shape, [la], |[oa], n, [sa]| {
        let mut k = 0;
        while k < n {
            k += xs.take_run(a, oa + k * sa, n - k, sa);
            if let Some(x) = xs.full() {
                out.extend_from_slice(&f(x));
            }
        }
    });
    out.extend(xs.rest().iter().map(|x| f1(*x)));
    Ok(out)
}

/// `map2` by a function of `L` pairs at a time, `f`, and the same
/// function of one pair, `f1`.
pub fn map2_lanes<A: Copy + Default, B: Copy + Default, R: Copy, const L: usize>(
    shape: &[usize],
    (a, la): (&[A], &Layout),
    (b, lb): (&[B], &Layout),
    (f, f1): (impl Fn([A; L], [B; L]) -> [R; L], impl Fn(A, B) -> R),
) -> Result<Vec<R>, &'static str> {
    if !la.fits(shape, a.len()) || !lb.fits(shape, b.len()) {
        return Err(OUT_OF_BOUNDS);
    }
    let mut out = buffer(shape.iter().product())?;
    let (mut xs, mut ys) = (Lanes::new(), Lanes::new());
    for_each_run(shape, [la, lb], |[oa, ob], n, [sa, sb]| {
        // The two blocks fill together: each takes as many as the other.
        let mut k = 0;
        while k < n {
            ys.take_run(b, ob + k * sb, n - k, sb);
            k += xs.take_run(a, oa + k * sa, n - k, sa);
            if let (Some(x), Some(y)) = (xs.full(), ys.full()) {
                out.extend_from_slice(&f(x, y));
            }
        }
    });
    out.extend(xs.rest().iter().zip(ys.rest()).map(|(x, y)| f1(*x, *y)));
    Ok(out)
}

/// `zip_in_place` by a function of `L` pairs at a time, `f`, and the same
/// function of one pair, `f1`.
pub fn zip_in_place_lanes<A: Copy + Default, B: Copy + Default, const L: usize>(
    shape: &[usize],
    a: &mut [A],
    (b, lb): (&[B], &Layout),
    (f, f1): (impl Fn([A; L], [B; L]) -> [A; L], impl Fn(A, B) -> A),
) -> Result<(), &'static str> {
    let la = Layout::contiguous(shape);
    if !la.fits(shape, a.len()) || !lb.fits(shape, b.len()) {
        return Err(OUT_OF_BOUNDS);
    }
    // The target's atoms in row-major order are a[0], a[1] … (it is
    // contiguous): each block's results go back where it was read.
    let (mut xs, mut ys) = (Lanes::new(), Lanes::new());
    let (mut read, mut written) = (0, 0);
    for_each_run(shape, [&la, lb], |[_, ob], n, [_, sb]| {
        let mut k = 0;
        while k < n {
            ys.take_run(b, ob + k * sb, n - k, sb);
            let took = xs.take_run(a, read, n - k, 1);
            read += took;
            k += took;
            if let (Some(x), Some(y)) = (xs.full(), ys.full()) {
                if let Some(slots) = a.get_mut(written..written + L) {
                    slots.copy_from_slice(&f(x, y));
                }
                written += L;
            }
        }
    });
    let rest = xs.rest().iter().zip(ys.rest()).map(|(x, y)| f1(*x, *y));
    for (slot, r) in a.iter_mut().skip(written).zip(rest) {
        *slot = r;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_runs_read_what_the_steps_say() {
        // Every pair of steps (short ones read as chunks), runs ending at
        // the buffer's end (no whole chunk after the last atom) or not.
        let rows = 3usize;
        for n in [1usize, 2, 7, 33] {
            for sa in 0..6usize {
                for sb in 0..6usize {
                    for slack in [0usize, 2] {
                        let len = |s: usize| rows * n * s.max(1) + slack + 1;
                        let a: Vec<i64> = (0..len(sa) as i64).collect();
                        let b: Vec<i64> = (0..len(sb) as i64).map(|x| 1000 * x).collect();
                        let la = Layout {
                            offset: slack,
                            strides: vec![n * sa.max(1), sa],
                        };
                        let lb = Layout {
                            offset: slack,
                            strides: vec![n * sb.max(1), sb],
                        };
                        let at =
                            |l: &Layout, r: usize, i: usize| l.offset + r * l.strides[0] + i * l.strides[1];
                        let want: Vec<i64> = (0..rows)
                            .flat_map(|r| (0..n).map(move |i| (r, i)))
                            .map(|(r, i)| a[at(&la, r, i)] * 7 + b[at(&lb, r, i)])
                            .collect();
                        let shape = [rows, n];
                        let got = map2(&shape, (&a, &la), (&b, &lb), |x, y| x * 7 + y);
                        assert_eq!(got, Ok(want), "map2 n {n} steps {sa} {sb}");
                        let got = map1(&shape, &b, &lb, |y| y + 1);
                        let want1: Vec<i64> = (0..rows)
                            .flat_map(|r| (0..n).map(move |i| (r, i)))
                            .map(|(r, i)| b[at(&lb, r, i)] + 1)
                            .collect();
                        assert_eq!(got, Ok(want1), "map1 n {n} step {sb}");
                        let mut acc: Vec<i64> = (0..(rows * n) as i64).collect();
                        let done = zip_in_place(&shape, &mut acc, (&b, &lb), |x, y| x * 7 + y);
                        assert_eq!(done, Ok(()));
                        let want2: Vec<i64> = (0..rows)
                            .flat_map(|r| (0..n).map(move |i| (r, i)))
                            .map(|(r, i)| ((r * n + i) as i64) * 7 + b[at(&lb, r, i)])
                            .collect();
                        assert_eq!(acc, want2, "zip_in_place n {n} step {sb}");
                    }
                }
            }
        }
    }

    #[test]
    fn float_extremes_keep_what_the_left_fold_keeps() {
        // Ties of -0.0 and 0.0 across the lanes, a NaN, rows of every length.
        for n in [1usize, 2, 15, 16, 17, 40, 100] {
            for seed in 0..12u32 {
                let mut row: Vec<f32> = (0..n)
                    .map(|i| {
                        let k = (i as u32).wrapping_mul(2654435761).wrapping_add(seed * 97) % 7;
                        [0.0, -0.0, 1.0, -1.0, 1.0, 0.0, -0.0][k as usize]
                    })
                    .collect();
                if seed == 5 && n > 3 {
                    row[n / 2] = f32::NAN;
                }
                for (greatest, f) in [
                    (true, crate::scalar::fmax as fn(f32, f32) -> f32),
                    (false, crate::scalar::fmin),
                ] {
                    let want = fold_axis(&row, [1, n, 1], None, f).unwrap_or_default();
                    let got = fold_float_extreme(&row, [1, n], None, greatest).unwrap_or_default();
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got), bits(&want), "{n} {seed} {greatest}");
                    let want = fold_axis(&row, [1, n, 1], Some(&[-0.0]), f).unwrap_or_default();
                    let got = fold_float_extreme(&row, [1, n], Some(&[-0.0]), greatest).unwrap_or_default();
                    assert_eq!(bits(&got), bits(&want), "seeded {n} {seed} {greatest}");
                }
            }
        }
    }

    #[test]
    fn tree_reduction_is_left_to_right_when_short_and_accurate_when_long() {
        let short: Vec<f32> = (0..PAIRWISE_LEAF).map(|i| 0.1 * i as f32).collect();
        let left = short.iter().fold(0.0f32, |a, x| a + x);
        let r = reduce_axis(&short, [1, short.len(), 1], Some(&[0.0]), Order::Tree, |a, b| {
            a + b
        });
        assert_eq!(r.map(|v| v[0].to_bits()), Ok(left.to_bits()));
        // 10^7 copies of 0.1: a left-to-right f32 sum is far off; the tree
        // is within 1e-5 of 10^6.
        let long = vec![0.1f32; 10_000_000];
        let r = reduce_axis(&long, [1, long.len(), 1], None, Order::Tree, |a, b| a + b);
        let sum = r.map(|v| v[0]).unwrap_or(f32::NAN);
        assert!(((sum as f64 - 1.0e6) / 1.0e6).abs() < 1e-5, "{sum}");
        // Columns: each summed as a vector would be.
        let m: Vec<f32> = (0..3000).map(|i| (i % 7) as f32 * 0.3).collect();
        let cols = reduce_axis(&m, [1, 1000, 3], None, Order::Tree, |a, b| a + b).unwrap_or_default();
        for (c, sum) in cols.iter().enumerate() {
            let col: Vec<f32> = m.iter().skip(c).step_by(3).copied().collect();
            let one = reduce_axis(&col, [1, 1000, 1], None, Order::Tree, |a, b| a + b).unwrap_or_default();
            assert_eq!(Some(sum.to_bits()), one.first().map(|x| x.to_bits()));
        }
    }

    #[test]
    fn scan_gives_every_partial_fold() {
        let xs = [1i64, 2, 3, 4, 5, 6];
        let r = reduce_axis(&xs, [1, 3, 2], Some(&[10, 20]), Order::Scan, |a, b| a + b);
        assert_eq!(r, Ok(vec![10, 20, 11, 22, 14, 26, 19, 32]));
        let r = reduce_axis(&xs, [2, 3, 1], None, Order::Scan, |a, b| a - b);
        assert_eq!(r, Ok(vec![1, -1, -4, 4, -1, -7]));
    }

    #[test]
    fn prefix_replication_reuses_each_atom_in_place() {
        // [10 20] + [[1 2 3] [4 5 6]]
        let shape = [2, 3];
        let r = map2(
            &shape,
            (&[10, 20][..], &Layout::prefix(&[2], &shape)),
            (&[1, 2, 3, 4, 5, 6][..], &Layout::contiguous(&shape)),
            |x: i64, y: i64| x + y,
        );
        assert_eq!(r, Ok(vec![11, 12, 13, 24, 25, 26]));
    }

    #[test]
    fn a_middle_axis_can_be_replicated() {
        // x[i] + y[j] over [i j k]: x is [2 1] replicated along j, y is [3 1] along i.
        let shape = [2, 3, 1];
        let x = Layout {
            offset: 0,
            strides: vec![1, 0, 0],
        };
        let y = Layout {
            offset: 0,
            strides: vec![0, 1, 0],
        };
        let r = map2(
            &shape,
            (&[100, 200][..], &x),
            (&[1, 2, 3][..], &y),
            |a: i32, b: i32| a + b,
        );
        assert_eq!(r, Ok(vec![101, 102, 103, 201, 202, 203]));
    }

    #[test]
    fn a_layout_outside_its_buffer_is_an_error_not_a_panic() {
        let r = map1(&[4], &[1, 2, 3][..], &Layout::contiguous(&[4]), |x: i32| x);
        assert_eq!(r, Err(OUT_OF_BOUNDS));
    }

    #[test]
    fn folds_go_left_to_right_along_the_middle_axis() {
        // Two outer positions, three items of two atoms each, with -.
        let data = [1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60];
        let r = fold_axis(&data, [2, 3, 2], None, |a: i64, b: i64| a - b);
        assert_eq!(r, Ok(vec![1 - 3 - 5, 2 - 4 - 6, 10 - 30 - 50, 20 - 40 - 60]));
        let r = fold_axis(&data[..6], [1, 6, 1], Some(&[100]), |a: i64, b: i64| a - b);
        assert_eq!(r, Ok(vec![100 - 21]));
    }

    /// A transposition laid out in tiles — planes under an outer axis,
    /// sides that are not whole tiles, from an offset — is every atom in
    /// its place.
    #[test]
    fn a_transposition_in_tiles_is_every_atom_in_its_place() {
        for (rows, cols) in [(TILE, TILE), (70, 45), (33, 100)] {
            let offset = 3;
            let data: Vec<i64> = (0..(offset + 2 * rows * cols) as i64).collect();
            // Two planes, each the transposition of a [cols rows] matrix.
            let shape = [2, rows, cols];
            let layout = Layout {
                offset,
                strides: vec![rows * cols, 1, rows],
            };
            let want: Vec<i64> = (0..2)
                .flat_map(|p| (0..rows).flat_map(move |r| (0..cols).map(move |c| (p, r, c))))
                .map(|(p, r, c)| data[offset + p * rows * cols + r + c * rows])
                .collect();
            assert_eq!(gather(&shape, &data, &layout), Ok(want));
        }
    }

    #[test]
    fn gathering_a_replicated_operand_copies_it_out() {
        let r = gather(&[2, 2], &[7, 8][..], &Layout::prefix(&[2], &[2, 2]));
        assert_eq!(r, Ok(vec![7, 7, 8, 8]));
    }
}

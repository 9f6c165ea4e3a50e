//! `f.^` over a frame, and its rule for a table of powers: where the
//! bases repeat along an axis (each raised to many exponents, as in the
//! powers of a vector lifted over the exponents), the part of `x^y` that
//! depends on x alone — its log2, the costlier half — is computed once
//! per base for a block of [`LANES`] bases, and each row of powers from
//! it; a large table's columns are shared among threads, in runs of whole
//! blocks. The same operations on the same values as `fmath::pow`, so the
//! same bits on any number of threads; nothing stored beyond the result.

use crate::fmath::{self, LANES};
use crate::kernel::{self, Layout};

/// `f.^` of `a` and `b` at every position of `shape`.
pub fn pow(shape: &[usize], a: (&[f32], &Layout), b: (&[f32], &Layout)) -> Result<Vec<f32>, &'static str> {
    pow_on(shape, a, b, crate::threads())
}

/// `pow` on at most `threads` threads (1: on this one, for a block of a
/// larger computation that is itself shared among threads).
pub fn pow_on(
    shape: &[usize],
    (a, la): (&[f32], &Layout),
    (b, lb): (&[f32], &Layout),
    threads: usize,
) -> Result<Vec<f32>, &'static str> {
    if !la.fits(shape, a.len()) || !lb.fits(shape, b.len()) {
        return Err(kernel::OUT_OF_BOUNDS);
    }
    let (dims, [sa, sb]) = kernel::coalesce(shape, [la, lb]);
    let k = dims.len();
    // [outer …, rows, cols]: the bases step along the columns, the same
    // for every row.
    let table = k >= 2 && sa[k - 1] == 1 && sa[k - 2] == 0 && dims[k - 2] > 1 && dims[k - 1] >= LANES;
    if !table {
        return kernel::map2_lanes(shape, (a, la), (b, lb), (fmath::pow_lanes, fmath::pow));
    }
    let (rows, cols) = (dims[k - 2], dims[k - 1]);
    let steps = (sb[k - 2], sb[k - 1]);
    let total: usize = dims.iter().product();
    let mut out = kernel::buffer(total)?;
    out.resize(total, 0.0);
    let outer = dims.get(..k - 2).unwrap_or_default();
    let outer_count: usize = outer.iter().product();
    // Columns shared among the threads in runs of whole blocks of `LANES`
    // (each base's log made once, by the thread that has its column); no
    // power depends on which thread makes it.
    let threads = threads.min(cols / LANES);
    let per = if threads < 2 || rows * cols < PARALLEL_POWERS {
        cols
    } else {
        cols.div_ceil(LANES).div_ceil(threads * 4) * LANES
    };
    for (o, part) in out.chunks_exact_mut(rows * cols).enumerate().take(outer_count) {
        // This outer position's offsets into the bases and exponents.
        let (mut oa, mut ob, mut rest) = (la.offset, lb.offset, o);
        for axis in (0..k - 2).rev() {
            let i = rest % dims[axis];
            rest /= dims[axis];
            oa += i * sa[axis];
            ob += i * sb[axis];
        }
        // Each run of columns: its first column, and its part of every row.
        let mut runs: Vec<(usize, Vec<&mut [f32]>)> = (0..cols.div_ceil(per.max(1)))
            .map(|r| (r * per, Vec::with_capacity(rows)))
            .collect();
        for row in part.chunks_exact_mut(cols) {
            let mut rest = row;
            for (_, pieces) in &mut runs {
                let (piece, after) = rest.split_at_mut(per.min(rest.len()));
                pieces.push(piece);
                rest = after;
            }
        }
        let table = |(first, mut pieces): (usize, Vec<&mut [f32]>)| {
            columns(a, b, (oa + first, ob + first * steps.1), steps, &mut pieces).is_some()
        };
        let done = if runs.len() < 2 {
            runs.into_iter().all(table)
        } else {
            crate::in_parallel(runs, threads, table)
        };
        if !done {
            return Err(kernel::OUT_OF_BOUNDS);
        }
    }
    Ok(out)
}

/// A table at least this large (atoms) is shared among threads.
const PARALLEL_POWERS: usize = 1 << 17;

/// A run of columns of a table of powers: `rows[r][c]` is the base at
/// `a[oa + c]` raised to the exponent at `b[ob + r·row_step + c·col_step]`;
/// each base's log made once for all its rows.
fn columns(
    a: &[f32],
    b: &[f32],
    offsets: (usize, usize),
    steps: (usize, usize),
    rows: &mut [&mut [f32]],
) -> Option<()> {
    // One choice of instructions for the whole run, not one a block.
    fmath::widest(
        #[inline(always)]
        || columns_here(a, b, offsets, steps, rows),
    )
}

/// `columns` in the instructions of the caller.
#[inline(always)]
fn columns_here(
    a: &[f32],
    b: &[f32],
    (oa, ob): (usize, usize),
    (row_step, col_step): (usize, usize),
    rows: &mut [&mut [f32]],
) -> Option<()> {
    let cols = rows.first().map_or(0, |r| r.len());
    let exponent = |r: usize, c: usize| b.get(ob + r * row_step + c * col_step).copied();
    let mut j = 0;
    while j < cols {
        let n = LANES.min(cols - j);
        let bases = a.get(oa + j..oa + j + n)?;
        if let Ok(xs) = <[f32; LANES]>::try_from(bases) {
            let logs = fmath::pow_log2_lanes_here(xs);
            for (r, row) in rows.iter_mut().enumerate() {
                let powers = if col_step == 0 {
                    // One exponent along the row (a table of powers).
                    let y = exponent(r, 0)?;
                    fmath::pow_by_log2_lanes_by(xs, logs, |_| y)
                } else {
                    let mut ys = [0.0; LANES];
                    for (l, y) in ys.iter_mut().enumerate() {
                        *y = exponent(r, j + l)?;
                    }
                    fmath::pow_by_log2_lanes_here(xs, logs, ys)
                };
                row.get_mut(j..j + LANES)?.copy_from_slice(&powers);
            }
        } else {
            // The last, short block: one base at a time.
            for (l, &x) in bases.iter().enumerate() {
                let log = fmath::pow_log2(x);
                for (r, row) in rows.iter_mut().enumerate() {
                    *row.get_mut(j + l)? = fmath::pow_by_log2(x, log, exponent(r, j + l)?);
                }
            }
        }
        j += n;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table of powers — bases repeated along the rows, in blocks of
    /// `LANES` and a short last one, under an outer axis, small or large
    /// enough to be shared among threads — gives `pow`'s bits at every
    /// position.
    #[test]
    fn a_table_of_powers_is_pow_at_every_position() {
        for cols in [2 * LANES + 5, PARALLEL_POWERS / 4 + 3 * LANES + 37] {
            table_of(cols);
        }
    }

    fn table_of(cols: usize) {
        let specials = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            1e-45,
        ];
        let bases: Vec<f32> = (0..2 * cols)
            .map(|i| specials.get(i % 40).copied().unwrap_or(i as f32 * 0.37 - 30.0))
            .collect();
        let bits = |v: &[f32]| {
            v.iter()
                .map(|x| if x.is_nan() { 0x7fc0_0000 } else { x.to_bits() })
                .collect::<Vec<_>>()
        };
        let row_exponents = [2.0, -1.0, 0.5, 3.0, f32::NAN, 0.0, -7.5];
        let rows = row_exponents.len();
        let shape = [2, rows, cols];
        let la = Layout {
            offset: 0,
            strides: vec![cols, 0, 1],
        };
        // One exponent per row, or one per row and column.
        let per_atom: Vec<f32> = (0..rows * cols)
            .map(|i| row_exponents[i % rows] + (i % 3) as f32)
            .collect();
        for (exponents, col_step) in [(&row_exponents[..], 0), (&per_atom[..], 1)] {
            let row_step = if col_step == 0 { 1 } else { cols };
            let lb = Layout {
                offset: 0,
                strides: vec![0, row_step, col_step],
            };
            let got = pow(&shape, (&bases, &la), (exponents, &lb));
            let want: Vec<f32> = (0..2)
                .flat_map(|o| (0..rows).flat_map(move |r| (0..cols).map(move |c| (o, r, c))))
                .map(|(o, r, c)| fmath::pow(bases[o * cols + c], exponents[r * row_step + c * col_step]))
                .collect();
            assert_eq!(got.map(|g| bits(&g)), Ok(bits(&want)));
        }
    }
}

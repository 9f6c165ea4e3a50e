//! The matrix product `[m k]·[k n]` (`matmul`, `f.matmul`) as a blocked,
//! cache-friendly loop: `b` packed once into panels of `NR` columns,
//! `KC` items deep; each band of rows of `a` packed into strips of `MR`
//! rows; a register tile of `MR × NR` sums computed from one strip and one
//! panel at a time. Nothing of size `m·k·n` is ever built.
//!
//! Every sum runs over the items in order (`KC` at a time into the tile,
//! each block added to the result in order), whatever the number of
//! threads, so the result is the same bits on every run. Bands of rows
//! are shared among threads (`crate::threads`).

/// What the loop needs of an atom: zero and a multiply-add (wrapping for
/// Int, as `+` and `*` are; Float rounds the product, then the sum).
pub(crate) trait Ring: Copy + Send + Sync + 'static {
    const ZERO: Self;
    fn mul_add(self, a: Self, b: Self) -> Self;
    fn add(self, other: Self) -> Self;
}

impl Ring for f32 {
    const ZERO: f32 = 0.0;
    #[inline(always)]
    fn mul_add(self, a: f32, b: f32) -> f32 {
        self + a * b
    }
    #[inline(always)]
    fn add(self, other: f32) -> f32 {
        self + other
    }
}

impl Ring for i64 {
    const ZERO: i64 = 0;
    #[inline(always)]
    fn mul_add(self, a: i64, b: i64) -> i64 {
        self.wrapping_add(a.wrapping_mul(b))
    }
    #[inline(always)]
    fn add(self, other: i64) -> i64 {
        self.wrapping_add(other)
    }
}

/// Rows of a register tile.
const MR: usize = 4;
/// Columns of a register tile (two vectors of f32 lanes per row).
const NR: usize = 8;
/// Items per block (a strip of `a` and a panel of `b` stay in L1).
const KC: usize = 256;
/// Rows per band (a band's packed strips stay in L2); the unit of work a
/// thread takes.
const MC: usize = 64;

/// `c = a·b` for row-major `a` `[m k]` and `b` `[k n]`.
pub(crate) fn matmul<T: Ring>(
    a: &[T],
    b: &[T],
    m: usize,
    k: usize,
    n: usize,
) -> Result<Vec<T>, &'static str> {
    const OUT_OF_BOUNDS: &str = "internal error: a matrix smaller than its shape";
    let size = m.checked_mul(n).ok_or(OUT_OF_BOUNDS)?;
    if a.len() < m.saturating_mul(k) || b.len() < k.saturating_mul(n) {
        return Err(OUT_OF_BOUNDS);
    }
    let mut c = crate::kernel::buffer(size)?;
    c.resize(size, T::ZERO);
    if size == 0 || k == 0 {
        return Ok(c);
    }
    let packed = pack_b(b, k, n)?;
    let work = m.saturating_mul(n).saturating_mul(k);
    let bands: Vec<(usize, &mut [T])> = c
        .chunks_mut(MC * n)
        .enumerate()
        .map(|(i, rows)| (i * MC, rows))
        .collect();
    let threads = crate::threads().min(bands.len());
    if threads < 2 || work < 1 << 21 {
        for (row, rows) in bands {
            band(a, &packed, row, rows, k, n)?;
        }
        return Ok(c);
    }
    // Bands shared among the threads.
    let ok = crate::in_parallel(bands, threads, |(row, rows)| {
        band(a, &packed, row, rows, k, n).is_ok()
    });
    if ok {
        Ok(c)
    } else {
        Err("internal error: a matrix product's thread failed")
    }
}

/// `b` as panels: for each block of `KC` items, for each panel of `NR`
/// columns (the last padded with zeros), its `kc × NR` atoms row by row.
fn pack_b<T: Ring>(b: &[T], k: usize, n: usize) -> Result<Vec<T>, &'static str> {
    let panels = n.div_ceil(NR);
    let mut out = crate::kernel::buffer(k.saturating_mul(panels).saturating_mul(NR))?;
    for k0 in (0..k).step_by(KC) {
        let kc = KC.min(k - k0);
        for p in 0..panels {
            let j0 = p * NR;
            let w = NR.min(n - j0);
            for kk in k0..k0 + kc {
                let row = &b[kk * n + j0..kk * n + j0 + w];
                out.extend_from_slice(row);
                out.extend(std::iter::repeat_n(T::ZERO, NR - w));
            }
        }
    }
    Ok(out)
}

/// The rows `row ..` of `c` (as many as `rows` holds) from `a` and the
/// packed `b`.
fn band<T: Ring>(
    a: &[T],
    packed: &[T],
    row: usize,
    rows: &mut [T],
    k: usize,
    n: usize,
) -> Result<(), &'static str> {
    let mc = rows.len() / n;
    let strips = mc.div_ceil(MR);
    let panels = n.div_ceil(NR);
    let mut strip_pack = crate::kernel::buffer(strips * MR * KC.min(k))?;
    for k0 in (0..k).step_by(KC) {
        let kc = KC.min(k - k0);
        // The band's rows of `a`, items k0 .. k0 + kc, as strips of MR
        // rows, item by item (rows past the end are zeros).
        strip_pack.clear();
        for s in 0..strips {
            for kk in k0..k0 + kc {
                for r in 0..MR {
                    let i = s * MR + r;
                    strip_pack.push(if i < mc { a[(row + i) * k + kk] } else { T::ZERO });
                }
            }
        }
        let block = &packed[k0 * panels * NR..(k0 + kc) * panels * NR];
        for p in 0..panels {
            let panel = &block[p * kc * NR..(p + 1) * kc * NR];
            let j0 = p * NR;
            let w = NR.min(n - j0);
            for s in 0..strips {
                let strip = &strip_pack[s * kc * MR..(s + 1) * kc * MR];
                let tile = tile(strip, panel);
                for (r, sums) in tile.iter().enumerate().take(mc.saturating_sub(s * MR).min(MR)) {
                    let at = (s * MR + r) * n + j0;
                    for (c, x) in rows[at..at + w].iter_mut().zip(sums) {
                        *c = c.add(*x);
                    }
                }
            }
        }
    }
    Ok(())
}

/// One `MR × NR` register tile: the sums over a strip's and a panel's
/// items, in order.
#[inline(always)]
fn tile<T: Ring>(strip: &[T], panel: &[T]) -> [[T; NR]; MR] {
    let mut acc = [[T::ZERO; NR]; MR];
    let (strip, _) = strip.as_chunks::<MR>();
    let (panel, _) = panel.as_chunks::<NR>();
    for (a, b) in strip.iter().zip(panel) {
        for r in 0..MR {
            for c in 0..NR {
                acc[r][c] = acc[r][c].mul_add(a[r], b[c]);
            }
        }
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &[i64], b: &[i64], m: usize, k: usize, n: usize) -> Vec<i64> {
        let mut c = vec![0i64; m * n];
        for i in 0..m {
            for j in 0..n {
                for p in 0..k {
                    c[i * n + j] = c[i * n + j].wrapping_add(a[i * k + p].wrapping_mul(b[p * n + j]));
                }
            }
        }
        c
    }

    #[test]
    fn every_edge_of_the_blocking() {
        for &(m, k, n) in &[
            (1, 1, 1),
            (5, 3, 9),
            (70, 300, 17),
            (4, 256, 8),
            (130, 513, 33),
            (3, 0, 2),
        ] {
            let a: Vec<i64> = (0..m * k).map(|x| (x as i64 * 7919) % 23 - 11).collect();
            let b: Vec<i64> = (0..k * n).map(|x| (x as i64 * 104729) % 19 - 9).collect();
            assert_eq!(matmul(&a, &b, m, k, n), Ok(naive(&a, &b, m, k, n)), "{m}×{k}×{n}");
        }
    }
}

//! The matrix product `[m k]·[k n]` (`matmul`, `f.matmul`) as a blocked,
//! cache-friendly loop: `b` packed once into panels of `NR` columns,
//! `KC` items deep; each band of rows of `a` taken as strips of `MR`
//! rows, read in place where `a` is row-major or transposed (packed
//! otherwise); a register tile of `MR × NR` sums computed from one strip
//! and one panel at a time. Nothing of size `m·k·n` is ever built.
//!
//! Every sum runs over the items in order (`KC` at a time into the tile,
//! each block added to the result in order), whatever the tile, the
//! vectors or the number of threads, so the result is the same bits on
//! every run and every machine. Bands of rows are shared among threads
//! (`crate::threads`).
//!
//! The tile of Float sums uses AVX2 where the CPU has it, chosen when the
//! program runs (`pulp`), each lane one sum, a multiply then an add (never
//! fused, which would round once where the compiled engine rounds twice);
//! elsewhere, and for Int, a tile of plain loops that the compiler
//! vectorises for the baseline target.

use crate::batch::{Batched, Try};
use crate::eval::check_size;
use pulp::{Simd, WithSimd};
use remora_syntax::Span;
use remora_value::{Array, Data};

/// What the loop needs of an atom: zero and a multiply-add (wrapping for
/// Int, as `+` and `*` are; Float rounds the product, then the sum).
pub(crate) trait Ring: Copy + Send + Sync + 'static {
    const ZERO: Self;
    fn mul_add(self, a: Self, b: Self) -> Self;
    fn add(self, other: Self) -> Self;

    /// `c = a·b` for `a` `[m k]` and `b` `[k n]`, by the best tile for
    /// this atom.
    fn product(
        a: Strided<'_, Self>,
        b: Strided<'_, Self>,
        m: usize,
        k: usize,
        n: usize,
    ) -> Result<Vec<Self>, &'static str> {
        blocked(Portable, a, b, m, k, n)
    }
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

    fn product(
        a: Strided<'_, f32>,
        b: Strided<'_, f32>,
        m: usize,
        k: usize,
        n: usize,
    ) -> Result<Vec<f32>, &'static str> {
        pulp::Arch::new().dispatch(FloatProduct { a, b, m, k, n })
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

/// Items per block (a strip of `a` and a panel of `b` stay in L1). The
/// compiled engine's `f.matmul` sums in the same blocks.
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
    T::product(Strided::rows(a, k), Strided::rows(b, n), m, k, n)
}

/// `c = a·b` for `a` `[m k]` and `b` `[k n]` read in place through their
/// steps (a transposed matrix is a view: nothing is copied before the
/// packing, which reads it either way).
fn matmul_strided<T: Ring>(
    a: Strided<'_, T>,
    b: Strided<'_, T>,
    m: usize,
    k: usize,
    n: usize,
) -> Result<Vec<T>, &'static str> {
    T::product(a, b, m, k, n)
}

/// `(f.matmul a b)` of two Float matrices (no batch, no frame) read in
/// place: a transposed argument (a view) is packed straight from where its
/// atoms are, never gathered first. `None` when the arguments are not so
/// (the vocabulary's rule then runs on dense cells).
pub(crate) fn matmul_batched<'p>(all: &[(Batched<'p>, Vec<usize>)]) -> Try<Batched<'p>> {
    let [(a, _), (b, _)] = all else {
        return None;
    };
    let (Data::Float(da), Data::Float(db)) = (&a.v.data, &b.v.data) else {
        return None;
    };
    let (&[m, k], &[k2, n], &[ar, ac], &[br, bc]) = (
        a.v.shape.as_slice(),
        b.v.shape.as_slice(),
        a.strides.as_slice(),
        b.strides.as_slice(),
    ) else {
        return None;
    };
    if a.nb != 0 || b.nb != 0 || k != k2 || ac == 0 {
        return None;
    }
    check_size(m.checked_mul(n)?, Span::default()).ok()?;
    let (a, b) = (
        Strided {
            data: da,
            offset: a.offset,
            row: ar,
            col: ac,
        },
        Strided {
            data: db,
            offset: b.offset,
            row: br,
            col: bc,
        },
    );
    let c = matmul_strided(a, b, m, k, n).ok()?;
    Some(Batched::dense(
        Array {
            shape: vec![m, n],
            data: Data::Float(c.into()),
        },
        0,
    ))
}

const OUT_OF_BOUNDS: &str = "internal error: a matrix smaller than its shape";

/// A matrix read in place: the atom at row `i`, column `j` is
/// `data[offset + i·row + j·col]`.
#[derive(Clone, Copy)]
pub(crate) struct Strided<'a, T> {
    pub data: &'a [T],
    pub offset: usize,
    pub row: usize,
    pub col: usize,
}

impl<'a, T: Copy> Strided<'a, T> {
    /// A row-major matrix of `cols` columns.
    fn rows(data: &'a [T], cols: usize) -> Self {
        Strided {
            data,
            offset: 0,
            row: cols,
            col: 1,
        }
    }

    /// Whether every atom of a `[rows cols]` matrix is within `data`.
    fn holds(&self, rows: usize, cols: usize) -> bool {
        if rows == 0 || cols == 0 {
            return true;
        }
        let last = (rows - 1)
            .checked_mul(self.row)
            .zip((cols - 1).checked_mul(self.col))
            .and_then(|(r, c)| r.checked_add(c)?.checked_add(self.offset));
        last.is_some_and(|l| l < self.data.len())
    }

    /// Row `i`'s atoms `j0 .. j0 + w` onto `out`.
    fn row_into(&self, i: usize, j0: usize, w: usize, out: &mut Vec<T>) -> Result<(), &'static str> {
        let at = self.offset + i * self.row + j0 * self.col;
        if self.col == 1 {
            out.extend_from_slice(self.data.get(at..at + w).ok_or(OUT_OF_BOUNDS)?);
        } else {
            for j in 0..w {
                out.push(*self.data.get(at + j * self.col).ok_or(OUT_OF_BOUNDS)?);
            }
        }
        Ok(())
    }
}

/// Where a tile reads its `MR` rows of `a`, `kc` items each: item by item
/// (each item's `MR` atoms together, `step` atoms after the last item's:
/// packed, or a transposed `a` in place), or row by row (each row's items
/// together: a row-major `a` in place). Either way nothing is copied for
/// an `a` read in place.
#[derive(Clone, Copy)]
enum Strip<'a, T> {
    Items { atoms: &'a [T], step: usize },
    Rows(&'a [&'a [T]]),
}

impl<T: Copy> Strip<'_, T> {
    /// Feeds `step` each item's `MR` atoms with the panel's item, in order.
    #[inline(always)]
    fn items<const MR: usize, B>(self, panel: &[B], mut step: impl FnMut([T; MR], &B)) {
        match self {
            Strip::Items { atoms, step: apart } if apart == MR => {
                let (strip, _) = atoms.as_chunks::<MR>();
                for (a, b) in strip.iter().zip(panel) {
                    step(*a, b);
                }
            }
            Strip::Items { atoms, step: apart } => {
                for (kk, b) in panel.iter().enumerate() {
                    let a = &atoms[kk * apart..kk * apart + MR];
                    step(std::array::from_fn(|r| a[r]), b);
                }
            }
            Strip::Rows(rows) => {
                // (`band` gives `MR` rows of at least `kc` items.)
                let kc = panel.len();
                let rows: [&[T]; MR] = std::array::from_fn(|r| &rows[r][..kc]);
                for (kk, b) in panel.iter().enumerate() {
                    step(std::array::from_fn(|r| rows[r][kk]), b);
                }
            }
        }
    }
}

/// A register tile: the `MR × NR` sums over a strip's and a panel's items.
trait Tile<T: Ring>: Copy + Send + Sync {
    /// Rows of the tile.
    const MR: usize;
    /// Columns of the tile.
    const NR: usize;
    /// The sums of `strip` (`kc` items of `MR` atoms) times `panel` (`kc`
    /// items of `NR` atoms), each over the items in order from zero,
    /// into `out` (`MR` rows of `NR`).
    fn sums(self, strip: Strip<'_, T>, panel: &[T], out: &mut [T]);
}

/// The tile of plain loops: 4 × 8 (two SSE vectors of f32 lanes per row).
#[derive(Clone, Copy)]
struct Portable;

impl<T: Ring> Tile<T> for Portable {
    const MR: usize = 4;
    const NR: usize = 8;

    #[inline(always)]
    fn sums(self, strip: Strip<'_, T>, panel: &[T], out: &mut [T]) {
        let mut acc = [[T::ZERO; 8]; 4];
        let (panel, _) = panel.as_chunks::<8>();
        strip.items(
            panel,
            #[inline(always)]
            |a: [T; 4], b| {
                for r in 0..4 {
                    for c in 0..8 {
                        acc[r][c] = acc[r][c].mul_add(a[r], b[c]);
                    }
                }
            },
        );
        for (row, sums) in out.chunks_exact_mut(8).zip(&acc) {
            row.copy_from_slice(sums);
        }
    }
}

/// The tile of `MR` rows of two vectors of `S` (AVX2: 6 × 16: twelve of
/// the sixteen registers hold sums).
#[derive(Clone, Copy)]
struct Wide<S: Simd, const MR: usize> {
    simd: S,
}

impl<S: Simd, const MR: usize> Tile<f32> for Wide<S, MR> {
    const MR: usize = MR;
    const NR: usize = 2 * S::F32_LANES;

    fn sums(self, strip: Strip<'_, f32>, panel: &[f32], out: &mut [f32]) {
        self.simd.vectorize(WideSums::<MR> { strip, panel, out })
    }
}

/// [`Wide`]'s loop, run with the CPU's vector instructions enabled.
struct WideSums<'a, const MR: usize> {
    strip: Strip<'a, f32>,
    panel: &'a [f32],
    out: &'a mut [f32],
}

impl<const MR: usize> WithSimd for WideSums<'_, MR> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let zero = simd.splat_f32s(0.0);
        let mut acc = [[zero; 2]; MR];
        let (panel, _) = S::as_simd_f32s(self.panel);
        let (panel, _) = panel.as_chunks::<2>();
        self.strip.items(
            panel,
            #[inline(always)]
            |a: [f32; MR], &[b0, b1]| {
                for r in 0..MR {
                    let x = simd.splat_f32s(a[r]);
                    acc[r][0] = simd.add_f32s(acc[r][0], simd.mul_f32s(x, b0));
                    acc[r][1] = simd.add_f32s(acc[r][1], simd.mul_f32s(x, b1));
                }
            },
        );
        let (out, _) = S::as_mut_simd_f32s(self.out);
        for (row, sums) in out.chunks_exact_mut(2).zip(&acc) {
            row.copy_from_slice(sums);
        }
    }
}

/// A Float product, by the tile that suits the vectors found.
struct FloatProduct<'a> {
    a: Strided<'a, f32>,
    b: Strided<'a, f32>,
    m: usize,
    k: usize,
    n: usize,
}

impl WithSimd for FloatProduct<'_> {
    type Output = Result<Vec<f32>, &'static str>;

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) -> Self::Output {
        let Self { a, b, m, k, n } = self;
        if S::F32_LANES >= 8 {
            blocked(Wide::<S, 6> { simd }, a, b, m, k, n)
        } else {
            blocked(Portable, a, b, m, k, n)
        }
    }
}

/// `c = a·b` by the tile `t`.
fn blocked<T: Ring, K: Tile<T>>(
    t: K,
    a: Strided<'_, T>,
    b: Strided<'_, T>,
    m: usize,
    k: usize,
    n: usize,
) -> Result<Vec<T>, &'static str> {
    let size = m.checked_mul(n).ok_or(OUT_OF_BOUNDS)?;
    if !a.holds(m, k) || !b.holds(k, n) {
        return Err(OUT_OF_BOUNDS);
    }
    let mut c = crate::kernel::buffer(size)?;
    c.resize(size, T::ZERO);
    if size == 0 || k == 0 {
        return Ok(c);
    }
    let packed = pack_b::<T, K>(b, k, n)?;
    let work = m.saturating_mul(n).saturating_mul(k);
    let bands: Vec<(usize, &mut [T])> = c
        .chunks_mut(MC * n)
        .enumerate()
        .map(|(i, rows)| (i * MC, rows))
        .collect();
    let threads = crate::threads().min(bands.len());
    if threads < 2 || work < 1 << 21 {
        for (row, rows) in bands {
            band(t, &a, &packed, row, rows, k, n)?;
        }
        return Ok(c);
    }
    // Bands shared among the threads.
    let ok = crate::in_parallel(bands, threads, |(row, rows)| {
        band(t, &a, &packed, row, rows, k, n).is_ok()
    });
    if ok {
        Ok(c)
    } else {
        Err("internal error: a matrix product's thread failed")
    }
}

/// `b` as panels: for each block of `KC` items, for each panel of `NR`
/// columns (the last padded with zeros), its `kc × NR` atoms row by row.
fn pack_b<T: Ring, K: Tile<T>>(b: Strided<'_, T>, k: usize, n: usize) -> Result<Vec<T>, &'static str> {
    let nr = K::NR;
    let panels = n.div_ceil(nr);
    let mut out = crate::kernel::buffer(k.saturating_mul(panels).saturating_mul(nr))?;
    for k0 in (0..k).step_by(KC) {
        let kc = KC.min(k - k0);
        for p in 0..panels {
            let j0 = p * nr;
            let w = nr.min(n - j0);
            for kk in k0..k0 + kc {
                b.row_into(kk, j0, w, &mut out)?;
                out.extend(std::iter::repeat_n(T::ZERO, nr - w));
            }
        }
    }
    Ok(out)
}

/// The rows `row ..` of `c` (as many as `rows` holds) from `a` and the
/// packed `b`, by the tile `t`.
fn band<T: Ring, K: Tile<T>>(
    t: K,
    a: &Strided<'_, T>,
    packed: &[T],
    row: usize,
    rows: &mut [T],
    k: usize,
    n: usize,
) -> Result<(), &'static str> {
    let (mr, nr) = (K::MR, K::NR);
    let mc = rows.len() / n;
    let strips = mc.div_ceil(mr);
    let panels = n.div_ceil(nr);
    let mut band_strips = BandStrips {
        a: *a,
        row,
        mc,
        mr,
        k0: 0,
        kc: 0,
        rows: Vec::new(),
        pack: Vec::new(),
        packed_from: 0,
    };
    let mut sums = vec![T::ZERO; mr * nr];
    for k0 in (0..k).step_by(KC) {
        let kc = KC.min(k - k0);
        band_strips.items(k0, kc)?;
        let block = &packed[k0 * panels * nr..(k0 + kc) * panels * nr];
        for p in 0..panels {
            let panel = &block[p * kc * nr..(p + 1) * kc * nr];
            let j0 = p * nr;
            let w = nr.min(n - j0);
            for s in 0..strips {
                t.sums(band_strips.strip(s), panel, &mut sums);
                let live = mc.saturating_sub(s * mr).min(mr);
                for (r, tile_row) in sums.chunks_exact(nr).enumerate().take(live) {
                    let at = (s * mr + r) * n + j0;
                    for (c, x) in rows[at..at + w].iter_mut().zip(tile_row) {
                        *c = c.add(*x);
                    }
                }
            }
        }
    }
    Ok(())
}

/// The strips of `mr` of the `mc` rows `row ..` of `a`, items `k0 .. k0 +
/// kc`, where the tile finds them. A row-major `a` (each row's items one
/// after another) is read in place row by row, the rows past the band's
/// last repeating it (their sums are not kept). A transposed `a` (each
/// item's atoms for the band's rows one after another) is read in place
/// item by item, from the first strip on whose `mr` atoms do not all lie
/// within the buffer (the last), which is packed. Any other `a` is
/// packed, item by item (rows past the end are zeros).
struct BandStrips<'a, T> {
    a: Strided<'a, T>,
    row: usize,
    mc: usize,
    mr: usize,
    k0: usize,
    kc: usize,
    /// A row-major `a`'s rows, each from item `k0`.
    rows: Vec<&'a [T]>,
    /// The packed strips, from strip `packed_from` on.
    pack: Vec<T>,
    packed_from: usize,
}

impl<'a, T: Ring> BandStrips<'a, T> {
    /// Makes ready the strips of items `k0 .. k0 + kc`.
    fn items(&mut self, k0: usize, kc: usize) -> Result<(), &'static str> {
        let (a, mr, mc) = (self.a, self.mr, self.mc);
        let strips = mc.div_ceil(mr);
        (self.k0, self.kc) = (k0, kc);
        if a.col == 1 {
            self.rows.clear();
            for r in 0..strips * mr {
                let from = a.offset + (self.row + r.min(mc - 1)) * a.row + k0;
                self.rows.push(a.data.get(from..from + kc).ok_or(OUT_OF_BOUNDS)?);
            }
            return Ok(());
        }
        self.packed_from = if a.row == 1 {
            // The strips whose last item's `mr` atoms lie within the buffer.
            let room = a
                .data
                .len()
                .saturating_sub(a.offset + (k0 + kc - 1) * a.col + self.row);
            (room / mr).min(strips)
        } else {
            0
        };
        let first = self.row + self.packed_from * mr;
        let rows = mc.saturating_sub(self.packed_from * mr);
        self.pack.clear();
        self.pack.resize(rows.div_ceil(mr) * kc * mr, T::ZERO);
        for (s, strip) in self.pack.chunks_exact_mut(kc * mr).enumerate() {
            for r in 0..mr.min(rows - s * mr) {
                let from = a.offset + (first + s * mr + r) * a.row + k0 * a.col;
                let span = (kc - 1) * a.col + 1;
                let atoms = a.data.get(from..from + span).ok_or(OUT_OF_BOUNDS)?;
                for (item, x) in strip.chunks_exact_mut(mr).zip(atoms.iter().step_by(a.col.max(1))) {
                    item[r] = *x;
                }
            }
        }
        Ok(())
    }

    /// Strip `s`.
    fn strip(&self, s: usize) -> Strip<'_, T> {
        let (a, mr, kc) = (&self.a, self.mr, self.kc);
        if a.col == 1 {
            Strip::Rows(&self.rows[s * mr..(s + 1) * mr])
        } else if s < self.packed_from {
            let from = a.offset + self.k0 * a.col + self.row + s * mr;
            Strip::Items {
                atoms: &a.data[from..from + (kc - 1) * a.col + mr],
                step: a.col,
            }
        } else {
            let s = s - self.packed_from;
            Strip::Items {
                atoms: &self.pack[s * kc * mr..(s + 1) * kc * mr],
                step: mr,
            }
        }
    }
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

    /// Each Float sum in the order the compiled engine keeps: blocks of
    /// `KC` items, each summed from zero left to right, the blocks added
    /// in order; a product rounded before its sum.
    fn naive_float(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
        let mut c = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                for k0 in (0..k).step_by(KC) {
                    let mut block = 0f32;
                    for p in k0..(k0 + KC).min(k) {
                        block += a[i * k + p] * b[p * n + j];
                    }
                    c[i * n + j] += block;
                }
            }
        }
        c
    }

    #[test]
    fn transposed_arguments_read_in_place() {
        let (m, k, n) = (70, 300, 21);
        let a: Vec<f32> = (0..m * k).map(|x| ((x * 7919) % 23) as f32 / 7.0 - 1.3).collect();
        let b: Vec<f32> = (0..k * n)
            .map(|x| ((x * 104729) % 19) as f32 / 3.0 - 2.9)
            .collect();
        // The same matrices stored transposed, one atom in from the start.
        let mut at = vec![9.0f32; 1 + m * k];
        let mut bt = vec![9.0f32; 1 + k * n];
        for i in 0..m {
            for p in 0..k {
                at[1 + p * m + i] = a[i * k + p];
            }
        }
        for p in 0..k {
            for j in 0..n {
                bt[1 + j * k + p] = b[p * n + j];
            }
        }
        let view = |data, row, col| Strided {
            data,
            offset: 1,
            row,
            col,
        };
        let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
        assert_eq!(
            matmul_strided(view(&at, 1, m), view(&bt, 1, k), m, k, n).map(bits),
            matmul(&a, &b, m, k, n).map(bits)
        );
        assert!(matmul_strided(view(&at, 1, m + 1), view(&bt, 1, k), m, k, n).is_err());
        // Row-major views whose rows lie further apart than their items
        // (the left columns of wider matrices), read in place, and a
        // transposed `a` with room after it (every strip in place).
        let (wa, wb) = (k + 3, n + 5);
        let mut aw = vec![9.0f32; 1 + m * wa];
        let mut bw = vec![9.0f32; 1 + k * wb];
        for i in 0..m {
            aw[1 + i * wa..1 + i * wa + k].copy_from_slice(&a[i * k..(i + 1) * k]);
        }
        for p in 0..k {
            bw[1 + p * wb..1 + p * wb + n].copy_from_slice(&b[p * n..(p + 1) * n]);
        }
        let roomy = [at.as_slice(), &[9.0; 16]].concat();
        for (a_view, b_view) in [
            (view(&aw, wa, 1), view(&bw, wb, 1)),
            (view(&roomy, 1, m), view(&bw, wb, 1)),
        ] {
            assert_eq!(
                matmul_strided(a_view, b_view, m, k, n).map(bits),
                matmul(&a, &b, m, k, n).map(bits)
            );
        }
    }

    #[test]
    fn float_sums_in_blocks_of_items_whatever_the_tile() {
        for &(m, k, n) in &[
            (1, 1, 1),
            (7, 3, 17),
            (70, 300, 33),
            (9, 256, 40),
            (130, 513, 65),
            (3, 0, 2),
        ] {
            let a: Vec<f32> = (0..m * k).map(|x| ((x * 7919) % 23) as f32 / 7.0 - 1.3).collect();
            let b: Vec<f32> = (0..k * n)
                .map(|x| ((x * 104729) % 19) as f32 / 3.0 - 2.9)
                .collect();
            let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
            let want = bits(naive_float(&a, &b, m, k, n));
            assert_eq!(matmul(&a, &b, m, k, n).map(bits), Ok(want.clone()), "{m}×{k}×{n}");
            assert_eq!(
                blocked(Portable, Strided::rows(&a, k), Strided::rows(&b, n), m, k, n).map(bits),
                Ok(want),
                "{m}×{k}×{n}, portable"
            );
        }
    }
}

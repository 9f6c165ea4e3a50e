//! The matrix product `[m k]·[k n]` (`matmul`, `f.matmul`) as a blocked,
//! cache-friendly loop: `b` packed once into panels of `NR` columns,
//! `KC` items deep; each band of rows of `a` packed into strips of `MR`
//! rows; a register tile of `MR × NR` sums computed from one strip and one
//! panel at a time. Nothing of size `m·k·n` is ever built.
//!
//! Every sum adds its products in one fixed [`Sums`] order whatever the
//! tile, the vectors or the number of threads, so the result is the same
//! bits on every run and every machine: `f.matmul`'s (`KC` at a time into
//! the tile, each block added to the result in order), or `reduce f.+`'s
//! tree (its leaves into the tile, combined as the tree combines them),
//! which `contract.rs` asks for. Bands of rows are shared among threads
//! (`crate::threads`).
//!
//! The tile of Float sums uses AVX2 where the CPU has it, chosen when the
//! program runs (`pulp`), each lane one sum, a multiply then an add (never
//! fused, which would round once where the compiled engine rounds twice);
//! elsewhere, and for Int, a tile of plain loops that the compiler
//! vectorises for the baseline target.

use crate::batch::{Batched, Try};
use crate::eval::check_size;
use crate::kernel::PAIRWISE_LEAF;
use pulp::{Simd, WithSimd};
use remora_syntax::Span;
use remora_value::{Array, Data};

/// What the loop needs of an atom: zero and a multiply-add (wrapping for
/// Int, as `+` and `*` are; Float rounds the product, then the sum).
pub(crate) trait Ring: Copy + Send + Sync + 'static {
    const ZERO: Self;
    /// Where a sum that starts from its first term starts: `x` plus it is
    /// `x` for every `x` (for Float −0.0: −0.0 + −0.0 is −0.0).
    const START: Self;
    fn mul_add(self, a: Self, b: Self) -> Self;
    fn add(self, other: Self) -> Self;

    /// `c = a·b` for `a` `[m k]` and `b` `[k n]`, each sum in the order
    /// `sums`, by the best tile for this atom.
    fn product(
        a: Strided<'_, Self>,
        b: Strided<'_, Self>,
        dims: [usize; 3],
        sums: Sums<Self>,
    ) -> Result<Vec<Self>, &'static str> {
        blocked(Portable, a, b, dims, sums)
    }
}

impl Ring for f32 {
    const ZERO: f32 = 0.0;
    const START: f32 = -0.0;
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
        dims: [usize; 3],
        sums: Sums<f32>,
    ) -> Result<Vec<f32>, &'static str> {
        pulp::Arch::new().dispatch(FloatProduct { a, b, dims, sums })
    }
}

impl Ring for i64 {
    const ZERO: i64 = 0;
    const START: i64 = 0;
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
// (A leaf of `reduce`'s tree is one block.)
const _: () = assert!(PAIRWISE_LEAF <= KC);

/// The order in which each sum adds its products.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Sums<T> {
    /// `f.matmul`'s: blocks of `KC` items, each summed from zero left to
    /// right, the blocks added in order to zero.
    Blocks,
    /// `reduce f.+`'s (`kernel::Order::Tree`): left to right up to
    /// `PAIRWISE_LEAF` items, else the tree over halves, each leaf from its
    /// first product; with a seed (`f.sum`'s 0.0), the seed the first term
    /// of a single leaf, else added to the tree's sum (`seed + tree`).
    Tree { seed: Option<T> },
}

impl<T: Ring> Sums<T> {
    /// The runs of items summed on their own, in order.
    fn leaves(self, k: usize) -> Vec<std::ops::Range<usize>> {
        fn halves(k0: usize, n: usize, out: &mut Vec<std::ops::Range<usize>>) {
            if n <= PAIRWISE_LEAF {
                out.push(k0..k0 + n);
            } else {
                halves(k0, n / 2, out);
                halves(k0 + n / 2, n - n / 2, out);
            }
        }
        let mut out = Vec::new();
        match self {
            Sums::Blocks => out.extend((0..k).step_by(KC).map(|k0| k0..(k0 + KC).min(k))),
            Sums::Tree { .. } if k > 0 => halves(0, k, &mut out),
            Sums::Tree { .. } => {}
        }
        out
    }
}
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
    T::product(Strided::rows(a, k), Strided::rows(b, n), [m, k, n], Sums::Blocks)
}

/// `a·b` for a small `a` `[m k]` and `b` `[k n]` (at most [`SMALL`]
/// multiplications, `k` within one block), appended to `out`: each sum a
/// plain loop in `f.matmul`'s order — from zero, left to right, the block
/// then added to zero — with nothing packed, for a frame of many small
/// products (a batch of 3×3 matrices). `false` when the product is not
/// small or the cells are not as long as the sizes say.
pub(crate) fn small_product<T: Ring>(a: &[T], b: &[T], [m, k, n]: [usize; 3], out: &mut Vec<T>) -> bool {
    let small = k <= KC && m.saturating_mul(k).saturating_mul(n) <= SMALL;
    if !small || a.len() != m * k || b.len() != k * n {
        return false;
    }
    for row in a.chunks_exact(k.max(1)).take(m) {
        for j in 0..n {
            let sum = (row.iter().zip(b.iter().skip(j).step_by(n.max(1))))
                .fold(T::ZERO, |s, (&x, &y)| s.mul_add(x, y));
            out.push(T::ZERO.add(sum));
        }
    }
    if k == 0 {
        out.extend(std::iter::repeat_n(T::ZERO, m * n));
    }
    true
}

/// The most multiplications of a product [`small_product`] makes without
/// the blocked loop.
const SMALL: usize = 512;

/// `c = a·b` for `a` `[m k]` and `b` `[k n]` read in place through their
/// steps (a transposed matrix is a view: nothing is copied before the
/// packing, which reads it either way), each sum in the order `sums`.
pub(crate) fn matmul_strided<T: Ring>(
    a: Strided<'_, T>,
    b: Strided<'_, T>,
    dims: [usize; 3],
    sums: Sums<T>,
) -> Result<Vec<T>, &'static str> {
    T::product(a, b, dims, sums)
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
    let c = matmul_strided(a, b, [m, k, n], Sums::Blocks).ok()?;
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
    pub(crate) fn holds(&self, rows: usize, cols: usize) -> bool {
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
    pub(crate) fn row_into(
        &self,
        i: usize,
        j0: usize,
        w: usize,
        out: &mut Vec<T>,
    ) -> Result<(), &'static str> {
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

/// A register tile: the `MR × NR` sums over a strip's and a panel's items.
trait Tile<T: Ring>: Copy + Send + Sync {
    /// Rows of the tile.
    const MR: usize;
    /// Columns of the tile.
    const NR: usize;
    /// The sums of `strip` (`kc` items of `MR` atoms) times `panel` (`kc`
    /// items of `NR` atoms), each over the items in order from `start`,
    /// into `out` (`MR` rows of `NR`).
    fn sums(self, strip: &[T], panel: &[T], start: T, out: &mut [T]);
}

/// The tile of plain loops: 4 × 8 (two SSE vectors of f32 lanes per row).
#[derive(Clone, Copy)]
struct Portable;

impl<T: Ring> Tile<T> for Portable {
    const MR: usize = 4;
    const NR: usize = 8;

    #[inline(always)]
    fn sums(self, strip: &[T], panel: &[T], start: T, out: &mut [T]) {
        let mut acc = [[start; 8]; 4];
        let (strip, _) = strip.as_chunks::<4>();
        let (panel, _) = panel.as_chunks::<8>();
        for (a, b) in strip.iter().zip(panel) {
            for r in 0..4 {
                for c in 0..8 {
                    acc[r][c] = acc[r][c].mul_add(a[r], b[c]);
                }
            }
        }
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

    fn sums(self, strip: &[f32], panel: &[f32], start: f32, out: &mut [f32]) {
        self.simd.vectorize(WideSums::<MR> {
            strip,
            panel,
            start,
            out,
        })
    }
}

/// [`Wide`]'s loop, run with the CPU's vector instructions enabled.
struct WideSums<'a, const MR: usize> {
    strip: &'a [f32],
    panel: &'a [f32],
    start: f32,
    out: &'a mut [f32],
}

impl<const MR: usize> WithSimd for WideSums<'_, MR> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let start = simd.splat_f32s(self.start);
        let mut acc = [[start; 2]; MR];
        let (strip, _) = self.strip.as_chunks::<MR>();
        let (panel, _) = S::as_simd_f32s(self.panel);
        for (a, b) in strip.iter().zip(panel.chunks_exact(2)) {
            let (b0, b1) = (b[0], b[1]);
            for r in 0..MR {
                let x = simd.splat_f32s(a[r]);
                acc[r][0] = simd.add_f32s(acc[r][0], simd.mul_f32s(x, b0));
                acc[r][1] = simd.add_f32s(acc[r][1], simd.mul_f32s(x, b1));
            }
        }
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
    dims: [usize; 3],
    sums: Sums<f32>,
}

impl WithSimd for FloatProduct<'_> {
    type Output = Result<Vec<f32>, &'static str>;

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) -> Self::Output {
        let Self { a, b, dims, sums } = self;
        if S::F32_LANES >= 8 {
            blocked(Wide::<S, 6> { simd }, a, b, dims, sums)
        } else {
            blocked(Portable, a, b, dims, sums)
        }
    }
}

/// `c = a·b` by the tile `t`, each sum in the order `sums`.
fn blocked<T: Ring, K: Tile<T>>(
    t: K,
    a: Strided<'_, T>,
    b: Strided<'_, T>,
    [m, k, n]: [usize; 3],
    sums: Sums<T>,
) -> Result<Vec<T>, &'static str> {
    let size = m.checked_mul(n).ok_or(OUT_OF_BOUNDS)?;
    if !a.holds(m, k) || !b.holds(k, n) {
        return Err(OUT_OF_BOUNDS);
    }
    let mut c = crate::kernel::buffer(size)?;
    let empty = match sums {
        Sums::Tree { seed: Some(s) } => s,
        _ => T::ZERO,
    };
    c.resize(size, empty);
    if size == 0 || k == 0 {
        return Ok(c);
    }
    let leaves = sums.leaves(k);
    let packed = pack_b::<T, K>(b, &leaves, n)?;
    let plan = Plan {
        t,
        a: &a,
        packed: &packed,
        leaves: &leaves,
        n,
        sums,
    };
    let work = m.saturating_mul(n).saturating_mul(k);
    let bands: Vec<(usize, &mut [T])> = c
        .chunks_mut(MC * n)
        .enumerate()
        .map(|(i, rows)| (i * MC, rows))
        .collect();
    let threads = crate::threads().min(bands.len());
    if threads < 2 || work < 1 << 21 {
        for (row, rows) in bands {
            plan.band(row, rows)?;
        }
        return Ok(c);
    }
    // Bands shared among the threads.
    let ok = crate::in_parallel(bands, threads, |(row, rows)| plan.band(row, rows).is_ok());
    if ok {
        Ok(c)
    } else {
        Err("internal error: a matrix product's thread failed")
    }
}

/// `b` as panels: for each leaf (a run of items summed on its own), for
/// each panel of `NR` columns (the last padded with zeros), its `kc × NR`
/// atoms row by row.
fn pack_b<T: Ring, K: Tile<T>>(
    b: Strided<'_, T>,
    leaves: &[std::ops::Range<usize>],
    n: usize,
) -> Result<Vec<T>, &'static str> {
    let nr = K::NR;
    let panels = n.div_ceil(nr);
    let k = leaves.last().map_or(0, |l| l.end);
    let mut out = crate::kernel::buffer(k.saturating_mul(panels).saturating_mul(nr))?;
    for leaf in leaves {
        for p in 0..panels {
            let j0 = p * nr;
            let w = nr.min(n - j0);
            for kk in leaf.clone() {
                b.row_into(kk, j0, w, &mut out)?;
                out.extend(std::iter::repeat_n(T::ZERO, nr - w));
            }
        }
    }
    Ok(out)
}

/// Everything a band of rows needs: the tile, `a`, the packed `b`, the
/// leaves it was packed by, and the order of the sums.
struct Plan<'a, T, K> {
    t: K,
    a: &'a Strided<'a, T>,
    packed: &'a [T],
    leaves: &'a [std::ops::Range<usize>],
    n: usize,
    sums: Sums<T>,
}

/// How a leaf's sums reach their destination.
#[derive(Clone, Copy, PartialEq)]
enum Dest {
    /// Added to what is there (`f.matmul`'s blocks).
    Add,
    /// Written over it.
    Set,
}

impl<T: Ring, K: Tile<T>> Plan<'_, T, K> {
    /// The rows `row ..` of `c` (as many as `rows` holds).
    fn band(&self, row: usize, rows: &mut [T]) -> Result<(), &'static str> {
        let mc = rows.len() / self.n;
        let strips = mc.div_ceil(K::MR);
        let mut strip_pack = crate::kernel::buffer(strips * K::MR * KC)?;
        match self.sums {
            Sums::Blocks => {
                for leaf in 0..self.leaves.len() {
                    self.leaf(leaf, row, T::ZERO, Dest::Add, rows, &mut strip_pack)?;
                }
            }
            Sums::Tree { seed } => match self.leaves {
                [_] => self.leaf(0, row, seed.unwrap_or(T::START), Dest::Set, rows, &mut strip_pack)?,
                _ => {
                    let sums = self.subtree(0, self.leaves.len(), row, mc, &mut strip_pack)?;
                    for (c, x) in rows.iter_mut().zip(sums) {
                        *c = seed.map_or(x, |s| s.add(x));
                    }
                }
            },
        }
        Ok(())
    }

    /// The sums of the leaves `first .. first + count` (a subtree of
    /// `reduce`'s tree, `count ≥ 1`) for the band's `mc` rows.
    fn subtree(
        &self,
        first: usize,
        count: usize,
        row: usize,
        mc: usize,
        strip_pack: &mut Vec<T>,
    ) -> Result<Vec<T>, &'static str> {
        if count == 1 {
            let mut sums = vec![T::ZERO; mc * self.n];
            self.leaf(first, row, T::START, Dest::Set, &mut sums, strip_pack)?;
            return Ok(sums);
        }
        // The tree halves the items; each half's leaves are its own.
        let items = |l: usize| self.leaves.get(l).map_or(0, |r| r.len());
        let total: usize = (first..first + count).map(items).sum();
        let (mut left_items, mut half) = (0, 0);
        while left_items < total / 2 {
            left_items += items(first + half);
            half += 1;
        }
        let mut left = self.subtree(first, half, row, mc, strip_pack)?;
        let right = self.subtree(first + half, count - half, row, mc, strip_pack)?;
        for (x, y) in left.iter_mut().zip(right) {
            *x = x.add(y);
        }
        Ok(left)
    }

    /// The sums over leaf `leaf`'s items, each from `start`, for the rows
    /// `row ..` (as many as `rows` holds), into `rows`.
    fn leaf(
        &self,
        leaf: usize,
        row: usize,
        start: T,
        into: Dest,
        rows: &mut [T],
        strip_pack: &mut Vec<T>,
    ) -> Result<(), &'static str> {
        let (a, n) = (self.a, self.n);
        let (mr, nr) = (K::MR, K::NR);
        let mc = rows.len() / n;
        let strips = mc.div_ceil(mr);
        let panels = n.div_ceil(nr);
        let items = self.leaves.get(leaf).ok_or(OUT_OF_BOUNDS)?;
        let (k0, kc) = (items.start, items.len());
        let mut sums = vec![T::ZERO; mr * nr];
        // The band's rows of `a`, items k0 .. k0 + kc, as strips of MR
        // rows, item by item (rows past the end are zeros).
        strip_pack.clear();
        strip_pack.resize(strips * kc * mr, T::ZERO);
        if a.row == 1 {
            // A transposed `a`: an item's atoms for the band's rows lie
            // together, read in order and placed strip by strip.
            for kk in 0..kc {
                let from = a.offset + (k0 + kk) * a.col + row;
                let atoms = a.data.get(from..from + mc).ok_or(OUT_OF_BOUNDS)?;
                for (strip, live) in strip_pack.chunks_exact_mut(kc * mr).zip(atoms.chunks(mr)) {
                    let to = &mut strip[kk * mr..kk * mr + mr];
                    if live.len() == mr {
                        // (`mr` a constant: a copy the compiler writes out.)
                        to.copy_from_slice(&live[..K::MR]);
                    } else {
                        to[..live.len()].copy_from_slice(live);
                    }
                }
            }
        }
        // Else each row read along its items, its atoms placed `mr` apart.
        for (s, strip) in strip_pack
            .chunks_exact_mut(kc * mr)
            .enumerate()
            .filter(|_| a.row != 1)
        {
            for r in 0..mr.min(mc - s * mr) {
                let from = a.offset + (row + s * mr + r) * a.row + k0 * a.col;
                if a.col == 0 {
                    // One atom for every item.
                    let x = *a.data.get(from).ok_or(OUT_OF_BOUNDS)?;
                    strip.chunks_exact_mut(mr).for_each(|item| item[r] = x);
                    continue;
                }
                let span = (kc - 1) * a.col + 1;
                let atoms = a.data.get(from..from + span).ok_or(OUT_OF_BOUNDS)?;
                for (item, x) in strip.chunks_exact_mut(mr).zip(atoms.iter().step_by(a.col)) {
                    item[r] = *x;
                }
            }
        }
        let block = &self.packed[k0 * panels * nr..(k0 + kc) * panels * nr];
        for p in 0..panels {
            let panel = &block[p * kc * nr..(p + 1) * kc * nr];
            let j0 = p * nr;
            let w = nr.min(n - j0);
            for s in 0..strips {
                let strip = &strip_pack[s * kc * mr..(s + 1) * kc * mr];
                self.t.sums(strip, panel, start, &mut sums);
                let live = mc.saturating_sub(s * mr).min(mr);
                for (r, tile_row) in sums.chunks_exact(nr).enumerate().take(live) {
                    let at = (s * mr + r) * n + j0;
                    let to = &mut rows[at..at + w];
                    match into {
                        Dest::Add => to.iter_mut().zip(tile_row).for_each(|(c, x)| *c = c.add(*x)),
                        Dest::Set => to.copy_from_slice(&tile_row[..w]),
                    }
                }
            }
        }
        Ok(())
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
            matmul_strided(view(&at, 1, m), view(&bt, 1, k), [m, k, n], Sums::Blocks).map(bits),
            matmul(&a, &b, m, k, n).map(bits)
        );
        assert!(matmul_strided(view(&at, 1, m + 1), view(&bt, 1, k), [m, k, n], Sums::Blocks).is_err());
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
                blocked(
                    Portable,
                    Strided::rows(&a, k),
                    Strided::rows(&b, n),
                    [m, k, n],
                    Sums::Blocks
                )
                .map(bits),
                Ok(want),
                "{m}×{k}×{n}, portable"
            );
        }
    }

    /// `reduce f.+`'s order (`kernel::Order::Tree`) over each column of
    /// products, from `seed` as `f.sum` starts.
    fn tree_float(a: &[f32], b: &[f32], [m, k, n]: [usize; 3], seed: Option<f32>) -> Vec<f32> {
        use crate::kernel::{Order, reduce_axis};
        let mut c = Vec::with_capacity(m * n);
        for i in 0..m {
            for j in 0..n {
                let products: Vec<f32> = (0..k).map(|p| a[i * k + p] * b[p * n + j]).collect();
                let seed = seed.map(|s| vec![s]);
                let sum = reduce_axis(&products, [1, k, 1], seed.as_deref(), Order::Tree, |x, y| x + y);
                c.extend(sum.unwrap_or_default());
            }
        }
        c
    }

    #[test]
    fn float_sums_in_the_order_of_reduce_whatever_the_tile() {
        for &(m, k, n) in &[
            (1, 1, 1),
            (7, 3, 17),
            (70, 300, 33),
            (9, 256, 40),
            (130, 1000, 65),
            (5, 257, 3),
        ] {
            // Negative zeros among the products: a leaf starts from its
            // first product (−0.0 stays), `f.sum` from 0.0.
            let a: Vec<f32> = (0..m * k)
                .map(|x| {
                    if x % 5 == 0 {
                        -0.0
                    } else {
                        ((x * 7919) % 23) as f32 / 7.0 - 1.3
                    }
                })
                .collect();
            let b: Vec<f32> = (0..k * n)
                .map(|x| ((x * 104729) % 19) as f32 / 3.0 - 2.9)
                .collect();
            let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
            for seed in [None, Some(0.0)] {
                let want = bits(tree_float(&a, &b, [m, k, n], seed));
                let sums = Sums::Tree { seed };
                let (ra, rb) = (Strided::rows(&a, k), Strided::rows(&b, n));
                assert_eq!(
                    matmul_strided(ra, rb, [m, k, n], sums).map(bits),
                    Ok(want.clone()),
                    "{m}×{k}×{n} {seed:?}"
                );
                assert_eq!(
                    blocked(Portable, ra, rb, [m, k, n], sums).map(bits),
                    Ok(want),
                    "{m}×{k}×{n} {seed:?}, portable"
                );
            }
        }
        // A lone −0.0 product: reduce keeps it, f.sum gives 0.0.
        let one = |seed| {
            matmul_strided(
                Strided::rows(&[-1.0f32], 1),
                Strided::rows(&[0.0], 1),
                [1, 1, 1],
                Sums::Tree { seed },
            )
        };
        assert_eq!(one(None).map(|c| c[0].to_bits()), Ok((-0.0f32).to_bits()));
        assert_eq!(one(Some(0.0)).map(|c| c[0].to_bits()), Ok(0.0f32.to_bits()));
    }
}

//! A reduction of a choice made position by position without the chosen
//! array: `(f.sum (select (== bins b) ws 0.0))` lifted over the bins `b`
//! (a weighted histogram written as "for each bin, the sum of the weights
//! whose bin is this one"), `(reduce f.max (select (f.> x 0.0) x 0.0))`
//! lifted over rows.
//!
//! Along the lanes: when every operand lies along the last row axis (the
//! positions of the result) contiguously or replicated (`bins` and `ws`
//! the same for every bin, `b` one per bin), a chunk of positions is
//! reduced at once, item after item, each item's choices one loop over
//! the chunk's lanes: the items are read once for all the bins, and the
//! memory held is the result and, for `f.+`'s tree, a chunk per level.
//! Along the rows otherwise: each row's choices made a block at a time
//! and reduced.
//!
//! Either way each position's items are combined in `reduce`'s own order
//! (kernel.rs: left to right, and for `f.+` over more than
//! `PAIRWISE_LEAF` items the fixed tree, the unit of `f.sum` first for a
//! left fold and last for the tree), so the bits are the reference
//! path's.

use crate::choose::{Atoms, Combine, Compared, LINE, Line, Made, Mask, MaskLines, PARALLEL_ITEMS, Reducer};
use crate::eval::atoms_in;
use crate::kernel::PAIRWISE_LEAF;
use crate::tally::Cmp;

/// Positions reduced at once along the lanes, at most.
const CHUNK: usize = 64;

/// Items of a row whose choices are made at once for `f.+`'s tree, at
/// most (a whole subtree).
const BLOCK: usize = 1 << 14;

/// The Float operators a choice is reduced by.
#[derive(Clone, Copy)]
pub(crate) enum FloatOp {
    Add,
    Max,
    Min,
}

/// The atoms a reduced choice chooses between, with the unit of `f.sum`
/// and `sum`.
pub(crate) trait Item: Copy + Send + Sync + PartialOrd {
    const ZERO: Self;
}

impl Item for f32 {
    const ZERO: f32 = 0.0;
}

impl Item for i64 {
    const ZERO: i64 = 0;
}

/// A reduction's operator on atoms `T`, given to a kernel as a function
/// the kernel is compiled for.
pub(crate) trait Operator<T>: Copy {
    /// Whether it combines many items by `reduce`'s tree (`f.+`).
    fn tree(self) -> bool;
    fn with<K: Kernel<T>>(self, k: K) -> K::Out;
}

/// Code compiled once for each operator.
pub(crate) trait Kernel<T> {
    type Out;
    fn run(self, f: impl Fn(T, T) -> T + Copy + Sync) -> Self::Out;
}

impl Operator<f32> for FloatOp {
    fn tree(self) -> bool {
        matches!(self, FloatOp::Add)
    }

    fn with<K: Kernel<f32>>(self, k: K) -> K::Out {
        match self {
            FloatOp::Add => k.run(|a: f32, b: f32| a + b),
            FloatOp::Max => k.run(crate::scalar::fmax),
            FloatOp::Min => k.run(crate::scalar::fmin),
        }
    }
}

impl Operator<i64> for Combine {
    fn tree(self) -> bool {
        false
    }

    fn with<K: Kernel<i64>>(self, k: K) -> K::Out {
        match self {
            Combine::Min => k.run(i64::min),
            Combine::Max => k.run(i64::max),
            Combine::Add => k.run(i64::wrapping_add),
        }
    }
}

/// Where the choices lie: the positions (`rows`, row-major), the items
/// reduced at each, and the two choices' lines.
pub(crate) struct Chosen<'a> {
    pub(crate) rows: &'a [usize],
    pub(crate) n: usize,
    pub(crate) lines: [&'a Line; 2],
}

impl Chosen<'_> {
    /// The reduction along the lanes of the last row axis, when every
    /// operand lies along it contiguously or replicated.
    pub(crate) fn along_lanes<T: Item, O: Operator<T>>(
        &self,
        mask: &Mask<'_>,
        (xs, ys): (&[T], &[T]),
        reducer: Reducer,
        op: O,
    ) -> Option<Vec<T>> {
        let &lanes = self.rows.last()?;
        let lined = |l: &Line| l.steps.last().is_some_and(|&s| s <= 1);
        if lanes < 2 || !mask.lines().into_iter().chain(self.lines).all(lined) {
            return None;
        }
        let count = atoms_in(self.rows);
        let mut out = crate::kernel::buffer(count).ok()?;
        out.resize(count, T::ZERO);
        let threads = if count.saturating_mul(self.n) >= PARALLEL_ITEMS {
            crate::threads()
        } else {
            1
        };
        // Chunks of the lanes, enough of them for every thread.
        let mut width = CHUNK.min(lanes);
        if (count / lanes) * lanes.div_ceil(width) < threads {
            width = lanes.div_ceil(threads).next_multiple_of(16).min(width);
        }
        let parts: Vec<(usize, &mut [T])> = out
            .chunks_mut(lanes)
            .enumerate()
            .flat_map(|(o, row)| {
                row.chunks_mut(width)
                    .enumerate()
                    .map(move |(c, s)| (o * lanes + c * width, s))
            })
            .collect();
        let kernel = LanesKernel {
            chosen: self,
            mask,
            xs,
            ys,
            parts,
            threads,
            seed: reducer.seeded.map(|()| T::ZERO),
            tree: op.tree() && self.n > PAIRWISE_LEAF,
        };
        op.with(kernel).then_some(out)
    }

    /// The reduction row by row: each row's choices made a line (or, for
    /// the tree, a subtree) at a time, then reduced.
    pub(crate) fn along_rows<O: Operator<f32>>(
        &self,
        mask: &Mask<'_>,
        (xs, ys): (&[f32], &[f32]),
        reducer: Reducer,
        op: O,
    ) -> Option<Vec<f32>> {
        let count = atoms_in(self.rows);
        let mut out = crate::kernel::buffer(count).ok()?;
        out.resize(count, 0.0);
        let kernel = RowsKernel {
            chosen: self,
            mask,
            xs,
            ys,
            out: &mut out,
            seed: reducer.seeded.map(|()| 0.0),
            tree: op.tree() && self.n > PAIRWISE_LEAF,
        };
        op.with(kernel).then_some(out)
    }
}

impl Mask<'_> {
    fn lines(&self) -> Vec<&Line> {
        match self {
            Mask::Made(m) => vec![m.line],
            Mask::Floats(c) => c.lines.to_vec(),
            Mask::Ints(c) => c.lines.to_vec(),
        }
    }
}

/// An operand over a chunk of lanes: from `base`, `step` apart from item
/// to item, and along the lanes contiguous (`lane` 1) or replicated (0).
#[derive(Clone, Copy)]
struct Lane<'a, T> {
    v: &'a [T],
    base: usize,
    step: usize,
    lane: usize,
}

impl<'a, T: Copy> Lane<'a, T> {
    /// The operand along the chunk's `lc` lanes starting at position
    /// `first`, for items `0 .. n`; `None` when some lie outside `v`.
    fn of(
        v: &'a [T],
        line: &Line,
        (first, rows): (usize, &[usize]),
        n: usize,
        lc: usize,
    ) -> Option<Lane<'a, T>> {
        let lane = *line.steps.last()?;
        let base = line.start(first, rows, 0)?;
        let last = base
            .checked_add(n.saturating_sub(1).checked_mul(line.step)?)?
            .checked_add(lane * lc)?;
        (n == 0 || last <= v.len()).then_some(Lane {
            v,
            base,
            step: line.step,
            lane,
        })
    }

    /// Its atoms at item `i` over `lc` lanes from lane `off`.
    #[inline(always)]
    fn at(&self, i: usize, off: usize, lc: usize) -> Option<Atoms<'a, T>> {
        let at = self.base + i * self.step + self.lane * off;
        Some(if self.lane == 0 {
            Atoms::One(*self.v.get(at)?)
        } else {
            Atoms::Run(self.v.get(at..at + lc)?)
        })
    }

    /// Its atoms at item `i` over the `W` lanes from lane `off`, as one
    /// value (a load, or one atom broadcast).
    #[inline(always)]
    fn wide<const W: usize>(&self, i: usize, off: usize) -> Option<[T; W]> {
        let at = self.base + i * self.step + self.lane * off;
        Some(if self.lane == 0 {
            [*self.v.get(at)?; W]
        } else {
            *self.v.get(at..)?.first_chunk::<W>()?
        })
    }
}

/// Lanes reduced together with their accumulators in registers.
const WIDE: usize = 16;

/// A mask along a chunk of lanes.
trait LaneMask: Sync {
    /// At item `i`, over `lc` lanes from lane `off`.
    fn at<'s>(
        &'s self,
        i: usize,
        off: usize,
        lc: usize,
        buf: &'s mut [bool; CHUNK],
    ) -> Option<Atoms<'s, bool>>;
    /// At item `i`, over the `WIDE` lanes from lane `off`.
    fn wide(&self, i: usize, off: usize) -> Option<[bool; WIDE]>;
}

impl LaneMask for Lane<'_, bool> {
    #[inline(always)]
    fn at<'s>(
        &'s self,
        i: usize,
        off: usize,
        lc: usize,
        _: &'s mut [bool; CHUNK],
    ) -> Option<Atoms<'s, bool>> {
        Lane::at(self, i, off, lc)
    }

    #[inline(always)]
    fn wide(&self, i: usize, off: usize) -> Option<[bool; WIDE]> {
        Lane::wide(self, i, off)
    }
}

/// A comparison `holds` along a chunk of lanes, compared as it is read.
struct ComparedLanes<'a, C, H> {
    holds: H,
    p: Lane<'a, C>,
    q: Lane<'a, C>,
}

impl<C: Copy + Sync, H: Fn(C, C) -> bool + Sync> LaneMask for ComparedLanes<'_, C, H> {
    #[inline(always)]
    fn at<'s>(
        &'s self,
        i: usize,
        off: usize,
        lc: usize,
        buf: &'s mut [bool; CHUNK],
    ) -> Option<Atoms<'s, bool>> {
        let holds = &self.holds;
        let out = buf.get_mut(..lc)?;
        match (self.p.at(i, off, lc)?, self.q.at(i, off, lc)?) {
            (Atoms::One(a), Atoms::One(b)) => return Some(Atoms::One(holds(a, b))),
            (Atoms::Run(a), Atoms::Run(b)) => {
                for ((o, &a), &b) in out.iter_mut().zip(a).zip(b) {
                    *o = holds(a, b);
                }
            }
            (Atoms::Run(a), Atoms::One(b)) => {
                for (o, &a) in out.iter_mut().zip(a) {
                    *o = holds(a, b);
                }
            }
            (Atoms::One(a), Atoms::Run(b)) => {
                for (o, &b) in out.iter_mut().zip(b) {
                    *o = holds(a, b);
                }
            }
        }
        Some(Atoms::Run(out))
    }

    #[inline(always)]
    fn wide(&self, i: usize, off: usize) -> Option<[bool; WIDE]> {
        let (p, q) = (self.p.wide::<WIDE>(i, off)?, self.q.wide::<WIDE>(i, off)?);
        let mut m = [false; WIDE];
        for ((m, p), q) in m.iter_mut().zip(p).zip(q) {
            *m = (self.holds)(p, q);
        }
        Some(m)
    }
}

/// Each lane's choice (`m` picks `x` or `y`) combined into its
/// accumulator by `f`.
#[inline(always)]
fn folded<T: Copy>(
    acc: &mut [T],
    m: Atoms<'_, bool>,
    x: Atoms<'_, T>,
    y: Atoms<'_, T>,
    f: impl Fn(T, T) -> T,
) {
    let pick = |c: bool, x: T, y: T| if c { x } else { y };
    match (m, x, y) {
        (Atoms::Run(c), Atoms::Run(x), Atoms::Run(y)) => {
            for (((a, &c), &x), &y) in acc.iter_mut().zip(c).zip(x).zip(y) {
                *a = f(*a, pick(c, x, y));
            }
        }
        (Atoms::Run(c), Atoms::Run(x), Atoms::One(y)) => {
            for ((a, &c), &x) in acc.iter_mut().zip(c).zip(x) {
                *a = f(*a, pick(c, x, y));
            }
        }
        (Atoms::Run(c), Atoms::One(x), Atoms::Run(y)) => {
            for ((a, &c), &y) in acc.iter_mut().zip(c).zip(y) {
                *a = f(*a, pick(c, x, y));
            }
        }
        (Atoms::Run(c), Atoms::One(x), Atoms::One(y)) => {
            for (a, &c) in acc.iter_mut().zip(c) {
                *a = f(*a, pick(c, x, y));
            }
        }
        (Atoms::One(c), x, y) => match if c { x } else { y } {
            Atoms::Run(v) => {
                for (a, &v) in acc.iter_mut().zip(v) {
                    *a = f(*a, v);
                }
            }
            Atoms::One(v) => {
                for a in acc.iter_mut() {
                    *a = f(*a, v);
                }
            }
        },
    }
}

/// A chunk's mask and choices.
struct Lanes<'a, M, T> {
    mask: M,
    a: Lane<'a, T>,
    b: Lane<'a, T>,
}

impl<M: LaneMask, T: Item> Lanes<'_, M, T> {
    /// Items `lo .. lo + len` folded left to right into `acc` (one
    /// accumulator a lane), from `seed` or else from the first item:
    /// `WIDE` lanes at a time with the accumulators in registers, the
    /// lanes left over one loop over them per item.
    #[inline(always)]
    fn leaf(
        &self,
        lo: usize,
        len: usize,
        seed: Option<T>,
        acc: &mut [T],
        f: impl Fn(T, T) -> T,
    ) -> Option<()> {
        let (wide, rest) = acc.as_chunks_mut::<WIDE>();
        for (w, acc) in wide.iter_mut().enumerate() {
            *acc = self.leaf_wide(w * WIDE, lo, len, seed, &f)?;
        }
        if rest.is_empty() {
            return Some(());
        }
        let off = wide.len() * WIDE;
        let lc = rest.len();
        let mut buf = [false; CHUNK];
        let mut items = lo..lo + len;
        match seed {
            Some(s) => rest.fill(s),
            None => {
                let i = items.next()?;
                let m = self.mask.at(i, off, lc, &mut buf)?;
                folded(rest, m, self.a.at(i, off, lc)?, self.b.at(i, off, lc)?, |_, c| c);
            }
        }
        for i in items {
            let m = self.mask.at(i, off, lc, &mut buf)?;
            folded(rest, m, self.a.at(i, off, lc)?, self.b.at(i, off, lc)?, &f);
        }
        Some(())
    }

    /// [`Lanes::leaf`] over the `WIDE` lanes from lane `off`.
    #[inline(always)]
    fn leaf_wide(
        &self,
        off: usize,
        lo: usize,
        len: usize,
        seed: Option<T>,
        f: impl Fn(T, T) -> T,
    ) -> Option<[T; WIDE]> {
        let mut items = lo..lo + len;
        let mut acc = match seed {
            Some(s) => [s; WIDE],
            None => self.choice_wide(items.next()?, off)?,
        };
        for i in items {
            let c = self.choice_wide(i, off)?;
            for (a, c) in acc.iter_mut().zip(c) {
                *a = f(*a, c);
            }
        }
        Some(acc)
    }

    /// The choices at item `i` over the `WIDE` lanes from lane `off`.
    #[inline(always)]
    fn choice_wide(&self, i: usize, off: usize) -> Option<[T; WIDE]> {
        let m = self.mask.wide(i, off)?;
        let (mut x, y) = (self.a.wide::<WIDE>(i, off)?, self.b.wide::<WIDE>(i, off)?);
        for ((x, m), y) in x.iter_mut().zip(m).zip(y) {
            if !m {
                *x = y;
            }
        }
        Some(x)
    }

    /// Items `lo .. lo + len` (`len ≥ 1`) by `reduce`'s tree, into `acc`.
    fn subtree(&self, lo: usize, len: usize, acc: &mut [T], f: impl Fn(T, T) -> T + Copy) -> Option<()> {
        if len <= PAIRWISE_LEAF {
            return crate::fmath::widest(
                #[inline(always)]
                || self.leaf(lo, len, None, acc, f),
            );
        }
        let half = len / 2;
        self.subtree(lo, half, acc, f)?;
        let mut right = [T::ZERO; CHUNK];
        let right = right.get_mut(..acc.len())?;
        self.subtree(lo + half, len - half, right, f)?;
        for (a, &r) in acc.iter_mut().zip(right.iter()) {
            *a = f(*a, r);
        }
        Some(())
    }

    /// The chunk's `n` items reduced into `acc`.
    fn reduce(
        &self,
        n: usize,
        seed: Option<T>,
        tree: bool,
        acc: &mut [T],
        f: impl Fn(T, T) -> T + Copy,
    ) -> Option<()> {
        if !tree {
            return crate::fmath::widest(
                #[inline(always)]
                || self.leaf(0, n, seed, acc, f),
            );
        }
        self.subtree(0, n, acc, f)?;
        if let Some(s) = seed {
            for a in acc.iter_mut() {
                *a = f(s, *a);
            }
        }
        Some(())
    }
}

/// The reduction along the lanes, the chunks (each with its first
/// position) shared among the threads.
struct LanesKernel<'c, 'a, T> {
    chosen: &'c Chosen<'a>,
    mask: &'c Mask<'a>,
    xs: &'c [T],
    ys: &'c [T],
    parts: Vec<(usize, &'c mut [T])>,
    threads: usize,
    seed: Option<T>,
    tree: bool,
}

impl<T: Item> LanesKernel<'_, '_, T> {
    fn chunk(&self, first: usize, acc: &mut [T], f: impl Fn(T, T) -> T + Copy) -> Option<()> {
        let n = self.chosen.n;
        let at = (first, self.chosen.rows);
        let lc = acc.len();
        let [la, lb] = self.chosen.lines;
        let (a, b) = (
            Lane::of(self.xs, la, at, n, lc)?,
            Lane::of(self.ys, lb, at, n, lc)?,
        );
        match self.mask {
            Mask::Made(Made { mask, line }) => Lanes {
                mask: Lane::of(mask, line, at, n, lc)?,
                a,
                b,
            }
            .reduce(n, self.seed, self.tree, acc, f),
            Mask::Floats(c) => self.compared(c, at, (a, b), acc, f),
            Mask::Ints(c) => self.compared(c, at, (a, b), acc, f),
        }
    }

    /// The chunk reduced with its mask a comparison: one kernel for each.
    fn compared<C: Copy + Sync + PartialOrd>(
        &self,
        c: &Compared<'_, C>,
        at: (usize, &[usize]),
        (a, b): (Lane<'_, T>, Lane<'_, T>),
        acc: &mut [T],
        f: impl Fn(T, T) -> T + Copy,
    ) -> Option<()> {
        let (n, lc) = (self.chosen.n, acc.len());
        let p = Lane::of(c.p, c.lines[0], at, n, lc)?;
        let q = Lane::of(c.q, c.lines[1], at, n, lc)?;
        let (seed, tree) = (self.seed, self.tree);
        macro_rules! by {
            ($holds:expr) => {
                Lanes {
                    mask: ComparedLanes {
                        holds: $holds,
                        p,
                        q,
                    },
                    a,
                    b,
                }
                .reduce(n, seed, tree, acc, f)
            };
        }
        match c.cmp {
            Cmp::Eq => by!(|x: C, y: C| x == y),
            Cmp::Ne => by!(|x: C, y: C| x != y),
            Cmp::Lt => by!(|x: C, y: C| x < y),
            Cmp::Le => by!(|x: C, y: C| x <= y),
            Cmp::Gt => by!(|x: C, y: C| x > y),
            Cmp::Ge => by!(|x: C, y: C| x >= y),
        }
    }
}

impl<T: Item> Kernel<T> for LanesKernel<'_, '_, T> {
    type Out = bool;
    fn run(mut self, f: impl Fn(T, T) -> T + Copy + Sync) -> bool {
        let parts = std::mem::take(&mut self.parts);
        let me = &self;
        crate::in_parallel(parts, self.threads, |(first, acc)| {
            me.chunk(first, acc, f).is_some()
        })
    }
}

/// The reduction along the rows, the rows shared among the threads.
struct RowsKernel<'c, 'a> {
    chosen: &'c Chosen<'a>,
    mask: &'c Mask<'a>,
    xs: &'c [f32],
    ys: &'c [f32],
    out: &'c mut [f32],
    seed: Option<f32>,
    tree: bool,
}

impl Kernel<f32> for RowsKernel<'_, '_> {
    type Out = bool;
    fn run(self, f: impl Fn(f32, f32) -> f32 + Copy + Sync) -> bool {
        match self.mask {
            Mask::Made(m) => self.rows(m, f),
            Mask::Floats(m) => self.rows(m, f),
            Mask::Ints(m) => self.rows(m, f),
        }
    }
}

impl RowsKernel<'_, '_> {
    fn rows<M: MaskLines>(self, mask: &M, f: impl Fn(f32, f32) -> f32 + Copy + Sync) -> bool {
        let items = self.out.len().saturating_mul(self.chosen.n);
        let me = Rows {
            chosen: self.chosen,
            mask,
            xs: self.xs,
            ys: self.ys,
        };
        let (seed, tree) = (self.seed, self.tree);
        crate::rows_in_parallel(self.out, 1, items, PARALLEL_ITEMS, |first, out| {
            let mut scratch = (M::Scratch::default(), Vec::new(), Vec::new(), Vec::new());
            out.iter_mut().enumerate().all(|(i, o)| {
                me.row(first + i, seed, tree, f, &mut scratch)
                    .map(|v| *o = v)
                    .is_some()
            })
        })
    }
}

/// The operands of a reduction along the rows.
struct Rows<'c, 'a, M> {
    chosen: &'c Chosen<'a>,
    mask: &'c M,
    xs: &'c [f32],
    ys: &'c [f32],
}

/// A row's scratch space: the mask's, the two choices' and the choices
/// made.
type Scratch<S> = (S, Vec<f32>, Vec<f32>, Vec<f32>);

impl<M: MaskLines> Rows<'_, '_, M> {
    /// Row `r` reduced.
    fn row(
        &self,
        r: usize,
        seed: Option<f32>,
        tree: bool,
        f: impl Fn(f32, f32) -> f32 + Copy,
        scratch: &mut Scratch<M::Scratch>,
    ) -> Option<f32> {
        let n = self.chosen.n;
        if tree {
            let t = self.subtree(r, 0, n, f, scratch)?;
            return Some(seed.map_or(t, |s| f(s, t)));
        }
        let mut acc = seed;
        for k in (0..n).step_by(LINE) {
            self.choices(r, k, LINE.min(n - k), scratch)?;
            let made = &scratch.3;
            let (start, rest) = match acc {
                Some(a) => (a, made.as_slice()),
                None => (*made.first()?, made.get(1..)?),
            };
            acc = Some(rest.iter().fold(start, |a, &v| f(a, v)));
        }
        acc
    }

    /// Items `lo .. lo + len` of row `r` by `reduce`'s tree.
    fn subtree(
        &self,
        r: usize,
        lo: usize,
        len: usize,
        f: impl Fn(f32, f32) -> f32 + Copy,
        scratch: &mut Scratch<M::Scratch>,
    ) -> Option<f32> {
        if len <= BLOCK {
            self.choices(r, lo, len, scratch)?;
            return crate::kernel::tree(&scratch.3, len, 1, &f).first().copied();
        }
        let half = len / 2;
        let a = self.subtree(r, lo, half, f, scratch)?;
        let b = self.subtree(r, lo + half, len - half, f, scratch)?;
        Some(f(a, b))
    }

    /// The choices of items `lo .. lo + len` of row `r`, into the
    /// scratch's last vector, a line at a time.
    fn choices(
        &self,
        r: usize,
        lo: usize,
        len: usize,
        (sm, sx, sy, made): &mut Scratch<M::Scratch>,
    ) -> Option<()> {
        let row = (r, self.chosen.rows);
        let [la, lb] = self.chosen.lines;
        made.clear();
        for k in (lo..lo + len).step_by(LINE) {
            let l = LINE.min(lo + len - k);
            let m = self.mask.read(row, k, l, sm)?;
            let x = la.read(self.xs, row, k, l, sx)?;
            let y = lb.read(self.ys, row, k, l, sy)?;
            crate::choose::picked(made, m, x, y, l);
        }
        Some(())
    }
}

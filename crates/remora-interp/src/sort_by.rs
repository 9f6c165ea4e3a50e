//! `sort-by` and `grade-by` by a user's less-than over a frame of cells:
//! every merge of every cell stepped together. The reference sorts each
//! cell on its own by a stable merge sort (`intrinsics::merge_sort`),
//! calling the less-than once per comparison. Here, each pass of that
//! merge sort (runs of `width` merged pairwise) runs all its merges — of
//! all the cells — at once: a step compares, for every merge not yet
//! done, the next item of its right run with the next of its left run, by
//! one batched application of the less-than, and each merge takes the
//! item the reference would take. Every merge makes exactly the
//! comparisons it makes alone, in the same order, so the orders are the
//! reference's for any less-than, even one that is not an order. A pass
//! of width `w` takes at most `2w - 1` steps: about `2n` batched
//! applications in all, instead of about `n log n` calls per cell.
//!
//! The comparisons of a step are laid out as `[cells, lanes]`, the cells
//! being the batch's and the frame's positions, so that a less-than that
//! captures a value of its cell (an argsort of a row, comparing the row's
//! items at two indices) sees its own cell's. A cell with fewer merges
//! left than the most repeats one of its own comparisons (a pure function
//! evaluated again, to the same result, raising nothing new).
//!
//! Whatever cannot run batched (`trace`, an error) gives up, and the
//! reference path runs.
//!
//! A less-than that compares keys, `(fn ((a …) (b …)) (CMP (G a) (G b)))`
//! with `CMP` a scalar comparison and the second operand the first with
//! `b` for `a` (`G` may read the cell: `(f.abs (index r a))`), or a
//! comparison itself (`f.<`), needs no batched application per step: the
//! keys `G x` of every item of every cell are made at once, by one
//! batched application of `λa. G a` over `[cells, n]`, and every
//! comparison of the merge sort is `CMP` on two keys. So too for such
//! comparisons combined by `not`, `and`, `or`, `bool.==`, `bool.!=` (a
//! lexicographic order), each distinct key made once. Every item of a
//! cell of at least two is compared, and every comparison evaluates every
//! key (the Bool operators are strict), so `G` raises nothing the
//! reference does not; cells of fewer compare nothing and make no keys.
//! The same comparisons in the same order: a merge sort of each cell on
//! its keys (`intrinsics::merge_sort`), natively. Where the test is one
//! comparison and that is an order (`<`, `<=`, `>`, `>=` and Float keys
//! without NaN), that merge sort's result is known without it: the keys'
//! stable order (ascending for `<` and `<=`, descending for `>` and
//! `>=`), ties in the items' order for the strict ones and reversed for
//! the others (the merge takes the right run's item of a tie). That is
//! each row's sort of its keys with their positions
//! (`sort::rows_ordered`).

use crate::batch::{Batched, Try};
use crate::eval::{Fun, Interpreter, atoms_in, fun_value};
use crate::intrinsics::merge_sort;
use crate::masked::take_rows;
use crate::sort::{Ends, float_key, int_key, rows_ordered};
use crate::tally::{Cmp, comparison};
use remora_check::typed::{TAtom, TAtomKind, TExpr, TExprKind, VarId};
use remora_value::{Array, Atom, Data};

/// One merge of two adjacent runs of one cell: the next item of the left
/// run (`i`, up to `mid`), of the right run (`j`, up to `hi`); the next
/// place written is `i + j - mid`. Places count from the start of the
/// whole frame's order (at most `u32::MAX` of them: 20 bytes a merge, as
/// every step streams them all).
#[derive(Clone, Copy)]
struct Merge {
    cell: u32,
    i: u32,
    mid: u32,
    j: u32,
    hi: u32,
}

impl Merge {
    fn going(&self) -> bool {
        self.i < self.mid && self.j < self.hi
    }

    fn at(x: u32) -> usize {
        x as usize
    }
}

impl<'p> Interpreter {
    /// `sort-by`/`grade-by` (`name`) by `less` over `xs`, whose own shape
    /// is a frame, then `[n] ++ cell`: the cells sorted (or their grades).
    pub(crate) fn sort_by_batched(
        &mut self,
        name: &str,
        less: &Batched<'p>,
        xs: &Batched<'p>,
        xcell: &[usize],
    ) -> Try<Batched<'p>> {
        if !less.v.shape.get(less.nb..)?.is_empty() {
            return None;
        }
        let (&n, item_cell) = xcell.split_first()?;
        // A less-than that reads a value of the batch compares each cell's
        // items by that cell's value: every batch axis is the cells'.
        let reads_batch = match &less.v.data {
            Data::Atoms(atoms) => atoms.iter().any(|a| matches!(a, Atom::Fun(f) if f.reads_batch())),
            _ => false,
        };
        let nb = if reads_batch {
            self.batch.len()
        } else {
            xs.nb.max(less.nb)
        };
        let xs = self.expand(xs, nb)?.densify()?;
        let outer: Vec<usize> =
            xs.v.shape
                .get(..xs.v.shape.len().checked_sub(xcell.len())?)?
                .to_vec();
        let keyed = match keyed(less) {
            Some(k) if n >= 2 && atoms_in(&outer) > 0 => {
                let keys = k
                    .keys
                    .iter()
                    .map(|key| self.keys_of(key.as_ref(), &xs.v.data, (&outer, nb), n, item_cell))
                    .collect::<Option<Vec<_>>>();
                Some((k, keys))
            }
            _ => None,
        };
        let order = match keyed {
            Some((k, Some(keys))) => keyed_order(&k, &keys, n)?,
            // Keys that failed (an error, out of memory): so would the
            // comparisons.
            Some((_, None)) if crate::eval::doomed() || crate::eval::starved() || crate::eval::faulted() => {
                return None;
            }
            _ => self.merge_sort_cells(less, &xs.v.data, (&outer, nb), n, item_cell)?,
        };
        if name == "grade-by" {
            let mut shape = outer;
            shape.push(n);
            let local = order
                .iter()
                .enumerate()
                .map(|(p, &r)| (r - p / n.max(1) * n) as i64);
            let data = Data::Int(local.collect::<Vec<_>>().into());
            return Some(Batched::dense(Array { shape, data }, nb));
        }
        let data = take_rows(&xs.v.data, &order, atoms_in(item_cell));
        Some(Batched::dense(
            Array {
                shape: xs.v.shape.clone(),
                data,
            },
            nb,
        ))
    }

    /// The stable merge sort of each cell of `n` items (items of shape
    /// `item_cell`, row `c * n + r` of `items` for cell `c` of the `outer`
    /// shape, its first `nb` axes the batch's), all merges of a pass
    /// stepped together: for each place, the row of the item there.
    fn merge_sort_cells(
        &mut self,
        less: &Batched<'p>,
        items: &Data<Fun<'p>>,
        (outer, nb): (&[usize], usize),
        n: usize,
        item_cell: &[usize],
    ) -> Try<Vec<usize>> {
        let cells = atoms_in(outer);
        let total = cells.checked_mul(n)?;
        u32::try_from(total).ok()?;
        let mut order: Vec<usize> = (0..total).collect();
        let mut merged = order.clone();
        // Per cell, a comparison it made (rows right and left), repeated
        // where it has none left to make in a step (every cell makes one
        // at the first step, where all its first merges compare).
        let mut made: Vec<(usize, usize)> = vec![(0, 0); cells];
        // The merges of a pass, and those done (kept from pass to pass).
        let mut live: Vec<Merge> = Vec::with_capacity(total.div_ceil(2) + cells);
        let mut done: Vec<Merge> = Vec::with_capacity(live.capacity());
        let mut right = Vec::new();
        let mut left = Vec::new();
        let mut slots = Vec::new();
        let mut lanes = vec![0usize; cells];
        let mut width = 1;
        while width < n {
            live.clear();
            done.clear();
            for cell in 0..cells {
                for lo in (cell * n..(cell + 1) * n).step_by(2 * width) {
                    let mid = (lo + width).min((cell + 1) * n);
                    let hi = (lo + 2 * width).min((cell + 1) * n);
                    live.push(Merge {
                        cell: u32::try_from(cell).ok()?,
                        i: u32::try_from(lo).ok()?,
                        mid: u32::try_from(mid).ok()?,
                        j: u32::try_from(mid).ok()?,
                        hi: u32::try_from(hi).ok()?,
                    });
                }
            }
            loop {
                live.retain(|m| {
                    let going = m.going();
                    if !going {
                        done.push(*m);
                    }
                    going
                });
                if live.is_empty() {
                    break;
                }
                if let Some(fuel) = &mut self.fuel {
                    *fuel = fuel.checked_sub(1)?;
                }
                // Each merge's slot among its cell's lanes (the merges are
                // in the order of their cells).
                lanes.fill(0);
                slots.clear();
                for m in &live {
                    let c = Merge::at(m.cell);
                    slots.push(lanes[c]);
                    lanes[c] += 1;
                }
                let w = lanes.iter().copied().max()?;
                right.clear();
                right.resize(cells * w, 0);
                left.clear();
                left.resize(cells * w, 0);
                for (m, &s) in live.iter().zip(&slots) {
                    let at = Merge::at(m.cell) * w + s;
                    right[at] = order[Merge::at(m.j)];
                    left[at] = order[Merge::at(m.i)];
                }
                // Where a cell has fewer lanes, its first comparison of
                // this step again (or one it made before).
                for (c, &count) in lanes.iter().enumerate() {
                    if count > 0 {
                        made[c] = (right[c * w], left[c * w]);
                    }
                    for at in c * w + count..(c + 1) * w {
                        (right[at], left[at]) = made[c];
                    }
                }
                let mut lane_frame = outer.to_vec();
                lane_frame.push(w);
                let takes = self.less_over(less, items, (&right, &left), (&lane_frame, nb), item_cell)?;
                for (m, &s) in live.iter_mut().zip(&slots) {
                    let k = Merge::at(m.i + (m.j - m.mid));
                    // Take from the right run only when strictly less.
                    if *takes.get(Merge::at(m.cell) * w + s)? {
                        merged[k] = order[Merge::at(m.j)];
                        m.j += 1;
                    } else {
                        merged[k] = order[Merge::at(m.i)];
                        m.i += 1;
                    }
                }
            }
            // What is left of either run, in order.
            for m in &done {
                let rest = (m.i..m.mid).chain(m.j..m.hi);
                for (k, from) in (Merge::at(m.i + (m.j - m.mid))..).zip(rest) {
                    merged[k] = order[Merge::at(from)];
                }
            }
            std::mem::swap(&mut order, &mut merged);
            width *= 2;
        }
        Some(order)
    }

    /// The key of every item of every cell (`items` laid out as `outer
    /// ++ [n] ++ item_cell`, the first `nb` axes the batch's): the key
    /// function applied to them all at once, or the items themselves
    /// (`None`, atoms only).
    fn keys_of(
        &mut self,
        key: Option<&Fun<'p>>,
        items: &Data<Fun<'p>>,
        (outer, nb): (&[usize], usize),
        n: usize,
        item_cell: &[usize],
    ) -> Try<Data<Fun<'p>>> {
        let Some(key) = key else {
            return item_cell.is_empty().then(|| items.clone());
        };
        let mut frame = outer.to_vec();
        frame.push(n);
        let shape = frame.iter().chain(item_cell).copied().collect();
        let xs = Batched::dense(
            Array {
                shape,
                data: items.clone(),
            },
            nb,
        );
        let key = Batched::plain(fun_value(key.clone()));
        let r = self.apply_batched(&key, vec![(xs, item_cell.to_vec())])?;
        let r = self.expand(&r, nb)?.densify()?;
        (r.v.shape == frame).then_some(r.v.data)
    }

    /// `(less a b)` for each pair of rows `a` of `firsts`, `b` of
    /// `seconds` of `items`, laid over `frame` (its first `nb` axes the
    /// batch's), by one batched application.
    fn less_over(
        &mut self,
        less: &Batched<'p>,
        items: &Data<Fun<'p>>,
        (firsts, seconds): (&[usize], &[usize]),
        (frame, nb): (&[usize], usize),
        item_cell: &[usize],
    ) -> Try<Vec<bool>> {
        let size = atoms_in(item_cell);
        let rows = |at: &[usize]| -> Batched<'p> {
            let shape = frame.iter().chain(item_cell).copied().collect();
            Batched::dense(
                Array {
                    shape,
                    data: take_rows(items, at, size),
                },
                nb,
            )
        };
        let args = vec![
            (rows(firsts), item_cell.to_vec()),
            (rows(seconds), item_cell.to_vec()),
        ];
        let r = self.apply_batched(less, args)?;
        let r = self.expand(&r, nb)?.densify()?;
        match &r.v.data {
            Data::Bool(b) if r.v.shape == frame => Some(b.to_vec()),
            _ => None,
        }
    }
}

/// A less-than that compares keys (see the module comment): its test
/// and the key functions its comparisons read (`None`: the items are the
/// keys).
struct Keyed<'p> {
    test: Test,
    /// Each comparison of the test: its scalar comparison and its key.
    compares: Vec<(&'static str, usize)>,
    keys: Vec<Option<Fun<'p>>>,
}

/// The body of a less-than that compares keys: a comparison of the right
/// item's key with the left's (`compares[k]`), or such tests combined by
/// `not`, `and`, `or`, `bool.==` or `bool.!=` (a lexicographic order:
/// `(or (< (G a) (G b)) (and (== (G a) (G b)) (< (H a) (H b))))`).
enum Test {
    Compare(usize),
    Not(Box<Test>),
    Both(fn(bool, bool) -> bool, Box<Test>, Box<Test>),
}

impl Test {
    /// Whether the test holds of the items at rows `i` and `j`, given
    /// each comparison as a function of two rows.
    fn holds(&self, compares: &[KeyCompare<'_>], i: usize, j: usize) -> bool {
        match self {
            Test::Compare(k) => compares.get(*k).is_some_and(|c| c(i, j)),
            Test::Not(t) => !t.holds(compares, i, j),
            Test::Both(op, x, y) => op(x.holds(compares, i, j), y.holds(compares, i, j)),
        }
    }
}

/// A comparison of the keys of the items at two rows.
type KeyCompare<'k> = Box<dyn Fn(usize, usize) -> bool + Sync + 'k>;

/// How deep a test's `not`s and `and`s may nest.
const TEST_DEPTH: usize = 32;

/// `less` as a comparison of keys, if it is one.
fn keyed<'p>(less: &Batched<'p>) -> Option<Keyed<'p>> {
    if less.nb != 0 || !less.v.shape.is_empty() {
        return None;
    }
    let Data::Atoms(atoms) = &less.v.data else {
        return None;
    };
    match atoms.get(less.offset)? {
        Atom::Fun(Fun::Prim(p))
            if p.args.is_empty()
                && p.types.len() >= p.sig.types
                && p.indices.len() >= p.sig.indices
                && is_comparison(p.name) =>
        {
            Some(Keyed {
                test: Test::Compare(0),
                compares: vec![(p.name, 0)],
                keys: vec![None],
            })
        }
        Atom::Fun(Fun::Lambda { param: a, body, env }) => {
            let body: &'p TExpr = body;
            let TExprKind::Array { shape, atoms } = &body.kind else {
                return None;
            };
            let (
                [],
                [
                    TAtom {
                        kind: TAtomKind::Lambda { param: b, body },
                        ..
                    },
                ],
            ) = (shape.as_slice(), atoms.as_slice())
            else {
                return None;
            };
            let mut found = Found {
                params: (*a, *b),
                compares: Vec::new(),
                keys: Vec::new(),
            };
            let test = found.test(body, 0)?;
            let keys = found
                .keys
                .into_iter()
                .map(|(param, body)| {
                    Some(Fun::Lambda {
                        param,
                        body,
                        env: env.clone(),
                    })
                })
                .collect();
            Some(Keyed {
                test,
                compares: found.compares,
                keys,
            })
        }
        _ => None,
    }
}

/// What reading a less-than's body as a test has found so far.
struct Found<'p> {
    /// The parameters: the right item's, the left's.
    params: (VarId, VarId),
    compares: Vec<(&'static str, usize)>,
    /// The distinct keys: each the expression `G` of its parameter.
    keys: Vec<(VarId, &'p TExpr)>,
}

impl<'p> Found<'p> {
    /// `e` as a test, if it is one.
    fn test(&mut self, e: &'p TExpr, depth: usize) -> Option<Test> {
        if depth > TEST_DEPTH {
            return None;
        }
        let (head, args) = e.spine();
        let TExprKind::Intrinsic(op) = &head.kind else {
            return None;
        };
        match (*op, args.as_slice()) {
            ("not", [(x, _)]) => Some(Test::Not(Box::new(self.test(x, depth + 1)?))),
            (cmp, [(x, _), (y, _)]) => {
                if let Some(k) = self.compare(cmp, x, y) {
                    return Some(Test::Compare(k));
                }
                // (A comparison of Bools is tried first as one of keys.)
                let op = match cmp {
                    "and" | "or" | "bool.==" | "bool.!=" => bool_less(cmp)?,
                    _ => return None,
                };
                let x = self.test(x, depth + 1)?;
                let y = self.test(y, depth + 1)?;
                Some(Test::Both(op, Box::new(x), Box::new(y)))
            }
            _ => None,
        }
    }

    /// `(CMP x y)` as a comparison of keys, `(CMP (G a) (G b))` or `(CMP
    /// (G b) (G a))` (the keys compared the other way round): its number.
    fn compare(&mut self, cmp: &'static str, x: &'p TExpr, y: &'p TExpr) -> Option<usize> {
        if !is_comparison(cmp) {
            return None;
        }
        let (a, b) = self.params;
        let (cmp, param) = if renamed(x, y, a, b) {
            (cmp, a)
        } else if renamed(x, y, b, a) {
            (flipped(cmp), b)
        } else {
            return None;
        };
        let key = match self.keys.iter().position(|&(p, g)| renamed(g, x, p, param)) {
            Some(k) => k,
            None => {
                self.keys.push((param, x));
                self.keys.len() - 1
            }
        };
        self.compares.push((cmp, key));
        Some(self.compares.len() - 1)
    }
}

/// Whether the scalar primitive `name` compares two atoms to a Bool.
fn is_comparison(name: &str) -> bool {
    numeric(name).is_some() || bool_less(name).is_some()
}

/// A comparison of numbers: of Float keys (`f.<` …) or of Int keys (`<` …).
fn numeric(cmp: &str) -> Option<(Cmp, bool)> {
    Some((comparison(cmp)?, cmp.starts_with("f.")))
}

fn bool_less(cmp: &str) -> Option<fn(bool, bool) -> bool> {
    Some(match cmp {
        "and" => |a, b| a && b,
        "or" => |a, b| a || b,
        "bool.==" => |a, b| a == b,
        "bool.!=" => |a, b| a != b,
        _ => return None,
    })
}

/// The comparison `cmp` with its operands swapped.
fn flipped(cmp: &'static str) -> &'static str {
    match cmp {
        "<" => ">",
        ">" => "<",
        "<=" => ">=",
        ">=" => "<=",
        "f.<" => "f.>",
        "f.>" => "f.<",
        "f.<=" => "f.>=",
        "f.>=" => "f.<=",
        // The others are symmetric.
        _ => cmp,
    }
}

/// How an order `cmp` sorts: descending (`>`, `>=`), and with ties
/// reversed (`<=`, `>=`: the merge takes the right run's item of a tie).
fn ordering(cmp: &str) -> Option<(bool, bool)> {
    Some(match cmp.trim_start_matches("f.") {
        "<" => (false, false),
        "<=" => (false, true),
        ">" => (true, false),
        ">=" => (true, true),
        _ => return None,
    })
}

/// The stable merge sort of each row of `n` items by `keyed`'s test on
/// their `keys` (the right item's compared with the left's): for each
/// place, the row (counted from the first of all) of the item there.
fn keyed_order<F>(keyed: &Keyed<'_>, keys: &[Data<F>], n: usize) -> Option<Vec<usize>> {
    let total = keys.first()?.len();
    if let (Test::Compare(k), [(cmp, key)]) = (&keyed.test, keyed.compares.as_slice())
        && *k == 0
        && let Some(order) = ordered(cmp, keys.get(*key)?, n)
    {
        return Some(order);
    }
    let compares = keyed
        .compares
        .iter()
        .map(|(cmp, key)| key_compare(cmp, keys.get(*key)?))
        .collect::<Option<Vec<_>>>()?;
    let mut order = crate::kernel::buffer(total).ok()?;
    order.resize(total, 0);
    // Each row sorted on its own: the rows shared among the threads.
    let test = &keyed.test;
    let sorted = crate::rows_in_parallel(&mut order, n, total, PARALLEL_KEYS, |row, out| {
        for (r, out) in (row..).zip(out.chunks_exact_mut(n)) {
            let first = r * n;
            let Ok(sorted) = merge_sort(n, |i, j| {
                Ok::<bool, std::convert::Infallible>(test.holds(&compares, first + i, first + j))
            });
            for (o, i) in out.iter_mut().zip(sorted) {
                *o = first + i;
            }
        }
        true
    });
    sorted.then_some(order)
}

/// Rows of at least this many keys in all are merge sorted on every core.
const PARALLEL_KEYS: usize = 1 << 14;

/// Where `cmp` is an order on `keys` (Ints, or Floats without NaN), each
/// row's stable merge sort by it, known without comparing.
fn ordered<F>(cmp: &str, keys: &Data<F>, n: usize) -> Option<Vec<usize>> {
    let (descending, ties) = ordering(cmp)?;
    match keys {
        Data::Float(k) if numeric(cmp).is_some_and(|(_, float)| float) && !k.iter().any(|x| x.is_nan()) => {
            let sign = if descending { -1.0 } else { 1.0 };
            ranked(k, n, |x: f32| float_key(sign * x), false, ties)
        }
        Data::Int(k) if numeric(cmp).is_some_and(|(_, float)| !float) => {
            let flip = if descending { -1 } else { 0 };
            ranked(k, n, |x: i64| int_key(x ^ flip), true, ties)
        }
        _ => None,
    }
}

/// `cmp` on the keys at two rows.
fn key_compare<'k, F>(cmp: &str, keys: &'k Data<F>) -> Option<KeyCompare<'k>> {
    Some(match keys {
        Data::Float(k) => {
            let (less, true) = numeric(cmp)? else { return None };
            Box::new(move |i, j| less.holds(k[i], k[j]))
        }
        Data::Int(k) => {
            let (less, false) = numeric(cmp)? else { return None };
            Box::new(move |i, j| less.holds(k[i], k[j]))
        }
        Data::Bool(k) => {
            let less = bool_less(cmp)?;
            Box::new(move |i, j| less(k[i], k[j]))
        }
        _ => return None,
    })
}

/// Each row's stable order by `key` (see `sort::rows_ordered`), ties in
/// reverse order where `ties_reversed` (the rows' keys read backwards).
fn ranked<T: Copy + Sync>(
    keys: &[T],
    n: usize,
    key: impl Fn(T) -> u64 + Sync,
    wide: bool,
    ties_reversed: bool,
) -> Option<Vec<usize>> {
    let backwards: Vec<T>;
    let rows = if ties_reversed {
        backwards = keys
            .chunks_exact(n.max(1))
            .flat_map(|row| row.iter().rev())
            .copied()
            .collect();
        &backwards
    } else {
        keys
    };
    let mut order = rows_ordered(rows, n, &key, wide, Ends::All, |_, i| i).ok()?;
    for (p, i) in order.iter_mut().enumerate() {
        let at = if ties_reversed { n - 1 - *i } else { *i };
        *i = p / n * n + at;
    }
    Some(order)
}

/// Whether `y` is `x` with the variable `b` read for `a` (and each
/// variable `x` binds read as the one `y` binds in its place), spans
/// aside: the same expression of another parameter. Iterative (a tree as
/// deep as the checker allows).
fn renamed(x: &TExpr, y: &TExpr, a: VarId, b: VarId) -> bool {
    let mut names = vec![(a, b)];
    let mut stack = vec![(x, y)];
    while let Some((x, y)) = stack.pop() {
        if x.ty != y.ty {
            return false;
        }
        match (&x.kind, &y.kind) {
            (TExprKind::Var(v), TExprKind::Var(w)) => {
                let same = match names.iter().find(|(p, q)| p == v || q == w) {
                    Some((p, q)) => p == v && q == w,
                    None => v == w,
                };
                if !same {
                    return false;
                }
            }
            (TExprKind::Intrinsic(f), TExprKind::Intrinsic(g)) if f == g => {}
            (
                TExprKind::Array { shape, atoms },
                TExprKind::Array {
                    shape: shape2,
                    atoms: atoms2,
                },
            ) if shape == shape2 && atoms.len() == atoms2.len() => {
                for (s, t) in atoms.iter().zip(atoms2) {
                    match (&s.kind, &t.kind) {
                        (TAtomKind::Bool(p), TAtomKind::Bool(q)) if p == q => {}
                        (TAtomKind::Int(p), TAtomKind::Int(q)) if p == q => {}
                        (TAtomKind::Float(p), TAtomKind::Float(q)) if p.to_bits() == q.to_bits() => {}
                        (
                            TAtomKind::Lambda { param: p, body },
                            TAtomKind::Lambda {
                                param: q,
                                body: body2,
                            },
                        ) => {
                            names.push((*p, *q));
                            stack.push((body, body2));
                        }
                        (
                            TAtomKind::Box { witness, body },
                            TAtomKind::Box {
                                witness: witness2,
                                body: body2,
                            },
                        ) if witness == witness2 => stack.push((body, body2)),
                        _ => return false,
                    }
                }
            }
            (
                TExprKind::Frame { shape, elems },
                TExprKind::Frame {
                    shape: shape2,
                    elems: elems2,
                },
            ) if shape == shape2 && elems.len() == elems2.len() => stack.extend(elems.iter().zip(elems2)),
            (
                TExprKind::App { func, arg, lifted },
                TExprKind::App {
                    func: func2,
                    arg: arg2,
                    lifted: lifted2,
                },
            ) if lifted == lifted2 => stack.extend([(&**func, &**func2), (arg, arg2)]),
            (
                TExprKind::TApp { func, arg },
                TExprKind::TApp {
                    func: func2,
                    arg: arg2,
                },
            ) if arg == arg2 => stack.push((func, func2)),
            (
                TExprKind::IApp { func, arg },
                TExprKind::IApp {
                    func: func2,
                    arg: arg2,
                },
            ) if arg == arg2 => stack.push((func, func2)),
            (
                TExprKind::Let { var, value, body },
                TExprKind::Let {
                    var: var2,
                    value: value2,
                    body: body2,
                },
            ) => {
                names.push((*var, *var2));
                stack.extend([(&**value, &**value2), (body, body2)]);
            }
            (TExprKind::Record(fields), TExprKind::Record(fields2)) if fields.len() == fields2.len() => {
                for ((f, e), (g, e2)) in fields.iter().zip(fields2) {
                    if f != g {
                        return false;
                    }
                    stack.push((e, e2));
                }
            }
            (
                TExprKind::Field { record, field },
                TExprKind::Field {
                    record: record2,
                    field: field2,
                },
            ) if field == field2 => stack.push((record, record2)),
            (
                TExprKind::If {
                    cond,
                    then,
                    otherwise,
                },
                TExprKind::If {
                    cond: cond2,
                    then: then2,
                    otherwise: otherwise2,
                },
            ) => stack.extend([(&**cond, &**cond2), (then, then2), (otherwise, otherwise2)]),
            _ => return false,
        }
    }
    true
}

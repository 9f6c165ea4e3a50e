//! Index vectors computed where they are read, and the checks that the
//! ranges of Int values prove cannot fail dropped.
//!
//! * [`computed_vectors`]: a buffer written once, by a loop `for i < n:
//!   buf[i] = f(i)` where `f` is a few operations on `i` and constants
//!   that cannot fail (an `iota`, `(mod (+ (iota [n]) 1) n)`), is not
//!   written at all: each read `buf[e]` is `f(e)`. An index vector is
//!   then computed in the gather that reads it, not stored and read back.
//! * [`drop_proven_checks`]: every Int variable and Int buffer is given
//!   the range of the values it can hold (a loop's index `[0, count)`, a
//!   buffer the join of what is stored into it, an input anything), by a
//!   fixed point over the whole program (flow-insensitive: each variable
//!   is declared once); an `if` whose condition the ranges decide keeps
//!   only the branch that runs. A gather's bound check by `(+ i k)`, `i`
//!   and `k` counted by loops, or by `(mod (- i 1) n)`, goes; one that
//!   can fail stays, and so does its message.

use crate::loops::{Expr, Output, Stmt, Var, Written};
use std::collections::{HashMap, HashSet};

/// The most operations of an atom computed at each read.
const MOST_OPS: usize = 8;

/// See the module's documentation: buffers computed where they are read
/// and checks the ranges decide dropped, in rounds (a vector computed
/// from one computed first, `(mod (+ (iota [n]) 1) n)` reading `iota`,
/// is found once that one is written in). `outputs` are the program's
/// (their buffers stay), `inputs` its input buffers (any value) and
/// `extents` its inputs' extents (any size).
pub(super) fn simplify(body: &mut Vec<Stmt>, outputs: &[Output], inputs: &[Var], extents: &HashSet<Var>) {
    let mut escaped = HashSet::new();
    for o in outputs {
        match &o.value {
            Written::Buffer(b) | Written::From { buf: b, .. } => {
                escaped.insert(*b);
            }
            Written::Scalar(_) => {}
        }
        let mut exprs: Vec<&Expr> = o.dims.iter().collect();
        if let Written::Scalar(e) | Written::From { offset: e, .. } = &o.value {
            exprs.push(e);
        }
        for e in exprs {
            e.each_var(&mut |v| {
                escaped.insert(v);
            });
        }
    }
    // Variables set, or named by an output, keep their `let`s.
    let mut kept = escaped.clone();
    let mut uses = Uses::default();
    uses.stmts(body, &mut escaped);
    kept.extend(uses.set.iter().copied());
    for _ in 0..ROUNDS {
        let ranges = ranges_of(body, inputs, extents);
        prune(body, &ranges);
        let mut found = HashMap::new();
        find_computed(body, &uses, &escaped, &mut found);
        let computed = readable(body, found, &ranges);
        if computed.is_empty() {
            return;
        }
        let mut copies = HashMap::new();
        rewrite_loads(body, &computed, &kept, &mut copies);
        propagate(body, &copies);
        remove_writes(body, &computed);
    }
}

/// A buffer computed where it is read: written once, in row-major order,
/// by a nest of loops `for i0: for i1 < c1: … buf[i0*s0 + i1*s1 + …] =
/// atom` (`s` the row-major strides of the extents `c`), its atom in
/// terms of the nest's indices.
struct Computed {
    indices: Vec<Var>,
    /// The inner loops' extents (`c1 …`), and every index's stride.
    extents: Vec<Expr>,
    strides: Vec<Expr>,
    atom: Expr,
    /// The buffers the atom reads.
    reads: HashSet<Var>,
}

/// The most loops of a nest that writes a computed buffer.
const MOST_LOOPS: usize = 4;

/// The row-major index of `indices` in extents `inner` (the extents of
/// all axes but the first), and each index's stride, folded as a view's
/// cells fold them.
pub(super) fn row_major(indices: &[Var], inner: &[Expr]) -> (Expr, Vec<Expr>) {
    let mut strides = vec![Expr::Int(1); indices.len()];
    for k in (0..indices.len().saturating_sub(1)).rev() {
        strides[k] = Expr::mul(strides[k + 1].clone(), inner[k].clone());
    }
    let index = indices.iter().zip(&strides).fold(Expr::Int(0), |at, (i, s)| {
        Expr::add(at, Expr::mul(Expr::Var(*i), s.clone()))
    });
    (index, strides)
}

/// The terms of a sum.
fn terms(e: &Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::Op { op: "+", args } if args.len() == 2 => args.iter().for_each(|a| terms(a, out)),
        _ => out.push(e.clone()),
    }
}

impl Computed {
    /// The atom read at `index`, if `index` names one the nest wrote: its
    /// terms grouped by the strides they are multiplied by (the rest, the
    /// last index's), and, given `ranges`, every index but the first
    /// proven within its extent.
    fn at(&self, index: &Expr, ranges: Option<&Ranges>) -> Option<Expr> {
        // (A buffer of one atom, stored outside any loop.)
        let Some(last) = self.indices.len().checked_sub(1) else {
            return Some(self.atom.clone());
        };
        if last == 0 {
            return Some(substitute(&self.atom, &[(self.indices[0], index)]));
        }
        for (k, s) in self.strides.iter().enumerate() {
            if self.strides[k + 1..].contains(s) {
                return None;
            }
        }
        let mut parts: Vec<Option<Expr>> = vec![None; self.indices.len()];
        let mut all = Vec::new();
        terms(index, &mut all);
        for t in all {
            // (A term whose constant factor is a multiple of a stride, an
            // index of a transposed view's wider axis, counts that
            // stride's index so many times: the ranges below decide.)
            let multiple = |c: &Expr, s: &Expr| match (c, s) {
                (Expr::Int(c), Expr::Int(s)) if *s > 1 && c % s == 0 => Some(Expr::Int(c / s)),
                _ => None,
            };
            let (k, part) = match &t {
                Expr::Op { op: "*", args } if args.len() == 2 => {
                    match self.strides[..last].iter().position(|s| *s == args[1]) {
                        Some(k) => (k, args[0].clone()),
                        None => match self.strides[..last]
                            .iter()
                            .enumerate()
                            .find_map(|(k, s)| Some((k, multiple(&args[1], s)?)))
                        {
                            Some((k, times)) => (k, Expr::mul(args[0].clone(), times)),
                            None => (last, t.clone()),
                        },
                    }
                }
                _ => (last, t.clone()),
            };
            parts[k] = Some(match parts[k].take() {
                Some(sum) => Expr::op("+", vec![sum, part]),
                None => part,
            });
        }
        let parts: Vec<Expr> = parts.into_iter().map(|p| p.unwrap_or(Expr::Int(0))).collect();
        if let Some(ranges) = ranges {
            for (part, c) in parts[1..].iter().zip(&self.extents) {
                let within = match (range(part, ranges), c) {
                    (Some((lo, hi)), Expr::Int(n)) => lo >= 0 && hi < *n as i128,
                    _ => false,
                };
                // (an index mod the extent, or a loop's index up to it)
                let counted = matches!(part, Expr::Op { op: "mod", args } if args.get(1) == Some(c))
                    || matches!(part, Expr::Var(v) if ranges.counts.get(v) == Some(c));
                if !within && !counted {
                    return None;
                }
            }
        }
        let by: Vec<(Var, &Expr)> = self.indices.iter().copied().zip(&parts).collect();
        Some(substitute(&self.atom, &by))
    }
}

/// How each buffer is written: its stores, and which variables are set.
#[derive(Default)]
struct Uses {
    stores: HashMap<Var, usize>,
    set: HashSet<Var>,
}

impl Uses {
    /// Counts the stores; a buffer swapped, given atoms, passed to a
    /// runtime call or named other than by a load or store escapes.
    fn stmts(&mut self, stmts: &mut [Stmt], escaped: &mut HashSet<Var>) {
        for s in stmts.iter_mut() {
            match s {
                Stmt::Store { buf, .. } => *self.stores.entry(*buf).or_default() += 1,
                Stmt::Swap { a, b } => {
                    escaped.insert(*a);
                    escaped.insert(*b);
                }
                Stmt::Data { buf, .. } => {
                    escaped.insert(*buf);
                }
                Stmt::Set { var, .. } => {
                    self.set.insert(*var);
                }
                _ => {}
            }
            let call = matches!(s, Stmt::Call { .. });
            for e in s.exprs_mut() {
                named(e, call, escaped);
            }
            for inner in s.bodies_mut() {
                self.stmts(inner, escaped);
            }
        }
    }
}

/// Records in `escaped` every buffer `e` names other than by a load (any
/// buffer a runtime call is given).
fn named(e: &Expr, call: bool, escaped: &mut HashSet<Var>) {
    match e {
        Expr::Var(v) => {
            escaped.insert(*v);
        }
        Expr::Addr { buf, index } => {
            escaped.insert(*buf);
            named(index, call, escaped);
        }
        Expr::Load { buf, index } => {
            if call {
                escaped.insert(*buf);
            }
            named(index, call, escaped)
        }
        Expr::Op { args, .. } => args.iter().for_each(|a| named(a, call, escaped)),
        Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) => {}
    }
}

/// The buffers that could be computed where they are read, at any depth
/// of `stmts`: each written once, by a nest of one or two loops at the
/// level it is allocated, its atom a few operations that cannot fail on
/// the nest's indices, variables that keep their value, and loads of
/// buffers nothing writes from the nest to the last statement that names
/// the buffer.
fn find_computed(stmts: &[Stmt], uses: &Uses, escaped: &HashSet<Var>, out: &mut HashMap<Var, Computed>) {
    let allocated: HashMap<Var, &Expr> = stmts
        .iter()
        .filter_map(|s| match s {
            Stmt::Alloc { buf, len, .. } => Some((*buf, len)),
            _ => None,
        })
        .collect();
    let single =
        |buf: &Var| allocated.contains_key(buf) && !escaped.contains(buf) && uses.stores.get(buf) == Some(&1);
    // The sizes of the buffers made so far: arithmetic on dimensions
    // already done without overflowing.
    let mut sized: Vec<&Expr> = Vec::new();
    // The `let`s so far (of variables never set).
    let mut lets: HashMap<Var, &Expr> = HashMap::new();
    for (p, s) in stmts.iter().enumerate() {
        if let Stmt::Alloc { len, .. } = s {
            let mut parts = vec![len];
            while let Some(e) = parts.pop() {
                if let Expr::Op {
                    op: "dim+" | "dim*" | "*" | "+",
                    args,
                } = e
                {
                    sized.push(e);
                    parts.extend(args);
                }
            }
        }
        if let Stmt::Let { var, value, .. } = s
            && !uses.set.contains(var)
        {
            lets.insert(*var, value);
        }
        let mut found = Vec::new();
        match s {
            Stmt::For { index: i, body, .. } => {
                stores(body, &[*i], &[], &HashMap::new(), &single, &uses.set, &mut found);
            }
            // A buffer of one atom (a scalar replicated, reshaped): a nest
            // of no loops.
            Stmt::Store {
                buf,
                index: Expr::Int(0),
                value,
            } if single(buf) && matches!(allocated.get(buf), Some(Expr::Int(1))) => found.push(Store {
                buf: *buf,
                indices: Vec::new(),
                extents: Vec::new(),
                value,
                lets: lets.clone(),
            }),
            _ => {}
        }
        if !found.is_empty() {
            let mut inside = HashSet::new();
            declared_in(std::slice::from_ref(s), &mut inside);
            let kept = |v: Var| !inside.contains(&v) && !uses.set.contains(&v);
            for Store {
                buf,
                indices,
                extents,
                value,
                lets,
            } in found
            {
                let mut nest = Nest {
                    indices: &indices,
                    lets: &lets,
                    kept: &kept,
                    sized: &sized,
                    ops: 0,
                    reads: HashSet::new(),
                };
                let Some(atom) = nest.atom(value) else {
                    continue;
                };
                let reads = nest.reads;
                // What the atom reads holds still until the buffer's last
                // reader; the nest reads the buffer nowhere.
                let last = (p..stmts.len())
                    .rev()
                    .find(|&q| mentions(&stmts[q], buf))
                    .unwrap_or(p);
                let still = reads
                    .iter()
                    .all(|r| *r != buf && !stmts[p..=last].iter().any(|q| writes(q, *r)));
                // An atom that loads is computed where it is read only if
                // each read computes it once (a copy made to be read
                // again and again, a transposition for a product, stays).
                // So too an atom that divides (a `mod` costs more than the
                // load it replaces, where a loop around reads it again).
                // An atom that calls a costly function (an `f.exp`), of a
                // buffer that stays in the cache, only where it is read at
                // one place: a softmax's row of exps, summed and then
                // divided by the sum, is computed once. (A buffer too big
                // for the cache costs as much to write and read back.)
                let cached = matches!(allocated.get(&buf), Some(Expr::Int(n)) if *n <= CACHED_ATOMS);
                let once = if cached && atom.calls_costly() {
                    read_once(&stmts[p + 1..], buf, 1)
                } else {
                    (reads.is_empty() && !divides(&atom)) || read_once(&stmts[p + 1..], buf, MOST_SITES)
                };
                let mut own = 0;
                each_load(std::slice::from_ref(s), &mut |b, _| own += usize::from(b == buf));
                if still && once && own == 0 {
                    let strides = row_major(&indices, &extents).1;
                    out.insert(
                        buf,
                        Computed {
                            indices,
                            extents,
                            strides,
                            atom,
                            reads,
                        },
                    );
                }
            }
        }
        for inner in s.bodies() {
            find_computed(inner, uses, escaped, out);
        }
    }
}

/// Whether `buf` is read at `most` places or fewer in `stmts`, each by a
/// load whose index depends on the index of every loop around it (no
/// loop reads one atom again).
fn read_once(stmts: &[Stmt], buf: Var, most: usize) -> bool {
    struct Walk {
        buf: Var,
        loops: Vec<Var>,
        /// The loops' indices each variable depends on.
        deps: HashMap<Var, HashSet<Var>>,
        sites: usize,
        again: bool,
    }
    impl Walk {
        fn deps_of(&self, e: &Expr) -> HashSet<Var> {
            let mut out = HashSet::new();
            e.each_var(&mut |v| {
                if let Some(d) = self.deps.get(&v) {
                    out.extend(d.iter().copied());
                }
            });
            out
        }
        fn expr(&mut self, e: &Expr) {
            let mut loads = Vec::new();
            each_load_in(e, &mut |b, index| {
                if b == self.buf {
                    loads.push(index.clone());
                }
            });
            for index in loads {
                self.sites += 1;
                let deps = self.deps_of(&index);
                self.again |= self.loops.iter().any(|l| !deps.contains(l));
            }
        }
        fn stmts(&mut self, stmts: &[Stmt]) {
            for s in stmts {
                for e in s.exprs() {
                    self.expr(e);
                }
                match s {
                    Stmt::Let { var, value, .. } | Stmt::Set { var, value } => {
                        let d = self.deps_of(value);
                        self.deps.entry(*var).or_default().extend(d);
                    }
                    _ => {}
                }
                if let Stmt::For { index, .. } | Stmt::Reduce { index, .. } = s {
                    self.deps.insert(*index, HashSet::from([*index]));
                    self.loops.push(*index);
                    for inner in s.bodies() {
                        self.stmts(inner);
                    }
                    self.loops.pop();
                } else {
                    for inner in s.bodies() {
                        self.stmts(inner);
                    }
                }
            }
        }
    }
    let mut w = Walk {
        buf,
        loops: Vec::new(),
        deps: HashMap::new(),
        sites: 0,
        again: false,
    };
    w.stmts(stmts);
    !w.again && w.sites <= most
}

/// The most places an atom that loads is computed at, in place of one
/// load each.
const MOST_SITES: usize = 4;

/// The most atoms of a buffer that stays in the cache while it is written
/// and read back (a row's worth: 64 KiB of floats).
const CACHED_ATOMS: i64 = 16384;

/// Of the buffers found, those whose every load names an atom the nest
/// wrote (see [`Computed::at`]) and whose atom reads no other buffer
/// found (that one is written in first, the next round).
fn readable(body: &[Stmt], mut found: HashMap<Var, Computed>, ranges: &Ranges) -> HashMap<Var, Computed> {
    let mut unread = HashSet::new();
    each_load(body, &mut |buf, index| {
        if let Some(c) = found.get(&buf)
            && c.at(index, Some(ranges)).is_none()
        {
            unread.insert(buf);
        }
    });
    found.retain(|b, _| !unread.contains(b));
    let candidates: HashSet<Var> = found.keys().copied().collect();
    found.retain(|_, c| c.reads.is_disjoint(&candidates));
    found
}

/// A store in row-major order in a nest, with the nest's indices and
/// inner extents and the `let`s before it.
struct Store<'a> {
    buf: Var,
    indices: Vec<Var>,
    extents: Vec<Expr>,
    value: &'a Expr,
    lets: HashMap<Var, &'a Expr>,
}

/// The stores of `body` (the body of the loops over `indices`, `extents`
/// the inner ones') into buffers `single` accepts, in row-major order, at
/// the nest's top or in loops of it, and the `let`s before each (of
/// variables never `set`).
fn stores<'a>(
    body: &'a [Stmt],
    indices: &[Var],
    extents: &[Expr],
    lets: &HashMap<Var, &'a Expr>,
    single: &dyn Fn(&Var) -> bool,
    set: &HashSet<Var>,
    found: &mut Vec<Store<'a>>,
) {
    let mut lets = lets.clone();
    let at = row_major(indices, extents).0;
    for t in body {
        match t {
            Stmt::Let { var, value, .. } if !set.contains(var) => {
                lets.insert(*var, value);
            }
            Stmt::Store { buf, index, value } if single(buf) && *index == at => found.push(Store {
                buf: *buf,
                indices: indices.to_vec(),
                extents: extents.to_vec(),
                value,
                lets: lets.clone(),
            }),
            Stmt::For {
                index, count, body, ..
            } if indices.len() < MOST_LOOPS => {
                let indices = [indices, &[*index]].concat();
                let extents = [extents, std::slice::from_ref(count)].concat();
                stores(body, &indices, &extents, &lets, single, set, found);
            }
            _ => {}
        }
    }
}

/// A nest's atom written in terms of its indices.
struct Nest<'a> {
    indices: &'a [Var],
    lets: &'a HashMap<Var, &'a Expr>,
    /// Whether a variable keeps its value after the nest.
    kept: &'a dyn Fn(Var) -> bool,
    /// Arithmetic on dimensions done before the nest (a buffer's size),
    /// which cannot fail where it is done again.
    sized: &'a [&'a Expr],
    ops: usize,
    reads: HashSet<Var>,
}

impl Nest<'_> {
    /// Whether every variable of `e` keeps its value after the nest.
    fn still(&self, e: &Expr) -> bool {
        let mut all = true;
        e.each_var(&mut |v| all &= (self.kept)(v));
        all
    }

    /// `e` with the nest's `let`s written in, if it is at most
    /// [`MOST_OPS`] operations that cannot fail (a division or `mod` only
    /// by a constant other than 0: by a variable it would cost more than
    /// the load it replaces) on the indices, variables that keep their
    /// value, constants, and loads.
    fn atom(&mut self, e: &Expr) -> Option<Expr> {
        match e {
            Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) => Some(e.clone()),
            Expr::Var(v) if self.indices.contains(v) || (self.kept)(*v) => Some(e.clone()),
            Expr::Var(v) => self.atom(self.lets.get(v)?),
            Expr::Op {
                op: "dim+" | "dim*", ..
            } if self.sized.contains(&e) && self.still(e) => {
                self.ops += 1;
                Some(e.clone())
            }
            Expr::Op { op, args } => {
                self.ops += 1;
                if !safe_op(op, args) || self.ops > MOST_OPS {
                    return None;
                }
                let args = args.iter().map(|a| self.atom(a)).collect::<Option<Vec<_>>>()?;
                Some(Expr::op(op, args))
            }
            Expr::Load { buf, index } => {
                // A buffer of the nest's own is gone after it.
                if !(self.kept)(*buf) {
                    return None;
                }
                self.ops += 1;
                self.reads.insert(*buf);
                Some(Expr::load(*buf, self.atom(index)?))
            }
            Expr::Addr { .. } => None,
        }
    }
}

/// The variables and buffers declared in `stmts`, at any depth.
pub(super) fn declared_in(stmts: &[Stmt], out: &mut HashSet<Var>) {
    Stmt::each(stmts, &mut |s| match s {
        Stmt::Let { var, .. } | Stmt::Alloc { buf: var, .. } | Stmt::Data { buf: var, .. } => {
            out.insert(*var);
        }
        Stmt::For { index, .. } => {
            out.insert(*index);
        }
        Stmt::Reduce { acc, index, .. } => {
            out.extend([*acc, *index]);
        }
        _ => {}
    });
}

/// Whether `s` (at any depth) names `v`.
pub(super) fn mentions(s: &Stmt, v: Var) -> bool {
    let mut found = false;
    Stmt::each(std::slice::from_ref(s), &mut |t| {
        match t {
            Stmt::Swap { a, b } => found |= *a == v || *b == v,
            Stmt::Store { buf, .. } | Stmt::Alloc { buf, .. } | Stmt::Data { buf, .. } => found |= *buf == v,
            _ => {}
        }
        for e in t.exprs() {
            e.each_var(&mut |x| found |= x == v);
        }
    });
    found
}

/// Whether `s` (at any depth) may write into the buffer `buf`.
fn writes(s: &Stmt, buf: Var) -> bool {
    let mut found = false;
    Stmt::each(std::slice::from_ref(s), &mut |t| match t {
        Stmt::Store { buf: b, .. } | Stmt::Data { buf: b, .. } => found |= *b == buf,
        Stmt::Swap { a, b } => found |= *a == buf || *b == buf,
        Stmt::Call { args, .. } => {
            let mut given = HashSet::new();
            args.iter().for_each(|a| named(a, true, &mut given));
            found |= given.contains(&buf);
        }
        _ => {}
    });
    found
}

/// `f` on every load in `stmts` (at any depth), by its buffer and index.
fn each_load(stmts: &[Stmt], f: &mut dyn FnMut(Var, &Expr)) {
    Stmt::each(stmts, &mut |s| {
        for e in s.exprs() {
            each_load_in(e, f);
        }
    });
}

/// `f` on every load in `e`.
pub(super) fn each_load_in(e: &Expr, f: &mut dyn FnMut(Var, &Expr)) {
    match e {
        Expr::Load { buf, index } => {
            f(*buf, index);
            each_load_in(index, f)
        }
        Expr::Addr { index, .. } => each_load_in(index, f),
        Expr::Op { args, .. } => args.iter().for_each(|a| each_load_in(a, f)),
        _ => {}
    }
}

/// `e` with each variable of `by` replaced by its expression (at once).
fn substitute(e: &Expr, by: &[(Var, &Expr)]) -> Expr {
    match e {
        Expr::Var(v) => by
            .iter()
            .find(|(x, _)| x == v)
            .map_or_else(|| e.clone(), |(_, to)| (*to).clone()),
        Expr::Load { buf, index } => Expr::load(*buf, substitute(index, by)),
        Expr::Op { op, args } => Expr::op(op, args.iter().map(|a| substitute(a, by)).collect()),
        _ => e.clone(),
    }
}

/// Every load of a computed buffer replaced by what it would read. A
/// `let` of such a load that is now a constant or a variable never set
/// (an `iota`'s atom: the loop's index) is recorded in `copies`.
fn rewrite_loads(
    stmts: &mut [Stmt],
    computed: &HashMap<Var, Computed>,
    kept: &HashSet<Var>,
    copies: &mut HashMap<Var, Expr>,
) {
    fn rewrite(e: &mut Expr, computed: &HashMap<Var, Computed>) {
        match e {
            Expr::Load { buf, index } => {
                rewrite(index, computed);
                if let Some(atom) = computed.get(buf).and_then(|c| c.at(index, None)) {
                    *e = atom;
                }
            }
            Expr::Addr { index, .. } => rewrite(index, computed),
            Expr::Op { args, .. } => args.iter_mut().for_each(|a| rewrite(a, computed)),
            _ => {}
        }
    }
    for s in stmts.iter_mut() {
        let read = matches!(s, Stmt::Let { value: Expr::Load { buf, .. }, .. } if computed.contains_key(buf));
        for e in s.exprs_mut() {
            rewrite(e, computed);
        }
        if let Stmt::Let { var, value, .. } = s
            && read
            && !kept.contains(var)
            && (matches!(value, Expr::Int(_) | Expr::Float(_) | Expr::Bool(_))
                || matches!(value, Expr::Var(v) if !kept.contains(v)))
        {
            copies.insert(*var, value.clone());
        }
        for inner in s.bodies_mut() {
            rewrite_loads(inner, computed, kept, copies);
        }
    }
}

/// Every variable of `copies` replaced by its value, its `let` removed.
fn propagate(stmts: &mut Vec<Stmt>, copies: &HashMap<Var, Expr>) {
    fn replace(e: &mut Expr, copies: &HashMap<Var, Expr>) {
        match e {
            Expr::Var(v) => {
                // (A copy of a copy: through to what the last one copies.)
                if let Some(by) = copies.get(v) {
                    *e = by.clone();
                    replace(e, copies);
                }
            }
            Expr::Load { index, .. } | Expr::Addr { index, .. } => replace(index, copies),
            Expr::Op { args, .. } => args.iter_mut().for_each(|a| replace(a, copies)),
            Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) => {}
        }
    }
    stmts.retain(|s| !matches!(s, Stmt::Let { var, .. } if copies.contains_key(var)));
    for s in stmts.iter_mut() {
        for e in s.exprs_mut() {
            replace(e, copies);
        }
        for inner in s.bodies_mut() {
            propagate(inner, copies);
        }
    }
}

/// The computed buffers' allocations and stores removed, then the `let`s
/// of the loops they were in that nothing reads any more (which cannot
/// fail), and the loops left empty. Whether anything was removed.
fn remove_writes(stmts: &mut Vec<Stmt>, computed: &HashMap<Var, Computed>) -> bool {
    let gone = |s: &Stmt| match s {
        Stmt::Alloc { buf, .. } | Stmt::Store { buf, .. } => computed.contains_key(buf),
        _ => false,
    };
    let mut removed = false;
    for s in stmts.iter_mut() {
        let mut inside = false;
        for inner in s.bodies_mut() {
            inside |= remove_writes(inner, computed);
        }
        if inside && let Stmt::For { body, .. } = s {
            drop_dead_lets(body);
        }
        removed |= inside;
    }
    let before = stmts.len();
    stmts.retain(|s| {
        !gone(s) && !matches!(s, Stmt::For { count, body, .. } if body.is_empty() && cannot_fail(count))
    });
    removed || stmts.len() != before
}

/// Whether `e` divides (`/` or `mod`) anywhere.
fn divides(e: &Expr) -> bool {
    match e {
        Expr::Op { op, args } => matches!(*op, "/" | "mod") || args.iter().any(divides),
        Expr::Load { index, .. } | Expr::Addr { index, .. } => divides(index),
        _ => false,
    }
}

/// Whether `e` cannot fail: no power, shift or checked dimension
/// arithmetic, a division only by a constant other than 0 and -1, a `mod`
/// only by a constant other than 0.
pub(super) fn cannot_fail(e: &Expr) -> bool {
    match e {
        Expr::Op { op, args } => safe_op(op, args) && args.iter().all(cannot_fail),
        Expr::Load { index, .. } | Expr::Addr { index, .. } => cannot_fail(index),
        _ => true,
    }
}

/// Whether the operation `op` on `args` cannot fail and gives the same
/// wherever it is computed (no random numbers).
fn safe_op(op: &str, args: &[Expr]) -> bool {
    match op {
        // (`/` not by -1 either: the least Int divided by -1 overflows.)
        "/" => matches!(args.get(1), Some(Expr::Int(d)) if *d != 0 && *d != -1),
        "mod" => matches!(args.get(1), Some(Expr::Int(d)) if *d != 0),
        "^" | "shl" | "shr" | "dim+" | "dim*" => false,
        "random.uniform" | "random.normal" | "random.int" => false,
        // Not the language's: an index brought back into range (a
        // rotation's, or a `mod` the ranges bound).
        "wrap" => true,
        _ => crate::c::scalar_arity(op).is_some(),
    }
}

/// The `let`s of `body` (not nested) that nothing reads and that cannot
/// fail, removed, last first.
fn drop_dead_lets(body: &mut Vec<Stmt>) {
    loop {
        let mut read = HashSet::new();
        reads(body, &mut read);
        let before = body.len();
        body.retain(
            |s| !matches!(s, Stmt::Let { var, value, .. } if !read.contains(var) && cannot_fail(value)),
        );
        if body.len() == before {
            return;
        }
    }
}

/// Every variable `stmts` read (a variable set counts as read).
fn reads(stmts: &mut [Stmt], read: &mut HashSet<Var>) {
    for s in stmts.iter_mut() {
        if let Stmt::Set { var, .. } = s {
            read.insert(*var);
        }
        for e in s.exprs_mut() {
            e.each_var(&mut |v| {
                read.insert(v);
            });
        }
        for inner in s.bodies_mut() {
            reads(inner, read);
        }
    }
}

// ---------------------------------------------------------------------------
// Ranges

/// The Int values a variable or buffer can hold: `None` none yet.
type Range = Option<(i128, i128)>;

const ANY: Range = Some((i64::MIN as i128, i64::MAX as i128));

/// What holds a range: a variable (a scalar or a whole buffer), or one
/// atom of a buffer stored only at constant places (the pair of indices
/// an `index2d` reads, built per cell).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Var(Var),
    Slot(Var, i64),
}

/// Where a variable's or buffer's values come from.
enum Source<'a> {
    Expr(&'a Expr),
    /// A loop's index, by its count.
    Index(&'a Expr),
    /// The other buffer of a swap.
    Buffer(Var),
    Any,
    /// An extent: not negative.
    Size,
}

/// Rounds of the fixed point before a variable still growing holds any
/// value.
const ROUNDS: usize = 8;

/// The range of every Int variable and buffer of `body`, `inputs` its
/// input buffers (any value) and `extents` its inputs' extents (any
/// size).
fn ranges_of(body: &[Stmt], inputs: &[Var], extents: &HashSet<Var>) -> Ranges {
    let mut sources: HashMap<Key, Vec<Source>> = HashMap::new();
    for v in inputs {
        sources.entry(Key::Var(*v)).or_default().push(Source::Any);
    }
    for v in extents {
        sources.entry(Key::Var(*v)).or_default().push(Source::Size);
    }
    let mut unslotted = HashSet::new();
    collect(body, &mut sources, &mut unslotted);
    // A buffer also written other than at a constant place has no slots.
    sources.retain(|k, _| !matches!(k, Key::Slot(b, _) if unslotted.contains(b)));
    let slotted: HashSet<Var> = sources
        .keys()
        .filter_map(|k| match k {
            Key::Slot(b, _) => Some(*b),
            Key::Var(_) => None,
        })
        .collect();
    let counts = sources
        .iter()
        .filter_map(|(k, from)| match (k, from.as_slice()) {
            (Key::Var(v), [Source::Index(count)]) => Some((*v, (*count).clone())),
            _ => None,
        })
        .collect();
    let mut moduli = HashMap::new();
    Stmt::each(body, &mut |s| {
        if let Stmt::Let {
            var,
            value: Expr::Op { op: "mod", args },
            ..
        } = s
            && let [_, n] = args.as_slice()
            && sources.get(&Key::Var(*var)).is_some_and(|from| from.len() == 1)
        {
            moduli.insert(*var, n.clone());
        }
    });
    let fixed = sources
        .iter()
        .filter_map(|(k, from)| match (k, from.as_slice()) {
            (Key::Var(v), [Source::Expr(_)]) => Some(*v),
            _ => None,
        })
        .collect();
    let mut ranges = Ranges {
        of: sources.keys().map(|k| (*k, None)).collect(),
        slotted,
        counts,
        moduli,
        fixed,
    };
    // In the order variables were made (operands before what reads them),
    // each new range used at once: straight-line code settles in one
    // round, a loop's state in a few before it is widened.
    let mut order: Vec<(&Key, &Vec<Source>)> = sources.iter().collect();
    order.sort_by_key(|(k, _)| match k {
        Key::Var(v) => (v.0, i64::MIN),
        Key::Slot(b, at) => (b.0, *at),
    });
    let mut widened = HashSet::new();
    let mut round = 0;
    loop {
        let mut changed = false;
        round += 1;
        for (v, from) in &order {
            if widened.contains(*v) {
                continue;
            }
            let r = from.iter().fold(None, |acc, s| {
                join(
                    acc,
                    match s {
                        Source::Expr(e) => range(e, &ranges),
                        Source::Index(count) => {
                            range(count, &ranges).and_then(|(_, hi)| (hi >= 1).then_some((0, hi - 1)))
                        }
                        Source::Buffer(b) => ranges.var(*b),
                        Source::Any => ANY,
                        Source::Size => Some((0, i64::MAX as i128)),
                    },
                )
            });
            if ranges.of.get(*v) != Some(&r) {
                changed = true;
                if round > ROUNDS {
                    widened.insert(**v);
                    ranges.of.insert(**v, ANY);
                } else {
                    ranges.of.insert(**v, r);
                }
            }
        }
        if !changed {
            break;
        }
    }
    ranges
}

/// Every variable's and buffer's sources in `stmts`, and each slot's of
/// a buffer stored at a constant place; `unslotted` the buffers written
/// otherwise.
fn collect<'a>(stmts: &'a [Stmt], sources: &mut HashMap<Key, Vec<Source<'a>>>, unslotted: &mut HashSet<Var>) {
    fn add<'a>(sources: &mut HashMap<Key, Vec<Source<'a>>>, v: Var, s: Source<'a>) {
        sources.entry(Key::Var(v)).or_default().push(s)
    }
    for s in stmts {
        match s {
            Stmt::Let { var, value, .. } | Stmt::Set { var, value } => {
                add(sources, *var, Source::Expr(value))
            }
            Stmt::Alloc { buf, .. } => {
                sources.entry(Key::Var(*buf)).or_default();
            }
            Stmt::Data { buf, atoms, .. } => {
                for (k, a) in atoms.iter().enumerate() {
                    add(sources, *buf, Source::Expr(a));
                    let slot = Key::Slot(*buf, k as i64);
                    sources.entry(slot).or_default().push(Source::Expr(a));
                }
            }
            Stmt::Store { buf, index, value } => {
                add(sources, *buf, Source::Expr(value));
                match index {
                    Expr::Int(k) => sources
                        .entry(Key::Slot(*buf, *k))
                        .or_default()
                        .push(Source::Expr(value)),
                    _ => {
                        unslotted.insert(*buf);
                    }
                }
            }
            Stmt::For { index, count, .. } => add(sources, *index, Source::Index(count)),
            Stmt::Reduce {
                acc, index, count, ..
            } => {
                add(sources, *index, Source::Index(count));
                add(sources, *acc, Source::Any);
            }
            Stmt::Swap { a, b } => {
                add(sources, *a, Source::Buffer(*b));
                add(sources, *b, Source::Buffer(*a));
                unslotted.extend([*a, *b]);
            }
            Stmt::Call { args, .. } => {
                // What a runtime call is given it may write.
                for a in args {
                    let mut escaped = HashSet::new();
                    named(a, true, &mut escaped);
                    for v in escaped {
                        add(sources, v, Source::Any);
                        unslotted.insert(v);
                    }
                }
            }
            Stmt::If { .. } | Stmt::DoWhile { .. } | Stmt::Fail { .. } => {}
        }
        for inner in s.bodies() {
            collect(inner, sources, unslotted);
        }
    }
}

/// The ranges found so far.
struct Ranges {
    of: HashMap<Key, Range>,
    /// The buffers whose slots have ranges of their own.
    slotted: HashSet<Var>,
    /// Each loop's index by its count (0 … count-1, where the count is
    /// known only at run time too).
    counts: HashMap<Var, Expr>,
    /// Each scalar made once as `(mod a n)` by its `n` (so within 0 …
    /// n-1, a floor modulus by an `n` that is not 0, or the program has
    /// failed: an index reduced by a length is within it).
    moduli: HashMap<Var, Expr>,
    /// The scalars given a value once (a `let` never `set`).
    fixed: HashSet<Var>,
}

impl Ranges {
    /// A variable's range, or a whole buffer's (any, for what has no
    /// sources: not an Int the analysis follows).
    fn var(&self, v: Var) -> Range {
        self.of.get(&Key::Var(v)).copied().unwrap_or(ANY)
    }

    /// What a load of `buf` at `index` reads.
    fn load(&self, buf: Var, index: &Expr) -> Range {
        match index {
            Expr::Int(k) if self.slotted.contains(&buf) => {
                self.of.get(&Key::Slot(buf, *k)).copied().unwrap_or(self.var(buf))
            }
            _ => self.var(buf),
        }
    }
}

fn join(a: Range, b: Range) -> Range {
    match (a, b) {
        (None, r) | (r, None) => r,
        (Some((a0, a1)), Some((b0, b1))) => Some((a0.min(b0), a1.max(b1))),
    }
}

/// A range of 64-bit values: outside them, arithmetic wraps (any value).
fn fits(lo: i128, hi: i128) -> Range {
    if lo < i64::MIN as i128 || hi > i64::MAX as i128 {
        ANY
    } else {
        Some((lo, hi))
    }
}

/// The lowest and highest of `f` at the corners of two ranges.
fn corners(a: (i128, i128), b: (i128, i128), f: impl Fn(i128, i128) -> i128) -> Range {
    let all = [f(a.0, b.0), f(a.0, b.1), f(a.1, b.0), f(a.1, b.1)];
    let lo = all.iter().copied().min().unwrap_or(i128::MIN);
    let hi = all.iter().copied().max().unwrap_or(i128::MAX);
    fits(lo, hi)
}

/// The values an Int expression can take (any, for what is not Int or
/// not followed).
fn range(e: &Expr, ranges: &Ranges) -> Range {
    match e {
        Expr::Int(n) => Some((*n as i128, *n as i128)),
        Expr::Var(v) => ranges.var(*v),
        Expr::Load { buf, index } => ranges.load(*buf, index),
        Expr::Op { op: "+", args }
            if let [a, b] = args.as_slice()
                && let Some(r) = in_part(a, b, ranges).or_else(|| in_part(b, a, ranges)) =>
        {
            Some(r)
        }
        Expr::Op { op, args } => {
            let r: Vec<Range> = args.iter().map(|a| range(a, ranges)).collect();
            if r.iter().any(Option::is_none) {
                return None;
            }
            let r: Vec<(i128, i128)> = r.into_iter().flatten().collect();
            match (*op, r.as_slice()) {
                ("+" | "dim+", [a, b]) => fits(a.0 + b.0, a.1 + b.1),
                ("-", [a, b]) => fits(a.0 - b.1, a.1 - b.0),
                ("*" | "dim*", [a, b]) => corners(*a, *b, |x, y| x * y),
                ("/", [a, b]) if b.0 > 0 => corners(*a, *b, |x, y| x.div_euclid(y)),
                // (By 0 the program has failed: a divisor in [0, hi] is
                // one in [1, hi] where the result is used.)
                ("mod", [a, b]) if b.0 >= 0 && b.1 > 0 => {
                    let b = (b.0.max(1), b.1);
                    if a.0 >= 0 && a.1 < b.0 {
                        Some(*a)
                    } else if a.0 >= 0 {
                        Some((0, a.1.min(b.1 - 1)))
                    } else {
                        Some((0, b.1 - 1))
                    }
                }
                ("max", [a, b]) => Some((a.0.max(b.0), a.1.max(b.1))),
                ("min", [a, b]) => Some((a.0.min(b.0), a.1.min(b.1))),
                ("neg", [a]) => fits(-a.1, -a.0),
                ("clip", [lo, hi, x]) => Some((x.0.max(lo.0).min(hi.0), x.1.max(lo.1).min(hi.1))),
                ("wrap", [j, d]) if d.0 > 0 => {
                    // j if j < d, else j - d (then at least 0).
                    let kept = (j.0 <= j.1.min(d.1 - 1)).then_some((j.0, j.1.min(d.1 - 1)));
                    let wrapped = (j.1 >= d.0).then_some(((j.0 - d.1).max(0), j.1 - d.0));
                    join(kept, wrapped).map_or(ANY, |(lo, hi)| fits(lo, hi))
                }
                ("bool->i", _) => Some((0, 1)),
                ("signum", _) => Some((-1, 1)),
                ("popc", _) => Some((0, 64)),
                ("bit-and", [a, b]) if a.0 >= 0 || b.0 >= 0 => {
                    let hi = match (a.0 >= 0, b.0 >= 0) {
                        (true, true) => a.1.min(b.1),
                        (true, false) => a.1,
                        _ => b.1,
                    };
                    Some((0, hi))
                }
                _ => ANY,
            }
        }
        Expr::Float(_) | Expr::Bool(_) | Expr::Addr { .. } => ANY,
    }
}

/// The range of `lo + i`, `i` the index of a loop over `(- hi lo)`
/// items (a part of a vector: its item `i`), where both bounds have
/// ranges: from `lo`'s least to below `hi`'s greatest (so a part's item
/// of `n` items, parts bounded by `(/ (* p n) parts)`, is below `n`).
fn in_part(lo: &Expr, i: &Expr, ranges: &Ranges) -> Option<(i128, i128)> {
    let Expr::Var(i) = i else {
        return None;
    };
    let Some(Expr::Op { op: "-", args }) = ranges.counts.get(i) else {
        return None;
    };
    let [hi, base] = args.as_slice() else {
        return None;
    };
    // (`lo` the same where the count was taken as where it is added.)
    if base != lo || !matches!(lo, Expr::Int(_)) && !matches!(lo, Expr::Var(v) if ranges.fixed.contains(v)) {
        return None;
    }
    let (least, _) = range(lo, ranges)?;
    let (_, most) = range(hi, ranges)?;
    (least < most).then_some((least, most - 1))
}

/// Whether a condition holds (`Some`) whatever the values in their
/// ranges, where the ranges decide it.
fn truth(e: &Expr, ranges: &Ranges) -> Option<bool> {
    match e {
        Expr::Bool(b) => Some(*b),
        Expr::Op { op: "not", args } if args.len() == 1 => truth(&args[0], ranges).map(|b| !b),
        Expr::Op { op: "or", args } if args.len() == 2 => {
            match (truth(&args[0], ranges), truth(&args[1], ranges)) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            }
        }
        Expr::Op { op: "and", args } if args.len() == 2 => {
            match (truth(&args[0], ranges), truth(&args[1], ranges)) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            }
        }
        // `(mod a n)` against `n`: below it.
        Expr::Op {
            op: op @ ("<" | ">="),
            args,
        } if matches!(args.as_slice(), [Expr::Var(x), n] if ranges.moduli.get(x) == Some(n)) => {
            Some(*op == "<")
        }
        Expr::Op { op, args } if args.len() == 2 && matches!(*op, "<" | "<=" | ">" | ">=" | "==" | "!=") => {
            let (a0, a1) = range(&args[0], ranges)?;
            let (b0, b1) = range(&args[1], ranges)?;
            let less = |x1: i128, y0: i128, x0: i128, y1: i128| {
                if x1 < y0 {
                    Some(true)
                } else if x0 >= y1 {
                    Some(false)
                } else {
                    None
                }
            };
            match *op {
                "<" => less(a1, b0, a0, b1),
                ">=" => less(a1, b0, a0, b1).map(|b| !b),
                ">" => less(b1, a0, b0, a1),
                "<=" => less(b1, a0, b0, a1).map(|b| !b),
                "==" | "!=" => {
                    let equal = if a0 == a1 && b0 == b1 && a0 == b0 {
                        Some(true)
                    } else if a1 < b0 || b1 < a0 {
                        Some(false)
                    } else {
                        None
                    };
                    equal.map(|b| b == (*op == "=="))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// Every `if` the ranges decide replaced by the branch that runs, and
/// every `mod` they bound made a wrap ([`mod_as_wrap`]).
fn prune(stmts: &mut Vec<Stmt>, ranges: &Ranges) {
    let mut out = Vec::with_capacity(stmts.len());
    for mut s in std::mem::take(stmts) {
        for inner in s.bodies_mut() {
            prune(inner, ranges);
        }
        for e in s.exprs_mut() {
            mod_as_wrap(e, ranges);
        }
        match s {
            Stmt::If {
                cond,
                then,
                otherwise,
            } => match truth(&cond, ranges) {
                Some(true) => out.extend(then),
                Some(false) => out.extend(otherwise),
                None => out.push(Stmt::If {
                    cond,
                    then,
                    otherwise,
                }),
            },
            s => out.push(s),
        }
    }
    *stmts = out;
}

/// Every `mod` of `e` by a divisor `d` at least 1 whose operand `x` the
/// ranges keep within `[-d, 2d)` written without dividing: `x` within
/// `[0, d)`, `(wrap x d)` within `[0, 2d)` (a compare and a subtraction),
/// `(wrap (+ x d) d)` within `[-d, d)`. An index vector `(mod (- i 1)
/// n)` then costs less than the load it saves (computed where read), and
/// a rotation's wrap can be taken out of its loop (`wraps.rs`).
fn mod_as_wrap(e: &mut Expr, ranges: &Ranges) {
    match e {
        Expr::Op { args, .. } => args.iter_mut().for_each(|a| mod_as_wrap(a, ranges)),
        Expr::Load { index, .. } | Expr::Addr { index, .. } => mod_as_wrap(index, ranges),
        Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) | Expr::Var(_) => {}
    }
    let Expr::Op { op: "mod", args } = e else {
        return;
    };
    let [x, d] = args.as_slice() else {
        return;
    };
    let (Some((lo, hi)), Some((least, _))) = (range(x, ranges), range(d, ranges)) else {
        return;
    };
    if least < 1 || !cannot_fail(d) {
        return;
    }
    let (x, d) = (x.clone(), d.clone());
    if lo >= 0 && hi < least {
        *e = x;
    } else if lo >= 0 && hi < 2 * least {
        *e = Expr::op("wrap", vec![x, d]);
    } else if lo >= -least && hi < least {
        *e = Expr::op("wrap", vec![Expr::add(x, d.clone()), d]);
    }
}

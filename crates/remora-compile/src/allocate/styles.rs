//! Rules for the ways people write whole-array programs (the style
//! matrix): `count` of a map computed where it is read (no array of
//! flags), and a reduction lifted over a small independent axis turned
//! inside out (a comparison matrix counted at once: one pass over the
//! items, every lane's accumulator beside the others, no pass per lane).

use super::*;

/// How many items a block of a compaction's part holds (see
/// [`Alloc::kept_in_blocks`]).
const BLOCK: i64 = 256;

impl<'m> Alloc<'m> {
    pub(super) fn styles(
        &mut self,
        name: &'static str,
        args: &[Val<'m>],
        body: &mut Vec<Stmt>,
    ) -> Option<Res<Val<'m>>> {
        match (name, args) {
            // `count` of a delayed map or a rotation (or, where no loop
            // encloses it, of a vector): an Int sum (in any order) of the
            // flags, each computed where it is added.
            ("count", [xs @ (Val::Delayed(_) | Val::Rotated(_))]) => Some(self.count_fused(xs, body)),
            ("count", [xs @ Val::Array(v)]) if self.loop_depth == 0 && v.dims.len() == 1 => {
                Some(self.count_fused(xs, body))
            }
            // `filter` of a vector where no loop encloses it: in parts on
            // the threads (its flags, a map that cannot fail, computed
            // where they are read: no array of flags).
            ("filter", [flags @ (Val::Array(_) | Val::Delayed(_)), xs])
                if self.loop_depth == 0 && self.filters_a_vector(args) =>
            {
                Some(self.force(xs.clone(), body).and_then(|xs| match xs {
                    Val::Array(xs) => self.filter_in_parts(flags, &xs, body),
                    _ => unsupported("filter of these arguments"),
                }))
            }
            _ => None,
        }
    }

    /// The kept items of `xs` in order: each part of the items counts its
    /// kept ones (on the threads), the counts' running sums give each part
    /// its first place, then each part copies its kept items there (on the
    /// threads).
    fn filter_in_parts(&mut self, flags: &Val<'m>, xs: &View, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        const PARTS: i64 = 64;
        let n = xs.dims[0].clone();
        // The flag at `i`, its code into `each` (two loops deep).
        let flag = |a: &mut Self, i: Expr, each: &mut Vec<Stmt>| -> Res<Expr> {
            a.loop_depth += 2;
            let f = a.element(flags, &[i], each);
            a.loop_depth -= 2;
            f
        };
        // Each part's first place, and after them the count (the last
        // part's end).
        let starts = self.fresh("starts");
        body.push(Stmt::Alloc {
            buf: starts,
            elem: Elem::Int,
            len: Expr::Int(PARTS + 1),
        });
        let bound = |p: Expr| Expr::op("/", vec![Expr::op("*", vec![p, n.clone()]), Expr::Int(PARTS)]);
        let part_range = |a: &mut Self, p: Var| {
            let (lo, hi) = (a.fresh("lo"), a.fresh("hi"));
            (lo, hi, part_bounds(lo, hi, p, bound).to_vec())
        };
        // Each part's count.
        let (p, i, c) = (self.fresh("part"), self.fresh("i"), self.fresh("kept"));
        let (lo, hi, mut count_part) = part_range(self, p);
        count_part.push(Stmt::Let {
            var: c,
            elem: Elem::Int,
            value: Expr::Int(0),
        });
        let mut each = Vec::new();
        let f = flag(self, Expr::add(Expr::Var(lo), Expr::Var(i)), &mut each)?;
        each.push(Stmt::Set {
            var: c,
            value: Expr::op("+", vec![Expr::Var(c), Expr::op("bool->i", vec![f])]),
        });
        count_part.push(Stmt::For {
            index: i,
            count: Expr::op("-", vec![Expr::Var(hi), Expr::Var(lo)]),
            parallel: false,
            body: each,
        });
        count_part.push(Stmt::Store {
            buf: starts,
            index: Expr::Var(p),
            value: Expr::Var(c),
        });
        body.push(Stmt::For {
            index: p,
            count: Expr::Int(PARTS),
            parallel: true,
            body: count_part,
        });
        // The running sums: each part's first place, and the count.
        let (kept, q, cq) = (self.fresh("kept"), self.fresh("part"), self.fresh("c"));
        body.push(Stmt::Let {
            var: kept,
            elem: Elem::Int,
            value: Expr::Int(0),
        });
        body.push(Stmt::For {
            index: q,
            count: Expr::Int(PARTS),
            parallel: false,
            body: vec![
                Stmt::Let {
                    var: cq,
                    elem: Elem::Int,
                    value: Expr::load(starts, Expr::Var(q)),
                },
                Stmt::Store {
                    buf: starts,
                    index: Expr::Var(q),
                    value: Expr::Var(kept),
                },
                Stmt::Set {
                    var: kept,
                    value: Expr::op("+", vec![Expr::Var(kept), Expr::Var(cq)]),
                },
            ],
        });
        body.push(Stmt::Store {
            buf: starts,
            index: Expr::Int(PARTS),
            value: Expr::Var(kept),
        });
        let dest = self.fresh("kept");
        let cell_atoms = small_cells(xs).unwrap_or(1);
        body.push(Stmt::Alloc {
            buf: dest,
            elem: xs.elem,
            len: Expr::mul(Expr::Var(kept), Expr::Int(cell_atoms)),
        });
        let mut dims = xs.dims.clone();
        dims[0] = Expr::Var(kept);
        let view = View::contiguous(dest, xs.elem, dims);
        // Each part's kept items, from its first place to the next part's.
        let (p, at, end) = (self.fresh("part"), self.fresh("at"), self.fresh("end"));
        let (lo, hi, mut copy_part) = part_range(self, p);
        copy_part.push(Stmt::Let {
            var: at,
            elem: Elem::Int,
            value: Expr::load(starts, Expr::Var(p)),
        });
        copy_part.push(Stmt::Let {
            var: end,
            elem: Elem::Int,
            value: Expr::load(starts, Expr::add(Expr::Var(p), Expr::Int(1))),
        });
        let item = |a: &mut Self, k: Var, _, each: &mut Vec<Stmt>| -> Res<(Expr, Vec<Stmt>)> {
            let f = flag(a, Expr::Var(k), each)?;
            let item = xs.cell(&[Expr::Var(k)]);
            if item.dims.is_empty() {
                let store = Stmt::Store {
                    buf: dest,
                    index: Expr::Var(at),
                    value: item.load(),
                };
                return Ok((f, vec![store]));
            }
            // A cell: its atoms copied (loops the C compiler unrolls).
            let mut write = Vec::new();
            a.loop_depth += 3;
            let r = a.copy(cell_val(item), &view.cell(&[Expr::Var(at)]), &mut write);
            a.loop_depth -= 3;
            r.map(|()| (f, write))
        };
        let fits = |many: Expr| Expr::op("<=", vec![Expr::add(Expr::Var(at), many), Expr::Var(end)]);
        copy_part.push(self.kept_in_blocks(at, (lo, hi), Some(&fits), item)?);
        body.push(Stmt::For {
            index: p,
            count: Expr::Int(PARTS),
            parallel: true,
            body: copy_part,
        });
        Ok(Val::Box {
            witness: IndexVal::Dim(Expr::Var(kept)),
            payload: std::boxed::Box::new(Val::Array(view)),
        })
    }

    /// A part's items `lo` … `hi - 1`, each kept one (its flag set)
    /// written at place `at`, which then moves on: `item(k, branchless)`
    /// gives item `k`'s flag (its code into the item's statements) and
    /// the statements that write it at `at`. Where `fits` is given, in
    /// blocks of [`BLOCK`] items: a block that `fits` (of `many` items,
    /// every place it may write the part's own: `at` at least `many`
    /// before the part's last place) writes every item at `at` (an atom,
    /// that cannot fail: `branchless`) and moves `at` on by its flag, no
    /// branch on the flag (a place written so for an item not kept is
    /// the next kept item's: 10M Floats, half kept at random, 42 ms of CPU
    /// in a branch on the flag, 5 ms so); the others (the part's last
    /// kept items) test each flag.
    pub(super) fn kept_in_blocks(
        &mut self,
        at: Var,
        (lo, hi): (Var, Var),
        fits: Option<&dyn Fn(Expr) -> Expr>,
        mut item: impl FnMut(&mut Self, Var, bool, &mut Vec<Stmt>) -> Res<(Expr, Vec<Stmt>)>,
    ) -> Res<Stmt> {
        let int = |var, value| Stmt::Let {
            var,
            elem: Elem::Int,
            value,
        };
        // The items `from` … `from + count - 1`.
        let mut items = |a: &mut Self, from: Expr, count: Expr, branchless: bool| -> Res<Stmt> {
            let (i, k) = (a.fresh("i"), a.fresh("k"));
            let mut each = vec![int(k, Expr::add(from, Expr::Var(i)))];
            let (f, mut write) = item(a, k, branchless, &mut each)?;
            let next = |by: Expr| Stmt::Set {
                var: at,
                value: Expr::op("+", vec![Expr::Var(at), by]),
            };
            if branchless {
                each.append(&mut write);
                each.push(next(Expr::op("bool->i", vec![f])));
            } else {
                write.push(next(Expr::Int(1)));
                each.push(Stmt::If {
                    cond: f,
                    then: write,
                    otherwise: Vec::new(),
                });
            }
            Ok(Stmt::For {
                index: i,
                count,
                parallel: false,
                body: each,
            })
        };
        let size = Expr::op("-", vec![Expr::Var(hi), Expr::Var(lo)]);
        let Some(fits) = fits else {
            return items(self, Expr::Var(lo), size, false);
        };
        let (block, from, many) = (self.fresh("block"), self.fresh("from"), self.fresh("many"));
        self.loop_depth += 1;
        let (all, tested) = (
            items(self, Expr::Var(from), Expr::Var(many), true),
            items(self, Expr::Var(from), Expr::Var(many), false),
        );
        self.loop_depth -= 1;
        Ok(Stmt::For {
            index: block,
            count: Expr::op("/", vec![Expr::add(size, Expr::Int(BLOCK - 1)), Expr::Int(BLOCK)]),
            parallel: false,
            body: vec![
                int(
                    from,
                    Expr::add(Expr::Var(lo), Expr::mul(Expr::Var(block), Expr::Int(BLOCK))),
                ),
                int(
                    many,
                    Expr::op(
                        "min",
                        vec![
                            Expr::Int(BLOCK),
                            Expr::op("-", vec![Expr::Var(hi), Expr::Var(from)]),
                        ],
                    ),
                ),
                Stmt::If {
                    cond: fits(Expr::Var(many)),
                    then: vec![all?],
                    otherwise: vec![tested?],
                },
            ],
        })
    }

    /// Whether `filter` of `args` is of a vector (an array or a map) by
    /// flags in an array or a map that cannot fail (then delayed: each
    /// flag computed where it is read, twice).
    pub(super) fn filters_a_vector(&self, args: &[Val<'m>]) -> bool {
        let vector = |v: &Val<'m>| match v {
            Val::Array(v) => v.dims.len() == 1,
            Val::Delayed(d) => d.dims.len() == 1 && !d.transposed,
            _ => false,
        };
        // The items: atoms, or small cells of a size known when compiling
        // (the `[start count]` pairs of a restarting count).
        let items = |v: &Val<'m>| vector(v) || matches!(v, Val::Array(v) if small_cells(v).is_some());
        match args {
            [Val::Delayed(d), xs] => {
                vector(&args[0]) && d.elem == Elem::Bool && cannot_fail(d.map) && items(xs)
            }
            [Val::Array(_), xs] => vector(&args[0]) && items(xs),
            _ => false,
        }
    }

    fn count_fused(&mut self, xs: &Val<'m>, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        // A map whose cells could fail, over cells that may have no atoms
        // (whose `let`s would then not run): computed whole first, so that
        // its error is raised (as `reduce` does).
        let forced;
        let xs = match xs {
            Val::Delayed(d)
                if !cannot_fail(d.map)
                    && !d
                        .dims
                        .get(1..)
                        .unwrap_or_default()
                        .iter()
                        .all(|n| matches!(n, Expr::Int(k) if *k > 0)) =>
            {
                forced = self.force(xs.clone(), body)?;
                &forced
            }
            xs => xs,
        };
        let mut inner = Vec::new();
        let flags = self.reduce_atoms(xs, "or", Some(Expr::Bool(false)), Order::Left, &mut inner)?;
        // The reduction of the flags made, its combination made a count.
        let (Val::Scalar(_, Expr::Var(acc)), Some(Stmt::Reduce { .. })) = (&flags, inner.last()) else {
            return unsupported("count of this map");
        };
        let acc = *acc;
        for s in &mut inner {
            if let Stmt::Reduce {
                acc: a,
                elem,
                op,
                seed,
                order,
                item,
                ..
            } = s
                && *a == acc
            {
                *elem = Elem::Int;
                *op = "+";
                *seed = Some(Expr::Int(0));
                *order = Order::Tree;
                *item = Expr::op("bool->i", vec![item.clone()]);
            }
        }
        body.extend(inner);
        Ok(Val::Scalar(Elem::Int, Expr::Var(acc)))
    }
}

/// The most lanes a reduction turned inside out keeps (their accumulators
/// stay in the first cache).
const MOST_LANES: i64 = 1024;
/// How many parts of the items a turned reduction at the top splits into
/// (one accumulator row each, run on the threads, added at the end).
const PARTS: i64 = 16;

/// Every loop in `body` (at any depth) of the form
/// `for b < M { let …; reduce acc + from seed over k < K {let …} item; store out[off + b] acc }`
/// — an Int sum lifted over a small axis `b` whose items do not move with
/// it (a comparison matrix counted: `(count (== bins b))` lifted over the
/// bins) — turned inside out: one pass over the `k`, each adding to all
/// `M` accumulators. Int `+` wraps, so any order gives the same bits; the
/// `let`s are scalar steps that cannot fail, so running them for other
/// (but the same) pairs changes nothing.
///
/// Where each lane's item is `(bool->i (== key lane))` with the key the
/// same for every lane and the lane its own number (`b`, or an `iota`'s
/// atom at `b`), the lanes' pass is a histogram: the one lane the key
/// names (if any) counts one.
pub(super) fn turn_lifted_sums(body: &mut Vec<Stmt>, names: &mut Vec<String>) {
    let mut iotas = Vec::new();
    find_iotas(body, &mut iotas);
    iotas.retain(|&v| is_only_iota(body, v));
    turn_in(body, names, &iotas);
}

fn turn_in(body: &mut Vec<Stmt>, names: &mut Vec<String>, iotas: &[Var]) {
    let mut out = Vec::with_capacity(body.len());
    for mut s in body.drain(..) {
        if let Some(turned) = turned(&s, names, iotas) {
            out.extend(turned);
            continue;
        }
        for inner in s.bodies_mut() {
            turn_in(inner, names, iotas);
        }
        out.push(s);
    }
    *body = out;
}

/// The Int buffers filled as `for i < len: buf[i] = i` (an `iota`), at
/// any depth: the candidates.
fn find_iotas(body: &[Stmt], found: &mut Vec<Var>) {
    for (n, s) in body.iter().enumerate() {
        match s {
            Stmt::Alloc {
                buf,
                elem: Elem::Int,
                len,
            } => {
                if let Some(Stmt::For {
                    index,
                    count,
                    body: fill,
                    ..
                }) = body.get(n + 1)
                    && count == len
                    && fill.as_slice()
                        == [Stmt::Store {
                            buf: *buf,
                            index: Expr::Var(*index),
                            value: Expr::Var(*index),
                        }]
                {
                    found.push(*buf);
                }
            }
            Stmt::For { body, .. } | Stmt::DoWhile { body, .. } | Stmt::Reduce { body, .. } => {
                find_iotas(body, found)
            }
            Stmt::If { then, otherwise, .. } => {
                find_iotas(then, found);
                find_iotas(otherwise, found);
            }
            _ => {}
        }
    }
}

/// Whether `buf` is written only by its filling loop: one store in the
/// whole program, never swapped, passed to a runtime call or given atoms.
fn is_only_iota(body: &[Stmt], buf: Var) -> bool {
    fn writes(body: &[Stmt], buf: Var, n: &mut usize) -> bool {
        let addr = |e: &Expr| {
            let mut found = false;
            fn walk(e: &Expr, buf: Var, found: &mut bool) {
                match e {
                    Expr::Addr { buf: b, index } => {
                        *found |= *b == buf;
                        walk(index, buf, found)
                    }
                    Expr::Load { index, .. } => walk(index, buf, found),
                    Expr::Op { args, .. } => args.iter().for_each(|a| walk(a, buf, found)),
                    _ => {}
                }
            }
            walk(e, buf, &mut found);
            found
        };
        body.iter().all(|s| match s {
            Stmt::Store { buf: b, .. } => {
                *n += usize::from(*b == buf);
                true
            }
            Stmt::Swap { a, b } => *a != buf && *b != buf,
            Stmt::Data { buf: b, .. } => *b != buf,
            Stmt::Call { args, .. } => !args.iter().any(addr),
            Stmt::For { body, .. } | Stmt::DoWhile { body, .. } => writes(body, buf, n),
            Stmt::Reduce { body, .. } => writes(body, buf, n),
            Stmt::If { then, otherwise, .. } => writes(then, buf, n) && writes(otherwise, buf, n),
            _ => true,
        })
    }
    let mut n = 0;
    writes(body, buf, &mut n) && n == 1
}

/// The key of a lane's item `(bool->i (== key lane))` (either way round),
/// where the key does not move with the lane and the lane is the lane's
/// number `b` (or a `let` of an `iota`'s atom at `b`).
fn counted_key(item: &Expr, per_pair: &[Stmt], b: Var, moving: &[Var], iotas: &[Var]) -> Option<Expr> {
    let Expr::Op { op: "bool->i", args } = item else {
        return None;
    };
    let [Expr::Op { op: "==", args }] = args.as_slice() else {
        return None;
    };
    let [x, y] = args.as_slice() else {
        return None;
    };
    let is_lane = |e: &Expr| match e {
        Expr::Var(v) if *v == b => true,
        Expr::Var(v) => per_pair.iter().any(|s| {
            matches!(s, Stmt::Let { var, value: Expr::Load { buf, index }, .. }
                if var == v && iotas.contains(buf) && **index == Expr::Var(b))
        }),
        Expr::Load { buf, index } => iotas.contains(buf) && **index == Expr::Var(b),
        _ => false,
    };
    if is_lane(y) && !mentions(x, moving) {
        Some(x.clone())
    } else if is_lane(x) && !mentions(y, moving) {
        Some(y.clone())
    } else {
        None
    }
}

pub(super) fn fresh(names: &mut Vec<String>, name: &str) -> Var {
    let v = Var(names.len() as u32);
    names.push(name.to_string());
    v
}

/// Whether `e` cannot fail (no division, power, shift or checked
/// dimension arithmetic).
fn total(e: &Expr) -> bool {
    match e {
        Expr::Op { op, args } => {
            !matches!(*op, "/" | "mod" | "^" | "shl" | "shr" | "dim+" | "dim*" | "wrap")
                && args.iter().all(total)
        }
        Expr::Load { index, .. } | Expr::Addr { index, .. } => total(index),
        _ => true,
    }
}

fn mentions(e: &Expr, vars: &[Var]) -> bool {
    let mut found = false;
    e.each_var(&mut |v| found |= vars.contains(&v));
    found
}

fn turned(s: &Stmt, names: &mut Vec<String>, iotas: &[Var]) -> Option<Vec<Stmt>> {
    let Stmt::For {
        index: b,
        count: Expr::Int(m),
        parallel,
        body,
    } = s
    else {
        return None;
    };
    if !(1..=MOST_LANES).contains(m) {
        return None;
    }
    let [
        pre @ ..,
        Stmt::Reduce {
            acc,
            elem: Elem::Int,
            op: "+",
            seed: Some(seed),
            index: k,
            count,
            body: lets,
            item,
            ..
        },
        Stmt::Store {
            buf: out,
            index: at,
            value: Expr::Var(stored),
        },
    ] = body.as_slice()
    else {
        return None;
    };
    if stored != acc {
        return None;
    }
    // The lane's own scalars (the `let`s before the sum) and the item's.
    let mut lane_vars = vec![*b];
    for p in pre {
        let Stmt::Let { var, value, .. } = p else {
            return None;
        };
        if !total(value) {
            return None;
        }
        lane_vars.push(*var);
    }
    let mut item_vars = vec![*k, *acc];
    for l in lets {
        let Stmt::Let { var, value, .. } = l else {
            return None;
        };
        if !total(value) {
            return None;
        }
        item_vars.push(*var);
    }
    if !total(item) {
        return None;
    }
    // The count and seed the same for every lane; each lane its own atom
    // of `out` (`off + b`), which nothing in the nest reads.
    let mut nest_vars = lane_vars.clone();
    nest_vars.extend(item_vars.iter().copied());
    if mentions(count, &nest_vars) || mentions(seed, &nest_vars) {
        return None;
    }
    let offset = match at {
        Expr::Var(v) if v == b => Expr::Int(0),
        Expr::Op { op: "+", args } => match args.as_slice() {
            [off, Expr::Var(v)] | [Expr::Var(v), off] if v == b && !mentions(off, &nest_vars) => off.clone(),
            _ => return None,
        },
        _ => return None,
    };
    let mut reads_out = false;
    let mut check = |e: &Expr| e.each_var(&mut |v| reads_out |= v == *out);
    for st in pre.iter().chain(lets) {
        if let Stmt::Let { value, .. } = st {
            check(value);
        }
    }
    check(item);
    check(&offset);
    if reads_out {
        return None;
    }
    // The item's `let`s that do not move with the lane: once per item.
    let mut per_item = Vec::new();
    let mut per_pair = pre.to_vec();
    let mut moving = lane_vars.clone();
    for l in lets {
        if let Stmt::Let { var, value, .. } = l {
            if mentions(value, &moving) {
                moving.push(*var);
                per_pair.push(l.clone());
            } else {
                per_item.push(l.clone());
            }
        }
    }
    let parts = if *parallel { PARTS } else { 1 };
    let (part, lo, hi, j, lane, lane2, total_var) = (
        fresh(names, "part"),
        fresh(names, "lo"),
        fresh(names, "hi"),
        fresh(names, "j"),
        fresh(names, "l"),
        fresh(names, "l"),
        fresh(names, "sum"),
    );
    let sums = fresh(names, "sums");
    let n = count.clone();
    let at_part = |l: Expr| Expr::add(Expr::mul(Expr::Var(part), Expr::Int(*m)), l);
    // Part p: items [p·K/P, (p+1)·K/P), into its row of `sums`.
    let bound = |p: Expr| Expr::op("/", vec![Expr::op("*", vec![p, n.clone()]), Expr::Int(parts)]);
    let mut pair = per_pair;
    pair.push(Stmt::Store {
        buf: sums,
        index: at_part(Expr::Var(*b)),
        value: Expr::op("+", vec![Expr::load(sums, at_part(Expr::Var(*b))), item.clone()]),
    });
    let mut step = vec![Stmt::Let {
        var: *k,
        elem: Elem::Int,
        value: Expr::add(Expr::Var(lo), Expr::Var(j)),
    }];
    step.extend(per_item);
    match counted_key(item, &pair, *b, &moving, iotas) {
        Some(key) => {
            let kv = fresh(names, "key");
            let at_key = at_part(Expr::Var(kv));
            step.push(Stmt::Let {
                var: kv,
                elem: Elem::Int,
                value: key,
            });
            step.push(Stmt::If {
                cond: Expr::op(
                    "and",
                    vec![
                        Expr::op(">=", vec![Expr::Var(kv), Expr::Int(0)]),
                        Expr::op("<", vec![Expr::Var(kv), Expr::Int(*m)]),
                    ],
                ),
                then: vec![Stmt::Store {
                    buf: sums,
                    index: at_key.clone(),
                    value: Expr::op("+", vec![Expr::load(sums, at_key), Expr::Int(1)]),
                }],
                otherwise: Vec::new(),
            });
        }
        None => step.push(Stmt::For {
            index: *b,
            count: Expr::Int(*m),
            parallel: false,
            body: pair,
        }),
    }
    let [from, to] = part_bounds(lo, hi, part, bound);
    let part_body = vec![
        from,
        to,
        Stmt::For {
            index: lane,
            count: Expr::Int(*m),
            parallel: false,
            body: vec![Stmt::Store {
                buf: sums,
                index: at_part(Expr::Var(lane)),
                value: Expr::Int(0),
            }],
        },
        Stmt::For {
            index: j,
            count: Expr::op("-", vec![Expr::Var(hi), Expr::Var(lo)]),
            parallel: false,
            body: step,
        },
    ];
    let mut add_parts = vec![Stmt::Let {
        var: total_var,
        elem: Elem::Int,
        value: seed.clone(),
    }];
    let p2 = fresh(names, "part");
    add_parts.push(Stmt::For {
        index: p2,
        count: Expr::Int(parts),
        parallel: false,
        body: vec![Stmt::Set {
            var: total_var,
            value: Expr::op(
                "+",
                vec![
                    Expr::Var(total_var),
                    Expr::load(
                        sums,
                        Expr::add(Expr::mul(Expr::Var(p2), Expr::Int(*m)), Expr::Var(lane2)),
                    ),
                ],
            ),
        }],
    });
    add_parts.push(Stmt::Store {
        buf: *out,
        index: Expr::add(offset, Expr::Var(lane2)),
        value: Expr::Var(total_var),
    });
    Some(vec![
        Stmt::Alloc {
            buf: sums,
            elem: Elem::Int,
            len: Expr::Int(parts * m),
        },
        Stmt::For {
            index: part,
            count: Expr::Int(parts),
            parallel: *parallel,
            body: part_body,
        },
        Stmt::For {
            index: lane2,
            count: Expr::Int(*m),
            parallel: false,
            body: add_parts,
        },
    ])
}

// -- maps whose cells are functions applied --------------------------------

/// The binder of a polymorphic λ written as an atom, and its body.
fn polymorphic_binder(e: &maps::Expr) -> Option<(Binder, &maps::Expr)> {
    let Kind::Array { shape, atoms } = &e.kind else {
        return None;
    };
    match atoms.as_slice() {
        [Atom::ILambda { param, body }] if shape.is_empty() => Some((Binder::Index(*param), body)),
        [Atom::TLambda { body, .. }] if shape.is_empty() => Some((Binder::Type, body)),
        _ => None,
    }
}

impl<'m> Alloc<'m> {
    /// A reduction's argument `a` as a delayed map where its cells are a
    /// function of the program applied to the map's variables and that
    /// function's body is itself a map of such cells (an outer product
    /// lifted over the columns of one matrix and the rows of another,
    /// reduced at once: no `[N N N]` array, each atom computed where the
    /// reduction reads it). A `let` around the map binds its names first.
    pub(super) fn delayed_through_functions(
        &mut self,
        a: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Option<Val<'m>>> {
        if matches!(a.ty.atom, TyAtom::Record(_)) {
            return Ok(None);
        }
        let (binds, map) = match &a.kind {
            Kind::Map {
                frame,
                binds,
                body: inner,
            } if frame.is_scalar() => (binds.as_slice(), inner.as_ref()),
            _ => (&[][..], a),
        };
        let Kind::Map {
            frame,
            binds: map_binds,
            body: cell,
        } = &map.kind
        else {
            return Ok(None);
        };
        if frame.is_scalar()
            || !map_binds
                .iter()
                .all(|b| matches!(b.value.kind, Kind::Var(_) | Kind::Array { .. }))
            || (binds.is_empty() && delayable(map))
        {
            return Ok(None);
        }
        // The `let`'s names: views that cannot fail, bound here (any
        // names around a map whose cells are read in place: bound here once
        // either way).
        if !delayable(map) && !binds.iter().all(|b| cannot_fail(&b.value)) {
            return Ok(None);
        }
        // (Decided before the `let`'s names are bound: nothing is computed
        // twice where the map is not taken. A function the `let` binds is
        // not looked into.)
        if !self.cells_inline(cell, 4) {
            return Ok(None);
        }
        let saved = self.scope.clone();
        let r = (|| {
            for b in binds {
                let v = self.bound(&b.value, body)?;
                self.scope.vars.insert(b.var, v);
            }
            Ok(Some(Val::Delayed(Rc::new(Delayed {
                map,
                scope: self.scope.clone(),
                elem: elem_of(&a.ty.atom)?,
                dims: self.dims(&a.ty.shape)?,
                transposed: false,
                appended: None,
                whole_cells: false,
            }))))
        })();
        self.scope = saved;
        r
    }

    /// Whether the cells of a delayed map cannot fail, the functions of
    /// the program they apply looked into (at most 4 calls deep).
    pub(super) fn delayed_cannot_fail(&mut self, d: &Delayed<'m>) -> bool {
        let saved = std::mem::replace(&mut self.scope, d.scope.clone());
        let ok = self.calls_cannot_fail(d.map, 4);
        self.scope = saved;
        ok
    }

    fn calls_cannot_fail(&self, e: &'m maps::Expr, depth: usize) -> bool {
        super::cannot_fail_calling(e, &mut |app| {
            let Kind::App { func, args } = &app.kind else {
                return false;
            };
            let never_negative = |i: &IndexVal| match i {
                IndexVal::Dim(d) => matches!(d, Expr::Var(_) | Expr::Int(0..)),
                IndexVal::Shape(ds) => ds.iter().all(|d| matches!(d, Expr::Var(_) | Expr::Int(0..))),
            };
            depth > 0
                && self
                    .function_body(func, args.len())
                    .is_some_and(|(body, _, indices)| {
                        indices.iter().all(|(_, i)| never_negative(i))
                            && self.calls_cannot_fail(body, depth - 1)
                    })
        })
    }

    /// Whether `cell` (in the current scope) is a scalar, a delayable
    /// map, or a function of the program (or a lambda) applied to
    /// variables whose body, its parameters bound, is such a cell (at most
    /// `depth` calls deep).
    fn cells_inline(&self, cell: &'m maps::Expr, depth: usize) -> bool {
        // (A map with `let`s in its cells only where they cannot fail: a
        // delayed cell's `let`s run only where an atom is read.)
        if cell.ty.shape.is_scalar() || (delayable(cell) && cannot_fail(cell)) {
            return true;
        }
        if depth == 0 {
            return false;
        }
        match &cell.kind {
            Kind::App { func, args } if args.iter().all(|x| matches!(x.kind, Kind::Var(_))) => {
                match self.function_body(func, args.len()) {
                    Some((inner, ..)) => self.cells_inline(inner, depth - 1),
                    None => false,
                }
            }
            Kind::Map {
                frame,
                binds,
                body: inner,
            } if !frame.is_scalar()
                && binds
                    .iter()
                    .all(|b| matches!(b.value.kind, Kind::Var(_) | Kind::Array { .. })) =>
            {
                self.cells_inline(inner, depth)
            }
            _ => false,
        }
    }

    /// The body of the function `func` names (a variable bound to a
    /// closure, maybe given its type and index arguments, or a lambda
    /// written in place) under `n` parameters, those parameters, and the
    /// index arguments' values for its index parameters.
    #[allow(clippy::type_complexity)]
    fn function_body(
        &self,
        func: &'m maps::Expr,
        n: usize,
    ) -> Option<(&'m maps::Expr, Vec<VarId>, Vec<(IVar, IndexVal)>)> {
        // The type and index arguments, first first.
        let mut insts = Vec::new();
        let mut head = func;
        while let Kind::TApp { func, .. } | Kind::IApp { func, .. } = &head.kind {
            insts.push(head);
            head = func;
        }
        insts.reverse();
        match &head.kind {
            Kind::Var(v) => match self.scope.vars.get(v) {
                Some(Val::Func(c)) => {
                    let mut indices = Vec::new();
                    let mut binder = Some(c.binder);
                    let mut e = c.body;
                    for inst in insts {
                        // The closure's own binder first, then the λs of
                        // its body.
                        let b = match binder.take() {
                            Some(b) => b,
                            None => {
                                let (b, body) = polymorphic_binder(e)?;
                                e = body;
                                b
                            }
                        };
                        match (b, &inst.kind) {
                            (Binder::Type, Kind::TApp { .. }) => {}
                            (Binder::Index(p), Kind::IApp { arg, .. }) => {
                                indices.push((p, self.index(arg).ok()?))
                            }
                            _ => return None,
                        }
                    }
                    match binder {
                        Some(Binder::Value(p)) => {
                            let (body, params, _) = self.peel(e, n.checked_sub(1)?, vec![p])?;
                            Some((body, params, indices))
                        }
                        Some(_) => None,
                        None => self.peel(e, n, Vec::new()).map(|(b, p, _)| (b, p, indices)),
                    }
                }
                _ => None,
            },
            _ if insts.is_empty() => self.peel(func, n, Vec::new()),
            _ => None,
        }
    }

    #[allow(clippy::type_complexity)]
    fn peel(
        &self,
        mut e: &'m maps::Expr,
        n: usize,
        mut params: Vec<VarId>,
    ) -> Option<(&'m maps::Expr, Vec<VarId>, Vec<(IVar, IndexVal)>)> {
        for _ in 0..n {
            let Kind::Array { shape, atoms } = &e.kind else {
                return None;
            };
            let [Atom::Lambda { param, body, .. }] = atoms.as_slice() else {
                return None;
            };
            if !shape.is_empty() {
                return None;
            }
            params.push(*param);
            e = body;
        }
        Some((e, params, Vec::new()))
    }

    /// The cell at `idx` (not empty) of a function applied to variables
    /// (see [`Alloc::delayed_through_functions`]): its body entered, the
    /// parameters bound to the arguments, and its cell made there.
    pub(super) fn delayed_app_cell(
        &mut self,
        e: &'m maps::Expr,
        idx: &[Expr],
        elem: Elem,
        body: &mut Vec<Stmt>,
    ) -> Option<Res<Val<'m>>> {
        let Kind::App { func, args } = &e.kind else {
            return None;
        };
        if idx.is_empty() || !args.iter().all(|x| matches!(x.kind, Kind::Var(_))) {
            return None;
        }
        let (inner, params, indices) = self.function_body(func, args.len())?;
        if !self.cells_inline(inner, 4) {
            return None;
        }
        let mut vals = Vec::with_capacity(args.len());
        for a in args {
            match &a.kind {
                Kind::Var(v) => vals.push(self.scope.vars.get(v)?.clone()),
                _ => return None,
            }
        }
        // The closure's own scope for a variable; the current one for a
        // lambda written here.
        let head = func.instantiated();
        let scope = match &head.kind {
            Kind::Var(v) => match self.scope.vars.get(v) {
                Some(Val::Func(c)) => c.scope.clone(),
                _ => return None,
            },
            _ => self.scope.clone(),
        };
        // (The index arguments are the closure's sizes: never negative
        // where they are variables, checked here otherwise.)
        for (_, i) in &indices {
            match i {
                IndexVal::Dim(d) => self.non_negative(std::slice::from_ref(d), body),
                IndexVal::Shape(ds) => self.non_negative(ds, body),
            }
        }
        let saved = std::mem::replace(&mut self.scope, scope);
        for (p, i) in indices {
            match (p, i) {
                (IVar::Dim(d), IndexVal::Dim(x)) => {
                    self.scope.dims.insert(d, x);
                }
                (IVar::Shape(s), IndexVal::Shape(x)) => {
                    self.scope.shapes.insert(s, x);
                }
                _ => {
                    self.scope = saved;
                    return None;
                }
            }
        }
        for (p, v) in params.into_iter().zip(vals) {
            self.scope.vars.insert(p, v);
        }
        let r = self.delayed_cell_in(inner, idx, elem, body);
        self.scope = saved;
        Some(r)
    }
}

/// The number of atoms of each item of `xs`, a vector of small cells (at
/// most 16 atoms, their shape known when compiling), or `None`.
fn small_cells(xs: &View) -> Option<i64> {
    let mut atoms = 1i64;
    for d in xs.dims.get(1..)? {
        match d {
            Expr::Int(n) if *n > 0 => atoms = atoms.checked_mul(*n)?,
            _ => return None,
        }
    }
    (xs.dims.len() >= 2 && atoms <= 16).then_some(atoms)
}

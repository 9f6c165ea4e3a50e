//! Compaction: `grade` of a map of Int keys at the outermost level (the
//! grade of flags that puts the kept items first) without the keys ever
//! stored. The keys' range, by parts on the threads (unless the keys'
//! cell gives it: `bool->i` of anything, Int literals of an `if`); where
//! it spans fewer than `SMALL_RANGE` values, a stable counting sort: each
//! part's count of each key (on the threads), the places in order, each
//! part writing its items' places (on the threads), each key computed
//! where it is read. Two keys (flags) are counted by a sum per part and
//! each part's two running places are scalars, chosen by arithmetic: no
//! count in memory per item, no branch. Otherwise the keys are stored and
//! graded by the runtime. The counting sort is stable, so the grade is
//! the interpreter's.
//!
//! A grade used only to gather (`let`-bound, read only by a map that
//! `take*` or `drop*` keeps part of: the stream compaction "kept first")
//! is a stable partition, as the interpreter's `partition.rs`: the grade
//! is not made (`Graded`), and the counting sort's last pass computes each
//! item's cell of the map at the item's place, where that place is kept.
//!
//! The compaction written by hand, an exclusive sum scan of the flags
//! giving each kept item its place in a scatter, does not make the scan
//! either ([`Offsets`]): each part's count of the flags, then each part's
//! kept items written from its first place, as a filter's two passes.

use super::*;

/// How many parts the keys are counted in.
const PARTS: i64 = 64;

/// A `let` of an Int.
fn int(var: Var, value: Expr) -> Stmt {
    Stmt::Let {
        var,
        elem: Elem::Int,
        value,
    }
}

/// `(name a b)`.
fn op(name: &'static str, a: Expr, b: Expr) -> Expr {
    Expr::op(name, vec![a, b])
}

/// The bounds `lo`, `hi` of part `p` of `n` items in [`PARTS`] parts.
fn part_of(lo: Var, hi: Var, p: Var, n: &Expr) -> [Stmt; 2] {
    part_bounds(lo, hi, p, |k| op("/", Expr::mul(k, n.clone()), Expr::Int(PARTS)))
}
/// Keys spanning fewer values than this are counted.
const SMALL_RANGE: i64 = 1024;

/// What the last pass of a counting grade writes for each item: its code
/// (`at`: the item's place in the order, `item`: its index, and whether
/// that place is kept where the code around it knows) into `each`.
type Place<'p, 'm> = &'p mut dyn FnMut(&mut Alloc<'m>, Expr, Expr, Option<bool>, &mut Vec<Stmt>) -> Res<()>;

/// Which places of the order a counting grade's last pass writes: all
/// (`None`), or those from `from` on, `count` of them (a partition's kept
/// items, [`Alloc::partition`]), that count found by the counting itself
/// where [`Counted`] says so.
type Places = Option<(Expr, Expr, Option<Counted>)>;

/// A partition's count of kept items that the two-key counting finds
/// ([`Alloc::counted_partition`]): `var` bound, once the keys are
/// counted, to how many items have the key `key` above the least (0 or
/// 1), then `then` run (the kept items' buffer, of that count, made).
#[derive(Clone)]
pub(super) struct Counted {
    var: Var,
    key: i64,
    then: Vec<Stmt>,
}

/// What a pass of a two-key grade does for each item of a part: its
/// key less the least (a variable), and its index, code into the item's
/// statements.
type PartItem<'p, 'm> = &'p mut dyn FnMut(&mut Alloc<'m>, Var, Expr, &mut Vec<Stmt>) -> Res<()>;

/// A grade not made yet: the keys (a delayed map) of a `let`-bound
/// `grade` read only by a map of which `take*` or `drop*` keeps part
/// ([`Alloc::partition`]). Read any other way, it is made then.
pub(super) struct Graded<'m> {
    pub(super) keys: Val<'m>,
}

impl<'m> Alloc<'m> {
    pub(super) fn compact(
        &mut self,
        name: &'static str,
        args: &[Val<'m>],
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Option<Res<Val<'m>>> {
        match (name, args) {
            ("grade", [keys @ Val::Delayed(_)]) => Some(self.grade_of_map(keys, e, body)),
            _ => None,
        }
    }

    /// Whether `grade` of `args` takes its keys delayed: a vector map of
    /// Ints that cannot fail (each key is computed three times), where no
    /// loop encloses it.
    pub(super) fn grades_a_map(&self, args: &[Val<'m>]) -> bool {
        matches!(args, [Val::Delayed(d)]
            if self.loop_depth == 0
                && d.dims.len() == 1
                && d.elem == Elem::Int
                && !d.transposed
                && cannot_fail(d.map))
    }

    fn grade_of_map(&mut self, keys: &Val<'m>, e: &'m maps::Expr, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        let dims = self.dims(&e.ty.shape)?;
        self.grade_of_keys(keys, dims, body)
    }

    /// The grade of a delayed map of keys (see [`Alloc::grades_a_map`]),
    /// of `dims`, into a buffer.
    pub(super) fn grade_of_keys(
        &mut self,
        keys: &Val<'m>,
        dims: Vec<Expr>,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        let Val::Delayed(d) = keys else {
            return unsupported("grade of these arguments");
        };
        let n = d.dims[0].clone();
        let out = self.alloc("grade", Elem::Int, dims, body);
        let mut place =
            |_: &mut Self, at: Expr, item: Expr, _: Option<bool>, each: &mut Vec<Stmt>| -> Res<()> {
                each.push(Stmt::Store {
                    buf: out.buf,
                    index: out.cell(&[at]).offset,
                    value: item,
                });
                Ok(())
            };
        let stored = |a: &mut Self| a.stored_grade(keys, &n, &out);
        self.by_key_range(keys, &n, (&mut place, None), stored, body)?;
        Ok(Val::Array(out))
    }

    /// The keys' range, by parts on the threads; where it spans fewer than
    /// `SMALL_RANGE` values, the stable counting sort's passes, `place`
    /// writing each item's code at its place in the order (where
    /// `places` says so, see [`Alloc::two_key_grade`]); otherwise
    /// `stored`.
    fn by_key_range(
        &mut self,
        keys: &Val<'m>,
        n: &Expr,
        (place, places): (Place<'_, 'm>, Places),
        stored: impl FnOnce(&mut Self) -> Res<Vec<Stmt>>,
        body: &mut Vec<Stmt>,
    ) -> Res<()> {
        let set = |var, value| Stmt::Set { var, value };

        // Keys whose range the map's cell gives (`bool->i` of flags) are
        // counted without a pass finding it.
        if let Val::Delayed(d) = keys
            && let Some((least, most)) = key_range(d.map)
            && let Some(width) = most.checked_sub(least).filter(|w| *w < SMALL_RANGE)
        {
            let (low, span) = (self.fresh("low"), self.fresh("span"));
            body.push(int(low, Expr::Int(least)));
            body.push(int(span, Expr::Int(width)));
            let counted = self.counting_grade(keys, n, (low, width), span, (place, places))?;
            body.extend(counted);
            return Ok(());
        }

        // Each part's least and greatest key.
        let least = self.alloc("least", Elem::Int, vec![Expr::Int(PARTS)], body);
        let most = self.alloc("most", Elem::Int, vec![Expr::Int(PARTS)], body);
        let (p, lo, hi, a, b, i, k) = (
            self.fresh("part"),
            self.fresh("lo"),
            self.fresh("hi"),
            self.fresh("least"),
            self.fresh("most"),
            self.fresh("i"),
            self.fresh("k"),
        );
        let mut each = Vec::new();
        let key = self.key(keys, Expr::add(Expr::Var(lo), Expr::Var(i)), &mut each)?;
        each.push(int(k, key));
        each.push(set(a, op("min", Expr::Var(a), Expr::Var(k))));
        each.push(set(b, op("max", Expr::Var(b), Expr::Var(k))));
        let [from, to] = part_of(lo, hi, p, n);
        body.push(Stmt::For {
            index: p,
            count: Expr::Int(PARTS),
            parallel: true,
            body: vec![
                from,
                to,
                int(a, Expr::Int(i64::MAX)),
                int(b, Expr::Int(i64::MIN)),
                Stmt::For {
                    index: i,
                    count: op("-", Expr::Var(hi), Expr::Var(lo)),
                    parallel: false,
                    body: each,
                },
                Stmt::Store {
                    buf: least.buf,
                    index: Expr::Var(p),
                    value: Expr::Var(a),
                },
                Stmt::Store {
                    buf: most.buf,
                    index: Expr::Var(p),
                    value: Expr::Var(b),
                },
            ],
        });
        let (low, high, q, span) = (
            self.fresh("low"),
            self.fresh("high"),
            self.fresh("part"),
            self.fresh("span"),
        );
        body.push(int(low, Expr::Int(i64::MAX)));
        body.push(int(high, Expr::Int(i64::MIN)));
        body.push(Stmt::For {
            index: q,
            count: Expr::Int(PARTS),
            parallel: false,
            body: vec![
                set(
                    low,
                    op("min", Expr::Var(low), Expr::load(least.buf, Expr::Var(q))),
                ),
                set(
                    high,
                    op("max", Expr::Var(high), Expr::load(most.buf, Expr::Var(q))),
                ),
            ],
        });
        // (Wrapping: a span of 2^63 or more is negative.)
        body.push(int(span, op("-", Expr::Var(high), Expr::Var(low))));
        let small = op(
            "and",
            op(">=", Expr::Var(span), Expr::Int(0)),
            op("<", Expr::Var(span), Expr::Int(SMALL_RANGE)),
        );
        let counted = self.counting_grade(keys, n, (low, -1), span, (place, places.clone()))?;
        let stored = stored(self)?;
        body.push(Stmt::If {
            cond: small,
            then: counted,
            otherwise: stored,
        });
        Ok(())
    }

    /// The keys of `b`, a `let`'s binding of `(grade KEYS)`, where the
    /// grade need not be made: KEYS a map the counting grade reads
    /// delayed, the variable read only as the array of one map, which
    /// `take*` or `drop*` keeps part of outside any map's cell or function
    /// ([`Alloc::partition`]).
    pub(super) fn graded(
        &mut self,
        b: &'m maps::Bind,
        later: &'m [maps::Bind],
        inner: &'m maps::Expr,
    ) -> Res<Option<Val<'m>>> {
        let Kind::App { func, args } = &b.value.kind else {
            return Ok(None);
        };
        let [keys] = args.as_slice() else {
            return Ok(None);
        };
        if prim_of(func) != Some("grade")
            || self.loop_depth != 0
            || !delayable(keys)
            || !used_once_by_a_map(b.var, later, inner)
            || !kept_in_part(b.var, later, inner)
        {
            return Ok(None);
        }
        let keys = Val::Delayed(self.delayed(keys)?);
        Ok(self.grades_a_map(std::slice::from_ref(&keys)).then_some(keys))
    }

    /// `take*` or `drop*` of `count` items from `from` (the others from
    /// `skip`, `skipped` of them) of a map
    /// over a grade not made (`graded`, the map's variable `var`): a stable
    /// partition. Where the keys span a small range, the counting sort's
    /// last pass computes each item's cell of the map (`var` its index)
    /// straight into its place, if that place is kept (no grade, no
    /// gather through it; a cell that can fail is computed for the others
    /// too, unused); otherwise the grade is made and the map's kept items
    /// computed through it.
    pub(super) fn partition(
        &mut self,
        map: &Val<'m>,
        (var, graded): (VarId, &Graded<'m>),
        [(from, count), (skip, skipped)]: [(Expr, Expr); 2],
        (kept, counted): (&View, Option<Counted>),
        body: &mut Vec<Stmt>,
    ) -> Res<()> {
        let Val::Delayed(d) = map else {
            return unsupported("a partition of this map");
        };
        let n = d.dims[0].clone();
        let fails = !cannot_fail(d.map);
        let keys = &graded.keys;
        let mut place =
            |a: &mut Self, at: Expr, item: Expr, known: Option<bool>, each: &mut Vec<Stmt>| -> Res<()> {
                let mut then = Vec::new();
                let x = a.graded_cell(d, var, item.clone(), at.clone(), &mut then)?;
                then.push(Stmt::Store {
                    buf: kept.buf,
                    index: Expr::op("-", vec![at.clone(), from.clone()]),
                    value: x,
                });
                let mut otherwise = Vec::new();
                if fails {
                    let x = a.graded_cell(d, var, item, at.clone(), &mut otherwise)?;
                    a.for_its_failures(d.elem, x, &mut otherwise);
                }
                match known {
                    Some(true) => {
                        each.extend(then);
                        return Ok(());
                    }
                    Some(false) => {
                        each.extend(otherwise);
                        return Ok(());
                    }
                    None => {}
                }
                each.push(Stmt::If {
                    cond: Expr::op(
                        "and",
                        vec![
                            Expr::op(">=", vec![at.clone(), from.clone()]),
                            Expr::op("<", vec![at, Expr::add(from.clone(), count.clone())]),
                        ],
                    ),
                    then,
                    otherwise,
                });
                Ok(())
            };
        let stored = |a: &mut Self| -> Res<Vec<Stmt>> {
            let mut stmts = Vec::new();
            let order = a.alloc("grade", Elem::Int, vec![n.clone()], &mut stmts);
            stmts.extend(a.stored_grade(keys, &n, &order)?);
            let mut scope = d.scope.clone();
            scope.vars.insert(var, Val::Array(order));
            let through = Val::Delayed(Rc::new(Delayed {
                map: d.map,
                scope,
                elem: d.elem,
                dims: d.dims.clone(),
                transposed: false,
                appended: None,
                whole_cells: false,
            }));
            a.kept_items(&through, (from.clone(), count.clone()), kept, &mut stmts)?;
            if fails {
                let pass = a.items_pass(&through, skip, skipped, None)?;
                stmts.push(pass);
            }
            Ok(stmts)
        };
        self.by_key_range(
            keys,
            &n,
            (&mut place, Some((from.clone(), count.clone(), counted))),
            stored,
            body,
        )
    }

    /// `(take* (count K) M)` or `(drop* (count K) M)` outside loops, `M` a
    /// map over a grade not made ([`Graded`]) of two keys that tell the
    /// flags `K` apart (`(grade (bool->i (not K)))`: the kept items
    /// first): how many flags are set is how many items have one of the
    /// keys, which the partition's counting finds, so the flags are not
    /// counted first, in a pass of their own (and the count, within the
    /// items, needs no check). `None` where `e` is not such an
    /// application.
    pub(super) fn counted_partition(
        &mut self,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Option<Val<'m>>> {
        let Kind::App { func, args } = &e.kind else {
            return Ok(None);
        };
        let (Some(name @ ("take*" | "drop*")), [count, xs]) = (prim_of(func), args.as_slice()) else {
            return Ok(None);
        };
        let Kind::App {
            func: counter,
            args: flags,
        } = &count.kind
        else {
            return Ok(None);
        };
        let (Some("count"), [flags]) = (prim_of(counter), flags.as_slice()) else {
            return Ok(None);
        };
        let Some((flags, which)) = counted_flags(flags) else {
            return Ok(None);
        };
        if self.loop_depth != 0 || !delayable(xs) {
            return Ok(None);
        }
        let d = self.delayed(xs)?;
        let Some((var, graded)) = boxes::graded_bind(&d).filter(|_| d.dims.len() == 1) else {
            return Ok(None);
        };
        let Val::Delayed(keys) = &graded.keys else {
            return Ok(None);
        };
        let (Some((least, most)), Some((set, unset))) = (key_range(keys.map), flag_keys(keys.map, flags))
        else {
            return Ok(None);
        };
        if most - least != 1 || set == unset || ![set, unset].iter().all(|k| (least..=most).contains(k)) {
            return Ok(None);
        }
        let Val::Prim { indices, .. } = self.value(func, body)? else {
            return Ok(None);
        };
        self.indices_checked(&indices, body);
        // The count of set flags, the rest, and the kept items' buffer,
        // made once the keys are counted.
        let n = d.dims[0].clone();
        let (set_count, rest) = (self.fresh("count"), self.fresh("k"));
        let (set_count_x, rest_x) = (Expr::Var(set_count), Expr::Var(rest));
        let mut then = vec![int(rest, op("-", n, set_count_x.clone()))];
        let (kept_count, places) = if name == "take*" {
            let kept = [(Expr::Int(0), set_count_x.clone()), (set_count_x, rest_x.clone())];
            (Expr::Var(set_count), kept)
        } else {
            let kept = [(set_count_x.clone(), rest_x.clone()), (Expr::Int(0), set_count_x)];
            (rest_x, kept)
        };
        let kept = self.alloc("kept", d.elem, vec![kept_count.clone()], &mut then);
        let counted = Counted {
            var: set_count,
            key: if which { set } else { unset } - least,
            then,
        };
        let map = Val::Delayed(d.clone());
        self.partition(&map, (var, graded), places, (&kept, Some(counted)), body)?;
        Ok(Some(boxes::boxed(IndexVal::Dim(kept_count), Val::Array(kept))))
    }

    /// The cell of the map of `d` at `at` whose variable `var` (its array
    /// a grade) is `item`, its other variables their arrays' cells at
    /// `at`; code into `each`.
    fn graded_cell(
        &mut self,
        d: &Delayed<'m>,
        var: VarId,
        item: Expr,
        at: Expr,
        each: &mut Vec<Stmt>,
    ) -> Res<Expr> {
        let Kind::Map {
            binds, body: cell, ..
        } = &d.map.kind
        else {
            return unsupported("a partition of this map");
        };
        let saved = std::mem::replace(&mut self.scope, d.scope.clone());
        self.delayed += 1;
        let r = (|| {
            for b in binds {
                let v = if matches!(b.value.kind, Kind::Var(v) if v == var) {
                    Val::Scalar(Elem::Int, item.clone())
                } else {
                    match self.value(&b.value, each)? {
                        Val::Delayed(inner) if splits_at(inner.map, 1) => {
                            self.delayed_cell(&inner, std::slice::from_ref(&at), each)?
                        }
                        v => match records::cell_val_of(&v, std::slice::from_ref(&at)) {
                            Some(v) => v,
                            None => return unsupported("a map over an array of functions"),
                        },
                    }
                };
                self.scope.vars.insert(b.var, v);
            }
            match self.delayed_cell_in(cell, &[], d.elem, each)? {
                Val::Scalar(_, x) => Ok(x),
                v => match cell_of(&v, &[]) {
                    Some(v) if v.dims.is_empty() => Ok(v.load()),
                    _ => unsupported("an element of a delayed map"),
                },
            }
        })();
        self.delayed -= 1;
        self.scope = saved;
        r
    }

    /// The key at `at` (code for it into `body`), computed inside a loop.
    fn key(&mut self, keys: &Val<'m>, at: Expr, body: &mut Vec<Stmt>) -> Res<Expr> {
        self.loop_depth += 2;
        let k = self.element(keys, &[at], body);
        self.loop_depth -= 2;
        k
    }

    /// The stable counting sort of keys from `low` spanning `span` + 1
    /// values (`known`: that span where it is known here, else -1), into
    /// `out`. Two keys (a stable partition) are counted by a sum per part
    /// and each part's two running places are scalars (no count in memory
    /// per item).
    fn counting_grade(
        &mut self,
        keys: &Val<'m>,
        n: &Expr,
        (low, known): (Var, i64),
        span: Var,
        (place, places): (Place<'_, 'm>, Places),
    ) -> Res<Vec<Stmt>> {
        if known == 1 {
            return self.two_key_grade(keys, n, low, (place, places));
        }
        if matches!(places, Some((_, _, Some(_)))) {
            return unsupported("a partition's count found by more than two keys");
        }
        let range = self.fresh("range");
        let counts = self.fresh("counts");
        let mut stmts = vec![
            int(range, Expr::add(Expr::Var(span), Expr::Int(1))),
            Stmt::Alloc {
                buf: counts,
                elem: Elem::Int,
                len: Expr::mul(Expr::Int(PARTS), Expr::Var(range)),
            },
        ];
        let z = self.fresh("z");
        stmts.push(Stmt::For {
            index: z,
            count: Expr::mul(Expr::Int(PARTS), Expr::Var(range)),
            parallel: false,
            body: vec![Stmt::Store {
                buf: counts,
                index: Expr::Var(z),
                value: Expr::Int(0),
            }],
        });
        // The slot of part p's count of the key at lo + i.
        let mut pass = |a: &mut Self, write: bool| -> Res<Stmt> {
            let (p, lo, hi, i, slot, at) = (
                a.fresh("part"),
                a.fresh("lo"),
                a.fresh("hi"),
                a.fresh("i"),
                a.fresh("slot"),
                a.fresh("at"),
            );
            let mut each = Vec::new();
            let key = a.key(keys, Expr::add(Expr::Var(lo), Expr::Var(i)), &mut each)?;
            each.push(int(
                slot,
                Expr::add(
                    Expr::mul(Expr::Var(p), Expr::Var(range)),
                    op("-", key, Expr::Var(low)),
                ),
            ));
            each.push(int(at, Expr::load(counts, Expr::Var(slot))));
            each.push(Stmt::Store {
                buf: counts,
                index: Expr::Var(slot),
                value: Expr::add(Expr::Var(at), Expr::Int(1)),
            });
            if write {
                a.loop_depth += 2;
                let r = place(
                    a,
                    Expr::Var(at),
                    Expr::add(Expr::Var(lo), Expr::Var(i)),
                    None,
                    &mut each,
                );
                a.loop_depth -= 2;
                r?;
            }
            let [from, to] = part_of(lo, hi, p, n);
            Ok(Stmt::For {
                index: p,
                count: Expr::Int(PARTS),
                parallel: true,
                body: vec![
                    from,
                    to,
                    Stmt::For {
                        index: i,
                        count: op("-", Expr::Var(hi), Expr::Var(lo)),
                        parallel: false,
                        body: each,
                    },
                ],
            })
        };
        stmts.push(pass(self, false)?);
        // Each part's first place for each key: the keys in order, the
        // parts in order within a key.
        let (run, v, q, slot, c) = (
            self.fresh("run"),
            self.fresh("v"),
            self.fresh("part"),
            self.fresh("slot"),
            self.fresh("c"),
        );
        stmts.push(int(run, Expr::Int(0)));
        stmts.push(Stmt::For {
            index: v,
            count: Expr::Var(range),
            parallel: false,
            body: vec![Stmt::For {
                index: q,
                count: Expr::Int(PARTS),
                parallel: false,
                body: vec![
                    int(
                        slot,
                        Expr::add(Expr::mul(Expr::Var(q), Expr::Var(range)), Expr::Var(v)),
                    ),
                    int(c, Expr::load(counts, Expr::Var(slot))),
                    Stmt::Store {
                        buf: counts,
                        index: Expr::Var(slot),
                        value: Expr::Var(run),
                    },
                    Stmt::Set {
                        var: run,
                        value: Expr::add(Expr::Var(run), Expr::Var(c)),
                    },
                ],
            }],
        });
        stmts.push(pass(self, true)?);
        Ok(stmts)
    }

    /// [`Alloc::counting_grade`] of keys `low` and `low + 1`: each part's
    /// count of the greater key a sum (`counts`: part p's count of `low`
    /// at 2p, of `low + 1` at 2p + 1), the places in order, then each
    /// part's items placed from its two running places: chosen by
    /// arithmetic where every item is placed (a grade: no branch), by a
    /// branch on the key where only kept places are written (`some`: the
    /// test of the place then waits on the key alone, not on a product of
    /// it; a partition's last pass 30% faster, a grade's 70% slower).
    fn two_key_grade(
        &mut self,
        keys: &Val<'m>,
        n: &Expr,
        low: Var,
        (place, places): (Place<'_, 'm>, Places),
    ) -> Res<Vec<Stmt>> {
        let counts = self.fresh("counts");
        let mut stmts = vec![Stmt::Alloc {
            buf: counts,
            elem: Elem::Int,
            len: Expr::Int(2 * PARTS),
        }];
        let slot = |p: Var, k: i64| Expr::add(Expr::mul(Expr::Var(p), Expr::Int(2)), Expr::Int(k));
        // Part p of the items, `each` run for item lo + i after its key
        // less `low` (0 or 1) is bound to `high`.
        let part = |a: &mut Self,
                    start: &dyn Fn(Var) -> Vec<Stmt>,
                    each: PartItem<'_, 'm>,
                    end: &dyn Fn(Var, Var, Var) -> Vec<Stmt>|
         -> Res<Stmt> {
            let (p, lo, hi, i, high) = (
                a.fresh("part"),
                a.fresh("lo"),
                a.fresh("hi"),
                a.fresh("i"),
                a.fresh("high"),
            );
            let mut item = Vec::new();
            let key = a.key(keys, Expr::add(Expr::Var(lo), Expr::Var(i)), &mut item)?;
            item.push(int(high, op("-", key, Expr::Var(low))));
            a.loop_depth += 2;
            let r = each(a, high, Expr::add(Expr::Var(lo), Expr::Var(i)), &mut item);
            a.loop_depth -= 2;
            r?;
            let [from, to] = part_of(lo, hi, p, n);
            let mut body = vec![from, to];
            body.extend(start(p));
            body.push(Stmt::For {
                index: i,
                count: op("-", Expr::Var(hi), Expr::Var(lo)),
                parallel: false,
                body: item,
            });
            body.extend(end(p, lo, hi));
            Ok(Stmt::For {
                index: p,
                count: Expr::Int(PARTS),
                parallel: true,
                body,
            })
        };
        let highs = self.fresh("highs");
        let counted = part(
            self,
            &|_| vec![int(highs, Expr::Int(0))],
            &mut |_, high, _, item| {
                item.push(Stmt::Set {
                    var: highs,
                    value: Expr::add(Expr::Var(highs), Expr::Var(high)),
                });
                Ok(())
            },
            &|p, lo, hi| {
                vec![
                    Stmt::Store {
                        buf: counts,
                        index: slot(p, 0),
                        value: op("-", op("-", Expr::Var(hi), Expr::Var(lo)), Expr::Var(highs)),
                    },
                    Stmt::Store {
                        buf: counts,
                        index: slot(p, 1),
                        value: Expr::Var(highs),
                    },
                ]
            },
        )?;
        stmts.push(counted);
        // Each part's first place for each key: the lesser key's parts in
        // order, then the greater's.
        let (run, v, q, at, c) = (
            self.fresh("run"),
            self.fresh("v"),
            self.fresh("part"),
            self.fresh("at"),
            self.fresh("c"),
        );
        stmts.push(int(run, Expr::Int(0)));
        stmts.push(Stmt::For {
            index: v,
            count: Expr::Int(2),
            parallel: false,
            body: vec![Stmt::For {
                index: q,
                count: Expr::Int(PARTS),
                parallel: false,
                body: vec![
                    int(at, Expr::add(Expr::mul(Expr::Var(q), Expr::Int(2)), Expr::Var(v))),
                    int(c, Expr::load(counts, Expr::Var(at))),
                    Stmt::Store {
                        buf: counts,
                        index: Expr::Var(at),
                        value: Expr::Var(run),
                    },
                    Stmt::Set {
                        var: run,
                        value: Expr::add(Expr::Var(run), Expr::Var(c)),
                    },
                ],
            }],
        });
        // Each item's place: its key's running place, which then moves on.
        // Where exactly one key's items are kept (a `take*` of the count
        // of the lesser key, a `drop*` of it: known once the keys are
        // counted), only those places are written, in a branch on the key
        // (the same for every item: the C compiler makes it two loops).
        let exactly = match places {
            Some((from, count, counted)) => {
                // The lesser key's count: where the greater key's places
                // start.
                let (lesser, first, second) = (self.fresh("lesser"), self.fresh("kept"), self.fresh("kept"));
                let exactly = |at: Expr, many: Expr| {
                    op("and", op("==", from.clone(), at), op("==", count.clone(), many))
                };
                stmts.push(int(lesser, Expr::load(counts, Expr::Int(1))));
                if let Some(c) = counted {
                    let many = match c.key {
                        0 => Expr::Var(lesser),
                        _ => op("-", n.clone(), Expr::Var(lesser)),
                    };
                    stmts.push(int(c.var, many));
                    stmts.extend(c.then);
                }
                stmts.push(Stmt::Let {
                    var: first,
                    elem: Elem::Bool,
                    value: exactly(Expr::Int(0), Expr::Var(lesser)),
                });
                stmts.push(Stmt::Let {
                    var: second,
                    elem: Elem::Bool,
                    value: exactly(Expr::Var(lesser), op("-", n.clone(), Expr::Var(lesser))),
                });
                Some((first, second))
            }
            None => None,
        };
        let (lows, highs, at) = (self.fresh("lows"), self.fresh("highs"), self.fresh("at"));
        let placed = part(
            self,
            &|p| {
                vec![
                    int(lows, Expr::load(counts, slot(p, 0))),
                    int(highs, Expr::load(counts, slot(p, 1))),
                ]
            },
            &mut |a, high, item, each| {
                let h = || Expr::Var(high);
                let next = |v: Var| Stmt::Set {
                    var: v,
                    value: Expr::add(Expr::Var(v), Expr::Int(1)),
                };
                let Some((first, second)) = exactly else {
                    // A grade: every place, chosen by arithmetic.
                    each.push(int(
                        at,
                        Expr::add(
                            Expr::Var(lows),
                            Expr::mul(h(), op("-", Expr::Var(highs), Expr::Var(lows))),
                        ),
                    ));
                    each.push(Stmt::Set {
                        var: highs,
                        value: Expr::add(Expr::Var(highs), h()),
                    });
                    each.push(Stmt::Set {
                        var: lows,
                        value: Expr::add(Expr::Var(lows), op("-", Expr::Int(1), h())),
                    });
                    return place(a, Expr::Var(at), item, None, each);
                };
                // Only `key`'s items kept.
                let mut only = |a: &mut Self, key: i64| -> Res<Stmt> {
                    let (mut then, mut otherwise) = (Vec::new(), Vec::new());
                    place(a, Expr::Var(lows), item.clone(), Some(key == 0), &mut then)?;
                    then.push(next(lows));
                    place(a, Expr::Var(highs), item.clone(), Some(key == 1), &mut otherwise)?;
                    otherwise.push(next(highs));
                    Ok(Stmt::If {
                        cond: op("==", h(), Expr::Int(0)),
                        then,
                        otherwise,
                    })
                };
                let (lesser, greater) = (only(a, 0)?, only(a, 1)?);
                // Any places kept: each tested.
                let mut some = vec![
                    int(at, Expr::Var(lows)),
                    Stmt::If {
                        cond: op("==", h(), Expr::Int(0)),
                        then: vec![next(lows)],
                        otherwise: vec![
                            Stmt::Set {
                                var: at,
                                value: Expr::Var(highs),
                            },
                            next(highs),
                        ],
                    },
                ];
                place(a, Expr::Var(at), item, None, &mut some)?;
                each.push(Stmt::If {
                    cond: Expr::Var(first),
                    then: vec![lesser],
                    otherwise: vec![Stmt::If {
                        cond: Expr::Var(second),
                        then: vec![greater],
                        otherwise: some,
                    }],
                });
                Ok(())
            },
            &|_, _, _| Vec::new(),
        )?;
        stmts.push(placed);
        Ok(stmts)
    }

    /// The keys stored (on the threads), then graded by the runtime.
    fn stored_grade(&mut self, keys: &Val<'m>, n: &Expr, out: &View) -> Res<Vec<Stmt>> {
        let mut stmts = Vec::new();
        let stored = self.alloc("keys", Elem::Int, vec![n.clone()], &mut stmts);
        let i = self.fresh("i");
        let mut each = Vec::new();
        self.loop_depth += 1;
        let key = self.element(keys, &[Expr::Var(i)], &mut each);
        self.loop_depth -= 1;
        each.push(Stmt::Store {
            buf: stored.buf,
            index: Expr::Var(i),
            value: key?,
        });
        stmts.push(Stmt::For {
            index: i,
            count: n.clone(),
            parallel: true,
            body: each,
        });
        stmts.push(Stmt::Call {
            func: "rt_grade_int",
            args: vec![
                Expr::Addr {
                    buf: stored.buf,
                    index: Box::new(Expr::Int(0)),
                },
                Expr::Int(1),
                n.clone(),
                Expr::Addr {
                    buf: out.buf,
                    index: Box::new(out.offset.clone()),
                },
            ],
        });
        Ok(stmts)
    }
}

/// Whether the one map reading `var` (see `used_once_by_a_map`) is what
/// `take*` or `drop*` keeps part of, outside any map's cell and any
/// function (so that the `let` and it run at the same level).
fn kept_in_part(var: VarId, later: &[maps::Bind], inner: &maps::Expr) -> bool {
    let mut found = false;
    let mut look = |e: &maps::Expr| {
        let mut nested: Vec<*const maps::Expr> = Vec::new();
        let mut kept: Vec<*const maps::Expr> = Vec::new();
        e.each(&mut |x| match &x.kind {
            Kind::Map { frame, body, .. } if !frame.is_scalar() => {
                body.each(&mut |y| nested.push(std::ptr::from_ref(y)));
            }
            Kind::Array { atoms, .. } => {
                for a in atoms {
                    if let Atom::Lambda { body, .. }
                    | Atom::TLambda { body, .. }
                    | Atom::ILambda { body, .. } = a
                    {
                        body.each(&mut |y| nested.push(std::ptr::from_ref(y)));
                    }
                }
            }
            Kind::App { func, args } if matches!(prim_of(func), Some("take*" | "drop*")) => {
                if let [_, m] = args.as_slice()
                    && let Kind::Map { frame, binds, .. } = &m.kind
                    && !frame.is_scalar()
                    && binds
                        .iter()
                        .any(|b| matches!(b.value.kind, Kind::Var(v) if v == var))
                {
                    kept.push(std::ptr::from_ref(x));
                }
            }
            _ => {}
        });
        found |= kept.iter().any(|k| !nested.contains(k));
    };
    for b in later {
        look(&b.value);
    }
    look(inner);
    found
}

/// The least and greatest key a map of keys can give, where its cell
/// says: `bool->i` of anything, an Int literal, either arm of an `if` or
/// `select` (through `let`s).
fn key_range(map: &maps::Expr) -> Option<(i64, i64)> {
    fn range(e: &maps::Expr) -> Option<(i64, i64)> {
        let either = |a: &maps::Expr, b: &maps::Expr| {
            let (a, b) = (range(a)?, range(b)?);
            Some((a.0.min(b.0), a.1.max(b.1)))
        };
        match &e.kind {
            Kind::Array { shape, atoms } if shape.is_empty() => match atoms.as_slice() {
                [Atom::Int(k)] => Some((*k, *k)),
                _ => None,
            },
            Kind::Map { frame, body, .. } if frame.is_scalar() => range(body),
            Kind::If { then, otherwise, .. } => either(then, otherwise),
            Kind::App { func, args } => match (prim_of(func)?, args.as_slice()) {
                ("bool->i", [_]) => Some((0, 1)),
                ("select", [_, a, b]) => either(a, b),
                _ => None,
            },
            _ => None,
        }
    }
    match &map.kind {
        Kind::Map { body, .. } => range(body),
        _ => None,
    }
}

/// The flags `count` counts (a variable), and whether it counts those set
/// (the flags themselves) or those unset (a map of `(not k)` over them).
fn counted_flags(e: &maps::Expr) -> Option<(VarId, bool)> {
    match &e.kind {
        Kind::Var(v) => Some((*v, true)),
        _ => {
            let (flags, [set, unset]) = of_one_flag(e)?;
            match (set, unset) {
                (Const::Bool(true), Const::Bool(false)) => Some((flags, true)),
                (Const::Bool(false), Const::Bool(true)) => Some((flags, false)),
                _ => None,
            }
        }
    }
}

/// The flags a map's only array is, and the map's cell where a flag is
/// set and where it is unset, where [`constant`] knows them.
fn of_one_flag(map: &maps::Expr) -> Option<(VarId, [Const; 2])> {
    let Kind::Map { binds, body, .. } = &map.kind else {
        return None;
    };
    let [b] = binds.as_slice() else {
        return None;
    };
    let Kind::Var(flags) = b.value.kind else {
        return None;
    };
    let cell = |flag: bool| constant(body, &mut vec![(b.var, Const::Bool(flag))]);
    Some((flags, [cell(true)?, cell(false)?]))
}

/// The keys of a map of keys whose only array is the flags `flags` (its
/// cell a function of one flag: `(bool->i (not k))`, `(select k 0 1)` …):
/// the key of a set flag and of an unset one.
fn flag_keys(map: &maps::Expr, flags: VarId) -> Option<(i64, i64)> {
    match of_one_flag(map)? {
        (v, [Const::Int(set), Const::Int(unset)]) if v == flags => Some((set, unset)),
        _ => None,
    }
}

/// A scalar whose value [`constant`] knows.
#[derive(Clone, Copy)]
enum Const {
    Int(i64),
    Bool(bool),
}

/// The value of a scalar expression of literals and the variables of
/// `known` by `not`, `bool->i`, `select`, `if` and `let`, if it is one.
fn constant(e: &maps::Expr, known: &mut Vec<(VarId, Const)>) -> Option<Const> {
    match &e.kind {
        Kind::Var(v) => known.iter().rev().find(|(w, _)| w == v).map(|(_, c)| *c),
        Kind::Array { shape, atoms } if shape.is_empty() => match atoms.as_slice() {
            [Atom::Int(k)] => Some(Const::Int(*k)),
            [Atom::Bool(b)] => Some(Const::Bool(*b)),
            _ => None,
        },
        Kind::Map { frame, binds, body } if frame.is_scalar() => {
            let before = known.len();
            for b in binds {
                let c = constant(&b.value, known)?;
                known.push((b.var, c));
            }
            let c = constant(body, known);
            known.truncate(before);
            c
        }
        Kind::If {
            cond,
            then,
            otherwise,
        } => match constant(cond, known)? {
            Const::Bool(true) => constant(then, known),
            Const::Bool(false) => constant(otherwise, known),
            Const::Int(_) => None,
        },
        Kind::App { func, args } => match (prim_of(func)?, args.as_slice()) {
            ("bool->i", [x]) => match constant(x, known)? {
                Const::Bool(b) => Some(Const::Int(i64::from(b))),
                Const::Int(_) => None,
            },
            ("not", [x]) => match constant(x, known)? {
                Const::Bool(b) => Some(Const::Bool(!b)),
                Const::Int(_) => None,
            },
            ("select", [c, a, b]) => match constant(c, known)? {
                Const::Bool(true) => constant(a, known),
                Const::Bool(false) => constant(b, known),
                Const::Int(_) => None,
            },
            _ => None,
        },
        _ => None,
    }
}

/// An exclusive Int sum scan of flags not made: `(scan + z (bool->i K))`,
/// `let`-bound and read only by `last` (the start and the count of the
/// flags) and, through `curtail`, as the places of a scatter of the
/// kept items (`(select K (curtail S) c)`, `c` negative: the compaction
/// written by hand), outside any map's cell and any function. Each part's
/// count of the flags is made where it is bound (on the threads), and
/// each part's first place from them; the scatter writes each kept item
/// at its place from its part's (a two-pass stream compaction: no scan
/// in memory, no check of the places, which strictly increase). Read any
/// other way, the scan is made then.
pub(super) struct Offsets<'m> {
    /// The variable the scan's map reads its flags from, and their value.
    flags_var: VarId,
    flags: Val<'m>,
    n: Expr,
    /// The scan's first item.
    start: Expr,
    /// Each part's count of the flags before it (`PARTS` Ints), then the
    /// count of all.
    starts: Var,
    /// How many flags are set.
    total: Var,
    /// The scatters of the kept items whose places after the last kept
    /// item nothing reads (their results read only by `take*` of `(last
    /// S)` items): those places are not copied.
    tails_unread: Vec<*const maps::Expr>,
}

impl<'m> Alloc<'m> {
    /// `b`, a `let`'s binding of an exclusive sum scan of flags read only
    /// as [`Offsets`] describes (`later` and `inner` the rest of the
    /// `let`): each part's count made, the scan not.
    pub(super) fn offsets(
        &mut self,
        b: &'m maps::Bind,
        later: &'m [maps::Bind],
        inner: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Option<Val<'m>>> {
        let Some((start, flags_var, frame)) = flag_scan(&b.value) else {
            return Ok(None);
        };
        if self.loop_depth != 0 || !read_as_offsets(b.var, flags_var, later, inner) {
            return Ok(None);
        }
        let flags = match self.scope.vars.get(&flags_var) {
            Some(v @ (Val::Array(_) | Val::Delayed(_))) => v.clone(),
            _ => return Ok(None),
        };
        let dims = self.dims(frame)?;
        let [n] = dims.as_slice() else {
            return Ok(None);
        };
        let n = n.clone();
        let start = match self.value(start, body)? {
            Val::Scalar(Elem::Int, x) => self.named_int("start", x, body),
            _ => return Ok(None),
        };
        // Each part's count of the flags (on the threads), then each
        // part's count before it, in order.
        let starts = self.fresh("starts");
        body.push(Stmt::Alloc {
            buf: starts,
            elem: Elem::Int,
            len: Expr::Int(PARTS + 1),
        });
        let (p, lo, hi, i, acc) = (
            self.fresh("part"),
            self.fresh("lo"),
            self.fresh("hi"),
            self.fresh("i"),
            self.fresh("kept"),
        );
        let mut each = Vec::new();
        let flag = self.key(&flags, Expr::add(Expr::Var(lo), Expr::Var(i)), &mut each)?;
        let [from, to] = part_of(lo, hi, p, &n);
        body.push(Stmt::For {
            index: p,
            count: Expr::Int(PARTS),
            parallel: true,
            body: vec![
                from,
                to,
                Stmt::Reduce {
                    acc,
                    elem: Elem::Int,
                    op: "+",
                    seed: Some(Expr::Int(0)),
                    order: Order::Left,
                    index: i,
                    count: op("-", Expr::Var(hi), Expr::Var(lo)),
                    body: each,
                    item: Expr::op("bool->i", vec![flag]),
                },
                Stmt::Store {
                    buf: starts,
                    index: Expr::Var(p),
                    value: Expr::Var(acc),
                },
            ],
        });
        let (total, q, c) = (self.fresh("total"), self.fresh("part"), self.fresh("c"));
        body.push(int(total, Expr::Int(0)));
        body.push(Stmt::For {
            index: q,
            count: Expr::Int(PARTS),
            parallel: false,
            body: vec![
                int(c, Expr::load(starts, Expr::Var(q))),
                Stmt::Store {
                    buf: starts,
                    index: Expr::Var(q),
                    value: Expr::Var(total),
                },
                Stmt::Set {
                    var: total,
                    value: Expr::add(Expr::Var(total), Expr::Var(c)),
                },
            ],
        });
        body.push(Stmt::Store {
            buf: starts,
            index: Expr::Int(PARTS),
            value: Expr::Var(total),
        });
        Ok(Some(Val::Offsets(Rc::new(Offsets {
            flags_var,
            flags,
            n,
            start,
            starts,
            total,
            tails_unread: tails_unread(b.var, later, inner),
        }))))
    }

    /// The scan [`Offsets`] did not make, made (read other than it
    /// describes): its start, then each item from the one before.
    pub(super) fn offsets_made(&mut self, o: &Offsets<'m>, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        let out = self.alloc(
            "scan",
            Elem::Int,
            vec![Expr::add(o.n.clone(), Expr::Int(1))],
            body,
        );
        body.push(Stmt::Store {
            buf: out.buf,
            index: out.offset.clone(),
            value: o.start.clone(),
        });
        let k = self.fresh("k");
        let mut each = Vec::new();
        self.loop_depth += 1;
        let flag = self.element(&o.flags, &[Expr::Var(k)], &mut each);
        self.loop_depth -= 1;
        each.push(Stmt::Store {
            buf: out.buf,
            index: out.cell(&[Expr::add(Expr::Var(k), Expr::Int(1))]).offset,
            value: Expr::add(out.cell(&[Expr::Var(k)]).load(), Expr::op("bool->i", vec![flag?])),
        });
        body.push(Stmt::For {
            index: k,
            count: o.n.clone(),
            parallel: false,
            body: each,
        });
        Ok(Val::Array(out))
    }

    /// `e` where it reads [`Offsets`] as they describe: `(last S)`, the
    /// start and the count, or the scatter of the kept items.
    pub(super) fn offsets_use(&mut self, e: &'m maps::Expr, body: &mut Vec<Stmt>) -> Res<Option<Val<'m>>> {
        let Kind::App { func, args } = &e.kind else {
            return Ok(None);
        };
        let offsets = |a: &Self, s: VarId| match a.scope.vars.get(&s) {
            Some(Val::Offsets(o)) => Some(o.clone()),
            _ => None,
        };
        match (prim_of(func), args.as_slice()) {
            (Some("last"), [s]) => {
                let Some(o) = (match s.kind {
                    Kind::Var(s) => offsets(self, s),
                    _ => None,
                }) else {
                    return Ok(None);
                };
                Ok(Some(Val::Scalar(
                    Elem::Int,
                    Expr::add(o.start.clone(), Expr::Var(o.total)),
                )))
            }
            (Some("scatter"), [dest, idx, src]) if self.loop_depth == 0 => {
                let Some(o) =
                    compaction_places(idx).and_then(|(s, k)| offsets(self, s).filter(|o| o.flags_var == k))
                else {
                    return Ok(None);
                };
                let dest = self.value(dest, body)?;
                let dest = self.force(dest, body)?;
                let src = self.value(src, body)?;
                let src = self.force(src, body)?;
                let (Val::Array(dest), Val::Array(src)) = (dest, src) else {
                    return Ok(None);
                };
                self.compaction(&o, &dest, &src, e, body).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// `dest` with the items of `src` whose flags `o` reads set written
    /// from place `o.start` on, in order (those past the end skipped):
    /// `dest`'s other items copied (after the last kept item's place, only
    /// where they are read), then each part's kept items written from its
    /// first place (on the threads).
    fn compaction(
        &mut self,
        o: &Offsets<'m>,
        dest: &View,
        src: &View,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        let elem = elem_of(&e.ty.atom)?;
        let dims = self.dims(&e.ty.shape)?;
        let m = dims[0].clone();
        let out = self.alloc("scatter", elem, dims, body);
        // The places written: from `first` to `end` (within 0 … m).
        let clamp = |x: Expr| op("min", op("max", x, Expr::Int(0)), m.clone());
        let first = self.named_int("first", clamp(o.start.clone()), body);
        let items = |v: &View, from: &Expr, to: &Expr| View {
            offset: Expr::add(v.offset.clone(), Expr::mul(from.clone(), v.strides[0].clone())),
            dims: std::iter::once(op("-", to.clone(), from.clone()))
                .chain(v.dims[1..].iter().cloned())
                .collect(),
            ..v.clone()
        };
        let mut copied = vec![(Expr::Int(0), first)];
        if !o.tails_unread.contains(&std::ptr::from_ref(e)) {
            let end = clamp(Expr::add(o.start.clone(), Expr::Var(o.total)));
            copied.push((self.named_int("end", end, body), m.clone()));
        }
        for (from, to) in copied {
            self.copy(
                Val::Array(items(dest, &from, &to)),
                &items(&out, &from, &to),
                body,
            )?;
        }
        let (p, lo, hi, at, end) = (
            self.fresh("part"),
            self.fresh("lo"),
            self.fresh("hi"),
            self.fresh("at"),
            self.fresh("end"),
        );
        let item = |a: &mut Self, k: Var, branchless: bool, each: &mut Vec<Stmt>| -> Res<(Expr, Vec<Stmt>)> {
            let flag = a.key(&o.flags, Expr::Var(k), each)?;
            let mut kept = Vec::new();
            a.loop_depth += 3;
            let copied = a.copy(
                cell_val(src.cell(&[Expr::Var(k)])),
                &out.cell(&[Expr::Var(at)]),
                &mut kept,
            );
            a.loop_depth -= 3;
            copied?;
            if branchless {
                return Ok((flag, kept));
            }
            let placed = op(
                "and",
                op(">=", Expr::Var(at), Expr::Int(0)),
                op("<", Expr::Var(at), m.clone()),
            );
            Ok((
                flag,
                vec![Stmt::If {
                    cond: placed,
                    then: kept,
                    otherwise: Vec::new(),
                }],
            ))
        };
        // Items of atoms in blocks: a block fits where every place it may
        // write is its part's and within `dest`.
        let fits = |many: Expr| {
            op(
                "and",
                op(">=", Expr::Var(at), Expr::Int(0)),
                op("<=", Expr::add(Expr::Var(at), many), Expr::Var(end)),
            )
        };
        let atoms = src.dims.len() == 1;
        let copy_part = self.kept_in_blocks(
            at,
            (lo, hi),
            atoms.then_some(&fits as &dyn Fn(Expr) -> Expr),
            item,
        )?;
        let [from, to] = part_of(lo, hi, p, &o.n);
        let place = |q: Expr| Expr::add(o.start.clone(), Expr::load(o.starts, q));
        body.push(Stmt::For {
            index: p,
            count: Expr::Int(PARTS),
            parallel: true,
            body: vec![
                from,
                to,
                int(at, place(Expr::Var(p))),
                int(
                    end,
                    op("min", place(Expr::add(Expr::Var(p), Expr::Int(1))), m.clone()),
                ),
                copy_part,
            ],
        });
        Ok(Val::Array(out))
    }
}

/// The start, the flags' variable and the frame of `(scan + z (map
/// [n] ((f K)) (bool->i f)))`.
fn flag_scan(e: &maps::Expr) -> Option<(&maps::Expr, VarId, &Shape)> {
    let Kind::App { func, args } = &e.kind else {
        return None;
    };
    let [plus, start, m] = args.as_slice() else {
        return None;
    };
    if prim_of(func) != Some("scan") || !matches!(plus.kind, Kind::Prim("+")) {
        return None;
    }
    let Kind::Map { frame, binds, body } = &m.kind else {
        return None;
    };
    let [flag] = binds.as_slice() else {
        return None;
    };
    let (Kind::Var(k), Kind::App { func, args }) = (&flag.value.kind, &body.kind) else {
        return None;
    };
    match (prim_of(func), args.as_slice()) {
        (Some("bool->i"), [a]) if matches!(a.kind, Kind::Var(v) if v == flag.var) => Some((start, *k, frame)),
        _ => None,
    }
}

/// The scan's and the flags' variables of `idx`, a scatter's places, where
/// they are `(let ((x (curtail S))) (map [n] ((f K) (o x)) (select f o
/// c)))`, `c` a negative literal: each kept item's place, the others'
/// skipped.
fn compaction_places(idx: &maps::Expr) -> Option<(VarId, VarId)> {
    let Kind::Map { frame, binds, body } = &idx.kind else {
        return None;
    };
    let [x] = binds.as_slice() else {
        return None;
    };
    let Kind::App { func, args } = &x.value.kind else {
        return None;
    };
    let (Some("curtail"), [s], true) = (prim_of(func), args.as_slice(), frame.is_scalar()) else {
        return None;
    };
    let Kind::Var(s) = s.kind else {
        return None;
    };
    let Kind::Map { frame, binds, body } = &body.kind else {
        return None;
    };
    let Kind::App { func, args } = &body.kind else {
        return None;
    };
    let (Some("select"), [f, o, c], false) = (prim_of(func), args.as_slice(), frame.is_scalar()) else {
        return None;
    };
    let negative = matches!(&c.kind, Kind::Array { shape, atoms } if shape.is_empty()
        && matches!(atoms.as_slice(), [Atom::Int(c)] if *c < 0));
    let bound_to = |e: &maps::Expr| match e.kind {
        Kind::Var(v) => binds.iter().find(|b| b.var == v).map(|b| &b.value.kind),
        _ => None,
    };
    match (bound_to(f), bound_to(o)) {
        (Some(Kind::Var(k)), Some(Kind::Var(v))) if negative && *v == x.var && binds.len() == 2 => {
            Some((s, *k))
        }
        _ => None,
    }
}

/// Whether `s` (a scan of the flags `k`) is read only as [`Offsets`]
/// describes, in the rest of its `let` (`later`, `inner`).
fn read_as_offsets(s: VarId, k: VarId, later: &[maps::Bind], inner: &maps::Expr) -> bool {
    let mut ok = true;
    let mut look = |e: &maps::Expr| {
        let mut nested: Vec<*const maps::Expr> = Vec::new();
        let mut allowed: Vec<*const maps::Expr> = Vec::new();
        let mut reads: Vec<*const maps::Expr> = Vec::new();
        e.each(&mut |x| match &x.kind {
            Kind::Map { frame, body, .. } if !frame.is_scalar() => {
                body.each(&mut |y| nested.push(std::ptr::from_ref(y)));
            }
            Kind::Array { atoms, .. } => {
                for a in atoms {
                    if let Atom::Lambda { body, .. }
                    | Atom::TLambda { body, .. }
                    | Atom::ILambda { body, .. } = a
                    {
                        body.each(&mut |y| nested.push(std::ptr::from_ref(y)));
                    }
                }
            }
            Kind::Var(v) if *v == s => reads.push(std::ptr::from_ref(x)),
            Kind::App { func, args } => match (prim_of(func), args.as_slice()) {
                (Some("last"), [a]) => allowed.push(std::ptr::from_ref(a)),
                (Some("scatter"), [_, idx, _]) if compaction_places(idx) == Some((s, k)) => {
                    if let Kind::Map { binds, .. } = &idx.kind
                        && let Kind::App { args, .. } = &binds[0].value.kind
                    {
                        allowed.push(std::ptr::from_ref(&args[0]));
                    }
                }
                _ => {}
            },
            _ => {}
        });
        ok &= reads.iter().all(|r| allowed.contains(r) && !nested.contains(r));
    };
    for b in later {
        look(&b.value);
    }
    look(inner);
    ok
}

/// The scatters of kept items (by the places `s` gives, in `later`'s
/// bindings) whose results are read only as `(take* K P)`, `K` being
/// `(last s)` or a variable bound to it in `later`: read only up to the
/// last kept item's place.
fn tails_unread(s: VarId, later: &[maps::Bind], inner: &maps::Expr) -> Vec<*const maps::Expr> {
    let last_of_s = |e: &maps::Expr| match &e.kind {
        Kind::App { func, args } => {
            prim_of(func) == Some("last")
                && matches!(args.as_slice(), [a] if matches!(a.kind, Kind::Var(v) if v == s))
        }
        _ => false,
    };
    let counts: Vec<VarId> = later
        .iter()
        .filter(|b| last_of_s(&b.value))
        .map(|b| b.var)
        .collect();
    let mut found = Vec::new();
    for b in later {
        let Kind::App { func, args } = &b.value.kind else {
            continue;
        };
        if prim_of(func) != Some("scatter")
            || !matches!(args.as_slice(), [_, idx, _] if compaction_places(idx).is_some_and(|(v, _)| v == s))
        {
            continue;
        }
        let (mut reads, mut taken) = (0, 0);
        let mut look = |e: &maps::Expr| {
            e.each(&mut |x| match &x.kind {
                Kind::Var(v) if *v == b.var => reads += 1,
                Kind::App { func, args } if prim_of(func) == Some("take*") => {
                    if let [k, p] = args.as_slice()
                        && matches!(p.kind, Kind::Var(v) if v == b.var)
                        && (last_of_s(k) || matches!(k.kind, Kind::Var(v) if counts.contains(&v)))
                    {
                        taken += 1;
                    }
                }
                _ => {}
            });
        };
        for l in later {
            look(&l.value);
        }
        look(inner);
        if reads == taken {
            found.push(std::ptr::from_ref(&b.value));
        }
    }
    found
}

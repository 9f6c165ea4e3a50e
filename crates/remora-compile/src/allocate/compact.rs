//! Compaction: `grade` of a map of Int keys at the outermost level (the
//! grade of flags that puts the kept items first) without the keys ever
//! stored. The keys' range, by parts on the threads; where it spans fewer
//! than `SMALL_RANGE` values, a stable counting sort: each part's count
//! of each key (on the threads), the places in order, each part writing
//! its items' places (on the threads), each key computed where it is
//! read. Otherwise the keys are stored and graded by the runtime. The
//! counting sort is stable, so the grade is the interpreter's.

use super::*;

/// How many parts the keys are counted in.
const PARTS: i64 = 64;
/// Keys spanning fewer values than this are counted.
const SMALL_RANGE: i64 = 1024;

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
        let Val::Delayed(d) = keys else {
            return unsupported("grade of these arguments");
        };
        let n = d.dims[0].clone();
        let dims = self.dims(&e.ty.shape)?;
        let out = self.alloc("grade", Elem::Int, dims, body);
        let int = |var, value| Stmt::Let {
            var,
            elem: Elem::Int,
            value,
        };
        let set = |var, value| Stmt::Set { var, value };
        let op = |name: &'static str, a: Expr, b: Expr| Expr::op(name, vec![a, b]);
        let bound = |k: Expr| op("/", Expr::mul(k, n.clone()), Expr::Int(PARTS));

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
        body.push(Stmt::For {
            index: p,
            count: Expr::Int(PARTS),
            parallel: true,
            body: vec![
                int(lo, bound(Expr::Var(p))),
                int(hi, bound(Expr::add(Expr::Var(p), Expr::Int(1)))),
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
        let counted = self.counting_grade(keys, &n, low, span, &out)?;
        let stored = self.stored_grade(keys, &n, &out)?;
        body.push(Stmt::If {
            cond: small,
            then: counted,
            otherwise: stored,
        });
        Ok(Val::Array(out))
    }

    /// The key at `at` (code for it into `body`), computed inside a loop.
    fn key(&mut self, keys: &Val<'m>, at: Expr, body: &mut Vec<Stmt>) -> Res<Expr> {
        self.loop_depth += 2;
        let k = self.element(keys, &[at], body);
        self.loop_depth -= 2;
        k
    }

    /// The stable counting sort of keys from `low` spanning `span` + 1
    /// values, into `out`.
    fn counting_grade(
        &mut self,
        keys: &Val<'m>,
        n: &Expr,
        low: Var,
        span: Var,
        out: &View,
    ) -> Res<Vec<Stmt>> {
        let int = |var, value| Stmt::Let {
            var,
            elem: Elem::Int,
            value,
        };
        let op = |name: &'static str, a: Expr, b: Expr| Expr::op(name, vec![a, b]);
        let bound = |k: Expr| op("/", Expr::mul(k, n.clone()), Expr::Int(PARTS));
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
        let pass = |a: &mut Self, write: bool| -> Res<Stmt> {
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
                each.push(Stmt::Store {
                    buf: out.buf,
                    index: out.cell(&[Expr::Var(at)]).offset,
                    value: Expr::add(Expr::Var(lo), Expr::Var(i)),
                });
            }
            Ok(Stmt::For {
                index: p,
                count: Expr::Int(PARTS),
                parallel: true,
                body: vec![
                    int(lo, bound(Expr::Var(p))),
                    int(hi, bound(Expr::add(Expr::Var(p), Expr::Int(1)))),
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

//! The loops family: `iterate`, `while`, `scan`, `iscan`, `fold-right`,
//! `hist`, `scatter`, and the small `count`, `equal` and `select`.
//!
//! A state carried from step to step (`iterate`, `while`, `fold-right`)
//! is a scalar variable, or two buffers allocated before the loop: the
//! step is written into the second and the two trade places (a `swap`,
//! no copy), so a step whose value is a view of its argument (a
//! `reverse`) reads nothing it has already overwritten, and no step
//! allocates a state. A step that updates its state (a `scatter` into
//! it) writes over the state itself, one buffer (`inplace.rs`).

use super::*;

/// What a loop carries from one step to the next.
enum State {
    Scalar(Var, Elem),
    /// The state and the buffer the next one is written into.
    Array(View, View),
    /// A record: one state per field.
    Record(Vec<(String, State)>),
}

/// How many blocks a blocked scan splits its items into, and from how
/// many items it is blocked.
const SCAN_BLOCKS: i64 = 1024;
const BLOCKED_SCAN_FROM: i64 = 1 << 16;

/// From how many items a hist outside loops may split its bins into
/// parts, one thread each (the loop over the parts then counts as work
/// enough for the runtime to run it in parallel).
const HIST_PARTS_FROM: i64 = 1 << 14;

/// How many parts of its items a hist by an exact combining splits
/// them into (fixed, so that each part's count is known: see
/// [`Alloc::hist_by_items`]).
const HIST_ITEM_PARTS: i64 = 8;

/// The most bins of a hist by an exact combining over a count of items
/// known only at run time that still combines in parts of its items.
const HIST_ITEM_BINS: i64 = 1024;

/// The Int combinings whose bits do not depend on grouping or order
/// (Int arithmetic wraps), with their identities.
const EXACT_INT: &[(&str, i64)] = &[
    ("+", 0),
    ("*", 1),
    ("max", i64::MIN),
    ("min", i64::MAX),
    ("bit-and", -1),
    ("bit-or", 0),
    ("bit-xor", 0),
];

/// How many items a part of a hist's bins picks out its own from at a
/// time (see [`Alloc::hist_pick`]).
const HIST_PICK_BLOCK: i64 = 256;

/// What a hist's scan of its items combines: `op` on cells of `cell`
/// atoms `elem` into `out`'s bins, bin `idx[i]` from item `i` of `xs`
/// (`direct`: in place, else through a buffer).
struct HistScan<'a, 'm> {
    op: &'a Val<'m>,
    elem: Elem,
    cell: &'a [Expr],
    direct: bool,
    out: &'a View,
    idx: &'a View,
    xs: &'a View,
}

impl<'m> Alloc<'m> {
    pub(super) fn iteration(
        &mut self,
        name: &'static str,
        args: &[Val<'m>],
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Option<Res<Val<'m>>> {
        let r = match (name, args) {
            ("iterate", [n, f, x]) => self.iterate(n, f, x, e, body),
            ("while", [test, step, x]) => self.while_(test, step, x, e, body),
            ("scan", [op, z, Val::Array(xs)]) => self.scan(op, z, xs, e, body),
            ("scan", [_, z, xs @ Val::Delayed(_)]) => self.sum_scan_delayed(z, xs, e, body),
            ("iscan", [op, Val::Array(xs)]) => self.iscan(op, xs, e, body),
            ("iscan", [op, xs @ Val::Delayed(_)]) => self.iscan_of_delayed(op, xs, e, body),
            ("fold-right", [op, z, Val::Array(xs)]) => self.fold_right(op, z, xs, e, body),
            ("hist", [op, ne, idx @ (Val::Array(_) | Val::Delayed(_)), Val::Array(xs)]) => {
                self.hist(op, ne, idx, xs, e, body)
            }
            ("scatter", [dest, idx @ (Val::Array(_) | Val::Delayed(_)), src]) => {
                // (The indices only may come delayed: the others computed.)
                let dest = self.force(dest.clone(), body);
                let src = self.force(src.clone(), body);
                match (dest, src) {
                    (Ok(Val::Array(dest)), Ok(Val::Array(src))) => self.scatter(&dest, idx, &src, e, body),
                    (Err(why), _) | (_, Err(why)) => Err(why),
                    _ => return None,
                }
            }
            ("count", [xs]) => self.count(xs, body),
            ("equal", [a, b]) => self.equal(a, b, body),
            ("select", [c, a, b]) => self.select(c, a, b, e, body),
            _ => return None,
        };
        Some(r)
    }

    // -- states ----------------------------------------------------------------

    /// A state of `e`'s type starting from `init`.
    fn state(&mut self, init: &Val<'m>, e: &'m maps::Expr, body: &mut Vec<Stmt>) -> Res<State> {
        self.state_in(init, &[], &e.ty, body)
    }

    /// A state of type `ty` starting from `init`, inside the frame `frame`
    /// of the array of records whose field it is (a record: one state per
    /// field).
    fn state_in(&mut self, init: &Val<'m>, frame: &[Expr], ty: &Type, body: &mut Vec<Stmt>) -> Res<State> {
        let mut dims = frame.to_vec();
        dims.extend(self.dims(&ty.shape)?);
        if let TyAtom::Record(types) = &ty.atom {
            let Val::Record(inits) = init else {
                return unsupported("a loop whose record state starts from a record that is not one");
            };
            let mut fields = Vec::with_capacity(types.len());
            for (name, field_ty) in types.iter() {
                let Some((_, v)) = inits.iter().find(|(n, _)| n == name) else {
                    return unsupported(format!("a record without the field {name}"));
                };
                fields.push((name.clone(), self.state_in(v, &dims, field_ty, body)?));
            }
            return Ok(State::Record(fields));
        }
        let elem = elem_of(&ty.atom)?;
        self.state_of(init, elem, dims, body)
    }

    /// A state of atoms `elem`, of shape `dims`, starting from `init`.
    fn state_of(&mut self, init: &Val<'m>, elem: Elem, dims: Vec<Expr>, body: &mut Vec<Stmt>) -> Res<State> {
        if dims.is_empty() {
            let Some(x) = scalar_of(init) else {
                return unsupported("a loop whose state is a function");
            };
            let var = self.fresh("state");
            body.push(Stmt::Let { var, elem, value: x });
            return Ok(State::Scalar(var, elem));
        }
        let acc = self.alloc("state", elem, dims.clone(), body);
        self.copy(init.clone(), &acc, body)?;
        let next = self.alloc("next", elem, dims, body);
        Ok(State::Array(acc, next))
    }

    /// The second buffers of `s` that its steps (`steps`) never name (a
    /// state updated in place) no longer allocated.
    fn drop_unused_next(s: &State, steps: &[Stmt], body: &mut Vec<Stmt>) {
        match s {
            State::Array(_, next) => {
                if !steps.iter().any(|t| super::ranges::mentions(t, next.buf)) {
                    body.retain(|t| !matches!(t, Stmt::Alloc { buf, .. } if *buf == next.buf));
                }
            }
            State::Record(fields) => {
                for (_, field) in fields {
                    Self::drop_unused_next(field, steps, body);
                }
            }
            State::Scalar(..) => {}
        }
    }

    fn state_val(s: &State) -> Val<'m> {
        match s {
            State::Scalar(var, elem) => Val::Scalar(*elem, Expr::Var(*var)),
            State::Array(acc, _) => Val::Array(acc.clone()),
            State::Record(fields) => Val::Record(
                fields
                    .iter()
                    .map(|(name, s)| (name.clone(), Self::state_val(s)))
                    .collect(),
            ),
        }
    }

    /// The state replaced by `f` applied to `args`.
    fn step(
        &mut self,
        s: &State,
        f: &Val<'m>,
        args: Vec<Val<'m>>,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<()> {
        match s {
            State::Scalar(var, _) => {
                let v = self.apply(f.clone(), args, e, body)?;
                let Some(x) = scalar_of(&v) else {
                    return unsupported("a loop step that is not a scalar");
                };
                body.push(Stmt::Set { var: *var, value: x });
                Ok(())
            }
            State::Array(acc, next) => {
                // An update of the state written over it (no second
                // buffer: see `inplace`).
                if self.step_in_place(f, &args, acc, e, body)? {
                    return Ok(());
                }
                // The next state written into the other buffer, and the
                // two buffers exchanged (no copy back).
                self.apply_into(f, args, e, next, body)?;
                body.push(Stmt::Swap {
                    a: acc.buf,
                    b: next.buf,
                });
                Ok(())
            }
            State::Record(fields) => {
                // Array fields the step updates, written over their
                // states (see `inplace`); the others as below.
                let arrays: Vec<(String, View)> = fields
                    .iter()
                    .filter_map(|(name, s)| match s {
                        State::Array(acc, _) => Some((name.clone(), acc.clone())),
                        _ => None,
                    })
                    .collect();
                let v = match self.record_step_in_place(&arrays, f, &args, e, body)? {
                    Some(v) => v,
                    None => self.apply(f.clone(), args, e, body)?,
                };
                // Every field's next value computed (scalars into
                // temporaries, arrays into their next buffers) before
                // any state is replaced: a field's step may read another.
                let mut commits = Vec::new();
                self.step_fields(s, &v, &mut commits, body)?;
                body.extend(commits);
                Ok(())
            }
        }
    }

    /// A record state's next value `v` computed into temporaries (into
    /// `body`) and the statements that make it the state (into `commits`).
    fn step_fields(
        &mut self,
        s: &State,
        v: &Val<'m>,
        commits: &mut Vec<Stmt>,
        body: &mut Vec<Stmt>,
    ) -> Res<()> {
        match s {
            State::Scalar(var, elem) => {
                let Some(x) = scalar_of(v) else {
                    return unsupported("a loop step that is not a scalar");
                };
                let tmp = self.fresh("field");
                body.push(Stmt::Let {
                    var: tmp,
                    elem: *elem,
                    value: x,
                });
                commits.push(Stmt::Set {
                    var: *var,
                    value: Expr::Var(tmp),
                });
                Ok(())
            }
            State::Array(acc, next) => {
                // (A field updated in place is its state already.)
                if matches!(v, Val::Array(a) if inplace::same_view(a, acc)) {
                    return Ok(());
                }
                // Written into the other buffer, which trades places
                // with the state once every field is computed.
                self.copy(v.clone(), next, body)?;
                commits.push(Stmt::Swap {
                    a: acc.buf,
                    b: next.buf,
                });
                Ok(())
            }
            State::Record(fields) => {
                let Val::Record(vals) = v else {
                    return unsupported("a loop step whose record is not a record");
                };
                for (name, field) in fields {
                    let Some((_, x)) = vals.iter().find(|(n, _)| n == name) else {
                        return unsupported(format!("a record without the field {name}"));
                    };
                    self.step_fields(field, x, commits, body)?;
                }
                Ok(())
            }
        }
    }

    /// `f` applied to `args`, written into `dest`. A bare scalar primitive
    /// on array cells (an operator lifted to items) goes lane by lane.
    pub(super) fn apply_into(
        &mut self,
        f: &Val<'m>,
        args: Vec<Val<'m>>,
        e: &'m maps::Expr,
        dest: &View,
        body: &mut Vec<Stmt>,
    ) -> Res<()> {
        if let Val::Prim { name, .. } = f
            && !dest.dims.is_empty()
            && scalar_arity(name) == Some(args.len())
        {
            let views: Vec<&View> = args
                .iter()
                .filter_map(|a| match a {
                    Val::Array(v) if v.dims == dest.dims => Some(v),
                    _ => None,
                })
                .collect();
            if views.len() != args.len() {
                return unsupported(format!("{name} lifted over cells of other shapes"));
            }
            let lanes: Vec<Var> = dest.dims.iter().map(|_| self.fresh("l")).collect();
            let idx: Vec<Expr> = lanes.iter().map(|v| Expr::Var(*v)).collect();
            let value = Expr::op(name, views.iter().map(|v| v.cell(&idx).load()).collect());
            let mut inner = vec![Stmt::Store {
                buf: dest.buf,
                index: dest.cell(&idx).offset,
                value,
            }];
            let outer = self.loop_depth;
            inner = nest(&lanes, dest.dims.clone(), inner, outer);
            body.extend(inner);
            return Ok(());
        }
        // A function written in the program: its body written straight
        // into `dest` (no array of its own, no copy). (Every caller's
        // array `dest` is apart from the arguments.)
        if let Val::Func(_) = f
            && !args.is_empty()
            && !dest.dims.is_empty()
        {
            let mut args = args;
            let last = args.pop();
            let g = if args.is_empty() {
                f.clone()
            } else {
                self.apply(f.clone(), args, e, body)?
            };
            return match (g, last) {
                (Val::Func(c), Some(x)) if matches!(c.binder, Binder::Value(_)) => {
                    let Binder::Value(p) = c.binder else {
                        return unsupported("a step function of a type");
                    };
                    let saved = std::mem::replace(&mut self.scope, c.scope.clone());
                    self.scope.vars.insert(p, x);
                    let r = self.into(c.body, dest, body);
                    self.scope = saved;
                    r
                }
                (g, last) => {
                    let v = self.apply(g, last.into_iter().collect(), e, body)?;
                    self.copy(v, dest, body)
                }
            };
        }
        let v = self.apply(f.clone(), args, e, body)?;
        self.copy(v, dest, body)
    }

    /// `body` written as the body of a loop over the steps of a whole
    /// state (`iterate`, `while`): the loops of one step are the
    /// outermost ones that can run in parallel.
    fn in_steps(&mut self, write: impl FnOnce(&mut Self, &mut Vec<Stmt>) -> Res<()>) -> Res<Vec<Stmt>> {
        let mut inner = Vec::new();
        write(self, &mut inner).map(|()| inner)
    }

    /// `body` written as the body of a sequential loop (one level deeper).
    fn in_loop(&mut self, write: impl FnOnce(&mut Self, &mut Vec<Stmt>) -> Res<()>) -> Res<Vec<Stmt>> {
        self.loop_depth += 1;
        let mut inner = Vec::new();
        let r = write(self, &mut inner);
        self.loop_depth -= 1;
        r.map(|()| inner)
    }

    // -- the intrinsics --------------------------------------------------------

    fn iterate(
        &mut self,
        n: &Val<'m>,
        f: &Val<'m>,
        x: &Val<'m>,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        let Some(n) = scalar_of(n) else {
            return unsupported("iterate of an array of counts");
        };
        let count = self.fresh("count");
        body.push(Stmt::Let {
            var: count,
            elem: Elem::Int,
            value: n,
        });
        body.push(Stmt::If {
            cond: Expr::op("<", vec![Expr::Var(count), Expr::Int(0)]),
            then: vec![Stmt::Fail {
                what: "iterate: negative count".into(),
            }],
            otherwise: Vec::new(),
        });
        let s = self.state(x, e, body)?;
        let inner = self.in_steps(|a, inner| a.step(&s, f, vec![Self::state_val(&s)], e, inner))?;
        Self::drop_unused_next(&s, &inner, body);
        body.push(Stmt::For {
            index: self.fresh("k"),
            count: Expr::Var(count),
            parallel: false,
            body: inner,
        });
        Ok(Self::state_val(&s))
    }

    /// `fold` whose accumulator or items are records: one state per
    /// field, stepped left to right over the items of `xs`.
    pub(super) fn fold_records(
        &mut self,
        op: &Val<'m>,
        seed: &Val<'m>,
        xs: &Val<'m>,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        let Some(count) = records::leading_dim(xs) else {
            return unsupported("fold over records of this layout");
        };
        let s = self.state(seed, e, body)?;
        let k = self.fresh("k");
        let Some(item) = records::cell_val_of(xs, &[Expr::Var(k)]) else {
            return unsupported("fold over records of this layout");
        };
        let inner = self.in_steps(|a, inner| a.step(&s, op, vec![Self::state_val(&s), item], e, inner))?;
        Self::drop_unused_next(&s, &inner, body);
        body.push(Stmt::For {
            index: k,
            count,
            parallel: false,
            body: inner,
        });
        Ok(Self::state_val(&s))
    }

    fn while_(
        &mut self,
        test: &Val<'m>,
        step: &Val<'m>,
        x: &Val<'m>,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        let s = self.state(x, e, body)?;
        let go = self.fresh("go");
        let inner = self.in_steps(|a, inner| {
            let t = a.apply(test.clone(), vec![Self::state_val(&s)], e, inner)?;
            let Some(t) = scalar_of(&t) else {
                return unsupported("a while test that is not a scalar");
            };
            inner.push(Stmt::Let {
                var: go,
                elem: Elem::Bool,
                value: t,
            });
            let mut then = Vec::new();
            a.step(&s, step, vec![Self::state_val(&s)], e, &mut then)?;
            inner.push(Stmt::If {
                cond: Expr::Var(go),
                then,
                otherwise: Vec::new(),
            });
            Ok(())
        })?;
        Self::drop_unused_next(&s, &inner, body);
        body.push(Stmt::DoWhile {
            body: inner,
            cond: Expr::Var(go),
        });
        Ok(Self::state_val(&s))
    }

    /// The partial folds from `z`, each written beside the one before.
    fn scan(
        &mut self,
        op: &Val<'m>,
        z: &Val<'m>,
        xs: &View,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        let dims = self.dims(&e.ty.shape)?;
        self.scan_into(op, z, xs, e, dims, body).map(Val::Array)
    }

    /// [`Alloc::scan`] into a buffer of `dims` (its result's).
    fn scan_into(
        &mut self,
        op: &Val<'m>,
        z: &Val<'m>,
        xs: &View,
        e: &'m maps::Expr,
        dims: Vec<Expr>,
        body: &mut Vec<Stmt>,
    ) -> Res<View> {
        let elem = elem_of(&e.ty.atom)?;
        let out = self.alloc("scan", elem, dims, body);
        self.scan_in_place(op, z, xs, e, &out, body)?;
        Ok(out)
    }

    /// [`Alloc::scan`] into `out`, a buffer of one more item than `xs`.
    fn scan_in_place(
        &mut self,
        op: &Val<'m>,
        z: &Val<'m>,
        xs: &View,
        e: &'m maps::Expr,
        out: &View,
        body: &mut Vec<Stmt>,
    ) -> Res<()> {
        let elem = out.elem;
        self.copy(z.clone(), &out.cell(&[Expr::Int(0)]), body)?;
        let k = self.fresh("k");
        let inner = self.in_loop(|a, inner| {
            let acc = cell_val(out.cell(&[Expr::Var(k)]));
            let item = cell_val(xs.cell(&[Expr::Var(k)]));
            let dest = out.cell(&[Expr::add(Expr::Var(k), Expr::Int(1))]);
            a.apply_into(op, vec![acc, item], e, &dest, inner)
        })?;
        let in_order = Stmt::For {
            index: k,
            count: xs.dims[0].clone(),
            parallel: false,
            body: inner,
        };
        // Scans by an exact combining (an Int sum, a running maximum …) at
        // the outermost level: in blocks on several threads (wrapping
        // arithmetic, and f.max and f.min, which take the last of the
        // greatest or least items or NaN, give the same bits in any
        // grouping).
        if self.loop_depth == 0
            && xs.dims.len() == 1
            && let Some(exact) = self.exact_scan(op, elem)
        {
            let blocked = self.blocked_scan(exact, elem, &Val::Array(xs.clone()), xs.dims[0].clone(), out)?;
            body.push(Stmt::If {
                cond: Expr::op(">=", vec![xs.dims[0].clone(), Expr::Int(BLOCKED_SCAN_FROM)]),
                then: blocked,
                otherwise: vec![in_order],
            });
            return Ok(());
        }
        body.extend(self.written_in_order(out, in_order));
        Ok(())
    }

    /// `chain`, a loop on this thread writing `out` in order, with `out`'s
    /// pages faulted in by another thread meanwhile (the runtime's
    /// `rt_populate_begin`: a float scan's chain then does not stop at
    /// each fresh page), where no loop encloses it.
    fn written_in_order(&self, out: &View, chain: Stmt) -> Vec<Stmt> {
        if self.loop_depth != 0 {
            return vec![chain];
        }
        let size = atom_bytes(out.elem);
        vec![
            Stmt::Call {
                func: "rt_populate_begin",
                args: vec![
                    Expr::Addr {
                        buf: out.buf,
                        index: Box::new(out.offset.clone()),
                    },
                    product(&out.dims),
                    Expr::Int(size),
                ],
            },
            chain,
            Stmt::Call {
                func: "rt_populate_end",
                args: Vec::new(),
            },
        ]
    }

    /// The exact Int combining (see [`EXACT_INT`]) that `op` applies
    /// elementwise, and its identity.
    fn exact_int(&self, op: &Val<'m>) -> Option<(&'static str, i64)> {
        let name = self.elementwise(op)?;
        EXACT_INT.iter().find(|(n, _)| *n == name).copied()
    }

    /// The exact combining of atoms `elem` that `op` applies elementwise,
    /// and its identity: an Int one of [`EXACT_INT`], or `f.max` (from
    /// -Infinity) or `f.min` (from Infinity) of Floats.
    fn exact_scan(&self, op: &Val<'m>, elem: Elem) -> Option<(&'static str, Expr)> {
        match elem {
            Elem::Int => self
                .exact_int(op)
                .map(|(name, identity)| (name, Expr::Int(identity))),
            Elem::Float => match self.elementwise(op)? {
                "f.max" => Some(("f.max", Expr::Float(f32::NEG_INFINITY))),
                "f.min" => Some(("f.min", Expr::Float(f32::INFINITY))),
                _ => None,
            },
            Elem::Bool => None,
        }
    }

    /// An exclusive Int scan by an exact combining `op` (of `identity`)
    /// of the `n` items of `xs` (a vector or a delayed map) into `out`
    /// (its item 0 already the start) in `SCAN_BLOCKS` blocks: each
    /// block's combination (in parallel), the blocks' starts (in order),
    /// each block's partial combinations from its start (in parallel).
    fn blocked_scan(
        &mut self,
        (op, identity): (&'static str, Expr),
        elem: Elem,
        xs: &Val<'m>,
        n: Expr,
        out: &View,
    ) -> Res<Vec<Stmt>> {
        let size = self.fresh("size");
        let sums = self.fresh("sums");
        let mut stmts = vec![
            Stmt::Let {
                var: size,
                elem: Elem::Int,
                value: Expr::op(
                    "/",
                    vec![
                        Expr::add(n.clone(), Expr::Int(SCAN_BLOCKS - 1)),
                        Expr::Int(SCAN_BLOCKS),
                    ],
                ),
            },
            Stmt::Alloc {
                buf: sums,
                elem,
                len: Expr::Int(SCAN_BLOCKS),
            },
        ];
        // Block b: items lo … lo + count - 1.
        let block = |a: &mut Self, b: Var| {
            let (lo, count) = (a.fresh("lo"), a.fresh("count"));
            let lets = vec![
                Stmt::Let {
                    var: lo,
                    elem: Elem::Int,
                    value: Expr::mul(Expr::Var(b), Expr::Var(size)),
                },
                Stmt::Let {
                    var: count,
                    elem: Elem::Int,
                    value: Expr::op(
                        "max",
                        vec![
                            Expr::op(
                                "-",
                                vec![
                                    Expr::op(
                                        "min",
                                        vec![Expr::add(Expr::Var(lo), Expr::Var(size)), n.clone()],
                                    ),
                                    Expr::Var(lo),
                                ],
                            ),
                            Expr::Int(0),
                        ],
                    ),
                },
            ];
            (lo, count, lets)
        };
        let start = self.scalar_of_cell(out);
        // Each block's sum.
        let b = self.fresh("b");
        let (lo, count, mut first) = block(self, b);
        let (k, acc) = (self.fresh("k"), self.fresh("acc"));
        let mut lets = Vec::new();
        self.loop_depth += 2;
        let item = self.element(xs, &[Expr::add(Expr::Var(lo), Expr::Var(k))], &mut lets);
        self.loop_depth -= 2;
        first.push(Stmt::Reduce {
            acc,
            elem,
            op,
            seed: Some(identity),
            order: Order::Left,
            index: k,
            count: Expr::Var(count),
            body: lets,
            item: item?,
        });
        first.push(Stmt::Store {
            buf: sums,
            index: Expr::Var(b),
            value: Expr::Var(acc),
        });
        stmts.push(Stmt::For {
            index: b,
            count: Expr::Int(SCAN_BLOCKS),
            parallel: true,
            body: first,
        });
        // The blocks' starts, in order.
        let (b, run, s) = (self.fresh("b"), self.fresh("run"), self.fresh("s"));
        stmts.push(Stmt::Let {
            var: run,
            elem,
            value: start,
        });
        stmts.push(Stmt::For {
            index: b,
            count: Expr::Int(SCAN_BLOCKS),
            parallel: false,
            body: vec![
                Stmt::Let {
                    var: s,
                    elem,
                    value: Expr::load(sums, Expr::Var(b)),
                },
                Stmt::Store {
                    buf: sums,
                    index: Expr::Var(b),
                    value: Expr::Var(run),
                },
                Stmt::Set {
                    var: run,
                    value: Expr::op(op, vec![Expr::Var(run), Expr::Var(s)]),
                },
            ],
        });
        // Each block's partial sums from its start.
        let b = self.fresh("b");
        let (lo, count, mut second) = block(self, b);
        let (k, r, at) = (self.fresh("k"), self.fresh("r"), self.fresh("at"));
        second.push(Stmt::Let {
            var: r,
            elem,
            value: Expr::load(sums, Expr::Var(b)),
        });
        let mut each = vec![Stmt::Let {
            var: at,
            elem: Elem::Int,
            value: Expr::add(Expr::Var(lo), Expr::Var(k)),
        }];
        self.loop_depth += 2;
        let item = self.element(xs, &[Expr::Var(at)], &mut each);
        self.loop_depth -= 2;
        each.push(Stmt::Set {
            var: r,
            value: Expr::op(op, vec![Expr::Var(r), item?]),
        });
        each.push(Stmt::Store {
            buf: out.buf,
            index: out.cell(&[Expr::add(Expr::Var(at), Expr::Int(1))]).offset,
            value: Expr::Var(r),
        });
        second.push(Stmt::For {
            index: k,
            count: Expr::Var(count),
            parallel: false,
            body: each,
        });
        stmts.push(Stmt::For {
            index: b,
            count: Expr::Int(SCAN_BLOCKS),
            parallel: true,
            body: second,
        });
        Ok(stmts)
    }

    /// Whether `scan` of `args` takes its items delayed (a map computed
    /// item by item where the scan reads it, never stored): an Int sum
    /// scan at the outermost level of a map of Ints that cannot fail (the
    /// blocked scan reads each item twice).
    pub(super) fn sum_scan_of_map(&self, args: &[Val<'m>]) -> bool {
        match args {
            [op, z, Val::Delayed(d)] => {
                self.loop_depth == 0
                    && d.dims.len() == 1
                    && d.elem == Elem::Int
                    && !d.transposed
                    && cannot_fail(d.map)
                    && matches!(z, Val::Scalar(Elem::Int, _))
                    && self.elementwise(op) == Some("+")
            }
            _ => false,
        }
    }

    /// `scan` of `+` from `z` over a delayed map of Ints (see
    /// [`Alloc::sum_scan_of_map`]): blocked over many items, else in order.
    fn sum_scan_delayed(
        &mut self,
        z: &Val<'m>,
        xs: &Val<'m>,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        let dims = self.dims(&e.ty.shape)?;
        let out = self.alloc("scan", Elem::Int, dims, body);
        self.copy(z.clone(), &out.cell(&[Expr::Int(0)]), body)?;
        let Val::Delayed(d) = xs else {
            return unsupported("scan of these arguments");
        };
        let n = d.dims[0].clone();
        let k = self.fresh("k");
        let mut each = Vec::new();
        self.loop_depth += 1;
        let item = self.element(xs, &[Expr::Var(k)], &mut each);
        self.loop_depth -= 1;
        each.push(Stmt::Store {
            buf: out.buf,
            index: out.cell(&[Expr::add(Expr::Var(k), Expr::Int(1))]).offset,
            value: Expr::op("+", vec![out.cell(&[Expr::Var(k)]).load(), item?]),
        });
        let in_order = Stmt::For {
            index: k,
            count: n.clone(),
            parallel: false,
            body: each,
        };
        let blocked = self.blocked_scan(("+", Expr::Int(0)), Elem::Int, xs, n.clone(), &out)?;
        body.push(Stmt::If {
            cond: Expr::op(">=", vec![n, Expr::Int(BLOCKED_SCAN_FROM)]),
            then: blocked,
            otherwise: vec![in_order],
        });
        Ok(Val::Array(out))
    }

    /// The atom at item 0 of `out`.
    fn scalar_of_cell(&self, out: &View) -> Expr {
        out.cell(&[Expr::Int(0)]).load()
    }

    /// The partial reductions: item 0, then each from the one before.
    fn iscan(&mut self, op: &Val<'m>, xs: &View, e: &'m maps::Expr, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        let elem = elem_of(&e.ty.atom)?;
        // An Int scan by an exact combining: the exclusive scan from its
        // identity (in blocks on the threads, as `scan`'s), all but its
        // first item.
        if self.loop_depth == 0
            && elem == Elem::Int
            && xs.dims.len() == 1
            && let Some((_, identity)) = self.exact_int(op)
        {
            let n = xs.dims[0].clone();
            let zero = Val::Scalar(Elem::Int, Expr::Int(identity));
            let whole = self.scan_into(op, &zero, xs, e, vec![Expr::add(n.clone(), Expr::Int(1))], body)?;
            return Ok(Val::Array(View {
                offset: Expr::add(whole.offset, Expr::Int(1)),
                dims: vec![n],
                ..whole
            }));
        }
        let dims = self.dims(&e.ty.shape)?;
        let out = self.alloc("iscan", elem, dims, body);
        // A Float scan by f.max or f.min: item 0 itself (a NaN's bits
        // kept), then the exclusive scan of the others from it, in blocks
        // on the threads over many items.
        if self.loop_depth == 0
            && elem == Elem::Float
            && xs.dims.len() == 1
            && self.exact_scan(op, elem).is_some()
        {
            let n = xs.dims[0].clone();
            let rest = View {
                offset: Expr::add(xs.offset.clone(), xs.strides[0].clone()),
                dims: vec![Expr::op("-", vec![n.clone(), Expr::Int(1)])],
                ..xs.clone()
            };
            let first = cell_val(xs.cell(&[Expr::Int(0)]));
            let mut some = Vec::new();
            self.scan_in_place(op, &first, &rest, e, &out, &mut some)?;
            body.push(Stmt::If {
                cond: Expr::op(">", vec![n, Expr::Int(0)]),
                then: some,
                otherwise: Vec::new(),
            });
            return Ok(Val::Array(out));
        }
        self.iscan_into(op, xs, e, &out, body)?;
        Ok(Val::Array(out))
    }

    /// A `let`-bound `iscan` whose variable is read once, as the items of a
    /// `filter`, where no loop encloses it: not made (see [`Scanned`]).
    pub(super) fn scanned(
        &mut self,
        b: &'m maps::Bind,
        later: &'m [maps::Bind],
        inner: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Option<Val<'m>>> {
        let Kind::App { func, args } = &b.value.kind else {
            return Ok(None);
        };
        if prim_of(func) != Some("iscan")
            || self.loop_depth != 0
            || matches!(b.value.ty.atom, TyAtom::Record(_))
            || !filtered_once(b.var, later, inner)
        {
            return Ok(None);
        }
        let f = self.value(func, body)?;
        let mut vals = self.arguments(&f, args, body)?;
        let exact = matches!(vals.as_slice(), [op, Val::Array(xs)]
            if xs.dims.len() == 1 && xs.elem == Elem::Int && self.exact_int(op).is_some());
        if exact || vals.len() != 2 {
            // (An exact Int scan runs in blocks on the threads: made.)
            let v = self.apply(f, vals, &b.value, body)?;
            return Ok(Some(v));
        }
        if !self.iscan_of_map(&vals) {
            let items = self.force(vals[1].clone(), body)?;
            vals[1] = items;
        }
        Ok(Some(Val::Scanned(Rc::new(Scanned {
            func: f,
            args: vals,
            e: &b.value,
        }))))
    }

    /// The `iscan` [`Scanned`] did not make, made (read other than by a
    /// `filter`).
    pub(super) fn scanned_made(&mut self, s: &Scanned<'m>, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        self.apply(s.func.clone(), s.args.clone(), s.e, body)
    }

    /// `e` where it is a `filter` of the items of a [`Scanned`]: one
    /// sequential loop, the scan's state stepped item by item (each item
    /// computed there, where it is a delayed map) and written at the next
    /// place where its flag is set. The kept cells' buffer has room for
    /// every item (a page of it is faulted in only where a kept cell is
    /// written); its first `kept` cells are the result. Each cell is the
    /// scan's own, in order: the same bits.
    pub(super) fn scanned_filter(&mut self, e: &'m maps::Expr, body: &mut Vec<Stmt>) -> Res<Option<Val<'m>>> {
        let Kind::App { func, args } = &e.kind else {
            return Ok(None);
        };
        let (Some("filter"), [flags, xs]) = (prim_of(func), args.as_slice()) else {
            return Ok(None);
        };
        let Kind::Var(v) = xs.kind else {
            return Ok(None);
        };
        let Some(Val::Scanned(s)) = self.scope.vars.get(&v) else {
            return Ok(None);
        };
        let s = s.clone();
        let flags = self.value(flags, body)?;
        // Flags that are a delayed append (or map) that cannot fail:
        // each computed where the loop reads it.
        let flags = match flags {
            Val::Delayed(d) if d.dims.len() == 1 && (d.appended.is_some() || cannot_fail(d.map)) => {
                Val::Delayed(d)
            }
            f => self.force(f, body)?,
        };
        let (Val::Array(_) | Val::Delayed(_), [op, items], 0) = (&flags, s.args.as_slice(), self.loop_depth)
        else {
            let f = self.value(func, body)?;
            let scan = self.scanned_made(&s, body)?;
            return self.apply(f, vec![flags, scan], e, body).map(Some);
        };
        let elem = elem_of(&s.e.ty.atom)?;
        let dims = self.dims(&s.e.ty.shape)?;
        let n = dims[0].clone();
        let dest = self.alloc("kept", elem, dims.clone(), body);
        let at = self.fresh("at");
        body.push(Stmt::Let {
            var: at,
            elem: Elem::Int,
            value: Expr::Int(0),
        });
        // The state, written at `at` where the flag at `k` is set.
        let keep = |a: &mut Self, st: &State, k: Expr, each: &mut Vec<Stmt>| -> Res<()> {
            let mut then = Vec::new();
            a.copy(Self::state_val(st), &dest.cell(&[Expr::Var(at)]), &mut then)?;
            then.push(Stmt::Set {
                var: at,
                value: Expr::add(Expr::Var(at), Expr::Int(1)),
            });
            let flag = a.element(&flags, &[k], each)?;
            each.push(Stmt::If {
                cond: flag,
                then,
                otherwise: Vec::new(),
            });
            Ok(())
        };
        let some = self.in_loop(|a, some| {
            let first = a.scan_item(items, Expr::Int(0), some)?;
            let st = a.state_of(&first, elem, dims[1..].to_vec(), some)?;
            keep(a, &st, Expr::Int(0), some)?;
            let k = a.fresh("k");
            let inner = a.in_loop(|a, inner| {
                let next = Expr::add(Expr::Var(k), Expr::Int(1));
                let item = a.scan_item(items, next.clone(), inner)?;
                a.step(&st, op, vec![Self::state_val(&st), item], s.e, inner)?;
                keep(a, &st, next, inner)
            })?;
            some.push(Stmt::For {
                index: k,
                count: Expr::op("-", vec![n.clone(), Expr::Int(1)]),
                parallel: false,
                body: inner,
            });
            Ok(())
        })?;
        body.push(Stmt::If {
            cond: Expr::op(">", vec![n, Expr::Int(0)]),
            then: some,
            otherwise: Vec::new(),
        });
        let mut kept = dims;
        kept[0] = Expr::Var(at);
        Ok(Some(Val::Box {
            witness: IndexVal::Dim(Expr::Var(at)),
            payload: std::boxed::Box::new(Val::Array(View::contiguous(dest.buf, elem, kept))),
        }))
    }

    /// Whether `iscan` of `args` takes its items delayed: a map that
    /// cannot fail, outside loops, each item computed where the scan's
    /// chain reads it (the pairs a restarting count is made of never
    /// stored), unless the scan is an exact Int one (run in blocks, each
    /// item read twice).
    pub(super) fn iscan_of_map(&self, args: &[Val<'m>]) -> bool {
        match args {
            [op, Val::Delayed(d)] => {
                self.loop_depth == 0
                    && !d.dims.is_empty()
                    && !d.transposed
                    && cannot_fail(d.map)
                    && !(d.dims.len() == 1 && d.elem == Elem::Int && self.exact_int(op).is_some())
            }
            _ => false,
        }
    }

    /// `iscan` of a delayed map (see [`Alloc::iscan_of_map`]).
    fn iscan_of_delayed(
        &mut self,
        op: &Val<'m>,
        xs: &Val<'m>,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        let elem = elem_of(&e.ty.atom)?;
        let dims = self.dims(&e.ty.shape)?;
        let out = self.alloc("iscan", elem, dims, body);
        self.iscan_items_into(op, xs, e, &out, body)?;
        Ok(Val::Array(out))
    }

    /// The item at `k` of an `iscan`'s items (an array, or a delayed map
    /// whose code goes into `body`).
    fn scan_item(&mut self, xs: &Val<'m>, k: Expr, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        match xs {
            Val::Delayed(d) => self.delayed_cell(d, &[k], body),
            _ => match cell_of(xs, &[k]) {
                Some(c) => Ok(cell_val(c)),
                None => unsupported("iscan of these items"),
            },
        }
    }

    /// Whether `iscan` of `args` is written by [`Alloc::iscan_into`] (not
    /// an exact Int scan outside loops, which is the exclusive scan's
    /// buffer).
    pub(super) fn iscans_into(&self, args: &[Val<'m>], e: &'m maps::Expr) -> bool {
        matches!(args, [op, Val::Array(xs)]
            if !(self.loop_depth == 0
                && elem_of(&e.ty.atom).ok() == Some(Elem::Int)
                && xs.dims.len() == 1
                && self.exact_int(op).is_some()))
    }

    /// The partial reductions of `xs` written into `out` (a lifted
    /// function's row of its consumer's buffer: no array of its own).
    pub(super) fn iscan_into(
        &mut self,
        op: &Val<'m>,
        xs: &View,
        e: &'m maps::Expr,
        out: &View,
        body: &mut Vec<Stmt>,
    ) -> Res<()> {
        self.iscan_items_into(op, &Val::Array(xs.clone()), e, out, body)
    }

    /// [`Alloc::iscan_into`] of items that are an array or a delayed map.
    fn iscan_items_into(
        &mut self,
        op: &Val<'m>,
        xs: &Val<'m>,
        e: &'m maps::Expr,
        out: &View,
        body: &mut Vec<Stmt>,
    ) -> Res<()> {
        let n = out.dims[0].clone();
        let mut first = Vec::new();
        let head = self.scan_item(xs, Expr::Int(0), &mut first)?;
        self.copy(head, &out.cell(&[Expr::Int(0)]), &mut first)?;
        body.push(Stmt::If {
            cond: Expr::op(">", vec![n.clone(), Expr::Int(0)]),
            then: first,
            otherwise: Vec::new(),
        });
        let k = self.fresh("k");
        let inner = self.in_loop(|a, inner| {
            let next = Expr::add(Expr::Var(k), Expr::Int(1));
            let acc = cell_val(out.cell(&[Expr::Var(k)]));
            let item = a.scan_item(xs, next.clone(), inner)?;
            a.apply_into(op, vec![acc, item], e, &out.cell(&[next]), inner)
        })?;
        let chain = Stmt::For {
            index: k,
            count: Expr::op("-", vec![n, Expr::Int(1)]),
            parallel: false,
            body: inner,
        };
        body.extend(self.written_in_order(out, chain));
        Ok(())
    }

    /// `(op item acc)` from the last item to the first.
    fn fold_right(
        &mut self,
        op: &Val<'m>,
        z: &Val<'m>,
        xs: &View,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        let s = self.state(z, e, body)?;
        let k = self.fresh("k");
        let n = xs.dims[0].clone();
        let inner = self.in_loop(|a, inner| {
            let i = Expr::op(
                "-",
                vec![Expr::op("-", vec![n.clone(), Expr::Int(1)]), Expr::Var(k)],
            );
            let item = cell_val(xs.cell(&[i]));
            a.step(&s, op, vec![item, Self::state_val(&s)], e, inner)
        })?;
        Self::drop_unused_next(&s, &inner, body);
        body.push(Stmt::For {
            index: k,
            count: n,
            parallel: false,
            body: inner,
        });
        Ok(Self::state_val(&s))
    }

    /// Whether `hist` of `args` takes its bin numbers delayed (a map of
    /// Ints at the outermost level that cannot fail, each item's bin
    /// computed where the hist reads it): it does where it combines its
    /// items in parts (`hist_by_items`), else they are computed first.
    pub(super) fn hist_of_map(&self, args: &[Val<'m>]) -> bool {
        matches!(args, [_, Val::Scalar(Elem::Int, _), Val::Delayed(d), Val::Array(xs)]
            if self.loop_depth == 0
                && d.dims.len() == 1
                && xs.dims.len() == 1
                && d.elem == Elem::Int
                && !d.transposed
                && cannot_fail(d.map))
    }

    /// `$m` bins from `ne`, item `i` of `xs` combined into bin `idx[i]`
    /// in order; indices out of range skipped.
    fn hist(
        &mut self,
        op: &Val<'m>,
        ne: &Val<'m>,
        keys: &Val<'m>,
        xs: &View,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        let elem = elem_of(&e.ty.atom)?;
        let dims = self.dims(&e.ty.shape)?;
        let out = self.alloc("hist", elem, dims.clone(), body);
        let bins = dims[0].clone();
        let cell = dims[1..].to_vec();
        let b = self.fresh("b");
        let fill = self.in_loop(|a, inner| a.copy(ne.clone(), &out.cell(&[Expr::Var(b)]), inner))?;
        body.push(Stmt::For {
            index: b,
            count: bins.clone(),
            parallel: self.loop_depth == 0,
            body: fill,
        });
        // A general operator on array cells may give a view of its
        // accumulator: its value goes through a buffer of its own. (A
        // primitive lifted to cells combines position by position, in
        // place.)
        let lifted = match op {
            Val::Func(_) => self.elementwise(op),
            _ => None,
        }
        .map(|name| Val::Prim {
            name,
            types: Vec::new(),
            indices: Vec::new(),
        });
        let op = lifted.as_ref().unwrap_or(op);
        let direct = cell.is_empty() || matches!(op, Val::Prim { .. });
        let items = xs.dims[0].clone();
        if let Some(exact) = self.hist_items_exact(op, elem, &cell, &bins, &items) {
            self.hist_by_items(exact, &out, &bins, keys, xs, body)?;
            return Ok(Val::Array(out));
        }
        let Val::Array(idx) = self.force(keys.clone(), body)? else {
            return unsupported("a hist by bins of a function");
        };
        let idx = &idx;
        let scan = HistScan {
            op,
            elem,
            cell: &cell,
            direct,
            out: &out,
            idx,
            xs,
        };
        // Outside loops, over many items whose combining is more than one
        // primitive on atoms, the bins in parts, one thread each, each
        // part picking out its own items a block at a time (the runtime
        // says how many parts: one on one thread, or for a count of items
        // known only at run time that is small). The loop over the parts
        // counts the items as its work (at run time where their count
        // is), so the runtime runs it in parallel.
        let many = match items {
            Expr::Int(n) => n >= HIST_PARTS_FROM,
            _ => true,
        };
        if self.loop_depth == 0 && many && !(cell.is_empty() && direct) {
            let parts = self.alloc("parts", Elem::Int, Vec::new(), body);
            body.push(Stmt::Call {
                func: "rt_hist_pick_parts",
                args: vec![
                    Expr::Addr {
                        buf: parts.buf,
                        index: Box::new(Expr::Int(0)),
                    },
                    bins.clone(),
                    items.clone(),
                    product(&cell),
                ],
            });
            let count = self.fresh("parts");
            body.push(Stmt::Let {
                var: count,
                elem: Elem::Int,
                value: parts.load(),
            });
            let p = self.fresh("p");
            let part = self.in_loop(|a, part| {
                let bound = |k: Expr| Expr::op("/", vec![Expr::mul(k, bins.clone()), Expr::Var(count)]);
                let (lo, hi) = (a.fresh("lo"), a.fresh("hi"));
                part.extend(part_bounds(lo, hi, p, bound));
                a.hist_pick(&scan, (Expr::Var(lo), Expr::Var(hi)), &items, e, part)
            })?;
            let mut whole = Vec::new();
            self.hist_scan(&scan, None, e, &mut whole)?;
            body.push(Stmt::If {
                cond: Expr::op(">", vec![Expr::Var(count), Expr::Int(1)]),
                then: vec![Stmt::For {
                    index: p,
                    count: Expr::Var(count),
                    parallel: true,
                    body: part,
                }],
                otherwise: whole,
            });
        } else {
            self.hist_scan(&scan, None, e, body)?;
        }
        Ok(Val::Array(out))
    }

    /// Where a hist of Int atoms outside loops may combine its items in
    /// parts of the items (see [`Self::hist_by_items`]): a combining that
    /// gives the same bits in any grouping and order, many items and few
    /// bins (a count of items known only at run time: a constant count of
    /// bins at most [`HIST_ITEM_BINS`]). The combining, its identity and
    /// the item count.
    fn hist_items_exact(
        &self,
        op: &Val<'m>,
        elem: Elem,
        cell: &[Expr],
        bins: &Expr,
        items: &Expr,
    ) -> Option<(&'static str, i64, Expr)> {
        let Val::Prim { name, .. } = op else {
            return None;
        };
        let &Expr::Int(bins) = bins else {
            return None;
        };
        let few = match *items {
            Expr::Int(items) => {
                items >= HIST_PARTS_FROM && bins.saturating_mul(HIST_ITEM_PARTS) <= items / 16
            }
            _ => bins <= HIST_ITEM_BINS,
        };
        if self.loop_depth != 0 || elem != Elem::Int || !cell.is_empty() || !few {
            return None;
        }
        EXACT_INT
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(name, identity)| (name, identity, items.clone()))
    }

    /// A hist of scalar Ints by an exact combining (Int arithmetic wraps:
    /// any grouping gives the same bits) in parts of its items: each part
    /// its own bins from the identity, in parallel, then each bin
    /// combined with the parts' in order. Each part's bins start a cache
    /// line of their own (a stride of the bins and 8 more), so that
    /// threads do not share lines. Each item's bin number is read from
    /// `idx`, or computed there (a delayed map: no array of them).
    fn hist_by_items(
        &mut self,
        (name, identity, n): (&'static str, i64, Expr),
        out: &View,
        bins: &Expr,
        idx: &Val<'m>,
        xs: &View,
        body: &mut Vec<Stmt>,
    ) -> Res<()> {
        let parts = Expr::Int(HIST_ITEM_PARTS);
        let stride = Expr::add(bins.clone(), Expr::Int(8));
        let own = self.alloc("own", Elem::Int, vec![parts.clone(), stride.clone()], body);
        // Each part's count known before the loop over the parts (a
        // constant, or an expression of the count), so that the runtime's
        // estimate of that loop is its work.
        let chunk = match n {
            Expr::Int(n) => Expr::Int((n + HIST_ITEM_PARTS - 1) / HIST_ITEM_PARTS),
            _ => Expr::op(
                "/",
                vec![
                    Expr::add(n.clone(), Expr::Int(HIST_ITEM_PARTS - 1)),
                    Expr::Int(HIST_ITEM_PARTS),
                ],
            ),
        };
        let (p, b, k, i, j) = (
            self.fresh("p"),
            self.fresh("b"),
            self.fresh("k"),
            self.fresh("i"),
            self.fresh("j"),
        );
        let bin = |part: Expr, at: Expr| Expr::add(Expr::mul(part, stride.clone()), at);
        let combine = |acc: Expr, x: Expr| Expr::op(name, vec![acc, x]);
        let mut scan = Vec::new();
        self.loop_depth += 3;
        let key = self.element(idx, &[Expr::Var(i)], &mut scan);
        self.loop_depth -= 3;
        scan.extend([
            Stmt::Let {
                var: j,
                elem: Elem::Int,
                value: key?,
            },
            Stmt::If {
                cond: in_range(Expr::Var(j), bins.clone()),
                then: vec![Stmt::Store {
                    buf: own.buf,
                    index: bin(Expr::Var(p), Expr::Var(j)),
                    value: combine(
                        Expr::load(own.buf, bin(Expr::Var(p), Expr::Var(j))),
                        xs.cell(&[Expr::Var(i)]).load(),
                    ),
                }],
                otherwise: Vec::new(),
            },
        ]);
        let part = vec![
            Stmt::For {
                index: b,
                count: bins.clone(),
                parallel: false,
                body: vec![Stmt::Store {
                    buf: own.buf,
                    index: bin(Expr::Var(p), Expr::Var(b)),
                    value: Expr::Int(identity),
                }],
            },
            Stmt::For {
                index: k,
                count: chunk.clone(),
                parallel: false,
                body: vec![
                    Stmt::Let {
                        var: i,
                        elem: Elem::Int,
                        value: Expr::add(Expr::mul(Expr::Var(p), chunk), Expr::Var(k)),
                    },
                    Stmt::If {
                        cond: Expr::op("<", vec![Expr::Var(i), n.clone()]),
                        then: scan,
                        otherwise: Vec::new(),
                    },
                ],
            },
        ];
        body.push(Stmt::For {
            index: p,
            count: parts.clone(),
            parallel: true,
            body: part,
        });
        let (b, q) = (self.fresh("b"), self.fresh("q"));
        let at = out.cell(&[Expr::Var(b)]).offset;
        body.push(Stmt::For {
            index: b,
            count: bins.clone(),
            parallel: false,
            body: vec![Stmt::For {
                index: q,
                count: parts,
                parallel: false,
                body: vec![Stmt::Store {
                    buf: out.buf,
                    index: at.clone(),
                    value: combine(
                        Expr::load(out.buf, at),
                        Expr::load(own.buf, bin(Expr::Var(q), Expr::Var(b))),
                    ),
                }],
            }],
        });
        Ok(())
    }

    /// One part of a hist's bins (`lo … hi-1`) combining its items: the
    /// items in blocks of [`HIST_PICK_BLOCK`], each block's items whose
    /// bin is the part's picked out first (their numbers stored at the
    /// next place, which advances only for them: no branch to mispredict),
    /// then combined in order.
    fn hist_pick(
        &mut self,
        scan: &HistScan<'_, 'm>,
        (lo, hi): (Expr, Expr),
        items: &Expr,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<()> {
        let mine = self.alloc("mine", Elem::Int, vec![Expr::Int(HIST_PICK_BLOCK)], body);
        let (blk, base, t, i, j, n) = (
            self.fresh("blk"),
            self.fresh("base"),
            self.fresh("t"),
            self.fresh("i"),
            self.fresh("j"),
            self.fresh("n"),
        );
        let mut block = vec![
            Stmt::Let {
                var: base,
                elem: Elem::Int,
                value: Expr::mul(Expr::Var(blk), Expr::Int(HIST_PICK_BLOCK)),
            },
            Stmt::Let {
                var: n,
                elem: Elem::Int,
                value: Expr::Int(0),
            },
            Stmt::For {
                index: t,
                count: Expr::op(
                    "min",
                    vec![
                        Expr::Int(HIST_PICK_BLOCK),
                        Expr::op("-", vec![items.clone(), Expr::Var(base)]),
                    ],
                ),
                parallel: false,
                body: vec![
                    Stmt::Let {
                        var: i,
                        elem: Elem::Int,
                        value: Expr::add(Expr::Var(base), Expr::Var(t)),
                    },
                    Stmt::Let {
                        var: j,
                        elem: Elem::Int,
                        value: scan.idx.cell(&[Expr::Var(i)]).load(),
                    },
                    Stmt::Store {
                        buf: mine.buf,
                        index: Expr::Var(n),
                        value: Expr::Var(i),
                    },
                    // Both comparisons made, as Ints: `and` would branch
                    // on the first, half the time each way.
                    Stmt::Set {
                        var: n,
                        value: Expr::add(
                            Expr::Var(n),
                            Expr::op(
                                "bit-and",
                                vec![
                                    Expr::op("bool->i", vec![Expr::op(">=", vec![Expr::Var(j), lo])]),
                                    Expr::op("bool->i", vec![Expr::op("<", vec![Expr::Var(j), hi])]),
                                ],
                            ),
                        ),
                    },
                ],
            },
        ];
        self.loop_depth += 1;
        let combined = self.hist_scan(scan, Some((mine.buf, n)), e, &mut block);
        self.loop_depth -= 1;
        combined?;
        body.push(Stmt::For {
            index: blk,
            count: Expr::op(
                "/",
                vec![
                    Expr::add(items.clone(), Expr::Int(HIST_PICK_BLOCK - 1)),
                    Expr::Int(HIST_PICK_BLOCK),
                ],
            ),
            parallel: false,
            body: block,
        });
        Ok(())
    }

    /// The items of a hist combined into their bins, in order: every item
    /// whose bin is in range, or (`picked`: a buffer and a count) the
    /// items whose numbers are the buffer's first atoms, whose bins are.
    fn hist_scan(
        &mut self,
        scan: &HistScan<'_, 'm>,
        picked: Option<(Var, Var)>,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<()> {
        // A general operator on array cells may give a view of its
        // accumulator: its value goes through a buffer of its own (one
        // per part).
        let tmp = if scan.direct {
            None
        } else {
            Some(self.alloc("bin", scan.elem, scan.cell.to_vec(), body))
        };
        let (k, i, j) = (self.fresh("k"), self.fresh("i"), self.fresh("j"));
        let inner = self.in_loop(|a, inner| {
            if let Some((mine, _)) = picked {
                inner.push(Stmt::Let {
                    var: i,
                    elem: Elem::Int,
                    value: Expr::load(mine, Expr::Var(k)),
                });
            }
            inner.push(Stmt::Let {
                var: j,
                elem: Elem::Int,
                value: scan.idx.cell(&[Expr::Var(i)]).load(),
            });
            let acc = scan.out.cell(&[Expr::Var(j)]);
            let args = vec![cell_val(acc.clone()), cell_val(scan.xs.cell(&[Expr::Var(i)]))];
            let mut then = Vec::new();
            match &tmp {
                None => a.apply_into(scan.op, args, e, &acc, &mut then)?,
                Some(t) => {
                    a.apply_into(scan.op, args, e, t, &mut then)?;
                    a.copy(Val::Array(t.clone()), &acc, &mut then)?;
                }
            }
            if picked.is_some() {
                inner.extend(then);
            } else {
                inner.push(Stmt::If {
                    cond: in_range(Expr::Var(j), scan.out.dims[0].clone()),
                    then,
                    otherwise: Vec::new(),
                });
            }
            Ok(())
        })?;
        body.push(match picked {
            Some((_, count)) => Stmt::For {
                index: k,
                count: Expr::Var(count),
                parallel: false,
                body: inner,
            },
            None => Stmt::For {
                index: i,
                count: scan.idx.dims[0].clone(),
                parallel: false,
                body: inner,
            },
        });
        Ok(())
    }

    /// A copy of `dest` with item `idx[i]` replaced by item `i` of `src`,
    /// in order; indices out of range skipped. `idx` is a vector or (see
    /// [`Alloc::scatter_of_map`]) a delayed map, computed where read.
    fn scatter(
        &mut self,
        dest: &View,
        idx: &Val<'m>,
        src: &View,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        let elem = elem_of(&e.ty.atom)?;
        let dims = self.dims(&e.ty.shape)?;
        let out = self.alloc("scatter", elem, dims, body);
        self.copy(Val::Array(dest.clone()), &out, body)?;
        self.scatter_over(&out, idx, src, body)?;
        Ok(Val::Array(out))
    }

    /// Item `idx[i]` of `out` replaced by item `i` of `src`, in order, in
    /// place (see [`Alloc::scatter`]).
    pub(super) fn scatter_over(
        &mut self,
        out: &View,
        idx: &Val<'m>,
        src: &View,
        body: &mut Vec<Stmt>,
    ) -> Res<()> {
        let dims = &out.dims;
        let whole = (Expr::Int(0), dims[0].clone());
        // At the outermost level, indices that (where in range) strictly
        // increase write each place at most once: the scatter of a
        // compaction (an exclusive scan of flags, selected) then runs on
        // every thread, after a check of the indices on every thread.
        // Other indices (a permutation's, repeated ones) scatter in parts
        // of the places, one thread each (as a hist's bins), each part
        // scanning every item in order for its places: each place's last
        // item is the one it keeps, on any number of threads.
        if self.loop_depth == 0
            && let Some(n) = src.dims.first()
        {
            let increasing = self.increasing(idx, n, &dims[0], body)?;
            let parallel = self.scatter_loop(out, idx, src, &whole, true)?;
            let parted = self.scatter_in_parts(out, idx, src, n)?;
            body.push(Stmt::If {
                cond: Expr::Var(increasing),
                then: vec![parallel],
                otherwise: parted,
            });
            return Ok(());
        }
        let in_order = self.scatter_loop(out, idx, src, &whole, false)?;
        body.push(in_order);
        Ok(())
    }

    /// A scatter into `out` by parts of its places (as many as the
    /// runtime's `rt_scatter_parts` gives for its places, items, cell and
    /// atoms: one on one thread), the parts on the threads.
    fn scatter_in_parts(&mut self, out: &View, idx: &Val<'m>, src: &View, n: &Expr) -> Res<Vec<Stmt>> {
        let places = out.dims[0].clone();
        let mut stmts = Vec::new();
        let parts = self.alloc("parts", Elem::Int, Vec::new(), &mut stmts);
        stmts.push(Stmt::Call {
            func: "rt_scatter_parts",
            args: vec![
                Expr::Addr {
                    buf: parts.buf,
                    index: Box::new(Expr::Int(0)),
                },
                places.clone(),
                n.clone(),
                product(&src.dims[1..]),
                Expr::Int(atom_bytes(out.elem)),
            ],
        });
        let (count, p, lo, hi) = (
            self.fresh("parts"),
            self.fresh("p"),
            self.fresh("lo"),
            self.fresh("hi"),
        );
        stmts.push(Stmt::Let {
            var: count,
            elem: Elem::Int,
            value: parts.load(),
        });
        let bound = |k: Expr| Expr::op("/", vec![Expr::mul(k, places.clone()), Expr::Var(count)]);
        self.loop_depth += 1;
        let part = self.scatter_loop(out, idx, src, &(Expr::Var(lo), Expr::Var(hi)), false);
        self.loop_depth -= 1;
        stmts.push(Stmt::For {
            index: p,
            count: Expr::Var(count),
            parallel: true,
            body: part_bounds(lo, hi, p, bound).into_iter().chain([part?]).collect(),
        });
        Ok(stmts)
    }

    /// Whether `scatter` of `args` takes its indices delayed: a vector
    /// map at the outermost level (its items computed twice, by the check
    /// and by the scatter, where a buffer would be written and read twice).
    pub(super) fn scatter_of_map(&self, args: &[Val<'m>]) -> bool {
        matches!(args, [_, Val::Delayed(d), _]
            if self.loop_depth == 0 && d.dims.len() == 1 && d.elem == Elem::Int && !d.transposed)
    }

    /// The loop of a scatter into `out`: item `i` of `src` copied to
    /// item `idx[i]`, where that is in `places` (from, to).
    fn scatter_loop(
        &mut self,
        out: &View,
        idx: &Val<'m>,
        src: &View,
        places: &(Expr, Expr),
        parallel: bool,
    ) -> Res<Stmt> {
        let i = self.fresh("i");
        let j = self.fresh("j");
        let inner = self.in_loop(|a, inner| {
            let at = a.element(idx, &[Expr::Var(i)], inner)?;
            inner.push(Stmt::Let {
                var: j,
                elem: Elem::Int,
                value: at,
            });
            let mut then = Vec::new();
            a.copy(
                cell_val(src.cell(&[Expr::Var(i)])),
                &out.cell(&[Expr::Var(j)]),
                &mut then,
            )?;
            let cond = match places {
                (Expr::Int(0), to) => in_range(Expr::Var(j), to.clone()),
                (from, to) => Expr::op(
                    "and",
                    vec![
                        Expr::op(">=", vec![Expr::Var(j), from.clone()]),
                        Expr::op("<", vec![Expr::Var(j), to.clone()]),
                    ],
                ),
            };
            inner.push(Stmt::If {
                cond,
                then,
                otherwise: Vec::new(),
            });
            Ok(())
        })?;
        Ok(Stmt::For {
            index: i,
            count: src.dims[0].clone(),
            parallel,
            body: inner,
        })
    }

    /// A Bool variable: whether the `n` indices `idx` that are in 0 …
    /// `bound`-1 strictly increase (the others skipped). In parts on the
    /// threads (each part's first and last index in range and whether
    /// they increase within it), then the parts in order. A part reads its
    /// indices a block at a time, and none after a block that does not
    /// increase (a permutation's check stops at its first blocks).
    fn increasing(&mut self, idx: &Val<'m>, n: &Expr, bound: &Expr, body: &mut Vec<Stmt>) -> Res<Var> {
        const PARTS: i64 = 64;
        const CHECK_BLOCK: i64 = 4096;
        let first = self.alloc("first", Elem::Int, vec![Expr::Int(PARTS)], body);
        let last = self.alloc("last", Elem::Int, vec![Expr::Int(PARTS)], body);
        let up = self.alloc("up", Elem::Bool, vec![Expr::Int(PARTS)], body);
        let (p, lo, hi) = (self.fresh("part"), self.fresh("lo"), self.fresh("hi"));
        let (f, l, u, i, j) = (
            self.fresh("first"),
            self.fresh("last"),
            self.fresh("up"),
            self.fresh("i"),
            self.fresh("j"),
        );
        let bound_of = |k: Expr| Expr::op("/", vec![Expr::mul(k, n.clone()), Expr::Int(PARTS)]);
        let int = |var, value| Stmt::Let {
            var,
            elem: Elem::Int,
            value,
        };
        let (blk, from) = (self.fresh("block"), self.fresh("from"));
        let mut each = Vec::new();
        self.loop_depth += 3;
        let at = self.element(idx, &[Expr::add(Expr::Var(from), Expr::Var(i))], &mut each);
        self.loop_depth -= 3;
        each.push(int(j, at?));
        each.push(Stmt::If {
            cond: in_range(Expr::Var(j), bound.clone()),
            then: vec![
                Stmt::If {
                    cond: Expr::op("<", vec![Expr::Var(f), Expr::Int(0)]),
                    then: vec![Stmt::Set {
                        var: f,
                        value: Expr::Var(j),
                    }],
                    otherwise: vec![Stmt::Set {
                        var: u,
                        value: Expr::op(
                            "and",
                            vec![Expr::Var(u), Expr::op(">", vec![Expr::Var(j), Expr::Var(l)])],
                        ),
                    }],
                },
                Stmt::Set {
                    var: l,
                    value: Expr::Var(j),
                },
            ],
            otherwise: Vec::new(),
        });
        body.push(Stmt::For {
            index: p,
            count: Expr::Int(PARTS),
            parallel: true,
            body: vec![
                int(lo, bound_of(Expr::Var(p))),
                int(hi, bound_of(Expr::add(Expr::Var(p), Expr::Int(1)))),
                int(f, Expr::Int(-1)),
                int(l, Expr::Int(-1)),
                Stmt::Let {
                    var: u,
                    elem: Elem::Bool,
                    value: Expr::Bool(true),
                },
                Stmt::For {
                    index: blk,
                    count: Expr::op(
                        "/",
                        vec![
                            Expr::op(
                                "-",
                                vec![
                                    Expr::add(Expr::Var(hi), Expr::Int(CHECK_BLOCK - 1)),
                                    Expr::Var(lo),
                                ],
                            ),
                            Expr::Int(CHECK_BLOCK),
                        ],
                    ),
                    parallel: false,
                    body: vec![
                        int(
                            from,
                            Expr::add(Expr::Var(lo), Expr::mul(Expr::Var(blk), Expr::Int(CHECK_BLOCK))),
                        ),
                        Stmt::If {
                            cond: Expr::Var(u),
                            then: vec![Stmt::For {
                                index: i,
                                count: Expr::op(
                                    "min",
                                    vec![
                                        Expr::Int(CHECK_BLOCK),
                                        Expr::op("-", vec![Expr::Var(hi), Expr::Var(from)]),
                                    ],
                                ),
                                parallel: false,
                                body: each,
                            }],
                            otherwise: Vec::new(),
                        },
                    ],
                },
                Stmt::Store {
                    buf: first.buf,
                    index: Expr::Var(p),
                    value: Expr::Var(f),
                },
                Stmt::Store {
                    buf: last.buf,
                    index: Expr::Var(p),
                    value: Expr::Var(l),
                },
                Stmt::Store {
                    buf: up.buf,
                    index: Expr::Var(p),
                    value: Expr::Var(u),
                },
            ],
        });
        let (ok, prev, q, fq) = (
            self.fresh("increasing"),
            self.fresh("prev"),
            self.fresh("part"),
            self.fresh("first"),
        );
        body.push(Stmt::Let {
            var: ok,
            elem: Elem::Bool,
            value: Expr::Bool(true),
        });
        body.push(int(prev, Expr::Int(-1)));
        body.push(Stmt::For {
            index: q,
            count: Expr::Int(PARTS),
            parallel: false,
            body: vec![
                int(fq, Expr::load(first.buf, Expr::Var(q))),
                Stmt::If {
                    cond: Expr::op(">=", vec![Expr::Var(fq), Expr::Int(0)]),
                    then: vec![
                        Stmt::Set {
                            var: ok,
                            value: Expr::op(
                                "and",
                                vec![
                                    Expr::Var(ok),
                                    Expr::op(
                                        "and",
                                        vec![
                                            Expr::load(up.buf, Expr::Var(q)),
                                            Expr::op(">", vec![Expr::Var(fq), Expr::Var(prev)]),
                                        ],
                                    ),
                                ],
                            ),
                        },
                        Stmt::Set {
                            var: prev,
                            value: Expr::load(last.buf, Expr::Var(q)),
                        },
                    ],
                    otherwise: Vec::new(),
                },
            ],
        });
        Ok(ok)
    }

    /// How many atoms are `#t` (an Int sum, in any order).
    fn count(&mut self, xs: &Val<'m>, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        let xs = match xs {
            Val::Array(v) => v.clone(),
            v => match scalar_of(v) {
                Some(x) => return Ok(Val::Scalar(Elem::Int, Expr::op("bool->i", vec![x]))),
                None => return unsupported("count of a function"),
            },
        };
        let acc = self.fresh("count");
        body.push(Stmt::Let {
            var: acc,
            elem: Elem::Int,
            value: Expr::Int(0),
        });
        let add = |x: Expr| Stmt::Set {
            var: acc,
            value: Expr::op("+", vec![Expr::Var(acc), Expr::op("bool->i", vec![x])]),
        };
        body.extend(self.every_atom(&[&xs], |x| add(x[0].clone())));
        Ok(Val::Scalar(Elem::Int, Expr::Var(acc)))
    }

    /// Whether `a` and `b` have one shape and equal atoms (floats as
    /// floats).
    fn equal(&mut self, a: &Val<'m>, b: &Val<'m>, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        let eq = |elem: Elem| match elem {
            Elem::Int => "==",
            Elem::Float => "f.==",
            Elem::Bool => "bool.==",
        };
        match (a, b) {
            (Val::Array(x), Val::Array(y)) if x.elem == y.elem && x.dims.len() == y.dims.len() => {
                let op = eq(x.elem);
                let same = self.fresh("same");
                let shapes = x
                    .dims
                    .iter()
                    .zip(&y.dims)
                    .map(|(m, n)| Expr::op("==", vec![m.clone(), n.clone()]))
                    .reduce(|p, q| Expr::op("and", vec![p, q]))
                    .unwrap_or(Expr::Bool(true));
                body.push(Stmt::Let {
                    var: same,
                    elem: Elem::Bool,
                    value: shapes,
                });
                let then = self.every_atom(&[x, y], |v| Stmt::Set {
                    var: same,
                    value: Expr::op(
                        "and",
                        vec![Expr::Var(same), Expr::op(op, vec![v[0].clone(), v[1].clone()])],
                    ),
                });
                body.push(Stmt::If {
                    cond: Expr::Var(same),
                    then,
                    otherwise: Vec::new(),
                });
                Ok(Val::Scalar(Elem::Bool, Expr::Var(same)))
            }
            (Val::Scalar(p, x), Val::Scalar(q, y)) if p == q => Ok(Val::Scalar(
                Elem::Bool,
                Expr::op(eq(*p), vec![x.clone(), y.clone()]),
            )),
            // Boxes: equal witnesses, then equal payloads (of one shape
            // where the witnesses are equal, the type being one).
            (
                Val::Box {
                    witness: w,
                    payload: p,
                },
                Val::Box {
                    witness: v,
                    payload: q,
                },
            ) => {
                let kinds_agree = matches!(
                    (w, v),
                    (IndexVal::Dim(_), IndexVal::Dim(_)) | (IndexVal::Shape(_), IndexVal::Shape(_))
                ) && w.dims().len() == v.dims().len();
                if !kinds_agree {
                    return Ok(Val::Scalar(Elem::Bool, Expr::Bool(false)));
                }
                let witnesses = w
                    .dims()
                    .iter()
                    .zip(v.dims())
                    .map(|(m, n)| Expr::op("==", vec![m.clone(), n.clone()]))
                    .fold(Expr::Bool(true), |p, q| Expr::op("and", vec![p, q]));
                let p = self.force((**p).clone(), body)?;
                let q = self.force((**q).clone(), body)?;
                let Val::Scalar(_, payloads) = self.equal(&p, &q, body)? else {
                    return unsupported("equal of these arguments");
                };
                Ok(Val::Scalar(
                    Elem::Bool,
                    Expr::op("and", vec![witnesses, payloads]),
                ))
            }
            _ => unsupported("equal of these arguments"),
        }
    }

    /// `a` where `c` holds, else `b` (both computed already).
    fn select(
        &mut self,
        c: &Val<'m>,
        a: &Val<'m>,
        b: &Val<'m>,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        let Some(c) = scalar_of(c) else {
            return unsupported("select by an array of conditions");
        };
        let elem = elem_of(&e.ty.atom)?;
        let dims = self.dims(&e.ty.shape)?;
        if dims.is_empty() {
            let (Some(x), Some(y)) = (scalar_of(a), scalar_of(b)) else {
                return unsupported("select of functions");
            };
            let var = self.fresh("sel");
            body.push(Stmt::Let { var, elem, value: y });
            body.push(Stmt::If {
                cond: c,
                then: vec![Stmt::Set { var, value: x }],
                otherwise: Vec::new(),
            });
            return Ok(Val::Scalar(elem, Expr::Var(var)));
        }
        let out = self.alloc("sel", elem, dims, body);
        let mut then = Vec::new();
        self.copy(a.clone(), &out, &mut then)?;
        let mut otherwise = Vec::new();
        self.copy(b.clone(), &out, &mut otherwise)?;
        body.push(Stmt::If {
            cond: c,
            then,
            otherwise,
        });
        Ok(Val::Array(out))
    }

    /// One statement for every position of the first view's shape, in
    /// row-major order, given the atoms of each view there (sequential
    /// loops: the statement may accumulate).
    fn every_atom(&mut self, views: &[&View], each: impl Fn(&[Expr]) -> Stmt) -> Vec<Stmt> {
        let dims = views[0].dims.clone();
        let indices: Vec<Var> = dims.iter().map(|_| self.fresh("j")).collect();
        let idx: Vec<Expr> = indices.iter().map(|v| Expr::Var(*v)).collect();
        let atoms: Vec<Expr> = views.iter().map(|v| v.cell(&idx).load()).collect();
        let mut inner = vec![each(&atoms)];
        for (index, count) in indices.into_iter().zip(dims).rev() {
            inner = vec![Stmt::For {
                index,
                count,
                parallel: false,
                body: inner,
            }];
        }
        inner
    }
}

/// The bytes of an atom of `elem` in a buffer.
fn atom_bytes(elem: Elem) -> i64 {
    match elem {
        Elem::Int => 8,
        Elem::Float => 4,
        Elem::Bool => 1,
    }
}

/// `0 <= j < n`.
fn in_range(j: Expr, n: Expr) -> Expr {
    Expr::op(
        "and",
        vec![
            Expr::op(">=", vec![j.clone(), Expr::Int(0)]),
            Expr::op("<", vec![j, n]),
        ],
    )
}

/// An `iscan` not made yet: the function and arguments of a `let`-bound
/// `iscan` read only as the items of a `filter`
/// ([`Alloc::scanned_filter`]). Read any other way, it is made then.
pub(super) struct Scanned<'m> {
    func: Val<'m>,
    args: Vec<Val<'m>>,
    e: &'m maps::Expr,
}

/// Whether `var` is read exactly once in `later` and `body`, as the items
/// of an `iscan` that a later binding of the same `let` (or its body) is:
/// a map bound so is delayed, each item computed where the scan's chain
/// reads it ([`Alloc::iscan_of_map`]), no loop or function around it.
pub(super) fn scanned_once(var: VarId, later: &[maps::Bind], body: &maps::Expr) -> bool {
    let scans = |e: &maps::Expr| {
        matches!(&e.kind, Kind::App { func, args } if prim_of(func) == Some("iscan")
            && matches!(args.as_slice(), [_, xs] if matches!(xs.kind, Kind::Var(v) if v == var)))
    };
    reads_after(var, later, body) == 1 && (later.iter().any(|b| scans(&b.value)) || scans(body))
}

/// Whether `var` is read exactly once in `later` and `body`, as the items
/// of a `filter`.
fn filtered_once(var: VarId, later: &[maps::Bind], body: &maps::Expr) -> bool {
    let mut filtered = false;
    let mut look = |e: &maps::Expr| {
        e.each(&mut |x| {
            filtered |= matches!(&x.kind, Kind::App { func, args } if prim_of(func) == Some("filter")
                && matches!(args.as_slice(), [_, xs] if matches!(xs.kind, Kind::Var(v) if v == var)));
        });
    };
    for b in later {
        look(&b.value);
    }
    look(body);
    reads_after(var, later, body) == 1 && filtered
}

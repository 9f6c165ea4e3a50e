//! Boxes and the intrinsics that give them (`filter`, `range`, `iota`,
//! `take*`, `drop*`), `undefined`, and arrays of functions (a map over
//! one is unrolled).

use super::*;

/// The most axes a value made at run time (`iota` of a shape vector) may
/// have in the compiled engine; past it, the interpreter runs the program.
const MAX_RUNTIME_RANK: i64 = 256;

impl<'m> Alloc<'m> {
    pub(super) fn boxes(
        &mut self,
        name: &'static str,
        indices: &[Index],
        args: &[Val<'m>],
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Option<Res<Val<'m>>> {
        Some(match (name, args) {
            ("undefined", []) => self.undefined(e, body),
            ("reify-shape", []) => {
                let Some(Index::Shape(shape)) = indices.first() else {
                    return Some(unsupported("reify-shape without its shape"));
                };
                match self.dims(shape) {
                    Ok(dims) => {
                        let n = Expr::Int(dims.len() as i64);
                        let v = self.alloc("shape", Elem::Int, vec![n.clone()], body);
                        for (k, d) in dims.into_iter().enumerate() {
                            body.push(Stmt::Store {
                                buf: v.buf,
                                index: Expr::Int(k as i64),
                                value: d,
                            });
                        }
                        Ok(boxed(IndexVal::Dim(n), Val::Array(v)))
                    }
                    Err(u) => Err(u),
                }
            }
            ("range", [n]) => {
                let Some(n) = scalar_of(n) else {
                    return Some(unsupported("range of an array"));
                };
                self.fail_if(
                    Expr::op("<", vec![n.clone(), Expr::Int(0)]),
                    "range: negative length",
                    body,
                );
                let payload = self.iota(vec![n.clone()], body);
                Ok(boxed(IndexVal::Dim(n), Val::Array(payload)))
            }
            ("iota", [Val::Array(shape)]) => {
                let [Expr::Int(rank)] = shape.dims.as_slice() else {
                    return Some(unsupported("iota of a shape of a length known only at run time"));
                };
                // (Each axis is a statement and a factor of the atom
                // count: a value of 30,000 axes made a C text, and passes
                // recursing over it, too large.)
                if *rank > MAX_RUNTIME_RANK {
                    return Some(unsupported(format!(
                        "too large for the compiled engine: a value of {rank} axes (more than {MAX_RUNTIME_RANK})"
                    )));
                }
                let mut dims = Vec::new();
                for k in 0..*rank {
                    let d = self.fresh("d");
                    body.push(Stmt::Let {
                        var: d,
                        elem: Elem::Int,
                        value: shape.cell(&[Expr::Int(k)]).load(),
                    });
                    self.fail_if(
                        Expr::op("<", vec![Expr::Var(d), Expr::Int(0)]),
                        "iota: negative dimension",
                        body,
                    );
                    dims.push(Expr::Var(d));
                }
                let payload = self.iota(dims.clone(), body);
                Ok(boxed(IndexVal::Shape(dims), cell_val(payload)))
            }
            ("take*" | "drop*", [n, xs @ Val::Delayed(_)]) => {
                let Some(n) = scalar_of(n) else {
                    return Some(unsupported(format!("{name} of an array of counts")));
                };
                self.taken_of_map(name == "take*", n, xs, body)
            }
            ("take*" | "drop*", [n, Val::Array(xs)]) => {
                let Some(n) = scalar_of(n) else {
                    return Some(unsupported(format!("{name} of an array of counts")));
                };
                let d = xs.dims[0].clone();
                let out = Expr::op(
                    "or",
                    vec![
                        Expr::op("<", vec![n.clone(), Expr::Int(0)]),
                        Expr::op(">", vec![n.clone(), d.clone()]),
                    ],
                );
                self.fail_if(out, "take*/drop*: count out of range", body);
                let mut v = xs.clone();
                let k = if name == "take*" {
                    n
                } else {
                    v.offset = Expr::add(v.offset, Expr::mul(n.clone(), v.strides[0].clone()));
                    let k = self.fresh("k");
                    body.push(Stmt::Let {
                        var: k,
                        elem: Elem::Int,
                        value: Expr::op("-", vec![d, n]),
                    });
                    Expr::Var(k)
                };
                v.dims[0] = k.clone();
                Ok(boxed(IndexVal::Dim(k), Val::Array(v)))
            }
            ("filter", [Val::Array(flags), Val::Array(xs)]) => self.filter(flags, xs, body),
            ("unique" | "unique-counts", [Val::Array(xs)]) if xs.dims.len() == 1 => {
                self.unique(name, xs, body)
            }
            _ => return None,
        })
    }

    /// Whether `take*` or `drop*` of `args` takes its vector delayed: a
    /// map of atoms at the outermost level, of which only the items kept
    /// are computed ([`Alloc::taken_of_map`]).
    pub(super) fn takes_of_map(&self, args: &[Val<'m>]) -> bool {
        matches!(args, [_, Val::Delayed(d)] if self.loop_depth == 0 && d.dims.len() == 1 && !d.transposed)
    }

    /// The items `take*` (`first`) or `drop*` keeps of a delayed map of
    /// atoms: only those computed, on the threads, into a buffer of their
    /// count (a gather then reads only what it keeps). A map that can
    /// fail has the others' code run too, their atoms unused, so that it
    /// fails where the interpreter's whole map would.
    fn taken_of_map(&mut self, first: bool, n: Expr, xs: &Val<'m>, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        let Val::Delayed(d) = xs else {
            return unsupported("take*/drop* of these arguments");
        };
        let len = d.dims[0].clone();
        let out = Expr::op(
            "or",
            vec![
                Expr::op("<", vec![n.clone(), Expr::Int(0)]),
                Expr::op(">", vec![n.clone(), len.clone()]),
            ],
        );
        self.fail_if(out, "take*/drop*: count out of range", body);
        let rest = self.fresh("k");
        body.push(Stmt::Let {
            var: rest,
            elem: Elem::Int,
            value: Expr::op("-", vec![len, n.clone()]),
        });
        // The items kept from `from`, `count` of them; the others from `skip`.
        let (from, count, skip, skipped) = if first {
            (Expr::Int(0), n.clone(), n, Expr::Var(rest))
        } else {
            (n.clone(), Expr::Var(rest), Expr::Int(0), n)
        };
        let kept = self.alloc("kept", d.elem, vec![count.clone()], body);
        match graded_bind(d) {
            Some(graded) => {
                let places = [(from, count.clone()), (skip, skipped)];
                self.partition(xs, graded, places, (&kept, None), body)?
            }
            None => {
                self.kept_items(xs, (from, count.clone()), &kept, body)?;
                if !cannot_fail(d.map) {
                    let pass = self.items_pass(xs, skip, skipped, None)?;
                    body.push(pass);
                }
            }
        }
        Ok(boxed(IndexVal::Dim(count), Val::Array(kept)))
    }

    /// The `count` items from `from` of a delayed map of atoms computed
    /// into `kept`, on the threads.
    pub(super) fn kept_items(
        &mut self,
        xs: &Val<'m>,
        (from, count): (Expr, Expr),
        kept: &View,
        body: &mut Vec<Stmt>,
    ) -> Res<()> {
        let pass = self.items_pass(xs, from, count, Some(kept))?;
        body.push(pass);
        Ok(())
    }

    /// A loop on the threads over `count` items from `from` of a delayed
    /// map of atoms, each stored into `kept` (from its start), or only its
    /// code run (its atom unused).
    pub(super) fn items_pass(
        &mut self,
        xs: &Val<'m>,
        from: Expr,
        count: Expr,
        kept: Option<&View>,
    ) -> Res<Stmt> {
        let i = self.fresh("i");
        let mut each = Vec::new();
        self.loop_depth += 1;
        let x = self.element(xs, &[Expr::add(from, Expr::Var(i))], &mut each);
        self.loop_depth -= 1;
        let x = x?;
        match (kept, xs) {
            (Some(kept), _) => each.push(Stmt::Store {
                buf: kept.buf,
                index: Expr::Var(i),
                value: x,
            }),
            (None, Val::Delayed(d)) => self.for_its_failures(d.elem, x, &mut each),
            (None, _) => {}
        }
        Ok(Stmt::For {
            index: i,
            count,
            parallel: true,
            body: each,
        })
    }

    /// An atom computed only for its failures, its value unused: a `let`
    /// where it can fail (a division, a power), so that the compiled
    /// program fails where the interpreter, computing it, fails.
    pub(super) fn for_its_failures(&mut self, elem: Elem, x: Expr, body: &mut Vec<Stmt>) {
        if !folds::cannot_fail(&x) {
            let var = self.fresh("unused");
            body.push(Stmt::Let { var, elem, value: x });
        }
    }

    /// `unique` (the distinct atoms, ascending) or `unique-counts` (how
    /// many times each occurs) of a vector, in a box: the runtime's.
    fn unique(&mut self, name: &str, xs: &View, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        let func = match xs.elem {
            Elem::Int => "rt_unique_i64",
            Elem::Float => "rt_unique_f32",
            Elem::Bool => "rt_unique_bool",
        };
        let n = xs.dims[0].clone();
        let values = self.alloc("distinct", xs.elem, vec![n.clone()], body);
        let counts = self.alloc("counts", Elem::Int, vec![n.clone()], body);
        let k = self.alloc("k", Elem::Int, Vec::new(), body);
        let addr = |v: &View| Expr::Addr {
            buf: v.buf,
            index: std::boxed::Box::new(v.offset.clone()),
        };
        body.push(Stmt::Call {
            func,
            args: vec![
                addr(xs),
                xs.strides[0].clone(),
                n,
                addr(&values),
                addr(&counts),
                addr(&k),
            ],
        });
        let kv = self.fresh("k");
        body.push(Stmt::Let {
            var: kv,
            elem: Elem::Int,
            value: k.load(),
        });
        let mut payload = if name == "unique" { values } else { counts };
        payload.dims = vec![Expr::Var(kv)];
        Ok(boxed(IndexVal::Dim(Expr::Var(kv)), Val::Array(payload)))
    }

    /// `undefined`: a failure, then (never reached) any value of the
    /// type.
    fn undefined(&mut self, e: &'m maps::Expr, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        body.push(Stmt::Fail {
            what: "Prelude.undefined".into(),
        });
        let elem = elem_of(&e.ty.atom)?;
        let dims = self.dims(&e.ty.shape)?;
        if dims.is_empty() {
            return Ok(Val::Scalar(elem, zero(elem)));
        }
        let mut one = self.alloc("undefined", elem, Vec::new(), body);
        one.strides = vec![Expr::Int(0); dims.len()];
        one.dims = dims;
        Ok(Val::Array(one))
    }

    /// The items of `xs` whose flag is set, in order, in a box.
    fn filter(&mut self, flags: &View, xs: &View, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        let flag = |i: Var| flags.cell(&[Expr::Var(i)]).load();
        // How many: counted first, then the items copied.
        let count = self.fresh("kept");
        body.push(Stmt::Let {
            var: count,
            elem: Elem::Int,
            value: Expr::Int(0),
        });
        let i = self.fresh("i");
        body.push(Stmt::For {
            index: i,
            count: xs.dims[0].clone(),
            parallel: false,
            body: vec![Stmt::If {
                cond: flag(i),
                then: vec![Stmt::Set {
                    var: count,
                    value: Expr::op("+", vec![Expr::Var(count), Expr::Int(1)]),
                }],
                otherwise: Vec::new(),
            }],
        });
        let mut dims = xs.dims.clone();
        dims[0] = Expr::Var(count);
        let dest = self.alloc("kept", xs.elem, dims, body);
        let at = self.fresh("at");
        body.push(Stmt::Let {
            var: at,
            elem: Elem::Int,
            value: Expr::Int(0),
        });
        let i = self.fresh("i");
        self.loop_depth += 1;
        let mut then = Vec::new();
        let r = self.copy(
            cell_val(xs.cell(&[Expr::Var(i)])),
            &dest.cell(&[Expr::Var(at)]),
            &mut then,
        );
        self.loop_depth -= 1;
        r?;
        then.push(Stmt::Set {
            var: at,
            value: Expr::op("+", vec![Expr::Var(at), Expr::Int(1)]),
        });
        body.push(Stmt::For {
            index: i,
            count: xs.dims[0].clone(),
            parallel: false,
            body: vec![Stmt::If {
                cond: flag(i),
                then,
                otherwise: Vec::new(),
            }],
        });
        Ok(boxed(IndexVal::Dim(Expr::Var(count)), Val::Array(dest)))
    }

    /// A failure where one of `dims` is negative (an index computed by
    /// subtraction), as the interpreter fails.
    /// A failure where an index given to an intrinsic has a negative
    /// dimension (as the `(- $k 1)` of `head` of an empty filter's
    /// items), as the interpreter fails where an index is given.
    pub(super) fn indices_checked(&mut self, indices: &[Index], body: &mut Vec<Stmt>) {
        for i in indices {
            if let Ok(i) = self.index(i) {
                self.non_negative(i.dims(), body);
            }
        }
    }

    /// An array of functions written as a frame: its items' functions in
    /// row-major order.
    pub(super) fn frame_of_functions(
        &mut self,
        shape: &[u64],
        elems: &'m [maps::Expr],
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        let mut items = Vec::new();
        let mut inner: Option<Vec<usize>> = None;
        for x in elems {
            let (s, xs) = match self.value(x, body)? {
                Val::Funcs { shape, items } => (shape, items),
                v @ (Val::Func(_) | Val::Prim { .. }) => (Vec::new(), vec![v]),
                _ => return unsupported("arrays of functions"),
            };
            if *inner.get_or_insert_with(|| s.clone()) != s {
                return unsupported("a frame of arrays of functions of several shapes");
            }
            items.extend(xs);
        }
        let mut shape: Vec<usize> = shape.iter().map(|n| *n as usize).collect();
        shape.extend(inner.unwrap_or_default());
        Ok(Val::Funcs { shape, items })
    }

    /// A map over an array of functions: the frame (known when
    /// compiling, and small) unrolled, each position binding its own
    /// function (defunctionalisation by cases).
    pub(super) fn unrolled(
        &mut self,
        frame: &[Expr],
        binds: Vec<(VarId, Val<'m>)>,
        cell: &'m maps::Expr,
        dest: &View,
        body: &mut Vec<Stmt>,
    ) -> Res<()> {
        let mut sizes = Vec::with_capacity(frame.len());
        for d in frame {
            match d {
                Expr::Int(n) if *n >= 0 => sizes.push(*n as usize),
                _ => return unsupported("a map over an array of functions of a size known only at run time"),
            }
        }
        let count: usize = sizes.iter().product();
        if count > 64 {
            return unsupported("a map over a large array of functions");
        }
        let saved = self.scope.vars.clone();
        let r = (|| {
            for p in 0..count {
                // Position p of the frame, row-major.
                let mut at = vec![Expr::Int(0); sizes.len()];
                let mut rest = p;
                for k in (0..sizes.len()).rev() {
                    at[k] = Expr::Int((rest % sizes[k]) as i64);
                    rest /= sizes[k];
                }
                for (var, v) in &binds {
                    let c = match v {
                        Val::Array(view) => cell_val(view.cell(&at)),
                        Val::Funcs { shape, items } => {
                            if !shape.starts_with(&sizes) {
                                return unsupported("a map over an array of functions of another frame");
                            }
                            let inner = shape[sizes.len()..].to_vec();
                            let n: usize = inner.iter().product();
                            let slice = &items[p * n..(p + 1) * n];
                            match (inner.is_empty(), slice) {
                                (true, [f]) => f.clone(),
                                _ => Val::Funcs {
                                    shape: inner,
                                    items: slice.to_vec(),
                                },
                            }
                        }
                        _ => return unsupported("a map over an array of functions"),
                    };
                    self.scope.vars.insert(*var, c);
                }
                self.into(cell, &dest.cell(&at), body)?;
            }
            Ok(())
        })();
        self.scope.vars = saved;
        r
    }

    pub(super) fn non_negative(&mut self, dims: &[Expr], body: &mut Vec<Stmt>) {
        for d in dims {
            match d {
                // A constant, or a variable (an input's extent or a box's
                // witness, counted at run time): never negative.
                Expr::Int(n) if *n >= 0 => {}
                Expr::Var(_) => {}
                _ => body.push(Stmt::If {
                    cond: Expr::op("<", vec![d.clone(), Expr::Int(0)]),
                    then: vec![Stmt::Fail {
                        what: "negative dimension".into(),
                    }],
                    otherwise: Vec::new(),
                }),
            }
        }
    }
}

pub(super) fn boxed<'m>(witness: IndexVal, payload: Val<'m>) -> Val<'m> {
    Val::Box {
        witness,
        payload: std::boxed::Box::new(payload),
    }
}

/// The array (a variable) of a delayed vector map that is a grade not made
/// ([`Val::Graded`]), if it has one.
pub(super) fn graded_bind<'a, 'm>(d: &'a Delayed<'m>) -> Option<(VarId, &'a compact::Graded<'m>)> {
    let Kind::Map { binds, .. } = &d.map.kind else {
        return None;
    };
    let mut graded = binds.iter().filter_map(|b| match &b.value.kind {
        Kind::Var(v) => match d.scope.vars.get(v) {
            Some(Val::Graded(g)) => Some((*v, &**g)),
            _ => None,
        },
        _ => None,
    });
    let first = graded.next();
    if graded.next().is_some() {
        return None;
    }
    first
}

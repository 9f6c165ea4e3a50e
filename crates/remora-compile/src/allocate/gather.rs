//! Structure and gathers: the intrinsics that choose, reorder or regroup
//! atoms (`rotate`, `index`, `nth`, `take` …, `windows`, `transpose`), as
//! views where index arithmetic can say it; and the linear algebra and
//! statistics vocabulary (`dot`, `matmul`, `mean`, `argmax`, `linspace`,
//! `outer`), each in the interpreter's order of operations.

use super::*;

impl<'m> Alloc<'m> {
    pub(super) fn gather(
        &mut self,
        name: &'static str,
        indices: &[Index],
        args: &[Val<'m>],
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Option<Res<Val<'m>>> {
        let r = match (name, args) {
            ("rotate", [Val::Array(xs), k]) => self.rotate(xs, k, body),
            ("index", [Val::Array(xs), i]) if xs.dims.len() == 1 => self.index_at(xs, i, body),
            ("nth", [Val::Array(xs), i]) if !xs.dims.is_empty() => self.nth(xs, i, body),
            ("index2d", [Val::Array(xs), Val::Array(ij)]) if xs.dims.len() == 2 && ij.dims.len() == 1 => {
                self.index2d(xs, ij, body)
            }
            ("take" | "drop" | "take-right" | "drop-right", [Val::Array(xs)]) if !xs.dims.is_empty() => {
                self.slice(name, xs, e)
            }
            ("take" | "drop" | "take-right" | "drop-right", [Val::Rotated(r)]) => {
                self.slice_rotation(name, r, e, body)
            }
            ("reshape", [Val::Scalar(elem, x)]) => {
                // A scalar's one atom, laid out in the target shape.
                let one = self.alloc("one", *elem, Vec::new(), body);
                body.push(Stmt::Store {
                    buf: one.buf,
                    index: Expr::Int(0),
                    value: x.clone(),
                });
                self.dims(&e.ty.shape).map(|dims| {
                    self.check_count(&[], &dims, body);
                    Val::Array(View::contiguous(one.buf, *elem, dims))
                })
            }
            ("windows", [Val::Array(xs)]) if !xs.dims.is_empty() => self.windows(xs, e),
            ("transpose", [x]) => self.transpose(indices, x),
            ("linspace", [a, b]) => self.linspace(a, b, e, body),
            ("outer", [f, Val::Array(a), Val::Array(b)]) => self.outer(f, a, b, e, body),
            ("dot" | "f.dot", [Val::Array(x), Val::Array(y)]) if x.dims.len() == 1 && y.dims.len() == 1 => {
                Ok(self.dot(name, x, y, body))
            }
            ("matmul" | "f.matmul", [Val::Array(a), Val::Array(b)])
                if a.dims.len() == 2 && b.dims.len() == 2 =>
            {
                self.matmul(name, a, b, body)
            }
            ("mean" | "f.mean", [Val::Array(xs)]) if xs.dims.len() == 1 => Ok(self.mean(name, xs, body)),
            ("argmax" | "argmin" | "f.argmax" | "f.argmin", [Val::Array(xs)]) if xs.dims.len() == 1 => {
                Ok(self.arg_extreme(name, xs, body))
            }
            _ => return None,
        };
        Some(r)
    }

    /// A run-time error unless the shapes `from` (an array's) and `to` (a
    /// reshape's target) hold as many atoms, counted without wrapping.
    pub(super) fn check_count(&mut self, from: &[Expr], to: &[Expr], body: &mut Vec<Stmt>) {
        let what = "reshape: two shapes contain diff # of elements".to_string();
        let n = product(from);
        let constant = to
            .iter()
            .map(|d| match d {
                Expr::Int(x) => u64::try_from(*x).ok(),
                _ => None,
            })
            .collect::<Option<Vec<u64>>>();
        if let (Some(to), Expr::Int(n)) = (constant, &n) {
            let count = if to.contains(&0) {
                Some(0)
            } else {
                to.iter().try_fold(1u64, |c, d| c.checked_mul(*d))
            };
            if count != u64::try_from(*n).ok() {
                body.push(Stmt::Fail { what });
            }
            return;
        }
        // The same product (of dimensions not all known): the same count.
        if n == product(to) {
            return;
        }
        // At run time: `big` when the product passes i64::MAX, `zero`
        // when a dimension is 0 (a count of 0 whatever the others).
        let (acc, big, zero) = (self.fresh("count"), self.fresh("big"), self.fresh("zero"));
        body.push(Stmt::Let {
            var: acc,
            elem: Elem::Int,
            value: Expr::Int(1),
        });
        for var in [big, zero] {
            body.push(Stmt::Let {
                var,
                elem: Elem::Bool,
                value: Expr::Bool(false),
            });
        }
        for d in to {
            let over = Expr::op(
                "and",
                vec![
                    Expr::op("!=", vec![d.clone(), Expr::Int(0)]),
                    Expr::op(
                        ">",
                        vec![
                            Expr::Var(acc),
                            Expr::op("/", vec![Expr::Int(i64::MAX), d.clone()]),
                        ],
                    ),
                ],
            );
            body.push(Stmt::If {
                cond: over,
                then: vec![Stmt::Set {
                    var: big,
                    value: Expr::Bool(true),
                }],
                otherwise: Vec::new(),
            });
            body.push(Stmt::If {
                cond: Expr::op("==", vec![d.clone(), Expr::Int(0)]),
                then: vec![Stmt::Set {
                    var: zero,
                    value: Expr::Bool(true),
                }],
                otherwise: Vec::new(),
            });
            body.push(Stmt::Set {
                var: acc,
                value: Expr::op("*", vec![Expr::Var(acc), d.clone()]),
            });
        }
        let wrong = Expr::op(
            "or",
            vec![
                Expr::op(
                    "and",
                    vec![Expr::Var(big), Expr::op("not", vec![Expr::Var(zero)])],
                ),
                Expr::op("!=", vec![Expr::Var(acc), n]),
            ],
        );
        self.fail_if(wrong, what, body);
    }

    /// `x` as a scalar named once (it is used more than once).
    fn int_arg(&mut self, x: &Val<'m>, what: &str, body: &mut Vec<Stmt>) -> Res<Expr> {
        let x = match x {
            Val::Scalar(_, x) => x.clone(),
            Val::Array(v) if v.dims.is_empty() => v.load(),
            _ => return unsupported(format!("{what} by an array")),
        };
        Ok(match self.named(Val::Scalar(Elem::Int, x), what, body) {
            Val::Scalar(_, x) => x,
            _ => Expr::Int(0),
        })
    }

    /// `(rotate xs k)`: item `i` is item `(i + k) mod d`; a rotation,
    /// read in place by what maps over it or reduces it (else copied).
    fn rotate(&mut self, xs: &View, k: &Val<'m>, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        let k = self.int_arg(k, "shift", body)?;
        let d = xs.dims[0].clone();
        let split = self.fresh("split");
        body.push(Stmt::Let {
            var: split,
            elem: Elem::Int,
            value: Expr::op("mod", vec![k, Expr::op("max", vec![d.clone(), Expr::Int(1)])]),
        });
        Ok(Val::Rotated(Rotation {
            src: xs.clone(),
            split: Expr::Var(split),
            dims: xs.dims.clone(),
        }))
    }

    /// An error unless `0 <= i < n`.
    fn check_index(&mut self, i: &Expr, n: &Expr, what: String, body: &mut Vec<Stmt>) {
        let out = Expr::op(
            "or",
            vec![
                Expr::op("<", vec![i.clone(), Expr::Int(0)]),
                Expr::op(">=", vec![i.clone(), n.clone()]),
            ],
        );
        self.fail_if(out, what, body);
    }

    fn index_at(&mut self, xs: &View, i: &Val<'m>, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        let i = self.int_arg(i, "i", body)?;
        self.check_index(&i, &xs.dims[0], "index out of range".into(), body);
        Ok(Val::Scalar(xs.elem, xs.cell(&[i]).load()))
    }

    fn nth(&mut self, xs: &View, i: &Val<'m>, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        let i = self.int_arg(i, "i", body)?;
        self.check_index(&i, &xs.dims[0], "nth: index out of range".into(), body);
        Ok(cell_val(xs.cell(&[i])))
    }

    fn index2d(&mut self, xs: &View, ij: &View, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        let at = |k: i64| Val::Scalar(Elem::Int, ij.cell(&[Expr::Int(k)]).load());
        let i = self.int_arg(&at(0), "i", body)?;
        let j = self.int_arg(&at(1), "j", body)?;
        let out = |x: &Expr, n: &Expr| {
            Expr::op(
                "or",
                vec![
                    Expr::op("<", vec![x.clone(), Expr::Int(0)]),
                    Expr::op(">=", vec![x.clone(), n.clone()]),
                ],
            )
        };
        let cond = Expr::op("or", vec![out(&i, &xs.dims[0]), out(&j, &xs.dims[1])]);
        self.fail_if(cond, "index2d: index out of range", body);
        Ok(Val::Scalar(xs.elem, xs.cell(&[i, j]).load()))
    }

    /// `take`, `drop`, `take-right`, `drop-right`: a view of a run of
    /// items (the result's type says how many).
    fn slice(&mut self, name: &str, xs: &View, e: &'m maps::Expr) -> Res<Val<'m>> {
        let dims = self.dims(&e.ty.shape)?;
        let Some(n) = dims.first().cloned() else {
            return unsupported(format!("{name} to a scalar"));
        };
        let start = match name {
            "take" | "drop-right" => Expr::Int(0),
            _ => Expr::op("-", vec![xs.dims[0].clone(), n.clone()]),
        };
        let mut v = xs.clone();
        v.offset = Expr::add(v.offset, Expr::mul(start, xs.strides[0].clone()));
        v.dims[0] = n;
        Ok(Val::Array(v))
    }

    /// `take`, `drop` … of a rotation: a rotation of fewer items, its
    /// first item further on (no copy; the items still wrap around the
    /// source).
    fn slice_rotation(
        &mut self,
        name: &str,
        r: &Rotation,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        let dims = self.dims(&e.ty.shape)?;
        let Some(n) = dims.first().cloned() else {
            return unsupported(format!("{name} to a scalar"));
        };
        let start = match name {
            "take" | "drop-right" => Expr::Int(0),
            _ => Expr::op("-", vec![r.dims[0].clone(), n.clone()]),
        };
        // The first item's place in the source, in [0, d) again.
        let d = r.src.dims[0].clone();
        let split = match start {
            Expr::Int(0) => r.split.clone(),
            start => self.named_int(
                "split",
                Expr::op("wrap", vec![Expr::add(r.split.clone(), start), d]),
                body,
            ),
        };
        Ok(Val::Rotated(Rotation {
            src: r.src.clone(),
            split,
            dims,
        }))
    }

    /// `(windows xs)`: window `i`'s item `j` is item `i + j`, a view.
    fn windows(&mut self, xs: &View, e: &'m maps::Expr) -> Res<Val<'m>> {
        let dims = self.dims(&e.ty.shape)?;
        if dims.len() != xs.dims.len() + 1 {
            return unsupported("windows of this shape");
        }
        let mut v = xs.clone();
        v.dims = dims;
        v.strides.insert(0, xs.strides[0].clone());
        Ok(Val::Array(v))
    }

    /// `(i-app transpose P)`: axis `k` of the result is axis `P[k]`, a view.
    fn transpose(&mut self, indices: &[Index], x: &Val<'m>) -> Res<Val<'m>> {
        let Some(Index::Shape(p)) = indices.first() else {
            return unsupported("transpose without its permutation");
        };
        let mut perm = Vec::new();
        for seg in p.segs() {
            match seg {
                Seg::Dim(d) => match d.as_const().and_then(|k| usize::try_from(k).ok()) {
                    Some(k) => perm.push(k),
                    None => return unsupported("transpose by a permutation known only at run time"),
                },
                Seg::Var(_) => return unsupported("transpose by a permutation known only at run time"),
            }
        }
        match x {
            Val::Scalar(..) if perm.is_empty() => Ok(x.clone()),
            Val::Array(xs) if xs.dims.len() == perm.len() && perm.iter().all(|&k| k < perm.len()) => {
                let mut v = xs.clone();
                v.dims = perm.iter().map(|&k| xs.dims[k].clone()).collect();
                v.strides = perm.iter().map(|&k| xs.strides[k].clone()).collect();
                Ok(Val::Array(v))
            }
            _ => unsupported("transpose of these arguments"),
        }
    }

    /// `n` points from `a` to `b` (the runtime's `rt_linspace`: in double
    /// precision, the last point exactly `b`).
    fn linspace(
        &mut self,
        a: &Val<'m>,
        b: &Val<'m>,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        let end = |v: &Val<'m>| match v {
            Val::Scalar(_, x) => Ok(x.clone()),
            Val::Array(v) if v.dims.is_empty() => Ok(v.load()),
            _ => unsupported("linspace between arrays"),
        };
        let (a, b) = (end(a)?, end(b)?);
        let dims = self.dims(&e.ty.shape)?;
        let [n] = dims.as_slice() else {
            return unsupported("linspace of this shape");
        };
        let n = n.clone();
        let dest = self.alloc("lin", Elem::Float, dims, body);
        body.push(Stmt::Call {
            func: "rt_linspace",
            args: vec![
                Expr::Addr {
                    buf: dest.buf,
                    index: Box::new(Expr::Int(0)),
                },
                a,
                b,
                n,
            ],
        });
        Ok(Val::Array(dest))
    }

    /// `(outer f a b)`: `f` applied to every pair of an item of `a` and an
    /// item of `b`, each result written into its place.
    fn outer(
        &mut self,
        f: &Val<'m>,
        a: &View,
        b: &View,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        match f {
            Val::Func(_) => {}
            Val::Prim { name, .. } if scalar_arity(name) == Some(2) => {}
            _ => return unsupported("outer by this function"),
        }
        let elem = elem_of(&e.ty.atom)?;
        let dims = self.dims(&e.ty.shape)?;
        let dest = self.alloc("outer", elem, dims, body);
        let (i, j) = (self.fresh("i"), self.fresh("j"));
        let idx = [Expr::Var(i), Expr::Var(j)];
        let outer = self.loop_depth;
        self.loop_depth += 2;
        let mut inner = Vec::new();
        let r = (|| {
            let x = cell_val(a.cell(&idx[..1]));
            let y = cell_val(b.cell(&idx[1..]));
            let v = self.apply(f.clone(), vec![x, y], e, &mut inner)?;
            self.copy(v, &dest.cell(&idx), &mut inner)
        })();
        self.loop_depth -= 2;
        r?;
        let inner = vec![Stmt::For {
            index: j,
            count: b.dims[0].clone(),
            parallel: false,
            body: inner,
        }];
        body.push(Stmt::For {
            index: i,
            count: a.dims[0].clone(),
            parallel: outer == 0,
            body: inner,
        });
        Ok(Val::Array(dest))
    }

    /// `dot` wraps, left to right; `f.dot` adds the rounded products as
    /// `f.sum` does (from 0.0, its tree over more than 256).
    fn dot(&mut self, name: &str, x: &View, y: &View, body: &mut Vec<Stmt>) -> Val<'m> {
        let (elem, add, mul, seed, order) = if name == "dot" {
            (Elem::Int, "+", "*", Expr::Int(0), Order::Left)
        } else {
            (Elem::Float, "f.+", "f.*", Expr::Float(0.0), Order::Tree)
        };
        let k = self.fresh("k");
        let acc = self.fresh("dot");
        let at = [Expr::Var(k)];
        body.push(Stmt::Reduce {
            acc,
            elem,
            op: add,
            seed: Some(seed),
            order,
            index: k,
            count: x.dims[0].clone(),
            body: Vec::new(),
            item: Expr::op(mul, vec![x.cell(&at).load(), y.cell(&at).load()]),
        });
        Val::Scalar(elem, Expr::Var(acc))
    }

    /// The matrix product. `matmul` wraps (any order); `f.matmul` adds
    /// each sum's products in blocks of 256 items, each block from 0.0 left
    /// to right, the blocks' sums added in order to 0.0 (the interpreter's
    /// blocked loop), by the runtime's `rt_contract_f32` (the kernel of
    /// the lifted dot too, see `contract.rs`).
    fn matmul(&mut self, name: &str, a: &View, b: &View, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        let float = name == "f.matmul";
        let elem = if float { Elem::Float } else { Elem::Int };
        let (m, k, n) = (a.dims[0].clone(), a.dims[1].clone(), b.dims[1].clone());
        let dest = self.alloc("mm", elem, vec![m.clone(), n.clone()], body);
        if float {
            // The runtime's register-tiled product, in the same order.
            let addr = |x: &View| Expr::Addr {
                buf: x.buf,
                index: Box::new(x.offset.clone()),
            };
            // (b(j, p) is b's item p, column j; the seed 0.0 added last.)
            body.push(Stmt::Call {
                func: "rt_contract_f32",
                args: vec![
                    addr(a),
                    a.strides[0].clone(),
                    a.strides[1].clone(),
                    addr(b),
                    b.strides[1].clone(),
                    b.strides[0].clone(),
                    m,
                    n.clone(),
                    k,
                    addr(&dest),
                    n,
                    Expr::Int(1),
                    Expr::Int(contract::BLOCKS),
                    Expr::Int(1),
                    Expr::Float(0.0),
                ],
            });
            return Ok(Val::Array(dest));
        }
        let (i, j, p) = (self.fresh("i"), self.fresh("j"), self.fresh("p"));
        let product = |at: Expr| {
            let x = a.cell(&[Expr::Var(i), at.clone()]).load();
            let y = b.cell(&[at, Expr::Var(j)]).load();
            Expr::op("*", vec![x, y])
        };
        let store = |value: Expr| Stmt::Store {
            buf: dest.buf,
            index: dest.cell(&[Expr::Var(i), Expr::Var(j)]).offset,
            value,
        };
        let cell = {
            let s = self.fresh("s");
            vec![
                Stmt::Reduce {
                    acc: s,
                    elem,
                    op: "+",
                    seed: Some(Expr::Int(0)),
                    order: Order::Left,
                    index: p,
                    count: k,
                    body: Vec::new(),
                    item: product(Expr::Var(p)),
                },
                store(Expr::Var(s)),
            ]
        };
        body.push(Stmt::For {
            index: i,
            count: m,
            parallel: self.loop_depth == 0,
            body: vec![Stmt::For {
                index: j,
                count: n,
                parallel: false,
                body: cell,
            }],
        });
        Ok(Val::Array(dest))
    }

    /// `mean` sums exactly (the runtime's `rt_mean_int`, in 128 bits) and
    /// divides in double precision; `f.mean` is `f.sum` over the length.
    fn mean(&mut self, name: &str, xs: &View, body: &mut Vec<Stmt>) -> Val<'m> {
        let d = xs.dims[0].clone();
        if name == "f.mean" {
            let k = self.fresh("k");
            let acc = self.fresh("sum");
            body.push(Stmt::Reduce {
                acc,
                elem: Elem::Float,
                op: "f.+",
                seed: Some(Expr::Float(0.0)),
                order: Order::Tree,
                index: k,
                count: d.clone(),
                body: Vec::new(),
                item: xs.cell(&[Expr::Var(k)]).load(),
            });
            return Val::Scalar(
                Elem::Float,
                Expr::op("f./", vec![Expr::Var(acc), Expr::op("i->f", vec![d])]),
            );
        }
        let out = self.alloc("mean", Elem::Float, Vec::new(), body);
        let addr = |buf: Var| Expr::Addr {
            buf,
            index: Box::new(Expr::Int(0)),
        };
        body.push(Stmt::Call {
            func: "rt_mean_int",
            args: vec![
                addr(out.buf),
                addr(xs.buf),
                xs.offset.clone(),
                d,
                xs.strides[0].clone(),
            ],
        });
        Val::Scalar(Elem::Float, out.load())
    }

    /// The position of the greatest (least) item, the first of equals; for
    /// Floats the first NaN if there is one. An empty vector is an error.
    fn arg_extreme(&mut self, name: &str, xs: &View, body: &mut Vec<Stmt>) -> Val<'m> {
        let d = xs.dims[0].clone();
        let what = if name.ends_with("max") {
            "greatest"
        } else {
            "least"
        };
        self.fail_if(
            Expr::op("==", vec![d.clone(), Expr::Int(0)]),
            format!("{name}: an empty vector has no {what} item"),
            body,
        );
        // Two passes, each a reduction that vectorises (as NumPy's): the
        // greatest (least) item, then the first index holding it. A float
        // extreme is NaN where an item is NaN (`f.max` and `f.min`), and
        // then the first NaN is the one: `x == m` holds for none.
        let float = name.starts_with("f.");
        let extreme = match (float, name.ends_with("max")) {
            (true, true) => "f.max",
            (true, false) => "f.min",
            (false, true) => "max",
            (false, false) => "min",
        };
        let at = |k: Expr| xs.cell(&[k]).load();
        let m = self.extreme_item(extreme, xs.elem, &d, at, body);
        let found = |x: Expr| {
            if float {
                Expr::op(
                    "or",
                    vec![
                        Expr::op("f.==", vec![x.clone(), Expr::Var(m)]),
                        Expr::op("f.isnan", vec![x]),
                    ],
                )
            } else {
                Expr::op("==", vec![x, Expr::Var(m)])
            }
        };
        let first = self.first_where(xs.elem, &d, at, found, body);
        Val::Scalar(Elem::Int, Expr::Var(first))
    }

    /// The greatest (least) of `n` items by `extreme` (`f.max`, `max`,
    /// `f.min`, `min`): a tree reduction, which vectorises; `item` reads
    /// the item at a position.
    pub(super) fn extreme_item(
        &mut self,
        extreme: &'static str,
        elem: Elem,
        n: &Expr,
        item: impl Fn(Expr) -> Expr,
        body: &mut Vec<Stmt>,
    ) -> Var {
        let (k, m) = (self.fresh("k"), self.fresh("extreme"));
        body.push(Stmt::Reduce {
            acc: m,
            elem,
            op: extreme,
            seed: None,
            order: Order::Tree,
            index: k,
            count: n.clone(),
            body: Vec::new(),
            item: item(Expr::Var(k)),
        });
        m
    }

    /// The first of `n` positions whose item `found` holds of, else `n`: a
    /// `min` tree over the positions (`n` where it does not hold), which
    /// vectorises.
    pub(super) fn first_where(
        &mut self,
        elem: Elem,
        n: &Expr,
        item: impl Fn(Expr) -> Expr,
        found: impl FnOnce(Expr) -> Expr,
        body: &mut Vec<Stmt>,
    ) -> Var {
        let (k, x, sel, first) = (
            self.fresh("k"),
            self.fresh("x"),
            self.fresh("sel"),
            self.fresh("first"),
        );
        body.push(Stmt::Reduce {
            acc: first,
            elem: Elem::Int,
            op: "min",
            seed: None,
            order: Order::Tree,
            index: k,
            count: n.clone(),
            body: vec![
                Stmt::Let {
                    var: x,
                    elem,
                    value: item(Expr::Var(k)),
                },
                Stmt::Let {
                    var: sel,
                    elem: Elem::Int,
                    value: n.clone(),
                },
                Stmt::If {
                    cond: found(Expr::Var(x)),
                    then: vec![Stmt::Set {
                        var: sel,
                        value: Expr::Var(k),
                    }],
                    otherwise: Vec::new(),
                },
            ],
            item: Expr::Var(sel),
        });
        first
    }
}

//! The intrinsics: each applied to argument values at the loop level.
//! Families of intrinsics live in files of their own beside this one;
//! [`Alloc::intrinsic`] tries each in turn.

use super::*;

impl<'m> Alloc<'m> {
    // -- intrinsics -----------------------------------------------------------

    pub(super) fn intrinsic(
        &mut self,
        name: &'static str,
        _types: &[TyAtom],
        indices: &[Index],
        args: Vec<Val<'m>>,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        if let Some(n) = scalar_arity(name) {
            if args.len() < n {
                return unsupported(format!("{name} applied to fewer arguments than it takes"));
            }
            let mut xs = Vec::with_capacity(n);
            for a in args {
                match a {
                    Val::Scalar(_, x) => xs.push(x),
                    Val::Array(v) if v.dims.is_empty() => xs.push(v.load()),
                    _ => return unsupported(format!("{name} of an array")),
                }
            }
            let elem = elem_of(&e.ty.atom)?;
            return Ok(Val::Scalar(elem, Expr::op(name, xs)));
        }
        // The families in files of their own: each gives `None` for a
        // name it does not take.
        // (one line per family here)
        if let Some(r) = self.iteration(name, &args, e, body) {
            return r;
        }
        if name == "pi" {
            return Ok(Val::Scalar(Elem::Float, Expr::Float(std::f32::consts::PI)));
        }
        let elem = elem_of(&e.ty.atom);
        match (name, args.as_slice()) {
            ("f.sum" | "f.product" | "sum" | "product" | "any" | "all", [Val::Array(xs)]) => {
                let (op, unit, order) = match name {
                    "f.sum" => ("f.+", Expr::Float(0.0), Order::Tree),
                    "f.product" => ("f.*", Expr::Float(1.0), Order::Left),
                    "sum" => ("+", Expr::Int(0), Order::Left),
                    "product" => ("*", Expr::Int(1), Order::Left),
                    "any" => ("or", Expr::Bool(false), Order::Left),
                    _ => ("and", Expr::Bool(true), Order::Left),
                };
                let xs = xs.clone();
                Ok(self.reduce_atoms(&xs, op, Some(unit), order, body))
            }
            ("f.sum" | "f.product" | "sum" | "product" | "any" | "all", [Val::Scalar(_, x)]) => {
                let (op, unit) = match name {
                    "f.sum" => ("f.+", Expr::Float(0.0)),
                    "f.product" => ("f.*", Expr::Float(1.0)),
                    "sum" => ("+", Expr::Int(0)),
                    "product" => ("*", Expr::Int(1)),
                    "any" => ("or", Expr::Bool(false)),
                    _ => ("and", Expr::Bool(true)),
                };
                Ok(Val::Scalar(elem?, Expr::op(op, vec![unit, x.clone()])))
            }
            ("length", [Val::Array(xs)]) => match xs.dims.first() {
                Some(d) => Ok(Val::Scalar(Elem::Int, d.clone())),
                None => unsupported("length of a scalar"),
            },
            ("reduce" | "reduce/zero", [op, rest @ ..]) => {
                let (seed, xs) = match rest {
                    [Val::Array(xs)] => (None, xs.clone()),
                    [seed, Val::Array(xs)] => (Some(seed.clone()), xs.clone()),
                    _ => return unsupported(format!("{name} of these arguments")),
                };
                self.reduce(op.clone(), seed, &xs, e, body)
            }
            ("fold", [op, seed, Val::Array(xs)]) => self.fold(op.clone(), seed.clone(), &xs.clone(), e, body),
            ("reverse", [Val::Array(xs)]) => {
                let mut v = xs.clone();
                if let (Some(n), Some(s)) = (v.dims.first().cloned(), v.strides.first().cloned()) {
                    v.offset = Expr::add(
                        v.offset,
                        Expr::mul(Expr::op("-", vec![n, Expr::Int(1)]), s.clone()),
                    );
                    v.strides[0] = Expr::mul(Expr::Int(-1), s);
                }
                Ok(Val::Array(v))
            }
            ("transpose2d", [Val::Array(xs)]) if xs.dims.len() == 2 => {
                let mut v = xs.clone();
                v.dims.swap(0, 1);
                v.strides.swap(0, 1);
                Ok(Val::Array(v))
            }
            ("head" | "last", [Val::Array(xs)]) => {
                let i = if name == "head" {
                    Expr::Int(0)
                } else {
                    Expr::op("-", vec![xs.dims[0].clone(), Expr::Int(1)])
                };
                Ok(cell_val(xs.cell(&[i])))
            }
            ("tail" | "curtail", [Val::Array(xs)]) => {
                let mut v = xs.clone();
                if name == "tail" {
                    v.offset = Expr::add(v.offset, v.strides[0].clone());
                }
                v.dims[0] = Expr::op("-", vec![v.dims[0].clone(), Expr::Int(1)]);
                Ok(Val::Array(v))
            }
            ("replicate", [x]) => {
                let Some(Index::Shape(f)) = indices.first() else {
                    return unsupported("replicate without its frame");
                };
                let frame = self.dims(f)?;
                let base = match x {
                    Val::Array(v) => v.clone(),
                    Val::Scalar(elem, s) => {
                        let v = self.alloc("one", *elem, vec![], body);
                        body.push(Stmt::Store {
                            buf: v.buf,
                            index: Expr::Int(0),
                            value: s.clone(),
                        });
                        v
                    }
                    _ => return unsupported("replicate of a function"),
                };
                let mut v = base;
                let n = frame.len();
                v.dims.splice(0..0, frame);
                v.strides.splice(0..0, std::iter::repeat_n(Expr::Int(0), n));
                Ok(Val::Array(v))
            }
            ("iota/static", []) => {
                let dims = self.dims(&e.ty.shape)?;
                Ok(Val::Array(self.iota(dims, body)))
            }
            ("reshape" | "flatten", [Val::Array(xs)]) => {
                let dims = self.dims(&e.ty.shape)?;
                let src = xs.clone();
                let flat = if self.is_whole(&src) {
                    src
                } else {
                    let d = self.alloc("flat", src.elem, src.dims.clone(), body);
                    self.copy(Val::Array(src), &d, body)?;
                    d
                };
                if name == "reshape" {
                    // A reshape to another number of atoms repeats or cuts
                    // them: not yet.
                    let n = product(&flat.dims);
                    let m = product(&dims);
                    if n != m {
                        return unsupported("reshape to another number of atoms");
                    }
                }
                Ok(Val::Array(View::contiguous(flat.buf, flat.elem, dims)))
            }
            ("append", [Val::Array(a), Val::Array(b)]) => {
                let elem = elem?;
                let dims = self.dims(&e.ty.shape)?;
                let dest = self.alloc("app", elem, dims, body);
                let (a, b) = (a.clone(), b.clone());
                let mut first = dest.clone();
                first.dims[0] = a.dims[0].clone();
                self.copy(Val::Array(a.clone()), &first, body)?;
                let mut second = dest.clone();
                second.offset = Expr::add(
                    second.offset,
                    Expr::mul(a.dims[0].clone(), dest.strides[0].clone()),
                );
                second.dims[0] = b.dims[0].clone();
                self.copy(Val::Array(b), &second, body)?;
                Ok(Val::Array(dest))
            }
            _ => unsupported(format!("the intrinsic {name}")),
        }
    }

    fn iota(&mut self, dims: Vec<Expr>, body: &mut Vec<Stmt>) -> View {
        let v = self.alloc("iota", Elem::Int, dims, body);
        let i = self.fresh("i");
        body.push(Stmt::For {
            index: i,
            count: product(&v.dims),
            parallel: self.loop_depth == 0,
            body: vec![Stmt::Store {
                buf: v.buf,
                index: Expr::Var(i),
                value: Expr::Var(i),
            }],
        });
        v
    }

    /// Every atom of `xs` combined by `op` from `seed`.
    fn reduce_atoms(
        &mut self,
        xs: &View,
        op: &'static str,
        seed: Option<Expr>,
        order: Order,
        body: &mut Vec<Stmt>,
    ) -> Val<'m> {
        // Row-major position p of xs: its index along each axis.
        let p = self.fresh("p");
        let mut rest = Expr::Var(p);
        let mut offset = xs.offset.clone();
        let mut item_body = Vec::new();
        for k in (0..xs.dims.len()).rev() {
            if k == 0 {
                offset = Expr::add(offset, Expr::mul(rest.clone(), xs.strides[k].clone()));
            } else {
                let q = self.fresh("q");
                item_body.push(Stmt::Let {
                    var: q,
                    elem: Elem::Int,
                    value: Expr::op("mod", vec![rest.clone(), xs.dims[k].clone()]),
                });
                offset = Expr::add(offset, Expr::mul(Expr::Var(q), xs.strides[k].clone()));
                let r = self.fresh("r");
                item_body.push(Stmt::Let {
                    var: r,
                    elem: Elem::Int,
                    value: Expr::op("/", vec![rest, xs.dims[k].clone()]),
                });
                rest = Expr::Var(r);
            }
        }
        let acc = self.fresh("acc");
        body.push(Stmt::Reduce {
            acc,
            elem: xs.elem,
            op,
            seed,
            order,
            index: p,
            count: product(&xs.dims),
            body: item_body,
            item: Expr::load(xs.buf, offset),
        });
        Val::Scalar(xs.elem, Expr::Var(acc))
    }

    /// `reduce` or `reduce/zero` by `op` over the items of `xs`.
    fn reduce(
        &mut self,
        op: Val<'m>,
        seed: Option<Val<'m>>,
        xs: &View,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        let Some(prim) = self.elementwise(&op) else {
            // A general operator: a left fold, item by item.
            return match seed {
                Some(s) => self.fold(op, s, xs, e, body),
                None => {
                    let first = cell_val(xs.cell(&[Expr::Int(0)]));
                    let mut rest = xs.clone();
                    rest.offset = Expr::add(rest.offset, rest.strides[0].clone());
                    rest.dims[0] = Expr::op("-", vec![rest.dims[0].clone(), Expr::Int(1)]);
                    self.fold(op, first, &rest, e, body)
                }
            };
        };
        let order = if prim == "f.+" { Order::Tree } else { Order::Left };
        let items = xs.dims[0].clone();
        let item_dims = xs.dims[1..].to_vec();
        // Each position of an item reduced alone (the same combinations,
        // lane by lane).
        let lanes: Vec<Var> = item_dims.iter().map(|_| self.fresh("l")).collect();
        let lane_idx: Vec<Expr> = lanes.iter().map(|v| Expr::Var(*v)).collect();
        let mut lane_view = xs.clone();
        lane_view.dims = vec![items.clone()];
        lane_view.strides = vec![xs.strides[0].clone()];
        let inner = xs.cell(&[Expr::Int(0)]).cell(&lane_idx);
        lane_view.offset = inner.offset;
        let seed_at = |s: &Val<'m>| -> Res<Expr> {
            match s {
                Val::Scalar(_, x) => Ok(x.clone()),
                Val::Array(v) => Ok(v.cell(&lane_idx).load()),
                _ => unsupported("a function as a seed"),
            }
        };
        let seed_expr = seed.as_ref().map(seed_at).transpose()?;
        let i = self.fresh("k");
        let acc = self.fresh("acc");
        let stmt = Stmt::Reduce {
            acc,
            elem: xs.elem,
            op: prim,
            seed: seed_expr,
            order,
            index: i,
            count: items,
            body: Vec::new(),
            item: Expr::load(
                xs.buf,
                Expr::add(
                    lane_view.offset.clone(),
                    Expr::mul(Expr::Var(i), xs.strides[0].clone()),
                ),
            ),
        };
        if item_dims.is_empty() {
            body.push(stmt);
            return Ok(Val::Scalar(xs.elem, Expr::Var(acc)));
        }
        let dest = self.alloc("red", xs.elem, item_dims.clone(), body);
        let mut inner = vec![
            stmt,
            Stmt::Store {
                buf: dest.buf,
                index: dest.cell(&lane_idx).offset,
                value: Expr::Var(acc),
            },
        ];
        let outer = self.loop_depth;
        for (k, (index, count)) in lanes.iter().zip(item_dims).enumerate().rev() {
            inner = vec![Stmt::For {
                index: *index,
                count,
                parallel: k == 0 && outer == 0,
                body: inner,
            }];
        }
        body.extend(inner);
        Ok(Val::Array(dest))
    }

    /// The scalar primitive `op` applies to each position of its items, if
    /// it is one: a primitive, or a function of two parameters that maps
    /// a primitive over them in order (what lifting a primitive to items
    /// gives).
    fn elementwise(&self, op: &Val<'m>) -> Option<&'static str> {
        match op {
            Val::Prim { name, .. } if scalar_arity(name) == Some(2) => Some(name),
            Val::Func(c) => {
                let Binder::Value(a) = c.binder else {
                    return None;
                };
                let Kind::Array { atoms, .. } = &c.body.kind else {
                    return None;
                };
                let [Atom::Lambda { param: b, body, .. }] = atoms.as_slice() else {
                    return None;
                };
                lifted_primitive(body, a, *b)
            }
            _ => None,
        }
    }

    /// `fold` by `op` from `seed` over the items of `xs`, left to right.
    fn fold(
        &mut self,
        op: Val<'m>,
        seed: Val<'m>,
        xs: &View,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        let elem = elem_of(&e.ty.atom)?;
        let dims = self.dims(&e.ty.shape)?;
        let i = self.fresh("k");
        if dims.is_empty() {
            let Val::Scalar(_, s) = seed else {
                return unsupported("fold of this seed");
            };
            let acc = self.fresh("acc");
            body.push(Stmt::Let {
                var: acc,
                elem,
                value: s,
            });
            let item = cell_val(xs.cell(&[Expr::Var(i)]));
            self.loop_depth += 1;
            let mut inner = Vec::new();
            let r = self.apply(op, vec![Val::Scalar(elem, Expr::Var(acc)), item], e, &mut inner);
            self.loop_depth -= 1;
            let next = match r? {
                Val::Scalar(_, x) => x,
                Val::Array(v) if v.dims.is_empty() => v.load(),
                _ => return unsupported("fold by this operator"),
            };
            inner.push(Stmt::Set {
                var: acc,
                value: next,
            });
            body.push(Stmt::For {
                index: i,
                count: xs.dims[0].clone(),
                parallel: false,
                body: inner,
            });
            return Ok(Val::Scalar(elem, Expr::Var(acc)));
        }
        // An array accumulator: two buffers, the step written into the
        // other and copied back.
        let acc = self.alloc("acc", elem, dims.clone(), body);
        self.copy(seed, &acc, body)?;
        let next = self.alloc("next", elem, dims, body);
        let item = cell_val(xs.cell(&[Expr::Var(i)]));
        self.loop_depth += 1;
        let mut inner = Vec::new();
        let r = (|| {
            let v = self.apply(op, vec![Val::Array(acc.clone()), item], e, &mut inner)?;
            self.copy(v, &next, &mut inner)?;
            self.copy(Val::Array(next.clone()), &acc, &mut inner)
        })();
        self.loop_depth -= 1;
        r?;
        body.push(Stmt::For {
            index: i,
            count: xs.dims[0].clone(),
            parallel: false,
            body: inner,
        });
        Ok(Val::Array(acc))
    }
}

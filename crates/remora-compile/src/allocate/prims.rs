//! The intrinsics: each applied to argument values at the loop level.
//! Families of intrinsics live in files of their own beside this one;
//! [`Alloc::intrinsic`] tries each in turn.

use super::*;

/// A reduction over at most this many items (a count known when compiling)
/// combines them lane by lane, each lane's items in a register (see
/// `reduce`).
const FEW_ITEMS: i64 = 8;

impl<'m> Alloc<'m> {
    // -- intrinsics -----------------------------------------------------------

    pub(super) fn intrinsic(
        &mut self,
        name: &'static str,
        types: &[TyAtom],
        indices: &[Index],
        args: Vec<Val<'m>>,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        self.indices_checked(indices, body);
        if let Some(n) = scalar_arity(name) {
            if args.len() < n && is_function(&e.ty.atom) {
                return Ok(Val::Partial {
                    func: std::boxed::Box::new(Val::Prim {
                        name,
                        types: types.to_vec(),
                        indices: indices.to_vec(),
                    }),
                    args,
                });
            }
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
        // Only the reductions take delayed maps and rotations (and a run
        // of a rotation's items is a rotation): anything else gets them
        // computed.
        let slices_rotation = matches!(name, "take" | "drop" | "take-right" | "drop-right")
            && matches!(args.as_slice(), [Val::Rotated(_)]);
        let args = if slices_rotation
            || FUSED_CONSUMERS.contains(&name)
                && match name {
                    "scan" => self.sum_scan_of_map(&args),
                    "iscan" => self.iscan_of_map(&args),
                    "scatter" => self.scatter_of_map(&args),
                    "grade" => self.grades_a_map(&args),
                    "hist" => self.hist_of_map(&args),
                    "take*" | "drop*" => self.takes_of_map(&args),
                    "filter" => self.loop_depth == 0 && self.filters_a_vector(&args),
                    _ => true,
                } {
            args
        } else {
            let mut forced = Vec::with_capacity(args.len());
            for a in args {
                forced.push(self.force(a, body)?);
            }
            forced
        };
        // The families in files of their own: each gives `None` for a
        // name it does not take.
        // (one line per family here)
        if let Some(r) = self.styles(name, &args, body) {
            return r;
        }
        if let Some(r) = self.files(name, indices, &args, e, body) {
            return r;
        }
        if let Some(r) = self.records(name, indices, &args, e, body) {
            return r;
        }
        if let Some(r) = self.compact(name, &args, e, body) {
            return r;
        }
        if let Some(r) = self.order(name, &args, e, body) {
            return r;
        }
        if let Some(r) = self.gather(name, indices, &args, e, body) {
            return r;
        }
        if let Some(r) = self.iteration(name, &args, e, body) {
            return r;
        }
        if let Some(r) = self.boxes(name, indices, &args, e, body) {
            return r;
        }
        if let Some(r) = self.trace(name, &args, e, body) {
            return r;
        }
        if name == "pi" {
            return Ok(Val::Scalar(Elem::Float, Expr::Float(std::f32::consts::PI)));
        }
        let elem = elem_of(&e.ty.atom);
        match (name, args.as_slice()) {
            (
                "f.sum" | "f.product" | "sum" | "product" | "any" | "all",
                [xs @ (Val::Array(_) | Val::Delayed(_) | Val::Rotated(_))],
            ) => {
                let (op, unit, order) = match name {
                    "f.sum" => ("f.+", Expr::Float(0.0), Order::Tree),
                    "f.product" => ("f.*", Expr::Float(1.0), Order::Left),
                    "sum" => ("+", Expr::Int(0), Order::Left),
                    "product" => ("*", Expr::Int(1), Order::Left),
                    "any" => ("or", Expr::Bool(false), Order::Left),
                    _ => ("and", Expr::Bool(true), Order::Left),
                };
                let xs = xs.clone();
                self.reduce_atoms(&xs, op, Some(unit), order, body)
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
                    [xs @ (Val::Array(_) | Val::Delayed(_) | Val::Rotated(_))] => (None, xs.clone()),
                    [seed, xs @ (Val::Array(_) | Val::Delayed(_) | Val::Rotated(_))] => {
                        (Some(self.force(seed.clone(), body)?), xs.clone())
                    }
                    _ => return unsupported(format!("{name} of these arguments")),
                };
                self.reduce(op.clone(), seed, &xs, e, None, body)
            }
            ("fold", [op, seed, Val::Array(xs)]) => match self.best_index_fold(op, seed, xs, e, body) {
                Some(best) => Ok(best),
                // By a lambda that is a primitive whose every grouping of
                // the items, in order, gives the same bits (`(fn (m v)
                // (f.max m v))`): a reduction from the seed, a register
                // per row, in blocks where long.
                None if xs.dims.len() == 1
                    && self
                        .elementwise(op)
                        .is_some_and(|p| exact_order(p, Order::Left) == Order::Tree) =>
                {
                    self.reduce(
                        op.clone(),
                        Some(seed.clone()),
                        &Val::Array(xs.clone()),
                        e,
                        None,
                        body,
                    )
                }
                None => self.fold(op.clone(), seed.clone(), &xs.clone(), e, body),
            },
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
            // Of an array of boxes: its first (last) box, or row of boxes.
            ("head" | "last", [Val::Boxes(b)]) => match b.frame().first() {
                Some(n) => {
                    let i = if name == "head" {
                        Expr::Int(0)
                    } else {
                        Expr::op("-", vec![n.clone(), Expr::Int(1)])
                    };
                    Ok(b.cell(&[i]))
                }
                None => unsupported("head of a box"),
            },
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
                    // Another number of atoms is a run-time error.
                    self.check_count(&flat.dims, &dims, body);
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

    pub(super) fn iota(&mut self, dims: Vec<Expr>, body: &mut Vec<Stmt>) -> View {
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

    /// Every atom of `xs` (an array or a delayed map) combined by `op`
    /// from `seed`, in row-major order.
    pub(super) fn reduce_atoms(
        &mut self,
        xs: &Val<'m>,
        op: &'static str,
        seed: Option<Expr>,
        order: Order,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        let (elem, dims) = shape_of(xs)?;
        let p = self.fresh("p");
        let mut item_body = Vec::new();
        let item = match xs {
            Val::Array(v) if v.is_dense() => v.load_at(Expr::Var(p)),
            _ => {
                // Row-major position p: its index along each axis.
                let mut idx = vec![Expr::Int(0); dims.len()];
                let mut rest = Expr::Var(p);
                for k in (0..dims.len()).rev() {
                    if k == 0 {
                        idx[k] = rest.clone();
                        continue;
                    }
                    let q = self.fresh("q");
                    item_body.push(Stmt::Let {
                        var: q,
                        elem: Elem::Int,
                        value: Expr::op("mod", vec![rest.clone(), dims[k].clone()]),
                    });
                    idx[k] = Expr::Var(q);
                    let r = self.fresh("r");
                    item_body.push(Stmt::Let {
                        var: r,
                        elem: Elem::Int,
                        value: Expr::op("/", vec![rest, dims[k].clone()]),
                    });
                    rest = Expr::Var(r);
                }
                self.loop_depth += 1;
                let item = self.element(xs, &idx, &mut item_body);
                self.loop_depth -= 1;
                item?
            }
        };
        let acc = self.fresh("acc");
        body.push(Stmt::Reduce {
            acc,
            elem,
            op,
            seed,
            order: exact_order(op, order),
            index: p,
            count: product(&dims),
            body: item_body,
            item,
        });
        Ok(Val::Scalar(elem, Expr::Var(acc)))
    }

    /// `f` (`reduce` or `reduce/zero`) applied to `args`, written into
    /// `dest` (the accumulator of items that are cells: no buffer of its
    /// own, no copy). `dest` is apart from the arguments.
    pub(super) fn reduce_into(
        &mut self,
        f: Val<'m>,
        args: Vec<Val<'m>>,
        e: &'m maps::Expr,
        dest: &View,
        body: &mut Vec<Stmt>,
    ) -> Res<()> {
        let items = |v: &Val<'m>| matches!(v, Val::Array(_) | Val::Delayed(_) | Val::Rotated(_));
        if let Val::Prim { indices, .. } = &f {
            self.indices_checked(indices, body);
        }
        let v = match (&f, args.as_slice()) {
            (Val::Prim { .. }, [op, xs]) if items(xs) => {
                self.reduce(op.clone(), None, xs, e, Some(dest), body)?
            }
            (Val::Prim { .. }, [op, seed, xs]) if items(xs) && !matches!(seed, Val::Record(_)) => {
                let seed = self.force(seed.clone(), body)?;
                self.reduce(op.clone(), Some(seed), xs, e, Some(dest), body)?
            }
            _ => self.apply(f, args, e, body)?,
        };
        match v {
            Val::Array(v) if v.buf == dest.buf => Ok(()),
            v => self.copy(v, dest, body),
        }
    }

    /// `reduce` or `reduce/zero` by `op` over the items of `xs` (into
    /// `into` where given, when the items are cells of its shape).
    fn reduce(
        &mut self,
        op: Val<'m>,
        seed: Option<Val<'m>>,
        xs: &Val<'m>,
        e: &'m maps::Expr,
        into: Option<&View>,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        let Some(prim) = self.elementwise(&op) else {
            // A general operator: a left fold, item by item.
            let Val::Array(xs) = self.force(xs.clone(), body)? else {
                return unsupported("reduce of a function");
            };
            return match seed {
                Some(s) => self.fold(op, s, &xs, e, body),
                None => {
                    let first = cell_val(xs.cell(&[Expr::Int(0)]));
                    let mut rest = xs.clone();
                    rest.offset = Expr::add(rest.offset, rest.strides[0].clone());
                    rest.dims[0] = Expr::op("-", vec![rest.dims[0].clone(), Expr::Int(1)]);
                    body.push(Stmt::If {
                        cond: Expr::op("==", vec![xs.dims[0].clone(), Expr::Int(0)]),
                        then: vec![Stmt::Fail {
                            what: "reduce of an empty array".into(),
                        }],
                        otherwise: Vec::new(),
                    });
                    self.fold(op, first, &rest, e, body)
                }
            };
        };
        let order = exact_order(prim, if prim == "f.+" { Order::Tree } else { Order::Left });
        // Items whose cells are made whole: added where each is made, else
        // computed whole first.
        let forced_whole;
        let xs = match xs {
            Val::Delayed(d) if d.whole_cells => {
                if let Some(v) = self.reduce_whole_cells(prim, seed.as_ref(), xs, into, body)? {
                    return Ok(v);
                }
                forced_whole = self.force(xs.clone(), body)?;
                &forced_whole
            }
            xs => xs,
        };
        // Lane by lane, a delayed map's cells are made only where an item
        // has atoms: one whose cells could fail, over items that may have
        // none, is computed whole first (so that its error is raised).
        let forced;
        let xs = match xs {
            Val::Delayed(d)
                if !d.dims[1..].iter().all(|n| matches!(n, Expr::Int(k) if *k > 0))
                    && !self.delayed_cannot_fail(d) =>
            {
                forced = self.force(xs.clone(), body)?;
                &forced
            }
            xs => xs,
        };
        let (elem, dims) = shape_of(xs)?;
        let Some(items) = dims.first().cloned() else {
            return unsupported("reduce of a scalar");
        };
        let item_dims = dims[1..].to_vec();
        // Each position of an item reduced alone (the same combinations,
        // lane by lane).
        let lanes: Vec<Var> = item_dims.iter().map(|_| self.fresh("l")).collect();
        let lane_idx: Vec<Expr> = lanes.iter().map(|v| Expr::Var(*v)).collect();
        let seed_expr = match &seed {
            None => None,
            Some(Val::Scalar(_, x)) => Some(x.clone()),
            Some(Val::Array(v)) => Some(v.cell(&lane_idx).load()),
            Some(_) => return unsupported("a function as a seed"),
        };
        let i = self.fresh("k");
        let mut idx = vec![Expr::Var(i)];
        idx.extend(lane_idx.iter().cloned());
        let mut item_body = Vec::new();
        self.loop_depth += 1 + lanes.len();
        let item = self.element(xs, &idx, &mut item_body);
        self.loop_depth -= 1 + lanes.len();
        let item = item?;
        let acc = self.fresh("acc");
        let stmt = Stmt::Reduce {
            acc,
            elem,
            op: prim,
            seed: seed_expr,
            order,
            index: i,
            count: items.clone(),
            body: item_body,
            item,
        };
        if item_dims.is_empty() {
            body.push(stmt);
            return Ok(Val::Scalar(elem, Expr::Var(acc)));
        }
        let dest = match into {
            Some(d) if d.dims.len() == item_dims.len() && d.elem == elem => d.clone(),
            _ => self.alloc("red", elem, item_dims.clone(), body),
        };
        let mut inner = vec![
            stmt,
            Stmt::Store {
                buf: dest.buf,
                index: dest.cell(&lane_idx).offset,
                value: Expr::Var(acc),
            },
        ];
        let outer = self.loop_depth;
        inner = nest(&lanes, item_dims.clone(), inner, outer);
        // Left to right (up to 256 items, for the tree), item by item into
        // the whole accumulator: each item's cell is made once (a delayed
        // map's bindings, a rotation's offset) and its atoms stream; each
        // position sees the same combinations in the same order as lane by
        // lane.
        // (Where the items cannot be made one at a time, lane by lane only.)
        // Where the items of a buffer lie closer together than the atoms
        // of an item (a reduction along the rows of a transposed matrix),
        // lane by lane reads memory in order: it is taken.
        let items_closer = match xs {
            Val::Array(v) => match (v.strides.first(), v.strides.last()) {
                (Some(Expr::Int(item)), Some(Expr::Int(atom))) => {
                    Some(Expr::Bool(item.unsigned_abs() < atom.unsigned_abs()))
                }
                (Some(item), Some(atom)) => Some(Expr::op(
                    "<",
                    vec![
                        Expr::op("abs", vec![item.clone()]),
                        Expr::op("abs", vec![atom.clone()]),
                    ],
                )),
                _ => None,
            },
            _ => None,
        };
        // Over a few items, a count known here, lane by lane too: each lane
        // combines its few atoms in a register in one pass over the lanes,
        // where item by item would pass over the whole accumulator once per
        // item (and, for items that are strided views, over the argument's
        // memory once per item: a reduction over the block axes of a
        // reshaped image, over the columns of a transposed [M 4]).
        let few_items = matches!(items, Expr::Int(n) if n <= FEW_ITEMS);
        if few_items || matches!(items_closer, Some(Expr::Bool(true))) {
            body.extend(inner);
            return Ok(Val::Array(dest));
        }
        // An operator whose every grouping gives the same bits goes item by
        // item (a left fold is one of them) over any number of items. A
        // float sum over more than 256 items of a buffer (not a map, which
        // may be a contraction, lane by lane) goes item by item within each
        // of the tree's leaves, the leaves' sums then added as the tree
        // adds them.
        // (Over few lanes, fewer than 64, lane by lane: each lane's tree on
        // the threads, where the leaves would be one block on one thread.)
        let any_grouping = exact_order(prim, Order::Left) == Order::Tree;
        let tree = order == Order::Tree && !any_grouping;
        let few_lanes = match item_dims.as_slice() {
            [Expr::Int(n)] => Some(Expr::Bool(*n < 64)),
            [n] => Some(Expr::op("<", vec![n.clone(), Expr::Int(64)])),
            _ => None,
        };
        // A map whose items are rows made from each item's atoms (a frame
        // of sums of one shared vector turned inside out, `columns.rs`)
        // goes by leaves over as few as `MIN_SHARED` lanes: lane by lane
        // would read and compute every item once per lane.
        let shared = match xs {
            Val::Delayed(d) => self.shared_rows(d, &item_dims),
            _ => false,
        };
        // Outside loops, over enough items that the tree's top nodes go to
        // the threads (`rt_tree_top`: 65,536), a row of 8 lanes or more
        // goes by leaves too: one pass over the rows, where lane by lane
        // reads every row's memory once per lane (the column sums of an
        // [N 16] matrix).
        let parted_rows = self.loop_depth == 0
            && prim == "f.+"
            && elem == Elem::Float
            && matches!(items, Expr::Int(n) if n >= 65_536)
            && matches!(item_dims.as_slice(), [Expr::Int(n)] if *n >= 8);
        let few_lanes = if shared || parted_rows {
            Some(Expr::Bool(false))
        } else {
            few_lanes
        };
        if tree
            && (matches!(xs, Val::Array(_)) || shared)
            && !matches!(few_lanes, None | Some(Expr::Bool(true)))
            && !matches!(items, Expr::Int(n) if n <= 256)
            && let Ok(by_leaves) = self.reduce_by_leaves(prim, seed.as_ref(), xs, &dest, &items)
        {
            let lane_by_lane = match (items_closer.clone(), few_lanes) {
                (Some(closer @ Expr::Op { .. }), Some(few @ Expr::Op { .. })) => {
                    Some(Expr::op("or", vec![closer, few]))
                }
                (Some(c @ Expr::Op { .. }), _) | (_, Some(c @ Expr::Op { .. })) => Some(c),
                _ => None,
            };
            inner = match lane_by_lane {
                Some(cond) => vec![Stmt::If {
                    cond,
                    then: inner,
                    otherwise: by_leaves,
                }],
                None => by_leaves,
            };
        }
        match self.reduce_by_items(prim, seed.as_ref(), xs, &dest, &items) {
            Ok(by_items) => {
                let mut cond = if tree {
                    Expr::op("<=", vec![items, Expr::Int(256)])
                } else {
                    Expr::Bool(true)
                };
                if let Some(closer @ Expr::Op { .. }) = items_closer {
                    let not_closer = Expr::op("not", vec![closer]);
                    cond = match cond {
                        Expr::Bool(true) => not_closer,
                        c => Expr::op("and", vec![c, not_closer]),
                    };
                }
                // (A count known here: one form only, so that a lifted
                // reduction of many items is a loop nest later rules see
                // whole, a contraction.)
                if let Expr::Op { op: "<=", args } = &cond
                    && let [Expr::Int(n), Expr::Int(leaf)] = args.as_slice()
                {
                    body.extend(if n <= leaf { by_items } else { inner });
                    return Ok(Val::Array(dest));
                }
                body.push(Stmt::If {
                    cond,
                    then: by_items,
                    otherwise: inner,
                });
            }
            Err(_) => body.extend(inner),
        }
        Ok(Val::Array(dest))
    }

    /// The items of a float sum (the last argument of `reduce` or
    /// `reduce/zero` by `f.+`, `a`; `before` the arguments before it) as a
    /// delayed map whose cells are made whole, one item at a time: a map
    /// over one axis whose cells are arrays that its consumer cannot make
    /// atom by atom (`let`s of rows, an outer product: the centred rows'
    /// outer products of a covariance summed). The sum adds each item's
    /// cell where it makes it (`reduce_whole_cells`): no array of every
    /// item's cell.
    pub(super) fn whole_cells(
        &mut self,
        f: &Val<'m>,
        before: &[Val<'m>],
        a: &'m maps::Expr,
        args: &'m [maps::Expr],
    ) -> Res<Option<Val<'m>>> {
        let reduce = matches!(
            f,
            Val::Prim {
                name: "reduce" | "reduce/zero",
                ..
            }
        );
        if !reduce || before.len() + 1 != args.len() || !matches!(a.ty.atom, TyAtom::Float) {
            return Ok(None);
        }
        if before.first().and_then(|op| self.elementwise(op)) != Some("f.+") {
            return Ok(None);
        }
        let Kind::Map {
            frame,
            binds,
            body: cell,
        } = &a.kind
        else {
            return Ok(None);
        };
        if frame.rank() != Some(1)
            || cell.ty.shape.is_scalar()
            || !binds
                .iter()
                .all(|b| matches!(b.value.kind, Kind::Var(_) | Kind::Array { .. }))
        {
            return Ok(None);
        }
        Ok(Some(Val::Delayed(Rc::new(Delayed {
            map: a,
            scope: self.scope.clone(),
            elem: Elem::Float,
            dims: self.dims(&a.ty.shape)?,
            transposed: false,
            appended: None,
            whole_cells: true,
        }))))
    }

    /// A float sum of items whose cells are made whole (see
    /// [`Alloc::whole_cells`]), item by item into one row of the cell's
    /// atoms (into `into` where given and one run of memory): left to
    /// right up to 256 items (`reduce_by_items`), over more by the tree's
    /// leaves (`reduce_by_leaves`, its top nodes on the threads), each
    /// item's cell made once, where its leaf adds it. Each position sees
    /// the same combinations in the same order as lane by lane. `None`
    /// where either form cannot be written (the items are then computed
    /// whole first).
    fn reduce_whole_cells(
        &mut self,
        prim: &'static str,
        seed: Option<&Val<'m>>,
        xs: &Val<'m>,
        into: Option<&View>,
        body: &mut Vec<Stmt>,
    ) -> Res<Option<Val<'m>>> {
        let (elem, dims) = shape_of(xs)?;
        if prim != "f.+" || elem != Elem::Float || dims.len() < 2 {
            return Ok(None);
        }
        let items = dims[0].clone();
        let cell = dims[1..].to_vec();
        let mut out = Vec::new();
        let dest = match into {
            Some(d) if d.dims.len() == cell.len() && d.elem == elem && flat(d).is_some() => d.clone(),
            _ => self.alloc("red", elem, cell, &mut out),
        };
        let Some(row) = flat(&dest) else {
            return Ok(None);
        };
        let seed = match seed {
            None => None,
            Some(Val::Array(v)) => match flat(v) {
                Some(f) => Some(Val::Array(f)),
                None => return Ok(None),
            },
            Some(_) => return Ok(None),
        };
        let seed = seed.as_ref();
        let r = (|| -> Res<Vec<Stmt>> {
            Ok(match &items {
                Expr::Int(n) if *n <= 256 => self.reduce_by_items(prim, seed, xs, &row, &items)?,
                Expr::Int(_) => self.reduce_by_leaves(prim, seed, xs, &row, &items)?,
                _ => {
                    let few = self.reduce_by_items(prim, seed, xs, &row, &items)?;
                    let many = self.reduce_by_leaves(prim, seed, xs, &row, &items)?;
                    vec![Stmt::If {
                        cond: Expr::op("<=", vec![items.clone(), Expr::Int(256)]),
                        then: few,
                        otherwise: many,
                    }]
                }
            })
        })();
        match r {
            Ok(stmts) => {
                body.extend(out);
                body.extend(stmts);
                Ok(Some(Val::Array(dest)))
            }
            Err(_) => Ok(None),
        }
    }

    /// Item `k` of a reduction's items as a row of its atoms, for the
    /// forms that add items into a row: an item of more than one axis
    /// flattened (made, and copied where its atoms are not one run).
    fn item_row(&mut self, xs: &Val<'m>, k: Expr, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        let cell = self.item_cell(xs, k, body)?;
        if shape_of(xs)?.1.len() <= 2 {
            return Ok(cell);
        }
        let Val::Array(v) = self.force(cell, body)? else {
            return unsupported("an item of this kind");
        };
        if let Some(f) = flat(&v) {
            return Ok(Val::Array(f));
        }
        let copy = self.alloc("item", v.elem, v.dims.clone(), body);
        self.copy(Val::Array(v), &copy, body)?;
        match flat(&copy) {
            Some(f) => Ok(Val::Array(f)),
            None => unsupported("an item of this kind"),
        }
    }

    /// Whether the delayed map `d` (over items, each a row of `lanes`)
    /// makes each item's row from that item's atoms alone, by a map over
    /// the lanes that cannot fail (an error then arises wherever the
    /// items are made, in any order), over at least `MIN_SHARED` lanes.
    fn shared_rows(&mut self, d: &Delayed<'m>, lanes: &[Expr]) -> bool {
        let Kind::Map { binds, body, .. } = &d.map.kind else {
            return false;
        };
        // (Through the `let`s of each item's atoms.)
        let mut body = &**body;
        while let Kind::Map {
            frame, body: inner, ..
        } = &body.kind
            && frame.is_scalar()
        {
            body = inner;
        }
        !d.transposed
            && matches!(lanes, [Expr::Int(n)] if *n >= crate::columns::MIN_SHARED)
            && binds.iter().all(|b| b.ty.shape.is_scalar())
            && matches!(&body.kind, Kind::Map { frame, .. } if frame.rank() == Some(1))
            && self.delayed_cannot_fail(d)
    }

    /// The item-by-item form of a reduction into `dest` (see `reduce`).
    fn reduce_by_items(
        &mut self,
        prim: &'static str,
        seed: Option<&Val<'m>>,
        xs: &Val<'m>,
        dest: &View,
        items: &Expr,
    ) -> Res<Vec<Stmt>> {
        if dest.dims.len() == 1 {
            return self.reduce_by_items_blocked(prim, seed, xs, dest, items);
        }
        let mut out = Vec::new();
        let outer = self.loop_depth;
        // The accumulator's first value: the seed, or item 0.
        let start = match seed {
            Some(s) => {
                self.copy(s.clone(), dest, &mut out)?;
                Expr::Int(0)
            }
            None => {
                self.fail_if(
                    Expr::op("==", vec![items.clone(), Expr::Int(0)]),
                    "reduce of an empty array",
                    &mut out,
                );
                let first = self.item_cell(xs, Expr::Int(0), &mut out)?;
                self.lanes(dest, &mut out, outer, |a, idx, lane| {
                    let x = a.element(&first, idx, lane)?;
                    Ok(x)
                })?;
                Expr::Int(1)
            }
        };
        // Items start … n-1, each combined into every position.
        let (k, item) = (self.fresh("k"), self.fresh("item"));
        let mut step = vec![Stmt::Let {
            var: item,
            elem: Elem::Int,
            value: Expr::add(Expr::Var(k), start.clone()),
        }];
        let cell = self.item_cell(xs, Expr::Var(item), &mut step)?;
        self.lanes(dest, &mut step, outer, |a, idx, lane| {
            let x = a.element(&cell, idx, lane)?;
            Ok(Expr::op(prim, vec![dest.cell(idx).load(), x]))
        })?;
        out.push(Stmt::For {
            index: k,
            count: Expr::op("-", vec![items.clone(), start]),
            parallel: false,
            body: step,
        });
        Ok(out)
    }

    /// A float sum of more than 256 vector items of a buffer into `dest`
    /// in the tree's order, item by item: the items of each of the tree's
    /// leaves (runs of at most 256, `rt_tree_leaf_bounds`) added left to
    /// right into a row of partial sums, then the rows added pairwise,
    /// level by level, as the tree adds them, and the seed (if any) added
    /// to the total. In blocks of lanes, on the threads where no loop
    /// encloses it; each lane sees the same combinations in the same order
    /// as lane by lane.
    fn reduce_by_leaves(
        &mut self,
        prim: &'static str,
        seed: Option<&Val<'m>>,
        xs: &Val<'m>,
        dest: &View,
        items: &Expr,
    ) -> Res<Vec<Stmt>> {
        let mut out = Vec::new();
        let outer = self.loop_depth;
        // The plan (see the runtime): the leaves' count, the most partial
        // sums held, the leaves' bounds, then each leaf's merges from `m`.
        let m = Expr::add(
            Expr::op(
                "/",
                vec![Expr::add(items.clone(), Expr::Int(127)), Expr::Int(128)],
            ),
            Expr::Int(1),
        );
        let plan = self.alloc(
            "plan",
            Elem::Int,
            vec![Expr::add(Expr::mul(m.clone(), Expr::Int(2)), Expr::Int(4))],
            &mut out,
        );
        out.push(Stmt::Call {
            func: "rt_tree_leaf_bounds",
            args: vec![
                items.clone(),
                Expr::Addr {
                    buf: plan.buf,
                    index: Box::new(Expr::Int(0)),
                },
            ],
        });
        let (count, most) = (self.fresh("nleaf"), self.fresh("most"));
        for (var, at) in [(count, 0), (most, 1)] {
            out.push(Stmt::Let {
                var,
                elem: Elem::Int,
                value: Expr::load(plan.buf, Expr::Int(at)),
            });
        }
        let lanes = dest.dims[0].clone();
        // Outside loops, a float sum's items split among the threads too:
        // the tree's nodes at a depth (`rt_tree_top`: up to 16, of over
        // 2,048 items each, so every node above them splits), each
        // summed by its own leaves into a row of its own, then the rows
        // added pairwise as the tree adds them (`rt_tree_top_fadd`). The
        // nodes are the tree's whatever their number: the same bits.
        let parted = outer == 0 && prim == "f.+" && dest.elem == Elem::Float;
        let mut part_body = Vec::new();
        let (part, nlo, mq) = (self.fresh("part"), self.fresh("nlo"), self.fresh("mq"));
        let mut top_parts = None;
        if parted {
            let top = self.alloc("top", Elem::Int, vec![Expr::Int(18)], &mut out);
            out.push(Stmt::Call {
                func: "rt_tree_top",
                args: vec![
                    items.clone(),
                    Expr::Addr {
                        buf: top.buf,
                        index: Box::new(Expr::Int(0)),
                    },
                ],
            });
            let parts = self.fresh("parts");
            out.push(Stmt::Let {
                var: parts,
                elem: Elem::Int,
                value: Expr::load(top.buf, Expr::Int(0)),
            });
            let psum = self.alloc("psum", dest.elem, vec![Expr::Int(16), lanes.clone()], &mut out);
            let nn = self.fresh("nn");
            part_body.push(Stmt::Let {
                var: nlo,
                elem: Elem::Int,
                value: Expr::load(top.buf, Expr::add(Expr::Var(part), Expr::Int(1))),
            });
            part_body.push(Stmt::Let {
                var: nn,
                elem: Elem::Int,
                value: Expr::op(
                    "-",
                    vec![
                        Expr::load(top.buf, Expr::add(Expr::Var(part), Expr::Int(2))),
                        Expr::Var(nlo),
                    ],
                ),
            });
            part_body.push(Stmt::Let {
                var: mq,
                elem: Elem::Int,
                value: Expr::add(
                    Expr::op(
                        "/",
                        vec![Expr::add(Expr::Var(nn), Expr::Int(127)), Expr::Int(128)],
                    ),
                    Expr::Int(1),
                ),
            });
            let pplan = self.alloc(
                "pplan",
                Elem::Int,
                vec![Expr::add(Expr::mul(m.clone(), Expr::Int(2)), Expr::Int(4))],
                &mut part_body,
            );
            part_body.push(Stmt::Call {
                func: "rt_tree_leaf_bounds",
                args: vec![
                    Expr::Var(nn),
                    Expr::Addr {
                        buf: pplan.buf,
                        index: Box::new(Expr::Int(0)),
                    },
                ],
            });
            let pleaf = self.fresh("nleaf");
            part_body.push(Stmt::Let {
                var: pleaf,
                elem: Elem::Int,
                value: Expr::load(pplan.buf, Expr::Int(0)),
            });
            top_parts = Some((parts, psum, pplan, pleaf));
        }
        let held = self.alloc(
            "held",
            dest.elem,
            vec![Expr::Var(most), lanes.clone()],
            if parted { &mut part_body } else { &mut out },
        );
        // The plan this block's leaves follow: its part's, from `nlo` on,
        // or the whole sum's.
        let (plan_buf, leaves, from, merges_at) = match &top_parts {
            Some((_, _, pplan, pleaf)) => (pplan.buf, *pleaf, Expr::Var(nlo), Expr::Var(mq)),
            None => (plan.buf, count, Expr::Int(0), m.clone()),
        };
        let width = block_of(xs, &lanes);
        let (blk, lo, sp) = (self.fresh("blk"), self.fresh("lo"), self.fresh("sp"));
        let blocks = blocks_of(&lanes, &width);
        let w = Expr::op(
            "min",
            vec![width.clone(), Expr::op("-", vec![lanes, Expr::Var(lo)])],
        );
        // Partial sum `r` held, this block's lanes.
        let row = |r: Expr| {
            let mut v = held.clone();
            v.offset = Expr::add(Expr::mul(r, held.strides[0].clone()), Expr::Var(lo));
            v.dims = vec![w.clone()];
            v.strides = vec![Expr::Int(1)];
            v
        };
        let full = move |idx: &[Expr]| vec![Expr::add(Expr::Var(lo), idx[0].clone())];
        let mut inner = vec![
            Stmt::Let {
                var: lo,
                elem: Elem::Int,
                value: Expr::mul(Expr::Var(blk), width),
            },
            Stmt::Let {
                var: sp,
                elem: Elem::Int,
                value: Expr::Int(0),
            },
        ];
        self.loop_depth += 1;
        let r = (|| {
            // Each leaf, left to right, into the next partial sum held.
            let (t, first, end) = (self.fresh("t"), self.fresh("first"), self.fresh("end"));
            let mut leaf = Vec::new();
            for (var, at) in [(first, 2), (end, 3)] {
                leaf.push(Stmt::Let {
                    var,
                    elem: Elem::Int,
                    value: Expr::add(
                        from.clone(),
                        Expr::load(plan_buf, Expr::add(Expr::Var(t), Expr::Int(at))),
                    ),
                });
            }
            let sums = row(Expr::Var(sp));
            self.loop_depth += 1;
            let cell = self.item_row(xs, Expr::Var(first), &mut leaf)?;
            self.lanes(&sums, &mut leaf, outer + 2, |a, idx, lane| {
                a.element(&cell, &full(idx), lane)
            })?;
            let (k, item) = (self.fresh("k"), self.fresh("item"));
            let mut step = vec![Stmt::Let {
                var: item,
                elem: Elem::Int,
                value: Expr::add(Expr::add(Expr::Var(k), Expr::Var(first)), Expr::Int(1)),
            }];
            self.loop_depth += 1;
            let cell = self.item_row(xs, Expr::Var(item), &mut step)?;
            self.lanes(&sums, &mut step, outer + 3, |a, idx, lane| {
                let x = a.element(&cell, &full(idx), lane)?;
                Ok(Expr::op(prim, vec![sums.cell(idx).load(), x]))
            })?;
            self.loop_depth -= 2;
            leaf.push(Stmt::For {
                index: k,
                count: Expr::op(
                    "-",
                    vec![
                        Expr::op("-", vec![Expr::Var(end), Expr::Var(first)]),
                        Expr::Int(1),
                    ],
                ),
                parallel: false,
                body: step,
            });
            // The tree's nodes this leaf completes: the last two sums held
            // added into one.
            let (left, right) = (
                row(Expr::op("-", vec![Expr::Var(sp), Expr::Int(1)])),
                row(Expr::Var(sp)),
            );
            let mut merge = vec![];
            self.lanes(&left, &mut merge, outer + 3, |_, idx, _| {
                Ok(Expr::op(
                    prim,
                    vec![left.cell(idx).load(), right.cell(idx).load()],
                ))
            })?;
            merge.push(Stmt::Set {
                var: sp,
                value: Expr::op("-", vec![Expr::Var(sp), Expr::Int(1)]),
            });
            leaf.push(Stmt::For {
                index: self.fresh("merge"),
                count: Expr::load(
                    plan_buf,
                    Expr::add(Expr::add(Expr::Var(t), Expr::Int(3)), merges_at.clone()),
                ),
                parallel: false,
                body: merge,
            });
            leaf.push(Stmt::Set {
                var: sp,
                value: Expr::add(Expr::Var(sp), Expr::Int(1)),
            });
            inner.push(Stmt::For {
                index: t,
                count: Expr::Var(leaves),
                parallel: false,
                body: leaf,
            });
            // The total (the seed, if any, plus it) into this block of `dest`.
            let total = row(Expr::Int(0));
            if let Some((_, psum, ..)) = &top_parts {
                // (A part's total into its row.)
                let mut block = psum.clone();
                block.offset = Expr::add(Expr::mul(Expr::Var(part), psum.strides[0].clone()), Expr::Var(lo));
                block.dims = vec![w.clone()];
                block.strides = vec![Expr::Int(1)];
                self.lanes(&block, &mut inner, outer + 2, |_, idx, _| {
                    Ok(total.cell(idx).load())
                })?;
                return Ok(());
            }
            let mut block = dest.clone();
            block.offset = Expr::add(
                dest.offset.clone(),
                Expr::mul(Expr::Var(lo), dest.strides[0].clone()),
            );
            block.dims[0] = w.clone();
            let seed = match seed {
                None => None,
                Some(Val::Scalar(_, x)) => Some(Err(x.clone())),
                Some(Val::Array(v)) if v.dims.len() == 1 => {
                    let mut v = v.clone();
                    v.offset = Expr::add(v.offset, Expr::mul(Expr::Var(lo), v.strides[0].clone()));
                    v.dims[0] = w.clone();
                    Some(Ok(v))
                }
                Some(_) => return unsupported("a seed of another shape"),
            };
            self.lanes(&block, &mut inner, outer + 1, |_, idx, _| {
                let sum = total.cell(idx).load();
                Ok(match &seed {
                    None => sum,
                    Some(Err(x)) => Expr::op(prim, vec![x.clone(), sum]),
                    Some(Ok(v)) => Expr::op(prim, vec![v.cell(idx).load(), sum]),
                })
            })?;
            Ok(())
        })();
        self.loop_depth -= 1;
        r?;
        let Some((parts, psum, ..)) = top_parts else {
            out.push(Stmt::For {
                index: blk,
                count: blocks,
                parallel: outer == 0,
                body: inner,
            });
            return Ok(out);
        };
        part_body.push(Stmt::For {
            index: blk,
            count: blocks,
            parallel: false,
            body: inner,
        });
        out.push(Stmt::For {
            index: part,
            count: Expr::Var(parts),
            parallel: true,
            body: part_body,
        });
        out.push(Stmt::Call {
            func: "rt_tree_top_fadd",
            args: vec![
                Expr::Addr {
                    buf: psum.buf,
                    index: Box::new(Expr::Int(0)),
                },
                Expr::Var(parts),
                dest.dims[0].clone(),
            ],
        });
        // The total (the seed, if any, plus it) into `dest`.
        let mut total = psum.clone();
        total.dims = vec![dest.dims[0].clone()];
        total.strides = vec![Expr::Int(1)];
        let seed = match seed {
            None => None,
            Some(Val::Scalar(_, x)) => Some(Err(x.clone())),
            Some(Val::Array(v)) if v.dims.len() == 1 => Some(Ok(v.clone())),
            Some(_) => return unsupported("a seed of another shape"),
        };
        self.lanes(dest, &mut out, outer, |_, idx, _| {
            let sum = total.cell(idx).load();
            Ok(match &seed {
                None => sum,
                Some(Err(x)) => Expr::op(prim, vec![x.clone(), sum]),
                Some(Ok(v)) => Expr::op(prim, vec![v.cell(idx).load(), sum]),
            })
        })?;
        Ok(out)
    }

    /// The item-by-item form over vector items, in blocks of lanes: each
    /// block (on the threads where no loop encloses it) its own
    /// accumulator, kept in the first cache while every item adds its
    /// part to it. Each lane sees the same combinations in the same order.
    fn reduce_by_items_blocked(
        &mut self,
        prim: &'static str,
        seed: Option<&Val<'m>>,
        xs: &Val<'m>,
        dest: &View,
        items: &Expr,
    ) -> Res<Vec<Stmt>> {
        let mut out = Vec::new();
        if seed.is_none() {
            self.fail_if(
                Expr::op("==", vec![items.clone(), Expr::Int(0)]),
                "reduce of an empty array",
                &mut out,
            );
        }
        let outer = self.loop_depth;
        let (blk, lo) = (self.fresh("blk"), self.fresh("lo"));
        let lanes = dest.dims[0].clone();
        let width = block_of(xs, &lanes);
        let blocks = blocks_of(&lanes, &width);
        let mut block = dest.clone();
        block.offset = Expr::add(
            dest.offset.clone(),
            Expr::mul(Expr::Var(lo), dest.strides[0].clone()),
        );
        block.dims[0] = Expr::op(
            "min",
            vec![width.clone(), Expr::op("-", vec![lanes, Expr::Var(lo)])],
        );
        let full = move |idx: &[Expr]| vec![Expr::add(Expr::Var(lo), idx[0].clone())];
        let mut inner = vec![Stmt::Let {
            var: lo,
            elem: Elem::Int,
            value: Expr::mul(Expr::Var(blk), width),
        }];
        self.loop_depth += 1;
        let r = (|| {
            let start = match seed {
                Some(s) => {
                    let s = match s {
                        Val::Array(v) if v.dims.len() == 1 => {
                            let mut v = v.clone();
                            v.offset = Expr::add(v.offset, Expr::mul(Expr::Var(lo), v.strides[0].clone()));
                            v.dims[0] = block.dims[0].clone();
                            Val::Array(v)
                        }
                        _ => return unsupported("a seed of another shape"),
                    };
                    self.copy(s, &block, &mut inner)?;
                    Expr::Int(0)
                }
                None => {
                    let first = self.item_row(xs, Expr::Int(0), &mut inner)?;
                    self.lanes(&block, &mut inner, outer + 1, |a, idx, lane| {
                        a.element(&first, &full(idx), lane)
                    })?;
                    Expr::Int(1)
                }
            };
            let (k, item) = (self.fresh("k"), self.fresh("item"));
            let mut step = vec![Stmt::Let {
                var: item,
                elem: Elem::Int,
                value: Expr::add(Expr::Var(k), start.clone()),
            }];
            let cell = self.item_row(xs, Expr::Var(item), &mut step)?;
            self.lanes(&block, &mut step, outer + 1, |a, idx, lane| {
                let x = a.element(&cell, &full(idx), lane)?;
                Ok(Expr::op(prim, vec![block.cell(idx).load(), x]))
            })?;
            inner.push(Stmt::For {
                index: k,
                count: Expr::op("-", vec![items.clone(), start]),
                parallel: false,
                body: step,
            });
            Ok(())
        })();
        self.loop_depth -= 1;
        r?;
        out.push(Stmt::For {
            index: blk,
            count: blocks,
            parallel: outer == 0,
            body: inner,
        });
        Ok(out)
    }

    /// Item `k` of a reduction's items, its cell made once into `body`.
    fn item_cell(&mut self, xs: &Val<'m>, k: Expr, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        match xs {
            Val::Delayed(d) => {
                let d = d.clone();
                self.delayed_cell(&d, &[k], body)
            }
            v => match cell_of(v, &[k]) {
                Some(c) => Ok(cell_val(c)),
                None => unsupported("an item of a function"),
            },
        }
    }

    /// `dest[idx] = atom(idx)` at every position of `dest`, the outermost
    /// loop parallel where no loop encloses it.
    fn lanes(
        &mut self,
        dest: &View,
        body: &mut Vec<Stmt>,
        outer: usize,
        atom: impl FnOnce(&mut Self, &[Expr], &mut Vec<Stmt>) -> Res<Expr>,
    ) -> Res<()> {
        let lanes: Vec<Var> = dest.dims.iter().map(|_| self.fresh("l")).collect();
        let idx: Vec<Expr> = lanes.iter().map(|v| Expr::Var(*v)).collect();
        let mut inner = Vec::new();
        self.loop_depth += lanes.len();
        let x = atom(self, &idx, &mut inner);
        self.loop_depth -= lanes.len();
        inner.push(Stmt::Store {
            buf: dest.buf,
            index: dest.cell(&idx).offset,
            value: x?,
        });
        inner = nest(&lanes, dest.dims.clone(), inner, outer);
        body.extend(inner);
        Ok(())
    }

    /// The scalar primitive `op` applies to each position of its items, if
    /// it is one: a primitive, or a function of two parameters that maps
    /// a primitive over them in order (what lifting a primitive to items
    /// gives).
    pub(super) fn elementwise(&self, op: &Val<'m>) -> Option<&'static str> {
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
    pub(super) fn fold(
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
            let Some(s) = scalar_of(&self.force(seed, body)?) else {
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
        // other (computed there directly), then the two swapped.
        let acc = self.alloc("acc", elem, dims.clone(), body);
        self.copy(seed, &acc, body)?;
        let item = cell_val(xs.cell(&[Expr::Var(i)]));
        // A step that updates the accumulator: written over it, one
        // buffer (see `inplace`).
        let mut inner = Vec::new();
        if self.step_in_place(&op, &[Val::Array(acc.clone()), item.clone()], &acc, e, &mut inner)? {
            body.push(Stmt::For {
                index: i,
                count: xs.dims[0].clone(),
                parallel: false,
                body: inner,
            });
            return Ok(Val::Array(acc));
        }
        let next = self.alloc("next", elem, dims, body);
        // (A step over the whole state: its loops are the outermost ones
        // that can run in parallel.)
        self.apply_into(&op, vec![Val::Array(acc.clone()), item], e, &next, &mut inner)?;
        inner.push(Stmt::Swap {
            a: acc.buf,
            b: next.buf,
        });
        let state = self.fresh("state");
        let turned = match acc.dims.as_slice() {
            [len] => self.fold_in_scalars((acc.buf, next.buf), i, &xs.dims[0], &inner, elem, len),
            _ => None,
        };
        if let Some(turned) =
            turned.or_else(|| folds::fold_per_atom(acc.buf, next.buf, i, &xs.dims[0], &inner, state, elem))
        {
            body.retain(|s| !matches!(s, Stmt::Alloc { buf, .. } if *buf == next.buf));
            body.extend(turned);
            return Ok(Val::Array(acc));
        }
        body.push(Stmt::For {
            index: i,
            count: xs.dims[0].clone(),
            parallel: false,
            body: inner,
        });
        Ok(Val::Array(acc))
    }
}

/// How many blocks of `width` atoms a reduction's items run in over
/// cells of `lanes` atoms: at least one, so that over cells of no atoms
/// the items' own work, which may fail, still runs once.
fn blocks_of(lanes: &Expr, width: &Expr) -> Expr {
    let ceil = Expr::op(
        "/",
        vec![
            Expr::add(lanes.clone(), Expr::op("-", vec![width.clone(), Expr::Int(1)])),
            width.clone(),
        ],
    );
    match lanes {
        Expr::Int(n) if *n > 0 => ceil,
        _ => Expr::op("max", vec![Expr::Int(1), ceil]),
    }
}

/// The lanes of a reduction's block over `lanes`: all of them where the
/// items' cells are made whole (each made once), else [`lane_block`].
fn block_of(xs: &Val<'_>, lanes: &Expr) -> Expr {
    match xs {
        Val::Delayed(d) if d.whole_cells => match lanes {
            Expr::Int(n) => Expr::Int((*n).max(1)),
            n => Expr::op("max", vec![n.clone(), Expr::Int(1)]),
        },
        _ => lane_block(lanes),
    }
}

/// A view's atoms as one row, where they are one run of memory in
/// row-major order.
fn flat(v: &View) -> Option<View> {
    if v.dims.len() <= 1 {
        return Some(v.clone());
    }
    if v.strides != View::contiguous(v.buf, v.elem, v.dims.clone()).strides {
        return None;
    }
    Some(View {
        buf: v.buf,
        elem: v.elem,
        offset: v.offset.clone(),
        dims: vec![product(&v.dims)],
        strides: vec![Expr::Int(1)],
    })
}

/// The lanes of a block of a reduction over vector items (a block's
/// accumulator stays in the first cache): a quarter of them, so that
/// several blocks share the threads, in multiples of 64, from 256 to 2,048.
fn lane_block(lanes: &Expr) -> Expr {
    let quarter = |n: i64| ((n + 3) / 4 + 63) / 64 * 64;
    match lanes {
        Expr::Int(n) => Expr::Int(quarter(*n).clamp(256, 2048)),
        n => {
            let q = Expr::op(
                "*",
                vec![
                    Expr::op("/", vec![Expr::add(n.clone(), Expr::Int(255)), Expr::Int(256)]),
                    Expr::Int(64),
                ],
            );
            Expr::op(
                "min",
                vec![Expr::Int(2048), Expr::op("max", vec![Expr::Int(256), q])],
            )
        }
    }
}

/// A reduction's items' element type and the shape of all of them.
fn shape_of(xs: &Val<'_>) -> Res<(Elem, Vec<Expr>)> {
    match xs {
        Val::Array(v) => Ok((v.elem, v.dims.clone())),
        Val::Delayed(d) => Ok((d.elem, d.dims.clone())),
        Val::Rotated(r) => Ok((r.src.elem, r.dims.clone())),
        _ => unsupported("a reduction of a function"),
    }
}

/// The order a reduction by `op` may use: the tree for the operators whose
/// every grouping gives the same bits (Int addition, products, max and
/// min, bitwise and Boolean operations: the tree runs on several threads),
/// else what the language fixes. `f.max` and `f.min` too: NaN if any item
/// is NaN, else of the items that compare greatest (least) the last (the
/// first) — ties of -0.0 and 0.0 — in any grouping that keeps the items'
/// order, as the tree does.
pub(super) fn exact_order(op: &str, order: Order) -> Order {
    match op {
        "+" | "*" | "max" | "min" | "bit-and" | "bit-or" | "bit-xor" | "and" | "or" | "f.max" | "f.min" => {
            Order::Tree
        }
        _ => order,
    }
}

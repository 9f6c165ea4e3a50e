//! Ordering and searching: `sort`, `grade`, `f.sort`, `f.grade` and
//! `searchsorted`(`/right`) call the C runtime (a stable merge sort, over
//! 4,096 atoms the interpreter's radix sort on every thread; the first
//! or last few atoms of a sort picked in one pass, no sort; and a
//! binary search on the interpreter's keys); `sort-by` and `grade-by` are
//! the interpreter's bottom-up merge sort written at the loop level, the
//! less-than inlined, so that it makes the same comparisons in the same
//! order (a less-than that is no strict weak order, or one that fails,
//! gives what the interpreter gives); a `sort-by` of atoms merges the
//! atoms themselves, each pass's runs exchanged with the last's.

use super::*;

impl<'m> Alloc<'m> {
    pub(super) fn order(
        &mut self,
        name: &'static str,
        args: &[Val<'m>],
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Option<Res<Val<'m>>> {
        Some(match (name, args) {
            ("sort" | "grade" | "f.sort" | "f.grade", [Val::Array(xs)]) => self.sort_atoms(name, xs, body),
            ("searchsorted" | "searchsorted/right", [Val::Array(row), v]) => {
                self.search(name == "searchsorted/right", row, v, body)
            }
            ("sort-by" | "grade-by", [less, Val::Array(xs)]) => {
                self.sort_by(name == "grade-by", less.clone(), xs, e, body)
            }
            (
                "sort" | "grade" | "f.sort" | "f.grade" | "searchsorted" | "searchsorted/right" | "sort-by"
                | "grade-by",
                _,
            ) => unsupported(format!("{name} of these arguments")),
            _ => return None,
        })
    }

    /// `sort`, `grade`, `f.sort` or `f.grade` of the vector `xs`: a new
    /// buffer filled by the runtime.
    fn sort_atoms(&mut self, name: &'static str, xs: &View, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        let [n] = xs.dims.as_slice() else {
            return unsupported(format!("{name} of an array that is not a vector"));
        };
        let func = match (name, xs.elem) {
            ("sort", Elem::Int) => "rt_sort_int",
            ("grade", Elem::Int) => "rt_grade_int",
            ("f.sort", Elem::Float) => "rt_sort_float",
            ("f.grade", Elem::Float) => "rt_grade_float",
            _ => return unsupported(format!("{name} of {} atoms", xs.elem.name())),
        };
        let elem = if name.ends_with("grade") {
            Elem::Int
        } else {
            xs.elem
        };
        let out = self.alloc("sorted", elem, vec![n.clone()], body);
        body.push(Stmt::Call {
            func,
            args: vec![
                Expr::Addr {
                    buf: xs.buf,
                    index: Box::new(xs.offset.clone()),
                },
                xs.strides[0].clone(),
                n.clone(),
                Expr::Addr {
                    buf: out.buf,
                    index: Box::new(Expr::Int(0)),
                },
            ],
        });
        Ok(Val::Array(out))
    }

    /// `(take-right K (sort xs))` or `(take K (sort xs))` (`f.sort` too)
    /// of a vector, `K` known and at most the runtime's `RT_SELECT_MOST`:
    /// the `K` greatest (least) atoms picked by the runtime in one pass,
    /// in the sort's order, equal keys in the row's order as the stable
    /// sort leaves them (a lifted top-K makes no sorted row). `None`
    /// where `e` is not such a slice of a sort.
    pub(super) fn selected_sort(&mut self, e: &'m maps::Expr, body: &mut Vec<Stmt>) -> Res<Option<Val<'m>>> {
        /// The greatest `K` the runtime's `rt_select_*` keeps.
        const SELECT_MOST: i64 = 32;
        let Kind::App { func, args } = &e.kind else {
            return Ok(None);
        };
        let (Some(take @ ("take" | "take-right")), [sorted]) = (prim_of(func), args.as_slice()) else {
            return Ok(None);
        };
        let Kind::App {
            func: sort,
            args: row,
        } = &sorted.kind
        else {
            return Ok(None);
        };
        let (Some(sort @ ("sort" | "f.sort")), [xs]) = (prim_of(sort), row.as_slice()) else {
            return Ok(None);
        };
        let func_name = match (sort, &e.ty.atom) {
            ("sort", TyAtom::Int) => "rt_select_int",
            ("f.sort", TyAtom::Float) => "rt_select_float",
            _ => return Ok(None),
        };
        let k = match self.dims(&e.ty.shape)?.as_slice() {
            [Expr::Int(k)] if (0..=SELECT_MOST).contains(k) && xs.ty.shape.rank() == Some(1) => *k,
            _ => return Ok(None),
        };
        // The slice's index arguments are checked as its application checks them.
        if let Val::Prim { indices, .. } = self.value(func, body)? {
            self.indices_checked(&indices, body);
        }
        let Val::Array(xs) = (match self.value(xs, body)? {
            v @ Val::Array(_) => v,
            v => self.force(v, body)?,
        }) else {
            return unsupported(format!("{take} of a {sort} of this argument"));
        };
        let [n] = xs.dims.as_slice() else {
            return unsupported(format!("{sort} of an array that is not a vector"));
        };
        let out = self.alloc("selected", xs.elem, vec![Expr::Int(k)], body);
        body.push(Stmt::Call {
            func: func_name,
            args: vec![
                Expr::Addr {
                    buf: xs.buf,
                    index: Box::new(xs.offset.clone()),
                },
                xs.strides[0].clone(),
                n.clone(),
                Expr::Int(k),
                Expr::Bool(take == "take-right"),
                Expr::Addr {
                    buf: out.buf,
                    index: Box::new(Expr::Int(0)),
                },
            ],
        });
        Ok(Some(Val::Array(out)))
    }

    /// `searchsorted` (`right`: `searchsorted/right`) of `v` among the
    /// breakpoints `row`: one runtime search, which also checks the row.
    fn search(&mut self, right: bool, row: &View, v: &Val<'m>, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        let [n] = row.dims.as_slice() else {
            return unsupported("searchsorted of breakpoints that are not a vector");
        };
        let v = match v {
            Val::Scalar(_, x) => x.clone(),
            Val::Array(a) if a.dims.is_empty() => a.load(),
            _ => return unsupported("searchsorted of a value that is not a scalar"),
        };
        let (op, unsorted) = match row.elem {
            Elem::Int => ("search.int", "unsorted.int"),
            Elem::Float => ("search.float", "unsorted.float"),
            Elem::Bool => ("search.bool", "unsorted.bool"),
        };
        let addr = Expr::Addr {
            buf: row.buf,
            index: Box::new(row.offset.clone()),
        };
        // The order of the breakpoints checked first, a check of its own
        // (made once before a loop of searches: allocate/checks.rs) …
        let name = if right {
            "searchsorted/right"
        } else {
            "searchsorted"
        };
        body.push(Stmt::If {
            cond: Expr::op(unsorted, vec![addr.clone(), row.strides[0].clone(), n.clone()]),
            then: vec![Stmt::Fail {
                what: format!("{name}: the breakpoints are not in ascending order"),
            }],
            otherwise: Vec::new(),
        });
        // … then the search.
        let at = self.fresh("at");
        body.push(Stmt::Let {
            var: at,
            elem: Elem::Int,
            value: Expr::op(
                op,
                vec![addr, row.strides[0].clone(), n.clone(), v, Expr::Bool(right)],
            ),
        });
        Ok(Val::Scalar(Elem::Int, Expr::Var(at)))
    }

    /// `sort-by` (`grade`: `grade-by`) of the items of `xs` by `less`:
    /// the interpreter's `merge_sort` on item numbers, then (for
    /// `sort-by`) the items gathered.
    fn sort_by(
        &mut self,
        grade: bool,
        less: Val<'m>,
        xs: &View,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        let Some(n) = xs.dims.first().cloned() else {
            return unsupported("sort-by of a scalar");
        };
        // A sort of atoms merges the atoms themselves (no item number to
        // read each through): the same comparisons of the same values,
        // so the same order; else the item numbers are merged.
        let by_value = !grade && xs.dims.len() == 1;
        let elem = if by_value { xs.elem } else { Elem::Int };
        let order = self.alloc("order", elem, vec![n.clone()], body);
        let merged = self.alloc("merged", elem, vec![n.clone()], body);
        let t = self.fresh("t");
        body.push(Stmt::For {
            index: t,
            count: n.clone(),
            parallel: self.loop_depth == 0,
            body: vec![Stmt::Store {
                buf: order.buf,
                index: Expr::Var(t),
                value: if by_value {
                    xs.cell(&[Expr::Var(t)]).load()
                } else {
                    Expr::Var(t)
                },
            }],
        });
        let width = self.fresh("width");
        body.push(Stmt::Let {
            var: width,
            elem: Elem::Int,
            value: Expr::Int(1),
        });
        let w = Expr::Var(width);
        let two_w = Expr::mul(Expr::Int(2), w.clone());
        let lt = |a: Expr, b: Expr| Expr::op("<", vec![a, b]);
        let min = |a: Expr, b: Expr| Expr::op("min", vec![a, b]);
        let var = |v: Var| Expr::Var(v);
        let load = |buf: Var, at: Expr| Expr::load(buf, at);

        self.loop_depth += 1;
        let r = (|| -> Res<Vec<Stmt>> {
            // One pass: each pair of runs of `width` merged into `merged`.
            let (run, lo, mid, hi, i, j, k) = (
                self.fresh("run"),
                self.fresh("lo"),
                self.fresh("mid"),
                self.fresh("hi"),
                self.fresh("i"),
                self.fresh("j"),
                self.fresh("k"),
            );
            let mut pair = vec![
                Stmt::Let {
                    var: lo,
                    elem: Elem::Int,
                    value: Expr::mul(var(run), two_w.clone()),
                },
                Stmt::Let {
                    var: mid,
                    elem: Elem::Int,
                    value: min(Expr::add(var(lo), w.clone()), n.clone()),
                },
                Stmt::Let {
                    var: hi,
                    elem: Elem::Int,
                    value: min(Expr::add(var(lo), two_w.clone()), n.clone()),
                },
                Stmt::Let {
                    var: i,
                    elem: Elem::Int,
                    value: var(lo),
                },
                Stmt::Let {
                    var: j,
                    elem: Elem::Int,
                    value: var(mid),
                },
                Stmt::Let {
                    var: k,
                    elem: Elem::Int,
                    value: var(lo),
                },
            ];
            let both_left = Expr::op("and", vec![lt(var(i), var(mid)), lt(var(j), var(hi))]);
            // One step of the merge: the right item taken only when it is
            // strictly less than the left one.
            let mut step = Vec::new();
            let item = |at: Var| {
                if by_value {
                    Val::Scalar(elem, load(order.buf, var(at)))
                } else {
                    cell_val(xs.cell(&[load(order.buf, var(at))]))
                }
            };
            let (right_item, left_item) = (item(j), item(i));
            let is_less = match self.apply(less.clone(), vec![right_item, left_item], e, &mut step)? {
                Val::Scalar(_, x) => x,
                Val::Array(v) if v.dims.is_empty() => v.load(),
                _ => return unsupported("sort-by with a less-than that does not give a Bool"),
            };
            let take = self.fresh("take");
            step.push(Stmt::Let {
                var: take,
                elem: Elem::Bool,
                value: is_less,
            });
            let bump = |v: Var| Stmt::Set {
                var: v,
                value: Expr::add(var(v), Expr::Int(1)),
            };
            let store_from = |from: Var| Stmt::Store {
                buf: merged.buf,
                index: var(k),
                value: load(order.buf, var(from)),
            };
            step.push(Stmt::If {
                cond: var(take),
                then: vec![store_from(j), bump(j)],
                otherwise: vec![store_from(i), bump(i)],
            });
            step.push(bump(k));
            pair.push(Stmt::If {
                cond: both_left.clone(),
                then: vec![Stmt::DoWhile {
                    body: step,
                    cond: both_left,
                }],
                otherwise: vec![],
            });
            // What is left of either run, in order.
            for (from, end) in [(i, mid), (j, hi)] {
                let u = self.fresh("u");
                pair.push(Stmt::For {
                    index: u,
                    count: Expr::op("-", vec![var(end), var(from)]),
                    parallel: false,
                    body: vec![Stmt::Store {
                        buf: merged.buf,
                        index: Expr::add(var(k), var(u)),
                        value: load(order.buf, Expr::add(var(from), var(u))),
                    }],
                });
                pair.push(Stmt::Set {
                    var: k,
                    value: Expr::add(var(k), Expr::op("-", vec![var(end), var(from)])),
                });
            }
            let runs = Expr::op(
                "/",
                vec![
                    Expr::add(n.clone(), Expr::op("-", vec![two_w.clone(), Expr::Int(1)])),
                    two_w.clone(),
                ],
            );
            // The merged runs are the next pass's runs: the two buffers
            // exchanged, not copied.
            let pass = vec![
                Stmt::For {
                    index: run,
                    count: runs,
                    parallel: false,
                    body: pair,
                },
                Stmt::Swap {
                    a: order.buf,
                    b: merged.buf,
                },
                Stmt::Set {
                    var: width,
                    value: two_w.clone(),
                },
            ];
            Ok(pass)
        })();
        self.loop_depth -= 1;
        let pass = r?;
        body.push(Stmt::If {
            cond: lt(w.clone(), n.clone()),
            then: vec![Stmt::DoWhile {
                body: pass,
                cond: lt(w, n.clone()),
            }],
            otherwise: vec![],
        });
        if grade || by_value {
            return Ok(Val::Array(order));
        }
        let out = self.alloc("sorted", xs.elem, xs.dims.clone(), body);
        let g = self.fresh("g");
        self.loop_depth += 1;
        let mut gather = Vec::new();
        let item = cell_val(xs.cell(&[load(order.buf, var(g))]));
        let r = self.copy(item, &out.cell(&[var(g)]), &mut gather);
        self.loop_depth -= 1;
        r?;
        body.push(Stmt::For {
            index: g,
            count: n,
            parallel: self.loop_depth == 0,
            body: gather,
        });
        Ok(Val::Array(out))
    }
}

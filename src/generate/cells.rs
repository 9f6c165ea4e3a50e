//! The forms the interpreter's cell programs and masked loops run, for
//! [`Gen`]: folds, scans and reductions by a lambda (or a `def`) on small
//! cells (scalars, `[Float 2]`, `[Int 3]`, records of them) along one long
//! axis or lifted over a frame of cells — at most 256 of them, or more —;
//! `while` and `iterate` over a record state or a `[Int 2]` pair, each
//! cell looping until its own test fails, over frames on both sides of
//! 256 cells; `iscan` of pair cells projected or filtered (run lengths,
//! affine maps); and reductions along columns (of a `transpose2d`, of a
//! lambda of a column, `reduce` of rows by a lambda). Steps are written in
//! the forms a cell program compiles (scalar primitives, `if`, `select`,
//! `let`, `index`/`nth` by literal and computed indices, frame literals)
//! with now and then any expression, which makes it give up.

use super::{Dim, Elem, Gen, Ty, dims, elem_name, reducers};

impl Gen<'_> {
    /// An expression of type `ty` in one of the forms over cells, where
    /// one fits `ty` (else a lifted primitive).
    pub(super) fn cells(&mut self, ty: &Ty, d: usize) -> String {
        let rank = ty.shape.len();
        let mut forms: Vec<fn(&mut Self, &Ty, usize) -> String> = vec![
            Self::fold_cells,
            Self::fold_cells,
            Self::loop_cells,
            Self::loop_cells,
        ];
        if ty.elem != Elem::Bool {
            forms.push(Self::filtered_scan);
        }
        if rank > 0 {
            forms.extend([Self::scan_cells, Self::scan_cells, Self::column_reduce]
                as [fn(&mut Self, &Ty, usize) -> String; 3]);
        }
        let form = forms[self.c.below(forms.len())];
        // Often over one more frame axis of a few cells or about 256 (the
        // cell programs' limit), one of whose cells is kept.
        if d > 0 && self.c.coin() && ty.atoms() <= 16 {
            let f = Dim::lit(self.c.pick(&[2, 3, 7, 64, 255, 256, 257, 300]));
            let inner = form(self, &ty.items(f.clone()), d);
            return match self.c.below(3) {
                0 => format!("(head {inner})"),
                1 => format!("(last {inner})"),
                _ => {
                    let i = self.expr(&Ty::scalar(Elem::Int), 1);
                    format!("(nth {inner} (mod {i} {}))", f.konst)
                }
            };
        }
        form(self, ty, d)
    }

    /// A small cell type: a scalar, or two or three atoms, now and then
    /// a 2-by-2 matrix.
    fn small_cell(&mut self, e: Elem) -> Ty {
        match self.c.below(8) {
            0..=3 => Ty::scalar(e),
            4 | 5 => Ty::new(e, &[Dim::lit(2)]),
            6 => Ty::new(e, &[Dim::lit(3)]),
            _ => Ty::new(e, &[Dim::lit(2), Dim::lit(2)]),
        }
    }

    /// A small cell of any atom type.
    fn any_small_cell(&mut self) -> Ty {
        let e = self.elem();
        self.small_cell(e)
    }

    /// Where `ty` splits into a frame and a cell of at most 16 atoms: the
    /// frame's length, chosen among those that fit.
    fn split_cell(&mut self, ty: &Ty) -> usize {
        let rank = ty.shape.len();
        let least = (0..=rank)
            .find(|&k| ty.shape[k..].iter().map(|d| d.value).product::<usize>() <= 16)
            .unwrap_or(rank);
        least + self.c.below(rank - least + 1)
    }

    /// How many items each of `cells` cells has for a fold along them:
    /// at least `min`; few over a frame of many cells, now and then 300
    /// or an index variable along one axis.
    fn cell_items(&mut self, cells: usize, min: usize) -> Dim {
        if cells >= 2000 {
            return Dim::lit(min + self.c.below(3));
        }
        if cells >= 100 {
            return Dim::lit(min + self.c.pick(&[0, 1, 2, 3, 6, 8]));
        }
        if cells <= 1
            && self.c.below(4) == 0
            && let Some(d) = self.some_ivar(1)
            && d.value <= 20_000
        {
            return d.add(&Dim::lit(min));
        }
        let n = self.c.pick(&[0, 1, 2, 3, 4, 7, 8, 9, 16, 17, 33, 300]);
        if n == 300 && cells > 4 {
            return Dim::lit(min + 8);
        }
        Dim::lit(min + n)
    }

    /// An expression of `ty` in the forms a cell program compiles: scalar
    /// primitives, `if`, `select`, `let`, frame literals and reads of
    /// variables by literal and computed indices, now and then any
    /// expression.
    pub(super) fn step(&mut self, ty: &Ty, d: usize) -> String {
        if d == 0 || self.c.exhausted() {
            return self.leaf(ty);
        }
        let d1 = d - 1;
        match self.c.below(16) {
            0..=5 => self.prim_with(ty, |g, arg| g.step(arg, d1)),
            6 => {
                let c = self.step(&Ty::scalar(Elem::Bool), d1);
                let (a, b) = (self.step(ty, d1), self.step(ty, d1));
                format!("(if {c} {a} {b})")
            }
            7 => {
                let frame = self.prefix(&ty.shape);
                let c = self.step(&Ty::new(Elem::Bool, &frame), d1);
                let (a, b) = (self.step(ty, d1), self.step(ty, d1));
                format!("(select {c} {a} {b})")
            }
            8 if ty.shape.len() == 1 && ty.shape[0].is_static() && ty.shape[0].konst <= 4 => {
                let cell = Ty::scalar(ty.elem);
                let items: Vec<String> = (0..ty.shape[0].konst).map(|_| self.step(&cell, d1)).collect();
                if items.is_empty() {
                    format!("(array [0] {})", elem_name(ty.elem))
                } else {
                    format!("[{}]", items.join(" "))
                }
            }
            9 | 10 => self.read_item(ty, d1).unwrap_or_else(|| self.leaf(ty)),
            11 => {
                let v = self.fresh("v");
                let vt = self.any_small_cell();
                let value = self.step(&vt, d1);
                self.env.push((v.clone(), vt));
                let body = self.step(ty, d);
                self.env.pop();
                format!("(let ((val {v} {value})) {body})")
            }
            12 => self.expr(ty, d1.min(2)),
            _ => self.leaf(ty),
        }
    }

    /// An item of a variable in scope whose items are `ty`s, at a literal
    /// index (now and then out of range) or a computed one (`mod`, or
    /// `clip`, or as it is).
    fn read_item(&mut self, ty: &Ty, d: usize) -> Option<String> {
        let found: Vec<(String, Dim)> = self
            .env
            .iter()
            .filter_map(|(x, t)| {
                let (first, rest) = t.shape.split_first()?;
                (t.elem == ty.elem && rest == ty.shape.as_slice()).then(|| (x.clone(), first.clone()))
            })
            .collect();
        if found.is_empty() {
            return None;
        }
        let (x, m) = self.c.pick_ref(&found);
        let bound = if m.is_static() {
            m.konst.max(1).to_string()
        } else {
            format!("(max 1 (i-app reify-dim {}))", m.syntax())
        };
        let i = match self.c.below(8) {
            0 if m.is_static() => (m.konst.saturating_sub(1)).to_string(),
            1 if m.is_static() => m.konst.to_string(),
            2 => {
                let i = self.step(&Ty::scalar(Elem::Int), d.min(2));
                format!("(clip {i} 0 (- {bound} 1))")
            }
            3 => self.step(&Ty::scalar(Elem::Int), d.min(2)),
            _ => {
                let i = self.step(&Ty::scalar(Elem::Int), d.min(2));
                format!("(mod {i} {bound})")
            }
        };
        let f = if ty.shape.is_empty() && self.c.coin() {
            "index"
        } else {
            "nth"
        };
        Some(format!("({f} {x} {i})"))
    }

    /// A frame of `frame` around a body of its cells: the body itself
    /// (no frame), or a lambda of one cell (`x` of `cell`) applied to
    /// `arg`, or a `let` binding `x` to `arg` (no frame).
    fn over_frame(&mut self, frame: &[Dim], x: &str, cell: &Ty, arg: &str, body: &str) -> String {
        if frame.is_empty() {
            return format!("(let ((val {x} {arg})) {body})");
        }
        format!("((fn (({x} {})) {body}) {arg})", cell.syntax())
    }

    /// A record type of two fields, `a` of `t` and `b` of `u`.
    fn record_of(a: &str, t: &Ty, b: &str, u: &Ty) -> String {
        format!("{{({a} {}) ({b} {})}}", t.syntax(), u.syntax())
    }

    /// A record of two fields, `a` of `t` and `b` of `u`, from their
    /// values.
    fn build(a: &str, t: &Ty, va: &str, b: &str, u: &Ty, vb: &str) -> String {
        format!(
            "{{({a} [{}] {va}) ({b} [{}] {vb})}}",
            dims(&t.shape),
            dims(&u.shape)
        )
    }

    /// A step function of two parameters, written in place (it may read
    /// the variables in scope) or as a `def` (only its parameters):
    /// `ps` its parameters' names and types, the body of type `result`
    /// made by `body` with the parameters in scope (read as `reads`).
    /// `outside`, a variable the step reads where written in place.
    fn step_function(
        &mut self,
        ps: &[(String, String)],
        reads: &[(String, Ty)],
        outside: Option<&(String, Ty)>,
        result: &str,
        mut body: impl FnMut(&mut Self) -> String,
    ) -> String {
        let def = self.c.below(3) == 0;
        let outer = if def {
            std::mem::take(&mut self.env)
        } else {
            Vec::new()
        };
        let n = self.env.len();
        self.env.extend(reads.iter().cloned());
        if !def {
            self.env.extend(outside.cloned());
        }
        let text = body(self);
        self.env.truncate(n);
        let params: Vec<String> = ps.iter().map(|(x, t)| format!("({x} {t})")).collect();
        if def {
            self.env = outer;
            let f = self.fresh("f");
            self.defs.push(format!(
                "(def (fun ({f} {} : {result}) {text}))",
                params.join(" ")
            ));
            f
        } else {
            format!("(fn ({}) {text})", params.join(" "))
        }
    }

    /// A fold (or `fold-right`, `reduce`, `reduce/zero`) by a lambda on
    /// small cells, its state a cell of `ty` or a record of one and
    /// another cell, along one axis or lifted over `ty`'s frame (the row
    /// captured by the step now and then).
    fn fold_cells(&mut self, ty: &Ty, d: usize) -> String {
        let k = self.split_cell(ty);
        let frame = ty.shape[..k].to_vec();
        let acc = Ty::new(ty.elem, &ty.shape[k..]);
        let cells: usize = frame.iter().map(|d| d.value).product();
        let same = self.c.coin();
        let item = if same { acc.clone() } else { self.any_small_cell() };
        let kind = self.c.below(8);
        let reduce = same && kind >= 6;
        let record = !reduce && self.c.below(3) == 0;
        let zero = reduce && kind == 7;
        let n = self.cell_items(cells, usize::from(!zero));
        let row = item.items(n.clone());
        let mut xs_shape = frame.clone();
        xs_shape.extend(row.shape.iter().cloned());
        let xs = self.expr(&Ty::new(item.elem, &xs_shape), d);
        let r = self.fresh("r");
        let captured = (r.clone(), row.clone());
        let (s, x) = (self.fresh("s"), self.fresh("x"));
        let body = if reduce {
            let (a, b) = (self.fresh("a"), self.fresh("b"));
            let t = acc.syntax();
            let reads = [(a.clone(), acc.clone()), (b.clone(), acc.clone())];
            let op = if acc.shape.is_empty() && self.c.below(4) == 0 {
                self.c.pick(reducers(acc.elem)).to_string()
            } else {
                self.step_function(
                    &[(a, t.clone()), (b, t.clone())],
                    &reads,
                    Some(&captured),
                    &t,
                    |g| g.step(&acc, d.clamp(2, 3)),
                )
            };
            if zero {
                self.env.push(captured.clone());
                let z = self.step(&acc, d.min(2));
                self.env.pop();
                format!("(reduce/zero {op} {z} {r})")
            } else {
                format!("(reduce {op} {r})")
            }
        } else if record {
            let other = self.any_small_cell();
            let (fa, fb) = (self.fresh("a"), self.fresh("b"));
            let state = Self::record_of(&fa, &acc, &fb, &other);
            let reads = [
                (format!("(field {s} {fa})"), acc.clone()),
                (format!("(field {s} {fb})"), other.clone()),
                (x.clone(), item.clone()),
            ];
            let keep = self.c.below(3) == 0;
            let step = self.step_function(
                &[(s.clone(), state.clone()), (x.clone(), item.syntax())],
                &reads,
                Some(&captured),
                &state,
                |g| {
                    let va = g.step(&acc, d.clamp(2, 3));
                    let vb = if keep {
                        format!("(field {s} {fb})")
                    } else {
                        g.step(&other, d.clamp(2, 3))
                    };
                    let built = Self::build(&fa, &acc, &va, &fb, &other, &vb);
                    if g.c.below(3) == 0 {
                        // Keep the state as it is where a test fails.
                        let c = g.step(&Ty::scalar(Elem::Bool), d.min(2));
                        format!("(if {c} {built} {s})")
                    } else {
                        built
                    }
                },
            );
            self.env.push(captured.clone());
            let za = self.step(&acc, d.min(2));
            let zb = self.step(&other, d.min(2));
            self.env.pop();
            let start = Self::build(&fa, &acc, &za, &fb, &other, &zb);
            format!("(field (fold {step} {start} {r}) {fa})")
        } else {
            let right = kind == 5;
            let (t, u) = (acc.syntax(), item.syntax());
            let reads = [(s.clone(), acc.clone()), (x.clone(), item.clone())];
            let ps = if right {
                [(x.clone(), u), (s.clone(), t.clone())]
            } else {
                [(s.clone(), t.clone()), (x.clone(), u)]
            };
            let step = self.step_function(&ps, &reads, Some(&captured), &t, |g| g.step(&acc, d.clamp(2, 3)));
            self.env.push(captured.clone());
            let z = if self.c.below(4) == 0 && same && n.konst >= 1 {
                format!("(head {r})")
            } else {
                self.step(&acc, d.min(2))
            };
            self.env.pop();
            let f = if right { "fold-right" } else { "fold" };
            format!("({f} {step} {z} {r})")
        };
        self.over_frame(&frame, &r, &row, &xs, &body)
    }

    /// `while` or `iterate` over a frame of small states, each cell
    /// looping until its own test fails: a record of a cell of `ty` and a
    /// count (the count bounds the steps), or a pair `[x count]`, or a
    /// record through `iterate` a computed number of times per cell.
    fn loop_cells(&mut self, ty: &Ty, d: usize) -> String {
        let k = self.split_cell(ty);
        let frame = ty.shape[..k].to_vec();
        let cell = Ty::new(ty.elem, &ty.shape[k..]);
        let xs = self.expr(ty, d);
        let x = self.fresh("x");
        let bound = self.c.pick(&[0, 1, 2, 3, 5, 9]);
        let form = self.c.below(4);
        if form == 0 && cell.shape.is_empty() && ty.elem != Elem::Bool {
            // A pair [value count] (of the value's atom type).
            let e = ty.elem;
            let t = elem_name(e);
            let (s, p) = (self.fresh("s"), self.fresh("p"));
            let pair = format!("[{t} 2]");
            let (lt, plus, one, zero) = match e {
                Elem::Int => ("<", "+", "1", "0"),
                _ => ("f.<", "f.+", "1.0", "0.0"),
            };
            let number = |n: usize| {
                if e == Elem::Int {
                    n.to_string()
                } else {
                    format!("{n}.0")
                }
            };
            let (b, b2) = (number(bound), number(bound + 2));
            let value = (format!("(index {s} 0)"), cell.clone());
            let count = (format!("(index {s} 1)"), Ty::scalar(e));
            let join = self.c.pick(&["and", "or"]);
            let going = self.step_function(
                &[(s.clone(), pair.clone())],
                &[value.clone(), count.clone()],
                None,
                "Bool",
                |g| {
                    let test = g.step(&Ty::scalar(Elem::Bool), d.clamp(2, 3));
                    if join == "and" {
                        format!("(and ({lt} (index {s} 1) {b}) {test})")
                    } else {
                        // (Still bounded: the test only while the count is
                        // small.)
                        format!("(and ({lt} (index {s} 1) {b2}) (or ({lt} (index {s} 1) {one}) {test}))")
                    }
                },
            );
            let step = self.step_function(&[(s.clone(), pair.clone())], &[value, count], None, &pair, |g| {
                let v = g.step(&cell, d.clamp(2, 3));
                format!("[{v} ({plus} (index {s} 1) {one})]")
            });
            let start = format!("((fn (({x} {t})) [{x} {zero}]) {xs})");
            return format!("((fn (({p} {pair})) (index {p} 0)) (while {going} {step} {start}))");
        }
        // A record of the cell and a count.
        let (s, fa, fi) = (self.fresh("s"), self.fresh("a"), self.fresh("i"));
        let int = Ty::scalar(Elem::Int);
        let state = Self::record_of(&fa, &cell, &fi, &int);
        let read_a = (format!("(field {s} {fa})"), cell.clone());
        let read_i = (format!("(field {s} {fi})"), int.clone());
        let step = self.step_function(
            &[(s.clone(), state.clone())],
            &[read_a.clone(), read_i.clone()],
            None,
            &state,
            |g| {
                let va = g.step(&cell, d.clamp(2, 3));
                Self::build(&fa, &cell, &va, &fi, &int, &format!("(+ (field {s} {fi}) 1)"))
            },
        );
        let made = Self::build(&fa, &cell, &x, &fi, &int, "0");
        let start = self.over_frame(&frame, &x, &cell, &xs, &made);
        let looped = if form == 1 {
            // iterate: a count, or counts over the frame
            let n = if frame.is_empty() || self.c.coin() {
                self.c.below(5).to_string()
            } else {
                let f = self.prefix(&frame);
                let counts = self.expr(&Ty::new(Elem::Int, &f), d.min(2));
                format!("(mod {counts} 5)")
            };
            format!("(iterate {n} {step} {start})")
        } else {
            let join = self.c.pick(&["and", "or"]);
            let going = self.step_function(
                &[(s.clone(), state.clone())],
                &[read_a, read_i],
                None,
                "Bool",
                |g| {
                    let test = g.step(&Ty::scalar(Elem::Bool), d.clamp(2, 3));
                    if join == "and" {
                        format!("(and (< (field {s} {fi}) {bound}) {test})")
                    } else {
                        format!(
                            "(and (< (field {s} {fi}) {}) (or (< (field {s} {fi}) 1) {test}))",
                            bound + 2
                        )
                    }
                },
            );
            format!("(while {going} {step} {start})")
        };
        format!("(field {looped} {fa})")
    }

    /// `iscan` or `scan` by a lambda on small cells along an axis of
    /// `ty` (lifted over the axes before it), or of pairs projected to
    /// one of their atoms.
    fn scan_cells(&mut self, ty: &Ty, d: usize) -> String {
        let rank = ty.shape.len();
        // the scanned axis: one whose cells are small
        let k = self.split_cell(&Ty::new(ty.elem, &ty.shape[1..])).min(rank - 1);
        let frame = ty.shape[..k].to_vec();
        let m = ty.shape[k].clone();
        let cell = Ty::new(ty.elem, &ty.shape[k + 1..]);
        let pairs = cell.shape.is_empty() && ty.elem != Elem::Bool && self.c.coin();
        let scanned = if pairs {
            Ty::new(ty.elem, &[Dim::lit(2)])
        } else {
            cell.clone()
        };
        let exclusive = m.konst >= 1 && self.c.below(3) == 0;
        let n = if exclusive { m.less(1) } else { m.clone() };
        let row = scanned.items(n.clone());
        let r = self.fresh("r");
        let mut xs_shape = frame.clone();
        xs_shape.push(n.clone());
        let xs = if pairs {
            // pairs made from a row of scalars: [x 1], [x c] …
            let mut scalars = frame.clone();
            scalars.push(n.clone());
            let v = self.expr(&Ty::new(ty.elem, &scalars), d);
            let y = self.fresh("y");
            let other = self.step(&Ty::scalar(ty.elem), 1);
            let t = elem_name(ty.elem);
            if self.c.coin() {
                format!("((fn (({y} {t})) [{y} {other}]) {v})")
            } else {
                format!("((fn (({y} {t})) [{other} {y}]) {v})")
            }
        } else {
            xs_shape.extend(cell.shape.iter().cloned());
            self.expr(&Ty::new(ty.elem, &xs_shape), d)
        };
        let (a, b) = (self.fresh("a"), self.fresh("b"));
        let t = scanned.syntax();
        let captured = (r.clone(), row.clone());
        let op = if !pairs && cell.shape.is_empty() && self.c.below(4) == 0 {
            self.c.pick(reducers(cell.elem)).to_string()
        } else {
            let reads = [(a.clone(), scanned.clone()), (b.clone(), scanned.clone())];
            self.step_function(&[(a.clone(), t.clone()), (b.clone(), t.clone())], &reads, Some(&captured), &t, |g| {
                if pairs && g.c.coin() {
                    // a restart where the right operand says so (run
                    // lengths), else the pairs combined
                    let e = ty.elem;
                    let (eq, plus, one) = match e {
                        Elem::Int => ("==", "+", "1"),
                        _ => ("f.==", "f.+", "1.0"),
                    };
                    format!("(if ({eq} (index {b} 0) {one}) {b} [(index {a} 0) ({plus} (index {a} 1) (index {b} 1))])")
                } else {
                    g.step(&scanned, d.clamp(2, 3))
                }
            })
        };
        let body = if exclusive {
            self.env.push(captured.clone());
            let z = self.step(&scanned, d.min(2));
            self.env.pop();
            format!("(scan {op} {z} {r})")
        } else {
            format!("(iscan {op} {r})")
        };
        let body = if pairs {
            let p = self.fresh("p");
            let j = self.c.below(2);
            format!("((fn (({p} {t})) (index {p} {j})) {body})")
        } else {
            body
        };
        self.over_frame(&frame, &r, &row, &xs, &body)
    }

    /// The items an `iscan` of pairs keeps by a mask (`filter`), unboxed
    /// and used: one atom of each pair summed, or any expression of `ty`
    /// reading them.
    fn filtered_scan(&mut self, ty: &Ty, d: usize) -> String {
        let e = ty.elem;
        let t = elem_name(e);
        let n = self.cell_items(1, 0);
        let mask = self.expr(&Ty::new(Elem::Bool, std::slice::from_ref(&n)), d);
        let pair = Ty::new(e, &[Dim::lit(2)]);
        let v = self.expr(&Ty::new(e, std::slice::from_ref(&n)), d);
        let y = self.fresh("y");
        let other = self.step(&Ty::scalar(e), 1);
        let pairs = format!("((fn (({y} {t})) [{y} {other}]) {v})");
        let (a, b) = (self.fresh("a"), self.fresh("b"));
        let (eq, plus, one) = match e {
            Elem::Int => ("==", "+", "1"),
            _ => ("f.==", "f.+", "1.0"),
        };
        let op = if self.c.coin() {
            format!(
                "(fn (({a} [{t} 2]) ({b} [{t} 2])) (if ({eq} (index {b} 0) {one}) {b} [(index {a} 0) ({plus} (index {a} 1) (index {b} 1))]))"
            )
        } else {
            let reads = [(a.clone(), pair.clone()), (b.clone(), pair.clone())];
            let pt = pair.syntax();
            self.step_function(
                &[(a.clone(), pt.clone()), (b.clone(), pt.clone())],
                &reads,
                None,
                &pt,
                |g| g.step(&pair, d.clamp(2, 3)),
            )
        };
        let (k, kept) = (self.fresh("$k"), self.fresh("v"));
        let boxed = format!("(filter {mask} (iscan {op} {pairs}))");
        let body = if ty.shape.is_empty() && self.c.coin() {
            let p = self.fresh("p");
            let sum = if e == Elem::Int { "sum" } else { "f.sum" };
            let j = self.c.below(2);
            format!("({sum} ((fn (({p} [{t} 2])) (index {p} {j})) {kept}))")
        } else {
            self.ivars.push((k.clone(), n.value / 2));
            self.env.push((
                kept.clone(),
                Ty::new(e, &[Dim::var(&k, n.value / 2), Dim::lit(2)]),
            ));
            let body = self.expr(ty, d);
            self.env.pop();
            self.ivars.pop();
            body
        };
        format!("(unbox ({k} {kept} {boxed}) {body})")
    }

    /// Reductions along columns: of a matrix's rows by a lambda (or a
    /// primitive), of each column of a `transpose2d` by a lambda of one
    /// column (`f.sum`, `reduce`, a sum of a choice, a fold), lifted over
    /// `ty`'s frame; `ty`'s last axis is the number of columns.
    fn column_reduce(&mut self, ty: &Ty, d: usize) -> String {
        let rank = ty.shape.len();
        let e = ty.elem;
        let t = elem_name(e);
        let cols = ty.shape[rank - 1].clone();
        let frame = ty.shape[..rank - 1].to_vec();
        let cells: usize = frame.iter().map(|d| d.value).product::<usize>() * cols.value.max(1);
        let rows = self.cell_items(cells, 1);
        let mut m_shape = frame.clone();
        m_shape.extend([rows.clone(), cols.clone()]);
        let m = self.expr(&Ty::new(e, &m_shape), d);
        let row_ty = Ty::new(e, std::slice::from_ref(&cols));
        let col_ty = Ty::new(e, std::slice::from_ref(&rows));
        let r = self.fresh("r");
        let (a, b) = (self.fresh("a"), self.fresh("b"));
        let body = if self.c.below(3) == 0 {
            // rows reduced by a lambda of two rows (or a primitive)
            let op = if self.c.coin() {
                self.c.pick(reducers(e)).to_string()
            } else {
                let rt = row_ty.syntax();
                let reads = [(a.clone(), row_ty.clone()), (b.clone(), row_ty.clone())];
                self.step_function(
                    &[(a.clone(), rt.clone()), (b.clone(), rt.clone())],
                    &reads,
                    None,
                    &rt,
                    |g| g.step(&row_ty, d.clamp(2, 3)),
                )
            };
            format!("(reduce {op} {r})")
        } else {
            let c = self.fresh("c");
            let scalar = Ty::scalar(e);
            let reduced = match (e, self.c.below(5)) {
                (Elem::Float, 0) => format!("(f.sum {c})"),
                (Elem::Int, 0) => format!("(sum {c})"),
                (Elem::Bool, 0) => format!("(any {c})"),
                (Elem::Float, 1) => {
                    let z = self.step(&scalar, 1);
                    format!("(f.sum (select (f.> {c} {z}) {c} 0.0))")
                }
                (Elem::Int, 1) => {
                    let z = self.step(&scalar, 1);
                    format!("(sum (select (> {c} {z}) {c} 0))")
                }
                (_, 2) => {
                    let op = self.c.pick(reducers(e));
                    format!("(reduce {op} {c})")
                }
                _ => {
                    let reads = [(a.clone(), scalar.clone()), (b.clone(), scalar.clone())];
                    let op = self.step_function(
                        &[(a.clone(), t.into()), (b.clone(), t.into())],
                        &reads,
                        None,
                        t,
                        |g| g.step(&scalar, d.clamp(2, 3)),
                    );
                    format!("(reduce {op} {c})")
                }
            };
            format!("((fn (({c} {})) {reduced}) (transpose2d {r}))", col_ty.syntax())
        };
        let matrix = Ty::new(e, &[rows, cols]);
        self.over_frame(&frame, &r, &matrix, &m, &body)
    }
}

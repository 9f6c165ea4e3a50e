//! The forms users write over rows, for [`Gen`]: the shapes of the
//! interpreter's batched fast paths and the compiler's fused ones, in
//! their neighbours' variants. The index of the best item of each row
//! (a fold keeping a best index, or a record of it and its value; the
//! least index where the row equals its maximum; the first of a grade),
//! `sort-by` and `grade-by` by primitives and lambdas (keys, non-strict
//! and non-orders, a captured scalar, the row read by index: an argsort),
//! top-k (`take` of a sort), gathers by `index2d` and chains of
//! `nth`/`index` in lifted lambdas (through `transpose2d`, by `outer`),
//! reductions of `windows`, matrix-vector products written four ways,
//! `while` over a record state and `scatter` of computed (repeated,
//! out-of-range) indices. Sizes are small, now and then empty or 300.

use super::{Dim, Elem, Gen, Ty, dims, elem_name};

/// The comparisons of two atoms: strict orders, non-strict ones (`<=`),
/// and what is no order at all (`==`, `!=`).
fn comparisons(e: Elem) -> &'static [&'static str] {
    match e {
        Elem::Int => &["<", ">", "<", ">", "<=", ">=", "==", "!="],
        Elem::Float => &["f.<", "f.>", "f.<", "f.>", "f.<=", "f.>=", "f.==", "f.!="],
        Elem::Bool => &["bool.!=", "bool.=="],
    }
}

/// A key of an atom `x` of type `e` that two atoms are compared by.
fn keys(e: Elem) -> &'static [&'static str] {
    match e {
        Elem::Int => &["%x", "(abs %x)", "(mod %x 3)", "(neg %x)", "(bit-and %x 1)"],
        Elem::Float => &["%x", "(f.abs %x)", "(f.neg %x)", "(f.floor %x)", "(f.* %x %x)"],
        Elem::Bool => &["(bool->i %x)", "(bool->i (not %x))"],
    }
}

impl Gen<'_> {
    /// An expression of type `ty` in one of the forms over rows, where one
    /// fits `ty` (else a lifted primitive).
    pub(super) fn rows(&mut self, ty: &Ty, d: usize) -> String {
        let rank = ty.shape.len();
        let e = ty.elem;
        let numeric = e != Elem::Bool;
        let mut forms: Vec<fn(&mut Self, &Ty, usize) -> String> = vec![Self::gather2d, Self::record_while];
        if e == Elem::Int {
            forms.extend([Self::best_index, Self::best_index] as [fn(&mut Self, &Ty, usize) -> String; 2]);
        }
        if rank > 0 {
            forms.extend(
                [Self::sort_by_lambda, Self::sort_by_lambda, Self::scatter_computed]
                    as [fn(&mut Self, &Ty, usize) -> String; 3],
            );
        }
        if rank > 0 && e == Elem::Int {
            forms.push(Self::grade_of_rows);
        }
        if rank > 0 && numeric {
            forms.extend([Self::top_k, Self::matvec, Self::transposed_rows]
                as [fn(&mut Self, &Ty, usize) -> String; 3]);
            // (`$k + 1` windows of `$w + $k` items: at least one.)
            if ty.shape[rank - 1].konst >= 1 {
                forms.push(Self::of_windows);
            }
        }
        let form = forms[self.c.below(forms.len())];
        form(self, ty, d)
    }

    /// A length of rows of `e`s: small, now and then 300 or an index
    /// variable in scope, or about a multiple of a vector's lanes (8 and
    /// 16: the remainders of vectorised passes), at least `min`.
    fn row_length(&mut self, e: Elem, min: usize) -> Dim {
        if self.c.below(4) == 0 {
            return Dim::lit(self.c.pick(&[7, 8, 9, 15, 16, 17, 31, 32, 33]));
        }
        self.length(&Ty::scalar(e), min)
    }

    /// A function of rows of `n` items, applied to `args`: a lambda (its
    /// types read `n`), or a `def` generic in the rows' length (`$m`,
    /// not declared: generalised), its result declared. In `params`,
    /// `result` and `body`, `%n` stands for the length.
    fn row_function(
        &mut self,
        n: &Dim,
        params: &[(String, String)],
        result: &str,
        body: &str,
        args: &[String],
    ) -> String {
        let def = self.c.coin();
        let len = if def { self.fresh("$m") } else { n.syntax() };
        let fill = |s: &str| s.replace("%n", &len);
        let ps: Vec<String> = params.iter().map(|(x, t)| format!("({x} {})", fill(t))).collect();
        if def {
            let f = self.fresh("f");
            self.defs.push(format!(
                "(def (fun ({f} {} : {}) {}))",
                ps.join(" "),
                fill(result),
                fill(body)
            ));
            format!("({f} {})", args.join(" "))
        } else {
            format!("((fn ({}) {}) {})", ps.join(" "), fill(body), args.join(" "))
        }
    }

    /// A less-than on atoms of `e`: a primitive, or a lambda comparing
    /// keys (now and then of their distance to a captured scalar, or
    /// constant: no order at all).
    fn atom_less(&mut self, e: Elem, d: usize) -> String {
        let cmp = self.c.pick(comparisons(e));
        let (a, b) = (self.fresh("a"), self.fresh("b"));
        let t = elem_name(e);
        match self.c.below(6) {
            0 | 1 => cmp.to_string(),
            2 if e == Elem::Float => {
                let c = self.expr(&Ty::scalar(e), d.min(1));
                format!("(fn (({a} {t}) ({b} {t})) ({cmp} (f.abs (f.- {a} {c})) (f.abs (f.- {b} {c}))))")
            }
            3 => {
                let k = self.c.pick(&["#t", "#f"]);
                format!("(fn (({a} {t}) ({b} {t})) {k})")
            }
            _ => {
                let key = self.c.pick(keys(e));
                let cmp = self
                    .c
                    .pick(comparisons(if e == Elem::Bool { Elem::Int } else { e }));
                format!(
                    "(fn (({a} {t}) ({b} {t})) ({cmp} {} {}))",
                    key.replace("%x", &a),
                    key.replace("%x", &b)
                )
            }
        }
    }

    /// A scalar key of a cell `x` of type `cell` (not a scalar): the sum
    /// of its atoms (Bools counted), an Int or a Float.
    fn cell_key(x: &str, cell: &Ty) -> (String, Elem) {
        match cell.elem {
            Elem::Bool => (format!("(sum (bool->i {x}))"), Elem::Int),
            Elem::Int => (format!("(sum {x})"), Elem::Int),
            Elem::Float => (format!("(f.sum {x})"), Elem::Float),
        }
    }

    /// `sort-by` lifted over a frame, by a less-than on atoms or on item
    /// cells (by a key of each); or each row put in order through its
    /// grade (`nth` of `grade-by` of its item numbers, a less-than that
    /// reads the row: an argsort).
    fn sort_by_lambda(&mut self, ty: &Ty, d: usize) -> String {
        let rank = ty.shape.len();
        let e = ty.elem;
        if self.c.below(3) == 0 {
            let n = ty.shape[rank - 1].clone();
            let row = self.row_less(e, d);
            let xs = self.expr(ty, d);
            let gather = self.c.pick(&["nth", "index"]);
            let (r, t) = (self.fresh("r"), elem_name(e));
            let body = format!("({gather} {r} (grade-by {row} (i-app iota/static [%n])))",);
            return self.row_function(
                &n,
                &[(r.clone(), format!("[{t} %n]"))],
                &format!("[{t} %n]"),
                &body.replace("%r", &r),
                &[xs],
            );
        }
        // The sorted axis: `k`; its items' cells the rest.
        let k = self.c.below(rank);
        let cell = Ty::new(e, &ty.shape[k + 1..]);
        let less = if cell.shape.is_empty() {
            self.atom_less(e, d)
        } else {
            let (a, b) = (self.fresh("a"), self.fresh("b"));
            let (ka, ke) = Self::cell_key(&a, &cell);
            let (kb, _) = Self::cell_key(&b, &cell);
            let cmp = self.c.pick(comparisons(ke));
            let t = cell.syntax();
            format!("(fn (({a} {t}) ({b} {t})) ({cmp} {ka} {kb}))")
        };
        let xs = self.expr(ty, d);
        format!("(sort-by {less} {xs})")
    }

    /// A less-than on item numbers of a row `%r` of `e`s: their items'
    /// keys compared.
    fn row_less(&mut self, e: Elem, _d: usize) -> String {
        let (a, b) = (self.fresh("a"), self.fresh("b"));
        let key = self.c.pick(keys(e));
        let cmp = self
            .c
            .pick(comparisons(if e == Elem::Bool { Elem::Int } else { e }));
        format!(
            "(fn (({a} Int) ({b} Int)) ({cmp} {} {}))",
            key.replace("%x", &format!("(index %r {a})")),
            key.replace("%x", &format!("(index %r {b})"))
        )
    }

    /// Each row's grade: `grade-by` of the rows (lifted), or of the item
    /// numbers by a less-than reading the row.
    fn grade_of_rows(&mut self, ty: &Ty, d: usize) -> String {
        let el = self.elem();
        let rank = ty.shape.len();
        let n = ty.shape[rank - 1].clone();
        let xs = self.expr(&Ty::new(el, &ty.shape), d);
        if self.c.coin() {
            let less = self.atom_less(el, d);
            return format!("(grade-by {less} {xs})");
        }
        let r = self.fresh("r");
        let less = self.row_less(el, d).replace("%r", &r);
        self.row_function(
            &n,
            &[(r, format!("[{} %n]", elem_name(el)))],
            "[Int %n]",
            &format!("(grade-by {less} (i-app iota/static [%n]))"),
            &[xs],
        )
    }

    /// The index of the best item of each row (a frame of them: `ty`): a
    /// fold over the indices keeping the best (or a record of it and its
    /// value), the least index where the row equals its greatest, or the
    /// first of its grade.
    fn best_index(&mut self, ty: &Ty, d: usize) -> String {
        let el = self.c.pick(&[Elem::Float, Elem::Float, Elem::Int]);
        let t = elem_name(el);
        let form = self.c.below(4);
        // (A reduction or a fold of no items is a type error when the
        // length is a number.)
        let n = self.row_length(el, 1);
        let mut shape = ty.shape.clone();
        shape.push(n.clone());
        let xs = self.expr(&Ty::new(el, &shape), d);
        let cmp = self.c.pick(comparisons(el));
        let (r, b, j) = (self.fresh("r"), self.fresh("b"), self.fresh("j"));
        let iota = "(i-app iota/static [%n])";
        let body = match form {
            0 => {
                let choose = if self.c.coin() {
                    format!("(select ({cmp} (index {r} {j}) (index {r} {b})) {j} {b})")
                } else {
                    format!("(if ({cmp} (index {r} {j}) (index {r} {b})) {j} {b})")
                };
                if self.c.coin() {
                    format!("(fold (fn (({b} Int) ({j} Int)) {choose}) 0 {iota})")
                } else {
                    format!("(fold-right (fn (({j} Int) ({b} Int)) {choose}) 0 {iota})")
                }
            }
            1 => {
                let (eq, best) = match el {
                    Elem::Float => ("f.==", self.c.pick(&["f.max", "f.min"])),
                    _ => ("==", self.c.pick(&["max", "min"])),
                };
                let least = self.c.pick(&["min", "max"]);
                format!("(reduce {least} (select ({eq} {r} (reduce {best} {r})) {iota} (length {r})))")
            }
            2 => {
                let (s, bi, bv) = (self.fresh("s"), self.fresh("bi"), self.fresh("bv"));
                let state = format!("{{({bi} Int) ({bv} {t})}}");
                let keep = format!("{{({bi} [] {j}) ({bv} [] (index {r} {j}))}}");
                let start = format!("{{({bi} [] 0) ({bv} [] (index {r} 0))}}");
                format!(
                    "(field (fold (fn (({s} {state}) ({j} Int)) (if ({cmp} (index {r} {j}) (field {s} {bv})) {keep} {s})) {start} {iota}) {bi})"
                )
            }
            _ => {
                let less = self.row_less(el, d).replace("%r", &r);
                format!("(index (grade-by {less} {iota}) 0)")
            }
        };
        self.row_function(&n, &[(r, format!("[{t} %n]"))], "Int", &body, &[xs])
    }

    /// The greatest (or least) `k` items of each row, `k` the last axis of
    /// `ty`: `take`/`take-right` of a sort (by a primitive or `sort-by`),
    /// or the row gathered at the first `k` of its grade.
    fn top_k(&mut self, ty: &Ty, d: usize) -> String {
        let rank = ty.shape.len();
        let e = ty.elem;
        let k = ty.shape[rank - 1].clone();
        let n = k.add(&Dim::lit(self.c.below(4)));
        let mut shape = ty.shape.clone();
        shape[rank - 1] = n.clone();
        let xs = self.expr(&Ty::new(e, &shape), d);
        let take = format!("(i-app {} {})", self.c.pick(&["take", "take-right"]), k.syntax());
        let (sort, grade) = if e == Elem::Int {
            ("sort", "grade")
        } else {
            ("f.sort", "f.grade")
        };
        // (`take` is not lifted: of a frame of rows, in a function of one.)
        match self.c.below(4) {
            0 if rank == 1 => format!("({take} ({sort} {xs}))"),
            1 if rank == 1 => {
                let less = self.atom_less(e, d);
                format!("({take} (sort-by {less} {xs}))")
            }
            _ => {
                let r = self.fresh("r");
                let t = elem_name(e);
                let body = if self.c.coin() {
                    format!("(index {r} ({take} ({grade} {r})))")
                } else {
                    let less = self.atom_less(e, d);
                    format!("({take} (sort-by {less} {r}))")
                };
                format!("((fn (({r} [{t} {}])) {body}) {xs})", n.syntax())
            }
        }
    }

    /// A bound for indices into `m` items: `m`, one more (now and then
    /// out of range), or at least 1 (`mod` by it).
    fn bound(&mut self, m: &Dim) -> String {
        let extra = usize::from(self.c.below(8) == 0);
        if m.is_static() {
            (m.konst + extra).max(1).to_string()
        } else {
            format!("(max 1 (+ {extra} (i-app reify-dim {})))", m.syntax())
        }
    }

    /// Scalars gathered from a matrix (or its transpose) at computed
    /// indices, in a lambda lifted over frames of them (or `outer` of
    /// two vectors of them): by `index2d`, or a chain of `nth` and
    /// `index`.
    fn gather2d(&mut self, ty: &Ty, d: usize) -> String {
        let e = ty.elem;
        let (a, b) = (1 + self.c.below(4), self.c.below(5));
        let (a, b) = (Dim::lit(a), Dim::lit(if b == 0 { 1 } else { b }));
        let m = if self.c.coin() {
            let mt = self.expr(&Ty::new(e, &[b.clone(), a.clone()]), d);
            format!("(transpose2d {mt})")
        } else {
            self.expr(&Ty::new(e, &[a.clone(), b.clone()]), d)
        };
        let (ba, bb) = (self.bound(&a), self.bound(&b));
        let (i, j) = (self.fresh("i"), self.fresh("j"));
        let (mi, mj) = if self.c.below(12) == 0 {
            (i.clone(), j.clone())
        } else {
            (format!("(mod {i} {ba})"), format!("(mod {j} {bb})"))
        };
        let (mat, bind) = if self.c.coin() {
            let v = self.fresh("m");
            (v.clone(), Some((v, m)))
        } else {
            (m, None)
        };
        let read = if self.c.coin() {
            format!("(index2d {mat} [{mi} {mj}])")
        } else {
            format!("(index (nth {mat} {mi}) {mj})")
        };
        let f = format!("(fn (({i} Int) ({j} Int)) {read})");
        let applied = if ty.shape.len() == 2 && self.c.coin() {
            let is = self.expr(&Ty::new(Elem::Int, &ty.shape[..1]), d);
            let js = self.expr(&Ty::new(Elem::Int, &ty.shape[1..]), d);
            format!("(outer {f} {is} {js})")
        } else {
            let is = self.expr(&Ty::new(Elem::Int, &ty.shape), d);
            let frame = self.prefix(&ty.shape);
            let js = self.expr(&Ty::new(Elem::Int, &frame), d);
            if self.c.coin() {
                format!("({f} {is} {js})")
            } else {
                format!("({f} {js} {is})")
            }
        };
        match bind {
            Some((v, m)) => format!("(let ((val {v} {m})) {applied})"),
            None => applied,
        }
    }

    /// Rows of a transposed matrix gathered at computed indices (the
    /// cell written out: `nth` would pair an index with an item), lifted
    /// over their frame; `ty`'s last axis is the matrix's first.
    fn transposed_rows(&mut self, ty: &Ty, d: usize) -> String {
        let rank = ty.shape.len();
        let e = ty.elem;
        let a = ty.shape[rank - 1].clone();
        let b = self.row_length(e, 1);
        let mt = self.expr(&Ty::new(e, &[a.clone(), b.clone()]), d);
        let idx = self.expr(&Ty::new(Elem::Int, &ty.shape[..rank - 1]), d);
        let bb = self.bound(&b);
        format!(
            "(@nth _ (_ [{}]) (transpose2d {mt}) (mod {idx} {bb}))",
            a.syntax()
        )
    }

    /// A reduction of each window of each row: `f.mean`, a lambda of one
    /// window (its `f.sum`, `sum`, a `dot` with a kernel), `mean` of Ints; `ty`'s last axis is the
    /// number of windows (at least 1).
    fn of_windows(&mut self, ty: &Ty, d: usize) -> String {
        let rank = ty.shape.len();
        let e = ty.elem;
        let m = ty.shape[rank - 1].clone();
        let w = self.c.below(5);
        let len = m.add(&Dim::lit(w)).less(1);
        let from = if e == Elem::Float && self.c.below(4) == 0 {
            Elem::Int
        } else {
            e
        };
        let mut shape = ty.shape.clone();
        shape[rank - 1] = len.clone();
        let xs = self.expr(&Ty::new(from, &shape), d);
        let (row, win) = (self.fresh("row"), self.fresh("w"));
        let windows = format!("((i-app windows {w}) {row})");
        let reduced = match (e, from) {
            (Elem::Float, Elem::Int) => format!("(mean {windows})"),
            (Elem::Float, _) => match self.c.below(4) {
                0 | 1 => format!("(f.mean {windows})"),
                2 => format!("((fn (({win} [Float {w}])) (f./ (f.sum {win}) (i->f {w}))) {windows})"),
                _ => {
                    let kernel = self.expr(&Ty::new(Elem::Float, &[Dim::lit(w)]), d.min(1));
                    format!("((fn (({win} [Float {w}])) (f.dot {win} {kernel})) {windows})")
                }
            },
            _ => match self.c.below(3) {
                0 => format!("((fn (({win} [Int {w}])) (sum {win})) {windows})"),
                1 => format!("((fn (({win} [Int {w}])) (reduce/zero + 0 {win})) {windows})"),
                _ => format!("(dot {windows} {windows})"),
            },
        };
        if rank == 1 && self.c.coin() {
            return format!("(let ((val {row} {xs})) {reduced})");
        }
        format!(
            "((fn (({row} [{} {}])) {reduced}) {xs})",
            elem_name(from),
            len.syntax()
        )
    }

    /// A matrix times a vector (each of a frame of them): `dot`, a lambda
    /// of one row (the vector a second parameter, or captured), the
    /// columns scaled and added, or the transposed matrix's columns.
    fn matvec(&mut self, ty: &Ty, d: usize) -> String {
        let rank = ty.shape.len();
        let e = ty.elem;
        let t = elem_name(e);
        let frame = ty.shape[..rank - 1].to_vec();
        let m = ty.shape[rank - 1].clone();
        let k = self.row_length(e, 1);
        let (dot, times, sum, add) = if e == Elem::Int {
            ("dot", "*", "sum", "+")
        } else {
            ("f.dot", "f.*", "f.sum", "f.+")
        };
        let mut mshape = frame.clone();
        mshape.extend([m.clone(), k.clone()]);
        let mat = self.expr(&Ty::new(e, &mshape), d);
        let mut vshape = self.prefix(&frame);
        vshape.push(k.clone());
        let ks = k.syntax();
        match self.c.below(5) {
            0 => {
                let v = self.expr(&Ty::new(e, &vshape), d);
                format!("({dot} {mat} {v})")
            }
            1 => {
                let v = self.expr(&Ty::new(e, &vshape), d);
                let (r, x) = (self.fresh("r"), self.fresh("v"));
                format!("((fn (({r} [{t} {ks}]) ({x} [{t} {ks}])) ({sum} ({times} {r} {x}))) {mat} {v})")
            }
            2 => {
                let v = self.expr(&Ty::new(e, std::slice::from_ref(&k)), d);
                let (r, x) = (self.fresh("r"), self.fresh("v"));
                format!("(let ((val {x} {v})) ((fn (({r} [{t} {ks}])) ({sum} ({times} {r} {x}))) {mat}))")
            }
            _ if !frame.is_empty() => {
                let v = self.expr(&Ty::new(e, &vshape), d);
                format!("({dot} {mat} {v})")
            }
            3 => {
                let v = self.expr(&Ty::new(e, std::slice::from_ref(&k)), d);
                format!("(reduce {add} ({times} {v} (transpose2d {mat})))")
            }
            _ => {
                let mt = self.expr(&Ty::new(e, &[k.clone(), m.clone()]), d);
                let v = self.expr(&Ty::new(e, std::slice::from_ref(&k)), d);
                format!("({dot} (transpose2d {mt}) {v})")
            }
        }
    }

    /// A `while` over a record state: a value of `ty` and a count, the
    /// condition reading both (the count bounds the steps).
    fn record_while(&mut self, ty: &Ty, d: usize) -> String {
        let (s, fa, fi) = (self.fresh("s"), self.fresh("a"), self.fresh("i"));
        let state = format!("{{({fa} {}) ({fi} Int)}}", ty.syntax());
        let read_a = format!("(field {s} {fa})");
        let read_i = format!("(field {s} {fi})");
        self.env.push((read_a.clone(), ty.clone()));
        self.env.push((read_i.clone(), Ty::scalar(Elem::Int)));
        let cond = self.expr(&Ty::scalar(Elem::Bool), d.min(2));
        let step = self.expr(ty, d);
        self.env.truncate(self.env.len() - 2);
        let start = self.expr(ty, d);
        let bound = self.c.below(5);
        let join = self.c.pick(&["and", "or"]);
        let build = |a: &str, i: &str| format!("{{({fa} [{}] {a}) ({fi} [] {i})}}", dims(&ty.shape));
        let (step, start) = (build(&step, &format!("(+ {read_i} 1)")), build(&start, "0"));
        let cond = if join == "and" {
            format!("(and (< {read_i} {bound}) {cond})")
        } else {
            // (Still bounded: `or` of a bound on the count and the condition
            // only while the count is small.)
            format!(
                "(and (< {read_i} {}) (or (< {read_i} {bound}) {cond}))",
                bound + 3
            )
        };
        format!("(field (while (fn (({s} {state})) {cond}) (fn (({s} {state})) {step}) {start}) {fa})")
    }

    /// `scatter` of items at computed indices (repeated, negative and past
    /// the end among them), lifted over a frame, or in a lambda of one
    /// destination capturing its indices and items.
    fn scatter_computed(&mut self, ty: &Ty, d: usize) -> String {
        let rank = ty.shape.len();
        let k = self.c.below(rank);
        let frame = ty.shape[..k].to_vec();
        let cell = Ty::new(ty.elem, &ty.shape[k..]);
        let m = cell.shape[0].clone();
        let n = Dim::lit(self.c.below(7));
        let lambda = self.c.coin();
        let side = |g: &mut Self| if lambda { Vec::new() } else { g.prefix(&frame) };
        let mut ishape = side(self);
        ishape.push(n.clone());
        let idx = match self.c.below(3) {
            0 => self.indices(m.value, n.value),
            1 => format!("(mod (i-app iota/static [{}]) 2)", n.syntax()),
            _ => {
                let i = self.expr(&Ty::new(Elem::Int, &ishape), d);
                let bm = self.bound(&m);
                format!("(- (mod {i} (+ 1 {bm})) 1)")
            }
        };
        let mut sshape = side(self);
        sshape.push(n);
        sshape.extend(cell.shape[1..].iter().cloned());
        let src = self.expr(&Ty::new(ty.elem, &sshape), d);
        let dest = self.expr(ty, d);
        if lambda {
            let x = self.fresh("dst");
            format!(
                "((fn (({x} {})) (scatter {x} {idx} {src})) {dest})",
                cell.syntax()
            )
        } else {
            format!("(scatter {dest} {idx} {src})")
        }
    }
}

//! Random well-typed Remora programs, for differential testing of the
//! compiled engine against the interpreter (`fuzz/fuzz_targets/compiled.rs`,
//! `tests/differential.rs`).
//!
//! [`program`] reads a stream of choice bytes (the fuzzer's input, or a
//! seeded generator's) and builds a program *type-directed*: it picks a
//! result type (an atom type and a small static shape, sometimes with an
//! axis of 300 items to cross the 256-item threshold of float sums), then an
//! expression of that type from literals, lifted scalar primitives, `let`,
//! `if`, lambdas and `def`s applied over frames, reductions and scans,
//! shape functions, `select`, `iterate`, `while`, sorts, `hist` and
//! `scatter`. When the bytes run out every choice is the simplest (a
//! literal), so generation always ends. The generator is right most of the
//! time, not always: [`compare`] skips what the checker rejects.
//!
//! [`compare`] checks a program, runs it on the interpreter with a budget
//! and, where it compiles, compiled to C, and says whether the two agree.

use remora_syntax::{RealFs, SourceMap, load_program_text};

/// An atom type.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Elem {
    Int,
    Float,
    Bool,
}

/// An array type with a static shape.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Ty {
    pub elem: Elem,
    pub shape: Vec<usize>,
}

impl Ty {
    fn new(elem: Elem, shape: &[usize]) -> Ty {
        Ty {
            elem,
            shape: shape.to_vec(),
        }
    }

    fn scalar(elem: Elem) -> Ty {
        Ty::new(elem, &[])
    }

    fn atoms(&self) -> usize {
        self.shape.iter().product()
    }

    /// This type with `d` items of it: `[d] ++ shape`.
    fn items(&self, d: usize) -> Ty {
        let mut shape = vec![d];
        shape.extend(&self.shape);
        Ty::new(self.elem, &shape)
    }

    /// The type in Remora's syntax: `Int`, `[Float 2 3]`.
    fn syntax(&self) -> String {
        let e = elem_name(self.elem);
        if self.shape.is_empty() {
            e.to_string()
        } else {
            format!("[{e} {}]", dims(&self.shape))
        }
    }
}

fn elem_name(e: Elem) -> &'static str {
    match e {
        Elem::Int => "Int",
        Elem::Float => "Float",
        Elem::Bool => "Bool",
    }
}

fn dims(shape: &[usize]) -> String {
    shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(" ")
}

/// The choice bytes: each choice reads one; past the end every choice is 0.
pub struct Choices<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Choices<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Choices { bytes, pos: 0 }
    }

    fn byte(&mut self) -> u8 {
        let b = self.bytes.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    /// A number in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        if n <= 1 { 0 } else { usize::from(self.byte()) % n }
    }

    fn coin(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    fn exhausted(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

/// The scalar primitives: name, argument atom types, result atom type.
const PRIMS: &[(&str, &[Elem], Elem)] = {
    use Elem::{Bool as B, Float as F, Int as I};
    &[
        ("+", &[I, I], I),
        ("-", &[I, I], I),
        ("*", &[I, I], I),
        ("/", &[I, I], I),
        ("mod", &[I, I], I),
        ("^", &[I, I], I),
        ("max", &[I, I], I),
        ("min", &[I, I], I),
        ("bit-and", &[I, I], I),
        ("bit-or", &[I, I], I),
        ("bit-xor", &[I, I], I),
        ("shl", &[I, I], I),
        ("shr", &[I, I], I),
        ("neg", &[I], I),
        ("abs", &[I], I),
        ("signum", &[I], I),
        ("bit-not", &[I], I),
        ("popc", &[I], I),
        ("clip", &[I, I, I], I),
        ("f.+", &[F, F], F),
        ("f.-", &[F, F], F),
        ("f.*", &[F, F], F),
        ("f./", &[F, F], F),
        ("f.^", &[F, F], F),
        ("f.max", &[F, F], F),
        ("f.min", &[F, F], F),
        ("f.mod", &[F, F], F),
        ("f.atan2", &[F, F], F),
        ("f.clip", &[F, F, F], F),
        ("f.neg", &[F], F),
        ("f.abs", &[F], F),
        ("f.signum", &[F], F),
        ("f.sqrt", &[F], F),
        ("f.ln", &[F], F),
        ("f.exp", &[F], F),
        ("f.log2", &[F], F),
        ("f.log10", &[F], F),
        ("f.sin", &[F], F),
        ("f.cos", &[F], F),
        ("f.tan", &[F], F),
        ("f.asin", &[F], F),
        ("f.acos", &[F], F),
        ("f.atan", &[F], F),
        ("f.sinh", &[F], F),
        ("f.cosh", &[F], F),
        ("f.tanh", &[F], F),
        ("f.floor", &[F], F),
        ("f.ceiling", &[F], F),
        ("f.round", &[F], F),
        ("==", &[I, I], B),
        ("!=", &[I, I], B),
        ("<", &[I, I], B),
        (">", &[I, I], B),
        ("<=", &[I, I], B),
        (">=", &[I, I], B),
        ("f.==", &[F, F], B),
        ("f.!=", &[F, F], B),
        ("f.<", &[F, F], B),
        ("f.>", &[F, F], B),
        ("f.<=", &[F, F], B),
        ("f.>=", &[F, F], B),
        ("and", &[B, B], B),
        ("or", &[B, B], B),
        ("bool.==", &[B, B], B),
        ("bool.!=", &[B, B], B),
        ("not", &[B], B),
        ("f.isnan", &[F], B),
        ("i->f", &[I], F),
        ("bool->f", &[B], F),
        ("bool->i", &[B], I),
        ("i->bool", &[I], B),
        ("truncate", &[F], I),
        ("round", &[F], I),
        ("floor", &[F], I),
        ("ceiling", &[F], I),
    ]
};

/// Associative-looking binary operators for reductions, scans and `hist`
/// (any binary operator of the type is allowed; these are the usual ones).
fn reducers(e: Elem) -> &'static [&'static str] {
    match e {
        Elem::Int => &["+", "*", "max", "min", "-", "bit-xor"],
        Elem::Float => &["f.+", "f.*", "f.max", "f.min", "f.-"],
        Elem::Bool => &["and", "or", "bool.!="],
    }
}

const INTS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "-1",
    "-2",
    "5",
    "7",
    "-7",
    "42",
    "100",
    "-3",
    "9223372036854775807",
    "-9223372036854775808",
    "63",
    "64",
];

const FLOATS: &[&str] = &[
    "0.0",
    "-0.0",
    "1.0",
    "-1.0",
    "0.5",
    "1.5",
    "-2.25",
    "3.0",
    "0.1",
    "1.0e8",
    "-1.0e8",
    "1.0e-3",
    "7.0",
    "(f./ 0.0 0.0)",
    "(f./ 1.0 0.0)",
    "(f./ -1.0 0.0)",
];

struct Gen<'a> {
    c: Choices<'a>,
    /// `def`s written so far, in order.
    defs: Vec<String>,
    /// Variables in scope: name and type.
    env: Vec<(String, Ty)>,
    next: usize,
    /// The rank of the literal being written.
    nested_rank: usize,
}

/// A random program from the choice bytes: `def`s then one bare expression.
pub fn program(bytes: &[u8]) -> String {
    let mut g = Gen {
        c: Choices::new(bytes),
        defs: Vec::new(),
        env: Vec::new(),
        next: 0,
        nested_rank: 0,
    };
    let ty = g.ty(3);
    let depth = 2 + g.c.below(4);
    let main = g.expr(&ty, depth);
    let mut out = String::new();
    for d in &g.defs {
        out.push_str(d);
        out.push('\n');
    }
    out.push_str(&main);
    out.push('\n');
    out
}

impl Gen<'_> {
    fn fresh(&mut self, base: &str) -> String {
        self.next += 1;
        format!("{base}{}", self.next)
    }

    fn elem(&mut self) -> Elem {
        self.c.pick(&[Elem::Int, Elem::Float, Elem::Bool])
    }

    /// A random type of rank at most `max_rank`: small dimensions, now
    /// and then 300.
    fn ty(&mut self, max_rank: usize) -> Ty {
        let elem = self.elem();
        let rank = self.c.below(max_rank + 1);
        let mut shape = Vec::new();
        for _ in 0..rank {
            let v = self.c.below(24);
            let atoms: usize = shape.iter().product();
            shape.push(if v == 23 && atoms <= 4 { 300 } else { v % 6 });
        }
        Ty { elem, shape }
    }

    /// A small type for a cell or a variable: rank 0 to 2, dimensions 0 to 3.
    fn small_ty(&mut self) -> Ty {
        let elem = self.elem();
        let rank = self.c.below(3);
        let shape = (0..rank).map(|_| self.c.below(4)).collect();
        Ty { elem, shape }
    }

    /// A number of items for a reduction: 1 to 5, or 300 when the cells
    /// are small.
    fn length(&mut self, cell: &Ty, min: usize) -> usize {
        let v = self.c.below(12);
        if v == 11 && cell.atoms() <= 4 {
            300
        } else {
            min + v % 5
        }
    }

    fn atom(&mut self, e: Elem) -> &'static str {
        match e {
            Elem::Int => self.c.pick(INTS),
            Elem::Float => self.c.pick(FLOATS),
            Elem::Bool => self.c.pick(&["#t", "#f"]),
        }
    }

    /// A literal of type `ty`.
    fn literal(&mut self, ty: &Ty) -> String {
        if ty.shape.is_empty() {
            return self.atom(ty.elem).to_string();
        }
        if ty.atoms() == 0 {
            return format!("(array [{}] {})", dims(&ty.shape), elem_name(ty.elem));
        }
        if ty.atoms() > 40 {
            // Many atoms: made from iota/static.
            let iota = format!("(i-app iota/static [{}])", dims(&ty.shape));
            let (a, m) = (self.c.pick(&[7, 13, 31]), self.c.pick(&[17, 23, 101]));
            return match ty.elem {
                Elem::Int => format!("(- (mod (* {iota} {a}) {m}) {})", m / 2),
                Elem::Float => {
                    if self.c.coin() {
                        format!(
                            "(f./ (i->f (- (mod (* {iota} {a}) {m}) {})) (i->f (mod {iota} 5)))",
                            m / 2
                        )
                    } else {
                        format!("(f.- (f.* (i->f (mod (* {iota} {a}) {m})) 0.37) 3.0)")
                    }
                }
                Elem::Bool => format!("(== 0 (mod {iota} {}))", self.c.pick(&[2, 3, 5])),
            };
        }
        let mut out = String::new();
        self.nested_rank = ty.shape.len();
        self.nested(ty.elem, &ty.shape, &mut out);
        out
    }

    fn nested(&mut self, e: Elem, shape: &[usize], out: &mut String) {
        match shape.split_first() {
            // (Inside a literal of rank 2 or more only plain atoms: the
            // reader gets the shape of a literal row wrong beside a row
            // holding an expression, `[[[1 2]] [[3 (+ 1 3)]]]`.)
            None if e == Elem::Float && self.nested_rank > 1 => out.push_str(self.c.pick(&FLOATS[..13])),
            None => out.push_str(self.atom(e)),
            Some((d, rest)) => {
                out.push('[');
                for i in 0..*d {
                    if i > 0 {
                        out.push(' ');
                    }
                    self.nested(e, rest, out);
                }
                out.push(']');
            }
        }
    }

    /// A leaf: a variable of the type, or a literal.
    fn leaf(&mut self, ty: &Ty) -> String {
        let vars: Vec<String> = self
            .env
            .iter()
            .filter(|(_, t)| t == ty)
            .map(|(n, _)| n.clone())
            .collect();
        if !vars.is_empty() && self.c.below(3) != 0 {
            let i = self.c.below(vars.len());
            return vars[i].clone();
        }
        self.literal(ty)
    }

    /// A prefix of `shape` (a frame).
    fn prefix(&mut self, shape: &[usize]) -> Vec<usize> {
        shape[..self.c.below(shape.len() + 1)].to_vec()
    }

    /// An expression of type `ty`, at most `depth` forms deep.
    fn expr(&mut self, ty: &Ty, depth: usize) -> String {
        if depth == 0 || self.c.exhausted() {
            return self.leaf(ty);
        }
        let d = depth - 1;
        let rank = ty.shape.len();
        let e = ty.elem;
        let first = ty.shape.first().copied();
        let rest = if rank > 0 {
            ty.shape[1..].to_vec()
        } else {
            Vec::new()
        };
        let cell = Ty::new(e, &rest);
        match self.c.below(30) {
            0..=5 => self.prim(ty, d),
            6 => self.leaf(ty),
            7 => {
                let v = self.fresh("v");
                let vt = self.small_ty();
                let value = self.expr(&vt, d);
                self.env.push((v.clone(), vt));
                let body = self.expr(ty, d);
                self.env.pop();
                format!("(let ((val {v} {value})) {body})")
            }
            8 => {
                let c = self.expr(&Ty::scalar(Elem::Bool), d);
                let a = self.expr(ty, d);
                let b = self.expr(ty, d);
                format!("(if {c} {a} {b})")
            }
            9 | 10 => self.function(ty, d, false),
            11 => self.function(ty, d, true),
            12 => {
                // reduce, reduce/zero
                let zero = self.c.coin();
                let n = self.length(ty, usize::from(!zero));
                let op = self.operator(ty, d);
                let xs = self.expr(&ty.items(n), d);
                if zero {
                    let z = self.expr(ty, d);
                    format!("(reduce/zero {op} {z} {xs})")
                } else {
                    format!("(reduce {op} {xs})")
                }
            }
            13 => {
                // fold
                let item = self.small_ty();
                let n = self.length(&item, 1);
                let (acc, x) = (self.fresh("acc"), self.fresh("x"));
                self.env.push((acc.clone(), ty.clone()));
                self.env.push((x.clone(), item.clone()));
                let body = self.expr(ty, d);
                self.env.truncate(self.env.len() - 2);
                let z = self.expr(ty, d);
                let xs = self.expr(&item.items(n), d);
                format!(
                    "(fold (fn (({acc} {}) ({x} {})) {body}) {z} {xs})",
                    ty.syntax(),
                    item.syntax()
                )
            }
            14 => match first {
                Some(n) if n >= 1 => {
                    let op = self.operator(&cell, d);
                    let z = self.expr(&cell, d);
                    let xs = self.expr(&cell.items(n - 1), d);
                    format!("(scan {op} {z} {xs})")
                }
                Some(_) => {
                    let op = self.operator(&cell, d);
                    let xs = self.expr(ty, d);
                    format!("(iscan {op} {xs})")
                }
                None => self.whole(ty, d),
            },
            15 => match first {
                Some(_) => {
                    let op = self.operator(&cell, d);
                    let xs = self.expr(ty, d);
                    format!("(iscan {op} {xs})")
                }
                None => self.whole(ty, d),
            },
            16 => match (e, rank) {
                (Elem::Int, _) => format!("(i-app iota/static [{}])", dims(&ty.shape)),
                (_, 0) => self.whole(ty, d),
                _ => self.prim(ty, d),
            },
            17 if rank > 0 => {
                let xs = self.expr(ty, d);
                if self.c.coin() {
                    format!("(reverse {xs})")
                } else {
                    let n = self.expr(&Ty::scalar(Elem::Int), d.min(1));
                    format!("(rotate {xs} {n})")
                }
            }
            18 if rank > 0 => {
                let k = first.unwrap_or(0);
                let j = self.c.below(4);
                let xs = self.expr(&cell.items(k + j), d);
                if self.c.coin() {
                    let f = self.c.pick(&["take", "take-right"]);
                    format!("((i-app {f} {k}) {xs})")
                } else {
                    let f = self.c.pick(&["drop", "drop-right"]);
                    format!("((i-app {f} {j}) {xs})")
                }
            }
            19 => {
                // index (a scalar) or nth (an item)
                let m = 1 + self.c.below(5);
                let i = self.index(m, d);
                if rank == 0 && self.c.coin() {
                    let v = self.expr(&ty.items(m), d);
                    format!("(index {v} {i})")
                } else {
                    let v = self.expr(&ty.items(m), d);
                    format!("(nth {v} {i})")
                }
            }
            20 if rank >= 2 => {
                let mut arg = ty.clone();
                arg.shape.swap(0, 1);
                let xs = self.expr(&arg, d);
                if self.c.coin() && rank == 2 {
                    format!("(transpose2d {xs})")
                } else {
                    let mut perm: Vec<usize> = (0..rank).collect();
                    perm.swap(0, 1);
                    format!("((i-app transpose [{}]) {xs})", dims(&perm))
                }
            }
            21 if rank > 0 => {
                let n = first.unwrap_or(0);
                let a = self.c.below(n + 1);
                let x = self.expr(&cell.items(a), d);
                let y = self.expr(&cell.items(n - a), d);
                format!("(append {x} {y})")
            }
            22 if rank > 0 => {
                let k = 1 + self.c.below(rank);
                let x = self.expr(&Ty::new(e, &ty.shape[k..]), d);
                format!("((i-app replicate [{}]) {x})", dims(&ty.shape[..k]))
            }
            23 => {
                let frame = self.prefix(&ty.shape);
                let c = self.expr(&Ty::new(Elem::Bool, &frame), d);
                let a = self.expr(ty, d);
                let b = self.expr(ty, d);
                format!("(select {c} {a} {b})")
            }
            24 => {
                let n = self.c.below(4);
                let x = self.fresh("x");
                self.env.push((x.clone(), ty.clone()));
                let body = self.expr(ty, d);
                self.env.pop();
                let start = self.expr(ty, d);
                format!("(iterate {n} (fn (({x} {})) {body}) {start})", ty.syntax())
            }
            25 if e != Elem::Bool => {
                let x = self.fresh("x");
                let start = self.expr(ty, d);
                let (k, s) = (self.c.below(20), 1 + self.c.below(5));
                if e == Elem::Int {
                    format!(
                        "(while (fn (({x} Int)) (< {x} {k})) (fn (({x} Int)) (+ (max {x} 0) {s})) {start})"
                    )
                } else {
                    format!(
                        "(while (fn (({x} Float)) (f.< {x} {k}.0)) (fn (({x} Float)) (f.+ (f.max {x} 0.0) {s}.0)) {start})"
                    )
                }
            }
            26 if rank > 0 && e != Elem::Bool => {
                let xs = self.expr(ty, d);
                match e {
                    Elem::Int => format!("(sort {xs})"),
                    _ => format!("(f.sort {xs})"),
                }
            }
            27 if rank > 0 => {
                // hist: first-axis bins
                let m = first.unwrap_or(0);
                let n = self.c.below(6);
                let idx = self.indices(m, n);
                let op = self.operator(&cell, d);
                let ne = self.expr(&cell, d);
                let xs = self.expr(&cell.items(n), d);
                format!("((i-app hist {m}) {op} {ne} {idx} {xs})")
            }
            28 if rank > 0 => {
                let m = first.unwrap_or(0);
                let n = self.c.below(6);
                let idx = self.indices(m, n);
                let dest = self.expr(ty, d);
                let src = self.expr(&cell.items(n), d);
                format!("(scatter {dest} {idx} {src})")
            }
            29 if rank == 0 => self.whole(ty, d),
            _ => self.prim(ty, d),
        }
    }

    /// A scalar primitive of result atom type `ty.elem`, lifted: each
    /// argument's frame is a prefix of `ty`'s shape, one of them all of it.
    fn prim(&mut self, ty: &Ty, d: usize) -> String {
        let fits: Vec<&(&str, &[Elem], Elem)> = PRIMS.iter().filter(|p| p.2 == ty.elem).collect();
        let (name, args, _) = *fits[self.c.below(fits.len())];
        let whole = self.c.below(args.len());
        let mut out = format!("({name}");
        for (i, a) in args.iter().enumerate() {
            let frame = if i == whole {
                ty.shape.clone()
            } else {
                self.prefix(&ty.shape)
            };
            out.push(' ');
            let arg = self.expr(&Ty::new(*a, &frame), d);
            out.push_str(&arg);
        }
        out.push(')');
        out
    }

    /// A whole-array reduction to a scalar: `sum`, `f.sum`, `any`…
    fn whole(&mut self, ty: &Ty, d: usize) -> String {
        let mut arg = self.ty(2);
        if self.c.below(3) == 0 {
            arg.shape = vec![300];
        }
        let (f, elem) = match ty.elem {
            Elem::Int => self
                .c
                .pick(&[("sum", Elem::Int), ("product", Elem::Int), ("count", Elem::Bool)]),
            Elem::Float => self.c.pick(&[("f.sum", Elem::Float), ("f.product", Elem::Float)]),
            Elem::Bool => self.c.pick(&[("any", Elem::Bool), ("all", Elem::Bool)]),
        };
        arg.elem = elem;
        let x = self.expr(&arg, d);
        format!("({f} {x})")
    }

    /// A binary operator on `ty`: a primitive (for scalars) or a lambda.
    fn operator(&mut self, ty: &Ty, d: usize) -> String {
        if ty.shape.is_empty() && self.c.below(3) != 0 || d == 0 {
            // (A primitive lifts over cells of any shape too.)
            return self.c.pick(reducers(ty.elem)).to_string();
        }
        let (a, b) = (self.fresh("a"), self.fresh("b"));
        self.env.push((a.clone(), ty.clone()));
        self.env.push((b.clone(), ty.clone()));
        let body = self.expr(ty, d);
        self.env.truncate(self.env.len() - 2);
        let t = ty.syntax();
        format!("(fn (({a} {t}) ({b} {t})) {body})")
    }

    /// An index into `m` items: mostly in range, now and then not.
    fn index(&mut self, m: usize, d: usize) -> String {
        match self.c.below(8) {
            0 => self.expr(&Ty::scalar(Elem::Int), d.min(1)),
            1 => m.to_string(),
            _ => self.c.below(m).to_string(),
        }
    }

    /// `n` bin indices for `m` bins, some out of range.
    fn indices(&mut self, m: usize, n: usize) -> String {
        if n == 0 {
            return "(array [0] Int)".into();
        }
        let items: Vec<String> = (0..n)
            .map(|_| {
                let v = self.c.below(m + 2) as i64 - 1;
                v.to_string()
            })
            .collect();
        format!("[{}]", items.join(" "))
    }

    /// A function applied over a frame: a lambda, or (`def`) a named
    /// function defined at the top.
    fn function(&mut self, ty: &Ty, d: usize, def: bool) -> String {
        let frame_len = self.c.below(ty.shape.len() + 1);
        let frame = &ty.shape[..frame_len];
        let result = Ty::new(ty.elem, &ty.shape[frame_len..]);
        let param = self.small_ty();
        let x = self.fresh("x");
        let outer = if def {
            std::mem::take(&mut self.env)
        } else {
            Vec::new()
        };
        self.env.push((x.clone(), param.clone()));
        let body = self.expr(&result, d);
        self.env.pop();
        if def {
            self.env = outer;
        }
        let mut arg_shape = frame.to_vec();
        arg_shape.extend(&param.shape);
        let arg = self.expr(&Ty::new(param.elem, &arg_shape), d);
        if def {
            let f = self.fresh("f");
            self.defs
                .push(format!("(def (fun ({f} ({x} {})) {body}))", param.syntax()));
            format!("({f} {arg})")
        } else {
            format!("((fn (({x} {})) {body}) {arg})", param.syntax())
        }
    }
}

/// What [`compare`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The program does not parse or check (the generator's miss).
    Rejected,
    /// The interpreter ran out of its budget: nothing to compare.
    OverBudget,
    /// The compiled engine cannot compile it (yet): why.
    Unsupported(String),
    /// Both engines printed the same, or both failed.
    Agreed,
    /// The engines disagree, or the compiled engine broke: how.
    Disagreed(String),
}

/// Steps and atoms the interpreter may spend on one program.
const FUEL: u64 = 200_000;
const ATOMS: usize = 1 << 16;

/// `text` checked, run on the interpreter (with a budget) and compiled
/// (quickly, `-O1`): do the engines agree? Call it on a thread with the
/// pipeline's stack (`remora_syntax::stack::PIPELINE_STACK`).
pub fn compare(text: &str) -> Verdict {
    compare_within(text, FUEL)
}

/// [`compare`], the interpreter given `fuel` steps: every value the
/// program prints (each bare expression's) must be printed the same by
/// both engines.
pub fn compare_within(text: &str, fuel: u64) -> Verdict {
    let mut sources = SourceMap::new();
    let loaded = load_program_text(&mut sources, &RealFs, "<generated>", None, text);
    if loaded.has_errors() {
        return Verdict::Rejected;
    }
    let checked = remora_check::check_program(&loaded.value);
    if checked.has_errors() {
        return Verdict::Rejected;
    }
    remora_interp::Interpreter::limit_atoms(ATOMS);
    let mut interp = remora_interp::Interpreter::default();
    interp.fuel = Some(fuel);
    let interpreted = interp
        .program(&checked.value)
        .map(|(_, values)| printed(&values))
        .map_err(|e| e.message);
    if let Err(m) = &interpreted
        && (m.contains("budget") || m.contains("too large"))
    {
        return Verdict::OverBudget;
    }
    let compiled = crate::native::run_with(&checked.value, &checked.names, "main", &[], true);
    match (compiled, interpreted) {
        (Err(crate::native::Failure::Unsupported(_, why)), _) => Verdict::Unsupported(why),
        (Err(crate::native::Failure::Internal(why)), _) => {
            Verdict::Disagreed(format!("the compiled engine broke: {why}"))
        }
        (Err(crate::native::Failure::Run(_)), Err(_)) => Verdict::Agreed,
        (Ok(values), Ok(expected)) if printed(&values) == expected => Verdict::Agreed,
        (compiled, interpreted) => Verdict::Disagreed(format!(
            "interpreter: {interpreted:?}\ncompiled: {:?}",
            match compiled {
                Ok(values) => Ok(printed(&values)),
                Err(crate::native::Failure::Run(m)) => Err(m),
                Err(_) => Err(String::new()),
            }
        )),
    }
}

/// Each value as the engines print it.
fn printed<F: remora_value::Callable + Clone>(values: &[remora_value::Array<F>]) -> Vec<String> {
    values.iter().map(remora_value::print::to_string).collect()
}

/// A seeded stream of choice bytes (SplitMix64), for deterministic runs.
pub fn seeded_bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut state = seed;
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        out.extend(z.to_le_bytes());
    }
    out.truncate(n);
    out
}

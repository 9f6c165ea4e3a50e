//! Random well-typed Remora programs, for differential testing of the
//! compiled engine against the interpreter (`fuzz/fuzz_targets/compiled.rs`,
//! `tests/differential.rs`).
//!
//! [`program`] reads a stream of choice bytes (the fuzzer's input, or a
//! seeded generator's) and builds a program *type-directed*: it picks a
//! result type (an atom type and a small shape, sometimes with an axis of
//! 300 items to cross the 256-item threshold of float sums), then an
//! expression of that type from literals, lifted scalar primitives, `let`,
//! `if`, lambdas and `def`s applied over frames (`def`s generic in their
//! parameters' dimensions and atom type, called with and without explicit
//! instantiation), reductions and scans, shape functions (`windows`,
//! `reshape`, `transpose`…), gathers by computed indices, `select`,
//! `iterate`, `while`, `fold` and `fold-right`, sorts and grades (also
//! `sort-by`/`grade-by` by a key), `hist`, `scatter`, `head`/`last`/`tail`,
//! `flatten`, `index2d`, `argmax`/`argmin`, `dot`, `matmul`, records
//! (built, read, carried through `iterate`, `while` and `fold`) and boxes
//! (`filter`, `range`) unboxed and used; and the forms users write over
//! rows ([`rows`]: best indices, `sort-by`/`grade-by` by lambdas, top-k,
//! gathers by `index2d` and `nth` chains, reductions of `windows`,
//! matrix-vector products, `while` over records, `scatter` of computed
//! indices); and the forms the interpreter's cell programs and masked
//! loops run ([`cells`]: folds, scans and reductions by lambdas on small
//! cells and records, lifted over frames of a few cells or about 256;
//! `while`/`iterate` over record and pair states, each cell stopping on
//! its own; `iscan` of pairs projected or filtered; reductions along
//! columns). Half the programs are an entry, `main`, whose parameters have
//! sizes known only at run time (`[Float $n]`), with inputs of those sizes
//! (some empty, some of 300 items). A shape is a list of [`Dim`]s: numbers
//! and sums of index variables in scope. When the bytes run out every
//! choice is the simplest (a literal), so generation always ends. The
//! generator is right most of the time, not always: [`compare`] skips what
//! the checker rejects.
//!
//! [`compare`] checks a program, runs it on the interpreter with a budget
//! and, where it compiles, compiled to C, and says whether the two agree.

use remora_syntax::{RealFs, SourceMap, load_program_text};

mod cells;
mod rows;

/// An atom type.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Elem {
    Int,
    Float,
    Bool,
}

/// A dimension: a number plus index variables (`(+ $n $m 2)`), with the
/// number of items it has in the run (for an unbox's witness, a guess:
/// it only steers sizes).
#[derive(Clone, Debug)]
pub struct Dim {
    konst: usize,
    vars: Vec<String>,
    value: usize,
}

/// Dimensions are the same when written the same (up to order).
impl PartialEq for Dim {
    fn eq(&self, other: &Dim) -> bool {
        self.konst == other.konst && self.vars == other.vars
    }
}

impl Eq for Dim {}

impl Dim {
    fn lit(n: usize) -> Dim {
        Dim {
            konst: n,
            vars: Vec::new(),
            value: n,
        }
    }

    fn var(name: &str, value: usize) -> Dim {
        Dim {
            konst: 0,
            vars: vec![name.to_string()],
            value,
        }
    }

    fn is_static(&self) -> bool {
        self.vars.is_empty()
    }

    /// This dimension plus `other`.
    fn add(&self, other: &Dim) -> Dim {
        let mut vars = self.vars.clone();
        vars.extend(other.vars.iter().cloned());
        vars.sort();
        Dim {
            konst: self.konst + other.konst,
            vars,
            value: self.value + other.value,
        }
    }

    /// This dimension less `k` (at most its number part).
    fn less(&self, k: usize) -> Dim {
        let k = k.min(self.konst);
        Dim {
            konst: self.konst - k,
            vars: self.vars.clone(),
            value: self.value.saturating_sub(k),
        }
    }

    /// As written in an index: `3`, `$n`, `(+ $n 1)`.
    fn syntax(&self) -> String {
        match (self.vars.as_slice(), self.konst) {
            ([], k) => k.to_string(),
            ([v], 0) => v.clone(),
            (vs, 0) => format!("(+ {})", vs.join(" ")),
            (vs, k) => format!("(+ {} {k})", vs.join(" ")),
        }
    }
}

/// An array type: atoms and a shape.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Ty {
    pub elem: Elem,
    pub shape: Vec<Dim>,
}

impl Ty {
    fn new(elem: Elem, shape: &[Dim]) -> Ty {
        Ty {
            elem,
            shape: shape.to_vec(),
        }
    }

    fn scalar(elem: Elem) -> Ty {
        Ty::new(elem, &[])
    }

    fn atoms(&self) -> usize {
        self.shape.iter().map(|d| d.value).product()
    }

    fn is_static(&self) -> bool {
        self.shape.iter().all(Dim::is_static)
    }

    /// This type with `d` items of it: `[d] ++ shape`.
    fn items(&self, d: Dim) -> Ty {
        let mut shape = vec![d];
        shape.extend(self.shape.iter().cloned());
        Ty::new(self.elem, &shape)
    }

    /// The type in Remora's syntax: `Int`, `[Float 2 $n]`.
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

fn dims(shape: &[Dim]) -> String {
    shape.iter().map(Dim::syntax).collect::<Vec<_>>().join(" ")
}

fn lits(shape: &[usize]) -> Vec<Dim> {
    shape.iter().map(|&d| Dim::lit(d)).collect()
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

    fn pick_ref<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
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

/// The most atoms an array of a size known at run time is given (where
/// the compiled program's loops have work enough for several threads,
/// under the interpreter's limit of 2^16).
const BIG: usize = 50_000;

struct Gen<'a> {
    c: Choices<'a>,
    /// `def`s written so far, in order.
    defs: Vec<String>,
    /// The `def`s' signatures, to call them again.
    sigs: Vec<Signature>,
    /// Variables in scope: how each is read (a name, `(field s a)`) and
    /// its type.
    env: Vec<(String, Ty)>,
    /// Index variables in scope (`$n`), with their values in the run.
    ivars: Vec<(String, usize)>,
    next: usize,
    /// The rank of the literal being written.
    nested_rank: usize,
}

/// A generated program, and the inputs its entry `main` takes (Remora
/// expressions; none for a program of bare expressions).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    pub text: String,
    pub inputs: Vec<String>,
}

/// As a test case of tests/run: its input line, then the program.
impl std::fmt::Display for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.inputs.is_empty() {
            writeln!(f, ";; input {{ {} }}", self.inputs.join(" "))?;
        }
        write!(f, "{}", self.text)
    }
}

/// A random program from the choice bytes: `def`s then one bare
/// expression, or `def`s then an entry `main` of parameters with sizes
/// known at run time, and inputs for it.
pub fn program(bytes: &[u8]) -> Program {
    let mut g = Gen {
        c: Choices::new(bytes),
        defs: Vec::new(),
        sigs: Vec::new(),
        env: Vec::new(),
        ivars: Vec::new(),
        next: 0,
        nested_rank: 0,
    };
    let entry = g.c.coin();
    let mut params = Vec::new();
    let mut inputs = Vec::new();
    if entry {
        params = g.entry_parameters();
        for (name, ty) in &params {
            inputs.push(g.input(ty));
            g.env.push((name.clone(), ty.clone()));
        }
    }
    let ty = match g.c.below(3) {
        // The type of an input, or of its items: the inputs flow into the
        // result.
        0 if entry => {
            let (_, t) = g.c.pick_ref(&params);
            let drop = g.c.below(t.shape.len() + 1);
            Ty::new(g.elem(), &t.shape[drop..])
        }
        _ => g.ty(3),
    };
    let depth = 2 + g.c.below(4);
    let mut main = g.expr(&ty, depth);
    if !ty.shape.is_empty() && g.c.below(8) == 0 {
        // A box as the result: the items a mask keeps.
        let mask = g.expr(&Ty::new(Elem::Bool, &ty.shape[..1]), 1);
        main = format!("(filter {mask} {main})");
    }
    let mut out = String::new();
    for d in &g.defs {
        out.push_str(d);
        out.push('\n');
    }
    if entry {
        let ps: Vec<String> = params
            .iter()
            .map(|(n, t)| format!("({n} {})", t.syntax()))
            .collect();
        out.push_str(&format!("(entry (main {}) {main})\n", ps.join(" ")));
    } else {
        out.push_str(&main);
        out.push('\n');
    }
    Program { text: out, inputs }
}

impl Gen<'_> {
    fn fresh(&mut self, base: &str) -> String {
        self.next += 1;
        format!("{base}{}", self.next)
    }

    fn elem(&mut self) -> Elem {
        self.c.pick(&[Elem::Int, Elem::Float, Elem::Bool])
    }

    /// An entry's parameters: one to three, their dimensions numbers and
    /// index variables (each variable in some parameter, several in more
    /// than one), the variables' values chosen for the run: small, now and
    /// then 0 (empty inputs) or 300.
    fn entry_parameters(&mut self) -> Vec<(String, Ty)> {
        let nvars = 1 + self.c.below(3);
        for _ in 0..nvars {
            let name = self.fresh("$n");
            let value = match self.c.below(12) {
                0 => 0,
                1 => 300,
                // Enough work for the compiled program's loops to run on
                // several threads.
                11 => 40_000,
                v => v - 1,
            };
            self.ivars.push((name, value));
        }
        let count = 1 + self.c.below(3);
        let mut params = Vec::new();
        for k in 0..count {
            let elem = self.elem();
            let rank = if k < nvars {
                1 + self.c.below(2)
            } else {
                self.c.below(3)
            };
            let mut shape = Vec::new();
            for r in 0..rank {
                let d = if r == 0 && k < nvars {
                    let (n, v) = self.ivars[k].clone();
                    Dim::var(&n, v)
                } else if self.c.coin() {
                    let (n, v) = self.c.pick_ref(&self.ivars);
                    Dim::var(&n, v)
                } else {
                    Dim::lit(self.c.below(4))
                };
                let atoms: usize = shape.iter().map(|d: &Dim| d.value).product();
                if d.value * atoms > BIG {
                    shape.push(Dim::lit(1));
                } else {
                    shape.push(d);
                }
            }
            params.push((self.fresh("in"), Ty::new(elem, &shape)));
        }
        // Only the variables some parameter mentions are bound.
        let used: Vec<(String, usize)> = self
            .ivars
            .iter()
            .filter(|(n, _)| {
                params
                    .iter()
                    .any(|(_, t)| t.shape.iter().any(|d| d.vars.contains(n)))
            })
            .cloned()
            .collect();
        self.ivars = used;
        params
    }

    /// An input of type `ty` (its dimensions' values): a literal of plain
    /// atoms.
    fn input(&mut self, ty: &Ty) -> String {
        let shape: Vec<usize> = ty.shape.iter().map(|d| d.value).collect();
        let n: usize = shape.iter().product();
        if shape.is_empty() {
            return self.input_atom(ty.elem);
        }
        if n == 0 {
            let s: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
            return format!("(array [{}] {})", s.join(" "), elem_name(ty.elem));
        }
        let atoms: Vec<String> = (0..n).map(|_| self.input_atom(ty.elem)).collect();
        let s: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        format!("(array [{}] {})", s.join(" "), atoms.join(" "))
    }

    fn input_atom(&mut self, e: Elem) -> String {
        match e {
            Elem::Int => match self.c.below(16) {
                0 => self.c.pick(INTS).to_string(),
                v => (v as i64 - 8).to_string(),
            },
            Elem::Float => self.c.pick(&FLOATS[..13]).to_string(),
            Elem::Bool => self.c.pick(&["#t", "#f"]).to_string(),
        }
    }

    /// An index variable in scope, as a dimension, now and then.
    fn some_ivar(&mut self, one_in: usize) -> Option<Dim> {
        if self.ivars.is_empty() || self.c.below(one_in) != 0 {
            return None;
        }
        let (n, v) = self.c.pick_ref(&self.ivars);
        Some(Dim::var(&n, v))
    }

    /// A random type of rank at most `max_rank`: small dimensions, now
    /// and then 300 or an index variable in scope.
    fn ty(&mut self, max_rank: usize) -> Ty {
        let elem = self.elem();
        let rank = self.c.below(max_rank + 1);
        let mut shape: Vec<Dim> = Vec::new();
        for _ in 0..rank {
            let atoms: usize = shape.iter().map(|d| d.value).product();
            let d = match self.some_ivar(4) {
                Some(d) if d.value * atoms <= BIG => d,
                _ => {
                    let v = self.c.below(24);
                    Dim::lit(if v == 23 && atoms <= 4 { 300 } else { v % 6 })
                }
            };
            shape.push(d);
        }
        Ty { elem, shape }
    }

    /// A small type for a cell or a variable: rank 0 to 2, dimensions 0 to
    /// 3 or an index variable in scope.
    fn small_ty(&mut self) -> Ty {
        let elem = self.elem();
        let rank = self.c.below(3);
        let shape = (0..rank)
            .map(|_| match self.some_ivar(4) {
                Some(d) if d.value <= 5 => d,
                _ => Dim::lit(self.c.below(4)),
            })
            .collect();
        Ty { elem, shape }
    }

    /// A number of items for a reduction: `min` to `min + 4`, 300 when the
    /// cells are small, or an index variable (plus `min`).
    fn length(&mut self, cell: &Ty, min: usize) -> Dim {
        if let Some(d) = self.items_in_scope(cell, min) {
            return d;
        }
        let v = self.c.below(12);
        if v == 11 && cell.atoms() <= 4 {
            return Dim::lit(300);
        }
        if v == 10
            && let Some(d) = self.some_ivar(1)
            && d.value * cell.atoms() <= BIG
        {
            return d.add(&Dim::lit(min));
        }
        Dim::lit(min + v % 5)
    }

    /// Now and then, the number of items of a variable in scope whose
    /// items are `cell`s (at least `min`), so that it can be the array
    /// reduced, scanned or folded.
    fn items_in_scope(&mut self, cell: &Ty, min: usize) -> Option<Dim> {
        let found: Vec<Dim> = self
            .env
            .iter()
            .filter_map(|(_, t)| {
                let (first, rest) = t.shape.split_first()?;
                (t.elem == cell.elem && rest == cell.shape.as_slice() && first.konst >= min)
                    .then(|| first.clone())
            })
            .collect();
        if found.is_empty() || self.c.below(3) == 0 {
            return None;
        }
        Some(self.c.pick_ref(&found))
    }

    /// A type of a variable in scope, now and then (for its items, a
    /// whole reduction).
    fn type_in_scope(&mut self) -> Option<Ty> {
        if self.env.is_empty() || self.c.coin() {
            return None;
        }
        let (_, t) = self.c.pick_ref(&self.env);
        Some(t)
    }

    fn atom(&mut self, e: Elem) -> &'static str {
        match e {
            Elem::Int => self.c.pick(INTS),
            Elem::Float => self.c.pick(FLOATS),
            Elem::Bool => self.c.pick(&["#t", "#f"]),
        }
    }

    /// A literal of type `ty` (for a shape of index variables, made from
    /// `iota/static` or `replicate` at that shape).
    fn literal(&mut self, ty: &Ty) -> String {
        if ty.shape.is_empty() {
            return self.atom(ty.elem).to_string();
        }
        if !ty.is_static() && self.c.coin() {
            let atom = self.atom(ty.elem);
            return format!("((i-app replicate [{}]) {atom})", dims(&ty.shape));
        }
        if ty.is_static() && ty.atoms() == 0 {
            return format!("(array [{}] {})", dims(&ty.shape), elem_name(ty.elem));
        }
        if !ty.is_static() || ty.atoms() > 40 {
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
        let shape: Vec<usize> = ty.shape.iter().map(|d| d.value).collect();
        self.nested(ty.elem, &shape, &mut out);
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
    fn prefix(&mut self, shape: &[Dim]) -> Vec<Dim> {
        shape[..self.c.below(shape.len() + 1)].to_vec()
    }

    /// An expression of type `ty`, at most `depth` forms deep.
    fn expr(&mut self, ty: &Ty, depth: usize) -> String {
        if depth == 0 || self.c.exhausted() {
            return self.leaf(ty);
        }
        // A variable of the type, often: the inputs and the parameters
        // flow through.
        if self.env.iter().any(|(_, t)| t == ty) && self.c.below(4) == 0 {
            return self.leaf(ty);
        }
        let d = depth - 1;
        let rank = ty.shape.len();
        let e = ty.elem;
        let first = ty.shape.first().cloned();
        let rest = if rank > 0 {
            ty.shape[1..].to_vec()
        } else {
            Vec::new()
        };
        let cell = Ty::new(e, &rest);
        match self.c.below(62) {
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
            9 | 10 => self.function(ty, d, Kind::Lambda),
            11 => self.function(ty, d, Kind::Def),
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
                let item = match self.type_in_scope() {
                    Some(t) if !t.shape.is_empty() => Ty::new(t.elem, &t.shape[1..]),
                    _ => self.small_ty(),
                };
                let n = self.length(&item, 1);
                let (acc, x) = (self.fresh("acc"), self.fresh("x"));
                self.env.push((acc.clone(), ty.clone()));
                self.env.push((x.clone(), item.clone()));
                let body = self.expr(ty, d);
                self.env.truncate(self.env.len() - 2);
                let z = self.expr(ty, d);
                let xs = self.expr(&item.items(n), d);
                let (acc, x) = (
                    format!("({acc} {})", ty.syntax()),
                    format!("({x} {})", item.syntax()),
                );
                if self.c.coin() {
                    format!("(fold (fn ({acc} {x}) {body}) {z} {xs})")
                } else {
                    format!("(fold-right (fn ({x} {acc}) {body}) {z} {xs})")
                }
            }
            14 => match first {
                Some(n) if n.konst >= 1 => {
                    let op = self.operator(&cell, d);
                    let z = self.expr(&cell, d);
                    let xs = self.expr(&cell.items(n.less(1)), d);
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
                let k = first.unwrap_or(Dim::lit(0));
                let j = self.c.below(4);
                let xs = self.expr(&cell.items(k.add(&Dim::lit(j))), d);
                if self.c.coin() {
                    let f = self.c.pick(&["take", "take-right"]);
                    format!("((i-app {f} {}) {xs})", k.syntax())
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
                    let v = self.expr(&ty.items(Dim::lit(m)), d);
                    format!("(index {v} {i})")
                } else {
                    let v = self.expr(&ty.items(Dim::lit(m)), d);
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
                    format!("((i-app transpose [{}]) {xs})", dims(&lits(&perm)))
                }
            }
            21 if rank > 0 => {
                let n = first.unwrap_or(Dim::lit(0));
                let a = self.c.below(n.konst + 1);
                let x = self.expr(&cell.items(Dim::lit(a)), d);
                let y = self.expr(&cell.items(n.less(a)), d);
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
                // a count, or counts over a frame (each cell its own)
                let (n, frame) = if self.c.below(4) == 0 {
                    let frame = self.prefix(&ty.shape);
                    let counts = self.expr(&Ty::new(Elem::Int, &frame), d.min(2));
                    (format!("(mod {counts} 4)"), frame.len())
                } else {
                    (self.c.below(4).to_string(), 0)
                };
                let cell = Ty::new(e, &ty.shape[frame..]);
                let x = self.fresh("x");
                self.env.push((x.clone(), cell.clone()));
                let body = self.expr(&cell, d);
                self.env.pop();
                let start = self.expr(ty, d);
                format!("(iterate {n} (fn (({x} {})) {body}) {start})", cell.syntax())
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
                let m = first.unwrap_or(Dim::lit(0));
                let n = self.c.below(6);
                let idx = self.indices(m.value, n);
                let op = self.operator(&cell, d);
                let ne = self.expr(&cell, d);
                let xs = self.expr(&cell.items(Dim::lit(n)), d);
                format!("((i-app hist {}) {op} {ne} {idx} {xs})", m.syntax())
            }
            28 if rank > 0 => {
                let m = first.unwrap_or(Dim::lit(0));
                let n = self.c.below(6);
                let idx = self.indices(m.value, n);
                let dest = self.expr(ty, d);
                let src = self.expr(&cell.items(Dim::lit(n)), d);
                format!("(scatter {dest} {idx} {src})")
            }
            29 if rank == 0 => self.whole(ty, d),
            30 if rank >= 2 && ty.shape[0].konst >= 1 => {
                // windows of width ty.shape[1]
                let w = ty.shape[1].clone();
                let xs = self.expr(&Ty::new(e, &ty.shape[2..]).items(w.add(&ty.shape[0].less(1))), d);
                format!("((i-app windows {}) {xs})", w.syntax())
            }
            31 if rank > 0 && ty.is_static() => {
                // reshape from another shape of as many atoms
                let n = ty.atoms();
                let from = match self.c.below(3) {
                    0 if n.is_multiple_of(2) && n > 0 => vec![2, n / 2],
                    1 => ty.shape.iter().rev().map(|d| d.value).collect(),
                    _ => vec![n],
                };
                let xs = self.expr(&Ty::new(e, &lits(&from)), d);
                format!("(@reshape _ (_ [{}]) {xs})", dims(&ty.shape))
            }
            32 | 33 => self.unboxed(ty, d),
            34 => self.record_field(ty, d),
            35 => self.record_loop(ty, d),
            36 if rank > 0 => {
                // a gather: items of a vector at computed indices (`mod`)
                let frame = ty.shape[..1 + self.c.below(rank)].to_vec();
                let cell = Ty::new(e, &ty.shape[frame.len()..]);
                // (m differs from the frame's first dimension: else each
                // index pairs with an item, the frame's inference, docs/prelude.md.)
                let mut m = 1 + self.c.below(5);
                if frame[0] == Dim::lit(m) {
                    m += 1;
                }
                let v = self.expr(&cell.items(Dim::lit(m)), d);
                let i = self.expr(&Ty::new(Elem::Int, &frame), d);
                format!("(nth {v} (mod {i} {m}))")
            }
            37 if e == Elem::Int && rank == 0 && !self.ivars.is_empty() => {
                let (n, _) = self.c.pick_ref(&self.ivars);
                format!("(i-app reify-dim {n})")
            }
            38 if e == Elem::Int && rank == 0 => {
                let item = self.small_ty();
                let n = self.length(&item, 0);
                let xs = self.expr(&item.items(n), d);
                format!("(length {xs})")
            }
            39 | 40 => self.function(ty, d, Kind::Generic),
            41 => self.function(ty, d, Kind::AnyAtom),
            42 if rank > 0 && e == Elem::Int => {
                // the permutation that sorts each vector cell
                let el = self.c.pick(&[Elem::Int, Elem::Float]);
                let xs = self.expr(&Ty::new(el, &ty.shape), d);
                let f = if el == Elem::Int { "grade" } else { "f.grade" };
                format!("({f} {xs})")
            }
            43 => {
                // an item: the first or the last
                let n = self.length(ty, 1);
                let xs = self.expr(&ty.items(n), d);
                let f = self.c.pick(&["head", "last"]);
                format!("({f} {xs})")
            }
            44 if rank > 0 => {
                let n = first.unwrap_or(Dim::lit(0));
                let xs = self.expr(&cell.items(n.add(&Dim::lit(1))), d);
                let f = self.c.pick(&["tail", "curtail"]);
                format!("({f} {xs})")
            }
            45 if e == Elem::Int => self.of_vectors(ty, d),
            46 if e == Elem::Float => self.of_vectors(ty, d),
            47 if rank >= 2 && e != Elem::Bool => {
                // a product of matrices (lifted over a frame)
                let (m, n) = (ty.shape[rank - 2].clone(), ty.shape[rank - 1].clone());
                let k = self.length(&Ty::scalar(e), 0);
                let frame = &ty.shape[..rank - 2];
                let mut a = frame.to_vec();
                a.extend([m, k.clone()]);
                let mut b = self.prefix(frame);
                b.extend([k, n]);
                let a = self.expr(&Ty::new(e, &a), d);
                let b = self.expr(&Ty::new(e, &b), d);
                let f = if e == Elem::Int { "matmul" } else { "f.matmul" };
                format!("({f} {a} {b})")
            }
            48 if rank > 0 && ty.shape[0].is_static() => {
                // flatten of two axes whose product is the first
                let c = ty.shape[0].konst;
                let (m, n) = match c {
                    0 => {
                        let k = self.c.below(4);
                        if self.c.coin() { (0, k) } else { (k, 0) }
                    }
                    _ => {
                        let m = self.c.pick(&[1, 2, 3, c]);
                        if c.is_multiple_of(m) { (m, c / m) } else { (1, c) }
                    }
                };
                let mut shape = lits(&[m, n]);
                shape.extend(rest.iter().cloned());
                let xs = self.expr(&Ty::new(e, &shape), d);
                format!("(flatten {xs})")
            }
            49 if rank == 0 => {
                let (m, n) = (1 + self.c.below(4), 1 + self.c.below(4));
                let xs = self.expr(&Ty::new(e, &lits(&[m, n])), d);
                let (i, j) = (self.index(m, d), self.index(n, d));
                format!("(index2d {xs} [{i} {j}])")
            }
            50 if rank > 0 => self.sorted_by(ty, d),
            51..=55 => self.rows(ty, d),
            56..=61 => self.cells(ty, d),
            _ => self.prim(ty, d),
        }
    }

    /// A scalar of `ty`'s atom type from each vector cell of an array of
    /// `ty`'s shape and one more axis: `argmax`, `argmin` (Int), `dot`
    /// (of two such arrays, the second's frame a prefix of the first's).
    fn of_vectors(&mut self, ty: &Ty, d: usize) -> String {
        let dot = ty.elem == Elem::Float || self.c.coin();
        let el = if dot {
            ty.elem
        } else {
            self.c.pick(&[Elem::Int, Elem::Float])
        };
        // (An empty vector has no greatest item: mostly one or more.)
        let min = usize::from(self.c.below(8) != 0);
        let n = self.length(&Ty::scalar(el), min);
        let mut shape = ty.shape.clone();
        shape.push(n.clone());
        let xs = self.expr(&Ty::new(el, &shape), d);
        if dot {
            let mut other = self.prefix(&ty.shape);
            other.push(n);
            let ys = self.expr(&Ty::new(el, &other), d);
            let f = if el == Elem::Int { "dot" } else { "f.dot" };
            return format!("({f} {xs} {ys})");
        }
        let f = match (el, self.c.coin()) {
            (Elem::Int, true) => "argmax",
            (Elem::Int, false) => "argmin",
            (_, true) => "f.argmax",
            (_, false) => "f.argmin",
        };
        format!("({f} {xs})")
    }

    /// `sort-by` of items of `ty` (or `grade-by`, for a vector of Ints) by
    /// a less-than that is a strict weak order: `<` or `>` of an Int key
    /// of each item, computed by a `def` (or the item itself).
    fn sorted_by(&mut self, ty: &Ty, d: usize) -> String {
        let grade = ty.elem == Elem::Int && ty.shape.len() == 1 && self.c.coin();
        let n = ty.shape[0].clone();
        let cell = if grade {
            self.small_ty()
        } else {
            Ty::new(ty.elem, &ty.shape[1..])
        };
        let order = self.c.pick(&["<", ">"]);
        let less = if cell == Ty::scalar(Elem::Int) && self.c.coin() {
            order.to_string()
        } else if cell.is_static() {
            let key = self.def(Kind::Def, vec![cell.clone()], Ty::scalar(Elem::Int), &[], d);
            let (a, b) = (self.fresh("a"), self.fresh("b"));
            let t = cell.syntax();
            format!(
                "(fn (({a} {t}) ({b} {t})) ({order} ({k} {a}) ({k} {b})))",
                k = key.name
            )
        } else {
            return self.prim(ty, d);
        };
        let xs = self.expr(&cell.items(n), d);
        let f = if grade { "grade-by" } else { "sort-by" };
        format!("({f} {less} {xs})")
    }

    /// A scalar primitive of result atom type `ty.elem`, lifted: each
    /// argument's frame is a prefix of `ty`'s shape, one of them all of it.
    fn prim(&mut self, ty: &Ty, d: usize) -> String {
        self.prim_with(ty, |g, arg| g.expr(arg, d))
    }

    /// [`Gen::prim`] with each argument of type `arg` made by `make`.
    fn prim_with(&mut self, ty: &Ty, mut make: impl FnMut(&mut Self, &Ty) -> String) -> String {
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
            let arg = make(self, &Ty::new(*a, &frame));
            out.push_str(&arg);
        }
        out.push(')');
        out
    }

    /// A whole-array reduction to a scalar: `sum`, `f.sum`, `any`…
    fn whole(&mut self, ty: &Ty, d: usize) -> String {
        let mut arg = match self.type_in_scope() {
            Some(t) => t,
            None => self.ty(2),
        };
        if self.c.below(3) == 0 {
            arg.shape = vec![Dim::lit(300)];
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
                let v = self.c.below(m.min(250) + 2) as i64 - 1;
                v.to_string()
            })
            .collect();
        format!("[{}]", items.join(" "))
    }

    /// A box of a size known only at run time, unboxed, its payload used:
    /// the items a mask keeps (`filter`), or `range` of a computed count.
    fn unboxed(&mut self, ty: &Ty, d: usize) -> String {
        let k = self.fresh("$k");
        let v = self.fresh("v");
        let (boxed, payload, guess) = if self.c.below(3) == 0 {
            // take* or drop* of a count in range
            let cell = self.small_ty();
            let n = self.length(&cell, 0);
            let count = self.expr(&Ty::scalar(Elem::Int), d.min(2));
            let xs = self.expr(&cell.items(n.clone()), d);
            let bound = if n.is_static() {
                (n.konst + 1).to_string()
            } else {
                format!("(+ 1 (i-app reify-dim {}))", n.syntax())
            };
            let f = self.c.pick(&["take*", "drop*"]);
            let payload = cell.items(Dim::var(&k, n.value / 2));
            (format!("({f} (mod {count} {bound}) {xs})"), payload, n.value / 2)
        } else if self.c.coin() {
            let cell = self.small_ty();
            let n = self.length(&cell, 0);
            let mask = self.expr(&Ty::new(Elem::Bool, std::slice::from_ref(&n)), d);
            let xs = self.expr(&cell.items(n.clone()), d);
            let payload = Ty::new(cell.elem, &cell.shape).items(Dim::var(&k, n.value / 2));
            (format!("(filter {mask} {xs})"), payload, n.value / 2)
        } else {
            let count = self.expr(&Ty::scalar(Elem::Int), d.min(2));
            let m = self.c.pick(&[4, 7, 300]);
            let payload = Ty::scalar(Elem::Int).items(Dim::var(&k, 3));
            (format!("(range (mod {count} {m}))"), payload, 3)
        };
        self.ivars.push((k.clone(), guess));
        self.env.push((v.clone(), payload));
        let body = self.expr(ty, d);
        self.env.pop();
        self.ivars.pop();
        format!("(unbox ({k} {v} {boxed}) {body})")
    }

    /// A field of a record built here: `(field {(a [..] e) (b [..] e')} a)`,
    /// the other field's frame a prefix of this one's (lifted).
    fn record_field(&mut self, ty: &Ty, d: usize) -> String {
        let frame = self.prefix(&ty.shape);
        let cell = Ty::new(ty.elem, &ty.shape[frame.len()..]);
        let a = self.expr(ty, d);
        let other = self.small_ty();
        let mut other_shape = self.prefix(&frame);
        other_shape.extend(other.shape.iter().cloned());
        let b = self.expr(&Ty::new(other.elem, &other_shape), d);
        let (fa, fb) = (self.fresh("a"), self.fresh("b"));
        let fields = [
            format!("({fa} [{}] {a})", dims(&cell.shape)),
            format!("({fb} [{}] {b})", dims(&other.shape)),
        ];
        let record = if self.c.coin() {
            format!("{{{} {}}}", fields[0], fields[1])
        } else {
            format!("{{{} {}}}", fields[1], fields[0])
        };
        if self.c.coin() {
            let r = self.fresh("r");
            format!("(let ((val {r} {record})) (field {r} {fa}))")
        } else {
            format!("(field {record} {fa})")
        }
    }

    /// A record carried through a loop, each step building it anew from
    /// its fields (updated or kept), one field read at the end: `iterate`;
    /// `while` its second field, a count, is below a bound (one more each
    /// step); or `fold` over items, each step seeing one.
    fn record_loop(&mut self, ty: &Ty, d: usize) -> String {
        let kind = self.c.below(3);
        let other = if kind == 1 {
            Ty::scalar(Elem::Int)
        } else {
            self.small_ty()
        };
        let (s, fa, fb) = (self.fresh("s"), self.fresh("a"), self.fresh("b"));
        let record_ty = format!("{{({fa} {}) ({fb} {})}}", ty.syntax(), other.syntax());
        let read_a = format!("(field {s} {fa})");
        let read_b = format!("(field {s} {fb})");
        // fold's items
        let item = (kind == 2).then(|| (self.fresh("x"), self.small_ty()));
        self.env.push((read_a.clone(), ty.clone()));
        self.env.push((read_b.clone(), other.clone()));
        if let Some((x, t)) = &item {
            self.env.push((x.clone(), t.clone()));
        }
        let step_a = self.expr(ty, d);
        let step_b = if kind == 1 {
            format!("(+ {read_b} 1)")
        } else if self.c.coin() {
            read_b.clone()
        } else {
            self.expr(&other, d)
        };
        self.env
            .truncate(self.env.len() - 2 - usize::from(item.is_some()));
        let start_a = self.expr(ty, d);
        let start_b = if kind == 1 {
            self.c.pick(&["0", "-2", "5"]).to_string()
        } else {
            self.expr(&other, d)
        };
        let build = |a: &str, b: &str| {
            format!(
                "{{({fa} [{}] {a}) ({fb} [{}] {b})}}",
                dims(&ty.shape),
                dims(&other.shape)
            )
        };
        let (step, start) = (build(&step_a, &step_b), build(&start_a, &start_b));
        let looped = match item {
            None if kind == 1 => {
                let bound = self.c.below(5);
                format!(
                    "(while (fn (({s} {record_ty})) (< {read_b} {bound})) (fn (({s} {record_ty})) {step}) {start})"
                )
            }
            None => {
                let n = self.c.below(4);
                format!("(iterate {n} (fn (({s} {record_ty})) {step}) {start})")
            }
            Some((x, t)) => {
                let n = self.length(&t, 1);
                let xs = self.expr(&t.items(n), d);
                format!(
                    "(fold (fn (({s} {record_ty}) ({x} {})) {step}) {start} {xs})",
                    t.syntax()
                )
            }
        };
        format!("(field {looped} {fa})")
    }

    /// A function applied over a frame: a lambda; a `def` at the top; a
    /// `def` generic in its parameter's dimensions (each an index variable,
    /// declared or generalised), called with or without its instantiation;
    /// or one generic in its atom type too (`&t`), whose body only moves
    /// atoms.
    fn function(&mut self, ty: &Ty, d: usize, kind: Kind) -> String {
        if kind != Kind::Lambda && !self.sigs.is_empty() && self.c.coin() {
            let sig = self.c.pick_ref(&self.sigs);
            if let Some(call) = self.reuse(&sig, ty, d) {
                return call;
            }
        }
        let frame_len = self.c.below(ty.shape.len() + 1);
        let frame = ty.shape[..frame_len].to_vec();
        let result = Ty::new(ty.elem, &ty.shape[frame_len..]);
        let count = if kind == Kind::AnyAtom {
            1
        } else {
            1 + self.c.below(2)
        };
        let mut params = Vec::new();
        let mut arg_shapes = Vec::new();
        for k in 0..count {
            let param = match kind {
                Kind::AnyAtom => result.clone(),
                _ if self.c.coin() => Ty::new(self.elem(), &result.shape),
                _ => self.small_ty(),
            };
            // The first argument has the whole frame, the others a prefix.
            let mut arg_shape = if k == 0 {
                frame.clone()
            } else {
                self.prefix(&frame)
            };
            arg_shape.extend(param.shape.iter().cloned());
            arg_shapes.push(arg_shape);
            params.push(param);
        }
        let arg_elems: Vec<Elem> = params.iter().map(|p| p.elem).collect();
        // A def's parameters and result: its own index variables for the
        // parameters' dimensions (every one of the caller's, some numbers).
        let mut generic: Vec<(Dim, Dim)> = Vec::new();
        if kind != Kind::Lambda {
            for dim in params.iter().flat_map(|p| &p.shape) {
                if generic.iter().any(|(from, _)| from == dim) {
                    continue;
                }
                if !dim.is_static() || kind != Kind::Def && self.c.coin() {
                    let v = self.fresh("$i");
                    generic.push((dim.clone(), Dim::var(&v, dim.value)));
                }
            }
            let local = |t: &Ty| {
                let shape: Vec<Dim> = t
                    .shape
                    .iter()
                    .map(|dim| {
                        generic
                            .iter()
                            .find(|(from, _)| from == dim)
                            .map_or(dim.clone(), |(_, to)| to.clone())
                    })
                    .collect();
                Ty::new(t.elem, &shape)
            };
            let ps: Vec<Ty> = params.iter().map(local).collect();
            let r = local(&result);
            // A result of the caller's index variables the parameters do
            // not show: only a lambda can have it.
            let own = |dim: &Dim| dim.is_static() || generic.iter().any(|(_, to)| to == dim);
            if ps.iter().all(|p| p.shape.iter().all(own)) && r.shape.iter().all(own) {
                let sig = self.def(kind, ps, r, &generic, d);
                let at: Vec<Dim> = generic.iter().map(|(from, _)| from.clone()).collect();
                return self.call(&sig, &at, &arg_shapes, &arg_elems, d);
            }
        }
        let mut xs = Vec::new();
        for p in &params {
            let x = self.fresh("x");
            xs.push(format!("({x} {})", p.syntax()));
            self.env.push((x, p.clone()));
        }
        let body = self.expr(&result, d);
        self.env.truncate(self.env.len() - params.len());
        let args = self.arguments(&arg_shapes, &arg_elems, d);
        format!("((fn ({}) {body}) {args})", xs.join(" "))
    }

    /// Arguments of these shapes and atom types, written one after another.
    fn arguments(&mut self, shapes: &[Vec<Dim>], elems: &[Elem], d: usize) -> String {
        let args: Vec<String> = shapes
            .iter()
            .zip(elems)
            .map(|(s, e)| self.expr(&Ty::new(*e, s), d))
            .collect();
        args.join(" ")
    }

    /// A `def` of parameters `params` and result `result` (in its own index
    /// variables, `generic`'s), written at the top: its signature.
    fn def(
        &mut self,
        kind: Kind,
        params: Vec<Ty>,
        result: Ty,
        generic: &[(Dim, Dim)],
        d: usize,
    ) -> Signature {
        let f = self.fresh("f");
        let xs: Vec<String> = params.iter().map(|_| self.fresh("x")).collect();
        let outer_env = std::mem::take(&mut self.env);
        let outer_ivars = std::mem::replace(
            &mut self.ivars,
            generic.iter().map(|(_, to)| (to.syntax(), to.value)).collect(),
        );
        let body = if kind == Kind::AnyAtom {
            self.moves(&xs[0], &params[0], d)
        } else {
            for (x, p) in xs.iter().zip(&params) {
                self.env.push((x.clone(), p.clone()));
            }
            self.expr(&result, d)
        };
        self.env = outer_env;
        self.ivars = outer_ivars;
        let binders: Vec<String> = generic.iter().map(|(_, to)| to.syntax()).collect();
        let declared = kind == Kind::AnyAtom || !binders.is_empty() && self.c.coin();
        let returns = if self.c.coin() && kind != Kind::AnyAtom {
            format!(" : {}", result.syntax())
        } else {
            String::new()
        };
        let patterns: Vec<String> = xs
            .iter()
            .zip(&params)
            .map(|(x, p)| {
                if kind == Kind::AnyAtom {
                    let shown = p.syntax();
                    let rest = shown
                        .strip_prefix(&format!("[{} ", elem_name(p.elem)))
                        .map_or(String::new(), |r| format!(" {}", r.trim_end_matches(']')));
                    format!("({x} [&t{rest}])")
                } else {
                    format!("({x} {})", p.syntax())
                }
            })
            .collect();
        let head = if declared {
            let types = if kind == Kind::AnyAtom { "(&t)" } else { "_" };
            let indices = if binders.is_empty() {
                "_".to_string()
            } else {
                format!("({})", binders.join(" "))
            };
            format!("@{f} {types} {indices}")
        } else {
            f.clone()
        };
        self.defs.push(format!(
            "(def (fun ({head} {}{returns}) {body}))",
            patterns.join(" ")
        ));
        let sig = Signature {
            name: f,
            kind,
            params,
            result,
            binders,
            declared,
        };
        self.sigs.push(sig.clone());
        sig
    }

    /// A call of a `def` at the index arguments `at`, on arguments of
    /// shapes `arg_shapes` (a frame, then the parameter's shape at `at`).
    fn call(
        &mut self,
        sig: &Signature,
        at: &[Dim],
        arg_shapes: &[Vec<Dim>],
        arg_elems: &[Elem],
        d: usize,
    ) -> String {
        let f = &sig.name;
        let args = self.arguments(arg_shapes, arg_elems, d);
        // Explicitly instantiated where the binders' order is known.
        if (sig.declared || sig.binders.len() == 1) && self.c.coin() {
            let types = if sig.kind == Kind::AnyAtom {
                format!("({})", elem_name(arg_elems[0]))
            } else {
                "_".into()
            };
            let at: Vec<String> = at.iter().map(Dim::syntax).collect();
            if sig.declared {
                let indices = if at.is_empty() {
                    "_".to_string()
                } else {
                    format!("({})", at.join(" "))
                };
                return format!("(@{f} {types} {indices} {args})");
            }
            return format!("((i-app {f} {}) {args})", at.join(" "));
        }
        format!("({f} {args})")
    }

    /// A `def` written before called again, where its result fits `ty`
    /// (after a frame): its index variables the result shows are read off
    /// `ty`, the others chosen.
    fn reuse(&mut self, sig: &Signature, ty: &Ty, d: usize) -> Option<String> {
        if sig.kind != Kind::AnyAtom && sig.result.elem != ty.elem {
            return None;
        }
        let frame_len = ty.shape.len().checked_sub(sig.result.shape.len())?;
        let mut at: Vec<Option<Dim>> = vec![None; sig.binders.len()];
        for (r, c) in sig.result.shape.iter().zip(&ty.shape[frame_len..]) {
            if r.is_static() {
                if r != c {
                    return None;
                }
                continue;
            }
            let [v] = r.vars.as_slice() else {
                return None;
            };
            let i = sig.binders.iter().position(|b| b == v)?;
            if r.konst != 0 || at[i].as_ref().is_some_and(|a| a != c) {
                return None;
            }
            at[i] = Some(c.clone());
        }
        let at: Vec<Dim> = at
            .into_iter()
            .map(|a| match a {
                Some(a) => a,
                None => match self.some_ivar(3) {
                    Some(v) if v.value <= 5 => v,
                    _ => Dim::lit(self.c.below(4)),
                },
            })
            .collect();
        let frame = &ty.shape[..frame_len];
        let mut arg_shapes = Vec::new();
        for (k, p) in sig.params.iter().enumerate() {
            let mut shape = if k == 0 {
                frame.to_vec()
            } else {
                self.prefix(frame)
            };
            for dim in &p.shape {
                let mut sum = Dim::lit(dim.konst);
                for v in &dim.vars {
                    let i = sig.binders.iter().position(|b| b == v)?;
                    sum = sum.add(&at[i]);
                }
                shape.push(sum);
            }
            arg_shapes.push(shape);
        }
        let arg_elems: Vec<Elem> = if sig.kind == Kind::AnyAtom {
            vec![ty.elem]
        } else {
            sig.params.iter().map(|p| p.elem).collect()
        };
        Some(self.call(sig, &at, &arg_shapes, &arg_elems, d))
    }

    /// A body that only moves the atoms of `x` (of any atom type) into a
    /// value of its type: reversed, rotated, selected, kept.
    fn moves(&mut self, x: &str, t: &Ty, d: usize) -> String {
        if d == 0 {
            return x.to_string();
        }
        let inner = self.moves(x, t, d - 1);
        match self.c.below(6) {
            0 if !t.shape.is_empty() => format!("(reverse {inner})"),
            1 if !t.shape.is_empty() => {
                let n = self.expr(&Ty::scalar(Elem::Int), 1);
                format!("(rotate {inner} {n})")
            }
            2 => {
                let c = self.expr(&Ty::scalar(Elem::Bool), 1);
                let other = self.moves(x, t, d - 1);
                format!("(if {c} {inner} {other})")
            }
            3 => {
                let frame = self.prefix(&t.shape);
                let c = self.expr(&Ty::new(Elem::Bool, &frame), 1);
                let other = self.moves(x, t, d - 1);
                format!("(select {c} {inner} {other})")
            }
            4 if t.shape.len() >= 2 && t.shape[0] == t.shape[1] => format!("(transpose2d {inner})"),
            _ => inner,
        }
    }
}

/// A `def` written: its name, parameters' and result types (in its index
/// variables, `binders`), and whether it declares them (`@f _ ($i …)`).
#[derive(Clone, Debug)]
struct Signature {
    name: String,
    kind: Kind,
    params: Vec<Ty>,
    result: Ty,
    binders: Vec<String>,
    declared: bool,
}

/// What [`Gen::function`] makes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// `((fn ((x T)) body) arg)`.
    Lambda,
    /// A `def` of numbers in its parameter's type (and index variables for
    /// the caller's).
    Def,
    /// A `def` of index variables for some of its dimensions.
    Generic,
    /// A `def` generic in its atom type (`&t`) and some dimensions.
    AnyAtom,
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

/// The program checked, run on the interpreter (with a budget) and
/// compiled (quickly, `-O1`), its entry on its inputs: do the engines
/// agree? Call it on a thread with the pipeline's stack
/// (`remora_syntax::stack::PIPELINE_STACK`).
pub fn compare(program: &Program) -> Verdict {
    compare_within(program, FUEL)
}

/// [`compare`], the interpreter given `fuel` steps: every value the
/// program prints (its entry's, or each bare expression's) must be
/// printed the same by both engines.
pub fn compare_within(program: &Program, fuel: u64) -> Verdict {
    let Some(run) = Prepared::new(program) else {
        return Verdict::Rejected;
    };
    let interpreted = run.interpreted(fuel, false);
    if let Err(m) = &interpreted
        && (m.contains("budget") || m.contains("too large"))
    {
        return Verdict::OverBudget;
    }
    let compiled = crate::native::run_with(&run.checked.value, &run.checked.names, "main", &run.inputs, true);
    match (compiled, interpreted) {
        (Err(ref f), _) if let Some(why) = f.broken() => {
            Verdict::Disagreed(format!("the compiled engine broke: {why}"))
        }
        (Err(crate::native::Failure::Unsupported(_, why)), _) => Verdict::Unsupported(why),
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

/// The program on the interpreter twice, its entry on its inputs:
/// applications over frames batched, and on the reference path alone
/// (cell by cell): both must print the same values, or fail with the same
/// message (unless a budget ran out: batching spends it otherwise).
/// [`Verdict::Unsupported`] is not given.
pub fn compare_with_reference(program: &Program) -> Verdict {
    let Some(run) = Prepared::new(program) else {
        return Verdict::Rejected;
    };
    let over = |r: &Result<Vec<String>, String>| matches!(r, Err(m) if m.contains("budget") || m.contains("too large"));
    let batched = run.interpreted(FUEL, false);
    let reference = run.interpreted(FUEL, true);
    if over(&batched) || over(&reference) {
        Verdict::OverBudget
    } else if batched == reference {
        Verdict::Agreed
    } else {
        Verdict::Disagreed(format!("batched: {batched:?}\nreference: {reference:?}"))
    }
}

/// A generated program checked, and its inputs: checked expressions for
/// the interpreter, their values for the compiled program.
struct Prepared {
    checked: remora_check::Checked<Vec<remora_check::typed::TDecl>>,
    typed: Vec<remora_check::typed::TExpr>,
    inputs: Vec<remora_value::Array>,
}

impl Prepared {
    fn new(program: &Program) -> Option<Prepared> {
        let mut sources = SourceMap::new();
        let loaded = load_program_text(&mut sources, &RealFs, "<generated>", None, &program.text);
        if loaded.has_errors() {
            return None;
        }
        let checked = remora_check::check_program(&loaded.value);
        if checked.has_errors() {
            return None;
        }
        remora_interp::Interpreter::limit_atoms(ATOMS);
        let mut typed = Vec::new();
        for text in &program.inputs {
            let loaded =
                remora_syntax::parse_expression(&mut sources, "<arg>", text, remora_syntax::Dialect::Source);
            let c = remora_check::check_expression(&loaded.value);
            match c.value {
                Some(t) if c.diagnostics.is_empty() && !loaded.has_errors() => typed.push(t),
                _ => return None,
            }
        }
        let mut inputs = Vec::new();
        for t in &typed {
            let mut interp = remora_interp::Interpreter::default();
            inputs.push(
                interp
                    .eval(t, &Default::default())
                    .ok()
                    .and_then(crate::native::base)?,
            );
        }
        Some(Prepared {
            checked,
            typed,
            inputs,
        })
    }

    /// What the interpreter prints, given `fuel` steps (batched, or on
    /// the reference path alone), or its error's position and message.
    fn interpreted(&self, fuel: u64, reference_only: bool) -> Result<Vec<String>, String> {
        let mut interp = remora_interp::Interpreter::default();
        interp.fuel = Some(fuel);
        interp.reference_only = reference_only;
        let names = &self.checked.names;
        let show = |t: &remora_types::Type| t.show_grouped(names);
        let var_name =
            |v: remora_check::typed::VarId| names.vars.get(v.0 as usize).cloned().unwrap_or_default();
        match remora_interp::program::run(
            &mut interp,
            &self.checked.value,
            "main",
            self.typed
                .iter()
                .map(remora_interp::program::EntryArg::Expr)
                .collect(),
            &show,
            &var_name,
        ) {
            Ok(remora_interp::program::Outcome::Entry(v)) => Ok(printed(std::slice::from_ref(&v))),
            Ok(remora_interp::program::Outcome::Script(vs)) => Ok(printed(&vs)),
            // (With its position: the batched path must report the
            // error where the reference meets it.)
            Err(remora_interp::program::Failure::Run(e)) => {
                Err(format!("{}..{}: {}", e.span.start, e.span.end, e.message))
            }
            Err(remora_interp::program::Failure::Plain(m)) => Err(m),
        }
    }
}

/// Each value as the engines print it.
fn printed<F: remora_value::Callable + Clone>(values: &[remora_value::Array<F>]) -> Vec<String> {
    values.iter().map(remora_value::print::to_string).collect()
}

/// The seeds a seeded run takes: `FROM..TO` from the environment variable
/// `var` (a longer run, or disjoint ranges in several processes), else
/// `default`.
pub fn seed_range(var: &str, default: std::ops::Range<u64>) -> std::ops::Range<u64> {
    std::env::var(var)
        .ok()
        .and_then(|v| {
            let (from, to) = v.split_once("..")?;
            Some(from.trim().parse().ok()?..to.trim().parse().ok()?)
        })
        .unwrap_or(default)
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

/// The verdicts of a seeded run of generated programs, counted: what the
/// differential tests report and assert on.
#[derive(Debug, Default)]
pub struct Tally {
    /// Programs the checker rejected (the generator's misses).
    pub rejected: usize,
    /// Programs over the interpreter's budget.
    pub over_budget: usize,
    /// Programs the compiled engine cannot compile (yet).
    pub unsupported: usize,
    /// Programs both engines agreed on.
    pub agreed: usize,
    /// Why programs did not compile, and how many.
    pub reasons: std::collections::BTreeMap<String, usize>,
    /// Each disagreement: its seed, its program and how.
    pub disagreements: Vec<String>,
}

impl Tally {
    /// Counts the verdict on the program `text` of `seed`.
    /// `REMORA_SHOW_REJECTED` and `REMORA_SHOW_DISAGREEMENTS` print those
    /// programs as they come (a long run killed at its time limit still
    /// reports).
    pub fn count(&mut self, seed: u64, text: &str, verdict: Verdict) {
        match verdict {
            Verdict::Rejected => {
                self.rejected += 1;
                if std::env::var_os("REMORA_SHOW_REJECTED").is_some() {
                    eprintln!(";; rejected, seed {seed}\n{text}");
                }
            }
            Verdict::OverBudget => self.over_budget += 1,
            Verdict::Unsupported(why) => {
                self.unsupported += 1;
                *self.reasons.entry(why).or_default() += 1;
            }
            Verdict::Agreed => self.agreed += 1,
            Verdict::Disagreed(how) => {
                let found = format!("seed {seed}:\n{text}{how}");
                if std::env::var_os("REMORA_SHOW_DISAGREEMENTS").is_some() {
                    eprintln!(";; disagreement, {found}");
                }
                self.disagreements.push(found);
            }
        }
    }

    /// Prints the commonest reasons programs did not compile, then the
    /// counts of `runs` runs (`what`: "programs", "cases").
    pub fn report(&self, runs: u64, what: &str) {
        let mut reasons: Vec<_> = self.reasons.iter().collect();
        reasons.sort_by_key(|r| std::cmp::Reverse(*r.1));
        for (why, n) in reasons.iter().take(12) {
            eprintln!("  {n:4}  not compiled: {why}");
        }
        eprintln!(
            "{runs} {what}: {} rejected by the checker, {} over the interpreter's budget, \
             {} not compiled, {} compiled and agreed, {} disagreed",
            self.rejected,
            self.over_budget,
            self.unsupported,
            self.agreed,
            self.disagreements.len()
        );
    }
}

/// Runs `work` on a thread with the pipeline's stack
/// (`remora_syntax::stack::PIPELINE_STACK`), as [`compare`] needs; `None`
/// when no such thread can be made. A panic in `work` goes on in the
/// caller.
pub fn on_pipeline_stack<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let handle = std::thread::Builder::new()
        .stack_size(remora_syntax::stack::PIPELINE_STACK)
        .spawn(work)
        .ok()?;
    match handle.join() {
        Ok(r) => Some(r),
        Err(e) => std::panic::resume_unwind(e),
    }
}

//! The loop level: nested loops over index spaces, explicit buffers, and
//! scalar code — what the C backend ([`crate::c`]) writes out line by line.
//!
//! ```text
//! (input xs.0 Float [n.1])                 ; an entry's argument, its extents
//! (alloc out.3 Float n.1)                  ; a buffer of n.1 atoms
//! (for i.4 n.1 parallel                    ; i.4 = 0 … n.1-1, split over threads
//!   (store out.3 i.4 (f.* (load xs.0 i.4) (load xs.0 i.4))))
//! (output out.3 Float [n.1])
//! ```
//!
//! * Variables are numbered; each is a scalar (`Int`, `Float`, `Bool`) or
//!   a buffer of one element type. A scalar is declared once (`let`) and
//!   may be assigned later (`set`), as an accumulator is.
//! * Buffers are flat: every index is an `Int` expression in atoms, the
//!   layout (offsets and strides) already worked out by the pass that made
//!   this level ([`crate::allocate`]).
//! * A `reduce` statement combines `count` items in the order the
//!   interpreter uses (left to right, or its fixed tree over more than 256
//!   items), each item computed by the statement's body: a fused map into a
//!   reduction allocates nothing.
//! * A scalar operation that can fail (an Int division by zero) stops the
//!   program with a run-time error; so does an allocation too large.
//!
//! [`verify`] checks that every variable is declared before it is used,
//! with one element type, and that buffers and scalars are not mixed.

use std::collections::HashMap;

/// A variable of this level: a scalar or a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Var(pub u32);

/// The type of a scalar, or of a buffer's atoms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Elem {
    Int,
    Float,
    Bool,
}

impl Elem {
    pub fn name(self) -> &'static str {
        match self {
            Elem::Int => "Int",
            Elem::Float => "Float",
            Elem::Bool => "Bool",
        }
    }
}

/// A scalar expression: no effects but a run-time error.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Int(i64),
    Float(f32),
    Bool(bool),
    Var(Var),
    /// The atom of `buf` at `index`.
    Load {
        buf: Var,
        index: Box<Expr>,
    },
    /// A scalar primitive of the language (`+`, `f.sqrt`, `i->f` …) by its
    /// name, on operands of its types.
    Op {
        op: &'static str,
        args: Vec<Expr>,
    },
    /// The address of `buf`'s atom at `index` (an argument of a runtime
    /// call: a buffer from there on).
    Addr {
        buf: Var,
        index: Box<Expr>,
    },
}

impl Expr {
    pub fn op(op: &'static str, args: Vec<Expr>) -> Expr {
        Expr::Op { op, args }
    }

    pub fn load(buf: Var, index: Expr) -> Expr {
        Expr::Load {
            buf,
            index: Box::new(index),
        }
    }

    /// `a + b` on Int, folding constants (index arithmetic).
    #[allow(clippy::should_implement_trait)] // two operands, not `self`: folds constants
    pub fn add(a: Expr, b: Expr) -> Expr {
        match (a, b) {
            (Expr::Int(0), x) | (x, Expr::Int(0)) => x,
            (Expr::Int(x), Expr::Int(y)) => Expr::Int(x.wrapping_add(y)),
            (x, y) => Expr::op("+", vec![x, y]),
        }
    }

    /// `a * b` on Int, folding constants (index arithmetic).
    #[allow(clippy::should_implement_trait)] // two operands, not `self`: folds constants
    pub fn mul(a: Expr, b: Expr) -> Expr {
        match (a, b) {
            (Expr::Int(0), _) | (_, Expr::Int(0)) => Expr::Int(0),
            (Expr::Int(1), x) | (x, Expr::Int(1)) => x,
            (Expr::Int(x), Expr::Int(y)) => Expr::Int(x.wrapping_mul(y)),
            (x, y) => Expr::op("*", vec![x, y]),
        }
    }

    /// Whether evaluating this costs nothing worth naming (a constant or a
    /// variable): it may be repeated freely.
    pub fn is_trivial(&self) -> bool {
        matches!(self, Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) | Expr::Var(_))
    }

    /// Whether this calls a function of the runtime's that costs tens of
    /// operations (an `f.exp`): worth computing once and reading where it
    /// is needed twice.
    pub fn calls_costly(&self) -> bool {
        match self {
            Expr::Op { op, args } => {
                matches!(
                    *op,
                    "f.exp"
                        | "f.ln"
                        | "f.^"
                        | "f.tanh"
                        | "pow.log2"
                        | "pow.by-log2"
                        | "pow.whole"
                        | "pow.by-log2-whole"
                        | "exp.either"
                        | "f.sinh"
                        | "f.cosh"
                ) || args.iter().any(Expr::calls_costly)
            }
            Expr::Load { index, .. } | Expr::Addr { index, .. } => index.calls_costly(),
            Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) | Expr::Var(_) => false,
        }
    }

    pub(crate) fn each_var(&self, f: &mut dyn FnMut(Var)) {
        match self {
            Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) => {}
            Expr::Var(v) => f(*v),
            Expr::Load { buf, index } | Expr::Addr { buf, index } => {
                f(*buf);
                index.each_var(f);
            }
            Expr::Op { args, .. } => args.iter().for_each(|a| a.each_var(f)),
        }
    }
}

/// The order in which a `reduce` statement combines its items.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Left to right.
    Left,
    /// Left to right up to 256 items, a fixed tree over more (the
    /// interpreter's `Order::Tree`: the first ⌊n/2⌋ items and the rest).
    Tree,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    /// A scalar declared and given its first value.
    Let { var: Var, elem: Elem, value: Expr },
    /// A scalar given a new value.
    Set { var: Var, value: Expr },
    /// A buffer of `len` atoms (uninitialised).
    Alloc { buf: Var, elem: Elem, len: Expr },
    /// A buffer holding literal atoms.
    Data { buf: Var, elem: Elem, atoms: Vec<Expr> },
    /// `buf[index] = value`.
    Store { buf: Var, index: Expr, value: Expr },
    /// The body once for each `index` from 0 to `count - 1`, in order, or
    /// split among threads where `parallel` (iterations independent).
    For {
        index: Var,
        count: Expr,
        parallel: bool,
        body: Vec<Stmt>,
    },
    /// `acc` = the `op`-combination of `count` items, item `index` being
    /// `item` after `body` ran for it, in `order`; with a `seed`, combined
    /// with it first (`Left`: from it; `Tree`: see [`Order::Tree`], the
    /// seed combined with the tree's result, or folded through from the
    /// left up to 256 items). Without a seed, `count` is at least 1.
    Reduce {
        acc: Var,
        elem: Elem,
        op: &'static str,
        seed: Option<Expr>,
        order: Order,
        index: Var,
        count: Expr,
        body: Vec<Stmt>,
        item: Expr,
    },
    If {
        cond: Expr,
        then: Vec<Stmt>,
        otherwise: Vec<Stmt>,
    },
    /// `body`, then again while `cond` (computed by `body`) holds.
    DoWhile { body: Vec<Stmt>, cond: Expr },
    /// Stop with a run-time error.
    Fail { what: String },
    /// A function of the C runtime (`rt_…`) called for its effect on the
    /// buffers it is given (a sort, a search).
    Call { func: &'static str, args: Vec<Expr> },
    /// Two buffers of the same element type and length exchanged (a
    /// loop's state and the buffer its next value was written into).
    Swap { a: Var, b: Var },
}

impl Stmt {
    /// The statement lists nested directly in this one (a loop's body, an
    /// `if`'s two branches), for passes that walk them.
    pub fn bodies(&self) -> Vec<&Vec<Stmt>> {
        match self {
            Stmt::For { body, .. } | Stmt::DoWhile { body, .. } | Stmt::Reduce { body, .. } => vec![body],
            Stmt::If { then, otherwise, .. } => vec![then, otherwise],
            _ => Vec::new(),
        }
    }

    /// [`Stmt::bodies`], to change them.
    pub fn bodies_mut(&mut self) -> Vec<&mut Vec<Stmt>> {
        match self {
            Stmt::For { body, .. } | Stmt::DoWhile { body, .. } | Stmt::Reduce { body, .. } => vec![body],
            Stmt::If { then, otherwise, .. } => vec![then, otherwise],
            _ => Vec::new(),
        }
    }

    /// The expressions this statement holds itself (not those of the
    /// statements nested in it).
    pub fn exprs(&self) -> Vec<&Expr> {
        match self {
            Stmt::Let { value, .. } | Stmt::Set { value, .. } => vec![value],
            Stmt::Alloc { len, .. } => vec![len],
            Stmt::Data { atoms, .. } => atoms.iter().collect(),
            Stmt::Store { index, value, .. } => vec![index, value],
            Stmt::For { count, .. } => vec![count],
            Stmt::Reduce {
                seed, count, item, ..
            } => seed.iter().chain([count, item]).collect(),
            Stmt::If { cond, .. } | Stmt::DoWhile { cond, .. } => vec![cond],
            Stmt::Call { args, .. } => args.iter().collect(),
            Stmt::Fail { .. } | Stmt::Swap { .. } => Vec::new(),
        }
    }

    /// [`Stmt::exprs`], to change them.
    pub fn exprs_mut(&mut self) -> Vec<&mut Expr> {
        match self {
            Stmt::Let { value, .. } | Stmt::Set { value, .. } => vec![value],
            Stmt::Alloc { len, .. } => vec![len],
            Stmt::Data { atoms, .. } => atoms.iter_mut().collect(),
            Stmt::Store { index, value, .. } => vec![index, value],
            Stmt::For { count, .. } => vec![count],
            Stmt::Reduce {
                seed, count, item, ..
            } => seed.iter_mut().chain([count, item]).collect(),
            Stmt::If { cond, .. } | Stmt::DoWhile { cond, .. } => vec![cond],
            Stmt::Call { args, .. } => args.iter_mut().collect(),
            Stmt::Fail { .. } | Stmt::Swap { .. } => Vec::new(),
        }
    }

    /// `f` on every statement of `stmts`, at any depth, each before those
    /// nested in it.
    pub fn each(stmts: &[Stmt], f: &mut dyn FnMut(&Stmt)) {
        for s in stmts {
            f(s);
            for inner in s.bodies() {
                Stmt::each(inner, f);
            }
        }
    }
}

/// What the program reads: an entry's argument, into `buf`, its extents
/// into `dims` (an extent already declared must be equal).
#[derive(Clone, Debug, PartialEq)]
pub struct Input {
    pub buf: Var,
    pub elem: Elem,
    pub dims: Vec<Extent>,
}

/// An input (the `input`th) that is the value of the file `path`, of
/// atoms `elem` (its shape is the input's).
#[derive(Clone, Debug, PartialEq)]
pub struct FileInput {
    pub input: usize,
    pub path: String,
    pub elem: Elem,
}

/// An input's extent: a variable it declares, or one it must equal.
#[derive(Clone, Debug, PartialEq)]
pub enum Extent {
    Declare(Var),
    Equal(Expr),
}

/// What the program writes: `buf`'s atoms from 0 in the shape `dims`, or
/// one scalar.
#[derive(Clone, Debug, PartialEq)]
pub struct Output {
    pub value: Written,
    pub elem: Elem,
    pub dims: Vec<Expr>,
    /// Whether this output (an Int vector) is the witness of a box whose
    /// payload is the next output, and of which kind.
    pub witness: Option<Witness>,
    /// Whether this output is a field of a record result (one output per
    /// field, in the type's order), and which.
    pub record: Option<RecordField>,
}

impl Output {
    /// Every variable the output names: its buffer, and those its
    /// scalar, offset and dimensions read.
    pub fn each_var(&self, f: &mut dyn FnMut(Var)) {
        match &self.value {
            Written::Buffer(b) => f(*b),
            Written::From { buf, offset } => {
                f(*buf);
                offset.each_var(f);
            }
            Written::Scalar(e) => e.each_var(f),
        }
        for d in &self.dims {
            d.each_var(f);
        }
    }
}

/// One field of a record (or array of records) output: its name, the
/// rank of the records' frame (the field's leading axes), and whether it
/// is the record's last field.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordField {
    pub name: String,
    pub frame: usize,
    pub last: bool,
}

/// The kind of a box's witness: one dimension (a vector of one) or a
/// shape.
#[derive(Clone, Debug, PartialEq)]
pub enum Witness {
    Dim,
    Shape,
    /// The witnesses of an array of boxes: an Int array of the boxes'
    /// frame then, for each box, its witnesses' sizes (for each, whether
    /// it is a shape, else one dimension, and how many sizes; a box of a
    /// box has several) and its payload's extents; the next output is
    /// all the payloads' atoms, one after another.
    Frame(Vec<(bool, usize)>),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Written {
    Buffer(Var),
    /// A buffer's atoms from `offset` on (the `tail` of a scan's result:
    /// no copy).
    From {
        buf: Var,
        offset: Expr,
    },
    Scalar(Expr),
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct Program {
    pub inputs: Vec<Input>,
    /// The inputs that are files the program reads (`read-file` of a
    /// path known when compiling): the driver reads them, as the
    /// interpreter reads them, and gives them in their places.
    pub files: Vec<FileInput>,
    pub body: Vec<Stmt>,
    pub outputs: Vec<Output>,
    /// Each variable's name, by number, for printing.
    pub names: Vec<String>,
    /// The program's `trace` and `trace-file` applications, by the tag
    /// their `rt_trace` call writes before the value it prints.
    pub traces: Vec<TraceSite>,
}

/// What a `trace` does with its value (the driver prints it once the
/// program has succeeded): printed on standard error, as text where the
/// label is a string literal, or appended to a file (`trace-file`).
#[derive(Clone, Debug, PartialEq)]
pub struct TraceSite {
    pub text: bool,
    pub file: Option<String>,
}

impl Program {
    /// The number of loops (`for` and `reduce`) and of allocations in the
    /// program, at any depth: what fusion is measured by.
    pub fn census(&self) -> (usize, usize) {
        fn walk(stmts: &[Stmt], n: &mut (usize, usize)) {
            for s in stmts {
                match s {
                    Stmt::For { body, .. } | Stmt::DoWhile { body, .. } => {
                        n.0 += 1;
                        walk(body, n);
                    }
                    Stmt::Reduce { body, .. } => {
                        n.0 += 1;
                        walk(body, n);
                    }
                    Stmt::Alloc { .. } => n.1 += 1,
                    Stmt::If { then, otherwise, .. } => {
                        walk(then, n);
                        walk(otherwise, n);
                    }
                    _ => {}
                }
            }
        }
        let mut n = (0, 0);
        walk(&self.body, &mut n);
        n
    }
}

// ---------------------------------------------------------------------------
// Printing

impl Program {
    pub fn var(&self, v: Var) -> String {
        match self.names.get(v.0 as usize) {
            Some(n) if !n.is_empty() => format!("{n}.{}", v.0),
            _ => format!("t.{}", v.0),
        }
    }

    pub fn print(&self) -> String {
        let mut out = String::new();
        for i in &self.inputs {
            let dims: Vec<String> = i
                .dims
                .iter()
                .map(|d| match d {
                    Extent::Declare(v) => self.var(*v),
                    Extent::Equal(e) => format!("={}", self.expr(e)),
                })
                .collect();
            out.push_str(&format!(
                "(input {} {} [{}])\n",
                self.var(i.buf),
                i.elem.name(),
                dims.join(" ")
            ));
        }
        for s in &self.body {
            self.stmt(&mut out, s, 0);
        }
        for o in &self.outputs {
            let dims: Vec<String> = o.dims.iter().map(|d| self.expr(d)).collect();
            let what = match &o.value {
                Written::Buffer(b) => self.var(*b),
                Written::From { buf, offset } => format!("(from {} {})", self.var(*buf), self.expr(offset)),
                Written::Scalar(e) => self.expr(e),
            };
            if let Some(r) = &o.record {
                out.push_str(&format!("(field {} frame {})\n", r.name, r.frame));
            }
            out.push_str(&format!(
                "({} {} {} [{}])\n",
                match o.witness {
                    None => "output",
                    Some(Witness::Dim) => "output-witness-dim",
                    Some(Witness::Shape) => "output-witness-shape",
                    Some(Witness::Frame(_)) => "output-witness-frame",
                },
                what,
                o.elem.name(),
                dims.join(" ")
            ));
        }
        out
    }

    pub fn expr(&self, e: &Expr) -> String {
        match e {
            Expr::Int(n) => n.to_string(),
            Expr::Float(x) => remora_syntax::float::format_float(*x),
            Expr::Bool(b) => (if *b { "#t" } else { "#f" }).to_string(),
            Expr::Var(v) => self.var(*v),
            Expr::Load { buf, index } => format!("(load {} {})", self.var(*buf), self.expr(index)),
            Expr::Addr { buf, index } => format!("(addr {} {})", self.var(*buf), self.expr(index)),
            Expr::Op { op, args } => {
                let mut s = format!("({op}");
                for a in args {
                    s.push(' ');
                    s.push_str(&self.expr(a));
                }
                s.push(')');
                s
            }
        }
    }

    fn block(&self, out: &mut String, stmts: &[Stmt], depth: usize) {
        for s in stmts {
            self.stmt(out, s, depth);
        }
    }

    fn stmt(&self, out: &mut String, s: &Stmt, depth: usize) {
        let pad = "  ".repeat(depth);
        match s {
            Stmt::Let { var, elem, value } => out.push_str(&format!(
                "{pad}(let {} {} {})\n",
                self.var(*var),
                elem.name(),
                self.expr(value)
            )),
            Stmt::Set { var, value } => {
                out.push_str(&format!("{pad}(set {} {})\n", self.var(*var), self.expr(value)))
            }
            Stmt::Alloc { buf, elem, len } => out.push_str(&format!(
                "{pad}(alloc {} {} {})\n",
                self.var(*buf),
                elem.name(),
                self.expr(len)
            )),
            Stmt::Data { buf, elem, atoms } => {
                let shown: Vec<String> = atoms.iter().take(8).map(|a| self.expr(a)).collect();
                let more = if atoms.len() > 8 { " …" } else { "" };
                out.push_str(&format!(
                    "{pad}(data {} {} [{}{more}])\n",
                    self.var(*buf),
                    elem.name(),
                    shown.join(" ")
                ))
            }
            Stmt::Store { buf, index, value } => out.push_str(&format!(
                "{pad}(store {} {} {})\n",
                self.var(*buf),
                self.expr(index),
                self.expr(value)
            )),
            Stmt::For {
                index,
                count,
                parallel,
                body,
            } => {
                let par = if *parallel { " parallel" } else { "" };
                out.push_str(&format!(
                    "{pad}(for {} {}{par}\n",
                    self.var(*index),
                    self.expr(count)
                ));
                self.block(out, body, depth + 1);
                out.push_str(&format!("{pad})\n"));
            }
            Stmt::Reduce {
                acc,
                elem,
                op,
                seed,
                order,
                index,
                count,
                body,
                item,
            } => {
                let seed = seed
                    .as_ref()
                    .map(|s| format!(" from {}", self.expr(s)))
                    .unwrap_or_default();
                let order = match order {
                    Order::Left => "left",
                    Order::Tree => "tree",
                };
                out.push_str(&format!(
                    "{pad}(reduce {} {} {op}{seed} {order} {} {}\n",
                    self.var(*acc),
                    elem.name(),
                    self.var(*index),
                    self.expr(count)
                ));
                self.block(out, body, depth + 1);
                out.push_str(&format!("{pad}  (item {}))\n", self.expr(item)));
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                out.push_str(&format!("{pad}(if {}\n", self.expr(cond)));
                self.block(out, then, depth + 1);
                if !otherwise.is_empty() {
                    out.push_str(&format!("{pad} else\n"));
                    self.block(out, otherwise, depth + 1);
                }
                out.push_str(&format!("{pad})\n"));
            }
            Stmt::DoWhile { body, cond } => {
                out.push_str(&format!("{pad}(do\n"));
                self.block(out, body, depth + 1);
                out.push_str(&format!("{pad} while {})\n", self.expr(cond)));
            }
            Stmt::Fail { what } => out.push_str(&format!("{pad}(fail {what:?})\n")),
            Stmt::Swap { a, b } => out.push_str(&format!("{pad}(swap {} {})\n", self.var(*a), self.var(*b))),
            Stmt::Call { func, args } => {
                let args: Vec<String> = args.iter().map(|a| self.expr(a)).collect();
                out.push_str(&format!("{pad}(call {func} {})\n", args.join(" ")))
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Verifying

/// What a variable is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Scalar(Elem),
    Buffer(Elem),
}

/// Checks the level's rules: every variable declared once, before its
/// uses, in scope where it is used, as the kind it is used as.
pub fn verify(p: &Program) -> Result<(), String> {
    let mut v = Verifier::default();
    for i in &p.inputs {
        v.declare(p, i.buf, Kind::Buffer(i.elem))?;
        for d in &i.dims {
            match d {
                Extent::Declare(x) => v.declare(p, *x, Kind::Scalar(Elem::Int))?,
                Extent::Equal(e) => v.expr(p, e)?,
            }
        }
    }
    // The top level's variables stay in scope for the outputs.
    for s in &p.body {
        v.stmt(p, s)?;
    }
    for o in &p.outputs {
        match &o.value {
            Written::Buffer(b) => v.expect(p, *b, Kind::Buffer(o.elem))?,
            Written::From { buf, offset } => {
                v.expect(p, *buf, Kind::Buffer(o.elem))?;
                v.expr(p, offset)?
            }
            Written::Scalar(e) => v.expr(p, e)?,
        }
        for d in &o.dims {
            v.expr(p, d)?;
        }
    }
    Ok(())
}

#[derive(Default)]
struct Verifier {
    kinds: HashMap<Var, Kind>,
    /// Variables in scope, innermost last.
    scope: Vec<Var>,
    live: HashMap<Var, usize>,
}

impl Verifier {
    fn declare(&mut self, p: &Program, v: Var, k: Kind) -> Result<(), String> {
        if self.kinds.insert(v, k).is_some() {
            return Err(format!("{} is declared twice", p.var(v)));
        }
        self.scope.push(v);
        *self.live.entry(v).or_default() += 1;
        Ok(())
    }

    fn expect(&self, p: &Program, v: Var, k: Kind) -> Result<(), String> {
        if self.live.get(&v).copied().unwrap_or(0) == 0 {
            return Err(format!("{} is used out of scope", p.var(v)));
        }
        match self.kinds.get(&v) {
            Some(have) if *have == k => Ok(()),
            Some(have) => Err(format!("{} is a {have:?}, used as a {k:?}", p.var(v))),
            None => Err(format!("{} is used undeclared", p.var(v))),
        }
    }

    fn in_scope(&self, p: &Program, v: Var) -> Result<(), String> {
        if self.live.get(&v).copied().unwrap_or(0) == 0 {
            return Err(format!("{} is used out of scope", p.var(v)));
        }
        Ok(())
    }

    fn expr(&self, p: &Program, e: &Expr) -> Result<(), String> {
        let mut err = Ok(());
        e.each_var(&mut |v| {
            if err.is_ok() {
                err = self.in_scope(p, v);
            }
        });
        err?;
        if let Expr::Load { buf, .. } | Expr::Addr { buf, .. } = e
            && !matches!(self.kinds.get(buf), Some(Kind::Buffer(_)))
        {
            return Err(format!("{} is loaded from but is not a buffer", p.var(*buf)));
        }
        Ok(())
    }

    fn block(&mut self, p: &Program, stmts: &[Stmt]) -> Result<(), String> {
        let mark = self.scope.len();
        for s in stmts {
            self.stmt(p, s)?;
        }
        for v in self.scope.drain(mark..) {
            if let Some(n) = self.live.get_mut(&v) {
                *n -= 1;
            }
        }
        Ok(())
    }

    fn stmt(&mut self, p: &Program, s: &Stmt) -> Result<(), String> {
        match s {
            Stmt::Let { var, elem, value } => {
                self.expr(p, value)?;
                self.declare(p, *var, Kind::Scalar(*elem))
            }
            Stmt::Set { var, value } => {
                self.expr(p, value)?;
                match self.kinds.get(var) {
                    Some(Kind::Scalar(_)) => self.in_scope(p, *var),
                    _ => Err(format!("{} is set but is not a scalar", p.var(*var))),
                }
            }
            Stmt::Alloc { buf, elem, len } => {
                self.expr(p, len)?;
                self.declare(p, *buf, Kind::Buffer(*elem))
            }
            Stmt::Data { buf, elem, atoms } => {
                for a in atoms {
                    self.expr(p, a)?;
                }
                self.declare(p, *buf, Kind::Buffer(*elem))
            }
            Stmt::Store { buf, index, value } => {
                self.expr(p, index)?;
                self.expr(p, value)?;
                match self.kinds.get(buf) {
                    Some(Kind::Buffer(_)) => self.in_scope(p, *buf),
                    _ => Err(format!("{} is stored to but is not a buffer", p.var(*buf))),
                }
            }
            Stmt::For {
                index, count, body, ..
            } => {
                self.expr(p, count)?;
                let mark = self.scope.len();
                self.declare(p, *index, Kind::Scalar(Elem::Int))?;
                self.block(p, body)?;
                self.pop_to(mark);
                Ok(())
            }
            Stmt::Reduce {
                acc,
                elem,
                seed,
                index,
                count,
                body,
                item,
                ..
            } => {
                self.expr(p, count)?;
                if let Some(s) = seed {
                    self.expr(p, s)?;
                }
                let mark = self.scope.len();
                self.declare(p, *index, Kind::Scalar(Elem::Int))?;
                let inner = self.scope.len();
                for s in body {
                    self.stmt(p, s)?;
                }
                self.expr(p, item)?;
                self.pop_to(inner);
                self.pop_to(mark);
                self.declare(p, *acc, Kind::Scalar(*elem))
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                self.expr(p, cond)?;
                self.block(p, then)?;
                self.block(p, otherwise)
            }
            Stmt::DoWhile { body, cond } => {
                let mark = self.scope.len();
                for s in body {
                    self.stmt(p, s)?;
                }
                self.expr(p, cond)?;
                self.pop_to(mark);
                Ok(())
            }
            Stmt::Fail { .. } => Ok(()),
            Stmt::Call { args, .. } => args.iter().try_for_each(|a| self.expr(p, a)),
            Stmt::Swap { a, b } => match (self.kinds.get(a), self.kinds.get(b)) {
                (Some(Kind::Buffer(x)), Some(Kind::Buffer(y))) if x == y => {
                    self.in_scope(p, *a)?;
                    self.in_scope(p, *b)
                }
                _ => Err(format!(
                    "{} and {} are swapped but are not buffers of one type",
                    p.var(*a),
                    p.var(*b)
                )),
            },
        }
    }

    fn pop_to(&mut self, mark: usize) {
        for v in self.scope.drain(mark..) {
            if let Some(n) = self.live.get_mut(&v) {
                *n -= 1;
            }
        }
    }
}

//! The C backend: the loop level written out as one C file, with the small
//! runtime of `runtime.c` (a thread pool on POSIX threads, the binary data
//! format, run-time errors) pasted in front.
//!
//! The program reads its entry's arguments from standard input and writes
//! its results to standard output, both in Futhark's binary data format;
//! a run-time error is a line `remora-error: WHAT` on standard error and
//! exit status 3.
//!
//! Scalars are `int64_t`, `float` and `bool`; Int arithmetic wraps (it is
//! done on `uint64_t`), floored division and modulus are the language's,
//! and a float operation is one IEEE operation in `float` (compiled with
//! contraction off, so `a*b+c` is never fused): results are the
//! interpreter's, bit for bit.
//!
//! A `parallel` loop is outlined into a function of a context structure
//! holding the variables of the scope it uses, and run by the pool; a `tree` reduction
//! is a recursive function the same way.

use crate::loops::{Elem, Expr, Extent, Order, Program, Stmt, Var, Written};
mod lanes;
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

/// The runtime every program starts with.
pub const RUNTIME: &str = include_str!("runtime.c");

/// The number of operands of a scalar primitive this backend writes, or
/// `None` for a name it does not know.
pub fn scalar_arity(name: &str) -> Option<usize> {
    Some(match name {
        "+" | "-" | "*" | "/" | "mod" | "^" | "max" | "min" | "bit-and" | "bit-or" | "bit-xor" | "shl"
        | "shr" | "f.+" | "f.-" | "f.*" | "f./" | "f.^" | "f.max" | "f.min" | "==" | "!=" | "<" | ">"
        | "<=" | ">=" | "f.==" | "f.!=" | "f.<" | "f.>" | "f.<=" | "f.>=" | "and" | "or" | "bool.=="
        | "bool.!=" | "f.atan2" | "f.mod" | "random.uniform" | "random.normal" => 2,
        "not" | "bit-not" | "popc" | "sqrt" | "f.sqrt" | "f.ln" | "f.exp" | "f.tanh" | "i->f" | "i->bool"
        | "bool->i" | "bool->f" | "truncate" | "round" | "floor" | "ceiling" | "neg" | "abs" | "signum"
        | "f.neg" | "f.abs" | "f.signum" | "f.sin" | "f.cos" | "f.tan" | "f.asin" | "f.acos" | "f.atan"
        | "f.sinh" | "f.cosh" | "f.log2" | "f.log10" | "f.floor" | "f.ceiling" | "f.round" | "f.isnan" => 1,
        "clip" | "f.clip" => 3,
        "random.int" => 4,
        _ => return None,
    })
}

fn ctype(e: Elem) -> &'static str {
    match e {
        Elem::Int => "int64_t",
        Elem::Float => "float",
        Elem::Bool => "bool",
    }
}

fn code(e: Elem) -> u32 {
    match e {
        Elem::Int => 0,
        Elem::Float => 1,
        Elem::Bool => 2,
    }
}

/// What a variable is in C.
#[derive(Clone, Copy)]
enum Decl {
    Scalar(Elem),
    Buffer(Elem),
}

struct Emitter {
    /// Functions and structures written so far (outlined loops,
    /// reductions, literal data), in order.
    top: String,
    /// Variables in scope where code is being written, outermost first.
    scope: Vec<(Var, Decl)>,
    next: usize,
    /// The context structure most recently declared.
    last_ctx: String,
    /// The variables it holds: those of the scope its code uses (all of
    /// the scope would make the C text quadratic in a long program).
    last_used: HashSet<Var>,
    /// The heap buffers declared before the loop they are allocated in
    /// (see [`invariant_buffers`]): allocated where the loop first reaches
    /// them, freed after it.
    hoisted: HashSet<Var>,
    /// Whether `f.max`, `f.min` and `f.clip` are written as selects
    /// (`rt_fmax_sel` …: the same bits), not branches: in the loop of a
    /// reduction's order keys (`c/lanes.rs`), which the C compiler then
    /// vectorises (a clipped item's branches kept it from it).
    selects: bool,
}

/// The whole C program.
pub fn emit(p: &Program) -> String {
    let mut e = Emitter {
        top: String::new(),
        scope: Vec::new(),
        next: 0,
        last_ctx: String::new(),
        last_used: HashSet::new(),
        hoisted: HashSet::new(),
        selects: false,
    };
    let mut main = String::new();
    let _ = writeln!(
        main,
        "int main(int argc, char **argv) {{\n  rt_init(argc, argv, {});",
        i32::from(big_buffers(&p.body))
    );
    for i in &p.inputs {
        let dims = i.dims.len();
        let _ = writeln!(
            main,
            "  int64_t {b}_shape[{n}];\n  {t} *{b} = ({t} *)rt_read({}, {dims}, {b}_shape);",
            code(i.elem),
            b = v(i.buf),
            t = ctype(i.elem),
            n = dims.max(1),
        );
        e.scope.push((i.buf, Decl::Buffer(i.elem)));
        for (k, d) in i.dims.iter().enumerate() {
            match d {
                Extent::Declare(x) => {
                    let _ = writeln!(main, "  int64_t {} = {}_shape[{k}];", v(*x), v(i.buf));
                    e.scope.push((*x, Decl::Scalar(Elem::Int)));
                }
                Extent::Equal(x) => {
                    let _ = writeln!(
                        main,
                        "  if ({}_shape[{k}] != {}) rt_fail(\"argument extents disagree\");",
                        v(i.buf),
                        e.expr(x)
                    );
                }
            }
        }
    }
    main.push_str("  rt_clock_start();\n");
    let mut written: Vec<&Expr> = Vec::new();
    let mut results = HashSet::new();
    for o in &p.outputs {
        written.extend(o.dims.iter());
        match &o.value {
            Written::Buffer(b) => {
                results.insert(*b);
            }
            Written::From { buf, offset } => {
                results.insert(*buf);
                written.push(offset);
            }
            Written::Scalar(x) => written.push(x),
        }
    }
    results.extend(used_vars(&[], &written));
    e.top_block(&mut main, &p.body, &results);
    main.push_str("  rt_clock_stop();\n");
    for o in &p.outputs {
        let dims: Vec<String> = o.dims.iter().map(|d| e.expr(d)).collect();
        let n = o.dims.len();
        let data = match &o.value {
            Written::Buffer(b) => v(*b),
            Written::From { buf, offset } => format!("({} + {})", v(*buf), e.expr(offset)),
            Written::Scalar(x) => {
                let _ = writeln!(main, "  {{ {} out = {};", ctype(o.elem), e.expr(x));
                "&out".to_string()
            }
        };
        let _ = writeln!(
            main,
            "  {{ int64_t shape[{}] = {{{}}}; rt_write({}, {n}, shape, {data}); }}",
            n.max(1),
            if dims.is_empty() {
                "0".to_string()
            } else {
                dims.join(", ")
            },
            code(o.elem),
        );
        if matches!(o.value, Written::Scalar(_)) {
            main.push_str("  }\n");
        }
    }
    main.push_str("  rt_finish();\n  return 0;\n}\n");
    // The runtime's math reads the tables of the interpreter's own.
    let mut out = RUNTIME.replace("/* @fmath-tables@ */", &remora_value::fmath_tables::c_arrays());
    out.push_str("\n/* ---- the program ---- */\n");
    out.push_str(&e.top);
    out.push_str(&main);
    out
}

fn v(x: Var) -> String {
    format!("v{}", x.0)
}

fn float(x: f32) -> String {
    if x.is_nan() {
        "NAN".to_string()
    } else if x.is_infinite() {
        if x > 0.0 {
            "INFINITY".to_string()
        } else {
            "(-INFINITY)".to_string()
        }
    } else {
        // Rust's shortest representation reads back as the same f32.
        let s = format!("{x:?}");
        if s.contains('.') || s.contains('e') {
            format!("({s}f)")
        } else {
            format!("({s}.0f)")
        }
    }
}

fn pad(depth: usize) -> String {
    "  ".repeat(depth)
}

impl Emitter {
    fn fresh(&mut self, what: &str) -> String {
        self.next += 1;
        format!("{what}{}", self.next)
    }

    fn expr(&self, e: &Expr) -> String {
        match e {
            Expr::Int(n) => {
                if *n == i64::MIN {
                    "INT64_MIN".to_string()
                } else {
                    format!("INT64_C({n})")
                }
            }
            Expr::Float(x) => float(*x),
            Expr::Bool(b) => (if *b { "true" } else { "false" }).to_string(),
            Expr::Var(x) => v(*x),
            Expr::Load { buf, index } => format!("{}[{}]", v(*buf), self.expr(index)),
            Expr::Addr { buf, index } => format!("(&{}[{}])", v(*buf), self.expr(index)),
            Expr::Op { op, args } => {
                let a: Vec<String> = args.iter().map(|x| self.expr(x)).collect();
                match *op {
                    "f.max" if self.selects => format!("rt_fmax_sel({}, {})", a[0], a[1]),
                    "f.min" if self.selects => format!("rt_fmin_sel({}, {})", a[0], a[1]),
                    "f.clip" if self.selects => {
                        format!("rt_fmin_sel(rt_fmax_sel({}, {}), {})", a[2], a[0], a[1])
                    }
                    _ => op_c(op, &a),
                }
            }
        }
    }

    fn block(&mut self, out: &mut String, stmts: &[Stmt], depth: usize, top: bool) {
        let mark = self.scope.len();
        let mut allocated = Vec::new();
        for s in stmts {
            allocated.extend(self.heap_buffer(s));
            self.stmt(out, s, depth);
        }
        if !top {
            for b in allocated {
                let _ = writeln!(out, "{}rt_free({});", pad(depth), v(b));
            }
        }
        self.scope.truncate(mark);
    }

    /// The program's own block: each heap buffer of it that no result
    /// reads freed after the last statement that uses it, so that a big
    /// temporary's pages go to the next buffer of about its size (the
    /// runtime keeps them) instead of fresh ones. Buffers that a `swap`
    /// exchanges stay to the end.
    fn top_block(&mut self, out: &mut String, stmts: &[Stmt], results: &HashSet<Var>) {
        fn swapped(stmts: &[Stmt], into: &mut HashSet<Var>) {
            for s in stmts {
                match s {
                    Stmt::Swap { a, b } => {
                        into.insert(*a);
                        into.insert(*b);
                    }
                    Stmt::For { body, .. } | Stmt::Reduce { body, .. } | Stmt::DoWhile { body, .. } => {
                        swapped(body, into)
                    }
                    Stmt::If { then, otherwise, .. } => {
                        swapped(then, into);
                        swapped(otherwise, into);
                    }
                    _ => {}
                }
            }
        }
        let mut kept = results.clone();
        swapped(stmts, &mut kept);
        let uses: Vec<HashSet<Var>> = stmts
            .iter()
            .map(|s| used_vars(std::slice::from_ref(s), &[]))
            .collect();
        let mut live: Vec<Var> = Vec::new();
        for (k, s) in stmts.iter().enumerate() {
            live.extend(heap_buffer(s).filter(|b| !kept.contains(b)));
            self.stmt(out, s, 1);
            live.retain(|b| {
                let later = uses[k + 1..].iter().any(|u| u.contains(b));
                if !later {
                    let _ = writeln!(out, "  rt_free({});", v(*b));
                }
                later
            });
        }
    }

    fn stmt(&mut self, out: &mut String, s: &Stmt, depth: usize) {
        let p = pad(depth);
        match s {
            Stmt::Let { var, elem, value } => {
                let _ = writeln!(out, "{p}{} {} = {};", ctype(*elem), v(*var), self.expr(value));
                self.scope.push((*var, Decl::Scalar(*elem)));
            }
            Stmt::Set { var, value } => {
                let _ = writeln!(out, "{p}{} = {};", v(*var), self.expr(value));
            }
            Stmt::Alloc { buf, elem, len } if self.hoisted.contains(buf) => {
                // Declared before its loop: made the first time round.
                let _ = writeln!(
                    out,
                    "{p}if ({b} == NULL) {b} = {};",
                    self.heap_alloc(*elem, len),
                    b = v(*buf)
                );
            }
            Stmt::Alloc { buf, elem, len } => {
                match len {
                    // A small buffer of a size known here lives on the
                    // stack (in registers, once the C compiler is done).
                    Expr::Int(n) if small(*n) => {
                        let _ = writeln!(
                            out,
                            "{p}{t} {b}_cells[{}]; {t} *{b} = {b}_cells;",
                            (*n).max(1),
                            b = v(*buf),
                            t = ctype(*elem)
                        );
                    }
                    _ => {
                        let _ = writeln!(
                            out,
                            "{p}{} *{} = {};",
                            ctype(*elem),
                            v(*buf),
                            self.heap_alloc(*elem, len)
                        );
                    }
                }
                self.scope.push((*buf, Decl::Buffer(*elem)));
            }
            Stmt::Data { buf, elem, atoms } => {
                let name = self.fresh("lit");
                let items: Vec<String> = atoms.iter().map(|a| self.expr(a)).collect();
                let _ = writeln!(
                    self.top,
                    "static const {} {name}[{}] = {{{}}};",
                    ctype(*elem),
                    atoms.len().max(1),
                    if items.is_empty() {
                        "0".to_string()
                    } else {
                        items.join(", ")
                    }
                );
                let _ = writeln!(out, "{p}{t} *{} = ({t} *){name};", v(*buf), t = ctype(*elem));
                self.scope.push((*buf, Decl::Buffer(*elem)));
            }
            Stmt::Store { buf, index, value } => {
                let _ = writeln!(
                    out,
                    "{p}{}[{}] = {};",
                    v(*buf),
                    self.expr(index),
                    self.expr(value)
                );
            }
            Stmt::For {
                index,
                count,
                parallel,
                body,
            } => {
                if *parallel {
                    self.parallel_for(out, *index, count, body, depth);
                    return;
                }
                let i = v(*index);
                let mark = self.scope.len();
                let hoisted = self.hoist(out, body, depth);
                let _ = writeln!(
                    out,
                    "{p}for (int64_t {i} = 0, {i}_n = {}; {i} < {i}_n; {i}++) {{",
                    self.expr(count)
                );
                self.scope.push((*index, Decl::Scalar(Elem::Int)));
                self.block(out, body, depth + 1, false);
                self.scope.pop();
                let _ = writeln!(out, "{p}}}");
                self.free_hoisted(out, &hoisted, mark, depth);
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
                let t = ctype(*elem);
                let a = v(*acc);
                let n = self.fresh("n");
                let _ = writeln!(out, "{p}{t} {a};");
                let _ = writeln!(out, "{p}{{ int64_t {n} = {};", self.expr(count));
                if *order == Order::Tree {
                    // (Lanes only where the count may be over 256.)
                    let small = matches!(count, Expr::Int(n) if *n <= 256);
                    let f = self.tree_function(*elem, op, *index, body, item, !small);
                    let _ = writeln!(out, "{p}if ({n} > 256) {{");
                    let ctx = self.context_value();
                    let _ = writeln!(out, "{p}  {ctx}");
                    let combined = match seed {
                        Some(s) => op_c(op, &[self.expr(s), format!("{f}(&ctx, 0, {n})")]),
                        None => format!("{f}(&ctx, 0, {n})"),
                    };
                    let _ = writeln!(out, "{p}  {a} = {combined};");
                    let _ = writeln!(out, "{p}}} else {{");
                    self.left(
                        out,
                        *acc,
                        op,
                        seed.as_ref(),
                        *index,
                        &n,
                        "0",
                        body,
                        item,
                        depth + 1,
                    );
                    let _ = writeln!(out, "{p}}}");
                } else {
                    self.left(out, *acc, op, seed.as_ref(), *index, &n, "0", body, item, depth);
                }
                let _ = writeln!(out, "{p}}}");
                self.scope.push((*acc, Decl::Scalar(*elem)));
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                let _ = writeln!(out, "{p}if ({}) {{", self.expr(cond));
                self.block(out, then, depth + 1, false);
                if !otherwise.is_empty() {
                    let _ = writeln!(out, "{p}}} else {{");
                    self.block(out, otherwise, depth + 1, false);
                }
                let _ = writeln!(out, "{p}}}");
            }
            Stmt::DoWhile { body, cond } => {
                let outer = self.scope.len();
                let hoisted = self.hoist(out, body, depth);
                let _ = writeln!(out, "{p}for (;;) {{");
                let mark = self.scope.len();
                let mut allocated = Vec::new();
                for s in body {
                    allocated.extend(self.heap_buffer(s));
                    self.stmt(out, s, depth + 1);
                }
                let c = self.expr(cond);
                let flag = self.fresh("again");
                let _ = writeln!(out, "{p}  bool {flag} = {c};");
                for b in allocated {
                    let _ = writeln!(out, "{p}  rt_free({});", v(b));
                }
                self.scope.truncate(mark);
                let _ = writeln!(out, "{p}  if (!{flag}) break;\n{p}}}");
                self.free_hoisted(out, &hoisted, outer, depth);
            }
            Stmt::Fail { what } => {
                let _ = writeln!(out, "{p}rt_fail({what:?});");
            }
            Stmt::Swap { a, b } => {
                let _ = writeln!(
                    out,
                    "{p}{{ void *t = {a}; {a} = {b}; {b} = t; }}",
                    a = v(*a),
                    b = v(*b)
                );
            }
            Stmt::Call { func, args } => {
                let args: Vec<String> = args.iter().map(|a| self.expr(a)).collect();
                let _ = writeln!(out, "{p}{func}({});", args.join(", "));
            }
        }
    }

    /// `rt_alloc` of `len` atoms of `elem`, as a C expression.
    fn heap_alloc(&self, elem: Elem, len: &Expr) -> String {
        format!(
            "({t} *)rt_alloc({}, sizeof({t}))",
            self.expr(len),
            t = ctype(elem)
        )
    }

    /// The buffer `s` allocates on the heap that its block frees, if any
    /// (a hoisted one is freed after its loop).
    fn heap_buffer(&self, s: &Stmt) -> Option<Var> {
        heap_buffer(s).filter(|b| !self.hoisted.contains(b))
    }

    /// The loop body's [`invariant_buffers`] declared (null) before the
    /// loop and put in scope; their names.
    fn hoist(&mut self, out: &mut String, body: &[Stmt], depth: usize) -> Vec<Var> {
        let mut buffers = invariant_buffers(body);
        // (Those of an inner loop an outer one hoisted already stay there.)
        buffers.retain(|(b, _)| !self.hoisted.contains(b));
        for (b, elem) in &buffers {
            let _ = writeln!(out, "{}{} *{} = NULL;", pad(depth), ctype(*elem), v(*b));
            self.scope.push((*b, Decl::Buffer(*elem)));
            self.hoisted.insert(*b);
        }
        buffers.into_iter().map(|(b, _)| b).collect()
    }

    /// After the loop: its hoisted buffers freed and out of scope (back to
    /// `mark`), hoisted again where the same loop is written again (a
    /// reduction's body, once in each function that runs it).
    fn free_hoisted(&mut self, out: &mut String, hoisted: &[Var], mark: usize, depth: usize) {
        for b in hoisted {
            let _ = writeln!(out, "{}rt_free({});", pad(depth), v(*b));
            self.hoisted.remove(b);
        }
        self.scope.truncate(mark);
    }

    /// A left-to-right reduction of items `from … n-1` into `acc` (declared
    /// already).
    #[allow(clippy::too_many_arguments)]
    fn left(
        &mut self,
        out: &mut String,
        acc: Var,
        op: &str,
        seed: Option<&Expr>,
        index: Var,
        n: &str,
        from: &str,
        body: &[Stmt],
        item: &Expr,
        depth: usize,
    ) {
        let p = pad(depth);
        let a = v(acc);
        let i = v(index);
        // `f.max`, `f.min`: one loop over the items' order keys.
        if let Some(how @ lanes::Unordered::Extreme(_)) = lanes::unordered(op).filter(|_| lanes::fits(body)) {
            let _ = writeln!(out, "{p}if ({n} > {from}) {{");
            self.unordered_fold(out, &a, how, op, index, (from, n), body, item, depth + 1);
            match seed {
                Some(s) => {
                    let s = self.expr(s);
                    let _ = writeln!(
                        out,
                        "{p}  {a} = {};\n{p}}} else {a} = {s};",
                        op_c(op, &[s.clone(), a.clone()])
                    );
                }
                None => {
                    let _ = writeln!(out, "{p}}} else rt_fail(\"reduce of an empty array\");");
                }
            }
            return;
        }
        let start = match seed {
            Some(s) => {
                let _ = writeln!(out, "{p}{a} = {};", self.expr(s));
                from.to_string()
            }
            None => {
                let _ = writeln!(
                    out,
                    "{p}if ({n} <= {from}) rt_fail(\"reduce of an empty array\");\n{p}{{ int64_t {i} = {from};"
                );
                self.scope.push((index, Decl::Scalar(Elem::Int)));
                self.block(out, body, depth + 1, false);
                let _ = writeln!(out, "{p}  {a} = {}; }}", self.expr(item));
                self.scope.pop();
                format!("{from} + 1")
            }
        };
        let _ = writeln!(out, "{p}for (int64_t {i} = {start}; {i} < {n}; {i}++) {{");
        self.scope.push((index, Decl::Scalar(Elem::Int)));
        self.block_then(out, body, depth + 1, &|e: &Self| {
            format!("{a} = {};", op_c(op, &[a.clone(), e.expr(item)]))
        });
        self.scope.pop();
        let _ = writeln!(out, "{p}}}");
    }

    /// A block, then one more line (made with the block's variables in
    /// scope), then the block's buffers freed.
    fn block_then(&mut self, out: &mut String, stmts: &[Stmt], depth: usize, last: &dyn Fn(&Self) -> String) {
        let mark = self.scope.len();
        let mut allocated = Vec::new();
        for s in stmts {
            allocated.extend(self.heap_buffer(s));
            self.stmt(out, s, depth);
        }
        let _ = writeln!(out, "{}{}", pad(depth), last(self));
        for b in allocated {
            let _ = writeln!(out, "{}rt_free({});", pad(depth), v(b));
        }
        self.scope.truncate(mark);
    }

    /// The structure of every variable in scope, declared at the top; its
    /// name.
    fn context_type(&mut self, used: HashSet<Var>) -> String {
        let name = self.fresh("ctx");
        let mut s = String::from("typedef struct { char unused;");
        for (x, d) in self.scope.iter().filter(|(x, _)| used.contains(x)) {
            match d {
                Decl::Scalar(e) => {
                    let _ = write!(s, " {} {};", ctype(*e), v(*x));
                }
                Decl::Buffer(e) => {
                    let _ = write!(s, " {} *{};", ctype(*e), v(*x));
                }
            }
        }
        let _ = writeln!(s, " }} {name};");
        self.top.push_str(&s);
        self.last_ctx = name.clone();
        self.last_used = used;
        name
    }

    /// `ctx`, a context structure holding every variable in scope (of the
    /// type most recently made by [`Self::context_type`]).
    fn context_value(&self) -> String {
        let fields: Vec<String> = self
            .scope
            .iter()
            .filter(|(x, _)| self.last_used.contains(x))
            .map(|(x, _)| format!(".{0} = {0}", v(*x)))
            .collect();
        format!(
            "{} ctx = {{ .unused = 0{}{} }};",
            self.last_ctx.clone(),
            if fields.is_empty() { "" } else { ", " },
            fields.join(", ")
        )
    }

    /// The context's fields unpacked into local variables.
    fn unpack(&self) -> String {
        let mut s = String::new();
        for (x, d) in self.scope.iter().filter(|(x, _)| self.last_used.contains(x)) {
            match d {
                Decl::Scalar(e) => {
                    let _ = writeln!(s, "  {} {} = c->{};", ctype(*e), v(*x), v(*x));
                }
                Decl::Buffer(e) => {
                    let _ = writeln!(s, "  {} *{} = c->{};", ctype(*e), v(*x), v(*x));
                }
            }
            let _ = writeln!(s, "  (void){};", v(*x));
        }
        s
    }

    fn parallel_for(&mut self, out: &mut String, index: Var, count: &Expr, body: &[Stmt], depth: usize) {
        let p = pad(depth);
        let ctx = self.context_type(used_vars(body, &[]));
        let used = self.last_used.clone();
        let name = self.fresh("loop");
        let mut f = format!("static void {name}(void *raw, int64_t lo, int64_t hi) {{\n  {ctx} *c = raw;\n");
        f.push_str(&self.unpack());
        let i = v(index);
        // A buffer of the same size at every iteration: one for each
        // chunk (a row's temporary, not a malloc and free for each row).
        let mark = self.scope.len();
        let hoisted = self.hoist(&mut f, body, 1);
        let _ = writeln!(f, "  for (int64_t {i} = lo; {i} < hi; {i}++) {{");
        self.scope.push((index, Decl::Scalar(Elem::Int)));
        let saved_top = std::mem::take(&mut self.top);
        self.block(&mut f, body, 2, false);
        let inner_top = std::mem::replace(&mut self.top, saved_top);
        self.top.push_str(&inner_top);
        self.scope.pop();
        f.push_str("  }\n");
        self.free_hoisted(&mut f, &hoisted, mark, 1);
        f.push_str("}\n");
        self.top.push_str(&f);
        // The body may have made context types of its own (a tree
        // reduction's): the loop's is this one.
        self.last_ctx = ctx;
        self.last_used = used;
        let value = self.context_value();
        // The trip counts known before the loop: Int variables in scope.
        let known: HashSet<Var> = self
            .scope
            .iter()
            .filter(|(_, d)| matches!(d, Decl::Scalar(Elem::Int)))
            .map(|(x, _)| *x)
            .collect();
        let mut inside = HashMap::new();
        middle(index, count, &known, &mut inside);
        let _ = writeln!(
            out,
            "{p}{{ {value}\n{p}  rt_parallel_for({}, {}, {name}, &ctx); }}",
            self.expr(count),
            cost(body, &known, &inside).c()
        );
    }

    /// A function `f(ctx, lo, hi)` giving the tree reduction of items
    /// `lo … hi-1`; its name. The context type is left in `last_ctx`.
    fn tree_function(
        &mut self,
        elem: Elem,
        op: &str,
        index: Var,
        body: &[Stmt],
        item: &Expr,
        lanes: bool,
    ) -> String {
        let ctx = self.context_type(used_vars(body, &[item]));
        let used = self.last_used.clone();
        let name = self.fresh("tree");
        let t = ctype(elem);
        // On several threads, the top levels as parts (see
        // `rt_tree_parts`), combined level by level from the bottom.
        let combine = op_c(op, &["l".to_string(), "r".to_string()]);
        // A small node's leaves side by side (`lanes.rs`).
        let text = match lanes::unordered(op) {
            _ if !lanes || !lanes::fits(body) => None,
            Some(how) => Some(self.tree_unordered(&name, &ctx, elem, op, how, index, body, item)),
            None if op == "f.+" => Some(self.tree_lanes(&name, &ctx, index, body, item)),
            None => None,
        };
        let lanes = match text {
            Some(text) => {
                self.top.push_str(&text);
                format!(
                    "    if (hi - lo <= {}) return {name}_lanes(c, lo, hi);\n",
                    lanes::NODE
                )
            }
            None => String::new(),
        };
        let mut f = format!(
            "static {t} {name}(const {ctx} *c, int64_t lo, int64_t hi) {{\n  if (hi - lo > 256) {{\n{lanes}    int levels = rt_tree_levels(hi - lo);\n    if (levels > 0) {{\n      int parts = 1 << levels;\n      int64_t bounds[257];\n      {t} part[256];\n      rt_tree_bounds(lo, hi, levels, bounds);\n      rt_tree_parts({name}_half, (void *)c, bounds, parts, part, sizeof({t}));\n      for (int w = 1; w < parts; w *= 2)\n        for (int k = 0; k + w < parts; k += 2 * w) {{\n          {t} l = part[k], r = part[k + w];\n          part[k] = {combine};\n        }}\n      return part[0];\n    }}\n    int64_t mid = lo + (hi - lo) / 2;\n    {t} l, r;\n    rt_pair({name}_half, (void *)c, lo, mid, hi, &l, &r, sizeof({t}));\n    return {combine};\n  }}\n"
        );
        f.push_str(&self.unpack());
        let acc = self.fresh("acc");
        let i = v(index);
        let _ = writeln!(f, "  {t} {acc};\n  {{ int64_t {i} = lo;");
        self.scope.push((index, Decl::Scalar(Elem::Int)));
        let saved_top = std::mem::take(&mut self.top);
        self.block_then(&mut f, body, 2, &|e: &Self| format!("{acc} = {};", e.expr(item)));
        let _ = writeln!(f, "  }}\n  for (int64_t {i} = lo + 1; {i} < hi; {i}++) {{");
        let acc2 = acc.clone();
        let op2 = op.to_string();
        self.block_then(&mut f, body, 2, &move |e: &Self| {
            format!("{acc2} = {};", op_c(&op2, &[acc2.clone(), e.expr(item)]))
        });
        let inner_top = std::mem::replace(&mut self.top, saved_top);
        self.top.push_str(&inner_top);
        self.scope.pop();
        let _ = writeln!(f, "  }}\n  return {acc};\n}}");
        // The half a pool thread may run, by address of its result.
        let _ = writeln!(
            self.top,
            "static {t} {name}(const {ctx} *c, int64_t lo, int64_t hi);\nstatic void {name}_half(void *c, int64_t lo, int64_t hi, void *out) {{ *({t} *)out = {name}(c, lo, hi); }}"
        );
        self.top.push_str(&f);
        // The body may have made context types of its own: the
        // reduction's is this one.
        self.last_ctx = ctx;
        self.last_used = used;
        name
    }
}

/// The variables that `stmts` and `exprs` use (and declare).
fn used_vars(stmts: &[Stmt], exprs: &[&Expr]) -> HashSet<Var> {
    fn walk(stmts: &[Stmt], used: &mut HashSet<Var>) {
        let add = |e: &Expr, used: &mut HashSet<Var>| {
            e.each_var(&mut |x| {
                used.insert(x);
            })
        };
        for s in stmts {
            match s {
                Stmt::Let { value, .. } => add(value, used),
                Stmt::Set { var, value } => {
                    used.insert(*var);
                    add(value, used);
                }
                Stmt::Alloc { len, .. } => add(len, used),
                Stmt::Data { atoms, .. } => atoms.iter().for_each(|a| add(a, used)),
                Stmt::Store { buf, index, value } => {
                    used.insert(*buf);
                    add(index, used);
                    add(value, used);
                }
                Stmt::Swap { a, b } => {
                    used.insert(*a);
                    used.insert(*b);
                }
                Stmt::For { count, body, .. } => {
                    add(count, used);
                    walk(body, used);
                }
                Stmt::Reduce {
                    seed,
                    count,
                    body,
                    item,
                    ..
                } => {
                    seed.iter().for_each(|e| add(e, used));
                    add(count, used);
                    add(item, used);
                    walk(body, used);
                }
                Stmt::If {
                    cond,
                    then,
                    otherwise,
                } => {
                    add(cond, used);
                    walk(then, used);
                    walk(otherwise, used);
                }
                Stmt::DoWhile { body, cond } => {
                    walk(body, used);
                    add(cond, used);
                }
                Stmt::Fail { .. } => {}
                Stmt::Call { args, .. } => args.iter().for_each(|a| add(a, used)),
            }
        }
    }
    let mut used = HashSet::new();
    walk(stmts, &mut used);
    for e in exprs {
        e.each_var(&mut |x| {
            used.insert(x);
        });
    }
    used
}

/// Whether `stmts` may allocate a buffer from the runtime's region (of
/// `RT_BIG` bytes or more): one of a length known only at run time or of
/// that size, or a runtime call (which may allocate its own).
fn big_buffers(stmts: &[Stmt]) -> bool {
    const RT_BIG: i64 = 1 << 16;
    let mut big = false;
    Stmt::each(stmts, &mut |s| match s {
        Stmt::Alloc { elem, len, .. } => {
            let size = match elem {
                Elem::Int => 8,
                Elem::Float => 4,
                Elem::Bool => 1,
            };
            big |= !matches!(len, Expr::Int(n) if n.saturating_mul(size) < RT_BIG);
        }
        Stmt::Call { .. } => big = true,
        _ => {}
    });
    big
}

/// Whether a buffer of `n` atoms is small enough for the stack.
fn small(n: i64) -> bool {
    (0..=64).contains(&n)
}

/// The buffers of `stmts` (not nested) that are on the heap, to free.
fn heap_buffer(s: &Stmt) -> Option<Var> {
    match s {
        Stmt::Alloc { buf, len, .. } if !matches!(len, Expr::Int(n) if small(*n)) => Some(*buf),
        _ => None,
    }
}

/// The heap buffers of a loop's body that one allocation serves for all
/// its iterations (on a thread, all those of its chunks): allocated in the
/// body, or in a sequential loop or an `if` in it (not in a reduction's
/// body or a nested parallel loop, which are functions of their own), of
/// a length that reads no variable the body declares or sets and no
/// buffer it writes, and swapped (a loop's state and its next value) only
/// with such buffers. A fresh buffer's atoms are unset, so no iteration
/// can read what the one before wrote; allocated where the body first
/// reaches it, it fails (too large) exactly where it did.
fn invariant_buffers(body: &[Stmt]) -> Vec<(Var, Elem)> {
    let mut changed = HashSet::new();
    let mut swaps = Vec::new();
    Stmt::each(body, &mut |s| match s {
        Stmt::Let { var, .. } | Stmt::Set { var, .. } => {
            changed.insert(*var);
        }
        Stmt::For { index, .. } => {
            changed.insert(*index);
        }
        Stmt::Reduce { acc, index, .. } => {
            changed.insert(*acc);
            changed.insert(*index);
        }
        // A length may load from a buffer: one the body writes changes.
        Stmt::Store { buf, .. } => {
            changed.insert(*buf);
        }
        Stmt::Call { args, .. } => args.iter().for_each(|a| {
            a.each_var(&mut |x| {
                changed.insert(x);
            })
        }),
        Stmt::Swap { a, b } => {
            changed.extend([*a, *b]);
            swaps.push((*a, *b));
        }
        _ => {}
    });
    fn walk(stmts: &[Stmt], changed: &HashSet<Var>, found: &mut Vec<(Var, Elem)>) {
        for s in stmts {
            match s {
                Stmt::Alloc { buf, elem, len } if heap_buffer(s).is_some() => {
                    let mut invariant = true;
                    len.each_var(&mut |x| invariant &= !changed.contains(&x));
                    if invariant {
                        found.push((*buf, *elem));
                    }
                }
                Stmt::For {
                    parallel: false,
                    body,
                    ..
                }
                | Stmt::DoWhile { body, .. } => walk(body, changed, found),
                Stmt::If { then, otherwise, .. } => {
                    walk(then, changed, found);
                    walk(otherwise, changed, found);
                }
                _ => {}
            }
        }
    }
    let mut found = Vec::new();
    walk(body, &changed, &mut found);
    // A buffer swapped with one that stays (freed each iteration, or from
    // outside the loop) stays too.
    loop {
        let kept: HashSet<Var> = found.iter().map(|f| f.0).collect();
        let lone = |x: &Var| {
            swaps
                .iter()
                .any(|(a, b)| (a == x && !kept.contains(b)) || (b == x && !kept.contains(a)))
        };
        let before = found.len();
        found.retain(|(b, _)| !lone(b));
        if found.len() == before {
            return found;
        }
    }
}

/// A rough count of the operations of one iteration of `stmts`, for the
/// runtime's choice of running a loop in parallel and of its chunks. A
/// loop's trip count is its count where that is a constant, or an Int
/// expression of the variables `known` before the loop (the cost is then
/// computed at run time: a hist over a run-time count of items, a map
/// over an `iota` of an argument) and of those `inside` it: its Int
/// `let`s of such expressions, and each enclosing loop's index at its
/// middle iteration (a loop over a part `lo … hi` of the items, `lo` and
/// `hi` computed from the part's index: about the items over the parts);
/// any other count counts as 64 iterations, a `while` as 256, a runtime
/// call as 1,000.
fn cost(stmts: &[Stmt], known: &HashSet<Var>, inside: &HashMap<Var, String>) -> Cost {
    let mut inside = inside.clone();
    let mut total = Cost::Known(0);
    for s in stmts {
        let trips = |count: &Expr, inside: &HashMap<Var, String>| match count {
            Expr::Int(n) => Cost::Known(u64::try_from(*n).unwrap_or(0)),
            _ => trips_c(count, known, inside)
                .map_or(Cost::Known(64), |c| Cost::Run(format!("fmax(0.0, {c})"))),
        };
        let one = match s {
            Stmt::Let {
                var,
                elem: Elem::Int,
                value,
            } => {
                if let Some(c) = trips_c(value, known, &inside).filter(|c| c.len() <= LONGEST_TRIPS) {
                    inside.insert(*var, c);
                }
                Cost::Known(1)
            }
            Stmt::Set { var, .. } => {
                inside.remove(var);
                Cost::Known(1)
            }
            Stmt::For {
                index, count, body, ..
            } => {
                let mut within = inside.clone();
                middle(*index, count, known, &mut within);
                trips(count, &inside).mul(cost(body, known, &within))
            }
            Stmt::Reduce {
                index, count, body, ..
            } => {
                let mut within = inside.clone();
                middle(*index, count, known, &mut within);
                trips(count, &inside).mul(cost(body, known, &within).add(Cost::Known(1)))
            }
            Stmt::DoWhile { body, .. } => cost(body, known, &inside).mul(Cost::Known(256)),
            Stmt::If { then, otherwise, .. } => cost(then, known, &inside)
                .max(cost(otherwise, known, &inside))
                .add(Cost::Known(1)),
            Stmt::Call {
                func: "rt_prefetch", ..
            } => Cost::Known(1),
            Stmt::Call { .. } | Stmt::Alloc { .. } => Cost::Known(1000),
            _ => Cost::Known(1),
        };
        total = total.add(one);
    }
    total.at_least_one()
}

/// The longest C expression a variable inside a loop stands for in a
/// trip count (each use of a `let` copies its expression).
const LONGEST_TRIPS: usize = 400;

/// A loop's `index` at its middle iteration, as [`trips_c`] writes it,
/// into `inside`, where its `count` is such an expression.
fn middle(index: Var, count: &Expr, known: &HashSet<Var>, inside: &mut HashMap<Var, String>) {
    if let Some(c) = trips_c(count, known, inside).filter(|c| c.len() <= LONGEST_TRIPS) {
        inside.insert(index, format!("floor(({c} - 1.0) / 2.0)"));
    }
}

/// A trip count as a C expression of type double, where it is Int
/// arithmetic that cannot fail (a division only by a positive constant)
/// on constants, `known` variables and those `inside` a loop (each given
/// as such an expression); a `min` of such a count and one known only
/// inside the loop (a part's items, at most all of them) is estimated by
/// the first.
fn trips_c(count: &Expr, known: &HashSet<Var>, inside: &HashMap<Var, String>) -> Option<String> {
    match count {
        Expr::Int(n) => Some(format!("{n}.0")),
        Expr::Var(x) if known.contains(x) => Some(format!("(double){}", v(*x))),
        Expr::Var(x) => inside.get(x).cloned(),
        Expr::Op { op: "min", args } if args.len() == 2 => {
            match (trips_c(&args[0], known, inside), trips_c(&args[1], known, inside)) {
                (Some(a), Some(b)) => Some(format!("fmin({a}, {b})")),
                (a, b) => a.or(b),
            }
        }
        Expr::Op { op: "/", args } if args.len() == 2 && matches!(args[1], Expr::Int(d) if d > 0) => {
            Some(format!(
                "floor({} / {})",
                trips_c(&args[0], known, inside)?,
                trips_c(&args[1], known, inside)?
            ))
        }
        Expr::Op { op, args } if args.len() == 2 => {
            let a = trips_c(&args[0], known, inside)?;
            let b = trips_c(&args[1], known, inside)?;
            match *op {
                "+" | "dim+" => Some(format!("({a} + {b})")),
                "-" => Some(format!("({a} - {b})")),
                "*" | "dim*" => Some(format!("({a} * {b})")),
                "max" => Some(format!("fmax({a}, {b})")),
                _ => None,
            }
        }
        _ => None,
    }
}

/// An estimate of operations: a constant, or C computing it (a double)
/// before the loop.
enum Cost {
    Known(u64),
    Run(String),
}

impl Cost {
    fn join(self, other: Cost, known: fn(u64, u64) -> u64, run: fn(&str, &str) -> String) -> Cost {
        match (self, other) {
            (Cost::Known(a), Cost::Known(b)) => Cost::Known(known(a, b)),
            (a, b) => Cost::Run(run(&a.double(), &b.double())),
        }
    }

    fn add(self, other: Cost) -> Cost {
        self.join(other, u64::saturating_add, |a, b| format!("({a} + {b})"))
    }

    fn mul(self, other: Cost) -> Cost {
        self.join(other, u64::saturating_mul, |a, b| format!("({a} * {b})"))
    }

    fn max(self, other: Cost) -> Cost {
        self.join(other, u64::max, |a, b| format!("fmax({a}, {b})"))
    }

    fn at_least_one(self) -> Cost {
        match self {
            Cost::Known(n) => Cost::Known(n.max(1)),
            Cost::Run(c) => Cost::Run(format!("fmax(1.0, {c})")),
        }
    }

    fn double(&self) -> String {
        match self {
            Cost::Known(n) => format!("{n}.0"),
            Cost::Run(c) => c.clone(),
        }
    }

    /// The cost as the runtime's argument.
    fn c(&self) -> String {
        match self {
            Cost::Known(n) => n.to_string(),
            Cost::Run(c) => format!("rt_cost({c})"),
        }
    }
}

/// A scalar primitive applied to operands written in C.
fn op_c(op: &str, a: &[String]) -> String {
    let un = |f: &str| format!("{f}({})", a[0]);
    let bin = |f: &str| format!("{f}({}, {})", a[0], a[1]);
    let infix = |o: &str| format!("({} {o} {})", a[0], a[1]);
    match op {
        "+" => bin("rt_add"),
        "dim+" => bin("rt_dim_add"),
        "wrap" => bin("rt_wrap"),
        "dim*" => bin("rt_dim_mul"),
        "-" => bin("rt_sub"),
        "*" => bin("rt_mul"),
        "/" => bin("rt_div"),
        "mod" => bin("rt_mod"),
        "^" => bin("rt_pow"),
        "max" => bin("rt_max"),
        "min" => bin("rt_min"),
        "bit-and" => infix("&"),
        "bit-or" => infix("|"),
        "bit-xor" => infix("^"),
        "shl" => bin("rt_shl"),
        "shr" => bin("rt_shr"),
        "f.+" => infix("+"),
        "f.-" => infix("-"),
        "f.*" => infix("*"),
        "f./" => infix("/"),
        "f.^" => bin("rt_powf"),
        "f.max" => bin("rt_fmax"),
        "f.min" => bin("rt_fmin"),
        "f.atan2" => bin("atan2f"),
        "f.mod" => bin("rt_fmod"),
        "==" | "f.==" | "bool.==" => infix("=="),
        "!=" | "f.!=" | "bool.!=" => infix("!="),
        "<" | "f.<" => infix("<"),
        ">" | "f.>" => infix(">"),
        "<=" | "f.<=" => infix("<="),
        ">=" | "f.>=" => infix(">="),
        "and" => infix("&&"),
        "or" => infix("||"),
        "not" => format!("(!{})", a[0]),
        "bit-not" => format!("(~{})", a[0]),
        "popc" => un("rt_popc"),
        "sqrt" | "f.sqrt" => un("sqrtf"),
        "f.ln" => un("rt_logf"),
        "f.exp" => un("rt_expf"),
        "f.tanh" => un("rt_tanhf"),
        "i->f" => format!("((float){})", a[0]),
        "i->bool" => format!("({} != 0)", a[0]),
        "bool->i" => format!("((int64_t){})", a[0]),
        "bool->f" => format!("({} ? 1.0f : 0.0f)", a[0]),
        "truncate" => format!("rt_integral(truncf({}))", a[0]),
        "round" => format!("rt_integral(rt_round_even({}))", a[0]),
        "floor" => format!("rt_integral(floorf({}))", a[0]),
        "ceiling" => format!("rt_integral(ceilf({}))", a[0]),
        "neg" => format!("rt_sub(0, {})", a[0]),
        "abs" => un("rt_abs"),
        "signum" => un("rt_signum"),
        "f.neg" => format!("(-{})", a[0]),
        "f.abs" => un("fabsf"),
        "f.signum" => un("rt_fsignum"),
        "f.sin" => un("sinf"),
        "f.cos" => un("cosf"),
        "f.tan" => un("tanf"),
        "f.asin" => un("asinf"),
        "f.acos" => un("acosf"),
        "f.atan" => un("atanf"),
        "f.sinh" => un("sinhf"),
        "f.cosh" => un("coshf"),
        "f.log2" => un("log2f"),
        "f.log10" => un("log10f"),
        "f.floor" => un("floorf"),
        "f.ceiling" => un("ceilf"),
        "f.round" => un("rt_round_even"),
        "f.isnan" => un("isnan"),
        "clip" => format!("rt_min(rt_max({}, {}), {})", a[2], a[0], a[1]),
        "f.clip" => format!("rt_fmin(rt_fmax({}, {}), {})", a[2], a[0], a[1]),
        "random.uniform" => bin("rt_random_uniform"),
        "random.normal" => bin("rt_random_normal"),
        "random.int" => format!("rt_random_int({}, {}, {}, {})", a[0], a[1], a[2], a[3]),
        // Not primitives of the language: `f.^` in two halves (see
        // `allocate/powers.rs`), log2 |x| held in an Int's bits …
        "pow.log2" => un("rt_pow_log2_bits"),
        "pow.by-log2" => format!("rt_pow_by_log2_bits({}, {}, {})", a[0], a[1], a[2]),
        // … either by a whole-number exponent …
        "pow.whole" => bin("rt_powf_whole"),
        "pow.by-log2-whole" => format!("rt_pow_by_log2_bits_whole({}, {}, {})", a[0], a[1], a[2]),
        // … one exp for two differences from their maximum (see
        // `allocate/exps.rs`) …
        "exp.either" => bin("rt_exp_either"),
        "exp.given" => bin("rt_exp_given"),
        // … and `searchsorted` by element type
        // (breakpoints' address, stride, count, value, right?).
        "search.int" | "search.float" | "search.bool" => {
            format!("rt_search_{}({})", &op[7..], a.join(", "))
        }
        // (breakpoints' address, stride, count: out of order?)
        "unsorted.int" | "unsorted.float" | "unsorted.bool" => {
            format!("rt_unsorted_{}({})", &op[9..], a.join(", "))
        }
        // (a buffer's length, an offset, a stride, a count: the atoms
        // at offset + stride × j, j < count, all inside it?)
        "span.within" => format!("rt_span_within({})", a.join(", ")),
        other => format!("/* unknown {other} */ 0"),
    }
}

//! Random differentiable Remora functions, for the laws of automatic
//! differentiation (`tests/ad_laws.rs`, `fuzz/fuzz_targets/derivatives.rs`).
//!
//! [`case`] reads a stream of choice bytes and writes a function
//! `(f (x [Float …]))` with a Float array result, built from the [`RULES`]
//! (each a template whose holes are random sub-expressions of related
//! shapes: the same shape, a prefix of it to lift over a frame, one more
//! leading axis to reduce, a cell to sum), then random points `x`,
//! directions `v` and cotangents `u`, one per position of a random outer
//! frame. The program applies the derivatives lifted over that frame (a
//! lambda around `jvp` and `vjp`; `grad` directly), and `f` at `x ± s·v`
//! for central differences.
//!
//! [`check`] runs the program on the interpreter and checks, at every
//! position of the frame, the transpose law ⟨u, J·v⟩ = ⟨Jᵀ·u, v⟩ (`jvp`
//! against `vjp`), `grad` against `vjp` with cotangent 1, and `jvp` against
//! central differences ([`central_difference_agrees`]).
//!
//! Adding a rule is one line in [`RULES`].

use remora_syntax::{RealFs, SourceMap, load_program_text};
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// One way to build a Float array expression of a wanted shape `S`.
///
/// Holes in the template: `{a}` `{b}` an expression of shape `S`; `{p}` of
/// a prefix of `S` (lifted over the rest); `{r}` of shape `[k] ++ S`;
/// `{c}` of shape `S ++ C` with `{C}` the cell shape `C` written as an
/// index (`[2 3]`); `{k}` a scalar constant; `{v}` and `{u}` fresh
/// variables of shape `S` and `{body}` an expression of shape `S` in which
/// they are in scope; `{S}` the type `[Float S]`; `{g}` a function the
/// program defines, from an array of a random shape to one of shape `S`,
/// and `{t}` its argument; `{h}` such a function to a suffix of `S` and
/// `{th}` its argument lifted over the rest (a lifted call); `{o}` of shape
/// `[1] ++ S[1..]` and `{f}` of `[S0+1] ++ S[1..]` (rank ≥ 1); `{W}` of
/// shape `[S0+S1−1] ++ S[2..]` and `{w}` the width `S1` (rank ≥ 2: its
/// windows are of shape `S`); `{R}` a call of a function the program
/// defines whose parameter is a record of two Float arrays, made of two
/// expressions (its body reads the fields). Holes whose text the
/// generator writes whole: `{sorted}` (`sort-by`), `{nth computed}`,
/// `{index computed}` and `{gather}` (gathers by indices computed from
/// the parameter), `{hist f.max}` `{hist f.min}` `{hist f.*}` `{hist
/// lambda}` `{hist lifted}`, `{reduce
/// lifted}` `{iscan lifted}` (by a lambda, explicitly instantiated so as
/// to lift over a frame), `{record loop}` (an `iterate` whose state is a
/// record), `{unbox record}` (a record made outside an `unbox`, read in
/// it), `{outer}` (by a lambda on cells, maybe lifted over a frame),
/// `{unary frame}` `{binary frame}` (a frame of `S0` functions on scalars,
/// from [`UNARY`] and [`BINARY`]), `{items}` (a loop's items, a vector
/// in (−0.5, 0.5)), `{linspace}` (from and to of `S` but its last axis),
/// `{closure}` `{passed}` (a lambda closing over a scalar of the
/// parameter, bound by `let` and applied, or passed to a function that
/// applies it twice), `{inner derivative}` (`grad` of a lambda closing
/// over a scalar of the parameter, applied);
/// sort keys and extrema are kept apart (distinct integers plus
/// less than 0.2 either way), so that no point sits on a tie. A hole named
/// twice is the same expression twice.
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    pub name: &'static str,
    pub template: &'static str,
    /// Whether reverse mode (`vjp`, `grad`) has this rule (else only
    /// `jvp` against central differences is checked).
    pub reverse: bool,
    /// Whether the rule only builds scalars (`S` is `[]`).
    pub scalar_only: bool,
    /// The least rank of `S` the rule builds.
    pub min_rank: usize,
}

const fn rule(name: &'static str, template: &'static str) -> Rule {
    Rule {
        name,
        template,
        reverse: true,
        scalar_only: false,
        min_rank: 0,
    }
}

const fn of_rank(min_rank: usize, name: &'static str, template: &'static str) -> Rule {
    Rule {
        min_rank,
        ..rule(name, template)
    }
}

const fn scalar_only(name: &'static str, template: &'static str) -> Rule {
    Rule {
        scalar_only: true,
        ..rule(name, template)
    }
}

/// The rules the derivative transformation has. Arguments of `f.ln`,
/// `f.sqrt`, `f./`'s divisor and `f.exp` are kept in their domains (and
/// `f.exp`'s from overflowing) by construction. A hole named twice is the
/// same text (`call twice`).
pub const RULES: &[Rule] = &[
    rule("f.+", "(f.+ {a} {b})"),
    rule("f.+ lifted", "(f.+ {p} {a})"),
    rule("f.-", "(f.- {a} {b})"),
    rule("f.- lifted", "(f.- {a} {p})"),
    rule("f.*", "(f.* {a} {b})"),
    rule("f.* lifted", "(f.* {p} {a})"),
    rule("f./", "(f./ {a} (f.+ 1.5 (f.sin {p})))"),
    rule("f./ of a constant", "(f./ {k} (f.+ 1.5 (f.sin {a})))"),
    rule("f.neg", "(f.neg {a})"),
    rule("f.exp", "(f.exp (f.* 0.5 (f.tanh {a})))"),
    rule("f.exp unbounded", "(f.exp (f.* 0.25 {a}))"),
    rule("f.ln", "(f.ln (f.+ 1.5 (f.cos {a})))"),
    rule("f.sin", "(f.sin {a})"),
    rule("f.cos", "(f.cos {a})"),
    rule("f.tanh", "(f.tanh {a})"),
    rule("f.sqrt", "(f.sqrt (f.+ 1.5 (f.sin {a})))"),
    rule("sqrt", "(sqrt (f.+ 1.25 (f.tanh {a})))"),
    rule("f.sum", "((i-app f.sum {C}) {c})"),
    scalar_only("f.sum whole", "(f.sum {c})"),
    scalar_only("reduce f.+", "(reduce f.+ {r})"),
    rule("let", "(let ((val {v} {a})) {body})"),
    rule("call", "({g} {t})"),
    // (The threshold is off the grid of generated values, so that no
    // point sits on the step.)
    rule(
        "constant parts",
        "(f.* {a} (i->f (+ 1 (bool->i (f.> {b} 0.3183099)))))",
    ),
    rule("if", "(if (f.> {k} 0.0) {a} {b})"),
    rule("call twice", "(f.+ ({g} {t}) ({g} {t}))"),
    rule("f.^", "(f.^ (f.+ 1.5 (f.sin {a})) 1.5)"),
    // (Offsets off the grid: `a` and `b` of one value, zero say, would
    // otherwise meet at the kink, where central differences average the
    // two sides.)
    rule("f.max", "(f.max {a} (f.+ 0.1415926 (f.* 0.5 {b})))"),
    rule("f.min", "(f.min {a} (f.+ 0.1415926 (f.* 0.5 {b})))"),
    rule("f.abs", "(f.abs (f.+ 1.5 (f.sin {a})))"),
    rule("select", "(select (f.> {k} 0.0) {a} {b})"),
    scalar_only("reduce f.*", "(reduce f.* (f.+ 1.0 (f.* 0.25 (f.sin {r}))))"),
    rule("call lifted", "({h} {th})"),
    rule(
        "f.mod",
        "(f.mod (f.+ {a} 0.3183099) (f.+ 2.7182817 (f.* 0.25 (f.sin {b}))))",
    ),
    rule("f.clip", "(f.clip -0.5 (f.+ 0.5314159 (f.* 0.5 {b})) {a})"),
    rule("head", "(head {r})"),
    rule("last", "(last {r})"),
    rule("nth", "(nth {r} 0)"),
    of_rank(1, "reverse", "(reverse {a})"),
    of_rank(1, "rotate", "(rotate {a} 1)"),
    of_rank(1, "tail", "(tail {f})"),
    of_rank(1, "curtail", "(curtail {f})"),
    of_rank(
        1,
        "append",
        "(f.+ (tail (append {o} {a})) (curtail (append {a} {o})))",
    ),
    of_rank(2, "windows", "((i-app windows {w}) {W})"),
    rule("iterate", "(iterate 2 (fn (({v} {S})) {body}) {a})"),
    rule("fold", "(fold (fn (({v} {S}) ({u} {S})) {body}) {a} {r})"),
    rule(
        "scan lambda",
        "(last (scan (fn (({v} {S}) ({u} {S})) {body}) {a} {r}))",
    ),
    rule("reduce lambda", "(reduce (fn (({v} {S}) ({u} {S})) {body}) {r})"),
    rule("iscan f.*", "(last (iscan f.* (f.+ 1.0 (f.* 0.25 (f.sin {r})))))"),
    rule(
        "unbox",
        "(unbox ($n i (range 2)) (f.* {a} (i->f (reduce/zero + 1 i))))",
    ),
    rule("record parameter", "{R}"),
    // Boxes of a varying array's first items, and of all but its first.
    rule(
        "unbox take*",
        "(unbox ($m t (take* 1 {r})) (reduce/zero f.+ {a} (f.sin t)))",
    ),
    rule(
        "unbox drop*",
        "(unbox ($m t (drop* 1 {r})) (reduce/zero f.+ {a} (f.* t t)))",
    ),
    rule(
        "fold-right",
        "(fold-right (fn (({u} {S}) ({v} {S})) {body}) {a} {r})",
    ),
    rule(
        "reduce/zero",
        "(reduce/zero (fn (({v} {S}) ({u} {S})) {body}) {a} {r})",
    ),
    // Gathers and sorts whose indices and order come from keys computed
    // from the parameter but kept apart (distinct integers plus less than
    // 0.2 either way), so that no point sits on a tie.
    of_rank(1, "sort-by", "{sorted}"),
    rule("nth computed index", "{nth computed}"),
    scalar_only("index computed index", "{index computed}"),
    of_rank(1, "nth computed indices", "{gather}"),
    of_rank(1, "hist f.max", "{hist f.max}"),
    of_rank(1, "hist f.min", "{hist f.min}"),
    of_rank(1, "hist f.*", "{hist f.*}"),
    // By a lambda that is not associative and closes over a varying
    // cell; some indices out of range (skipped).
    of_rank(1, "hist lambda", "{hist lambda}"),
    // Lifted over a frame (`S` is the frame and the bins): by a lambda, or
    // by `f.*` of factors near 1, the items (and `ne`) of that frame.
    of_rank(1, "hist lifted", "{hist lifted}"),
    rule("reduce lifted", "{reduce lifted}"),
    of_rank(1, "iscan lifted", "{iscan lifted}"),
    rule("iterate of a record", "{record loop}"),
    // `S` = a frame (maybe none) ++ [m n] ++ a cell: by a lambda on cells
    // that closes over a varying cell, lifted over the frame.
    of_rank(2, "outer", "{outer}"),
    // A record made of the parameter outside an `unbox`, read inside it.
    rule("unbox of a record", "{unbox record}"),
    // A fold from a frame of initial states (lifted over `S`).
    rule(
        "fold lifted",
        "(fold (fn ((s Float) (q Float)) (f.+ (f.* 0.5 (f.sin s)) (f.* q (f.cos s)))) {a} [0.5 -0.25 1.0])",
    ),
    rule(
        "fold-right lifted",
        "(fold-right (fn ((q Float) (s Float)) (f.+ (f.* 0.5 (f.sin s)) (f.* q (f.cos s)))) {a} [0.5 -0.25 1.0])",
    ),
    // Frames of functions (`S0` of them, primitives and lambdas that may
    // close over a varying scalar), each applied to its own cells of `S`:
    // applied, and as a loop's steps.
    of_rank(1, "frame of functions", "({unary frame} {a})"),
    of_rank(1, "frame of binary functions", "({binary frame} {a} {p})"),
    of_rank(1, "fold over a frame", "(fold {binary frame} {a} {items})"),
    of_rank(1, "iterate over a frame", "(iterate 2 {unary frame} {a})"),
    // Products of factors near 1 over cells of any rank, whole and lifted.
    scalar_only("f.product whole", "(f.product (f.+ 1.0 (f.* 0.25 (f.sin {c}))))"),
    rule(
        "f.product lifted",
        "((i-app f.product {C}) (f.+ 1.0 (f.* 0.25 (f.sin {c}))))",
    ),
    rule("trace", "(trace 0 {a})"),
    // `S` = a frame ++ [n]: from and to of the frame (or a prefix of it).
    of_rank(1, "linspace", "{linspace}"),
    // A function bound by `let` that closes over a varying scalar, applied
    // (lifted over `S`); and passed to a function the program defines
    // that applies it twice (that call lifted over `S`).
    rule("let-bound closure", "{closure}"),
    rule("function passed on", "{passed}"),
    // A derivative taken inside the function (a second derivative): the
    // gradient of a lambda closing over a varying scalar, lifted over `S`.
    rule("inner derivative", "{inner derivative}"),
];

/// Scalar functions for a frame of them; `{e}` a scalar expression (of
/// the parameter, maybe), `{k}` a constant.
const UNARY: &[&str] = &[
    "f.sin",
    "f.cos",
    "f.tanh",
    "(fn ((y Float)) (f.* y (f.tanh {e})))",
    "(fn ((y Float)) (f.+ (f.* {k} y) (f.sin y)))",
];
const BINARY: &[&str] = &[
    "f.+",
    "f.-",
    "f.*",
    "(fn ((a Float) (b Float)) (f.+ (f.* 0.5 (f.sin a)) (f.* b (f.cos a))))",
    "(fn ((a Float) (b Float)) (f.* (f.tanh {e}) (f.+ a (f.sin b))))",
];

/// A generated case: the program and what [`check`] needs to read it.
#[derive(Clone, Debug)]
pub struct Case {
    pub text: String,
    /// `f`'s parameter and result shapes, and the outer frame.
    pub param: Vec<usize>,
    pub result: Vec<usize>,
    pub frame: Vec<usize>,
    /// The rules used, by index into [`RULES`].
    pub rules: BTreeSet<usize>,
    /// Whether every rule used has reverse mode (and so the program
    /// applies `vjp` and, for a scalar result, `grad`).
    pub reverse: bool,
    /// The points, directions and cotangents, row-major over the frame.
    pub x: Vec<f32>,
    pub v: Vec<f32>,
    pub u: Vec<f32>,
    /// The finite-difference step: `x ± h·v`, `x ± (h/4)·v` … ([`STEPS`] of them).
    pub h: f32,
}

/// The choice bytes: each choice reads one; past the end every choice is 0.
struct Bytes<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.bytes.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    fn below(&mut self, n: usize) -> usize {
        if n <= 1 { 0 } else { usize::from(self.byte()) % n }
    }

    fn exhausted(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    /// A value in [-2, 2] on a grid of 1/64 (exact in f32 and in decimal).
    fn value(&mut self) -> f32 {
        let n = i32::from(self.byte()) + 256 * i32::from(self.byte() & 1);
        (n - 256) as f32 / 128.0
    }

    /// A shape of rank up to `max_rank`, axes of 1 to 3.
    fn shape(&mut self, max_rank: usize) -> Vec<usize> {
        let rank = self.below(max_rank + 1);
        (0..rank).map(|_| 1 + self.below(3)).collect()
    }
}

struct Gen<'a> {
    bytes: Bytes<'a>,
    /// Definitions of helper functions, written before `f`.
    defs: String,
    fresh: usize,
    rules: BTreeSet<usize>,
}

/// Variables in scope: name and shape.
type Scope = Vec<(String, Vec<usize>)>;

fn float(x: f32) -> String {
    let s = format!("{x:?}");
    if s.contains('.') || s.contains('e') || s.contains("inf") || s.contains("NaN") {
        s
    } else {
        format!("{s}.0")
    }
}

/// `values` (row-major) as a Remora array literal of `shape`.
pub fn literal(shape: &[usize], values: &[f32]) -> String {
    match shape.split_first() {
        None => values.first().map_or_else(|| "0.0".to_string(), |x| float(*x)),
        Some((&n, rest)) => {
            let cell: usize = rest.iter().product();
            let items: Vec<String> = (0..n)
                .map(|i| literal(rest, values.get(i * cell..(i + 1) * cell).unwrap_or_default()))
                .collect();
            format!("[{}]", items.join(" "))
        }
    }
}

fn type_of(shape: &[usize]) -> String {
    if shape.is_empty() {
        "Float".to_string()
    } else {
        format!(
            "[Float {}]",
            shape.iter().map(usize::to_string).collect::<Vec<_>>().join(" ")
        )
    }
}

fn index(shape: &[usize]) -> String {
    format!(
        "[{}]",
        shape.iter().map(usize::to_string).collect::<Vec<_>>().join(" ")
    )
}

impl Gen<'_> {
    /// A random permutation of `0..n`.
    fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut p: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = self.bytes.below(i + 1);
            p.swap(i, j);
        }
        p
    }

    /// An expression of `shape` (`[k] ++ C`) whose items are kept apart:
    /// every atom of item i is a distinct integer (a permutation) plus
    /// less than 0.2 either way, so the items' order (by any atom, or by
    /// the sum of a cell) never ties.
    fn apart(&mut self, shape: &[usize], scope: &Scope, depth: usize) -> String {
        let k = shape.first().copied().unwrap_or(1);
        let cell: usize = shape.iter().skip(1).product();
        let perm = self.permutation(k);
        let offsets: Vec<f32> = perm
            .iter()
            .flat_map(|&p| std::iter::repeat_n(p as f32, cell))
            .collect();
        let e = self.expr(shape, scope, depth);
        format!("(f.+ (f.* 0.2 (f.tanh {e})) {})", literal(shape, &offsets))
    }

    /// An index below `k` computed from the parameter: a place of the
    /// grade of keys kept apart.
    fn computed_index(&mut self, k: usize, scope: &Scope, depth: usize) -> String {
        let keys = self.apart(&[k], scope, depth);
        let j = self.bytes.below(k);
        format!("(index (grade-by f.< {keys}) {j})")
    }

    /// `(sort-by lt items)` of shape `S` (`[k] ++ C`), by the sum of each
    /// cell.
    fn sorted(&mut self, shape: &[usize], scope: &Scope, depth: usize) -> String {
        let items = self.apart(shape, scope, depth);
        let cell = &shape[1..];
        let lt = if cell.is_empty() {
            "f.<".to_string()
        } else {
            let t = type_of(cell);
            let sum = format!("(i-app f.sum {})", index(cell));
            format!("(fn ((a {t}) (b {t})) (f.< ({sum} a) ({sum} b)))")
        };
        format!("(sort-by {lt} {items})")
    }

    /// `((i-app hist m) op ne idx xs)` of shape `S` (`[m] ++ C`): by an
    /// extremum, every item and the initial cell kept apart (the initial
    /// cell half way between two items' integers); by `f.*`, factors near 1.
    /// Lifted, `S` is a frame and `[m]`, the items of that frame.
    fn hist(&mut self, op: &str, shape: &[usize], scope: &Scope, depth: usize) -> String {
        if op == "lifted" {
            // `S` = frame ++ [m], scalar cells.
            let m = shape.last().copied().unwrap_or(1);
            let frame = &shape[..shape.len() - 1];
            let n = 1 + self.bytes.below(3);
            let bins: Vec<String> = (0..n).map(|_| self.bytes.below(m + 1).to_string()).collect();
            let mut items_shape = frame.to_vec();
            items_shape.push(n);
            let ne = self.expr(frame, scope, depth);
            let items = self.expr(&items_shape, scope, depth);
            let (op, ne, items) = if self.bytes.below(2) == 0 {
                (
                    "(fn ((a Float) (b Float)) (f.+ (f.* 0.5 (f.sin a)) (f.* b (f.cos a))))".to_string(),
                    ne,
                    items,
                )
            } else {
                (
                    "f.*".to_string(),
                    format!("(f.+ 1.0 (f.* 0.25 (f.sin {ne})))"),
                    format!("(f.+ 1.0 (f.* 0.25 (f.sin {items})))"),
                )
            };
            // (Instantiated in full: the items' cell is `[n]`, lifted over
            // the frame.)
            return format!(
                "((i-app (t-app hist Float) {m} {n} []) {op} {ne} [{}] {items})",
                bins.join(" ")
            );
        }
        let m = shape.first().copied().unwrap_or(1);
        let cell = &shape[1..];
        let n = 1 + self.bytes.below(3);
        let mut items_shape = vec![n];
        items_shape.extend(cell);
        // (By a lambda, bin `m` is out of range: its items are skipped.)
        let range = if op == "lambda" { m + 1 } else { m };
        let bins: Vec<String> = (0..n).map(|_| self.bytes.below(range).to_string()).collect();
        if op == "lambda" {
            let ne = self.expr(cell, scope, depth);
            let items = self.expr(&items_shape, scope, depth);
            let closed = self.expr(cell, scope, depth);
            let t = type_of(cell);
            let f = format!("(fn ((a {t}) (b {t})) (f.+ (f.* 0.5 (f.sin a)) (f.* b (f.cos {closed}))))");
            return format!("((i-app hist {m}) {f} {ne} [{}] {items})", bins.join(" "));
        }
        let (ne, items) = if op == "f.*" {
            let ne = self.expr(cell, scope, depth);
            let items = self.expr(&items_shape, scope, depth);
            (
                format!("(f.+ 1.0 (f.* 0.25 (f.sin {ne})))"),
                format!("(f.+ 1.0 (f.* 0.25 (f.sin {items})))"),
            )
        } else {
            let items = self.apart(&items_shape, scope, depth);
            let at = self.bytes.below(n + 1) as f32 - 0.5;
            let ne = self.expr(cell, scope, depth);
            let size: usize = cell.iter().product();
            let offset = literal(cell, &vec![at; size]);
            (format!("(f.+ (f.* 0.2 (f.tanh {ne})) {offset})"), items)
        };
        format!("((i-app hist {m}) {op} {ne} [{}] {items})", bins.join(" "))
    }

    /// A `reduce` (of shape `S` = `F ++ C`) or `iscan` (`F ++ [k] ++ C`)
    /// by a lambda, lifted over the frame `F`.
    fn lifted_scan(&mut self, name: &str, shape: &[usize], scope: &Scope, depth: usize) -> String {
        let reduce = name == "reduce lifted";
        let (frame, k, cell) = if reduce {
            let split = self.bytes.below(shape.len() + 1);
            (
                shape[..split].to_vec(),
                1 + self.bytes.below(3),
                shape[split..].to_vec(),
            )
        } else {
            let at = self.bytes.below(shape.len());
            (shape[..at].to_vec(), shape[at], shape[at + 1..].to_vec())
        };
        let mut arg = frame;
        arg.push(k);
        arg.extend(&cell);
        self.fresh += 1;
        let (v, u) = (format!("y{}", self.fresh), format!("w{}", self.fresh));
        let mut inner = scope.clone();
        inner.push((v.clone(), cell.clone()));
        inner.push((u.clone(), cell.clone()));
        let body = self.expr(&cell, &inner, depth);
        let xs = self.expr(&arg, scope, depth);
        let (f, d) = if reduce { ("reduce", k - 1) } else { ("iscan", k) };
        let t = type_of(&cell);
        format!(
            "((i-app (t-app {f} Float) {d} {}) (fn (({v} {t}) ({u} {t})) {body}) {xs})",
            index(&cell)
        )
    }

    /// `(frame [n] f1 … fn)`, functions from `pool`.
    fn function_frame(&mut self, n: usize, pool: &[&str], scope: &Scope, depth: usize) -> String {
        let mut fs = Vec::new();
        for _ in 0..n {
            let mut f = pool[self.bytes.below(pool.len())].to_string();
            if f.contains("{e}") {
                let e = self.expr(&[], scope, depth);
                f = f.replace("{e}", &e);
            }
            if f.contains("{k}") {
                f = f.replace("{k}", &float(self.bytes.value()));
            }
            fs.push(f);
        }
        format!("(frame [{n}] {})", fs.join(" "))
    }

    /// The field `a` of two steps of a loop whose state is a record of two
    /// arrays of shape `S`.
    fn record_loop(&mut self, shape: &[usize], scope: &Scope, depth: usize) -> String {
        self.fresh += 1;
        let (s, v, u) = (
            format!("s{}", self.fresh),
            format!("y{}", self.fresh),
            format!("w{}", self.fresh),
        );
        let mut inner = scope.clone();
        inner.push((v.clone(), shape.to_vec()));
        inner.push((u.clone(), shape.to_vec()));
        let a = self.expr(shape, &inner, depth);
        let b = self.expr(shape, &inner, depth);
        let a0 = self.expr(shape, scope, depth);
        let b0 = self.expr(shape, scope, depth);
        let (t, i) = (type_of(shape), index(shape));
        format!(
            "(field (iterate 2 (fn (({s} {{(a {t}) (b {t})}})) \
             (let ((val {v} (field {s} a)) (val {u} (field {s} b))) {{(a {i} {a}) (b {i} {b})}})) \
             {{(a {i} {a0}) (b {i} {b0})}}) a)"
        )
    }

    fn constant(&mut self, shape: &[usize]) -> String {
        let n: usize = shape.iter().product();
        let values: Vec<f32> = (0..n).map(|_| self.bytes.value()).collect();
        literal(shape, &values)
    }

    /// An expression of `shape` made of a variable in scope (and constants).
    fn leaf(&mut self, shape: &[usize], scope: &Scope) -> String {
        if self.bytes.below(10) == 0 || scope.is_empty() {
            return self.constant(shape);
        }
        let exact: Vec<&String> = scope.iter().filter(|(_, s)| s == shape).map(|(n, _)| n).collect();
        if !exact.is_empty() && self.bytes.below(3) != 0 {
            return exact[self.bytes.below(exact.len())].clone();
        }
        let (name, s) = scope[self.bytes.below(scope.len())].clone();
        if s == shape {
            name
        } else if shape.starts_with(&s) {
            // Lifted over the rest of `shape`.
            format!("(f.* {name} {})", self.constant(shape))
        } else if s.starts_with(shape) {
            // The cells beyond `shape` summed.
            format!("((i-app f.sum {}) {name})", index(&s[shape.len()..]))
        } else {
            format!("(f.* (f.sum {name}) {})", self.constant(shape))
        }
    }

    fn expr(&mut self, shape: &[usize], scope: &Scope, depth: usize) -> String {
        if depth == 0 || self.bytes.exhausted() || self.bytes.below(4) == 0 {
            return self.leaf(shape, scope);
        }
        let usable: Vec<usize> = (0..RULES.len())
            .filter(|&i| (!RULES[i].scalar_only || shape.is_empty()) && shape.len() >= RULES[i].min_rank)
            .collect();
        let i = usable[self.bytes.below(usable.len())];
        self.rules.insert(i);
        self.fill(RULES[i].template, shape, scope, depth - 1)
    }

    fn fill(&mut self, template: &str, shape: &[usize], scope: &Scope, depth: usize) -> String {
        let mut out = String::new();
        let mut holes: Vec<(String, String)> = Vec::new();
        let mut cell: Option<Vec<usize>> = None;
        let mut bound: Vec<(String, Vec<usize>)> = Vec::new();
        let mut helper: Option<Vec<usize>> = None;
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let Some(close) = rest[open..].find('}') else {
                break;
            };
            let name = &rest[open + 1..open + close];
            rest = &rest[open + close + 1..];
            if let Some((_, text)) = holes.iter().find(|(n, _)| n == name) {
                out.push_str(text);
                continue;
            }
            let text = match name {
                "p" => {
                    let prefix = shape[..self.bytes.below(shape.len() + 1)].to_vec();
                    self.expr(&prefix, scope, depth)
                }
                "r" => {
                    let mut s = vec![1 + self.bytes.below(3)];
                    s.extend(shape);
                    self.expr(&s, scope, depth)
                }
                "C" | "c" => {
                    let c = match &cell {
                        Some(c) => c.clone(),
                        None => {
                            let mut c = self.bytes.shape(2);
                            if c.is_empty() {
                                c.push(2);
                            }
                            cell = Some(c.clone());
                            c
                        }
                    };
                    if name == "C" {
                        index(&c)
                    } else {
                        let mut s = shape.to_vec();
                        s.extend(&c);
                        self.expr(&s, scope, depth)
                    }
                }
                "k" => {
                    let x = self.bytes.value();
                    float(x)
                }
                "v" | "u" => {
                    self.fresh += 1;
                    let v = format!("y{}", self.fresh);
                    bound.push((v.clone(), shape.to_vec()));
                    v
                }
                "body" => {
                    let mut inner = scope.clone();
                    inner.extend(bound.iter().cloned());
                    self.expr(shape, &inner, depth)
                }
                "S" => type_of(shape),
                "o" | "f" => {
                    let mut s = shape.to_vec();
                    if let Some(first) = s.first_mut() {
                        *first = if name == "o" { 1 } else { *first + 1 };
                    }
                    self.expr(&s, scope, depth)
                }
                "w" => shape.get(1).copied().unwrap_or(1).to_string(),
                "W" => {
                    let mut s = shape.to_vec();
                    if let [first, width, ..] = s.as_mut_slice() {
                        *first += *width - 1;
                    }
                    if s.len() >= 2 {
                        s.remove(1);
                    }
                    self.expr(&s, scope, depth)
                }
                "h" => {
                    // A function to a suffix of `S`, lifted over the rest.
                    self.fresh += 1;
                    let g = format!("g{}", self.fresh);
                    let split = self.bytes.below(shape.len() + 1);
                    let param = self.bytes.shape(1);
                    let y = format!("z{}", self.fresh);
                    let body = self.expr(&shape[split..], &vec![(y.clone(), param.clone())], depth);
                    let _ = writeln!(
                        self.defs,
                        "(def (fun ({g} ({y} {}) : {}) {body}))",
                        type_of(&param),
                        type_of(&shape[split..])
                    );
                    let mut arg = shape[..split].to_vec();
                    arg.extend(param);
                    helper = Some(arg);
                    g
                }
                "R" => {
                    self.fresh += 1;
                    let g = format!("g{}", self.fresh);
                    let y = format!("z{}", self.fresh);
                    let (a, b) = (self.bytes.shape(2), self.bytes.shape(1));
                    // The fields bound to names (a loop's step may not
                    // close over a varying record).
                    let fields = vec![(format!("{y}a"), a.clone()), (format!("{y}b"), b.clone())];
                    let body = self.expr(shape, &fields, depth);
                    let _ = writeln!(
                        self.defs,
                        "(def (fun ({g} ({y} {{(a {}) (b {})}}) : {}) \
                         (let ((val {y}a (field {y} a)) (val {y}b (field {y} b))) {body})))",
                        type_of(&a),
                        type_of(&b),
                        type_of(shape)
                    );
                    let ea = self.expr(&a, scope, depth);
                    let eb = self.expr(&b, scope, depth);
                    format!("({g} {{(a {} {ea}) (b {} {eb})}})", index(&a), index(&b))
                }
                "sorted" => self.sorted(shape, scope, depth),
                "nth computed" | "index computed" => {
                    let k = 1 + self.bytes.below(3);
                    let mut s = vec![k];
                    s.extend(shape);
                    let items = self.expr(&s, scope, depth);
                    let at = self.computed_index(k, scope, depth);
                    let f = if name == "nth computed" { "nth" } else { "index" };
                    format!("({f} {items} {at})")
                }
                "gather" => {
                    // Items of the source, some twice, some not at all.
                    let m = 1 + self.bytes.below(3);
                    let mut s = vec![m];
                    s.extend(&shape[1..]);
                    let source = self.expr(&s, scope, depth);
                    let keys = self.apart(&[m], scope, depth);
                    let picks: Vec<String> = (0..shape[0]).map(|_| self.bytes.below(m).to_string()).collect();
                    // (Instantiated: with as many indices as items, `nth`
                    // would otherwise be lifted over the items.)
                    format!(
                        "((i-app (t-app nth Float) {m} {}) {source} (index (grade-by f.< {keys}) [{}]))",
                        index(&shape[1..]),
                        picks.join(" ")
                    )
                }
                "hist f.max" | "hist f.min" | "hist f.*" | "hist lambda" | "hist lifted" => {
                    self.hist(&name[5..], shape, scope, depth)
                }
                "reduce lifted" | "iscan lifted" => self.lifted_scan(name, shape, scope, depth),
                "unary frame" | "binary frame" => {
                    let pool = if name == "unary frame" { UNARY } else { BINARY };
                    self.function_frame(shape.first().copied().unwrap_or(1), pool, scope, depth)
                }
                "inner derivative" => {
                    let e = self.expr(&[], scope, depth);
                    let a = self.expr(shape, scope, depth);
                    format!("((grad (fn ((z Float)) (f.* z (f.sin (f.* z (f.tanh {e})))))) {a})")
                }
                "closure" | "passed" => {
                    self.fresh += 1;
                    let c = format!("c{}", self.fresh);
                    let e = self.expr(&[], scope, depth);
                    let a = self.expr(shape, scope, depth);
                    let f = format!("(fn ((y Float)) (f.+ (f.* y (f.tanh {e})) (f.sin y)))");
                    if name == "closure" {
                        format!("(let ((val {c} {f})) ({c} {a}))")
                    } else {
                        let _ = writeln!(
                            self.defs,
                            "(def (fun ({c} (g (-> (Float) Float)) (y Float)) (g (g y))))"
                        );
                        format!("({c} {f} {a})")
                    }
                }
                "linspace" => {
                    let (frame, n) = shape.split_at(shape.len() - 1);
                    let from = frame[..self.bytes.below(frame.len() + 1)].to_vec();
                    let a = self.expr(&from, scope, depth);
                    let b = self.expr(frame, scope, depth);
                    format!("((i-app linspace {}) {a} {b})", n[0])
                }
                "items" => {
                    let k = 1 + self.bytes.below(3);
                    format!("(f.* 0.5 (f.tanh {}))", self.expr(&[k], scope, depth))
                }
                "record loop" => self.record_loop(shape, scope, depth),
                "outer" => {
                    let k = self.bytes.below(shape.len() - 1);
                    let (frame, cell) = (&shape[..k], &shape[k + 2..]);
                    let side = |d: usize| [frame, &[d], cell].concat();
                    let a = self.expr(&side(shape[k]), scope, depth);
                    let b = self.expr(&side(shape[k + 1]), scope, depth);
                    let closed = self.expr(cell, scope, depth);
                    let t = type_of(cell);
                    format!(
                        "(outer (fn ((a {t}) (b {t})) (f.+ (f.* a (f.cos b)) (f.* {closed} (f.sin (f.* a b))))) {a} {b})"
                    )
                }
                "unbox record" => {
                    self.fresh += 1;
                    let r = format!("rr{}", self.fresh);
                    let (a, b) = (self.expr(shape, scope, depth), self.expr(shape, scope, depth));
                    let i = index(shape);
                    format!(
                        "(let ((val {r} {{(p {i} {a}) (q {i} {b})}})) (unbox ($n i (range 2)) \
                         (f.* (field {r} p) (f.+ (field {r} q) (i->f (reduce/zero + 1 i))))))"
                    )
                }
                "th" => {
                    let arg = helper.clone().unwrap_or_default();
                    self.expr(&arg, scope, depth)
                }
                "g" => {
                    self.fresh += 1;
                    let g = format!("g{}", self.fresh);
                    let param = self.bytes.shape(2);
                    let y = format!("z{}", self.fresh);
                    let body = self.expr(shape, &vec![(y.clone(), param.clone())], depth);
                    let _ = writeln!(
                        self.defs,
                        "(def (fun ({g} ({y} {}) : {}) {body}))",
                        type_of(&param),
                        type_of(shape)
                    );
                    helper = Some(param);
                    g
                }
                "t" => {
                    let param = helper.clone().unwrap_or_default();
                    self.expr(&param, scope, depth)
                }
                _ => self.expr(shape, scope, depth),
            };
            out.push_str(&text);
            holes.push((name.to_string(), text));
        }
        out.push_str(rest);
        out
    }
}

/// A case from choice bytes (a fuzzer's, or [`crate::generate::seeded_bytes`]).
pub fn case(bytes: &[u8]) -> Case {
    let mut g = Gen {
        bytes: Bytes { bytes, pos: 0 },
        defs: String::new(),
        fresh: 0,
        rules: BTreeSet::new(),
    };
    let param = g.bytes.shape(2);
    let result = g.bytes.shape(2);
    let frame = g.bytes.shape(2);
    let depth = 2 + g.bytes.below(4);
    let body = g.expr(&result, &vec![("x".to_string(), param.clone())], depth);
    let reverse = g.rules.iter().all(|&i| RULES[i].reverse);

    let frame_atoms: usize = frame.iter().product();
    let n: usize = param.iter().product::<usize>() * frame_atoms;
    let m: usize = result.iter().product::<usize>() * frame_atoms;
    let x: Vec<f32> = (0..n).map(|_| g.bytes.value()).collect();
    let v: Vec<f32> = (0..n)
        .map(|_| {
            let d = g.bytes.value() / 2.0;
            if d == 0.0 { 0.5 } else { d }
        })
        .collect();
    let u: Vec<f32> = (0..m).map(|_| g.bytes.value()).collect();
    // The step scaled to the point and the direction: ε^(1/3)·max(1, |x|)
    // over |v|, ε^(1/3) ≈ 5e-3 for f32, doubled for the coarser step.
    let norm = |xs: &[f32]| xs.iter().fold(0.0f32, |a, b| a.max(b.abs()));
    let h = 1.0e-2 * norm(&x).max(1.0) / norm(&v).max(1.0e-3);

    let mut shape_fx = frame.clone();
    shape_fx.extend(&param);
    let mut shape_fr = frame.clone();
    shape_fr.extend(&result);
    let lit_x = literal(&shape_fx, &x);
    let lit_v = literal(&shape_fx, &v);
    let lit_u = literal(&shape_fr, &u);
    let tx = type_of(&param);
    let tr = type_of(&result);
    let mut text = g.defs.clone();
    let _ = writeln!(text, "(def (fun (f (x {tx}) : {tr}) {body}))");
    let _ = writeln!(text, "((fn ((x {tx}) (v {tx})) (jvp f x v)) {lit_x} {lit_v})");
    if reverse {
        let _ = writeln!(text, "((fn ((x {tx}) (u {tr})) (vjp f x u)) {lit_x} {lit_u})");
        if result.is_empty() {
            let _ = writeln!(text, "((grad f) {lit_x})");
        }
    }
    let steps = (0..STEPS).flat_map(|i| {
        let s = h / (1u32 << (2 * i)) as f32;
        [s, -s]
    });
    for step in steps {
        let moved: Vec<f32> = x.iter().zip(&v).map(|(a, b)| a + step * b).collect();
        let _ = writeln!(text, "(f {})", literal(&shape_fx, &moved));
    }
    Case {
        text,
        param,
        result,
        frame,
        rules: g.rules,
        reverse,
        x,
        v,
        u,
        h,
    }
}

/// What [`check`] found.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// The program does not check (the generator's miss): the messages.
    Rejected(String),
    /// Nothing to compare: the interpreter failed or ran out of budget, or
    /// a value is not finite or too large for f32 comparisons.
    Skipped(String),
    /// Every law held.
    Agreed,
    /// A law failed: which, where and by how much.
    Disagreed(String),
}

const FUEL: u64 = 2_000_000;
const ATOMS: usize = 1 << 16;

/// The program's values, each as its Float atoms.
fn run(text: &str) -> Result<Vec<Vec<f32>>, Verdict> {
    let mut sources = SourceMap::new();
    let loaded = load_program_text(&mut sources, &RealFs, "<generated>", None, text);
    if loaded.has_errors() {
        return Err(Verdict::Rejected(format!("{:?}", loaded.diagnostics)));
    }
    let checked = remora_check::check_program(&loaded.value);
    if checked.has_errors() {
        let messages: Vec<String> = checked.diagnostics.iter().map(|d| d.message.clone()).collect();
        return Err(Verdict::Rejected(messages.join("\n")));
    }
    remora_interp::Interpreter::limit_atoms(ATOMS);
    let mut interp = remora_interp::Interpreter::default();
    interp.fuel = Some(FUEL);
    let values = match interp.program(&checked.value) {
        Ok((_, values)) => values,
        Err(e) => return Err(Verdict::Skipped(e.message)),
    };
    values
        .iter()
        .map(|v| match &v.data {
            remora_value::Data::Float(buf) => Ok(buf.to_vec()),
            _ => Err(Verdict::Disagreed(format!(
                "a value is not a Float array: {}",
                remora_value::print::to_string(v)
            ))),
        })
        .collect()
}

fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum()
}

fn abs_dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (f64::from(*x) * f64::from(*y)).abs())
        .sum()
}

/// The transpose law at one point: ⟨u, J·v⟩ against ⟨Jᵀ·u, v⟩, within a
/// tolerance of f32 rounding scaled by the magnitudes of the terms of both
/// sums (so a sum that cancels is not held to a relative error it cannot
/// have).
pub fn transpose_law_holds(u: &[f32], jv: &[f32], jtu: &[f32], v: &[f32]) -> Result<(), String> {
    let left = dot(u, jv);
    let right = dot(jtu, v);
    let scale = abs_dot(u, jv) + abs_dot(jtu, v);
    let tolerance = 1.0e-3 * scale + 1.0e-6;
    if (left - right).abs() <= tolerance {
        Ok(())
    } else {
        Err(format!(
            "⟨u, J·v⟩ = {left} but ⟨Jᵀ·u, v⟩ = {right} (tolerance {tolerance:.3e})"
        ))
    }
}

/// How many steps the central differences take: `h`, `h/4`, `h/16` …
pub const STEPS: usize = 6;

/// Central differences along `v` — `(f(x+s·v) − f(x−s·v)) / 2s` — at the
/// steps `s = h, h/4, h/16 …` (`sides[i]` is `(f(x+s·v), f(x−s·v))` for
/// the i-th), against the directional derivative `jv`, componentwise. The
/// tolerance is f32 careful: of two successive steps, the truncation error
/// of the finer is estimated from their difference (for a smooth function
/// 15/16 of the coarser one's error), the rounding error of `f` is a few
/// ulps of the largest |f| over the step, plus a relative 1e-3 of the
/// derivative. A component agrees when some pair of successive steps
/// agrees: the steps shrink until the function is smooth at their scale
/// (a fast-turning function, or a step of a comparison near `x`).
pub fn central_difference_agrees(jv: &[f32], sides: &[(&[f32], &[f32])], h: f32) -> Result<(), String> {
    let largest = sides
        .iter()
        .flat_map(|(p, m)| p.iter().chain(m.iter()))
        .fold(0.0f64, |a, b| a.max(f64::from(*b).abs()));
    let scale_jv = jv.iter().fold(0.0f64, |a, b| a.max(f64::from(*b).abs()));
    let ulp = f64::from(f32::EPSILON);
    for j in 0..jv.len() {
        let d = jv.get(j).copied().map_or(f64::NAN, f64::from);
        let estimates: Vec<(f64, f64)> = sides
            .iter()
            .enumerate()
            .map(|(i, (p, m))| {
                let s = f64::from(h) / f64::from(1u32 << (2 * i));
                let get = |xs: &[f32]| xs.get(j).copied().map_or(f64::NAN, f64::from);
                (s, (get(p) - get(m)) / (2.0 * s))
            })
            .collect();
        // Differences that never settle (a function turning faster than
        // the finest step resolves, such as the sine of a large product)
        // say nothing about the derivative: that component is left to the
        // transpose law.
        let settled = estimates.windows(2).any(|w| {
            let ((_, coarse), (_, fine)) = (w[0], w[1]);
            (coarse - fine).abs() <= 0.25 * coarse.abs().max(fine.abs()) + 1.0e-3
        });
        if !settled {
            continue;
        }
        let agrees = estimates.windows(2).any(|w| {
            let ((_, coarse), (s, fine)) = (w[0], w[1]);
            let rounding = 16.0 * ulp * largest / s;
            let truncation = 2.0 * (coarse - fine).abs();
            let tolerance = truncation + rounding + 1.0e-3 * d.abs() + 1.0e-4 * scale_jv + 1.0e-6;
            (d - fine).abs() <= tolerance
        });
        if !agrees {
            let shown: Vec<String> = estimates
                .iter()
                .map(|(s, e)| format!("{e} (step {s:.2e})"))
                .collect();
            return Err(format!(
                "component {j}: jvp {d} but central differences {}",
                shown.join(", ")
            ));
        }
    }
    Ok(())
}

/// The case's program on both engines ([`crate::generate::compare_within`]):
/// the compiled engine must print every value the interpreter prints —
/// the derivatives and the function at the central differences' points —
/// bit for bit, or fail where it fails, or not compile the program.
/// Call it on a thread with the pipeline's stack.
pub fn compare_engines(case: &Case) -> crate::generate::Verdict {
    crate::generate::compare_within(
        &crate::generate::Program {
            text: case.text.clone(),
            inputs: Vec::new(),
        },
        FUEL,
    )
}

/// Values beyond this magnitude are skipped: f32 differences of them say
/// little.
const LARGEST: f32 = 1.0e4;

/// Runs a case and checks its laws at every position of the frame (the
/// central differences only when `central_differences`: a fuzzer's cases
/// may put a point on the step of a comparison). Call it on a thread with
/// the pipeline's stack (`remora_syntax::stack::PIPELINE_STACK`).
pub fn check(case: &Case, central_differences: bool) -> Verdict {
    let values = match run(&case.text) {
        Ok(v) => v,
        Err(verdict) => return verdict,
    };
    if let Some(bad) = values
        .iter()
        .flatten()
        .find(|x| !x.is_finite() || x.abs() > LARGEST)
    {
        return Verdict::Skipped(format!("a value of magnitude {bad}"));
    }
    let n: usize = case.param.iter().product();
    let m: usize = case.result.iter().product();
    let positions: usize = case.frame.iter().product();
    let expected = 1 + usize::from(case.reverse) * (1 + usize::from(case.result.is_empty())) + 2 * STEPS;
    if values.len() != expected {
        return Verdict::Disagreed(format!("{} values, not {expected}", values.len()));
    }
    let mut it = values.iter();
    let mut next = || it.next().map(Vec::as_slice).unwrap_or_default();
    let jv = next();
    let (jtu, grad) = if case.reverse {
        let jtu = next();
        let grad = if case.result.is_empty() {
            Some(next())
        } else {
            None
        };
        (jtu, grad)
    } else {
        (&[][..], None)
    };
    let sides: Vec<(&[f32], &[f32])> = (0..STEPS).map(|_| (next(), next())).collect();
    let (u, v) = (&case.u, &case.v);
    for i in 0..positions {
        let cell = |xs: &[f32], size: usize| xs.get(i * size..(i + 1) * size).unwrap_or_default().to_vec();
        let where_ = if positions > 1 {
            format!(" at frame position {i}")
        } else {
            String::new()
        };
        if jv.len() != m * positions {
            return Verdict::Disagreed(format!("jvp has {} atoms, not {}", jv.len(), m * positions));
        }
        if case.reverse {
            if jtu.len() != n * positions {
                return Verdict::Disagreed(format!("vjp has {} atoms, not {}", jtu.len(), n * positions));
            }
            if let Err(e) = transpose_law_holds(&cell(u, m), &cell(jv, m), &cell(jtu, n), &cell(v, n)) {
                return Verdict::Disagreed(format!("transpose law{where_}: {e}"));
            }
            if let Some(grad) = grad {
                // grad f is vjp f with cotangent 1: check it along v.
                let ones = vec![1.0f32; m];
                let g = cell(grad, n);
                if let Err(e) = transpose_law_holds(&ones, &cell(jv, m), &g, &cell(v, n)) {
                    return Verdict::Disagreed(format!("grad against jvp{where_}: {e}"));
                }
            }
        }
        let cells: Vec<(Vec<f32>, Vec<f32>)> = sides.iter().map(|(p, q)| (cell(p, m), cell(q, m))).collect();
        let cells: Vec<(&[f32], &[f32])> = cells.iter().map(|(p, q)| (p.as_slice(), q.as_slice())).collect();
        if central_differences && let Err(e) = central_difference_agrees(&cell(jv, m), &cells, case.h) {
            return Verdict::Disagreed(format!("jvp against central differences{where_}: {e}"));
        }
    }
    Verdict::Agreed
}

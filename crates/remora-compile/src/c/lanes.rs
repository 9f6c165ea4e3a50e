//! A tree reduction's small nodes in lanes: the leaves (at most 256
//! items, combined left to right) of a node of up to 16,384 items, eight at a time, each leaf's running value in its
//! own variable. The items of one leaf are still combined one after
//! another in their order (the result is the same bits), but eight leaves'
//! chains of dependent operations run side by side, where one leaf alone
//! waits on each operation's latency (a float add: 3 to 4 cycles an
//! item).

use super::{Decl, Emitter, ctype, op_c, pad, v};
use crate::loops::{Elem, Expr, Stmt, Var};
use std::fmt::Write;

/// The most items of a node reduced in lanes (64 KiB of floats, for a sum
/// of a vector), and the most leaves it has: 128 or more items each, where
/// the node is over 256.
pub(super) const NODE: usize = 16384;
const MOST: usize = NODE / 128;

/// How many leaves run side by side: eight, then four, then two (a node
/// of 257 to 1,024 items has two to four leaves).
const LANES: [usize; 3] = [8, 4, 2];

/// Whether the items of a tree reduction with this body are worth
/// computing in lanes: a short run of scalar `let`s (no loop, store,
/// buffer or call, which gain nothing side by side and would be written
/// out sixteen times).
pub(super) fn fits(body: &[Stmt]) -> bool {
    body.len() <= 16 && body.iter().all(|s| matches!(s, Stmt::Let { .. }))
}

/// An item written in C, with the body's variables in scope.
type Item<'a> = dyn Fn(&Emitter) -> String + 'a;

/// How a reduction by `op` may take its items in any order and still give
/// the interpreter's bits: one loop over them all, which the C compiler
/// vectorises, instead of the tree's leaves.
#[derive(Clone, Copy)]
pub(super) enum Unordered {
    /// The value does not depend on the order or the grouping of the
    /// items at all (Int `+` and `*` wrap; `max`, `min`, the bit
    /// operations, `and`, `or`).
    Exact,
    /// `f.max` (`true`) or `f.min`: the greatest (least) item, NaN if any
    /// is, and of items that compare equal the last (the first), whatever
    /// the grouping. Only a zero extreme shows which of equals it is (+0
    /// or -0): the items' order keys (`rt_order_key`) are compared in one
    /// loop, and a zero extreme is found again in order.
    Extreme(bool),
}

pub(super) fn unordered(op: &str) -> Option<Unordered> {
    match op {
        "+" | "*" | "max" | "min" | "bit-and" | "bit-or" | "bit-xor" | "and" | "or" => Some(Unordered::Exact),
        "f.max" => Some(Unordered::Extreme(true)),
        "f.min" => Some(Unordered::Extreme(false)),
        _ => None,
    }
}

/// Whether an item computes a function of the runtime's that costs tens of
/// operations (an `f.exp`): a tree node's items are then computed into a
/// buffer first, in one loop the C compiler vectorises, and the leaves in
/// lanes read them from there.
fn costly(body: &[Stmt], item: &Expr) -> bool {
    fn calls(e: &Expr) -> bool {
        match e {
            Expr::Op { op, args } => {
                matches!(
                    *op,
                    "f.exp" | "f.ln" | "f.^" | "f.tanh" | "pow.log2" | "pow.by-log2" | "f.sinh" | "f.cosh"
                ) || args.iter().any(calls)
            }
            Expr::Load { index, .. } | Expr::Addr { index, .. } => calls(index),
            Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) | Expr::Var(_) => false,
        }
    }
    calls(item)
        || body
            .iter()
            .any(|s| matches!(s, Stmt::Let { value, .. } if calls(value)))
}

impl Emitter {
    /// The functions `{name}_lanes(c, lo, hi)`, the tree reduction of a
    /// node of `lo … hi-1` (over 256 and at most [`NODE`] items) by its
    /// leaves in lanes, and `{name}_join`, which combines the leaves'
    /// values as the tree does. The scope must hold the context's
    /// variables (`last_used`) and not yet the index.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn tree_lanes(
        &mut self,
        name: &str,
        ctx: &str,
        elem: Elem,
        op: &str,
        index: Var,
        body: &[Stmt],
        item: &Expr,
    ) -> String {
        let t = ctype(elem);
        let i = v(index);
        let combine = op_c(op, &["l".to_string(), "r".to_string()]);
        let mut f = format!(
            "static {t} {name}_join(const {t} *leaf, int64_t lo, int64_t hi, int *k) {{\n  if (hi - lo <= 256) return leaf[(*k)++];\n  int64_t mid = lo + (hi - lo) / 2;\n  {t} l = {name}_join(leaf, lo, mid, k);\n  {t} r = {name}_join(leaf, mid, hi, k);\n  return {combine};\n}}\n"
        );
        let _ = writeln!(
            f,
            "static {t} {name}_lanes(const {ctx} *c, int64_t lo, int64_t hi) {{"
        );
        f.push_str(&self.unpack());
        // Costly items all computed first, into a buffer the leaves read.
        let buffered = costly(body, item);
        if buffered {
            let _ = writeln!(
                f,
                "  {t} ln_x[{NODE}];\n  for (int64_t {i} = lo; {i} < hi; {i}++) {{"
            );
            self.scope.push((index, Decl::Scalar(Elem::Int)));
            self.block_then(&mut f, body, 2, &|e: &Self| {
                format!("ln_x[{i} - lo] = {};", e.expr(item))
            });
            self.scope.pop();
            let _ = writeln!(f, "  }}");
        }
        let (body, item): (&[Stmt], &Item) = if buffered {
            (&[], &|_: &Self| format!("ln_x[{i} - lo]"))
        } else {
            (body, &|e: &Self| e.expr(item))
        };
        // Every leaf's bounds, and its first item.
        let _ = writeln!(
            f,
            "  int64_t ln_b[{}], ln_from[{MOST}];\n  {t} ln_leaf[{MOST}];\n  int ln_n = rt_tree_leaves(lo, hi, ln_b);\n  for (int ln_k = 0; ln_k < ln_n; ln_k++) {{\n    int64_t {i} = ln_b[ln_k];",
            MOST + 1
        );
        self.scope.push((index, Decl::Scalar(Elem::Int)));
        self.block_then(&mut f, body, 2, &|e: &Self| {
            format!(
                "ln_leaf[ln_k] = {};\n    ln_from[ln_k] = ln_b[ln_k] + 1;",
                item(e)
            )
        });
        // Eight leaves at a time, then four, then two, each group as far
        // as its shortest leaf goes. The leaves left are split into `w`
        // runs of adjacent leaves and lane k takes its run's leaves one
        // after another: each lane reads on through memory, as one
        // left-to-right pass would, which the hardware's prefetchers
        // follow (eight adjacent leaves at a time read short streams that
        // start anew every few cache lines, slower than one leaf at a time
        // where the items come from memory).
        let _ = writeln!(f, "  }}\n  int ln_g = 0;");
        for w in LANES {
            let _ = writeln!(
                f,
                "  {{\n  int ln_L = (ln_n - ln_g) / {w};\n  for (int ln_r = 0; ln_r < ln_L; ln_r++) {{"
            );
            for k in 0..w {
                let _ = writeln!(f, "    int ln_q{k} = ln_g + {k} * ln_L + ln_r;");
            }
            let _ = writeln!(f, "    int64_t ln_len = ln_b[ln_q0 + 1] - ln_b[ln_q0];");
            for k in 1..w {
                let _ = writeln!(
                    f,
                    "    if (ln_b[ln_q{k} + 1] - ln_b[ln_q{k}] < ln_len) ln_len = ln_b[ln_q{k} + 1] - ln_b[ln_q{k}];"
                );
            }
            for k in 0..w {
                let _ = writeln!(
                    f,
                    "    int64_t ln_s{k} = ln_b[ln_q{k}];\n    {t} ln_a{k} = ln_leaf[ln_q{k}];"
                );
            }
            let _ = writeln!(f, "    for (int64_t ln_t = 1; ln_t < ln_len; ln_t++) {{");
            for k in 0..w {
                let _ = writeln!(f, "      {{ int64_t {i} = ln_s{k} + ln_t;");
                let a = format!("ln_a{k}");
                self.block_then(&mut f, body, 4, &|e: &Self| {
                    format!("{a} = {}; }}", op_c(op, &[a.clone(), item(e)]))
                });
            }
            let _ = writeln!(f, "    }}");
            for k in 0..w {
                let _ = writeln!(
                    f,
                    "    ln_leaf[ln_q{k}] = ln_a{k};\n    ln_from[ln_q{k}] = ln_s{k} + ln_len;"
                );
            }
            let _ = writeln!(f, "  }}\n  ln_g += {w} * ln_L;\n  }}");
        }
        // The rest of each leaf, one after another.
        let _ = writeln!(
            f,
            "  for (int ln_k = 0; ln_k < ln_n; ln_k++)\n    for (int64_t {i} = ln_from[ln_k]; {i} < ln_b[ln_k + 1]; {i}++) {{"
        );
        self.block_then(&mut f, body, 3, &|e: &Self| {
            format!(
                "ln_leaf[ln_k] = {};",
                op_c(op, &["ln_leaf[ln_k]".to_string(), item(e)])
            )
        });
        self.scope.pop();
        let _ = writeln!(
            f,
            "    }}\n  int ln_k = 0;\n  return {name}_join(ln_leaf, lo, hi, &ln_k);\n}}"
        );
        f
    }

    /// The function `{name}_lanes(c, lo, hi)` of a tree reduction by an
    /// operator that may take its items in any order (see [`Unordered`]):
    /// the node's items in one loop. The scope must hold the context's
    /// variables (`last_used`) and not yet the index.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn tree_unordered(
        &mut self,
        name: &str,
        ctx: &str,
        elem: Elem,
        op: &str,
        how: Unordered,
        index: Var,
        body: &[Stmt],
        item: &Expr,
    ) -> String {
        let t = ctype(elem);
        let mut f = format!("static {t} {name}_lanes(const {ctx} *c, int64_t lo, int64_t hi) {{\n");
        f.push_str(&self.unpack());
        let _ = writeln!(f, "  {t} ln_acc;");
        self.unordered_fold(&mut f, "ln_acc", how, op, index, ("lo", "hi"), body, item, 1);
        let _ = writeln!(f, "  return ln_acc;\n}}");
        f
    }

    /// `acc` (declared) given the reduction by `op` of the items `from …
    /// to-1` (at least one), taken in any order (see [`Unordered`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn unordered_fold(
        &mut self,
        out: &mut String,
        acc: &str,
        how: Unordered,
        op: &str,
        index: Var,
        (from, to): (&str, &str),
        body: &[Stmt],
        item: &Expr,
        depth: usize,
    ) {
        let Unordered::Extreme(max) = how else {
            self.in_order(out, acc, op, index, (from, to), body, item, depth);
            return;
        };
        let p = pad(depth);
        let i = v(index);
        let (key, nan, x, k) = (
            self.fresh("ln_key"),
            self.fresh("ln_nan"),
            self.fresh("ln_x"),
            self.fresh("ln_k"),
        );
        let (start, keep) = if max {
            ("INT32_MIN", ">")
        } else {
            ("INT32_MAX", "<")
        };
        let _ = writeln!(
            out,
            "{p}int32_t {key} = {start}, {nan} = 0;\n{p}for (int64_t {i} = {from}; {i} < {to}; {i}++) {{"
        );
        self.scope.push((index, Decl::Scalar(Elem::Int)));
        self.block_then(out, body, depth + 1, &|e: &Self| {
            format!(
                "float {x} = {};\n{p}  int32_t {k} = rt_order_key({x});\n{p}  {key} = {key} {keep} {k} ? {key} : {k};\n{p}  {nan} |= {x} != {x};",
                e.expr(item)
            )
        });
        self.scope.pop();
        // A zero extreme: which zero, in order.
        let _ = writeln!(
            out,
            "{p}}}\n{p}{acc} = {nan} ? NAN : rt_order_float({key});\n{p}if ({acc} == 0.0f) {{"
        );
        self.in_order(out, acc, op, index, (from, to), body, item, depth + 1);
        let _ = writeln!(out, "{p}}}");
    }

    /// `acc` (declared) given the reduction by `op` of the items `from …
    /// to-1` (at least one), left to right.
    #[allow(clippy::too_many_arguments)]
    fn in_order(
        &mut self,
        out: &mut String,
        acc: &str,
        op: &str,
        index: Var,
        (from, to): (&str, &str),
        body: &[Stmt],
        item: &Expr,
        depth: usize,
    ) {
        let p = pad(depth);
        let i = v(index);
        self.scope.push((index, Decl::Scalar(Elem::Int)));
        let _ = writeln!(out, "{p}{{ int64_t {i} = {from};");
        self.block_then(out, body, depth + 1, &|e: &Self| {
            format!("{acc} = {};", e.expr(item))
        });
        let _ = writeln!(
            out,
            "{p}}}\n{p}for (int64_t {i} = {from} + 1; {i} < {to}; {i}++) {{"
        );
        self.block_then(out, body, depth + 1, &|e: &Self| {
            format!("{acc} = {};", op_c(op, &[acc.to_string(), e.expr(item)]))
        });
        let _ = writeln!(out, "{p}}}");
        self.scope.pop();
    }
}

//! A tree reduction's small nodes: a float sum's leaves (at most 256
//! items, added left to right) of a node of up to 16,384 items side by
//! side, in the lanes of vectors. The node's items are computed first,
//! into a buffer, in one loop the C compiler vectorises; the runtime's
//! `rt_leaves_fadd` then sums eight leaves at a time, tiles of each
//! leaf's items transposed so that one vector add advances every leaf by
//! one item. Each leaf's items are still added one after another in their
//! order (the result is the same bits), but eight leaves' chains of
//! dependent adds run as one, where one leaf alone waits on each add's
//! latency (3 to 4 cycles an item). A reduction whose order does not
//! matter is one loop over the node's items instead.

use super::{Decl, Emitter, ctype, op_c, pad, v};
use crate::loops::{Elem, Expr, Stmt, Var};
use std::fmt::Write;

/// The most items of a node reduced in lanes (64 KiB of floats, for a sum
/// of a vector), and the most leaves it has: 128 or more items each, where
/// the node is over 256.
pub(super) const NODE: usize = 16384;
const MOST: usize = NODE / 128;

/// Whether the items of a tree reduction with this body are worth
/// computing in lanes: a short run of scalar `let`s (no loop, store,
/// buffer or call).
pub(super) fn fits(body: &[Stmt]) -> bool {
    body.len() <= 16 && body.iter().all(|s| matches!(s, Stmt::Let { .. }))
}

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

impl Emitter {
    /// The functions `{name}_lanes(c, lo, hi)`, the float sum of a node of
    /// `lo … hi-1` (over 256 and at most [`NODE`] items) by its leaves in
    /// lanes, and `{name}_join`, which adds the leaves' sums as the tree
    /// does. The scope must hold the context's variables (`last_used`)
    /// and not yet the index.
    pub(super) fn tree_lanes(
        &mut self,
        name: &str,
        ctx: &str,
        index: Var,
        body: &[Stmt],
        item: &Expr,
    ) -> String {
        let i = v(index);
        let mut f = format!(
            "static float {name}_join(const float *leaf, int64_t lo, int64_t hi, int *k) {{\n  if (hi - lo <= 256) return leaf[(*k)++];\n  int64_t mid = lo + (hi - lo) / 2;\n  float l = {name}_join(leaf, lo, mid, k);\n  float r = {name}_join(leaf, mid, hi, k);\n  return (l + r);\n}}\n"
        );
        let _ = writeln!(
            f,
            "static float {name}_lanes(const {ctx} *c, int64_t lo, int64_t hi) {{"
        );
        f.push_str(&self.unpack());
        self.scope.push((index, Decl::Scalar(Elem::Int)));
        match item {
            // Items that are consecutive atoms of a buffer are summed where
            // they are.
            Expr::Load { buf, index: at } if body.is_empty() && steps_by_one(at, index) => {
                let first = self.expr(&Expr::Addr {
                    buf: *buf,
                    index: at.clone(),
                });
                let _ = writeln!(
                    f,
                    "  const float *ln_x;\n  {{ int64_t {i} = lo; ln_x = {first}; }}"
                );
            }
            _ => {
                let _ = writeln!(
                    f,
                    "  float ln_x[{NODE}];\n  for (int64_t {i} = lo; {i} < hi; {i}++) {{"
                );
                self.block_then(&mut f, body, 2, &|e: &Self| {
                    format!("ln_x[{i} - lo] = {};", e.expr(item))
                });
                let _ = writeln!(f, "  }}");
            }
        }
        self.scope.pop();
        let _ = writeln!(
            f,
            "  int64_t ln_b[{}];\n  float ln_leaf[{MOST}];\n  int ln_n = rt_tree_leaves(lo, hi, ln_b);\n  rt_leaves_fadd(ln_x, ln_b, ln_n, ln_leaf);\n  int ln_k = 0;\n  return {name}_join(ln_leaf, lo, hi, &ln_k);\n}}",
            MOST + 1
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
        let selects = std::mem::replace(&mut self.selects, true);
        self.block_then(out, body, depth + 1, &|e: &Self| {
            format!(
                "float {x} = {};\n{p}  int32_t {k} = rt_order_key({x});\n{p}  {key} = {key} {keep} {k} ? {key} : {k};\n{p}  {nan} |= {x} != {x};",
                e.expr(item)
            )
        });
        self.selects = selects;
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

/// Whether `at`, an index, is `index` plus terms that do not depend on it:
/// consecutive items at consecutive atoms.
fn steps_by_one(at: &Expr, index: Var) -> bool {
    let free = |e: &Expr| {
        let mut free = true;
        e.each_var(&mut |x| free &= x != index);
        free
    };
    match at {
        Expr::Var(x) => *x == index,
        Expr::Op { op: "+", args } if args.len() == 2 => {
            (steps_by_one(&args[0], index) && free(&args[1]))
                || (steps_by_one(&args[1], index) && free(&args[0]))
        }
        _ => false,
    }
}

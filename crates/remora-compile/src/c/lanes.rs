//! A tree reduction's small nodes in lanes: the leaves (at most 256
//! items, combined left to right) of a node of up to 16,384 items, eight at a time, each leaf's running value in its
//! own variable. The items of one leaf are still combined one after
//! another in their order (the result is the same bits), but eight leaves'
//! chains of dependent operations run side by side, where one leaf alone
//! waits on each operation's latency (a float add: 3 to 4 cycles an
//! item).

use super::{Decl, Emitter, ctype, op_c, v};
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
                e.expr(item)
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
                    format!("{a} = {}; }}", op_c(op, &[a.clone(), e.expr(item)]))
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
                op_c(op, &["ln_leaf[ln_k]".to_string(), e.expr(item)])
            )
        });
        self.scope.pop();
        let _ = writeln!(
            f,
            "    }}\n  int ln_k = 0;\n  return {name}_join(ln_leaf, lo, hi, &ln_k);\n}}"
        );
        f
    }
}

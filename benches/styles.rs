//! Benchmark: the style matrix. Each workload is written several ways a
//! user would plausibly write it in Remora (a lifted scalar function,
//! whole-array operations, a function of arrays, a per-cell fold, a
//! record state, gathers by computed indices, a scan, a `windows`
//! stencil, a transposition, `reduce` by a lambda …), each formulation in
//! `benches/styles/WORKLOAD/STYLE.remora`, and every formulation is
//! compared with the same computation in NumPy (float32, the fastest
//! natural NumPy: `benches/styles/numpy_styles.py`), on the same generated
//! data, in the same invocation.
//!
//! Per row: Remora's median time, NumPy's, the ratio, each side's peak
//! memory (a fresh process each), and whether the checksums agree. The
//! target — ratio ≤ 3× and peak memory ≤ 2× NumPy's — is printed, not
//! asserted: the slow rows are the interpreter's cliffs, which is what
//! the matrix is for.
//!
//! Each Remora row runs in a fresh process (this binary again, with
//! `REMORA_STYLES_ROW=WORKLOAD/STYLE`): the first run gives the peak
//! memory; further runs (while a run takes at most 5 s, at most 20 s in
//! all) give the median time. A row whose first run takes longer than
//! 60 s is killed and printed as `timeout`.
//!
//! `REMORA_ENGINE=compiled` times the compiled engine instead of the
//! interpreter (`fused`: the interpreter on the fused program).
//!
//! Run with `cargo bench --bench styles`; `PYTHON` names the Python with
//! NumPy (default `python3`); `QUICK=1` uses small sizes; `ROWS=a,b/c`
//! picks workloads (`a`) or single formulations (`b/c`); `CELLS=1` also
//! lists, under each row, every application of its first run that ran
//! cell by cell (`remora run -v`'s notes: line:column in the program,
//! cells, times, reason; the logging costs a little in that run, which is
//! timed only where it is the only run).

/// The allocator of the `remora` binary (see src/main.rs).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "common/mod.rs"]
mod common;

use common::{cells, fatal, float_array, floats, int_array, mandelbrot_grid, mb, ms, peak_kib, size};
use remora_interp::Value;
use std::io::Write;
use std::time::Duration;

struct Workload {
    name: &'static str,
    /// Sizes substituted for `{KEY}` (and `{KEY-1}`) in the programs.
    sizes: Vec<(&'static str, usize)>,
    reps: usize,
    /// How far the checksums may differ, relatively.
    tolerance: f64,
    /// The formulations: the program's file name (without `.remora`) and
    /// what it is.
    styles: Vec<(&'static str, &'static str)>,
}

/// A single run longer than this is a timeout.
const TIMEOUT: Duration = Duration::from_secs(60);
/// Further runs only while one takes at most this …
const REPEAT_BELOW: Duration = Duration::from_secs(5);
/// … and all of them at most this.
const REPEAT_BUDGET: Duration = Duration::from_secs(20);

fn workloads(quick: bool) -> Vec<Workload> {
    let q = |big: usize, small: usize| if quick { small } else { big };
    vec![
        Workload {
            name: "horner",
            sizes: vec![("N", q(4_000_000, 40_000)), ("C", 9)],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![
                (
                    "scalar",
                    "lifted scalar fun: Horner unrolled, coefficients by index",
                ),
                (
                    "cellfold",
                    "per-cell fold over the coefficients, lifted over the points",
                ),
                (
                    "arrayfold",
                    "fold over the coefficients of a whole-array step (fun of arrays)",
                ),
                (
                    "powers",
                    "reduce f.+ over the outer product coefficients × powers (f.^)",
                ),
            ],
        },
        Workload {
            name: "matmul",
            sizes: vec![("N", q(1024, 64))],
            reps: 3,
            tolerance: 1e-3,
            styles: vec![
                (
                    "lifted-dot",
                    "lifted dot (f.sum (f.* row col)) against transpose2d b",
                ),
                (
                    "scale-rows",
                    "scale rows and add: (reduce f.+ (f.* v b)) lifted over rows",
                ),
                (
                    "outer-sum",
                    "reduce f.+ over the outer products of columns and rows",
                ),
                ("builtin", "the prelude's f.matmul (a blocked loop)"),
            ],
        },
        Workload {
            name: "softmax",
            sizes: vec![("R", q(10_000, 100)), ("C", 1000)],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![
                (
                    "rowfun",
                    "fun of a row (reduce f.max, f.exp, f.sum) lifted over rows",
                ),
                (
                    "transpose",
                    "whole-array inline: row maxima and sums over transpose2d",
                ),
                (
                    "lambda-reduce",
                    "row fun with reduce by user lambdas for max and sum",
                ),
            ],
        },
        Workload {
            name: "logsumexp",
            sizes: vec![("R", q(10_000, 100)), ("C", 1000)],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![
                (
                    "rowfun",
                    "fun of a row (max, then log of the sum of exp) lifted over rows",
                ),
                ("transpose", "whole-array inline: reductions over transpose2d"),
                (
                    "record-fold",
                    "per-row online fold with a record state {(m Float) (s Float)}",
                ),
                ("vec2-fold", "per-row online fold with a [Float 2] state"),
            ],
        },
        Workload {
            name: "prefix",
            sizes: vec![
                ("N", q(10_000_000, 100_000)),
                ("B", 1000),
                ("NB", q(10_000_000, 100_000) / 1000),
            ],
            reps: 5,
            tolerance: 1e-3,
            styles: vec![
                ("iscan", "iscan f.+"),
                ("scan", "tail of the exclusive scan (scan f.+ 0.0)"),
                ("lambda", "iscan by a user lambda (fn (a b) (f.+ a b))"),
                (
                    "blocked",
                    "blocks of B: iscan lifted over rows, scan of the block totals",
                ),
            ],
        },
        Workload {
            name: "compact",
            sizes: vec![("N", q(10_000_000, 100_000))],
            reps: 5,
            tolerance: 1e-6,
            styles: vec![
                ("filter", "filter by the mask"),
                ("scan-scatter", "scan of the flags, select, scatter, take*"),
                (
                    "grade-gather",
                    "grade of the flags (kept first), nth gather, take*",
                ),
            ],
        },
        Workload {
            name: "gather",
            sizes: vec![("N", q(10_000_000, 100_000))],
            reps: 5,
            tolerance: 1e-6,
            styles: vec![
                ("index", "index with an index vector"),
                ("nth", "nth with an index vector (cell written out)"),
                ("lambda", "lifted scalar lambda (fn ((i Int)) (index xs i))"),
                (
                    "scatter",
                    "inverse permutation by scatter, then scatter the values",
                ),
            ],
        },
        Workload {
            name: "heat",
            sizes: vec![("N", q(1_000_000, 10_000)), ("STEPS", 20)],
            reps: 5,
            tolerance: 1e-5,
            styles: vec![
                ("rotate", "iterate a whole-array step written inline with rotate"),
                (
                    "windows",
                    "iterate: windows 3 stencil of the padded ring, lifted lambda",
                ),
                (
                    "gather",
                    "iterate: neighbours by index with computed index vectors",
                ),
                ("fold-fun", "fold over the steps of a user fun of arrays (rotate)"),
            ],
        },
        Workload {
            name: "correlate",
            sizes: vec![
                ("N", q(1_000_000, 10_000)),
                ("K", 31),
                ("M", q(1_000_000, 10_000) - 30),
            ],
            reps: 3,
            tolerance: 1e-4,
            styles: vec![
                ("windows-dot", "windows K, lifted dot with the weights"),
                (
                    "shift-sum",
                    "K shifted copies (lifted rotate, take), weighted, reduce f.+",
                ),
                (
                    "cellfold",
                    "per-output fold over the taps (index gathers), lifted",
                ),
            ],
        },
        Workload {
            name: "nbody",
            sizes: vec![("N", q(1024, 64))],
            reps: 3,
            tolerance: 1e-3,
            styles: vec![
                (
                    "pair-fun",
                    "fun of one pair lifted over all pairs, reduce/zero by lambda",
                ),
                (
                    "pair-transpose",
                    "fun of one pair lifted, sums over transpose2d by f.sum",
                ),
                (
                    "coords",
                    "whole-array over coordinate vectors (transpose2d), outer lambdas",
                ),
            ],
        },
        Workload {
            name: "life",
            sizes: vec![("N", q(1024, 64)), ("STEPS", 10)],
            reps: 3,
            tolerance: 1e-6,
            styles: vec![
                (
                    "rotate",
                    "rotations inline, a lifted scalar rule fun, fold over steps",
                ),
                (
                    "windows",
                    "3×3 windows of the padded torus, lifted lambda per cell",
                ),
                (
                    "gather",
                    "neighbour rows and columns by nth/index with index vectors",
                ),
            ],
        },
        Workload {
            name: "mandelbrot",
            sizes: vec![("N", q(256, 32)), ("ITERS", 100)],
            reps: 3,
            tolerance: 1e-6,
            styles: vec![
                (
                    "vec5",
                    "while over a frame of [Float 5] orbits (index for fields)",
                ),
                (
                    "record",
                    "while over a frame of records {(z [Float 2]) (c [Float 2]) (n Int)}",
                ),
                (
                    "arrays",
                    "iterate ITERS times over separate arrays, masked by select",
                ),
            ],
        },
        Workload {
            name: "histogram",
            sizes: vec![("N", q(10_000_000, 100_000)), ("B", 64)],
            reps: 5,
            tolerance: 1e-9,
            styles: vec![
                ("hist", "hist + over ones"),
                ("hist-lambda", "hist by a user lambda"),
                (
                    "compare-count",
                    "lifted over the bins: count of equal bin numbers",
                ),
            ],
        },
        Workload {
            name: "blackscholes",
            sizes: vec![("N", q(4_000_000, 40_000))],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![
                ("scalar", "lifted scalar fun for one option"),
                ("arrays", "fun of whole arrays [Float N], written inline"),
                (
                    "options-matrix",
                    "fun of one option row [Float 3], lifted over an [N 3] matrix",
                ),
            ],
        },
        Workload {
            name: "nearest",
            sizes: vec![("N", q(200_000, 2_000)), ("K", 32)],
            reps: 5,
            tolerance: 1e-6,
            styles: vec![
                (
                    "outer",
                    "squared distance of one pair, outer over points × centres, f.argmin",
                ),
                (
                    "rowfun",
                    "fun of one point against all centres (lambda of a difference), lifted",
                ),
                (
                    "coords",
                    "coordinate vectors by transpose2d, outer f.- per coordinate, f.argmin",
                ),
            ],
        },
        Workload {
            name: "blur",
            sizes: vec![("N", q(2048, 64))],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![
                (
                    "windows",
                    "windows of rows, windows along rows, transpose, mean of each 3×3 block",
                ),
                (
                    "separable",
                    "reduce f.+ over windows of rows, then a window lambda along each row",
                ),
            ],
        },
        Workload {
            name: "colscale",
            sizes: vec![("R", q(4096, 64)), ("C", 1024)],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![(
                "lambda",
                "column min and max by reduce over rows, a row lambda scales",
            )],
        },
        Workload {
            name: "colsoftmax",
            sizes: vec![("R", q(4096, 64)), ("C", 1024)],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![
                (
                    "items",
                    "softmax down columns: reduce f.max/f.+ over rows, row lambdas",
                ),
                (
                    "transpose",
                    "transpose2d, a row softmax fun lifted, transpose2d back",
                ),
            ],
        },
        Workload {
            name: "matvec",
            sizes: vec![("R", q(4096, 64)), ("C", 4096)],
            reps: 5,
            tolerance: 1e-3,
            styles: vec![
                ("dot", "f.dot lifted over the rows"),
                ("rowfun", "lambda of a row (f.sum (f.* r v)) lifted over the rows"),
                (
                    "columns",
                    "columns scaled by v (rows of transpose2d), added by reduce f.+",
                ),
            ],
        },
        Workload {
            name: "downsample",
            sizes: vec![("N", q(4096, 64)), ("H", q(2048, 32))],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![(
                "reshape",
                "reshape into 2×2 blocks, transpose, a block lambda (mean)",
            )],
        },
        Workload {
            name: "argmax",
            sizes: vec![("R", q(8192, 64)), ("C", 1024)],
            reps: 5,
            tolerance: 1e-9,
            styles: vec![
                ("builtin", "f.argmax lifted over the rows"),
                (
                    "mask-min",
                    "row fun: least index where the row equals its maximum (select, iota)",
                ),
                ("fold", "row fun: fold over the indices keeping the best one"),
            ],
        },
        Workload {
            name: "mask",
            sizes: vec![("N", q(10_000_000, 100_000))],
            reps: 5,
            tolerance: 1e-5,
            styles: vec![
                ("select", "select between two whole-array results by a mask"),
                ("scalar-if", "scalar fun with if, lifted"),
            ],
        },
        Workload {
            name: "runmean",
            sizes: vec![("N", q(4_000_000, 40_000)), ("W", 16)],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![
                ("windows", "f.mean of each window of W"),
                (
                    "lambda",
                    "lambda of one window (f.sum / W) lifted over the windows",
                ),
            ],
        },
        Workload {
            name: "distmat",
            sizes: vec![("N", q(2048, 64))],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![
                (
                    "pair-fun",
                    "distance of one pair of [Float 3], outer over points × points",
                ),
                (
                    "coords",
                    "transpose2d, outer f.- per coordinate row (lambda), reduce f.+, f.sqrt",
                ),
            ],
        },
        Workload {
            name: "topk",
            sizes: vec![("R", q(20_000, 200)), ("C", 128), ("K", 8)],
            reps: 5,
            tolerance: 1e-5,
            styles: vec![("sort", "row fun: f.sort, take-right K")],
        },
        Workload {
            name: "sortby",
            sizes: vec![("R", q(10_000, 100)), ("C", 100)],
            reps: 5,
            tolerance: 1e-5,
            styles: vec![
                ("key", "sort-by a less-than of |a| and |b|, lifted over the rows"),
                (
                    "argsort",
                    "row fun: grade-by of the item numbers by a less-than reading the row, nth",
                ),
            ],
        },
        Workload {
            name: "gather2d",
            sizes: vec![("N", q(2048, 64))],
            reps: 5,
            tolerance: 1e-5,
            styles: vec![
                (
                    "index2d",
                    "outer over row/column numbers of a lambda reading index2d at computed pairs",
                ),
                (
                    "nth-index",
                    "index matrices by outer +, a lambda of (row, col) reading nth then index",
                ),
            ],
        },
        // Workloads written after the compiler was tuned (issue 14's
        // programs nobody had seen): measured as found, misses included.
        Workload {
            name: "cosine",
            sizes: vec![("N", q(2048, 64)), ("D", 64)],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![
                ("matmul", "unit rows (a row fun), f.matmul with the transpose"),
                (
                    "outer-dot",
                    "unit rows, outer of a lambda of f.dot over every pair",
                ),
                (
                    "pair-fun",
                    "cosine of one pair (a lambda of dots), outer over rows × rows",
                ),
            ],
        },
        Workload {
            name: "attention",
            sizes: vec![("L", q(2048, 64)), ("DK", 16)],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![
                ("matmul", "f.matmul, a row softmax fun lifted, f.matmul"),
                (
                    "rowfun",
                    "fun of one query: f.dot scores, softmax, reduce f.+ of weighted values",
                ),
            ],
        },
        Workload {
            name: "floyd",
            sizes: vec![("N", q(256, 32))],
            reps: 3,
            tolerance: 1e-6,
            styles: vec![
                (
                    "fold-outer",
                    "fold over k: f.min with outer f.+ of column k and row k",
                ),
                ("select", "fold over k of a named step fun choosing by select"),
            ],
        },
        Workload {
            name: "minplus",
            sizes: vec![("N", q(384, 32))],
            reps: 3,
            tolerance: 1e-6,
            styles: vec![
                (
                    "outer-reduce",
                    "outer of a row/column lambda: reduce f.min of the sums",
                ),
                (
                    "fold-k",
                    "fold over k from a replicated 1e30: f.min with outer f.+",
                ),
            ],
        },
        Workload {
            name: "colscan",
            sizes: vec![("R", q(4096, 64)), ("C", 1024)],
            reps: 5,
            tolerance: 1e-5,
            styles: vec![
                ("iscan", "iscan f.+ over the rows (items)"),
                ("scan", "scan f.+ from a replicated zero row, drop 1"),
                (
                    "transpose",
                    "a row iscan lambda over the transpose, transposed back",
                ),
            ],
        },
        Workload {
            name: "sat",
            sizes: vec![("N", q(2048, 64))],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![
                ("iscan", "iscan over the rows, then a row iscan lambda"),
                (
                    "transpose",
                    "a row-scan fun on the transpose, transposed back, again",
                ),
            ],
        },
        Workload {
            name: "knn",
            sizes: vec![("Q", q(1024, 32)), ("P", q(2048, 256)), ("K", 8)],
            reps: 5,
            tolerance: 1e-5,
            styles: vec![
                (
                    "rowfun",
                    "fun of one query (a point lambda of f.dot), f.sort, take K",
                ),
                ("outer", "outer of a pair fun, a row lambda: f.sort, take K"),
            ],
        },
        Workload {
            name: "whist",
            sizes: vec![("N", q(10_000_000, 100_000)), ("B", 64)],
            reps: 5,
            tolerance: 1e-3,
            styles: vec![
                ("hist", "hist f.+ of the weights into the bins"),
                ("hist-lambda", "hist by a user lambda adding a weight"),
                (
                    "compare-sum",
                    "lifted over the bins: f.sum of select (== bins b) ws 0.0",
                ),
            ],
        },
        Workload {
            name: "clipnorm",
            sizes: vec![("N", q(10_000_000, 100_000))],
            reps: 5,
            tolerance: 1e-3,
            styles: vec![
                (
                    "select",
                    "clip by a select chain, scale by reduce f.min/f.max (inline)",
                ),
                ("clip", "f.clip, scale to [0, 1] by the extremes (inline)"),
                (
                    "scalar-if",
                    "lifted scalar fun with if, a rescale fun of a vector",
                ),
            ],
        },
        Workload {
            name: "kron",
            sizes: vec![
                ("M", q(64, 8)),
                ("N", q(64, 8)),
                ("P", q(32, 8)),
                ("Q", q(32, 8)),
                ("MP", q(64 * 32, 64)),
                ("NQ", q(64 * 32, 64)),
            ],
            reps: 5,
            tolerance: 1e-5,
            styles: vec![
                (
                    "outer-transpose",
                    "outer f.* of the atoms, transpose [0 2 1 3], reshape",
                ),
                (
                    "rows",
                    "flattened outer of a row of a and a row of b, lifted, flatten",
                ),
                ("replicate", "repeat × tile by replicate, transpose and flatten"),
            ],
        },
        Workload {
            name: "movavg",
            sizes: vec![("N", q(10_000_000, 100_000)), ("W", 16)],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![
                ("scan-drop", "scan f.+ 0.0, drop W minus drop-right W, over W"),
                (
                    "iscan-append",
                    "append 0.0 to iscan f.+, a lambda of the two sums",
                ),
            ],
        },
        Workload {
            name: "matpow",
            sizes: vec![("B", q(200_000, 2_000)), ("P", 8)],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![
                ("matmul", "iterate P-1 times f.matmul of the batch (lifted)"),
                (
                    "cell-iterate",
                    "iterate of a 3×3 product by f.dot, lifted over the batch",
                ),
            ],
        },
        // Workloads written from outside the tuned matrix (issue 11's
        // unseen formulations).
        Workload {
            name: "zscore",
            sizes: vec![("R", q(10_000, 100)), ("C", 1000)],
            reps: 5,
            // The z-scores of a row sum to 0, so the checksum (their sum)
            // is rounding noise near 0 (about ±2 over 10^7 z-scores, the
            // tolerance absolute there): it checks the scale only.
            tolerance: 4.0,
            styles: vec![
                (
                    "rowfun",
                    "fun of a row (f.mean, differences, f.sqrt of their f.mean) lifted",
                ),
                (
                    "arrays",
                    "whole-array: f.mean of the matrix as row means, lifted against the rows",
                ),
                (
                    "transpose",
                    "row sums as reduce f.+ over transpose2d, whole-array",
                ),
                (
                    "record-fold",
                    "row fun: one fold with a record state (sum, sum of squares)",
                ),
            ],
        },
        Workload {
            name: "runmax",
            sizes: vec![("N", q(10_000_000, 100_000))],
            reps: 5,
            tolerance: 1e-6,
            styles: vec![
                ("iscan", "iscan f.max"),
                ("lambda", "iscan by a user lambda (fn (a b) (f.max a b))"),
                ("scan", "tail of the exclusive scan f.max from -1e30"),
            ],
        },
        Workload {
            name: "cumprod",
            sizes: vec![("N", q(10_000_000, 100_000))],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![
                ("iscan", "iscan f.*"),
                ("lambda", "iscan by a user lambda (fn (a b) (f.* a b))"),
                ("scan", "tail of the exclusive scan f.* from 1.0"),
            ],
        },
        Workload {
            name: "sobel",
            sizes: vec![("N", q(2048, 64))],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![
                (
                    "windows",
                    "3×3 blocks by windows + transpose, a block fun weighting by both kernels",
                ),
                (
                    "shifts",
                    "shifted views: drop/drop-right on rows, and on each row by a lifted fun",
                ),
                (
                    "rotate",
                    "rotated copies of the whole image (rows, and each row), border cut after",
                ),
            ],
        },
        Workload {
            name: "grey",
            sizes: vec![("N", q(2048, 64))],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![
                (
                    "dot",
                    "f.dot of each pixel with the weights (a frame of [Float 3])",
                ),
                ("pixel", "lambda of one pixel, its channels by index, lifted"),
                (
                    "planes",
                    "transpose [2 0 1], weighted sum of the three planes by nth",
                ),
            ],
        },
        Workload {
            name: "rot90",
            sizes: vec![("N", q(2048, 64))],
            reps: 5,
            tolerance: 1e-6,
            styles: vec![
                ("reverse", "reverse of transpose2d"),
                ("perm", "fun of an image: reverse of (transpose [1 0])"),
                (
                    "gather",
                    "outer over row/column numbers of a lambda reading index2d",
                ),
            ],
        },
        Workload {
            name: "diff",
            sizes: vec![("N", q(10_000_000, 100_000))],
            reps: 5,
            tolerance: 1e-5,
            styles: vec![
                ("drop", "f.abs of drop 1 minus drop-right 1"),
                (
                    "rotate",
                    "f.abs of rotate by 1 minus itself, the wrapped item dropped",
                ),
                ("windows", "lambda of a window of 2, lifted over windows 2"),
            ],
        },
        Workload {
            name: "onehot",
            sizes: vec![("N", q(1_000_000, 10_000)), ("K", 16)],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![
                (
                    "outer",
                    "one-hot by outer ==, bool->f, column sums by reduce f.+, class means",
                ),
                (
                    "lambda",
                    "one-hot row by a lambda of a label, lifted; column sums by reduce f.+",
                ),
                (
                    "transpose",
                    "one-hot transposed (a row per class): f.dot with the values, count",
                ),
            ],
        },
        Workload {
            name: "segsum",
            sizes: vec![
                ("N", q(10_000_000, 100_000)),
                ("M", segments(q(10_000_000, 100_000))),
            ],
            reps: 5,
            tolerance: 1e-3,
            styles: vec![
                ("hist", "segment numbers by iscan + of the flags, hist f.+"),
                (
                    "scan-ends",
                    "iscan f.+ kept at the segment ends (filter), differences by windows 2",
                ),
                (
                    "segscan",
                    "iscan of [flag value] pairs by a restarting user fun, filter at the ends",
                ),
            ],
        },
        Workload {
            name: "collatz",
            sizes: vec![("N", q(100_000, 1000))],
            reps: 3,
            tolerance: 1e-9,
            styles: vec![
                (
                    "vec2",
                    "while over a [value steps] state per start (if inside the step)",
                ),
                (
                    "record",
                    "while over a record state {n k} per start, lambdas, select",
                ),
            ],
        },
        Workload {
            name: "slidemax",
            sizes: vec![("N", q(4_000_000, 40_000)), ("W", 16)],
            reps: 5,
            tolerance: 1e-6,
            styles: vec![
                (
                    "lambda",
                    "lambda of a window (reduce f.max) lifted over windows W",
                ),
                ("transpose", "reduce f.max over transpose2d of the windows"),
                (
                    "fold",
                    "fun of a window: fold by a user lambda from its head, lifted",
                ),
            ],
        },
        Workload {
            name: "bilinear",
            sizes: vec![("N", q(2048, 64)), ("M", q(1024, 32))],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![
                (
                    "point",
                    "fun of one output pixel (4 index2d at floors), outer over rows × columns",
                ),
                (
                    "separable",
                    "rows by nth at the floors, each row read by index (lifted fun), blended",
                ),
            ],
        },
        // The third round of unseen workloads, measured on both engines
        // before anything was tuned for them.
        Workload {
            name: "polyval",
            sizes: vec![("M", q(1000, 10)), ("K", 8), ("P", q(4000, 400))],
            reps: 5,
            tolerance: 1e-3,
            styles: vec![
                (
                    "outer",
                    "outer of a one-point Horner fun (fold over a coefficient row)",
                ),
                (
                    "arrayfold",
                    "fold over the coefficient columns, [M P] state, a row lambda lifted",
                ),
                (
                    "vander",
                    "Vandermonde matrix by outer f.^, f.matmul with the coefficients",
                ),
            ],
        },
        Workload {
            name: "logreg",
            sizes: vec![("N", q(500_000, 5_000)), ("D", 32)],
            reps: 5,
            tolerance: 1e-3,
            styles: vec![
                (
                    "rowfun",
                    "sigmoid of lifted f.dot, rows weighted by residuals, reduce f.+",
                ),
                (
                    "transpose",
                    "f.dot of the columns (transpose2d) with the residuals",
                ),
                ("grad", "grad of the mean log loss (softplus) by AD"),
            ],
        },
        Workload {
            name: "heatfix",
            sizes: vec![("N", q(1_000_000, 10_000)), ("STEPS", 20)],
            reps: 5,
            tolerance: 1e-5,
            styles: vec![
                (
                    "drop",
                    "iterate: interior from drop/drop-right views, ends appended",
                ),
                ("rotate", "iterate: rotated copies, select keeping the two ends"),
                (
                    "windows",
                    "iterate: lambda of a window of 3 lifted, ends appended",
                ),
            ],
        },
        Workload {
            name: "drawdown",
            sizes: vec![("N", q(10_000_000, 100_000))],
            reps: 5,
            tolerance: 1e-6,
            styles: vec![
                ("iscan", "reduce f.max of iscan f.max minus the series"),
                ("record-fold", "one fold with a record state {peak drop}"),
                (
                    "scan-lambda",
                    "tail of scan by a max lambda, reduce by a max lambda",
                ),
            ],
        },
        Workload {
            name: "l1dist",
            sizes: vec![("N", q(2000, 100)), ("D", 4)],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![
                ("pair-fun", "outer of a fun of one pair (f.sum of f.abs)"),
                (
                    "coords",
                    "coordinate rows (transpose2d), f.abs of outer f.-, reduce f.+",
                ),
                (
                    "row-fun",
                    "fun of one point and all points (a lambda lifted), lifted",
                ),
            ],
        },
        Workload {
            name: "pool2",
            sizes: vec![
                ("R", q(2048, 64)),
                ("C", q(4096, 128)),
                ("H", q(1024, 32)),
                ("W", q(2048, 64)),
            ],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![
                (
                    "reduce-axes",
                    "reshape, transpose [1 3 0 2], two whole-array reduce f.+",
                ),
                (
                    "rowpairs",
                    "even + odd rows by nth, then even + odd columns by index, lifted",
                ),
                (
                    "windows-stride",
                    "windows 2 at even starts (nth), rows then columns",
                ),
                ("gather", "outer over output pixels of a lambda of four index2d"),
            ],
        },
        Workload {
            name: "runlen",
            sizes: vec![("N", q(10_000_000, 100_000))],
            reps: 5,
            tolerance: 1e-9,
            styles: vec![
                (
                    "filter",
                    "run starts by filter of the positions, next start minus start",
                ),
                (
                    "windows",
                    "run ends by filter, -1 in front, differences by windows 2",
                ),
                (
                    "scan-count",
                    "iscan of [start count] pairs by a restarting fun, filter at ends",
                ),
            ],
        },
        Workload {
            name: "dot4",
            sizes: vec![("M", q(2_000_000, 20_000))],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![
                ("dot", "f.dot lifted over the rows"),
                ("lambda", "lambda of two rows (f.sum of f.*), lifted"),
                (
                    "columns",
                    "transpose2d both, reduce f.+ over the four product rows",
                ),
                ("unrolled", "fun of two rows, components by index, lifted"),
            ],
        },
        Workload {
            name: "ema",
            sizes: vec![("R", q(100, 10)), ("C", q(100_000, 10_000))],
            reps: 3,
            tolerance: 1e-4,
            styles: vec![
                (
                    "scan-rows",
                    "row fun: tail of scan by an update lambda, lifted over rows",
                ),
                (
                    "scan-columns",
                    "scan over transpose2d with a [Float R] state, transposed back",
                ),
                (
                    "iscan-affine",
                    "row fun: iscan composing [decay term] affine maps",
                ),
            ],
        },
        Workload {
            name: "rownorm",
            sizes: vec![("R", q(4000, 40)), ("C", 2000)],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![
                ("rowfun", "fun of a row over its reduce f.max, lifted"),
                (
                    "transpose",
                    "row maxima by reduce f.max over transpose2d, whole-array",
                ),
                (
                    "fold-lambda",
                    "inline row lambda, maximum by a fold of a max lambda",
                ),
            ],
        },
        // Unseen workloads (u-unseen4): written after both engines were
        // tuned, in styles a NumPy, J, APL or Futhark user would write.
        Workload {
            name: "thomas",
            sizes: vec![("S", q(10_000, 100)), ("M", 64)],
            reps: 3,
            tolerance: 1e-4,
            styles: vec![
                (
                    "scan",
                    "fun of one system: sweep and back substitution as scans of [Float 4] rows",
                ),
                (
                    "columns",
                    "scans over the [4 S] columns of whole-array steps, transposed back",
                ),
                (
                    "record",
                    "fun of one system: scans of records {a b c d} by a fun and a lambda",
                ),
            ],
        },
        Workload {
            name: "rk4",
            sizes: vec![("N", q(200_000, 2_000)), ("STEPS", 10)],
            reps: 3,
            tolerance: 1e-4,
            styles: vec![
                (
                    "vec2",
                    "iterate a [Float 2] step fun lifted over the [N 2] states",
                ),
                ("record", "iterate a step fun of records {(x Float) (v Float)}"),
                (
                    "arrays",
                    "fold over the steps of a step fun of the whole [2 N] state",
                ),
            ],
        },
        Workload {
            name: "interp",
            sizes: vec![("N", q(2_000_000, 20_000)), ("T", 1024), ("LOG", 10)],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![
                (
                    "searchsorted",
                    "whole-array: searchsorted/right, ends gathered by index, select",
                ),
                ("scalar", "lifted scalar fun of one query (searchsorted, if)"),
                (
                    "bisect",
                    "iterate LOG halvings of a [lo hi] pair lifted over the queries",
                ),
            ],
        },
        Workload {
            name: "sieve",
            sizes: vec![("N", q(4_000_000, 40_000)), ("SQ", q(1999, 199))],
            reps: 3,
            tolerance: 1e-9,
            styles: vec![
                (
                    "fold-scatter",
                    "fold over the candidates, scatter of zeros at the multiples, filter",
                ),
                (
                    "while-record",
                    "while over a record {(p Int) (flags [Int N])}, scatter, filter",
                ),
            ],
        },
        Workload {
            name: "cross",
            sizes: vec![("N", q(1_000_000, 10_000))],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![
                (
                    "unrolled",
                    "fun of two [Float 3] rows, components by index, lifted",
                ),
                ("rotate", "lambda of two rows: (1⌽a)×(2⌽b) − (2⌽a)×(1⌽b), lifted"),
                (
                    "columns",
                    "coordinate rows by transpose2d, whole-array components, transposed back",
                ),
            ],
        },
        Workload {
            name: "cov",
            sizes: vec![("N", q(500_000, 5_000)), ("K", 16)],
            reps: 5,
            tolerance: 1e-3,
            styles: vec![
                (
                    "matmul",
                    "centred by a row lambda, f.matmul of its transpose with it",
                ),
                (
                    "outer-sum",
                    "reduce f.+ over the outer products of the centred rows",
                ),
                (
                    "dot-columns",
                    "centred columns (transpose2d, f.mean), outer of f.dot",
                ),
            ],
        },
        Workload {
            name: "gauss",
            sizes: vec![("N", q(1024, 64)), ("M", q(1020, 60))],
            reps: 5,
            tolerance: 1e-4,
            styles: vec![
                (
                    "separable",
                    "f.dot of each window of 5 along the rows, then reduce over windows of rows",
                ),
                (
                    "windows-2d",
                    "5×5 windows by windows and transpose, f.sum against the outer kernel",
                ),
                (
                    "shifts",
                    "five rotated and taken copies weighted and added, rows then columns",
                ),
            ],
        },
        Workload {
            name: "median",
            sizes: vec![("R", q(100_000, 1_000)), ("C", 64), ("H", 32)],
            reps: 5,
            tolerance: 1e-6,
            styles: vec![
                (
                    "sort",
                    "row fun: f.sort, the mean of the two middle items, lifted",
                ),
                ("grade", "row lambda: f.grade, the middle two gathered"),
                (
                    "sort-by",
                    "sort-by a less-than lambda, the middle columns averaged",
                ),
            ],
        },
        Workload {
            name: "hist2d",
            sizes: vec![("N", q(4_000_000, 40_000)), ("B", 64), ("BB", 64 * 64)],
            reps: 5,
            tolerance: 1e-9,
            styles: vec![
                ("hist", "flat bin numbers, hist + over ones into B² bins, reshape"),
                (
                    "lambda",
                    "bin of a point by a lifted scalar fun, hist by a lambda",
                ),
            ],
        },
        Workload {
            name: "mcpi",
            sizes: vec![("W", q(250_000, 2_500)), ("STEPS", 10)],
            reps: 5,
            tolerance: 1e-9,
            styles: vec![
                (
                    "vec",
                    "iterate an [Int 2] (seed, hits) step lifted over the walkers",
                ),
                ("record", "iterate a step of records {(s Int) (hits Int)}"),
                ("arrays", "fold over the steps of a whole-array [2 W] update"),
            ],
        },
    ]
}

/// The values of `runlen` (as `numpy_styles.py`'s `run_values`): 0, 1
/// and 2 in blocks of five.
fn run_values(n: usize) -> Vec<i64> {
    (0..n)
        .map(|i| (((i / 5) * 7919 + 104_729) % 1000 % 3) as i64)
        .collect()
}

/// The segment starts of `segsum` (as `numpy_styles.py`'s
/// `segment_flags`): about one item in a hundred, and the first.
fn segment_flags(n: usize) -> Vec<i64> {
    (0..n).map(|i| i64::from(starts_segment(i))).collect()
}

fn starts_segment(i: usize) -> bool {
    i == 0 || (i * 7919 + 3 * 104_729) % 1000 < 10
}

/// How many segments `segment_flags(n)` starts.
fn segments(n: usize) -> usize {
    // (Counted without the flags: the table is built before every row,
    // and 10^7 flags would add 80 MB to each row's measured peak.)
    (0..n).filter(|&i| starts_segment(i)).count()
}

/// The entry's arguments for a workload: the same data as
/// `numpy_styles.py`'s `setup`.
fn arguments<'p>(w: &Workload) -> Vec<Value<'p>> {
    let n = size(&w.sizes, "N");
    let add = |v: Vec<f32>, a: f32| v.into_iter().map(|x| x + a).collect::<Vec<_>>();
    let affine = |v: Vec<f32>, m: f32, a: f32| v.into_iter().map(|x| x * m + a).collect::<Vec<_>>();
    match w.name {
        "horner" => {
            let c = size(&w.sizes, "C");
            vec![
                float_array(vec![n], affine(floats(n, 1), 2.0, -1.0)),
                float_array(vec![c], add(floats(c, 2), -0.5)),
            ]
        }
        "matmul" => vec![
            float_array(vec![n, n], add(floats(n * n, 1), -0.5)),
            float_array(vec![n, n], add(floats(n * n, 2), -0.5)),
        ],
        "softmax" | "logsumexp" => {
            let (r, c) = (size(&w.sizes, "R"), size(&w.sizes, "C"));
            vec![float_array(vec![r, c], affine(floats(r * c, 1), 4.0, 0.0))]
        }
        "prefix" => vec![float_array(vec![n], add(floats(n, 1), -0.5))],
        "compact" => vec![float_array(vec![n], floats(n, 1))],
        "gather" => vec![
            float_array(vec![n], floats(n, 1)),
            int_array(vec![n], (0..n).map(|i| ((i * 7919 + 12345) % n) as i64).collect()),
        ],
        "heat" => vec![float_array(vec![n], floats(n, 1))],
        "correlate" => {
            let k = size(&w.sizes, "K");
            vec![
                float_array(vec![n], floats(n, 1)),
                float_array(vec![k], floats(k, 2)),
            ]
        }
        "nbody" => vec![
            float_array(vec![n, 3], affine(floats(3 * n, 1), 10.0, 0.0)),
            float_array(vec![n], add(floats(n, 2), 0.5)),
        ],
        "life" => vec![int_array(vec![n, n], cells(n * n, 1))],
        "mandelbrot" => mandelbrot_grid(n),
        "histogram" => vec![float_array(vec![n], floats(n, 1))],
        "blackscholes" => vec![
            float_array(vec![n], affine(floats(n, 1), 100.0, 50.0)),
            float_array(vec![n], affine(floats(n, 2), 100.0, 50.0)),
            float_array(vec![n], affine(floats(n, 3), 2.0, 0.25)),
        ],
        "nearest" => vec![
            float_array(vec![n, 2], floats(2 * n, 1)),
            float_array(vec![size(&w.sizes, "K"), 2], floats(2 * size(&w.sizes, "K"), 2)),
        ],
        "blur" | "downsample" | "gather2d" => vec![float_array(vec![n, n], floats(n * n, 1))],
        "colscale" | "colsoftmax" | "argmax" | "topk" | "sortby" => {
            let (r, c) = (size(&w.sizes, "R"), size(&w.sizes, "C"));
            vec![float_array(vec![r, c], floats(r * c, 1))]
        }
        "matvec" => {
            let (r, c) = (size(&w.sizes, "R"), size(&w.sizes, "C"));
            vec![
                float_array(vec![r, c], floats(r * c, 1)),
                float_array(vec![c], floats(c, 2)),
            ]
        }
        "mask" | "runmean" => vec![float_array(vec![n], floats(n, 1))],
        "distmat" => vec![float_array(vec![n, 3], affine(floats(3 * n, 1), 10.0, 0.0))],
        // The workloads written after the compiler was tuned.
        "cosine" => {
            let d = size(&w.sizes, "D");
            vec![float_array(vec![n, d], add(floats(n * d, 1), -0.5))]
        }
        "attention" => {
            let (l, d) = (size(&w.sizes, "L"), size(&w.sizes, "DK"));
            (1..=3)
                .map(|seed| float_array(vec![l, d], add(floats(l * d, seed), -0.5)))
                .collect()
        }
        "floyd" | "minplus" => vec![float_array(vec![n, n], affine(floats(n * n, 1), 10.0, 1.0))],
        "colscan" => {
            let (r, c) = (size(&w.sizes, "R"), size(&w.sizes, "C"));
            vec![float_array(vec![r, c], floats(r * c, 1))]
        }
        "sat" => vec![float_array(vec![n, n], floats(n * n, 1))],
        "clipnorm" => vec![float_array(vec![n], floats(n, 1))],
        "knn" => {
            let (q, p) = (size(&w.sizes, "Q"), size(&w.sizes, "P"));
            vec![
                float_array(vec![q, 2], floats(2 * q, 1)),
                float_array(vec![p, 2], floats(2 * p, 2)),
            ]
        }
        "whist" => vec![
            float_array(vec![n], floats(n, 1)),
            float_array(vec![n], floats(n, 2)),
        ],
        "kron" => {
            let (m, p, q) = (size(&w.sizes, "M"), size(&w.sizes, "P"), size(&w.sizes, "Q"));
            vec![
                float_array(vec![m, n], floats(m * n, 1)),
                float_array(vec![p, q], floats(p * q, 2)),
            ]
        }
        "movavg" => vec![float_array(vec![n], add(floats(n, 1), -0.5))],
        "matpow" => {
            let b = size(&w.sizes, "B");
            vec![float_array(vec![b, 3, 3], floats(9 * b, 1))]
        }
        "zscore" => {
            let (r, c) = (size(&w.sizes, "R"), size(&w.sizes, "C"));
            vec![float_array(vec![r, c], floats(r * c, 1))]
        }
        "runmax" | "diff" | "slidemax" => vec![float_array(vec![n], floats(n, 1))],
        "cumprod" => vec![float_array(vec![n], affine(add(floats(n, 1), -0.5), 0.001, 1.0))],
        "sobel" | "rot90" | "bilinear" => vec![float_array(vec![n, n], floats(n * n, 1))],
        "grey" => vec![float_array(vec![n, n, 3], floats(n * n * 3, 1))],
        "onehot" => {
            let k = size(&w.sizes, "K");
            vec![
                int_array(vec![n], (0..n).map(|i| (i * 7919 % k) as i64).collect()),
                float_array(vec![n], floats(n, 1)),
            ]
        }
        "segsum" => vec![
            int_array(vec![n], segment_flags(n)),
            float_array(vec![n], add(floats(n, 1), -0.5)),
        ],
        "collatz" => vec![int_array(vec![n], (1..=n as i64).collect())],
        "polyval" => {
            let (m, k, p) = (size(&w.sizes, "M"), size(&w.sizes, "K"), size(&w.sizes, "P"));
            vec![
                float_array(vec![m, k], add(floats(m * k, 2), -0.5)),
                float_array(vec![p], affine(floats(p, 1), 2.0, -1.0)),
            ]
        }
        "logreg" => {
            let d = size(&w.sizes, "D");
            let y = floats(n, 3)
                .into_iter()
                .map(|v| f32::from(u8::from(v > 0.5)))
                .collect();
            vec![
                float_array(vec![n, d], add(floats(n * d, 1), -0.5)),
                float_array(vec![n], y),
                float_array(vec![d], add(floats(d, 2), -0.5)),
            ]
        }
        "heatfix" | "drawdown" => vec![float_array(vec![n], floats(n, 1))],
        "l1dist" => {
            let d = size(&w.sizes, "D");
            vec![float_array(vec![n, d], affine(floats(n * d, 1), 10.0, 0.0))]
        }
        "pool2" | "ema" | "rownorm" => {
            let (r, c) = (size(&w.sizes, "R"), size(&w.sizes, "C"));
            vec![float_array(vec![r, c], floats(r * c, 1))]
        }
        "runlen" => vec![int_array(vec![n], run_values(n))],
        "dot4" => {
            let m = size(&w.sizes, "M");
            vec![
                float_array(vec![m, 4], floats(4 * m, 1)),
                float_array(vec![m, 4], floats(4 * m, 2)),
            ]
        }
        // The unseen workloads (as numpy_styles.py's setup).
        "thomas" => {
            let sm = size(&w.sizes, "S") * size(&w.sizes, "M");
            let shape = vec![size(&w.sizes, "S"), size(&w.sizes, "M")];
            vec![
                float_array(shape.clone(), floats(sm, 1)),
                float_array(shape.clone(), add(floats(sm, 2), 4.0)),
                float_array(shape.clone(), floats(sm, 3)),
                float_array(shape, floats(sm, 4)),
            ]
        }
        "rk4" => vec![
            float_array(vec![n], affine(floats(n, 1), 2.0, -1.0)),
            float_array(vec![n], affine(floats(n, 2), 2.0, -1.0)),
        ],
        "interp" => {
            let t = size(&w.sizes, "T");
            let xp = (0..t)
                .map(|i| {
                    let u = i as f32 / t as f32;
                    u * u * 1.2 - 0.1
                })
                .collect();
            vec![
                float_array(vec![t], xp),
                float_array(vec![t], floats(t, 2)),
                float_array(vec![n], affine(floats(n, 1), 1.4, -0.2)),
            ]
        }
        "sieve" => vec![],
        "cross" => vec![
            float_array(vec![n, 3], floats(3 * n, 1)),
            float_array(vec![n, 3], add(floats(3 * n, 2), -0.5)),
        ],
        "cov" => {
            let k = size(&w.sizes, "K");
            vec![float_array(vec![n, k], floats(n * k, 1))]
        }
        "gauss" => vec![float_array(vec![n, n], floats(n * n, 1))],
        "median" => {
            let (r, c) = (size(&w.sizes, "R"), size(&w.sizes, "C"));
            vec![float_array(vec![r, c], floats(r * c, 1))]
        }
        "hist2d" => vec![
            float_array(vec![n], floats(n, 1)),
            float_array(
                vec![n],
                (0..n)
                    .map(|i| ((i / 1000 * 7919 + 2 * 104_729) % 1000) as f32 / 1000.0)
                    .collect(),
            ),
        ],
        "mcpi" => {
            let w = size(&w.sizes, "W");
            vec![int_array(
                vec![w],
                (0..w as i64).map(|i| (i * 7919 + 1) % 2_147_483_648).collect(),
            )]
        }
        other => fatal(&format!("no arguments for {other}")),
    }
}

/// In the fresh process of a row: runs it, printing `first PEAK_KIB SECS
/// CHECKSUM` after the first run and `median SECS CHECKSUM` at the end.
fn child(w: &Workload, style: &str) {
    let text = common::source(&format!("benches/styles/{}/{style}.remora", w.name), &w.sizes);
    let name = format!("{}/{style}", w.name);
    if std::env::var("REMORA_ENGINE").as_deref() == Ok("compiled") {
        return child_compiled(w, &name, &text);
    }
    let mut total = Duration::ZERO;
    let log = std::env::var("CELLS").is_ok_and(|v| v == "1");
    let ((mut times, sum), notes) =
        common::time_entry_logged(&name, &text, &|| arguments(w), 1 + w.reps, log, |rep, t, sum| {
            if rep == 0 {
                println!("first {} {} {sum}", peak_kib().unwrap_or(0), t.as_secs_f64());
                let _ = std::io::stdout().flush();
                return t <= REPEAT_BELOW;
            }
            total += t;
            total < REPEAT_BUDGET
        });
    for n in notes {
        println!("cells {n}");
    }
    // The first run (cold) counts only when it is the only one.
    if times.len() > 1 {
        times.remove(0);
    }
    println!("median {} {sum}", common::median(&mut times).as_secs_f64());
}

/// [`child`] on the compiled engine: the program compiled once (into a
/// fresh cache, not timed), then run as `remora run --engine compiled`
/// runs it; the time is the compiled program's own clock (its inputs read
/// to its results ready, as NumPy's is timed), the peak memory the
/// compiled program's.
fn child_compiled(w: &Workload, name: &str, text: &str) {
    let cache = std::env::temp_dir().join(format!("remora-styles-{}", std::process::id()));
    let compiled = match common::compile_entry(name, text, &cache) {
        Ok(compiled) => compiled,
        Err(why) => fatal(&format!("{name}: {why}")),
    };
    let args: Vec<remora_value::Array> = arguments(w)
        .into_iter()
        .filter_map(remora::native::base)
        .collect();
    let (mut times, mut total, mut sum) = (Vec::new(), Duration::ZERO, f64::NAN);
    for rep in 0..1 + w.reps {
        let run = match common::run_compiled_once(&compiled, &args, &[]) {
            Ok(run) => run,
            Err(why) => fatal(&format!("{name}: {why}")),
        };
        let t = run.compute;
        sum = common::checksum_results(run.results);
        times.push(t);
        if rep == 0 {
            println!("first {} {} {sum}", run.peak_kib, t.as_secs_f64());
            let _ = std::io::stdout().flush();
            if t > REPEAT_BELOW {
                break;
            }
        } else {
            total += t;
            if total >= REPEAT_BUDGET {
                break;
            }
        }
    }
    let _ = std::fs::remove_dir_all(&cache);
    if times.len() > 1 {
        times.remove(0);
    }
    println!("median {} {sum}", common::median(&mut times).as_secs_f64());
}

/// What a row's fresh process reported.
enum Outcome {
    Ran {
        secs: f64,
        sum: f64,
        peak_kib: u64,
        cells: Vec<String>,
    },
    Timeout,
    /// The last line the run wrote on standard error.
    Failed(String),
}

fn run_row(w: &Workload, style: &str, quick: bool) -> Outcome {
    let row = format!("{}/{style}", w.name);
    let (lines, killed, ok, errors) =
        common::rerun_self_stderr(&[("REMORA_STYLES_ROW", &row)], quick, TIMEOUT, true);
    let field = |line: &String, i: usize| -> Option<f64> { line.split_whitespace().nth(i)?.parse().ok() };
    let first = lines.iter().find(|l| l.starts_with("first "));
    let median = lines.iter().find(|l| l.starts_with("median "));
    let cells: Vec<String> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("cells "))
        .map(str::to_string)
        .collect();
    match (first, median) {
        (Some(f), Some(m)) if ok => Outcome::Ran {
            secs: field(m, 1).unwrap_or(f64::NAN),
            sum: field(m, 2).unwrap_or(f64::NAN),
            peak_kib: field(f, 1).map_or(0, |k| k as u64),
            cells: cells.clone(),
        },
        // The first run finished within the limit but a further one did
        // not: report the first.
        (Some(f), None) if killed => Outcome::Ran {
            secs: field(f, 2).unwrap_or(f64::NAN),
            sum: field(f, 3).unwrap_or(f64::NAN),
            peak_kib: field(f, 1).map_or(0, |k| k as u64),
            cells: cells.clone(),
        },
        (None, _) if killed => Outcome::Timeout,
        _ => Outcome::Failed(errors.lines().last().unwrap_or("no output").to_string()),
    }
}

fn main() {
    let quick = std::env::var("QUICK").is_ok_and(|v| v == "1");
    let all = workloads(quick);
    if let Ok(row) = std::env::var("REMORA_STYLES_ROW") {
        let (wname, style) = row
            .split_once('/')
            .unwrap_or_else(|| fatal("REMORA_STYLES_ROW is WORKLOAD/STYLE"));
        let Some(w) = all.into_iter().find(|w| w.name == wname) else {
            fatal(&format!("no workload {wname}"))
        };
        let style = style.to_string();
        remora_syntax::stack::run_deep(move || child(&w, &style));
        return;
    }
    let log_cells = std::env::var("CELLS").is_ok_and(|v| v == "1");
    let only: Option<Vec<String>> = std::env::var("ROWS")
        .ok()
        .map(|s| s.split(',').map(str::to_string).collect());
    let wanted = |w: &str, s: &str| {
        only.as_ref()
            .is_none_or(|o| o.iter().any(|x| x == w || *x == format!("{w}/{s}")))
    };
    // The target: within 3× of NumPy on the interpreter (issue 11); at
    // least twice as fast as NumPy compiled (issue 14).
    let compiled = std::env::var("REMORA_ENGINE").as_deref() == Ok("compiled");
    let (target, target_text) = if compiled {
        (0.5, "≤½×")
    } else {
        (3.0, "≤3×")
    };
    println!(
        "{:<28} {:>10} {:>9} {:>8} {:>9} {:>8} {:>5} {:>5} {:>5}  formulation",
        "workload/style",
        "Remora ms",
        "NumPy ms",
        "ratio",
        "Remora MB",
        "NumPy MB",
        target_text,
        "≤2×M",
        "agree"
    );
    let (mut rows, mut met, mut disagree, mut timeouts) = (0, 0, 0, 0);
    for w in &all {
        if !w.styles.iter().any(|(s, _)| wanted(w.name, s)) {
            continue;
        }
        let script = "benches/styles/numpy_styles.py";
        let numpy = common::run_numpy(script, w.name, w.reps, &w.sizes, false);
        let numpy_peak = common::run_numpy(script, w.name, 1, &w.sizes, true).map(|(_, _, k)| k);
        println!("── {} ({})", w.name, common::sizes_text(&w.sizes));
        for (style, what) in &w.styles {
            if !wanted(w.name, style) {
                continue;
            }
            rows += 1;
            let label = format!("{}/{style}", w.name);
            let numpy_ms = numpy
                .map(|(t, _, _)| format!("{:.1}", ms(t)))
                .unwrap_or("-".into());
            match run_row(w, style, quick) {
                Outcome::Ran {
                    secs,
                    sum,
                    peak_kib,
                    cells,
                } => {
                    let ratio = numpy.map(|(t, _, _)| secs / t.as_secs_f64());
                    let agree = numpy.map(|(_, s, _)| common::agree(s, sum, w.tolerance));
                    let fast = ratio.is_some_and(|r| r <= target);
                    let small = numpy_peak.is_some_and(|n| peak_kib as f64 <= 2.0 * n as f64);
                    met += usize::from(fast && small && agree == Some(true));
                    disagree += usize::from(agree == Some(false));
                    let mark = |b: bool| if b { "yes" } else { "no" };
                    println!(
                        "{:<28} {:>10.1} {:>9} {:>8} {:>9} {:>8} {:>5} {:>5} {:>5}  {what}",
                        label,
                        secs * 1000.0,
                        numpy_ms,
                        ratio.map(|r| format!("{r:.2}")).unwrap_or("-".into()),
                        mb(Some(peak_kib)),
                        mb(numpy_peak),
                        mark(fast),
                        mark(small),
                        common::agreement(agree),
                    );
                    common::report_disagreement(agree, sum, numpy.map(|(_, s, _)| s));
                    if log_cells {
                        if cells.is_empty() {
                            println!("  cell by cell: nothing");
                        }
                        for c in cells {
                            println!("  cell by cell at {c}");
                        }
                    }
                }
                Outcome::Timeout => {
                    timeouts += 1;
                    println!(
                        "{:<28} {:>10} {:>9} {:>8} {:>9} {:>8} {:>5} {:>5} {:>5}  {what}",
                        label,
                        "timeout",
                        numpy_ms,
                        "-",
                        "-",
                        mb(numpy_peak),
                        "no",
                        "-",
                        "-"
                    );
                }
                Outcome::Failed(error) => {
                    println!("{label:<28} {:>10}  {what}", "failed");
                    println!("  {error}");
                }
            }
        }
    }
    println!(
        "{met} of {rows} rows meet both targets (time ≤ {target}× and peak memory ≤ 2× NumPy's) and agree; \
         {timeouts} timed out (> {} s); {disagree} disagree",
        TIMEOUT.as_secs()
    );
}

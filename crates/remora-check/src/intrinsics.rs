//! The 76 intrinsics of core.md §2 and their types, written in Remora's own
//! type syntax and read by the front end, so the table reads like the spec.

/// `(names, type)`: every name in a row has the row's type.
pub const INTRINSICS: &[(&str, &str)] = &[
    // §2.1 scalar primitives
    (
        "+ - * / mod ^ max min bit-and bit-or bit-xor shl shr",
        "(-> (Int Int) Int)",
    ),
    ("f.+ f.- f.* f./ f.^ f.max f.min", "(-> (Float Float) Float)"),
    ("== != < > <= >=", "(-> (Int Int) Bool)"),
    ("f.== f.!= f.< f.> f.<= f.>=", "(-> (Float Float) Bool)"),
    ("and or bool.== bool.!=", "(-> (Bool Bool) Bool)"),
    ("not", "(-> Bool Bool)"),
    ("bit-not popc", "(-> Int Int)"),
    ("sqrt f.sqrt f.ln f.exp f.tanh", "(-> Float Float)"),
    ("i->f", "(-> Int Float)"),
    ("i->bool", "(-> Int Bool)"),
    ("bool->i", "(-> Bool Int)"),
    ("bool->f", "(-> Bool Float)"),
    ("truncate round floor ceiling", "(-> Float Int)"),
    // §2.2 array intrinsics
    ("head", "(∀ (&t) (Π ($d @s) (-> [&t (+ 1 $d) @s] [&t @s])))"),
    ("tail", "(∀ (&t) (Π ($d @s) (-> [&t (+ 1 $d) @s] [&t $d @s])))"),
    ("length", "(∀ (&t) (Π ($d @s) (-> [&t $d @s] Int)))"),
    (
        "append",
        "(∀ (&t) (Π ($m $n @s) (-> ([&t $m @s] [&t $n @s]) [&t (+ $m $n) @s])))",
    ),
    ("reverse", "(∀ (&t) (Π ($d @s) (-> [&t $d @s] [&t $d @s])))"),
    (
        "reduce",
        "(∀ (&t) (Π ($d @s) (-> ((-> ([&t @s] [&t @s]) [&t @s]) [&t (+ 1 $d) @s]) [&t @s])))",
    ),
    (
        "reduce/zero",
        "(∀ (&t) (Π ($d @s) (-> ((-> ([&t @s] [&t @s]) [&t @s]) [&t @s] [&t $d @s]) [&t @s])))",
    ),
    (
        "fold",
        "(∀ (&t1 &t2) (Π ($d @s1 @s2) (-> ((-> ([&t2 @s2] [&t1 @s1]) [&t2 @s2]) [&t2 @s2] [&t1 (+ 1 $d) @s1]) [&t2 @s2])))",
    ),
    (
        "fold-right",
        "(∀ (&t1 &t2) (Π ($d @s1 @s2) (-> ((-> ([&t1 @s1] [&t2 @s2]) [&t2 @s2]) [&t2 @s2] [&t1 (+ 1 $d) @s1]) [&t2 @s2])))",
    ),
    ("sum", "(Π (@s) (-> [Int @s] Int))"),
    (
        "flatten",
        "(∀ (&t) (Π ($m $n @s) (-> [&t $m $n @s] [&t (* $m $n) @s])))",
    ),
    ("reshape", "(∀ (&t) (Π (@s1 @s2) (-> [&t @s1] [&t @s2])))"),
    ("transpose2d", "(∀ (&t) (Π ($m $n) (-> [&t $m $n] [&t $n $m])))"),
    ("index", "(∀ (&t) (Π ($m) (-> ([&t $m] Int) &t)))"),
    ("index2d", "(∀ (&t) (Π ($m $n) (-> ([&t $m $n] [Int 2]) &t)))"),
    ("iota/static", "(Π (@s) [Int @s])"),
    ("iota", "(Π ($d) (-> [Int $d] (Σ (@s) [Int @s])))"),
    ("reify-dim", "(Π ($d) Int)"),
    ("reify-shape", "(Π (@s) (Σ ($r) [Int $r]))"),
    ("undefined", "(∀ (&t) (Π (@s) [&t @s]))"),
    ("trace", "(∀ (&t &r) (Π (@s @q) (-> ([&t @s] [&r @q]) [&r @q])))"),
    (
        "trace-file",
        "(∀ (&t &r) (Π ($d @s @q) (-> ([Int $d] [&t @s] [&r @q]) [&r @q])))",
    ),
    ("read-file", "(∀ (&t) (Π ($d @s) (-> [Int $d] [&t @s])))"),
    ("read-file-f32bin", "(Π ($d @s) (-> [Int $d] [Float @s]))"),
];

/// The names of extensions.md §4's prelude built so far, bound like the
/// intrinsics (and, like them, shadowed by a program's own definitions).
pub const PRELUDE: &[(&str, &str)] = &[
    ("rotate", "(∀ (&t) (Π ($d @s) (-> ([&t $d @s] Int) [&t $d @s])))"),
    ("range", "(-> Int (Σ ($n) [Int $n]))"),
    ("neg abs signum", "(-> Int Int)"),
    (
        "f.neg f.abs f.signum f.sin f.cos f.tan f.asin f.acos f.atan f.sinh f.cosh f.log2 f.log10 f.floor f.ceiling f.round",
        "(-> Float Float)",
    ),
    ("f.atan2 f.mod", "(-> (Float Float) Float)"),
    ("f.isnan", "(-> Float Bool)"),
    ("pi", "Float"),
    ("f.sum f.product", "(Π (@s) (-> [Float @s] Float))"),
    ("product", "(Π (@s) (-> [Int @s] Int))"),
    ("any all", "(Π (@s) (-> [Bool @s] Bool))"),
    ("count", "(Π (@s) (-> [Bool @s] Int))"),
    ("equal", "(∀ (&t) (Π (@s) (-> ([&t @s] [&t @s]) Bool)))"),
    ("last", "(∀ (&t) (Π ($d @s) (-> [&t (+ 1 $d) @s] [&t @s])))"),
    ("curtail", "(∀ (&t) (Π ($d @s) (-> [&t (+ 1 $d) @s] [&t $d @s])))"),
    ("nth", "(∀ (&t) (Π ($d @s) (-> ([&t $d @s] Int) [&t @s])))"),
    ("select", "(∀ (&t) (Π (@s) (-> (Bool [&t @s] [&t @s]) [&t @s])))"),
    (
        "iterate",
        "(∀ (&t) (Π (@s) (-> (Int (-> [&t @s] [&t @s]) [&t @s]) [&t @s])))",
    ),
    (
        "while",
        "(∀ (&t) (Π (@s) (-> ((-> [&t @s] Bool) (-> [&t @s] [&t @s]) [&t @s]) [&t @s])))",
    ),
    (
        "scan",
        "(∀ (&t) (Π ($d @s) (-> ((-> ([&t @s] [&t @s]) [&t @s]) [&t @s] [&t $d @s]) [&t (+ 1 $d) @s])))",
    ),
    (
        "iscan",
        "(∀ (&t) (Π ($d @s) (-> ((-> ([&t @s] [&t @s]) [&t @s]) [&t $d @s]) [&t $d @s])))",
    ),
    ("replicate", "(∀ (&t) (Π (@f @s) (-> [&t @s] [&t @f @s])))"),
    ("sort grade", "(Π ($d) (-> [Int $d] [Int $d]))"),
    ("f.sort", "(Π ($d) (-> [Float $d] [Float $d]))"),
    ("f.grade", "(Π ($d) (-> [Float $d] [Int $d]))"),
    (
        "filter",
        "(∀ (&t) (Π ($d @s) (-> ([Bool $d] [&t $d @s]) (Σ ($k) [&t $k @s]))))",
    ),
    (
        "take* drop*",
        "(∀ (&t) (Π ($d @s) (-> (Int [&t $d @s]) (Σ ($k) [&t $k @s]))))",
    ),
    (
        "windows",
        "(∀ (&t) (Π ($w $k @s) (-> [&t (+ $w $k) @s] [&t (+ 1 $k) $w @s])))",
    ),
    (
        "sort-by",
        "(∀ (&t) (Π ($d @s) (-> ((-> ([&t @s] [&t @s]) Bool) [&t $d @s]) [&t $d @s])))",
    ),
    (
        "grade-by",
        "(∀ (&t) (Π ($d @s) (-> ((-> ([&t @s] [&t @s]) Bool) [&t $d @s]) [Int $d])))",
    ),
    (
        "scatter",
        "(∀ (&t) (Π ($m $n @s) (-> ([&t $m @s] [Int $n] [&t $n @s]) [&t $m @s])))",
    ),
    (
        "hist",
        "(∀ (&t) (Π ($m $n @s) (-> ((-> ([&t @s] [&t @s]) [&t @s]) [&t @s] [Int $n] [&t $n @s]) [&t $m @s])))",
    ),
    (
        "take-right",
        "(∀ (&t) (Π ($k $d @s) (-> [&t (+ $k $d) @s] [&t $k @s])))",
    ),
    (
        "drop-right",
        "(∀ (&t) (Π ($k $d @s) (-> [&t (+ $k $d) @s] [&t $d @s])))",
    ),
    (
        "take",
        "(∀ (&t) (Π ($k $d @s) (-> [&t (+ $k $d) @s] [&t $k @s])))",
    ),
    (
        "drop",
        "(∀ (&t) (Π ($k $d @s) (-> [&t (+ $k $d) @s] [&t $d @s])))",
    ),
    // Vocabulary A: numeric vocabulary after NumPy (docs/prelude.md,
    // "Linear algebra and statistics").
    ("argmax argmin", "(Π ($d) (-> [Int $d] Int))"),
    ("f.argmax f.argmin", "(Π ($d) (-> [Float $d] Int))"),
    ("mean", "(Π ($d) (-> [Int $d] Float))"),
    ("f.mean", "(Π ($d) (-> [Float $d] Float))"),
    ("clip", "(-> (Int Int Int) Int)"),
    ("f.clip", "(-> (Float Float Float) Float)"),
    ("linspace", "(Π ($n) (-> (Float Float) [Float $n]))"),
    (
        "outer",
        "(∀ (&a &b &c) (Π ($m $n @s1 @s2 @s3) (-> ((-> ([&a @s1] [&b @s2]) [&c @s3]) [&a $m @s1] [&b $n @s2]) [&c $m $n @s3])))",
    ),
    ("dot", "(Π ($d) (-> ([Int $d] [Int $d]) Int))"),
    ("f.dot", "(Π ($d) (-> ([Float $d] [Float $d]) Float))"),
    (
        "matmul",
        "(Π ($m $k $n) (-> ([Int $m $k] [Int $k $n]) [Int $m $n]))",
    ),
    (
        "f.matmul",
        "(Π ($m $k $n) (-> ([Float $m $k] [Float $k $n]) [Float $m $n]))",
    ),
    // Only the outline: `(i-app transpose PERMUTATION)` is typed by a rule
    // of its own (`transpose_type` in check.rs), as a function of a cell
    // of the permutation's rank.
    ("transpose", "(Π (@p) (∀ (&t) (-> [&t @p] [&t @p])))"),
];

/// Distinct atoms and insertion indices: ordered as `sort` and `f.sort`
/// order (Int, Float and Bool atoms; any other is an error at run time).
pub const SEARCH: &[(&str, &str)] = &[
    ("unique", "(∀ (&t) (Π ($d) (-> [&t $d] (Σ ($k) [&t $k]))))"),
    (
        "unique-counts",
        "(∀ (&t) (Π ($d) (-> [&t $d] (Σ ($k) [Int $k]))))",
    ),
    (
        "searchsorted searchsorted/right",
        "(∀ (&t) (Π ($d) (-> ([&t $d] &t) Int)))",
    ),
];

/// Reproducible random numbers: scalar functions of a seed and a counter
/// (Philox4x32-10, `remora_interp::random`), lifted like any scalar
/// primitive.
pub const RANDOM: &[(&str, &str)] = &[
    ("random.uniform random.normal", "(-> (Int Int) Float)"),
    ("random.int", "(-> (Int Int Int Int) Int)"),
];

/// Automatic differentiation (issue 15, `crate::ad`): forms the checker
/// types like intrinsics and the AD pass replaces before either engine runs
/// (so they are not in [`names`], whose names the engines implement).
pub const AD: &[(&str, &str)] = &[
    (
        "jvp",
        "(∀ (&a &b) (Π (@a @b) (-> ((-> [&a @a] [&b @b]) [&a @a] [&a @a]) [&b @b])))",
    ),
    (
        "vjp",
        "(∀ (&a &b) (Π (@a @b) (-> ((-> [&a @a] [&b @b]) [&a @a] [&b @b]) [&a @a])))",
    ),
    (
        "grad",
        "(∀ (&a) (Π (@a) (-> (-> [&a @a] Float) (-> [&a @a] [&a @a]))))",
    ),
    (
        "value-and-grad",
        "(∀ (&a) (Π (@a) (-> (-> [&a @a] Float) (-> [&a @a] {(value Float) (gradient [&a @a])}))))",
    ),
];

/// Every intrinsic and prelude name, in table order.
pub fn names() -> impl Iterator<Item = (&'static str, &'static str)> {
    INTRINSICS
        .iter()
        .chain(PRELUDE)
        .chain(SEARCH)
        .chain(RANDOM)
        .flat_map(|(names, ty)| names.split_whitespace().map(move |n| (n, *ty)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn there_are_76() {
        let core = super::INTRINSICS
            .iter()
            .flat_map(|(n, _)| n.split_whitespace())
            .count();
        assert_eq!(core, 76);
    }
}

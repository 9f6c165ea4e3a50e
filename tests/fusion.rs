//! Fusion, measured on the compiler's lowest level: a chain of maps into a
//! reduction is one loop that allocates nothing (issue 14).

use remora_syntax::{RealFs, SourceMap, load_program_text};

/// The number of loops and of allocations of `text`'s `main` at the loop
/// level.
fn census(text: &str) -> (usize, usize) {
    let mut sources = SourceMap::new();
    let loaded = load_program_text(&mut sources, &RealFs, "fusion", None, text);
    let checked = remora_check::check_program(&loaded.value);
    assert!(!checked.has_errors(), "{text}: type errors");
    match remora_compile::loops(&checked.value, &checked.names, "main") {
        Ok(p) => p.census(),
        Err(u) => {
            assert!(u.what.is_empty(), "{text}: does not compile: {}", u.what);
            (usize::MAX, usize::MAX)
        }
    }
}

#[test]
fn a_map_into_a_reduction_is_one_loop_and_no_allocation() {
    for text in [
        "(entry (main (x [Int $n])) (reduce + (* x x)))",
        "(entry (main (x [Float $n])) (f.sum (f.* x x)))",
        "(entry (main (x [Float $n]) (y [Float $n])) (reduce f.+ (f.sqrt (f.+ (f.* x x) (f.* y y)))))",
        "(def (fun (sq (v Float)) (f.* v v))) (entry (main (x [Float $n])) (f.sum (sq (f.- x 1.0))))",
    ] {
        assert_eq!(census(text), (1, 0), "{text}");
    }
}

#[test]
fn an_elementwise_chain_is_one_loop_into_its_result() {
    let text = "(entry (main (a Float) (x [Float $n]) (y [Float $n])) (f.- (f.* a x) (f.* y y)))";
    assert_eq!(census(text), (1, 1));
}

/// `text`'s `main` at the loop level, printed.
fn loop_level(text: &str) -> String {
    let mut sources = SourceMap::new();
    let loaded = load_program_text(&mut sources, &RealFs, "fusion", None, text);
    let checked = remora_check::check_program(&loaded.value);
    assert!(!checked.has_errors(), "{text}: type errors");
    match remora_compile::loops(&checked.value, &checked.names, "main") {
        Ok(p) => p.print(),
        Err(u) => format!("does not compile: {}", u.what),
    }
}

/// A map over a float sum of products of the map's indices (a lifted dot:
/// matrix product, matrix-vector product, weighted sums) is one call of
/// the tiled contraction kernel, whatever way the lifting is written: no
/// loop, no reduction per sum, nothing but the result allocated.
#[test]
fn a_map_over_a_sum_of_products_is_one_contraction() {
    let dot = "(def (fun (dot (xs [Float $n]) (ys [Float $n]) : Float) (f.sum (f.* xs ys))))";
    for main in [
        // The papers' matrix product: a row dotted with every column.
        "(entry (main (a [Float $m $k]) (b [Float $k $n])) \
           ((fn ((row [Float $k])) (dot row (transpose2d b))) a))",
        "(entry (main (a [Float $m $k]) (b [Float $n $k])) ((fn ((row [Float $k])) (dot row b)) a))",
        // Bᵀ·Aᵀ: both operands transposed views.
        "(entry (main (a [Float $m $k]) (b [Float $k $n])) \
           ((fn ((row [Float $k])) (dot row a)) (transpose2d b)))",
        // A seedless reduce by f.+ of a fixed count, lifted.
        "(entry (main (a [Float 3 300]) (b [Float 7 300])) \
           ((fn ((row [Float 300])) ((fn ((col [Float 300])) (reduce f.+ (f.* row col))) b)) a))",
        // One loop of sums: matrix-vector and vector-matrix products, a
        // filter over windows (one column, no packing).
        "(entry (main (a [Float $m $k]) (v [Float $k])) (dot a v))",
        "(entry (main (v [Float $k]) (b [Float $k $n])) (dot v (transpose2d b)))",
        "(entry (main (xs [Float 1000]) (ws [Float 31])) (dot ws ((i-app windows [31]) xs)))",
        // Named functions instantiated at sizes known only at run time:
        // a row times the columns, rows scaled and added (a reduce of rows
        // of a count known only at run time), a sum of outer products.
        "(def (fun (row-times (row [Float $n]) (columns [Float $p $n]) : [Float $p]) (dot row columns))) \
         (entry (main (a [Float $m $k]) (b [Float $k $n])) (row-times a (transpose2d b)))",
        "(def (fun (vecmat (v [Float $n]) (b [Float $n $p]) : [Float $p]) (reduce f.+ (f.* v b)))) \
         (entry (main (a [Float $m $k]) (b [Float $k $n])) (vecmat a b))",
        "(def (fun (outer (u [Float $m]) (v [Float $p]) : [Float $m $p]) ((fn ((x Float)) (f.* x v)) u))) \
         (entry (main (a [Float $m $k]) (b [Float $k $n])) (reduce f.+ (outer (transpose2d a) b)))",
    ] {
        let text = format!("{dot} {main}");
        let loops = loop_level(&text);
        assert_eq!(
            loops.matches("(call rt_contract_f32").count(),
            1,
            "{text}:\n{loops}"
        );
        assert!(
            !loops.contains("(reduce") && !loops.contains("(for"),
            "{text}:\n{loops}"
        );
    }
    // Int: `+` wraps, in any order.
    let text = "(def (fun (dot (xs [Int $n]) (ys [Int $n]) : Int) (sum (* xs ys)))) \
                (entry (main (a [Int $m $k]) (b [Int $k $n])) ((fn ((row [Int $k])) (dot row (transpose2d b))) a))";
    let loops = loop_level(text);
    assert!(
        loops.contains("(call rt_contract_i64") && !loops.contains("(for"),
        "{text}:\n{loops}"
    );
    // Not a contraction, kept as a reduction: the product of a row with
    // itself (one operand varying with both of the map's indices).
    let text = format!("{dot} (entry (main (a [Float $m $k])) (dot a a))");
    let loops = loop_level(&text);
    assert!(
        !loops.contains("rt_contract_f32") && loops.contains("(reduce"),
        "{text}:\n{loops}"
    );
}

/// The lengths of the buffers `text`'s `main` allocates outside every
/// loop (those a loop body allocates are a cell's, freed each iteration).
fn outer_allocations(text: &str) -> Vec<i64> {
    let mut sources = SourceMap::new();
    let loaded = load_program_text(&mut sources, &RealFs, "fusion", None, text);
    let checked = remora_check::check_program(&loaded.value);
    assert!(!checked.has_errors(), "{text}: type errors");
    let Ok(p) = remora_compile::loops(&checked.value, &checked.names, "main") else {
        return vec![i64::MAX];
    };
    p.body
        .iter()
        .filter_map(|s| match s {
            remora_compile::loops::Stmt::Alloc { len, .. } => Some(match len {
                remora_compile::loops::Expr::Int(n) => *n,
                _ => i64::MAX,
            }),
            _ => None,
        })
        .collect()
}

#[test]
fn rows_of_a_lifted_function_read_cell_by_cell_allocate_only_the_result() {
    // Mandelbrot's shape: a function giving a row of [x y] pairs, lifted
    // over the rows, its pairs then read one at a time (here by a `while`):
    // each row is computed where it is read, not all into a 100×100×2 grid.
    let text = "(def (fun (row (y Float) (xs [Float 100]) : [Float 100 2]) ((fn ((x Float)) [x y]) xs)))
        (def (fun (small (o [Float 2]) : Bool) (f.< (index o 0) 10.0)))
        (def (fun (grow (o [Float 2]) : [Float 2]) (f.* 2.0 o)))
        (entry (main (re [Float 100]) (im [Float 100]))
          ((fn ((o [Float 2])) (index o 1)) (while small grow (row im re))))";
    assert_eq!(outer_allocations(text), vec![100 * 100]);
}

/// A DAG of elementwise steps through functions of whole arrays (a
/// function called twice, its parameter and the caller's arrays read by
/// several steps) is one loop into its result: the functions are inlined,
/// and a map read at several places of one map is computed once there.
/// So too where the function is instantiated at a size known only at run
/// time (an entry's `$n`), and through a function that calls another.
#[test]
fn elementwise_steps_through_functions_are_one_loop() {
    let sq = "(def (fun (sq (d [Float $n]) : [Float $n]) (let ((val e (f.exp d))) (f./ e (f.+ 1.0 e)))))";
    for entry in ["[Float 1000]", "[Float $n]"] {
        let text = format!(
            "{sq} (entry (main (x {entry}) (y {entry})) \
               (let ((val s (f.sqrt y)) (val a (f./ x s)) (val b (f.- a s))) (f.+ (sq a) (f.* (sq b) s))))"
        );
        assert_eq!(census(&text), (1, 1), "{}", loop_level(&text));
    }
    let text = format!(
        "{sq} (def (fun (twice (d [Float $m]) : [Float $m]) (sq (sq (f.* 2.0 d))))) \
         (entry (main (x [Float $k])) (f.- (twice x) x))"
    );
    assert_eq!(census(&text), (1, 1), "{}", loop_level(&text));
}

/// A function of rotations lifted over rows (Life's neighbour counts)
/// stays a call: inlined, its rows would be fused where the caller reads
/// atoms, and a whole row made once per atom. The loop level reads the
/// rotations as views: the steps allocate only the result.
#[test]
fn rotations_of_rows_are_not_made_once_per_atom() {
    let text = "(def (fun (rot-cols (b [Int 64 64]) (k Int) : [Int 64 64]) (@rotate (Int) (64 []) b k))) \
                (entry (main (b [Int 64 64])) \
                  (let ((val n (+ (+ (rot-cols b -1) b) (rot-cols b 1)))) (+ (bool->i (== n 3)) (* n 2))))";
    assert_eq!(census(text).1, 1, "{}", loop_level(text));
}

/// Whether some `(reduce …)` of the printed loop level allocates or
/// reduces inside its body (a buffer or a sum made once per item read).
fn loops_per_item(loops: &str) -> bool {
    loops.match_indices("(reduce").any(|(at, _)| {
        let mut depth = 0usize;
        for (k, ch) in loops[at..].char_indices() {
            match ch {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        let body = &loops[at + 1..at + k];
                        return body.contains("(alloc") || body.contains("(reduce");
                    }
                }
                _ => {}
            }
        }
        false
    })
}

/// A cell of arrays whose `let`s are loops (a row scaled, its sum), read
/// atom by atom by a reduction of every atom: each cell's `let`s are made
/// once per cell, not once per atom read (which made the program
/// quadratic in the row length).
#[test]
fn lets_in_cells_of_arrays_are_made_once_per_cell() {
    for cell in [
        "(let ((val r (f.* row 2.0))) (f.+ r (f.sum r)))",
        "(let ((val s (f.sum row))) (f.- row s))",
    ] {
        let text = format!("(entry (main (m [Float $r $c])) (f.sum ((fn ((row [Float $c])) {cell}) m)))");
        let loops = loop_level(&text);
        assert!(!loops_per_item(&loops), "{text}:\n{loops}");
        assert!(!loops.contains("does not compile"), "{text}:\n{loops}");
    }
}

/// `iota` gathered by `iota`: the gather's index and its value are each a
/// copy of the loop's index, read through to it (a copy of a copy once
/// broke the loop level's scope rule and fell back to the interpreter).
#[test]
fn a_gather_of_iota_by_iota_compiles_to_one_loop() {
    let text =
        "(entry (main) (let ((val xs (i-app iota/static [30]))) (+ 10 (index xs (i-app iota/static [30])))))";
    assert_eq!(census(text), (1, 1), "{}", loop_level(text));
}

/// The number of buffers allocated at the loop level (at any depth).
fn allocations(text: &str) -> usize {
    loop_level(text).matches("(alloc ").count()
}

/// An append is written part by part into its destination: padding an
/// image on every side (an append of appends, lifted over the rows, then
/// over the whole) makes the padded rows and the padded image, nothing
/// more; and a lifted `windows` of rows whose width is known only at run
/// time is read in place, its checks made once before the loop, so a 3×3
/// box sum allocates only those two, its result and a row of sums.
#[test]
fn appends_are_written_in_place_and_lifted_windows_of_run_time_rows_are_views() {
    let defs = "(def (fun (pad (v [Float $n @s]) : [Float (+ $n 2) @s]) (append [(head v)] (append v [(last v)])))) \
                (def (fun (pad-row (v [Float $n]) : [Float (+ $n 2)]) (pad v))) \
                (def (fun (win3 (v [Float (+ $k 3)]) : [Float (+ $k 1) 3]) ((i-app windows 3) v))) \
                (def (fun (sums (blk [Float 3 $n 3]) : [Float $n]) ((fn ((r [Float 3])) (reduce f.+ r)) (reduce f.+ blk))))";
    for size in ["$h $w", "50 70"] {
        let padded = format!("{defs} (entry (main (img [Float {size}])) (pad (pad-row img)))");
        assert_eq!(allocations(&padded), 2, "{padded}:\n{}", loop_level(&padded));
        let blur = format!(
            "{defs} (entry (main (img [Float {size}])) (sums ((i-app windows 3) (win3 (pad (pad-row img))))))"
        );
        let loops = loop_level(&blur);
        assert!(!loops.contains("does not compile"), "{blur}:\n{loops}");
        assert!(allocations(&blur) <= 4, "{blur}:\n{loops}");
    }
}

/// A gather by an index reduced mod the vector's length (a floor modulus
/// by a length, which is 0 only where the program has already failed)
/// has no bound check; reduced mod another length, it keeps it.
#[test]
fn an_index_reduced_mod_the_length_is_not_checked() {
    let text = "(entry (main (xs [Float $n]) (idx [Int $m])) (f.sum (index xs (mod (* idx 7) (length xs)))))";
    let loops = loop_level(text);
    assert!(
        !loops.contains("out of range") && loops.contains("(mod"),
        "{loops}"
    );
    let text =
        "(entry (main (xs [Float $n]) (ys [Float $k]) (idx [Int $m])) (index xs (mod idx (length ys))))";
    let loops = loop_level(text);
    assert!(loops.contains("out of range"), "{loops}");
}

/// The statements of the printed loop level's first `iterate` step (from
/// its loop over the steps to the swap of its state's buffers).
fn first_step(loops: &str) -> &str {
    let from = loops.find("(for k.").unwrap_or(0);
    let to = loops[from..].find("(swap").map_or(loops.len(), |k| from + k);
    &loops[from..to]
}

/// Separate arrays of one state (z's real and imaginary parts, the
/// counts), each updated by a whole-array step masked by a shared mask:
/// one nest per step over the grid, the mask a scalar of its cell, and
/// nothing allocated per step. So too for a named function of a stacked
/// state.
#[test]
fn sibling_updates_of_one_state_are_one_nest_per_step() {
    for text in [
        "(entry (main (cr [Float 8 9]) (ci [Float 8 9])) \
           (iterate 5 (fn ((s [Float 3 8 9])) \
             (let ((val zr (nth s 0)) (val zi (nth s 1)) \
                   (val m (f.<= (f.+ (f.* zr zr) (f.* zi zi)) 4.0))) \
               [(select m (f.+ (f.- (f.* zr zr) (f.* zi zi)) cr) zr) \
                (select m (f.+ (f.* 2.0 (f.* zr zi)) ci) zi) \
                (f.+ (nth s 2) (bool->f m))])) \
             ((i-app replicate [3]) cr)))",
        "(def (fun (step (p [Float 3 100]) : [Float 3 100]) \
           (let ((val x (nth p 0)) (val v (nth p 1))) \
             [(f.+ x (f.* 0.5 v)) (f.- v (f.* 0.25 x)) (f.+ (nth p 2) (bool->f (f.> x v)))]))) \
         (entry (main (p [Float 3 100])) (iterate 4 step p))",
    ] {
        let loops = loop_level(text);
        let step = first_step(&loops);
        assert_eq!(step.matches("parallel").count(), 1, "{text}:\n{loops}");
        assert!(!step.contains("(alloc"), "{text}:\n{loops}");
    }
}

/// A row's costly elementwise map (an `f.exp`) that the row reads twice,
/// summed and then divided by its sum (a softmax), is computed once into
/// a buffer of the row, not at each read; read once (a log-sum-exp), it is
/// computed where it is read; the whole array's exps, read by a sum over
/// its transpose and by the division (too big for the cache to be made
/// whole), are computed a row at a time, once, in one nest over the rows
/// (with the row maxima), written with `reduce`'s operators or with
/// lambdas.
#[test]
fn a_costly_row_read_twice_is_computed_once() {
    let exps = |text: &str| loop_level(text).matches("(f.exp ").count();
    let softmax = "(def (fun (softmax (r [Float $n]) : [Float $n]) (let ((val e (f.exp (f.- r (reduce f.max r))))) (f./ e (f.sum e)))))";
    for main in [
        "(entry (main (x [Float 6 1000])) (softmax x))",
        "(entry (main (x [Float 1000])) (softmax x))",
        "(entry (main (x [Float 3 7])) (softmax x))",
    ] {
        assert_eq!(exps(&format!("{softmax} {main}")), 1, "{main}");
    }
    let lse = "(def (fun (lse (r [Float $n]) : Float) (let ((val m (reduce f.max r))) (f.+ m (f.ln (f.sum (f.exp (f.- r m))))))))";
    let text = format!("{lse} (entry (main (x [Float 6 1000])) (lse x))");
    assert_eq!(exps(&text), 1, "{text}");
    assert!(!loop_level(&text).contains("(alloc arr.5"), "{text}");
    for (max, add) in [
        ("f.max", "f.+"),
        (
            "(fn ((a Float) (b Float)) (f.max a b))",
            "(fn ((a Float) (b Float)) (f.+ a b))",
        ),
    ] {
        let whole = format!(
            "(entry (main (x [Float 100 1000])) (let ((val m (reduce {max} (transpose2d x))) \
               (val e (f.exp (f.- x m))) (val s (reduce {add} (transpose2d e)))) (f./ e s)))"
        );
        let loops = loop_level(&whole);
        assert_eq!(loops.matches("(f.exp ").count(), 1, "{whole}:\n{loops}");
        assert_eq!(loops.matches("parallel").count(), 1, "{whole}:\n{loops}");
    }
}

/// Reductions over the rows of a matrix (column sums, maxima, minima;
/// a matrix of a size known only at run time too) read the rows in order:
/// each row added into a block of the accumulator, never a reduction per
/// column striding down the rows. A float sum of many rows keeps the
/// tree's order by its leaves (the runtime's plan), a lambda of the sum
/// too; over a matrix of run-time sizes, the leaves are one branch.
#[test]
fn reductions_over_rows_read_rows_in_order() {
    for main in [
        "(entry (main (x [Float 4096 1024])) (reduce f.+ x))",
        "(entry (main (x [Float 4096 1024])) (reduce (fn (a b) (f.+ a b)) x))",
        "(entry (main (x [Float 4096 1024])) (reduce/zero f.+ (f.* 0.5 (head x)) x))",
        "(entry (main (x [Float 4096 1024])) (reduce f.max x))",
        "(entry (main (x [Float 4096 1024])) (reduce f.min x))",
        "(entry (main (x [Int 4096 1024])) (reduce + x))",
    ] {
        let loops = loop_level(main);
        assert!(
            loops.contains("(for blk."),
            "{main}: not by blocks of rows:\n{loops}"
        );
        assert!(
            !loops.contains("(reduce acc."),
            "{main}: a reduction per column:\n{loops}"
        );
    }
    for main in [
        "(entry (main (x [Float 4096 1024])) (reduce f.+ x))",
        "(entry (main (x [Float $r $c])) (reduce f.+ x))",
    ] {
        let loops = loop_level(main);
        assert!(
            loops.contains("rt_tree_leaf_bounds"),
            "{main}:
{loops}"
        );
    }
}

/// argmax and its kin are two reductions (the extreme item, then the
/// first index holding it), lifted over rows a row at a time, not a fold
/// of 32 rows at once striding down them.
#[test]
fn argmax_is_two_reductions_per_row() {
    for name in ["f.argmax", "f.argmin", "argmax", "argmin"] {
        let elem = if name.starts_with("f.") { "Float" } else { "Int" };
        let main = format!("(entry (main (x [{elem} 512 1024])) ({name} x))");
        let loops = loop_level(&main);
        assert_eq!(loops.matches("(reduce ").count(), 2, "{main}:\n{loops}");
        assert!(!loops.contains("lane"), "{main}:\n{loops}");
    }
}

/// A map written over a buffer that dies with it: the blocked scan's
/// offsets added to the scanned blocks in place (the scanned blocks and
/// the block totals' scan, nothing more), at sizes known and known only
/// at run time; a map that reads the scan at another place than it
/// writes (`reverse`) keeps a buffer of its own.
#[test]
fn offsets_added_to_scanned_blocks_are_added_in_place() {
    for (size, row, blocks) in [
        ("[Float 12000]", "1000", "(@reshape _ (_ [12 1000]) xs)"),
        ("[Float $r $b]", "$b", "xs"),
    ] {
        let text = format!(
            "(entry (main (xs {size})) \
               (let ((val inner ((fn ((r [Float {row}])) (iscan f.+ r)) {blocks})) \
                     (val totals ((fn ((r [Float {row}])) (last r)) inner)) \
                     (val offsets (curtail (scan f.+ 0.0 totals)))) \
                 (flatten (f.+ offsets inner))))"
        );
        assert_eq!(allocations(&text), 2, "{text}:\n{}", loop_level(&text));
    }
    let text = "(entry (main (xs [Float 1000])) (let ((val ys (iscan f.+ xs))) (f.+ ys (reverse ys))))";
    assert_eq!(allocations(text), 2, "{text}:\n{}", loop_level(text));
}

/// `take-right K` or `take K` of a sort lifted over rows picks the atoms
/// by one runtime call per row and sorts nothing; a fold keeping the best
/// index of each row (by `f.>=`: the last of equals) reads each row's atom
/// at the index from the atom it carries, not from the row, and rows 1,024
/// floats apart run 8 in lanes; by a strict `f.>` over the row's indices
/// it is two reductions, the greatest, then the first index holding it.
#[test]
fn top_k_picks_and_best_index_folds_carry_their_atom() {
    for (take, sort) in [("take-right", "f.sort"), ("take", "f.sort")] {
        let text = format!(
            "(entry (main (x [Float $r 100])) ((fn ((r [Float 100])) ((i-app {take} 5) ({sort} r))) x))"
        );
        let loops = loop_level(&text);
        assert!(
            loops.contains("rt_select_float") && !loops.contains("rt_sort"),
            "{loops}"
        );
    }
    let text = "(entry (main (x [Int $r 100])) ((fn ((r [Int 100])) ((i-app take-right 40) (sort r))) x))";
    assert!(
        loop_level(text).contains("rt_sort_int"),
        "more than 32 atoms: sorted"
    );
    let best = |cmp: &str, cols: usize| {
        format!(
            "(def (fun (best (r [Float $n]) : Int)
               (fold (fn ((b Int) (j Int)) (select ({cmp} (index r j) (index r b)) j b)) 0 (i-app iota/static [$n]))))
             (entry (main (x [Float $r {cols}])) (best x))"
        )
    };
    for (cols, lanes) in [(1024, 8), (1000, 32)] {
        let loops = loop_level(&best("f.>=", cols));
        // One load of the row per step: the item's (the first item's, before the fold, aside).
        let row_loads = loops.lines().filter(|l| l.contains("(load x.0")).count();
        assert_eq!(row_loads, 2, "{loops}");
        assert!(loops.contains(&format!("(min {lanes} ")), "{loops}");
    }
    let loops = loop_level(&best("f.>", 1024));
    assert!(
        loops.contains("f.max tree") && loops.contains("min tree") && !loops.contains("lane"),
        "{loops}"
    );
}

/// The online log-sum-exp step rescales the running sum and the new item
/// by the exps of their differences from their maximum, one of which is
/// an operand less itself: one exp a step, with a record state or a
/// `[Float 2]` one, lifted over rows or not; two exps of differences from
/// a maximum of other operands stay two.
#[test]
fn an_online_step_computes_one_exp() {
    let record = "(def (type &acc {(m Float) (s Float)})) \
        (def (fun (push (a &acc) (x Float) : &acc) \
          (let ((val mx (f.max (field a m) x))) \
            {(m [] mx) (s [] (f.+ (f.* (field a s) (f.exp (f.- (field a m) mx))) (f.exp (f.- x mx))))})))";
    let vector = "(def (fun (push (a [Float 2]) (x Float) : [Float 2]) \
        (let ((val mx (f.max x (head a)))) \
          [mx (f.+ (f.exp (f.- x mx)) (f.* (last a) (f.exp (f.- (head a) mx))))])))";
    for (step, start, result) in [
        (
            record,
            "{(m [] -1.0e30) (s [] 0.0)}",
            "(f.+ (field a m) (f.ln (field a s)))",
        ),
        (vector, "[-1.0e30 0.0]", "(f.+ (head a) (f.ln (last a)))"),
    ] {
        for arg in ["(x [Float $r $c])", "(x [Float 100])"] {
            let text = format!(
                "{step} (def (fun (lse (r [Float $n]) : Float) (let ((val a (fold push {start} r))) {result}))) \
                 (entry (main {arg}) (lse x))"
            );
            let loops = loop_level(&text);
            assert_eq!(loops.matches("(exp.either ").count(), 1, "{text}:\n{loops}");
            assert!(!loops.contains("(f.exp "), "{text}:\n{loops}");
        }
    }
    let other = "(entry (main (x [Float $n]) (y [Float $n])) \
        (f.+ (f.exp (f.- x (f.max y 0.0))) (f.exp (f.- y (f.max x 0.0)))))";
    let loops = loop_level(other);
    assert_eq!(loops.matches("(f.exp ").count(), 2, "{other}:\n{loops}");
}

/// A power whose exponent is a whole number (an Int made a Float, bound
/// by a `let` in the loop around it or not, a literal without a fraction)
/// is the runtime's whole-exponent form, in a table of powers by the
/// shared logs too; an exponent that may have a fraction keeps the
/// general one.
#[test]
fn a_power_by_a_whole_exponent_is_the_whole_form() {
    for (text, whole, general) in [
        (
            "(entry (main (xs [Float $n]) (ks [Int 4])) ((fn ((k Int)) (f.^ xs (i->f k))) ks))",
            1,
            0,
        ),
        (
            "(entry (main (xs [Float $n])) (f.+ (f.^ xs 3.0) (f.^ xs 2.5)))",
            1,
            1,
        ),
        (
            "(entry (main (xs [Float 4000]) (cs [Float 9])) \
               (let ((val exps (i->f (- 8 (i-app iota/static [9])))) \
                     (val powers ((fn ((e Float)) (f.^ xs e)) exps))) \
                 (reduce f.+ (f.* cs powers))))",
            2,
            0,
        ),
    ] {
        let loops = loop_level(text);
        let count = |op: &str| loops.matches(&format!("({op} ")).count();
        assert_eq!(
            count("pow.whole") + count("pow.by-log2-whole"),
            whole,
            "{text}:\n{loops}"
        );
        assert_eq!(count("f.^") + count("pow.by-log2"), general, "{text}:\n{loops}");
    }
}

/// A stream compaction by a grade of flags (`take*` of the count of the
/// flags, or `drop*` of it, or of the count of their negation; keys by
/// `bool->i` or `select`, which cannot fail): the
/// partition's own counting gives how many items are kept, so no pass
/// counts the flags before it.
#[test]
fn a_partition_counts_its_kept_items_itself() {
    for (keys, kept) in [
        ("(bool->i (not keep))", "(take* (count keep)"),
        ("(bool->i keep)", "(drop* (count (not keep))"),
        ("(bool->i (not keep))", "(drop* (count keep)"),
        ("(select keep 0 1)", "(take* (count keep)"),
    ] {
        let text = format!(
            "(entry (main (xs [Float $n])) (let ((val keep (f.> xs 0.5)) (val order (grade {keys}))) \
             {kept} (index xs order))))"
        );
        let loops = loop_level(&text);
        assert!(!loops.contains("(reduce "), "{text}\n{loops}");
    }
}

/// A term of a nest that depends on some of its loops' indices only is
/// computed once per cell of its own frame (hoist.rs): of a pair of
/// rows' cosine, the dot of the left row with itself once per left row,
/// of the right row once per right row (not once per pair), the dot of
/// both a contraction; a row function of attention's one query, its
/// scores a contraction of all the queries, its weights' sum of the value
/// rows the kernel's.
#[test]
fn terms_of_some_indices_are_computed_once_per_cell_of_their_frame() {
    for main in [
        "(entry (main (x [Float $n $d])) \
           (outer (fn ((a [Float $d]) (b [Float $d])) \
             (f./ (f.dot a b) (f.sqrt (f.* (f.dot a a) (f.dot b b))))) x x))",
        "(def (fun (cosine (a [Float $d]) (b [Float $d]) : Float) \
           (f./ (f.dot a b) (f.sqrt (f.* (f.dot a a) (f.dot b b)))))) \
         (entry (main (x [Float 64 32]) (y [Float 48 32])) ((fn ((a [Float 32])) (cosine a y)) x))",
    ] {
        let loops = loop_level(main);
        assert_eq!(
            loops.matches("(call rt_contract_f32").count(),
            1,
            "{main}:\n{loops}"
        );
        assert_eq!(loops.matches("(reduce ").count(), 2, "{main}:\n{loops}");
    }
    let main = "(def (fun (attend (q [Float $d]) (k [Float $l $d]) (v [Float $l $d]) : [Float $d]) \
                  (let ((val s (f.dot k q)) \
                        (val e (f.exp (f.- s (reduce f.max s)))) \
                        (val w (f./ e (f.sum e)))) \
                    (reduce f.+ (f.* w v))))) \
                (entry (main (q [Float 512 16]) (k [Float 512 16]) (v [Float 512 16])) (attend q k v))";
    let loops = loop_level(main);
    assert_eq!(
        loops.matches("(call rt_contract_f32").count(),
        2,
        "{main}:\n{loops}"
    );
}

/// A scan down the columns (a row scan of the transpose, transposed
/// back) is a scan of the rows by the operator lifted to rows: a row of
/// accumulators, no walk down the columns (columns.rs), as written with
/// `iscan` over the rows.
#[test]
fn a_scan_down_the_columns_is_a_scan_of_rows() {
    let by_rows = "(entry (main (x [Float 512 512])) ((fn ((r [Float 512])) (iscan f.+ r)) (iscan f.+ x)))";
    let by_columns = "(def (fun (row-sums (r [Float $n]) : [Float $n]) (iscan f.+ r))) \
                      (entry (main (x [Float 512 512])) (row-sums (transpose2d (row-sums (transpose2d x)))))";
    assert_eq!(loop_level(by_columns), loop_level(by_rows));
}

/// A buffer written once in row-major order is read where it is read,
/// through a transposed view of it whose index counts a wider axis by a
/// multiple of its stride (the Kronecker product by `outer`, transposed
/// and reshaped: one nest writing the result); a buffer of one atom (a
/// scalar replicated in each cell) is its atom.
#[test]
fn transposed_reads_and_single_atoms_are_computed_where_read() {
    let main = "(entry (main (a [Float 8 6]) (b [Float 4 5])) \
                  (@reshape _ (_ [32 30]) ((i-app transpose [0 2 1 3]) \
                    (@reshape _ (_ [8 6 4 5]) (outer f.* (flatten a) (flatten b))))))";
    assert_eq!(census(main), (4, 1), "{}", loop_level(main));
    let main = "(def (fun (blocks (x [Float 8 6 4 5]) : [Float 32 30]) \
                  (@reshape _ (_ [32 30]) ((i-app transpose [0 2 1 3]) x)))) \
                (entry (main (a [Float 8 6]) (b [Float 4 5])) \
                  (f.* (blocks ((fn ((x Float)) ((i-app replicate [4 5]) x)) a)) \
                       (blocks ((i-app replicate [8 6]) b))))";
    let loops = loop_level(main);
    assert!(!loops.contains("(alloc one."), "{main}:\n{loops}");
}

/// A float sum lifted over a frame whose items every position shares (a
/// weighted histogram by comparison, lifted over the bins; a function of
/// the program; `reduce f.+` of a lambda's values) is one pass over the
/// items, by the sum's leaves into a row of partial sums: never a matrix
/// of every item at every position, nor a sum per position.
#[test]
fn a_frame_of_sums_of_shared_items_is_one_pass() {
    for text in [
        "(entry (main (xs [Float 100000]) (ws [Float 100000])) \
           (let ((val bins (truncate (f.* xs 16.0)))) \
             ((fn ((b Int)) (f.sum (select (== bins b) ws 0.0))) (i-app iota/static [16]))))",
        "(def (fun (moment (xs [Float 100000]) (k Float) : Float) (f.sum (f.* xs (f.- xs k))))) \
         (entry (main (xs [Float 100000])) (moment xs (i->f (i-app iota/static [12]))))",
        "(entry (main (xs [Float 100000]) (ys [Float 100000])) \
           ((fn ((b Float)) (reduce f.+ (f.+ (f.* b xs) ys))) (f.* 0.5 (i->f (i-app iota/static [9])))))",
    ] {
        let loops = loop_level(text);
        assert!(loops.contains("rt_tree_leaf_bounds"), "{text}:\n{loops}");
        assert!(!loops.contains("(reduce "), "{text}:\n{loops}");
        // (The tree's plan and partial sums are sized at run time.)
        let constant = outer_allocations(text).into_iter().filter(|n| *n != i64::MAX);
        assert!(constant.into_iter().all(|n| n < 100000), "{text}:\n{loops}");
    }
}

/// A reduction written twice in one `let` (the minimum of a rescale to
/// [0, 1]) is computed once.
#[test]
fn a_reduction_written_twice_is_computed_once() {
    let text = "(entry (main (x [Float $n])) (let ((val y (f.clip 0.1 0.9 x))) \
                  (f./ (f.- y (reduce f.min y)) (f.- (reduce f.max y) (reduce f.min y)))))";
    let loops = loop_level(text);
    // (Each a reduction of each block, then of the blocks' values: see
    // `a_least_and_a_greatest_of_the_same_items_are_one_pass`.)
    assert_eq!(loops.matches("f.min tree").count(), 2, "{loops}");
    assert_eq!(loops.matches("f.max tree").count(), 2, "{loops}");
}

/// A restarting count written as people write it (`iscan` of `[start 1]`
/// pairs made by a lambda, inline or bound by a `let`, read only by a
/// `filter` at the runs' ends): the pairs are made where the scan reads
/// them and the scan's cells are written only where kept, so the one
/// buffer of a pair per item is the kept cells' (faulted in only where
/// written), beside the starts and the flags.
#[test]
fn a_scan_of_pairs_read_by_a_filter_makes_neither_the_pairs_nor_the_scan() {
    let count_on = "(def (fun (count-on (a [Int 2]) (b [Int 2]) : [Int 2])
          (if (== (index b 0) 1) b [(index a 0) (+ (index a 1) (index b 1))])))";
    for pairs in [
        "(val counts (iscan count-on ((fn ((s Int)) [s 1]) starts)))",
        "(val pairs ((fn ((s Int)) [s 1]) starts)) (val counts (iscan count-on pairs))",
    ] {
        let text = format!(
            "{count_on}
             (entry (main (xs [Int 1000]))
               (let ((val differs (!= ((i-app drop 1) xs) ((i-app drop-right 1) xs)))
                     (val starts (append [1] (bool->i differs)))
                     {pairs}
                     (val last-of-run (append differs [#t])))
                 (box ((fn ((p [Int 2])) (index p 1)) (filter last-of-run counts)))))"
        );
        let pair_buffers = outer_allocations(&text).iter().filter(|&&n| n == 2000).count();
        assert_eq!(pair_buffers, 1, "{}", loop_level(&text));
    }
}

/// A fold of each row by a lambda that is `f.max` of the accumulator and
/// the item is a reduction per row (a register, in blocks), not a
/// sequential loop interleaved across rows; a lambda of `f.+` (whose
/// groupings differ in bits) stays a fold.
#[test]
fn a_fold_by_a_max_lambda_is_a_reduction_per_row() {
    let fold = |op: &str| {
        format!(
            "(entry (main (x [Float 4000 2000])) \
               ((fn ((r [Float 2000])) (f./ r (fold (fn ((m Float) (v Float)) ({op} m v)) (head r) r))) x))"
        )
    };
    let max = loop_level(&fold("f.max"));
    assert!(max.contains("(reduce acc") && max.contains("f.max from"), "{max}");
    assert!(!max.contains("lane"), "{max}");
    assert_eq!(census(&fold("f.max")), (3, 1), "{max}");
    let sum = loop_level(&fold("f.+"));
    assert!(!sum.contains("(reduce acc"), "{sum}");
}

/// The gradient of a logistic loss by automatic differentiation: its
/// weighted sum of rows (a `reduce/zero` whose seed the derivative keeps
/// in a buffer of one atom) is a contraction, its weights computed once
/// per row into a buffer: no reduction per column over every row — and
/// with the forward `x@w`, one pass over the matrix (allocate/pairs.rs:
/// no kernel call left). The loss itself, which `grad` drops, is not
/// computed.
#[test]
fn a_gradients_weighted_sum_of_rows_is_a_contraction() {
    let text = "(def (fun (loss (w [Float 8]) (x [Float 1000 8]) (y [Float 1000]) : Float) \
                  (let ((val z (f.dot x w))) \
                    (f./ (f.sum (f.- (f.ln (f.+ 1.0 (f.exp z))) (f.* y z))) 1000.0)))) \
                (entry (main (x [Float 1000 8]) (y [Float 1000]) (w [Float 8])) ((grad loss) w x y))";
    let loops = loop_level(text);
    assert_eq!(
        (
            loops.matches("(call rt_contract_f32").count(),
            loops.matches("(call rt_pair_leaf").count()
        ),
        (0, 1),
        "{text}:\n{loops}"
    );
    // No reduction per column, and none of the loss, which nothing reads.
    assert!(!loops.contains("(reduce"), "{text}:\n{loops}");
}

/// The least and the greatest of the same items (a rescale to [0, 1]) are
/// one pass over them: each block of items reduced both ways on the
/// threads, then each reduction of the blocks' values.
#[test]
fn a_least_and_a_greatest_of_the_same_items_are_one_pass() {
    let text = "(entry (main (x [Float $n])) \
                  (let ((val y (f.clip 0.1 0.9 x))) \
                    (f./ (f.- y (reduce f.min y)) (f.- (reduce f.max y) (reduce f.min y)))))";
    let loops = loop_level(text);
    let lines: Vec<&str> = loops.lines().collect();
    let outer: Vec<usize> = (0..lines.len())
        .filter(|&k| lines[k].starts_with("(reduce"))
        .collect();
    assert_eq!(outer.len(), 2, "{text}:\n{loops}");
    assert!(
        outer.iter().all(|&k| lines[k + 1].contains("(load part.")),
        "each reduces its blocks' values:\n{loops}"
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.trim_start().starts_with("(reduce"))
            .count(),
        4,
        "{text}:\n{loops}"
    );
}

/// The run starts `(append [1] (bool->i differs))` read only by the map
/// that makes a restarting count's items, and the runs' end flags
/// `(append differs [#t])` read only by the filter of that count, are
/// never stored (each item computed where the scan's loop reads it), nor
/// are the differences they are made of: the one buffer over the items is
/// the kept cells'.
#[test]
fn appends_read_by_a_scan_and_its_filter_are_not_stored() {
    let text = "(def (fun (count-on (a [Int 2]) (b [Int 2]) : [Int 2])
          (if (== (index b 0) 1) b [(index a 0) (+ (index a 1) (index b 1))])))
         (entry (main (xs [Int 1000]))
           (let ((val differs (!= ((i-app drop 1) xs) ((i-app drop-right 1) xs)))
                 (val starts (append [1] (bool->i differs)))
                 (val counts (iscan count-on ((fn ((s Int)) [s 1]) starts)))
                 (val last-of-run (append differs [#t])))
             (box ((fn ((p [Int 2])) (index p 1)) (filter last-of-run counts)))))";
    let outer = outer_allocations(text);
    assert!(
        !outer.iter().any(|&n| n == 1000 || n == 999),
        "{outer:?}\n{}",
        loop_level(text)
    );
    assert_eq!(
        outer.iter().filter(|&&n| n == 2000).count(),
        1,
        "{}",
        loop_level(text)
    );
}

/// A float sum of outer products (a covariance by `reduce f.+` of each
/// centred row's outer product with itself) adds each item's product
/// where it makes it: no `[N K K]` array (outside the loops, only the
/// column sums, the result and the tree's rows of partial sums).
#[test]
fn a_sum_of_outer_products_makes_no_array_of_them() {
    for n in ["100", "5000", "$n"] {
        let text = format!(
            "(entry (main (x [Float {n} 16])) \
               (let ((val mean (f./ (reduce f.+ x) 5000.0))) \
                 (reduce f.+ ((fn ((r [Float 16])) (let ((val c (f.- r mean))) (outer f.* c c))) x))))"
        );
        let loops = loop_level(&text);
        assert!(
            n == "100" || loops.contains("rt_tree_leaf_bounds"),
            "{text}:\n{loops}"
        );
        // (Sizes known here at most 4,096 atoms; none a product of the
        // items' count known at run time.)
        for line in loops.lines().filter(|l| l.starts_with("(alloc ")) {
            let size = line.split_whitespace().nth(3).unwrap_or("");
            let ok = match size.trim_end_matches(')').parse::<i64>() {
                Ok(atoms) => atoms <= 4096,
                Err(_) => !line.contains("dim"),
            };
            assert!(ok, "{text}: {line}\n{loops}");
        }
    }
}

/// A linear model's gradient — `x@w`, a step per row, `xᵀ·r` — reads the
/// matrix once (allocate/pairs.rs), however it is written: the rows
/// weighted and reduced, the columns of the transpose dotted, or the
/// gradient of the loss by AD; no contraction kernel call is left.
#[test]
fn a_gradient_of_a_linear_model_reads_the_matrix_once() {
    let sigmoid = "(def (fun (sigmoid (z Float) : Float) (f./ 1.0 (f.+ 1.0 (f.exp (f.neg z))))))";
    for text in [
        format!(
            "{sigmoid} (entry (main (x [Float 1000 32]) (y [Float 1000]) (w [Float 32])) \
             (let ((val p (sigmoid (f.dot x w)))) (reduce f.+ (f.* (f.- p y) x))))"
        ),
        format!(
            "{sigmoid} (entry (main (x [Float $n 8]) (y [Float $n]) (w [Float 8])) \
             (f.dot (transpose2d x) (f.- (sigmoid (f.dot x w)) y)))"
        ),
        "(def (fun (loss (w [Float 32]) (x [Float 1000 32]) (y [Float 1000]) : Float) \
           (let ((val z (f.dot x w))) (f./ (f.sum (f.- (f.ln (f.+ 1.0 (f.exp z))) (f.* y z))) 1000.0)))) \
         (entry (main (x [Float 1000 32]) (y [Float 1000]) (w [Float 32])) ((grad loss) w x y))"
            .to_string(),
    ] {
        let loops = loop_level(&text);
        assert!(
            loops.contains("(call rt_pair_leaf") && !loops.contains("rt_contract_f32"),
            "{text}\n{loops}"
        );
    }
}

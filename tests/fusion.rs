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

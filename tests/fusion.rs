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

//! Snapshots of the printer for people (`pretty.rs`) on representative
//! values, each read from the value syntax of test blocks. Review a changed
//! snapshot by eye (`cargo insta review`, or `INSTA_UPDATE=always` and the
//! diff).

use remora_value::pretty::{Options, to_string};
use remora_value::read::read_value;

/// The value `text` printed for people (a value that does not read makes
/// the snapshot say so).
fn pretty(text: &str) -> String {
    match read_value(text) {
        Ok(v) => to_string(&v, &Options::ELIDED),
        Err(e) => format!("unreadable: {e}"),
    }
}

#[test]
fn mandelbrot_counts() {
    insta::assert_snapshot!(pretty(
        "[[1 1 2 3 3 4 6 41 6 4]
          [1 3 4 6 8 50 50 50 50 13]
          [1 5 4 6 7 10 37 50 50 50]
          [1 3 3 3 4 4 6 8 7 7]]"
    ));
}

#[test]
fn floats_of_mixed_magnitude() {
    insta::assert_snapshot!(pretty(
        "[[8.209555e-2 0.35965642 -1.1121513 100.0]
          [1.0e-7 2.5e9 -0.0 3.0]
          [12345678.0 1.0 0.5 0.25]]"
    ));
}

#[test]
fn a_rank_3_array_as_blocks() {
    insta::assert_snapshot!(pretty(
        "[[[1 2 3] [4 5 6]] [[7 8 9] [10 11 12]] [[-1 -2 -3] [0 0 0]]]"
    ));
}

#[test]
fn a_long_matrix_elided() {
    let rows: Vec<String> = (0..40)
        .map(|i| {
            let row: Vec<String> = (0..50).map(|j| (i * 50 + j).to_string()).collect();
            format!("[{}]", row.join(" "))
        })
        .collect();
    insta::assert_snapshot!(pretty(&format!("[{}]", rows.join(" "))));
}

#[test]
fn booleans_and_boxes() {
    insta::assert_snapshot!(pretty("[[#t #f] [#f #t]]"));
    insta::assert_snapshot!(pretty("(box [2, 3] [[0 1 2] [30 40 50]])"));
    insta::assert_snapshot!(pretty("(box 2 (box 3 [1 2 3]))"));
}

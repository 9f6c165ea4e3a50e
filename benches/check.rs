//! Benchmark: type checking a generated 5,000-line program (issue 3 asks
//! for under a second), written with every instantiation and again with
//! them inferred (issue 5: also under a second). Prints the time to parse and the time to check, the
//! median of several runs, and the ratio of checking to parsing (parsing is
//! the baseline: the checker should cost about as much as reading).
//!
//! Run with `cargo bench --bench check`.

use remora_syntax::{RealFs, SourceMap, load_program_text};
use std::time::{Duration, Instant};

/// Five lines per group: functions over cells, lifted applications,
/// polymorphic definitions instantiated, a box unboxed, a let chain.
fn program(lines: usize) -> String {
    let mut out = String::new();
    for i in 0..lines / 5 {
        let prev = if i == 0 { 0 } else { i - 1 };
        out.push_str(&format!(
            "(def (fun (f{i} (x [Float 3]) (y [Float 3]) : [Float 3]) (f.+ (f.* x y) (f.- x y))))\n"
        ));
        out.push_str(&format!(
            "(def (val v{i} (f{i} [[1.0 2.0 3.0] [4.0 5.0 6.0]] [7.0 8.0 9.0])))\n"
        ));
        out.push_str(&format!(
            "(def (fun (@g{i} _ ($n) (xs [Int $n]) : Int) (@reduce/zero (Int) ($n []) + {i} xs)))\n"
        ));
        out.push_str(&format!(
            "(def (val w{i} (let ((val a ((i-app g{i} 4) [[1 2 3 4] [5 6 7 8]])) (val b (@head (Int) (1 []) a))) (+ b (unbox ($k z (@iota _ (1) [3])) (@length (Int) ($k []) z))))))\n"
        ));
        out.push_str(&format!(
            "(def (val u{i} (+ w{prev} (@length (Float) (2 [3]) v{prev}))))\n"
        ));
    }
    out
}

/// The same program written the way inference lets you (extensions.md §1):
/// no `@` or `i-app` at the uses (definitions keep their binders).
fn program_inferred(lines: usize) -> String {
    let mut out = String::new();
    for i in 0..lines / 5 {
        let prev = if i == 0 { 0 } else { i - 1 };
        out.push_str(&format!(
            "(def (fun (f{i} (x [Float 3]) (y [Float 3]) : [Float 3]) (f.+ (f.* x y) (f.- x y))))\n"
        ));
        out.push_str(&format!(
            "(def (val v{i} (f{i} [[1.0 2.0 3.0] [4.0 5.0 6.0]] [7.0 8.0 9.0])))\n"
        ));
        out.push_str(&format!(
            "(def (fun (g{i} (xs [Int $n]) : Int) (reduce/zero + {i} xs)))\n"
        ));
        out.push_str(&format!(
            "(def (val w{i} (let ((val a (g{i} [[1 2 3 4] [5 6 7 8]])) (val b (head a))) (+ b (unbox ($k z (iota [3])) (length z))))))\n"
        ));
        out.push_str(&format!("(def (val u{i} (+ w{prev} (length v{prev}))))\n"));
    }
    out
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

/// Median parse and check times of `text` over several runs, and the
/// number of diagnostics.
fn measure(text: &str) -> (Duration, Duration, usize) {
    let mut parse_times = Vec::new();
    let mut check_times = Vec::new();
    let mut errors = 0;
    for _ in 0..7 {
        let text = text.to_string();
        let (p, c, e) = remora_syntax::stack::run_deep(move || {
            let mut sources = SourceMap::new();
            let t0 = Instant::now();
            let loaded = load_program_text(&mut sources, &RealFs, "<bench>", None, &text);
            let t1 = Instant::now();
            let checked = remora_check::check_program(&loaded.value);
            let t2 = Instant::now();
            (
                t1 - t0,
                t2 - t1,
                loaded.diagnostics.len() + checked.diagnostics.len(),
            )
        });
        parse_times.push(p);
        check_times.push(c);
        errors = e;
    }
    (median(parse_times), median(check_times), errors)
}

fn main() {
    let lines_wanted = std::env::var("LINES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5_000);
    for (what, text) in [
        ("explicit instantiations", program(lines_wanted)),
        ("instantiations inferred", program_inferred(lines_wanted)),
    ] {
        let lines = text.lines().count();
        let (p, c, errors) = measure(&text);
        println!(
            "program ({what}): {lines} lines, {} bytes, {errors} diagnostics",
            text.len()
        );
        println!("  parse:   {:>8.2} ms (baseline)", p.as_secs_f64() * 1e3);
        println!("  check:   {:>8.2} ms", c.as_secs_f64() * 1e3);
        println!("  ratio:   {:>8.2}x parse", c.as_secs_f64() / p.as_secs_f64());
        assert_eq!(errors, 0, "the generated program must check");
    }
}

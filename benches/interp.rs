//! Benchmark: the interpreter against NumPy (float32), issue 4's table.
//!
//! Each row is a Remora program in `benches/interp/` (sizes filled in) and
//! the same computation in `benches/interp/numpy_rows.py`, written the same
//! way (broadcasting for lifting, `np.roll` for rotation), on the same
//! generated data. Times are the median of several runs of the computation
//! alone (the program is parsed and checked once, outside the timing; the
//! arguments are built in Rust, as NumPy's are built before its timing).
//! Peak memory is each side's whole process, measured in a fresh process
//! that runs the row once. The checksum (the float64 sum of the result) of
//! both sides is compared, so a fast wrong answer does not pass.
//!
//! Run with `cargo bench --bench interp`; `PYTHON` names the Python with
//! NumPy (default `python3`); `QUICK=1` uses small sizes; `ROWS=a,b` picks
//! rows.

/// The allocator of the `remora` binary (see src/main.rs).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "common/mod.rs"]
mod common;

use common::{fatal, mb, ms, peak_kib};
use remora_interp::Value;
use std::time::Duration;

#[derive(Clone)]
struct Row {
    name: &'static str,
    /// Sizes substituted for `{KEY}` (and `{KEY-1}`) in the program.
    sizes: Vec<(&'static str, usize)>,
    reps: usize,
    /// The target: at most this many times NumPy's time, or an absolute time.
    target: Target,
    /// How far the checksums may differ, relatively.
    tolerance: f64,
}

#[derive(Clone, Copy)]
enum Target {
    Ratio(f64),
    Millis(f64),
}

fn rows(quick: bool) -> Vec<Row> {
    let q = |big: usize, small: usize| if quick { small } else { big };
    vec![
        Row {
            name: "sum_squares",
            sizes: vec![("N", q(10_000_000, 100_000))],
            reps: 7,
            target: Target::Ratio(2.0),
            // Remora's reduce is a left fold, so 10^7 f32 additions in a row
            // drift about 1% from NumPy's pairwise sum.
            tolerance: 2e-2,
        },
        Row {
            name: "axpbyc",
            sizes: vec![("N", q(10_000_000, 100_000))],
            reps: 7,
            target: Target::Ratio(2.0),
            tolerance: 1e-3,
        },
        Row {
            name: "nbody_accel",
            sizes: vec![("N", q(2048, 64))],
            reps: 3,
            target: Target::Ratio(2.0),
            tolerance: 1e-3,
        },
        Row {
            name: "convolve",
            sizes: vec![("N", q(1_000_000, 10_000)), ("K", 31)],
            reps: 3,
            target: Target::Ratio(2.0),
            tolerance: 1e-3,
        },
        Row {
            name: "convolve_windows",
            sizes: vec![("N", q(1_000_000, 10_000)), ("K", 31)],
            reps: 3,
            target: Target::Ratio(2.0),
            tolerance: 1e-3,
        },
        Row {
            name: "life",
            sizes: vec![("N", q(1024, 64)), ("STEPS", 10)],
            reps: 3,
            target: Target::Ratio(2.0),
            tolerance: 1e-3,
        },
        Row {
            name: "replicate",
            sizes: vec![("N", q(1_000_000, 10_000))],
            reps: 7,
            target: Target::Ratio(2.0),
            tolerance: 1e-3,
        },
        Row {
            name: "mandelbrot",
            sizes: vec![("N", q(1024, 64)), ("ITERS", 255)],
            reps: 3,
            target: Target::Ratio(2.0),
            tolerance: 1e-3,
        },
        Row {
            name: "kmeans",
            sizes: vec![("N", q(100_000, 1000)), ("D", 8), ("K", 16)],
            reps: 5,
            target: Target::Ratio(2.0),
            tolerance: 1e-3,
        },
        Row {
            name: "sort",
            sizes: vec![("N", q(10_000_000, 100_000))],
            reps: 5,
            target: Target::Ratio(1.5),
            // The checksum of 10^7 Ints near ±2^63 is summed in float64
            // in a different order on each side.
            tolerance: 1e-6,
        },
        Row {
            name: "nbody_sim",
            sizes: vec![("N", 32), ("STEPS", 10)],
            reps: 7,
            target: Target::Millis(50.0),
            tolerance: 1e-3,
        },
    ]
}

/// The entry's arguments for a row.
fn arguments<'p>(row: &Row) -> Vec<Value<'p>> {
    common::arguments(row.name, &row.sizes)
}

/// Runs the row's program `reps` times: the median time and the checksum.
fn run_remora(row: &Row, reps: usize) -> (Duration, f64) {
    let text = common::source(&format!("benches/interp/{}.remora", row.name), &row.sizes);
    let (mut times, sum) = common::time_entry(row.name, &text, &|| arguments(row), reps, |_, _, _| true);
    (common::median(&mut times), sum)
}

/// NumPy's median time, checksum and peak KiB, if Python and NumPy run.
fn run_numpy(row: &Row, peak: bool) -> Option<(Duration, f64, u64)> {
    common::run_numpy(
        "benches/interp/numpy_rows.py",
        row.name,
        row.reps,
        &row.sizes,
        peak,
    )
}

/// Remora's peak for a row, from a fresh process running it once.
fn remora_peak(row: &Row, quick: bool) -> Option<u64> {
    let (lines, _, ok) = common::rerun_self(
        &[("REMORA_BENCH_PEAK", row.name)],
        quick,
        Duration::from_secs(3600),
    );
    if !ok {
        return None;
    }
    lines.last()?.trim().parse().ok()
}

fn main() {
    let quick = std::env::var("QUICK").is_ok_and(|v| v == "1");
    let rows = rows(quick);
    if let Ok(name) = std::env::var("REMORA_BENCH_PEAK") {
        let Some(row) = rows.iter().find(|r| r.name == name) else {
            fatal(&format!("no row {name}"))
        };
        let row = row.clone();
        remora_syntax::stack::run_deep(move || run_remora(&row, 1));
        println!("{}", peak_kib().unwrap_or(0));
        return;
    }
    let only: Option<Vec<String>> = std::env::var("ROWS")
        .ok()
        .map(|s| s.split(',').map(str::to_string).collect());
    println!(
        "{:<12} {:>22} {:>11} {:>11} {:>7} {:>8} {:>9} {:>9} {:>6}",
        "row", "size", "Remora ms", "NumPy ms", "ratio", "target", "Remora MB", "NumPy MB", "agree"
    );
    let mut all_met = true;
    for row in rows {
        if only.as_ref().is_some_and(|o| !o.iter().any(|n| n == row.name)) {
            continue;
        }
        let size = row
            .sizes
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ");
        let reps = row.reps;
        let timed = row.clone();
        let (remora_t, remora_sum) = remora_syntax::stack::run_deep(move || run_remora(&timed, reps));
        let numpy = run_numpy(&row, false);
        let numpy_peak = run_numpy(&row, true).map(|(_, _, k)| k);
        let peak = remora_peak(&row, quick);
        let ratio = numpy.map(|(t, _, _)| remora_t.as_secs_f64() / t.as_secs_f64());
        let (target, met) = match row.target {
            Target::Ratio(x) => (format!("≤{x}×"), ratio.is_some_and(|r| r <= x)),
            Target::Millis(x) => (format!("≤{x}ms"), ms(remora_t) <= x),
        };
        let agree = numpy.map(|(_, s, _)| common::agree(s, remora_sum, row.tolerance));
        let memory_ok = match (peak, numpy_peak) {
            (Some(a), Some(b)) => a <= b,
            _ => false,
        };
        all_met &= met && memory_ok && agree == Some(true);
        println!(
            "{:<12} {:>22} {:>11.1} {:>11} {:>7} {:>8} {:>9} {:>9} {:>6}",
            row.name,
            size,
            ms(remora_t),
            numpy
                .map(|(t, _, _)| format!("{:.1}", ms(t)))
                .unwrap_or("-".into()),
            ratio.map(|r| format!("{r:.2}")).unwrap_or("-".into()),
            target,
            mb(peak),
            mb(numpy_peak),
            common::agreement(agree),
        );
        common::report_disagreement(agree, remora_sum, numpy.map(|(_, s, _)| s));
    }
    println!(
        "{}",
        if all_met {
            "every row meets its time and memory targets"
        } else {
            "some row misses a target (or NumPy is unavailable: set PYTHON)"
        }
    );
}

//! Benchmark: the gradient of an MLP's loss (batch 256, 784→128→10, tanh
//! hidden layer, softmax cross-entropy, f32; issue 15), in Remora with
//! `grad` (`benches/ad/mlp_grad.remora`) on both engines, against NumPy
//! with the backward pass written by hand and JAX's `jit(grad(loss))` on
//! the CPU (`benches/ad/mlp_numpy.py`, run in the same invocation; JAX is
//! optional: its absence is reported).
//!
//! Remora's side is the loss written as one would (`f.matmul`, the biases
//! added by `rerank`, a row's log-sum-exp less its largest logit) of the
//! weights as a record; `grad` gives all four gradients, as NumPy and JAX
//! compute them. The entry returns the one with respect to W1: the checksum
//! compared is its float64 sum. Times
//! are medians of the gradient alone (the arguments are built before, on
//! every side); peak memory is each side's whole process, from a fresh
//! process that computes one gradient (the compiled program's own peak).
//!
//! Run with `cargo bench --bench ad`; `PYTHON` names the Python with NumPy
//! (and JAX); `QUICK=1` uses a small batch and layers;
//! `REMORA_ENGINE=interp|compiled` runs one engine (default both);
//! `PROFILE_REPS=N` runs only the interpreter's gradient, N times, and
//! prints its median (a run to profile, without the other sides).

/// The allocator of the `remora` binary (see src/main.rs).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "common/mod.rs"]
mod common;

use common::{fatal, floats, mb, ms, peak_kib};
use remora_interp::Value;
use std::time::Duration;

const PROGRAM: &str = "benches/ad/mlp_grad.remora";
const SCRIPT: &str = "benches/ad/mlp_numpy.py";

fn sizes(quick: bool) -> Vec<(&'static str, usize)> {
    if quick {
        vec![("B", 16), ("D", 64), ("H", 16), ("K", 10)]
    } else {
        vec![("B", 256), ("D", 784), ("H", 128), ("K", 10)]
    }
}

/// `xs` scaled as the Python side's `(floats(n, seed) - 0.5) * by`.
fn centred(n: usize, seed: usize, by: f32) -> Vec<f32> {
    floats(n, seed).into_iter().map(|x| (x - 0.5) * by).collect()
}

/// The entry's arguments, the same data as `mlp_numpy.py`'s `data`: the
/// inputs, the four weights and the one-hot labels.
fn arguments<'p>(sizes: &[(&'static str, usize)]) -> Vec<Value<'p>> {
    let at = |k: &str| common::size(sizes, k);
    let (b, d, h, k) = (at("B"), at("D"), at("H"), at("K"));
    let y: Vec<f32> = (0..b)
        .flat_map(|e| (0..k).map(move |c| if (e * 7) % k == c { 1.0 } else { 0.0 }))
        .collect();
    vec![
        common::float_array(vec![b, d], floats(b * d, 1)),
        common::float_array(vec![d, h], centred(d * h, 2, 0.1)),
        common::float_array(vec![h], centred(h, 3, 0.1)),
        common::float_array(vec![h, k], centred(h * k, 4, 0.2)),
        common::float_array(vec![k], centred(k, 5, 0.1)),
        common::float_array(vec![b, k], y),
    ]
}

fn interp(sizes: &[(&'static str, usize)], reps: usize) -> (Duration, f64) {
    let text = common::source(PROGRAM, sizes);
    let (mut times, sum) = common::time_entry("mlp_grad", &text, &|| arguments(sizes), reps, |_, _, _| true);
    (common::median(&mut times), sum)
}

/// The compiled engine: median compute time, checksum and peak; or why not.
fn compiled(sizes: &[(&'static str, usize)], reps: usize) -> Result<(Duration, f64, u64), String> {
    let cache = std::env::temp_dir().join(format!("remora-bench-ad-{}", std::process::id()));
    let text = common::source(PROGRAM, sizes);
    let result = common::compile_entry("mlp_grad", &text, &cache).and_then(|c| {
        let args: Vec<remora_value::Array> = arguments(sizes)
            .into_iter()
            .filter_map(remora::native::base)
            .collect();
        let mut times = Vec::new();
        let (mut sum, mut peak) = (f64::NAN, 0);
        for _ in 0..reps {
            let run = common::run_compiled_once(&c, &args, &[])?;
            times.push(run.compute);
            peak = peak.max(run.peak_kib);
            sum = common::checksum_results(run.results);
        }
        Ok((common::median(&mut times), sum, peak))
    });
    let _ = std::fs::remove_dir_all(&cache);
    result
}

/// NumPy's or JAX's median time, checksum and peak KiB, if they run.
fn python(side: &str, sizes: &[(&'static str, usize)], reps: usize) -> Option<(Duration, f64, u64)> {
    let timed = common::run_numpy(SCRIPT, side, reps, sizes, false)?;
    let peak = common::run_numpy(SCRIPT, side, 1, sizes, true).map_or(0, |p| p.2);
    Some((timed.0, timed.1, peak))
}

fn main() {
    let quick = std::env::var("QUICK").is_ok_and(|v| v == "1");
    let sizes = sizes(quick);
    let reps = if quick { 3 } else { 5 };
    if let Some(n) = std::env::var("PROFILE_REPS").ok().and_then(|v| v.parse().ok()) {
        let s = sizes.clone();
        let (t, sum) = remora_syntax::stack::run_deep(move || interp(&s, n));
        println!("interp median {:.3} ms, checksum {sum:.7}", ms(t));
        return;
    }
    if std::env::var_os("REMORA_BENCH_PEAK").is_some() {
        let s = sizes.clone();
        remora_syntax::stack::run_deep(move || interp(&s, 1));
        println!("{}", peak_kib().unwrap_or(0));
        return;
    }
    let engine = std::env::var("REMORA_ENGINE").ok();
    let wants = |e: &str| engine.as_deref().is_none_or(|x| x == e);
    println!("MLP loss gradient, {}", common::sizes_text(&sizes));
    println!(
        "{:<22} {:>10} {:>9} {:>9} {:>9} {:>16}",
        "side", "ms", "÷ NumPy", "÷ JAX", "peak MB", "checksum dW1"
    );
    let numpy = python("numpy", &sizes, reps);
    let jax = python("jax", &sizes, reps);
    let row = |name: &str, t: Duration, sum: f64, peak: Option<u64>| {
        let ratio = |base: Option<(Duration, f64, u64)>| {
            base.map_or("-".to_string(), |(b, _, _)| {
                format!("{:.2}", t.as_secs_f64() / b.as_secs_f64())
            })
        };
        println!(
            "{name:<22} {:>10.1} {:>9} {:>9} {:>9} {sum:>16.7}",
            ms(t),
            ratio(numpy),
            ratio(jax),
            mb(peak)
        );
    };
    let mut sums = Vec::new();
    if wants("interp") {
        let s = sizes.clone();
        let (t, sum) = remora_syntax::stack::run_deep(move || interp(&s, reps));
        let (lines, _, ok) =
            common::rerun_self(&[("REMORA_BENCH_PEAK", "1")], quick, Duration::from_secs(3600));
        let peak = ok
            .then(|| lines.last().and_then(|l| l.trim().parse().ok()))
            .flatten();
        row("Remora interpreter", t, sum, peak);
        sums.push(("interpreter", sum));
    }
    if wants("compiled") {
        match compiled(&sizes, reps) {
            Ok((t, sum, peak)) => {
                row("Remora compiled", t, sum, Some(peak));
                sums.push(("compiled", sum));
            }
            Err(why) => println!("{:<22} {why}", "Remora compiled"),
        }
    }
    match numpy {
        Some((t, sum, peak)) => row("NumPy, backward by hand", t, sum, Some(peak)),
        None => println!("{:<22} unavailable (set PYTHON to a Python with NumPy)", "NumPy"),
    }
    match jax {
        Some((t, sum, peak)) => row("JAX jit(grad) on CPU", t, sum, Some(peak)),
        None => println!("{:<22} unavailable (`import jax` fails in this Python)", "JAX"),
    }
    if let Some((_, reference, _)) = numpy {
        for (side, sum) in sums {
            if !common::agree(sum, reference, 1e-3) {
                fatal(&format!(
                    "the {side}'s gradient disagrees with NumPy's: {sum} against {reference}"
                ));
            }
        }
    }
}

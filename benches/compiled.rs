//! Benchmark: the compiled engine against hand-written parallel Rust
//! (rayon, f32, the same algorithm, fused, no temporaries), issue 14's
//! table.
//!
//! Each row is the interpreter benchmark's program (`benches/interp/`,
//! the same text), compiled to C once (the cold compile time is reported),
//! then run as `remora run --engine compiled` runs it: a child process
//! reading its arguments and writing its results in Futhark's binary
//! format. Times are medians: the computation alone (the compiled
//! program's own clock, `REMORA_TIMING`) and the whole process; the
//! baseline's is in-process. Both sides' results are checksummed (the
//! float64 sum) and compared. The compute-bound rows also run on one
//! thread, for the speed-up of two.
//!
//! The matrix-product rows (`matmul`, the lifted dot; `f_matmul`, the
//! intrinsic) are measured against NumPy's `a @ b` (OpenBLAS), run in the
//! same invocation (`PYTHON` names a Python with NumPy).
//!
//! Run with `cargo bench --bench compiled`; `QUICK=1` uses small sizes;
//! `ROWS=a,b` picks rows.

#[path = "common/mod.rs"]
mod common;

use rayon::prelude::*;
use remora_value::{Array, Data};
use std::time::{Duration, Instant};

struct Row {
    name: &'static str,
    sizes: Vec<(&'static str, usize)>,
    reps: usize,
    /// The target: at most this many times the baseline's time.
    target: f64,
    /// Whether the row is compute-bound (timed on one thread too).
    compute_bound: bool,
}

/// The rows whose target is against NumPy (`benches/interp/numpy_rows.py`,
/// run in the same invocation) rather than against the Rust baseline.
const AGAINST_NUMPY: &[&str] = &["matmul", "f_matmul"];

fn rows(quick: bool) -> Vec<Row> {
    let q = |big: usize, small: usize| if quick { small } else { big };
    let row = |name, sizes, reps, target, compute_bound| Row {
        name,
        sizes,
        reps,
        target,
        compute_bound,
    };
    vec![
        row("sum_squares", vec![("N", q(10_000_000, 100_000))], 7, 1.1, false),
        row("axpbyc", vec![("N", q(10_000_000, 100_000))], 7, 1.1, false),
        row("nbody_accel", vec![("N", q(2048, 64))], 5, 1.25, true),
        row(
            "convolve",
            vec![("N", q(1_000_000, 10_000)), ("K", 31)],
            5,
            1.25,
            false,
        ),
        row(
            "convolve_windows",
            vec![("N", q(1_000_000, 10_000)), ("K", 31)],
            5,
            1.25,
            false,
        ),
        row("life", vec![("N", q(1024, 64)), ("STEPS", 100)], 3, 1.25, false),
        row(
            "mandelbrot",
            vec![("N", q(1024, 64)), ("ITERS", 255)],
            3,
            1.25,
            true,
        ),
        row(
            "kmeans",
            vec![("N", q(100_000, 1000)), ("D", 8), ("K", 16)],
            // A step takes ~2 ms: enough runs that the medians (of both
            // thread counts) hold still.
            21,
            1.25,
            true,
        ),
        row("sort", vec![("N", q(10_000_000, 100_000))], 3, 1.25, false),
        row("matmul", vec![("N", q(1024, 64))], 5, 1.5, true),
        row("f_matmul", vec![("N", q(1024, 64))], 5, 1.5, true),
    ]
}

fn size(row: &Row, key: &str) -> usize {
    common::size(&row.sizes, key)
}

fn floats_of(a: &Array) -> &[f32] {
    match &a.data {
        Data::Float(x) => x.as_slice(),
        _ => &[],
    }
}

fn ints_of(a: &Array) -> &[i64] {
    match &a.data {
        Data::Int(x) => x.as_slice(),
        _ => &[],
    }
}

/// The hand-written Rust baseline of a row on its arguments: the result's
/// checksum.
fn baseline(row: &Row, args: &[Array]) -> f64 {
    match row.name {
        "sum_squares" => {
            let x = floats_of(&args[0]);
            f64::from(x.par_iter().map(|v| v * v).sum::<f32>())
        }
        "axpbyc" => {
            let (a, b) = (floats_of(&args[0])[0], floats_of(&args[1])[0]);
            let (x, y, c) = (floats_of(&args[2]), floats_of(&args[3]), floats_of(&args[4]));
            let out: Vec<f32> = (x, y, c)
                .into_par_iter()
                .map(|(x, y, c)| a * x + b * y - c)
                .collect();
            out.iter().map(|v| f64::from(*v)).sum()
        }
        "nbody_accel" => {
            let (ps, ms) = (floats_of(&args[0]), floats_of(&args[1]));
            let n = ms.len();
            let out: Vec<[f32; 3]> = (0..n)
                .into_par_iter()
                .map(|i| {
                    let p = &ps[3 * i..3 * i + 3];
                    let mut acc = [0.0f32; 3];
                    for j in 0..n {
                        let q = &ps[3 * j..3 * j + 3];
                        let d = [q[0] - p[0], q[1] - p[1], q[2] - p[2]];
                        let r2 = 0.01 + (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
                        let s = ms[j] / (r2 * r2.sqrt());
                        for k in 0..3 {
                            acc[k] += s * d[k];
                        }
                    }
                    acc
                })
                .collect();
            out.iter().flatten().map(|v| f64::from(*v)).sum()
        }
        "convolve" => {
            let (xs, ws, ks) = (floats_of(&args[0]), floats_of(&args[1]), ints_of(&args[2]));
            let n = xs.len() as i64;
            let out: Vec<f32> = (0..n)
                .into_par_iter()
                .map(|i| {
                    let mut acc = 0.0f32;
                    for (w, k) in ws.iter().zip(ks) {
                        acc += w * xs[(i + k).rem_euclid(n) as usize];
                    }
                    acc
                })
                .collect();
            out.iter().map(|v| f64::from(*v)).sum()
        }
        "convolve_windows" => {
            let (xs, ws) = (floats_of(&args[0]), floats_of(&args[1]));
            let out: Vec<f32> = xs
                .par_windows(ws.len())
                .map(|window| {
                    let mut acc = 0.0f32;
                    for (w, x) in ws.iter().zip(window) {
                        acc += w * x;
                    }
                    acc
                })
                .collect();
            out.iter().map(|v| f64::from(*v)).sum()
        }
        "life" => {
            let n = size(row, "N");
            let mut board: Vec<i64> = ints_of(&args[0]).to_vec();
            let mut next = vec![0i64; n * n];
            for _ in 0..size(row, "STEPS") {
                next.par_chunks_mut(n).enumerate().for_each(|(r, out)| {
                    let up = &board[((r + n - 1) % n) * n..][..n];
                    let mid = &board[r * n..][..n];
                    let down = &board[((r + 1) % n) * n..][..n];
                    for c in 0..n {
                        let (l, rr) = ((c + n - 1) % n, (c + 1) % n);
                        let s = up[l] + up[c] + up[rr] + mid[l] + mid[rr] + down[l] + down[c] + down[rr];
                        out[c] = i64::from(s == 3 || (mid[c] == 1 && s == 2));
                    }
                });
                std::mem::swap(&mut board, &mut next);
            }
            board.iter().map(|v| *v as f64).sum()
        }
        "mandelbrot" => {
            let (re, im) = (floats_of(&args[0]), floats_of(&args[1]));
            let iters = size(row, "ITERS") as f32;
            let out: Vec<f32> = im
                .par_iter()
                .flat_map_iter(|&ci| {
                    re.iter().map(move |&cr| {
                        let (mut zr, mut zi, mut k) = (0.0f32, 0.0f32, 0.0f32);
                        while k < iters && zr * zr + zi * zi <= 4.0 {
                            let t = zr * zr - zi * zi + cr;
                            zi = 2.0 * (zr * zi) + ci;
                            zr = t;
                            k += 1.0;
                        }
                        k
                    })
                })
                .collect();
            out.iter().map(|v| f64::from(*v)).sum()
        }
        "kmeans" => {
            let (points, cs) = (floats_of(&args[0]), floats_of(&args[1]));
            let (d, k) = (size(row, "D"), size(row, "K"));
            let owner: Vec<usize> = points
                .par_chunks(d)
                .map(|p| {
                    let mut best = (f32::INFINITY, 0);
                    for (j, c) in cs.chunks(d).enumerate() {
                        let dist: f32 = p.iter().zip(c).map(|(a, b)| (a - b) * (a - b)).sum();
                        if dist < best.0 {
                            best = (dist, j);
                        }
                    }
                    best.1
                })
                .collect();
            let (sums, counts) = points
                .par_chunks(d)
                .zip(&owner)
                .fold(
                    || (vec![0.0f32; k * d], vec![0i64; k]),
                    |(mut s, mut c), (p, &o)| {
                        for (a, b) in s[o * d..(o + 1) * d].iter_mut().zip(p) {
                            *a += b;
                        }
                        c[o] += 1;
                        (s, c)
                    },
                )
                .reduce(
                    || (vec![0.0f32; k * d], vec![0i64; k]),
                    |(mut s, mut c), (s2, c2)| {
                        s.iter_mut().zip(s2).for_each(|(a, b)| *a += b);
                        c.iter_mut().zip(c2).for_each(|(a, b)| *a += b);
                        (s, c)
                    },
                );
            let mut total = 0.0;
            for j in 0..k {
                for q in 0..d {
                    total += f64::from(if counts[j] > 0 {
                        sums[j * d + q] / counts[j] as f32
                    } else {
                        cs[j * d + q]
                    });
                }
            }
            total
        }
        "matmul" | "f_matmul" => {
            // Row by row, each row of the product the rows of `b` scaled
            // by the row of `a` and added up (vectorised over the columns).
            let (a, b) = (floats_of(&args[0]), floats_of(&args[1]));
            let n = size(row, "N");
            let out: Vec<f32> = a
                .par_chunks(n)
                .flat_map_iter(|ai| {
                    let mut acc = vec![0.0f32; n];
                    for (x, bk) in ai.iter().zip(b.chunks(n)) {
                        for (c, y) in acc.iter_mut().zip(bk) {
                            *c += x * y;
                        }
                    }
                    acc
                })
                .collect();
            out.iter().map(|v| f64::from(*v)).sum()
        }
        "sort" => {
            let mut xs = ints_of(&args[0]).to_vec();
            xs.par_sort_unstable();
            xs.iter().map(|v| *v as f64).sum()
        }
        _ => 0.0,
    }
}

/// The bytes of an argument's atoms as the compiled program holds them.
fn argument_bytes(a: &Array) -> usize {
    match &a.data {
        Data::Int(x) => x.len() * 8,
        Data::Float(x) => x.len() * 4,
        Data::Bool(x) => x.len(),
        _ => 0,
    }
}

fn checksum(values: &[Array]) -> f64 {
    values
        .iter()
        .map(|a| match &a.data {
            Data::Float(x) => x.iter().map(|v| f64::from(*v)).sum(),
            Data::Int(x) => x.iter().map(|v| *v as f64).sum(),
            Data::Bool(x) => x.iter().filter(|b| **b).count() as f64,
            _ => 0.0,
        })
        .sum()
}

fn median(mut t: Vec<Duration>) -> Duration {
    common::median(&mut t)
}

/// The row's program compiled (cold, into a fresh cache): the executable
/// and the compile time; or why not.
fn compile(row: &Row, cache: &std::path::Path) -> Result<common::Compiled, String> {
    let text = common::source(&format!("benches/interp/{}.remora", row.name), &row.sizes);
    common::compile_entry(row.name, &text, cache)
}

/// The compiled row run `reps` times on `threads` threads (0: all):
/// median computation time, median whole-process time, checksum, and the
/// most peak memory of a run in KiB.
fn run_compiled(
    compiled: &common::Compiled,
    args: &[Array],
    reps: usize,
    threads: usize,
) -> Option<(Duration, Duration, f64, u64)> {
    let threads = threads.to_string();
    let env: Vec<(&str, &str)> = if threads == "0" {
        Vec::new()
    } else {
        vec![("REMORA_THREADS", threads.as_str())]
    };
    let (mut compute, mut whole, mut sum, mut peak) = (Vec::new(), Vec::new(), 0.0, 0);
    for _ in 0..reps {
        let run = common::run_compiled_once(compiled, args, &env).ok()?;
        compute.push(run.compute);
        whole.push(run.whole);
        sum = checksum(&run.results);
        peak = peak.max(run.peak_kib);
    }
    Some((median(compute), median(whole), sum, peak))
}

fn main() {
    let quick = std::env::var("QUICK").is_ok_and(|v| v == "1");
    let only: Option<Vec<String>> = std::env::var("ROWS")
        .ok()
        .map(|s| s.split(',').map(str::to_string).collect());
    let cache = std::env::temp_dir().join(format!("remora-bench-{}", std::process::id()));
    println!(
        "{:<12} {:>22} {:>9} {:>10} {:>10} {:>9} {:>7} {:>7} {:>8} {:>6} {:>9}",
        "row",
        "size",
        "cc ms",
        "compute ms",
        "process ms",
        "Rust ms",
        "ratio",
        "target",
        "2 vs 1",
        "agree",
        "peak MiB"
    );
    let mut all_met = true;
    for row in rows(quick) {
        if only.as_ref().is_some_and(|o| !o.iter().any(|n| n == row.name)) {
            continue;
        }
        let size_text = row
            .sizes
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ");
        let args: Vec<Array> = common::arguments(row.name, &row.sizes)
            .into_iter()
            .filter_map(remora::native::base)
            .collect();
        let mut rust = Vec::new();
        let mut rust_sum = 0.0;
        for _ in 0..row.reps {
            let start = Instant::now();
            rust_sum = baseline(&row, &args);
            rust.push(start.elapsed());
        }
        let rust = median(rust);
        // The arguments' bytes in KiB: the peak is shown as what the
        // program used beside them (its results, temporaries, runtime)
        // plus them.
        let inputs = (args.iter().map(argument_bytes).sum::<usize>() / 1024) as u64;
        let (compiled, cc) = match compile(&row, &cache) {
            Ok(x) => {
                let time = x.time;
                (x, time)
            }
            Err(why) => {
                all_met = false;
                println!("{:<12} {:>22} {why}", row.name, size_text);
                continue;
            }
        };
        let Some((compute, whole, sum, peak)) = run_compiled(&compiled, &args, row.reps, 0) else {
            all_met = false;
            println!("{:<12} {:>22} the compiled program failed", row.name, size_text);
            continue;
        };
        let scaling = if row.compute_bound {
            run_compiled(&compiled, &args, row.reps, 1)
                .map(|(one, _, _, _)| format!("{:.2}×", one.as_secs_f64() / compute.as_secs_f64()))
        } else {
            None
        };
        let mut ratio = compute.as_secs_f64() / rust.as_secs_f64();
        let mut agree = common::agree(sum, rust_sum, 1e-3);
        let numpy = if AGAINST_NUMPY.contains(&row.name) {
            common::run_numpy(
                "benches/interp/numpy_rows.py",
                row.name,
                row.reps,
                &row.sizes,
                false,
            )
        } else {
            None
        };
        if let Some((t, numpy_sum, _)) = numpy {
            ratio = compute.as_secs_f64() / t.as_secs_f64();
            agree &= common::agree(sum, numpy_sum, 1e-3);
        } else if AGAINST_NUMPY.contains(&row.name) {
            all_met = false;
        }
        all_met &= ratio <= row.target && agree;
        println!(
            "{:<12} {:>22} {:>9.0} {:>10.2} {:>10.2} {:>9.2} {:>7.2} {:>7} {:>8} {:>6} {:>9}",
            row.name,
            size_text,
            common::ms(cc),
            common::ms(compute),
            common::ms(whole),
            common::ms(rust),
            ratio,
            format!("≤{}×", row.target),
            scaling.unwrap_or_else(|| "-".into()),
            if agree { "yes" } else { "NO" },
            format!(
                "{:.1}+{:.1}",
                peak.saturating_sub(inputs) as f64 / 1024.0,
                inputs as f64 / 1024.0
            ),
        );
        if let Some((t, _, _)) = numpy {
            println!(
                "    (ratio against NumPy's {:.2} ms; against Rust {:.2}×)",
                common::ms(t),
                compute.as_secs_f64() / rust.as_secs_f64()
            );
        }
        if !agree {
            println!("    checksums: compiled {sum}, Rust {rust_sum}");
        }
    }
    let _ = std::fs::remove_dir_all(&cache);
    println!(
        "{}",
        if all_met {
            "every row meets its target"
        } else {
            "some row misses its target or does not compile yet"
        }
    );
}

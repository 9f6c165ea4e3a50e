//! What the interpreter-vs-NumPy benchmarks share (`benches/interp.rs`,
//! `benches/styles.rs`, each including this file by `#[path]`): the
//! generated data (the same on the NumPy side), programs with `{KEY}` size
//! placeholders, checking and timing an entry, checksums, running the
//! NumPy script, and peak memory from a fresh process.

#![allow(dead_code)]

use remora_interp::{Interpreter, Value, program};
use remora_syntax::{RealFs, SourceMap, load_program_text};
use remora_value::{Array, Atom, Data};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The generated data, the same as the NumPy scripts' `floats`.
pub fn floats(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919 + seed * 104_729) % 1000) as f32 / 1000.0)
        .collect()
}

/// As the NumPy scripts' `cells`: a board of 0s and 1s.
pub fn cells(n: usize, seed: usize) -> Vec<i64> {
    (0..n)
        .map(|i| i64::from((i * 7919 + seed * 104_729) % 7 < 2))
        .collect()
}

/// As the NumPy scripts' `ints`: a 64-bit hash of the position, spread
/// over the whole Int range.
pub fn ints(n: usize, seed: u64) -> Vec<i64> {
    (0..n as u64)
        .map(|i| {
            let mut x = i.wrapping_add(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (x ^ (x >> 31)) as i64
        })
        .collect()
}

pub fn float_array<'p>(shape: Vec<usize>, data: Vec<f32>) -> Value<'p> {
    Array {
        shape,
        data: Data::Float(data.into()),
    }
}

/// The Mandelbrot grid's real and imaginary parts, `n` points each over
/// [-2, 1] and [-1.5, 1.5], as `np.linspace` makes them.
pub fn mandelbrot_grid<'p>(n: usize) -> Vec<Value<'p>> {
    let line = |lo: f64, hi: f64| {
        let step = (hi - lo) / (n - 1) as f64;
        (0..n).map(|i| (i as f64 * step + lo) as f32).collect::<Vec<_>>()
    };
    vec![
        float_array(vec![n], line(-2.0, 1.0)),
        float_array(vec![n], line(-1.5, 1.5)),
    ]
}

pub fn int_array<'p>(shape: Vec<usize>, data: Vec<i64>) -> Value<'p> {
    Array {
        shape,
        data: Data::Int(data.into()),
    }
}

/// The value of `key` among the sizes (0 if absent).
pub fn size(sizes: &[(&'static str, usize)], key: &str) -> usize {
    sizes
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| *v)
        .unwrap_or(0)
}

/// `sizes` as `K=V K=V`.
pub fn sizes_text(sizes: &[(&'static str, usize)]) -> String {
    sizes
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The program at `path` (relative to the crate) with the sizes filled in
/// for `{KEY}` and `{KEY-1}`.
pub fn source(path: &str, sizes: &[(&'static str, usize)]) -> String {
    let path = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    let mut text = std::fs::read_to_string(&path).unwrap_or_else(|e| fatal(&format!("{path}: {e}")));
    for (k, v) in sizes {
        text = text.replace(&format!("{{{k}-1}}"), &(v - 1).to_string());
        text = text.replace(&format!("{{{k}}}"), &v.to_string());
    }
    text
}

pub fn fatal(m: &str) -> ! {
    eprintln!("bench: {m}");
    std::process::exit(1)
}

pub fn checksum(v: &Value<'_>) -> f64 {
    match &v.data {
        Data::Float(x) => x.iter().map(|a| f64::from(*a)).sum(),
        Data::Int(x) => x.iter().map(|a| *a as f64).sum(),
        Data::Bool(x) => x.iter().map(|a| f64::from(u8::from(*a))).sum(),
        // A result of run-time length (`filter`, `take*`): its payload.
        Data::Atoms(x) => x
            .iter()
            .map(|a| match a {
                Atom::Box(b) => checksum(&b.payload),
                _ => f64::NAN,
            })
            .sum(),
        _ => f64::NAN,
    }
}

/// Parses and checks `text` once, then runs its `main` entry `reps` times
/// on fresh arguments from `args`: each run's time (the computation alone)
/// and the last result's checksum.
pub fn time_entry<'a>(
    name: &str,
    text: &str,
    args: &dyn Fn() -> Vec<Value<'a>>,
    reps: usize,
    after_each: impl FnMut(usize, Duration, f64) -> bool,
) -> (Vec<Duration>, f64) {
    time_entry_logged(name, text, args, reps, false, after_each).0
}

/// As [`time_entry`]; with `log`, the first run also records what ran
/// cell by cell (`remora run -v`'s log), returned one line per place:
/// `LINE:COL CELLS cells (TIMES×): REASON — SNIPPET`.
pub fn time_entry_logged<'a>(
    name: &str,
    text: &str,
    args: &dyn Fn() -> Vec<Value<'a>>,
    reps: usize,
    log: bool,
    mut after_each: impl FnMut(usize, Duration, f64) -> bool,
) -> ((Vec<Duration>, f64), Vec<String>) {
    let mut sources = SourceMap::new();
    let loaded = load_program_text(&mut sources, &RealFs, name, None, text);
    if loaded.has_errors() {
        for d in &loaded.diagnostics {
            eprintln!("{name}: {}", d.message);
        }
        fatal(&format!("{name}: does not parse"));
    }
    let checked = remora_check::check_program(&loaded.value);
    if checked.has_errors() {
        for d in &checked.diagnostics {
            eprintln!("{name}: {}", d.message);
        }
        fatal(&format!("{name}: does not type-check"));
    }
    // `REMORA_ENGINE=fused`: the program as `remora run --engine fused`
    // runs it (lowered, fused and raised back by the compiler).
    let fused = (std::env::var("REMORA_ENGINE").as_deref() == Ok("fused"))
        .then(|| remora_compile::lowered(&checked.value, remora_compile::Level::Fused, &checked.names).ok())
        .flatten()
        .and_then(|p| remora_compile::raise_program(&p).ok());
    let decls = fused.as_deref().unwrap_or(&checked.value);
    let mut times = Vec::new();
    let mut sum = f64::NAN;
    let mut notes = Vec::new();
    for rep in 0..reps {
        // The arguments are values of the program's lifetime only by
        // their type; they hold no reference into it.
        let args: Vec<Value<'_>> = args().into_iter().map(retag).collect();
        let mut interp = Interpreter::default();
        if log && rep == 0 {
            interp.log_cell_by_cell();
        }
        let t0 = Instant::now();
        let result = program::call_entry(&mut interp, decls, "main", args);
        let t = t0.elapsed();
        for c in interp.cell_by_cell() {
            let (line, col) = sources
                .get(c.span.file)
                .map_or((0, 0), |f| f.line_col(c.span.start as usize));
            let snippet: String = sources
                .snippet(c.span)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            let snippet: String = snippet.chars().take(60).collect();
            notes.push(format!(
                "{line}:{col} {} cells ({}×): {} — {snippet}",
                c.cells, c.times, c.reason
            ));
        }
        match result {
            Ok(v) => sum = checksum(&v),
            Err(e) => fatal(&format!("{name}: {e:?}")),
        }
        times.push(t);
        if !after_each(rep, t, sum) {
            break;
        }
    }
    ((times, sum), notes)
}

/// An argument (numbers only) as a value of any lifetime.
fn retag<'a, 'b>(v: Value<'a>) -> Value<'b> {
    let data = match v.data {
        Data::Float(x) => Data::Float(x),
        Data::Int(x) => Data::Int(x),
        Data::Bool(x) => Data::Bool(x),
        _ => fatal("bench arguments are Int, Float or Bool arrays"),
    };
    Array { shape: v.shape, data }
}

pub fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

pub fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Runs a NumPy script as `SCRIPT ROW REPS [--peak] KEY=VALUE…`, which
/// prints `SECONDS CHECKSUM PEAK_KIB`; `None` if Python or NumPy fails.
pub fn run_numpy(
    script: &str,
    row: &str,
    reps: usize,
    sizes: &[(&'static str, usize)],
    peak: bool,
) -> Option<(Duration, f64, u64)> {
    let script = format!("{}/{script}", env!("CARGO_MANIFEST_DIR"));
    let mut cmd = Command::new(python());
    cmd.arg(script).arg(row).arg(reps.to_string());
    if peak {
        cmd.arg("--peak");
    }
    for (k, v) in sizes {
        cmd.arg(format!("{k}={v}"));
    }
    let out = cmd.output().ok();
    let out = match out {
        Some(o) if o.status.success() => o,
        Some(o) => {
            eprintln!("numpy {row}: {}", String::from_utf8_lossy(&o.stderr).trim());
            return None;
        }
        None => return None,
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut it = text.split_whitespace();
    let secs: f64 = it.next()?.parse().ok()?;
    let sum: f64 = it.next()?.parse().ok()?;
    let kib: u64 = it.next()?.parse().ok()?;
    Some((Duration::from_secs_f64(secs), sum, kib))
}

/// This process's peak resident memory in KiB (Linux).
pub fn peak_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs this bench binary again with the environment `env` (and `QUICK`
/// if `quick`), in a fresh process: its standard output, line by line.
/// Each line must come within `each` of the previous (or of the start),
/// else the process is killed. Returns the lines, whether the process
/// was killed so, and whether it succeeded.
pub fn rerun_self(env: &[(&str, &str)], quick: bool, each: Duration) -> (Vec<String>, bool, bool) {
    let (lines, killed, ok, _) = rerun_self_stderr(env, quick, each, false);
    (lines, killed, ok)
}

/// As [`rerun_self`]; with `capture`, the child's standard error is
/// returned instead of passed through.
pub fn rerun_self_stderr(
    env: &[(&str, &str)],
    quick: bool,
    each: Duration,
    capture: bool,
) -> (Vec<String>, bool, bool, String) {
    let Ok(exe) = std::env::current_exe() else {
        return (Vec::new(), false, false, String::new());
    };
    let mut cmd = Command::new(exe);
    for (k, v) in env {
        cmd.env(k, v);
    }
    if quick {
        cmd.env("QUICK", "1");
    }
    cmd.stdout(Stdio::piped())
        .stderr(if capture { Stdio::piped() } else { Stdio::inherit() });
    let Ok(mut child) = cmd.spawn() else {
        return (Vec::new(), false, false, String::new());
    };
    let Some(stdout) = child.stdout.take() else {
        let _ = child.kill();
        return (Vec::new(), false, false, String::new());
    };
    let stderr = child.stderr.take().map(|mut e| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut e, &mut text);
            text
        })
    });
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    let mut finished = true;
    loop {
        match rx.recv_timeout(each) {
            Ok(line) => lines.push(line),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                finished = false;
                let _ = child.kill();
                break;
            }
        }
    }
    let status = child.wait();
    let _ = reader.join();
    let ok = finished && status.is_ok_and(|s| s.success());
    let errors = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
    (lines, !finished, ok, errors)
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// KiB as whole MB, or `-`.
pub fn mb(k: Option<u64>) -> String {
    k.map(|k| format!("{:.0}", k as f64 / 1024.0))
        .unwrap_or("-".into())
}

/// Whether two checksums agree within a relative tolerance.
/// The agreement column of a table row: `yes`, `NO`, or `-` without NumPy.
pub fn agreement(agree: Option<bool>) -> &'static str {
    match agree {
        Some(true) => "yes",
        Some(false) => "NO",
        None => "-",
    }
}

/// Under a row whose checksums disagree, both checksums.
pub fn report_disagreement(agree: Option<bool>, ours: f64, numpy: Option<f64>) {
    if agree == Some(false) {
        let theirs = numpy.unwrap_or(f64::NAN);
        println!("  checksums differ: Remora {ours}, NumPy {theirs}");
    }
}

pub fn agree(a: f64, b: f64, tolerance: f64) -> bool {
    let scale = a.abs().max(b.abs()).max(1.0);
    (a - b).abs() / scale < tolerance
}

/// The entry's arguments for a row of the interpreter's and the
/// compiler's benchmarks (`benches/interp/NAME.remora`).
pub fn arguments<'p>(name: &str, sizes: &[(&'static str, usize)]) -> Vec<Value<'p>> {
    let at = |key: &str| size(sizes, key);
    let n = at("N");
    let scaled = |v: Vec<f32>, by: f32| v.into_iter().map(|x| x * by).collect::<Vec<_>>();
    let masses = || floats(n, 2).into_iter().map(|m| m + 0.5).collect::<Vec<_>>();
    match name {
        "sum_squares" => vec![float_array(vec![n], floats(n, 1))],
        "axpbyc" => vec![
            float_array(vec![], vec![1.5]),
            float_array(vec![], vec![-0.5]),
            float_array(vec![n], floats(n, 1)),
            float_array(vec![n], floats(n, 2)),
            float_array(vec![n], floats(n, 3)),
        ],
        "nbody_accel" => vec![
            float_array(vec![n, 3], scaled(floats(3 * n, 1), 10.0)),
            float_array(vec![n], masses()),
        ],
        "convolve" => {
            let k = at("K");
            vec![
                float_array(vec![n], floats(n, 1)),
                float_array(vec![k], floats(k, 2)),
                Array {
                    shape: vec![k],
                    data: Data::Int((0..k as i64).map(|s| s - (k / 2) as i64).collect()),
                },
            ]
        }
        "matmul" | "f_matmul" => vec![
            float_array(vec![n, n], floats(n * n, 1)),
            float_array(vec![n, n], floats(n * n, 2)),
        ],
        "convolve_windows" => {
            let k = at("K");
            vec![
                float_array(vec![n], floats(n, 1)),
                float_array(vec![k], floats(k, 2)),
            ]
        }
        "replicate" => vec![
            float_array(vec![n], floats(n, 1)),
            float_array(vec![8, n], floats(8 * n, 2)),
        ],
        "life" => vec![Array {
            shape: vec![n, n],
            data: Data::Int(cells(n * n, 1).into()),
        }],
        "mandelbrot" => mandelbrot_grid(n),
        "kmeans" => {
            let (d, k) = (at("D"), at("K"));
            vec![
                float_array(vec![n, d], floats(n * d, 1)),
                float_array(vec![k, d], floats(k * d, 2)),
            ]
        }
        "sort" => vec![Array {
            shape: vec![n],
            data: Data::Int(ints(n, 1).into()),
        }],
        "nbody_sim" => vec![
            float_array(vec![2, n, 3], scaled(floats(2 * n * 3, 1), 10.0)),
            float_array(vec![n], masses()),
        ],
        _ => Vec::new(),
    }
}

/// A program's `main` entry compiled by the compiled engine.
pub struct Compiled {
    /// The executable, in the cache given to [`compile_entry`].
    pub exe: std::path::PathBuf,
    /// What the executable writes (to make boxes of witnesses and payloads).
    pub outputs: Vec<remora_compile::loops::Output>,
    /// How long the whole compilation took (cold where the cache was empty).
    pub time: Duration,
}

/// A program's `main` entry compiled into an executable in the cache
/// `cache` (the caller's); or why not.
pub fn compile_entry(name: &str, text: &str, cache: &std::path::Path) -> Result<Compiled, String> {
    let start = Instant::now();
    let mut sources = SourceMap::new();
    let loaded = load_program_text(&mut sources, &RealFs, name, None, text);
    let checked = remora_check::check_program(&loaded.value);
    if loaded.has_errors() || checked.has_errors() {
        return Err("does not parse or type-check".into());
    }
    let program = remora_compile::loops(&checked.value, &checked.names, "main")
        .map_err(|u| format!("does not compile yet: {}", u.what))?;
    let exe = remora::native::executable_in(cache, &program, remora::native::FLAGS).map_err(|f| match f {
        remora::native::Failure::Internal(m) | remora::native::Failure::Run(m) => m,
        remora::native::Failure::Unsupported(_, m) => m,
    })?;
    Ok(Compiled {
        exe,
        outputs: program.outputs,
        time: start.elapsed(),
    })
}

/// One run of a compiled entry (`REMORA_TIMING`, plus `env`): the
/// computation's time by the program's own clock, the whole process's
/// time, the process's peak memory in KiB, and the results.
pub struct CompiledRun {
    pub compute: Duration,
    pub whole: Duration,
    pub peak_kib: u64,
    pub results: Vec<Array>,
}

pub fn run_compiled_once(
    compiled: &Compiled,
    args: &[Array],
    env: &[(&str, &str)],
) -> Result<CompiledRun, String> {
    let mut env = env.to_vec();
    env.push(("REMORA_TIMING", "1"));
    let start = Instant::now();
    let (results, err) = remora::native::execute_env(&compiled.exe, args, &env).map_err(|f| match f {
        remora::native::Failure::Internal(m) | remora::native::Failure::Run(m) => m,
        remora::native::Failure::Unsupported(_, m) => m,
    })?;
    let whole = start.elapsed();
    let field = |key: &str| -> Option<u64> {
        err.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|n| n.trim().parse().ok())
    };
    let compute = Duration::from_nanos(field("remora-time-ns: ").ok_or("no time reported")?);
    Ok(CompiledRun {
        compute,
        whole,
        peak_kib: field("remora-peak-kib: ").unwrap_or(0),
        results: remora::native::boxed(&compiled.outputs, results),
    })
}

/// The checksum of a compiled run's results (as [`checksum`] of the
/// interpreter's value).
pub fn checksum_results(results: Vec<Array>) -> f64 {
    results
        .into_iter()
        .map(|a| remora::native::result::<remora_interp::Fun<'static>>(a).map_or(f64::NAN, |v| checksum(&v)))
        .sum()
}

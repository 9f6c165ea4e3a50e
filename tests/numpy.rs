//! Remora against NumPy, through the `remora` binary:
//!
//! * the `.npy` round trip of extensions.md §5: arrays written by NumPy go
//!   in as entry arguments (`--input`), the result goes out with
//!   `--output`, and NumPy loads it back equal to its own computation;
//! * every program in `examples/` that has a NumPy check
//!   (`examples/check/NAME.py`) prints the same numbers as the check.
//!
//! Python with NumPy is found as `$REMORA_PYTHON`, else `python3`. `.ci/run`
//! installs NumPy from PyPI and sets `REMORA_PYTHON`; where NumPy is
//! missing these tests fail under CI (`CI` set) and are skipped, with a
//! note, elsewhere.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Python with NumPy, or why there is none.
fn python() -> Result<String, String> {
    let python = std::env::var("REMORA_PYTHON").unwrap_or_else(|_| "python3".into());
    match Command::new(&python).args(["-c", "import numpy"]).output() {
        Ok(out) if out.status.success() => Ok(python),
        Ok(out) => Err(format!(
            "{python}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Err(format!("{python}: {e}")),
    }
}

/// Python with NumPy; `None` (skip) outside CI when there is none.
fn python_or_skip(test: &str) -> Option<String> {
    match python() {
        Ok(p) => Some(p),
        Err(why) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "{test} needs Python with NumPy: {why}"
            );
            eprintln!("skipping {test}: no Python with NumPy ({why})");
            None
        }
    }
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("remora-numpy-{}-{name}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    dir
}

#[test]
fn npy_round_trip() {
    let Some(python) = python_or_skip("npy_round_trip") else {
        return;
    };
    let dir = scratch("round-trip");
    let program = dir.join("scale.remora");
    let written = std::fs::write(
        &program,
        "; Each row scaled by its count where its flag is set, else less one.\n\
         (entry (main (xs [Float 100 8]) (ks [Int 100]) (flags [Bool 100]))\n  \
           (select flags (f.* xs (i->f ks)) (f.- xs 1.0)))\n",
    );
    assert!(written.is_ok(), "{written:?}");
    let make = format!(
        "import numpy as np\n\
         rng = np.random.default_rng(7)\n\
         np.save(r'{d}/xs.npy', rng.standard_normal((100, 8)).astype(np.float32))\n\
         np.save(r'{d}/ks.npy', rng.integers(-5, 5, 100).astype(np.int64))\n\
         np.save(r'{d}/flags.npy', rng.random(100) < 0.5)\n",
        d = dir.display()
    );
    let made = run(Command::new(&python).args(["-c", &make]));
    assert!(made.is_ok(), "{made:?}");
    let out = dir.join("out.npy");
    let ran = run(Command::new(env!("CARGO_BIN_EXE_remora"))
        .env("XDG_CACHE_HOME", concat!(env!("CARGO_TARGET_TMPDIR"), "/cache"))
        .arg("run")
        .arg(&program)
        .arg("--input")
        .arg(dir.join("xs.npy"))
        .arg("--input")
        .arg(dir.join("ks.npy"))
        .arg("--input")
        .arg(dir.join("flags.npy"))
        .arg("--output")
        .arg(&out));
    assert!(ran.is_ok(), "{ran:?}");
    let compare = format!(
        "import numpy as np\n\
         xs, ks, flags = (np.load(r'{d}/' + n + '.npy') for n in ('xs', 'ks', 'flags'))\n\
         want = np.where(flags[:, None], xs * ks[:, None].astype(np.float32), xs - np.float32(1))\n\
         got = np.load(r'{o}')\n\
         assert got.dtype == np.float32, got.dtype\n\
         assert got.shape == (100, 8), got.shape\n\
         assert np.array_equal(got, want), np.abs(got - want).max()\n\
         print('equal')\n",
        d = dir.display(),
        o = out.display()
    );
    let compared = run(Command::new(&python).args(["-c", &compare]));
    assert_eq!(compared.as_deref().map(str::trim), Ok("equal"), "{compared:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The numbers in printed output: Remora's (`[1.5 #t]`, brackets and box
/// syntax ignored, `#t`/`#f` as 1/0) or the check's (whitespace-separated).
fn numbers(text: &str) -> Vec<f64> {
    text.split(|c: char| c.is_whitespace() || matches!(c, '[' | ']' | '(' | ')' | ','))
        .filter_map(|w| match w {
            "#t" | "True" | "true" => Some(1.0),
            "#f" | "False" | "false" => Some(0.0),
            "NaN" | "nan" => Some(f64::NAN),
            w => w.parse::<f64>().ok(),
        })
        .collect()
}

fn agree(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-3 * (1.0 + a.abs().max(b.abs()))
}

#[test]
fn examples_agree_with_numpy() {
    let Some(python) = python_or_skip("examples_agree_with_numpy") else {
        return;
    };
    let checks = root().join("examples/check");
    let mut scripts: Vec<PathBuf> = std::fs::read_dir(&checks)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    scripts.retain(|p| p.extension().is_some_and(|e| e == "py"));
    scripts.sort();
    assert!(!scripts.is_empty(), "no checks in {}", checks.display());
    let mut failures = Vec::new();
    for script in &scripts {
        let name = script
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let program = root().join("examples").join(format!("{name}.remora"));
        // On the interpreter, and on the compiled engine: every example
        // compiles (`-v` says it ran compiled, not on the interpreter
        // after a run-time failure).
        for engine in ["interp", "compiled"] {
            match compare_example(&python, script, &program, engine) {
                Ok(()) => eprintln!("{name} ({engine}): agrees with NumPy"),
                Err(e) => failures.push(format!("{name} ({engine}): {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn compare_example(python: &str, script: &Path, program: &Path, engine: &str) -> Result<(), String> {
    let want = numbers(&run(Command::new(python).arg(script))?);
    let out = Command::new(env!("CARGO_BIN_EXE_remora"))
        .env("XDG_CACHE_HOME", concat!(env!("CARGO_TARGET_TMPDIR"), "/cache"))
        .args(["run", "-v", "--engine", engine])
        .arg(program)
        .output()
        .map_err(|e| e.to_string())?;
    let said = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("remora failed: {said}"));
    }
    if engine == "compiled" && !said.contains("note: ran compiled") {
        return Err(format!("did not run compiled: {said}"));
    }
    let got = numbers(&String::from_utf8_lossy(&out.stdout));
    if want.len() != got.len() {
        return Err(format!(
            "NumPy gives {} numbers, Remora {}",
            want.len(),
            got.len()
        ));
    }
    match want.iter().zip(&got).position(|(a, b)| !agree(*a, *b)) {
        None if want.is_empty() => Err("no numbers to compare".into()),
        None => Ok(()),
        Some(i) => Err(format!("number {i}: NumPy {} but Remora {}", want[i], got[i])),
    }
}

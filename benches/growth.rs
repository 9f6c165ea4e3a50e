//! Benchmark: how the time to read, check and run grows with the size of a
//! hostile input (issue 12): each class of input that was once quadratic
//! or worse — many arguments, nested boxes, deep literals, long literals,
//! large data files of the wrong type, many continuation lines in the REPL,
//! arrays of high rank, nested lambdas and records — run by the `remora`
//! binary at a size and at twice that size. Prints both times (the median
//! of three fresh processes) and their ratio; linear growth is a ratio of
//! at most 2.5, which is printed, not asserted.
//!
//! Run with `cargo bench --bench growth`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One class: what it is, the command and its input at a size.
struct Class {
    name: &'static str,
    size: usize,
    make: fn(usize, &Path) -> Run,
}

/// A run of the binary: its arguments and standard input.
struct Run {
    args: Vec<String>,
    stdin: Option<Vec<u8>>,
}

fn nested(depth: usize, open: &str, leaf: &str, close: &str) -> String {
    format!("{}{leaf}{}", open.repeat(depth), close.repeat(depth))
}

/// A program file in `dir`, run by `remora COMMAND`.
fn program(dir: &Path, command: &str, text: String) -> Run {
    let file = dir.join("p.remora");
    if std::fs::write(&file, text).is_err() {
        eprintln!("cannot write {}", file.display());
    }
    Run {
        args: vec![command.into(), file.to_string_lossy().into_owned()],
        stdin: None,
    }
}

fn classes() -> Vec<Class> {
    vec![
        Class {
            name: "application of n arguments (check)",
            size: 40_000,
            make: |n, dir| program(dir, "check", format!("(+ {})\n", vec!["1"; n].join(" "))),
        },
        Class {
            name: "n nested boxes (check)",
            size: 900,
            make: |n, dir| program(dir, "check", nested(n, "(box ", "1", ")")),
        },
        Class {
            name: "vector literal n deep (run)",
            size: 100_000,
            make: |n, dir| program(dir, "run", nested(n, "[", "1", "]")),
        },
        Class {
            name: "vector literal of n numbers (run)",
            size: 1_000_000,
            make: |n, dir| program(dir, "run", format!("(reduce + [{}])\n", vec!["1"; n].join(" "))),
        },
        Class {
            name: "a shape of n axes written out (run)",
            size: 50_000,
            make: |n, dir| {
                program(
                    dir,
                    "run",
                    format!("(sum (i-app iota/static [{}]))\n", vec!["1"; n].join(" ")),
                )
            },
        },
        Class {
            name: "sum over a value of n axes (run)",
            size: 50_000,
            make: |n, dir| program(dir, "run", format!("(sum (iota (+ 1 (* 0 (range {n})))))\n")),
        },
        Class {
            name: "an .npy of n MiB of the wrong type (run)",
            size: 64,
            make: |n, dir| {
                let file = dir.join("x.npy");
                let floats = (n << 20) / 4;
                let mut header =
                    format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({floats},), }}");
                while (header.len() + 11) % 64 != 0 {
                    header.push(' ');
                }
                header.push('\n');
                let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
                bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
                bytes.extend_from_slice(header.as_bytes());
                bytes.resize(bytes.len() + floats * 4, 0);
                if std::fs::write(&file, bytes).is_err() {
                    eprintln!("cannot write {}", file.display());
                }
                let mut run = program(dir, "run", "(entry (main (x [Int 3])) x)\n".into());
                run.args.push("--input".into());
                run.args.push(file.to_string_lossy().into_owned());
                run
            },
        },
        Class {
            name: "REPL input of n continuation lines",
            size: 20_000,
            make: |n, _| Run {
                args: vec!["repl".into()],
                stdin: Some(format!("(+ 1\n{})\n", " 0\n".repeat(n)).into_bytes()),
            },
        },
        Class {
            name: "n nested lambdas (run)",
            size: 1_000,
            make: |n, dir| program(dir, "run", nested(n, "(fn ((x Int)) ", "x", ")")),
        },
        Class {
            name: "n nested frames (check)",
            size: 50_000,
            make: |n, dir| program(dir, "check", nested(n, "(frame [1] ", "1", ")")),
        },
        Class {
            name: "n nested records (run)",
            size: 1_000,
            make: |n, dir| program(dir, "run", nested(n, "{(a [] ", "1", ")}")),
        },
    ]
}

/// The median wall time of three runs of `run` (its exit status ignored:
/// some inputs are errors, which is what they are for).
fn time(bin: &Path, run: &Run) -> Duration {
    let mut times = Vec::new();
    for _ in 0..3 {
        let start = Instant::now();
        let child = Command::new(bin)
            .args(&run.args)
            .stdin(if run.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let Ok(mut child) = child else {
            eprintln!("cannot start {}", bin.display());
            return Duration::ZERO;
        };
        if let (Some(text), Some(mut pipe)) = (&run.stdin, child.stdin.take()) {
            let _ = pipe.write_all(text);
        }
        let _ = child.wait();
        times.push(start.elapsed());
    }
    times.sort();
    times[1]
}

fn main() {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_remora"));
    let dir = std::env::temp_dir().join(format!("remora-growth-{}", std::process::id()));
    if std::fs::create_dir_all(&dir).is_err() {
        eprintln!("cannot make {}", dir.display());
        return;
    }
    println!(
        "{:<46} {:>10} {:>10} {:>10} {:>7}  linear (≤ 2.5×)",
        "input", "n", "time n", "time 2n", "ratio"
    );
    for class in classes() {
        let at = |n: usize| time(&bin, &(class.make)(n, &dir));
        let (one, two) = (at(class.size), at(2 * class.size));
        let ratio = two.as_secs_f64() / one.as_secs_f64().max(1e-9);
        println!(
            "{:<46} {:>10} {:>8.1}ms {:>8.1}ms {:>7.2}  {}",
            class.name,
            class.size,
            one.as_secs_f64() * 1e3,
            two.as_secs_f64() * 1e3,
            ratio,
            if ratio <= 2.5 { "yes" } else { "no" }
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

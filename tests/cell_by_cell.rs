//! `remora run -v`: the per-cell diagnostic names every application that
//! ran cell by cell, with its position and why, and says so when none did.

use std::process::Command;

fn run_verbose(name: &str, program: &str) -> (bool, String, String) {
    run_verbose_with(name, program, &[])
}

/// `run_verbose` with arguments for the program's entry.
fn run_verbose_with(name: &str, program: &str, args: &[&str]) -> (bool, String, String) {
    let dir = std::env::temp_dir().join(format!("remora-cells-{}-{name}", std::process::id()));
    let file = dir.join(format!("{name}.remora"));
    if std::fs::create_dir_all(&dir).is_err() || std::fs::write(&file, program).is_err() {
        return (false, String::new(), "cannot write the program".into());
    }
    let out = Command::new(env!("CARGO_BIN_EXE_remora"))
        .env("XDG_CACHE_HOME", concat!(env!("CARGO_TARGET_TMPDIR"), "/cache"))
        // (The interpreter's report: the interpreter runs it.)
        .args(["run", "--engine", "interp", "-v"])
        .arg(&file)
        .args(args)
        .output();
    let _ = std::fs::remove_dir_all(&dir);
    match out {
        Ok(o) => (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        ),
        Err(e) => (false, String::new(), e.to_string()),
    }
}

#[test]
fn a_program_that_runs_array_at_a_time_says_so() {
    let (ok, out, err) = run_verbose(
        "batched",
        "(def (fun (horner (cs [Float $k]) (x Float) : Float)\n  (fold (fn ((acc Float) (c Float)) (f.+ c (f.* x acc))) 0.0 cs)))\n(horner [1.0 2.0 3.0] [0.0 1.0 2.0])\n",
    );
    assert!(ok, "{err}");
    assert_eq!(out, "[3.0 6.0 11.0]\n");
    assert_eq!(err, "remora: note: every application ran array-at-a-time\n");
}

#[test]
fn an_application_run_cell_by_cell_is_named_with_its_reason() {
    let (ok, out, err) = run_verbose(
        "fallback",
        "(def (val xs [1 2 3]))\n((fn ((n Int)) (sum (iota [n]))) xs)\n",
    );
    assert!(ok, "{err}");
    assert_eq!(out, "[0 1 3]\n");
    assert!(
        err.contains("fallback.remora:2:1: note: ran cell by cell (3 cells)"),
        "{err}"
    );
    assert!(
        err.contains(
            "the function's body has `unbox` (its cells' shapes may differ), which does not run batched"
        ),
        "{err}"
    );
}

#[test]
fn nothing_is_reported_for_a_program_that_does_not_check() {
    let (ok, _, err) = run_verbose("bad", "(+ 1 #t)\n");
    assert!(!ok);
    assert!(err.contains("error:"), "{err}");
    assert!(!err.contains("note:"), "{err}");
}

/// A lifted lambda whose intermediates are too large for the whole frame at
/// once (under a small atom limit) runs on smaller strips of it, still
/// array-at-a-time, instead of giving up to cell by cell.
#[test]
fn intermediates_too_large_for_the_whole_frame_run_in_smaller_strips() {
    let text = "((fn ((b Int)) (count (== (i-app iota/static [100]) b))) (i-app iota/static [64]))";
    let mut sources = remora_syntax::SourceMap::new();
    let parsed =
        remora_syntax::parse_expression(&mut sources, "<test>", text, remora_syntax::Dialect::Source);
    assert!(!parsed.has_errors());
    let checked = remora_check::check_expression(&parsed.value);
    assert!(!checked.has_errors());
    let Some(typed) = checked.value.as_ref() else {
        return;
    };
    // The [64 100] comparison is refused whole; strips of 8 rows fit.
    remora_interp::Interpreter::limit_atoms(1000);
    let mut interp = remora_interp::Interpreter::default();
    interp.log_cell_by_cell();
    let value = interp.eval(typed, &Default::default());
    remora_interp::Interpreter::limit_atoms(remora_interp::eval::MAX_ATOMS);
    let printed = value.map(|v| remora_value::print::to_string(&v));
    assert_eq!(printed.ok(), Some(format!("[{}]", vec!["1"; 64].join(" "))));
    assert!(interp.cell_by_cell().is_empty(), "{:?}", interp.cell_by_cell());
}

/// `unique`, `unique-counts`, `searchsorted` and the random numbers lifted
/// over frames, at the top level and inside a lifted lambda, run
/// array-at-a-time: none is reported as run cell by cell.
#[test]
fn search_and_random_names_run_array_at_a_time() {
    let program = "\
(unique [[3 1 3] [2 2 2] [6 5 4]])
(unique-counts [[1.5 1.5] [2.0 -1.0]])
(searchsorted [0.0 1.0 2.0] [[-1.0 0.5] [1.5 2.5]])
(searchsorted/right [[1 2] [10 20]] [[0 1 2 3] [15 25 5 10]])
((fn ((x Int)) (+ 1 (searchsorted [10 20 30] x))) [5 15 25 35])
((fn ((row [Int 3]) (v [Int 2])) (searchsorted row v)) [[1 2 3] [5 6 7]] [[0 3] [6 6]])
(random.int 42 (i-app iota/static [4]) 0 [1 2 3 4])
((fn ((i Int)) (searchsorted [0.25 0.5 0.75] (f.* (random.uniform 9 i) (f.abs (random.normal 9 i))))) (i-app iota/static [8]))
";
    let (ok, out, err) = run_verbose("search", program);
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), 8, "{out}");
    assert!(
        out.starts_with("[(box 2 [1 3]) (box 1 [2]) (box 3 [4 5 6])]\n"),
        "{out}"
    );
    assert_eq!(err, "remora: note: every application ran array-at-a-time\n");
}

#[test]
fn the_vocabulary_a_names_run_array_at_a_time_over_a_frame() {
    // Each lifted over a frame (inside a lambda, and at the top level).
    let program = "\
(def (fun (g (v [Float 3]) : Int) (+ (f.argmax v) (argmin (round v)))))
(g [[1.0 5.0 2.0] [7.0 0.0 1.0]])
(def (fun (h (m [Int 2 2]) : [Int 2 2]) (matmul m ((i-app transpose [1 0]) m))))
(h [[[1 2] [3 4]] [[0 1] [1 0]]])
(f.matmul [[[1.0 0.0] [0.0 1.0]] [[0.0 1.0] [1.0 0.0]]] [[1.0 2.0] [3.0 4.0]])
(def (fun (o (v [Int 2]) : [Int 2 2]) (outer + v v)))
(o [[1 2] [3 4]])
(def (fun (q (x Float) : [Float 3]) ((i-app linspace 3) x (f.* 2.0 x))))
(q [1.0 2.0])
(def (fun (r (v [Float 4]) : Float) (f.+ (f.mean v) (f.dot v v))))
(r [[1.0 2.0 3.0 4.0] [0.0 0.0 0.0 1.0]])
(def (fun (c (v [Int 3]) : Float) (mean (clip 0 5 (* (dot v v) v)))))
(c [[1 2 3] [4 5 6]])
(f.clip 0.0 1.0 [[-1.0 0.5] [2.0 0.25]])
((i-app transpose [2 0 1]) [[[[1 2] [3 4]] [[5 6] [7 8]]]])
";
    let (ok, out, err) = run_verbose("vocab-a", program);
    assert!(ok, "{err}");
    assert_eq!(
        out,
        "[1 1]\n[[[5 11] [11 25]] [[1 0] [0 1]]]\n[[[1.0 2.0] [3.0 4.0]] [[3.0 4.0] [1.0 2.0]]]\n\
         [[[2 3] [3 4]] [[6 7] [7 8]]]\n[[1.0 1.5 2.0] [2.0 3.0 4.0]]\n[32.5 1.25]\n[5.0 5.0]\n\
         [[0.0 0.5] [1.0 0.25]]\n[[[[1 3] [5 7]] [[2 4] [6 8]]]]\n"
    );
    assert_eq!(err, "remora: note: every application ran array-at-a-time\n");
}

/// The style matrix's 2-D gathers (benches/styles/gather2d), at a small
/// size: `index2d` at pairs computed in an `outer` of a lambda, and `nth`
/// then `index` in a lambda lifted over index matrices, each one gather.
#[test]
fn the_gather2d_benchmark_programs_run_array_at_a_time() {
    let image = "(f.* 0.5 (i->f (i-app iota/static [24 24])))";
    let mut outputs = Vec::new();
    for style in ["index2d", "nth-index"] {
        let path = format!(
            "{}/benches/styles/gather2d/{style}.remora",
            env!("CARGO_MANIFEST_DIR")
        );
        let program = std::fs::read_to_string(&path)
            .unwrap_or_default()
            .replace("{N}", "24");
        assert!(program.contains("(entry"), "cannot read {path}");
        let (ok, out, err) = run_verbose_with(style, &program, &[image]);
        assert!(ok, "{style}: {err}");
        assert_eq!(
            err, "remora: note: every application ran array-at-a-time\n",
            "{style}"
        );
        outputs.push(out);
    }
    // The same sheared image both ways: row (i + 3j) mod 24, column
    // (5i + j) mod 24 of the image, whose atom (r, c) is (24r + c) / 2.
    assert_eq!(outputs[0], outputs[1]);
    assert!(outputs[0].starts_with("[[0.0 36.5 73.0 "), "{}", outputs[0]);
}

/// The style matrix's workloads written from outside the tuned rows
/// (z-scores … bilinear resampling), every formulation at a small size:
/// each runs array-at-a-time, and the formulations that add in the same
/// order print the same.
#[test]
fn the_unseen_benchmark_programs_run_array_at_a_time() {
    let floats =
        |shape: &str| format!("(f.* 0.001 (i->f (mod (* 7919 (i-app iota/static [{shape}])) 1000)))");
    let (vector, matrix) = (floats("40"), floats("12 12"));
    let flags = "(bool->i (== 0 (mod (* 7 (i-app iota/static [40])) 5)))".to_string();
    /// A workload: its formulations, its sizes, its arguments, and
    /// whether every formulation prints the same.
    struct Workload<'a> {
        name: &'a str,
        styles: Vec<&'a str>,
        sizes: Vec<(&'a str, &'a str)>,
        args: Vec<String>,
        same: bool,
    }
    let w = |name, styles, sizes, args, same| Workload {
        name,
        styles,
        sizes,
        args,
        same,
    };
    let workloads = vec![
        w(
            "zscore",
            vec!["rowfun", "arrays", "transpose", "record-fold"],
            vec![("R", "6"), ("C", "10")],
            vec![floats("6 10")],
            false,
        ),
        w(
            "runmax",
            vec!["iscan", "lambda", "scan"],
            vec![("N", "40")],
            vec![vector.clone()],
            true,
        ),
        w(
            "cumprod",
            vec!["iscan", "lambda", "scan"],
            vec![("N", "40")],
            vec![vector.clone()],
            true,
        ),
        w(
            "sobel",
            vec!["windows", "shifts", "rotate"],
            vec![("N", "12")],
            vec![matrix.clone()],
            false,
        ),
        w(
            "grey",
            vec!["dot", "pixel", "planes"],
            vec![("N", "8")],
            vec![floats("8 8 3")],
            true,
        ),
        w(
            "rot90",
            vec!["reverse", "perm", "gather"],
            vec![("N", "12")],
            vec![matrix.clone()],
            true,
        ),
        w(
            "diff",
            vec!["drop", "rotate", "windows"],
            vec![("N", "40")],
            vec![vector.clone()],
            true,
        ),
        w(
            "onehot",
            vec!["outer", "lambda", "transpose"],
            vec![("N", "40"), ("K", "4")],
            vec![
                "(mod (* 7 (i-app iota/static [40])) 4)".to_string(),
                vector.clone(),
            ],
            false,
        ),
        w(
            "segsum",
            vec!["hist", "scan-ends", "segscan"],
            vec![("N", "40"), ("M", "8")],
            vec![flags, vector.clone()],
            false,
        ),
        w(
            "collatz",
            vec!["vec2", "record"],
            vec![("N", "30")],
            vec!["(+ 1 (i-app iota/static [30]))".to_string()],
            true,
        ),
        w(
            "slidemax",
            vec!["lambda", "transpose", "fold"],
            vec![("N", "40"), ("W", "5")],
            vec![vector.clone()],
            true,
        ),
        w(
            "bilinear",
            vec!["point", "separable"],
            vec![("N", "12"), ("M", "8")],
            vec![matrix.clone()],
            true,
        ),
    ];
    for Workload {
        name: workload,
        styles,
        sizes,
        args,
        same,
    } in workloads
    {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut outputs = Vec::new();
        for style in styles {
            let path = format!(
                "{}/benches/styles/{workload}/{style}.remora",
                env!("CARGO_MANIFEST_DIR")
            );
            let mut program = std::fs::read_to_string(&path).unwrap_or_default();
            for (k, v) in &sizes {
                let less = v.parse::<usize>().map_or(0, |n| n - 1).to_string();
                program = program
                    .replace(&format!("{{{k}-1}}"), &less)
                    .replace(&format!("{{{k}}}"), v);
            }
            assert!(program.contains("(entry"), "cannot read {path}");
            let name = format!("{workload}-{style}");
            let (ok, out, err) = run_verbose_with(&name, &program, &args);
            assert!(ok, "{name}: {err}");
            assert_eq!(
                err, "remora: note: every application ran array-at-a-time\n",
                "{name}"
            );
            outputs.push(out);
        }
        if same {
            assert!(
                outputs.iter().all(|o| *o == outputs[0]),
                "{workload}: {outputs:?}"
            );
        }
    }
}

//! The `remora` binary as a user meets it: stdout, stderr, exit status.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn remora(args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_remora"));
    cmd.env("XDG_CACHE_HOME", concat!(env!("CARGO_TARGET_TMPDIR"), "/cache"));
    output(cmd.args(args), stdin)
}

/// Runs `cmd` with `stdin` (or none) on its standard input: what it wrote
/// and how it ended (a failure to start said on its standard error).
fn output(cmd: &mut Command, stdin: Option<&str>) -> Output {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let Ok(mut child) = cmd.spawn() else {
        return Output {
            status: std::process::ExitStatus::default(),
            stdout: Vec::new(),
            stderr: format!("could not start {:?}", cmd.get_program()).into_bytes(),
        };
    };
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        let _ = pipe.write_all(text.as_bytes());
    }
    child.wait_with_output().unwrap_or_else(|e| Output {
        status: std::process::ExitStatus::default(),
        stdout: Vec::new(),
        stderr: e.to_string().into_bytes(),
    })
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn parse_expression_prints_the_desugared_tree() {
    let out = remora(&["parse", "-e", "[[1 2] [3 4]]"], None);
    assert!(out.status.success());
    assert_eq!(text(&out.stdout), "(array [2 2] 1 2 3 4)\n");
    assert!(out.stderr.is_empty());
}

#[test]
fn negative_literal_as_the_expression() {
    let out = remora(&["parse", "-e", "-7"], None);
    assert_eq!(text(&out.stdout), "-7\n");
}

#[test]
fn parse_error_is_positioned_on_stderr_with_status_1() {
    let out = remora(&["parse", "-e", "(+ 1"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = text(&out.stderr);
    assert!(
        err.starts_with("<cli>:1:5: error: unexpected end of input\n"),
        "{err}"
    );
    assert!(err.contains("1 | (+ 1\n"), "{err}");
    assert!(err.contains("expected `)`"), "{err}");
}

#[test]
fn parse_file_and_positional_file() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/hello.remora");
    let a = remora(&["parse", "-f", path], None);
    let b = remora(&["parse", path], None);
    assert!(a.status.success(), "{}", text(&a.stderr));
    assert_eq!(a.stdout, b.stdout);
    assert!(text(&a.stdout).starts_with("(def (fun (dot (xs (A Float [$n]))"));
}

#[test]
fn program_on_stdin() {
    let out = remora(&["parse"], Some("(def (val x 5))\n(entry (main) x)\n"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "(def (val x 5))\n(entry (main) x)\n");
}

#[test]
fn stdin_errors_are_named_cli() {
    let out = remora(&["parse"], Some("(def (val (x: Int) 5))"));
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).starts_with("<cli>:1:"), "{}", text(&out.stderr));
}

#[test]
fn missing_file_is_a_clear_error() {
    let out = remora(&["parse", "-f", "no/such/file.remora"], None);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.starts_with("remora: error: cannot read no/such/file.remora"),
        "{err}"
    );
}

#[test]
fn expression_and_file_are_exclusive() {
    let out = remora(&["parse", "-e", "1", "-f", "x.remora"], None);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn check_prints_the_type_of_an_expression() {
    let out = remora(&["check", "-e", "(+ [1 2] [[1 2 3] [4 5 6]])"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "[Int 2 3]\n");
}

#[test]
fn check_prints_each_definition_of_a_program() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/hello.remora");
    let out = remora(&["check", path], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "dot : (Π $n (-> [Float $n] (-> [Float $n] Float)))\nmain : [Float 2]\n"
    );
}

#[test]
fn check_errors_are_positioned_with_status_1() {
    let out = remora(&["check", "-e", "(+ #t 5)"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(text(&out.stderr).starts_with("<cli>:1:1: error: Ill-typed application:\n"));
}

#[test]
fn run_prints_the_value_of_main() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/hello.remora");
    let out = remora(&["run", path], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "[3.0 7.0]\n");
}

#[test]
fn interpret_takes_entry_arguments_after_dashes() {
    let program = "(entry (main (x Int) (y Int)) (+ x (* 100 y)))";
    let out = remora(&["interpret", "--", "7", "-3"], Some(program));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "-293\n");
    let wrong = remora(&["interpret", "--", "7", "[1 2]"], Some(program));
    assert_eq!(wrong.status.code(), Some(1));
    assert!(
        text(&wrong.stderr).contains("argument 2 of main has type [Int 2]"),
        "{}",
        text(&wrong.stderr)
    );
}

#[test]
fn run_time_errors_are_positioned() {
    let out = remora(&["interpret", "-e", "(+ 1 (/ 1 0))"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).starts_with("<cli>:1:6: error: divide by zero"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn test_command_closes_with_the_counts() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/check/basics.remora");
    let out = remora(&["test", dir], None);
    assert!(out.status.success(), "{}", text(&out.stdout));
    assert!(text(&out.stdout).trim_end().ends_with(" passed, 0 failed"));
}

#[test]
fn repl_reads_until_brackets_balance_and_exits_on_end_of_input() {
    let input = "(+ 1 2)\n(def (val x [1 2]))\n(+ x\n  10)\n:type x\n";
    let out = remora(&["repl"], Some(input));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "3\n[11 12]\n[Int 2]\n");
}

#[test]
fn elaborate_writes_out_what_inference_decided() {
    let out = remora(&["elaborate", "-e", "(append [1 2] [3])"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "((i-app (i-app (i-app (t-app append Int) 2) 1) []) (array [2] 1 2) (array [1] 3))\n"
    );
    // A reranked operator is written as its η-expansion over the rows.
    let out = remora(&["elaborate", "-e", "(reduce + [[1 2] [3 4]])"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "((i-app (i-app (t-app reduce Int) 1) [2]) (λ ((x_0 (A Int [2]))) (λ ((x_1 (A Int [2]))) (+ x_0 x_1))) (array [2 2] 1 2 3 4))\n"
    );
}

#[test]
fn repl_elab_writes_out_an_expression() {
    let out = remora(&["repl"], Some(":elab (head [[1 2] [3 4]])\n"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "((i-app (i-app (t-app head Int) 1) [2]) (array [2 2] 1 2 3 4))\n"
    );
}

/// A program file for one test, in a scratch directory of its own.
fn scratch_file(test: &str, name: &str, contents: &[u8]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("remora-cli-{}-{test}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(name);
    let written = std::fs::write(&path, contents);
    assert!(written.is_ok(), "{written:?}");
    path
}

const SCALE: &[u8] = b"(entry (main (xs [Float 2 2]) (k Int)) (f.* (i->f k) xs))\n";

#[test]
fn futhark_data_in_and_out() {
    let program = scratch_file("futhark", "scale.remora", SCALE);
    let data = scratch_file("futhark", "in.data", b"[[1.0f32, 2.0f32], [3.0f32, 4.5f32]] 2i64");
    let p = program.to_string_lossy();
    let d = data.to_string_lossy();
    let out = remora(&["run", &p, "--input", &d], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "[[2.0 4.0] [6.0 9.0]]\n");
    let out = remora(&["run", &p, "--input", &d, "--format", "futhark"], None);
    assert_eq!(text(&out.stdout), "[[2.0f32, 4.0f32], [6.0f32, 9.0f32]]\n");
    // Without ARGs or --input, the data comes from standard input.
    let out = remora(&["run", &p], Some("[[1.0f32, 2.0f32], [3.0f32, 4.0f32]]\n3i64"));
    assert_eq!(
        text(&out.stdout),
        "[[3.0 6.0] [9.0 12.0]]\n",
        "{}",
        text(&out.stderr)
    );
    // Binary out, read back as input to a program that sums it.
    let out = remora(&["run", &p, "--input", &d, "--format", "futhark-binary"], None);
    assert!(out.stdout.starts_with(b"b\x02\x02 f32"), "{:?}", out.stdout);
    let bin = scratch_file("futhark", "out.bin", &out.stdout);
    let sum = scratch_file(
        "futhark",
        "sum.remora",
        b"(entry (main (xs [Float 2 2])) (f.sum xs))\n",
    );
    let out = remora(
        &["run", &sum.to_string_lossy(), "--input", &bin.to_string_lossy()],
        None,
    );
    assert_eq!(text(&out.stdout), "21.0\n", "{}", text(&out.stderr));
}

#[test]
fn data_of_the_wrong_type_is_an_error() {
    let program = scratch_file("wrong", "scale.remora", SCALE);
    let data = scratch_file("wrong", "in.data", b"[1i64, 2i64] 2i64");
    let out = remora(
        &[
            "run",
            &program.to_string_lossy(),
            "--input",
            &data.to_string_lossy(),
        ],
        None,
    );
    assert!(!out.status.success());
    // (Placed at the entry: the value came from a file, not the program.)
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            ":1:1: error: argument 1 of main has type [Int 2], but the parameter `xs` has type [Float 2 2]\n"
        ),
        "{stderr}"
    );
    let bad = scratch_file("wrong", "bad.npy", b"\x93NUMPY\x01\x00");
    let out = remora(
        &[
            "run",
            &program.to_string_lossy(),
            "--input",
            &bad.to_string_lossy(),
        ],
        None,
    );
    assert!(
        text(&out.stderr).contains("bad.npy: truncated header"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn an_expression_is_a_scope_for_automatic_unboxes() {
    // The unbox closes inside the expression…
    let out = remora(&["interpret", "-e", "(reduce + (range 5))"], None);
    assert_eq!(text(&out.stdout), "10\n", "{}", text(&out.stderr));
    // …or, where the result's type holds the witness, the result is boxed
    // again, as at the top of a program…
    let out = remora(&["interpret", "-e", "(reverse (range 3))"], None);
    assert_eq!(text(&out.stdout), "(box 3 [2 1 0])\n", "{}", text(&out.stderr));
    // …but a function's body must close its own unboxes.
    let out = remora(&["interpret", "-e", "(fn ((n Int)) (reverse (range n)))"], None);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).starts_with("<cli>:1:24: error: a box's witness would escape its automatic unbox"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn run_options_may_follow_the_arguments() {
    let program = scratch_file("after", "sub.remora", b"(entry (main (x Int) (y Int)) (- x y))\n");
    let p = program.to_string_lossy();
    let out = remora(&["run", &p, "-1", "-5", "--format", "futhark"], None);
    assert_eq!(text(&out.stdout), "4i64\n", "{}", text(&out.stderr));
    let out = remora(&["run", &p, "5", "--format=futhark", "--", "-3"], None);
    assert_eq!(text(&out.stdout), "8i64\n", "{}", text(&out.stderr));
    let data = scratch_file("after", "y.data", b"2i64");
    let out = remora(&["run", &p, "5", "--input", &data.to_string_lossy()], None);
    assert_eq!(text(&out.stdout), "3\n", "{}", text(&out.stderr));
}

#[test]
fn a_box_is_written_as_its_contents() {
    let program = scratch_file(
        "box",
        "filt.remora",
        b"(entry (main (xs [Int 4])) (filter (> xs 1) xs))\n",
    );
    let p = program.to_string_lossy();
    let out = remora(&["run", &p, "[1 2 3 4]"], None);
    assert_eq!(text(&out.stdout), "(box 3 [2 3 4])\n", "{}", text(&out.stderr));
    let out = remora(&["run", &p, "[1 2 3 4]", "--format", "futhark"], None);
    assert_eq!(text(&out.stdout), "[2i64, 3i64, 4i64]\n", "{}", text(&out.stderr));
}

#[test]
fn elaborated_programs_with_records_and_empty_arrays_run() {
    let source = b"(def (val r {(x [] 1) (y [2] [2 3])}))\n\
                   (entry (main) (+ (field r x) (reduce/zero + 0 (append (field r y) (array [0] Int)))))\n";
    let program = scratch_file("elab", "rec.remora", source);
    let out = remora(&["elaborate", &program.to_string_lossy()], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let elaborated = scratch_file("elab", "rec-elaborated.remora", &out.stdout);
    let out = remora(&["run", &elaborated.to_string_lossy()], None);
    assert_eq!(text(&out.stdout), "6\n", "{}", text(&out.stderr));
}

#[test]
fn elaborate_prints_the_differentiated_program_which_runs() {
    let source = b"(def (fun (sq (x Float)) (f.* x x)))\n((grad sq) [1.0 2.0 -3.0])\n(jvp sq 3.0 2.0)\n";
    let program = scratch_file("elab-ad", "ad.remora", source);
    let out = remora(&["elaborate", &program.to_string_lossy()], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let elaborated = text(&out.stdout);
    // No derivative form is left: each is its derivative program.
    for form in ["grad", "jvp", "vjp"] {
        assert!(!elaborated.contains(&format!("({form} ")), "{elaborated}");
    }
    assert!(elaborated.contains('∂'), "{elaborated}");
    let written = scratch_file("elab-ad", "ad-elaborated.remora", &out.stdout);
    let out = remora(&["run", &written.to_string_lossy()], None);
    assert_eq!(
        text(&out.stdout),
        "[2.0 4.0 -6.0]\n12.0\n",
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_script_prints_each_value_before_a_later_failure() {
    let program = scratch_file("script", "s.remora", b"(+ 1 2)\n[1 2]\n(/ 1 0)\n(+ 3 4)\n");
    let out = remora(&["run", &program.to_string_lossy()], None);
    assert!(!out.status.success());
    assert_eq!(text(&out.stdout), "3\n[1 2]\n");
    assert!(
        text(&out.stderr).contains("error: divide by zero"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn repl_forgets_a_definition_that_fails_at_run_time() {
    let input = "(def (val x [1 2]))\n\
                 (def (val bad (/ 1 0)))\n\
                 (+ x 1)\n\
                 bad\n\
                 (def (fun (inv (n Int) : Int) (/ 1 n)))\n\
                 (def (val bad2 (inv (- 1 1))))\n\
                 (+ 1 2)\n\
                 (def (val y (+ x 10)))\n\
                 y\n";
    let out = remora(&["repl"], Some(input));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    // The failure is reported where it happened, and nothing of it is kept.
    assert!(
        stdout.starts_with("<repl>:1:15: error: divide by zero\n"),
        "{stdout}"
    );
    assert!(stdout.contains("[2 3]\n"), "{stdout}");
    assert!(
        stdout.contains("<repl>:1:1: error: unbound variable `bad`\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("<repl>:1:31: error: divide by zero\n"),
        "{stdout}"
    );
    assert!(stdout.ends_with("3\n[11 12]\n"), "{stdout}");
    // An input fails as a whole: `ok`, entered with a failing definition, is not kept.
    let out = remora(
        &["repl"],
        Some("(def (val ok 5)) (def (val no (/ 1 0)))\n(+ 1 2)\nok\n"),
    );
    let stdout = text(&out.stdout);
    assert!(stdout.contains("error: divide by zero"), "{stdout}");
    assert!(
        stdout.ends_with("3\n<repl>:1:1: error: unbound variable `ok`\n  |\n1 | ok\n  | ^^\n"),
        "{stdout}"
    );
}

#[test]
fn repl_evaluates_a_definition_once() {
    // `trace` writes on stderr each time the definition is evaluated.
    let input = "(def (val t (trace 42 5)))\n\
                 (+ t 1)\n(+ t 2)\n(def (val u (* t 2)))\n(+ u 1)\n:type t\n(+ t 3)\n";
    let out = remora(&["repl"], Some(input));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "6\n7\n11\nInt\n8\n");
    assert_eq!(text(&out.stderr), "42\n");
}

#[test]
fn repl_a_slow_definition_is_not_run_again_by_later_inputs() {
    let slow = "(def (val s (while (fn ((x Int)) (< x 100000)) (fn ((x Int)) (+ x 1)) 0)))\n";
    let timed = |quick: usize| {
        let input = format!("{slow}{}", "(+ s 1)\n".repeat(quick));
        let start = std::time::Instant::now();
        let out = remora(&["repl"], Some(&input));
        let elapsed = start.elapsed();
        assert_eq!(
            text(&out.stdout),
            "100001\n".repeat(quick),
            "{}",
            text(&out.stderr)
        );
        elapsed
    };
    let one = timed(1);
    let six = timed(6);
    // Evaluating the definition for every input would take about six times as long.
    assert!(
        six < one * 3,
        "1 input after the definition: {one:?}; 6 inputs: {six:?}"
    );
}

#[test]
fn repl_error_positions_count_the_lines_of_the_input_being_read() {
    let input = "(def (val a\n  1))\n\
                 (def (fun (f (x Int) : Int)\n  (+ x\n     a)))\n\
                 (f\n  1)\n\
                 (+ (f 1)\n   nope)\n\
                 :type (+ 1\n        #t)\n\
                 (def (val z\n   (/ 1\n      0)))\n";
    let out = remora(&["repl"], Some(input));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("2\n"), "{stdout}");
    assert!(
        stdout.contains("<repl>:2:4: error: unbound variable `nope`\n  |\n2 |    nope)\n"),
        "{stdout}"
    );
    assert!(stdout.contains("<repl>:1:7: error: "), "{stdout}");
    assert!(stdout.contains("<repl>:2:4: error: divide by zero\n"), "{stdout}");
}

#[test]
fn repl_load_adds_a_files_declarations_evaluated_once() {
    let lib = scratch_file(
        "repl-load",
        "lib.remora",
        b"(def (val k (trace 7 10)))\n(def (fun (g (x Int) : Int) (+ x k)))\n",
    );
    let input = format!(":load {}\n(g 1)\n(g 2)\n", lib.to_string_lossy());
    let out = remora(&["repl"], Some(&input));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "11\n12\n");
    assert_eq!(text(&out.stderr), "7\n");
}

/// A fresh directory for one test's files.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("remora-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::create_dir_all(dir.join("sub"));
    dir
}

#[test]
fn a_sandbox_confines_imports_and_refuses_files() {
    let dir = scratch("sandbox");
    let path = |f: &str| dir.join(f).to_string_lossy().into_owned();
    let _ = std::fs::write(dir.join("sub/lib.remora"), "(def (val k 40))\n");
    let _ = std::fs::write(dir.join("ok.remora"), "(import \"sub/lib.remora\")\n(+ k 2)\n");
    let _ = std::fs::write(dir.join("out.remora"), "(import \"/etc/passwd\")\n(+ 1 2)\n");
    let _ = std::fs::write(dir.join("up.remora"), "(import \"../x.remora\")\n");
    let _ = std::fs::write(
        dir.join("rf.remora"),
        "(@read-file (Int) (_ []) \"sub/lib.remora\")\n",
    );
    let out = remora(&["run", "--sandbox", &path("ok.remora")], None);
    assert_eq!(text(&out.stdout), "42\n", "{}", text(&out.stderr));
    for (file, says) in [
        ("out.remora", "outside the program's directory"),
        ("up.remora", "outside the program's directory"),
        ("rf.remora", "`read-file` is not allowed in a sandbox"),
    ] {
        let out = remora(&["run", "--sandbox", &path(file)], None);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{file}: {err}");
        assert!(err.contains(says), "{file}: {err}");
        // Nothing of the file outside is quoted.
        assert!(!err.contains("root:"), "{file}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn everything_after_a_double_dash_is_an_argument() {
    let dir = scratch("dashes");
    let program = dir.join("e.remora");
    let _ = std::fs::write(&program, "(entry (main (x Int) : Int) (- 0 x))\n");
    let program = program.to_string_lossy().into_owned();
    let out = remora(&["run", &program, "--", "-5"], None);
    assert_eq!(text(&out.stdout), "5\n", "{}", text(&out.stderr));
    // `--output x` after `--` is an argument (which does not parse as
    // an expression), not an option: no file `x` is written.
    let x = dir.join("x");
    let out = remora(&["run", &program, "--", "--output", &x.to_string_lossy()], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(!x.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_repl_line_that_is_not_utf8_is_reported_and_the_session_goes_on() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_remora"));
    cmd.env("XDG_CACHE_HOME", concat!(env!("CARGO_TARGET_TMPDIR"), "/cache"));
    cmd.arg("repl")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let Ok(mut child) = cmd.spawn() else {
        return;
    };
    if let Some(mut pipe) = child.stdin.take() {
        let _ = pipe.write_all(b"(+ 1 2)\n\xff\xfe\n(+ 3 4)\n");
    }
    let Ok(out) = child.wait_with_output() else {
        return;
    };
    assert_eq!(text(&out.stdout), "3\n7\n");
    assert!(text(&out.stderr).contains("not UTF-8"), "{}", text(&out.stderr));
}

#[test]
fn an_output_that_cannot_be_written_leaves_the_old_file() {
    let dir = scratch("output");
    let program = dir.join("big.remora");
    let _ = std::fs::write(
        &program,
        "(entry (main : [Int 100000]) (i-app iota/static [100000]))\n",
    );
    let target = dir.join("out.txt");
    let _ = std::fs::write(&target, "old contents\n");
    // A file-size limit of 100 blocks (the result is larger).
    let out = Command::new("sh")
        .env("XDG_CACHE_HOME", concat!(env!("CARGO_TARGET_TMPDIR"), "/cache"))
        .arg("-c")
        .arg("ulimit -f 100 && exec \"$0\" run \"$1\" --output \"$2\"")
        .arg(env!("CARGO_BIN_EXE_remora"))
        .arg(&program)
        .arg(&target)
        .output();
    let Ok(out) = out else {
        return;
    };
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("cannot write"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&target).ok().as_deref(),
        Some("old contents\n")
    );
    let leftovers = std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
    assert_eq!(leftovers, 3, "no partial file is left beside it");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compile_dumps_explicit_maps() {
    let out = remora(&["compile", "--dump", "maps", "-e", "(+ 1 [1 2 3])"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "(map [3] ((x.0 Int (array [3] 1 2 3)))\n  (+ 1 x.0))\n"
    );
    // A program that does not check: its diagnostics, status 1.
    let out = remora(&["compile", "--dump", "maps", "-e", "(+ 1 #t)"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("error:"));
    // An unknown level is command-line misuse.
    let out = remora(&["compile", "--dump", "nonsense", "-e", "1"], None);
    assert_eq!(out.status.code(), Some(2));
}

/// The MLP gradient benchmark (the weights a record, bias added by
/// `rerank`, a row loss lifted over the batch), at small sizes, reaches the
/// compiler's loop level: its reverse pass maps a record-valued cell over a
/// map the compiler first left delayed.
#[test]
fn the_mlp_gradient_benchmark_compiles() {
    let source = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/benches/ad/mlp_grad.remora"))
        .unwrap_or_default();
    let small = [("{B}", "4"), ("{D}", "6"), ("{H}", "5"), ("{K}", "3")]
        .iter()
        .fold(source, |s, (k, v)| s.replace(k, v));
    assert!(small.contains("(grad loss)"));
    let dir = std::env::temp_dir().join(format!("remora-mlp-compiles-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let file = dir.join("mlp.remora");
    assert!(std::fs::write(&file, small).is_ok());
    let out = remora(&["compile", "--dump", "loops", &file.to_string_lossy()], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_compiled_engine_runs_an_entry_or_says_why_not() {
    if remora::native::c_compiler().is_none() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("remora-cli-compiled-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let file = dir.join("norm.remora");
    let _ = std::fs::write(
        &file,
        "(entry (main (x [Float $n])) (f.sqrt (f.sum (f.* x x))))\n",
    );
    let path = file.to_string_lossy().into_owned();
    let out = remora(&["run", "--engine", "compiled", "-v", &path, "[3.0 4.0]"], None);
    assert_eq!(text(&out.stdout), "5.0\n");
    assert!(
        text(&out.stderr).contains("ran compiled"),
        "{}",
        text(&out.stderr)
    );
    // A run-time error: the interpreter's positioned message.
    let _ = std::fs::write(&file, "(entry (main (x [Int $n])) (/ 10 x))\n");
    let out = remora(&["run", "--engine", "compiled", &path, "[2 0]"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("norm.remora:1:"),
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stderr).contains("divide by zero"));
    // What does not compile yet (a parameter of any rank): an error
    // under `compiled`, the interpreter under `auto`.
    let _ = std::fs::write(&file, "(entry (main (x [Int $n @s])) (length x))\n");
    let out = remora(&["run", "--engine", "compiled", &path, "[2 0 5]"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("cannot compile this yet"));
    let out = remora(&["run", "--engine", "auto", "-v", &path, "[2 0 5]"], None);
    assert_eq!(text(&out.stdout), "3\n");
    assert!(text(&out.stderr).contains("ran on the interpreter"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn remora_test_compares_the_compiled_engine() {
    if remora::native::c_compiler().is_none() {
        return;
    }
    let out = remora(
        &["test", "--engine", "compiled", "examples/convolution.remora"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains("compiled engine: 1 of 1 run cases compiled"),
        "{}",
        text(&out.stdout)
    );
    // A case that does not compile yet is listed under its reason, with
    // its test block's line.
    let dir = std::env::temp_dir().join(format!("remora-test-uncompiled-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let file = dir.join("anyrank.remora");
    let _ = std::fs::write(
        &file,
        ";;; case anyrank\n(entry (main (x [Int $n @s])) (length x))\n;; ==\n;; input { [2 0 5] }\n;; output { 3 }\n",
    );
    let out = remora(&["test", "--engine", "compiled", &file.to_string_lossy()], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let listed = text(&out.stdout);
    assert!(
        listed.contains("compiled engine: 0 of 1 run cases compiled"),
        "{listed}"
    );
    assert!(listed.contains("1  an entry parameter of any rank"), "{listed}");
    assert!(listed.contains("anyrank.remora:3 (the test block)"), "{listed}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_compiled_engine_prints_record_results_as_the_interpreter_does() {
    if remora::native::c_compiler().is_none() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("remora-cli-compiled-records-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let file = dir.join("records.remora");
    // A record, a [2 2] frame of records with a [2] field, a loop's record
    // state with a Bool field, a view of records (reversed), and a box
    // holding a record: one output per field, made records again.
    let program = "{(a [] 1) (b [2] [2.5 3.0])}\n\
        ((fn ((x Int)) {(a [] x) (v [2] [x x])}) [[1 2] [3 4]])\n\
        (iterate 2 (fn ((r {(a Int) (b Float) (c Bool)})) {(a [] (+ 1 (field r a))) (b [] (f.* 2.0 (field r b))) (c [] (not (field r c)))}) {(a [] 0) (b [] 1.5) (c [] #t)})\n\
        (reverse {(a [] [1 2]) (b [] [#t #f])})\n\
        (box {(a [] 1)})\n";
    let _ = std::fs::write(&file, program);
    let path = file.to_string_lossy().into_owned();
    let compiled = remora(&["run", "--engine", "compiled", "-v", &path], None);
    let interp = remora(&["run", &path], None);
    assert!(
        text(&compiled.stderr).contains("ran compiled"),
        "{}",
        text(&compiled.stderr)
    );
    assert_eq!(text(&compiled.stdout), text(&interp.stdout));
    assert_eq!(
        text(&compiled.stdout),
        "{a  =  1, b  =  [2.5 3.0]}\n\
         [[{a  =  1, v  =  [1 1]} {a  =  2, v  =  [2 2]}] [{a  =  3, v  =  [3 3]} {a  =  4, v  =  [4 4]}]]\n\
         {a  =  2, b  =  6.0, c  =  #t}\n\
         [{a  =  2, b  =  #f} {a  =  1, b  =  #t}]\n\
         (box [] {a  =  1})\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_fused_engine_prints_what_the_interpreter_prints() {
    let dir = std::env::temp_dir().join(format!("remora-cli-fused-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let file = dir.join("chain.remora");
    let program =
        "(def (val a [1.0 2.0 3.0]))\n(trace 7 (f.+ (f.* a a) (f.- a 1.0)))\n(/ 1 (- 3 (length a)))\n";
    let _ = std::fs::write(&file, program);
    let path = file.to_string_lossy().into_owned();
    let interp = remora(&["run", &path], None);
    let fused = remora(&["run", "--engine", "fused", &path], None);
    // A traced value, then a positioned division by zero: the same on
    // both.
    assert_eq!(interp.status.code(), Some(1));
    assert_eq!(fused.status.code(), Some(1));
    assert_eq!(text(&interp.stdout), text(&fused.stdout));
    assert_eq!(text(&interp.stderr), text(&fused.stderr));
    assert!(
        text(&fused.stderr).contains(":3:1: error:"),
        "{}",
        text(&fused.stderr)
    );
    // `trace` wrote its line once, though the fused run was given up.
    assert_eq!(
        text(&fused.stderr).matches("7\n").count(),
        1,
        "{}",
        text(&fused.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `.npy` file (format 1.0) of a float32 vector.
fn npy_f32(values: &[f32]) -> Vec<u8> {
    let mut header = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}",
        values.len()
    );
    // Magic, version and length take 10 bytes; the header ends in a newline
    // and pads the whole to a multiple of 64.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

#[test]
fn an_entry_of_any_size_runs_on_inputs_of_any_length() {
    let program = scratch_file(
        "sized",
        "mean.remora",
        b"(entry (main (xs [Float $n])) (f./ (f.sum xs) (i->f (i-app reify-dim $n))))\n",
    );
    let p = program.to_string_lossy();
    for (values, mean) in [
        (vec![1.0f32, 2.0, 3.0], "2.0"),
        (vec![10.0; 7], "10.0"),
        ((0..1000).map(|i| i as f32).collect(), "499.5"),
    ] {
        let data = scratch_file("sized", &format!("xs{}.npy", values.len()), &npy_f32(&values));
        let out = remora(&["run", &p, "--input", &data.to_string_lossy()], None);
        assert_eq!(text(&out.stdout), format!("{mean}\n"), "{}", text(&out.stderr));
    }
    // A shape the parameter cannot take is refused from the header.
    let matrix = scratch_file("sized", "m.data", b"[[1.0f32, 2.0f32]]");
    let out = remora(&["run", &p, "--input", &matrix.to_string_lossy()], None);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr)
            .contains("argument 1 of main has type [Float 1 2], but the parameter `xs` has type [Float $n]"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_repl_session_with_help_types_definitions_and_an_error_then_recovery() {
    let input = ":help\n\
                 :t [1 2]\n\
                 (def (val xs [1 2 3]))\n\
                 (def (fun (double (x Int) : Int)\n  (* 2 x)))\n\
                 :t (double xs)\n\
                 (double #t)\n\
                 (+ xs nope)\n\
                 :nope\n\
                 (double xs)\n\
                 :q\n\
                 (+ 1 1)\n";
    let out = remora(&["repl"], Some(input));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    // :help lists every command, with its short form, and how to write things.
    for line in [
        ":type EXPR, :t EXPR",
        ":elab EXPR",
        ":load FILE",
        ":help, :h",
        ":quit, :q",
    ] {
        assert!(stdout.contains(line), "{line} not in:\n{stdout}");
    }
    assert!(stdout.contains("(def (val xs [1 2 3]))"), "{stdout}");
    let after_help = stdout
        .split_once("kept between sessions.\n")
        .map(|(_, rest)| rest)
        .unwrap_or_default();
    let mut rest = after_help.lines();
    assert_eq!(rest.next(), Some("[Int 2]"), "{stdout}");
    assert_eq!(rest.next(), Some("[Int 3]"), "{stdout}");
    assert_eq!(
        rest.next(),
        Some("<repl>:1:1: error: Ill-typed application:"),
        "{stdout}"
    );
    assert!(
        after_help.contains("<repl>:1:7: error: unbound variable `nope`\n"),
        "{stdout}"
    );
    assert!(
        after_help.contains("remora: error: no command `:nope` (:help lists the commands)\n"),
        "{stdout}"
    );
    // After the errors the session goes on with what it had; `:q` leaves
    // (the input after it is not read).
    assert!(after_help.ends_with("[2 4 6]\n"), "{stdout}");
}

#[test]
fn repl_completion_offers_commands_and_names() {
    let names: Vec<String> = ["reduce", "reverse", "rotate", "my-sum"]
        .iter()
        .map(|n| n.to_string())
        .collect();
    let (start, found) = remora::repl::completions("(re", 3, &names);
    assert_eq!(
        (start, found),
        (1, vec!["reduce".to_string(), "reverse".to_string()])
    );
    let (start, found) = remora::repl::completions("(+ 1 [my", 8, &names);
    assert_eq!((start, found), (6, vec!["my-sum".to_string()]));
    let (start, found) = remora::repl::completions("  :t", 4, &names);
    assert_eq!((start, found), (2, vec![":type".to_string()]));
    // A command only at the start of the input; nothing for an empty word.
    assert!(remora::repl::completions("(f :t", 5, &names).1.is_empty());
    assert!(remora::repl::completions("(f ", 3, &names).1.is_empty());
}

#[test]
fn repl_history_lives_in_the_state_directory() {
    use remora::repl::history_path;
    use std::path::PathBuf;
    assert_eq!(
        history_path(Some("/s".into()), Some("/h".into())),
        Some(PathBuf::from("/s/remora/history"))
    );
    assert_eq!(
        history_path(None, Some("/h".into())),
        Some(PathBuf::from("/h/.local/state/remora/history"))
    );
    // A relative XDG_STATE_HOME is ignored (the XDG specification).
    assert_eq!(
        history_path(Some("rel".into()), Some("/h".into())),
        Some(PathBuf::from("/h/.local/state/remora/history"))
    );
    assert_eq!(history_path(None, None), None);
}

/// `remora ARGS` on a pseudo-terminal, as a person at a terminal meets it
/// (for the REPL, the line editor: Tab completion, the history file). All
/// the keys are queued before remora starts, so that no reply to the line
/// editor's cursor query can arrive late and be read as a key. What the
/// terminal showed, and whether remora exited in time.
#[cfg(unix)]
fn on_a_terminal(args: &[&str], keys: &str, state: &std::path::Path) -> (String, bool) {
    use std::io::Read;
    let size = nix::pty::Winsize {
        ws_row: 24,
        ws_col: 100,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = match nix::pty::openpty(Some(&size), None) {
        Ok(p) => p,
        Err(e) => return (format!("no pseudo-terminal: {e}"), false),
    };
    let mut master = std::fs::File::from(pty.master);
    let queued = master.write_all(keys.as_bytes());
    assert!(queued.is_ok(), "{queued:?}");
    let slave = std::fs::File::from(pty.slave);
    let (Ok(i), Ok(o), Ok(e)) = (slave.try_clone(), slave.try_clone(), slave.try_clone()) else {
        return ("cannot share the terminal".into(), false);
    };
    let child = Command::new(env!("CARGO_BIN_EXE_remora"))
        .env("XDG_CACHE_HOME", concat!(env!("CARGO_TARGET_TMPDIR"), "/cache"))
        .args(args)
        .env("TERM", "xterm")
        .env("XDG_STATE_HOME", state)
        .stdin(i)
        .stdout(o)
        .stderr(e)
        .spawn();
    drop(slave);
    let Ok(mut child) = child else {
        return ("could not start remora".into(), false);
    };
    // The terminal's output, read as it comes (a full terminal would stop
    // the REPL); the read ends when the REPL has closed the terminal.
    let reader = master.try_clone();
    let (sender, shown) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut out = Vec::new();
        if let Ok(mut r) = reader {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = r.read(&mut buf) {
                out.extend_from_slice(&buf[..n]);
            }
        }
        let _ = sender.send(out);
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut exited = false;
    while std::time::Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            exited = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if !exited {
        let _ = child.kill();
        let _ = child.wait();
    }
    drop(master);
    let out = shown
        .recv_timeout(std::time::Duration::from_secs(10))
        .unwrap_or_default();
    (text(&out), exited)
}

#[cfg(unix)]
#[test]
fn repl_on_a_terminal_completes_names_and_keeps_its_history() {
    let state = scratch("repl-terminal");
    // A defined name and a command completed by Tab.
    let (shown, exited) = on_a_terminal(
        &["repl"],
        "(def (val a-long-name 20))\n(+ a-long\t 1)\n:he\t\n(rever\t [1 2 3])\n:q\n",
        &state,
    );
    assert!(exited, "the REPL did not leave on :q:\n{shown}");
    // (The terminal ends each line with a carriage return and a newline.)
    assert!(shown.contains("\n21\r\n"), "{shown}");
    assert!(shown.contains(":type EXPR, :t EXPR"), "{shown}");
    assert!(shown.contains("\n[3 2 1]\r\n"), "{shown}");
    let history = std::fs::read_to_string(state.join("remora/history")).unwrap_or_default();
    assert!(history.contains("(def (val a-long-name 20))"), "{history}");
    assert!(history.contains("(+ a-long-name 1)"), "{history}");
    // A later session finds the inputs again: five times Up recalls the
    // definition (before `(+ a-long-name 1)`, `:help`, `(reverse …)`, `:q`).
    let (shown, exited) = on_a_terminal(
        &["repl"],
        "\x1b[A\x1b[A\x1b[A\x1b[A\x1b[A\n(+ a-long-name 2)\n:q\n",
        &state,
    );
    assert!(exited, "{shown}");
    assert!(shown.contains("\n22\r\n"), "{shown}");
    // A history that cannot be written is done without.
    let blocked = state.join("file");
    let _ = std::fs::write(&blocked, "not a directory");
    let (shown, exited) = on_a_terminal(&["repl"], "(+ 1 2)\n:q\n", &blocked);
    assert!(exited, "{shown}");
    assert!(shown.contains("\n3\r\n"), "{shown}");
}

#[test]
fn a_failing_test_names_its_block_input_values_and_first_difference() {
    let dir = scratch("test-failing");
    let file = dir.join("failing.remora");
    let cases = ";;; case add\n\
                 ;; ==\n\
                 ;; input { 2 3 }\n\
                 ;; output { 5 }\n\
                 ;; input { 1 1 }\n\
                 ;; output { 3 }\n\
                 (entry (main (x Int) (y Int)) (+ x y))\n\
                 \n\
                 ;;; case matrix\n\
                 ;; ==\n\
                 ;; output { [[1 2] [3 5]] }\n\
                 (+ [[0 1] [2 3]] 1)\n\
                 \n\
                 ;;; case shapes\n\
                 ;; ==\n\
                 ;; output { [1 2 3] }\n\
                 [1 2]\n\
                 \n\
                 ;;; case error\n\
                 ;; ==\n\
                 ;; error: nope\n\
                 (/ 1 0)\n";
    let written = std::fs::write(&file, cases);
    assert!(written.is_ok(), "{written:?}");
    let out = remora(&["test", &file.to_string_lossy()], None);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let shown = file.to_string_lossy();
    // The second run of `add`: the block's line, the program, the input,
    // the values, a caret under the first difference.
    let add = format!(
        "FAIL {shown}:2: case `add`, run 2 of 2\n  input:    1 1\n  expected: 3\n  actual:   2\n            ^ first difference\n  program:\n    7 | (entry (main (x Int) (y Int)) (+ x y))\n"
    );
    assert!(stdout.contains(&add), "{stdout}");
    let matrix = format!(
        "FAIL {shown}:10: case `matrix`\n  expected: [[1 2] [3 5]]\n  actual:   [[1 2] [3 4]]\n                      ^ first difference (at index [1 1])\n  program:\n    12 | (+ [[0 1] [2 3]] 1)\n"
    );
    assert!(stdout.contains(&matrix), "{stdout}");
    assert!(
        stdout.contains("^ first difference (the shapes differ: expected [3], got [2])\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  expected: an error matching /nope/\n  actual error:\n"),
        "{stdout}"
    );
    assert!(stdout.contains("error: divide by zero"), "{stdout}");
    // Runs are counted, not files or cases: `add`'s first run passed.
    assert!(stdout.ends_with("\n1 passed, 4 failed\n"), "{stdout}");
}

#[test]
fn run_takes_the_program_text_with_e_or_from_standard_input_with_a_dash() {
    // An expression, a script of several, and a program whose entry takes
    // the ARGs (the first positional is an ARG: there is no FILE).
    let out = remora(&["run", "-e", "(+ 1 [10 20])"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "[11 21]\n");
    let out = remora(&["run", "-e", "(def (val x 4)) (* x x) [x]"], None);
    assert_eq!(text(&out.stdout), "16\n[4]\n", "{}", text(&out.stderr));
    let entry = "(entry (main (x Int) (y Int)) (- x y))";
    let out = remora(&["run", "-e", entry, "10", "-3"], None);
    assert_eq!(text(&out.stdout), "13\n", "{}", text(&out.stderr));
    let out = remora(
        &["run", "10", "--format", "futhark", "-e", entry, "--", "-3"],
        None,
    );
    assert_eq!(text(&out.stdout), "13i64\n", "{}", text(&out.stderr));
    // An error in the text is positioned in `<cli>`.
    let out = remora(&["run", "-e", "(+ 1 nope)"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).starts_with("<cli>:1:6: error: unbound variable `nope`"),
        "{}",
        text(&out.stderr)
    );
    // `-` as FILE: the program on standard input.
    let out = remora(&["run", "-", "5"], Some(entry));
    assert_eq!(text(&out.stdout), "", "{}", text(&out.stderr));
    let out = remora(&["run", "-", "5", "2"], Some(entry));
    assert_eq!(text(&out.stdout), "3\n", "{}", text(&out.stderr));
    let out = remora(&["run", "-"], Some("[1 2] #t"));
    assert_eq!(text(&out.stdout), "[1 2]\n#t\n", "{}", text(&out.stderr));
    // With the program on standard input, arguments cannot come from there.
    let out = remora(&["run", "-"], Some(entry));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "remora: error: the entry `main` needs arguments for its parameters (x Int) (y Int), and none were given: give them as ARGs after the program (Remora expressions), with --input FILE (.npy or Futhark data)\n"
    );
}

#[cfg(unix)]
#[test]
fn an_entry_without_arguments_on_a_terminal_says_how_to_give_them() {
    let dir = scratch("run-terminal");
    let file = dir.join("two.remora");
    let written = std::fs::write(&file, "(entry (main (xs [Float 3]) (k Int)) (f.* (i->f k) xs))\n");
    assert!(written.is_ok(), "{written:?}");
    let start = std::time::Instant::now();
    let (shown, exited) = on_a_terminal(&["run", &file.to_string_lossy()], "", &dir);
    assert!(exited, "remora waited for input:\n{shown}");
    assert!(start.elapsed() < std::time::Duration::from_secs(30));
    assert!(
        shown.contains(
            "remora: error: the entry `main` needs arguments for its parameters (xs [Float 3]) (k Int), and none were given: give them as ARGs after the program (Remora expressions), with --input FILE (.npy or Futhark data), or Futhark data piped on standard input"
        ),
        "{shown}"
    );
}

#[test]
fn trace_prints_a_string_label_as_text() {
    let program = "(trace \"start\" 0)\n\
                   (trace [104 105] 1)\n\
                   (def (fun (f (x Int) : Int) (trace \"in f\" (* x 2))))\n\
                   (f [1 2])\n\
                   (trace \"héllo\\tthere\" (trace [1 2] 3))\n";
    let compiled = remora::native::c_compiler().is_some();
    for engine in ["interp", "fused", "compiled"] {
        if engine == "compiled" && !compiled {
            continue;
        }
        let out = remora(&["run", "--engine", engine, "-e", program], None);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_eq!(text(&out.stdout), "0\n1\n[2 4]\n3\n");
        // A string literal is its text; `[104 105]` stays an array.
        assert_eq!(
            text(&out.stderr),
            "start\n[104 105]\nin f\nin f\n[1 2]\nhéllo\tthere\n",
            "--engine {engine}"
        );
    }
}

#[test]
fn the_compiled_engine_traces_once_and_only_when_it_succeeds() {
    if remora::native::c_compiler().is_none() {
        return;
    }
    let dir = scratch("compiled-trace");
    let log = dir.join("log.txt");
    let log_path = log.to_string_lossy().into_owned();
    // Traces on standard error and into a file, in order, once; `-v` says
    // the program ran compiled, and nothing of the interpreter's report.
    let program = format!(
        "(trace \"start\" 0)\n\
         (def (fun (f (x Int) : Int) (trace x (* x 2))))\n\
         (trace-file \"{log_path}\" [1.5 2.5] (f [1 2]))\n"
    );
    let out = remora(&["run", "--engine", "compiled", "-v", "-e", &program], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "0\n[2 4]\n");
    assert_eq!(
        text(&out.stderr),
        "start\n1\n2\nremora: note: ran compiled\n",
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(&log).unwrap_or_default(), "[1.5 2.5]\n");
    // A program that fails after tracing: the compiled run's lines are
    // held back, the interpreter's run prints them, once.
    let failing = format!("(trace \"before\" 1)\n(trace-file \"{log_path}\" 7 (/ 1 (trace \"zero\" 0)))\n");
    let out = remora(&["run", "--engine", "compiled", "-v", "-e", &failing], None);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("the compiled program stopped"), "{err}");
    assert_eq!(err.matches("\nbefore\n").count(), 1, "{err}");
    assert_eq!(err.matches("\nzero\n").count(), 1, "{err}");
    assert!(err.contains("error: divide by zero"), "{err}");
    assert_eq!(std::fs::read_to_string(&log).unwrap_or_default(), "[1.5 2.5]\n");
    // A file that cannot be written: nothing printed twice.
    let unwritable = format!(
        "(trace \"first\" (trace-file \"{}\" 1 2))\n",
        dir.join("no-such-dir").join("log.txt").to_string_lossy()
    );
    let out = remora(&["run", "--engine", "compiled", "-e", &unwritable], None);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("trace-file: cannot write"), "{err}");
    assert!(!err.lines().any(|l| l == "first"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_format_pretty_prints_grids_for_people() {
    let program = scratch_file(
        "pretty",
        "grid.remora",
        b"(entry (main) [[[1 20 3] [400 5 -6]] [[7 8 9] [10 11 12]]])\n",
    );
    let p = program.to_string_lossy();
    let out = remora(&["run", &p, "--format", "pretty"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "[[[  1 20  3]\n  [400  5 -6]]\n\n [[  7  8  9]\n  [ 10 11 12]]]\n"
    );
    // The default stays the exact one-line printing.
    let out = remora(&["run", &p], None);
    assert_eq!(
        text(&out.stdout),
        "[[[1 20 3] [400 5 -6]] [[7 8 9] [10 11 12]]]\n"
    );
    // Floats in their shortest form.
    let floats = scratch_file(
        "pretty",
        "floats.remora",
        b"(entry (main) [0.09003057 1.0 2.5e10])\n",
    );
    let out = remora(&["run", &floats.to_string_lossy(), "--format=pretty"], None);
    assert_eq!(text(&out.stdout), "[0.09003057 1.0 2.5e10]\n");
}

#[test]
fn run_format_pretty_elides_long_arrays_and_pretty_full_does_not() {
    let program = scratch_file(
        "pretty-long",
        "long.remora",
        b"(entry (main) (i-app iota/static [2000]))\n",
    );
    let p = program.to_string_lossy();
    let out = remora(&["run", &p, "--format", "pretty"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "[0 1 2 … 1997 1998 1999]\n");
    let out = remora(&["run", &p, "--format", "pretty-full"], None);
    let full = text(&out.stdout);
    assert!(full.starts_with("[0 1 2 3 4 5 6 "), "{full}");
    assert!(full.ends_with(" 1998 1999]\n"), "{full}");
    assert_eq!(full.split(' ').count(), 2000);
    let help = text(&remora(&["run", "--help"], None).stdout);
    assert!(help.contains("pretty-full"), "{help}");
}

#[test]
fn run_format_pretty_in_script_mode_prints_each_value_as_it_goes() {
    let program = scratch_file(
        "pretty-script",
        "script.remora",
        b"[[1 2] [30 4]]\n(range 2)\n(/ 1 0)\n",
    );
    let out = remora(&["run", &program.to_string_lossy(), "--format", "pretty"], None);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), "[[ 1 2]\n [30 4]]\n(box 2 [0 1])\n");
    assert!(
        text(&out.stderr).contains(":3:1: error: divide by zero"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn repl_prints_values_for_people() {
    let out = remora(&["repl"], Some("[[1 2 3] [40 50 60]]\n(f./ 1.0 [3.0 8.0])\n"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "[[ 1  2  3]\n [40 50 60]]\n[0.33333334 0.125]\n"
    );
}

#[test]
fn mandelbrot_for_people() {
    let out = remora(
        &[
            "run",
            &format!("{}/examples/mandelbrot.remora", env!("CARGO_MANIFEST_DIR")),
            "--format",
            "pretty",
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    insta::assert_snapshot!(text(&out.stdout));
}

#[test]
fn repl_types_are_written_as_the_documentation_writes_them_and_check_keeps_remora_lang_s() {
    // The REPL's :type groups binders and parameters (docs/prelude.md,
    // "Reading the types").
    let out = remora(&["repl"], Some(":t append\n:t (fn ((x Int) (y Int)) (+ x y))\n"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("(∀ (&t) (Π ($m $n @s) (-> ([&t $m @s] [&t $n @s]) [&t (+ $m $n) @s])))\n"),
        "{stdout}"
    );
    assert!(stdout.contains("(-> (Int Int) Int)\n"), "{stdout}");
    // `remora check` prints remora-lang's form, one binder and one
    // parameter at a time.
    let out = remora(&["check", "-e", "(fn ((x Int) (y Int)) (+ x y))"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "(-> Int (-> Int Int))\n");
}

/// Runs a program `remora build` made.
fn built(program: &std::path::Path, args: &[&str], stdin: Option<&str>) -> Output {
    output(Command::new(program).args(args), stdin)
}

#[test]
fn remora_build_makes_a_program_that_runs_as_remora_run_does() {
    use std::os::unix::fs::PermissionsExt;
    if remora::native::c_compiler().is_none() {
        return;
    }
    let dir = scratch("build");
    let _ = std::fs::create_dir_all(dir.join("lib"));
    let _ = std::fs::write(
        dir.join("lib/sq.rem"),
        "(def (fun (sq (x Float) : Float) (f.* x x)))\n",
    );
    let source = dir.join("norm.remora");
    let _ = std::fs::write(
        &source,
        "(import \"lib/sq.rem\")\n(entry (main (xs [Float $n])) (f.sum (sq xs)))\n",
    );
    // 1000 floats: summed in the interpreter's order (a tree past 256).
    let many: Vec<String> = (0..1000).map(|i| format!("{}f32", f64::from(i) * 0.37)).collect();
    let data = dir.join("many.txt");
    let _ = std::fs::write(&data, format!("[{}]\n", many.join(", ")));
    let (source_path, data_path) = (
        source.to_string_lossy().into_owned(),
        data.to_string_lossy().into_owned(),
    );
    let interp = remora(&["run", &source_path, "--input", &data_path], None);
    assert!(interp.status.success(), "{}", text(&interp.stderr));
    let program = dir.join("norm");
    let program_path = program.to_string_lossy().into_owned();
    let out = remora(&["build", &source_path, "-o", &program_path], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mode = std::fs::metadata(&program)
        .map(|m| m.permissions().mode())
        .unwrap_or(0);
    assert_eq!(mode & 0o111, 0o111, "mode {mode:o}");
    // It needs neither its source nor the files it imports.
    let _ = std::fs::remove_file(&source);
    let _ = std::fs::remove_dir_all(dir.join("lib"));
    let out = built(&program, &["-v", "[3.0 4.0]"], None);
    assert_eq!(text(&out.stdout), "25.0\n", "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("ran compiled"),
        "{}",
        text(&out.stderr)
    );
    // Its engine is built in: REMORA_ENGINE does not change it.
    let out = Command::new(&program)
        .args(["-v", "[1.0]"])
        .env("REMORA_ENGINE", "interp")
        .stdin(Stdio::null())
        .output();
    assert!(
        out.as_ref()
            .is_ok_and(|o| text(&o.stderr).contains("ran compiled")),
        "{out:?}"
    );
    // Another length, options after the arguments, data from a file and on
    // standard input, a written output.
    let out = built(&program, &["[1.0 2.0 3.0]", "--format", "futhark"], None);
    assert_eq!(text(&out.stdout), "14.0f32\n", "{}", text(&out.stderr));
    let out = built(&program, &["--input", &data_path], None);
    assert_eq!(text(&out.stdout), text(&interp.stdout), "{}", text(&out.stderr));
    let out = built(&program, &[], Some("[1f32, 1f32, 2f32]"));
    assert_eq!(text(&out.stdout), "6.0\n", "{}", text(&out.stderr));
    let written = dir.join("out.txt");
    let out = built(&program, &["[2.0]", "--output", &written.to_string_lossy()], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&written).unwrap_or_default(), "4.0f32\n");
    // What it is, and what it takes.
    let out = built(&program, &["--help"], None);
    assert!(
        text(&out.stdout).contains("The Remora program"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stdout).contains("(xs [Float $n])"),
        "{}",
        text(&out.stdout)
    );
    assert!(text(&out.stdout).contains("--input"));
    // `run`'s errors: a wrong argument, an unknown option.
    let out = built(&program, &["[1 2]"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("[Float $n]"), "{}", text(&out.stderr));
    let out = built(&program, &["[1.0]", "--entry", "other"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("runs its entry `main`"),
        "{}",
        text(&out.stderr)
    );
    // A damaged payload is refused, not run.
    let mut bytes = std::fs::read(&program).unwrap_or_default();
    let at = bytes.len().saturating_sub(remora::bundle::TRAILER + 1);
    if let Some(b) = bytes.get_mut(at) {
        *b ^= 1;
    }
    let damaged = dir.join("damaged");
    let _ = std::fs::write(&damaged, &bytes);
    let _ = std::fs::set_permissions(&damaged, std::fs::Permissions::from_mode(0o755));
    let out = built(&damaged, &["[1.0]"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("is damaged"), "{}", text(&out.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_built_program_gives_the_positioned_message_of_a_run_time_error() {
    if remora::native::c_compiler().is_none() {
        return;
    }
    let dir = scratch("build-error");
    let source = dir.join("div.remora");
    let _ = std::fs::write(&source, "(entry (main (x [Int $n])) (/ 10 x))\n");
    let program = dir.join("div");
    let out = remora(
        &[
            "build",
            &source.to_string_lossy(),
            "-o",
            &program.to_string_lossy(),
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = built(&program, &["[2 5]"], None);
    assert_eq!(text(&out.stdout), "[5 2]\n", "{}", text(&out.stderr));
    let out = built(&program, &["[2 0]"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("div.remora:1:28: error: divide by zero"),
        "{}",
        text(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn remora_build_reports_what_does_not_compile_and_keeps_the_old_file() {
    if remora::native::c_compiler().is_none() {
        return;
    }
    let dir = scratch("build-unsupported");
    let source = dir.join("any-rank.remora");
    let _ = std::fs::write(&source, "(entry (main (x [Int $n @s])) (length x))\n");
    let program = dir.join("any-rank");
    let _ = std::fs::write(&program, "old");
    let (source_path, program_path) = (
        source.to_string_lossy().into_owned(),
        program.to_string_lossy().into_owned(),
    );
    let out = remora(&["build", &source_path, "-o", &program_path], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("any-rank.remora:1:"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stderr).contains("cannot compile this yet"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(&program).unwrap_or_default(), "old");
    // `--engine interp`: a program that runs on the interpreter.
    let out = remora(
        &["build", "--engine", "interp", &source_path, "-o", &program_path],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = built(&program, &["[2 0 5]"], None);
    assert_eq!(text(&out.stdout), "3\n", "{}", text(&out.stderr));
    // `--engine auto`: the same, with a note saying why.
    let _ = std::fs::remove_file(&program);
    let out = remora(
        &["build", "--engine", "auto", &source_path, "-o", &program_path],
        None,
    );
    assert!(
        text(&out.stderr).contains("runs on the interpreter"),
        "{}",
        text(&out.stderr)
    );
    let out = built(&program, &["[2 0 5 1]"], None);
    assert_eq!(text(&out.stdout), "4\n", "{}", text(&out.stderr));
    // A program that does not check: its errors, and nothing written.
    let _ = std::fs::write(&source, "(entry (main (x Int)) (+ x #t))\n");
    let out = remora(
        &["build", &source_path, "-o", &dir.join("bad").to_string_lossy()],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("any-rank.remora:1:"),
        "{}",
        text(&out.stderr)
    );
    assert!(!dir.join("bad").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn remora_build_names_the_program_after_the_file() {
    if remora::native::c_compiler().is_none() {
        return;
    }
    let dir = scratch("build-name");
    let _ = std::fs::write(dir.join("twice.remora"), "(entry (main (x Int)) (* 2 x))\n");
    let _ = std::fs::write(dir.join("plain"), "(entry (main (x Int)) (* 2 x))\n");
    let in_dir = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_remora"))
            .args(args)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .output()
    };
    let out = in_dir(&["build", "twice.remora"]);
    assert!(out.as_ref().is_ok_and(|o| o.status.success()), "{out:?}");
    let out = built(&dir.join("twice"), &["21"], None);
    assert_eq!(text(&out.stdout), "42\n", "{}", text(&out.stderr));
    // Never over the program itself.
    let out = in_dir(&["build", "plain"]);
    let stderr = out.map(|o| text(&o.stderr)).unwrap_or_default();
    assert!(stderr.contains("would overwrite the program"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_reduction_of_a_lifted_lambda_makes_each_item_once() {
    // `(reduce op (f xs))` runs `f` a block of items at a time: a `trace`
    // in `f` (which gives batching up) still prints once per item, in order.
    let program = "(def (fun (g (x Int) : Int) (trace x (* x x))))\n\
                   (reduce + ((fn ((x Int)) (g x)) [1 2 3]))\n";
    let out = remora(&["run", "--engine", "interp", "-e", program], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "14\n");
    assert_eq!(text(&out.stderr), "1\n2\n3\n");
}

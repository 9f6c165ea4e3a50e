//! The `remora` binary as a user meets it: stdout, stderr, exit status.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn remora(args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_remora"));
    cmd.args(args)
        .stdin(if stdin.is_some() {
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
            stderr: b"could not start remora".to_vec(),
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
    assert!(text(&a.stdout).starts_with("(def (i-fun (dot ($n))"));
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
    assert_eq!(
        text(&out.stderr),
        "remora: error: argument 1 of main has type [Int 2], but the parameter `xs` has type [Float 2 2]\n"
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
    // …or, where the result's type holds the witness, it is an error, as
    // in a program.
    let out = remora(&["interpret", "-e", "(reverse (range 3))"], None);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).starts_with("<cli>:1:10: error: a box's witness would escape its automatic unbox"),
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
    let out = remora(&["compile", "--dump", "loops", "-e", "1"], None);
    assert_eq!(out.status.code(), Some(2));
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

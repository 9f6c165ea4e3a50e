//! Test blocks, run: the one harness behind `cargo test` (tests/suite.rs)
//! and `remora test`. A case's checks (`parse`, `parses-like`,
//! `parse-error:`, `type`, `type-error:`) and runs (core.md §5.1: `input`,
//! `output`, `error:`, data files in Futhark's formats) are checked here;
//! every case that parses is also printed and read back (the `remora parse`
//! round trip). See `remora_syntax::testblock` for the format.

use regex::Regex;
use remora_syntax::ast::Program;
use remora_syntax::testblock::{Case, Check, Outcome, Values};
use remora_syntax::{Dialect, RealFs, SourceMap, load_program_text, print, render_all};
use std::path::{Path, PathBuf};

/// Why a case failed.
pub type Failed = String;

/// Every `.remora` file under `dir`, recursively.
pub fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        // A link to a directory is not followed (it may lead back here).
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "remora") {
            out.push(path);
        }
    }
}

/// Whether a phase that should have failed did, with a message matching
/// `pattern`: `rendered` is what it reported. `words` name the error
/// (`a type error`), what happened instead (`it checked`) and one message
/// (`type error`).
fn expected_error(
    pattern: &str,
    failed: bool,
    rendered: &str,
    (error, instead, message): (&str, &str, &str),
) -> Result<(), String> {
    let re = Regex::new(pattern).map_err(|e| format!("bad regex: {e}"))?;
    if !failed {
        return Err(format!("expected {error} matching /{pattern}/, but {instead}"));
    }
    if !re.is_match(rendered) {
        return Err(format!("no {message} matches /{pattern}/; got:\n{rendered}"));
    }
    Ok(())
}

/// The runnable examples of a Markdown document (docs/prelude.md,
/// docs/guide.md) as a case file. In each fenced `remora` block, an example
/// is the source lines since the previous expectation, then its
/// expectation: `;; ⇒ VALUE` (it prints VALUE) or `;; error: TEXT` (it
/// fails with a message containing TEXT). A line `;; input { V … }` before
/// the expectation gives the `main` entry its arguments (a test block's
/// `input`). Each case is named after the expectation's line. Source left
/// without an expectation at the end of a block is an error, so that no
/// example goes untested.
pub fn markdown_cases(markdown: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut block: Option<Vec<&str>> = None;
    let mut input: Option<&str> = None;
    for (n, line) in markdown.lines().enumerate() {
        let trimmed = line.trim();
        let Some(source) = &mut block else {
            if trimmed.starts_with("```remora") {
                block = Some(Vec::new());
            }
            continue;
        };
        if trimmed.starts_with("```") {
            if input.is_some()
                || source
                    .iter()
                    .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with(';'))
            {
                return Err(format!(
                    "line {}: an example without `;; ⇒` or `;; error:`",
                    n + 1
                ));
            }
            block = None;
            continue;
        }
        if trimmed.starts_with(";; input {") {
            input = trimmed.strip_prefix(";; ");
            continue;
        }
        let expected = trimmed
            .strip_prefix(";; ⇒")
            .map(|v| format!(";; output {{ {} }}", v.trim()))
            .or_else(|| {
                trimmed
                    .strip_prefix(";; error:")
                    .map(|e| format!(";; error: {}", regex::escape(e.trim())))
            });
        match expected {
            None => source.push(line),
            Some(expected) => {
                out.push_str(&format!(";;; case line-{}\n;; ==\n", n + 1));
                if let Some(input) = input.take() {
                    out.push_str(&format!(";; {input}\n"));
                }
                // A blank line ends the test block: a comment that opens
                // the example is the example's, not a directive.
                out.push_str(&format!("{expected}\n\n"));
                for l in source.drain(..) {
                    out.push_str(l);
                    out.push('\n');
                }
                out.push('\n');
            }
        }
    }
    Ok(out)
}

fn normalize(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

struct Parsed {
    program: Program,
    rendered: String,
    has_errors: bool,
    sources: SourceMap,
}

struct Typed {
    /// The type of the last top-level item, in remora-lang's bracket
    /// notation and as the documentation writes it (a `type { … }`
    /// expectation may be written either way).
    last_type: Option<(String, String)>,
    rendered: String,
    has_errors: bool,
}

/// How a block checks: with inference, unless it is tagged `core` (core.md's
/// checker, every instantiation written).
fn options(block: &remora_syntax::testblock::Block) -> remora_check::Options {
    remora_check::Options {
        inference: !block.tags.iter().any(|t| t == "core"),
    }
}

fn typecheck(parsed: &Parsed, options: remora_check::Options) -> Typed {
    let checked = remora_check::check_program_with(&parsed.program, options);
    let last_type = checked.value.last().map(|d| {
        let ty = match d {
            remora_check::typed::TDecl::Def { value, .. } => &value.ty,
            remora_check::typed::TDecl::Expr(e) => &e.ty,
        };
        (checked.show(ty), checked.show_grouped(ty))
    });
    Typed {
        last_type,
        rendered: render_all(&checked.diagnostics, &parsed.sources),
        has_errors: checked.has_errors(),
    }
}

fn parse(name: &str, path: Option<PathBuf>, text: &str) -> Parsed {
    let mut sources = SourceMap::new();
    let loaded = load_program_text(&mut sources, &RealFs, name, path, text);
    Parsed {
        has_errors: loaded.has_errors(),
        rendered: render_all(&loaded.diagnostics, &sources),
        program: loaded.value,
        sources,
    }
}

/// What a passing case leaves to check: for a case that expects errors,
/// the diagnostics as rendered; for a `dump:`, the level as printed (the
/// cargo harness snapshots them).
pub struct CaseResult {
    pub snapshot: Option<String>,
}

/// The case's program (which must check) lowered by the compiler to
/// `level` and verified there, as printed.
fn lowered(
    parsed: &Parsed,
    options: remora_check::Options,
    level: remora_compile::Level,
) -> Result<String, Failed> {
    let checked = remora_check::check_program_with(&parsed.program, options);
    if checked.has_errors() {
        return Err(format!(
            "unexpected type errors:\n{}",
            render_all(&checked.diagnostics, &parsed.sources)
        ));
    }
    remora_compile::dump(&checked.value, &checked.names, level, "main").map_err(|u| {
        let d = remora_syntax::Diagnostic::error(u.span, format!("cannot compile: {}", u.what));
        render_all(&[d], &parsed.sources)
    })
}

/// One test of a case, as `remora test` counts them: a run of a block (its
/// input, if any, and what it should give), a check, or a block with
/// neither (whose program must merely parse).
pub struct Test {
    /// The 1-based line of the block's `==` (of the case's first line for a
    /// failure of the case as a whole).
    pub line: usize,
    /// Which test it is: `run 2 of 3`, `the type check`, …; empty for the
    /// one run of a block.
    pub what: String,
    pub result: Result<(), Failed>,
}

/// Every test of a case, each run whatever became of the others, and what
/// a passing case leaves to check ([`CaseResult::snapshot`]).
pub struct CaseTests {
    pub tests: Vec<Test>,
    pub snapshot: Option<String>,
}

/// Runs one case: its checks, its runs, and the `remora parse` round trip;
/// the first failure, if any, as `line N, WHAT: why`.
pub fn run_case(rel: &str, file: &Path, case: &Case) -> Result<CaseResult, Failed> {
    let done = case_tests(rel, file, case);
    for t in done.tests {
        if let Err(why) = t.result {
            let what = if t.what.is_empty() {
                String::new()
            } else {
                format!(", {}", t.what)
            };
            return Err(format!("line {}{what}: {why}", t.line));
        }
    }
    Ok(CaseResult {
        snapshot: done.snapshot,
    })
}

/// Runs every test of one case (its checks, its runs, and the `remora
/// parse` round trip, a test only when it fails). `rel` is the file's name
/// as shown in diagnostics.
pub fn case_tests(rel: &str, file: &Path, case: &Case) -> CaseTests {
    let mut tests = Vec::new();
    if case.blocks.is_empty() {
        tests.push(Test {
            line: case.line,
            what: "the case".into(),
            result: Err("no test block (a comment run with `==`) in this case".into()),
        });
        return CaseTests {
            tests,
            snapshot: None,
        };
    }
    let canonical = std::fs::canonicalize(file).ok();
    let parsed = parse(rel, canonical, &case.source);
    let mut expects_error = false;
    let mut snapshot = parsed.rendered.clone();
    let mut dumped = None;
    for block in &case.blocks {
        let count = block.runs.len();
        for (k, run) in block.runs.iter().enumerate() {
            tests.push(Test {
                line: block.line,
                what: if count == 1 {
                    String::new()
                } else {
                    format!("run {} of {count}", k + 1)
                },
                result: run_one(&parsed, file, block, run),
            });
        }
        for check in &block.checks {
            let (what, result) = match check {
                Check::Parse(expected) => (
                    "the parse check",
                    no_errors(&parsed).and_then(|()| {
                        let got = normalize(&print::program(&parsed.program));
                        if got != normalize(expected) {
                            return Err(format!(
                                "parse printed\n  {got}\nexpected\n  {}",
                                normalize(expected)
                            ));
                        }
                        Ok(())
                    }),
                ),
                Check::ParsesLike(other) => (
                    "the parses-like check",
                    no_errors(&parsed).and_then(|()| {
                        let like = parse("<parses-like>", None, other);
                        if like.has_errors {
                            return Err(format!("the parses-like text does not parse:\n{}", like.rendered));
                        }
                        if like.program != parsed.program {
                            return Err(format!(
                                "trees differ:\n  case:        {}\n  parses-like: {}",
                                normalize(&print::program(&parsed.program)),
                                normalize(&print::program(&like.program))
                            ));
                        }
                        Ok(())
                    }),
                ),
                Check::Type(expected) => (
                    "the type check",
                    no_errors(&parsed).and_then(|()| {
                        let checked = typecheck(&parsed, options(block));
                        if checked.has_errors {
                            return Err(format!("unexpected type errors:\n{}", checked.rendered));
                        }
                        let (got, grouped) = checked.last_type.unwrap_or_default();
                        if normalize(&got) != normalize(expected)
                            && normalize(&grouped) != normalize(expected)
                        {
                            return Err(format!("type\n  {got}\nexpected\n  {}", normalize(expected)));
                        }
                        Ok(())
                    }),
                ),
                Check::TypeError(pattern) => {
                    expects_error = true;
                    let result = no_errors(&parsed).and_then(|()| {
                        let checked = typecheck(&parsed, options(block));
                        expected_error(
                            pattern,
                            checked.has_errors,
                            &checked.rendered,
                            ("a type error", "it checked", "type error"),
                        )?;
                        snapshot = checked.rendered;
                        Ok(())
                    });
                    ("the type-error check", result)
                }
                Check::Dump(level) => {
                    let result = no_errors(&parsed).and_then(|()| {
                        let level = match level.as_str() {
                            "maps" => remora_compile::Level::Maps,
                            "mono" => remora_compile::Level::Mono,
                            "fused" => remora_compile::Level::Fused,
                            "loops" => remora_compile::Level::Loops,
                            other => return Err(format!("no compiler level `{other}` (maps, mono, fused)")),
                        };
                        dumped = Some(lowered(&parsed, options(block), level)?);
                        Ok(())
                    });
                    ("the dump", result)
                }
                Check::ParseError(pattern) => {
                    expects_error = true;
                    let result = expected_error(
                        pattern,
                        parsed.has_errors,
                        &parsed.rendered,
                        ("a parse error", "it parsed", "diagnostic"),
                    );
                    ("the parse-error check", result)
                }
            };
            tests.push(Test {
                line: block.line,
                what: what.into(),
                result,
            });
        }
        if block.runs.is_empty() && block.checks.is_empty() {
            // A block with no runs and no checks: the program must merely parse.
            tests.push(Test {
                line: block.line,
                what: "the parse".into(),
                result: no_errors(&parsed),
            });
        }
    }
    if !parsed.has_errors
        && let Err(why) = round_trip(&parsed.program)
    {
        tests.push(Test {
            line: case.line,
            what: "the parse round trip".into(),
            result: Err(why),
        });
    }
    CaseTests {
        tests,
        snapshot: dumped.or(expects_error.then_some(snapshot)),
    }
}

/// One run of a block: the entry (or the last expression) given the run's
/// input must give its output, or fail with its error, or merely succeed.
fn run_one(
    parsed: &Parsed,
    file: &Path,
    block: &remora_syntax::testblock::Block,
    run: &remora_syntax::testblock::Run,
) -> Result<(), Failed> {
    no_errors(parsed)?;
    let entry = block.entry.as_deref().unwrap_or("main");
    let inputs = match &run.input {
        None => Vec::new(),
        Some(Values::Inline(text)) => split_values(text)?,
        Some(Values::File(path)) => data_file_inputs(file, path)?,
    };
    let given = if inputs.is_empty() {
        String::new()
    } else {
        format!("input:    {}\n", shorten(&inputs.join(" "), 0).0)
    };
    let result = execute(parsed, block.line, entry, &inputs, options(block))?;
    match (&run.outcome, result) {
        (None, Ok(_)) => Ok(()),
        (Some(Outcome::Output(want)), Ok(got)) => {
            let want = match want {
                Values::Inline(text) => {
                    remora_value::read::read_value(text).map_err(|e| format!("bad expected value: {e}"))?
                }
                Values::File(path) => {
                    let mut vs = data_file(file, path)?;
                    if vs.len() != 1 {
                        return Err(format!("{path}: expected one value"));
                    }
                    vs.remove(0)
                }
            };
            if got.0.as_ref() == Some(&want) {
                return Ok(());
            }
            Err(format!(
                "{given}{}",
                difference(
                    &remora_value::print::to_string(&want),
                    &got.1,
                    &want,
                    got.0.as_ref()
                )
            ))
        }
        (Some(Outcome::Error(pattern)), Err(rendered)) => {
            let pattern = if pattern.is_empty() { ".*" } else { pattern };
            let re = Regex::new(pattern).map_err(|e| format!("bad regex: {e}"))?;
            if !re.is_match(&rendered) {
                return Err(format!(
                    "{given}expected: an error matching /{pattern}/\nactual error:\n{rendered}"
                ));
            }
            Ok(())
        }
        (Some(Outcome::Error(pattern)), Ok(got)) => Err(format!(
            "{given}expected: an error matching /{pattern}/\nactual:   {}",
            shorten(&got.1, 0).0
        )),
        (Some(Outcome::Output(want)), Err(rendered)) => {
            let want = match want {
                Values::Inline(text) => text.trim().to_string(),
                Values::File(path) => format!("the value in {path}"),
            };
            Err(format!("{given}expected: {want}\nactual error:\n{rendered}"))
        }
        (None, Err(rendered)) => Err(format!("{given}the run failed:\n{rendered}")),
    }
}

/// How much of a long printed value is shown around its first difference.
const SHOWN: usize = 100;

/// `text` cut to about [`SHOWN`] characters around character `at`, with `…`
/// where it is cut; and where `at` falls in what is shown.
fn shorten(text: &str, at: usize) -> (String, usize) {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= SHOWN {
        return (text.to_string(), at);
    }
    let from = at
        .saturating_sub(SHOWN / 2)
        .min(chars.len().saturating_sub(SHOWN));
    let to = (from + SHOWN).min(chars.len());
    let mut shown = String::new();
    let mut caret = at - from;
    if from > 0 {
        shown.push('…');
        caret += 1;
    }
    shown.extend(&chars[from..to]);
    if to < chars.len() {
        shown.push('…');
    }
    (shown, caret)
}

/// The expected and the actual value, printed one above the other, with a
/// caret under the first character where they differ, and the index of the
/// first item that differs (or the shapes, when they differ).
fn difference(
    expected: &str,
    actual: &str,
    want: &remora_value::Array,
    got: Option<&remora_value::Array>,
) -> String {
    let at = expected
        .chars()
        .zip(actual.chars())
        .take_while(|(a, b)| a == b)
        .count();
    let (expected, caret) = shorten(expected, at);
    let (actual, _) = shorten(actual, at);
    let mut out = format!("expected: {expected}\nactual:   {actual}\n");
    out.push_str(&" ".repeat("actual:   ".len() + caret));
    out.push_str("^ first difference");
    match got.map(|got| first_different_item(want, got)) {
        Some(Item::Shapes(w, g)) => {
            out.push_str(&format!(" (the shapes differ: expected [{w}], got [{g}])"));
        }
        Some(Item::At(index)) if !want.shape.is_empty() => {
            let index: Vec<String> = index.iter().map(|i| i.to_string()).collect();
            out.push_str(&format!(" (at index [{}])", index.join(" ")));
        }
        _ => {}
    }
    out.push('\n');
    out
}

/// Where two arrays first differ.
enum Item {
    /// The shapes, written out, when they differ.
    Shapes(String, String),
    /// The index of the first atom that differs.
    At(Vec<usize>),
    /// Atoms of other kinds (boxes, records, different types).
    Unknown,
}

fn first_different_item(want: &remora_value::Array, got: &remora_value::Array) -> Item {
    use remora_value::Data;
    if want.shape != got.shape {
        let show = |s: &[usize]| s.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(" ");
        return Item::Shapes(show(&want.shape), show(&got.shape));
    }
    let flat = match (&want.data, &got.data) {
        (Data::Int(a), Data::Int(b)) => a.iter().zip(b.iter()).position(|(x, y)| x != y),
        (Data::Float(a), Data::Float(b)) => a.iter().zip(b.iter()).position(|(x, y)| x != y),
        (Data::Bool(a), Data::Bool(b)) => a.iter().zip(b.iter()).position(|(x, y)| x != y),
        _ => None,
    };
    let Some(mut flat) = flat else {
        return Item::Unknown;
    };
    let mut index = vec![0; want.shape.len()];
    for (k, d) in want.shape.iter().enumerate().rev() {
        if *d > 0 {
            index[k] = flat % d;
            flat /= d;
        }
    }
    Item::At(index)
}

fn no_errors(parsed: &Parsed) -> Result<(), Failed> {
    if parsed.has_errors {
        return Err(format!("unexpected parse errors:\n{}", parsed.rendered));
    }
    Ok(())
}

/// Printing the tree and reading the print back gives the same tree.
fn round_trip(program: &Program) -> Result<(), Failed> {
    let printed = print::program(program);
    let mut sources = SourceMap::new();
    let mut decls = Vec::new();
    let mut rendered = String::new();
    // The printed tree is a sequence of top-level forms in the Tree dialect.
    let file = sources.add(remora_syntax::SourceFile::new("<printed>", None, printed.clone()));
    let mut diags = Vec::new();
    let items = remora_syntax::reader::read(&printed, file, &mut diags);
    let parsed = remora_syntax::parser::Parser::new(&mut diags, Dialect::Tree).file(&items);
    decls.extend(parsed.decls);
    if !diags.is_empty() {
        rendered = render_all(&diags, &sources);
    }
    if !rendered.is_empty() {
        return Err(format!(
            "the printed tree does not read back:\n{printed}\n{rendered}"
        ));
    }
    let again = Program { decls };
    if &again != program {
        return Err(format!(
            "round trip changed the tree:\n  printed: {}\n  reread:  {}",
            normalize(&printed),
            normalize(&print::program(&again))
        ));
    }
    Ok(())
}

/// The top-level values of an `input { … }` block, as source texts.
fn split_values(text: &str) -> Result<Vec<String>, Failed> {
    let mut diags = Vec::new();
    let items = remora_syntax::reader::read(text, remora_syntax::FileId(0), &mut diags);
    if !diags.is_empty() {
        return Err("the input values do not read".into());
    }
    Ok(items
        .iter()
        .map(|i| {
            text.get(i.span.start as usize..i.span.end as usize)
                .unwrap_or("")
                .to_string()
        })
        .collect())
}

fn data_file(file: &Path, rel: &str) -> Result<Vec<remora_value::Array>, Failed> {
    let path = file.parent().unwrap_or(Path::new(".")).join(rel);
    let limit = u64::try_from(remora_value::limits::memory_budget() / 4).unwrap_or(u64::MAX);
    let bytes = remora_syntax::files::read_bounded(&path, limit)
        .map_err(|e| format!("{}: {e}", remora_syntax::files::shown(&path)))?;
    remora_value::futhark::read_data(&bytes)
        .map_err(|e| format!("{}: {e}", remora_syntax::files::shown(&path)))
}

/// Data-file values as Remora expressions, to pass as entry arguments.
fn data_file_inputs(file: &Path, rel: &str) -> Result<Vec<String>, Failed> {
    Ok(data_file(file, rel)?.iter().map(as_expression).collect())
}

fn as_expression(v: &remora_value::Array) -> String {
    use remora_value::Data;
    let shape: Vec<String> = v.shape.iter().map(|d| d.to_string()).collect();
    let (atoms, ty): (Vec<String>, &str) = match &v.data {
        Data::Int(x) => (x.iter().map(|n| n.to_string()).collect(), "Int"),
        Data::Float(x) => (
            x.iter().map(|f| remora_syntax::float::format_float(*f)).collect(),
            "Float",
        ),
        Data::Bool(x) => (
            x.iter()
                .map(|b| if *b { "#t" } else { "#f" }.to_string())
                .collect(),
            "Bool",
        ),
        Data::Atoms(_) | Data::Records(_) => (Vec::new(), "Int"),
    };
    if atoms.is_empty() {
        format!("(array [{}] {ty})", shape.join(" "))
    } else {
        format!("(array [{}] {})", shape.join(" "), atoms.join(" "))
    }
}

/// Whether every run case also runs on the reference path alone (batched
/// application off), elaborated, and lowered by the compiler (fused and
/// raised back), and must print the same value or the same error. The
/// test suite turns it on; `remora test` leaves it off (so a `trace` prints
/// once).
pub static COMPARE_WITH_REFERENCE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Checks and runs the program; `Ok((value as data, printed))` or the
/// rendered errors.
/// The run's outcome (a value and its printing, or the rendered error);
/// the outer `Err` when the engines disagree, which fails the case
/// whatever it expected.
fn execute(
    parsed: &Parsed,
    line: usize,
    entry: &str,
    inputs: &[String],
    options: remora_check::Options,
) -> Result<Result<(Option<remora_value::Array>, String), String>, String> {
    let fast = execute_with(parsed, entry, inputs, options, false);
    if COMPILED_ONLY.load(std::sync::atomic::Ordering::Relaxed) {
        compiled_agrees(parsed, line, entry, inputs, options, &fast)?;
    }
    if COMPARE_WITH_REFERENCE.load(std::sync::atomic::Ordering::Relaxed) {
        let reference = execute_with(parsed, entry, inputs, options, true);
        let printed = |r: &Result<(Option<remora_value::Array>, String), String>| match r {
            Ok((_, p)) => Ok(p.clone()),
            Err(e) => Err(e.clone()),
        };
        if printed(&fast) != printed(&reference) {
            return Err(format!(
                "batched and reference evaluation differ:\nbatched: {:?}\nreference: {:?}",
                printed(&fast),
                printed(&reference)
            ));
        }
        elaboration_agrees(parsed, entry, inputs, options, &fast)?;
        lowering_agrees(parsed, entry, inputs, options, &fast)?;
        if COMPARE_COMPILED.load(std::sync::atomic::Ordering::Relaxed) {
            compiled_agrees(parsed, line, entry, inputs, options, &fast)?;
        }
    }
    Ok(fast)
}

/// Whether every run case the compiler can compile is also compiled to C
/// and run, and must print what the interpreter printed (or fail too).
/// The suite turns it on where a C compiler is found.
pub static COMPARE_COMPILED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether every run case is also compiled and compared, alone
/// (`remora test --engine compiled`).
pub static COMPILED_ONLY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// How many run cases compiled, and why each of the rest did not and
/// where (the construct's `FILE:LINE:COL`): the compiled engine's
/// coverage, for `remora test --engine compiled`.
pub static COMPILED: std::sync::Mutex<(usize, Vec<(String, String)>)> =
    std::sync::Mutex::new((0, Vec::new()));

/// A summary of [`COMPILED`]: how many run cases compiled, and the
/// reasons of the rest, most frequent first, each with where it arose.
pub fn compiled_coverage() -> String {
    let Ok(c) = COMPILED.lock() else {
        return String::new();
    };
    let total = c.0 + c.1.len();
    let mut out = format!(
        "compiled engine: {} of {total} run cases compiled ({:.1}%)\n",
        c.0,
        if total == 0 {
            100.0
        } else {
            100.0 * c.0 as f64 / total as f64
        }
    );
    let mut reasons: std::collections::BTreeMap<&str, Vec<&str>> = std::collections::BTreeMap::new();
    for (why, at) in &c.1 {
        reasons.entry(why.as_str()).or_default().push(at.as_str());
    }
    let mut reasons: Vec<_> = reasons.into_iter().collect();
    reasons.sort_by_key(|r| std::cmp::Reverse(r.1.len()));
    for (why, mut places) in reasons {
        out.push_str(&format!("  {:5}  {why}\n", places.len()));
        // (by file, then by line)
        places.sort_by_key(|at| {
            let (file, rest) = at.split_once(':').unwrap_or((at, ""));
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            (file, digits.parse::<usize>().unwrap_or(0))
        });
        for at in places {
            out.push_str(&format!("           {at}\n"));
        }
    }
    out
}

/// The program compiled to C and run must print what the interpreter
/// printed, or fail where it failed. `line` is the test block's (where a
/// reason with no position of its own is said to arise).
fn compiled_agrees(
    parsed: &Parsed,
    line: usize,
    entry: &str,
    inputs: &[String],
    options: remora_check::Options,
    original: &Result<(Option<remora_value::Array>, String), String>,
) -> Result<(), String> {
    let checked = remora_check::check_program_with(&parsed.program, options);
    if checked.has_errors() {
        return Ok(());
    }
    let mut sources = SourceMap::new();
    let mut args = Vec::new();
    let mut typed = Vec::new();
    for text in inputs {
        let loaded = remora_syntax::parse_expression(&mut sources, "<arg>", text, Dialect::Source);
        let c = remora_check::check_expression(&loaded.value);
        let Some(t) = c
            .value
            .filter(|_| c.diagnostics.is_empty() && !loaded.has_errors())
        else {
            return Ok(());
        };
        let mut interp = remora_interp::Interpreter::default();
        let Ok(v) = interp.eval(&t, &Default::default()) else {
            return Ok(());
        };
        match crate::native::base(v) {
            Some(a) => args.push(a),
            None => return Ok(()),
        }
        typed.push(t);
    }
    // What the program traced: printed as the interpreter prints it, and
    // into files it can write (else it fails, as the interpreter does).
    let outcome = crate::native::run_traced(&checked.value, &checked.names, entry, &args, true).and_then(
        |(values, traced)| {
            let printed: Vec<String> = crate::native::trace_lines(&traced)?
                .into_iter()
                .filter(|(file, _)| file.is_none())
                .map(|(_, line)| line)
                .collect();
            crate::native::trace_files_writable(&traced)?;
            Ok((values, printed))
        },
    );
    let outcome = match outcome {
        Ok((values, printed)) if !printed.is_empty() || traces(&checked.value) => {
            let mut interp = remora_interp::Interpreter::default();
            interp.trace = Some(Vec::new());
            let show = |t: &remora_types::Type| t.show_grouped(&checked.names);
            let _ = remora_interp::program::run(
                &mut interp,
                &checked.value,
                entry,
                typed.iter().map(remora_interp::program::EntryArg::Expr).collect(),
                &show,
                &|v| checked.names.vars.get(v.0 as usize).cloned().unwrap_or_default(),
            );
            let expected = interp.trace.unwrap_or_default();
            if printed != expected {
                return Err(format!(
                    "compiled, the program traces differently:\ninterpreter: {expected:?}\ncompiled: {printed:?}"
                ));
            }
            Ok(values)
        }
        outcome => outcome.map(|(values, _)| values),
    };
    let record = |r: Result<(), (String, String)>| {
        if let Ok(mut c) = COMPILED.lock() {
            match r {
                Ok(()) => c.0 += 1,
                Err(why) => c.1.push(why),
            }
        }
    };
    match (outcome, original) {
        (Err(ref f), _) if let Some(what) = f.broken() => Err(format!("the compiled engine broke: {what}")),
        (Err(crate::native::Failure::Unsupported(span, what)), _) => {
            let at = match parsed.sources.get(span.file) {
                Some(f) if span.start > 0 => {
                    let (line, col) = f.line_col(span.start as usize);
                    format!("{}:{line}:{col}", f.name)
                }
                Some(f) => format!("{}:{line} (the test block)", f.name),
                None => format!("line {line} (the test block)"),
            };
            record(Err((what, at)));
            Ok(())
        }
        (Err(crate::native::Failure::Run(_)), Err(_)) => {
            record(Ok(()));
            Ok(())
        }
        (Ok(values), Ok((_, printed)))
            if values.last().map(remora_value::print::to_string).as_ref() == Some(printed) =>
        {
            record(Ok(()));
            Ok(())
        }
        (compiled, _) => Err(format!(
            "compiled, the program differs:\ninterpreter: {:?}\ncompiled: {:?}",
            original.as_ref().map(|r| &r.1),
            match compiled {
                Ok(vs) => Ok(vs.last().map(remora_value::print::to_string)),
                Err(crate::native::Failure::Run(m)) => Err(m),
                Err(_) => Err(String::new()),
            }
        )),
    }
}

/// Whether a program applies `trace` anywhere.
fn traces(decls: &[remora_check::typed::TDecl]) -> bool {
    use remora_check::typed::{TDecl, TExprKind};
    decls.iter().any(|d| match d {
        TDecl::Def { value: e, .. } | TDecl::Expr(e) => {
            e.any(&mut |x| matches!(x.kind, TExprKind::Intrinsic("trace")))
        }
    })
}

/// The program lowered by the compiler to explicit maps, made
/// monomorphic and fused, and raised back to the typed tree must print what the
/// program printed (or fail too, when it failed at run time: the raised
/// tree has no positions).
fn lowering_agrees(
    parsed: &Parsed,
    entry: &str,
    inputs: &[String],
    options: remora_check::Options,
    original: &Result<(Option<remora_value::Array>, String), String>,
) -> Result<(), String> {
    let checked = remora_check::check_program_with(&parsed.program, options);
    if checked.has_errors() {
        return Ok(());
    }
    let lowered = remora_compile::lowered(&checked.value, remora_compile::Level::Fused, &checked.names)
        .map_err(|u| format!("cannot lower: {}", u.what))?;
    let raised = remora_compile::raise_program(&lowered)?;
    let names = remora_check::NameTable {
        vars: lowered.var_names.clone(),
        ..checked.names.clone()
    };
    let again = run_decls(&raised, &names, &parsed.sources, entry, inputs, false);
    match (original, &again) {
        (Ok((_, a)), Ok((_, b))) if a == b => Ok(()),
        (Err(_), Err(_)) => Ok(()),
        _ => Err(format!(
            "lowered to explicit maps and raised back, the program differs:\noriginal: {:?}\nlowered: {:?}",
            original.as_ref().map(|r| &r.1),
            again.as_ref().map(|r| &r.1)
        )),
    }
}

/// The program elaborated (`remora elaborate`), read back, checked with
/// inference off and run must print what the program printed (or fail
/// too, when it failed at run time).
fn elaboration_agrees(
    parsed: &Parsed,
    entry: &str,
    inputs: &[String],
    options: remora_check::Options,
    original: &Result<(Option<remora_value::Array>, String), String>,
) -> Result<(), String> {
    let checked = remora_check::check_program_with(&parsed.program, options);
    if checked.has_errors() {
        return Ok(());
    }
    let text = match remora_check::elaborate::program(&checked.value, &checked.names) {
        Ok(program) => print::program(&program),
        // (Too large to write out: nothing to compare.)
        Err(_) => return Ok(()),
    };
    let mut sources = SourceMap::new();
    let file = sources.add(remora_syntax::SourceFile::new("<elaborated>", None, text.clone()));
    let mut diags = Vec::new();
    let items = remora_syntax::reader::read(&text, file, &mut diags);
    let program = remora_syntax::parser::Parser::new(&mut diags, Dialect::Tree).file(&items);
    if !diags.is_empty() {
        return Err(format!(
            "the elaborated program does not read back:\n{}\n{text}",
            render_all(&diags, &sources)
        ));
    }
    let elaborated = Parsed {
        program: remora_syntax::ast::Program { decls: program.decls },
        rendered: String::new(),
        has_errors: false,
        sources,
    };
    let core = remora_check::Options { inference: false };
    let again = execute_with(&elaborated, entry, inputs, core, false);
    match (original, &again) {
        (Ok((_, a)), Ok((_, b))) if a == b => Ok(()),
        (Err(_), Err(_)) => Ok(()),
        _ => Err(format!(
            "the elaborated program gives {again:?}, not {original:?}:\n{text}"
        )),
    }
}

fn execute_with(
    parsed: &Parsed,
    entry: &str,
    inputs: &[String],
    options: remora_check::Options,
    reference_only: bool,
) -> Result<(Option<remora_value::Array>, String), String> {
    let checked = remora_check::check_program_with(&parsed.program, options);
    if checked.has_errors() {
        return Err(render_all(&checked.diagnostics, &parsed.sources));
    }
    run_decls(
        &checked.value,
        &checked.names,
        &parsed.sources,
        entry,
        inputs,
        reference_only,
    )
}

/// A checked program run: its entry with the inputs, or its last bare
/// expression; the value and its print.
fn run_decls(
    decls: &[remora_check::typed::TDecl],
    names: &remora_check::NameTable,
    program_sources: &SourceMap,
    entry: &str,
    inputs: &[String],
    reference_only: bool,
) -> Result<(Option<remora_value::Array>, String), String> {
    let mut sources = SourceMap::new();
    let mut args = Vec::new();
    for text in inputs {
        let loaded = remora_syntax::parse_expression(&mut sources, "<arg>", text, Dialect::Source);
        if loaded.has_errors() {
            return Err(render_all(&loaded.diagnostics, &sources));
        }
        let c = remora_check::check_expression(&loaded.value);
        match c.value {
            Some(t) if c.diagnostics.is_empty() => args.push(t),
            _ => return Err(render_all(&c.diagnostics, &sources)),
        }
    }
    let mut interp = remora_interp::Interpreter::default();
    interp.reference_only = reference_only;
    let show = |t: &remora_types::Type| t.show_grouped(names);
    let value = match remora_interp::program::run(
        &mut interp,
        decls,
        entry,
        args.iter().map(remora_interp::program::EntryArg::Expr).collect(),
        &show,
        &|v| names.vars.get(v.0 as usize).cloned().unwrap_or_default(),
    ) {
        Ok(remora_interp::program::Outcome::Entry(v)) => v,
        Ok(remora_interp::program::Outcome::Script(mut vs)) => match vs.pop() {
            Some(v) => v,
            None => return Err("the program has no entry and no expression".into()),
        },
        Err(remora_interp::program::Failure::Run(e)) => {
            let d = remora_syntax::Diagnostic::error(e.span, e.message);
            return Err(d.render(program_sources));
        }
        Err(remora_interp::program::Failure::Plain(m)) => return Err(format!("remora: error: {m}")),
    };
    Ok((
        remora_interp::to_data(&value),
        remora_value::print::to_string(&value),
    ))
}

/// What became of a run case with every `t-app` and `i-app` removed (issue
/// 5: how far inference recovers what core makes you write).
#[derive(Debug)]
pub enum Stripped {
    /// It prints what the original printed.
    Same,
    /// Inference reported an ambiguity.
    Ambiguous(String),
    /// Another type error (say, an instantiation nothing determines).
    TypeError(String),
    /// It runs, but prints something else: the smallest-frame rule chose
    /// another split. The original's print, then the stripped one's.
    Differs(String, String),
    /// It checks but fails at run time.
    RunError(String),
}

/// Runs `case` as written and with its instantiations removed; `None` when
/// the case has no successful run to compare.
pub fn stripped_outcome(rel: &str, file: &Path, case: &Case) -> Option<Stripped> {
    let canonical = std::fs::canonicalize(file).ok();
    let parsed = parse(rel, canonical, &case.source);
    if parsed.has_errors {
        return None;
    }
    let block = case.blocks.iter().find(|b| !b.runs.is_empty())?;
    let run = block.runs.first()?;
    let entry = block.entry.as_deref().unwrap_or("main");
    let inputs = match &run.input {
        None => Vec::new(),
        Some(Values::Inline(text)) => split_values(text).ok()?,
        Some(Values::File(path)) => data_file_inputs(file, path).ok()?,
    };
    let (_, original) = execute_with(&parsed, entry, &inputs, options(block), false).ok()?;
    let mut program = parsed.program.clone();
    for d in &mut program.decls {
        strip_decl(d);
    }
    let stripped = Parsed {
        program,
        rendered: String::new(),
        has_errors: false,
        sources: parsed.sources,
    };
    let checked = remora_check::check_program(&stripped.program);
    if checked.has_errors() {
        let text = render_all(&checked.diagnostics, &stripped.sources);
        let first = text.lines().next().unwrap_or_default().to_string();
        return Some(if text.contains("ambiguous") {
            Stripped::Ambiguous(first)
        } else {
            Stripped::TypeError(first)
        });
    }
    Some(
        match execute_with(&stripped, entry, &inputs, remora_check::Options::default(), false) {
            Ok((_, printed)) if printed == original => Stripped::Same,
            Ok((_, printed)) => Stripped::Differs(original, printed),
            Err(e) => Stripped::RunError(e.lines().next().unwrap_or_default().to_string()),
        },
    )
}

fn strip_decl(d: &mut remora_syntax::ast::Decl) {
    use remora_syntax::ast::DeclKind;
    match &mut d.kind {
        DeclKind::Def(b) => strip_bind(b),
        DeclKind::Entry { body, .. } => strip_expr(body),
        DeclKind::Expr(e) => strip_expr(e),
    }
}

fn strip_bind(b: &mut remora_syntax::ast::Bind) {
    use remora_syntax::ast::BindKind;
    match &mut b.kind {
        BindKind::Val { expr, .. } => strip_expr(expr),
        BindKind::Fun { body, .. } | BindKind::TFun { body, .. } | BindKind::IFun { body, .. } => {
            strip_expr(body)
        }
        BindKind::TypeAlias { .. } | BindKind::IspaceAlias { .. } => {}
    }
}

/// Removes every `t-app` and `i-app` from `e`.
fn strip_expr(e: &mut remora_syntax::ast::Expr) {
    use remora_syntax::ast::{AtomKind, ExprKind};
    match &mut e.kind {
        ExprKind::TApp { func, .. } | ExprKind::IApp { func, .. } => {
            strip_expr(func);
            let inner = std::mem::replace(
                &mut **func,
                remora_syntax::ast::Expr {
                    kind: ExprKind::Error,
                    span: e.span,
                },
            );
            *e = inner;
        }
        ExprKind::Array { atoms, .. } => {
            for a in atoms {
                match &mut a.kind {
                    AtomKind::Lambda { body, .. }
                    | AtomKind::TLambda { body, .. }
                    | AtomKind::ILambda { body, .. }
                    | AtomKind::Box { body, .. } => strip_expr(body),
                    _ => {}
                }
            }
        }
        ExprKind::Frame { elems, .. } => elems.iter_mut().for_each(strip_expr),
        ExprKind::App { func, arg } => {
            strip_expr(func);
            strip_expr(arg);
        }
        ExprKind::Unbox { boxed, body, .. } => {
            strip_expr(boxed);
            strip_expr(body);
        }
        ExprKind::Let { binds, body } => {
            binds.iter_mut().for_each(strip_bind);
            strip_expr(body);
        }
        ExprKind::Record(fields) => fields.iter_mut().for_each(|f| strip_expr(&mut f.value)),
        ExprKind::Field { record, .. } => strip_expr(record),
        ExprKind::If {
            cond,
            then,
            otherwise,
        } => {
            strip_expr(cond);
            strip_expr(then);
            strip_expr(otherwise);
        }
        ExprKind::Rerank { func, .. } => strip_expr(func),
        ExprKind::EmptyArray { .. } | ExprKind::EmptyFrame { .. } | ExprKind::Var(_) | ExprKind::Error => {}
    }
}

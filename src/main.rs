//! The `remora` command.
//!
//! `parse`, `check`, `run`, `interpret`, `test` and `repl`; `elaborate`
//! follows with inference (ARCHITECTURE.md).

/// mimalloc keeps freed pages for reuse: array-at-a-time evaluation
/// allocates a fresh buffer for every intermediate array, and with the
/// system allocator each large one is a new mapping whose every page faults
/// (most of the time of an elementwise operation over 10^7 atoms).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Args, Parser, Subcommand};
use remora_syntax::{Dialect, RealFs, SourceMap, print, render_all};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "remora", version, about = "Remora: a rank-polymorphic array language")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Parse a program or an expression and print its desugared tree.
    Parse(Source),
    /// Type-check a program or an expression and print the type of each
    /// definition and entry (or of the expression).
    Check(Source),
    /// Type-check a program or an expression and print it with everything
    /// inference decided written out, as core Remora (the form `parse`
    /// prints).
    Elaborate(Source),
    /// Run a program: its `main` entry with the arguments, or each bare
    /// expression (script mode).
    Run(RunArgs),
    /// Build a standalone executable of a program: it takes its entry's
    /// arguments and the options of `run` (`--input`, `--output`,
    /// `--format`, `-v`, …) as `remora run` does, and runs compiled.
    Build(BuildArgs),
    /// Type-check a program and print it lowered to one of the compiler's
    /// levels (`--dump maps`: every lift an explicit map; `mono`: and
    /// monomorphic; `fused`: chains fused; `loops`: loops over buffers;
    /// `c`: the C program).
    Compile(CompileArgs),
    /// remora-lang's `interpret`: `-e EXPR`, or `-f FILE` (or stdin) with
    /// the entry's arguments.
    Interpret(InterpretArgs),
    /// An interactive session: expressions and declarations, `:type e`,
    /// `:load FILE`, `:help`, `:quit`.
    Repl,
    /// Run the test blocks of `.remora` files (directories: recursively).
    Test {
        #[arg(value_name = "PATH", required = true)]
        paths: Vec<PathBuf>,
        /// `compiled`: every run case is also compiled to C and run, and
        /// must print what the interpreter prints; the cases that do not
        /// compile yet are listed by reason, each with its test block's line.
        #[arg(long, value_enum, default_value_t = TestEngine::Interp)]
        engine: TestEngine,
    },
}

#[derive(Args)]
struct RunArgs {
    /// The program (`-`: standard input).
    #[arg(value_name = "FILE", required_unless_present = "expr")]
    file: Option<PathBuf>,
    /// The program's text, instead of a FILE (the ARGs follow it).
    #[arg(short = 'e', long = "expr", value_name = "TEXT", allow_hyphen_values = true)]
    expr: Option<String>,
    /// The entry to run.
    #[arg(long, default_value = "main")]
    entry: String,
    /// Arguments for the entry's parameters, each a Remora expression.
    #[arg(value_name = "ARG", allow_hyphen_values = true)]
    args: Vec<String>,
    #[command(flatten)]
    data: DataArgs,
    /// Report every application that ran cell by cell instead of
    /// array-at-a-time, with its position and the reason, on standard
    /// error (also with REMORA_VERBOSE=1).
    #[arg(short, long)]
    verbose: bool,
}

#[derive(Args)]
struct BuildArgs {
    /// The program.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// The executable to write (default: FILE's name without its
    /// extension, in the current directory).
    #[arg(short = 'o', value_name = "PROGRAM")]
    output: Option<PathBuf>,
    /// The entry the executable runs.
    #[arg(long, default_value = "main")]
    entry: String,
    /// `compiled`: the program compiled to C now (an error if it cannot be
    /// compiled yet); `interp`: no C, the executable runs the program on
    /// the interpreter; `auto`: compiled where it can be, else `interp`.
    #[arg(long, value_enum, default_value_t = BuildEngine::Compiled)]
    engine: BuildEngine,
}

/// How a built program runs.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BuildEngine {
    /// Compiled to C when built.
    Compiled,
    /// On the interpreter.
    Interp,
    /// Compiled where the program compiles and a C compiler is found,
    /// else the interpreter.
    Auto,
}

/// The command line of a program made by `remora build`: `run`'s, less
/// the program and the entry (built in).
#[derive(Parser)]
struct BuiltCli {
    /// Arguments for the entry's parameters, each a Remora expression.
    #[arg(value_name = "ARG", allow_hyphen_values = true)]
    args: Vec<String>,
    #[command(flatten)]
    data: DataArgs,
    /// Report every application that ran cell by cell instead of
    /// array-at-a-time, with its position and the reason, on standard
    /// error (also with REMORA_VERBOSE=1).
    #[arg(short, long)]
    verbose: bool,
}

#[derive(Args)]
struct CompileArgs {
    /// The level to print.
    #[arg(long, value_enum, value_name = "LEVEL")]
    dump: DumpLevel,
    #[command(flatten)]
    source: Source,
}

/// What runs the run cases of `remora test`.
#[derive(Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
enum TestEngine {
    /// The interpreter.
    #[default]
    Interp,
    /// The interpreter, and the compiled engine compared with it.
    Compiled,
}

/// What runs a program.
#[derive(Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
enum Engine {
    /// The interpreter on the typed tree.
    #[default]
    Interp,
    /// The compiler's fused maps, raised back and run by the interpreter.
    Fused,
    /// The program compiled to C and run natively; an error if it cannot
    /// be compiled.
    Compiled,
    /// Compiled where the program compiles and a C compiler is found,
    /// else the interpreter.
    Auto,
}

/// The compiler's levels `remora compile --dump` prints.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum DumpLevel {
    /// Explicit maps: every implicit lift a `map` over its frame.
    Maps,
    /// Explicit maps, monomorphic: every polymorphic definition replaced by
    /// its instances.
    Mono,
    /// Monomorphic maps with chains over one frame fused into one map.
    Fused,
    /// Loops over buffers: the level the C backend writes.
    Loops,
    /// The C program.
    C,
}

/// The format of values written by `remora run`.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    /// Remora's printing (core.md §4.1): one line, exactly as remora-lang
    /// prints (the default).
    Remora,
    /// For people: matrices as grids of right-aligned columns, higher ranks
    /// as blocks of grids separated by blank lines, floats in their
    /// shortest form (`0.09003057`); past 1,000 items, each longer axis
    /// shows its first and last 3 with `…` between.
    Pretty,
    /// As `pretty`, every item shown.
    PrettyFull,
    /// Futhark's textual data format.
    Futhark,
    /// Futhark's binary data format.
    FutharkBinary,
    /// NumPy's `.npy` (one array).
    Npy,
}

/// The colormaps of pictures (`--colormap`).
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ColormapName {
    /// Black to white.
    Gray,
    /// Matplotlib's perceptually uniform purple, blue, green, yellow.
    Viridis,
}

/// Where entry arguments come from and where results go (extensions.md §5).
#[derive(Args, Default)]
struct DataArgs {
    /// Entry arguments from a data file, after the ARGs: a NumPy `.npy`
    /// file (one array), or values in Futhark's textual or binary data
    /// format (any number); `-` is standard input. May be repeated. Without
    /// ARGs or --input, an entry with parameters reads Futhark data from
    /// standard input.
    #[arg(long, value_name = "FILE")]
    input: Vec<PathBuf>,
    /// Write the result to FILE instead of printing it: `.npy` by the
    /// extension; a picture for `.png`, `.pgm` (binary P5, grayscale) or
    /// `.ppm` (binary P6, RGB); otherwise Futhark data (textual, or binary
    /// with `--format futhark-binary`). A picture is a [h w] array of Int,
    /// Float or Bool, in gray scaled linearly from its smallest value
    /// (black) to its largest (white; one value throughout: all black; NaN:
    /// black; Bool: #f black, #t white), or a [h w 3] array, RGB: Float
    /// channels in [0, 1], Int in [0, 255], each clamped.
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// The format of the result (default: Remora's printing on standard
    /// output, `.npy` or Futhark text for --output).
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// For a picture --output: the values shown black and white (or at the
    /// ends of the colormap, or of each RGB channel) instead of the
    /// picture's own range; values outside clamp.
    #[arg(long, num_args = 2, value_names = ["LO", "HI"], allow_negative_numbers = true)]
    range: Option<Vec<f64>>,
    /// For a picture --output of a [h w] array: colours instead of gray, an
    /// RGB picture (`.png` or `.ppm`).
    #[arg(long, value_enum, value_name = "NAME")]
    colormap: Option<ColormapName>,
    /// Run a program you did not write: it may import only files in its
    /// own directory (and below), and may not read or write any file
    /// (`read-file`, `read-file-f32bin`, `trace-file`); only the --input and
    /// --output files named here are read and written.
    #[arg(long)]
    sandbox: bool,
    /// How a program runs: `interp`, the interpreter on the typed tree; or
    /// `fused`, the compiler's levels so far (explicit maps, monomorphic,
    /// chains of elementwise steps fused into one map) raised back and run
    /// by the interpreter, a fused chain in strips of cells instead of an
    /// array per step; `compiled`, compiled to C by the system's C compiler
    /// and run natively (an error if the program cannot be compiled yet);
    /// `auto` (the default), compiled where it can be and a C compiler is
    /// found, else the interpreter (`-v` says which ran and why).
    #[arg(long, value_enum, env = "REMORA_ENGINE", default_value_t = Engine::Auto)]
    engine: Engine,
    /// Whether an entry needing arguments reads data from standard input
    /// when none is given (`run`; remora-lang's `interpret` does not).
    #[arg(skip)]
    stdin_data: bool,
    /// Whether `-v` asked which engine ran and why.
    #[arg(skip)]
    verbose: bool,
    /// The program compiled before, by `remora build` (the compiled engine
    /// runs it instead of compiling).
    #[arg(skip)]
    built: Option<PathBuf>,
    /// Whether standard input holds the program (`remora run -`), so
    /// entry arguments cannot come from there.
    #[arg(skip)]
    program_on_stdin: bool,
}

#[derive(Args)]
struct InterpretArgs {
    #[command(flatten)]
    source: Source,
    /// The entry to run.
    #[arg(long, default_value = "main")]
    entry: String,
    /// Arguments for the entry's parameters, each a Remora expression.
    #[arg(last = true, value_name = "ARG", allow_hyphen_values = true)]
    args: Vec<String>,
}

/// Where the program comes from, as remora-lang's commands take it.
#[derive(Args)]
#[group(multiple = false)]
struct Source {
    /// An expression (no declarations).
    #[arg(short = 'e', long = "expr", value_name = "EXPR", allow_hyphen_values = true)]
    expr: Option<String>,
    /// A program file.
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    file: Option<PathBuf>,
    /// A program file (the same as -f).
    #[arg(value_name = "FILE")]
    path: Option<PathBuf>,
    /// A program's text (`remora run -e`; `-e` elsewhere is one
    /// expression).
    #[arg(skip)]
    text: Option<String>,
    /// The program is on standard input, even when that is a terminal
    /// (`remora run -`).
    #[arg(skip)]
    stdin: bool,
    /// The program a built executable carries (the file at `path`, with
    /// its imports).
    #[arg(skip)]
    embedded: Option<std::sync::Arc<remora::bundle::Payload>>,
}

/// Set when a write went past the file-size limit (`ulimit -f`).
static FILE_TOO_LARGE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn main() -> ExitCode {
    // A write past the file-size limit then fails (EFBIG), and is reported,
    // instead of the signal killing the process (SIGXFSZ's default).
    let _ = signal_hook::flag::register(signal_hook::consts::SIGXFSZ, &FILE_TOO_LARGE);
    // An address-space limit (`ulimit -v`) too small to start in: said so,
    // rather than an allocation failing and aborting the process.
    if let Some((left, need)) =
        remora_value::limits::address_space_in_use().and_then(remora_syntax::stack::too_little_address_space)
    {
        report(format!(
            "the address-space limit (ulimit -v) leaves {} MiB; remora needs at least {} MiB more than it has mapped",
            left >> 20,
            need >> 20
        ));
        return ExitCode::FAILURE;
    }
    // A program made by `remora build` runs what it carries.
    match remora::bundle::embedded() {
        Ok(None) => {}
        Ok(Some(payload)) => return remora_syntax::stack::run_deep(move || built_program(payload)),
        Err(m) => {
            report(m);
            return ExitCode::FAILURE;
        }
    }
    let cli = Cli::parse_from(hoist_run_options(std::env::args_os().collect()));
    remora_syntax::stack::run_deep(move || match cli.command {
        Command::Parse(source) => parse(source),
        Command::Check(source) => check(source),
        Command::Elaborate(source) => elaborate(source),
        Command::Compile(args) => compile(args),
        Command::Build(args) => build(args),
        Command::Run(mut args) => {
            let mut source = Source {
                expr: None,
                file: None,
                path: None,
                text: None,
                stdin: false,
                embedded: None,
            };
            match (args.expr, args.file) {
                (Some(text), file) => {
                    // No FILE with the program's text: a first positional is an ARG.
                    source.text = Some(text);
                    if let Some(first) = file {
                        args.args.insert(0, first.to_string_lossy().into_owned());
                    }
                }
                (None, Some(file)) if file == std::path::Path::new("-") => {
                    source.stdin = true;
                    args.data.program_on_stdin = true;
                }
                (None, file) => source.file = file,
            }
            args.data.stdin_data = true;
            args.data.verbose = args.verbose || std::env::var_os("REMORA_VERBOSE").is_some_and(|v| v != "0");
            run(source, &args.entry, &args.args, &args.data, args.data.verbose)
        }
        Command::Interpret(args) => run(args.source, &args.entry, &args.args, &DataArgs::default(), false),
        Command::Test { paths, engine } => test(&paths, engine),
        Command::Repl => remora::repl::run(),
    })
}

/// `remora run FILE ARG … --output out.npy`: the options of `run` may
/// also follow its ARGs (which take values starting with `-`, such as
/// negative numbers); they are moved before FILE, up to a `--`, after
/// which everything is an ARG.
fn hoist_run_options(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let Some(run) = args.iter().position(|a| a == "run") else {
        return args;
    };
    if args.get(1..run).is_some_and(|before| !before.is_empty()) {
        // `run` is not the subcommand (it is an option's value).
        return args;
    }
    let with_value = [
        "--input",
        "--output",
        "--format",
        "--entry",
        "-e",
        "--expr",
        "--colormap",
        "--engine",
    ];
    let (mut options, mut rest, mut after) = (Vec::new(), Vec::new(), Vec::new());
    let mut tail = args.into_iter().skip(run + 1);
    while let Some(a) = tail.next() {
        let text = a.to_string_lossy();
        if text == "--" {
            // Everything after `--` is an argument, never an option.
            after.extend(tail.by_ref());
            break;
        }
        if with_value.contains(&text.as_ref()) {
            options.push(a);
            options.extend(tail.next());
        } else if text == "--range" {
            options.push(a);
            options.extend(tail.next());
            options.extend(tail.next());
        } else if with_value.iter().any(|o| text.starts_with(&format!("{o}=")))
            || text == "-h"
            || text == "--help"
            || text == "-v"
            || text == "--verbose"
            || text == "--sandbox"
        {
            options.push(a);
        } else {
            rest.push(a);
        }
    }
    let mut out: Vec<std::ffi::OsString> = vec!["remora".into(), "run".into()];
    out.extend(options);
    if !after.is_empty() {
        // The file and every argument after clap's `--`, so that none is
        // taken for an option.
        out.push("--".into());
    }
    out.extend(rest);
    out.extend(after);
    out
}

/// What a command was given to work on, parsed.
enum Parsed {
    Expr(remora_syntax::ast::Expr),
    Program(remora_syntax::ast::Program),
}

/// Reads and parses the source; on parse errors prints them and gives the
/// exit code.
fn read_source(source: Source, sources: &mut SourceMap, sandbox: bool) -> Result<Parsed, ExitCode> {
    // In a sandbox, imports are confined to the program's directory (the
    // working directory for a program from standard input).
    let confined = |path: Option<&std::path::Path>| -> Option<remora_syntax::Confined> {
        let dir = match path.and_then(|p| p.parent()) {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let root = std::fs::canonicalize(dir).ok()?;
        Some(remora_syntax::Confined { root })
    };
    let (parsed, diags) = if let Some(payload) = &source.embedded {
        // Everything it reads was embedded when it was built.
        let loaded =
            remora_syntax::load_program_file(sources, &remora::bundle::Embedded(payload), &payload.path);
        (Parsed::Program(loaded.value), loaded.diagnostics)
    } else if let Some(text) = source.expr {
        let loaded = remora_syntax::parse_expression(sources, "<cli>", &text, Dialect::Source);
        (Parsed::Expr(loaded.value), loaded.diagnostics)
    } else if let Some(path) = source.file.or(source.path) {
        let loaded = match sandbox.then(|| confined(Some(&path))) {
            None => remora_syntax::load_program_file(sources, &RealFs, &path),
            Some(Some(loader)) => remora_syntax::load_program_file(sources, &loader, &path),
            Some(None) => {
                eprintln!(
                    "remora: error: cannot find the directory of {}",
                    remora_syntax::files::shown(&path)
                );
                return Err(ExitCode::FAILURE);
            }
        };
        (Parsed::Program(loaded.value), loaded.diagnostics)
    } else {
        let text = match source.text {
            Some(text) => text,
            None => {
                if std::io::stdin().is_terminal() && !source.stdin {
                    eprintln!("usage: remora COMMAND (-e EXPR | -f FILE | FILE | < FILE)");
                    return Err(ExitCode::FAILURE);
                }
                match read_stdin_text(sources) {
                    Some(t) => t,
                    None => return Err(ExitCode::FAILURE),
                }
            }
        };
        let loaded = match sandbox.then(|| confined(None)) {
            None => remora_syntax::load_program_text(sources, &RealFs, "<cli>", None, &text),
            Some(Some(loader)) => remora_syntax::load_program_text(sources, &loader, "<cli>", None, &text),
            Some(None) => {
                report("cannot find the working directory".into());
                return Err(ExitCode::FAILURE);
            }
        };
        (Parsed::Program(loaded.value), loaded.diagnostics)
    };
    if !diags.is_empty() {
        eprint!("{}", render_all(&diags, sources));
        if diags.iter().any(|d| d.is_error()) {
            return Err(ExitCode::FAILURE);
        }
    }
    Ok(parsed)
}

/// An error not tied to a position, on standard error: escaped and cut
/// to a length, like every message (it may quote a file name or a token).
fn report(message: String) {
    eprintln!(
        "remora: error: {}",
        remora_syntax::diag::printable_name(&message, 1000)
    );
}

/// Writes `text` on standard output; a failure is reported.
fn write_stdout(text: &str) -> ExitCode {
    write_stdout_bytes(text.as_bytes())
}

fn write_stdout_bytes(bytes: &[u8]) -> ExitCode {
    match remora_syntax::files::write_stdout(bytes) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            report(format!("cannot write standard output: {e}"));
            ExitCode::FAILURE
        }
    }
}

fn check(source: Source) -> ExitCode {
    checked_output(
        source,
        |checked| {
            Ok(checked
                .value
                .as_ref()
                .map(|t| checked.show(&t.ty) + "\n")
                .unwrap_or_default())
        },
        |checked| {
            let mut text = String::new();
            for d in &checked.value {
                match d {
                    remora_check::typed::TDecl::Def { name, value, .. } => {
                        text.push_str(&format!("{name} : {}\n", checked.show(&value.ty)));
                    }
                    remora_check::typed::TDecl::Expr(e) => {
                        text.push_str(&format!("{}\n", checked.show(&e.ty)));
                    }
                }
            }
            Ok(text)
        },
    )
}

fn elaborate(source: Source) -> ExitCode {
    checked_output(
        source,
        |checked| match &checked.value {
            Some(t) => {
                let e = remora_check::elaborate::expr(t, &checked.names)?;
                Ok(print::with_source_records(|| print::expr_to_string(&e)) + "\n")
            }
            None => Ok(String::new()),
        },
        |checked| {
            let p = remora_check::elaborate::program(&checked.value, &checked.names)?;
            Ok(print::with_source_records(|| print::program(&p)))
        },
    )
}

fn compile(args: CompileArgs) -> ExitCode {
    let level = match args.dump {
        DumpLevel::Maps => remora_compile::Level::Maps,
        DumpLevel::Mono => remora_compile::Level::Mono,
        DumpLevel::Fused => remora_compile::Level::Fused,
        DumpLevel::Loops => remora_compile::Level::Loops,
        DumpLevel::C => remora_compile::Level::C,
    };
    let mut sources = SourceMap::new();
    let parsed = match read_source(args.source, &mut sources, false) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let checked = match parsed {
        Parsed::Expr(e) => {
            let c = remora_check::check_expression(&e);
            remora_check::Checked {
                value: c
                    .value
                    .into_iter()
                    .map(remora_check::typed::TDecl::Expr)
                    .collect(),
                names: c.names,
                diagnostics: c.diagnostics,
            }
        }
        Parsed::Program(p) => remora_check::check_program(&p),
    };
    if !checked.diagnostics.is_empty() {
        eprint!("{}", render_all(&checked.diagnostics, &sources));
        if checked.has_errors() {
            return ExitCode::FAILURE;
        }
    }
    match remora_compile::dump(&checked.value, &checked.names, level, "main") {
        Ok(text) => write_stdout(&text),
        Err(u) => {
            let d = remora_syntax::Diagnostic::error(u.span, format!("cannot compile this yet: {}", u.what));
            eprint!("{}", render_all(&[d], &sources));
            ExitCode::FAILURE
        }
    }
}

/// `remora build FILE -o PROGRAM`: a copy of this executable with the
/// program appended (its source and imports, its entry, and the program
/// compiled to C now), which runs it as `remora run --engine compiled`
/// would (src/bundle.rs).
fn build(args: BuildArgs) -> ExitCode {
    let shown = remora_syntax::files::shown;
    let output = match &args.output {
        Some(o) => o.clone(),
        None => match args.file.file_stem() {
            Some(stem) if !stem.is_empty() && stem != "-" => PathBuf::from(stem),
            _ => {
                report("name the executable with -o PROGRAM".into());
                return ExitCode::FAILURE;
            }
        },
    };
    if let (Ok(out), Ok(file)) = (std::fs::canonicalize(&output), std::fs::canonicalize(&args.file))
        && out == file
    {
        report(format!(
            "the executable would overwrite the program {}: name it with -o PROGRAM",
            shown(&args.file)
        ));
        return ExitCode::FAILURE;
    }
    let mut sources = SourceMap::new();
    let recording = remora::bundle::Recording::default();
    let loaded = remora_syntax::load_program_file(&mut sources, &recording, &args.file);
    if !loaded.diagnostics.is_empty() {
        eprint!("{}", render_all(&loaded.diagnostics, &sources));
        if loaded.has_errors() {
            return ExitCode::FAILURE;
        }
    }
    let checked = remora_check::check_program(&loaded.value);
    if !checked.diagnostics.is_empty() {
        eprint!("{}", render_all(&checked.diagnostics, &sources));
        if checked.has_errors() {
            return ExitCode::FAILURE;
        }
    }
    let entry = &args.entry;
    let has_entries = checked
        .value
        .iter()
        .any(|d| matches!(d, remora_check::typed::TDecl::Def { entry: true, .. }));
    let runs = if has_entries {
        let params = remora_interp::program::entry_parameters(
            &checked.value,
            entry,
            &|t| checked.show_grouped(t),
            &|v| checked.names.vars.get(v.0 as usize).cloned().unwrap_or_default(),
        );
        match params {
            Some(p) if p.is_empty() => format!("It runs its entry `{entry}`, which takes no arguments."),
            Some(p) => format!(
                "It runs its entry `{entry}` on arguments for {}: Remora expressions as ARGs, data files with --input (.npy, or Futhark data), or Futhark data on standard input.",
                p.join(" ")
            ),
            None => {
                report(format!("{} has no entry `{entry}`", shown(&args.file)));
                return ExitCode::FAILURE;
            }
        }
    } else if entry != "main" {
        report(format!(
            "{} has no entries (it prints each of its expressions): --entry does not apply",
            shown(&args.file)
        ));
        return ExitCode::FAILURE;
    } else {
        "It prints the value of each of its expressions.".to_string()
    };
    if args.engine == BuildEngine::Compiled && remora::native::c_compiler().is_none() {
        report("remora build needs a C compiler (set CC, or install cc), or --engine interp".into());
        return ExitCode::FAILURE;
    }
    let exe = match args.engine {
        BuildEngine::Interp => None,
        engine => match compiled_executable(&checked, entry) {
            Ok(bytes) => Some(bytes),
            Err(failure) if engine == BuildEngine::Compiled => {
                match failure {
                    remora::native::Failure::Unsupported(span, what) => {
                        let d = remora_syntax::Diagnostic::error(
                            span,
                            format!("cannot compile this yet: {what}"),
                        );
                        eprint!("{}", d.render(&sources));
                    }
                    remora::native::Failure::Run(what) | remora::native::Failure::Internal(what) => {
                        report(format!("internal error in the compiled engine: {what}"));
                    }
                }
                eprintln!(
                    "remora: note: `remora build --engine interp` (or `auto`) builds a program that runs on the interpreter"
                );
                return ExitCode::FAILURE;
            }
            Err(
                remora::native::Failure::Unsupported(_, what)
                | remora::native::Failure::Run(what)
                | remora::native::Failure::Internal(what),
            ) => {
                eprintln!(
                    "remora: note: {} runs on the interpreter: cannot compile it: {what}",
                    shown(&output)
                );
                None
            }
        },
    };
    let how = if exe.is_some() {
        "compiled to C for this machine (a run-time error runs it again on the interpreter, for the positioned message)"
    } else {
        "run by the interpreter"
    };
    let payload = remora::bundle::Payload {
        path: args.file.clone(),
        entry: entry.clone(),
        about: format!(
            "The Remora program {}, built by remora {} and {how}. {runs} The options are those of `remora run`.",
            shown(&args.file),
            env!("CARGO_PKG_VERSION")
        ),
        exe,
        files: recording.files.take(),
        resolved: recording.resolved.take(),
    };
    let base = match std::env::current_exe() {
        Ok(b) => b,
        Err(e) => {
            report(format!("cannot find the remora executable to copy: {e}"));
            return ExitCode::FAILURE;
        }
    };
    match remora::bundle::write_program(&output, &base, &payload) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            report(format!("cannot write {}: {e}", shown(&output)));
            ExitCode::FAILURE
        }
    }
}

/// The program's entry compiled to C and built now: the executable's
/// bytes.
fn compiled_executable(
    checked: &remora_check::Checked<Vec<remora_check::typed::TDecl>>,
    entry: &str,
) -> Result<Vec<u8>, remora::native::Failure> {
    use remora::native::Failure;
    let program = remora_compile::loops(&checked.value, &checked.names, entry)
        .map_err(|u| Failure::Unsupported(u.span, u.what))?;
    let exe = remora::native::executable(&program, remora::native::FLAGS)?;
    std::fs::read(&exe).map_err(|e| Failure::Internal(format!("cannot read {}: {e}", exe.display())))
}

/// A program made by `remora build`: its command line parsed as `remora
/// run`'s (less the program and the entry, built in), and its program run
/// compiled (or on the interpreter, if built so).
fn built_program(payload: remora::bundle::Payload) -> ExitCode {
    use clap::{CommandFactory, FromArgMatches};
    let mut argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let name = argv
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .map_or_else(|| "program".to_string(), |n| n.to_string_lossy().into_owned());
    // The options may follow the ARGs, as `remora run`'s do.
    let mut words: Vec<std::ffi::OsString> = vec!["remora".into(), "run".into()];
    words.extend(argv.drain(1.min(argv.len())..));
    let mut words = hoist_run_options(words);
    words.remove(1);
    // `run`'s options that name the program or the entry: built in.
    let built_in = ["-e", "--expr", "--entry"];
    if let Some(word) = words.iter().take_while(|w| *w != "--").find(|w| {
        let w = w.to_string_lossy();
        built_in
            .iter()
            .any(|o| w == *o || w.starts_with(&format!("{o}=")))
    }) {
        report(format!(
            "{} does not apply: this program runs its entry `{}` (`remora build --entry NAME` chooses another)",
            word.to_string_lossy(),
            payload.entry
        ));
        return ExitCode::FAILURE;
    }
    // Once per process (clap keeps a command's name as a static string).
    let name: &'static str = Box::leak(name.into_boxed_str());
    let command = BuiltCli::command()
        .name(name)
        .bin_name(name)
        .about(payload.about.clone())
        .mut_arg("engine", |a| a.hide(true));
    let matches = command.try_get_matches_from(words).unwrap_or_else(|e| e.exit());
    let mut cli = BuiltCli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // Its engine is the one it was built for (`REMORA_ENGINE` does not
    // change it; a hidden `--engine` does): compiled, and where the
    // compiled program cannot give the values (arguments it was not
    // compiled for, a run-time error, a crash), the interpreter, as `auto`
    // does (`-v` says so).
    if matches.value_source("engine") != Some(clap::parser::ValueSource::CommandLine) {
        cli.data.engine = if payload.exe.is_some() {
            Engine::Auto
        } else {
            Engine::Interp
        };
    }
    if let (Some(exe), Engine::Compiled | Engine::Auto) = (&payload.exe, cli.data.engine) {
        match remora::bundle::extract(exe) {
            Ok(path) => cli.data.built = Some(path),
            Err(e) => {
                report(format!(
                    "cannot put the compiled program in the cache (set XDG_CACHE_HOME to a directory it may write): {e}"
                ));
                return ExitCode::FAILURE;
            }
        }
    }
    cli.data.stdin_data = true;
    cli.data.verbose = cli.verbose || std::env::var_os("REMORA_VERBOSE").is_some_and(|v| v != "0");
    let entry = payload.entry.clone();
    let source = Source {
        expr: None,
        file: None,
        path: None,
        text: None,
        stdin: false,
        embedded: Some(std::sync::Arc::new(payload)),
    };
    run(source, &entry, &cli.args, &cli.data, cli.data.verbose)
}

/// Reads and checks a program or an expression, then prints what `expr`
/// or `program` makes of it, or its diagnostics (exit status 1).
/// What a command prints of a checked expression or program, or the
/// errors of writing it.
type Written = Result<String, Vec<remora_syntax::Diagnostic>>;

fn checked_output(
    source: Source,
    expr: impl Fn(&remora_check::Checked<Option<remora_check::typed::TExpr>>) -> Written,
    program: impl Fn(&remora_check::Checked<Vec<remora_check::typed::TDecl>>) -> Written,
) -> ExitCode {
    let mut sources = SourceMap::new();
    let parsed = match read_source(source, &mut sources, false) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let (text, mut diags) = match parsed {
        Parsed::Expr(e) => {
            let checked = remora_check::check_expression(&e);
            (expr(&checked), checked.diagnostics)
        }
        Parsed::Program(p) => {
            let checked = remora_check::check_program(&p);
            (program(&checked), checked.diagnostics)
        }
    };
    let text = match text {
        // (Nothing is written of a program that did not check.)
        Ok(text) => text,
        Err(errors) => {
            if !diags.iter().any(|d| d.is_error()) {
                diags.extend(errors);
            }
            String::new()
        }
    };
    if !diags.is_empty() {
        eprint!("{}", render_all(&diags, &sources));
        return ExitCode::FAILURE;
    }
    write_stdout(&text)
}

fn run(source: Source, entry: &str, arg_texts: &[String], data: &DataArgs, verbose: bool) -> ExitCode {
    let mut sources = SourceMap::new();
    let parsed = match read_source(source, &mut sources, data.sandbox) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let mut interp = remora_interp::Interpreter::default();
    interp.sandbox = data.sandbox;
    remora::native::SANDBOX.store(data.sandbox, std::sync::atomic::Ordering::Relaxed);
    if verbose {
        interp.log_cell_by_cell();
    }
    let mut ran = false;
    let code = run_parsed(
        parsed,
        &mut sources,
        &mut interp,
        entry,
        arg_texts,
        data,
        &mut ran,
    );
    if verbose && ran {
        eprint!("{}", cell_by_cell_report(&interp, &sources));
    }
    code
}

/// The per-cell diagnostic of `remora run -v`: a note for each application
/// that ran cell by cell, or one line saying nothing did.
fn cell_by_cell_report(interp: &remora_interp::Interpreter, sources: &SourceMap) -> String {
    let log = interp.cell_by_cell();
    if log.is_empty() {
        return "remora: note: every application ran array-at-a-time\n".into();
    }
    let mut out = String::new();
    for c in log {
        let times = if c.times == 1 {
            String::new()
        } else {
            format!(", {} times", c.times)
        };
        let d = remora_syntax::Diagnostic::note_at(
            c.span,
            format!("ran cell by cell ({} cells{times}): {}", c.cells, c.reason),
        );
        out.push_str(&d.render(sources));
    }
    out
}

fn run_parsed(
    parsed: Parsed,
    sources: &mut SourceMap,
    interp: &mut remora_interp::Interpreter,
    entry: &str,
    arg_texts: &[String],
    data: &DataArgs,
    ran: &mut bool,
) -> ExitCode {
    let fail = |sources: &SourceMap, diags: &[remora_syntax::Diagnostic]| {
        eprint!("{}", render_all(diags, sources));
        ExitCode::FAILURE
    };
    let runtime = |sources: &SourceMap, e: remora_interp::RunError| {
        let d = remora_syntax::Diagnostic::error(e.span, e.message);
        eprint!("{}", d.render(sources));
        ExitCode::FAILURE
    };
    match parsed {
        Parsed::Expr(e) => {
            let checked = remora_check::check_expression(&e);
            let (Some(typed), false) = (&checked.value, checked.has_errors()) else {
                return fail(sources, &checked.diagnostics);
            };
            *ran = true;
            match interp.eval(typed, &Default::default()) {
                Ok(v) => match remora_value::print::to_string_checked(&v) {
                    Ok(shown) => write_stdout(&format!("{shown}\n")),
                    Err(m) => runtime(
                        sources,
                        remora_interp::RunError {
                            span: typed.span,
                            message: m,
                        },
                    ),
                },
                Err(e) => runtime(sources, e),
            }
        }
        Parsed::Program(p) => {
            let checked = remora_check::check_program(&p);
            if checked.has_errors() {
                return fail(sources, &checked.diagnostics);
            }
            // Each argument: an expression, parsed, checked and run alone.
            let mut typed_args = Vec::new();
            for text in arg_texts {
                let loaded = remora_syntax::parse_expression(sources, "<arg>", text, Dialect::Source);
                if loaded.has_errors() {
                    return fail(sources, &loaded.diagnostics);
                }
                let c = remora_check::check_expression(&loaded.value);
                match (c.value, c.diagnostics.is_empty()) {
                    (Some(t), true) => typed_args.push(t),
                    (_, _) => return fail(sources, &c.diagnostics),
                }
            }
            let mut args: Vec<_> = typed_args
                .iter()
                .map(remora_interp::program::EntryArg::Expr)
                .collect();
            let wants_data = data.stdin_data
                && data.input.is_empty()
                && arg_texts.is_empty()
                && remora_interp::program::entry_arity(&checked.value, entry).is_some_and(|n| n > 0);
            if wants_data && (data.program_on_stdin || std::io::stdin().is_terminal()) {
                // Nothing to read the arguments from (rather than waiting on
                // the terminal for data no one was asked for).
                report(missing_arguments(&checked, entry, data.program_on_stdin));
                return ExitCode::FAILURE;
            }
            let from_stdin = wants_data;
            let inputs = if from_stdin {
                vec![PathBuf::from("-")]
            } else {
                data.input.clone()
            };
            for path in &inputs {
                // A `.npy` file's type is known from its header: checked
                // before its body is read.
                if path != std::path::Path::new("-")
                    && let Ok(head) = remora_syntax::files::read_prefix(path, 1 << 16)
                    && let Ok(header) = remora_value::npy::read_header(&head)
                    && let Some(atom) = header.atom()
                    && let Err(m) = remora_interp::program::check_data_argument(
                        &checked.value,
                        entry,
                        args.len(),
                        atom,
                        &header.shape,
                        &|t| checked.show_grouped(t),
                    )
                {
                    report(format!("{}: {m}", remora_syntax::files::shown(path)));
                    return ExitCode::FAILURE;
                }
                match read_data_file(path) {
                    Ok(values) => args.extend(values.into_iter().map(|v| {
                        remora_interp::program::EntryArg::Data(remora_value::Array {
                            shape: v.shape,
                            data: v.data.base_atoms(),
                        })
                    })),
                    Err(m) => {
                        report(format!("{}: {m}", remora_syntax::files::shown(path)));
                        return ExitCode::FAILURE;
                    }
                }
            }
            let show = |t: &remora_types::Type| checked.show_grouped(t);
            // Script mode printed as it goes (Remora's printing on stdout).
            let echo = args.is_empty()
                && data.output.is_none()
                && matches!(
                    data.format,
                    None | Some(Format::Remora | Format::Pretty | Format::PrettyFull)
                );
            interp.echo = echo;
            interp.echo_pretty = pretty_options(data.format);
            *ran = true;
            // The compiled engine (`auto`: where the program compiles and
            // a C compiler is found). A run-time error runs the program
            // again on the interpreter, for the positioned message.
            if matches!(data.engine, Engine::Compiled | Engine::Auto) {
                match compiled_values(&checked, entry, &args, interp, data.built.as_deref()) {
                    Ok(values) => {
                        if data.verbose {
                            eprintln!("remora: note: ran compiled");
                        }
                        // (The interpreter's cell-by-cell report does not
                        // speak for a compiled run.)
                        *ran = false;
                        return write_values(&values, data);
                    }
                    Err(remora::native::Failure::Unsupported(span, what)) => {
                        if data.engine == Engine::Compiled {
                            let d = remora_syntax::Diagnostic::error(
                                span,
                                format!("cannot compile this yet: {what}"),
                            );
                            eprint!("{}", d.render(sources));
                            return ExitCode::FAILURE;
                        }
                        if data.verbose {
                            eprintln!(
                                "remora: note: ran on the interpreter: cannot compile this yet: {what}"
                            );
                        }
                    }
                    Err(remora::native::Failure::Run(what)) => {
                        if data.verbose {
                            eprintln!(
                                "remora: note: the compiled program stopped ({what}); running it on the interpreter for the message"
                            );
                        }
                    }
                    Err(remora::native::Failure::Internal(what)) => {
                        if data.engine == Engine::Compiled {
                            report(format!("internal error in the compiled engine: {what}"));
                            return ExitCode::FAILURE;
                        }
                        if data.verbose {
                            eprintln!(
                                "remora: note: ran on the interpreter: internal error in the compiled engine: {what}"
                            );
                        }
                    }
                }
            }
            // The fused engine: the program lowered by the compiler and
            // raised back (what it cannot lower runs as it is). It prints
            // at the end; a run-time error is then found again on the
            // typed tree, for its position.
            // (A program that writes a file with `trace-file` runs once,
            // as it is; `trace`'s lines are held until the run succeeds. A
            // program that traces a string label runs as it is too: the
            // raised tree cannot tell a string literal.)
            let fused = (data.engine == Engine::Fused && !remora_interp::eval::traces_text(&checked.value))
                .then(|| {
                    remora_compile::lowered(&checked.value, remora_compile::Level::Fused, &checked.names).ok()
                })
                .flatten()
                .filter(|p| !uses_intrinsic(p, "trace-file"))
                .and_then(|p| Some((remora_compile::raise_program(&p).ok()?, p.var_names)));
            if let Some((decls, names)) = &fused {
                interp.echo = false;
                let traced = interp.trace.replace(Vec::new());
                let outcome = remora_interp::program::run(interp, decls, entry, args.clone(), &show, &|v| {
                    names.get(v.0 as usize).cloned().unwrap_or_default()
                });
                let held = std::mem::replace(&mut interp.trace, traced).unwrap_or_default();
                let values = match outcome {
                    Ok(remora_interp::program::Outcome::Entry(v)) => Some(vec![v]),
                    Ok(remora_interp::program::Outcome::Script(vs)) => Some(vs),
                    Err(_) => None,
                };
                if let Some(values) = values {
                    for line in held {
                        eprintln!("{line}");
                    }
                    return write_values(&values, data);
                }
                interp.echo = echo;
            }
            let values = match remora_interp::program::run(interp, &checked.value, entry, args, &show, &|v| {
                checked.names.vars.get(v.0 as usize).cloned().unwrap_or_default()
            }) {
                Ok(remora_interp::program::Outcome::Entry(v)) => vec![v],
                Ok(remora_interp::program::Outcome::Script(_)) if interp.echo => {
                    return ExitCode::SUCCESS;
                }
                Ok(remora_interp::program::Outcome::Script(vs)) => vs,
                Err(remora_interp::program::Failure::Run(e)) => return runtime(sources, e),
                Err(remora_interp::program::Failure::Plain(m)) => {
                    report(m.to_string());
                    return ExitCode::FAILURE;
                }
            };
            write_values(&values, data)
        }
    }
}

/// The program run by the compiled engine: the entry's arguments (a
/// command-line expression evaluated by the interpreter first) sent to the
/// compiled program, its results read back.
fn compiled_values<'p>(
    checked: &'p remora_check::Checked<Vec<remora_check::typed::TDecl>>,
    entry: &str,
    args: &[remora_interp::program::EntryArg<'p>],
    interp: &mut remora_interp::Interpreter,
    built: Option<&std::path::Path>,
) -> Result<Vec<remora_interp::Value<'p>>, remora::native::Failure> {
    use remora::native::{Failure, base};
    let unsupported = |what: &str| Failure::Unsupported(remora_syntax::Span::default(), what.to_string());
    let mut inputs = Vec::with_capacity(args.len());
    for a in args {
        let v = match a {
            remora_interp::program::EntryArg::Expr(t) => interp
                .eval(t, &Default::default())
                .map_err(|e| Failure::Run(e.message))?,
            remora_interp::program::EntryArg::Data(v) => v.clone(),
        };
        inputs.push(base(v).ok_or_else(|| unsupported("an argument that is not Int, Float or Bool atoms"))?);
    }
    let results = match built {
        Some(exe) => remora::native::run_built(&checked.value, &checked.names, entry, &inputs, exe)?,
        None => remora::native::run(&checked.value, &checked.names, entry, &inputs)?,
    };
    results
        .into_iter()
        .map(|a| {
            remora::native::result(a).ok_or_else(|| Failure::Internal("a result that is not atoms".into()))
        })
        .collect()
}

/// What `remora run` says when the entry takes arguments and none are given
/// (and standard input is a terminal, or holds the program).
fn missing_arguments(
    checked: &remora_check::Checked<Vec<remora_check::typed::TDecl>>,
    entry: &str,
    program_on_stdin: bool,
) -> String {
    let params =
        remora_interp::program::entry_parameters(&checked.value, entry, &|t| checked.show_grouped(t), &|v| {
            checked.names.vars.get(v.0 as usize).cloned().unwrap_or_default()
        })
        .unwrap_or_default();
    let piped = if program_on_stdin {
        ""
    } else {
        ", or Futhark data piped on standard input"
    };
    format!(
        "the entry `{entry}` needs arguments for its parameters {}, and none were given: give them as ARGs after the program (Remora expressions), with --input FILE (.npy or Futhark data){piped}",
        params.join(" ")
    )
}

/// Whether a lowered program applies the intrinsic `name` anywhere.
fn uses_intrinsic(p: &remora_compile::maps::Program, name: &str) -> bool {
    let mut found = false;
    for d in &p.decls {
        let e = match d {
            remora_compile::maps::Decl::Def { value, .. } => value,
            remora_compile::maps::Decl::Expr(e) => e,
        };
        e.each(&mut |x| found |= matches!(x.kind, remora_compile::maps::Kind::Prim(n) if n == name));
    }
    found
}

/// A program from standard input (bounded as a source file is), named
/// `<cli>`; else the error printed (text that is not UTF-8: at its first
/// bad byte).
fn read_stdin_text(sources: &mut SourceMap) -> Option<String> {
    let bytes =
        remora_syntax::files::read_at_most(std::io::stdin().lock(), remora_syntax::files::MAX_SOURCE_BYTES)
            .map_err(|e| report(format!("standard input {e}")))
            .ok()?;
    remora_syntax::files::utf8(bytes)
        .map_err(|bad| eprint!("{}", render_all(&[bad.diagnostic(sources, "<cli>")], sources)))
        .ok()
}

/// The most bytes a data file may have: a quarter of the memory budget.
fn max_data_bytes() -> u64 {
    u64::try_from(remora_value::limits::memory_budget() / 4).unwrap_or(u64::MAX)
}

/// The values of a data file (`-`: standard input): one array from an
/// `.npy` file, any number from Futhark data.
fn read_data_file(path: &std::path::Path) -> Result<Vec<remora_value::Array>, String> {
    let bytes = if path == std::path::Path::new("-") {
        remora_syntax::files::read_at_most(std::io::stdin().lock(), max_data_bytes())
            .map_err(|e| format!("cannot read: {e}"))?
    } else {
        remora_syntax::files::read_bounded(path, max_data_bytes()).map_err(|e| format!("cannot read: {e}"))?
    };
    if bytes.starts_with(b"\x93NUMPY") {
        remora_value::npy::read_npy(&bytes).map(|a| vec![a])
    } else {
        remora_value::futhark::read_data(&bytes)
    }
}

/// The array inside a scalar box (boxes inside boxes too), or the value.
fn payload<'a, 'p>(v: &'a remora_interp::Value<'p>) -> &'a remora_interp::Value<'p> {
    match (&v.data, v.shape.is_empty()) {
        (remora_value::Data::Atoms(atoms), true) => match atoms.as_slice() {
            [remora_value::Atom::Box(b)] => payload(&b.payload),
            _ => v,
        },
        _ => v,
    }
}

/// How much `--format pretty` (or `pretty-full`) shows; `None` for the
/// other formats.
fn pretty_options(format: Option<Format>) -> Option<remora_value::pretty::Options> {
    match format {
        Some(Format::Pretty) => Some(remora_value::pretty::Options::ELIDED),
        Some(Format::PrettyFull) => Some(remora_value::pretty::Options::FULL),
        _ => None,
    }
}

/// The bytes of a picture `--output` (`.png`, `.pgm`, `.ppm`) of the
/// result, or why there is none.
fn picture(
    values: &[remora_interp::Value<'_>],
    format: remora_value::image::Format,
    data: &DataArgs,
) -> Result<Vec<u8>, String> {
    if data.format.is_some() {
        return Err("--format does not apply to a picture --output (.png, .pgm, .ppm)".into());
    }
    let [v] = values else {
        return Err(format!(
            "{} results cannot go in one picture (it shows one array)",
            values.len()
        ));
    };
    let options = remora_value::image::Options {
        range: match data.range.as_deref() {
            Some(&[lo, hi]) => Some((lo, hi)),
            _ => None,
        },
        colormap: data.colormap.map(|c| match c {
            ColormapName::Gray => remora_value::image::Colormap::Gray,
            ColormapName::Viridis => remora_value::image::Colormap::Viridis,
        }),
    };
    remora_value::image::write(payload(v), format, &options)
}

/// The results of `remora run`, printed or written as `--output` and
/// `--format` ask.
fn write_values(values: &[remora_interp::Value<'_>], data: &DataArgs) -> ExitCode {
    let image = data
        .output
        .as_deref()
        .and_then(remora_value::image::Format::of_path);
    if image.is_none() && (data.range.is_some() || data.colormap.is_some()) {
        report("--range and --colormap apply to a picture --output (.png, .pgm or .ppm)".into());
        return ExitCode::FAILURE;
    }
    if let (Some(format), Some(path)) = (image, &data.output) {
        return match picture(values, format, data) {
            Ok(bytes) => write_output(path, &bytes),
            Err(m) => {
                report(m);
                ExitCode::FAILURE
            }
        };
    }
    let npy_file = data
        .output
        .as_ref()
        .is_some_and(|p| p.extension().is_some_and(|e| e == "npy"));
    let format = match (npy_file, data.format, &data.output) {
        (true, _, _) => Format::Npy,
        (false, Some(f), _) => f,
        (false, None, Some(_)) => Format::Futhark,
        (false, None, None) => Format::Remora,
    };
    let mut bytes = Vec::new();
    for v in values {
        // A data format holds arrays: a box (a `filter` or `range` result)
        // is written as its contents, whose shape carries the witness.
        let v = match format {
            Format::Remora | Format::Pretty | Format::PrettyFull => v,
            _ => payload(v),
        };
        let written = match format {
            Format::Remora => {
                remora_value::print::to_string_checked(v).map(|t| format!("{t}\n").into_bytes())
            }
            Format::Pretty | Format::PrettyFull => {
                let options = pretty_options(Some(format)).unwrap_or_default();
                remora_value::pretty::to_string_checked(v, &options).map(|t| format!("{t}\n").into_bytes())
            }
            Format::Futhark => remora_value::futhark::write_text(v).map(|t| format!("{t}\n").into_bytes()),
            Format::FutharkBinary => remora_value::futhark::write_binary(v),
            Format::Npy if values.len() > 1 => Err(format!(
                "{} results cannot go in one .npy file (it holds one array)",
                values.len()
            )),
            Format::Npy => remora_value::npy::write_npy(v),
        };
        match written {
            Ok(b) => bytes.extend(b),
            Err(m) => {
                report(m.to_string());
                return ExitCode::FAILURE;
            }
        }
    }
    match &data.output {
        None => write_stdout_bytes(&bytes),
        Some(path) => write_output(path, &bytes),
    }
}

/// The `--output` file, written whole or not at all.
fn write_output(path: &std::path::Path, bytes: &[u8]) -> ExitCode {
    match remora_syntax::files::write_atomic(path, bytes) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "remora: error: cannot write {}: {e}",
                remora_syntax::files::shown(path)
            );
            ExitCode::FAILURE
        }
    }
}

/// `remora test PATH …`: every test (each run of each block, each check)
/// of every case of every file. A failure names the file and line of its
/// block, the case's program, the input, and the expected and actual values
/// with where they first differ; the last line is `N passed, M failed`,
/// counting tests (a file that cannot be read or whose blocks do not parse
/// counts as one failure).
fn test(paths: &[PathBuf], engine: TestEngine) -> ExitCode {
    let compiled = engine == TestEngine::Compiled;
    if compiled && remora::native::c_compiler().is_none() {
        report("--engine compiled needs a C compiler (set CC, or install cc)".into());
        return ExitCode::FAILURE;
    }
    remora::testing::COMPILED_ONLY.store(compiled, std::sync::atomic::Ordering::Relaxed);
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            remora::testing::collect(p, &mut files);
        } else {
            files.push(p.clone());
        }
    }
    files.sort();
    let (mut passed, mut failed) = (0usize, 0usize);
    let mut out = String::new();
    for file in &files {
        let rel = remora_syntax::files::shown(file);
        let text = match remora_syntax::files::read_text(file, remora_syntax::files::MAX_SOURCE_BYTES) {
            Ok(t) => t,
            Err(e) => {
                report(format!("{}: {e}", remora_syntax::files::shown(file)));
                failed += 1;
                continue;
            }
        };
        let stem = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let cases = match remora_syntax::testblock::parse_cases(&text, &stem) {
            Ok(c) => c,
            Err(e) => {
                out.push_str(&format!("FAIL {rel}: {e}\n\n"));
                failed += 1;
                continue;
            }
        };
        for case in &cases {
            for t in remora::testing::case_tests(&rel, file, case).tests {
                match t.result {
                    Ok(()) => passed += 1,
                    Err(why) => {
                        failed += 1;
                        let what = if t.what.is_empty() {
                            String::new()
                        } else {
                            format!(", {}", t.what)
                        };
                        out.push_str(&format!("FAIL {rel}:{}: case `{}`{what}\n", t.line, case.name));
                        for line in why.trim_end().lines() {
                            out.push_str(&format!("  {line}\n"));
                        }
                        out.push_str(&program_lines(&case.source));
                        out.push('\n');
                    }
                }
            }
        }
    }
    out.push_str(&format!("{passed} passed, {failed} failed\n"));
    if compiled {
        out.push_str(&remora::testing::compiled_coverage());
    }
    let code = write_stdout(&out);
    if failed > 0 { ExitCode::FAILURE } else { code }
}

/// The program of a case (its lines that are neither blank nor comments),
/// each with its line number, as `remora test` shows it under a failure;
/// at most a dozen lines of at most 120 characters.
fn program_lines(source: &str) -> String {
    const MOST: usize = 12;
    let lines: Vec<(usize, &str)> = source
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with(';'))
        .map(|(i, l)| (i + 1, l))
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    let width = lines.iter().map(|(n, _)| n.to_string().len()).max().unwrap_or(1);
    let mut out = String::from("  program:\n");
    for (n, l) in lines.iter().take(MOST) {
        // A long line is cut (the file has it whole).
        let cut: String = l.chars().take(120).collect();
        let more = if cut.len() < l.len() { "…" } else { "" };
        out.push_str(&format!("    {n:>width$} | {cut}{more}\n"));
    }
    if lines.len() > MOST {
        out.push_str(&format!("    … ({} more lines)\n", lines.len() - MOST));
    }
    out
}

fn parse(source: Source) -> ExitCode {
    let mut sources = SourceMap::new();
    let (printed, diags) = if let Some(text) = source.expr {
        let loaded = remora_syntax::parse_expression(&mut sources, "<cli>", &text, Dialect::Source);
        (print::expr_to_string(&loaded.value) + "\n", loaded.diagnostics)
    } else if let Some(path) = source.file.or(source.path) {
        let loaded = remora_syntax::load_program_file(&mut sources, &RealFs, &path);
        (print::program(&loaded.value), loaded.diagnostics)
    } else {
        let stdin = std::io::stdin();
        if stdin.is_terminal() {
            eprintln!("usage: remora parse (-e EXPR | -f FILE | FILE | < FILE)");
            return ExitCode::FAILURE;
        }
        let Some(text) = read_stdin_text(&mut sources) else {
            return ExitCode::FAILURE;
        };
        let loaded = remora_syntax::load_program_text(&mut sources, &RealFs, "<cli>", None, &text);
        (print::program(&loaded.value), loaded.diagnostics)
    };
    if !diags.is_empty() {
        eprint!("{}", render_all(&diags, &sources));
        if diags.iter().any(|d| d.is_error()) {
            return ExitCode::FAILURE;
        }
    }
    write_stdout(&printed)
}

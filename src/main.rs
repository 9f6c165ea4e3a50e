//! The `remora` command.
//!
//! Subcommands land as the phases behind them do: today `parse`; `check`,
//! `run`, `interpret`, `test`, `elaborate` and `repl` follow (ARCHITECTURE.md).

use clap::{Args, Parser, Subcommand};
use remora_syntax::{Dialect, RealFs, SourceMap, print, render_all};
use std::io::{IsTerminal, Read, Write};
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    remora_syntax::stack::run_deep(move || match cli.command {
        Command::Parse(source) => parse(source),
    })
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
        let mut stdin = std::io::stdin();
        if stdin.is_terminal() {
            eprintln!("usage: remora parse (-e EXPR | -f FILE | FILE | < FILE)");
            return ExitCode::FAILURE;
        }
        let mut text = String::new();
        if let Err(e) = stdin.read_to_string(&mut text) {
            eprintln!("remora: error: cannot read standard input: {e}");
            return ExitCode::FAILURE;
        }
        let loaded = remora_syntax::load_program_text(&mut sources, &RealFs, "<cli>", None, &text);
        (print::program(&loaded.value), loaded.diagnostics)
    };
    if !diags.is_empty() {
        eprint!("{}", render_all(&diags, &sources));
        if diags.iter().any(|d| d.is_error()) {
            return ExitCode::FAILURE;
        }
    }
    let mut out = std::io::stdout().lock();
    if out
        .write_all(printed.as_bytes())
        .and_then(|_| out.flush())
        .is_err()
    {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

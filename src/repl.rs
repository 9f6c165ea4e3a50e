//! `remora repl`: read an expression or a declaration, check it in the
//! scope of the session's declarations, run it, print the value. Input
//! continues over lines until its brackets balance; `:type e` prints a
//! type, `:elab e` the expression with everything inferred written out,
//! `:load FILE` adds a file's declarations, `:quit` or end of input
//! leaves.
//!
//! The session keeps *values*: a definition is evaluated once, when it is
//! entered, and its value is kept for the inputs after it. Each input is
//! checked after the declarations accepted so far (the checker is
//! deterministic, so they come out with the same variables as when they
//! were accepted, which is verified), but only the input itself is
//! evaluated, in the environment the accepted declarations made. An input
//! that fails (to parse, to check or to run) is reported and forgotten. Each
//! input is a source file of its own, so an error's line counts from the
//! input's first line.

use remora_check::typed::{TDecl, TExpr};
use remora_interp::{Env, Interpreter};
use remora_syntax::ast::{DeclKind, Program};
use remora_syntax::{Diagnostic, FileId, Loaded, RealFs, SourceFile, SourceMap, render_all};
use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;

/// Brackets and strings left open by the input read so far, counted line
/// by line as lines arrive (so that an input of many lines is scanned once,
/// not once per line).
#[derive(Default)]
struct Openness {
    depth: i64,
    in_string: bool,
    escaped: bool,
}

impl Openness {
    fn feed(&mut self, line: &str) {
        for c in line.chars() {
            if self.in_string {
                match c {
                    _ if self.escaped => self.escaped = false,
                    '\\' => self.escaped = true,
                    '"' => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match c {
                ';' => break,
                '"' => self.in_string = true,
                '(' | '[' | '{' => self.depth += 1,
                ')' | ']' | '}' => self.depth -= 1,
                _ => {}
            }
        }
    }

    /// Whether everything opened may be closed: then the reader decides.
    fn closed(&self) -> bool {
        !self.in_string && self.depth <= 0
    }
}

/// Whether the text's brackets (and strings) are all closed.
fn complete(text: &str) -> bool {
    let mut diags = Vec::new();
    remora_syntax::reader::read(text, remora_syntax::FileId(0), &mut diags);
    !diags
        .iter()
        .any(|d| d.message.starts_with("unexpected end of input") || d.message.starts_with("unterminated"))
}

/// One line of input, as the REPL reads it.
enum Line {
    Text(String),
    /// A line that is not UTF-8 text (reported, and the session goes on).
    NotText,
    Interrupted,
    End,
}

/// Where the lines come from: the line editor on a terminal, standard
/// input read line by line otherwise (where a line that is not UTF-8 is
/// one bad line, not the end of the session).
enum Lines {
    Editor(Box<DefaultEditor>),
    Piped(std::io::StdinLock<'static>),
}

impl Lines {
    fn open() -> Option<Lines> {
        use std::io::IsTerminal;
        if std::io::stdin().is_terminal() {
            DefaultEditor::new().ok().map(|e| Lines::Editor(Box::new(e)))
        } else {
            Some(Lines::Piped(std::io::stdin().lock()))
        }
    }

    fn next(&mut self, prompt: &str) -> Line {
        match self {
            Lines::Editor(editor) => match editor.readline(prompt) {
                Ok(line) => Line::Text(line),
                Err(ReadlineError::Interrupted) => Line::Interrupted,
                Err(ReadlineError::Io(e)) if e.kind() == std::io::ErrorKind::InvalidData => Line::NotText,
                Err(_) => Line::End,
            },
            Lines::Piped(input) => {
                use std::io::BufRead;
                let mut bytes = Vec::new();
                match input.read_until(b'\n', &mut bytes) {
                    Ok(0) | Err(_) => Line::End,
                    Ok(_) => {
                        if bytes.last() == Some(&b'\n') {
                            bytes.pop();
                        }
                        String::from_utf8(bytes).map_or(Line::NotText, Line::Text)
                    }
                }
            }
        }
    }

    fn remember(&mut self, input: &str) {
        if let Lines::Editor(editor) = self {
            let _ = editor.add_history_entry(input);
        }
    }
}

pub fn run() -> std::process::ExitCode {
    let Some(mut lines) = Lines::open() else {
        eprintln!("remora: error: cannot start the line editor");
        return std::process::ExitCode::FAILURE;
    };
    let mut session = Session::default();
    let mut pending = String::new();
    let mut open = Openness::default();
    loop {
        let prompt = if pending.is_empty() { ">> " } else { ".. " };
        match lines.next(prompt) {
            Line::Text(line) => {
                pending.push_str(&line);
                pending.push('\n');
                open.feed(&line);
                if !open.closed() || !complete(&pending) {
                    continue;
                }
                open = Openness::default();
                let input = std::mem::take(&mut pending);
                if input.trim().is_empty() {
                    continue;
                }
                lines.remember(input.trim_end());
                if input.trim() == ":quit" || input.trim() == ":q" {
                    break;
                }
                if let Err(e) = remora_syntax::files::write_stdout(session.input(&input).as_bytes()) {
                    eprintln!("remora: error: cannot write standard output: {e}");
                    return std::process::ExitCode::FAILURE;
                }
            }
            Line::NotText => {
                eprintln!("remora: error: a line of input is not UTF-8 text (it is skipped)");
                pending.clear();
                open = Openness::default();
            }
            Line::Interrupted => {
                pending.clear();
                open = Openness::default();
            }
            Line::End => {
                // Input left open at the end (an unclosed bracket): read as
                // it is, so that its error is reported, not dropped.
                if !pending.trim().is_empty() {
                    let _ = remora_syntax::files::write_stdout(session.input(&pending).as_bytes());
                }
                break;
            }
        }
    }
    std::process::ExitCode::SUCCESS
}

/// The declarations accepted so far and the values of their definitions.
///
/// The values' closures borrow the typed trees they were made from, so
/// the typed tree of every accepted input lives as long as the process
/// (leaked: a REPL session is one process, and what it keeps it keeps to
/// the end anyway).
pub struct Session {
    /// Every accepted input's text and the files it imported, first; then
    /// perhaps texts of inputs that were not kept (only texts without a
    /// path, which nothing finds again).
    sources: SourceMap,
    /// The accepted declarations, as parsed, in order: each input is
    /// checked after them.
    program: Program,
    /// Their typed trees, one slice per accepted input, as checked when
    /// accepted: what `env`'s values borrow.
    typed: Vec<&'static [TDecl]>,
    /// How many typed declarations `typed` holds in all.
    kept: usize,
    /// The values of the accepted definitions.
    env: Env<'static>,
}

impl Default for Session {
    fn default() -> Session {
        Session {
            sources: SourceMap::new(),
            program: Program { decls: Vec::new() },
            typed: Vec::new(),
            kept: 0,
            env: Env::default(),
        }
    }
}

/// Evaluates `decls` in `env`, in order: every definition, and the bare
/// expressions from the `shown_from`-th declaration on (those before it
/// were shown when they were entered). The environment made, if nothing
/// failed, and what to print: the expressions' values, then the error.
fn evaluate<'p>(
    env: &Env<'p>,
    decls: &'p [TDecl],
    shown_from: usize,
    sources: &SourceMap,
) -> (Option<Env<'p>>, String) {
    let mut interp = Interpreter::default();
    let mut env = env.clone();
    let mut out = String::new();
    for (k, d) in decls.iter().enumerate() {
        match d {
            TDecl::Def { var, value, .. } => match interp.eval(value, &env) {
                Ok(v) => env = env.bind(*var, v),
                Err(e) => {
                    out.push_str(&Diagnostic::error(e.span, e.message).render(sources));
                    return (None, out);
                }
            },
            TDecl::Expr(_) if k < shown_from => {}
            TDecl::Expr(e) => match interp.eval(e, &env) {
                Ok(v) => match remora_value::pretty::to_string_checked(&v, &Default::default()) {
                    Ok(shown) => {
                        out.push_str(&shown);
                        out.push('\n');
                    }
                    Err(m) => {
                        out.push_str(&Diagnostic::error(e.span, m).render(sources));
                        return (None, out);
                    }
                },
                Err(e) => {
                    out.push_str(&Diagnostic::error(e.span, e.message).render(sources));
                    return (None, out);
                }
            },
        }
    }
    (Some(env), out)
}

/// How many files a source map holds.
fn file_count(sources: &SourceMap) -> usize {
    (0..u32::MAX)
        .take_while(|&i| sources.get(FileId(i)).is_some())
        .count()
}

/// `input` with its leading command (`:type`, of `len` bytes after any
/// leading white space) blanked out, so positions in the rest stay where
/// they were typed.
fn after_command(input: &str, len: usize) -> String {
    let start = input.len() - input.trim_start().len();
    let rest = input.get(start + len..).unwrap_or("");
    format!("{}{}{rest}", input.get(..start).unwrap_or(""), " ".repeat(len))
}

impl Session {
    /// What one complete input prints.
    pub fn input(&mut self, input: &str) -> String {
        let trimmed = input.trim();
        if trimmed.starts_with(":type") {
            return self.type_of(&after_command(input, ":type".len()));
        }
        if trimmed.starts_with(":elab") {
            return self.elaborate(&after_command(input, ":elab".len()));
        }
        if let Some(path) = trimmed.strip_prefix(":load") {
            let before = file_count(&self.sources);
            let loaded = remora_syntax::load_program_file(
                &mut self.sources,
                &RealFs,
                std::path::Path::new(path.trim()),
            );
            return self.declare(loaded, before);
        }
        let before = file_count(&self.sources);
        let loaded = remora_syntax::load_program_text(&mut self.sources, &RealFs, "<repl>", None, input);
        self.declare(loaded, before)
    }

    /// Drops the files added since the first `files` unless none of them
    /// could be found again by path (an import of a file loaded only by a
    /// forgotten input must load it again).
    fn forget_files(&mut self, files: usize) {
        let count = file_count(&self.sources);
        let found_again = (files..count).any(|i| {
            u32::try_from(i)
                .ok()
                .and_then(|i| self.sources.get(FileId(i)))
                .is_some_and(|f| f.path.is_some())
        });
        if !found_again {
            return;
        }
        let mut kept = SourceMap::new();
        for i in 0..files {
            if let Some(f) = u32::try_from(i).ok().and_then(|i| self.sources.get(FileId(i))) {
                kept.add(SourceFile::new(f.name.clone(), f.path.clone(), f.text.clone()));
            }
        }
        self.sources = kept;
    }

    /// Forgets an input: its declarations and the files it added.
    fn forget(&mut self, decls: usize, files: usize) {
        self.program.decls.truncate(decls);
        self.forget_files(files);
    }

    /// Whether the first `kept` declarations of `typed` are those accepted
    /// (so `env` binds their variables).
    fn same_prefix(&self, typed: &[TDecl]) -> bool {
        typed.len() >= self.kept
            && self
                .typed
                .iter()
                .flat_map(|s| s.iter())
                .eq(typed.iter().take(self.kept))
    }

    /// Checks the accepted declarations followed by `loaded` (added to the
    /// sources from the `files`-th file on) and runs what `loaded` adds:
    /// its definitions join the session if all of it checks and runs.
    fn declare(&mut self, loaded: Loaded<Program>, files: usize) -> String {
        let decls = self.program.decls.len();
        if loaded.has_errors() {
            let out = render_all(&loaded.diagnostics, &self.sources);
            self.forget(decls, files);
            return out;
        }
        let keeps = loaded
            .value
            .decls
            .iter()
            .any(|d| !matches!(d.kind, DeclKind::Expr(_)));
        self.program.decls.extend(loaded.value.decls);
        let checked = remora_check::check_program(&self.program);
        if checked.has_errors() {
            let out = render_all(&checked.diagnostics, &self.sources);
            self.forget(decls, files);
            return out;
        }
        let mut typed = checked.value;
        let same = self.same_prefix(&typed);
        if !keeps {
            // Expressions only: run, print, and keep nothing.
            let out = if same {
                let tail = typed.split_off(self.kept);
                evaluate(&self.env, &tail, 0, &self.sources).1
            } else {
                // The accepted declarations checked differently this time
                // (never expected): they are evaluated again.
                evaluate(&Env::default(), &typed, self.kept, &self.sources).1
            };
            self.forget(decls, files);
            return out;
        }
        let (start, new, shown_from): (Env<'static>, &'static [TDecl], usize) = if same {
            let tail = typed.split_off(self.kept);
            (self.env.clone(), Box::leak(tail.into_boxed_slice()), 0)
        } else {
            (Env::default(), Box::leak(typed.into_boxed_slice()), self.kept)
        };
        let (env, out) = evaluate(&start, new, shown_from, &self.sources);
        match env {
            Some(env) => {
                self.env = env;
                if !same {
                    self.typed.clear();
                    self.kept = 0;
                }
                self.typed.push(new);
                self.kept += new.len();
            }
            None => self.forget(decls, files),
        }
        out
    }

    /// Checks `text`, which should be one expression, after the accepted
    /// declarations; its typed tree and the names, or what to print.
    /// Nothing is kept.
    fn check_expression(
        &mut self,
        text: &str,
        command: &str,
    ) -> Result<(TExpr, remora_check::NameTable), String> {
        let files = file_count(&self.sources);
        let decls = self.program.decls.len();
        let loaded = remora_syntax::load_program_text(&mut self.sources, &RealFs, "<repl>", None, text);
        let result = self.check_loaded(loaded, command);
        self.forget(decls, files);
        result
    }

    fn check_loaded(
        &mut self,
        loaded: Loaded<Program>,
        command: &str,
    ) -> Result<(TExpr, remora_check::NameTable), String> {
        if loaded.has_errors() {
            return Err(render_all(&loaded.diagnostics, &self.sources));
        }
        let one_expression = matches!(
            loaded.value.decls.as_slice(),
            [remora_syntax::ast::Decl {
                kind: DeclKind::Expr(_),
                ..
            }]
        );
        if !one_expression {
            return Err(format!("remora: error: {command} takes an expression\n"));
        }
        self.program.decls.extend(loaded.value.decls);
        let checked = remora_check::check_program(&self.program);
        if checked.has_errors() {
            return Err(render_all(&checked.diagnostics, &self.sources));
        }
        match checked.value.into_iter().last() {
            Some(TDecl::Expr(t)) => Ok((t, checked.names)),
            _ => Err(format!("remora: error: {command} takes an expression\n")),
        }
    }

    /// `:type e`: the expression's type.
    fn type_of(&mut self, e: &str) -> String {
        match self.check_expression(e, ":type") {
            Ok((t, names)) => format!("{}\n", t.ty.show(&names)),
            Err(e) => e,
        }
    }

    /// `:elab e`: the expression with everything inference decided written
    /// out (`remora elaborate`).
    fn elaborate(&mut self, e: &str) -> String {
        match self.check_expression(e, ":elab") {
            Ok((t, names)) => format!(
                "{}\n",
                remora_syntax::print::expr_to_string(&remora_check::elaborate::expr(&t, &names))
            ),
            Err(e) => e,
        }
    }
}

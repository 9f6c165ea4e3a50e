//! `remora repl`: read an expression or a declaration, check it in the
//! scope of the session's declarations, run it, print the value. Input
//! continues over lines until its brackets balance; `:type e` (`:t e`)
//! prints a type, `:elab e` the expression with everything inferred written
//! out, `:load FILE` adds a file's declarations, `:help` lists the
//! commands, `:quit` or end of input leaves. On a terminal, Tab completes
//! names (the prelude's and the session's) and commands, and the history is
//! kept between sessions in the user's state directory
//! ([`history_path`]).
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
use rustyline::completion::{Completer, FilenameCompleter, Pair};
use rustyline::error::ReadlineError;
use rustyline::history::DefaultHistory;
use rustyline::{Context, Editor, Helper, highlight::Highlighter, hint::Hinter, validate::Validator};
use std::path::{Path, PathBuf};

/// The REPL's commands: the name, its short form, what it takes, and what
/// it does (`:help` prints this table).
const COMMANDS: &[(&str, &str, &str, &str)] = &[
    (":type", ":t", "EXPR", "the type of an expression"),
    (
        ":elab",
        "",
        "EXPR",
        "the expression with everything inference decided written out",
    ),
    (":load", ":l", "FILE", "add a file's declarations to the session"),
    (":help", ":h", "", "this list"),
    (":quit", ":q", "", "leave (so does end of input, Ctrl-D)"),
];

/// What `:help` prints.
fn help() -> String {
    let mut out = String::from("Commands:\n");
    for (name, short, takes, what) in COMMANDS {
        let mut names = format!("{name} {takes}");
        if !short.is_empty() {
            names = format!("{}, {short} {takes}", names.trim_end());
        }
        out.push_str(&format!("  {:<24}{what}\n", names.trim_end()));
    }
    out.push_str(
        "Anything else is Remora. An expression is evaluated and its value printed:
  (+ 1 [10 20])
A declaration is kept for the inputs after it:
  (def (val xs [1 2 3]))
  (def (fun (double (x Int) : Int) (* 2 x)))
An input goes on over lines until its brackets close; an input that fails
is reported and forgotten. Tab completes names and commands; Ctrl-C drops
the input being typed; the history is kept between sessions.
",
    );
    out
}

/// The word before `pos` in `line` that completion would replace: its start
/// and its text. A word ends at white space, a bracket or a quote.
fn word_before(line: &str, pos: usize) -> (usize, &str) {
    let before = line.get(..pos).unwrap_or(line);
    let start = before
        .char_indices()
        .rev()
        .find(|(_, c)| c.is_whitespace() || "()[]{}\";".contains(*c))
        .map_or(0, |(i, c)| i + c.len_utf8());
    (start, before.get(start..).unwrap_or(""))
}

/// Completions of the word before `pos` in `line`: a `:command` at the start
/// of the input, otherwise one of `names`. The start of the word and the
/// candidates, sorted, each once.
pub fn completions(line: &str, pos: usize, names: &[String]) -> (usize, Vec<String>) {
    let (start, word) = word_before(line, pos);
    let mut found: Vec<String> =
        if word.starts_with(':') && line.get(..start).is_some_and(|b| b.trim().is_empty()) {
            COMMANDS
                .iter()
                .map(|(name, ..)| name.to_string())
                .filter(|c| c.starts_with(word))
                .collect()
        } else if word.is_empty() {
            Vec::new()
        } else {
            names.iter().filter(|n| n.starts_with(word)).cloned().collect()
        };
    found.sort();
    found.dedup();
    (start, found)
}

/// Every name an input can use without defining it: the intrinsics, the
/// prelude, and the reserved words.
fn prelude_names() -> Vec<String> {
    remora_check::intrinsics::names()
        .map(|(n, _)| n.to_string())
        .chain(remora_syntax::parser::RESERVED.iter().map(|w| w.to_string()))
        .collect()
}

/// The line editor's helper: Tab completion of names and commands, and of
/// file names after `:load`.
struct Completion {
    /// The prelude's names and the session's definitions.
    names: Vec<String>,
    files: FilenameCompleter,
}

impl Completer for Completion {
    type Candidate = Pair;

    fn complete(&self, line: &str, pos: usize, ctx: &Context<'_>) -> rustyline::Result<(usize, Vec<Pair>)> {
        let command = line.split_whitespace().next().unwrap_or("");
        if (command == ":load" || command == ":l") && line.trim_start().len() > command.len() {
            return self.files.complete(line, pos, ctx);
        }
        let (start, found) = completions(line, pos, &self.names);
        let pairs = found
            .into_iter()
            .map(|n| Pair {
                display: n.clone(),
                replacement: n,
            })
            .collect();
        Ok((start, pairs))
    }
}

impl Hinter for Completion {
    type Hint = String;
}

impl Highlighter for Completion {}

impl Validator for Completion {}

impl Helper for Completion {}

/// Where the history is kept: `$XDG_STATE_HOME/remora/history`, else
/// `~/.local/state/remora/history` (`state` and `home` are those two
/// variables' values); `None` without either.
pub fn history_path(state: Option<std::ffi::OsString>, home: Option<std::ffi::OsString>) -> Option<PathBuf> {
    // The XDG base directory specification: a relative path is ignored.
    let state = state.map(PathBuf::from).filter(|p| p.is_absolute()).or_else(|| {
        home.map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .map(|h| h.join(".local").join("state"))
    })?;
    Some(state.join("remora").join("history"))
}

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
    Editor {
        editor: Box<Editor<Completion, DefaultHistory>>,
        /// The history file, if there is one to write.
        history: Option<PathBuf>,
    },
    Piped(std::io::StdinLock<'static>),
}

impl Lines {
    fn open() -> Option<Lines> {
        use std::io::IsTerminal;
        if !std::io::stdin().is_terminal() {
            return Some(Lines::Piped(std::io::stdin().lock()));
        }
        let mut editor = Editor::<Completion, DefaultHistory>::new().ok()?;
        editor.set_helper(Some(Completion {
            names: prelude_names(),
            files: FilenameCompleter::new(),
        }));
        // A history that cannot be read or written is done without.
        let history = history_path(std::env::var_os("XDG_STATE_HOME"), std::env::var_os("HOME"));
        if let Some(path) = &history {
            let _ = editor.load_history(path);
        }
        Some(Lines::Editor {
            editor: Box::new(editor),
            history,
        })
    }

    fn next(&mut self, prompt: &str) -> Line {
        match self {
            Lines::Editor { editor, .. } => match editor.readline(prompt) {
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

    /// Adds an input to the history, and to the history file (appended at
    /// once, so that a session that is killed keeps its inputs too).
    fn remember(&mut self, input: &str) {
        if let Lines::Editor { editor, history } = self {
            let _ = editor.add_history_entry(input);
            if let Some(path) = history {
                let written = path
                    .parent()
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .and_then(|()| editor.append_history(path).map_err(std::io::Error::other));
                if written.is_err() {
                    // Not writable: the session goes on without a history file.
                    *history = None;
                }
            }
        }
    }

    /// The names Tab completes: the prelude's and `defined`.
    fn complete_names(&mut self, defined: Vec<String>) {
        if let Lines::Editor { editor, .. } = self
            && let Some(helper) = editor.helper_mut()
        {
            helper.names = prelude_names();
            helper.names.extend(defined);
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
                if matches!(command_of(&input), Some((":quit" | ":q", _))) {
                    break;
                }
                if let Err(e) = remora_syntax::files::write_stdout(session.input(&input).as_bytes()) {
                    eprintln!("remora: error: cannot write standard output: {e}");
                    return std::process::ExitCode::FAILURE;
                }
                lines.complete_names(session.names());
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

/// The input's leading `:command`, as typed, and the rest of it.
fn command_of(input: &str) -> Option<(&str, &str)> {
    let trimmed = input.trim_start();
    if !trimmed.starts_with(':') {
        return None;
    }
    let end = trimmed.find(char::is_whitespace).unwrap_or(trimmed.len());
    Some((trimmed.get(..end)?, trimmed.get(end..)?))
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
        if let Some((command, rest)) = command_of(input) {
            return match command {
                ":type" | ":t" => self.type_of(&after_command(input, command.len())),
                ":elab" => self.elaborate(&after_command(input, command.len())),
                ":load" | ":l" if rest.trim().is_empty() => "remora: error: :load takes a file name\n".into(),
                ":load" | ":l" => {
                    let before = file_count(&self.sources);
                    let loaded =
                        remora_syntax::load_program_file(&mut self.sources, &RealFs, Path::new(rest.trim()));
                    self.declare(loaded, before)
                }
                ":help" | ":h" | ":?" => help(),
                ":quit" | ":q" => String::new(),
                _ => format!(
                    "remora: error: no command `{}` (:help lists the commands)\n",
                    remora_syntax::diag::printable_name(command, 100)
                ),
            };
        }
        let before = file_count(&self.sources);
        let loaded = remora_syntax::load_program_text(&mut self.sources, &RealFs, "<repl>", None, input);
        self.declare(loaded, before)
    }

    /// The names the session's declarations define, in order.
    pub fn names(&self) -> Vec<String> {
        self.program
            .decls
            .iter()
            .filter_map(|d| match &d.kind {
                DeclKind::Def(b) => Some(b.name().name.clone()),
                DeclKind::Entry { name, .. } => Some(name.name.clone()),
                DeclKind::Expr(_) => None,
            })
            .collect()
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
            Ok((t, names)) => format!("{}\n", t.ty.show_grouped(&names)),
            Err(e) => e,
        }
    }

    /// `:elab e`: the expression with everything inference decided written
    /// out (`remora elaborate`).
    fn elaborate(&mut self, e: &str) -> String {
        match self.check_expression(e, ":elab") {
            Ok((t, names)) => match remora_check::elaborate::expr(&t, &names) {
                Ok(e) => format!("{}\n", remora_syntax::print::expr_to_string(&e)),
                Err(errors) => errors
                    .iter()
                    .map(|d| format!("remora: error: {}\n", d.message))
                    .collect(),
            },
            Err(e) => e,
        }
    }
}

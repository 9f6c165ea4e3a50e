//! `remora repl`: read an expression or a declaration, check it in the
//! scope of the session's declarations, run it, print the value. Input
//! continues over lines until its brackets balance; `:type e` prints a
//! type, `:elab e` the expression with everything inferred written out, `:load FILE` adds a file's declarations, `:quit` or end of input
//! leaves.

use remora_syntax::ast::DeclKind;
use remora_syntax::{RealFs, SourceMap, load_program_text, render_all};
use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;

/// Whether the text's brackets (and strings) are all closed.
fn complete(text: &str) -> bool {
    let mut diags = Vec::new();
    remora_syntax::reader::read(text, remora_syntax::FileId(0), &mut diags);
    !diags
        .iter()
        .any(|d| d.message.starts_with("unexpected end of input") || d.message.starts_with("unterminated"))
}

pub fn run() -> std::process::ExitCode {
    let Ok(mut editor) = DefaultEditor::new() else {
        eprintln!("remora: error: cannot start the line editor");
        return std::process::ExitCode::FAILURE;
    };
    let mut session = Session::default();
    let mut pending = String::new();
    loop {
        let prompt = if pending.is_empty() { ">> " } else { ".. " };
        match editor.readline(prompt) {
            Ok(line) => {
                pending.push_str(&line);
                pending.push('\n');
                if !complete(&pending) {
                    continue;
                }
                let input = std::mem::take(&mut pending);
                if input.trim().is_empty() {
                    continue;
                }
                let _ = editor.add_history_entry(input.trim_end());
                if input.trim() == ":quit" || input.trim() == ":q" {
                    break;
                }
                print!("{}", session.input(&input));
            }
            Err(ReadlineError::Interrupted) => pending.clear(),
            Err(_) => break, // end of input
        }
    }
    std::process::ExitCode::SUCCESS
}

/// The declarations entered so far, as source text.
#[derive(Default)]
pub struct Session {
    decls: String,
}

impl Session {
    /// What one complete input prints.
    pub fn input(&mut self, input: &str) -> String {
        let trimmed = input.trim();
        if let Some(e) = trimmed.strip_prefix(":type") {
            return self.type_of(e);
        }
        if let Some(e) = trimmed.strip_prefix(":elab") {
            return self.elaborate(e);
        }
        if let Some(path) = trimmed.strip_prefix(":load") {
            return match std::fs::read_to_string(path.trim()) {
                Ok(text) => self.declare(&text, path.trim()),
                Err(e) => format!("remora: error: cannot read {}: {e}\n", path.trim()),
            };
        }
        self.evaluate(input)
    }

    /// Parses and checks the session plus `text`; the checked program and
    /// the sources, or the rendered errors.
    fn check(
        &self,
        text: &str,
    ) -> Result<
        (
            remora_check::Checked<Vec<remora_check::typed::TDecl>>,
            SourceMap,
            usize,
        ),
        String,
    > {
        let mut sources = SourceMap::new();
        let full = format!("{}{text}", self.decls);
        let loaded = load_program_text(&mut sources, &RealFs, "<repl>", None, &full);
        if loaded.has_errors() {
            return Err(render_all(&loaded.diagnostics, &sources));
        }
        let exprs = loaded
            .value
            .decls
            .iter()
            .filter(|d| matches!(d.kind, DeclKind::Expr(_)))
            .count();
        let checked = remora_check::check_program(&loaded.value);
        if checked.has_errors() {
            return Err(render_all(&checked.diagnostics, &sources));
        }
        Ok((checked, sources, exprs))
    }

    fn declare(&mut self, text: &str, _name: &str) -> String {
        match self.check(text) {
            Ok(_) => {
                self.decls.push_str(text);
                self.decls.push('\n');
                String::new()
            }
            Err(e) => e,
        }
    }

    fn type_of(&self, e: &str) -> String {
        match self.check(e) {
            Ok((checked, _, _)) => match checked.value.last() {
                Some(remora_check::typed::TDecl::Expr(t)) => format!("{}\n", checked.show(&t.ty)),
                _ => "remora: error: :type takes an expression\n".into(),
            },
            Err(e) => e,
        }
    }

    /// `:elab e`: the expression with everything inference decided written
    /// out (`remora elaborate`).
    fn elaborate(&self, e: &str) -> String {
        match self.check(e) {
            Ok((checked, _, _)) => match checked.value.last() {
                Some(remora_check::typed::TDecl::Expr(t)) => format!(
                    "{}\n",
                    remora_syntax::print::expr_to_string(&remora_check::elaborate::expr(t, &checked.names))
                ),
                _ => "remora: error: :elab takes an expression\n".into(),
            },
            Err(e) => e,
        }
    }

    fn evaluate(&mut self, input: &str) -> String {
        let (checked, sources, exprs) = match self.check(input) {
            Ok(c) => c,
            Err(e) => return e,
        };
        if exprs == 0 {
            // A declaration: it joins the session.
            self.decls.push_str(input);
            return String::new();
        }
        let mut interp = remora_interp::Interpreter::default();
        match interp.program(&checked.value) {
            Ok((_, values)) => values
                .last()
                .map(|v| format!("{}\n", remora_value::print::to_string(v)))
                .unwrap_or_default(),
            Err(e) => remora_syntax::Diagnostic::error(e.span, e.message).render(&sources),
        }
    }
}

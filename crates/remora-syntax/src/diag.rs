//! Diagnostics: positioned messages, rendered as
//! `FILE:LINE:COL: error: message`, the source line and a caret.

use crate::source::SourceMap;
use crate::span::Span;
use std::fmt::Write;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

/// One message about the program. Helpers that have no span return plain
/// messages; callers attach the span (Typst's `.at(span)` habit).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub message: String,
    /// Where; `None` for errors about the invocation itself (a missing file).
    pub span: Option<Span>,
    /// What the parser would have accepted here, for parse errors.
    pub expected: Option<String>,
    /// Further lines: hints, detail.
    pub notes: Vec<String>,
}

impl Diagnostic {
    pub fn error(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            span: Some(span),
            expected: None,
            notes: Vec::new(),
        }
    }

    /// An error with no source position (the command line, the file system).
    pub fn error_unpositioned(message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            span: None,
            expected: None,
            notes: Vec::new(),
        }
    }

    pub fn expected(mut self, what: impl Into<String>) -> Diagnostic {
        self.expected = Some(what.into());
        self
    }

    pub fn note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(note.into());
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// The diagnostic as the user sees it:
    ///
    /// ```text
    /// prog.remora:1:5: error: unexpected end of input
    ///   |
    /// 1 | (+ 1
    ///   |     ^
    ///   = expected an expression or `)`
    /// ```
    pub fn render(&self, sources: &SourceMap) -> String {
        let level = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let mut out = String::new();
        let located = self.span.and_then(|s| sources.get(s.file).map(|f| (s, f)));
        let Some((span, file)) = located else {
            let _ = writeln!(out, "remora: {level}: {}", self.message);
            for note in self.expected.iter().map(expected_line).chain(self.notes.clone()) {
                let _ = writeln!(out, "  = {note}");
            }
            return out;
        };
        let (line, col) = file.line_col(span.start as usize);
        let _ = writeln!(out, "{}:{line}:{col}: {level}: {}", file.name, self.message);
        let text = file.line_text(line);
        let (end_line, end_col) = file.line_col(span.end as usize);
        let line_len = text.chars().count();
        let width = if end_line == line {
            end_col.saturating_sub(col)
        } else {
            (line_len + 1).saturating_sub(col)
        }
        .max(1);
        let gutter = " ".repeat(line.to_string().len());
        let shown: String = text.chars().map(|c| if c == '\t' { ' ' } else { c }).collect();
        let _ = writeln!(out, "{gutter} |");
        let _ = writeln!(out, "{line} | {shown}");
        let _ = writeln!(out, "{gutter} | {}{}", " ".repeat(col - 1), "^".repeat(width));
        for note in self.expected.iter().map(expected_line).chain(self.notes.clone()) {
            let _ = writeln!(out, "{gutter} = {note}");
        }
        out
    }
}

fn expected_line(what: &String) -> String {
    format!("expected {what}")
}

/// Renders every diagnostic, in order, separated by blank lines.
pub fn render_all(diags: &[Diagnostic], sources: &SourceMap) -> String {
    diags
        .iter()
        .map(|d| d.render(sources))
        .collect::<Vec<_>>()
        .join("\n")
}

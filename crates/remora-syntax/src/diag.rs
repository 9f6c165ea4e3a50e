//! Diagnostics: positioned messages, rendered as
//! `FILE:LINE:COL: error: message`, the source line and a caret.

use crate::reader::{Bracket, SExp, SExpKind};
use crate::source::SourceMap;
use crate::span::Span;
use std::fmt::Write;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
    /// Information the user asked for (`remora run -v`).
    Note,
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
    /// The span is a bracket literal the parser merged into one array
    /// or frame although its rows differ in length (core.md §1.2: only
    /// the first row's shape counts, the checker rejects the count).
    /// Rendering reads the literal's text again, where the rows are
    /// still visible, points at the first row that differs and says how.
    pub ragged_literal: bool,
}

impl Diagnostic {
    pub fn error(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            span: Some(span),
            expected: None,
            notes: Vec::new(),
            ragged_literal: false,
        }
    }

    /// A positioned note: information the user asked for, not a fault.
    pub fn note_at(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Note,
            ..Diagnostic::error(span, message)
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
            ragged_literal: false,
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

    /// Marks the span as a bracket literal whose rows may differ in
    /// length (see `ragged_literal`).
    pub fn at_ragged_literal(mut self) -> Diagnostic {
        self.ragged_literal = true;
        self
    }

    /// For a ragged bracket literal: the diagnostic at its first row that
    /// differs from the first row beside it, with a note that says how.
    fn at_ragged_row(&self, sources: &SourceMap) -> Option<Diagnostic> {
        let span = self.span?;
        let text = sources.snippet(span);
        let mut ignored = Vec::new();
        let items = crate::reader::read(text, span.file, &mut ignored);
        let [literal] = items.as_slice() else {
            return None;
        };
        let rows = literal.list(Bracket::Square)?;
        let (row, note) = ragged_row(rows)?;
        let mut d = self.clone();
        d.ragged_literal = false;
        d.span = Some(Span {
            file: span.file,
            start: span.start.saturating_add(row.start),
            end: span.start.saturating_add(row.end),
        });
        d.notes.insert(0, note);
        Some(d)
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
        if self.ragged_literal
            && let Some(d) = self.at_ragged_row(sources)
        {
            return d.render(sources);
        }
        let level = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        };
        let mut out = String::new();
        let message = printable(&self.message, MAX_MESSAGE);
        let notes = || {
            self.expected
                .iter()
                .map(expected_line)
                .chain(self.notes.clone())
                .map(|n| printable(&n, MAX_MESSAGE))
        };
        let located = self.span.and_then(|s| sources.get(s.file).map(|f| (s, f)));
        let Some((span, file)) = located else {
            let _ = writeln!(out, "remora: {level}: {message}");
            for note in notes() {
                let _ = writeln!(out, "  = {note}");
            }
            return out;
        };
        let (line, col) = file.line_col(span.start as usize);
        let name = printable_name(&file.name, MAX_PATH);
        let _ = writeln!(out, "{name}:{line}:{col}: {level}: {message}");
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
        let (shown, caret_col, width) = window(text, line_len, col - 1, width);
        let _ = writeln!(out, "{gutter} |");
        let _ = writeln!(out, "{line} | {shown}");
        let _ = writeln!(out, "{gutter} | {}{}", " ".repeat(caret_col), "^".repeat(width));
        for note in notes() {
            let _ = writeln!(out, "{gutter} = {note}");
        }
        out
    }
}

/// The first item of a bracket literal (outer rows first, then inside
/// each) whose number of elements differs from the first item beside it:
/// its span, and a note saying so.
fn ragged_row(items: &[SExp]) -> Option<(Span, String)> {
    let count = |s: &SExp| match &s.kind {
        SExpKind::List(Bracket::Square, inner) => Some(inner.len()),
        SExpKind::Str(points) => Some(points.len()),
        _ => None,
    };
    let elements = |n: usize| {
        if n == 1 {
            "1 element".to_string()
        } else {
            format!("{n} elements")
        }
    };
    if let Some(first) = items.first().and_then(count) {
        for (k, item) in items.iter().enumerate().skip(1) {
            if let Some(n) = count(item)
                && n != first
            {
                return Some((
                    item.span,
                    format!(
                        "item {} has {} where item 1 has {}",
                        k + 1,
                        elements(n),
                        elements(first)
                    ),
                ));
            }
        }
    }
    items
        .iter()
        .find_map(|item| ragged_row(item.list(Bracket::Square)?))
}

/// The longest message (or note) shown whole: one that quotes a huge token
/// is cut, so that an error stays a few lines whatever the input.
const MAX_MESSAGE: usize = 1000;

/// The longest file name shown whole.
const MAX_PATH: usize = 200;

/// `text` as a terminal may safely show it: control characters (which a
/// file name or a token may hold) escaped as Rust escapes them, newlines
/// only where `lines` allows them, and at most `max` characters, the rest
/// cut to `…`.
fn escaped(text: &str, max: usize, lines: bool) -> String {
    let mut out = String::new();
    for (n, c) in text.chars().enumerate() {
        if n >= max {
            out.push('…');
            break;
        }
        if c.is_control() && !(lines && c == '\n') {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// A message as it is shown (see `escaped`; its lines kept).
pub fn printable(text: &str, max: usize) -> String {
    escaped(text, max, true)
}

/// A name (a path) as it is shown: on one line, control characters
/// escaped, at most `max` characters.
pub fn printable_name(text: &str, max: usize) -> String {
    escaped(text, max, false)
}

/// Longest source line shown whole; a longer one is cut to a window around
/// the caret, so that a diagnostic stays a few lines whatever the input.
const MAX_LINE: usize = 120;

/// The part of `text` to show (tabs as spaces), the caret's column in it
/// and the caret's width.
fn window(text: &str, len: usize, col: usize, width: usize) -> (String, usize, usize) {
    // One column per character: a tab as a space, another control
    // character (raw bytes a terminal would act on) as U+FFFD.
    let clean = |c: char| match c {
        '\t' => ' ',
        c if c.is_control() => '\u{FFFD}',
        c => c,
    };
    if len <= MAX_LINE {
        return (text.chars().map(clean).collect(), col, width);
    }
    let from = col.saturating_sub(MAX_LINE / 3);
    let to = (from + MAX_LINE).min(len);
    let mut shown = String::new();
    if from > 0 {
        shown.push('…');
    }
    shown.extend(text.chars().skip(from).take(to - from).map(clean));
    if to < len {
        shown.push('…');
    }
    let caret = col - from + usize::from(from > 0);
    (shown, caret, width.min(to.saturating_sub(col)).max(1))
}

fn expected_line(what: &String) -> String {
    format!("expected {what}")
}

/// At most this many diagnostics are rendered; the rest are counted.
pub const MAX_RENDERED: usize = 100;

/// Renders the diagnostics, in order, separated by blank lines: the first
/// [`MAX_RENDERED`], then a line counting the others.
pub fn render_all(diags: &[Diagnostic], sources: &SourceMap) -> String {
    let mut out = diags
        .iter()
        .take(MAX_RENDERED)
        .map(|d| d.render(sources))
        .collect::<Vec<_>>()
        .join("\n");
    if diags.len() > MAX_RENDERED {
        let _ = writeln!(
            out,
            "\nremora: {} more errors not shown",
            diags.len() - MAX_RENDERED
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceFile;
    use crate::span::FileId;

    #[test]
    fn renders_position_line_and_caret() {
        let mut sources = SourceMap::new();
        let file = sources.add(SourceFile::new("t.remora", None, "(+ 1\n  (f x))"));
        let d = Diagnostic::error(Span::new(file, 8, 9), "unknown").expected("`y`");
        assert_eq!(
            d.render(&sources),
            "t.remora:2:4: error: unknown\n  |\n2 |   (f x))\n  |    ^\n  = expected `y`\n"
        );
        assert_eq!(file, FileId(0));
    }

    #[test]
    fn long_lines_are_cut_around_the_caret() {
        let mut sources = SourceMap::new();
        let text = format!("{}BAD{}", "a ".repeat(500), " b".repeat(500));
        let file = sources.add(SourceFile::new("t", None, text));
        let d = Diagnostic::error(Span::new(file, 1000, 1003), "here");
        let r = d.render(&sources);
        let lines: Vec<&str> = r.lines().collect();
        assert!(lines[2].len() < MAX_LINE + 20, "{r}");
        let caret = lines[3].find('^').unwrap_or(0);
        let shown = lines[2].chars().skip(caret).take(3).collect::<String>();
        assert_eq!(shown, "BAD", "{r}");
    }

    #[test]
    fn many_diagnostics_are_counted_not_shown() {
        let mut sources = SourceMap::new();
        let file = sources.add(SourceFile::new("t", None, "x"));
        let diags = vec![Diagnostic::error(Span::new(file, 0, 1), "e"); MAX_RENDERED + 5];
        let r = render_all(&diags, &sources);
        assert!(r.ends_with("remora: 5 more errors not shown\n"), "{r}");
    }
}

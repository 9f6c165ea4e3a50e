//! The reader: UTF-8 text to a tree of s-expressions with bracket kinds and
//! spans (core.md §1.1). It never fails: unreadable input becomes an
//! [`SExpKind::Error`] node plus a diagnostic, and reading goes on.
//!
//! The reader is iterative (an explicit stack of open brackets), so any
//! nesting depth up to [`MAX_NESTING`] costs no native stack; it accepts as
//! deep a nesting as the later phases' stack allows
//! ([`crate::stack::nesting_limit`]).

use crate::diag::Diagnostic;
use crate::span::{FileId, Span};

/// Deepest bracket nesting the reader accepts. Later phases recurse over the
/// tree; the driver runs them on a thread whose stack is sized for this.
pub const MAX_NESTING: usize = 200_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bracket {
    /// `( … )`
    Paren,
    /// `[ … ]`
    Square,
    /// `{ … }`
    Curly,
}

impl Bracket {
    pub fn open(self) -> char {
        match self {
            Bracket::Paren => '(',
            Bracket::Square => '[',
            Bracket::Curly => '{',
        }
    }
    pub fn close(self) -> char {
        match self {
            Bracket::Paren => ')',
            Bracket::Square => ']',
            Bracket::Curly => '}',
        }
    }
}

/// One node of the surface tree.
#[derive(Clone, Debug, PartialEq)]
pub struct SExp {
    pub kind: SExpKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum SExpKind {
    List(Bracket, Vec<SExp>),
    /// An identifier (possibly a reserved word; the parser decides).
    Symbol(String),
    /// An Int literal; `signed` when written with a glued `+`/`-`.
    Int {
        value: i64,
        signed: bool,
    },
    Float(f32),
    Bool(bool),
    /// A string literal, as its code points.
    Str(Vec<i64>),
    /// A lone `@` (the head of `(@ f tlist ilist args)`).
    At,
    /// `@name` written without a space: a shape variable, or `(@f …)`.
    AtName(String),
    /// `,` — only meaningful in the printed record syntax `{x : [] = e, …}`.
    Comma,
    /// Something unreadable, already reported.
    Error,
}

impl SExp {
    pub fn symbol(&self) -> Option<&str> {
        match &self.kind {
            SExpKind::Symbol(s) => Some(s),
            _ => None,
        }
    }

    pub fn list(&self, bracket: Bracket) -> Option<&[SExp]> {
        match &self.kind {
            SExpKind::List(b, items) if *b == bracket => Some(items),
            _ => None,
        }
    }

    /// A short description for "unexpected …" messages.
    pub fn describe(&self) -> String {
        match &self.kind {
            SExpKind::List(b, items) => match items.first() {
                None => format!("`{}{}`", b.open(), b.close()),
                Some(h) if *b == Bracket::Paren => match &h.kind {
                    SExpKind::Symbol(s) => format!("`({s} …)`"),
                    _ => "`(…)`".to_string(),
                },
                _ => format!("`{}…{}`", b.open(), b.close()),
            },
            _ => self.describe_short(),
        }
    }

    fn describe_short(&self) -> String {
        match &self.kind {
            SExpKind::List(b, items) if items.is_empty() => format!("`{}{}`", b.open(), b.close()),
            SExpKind::List(b, _) => format!("`{}…{}`", b.open(), b.close()),
            SExpKind::Symbol(s) => format!("`{s}`"),
            SExpKind::Int { value, signed: true } if *value >= 0 => format!("integer `+{value}`"),
            SExpKind::Int { value, .. } => format!("integer `{value}`"),
            SExpKind::Float(f) => format!("float `{f}`"),
            SExpKind::Bool(b) => (if *b { "`#t`" } else { "`#f`" }).to_string(),
            SExpKind::Str(_) => "a string".to_string(),
            SExpKind::At => "`@`".to_string(),
            SExpKind::AtName(n) => format!("`@{n}`"),
            SExpKind::Comma => "`,`".to_string(),
            SExpKind::Error => "an unreadable token".to_string(),
        }
    }
}

/// Haskell's `isSpace`: the Latin-1 spaces and Unicode category Zs.
pub fn is_space(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t' | '\n' | '\r' | '\u{b}' | '\u{c}' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}' | '\u{202f}' | '\u{205f}' | '\u{3000}'
    )
}

/// Characters that cannot appear in an identifier (core.md §1.1).
pub fn is_disallowed(c: char) -> bool {
    is_space(c)
        || matches!(
            c,
            '(' | ')' | '[' | ']' | '{' | '}' | '"' | ',' | '\'' | '`' | ';' | '#' | '|' | '\\' | '@'
        )
}

/// Reads a whole text into its top-level s-expressions.
pub fn read(text: &str, file: FileId, diags: &mut Vec<Diagnostic>) -> Vec<SExp> {
    Reader {
        text,
        pos: 0,
        file,
        diags,
        unterminated_string: false,
    }
    .read_all()
}

enum Token {
    Open(Bracket),
    Close(Bracket),
    Leaf(SExpKind),
}

struct Open {
    bracket: Bracket,
    start: usize,
    items: Vec<SExp>,
}

struct Reader<'a, 'd> {
    text: &'a str,
    pos: usize,
    file: FileId,
    diags: &'d mut Vec<Diagnostic>,
    /// A string ran to the end of the input (already reported).
    unterminated_string: bool,
}

impl Reader<'_, '_> {
    fn span(&self, start: usize, end: usize) -> Span {
        Span::new(self.file, start, end)
    }

    fn peek(&self) -> Option<char> {
        self.text.get(self.pos..).and_then(|s| s.chars().next())
    }

    fn peek_at(&self, n: usize) -> Option<char> {
        self.text.get(self.pos..).and_then(|s| s.chars().nth(n))
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    fn error(&mut self, start: usize, end: usize, message: impl Into<String>) -> Diagnostic {
        Diagnostic::error(self.span(start, end), message)
    }

    fn skip_trivia(&mut self) {
        while let Some(c) = self.peek() {
            if is_space(c) {
                self.bump();
            } else if c == ';' {
                while let Some(c) = self.bump() {
                    if c == '\n' {
                        break;
                    }
                }
            } else {
                break;
            }
        }
    }

    fn read_all(mut self) -> Vec<SExp> {
        let mut top: Vec<SExp> = Vec::new();
        let nesting_limit = crate::stack::nesting_limit();
        let mut stack: Vec<Open> = Vec::new();
        // While > 0, we are inside a list nested deeper than MAX_NESTING,
        // skipping tokens; `skip_start` is where that list opened.
        let mut skipping = 0usize;
        let mut skip_start = 0usize;
        loop {
            self.skip_trivia();
            let start = self.pos;
            let Some(token) = self.token() else { break };
            let end = self.pos;
            if skipping > 0 {
                match token {
                    Token::Open(_) => skipping += 1,
                    Token::Close(_) => skipping -= 1,
                    Token::Leaf(_) => {}
                }
                if skipping == 0 {
                    let node = SExp {
                        kind: SExpKind::Error,
                        span: self.span(skip_start, end),
                    };
                    push(&mut stack, &mut top, node);
                }
                continue;
            }
            match token {
                Token::Open(bracket) => {
                    if stack.len() >= nesting_limit {
                        let d = self.error(
                            start,
                            end,
                            if nesting_limit < MAX_NESTING {
                                format!(
                                    "brackets nested deeper than {nesting_limit} levels (all that the stack this process could reserve allows)"
                                )
                            } else {
                                format!("brackets nested deeper than {nesting_limit} levels")
                            },
                        );
                        self.diags.push(d);
                        skipping = 1;
                        skip_start = start;
                    } else {
                        stack.push(Open {
                            bracket,
                            start,
                            items: Vec::new(),
                        });
                    }
                }
                Token::Close(bracket) => self.close(bracket, start, end, &mut stack, &mut top),
                Token::Leaf(kind) => {
                    let node = SExp {
                        kind,
                        span: self.span(start, end),
                    };
                    push(&mut stack, &mut top, node);
                }
            }
        }
        // End of input is reported just after the last visible character.
        let eof = self.text.trim_end_matches(is_space).len();
        if skipping > 0 {
            let d = self.error(eof, eof, "unexpected end of input");
            self.diags.push(d);
        }
        // One error for the innermost unclosed bracket (none if an
        // unterminated string already swallowed the rest); the unclosed lists
        // become error nodes, so nothing inside them is reported again.
        if let Some(inner) = stack.last()
            && !self.unterminated_string
            && skipping == 0
        {
            let (line, col) = line_col(self.text, inner.start);
            let d = self
                .error(eof, eof, "unexpected end of input")
                .expected(format!("`{}`", inner.bracket.close()))
                .note(format!(
                    "the `{}` at {line}:{col} is never closed",
                    inner.bracket.open()
                ));
            self.diags.push(d);
        }
        while let Some(open) = stack.pop() {
            let node = SExp {
                kind: SExpKind::Error,
                span: self.span(open.start, eof),
            };
            push(&mut stack, &mut top, node);
        }
        top
    }

    /// A closing bracket. It closes the innermost list opened with its
    /// partner; lists still open inside that one are reported once and become
    /// error nodes. With no partner open, it closes the innermost list as an
    /// error (a wrong bracket typed): one mistake, one error.
    fn close(
        &mut self,
        bracket: Bracket,
        start: usize,
        end: usize,
        stack: &mut Vec<Open>,
        top: &mut Vec<SExp>,
    ) {
        let Some(last) = stack.last() else {
            let d = self
                .error(start, end, format!("unexpected `{}`", bracket.close()))
                .note("there is no open bracket for it to close");
            self.diags.push(d);
            return;
        };
        let partner = stack.iter().rposition(|o| o.bracket == bracket);
        if partner != Some(stack.len() - 1) {
            let (line, col) = line_col(self.text, last.start);
            let d = self
                .error(start, end, format!("unexpected `{}`", bracket.close()))
                .expected(format!("`{}`", last.bracket.close()))
                .note(format!(
                    "the `{}` at {line}:{col} is not closed",
                    last.bracket.open()
                ));
            self.diags.push(d);
        }
        let keep = partner.unwrap_or(stack.len() - 1);
        while stack.len() > keep + 1 {
            if let Some(open) = stack.pop() {
                let node = SExp {
                    kind: SExpKind::Error,
                    span: self.span(open.start, start),
                };
                push(stack, top, node);
            }
        }
        if let Some(open) = stack.pop() {
            let kind = if partner.is_some() {
                SExpKind::List(open.bracket, open.items)
            } else {
                SExpKind::Error
            };
            let node = SExp {
                kind,
                span: self.span(open.start, end),
            };
            push(stack, top, node);
        }
    }

    fn token(&mut self) -> Option<Token> {
        let start = self.pos;
        let c = self.peek()?;
        let t = match c {
            '(' => Token::Open(Bracket::Paren),
            '[' => Token::Open(Bracket::Square),
            '{' => Token::Open(Bracket::Curly),
            ')' => Token::Close(Bracket::Paren),
            ']' => Token::Close(Bracket::Square),
            '}' => Token::Close(Bracket::Curly),
            ',' => Token::Leaf(SExpKind::Comma),
            _ => return Some(Token::Leaf(self.leaf(start, c))),
        };
        self.bump();
        Some(t)
    }

    fn leaf(&mut self, start: usize, c: char) -> SExpKind {
        let next = self.peek_at(1);
        if c.is_ascii_digit() || (matches!(c, '+' | '-') && next.is_some_and(|n| n.is_ascii_digit())) {
            return self.number(start);
        }
        match c {
            '"' => self.string(start),
            '#' => {
                self.bump();
                match self.peek() {
                    Some('t') => {
                        self.bump();
                        SExpKind::Bool(true)
                    }
                    Some('f') => {
                        self.bump();
                        SExpKind::Bool(false)
                    }
                    _ => {
                        let d = self
                            .error(start, self.pos, "unexpected `#`")
                            .expected("`#t` or `#f`");
                        self.diags.push(d);
                        SExpKind::Error
                    }
                }
            }
            '@' => {
                self.bump();
                // A glued name must be one that reads as a name on its own:
                // not a number (`@-7x` is `@` and then the number `-7`).
                let signed_number = matches!(self.peek(), Some('+' | '-'))
                    && self.peek_at(1).is_some_and(|n| n.is_ascii_digit());
                match self.peek() {
                    Some(n) if !is_disallowed(n) && !n.is_ascii_digit() && !signed_number => {
                        SExpKind::AtName(self.identifier())
                    }
                    _ => SExpKind::At,
                }
            }
            '\'' | '`' | '|' | '\\' => {
                self.bump();
                let d = self.error(start, self.pos, format!("unexpected character '{c}'"));
                self.diags.push(d);
                SExpKind::Error
            }
            _ => SExpKind::Symbol(self.identifier()),
        }
    }

    fn identifier(&mut self) -> String {
        let start = self.pos;
        while self.peek().is_some_and(|c| !is_disallowed(c)) {
            self.bump();
        }
        self.text.get(start..self.pos).unwrap_or("").to_string()
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.bump();
        }
        self.pos - start
    }

    fn number(&mut self, start: usize) -> SExpKind {
        let signed = matches!(self.peek(), Some('+' | '-'));
        if signed {
            self.bump();
        }
        self.digits();
        let mut is_float = false;
        if self.peek() == Some('.') {
            self.bump();
            if self.digits() == 0 {
                let d = self
                    .error(self.pos, self.pos, "malformed float literal")
                    .expected("a digit after `.`");
                self.diags.push(d);
                return SExpKind::Error;
            }
            is_float = true;
        }
        if matches!(self.peek(), Some('e' | 'E')) {
            self.bump();
            if matches!(self.peek(), Some('+' | '-')) {
                self.bump();
            }
            if self.digits() == 0 {
                let d = self
                    .error(self.pos, self.pos, "malformed float literal")
                    .expected("the digits of the exponent");
                self.diags.push(d);
                return SExpKind::Error;
            }
            is_float = true;
        }
        let text = self.text.get(start..self.pos).unwrap_or("");
        if is_float {
            match text.parse::<f32>() {
                Ok(f) => SExpKind::Float(f),
                Err(_) => {
                    let d = self.error(start, self.pos, "malformed float literal");
                    self.diags.push(d);
                    SExpKind::Error
                }
            }
        } else {
            match text.parse::<i64>() {
                Ok(value) => SExpKind::Int { value, signed },
                Err(_) => {
                    let d = self
                        .error(start, self.pos, "integer literal does not fit in a 64-bit Int")
                        .note(format!("an Int lies between {} and {}", i64::MIN, i64::MAX));
                    self.diags.push(d);
                    SExpKind::Error
                }
            }
        }
    }

    /// A string literal with Haskell's character escapes.
    fn string(&mut self, start: usize) -> SExpKind {
        self.bump(); // the opening quote
        let mut points = Vec::new();
        let mut ok = true;
        loop {
            let Some(c) = self.bump() else {
                let d = self
                    .error(start, start + 1, "unterminated string literal")
                    .expected("a closing `\"`")
                    .note("the string runs to the end of the input");
                self.diags.push(d);
                self.unterminated_string = true;
                return SExpKind::Error;
            };
            match c {
                '"' => break,
                '\\' => {
                    let esc_start = self.pos - 1;
                    match self.escape() {
                        Ok(Some(p)) => points.push(p),
                        Ok(None) => {}
                        Err(msg) => {
                            let d = self.error(esc_start, self.pos, msg);
                            self.diags.push(d);
                            ok = false;
                        }
                    }
                }
                c => points.push(i64::from(u32::from(c))),
            }
        }
        if ok {
            SExpKind::Str(points)
        } else {
            SExpKind::Error
        }
    }

    /// After a backslash: one escape. `Ok(None)` for `\&` and string gaps.
    fn escape(&mut self) -> Result<Option<i64>, String> {
        let Some(c) = self.peek() else {
            // End of input: reported as the unterminated string.
            return Ok(None);
        };
        let simple = match c {
            'a' => Some(7),
            'b' => Some(8),
            'f' => Some(12),
            'n' => Some(10),
            'r' => Some(13),
            't' => Some(9),
            'v' => Some(11),
            '\\' => Some(92),
            '"' => Some(34),
            '\'' => Some(39),
            _ => None,
        };
        if let Some(p) = simple {
            self.bump();
            return Ok(Some(p));
        }
        if c == '&' {
            self.bump();
            return Ok(None);
        }
        if is_space(c) {
            while self.peek().is_some_and(is_space) {
                self.bump();
            }
            return if self.peek() == Some('\\') {
                self.bump();
                Ok(None)
            } else {
                Err("a string gap must end with `\\`".into())
            };
        }
        if c == '^' {
            self.bump();
            return match self.bump() {
                Some(k @ '@'..='_') => Ok(Some(i64::from(u32::from(k)) - 64)),
                _ => Err("bad control escape: `\\^` takes one of @ A-Z [ \\ ] ^ _".into()),
            };
        }
        let (radix, skip) = match c {
            'x' => (16, true),
            'o' => (8, true),
            d if d.is_ascii_digit() => (10, false),
            _ => return self.ascii_name(),
        };
        if skip {
            self.bump();
        }
        let mut value: i64 = 0;
        let mut n = 0;
        while let Some(d) = self.peek().and_then(|c| c.to_digit(radix)) {
            self.bump();
            n += 1;
            value = value
                .saturating_mul(i64::from(radix))
                .saturating_add(i64::from(d));
        }
        if n == 0 {
            return Err("numeric escape without digits".into());
        }
        if value > 0x10FFFF {
            return Err(format!("character code {value} is beyond U+10FFFF"));
        }
        Ok(Some(value))
    }

    fn ascii_name(&mut self) -> Result<Option<i64>, String> {
        const NAMES: [(&str, i64); 34] = [
            ("NUL", 0),
            ("SOH", 1),
            ("STX", 2),
            ("ETX", 3),
            ("EOT", 4),
            ("ENQ", 5),
            ("ACK", 6),
            ("BEL", 7),
            ("BS", 8),
            ("HT", 9),
            ("LF", 10),
            ("VT", 11),
            ("FF", 12),
            ("CR", 13),
            ("SO", 14),
            ("SI", 15),
            ("DLE", 16),
            ("DC1", 17),
            ("DC2", 18),
            ("DC3", 19),
            ("DC4", 20),
            ("NAK", 21),
            ("SYN", 22),
            ("ETB", 23),
            ("CAN", 24),
            ("EM", 25),
            ("SUB", 26),
            ("ESC", 27),
            ("FS", 28),
            ("GS", 29),
            ("RS", 30),
            ("US", 31),
            ("SP", 32),
            ("DEL", 127),
        ];
        let rest = self.text.get(self.pos..).unwrap_or("");
        // Longest match first: SOH before SO.
        let best = NAMES
            .iter()
            .filter(|(n, _)| rest.starts_with(n))
            .max_by_key(|(n, _)| n.len());
        match best {
            Some((name, code)) => {
                self.pos += name.len();
                Ok(Some(*code))
            }
            None => {
                self.bump();
                Err("unknown escape sequence".into())
            }
        }
    }
}

fn push(stack: &mut [Open], top: &mut Vec<SExp>, node: SExp) {
    match stack.last_mut() {
        Some(open) => open.items.push(node),
        None => top.push(node),
    }
}

/// 1-based line and column (in characters) of a byte offset in `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.matches('\n').count() + 1;
    let col = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> (Vec<SExpKind>, usize) {
        let mut diags = Vec::new();
        let items = read(text, FileId(0), &mut diags);
        (items.into_iter().map(|s| s.kind).collect(), diags.len())
    }

    fn sym(s: &str) -> SExpKind {
        SExpKind::Symbol(s.to_string())
    }

    #[test]
    fn identifiers_take_operator_characters() {
        let (k, errs) = kinds("f.+ bool->i reduce/zero n-1 x: .5 $x &t *t");
        assert_eq!(errs, 0);
        let want: Vec<SExpKind> = [
            "f.+",
            "bool->i",
            "reduce/zero",
            "n-1",
            "x:",
            ".5",
            "$x",
            "&t",
            "*t",
        ]
        .iter()
        .map(|s| sym(s))
        .collect();
        assert_eq!(k, want);
    }

    #[test]
    fn signs_glue_to_numbers_only() {
        let (k, _) = kinds("-7 +7 - 1 -x 1a");
        assert_eq!(
            k,
            vec![
                SExpKind::Int {
                    value: -7,
                    signed: true
                },
                SExpKind::Int {
                    value: 7,
                    signed: true
                },
                sym("-"),
                SExpKind::Int {
                    value: 1,
                    signed: false
                },
                sym("-x"),
                SExpKind::Int {
                    value: 1,
                    signed: false
                },
                sym("a"),
            ]
        );
    }

    #[test]
    fn int_literals_do_not_wrap() {
        assert_eq!(kinds("9223372036854775807").1, 0);
        assert_eq!(kinds("-9223372036854775808").1, 0);
        assert_eq!(kinds("9223372036854775808").1, 1);
        assert_eq!(kinds("123456789012345678901234567890").1, 1);
    }

    #[test]
    fn floats() {
        let (k, errs) = kinds("1.5 -1.5 1.0e-2 1e3 +2.0");
        assert_eq!(errs, 0);
        assert_eq!(
            k,
            vec![
                SExpKind::Float(1.5),
                SExpKind::Float(-1.5),
                SExpKind::Float(0.01),
                SExpKind::Float(1000.0),
                SExpKind::Float(2.0)
            ]
        );
        assert_eq!(kinds("1.").1, 1);
    }

    #[test]
    fn string_escapes() {
        let (k, errs) = kinds(r#""h\233llo\n\x41\o101\^A\NUL\SOH\&x\   \y""#);
        assert_eq!(errs, 0);
        assert_eq!(
            k,
            vec![SExpKind::Str(vec![
                104, 233, 108, 108, 111, 10, 65, 65, 1, 0, 1, 120, 121
            ])]
        );
    }

    #[test]
    fn brackets_and_recovery() {
        let (k, errs) = kinds("(a [b] {c}) )");
        assert_eq!(errs, 1);
        assert_eq!(k.len(), 1);
        let (_, errs) = kinds("(a ]");
        assert_eq!(errs, 1);
        let (_, errs) = kinds("((a");
        assert_eq!(errs, 1);
    }

    #[test]
    fn haskell_whitespace() {
        assert!(is_space('\u{a0}') && is_space('\u{3000}') && is_space('\u{b}'));
        assert!(!is_space('\u{2028}') && !is_space('\u{85}'));
    }

    #[test]
    fn at_names() {
        let (k, _) = kinds("@f @ f @s");
        assert_eq!(
            k,
            vec![
                SExpKind::AtName("f".into()),
                SExpKind::At,
                sym("f"),
                SExpKind::AtName("s".into())
            ]
        );
    }
}

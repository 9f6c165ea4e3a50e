//! The parser: surface s-expressions to the desugared tree (core.md §1.2
//! and the extension syntax of extensions.md §1.5, §2, §3).
//!
//! Every function here returns a node: a form that does not parse becomes an
//! `Error` node and a diagnostic, and parsing continues with its siblings.
//! Backtracking (core.md's "tried first" alternatives) is a checkpoint on
//! the diagnostic list: try a parse, and if it reported anything, drop its
//! diagnostics and take the other reading.

use crate::ast::*;
use crate::diag::Diagnostic;
use crate::reader::{Bracket, SExp, SExpKind};
use crate::span::Span;

/// Which text the parser reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// Remora source: core.md §1.2 plus our extensions.
    Source,
    /// Source plus the forms only `remora parse` prints (core.md §1.3):
    /// `{x : s = e, …}` and `(e . x)`. Used to read printed trees back.
    /// (`(empty-array [d …] T)` and `(empty-frame [d …] T)`, which
    /// `remora elaborate` prints too, read in both.)
    Tree,
}

/// The name desugaring gives the intermediate box of a multi-witness
/// `unbox`; it cannot be written in source, so it captures nothing.
pub const UNBOX_TEMP: &str = "#box";

/// Reserved words (core.md §1.1): never identifiers.
pub const RESERVED: &[&str] = &[
    "array", "frame", "t-app", "i-app", "unbox", "box", "dims", "fn", "λ", "t-fn", "tλ", "i-fn", "iλ", "A",
    "->", "→", "Forall", "∀", "Pi", "Π", "Sigma", "Σ", "let", "type", "ispace", "fun", "t-fun", "i-fun",
    "val", "def", "entry", "import", "field",
];

/// Keywords of the parenthesised expression forms that core.md lists before
/// application: once matched they commit, so `(let-x 3)` is a parse error,
/// as in remora-lang. (`i-app`/`t-app` come after application there, so
/// `(i-app-x 3)` is an application.)
const COMMITTING: &[&str] = &["array", "frame", "unbox", "let", "field"];

pub fn is_reserved(name: &str) -> bool {
    RESERVED.contains(&name)
}

/// Whether a symbol reads as a type in type position (`Int`, `&t`, `*t`):
/// such a variable alone in a `(frame [d …] x)` would read as an empty frame.
pub fn names_a_type(name: &str) -> bool {
    matches!(name, "Int" | "Bool" | "Float") || sigil_name(name, '&') || sigil_name(name, '*')
}

/// An `(import "path")` line, unresolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Import {
    pub path: String,
    pub span: Span,
}

/// One file's parse: its imports and its own declarations.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedFile {
    pub imports: Vec<Import>,
    pub decls: Vec<Decl>,
}

pub struct Parser<'d> {
    diags: &'d mut Vec<Diagnostic>,
    dialect: Dialect,
}

fn scalar(atom: Atom) -> Expr {
    let span = atom.span;
    Expr {
        kind: ExprKind::Array {
            shape: Vec::new(),
            atoms: vec![atom],
        },
        span,
    }
}

fn mk_expr(kind: ExprKind, span: Span) -> Expr {
    Expr { kind, span }
}

fn error_expr(span: Span) -> Expr {
    mk_expr(ExprKind::Error, span)
}

fn error_type(span: Span) -> Type {
    Type {
        kind: TypeKind::Error,
        span,
    }
}

/// A shape splice, flattened: nested splices merge, and a splice of exactly
/// one shape is that shape.
pub fn splice(items: Vec<Ispace>, span: Span) -> Shape {
    let mut flat = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Ispace::Shape(Shape {
                kind: ShapeKind::Splice(inner),
                ..
            }) => flat.extend(inner),
            other => flat.push(other),
        }
    }
    if flat.len() == 1
        && matches!(flat[0], Ispace::Shape(_))
        && let Some(Ispace::Shape(s)) = flat.pop()
    {
        return s;
    }
    Shape {
        kind: ShapeKind::Splice(flat),
        span,
    }
}

/// `(A T s)` with nested array types merged, outer frame first.
pub fn array_type(elem: Type, shape: Shape, span: Span) -> Type {
    let kind = match elem.kind {
        TypeKind::Array {
            elem: inner,
            shape: inner_shape,
        } => TypeKind::Array {
            elem: inner,
            shape: splice(vec![Ispace::Shape(shape), Ispace::Shape(inner_shape)], span),
        },
        kind => TypeKind::Array {
            elem: Box::new(Type {
                kind,
                span: elem.span,
            }),
            shape,
        },
    };
    Type { kind, span }
}

/// `*t` as a type: `(A &t @t)`.
fn star_type(base: &str, span: Span) -> Type {
    let elem = Type {
        kind: TypeKind::Var(Ident::new(format!("&{base}"), span)),
        span,
    };
    let shape = Shape {
        kind: ShapeKind::Var(Ident::new(format!("@{base}"), span)),
        span,
    };
    Type {
        kind: TypeKind::Array {
            elem: Box::new(elem),
            shape,
        },
        span,
    }
}

/// A type parameter as written: `&t`, or `*t` which desugars to `&t` plus `@t`.
enum TypeParamSyntax {
    Atom(TParam),
    Array(TParam, IParam),
}

/// One layer of a function binding: `t-fun`, `i-fun` or `fun` parameters.
enum Layer {
    T(Vec<TParam>),
    I(Vec<IParam>),
    V(Vec<Param>),
}

impl<'d> Parser<'d> {
    pub fn new(diags: &'d mut Vec<Diagnostic>, dialect: Dialect) -> Parser<'d> {
        Parser { diags, dialect }
    }

    /// Records a diagnostic.
    pub fn report(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    fn error(&mut self, span: Span, message: impl Into<String>) {
        self.diags.push(Diagnostic::error(span, message));
    }

    fn expected(&mut self, span: Span, message: impl Into<String>, expected: impl Into<String>) {
        self.diags
            .push(Diagnostic::error(span, message).expected(expected));
    }

    /// Runs `f`; if it reported a diagnostic, drops them and returns `None`.
    fn attempt<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> Option<T> {
        let mark = self.diags.len();
        let result = f(self);
        if self.diags.len() > mark {
            self.diags.truncate(mark);
            None
        } else {
            Some(result)
        }
    }

    fn unexpected(&mut self, s: &SExp, expected: &str) {
        if s.kind != SExpKind::Error {
            self.expected(s.span, format!("unexpected {}", s.describe()), expected);
        }
    }

    /// The span just past the last item (for "missing …" errors).
    fn missing(&mut self, form: &SExp, expected: &str) {
        let at = Span {
            file: form.span.file,
            start: form.span.end.saturating_sub(1),
            end: form.span.end,
        };
        self.expected(at, "unexpected `)`", expected);
    }

    // ----------------------------------------------------------------------
    // Programs

    pub fn file(&mut self, items: &[SExp]) -> ParsedFile {
        let mut imports = Vec::new();
        let mut decls: Vec<Decl> = Vec::new();
        for item in items {
            let head = item
                .list(Bracket::Paren)
                .and_then(|l| l.first())
                .and_then(SExp::symbol);
            match head {
                Some("import") => {
                    if let Some(import) = self.import(item) {
                        if decls.is_empty() {
                            imports.push(import);
                        } else {
                            self.diags.push(
                                Diagnostic::error(item.span, "import after a declaration")
                                    .note("imports must come before all declarations"),
                            );
                        }
                    }
                }
                Some("def") | Some("entry") => decls.extend(self.decl(item)),
                _ => {
                    let e = self.expr(item);
                    decls.push(Decl {
                        span: e.span,
                        kind: DeclKind::Expr(e),
                    });
                }
            }
        }
        ParsedFile { imports, decls }
    }

    fn import(&mut self, form: &SExp) -> Option<Import> {
        let items = form.list(Bracket::Paren)?;
        match items {
            [_, path] => match &path.kind {
                SExpKind::Str(points) => {
                    let text: Option<String> = points
                        .iter()
                        .map(|&p| u32::try_from(p).ok().and_then(char::from_u32))
                        .collect();
                    match text {
                        Some(path) => Some(Import {
                            path,
                            span: form.span,
                        }),
                        None => {
                            self.error(path.span, "import path is not valid text");
                            None
                        }
                    }
                }
                _ => {
                    self.unexpected(path, "a string: (import \"path\")");
                    None
                }
            },
            _ => {
                self.expected(form.span, "malformed import", "(import \"path\")");
                None
            }
        }
    }

    fn decl(&mut self, form: &SExp) -> Vec<Decl> {
        let Some(items) = form.list(Bracket::Paren) else {
            return Vec::new();
        };
        let span = form.span;
        match items.first().and_then(SExp::symbol) {
            Some("def") => {
                if items.len() != 2 {
                    self.expected(span, "malformed def", "(def binding)");
                    return Vec::new();
                }
                self.bind(&items[1])
                    .into_iter()
                    .map(|b| Decl {
                        kind: DeclKind::Def(b),
                        span,
                    })
                    .collect()
            }
            _ => {
                // (entry (name pat* [: type]) body)
                if items.len() != 3 {
                    self.expected(span, "malformed entry", "(entry (name param … [: type]) body)");
                    return Vec::new();
                }
                let Some(sig) = items[1].list(Bracket::Paren) else {
                    self.unexpected(&items[1], "an entry signature (name param … [: type])");
                    return Vec::new();
                };
                let Some((name, rest)) = sig.split_first() else {
                    self.unexpected(&items[1], "an entry signature (name param … [: type])");
                    return Vec::new();
                };
                let Some(name) = self.ident(name) else {
                    return Vec::new();
                };
                let (params, ret) = self.params_and_ret(rest, &items[1]);
                let body = self.expr(&items[2]);
                vec![Decl {
                    kind: DeclKind::Entry {
                        name,
                        params,
                        ret,
                        body,
                    },
                    span,
                }]
            }
        }
    }

    /// An identifier usable as a name (not reserved).
    fn ident(&mut self, s: &SExp) -> Option<Ident> {
        match &s.kind {
            SExpKind::Symbol(name) if is_reserved(name) => {
                self.expected(
                    s.span,
                    format!("`{name}` is a reserved word, not a name"),
                    "a name",
                );
                None
            }
            SExpKind::Symbol(name) => Some(Ident::new(name.clone(), s.span)),
            _ => {
                self.unexpected(s, "a name");
                None
            }
        }
    }

    /// The name in `@f` (head of an `@` application or an `@`-signature).
    fn at_name(&mut self, s: &SExp) -> Option<Ident> {
        let SExpKind::AtName(name) = &s.kind else {
            return None;
        };
        let span = Span {
            start: s.span.start.saturating_add(1),
            ..s.span
        };
        if is_reserved(name) {
            self.expected(span, format!("`{name}` is a reserved word, not a name"), "a name");
            return None;
        }
        Some(Ident::new(name.clone(), span))
    }

    // ----------------------------------------------------------------------
    // Expressions

    pub fn expr(&mut self, s: &SExp) -> Expr {
        let span = s.span;
        let atom = |kind| scalar(Atom { kind, span });
        match &s.kind {
            SExpKind::Int { value, .. } => atom(AtomKind::Int(*value)),
            SExpKind::Float(f) => atom(AtomKind::Float(*f)),
            SExpKind::Bool(b) => atom(AtomKind::Bool(*b)),
            SExpKind::Str(points) => string_literal(points, span),
            SExpKind::Symbol(name) => {
                if is_reserved(name) {
                    self.expected(
                        span,
                        format!("`{name}` is a reserved word, not a variable"),
                        "an expression",
                    );
                    error_expr(span)
                } else {
                    mk_expr(ExprKind::Var(Ident::new(name.clone(), span)), span)
                }
            }
            SExpKind::List(Bracket::Square, items) => self.bracket_frame(items, span),
            SExpKind::List(Bracket::Curly, items) => self.record(items, span),
            SExpKind::List(Bracket::Paren, items) => self.paren_expr(s, items),
            SExpKind::Error => error_expr(span),
            SExpKind::At | SExpKind::AtName(_) | SExpKind::Comma => {
                self.unexpected(s, "an expression");
                error_expr(span)
            }
        }
    }

    /// `[e …]`: a frame, flattened into an `array` or `frame` literal.
    fn bracket_frame(&mut self, items: &[SExp], span: Span) -> Expr {
        let mut e = self.bracket_frame_reversed(items, span);
        reverse_literal_shape(&mut e);
        e
    }

    /// A bracket frame whose literal shape is kept innermost-first while
    /// nested brackets are merged, so that each level adds its dimension in
    /// O(1) and deep nesting stays linear.
    fn bracket_frame_reversed(&mut self, items: &[SExp], span: Span) -> Expr {
        if items.is_empty() {
            self.diags.push(
                Diagnostic::error(span, "empty brackets `[]` are not an expression")
                    .note("an empty array is written (array [0] Int), an empty frame (frame [0] [Int 3])"),
            );
            return error_expr(span);
        }
        // A vector of literal numbers (or truth values), the commonest large
        // literal: its atoms made directly, with no expression per element
        // (a literal of millions of numbers stays a few words a number).
        let literal = |i: &SExp| match &i.kind {
            SExpKind::Int { value, .. } => Some(AtomKind::Int(*value)),
            SExpKind::Float(f) => Some(AtomKind::Float(*f)),
            SExpKind::Bool(b) => Some(AtomKind::Bool(*b)),
            _ => None,
        };
        if items.iter().all(|i| literal(i).is_some()) {
            let atoms = items
                .iter()
                .filter_map(|i| literal(i).map(|kind| Atom { kind, span: i.span }))
                .collect();
            return mk_expr(
                ExprKind::Array {
                    shape: vec![items.len() as u64],
                    atoms,
                },
                span,
            );
        }
        let elems: Vec<Expr> = items
            .iter()
            .map(|i| match &i.kind {
                SExpKind::List(Bracket::Square, inner) => self.bracket_frame_reversed(inner, i.span),
                _ => {
                    let mut e = self.expr(i);
                    reverse_literal_shape(&mut e);
                    e
                }
            })
            .collect();
        flatten_frame_reversed(elems, span)
    }

    fn record(&mut self, items: &[SExp], span: Span) -> Expr {
        if self.dialect == Dialect::Tree && items.first().and_then(SExp::symbol).is_some() {
            return self.printed_record(items, span);
        }
        if items.is_empty() {
            self.expected(span, "empty record", "fields (name shape expression)");
            return error_expr(span);
        }
        if let Some(first) = items.iter().find(|i| i.list(Bracket::Paren).is_none()) {
            self.diags.push(
                Diagnostic::error(first.span, format!("unexpected {}", first.describe()))
                    .expected("a record field (name shape expression)")
                    .note("a record is written {(x [] e) (y [2] e2) …}"),
            );
            return error_expr(span);
        }
        let mut fields = Vec::new();
        for item in items {
            match item.list(Bracket::Paren) {
                Some([name, cell, value]) => {
                    let Some(name) = self.ident(name) else {
                        continue;
                    };
                    let cell = self.record_cell(cell);
                    let value = self.expr(value);
                    fields.push(RecordField { name, cell, value });
                }
                _ => self.unexpected(item, "a record field (name shape expression)"),
            }
        }
        mk_expr(ExprKind::Record(fields), span)
    }

    fn record_cell(&mut self, s: &SExp) -> Shape {
        if let SExpKind::Int { .. } | SExpKind::Symbol(_) = &s.kind
            && !matches!(&s.kind, SExpKind::Symbol(n) if n == "_")
        {
            self.diags.push(
                Diagnostic::error(s.span, format!("unexpected {}", s.describe()))
                    .expected("a shape: [], [3], @s, (dims …) or (++ …)")
                    .note("a record field's cell is a shape: write [3], not 3"),
            );
            return Shape {
                kind: ShapeKind::Error,
                span: s.span,
            };
        }
        self.shape(s)
    }

    /// `{x : [] = e, y : [2] = e2}`, as `remora parse` prints records.
    fn printed_record(&mut self, items: &[SExp], span: Span) -> Expr {
        let mut fields = Vec::new();
        for chunk in items.split(|i| i.kind == SExpKind::Comma) {
            match chunk {
                [name, colon, cell, eq, value] if colon.symbol() == Some(":") && eq.symbol() == Some("=") => {
                    let Some(name) = self.ident(name) else {
                        continue;
                    };
                    let cell = self.shape(cell);
                    let value = self.expr(value);
                    fields.push(RecordField { name, cell, value });
                }
                _ => self.expected(span, "malformed record", "name : shape = expression"),
            }
        }
        mk_expr(ExprKind::Record(fields), span)
    }

    fn paren_expr(&mut self, form: &SExp, items: &[SExp]) -> Expr {
        let span = form.span;
        let Some(head) = items.first() else {
            self.expected(span, "empty parentheses `()`", "an expression");
            return error_expr(span);
        };
        match &head.kind {
            SExpKind::At => return self.at_app(form, items, None),
            SExpKind::AtName(_) => {
                let Some(name) = self.at_name(head) else {
                    return error_expr(span);
                };
                let f = mk_expr(ExprKind::Var(name.clone()), name.span);
                return self.at_app(form, items, Some(f));
            }
            _ => {}
        }
        if let Some(kw) = head.symbol() {
            match kw {
                "fn" | "λ" | "t-fn" | "tλ" | "i-fn" | "iλ" | "box" => {
                    // Atom forms backtrack in remora-lang; a malformed one is
                    // still best reported as itself.
                    let atom = self.atom(form);
                    return scalar(atom);
                }
                "array" => return self.array_form(form, items),
                "frame" => return self.frame_form(form, items),
                "unbox" => return self.unbox(form, items),
                "let" => return self.let_form(form, items),
                "field" => return self.field(form, items),
                "i-app" => return self.i_app(form, items),
                "t-app" => return self.t_app(form, items),
                "if" => return self.if_form(form, items),
                "rerank" => return self.rerank(form, items),
                "empty-array" | "empty-frame"
                    if items.len() == 3
                        && items.get(1).is_some_and(|s| s.list(Bracket::Square).is_some()) =>
                {
                    return self.printed_empty(form, items, kw == "empty-array");
                }
                _ => {}
            }
            if self.foreign_function_form(kw, form, items) {
                return error_expr(span);
            }
            if let Some(k) = COMMITTING.iter().find(|k| {
                kw.strip_prefix(**k)
                    .and_then(|rest| rest.chars().next())
                    .is_some_and(|c| !c.is_alphanumeric())
            }) {
                let rest = &kw[k.len()..];
                let at = Span {
                    start: head.span.start.saturating_add(k.len() as u32),
                    ..head.span
                };
                self.diags.push(
                    Diagnostic::error(at, format!("unexpected `{rest}` after the keyword `{k}`")).note(
                        format!(
                            "`{k}` is a keyword here even when glued to other characters: use another name"
                        ),
                    ),
                );
                return error_expr(span);
            }
            if matches!(kw, "def" | "entry" | "import") {
                self.error(
                    head.span,
                    format!("`{kw}` is only allowed at the top level of a program"),
                );
                return error_expr(span);
            }
            if matches!(kw, "val" | "fun" | "t-fun" | "i-fun" | "type" | "ispace") {
                self.error(
                    head.span,
                    format!("`({kw} …)` is a binding: it belongs in (let (…) body) or (def …)"),
                );
                return error_expr(span);
            }
        }
        if self.dialect == Dialect::Tree
            && let [record, dot, name] = items
            && dot.symbol() == Some(".")
        {
            let record = Box::new(self.expr(record));
            let Some(field) = self.ident(name) else {
                return error_expr(span);
            };
            return mk_expr(ExprKind::Field { record, field }, span);
        }
        if items.len() == 1 {
            let note = if matches!(head.kind, SExpKind::List(Bracket::Paren, _)) {
                "Remora has no grouping parentheses: remove the outer pair".to_string()
            } else {
                format!(
                    "Remora has no grouping parentheses: write {} alone, without the parentheses around it",
                    head.describe()
                )
            };
            self.diags.push(
                Diagnostic::error(span, "application without arguments")
                    .expected("at least one argument")
                    .note(note),
            );
            return error_expr(span);
        }
        // The applications nest one inside the other, one for each
        // argument: past the nesting limit no later phase could walk them.
        let limit = crate::stack::nesting_limit();
        if items.len() - 1 > limit {
            self.diags.push(
                Diagnostic::error(span, format!("an application of {} arguments", items.len() - 1))
                    .note(format!(
                        "each argument nests one application inside the last, and expressions nest at most {limit} levels"
                    )),
            );
            return error_expr(span);
        }
        let mut e = self.expr(head);
        for arg in &items[1..] {
            let arg = self.expr(arg);
            e = mk_expr(
                ExprKind::App {
                    func: Box::new(e),
                    arg: Box::new(arg),
                },
                span,
            );
        }
        e
    }

    /// `(lambda (x …) body)` or `(defun f (x …) body)`, another Lisp's
    /// function, whose parameter list is no Remora expression: the error
    /// says how Remora writes it. (`lambda` and `defun` are not reserved:
    /// where the list is an expression, this is an application, and the
    /// checker says the same of an unbound `lambda`.)
    ///
    /// Whether it reported one. (Apart from `paren_expr`, whose frame
    /// every level of nesting pays for.)
    #[inline(never)]
    fn foreign_function_form(&mut self, kw: &str, form: &SExp, items: &[SExp]) -> bool {
        match self.foreign_function_error(kw, form, items) {
            Some(d) => {
                self.diags.push(d);
                true
            }
            None => false,
        }
    }

    fn foreign_function_error(&mut self, kw: &str, form: &SExp, items: &[SExp]) -> Option<Diagnostic> {
        let (params, name) = match (kw, items) {
            ("lambda", [_, params, _]) => (params, None),
            ("defun", [_, name, params, _]) => (params, Some(name.symbol()?)),
            _ => return None,
        };
        let list = params.list(Bracket::Paren)?;
        if self.attempt(|p| p.expr(params)).is_some() {
            return None;
        }
        let typed: Vec<String> = list
            .iter()
            .map(|p| match &p.kind {
                SExpKind::Symbol(x) => Some(format!("({x} T)")),
                SExpKind::List(Bracket::Paren, pair) => match pair.as_slice() {
                    [x, ann] => {
                        let ann = match &ann.kind {
                            SExpKind::Symbol(t) => t.clone(),
                            SExpKind::Int { value, .. } => value.to_string(),
                            _ => "T".to_string(),
                        };
                        x.symbol().map(|x| format!("({x} {ann})"))
                    }
                    _ => None,
                },
                _ => None,
            })
            .collect::<Option<_>>()
            .unwrap_or_else(|| vec!["(x T)".to_string(), "…".to_string()]);
        let typed = typed.join(" ");
        Some(match name {
            None => Diagnostic::error(form.span, "`lambda` is not Remora's: a function is written with `fn`")
                .note(format!("write (fn ({typed}) body), each parameter with its type T (or its rank)")),
            Some(f) => Diagnostic::error(form.span, "`defun` is not Remora's: a function is defined with `fun`")
                .note(format!(
                    "write (def (fun ({f} {typed}) body)) at the top level, or bind it in (let ((fun ({f} {typed}) body)) …)"
                )),
        })
    }

    fn shape_literal(&mut self, s: &SExp) -> Option<Vec<u64>> {
        let Some(items) = s.list(Bracket::Square) else {
            self.unexpected(s, "a shape literal such as [2 3]");
            return None;
        };
        let mut dims = Vec::with_capacity(items.len());
        for item in items {
            dims.push(self.natural(item)?);
        }
        Some(dims)
    }

    fn natural(&mut self, s: &SExp) -> Option<u64> {
        match s.kind {
            SExpKind::Int { value, signed: false } => u64::try_from(value).ok(),
            _ => {
                self.unexpected(s, "a natural number");
                None
            }
        }
    }

    fn array_form(&mut self, form: &SExp, items: &[SExp]) -> Expr {
        self.literal_form(form, items, true)
    }

    fn frame_form(&mut self, form: &SExp, items: &[SExp]) -> Expr {
        self.literal_form(form, items, false)
    }

    /// `(array [d …] atom …)` / `(frame [d …] expression …)`, or with a
    /// single type instead of the elements, the empty form (tried first).
    fn literal_form(&mut self, form: &SExp, items: &[SExp], array: bool) -> Expr {
        let span = form.span;
        if items.len() < 3 {
            let shape = if array {
                "(array [d …] atom …) or (array [d …] type)"
            } else {
                "(frame [d …] expression …) or (frame [d …] type)"
            };
            self.missing(form, shape);
            return error_expr(span);
        }
        let Some(shape) = self.shape_literal(&items[1]) else {
            return error_expr(span);
        };
        if items.len() == 3 {
            let elem = if looks_like_type(&items[2]) {
                Some(self.ty(&items[2]))
            } else {
                self.attempt(|p| p.ty(&items[2]))
            };
            if let Some(elem) = elem {
                let kind = if array {
                    ExprKind::EmptyArray { shape, elem }
                } else {
                    ExprKind::EmptyFrame { shape, elem }
                };
                return mk_expr(kind, span);
            }
        }
        let kind = if array {
            let atoms = items[2..].iter().map(|a| self.atom(a)).collect();
            ExprKind::Array { shape, atoms }
        } else {
            let elems = items[2..].iter().map(|e| self.expr(e)).collect();
            ExprKind::Frame { shape, elems }
        };
        mk_expr(kind, span)
    }

    fn printed_empty(&mut self, form: &SExp, items: &[SExp], array: bool) -> Expr {
        let span = form.span;
        let [_, shape, elem] = items else {
            self.expected(span, "malformed empty literal", "(empty-array [d …] type)");
            return error_expr(span);
        };
        let Some(shape) = self.shape_literal(shape) else {
            return error_expr(span);
        };
        let elem = self.ty(elem);
        let kind = if array {
            ExprKind::EmptyArray { shape, elem }
        } else {
            ExprKind::EmptyFrame { shape, elem }
        };
        mk_expr(kind, span)
    }

    /// An element of an `array` literal: a literal, a lambda or a box.
    pub fn atom(&mut self, s: &SExp) -> Atom {
        let span = s.span;
        let kind = match &s.kind {
            SExpKind::Int { value, .. } => AtomKind::Int(*value),
            SExpKind::Float(f) => AtomKind::Float(*f),
            SExpKind::Bool(b) => AtomKind::Bool(*b),
            SExpKind::List(Bracket::Paren, items) => match items.first().and_then(SExp::symbol) {
                Some("fn" | "λ") => self.lambda(s, items),
                Some("t-fn" | "tλ") => self.t_lambda(s, items),
                Some("i-fn" | "iλ") => self.i_lambda(s, items),
                Some("box") => self.box_atom(s, items),
                _ => {
                    self.unexpected(
                        s,
                        "an atom: #t, #f, a number, (fn …), (t-fn …), (i-fn …) or (box …)",
                    );
                    AtomKind::Error
                }
            },
            SExpKind::Str(_) => {
                self.diags.push(
                    Diagnostic::error(span, "a string is not an atom")
                        .note("a string is an Int array; put it in a frame [\"ab\" \"cd\"] instead"),
                );
                AtomKind::Error
            }
            SExpKind::Error => AtomKind::Error,
            _ => {
                self.unexpected(
                    s,
                    "an atom: #t, #f, a number, (fn …), (t-fn …), (i-fn …) or (box …)",
                );
                AtomKind::Error
            }
        };
        Atom { kind, span }
    }

    /// `(fn (param …) body)`, one lambda per parameter.
    fn lambda(&mut self, form: &SExp, items: &[SExp]) -> AtomKind {
        let [_, params, body] = items else {
            self.expected(form.span, "malformed lambda", "(fn (param …) body)");
            return AtomKind::Error;
        };
        let Some(list) = params.list(Bracket::Paren).filter(|l| !l.is_empty()) else {
            self.unexpected(params, "a parameter list ((x T) …)");
            return AtomKind::Error;
        };
        let params: Vec<Param> = list.iter().filter_map(|p| self.param(p)).collect();
        if params.len() != list.len() {
            return AtomKind::Error;
        }
        let body = self.expr(body);
        nest_lambdas(params, body, form.span)
    }

    /// `(x T)`, `(x r)`, `(x all)` or `x`.
    fn param(&mut self, s: &SExp) -> Option<Param> {
        let span = s.span;
        match &s.kind {
            SExpKind::Symbol(name) => {
                let looks_like_type = name.len() > 1 && (name.starts_with('&') || name.starts_with('*'))
                    || matches!(name.as_str(), "Int" | "Bool" | "Float");
                if looks_like_type {
                    self.diags.push(
                        Diagnostic::error(span, format!("`{name}` looks like a type, not a parameter name"))
                            .note("a typed parameter is written in its own parentheses: ((x Int))"),
                    );
                    return None;
                }
                let name = self.ident(s)?;
                Some(Param {
                    name,
                    ann: ParamAnn::Infer,
                    span,
                })
            }
            SExpKind::List(Bracket::Paren, items) => {
                let [name, ann] = items.as_slice() else {
                    self.unexpected(s, "a parameter (name type)");
                    return None;
                };
                let name = self.ident(name)?;
                let ann = match &ann.kind {
                    SExpKind::Int { value, signed: false } if *value >= 0 => {
                        ParamAnn::Rank(Rank::Nat(*value as u64))
                    }
                    SExpKind::Int { .. } => {
                        self.unexpected(ann, "a type, or a rank: a natural number or `all`");
                        return None;
                    }
                    SExpKind::Symbol(r) if r == "all" => ParamAnn::Rank(Rank::All),
                    _ => ParamAnn::Type(self.ty(ann)),
                };
                Some(Param { name, ann, span })
            }
            _ => {
                self.unexpected(s, "a parameter (name type)");
                None
            }
        }
    }

    fn t_lambda(&mut self, form: &SExp, items: &[SExp]) -> AtomKind {
        let [_, params, body] = items else {
            self.expected(form.span, "malformed type abstraction", "(t-fn (&t …) body)");
            return AtomKind::Error;
        };
        let Some(params) = self.tparams(params, false) else {
            return AtomKind::Error;
        };
        let body = self.expr(body);
        let mut result = body;
        for p in params.into_iter().rev() {
            result = match p {
                TypeParamSyntax::Atom(t) => scalar_kind(
                    AtomKind::TLambda {
                        param: Box::new(t),
                        body: Box::new(result),
                    },
                    form.span,
                ),
                TypeParamSyntax::Array(t, i) => {
                    let inner = scalar_kind(
                        AtomKind::ILambda {
                            param: Box::new(i),
                            body: Box::new(result),
                        },
                        form.span,
                    );
                    scalar_kind(
                        AtomKind::TLambda {
                            param: Box::new(t),
                            body: Box::new(inner),
                        },
                        form.span,
                    )
                }
            };
        }
        take_scalar_atom(result)
    }

    fn i_lambda(&mut self, form: &SExp, items: &[SExp]) -> AtomKind {
        let [_, params, body] = items else {
            self.expected(form.span, "malformed index abstraction", "(i-fn ($d @s …) body)");
            return AtomKind::Error;
        };
        let Some(params) = self.iparams(params, false) else {
            return AtomKind::Error;
        };
        let mut result = self.expr(body);
        for p in params.into_iter().rev() {
            result = scalar_kind(
                AtomKind::ILambda {
                    param: Box::new(p),
                    body: Box::new(result),
                },
                form.span,
            );
        }
        take_scalar_atom(result)
    }

    /// `(box (i …) e T)`, `(box (i …) e)` or `(box e)`.
    fn box_atom(&mut self, form: &SExp, items: &[SExp]) -> AtomKind {
        let span = form.span;
        match items {
            [_, e] => AtomKind::Box {
                witness: None,
                body: Box::new(self.expr(e)),
                ty: None,
            },
            [_, witnesses, e, rest @ ..] if rest.len() <= 1 => {
                let Some(list) = witnesses.list(Bracket::Paren).filter(|l| !l.is_empty()) else {
                    self.unexpected(witnesses, "the witnesses (i …) of the box");
                    return AtomKind::Error;
                };
                let mut witnesses = Vec::with_capacity(list.len());
                for w in list {
                    let mark = self.diags.len();
                    witnesses.push(self.ispace(w, false));
                    if self.diags.len() > mark {
                        return AtomKind::Error;
                    }
                }
                let body = self.expr(e);
                let ty = rest.first().map(|t| self.ty(t));
                let mut layers = witnesses.into_iter().rev();
                let Some(innermost) = layers.next() else {
                    return AtomKind::Error;
                };
                let mut kind = AtomKind::Box {
                    witness: Some(Box::new(innermost)),
                    body: Box::new(body),
                    ty: None,
                };
                for w in layers {
                    kind = AtomKind::Box {
                        witness: Some(Box::new(w)),
                        body: Box::new(scalar(Atom { kind, span })),
                        ty: None,
                    };
                }
                if let AtomKind::Box { ty: slot, .. } = &mut kind {
                    *slot = ty.map(Box::new);
                }
                kind
            }
            _ => {
                self.expected(span, "malformed box", "(box (i …) expression type)");
                AtomKind::Error
            }
        }
    }

    fn tparams(&mut self, s: &SExp, allow_empty: bool) -> Option<Vec<TypeParamSyntax>> {
        let Some(list) = s.list(Bracket::Paren).filter(|l| allow_empty || !l.is_empty()) else {
            self.unexpected(s, "type parameters (&t *u …)");
            return None;
        };
        let params: Vec<TypeParamSyntax> = list.iter().filter_map(|p| self.tparam(p)).collect();
        (params.len() == list.len()).then_some(params)
    }

    fn tparam(&mut self, s: &SExp) -> Option<TypeParamSyntax> {
        let name = s.symbol().filter(|n| sigil_name(n, '&') || sigil_name(n, '*'));
        match name {
            Some(n) if n.starts_with('&') => Some(TypeParamSyntax::Atom(TParam {
                name: Ident::new(n, s.span),
            })),
            Some(n) if n.starts_with('*') => {
                let base = &n[1..];
                Some(TypeParamSyntax::Array(
                    TParam {
                        name: Ident::new(format!("&{base}"), s.span),
                    },
                    IParam {
                        sort: Sort::Shape,
                        name: Ident::new(format!("@{base}"), s.span),
                    },
                ))
            }
            _ => {
                self.unexpected(s, "a type parameter: &t (atom) or *t (array)");
                None
            }
        }
    }

    fn iparams(&mut self, s: &SExp, allow_empty: bool) -> Option<Vec<IParam>> {
        let Some(list) = s.list(Bracket::Paren).filter(|l| allow_empty || !l.is_empty()) else {
            self.unexpected(s, "index parameters ($d @s …)");
            return None;
        };
        let params: Vec<IParam> = list.iter().filter_map(|p| self.iparam(p)).collect();
        (params.len() == list.len()).then_some(params)
    }

    fn iparam(&mut self, s: &SExp) -> Option<IParam> {
        match &s.kind {
            SExpKind::Symbol(n) if sigil_name(n, '$') => Some(IParam {
                sort: Sort::Dim,
                name: Ident::new(n.clone(), s.span),
            }),
            SExpKind::AtName(n) => Some(IParam {
                sort: Sort::Shape,
                name: Ident::new(format!("@{n}"), s.span),
            }),
            _ => {
                self.unexpected(s, "an index parameter: $d (dimension) or @s (shape)");
                None
            }
        }
    }

    /// `(unbox (w … x boxed) body)`, one `unbox` per witness.
    fn unbox(&mut self, form: &SExp, items: &[SExp]) -> Expr {
        let span = form.span;
        let [_, binder, body] = items else {
            self.expected(span, "malformed unbox", "(unbox ($d … x box-expression) body)");
            return error_expr(span);
        };
        let Some(list) = binder.list(Bracket::Paren).filter(|l| l.len() >= 3) else {
            self.unexpected(binder, "(witness … variable box-expression)");
            return error_expr(span);
        };
        let (witnesses, rest) = list.split_at(list.len() - 2);
        let witnesses: Vec<IParam> = witnesses.iter().filter_map(|w| self.iparam(w)).collect();
        let var = self.ident(&rest[0]);
        let boxed = self.expr(&rest[1]);
        let body = self.expr(body);
        let (Some(var), true) = (var, witnesses.len() == list.len() - 2) else {
            return error_expr(span);
        };
        // (unbox ($d $e xs b) body) = (unbox ($d #box b) (unbox ($e xs #box) body))
        let temp = |span| Ident::new(UNBOX_TEMP, span);
        let n = witnesses.len();
        let mut result = body;
        for (i, witness) in witnesses.into_iter().enumerate().rev() {
            let is_last = i + 1 == n;
            let v = if is_last { var.clone() } else { temp(span) };
            let b = if i == 0 {
                boxed.clone()
            } else {
                mk_expr(ExprKind::Var(temp(span)), span)
            };
            result = mk_expr(
                ExprKind::Unbox {
                    witness,
                    var: v,
                    boxed: Box::new(b),
                    body: Box::new(result),
                },
                span,
            );
        }
        result
    }

    fn let_form(&mut self, form: &SExp, items: &[SExp]) -> Expr {
        let span = form.span;
        let [_, binds, body] = items else {
            self.expected(span, "malformed let", "(let (binding …) body)");
            return error_expr(span);
        };
        let Some(list) = binds.list(Bracket::Paren).filter(|l| !l.is_empty()) else {
            self.unexpected(binds, "a list of bindings ((val x e) …)");
            return error_expr(span);
        };
        let binds: Vec<Bind> = list.iter().flat_map(|b| self.bind(b)).collect();
        let body = Box::new(self.expr(body));
        mk_expr(ExprKind::Let { binds, body }, span)
    }

    fn field(&mut self, form: &SExp, items: &[SExp]) -> Expr {
        let span = form.span;
        let [_, record, name] = items else {
            self.expected(span, "malformed field projection", "(field expression name)");
            return error_expr(span);
        };
        let record = Box::new(self.expr(record));
        match self.ident(name) {
            Some(field) => mk_expr(ExprKind::Field { record, field }, span),
            None => error_expr(span),
        }
    }

    fn i_app(&mut self, form: &SExp, items: &[SExp]) -> Expr {
        let span = form.span;
        if items.len() < 3 {
            self.missing(form, "(i-app expression index …)");
            return error_expr(span);
        }
        let mut e = self.expr(&items[1]);
        let holes = self.dialect == Dialect::Tree;
        for i in &items[2..] {
            let arg = self.ispace(i, holes);
            e = mk_expr(
                ExprKind::IApp {
                    func: Box::new(e),
                    arg,
                },
                span,
            );
        }
        e
    }

    fn t_app(&mut self, form: &SExp, items: &[SExp]) -> Expr {
        let span = form.span;
        if items.len() < 3 {
            self.missing(form, "(t-app expression type …)");
            return error_expr(span);
        }
        let mut e = self.expr(&items[1]);
        for t in &items[2..] {
            let arg = if self.dialect == Dialect::Tree {
                self.ty_or_hole(t)
            } else {
                self.ty(t)
            };
            e = type_application(e, arg, written_as_array_type(t), span);
        }
        e
    }

    /// `(@ f tlist ilist arg …)` or `(@f tlist ilist arg …)`.
    fn at_app(&mut self, form: &SExp, items: &[SExp], f: Option<Expr>) -> Expr {
        let span = form.span;
        let (f, rest) = match f {
            Some(f) => (f, &items[1..]),
            None => match items.get(1) {
                Some(f) => (self.expr(f), &items[2..]),
                None => {
                    self.missing(form, "the function after `@`");
                    return error_expr(span);
                }
            },
        };
        let (Some(tlist), Some(ilist)) = (rest.first(), rest.get(1)) else {
            self.diags.push(
                Diagnostic::error(span, "`@` needs both a type list and an index list")
                    .expected("(@ f (type …) (index …) argument …)")
                    .note("write `_` for an empty list: (@iota/static _ ([5]))"),
            );
            return error_expr(span);
        };
        let mut e = f;
        if tlist.symbol() != Some("_") {
            match tlist.list(Bracket::Paren) {
                Some(types) => {
                    for t in types {
                        let arg = self.ty_or_hole(t);
                        e = type_application(e, arg, written_as_array_type(t), span);
                    }
                }
                None => {
                    self.unexpected(tlist, "a type list (T …) or `_`");
                    return error_expr(span);
                }
            }
        }
        if ilist.symbol() != Some("_") {
            match ilist.list(Bracket::Paren) {
                Some(ispaces) => {
                    for i in ispaces {
                        let arg = self.ispace(i, true);
                        e = mk_expr(
                            ExprKind::IApp {
                                func: Box::new(e),
                                arg,
                            },
                            span,
                        );
                    }
                }
                None => {
                    self.unexpected(ilist, "an index list (i …) or `_`");
                    return error_expr(span);
                }
            }
        }
        for a in &rest[2..] {
            let arg = self.expr(a);
            e = mk_expr(
                ExprKind::App {
                    func: Box::new(e),
                    arg: Box::new(arg),
                },
                span,
            );
        }
        e
    }

    fn if_form(&mut self, form: &SExp, items: &[SExp]) -> Expr {
        let span = form.span;
        let [_, c, a, b] = items else {
            self.expected(span, "malformed if", "(if condition then else)");
            return error_expr(span);
        };
        let cond = Box::new(self.expr(c));
        let then = Box::new(self.expr(a));
        let otherwise = Box::new(self.expr(b));
        mk_expr(
            ExprKind::If {
                cond,
                then,
                otherwise,
            },
            span,
        )
    }

    fn rerank(&mut self, form: &SExp, items: &[SExp]) -> Expr {
        let span = form.span;
        let [_, ranks, f] = items else {
            self.expected(span, "malformed rerank", "(rerank (rank …) function)");
            return error_expr(span);
        };
        let Some(list) = ranks.list(Bracket::Paren).filter(|l| !l.is_empty()) else {
            self.unexpected(ranks, "a list of ranks (r …), each a natural or `all`");
            return error_expr(span);
        };
        let mut out = Vec::new();
        for r in list {
            match &r.kind {
                SExpKind::Symbol(a) if a == "all" => out.push(Rank::All),
                SExpKind::Int { value, signed: false } if *value >= 0 => out.push(Rank::Nat(*value as u64)),
                _ => {
                    self.unexpected(r, "a rank: a natural number or `all`");
                    return error_expr(span);
                }
            }
        }
        let func = Box::new(self.expr(f));
        mk_expr(ExprKind::Rerank { ranks: out, func }, span)
    }

    // ----------------------------------------------------------------------
    // Bindings

    /// One binding form; `(type *t T)` gives two.
    pub fn bind(&mut self, s: &SExp) -> Vec<Bind> {
        let span = s.span;
        let items = s.list(Bracket::Paren).unwrap_or(&[]);
        let head = items.first().and_then(SExp::symbol);
        let kind = match head {
            Some("val") => self.val(s, items),
            Some("fun") => self.fun(s, items),
            Some("t-fun") => self.t_fun(s, items),
            Some("i-fun") => self.i_fun(s, items),
            Some("type") => return self.type_alias(s, items),
            Some("ispace") => self.ispace_alias(s, items),
            _ => {
                self.unexpected(
                    s,
                    "a binding: (val …), (fun …), (t-fun …), (i-fun …), (type …) or (ispace …)",
                );
                None
            }
        };
        kind.map(|kind| Bind { kind, span }).into_iter().collect()
    }

    fn val(&mut self, form: &SExp, items: &[SExp]) -> Option<BindKind> {
        let [_, target, value] = items else {
            self.expected(
                form.span,
                "malformed val",
                "(val name expression) or (val (name : type) expression)",
            );
            return None;
        };
        let (name, ty) = match &target.kind {
            SExpKind::Symbol(_) => (self.ident(target)?, None),
            SExpKind::List(Bracket::Paren, parts) => match parts.as_slice() {
                [name, colon, ty] if colon.symbol() == Some(":") => (self.ident(name)?, Some(self.ty(ty))),
                [_, colon] if colon.symbol() == Some(":") => {
                    self.missing(target, "a type after `:`");
                    return None;
                }
                // `(x :Int)`: remora-lang matches the colon as a character.
                [name, glued] if glued_colon(glued).is_some() => {
                    let name = self.ident(name)?;
                    let ty = glued_colon(glued).map(|t| self.ty(&t));
                    (name, ty)
                }
                [name, ty] if name.symbol().is_some_and(|n| n.len() > 1 && n.ends_with(':')) => {
                    self.diags.push(
                        Diagnostic::error(ty.span, format!("unexpected {}", ty.describe()))
                            .expected("`:`")
                            .note(format!(
                                "`{}` is one identifier: write `({} : …)` with spaces around the colon",
                                name.symbol().unwrap_or(""),
                                name.symbol().unwrap_or("").trim_end_matches(':')
                            )),
                    );
                    return None;
                }
                _ => {
                    self.unexpected(target, "a name or (name : type)");
                    return None;
                }
            },
            _ => {
                self.unexpected(target, "a name or (name : type)");
                return None;
            }
        };
        let expr = self.expr(value);
        Some(BindKind::Val { name, ty, expr })
    }

    /// Parameters then an optional `: type`.
    fn params_and_ret(&mut self, items: &[SExp], form: &SExp) -> (Vec<Param>, Option<Type>) {
        let (params, ret) = self.split_ret(items, form);
        let params = params.iter().filter_map(|p| self.param(p)).collect();
        (params, ret)
    }

    fn split_ret<'s>(&mut self, items: &'s [SExp], form: &SExp) -> (&'s [SExp], Option<Type>) {
        let Some(k) = items
            .iter()
            .position(|i| i.symbol() == Some(":") || glued_colon(i).is_some())
        else {
            return (items, None);
        };
        // `: T`, or `:T` (remora-lang matches the colon as a character).
        let (ret_item, extra) = match glued_colon(&items[k]) {
            Some(t) => (Some(t), &items[k + 1..]),
            None => (items.get(k + 1).cloned(), items.get(k + 2..).unwrap_or(&[])),
        };
        let ret = match ret_item {
            Some(t) => Some(self.ty(&t)),
            None => {
                self.missing(form, "a type after `:`");
                None
            }
        };
        if let Some(e) = extra.first() {
            self.unexpected(e, "`)` after the return type");
        }
        (&items[..k], ret)
    }

    fn fun(&mut self, form: &SExp, items: &[SExp]) -> Option<BindKind> {
        let [_, sig, body] = items else {
            self.expected(form.span, "malformed fun", "(fun (name param … [: type]) body)");
            return None;
        };
        let Some(sig_items) = sig.list(Bracket::Paren).filter(|l| !l.is_empty()) else {
            self.unexpected(sig, "a signature (name param … [: type])");
            return None;
        };
        let head = &sig_items[0];
        if let SExpKind::AtName(_) = &head.kind {
            // (fun (@f tplist iplist pat* [: type]) body)
            let name = self.at_name(head)?;
            let (Some(tl), Some(il)) = (sig_items.get(1), sig_items.get(2)) else {
                self.missing(sig, "a type parameter list and an index parameter list (or `_`)");
                return None;
            };
            let mut layers = Vec::new();
            if tl.symbol() != Some("_") {
                let tparams = self.tparams(tl, true)?;
                if tparams.is_empty() {
                    layers.push(Layer::T(Vec::new()));
                }
                layers.extend(type_layers(tparams));
            }
            if il.symbol() != Some("_") {
                layers.push(Layer::I(self.iparams(il, true)?));
            }
            let (params, ret) = self.params_and_ret(&sig_items[3..], sig);
            layers.push(Layer::V(params));
            let body = self.expr(body);
            return Some(layered(name, layers, ret, body, form.span));
        }
        let name = self.ident(head)?;
        let (params, ret) = self.params_and_ret(&sig_items[1..], sig);
        let body = self.expr(body);
        Some(layered(name, vec![Layer::V(params)], ret, body, form.span))
    }
}

/// Type parameters as layers: `*t` closes a `t-fun` layer with `&t` and
/// adds an `i-fun` layer for `@t`.
fn type_layers(params: Vec<TypeParamSyntax>) -> Vec<Layer> {
    let mut layers = Vec::new();
    let mut current = Vec::new();
    for p in params {
        match p {
            TypeParamSyntax::Atom(t) => current.push(t),
            TypeParamSyntax::Array(t, i) => {
                current.push(t);
                layers.push(Layer::T(std::mem::take(&mut current)));
                layers.push(Layer::I(vec![i]));
            }
        }
    }
    if !current.is_empty() {
        layers.push(Layer::T(current));
    }
    layers
}

impl Parser<'_> {
    fn t_fun(&mut self, form: &SExp, items: &[SExp]) -> Option<BindKind> {
        let (name, params, ret, body) = self.quantified_signature(form, items, "t-fun", "(&t …)")?;
        let layers = type_layers(self.tparams(params, true)?);
        let body = self.expr(body);
        Some(layered(name, layers, ret, body, form.span))
    }

    fn i_fun(&mut self, form: &SExp, items: &[SExp]) -> Option<BindKind> {
        let (name, params, ret, body) = self.quantified_signature(form, items, "i-fun", "($d @s …)")?;
        let params = self.iparams(params, true)?;
        let body = self.expr(body);
        Some(layered(name, vec![Layer::I(params)], ret, body, form.span))
    }

    /// `(KEYWORD (name PARAMS [: type]) body)`: the name, the parameter list
    /// (for the caller to read), the return annotation and the body.
    fn quantified_signature<'s>(
        &mut self,
        form: &SExp,
        items: &'s [SExp],
        keyword: &str,
        params_hint: &str,
    ) -> Option<(Ident, &'s SExp, Option<Type>, &'s SExp)> {
        let [_, sig, body] = items else {
            self.expected(
                form.span,
                format!("malformed {keyword}"),
                format!("({keyword} (name {params_hint} [: type]) body)"),
            );
            return None;
        };
        let sig_items = sig.list(Bracket::Paren).unwrap_or(&[]);
        let [name, params, rest @ ..] = sig_items else {
            self.unexpected(sig, &format!("a signature (name {params_hint} [: type])"));
            return None;
        };
        let name = self.ident(name)?;
        let (extra, ret) = self.split_ret(rest, sig);
        if let Some(e) = extra.first() {
            self.unexpected(e, "`:` or `)`");
            return None;
        }
        Some((name, params, ret, body))
    }

    fn type_alias(&mut self, form: &SExp, items: &[SExp]) -> Vec<Bind> {
        let span = form.span;
        let [_, param, ty] = items else {
            self.expected(
                span,
                "malformed type alias",
                "(type &t type) or (type *t [T s …])",
            );
            return Vec::new();
        };
        let Some(param) = self.tparam(param) else {
            return Vec::new();
        };
        let ty = self.ty(ty);
        match param {
            TypeParamSyntax::Atom(param) => vec![Bind {
                kind: BindKind::TypeAlias { param, ty },
                span,
            }],
            TypeParamSyntax::Array(t, i) => match ty.kind {
                TypeKind::Array { elem, shape } => vec![
                    Bind {
                        kind: BindKind::TypeAlias { param: t, ty: *elem },
                        span,
                    },
                    Bind {
                        kind: BindKind::IspaceAlias {
                            param: i,
                            ispace: Ispace::Shape(shape),
                        },
                        span,
                    },
                ],
                TypeKind::Error => Vec::new(),
                _ => {
                    self.diags.push(
                        Diagnostic::error(ty.span, "an array type alias must be bound to an array type")
                            .note(format!(
                                "`*{}` stands for an element type and a shape: write a type such as [Int 3]",
                                &t.name.name[1..]
                            )),
                    );
                    Vec::new()
                }
            },
        }
    }

    fn ispace_alias(&mut self, form: &SExp, items: &[SExp]) -> Option<BindKind> {
        let [_, param, ispace] = items else {
            self.expected(
                form.span,
                "malformed ispace alias",
                "(ispace $d dim) or (ispace @s shape)",
            );
            return None;
        };
        let param = self.iparam(param)?;
        let ispace = self.ispace(ispace, false);
        Some(BindKind::IspaceAlias { param, ispace })
    }

    // ----------------------------------------------------------------------
    // Types and indices

    fn ty_or_hole(&mut self, s: &SExp) -> Type {
        if s.symbol() == Some("_") {
            return Type {
                kind: TypeKind::Hole,
                span: s.span,
            };
        }
        self.ty(s)
    }

    pub fn ty(&mut self, s: &SExp) -> Type {
        let span = s.span;
        let simple = |kind| Type { kind, span };
        match &s.kind {
            SExpKind::Symbol(name) => {
                for (base, kind) in [
                    ("Int", TypeKind::Int),
                    ("Bool", TypeKind::Bool),
                    ("Float", TypeKind::Float),
                ] {
                    if name == base {
                        return simple(kind);
                    }
                    if let Some(rest) = name.strip_prefix(base) {
                        let at = Span {
                            start: span.start.saturating_add(base.len() as u32),
                            ..span
                        };
                        self.diags.push(
                            Diagnostic::error(at, format!("unexpected `{rest}` after the type `{base}`"))
                                .expected("`)` or another type"),
                        );
                        return error_type(span);
                    }
                }
                if sigil_name(name, '&') {
                    return simple(TypeKind::Var(Ident::new(name.clone(), span)));
                }
                if sigil_name(name, '*') {
                    return star_type(&name[1..], span);
                }
                self.unexpected(s, "a type");
                error_type(span)
            }
            SExpKind::List(Bracket::Square, _) => self.array_type_chain(s),
            SExpKind::List(Bracket::Curly, items) => {
                let mut fields = Vec::new();
                for item in items {
                    match item.list(Bracket::Paren) {
                        Some([name, t]) => {
                            if let Some(name) = self.ident(name) {
                                let t = self.ty(t);
                                fields.push((name, t));
                            }
                        }
                        _ => {
                            self.unexpected(item, "a record field type (name type)");
                            return error_type(span);
                        }
                    }
                }
                if fields.is_empty() {
                    self.expected(span, "empty record type", "fields (name type)");
                    return error_type(span);
                }
                simple(TypeKind::Record(fields))
            }
            SExpKind::List(Bracket::Paren, items) => self.paren_type(s, items),
            SExpKind::Error => error_type(span),
            _ => {
                self.unexpected(s, "a type");
                error_type(span)
            }
        }
    }

    /// `[T i …]` and `(A T i)`, nested ones read in one pass: the frames
    /// gathered outer first into one shape, then the element type.
    fn array_type_chain(&mut self, s: &SExp) -> Type {
        let span = s.span;
        let mut dims = Vec::new();
        let mut cur = s;
        loop {
            match &cur.kind {
                SExpKind::List(Bracket::Square, items) => {
                    let Some((elem, ds)) = items.split_first() else {
                        self.expected(cur.span, "empty brackets `[]` are not a type", "[type index …]");
                        return error_type(span);
                    };
                    for d in ds {
                        self.ispace_into(d, &mut dims);
                    }
                    cur = elem;
                }
                SExpKind::List(Bracket::Paren, items)
                    if items.len() == 3 && items.first().and_then(SExp::symbol) == Some("A") =>
                {
                    self.ispace_into(&items[2], &mut dims);
                    cur = &items[1];
                }
                _ => break,
            }
        }
        let elem = self.ty(cur);
        array_type(elem, splice(dims, span), span)
    }

    fn paren_type(&mut self, form: &SExp, items: &[SExp]) -> Type {
        let span = form.span;
        let head = items.first().and_then(SExp::symbol);
        match (head, items) {
            (Some("A"), [_, _, _]) => self.array_type_chain(form),
            (Some("->" | "→"), [_, params, result]) => {
                // A parenthesised list of types, else one type. No type form
                // starts with a type, so the first item decides.
                let params = match params.list(Bracket::Paren) {
                    Some(l) if l.first().is_none_or(could_start_type_list) => {
                        l.iter().map(|t| self.ty(t)).collect()
                    }
                    _ => vec![self.ty(params)],
                };
                let mut t = self.ty(result);
                for p in params.into_iter().rev() {
                    t = Type {
                        kind: TypeKind::Arrow {
                            param: Box::new(p),
                            result: Box::new(t),
                        },
                        span,
                    };
                }
                t
            }
            (Some("Forall" | "∀"), [_, params, body]) => {
                let Some(params) = self.tparams(params, false) else {
                    return error_type(span);
                };
                let mut t = self.ty(body);
                for p in params.into_iter().rev() {
                    t = match p {
                        TypeParamSyntax::Atom(param) => Type {
                            kind: TypeKind::Forall {
                                param,
                                body: Box::new(t),
                            },
                            span,
                        },
                        TypeParamSyntax::Array(param, i) => {
                            let pi = Type {
                                kind: TypeKind::Pi {
                                    param: i,
                                    body: Box::new(t),
                                },
                                span,
                            };
                            Type {
                                kind: TypeKind::Forall {
                                    param,
                                    body: Box::new(pi),
                                },
                                span,
                            }
                        }
                    };
                }
                t
            }
            (Some(q @ ("Pi" | "Π" | "Sigma" | "Σ")), [_, params, body]) => {
                let Some(params) = self.iparams(params, false) else {
                    return error_type(span);
                };
                let mut t = self.ty(body);
                let pi = matches!(q, "Pi" | "Π");
                for param in params.into_iter().rev() {
                    let body = Box::new(t);
                    let kind = if pi {
                        TypeKind::Pi { param, body }
                    } else {
                        TypeKind::Sigma { param, body }
                    };
                    t = Type { kind, span };
                }
                t
            }
            (Some(kw @ ("A" | "->" | "→" | "Forall" | "∀" | "Pi" | "Π" | "Sigma" | "Σ")), _) => {
                let shape = match kw {
                    "A" => "(A type index)",
                    "->" | "→" => "(-> (type …) type)",
                    "Forall" | "∀" => "(∀ (&t …) type)",
                    "Pi" | "Π" => "(Π ($d @s …) type)",
                    _ => "(Σ ($d @s …) type)",
                };
                self.expected(span, format!("malformed `{kw}` type"), shape);
                error_type(span)
            }
            _ => {
                self.unexpected(form, "a type");
                error_type(span)
            }
        }
    }

    /// An index: a dimension (tried first) or a shape. `_` is a hole where
    /// `holes` (the index arguments of `i-app` and `@`).
    pub fn ispace(&mut self, s: &SExp, holes: bool) -> Ispace {
        match &s.kind {
            SExpKind::Symbol(n) if holes && n == "_" => Ispace::Hole(s.span),
            // (A `_` dimension is written only inside a shape, `[_ 3]`.)
            SExpKind::Symbol(n) if n == "_" => {
                self.unexpected(s, "a dimension: $d, a natural, (+ …), (* …) or (- …)");
                Ispace::Dim(Dim {
                    kind: DimKind::Error,
                    span: s.span,
                })
            }
            SExpKind::Int { .. } | SExpKind::Symbol(_) => Ispace::Dim(self.dim(s)),
            SExpKind::List(Bracket::Paren, items)
                if matches!(items.first().and_then(SExp::symbol), Some("+" | "*" | "-")) =>
            {
                Ispace::Dim(self.dim(s))
            }
            SExpKind::List(Bracket::Paren, items)
                if !matches!(items.first().and_then(SExp::symbol), Some("dims" | "++")) =>
            {
                self.unexpected(
                    s,
                    "an index: a dimension ($d, a natural, (+ …), (* …), (- …)) or a shape (@s, [ … ], (dims …), (++ …))",
                );
                Ispace::Shape(Shape {
                    kind: ShapeKind::Error,
                    span: s.span,
                })
            }
            _ => Ispace::Shape(self.shape(s)),
        }
    }

    pub fn dim(&mut self, s: &SExp) -> Dim {
        let span = s.span;
        let kind = match &s.kind {
            SExpKind::Int { value, signed: false } => match u64::try_from(*value) {
                Ok(n) => DimKind::Nat(n),
                Err(_) => DimKind::Error,
            },
            SExpKind::Symbol(n) if sigil_name(n, '$') => DimKind::Var(Ident::new(n.clone(), span)),
            SExpKind::Symbol(n) if n == "_" => DimKind::Hole,
            SExpKind::List(Bracket::Paren, items) => match items.split_first() {
                Some((op, args)) if matches!(op.symbol(), Some("+" | "*" | "-")) => {
                    let args: Vec<Dim> = args.iter().map(|a| self.dim(a)).collect();
                    match op.symbol() {
                        Some("+") => DimKind::Add(args),
                        Some("*") => DimKind::Mul(args),
                        _ => DimKind::Sub(args),
                    }
                }
                _ => {
                    self.unexpected(s, "a dimension: $d, a natural, (+ …), (* …) or (- …)");
                    DimKind::Error
                }
            },
            SExpKind::Error => DimKind::Error,
            _ => {
                self.unexpected(s, "a dimension: $d, a natural, (+ …), (* …) or (- …)");
                DimKind::Error
            }
        };
        Dim { kind, span }
    }

    pub fn shape(&mut self, s: &SExp) -> Shape {
        let span = s.span;
        match &s.kind {
            SExpKind::AtName(_) => match self.shape_var(s) {
                Some(name) => Shape {
                    kind: ShapeKind::Var(name),
                    span,
                },
                None => Shape {
                    kind: ShapeKind::Error,
                    span,
                },
            },
            _ if is_splice_form(s) => {
                let mut parts = Vec::new();
                self.splice_into(s, &mut parts);
                splice(parts, span)
            }
            _ => {
                if s.kind != SExpKind::Error {
                    self.unexpected(s, "a shape: @s, [ … ], (dims …) or (++ …)");
                }
                Shape {
                    kind: ShapeKind::Error,
                    span,
                }
            }
        }
    }

    /// `@s` as a shape variable (a name may not start with a digit).
    fn shape_var(&mut self, s: &SExp) -> Option<Ident> {
        match &s.kind {
            SExpKind::AtName(n) => Some(Ident::new(format!("@{n}"), s.span)),
            _ => None,
        }
    }

    /// The items of a splice form (`[…]`, `(dims …)`, `(++ …)`), nested
    /// splices flattened into one list as they are read, so that nesting
    /// costs linear time.
    fn splice_into(&mut self, s: &SExp, acc: &mut Vec<Ispace>) {
        let Some(items) = s.list(Bracket::Square).or_else(|| s.list(Bracket::Paren)) else {
            return;
        };
        match &s.kind {
            SExpKind::List(Bracket::Square, _) => {
                for item in items {
                    self.ispace_into(item, acc);
                }
            }
            _ => {
                let (op, args) = items
                    .split_first()
                    .map_or(("", &[][..]), |(h, a)| (h.symbol().unwrap_or(""), a));
                for a in args {
                    if op == "dims" {
                        acc.push(Ispace::Dim(self.dim(a)));
                    } else if is_splice_form(a) {
                        self.splice_into(a, acc);
                    } else {
                        acc.push(Ispace::Shape(self.shape(a)));
                    }
                }
            }
        }
    }

    /// One index pushed onto a splice being built (a nested splice is spread).
    fn ispace_into(&mut self, s: &SExp, acc: &mut Vec<Ispace>) {
        if is_splice_form(s) {
            self.splice_into(s, acc);
        } else if s.symbol() == Some("_") {
            // A dimension left to be inferred (reshape's target, `[_ 3]`).
            acc.push(Ispace::Dim(self.dim(s)));
        } else {
            acc.push(self.ispace(s, false));
        }
    }
}

fn scalar_kind(kind: AtomKind, span: Span) -> Expr {
    scalar(Atom { kind, span })
}

/// The atom of a scalar array literal built by [`scalar_kind`].
fn take_scalar_atom(e: Expr) -> AtomKind {
    match e.kind {
        ExprKind::Array { mut atoms, .. } if atoms.len() == 1 => {
            atoms.pop().map_or(AtomKind::Error, |a| a.kind)
        }
        _ => AtomKind::Error,
    }
}

fn nest_lambdas(params: Vec<Param>, body: Expr, span: Span) -> AtomKind {
    let mut result = body;
    for param in params.into_iter().rev() {
        result = scalar_kind(
            AtomKind::Lambda {
                param: Box::new(param),
                body: Box::new(result),
            },
            span,
        );
    }
    take_scalar_atom(result)
}

/// Whether a type argument is written as an array type, `[T s]` or
/// `(A T s)` (core.md §1.2: only those are split; `*t` is not).
fn written_as_array_type(s: &SExp) -> bool {
    match &s.kind {
        SExpKind::List(Bracket::Square, _) => true,
        SExpKind::List(Bracket::Paren, items) => items.first().and_then(SExp::symbol) == Some("A"),
        _ => false,
    }
}

/// `(t-app e T)`; a `T` written as an array type `[T s]` is split into
/// `t-app T`, `i-app s`.
fn type_application(e: Expr, arg: Type, split: bool, span: Span) -> Expr {
    match arg.kind {
        TypeKind::Array { elem, shape } if split => {
            let t = mk_expr(
                ExprKind::TApp {
                    func: Box::new(e),
                    arg: *elem,
                },
                span,
            );
            mk_expr(
                ExprKind::IApp {
                    func: Box::new(t),
                    arg: Ispace::Shape(shape),
                },
                span,
            )
        }
        kind => mk_expr(
            ExprKind::TApp {
                func: Box::new(e),
                arg: Type { kind, span: arg.span },
            },
            span,
        ),
    }
}

/// A function binding built from layers, outermost first: each layer but the
/// last binds `name` to a function whose body re-binds `name` with the next
/// layer and returns it. The return annotation belongs to the innermost.
/// Only `_` drops a layer (the caller leaves it out); an empty `()` layer
/// stays, as a value binding.
fn layered(name: Ident, layers: Vec<Layer>, ret: Option<Type>, body: Expr, span: Span) -> BindKind {
    let mut layers = layers;
    let Some(innermost) = layers.pop() else {
        return BindKind::Val {
            name,
            ty: ret,
            expr: body,
        };
    };
    let mut kind = layer_bind(name.clone(), innermost, ret, body);
    while let Some(layer) = layers.pop() {
        let inner = Bind { kind, span };
        let body = mk_expr(
            ExprKind::Let {
                binds: vec![inner],
                body: Box::new(mk_expr(ExprKind::Var(name.clone()), span)),
            },
            span,
        );
        kind = layer_bind(name.clone(), layer, None, body);
    }
    kind
}

/// One layer as a binding; a layer without parameters binds a value.
fn layer_bind(name: Ident, layer: Layer, ret: Option<Type>, body: Expr) -> BindKind {
    let empty = match &layer {
        Layer::T(v) => v.is_empty(),
        Layer::I(v) => v.is_empty(),
        Layer::V(v) => v.is_empty(),
    };
    if empty {
        return BindKind::Val {
            name,
            ty: ret,
            expr: body,
        };
    }
    match layer {
        Layer::T(params) => BindKind::TFun {
            name,
            params,
            ret,
            body,
        },
        Layer::I(params) => BindKind::IFun {
            name,
            params,
            ret,
            body,
        },
        Layer::V(params) => BindKind::Fun {
            name,
            params,
            ret,
            body,
        },
    }
}

/// A string literal: the Int array of its code points.
fn string_literal(points: &[i64], span: Span) -> Expr {
    if points.is_empty() {
        return mk_expr(
            ExprKind::EmptyArray {
                shape: vec![0],
                elem: Type {
                    kind: TypeKind::Int,
                    span,
                },
            },
            span,
        );
    }
    let atoms = points
        .iter()
        .map(|&p| Atom {
            kind: AtomKind::Int(p),
            span,
        })
        .collect();
    mk_expr(
        ExprKind::Array {
            shape: vec![points.len() as u64],
            atoms,
        },
        span,
    )
}

/// `:T` read as one symbol: the type after a glued colon, as a symbol.
fn glued_colon(s: &SExp) -> Option<SExp> {
    let rest = s.symbol()?.strip_prefix(':').filter(|r| !r.is_empty())?;
    Some(SExp {
        kind: SExpKind::Symbol(rest.to_string()),
        span: Span {
            start: s.span.start.saturating_add(1),
            ..s.span
        },
    })
}

/// Whether an item can be the first of a list of types `(T …)` (as opposed
/// to the head of one parenthesised type such as `(A …)` or `(-> …)`).
fn could_start_type_list(s: &SExp) -> bool {
    match &s.kind {
        SExpKind::Symbol(n) => names_a_type(n) || ["Int", "Bool", "Float"].iter().any(|b| n.starts_with(b)),
        SExpKind::List(..) | SExpKind::Error => true,
        _ => false,
    }
}

/// `[…]`, `(dims …)` or `(++ …)`: a shape written as a splice.
fn is_splice_form(s: &SExp) -> bool {
    match &s.kind {
        SExpKind::List(Bracket::Square, _) => true,
        SExpKind::List(Bracket::Paren, items) => {
            matches!(items.first().and_then(SExp::symbol), Some("dims" | "++"))
        }
        _ => false,
    }
}

/// A name after a sigil (`&t`, `*t`, `$d`): not empty, not starting with a
/// digit (an identifier never does), and not reserved.
fn sigil_name(name: &str, sigil: char) -> bool {
    let mut chars = name.chars();
    chars.next() == Some(sigil) && chars.next().is_some_and(|c| !c.is_ascii_digit()) && !is_reserved(name)
}

/// A form that can only be a type: a parenthesised type form (its head is
/// a reserved word, so it is no expression).
fn looks_like_type(s: &SExp) -> bool {
    let head = s
        .list(Bracket::Paren)
        .and_then(|l| l.first())
        .and_then(SExp::symbol);
    matches!(
        head,
        Some("A" | "->" | "→" | "Forall" | "∀" | "Pi" | "Π" | "Sigma" | "Σ")
    )
}

/// Reverses the shape of an `array` or `frame` literal in place.
fn reverse_literal_shape(e: &mut Expr) {
    if let ExprKind::Array { shape, .. } | ExprKind::Frame { shape, .. } = &mut e.kind {
        shape.reverse();
    }
}

/// `flattenExp` of remora-lang: a frame of frames is one frame, a frame of
/// array literals one array literal, the first element's shape standing for
/// all (a ragged literal is left for the checker to reject). Shapes here are
/// innermost-first (see [`Parser::bracket_frame_reversed`]).
fn flatten_frame_reversed(mut elems: Vec<Expr>, span: Span) -> Expr {
    let n = elems.len() as u64;
    let all_frames = elems.iter().all(|e| matches!(e.kind, ExprKind::Frame { .. }));
    let all_arrays = elems.iter().all(|e| matches!(e.kind, ExprKind::Array { .. }));
    if !(all_frames || all_arrays) {
        // Not merged: the elements are finished, their shapes put back in
        // order (`[[[1 2]] [[3 (+ 1 3)]]]` holds a [1 2] array, not [2 1]).
        for e in &mut elems {
            reverse_literal_shape(e);
        }
        return mk_expr(
            ExprKind::Frame {
                shape: vec![n],
                elems,
            },
            span,
        );
    }
    // The first element's vectors are reused, so a chain of one-element
    // frames costs O(1) a level however many atoms it holds.
    let mut shape: Vec<u64> = Vec::new();
    let mut frame_elems: Vec<Expr> = Vec::new();
    let mut atoms: Vec<Atom> = Vec::new();
    for (i, e) in elems.into_iter().enumerate() {
        match e.kind {
            ExprKind::Frame { shape: s, elems } if i == 0 => (shape, frame_elems) = (s, elems),
            ExprKind::Array { shape: s, atoms: a } if i == 0 => (shape, atoms) = (s, a),
            ExprKind::Frame { elems, .. } => frame_elems.extend(elems),
            ExprKind::Array { atoms: a, .. } => atoms.extend(a),
            _ => {}
        }
    }
    shape.push(n);
    let kind = if all_frames {
        ExprKind::Frame {
            shape,
            elems: frame_elems,
        }
    } else {
        ExprKind::Array { shape, atoms }
    };
    mk_expr(kind, span)
}

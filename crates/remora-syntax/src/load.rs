//! Programs from files: imports resolved relative to the importing file,
//! each file loaded once, cycles and missing files reported at the import.
//!
//! The file system sits behind [`FileLoader`], so the command line, the
//! test harness and (later) the REPL share this one pipeline.

use crate::ast::{Decl, Expr, ExprKind, Program, Type, TypeKind};
use crate::diag::Diagnostic;
use crate::parser::{Dialect, Parser};
use crate::reader::{SExp, read};
use crate::source::{SourceFile, SourceMap};
use crate::span::{FileId, Span};
use std::path::{Path, PathBuf};

/// How the front end reaches files.
pub trait FileLoader {
    /// The absolute, canonical form of a path (one file, one name).
    fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf>;
    fn read_to_string(&self, path: &Path) -> std::io::Result<String>;
}

/// The real file system.
pub struct RealFs;

impl FileLoader for RealFs {
    fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf> {
        std::fs::canonicalize(path)
    }
    /// (Text that is not UTF-8 is an error holding [`crate::files::NotUtf8`].)
    fn read_to_string(&self, path: &Path) -> std::io::Result<String> {
        let bytes = crate::files::read_bounded(path, crate::files::MAX_SOURCE_BYTES)
            .map_err(std::io::Error::other)?;
        crate::files::utf8(bytes).map_err(std::io::Error::other)
    }
}

/// The real file system, confined to one directory and what lies under it
/// (`remora run --sandbox`): an import from anywhere else is refused before
/// it is read, so an error can never quote another file's line.
pub struct Confined {
    /// The directory, canonical.
    pub root: PathBuf,
}

impl Confined {
    fn outside() -> std::io::Error {
        std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "it is outside the program's directory, and --sandbox allows nothing else",
        )
    }
}

impl FileLoader for Confined {
    fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf> {
        std::fs::canonicalize(path).map_err(|e| {
            // A missing file outside is refused as outside (whether it
            // exists is not told).
            match path.parent().map(std::fs::canonicalize) {
                Some(Ok(dir)) if !dir.starts_with(&self.root) => Confined::outside(),
                Some(Err(_)) if !path.starts_with(&self.root) => Confined::outside(),
                _ => e,
            }
        })
    }
    fn read_to_string(&self, path: &Path) -> std::io::Result<String> {
        if !path.starts_with(&self.root) {
            return Err(Confined::outside());
        }
        RealFs.read_to_string(path)
    }
}

/// A parsed program and everything reported while loading it.
#[derive(Debug)]
pub struct Loaded<T> {
    pub value: T,
    pub diagnostics: Vec<Diagnostic>,
}

impl<T> Loaded<T> {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Parses one expression (`remora parse -e`, command-line arguments).
pub fn parse_expression(sources: &mut SourceMap, name: &str, text: &str, dialect: Dialect) -> Loaded<Expr> {
    parse_one(
        sources,
        name,
        text,
        dialect,
        "an expression",
        |p, s| p.expr(s),
        |span| Expr {
            kind: ExprKind::Error,
            span,
        },
    )
}

/// Parses one type (the intrinsics' signatures, tests).
pub fn parse_type(sources: &mut SourceMap, name: &str, text: &str) -> Loaded<Type> {
    parse_one(
        sources,
        name,
        text,
        Dialect::Source,
        "a type",
        |p, s| p.ty(s),
        |span| Type {
            kind: TypeKind::Error,
            span,
        },
    )
}

/// The whole text as one form, read by `read_form`.
fn parse_one<T>(
    sources: &mut SourceMap,
    name: &str,
    text: &str,
    dialect: Dialect,
    what: &str,
    read_form: impl FnOnce(&mut Parser<'_>, &SExp) -> T,
    error: impl FnOnce(Span) -> T,
) -> Loaded<T> {
    let file = sources.add(SourceFile::new(name, None, text));
    let mut diags = Vec::new();
    let items = read(text, file, &mut diags);
    let eof = Span::new(file, text.len(), text.len());
    let mut parser = Parser::new(&mut diags, dialect);
    let value = match items.as_slice() {
        [] => {
            parser_error(&mut parser, eof, "unexpected end of input", what);
            error(eof)
        }
        [one, rest @ ..] => {
            let v = read_form(&mut parser, one);
            if let Some(extra) = rest.first() {
                parser_error(
                    &mut parser,
                    extra.span,
                    &format!("unexpected {} after {what}", extra.describe()),
                    "end of input",
                );
            }
            v
        }
    };
    Loaded {
        value,
        diagnostics: diags,
    }
}

fn parser_error(p: &mut Parser<'_>, span: Span, message: &str, expected: &str) {
    p.report(Diagnostic::error(span, message).expected(expected));
}

/// Loads a program from a file on disk, with its imports.
pub fn load_program_file(sources: &mut SourceMap, loader: &dyn FileLoader, path: &Path) -> Loaded<Program> {
    let mut diags = Vec::new();
    let text = loader
        .canonicalize(path)
        .and_then(|c| loader.read_to_string(&c).map(|t| (c, t)));
    match text {
        Ok((canonical, text)) => load_program_text(
            sources,
            loader,
            &path.display().to_string(),
            Some(canonical),
            &text,
        ),
        Err(e) => {
            // Text that is not UTF-8: the error at its first bad byte.
            diags.push(
                match e
                    .get_ref()
                    .and_then(|inner| inner.downcast_ref::<crate::files::NotUtf8>())
                {
                    Some(bad) => bad.diagnostic(sources, &path.display().to_string()),
                    None => Diagnostic::error_unpositioned(format!(
                        "cannot read {}: {e}",
                        crate::files::shown(path)
                    )),
                },
            );
            Loaded {
                value: Program { decls: Vec::new() },
                diagnostics: diags,
            }
        }
    }
}

/// Loads a program whose text is already in hand (stdin, a test case).
/// `path`, when given, is the canonical path the text stands for: imports
/// resolve relative to its directory (else to the current directory).
pub fn load_program_text(
    sources: &mut SourceMap,
    loader: &dyn FileLoader,
    name: &str,
    path: Option<PathBuf>,
    text: &str,
) -> Loaded<Program> {
    let mut loading = Loading {
        sources,
        loader,
        diags: Vec::new(),
        stack: Vec::new(),
        decls: Vec::new(),
    };
    let file = loading.sources.add(SourceFile::new(name, path.clone(), text));
    loading.file(file, name, path);
    Loaded {
        value: Program { decls: loading.decls },
        diagnostics: loading.diags,
    }
}

struct Loading<'a> {
    sources: &'a mut SourceMap,
    loader: &'a dyn FileLoader,
    diags: Vec<Diagnostic>,
    /// Files whose imports are being loaded, outermost first: canonical
    /// path and the name diagnostics show.
    stack: Vec<(PathBuf, String)>,
    decls: Vec<Decl>,
}

impl Loading<'_> {
    fn file(&mut self, file: FileId, name: &str, path: Option<PathBuf>) {
        let text = self.sources.get(file).map(|f| f.text.clone()).unwrap_or_default();
        let items = read(&text, file, &mut self.diags);
        let parsed = Parser::new(&mut self.diags, Dialect::Source).file(&items);
        drop(items);
        if let Some(p) = &path {
            self.stack.push((p.clone(), name.to_string()));
        }
        let base_dir = path
            .as_deref()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let name_dir = Path::new(name)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        for import in parsed.imports {
            self.import(&base_dir, &name_dir, &import.path, import.span);
        }
        if path.is_some() {
            self.stack.pop();
        }
        self.decls.extend(parsed.decls);
    }

    fn import(&mut self, base_dir: &Path, name_dir: &Path, rel: &str, span: Span) {
        let target = base_dir.join(rel);
        let canonical = match self.loader.canonicalize(&target) {
            Ok(c) => c,
            Err(e) => {
                self.diags.push(
                    Diagnostic::error(span, format!("cannot import \"{rel}\": {e}"))
                        .note(format!("looked for {}", tidy(&name_dir.join(rel)))),
                );
                return;
            }
        };
        if let Some(pos) = self.stack.iter().position(|(p, _)| *p == canonical) {
            let cycle: Vec<String> = self.stack[pos..]
                .iter()
                .map(|(_, shown)| shown.clone())
                .chain(std::iter::once(self.stack[pos].1.clone()))
                .collect();
            self.diags.push(
                Diagnostic::error(span, format!("import cycle: \"{rel}\" is already being imported"))
                    .note(format!("the cycle: {}", cycle.join(" → "))),
            );
            return;
        }
        if self.sources.find_path(&canonical).is_some() {
            return; // loaded once already
        }
        let text = match self.loader.read_to_string(&canonical) {
            Ok(t) => t,
            Err(e) => {
                self.diags
                    .push(Diagnostic::error(span, format!("cannot import \"{rel}\": {e}")));
                return;
            }
        };
        let shown = tidy(&name_dir.join(rel));
        let file = self
            .sources
            .add(SourceFile::new(shown.clone(), Some(canonical.clone()), text));
        self.file(file, &shown, Some(canonical));
    }
}

/// A path for people: `a/b/../c` is `a/c`, `./a` is `a`.
fn tidy(path: &Path) -> String {
    use std::path::Component;
    let mut parts: Vec<Component> = Vec::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if matches!(parts.last(), Some(Component::Normal(_))) => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    parts.iter().collect::<PathBuf>().display().to_string()
}

//! Remora's front end: source files and spans, the reader (text to
//! s-expressions with bracket kinds), the parser and desugaring (to the
//! core tree of [`ast`]), imports, the tree printer of `remora parse`, and
//! diagnostics.
//!
//! Nothing here fails or panics on bad input: every entry point returns its
//! result together with the diagnostics it collected.

pub mod ast;
pub mod diag;
pub mod files;
pub mod float;
pub mod load;
pub mod parser;
pub mod print;
pub mod reader;
pub mod source;
pub mod span;
pub mod stack;
pub mod testblock;

pub use diag::{Diagnostic, Severity, render_all};
pub use load::{
    Confined, FileLoader, Loaded, RealFs, load_program_file, load_program_text, parse_expression, parse_type,
};
pub use parser::Dialect;
pub use source::{SourceFile, SourceMap};
pub use span::{FileId, Span};

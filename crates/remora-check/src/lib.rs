//! The type checker (core.md §3, issue 3): resolves names, types every
//! expression of the desugared tree and produces the typed tree of
//! [`typed`], in which every application records how it is lifted.
//!
//! Status: explicitly typed core Remora — literals, frames, variables, the
//! 76 intrinsics, application (lifting), `t-app`/`i-app`, lambdas, `let`
//! with every binding form, boxes and `unbox`, records, `if`. Inference
//! (holes, untyped parameters, `rerank`, `(box e)`) is issue 5 and is
//! reported as such.

pub mod ad;
mod check;
pub mod elaborate;
pub mod infer;
pub mod intrinsics;
pub mod typed;

pub use check::NameTable;
use remora_syntax::Diagnostic;
use remora_syntax::ast::{Expr, Program};
use typed::{TDecl, TExpr};

/// A checked program or expression, the names its variables were written
/// with, and the errors found.
pub struct Checked<T> {
    pub value: T,
    pub names: NameTable,
    pub diagnostics: Vec<Diagnostic>,
}

impl<T> Checked<T> {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// A type in remora-lang's bracket notation, with source names (what
    /// `remora check` prints).
    pub fn show(&self, t: &remora_types::Type) -> String {
        t.show(&self.names)
    }

    /// A type as the documentation writes it, with source names (what
    /// messages show).
    pub fn show_grouped(&self, t: &remora_types::Type) -> String {
        t.show_grouped(&self.names)
    }
}

/// How to check.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Infer missing instantiations (extensions.md §1); off, the checker
    /// is core.md's, which requires every instantiation written.
    pub inference: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options { inference: true }
    }
}

/// Checks a whole program: each declaration in the scope of the earlier ones.
pub fn check_program(program: &Program) -> Checked<Vec<TDecl>> {
    check_program_with(program, Options::default())
}

/// `check_program` with options.
pub fn check_program_with(program: &Program, options: Options) -> Checked<Vec<TDecl>> {
    let mut c = check::Checker::new();
    c.inference = options.inference;
    let value = c.program(program);
    let checked = Checked {
        value,
        names: c.names,
        diagnostics: c.diags,
    };
    if checked.has_errors() || !ad::uses_ad(&checked.value) {
        return checked;
    }
    differentiate(checked)
}

/// A checked program whose `jvp`, `vjp` and `grad` forms are replaced by
/// their derivative programs (`ad`), checked again; the errors of the
/// forms that cannot be differentiated otherwise. A form differentiating a
/// function that takes derivatives itself waits for a later round, when
/// those are derivative programs: each round replaces the innermost.
fn differentiate(checked: Checked<Vec<TDecl>>) -> Checked<Vec<TDecl>> {
    let mut checked = differentiate_once(checked);
    // (Each round replaces at least one form, the innermost; a bound on
    // the rounds all the same.)
    for _ in 0..ROUNDS {
        if checked.has_errors() || !ad::uses_ad(&checked.value) {
            return checked;
        }
        checked = differentiate_once(checked);
    }
    if ad::uses_ad(&checked.value) && !checked.has_errors() {
        checked
            .diagnostics
            .push(remora_syntax::Diagnostic::error_unpositioned(format!(
                "derivatives nested more than {ROUNDS} deep"
            )));
    }
    checked
}

/// How deep derivatives may be nested (a derivative of a derivative …).
const ROUNDS: usize = 8;

/// One round of [`differentiate`].
fn differentiate_once(mut checked: Checked<Vec<TDecl>>) -> Checked<Vec<TDecl>> {
    match elaborate::differentiated(&checked.value, &checked.names) {
        Ok(program) => {
            let mut c = check::Checker::new();
            let value = c.program(&program);
            let mut diagnostics = checked.diagnostics;
            diagnostics.extend(c.diags.into_iter().map(|d| {
                if d.is_error() {
                    remora_syntax::Diagnostic::error_unpositioned(format!(
                        "internal: the derivative program does not check: {}",
                        d.message
                    ))
                } else {
                    d
                }
            }));
            Checked {
                value,
                names: c.names,
                diagnostics,
            }
        }
        Err(errors) => {
            checked.diagnostics.extend(errors);
            checked
        }
    }
}

/// Checks one expression (`remora check -e`).
pub fn check_expression(e: &Expr) -> Checked<Option<TExpr>> {
    let mut c = check::Checker::new();
    // An expression is a scope of its own: its automatic unboxes close in
    // it, boxed again where its result's type needs their witnesses.
    let value = c.expr_top(e);
    Checked {
        value,
        names: c.names,
        diagnostics: c.diags,
    }
}

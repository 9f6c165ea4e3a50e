//! The index language of Remora (core.md §3): dimensions (naturals,
//! variables, `+`, `*`, `-`) and shapes (sequences of dimensions and shape
//! variables), in a normal form, with the decisions the checker needs —
//! equality, prefix and suffix of shapes that contain variables — and
//! substitution.
//!
//! This is the pure-Rust replacement for remora-lang's z3 queries: a
//! normaliser plus a decision procedure that answers [`Truth::Yes`] only
//! when the relation holds for every valuation, [`Truth::No`] only when it
//! fails for every valuation (of naturals), and [`Truth::Unknown`] otherwise,
//! so that a caller can say "cannot prove" instead of guessing.

pub mod dim;
pub mod shape;

pub use dim::{DVar, Dim};
pub use shape::{SVar, Seg, Shape};

/// The answer to a question about indices with variables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Truth {
    /// Holds for every valuation of the variables.
    Yes,
    /// Fails for every valuation of the variables (as naturals).
    No,
    /// Neither could be shown.
    Unknown,
}

impl Truth {
    pub fn is_yes(self) -> bool {
        self == Truth::Yes
    }

    /// Conjunction: `Yes` only if both are, `No` if either is.
    pub fn and(self, other: Truth) -> Truth {
        match (self, other) {
            (Truth::No, _) | (_, Truth::No) => Truth::No,
            (Truth::Yes, Truth::Yes) => Truth::Yes,
            _ => Truth::Unknown,
        }
    }
}

//! Remora's static semantics without names: types, and the index language
//! (core.md §3): dimensions (naturals,
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
//!
//! [`frame::apply`] is where lifting is decided: the application rule that
//! gives every application its principal frame and each part's frame and
//! cell.

pub mod dim;
pub mod frame;
pub mod shape;
pub mod ty;

pub use dim::{DVar, Dim, EvalError};
pub use frame::{AppError, Lifted, apply, principal_frame};
pub use shape::{SVar, Seg, Shape};
pub use ty::{Atom, IVar, Index, Names, TVar, Type};

/// The most axes an array type may have, as in NumPy. Types carry their
/// shapes written out, and inference tries each split of an argument's
/// shape into frame and cell, so the checker's work and memory per
/// expression grow with the square of the rank; this bound keeps them
/// small on any input. (A value built at run time, inside a box, may have
/// more.)
pub const MAX_RANK: usize = 64;

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

//! Where lifting is decided: the application rule of core.md §3.
//!
//! For `(f a)` with `f : [(-> P R) Ff]` (an array of functions with frame
//! `Ff`) and `a : [A Sa]`, where `P = [A Sp]`: the atom types must agree;
//! the parameter's cell shape `Sp` must be a suffix of `Sa`, leaving the
//! argument's frame `Fa = Sa \ Sp`; one of `Ff`, `Fa` must be a prefix of the
//! other, and the longer is the *principal frame*. The result is
//! `[R principal]`: one result cell per position of the principal frame,
//! the function array and the argument cells replicated to it.

use crate::Truth;
use crate::shape::Shape;
use crate::ty::{Atom, Type};

/// What the rule decided for one application: everything an interpreter or
/// a compiler needs to run it as a loop over the principal frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lifted {
    /// The frame of the function array (`Ff`).
    pub fun_frame: Shape,
    /// The argument's frame (`Fa`).
    pub arg_frame: Shape,
    /// The cell shape the function consumes (`Sp`).
    pub arg_cell: Shape,
    /// The larger of `Ff` and `Fa`.
    pub principal: Shape,
    /// `[R principal]`.
    pub result: Type,
}

/// Why an application is ill-typed, with what a message needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AppError {
    /// The function position does not hold functions.
    NotAFunction,
    /// `Ill-typed application`: the parameter's and argument's atom types differ.
    AtomMismatch { param: Atom, arg: Atom, why: Truth },
    /// `Ill-shaped application`: the parameter's cell is not a suffix of the
    /// argument's shape.
    CellMismatch { param: Type, arg: Type, why: Truth },
    /// `Ill-shaped application`: the function's and argument's frames are
    /// not prefix-related.
    FrameMismatch {
        fun_frame: Shape,
        arg_frame: Shape,
        why: Truth,
    },
}

/// The application rule.
pub fn apply(fun: &Type, arg: &Type) -> Result<Lifted, AppError> {
    let Atom::Arrow(param, result) = &fun.atom else {
        return Err(AppError::NotAFunction);
    };
    match param.atom.equals(&arg.atom) {
        Truth::Yes => {}
        why => {
            return Err(AppError::AtomMismatch {
                param: param.atom.clone(),
                arg: arg.atom.clone(),
                why,
            });
        }
    }
    let arg_frame = arg
        .shape
        .strip_suffix(&param.shape)
        .map_err(|why| AppError::CellMismatch {
            param: (**param).clone(),
            arg: arg.clone(),
            why,
        })?;
    let principal = principal_frame(&fun.shape, &arg_frame).map_err(|why| AppError::FrameMismatch {
        fun_frame: fun.shape.clone(),
        arg_frame: arg_frame.clone(),
        why,
    })?;
    Ok(Lifted {
        fun_frame: fun.shape.clone(),
        arg_frame,
        arg_cell: param.shape.clone(),
        result: result.lift(&principal),
        principal,
    })
}

/// The larger of two frames when one is a prefix of the other.
pub fn principal_frame(a: &Shape, b: &Shape) -> Result<Shape, Truth> {
    match (a.is_prefix_of(b), b.is_prefix_of(a)) {
        (Truth::Yes, _) => Ok(b.clone()),
        (_, Truth::Yes) => Ok(a.clone()),
        (Truth::No, Truth::No) => Err(Truth::No),
        _ => Err(Truth::Unknown),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::dim::Dim;
    use crate::ty::Numbered;

    fn shape(dims: &[u64]) -> Shape {
        Shape::from_dims(dims.iter().map(|&d| Dim::nat(d)))
    }
    fn ints(dims: &[u64]) -> Type {
        Type::array(Atom::Int, shape(dims))
    }
    fn plus() -> Type {
        Type::arrow(
            Type::scalar(Atom::Int),
            Type::arrow(Type::scalar(Atom::Int), Type::scalar(Atom::Int)),
        )
    }

    #[test]
    fn curried_lifting_agrees_with_the_simultaneous_frame() {
        // (+ [1 2] [[1 2 3] [4 5 6]]): a [2] array of partial applications,
        // then applied with frame [2 3].
        let first = apply(&plus(), &ints(&[2])).unwrap();
        assert_eq!(first.principal, shape(&[2]));
        assert_eq!(first.result.show(&Numbered), "[(-> Int Int) 2]");
        let second = apply(&first.result, &ints(&[2, 3])).unwrap();
        assert_eq!(second.fun_frame, shape(&[2]));
        assert_eq!(second.arg_frame, shape(&[2, 3]));
        assert_eq!(second.result.show(&Numbered), "[Int 2 3]");
    }

    #[test]
    fn frames_must_be_prefix_related() {
        let first = apply(&plus(), &ints(&[3])).unwrap();
        assert!(matches!(
            apply(&first.result, &ints(&[2, 2])),
            Err(AppError::FrameMismatch { why: Truth::No, .. })
        ));
    }

    #[test]
    fn cells_must_be_suffixes() {
        // (@flatten (Int) (3 1 []) [1 2 3]): parameter [Int 3 1], argument [Int 3].
        let f = Type::arrow(ints(&[3, 1]), ints(&[3]));
        assert!(matches!(
            apply(&f, &ints(&[3])),
            Err(AppError::CellMismatch { why: Truth::No, .. })
        ));
        // A vector parameter lifts over a matrix's rows.
        let sum_row = Type::arrow(ints(&[3]), Type::scalar(Atom::Int));
        let lifted = apply(&sum_row, &ints(&[4, 3])).unwrap();
        assert_eq!(lifted.result.show(&Numbered), "[Int 4]");
        assert_eq!(lifted.arg_cell, shape(&[3]));
    }

    #[test]
    fn atom_types_must_agree() {
        let not = Type::arrow(Type::scalar(Atom::Bool), Type::scalar(Atom::Bool));
        assert!(matches!(
            apply(&not, &ints(&[])),
            Err(AppError::AtomMismatch { why: Truth::No, .. })
        ));
        assert_eq!(apply(&ints(&[2]), &ints(&[])), Err(AppError::NotAFunction));
    }
}

//! Explicit maps raised back to the typed tree, for the interpreter to run:
//! how the lowering is tested for meaning, not only for form (the suite
//! runs every case lowered and raised, and compares with the original).
//!
//! A map is a lambda of its bound variables applied to their arrays, which
//! the application rule lifts over exactly the map's frame (each array is
//! the frame followed by its variable's type); captured variables are free
//! in the lambda. A map whose body only applies a function from outside to
//! its variables, in order, is that function applied to the arrays (the
//! lifted application it came from: the interpreter knows `f.+` lifted as
//! `f.+`, and reduces by it in its own order). A map over the empty frame is a `let`; an application of
//! one function to its cells is the curried application with nothing
//! lifted. Positions are not kept: the raised tree's spans are empty.

use crate::maps::{Atom, Decl, Expr, Kind, Program};
use remora_check::typed::{TAtom, TAtomKind, TDecl, TExpr, TExprKind, VarId};
use remora_syntax::Span;
use remora_types::{Type, apply};

/// The program as a typed tree, or why a node could not be raised (a type
/// the application rule rejects: a lowering bug).
pub fn raise_program(p: &Program) -> Result<Vec<TDecl>, String> {
    p.decls
        .iter()
        .map(|d| {
            Ok(match d {
                Decl::Def {
                    var,
                    name,
                    entry,
                    value,
                } => TDecl::Def {
                    var: *var,
                    name: name.clone(),
                    entry: *entry,
                    value: raise(value)?,
                },
                Decl::Expr(e) => TDecl::Expr(raise(e)?),
            })
        })
        .collect()
}

fn node(kind: TExprKind, ty: Type) -> TExpr {
    TExpr {
        kind,
        ty,
        span: Span::default(),
    }
}

/// `(f a)`, lifted as the application rule says.
fn applied(f: TExpr, a: TExpr) -> Result<TExpr, String> {
    let lifted = apply(&f.ty, &a.ty).map_err(|e| format!("cannot raise an application: {e:?}"))?;
    let ty = lifted.result.clone();
    Ok(node(
        TExprKind::App {
            func: Box::new(f),
            arg: Box::new(a),
            lifted,
        },
        ty,
    ))
}

fn raise(e: &Expr) -> Result<TExpr, String> {
    let kind = match &e.kind {
        Kind::Array { shape, atoms } => TExprKind::Array {
            shape: shape.clone(),
            atoms: atoms
                .iter()
                .map(|a| {
                    Ok(TAtom {
                        kind: raise_atom(a)?,
                        span: Span::default(),
                    })
                })
                .collect::<Result<_, String>>()?,
        },
        Kind::Frame { shape, elems } => TExprKind::Frame {
            shape: shape.clone(),
            elems: elems.iter().map(raise).collect::<Result<_, _>>()?,
        },
        Kind::Var(v) => TExprKind::Var(*v),
        // (A trace of a string literal's text is `trace` again.)
        Kind::Prim("trace/text") => TExprKind::Intrinsic("trace"),
        Kind::Prim(name) => TExprKind::Intrinsic(name),
        Kind::App { func, args } => {
            let mut f = raise(func)?;
            for a in args {
                f = applied(f, raise(a)?)?;
            }
            return Ok(f);
        }
        Kind::TApp { func, arg } => TExprKind::TApp {
            func: Box::new(raise(func)?),
            arg: arg.clone(),
        },
        Kind::IApp { func, arg } => TExprKind::IApp {
            func: Box::new(raise(func)?),
            arg: arg.clone(),
        },
        Kind::Map { frame, binds, body } if frame.is_scalar() => {
            let mut out = raise(body)?;
            for b in binds.iter().rev() {
                let ty = out.ty.clone();
                out = node(
                    TExprKind::Let {
                        var: b.var,
                        value: Box::new(raise(&b.value)?),
                        body: Box::new(out),
                    },
                    ty,
                );
            }
            return Ok(out);
        }
        // A map whose body applies a function from outside it to its
        // cells, each once and in order (among variables from outside):
        // the lifted application it was lowered from, `(f e1 … en)`.
        Kind::Map { binds, body, .. } if direct(binds, body).is_some() => {
            let Some((func, args)) = direct(binds, body) else {
                return Err("cannot raise a map".into());
            };
            let mut f = raise(func)?;
            for a in args {
                let a = match binds
                    .iter()
                    .find(|b| matches!(a.kind, Kind::Var(v) if v == b.var))
                {
                    Some(b) => raise(&b.value)?,
                    None => raise(a)?,
                };
                f = applied(f, a)?;
            }
            return Ok(f);
        }
        Kind::Map { binds, .. } if binds.is_empty() => {
            return Err("cannot raise a map over a frame that binds nothing".into());
        }
        Kind::Map { binds, body, .. } => {
            // λ (v1) … λ (vn). body, applied to the arrays in order.
            let mut f = raise(body)?;
            for b in binds.iter().rev() {
                let ty = Type::arrow(b.ty.clone(), f.ty.clone());
                f = node(
                    TExprKind::Array {
                        shape: Vec::new(),
                        atoms: vec![TAtom {
                            kind: TAtomKind::Lambda {
                                param: b.var,
                                body: Box::new(f),
                            },
                            span: Span::default(),
                        }],
                    },
                    ty,
                );
            }
            for b in binds {
                f = applied(f, raise(&b.value)?)?;
            }
            return Ok(f);
        }
        Kind::Unbox {
            witness,
            binder,
            var,
            boxed,
            body,
            ..
        } => TExprKind::Unbox {
            witness: *witness,
            binder: *binder,
            var: *var,
            boxed: Box::new(raise(boxed)?),
            body: Box::new(raise(body)?),
        },
        Kind::Record(fields) => TExprKind::Record(
            fields
                .iter()
                .map(|(n, x)| Ok((n.clone(), raise(x)?)))
                .collect::<Result<_, String>>()?,
        ),
        Kind::Field { record, field } => TExprKind::Field {
            record: Box::new(raise(record)?),
            field: field.clone(),
        },
        Kind::If {
            cond,
            then,
            otherwise,
        } => TExprKind::If {
            cond: Box::new(raise(cond)?),
            then: Box::new(raise(then)?),
            otherwise: Box::new(raise(otherwise)?),
        },
    };
    Ok(node(kind, e.ty.clone()))
}

/// The function and arguments of a map body `(f a1 … an)` that applies
/// `f` (a variable not bound by the map, or an intrinsic, instantiated or
/// not) to variables: each of the map's once, in order, and others from
/// outside it.
fn direct<'e>(binds: &[crate::maps::Bind], body: &'e Expr) -> Option<(&'e Expr, &'e [Expr])> {
    let Kind::App { func, args } = &body.kind else {
        return None;
    };
    let bound = |v: VarId| binds.iter().position(|b| b.var == v);
    let head = func.instantiated();
    let outside = match &head.kind {
        Kind::Prim(_) => true,
        Kind::Var(f) => bound(*f).is_none(),
        _ => false,
    };
    let mut next = 0;
    for a in args {
        let Kind::Var(v) = a.kind else {
            return None;
        };
        if let Some(k) = bound(v) {
            if k != next {
                return None;
            }
            next += 1;
        }
    }
    (outside && next == binds.len() && !binds.is_empty()).then_some((&**func, args.as_slice()))
}

fn raise_atom(a: &Atom) -> Result<TAtomKind, String> {
    Ok(match a {
        Atom::Bool(b) => TAtomKind::Bool(*b),
        Atom::Int(n) => TAtomKind::Int(*n),
        Atom::Float(x) => TAtomKind::Float(*x),
        Atom::Lambda { param, body, .. } => TAtomKind::Lambda {
            param: *param,
            body: Box::new(raise(body)?),
        },
        Atom::TLambda { param, body } => TAtomKind::TLambda {
            param: *param,
            body: Box::new(raise(body)?),
        },
        Atom::ILambda { param, body } => TAtomKind::ILambda {
            param: *param,
            body: Box::new(raise(body)?),
        },
        Atom::Box { witness, body } => TAtomKind::Box {
            witness: witness.clone(),
            body: Box::new(raise(body)?),
        },
    })
}

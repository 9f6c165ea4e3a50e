//! Vertical fusion of maps (the first rule of the combinator level):
//! a map whose result is bound by a `let` and used once, as an array that
//! another map over the same frame iterates, is computed inside that map,
//! cell by cell, instead of into an array of its own.
//!
//! ```text
//! (let ((t (map [n] ((x a)) (f.* x 2.0))))        (map [n] ((x a) (y b))
//!   (map [n] ((p t) (y b)) (f.+ p y)))        ⟹    (let ((p (f.* x 2.0))) (f.+ p y)))
//! ```
//!
//! Each fused map's variables join the consumer's, its body is bound (by
//! a `let` inside the consumer) to the variable that iterated its result;
//! nothing else moves, so what is computed, and in what order for each
//! cell, is unchanged. Chains fuse to one map: a whole-array expression of
//! elementwise steps becomes one map whose body is the steps for one cell.
//!
//! A lambda written in place and applied to variables (a lifted `(fn ((e
//! Float)) …)`, the map's cell its argument) is a `let` of its parameters
//! first, so that the maps of its body fuse, or stay delayed, as a named
//! function's do.

use crate::maps::{Atom, Bind, Decl, Expr, Kind, Program};
use remora_check::typed::VarId;
use remora_types::Shape;

/// The program with its map chains fused.
pub fn fuse_program(p: &Program) -> Program {
    // A program that traces keeps its maps apart: fused, the cells of two
    // maps that trace would print interleaved, not map after map.
    if traces(p) {
        return p.clone();
    }
    let mut names = p.var_names.clone();
    let decls = p
        .decls
        .iter()
        .map(|d| match d {
            Decl::Def {
                var,
                name,
                entry,
                value,
            } => Decl::Def {
                var: *var,
                name: name.clone(),
                entry: *entry,
                value: fuse(value, &mut names),
            },
            Decl::Expr(e) => Decl::Expr(fuse(e, &mut names)),
        })
        .collect();
    Program {
        decls,
        var_names: names,
    }
}

/// Whether the program applies `trace` or `trace-file` anywhere.
pub(crate) fn traces(p: &Program) -> bool {
    let mut found = false;
    for d in &p.decls {
        let (Decl::Def { value: e, .. } | Decl::Expr(e)) = d;
        e.each(&mut |x| found |= matches!(x.kind, Kind::Prim("trace" | "trace/text" | "trace-file")));
    }
    found
}

/// `e` with its map chains fused, innermost first.
fn fuse(e: &Expr, names: &mut Vec<String>) -> Expr {
    let e = e.map_children(&mut |c| fuse(c, names));
    match e.kind {
        Kind::Map { frame, binds, body } if frame.is_scalar() => fuse_let(binds, *body, e.ty, names),
        Kind::App { func, args } => match applied_lambda(&func, &args) {
            Some((binds, body)) => fuse_let(binds, body, e.ty, names),
            None => Expr {
                kind: Kind::App { func, args },
                ty: e.ty,
            },
        },
        kind => Expr { kind, ty: e.ty },
    }
}

/// `((λ (x) (λ (y) body)) a b)`, a lambda written in place applied to
/// variables: its parameters bound to them and its body, `(let ((x a) (y
/// b)) body)` (each variable is bound once in the program, so nothing is
/// captured). The same cells in the same names, the same steps.
fn applied_lambda(func: &Expr, args: &[Expr]) -> Option<(Vec<Bind>, Expr)> {
    let mut binds = Vec::with_capacity(args.len());
    let mut f = func;
    for a in args {
        let (Kind::Var(_), Kind::Array { shape, atoms }) = (&a.kind, &f.kind) else {
            return None;
        };
        let (
            [],
            [
                Atom::Lambda {
                    param,
                    param_ty,
                    body,
                },
            ],
        ) = (shape.as_slice(), atoms.as_slice())
        else {
            return None;
        };
        binds.push(Bind {
            var: *param,
            ty: param_ty.clone(),
            value: a.clone(),
        });
        f = body;
    }
    (!binds.is_empty()).then(|| (binds, f.clone()))
}

/// `b` appended to `out`, the bindings of a `let` it is bound to first.
fn flatten_into(out: &mut Vec<Bind>, b: Bind) {
    match b.value.kind {
        Kind::Map { frame, binds, body } if frame.is_scalar() => {
            for inner in binds {
                flatten_into(out, inner);
            }
            flatten_into(
                out,
                Bind {
                    var: b.var,
                    ty: b.ty,
                    value: *body,
                },
            );
        }
        kind => out.push(Bind {
            var: b.var,
            ty: b.ty,
            value: Expr { kind, ty: b.value.ty },
        }),
    }
}

/// How many times `v` occurs in `e`.
fn uses(e: &Expr, v: VarId) -> usize {
    let mut n = 0;
    e.each(&mut |x| {
        if matches!(x.kind, Kind::Var(w) if w == v) {
            n += 1;
        }
    });
    n
}

/// `(let (binds) body)`, with each bound map that the body (a map over
/// the same frame) iterates, and nothing else uses, fused into it. A bound
/// `let` is flattened into this one first (`(let ((x (let ((y e)) b)))
/// …)` is `(let ((y e) (x b)) …)`: variables are unique), so that the
/// maps of nested arguments meet their consumer.
fn fuse_let(binds: Vec<Bind>, mut body: Expr, ty: remora_types::Type, names: &mut Vec<String>) -> Expr {
    let mut flat = Vec::with_capacity(binds.len());
    for b in binds {
        flatten_into(&mut flat, b);
    }
    let mut binds = flat;
    let mut k = binds.len();
    while k > 0 {
        k -= 1;
        let (fusable, split) = {
            let b = &binds[k];
            let Kind::Map { frame, .. } = &b.value.kind else {
                continue;
            };
            let elsewhere: usize = binds[k + 1..].iter().map(|later| uses(&later.value, b.var)).sum();
            let once = elsewhere == 0 && uses(&body, b.var) == 1;
            let split =
                once && consumer_slot(&body, frame, b.var).is_none() && splits_for(&body, &b.value, b.var);
            (
                once && (split || consumer_slot(&body, frame, b.var).is_some()),
                split,
            )
        };
        if !fusable {
            continue;
        }
        let producer = binds.remove(k);
        if split {
            if let Kind::Map { frame, .. } = &producer.value.kind {
                body = split_consumer(body, frame, names);
            }
            // The producer's cell (a map over the rest of the frame) then
            // fuses into the consumer's inner map.
            body = fuse(&fuse_into(body, producer), names);
            continue;
        }
        body = fuse_into(body, producer);
    }
    if binds.is_empty() {
        return body;
    }
    Expr {
        kind: Kind::Map {
            frame: Shape::scalar(),
            binds,
            body: Box::new(body),
        },
        ty,
    }
}

/// Whether the map `body` over a frame `P ++ G` binds a variable to `v`,
/// the result of `producer`, a map over `P` (G not empty): split into a
/// map over `P` of maps over `G`, the consumer fuses with the producer at
/// the outer level, each of the producer's cells computed where the
/// consumer reads it, a `G` of cells at a time (instead of all `P ++ G`
/// into an array of their own). A producer's cell that is itself a map
/// over `G` (a nested map, `(map [r] … (map [c] …))`, read by one map over
/// `[r c]`) then fuses at the inner level too.
fn splits_for(body: &Expr, producer: &Expr, v: VarId) -> bool {
    let (
        Kind::Map {
            frame: consumer,
            binds,
            ..
        },
        Kind::Map { frame: outer, .. },
    ) = (&body.kind, &producer.kind)
    else {
        return false;
    };
    if outer.is_scalar() || !outer.is_prefix_of(consumer).is_yes() {
        return false;
    }
    let Ok(rest) = consumer.strip_prefix(outer) else {
        return false;
    };
    !rest.is_scalar()
        && binds
            .iter()
            .any(|b| matches!(b.value.kind, Kind::Var(w) if w == v))
}

/// The map `body` over `P ++ G` as a map over `P` whose cell is the map
/// over `G` (each array bound by a fresh variable, a cell of `G` items):
/// the same cells, computed in the same order.
fn split_consumer(body: Expr, outer: &Shape, names: &mut Vec<String>) -> Expr {
    let ty = body.ty;
    let Kind::Map {
        frame,
        binds,
        body: cell,
    } = body.kind
    else {
        return Expr { kind: body.kind, ty };
    };
    let Ok(rest) = frame.strip_prefix(outer) else {
        return Expr {
            kind: Kind::Map {
                frame,
                binds,
                body: cell,
            },
            ty,
        };
    };
    let mut outer_binds = Vec::with_capacity(binds.len());
    let mut inner_binds = Vec::with_capacity(binds.len());
    for b in binds {
        let row = VarId(names.len() as u32);
        let name = names.get(b.var.0 as usize).cloned().unwrap_or_else(|| "x".into());
        names.push(name);
        let row_ty = b.ty.lift(&rest);
        inner_binds.push(Bind {
            var: b.var,
            ty: b.ty,
            value: Expr {
                kind: Kind::Var(row),
                ty: row_ty.clone(),
            },
        });
        outer_binds.push(Bind {
            var: row,
            ty: row_ty,
            value: b.value,
        });
    }
    let inner_ty = cell.ty.lift(&rest);
    Expr {
        kind: Kind::Map {
            frame: outer.clone(),
            binds: outer_binds,
            body: Box::new(Expr {
                kind: Kind::Map {
                    frame: rest,
                    binds: inner_binds,
                    body: cell,
                },
                ty: inner_ty,
            }),
        },
        ty,
    }
}

/// Where the map `body` (over `frame`) binds a variable to `v` itself.
fn consumer_slot(body: &Expr, frame: &Shape, v: VarId) -> Option<usize> {
    let Kind::Map {
        frame: consumer,
        binds,
        ..
    } = &body.kind
    else {
        return None;
    };
    if !consumer.equals(frame).is_yes() {
        return None;
    }
    binds
        .iter()
        .position(|b| matches!(b.value.kind, Kind::Var(w) if w == v))
}

/// The consumer map `body` with the producer's map fused in at the slot
/// that iterated the producer's result.
fn fuse_into(body: Expr, producer: Bind) -> Expr {
    let Kind::Map {
        frame: pframe,
        binds: pbinds,
        body: pbody,
    } = producer.value.kind
    else {
        return body;
    };
    let Some(slot) = consumer_slot(&body, &pframe, producer.var) else {
        return body;
    };
    let ty = body.ty;
    let Kind::Map {
        frame,
        binds,
        body: cbody,
    } = body.kind
    else {
        return Expr { kind: body.kind, ty };
    };
    let mut binds = binds;
    let cell = binds.remove(slot);
    // The producer's arrays are iterated by the consumer now, its cells'
    // variables bound where the slot's was.
    for (i, b) in pbinds.into_iter().enumerate() {
        binds.insert(slot + i, b);
    }
    let inner_ty = cbody.ty.clone();
    let cbody = Expr {
        kind: Kind::Map {
            frame: Shape::scalar(),
            binds: vec![Bind {
                var: cell.var,
                ty: cell.ty,
                value: *pbody,
            }],
            body: cbody,
        },
        ty: inner_ty,
    };
    Expr {
        kind: Kind::Map {
            frame,
            binds,
            body: Box::new(cbody),
        },
        ty,
    }
}

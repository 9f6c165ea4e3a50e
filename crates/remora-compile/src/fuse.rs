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

use crate::maps::{Bind, Decl, Expr, Kind, Program};
use remora_check::typed::VarId;
use remora_types::Shape;

/// The program with its map chains fused.
pub fn fuse_program(p: &Program) -> Program {
    Program {
        decls: p
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
                    value: fuse(value),
                },
                Decl::Expr(e) => Decl::Expr(fuse(e)),
            })
            .collect(),
        var_names: p.var_names.clone(),
    }
}

/// `e` with its map chains fused, innermost first.
fn fuse(e: &Expr) -> Expr {
    let e = e.map_children(&mut fuse);
    match e.kind {
        Kind::Map { frame, binds, body } if frame.is_scalar() => fuse_let(binds, *body, e.ty),
        kind => Expr { kind, ty: e.ty },
    }
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
fn fuse_let(binds: Vec<Bind>, mut body: Expr, ty: remora_types::Type) -> Expr {
    let mut flat = Vec::with_capacity(binds.len());
    for b in binds {
        flatten_into(&mut flat, b);
    }
    let mut binds = flat;
    let mut k = binds.len();
    while k > 0 {
        k -= 1;
        let fusable = {
            let b = &binds[k];
            let Kind::Map { frame, .. } = &b.value.kind else {
                continue;
            };
            let elsewhere: usize = binds[k + 1..].iter().map(|later| uses(&later.value, b.var)).sum();
            elsewhere == 0 && uses(&body, b.var) == 1 && consumer_slot(&body, frame, b.var).is_some()
        };
        if !fusable {
            continue;
        }
        let producer = binds.remove(k);
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

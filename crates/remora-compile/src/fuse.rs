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
//! A map read by one map at several of its variables is computed once per
//! cell there, bound to all of them; so a whole DAG of elementwise steps
//! over one frame becomes one map.
//!
//! First, calls of the program's functions of whole arrays (outside the
//! maps that lift them) are inlined, so that their maps meet the caller's.
//! A lambda written in place and applied to variables (a lifted `(fn ((e
//! Float)) …)`, the map's cell its argument) is a `let` of its parameters
//! first, so that the maps of its body fuse, or stay delayed, as a named
//! function's do.

use crate::maps::{Atom, Bind, Decl, Expr, Kind, Program};
use remora_check::typed::VarId;
use remora_types::Shape;
use std::collections::HashMap;

/// The program with its map chains fused.
pub fn fuse_program(p: &Program) -> Program {
    // A program that traces keeps its maps apart: fused, the cells of two
    // maps that trace would print interleaved, not map after map.
    if traces(p) {
        return p.clone();
    }
    let mut names = p.var_names.clone();
    // The functions defined so far (fused), for inlining their calls.
    let mut functions = HashMap::new();
    let decls = p
        .decls
        .iter()
        .map(|d| match d {
            Decl::Def {
                var,
                name,
                entry,
                value,
            } => {
                let value = crate::columns::columns(value, &functions, &mut names);
                let value = fuse(&inline(&value, &functions, &mut names), &mut names);
                if lambda(&value).is_some() || crate::mono::binders(&value) > 0 {
                    functions.insert(*var, value.clone());
                }
                Decl::Def {
                    var: *var,
                    name: name.clone(),
                    entry: *entry,
                    value,
                }
            }
            Decl::Expr(e) => {
                let e = crate::columns::columns(e, &functions, &mut names);
                Decl::Expr(fuse(&inline(&e, &functions, &mut names), &mut names))
            }
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

/// `e` with each call of a function of the program outside the maps that
/// lift it (a function of whole arrays applied to whole arrays) replaced by
/// the function's body, a copy whose variables are renamed, its parameters
/// bound by a `let` to the arguments: the maps inside the function then
/// meet the maps around the call, and fuse with them (abstraction costs
/// nothing). A call inside a map over a frame (a function lifted) stays a
/// call: the loop level reads such a function through its body where it
/// matters (an outer product reduced at once).
fn inline(e: &Expr, functions: &HashMap<VarId, Expr>, names: &mut Vec<String>) -> Expr {
    match &e.kind {
        Kind::Map { frame, .. } if !frame.is_scalar() => return e.clone(),
        Kind::App { func, args } => {
            if let Some(function) = instance(func, functions)
                && elementwise(&function)
            {
                let args: Vec<Expr> = args.iter().map(|a| inline(a, functions, names)).collect();
                if let Some(body) = inlined_call(&function, args, &e.ty, names) {
                    return body;
                }
            }
        }
        _ => {}
    }
    e.map_children(&mut |c| inline(c, functions, names))
}

/// The function of the program that `func` names, instantiated: a
/// polymorphic function applied to its type and index arguments (sizes
/// known only at run time among them, which monomorphisation leaves
/// alone) has them substituted in its body.
pub(crate) fn instance(func: &Expr, functions: &HashMap<VarId, Expr>) -> Option<Expr> {
    use crate::mono::{Inst, instantiate_one};
    let mut insts = Vec::new();
    let mut head = func;
    loop {
        head = match &head.kind {
            Kind::TApp { func, arg } => {
                insts.push(Inst::Type(arg.clone()));
                func
            }
            Kind::IApp { func, arg } => {
                insts.push(Inst::Index(arg.clone()));
                func
            }
            _ => break,
        };
    }
    let Kind::Var(f) = head.kind else {
        return None;
    };
    let mut function = functions.get(&f)?.clone();
    for inst in insts.iter().rev() {
        function = instantiate_one(&function, inst).ok()?;
    }
    Some(function)
}

/// Whether every map over a frame in `e` has atoms for cells (its maps
/// are elementwise): a function whose maps make array cells (a rotation
/// lifted over rows) stays a call, which the loop level reads as views.
fn elementwise(e: &Expr) -> bool {
    let mut all = true;
    e.each(&mut |x| {
        if let Kind::Map { frame, body, .. } = &x.kind {
            all &= frame.is_scalar() || body.ty.shape.is_scalar();
        }
    });
    all
}

/// The function's single λ atom, if it is one.
pub(crate) fn lambda(e: &Expr) -> Option<(&VarId, &remora_types::Type, &Expr)> {
    match &e.kind {
        Kind::Array { shape, atoms } if shape.is_empty() => match atoms.as_slice() {
            [
                Atom::Lambda {
                    param,
                    param_ty,
                    body,
                },
            ] => Some((param, param_ty, body)),
            _ => None,
        },
        _ => None,
    }
}

/// `(let ((param arg) …) body)` for a copy of `function` (curried λs, one
/// per argument), or nothing if it has fewer parameters than arguments.
pub(crate) fn inlined_call(
    function: &Expr,
    args: Vec<Expr>,
    ty: &remora_types::Type,
    names: &mut Vec<String>,
) -> Option<Expr> {
    let mut body = function;
    for _ in &args {
        body = lambda(body)?.2;
    }
    let mut body = crate::maps::freshen(function, names);
    let mut binds = Vec::with_capacity(args.len());
    for value in args {
        let Kind::Array { atoms, .. } = body.kind else {
            return None;
        };
        let Some(Atom::Lambda {
            param,
            param_ty,
            body: inner,
        }) = atoms.into_iter().next()
        else {
            return None;
        };
        binds.push(Bind {
            var: param,
            ty: param_ty,
            value,
        });
        body = *inner;
    }
    Some(Expr {
        kind: Kind::Map {
            frame: Shape::scalar(),
            binds,
            body: Box::new(body),
        },
        ty: ty.clone(),
    })
}

/// `e` with its map chains fused, innermost first.
pub(crate) fn fuse(e: &Expr, names: &mut Vec<String>) -> Expr {
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
        let Kind::Var(_) = a.kind else {
            return None;
        };
        let (param, param_ty, body) = lambda(f)?;
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

/// `e` with each variable that `aliases` names replaced by what it names.
fn renamed(e: &Expr, aliases: &HashMap<VarId, VarId>) -> Expr {
    match e.kind {
        Kind::Var(v) => Expr {
            kind: Kind::Var(aliases.get(&v).copied().unwrap_or(v)),
            ty: e.ty.clone(),
        },
        _ => e.map_children(&mut |c| renamed(c, aliases)),
    }
}

/// Whether `e` is a reduction of a variable by a primitive (`(reduce f.min
/// y)`, `(f.sum y)`): what it computes depends on nothing else.
fn pure_reduction(e: &Expr) -> bool {
    let Kind::App { func, args } = &e.kind else {
        return false;
    };
    let mut head = &**func;
    while let Kind::IApp { func, .. } | Kind::TApp { func, .. } = &head.kind {
        head = func;
    }
    matches!(head.kind, Kind::Prim("reduce" | "f.sum" | "sum"))
        && args
            .iter()
            .all(|a| matches!(a.kind, Kind::Var(_) | Kind::Prim(_)))
}

/// `e` with each occurrence of `target` replaced by the variable `var`.
fn replaced(e: &Expr, target: &Expr, var: VarId) -> Expr {
    if e == target {
        return Expr {
            kind: Kind::Var(var),
            ty: e.ty.clone(),
        };
    }
    e.map_children(&mut |c| replaced(c, target, var))
}

/// How many times `v` occurs in `e`.
pub(crate) fn uses(e: &Expr, v: VarId) -> usize {
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
    // A `let` in the body joins this one (`(let (a) (let (b) e))` is
    // `(let (a b) e)`), so that the maps of both meet.
    while let Kind::Map { frame, .. } = &body.kind {
        if !frame.is_scalar() {
            break;
        }
        let Kind::Map {
            binds: inner,
            body: rest,
            ..
        } = body.kind
        else {
            break;
        };
        for b in inner {
            flatten_into(&mut flat, b);
        }
        body = *rest;
    }
    // A variable bound to another variable (a function's parameter, once
    // the function is inlined) is that variable.
    let mut aliases = HashMap::new();
    let mut binds = Vec::with_capacity(flat.len());
    for mut b in flat {
        if !aliases.is_empty() {
            b.value = renamed(&b.value, &aliases);
        }
        match b.value.kind {
            Kind::Var(w) => {
                aliases.insert(b.var, w);
            }
            _ => binds.push(b),
        }
    }
    if !aliases.is_empty() {
        body = renamed(&body, &aliases);
    }
    // A reduction of a variable by a primitive, bound here, is that
    // binding's variable wherever it is written again after it (`(reduce
    // f.min y)` twice): the same value, and its error, if any, raised
    // where it is bound, before the later ones would be.
    for i in 0..binds.len() {
        if !pure_reduction(&binds[i].value) {
            continue;
        }
        let (done, later) = binds.split_at_mut(i + 1);
        let (value, var) = (&done[i].value, done[i].var);
        for b in later {
            b.value = replaced(&b.value, value, var);
        }
        body = replaced(&body, value, var);
    }
    let mut k = binds.len();
    while k > 0 {
        k -= 1;
        let (fusable, split) = {
            let b = &binds[k];
            let Kind::Map { frame, .. } = &b.value.kind else {
                continue;
            };
            let elsewhere: usize = binds[k + 1..].iter().map(|later| uses(&later.value, b.var)).sum();
            let in_body = uses(&body, b.var);
            let once = elsewhere == 0 && in_body == 1;
            let split =
                once && consumer_slot(&body, frame, b.var).is_none() && splits_for(&body, &b.value, b.var);
            // Read only by the body's map, over the same frame, at one
            // slot, or at several (the maps that read it fused there
            // first) where its cells are atoms: a cell that is an array
            // is computed where it is bound, not once per reader.
            let slots = consumer_slots(&body, frame, b.var).len();
            let atoms = matches!(&b.value.kind, Kind::Map { body: cell, .. } if cell.ty.shape.is_scalar());
            (
                elsewhere == 0
                    && (split || slots == 1 && in_body == 1 || (atoms && slots > 0 && slots == in_body)),
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

/// Where the map `body` (over `frame`) first binds a variable to `v` itself.
fn consumer_slot(body: &Expr, frame: &Shape, v: VarId) -> Option<usize> {
    consumer_slots(body, frame, v).first().copied()
}

/// Every place where the map `body` (over `frame`) binds a variable to
/// `v` itself.
fn consumer_slots(body: &Expr, frame: &Shape, v: VarId) -> Vec<usize> {
    let Kind::Map {
        frame: consumer,
        binds,
        ..
    } = &body.kind
    else {
        return Vec::new();
    };
    if !consumer.equals(frame).is_yes() {
        return Vec::new();
    }
    (0..binds.len())
        .filter(|&i| matches!(binds[i].value.kind, Kind::Var(w) if w == v))
        .collect()
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
    let slots = consumer_slots(&body, &pframe, producer.var);
    let Some(&slot) = slots.first() else {
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
    // Every slot that iterated the producer's result goes (the later ones
    // first); the first slot's variable is bound to the producer's cell,
    // computed once, and the others to that variable.
    let mut cells: Vec<Bind> = slots.iter().rev().map(|&i| binds.remove(i)).collect();
    cells.reverse();
    // The producer's arrays are iterated by the consumer now, its cells'
    // variables bound where the slot's was.
    for (i, b) in pbinds.into_iter().enumerate() {
        binds.insert(slot + i, b);
    }
    let mut cells = cells.into_iter();
    let mut lets = Vec::with_capacity(slots.len());
    if let Some(first) = cells.next() {
        let first_var = first.var;
        let cell_ty = first.ty.clone();
        lets.push(Bind {
            var: first.var,
            ty: first.ty,
            value: *pbody,
        });
        for other in cells {
            lets.push(Bind {
                var: other.var,
                ty: other.ty,
                value: Expr {
                    kind: Kind::Var(first_var),
                    ty: cell_ty.clone(),
                },
            });
        }
    }
    let inner_ty = cbody.ty.clone();
    let cbody = Expr {
        kind: Kind::Map {
            frame: Shape::scalar(),
            binds: lets,
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

//! Rules for folds as people write them (the style matrix): a fold whose
//! state is a vector stepped atom by atom (Horner's rule over a whole
//! vector: `(fold (fn (acc c) (f.+ (f.* acc xs) c)) zeros cs)`) turned
//! inside out — one loop over the state's atoms, each atom's whole fold
//! in a scalar, instead of one pass over the state per item.

use super::*;

/// The step of a fold over `count` items whose state is the vector `acc`
/// (written into `next`, then swapped), `step` = `let …; for i < n { let
/// …; next[i] = value }; swap`, where every atom of the next state is
/// computed from the same atom of the state alone (`acc[i]`, no other
/// atom of it, nothing of `next`), by scalar `let`s: the fold as one loop
/// over the atoms, `acc[i]` a scalar `state` (of `elem`) through all the items. Each atom gets
/// the same operations in the same order, so the same bits; a step that
/// fails fails for the first item it fails on either way (an item's
/// `let`s now run again per atom: only where they cannot fail).
pub(super) fn fold_per_atom(
    acc: Var,
    next: Var,
    k: Var,
    count: &Expr,
    step: &[Stmt],
    state: Var,
    elem: Elem,
) -> Option<Vec<Stmt>> {
    let [
        lets @ ..,
        Stmt::For {
            index: i,
            count: n,
            parallel,
            body,
        },
        Stmt::Swap { a, b },
    ] = step
    else {
        return None;
    };
    if (*a, *b) != (acc, next) {
        return None;
    }
    let state_bufs = [acc, next];
    for l in lets {
        let Stmt::Let { value, .. } = l else {
            return None;
        };
        if !cannot_fail(value) || mentions(value, &state_bufs) || mentions(value, &[*i]) {
            return None;
        }
    }
    if mentions(n, &state_bufs) || mentions(n, &[k]) {
        return None;
    }
    let [atom_lets @ .., Stmt::Store { buf, index, value }] = body.as_slice() else {
        return None;
    };
    if *buf != next || *index != Expr::Var(*i) {
        return None;
    }
    // The atom's step, `acc[i]` read as the scalar.
    let mut per_item: Vec<Stmt> = lets.to_vec();
    for l in atom_lets {
        let Stmt::Let { var, elem, value } = l else {
            return None;
        };
        per_item.push(Stmt::Let {
            var: *var,
            elem: *elem,
            value: read_state(value, acc, next, *i, state)?,
        });
    }
    per_item.push(Stmt::Set {
        var: state,
        value: read_state(value, acc, next, *i, state)?,
    });
    Some(vec![Stmt::For {
        index: *i,
        count: n.clone(),
        parallel: *parallel,
        body: vec![
            Stmt::Let {
                var: state,
                elem,
                value: Expr::load(acc, Expr::Var(*i)),
            },
            Stmt::For {
                index: k,
                count: count.clone(),
                parallel: false,
                body: per_item,
            },
            Stmt::Store {
                buf: acc,
                index: Expr::Var(*i),
                value: Expr::Var(state),
            },
        ],
    }])
}

/// `e` with `acc[i]` as the variable `state`; `None` where it reads `acc`
/// elsewhere or `next` at all.
fn read_state(e: &Expr, acc: Var, next: Var, i: Var, state: Var) -> Option<Expr> {
    with_states(e, acc, next, &|index| (*index == Expr::Var(i)).then_some(state))
}

fn mentions(e: &Expr, vars: &[Var]) -> bool {
    let mut found = false;
    e.each_var(&mut |v| found |= vars.contains(&v));
    found
}

/// Whether `e` cannot fail (no division, power, shift or checked
/// dimension arithmetic).
pub(super) fn cannot_fail(e: &Expr) -> bool {
    match e {
        Expr::Op { op, args } => {
            !matches!(*op, "/" | "mod" | "^" | "shl" | "shr" | "dim+" | "dim*" | "wrap")
                && args.iter().all(cannot_fail)
        }
        Expr::Load { index, .. } | Expr::Addr { index, .. } => cannot_fail(index),
        _ => true,
    }
}

/// The most atoms of a vector state kept in scalars.
const MOST_SCALARS: i64 = 8;

impl<'m> Alloc<'m> {
    /// The step of a fold over `count` items whose state is a short vector
    /// of `len` atoms (`acc`, written into `next`, then swapped) where the
    /// step reads and writes the state only at constant places (`[m s]`
    /// by `head` and `last`): the state in `len` scalars through the
    /// items, no buffer written per item, stored into `acc` once at the
    /// end. The same operations on the same values: the same bits.
    pub(super) fn fold_in_scalars(
        &mut self,
        (acc, next): (Var, Var),
        k: Var,
        count: &Expr,
        step: &[Stmt],
        elem: Elem,
        len: &Expr,
    ) -> Option<Vec<Stmt>> {
        let Expr::Int(len) = *len else {
            return None;
        };
        if !(1..=MOST_SCALARS).contains(&len) {
            return None;
        }
        let [stmts @ .., Stmt::Swap { a, b }] = step else {
            return None;
        };
        if (*a, *b) != (acc, next) {
            return None;
        }
        let states: Vec<Var> = (0..len).map(|_| self.fresh("state")).collect();
        let mut written: Vec<Option<Var>> = vec![None; len as usize];
        let mut per_item = Vec::new();
        for s in stmts {
            match s {
                Stmt::Let { var, elem, value } => per_item.push(Stmt::Let {
                    var: *var,
                    elem: *elem,
                    value: state_at(value, acc, next, &states)?,
                }),
                Stmt::Store { buf, index, value } if *buf == next => {
                    let c = constant(index).filter(|c| (0..len).contains(c))? as usize;
                    if written[c].is_some() {
                        return None;
                    }
                    let t = self.fresh("step");
                    per_item.push(Stmt::Let {
                        var: t,
                        elem,
                        value: state_at(value, acc, next, &states)?,
                    });
                    written[c] = Some(t);
                }
                _ => return None,
            }
        }
        for (s, t) in states.iter().zip(&written) {
            per_item.push(Stmt::Set {
                var: *s,
                value: Expr::Var((*t)?),
            });
        }
        let mut out: Vec<Stmt> = states
            .iter()
            .enumerate()
            .map(|(c, s)| Stmt::Let {
                var: *s,
                elem,
                value: Expr::load(acc, Expr::Int(c as i64)),
            })
            .collect();
        out.push(Stmt::For {
            index: k,
            count: count.clone(),
            parallel: false,
            body: per_item,
        });
        out.extend(states.iter().enumerate().map(|(c, s)| Stmt::Store {
            buf: acc,
            index: Expr::Int(c as i64),
            value: Expr::Var(*s),
        }));
        Some(out)
    }
}

/// An Int expression of constants only, evaluated (`+`, `-`, `*`).
fn constant(e: &Expr) -> Option<i64> {
    match e {
        Expr::Int(n) => Some(*n),
        Expr::Op { op, args } => match (*op, args.as_slice()) {
            ("+", [a, b]) => constant(a)?.checked_add(constant(b)?),
            ("-", [a, b]) => constant(a)?.checked_sub(constant(b)?),
            ("*", [a, b]) => constant(a)?.checked_mul(constant(b)?),
            _ => None,
        },
        _ => None,
    }
}

/// `e` with `acc[c]` (a constant place) as the state's scalar `c`; `None`
/// where it reads `acc` elsewhere or `next` at all.
fn state_at(e: &Expr, acc: Var, next: Var, states: &[Var]) -> Option<Expr> {
    with_states(e, acc, next, &|index| {
        states.get(usize::try_from(constant(index)?).ok()?).copied()
    })
}

/// `e` with each load of `acc` replaced by the scalar variable `place`
/// names for its index; `None` where `place` names none, or where `e`
/// reads `acc` otherwise or `next` at all.
fn with_states(e: &Expr, acc: Var, next: Var, place: &dyn Fn(&Expr) -> Option<Var>) -> Option<Expr> {
    Some(match e {
        Expr::Load { buf, index } if *buf == acc => Expr::Var(place(index)?),
        Expr::Load { buf, index } => {
            if *buf == next || mentions(index, &[acc, next]) {
                return None;
            }
            e.clone()
        }
        Expr::Addr { .. } => return None,
        Expr::Op { op, args } => Expr::Op {
            op,
            args: args
                .iter()
                .map(|a| with_states(a, acc, next, place))
                .collect::<Option<Vec<_>>>()?,
        },
        Expr::Var(v) if *v == acc || *v == next => return None,
        _ => e.clone(),
    })
}

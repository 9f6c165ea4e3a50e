//! Powers of the same bases: `x^y` is log2 |x| (the costlier half, of
//! `x` alone) then the power from it (`rt_powf`). Where a loop over items
//! (`for k`) runs an inner loop over lanes (`for l`) that raises a base
//! depending only on the lane to a power — the rows of a table of powers
//! reduced (`(reduce f.+ (f.* cs ((fn ((e Float)) (f.^ xs e)) exps)))`)
//! — each lane's log2 is computed once, before the items, into a buffer
//! (its bits in an Int), and every item's power from it. A lane loop of
//! the same bases just before the items (`reduce`'s first item, peeled)
//! takes its powers from the same logs, computed before it. The same
//! operations on the same values as `rt_powf`: the same bits (the
//! interpreter's `powers.rs` does the same for a table of powers).

use super::*;
use std::collections::{HashMap, HashSet};

/// Every such loop of `body`, at any depth.
pub(super) fn shared_logs(body: &mut Vec<Stmt>, names: &mut Vec<String>) {
    let mut out = Vec::with_capacity(body.len());
    for mut s in body.drain(..) {
        for inner in s.bodies_mut() {
            shared_logs(inner, names);
        }
        if let Stmt::For {
            index,
            count,
            parallel: false,
            body: items,
        } = &mut s
        {
            for logs in hoist_logs(*index, items, names) {
                // A first item peeled before the items: its powers from the
                // logs too, which are then made before it, whatever the
                // number of items.
                let mut last = out.pop();
                if last.as_mut().is_some_and(|first| logs.serve(first)) {
                    out.extend(logs.statements(None));
                    out.extend(last);
                } else {
                    out.extend(last);
                    out.extend(logs.statements(Some(Expr::op(">", vec![count.clone(), Expr::Int(0)]))));
                }
            }
        }
        out.push(s);
    }
    *body = out;
}

/// Logs of bases computed before a loop over items: into `buf` (of `len`
/// atoms), by a loop over `index` (`count` lanes), of `base` (in terms of
/// `index`, bound to `named`).
struct Logs {
    buf: Var,
    len: Expr,
    count: Expr,
    index: Var,
    base: Expr,
    named: Var,
}

impl Logs {
    /// The statements that make the logs (only where `guard` holds, when
    /// there is one).
    fn statements(&self, guard: Option<Expr>) -> Vec<Stmt> {
        let b = self.index;
        let lane = Stmt::For {
            index: b,
            count: self.count.clone(),
            parallel: false,
            body: vec![
                Stmt::Let {
                    var: self.named,
                    elem: Elem::Float,
                    value: self.base.clone(),
                },
                Stmt::Store {
                    buf: self.buf,
                    index: Expr::Var(b),
                    value: Expr::op("pow.log2", vec![Expr::Var(self.named)]),
                },
            ],
        };
        let alloc = Stmt::Alloc {
            buf: self.buf,
            elem: Elem::Int,
            len: self.len.clone(),
        };
        match guard {
            Some(cond) => vec![
                alloc,
                Stmt::If {
                    cond,
                    then: vec![lane],
                    otherwise: Vec::new(),
                },
            ],
            None => vec![alloc, lane],
        }
    }

    /// `s`, when it is a lane loop over the same lanes that raises the
    /// same bases to a power (and writes nothing they read, calls nothing),
    /// with its first such power taken from the logs: whether it was.
    fn serve(&self, s: &mut Stmt) -> bool {
        let Stmt::For {
            index: l,
            count,
            body: lane,
            ..
        } = s
        else {
            return false;
        };
        if *count != self.count {
            return false;
        }
        let (mut written, mut set, mut calls) = (HashSet::new(), HashSet::new(), false);
        Stmt::each(lane, &mut |s| match s {
            Stmt::Store { buf, .. } => {
                written.insert(*buf);
            }
            Stmt::Swap { a, b } => {
                written.insert(*a);
                written.insert(*b);
            }
            Stmt::Set { var, .. } => {
                set.insert(*var);
            }
            Stmt::Call { .. } => calls = true,
            _ => {}
        });
        let mut reads_written = false;
        each_load(&self.base, &mut |b| reads_written |= written.contains(&b));
        if calls || reads_written {
            return false;
        }
        let l = *l;
        let by_log = Expr::load(self.buf, Expr::Var(l));
        for i in 0..lane.len() {
            let before = lane[..i].to_vec();
            let same = |b: &Expr| {
                through_lets(b, &before, &set, 0).filter(|v| renamed(v, l, self.index) == self.base)
            };
            let mut done = false;
            if let Some(st) = lane.get_mut(i) {
                each_expr_of_mut(st, &mut |e| done = done || by_shared_log(e, &same, &by_log));
            }
            if done {
                return true;
            }
        }
        false
    }
}

/// In the body `items` of the loop over `k`: each lane loop's powers of a
/// base that the items do not change, from logs made as those returned
/// say (before the loop over `k`).
fn hoist_logs(k: Var, items: &mut [Stmt], names: &mut Vec<String>) -> Vec<Logs> {
    // What changes from item to item: `k`, what its body declares, the
    // buffers it writes (a call may write any it is given).
    let mut moving: HashSet<Var> = HashSet::from([k]);
    let mut written: HashSet<Var> = HashSet::new();
    let mut calls = false;
    let mut set: HashSet<Var> = HashSet::new();
    Stmt::each(items, &mut |s| match s {
        Stmt::Let { var, .. } | Stmt::Alloc { buf: var, .. } | Stmt::Data { buf: var, .. } => {
            moving.insert(*var);
        }
        Stmt::For { index, .. } | Stmt::Reduce { acc: index, .. } => {
            moving.insert(*index);
        }
        Stmt::Store { buf, .. } => {
            written.insert(*buf);
        }
        Stmt::Swap { a, b } => {
            written.insert(*a);
            written.insert(*b);
        }
        Stmt::Call { .. } => calls = true,
        Stmt::Set { var, .. } => {
            set.insert(*var);
        }
        _ => {}
    });
    if calls {
        return Vec::new();
    }
    let mut before = Vec::new();
    for s in items.iter_mut() {
        let Stmt::For {
            index: l,
            count,
            body: lane,
            ..
        } = s
        else {
            continue;
        };
        if mentions(count, &moving) {
            continue;
        }
        // The first power in the lane's body whose base is (through
        // `let`s never set) what depends only on the lane.
        let accept = |i: usize, b: &Expr| {
            let value = through_lets(b, &lane[..i], &set, 0)?;
            steady(&value, *l, &moving, &written).then_some(value)
        };
        let Some((pos, base)) = lane.iter().enumerate().find_map(|(i, st)| {
            let mut found = None;
            each_expr_of(st, &mut |e| {
                if found.is_none() {
                    found = power_base(e, &|b| accept(i, b));
                }
            });
            found.map(|b| (i, b))
        }) else {
            continue;
        };
        let mut fresh = |name: &str| {
            names.push(name.to_string());
            Var(names.len() as u32 - 1)
        };
        let (logs, l2, b2) = (fresh("logs"), fresh("l"), fresh("base"));
        let len = match count {
            Expr::Op { op: "min", args } => match args.as_slice() {
                [Expr::Int(n), _] => Expr::Int(*n),
                _ => count.clone(),
            },
            _ => count.clone(),
        };
        before.push(Logs {
            buf: logs,
            len,
            count: count.clone(),
            index: l2,
            base: renamed(&base, *l, l2),
            named: b2,
        });
        let resolved = lane[..pos].to_vec();
        let same = |b: &Expr| through_lets(b, &resolved, &set, 0).filter(|v| *v == base);
        let by_log = Expr::load(logs, Expr::Var(*l));
        if let Some(st) = lane.get_mut(pos) {
            let mut done = false;
            each_expr_of_mut(st, &mut |e| done = done || by_shared_log(e, &same, &by_log));
        }
    }
    before
}

/// Whether `e` (in a lane loop over `l`) depends only on `l` and what the
/// items do not change, and cannot fail.
fn steady(e: &Expr, l: Var, moving: &HashSet<Var>, written: &HashSet<Var>) -> bool {
    let mut ok = folds::cannot_fail(e);
    e.each_var(&mut |v| ok &= v == l || !moving.contains(&v));
    let mut loads_written = false;
    each_load(e, &mut |b| loads_written |= written.contains(&b));
    ok && !loads_written
}

/// The base (as `accept` gives it) of the first power in `e` it accepts.
fn power_base(e: &Expr, accept: &dyn Fn(&Expr) -> Option<Expr>) -> Option<Expr> {
    match e {
        Expr::Op { op: "f.^", args } if args.len() == 2 => {
            accept(&args[0]).or_else(|| args.iter().find_map(|a| power_base(a, accept)))
        }
        Expr::Op { args, .. } => args.iter().find_map(|a| power_base(a, accept)),
        Expr::Load { index, .. } => power_base(index, accept),
        _ => None,
    }
}

/// The first power in `e` that `accept` takes (the one [`power_base`]
/// found) as its power from the log `log`: whether there was one.
fn by_shared_log(e: &mut Expr, accept: &dyn Fn(&Expr) -> Option<Expr>, log: &Expr) -> bool {
    match e {
        Expr::Op { op, args } if *op == "f.^" && args.len() == 2 && accept(&args[0]).is_some() => {
            args.insert(1, log.clone());
            *op = "pow.by-log2";
            true
        }
        Expr::Op { args, .. } => args.iter_mut().any(|a| by_shared_log(a, accept, log)),
        Expr::Load { index, .. } => by_shared_log(index, accept, log),
        _ => false,
    }
}

/// Every power of `body` (at any depth) whose exponent is, through the
/// `let`s before it (in its body or around it), a whole number (an Int
/// made a Float, a literal without a fraction): by the runtime's `_whole`
/// forms, which leave out the selects that only a fraction, a NaN or an
/// infinite exponent needs.
pub(super) fn whole_exponents(body: &mut [Stmt]) {
    let mut set = HashSet::new();
    Stmt::each(body, &mut |s| {
        if let Stmt::Set { var, .. } = s {
            set.insert(*var);
        }
    });
    whole_exponents_in(body, &set, &mut HashMap::new());
}

/// `whole_exponents` with the values of the `let`s before `body` (never
/// set; a variable is bound once in a program) in `lets`.
fn whole_exponents_in(body: &mut [Stmt], set: &HashSet<Var>, lets: &mut HashMap<Var, Option<Expr>>) {
    for s in body.iter_mut() {
        each_expr_of_mut(s, &mut |e| by_whole_exponent(e, lets));
        if let Stmt::Let { var, value, .. } = s
            && !set.contains(var)
        {
            // A variable bound again (a peeled copy of a body) to another
            // value is nothing known.
            let known = match lets.get(var) {
                Some(seen) => seen.as_ref().filter(|&seen| seen == value).cloned(),
                None => Some(value.clone()),
            };
            lets.insert(*var, known);
        }
        for inner in s.bodies_mut() {
            whole_exponents_in(inner, set, lets);
        }
    }
}

fn by_whole_exponent(e: &mut Expr, lets: &HashMap<Var, Option<Expr>>) {
    match e {
        Expr::Op { op, args } => {
            args.iter_mut().for_each(|a| by_whole_exponent(a, lets));
            let (whole, mut exponent) = match (*op, args.len()) {
                ("f.^", 2) => ("pow.whole", &args[1]),
                ("pow.by-log2", 3) => ("pow.by-log2-whole", &args[2]),
                _ => return,
            };
            while let Expr::Var(v) = exponent {
                match lets.get(v) {
                    Some(Some(value)) => exponent = value,
                    _ => return,
                }
            }
            let is_whole = match exponent {
                Expr::Op { op: "i->f", .. } => true,
                Expr::Float(f) => f.is_finite() && f.fract() == 0.0,
                _ => false,
            };
            if is_whole {
                *op = whole;
            }
        }
        Expr::Load { index, .. } | Expr::Addr { index, .. } => by_whole_exponent(index, lets),
        _ => {}
    }
}

/// `f` on each expression `s` holds itself (not those of its body).
fn each_expr_of(s: &Stmt, f: &mut dyn FnMut(&Expr)) {
    match s {
        Stmt::Let { value, .. } | Stmt::Set { value, .. } => f(value),
        Stmt::Store { index, value, .. } => {
            f(index);
            f(value);
        }
        _ => {}
    }
}

fn each_expr_of_mut(s: &mut Stmt, f: &mut dyn FnMut(&mut Expr)) {
    match s {
        Stmt::Let { value, .. } | Stmt::Set { value, .. } => f(value),
        Stmt::Store { index, value, .. } => {
            f(index);
            f(value);
        }
        _ => {}
    }
}

/// `e` with each variable that a `let` of `lets` binds (and nothing sets)
/// replaced by its value, a few levels deep.
fn through_lets(e: &Expr, lets: &[Stmt], set: &HashSet<Var>, depth: usize) -> Option<Expr> {
    Some(match e {
        Expr::Var(v) => match lets.iter().find_map(|d| match d {
            Stmt::Let { var, value, .. } if var == v => Some(value),
            _ => None,
        }) {
            Some(_) if set.contains(v) || depth > 8 => return None,
            Some(value) => through_lets(value, lets, set, depth + 1)?,
            None => e.clone(),
        },
        Expr::Load { buf, index } => Expr::load(*buf, through_lets(index, lets, set, depth)?),
        Expr::Op { op, args } => Expr::op(
            op,
            args.iter()
                .map(|a| through_lets(a, lets, set, depth))
                .collect::<Option<Vec<_>>>()?,
        ),
        Expr::Addr { .. } => return None,
        e => e.clone(),
    })
}

fn mentions(e: &Expr, vars: &HashSet<Var>) -> bool {
    let mut found = false;
    e.each_var(&mut |v| found |= vars.contains(&v));
    found
}

fn each_load(e: &Expr, f: &mut dyn FnMut(Var)) {
    match e {
        Expr::Load { buf, index } | Expr::Addr { buf, index } => {
            f(*buf);
            each_load(index, f);
        }
        Expr::Op { args, .. } => args.iter().for_each(|a| each_load(a, f)),
        _ => {}
    }
}

/// `e` with the variable `from` as `to`.
fn renamed(e: &Expr, from: Var, to: Var) -> Expr {
    match e {
        Expr::Var(v) if *v == from => Expr::Var(to),
        Expr::Load { buf, index } => Expr::load(*buf, renamed(index, from, to)),
        Expr::Addr { buf, index } => Expr::Addr {
            buf: *buf,
            index: Box::new(renamed(index, from, to)),
        },
        Expr::Op { op, args } => Expr::op(op, args.iter().map(|a| renamed(a, from, to)).collect()),
        e => e.clone(),
    }
}

//! Last reads: a variable's value moved out of its binding where it is read
//! for the last time, so that an update of it (`scatter`, `append`, a
//! scalar primitive writing over an operand) finds its buffer unshared and
//! writes over it, where it would otherwise copy it whole. A loop whose
//! step updates its state (`fold`, `while`, `iterate` by a lambda) then
//! costs what each step writes, not the state's size at every step.
//!
//! Two halves, one static and one dynamic, and a move needs both:
//!
//! * **Which reads are last** (`last_reads`, by the program's shape alone):
//!   a read of `x` in its scope (the body of its lambda, or of its `let`)
//!   reached from the scope's root through only `if` branches, `let`
//!   bodies (a `let`'s value when its body does not read `x`), the body of
//!   an `unbox` of one box, a record's fields (one that no later field
//!   reads), a `field`'s record, the operand of a scalar primitive (one
//!   that no later operand reads) and the destination of an update
//!   (`scatter`, `append`) applied in full — each of them, evaluated
//!   plainly, evaluates the part on the path once, and nothing after it
//!   reads `x`. A variable that a lambda in its scope reads has no last
//!   read (a closure may read it at any later time). The search stops,
//!   finding none, past `BUDGET` nodes (a scope nested thousands deep),
//!   and is not made for a value of fewer than `MOVED_FROM` atoms (a
//!   copy of it costs less).
//! * **Whether this evaluation is the plain one** (the *chain*): the
//!   evaluator moves a value only where every form from the binding down
//!   to the read ran its plain code, which hands the chain to the part on
//!   the path just before evaluating it, once (`Interpreter::eval_chained`;
//!   `eval` takes the chain at its entry, so anything else evaluated in
//!   between breaks it). A fast path that evaluates an expression and may
//!   then give up and evaluate it again, a batched evaluation, the
//!   reference path: none of them hands the chain on, so none moves a
//!   value that an evaluation after it could still read. Each binding
//!   holds its chain's number (`chain`); a read moves only within it.
//!
//! Such a variable is bound as [`Binding::Owned`](crate::eval::Binding):
//! its value in a cell, taken out at a last read of its chain (the binding
//! is then empty, and reading it is an internal error — never a wrong
//! value), copied out at any other. Only the plain evaluation of a
//! lambda's call (`Interpreter::call`, `call2`) and of a `let` binds so,
//! and never under `reference_only`, so the test suite compares the
//! in-place updates with the copying reference.

use crate::eval::{Binding, Interpreter, Value};
use remora_check::typed::{TAtomKind, TExpr, TExprKind, VarId};
use remora_value::{Array, Data, RecordField, Records};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// The most nodes the search for one variable's last reads visits.
const BUDGET: usize = 1 << 12;

/// The fewest atoms a value has for its variable to be bound to move
/// (copying a smaller one costs less than looking for its last reads).
const MOVED_FROM: usize = 256;

/// Intrinsics that write a copy of their first argument (the
/// destination), which they may write over when nothing else holds it.
pub(crate) fn is_update(name: &str) -> bool {
    matches!(name, "scatter" | "append")
}

/// The address of an expression (a key: trees do not move while they run).
pub(crate) fn key(e: &TExpr) -> usize {
    e as *const TExpr as usize
}

/// Whether `e` reads `x` anywhere, lambda bodies included (`None`: the
/// budget ran out).
fn reads(x: VarId, e: &TExpr, budget: &mut usize) -> Option<bool> {
    let mut stack = vec![e];
    let mut children = Vec::new();
    while let Some(e) = stack.pop() {
        *budget = budget.checked_sub(1)?;
        if matches!(e.kind, TExprKind::Var(v) if v == x) {
            return Some(true);
        }
        children.clear();
        e.push_children(&mut children);
        stack.extend(children.iter().copied());
    }
    Some(false)
}

/// Whether a lambda (or type or index lambda) inside `e` reads `x`
/// (`None`: the budget ran out). A box's body is not a lambda: it is
/// evaluated where the box is made.
fn read_in_lambda(x: VarId, e: &TExpr, budget: &mut usize) -> Option<bool> {
    let mut stack = vec![(e, false)];
    let mut children = Vec::new();
    while let Some((e, inside)) = stack.pop() {
        *budget = budget.checked_sub(1)?;
        match &e.kind {
            TExprKind::Var(v) if *v == x && inside => return Some(true),
            TExprKind::Array { atoms, .. } => {
                for a in atoms {
                    match &a.kind {
                        TAtomKind::Lambda { body, .. }
                        | TAtomKind::TLambda { body, .. }
                        | TAtomKind::ILambda { body, .. } => stack.push((body, true)),
                        TAtomKind::Box { body, .. } => stack.push((body, inside)),
                        TAtomKind::Bool(_) | TAtomKind::Int(_) | TAtomKind::Float(_) => {}
                    }
                }
            }
            _ => {
                children.clear();
                e.push_children(&mut children);
                stack.extend(children.iter().map(|c| (*c, inside)));
            }
        }
    }
    Some(false)
}

/// The last reads of `x` in `scope` (see the module's comment), by
/// address; none when a lambda in `scope` reads `x`, or the search runs
/// past its budget.
pub(crate) fn last_reads(x: VarId, scope: &TExpr) -> Vec<usize> {
    let mut budget = BUDGET;
    let mut out = Vec::new();
    if read_in_lambda(x, scope, &mut budget) != Some(false) || walk(x, scope, &mut out, &mut budget).is_none()
    {
        return Vec::new();
    }
    out
}

/// Whether `e` is a variable or a field of one, a field of that …: what
/// evaluates without failing and without effects (so it may be evaluated
/// after the other arguments of an update as well as before them).
pub(crate) fn is_path(e: &TExpr) -> bool {
    match &e.kind {
        TExprKind::Var(_) => true,
        TExprKind::Field { record, .. } => is_path(record),
        _ => false,
    }
}

/// An intrinsic applied in full: its name and its arguments in order.
fn full_spine(e: &TExpr) -> Option<(&'static str, Vec<&TExpr>)> {
    if !matches!(e.kind, TExprKind::App { .. }) {
        return None;
    }
    let (head, spine) = e.spine();
    let name = crate::tally::intrinsic_name(head)?;
    if spine.len() != crate::intrinsics::signature(name).values {
        return None;
    }
    Some((name, spine.into_iter().map(|(a, _)| a).collect()))
}

/// An update (`is_update`) applied in full: its name and its arguments in
/// order (the destination first).
pub(crate) fn update_spine(e: &TExpr) -> Option<(&'static str, Vec<&TExpr>)> {
    full_spine(e).filter(|(name, _)| is_update(name))
}

/// Which argument of a loop (`fold`, `iterate`, `while`) is its state,
/// which the loop takes over (`intrinsics::run`).
pub(crate) fn loop_state(name: &str) -> Option<usize> {
    match name {
        "fold" => Some(1),
        "iterate" | "while" => Some(2),
        _ => None,
    }
}

/// A loop (`loop_state`) applied in full: its state's expression and the
/// other arguments'.
fn loop_spine(e: &TExpr) -> Option<(&TExpr, Vec<&TExpr>)> {
    let (name, mut args) = full_spine(e)?;
    let k = loop_state(name).filter(|k| *k < args.len())?;
    let state = args.remove(k);
    Some((state, args))
}

/// The last reads of `x` in `e`, which is evaluated at most once and after
/// which nothing reads `x` (`None`: the budget ran out).
fn walk(x: VarId, e: &TExpr, out: &mut Vec<usize>, budget: &mut usize) -> Option<()> {
    *budget = budget.checked_sub(1)?;
    match &e.kind {
        TExprKind::Var(v) if *v == x => out.push(key(e)),
        TExprKind::If { then, otherwise, .. } => {
            walk(x, then, out, budget)?;
            walk(x, otherwise, out, budget)?;
        }
        TExprKind::Let { value, body, .. } => {
            walk(x, body, out, budget)?;
            if !reads(x, body, budget)? {
                walk(x, value, out, budget)?;
            }
        }
        TExprKind::Unbox { boxed, body, .. } if boxed.ty.shape.is_scalar() => walk(x, body, out, budget)?,
        TExprKind::Record(fields) => {
            let mut later = false;
            for (_, field) in fields.iter().rev() {
                if !later {
                    walk(x, field, out, budget)?;
                }
                later = later || reads(x, field, budget)?;
            }
        }
        TExprKind::Field { record, .. } => walk(x, record, out, budget)?,
        TExprKind::App { func, arg, .. } => {
            // A scalar primitive, as `Interpreter::scalar_fast_path` runs
            // it: its operands evaluated in order, then one kernel.
            match &func.kind {
                TExprKind::Intrinsic(name) if crate::scalar::arity(name) == Some(1) => {
                    return walk(x, arg, out, budget);
                }
                TExprKind::App {
                    func: inner, arg: a, ..
                } if matches!(inner.kind, TExprKind::Intrinsic(name) if crate::scalar::arity(name) == Some(2)) =>
                {
                    walk(x, arg, out, budget)?;
                    if !reads(x, arg, budget)? {
                        walk(x, a, out, budget)?;
                    }
                    return Some(());
                }
                _ => {}
            }
            // An update applied in full (`Interpreter::update`): its
            // destination evaluated last when it is a path (`is_path`),
            // else first.
            if let Some((_, args)) = update_spine(e)
                && let Some((dest, rest)) = args.split_first()
            {
                let mut rest_reads = false;
                for a in rest {
                    rest_reads = rest_reads || reads(x, a, budget)?;
                }
                if is_path(dest) || !rest_reads {
                    walk(x, dest, out, budget)?;
                }
            }
            // A loop applied in full (`batch::apply_spine`): its state,
            // which no other argument reads.
            if let Some((state, rest)) = loop_spine(e) {
                let mut rest_reads = false;
                for a in rest {
                    rest_reads = rest_reads || reads(x, a, budget)?;
                }
                if !rest_reads {
                    walk(x, state, out, budget)?;
                }
            }
        }
        _ => {}
    }
    Some(())
}

impl Interpreter {
    /// How `var`, whose scope is `scope`, is bound to `value` by a plain
    /// evaluation of chain `chain` (see the module's comment): owned (its
    /// value moved out at its last reads) when it has any, its value has
    /// no functions and the reference path is not asked for; plainly
    /// otherwise.
    pub(crate) fn binding<'p>(
        &mut self,
        var: VarId,
        value: Value<'p>,
        scope: &TExpr,
        chain: u64,
    ) -> Binding<'p> {
        if self.reference_only || chain == 0 || atoms(&value.data) < MOVED_FROM {
            return Binding::Val(var, value);
        }
        let finals = self
            .last_reads
            .entry((key(scope), var))
            .or_insert_with(|| Rc::from(last_reads(var, scope)))
            .clone();
        if finals.is_empty() {
            return Binding::Val(var, value);
        }
        match plain(value.data) {
            Ok(data) => Binding::Owned(
                var,
                Owned {
                    shape: value.shape,
                    data: RefCell::new(Some(data)),
                    finals,
                    chain,
                },
            ),
            Err(data) => Binding::Val(
                var,
                Array {
                    shape: value.shape,
                    data,
                },
            ),
        }
    }
}

/// The value of a variable bound to be moved out at its last reads: its
/// atoms (no functions among them: held apart from the program's
/// lifetime, so that an environment holding it in a cell still shortens
/// as a lifetime may) until taken.
#[derive(Debug)]
pub(crate) struct Owned {
    shape: Vec<usize>,
    data: RefCell<Option<Data>>,
    /// The `Var` nodes of its last reads, by address.
    finals: Rc<[usize]>,
    /// The chain of the evaluation that bound it (never 0).
    chain: u64,
}

impl Owned {
    /// Whether the `Var` node at `at`, evaluated in chain `chain`, may take
    /// the value.
    pub(crate) fn moves_at(&self, at: usize, chain: u64) -> bool {
        chain == self.chain && self.finals.contains(&at)
    }

    /// The value, shared (`None` once taken).
    pub(crate) fn get<'p>(&self) -> Option<Value<'p>> {
        Some(Array {
            shape: self.shape.clone(),
            data: recast(self.data.borrow().clone()?),
        })
    }

    /// The value, moved out: the binding holds it no more.
    pub(crate) fn take<'p>(&self) -> Option<Value<'p>> {
        Some(Array {
            shape: self.shape.clone(),
            data: recast(self.data.borrow_mut().take()?),
        })
    }

    /// The same binding for another environment (`Env::map_batched`):
    /// sharing the value, or empty as this one is.
    pub(crate) fn share(&self) -> Owned {
        Owned {
            shape: self.shape.clone(),
            data: RefCell::new(self.data.borrow().clone()),
            finals: self.finals.clone(),
            chain: self.chain,
        }
    }
}

/// How many atoms `d` holds (its records' fields' together).
fn atoms<F>(d: &Data<F>) -> usize {
    match d {
        Data::Records(rs) => rs.fields.iter().map(|f| atoms(&f.data)).sum(),
        _ => d.len(),
    }
}

/// Whether `d` holds no atoms of the general kind (functions, boxes), in
/// its records' fields either.
fn is_plain<F>(d: &Data<F>) -> bool {
    match d {
        Data::Int(_) | Data::Float(_) | Data::Bool(_) => true,
        Data::Atoms(_) => false,
        Data::Records(rs) => rs.fields.iter().all(|f| is_plain(&f.data)),
    }
}

/// `d` as data with no functions (the same buffers), or `d` back when it
/// holds general atoms.
fn plain<F: Clone>(d: Data<F>) -> Result<Data, Data<F>> {
    if !is_plain(&d) {
        return Err(d);
    }
    Ok(recast(d))
}

/// Plain data (`is_plain`) recast to any kind of function atoms: the same
/// buffers, records rebuilt around them.
fn recast<F: Clone, G>(d: Data<F>) -> Data<G> {
    match d {
        Data::Int(v) => Data::Int(v),
        Data::Float(v) => Data::Float(v),
        Data::Bool(v) => Data::Bool(v),
        Data::Atoms(_) => Data::Atoms(Vec::new().into()),
        Data::Records(rs) => {
            let rs = Arc::try_unwrap(rs).unwrap_or_else(|shared| (*shared).clone());
            Data::records(Records {
                count: rs.count,
                fields: rs
                    .fields
                    .into_iter()
                    .map(|f| RecordField {
                        name: f.name,
                        cell: f.cell,
                        data: recast(f.data),
                    })
                    .collect(),
            })
        }
    }
}

impl<'p> Interpreter {
    /// An update (`scatter`, `append`) applied in full in plain
    /// evaluation, `e` evaluated in chain `chain`: its destination handed the
    /// chain (so its last read moves it out of its binding), then, when
    /// no argument has a frame, written over in place if nothing else
    /// holds it (`scatter_onto`, `append_onto`); a framed one runs as
    /// `batch::apply_spine` runs it. A destination that is a path
    /// (`is_path`: it cannot fail) is evaluated after the other arguments,
    /// so that they may read the variable it takes (`(scatter h i (+ 1
    /// (index h i)))`) — unless the evaluation budget is counted (then it
    /// runs out where the reference's would, and nothing is moved). `None`
    /// (nothing evaluated) when `e` is not such an update.
    pub(crate) fn update(
        &mut self,
        e: &'p TExpr,
        env: &crate::eval::Env<'p>,
        chain: u64,
    ) -> crate::eval::Run<Option<Value<'p>>> {
        if self.reference_only || !self.batch.is_empty() || update_spine(e).is_none() {
            return Ok(None);
        }
        let mut spine = Vec::new();
        let mut head = e;
        while let TExprKind::App { func, arg, lifted } = &head.kind {
            spine.push((&**arg, lifted, head));
            head = func;
        }
        spine.reverse();
        let f = self.eval(head, env)?;
        let p = match &f.data {
            Data::Atoms(atoms) if f.shape.is_empty() => match atoms.first() {
                Some(remora_value::Atom::Fun(crate::eval::Fun::Prim(p))) if p.args.is_empty() => p.clone(),
                _ => return crate::eval::fail(e.span, "internal error: an update that is not an intrinsic"),
            },
            _ => return crate::eval::fail(e.span, "internal error: an update that is not an intrinsic"),
        };
        let Some(((dest, dest_lifted, _), rest)) = spine.split_first() else {
            return Ok(None);
        };
        let dest_last = is_path(dest) && self.fuel.is_none();
        let dest_value = |it: &mut Self| -> crate::eval::Run<crate::batch::Batched<'p>> {
            if !is_path(dest) && it.gives_view(dest, env) {
                it.eval_view(dest, env)
            } else {
                Ok(crate::batch::Batched::plain(it.eval_chained(dest, env, chain)?))
            }
        };
        let mut args: Vec<(crate::batch::Batched<'p>, Vec<usize>)> =
            match self.affine_scatter(p.name, &spine, env, dest_last, e.span, &mut |it: &mut Self| {
                dest_value(it)
            })? {
                Some(Ok(v)) => return Ok(Some(v)),
                Some(Err(args)) => args,
                None => Vec::with_capacity(spine.len()),
            };
        if args.is_empty() {
            if !dest_last {
                let d = dest_value(self)?;
                args.push((d, self.shape_of(&dest_lifted.arg_cell, env, dest.span)?));
            }
            for (arg, lifted, _) in rest {
                let a = self.eval_view(arg, env)?;
                args.push((a, self.shape_of(&lifted.arg_cell, env, arg.span)?));
            }
            if dest_last {
                let d = dest_value(self)?;
                args.insert(0, (d, self.shape_of(&dest_lifted.arg_cell, env, dest.span)?));
            }
        }
        // Whole arguments, no frame: written over the destination.
        if args
            .iter()
            .all(|(a, cell)| a.nb == 0 && a.own() == cell.as_slice())
            && let Some((d, _)) = args.first()
            && d.is_dense()
        {
            crate::eval::admit(args.iter().map(|(a, _)| a.v.data.len()).sum(), e.span)?;
            let mut whole = Vec::with_capacity(args.len());
            for (k, (a, _)) in args.into_iter().enumerate() {
                whole.push(match k {
                    0 => a.v,
                    _ => match a.densify() {
                        Some(a) => a.v,
                        None => {
                            return crate::eval::fail(
                                e.span,
                                "internal error: an argument cannot be laid out",
                            );
                        }
                    },
                });
            }
            let mut whole = whole.into_iter();
            let (Some(dest), Some(second)) = (whole.next(), whole.next()) else {
                return crate::eval::fail(e.span, "internal error: an update without its arguments");
            };
            return match (p.name, whole.next()) {
                ("scatter", Some(src)) => {
                    crate::intrinsics::scatter_onto(dest, &second, &src, e.span).map(Some)
                }
                ("append", None) => crate::intrinsics::append_onto(dest, &second, e.span).map(Some),
                _ => crate::eval::fail(e.span, format!("internal error: {} is not an update", p.name)),
            };
        }
        // Over a frame: its batched rule, else cell by cell, as
        // `batch::apply_spine` runs an intrinsic.
        self.at = e.span;
        if let Some(v) = self.apply_prim_framed(&p, args.clone()) {
            return Ok(Some(v));
        }
        if let Some(message) = crate::eval::take_fault() {
            return crate::eval::fail(e.span, message);
        }
        self.apply_in_turn(f, args, &spine, env, e.span).map(Some)
    }
}

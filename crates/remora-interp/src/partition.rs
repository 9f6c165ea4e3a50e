//! A grade used to gather: `(index xs (grade keys))` (or `nth`, or the
//! grade bound by a `let` and used once) is `xs` sorted stably by the
//! keys. For keys of a small range (flags, bins, categories: a stream
//! compaction writes "kept first" as the grade of a flag) that is one
//! counting pass over the keys and one pass moving each item of `xs` to its
//! place — a stable partition — without the permutation (an Int per item)
//! or the gather through it.
//!
//! A `let` whose value is a grade, used once, binds its variable to the
//! keys (evaluated where the `let` is, so every error comes when it
//! would): the grade itself is made only if something other than such a
//! gather reads it (`Graded::order`, made once). The result is the
//! reference path's: the stable order of the keys is unique.

use crate::batch::{Batched, sort_framed};
use crate::eval::{Env, Interpreter, Prim, Run, Value};
use crate::tally::intrinsic_name;
use remora_check::typed::{TAtomKind, TExpr, TExprKind, VarId};
use remora_types::Lifted;
use remora_value::{Array, Data};

/// Keys of a wider range than this are graded as usual.
const SMALL_RANGE: u64 = 1 << 16;

/// A grade not made yet: the keys, each row of `d` of them graded. (It is
/// read at most once: its variable appears once, outside any lambda.)
#[derive(Debug)]
pub(crate) struct Graded<'p> {
    key: Value<'p>,
    d: usize,
}

impl<'p> Graded<'p> {
    /// The grade (`None`: memory ran short).
    pub(crate) fn order(&self) -> Option<Value<'p>> {
        grade_rows(&self.key, self.d)
    }

    /// The keys of a one-row grade.
    fn row(&self) -> Option<&Value<'p>> {
        (self.key.shape.len() == 1).then_some(&self.key)
    }
}

/// The grade of every row of `d` keys of `key` (flags, where the keys
/// were written `(bool->i flags)`, are graded as those Ints).
fn grade_rows<'p>(key: &Value<'p>, d: usize) -> Option<Value<'p>> {
    if let Data::Bool(flags) = &key.data {
        let ints = Array {
            shape: key.shape.clone(),
            data: Data::Int(flags.iter().map(|&b| i64::from(b)).collect()),
        };
        return grade_rows(&ints, d);
    }
    if d == 0 || key.data.is_empty() {
        return Some(Array {
            shape: key.shape.clone(),
            data: Data::Int(Vec::new().into()),
        });
    }
    sort_framed("grade", &[(key.clone(), vec![d])])
}

/// `(grade k)`: the key expression and how it is lifted. Keys written
/// `(bool->i flags)` are the flags themselves (0 before 1 is `#f` before
/// `#t`): the Int keys are never made.
fn grade_of(e: &TExpr) -> Option<(&TExpr, &Lifted)> {
    let (head, spine) = e.spine();
    match (intrinsic_name(head)?, spine.as_slice()) {
        ("grade", [(k, lifted)]) => {
            let (inner, flags) = k.spine();
            match (intrinsic_name(inner), flags.as_slice()) {
                (Some("bool->i"), [(b, _)]) => Some((b, lifted)),
                _ => Some((k, lifted)),
            }
        }
        _ => None,
    }
}

impl<'p> Interpreter {
    /// `(let ((val var (grade k))) body)` with `var` read once in `body`,
    /// outside any lambda (so at most once):
    /// the environment for `body` with `var` bound to the keys, graded only
    /// if read other than by a gather (`None`: not such a `let`; nothing
    /// evaluated).
    pub(crate) fn defer_grade(
        &mut self,
        var: VarId,
        value: &'p TExpr,
        body: &'p TExpr,
        env: &Env<'p>,
    ) -> Run<Option<Env<'p>>> {
        if self.reference_only {
            return Ok(None);
        }
        let Some((k, lifted)) = grade_of(value) else {
            return Ok(None);
        };
        if reads(body, var) != Some(1) {
            return Ok(None);
        }
        let key = self.eval(k, env)?;
        let cell = self.shape_of(&lifted.arg_cell, env, k.span)?;
        let (Data::Int(_) | Data::Bool(_), [d]) = (&key.data, cell.as_slice()) else {
            return crate::eval::fail(
                value.span,
                "internal error: a grade of keys that are not Int vectors",
            );
        };
        let graded = Graded { d: *d, key };
        Ok(Some(env.with(crate::eval::Binding::Graded(
            var,
            std::rc::Rc::new(graded),
        ))))
    }

    /// `(index xs o)` or `(nth xs o)`, `xs` one whole vector (or array of
    /// items) and `o` a grade of one row of keys not made yet (a `let`'s,
    /// or `(grade k)` in place): `xs` sorted stably by the keys when they
    /// are of a small range, else gathered by their grade (`None`: not
    /// such a gather; nothing evaluated).
    pub(crate) fn gather_by_grade(
        &mut self,
        p: &Prim<'p>,
        spine: &[(&'p TExpr, &'p Lifted, &'p TExpr)],
        env: &Env<'p>,
    ) -> Run<Option<Value<'p>>> {
        if !matches!(p.name, "index" | "nth") || !p.args.is_empty() || self.reference_only {
            return Ok(None);
        }
        let [(xs_e, xs_l, _), (o_e, o_l, _)] = spine else {
            return Ok(None);
        };
        let deferred = match &o_e.kind {
            TExprKind::Var(v) => match env.graded(*v) {
                Some(g) if g.row().is_some() => Some(g),
                _ => return Ok(None),
            },
            _ => None,
        };
        let written = match deferred {
            Some(_) => None,
            None => match grade_of(o_e) {
                Some(k) => Some(k),
                None => return Ok(None),
            },
        };
        // In written order: the items, then the keys.
        let xs = self.eval(xs_e, env)?;
        let xs_cell = self.shape_of(&xs_l.arg_cell, env, xs_e.span)?;
        let (key, order) = match (deferred, written) {
            (Some(g), _) => (g.row().cloned(), Some(g)),
            (None, Some((k, _))) => (Some(self.eval(k, env)?), None),
            (None, None) => (None, None),
        };
        let Some(key) = key else {
            return Ok(None);
        };
        let o_cell = self.shape_of(&o_l.arg_cell, env, o_e.span)?;
        if xs.shape == xs_cell
            && o_cell.is_empty()
            && key.shape.len() == 1
            && xs.shape.first() == key.shape.first()
            && let Some(data) = match &key.data {
                Data::Int(keys) => partition(keys, &xs.data, xs.shape.iter().skip(1).product()),
                Data::Bool(flags) => partition_by_flags(flags, &xs.data, xs.shape.iter().skip(1).product()),
                _ => None,
            }
        {
            return Ok(Some(Array {
                shape: xs.shape.clone(),
                data,
            }));
        }
        // Keys of a wide range: the grade, and the gather through it.
        let order = match order {
            Some(g) => g.order(),
            None => grade_rows(&key, key.shape.last().copied().unwrap_or(0)),
        };
        let Some(order) = order else {
            crate::eval::check_starved(o_e.span)?;
            return crate::eval::fail(o_e.span, "grade: out of memory");
        };
        let args = vec![
            (Batched::plain(xs.clone()), xs_cell.clone()),
            (Batched::plain(order.clone()), o_cell.clone()),
        ];
        self.at = spine.last().map_or(o_e.span, |(_, _, app)| app.span);
        if let Some(v) = self.apply_prim_framed(p, args) {
            return Ok(Some(v));
        }
        if let Some(message) = crate::eval::take_fault() {
            return crate::eval::fail(self.at, message);
        }
        crate::eval::check_starved(o_e.span)?;
        let mut f = crate::eval::fun_value(crate::eval::Fun::Prim(std::rc::Rc::new(p.clone())));
        for ((a, cell), (_, _, app)) in [(xs, xs_cell), (order, o_cell)].into_iter().zip(spine) {
            f = self.apply(&f, a, &cell, &app.ty, env, app.span)?;
        }
        Ok(Some(f))
    }
}

/// How many times `e` reads `var`; `None` when a lambda reads it (it may
/// run many times), or when `e` is too large to look through cheaply (a
/// `let` asks this of its body: a long chain of them must stay linear).
pub(crate) fn reads(e: &TExpr, var: VarId) -> Option<usize> {
    reads_but(e, var, |_| None)
}

/// [`reads`], not counting the reads that `free` passes over: for an
/// expression reading `var` in a way that costs nothing, the expressions
/// inside it still to look through (`Some`), else `None`.
pub(crate) fn reads_but<'e>(
    e: &'e TExpr,
    var: VarId,
    free: impl Fn(&'e TExpr) -> Option<Vec<&'e TExpr>>,
) -> Option<usize> {
    const BUDGET: usize = 1 << 12;
    let mut count = 0;
    let mut seen = 0;
    // Each expression with whether it lies inside a lambda.
    let mut stack: Vec<(&TExpr, bool)> = vec![(e, false)];
    let mut children = Vec::new();
    while let Some((x, inside)) = stack.pop() {
        seen += 1;
        if seen > BUDGET {
            return None;
        }
        if let Some(rest) = free(x) {
            stack.extend(rest.into_iter().map(|c| (c, inside)));
            continue;
        }
        match &x.kind {
            TExprKind::Var(v) if *v == var => {
                if inside {
                    return None;
                }
                count += 1;
            }
            TExprKind::Array { atoms, .. } => {
                for a in atoms {
                    match &a.kind {
                        TAtomKind::Lambda { body, .. }
                        | TAtomKind::TLambda { body, .. }
                        | TAtomKind::ILambda { body, .. } => {
                            stack.push((body, true));
                        }
                        TAtomKind::Box { body, .. } => stack.push((body, inside)),
                        _ => {}
                    }
                }
                continue;
            }
            TExprKind::Unbox { boxed, body, .. } => {
                // (The body runs once per box.)
                stack.push((boxed, inside));
                stack.push((body, true));
                continue;
            }
            _ => {}
        }
        children.clear();
        x.push_children(&mut children);
        stack.extend(children.iter().map(|c| (*c, inside)));
    }
    Some(count)
}

/// The items of `xs` (each `item` atoms) whose flag is `#f`, in order,
/// then those whose flag is `#t`: the stable order of `(bool->i flags)`.
fn partition_by_flags<F: Clone>(flags: &[bool], xs: &Data<F>, item: usize) -> Option<Data<F>> {
    fn place<T: Copy + Default>(flags: &[bool], xs: &[T], item: usize) -> Option<Vec<T>> {
        let falses = flags.iter().filter(|&&b| !b).count();
        let mut out = crate::kernel::buffer(xs.len()).ok()?;
        out.resize(xs.len(), T::default());
        let (mut f, mut t) = (0, falses * item);
        if item == 1 {
            for (&b, &x) in flags.iter().zip(xs) {
                let at = if b { &mut t } else { &mut f };
                *out.get_mut(*at)? = x;
                *at += 1;
            }
            return Some(out);
        }
        for (&b, x) in flags.iter().zip(xs.chunks_exact(item)) {
            let at = if b { &mut t } else { &mut f };
            out.get_mut(*at..*at + item)?.copy_from_slice(x);
            *at += item;
        }
        Some(out)
    }
    if item == 0 {
        return None;
    }
    Some(match xs {
        Data::Float(v) => Data::Float(place(flags, v, item)?.into()),
        Data::Int(v) => Data::Int(place(flags, v, item)?.into()),
        Data::Bool(v) => Data::Bool(place(flags, v, item)?.into()),
        _ => return None,
    })
}

/// The items of `xs` (each `item` atoms) in the stable order of `keys`,
/// one key per item, when the keys span a small range (a counting sort:
/// `None` for a wider range, or data other than numbers and Bools).
fn partition<F: Clone>(keys: &[i64], xs: &Data<F>, item: usize) -> Option<Data<F>> {
    let (&first, _) = keys.split_first()?;
    // The range, found out within a block of keys when it is wide.
    let (mut low, mut high) = (first, first);
    for block in keys.chunks(1 << 12) {
        for &k in block {
            low = low.min(k);
            high = high.max(k);
        }
        if high.abs_diff(low) >= SMALL_RANGE {
            return None;
        }
    }
    let span = high.abs_diff(low) as usize + 1;
    let mut next = vec![0usize; span];
    for &k in keys {
        // (k - low < span, found above.)
        if let Some(c) = next.get_mut(k.abs_diff(low) as usize) {
            *c += 1;
        }
    }
    let mut start = 0;
    for c in next.iter_mut() {
        let count = *c;
        *c = start;
        start += count;
    }
    fn place<T: Copy + Default>(
        keys: &[i64],
        low: i64,
        next: &mut [usize],
        xs: &[T],
        item: usize,
    ) -> Option<Vec<T>> {
        let mut out = crate::kernel::buffer(xs.len()).ok()?;
        out.resize(xs.len(), T::default());
        if item == 1 {
            for (&k, &x) in keys.iter().zip(xs) {
                let slot = next.get_mut(k.abs_diff(low) as usize)?;
                *out.get_mut(*slot)? = x;
                *slot += 1;
            }
        } else {
            for (&k, x) in keys.iter().zip(xs.chunks_exact(item)) {
                let slot = next.get_mut(k.abs_diff(low) as usize)?;
                out.get_mut(*slot * item..(*slot + 1) * item)?.copy_from_slice(x);
                *slot += 1;
            }
        }
        Some(out)
    }
    Some(match xs {
        Data::Float(v) => Data::Float(place(keys, low, &mut next, v, item)?.into()),
        Data::Int(v) => Data::Int(place(keys, low, &mut next, v, item)?.into()),
        Data::Bool(v) => Data::Bool(place(keys, low, &mut next, v, item)?.into()),
        _ => return None,
    })
}

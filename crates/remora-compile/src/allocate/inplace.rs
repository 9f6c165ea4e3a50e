//! Loop states updated in place. A step (of `fold`, `iterate`, `while`,
//! or one field of a record state) whose new state is the old one with
//! some items replaced — a `scatter` into the state, through `let`s, `if`s
//! and `unbox`es, or the state itself unchanged — writes the replaced
//! items into the state's own buffer: no second buffer, no copy of the
//! whole state per step (a sieve's steps cost their multiples, not the
//! flags). Sound because the update is the step's last act: its
//! conditions, bindings and boxes are computed first, in the order the
//! step gives them, and then only the update's own indices and items are
//! read while the state is written; those are computed into buffers of
//! their own first where they might read the state (`reads_buf`). A
//! record state's other fields must not read the field at all (they are
//! made after it). A step of any other shape keeps the two buffers.

use super::*;

/// The variables of a step that hold the old state (one array) where it
/// is read: the array itself (`arrays`), a record it is the field `field`
/// of (`records`), and the variables bound to values computed from it
/// (`tainted`: only a record's other fields care).
#[derive(Clone, Default)]
pub(super) struct Olds {
    arrays: Vec<VarId>,
    records: Vec<VarId>,
    field: Option<String>,
    tainted: Vec<VarId>,
}

impl Olds {
    /// Whether `e` names the old state: a variable holding it, or its
    /// field of a record variable holding it.
    fn is_old(&self, e: &maps::Expr) -> bool {
        match &e.kind {
            Kind::Var(v) => self.arrays.contains(v),
            Kind::Field { record, field } => {
                matches!(record.kind, Kind::Var(r) if self.records.contains(&r))
                    && self.field.as_deref() == Some(field.as_str())
            }
            _ => false,
        }
    }

    /// `b` bound in a `let` of the step: an alias of the state joins the
    /// old ones, a value computed from it the tainted ones.
    fn bind(&mut self, b: &maps::Bind) {
        if self.is_old(&b.value) {
            self.arrays.push(b.var);
        } else if matches!(b.value.kind, Kind::Var(r) if self.records.contains(&r)) {
            self.records.push(b.var);
        } else if self.reads(&b.value) {
            self.tainted.push(b.var);
        }
    }

    /// Whether `e` may read the old state: it names a variable holding it
    /// or computed from it, or a record holding it other than by another
    /// of its fields.
    fn reads(&self, e: &maps::Expr) -> bool {
        let mut found = false;
        let mut other_fields = 0usize;
        e.each(&mut |x| match &x.kind {
            Kind::Var(v) => found |= self.arrays.contains(v) || self.tainted.contains(v),
            Kind::Field { record, field }
                if matches!(record.kind, Kind::Var(r) if self.records.contains(&r))
                    && self.field.as_deref() != Some(field.as_str()) =>
            {
                other_fields += 1;
            }
            _ => {}
        });
        let records: usize = self.records.iter().map(|r| crate::fuse::uses(e, *r)).sum();
        found || records > other_fields
    }
}

/// Whether `e`, a step's value, is an update of the old state `olds`
/// names: the state itself, a `scatter` into it, or an `if`, `let` or
/// `unbox` of updates. A `let` binding an update of the state, after
/// which nothing reads the old one, is an update too (written over the
/// state where it is bound: its variable is pushed on `bound`), its
/// variable then the state (a scatter into a scatter).
pub(super) fn updates(e: &maps::Expr, olds: &Olds, bound: &mut Vec<VarId>) -> bool {
    match &e.kind {
        Kind::Var(_) | Kind::Field { .. } => olds.is_old(e),
        Kind::App { func, args } if prim_of(func) == Some("scatter") => {
            matches!(args.as_slice(), [dest, _, _] if olds.is_old(dest))
        }
        Kind::If { then, otherwise, .. } => updates(then, olds, bound) && updates(otherwise, olds, bound),
        Kind::Unbox { body, .. } => updates(body, olds, bound),
        Kind::Map { frame, binds, body } if frame.is_scalar() => {
            let mut olds = olds.clone();
            olds.bind_all(&binds.iter().collect::<Vec<_>>(), body, bound);
            // (The last binding, which the body only names, is written
            // where the `let`'s value goes.)
            match (binds.last(), &body.kind) {
                (Some(last), Kind::Var(v)) if *v == last.var && !olds.arrays.contains(v) => {
                    updates(&last.value, &olds, bound)
                }
                _ => updates(body, &olds, bound),
            }
        }
        _ => false,
    }
}

impl Olds {
    /// `binds`, a `let`'s bindings before `body`, bound in turn (see
    /// [`updates`]).
    fn bind_all(&mut self, binds: &[&maps::Bind], body: &maps::Expr, bound: &mut Vec<VarId>) {
        for (k, b) in binds.iter().enumerate() {
            let later = || binds[k + 1..].iter().map(|b| &b.value).chain([body]);
            let mut inner = Vec::new();
            if !self.is_old(&b.value)
                && updates(&b.value, self, &mut inner)
                && !later().any(|x| self.reads(x))
            {
                bound.extend(inner);
                bound.push(b.var);
                *self = Olds {
                    arrays: vec![b.var],
                    field: self.field.clone(),
                    ..Olds::default()
                };
                continue;
            }
            self.bind(b);
        }
    }
}

/// A function's parameters (as many as `n`) and its body: a closure whose
/// body is a lambda, and so on (`(fn (a b) …)`, a `fun` of the program).
fn parameters<'m>(c: &Closure<'m>, n: usize) -> Option<(Vec<VarId>, &'m maps::Expr)> {
    let Binder::Value(first) = c.binder else {
        return None;
    };
    let (mut params, mut body) = (vec![first], c.body);
    while params.len() < n {
        let Kind::Array { shape, atoms } = &body.kind else {
            return None;
        };
        match (shape.as_slice(), atoms.as_slice()) {
            (
                [],
                [
                    Atom::Lambda {
                        param, body: inner, ..
                    },
                ],
            ) => {
                params.push(*param);
                body = inner;
            }
            _ => return None,
        }
    }
    Some((params, body))
}

/// Whether two views are the same atoms in the same order.
pub(super) fn same_view(a: &View, b: &View) -> bool {
    a.buf == b.buf && a.offset == b.offset && a.dims == b.dims && a.strides == b.strides
}

fn mentions_buf(e: &Expr, buf: Var) -> bool {
    let mut found = false;
    e.each_var(&mut |v| found |= v == buf);
    found
}

fn view_reads(v: &View, buf: Var) -> bool {
    v.buf == buf
        || std::iter::once(&v.offset)
            .chain(&v.dims)
            .chain(&v.strides)
            .any(|e| mentions_buf(e, buf))
}

/// Whether `v` may read the buffer `buf` where it is used later: a view
/// of it, a scalar that loads it, a delayed map or a function whose
/// free variables hold such values (anything else made later: yes).
pub(super) fn reads_buf(v: &Val<'_>, buf: Var) -> bool {
    reads_buf_at(v, buf, 0)
}

fn reads_buf_at(v: &Val<'_>, buf: Var, depth: usize) -> bool {
    if depth > 8 {
        return true;
    }
    match v {
        Val::Scalar(_, x) => mentions_buf(x, buf),
        Val::Array(view) => view_reads(view, buf),
        Val::Rotated(r) => view_reads(&r.src, buf) || mentions_buf(&r.split, buf),
        Val::Delayed(d) => d.appended.is_some() || scope_reads(&d.scope, d.map, buf, depth),
        Val::Func(c) => scope_reads(&c.scope, c.body, buf, depth),
        Val::Prim { .. } => false,
        Val::Partial { func, args } => {
            reads_buf_at(func, buf, depth + 1) || args.iter().any(|a| reads_buf_at(a, buf, depth + 1))
        }
        Val::Funcs { items, .. } => items.iter().any(|a| reads_buf_at(a, buf, depth + 1)),
        Val::Box { payload, .. } => reads_buf_at(payload, buf, depth + 1),
        Val::Record(fields) => fields.iter().any(|(_, a)| reads_buf_at(a, buf, depth + 1)),
        Val::Boxes(_) | Val::Graded(_) | Val::Offsets(_) | Val::Scanned(_) => true,
    }
}

/// Whether `e`, made in `scope`, may read `buf` through its free variables.
fn scope_reads(scope: &Scope<'_>, e: &maps::Expr, buf: Var, depth: usize) -> bool {
    if scope.dims.values().any(|d| mentions_buf(d, buf))
        || scope.shapes.values().flatten().any(|d| mentions_buf(d, buf))
    {
        return true;
    }
    let mut named = std::collections::HashSet::new();
    e.each(&mut |x| {
        if let Kind::Var(v) = x.kind {
            named.insert(v);
        }
    });
    named
        .iter()
        .any(|v| scope.vars.get(v).is_some_and(|x| reads_buf_at(x, buf, depth + 1)))
}

impl<'m> Alloc<'m> {
    /// The step `f` applied to `args` written over the array state `acc`
    /// in place, where the step is an update of it (see the module's
    /// documentation); `false`, with nothing written, where not.
    pub(super) fn step_in_place(
        &mut self,
        f: &Val<'m>,
        args: &[Val<'m>],
        acc: &View,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<bool> {
        let Val::Func(c) = f else {
            return Ok(false);
        };
        let Some((params, inner)) = parameters(c, args.len()) else {
            return Ok(false);
        };
        let olds = Olds {
            arrays: params
                .iter()
                .zip(args)
                .filter(|(_, a)| matches!(a, Val::Array(v) if same_view(v, acc)))
                .map(|(p, _)| *p)
                .collect(),
            ..Olds::default()
        };
        let mut bound = Vec::new();
        if olds.arrays.is_empty() || !updates(inner, &olds, &mut bound) {
            return Ok(false);
        }
        let saved = self.set_in_place(bound.iter().map(|v| (*v, acc.clone())));
        let r = self.entered(f, args, e, body, |a, inner, body| a.update_into(inner, acc, body));
        self.in_place = saved;
        r?;
        Ok(true)
    }

    /// The body of `f` applied to `args`, given to `write` in the
    /// function's scope with its last parameter bound (the others applied).
    fn entered<T>(
        &mut self,
        f: &Val<'m>,
        args: &[Val<'m>],
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
        write: impl FnOnce(&mut Self, &'m maps::Expr, &mut Vec<Stmt>) -> Res<T>,
    ) -> Res<T> {
        let mut args = args.to_vec();
        let Some(last) = args.pop() else {
            return unsupported("a step of no arguments");
        };
        let g = if args.is_empty() {
            f.clone()
        } else {
            self.apply(f.clone(), args, e, body)?
        };
        let Val::Func(c) = g else {
            return unsupported("a step that is not a function");
        };
        let Binder::Value(p) = c.binder else {
            return unsupported("a step function of a type");
        };
        let saved = std::mem::replace(&mut self.scope, c.scope.clone());
        self.scope.vars.insert(p, last);
        let r = write(self, c.body, body);
        self.scope = saved;
        r
    }

    /// The record state `fields` stepped by `f` applied to `args`, each
    /// array field the step updates (and no other field reads) written in
    /// place (see the module's documentation), the others as
    /// [`Alloc::step_fields`] does; `None`, with nothing written, where no
    /// field is updated or the step is not `let`s around a record.
    pub(super) fn record_step_in_place(
        &mut self,
        fields: &[(String, View)],
        f: &Val<'m>,
        args: &[Val<'m>],
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Option<Val<'m>>> {
        let Val::Func(c) = f else {
            return Ok(None);
        };
        let Some((params, inner)) = parameters(c, args.len()) else {
            return Ok(None);
        };
        let mut binds = Vec::new();
        let mut x = inner;
        while let Kind::Map {
            frame,
            binds: bs,
            body,
        } = &x.kind
            && frame.is_scalar()
        {
            binds.extend(bs);
            x = body;
        }
        let Kind::Record(lits) = &x.kind else {
            return Ok(None);
        };
        let mut in_place: Vec<(String, View)> = Vec::new();
        let mut binds_in_place = Vec::new();
        for (name, acc) in fields {
            let records = params
                .iter()
                .zip(args)
                .filter(|(_, a)| match a {
                    Val::Record(fs) => fs
                        .iter()
                        .any(|(n, v)| n == name && matches!(v, Val::Array(v) if same_view(v, acc))),
                    _ => false,
                })
                .map(|(p, _)| *p)
                .collect();
            let mut olds = Olds {
                records,
                field: Some(name.clone()),
                ..Olds::default()
            };
            let mut bound = Vec::new();
            olds.bind_all(&binds, x, &mut bound);
            let updated = lits.iter().all(|(n, lit)| {
                if n == name {
                    updates(lit, &olds, &mut bound)
                } else {
                    !olds.reads(lit)
                }
            });
            if updated {
                in_place.push((name.clone(), acc.clone()));
                binds_in_place.extend(bound.into_iter().map(|v| (v, acc.clone())));
            }
        }
        if in_place.is_empty() {
            return Ok(None);
        }
        let saved = self.set_in_place(binds_in_place);
        let r = self.entered(f, args, e, body, |a, inner, body| {
            a.record_update(inner, &in_place, body)
        });
        self.in_place = saved;
        r.map(Some)
    }

    /// The `let` bindings `binds` made updates in place (see
    /// [`updates`]), each of the state it names; what was before.
    fn set_in_place(&mut self, binds: impl IntoIterator<Item = (VarId, View)>) -> HashMap<VarId, View> {
        let mut now = self.in_place.clone();
        now.extend(binds);
        std::mem::replace(&mut self.in_place, now)
    }

    /// `e`, `let`s around a record, its fields named in `in_place` written
    /// over their states (see [`Alloc::update_into`]), the others values.
    pub(super) fn record_update(
        &mut self,
        e: &'m maps::Expr,
        in_place: &[(String, View)],
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        match &e.kind {
            Kind::Map { frame, .. } if frame.is_scalar() => self.let_tail(e, &Tail::Record(in_place), body),
            Kind::Record(fields) => {
                let mut vals = Vec::with_capacity(fields.len());
                for (name, x) in fields {
                    if let Some((_, acc)) = in_place.iter().find(|(n, _)| n == name) {
                        self.update_into(x, acc, body)?;
                        vals.push((name.clone(), Val::Array(acc.clone())));
                    } else {
                        let v = self.value(x, body)?;
                        vals.push((name.clone(), self.named(v, "field", body)));
                    }
                }
                Ok(Val::Record(vals))
            }
            _ => unsupported("a record step that is not a record"),
        }
    }

    /// `e`, an update of the state `dest` holds (see [`updates`]), written
    /// over it: a `scatter` into it writes only its items; the state
    /// itself, nothing. Anything else is computed and copied in (through
    /// a buffer of its own where it reads `dest`).
    pub(super) fn update_into(&mut self, e: &'m maps::Expr, dest: &View, body: &mut Vec<Stmt>) -> Res<()> {
        match &e.kind {
            Kind::Map { frame, .. } if frame.is_scalar() => {
                self.let_tail(e, &Tail::Update(dest), body)?;
                Ok(())
            }
            Kind::If {
                cond,
                then,
                otherwise,
            } => {
                let Val::Scalar(_, c) = self.value(cond, body)? else {
                    return unsupported("a condition that is not a scalar");
                };
                let mut t = Vec::new();
                self.update_into(then, dest, &mut t)?;
                let mut o = Vec::new();
                self.update_into(otherwise, dest, &mut o)?;
                body.push(Stmt::If {
                    cond: c,
                    then: t,
                    otherwise: o,
                });
                Ok(())
            }
            Kind::Unbox { .. } => self.unboxed(e, body, |a, inner, body| a.update_into(inner, dest, body)),
            Kind::App { func, args } if prim_of(func) == Some("scatter") && args.len() == 3 => {
                let f = self.value(func, body)?;
                let vals = self.arguments(&f, args, body)?;
                let [d, idx, src] = vals.as_slice() else {
                    return unsupported("scatter of other than three arguments");
                };
                let d = self.force(d.clone(), body)?;
                let (Val::Array(d), Val::Array(_) | Val::Delayed(_)) = (&d, idx) else {
                    return unsupported("scatter of these arguments");
                };
                if !same_view(d, dest) {
                    let v = self.apply(f.clone(), vals.clone(), e, body)?;
                    return self.copy_over(v, dest, body);
                }
                // The indices and items computed where they might read
                // the state, before it is written.
                let mut idx = idx.clone();
                if !(matches!(idx, Val::Delayed(_)) && self.scatter_of_map(&vals))
                    || reads_buf(&idx, dest.buf)
                {
                    idx = self.force(idx, body)?;
                }
                let idx = self.apart_from(idx, dest.buf, body)?;
                let src = self.force(src.clone(), body)?;
                let Val::Array(src) = self.apart_from(src, dest.buf, body)? else {
                    return unsupported("scatter of these arguments");
                };
                self.scatter_over(dest, &idx, &src, body)
            }
            _ => {
                let v = self.value(e, body)?;
                self.copy_over(v, dest, body)
            }
        }
    }

    /// `v` copied over `dest`: nothing if it is `dest`, through a buffer
    /// of its own if it reads `dest`'s.
    fn copy_over(&mut self, v: Val<'m>, dest: &View, body: &mut Vec<Stmt>) -> Res<()> {
        let v = self.force(v, body)?;
        if matches!(&v, Val::Array(a) if same_view(a, dest)) {
            return Ok(());
        }
        let v = self.apart_from(v, dest.buf, body)?;
        self.copy(v, dest, body)
    }

    /// `v` (computed), copied into a buffer of its own if it reads `buf`.
    fn apart_from(&mut self, v: Val<'m>, buf: Var, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        match &v {
            Val::Array(a) if reads_buf(&v, buf) => {
                let own = self.alloc("apart", a.elem, a.dims.clone(), body);
                self.copy(v, &own, body)?;
                Ok(Val::Array(own))
            }
            Val::Scalar(elem, x) if mentions_buf(x, buf) => {
                let elem = *elem;
                let x = x.clone();
                let var = self.fresh("apart");
                body.push(Stmt::Let { var, elem, value: x });
                Ok(Val::Scalar(elem, Expr::Var(var)))
            }
            _ => Ok(v),
        }
    }
}

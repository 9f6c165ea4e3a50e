//! An `append` of two vectors of atoms not made where a scan's loop
//! reads it: a `let`-bound append read only by the map that makes an
//! `iscan`'s items (the `[1]` in front of a run's start flags), or only as
//! the flags of a `filter` of an `iscan` not made (the `#t` after the
//! runs' end flags), stays delayed ([`Delayed::appended`]), each item
//! computed where the loop reads it, by which part its index falls in:
//! the first part's item below the first part's length, the second's (the
//! index less that length) from there on. A part that is a map that
//! cannot fail is delayed too, so `(append [1] (bool->i differs))` is
//! never stored; a part that is anything else is computed once, where the
//! append is written. Read any other way, the append is made
//! ([`Alloc::appended_made`]).

use super::*;

/// The parts of a delayed `append` (see the module's comment): item `i`
/// is `first`'s item `i` where `i` is less than `split`, else `second`'s
/// item `i - split`. Each part is an array, a rotation, or a delayed map
/// that cannot fail.
pub(super) struct Appended<'m> {
    first: Val<'m>,
    second: Val<'m>,
    split: Expr,
}

impl<'m> Alloc<'m> {
    /// `b`, a `let`-bound append of vectors, delayed where a sequential
    /// loop reads it: once, by a map that is the items of an `iscan` (or
    /// that a later binding read only as an `iscan`'s items is), or as
    /// the flags of a `filter` of an `iscan` not made
    /// ([`Alloc::scanned_filter`]). (A parallel loop over its items, a
    /// map or a filter in parts, would branch on the part at every item
    /// and not vectorise: there it is made, as any append.)
    pub(super) fn appended_for_a_scan(
        &mut self,
        b: &'m maps::Bind,
        later: &'m [maps::Bind],
        inner: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Option<Val<'m>>> {
        if !is_append(&b.value) || self.loop_depth != 0 || reads_after(b.var, later, inner) != 1 {
            return Ok(None);
        }
        let scanned_flags = flags_of(b.var, later, inner)
            .is_some_and(|xs| matches!(self.scope.vars.get(&xs), Some(Val::Scanned(_))));
        if !scanned_flags && !scanned_through_a_map(b.var, later, inner) {
            return Ok(None);
        }
        self.appended(&b.value, body)
    }

    /// `e`, an `append` of two vectors of atoms, delayed (see the
    /// module's comment); `None` where it is not such an append.
    pub(super) fn appended(&mut self, e: &'m maps::Expr, body: &mut Vec<Stmt>) -> Res<Option<Val<'m>>> {
        let Kind::App { args, .. } = &e.kind else {
            return Ok(None);
        };
        let ([a, b], true) = (args.as_slice(), is_append(e)) else {
            return Ok(None);
        };
        let dims = self.dims(&e.ty.shape)?;
        if dims.len() != 1 {
            return Ok(None);
        }
        let split = match self.dims(&a.ty.shape)?.as_slice() {
            [n] => n.clone(),
            _ => return Ok(None),
        };
        // The parts in order, as the interpreter computes them (a delayed
        // part cannot fail).
        let first = self.part(a, body)?;
        let second = self.part(b, body)?;
        Ok(Some(Val::Delayed(Rc::new(Delayed {
            map: e,
            scope: self.scope.clone(),
            elem: elem_of(&e.ty.atom)?,
            dims,
            transposed: false,
            appended: Some(Rc::new(Appended { first, second, split })),
            whole_cells: false,
        }))))
    }

    /// A part of a delayed append: a map that cannot fail delayed (a
    /// `let` of views around it bound here), anything else computed.
    fn part(&mut self, a: &'m maps::Expr, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        if delayable(a) && cannot_fail(a) {
            return Ok(Val::Delayed(self.delayed(a)?));
        }
        let v = match self.delayed_through_functions(a, body)? {
            Some(Val::Delayed(d)) if self.delayed_cannot_fail(&d) => return Ok(Val::Delayed(d)),
            Some(v) => v,
            None => self.value(a, body)?,
        };
        match self.force(v, body)? {
            v @ (Val::Array(_) | Val::Rotated(_)) => Ok(v),
            _ => unsupported("an append of these arrays"),
        }
    }

    /// The cell at `idx` of the delayed append `d` (parts `ap`): an atom
    /// (one index), from the part its index falls in; the whole append
    /// (no index) stays delayed.
    pub(super) fn appended_cell(
        &mut self,
        d: &Delayed<'m>,
        ap: &Appended<'m>,
        idx: &[Expr],
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        let i = match idx {
            [] => {
                return Ok(Val::Delayed(Rc::new(Delayed {
                    map: d.map,
                    scope: d.scope.clone(),
                    elem: d.elem,
                    dims: d.dims.clone(),
                    transposed: false,
                    appended: d.appended.clone(),
                    whole_cells: false,
                })));
            }
            [i] => i.clone(),
            _ => return unsupported("a cell of an append inside its atoms"),
        };
        let second = || Expr::op("-", vec![i.clone(), ap.split.clone()]);
        // An index known when compiling: its part's item.
        if let (Expr::Int(k), Expr::Int(split)) = (&i, &ap.split) {
            let x = if k < split {
                self.element(&ap.first, std::slice::from_ref(&i), body)?
            } else {
                self.element(&ap.second, &[Expr::Int(k - split)], body)?
            };
            return Ok(Val::Scalar(d.elem, x));
        }
        let var = self.fresh("app");
        body.push(Stmt::Let {
            var,
            elem: d.elem,
            value: zero(d.elem),
        });
        let mut then = Vec::new();
        let x = self.element(&ap.first, std::slice::from_ref(&i), &mut then)?;
        then.push(Stmt::Set { var, value: x });
        let mut otherwise = Vec::new();
        let y = self.element(&ap.second, &[second()], &mut otherwise)?;
        otherwise.push(Stmt::Set { var, value: y });
        body.push(Stmt::If {
            cond: Expr::op("<", vec![i.clone(), ap.split.clone()]),
            then,
            otherwise,
        });
        Ok(Val::Scalar(d.elem, Expr::Var(var)))
    }

    /// The delayed append `d` (parts `ap`) made: each part written into
    /// its run of one buffer.
    pub(super) fn appended_made(
        &mut self,
        d: &Delayed<'m>,
        ap: &Appended<'m>,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        let dest = self.alloc("app", d.elem, d.dims.clone(), body);
        let mut first = dest.clone();
        first.dims[0] = ap.split.clone();
        self.write_part(&ap.first, &first, body)?;
        let mut second = dest.clone();
        second.offset = Expr::add(dest.offset.clone(), ap.split.clone());
        second.dims[0] = Expr::op("-", vec![d.dims[0].clone(), ap.split.clone()]);
        self.write_part(&ap.second, &second, body)?;
        Ok(Val::Array(dest))
    }

    /// A part of a delayed append written into `dest` (its run of the
    /// append's buffer): a delayed map item by item, straight there.
    fn write_part(&mut self, part: &Val<'m>, dest: &View, body: &mut Vec<Stmt>) -> Res<()> {
        if !matches!(part, Val::Delayed(_)) {
            return self.copy(part.clone(), dest, body);
        }
        let i = self.fresh("i");
        let mut inner = Vec::new();
        self.loop_depth += 1;
        self.ordered_loops += 1;
        let x = self.element(part, &[Expr::Var(i)], &mut inner);
        self.loop_depth -= 1;
        self.ordered_loops -= 1;
        inner.push(Stmt::Store {
            buf: dest.buf,
            index: dest.cell(&[Expr::Var(i)]).offset,
            value: x?,
        });
        let outer = self.loop_depth;
        body.extend(nest(&[i], dest.dims.clone(), inner, outer));
        Ok(())
    }
}

/// The items' variable of the `filter` in `later` or `body` whose flags
/// are the variable `var`.
fn flags_of(var: VarId, later: &[maps::Bind], body: &maps::Expr) -> Option<VarId> {
    let mut items = None;
    let mut look = |e: &maps::Expr| {
        e.each(&mut |x| {
            if let Kind::App { func, args } = &x.kind
                && prim_of(func) == Some("filter")
                && let [f, xs] = args.as_slice()
                && matches!(f.kind, Kind::Var(v) if v == var)
                && let Kind::Var(xs) = xs.kind
            {
                items = Some(xs);
            }
        });
    };
    for b in later {
        look(&b.value);
    }
    look(body);
    items
}

/// Whether a map over a frame in `later` or `body` reads `var` and is
/// the items of an `iscan`, or the value of a later binding that is read
/// only as an `iscan`'s items.
fn scanned_through_a_map(var: VarId, later: &[maps::Bind], body: &maps::Expr) -> bool {
    let reads = |e: &maps::Expr| {
        matches!(&e.kind, Kind::Map { frame, binds, .. } if !frame.is_scalar()
            && binds.iter().any(|b| matches!(b.value.kind, Kind::Var(v) if v == var)))
    };
    let mut found = false;
    let mut look = |e: &maps::Expr| {
        e.each(&mut |x| {
            found |= matches!(&x.kind, Kind::App { func, args } if prim_of(func) == Some("iscan")
                && matches!(args.as_slice(), [_, xs] if reads(xs)));
        });
    };
    for b in later {
        look(&b.value);
    }
    look(body);
    found
        || later
            .iter()
            .enumerate()
            .any(|(i, b)| reads(&b.value) && iteration::scanned_once(b.var, &later[i + 1..], body))
}

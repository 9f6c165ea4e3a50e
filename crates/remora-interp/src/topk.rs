//! The first or last `k` items of a sort: `((i-app take K) (sort xs))`, the
//! same by `take-right`, and of `f.sort`, `grade` and `f.grade` (the `k`
//! least or greatest, the indices of the `k` least …), each row's sorted
//! items read by the `take` (its cell the sort's). Each row's `k` ends are
//! selected as the row is read (`sort::rows_ordered`: the keys made unique
//! by their positions, so these are exactly the first or last `k` of the
//! stable order), and the row is never sorted whole. Any other case runs
//! the sort and the take as written, on the argument already evaluated.

use crate::batch::{Batched, Try};
use crate::eval::{Env, Fun, Interpreter};
use crate::sort::{Ends, float_key, int_key, rows_ordered};
use crate::tally::intrinsic_name;
use remora_check::typed::TExpr;
use remora_types::Lifted;
use remora_value::{Array, Atom, Data};

impl<'p> Interpreter {
    /// `e` evaluated in the batch frame when it is a `take` or
    /// `take-right` of a sort (`None` when it is not: nothing is
    /// evaluated).
    pub(crate) fn sorted_ends(&mut self, e: &'p TExpr, env: &Env<'p>) -> Option<Try<Batched<'p>>> {
        let (take, spine) = e.spine();
        if !matches!(intrinsic_name(take)?, "take" | "take-right") {
            return None;
        }
        let [(sorted, taken)] = spine.as_slice() else {
            return None;
        };
        let (sort, sort_spine) = sorted.spine();
        if !matches!(intrinsic_name(sort)?, "sort" | "grade" | "f.sort" | "f.grade") {
            return None;
        }
        let [(xs, by)] = sort_spine.as_slice() else {
            return None;
        };
        Some(self.sorted_ends_of(e, (take, taken), (sorted, sort, by), xs, env))
    }

    fn sorted_ends_of(
        &mut self,
        e: &'p TExpr,
        (take, taken): (&'p TExpr, &Lifted),
        (sorted, sort, by): (&'p TExpr, &'p TExpr, &Lifted),
        xs: &'p TExpr,
        env: &Env<'p>,
    ) -> Try<Batched<'p>> {
        let take = self.eval_batched(take, env)?;
        let sort = self.eval_batched(sort, env)?;
        let a = self.eval_batched(xs, env)?;
        let sort_cell = self.shape_of(&by.arg_cell, env, xs.span).ok()?;
        let take_cell = self.shape_of(&taken.arg_cell, env, sorted.span).ok()?;
        if let Some(r) = ends_of_rows(&take, &sort, &a, &sort_cell, &take_cell) {
            return Some(r);
        }
        // As written: the sort, then the take.
        self.at = sorted.span;
        let s = self.apply_batched(&sort, vec![(a, sort_cell)])?;
        self.at = e.span;
        self.apply_batched(&take, vec![(s, take_cell)])
    }
}

/// The primitive a function value is (not yet given any argument).
fn prim_of<'a, 'p>(f: &'a Batched<'p>) -> Option<&'a crate::eval::Prim<'p>> {
    if f.nb != 0 || !f.v.shape.is_empty() {
        return None;
    }
    match &f.v.data {
        Data::Atoms(atoms) => match atoms.get(f.offset)? {
            Atom::Fun(Fun::Prim(p)) if p.args.is_empty() => Some(p),
            _ => None,
        },
        _ => None,
    }
}

/// The rule, when it applies: every row of `a` (cells of one axis, which
/// the take's cells are too) by the selection of its ends.
fn ends_of_rows<'p>(
    take: &Batched<'p>,
    sort: &Batched<'p>,
    a: &Batched<'p>,
    sort_cell: &[usize],
    take_cell: &[usize],
) -> Try<Batched<'p>> {
    let (take, sort) = (prim_of(take)?, prim_of(sort)?);
    let &[d] = sort_cell else {
        return None;
    };
    if take_cell != sort_cell || u32::try_from(d).is_err() {
        return None;
    }
    let k = usize::try_from(*take.indices.first()?.dims().first()?).ok()?;
    if k > d {
        // Out of range: the reference path reports it.
        return None;
    }
    let ends = if take.name == "take" {
        Ends::First(k)
    } else {
        Ends::Last(k)
    };
    let a = a.densify()?;
    if a.v.shape.last() != Some(&d) {
        return None;
    }
    let mut shape = a.v.shape.clone();
    *shape.last_mut()? = k;
    let data = match (sort.name, &a.v.data) {
        ("sort", Data::Int(v)) => {
            Data::Int(rows_ordered(v, d, &int_key, true, ends, |r, i| r[i]).ok()?.into())
        }
        ("grade", Data::Int(v)) => Data::Int(
            rows_ordered(v, d, &int_key, true, ends, |_, i| i as i64)
                .ok()?
                .into(),
        ),
        ("f.sort", Data::Float(v)) => Data::Float(
            rows_ordered(v, d, &float_key, false, ends, |r, i| r[i])
                .ok()?
                .into(),
        ),
        ("f.grade", Data::Float(v)) => Data::Int(
            rows_ordered(v, d, &float_key, false, ends, |_, i| i as i64)
                .ok()?
                .into(),
        ),
        _ => return None,
    };
    Some(Batched::dense(Array { shape, data }, a.nb))
}

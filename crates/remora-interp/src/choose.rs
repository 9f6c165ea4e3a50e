//! `select` read in place: each operand that lies contiguously in its
//! buffer (from an offset: a `curtail`, a `tail`, a row) or is one atom
//! replicated over the result (a scalar choice, `(select keep xs -1)`) is
//! read where it is, instead of being laid out over the whole result
//! first. Only the result is written.

use crate::batch::Batched;
use crate::eval::{Fun, atoms_in};
use crate::kernel::row_major;
use remora_value::Data;

/// An operand's atoms over the result: from `at` on, one per position, or
/// the atom at `at` everywhere.
#[derive(Clone, Copy)]
struct Reading {
    at: usize,
    replicated: bool,
}

impl Reading {
    fn of(b: &Batched<'_>, cell: usize, nb: usize, outer: usize, shape: &[usize]) -> Option<Reading> {
        let steps = b.steps_over(cell, nb, outer, shape)?;
        let n = atoms_in(shape);
        if steps.iter().all(|&s| s == 0) {
            return (b.offset < b.v.data.len()).then_some(Reading {
                at: b.offset,
                replicated: true,
            });
        }
        let dense = row_major(shape);
        let contiguous = shape
            .iter()
            .zip(steps.iter().zip(&dense))
            .all(|(&d, (s, r))| d <= 1 || s == r);
        (contiguous && b.offset.checked_add(n)? <= b.v.data.len()).then_some(Reading {
            at: b.offset,
            replicated: false,
        })
    }

    /// The operand's atoms for `n` positions: a run of its buffer, or its
    /// one atom.
    fn atoms<T: Clone>(self, v: &[T], n: usize) -> Option<Atoms<'_, T>> {
        Some(if self.replicated {
            Atoms::One(v.get(self.at)?.clone())
        } else {
            Atoms::Run(v.get(self.at..self.at.checked_add(n)?)?)
        })
    }
}

/// An operand's atoms over the result (see [`Reading::atoms`]).
enum Atoms<'v, T> {
    Run(&'v [T]),
    One(T),
}

/// `(select c a b)` over `shape` (`[batch nb, frame up to outer, cell]`),
/// when every operand can be read in place and holds plain atoms.
pub(crate) fn select_in_place<'p>(
    all: &[(Batched<'p>, Vec<usize>)],
    nb: usize,
    outer: usize,
    shape: &[usize],
) -> Option<Data<Fun<'p>>> {
    let [(c, ccell), (a, acell), (b, bcell)] = all else {
        return None;
    };
    let rc = Reading::of(c, ccell.len(), nb, outer, shape)?;
    let ra = Reading::of(a, acell.len(), nb, outer, shape)?;
    let rb = Reading::of(b, bcell.len(), nb, outer, shape)?;
    let Data::Bool(cv) = &c.v.data else {
        return None;
    };
    let n = atoms_in(shape);
    // Each arm one loop over runs (a choice the compiler vectorises).
    fn choose<T: Copy>(
        cv: &[bool],
        rc: Reading,
        a: (&[T], Reading),
        b: (&[T], Reading),
        n: usize,
    ) -> Option<Vec<T>> {
        let mut out = crate::kernel::buffer(n).ok()?;
        let pick = |c: bool, x: T, y: T| if c { x } else { y };
        match (rc.atoms(cv, n)?, a.1.atoms(a.0, n)?, b.1.atoms(b.0, n)?) {
            (Atoms::Run(c), Atoms::Run(x), Atoms::Run(y)) => {
                out.extend(c.iter().zip(x).zip(y).map(|((&c, &x), &y)| pick(c, x, y)))
            }
            (Atoms::Run(c), Atoms::Run(x), Atoms::One(y)) => {
                out.extend(c.iter().zip(x).map(|(&c, &x)| pick(c, x, y)))
            }
            (Atoms::Run(c), Atoms::One(x), Atoms::Run(y)) => {
                out.extend(c.iter().zip(y).map(|(&c, &y)| pick(c, x, y)))
            }
            (Atoms::Run(c), Atoms::One(x), Atoms::One(y)) => out.extend(c.iter().map(|&c| pick(c, x, y))),
            (Atoms::One(c), x, y) => {
                // One choice for every position: the chosen operand.
                match if c { x } else { y } {
                    Atoms::Run(v) => out.extend_from_slice(v),
                    Atoms::One(v) => out.resize(n, v),
                }
            }
        }
        Some(out)
    }
    Some(match (&a.v.data, &b.v.data) {
        (Data::Int(x), Data::Int(y)) => Data::Int(choose(cv, rc, (x, ra), (y, rb), n)?.into()),
        (Data::Float(x), Data::Float(y)) => Data::Float(choose(cv, rc, (x, ra), (y, rb), n)?.into()),
        (Data::Bool(x), Data::Bool(y)) => Data::Bool(choose(cv, rc, (x, ra), (y, rb), n)?.into()),
        _ => return None,
    })
}

/// `(scatter dest idx src)` outside any batch and frame: the destination
/// laid out once as the result (a replicated one, `((i-app replicate
/// [n]) 0.0)`, is never made and then copied) and the source's items
/// written over it at their indices, in order (the last write wins;
/// indices outside the destination are skipped, as the reference path
/// skips them).
pub(crate) fn scatter_whole<'p>(all: &[(Batched<'p>, Vec<usize>)]) -> Option<Batched<'p>> {
    let [(dest, dcell), (idx, icell), (src, scell)] = all else {
        return None;
    };
    if dest.nb != 0
        || idx.nb != 0
        || src.nb != 0
        || dest.own() != dcell
        || idx.own() != icell
        || src.own() != scell
    {
        return None;
    }
    let m = *dcell.first()?;
    let item = atoms_in(dcell.get(1..)?);
    let n = *icell.first()?;
    let idx = idx.densify()?;
    let src = src.densify()?;
    let Data::Int(iv) = &idx.v.data else {
        return None;
    };
    let rows = iv
        .get(..n)?
        .iter()
        .enumerate()
        .filter_map(|(i, &j)| usize::try_from(j).ok().filter(|j| *j < m).map(|j| (i, j)));
    let mut data = dest.laid_over(dcell.len(), 0, 0, dcell)?.data;
    crate::masked::put_rows(&mut data, &src.v.data, rows, item)?;
    Some(Batched::dense(
        remora_value::Array {
            shape: dcell.clone(),
            data,
        },
        0,
    ))
}

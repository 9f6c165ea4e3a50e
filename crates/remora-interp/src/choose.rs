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

    fn get<T: Clone>(self, v: &[T], i: usize) -> Option<T> {
        v.get(if self.replicated { self.at } else { self.at + i })
            .cloned()
    }
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
    fn choose<T: Clone>(
        cv: &[bool],
        rc: Reading,
        a: (&[T], Reading),
        b: (&[T], Reading),
        n: usize,
    ) -> Option<Vec<T>> {
        let mut out = crate::kernel::buffer(n).ok()?;
        for i in 0..n {
            out.push(if rc.get(cv, i)? {
                a.1.get(a.0, i)?
            } else {
                b.1.get(b.0, i)?
            });
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

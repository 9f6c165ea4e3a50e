//! Work done once per distinct cell: an intrinsic applied inside a batch
//! to arguments that are all replicated along some batch axis (a zero
//! step, or an axis they lack) has a result replicated along it too, so
//! it runs over the batch with that axis cut to one position and its
//! result is replicated back by a zero step — never a copy.
//!
//! This is how a term of a lifted body that reads only some of the
//! frame's axes costs only what those axes hold: inside `(outer (fn (a b)
//! …) x y)`, `(f.dot a a)` depends on the rows of `x` alone and is
//! computed once per row (`m` dots, not `m·n`), as a user would hoist it
//! by hand. (Replication along the batch's last axes is already free: a
//! value lacking them is the same along them, and every rule runs over
//! the axes its arguments have.)

use crate::batch::{Batched, Try};
use crate::eval::{Fun, Interpreter, Prim};
use remora_value::{Atom, Data};

impl<'p> Interpreter {
    /// `p` applied to `args` over the batch less the axes every argument
    /// is replicated along (of those some argument has: the batch's last
    /// axes that no argument has are free already), when there are any;
    /// `None` when there are none (the caller applies `p` as usual).
    pub(crate) fn hoisted(
        &mut self,
        p: &Prim<'p>,
        args: &[(Batched<'p>, Vec<usize>)],
    ) -> Option<Try<Batched<'p>>> {
        let nb = args.iter().map(|(a, _)| a.nb).max()?;
        // A closure made inside the batch holds one value per position
        // however its array is replicated.
        let plain = p.args.iter().all(|a| free_of_batch(&a.data))
            && args.iter().all(|(a, _)| free_of_batch(&a.v.data));
        if !plain {
            return None;
        }
        let axes: Vec<usize> = (0..nb)
            .filter(|&i| {
                self.batch.get(i).is_some_and(|&n| n > 1)
                    && args
                        .iter()
                        .all(|(a, _)| i >= a.nb || a.strides.get(i) == Some(&0))
            })
            .collect();
        if axes.is_empty() {
            return None;
        }
        // Each argument a view with those axes one position long.
        let squeezed: Vec<(Batched<'p>, Vec<usize>)> = args
            .iter()
            .map(|(a, cell)| {
                let mut a = a.clone();
                for &i in axes.iter().filter(|&&i| i < a.nb) {
                    a.v.shape[i] = 1;
                }
                (a, cell.clone())
            })
            .collect();
        let batch = self.batch.clone();
        for &i in &axes {
            self.batch[i] = 1;
        }
        let r = self.prim_batched(p, squeezed);
        self.batch = batch;
        Some(r.map(|mut r| {
            for &i in axes.iter().filter(|&&i| i < r.nb) {
                r.v.shape[i] = self.batch[i];
                r.strides[i] = 0;
            }
            r
        }))
    }
}

/// Whether `d` holds nothing that can differ from one batch position to
/// another unseen by its steps: no closure reading the batch's variables
/// (nor boxes, whose contents are not looked into).
fn free_of_batch(d: &Data<Fun<'_>>) -> bool {
    match d {
        Data::Atoms(atoms) => atoms
            .iter()
            .all(|a| matches!(a, Atom::Fun(f) if !f.reads_batch())),
        Data::Records(r) => r.fields.iter().all(|f| free_of_batch(&f.data)),
        _ => true,
    }
}

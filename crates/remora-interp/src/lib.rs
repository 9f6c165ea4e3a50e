//! The reference interpreter (core.md §3, issue 4): evaluates the checker's
//! typed tree. Every application runs from the checker's decision of its
//! argument's cell shape and the runtime shapes; full applications of
//! scalar primitives run as one broadcast loop over whole buffers.
//!
//! Every form and all 76 intrinsics evaluate; a lambda lifted over a frame
//! runs its body once over all the cells where it can (`batch`), and cell
//! by cell (the reference) where it cannot.

mod affine;
mod argbest;
pub mod batch;
pub mod cell_log;
mod cellprog;
mod choose;
mod chosen;
mod contract;
pub mod eval;
pub mod fmath;
mod gather;
mod hoist;
pub mod intrinsics;
pub mod kernel;
mod mapped;
mod masked;
mod matmul;
mod moves;
mod partition;
mod positions;
mod powers;
pub mod program;
mod projected;
pub mod random;
pub mod scalar;
pub mod search;
mod semiring;
pub mod sort;
mod sort_by;
mod stencil;
mod streamed;
mod strided;
mod tally;
mod topk;
mod vocab;

pub use eval::{Env, Fun, Interpreter, RunError, Value};

/// How many threads whatever runs in parallel may use (the sort today):
/// `REMORA_THREADS` when set to a positive number, else the cores
/// available (at most 8). No result depends on it: reductions combine
/// their items in an order fixed by the number of items alone.
pub fn threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| {
        std::env::var("REMORA_THREADS")
            .ok()
            .and_then(|t| t.trim().parse::<usize>().ok())
            .filter(|t| *t > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |w| w.get()).min(8))
    })
}

/// Runs `part` on each of `parts`, on up to `threads` threads taking the
/// next part from one queue: the calling thread works too, so a thread the
/// system refuses only means fewer workers. False when a part failed (or
/// a worker could not finish).
pub(crate) fn in_parallel<P: Send>(parts: Vec<P>, threads: usize, part: impl Fn(P) -> bool + Sync) -> bool {
    let queue = std::sync::Mutex::new(parts);
    let work = || -> bool {
        loop {
            let next = match queue.lock() {
                Ok(mut q) => q.pop(),
                Err(_) => return false,
            };
            match next {
                Some(p) => {
                    if !part(p) {
                        return false;
                    }
                }
                None => return true,
            }
        }
    };
    std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..threads)
            .filter_map(|_| std::thread::Builder::new().spawn_scoped(scope, work).ok())
            .collect();
        let mine = work();
        helpers.into_iter().all(|h| h.join().unwrap_or(false)) && mine
    })
}

/// `rows(first, out)` over `out` cut into runs of whole rows (`row` results
/// each; `first` the run's first row), the runs shared among the threads
/// when the work, `items` in all, is at least `min_items`. False when a run
/// failed.
pub(crate) fn rows_in_parallel<O: Send>(
    out: &mut [O],
    row: usize,
    items: usize,
    min_items: usize,
    rows: impl Fn(usize, &mut [O]) -> bool + Sync,
) -> bool {
    let count = out.len().checked_div(row).unwrap_or(0);
    let threads = threads();
    if threads < 2 || count < 2 || items < min_items {
        return rows(0, out);
    }
    let per = count.div_ceil(threads * 4);
    let parts: Vec<(usize, &mut [O])> = out
        .chunks_mut(per * row)
        .enumerate()
        .map(|(k, o)| (k * per, o))
        .collect();
    in_parallel(parts, threads, |(first, o)| rows(first, o))
}

/// A value with no functions in it, as plain data (for comparing with
/// expected values); `None` if it holds a function.
pub fn to_data(v: &Value<'_>) -> Option<remora_value::Array> {
    use remora_value::{Array, Atom, Boxed, Data};
    let data = match &v.data {
        Data::Int(x) => Data::Int(x.clone()),
        Data::Float(x) => Data::Float(x.clone()),
        Data::Bool(x) => Data::Bool(x.clone()),
        Data::Atoms(atoms) => Data::Atoms(
            atoms
                .iter()
                .map(|a| match a {
                    Atom::Fun(_) => None,
                    Atom::Box(b) => Some(Atom::Box(Boxed {
                        witnesses: b.witnesses.clone(),
                        payload: to_data(&b.payload)?,
                    })),
                    Atom::Record(fields) => Some(Atom::Record(
                        fields
                            .iter()
                            .map(|(n, f)| Some((n.clone(), to_data(f)?)))
                            .collect::<Option<Vec<_>>>()?,
                    )),
                })
                .collect::<Option<Vec<_>>>()?
                .into(),
        ),
        Data::Records(_) => {
            return to_data(&Value {
                shape: v.shape.clone(),
                data: v.data.record_atoms(),
            });
        }
    };
    Some(Array {
        shape: v.shape.clone(),
        data,
    })
}

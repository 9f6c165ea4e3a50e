//! Evaluation of the typed tree (core.md §3): strict, left to right.
//!
//! An application is run from its runtime shapes and the checker's
//! decision of the argument's cell shape: the argument's frame is its shape
//! less the cell, the principal frame the longer of that and the function
//! array's shape, and the function and argument cells are taken at each
//! position of the principal frame, the shorter frame's cells reused (by
//! index, not copied). Scalar primitives applied in full — `(+ a b)` — run
//! as one broadcast loop over whole buffers (see `scalar`).

use crate::intrinsics;
use crate::scalar;
use remora_check::typed::{TAtomKind, TDecl, TExpr, TExprKind, VarId};
use remora_syntax::Span;
use remora_types::{Atom as TyAtom, DVar, IVar, Index, SVar, Type};
use remora_value::{Array, Atom, Boxed, Callable, Data, Witness};
use std::rc::Rc;

/// A run-time array; its function atoms are [`Fun`]s.
pub type Value<'p> = Array<Fun<'p>>;

/// A function atom.
#[derive(Clone, Debug)]
pub enum Fun<'p> {
    Lambda {
        param: VarId,
        body: &'p TExpr,
        env: Env<'p>,
    },
    TLambda {
        param: remora_types::TVar,
        body: &'p TExpr,
        env: Env<'p>,
    },
    ILambda {
        param: IVar,
        body: &'p TExpr,
        env: Env<'p>,
    },
    /// An intrinsic, with what it has been given so far.
    Prim(Rc<Prim<'p>>),
}

/// An intrinsic applied to some of its type, index and value arguments.
#[derive(Clone, Debug)]
pub struct Prim<'p> {
    pub name: &'static str,
    pub sig: intrinsics::Signature,
    pub types: Vec<TyAtom>,
    pub indices: Vec<IndexVal>,
    pub args: Vec<Value<'p>>,
}

impl Prim<'_> {
    /// Whether `more` arguments complete the application: its type and
    /// index arguments all given, and its values with those.
    pub(crate) fn completed_by(&self, more: usize) -> bool {
        self.types.len() >= self.sig.types
            && self.indices.len() >= self.sig.indices
            && self.args.len() + more == self.sig.values
    }
}

impl<'p> Fun<'p> {
    /// Whether this is a closure made inside a batch that reads one of
    /// the batch's variables (it holds one value per batch position, so it
    /// may only run batched, over that batch).
    pub(crate) fn reads_batch(&self) -> bool {
        match self {
            Fun::Lambda { body, env, .. }
            | Fun::TLambda { body, env, .. }
            | Fun::ILambda { body, env, .. } => env.has_batched() && mentions_batched(body, env),
            Fun::Prim(p) => p.args.iter().any(|a| match &a.data {
                Data::Atoms(atoms) => atoms.iter().any(|x| matches!(x, Atom::Fun(f) if f.reads_batch())),
                _ => false,
            }),
        }
    }
}

/// Whether `e` reads a variable that `env` binds to a batched value.
fn mentions_batched(e: &TExpr, env: &Env<'_>) -> bool {
    e.any(&mut |x| matches!(x.kind, TExprKind::Var(v) if env.is_batched(v)))
}

impl Callable for Fun<'_> {
    fn printed(&self) -> &'static str {
        match self {
            Fun::Lambda { .. } => "#<fun>",
            Fun::TLambda { .. } => "#<tfun>",
            Fun::ILambda { .. } => "#<ifun>",
            Fun::Prim(p) if p.types.len() < p.sig.types => "#<tfun>",
            Fun::Prim(p) if p.indices.len() < p.sig.indices => "#<ifun>",
            Fun::Prim(_) => "#<fun>",
        }
    }
}

/// A concrete index: a dimension or a shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexVal {
    Dim(i64),
    Shape(Vec<i64>),
}

impl IndexVal {
    pub fn dims(&self) -> Vec<i64> {
        match self {
            IndexVal::Dim(d) => vec![*d],
            IndexVal::Shape(s) => s.clone(),
        }
    }
}

/// Variables in scope: a persistent list, shared by closures.
#[derive(Clone, Debug, Default)]
pub struct Env<'p>(Option<Rc<EnvNode<'p>>>);

#[derive(Debug)]
pub struct EnvNode<'p> {
    binding: Binding<'p>,
    next: Env<'p>,
}

#[derive(Debug)]
pub(crate) enum Binding<'p> {
    Val(VarId, Value<'p>),
    /// A variable whose value is moved out at its last reads (the
    /// addresses of those `Var` nodes), so that an update there finds its
    /// buffer unshared (`moves.rs`); empty once moved, never read again.
    Owned(VarId, crate::moves::Owned),
    /// A variable of a batched evaluation: its value has `nb` batch axes
    /// first (see `batch`); ordinary evaluation does not see it.
    Batched(VarId, crate::batch::Batched<'p>),
    /// A grade not made until read (`partition.rs`: a grade used only to
    /// gather need not be made at all).
    Graded(VarId, Rc<crate::partition::Graded<'p>>),
    /// Powers not made until read (`contract.rs`: powers only summed in a
    /// product are made a block at a time).
    Powers(VarId, Rc<crate::contract::Powers<'p>>),
    /// A `let`'s value that is a view (windows, a transposition, a
    /// replication: strided over another array's atoms, `nb` 0), kept so,
    /// for a lifted function or primitive to read in place; laid out only
    /// for what needs it so.
    View(VarId, crate::batch::Batched<'p>),
    /// The counting vector of a `range` not made until read as a value
    /// (`affine.rs`: a scatter at an affine function of it reads it as a
    /// progression).
    Counting(VarId, Rc<crate::affine::Counting>),
    Dim(DVar, i64),
    Shape(SVar, Vec<i64>),
    /// A type function's parameter, bound to the atom type it was applied
    /// to: an empty array made inside its body is of that kind.
    Type(remora_types::TVar, TyAtom),
}

impl Binding<'_> {
    /// The value variable it binds (`None` for a dimension, shape or type).
    fn value_var(&self) -> Option<VarId> {
        match self {
            Binding::Val(w, _)
            | Binding::Owned(w, _)
            | Binding::Batched(w, _)
            | Binding::Graded(w, _)
            | Binding::Powers(w, _)
            | Binding::View(w, _)
            | Binding::Counting(w, _) => Some(*w),
            Binding::Dim(..) | Binding::Shape(..) | Binding::Type(..) => None,
        }
    }
}

impl<'p> Env<'p> {
    /// This scope with `var` bound to `value` (a definition kept by the
    /// REPL, for one).
    pub fn bind(&self, var: VarId, value: Value<'p>) -> Env<'p> {
        self.with(Binding::Val(var, value))
    }

    pub(crate) fn with(&self, binding: Binding<'p>) -> Env<'p> {
        Env(Some(Rc::new(EnvNode {
            binding,
            next: self.clone(),
        })))
    }

    fn nodes(&self) -> impl Iterator<Item = &EnvNode<'p>> {
        std::iter::successors(self.0.as_deref(), |n| n.next.0.as_deref())
    }

    fn value(&self, v: VarId) -> Option<Value<'p>> {
        self.nodes().find_map(|n| match &n.binding {
            Binding::Val(w, val) if *w == v => Some(val.clone()),
            Binding::Owned(w, o) if *w == v => o.get(),
            Binding::Graded(w, g) if *w == v => g.order(),
            Binding::Powers(w, p) if *w == v => p.value(),
            Binding::View(w, b) if *w == v => b.densify().map(|b| b.v),
            Binding::Counting(w, c) if *w == v => c.value(),
            _ => None,
        })
    }

    /// `v`'s value read at the `Var` node at address `at` in chain `chain`:
    /// moved out of its binding when that is one of its last reads in the
    /// chain that bound it (`moves.rs`), copied otherwise.
    fn read(&self, v: VarId, at: usize, chain: u64) -> Option<Value<'p>> {
        if chain != 0
            && let Some(Binding::Owned(_, o)) = self.binding_of(v)
            && o.moves_at(at, chain)
        {
            return o.take();
        }
        self.value(v)
    }

    /// Whether `v` is bound here (as a value).
    pub(crate) fn binds(&self, v: VarId) -> bool {
        self.binding_of(v).is_some()
    }

    /// The innermost binding of the value variable `v`.
    fn binding_of(&self, v: VarId) -> Option<&Binding<'p>> {
        self.nodes()
            .map(|n| &n.binding)
            .find(|b| b.value_var() == Some(v))
    }

    /// The view that `v` is bound to, if it is one.
    pub(crate) fn view(&self, v: VarId) -> Option<&crate::batch::Batched<'p>> {
        match self.binding_of(v)? {
            Binding::View(_, b) => Some(b),
            _ => None,
        }
    }

    /// The grade not made yet that `v` is bound to, if it is one.
    pub(crate) fn graded(&self, v: VarId) -> Option<&crate::partition::Graded<'p>> {
        match self.binding_of(v)? {
            Binding::Graded(_, b) => Some(&**b),
            _ => None,
        }
    }

    /// The powers not made yet that `v` is bound to, if it is bound so.
    pub(crate) fn powers(&self, v: VarId) -> Option<&crate::contract::Powers<'p>> {
        match self.binding_of(v)? {
            Binding::Powers(_, b) => Some(&**b),
            _ => None,
        }
    }

    /// The counting vector not made yet that `v` is bound to, if it is one.
    pub(crate) fn counting(&self, v: VarId) -> Option<&crate::affine::Counting> {
        match self.binding_of(v)? {
            Binding::Counting(_, b) => Some(&**b),
            _ => None,
        }
    }

    /// The same scope with every batched variable's value replaced by
    /// `f`'s (the variables of a batch restricted to some of its
    /// positions); `None` when `f` gives up, or when a plain variable holds
    /// a closure made inside the batch (its captured values could not be
    /// restricted with it).
    pub(crate) fn map_batched(
        &self,
        f: &mut dyn FnMut(&crate::batch::Batched<'p>) -> Option<crate::batch::Batched<'p>>,
    ) -> Option<Env<'p>> {
        let nodes: Vec<&EnvNode<'p>> = self.nodes().collect();
        let closure_inside = |v: &Value<'p>| match &v.data {
            Data::Atoms(atoms) => atoms.iter().any(|a| matches!(a, Atom::Fun(f) if f.reads_batch())),
            _ => false,
        };
        // Below the deepest batched variable nothing changes.
        let Some(deepest) = nodes
            .iter()
            .rposition(|n| matches!(n.binding, Binding::Batched(..)))
        else {
            return Some(self.clone());
        };
        let mut env = nodes.get(deepest)?.next.clone();
        for n in nodes.get(..=deepest)?.iter().rev() {
            let binding = match &n.binding {
                Binding::Batched(v, b) => Binding::Batched(*v, f(b)?),
                Binding::Val(_, val) if closure_inside(val) => return None,
                Binding::Val(v, val) => Binding::Val(*v, val.clone()),
                Binding::Owned(v, o) => Binding::Owned(*v, o.share()),
                Binding::Graded(v, g) => Binding::Graded(*v, g.clone()),
                Binding::Powers(v, p) => Binding::Powers(*v, p.clone()),
                Binding::View(v, b) => Binding::View(*v, b.clone()),
                Binding::Counting(v, c) => Binding::Counting(*v, c.clone()),
                Binding::Dim(v, d) => Binding::Dim(*v, *d),
                Binding::Shape(v, s) => Binding::Shape(*v, s.clone()),
                Binding::Type(v, a) => Binding::Type(*v, a.clone()),
            };
            env = env.with(binding);
        }
        Some(env)
    }

    /// Whether `v` is bound to a batched value.
    fn is_batched(&self, v: VarId) -> bool {
        matches!(self.binding_of(v), Some(Binding::Batched(..)))
    }

    /// Whether a batched variable is in scope (a closure made inside a
    /// batch: it holds one value per batch position).
    pub(crate) fn has_batched(&self) -> bool {
        self.nodes().any(|n| matches!(n.binding, Binding::Batched(..)))
    }

    /// A variable's value in a batched evaluation.
    pub(crate) fn lookup_batched(&self, v: VarId) -> Option<crate::batch::Batched<'p>> {
        self.nodes().find_map(|n| match &n.binding {
            Binding::Val(w, val) if *w == v => Some(crate::batch::Batched::plain(val.clone())),
            Binding::Owned(w, o) if *w == v => o.get().map(crate::batch::Batched::plain),
            Binding::Graded(w, g) if *w == v => g.order().map(crate::batch::Batched::plain),
            Binding::Powers(w, p) if *w == v => p.value().map(crate::batch::Batched::plain),
            Binding::View(w, b) if *w == v => Some(b.clone()),
            Binding::Counting(w, c) if *w == v => c.value().map(crate::batch::Batched::plain),
            Binding::Batched(w, b) if *w == v => Some(b.clone()),
            _ => None,
        })
    }

    fn dim(&self, v: DVar) -> Option<i64> {
        self.nodes().find_map(|n| match &n.binding {
            Binding::Dim(w, d) if *w == v => Some(*d),
            _ => None,
        })
    }

    fn shape(&self, v: SVar) -> Option<Vec<i64>> {
        self.nodes().find_map(|n| match &n.binding {
            Binding::Shape(w, s) if *w == v => Some(s.clone()),
            _ => None,
        })
    }

    /// `atom` with a type variable bound by an enclosing type application
    /// replaced by the type it stands for (a variable bound nowhere, as in a
    /// generic function not yet applied, stays).
    pub(crate) fn atom_type(&self, atom: &TyAtom) -> TyAtom {
        match atom {
            TyAtom::Var(v) => self
                .nodes()
                .find_map(|n| match &n.binding {
                    Binding::Type(w, a) if w == v => Some(a.clone()),
                    _ => None,
                })
                .unwrap_or_else(|| atom.clone()),
            _ => atom.clone(),
        }
    }

    pub(crate) fn bind_index(&self, v: IVar, i: &IndexVal) -> Env<'p> {
        match (v, i) {
            (IVar::Dim(d), IndexVal::Dim(n)) => self.with(Binding::Dim(d, *n)),
            (IVar::Dim(d), IndexVal::Shape(s)) => self.with(Binding::Dim(d, s.first().copied().unwrap_or(0))),
            (IVar::Shape(s), IndexVal::Shape(v)) => self.with(Binding::Shape(s, v.clone())),
            (IVar::Shape(s), IndexVal::Dim(n)) => self.with(Binding::Shape(s, vec![*n])),
        }
    }
}

/// The most atoms one array may ever hold (2^28: 2 GiB of Int). A program
/// that asks for more — or for more than the memory available allows (see
/// `remora_value::limits`) — is refused with a message instead of
/// exhausting memory.
pub use remora_value::limits::MAX_ATOMS;

thread_local! {
    /// The array size limit in force on this thread (see
    /// [`Interpreter::limit_atoms`]); 0 until first asked: then the limit
    /// the memory available allows.
    static ATOM_LIMIT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The array size limit in force on this thread.
pub(crate) fn atom_limit() -> usize {
    ATOM_LIMIT.with(|l| {
        if l.get() == 0 {
            l.set(remora_value::limits::atom_limit());
        }
        l.get()
    })
}

/// The number of atoms a shape calls for; `usize::MAX` when that overflows
/// (which `check_size` then refuses).
pub(crate) fn atoms_in(shape: &[usize]) -> usize {
    shape
        .iter()
        .try_fold(1usize, |a, d| a.checked_mul(*d))
        .unwrap_or(usize::MAX)
}

thread_local! {
    /// Whether an array was refused as too large since this was last
    /// cleared (a batched evaluation that gives up for that is retried on
    /// smaller strips of its frame: see `batch`).
    static REFUSED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

thread_local! {
    /// Whether an allocation failed (the memory was not there) since this
    /// was last cleared: the batched evaluation that met it gives up, and
    /// the reference path must then report it rather than try again cell
    /// by cell (which needs more memory, not less).
    static STARVED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

thread_local! {
    /// An error a batched rule found at the top level (no batch around
    /// it), where the reference path would find the same one first (the
    /// first index out of range of a gather, in order): the caller reports
    /// it instead of running the reference path cell by cell to find it.
    static FAULT: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

thread_local! {
    /// Set when a batched rule inside a batch met what fails some cell (a
    /// gather index out of range): the batch gives up at once rather than
    /// running that primitive cell by cell to meet the error again. Only
    /// ever makes a batch give up sooner, so it is safe to leave set.
    static DOOMED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Records that the batch running now fails (see `DOOMED`).
pub(crate) fn note_doomed() {
    DOOMED.with(|d| d.set(true));
}

/// Whether the batch running now fails (see `DOOMED`), leaving it noted.
pub(crate) fn doomed() -> bool {
    DOOMED.with(|d| d.get())
}

/// Whether the batch running now fails (see `DOOMED`); clears it.
pub(crate) fn take_doomed() -> bool {
    DOOMED.with(|d| d.replace(false))
}

/// Records an error a batched rule found (see `FAULT`).
pub(crate) fn note_fault(message: String) {
    FAULT.with(|f| *f.borrow_mut() = Some(message));
}

/// The error a batched rule found since the last call, if any (cleared).
pub(crate) fn take_fault() -> Option<String> {
    FAULT.with(|f| f.borrow_mut().take())
}

/// Whether a batched rule found an error (see `FAULT`).
pub(crate) fn faulted() -> bool {
    FAULT.with(|f| f.borrow().is_some())
}

/// Records that an allocation failed (see `STARVED`).
pub(crate) fn note_starved() {
    STARVED.with(|s| s.set(true));
}

/// Forgets an allocation that failed before (a batched attempt starting
/// afresh).
pub(crate) fn clear_starved() {
    STARVED.with(|s| s.set(false));
}

/// Whether an allocation failed since `STARVED` was last cleared.
pub(crate) fn starved() -> bool {
    STARVED.with(|s| s.get())
}

/// An error at `span` if an allocation failed since the last call (and
/// clears the flag): what the reference path reports instead of retrying
/// a computation the memory could not hold.
pub(crate) fn check_starved(span: Span) -> Run<()> {
    if STARVED.with(|s| s.replace(false)) {
        return fail(span, "not enough memory for this computation's arrays");
    }
    Ok(())
}

/// Whether an array was refused as too large since the last call; clears
/// the flag.
pub(crate) fn take_refused() -> bool {
    REFUSED.with(|r| r.replace(false))
}

/// Operations on fewer atoms than this are not weighed against the memory
/// left (reading it costs a few `/proc` reads, some 50 µs; the 128 MB that
/// `limits::can_have` keeps to spare covers what is made between weighings).
const WEIGHED: usize = 1 << 22;

/// A lambda over at least this many cells that fails batched has its
/// first failing cell found by halving, not by running every cell.
const BISECT_FROM: usize = 1024;

/// The bytes an atom is counted as when an operation is weighed: an Int,
/// and as much again for an index or a scratch atom beside it.
const WEIGHT: usize = 16;

thread_local! {
    /// Atoms of the operations and arrays let through unweighed since the
    /// memory left was last weighed: many small ones (a box per cell, an
    /// array per step) add up too.
    static UNWEIGHED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// The memory left as last read, less every weighing let through since
    /// (as if each kept all it was weighed at: nothing freed is counted
    /// back), and when it was read.
    static LEFT: std::cell::Cell<Option<(usize, std::time::Instant)>> = const { std::cell::Cell::new(None) };
}

/// How long a reading of the memory left serves later weighings (each
/// taken off it), so that a loop of thousands of steps over a large array
/// does not read `/proc` at every step.
const READING_SERVES: std::time::Duration = std::time::Duration::from_millis(20);

/// Whether an operation on `atoms` atoms (its operands'; its result and
/// scratch reckoned from them) fits the memory left now
/// (`limits::available`: the address space not yet in use, the control
/// group's room, the system's): weighed at once when it is large, and with
/// the others since the last weighing once they add up to [`WEIGHED`]. The
/// check that sees the arrays already live, as the limit on one array
/// (`check_size`) cannot, so that the allocation that would fail is never
/// tried.
fn weigh(atoms: usize) -> bool {
    let total = UNWEIGHED.with(|u| u.get()).saturating_add(atoms);
    if total < WEIGHED {
        UNWEIGHED.with(|u| u.set(total));
        return true;
    }
    UNWEIGHED.with(|u| u.set(0));
    let bytes = total.saturating_mul(WEIGHT);
    let wanted = bytes.saturating_add(remora_value::limits::SLACK);
    // A recent reading that still covers it (else a fresh one: memory may
    // have been freed since).
    if let Some((left, at)) = LEFT.with(|l| l.get())
        && at.elapsed() < READING_SERVES
        && wanted <= left
    {
        LEFT.with(|l| l.set(Some((left - bytes, at))));
        return true;
    }
    let Some(left) = remora_value::limits::available() else {
        return true;
    };
    let fits = wanted <= left;
    LEFT.with(|l| l.set(Some((left.saturating_sub(bytes), std::time::Instant::now()))));
    fits
}

/// [`weigh`], refused at `span`.
pub(crate) fn admit(atoms: usize, span: Span) -> Run<()> {
    if weigh(atoms) {
        return Ok(());
    }
    fail(span, "not enough memory for this computation's arrays")
}

/// [`weigh`] for the batched paths: `false` (with the shortage noted, so
/// that nothing retries it cell by cell) where it refuses.
pub(crate) fn admitted(atoms: usize) -> bool {
    let ok = weigh(atoms);
    if !ok {
        note_starved();
    }
    ok
}

/// Whether a batched path may make an array of `atoms` atoms: `false`
/// beyond the limit on one array (noted, so the batch is retried on
/// smaller strips of its frame) or beyond the memory left ([`admitted`]).
pub(crate) fn batch_fits(atoms: usize) -> bool {
    if atoms > atom_limit() {
        REFUSED.with(|r| r.set(true));
        return false;
    }
    admitted(atoms)
}

/// Refuses an array of `n` atoms beyond the limit in force, or beyond the
/// memory left now ([`admit`]).
pub(crate) fn check_size(n: usize, span: Span) -> Run<()> {
    let limit = atom_limit();
    if n > limit {
        REFUSED.with(|r| r.set(true));
        return fail(
            span,
            format!("an array of {n} atoms is too large (the limit is {limit})"),
        );
    }
    admit(n, span)
}

/// A run-time failure, at the application (or form) that failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunError {
    pub span: Span,
    pub message: String,
}

pub type Run<T> = Result<T, RunError>;

pub(crate) fn fail<T>(span: Span, message: impl Into<String>) -> Run<T> {
    Err(RunError {
        span,
        message: message.into(),
    })
}

pub fn scalar_value<'p>(data: Data<Fun<'p>>) -> Value<'p> {
    Array {
        shape: Vec::new(),
        data,
    }
}

pub(crate) fn fun_value(f: Fun<'_>) -> Value<'_> {
    scalar_value(Data::Atoms(vec![Atom::Fun(f)].into()))
}

/// An empty buffer for arrays of the given atom type.
pub fn empty_data<'p>(atom: &TyAtom) -> Data<Fun<'p>> {
    match atom {
        TyAtom::Int => Data::Int(Vec::new().into()),
        TyAtom::Float => Data::Float(Vec::new().into()),
        TyAtom::Bool => Data::Bool(Vec::new().into()),
        _ => Data::Atoms(Vec::new().into()),
    }
}

#[derive(Default)]
pub struct Interpreter {
    /// Where `trace` writes (stderr when `None`).
    pub trace: Option<Vec<String>>,
    /// A program one did not write (`remora run --sandbox`): it may not
    /// read or write files (`read-file`, `read-file-f32bin`,
    /// `trace-file` are errors).
    pub sandbox: bool,
    /// Evaluation steps left, when limited (a fuzzer's budget).
    pub fuel: Option<u64>,
    /// Only the reference path: every application cell by cell, no batched
    /// application (the test suite compares the two).
    pub reference_only: bool,
    /// The batch frame of the batched evaluation under way (see `batch`).
    pub(crate) batch: Vec<usize>,
    /// How many batched evaluations are under way (effects wait for none).
    pub(crate) batching: u32,
    /// Which lambda bodies can run batched, by address.
    pub(crate) batchable_bodies: std::collections::HashMap<usize, bool>,
    /// Script mode printing (`remora run`): a program without entries
    /// prints each bare expression's value on stdout as soon as it has
    /// it, so a later failure does not hide the earlier values.
    pub echo: bool,
    /// Script mode printing for people (`--format pretty`): how much of
    /// each value it shows; `None`, the exact printing.
    pub echo_pretty: Option<remora_value::pretty::Options>,
    /// What ran cell by cell, when asked for (`remora run -v`; see
    /// `cell_log`).
    pub(crate) cell_log: Option<Vec<crate::cell_log::CellByCell>>,
    /// Why batching last gave up, for the log.
    pub(crate) gave_up: Option<String>,
    /// The applications of `trace` whose label is a string literal, by
    /// position ([`position`]): their label is printed as its text (see
    /// [`text_label`]).
    pub(crate) text_labels: std::collections::HashSet<(u32, u32, u32)>,
    /// The application a batched evaluation is at (for the log).
    pub(crate) at: Span,
    /// Each variable's last reads in its scope, by the scope's address
    /// and the variable (`moves.rs`).
    pub(crate) last_reads: std::collections::HashMap<(usize, VarId), Rc<[usize]>>,
    /// The expression whose evaluation is next handed the chain, by
    /// address, and the chain (`moves.rs`; `eval_chained`).
    pub(crate) expect: (usize, u64),
    /// The last chain begun (`moves.rs`).
    pub(crate) chains: u64,
    /// A filter's value made before its evaluation reaches it
    /// (`mapped.rs`, `let_filtered_scan`).
    pub(crate) premade: Option<crate::mapped::Premade>,
    /// The selection `(g x)` of a premade filter's states that made them
    /// already (its address): its value is `x`'s.
    pub(crate) preselected: Option<usize>,
    /// The intrinsic application (its address) that `apply_prim_framed`
    /// runs at the top level, where giving up means the caller applies it
    /// plainly: one position with no batch is left to that application,
    /// which alone holds the arguments (`batch::prim_per_cell`).
    pub(crate) plain_follows: usize,
}

/// A span's file and place (spans compare equal whatever their positions,
/// so that trees compare by their contents).
pub(crate) fn position(span: Span) -> (u32, u32, u32) {
    (span.file.0, span.start, span.end)
}

/// Whether `e` is a string literal as the parser makes it: a vector of Int
/// atoms that all carry the literal's own position (the atoms of `[104 105]`
/// or `(array [2] 104 105)` each have their own; a tree raised from the
/// compiler has no positions, and no string literals then).
fn is_string_literal(e: &TExpr) -> bool {
    match &e.kind {
        TExprKind::Array { shape, atoms } => {
            shape.len() == 1
                && !atoms.is_empty()
                && e.span.start < e.span.end
                && atoms
                    .iter()
                    .all(|a| position(a.span) == position(e.span) && matches!(a.kind, TAtomKind::Int(_)))
        }
        _ => false,
    }
}

/// Whether a program has a `(trace "label" x)` anywhere (the compiler's
/// raised trees keep no positions, and so no string literals: such a
/// program runs as it is).
pub fn traces_text(decls: &[TDecl]) -> bool {
    decls.iter().any(|d| match d {
        TDecl::Def { value, .. } => has_text_label(value),
        TDecl::Expr(e) => has_text_label(e),
    })
}

fn has_text_label(e: &TExpr) -> bool {
    e.any(&mut text_label)
}

/// Whether `e` is `(trace "label" x)` (its type and index arguments
/// anywhere): an application of `trace` whose label is a string literal,
/// which `trace` prints as text, not as the vector of code points it is.
pub(crate) fn text_label(e: &TExpr) -> bool {
    let TExprKind::App { func, .. } = &e.kind else {
        return false;
    };
    let TExprKind::App {
        func: head,
        arg: label,
        ..
    } = &func.kind
    else {
        return false;
    };
    let mut head = &**head;
    while let TExprKind::TApp { func, .. } | TExprKind::IApp { func, .. } = &head.kind {
        head = func;
    }
    matches!(head.kind, TExprKind::Intrinsic("trace")) && is_string_literal(label)
}

impl Interpreter {
    /// Limits every array on this thread to `n` atoms (a memory budget).
    pub fn limit_atoms(n: usize) {
        ATOM_LIMIT.with(|l| l.set(n));
    }
}

impl<'p> Interpreter {
    /// The declarations in order; returns the environment they make and the
    /// values of bare expressions.
    pub fn program(&mut self, decls: &'p [TDecl]) -> Run<(Env<'p>, Vec<Value<'p>>)> {
        let mut env = Env::default();
        let mut shown = Vec::new();
        let echo = self.echo && !decls.iter().any(|d| matches!(d, TDecl::Def { entry: true, .. }));
        for d in decls {
            match d {
                TDecl::Def { var, value, .. } => {
                    let v = self.eval(value, &env)?;
                    env = env.with(Binding::Val(*var, v));
                }
                TDecl::Expr(e) => {
                    let v = self.eval(e, &env)?;
                    if echo {
                        let shown = match &self.echo_pretty {
                            None => remora_value::print::to_string_checked(&v),
                            Some(options) => remora_value::pretty::to_string_checked(&v, options),
                        }
                        .or_else(|m| fail(e.span, m))?;
                        remora_syntax::files::write_stdout(format!("{shown}\n").as_bytes())
                            .or_else(|err| fail(e.span, format!("cannot write standard output: {err}")))?;
                    }
                    shown.push(v);
                }
            }
        }
        Ok((env, shown))
    }

    pub fn lookup(env: &Env<'p>, v: VarId) -> Option<Value<'p>> {
        env.value(v)
    }

    pub(crate) fn shape_of(&self, s: &remora_types::Shape, env: &Env<'p>, span: Span) -> Run<Vec<usize>> {
        let dims = s
            .checked_eval(&|v| env.dim(v), &|v| env.shape(v))
            .or_else(|e| dimension_error(e, span))?;
        let mut out = Vec::with_capacity(dims.len());
        for d in dims {
            match usize::try_from(d) {
                Ok(n) => out.push(n),
                Err(_) => return fail(span, format!("negative dimension: {d}")),
            }
        }
        Ok(out)
    }

    pub(crate) fn index_val(&self, i: &Index, env: &Env<'p>, span: Span) -> Run<IndexVal> {
        match i {
            Index::Dim(d) => {
                let n = d
                    .checked_eval(&|v| env.dim(v))
                    .or_else(|e| dimension_error(e, span))?;
                if n < 0 {
                    let hint = if d.constant() < 0 {
                        " (an empty array where an item is needed, as by head or reduce?)"
                    } else {
                        ""
                    };
                    return fail(span, format!("negative dimension: {n}{hint}"));
                }
                Ok(IndexVal::Dim(n))
            }
            Index::Shape(s) => {
                let dims = self.shape_of(s, env, span)?;
                Ok(IndexVal::Shape(dims.into_iter().map(|d| d as i64).collect()))
            }
        }
    }

    pub fn eval(&mut self, e: &'p TExpr, env: &Env<'p>) -> Run<Value<'p>> {
        let span = e.span;
        // The chain this evaluation is part of, if its parent handed it
        // on (`moves.rs`); 0 if not.
        let chain = if self.expect.0 == crate::moves::key(e) {
            self.expect.1
        } else {
            0
        };
        self.expect = (0, 0);
        if let Some(fuel) = &mut self.fuel {
            if *fuel == 0 {
                return fail(span, "the evaluation budget is spent");
            }
            *fuel -= 1;
        }
        match &e.kind {
            TExprKind::Array { shape, atoms } => {
                if atoms.is_empty() {
                    return self.empty_of_type(&e.ty, env, span);
                }
                let mut cells = Vec::with_capacity(atoms.len());
                for a in atoms {
                    cells.push(scalar_value(self.atom(&a.kind, env, a.span)?));
                }
                let mut v = stack(cells, span)?;
                v.shape = shape.iter().map(|d| *d as usize).collect();
                Ok(v)
            }
            TExprKind::Frame { shape, elems } => {
                if elems.is_empty() {
                    return self.empty_of_type(&e.ty, env, span);
                }
                let mut cells = Vec::with_capacity(elems.len());
                for x in elems {
                    cells.push(self.eval(x, env)?);
                }
                let inner = cells[0].shape.clone();
                let mut v = stack(cells, span)?;
                v.shape = shape.iter().map(|d| *d as usize).chain(inner).collect();
                Ok(v)
            }
            TExprKind::Var(v) => match env.read(*v, crate::moves::key(e), chain) {
                Some(val) => Ok(val),
                None => fail(span, "internal error: unbound variable at run time"),
            },
            TExprKind::Intrinsic("pi") => Ok(scalar_value(Data::Float(vec![std::f32::consts::PI].into()))),
            TExprKind::Intrinsic(name) => Ok(fun_value(Fun::Prim(Rc::new(Prim {
                name,
                sig: intrinsics::signature(name),
                types: Vec::new(),
                indices: Vec::new(),
                args: Vec::new(),
            })))),
            TExprKind::App { func, arg, lifted } => {
                // A filter's value made before it was reached.
                if let Some(made) = self.premade.take_if(|m| m.at == std::ptr::from_ref(e) as usize) {
                    self.preselected = made.selection;
                    let data = made.data.base_atoms();
                    return Ok(intrinsics::boxed_items(made.count, &made.cell, data));
                }
                if self
                    .preselected
                    .take_if(|at| *at == std::ptr::from_ref(e) as usize)
                    .is_some()
                {
                    return self.eval(arg, env);
                }
                if text_label(e) && !self.text_labels.contains(&position(span)) {
                    self.text_labels.insert(position(span));
                }
                if let Some(v) = self.scalar_fast_path(func, arg, env, span, chain)? {
                    return Ok(v);
                }
                if let Some(v) = self.update(e, env, chain)? {
                    return Ok(v);
                }
                if let Some(v) = self.projected(e, env)? {
                    return Ok(v);
                }
                if let Some(v) = self.apply_spine(e, env, chain)? {
                    return Ok(v);
                }
                let f = self.eval(func, env)?;
                let cell = self.shape_of(&lifted.arg_cell, env, span)?;
                let a = match &f.data {
                    // A lambda given a view (`(f ((i-app windows 3) xs))`):
                    // its body reads the view in place.
                    Data::Atoms(funs) if f.shape.is_empty() && self.gives_view(arg, env) => {
                        let view = self.eval_view(arg, env)?;
                        if let Some(fun @ Fun::Lambda { .. }) = funs.first().and_then(|a| match a {
                            Atom::Fun(fun) => Some(fun),
                            _ => None,
                        }) && let Some(r) =
                            self.apply_lambda_to_views(fun, vec![(view.clone(), cell.clone())])
                        {
                            return Ok(r);
                        }
                        self.dense_or_eval(view, arg, env)?
                    }
                    _ => self.eval(arg, env)?,
                };
                self.apply(&f, a, &cell, &e.ty, env, span)
            }
            TExprKind::TApp { func, arg } => {
                let f = self.eval(func, env)?;
                self.type_apply(&f, arg, &e.ty, env, span)
            }
            TExprKind::IApp { func, arg } => {
                let f = self.eval(func, env)?;
                let i = self.index_val(arg, env, span)?;
                self.index_apply(&f, &i, &e.ty, env, span)
            }
            TExprKind::Let { var, value, body } => {
                if let Some(v) = self.let_filtered(*var, value, body, env)? {
                    return Ok(v);
                }
                if let Some((rest, env)) = self.let_scan_of_map(*var, value, body, env)? {
                    return self.eval(rest, &env);
                }
                if let Some(env) = self.defer_grade(*var, value, body, env)? {
                    return self.eval(body, &env);
                }
                if let Some(env) = self.defer_powers(*var, value, body, env)? {
                    return self.eval(body, &env);
                }
                if let Some(env) = self.bind_view(*var, value, body, env)? {
                    return self.eval(body, &env);
                }
                if let Some(env) = self.bind_iota(*var, value, env)? {
                    return self.eval(body, &env);
                }
                // (A `let` not in a chain begins one: its variable's.)
                let chain = if chain == 0 { self.new_chain() } else { chain };
                let v = self.eval_chained(value, env, chain)?;
                let binding = self.binding(*var, v, body, chain);
                self.eval_chained(body, &env.with(binding), chain)
            }
            TExprKind::Unbox {
                witness,
                binder,
                var,
                boxed,
                body,
            } => {
                let b = match self.lazy_range(boxed, env)? {
                    // One counting vector, not made (`affine.rs`).
                    Ok(n) => {
                        let mut inner = env.bind_index(*witness, &IndexVal::Dim(n as i64));
                        if binder != witness {
                            inner = inner.bind_index(*binder, &IndexVal::Shape(vec![n as i64]));
                        }
                        let inner = Interpreter::bind_counting(&inner, *var, n);
                        let r = self.eval_chained(body, &inner, chain)?;
                        return self.collect(vec![r], &[], &body.ty, env, span).map_err(|e| RunError {
                            span,
                            message: format!(
                                "the boxes' payloads give results of different shapes, which cannot form one array ({})",
                                e.message
                            ),
                        });
                    }
                    Err(Some(b)) => b,
                    Err(None) => self.eval(boxed, env)?,
                };
                let Data::Atoms(boxes) = &b.data else {
                    return fail(span, "internal error: unbox of something that is not a box");
                };
                // (The body of one box evaluated once: in the chain.)
                let chain = if boxes.len() == 1 { chain } else { 0 };
                let mut results = Vec::with_capacity(boxes.len());
                for atom in boxes {
                    let Atom::Box(bx) = atom else {
                        return fail(span, "internal error: unbox of something that is not a box");
                    };
                    let w = match bx.witnesses.first() {
                        Some(Witness::Dim(d)) => IndexVal::Dim(*d),
                        Some(Witness::Shape(s)) => IndexVal::Shape(s.clone()),
                        None => IndexVal::Shape(Vec::new()),
                    };
                    let mut inner = env.bind_index(*witness, &w);
                    if binder != witness {
                        inner = inner.bind_index(*binder, &IndexVal::Shape(w.dims()));
                    }
                    let inner = inner.with(Binding::Val(*var, bx.payload.clone()));
                    results.push(self.eval_chained(body, &inner, chain)?);
                }
                self.collect(results, &b.shape, &body.ty, env, span).map_err(|e| RunError {
                    span,
                    message: format!(
                        "the boxes' payloads give results of different shapes, which cannot form one array ({})",
                        e.message
                    ),
                })
            }
            TExprKind::Record(fields) => self.record(e, fields, env, chain),
            TExprKind::Field { record, field } => {
                let r = self.eval_chained(record, env, chain)?;
                if let Some(v) = field_of(&r, field) {
                    return Ok(v);
                }
                let Data::Atoms(atoms) = &r.data else {
                    return fail(span, "internal error: field of a non-record");
                };
                let mut cells = Vec::with_capacity(atoms.len());
                for a in atoms {
                    match a {
                        Atom::Record(fs) => match fs.iter().find(|(n, _)| n == field) {
                            Some((_, v)) => cells.push(v.clone()),
                            None => return fail(span, format!("no field `{field}`")),
                        },
                        _ => return fail(span, "internal error: field of a non-record"),
                    }
                }
                let cell_ty = match &record.ty.atom {
                    TyAtom::Record(fs) => fs.iter().find(|(n, _)| n == field).map(|(_, t)| t.clone()),
                    _ => None,
                };
                let cell_ty = cell_ty.unwrap_or_else(|| e.ty.clone());
                self.collect(cells, &r.shape, &cell_ty, env, span)
            }
            TExprKind::If {
                cond,
                then,
                otherwise,
            } => {
                let c = self.eval(cond, env)?;
                match c.data {
                    Data::Bool(b) if b.len() == 1 => {
                        if b[0] {
                            self.eval_chained(then, env, chain)
                        } else {
                            self.eval_chained(otherwise, env, chain)
                        }
                    }
                    _ => fail(span, "internal error: the condition of `if` is not a Bool"),
                }
            }
        }
    }

    /// `e` evaluated as the part of a form on the path of chain `chain`
    /// (`moves.rs`): handed the chain (none when `chain` is 0).
    pub(crate) fn eval_chained(&mut self, e: &'p TExpr, env: &Env<'p>, chain: u64) -> Run<Value<'p>> {
        if chain != 0 {
            self.expect = (crate::moves::key(e), chain);
        }
        self.eval(e, env)
    }

    /// A chain begun (`moves.rs`): a lambda's call, a `let` not in one.
    pub(crate) fn new_chain(&mut self) -> u64 {
        self.chains += 1;
        self.chains
    }

    /// The empty array a literal of type `ty` with no elements stands for.
    fn empty_of_type(&self, ty: &Type, env: &Env<'p>, span: Span) -> Run<Value<'p>> {
        Ok(Array {
            shape: self.shape_of(&ty.shape, env, span)?,
            data: empty_data(&env.atom_type(&ty.atom)),
        })
    }

    fn atom(&mut self, a: &'p TAtomKind, env: &Env<'p>, span: Span) -> Run<Data<Fun<'p>>> {
        Ok(match a {
            TAtomKind::Bool(b) => Data::Bool(vec![*b].into()),
            TAtomKind::Int(i) => Data::Int(vec![*i].into()),
            TAtomKind::Float(x) => Data::Float(vec![*x].into()),
            TAtomKind::Lambda { param, body } => Data::Atoms(
                vec![Atom::Fun(Fun::Lambda {
                    param: *param,
                    body,
                    env: env.clone(),
                })]
                .into(),
            ),
            TAtomKind::TLambda { param, body } => Data::Atoms(
                vec![Atom::Fun(Fun::TLambda {
                    param: *param,
                    body,
                    env: env.clone(),
                })]
                .into(),
            ),
            TAtomKind::ILambda { param, body } => Data::Atoms(
                vec![Atom::Fun(Fun::ILambda {
                    param: *param,
                    body,
                    env: env.clone(),
                })]
                .into(),
            ),
            TAtomKind::Box { witness, body } => {
                let w = match self.index_val(witness, env, span)? {
                    IndexVal::Dim(d) => Witness::Dim(d),
                    IndexVal::Shape(s) => Witness::Shape(s),
                };
                let payload = self.eval(body, env)?;
                // A nested box (box (i j) e T) prints its witnesses in one box.
                Data::Atoms(
                    vec![Atom::Box(Boxed {
                        witnesses: vec![w],
                        payload,
                    })]
                    .into(),
                )
            }
        })
    }

    /// `(op a b)` or `(op a)` for a scalar primitive: one broadcast loop.
    fn scalar_fast_path(
        &mut self,
        func: &'p TExpr,
        arg: &'p TExpr,
        env: &Env<'p>,
        span: Span,
        chain: u64,
    ) -> Run<Option<Value<'p>>> {
        let (name, first) = match &func.kind {
            TExprKind::Intrinsic(name) if scalar::arity(name) == Some(1) => (*name, None),
            TExprKind::App {
                func: inner, arg: a, ..
            } => match &inner.kind {
                TExprKind::Intrinsic(name) if scalar::arity(name) == Some(2) => (*name, Some(a)),
                _ => return Ok(None),
            },
            _ => return Ok(None),
        };
        // An operand that is a view (`(drop 1 xs)`, a transposition): the
        // batched rule reads it in place instead of laying it out.
        if first
            .map(|a| &**a)
            .into_iter()
            .chain([arg])
            .any(|a| self.gives_view(a, env))
            && !self.reference_only
        {
            return Ok(None);
        }
        if let Some(a) = first
            && let Some(v) = self.counting_with_scalar(name, a, arg, env, span)?
        {
            return Ok(Some(v));
        }
        let mut operands: Vec<Value<'p>> = Vec::new();
        if let Some(a) = first {
            operands.push(self.eval_chained(a, env, chain)?);
        }
        operands.push(self.eval_chained(arg, env, chain)?);
        let principal = operands
            .iter()
            .map(|o| o.shape.clone())
            .max_by_key(|s| s.len())
            .unwrap_or_default();
        if operands.iter().any(|o| !principal.starts_with(&o.shape)) {
            return fail(span, "frames are not prefix-related at run time");
        }
        let n = atoms_in(&principal);
        check_size(n, span)?;
        // A temporary operand of the result's shape no one else holds: the
        // result is written over it.
        if operands.len() == 2 {
            for target_first in [true, false] {
                let (t, o) = match operands.split_at_mut(1) {
                    ([x], [y]) if target_first => (x, &*y),
                    ([x], [y]) => (y, &*x),
                    _ => break,
                };
                if t.shape == principal {
                    let lo = crate::kernel::Layout::prefix(&o.shape, &principal);
                    if let Some(done) =
                        scalar::apply_in_place(name, &mut t.data, (&o.data, &lo), target_first, &principal)
                    {
                        done.or_else(|m| fail(span, m))?;
                        return Ok(Some(std::mem::replace(
                            t,
                            scalar_value(Data::Int(Vec::new().into())),
                        )));
                    }
                }
            }
        }
        let data = intrinsics::scalar_apply(name, &operands, &principal).or_else(|m| fail(span, m))?;
        Ok(Some(Array {
            shape: principal,
            data,
        }))
    }

    /// Applies every function atom of `f` (lifting as core.md §3 says) to the
    /// cells of shape `cell` of `a`.
    /// `(t-app f arg)` of the value `f` (an array of type functions),
    /// whose result has type `ty`.
    pub fn type_apply(
        &mut self,
        f: &Value<'p>,
        arg: &TyAtom,
        ty: &Type,
        env: &Env<'p>,
        span: Span,
    ) -> Run<Value<'p>> {
        let arg = env.atom_type(arg);
        self.map_funs(f, ty, env, span, &mut |this, fun| match fun {
            Fun::TLambda { param, body, env } => {
                this.eval(body, &env.with(Binding::Type(*param, arg.clone())))
            }
            Fun::Prim(p) => {
                let mut p = (**p).clone();
                p.types.push(arg.clone());
                this.saturate(p, span)
            }
            _ => fail(
                span,
                "internal error: t-app of a value that is not a type function",
            ),
        })
    }

    /// `(i-app f i)` of the value `f` (an array of index functions), whose
    /// result has type `ty`.
    pub fn index_apply(
        &mut self,
        f: &Value<'p>,
        i: &IndexVal,
        ty: &Type,
        env: &Env<'p>,
        span: Span,
    ) -> Run<Value<'p>> {
        self.map_funs(f, ty, env, span, &mut |this, fun| match fun {
            Fun::ILambda { param, body, env } => {
                let env = env.bind_index(*param, i);
                this.eval(body, &env)
            }
            Fun::Prim(p) => {
                let mut p = (**p).clone();
                p.indices.push(i.clone());
                this.saturate(p, span)
            }
            _ => fail(
                span,
                "internal error: i-app of a value that is not an index function",
            ),
        })
    }

    pub fn apply(
        &mut self,
        f: &Value<'p>,
        a: Value<'p>,
        cell: &[usize],
        result_ty: &Type,
        env: &Env<'p>,
        span: Span,
    ) -> Run<Value<'p>> {
        let rank = a.rank();
        if rank < cell.len() || a.shape[rank - cell.len()..] != *cell {
            return fail(
                span,
                format!(
                    "the argument's shape {:?} does not end in the cell {:?}",
                    a.shape, cell
                ),
            );
        }
        let frame_a = a.shape[..rank - cell.len()].to_vec();
        let frame_f = f.shape.clone();
        let principal = if frame_a.starts_with(&frame_f) {
            frame_a.clone()
        } else if frame_f.starts_with(&frame_a) {
            frame_f.clone()
        } else {
            return fail(span, "frames are not prefix-related at run time");
        };
        let Data::Atoms(funs) = &f.data else {
            return fail(span, "internal error: applying something that is not a function");
        };
        // One lambda over a non-empty frame: its body once, batched.
        if let ([Atom::Fun(fun @ Fun::Lambda { .. })], false) = (funs.as_slice(), principal.is_empty())
            && frame_f.is_empty()
        {
            if let Some(r) = self.apply_lambda_batched(fun, vec![(a.clone(), cell.to_vec())]) {
                return Ok(r);
            }
            check_starved(span)?;
            // Many cells, one of them failing: the first failing cell
            // found by running halves batched, and its error reported, as
            // the cell-by-cell loop would after running every cell before
            // it (minutes, for millions of cells).
            let cells = atoms_in(&frame_a);
            if cells >= BISECT_FROM
                && let Some(k) = self.first_failing_cell(fun, &a, cell, cells)
            {
                let cell_size: usize = cell.iter().product();
                let at = |k: usize| Array {
                    shape: cell.to_vec(),
                    data: a.data.slice(k * cell_size, cell_size),
                };
                // (The loop below refuses a result too large at its first
                // cell, before any other cell's error.)
                let first = self.call(fun, at(0), span)?;
                check_size(cells.saturating_mul(first.data.len()), span)?;
                self.call(fun, at(k), span)?;
            }
            check_starved(span)?;
        }
        // An empty principal frame: one call, on the argument itself.
        if let ([Atom::Fun(fun)], true) = (funs.as_slice(), principal.is_empty()) {
            return self.call(fun, a, span);
        }
        let n = atoms_in(&principal);
        check_size(n, span)?;
        // A result cell per position, each a function or an array: weighed
        // as several atoms each.
        admit(n.saturating_mul(4).saturating_add(a.data.len()), span)?;
        // `while` over a frame: every cell stepped together (masked.rs).
        if let [Atom::Fun(looping @ Fun::Prim(p))] = funs.as_slice()
            && let ("while", [test, step]) = (p.name, p.args.as_slice())
            && n > 0
        {
            let cells = Array {
                shape: std::iter::once(n).chain(cell.iter().copied()).collect(),
                data: a.data,
            };
            let mut r = self.while_over_frame(looping, test, step, cells, cell, span)?;
            r.shape = principal.iter().chain(cell).copied().collect();
            return Ok(r);
        }
        if funs.len() > 1 {
            self.note_cell_by_cell(|| "an array of functions is applied one function per cell".into());
        }
        self.log_cells(span, n);
        let cell_size: usize = cell.iter().product();
        let nf = funs.len().max(1);
        let na: usize = frame_a.iter().product::<usize>().max(1);
        let mut results = Vec::with_capacity(n);
        for p in 0..n {
            let fi = n.checked_div(nf).and_then(|per| p.checked_div(per)).unwrap_or(0);
            let Some(Atom::Fun(fun)) = funs.get(fi) else {
                return fail(span, "internal error: applying something that is not a function");
            };
            let ai = n.checked_div(na).and_then(|per| p.checked_div(per)).unwrap_or(0);
            let arg = Array {
                shape: cell.to_vec(),
                data: a.data.slice(ai * cell_size, cell_size),
            };
            let r = self.call(fun, arg, span)?;
            if p == 0 {
                // The whole result's size is known from the first cell's:
                // refused now rather than after building every cell.
                check_size(n.saturating_mul(r.data.len()), span)?;
            }
            results.push(r);
        }
        let result_cell = Type {
            atom: result_ty.atom.clone(),
            shape: remora_types::Shape::from_segs(
                result_ty
                    .shape
                    .segs()
                    .get(principal.len()..)
                    .unwrap_or_default()
                    .to_vec(),
            ),
        };
        self.collect(results, &principal, &result_cell, env, span)
    }

    /// The first of the `cells` cells of `a` (each of shape `cell`) on
    /// which the lambda `fun` fails when applied batched, found by halving
    /// (about `cells` cells run in all); `None` when memory ran short.
    fn first_failing_cell(
        &mut self,
        fun: &Fun<'p>,
        a: &Value<'p>,
        cell: &[usize],
        cells: usize,
    ) -> Option<usize> {
        let cell_size: usize = cell.iter().product();
        let (mut lo, mut hi) = (0, cells);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            let part = Array {
                shape: std::iter::once(mid - lo).chain(cell.iter().copied()).collect(),
                data: a.data.slice(lo * cell_size, (mid - lo) * cell_size),
            };
            let ran = self
                .apply_lambda_batched(fun, vec![(part, cell.to_vec())])
                .is_some();
            if starved() {
                return None;
            }
            if ran {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Some(lo)
    }

    /// Results for each position of `frame`, as one array; `cell_ty` gives
    /// the result's cell when there are none.
    fn collect(
        &mut self,
        mut results: Vec<Value<'p>>,
        frame: &[usize],
        cell_ty: &Type,
        env: &Env<'p>,
        span: Span,
    ) -> Run<Value<'p>> {
        if results.is_empty() {
            let cell = self.shape_of(&cell_ty.shape, env, span).unwrap_or_default();
            return Ok(Array {
                shape: frame.iter().copied().chain(cell).collect(),
                data: empty_data(&env.atom_type(&cell_ty.atom)),
            });
        }
        if frame.is_empty()
            && let [_] = results.as_slice()
            && let Some(only) = results.pop()
        {
            // One result over the empty frame: itself, not a copy.
            return Ok(only);
        }
        let inner = results[0].shape.clone();
        let mut v = stack(results, span)?;
        v.shape = frame.iter().copied().chain(inner).collect();
        Ok(v)
    }

    /// A function atom applied to one cell.
    pub fn call(&mut self, fun: &Fun<'p>, arg: Value<'p>, span: Span) -> Run<Value<'p>> {
        match fun {
            Fun::Lambda { param, body, env } => {
                let chain = self.new_chain();
                let binding = self.binding(*param, arg, body, chain);
                self.eval_chained(body, &env.with(binding), chain)
            }
            Fun::Prim(p) => {
                let mut p = (**p).clone();
                p.args.push(arg);
                self.saturate(p, span)
            }
            _ => fail(
                span,
                "internal error: applying a type or index function to a value",
            ),
        }
    }

    /// Two arguments, one after the other (a binary operator passed to
    /// `reduce` and friends: a scalar array of one function).
    pub fn call2(&mut self, op: &Value<'p>, x: Value<'p>, y: Value<'p>, span: Span) -> Run<Value<'p>> {
        // A lambda of two parameters (`(fn ((a …) (b …)) body)`, a lambda
        // whose body is a lambda literal): both bound at once and the
        // inner body evaluated, as applying the closure the outer body
        // makes would, but with no closure holding the first argument, so
        // that it may be moved out at its last read (`moves.rs`).
        if !self.reference_only
            && let Data::Atoms(a) = &op.data
            && let [Atom::Fun(Fun::Lambda { param, body, env })] = a.as_slice()
            && let TExprKind::Array { shape, atoms } = &body.kind
            && shape.is_empty()
            && let [inner] = atoms.as_slice()
            && let TAtomKind::Lambda {
                param: second,
                body: inner,
            } = &inner.kind
        {
            if let Some(fuel) = &mut self.fuel {
                // (What evaluating the outer body would have spent.)
                if *fuel == 0 {
                    return fail(body.span, "the evaluation budget is spent");
                }
                *fuel -= 1;
            }
            let chain = self.new_chain();
            let first = self.binding(*param, x, inner, chain);
            let env = env.with(first);
            let second = self.binding(*second, y, inner, chain);
            return self.eval_chained(inner, &env.with(second), chain);
        }
        let first = self.call_scalar(op, x, span)?;
        self.call_scalar(&first, y, span)
    }

    /// A scalar function value (one function atom) applied to one cell.
    pub fn call_value(&mut self, f: &Value<'p>, x: Value<'p>, span: Span) -> Run<Value<'p>> {
        self.call_scalar(f, x, span)
    }

    fn call_scalar(&mut self, f: &Value<'p>, x: Value<'p>, span: Span) -> Run<Value<'p>> {
        match &f.data {
            Data::Atoms(a) if a.len() == 1 => match &a[0] {
                Atom::Fun(fun) => self.call(fun, x, span),
                _ => fail(span, "internal error: not a function"),
            },
            _ => fail(span, "internal error: not a single function"),
        }
    }

    /// An intrinsic runs once it has all its arguments.
    pub(crate) fn saturate(&mut self, mut p: Prim<'p>, span: Span) -> Run<Value<'p>> {
        if p.types.len() >= p.sig.types && p.indices.len() >= p.sig.indices && p.args.len() >= p.sig.values {
            admit(p.args.iter().map(|a| a.data.len()).sum(), span)?;
            if let Some(v) = intrinsics::take_in_place(&mut p) {
                return Ok(v);
            }
            intrinsics::run(self, &mut p, span)
        } else {
            Ok(fun_value(Fun::Prim(Rc::new(p))))
        }
    }

    /// `f`'s function atoms, each mapped by `g`, collected under `f`'s shape.
    fn map_funs(
        &mut self,
        f: &Value<'p>,
        ty: &Type,
        env: &Env<'p>,
        span: Span,
        g: &mut dyn FnMut(&mut Self, &Fun<'p>) -> Run<Value<'p>>,
    ) -> Run<Value<'p>> {
        let Data::Atoms(funs) = &f.data else {
            return fail(span, "internal error: not a function array");
        };
        let mut results = Vec::with_capacity(funs.len());
        for a in funs {
            match a {
                Atom::Fun(fun) => results.push(g(self, fun)?),
                _ => return fail(span, "internal error: not a function"),
            }
        }
        let cell_ty = Type {
            atom: ty.atom.clone(),
            shape: remora_types::Shape::from_segs(
                ty.shape.segs().get(f.shape.len()..).unwrap_or_default().to_vec(),
            ),
        };
        self.collect(results, &f.shape.clone(), &cell_ty, env, span)
    }

    /// A record literal over its frame: one array per field (structure of
    /// arrays, `remora_value::Records`), each field's value replicated
    /// along the frame axes it lacks.
    fn record(
        &mut self,
        e: &'p TExpr,
        fields: &'p [(String, TExpr)],
        env: &Env<'p>,
        chain: u64,
    ) -> Run<Value<'p>> {
        let span = e.span;
        let TyAtom::Record(cell_tys) = &e.ty.atom else {
            return fail(span, "internal error: record without a record type");
        };
        let principal = self.shape_of(&e.ty.shape, env, span)?;
        let n = atoms_in(&principal);
        check_size(n, span)?;
        let mut columns = Vec::with_capacity(fields.len());
        for ((name, x), (_, cty)) in fields.iter().zip(cell_tys.iter()) {
            let v = self.eval_chained(x, env, chain)?;
            let cell = self.shape_of(&cty.shape, env, span)?;
            let size = atoms_in(&cell);
            check_size(n.saturating_mul(size), span)?;
            let frame = v
                .shape
                .get(..v.rank().saturating_sub(cell.len()))
                .unwrap_or_default();
            let data = if frame.len() == principal.len() {
                v.data
            } else {
                // Each cell of the field's (shorter) frame serves a run of
                // positions of the record's frame.
                let cells = atoms_in(frame);
                let run = n.checked_div(cells).unwrap_or(0);
                let layout = crate::kernel::Layout {
                    offset: 0,
                    strides: vec![size, 0, 1],
                };
                match crate::batch::gather_data(&v.data, &[cells, run, size], &layout) {
                    Some(d) => d,
                    None => return fail(span, "internal error: a record field does not fit its frame"),
                }
            };
            columns.push(remora_value::RecordField {
                name: name.clone(),
                cell,
                data,
            });
        }
        Ok(Array {
            shape: principal,
            data: Data::records(remora_value::Records {
                count: n,
                fields: columns,
            }),
        })
    }
}

/// Field `field` of records held as one array per field: the field's
/// array over the records' frame (no copy).
pub(crate) fn field_of<'p>(r: &Value<'p>, field: &str) -> Option<Value<'p>> {
    let Data::Records(rs) = &r.data else {
        return None;
    };
    let f = rs.fields.iter().find(|f| f.name == field)?;
    Some(Array {
        shape: r.shape.iter().chain(&f.cell).copied().collect(),
        data: f.data.clone(),
    })
}

pub(crate) fn stack<'p>(cells: Vec<Value<'p>>, span: Span) -> Run<Value<'p>> {
    check_size(
        cells
            .iter()
            .map(|c| c.data.len())
            .fold(0usize, usize::saturating_add),
        span,
    )?;
    Array::stack(cells).or_else(|m| fail(span, format!("cannot form an array: {m}")))
}

/// The error for a dimension [`remora_types::Dim::checked_eval`] gave no
/// value.
fn dimension_error<T>(e: remora_types::EvalError, span: Span) -> Run<T> {
    match e {
        remora_types::EvalError::Unbound => fail(span, "a shape depends on a witness outside its unbox"),
        remora_types::EvalError::Overflow => fail(span, "this dimension's arithmetic overflows 64 bits"),
    }
}

//! Cell programs: a sequential loop — `fold`, `scan`, `iscan`, `reduce` —
//! whose step is a user's function on small cells of fixed shape (scalars,
//! `[Float 2]`, `[Int 3]` …). Along one long axis there is no frame to
//! batch over, and each step interpreted is a call (microseconds); lifted
//! over a few cells, one batched application per item is as slow. Here the
//! step's body is compiled once, for the cells' shapes, into a straight
//! program over typed scalar registers — its scalar primitives, `if` (a
//! branch), `select`, item selection (`index`, `nth`, `head` … by literal
//! or computed indices, from the cells or from arrays the step reads from
//! outside), frames and array literals, `let`, and the functions it calls
//! (inlined, lifted over their small frames position by position),
//! records (one register group per field: literals, `field`, a record
//! state, a record from outside) — and the loop runs it natively over the
//! items, the cells shared among the threads, with no allocation per item.
//! A `while` or an `iterate` on small cells runs so too, each cell's loop
//! stopping on its own.
//!
//! Each register is one atom (64 bits: an Int, a Float's bits, a Bool),
//! each instruction one scalar primitive on atoms (`scalar::atom_op`, the
//! functions the kernels run), so every step computes the reference's
//! bits, items strictly left to right. Anything the compiler does not
//! know gives up (the loop then runs as before); a fault while running (a
//! division by zero, an index out of range) gives up too, and the loop
//! runs on the reference path, which reports the error where it is.

use crate::batch::{Batched, Try};
use crate::eval::{Binding, Env, Fun, Interpreter, Value, atoms_in};
use crate::scalar::{AtomOp, atom_op};
use remora_check::typed::{TAtomKind, TExpr, TExprKind, VarId};
use remora_syntax::Span;
use remora_types::Atom as TyAtom;
use remora_value::{Array, Atom, Data, RecordField, Records};
use std::rc::Rc;

/// The most atoms a value held in registers may have (a cell, or a frame
/// of cells a call is unrolled over).
const MAX_ATOMS: usize = 64;
/// The most instructions a program may have.
const MAX_CODE: usize = 4096;
/// How deep calls may be inlined.
const MAX_DEPTH: usize = 24;
/// How many `if`s may fail to compile as straight code (each compiled
/// again with a branch) before the rest are compiled with branches.
const MAX_SPECULATIONS: usize = 16;
/// Lifted over more cells than this, a loop runs as one batched
/// application per item (each step vectorised across the cells) instead.
const MAX_CELLS: usize = 256;
/// Loops of at least this many steps in all are shared among the threads.
const PARALLEL_STEPS: usize = 1 << 16;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Int,
    Float,
    Bool,
}

fn kind_of<F>(d: &Data<F>) -> Option<Kind> {
    match d {
        Data::Int(_) => Some(Kind::Int),
        Data::Float(_) => Some(Kind::Float),
        Data::Bool(_) => Some(Kind::Bool),
        _ => None,
    }
}

/// Atom `k` of a buffer as a register's bits.
fn bits_at<F>(d: &Data<F>, k: usize) -> Option<u64> {
    match d {
        Data::Int(v) => v.get(k).map(|x| *x as u64),
        Data::Float(v) => v.get(k).map(|x| u64::from(x.to_bits())),
        Data::Bool(v) => v.get(k).map(|x| u64::from(*x)),
        _ => None,
    }
}

/// Int, Float or Bool atoms as plain data (shared, not copied), which
/// threads may share.
fn plain<F>(d: &Data<F>) -> Option<Data> {
    match d {
        Data::Int(v) => Some(Data::Int(v.clone())),
        Data::Float(v) => Some(Data::Float(v.clone())),
        Data::Bool(v) => Some(Data::Bool(v.clone())),
        _ => None,
    }
}

#[inline(always)]
fn float(r: u64) -> f32 {
    f32::from_bits(r as u32)
}

#[inline(always)]
fn float_bits(x: f32) -> u64 {
    u64::from(x.to_bits())
}

/// One step of a program. Registers are numbers into one file of `u64`.
#[derive(Clone, Debug)]
enum Ins {
    Op1(AtomOp, u32, u32),
    Op2(AtomOp, u32, u32, u32),
    /// The commonest primitives, inline (`f.+ f.- f.* + - *`: the
    /// operations `atom_op` gives for them).
    Fast(Fast, u32, u32, u32),
    Move(u32, u32),
    /// `dst ← cond ? yes : no`.
    Select(u32, u32, u32, u32),
    Jump(u32),
    /// Jump to the target when the Bool register is false.
    JumpUnless(u32, u32),
    /// `dst ← srcs[idx]`; an index out of range faults.
    Pick {
        dst: u32,
        idx: u32,
        srcs: Box<[u32]>,
    },
    /// `dst ← base + idx · stride` (an offset into an outside array), the
    /// index checked against `bound`.
    Offset {
        dst: u32,
        base: Option<u32>,
        idx: u32,
        bound: u64,
        stride: u64,
    },
    /// `count` registers from `dst` ← atoms `at + skip …` of outside array
    /// `ext`.
    Load {
        dst: u32,
        ext: u32,
        at: u32,
        skip: u64,
        count: u32,
    },
}

impl Ins {
    /// Whether the instruction neither jumps nor can fault.
    fn straight_and_total(&self) -> bool {
        match self {
            Ins::Op1(op, ..) | Ins::Op2(op, ..) => !matches!(op, AtomOp::IiiFaulty(_)),
            Ins::Fast(..) | Ins::Move(..) | Ins::Select(..) => true,
            Ins::Jump(_) | Ins::JumpUnless(..) | Ins::Pick { .. } | Ins::Offset { .. } | Ins::Load { .. } => {
                false
            }
        }
    }

    /// The registers the instruction reads.
    fn reads(&self) -> Vec<u32> {
        match self {
            Ins::Op1(_, _, a) | Ins::Move(_, a) => vec![*a],
            Ins::Op2(_, _, a, b) | Ins::Fast(_, _, a, b) => vec![*a, *b],
            Ins::Select(_, c, y, n) => vec![*c, *y, *n],
            Ins::Jump(_) => Vec::new(),
            Ins::JumpUnless(c, _) => vec![*c],
            Ins::Pick { idx, srcs, .. } => std::iter::once(*idx).chain(srcs.iter().copied()).collect(),
            Ins::Offset { base, idx, .. } => base.iter().copied().chain([*idx]).collect(),
            Ins::Load { at, .. } => vec![*at],
        }
    }

    /// The registers the instruction writes.
    fn writes(&self) -> std::ops::Range<u32> {
        match self {
            Ins::Op1(_, d, _)
            | Ins::Op2(_, d, ..)
            | Ins::Fast(_, d, ..)
            | Ins::Move(d, _)
            | Ins::Select(d, ..)
            | Ins::Pick { dst: d, .. }
            | Ins::Offset { dst: d, .. } => *d..*d + 1,
            Ins::Load { dst, count, .. } => *dst..*dst + *count,
            Ins::Jump(_) | Ins::JumpUnless(..) => 0..0,
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Fast {
    FAdd,
    FSub,
    FMul,
    IAdd,
    ISub,
    IMul,
    /// The comparisons (`f.== f.!= f.< f.> f.<= f.>=`, `== != < > <= >=`),
    /// a Bool's bits.
    FCmp(Cmp),
    ICmp(Cmp),
}

impl Fast {
    /// The fast form of the scalar primitive `name`, if it has one.
    fn of(name: &str) -> Option<Fast> {
        Some(match name {
            "f.+" => Fast::FAdd,
            "f.-" => Fast::FSub,
            "f.*" => Fast::FMul,
            "+" => Fast::IAdd,
            "-" => Fast::ISub,
            "*" => Fast::IMul,
            "f.==" | "f.!=" | "f.<" | "f.>" | "f.<=" | "f.>=" => Fast::FCmp(Cmp::of(name)?),
            "==" | "!=" | "<" | ">" | "<=" | ">=" => Fast::ICmp(Cmp::of(name)?),
            _ => return None,
        })
    }

    /// The operation on two registers' bits (`atom_op`'s for the name).
    #[inline(always)]
    fn apply(self, a: u64, b: u64) -> u64 {
        match self {
            Fast::FAdd => float_bits(float(a) + float(b)),
            Fast::FSub => float_bits(float(a) - float(b)),
            Fast::FMul => float_bits(float(a) * float(b)),
            Fast::IAdd => (a as i64).wrapping_add(b as i64) as u64,
            Fast::ISub => (a as i64).wrapping_sub(b as i64) as u64,
            Fast::IMul => (a as i64).wrapping_mul(b as i64) as u64,
            Fast::FCmp(c) => u64::from(c.test(float(a), float(b))),
            Fast::ICmp(c) => u64::from(c.test(a as i64, b as i64)),
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Cmp {
    Eq,
    Ne,
    Lt,
    Gt,
    Le,
    Ge,
}

impl Cmp {
    fn of(name: &str) -> Option<Cmp> {
        Some(match name.trim_start_matches("f.") {
            "==" => Cmp::Eq,
            "!=" => Cmp::Ne,
            "<" => Cmp::Lt,
            ">" => Cmp::Gt,
            "<=" => Cmp::Le,
            ">=" => Cmp::Ge,
            _ => return None,
        })
    }

    fn test<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            Cmp::Eq => a == b,
            Cmp::Ne => a != b,
            Cmp::Lt => a < b,
            Cmp::Gt => a > b,
            Cmp::Le => a <= b,
            Cmp::Ge => a >= b,
        }
    }
}

/// A value while compiling.
#[derive(Clone)]
enum CVal<'p> {
    /// Atoms in registers, row-major.
    Arr {
        kind: Kind,
        shape: Vec<usize>,
        regs: Vec<u32>,
    },
    /// A part of an array from outside the step, read where it lies: from
    /// atom `skip` (plus register `at` when the offset is computed).
    Ext {
        kind: Kind,
        shape: Vec<usize>,
        ext: u32,
        at: Option<u32>,
        skip: usize,
    },
    /// A lambda, with the step's values it closes over.
    Lambda {
        param: VarId,
        body: &'p TExpr,
        env: Env<'p>,
        locals: Rc<Vec<(VarId, CVal<'p>)>>,
    },
    /// A type or index lambda, to be applied to its argument.
    Generic(Fun<'p>),
    /// An intrinsic (its type and index arguments ignored: its shapes are
    /// the registers').
    Prim(&'static str),
    /// One record: its fields' values, in its order.
    Rec(Vec<(String, CVal<'p>)>),
}

impl CVal<'_> {
    fn shape(&self) -> Option<&[usize]> {
        match self {
            CVal::Arr { shape, .. } | CVal::Ext { shape, .. } => Some(shape),
            // (A record is an atom.)
            CVal::Rec(_) => Some(&[]),
            _ => None,
        }
    }
}

/// A compiled step and what it needs to run.
#[derive(Debug)]
struct Program {
    code: Vec<Ins>,
    /// The register file's initial contents (the constants).
    init: Vec<u64>,
    /// The arrays from outside that the step reads.
    exts: Vec<Data>,
}

struct Compiler<'a, 'p> {
    it: &'a Interpreter,
    code: Vec<Ins>,
    init: Vec<u64>,
    /// What is known of each register at compile time.
    konst: Vec<Option<u64>>,
    exts: Vec<Data>,
    locals: Vec<(VarId, CVal<'p>)>,
    /// The values of variables from outside the step, as first read.
    outside: Vec<(VarId, CVal<'p>)>,
    depth: usize,
    /// How many `if`s tried as straight code have not been.
    speculations: usize,
    /// When the program runs in lanes across the cells of the batch:
    /// the batch's variables it reads, each a group of input registers
    /// (one cell of the variable per lane).
    lane_vars: Option<Vec<(Batched<'p>, Vec<u32>)>>,
}

impl<'a, 'p> Compiler<'a, 'p> {
    /// `step` applied to the cell `x` (in registers `regs`), its result
    /// copied back over `regs`: the step of a `while` or `iterate`. (The
    /// copies are parallel: a result that is one of the cell's registers
    /// is copied aside first.)
    fn step_in_place(&mut self, step: &Fun<'p>, x: &CVal<'p>, regs: &[u32]) -> Option<()> {
        let f = self.function(step)?;
        let r = self.call(f, vec![x.clone()], Span::default())?;
        let mut result = self.conform(x, r)?;
        for r in result.iter_mut() {
            if regs.contains(r) {
                let d = self.reg()?;
                self.emit(Ins::Move(d, *r))?;
                *r = d;
            }
        }
        for (&d, &r) in regs.iter().zip(&result) {
            self.emit(Ins::Move(d, r))?;
        }
        Some(())
    }

    fn new(it: &'a Interpreter) -> Self {
        Compiler {
            it,
            code: Vec::new(),
            init: Vec::new(),
            konst: Vec::new(),
            exts: Vec::new(),
            locals: Vec::new(),
            outside: Vec::new(),
            depth: 0,
            speculations: 0,
            lane_vars: None,
        }
    }

    fn reg(&mut self) -> Option<u32> {
        let r = u32::try_from(self.init.len()).ok()?;
        self.init.push(0);
        self.konst.push(None);
        Some(r)
    }

    /// `n` fresh registers.
    fn fresh_regs(&mut self, n: usize) -> Option<Vec<u32>> {
        (0..n).map(|_| self.reg()).collect()
    }

    /// A cell of `kind` and `shape` in fresh registers; `None` over
    /// [`MAX_ATOMS`] atoms.
    fn fresh_cell(&mut self, kind: Kind, shape: Vec<usize>) -> Option<CVal<'p>> {
        let n = atoms_in(&shape);
        if n > MAX_ATOMS {
            return None;
        }
        Some(CVal::Arr {
            kind,
            shape,
            regs: self.fresh_regs(n)?,
        })
    }

    fn constant(&mut self, bits: u64) -> Option<u32> {
        let r = self.reg()?;
        *self.init.get_mut(r as usize)? = bits;
        *self.konst.get_mut(r as usize)? = Some(bits);
        Some(r)
    }

    fn known(&self, r: u32) -> Option<u64> {
        *self.konst.get(r as usize)?
    }

    fn emit(&mut self, ins: Ins) -> Option<()> {
        if self.code.len() >= MAX_CODE {
            return None;
        }
        self.code.push(ins);
        Some(())
    }

    fn here(&self) -> Option<u32> {
        u32::try_from(self.code.len()).ok()
    }

    /// An array value from outside the step: in registers when small,
    /// else read where it lies.
    fn outside(&mut self, v: &Array<Fun<'p>>) -> Option<CVal<'p>> {
        if let (Data::Records(r), []) = (&v.data, v.shape.as_slice()) {
            return self.record(r, 0, &mut |c, d, k| c.constant(bits_at(d, k)?));
        }
        let kind = kind_of(&v.data)?;
        let n = atoms_in(&v.shape);
        if v.data.len() < n {
            return None;
        }
        if n <= MAX_ATOMS {
            let regs = (0..n)
                .map(|k| self.constant(bits_at(&v.data, k)?))
                .collect::<Option<Vec<_>>>()?;
            return Some(CVal::Arr {
                kind,
                shape: v.shape.clone(),
                regs,
            });
        }
        let ext = u32::try_from(self.exts.len()).ok()?;
        self.exts.push(plain(&v.data)?);
        Some(CVal::Ext {
            kind,
            shape: v.shape.clone(),
            ext,
            at: None,
            skip: 0,
        })
    }

    /// `v`'s atoms in registers (an outside array's read).
    fn regs(&mut self, v: CVal<'p>) -> Option<(Kind, Vec<usize>, Vec<u32>)> {
        match v {
            CVal::Arr { kind, shape, regs } => Some((kind, shape, regs)),
            CVal::Ext {
                kind,
                shape,
                ext,
                at,
                skip,
            } => {
                let count = atoms_in(&shape);
                if count > MAX_ATOMS {
                    return None;
                }
                let data = self.exts.get(ext as usize)?.clone();
                let regs = match at {
                    // A known place: constants.
                    None => (0..count)
                        .map(|k| self.constant(bits_at(&data, skip + k)?))
                        .collect::<Option<Vec<_>>>()?,
                    Some(at) => {
                        let regs = self.fresh_regs(count)?;
                        if let Some(&dst) = regs.first() {
                            self.emit(Ins::Load {
                                dst,
                                ext,
                                at,
                                skip: skip as u64,
                                count: count as u32,
                            })?;
                        }
                        regs
                    }
                };
                Some((kind, shape, regs))
            }
            _ => None,
        }
    }

    /// Record `o` of `r`, each atom a register `reg` gives (given the
    /// field's buffer and the atom's place in it): one register group
    /// per field.
    fn record<F>(
        &mut self,
        r: &Records<F>,
        o: usize,
        reg: &mut impl FnMut(&mut Self, &Data<F>, usize) -> Option<u32>,
    ) -> Option<CVal<'p>> {
        let mut fields = Vec::with_capacity(r.fields.len());
        for f in &r.fields {
            let size = f.size();
            let v = match &f.data {
                // A field that is one record (not an array of them).
                Data::Records(inner) if f.cell.is_empty() => self.record(inner, o, reg)?,
                d => {
                    if size > MAX_ATOMS {
                        return None;
                    }
                    let regs = (0..size)
                        .map(|k| reg(self, d, o * size + k))
                        .collect::<Option<Vec<_>>>()?;
                    CVal::Arr {
                        kind: kind_of(d)?,
                        shape: f.cell.clone(),
                        regs,
                    }
                }
            };
            fields.push((f.name.clone(), v));
        }
        Some(CVal::Rec(fields))
    }

    /// A value of the same kinds and shapes as `v` (an array or a record
    /// of them) in fresh registers.
    fn fresh_like(&mut self, v: &CVal<'p>) -> Option<CVal<'p>> {
        match v {
            CVal::Arr { kind, shape, .. } | CVal::Ext { kind, shape, .. } => {
                self.fresh_cell(*kind, shape.clone())
            }
            CVal::Rec(fields) => Some(CVal::Rec(
                fields
                    .iter()
                    .map(|(n, f)| Some((n.clone(), self.fresh_like(f)?)))
                    .collect::<Option<Vec<_>>>()?,
            )),
            _ => None,
        }
    }

    /// The registers of `v`, which must have the kinds, shapes and fields
    /// of `like` (registers laid out as [`flat`] lays out `like`'s).
    fn conform(&mut self, like: &CVal<'p>, v: CVal<'p>) -> Option<Vec<u32>> {
        match like {
            CVal::Arr { kind, shape, .. } => {
                let (k, s, r) = self.regs(v)?;
                (k == *kind && s == *shape).then_some(r)
            }
            CVal::Rec(fields) => {
                let CVal::Rec(mut given) = v else {
                    return None;
                };
                if given.len() != fields.len() {
                    return None;
                }
                let mut regs = Vec::new();
                for (name, l) in fields {
                    let at = given.iter().position(|(n, _)| n == name)?;
                    let (_, f) = given.swap_remove(at);
                    regs.extend(self.conform(l, f)?);
                }
                Some(regs)
            }
            _ => None,
        }
    }

    /// `v` (of the layout of `dst`, fresh registers) copied into `dst`.
    fn copy_into(&mut self, dst: &CVal<'p>, v: CVal<'p>) -> Option<()> {
        let src = self.conform(dst, v)?;
        for (&d, s) in flat(dst)?.iter().zip(src) {
            self.emit(Ins::Move(d, s))?;
        }
        Some(())
    }

    fn lookup(&mut self, v: VarId, env: &Env<'p>) -> Option<CVal<'p>> {
        if let Some((_, c)) = self.locals.iter().rev().find(|(w, _)| *w == v) {
            return Some(c.clone());
        }
        if let Some((_, c)) = self.outside.iter().find(|(w, _)| *w == v) {
            return Some(c.clone());
        }
        let b = env.lookup_batched(v)?;
        if b.nb != 0 {
            // In lanes across the batch's cells: an input, a cell per lane.
            let kind = kind_of(&b.v.data)?;
            let shape = b.own().to_vec();
            let c = self.fresh_cell(kind, shape)?;
            self.lane_vars.as_mut()?.push((b, flat(&c)?));
            self.outside.push((v, c.clone()));
            return Some(c);
        }
        let value = b.densify()?.v;
        let c = match &value.data {
            Data::Atoms(atoms) if value.shape.is_empty() => match atoms.first()? {
                Atom::Fun(f) => self.function(f)?,
                _ => return None,
            },
            _ => self.outside(&value)?,
        };
        self.outside.push((v, c.clone()));
        Some(c)
    }

    fn function(&self, f: &Fun<'p>) -> Option<CVal<'p>> {
        match f {
            Fun::Lambda { param, body, env } => Some(CVal::Lambda {
                param: *param,
                body,
                env: env.clone(),
                locals: Rc::new(Vec::new()),
            }),
            Fun::TLambda { .. } | Fun::ILambda { .. } => Some(CVal::Generic(f.clone())),
            Fun::Prim(p) if p.args.is_empty() => Some(CVal::Prim(p.name)),
            Fun::Prim(_) => None,
        }
    }

    /// `g` applied to a loop's state `state` when it only selects parts
    /// of it (`(index p 1)`, a field, a frame of such: no instruction):
    /// the selection, and where each of its registers lies in the state.
    fn projection(&mut self, g: &Fun<'p>, state: &CVal<'p>) -> Option<(CVal<'p>, Vec<usize>)> {
        let code = self.code.len();
        let f = self.function(g)?;
        let v = self.call(f, vec![state.clone()], Span::default())?;
        if self.code.len() != code {
            return None;
        }
        let regs = flat(state)?;
        let at = flat(&v)?
            .iter()
            .map(|r| regs.iter().position(|s| s == r))
            .collect::<Option<Vec<usize>>>()?;
        (!at.is_empty()).then_some((v, at))
    }

    fn expr(&mut self, e: &'p TExpr, env: &Env<'p>) -> Option<CVal<'p>> {
        match &e.kind {
            TExprKind::Array { shape, atoms } => {
                if let ([], [a]) = (shape.as_slice(), atoms.as_slice())
                    && let TAtomKind::Lambda { param, body } = &a.kind
                {
                    return Some(CVal::Lambda {
                        param: *param,
                        body,
                        env: env.clone(),
                        locals: Rc::new(self.locals.clone()),
                    });
                }
                let mut kind = None;
                let mut regs = Vec::with_capacity(atoms.len());
                for a in atoms {
                    let (k, bits) = match a.kind {
                        TAtomKind::Int(i) => (Kind::Int, i as u64),
                        TAtomKind::Float(x) => (Kind::Float, float_bits(x)),
                        TAtomKind::Bool(b) => (Kind::Bool, u64::from(b)),
                        _ => return None,
                    };
                    if kind.is_some_and(|kind| kind != k) {
                        return None;
                    }
                    kind = Some(k);
                    regs.push(self.constant(bits)?);
                }
                Some(CVal::Arr {
                    kind: kind?,
                    shape: shape.iter().map(|d| *d as usize).collect(),
                    regs,
                })
            }
            TExprKind::Frame { shape, elems } => {
                let mut cell: Option<(Kind, Vec<usize>)> = None;
                let mut regs = Vec::new();
                for x in elems {
                    let v = self.expr(x, env)?;
                    let (k, s, r) = self.regs(v)?;
                    match &cell {
                        Some((k0, s0)) if *k0 != k || *s0 != s => return None,
                        _ => cell = Some((k, s)),
                    }
                    regs.extend(r);
                }
                let (kind, cell) = cell?;
                Some(CVal::Arr {
                    kind,
                    shape: shape.iter().map(|d| *d as usize).chain(cell).collect(),
                    regs,
                })
            }
            TExprKind::Var(v) => self.lookup(*v, env),
            TExprKind::Intrinsic("pi") => Some(CVal::Arr {
                kind: Kind::Float,
                shape: Vec::new(),
                regs: vec![self.constant(float_bits(std::f32::consts::PI))?],
            }),
            TExprKind::Intrinsic(name) => Some(CVal::Prim(name)),
            TExprKind::TApp { func, arg } => match self.expr(func, env)? {
                CVal::Prim(name) => Some(CVal::Prim(name)),
                CVal::Generic(Fun::TLambda {
                    param,
                    body,
                    env: fenv,
                }) => {
                    let env = fenv.with(Binding::Type(param, env.atom_type(arg)));
                    self.inlined(|c| c.expr(body, &env))
                }
                _ => None,
            },
            TExprKind::IApp { func, arg } => match self.expr(func, env)? {
                CVal::Prim(name) => Some(CVal::Prim(name)),
                CVal::Generic(Fun::ILambda {
                    param,
                    body,
                    env: fenv,
                }) => {
                    let i = self.it.index_val(arg, env, e.span).ok()?;
                    let env = fenv.bind_index(param, &i);
                    self.inlined(|c| c.expr(body, &env))
                }
                _ => None,
            },
            TExprKind::App { .. } => {
                let (head, spine) = e.spine();
                let f = self.expr(head, env)?;
                let mut args = Vec::with_capacity(spine.len());
                for (a, lifted) in spine {
                    let v = self.expr(a, env)?;
                    let cell = self.it.shape_of(&lifted.arg_cell, env, a.span).ok()?;
                    args.push((v, cell));
                }
                self.apply(f, args, e.span)
            }
            TExprKind::Let { var, value, body } => {
                let v = self.expr(value, env)?;
                self.locals.push((*var, v));
                let r = self.expr(body, env);
                self.locals.pop();
                r
            }
            TExprKind::If {
                cond,
                then,
                otherwise,
            } => {
                let c = self.expr(cond, env)?;
                let (Kind::Bool, _, c) = self.regs(c)? else {
                    return None;
                };
                let [c] = c.as_slice() else {
                    return None;
                };
                if let Some(b) = self.known(*c) {
                    return self.expr(if b != 0 { then } else { otherwise }, env);
                }
                // Both branches straight code that cannot fault: both
                // computed and each result register chosen (`Select`), so
                // the program stays straight (`Lanes` runs it over blocks
                // of items). Else, or after too many tries, a branch.
                if self.speculations < MAX_SPECULATIONS {
                    let start = self.code.len();
                    if let Some(out) = self.straight_if(*c, then, otherwise, env) {
                        return Some(out);
                    }
                    self.speculations += 1;
                    self.code.truncate(start);
                }
                let skip = self.here()?;
                self.emit(Ins::JumpUnless(*c, 0))?;
                let yes = self.expr(then, env)?;
                let out = self.fresh_like(&yes)?;
                self.copy_into(&out, yes)?;
                let done = self.here()?;
                self.emit(Ins::Jump(0))?;
                let no_start = self.here()?;
                *self.code.get_mut(skip as usize)? = Ins::JumpUnless(*c, no_start);
                let no = self.expr(otherwise, env)?;
                self.copy_into(&out, no)?;
                let end = self.here()?;
                *self.code.get_mut(done as usize)? = Ins::Jump(end);
                Some(out)
            }
            // One record (a frame of them gives up), each field's value
            // a cell of the field's shape.
            TExprKind::Record(fields) => {
                if !self.it.shape_of(&e.ty.shape, env, e.span).ok()?.is_empty() {
                    return None;
                }
                let TyAtom::Record(cell_tys) = &e.ty.atom else {
                    return None;
                };
                let mut out = Vec::with_capacity(fields.len());
                for ((name, x), (_, cty)) in fields.iter().zip(cell_tys.iter()) {
                    let v = self.expr(x, env)?;
                    let cell = self.it.shape_of(&cty.shape, env, x.span).ok()?;
                    if v.shape()? != cell.as_slice() {
                        return None;
                    }
                    out.push((name.clone(), v));
                }
                Some(CVal::Rec(out))
            }
            TExprKind::Field { record, field } => match self.expr(record, env)? {
                CVal::Rec(fields) => fields.into_iter().find(|(n, _)| n == field).map(|(_, v)| v),
                _ => None,
            },
            TExprKind::Unbox { .. } => None,
        }
    }

    /// `(if c then otherwise)` as straight code: both branches, then a
    /// `Select` per register; `None` (the code emitted left for the
    /// caller to cut) when either branch jumps or may fault.
    fn straight_if(
        &mut self,
        c: u32,
        then: &'p TExpr,
        otherwise: &'p TExpr,
        env: &Env<'p>,
    ) -> Option<CVal<'p>> {
        let start = self.code.len();
        let yes = self.expr(then, env)?;
        let out = self.fresh_like(&yes)?;
        let ry = self.conform(&out, yes)?;
        let no = self.expr(otherwise, env)?;
        let rn = self.conform(&out, no)?;
        if !self.code.get(start..)?.iter().all(Ins::straight_and_total) {
            return None;
        }
        for ((d, y), n) in flat(&out)?.into_iter().zip(ry).zip(rn) {
            self.emit(Ins::Select(d, c, y, n))?;
        }
        Some(out)
    }

    /// `f` one call deeper (inlining is bounded).
    fn inlined<T>(&mut self, f: impl FnOnce(&mut Self) -> Option<T>) -> Option<T> {
        if self.depth >= MAX_DEPTH {
            return None;
        }
        self.depth += 1;
        let r = f(self);
        self.depth -= 1;
        r
    }

    /// `(f a1 … ak)`, each argument with the cell shape the function
    /// takes: lifted over the principal frame, one position at a time.
    fn apply(&mut self, f: CVal<'p>, args: Vec<(CVal<'p>, Vec<usize>)>, span: Span) -> Option<CVal<'p>> {
        let cells: Vec<Vec<usize>> = match &f {
            // A scalar primitive's cells are atoms, whatever the checker
            // wrote for an operand of a type variable's shape.
            CVal::Prim(name) if crate::scalar::is_scalar_primitive(name) => vec![Vec::new(); args.len()],
            _ => args.iter().map(|(_, c)| c.clone()).collect(),
        };
        let mut frames = Vec::with_capacity(args.len());
        for ((a, _), cell) in args.iter().zip(&cells) {
            match a.shape() {
                Some(s) => {
                    let k = s.len().checked_sub(cell.len())?;
                    if s.get(k..)? != cell.as_slice() {
                        return None;
                    }
                    frames.push(s.get(..k)?.to_vec());
                }
                // A function argument: no frame.
                None if cell.is_empty() => frames.push(Vec::new()),
                None => return None,
            }
        }
        let principal = frames.iter().max_by_key(|f| f.len()).cloned().unwrap_or_default();
        if frames.iter().any(|f| !principal.starts_with(f)) {
            return None;
        }
        let positions = atoms_in(&principal);
        if principal.is_empty() {
            let args = args.into_iter().map(|(a, _)| a).collect();
            return self.call(f, args, span);
        }
        if positions > MAX_ATOMS {
            return None;
        }
        let mut out: Option<(Kind, Vec<usize>)> = None;
        let mut regs = Vec::new();
        for p in 0..positions {
            let mut at = Vec::with_capacity(args.len());
            for (((a, _), cell), frame) in args.iter().zip(&cells).zip(&frames) {
                let inner = atoms_in(principal.get(frame.len()..)?);
                at.push(cell_at(a, cell, p / inner)?);
            }
            let r = self.call(f.clone(), at, span)?;
            let (k, s, r) = self.regs(r)?;
            match &out {
                Some((k0, s0)) if *k0 != k || *s0 != s => return None,
                _ => out = Some((k, s)),
            }
            regs.extend(r);
        }
        let (kind, cell) = out?;
        Some(CVal::Arr {
            kind,
            shape: principal.into_iter().chain(cell).collect(),
            regs,
        })
    }

    /// `f` applied to one cell of each argument.
    fn call(&mut self, f: CVal<'p>, args: Vec<CVal<'p>>, span: Span) -> Option<CVal<'p>> {
        match f {
            CVal::Prim(name) => self.intrinsic(name, args, span),
            CVal::Lambda { .. } => {
                let mut f = f;
                for a in args {
                    let CVal::Lambda {
                        param,
                        body,
                        env,
                        locals,
                    } = f
                    else {
                        return None;
                    };
                    let saved = std::mem::replace(&mut self.locals, (*locals).clone());
                    self.locals.push((param, a));
                    let r = self.inlined(|c| c.expr(body, &env));
                    self.locals = saved;
                    f = r?;
                }
                Some(f)
            }
            _ => None,
        }
    }

    /// An intrinsic on one cell of each argument.
    fn intrinsic(&mut self, name: &'static str, args: Vec<CVal<'p>>, span: Span) -> Option<CVal<'p>> {
        if let Some(op) = atom_op(name) {
            let fast = Fast::of(name);
            return self.scalar(op, fast, args);
        }
        match (name, args.as_slice()) {
            ("clip" | "f.clip", [_, _, _]) => {
                let (max, min) = if name == "clip" {
                    ("max", "min")
                } else {
                    ("f.max", "f.min")
                };
                let [lo, hi, x] = <[CVal<'p>; 3]>::try_from(args).ok()?;
                let low = self.scalar(atom_op(max)?, None, vec![x, lo])?;
                self.scalar(atom_op(min)?, None, vec![low, hi])
            }
            ("index" | "nth", [_, _]) => {
                let [xs, i] = <[CVal<'p>; 2]>::try_from(args).ok()?;
                self.item(xs, i)
            }
            ("head" | "last" | "tail" | "curtail" | "reverse", [xs]) => {
                let d = *xs.shape()?.first()?;
                let picks: Vec<usize> = match name {
                    "head" => vec![0],
                    "last" => vec![d.checked_sub(1)?],
                    "tail" => (1..d).collect(),
                    "curtail" => (0..d.checked_sub(1)?).collect(),
                    _ => (0..d).rev().collect(),
                };
                let (kind, shape, regs) = self.regs(xs.clone())?;
                let size = atoms_in(shape.get(1..)?);
                let regs = picks
                    .iter()
                    .map(|&k| regs.get(k * size..(k + 1) * size))
                    .collect::<Option<Vec<_>>>()?
                    .concat();
                let lead = (!matches!(name, "head" | "last")).then_some(picks.len());
                Some(CVal::Arr {
                    kind,
                    shape: lead.into_iter().chain(shape.get(1..)?.iter().copied()).collect(),
                    regs,
                })
            }
            ("append", [_, _]) => {
                let [a, b] = <[CVal<'p>; 2]>::try_from(args).ok()?;
                let ((ka, sa, ra), (kb, sb, rb)) = (self.regs(a)?, self.regs(b)?);
                if ka != kb || sa.get(1..) != sb.get(1..) {
                    return None;
                }
                let shape = std::iter::once(sa.first()? + sb.first()?)
                    .chain(sa.get(1..)?.iter().copied())
                    .collect();
                Some(CVal::Arr {
                    kind: ka,
                    shape,
                    regs: [ra, rb].concat(),
                })
            }
            ("length", [xs]) => {
                let d = *xs.shape()?.first()?;
                Some(CVal::Arr {
                    kind: Kind::Int,
                    shape: Vec::new(),
                    regs: vec![self.constant(d as u64)?],
                })
            }
            ("select", [_, _, _]) => {
                let [c, a, b] = <[CVal<'p>; 3]>::try_from(args).ok()?;
                let (Kind::Bool, _, c) = self.regs(c)? else {
                    return None;
                };
                let [c] = c.as_slice() else {
                    return None;
                };
                // Arrays or records alike, register by register.
                let out = self.fresh_like(&a)?;
                let (ra, rb) = (self.conform(&out, a)?, self.conform(&out, b)?);
                match self.known(*c) {
                    Some(0) => with_regs(&out, &mut rb.into_iter()),
                    Some(_) => with_regs(&out, &mut ra.into_iter()),
                    None => {
                        for ((d, y), n) in flat(&out)?.into_iter().zip(ra).zip(rb) {
                            self.emit(Ins::Select(d, *c, y, n))?;
                        }
                        Some(out)
                    }
                }
            }
            ("reduce" | "fold", _) => {
                let mut args = args.into_iter();
                let op = args.next()?;
                let (mut acc, xs) = match name {
                    "fold" => (Some(args.next()?), args.next()?),
                    _ => (None, args.next()?),
                };
                let (kind, shape, regs) = self.regs(xs)?;
                let d = *shape.first()?;
                let item_shape = shape.get(1..)?.to_vec();
                let size = atoms_in(&item_shape);
                for k in 0..d {
                    let x = CVal::Arr {
                        kind,
                        shape: item_shape.clone(),
                        regs: regs.get(k * size..(k + 1) * size)?.to_vec(),
                    };
                    acc = Some(match acc {
                        None => x,
                        Some(a) => {
                            let cell = a.shape()?.to_vec();
                            self.apply(op.clone(), vec![(a, cell), (x, item_shape.clone())], span)?
                        }
                    });
                }
                acc
            }
            _ => None,
        }
    }

    /// A scalar primitive on atoms.
    fn scalar(&mut self, op: AtomOp, fast: Option<Fast>, args: Vec<CVal<'p>>) -> Option<CVal<'p>> {
        use AtomOp::*;
        let mut operands = Vec::with_capacity(args.len());
        for a in args {
            let (k, s, r) = self.regs(a)?;
            let [r] = r.as_slice() else {
                return None;
            };
            if !s.is_empty() {
                return None;
            }
            operands.push((k, *r));
        }
        let (takes, gives): (&[Kind], Kind) = match op {
            Ff(_) => (&[Kind::Float], Kind::Float),
            Ii(_) => (&[Kind::Int], Kind::Int),
            Bb(_) => (&[Kind::Bool], Kind::Bool),
            If(_) => (&[Kind::Int], Kind::Float),
            Fi(_) => (&[Kind::Float], Kind::Int),
            Ib(_) => (&[Kind::Int], Kind::Bool),
            Bi(_) => (&[Kind::Bool], Kind::Int),
            Bf(_) => (&[Kind::Bool], Kind::Float),
            Fb(_) => (&[Kind::Float], Kind::Bool),
            Fff(_) => (&[Kind::Float, Kind::Float], Kind::Float),
            Iii(_) | IiiFaulty(_) => (&[Kind::Int, Kind::Int], Kind::Int),
            Ffb(_) => (&[Kind::Float, Kind::Float], Kind::Bool),
            Iib(_) => (&[Kind::Int, Kind::Int], Kind::Bool),
            Bbb(_) => (&[Kind::Bool, Kind::Bool], Kind::Bool),
            Iif(_) => (&[Kind::Int, Kind::Int], Kind::Float),
        };
        if operands.len() != takes.len() || operands.iter().zip(takes).any(|((k, _), t)| k != t) {
            return None;
        }
        let d = self.reg()?;
        match operands.as_slice() {
            [(_, a)] => self.emit(Ins::Op1(op, d, *a))?,
            [(_, a), (_, b)] => match fast {
                Some(fast) => self.emit(Ins::Fast(fast, d, *a, *b))?,
                None => self.emit(Ins::Op2(op, d, *a, *b))?,
            },
            _ => return None,
        }
        Some(CVal::Arr {
            kind: gives,
            shape: Vec::new(),
            regs: vec![d],
        })
    }

    /// Item `i` of `xs` (`index`, `nth`).
    fn item(&mut self, xs: CVal<'p>, i: CVal<'p>) -> Option<CVal<'p>> {
        let (Kind::Int, _, i) = self.regs(i)? else {
            return None;
        };
        let [i] = i.as_slice() else {
            return None;
        };
        let shape = xs.shape()?.to_vec();
        let d = *shape.first()?;
        let item_shape = shape.get(1..)?.to_vec();
        let size = atoms_in(&item_shape);
        let known = self.known(*i).map(|k| k as i64);
        if let Some(k) = known {
            // Out of range: the reference reports it.
            let k = usize::try_from(k).ok().filter(|k| *k < d)?;
            return cell_at(&xs, &item_shape, k);
        }
        match xs {
            CVal::Ext {
                kind, ext, at, skip, ..
            } => {
                let dst = self.reg()?;
                self.emit(Ins::Offset {
                    dst,
                    base: at,
                    idx: *i,
                    bound: d as u64,
                    stride: size as u64,
                })?;
                Some(CVal::Ext {
                    kind,
                    shape: item_shape,
                    ext,
                    at: Some(dst),
                    skip,
                })
            }
            CVal::Arr { kind, regs, .. } => {
                let mut out = Vec::with_capacity(size);
                for k in 0..size {
                    let srcs: Box<[u32]> = (0..d)
                        .map(|j| regs.get(j * size + k).copied())
                        .collect::<Option<_>>()?;
                    let dst = self.reg()?;
                    self.emit(Ins::Pick { dst, idx: *i, srcs })?;
                    out.push(dst);
                }
                Some(CVal::Arr {
                    kind,
                    shape: item_shape,
                    regs: out,
                })
            }
            _ => None,
        }
    }
}

/// The registers of a value in registers (an array, or a record's fields
/// one after another).
fn flat(v: &CVal<'_>) -> Option<Vec<u32>> {
    match v {
        CVal::Arr { regs, .. } => Some(regs.clone()),
        CVal::Rec(fields) => Some(
            fields
                .iter()
                .map(|(_, f)| flat(f))
                .collect::<Option<Vec<_>>>()?
                .concat(),
        ),
        _ => None,
    }
}

/// Record `o` of `r` as registers' bits, appended to `out` (fields in
/// order, as [`Compiler::record`] lays them out).
fn record_bits<F>(r: &Records<F>, o: usize, out: &mut Vec<u64>) -> Option<()> {
    for f in &r.fields {
        match &f.data {
            Data::Records(inner) if f.cell.is_empty() => record_bits(inner, o, out)?,
            d => {
                let size = f.size();
                for k in 0..size {
                    out.push(bits_at(d, o * size + k)?);
                }
            }
        }
    }
    Some(())
}

/// `like` (an array or a record in registers) with its registers, in
/// order, taken from `regs` instead.
fn with_regs<'p>(like: &CVal<'p>, regs: &mut impl Iterator<Item = u32>) -> Option<CVal<'p>> {
    match like {
        CVal::Arr { kind, shape, regs: r } => Some(CVal::Arr {
            kind: *kind,
            shape: shape.clone(),
            regs: regs.take(r.len()).collect(),
        }),
        CVal::Rec(fields) => Some(CVal::Rec(
            fields
                .iter()
                .map(|(n, f)| Some((n.clone(), with_regs(f, regs)?)))
                .collect::<Option<Vec<_>>>()?,
        )),
        _ => None,
    }
}

/// Records (`count` of them) laid out as `like` lays out one, from
/// registers' bits, `stride` a record.
fn records_of<'p>(
    like: &CVal<'_>,
    bits: &[u64],
    count: usize,
    stride: usize,
    at: &mut usize,
) -> Option<Data<Fun<'p>>> {
    match like {
        CVal::Arr { kind, regs, .. } => {
            let n = regs.len();
            fn words<U: Bits>(bits: &[u64], count: usize, stride: usize, at: usize, n: usize) -> Vec<U> {
                let mut out = Vec::with_capacity(count * n);
                for p in 0..count {
                    let from = p * stride + at;
                    out.extend(
                        bits.get(from..from + n)
                            .unwrap_or_default()
                            .iter()
                            .map(|&b| U::of_bits(b)),
                    );
                }
                out
            }
            let data = match kind {
                Kind::Int => Data::Int(words::<i64>(bits, count, stride, *at, n).into()),
                Kind::Float => Data::Float(words::<f32>(bits, count, stride, *at, n).into()),
                Kind::Bool => Data::Bool(words::<bool>(bits, count, stride, *at, n).into()),
            };
            *at += n;
            (data.len() == count * n).then_some(data)
        }
        CVal::Rec(fields) => {
            let mut out = Vec::with_capacity(fields.len());
            for (name, f) in fields {
                out.push(RecordField {
                    name: name.clone(),
                    cell: f.shape()?.to_vec(),
                    data: records_of(f, bits, count, stride, at)?,
                });
            }
            Some(Data::records(Records { count, fields: out }))
        }
        _ => None,
    }
}

/// Cell `k` (of shape `cell`) of a value in registers or outside.
fn cell_at<'p>(a: &CVal<'p>, cell: &[usize], k: usize) -> Option<CVal<'p>> {
    let size = atoms_in(cell);
    match a {
        CVal::Arr { kind, regs, .. } => Some(CVal::Arr {
            kind: *kind,
            shape: cell.to_vec(),
            regs: regs.get(k * size..(k + 1) * size)?.to_vec(),
        }),
        CVal::Ext {
            kind, ext, at, skip, ..
        } => Some(CVal::Ext {
            kind: *kind,
            shape: cell.to_vec(),
            ext: *ext,
            at: *at,
            skip: skip + k * size,
        }),
        other if k == 0 => Some(other.clone()),
        _ => None,
    }
}

impl Program {
    /// Runs the program on `regs` (a copy of `init` with the parameters
    /// set); `None` on a fault.
    fn run(&self, regs: &mut [u64]) -> Option<()> {
        self.run_part(regs, 0..self.code.len())
    }

    /// Runs the code in `part` (whose jumps stay inside it or go to its
    /// end).
    fn run_part(&self, regs: &mut [u64], part: std::ops::Range<usize>) -> Option<()> {
        use AtomOp::*;
        let mut pc = part.start;
        while let Some(ins) = self.code.get(pc).filter(|_| pc < part.end) {
            pc += 1;
            match ins {
                Ins::Fast(op, d, a, b) => {
                    regs[*d as usize] = op.apply(regs[*a as usize], regs[*b as usize]);
                }
                Ins::Op2(op, d, a, b) => {
                    let (a, b) = (regs[*a as usize], regs[*b as usize]);
                    regs[*d as usize] = match op {
                        Fff(f) => float_bits(f(float(a), float(b))),
                        Iii(f) => f(a as i64, b as i64) as u64,
                        IiiFaulty(f) => f(a as i64, b as i64).ok()? as u64,
                        Ffb(f) => u64::from(f(float(a), float(b))),
                        Iib(f) => u64::from(f(a as i64, b as i64)),
                        Bbb(f) => u64::from(f(a != 0, b != 0)),
                        Iif(f) => float_bits(f(a as i64, b as i64)),
                        _ => return None,
                    };
                }
                Ins::Op1(op, d, a) => {
                    let a = regs[*a as usize];
                    regs[*d as usize] = match op {
                        Ff(f) => float_bits(f(float(a))),
                        Ii(f) => f(a as i64) as u64,
                        Bb(f) => u64::from(f(a != 0)),
                        If(f) => float_bits(f(a as i64)),
                        Fi(f) => f(float(a)) as u64,
                        Ib(f) => u64::from(f(a as i64)),
                        Bi(f) => f(a != 0) as u64,
                        Bf(f) => float_bits(f(a != 0)),
                        Fb(f) => u64::from(f(float(a))),
                        _ => return None,
                    };
                }
                Ins::Move(d, s) => regs[*d as usize] = regs[*s as usize],
                Ins::Select(d, c, y, n) => {
                    regs[*d as usize] = if regs[*c as usize] != 0 {
                        regs[*y as usize]
                    } else {
                        regs[*n as usize]
                    };
                }
                Ins::Jump(t) => pc = *t as usize,
                Ins::JumpUnless(c, t) => {
                    if regs[*c as usize] == 0 {
                        pc = *t as usize;
                    }
                }
                Ins::Pick { dst, idx, srcs } => {
                    let k = usize::try_from(regs[*idx as usize] as i64).ok()?;
                    regs[*dst as usize] = regs[*srcs.get(k)? as usize];
                }
                Ins::Offset {
                    dst,
                    base,
                    idx,
                    bound,
                    stride,
                } => {
                    let k = regs[*idx as usize];
                    if k >= *bound {
                        // (A negative index is a large unsigned one.)
                        return None;
                    }
                    let base = base.map_or(0, |b| regs[b as usize]);
                    regs[*dst as usize] = base + k * stride;
                }
                Ins::Load {
                    dst,
                    ext,
                    at,
                    skip,
                    count,
                } => {
                    let from = usize::try_from(regs[*at as usize] + skip).ok()?;
                    let data = self.exts.get(*ext as usize)?;
                    for k in 0..*count as usize {
                        regs[*dst as usize + k] = bits_at(data, from + k)?;
                    }
                }
            }
        }
        Some(())
    }
}

/// Items a block of lanes holds.
const BLOCK: usize = 256;

/// An instruction over lanes (registers renumbered to lane slots, each a
/// block of items' values).
#[derive(Clone, Debug)]
enum LaneIns {
    Op1(AtomOp, usize, usize),
    Op2(AtomOp, usize, usize, usize),
    Fast(Fast, usize, usize, usize),
    Move(usize, usize),
    Select(usize, usize, usize, usize),
    Pick {
        dst: usize,
        idx: usize,
        srcs: Box<[usize]>,
    },
    Offset {
        dst: usize,
        base: Option<usize>,
        idx: usize,
        bound: u64,
        stride: u64,
    },
    /// One atom: `dst ← ext[at + skip]`.
    Load {
        dst: usize,
        ext: u32,
        at: usize,
        skip: u64,
    },
}

fn map1(out: &mut [u64], a: &[u64], f: impl Fn(u64) -> u64) {
    for (o, &x) in out.iter_mut().zip(a) {
        *o = f(x);
    }
}

fn map2(out: &mut [u64], a: &[u64], b: &[u64], f: impl Fn(u64, u64) -> u64) {
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = f(x, y);
    }
}

/// A comparison of two lanes, each operand's bits read by `of`.
#[inline(always)]
fn compare_lanes<T: PartialOrd>(c: Cmp, out: &mut [u64], a: &[u64], b: &[u64], of: impl Fn(u64) -> T + Copy) {
    match c {
        Cmp::Eq => map2(out, a, b, |x, y| u64::from(of(x) == of(y))),
        Cmp::Ne => map2(out, a, b, |x, y| u64::from(of(x) != of(y))),
        Cmp::Lt => map2(out, a, b, |x, y| u64::from(of(x) < of(y))),
        Cmp::Gt => map2(out, a, b, |x, y| u64::from(of(x) > of(y))),
        Cmp::Le => map2(out, a, b, |x, y| u64::from(of(x) <= of(y))),
        Cmp::Ge => map2(out, a, b, |x, y| u64::from(of(x) >= of(y))),
    }
}

/// Each lane's atom of `data` at its position `at + skip`, as bits;
/// `None` past the end.
#[inline(always)]
fn load_lanes<T>(out: &mut [u64], at: &[u64], skip: u64, data: &[T], bits: impl Fn(&T) -> u64) -> Option<()> {
    for (o, &a) in out.iter_mut().zip(at) {
        *o = bits(data.get(usize::try_from(a.wrapping_add(skip)).ok()?)?);
    }
    Some(())
}

/// A straight program (no jumps, each register written once) split for
/// running over blocks of items: the instructions that read no carried
/// register (the accumulator's, nor one computed from it) — the item's
/// own work, a map's included — run one instruction at a time over a
/// block of items held in lanes (`hoisted`: one dispatch per instruction
/// per block); the rest run item by item, in order (`serial`), reading
/// the lanes' values they need. Each item gets the same operations on
/// the same bits as the program run item by item.
struct Lanes {
    hoisted: Vec<LaneIns>,
    serial: Program,
    /// The slot of each input register, in the order given.
    inputs: Vec<usize>,
    /// Lane registers the serial code or the results read: (register,
    /// slot), set in the register file before each item's serial code.
    reads: Vec<(u32, usize)>,
    /// Slots of constants the hoisted code reads, and their bits.
    consts: Vec<(usize, u64)>,
    slots: usize,
    /// The serial code as one recurrence per state register, run
    /// natively, when it is one.
    native: Option<Vec<Recurrence>>,
}

impl Lanes {
    /// The split of `program`, whose `inputs` are set for each item,
    /// `carried` hold the state from the item before, and `results` are
    /// read after each item. `None` when the program jumps, writes a
    /// register twice (or an input or carried one, or one it read
    /// before), or nothing is left to hoist.
    fn new(program: &Program, inputs: &[u32], carried: &[u32], results: &[u32]) -> Option<Lanes> {
        let n = program.init.len();
        // 0: not yet written; 1: a lane's; 2: carried (serial).
        let mut class = vec![0u8; n];
        let mut slot: Vec<Option<usize>> = vec![None; n];
        let mut read = vec![false; n];
        let mut written = vec![false; n];
        let mut slots = 0;
        let mut consts = Vec::new();
        for &r in inputs {
            let r = r as usize;
            if *class.get(r)? != 0 {
                return None;
            }
            class[r] = 1;
            slot[r] = Some(slots);
            written[r] = true;
            slots += 1;
        }
        for &r in carried {
            if *class.get(r as usize)? != 0 {
                return None;
            }
            class[r as usize] = 2;
            written[r as usize] = true;
        }
        let mut hoisted = Vec::new();
        let mut serial = Vec::new();
        for ins in &program.code {
            if matches!(ins, Ins::Jump(_) | Ins::JumpUnless(..)) {
                return None;
            }
            let reads = ins.reads();
            for &r in &reads {
                *read.get_mut(r as usize)? = true;
            }
            for r in ins.writes() {
                let r = r as usize;
                if *written.get(r)? || *read.get(r)? {
                    return None;
                }
                written[r] = true;
            }
            if reads.iter().any(|&r| class[r as usize] == 2) {
                for r in ins.writes() {
                    class[r as usize] = 2;
                }
                serial.push(ins.clone());
                continue;
            }
            let mut at = |r: u32| -> Option<usize> {
                let r = r as usize;
                if let Some(s) = slot[r] {
                    return Some(s);
                }
                // Read before any write: a constant.
                let s = slots;
                slots += 1;
                slot[r] = Some(s);
                consts.push((s, *program.init.get(r)?));
                Some(s)
            };
            let lane = match ins {
                Ins::Op1(op, _, a) => LaneIns::Op1(*op, 0, at(*a)?),
                Ins::Op2(op, _, a, b) => LaneIns::Op2(*op, 0, at(*a)?, at(*b)?),
                Ins::Fast(op, _, a, b) => LaneIns::Fast(*op, 0, at(*a)?, at(*b)?),
                Ins::Move(_, a) => LaneIns::Move(0, at(*a)?),
                Ins::Select(_, c, y, n) => LaneIns::Select(0, at(*c)?, at(*y)?, at(*n)?),
                Ins::Pick { idx, srcs, .. } => LaneIns::Pick {
                    dst: 0,
                    idx: at(*idx)?,
                    srcs: srcs.iter().map(|&r| at(r)).collect::<Option<_>>()?,
                },
                Ins::Offset {
                    base,
                    idx,
                    bound,
                    stride,
                    ..
                } => LaneIns::Offset {
                    dst: 0,
                    base: match base {
                        Some(b) => Some(at(*b)?),
                        None => None,
                    },
                    idx: at(*idx)?,
                    bound: *bound,
                    stride: *stride,
                },
                Ins::Load { ext, at: a, skip, .. } => LaneIns::Load {
                    dst: 0,
                    ext: *ext,
                    at: at(*a)?,
                    skip: *skip,
                },
                Ins::Jump(_) | Ins::JumpUnless(..) => return None,
            };
            // The written registers' slots (a load's atoms one each).
            for (k, r) in ins.writes().enumerate() {
                let r = r as usize;
                class[r] = 1;
                slot[r] = Some(slots);
                let mut one = match (&lane, k) {
                    (LaneIns::Load { ext, at, skip, .. }, k) => LaneIns::Load {
                        dst: 0,
                        ext: *ext,
                        at: *at,
                        skip: skip + k as u64,
                    },
                    _ => lane.clone(),
                };
                set_dst(&mut one, slots);
                slots += 1;
                hoisted.push(one);
            }
        }
        let native = {
            let mut operand = |r: u32| -> Option<usize> {
                match class.get(r as usize)? {
                    1 => slot[r as usize],
                    // Never written: a constant, given a lane.
                    0 => {
                        if let Some(s) = slot[r as usize] {
                            return Some(s);
                        }
                        let s = slots;
                        slots += 1;
                        slot[r as usize] = Some(s);
                        consts.push((s, *program.init.get(r as usize)?));
                        Some(s)
                    }
                    _ => None,
                }
            };
            recurrences(&serial, carried, results, &mut operand)
        };
        if hoisted.is_empty() && native.is_none() {
            return None;
        }
        // The lane registers the serial code and the results read.
        let mut reads = Vec::new();
        for r in serial.iter().flat_map(Ins::reads).chain(results.iter().copied()) {
            if class.get(r as usize) == Some(&1)
                && let Some(s) = slot[r as usize]
                && !reads.contains(&(r, s))
            {
                reads.push((r, s));
            }
        }
        Some(Lanes {
            hoisted,
            serial: Program {
                code: serial,
                init: program.init.clone(),
                exts: program.exts.clone(),
            },
            inputs: inputs.iter().map(|&r| slot[r as usize]).collect::<Option<_>>()?,
            reads,
            consts,
            slots,
            native,
        })
    }

    /// The state registers `acc` stepped through the `n` items of a
    /// block (the hoisted code run): natively when the serial code is
    /// recurrences, else item by item, each item's `result` copied to
    /// `acc`; the parts `keep` of every state (indices into `acc`) kept
    /// in `out` when given (a scan), or of only those its mask flags (one
    /// flag per item of the block). Natively, a state `keep` does not
    /// name is dead (each recurrence reads only its own state): not
    /// stepped at all.
    #[allow(clippy::too_many_arguments)]
    fn block<U: Bits>(
        &self,
        regs: &mut [u64],
        lanes: &[Vec<u64>],
        n: usize,
        acc: &[u32],
        result: &[u32],
        keep: &[usize],
        out: Option<(&mut Vec<U>, Option<&[bool]>)>,
    ) -> Option<()> {
        if let Some(recs) = &self.native {
            // Each recurrence's lanes resolved once for the block. The
            // recurrences read only their own state and the lanes, so each
            // is swept through the block on its own, in a loop made for
            // its form (no dispatch per item), into its own block of
            // states: the same operations in the same order.
            let mut swept: Vec<[u64; BLOCK]> = Vec::with_capacity(recs.len());
            let mut which = vec![usize::MAX; recs.len()];
            for (k, (rec, &a)) in recs.iter().zip(acc).enumerate() {
                if !keep.contains(&k) {
                    continue;
                }
                let rec = rec.resolve(lanes, n)?;
                let state = regs.get_mut(a as usize)?;
                let mut dst = [0u64; BLOCK];
                *state = rec.sweep(*state, dst.get_mut(..n)?);
                which[k] = swept.len();
                swept.push(dst);
            }
            // The kept parts, item by item (each item's parts together),
            // appended straight from the swept blocks.
            let Some((out, mask)) = out else {
                return Some(());
            };
            let parts: Vec<&[u64]> = keep
                .iter()
                .map(|&k| swept.get(*which.get(k)?)?.get(..n))
                .collect::<Option<_>>()?;
            match (parts.as_slice(), mask) {
                ([one], None) => out.extend(one.iter().map(|&b| U::of_bits(b))),
                ([one], Some(mask)) => out.extend(
                    one.iter()
                        .zip(mask)
                        .filter(|(_, k)| **k)
                        .map(|(&b, _)| U::of_bits(b)),
                ),
                (parts, mask) => {
                    for i in 0..n {
                        if mask.is_none_or(|m| m.get(i) == Some(&true)) {
                            out.extend(parts.iter().map(|p| U::of_bits(p[i])));
                        }
                    }
                }
            }
            return Some(());
        }
        let mut out = out;
        for i in 0..n {
            self.step(regs, lanes, i)?;
            for (&a, &r) in acc.iter().zip(result) {
                regs[a as usize] = regs[r as usize];
            }
            if let Some((out, mask)) = out.as_mut()
                && mask.is_none_or(|m| m.get(i) == Some(&true))
            {
                for &j in keep {
                    out.push(U::of_bits(regs[*acc.get(j)? as usize]));
                }
            }
        }
        Some(())
    }

    /// The lanes (`slots` blocks), the constants' filled in.
    fn lanes(&self) -> Vec<Vec<u64>> {
        let mut lanes = vec![vec![0u64; BLOCK]; self.slots];
        for &(s, bits) in &self.consts {
            if let Some(l) = lanes.get_mut(s) {
                l.fill(bits);
            }
        }
        lanes
    }

    /// The hoisted code over the first `n` lanes (inputs set); `None` on
    /// a fault.
    fn hoist(&self, lanes: &mut [Vec<u64>], n: usize) -> Option<()> {
        run_lanes(&self.hoisted, &self.serial.exts, lanes, n)
    }

    /// Item `i`'s serial code, its lanes' values it reads set first.
    fn step(&self, regs: &mut [u64], lanes: &[Vec<u64>], i: usize) -> Option<()> {
        for &(r, s) in &self.reads {
            *regs.get_mut(r as usize)? = *lanes.get(s)?.get(i)?;
        }
        self.serial.run(regs)
    }
}

/// Straight lane code run over the first `n` lanes of each slot, one
/// instruction at a time over all of them; `None` on a fault (or an
/// instruction writing a slot it reads).
fn run_lanes(code: &[LaneIns], exts: &[Data], lanes: &mut [Vec<u64>], n: usize) -> Option<()> {
    {
        use AtomOp::*;
        for ins in code {
            let d = lane_dst(ins);
            let mut out = std::mem::take(lanes.get_mut(d)?);
            let o = out.get_mut(..n)?;
            let l = |s: usize| lanes.get(s).and_then(|l| l.get(..n));
            match ins {
                LaneIns::Fast(op, _, a, b) => {
                    let (a, b) = (l(*a)?, l(*b)?);
                    match op {
                        Fast::FAdd => map2(o, a, b, |x, y| Fast::FAdd.apply(x, y)),
                        Fast::FSub => map2(o, a, b, |x, y| Fast::FSub.apply(x, y)),
                        Fast::FMul => map2(o, a, b, |x, y| Fast::FMul.apply(x, y)),
                        Fast::IAdd => map2(o, a, b, |x, y| Fast::IAdd.apply(x, y)),
                        Fast::ISub => map2(o, a, b, |x, y| Fast::ISub.apply(x, y)),
                        Fast::IMul => map2(o, a, b, |x, y| Fast::IMul.apply(x, y)),
                        // Each comparison its own loop (no dispatch per lane).
                        Fast::FCmp(c) => compare_lanes(*c, o, a, b, float),
                        Fast::ICmp(c) => compare_lanes(*c, o, a, b, |x| x as i64),
                    }
                }
                LaneIns::Op2(op, _, a, b) => {
                    let (a, b) = (l(*a)?, l(*b)?);
                    match op {
                        Fff(f) => map2(o, a, b, |x, y| float_bits(f(float(x), float(y)))),
                        Iii(f) => map2(o, a, b, |x, y| f(x as i64, y as i64) as u64),
                        IiiFaulty(f) => crate::scalar::faulty_lanes(*f, o, a, b)?,
                        Ffb(f) => map2(o, a, b, |x, y| u64::from(f(float(x), float(y)))),
                        Iib(f) => map2(o, a, b, |x, y| u64::from(f(x as i64, y as i64))),
                        Bbb(f) => map2(o, a, b, |x, y| u64::from(f(x != 0, y != 0))),
                        Iif(f) => map2(o, a, b, |x, y| float_bits(f(x as i64, y as i64))),
                        _ => return None,
                    }
                }
                LaneIns::Op1(op, _, a) => {
                    let a = l(*a)?;
                    match op {
                        Ff(f) => map1(o, a, |x| float_bits(f(float(x)))),
                        Ii(f) => map1(o, a, |x| f(x as i64) as u64),
                        Bb(f) => map1(o, a, |x| u64::from(f(x != 0))),
                        If(f) => map1(o, a, |x| float_bits(f(x as i64))),
                        Fi(f) => map1(o, a, |x| f(float(x)) as u64),
                        Ib(f) => map1(o, a, |x| u64::from(f(x as i64))),
                        Bi(f) => map1(o, a, |x| f(x != 0) as u64),
                        Bf(f) => map1(o, a, |x| float_bits(f(x != 0))),
                        Fb(f) => map1(o, a, |x| u64::from(f(float(x)))),
                        _ => return None,
                    }
                }
                LaneIns::Move(_, a) => o.copy_from_slice(l(*a)?),
                LaneIns::Select(_, c, y, n) => {
                    let (c, y, n) = (l(*c)?, l(*y)?, l(*n)?);
                    for (((o, &c), &y), &n) in o.iter_mut().zip(c).zip(y).zip(n) {
                        *o = if c != 0 { y } else { n };
                    }
                }
                LaneIns::Pick { idx, srcs, .. } => {
                    for (i, (o, &k)) in o.iter_mut().zip(l(*idx)?).enumerate() {
                        let k = usize::try_from(k as i64).ok()?;
                        *o = *l(*srcs.get(k)?)?.get(i)?;
                    }
                }
                LaneIns::Offset {
                    base,
                    idx,
                    bound,
                    stride,
                    ..
                } => {
                    let base = match base {
                        Some(b) => Some(l(*b)?),
                        None => None,
                    };
                    for (i, (o, &k)) in o.iter_mut().zip(l(*idx)?).enumerate() {
                        if k >= *bound {
                            return None;
                        }
                        let b = match base {
                            Some(b) => *b.get(i)?,
                            None => 0,
                        };
                        *o = b + k * stride;
                    }
                }
                LaneIns::Load { ext, at, skip, .. } => {
                    let at = l(*at)?;
                    match exts.get(*ext as usize)? {
                        Data::Int(v) => load_lanes(o, at, *skip, v, |x| *x as u64)?,
                        Data::Float(v) => load_lanes(o, at, *skip, v, |x| u64::from(x.to_bits()))?,
                        Data::Bool(v) => load_lanes(o, at, *skip, v, |x| u64::from(*x))?,
                        _ => return None,
                    }
                }
            }
            *lanes.get_mut(d)? = out;
        }
        Some(())
    }
}

/// A straight program as lane code over blocks of cells, each register
/// its own slot (a lane per register: the cells' values of it side by
/// side, structure of arrays). `None` when the program jumps or an
/// instruction writes a register it reads.
fn across_code(program: &Program) -> Option<Vec<LaneIns>> {
    let mut out = Vec::with_capacity(program.code.len());
    for ins in &program.code {
        let s = |r: &u32| *r as usize;
        if ins.reads().iter().any(|r| ins.writes().contains(r)) {
            return None;
        }
        match ins {
            Ins::Op1(op, d, a) => out.push(LaneIns::Op1(*op, s(d), s(a))),
            Ins::Op2(op, d, a, b) => out.push(LaneIns::Op2(*op, s(d), s(a), s(b))),
            Ins::Fast(op, d, a, b) => out.push(LaneIns::Fast(*op, s(d), s(a), s(b))),
            Ins::Move(d, a) => out.push(LaneIns::Move(s(d), s(a))),
            Ins::Select(d, c, y, n) => out.push(LaneIns::Select(s(d), s(c), s(y), s(n))),
            Ins::Pick { dst, idx, srcs } => out.push(LaneIns::Pick {
                dst: s(dst),
                idx: s(idx),
                srcs: srcs.iter().map(s).collect(),
            }),
            Ins::Offset {
                dst,
                base,
                idx,
                bound,
                stride,
            } => out.push(LaneIns::Offset {
                dst: s(dst),
                base: base.as_ref().map(s),
                idx: s(idx),
                bound: *bound,
                stride: *stride,
            }),
            Ins::Load {
                dst,
                ext,
                at,
                skip,
                count,
            } => {
                for k in 0..*count {
                    out.push(LaneIns::Load {
                        dst: s(dst) + k as usize,
                        ext: *ext,
                        at: s(at),
                        skip: skip + u64::from(k),
                    });
                }
            }
            Ins::Jump(_) | Ins::JumpUnless(..) => return None,
        }
    }
    Some(out)
}

/// The lanes of every register of `program` over a block of cells,
/// each filled with the register's initial bits.
fn register_lanes(program: &Program) -> Vec<Vec<u64>> {
    program.init.iter().map(|&b| vec![b; BLOCK]).collect()
}

/// The positions of a cell's atoms, in row-major order, from its start
/// by `strides` (its axes' steps; the cell's `shape`).
fn cell_positions(strides: &[usize], shape: &[usize]) -> Vec<usize> {
    let mut at = vec![0];
    for (&d, &step) in shape.iter().zip(strides) {
        at = at
            .iter()
            .flat_map(|&a| (0..d).map(move |i| a + i * step))
            .collect();
    }
    at
}

/// Lane `from`'s first `n` values copied to lane `to` (nothing to do
/// when they are one lane: a step that returns its accumulator).
fn copy_lane(lanes: &mut [Vec<u64>], to: usize, from: usize, n: usize) -> Option<()> {
    if to == from {
        return Some(());
    }
    let src = std::mem::take(lanes.get_mut(from)?);
    let r = lanes
        .get_mut(to)
        .and_then(|l| l.get_mut(..n))
        .zip(src.get(..n))
        .map(|(d, s)| d.copy_from_slice(s));
    *lanes.get_mut(from)? = src;
    r
}

fn lane_dst(ins: &LaneIns) -> usize {
    match ins {
        LaneIns::Op1(_, d, _)
        | LaneIns::Op2(_, d, ..)
        | LaneIns::Fast(_, d, ..)
        | LaneIns::Move(d, _)
        | LaneIns::Select(d, ..)
        | LaneIns::Pick { dst: d, .. }
        | LaneIns::Offset { dst: d, .. }
        | LaneIns::Load { dst: d, .. } => *d,
    }
}

fn set_dst(ins: &mut LaneIns, to: usize) {
    match ins {
        LaneIns::Op1(_, d, _)
        | LaneIns::Op2(_, d, ..)
        | LaneIns::Fast(_, d, ..)
        | LaneIns::Move(d, _)
        | LaneIns::Select(d, ..)
        | LaneIns::Pick { dst: d, .. }
        | LaneIns::Offset { dst: d, .. }
        | LaneIns::Load { dst: d, .. } => *d = to,
    }
}

/// What one state register becomes, from its value before (`s`) and
/// the item's lane values (slots).
#[derive(Clone, Copy, Debug)]
enum Arm {
    /// `s` itself.
    Keep,
    /// A lane's value.
    Value(usize),
    /// `s op x` (`true`: `s` the left operand) or `x op s`.
    Op(Fast, bool, usize),
    /// `(s op x) op2 y`, each operand order as given (`true`: the part
    /// with `s` on the left): an affine recurrence.
    Affine(Fast, bool, usize, Fast, bool, usize),
}

impl Arm {
    /// The arm over the first `n` items of the lanes.
    fn resolve(self, lanes: &[Vec<u64>], n: usize) -> Option<Resolved<'_>> {
        let l = |k: usize| lanes.get(k).and_then(|l| l.get(..n));
        Some(match self {
            Arm::Keep => Resolved::Keep,
            Arm::Value(k) => Resolved::Value(l(k)?),
            Arm::Op(op, left, x) => Resolved::Op(op, left, l(x)?),
            Arm::Affine(op, left, x, op2, left2, y) => Resolved::Affine(op, left, l(x)?, op2, left2, l(y)?),
        })
    }
}

/// An arm with its lanes (each as long as the block).
#[derive(Clone, Copy)]
enum Resolved<'a> {
    Keep,
    Value(&'a [u64]),
    Op(Fast, bool, &'a [u64]),
    Affine(Fast, bool, &'a [u64], Fast, bool, &'a [u64]),
}

impl Resolved<'_> {
    /// The state after item `i` (below the lanes' length), from `s`.
    #[inline(always)]
    fn at(self, s: u64, i: usize) -> u64 {
        match self {
            Resolved::Keep => s,
            Resolved::Value(x) => x[i],
            Resolved::Op(op, left, x) => {
                if left {
                    op.apply(s, x[i])
                } else {
                    op.apply(x[i], s)
                }
            }
            Resolved::Affine(op, left, x, op2, left2, y) => {
                let t = if left {
                    op.apply(s, x[i])
                } else {
                    op.apply(x[i], s)
                };
                if left2 {
                    op2.apply(t, y[i])
                } else {
                    op2.apply(y[i], t)
                }
            }
        }
    }
}

/// A state register's recurrence run natively over a block: an arm, or
/// one of two chosen by a lane's Bool (a segmented scan's restart).
#[derive(Clone, Copy, Debug)]
enum Recurrence {
    Arm(Arm),
    Select(usize, Arm, Arm),
}

impl Recurrence {
    /// The recurrence over the first `n` items of the lanes.
    fn resolve(self, lanes: &[Vec<u64>], n: usize) -> Option<ResolvedRec<'_>> {
        Some(match self {
            Recurrence::Arm(a) => ResolvedRec::Arm(a.resolve(lanes, n)?),
            Recurrence::Select(c, yes, no) => ResolvedRec::Select(
                lanes.get(c)?.get(..n)?,
                yes.resolve(lanes, n)?,
                no.resolve(lanes, n)?,
            ),
        })
    }
}

/// A recurrence with its lanes.
#[derive(Clone, Copy)]
enum ResolvedRec<'a> {
    Arm(Resolved<'a>),
    Select(&'a [u64], Resolved<'a>, Resolved<'a>),
}

impl ResolvedRec<'_> {
    /// The states after each item of the block (`dst` as long as it),
    /// from `s`, into `dst`; the last returned. One loop per form of the
    /// recurrence, its arms' kinds fixed in it.
    fn sweep(self, s: u64, dst: &mut [u64]) -> u64 {
        fn run(mut s: u64, dst: &mut [u64], step: impl Fn(u64, usize) -> u64) -> u64 {
            for (i, d) in dst.iter_mut().enumerate() {
                s = step(s, i);
                *d = s;
            }
            s
        }
        fn select<Y: Step, N: Step>(c: &[u64], yes: Y, no: N, s: u64, dst: &mut [u64]) -> u64 {
            run(s, dst, |s, i| if c[i] != 0 { yes.at(s, i) } else { no.at(s, i) })
        }
        /// `$body` with `$x` the arm as its own [`Step`] type.
        macro_rules! with_step {
            ($arm:expr, $x:ident => $body:expr) => {
                match $arm {
                    Resolved::Keep => {
                        let $x = KeepStep;
                        $body
                    }
                    Resolved::Value(v) => {
                        let $x = ValueStep(v);
                        $body
                    }
                    Resolved::Op(op, left, v) => {
                        let $x = OpStep(op, left, v);
                        $body
                    }
                    Resolved::Affine(..) => {
                        let $x = AnyStep($arm);
                        $body
                    }
                }
            };
        }
        match self {
            ResolvedRec::Arm(a) => with_step!(a, x => run(s, dst, |s, i| x.at(s, i))),
            ResolvedRec::Select(c, yes, no) => {
                with_step!(yes, y => with_step!(no, n => select(c, y, n, s, dst)))
            }
        }
    }
}

/// One arm's step as a type of its own, so that a loop over the items
/// is made for it.
trait Step: Copy {
    fn at(self, s: u64, i: usize) -> u64;
}

#[derive(Clone, Copy)]
struct KeepStep;
#[derive(Clone, Copy)]
struct ValueStep<'a>(&'a [u64]);
#[derive(Clone, Copy)]
struct OpStep<'a>(Fast, bool, &'a [u64]);
/// Any arm, told apart per item (the rarer forms).
#[derive(Clone, Copy)]
struct AnyStep<'a>(Resolved<'a>);

impl Step for KeepStep {
    #[inline(always)]
    fn at(self, s: u64, _: usize) -> u64 {
        s
    }
}

impl Step for ValueStep<'_> {
    #[inline(always)]
    fn at(self, _: u64, i: usize) -> u64 {
        self.0[i]
    }
}

impl Step for OpStep<'_> {
    #[inline(always)]
    fn at(self, s: u64, i: usize) -> u64 {
        let OpStep(op, left, x) = self;
        if left {
            op.apply(s, x[i])
        } else {
            op.apply(x[i], s)
        }
    }
}

impl Step for AnyStep<'_> {
    #[inline(always)]
    fn at(self, s: u64, i: usize) -> u64 {
        self.0.at(s, i)
    }
}

/// The serial code recognised as one recurrence per state register,
/// each reading only its own register and the lanes (`None` otherwise):
/// `serial` straight and total, `def` the serial instruction writing each
/// register, `operand` a lane's slot for a register not carried.
fn recurrences(
    serial: &[Ins],
    carried: &[u32],
    results: &[u32],
    operand: &mut dyn FnMut(u32) -> Option<usize>,
) -> Option<Vec<Recurrence>> {
    if !serial.iter().all(Ins::straight_and_total) {
        return None;
    }
    let def = |r: u32| serial.iter().find(|i| i.writes().contains(&r));
    let follow = |mut r: u32| {
        while let Some(Ins::Move(_, s)) = def(r) {
            r = *s;
        }
        r
    };
    let mut out = Vec::with_capacity(carried.len());
    for (&acc, &result) in carried.iter().zip(results) {
        let mut arm = |r: u32| -> Option<Arm> {
            let r = follow(r);
            if r == acc {
                return Some(Arm::Keep);
            }
            let Some(ins) = def(r) else {
                return Some(Arm::Value(operand(r)?));
            };
            let Ins::Fast(op, _, x, y) = ins else {
                return None;
            };
            let (x, y) = (follow(*x), follow(*y));
            if x == acc && y != acc {
                return Some(Arm::Op(*op, true, operand(y)?));
            }
            if y == acc && x != acc {
                return Some(Arm::Op(*op, false, operand(x)?));
            }
            // (s op1 a) op b, either part on either side.
            let (inner, other, left2) = match (def(x), def(y)) {
                (Some(Ins::Fast(..)), _) => (x, y, true),
                (_, Some(Ins::Fast(..))) => (y, x, false),
                _ => return None,
            };
            let Some(Ins::Fast(op1, _, p, q)) = def(inner) else {
                return None;
            };
            let (p, q) = (follow(*p), follow(*q));
            let (left, a) = if p == acc && q != acc {
                (true, q)
            } else if q == acc && p != acc {
                (false, p)
            } else {
                return None;
            };
            Some(Arm::Affine(*op1, left, operand(a)?, *op, left2, operand(other)?))
        };
        let r = follow(result);
        out.push(match def(r) {
            Some(Ins::Select(_, c, y, n)) => {
                let (y, n) = (arm(*y)?, arm(*n)?);
                Recurrence::Select(operand(follow(*c))?, y, n)
            }
            _ => Recurrence::Arm(arm(r)?),
        });
    }
    Some(out)
}

/// An atom kind a loop reads or writes, as a register's bits.
trait Bits: Copy + Send + Sync {
    fn bits(self) -> u64;
    fn of_bits(b: u64) -> Self;
}

/// An atom kind of a buffer.
trait Plain: Bits {
    fn data<'p>(v: Vec<Self>) -> Data<Fun<'p>>;
}

/// Raw registers (a record's fields, split when the loop is done).
impl Bits for u64 {
    fn bits(self) -> u64 {
        self
    }
    fn of_bits(b: u64) -> u64 {
        b
    }
}

impl Bits for i64 {
    fn bits(self) -> u64 {
        self as u64
    }
    fn of_bits(b: u64) -> i64 {
        b as i64
    }
}

impl Plain for i64 {
    fn data<'p>(v: Vec<i64>) -> Data<Fun<'p>> {
        Data::Int(v.into())
    }
}

impl Bits for f32 {
    fn bits(self) -> u64 {
        float_bits(self)
    }
    fn of_bits(b: u64) -> f32 {
        float(b)
    }
}

impl Plain for f32 {
    fn data<'p>(v: Vec<f32>) -> Data<Fun<'p>> {
        Data::Float(v.into())
    }
}

impl Bits for bool {
    fn bits(self) -> u64 {
        u64::from(self)
    }
    fn of_bits(b: u64) -> bool {
        b != 0
    }
}

impl Plain for bool {
    fn data<'p>(v: Vec<bool>) -> Data<Fun<'p>> {
        Data::Bool(v.into())
    }
}

/// A compiled step and the loop around it, over `[outer, items, cell]`.
/// Where the items of a loop's cells lie: cell `o`'s item `i`'s atom
/// `k` at `cell(o) + i·step + comps[k]` (a frame literal's elements laid
/// out one after another, say, read in place rather than laid out item
/// after item first).
#[derive(Clone, Debug)]
struct Layout {
    base: usize,
    /// The cells' axes: each one's length and step.
    outer: Vec<(usize, usize)>,
    items: usize,
    step: usize,
    comps: Vec<usize>,
}

impl Layout {
    /// Items of `size` atoms, `items` a cell, one cell after another.
    fn dense(cells: usize, items: usize, size: usize) -> Layout {
        Layout {
            base: 0,
            outer: vec![(cells, items * size)],
            items,
            step: size,
            comps: (0..size).collect(),
        }
    }

    /// The cells of a view from `base`, over the axes `outer` with the
    /// first of `strides` (one item each, no components: only where each
    /// cell starts).
    fn cells_of(base: usize, outer: &[usize], strides: &[usize]) -> Layout {
        Layout {
            base,
            outer: outer.iter().copied().zip(strides.iter().copied()).collect(),
            items: 1,
            step: 0,
            comps: Vec::new(),
        }
    }

    /// Where cell `o` starts: `base` plus its position along each of the
    /// cells' axes times that axis's step.
    fn cell(&self, o: usize) -> usize {
        let mut at = self.base;
        let mut rest = o;
        for &(n, s) in self.outer.iter().rev() {
            at += (rest % n) * s;
            rest /= n;
        }
        at
    }

    /// The items in `data`; `None` unless every atom read lies in it.
    fn over<'a, T>(&'a self, data: &'a [T]) -> Option<Items<'a, T>> {
        let mut last = self.base;
        for &(n, s) in &self.outer {
            last = last.checked_add(n.checked_sub(1)?.checked_mul(s)?)?;
        }
        last = last.checked_add(self.items.checked_sub(1)?.checked_mul(self.step)?)?;
        last = last.checked_add(*self.comps.iter().max()?)?;
        (last < data.len()).then_some(Items { data, at: self })
    }
}

/// A loop's items where they lie ([`Layout`]).
struct Items<'a, T> {
    data: &'a [T],
    at: &'a Layout,
}

impl<T: Bits> Items<'_, T> {
    /// Where cell `o`'s first item lies.
    fn cell(&self, o: usize) -> usize {
        self.at.cell(o)
    }

    /// Atom `k` of the `lane.len()` items from `start` of the cell at `c`.
    fn fill(&self, c: usize, start: usize, k: usize, lane: &mut [u64]) -> Option<()> {
        let from = c + start * self.at.step + *self.at.comps.get(k)?;
        let n = lane.len();
        match self.at.step {
            0 => lane.fill(self.data.get(from)?.bits()),
            1 => {
                for (l, x) in lane.iter_mut().zip(self.data.get(from..from + n)?) {
                    *l = x.bits();
                }
            }
            step => {
                for (l, x) in lane.iter_mut().zip(self.data.get(from..)?.iter().step_by(step)) {
                    *l = x.bits();
                }
            }
        }
        Some(())
    }

    /// Atom `k` of item `i` of the cell at `c`.
    fn at(&self, c: usize, i: usize, k: usize) -> Option<T> {
        self.data
            .get(c + i * self.at.step + *self.at.comps.get(k)?)
            .copied()
    }
}

struct Loop {
    program: Program,
    /// The registers of the accumulator, the item, and the step's result.
    acc: Vec<u32>,
    item: Vec<u32>,
    result: Vec<u32>,
    /// What is kept of each accumulator: these of its registers (indices
    /// into `acc`; all of them but for a selection of the loop's result).
    keep: Vec<usize>,
    items: usize,
    /// Whether every accumulator is kept (`scan`, `iscan`).
    scanning: bool,
    /// Whether the first accumulator is the seed's (else the first item).
    seeded: bool,
    /// The program split for blocks of items, when it splits.
    lanes: Option<Lanes>,
    /// The program as lane code over blocks of cells, when the loop is
    /// lifted over many cells: each step runs once for a block of cells.
    across: Option<Vec<LaneIns>>,
}

impl Loop {
    /// The accumulator's registers kept, in order.
    fn kept_regs(&self) -> impl Iterator<Item = u32> + '_ {
        self.keep.iter().filter_map(|&j| self.acc.get(j).copied())
    }

    /// The loops of cells `range`, the items `xs`, from the seeds (one
    /// per cell) or the first items; what each keeps, one after another.
    fn cells<T: Bits, U: Bits>(
        &self,
        xs: &Items<'_, T>,
        seeds: Option<&[U]>,
        range: std::ops::Range<usize>,
        kept: usize,
    ) -> Option<Vec<U>> {
        let acc_size = self.acc.len();
        let mut out = crate::kernel::buffer(range.len() * kept * self.keep.len()).ok()?;
        let mut regs = self.program.init.clone();
        let mut lanes = self.lanes.as_ref().map(Lanes::lanes);
        for o in range {
            let c = xs.cell(o);
            match seeds {
                Some(s) => {
                    let s = s.get(o * acc_size..(o + 1) * acc_size)?;
                    for (&r, x) in self.acc.iter().zip(s) {
                        regs[r as usize] = x.bits();
                    }
                }
                None => {
                    for (k, &r) in self.acc.iter().enumerate() {
                        regs[r as usize] = xs.at(c, 0, k)?.bits();
                    }
                }
            }
            let keep = |regs: &[u64], out: &mut Vec<U>| {
                out.extend(self.kept_regs().map(|r| U::of_bits(regs[r as usize])));
            };
            if self.scanning {
                keep(&regs, &mut out);
            }
            let first = usize::from(!self.seeded);
            if let (Some(ln), Some(lanes)) = (&self.lanes, lanes.as_mut()) {
                let mut start = first;
                while start < self.items {
                    let n = BLOCK.min(self.items - start);
                    for (k, &s) in ln.inputs.iter().enumerate() {
                        xs.fill(c, start, k, lanes.get_mut(s)?.get_mut(..n)?)?;
                    }
                    ln.hoist(lanes, n)?;
                    let kept = self.scanning.then_some((&mut out, None));
                    ln.block(&mut regs, lanes, n, &self.acc, &self.result, &self.keep, kept)?;
                    start += n;
                }
                if !self.scanning {
                    keep(&regs, &mut out);
                }
                continue;
            }
            for i in first..self.items {
                for (k, &r) in self.item.iter().enumerate() {
                    regs[r as usize] = xs.at(c, i, k)?.bits();
                }
                self.program.run(&mut regs)?;
                for (&a, &r) in self.acc.iter().zip(&self.result) {
                    regs[a as usize] = regs[r as usize];
                }
                if self.scanning {
                    keep(&regs, &mut out);
                }
            }
            if !self.scanning {
                keep(&regs, &mut out);
            }
        }
        Some(out)
    }

    /// The loops of cells `range` as [`Loop::cells`] gives them, run
    /// with the cells in lanes (`code`, [`across_code`]): a block of
    /// cells at a time, each step one pass of the code over the block,
    /// every cell taking the same number of steps. The same operations
    /// on the same bits for each cell, items left to right.
    fn across<T: Bits, U: Bits>(
        &self,
        code: &[LaneIns],
        xs: &Items<'_, T>,
        seeds: Option<&[U]>,
        range: std::ops::Range<usize>,
        kept: usize,
        out: &mut [U],
    ) -> Option<()> {
        let acc_size = self.acc.len();
        let width = self.keep.len();
        let per = kept * width;
        if out.len() != range.len() * per {
            return None;
        }
        let mut lanes = register_lanes(&self.program);
        let first = usize::from(!self.seeded);
        let keep = |lanes: &[Vec<u64>], out: &mut [U], at: usize, n: usize, t: usize| -> Option<()> {
            for (k, a) in self.kept_regs().enumerate() {
                let lane = lanes.get(a as usize)?.get(..n)?;
                for (j, &b) in lane.iter().enumerate() {
                    *out.get_mut((at + j) * per + t * width + k)? = U::of_bits(b);
                }
            }
            Some(())
        };
        let mut start = range.start;
        let mut cells = Vec::with_capacity(BLOCK);
        while start < range.end {
            let n = BLOCK.min(range.end - start);
            cells.clear();
            cells.extend((start..start + n).map(|o| xs.cell(o)));
            for (k, &a) in self.acc.iter().enumerate() {
                let lane = lanes.get_mut(a as usize)?.get_mut(..n)?;
                for (j, l) in lane.iter_mut().enumerate() {
                    let o = start + j;
                    *l = match seeds {
                        Some(s) => s.get(o * acc_size + k)?.bits(),
                        None => xs.at(cells[j], 0, k)?.bits(),
                    };
                }
            }
            let at = start - range.start;
            let mut t = 0;
            if self.scanning {
                keep(&lanes, out, at, n, t)?;
                t += 1;
            }
            for i in first..self.items {
                for (k, &r) in self.item.iter().enumerate() {
                    let lane = lanes.get_mut(r as usize)?.get_mut(..n)?;
                    for (l, &c) in lane.iter_mut().zip(&cells) {
                        *l = xs.at(c, i, k)?.bits();
                    }
                }
                run_lanes(code, &self.program.exts, &mut lanes, n)?;
                for (&a, &r) in self.acc.iter().zip(&self.result) {
                    copy_lane(&mut lanes, a as usize, r as usize, n)?;
                }
                if self.scanning {
                    keep(&lanes, out, at, n, t)?;
                    t += 1;
                }
            }
            if !self.scanning {
                keep(&lanes, out, at, n, t)?;
            }
            start += n;
        }
        Some(())
    }

    /// The loops of cells `range`: in lanes across the cells when the
    /// loop is lifted over many, else each cell's in turn.
    fn some_cells<T: Bits, U: Bits>(
        &self,
        xs: &Items<'_, T>,
        seeds: Option<&[U]>,
        range: std::ops::Range<usize>,
        kept: usize,
        out: &mut [U],
    ) -> Option<()> {
        match &self.across {
            Some(code) => self.across(code, xs, seeds, range, kept, out),
            None => {
                let cells = self.cells(xs, seeds, range, kept)?;
                if cells.len() != out.len() {
                    return None;
                }
                out.copy_from_slice(&cells);
                Some(())
            }
        }
    }

    /// Every cell's loop (the cells shared among the threads when the
    /// steps are many), laid out as one buffer.
    fn all<'p, T: Bits, U: Plain>(
        &self,
        xs: &Items<'_, T>,
        seeds: Option<&[U]>,
        outer: usize,
        kept: usize,
    ) -> Option<Data<Fun<'p>>> {
        Some(U::data(self.kept(xs, seeds, outer, kept)?))
    }

    /// What every cell's loop keeps, one cell after another.
    fn kept<T: Bits, U: Bits>(
        &self,
        xs: &Items<'_, T>,
        seeds: Option<&[U]>,
        outer: usize,
        kept: usize,
    ) -> Option<Vec<U>> {
        let steps = outer.saturating_mul(self.items);
        let threads = crate::threads().min(outer);
        let per_cell = kept.checked_mul(self.keep.len())?;
        // (Zeroed by the allocator: fresh pages, not a pass of stores.)
        let mut all = vec![U::of_bits(0); outer.checked_mul(per_cell)?];
        if threads < 2 || steps < PARALLEL_STEPS {
            self.some_cells(xs, seeds, 0..outer, kept, &mut all)?;
            return Some(all);
        }
        let mut per = outer.div_ceil(threads * 4);
        if self.across.is_some() {
            per = per.next_multiple_of(BLOCK);
        }
        // Each part of the cells written where its cells go.
        let parts: Vec<(usize, &mut [U])> = all
            .chunks_mut(per * per_cell)
            .enumerate()
            .map(|(k, c)| (k * per, c))
            .collect();
        let ok = crate::in_parallel(parts, threads, |(s, out)| {
            self.some_cells(xs, seeds, s..(s + per).min(outer), kept, out)
                .is_some()
        });
        ok.then_some(all)
    }
}

/// A `while` or `iterate` loop compiled for one cell: the test (code
/// `..split`, its answer in register `go`), then the step, its result
/// copied back over the cell's registers `x`.
struct Stepper {
    program: Program,
    x: Vec<u32>,
    split: usize,
    go: Option<u32>,
}

impl Stepper {
    /// The loops of cells `range` (their bits, one after another, in
    /// `xs`): each cell stepped `times` times, or while its test holds,
    /// at most `limit` steps; the cells' bits afterwards and the steps
    /// taken in all.
    fn cells(
        &self,
        xs: &[u64],
        times: Option<u64>,
        limit: u64,
        range: std::ops::Range<usize>,
    ) -> Option<(Vec<u64>, u64)> {
        let size = self.x.len();
        let mut out = crate::kernel::buffer(range.len() * size).ok()?;
        let mut regs = self.program.init.clone();
        let (test, step) = (0..self.split, self.split..self.program.code.len());
        let mut steps = 0u64;
        for o in range {
            for (&r, &b) in self.x.iter().zip(xs.get(o * size..(o + 1) * size)?) {
                regs[r as usize] = b;
            }
            let mut k = 0u64;
            loop {
                match (times, self.go) {
                    (Some(t), _) if k >= t => break,
                    (None, Some(go)) => {
                        self.program.run_part(&mut regs, test.clone())?;
                        if regs[go as usize] == 0 {
                            break;
                        }
                    }
                    (None, None) => return None,
                    _ => {}
                }
                if k >= limit {
                    return None;
                }
                self.program.run_part(&mut regs, step.clone())?;
                k += 1;
            }
            steps = steps.saturating_add(k);
            out.extend(self.x.iter().map(|&r| regs[r as usize]));
        }
        Some((out, steps))
    }
}

impl<'p> Interpreter {
    /// `(while test step x)` (`times` none) or `(iterate times step x)`
    /// for every cell `x` of `xs` (shape `[n] ++ cell`, at most
    /// `MAX_CELLS` small cells of Ints, Floats, Bools or records of them),
    /// each cell's loop a cell program run natively, each stopping on its
    /// own. `None` when a function is not one the
    /// compiler knows or a step faults (the loop then runs as written,
    /// which reports the error where the reference meets it).
    pub(crate) fn loop_by_cell_program(
        &mut self,
        test: Option<&Fun<'p>>,
        times: Option<u64>,
        step: &Fun<'p>,
        xs: &Value<'p>,
        cell: &[usize],
    ) -> Try<Value<'p>> {
        if self.reference_only || test.is_some() == times.is_some() {
            return None;
        }
        let lambda = |f: &Fun<'p>| matches!(f, Fun::Lambda { .. }) && !f.reads_batch();
        if !lambda(step) || test.is_some_and(|t| !lambda(t)) {
            return None;
        }
        let n = *xs.shape.first()?;
        // Over more cells, the masked loop (masked.rs), each step
        // vectorised across the live cells, is as fast or faster
        // (measured: Collatz over 10^5 record cells 87 ms masked, 150 ms
        // here).
        if n == 0 || n > MAX_CELLS || xs.shape.get(1..)? != cell {
            return None;
        }
        let mut c = Compiler::new(self);
        let x = match &xs.data {
            Data::Records(r) if cell.is_empty() => c.record(r, 0, &mut |c, _, _| c.reg())?,
            d => c.fresh_cell(kind_of(d)?, cell.to_vec())?,
        };
        let regs = flat(&x)?;
        let size = regs.len();
        if size == 0 || size > MAX_ATOMS {
            return None;
        }
        let go = match test {
            Some(t) => {
                let t = c.function(t)?;
                let r = c.call(t, vec![x.clone()], Span::default())?;
                match c.regs(r)? {
                    (Kind::Bool, shape, r) if shape.is_empty() => Some(*r.first()?),
                    _ => return None,
                }
            }
            None => None,
        };
        let split = c.code.len();
        c.step_in_place(step, &x, &regs)?;
        let stepper = Stepper {
            program: Program {
                code: c.code,
                init: c.init,
                exts: c.exts,
            },
            x: regs,
            split,
            go,
        };
        let mut bits = crate::kernel::buffer(n.checked_mul(size)?).ok()?;
        match &xs.data {
            Data::Records(r) => {
                for o in 0..n {
                    record_bits(r, o, &mut bits)?;
                }
            }
            d => {
                for k in 0..n * size {
                    bits.push(bits_at(d, k)?);
                }
            }
        }
        let threads = crate::threads().min(n);
        let out = match self.fuel {
            // Under a budget of steps, one cell after another, counted.
            Some(fuel) => {
                let (out, steps) = stepper.cells(&bits, times, fuel, 0..n)?;
                self.fuel = Some(fuel.checked_sub(steps)?);
                out
            }
            None if threads < 2 || n.saturating_mul(times.unwrap_or(64) as usize) < PARALLEL_STEPS => {
                stepper.cells(&bits, times, u64::MAX, 0..n)?.0
            }
            None => {
                let per = n.div_ceil(threads * 8);
                let parts: Vec<(usize, std::sync::Mutex<Option<Vec<u64>>>)> = (0..n)
                    .step_by(per)
                    .map(|s| (s, std::sync::Mutex::new(None)))
                    .collect();
                let ok = crate::in_parallel(parts.iter().collect(), threads, |(s, slot)| {
                    let r = stepper.cells(&bits, times, u64::MAX, *s..(*s + per).min(n));
                    let done = r.is_some();
                    if let Ok(mut slot) = slot.lock() {
                        *slot = r.map(|(o, _)| o);
                    }
                    done
                });
                if !ok {
                    return None;
                }
                let mut all = crate::kernel::buffer(n * size).ok()?;
                for (_, slot) in parts {
                    all.extend(slot.into_inner().ok()??);
                }
                all
            }
        };
        Some(Array {
            shape: xs.shape.clone(),
            data: records_of(&x, &out, n, size, &mut 0)?,
        })
    }

    /// `(iterate times step x)` for every cell `x` of `xs` (its cells of
    /// shape `cell`), the cells in lanes: the step compiled once into a
    /// straight program, its registers lanes over a block of cells, each
    /// step one pass of the program over the block (every cell takes
    /// `times` steps, so no cell waits on another). A step that reads the
    /// batch's variables (a closure made inside the batch) runs over the
    /// batch's cells, each variable's cell an input lane. Used over more
    /// than `MAX_CELLS` cells or for a step reading the batch; `None`
    /// when it does not apply or a step faults (the loop then runs as
    /// written, which reports the error where the reference meets it).
    pub(crate) fn iterate_across(
        &mut self,
        times: u64,
        step: &Fun<'p>,
        xs: &Batched<'p>,
        cell: &[usize],
    ) -> Try<Batched<'p>> {
        if self.reference_only || !matches!(step, Fun::Lambda { .. }) {
            return None;
        }
        let reads = step.reads_batch();
        let nb = if reads { self.batch.len().max(xs.nb) } else { xs.nb };
        let xs = self.expand(xs, nb)?;
        let xs = match xs.v.data {
            Data::Records(_) => xs.densify()?,
            _ => xs,
        };
        let outer_axes = xs.v.shape.len().checked_sub(cell.len())?;
        if outer_axes < nb {
            return None;
        }
        let outer_shape = xs.v.shape.get(..outer_axes)?.to_vec();
        let n = atoms_in(&outer_shape);
        if n == 0 || (n <= MAX_CELLS && !reads) {
            return None;
        }
        let mut c = Compiler::new(self);
        c.lane_vars = Some(Vec::new());
        let x = match &xs.v.data {
            Data::Records(r) if cell.is_empty() => c.record(r, 0, &mut |c, _, _| c.reg())?,
            d => c.fresh_cell(kind_of(d)?, cell.to_vec())?,
        };
        let regs = flat(&x)?;
        let size = regs.len();
        if size == 0 || size > MAX_ATOMS {
            return None;
        }
        c.step_in_place(step, &x, &regs)?;
        let lane_vars = c.lane_vars.take()?;
        let program = Program {
            code: c.code,
            init: c.init,
            exts: c.exts,
        };
        let code = across_code(&program)?;
        // The batch's variables, each laid out a cell per cell of `xs`.
        let mut inputs = vec![(regs.clone(), Data::Int(Vec::new().into()))];
        for (b, r) in lane_vars {
            let own = b.own().to_vec();
            let shape: Vec<usize> = outer_shape.iter().chain(&own).copied().collect();
            let laid = b.laid_over(own.len(), nb, outer_axes, &shape)?;
            inputs.push((r, plain(&laid.data)?));
        }
        // Where each cell's atoms lie in `xs` (a view: a state that every
        // cell shares is read from its one copy, never replicated); a
        // record state densely, a cell after another.
        let (source, within) = match &xs.v.data {
            Data::Records(r) => {
                let mut bits = crate::kernel::buffer(n.checked_mul(size)?).ok()?;
                for o in 0..n {
                    record_bits(r, o, &mut bits)?;
                }
                (
                    Data::Int(bits.into_iter().map(|b| b as i64).collect::<Vec<_>>().into()),
                    (0..size).collect(),
                )
            }
            d => (plain(d)?, cell_positions(xs.strides.get(outer_axes..)?, cell)),
        };
        let records = matches!(xs.v.data, Data::Records(_));
        // (Only where each cell starts is asked of it.)
        let cells = Layout::cells_of(xs.offset, &outer_shape, &xs.strides);
        if let Some(fuel) = &mut self.fuel {
            *fuel = fuel.checked_sub((n as u64).saturating_mul(times))?;
        }
        // The cells `first ..` of one part, their final states into `out`
        // (a cell after another).
        let run = |first: usize, out: &mut [u64]| -> Option<()> {
            let mut lanes = register_lanes(&program);
            let mut cell_bits = Vec::with_capacity(size);
            let count = out.len() / size;
            let mut start = 0;
            while start < count {
                let m = BLOCK.min(count - start);
                for j in 0..m {
                    let o = first + start + j;
                    cell_bits.clear();
                    let at = if records { o * size } else { cells.cell(o) };
                    for &w in &within {
                        cell_bits.push(bits_at(&source, at + w)?);
                    }
                    for (&r, &b) in regs.iter().zip(&cell_bits) {
                        *lanes.get_mut(r as usize)?.get_mut(j)? = b;
                    }
                }
                for (r, data) in inputs.iter().skip(1) {
                    let w = r.len();
                    for (k, &r) in r.iter().enumerate() {
                        let lane = lanes.get_mut(r as usize)?.get_mut(..m)?;
                        for (j, l) in lane.iter_mut().enumerate() {
                            *l = bits_at(data, (first + start + j) * w + k)?;
                        }
                    }
                }
                for _ in 0..times {
                    run_lanes(&code, &program.exts, &mut lanes, m)?;
                }
                for (k, &r) in regs.iter().enumerate() {
                    let lane = lanes.get(r as usize)?.get(..m)?;
                    for (j, &b) in lane.iter().enumerate() {
                        *out.get_mut((start + j) * size + k)? = b;
                    }
                }
                start += m;
            }
            Some(())
        };
        let mut all = vec![0u64; n.checked_mul(size)?];
        let threads = crate::threads().min(n.div_ceil(BLOCK));
        if threads < 2 || n.saturating_mul(times as usize) < PARALLEL_STEPS {
            run(0, &mut all)?;
        } else {
            // Parts of whole blocks, each written where its cells go.
            let per = n.div_ceil(threads * 4).next_multiple_of(BLOCK);
            let parts: Vec<(usize, &mut [u64])> = all
                .chunks_mut(per * size)
                .enumerate()
                .map(|(k, c)| (k * per, c))
                .collect();
            if !crate::in_parallel(parts, threads, |(first, out)| run(first, out).is_some()) {
                return None;
            }
        }
        Some(Batched::dense(
            Array {
                shape: xs.v.shape.clone(),
                data: match &x {
                    // One Int array: its lanes' bits are its atoms, kept in place.
                    CVal::Arr { kind: Kind::Int, .. } => {
                        Data::Int(all.into_iter().map(|b| b as i64).collect::<Vec<_>>().into())
                    }
                    _ => records_of(&x, &all, n, size, &mut 0)?,
                },
            },
            nb,
        ))
    }

    /// `fold`, `scan` or `iscan` by a lambda whose step works atom by
    /// atom ([`elementwise`]) on an accumulator and items of one cell
    /// shape (a vector of states stepped by a vector of inputs: a scan
    /// along the columns of a time-major matrix): the same fold of each
    /// atom of the cells along the items, so the cells' axes are made
    /// part of the frame (the item axis moved after them, a view) and
    /// each atom's loop is a cell program over scalars, reading its
    /// inputs along memory where the matrix lies so; a `scan`'s or
    /// `iscan`'s result has its item axis moved back before the cells'
    /// axes (a view). `None` when it does not apply (the caller goes on).
    pub(crate) fn fold_by_atoms(
        &mut self,
        name: &str,
        op: &Batched<'p>,
        seed: Option<&(Batched<'p>, Vec<usize>)>,
        xs: &Batched<'p>,
        xcell: &[usize],
    ) -> Try<Batched<'p>> {
        if !matches!(name, "fold" | "scan" | "iscan") || self.reference_only {
            return None;
        }
        let Data::Atoms(funs) = &op.v.data else {
            return None;
        };
        let Some(Atom::Fun(Fun::Lambda { param: acc, body, .. })) = funs.get(op.offset) else {
            return None;
        };
        let TExprKind::Array { shape, atoms } = &body.kind else {
            return None;
        };
        let ([], [inner]) = (shape.as_slice(), atoms.as_slice()) else {
            return None;
        };
        let TAtomKind::Lambda { param: item, body } = &inner.kind else {
            return None;
        };
        let cell = xcell.get(1..)?;
        if cell.is_empty() || !elementwise(body, &[*acc, *item]) {
            return None;
        }
        let xframe = xs.own().len().checked_sub(xcell.len())?;
        let seed = match seed {
            Some((s, scell)) => {
                if scell != cell || s.own().len().checked_sub(scell.len())? != xframe || s.nb != xs.nb {
                    return None;
                }
                Some((s.clone(), Vec::new()))
            }
            None => None,
        };
        // The item axis moved after the cells' axes.
        let axis = xs.nb + xframe;
        let rank = xs.v.shape.len();
        let order: Vec<usize> = (0..rank).filter(|&a| a != axis).chain([axis]).collect();
        let view = Batched {
            v: Array {
                shape: order.iter().map(|&a| xs.v.shape[a]).collect(),
                data: xs.v.data.clone(),
            },
            nb: xs.nb,
            offset: xs.offset,
            strides: order
                .iter()
                .map(|&a| xs.strides.get(a).copied())
                .collect::<Option<_>>()?,
        };
        let items = *xs.v.shape.get(axis)?;
        let r = self.fold_by_cell_program(name, op, seed.as_ref(), &view, &[items], None)?;
        if name == "fold" {
            return Some(r);
        }
        // The result's item axis (its last) moved back before the cells'.
        let last = r.v.shape.len().checked_sub(1)?;
        let at = last.checked_sub(cell.len())?;
        let back: Vec<usize> = (0..at).chain([last]).chain(at..last).collect();
        Some(Batched {
            v: Array {
                shape: back.iter().map(|&a| r.v.shape[a]).collect(),
                data: r.v.data,
            },
            nb: r.nb,
            offset: r.offset,
            strides: back
                .iter()
                .map(|&a| r.strides.get(a).copied())
                .collect::<Option<_>>()?,
        })
    }

    /// `fold`, `scan`, `iscan` or `reduce` by a lambda over every cell of
    /// the batch and the argument's frame, each cell's loop a cell program
    /// (see the module comment). `None` when the step is not one the
    /// compiler knows, the cells are large or empty, there are more
    /// than `MAX_CELLS` of them (one batched application per item, each
    /// step vectorised across the cells, is then better), or a step
    /// faults.
    pub(crate) fn fold_by_cell_program(
        &mut self,
        name: &str,
        op: &Batched<'p>,
        seed: Option<&(Batched<'p>, Vec<usize>)>,
        xs: &Batched<'p>,
        xcell: &[usize],
        project: Option<&Fun<'p>>,
    ) -> Try<Batched<'p>> {
        if !matches!(name, "fold" | "scan" | "iscan" | "reduce") || self.reference_only {
            return None;
        }
        let Data::Atoms(funs) = &op.v.data else {
            return None;
        };
        let fun @ Fun::Lambda { .. } = (match funs.get(op.offset)? {
            Atom::Fun(f) => f,
            _ => return None,
        }) else {
            return None;
        };
        if fun.reads_batch() {
            return None;
        }
        let xframe = xs.own().len().checked_sub(xcell.len())?;
        let nb = xs.nb.max(seed.map_or(0, |(s, _)| s.nb));
        let outer_axes = nb + xframe;
        let xs = self.expand(xs, nb)?;
        let outer_shape: Vec<usize> = xs.v.shape.get(..outer_axes)?.to_vec();
        let outer = atoms_in(&outer_shape);
        let items = *xs.v.shape.get(outer_axes)?;
        let item_shape = xcell.get(1..)?.to_vec();
        let size = atoms_in(&item_shape);
        // (An empty cell is a step that reads nothing, but a step all the
        // same, which the reference takes.)
        if outer == 0 || items == 0 || size == 0 || size > MAX_ATOMS {
            return None;
        }
        // Items that are records: each item's fields its registers, the
        // loops run on their bits.
        let record_items = match &xs.v.data {
            Data::Records(_) if item_shape.is_empty() => match xs.densify()?.v.data {
                Data::Records(r) => Some(r),
                _ => None,
            },
            _ => None,
        };
        // Plain items are read where they lie, through their steps.
        let layout = Layout {
            items,
            step: *xs.strides.get(outer_axes)?,
            comps: cell_positions(xs.strides.get(outer_axes + 1..)?, &item_shape),
            ..Layout::cells_of(xs.offset, &outer_shape, &xs.strides)
        };
        let xs = match record_items {
            // Over many cells, one batched application per item runs on
            // the records' fields as they lie (structure of arrays),
            // faster than their bits in lanes.
            Some(_) if outer > MAX_CELLS => return None,
            Some(_) => Data::Int(Vec::new().into()),
            None => plain(&xs.v.data)?,
        };
        let item_kind = kind_of(&xs)?;
        let (acc_shape, seeds) = match seed {
            Some((s, scell)) => {
                let sframe = s.own().len().checked_sub(scell.len())?;
                if sframe > xframe {
                    return None;
                }
                let mut shape = outer_shape.clone();
                shape.extend(scell);
                let seeds = s.laid_over(scell.len(), nb, outer_axes, &shape)?;
                (scell.clone(), Some(seeds.data))
            }
            None => (item_shape.clone(), None),
        };
        // The program: the step applied to an accumulator and an item in
        // registers, its result copied to fresh registers where it is the
        // accumulator's (which the copy back overwrites). A record
        // accumulator is one register group per field.
        let mut c = Compiler::new(self);
        let acc_val = match &seeds {
            Some(Data::Records(r)) if acc_shape.is_empty() => c.record(r, 0, &mut |c, _, _| c.reg())?,
            None if let Some(r) = &record_items => c.record(r, 0, &mut |c, _, _| c.reg())?,
            _ => {
                let kind = match &seeds {
                    Some(d) => kind_of(d)?,
                    None => item_kind,
                };
                c.fresh_cell(kind, acc_shape.clone())?
            }
        };
        let acc = flat(&acc_val)?;
        let acc_size = acc.len();
        if acc_size == 0 || acc_size > MAX_ATOMS {
            return None;
        }
        let item_val = match &record_items {
            Some(r) => c.record(r, 0, &mut |c, _, _| c.reg())?,
            None => CVal::Arr {
                kind: item_kind,
                shape: item_shape.clone(),
                regs: c.fresh_regs(size)?,
            },
        };
        let item = flat(&item_val)?;
        if item.is_empty() || item.len() > MAX_ATOMS {
            return None;
        }
        let step = c.function(fun)?;
        let args = vec![acc_val.clone(), item_val];
        let r = c.call(step, args, Span::default())?;
        let mut result = c.conform(&acc_val, r)?;
        for r in result.iter_mut() {
            if acc.contains(r) {
                let d = c.reg()?;
                c.emit(Ins::Move(d, *r))?;
                *r = d;
            }
        }
        // What is kept of each state: all of it, or the selection
        // `project` makes of it (the rest, where nothing kept reads it,
        // never stepped).
        let (kept_val, keep) = match project {
            Some(g) => c.projection(g, &acc_val)?,
            None => (acc_val.clone(), (0..acc_size).collect()),
        };
        let width = keep.len();
        let kept_shape = kept_val.shape()?.to_vec();
        let program = Program {
            code: c.code,
            init: c.init,
            exts: c.exts,
        };
        // Over many cells, the cells in lanes (a straight step only);
        // over few, each cell's loop in turn, its items in lanes.
        let (lanes, across) = if outer > MAX_CELLS {
            (None, Some(across_code(&program)?))
        } else {
            (Lanes::new(&program, &item, &acc, &result), None)
        };
        let looped = Loop {
            program,
            lanes,
            across,
            acc,
            item,
            result,
            keep,
            items,
            scanning: matches!(name, "scan" | "iscan"),
            seeded: seeds.is_some(),
        };
        let kept = match name {
            "scan" => items + 1,
            "iscan" => items,
            _ => 1,
        };
        if !crate::eval::batch_fits(outer.checked_mul(kept)?.checked_mul(width)?) {
            return None;
        }
        if let Some(fuel) = &mut self.fuel {
            *fuel = fuel.checked_sub(outer.saturating_mul(items) as u64)?;
        }
        macro_rules! run {
            ($xs:expr, $seeds:expr) => {
                match $seeds {
                    None => looped.all(&layout.over($xs)?, None::<&[f32]>, outer, kept),
                    Some(Data::Int(s)) => looped.all(&layout.over($xs)?, Some(s.as_slice()), outer, kept),
                    Some(Data::Float(s)) => looped.all(&layout.over($xs)?, Some(s.as_slice()), outer, kept),
                    Some(Data::Bool(s)) => looped.all(&layout.over($xs)?, Some(s.as_slice()), outer, kept),
                    Some(_) => None,
                }
            };
        }
        if let Some(r) = &record_items {
            // Each item's fields as its registers' bits (and the seeds'),
            // the loops run on bits, what they keep split back into
            // fields or atoms.
            let positions = outer.checked_mul(items)?;
            let mut item_bits = crate::kernel::buffer(positions.checked_mul(looped.item.len())?).ok()?;
            for p in 0..positions {
                record_bits(r, p, &mut item_bits)?;
            }
            let seed_bits = match &seeds {
                None => None,
                Some(Data::Records(s)) => {
                    let mut bits = crate::kernel::buffer(outer * acc_size).ok()?;
                    for o in 0..outer {
                        record_bits(s, o, &mut bits)?;
                    }
                    Some(bits)
                }
                Some(d) => Some(
                    (0..d.len())
                        .map(|k| bits_at(d, k))
                        .collect::<Option<Vec<u64>>>()?,
                ),
            };
            let dense = Layout::dense(outer, items, looped.item.len());
            let kept_bits = looped.kept(&dense.over(&item_bits)?, seed_bits.as_deref(), outer, kept)?;
            let mut shape = outer_shape;
            if looped.scanning {
                shape.push(kept);
            }
            shape.extend(kept_shape);
            let data = records_of(&kept_val, &kept_bits, outer * kept, width, &mut 0)?;
            return Some(Batched::dense(Array { shape, data }, nb));
        }
        if let Some(Data::Records(r)) = &seeds {
            // Each cell's record seed as its registers' bits, the loops
            // run on bits, and what they keep split back into fields.
            let mut bits = crate::kernel::buffer(outer * acc_size).ok()?;
            for o in 0..outer {
                record_bits(r, o, &mut bits)?;
            }
            let s = Some(bits.as_slice());
            let kept_bits = match &xs {
                Data::Int(x) => looped.kept(&layout.over(x)?, s, outer, kept),
                Data::Float(x) => looped.kept(&layout.over(x)?, s, outer, kept),
                Data::Bool(x) => looped.kept(&layout.over(x)?, s, outer, kept),
                _ => None,
            }?;
            let shape = outer_shape
                .into_iter()
                .chain(looped.scanning.then_some(kept))
                .chain(kept_shape)
                .collect();
            let data = records_of(&kept_val, &kept_bits, outer * kept, width, &mut 0)?;
            return Some(Batched::dense(Array { shape, data }, nb));
        }
        let data = match (&xs, &seeds) {
            // Without a seed, the accumulators are of the items' kind.
            (Data::Int(x), None) => looped.all(&layout.over(x)?, None::<&[i64]>, outer, kept),
            (Data::Float(x), None) => looped.all(&layout.over(x)?, None::<&[f32]>, outer, kept),
            (Data::Bool(x), None) => looped.all(&layout.over(x)?, None::<&[bool]>, outer, kept),
            (Data::Int(x), s) => run!(x.as_slice(), s),
            (Data::Float(x), s) => run!(x.as_slice(), s),
            (Data::Bool(x), s) => run!(x.as_slice(), s),
            _ => None,
        }?;
        let mut shape = outer_shape;
        if looped.scanning {
            shape.push(kept);
        }
        shape.extend(kept_shape);
        Some(Batched::dense(Array { shape, data }, nb))
    }
}

/// Whether `e` computes each atom of its result from the atoms at the
/// same place of the variables `params` (all of one shape) alone: those
/// variables, scalar literals, and scalar primitives applied to such
/// expressions. A fold whose step is one folds each atom on its own
/// ([`Interpreter::fold_by_atoms`]).
fn elementwise(e: &TExpr, params: &[VarId]) -> bool {
    match &e.kind {
        TExprKind::Var(v) => params.contains(v),
        TExprKind::Array { shape, atoms } => {
            shape.is_empty()
                && matches!(
                    atoms.as_slice(),
                    [a] if matches!(a.kind, TAtomKind::Bool(_) | TAtomKind::Int(_) | TAtomKind::Float(_))
                )
        }
        TExprKind::App { .. } => {
            let (head, spine) = e.spine();
            matches!(&head.kind, TExprKind::Intrinsic(name) if crate::scalar::arity(name) == Some(spine.len()))
                && spine.iter().all(|(a, _)| elementwise(a, params))
        }
        _ => false,
    }
}

/// One argument of a map whose results a mapped loop steps through: its
/// atoms, the registers an item's cell is loaded into, and whether it has
/// the items' frame (else its one cell is every item's).
struct Source {
    data: Data,
    regs: Vec<u32>,
    framed: bool,
}

impl Source {
    /// Item `i`'s cell into its registers.
    fn load(&self, i: usize, regs: &mut [u64]) -> Option<()> {
        let size = self.regs.len();
        let at = if self.framed { i * size } else { 0 };
        if let [r] = self.regs.as_slice() {
            // (One atom an item: the commonest, loaded directly.)
            *regs.get_mut(*r as usize)? = match &self.data {
                Data::Int(v) => *v.get(at)? as u64,
                Data::Float(v) => float_bits(*v.get(at)?),
                Data::Bool(v) => u64::from(*v.get(at)?),
                _ => return None,
            };
            return Some(());
        }
        match &self.data {
            Data::Int(v) => {
                for (&r, x) in self.regs.iter().zip(v.get(at..at + size)?) {
                    *regs.get_mut(r as usize)? = *x as u64;
                }
            }
            Data::Float(v) => {
                for (&r, x) in self.regs.iter().zip(v.get(at..at + size)?) {
                    *regs.get_mut(r as usize)? = float_bits(*x);
                }
            }
            Data::Bool(v) => {
                for (&r, x) in self.regs.iter().zip(v.get(at..at + size)?) {
                    *regs.get_mut(r as usize)? = u64::from(*x);
                }
            }
            _ => return None,
        }
        Some(())
    }
}

impl Source {
    /// Atom `k` of the cells of items `start …` (as many as `lane`
    /// holds) into `lane`.
    fn fill(&self, k: usize, start: usize, lane: &mut [u64]) -> Option<()> {
        let size = self.regs.len();
        if !self.framed {
            lane.fill(bits_at(&self.data, k)?);
            return Some(());
        }
        let span = start * size..(start + lane.len()) * size;
        match &self.data {
            Data::Int(v) => {
                for (l, x) in lane.iter_mut().zip(v.get(span)?.iter().skip(k).step_by(size)) {
                    *l = *x as u64;
                }
            }
            Data::Float(v) => {
                for (l, x) in lane.iter_mut().zip(v.get(span)?.iter().skip(k).step_by(size)) {
                    *l = float_bits(*x);
                }
            }
            Data::Bool(v) => {
                for (l, x) in lane.iter_mut().zip(v.get(span)?.iter().skip(k).step_by(size)) {
                    *l = u64::from(*x);
                }
            }
            _ => return None,
        }
        Some(())
    }
}

/// A fold or scan whose items are a map's results, made by the same
/// program: its code `..split` makes an item (in `item`) from the
/// sources' registers, the rest is the step.
struct MappedLoop {
    program: Program,
    split: usize,
    sources: Vec<Source>,
    item: Vec<u32>,
    acc: Vec<u32>,
    result: Vec<u32>,
    /// What is kept of each state (indices into `acc`), as [`Loop`]'s.
    keep: Vec<usize>,
    items: usize,
    scanning: bool,
    /// The program split for blocks of items (its inputs the sources'
    /// registers, in order), when it splits.
    lanes: Option<Lanes>,
}

impl MappedLoop {
    /// The loop from the seed's bits (else the first item): what it keeps.
    /// With `mask` (a scan's), only the states it flags are kept, `kept`
    /// of them.
    fn run<U: Bits>(&self, seed: Option<&[u64]>, kept: usize, mask: Option<&[bool]>) -> Option<Vec<U>> {
        let mut out = crate::kernel::buffer(kept * self.keep.len()).ok()?;
        // Whether state `k` (0: the first kept) is kept.
        let flagged = |k: usize| mask.is_none_or(|m| m.get(k) == Some(&true));
        // The mask from state `k` on, `n` states.
        let flags = |k: usize, n: usize| -> Option<Option<&[bool]>> {
            match mask {
                Some(m) => Some(Some(m.get(k..k.checked_add(n)?)?)),
                None => Some(None),
            }
        };
        let mut regs = self.program.init.clone();
        for s in self.sources.iter().filter(|s| !s.framed) {
            s.load(0, &mut regs)?;
        }
        let framed: Vec<&Source> = self.sources.iter().filter(|s| s.framed).collect();
        let first = match seed {
            Some(bits) => {
                for (&r, &b) in self.acc.iter().zip(bits) {
                    *regs.get_mut(r as usize)? = b;
                }
                0
            }
            None => {
                for s in &framed {
                    s.load(0, &mut regs)?;
                }
                self.program.run_part(&mut regs, 0..self.split)?;
                for (&a, &r) in self.acc.iter().zip(&self.item) {
                    regs[a as usize] = regs[r as usize];
                }
                1
            }
        };
        let keep = |regs: &[u64], out: &mut Vec<U>| {
            let kept = self.keep.iter().filter_map(|&j| self.acc.get(j));
            out.extend(kept.map(|&r| U::of_bits(regs[r as usize])));
        };
        // The states kept so far (a scan's first: the seed or item 0).
        let mut at = 0;
        if self.scanning {
            if flagged(at) {
                keep(&regs, &mut out);
            }
            at += 1;
        }
        if let Some(ln) = &self.lanes {
            let mut lanes = ln.lanes();
            let mut start = first;
            while start < self.items {
                let n = BLOCK.min(self.items - start);
                let mut slots = ln.inputs.iter();
                for s in &self.sources {
                    for k in 0..s.regs.len() {
                        let lane = lanes.get_mut(*slots.next()?)?.get_mut(..n)?;
                        s.fill(k, start, lane)?;
                    }
                }
                ln.hoist(&mut lanes, n)?;
                let mask = if self.scanning { flags(at, n)? } else { None };
                let kept = self.scanning.then_some((&mut out, mask));
                ln.block(&mut regs, &lanes, n, &self.acc, &self.result, &self.keep, kept)?;
                at += n;
                start += n;
            }
            if !self.scanning {
                keep(&regs, &mut out);
            }
            return Some(out);
        }
        for i in first..self.items {
            for s in &framed {
                s.load(i, &mut regs)?;
            }
            self.program.run(&mut regs)?;
            for (&a, &r) in self.acc.iter().zip(&self.result) {
                regs[a as usize] = regs[r as usize];
            }
            if self.scanning {
                if flagged(at) {
                    keep(&regs, &mut out);
                }
                at += 1;
            }
        }
        if !self.scanning {
            keep(&regs, &mut out);
        }
        Some(out)
    }
}

impl<'p> Interpreter {
    /// `fold`, `scan`, `iscan` or `reduce` by the lambda `op` (from
    /// `seed`, a value of its cell's shape) over the `n` items that the
    /// lambda `map` makes from `args` (each with its cell; an argument
    /// whose frame is empty gives every item the same cell), at the top
    /// level: the map and the step compiled into one cell program run
    /// once per item, the items never laid out. `None` when a function is
    /// not one the compiler knows, the items are not small cells of the
    /// shape `item_shape`, or a step faults (the caller then evaluates as
    /// written, which reports the error where the reference meets it).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn mapped_fold_by_cell_program(
        &mut self,
        name: &str,
        op: &Fun<'p>,
        seed: Option<&Value<'p>>,
        map: &Fun<'p>,
        args: &[(Value<'p>, Vec<usize>)],
        n: usize,
        item_shape: &[usize],
        mask: Option<&[bool]>,
        project: Option<&Fun<'p>>,
    ) -> Option<Value<'p>> {
        if self.reference_only || self.fuel.is_some() || n == 0 {
            return None;
        }
        let lambda = |f: &Fun<'p>| matches!(f, Fun::Lambda { .. }) && !f.reads_batch();
        if !lambda(op) || !lambda(map) {
            return None;
        }
        let mut c = Compiler::new(self);
        let mut sources = Vec::with_capacity(args.len());
        let mut cells = Vec::with_capacity(args.len());
        for (a, cell) in args {
            let framed = a.shape.len() > cell.len();
            if a.shape.get(usize::from(framed)..)? != cell.as_slice()
                || (framed && a.shape.first() != Some(&n))
            {
                return None;
            }
            let v = c.fresh_cell(kind_of(&a.data)?, cell.clone())?;
            sources.push(Source {
                data: plain(&a.data)?,
                regs: flat(&v)?,
                framed,
            });
            cells.push(v);
        }
        let m = c.function(map)?;
        let item = c.call(m, cells, Span::default())?;
        let (item_kind, shape, item) = c.regs(item)?;
        if shape != item_shape || item.is_empty() {
            return None;
        }
        let split = c.code.len();
        let (acc_kind, acc_shape, seed_bits) = match seed {
            Some(s) => {
                let kind = kind_of(&s.data)?;
                let bits = (0..atoms_in(&s.shape))
                    .map(|k| bits_at(&s.data, k))
                    .collect::<Option<Vec<u64>>>()?;
                (kind, s.shape.clone(), Some(bits))
            }
            None => (item_kind, shape.clone(), None),
        };
        let acc_val = c.fresh_cell(acc_kind, acc_shape.clone())?;
        let acc = flat(&acc_val)?;
        if acc.is_empty() {
            return None;
        }
        let step = c.function(op)?;
        let args = vec![
            acc_val.clone(),
            CVal::Arr {
                kind: item_kind,
                shape,
                regs: item.clone(),
            },
        ];
        let r = c.call(step, args, Span::default())?;
        let mut result = c.conform(&acc_val, r)?;
        for r in result.iter_mut() {
            if acc.contains(r) {
                let d = c.reg()?;
                c.emit(Ins::Move(d, *r))?;
                *r = d;
            }
        }
        let (kept_val, keep) = match project {
            Some(g) => c.projection(g, &acc_val)?,
            None => (acc_val.clone(), (0..acc.len()).collect()),
        };
        let kept_shape = kept_val.shape()?.to_vec();
        let scanning = matches!(name, "scan" | "iscan");
        let kept = match name {
            "scan" => n + 1,
            "iscan" => n,
            _ => 1,
        };
        // A filter of the scan: its flags, one per state, and only the
        // flagged states kept.
        let kept = match mask {
            Some(m) if scanning && m.len() == kept => m.iter().filter(|k| **k).count(),
            Some(_) => return None,
            None => kept,
        };
        if !crate::eval::batch_fits(kept.checked_mul(keep.len())?) {
            return None;
        }
        let program = Program {
            code: c.code,
            init: c.init,
            exts: c.exts,
        };
        let inputs: Vec<u32> = sources.iter().flat_map(|s| s.regs.iter().copied()).collect();
        let lanes = Lanes::new(&program, &inputs, &acc, &result);
        let looped = MappedLoop {
            program,
            lanes,
            split,
            sources,
            item,
            acc,
            result,
            keep,
            items: n,
            scanning,
        };
        let seed = seed_bits.as_deref();
        let data = match acc_kind {
            Kind::Int => i64::data(looped.run(seed, kept, mask)?),
            Kind::Float => f32::data(looped.run(seed, kept, mask)?),
            Kind::Bool => bool::data(looped.run(seed, kept, mask)?),
        };
        let shape = scanning.then_some(kept).into_iter().chain(kept_shape).collect();
        Some(Array { shape, data })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each fast instruction computes what `atom_op` gives for its name,
    /// on NaN, ±0.0, infinities and Ints that wrap.
    #[test]
    fn fast_instructions_agree_with_atom_op() {
        let floats = [
            0.0f32,
            -0.0,
            1.5,
            -2.25,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MAX,
        ];
        let ints = [0i64, 1, -1, 7, i64::MAX, i64::MIN, 1 << 40];
        let names = [
            "f.+", "f.-", "f.*", "+", "-", "*", "f.==", "f.!=", "f.<", "f.>", "f.<=", "f.>=", "==", "!=",
            "<", ">", "<=", ">=",
        ];
        for name in names {
            let (Some(fast), Some(op)) = (Fast::of(name), atom_op(name)) else {
                unreachable!("{name} has a fast form and an atom op");
            };
            for a in 0..floats.len().max(ints.len()) {
                for b in 0..floats.len().max(ints.len()) {
                    let (want, x, y) = match op {
                        AtomOp::Fff(f) => {
                            let (x, y) = (floats[a % floats.len()], floats[b % floats.len()]);
                            (float_bits(f(x, y)), float_bits(x), float_bits(y))
                        }
                        AtomOp::Ffb(f) => {
                            let (x, y) = (floats[a % floats.len()], floats[b % floats.len()]);
                            (u64::from(f(x, y)), float_bits(x), float_bits(y))
                        }
                        AtomOp::Iii(f) => {
                            let (x, y) = (ints[a % ints.len()], ints[b % ints.len()]);
                            (f(x, y) as u64, x as u64, y as u64)
                        }
                        AtomOp::Iib(f) => {
                            let (x, y) = (ints[a % ints.len()], ints[b % ints.len()]);
                            (u64::from(f(x, y)), x as u64, y as u64)
                        }
                        _ => unreachable!("{name}: an unexpected kind of operation"),
                    };
                    assert_eq!(fast.apply(x, y), want, "{name} on {x:#x} {y:#x}");
                }
            }
        }
    }
}

//! Fused explicit maps → the loop level: every array a buffer, every map a
//! nest of loops, every function inlined where it is applied.
//!
//! The pass is an evaluator that writes code instead of computing. Each
//! expression gives a [`Val`]: a scalar *expression* (nothing computed
//! yet: a fused chain of scalar steps stays one expression), a *view* of a
//! buffer (offset, extents and strides, so `reverse`, `transpose`,
//! `replicate`, slices and the cells of a map are index arithmetic and
//! never a copy), a function (a closure over what was in scope where it
//! was written, applied by inlining its body), or a primitive.
//!
//! Arrays are written in *destination-passing style*: [`Alloc::into`]
//! computes an expression straight into the place its consumer gives (a
//! map's cell of the map's result, a frame's item), so nested maps and
//! frames allocate one buffer for the whole result.
//!
//! What it cannot compile yet is an [`Unsupported`] naming the construct;
//! the driver then runs the program on the interpreter.

use crate::loops::{self, Elem, Expr, Extent, Order, Stmt, Var};
use crate::lower::Unsupported;
use crate::maps::{self, Atom, Decl, Kind};
use remora_check::typed::VarId;
use remora_types::{Atom as TyAtom, DVar, Dim, IVar, Index, SVar, Seg, Shape, Type};
use std::collections::HashMap;
use std::rc::Rc;

mod appends;
mod boxes;
mod boxframes;
mod checks;
mod compact;
mod contract;
mod empty;
mod exps;
mod files;
mod folds;
mod gather;
mod hoist;
mod inplace;
mod interchange;
mod items;
mod iteration;
mod lanes;
mod order;
mod pairs;
mod powers;
mod prefetch;
mod prims;
mod ranges;
mod records;
mod reuse;
mod siblings;
mod stacked;
mod styles;
mod together;
mod trace;
mod wraps;

/// A view of a buffer: the atom at index `(i0, i1, …)` is at
/// `offset + Σ ik·strides[k]`.
#[derive(Clone, Debug)]
pub struct View {
    buf: Var,
    elem: Elem,
    offset: Expr,
    dims: Vec<Expr>,
    strides: Vec<Expr>,
}

impl View {
    fn contiguous(buf: Var, elem: Elem, dims: Vec<Expr>) -> View {
        let mut strides = vec![Expr::Int(1); dims.len()];
        for k in (0..dims.len().saturating_sub(1)).rev() {
            strides[k] = Expr::mul(strides[k + 1].clone(), dims[k + 1].clone());
        }
        View {
            buf,
            elem,
            offset: Expr::Int(0),
            dims,
            strides,
        }
    }

    /// The cell at `idx`, a position of the first `idx.len()` axes.
    fn cell(&self, idx: &[Expr]) -> View {
        let mut offset = self.offset.clone();
        for (i, s) in idx.iter().zip(&self.strides) {
            offset = Expr::add(offset, Expr::mul(i.clone(), s.clone()));
        }
        View {
            buf: self.buf,
            elem: self.elem,
            offset,
            dims: self.dims[idx.len().min(self.dims.len())..].to_vec(),
            strides: self.strides[idx.len().min(self.strides.len())..].to_vec(),
        }
    }

    fn load(&self) -> Expr {
        Expr::load(self.buf, self.offset.clone())
    }

    /// Whether the atoms are laid out in row-major order without gaps
    /// (from any offset).
    fn is_dense(&self) -> bool {
        View::contiguous(self.buf, self.elem, self.dims.clone()).strides == self.strides
    }

    /// The atom at flat position `p` of a dense view.
    fn load_at(&self, p: Expr) -> Expr {
        Expr::load(self.buf, Expr::add(self.offset.clone(), p))
    }
}

/// What an expression gives at compile time.
#[derive(Clone)]
enum Val<'m> {
    Scalar(Elem, Expr),
    Array(View),
    Func(Rc<Closure<'m>>),
    /// An array not computed yet: a map whose every element its consumer
    /// (a reduction) computes where it needs it, so that a map into a
    /// reduction is one loop and allocates nothing (map→reduce fusion).
    Delayed(Rc<Delayed<'m>>),
    /// `(rotate src k)` not copied: item `i` is item `(i + split) mod d` of
    /// `src` (`split` is `k mod d`, computed once). A map over it, or a
    /// reduction of it, reads `src` in place; anything else gets it
    /// copied ([`Alloc::force`]).
    Rotated(Rotation),
    /// An intrinsic, with the type and index arguments given so far.
    Prim {
        name: &'static str,
        types: Vec<TyAtom>,
        indices: Vec<Index>,
    },
    /// A scalar intrinsic given fewer arguments than it takes (`(- 5)`):
    /// the rest come with a later application.
    Partial {
        func: std::boxed::Box<Val<'m>>,
        args: Vec<Val<'m>>,
    },
    /// An array of functions of a shape known when compiling: its items
    /// in row-major order (a map over it is unrolled, each position
    /// applying its own function).
    Funcs {
        shape: Vec<usize>,
        items: Vec<Val<'m>>,
    },
    /// One box: its witness (sizes computed at run time are expressions
    /// like any other) and its payload.
    Box {
        witness: IndexVal,
        payload: std::boxed::Box<Val<'m>>,
    },
    /// One record: its fields' values.
    Record(Vec<(String, Val<'m>)>),
    /// An array of boxes of different sizes, held ragged.
    Boxes(Rc<boxframes::BoxFrame>),
    /// A `grade` not made yet (see [`compact::Graded`]); made where it is
    /// read other than by a partition.
    Graded(Rc<compact::Graded<'m>>),
    /// An exclusive sum scan of flags not made (see [`compact::Offsets`]);
    /// made where it is read other than by `last` or a compaction.
    Offsets(Rc<compact::Offsets<'m>>),
    /// An `iscan` not made (see [`iteration::Scanned`]); made where it is
    /// read other than as the items of a `filter`.
    Scanned(Rc<iteration::Scanned<'m>>),
}

/// See [`Val::Rotated`]: item `i` (of `dims[0]`, at most the source's
/// items: a rotation taken or dropped from) is the source's item `(i +
/// split) mod d`.
#[derive(Clone, Debug)]
struct Rotation {
    src: View,
    split: Expr,
    dims: Vec<Expr>,
}

impl Rotation {
    /// The cell at `idx` (at least one index): the first wrapped around.
    fn cell(&self, idx: &[Expr]) -> View {
        let Some((first, rest)) = idx.split_first() else {
            return self.src.clone();
        };
        let d = self.src.dims[0].clone();
        let j = Expr::op("wrap", vec![Expr::add(first.clone(), self.split.clone()), d]);
        let mut at = vec![j];
        at.extend(rest.iter().cloned());
        self.src.cell(&at)
    }
}

/// The cell at `idx` of an array that can be indexed in place (a view, or
/// a rotation of one).
fn cell_of(v: &Val<'_>, idx: &[Expr]) -> Option<View> {
    match v {
        Val::Array(a) => Some(a.cell(idx)),
        Val::Rotated(r) if !idx.is_empty() => Some(r.cell(idx)),
        _ => None,
    }
}

/// A map not computed yet, with what was in scope where it was written.
struct Delayed<'m> {
    map: &'m maps::Expr,
    scope: Scope<'m>,
    elem: Elem,
    dims: Vec<Expr>,
    /// The map's two axes swapped (`transpose2d` of a rank-2 map read by a
    /// reduction): `dims` are the swapped ones; its atoms are read one at
    /// a time, never a row.
    transposed: bool,
    /// An `append` of vectors (`map` is the append): its parts, made or
    /// delayed where it was written (see [`appends`]).
    appended: Option<Rc<appends::Appended<'m>>>,
    /// Cells made whole, one item at a time, never atom by atom (a float
    /// sum's items that are arrays made by `let`s and intrinsics, an
    /// outer product: [`Alloc::whole_cells`]); read only by the
    /// item-by-item forms of a reduction, computed whole by any other.
    whole_cells: bool,
}

/// What a `let` does with its body.
enum Tail<'a> {
    /// Gives its value.
    Value,
    /// Writes it into a place.
    Into(&'a View),
    /// Writes it over a loop state it updates (see [`inplace`]).
    Update(&'a View),
    /// A record step: the fields named written over their states (see
    /// [`inplace`]).
    Record(&'a [(String, View)]),
}

/// A function written in the program, with what was in scope there.
struct Closure<'m> {
    binder: Binder,
    body: &'m maps::Expr,
    scope: Scope<'m>,
}

#[derive(Clone, Copy)]
enum Binder {
    Value(VarId),
    Type,
    Index(IVar),
}

/// What names mean where code is being written.
#[derive(Clone, Default)]
struct Scope<'m> {
    vars: HashMap<VarId, Val<'m>>,
    dims: HashMap<DVar, Expr>,
    shapes: HashMap<SVar, Vec<Expr>>,
}

type Res<T> = Result<T, Unsupported>;

fn unsupported<T>(what: impl Into<String>) -> Res<T> {
    Err(Unsupported {
        span: remora_syntax::Span::default(),
        what: what.into(),
    })
}

fn elem_of(t: &TyAtom) -> Res<Elem> {
    match t {
        TyAtom::Int => Ok(Elem::Int),
        TyAtom::Float => Ok(Elem::Float),
        TyAtom::Bool => Ok(Elem::Bool),
        TyAtom::Record(_) => unsupported("records"),
        TyAtom::Sigma(..) => unsupported("boxes"),
        TyAtom::Arrow(..) | TyAtom::Forall(..) | TyAtom::Pi(..) => unsupported("arrays of functions"),
        TyAtom::Var(_) => unsupported("a value of a type known only at run time"),
    }
}

/// The program's entry `entry` (or, with none, its bare expressions) as
/// loops.
pub fn allocate(p: &maps::Program, entry: &str) -> Res<loops::Program> {
    let mut a = Alloc {
        out: loops::Program::default(),
        scope: Scope::default(),
        loop_depth: 0,
        ordered_loops: 0,
        delayed: 0,
        var_names: &p.var_names,
        in_place: HashMap::new(),
    };
    let mut body = Vec::new();
    // Which declaration runs, as the interpreter chooses (what it reports
    // as an error is left to it).
    let named = p
        .decls
        .iter()
        .filter(|d| matches!(d, Decl::Def { entry: true, name, .. } if name == entry))
        .count();
    let any_entry = p.decls.iter().any(|d| matches!(d, Decl::Def { entry: true, .. }));
    let bare = p.decls.iter().any(|d| matches!(d, Decl::Expr(_)));
    match (named, any_entry, bare) {
        (1, _, _) | (0, false, true) => {}
        _ => return unsupported(format!("a program without one {entry} entry to run")),
    }
    let has_entry = named == 1;
    // As the interpreter: every definition in order, entries too (a later
    // declaration may name one), then the entry run.
    let mut run = None;
    for d in &p.decls {
        match d {
            Decl::Def {
                var,
                name,
                entry: is_entry,
                value,
            } => {
                let v = a.bound(value, &mut body)?;
                if *is_entry && name == entry {
                    run = Some((value, v.clone()));
                }
                a.scope.vars.insert(*var, v);
            }
            Decl::Expr(e) => {
                let v = a.value(e, &mut body)?;
                if !has_entry {
                    a.output(v, &e.ty, &mut body)?;
                }
            }
        }
    }
    match run {
        // An entry of parameters applied to the inputs; one of none is
        // its value.
        Some((value, Val::Func(_))) => a.entry(value, &mut body)?,
        Some((value, v)) => a.output(v, &value.ty, &mut body)?,
        None => {}
    }
    empty::skip_empty_nests(&mut body);
    checks::raise_checks(&mut body);
    checks::precompute_verdicts(&mut body, &a.out.inputs, &mut a.out.names);
    trace::in_order(&mut body);
    stacked::read_in_place(&mut body, &a.out.outputs);
    hoist::hoist_reductions(&mut body, &mut a.out.names);
    contract::contractions(&mut body);
    styles::turn_lifted_sums(&mut body, &mut a.out.names);
    let extents: std::collections::HashSet<Var> = a
        .out
        .inputs
        .iter()
        .flat_map(|i| &i.dims)
        .filter_map(|d| match d {
            Extent::Declare(v) => Some(*v),
            Extent::Equal(_) => None,
        })
        .collect();
    let inputs: Vec<Var> = a.out.inputs.iter().map(|i| i.buf).collect();
    ranges::simplify(&mut body, &a.out.outputs, &inputs, &extents);
    interchange::reductions_inside_out(&mut body, &mut a.out.names);
    siblings::fuse_siblings(&mut body, &a.out.outputs, &mut a.out.names);
    items::shared_items(&mut body, &mut a.out.names);
    reuse::write_over_dead(&mut body, &mut a.out.outputs);
    powers::shared_logs(&mut body, &mut a.out.names);
    folds::carried_items(&mut body, &mut a.out.names);
    lanes::cells_in_lanes(&mut body, &mut a.out.names);
    exps::one_exp_of_two(&mut body, &mut a.out.names);
    wraps::split_at_wraps(&mut body, &mut a.out.names);
    prefetch::read_ahead(&mut body, &a.out.inputs);
    powers::whole_exponents(&mut body);
    together::dead_reductions(&mut body, &a.out.outputs);
    pairs::one_pass_pairs(&mut body, &mut a.out.names);
    together::reductions_together(&mut body, &mut a.out.names);
    a.out.body = body;
    loops::verify(&a.out).map_err(|m| Unsupported {
        span: remora_syntax::Span::default(),
        what: format!("internal error: the loop level breaks its rules: {m}"),
    })?;
    Ok(a.out)
}

struct Alloc<'m> {
    out: loops::Program,
    scope: Scope<'m>,
    /// How many loops enclose the code being written (the outermost loop
    /// is the parallel one).
    loop_depth: usize,
    /// How many of those loops are a map's, each cell once in order (where
    /// a `trace` prints as the interpreter does).
    ordered_loops: usize,
    /// How many delayed maps are being made (code written away from where
    /// the map was: no `trace` there).
    delayed: usize,
    var_names: &'m [String],
    /// The `let` bindings of the step being written that update a loop
    /// state in place, each with the state (see [`inplace`]).
    in_place: HashMap<VarId, View>,
}

impl<'m> Alloc<'m> {
    /// `map` delayed as it is: computed where it is read, in the scope
    /// of here.
    fn delayed(&self, map: &'m maps::Expr) -> Res<Rc<Delayed<'m>>> {
        Ok(Rc::new(Delayed {
            map,
            scope: self.scope.clone(),
            elem: elem_of(&map.ty.atom)?,
            dims: self.dims(&map.ty.shape)?,
            transposed: false,
            appended: None,
            whole_cells: false,
        }))
    }

    fn fresh(&mut self, name: &str) -> Var {
        let v = Var(self.out.names.len() as u32);
        self.out.names.push(name.to_string());
        v
    }

    fn name_of(&self, v: VarId) -> String {
        self.var_names.get(v.0 as usize).cloned().unwrap_or_default()
    }

    // -- types to sizes ----------------------------------------------------

    /// A dimension as an Int expression. Arithmetic on sizes known only
    /// at run time is checked there (`dim+`, `dim*`: overflowing 64 bits
    /// is an error, as in the interpreter).
    fn dim(&self, d: &Dim) -> Res<Expr> {
        if d.overflowed() || matches!(self.exact_dim(d), Some(None)) {
            return unsupported("a dimension whose arithmetic overflows");
        }
        let mut e = Expr::Int(d.constant());
        for (mono, coef) in d.terms() {
            let mut t = Expr::Int(*coef);
            for v in mono {
                let Some(x) = self.scope.dims.get(v) else {
                    return unsupported("a dimension known only at run time");
                };
                t = dim_op("dim*", t, x.clone())?;
            }
            e = dim_op("dim+", e, t)?;
        }
        Ok(e)
    }

    /// The dimension counted without wrapping where every variable is a
    /// number (the interpreter's error where it overflows: `Some(None)`).
    fn exact_dim(&self, d: &Dim) -> Option<Option<i64>> {
        let mut sum = Some(d.constant());
        for (mono, coef) in d.terms() {
            let mut term = Some(*coef);
            for v in mono {
                let Some(Expr::Int(x)) = self.scope.dims.get(v) else {
                    return None;
                };
                term = term.and_then(|t| t.checked_mul(*x));
            }
            sum = sum.zip(term).and_then(|(s, t)| s.checked_add(t));
        }
        Some(sum)
    }

    fn dims(&self, s: &Shape) -> Res<Vec<Expr>> {
        let mut out = Vec::new();
        for seg in s.segs() {
            match seg {
                Seg::Dim(d) => out.push(self.dim(d)?),
                Seg::Var(v) => match self.scope.shapes.get(v) {
                    Some(ds) => out.extend(ds.iter().cloned()),
                    None => return unsupported("a shape known only at run time"),
                },
            }
        }
        Ok(out)
    }

    fn index(&self, i: &Index) -> Res<IndexVal> {
        Ok(match i {
            Index::Dim(d) => IndexVal::Dim(self.dim(d)?),
            Index::Shape(s) => IndexVal::Shape(self.dims(s)?),
        })
    }

    // -- the entry and the outputs -------------------------------------------

    fn entry(&mut self, value: &'m maps::Expr, body: &mut Vec<Stmt>) -> Res<()> {
        // Peel the entry's index and type parameters, then its parameters.
        let mut e = value;
        let mut params = Vec::new();
        loop {
            match &e.kind {
                Kind::Array { shape, atoms } if shape.is_empty() && atoms.len() == 1 => match &atoms[0] {
                    Atom::ILambda { body, .. } | Atom::TLambda { body, .. } => e = body,
                    Atom::Lambda {
                        param,
                        param_ty,
                        body,
                    } => {
                        params.push((*param, param_ty));
                        e = body;
                    }
                    _ => break,
                },
                _ => break,
            }
        }
        for (param, ty) in params {
            let elem = elem_of(&ty.atom)?;
            let buf = self.fresh(&self.name_of(param));
            let mut extents = Vec::new();
            let mut dims = Vec::new();
            for seg in ty.shape.segs() {
                let Seg::Dim(d) = seg else {
                    return unsupported("an entry parameter of any rank");
                };
                match (d.as_const(), d.vars().as_slice()) {
                    (Some(n), _) => {
                        extents.push(Extent::Equal(Expr::Int(n)));
                        dims.push(Expr::Int(n));
                    }
                    (None, [v]) if *d == Dim::var(*v) => match self.scope.dims.get(v) {
                        Some(x) => {
                            extents.push(Extent::Equal(x.clone()));
                            dims.push(x.clone());
                        }
                        None => {
                            let x = self.fresh("dim");
                            self.scope.dims.insert(*v, Expr::Var(x));
                            extents.push(Extent::Declare(x));
                            dims.push(Expr::Var(x));
                        }
                    },
                    // `(+ c $v)`: at least `c` items, `$v` the rest (fewer
                    // is the interpreter's error, run again).
                    (None, [v])
                        if d.constant() > 0
                            && matches!(d.terms(), [(m, 1)] if m.len() == 1)
                            && !self.scope.dims.contains_key(v) =>
                    {
                        let x = self.fresh("dim");
                        let c = Expr::Int(d.constant());
                        body.push(Stmt::If {
                            cond: Expr::op("<", vec![Expr::Var(x), c.clone()]),
                            then: vec![Stmt::Fail {
                                what: "an argument of fewer items than its parameter's type".into(),
                            }],
                            otherwise: Vec::new(),
                        });
                        self.scope.dims.insert(*v, Expr::op("-", vec![Expr::Var(x), c]));
                        extents.push(Extent::Declare(x));
                        dims.push(Expr::Var(x));
                    }
                    _ => return unsupported("an entry parameter whose extent is a sum or product"),
                }
            }
            self.out.inputs.push(loops::Input {
                buf,
                elem,
                dims: extents,
            });
            let view = View::contiguous(buf, elem, dims);
            let v = if view.dims.is_empty() {
                Val::Scalar(elem, view.load())
            } else {
                Val::Array(view)
            };
            self.scope.vars.insert(param, v);
        }
        let v = self.value(e, body)?;
        self.output(v, &e.ty, body)
    }

    fn output(&mut self, v: Val<'m>, ty: &Type, body: &mut Vec<Stmt>) -> Res<()> {
        if let Val::Box { witness, payload } = &v {
            return self.output_box(witness, payload, ty, body);
        }
        if let Val::Boxes(b) = &v {
            return self.output_boxes(b, body);
        }
        if let TyAtom::Record(types) = &ty.atom {
            return self.output_record(v, ty, types, body);
        }
        let elem = elem_of(&ty.atom)?;
        let v = self.force(v, body)?;
        let dims = match (self.dims(&ty.shape), &v) {
            (Ok(dims), _) => dims,
            // A type naming the witness of an unbox it escaped: the value
            // knows its extents.
            (Err(_), Val::Array(view)) => view.dims.clone(),
            (Err(u), _) => return Err(u),
        };
        let value = self.written(v, elem, &dims, body)?;
        self.out.outputs.push(loops::Output {
            value,
            elem,
            dims,
            witness: None,
            record: None,
        });
        Ok(())
    }

    /// How an output of `dims` writes `v`: a scalar as it is, a whole
    /// buffer of that shape as it is (or its atoms from an offset on, a
    /// dense run of them), anything else copied into a buffer of its own
    /// first.
    fn written(
        &mut self,
        v: Val<'m>,
        elem: Elem,
        dims: &[Expr],
        body: &mut Vec<Stmt>,
    ) -> Res<loops::Written> {
        Ok(match self.force(v, body)? {
            Val::Scalar(_, x) if dims.is_empty() => loops::Written::Scalar(x),
            Val::Array(view) if self.is_whole(&view) && view.dims.len() == dims.len() => {
                loops::Written::Buffer(view.buf)
            }
            Val::Array(view) if view.is_dense() && view.dims.len() == dims.len() => loops::Written::From {
                buf: view.buf,
                offset: view.offset,
            },
            v => {
                let dest = self.alloc("result", elem, dims.to_vec(), body);
                self.copy(v, &dest, body)?;
                loops::Written::Buffer(dest.buf)
            }
        })
    }

    /// A box at the top: its witness (an Int vector), then its payload;
    /// the driver makes them one box again.
    fn output_box(
        &mut self,
        witness: &IndexVal,
        payload: &Val<'m>,
        ty: &Type,
        body: &mut Vec<Stmt>,
    ) -> Res<()> {
        let TyAtom::Sigma(var, inner) = &ty.atom else {
            return unsupported("a box of a type that is not a box's");
        };
        if !ty.shape.is_scalar() {
            return unsupported("boxes");
        }
        let kind = match witness {
            IndexVal::Dim(_) => loops::Witness::Dim,
            IndexVal::Shape(_) => loops::Witness::Shape,
        };
        let sizes = witness.dims().to_vec();
        let buf = self.alloc("witness", Elem::Int, vec![Expr::Int(sizes.len() as i64)], body);
        for (k, size) in sizes.iter().enumerate() {
            body.push(Stmt::Store {
                buf: buf.buf,
                index: Expr::Int(k as i64),
                value: size.clone(),
            });
        }
        self.out.outputs.push(loops::Output {
            value: loops::Written::Buffer(buf.buf),
            elem: Elem::Int,
            dims: vec![Expr::Int(sizes.len() as i64)],
            witness: Some(kind),
            record: None,
        });
        // The payload's type names the witness.
        let saved = self.scope.clone();
        let r = self
            .bind_witness(*var, witness)
            .and_then(|()| self.output(payload.clone(), inner, body));
        self.scope = saved;
        r
    }

    /// The index variable `v` bound to a box's witness (a dimension and a
    /// shape of one dimension are the same sizes).
    fn bind_witness(&mut self, v: IVar, witness: &IndexVal) -> Res<()> {
        match (v, witness) {
            (IVar::Dim(d), IndexVal::Dim(x)) => {
                self.scope.dims.insert(d, x.clone());
            }
            (IVar::Dim(d), IndexVal::Shape(xs)) if xs.len() == 1 => {
                self.scope.dims.insert(d, xs[0].clone());
            }
            (IVar::Shape(s), IndexVal::Dim(x)) => {
                self.scope.shapes.insert(s, vec![x.clone()]);
            }
            (IVar::Shape(s), IndexVal::Shape(xs)) => {
                self.scope.shapes.insert(s, xs.clone());
            }
            _ => return unsupported("unbox of a witness of another kind"),
        }
        Ok(())
    }

    /// Whether `view` is its whole buffer, contiguous from 0.
    fn is_whole(&self, view: &View) -> bool {
        view.offset == Expr::Int(0) && view.is_dense()
    }

    // -- values ---------------------------------------------------------------

    /// The value of `e` bound to a name: a scalar that is not trivial is
    /// computed here, once, into a variable.
    fn bound(&mut self, e: &'m maps::Expr, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        let v = self.value(e, body)?;
        Ok(self.named(v, "x", body))
    }

    fn named(&mut self, v: Val<'m>, name: &str, body: &mut Vec<Stmt>) -> Val<'m> {
        match v {
            Val::Scalar(elem, x) => Val::Scalar(elem, self.named_scalar(name, elem, x, body)),
            v => v,
        }
    }

    /// `x` bound to a variable of its own unless it costs nothing.
    fn named_scalar(&mut self, name: &str, elem: Elem, x: Expr, body: &mut Vec<Stmt>) -> Expr {
        if x.is_trivial() {
            return x;
        }
        let var = self.fresh(name);
        body.push(Stmt::Let { var, elem, value: x });
        Expr::Var(var)
    }

    fn named_int(&mut self, name: &str, x: Expr, body: &mut Vec<Stmt>) -> Expr {
        self.named_scalar(name, Elem::Int, x, body)
    }

    fn value(&mut self, e: &'m maps::Expr, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        // A value the interpreter cannot hold is an error there, found at
        // once; compiled, a fused loop would run over all its atoms.
        if let Ok(dims) = self.dims(&e.ty.shape) {
            let atoms = dims.iter().try_fold(1u128, |n, d| match d {
                Expr::Int(d) => Some(n.saturating_mul(u128::try_from(*d).unwrap_or(0))),
                _ => None,
            });
            if atoms.is_some_and(|n| n > remora_value::limits::MAX_ATOMS as u128) {
                return unsupported(format!(
                    "too large for the compiled engine: a value of more than {} atoms",
                    remora_value::limits::MAX_ATOMS
                ));
            }
        }
        match &e.kind {
            Kind::Array { shape, atoms } => {
                if shape.is_empty() && atoms.len() == 1 {
                    if let Atom::Box {
                        witness,
                        body: payload,
                    } = &atoms[0]
                    {
                        let witness = self.index(witness)?;
                        let payload = self.value(payload, body)?;
                        let payload = self.named(payload, "payload", body);
                        return Ok(Val::Box {
                            witness,
                            payload: std::boxed::Box::new(payload),
                        });
                    }
                    return self.atom(&atoms[0]);
                }
                if matches!(e.ty.atom, TyAtom::Sigma(..)) {
                    return self.box_frame(e, body);
                }
                if is_function(&e.ty.atom) {
                    let items = atoms.iter().map(|a| self.atom(a)).collect::<Res<Vec<_>>>()?;
                    return Ok(Val::Funcs {
                        shape: shape.iter().map(|n| *n as usize).collect(),
                        items,
                    });
                }
                let elem = elem_of(&e.ty.atom)?;
                let atoms = atoms
                    .iter()
                    .map(|a| match a {
                        Atom::Int(n) => Ok(Expr::Int(*n)),
                        Atom::Float(x) => Ok(Expr::Float(*x)),
                        Atom::Bool(b) => Ok(Expr::Bool(*b)),
                        _ => unsupported("an array of functions or boxes"),
                    })
                    .collect::<Res<Vec<_>>>()?;
                let buf = self.fresh("lit");
                body.push(Stmt::Data { buf, elem, atoms });
                let dims = shape.iter().map(|n| Expr::Int(*n as i64)).collect();
                Ok(Val::Array(View::contiguous(buf, elem, dims)))
            }
            Kind::Var(v) => match self.scope.vars.get(v) {
                Some(Val::Graded(g)) => {
                    let g = g.clone();
                    let dims = self.dims(&e.ty.shape)?;
                    self.grade_of_keys(&g.keys, dims, body)
                }
                Some(Val::Offsets(o)) => {
                    let o = o.clone();
                    self.offsets_made(&o, body)
                }
                Some(Val::Scanned(s)) => {
                    let s = s.clone();
                    self.scanned_made(&s, body)
                }
                Some(x) => Ok(x.clone()),
                None => unsupported(format!("the variable {}", self.name_of(*v))),
            },
            Kind::Prim("pi") => Ok(Val::Scalar(Elem::Float, Expr::Float(std::f32::consts::PI))),
            Kind::Prim(name) if !is_function(&e.ty.atom) => {
                self.intrinsic(name, &[], &[], Vec::new(), e, body)
            }
            Kind::Prim(name) => Ok(Val::Prim {
                name,
                types: Vec::new(),
                indices: Vec::new(),
            }),
            Kind::TApp { func, arg } => match self.value(func, body)? {
                Val::Prim {
                    name,
                    mut types,
                    indices,
                } => {
                    types.push(arg.clone());
                    if !is_function(&e.ty.atom) {
                        return self.intrinsic(name, &types, &indices, Vec::new(), e, body);
                    }
                    Ok(Val::Prim { name, types, indices })
                }
                Val::Func(c) if matches!(c.binder, Binder::Type) => self.enter(&c, None, body),
                _ => unsupported("a type application"),
            },
            Kind::IApp { func, arg } => match self.value(func, body)? {
                // The intrinsics that are values once instantiated.
                Val::Prim {
                    name: "iota/static", ..
                } => {
                    let dims = self.dims(&e.ty.shape)?;
                    Ok(Val::Array(self.iota(dims, body)))
                }
                Val::Prim {
                    name: "reify-dim", ..
                } => match self.index(arg)? {
                    IndexVal::Dim(Expr::Int(n)) if n < 0 => unsupported("a negative dimension"),
                    // (One computed at run time: a witness, never negative.)
                    IndexVal::Dim(d) => Ok(Val::Scalar(Elem::Int, d)),
                    IndexVal::Shape(_) => unsupported("reify-dim of a shape"),
                },
                Val::Prim {
                    name,
                    types,
                    mut indices,
                } => {
                    indices.push(arg.clone());
                    if !is_function(&e.ty.atom) {
                        return self.intrinsic(name, &types, &indices, Vec::new(), e, body);
                    }
                    Ok(Val::Prim { name, types, indices })
                }
                Val::Func(c) if matches!(c.binder, Binder::Index(_)) => {
                    let i = self.index(arg)?;
                    // A dimension instantiated must not be negative.
                    let dims: Vec<Expr> = match &i {
                        IndexVal::Dim(d) => vec![d.clone()],
                        IndexVal::Shape(ds) => ds.clone(),
                    };
                    if dims.iter().any(|d| matches!(d, Expr::Int(n) if *n < 0)) {
                        return unsupported("a negative dimension");
                    }
                    self.non_negative(&dims, body);
                    self.enter(&c, Some(Arg::Index(i)), body)
                }
                _ => unsupported("an index application"),
            },
            Kind::App { func, args } if !is_append(e) => {
                if let Some(v) = self.offsets_use(e, body)? {
                    return Ok(v);
                }
                if let Some(v) = self.scanned_filter(e, body)? {
                    return Ok(v);
                }
                if let Some(v) = self.selected_sort(e, body)? {
                    return Ok(v);
                }
                if let Some(v) = self.counted_partition(e, body)? {
                    return Ok(v);
                }
                let f = self.value(func, body)?;
                let vals = self.arguments(&f, args, body)?;
                self.apply(f, vals, e, body)
            }
            Kind::Map { frame, .. } if frame.is_scalar() => self.let_(e, None, body),
            Kind::Frame { shape, elems } if is_function(&e.ty.atom) => {
                self.frame_of_functions(shape, elems, body)
            }
            Kind::Map { .. } | Kind::Frame { .. } if matches!(e.ty.atom, TyAtom::Record(_)) => {
                self.record_array(e, body)
            }
            Kind::Map { .. } | Kind::Frame { .. } if matches!(e.ty.atom, TyAtom::Sigma(..)) => {
                self.box_frame(e, body)
            }
            // (An append of arrays too: see `into`.)
            Kind::Map { .. } | Kind::Frame { .. } | Kind::App { .. } => {
                let elem = elem_of(&e.ty.atom)?;
                let dims = self.dims(&e.ty.shape)?;
                let buf = self.fresh("arr");
                let dest = View::contiguous(buf, elem, dims);
                let mut made = Vec::new();
                self.into(e, &dest, &mut made)?;
                // A map that computes nothing but a copy of a buffer (a
                // function that gives its argument back, lifted): that
                // buffer.
                if let Some(src) = copied_from(&made, buf) {
                    return Ok(Val::Array(View::contiguous(src, elem, dest.dims)));
                }
                body.push(Stmt::Alloc {
                    buf,
                    elem,
                    len: product(&dest.dims),
                });
                body.extend(made);
                Ok(Val::Array(dest))
            }
            Kind::If {
                cond,
                then,
                otherwise,
            } => {
                let c = self.value(cond, body)?;
                let Val::Scalar(_, c) = c else {
                    return unsupported("a condition that is not a scalar");
                };
                if matches!(e.ty.atom, TyAtom::Record(_)) {
                    return self.record_if(e, c, then, otherwise, body);
                }
                let elem = elem_of(&e.ty.atom)?;
                let dims = self.dims(&e.ty.shape)?;
                if dims.is_empty() {
                    let var = self.fresh("if");
                    let mut t = Vec::new();
                    let tv = self.scalar(then, &mut t)?;
                    t.push(Stmt::Set { var, value: tv });
                    let mut o = Vec::new();
                    let ov = self.scalar(otherwise, &mut o)?;
                    o.push(Stmt::Set { var, value: ov });
                    body.push(Stmt::Let {
                        var,
                        elem,
                        value: zero(elem),
                    });
                    body.push(Stmt::If {
                        cond: c,
                        then: t,
                        otherwise: o,
                    });
                    return Ok(Val::Scalar(elem, Expr::Var(var)));
                }
                let buf = self.fresh("if");
                body.push(Stmt::Alloc {
                    buf,
                    elem,
                    len: product(&dims),
                });
                let dest = View::contiguous(buf, elem, dims);
                let mut t = Vec::new();
                self.into(then, &dest, &mut t)?;
                let mut o = Vec::new();
                self.into(otherwise, &dest, &mut o)?;
                body.push(Stmt::If {
                    cond: c,
                    then: t,
                    otherwise: o,
                });
                Ok(Val::Array(dest))
            }
            Kind::Unbox { .. } => self.unboxed(e, body, |a, inner, body| a.value(inner, body)),
            Kind::Record(fields) => {
                let mut vals = Vec::with_capacity(fields.len());
                for (name, x) in fields {
                    let v = self.value(x, body)?;
                    vals.push((name.clone(), self.named(v, "field", body)));
                }
                Ok(Val::Record(vals))
            }
            Kind::Field { record, field } => match self.value(record, body)? {
                Val::Record(fields) => match fields.into_iter().find(|(name, _)| name == field) {
                    Some((_, v)) => Ok(v),
                    None => unsupported(format!("a record without the field {field}")),
                },
                _ => unsupported("records"),
            },
        }
    }

    /// An `unbox` (`e`): its box's witness and payload bound, then its
    /// body given to `write`.
    fn unboxed<T>(
        &mut self,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
        write: impl FnOnce(&mut Self, &'m maps::Expr, &mut Vec<Stmt>) -> Res<T>,
    ) -> Res<T> {
        let Kind::Unbox {
            witness: sigma,
            binder,
            var,
            boxed,
            body: inner,
            ..
        } = &e.kind
        else {
            return unsupported("an unbox");
        };
        let Val::Box { witness, payload } = self.value(boxed, body)? else {
            return unsupported("unbox of an array of boxes");
        };
        let saved = self.scope.clone();
        // As the interpreter: the box type's variable bound to the
        // witness, and a binder of another name to its dimensions.
        let bound = self.bind_witness(*sigma, &witness).and_then(|()| {
            if binder == sigma {
                Ok(())
            } else {
                self.bind_witness(*binder, &IndexVal::Shape(witness.dims().to_vec()))
            }
        });
        self.scope.vars.insert(*var, *payload);
        let r = bound.and_then(|()| write(self, inner, body));
        self.scope = saved;
        r
    }

    /// The arguments of an application of `f`: a reduction's maps left
    /// delayed (computed where it reads them), the others computed.
    fn arguments(&mut self, f: &Val<'m>, args: &'m [maps::Expr], body: &mut Vec<Stmt>) -> Res<Vec<Val<'m>>> {
        let consumes = matches!(f, Val::Prim { name, .. } if FUSED_CONSUMERS.contains(name));
        let mut vals = Vec::with_capacity(args.len());
        for a in args {
            if consumes && delayable(a) && !matches!(a.ty.atom, TyAtom::Record(_)) {
                vals.push(Val::Delayed(self.delayed(a)?));
                continue;
            }
            if consumes && let Some(v) = self.delayed_through_functions(a, body)? {
                vals.push(v);
                continue;
            }
            if consumes && let Some(v) = self.whole_cells(f, &vals, a, args)? {
                vals.push(v);
                continue;
            }
            if let Some(m) = transposed_map(a).filter(|_| consumes) {
                vals.push(Val::Delayed(Rc::new(Delayed {
                    map: m,
                    scope: self.scope.clone(),
                    elem: elem_of(&a.ty.atom)?,
                    dims: self.dims(&a.ty.shape)?,
                    transposed: true,
                    appended: None,
                    whole_cells: false,
                })));
                continue;
            }
            let v = self.value(a, body)?;
            vals.push(self.named(v, "arg", body));
        }
        Ok(vals)
    }

    fn scalar(&mut self, e: &'m maps::Expr, body: &mut Vec<Stmt>) -> Res<Expr> {
        match scalar_of(&self.value(e, body)?) {
            Some(x) => Ok(x),
            None => unsupported("a function where a scalar is expected"),
        }
    }

    fn atom(&mut self, a: &'m Atom) -> Res<Val<'m>> {
        Ok(match a {
            Atom::Int(n) => Val::Scalar(Elem::Int, Expr::Int(*n)),
            Atom::Float(x) => Val::Scalar(Elem::Float, Expr::Float(*x)),
            Atom::Bool(b) => Val::Scalar(Elem::Bool, Expr::Bool(*b)),
            Atom::Lambda { param, body, .. } => self.closure(Binder::Value(*param), body),
            Atom::TLambda { body, .. } => self.closure(Binder::Type, body),
            Atom::ILambda { param, body } => self.closure(Binder::Index(*param), body),
            Atom::Box { .. } => return unsupported("boxes"),
        })
    }

    fn closure(&self, binder: Binder, body: &'m maps::Expr) -> Val<'m> {
        Val::Func(Rc::new(Closure {
            binder,
            body,
            scope: self.scope.clone(),
        }))
    }

    /// A closure's body, in its own scope with its parameter bound.
    fn enter(&mut self, c: &Closure<'m>, arg: Option<Arg<'m>>, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        let saved = std::mem::replace(&mut self.scope, c.scope.clone());
        match (c.binder, arg) {
            (Binder::Value(p), Some(Arg::Value(v))) => {
                self.scope.vars.insert(p, v);
            }
            (Binder::Index(IVar::Dim(d)), Some(Arg::Index(IndexVal::Dim(x)))) => {
                self.scope.dims.insert(d, x);
            }
            (Binder::Index(IVar::Shape(s)), Some(Arg::Index(IndexVal::Shape(x)))) => {
                self.scope.shapes.insert(s, x);
            }
            (Binder::Type, None) => {}
            _ => {
                self.scope = saved;
                return unsupported("a function applied to the wrong kind of argument");
            }
        }
        let r = self.value(c.body, body);
        self.scope = saved;
        r
    }

    /// `f` applied to argument cells of exactly its parameters' types.
    fn apply(
        &mut self,
        f: Val<'m>,
        args: Vec<Val<'m>>,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        match f {
            Val::Func(c) => {
                let mut args = args.into_iter();
                let Some(first) = args.next() else {
                    return Ok(Val::Func(c));
                };
                if !matches!(c.binder, Binder::Value(_)) {
                    return unsupported("a polymorphic function applied without instantiation");
                }
                let r = self.enter(&c, Some(Arg::Value(first)), body)?;
                let rest: Vec<Val<'m>> = args.collect();
                if rest.is_empty() {
                    Ok(r)
                } else {
                    self.apply(r, rest, e, body)
                }
            }
            Val::Prim { name, types, indices } => self.intrinsic(name, &types, &indices, args, e, body),
            Val::Partial { func, args: given } => {
                let mut all = given;
                all.extend(args);
                self.apply(*func, all, e, body)
            }
            _ => unsupported("an application of an array"),
        }
    }

    /// The value of `e`, a map left delayed where it can be (see
    /// [`used_once_by_a_map`]): a map that cannot fail, or a function
    /// applied whose body is one. Its one consumer, a map over it, makes it
    /// cell by cell (map→map fusion across a function call).
    fn value_lazy(&mut self, e: &'m maps::Expr, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        match &e.kind {
            Kind::Map { frame, .. }
                if !frame.is_scalar()
                    && delayable(e)
                    && cannot_fail(e)
                    && !matches!(e.ty.atom, TyAtom::Sigma(..)) =>
            {
                Ok(Val::Delayed(self.delayed(e)?))
            }
            // A reduction: its arguments delayed where they can be.
            Kind::App { func, .. } if is_fused_consumer(func) || is_append(e) => self.value(e, body),
            Kind::App { func, args } => {
                let f = self.value(func, body)?;
                let mut vals = Vec::with_capacity(args.len());
                for a in args {
                    let v = self.value(a, body)?;
                    vals.push(self.named(v, "arg", body));
                }
                let Val::Func(c) = f else {
                    return self.apply(f, vals, e, body);
                };
                if !matches!(c.binder, Binder::Value(_)) || vals.is_empty() {
                    return self.apply(Val::Func(c), vals, e, body);
                }
                let last = vals.pop();
                let mut f = Val::Func(c);
                if !vals.is_empty() {
                    f = self.apply(f, vals, e, body)?;
                }
                match (f, last) {
                    (Val::Func(c), Some(arg)) if matches!(c.binder, Binder::Value(_)) => {
                        let saved = std::mem::replace(&mut self.scope, c.scope.clone());
                        if let Binder::Value(p) = c.binder {
                            self.scope.vars.insert(p, arg);
                        }
                        let r = self.value_lazy(c.body, body);
                        self.scope = saved;
                        r
                    }
                    (f, last) => self.apply(f, last.into_iter().collect(), e, body),
                }
            }
            _ => self.value(e, body),
        }
    }

    /// A run-time error where `cond` holds.
    fn fail_if(&mut self, cond: Expr, what: impl Into<String>, body: &mut Vec<Stmt>) {
        body.push(Stmt::If {
            cond,
            then: vec![Stmt::Fail { what: what.into() }],
            otherwise: Vec::new(),
        });
    }

    // -- elements one at a time ---------------------------------------------

    /// `v` computed, if it is a delayed map.
    fn force(&mut self, v: Val<'m>, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        match v {
            Val::Delayed(d) if d.appended.is_some() => match &d.appended {
                Some(ap) => self.appended_made(&d, ap, body),
                None => unreachable!(),
            },
            Val::Delayed(d) => {
                let saved = std::mem::replace(&mut self.scope, d.scope.clone());
                self.delayed += 1;
                let r = self.value(d.map, body);
                self.delayed -= 1;
                self.scope = saved;
                match r? {
                    Val::Array(mut v) if d.transposed && v.dims.len() == 2 => {
                        v.dims.swap(0, 1);
                        v.strides.swap(0, 1);
                        Ok(Val::Array(v))
                    }
                    _ if d.transposed => unsupported("a transposed map"),
                    v => Ok(v),
                }
            }
            Val::Rotated(r) => {
                let dest = self.alloc("rot", r.src.elem, r.dims.clone(), body);
                self.copy_rotation(&r, &dest, body)?;
                Ok(Val::Array(dest))
            }
            v => Ok(v),
        }
    }

    /// A rotation written into `dest`: two copies, the items from `split`
    /// on, then those before (no wrapping per atom).
    fn copy_rotation(&mut self, r: &Rotation, dest: &View, body: &mut Vec<Stmt>) -> Res<()> {
        let xs = &r.src;
        let split = r.split.clone();
        let mut rest = Expr::op("-", vec![xs.dims[0].clone(), split.clone()]);
        let mut wrapped = split.clone();
        // Fewer items than the source's (a rotation taken from): as many
        // of those from `split` on as there are, the rest from the start.
        if r.dims[0] != xs.dims[0] {
            rest = self.named_int("rest", Expr::op("min", vec![r.dims[0].clone(), rest]), body);
            wrapped = Expr::op("-", vec![r.dims[0].clone(), rest.clone()]);
        }
        let mut tail = xs.clone();
        tail.offset = Expr::add(tail.offset, Expr::mul(split.clone(), xs.strides[0].clone()));
        tail.dims[0] = rest.clone();
        let mut first = dest.clone();
        first.dims[0] = rest.clone();
        self.copy(Val::Array(tail), &first, body)?;
        let mut head = xs.clone();
        head.dims[0] = wrapped.clone();
        let mut second = dest.clone();
        second.offset = Expr::add(second.offset, Expr::mul(rest, dest.strides[0].clone()));
        second.dims[0] = wrapped;
        self.copy(Val::Array(head), &second, body)
    }

    /// The atom of `src` (an array or a delayed map) at `idx`, a position
    /// of every axis: code for it goes into `body`.
    fn element(&mut self, src: &Val<'m>, idx: &[Expr], body: &mut Vec<Stmt>) -> Res<Expr> {
        match src {
            Val::Array(_) | Val::Rotated(_) => match cell_of(src, idx) {
                Some(v) => Ok(v.load()),
                None => unsupported("an element of a function"),
            },
            Val::Delayed(d) => match self.delayed_cell(d, idx, body)? {
                Val::Scalar(_, x) => Ok(x),
                v => match cell_of(&v, &[]) {
                    Some(v) if v.dims.is_empty() => Ok(v.load()),
                    _ => unsupported("an element of a delayed map"),
                },
            },
            _ => unsupported("an element of a function"),
        }
    }

    /// The cell at `idx` of a delayed map: the code that binds the maps'
    /// variables and the `let`s down to that depth goes into `body`, once;
    /// what is left is delayed again (or a scalar, at full depth).
    fn delayed_cell(&mut self, d: &Delayed<'m>, idx: &[Expr], body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        if let Some(ap) = &d.appended {
            return self.appended_cell(d, ap, idx, body);
        }
        let swapped;
        let idx = match idx {
            [i, j] if d.transposed => {
                swapped = [j.clone(), i.clone()];
                &swapped[..]
            }
            _ if d.transposed => return unsupported("a row of a transposed delayed map"),
            idx => idx,
        };
        let saved = std::mem::replace(&mut self.scope, d.scope.clone());
        self.delayed += 1;
        let r = self.delayed_cell_in(d.map, idx, d.elem, body);
        self.delayed -= 1;
        self.scope = saved;
        r
    }

    fn delayed_cell_in(
        &mut self,
        e: &'m maps::Expr,
        idx: &[Expr],
        elem: Elem,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        match &e.kind {
            Kind::Map {
                frame,
                binds,
                body: cell,
            } if !frame.is_scalar() && !idx.is_empty() => {
                let n = self.dims(frame)?.len();
                if n > idx.len() {
                    return unsupported("a cell of a map inside its frame");
                }
                for b in binds {
                    let v = match self.value(&b.value, body)? {
                        // A delayed map this one iterates: its cell too.
                        Val::Delayed(d) if splits_at(d.map, n) => self.delayed_cell(&d, &idx[..n], body)?,
                        v => match records::cell_val_of(&v, &idx[..n]) {
                            Some(v) => v,
                            None => return unsupported("a map over an array of functions"),
                        },
                    };
                    self.scope.vars.insert(b.var, v);
                }
                self.delayed_cell_in(cell, &idx[n..], elem, body)
            }
            Kind::Map {
                frame,
                binds,
                body: inner,
            } if frame.is_scalar() && !e.ty.shape.is_scalar() => {
                for b in binds {
                    let v = self.bound(&b.value, body)?;
                    self.scope.vars.insert(b.var, v);
                }
                self.delayed_cell_in(inner, idx, elem, body)
            }
            // A function applied to the map's variables: its body's cell.
            Kind::App { .. } if !idx.is_empty() => match self.delayed_app_cell(e, idx, elem, body) {
                Some(r) => r,
                None => {
                    let v = self.value(e, body)?;
                    match cell_of(&v, idx) {
                        Some(c) => Ok(cell_val(c)),
                        None => unsupported("a cell of this expression"),
                    }
                }
            },
            _ if idx.is_empty() && e.ty.shape.is_scalar() => Ok(Val::Scalar(elem, self.scalar(e, body)?)),
            _ if idx.is_empty() && delayable(e) => Ok(Val::Delayed(Rc::new(Delayed {
                map: e,
                scope: self.scope.clone(),
                elem,
                dims: self.dims(&e.ty.shape)?,
                transposed: false,
                appended: None,
                whole_cells: false,
            }))),
            _ => {
                let v = self.value(e, body)?;
                if idx.is_empty() {
                    return Ok(v);
                }
                match cell_of(&v, idx) {
                    Some(c) => Ok(cell_val(c)),
                    None => unsupported("a cell of this expression"),
                }
            }
        }
    }

    // -- writing arrays into place ------------------------------------------

    /// `e`'s value written into `dest` (which has `e`'s shape).
    fn into(&mut self, e: &'m maps::Expr, dest: &View, body: &mut Vec<Stmt>) -> Res<()> {
        match &e.kind {
            Kind::Map { frame, .. } if frame.is_scalar() => {
                self.let_(e, Some(dest), body)?;
                Ok(())
            }
            Kind::Map {
                frame,
                binds,
                body: cell,
            } => {
                let frame = self.dims(frame)?;
                let mut arrays = Vec::with_capacity(binds.len());
                let mut functions = false;
                for b in binds {
                    let v = match self.value(&b.value, body)? {
                        // A delayed map whose frame this map's cuts
                        // through: computed whole first.
                        Val::Delayed(d) if !splits_at(d.map, frame.len()) => {
                            self.force(Val::Delayed(d), body)?
                        }
                        v => v,
                    };
                    match v {
                        v @ (Val::Array(_)
                        | Val::Rotated(_)
                        | Val::Delayed(_)
                        | Val::Record(_)
                        | Val::Boxes(_)
                        | Val::Funcs { .. }) => {
                            functions |= matches!(v, Val::Funcs { .. });
                            arrays.push((b.var, v));
                        }
                        _ => return unsupported("a map over an array of functions"),
                    }
                }
                if functions {
                    return self.unrolled(&frame, arrays, cell, dest, body);
                }
                let arrays: Vec<(VarId, Val<'m>)> = arrays
                    .into_iter()
                    .filter(|(_, v)| {
                        matches!(
                            v,
                            Val::Array(_)
                                | Val::Rotated(_)
                                | Val::Delayed(_)
                                | Val::Record(_)
                                | Val::Boxes(_)
                        )
                    })
                    .collect();
                // One loop per frame axis; the outermost runs in parallel
                // when no loop encloses it.
                let indices: Vec<Var> = frame.iter().map(|_| self.fresh("i")).collect();
                let idx: Vec<Expr> = indices.iter().map(|v| Expr::Var(*v)).collect();
                let saved = self.scope.vars.clone();
                self.loop_depth += frame.len();
                self.ordered_loops += frame.len();
                let mut inner = Vec::new();
                let mut bound = Ok(());
                // (A delayed map bound twice: its cell made once.)
                let mut made: Vec<(Rc<Delayed<'m>>, Val<'m>)> = Vec::new();
                for (var, array) in &arrays {
                    let v = match array {
                        Val::Delayed(d) if made.iter().any(|(m, _)| Rc::ptr_eq(m, d)) => {
                            match made.iter().find(|(m, _)| Rc::ptr_eq(m, d)) {
                                Some((_, v)) => v.clone(),
                                None => continue,
                            }
                        }
                        // A delayed map's cell, made here for this position.
                        Val::Delayed(d) => match self.delayed_cell(d, &idx, &mut inner) {
                            Ok(v) => {
                                made.push((d.clone(), v.clone()));
                                v
                            }
                            Err(u) => {
                                bound = Err(u);
                                break;
                            }
                        },
                        _ => match records::cell_val_of(array, &idx) {
                            Some(v) => v,
                            None => {
                                bound = unsupported("a map over an empty frame of a rotation");
                                break;
                            }
                        },
                    };
                    self.scope.vars.insert(*var, v);
                }
                let r = bound.and_then(|()| self.into(cell, &dest.cell(&idx), &mut inner));
                self.loop_depth -= frame.len();
                self.ordered_loops -= frame.len();
                self.scope.vars = saved;
                r?;
                let outer = self.loop_depth;
                inner = nest(&indices, frame, inner, outer);
                body.extend(inner);
                Ok(())
            }
            Kind::Frame { elems, shape } => {
                for (k, x) in elems.iter().enumerate() {
                    // A frame's shape may have several axes; its items are
                    // laid out in row-major order.
                    let cell = dest.cell(&flat_position(k as u64, shape));
                    self.into(x, &cell, body)?;
                }
                Ok(())
            }
            // A reduction whose items are cells: its accumulator is `dest`.
            Kind::App { func, args } if is_reduce(func) && !dest.dims.is_empty() => {
                let f = self.value(func, body)?;
                let vals = self.arguments(&f, args, body)?;
                self.reduce_into(f, vals, e, dest, body)
            }
            // An append: each part written straight into its own items
            // of `dest`, so an append of appends, or of a frame literal,
            // makes no array of its own and copies nothing twice.
            Kind::App { args, .. } if is_append(e) && !dest.dims.is_empty() => {
                let [first, second] = args.as_slice() else {
                    return unsupported("append of other than two arrays");
                };
                let items = |s: &mut Self, x: &maps::Expr| -> Res<Expr> {
                    match s.dims(&x.ty.shape)?.first() {
                        Some(n) => Ok(n.clone()),
                        None => unsupported("append of scalars"),
                    }
                };
                let (m, n) = (items(self, first)?, items(self, second)?);
                let mut head = dest.clone();
                head.dims[0] = m.clone();
                self.into(first, &head, body)?;
                let mut rest = dest.clone();
                rest.offset = Expr::add(rest.offset, Expr::mul(m, dest.strides[0].clone()));
                rest.dims[0] = n;
                self.into(second, &rest, body)
            }
            // An `iscan` (a lifted function's body): its partial
            // reductions written straight into `dest`.
            Kind::App { func, args } if prim_of(func) == Some("iscan") && !dest.dims.is_empty() => {
                let f = self.value(func, body)?;
                let vals = self.arguments(&f, args, body)?;
                if let [op, Val::Array(xs)] = vals.as_slice()
                    && self.iscans_into(&vals, e)
                {
                    return self.iscan_into(op, xs, e, dest, body);
                }
                let v = self.apply(f, vals, e, body)?;
                self.copy(v, dest, body)
            }
            // A function of the program applied: its body written into
            // `dest` (see `apply_into`).
            Kind::App { func, args } if names_a_function(func) && !dest.dims.is_empty() => {
                let f = self.value(func, body)?;
                let mut vals = Vec::with_capacity(args.len());
                for a in args {
                    let v = self.value(a, body)?;
                    vals.push(self.named(v, "arg", body));
                }
                if let Val::Func(_) = f {
                    return self.apply_into(&f, vals, e, dest, body);
                }
                let v = self.apply(f, vals, e, body)?;
                self.copy(v, dest, body)
            }
            _ => {
                let v = self.value(e, body)?;
                self.copy(v, dest, body)
            }
        }
    }

    /// A `let` (a map over the empty frame): its bindings in sequence,
    /// then its body, into `dest` if given.
    fn let_(&mut self, e: &'m maps::Expr, dest: Option<&View>, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        match dest {
            Some(d) => self.let_tail(e, &Tail::Into(d), body),
            None => self.let_tail(e, &Tail::Value, body),
        }
    }

    /// A `let`: its bindings in sequence, then its body as `tail` says.
    fn let_tail(&mut self, e: &'m maps::Expr, tail: &Tail<'_>, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        let Kind::Map {
            binds, body: inner, ..
        } = &e.kind
        else {
            return unsupported("a let");
        };
        let saved = self.scope.vars.clone();
        let r = (|| {
            for (i, b) in binds.iter().enumerate() {
                // A binding nothing reads, that cannot fail: not computed
                // (a derivative's primal recomputed beside its adjoint).
                if self.dead_binding(b, &binds[i + 1..], inner) {
                    continue;
                }
                // The last binding, which the body only names: written
                // straight into `dest` (no array of its own, no copy).
                if matches!(tail, Tail::Into(_) | Tail::Update(_))
                    && i + 1 == binds.len()
                    && matches!(inner.kind, Kind::Var(v) if v == b.var)
                {
                    return self.tail(&b.value, tail, body);
                }
                // An update of a loop state, written over it.
                if matches!(tail, Tail::Update(_) | Tail::Record(_))
                    && let Some(state) = self.in_place.get(&b.var).cloned()
                {
                    self.update_into(&b.value, &state, body)?;
                    self.scope.vars.insert(b.var, Val::Array(state));
                    continue;
                }
                let v = if let Some(keys) = self.graded(b, &binds[i + 1..], inner)? {
                    Val::Graded(Rc::new(compact::Graded { keys }))
                } else if let Some(o) = self.offsets(b, &binds[i + 1..], inner, body)? {
                    o
                } else if let Some(s) = self.scanned(b, &binds[i + 1..], inner, body)? {
                    s
                } else if let Some(v) = self.appended_for_a_scan(b, &binds[i + 1..], inner, body)? {
                    v
                } else if used_once_by_a_map(b.var, &binds[i + 1..], inner)
                    || iteration::scanned_once(b.var, &binds[i + 1..], inner)
                {
                    self.value_lazy(&b.value, body)?
                } else {
                    self.bound(&b.value, body)?
                };
                self.scope.vars.insert(b.var, v);
            }
            self.tail(inner, tail, body)
        })();
        self.scope.vars = saved;
        r
    }

    /// `e` (the body of a `let`) as `tail` says.
    fn tail(&mut self, e: &'m maps::Expr, tail: &Tail<'_>, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        match tail {
            Tail::Value => self.value(e, body),
            Tail::Into(d) => {
                self.into(e, d, body)?;
                Ok(Val::Array((*d).clone()))
            }
            Tail::Update(d) => {
                self.update_into(e, d, body)?;
                Ok(Val::Array((*d).clone()))
            }
            Tail::Record(fields) => self.record_update(e, fields, body),
        }
    }

    /// Whether `b`, of a `let` whose later bindings are `later` and body
    /// `inner`, is read by none of them and computes nothing that could
    /// fail: no run-time error (`cannot_fail`) and no value the interpreter
    /// could not hold (every shape in it known and within its limit), so
    /// that leaving it uncomputed changes no outcome.
    fn dead_binding(&self, b: &maps::Bind, later: &[maps::Bind], inner: &maps::Expr) -> bool {
        if reads_after(b.var, later, inner) > 0 || !cannot_fail(&b.value) {
            return false;
        }
        let mut small = true;
        b.value.each(&mut |x| {
            let atoms = self.dims(&x.ty.shape).ok().and_then(|dims| {
                dims.iter().try_fold(1u128, |n, d| match d {
                    Expr::Int(d) => u128::try_from(*d).ok().map(|d| n.saturating_mul(d)),
                    _ => None,
                })
            });
            small &= atoms.is_some_and(|n| n <= remora_value::limits::MAX_ATOMS as u128);
        });
        small
    }

    /// `v` written into `dest`, atom by atom.
    fn copy(&mut self, v: Val<'m>, dest: &View, body: &mut Vec<Stmt>) -> Res<()> {
        match v {
            Val::Rotated(r) => self.copy_rotation(&r, dest, body),
            Val::Delayed(_) => {
                let v = self.force(v, body)?;
                self.copy(v, dest, body)
            }
            Val::Scalar(_, x) => {
                if !dest.dims.is_empty() {
                    return unsupported("a scalar copied into an array");
                }
                body.push(Stmt::Store {
                    buf: dest.buf,
                    index: dest.offset.clone(),
                    value: x,
                });
                Ok(())
            }
            Val::Array(src) => {
                if src.dims.len() != dest.dims.len() {
                    return unsupported("an array copied into a place of another rank");
                }
                let r = src.dims.len();
                if r >= 2
                    && src.strides[r - 2] == Expr::Int(1)
                    && src.strides[r - 1] != Expr::Int(1)
                    && dest.strides[r - 1] == Expr::Int(1)
                {
                    self.copy_tiled(&src, dest, body);
                    return Ok(());
                }
                let indices: Vec<Var> = src.dims.iter().map(|_| self.fresh("j")).collect();
                let idx: Vec<Expr> = indices.iter().map(|v| Expr::Var(*v)).collect();
                let mut inner = vec![Stmt::Store {
                    buf: dest.buf,
                    index: dest.cell(&idx).offset,
                    value: src.cell(&idx).load(),
                }];
                let outer = self.loop_depth;
                inner = nest(&indices, src.dims, inner, outer);
                body.extend(inner);
                Ok(())
            }
            Val::Record(_) => unsupported("records"),
            Val::Box { .. } => unsupported("boxes"),
            _ => unsupported("a function stored in an array"),
        }
    }

    /// [`Self::copy`] of a transposed view (its last two axes' strides
    /// exchanged: a `transpose2d` laid out) into a place laid out in order,
    /// in tiles of 32 × 32 of the last two axes: each tile's atoms read
    /// from 32 lines of the source that stay in the first cache while it
    /// is written in order, instead of a line read for every atom.
    fn copy_tiled(&mut self, src: &View, dest: &View, body: &mut Vec<Stmt>) {
        const TILE: i64 = 32;
        let r = src.dims.len();
        let lead: Vec<Var> = src.dims[..r - 2].iter().map(|_| self.fresh("j")).collect();
        let (ta, tb, ia, ib, a0, b0) = (
            self.fresh("ta"),
            self.fresh("tb"),
            self.fresh("ia"),
            self.fresh("ib"),
            self.fresh("a0"),
            self.fresh("b0"),
        );
        let (a, b) = (src.dims[r - 2].clone(), src.dims[r - 1].clone());
        let tiles = |n: &Expr| {
            Expr::op(
                "/",
                vec![Expr::add(n.clone(), Expr::Int(TILE - 1)), Expr::Int(TILE)],
            )
        };
        let within = |n: &Expr, from: Var| {
            Expr::op(
                "min",
                vec![Expr::Int(TILE), Expr::op("-", vec![n.clone(), Expr::Var(from)])],
            )
        };
        let mut idx: Vec<Expr> = lead.iter().map(|v| Expr::Var(*v)).collect();
        idx.push(Expr::add(Expr::Var(a0), Expr::Var(ia)));
        idx.push(Expr::add(Expr::Var(b0), Expr::Var(ib)));
        let store = Stmt::Store {
            buf: dest.buf,
            index: dest.cell(&idx).offset,
            value: src.cell(&idx).load(),
        };
        let tile = vec![
            Stmt::Let {
                var: a0,
                elem: Elem::Int,
                value: Expr::mul(Expr::Var(ta), Expr::Int(TILE)),
            },
            Stmt::Let {
                var: b0,
                elem: Elem::Int,
                value: Expr::mul(Expr::Var(tb), Expr::Int(TILE)),
            },
            Stmt::For {
                index: ia,
                count: within(&a, a0),
                parallel: false,
                body: vec![Stmt::For {
                    index: ib,
                    count: within(&b, b0),
                    parallel: false,
                    body: vec![store],
                }],
            },
        ];
        let mut loops = lead;
        loops.extend([ta, tb]);
        let mut counts = src.dims[..r - 2].to_vec();
        counts.extend([tiles(&a), tiles(&b)]);
        body.extend(nest(&loops, counts, tile, self.loop_depth));
    }

    /// A fresh contiguous buffer of `dims`.
    fn alloc(&mut self, name: &str, elem: Elem, dims: Vec<Expr>, body: &mut Vec<Stmt>) -> View {
        let buf = self.fresh(name);
        // The atom count checked as the interpreter checks every shape's
        // (a product that wraps is an error, not a small buffer).
        let len = match checked_product(&dims) {
            Some(len) => len,
            None => {
                body.push(Stmt::Fail {
                    what: "a shape of more atoms than 64 bits count".into(),
                });
                Expr::Int(0)
            }
        };
        body.push(Stmt::Alloc { buf, elem, len });
        View::contiguous(buf, elem, dims)
    }
}

/// The intrinsics that take a [`Val::Delayed`] argument (and compute its
/// elements where they need them).
const FUSED_CONSUMERS: &[&str] = &[
    "f.sum",
    "sum",
    "f.product",
    "product",
    "any",
    "all",
    "reduce",
    "reduce/zero",
    "count",
    // An Int sum scan of a map (`Alloc::sum_scan_of_map`), an iscan of a
    // map (`Alloc::iscan_of_map`), a scatter through a map of indices
    // (`Alloc::scatter_of_map`); others computed.
    "scan",
    "iscan",
    "scatter",
    // A grade of a map of Int keys (`Alloc::grades_a_map`), a hist by a
    // map of bin numbers (`Alloc::hist_of_map`).
    "grade",
    "hist",
    // The items kept of a map of atoms (`Alloc::takes_of_map`).
    "take*",
    "drop*",
    // A vector filtered by a map of flags (`Alloc::filters_a_vector`).
    "filter",
];

/// Whether `e` is a map whose elements can be computed one at a time where
/// they are consumed: its arrays (at every level of a nest) are variables
/// or literals, so computing an element costs only the element's own work.
fn delayable(e: &maps::Expr) -> bool {
    match &e.kind {
        Kind::Map { frame, binds, body } if !frame.is_scalar() => {
            binds
                .iter()
                .all(|b| matches!(b.value.kind, Kind::Var(_) | Kind::Array { .. }))
                && delayable_cell(body)
        }
        _ => false,
    }
}

/// Whether `func` is a variable or a lambda written in place (a function
/// of the program, or an intrinsic bound to a name).
fn names_a_function(func: &maps::Expr) -> bool {
    match &func.kind {
        Kind::Var(_) => true,
        Kind::Array { shape, atoms } => {
            shape.is_empty() && matches!(atoms.as_slice(), [maps::Atom::Lambda { .. }])
        }
        // A polymorphic lambda given its type or index arguments (a lifted
        // function of `rerank`, or a derivative's piece), or a variable
        // (a function of the program instantiated at sizes known only at
        // run time, which monomorphisation leaves polymorphic).
        Kind::TApp { func, .. } | Kind::IApp { func, .. } => {
            let f = func.instantiated();
            match &f.kind {
                Kind::Var(_) => true,
                Kind::Array { shape, atoms } => {
                    shape.is_empty()
                        && matches!(
                            atoms.as_slice(),
                            [maps::Atom::ILambda { .. } | maps::Atom::TLambda { .. }]
                        )
                }
                _ => false,
            }
        }
        _ => false,
    }
}

/// Whether `func` is one of the [`FUSED_CONSUMERS`] (with its type and
/// index arguments).
fn is_fused_consumer(func: &maps::Expr) -> bool {
    let f = func.instantiated();
    matches!(f.kind, Kind::Prim(name) if FUSED_CONSUMERS.contains(&name))
}

/// The intrinsic `func` names (with its type and index arguments).
fn prim_of(func: &maps::Expr) -> Option<&'static str> {
    let f = func.instantiated();
    match f.kind {
        Kind::Prim(name) => Some(name),
        _ => None,
    }
}

/// Whether `e` is an `append` of two arrays of numbers or Bools, which
/// `into` writes part by part into its destination.
fn is_append(e: &maps::Expr) -> bool {
    matches!(&e.kind, Kind::App { func, args } if prim_of(func) == Some("append") && args.len() == 2)
        && matches!(e.ty.atom, TyAtom::Int | TyAtom::Float | TyAtom::Bool)
        && !e.ty.shape.is_scalar()
}

/// Whether `func` is `reduce` or `reduce/zero` (with its type and index
/// arguments).
fn is_reduce(func: &maps::Expr) -> bool {
    let f = func.instantiated();
    matches!(f.kind, Kind::Prim("reduce" | "reduce/zero"))
}

/// The map `M` of `(transpose2d M)`, where `M` is a delayable map of
/// rank 2 with scalar cells that cannot fail (its atoms computed where a
/// reduction reads them, the axes swapped; a row's own code may run for
/// no atom).
fn transposed_map(e: &maps::Expr) -> Option<&maps::Expr> {
    let Kind::App { func, args } = &e.kind else {
        return None;
    };
    let f = func.instantiated();
    match (&f.kind, args.as_slice()) {
        (Kind::Prim("transpose2d"), [m])
            if delayable(m)
                && cannot_fail(m)
                && m.ty.shape.segs().len() == 2
                && m.ty
                    .shape
                    .segs()
                    .iter()
                    .all(|s| matches!(s, remora_types::Seg::Dim(_)))
                && !matches!(m.ty.atom, TyAtom::Record(_)) =>
        {
            Some(m)
        }
        _ => None,
    }
}

/// Whether a delayed map's cells at depth `k` (after `k` axes) can be made
/// one at a time: no map of its nest has a frame that depth cuts through.
fn splits_at(e: &maps::Expr, k: usize) -> bool {
    match &e.kind {
        _ if k == 0 => true,
        Kind::Map { frame, body, .. } if !frame.is_scalar() => {
            let n = frame.segs().len();
            frame
                .segs()
                .iter()
                .all(|s| matches!(s, remora_types::Seg::Dim(_)))
                && n <= k
                && splits_at(body, k - n)
        }
        Kind::Map { body, .. } => splits_at(body, k),
        _ => true,
    }
}

/// Whether `var` (bound by a `let`) is used in what follows its binding
/// only as the array one map iterates (once, or in several of that map's
/// bindings): that map then makes each cell of it once, in its own loop.
fn used_once_by_a_map(var: VarId, later: &[maps::Bind], body: &maps::Expr) -> bool {
    let mut by_maps = 0usize;
    let mut maps: Vec<*const maps::Expr> = Vec::new();
    let mut count = |e: &maps::Expr| {
        e.each(&mut |x| match &x.kind {
            Kind::Map { frame, binds, .. } if !frame.is_scalar() => {
                let n = binds
                    .iter()
                    .filter(|b| matches!(b.value.kind, Kind::Var(v) if v == var))
                    .count();
                if n > 0 {
                    by_maps += n;
                    maps.push(std::ptr::from_ref(x));
                }
            }
            _ => {}
        });
    };
    for b in later {
        count(&b.value);
    }
    count(body);
    let uses = reads_after(var, later, body);
    uses >= 1 && uses == by_maps && maps.len() == 1
}

/// How many times `var`, bound by a `let`, is read by the bindings after
/// its own (`later`) and the `let`'s body.
fn reads_after(var: VarId, later: &[maps::Bind], body: &maps::Expr) -> usize {
    later
        .iter()
        .map(|b| crate::fuse::uses(&b.value, var))
        .sum::<usize>()
        + crate::fuse::uses(body, var)
}

/// The buffer `stmts` copy into `dest` (all of it, as `into` fills its
/// destination) atom for atom at the same positions, if that is all they
/// do: loops nested around one store of a load at the store's own index.
fn copied_from(stmts: &[Stmt], dest: Var) -> Option<Var> {
    match stmts {
        [Stmt::For { body, .. }] => copied_from(body, dest),
        [
            Stmt::Store {
                buf,
                index,
                value:
                    Expr::Load {
                        buf: src,
                        index: from,
                    },
            },
        ] if *buf == dest && *src != dest && **from == *index => Some(*src),
        _ => None,
    }
}

/// Whether `e` can run without a run-time error: scalar operations that
/// cannot fail, views (`rotate`, `reverse`, transposes, `replicate`),
/// variables, literals, maps and lets of those. (A delayed map is computed
/// only where it is read: one that could fail must not be left unread.)
fn cannot_fail(e: &maps::Expr) -> bool {
    cannot_fail_calling(e, &mut |_| false)
}

/// [`cannot_fail`], where an application of something other than an
/// intrinsic cannot fail if `call` says so.
fn cannot_fail_calling(e: &maps::Expr, call: &mut dyn FnMut(&maps::Expr) -> bool) -> bool {
    let mut ok = true;
    e.each(&mut |x| match &x.kind {
        Kind::Prim(name) => {
            let safe_scalar =
                crate::c::scalar_arity(name).is_some() && !matches!(*name, "/" | "mod" | "^" | "shl" | "shr");
            // (`select` of cells of one shape, as its type says: never.)
            let view = matches!(
                *name,
                "select"
                    | "rotate"
                    | "reverse"
                    | "transpose"
                    | "transpose2d"
                    | "replicate"
                    | "take"
                    | "drop"
                    | "take-right"
                    | "drop-right"
            );
            ok &= safe_scalar || view;
        }
        Kind::App { func, .. } => {
            // Only intrinsics (no user function, whose body is elsewhere).
            let f = func.instantiated();
            ok &= matches!(f.kind, Kind::Prim(_)) || call(x);
        }
        Kind::Unbox { .. } | Kind::Record(_) | Kind::Field { .. } => ok = false,
        _ => {}
    });
    ok
}

/// Whether `e` costs a few operations, whatever its shape: a variable, a
/// scalar literal, scalar operations or views (a rotation, a slice, a
/// transposition) of such, a `let` of such (no loop: no map over a frame,
/// no reduction, no call of a function of the program).
fn few_operations(e: &maps::Expr) -> bool {
    match &e.kind {
        Kind::Var(_) => true,
        Kind::Array { shape, atoms } => {
            shape.is_empty() && matches!(atoms.as_slice(), [Atom::Int(_) | Atom::Float(_) | Atom::Bool(_)])
        }
        Kind::Map { frame, binds, body } => {
            frame.is_scalar() && binds.iter().all(|b| few_operations(&b.value)) && few_operations(body)
        }
        Kind::App { func, args } => {
            let f = func.instantiated();
            let Kind::Prim(name) = f.kind else {
                return false;
            };
            let cheap = crate::c::scalar_arity(name).is_some()
                || matches!(
                    name,
                    "rotate" | "reverse" | "transpose2d" | "take" | "drop" | "take-right" | "drop-right"
                );
            cheap && args.iter().all(few_operations)
        }
        _ => false,
    }
}

/// Whether a delayed map's cell can be computed position by position: a
/// scalar, a delayable map, or a `let` around one (its bindings computed
/// once per cell, as they would be in the map).
fn delayable_cell(e: &maps::Expr) -> bool {
    match &e.kind {
        _ if e.ty.shape.is_scalar() => true,
        // (A `let` in a cell of arrays runs wherever an atom of the cell is
        // read: only one whose values cost a few operations each, so that
        // reading a cell atom by atom costs what making it once does.)
        Kind::Map { frame, binds, body } if frame.is_scalar() => {
            binds.iter().all(|b| few_operations(&b.value)) && delayable_cell(body)
        }
        // A view made per cell (a rotation of a row, its first items):
        // no loop, no copy.
        Kind::App { func, args } => {
            let f = func.instantiated();
            let view = match f.kind {
                Kind::Prim("rotate" | "reverse" | "transpose2d") => true,
                Kind::Prim("take" | "drop" | "take-right" | "drop-right") => {
                    matches!(args.as_slice(), [a] if delayable_cell(a))
                }
                _ => false,
            };
            view && cannot_fail(e)
        }
        // A small cell written out of a few scalars (a `[start 1]` pair):
        // made where it is read, in a cell of its own.
        Kind::Frame { elems, .. } => elems.iter().all(|x| x.ty.shape.is_scalar() && few_operations(x)),
        _ => delayable(e),
    }
}

enum Arg<'m> {
    Value(Val<'m>),
    Index(IndexVal),
}

#[derive(Clone)]
enum IndexVal {
    Dim(Expr),
    Shape(Vec<Expr>),
}

impl IndexVal {
    fn dims(&self) -> &[Expr] {
        match self {
            IndexVal::Dim(d) => std::slice::from_ref(d),
            IndexVal::Shape(ds) => ds,
        }
    }
}

/// Whether values of this atom type are functions.
fn is_function(t: &TyAtom) -> bool {
    matches!(t, TyAtom::Arrow(..) | TyAtom::Forall(..) | TyAtom::Pi(..))
}

fn cell_val<'m>(v: View) -> Val<'m> {
    if v.dims.is_empty() {
        Val::Scalar(v.elem, v.load())
    } else {
        Val::Array(v)
    }
}

/// `a op b` on dimensions: folded when both are numbers (an overflow is
/// then left to the interpreter), else checked at run time.
fn dim_op(op: &'static str, a: Expr, b: Expr) -> Res<Expr> {
    // `c + (d + x)` is `(c + d) + x` where the inner sum cannot overflow
    // if the outer one does not (`d` not positive, or `c` not negative):
    // `(+ 1 $k)` of `$k` instantiated at `(- $w 1)` is `$w`.
    if let (
        "dim+",
        Expr::Int(c),
        Expr::Op {
            op: "dim+",
            args: inner,
        },
    ) = (op, &a, &b)
        && let [Expr::Int(d), x] = inner.as_slice()
        && (*d <= 0 || *c >= 0)
        && let Some(cd) = c.checked_add(*d)
    {
        return dim_op("dim+", Expr::Int(cd), x.clone());
    }
    let folded = match (op, &a, &b) {
        ("dim*", Expr::Int(x), Expr::Int(y)) => Some(x.checked_mul(*y)),
        ("dim+", Expr::Int(x), Expr::Int(y)) => Some(x.checked_add(*y)),
        ("dim*", Expr::Int(1), _) | ("dim+", Expr::Int(0), _) => return Ok(b),
        ("dim*", _, Expr::Int(1)) | ("dim+", _, Expr::Int(0)) => return Ok(a),
        _ => None,
    };
    match folded {
        Some(Some(n)) => Ok(Expr::Int(n)),
        Some(None) => unsupported("a dimension whose arithmetic overflows"),
        None => Ok(Expr::op(op, vec![a, b])),
    }
}

/// The position of item `k`, in row-major order, in a frame of `shape`.
fn flat_position(mut k: u64, shape: &[u64]) -> Vec<Expr> {
    let mut idx = vec![Expr::Int(0); shape.len()];
    for (at, n) in idx.iter_mut().zip(shape).rev() {
        let n = (*n).max(1);
        *at = Expr::Int((k % n) as i64);
        k /= n;
    }
    idx
}

/// `inner` inside one loop per index (`counts` their trip counts, the
/// first outermost); the outermost runs in parallel when no loop
/// (`outer`, the enclosing depth) encloses it.
fn nest(
    indices: &[Var],
    counts: impl IntoIterator<Item = Expr>,
    mut inner: Vec<Stmt>,
    outer: usize,
) -> Vec<Stmt> {
    let counts: Vec<Expr> = counts.into_iter().collect();
    for (k, (index, count)) in indices.iter().zip(counts).enumerate().rev() {
        inner = vec![Stmt::For {
            index: *index,
            count,
            parallel: k == 0 && outer == 0,
            body: inner,
        }];
    }
    inner
}

/// The product of `dims`, checked: `None` where numbers overflow,
/// `dim*` (checked at run time) where they are not known.
fn checked_product(dims: &[Expr]) -> Option<Expr> {
    let mut p = Expr::Int(1);
    for d in dims {
        p = match (p, d) {
            (Expr::Int(x), Expr::Int(y)) => Expr::Int(x.checked_mul(*y)?),
            (Expr::Int(1), y) => y.clone(),
            (Expr::Int(0), _) => Expr::Int(0),
            (x, Expr::Int(1)) => x,
            (x, y) => Expr::op("dim*", vec![x, y.clone()]),
        };
    }
    Some(p)
}

fn product(dims: &[Expr]) -> Expr {
    dims.iter().cloned().fold(Expr::Int(1), Expr::mul)
}

fn zero(elem: Elem) -> Expr {
    match elem {
        Elem::Int => Expr::Int(0),
        Elem::Float => Expr::Float(0.0),
        Elem::Bool => Expr::Bool(false),
    }
}

fn scalar_arity(name: &str) -> Option<usize> {
    crate::c::scalar_arity(name)
}

/// The primitive `body` applies to `a` and `b` (in that order) at every
/// position, through any nest of maps that only iterates them.
fn lifted_primitive(body: &maps::Expr, a: VarId, b: VarId) -> Option<&'static str> {
    match &body.kind {
        Kind::App { func, args } => {
            let Kind::Prim(name) = func.kind else {
                return None;
            };
            match args.as_slice() {
                [x, y]
                    if matches!(x.kind, Kind::Var(v) if v == a)
                        && matches!(y.kind, Kind::Var(v) if v == b) =>
                {
                    (scalar_arity(name) == Some(2)).then_some(name)
                }
                _ => None,
            }
        }
        Kind::Map { frame, binds, body } if !frame.is_scalar() => {
            let [x, y] = binds.as_slice() else {
                return None;
            };
            if matches!(x.value.kind, Kind::Var(v) if v == a)
                && matches!(y.value.kind, Kind::Var(v) if v == b)
            {
                lifted_primitive(body, x.var, y.var)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// A scalar value's expression (a rank-0 view's atom).
fn scalar_of(v: &Val<'_>) -> Option<Expr> {
    match v {
        Val::Scalar(_, x) => Some(x.clone()),
        Val::Array(a) if a.dims.is_empty() => Some(a.load()),
        _ => None,
    }
}

/// The bounds of part `p` of a split: `lo` bound to `bound(p)`, `hi` to
/// `bound(p + 1)`.
fn part_bounds(lo: Var, hi: Var, p: Var, bound: impl Fn(Expr) -> Expr) -> [Stmt; 2] {
    [
        Stmt::Let {
            var: lo,
            elem: Elem::Int,
            value: bound(Expr::Var(p)),
        },
        Stmt::Let {
            var: hi,
            elem: Elem::Int,
            value: bound(Expr::add(Expr::Var(p), Expr::Int(1))),
        },
    ]
}

/// Whether `s` is a check: `if` a condition `fail`.
fn is_check(s: &Stmt) -> bool {
    matches!(s, Stmt::If { then, otherwise, .. }
        if otherwise.is_empty() && matches!(then.as_slice(), [Stmt::Fail { .. }]))
}

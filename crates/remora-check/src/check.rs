//! The checker: core.md §3 over the desugared tree.
//!
//! Names resolve through scoped tables (values, atom types, dimensions,
//! shapes); every binder gets a fresh number. Each expression is typed
//! bottom-up; an application is typed by [`remora_types::apply`], whose
//! decision is kept on the node. An error is reported once, where it
//! happens, and the enclosing expression gives up (returns `None`) while
//! its siblings and the following declarations are still checked.

mod elements;
mod instantiate;

use crate::intrinsics;
use crate::typed::*;
use remora_syntax::ast::{self, AtomKind, BindKind, DeclKind, ExprKind, ParamAnn, Sort};
use remora_syntax::{Diagnostic, SourceMap, Span, print};
use remora_types::{
    AppError, Atom, DVar, Dim, IVar, Index, MAX_RANK, Names, SVar, Shape, TVar, Truth, Type, apply,
};
use std::collections::HashMap;

/// A table of names with nested scopes: `bind` shadows, `reset` undoes
/// every binding made since a `mark`.
struct Scoped<T> {
    map: HashMap<String, Vec<T>>,
    log: Vec<String>,
}

impl<T> Scoped<T> {
    fn new() -> Self {
        Scoped {
            map: HashMap::new(),
            log: Vec::new(),
        }
    }
    fn bind(&mut self, name: &str, value: T) {
        self.map.entry(name.to_string()).or_default().push(value);
        self.log.push(name.to_string());
    }
    fn get(&self, name: &str) -> Option<&T> {
        self.map.get(name).and_then(|v| v.last())
    }
    fn mark(&self) -> usize {
        self.log.len()
    }
    fn reset(&mut self, mark: usize) {
        while self.log.len() > mark {
            if let Some(name) = self.log.pop()
                && let Some(stack) = self.map.get_mut(&name)
            {
                stack.pop();
            }
        }
    }
}

#[derive(Clone)]
enum Value {
    Var(VarId, Type),
    Intrinsic(&'static str, Type),
    /// A name whose definition had an error (already reported): uses of
    /// it are not reported again.
    Poisoned,
}

struct Marks(usize, usize, usize, usize);

/// A type or index binder of a `t-fun`/`i-fun`.
enum Binder {
    Type(TVar),
    Index(IVar),
}

/// The names binders were written with, for printing types.
#[derive(Default, Clone, Debug)]
pub struct NameTable {
    pub tvars: Vec<String>,
    pub dvars: Vec<String>,
    pub svars: Vec<String>,
    pub vars: Vec<String>,
}

impl Names for NameTable {
    fn tvar(&self, v: TVar) -> String {
        self.tvars
            .get(v.0 as usize)
            .cloned()
            .unwrap_or_else(|| format!("&t{}", v.0))
    }
    fn dvar(&self, v: DVar) -> String {
        self.dvars
            .get(v.0 as usize)
            .cloned()
            .unwrap_or_else(|| format!("$d{}", v.0))
    }
    fn svar(&self, v: SVar) -> String {
        self.svars
            .get(v.0 as usize)
            .cloned()
            .unwrap_or_else(|| format!("@s{}", v.0))
    }
}

pub struct Checker {
    pub(crate) diags: Vec<Diagnostic>,
    pub(crate) names: NameTable,
    values: Scoped<Value>,
    types: Scoped<Atom>,
    dims: Scoped<Dim>,
    shapes: Scoped<Shape>,
    /// Whether missing instantiations are inferred (see `instantiate`).
    pub(crate) inference: bool,
    /// Set while checking the function part of an application whose spine
    /// infers no instantiation: its inner applications share the head and
    /// would not either, so they are not walked again (which made an
    /// application of n arguments cost n² steps).
    plain_spine: bool,
    /// Set while checking the body of a lambda whose chain of nested
    /// lambdas has no rank parameter: the chain inside it has none either,
    /// and is not walked again (n nested lambdas were n² steps).
    plain_lambda_chain: bool,
    /// Set for the one lambda atom of such a chain, for its body.
    plain_lambda_next: bool,
    /// Element types of rank parameters, solved or not yet (see `elements`).
    element_unknowns: HashMap<TVar, Option<Atom>>,
    /// Dimensions of rank parameters: generalised unless the body equates
    /// them with another (`(+ x y)` for `(x 1) (y 1)`), solved here.
    rank_dims: HashMap<remora_types::DVar, Option<Dim>>,
    /// Boxes unboxed automatically, waiting for the smallest enclosing
    /// expression whose type does not mention their witnesses.
    pending: Vec<instantiate::Unboxed>,
    /// How many witnesses automatic unboxing has made (for their names).
    witnesses: usize,
    /// How deep `expr` is now, and whether the depth limit has been
    /// reported: an expression can nest deeper than its brackets (an
    /// application of n arguments is n applications, one inside the other),
    /// and every later phase recurses as deep as this one.
    depth: usize,
    too_deep: bool,
    /// While reshape's target shape is checked: the variable a `_`
    /// dimension in it stands for, and how many there were.
    reshape_hole: Option<(remora_types::DVar, usize)>,
    /// Set while a top-level declaration's value is checked (a bare
    /// expression, an entry, a `def` of a value): its scope, the first
    /// `expr_scoped` under it, is the program's top (see `expr_top`).
    at_top: bool,
}

impl Checker {
    pub fn new() -> Checker {
        let mut c = Checker {
            inference: true,
            plain_spine: false,
            plain_lambda_chain: false,
            plain_lambda_next: false,
            element_unknowns: HashMap::new(),
            rank_dims: HashMap::new(),
            pending: Vec::new(),
            witnesses: 0,
            depth: 0,
            too_deep: false,
            at_top: false,
            reshape_hole: None,
            diags: Vec::new(),
            names: NameTable::default(),
            values: Scoped::new(),
            types: Scoped::new(),
            dims: Scoped::new(),
            shapes: Scoped::new(),
        };
        c.bind_intrinsics();
        c
    }

    fn bind_intrinsics(&mut self) {
        let mut scratch = SourceMap::new();
        let ad = intrinsics::AD.iter().map(|(n, t)| (*n, *t));
        for (name, text) in intrinsics::names().chain(ad) {
            let parsed = remora_syntax::parse_type(&mut scratch, "<intrinsics>", text);
            let mark = self.diags.len();
            let ty = self.ty(&parsed.value);
            self.diags.truncate(mark);
            if let Some(ty) = ty {
                self.values.bind(name, Value::Intrinsic(name, ty));
            }
        }
    }

    // ----------------------------------------------------------------------
    // Fresh variables and scopes

    fn fresh_tvar(&mut self, name: &str) -> TVar {
        self.names.tvars.push(name.to_string());
        TVar(self.names.tvars.len() as u32 - 1)
    }
    fn fresh_dvar(&mut self, name: &str) -> DVar {
        self.names.dvars.push(name.to_string());
        DVar(self.names.dvars.len() as u32 - 1)
    }
    fn fresh_svar(&mut self, name: &str) -> SVar {
        self.names.svars.push(name.to_string());
        SVar(self.names.svars.len() as u32 - 1)
    }
    fn fresh_var(&mut self, name: &str) -> VarId {
        self.names.vars.push(name.to_string());
        VarId(self.names.vars.len() as u32 - 1)
    }

    fn mark(&self) -> Marks {
        Marks(
            self.values.mark(),
            self.types.mark(),
            self.dims.mark(),
            self.shapes.mark(),
        )
    }
    fn reset(&mut self, m: Marks) {
        self.values.reset(m.0);
        self.types.reset(m.1);
        self.dims.reset(m.2);
        self.shapes.reset(m.3);
    }

    /// Binds an index parameter to a fresh variable of its sort.
    fn bind_iparam(&mut self, p: &ast::IParam) -> IVar {
        match p.sort {
            Sort::Dim => {
                let v = self.fresh_dvar(&p.name.name);
                self.dims.bind(&p.name.name, Dim::var(v));
                IVar::Dim(v)
            }
            Sort::Shape => {
                let v = self.fresh_svar(&p.name.name);
                self.shapes.bind(&p.name.name, Shape::var(v));
                IVar::Shape(v)
            }
        }
    }

    fn bind_tparam(&mut self, p: &ast::TParam) -> TVar {
        let v = self.fresh_tvar(&p.name.name);
        self.types.bind(&p.name.name, Atom::Var(v));
        v
    }

    /// A type in an error message, as the documentation writes types.
    pub(crate) fn show(&self, t: &Type) -> String {
        t.show_grouped(&self.names)
    }

    fn show_shape(&self, s: &Shape) -> String {
        let mut out = String::from("[");
        s.write_segs(&mut out, &|v| self.names.dvar(v), &|v| self.names.svar(v));
        out.push(']');
        out
    }

    /// What to use instead of `fname` when its parameter needs elements of
    /// type `param` and the argument's are `arg`: its twin for the other
    /// number type (`sum` and `f.sum`, `+` and `f.+`), or a conversion.
    pub(crate) fn element_advice(&self, fname: &str, param: &Atom, arg: &Atom) -> String {
        let bound = |name: &str| self.values.get(name).is_some();
        match (param, arg) {
            (Atom::Int, Atom::Float) => {
                let twin = format!("f.{fname}");
                if bound(&twin) {
                    format!("`{fname}` is for Int elements; for Float ones use `{twin}`: ({twin} …)")
                } else {
                    "convert the Float elements to Int with (round …) or (truncate …)".to_string()
                }
            }
            (Atom::Float, Atom::Int) => match fname.strip_prefix("f.") {
                Some(twin) if bound(twin) => format!(
                    "`{fname}` is for Float elements; for Int ones use `{twin}`: ({twin} …), \
                     or convert them with (i->f …)"
                ),
                _ => "convert the Int elements to Float with (i->f …)".to_string(),
            },
            (param, _) => format!(
                "`{fname}` needs {} elements here, and no instantiation changes that",
                Type::scalar(param.clone()).show(&self.names)
            ),
        }
    }

    /// An `array` or `frame` literal (`what`) whose shape does not hold
    /// its `count` elements; a ragged bracket literal is shown at its row
    /// that differs (see `Diagnostic::ragged_literal`). (Apart from
    /// `expr_node`, whose frame every level of nesting pays for.)
    #[inline(never)]
    fn count_mismatch<T>(&mut self, e: &ast::Expr, what: &str, count: usize) -> Option<T> {
        let shown = print::expr_to_string(e);
        let note = match &e.kind {
            ExprKind::Array { shape, .. } => format!("{shown} (shape {shape:?}, {count} elements)"),
            _ => shown,
        };
        let d = self
            .error(e.span, format!("{what} shape doesn't match number of elements:"))
            .note(note)
            .at_ragged_literal();
        self.report(d);
        None
    }

    /// Whether the application `e` is another Lisp's form (`(lambda (x
    /// y) …)`, `(define …)`) with its head unbound; if so, one error says
    /// how Remora writes it, instead of one for each name in it. (Apart
    /// from `expr_node`, whose frame every level of nesting pays for.)
    #[inline(never)]
    fn foreign_form(&mut self, e: &ast::Expr) -> bool {
        let Some(name) = spine_head(e) else {
            return false;
        };
        let Some(advice) = foreign_form(name) else {
            return false;
        };
        if self.values.get(name).is_some() {
            return false;
        }
        let d = self
            .error(
                e.span,
                format!("unbound variable `{name}`: Remora has no `{name}`"),
            )
            .note(advice);
        self.report(d);
        true
    }

    fn error(&self, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic::error(span, message)
    }

    fn report(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    /// Reports `message` about the expression `e` (shown in the note) and
    /// gives up on it.
    fn reject<T>(&mut self, span: Span, message: &str, e: &ast::Expr) -> Option<T> {
        let d = self.error(span, message).note(print::expr_to_string(e));
        self.report(d);
        None
    }

    // ----------------------------------------------------------------------
    // Types and indices

    pub(crate) fn ty(&mut self, t: &ast::Type) -> Option<Type> {
        use ast::TypeKind as K;
        let atom = |a| Some(Type::scalar(a));
        match &t.kind {
            K::Int => atom(Atom::Int),
            K::Bool => atom(Atom::Bool),
            K::Float => atom(Atom::Float),
            K::Var(v) => match self.types.get(&v.name) {
                Some(a) => atom(a.clone()),
                None => {
                    let d = self.error(v.span, format!("unbound type variable `{}`", v.name));
                    self.report(d);
                    None
                }
            },
            K::Array { elem, shape } => {
                let elem = self.ty(elem)?;
                let shape = self.shape(shape)?;
                let ty = elem.lift(&shape);
                self.shape_in_bounds(t.span, &ty.shape).then_some(ty)
            }
            K::Arrow { param, result } => {
                let p = self.ty(param)?;
                let r = self.ty(result)?;
                Some(Type::arrow(p, r))
            }
            K::Forall { param, body } => {
                let m = self.mark();
                let v = self.bind_tparam(param);
                let body = self.ty(body);
                self.reset(m);
                atom(Atom::Forall(v, std::sync::Arc::new(body?)))
            }
            K::Pi { param, body } | K::Sigma { param, body } => {
                let m = self.mark();
                let v = self.bind_iparam(param);
                let body = self.ty(body);
                self.reset(m);
                let body = std::sync::Arc::new(body?);
                atom(if matches!(t.kind, K::Pi { .. }) {
                    Atom::Pi(v, body)
                } else {
                    Atom::Sigma(v, body)
                })
            }
            K::Record(fields) => {
                let mut out = Vec::new();
                for (name, ft) in fields {
                    out.push((name.name.clone(), self.ty(ft)?));
                }
                atom(Atom::Record(std::sync::Arc::new(out)))
            }
            K::Hole => {
                let d = self
                    .error(t.span, "`_` needs type inference")
                    .note("`_` is inferred only in the instantiation of a named polymorphic function being applied: write the type");
                self.report(d);
                None
            }
            K::Error => None,
        }
    }

    pub(crate) fn dim(&mut self, d: &ast::Dim) -> Option<Dim> {
        use ast::DimKind as K;
        match &d.kind {
            K::Nat(n) => match i64::try_from(*n) {
                Ok(n) => Some(Dim::int(n)),
                Err(_) => {
                    let e = self.error(d.span, format!("the dimension {n} does not fit 63 bits"));
                    self.report(e);
                    None
                }
            },
            K::Var(v) => match self.dims.get(&v.name) {
                Some(x) => Some(x.clone()),
                None => {
                    let d = self.error(v.span, format!("unbound dimension variable `{}`", v.name));
                    self.report(d);
                    None
                }
            },
            K::Add(xs) | K::Mul(xs) | K::Sub(xs) => {
                let xs: Vec<Dim> = xs.iter().map(|x| self.dim(x)).collect::<Option<_>>()?;
                // Constant dimensions are computed here, and must not
                // overflow (a wrapped size would be a wrong size).
                if let Some(values) = xs.iter().map(Dim::as_const).collect::<Option<Vec<i64>>>() {
                    let value = match (&d.kind, values.as_slice()) {
                        (K::Add(_), _) => values.iter().try_fold(0i64, |a, x| a.checked_add(*x)),
                        (K::Mul(_), _) => values.iter().try_fold(1i64, |a, x| a.checked_mul(*x)),
                        (_, []) => Some(0),
                        (_, [only]) => only.checked_neg(),
                        (_, [first, rest @ ..]) => rest.iter().try_fold(*first, |a, x| a.checked_sub(*x)),
                    };
                    let Some(value) = value else {
                        let e = self.error(d.span, "this dimension's arithmetic overflows 64 bits");
                        self.report(e);
                        return None;
                    };
                    return Some(Dim::int(value));
                }
                Some(match &d.kind {
                    K::Add(_) => Dim::sum(&xs),
                    K::Mul(_) => Dim::product(&xs),
                    // `(- d)` negates (the tutorial's `(+ 5 (- 3))` is 2);
                    // `(- a b c)` is `a - b - c`.
                    _ => match xs.as_slice() {
                        [] => Dim::int(0),
                        [only] => only.neg(),
                        [first, rest @ ..] => rest.iter().fold(first.clone(), |a, x| a.sub(x)),
                    },
                })
            }
            K::Hole => match &mut self.reshape_hole {
                Some((v, uses)) => {
                    *uses += 1;
                    Some(Dim::var(*v))
                }
                None => {
                    let e = self
                        .error(
                            d.span,
                            "`_` as a dimension is inferred only in reshape's target shape",
                        )
                        .note("as in (@reshape _ (_ [_ 3]) xs); elsewhere write the dimension");
                    self.report(e);
                    None
                }
            },
            K::Error => None,
        }
    }

    pub(crate) fn shape(&mut self, s: &ast::Shape) -> Option<Shape> {
        match &s.kind {
            ast::ShapeKind::Var(v) => match self.shapes.get(&v.name) {
                Some(x) => Some(x.clone()),
                None => {
                    let d = self.error(v.span, format!("unbound shape variable `{}`", v.name));
                    self.report(d);
                    None
                }
            },
            ast::ShapeKind::Splice(items) => {
                // The parts' segments gathered once (not a copy of the
                // shape so far per part: a rank-50,000 shape is linear).
                let mut segs = Vec::with_capacity(items.len());
                for i in items {
                    match self.index(i)? {
                        Index::Dim(d) => segs.push(remora_types::Seg::Dim(d)),
                        Index::Shape(s) => segs.extend(s.segs().iter().cloned()),
                    }
                }
                let shape = Shape::from_segs(segs);
                self.shape_in_bounds(s.span, &shape).then_some(shape)
            }
            ast::ShapeKind::Error => None,
        }
    }

    pub(crate) fn index(&mut self, i: &ast::Ispace) -> Option<Index> {
        match i {
            ast::Ispace::Dim(d) => self.dim(d).map(Index::Dim),
            ast::Ispace::Shape(s) => self.shape(s).map(Index::Shape),
            ast::Ispace::Hole(span) => {
                let d = self
                    .error(*span, "`_` needs index inference")
                    .note("`_` is inferred only in the instantiation of a named polymorphic function being applied: write the index");
                self.report(d);
                None
            }
        }
    }

    // ----------------------------------------------------------------------
    // Expressions

    /// Checks an expression; boxes unboxed automatically inside it
    /// (extensions.md §1.6) are wrapped around it here when its type does
    /// not mention their witnesses (so around the smallest such expression).
    pub fn expr(&mut self, e: &ast::Expr) -> Option<TExpr> {
        if self.depth >= remora_syntax::stack::nesting_limit() {
            return self.too_deep(e.span);
        }
        self.depth += 1;
        let t = self.expr_at_depth(e);
        self.depth -= 1;
        let t = t?;
        self.shape_in_bounds(e.span, &t.ty.shape).then_some(t)
    }

    /// The error for an expression past the nesting limit, once. (Apart
    /// from `expr`, whose frame is on the stack once per level.)
    #[cold]
    #[inline(never)]
    fn too_deep(&mut self, span: Span) -> Option<TExpr> {
        if !std::mem::replace(&mut self.too_deep, true) {
            let limit = remora_syntax::stack::nesting_limit();
            let d = self
                .error(span, format!("expression nested deeper than {limit} levels"))
                .note("each argument of an application, like each pair of brackets, nests one level");
            self.report(d);
        }
        None
    }

    /// Whether `shape` is one an array may have: at most [`MAX_RANK`] axes,
    /// and no dimension whose arithmetic overflowed (instantiating
    /// `(* $n $n)` at 2^32); if not, says so at `span`.
    fn shape_in_bounds(&mut self, span: Span, shape: &Shape) -> bool {
        if shape.min_rank() <= MAX_RANK && !shape.overflowed() {
            return true;
        }
        self.out_of_bounds(span, shape)
    }

    /// The error `shape_in_bounds` reports (out of line: `expr` calls it at
    /// every level).
    #[cold]
    #[inline(never)]
    fn out_of_bounds(&mut self, span: Span, shape: &Shape) -> bool {
        let rank = shape.min_rank();
        let d = if rank > MAX_RANK {
            self.error(span, format!("an array type of rank {rank}"))
                .note(format!("arrays have at most {MAX_RANK} axes"))
        } else if shape.overflowed() {
            self.error(span, "this dimension's arithmetic overflows 64 bits")
                .note(format!("in the shape {}", self.show_shape(shape)))
        } else {
            return true;
        };
        self.report(d);
        false
    }

    #[inline(always)]
    fn expr_at_depth(&mut self, e: &ast::Expr) -> Option<TExpr> {
        let mark = self.pending.len();
        let Some(mut t) = self.expr_node(e) else {
            self.pending.truncate(mark);
            return None;
        };
        let mut k = self.pending.len();
        while k > mark {
            k -= 1;
            if self.pending[k].witness_in(&t.ty) {
                continue;
            }
            let u = self.pending.remove(k);
            t = close_unbox(u, t);
        }
        // A box unboxed inside a binder's scope must not leave it.
        if k < self.pending.len() && binds_names(e) {
            return self.escaped(mark);
        }
        Some(t)
    }

    /// Reports the automatic unboxes after `mark` that no expression can
    /// hold: their witnesses would escape.
    fn escaped(&mut self, mark: usize) -> Option<TExpr> {
        let left: Vec<_> = self.pending.drain(mark..).collect();
        for u in left {
            let sort = match u.witness {
                IVar::Dim(_) => "$w",
                IVar::Shape(_) => "@w",
            };
            let d = self
                .error(u.boxed.span, "a box's witness would escape its automatic unbox")
                .note(format!(
                    "this box is unboxed where its payload is used, but every enclosing expression's type mentions its witness; unbox it yourself: (unbox ({sort} x e) …)"
                ));
            self.report(d);
        }
        None
    }

    /// `expr` at the top of a program (a bare expression, an entry's
    /// result, a definition of a value): an automatic unbox whose witness
    /// the result's type mentions has nowhere else to close, so the result
    /// is boxed again there, `(i->f (range 5))` printing as `(box 5 [0. 1.
    /// 2. 3. 4.])` as `(range 5)` does. (Core Remora, without inference,
    /// has no automatic unboxes.)
    pub(crate) fn expr_top(&mut self, e: &ast::Expr) -> Option<TExpr> {
        if !self.inference {
            return self.expr_scoped(e);
        }
        let mark = self.pending.len();
        let Some(mut t) = self.expr(e) else {
            self.pending.truncate(mark);
            return None;
        };
        // The last pending unbox is the innermost: its box may have been
        // found inside an earlier one's scope.
        while self.pending.len() > mark {
            let u = self.pending.pop()?;
            if u.witness_in(&t.ty) {
                t = self.rebox(u.witness, t);
            }
            t = close_unbox(u, t);
        }
        Some(t)
    }

    /// `t` in a box whose witness is the index variable `w`: of type
    /// `(Σ (w') T)`, with `w'` fresh for `w` in `t`'s type `T`.
    fn rebox(&mut self, w: IVar, t: TExpr) -> TExpr {
        let (bound, index) = self.fresh_index_like(w, "");
        let payload = t.ty.subst_index(w, &index);
        let witness = match w {
            IVar::Dim(d) => Index::Dim(Dim::var(d)),
            IVar::Shape(s) => Index::Shape(Shape::var(s)),
        };
        let span = t.span;
        TExpr {
            kind: TExprKind::Array {
                shape: Vec::new(),
                atoms: vec![TAtom {
                    kind: TAtomKind::Box {
                        witness,
                        body: Box::new(t),
                    },
                    span,
                }],
            },
            ty: Type::scalar(Atom::Sigma(bound, std::sync::Arc::new(payload))),
            span,
        }
    }

    /// `expr`, inside a scope a pending unbox must not leave (a function
    /// body, a declaration).
    pub(crate) fn expr_scoped(&mut self, e: &ast::Expr) -> Option<TExpr> {
        if std::mem::take(&mut self.at_top) {
            return self.expr_top(e);
        }
        let mark = self.pending.len();
        let t = self.expr(e);
        if self.pending.len() > mark {
            return self.escaped(mark);
        }
        t
    }

    fn expr_node(&mut self, e: &ast::Expr) -> Option<TExpr> {
        let span = e.span;
        let done = |kind, ty| Some(TExpr { kind, ty, span });
        let in_plain_chain = std::mem::take(&mut self.plain_lambda_chain);
        match &e.kind {
            ExprKind::Array { .. } if self.inference && !in_plain_chain && ranked_fn(e).is_some() => {
                let (params, body) = ranked_fn(e)?;
                self.generalised(span, &params, None, body)
            }
            ExprKind::Array { shape, atoms } => {
                // One lambda, in a chain found to have no rank parameter:
                // its body need not look for one.
                self.plain_lambda_next = self.inference
                    && shape.is_empty()
                    && matches!(
                        atoms.as_slice(),
                        [ast::Atom {
                            kind: AtomKind::Lambda { .. },
                            ..
                        }]
                    );
                let typed: Vec<Option<(TAtom, Atom)>> = atoms.iter().map(|a| self.atom(a, None)).collect();
                self.plain_lambda_next = false;
                let typed: Vec<(TAtom, Atom)> = typed.into_iter().collect::<Option<_>>()?;
                if product(shape) != typed.len() as u64 {
                    return self.count_mismatch(e, "Array", typed.len());
                }
                let first = typed.first().map(|(_, a)| a.clone())?;
                // (The first is not compared with itself: comparing deeply
                // nested box types is not free.)
                if typed.iter().skip(1).any(|(_, a)| !a.equals(&first).is_yes()) {
                    return self.reject(span, "Atoms in array have different types:", e);
                }
                let ty = Type::array(first, dims(shape));
                done(
                    TExprKind::Array {
                        shape: shape.clone(),
                        atoms: typed.into_iter().map(|(a, _)| a).collect(),
                    },
                    ty,
                )
            }
            ExprKind::EmptyArray { shape, elem } => {
                if matches!(elem.kind, ast::TypeKind::Array { .. }) {
                    let d = self.error(span, "Non-atom kinded type annotation on empty array.");
                    self.report(d);
                    return None;
                }
                let elem_ty = self.ty(elem)?;
                if product(shape) != 0 {
                    return self.reject(span, "Empty array has a non-empty shape:", e);
                }
                done(
                    TExprKind::Array {
                        shape: shape.clone(),
                        atoms: Vec::new(),
                    },
                    elem_ty.lift(&dims(shape)),
                )
            }
            ExprKind::Frame { shape, elems } => {
                let typed: Vec<Option<TExpr>> = elems.iter().map(|x| self.expr(x)).collect();
                let typed: Vec<TExpr> = typed.into_iter().collect::<Option<_>>()?;
                if product(shape) != typed.len() as u64 {
                    return self.count_mismatch(e, "Frame", typed.len());
                }
                let first = typed.first().map(|t| t.ty.clone())?;
                // An element unknown (a rank parameter's) is solved by the
                // other elements.
                for t in typed.iter().skip(1) {
                    self.unify_elements(&first.atom, &t.ty.atom);
                    self.unify_rank_dims(&first.shape, &t.ty.shape, false);
                }
                let first = self.resolve(&first).into_owned();
                if typed
                    .iter()
                    .skip(1)
                    .any(|t| !self.resolve(&t.ty).equals(&first).is_yes())
                {
                    return self.reject(span, "Expressions in frame have different types:", e);
                }
                done(
                    TExprKind::Frame {
                        shape: shape.clone(),
                        elems: typed,
                    },
                    first.lift(&dims(shape)),
                )
            }
            ExprKind::EmptyFrame { shape, elem } => {
                let elem_ty = self.ty(elem)?;
                if product(shape) != 0 {
                    return self.reject(span, "Empty frame has a non-empty shape:", e);
                }
                done(
                    TExprKind::Frame {
                        shape: shape.clone(),
                        elems: Vec::new(),
                    },
                    elem_ty.lift(&dims(shape)),
                )
            }
            ExprKind::Var(v) => match self.values.get(&v.name).cloned() {
                Some(Value::Var(id, ty)) => done(TExprKind::Var(id), ty),
                Some(Value::Intrinsic(name, ty)) => done(TExprKind::Intrinsic(name), ty),
                Some(Value::Poisoned) => None,
                None => {
                    let d = self.error(v.span, format!("unbound variable `{}`", v.name));
                    self.report(d);
                    None
                }
            },
            ExprKind::App { func, arg } => {
                let inner_of_plain_spine = std::mem::take(&mut self.plain_spine);
                if !inner_of_plain_spine && let Some(typed) = self.grad_spine(e) {
                    return typed;
                }
                // (Once a spine, at its outermost application.)
                if !inner_of_plain_spine && self.foreign_form(e) {
                    return None;
                }
                if !inner_of_plain_spine
                    && let Some(inferred) = self.inference.then(|| self.infer_application(e)).flatten()
                {
                    return inferred;
                }
                self.plain_spine = matches!(func.kind, ExprKind::App { .. });
                let f = self.expr(func);
                self.plain_spine = false;
                let a = self.expr(arg);
                let (f, mut a) = (f?, a?);
                // A polymorphic function where a function is wanted: the
                // instantiation that makes it one (`(app2 reverse xs)`).
                if self.inference
                    && instantiate::polymorphic_function(&a.ty)
                    && let Atom::Arrow(param, _) = &f.ty.atom
                    && matches!(param.atom, Atom::Arrow(..))
                {
                    let want = self.resolve(param).into_owned();
                    a = self.instantiate_against(arg, &want)?;
                }
                let mut result = apply(&self.resolve(&f.ty), &self.resolve(&a.ty));
                // A box where the function wants its payload: unboxed for
                // it, around the smallest expression that can hold it (§1.6).
                if self.inference
                    && let Err(AppError::AtomMismatch { param, arg: got, .. }) = &result
                    && matches!(got, Atom::Sigma(..))
                    && !matches!(param, Atom::Sigma(..))
                    && let Some((witness, x, x_ty)) = self.open_box(&a.ty)
                {
                    let opened = apply(&self.resolve(&f.ty), &self.resolve(&x_ty));
                    if opened.is_ok() {
                        let boxed = std::mem::replace(
                            &mut a,
                            TExpr {
                                kind: TExprKind::Var(x),
                                ty: x_ty,
                                span: arg.span,
                            },
                        );
                        self.pending.push(instantiate::Unboxed {
                            witness,
                            var: x,
                            boxed,
                        });
                        result = opened;
                    }
                }
                // A rank parameter's element type is solved by its first use.
                if let Err(AppError::AtomMismatch { param, arg: got, .. }) = &result
                    && self.unify_elements(param, got)
                {
                    result = apply(&self.resolve(&f.ty), &self.resolve(&a.ty));
                }
                // And its dimensions by the frames and cells it must agree with.
                let unified = match &result {
                    Err(AppError::FrameMismatch {
                        fun_frame, arg_frame, ..
                    }) => self.unify_rank_dims(fun_frame, arg_frame, false),
                    Err(AppError::CellMismatch { param, arg: got, .. }) => {
                        self.unify_rank_dims(&param.shape, &got.shape, true)
                    }
                    _ => false,
                };
                if unified {
                    result = apply(&self.resolve(&f.ty), &self.resolve(&a.ty));
                }
                match result {
                    Ok(lifted) => {
                        let ty = lifted.result.clone();
                        done(
                            TExprKind::App {
                                func: Box::new(f),
                                arg: Box::new(a),
                                lifted,
                            },
                            ty,
                        )
                    }
                    Err(err) => {
                        let d = self.application_error(e, &f.ty, err);
                        self.report(d);
                        None
                    }
                }
            }
            ExprKind::TApp { func, arg } => {
                let f = self.expr(func)?;
                let arg_span = arg.span;
                let a = self.ty(arg)?;
                let Atom::Forall(v, body) = &f.ty.atom else {
                    let d = self
                        .error(span, "Expected a forall expression in type application:")
                        .note(print::expr_to_string(func))
                        .note(format!("has type {}", self.show(&f.ty)));
                    self.report(d);
                    return None;
                };
                if !a.shape.is_scalar() {
                    let d = self.error(arg_span, "Ill-kinded application:").note(format!(
                        "{} is an array type; a type argument is an atom type",
                        self.show(&a)
                    ));
                    self.report(d);
                    return None;
                }
                let ty = body.subst_type(*v, &a.atom).lift(&f.ty.shape);
                done(
                    TExprKind::TApp {
                        func: Box::new(f),
                        arg: a.atom,
                    },
                    ty,
                )
            }
            ExprKind::IApp { func, arg } if self.names_transpose(func) => self.transpose_app(func, arg, span),
            ExprKind::IApp { func, arg } => {
                let f = self.expr(func)?;
                let i = self.index(arg)?;
                let Atom::Pi(v, body) = &f.ty.atom else {
                    let d = self
                        .error(span, "Expected a pi expression in ispace application:")
                        .note(print::expr_to_string(func))
                        .note(format!("has type {}", self.show(&f.ty)));
                    self.report(d);
                    return None;
                };
                let Some(i) = coerce_index(*v, i) else {
                    let d = self.error(arg.span(), "Ill-sorted application:").note(format!(
                        "{} expects a {}",
                        print::expr_to_string(func),
                        match v {
                            IVar::Dim(_) => "dimension (or a one-axis shape)",
                            IVar::Shape(_) => "shape (or a dimension)",
                        }
                    ));
                    self.report(d);
                    return None;
                };
                let ty = body.subst_index(*v, &i).lift(&f.ty.shape);
                done(
                    TExprKind::IApp {
                        func: Box::new(f),
                        arg: i,
                    },
                    ty,
                )
            }
            ExprKind::Let { binds, body } => {
                let m = self.mark();
                let mut lets = Vec::new();
                let mut ok = true;
                for b in binds {
                    match self.bind(b) {
                        Some(Some(l)) => lets.push(l),
                        Some(None) => {}
                        None => ok = false,
                    }
                }
                let body = if ok { self.expr(body) } else { None };
                self.reset(m);
                let mut result = body?;
                for (var, value) in lets.into_iter().rev() {
                    let ty = result.ty.clone();
                    result = TExpr {
                        kind: TExprKind::Let {
                            var,
                            value: Box::new(value),
                            body: Box::new(result),
                        },
                        ty,
                        span,
                    };
                }
                Some(result)
            }
            ExprKind::Unbox {
                witness,
                var,
                boxed,
                body,
            } => self.unbox(e, witness, var, boxed, body),
            ExprKind::Record(fields) => self.record(e, fields),
            ExprKind::Field { record, field } => {
                let r = self.expr(record)?;
                let found = match &r.ty.atom {
                    Atom::Record(fs) => fs.iter().find(|(n, _)| *n == field.name).map(|(_, t)| t.clone()),
                    _ => None,
                };
                let Some(cell) = found else {
                    let d = self
                        .error(span, format!("no field `{}` here", field.name))
                        .note(format!(
                            "{} has type {}",
                            print::expr_to_string(record),
                            self.show(&r.ty)
                        ));
                    self.report(d);
                    return None;
                };
                let ty = cell.lift(&r.ty.shape);
                done(
                    TExprKind::Field {
                        record: Box::new(r),
                        field: field.name.clone(),
                    },
                    ty,
                )
            }
            ExprKind::If {
                cond,
                then,
                otherwise,
            } => {
                let c = self.expr(cond);
                let a = self.expr(then);
                let b = self.expr(otherwise);
                let (c, a, b) = (c?, a?, b?);
                // A rank parameter's element type is solved here too.
                self.unify_elements(&c.ty.atom, &Atom::Bool);
                self.unify_elements(&a.ty.atom, &b.ty.atom);
                self.unify_rank_dims(&a.ty.shape, &b.ty.shape, false);
                let resolved = |me: &Self, mut e: TExpr| {
                    e.ty = me.resolve(&e.ty).into_owned();
                    e
                };
                let (c, a, b) = (resolved(self, c), resolved(self, a), resolved(self, b));
                if !(c.ty.atom == Atom::Bool && c.ty.shape.is_scalar()) {
                    let d = self
                        .error(
                            cond.span,
                            format!("the condition of `if` is {}, not a scalar Bool", self.show(&c.ty)),
                        )
                        .note("for a condition per element, use (select c a b)");
                    self.report(d);
                    return None;
                }
                if !a.ty.equals(&b.ty).is_yes() {
                    let d = self
                        .error(span, "the branches of `if` have different types")
                        .note(format!("then: {}", self.show(&a.ty)))
                        .note(format!("else: {}", self.show(&b.ty)));
                    self.report(d);
                    return None;
                }
                let ty = a.ty.clone();
                done(
                    TExprKind::If {
                        cond: Box::new(c),
                        then: Box::new(a),
                        otherwise: Box::new(b),
                    },
                    ty,
                )
            }
            ExprKind::Rerank { ranks, func } if self.inference => self.rerank_expr(span, ranks, func),
            ExprKind::Rerank { .. } => {
                let d = self
                    .error(span, "`rerank` needs type inference")
                    .note("write the η-expansion (fn ((x T) …) (f x …)) with explicit types");
                self.report(d);
                None
            }
            ExprKind::Error => None,
        }
    }

    fn application_error(&mut self, e: &ast::Expr, fun_ty: &Type, err: AppError) -> Diagnostic {
        let shown = print::expr_to_string(e);
        let unknown = |why: Truth, d: Diagnostic| {
            if why == Truth::Unknown {
                d.note("(this could not be proved for every value of the index variables)")
            } else {
                d
            }
        };
        match err {
            AppError::NotAFunction => {
                let head = match &e.kind {
                    ExprKind::App { func, .. } => print::expr_to_string(func),
                    _ => shown.clone(),
                };
                let why = if instantiate::polymorphic_function(fun_ty)
                    || matches!(&fun_ty.atom, Atom::Forall(..) | Atom::Pi(..))
                {
                    format!("`{head}` is polymorphic and must be instantiated first")
                } else {
                    format!("`{head}` is not a function")
                };
                self.error(
                    e.span,
                    format!("Expected an array of functions in application: {why}"),
                )
                .note(shown)
                .note(format!("the function position has type {}", self.show(fun_ty)))
            }
            AppError::AtomMismatch { param, arg, why } => {
                let boxed = matches!(arg, Atom::Sigma(..)) && !matches!(param, Atom::Sigma(..));
                let d = self
                    .error(e.span, "Ill-typed application:")
                    .note(format!(
                        "Param elem type: {}",
                        Type::scalar(param.clone()).show(&self.names)
                    ))
                    .note(format!(
                        "Argument elem type: {}",
                        Type::scalar(arg.clone()).show(&self.names)
                    ))
                    .note(format!("in {shown}"));
                let d = match spine_head(e) {
                    Some(name)
                        if !boxed
                            && matches!(
                                (&param, &arg),
                                (Atom::Int, Atom::Float) | (Atom::Float, Atom::Int)
                            ) =>
                    {
                        let advice = self.element_advice(name, &param, &arg);
                        d.note(advice)
                    }
                    _ => d,
                };
                let d = if boxed {
                    d.note(
                        "the argument is a box that was not unboxed for you (each automatic unbox has a \
                         witness of its own, so two boxes are never known to agree): unbox it once, \
                         (unbox ($n x box) …), and use x",
                    )
                } else {
                    d
                };
                unknown(why, d)
            }
            AppError::CellMismatch { param, arg, why } => {
                let arg_text = match &e.kind {
                    ExprKind::App { arg, .. } => print::expr_to_string(arg),
                    _ => String::new(),
                };
                unknown(
                    why,
                    self.error(e.span, "Ill-shaped application:")
                        .note(format!("Param type: {}", self.show(&param)))
                        .note(format!("Argument: {arg_text}"))
                        .note(format!("Argument type: {}", self.show(&arg)))
                        .note(format!("in {shown}"))
                        .note(format!(
                            "the parameter's cell {} is not a suffix of the argument's shape {}",
                            self.show_shape(&param.shape),
                            self.show_shape(&arg.shape)
                        )),
                )
            }
            AppError::FrameMismatch {
                fun_frame,
                arg_frame,
                why,
            } => {
                let d = self
                    .error(e.span, "Ill-shaped application:")
                    .note(shown)
                    .note(format!(
                        "the function's frame {} and the argument's frame {} are not prefix-related",
                        self.show_shape(&fun_frame),
                        self.show_shape(&arg_frame)
                    ));
                let d = match self.trailing_rerank(e, &fun_frame, &arg_frame) {
                    Some(rerank) => d
                        .note(
                            "frames agree from the leading axis: Remora lifts a function over the leading \
                             axes of its arguments, where NumPy broadcasts from the trailing ones",
                        )
                        .note(format!(
                            "to pair the trailing axes as NumPy does, rerank: {rerank}"
                        )),
                    None => d,
                };
                unknown(why, d)
            }
        }
    }

    /// For `(f a b)` whose argument frames are not prefix-related but one
    /// is a suffix of the other (`(+ m v)`, `m : [Int 2 3]`, `v : [Int
    /// 3]`, NumPy's trailing-axis broadcast): the rerank that makes the
    /// shared trailing axes part of both cells, `((rerank (1 1) +) m v)`,
    /// after which the frames are `[2]` and `[]`. `fun_frame` is the frame
    /// of `(f a)`, which for a function name `f` is `a`'s.
    fn trailing_rerank(&self, e: &ast::Expr, fun_frame: &Shape, arg_frame: &Shape) -> Option<String> {
        let ExprKind::App { func, arg: second } = &e.kind else {
            return None;
        };
        let ExprKind::App {
            func: head,
            arg: first,
        } = &func.kind
        else {
            return None;
        };
        let ExprKind::Var(name) = &head.kind else {
            return None;
        };
        let ty = match self.values.get(&name.name)? {
            Value::Var(_, t) | Value::Intrinsic(_, t) => t,
            Value::Poisoned => return None,
        };
        if !ty.shape.is_scalar() {
            return None;
        }
        let Atom::Arrow(p1, rest) = &ty.atom else {
            return None;
        };
        let Atom::Arrow(p2, _) = &rest.atom else {
            return None;
        };
        let (r1, r2) = (p1.shape.rank()?, p2.shape.rank()?);
        let (f1, f2) = (fun_frame.rank()?, arg_frame.rank()?);
        let shared = if f2 < f1 && arg_frame.is_suffix_of(fun_frame).is_yes() {
            f2
        } else if f1 < f2 && fun_frame.is_suffix_of(arg_frame).is_yes() {
            f1
        } else {
            return None;
        };
        let shown = |a: &ast::Expr| {
            let text = print::expr_to_string(a);
            if text.chars().count() <= 40 {
                text
            } else {
                "…".to_string()
            }
        };
        Some(format!(
            "((rerank ({} {}) {}) {} {})",
            r1 + shared,
            r2 + shared,
            name.name,
            shown(first),
            shown(second)
        ))
    }

    /// An atom of an array literal, with its atom type. `expected` is the
    /// `Σ` type an unannotated inner box takes from its enclosing box.
    fn atom(&mut self, a: &ast::Atom, expected: Option<&Type>) -> Option<(TAtom, Atom)> {
        let span = a.span;
        let done = |kind, atom| Some((TAtom { kind, span }, atom));
        match &a.kind {
            AtomKind::Bool(b) => done(TAtomKind::Bool(*b), Atom::Bool),
            AtomKind::Int(i) => done(TAtomKind::Int(*i), Atom::Int),
            AtomKind::Float(f) => done(TAtomKind::Float(*f), Atom::Float),
            AtomKind::Lambda { param, body } => {
                let m = self.mark();
                let result = self.lambda(param, body);
                self.reset(m);
                let (var, pty, body) = result?;
                let ty = Atom::Arrow(std::sync::Arc::new(pty), std::sync::Arc::new(body.ty.clone()));
                done(
                    TAtomKind::Lambda {
                        param: var,
                        body: Box::new(body),
                    },
                    ty,
                )
            }
            AtomKind::TLambda { param, body } => {
                let m = self.mark();
                let v = self.bind_tparam(param);
                let body = self.expr_scoped(body);
                self.reset(m);
                let body = body?;
                let ty = Atom::Forall(v, std::sync::Arc::new(body.ty.clone()));
                done(
                    TAtomKind::TLambda {
                        param: v,
                        body: Box::new(body),
                    },
                    ty,
                )
            }
            AtomKind::ILambda { param, body } => {
                let m = self.mark();
                let v = self.bind_iparam(param);
                let body = self.expr_scoped(body);
                self.reset(m);
                let body = body?;
                let ty = Atom::Pi(v, std::sync::Arc::new(body.ty.clone()));
                done(
                    TAtomKind::ILambda {
                        param: v,
                        body: Box::new(body),
                    },
                    ty,
                )
            }
            AtomKind::Box { witness, body, ty } => {
                self.box_atom(a, witness.as_deref(), body, ty.as_deref(), expected)
            }
            AtomKind::Error => None,
        }
    }

    /// Binds a lambda's parameter and checks its body (in the caller's scope
    /// mark).
    fn lambda(&mut self, param: &ast::Param, body: &ast::Expr) -> Option<(VarId, Type, TExpr)> {
        let pty = self.param_type(param)?;
        let var = self.fresh_var(&param.name.name);
        self.values.bind(&param.name.name, Value::Var(var, pty.clone()));
        self.plain_lambda_chain = std::mem::take(&mut self.plain_lambda_next);
        let body = self.expr_scoped(body);
        self.plain_lambda_chain = false;
        Some((var, pty, body?))
    }

    fn param_type(&mut self, param: &ast::Param) -> Option<Type> {
        match &param.ann {
            ParamAnn::Type(t) => self.ty(t),
            ParamAnn::Infer => {
                let d = self
                    .error(
                        param.span,
                        format!("parameter `{}` needs a type", param.name.name),
                    )
                    .note("only a lambda passed to a polymorphic function gets its parameter types inferred: write (x T)");
                self.report(d);
                None
            }
            ParamAnn::Rank(rank) => {
                let name = &param.name.name;
                let (written, cell) = match rank {
                    ast::Rank::Nat(0) => ("0".to_string(), "T".to_string()),
                    ast::Rank::Nat(1) => ("1".to_string(), "[T $n]".to_string()),
                    ast::Rank::Nat(2) => ("2".to_string(), "[T $m $n]".to_string()),
                    ast::Rank::Nat(r) => (r.to_string(), format!("[T $n1 … $n{r}]")),
                    ast::Rank::All => ("all".to_string(), "[T @s]".to_string()),
                };
                let why = if self.inference {
                    "a rank parameter's element type (and dimensions) are inferred only where its `fn` is \
                     applied directly or passed to a polymorphic function"
                } else {
                    "a rank parameter needs type inference, which is off here"
                };
                let d = self
                    .error(param.span, format!("parameter `{name}` needs a type"))
                    .note(format!(
                        "({name} {written}) gives the rank of `{name}`, not its type: {why}"
                    ))
                    .note(format!("write its type: ({name} {cell})"));
                self.report(d);
                None
            }
        }
    }

    /// `(box e)` with neither witnesses nor a type (extensions.md §1.5):
    /// every axis of `e` is a witness, `Σ ($n1) … (Σ ($nk) [A $n1 … $nk])`,
    /// as nested boxes of one witness each (a shape variable of `e`'s shape
    /// is a shape witness; a scalar is boxed over its empty shape).
    fn infer_box(&mut self, span: Span, body: &ast::Expr) -> Option<(TAtom, Atom)> {
        let e = self.expr(body)?;
        let segs: Vec<remora_types::Seg> = if e.ty.shape.is_scalar() {
            vec![remora_types::Seg::Var(self.fresh_svar("@empty"))]
        } else {
            e.ty.shape.segs().to_vec()
        };
        // The witnesses, and the Σ binders they stand for.
        let mut witnesses = Vec::new();
        let mut binders = Vec::new();
        let mut pattern = Vec::new();
        for (k, seg) in segs.iter().enumerate() {
            match seg {
                remora_types::Seg::Dim(d) => {
                    let v = self.fresh_dvar(&format!("$n{k}"));
                    witnesses.push(Index::Dim(d.clone()));
                    binders.push(IVar::Dim(v));
                    pattern.push(remora_types::Seg::Dim(Dim::var(v)));
                }
                remora_types::Seg::Var(sv) => {
                    let v = self.fresh_svar(&format!("@s{k}"));
                    let w = if e.ty.shape.is_scalar() {
                        Shape::scalar()
                    } else {
                        Shape::var(*sv)
                    };
                    witnesses.push(Index::Shape(w));
                    binders.push(IVar::Shape(v));
                    pattern.push(remora_types::Seg::Var(v));
                }
            }
        }
        let payload = Type::array(e.ty.atom.clone(), Shape::from_segs(pattern));
        // Σ_j = Σ (v_j) … Σ (v_k) payload, with v_1 … v_(j-1) given their witnesses.
        let sigma = |j: usize| -> Type {
            let mut t = payload.clone();
            for v in binders[j..].iter().rev() {
                t = Type::scalar(Atom::Sigma(*v, std::sync::Arc::new(t)));
            }
            for (v, w) in binders[..j].iter().zip(&witnesses) {
                t = t.subst_index(*v, w);
            }
            t
        };
        let mut inner = e;
        let mut atom = None;
        for j in (0..binders.len()).rev() {
            let ty = sigma(j);
            let boxed = TAtom {
                kind: TAtomKind::Box {
                    witness: witnesses[j].clone(),
                    body: Box::new(inner),
                },
                span,
            };
            if j == 0 {
                atom = Some((boxed, ty.atom));
                break;
            }
            inner = TExpr {
                kind: TExprKind::Array {
                    shape: Vec::new(),
                    atoms: vec![boxed],
                },
                ty,
                span,
            };
        }
        atom
    }

    fn box_atom(
        &mut self,
        a: &ast::Atom,
        witness: Option<&ast::Ispace>,
        body: &ast::Expr,
        ann: Option<&ast::Type>,
        expected: Option<&Type>,
    ) -> Option<(TAtom, Atom)> {
        let span = a.span;
        let Some(witness) = witness else {
            if self.inference && ann.is_none() && expected.is_none() {
                return self.infer_box(span, body);
            }
            let d = self
                .error(span, "`(box e)` needs type inference")
                .note("write the witnesses and the Σ type: (box (i …) e (Σ (…) T))");
            self.report(d);
            return None;
        };
        let sigma = match (ann, expected) {
            (Some(t), _) => self.ty(t)?,
            (None, Some(t)) => t.clone(),
            (None, None) => {
                let d = self
                    .error(span, "Unannotated box:")
                    .note("a box needs its Σ type: (box (i) e (Σ ($d) T))");
                self.report(d);
                return None;
            }
        };
        let (Atom::Sigma(v, payload), true) = (&sigma.atom, sigma.shape.is_scalar()) else {
            let d = self
                .error(span, "Non-existential box type:")
                .note(self.show(&sigma));
            self.report(d);
            return None;
        };
        let w = self.index(witness)?;
        let Some(w) = coerce_index(*v, w) else {
            let d = self.error(witness.span(), "Ill-sorted box witness");
            self.report(d);
            return None;
        };
        let want = payload.subst_index(*v, &w);
        // An unannotated inner box (from `(box (i j) e T)`) takes its type
        // from the enclosing Σ.
        let inner_box = match &body.kind {
            ExprKind::Array { shape, atoms } if shape.is_empty() && atoms.len() == 1 => {
                match &atoms[0].kind {
                    AtomKind::Box { ty: None, .. } => Some(&atoms[0]),
                    _ => None,
                }
            }
            _ => None,
        };
        let tbody = match inner_box {
            // Only a nested Σ types the inner box; otherwise it is unannotated.
            Some(inner) if matches!(want.atom, Atom::Sigma(..)) && want.shape.is_scalar() => {
                let (ta, atom) = self.atom(inner, Some(&want))?;
                TExpr {
                    kind: TExprKind::Array {
                        shape: Vec::new(),
                        atoms: vec![ta],
                    },
                    ty: Type::scalar(atom),
                    span: body.span,
                }
            }
            Some(inner) => {
                let d = self.error(inner.span, "Unannotated box:").note(format!(
                    "an inner box takes its type from a nested Σ, but the payload type here is {}",
                    self.show(&want)
                ));
                self.report(d);
                return None;
            }
            None => self.expr(body)?,
        };
        if !tbody.ty.equals(&want).is_yes() {
            let d = self
                .error(span, "Wrong box type.")
                .note(format!("Expected: {}", self.show(&want)))
                .note(format!("But got: {}", self.show(&tbody.ty)));
            self.report(d);
            return None;
        }
        Some((
            TAtom {
                kind: TAtomKind::Box {
                    witness: w,
                    body: Box::new(tbody),
                },
                span,
            },
            sigma.atom.clone(),
        ))
    }

    fn unbox(
        &mut self,
        e: &ast::Expr,
        witness: &ast::IParam,
        var: &ast::Ident,
        boxed: &ast::Expr,
        body: &ast::Expr,
    ) -> Option<TExpr> {
        let b = self.expr(boxed)?;
        let Atom::Sigma(v, payload) = &b.ty.atom else {
            let d = self
                .error(e.span, "Expected an existentially typed expression in unbox:")
                .note(print::expr_to_string(boxed))
                .note(format!("has type {}", self.show(&b.ty)));
            self.report(d);
            return None;
        };
        let m = self.mark();
        let w = self.bind_iparam(witness);
        // The box's witness sort is not checked against the binder's
        // (remora-lang's tests/iota0): a dimension binder over a shape
        // witness stands for a one-axis shape, and the other way round.
        let w_index = match (*v, w) {
            (IVar::Dim(_), IVar::Dim(d)) => Index::Dim(Dim::var(d)),
            (IVar::Shape(_), IVar::Shape(s)) => Index::Shape(Shape::var(s)),
            (IVar::Shape(_), IVar::Dim(d)) => Index::Shape(Shape::from_dims([Dim::var(d)])),
            (IVar::Dim(_), IVar::Shape(s)) => Index::Shape(Shape::var(s)),
        };
        // A shape binder over a dimension witness: the witness is a fresh
        // dimension, and the binder names the one-axis shape of it.
        let (x_ty, escapes) = match (*v, w) {
            (IVar::Dim(_), IVar::Shape(_)) => {
                let d = self.fresh_dvar(&witness.name.name);
                self.shapes
                    .bind(&witness.name.name, Shape::from_dims([Dim::var(d)]));
                (payload.subst_index(*v, &Index::Dim(Dim::var(d))), IVar::Dim(d))
            }
            _ => (payload.subst_index(*v, &w_index), w),
        };
        let x = self.fresh_var(&var.name);
        self.values.bind(&var.name, Value::Var(x, x_ty));
        let tbody = self.expr_scoped(body);
        self.reset(m);
        let tbody = tbody?;
        // A witness may leave its unbox, as in remora-lang: its tutorial
        // returns payloads so, and core.md §6 (1) runs
        // `(unbox ($n x [(box (2) [5 8] T) (box (2) [6 7] T)]) x)` to
        // `[[5 8] [6 7]]`. The witness stays an opaque variable that nothing
        // outside can name or prove equal to anything else; over a frame of
        // boxes whose payloads differ in shape, the interpreter reports that
        // the results cannot form one array.
        let ty = tbody.ty.lift(&b.ty.shape);
        Some(TExpr {
            kind: TExprKind::Unbox {
                witness: escapes,
                binder: w,
                var: x,
                boxed: Box::new(b),
                body: Box::new(tbody),
            },
            ty,
            span: e.span,
        })
    }

    fn record(&mut self, e: &ast::Expr, fields: &[ast::RecordField]) -> Option<TExpr> {
        let mut typed = Vec::new();
        let mut cells = Vec::new();
        let mut principal = Shape::scalar();
        for (i, f) in fields.iter().enumerate() {
            if fields[..i].iter().any(|g| g.name.name == f.name.name) {
                let d = self.error(
                    f.name.span,
                    format!("the field `{}` appears twice in this record", f.name.name),
                );
                self.report(d);
                return None;
            }
            let value = self.expr(&f.value)?;
            let cell = self.shape(&f.cell)?;
            let frame =
                match value.ty.shape.strip_suffix(&cell) {
                    Ok(frame) => frame,
                    Err(_) => {
                        let d = self
                        .error(
                            f.value.span,
                            "The shapes of expressions could not be separated into frame and cell parts: ",
                        )
                        .note(format!("field `{}` has type {}", f.name.name, self.show(&value.ty)));
                        self.report(d);
                        return None;
                    }
                };
            principal = match remora_types::principal_frame(&principal, &frame) {
                Ok(p) => p,
                Err(_) => {
                    let d = self
                        .error(
                            e.span,
                            "The expressions in record constructor have incompatible frames:",
                        )
                        .note(print::expr_to_string(e));
                    self.report(d);
                    return None;
                }
            };
            cells.push((f.name.name.clone(), Type::array(value.ty.atom.clone(), cell)));
            typed.push((f.name.name.clone(), value));
        }
        Some(TExpr {
            kind: TExprKind::Record(typed),
            ty: Type::array(Atom::Record(std::sync::Arc::new(cells)), principal),
            span: e.span,
        })
    }

    // ----------------------------------------------------------------------
    // Bindings

    /// Checks one binding and brings its name into scope. `Some(Some(…))` is
    /// a value to `let`; `Some(None)` an alias (nothing at run time); `None`
    /// an error (reported).
    pub(crate) fn bind(&mut self, b: &ast::Bind) -> Option<Option<(VarId, TExpr)>> {
        let result = self.bind_checked(b);
        if result.is_none()
            && let BindKind::Val { name, .. }
            | BindKind::Fun { name, .. }
            | BindKind::TFun { name, .. }
            | BindKind::IFun { name, .. } = &b.kind
        {
            self.values.bind(&name.name, Value::Poisoned);
        }
        result
    }

    fn bind_checked(&mut self, b: &ast::Bind) -> Option<Option<(VarId, TExpr)>> {
        match &b.kind {
            BindKind::Val { name, ty, expr } => {
                let value = self.expr_scoped(expr)?;
                if let Some(t) = ty {
                    let want = self.ty(t)?;
                    self.expect_type(b.span, &value.ty, &want)?;
                }
                Some(Some(self.define(&name.name, value)))
            }
            BindKind::Fun {
                name,
                params,
                ret,
                body,
            } => {
                let value = self.generalised(b.span, params, ret.as_ref(), body)?;
                Some(Some(self.define(&name.name, value)))
            }
            BindKind::TFun {
                name,
                params,
                ret,
                body,
            } => {
                let value = self.quantified(b.span, ret.as_ref(), body, |c| {
                    params.iter().map(|p| Binder::Type(c.bind_tparam(p))).collect()
                })?;
                Some(Some(self.define(&name.name, value)))
            }
            BindKind::IFun {
                name,
                params,
                ret,
                body,
            } => {
                let value = self.quantified(b.span, ret.as_ref(), body, |c| {
                    params.iter().map(|p| Binder::Index(c.bind_iparam(p))).collect()
                })?;
                Some(Some(self.define(&name.name, value)))
            }
            BindKind::TypeAlias { param, ty } => {
                if matches!(ty.kind, ast::TypeKind::Array { .. }) {
                    let d = self.error(b.span, "Invalid type.").note(format!(
                        "`{}` names an atom type; write (type *t …) for an array type",
                        param.name.name
                    ));
                    self.report(d);
                    return None;
                }
                let t = self.ty(ty)?;
                self.types.bind(&param.name.name, t.atom);
                Some(None)
            }
            BindKind::IspaceAlias { param, ispace } => {
                let i = self.index(ispace)?;
                match (param.sort, i) {
                    (Sort::Dim, Index::Dim(d)) => self.dims.bind(&param.name.name, d),
                    (Sort::Shape, Index::Shape(s)) => self.shapes.bind(&param.name.name, s),
                    _ => {
                        let d = self.error(b.span, "Incompatible ispace binding:").note(format!(
                            "`{}` and the index it is bound to are of different sorts",
                            param.name.name
                        ));
                        self.report(d);
                        return None;
                    }
                }
                Some(None)
            }
        }
    }

    /// Binds a value to a fresh variable under `name`.
    fn define(&mut self, name: &str, value: TExpr) -> (VarId, TExpr) {
        let var = self.fresh_var(name);
        self.values.bind(name, Value::Var(var, value.ty.clone()));
        (var, value)
    }

    /// `(t-fun (f (&t …) : R) body)` / `(i-fun (f ($n …) : R) body)`: the
    /// binders (bound by `bind`, in a scope of their own) wrapped around the
    /// annotated body as nested `tλ`/`iλ`.
    fn quantified(
        &mut self,
        span: Span,
        ret: Option<&ast::Type>,
        body: &ast::Expr,
        bind: impl FnOnce(&mut Self) -> Vec<Binder>,
    ) -> Option<TExpr> {
        let m = self.mark();
        let binders = bind(self);
        let value = self.annotated_body(span, ret, body);
        self.reset(m);
        wrap_binders(binders, value?, span)
    }

    /// `(fun (f (x T) … : R) body)` whose parameter or result types mention
    /// type or index variables bound nowhere (extensions.md §1.4): the
    /// function is generalised over them, as if written in a `t-fun` and an
    /// `i-fun` (types first, each kind in order of first mention). Without
    /// inference, or with no such variables, it is the plain function.
    fn generalised(
        &mut self,
        span: Span,
        params: &[ast::Param],
        ret: Option<&ast::Type>,
        body: &ast::Expr,
    ) -> Option<TExpr> {
        let mut free = Free::default();
        if self.inference {
            for p in params {
                if let ast::ParamAnn::Type(t) = &p.ann {
                    free.ty(t, self);
                }
            }
            if let Some(t) = ret {
                free.ty(t, self);
            }
        }
        let ranked = self.inference && params.iter().any(|p| matches!(p.ann, ast::ParamAnn::Rank(_)));
        if free.types.is_empty() && free.indices.is_empty() && !ranked {
            return self.function(span, params, &[], ret, body);
        }
        let m = self.mark();
        let mut binders = Vec::new();
        for t in &free.types {
            binders.push(Binder::Type(self.bind_tparam(t)));
        }
        for i in &free.indices {
            binders.push(Binder::Index(self.bind_iparam(i)));
        }
        // Rank parameters: their dimensions generalised after the written
        // variables, their element types solved by the body.
        let mut elements = Vec::new();
        let given: Vec<Option<Type>> = params
            .iter()
            .map(|p| match p.ann {
                ast::ParamAnn::Rank(r) if ranked => {
                    Some(self.rank_param_type(p, r, &mut binders, &mut elements))
                }
                _ => None,
            })
            .collect();
        let value = self.function(span, params, &given, ret, body);
        self.reset(m);
        if ranked {
            return self.finish_ranked(value?, &elements, binders, span);
        }
        wrap_binders(binders, value?, span)
    }
}

/// The type and index variables a written type mentions that are bound
/// neither in it nor in scope, in order of first mention.
#[derive(Default)]
struct Free {
    types: Vec<ast::TParam>,
    indices: Vec<ast::IParam>,
    /// Bound inside the type being walked (by ∀, Π, Σ).
    inner: Vec<String>,
}

impl Free {
    fn ty(&mut self, t: &ast::Type, c: &Checker) {
        use ast::TypeKind as K;
        match &t.kind {
            K::Var(name) => {
                if !self.inner.contains(&name.name)
                    && c.types.get(&name.name).is_none()
                    && !self.types.iter().any(|p| p.name.name == name.name)
                {
                    self.types.push(ast::TParam { name: name.clone() });
                }
            }
            K::Array { elem, shape } => {
                self.ty(elem, c);
                self.shape(shape, c);
            }
            K::Arrow { param, result } => {
                self.ty(param, c);
                self.ty(result, c);
            }
            K::Forall { param, body } => {
                self.inner.push(param.name.name.clone());
                self.ty(body, c);
                self.inner.pop();
            }
            K::Pi { param, body } | K::Sigma { param, body } => {
                self.inner.push(param.name.name.clone());
                self.ty(body, c);
                self.inner.pop();
            }
            K::Record(fields) => {
                for (_, t) in fields {
                    self.ty(t, c);
                }
            }
            K::Int | K::Bool | K::Float | K::Hole | K::Error => {}
        }
    }

    fn index(&mut self, sort: Sort, name: &ast::Ident, c: &Checker) {
        let bound = match sort {
            Sort::Dim => c.dims.get(&name.name).is_some(),
            Sort::Shape => c.shapes.get(&name.name).is_some(),
        };
        if !bound
            && !self.inner.contains(&name.name)
            && !self.indices.iter().any(|p| p.name.name == name.name)
        {
            self.indices.push(ast::IParam {
                sort,
                name: name.clone(),
            });
        }
    }

    fn shape(&mut self, s: &ast::Shape, c: &Checker) {
        match &s.kind {
            ast::ShapeKind::Var(name) => self.index(Sort::Shape, name, c),
            ast::ShapeKind::Splice(parts) => {
                for p in parts {
                    self.ispace(p, c);
                }
            }
            ast::ShapeKind::Error => {}
        }
    }

    fn ispace(&mut self, i: &ast::Ispace, c: &Checker) {
        match i {
            ast::Ispace::Dim(d) => self.dim(d, c),
            ast::Ispace::Shape(s) => self.shape(s, c),
            ast::Ispace::Hole(_) => {}
        }
    }

    fn dim(&mut self, d: &ast::Dim, c: &Checker) {
        match &d.kind {
            ast::DimKind::Var(name) => self.index(Sort::Dim, name, c),
            ast::DimKind::Add(ds) | ast::DimKind::Mul(ds) | ast::DimKind::Sub(ds) => {
                for d in ds {
                    self.dim(d, c);
                }
            }
            ast::DimKind::Nat(_) | ast::DimKind::Hole | ast::DimKind::Error => {}
        }
    }
}

/// The automatic unbox `u` closed around `t`, over the frame of boxes.
fn close_unbox(u: instantiate::Unboxed, t: TExpr) -> TExpr {
    let ty = t.ty.lift(&u.boxed.ty.shape);
    let span = t.span;
    TExpr {
        kind: TExprKind::Unbox {
            witness: u.witness,
            binder: u.witness,
            var: u.var,
            boxed: Box::new(u.boxed),
            body: Box::new(t),
        },
        ty,
        span,
    }
}

/// The name at the head of an application spine (`+` in `(+ 1.0 2.0)`).
fn spine_head(e: &ast::Expr) -> Option<&str> {
    let mut head = e;
    while let ExprKind::App { func, .. } = &head.kind {
        head = func;
    }
    match &head.kind {
        ExprKind::Var(name) => Some(&name.name),
        _ => None,
    }
}

/// How Remora writes what another Lisp writes with `name` at the head of
/// a form.
fn foreign_form(name: &str) -> Option<&'static str> {
    match name {
        "lambda" => Some(
            "a function is written with `fn`: (fn ((x T) …) body), each parameter with its type T (or its rank)",
        ),
        "define" | "defun" | "defn" => Some(
            "a definition is written with `def` at the top level: (def (val x e)), or (def (fun (f (x T) …) body)) for a function",
        ),
        _ => None,
    }
}

/// A `fn` literal with a rank parameter (extensions.md §2), `(fn ((x 1)
/// (y 0)) e)`: its parameters (the nested one-parameter lambdas it
/// desugars to) and its body. It is checked as a `fun` with rank
/// parameters is: generalised over the ranks' dimensions.
pub(crate) fn ranked_fn(e: &ast::Expr) -> Option<(Vec<ast::Param>, &ast::Expr)> {
    let mut params = Vec::new();
    let mut body = e;
    while let ExprKind::Array { shape, atoms } = &body.kind
        && shape.is_empty()
        && let [
            ast::Atom {
                kind: AtomKind::Lambda { param, body: inner },
                ..
            },
        ] = atoms.as_slice()
    {
        params.push((**param).clone());
        body = inner;
    }
    params
        .iter()
        .any(|p| matches!(p.ann, ast::ParamAnn::Rank(_)))
        .then_some((params, body))
}

/// Whether `e` binds names over part of itself (a `let`, an `unbox`, a
/// literal with lambdas): a box unboxed inside must be wrapped inside.
fn binds_names(e: &ast::Expr) -> bool {
    match &e.kind {
        ExprKind::Let { .. } | ExprKind::Unbox { .. } => true,
        ExprKind::Array { atoms, .. } => atoms.iter().any(|a| {
            matches!(
                a.kind,
                AtomKind::Lambda { .. } | AtomKind::TLambda { .. } | AtomKind::ILambda { .. }
            )
        }),
        _ => false,
    }
}

/// The body wrapped in `tλ`/`iλ` for each binder, outermost first.
fn wrap_binders(binders: Vec<Binder>, value: TExpr, span: Span) -> Option<TExpr> {
    {
        binders.into_iter().rev().try_fold(value, |body, binder| {
            let (atom, kind) = match binder {
                Binder::Type(v) => (
                    Atom::Forall(v, std::sync::Arc::new(body.ty.clone())),
                    TAtomKind::TLambda {
                        param: v,
                        body: Box::new(body),
                    },
                ),
                Binder::Index(v) => (
                    Atom::Pi(v, std::sync::Arc::new(body.ty.clone())),
                    TAtomKind::ILambda {
                        param: v,
                        body: Box::new(body),
                    },
                ),
            };
            Some(scalar_atom(kind, Type::scalar(atom), span))
        })
    }
}

impl Checker {
    /// `(fun (f (x T) … : R) body)` as nested lambdas.
    fn function(
        &mut self,
        span: Span,
        params: &[ast::Param],
        given: &[Option<Type>],
        ret: Option<&ast::Type>,
        body: &ast::Expr,
    ) -> Option<TExpr> {
        let m = self.mark();
        let mut bound = Vec::new();
        let mut ok = true;
        for (k, p) in params.iter().enumerate() {
            let t = match given.get(k) {
                Some(Some(t)) => Some(t.clone()),
                _ => self.param_type(p),
            };
            match t {
                Some(t) => {
                    let v = self.fresh_var(&p.name.name);
                    self.values.bind(&p.name.name, Value::Var(v, t.clone()));
                    bound.push((v, t));
                }
                None => ok = false,
            }
        }
        let body = if ok {
            self.annotated_body(span, ret, body)
        } else {
            None
        };
        self.reset(m);
        bound.into_iter().rev().try_fold(body?, |body, (v, t)| {
            let ty = Type::arrow(t, body.ty.clone());
            Some(scalar_atom(
                TAtomKind::Lambda {
                    param: v,
                    body: Box::new(body),
                },
                ty,
                span,
            ))
        })
    }

    fn annotated_body(&mut self, span: Span, ret: Option<&ast::Type>, body: &ast::Expr) -> Option<TExpr> {
        let want = match ret {
            Some(t) => Some(self.ty(t)?),
            None => None,
        };
        let body = self.expr_scoped(body)?;
        if let Some(want) = want {
            // The annotation may say what a rank parameter's type is.
            self.unify_elements(&body.ty.atom, &want.atom);
            self.unify_rank_dims(&body.ty.shape, &want.shape, false);
            let got = self.resolve(&body.ty).into_owned();
            self.expect_type(span, &got, &want)?;
        }
        Some(body)
    }

    fn expect_type(&mut self, span: Span, got: &Type, want: &Type) -> Option<()> {
        if got.equals(want).is_yes() {
            return Some(());
        }
        let d = self
            .error(span, "Type:")
            .note(self.show(got))
            .note("doesn't match the annotated type:")
            .note(self.show(want));
        self.report(d);
        None
    }

    // ----------------------------------------------------------------------
    // Programs

    pub fn program(&mut self, p: &ast::Program) -> Vec<TDecl> {
        let mut out = Vec::new();
        for d in &p.decls {
            self.at_top = match &d.kind {
                DeclKind::Def(b) => matches!(b.kind, BindKind::Val { ty: None, .. }),
                DeclKind::Entry { .. } | DeclKind::Expr(_) => true,
            };
            self.program_decl(d, &mut out);
            self.at_top = false;
        }
        out
    }

    fn program_decl(&mut self, d: &ast::Decl, out: &mut Vec<TDecl>) {
        {
            match &d.kind {
                DeclKind::Def(b) => {
                    if let Some(Some((var, value))) = self.bind(b) {
                        out.push(TDecl::Def {
                            var,
                            name: b.name().name.clone(),
                            entry: false,
                            value,
                        });
                    }
                }
                DeclKind::Entry {
                    name,
                    params,
                    ret,
                    body,
                } => {
                    let value = if params.is_empty() {
                        self.annotated_body(d.span, ret.as_ref(), body)
                    } else {
                        // Its parameters' free dimension, shape and type
                        // variables are bound by its arguments when it
                        // runs (as a `fun`'s are by inference).
                        self.generalised(d.span, params, ret.as_ref(), body)
                    };
                    match value {
                        None => self.values.bind(&name.name, Value::Poisoned),
                        Some(value) => {
                            let (var, value) = self.define(&name.name, value);
                            out.push(TDecl::Def {
                                var,
                                name: name.name.clone(),
                                entry: true,
                                value,
                            });
                        }
                    }
                }
                DeclKind::Expr(e) => {
                    if let Some(t) = self.expr_scoped(e) {
                        out.push(TDecl::Expr(t));
                    }
                }
            }
        }
    }
}

fn product(shape: &[u64]) -> u64 {
    shape.iter().fold(1u64, |a, d| a.saturating_mul(*d))
}

fn dims(shape: &[u64]) -> Shape {
    Shape::from_dims(shape.iter().map(|d| Dim::nat(*d)))
}

fn scalar_atom(kind: TAtomKind, ty: Type, span: Span) -> TExpr {
    TExpr {
        kind: TExprKind::Array {
            shape: Vec::new(),
            atoms: vec![TAtom { kind, span }],
        },
        ty,
        span,
    }
}

/// An index argument for a parameter of sort `v`: a shape parameter takes a
/// dimension as a one-axis shape, a dimension parameter a one-axis shape
/// (core.md §3).
impl Checker {
    /// The type of `(i-app transpose P)`: for a permutation `P` of
    /// `0 … r-1` (constants), a function of a cell of rank `r` whose result
    /// has axis `k` of length the argument's axis `P[k]` (NumPy's
    /// `transpose(x, axes)`); anything else is a type error at `P`.
    pub(super) fn transpose_type(&mut self, span: Span, perm: &Index) -> Option<Type> {
        let shape = match perm {
            Index::Dim(d) => Shape::from_dims([d.clone()]),
            Index::Shape(s) => s.clone(),
        };
        let axes: Option<Vec<i64>> = shape
            .dims()
            .and_then(|dims| dims.iter().map(|d| d.as_const()).collect());
        let Some(axes) = axes else {
            let d = self
                .error(span, "transpose: the permutation must be written out as numbers")
                .note(format!("got {}", self.show_shape(&shape)))
                .note("write it as a shape of axis numbers: (i-app transpose [1 0])");
            self.report(d);
            return None;
        };
        let r = axes.len();
        let mut seen = vec![false; r];
        for &a in &axes {
            match usize::try_from(a).ok().filter(|&a| a < r) {
                Some(a) if !seen[a] => seen[a] = true,
                _ => {
                    let d = self
                        .error(
                            span,
                            format!(
                                "transpose: {} is not a permutation of the axes 0 … {}",
                                self.show_shape(&shape),
                                r.saturating_sub(1)
                            ),
                        )
                        .note("each axis number from 0 to the rank less 1 must appear exactly once");
                    self.report(d);
                    return None;
                }
            }
        }
        let dims: Vec<String> = (0..r).map(|k| format!("$d{k}")).collect();
        let permuted: Vec<String> = axes.iter().map(|&a| format!("$d{a}")).collect();
        let arrow = format!("(-> [&t {}] [&t {}])", dims.join(" "), permuted.join(" "));
        let text = if r == 0 {
            format!("(∀ (&t) {arrow})")
        } else {
            format!("(∀ (&t) (Π ({}) {arrow}))", dims.join(" "))
        };
        let mut scratch = SourceMap::new();
        let parsed = remora_syntax::parse_type(&mut scratch, "<transpose>", &text);
        let mark = self.diags.len();
        let ty = self.ty(&parsed.value);
        self.diags.truncate(mark);
        ty
    }

    /// `(i-app transpose P)` in the core rule (out of line: `expr`
    /// recurses as deep as a program nests, and its frame must stay small).
    #[inline(never)]
    fn transpose_app(&mut self, func: &ast::Expr, arg: &ast::Ispace, span: Span) -> Option<TExpr> {
        let f = self.expr(func)?;
        let i = self.index(arg)?;
        let ty = self.transpose_type(arg.span(), &i)?;
        Some(TExpr {
            kind: TExprKind::IApp {
                func: Box::new(f),
                arg: i,
            },
            ty,
            span,
        })
    }

    /// `(grad f)`, and its applications, typed by a rule of its own (`f`
    /// may take several parameters, the gradient being with respect to the
    /// first): `None` when `e`'s head is not the intrinsic `grad`.
    #[inline(never)]
    fn grad_spine(&mut self, e: &ast::Expr) -> Option<Option<TExpr>> {
        let mut apps = Vec::new();
        let mut head = e;
        while let ExprKind::App { func, .. } = &head.kind {
            apps.push(head);
            head = func;
        }
        let name = match &head.kind {
            ExprKind::Var(v) => match self.values.get(&v.name) {
                Some(Value::Intrinsic("grad", _)) => "grad",
                Some(Value::Intrinsic("value-and-grad", _)) => "value-and-grad",
                _ => return None,
            },
            _ => return None,
        };
        apps.reverse();
        Some(self.grad_application(name, head, &apps))
    }

    /// `(grad f)` or `(value-and-grad f)` (whose function gives the record
    /// `{(value Float) (gradient …)}`), applied to `apps`' arguments.
    fn grad_application(
        &mut self,
        name: &'static str,
        head: &ast::Expr,
        apps: &[&ast::Expr],
    ) -> Option<TExpr> {
        let (first, rest) = apps.split_first()?;
        let ExprKind::App { arg, .. } = &first.kind else {
            return None;
        };
        let f = self.expr(arg)?;
        let fty = self.resolve(&f.ty).into_owned();
        let mut params = Vec::new();
        let mut result = &fty;
        while let Atom::Arrow(p, r) = &result.atom
            && result.shape.is_scalar()
        {
            params.push(p.clone());
            result = r;
        }
        let Some(first_param) = params.first().cloned() else {
            let d = self.error(
                arg.span,
                format!(
                    "`{name}` of a value that is not a function: `{}`",
                    self.show(&fty)
                ),
            );
            self.report(d);
            return None;
        };
        if !(result.atom == Atom::Float && result.shape.is_scalar()) {
            let d = self.error(
                arg.span,
                format!(
                    "`{name}` of a function whose result is `{}`, not a scalar Float",
                    self.show(result)
                ),
            );
            self.report(d);
            return None;
        }
        let result = if name == "grad" {
            Type::clone(&first_param)
        } else {
            Type::scalar(Atom::Record(std::sync::Arc::new(vec![
                ("value".to_string(), Type::scalar(Atom::Float)),
                ("gradient".to_string(), Type::clone(&first_param)),
            ])))
        };
        let gty = params.iter().rev().fold(result, |r, p| {
            Type::scalar(Atom::Arrow(p.clone(), std::sync::Arc::new(r)))
        });
        let grad = TExpr {
            kind: TExprKind::Intrinsic(name),
            ty: Type::scalar(Atom::Arrow(
                std::sync::Arc::new(fty),
                std::sync::Arc::new(gty.clone()),
            )),
            span: head.span,
        };
        let mut typed = TExpr {
            kind: TExprKind::App {
                func: Box::new(grad),
                arg: Box::new(f),
                lifted: remora_types::Lifted {
                    fun_frame: Shape::scalar(),
                    arg_frame: Shape::scalar(),
                    arg_cell: Shape::scalar(),
                    principal: Shape::scalar(),
                    result: gty.clone(),
                },
            },
            ty: gty,
            span: first.span,
        };
        for app in rest {
            let ExprKind::App { arg, .. } = &app.kind else {
                return None;
            };
            let a = self.expr(arg)?;
            let fun_ty = self.resolve(&typed.ty).into_owned();
            match apply(&fun_ty, &self.resolve(&a.ty)) {
                Ok(lifted) => {
                    let ty = lifted.result.clone();
                    typed = TExpr {
                        kind: TExprKind::App {
                            func: Box::new(typed),
                            arg: Box::new(a),
                            lifted,
                        },
                        ty,
                        span: app.span,
                    };
                }
                Err(err) => {
                    let d = self.application_error(app, &fun_ty, err);
                    self.report(d);
                    return None;
                }
            }
        }
        Some(typed)
    }

    /// Whether `func` is the intrinsic `transpose` (not shadowed).
    #[inline(never)]
    fn names_transpose(&self, func: &ast::Expr) -> bool {
        matches!(&func.kind, ExprKind::Var(v)
            if matches!(self.values.get(&v.name), Some(Value::Intrinsic("transpose", _))))
    }

    /// `transpose` used without its permutation (it has no type of its
    /// own to instantiate): reported, true.
    pub(super) fn bare_transpose(&mut self, f: &TExprKind, span: Span) -> bool {
        if !matches!(f, TExprKind::Intrinsic("transpose")) {
            return false;
        }
        let d = self
            .error(span, "transpose needs its permutation before anything else")
            .note("write ((i-app transpose [1 0]) m), the result's axis k being the argument's axis P[k]");
        self.report(d);
        true
    }
}

fn coerce_index(v: IVar, i: Index) -> Option<Index> {
    match (v, i) {
        (IVar::Dim(_), Index::Dim(d)) => Some(Index::Dim(d)),
        (IVar::Shape(_), Index::Shape(s)) => Some(Index::Shape(s)),
        (IVar::Shape(_), Index::Dim(d)) => Some(Index::Shape(Shape::from_dims([d]))),
        (IVar::Dim(_), Index::Shape(s)) => match s.dims().as_deref() {
            Some([d]) => Some(Index::Dim((*d).clone())),
            _ => None,
        },
    }
}

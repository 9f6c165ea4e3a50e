//! Rank parameters (extensions.md §2): `(fun (lerp (lo 0) (hi 0) (a 0)) …)`.
//! A parameter written with a rank gets an array type of that rank whose
//! dimensions are fresh index variables (generalised, as §1.4 does for
//! written ones) and whose element type is an *element unknown*: solved by
//! the first application that needs it to be something (`(f.* lo x)` makes
//! it `Float`), substituted through the function's typed body when the
//! function is done, and generalised as a `∀` if nothing solved it.

use super::{Binder, Checker, wrap_binders};
use crate::infer::{Solution, Unknowns};
use crate::typed::{TAtom, TAtomKind, TExpr, TExprKind};
use remora_syntax::Span;
use remora_syntax::ast;
use remora_types::{Atom, DVar, Dim, IVar, Index, MAX_RANK, Shape, TVar, Type};
use std::borrow::Cow;

/// The unsolved element types and dimensions of rank parameters that an
/// application's types mention: unknowns of its instantiation that it may
/// solve, or leave for their function to settle.
#[derive(Clone, Debug, Default)]
pub(super) struct RankUnknowns {
    elements: Vec<TVar>,
    dims: Vec<DVar>,
}

impl RankUnknowns {
    /// Made unknowns of an instantiation.
    pub(super) fn add_to(&self, u: &mut Unknowns) {
        u.types.extend(self.elements.iter().copied());
        u.dims.extend(self.dims.iter().copied());
    }

    /// An instantiation's unknowns without these (which need not be
    /// solved).
    pub(super) fn removed_from(&self, u: &Unknowns) -> Unknowns {
        let mut own = u.clone();
        for e in &self.elements {
            own.types.remove(e);
        }
        for d in &self.dims {
            own.dims.remove(d);
        }
        own
    }
}

impl Checker {
    /// The type of a parameter written with a rank: fresh dimension (or
    /// shape) variables, to be generalised, and an element unknown.
    pub(super) fn rank_param_type(
        &mut self,
        p: &ast::Param,
        rank: ast::Rank,
        binders: &mut Vec<Binder>,
        elements: &mut Vec<TVar>,
    ) -> Type {
        let name = p.name.name.trim_start_matches(['&', '$', '@']).to_string();
        // Names the program does not use already (a written `$x0`, or
        // the parameters `a` and `a1` of one function).
        let taken = |c: &Checker, n: &str| {
            c.types.get(n).is_some()
                || c.dims.get(n).is_some()
                || c.shapes.get(n).is_some()
                || binders.iter().any(|b| match b {
                    Binder::Type(v) => c.names.tvars.get(v.0 as usize).is_some_and(|t| t == n),
                    Binder::Index(IVar::Dim(v)) => c.names.dvars.get(v.0 as usize).is_some_and(|t| t == n),
                    Binder::Index(IVar::Shape(v)) => c.names.svars.get(v.0 as usize).is_some_and(|t| t == n),
                })
                || elements
                    .iter()
                    .any(|v| c.names.tvars.get(v.0 as usize).is_some_and(|t| t == n))
        };
        let mut name = name;
        while taken(self, &format!("&{name}"))
            || (0..8).any(|i| taken(self, &format!("${name}{i}")))
            || taken(self, &format!("@{name}"))
        {
            name.push('_');
        }
        let u = self.fresh_tvar(&format!("&{name}"));
        self.element_unknowns.insert(u, None);
        elements.push(u);
        let rank = match rank {
            ast::Rank::Nat(k) if k > MAX_RANK as u64 => {
                // Refused before its dimensions are made (one each); the
                // parameter is then checked as a scalar's, for what follows.
                let d = self
                    .error(p.span, format!("a parameter of rank {k}"))
                    .note(format!("arrays have at most {MAX_RANK} axes"));
                self.report(d);
                ast::Rank::Nat(0)
            }
            r => r,
        };
        let shape = match rank {
            ast::Rank::Nat(k) => Shape::from_dims((0..k).map(|i| {
                let d = self.fresh_dvar(&format!("${name}{i}"));
                binders.push(Binder::Index(IVar::Dim(d)));
                self.rank_dims.insert(d, None);
                Dim::var(d)
            })),
            ast::Rank::All => {
                let s = self.fresh_svar(&format!("@{name}"));
                binders.push(Binder::Index(IVar::Shape(s)));
                Shape::var(s)
            }
        };
        Type::array(Atom::Var(u), shape)
    }

    /// A solved rank dimension's value, itself resolved.
    fn rank_dim(&self, v: DVar) -> Option<Dim> {
        match self.rank_dims.get(&v) {
            Some(Some(d)) => Some(d.subst(&|w| self.rank_dim(w))),
            _ => None,
        }
    }

    /// A shape with every solved rank dimension replaced.
    pub(super) fn resolve_shape(&self, s: &Shape) -> Shape {
        s.subst(&|v| self.rank_dim(v), &|_| None)
    }

    /// The unsolved rank dimensions a type mentions (in its shape and its
    /// function types' shapes).
    fn rank_dims_in(&self, t: &Type, out: &mut Vec<DVar>) {
        if self.rank_dims.is_empty() {
            return;
        }
        let t = self.resolve(t);
        let mut visit = |s: &Shape| {
            for seg in s.segs() {
                if let remora_types::Seg::Dim(d) = seg {
                    for v in d.vars() {
                        if matches!(self.rank_dims.get(&v), Some(None)) && !out.contains(&v) {
                            out.push(v);
                        }
                    }
                }
            }
        };
        visit(&t.shape);
        let mut atoms = vec![t.atom.clone()];
        while let Some(a) = atoms.pop() {
            if let Atom::Arrow(p, r) = a {
                visit(&p.shape);
                visit(&r.shape);
                atoms.push(p.atom.clone());
                atoms.push(r.atom.clone());
            }
        }
    }

    /// A rank dimension given a value by an instantiation (nothing when
    /// the value is the dimension itself).
    pub(super) fn solve_rank_dim(&mut self, d: DVar, value: Dim) {
        let value = value.subst(&|v| self.rank_dim(v));
        let d = Dim::var(d).subst(&|v| self.rank_dim(v));
        if value == d {
            return;
        }
        let unknown = |x: &Dim| match x.vars().as_slice() {
            [v] if Dim::var(*v) == *x && matches!(self.rank_dims.get(v), Some(None)) => Some(*v),
            _ => None,
        };
        // Two unknowns: the newer (an inner function's) becomes the older.
        let (d, value) = match (unknown(&d), unknown(&value)) {
            (Some(a), Some(b)) if a.0 < b.0 => (value, d),
            _ => (d, value),
        };
        if let Some(v) = unknown(&d)
            && !value.vars().contains(&v)
        {
            self.rank_dims.insert(v, Some(value));
        }
    }

    /// Makes shapes agree by solving rank dimensions, dimension by
    /// dimension from the front (frames) or from the back (`cells`: the
    /// parameter's cell against the end of the argument's shape); whether
    /// anything was solved.
    pub(super) fn unify_rank_dims(&mut self, a: &Shape, b: &Shape, cells: bool) -> bool {
        let (a, b) = (self.resolve_shape(a), self.resolve_shape(b));
        let (Some(a), Some(b)) = (a.dims(), b.dims()) else {
            return false;
        };
        let pairs: Vec<(Dim, Dim)> = if cells {
            a.iter()
                .rev()
                .zip(b.iter().rev())
                .map(|(x, y)| ((*x).clone(), (*y).clone()))
                .collect()
        } else {
            a.iter()
                .zip(&b)
                .map(|(x, y)| ((*x).clone(), (*y).clone()))
                .collect()
        };
        let mut solved = false;
        for (x, y) in pairs {
            let (x, y) = (x.subst(&|v| self.rank_dim(v)), y.subst(&|v| self.rank_dim(v)));
            if x.equals(&y) == remora_types::Truth::Yes {
                continue;
            }
            let unknown = |d: &Dim| match d.vars().as_slice() {
                [v] if Dim::var(*v) == *d && matches!(self.rank_dims.get(v), Some(None)) => Some(*v),
                _ => None,
            };
            // Two unknowns: the newer (an inner function's) becomes the
            // older, which its scope holds.
            let (x, y) = match (unknown(&x), unknown(&y)) {
                (Some(a), Some(b)) if a.0 < b.0 => (y, x),
                _ => (x, y),
            };
            if let Some(v) = unknown(&x).filter(|v| !y.vars().contains(v)) {
                self.rank_dims.insert(v, Some(y));
                solved = true;
            } else if let Some(v) = unknown(&y).filter(|v| !x.vars().contains(v)) {
                self.rank_dims.insert(v, Some(x));
                solved = true;
            }
        }
        solved
    }

    /// An atom type with every solved element unknown replaced.
    pub(super) fn resolve_atom(&self, a: &Atom) -> Atom {
        match a {
            Atom::Var(v) => match self.element_unknowns.get(v) {
                Some(Some(solved)) => self.resolve_atom(solved),
                _ => a.clone(),
            },
            _ => a.map_types(&|t| self.resolve(t).into_owned()),
        }
    }

    /// `t` with every solved element unknown replaced; borrowed as it is
    /// when no function with rank parameters is being checked (the common
    /// case: nothing to replace, nothing copied).
    pub(super) fn resolve<'t>(&self, t: &'t Type) -> Cow<'t, Type> {
        if self.element_unknowns.is_empty() && self.rank_dims.is_empty() {
            return Cow::Borrowed(t);
        }
        Cow::Owned(Type {
            atom: self.resolve_atom(&t.atom),
            shape: self.resolve_shape(&t.shape),
        })
    }

    /// Makes two atom types equal by solving element unknowns; whether
    /// anything was solved.
    pub(super) fn unify_elements(&mut self, a: &Atom, b: &Atom) -> bool {
        let (a, b) = (self.resolve_atom(a), self.resolve_atom(b));
        match (&a, &b) {
            (Atom::Var(v), _) if matches!(self.element_unknowns.get(v), Some(None)) && a != b => {
                self.element_unknowns.insert(*v, Some(b.clone()));
                true
            }
            (_, Atom::Var(v)) if matches!(self.element_unknowns.get(v), Some(None)) && a != b => {
                self.element_unknowns.insert(*v, Some(a.clone()));
                true
            }
            (Atom::Arrow(p1, r1), Atom::Arrow(p2, r2)) => {
                let x = self.unify_elements(&p1.atom, &p2.atom);
                let y = self.unify_elements(&r1.atom, &r2.atom);
                x || y
            }
            _ => false,
        }
    }

    /// The unsolved element unknowns of an atom type.
    fn element_unknowns_in(&self, a: &Atom, out: &mut Vec<TVar>) {
        visit_vars(&self.resolve_atom(a), &mut |v| {
            if matches!(self.element_unknowns.get(&v), Some(None)) && !out.contains(&v) {
                out.push(v);
            }
        });
    }

    /// The unsolved unknowns of rank parameters these types mention.
    pub(super) fn rank_unknowns_in<'t>(&self, types: impl IntoIterator<Item = &'t Type>) -> RankUnknowns {
        let mut rank = RankUnknowns::default();
        for t in types {
            self.element_unknowns_in(&t.atom, &mut rank.elements);
            self.rank_dims_in(t, &mut rank.dims);
        }
        rank
    }

    /// What an instantiation solved of rank parameters' unknowns, kept.
    pub(super) fn settle_rank_unknowns(&mut self, rank: &RankUnknowns, sol: &Solution) {
        for u in &rank.elements {
            if let Some(a) = sol.types.get(u) {
                let a = sol.atom(a);
                self.unify_elements(&Atom::Var(*u), &a);
            }
        }
        for d in &rank.dims {
            let value = sol.dim(&Dim::var(*d));
            self.solve_rank_dim(*d, value);
        }
    }

    /// A function with rank parameters, finished: solved element unknowns
    /// substituted through it, unsolved ones of its own generalised (`∀`,
    /// outermost), then its index binders.
    pub(super) fn finish_ranked(
        &mut self,
        value: TExpr,
        elements: &[TVar],
        binders: Vec<Binder>,
        span: Span,
    ) -> Option<TExpr> {
        let value = self.resolve_texpr(value);
        // A dimension the body equated with another is not a parameter.
        let (binders, solved): (Vec<Binder>, Vec<Binder>) = binders
            .into_iter()
            .partition(|b| !matches!(b, Binder::Index(IVar::Dim(d)) if self.rank_dim(*d).is_some()));
        // Substituted through the function, they are done with; those left
        // are parameters now, no longer to be solved.
        for b in binders.iter().chain(&solved) {
            if let Binder::Index(IVar::Dim(d)) = b {
                self.rank_dims.remove(d);
            }
        }
        let mut all = Vec::new();
        for u in elements {
            if matches!(self.element_unknowns.get(u), Some(None)) {
                // Nothing said what it is: a type parameter.
                self.element_unknowns.remove(u);
                all.push(Binder::Type(*u));
            }
        }
        all.extend(binders);
        wrap_binders(all, value, span)
    }

    /// `e` with every solved element unknown replaced, in every type.
    pub(super) fn resolve_texpr(&self, e: TExpr) -> TExpr {
        let ty = self.resolve(&e.ty).into_owned();
        let kind = match e.kind {
            TExprKind::Array { shape, atoms } => TExprKind::Array {
                shape,
                atoms: atoms
                    .into_iter()
                    .map(|a| TAtom {
                        kind: match a.kind {
                            TAtomKind::Lambda { param, body } => TAtomKind::Lambda {
                                param,
                                body: Box::new(self.resolve_texpr(*body)),
                            },
                            TAtomKind::TLambda { param, body } => TAtomKind::TLambda {
                                param,
                                body: Box::new(self.resolve_texpr(*body)),
                            },
                            TAtomKind::ILambda { param, body } => TAtomKind::ILambda {
                                param,
                                body: Box::new(self.resolve_texpr(*body)),
                            },
                            TAtomKind::Box { witness, body } => TAtomKind::Box {
                                witness,
                                body: Box::new(self.resolve_texpr(*body)),
                            },
                            k => k,
                        },
                        span: a.span,
                    })
                    .collect(),
            },
            TExprKind::Frame { shape, elems } => TExprKind::Frame {
                shape,
                elems: elems.into_iter().map(|x| self.resolve_texpr(x)).collect(),
            },
            TExprKind::App { func, arg, lifted } => {
                let mut lifted = lifted;
                lifted.result = self.resolve(&lifted.result).into_owned();
                lifted.fun_frame = self.resolve_shape(&lifted.fun_frame);
                lifted.arg_frame = self.resolve_shape(&lifted.arg_frame);
                lifted.arg_cell = self.resolve_shape(&lifted.arg_cell);
                lifted.principal = self.resolve_shape(&lifted.principal);
                TExprKind::App {
                    func: Box::new(self.resolve_texpr(*func)),
                    arg: Box::new(self.resolve_texpr(*arg)),
                    lifted,
                }
            }
            TExprKind::TApp { func, arg } => TExprKind::TApp {
                func: Box::new(self.resolve_texpr(*func)),
                arg: self.resolve_atom(&arg),
            },
            TExprKind::IApp { func, arg } => TExprKind::IApp {
                func: Box::new(self.resolve_texpr(*func)),
                arg: match arg {
                    Index::Dim(d) => Index::Dim(d.subst(&|v| self.rank_dim(v))),
                    Index::Shape(s) => Index::Shape(self.resolve_shape(&s)),
                },
            },
            TExprKind::Unbox {
                witness,
                binder,
                var,
                boxed,
                body,
            } => TExprKind::Unbox {
                witness,
                binder,
                var,
                boxed: Box::new(self.resolve_texpr(*boxed)),
                body: Box::new(self.resolve_texpr(*body)),
            },
            TExprKind::Let { var, value, body } => TExprKind::Let {
                var,
                value: Box::new(self.resolve_texpr(*value)),
                body: Box::new(self.resolve_texpr(*body)),
            },
            TExprKind::Record(fields) => TExprKind::Record(
                fields
                    .into_iter()
                    .map(|(n, x)| (n, self.resolve_texpr(x)))
                    .collect(),
            ),
            TExprKind::Field { record, field } => TExprKind::Field {
                record: Box::new(self.resolve_texpr(*record)),
                field,
            },
            TExprKind::If {
                cond,
                then,
                otherwise,
            } => TExprKind::If {
                cond: Box::new(self.resolve_texpr(*cond)),
                then: Box::new(self.resolve_texpr(*then)),
                otherwise: Box::new(self.resolve_texpr(*otherwise)),
            },
            k @ (TExprKind::Var(_) | TExprKind::Intrinsic(_)) => k,
        };
        TExpr {
            kind,
            ty,
            span: e.span,
        }
    }
}

/// Calls `f` on every type variable of an atom type.
fn visit_vars(a: &Atom, f: &mut dyn FnMut(TVar)) {
    match a {
        Atom::Var(v) => f(*v),
        Atom::Int | Atom::Bool | Atom::Float => {}
        Atom::Arrow(p, r) => {
            visit_vars(&p.atom, f);
            visit_vars(&r.atom, f);
        }
        Atom::Forall(_, b) | Atom::Pi(_, b) | Atom::Sigma(_, b) => visit_vars(&b.atom, f),
        Atom::Record(fs) => fs.iter().for_each(|(_, t)| visit_vars(&t.atom, f)),
    }
}

//! Inferred instantiation at application (extensions.md §1.1–§1.3): where
//! core would reject an application because its function is still a
//! `∀`/`Π` (or an explicit instantiation has holes `_`), the missing type
//! and index arguments become unknowns, solved from the arguments by
//! `crate::infer`, and the application is elaborated to the explicit core
//! form `((t-app/i-app … f …) a1 … ak)`. Explicit arguments are never
//! re-decided. Programs core accepts never come here.

use super::elements::RankUnknowns;
use super::{Checker, Value};
use crate::infer::{Candidate, Solution, Unknowns};
use crate::typed::{TAtom, TAtomKind, TExpr, TExprKind, VarId};
use remora_syntax::ast::{self, ExprKind, TypeKind};
use remora_syntax::{Span, print};
use remora_types::{Atom, Dim, IVar, Index, Shape, Type, apply};

/// One instantiation argument of the head: written, or to be inferred.
enum Given {
    Type(Option<Atom>),
    Index(Option<Index>),
}

/// How one binder of the head's type is instantiated.
#[derive(Clone, Debug, PartialEq)]
enum Inst {
    Type(Atom),
    Index(IVar, Index),
}

impl Checker {
    /// `Some(result)` when the application spine `e` needs inference (its
    /// head is a polymorphic variable not fully instantiated); `None` for
    /// the core rule.
    pub(super) fn infer_application(&mut self, e: &ast::Expr) -> Option<Option<TExpr>> {
        // The spine: arguments in order, each with its application's span.
        let mut spine = Vec::new();
        let mut head = e;
        while let ExprKind::App { func, arg } = &head.kind {
            spine.push((&**arg, head.span));
            head = func;
        }
        spine.reverse();
        // Explicit instantiations written on the head, in order.
        let mut written = Vec::new();
        let mut base = head;
        loop {
            match &base.kind {
                ExprKind::TApp { func, arg } => {
                    written.push(Written::Type(arg));
                    base = func;
                }
                ExprKind::IApp { func, arg } => {
                    written.push(Written::Index(arg));
                    base = func;
                }
                _ => break,
            }
        }
        written.reverse();
        if let ExprKind::Rerank { ranks, func } = &base.kind {
            // A reranked function is polymorphic in its cells: always inferred.
            let Some(f) = self.rerank_expr(base.span, ranks, func) else {
                // Its arguments are still checked, for their own errors.
                for (a, _) in &spine {
                    self.expr(a);
                }
                return Some(None);
            };
            return Some(self.instantiate_spine(e, base, f.kind, f.ty, &written, &spine));
        }
        if self.inference && super::ranked_fn(base).is_some() {
            // A `fn` with rank parameters is polymorphic: always inferred.
            let Some(f) = self.expr(base) else {
                for (a, _) in &spine {
                    self.expr(a);
                }
                return Some(None);
            };
            return Some(self.instantiate_spine(e, base, f.kind, f.ty, &written, &spine));
        }
        if written.is_empty()
            && let ExprKind::Frame { shape, elems } = &base.kind
            && !elems.is_empty()
            && elems.iter().all(|f| self.polymorphic_name(f).is_some())
            && elems.iter().any(|f| {
                self.polymorphic_name(f)
                    .is_some_and(|(_, t)| count_binders(&t).0 > 0)
            })
        {
            return Some(self.function_frame_spine(e, base.span, shape, elems, &spine));
        }
        if let ExprKind::Var(name) = &base.kind
            && let Some(Value::Intrinsic("reshape", ty)) = self.values.get(&name.name)
            && written.iter().any(Written::has_dim_hole)
        {
            let ty = ty.clone();
            return Some(self.infer_reshape(e, base, &ty, &written, &spine));
        }
        if let ExprKind::Var(name) = &base.kind
            && let Some(Value::Intrinsic("transpose", ty)) = self.values.get(&name.name)
        {
            let ty = ty.clone();
            return self.infer_transpose(e, base, &ty, &written, &spine);
        }
        // (Not a Π-family of arrays, `iota/static`: a function.)
        let (base_kind, base_ty) = self.polymorphic_name(base)?;
        let (binders, _) = count_binders(&base_ty);
        if binders == 0 {
            return None;
        }
        let holes = written.iter().any(Written::is_hole);
        if !holes && written.len() >= binders {
            return None;
        }
        Some(self.instantiate_spine(e, base, base_kind, base_ty, &written, &spine))
    }

    /// A name bound to a function, polymorphic or not: its typed form and
    /// type.
    fn polymorphic_name(&self, f: &ast::Expr) -> Option<(TExprKind, Type)> {
        let ExprKind::Var(name) = &f.kind else {
            return None;
        };
        let (kind, ty) = match self.values.get(&name.name)? {
            Value::Var(id, ty) => (TExprKind::Var(*id), ty.clone()),
            Value::Intrinsic(n, ty) => (TExprKind::Intrinsic(n), ty.clone()),
            Value::Poisoned => return None,
        };
        (ty.shape.is_scalar() && matches!(count_binders(&ty).1.atom, Atom::Arrow(..))).then_some((kind, ty))
    }

    /// `([sum length] [8 9 6])`: a frame of polymorphic functions applied
    /// as one array of functions, each instantiated at one common type.
    /// The first is instantiated from the arguments as if applied alone;
    /// the others against its instantiated type; the applications are
    /// then those of the frame of them.
    fn function_frame_spine(
        &mut self,
        e: &ast::Expr,
        frame_span: Span,
        shape: &[u64],
        elems: &[ast::Expr],
        spine: &[(&ast::Expr, Span)],
    ) -> Option<TExpr> {
        let (first, rest) = elems.split_first()?;
        let (kind, ty) = self.polymorphic_name(first)?;
        let alone = self.instantiate_spine(e, first, kind, ty, &[], spine)?;
        // The first function instantiated, and its arguments as typed.
        let (head, args) = alone.spine();
        let head = head.clone();
        let args: Vec<TExpr> = args.into_iter().map(|(a, _)| a.clone()).collect();
        let mut funs = vec![head];
        for f in rest {
            let g = self.instantiate_against(f, &funs[0].ty)?;
            if !self.resolve(&g.ty).equals(&self.resolve(&funs[0].ty)).is_yes() {
                let d = self
                    .error(f.span, "the functions of this frame have no one type")
                    .note(format!(
                        "`{}` is instantiated as {}, `{}` has type {}",
                        print::expr_to_string(first),
                        self.show(&funs[0].ty),
                        print::expr_to_string(f),
                        self.show(&g.ty)
                    ));
                self.report(d);
                return None;
            }
            funs.push(g);
        }
        let frame_ty = funs[0]
            .ty
            .lift(&Shape::from_dims(shape.iter().map(|d| Dim::nat(*d))));
        let mut f = TExpr {
            kind: TExprKind::Frame {
                shape: shape.to_vec(),
                elems: funs,
            },
            ty: frame_ty,
            span: frame_span,
        };
        for (a, (_, app_span)) in args.into_iter().zip(spine) {
            f = self.apply_core(e, f, a, *app_span)?;
        }
        Some(f)
    }

    /// `(f a)` by the core application rule (its lifting decided by the
    /// types), or the error `e`, the whole application, gets.
    fn apply_core(&mut self, e: &ast::Expr, f: TExpr, a: TExpr, span: Span) -> Option<TExpr> {
        let lifted = match apply(&self.resolve(&f.ty), &self.resolve(&a.ty)) {
            Ok(l) => l,
            Err(err) => {
                let d = self.application_error(e, &f.ty, err);
                self.report(d);
                return None;
            }
        };
        let ty = lifted.result.clone();
        Some(TExpr {
            kind: TExprKind::App {
                func: Box::new(f),
                arg: Box::new(a),
                lifted,
            },
            ty,
            span,
        })
    }

    /// A spine whose head is `transpose`: its permutation typed by a rule
    /// of its own, the rest inferred as for any polymorphic function. (Out
    /// of line, taking references: `infer_application` recurses as deep as
    /// a program nests, and its frame must stay small.)
    #[inline(never)]
    fn infer_transpose(
        &mut self,
        e: &ast::Expr,
        base: &ast::Expr,
        base_ty: &Type,
        written: &[Written<'_>],
        spine: &[(&ast::Expr, Span)],
    ) -> Option<Option<TExpr>> {
        let mut kind = TExprKind::Intrinsic("transpose");
        let mut ty = base_ty.clone();
        if !self.transpose_head(e, base, (&mut kind, &mut ty), written, spine) {
            return Some(None);
        }
        let written = written.get(1..).unwrap_or_default();
        let (binders, _) = count_binders(&ty);
        if !written.iter().any(Written::is_hole) && written.len() >= binders {
            // Every instantiation written: the core rule's.
            return None;
        }
        Some(self.instantiate_spine(e, base, kind, ty, written, spine))
    }

    /// The head `(i-app transpose P)` typed by its rule (in a function of
    /// its own: `infer_application` recurses as deep as a program nests,
    /// and its frame must stay small), written over the head; false once an
    /// error is reported.
    #[inline(never)]
    fn transpose_head(
        &mut self,
        e: &ast::Expr,
        base: &ast::Expr,
        (head_kind, head_ty): (&mut TExprKind, &mut Type),
        written: &[Written<'_>],
        spine: &[(&ast::Expr, Span)],
    ) -> bool {
        let perm = match written.first() {
            Some(Written::Index(i)) if !matches!(i, ast::Ispace::Hole(_)) => *i,
            _ => {
                self.bare_transpose(head_kind, e.span);
                for (a, _) in spine {
                    self.expr(a);
                }
                return false;
            }
        };
        let Some(index) = self.index(perm) else {
            return false;
        };
        let Some(ty) = self.transpose_type(perm.span(), &index) else {
            return false;
        };
        let intrinsic = std::mem::replace(head_kind, TExprKind::Intrinsic("transpose"));
        *head_kind = TExprKind::IApp {
            func: Box::new(TExpr {
                kind: intrinsic,
                ty: std::mem::replace(head_ty, ty),
                span: base.span,
            }),
            arg: index,
        };
        true
    }

    /// `(@reshape T (S1 S2) x)` whose target `S2` leaves one dimension to
    /// be inferred, `[_ 3]`: it is the number of `x`'s atoms over the
    /// product of the others (NumPy's `reshape(-1, 3)`). Out of line, as
    /// `infer_transpose` is.
    #[inline(never)]
    fn infer_reshape(
        &mut self,
        e: &ast::Expr,
        base: &ast::Expr,
        base_ty: &Type,
        written: &[Written<'_>],
        spine: &[(&ast::Expr, Span)],
    ) -> Option<TExpr> {
        let [(arg, app_span)] = spine else {
            let d = self
                .error(e.span, "reshape with an inferred dimension takes one argument")
                .note("as in (@reshape _ (_ [_ 3]) xs)");
            self.report(d);
            return None;
        };
        let mut atom = None;
        let mut indices = Vec::new();
        for w in written {
            match w {
                Written::Type(t) if !matches!(t.kind, TypeKind::Hole) => atom = Some(self.ty(t)?.atom),
                Written::Type(_) => {}
                Written::Index(i) => indices.push(*i),
            }
        }
        let a = self.expr(arg)?;
        let a_ty = self.resolve(&a.ty).into_owned();
        let source = match indices.first() {
            Some(ast::Ispace::Hole(_)) | None => a_ty.shape.clone(),
            Some(i) => match self.index(i)? {
                Index::Shape(s) => s,
                Index::Dim(d) => Shape::from_dims([d]),
            },
        };
        let Some(target) = indices.get(1) else {
            let d = self
                .error(
                    e.span,
                    "`_` as a dimension is inferred only in reshape's target shape",
                )
                .note("the target is the second index: (@reshape _ (_ [_ 3]) xs)");
            self.report(d);
            return None;
        };
        let hole = self.fresh_dvar("_");
        self.reshape_hole = Some((hole, 0));
        let target = self.index(target);
        let uses = self.reshape_hole.take().map_or(0, |(_, n)| n);
        let target = match target? {
            Index::Shape(s) => s,
            Index::Dim(d) => Shape::from_dims([d]),
        };
        let span = base.span;
        let fail = |c: &mut Self, message: String| {
            let d = c
                .error(span, message)
                .note("as in (@reshape _ (_ [_ 3]) xs): one `_`, the other dimensions numbers");
            c.report(d);
            None
        };
        if uses != 1 {
            return fail(
                self,
                "reshape's target may leave only one dimension to be inferred".into(),
            );
        }
        let (Some(target_dims), Some(source_dims)) = (target.dims(), source.dims()) else {
            return fail(
                self,
                "reshape's target has a shape variable beside its `_`".into(),
            );
        };
        let hole_dim = Dim::var(hole);
        let mut known = 1i64;
        for d in &target_dims {
            if **d == hole_dim {
                continue;
            }
            match d.as_const() {
                Some(n) => known = known.saturating_mul(n),
                None => {
                    return fail(
                        self,
                        "the dimensions of reshape's target beside its `_` must be numbers".into(),
                    );
                }
            }
        }
        let total = Dim::product(source_dims.iter().copied());
        let value = match (total.as_const(), known) {
            (_, 0) => {
                return fail(
                    self,
                    "reshape's `_` cannot be inferred beside a dimension 0".into(),
                );
            }
            (Some(n), k) if n % k == 0 => Dim::int(n / k),
            (Some(n), k) => {
                return fail(
                    self,
                    format!("reshape cannot lay out {n} atoms in rows of {k}: {n} is not a multiple of {k}"),
                );
            }
            (None, 1) => total,
            (None, _) => {
                return fail(
                    self,
                    format!(
                        "reshape's `_` needs a known number of atoms, and the argument has {}",
                        self.show_shape(&source)
                    ),
                );
            }
        };
        let target = target.subst(&|v| (v == hole).then(|| value.clone()), &|_| None);
        let f = TExpr {
            kind: TExprKind::Intrinsic("reshape"),
            ty: base_ty.clone(),
            span,
        };
        let f = t_app(f, atom.unwrap_or(a_ty.atom), span)?;
        let f = i_app(f, Index::Shape(source), span)?;
        let f = i_app(f, Index::Shape(target), span)?;
        self.apply_core(e, f, a, *app_span)
    }

    fn instantiate_spine(
        &mut self,
        e: &ast::Expr,
        base: &ast::Expr,
        base_kind: TExprKind,
        base_ty: Type,
        written: &[Written<'_>],
        spine: &[(&ast::Expr, Span)],
    ) -> Option<TExpr> {
        let span = e.span;
        // The written arguments, checked (a hole is an unknown).
        let mut given = Vec::with_capacity(written.len());
        let mut ok = true;
        for w in written {
            match w {
                Written::Type(t) if matches!(t.kind, TypeKind::Hole) => given.push(Given::Type(None)),
                Written::Type(t) => match self.ty(t) {
                    Some(ty) if ty.shape.is_scalar() => given.push(Given::Type(Some(ty.atom))),
                    Some(ty) => {
                        let d = self.error(t.span, "Ill-kinded application:").note(format!(
                            "{} is an array type; a type argument is an atom type",
                            self.show(&ty)
                        ));
                        self.report(d);
                        ok = false;
                    }
                    None => ok = false,
                },
                Written::Index(ast::Ispace::Hole(_)) => given.push(Given::Index(None)),
                Written::Index(i) => match self.index(i) {
                    Some(i) => given.push(Given::Index(Some(i))),
                    None => ok = false,
                },
            }
        }
        // Arguments typed first; a lambda without parameter types waits for
        // the types its parameter gets.
        let mut args: Vec<Option<TExpr>> = Vec::with_capacity(spine.len());
        for (a, _) in spine {
            if untyped_lambda(a) {
                args.push(None);
                continue;
            }
            match self.expr(a) {
                Some(t) => args.push(Some(t)),
                None => ok = false,
            }
        }
        if !ok {
            return None;
        }
        // Every binder instantiated: written, or an unknown.
        let mut unknowns = Unknowns::default();
        let mut insts = Vec::new();
        let mut given = given.into_iter().peekable();
        let mut written_index = false;
        let mut ty = base_ty.clone();
        loop {
            match ty.atom.clone() {
                Atom::Forall(v, body) => {
                    let atom = match given.peek() {
                        Some(Given::Type(_)) => match given.next() {
                            Some(Given::Type(Some(a))) => a,
                            _ => Atom::Var(self.unknown_type(&mut unknowns, v)),
                        },
                        _ => Atom::Var(self.unknown_type(&mut unknowns, v)),
                    };
                    ty = body.subst_type(v, &atom);
                    insts.push(Inst::Type(atom));
                }
                Atom::Pi(v, body) => {
                    let index = match given.peek() {
                        Some(Given::Index(_)) => match given.next().inspect(|_| written_index = true) {
                            Some(Given::Index(Some(i))) => match super::coerce_index(v, i) {
                                Some(i) => i,
                                None => {
                                    let d = self.error(span, "Ill-sorted application:").note(format!(
                                        "{} expects another sort of index",
                                        print::expr_to_string(base)
                                    ));
                                    self.report(d);
                                    return None;
                                }
                            },
                            _ => self.unknown_index(&mut unknowns, v),
                        },
                        Some(Given::Type(_)) => {
                            let message = if written_index {
                                "a type argument after index arguments"
                            } else {
                                "too many type arguments"
                            };
                            let d = self.error(span, message).note(format!(
                                "{} has type {}: its type arguments come first, then its index arguments",
                                print::expr_to_string(base),
                                self.show(&base_ty)
                            ));
                            self.report(d);
                            return None;
                        }
                        None => self.unknown_index(&mut unknowns, v),
                    };
                    ty = body.subst_index(v, &index);
                    insts.push(Inst::Index(v, index));
                }
                _ => break,
            }
        }
        if given.next().is_some() {
            let d = self.error(span, "too many instantiation arguments").note(format!(
                "{} has type {}",
                print::expr_to_string(base),
                self.show(&base_ty)
            ));
            self.report(d);
            return None;
        }
        let arg_types: Vec<Option<Type>> = args
            .iter()
            .map(|a| a.as_ref().map(|a| self.resolve(&a.ty).into_owned()))
            .collect();
        // The unknowns of rank parameters among the arguments' types
        // (their element types, and dimensions equating which may be how
        // the arguments agree: `(dot u v)` for `(u 1) (v 1)`): this
        // application may solve them.
        let rank_unknowns = self.rank_unknowns_in(arg_types.iter().flatten());
        rank_unknowns.add_to(&mut unknowns);
        // A function argument where a function is expected may be reranked
        // (§1.7): its cells extended by a frame, an unknown to solve.
        let mut extensions = Vec::with_capacity(arg_types.len());
        let mut params = &ty;
        for a in &arg_types {
            let mut ext = None;
            if let Atom::Arrow(p, r) = &params.atom {
                if let Some(a) = a
                    && matches!(p.atom, Atom::Arrow(..))
                    && matches!(a.atom, Atom::Arrow(..))
                    && a.shape.is_scalar()
                {
                    let e = self.fresh_svar("frame");
                    unknowns.shapes.insert(e);
                    ext = Some(e);
                }
                params = r;
            }
            extensions.push(ext);
        }
        let mut arg_types = arg_types;
        let mut candidates = unknowns.spine(&ty, &arg_types, &extensions, Solution::default());
        // Automatic unboxing (§1.6): when nothing fits, the boxed arguments
        // are unboxed, the application done on their payloads.
        let mut unboxed: Vec<Option<Unboxed>> = vec![None; args.len()];
        if candidates.is_empty()
            && arg_types
                .iter()
                .flatten()
                .any(|t| matches!(t.atom, Atom::Sigma(..)))
        {
            for (k, a) in args.iter_mut().enumerate() {
                let Some(boxed) = a.take_if(|a| matches!(a.ty.atom, Atom::Sigma(..))) else {
                    continue;
                };
                let Some((witness, x, x_ty)) = self.open_box(&boxed.ty) else {
                    continue;
                };
                arg_types[k] = Some(x_ty.clone());
                *a = Some(TExpr {
                    kind: TExprKind::Var(x),
                    ty: x_ty,
                    span: boxed.span,
                });
                unboxed[k] = Some(Unboxed {
                    witness,
                    var: x,
                    boxed,
                });
            }
            candidates = unknowns.spine(&ty, &arg_types, &extensions, Solution::default());
        }
        // A polymorphic function passed where a function is expected
        // (`(iterate 3 reverse xs)`): when nothing fits with its type as
        // it is, it is instantiated afterwards, against the parameter's
        // solved type, as an untyped lambda is typed.
        if candidates.is_empty() {
            let mut deferred = false;
            for (k, a) in args.iter_mut().enumerate() {
                if a.as_ref().is_some_and(|a| polymorphic_function(&a.ty)) {
                    *a = None;
                    arg_types[k] = None;
                    deferred = true;
                }
            }
            if deferred {
                candidates = unknowns.spine(&ty, &arg_types, &extensions, Solution::default());
            }
        }
        // A rerank frame nothing constrains is no rerank.
        for c in &mut candidates {
            for e in extensions.iter().flatten() {
                c.solution.shapes.entry(*e).or_insert_with(Shape::scalar);
            }
        }
        let ranked = rank(&insts, candidates);
        let head = Head {
            rank: rank_unknowns,
            e,
            base,
            base_kind,
            base_ty,
            insts,
            ty,
            extensions,
            unknowns,
        };
        if !arg_types.iter().any(Option::is_none) {
            let chosen = self.choose(&head, &arg_types, &unboxed, ranked)?;
            let app = self.elaborate_spine(&head, &chosen, args, spine)?;
            return self.wrap_unboxes(app, unboxed);
        }
        // Lambdas typed from the choice: the first instantiation, best first,
        // under which they check (their bodies can rule one out).
        if ranked.is_empty() {
            return self.choose(&head, &arg_types, &unboxed, ranked).and(None);
        }
        let mut first_errors = None;
        for (c, _) in &ranked {
            let before = self.diags.len();
            if let Some(t) = self.elaborate_spine(&head, c, args.clone(), spine) {
                return self.wrap_unboxes(t, unboxed);
            }
            let errors: Vec<_> = self.diags.drain(before..).collect();
            first_errors.get_or_insert(errors);
        }
        self.diags.extend(first_errors.unwrap_or_default());
        None
    }

    /// The boxed arguments unboxed for this application wait to be wrapped
    /// around the smallest enclosing expression whose type does not mention
    /// their witnesses (§1.6; see `Checker::expr`).
    fn wrap_unboxes(&mut self, app: TExpr, unboxed: Vec<Option<Unboxed>>) -> Option<TExpr> {
        self.pending.extend(unboxed.into_iter().flatten());
        Some(app)
    }

    /// For a box type `Σ (v) T`: a fresh witness variable, a fresh variable
    /// for the payload and the payload's type `T[v := witness]`.
    pub(super) fn open_box(&mut self, boxed: &Type) -> Option<(IVar, VarId, Type)> {
        let Atom::Sigma(v, payload) = &boxed.atom else {
            return None;
        };
        // Witnesses are numbered in the order they are made, so their names
        // are distinct (elaboration prints them) and stable.
        self.witnesses += 1;
        let (witness, index) = self.fresh_index_like(*v, &format!("_{}", self.witnesses));
        let n = self.names.vars.len();
        let x = self.fresh_var(&format!("x_{n}"));
        Some((witness, x, payload.subst_index(*v, &index)))
    }

    /// The spine elaborated under one instantiation: the head with its
    /// `t-app`s and `i-app`s, then the applications by the core rule.
    fn elaborate_spine(
        &mut self,
        head: &Head<'_>,
        chosen: &Candidate,
        args: Vec<Option<TExpr>>,
        spine: &[(&ast::Expr, Span)],
    ) -> Option<TExpr> {
        let span = head.e.span;
        // Rank parameters' unknowns may stay unsolved: their function
        // settles them.
        let own = head.rank.removed_from(&head.unknowns);
        if let Some(i) = head.insts.iter().find(|i| unsolved(i, &chosen.solution, &own)) {
            let fname = print::expr_to_string(head.base);
            let what = match i {
                Inst::Type(_) => "a type argument",
                Inst::Index(..) => "an index argument",
            };
            let d = self
                .error(
                    span,
                    format!("cannot infer {what} of `{fname}` from its arguments"),
                )
                .note(format!("`{fname}` has type {}", self.show(&head.base_ty)))
                .note(format!(
                    "write the instantiation: (@{fname} (type …) (index …) argument …)"
                ));
            self.report(d);
            return None;
        }
        // What this instantiation says of rank parameters' types.
        self.settle_rank_unknowns(&head.rank, &chosen.solution);
        let base = TExpr {
            kind: head.base_kind.clone(),
            ty: head.base_ty.clone(),
            span: head.base.span,
        };
        let mut f = apply_insts(base, &head.insts, &chosen.solution, span)?;
        for (((a, (a_ast, app_span)), ext), k) in args.into_iter().zip(spine).zip(&head.extensions).zip(0..) {
            let a = match a {
                Some(a) => a,
                None => {
                    let want = chosen.solution.ty(&nth_param(&head.ty, k)?);
                    let lambda = untyped_lambda(a_ast);
                    if own.mentions(&want) {
                        let d = if lambda {
                            self.error(a_ast.span, "cannot infer this lambda's parameter types")
                                .note("write them: (fn ((x T) …) e)")
                        } else {
                            self.error(a_ast.span, "cannot infer this function's instantiation")
                                .note(format!("the parameter has type {}", self.show(&want)))
                        };
                        self.report(d);
                        return None;
                    }
                    if lambda {
                        self.lambda_expected(a_ast, &want)?
                    } else {
                        self.instantiate_against(a_ast, &want)?
                    }
                }
            };
            // A reranked function argument: its η-expansion over the frame.
            let a = match ext.and_then(|e| chosen.solution.shapes.get(&e)) {
                Some(frame) if !frame.is_scalar() => {
                    let frame = chosen.solution.shape(frame);
                    self.rerank(a, &frame)?
                }
                _ => a,
            };
            f = self.apply_core(head.e, f, a, *app_span)?;
        }
        Some(f)
    }

    /// A polymorphic function argument instantiated so that its type is
    /// `want`, the parameter's (`reverse` passed to `iterate` over `[Int
    /// 3]` is `(@reverse (Int) (3 []))`).
    pub(super) fn instantiate_against(&mut self, e: &ast::Expr, want: &Type) -> Option<TExpr> {
        let f = self.expr(e)?;
        if self.bare_transpose(&f.kind, e.span) {
            return None;
        }
        if !polymorphic_function(&f.ty) || matches!(want.atom, Atom::Forall(..) | Atom::Pi(..)) {
            return Some(f);
        }
        let mut unknowns = Unknowns::default();
        let mut insts = Vec::new();
        let mut ty = f.ty.clone();
        loop {
            match ty.atom.clone() {
                Atom::Forall(v, body) => {
                    let u = Atom::Var(self.unknown_type(&mut unknowns, v));
                    ty = body.subst_type(v, &u);
                    insts.push(Inst::Type(u));
                }
                Atom::Pi(v, body) => {
                    let i = self.unknown_index(&mut unknowns, v);
                    ty = body.subst_index(v, &i);
                    insts.push(Inst::Index(v, i));
                }
                _ => break,
            }
        }
        // The wanted type may still hold a rank parameter's unknowns.
        let rank = self.rank_unknowns_in([want]);
        rank.add_to(&mut unknowns);
        let want = &self.resolve(want).into_owned();
        let shown = print::expr_to_string(e);
        // As it is, or else reranked (§1.7): its cells extended by a frame.
        let mut sols = unknowns.match_type(&ty, want, Solution::default());
        let mut frame = None;
        if sols.is_empty()
            && let Some(extended) = {
                let e = self.fresh_svar("frame");
                unknowns.shapes.insert(e);
                frame = Some(e);
                crate::infer::extend(&ty, e)
            }
        {
            sols = unknowns.match_type(&extended, want, Solution::default());
        }
        let own = rank.removed_from(&unknowns);
        let mut found: Vec<(Solution, String)> = Vec::new();
        for sol in sols.into_iter().filter_map(|s| unknowns.settle(s, true)) {
            if insts.iter().any(|i| unsolved(i, &sol, &own)) {
                continue;
            }
            let solved: Vec<Inst> = insts
                .iter()
                .map(|i| match i {
                    Inst::Type(a) => Inst::Type(sol.atom(a)),
                    Inst::Index(v, i) => Inst::Index(*v, solve_index(&sol, i)),
                })
                .collect();
            let mut written = self.show_insts(&shown, &solved);
            if let Some(f) = frame.and_then(|f| sol.shapes.get(&f)).filter(|f| !f.is_scalar()) {
                written = format!(
                    "{written}, reranked over the frame {}",
                    self.show_shape(&sol.shape(f))
                );
            }
            if !found.iter().any(|(_, w)| *w == written) {
                found.push((sol, written));
            }
        }
        let (sol, _) = match found.len() {
            1 => found.remove(0),
            0 => {
                let d = self
                    .error(
                        e.span,
                        format!("no instantiation of `{shown}` has the type the parameter needs"),
                    )
                    .note(format!("`{shown}` has type {}", self.show(&f.ty)))
                    .note(format!("the parameter has type {}", self.show(want)));
                self.report(d);
                return None;
            }
            _ => {
                let mut d = self
                    .error(e.span, format!("ambiguous instantiation of `{shown}`"))
                    .note(format!("the parameter has type {}", self.show(want)));
                for (_, w) in &found {
                    d = d.note(format!("could be {w}"));
                }
                self.report(d);
                return None;
            }
        };
        self.settle_rank_unknowns(&rank, &sol);
        let g = apply_insts(f, &insts, &sol, e.span)?;
        match frame.and_then(|f| sol.shapes.get(&f)) {
            Some(frame) if !frame.is_scalar() => {
                let frame = sol.shape(frame);
                self.rerank(g, &frame)
            }
            _ => Some(g),
        }
    }

    /// `(rerank (r …) f)` (extensions.md §2): the η-expansion `(fun ((x1 r1)
    /// …) (f x1 …))`, its rank parameters generalised.
    pub(super) fn rerank_expr(&mut self, span: Span, ranks: &[ast::Rank], func: &ast::Expr) -> Option<TExpr> {
        let names: Vec<String> = (0..ranks.len())
            .map(|k| format!("x_{}_{k}", self.names.vars.len()))
            .collect();
        let params: Vec<ast::Param> = names
            .iter()
            .zip(ranks)
            .map(|(n, r)| ast::Param {
                name: ast::Ident::new(n.clone(), span),
                ann: ast::ParamAnn::Rank(*r),
                span,
            })
            .collect();
        let body = names.iter().fold(func.clone(), |f, n| ast::Expr {
            kind: ExprKind::App {
                func: Box::new(f),
                arg: Box::new(ast::Expr {
                    kind: ExprKind::Var(ast::Ident::new(n.clone(), span)),
                    span,
                }),
            },
            span,
        });
        self.generalised(span, &params, None, &body)
    }

    /// `(fn ((x1 [A1 E c1]) …) (f x1 …))`: the function `f` lifted to cells
    /// extended by the frame `E` (extensions.md §1.7, tutorial §4.5).
    fn rerank(&mut self, f: TExpr, frame: &Shape) -> Option<TExpr> {
        let span = f.span;
        let mut params = Vec::new();
        let mut t = &f.ty;
        while let (Atom::Arrow(p, r), true) = (&t.atom, t.shape.is_scalar()) {
            params.push(p.lift(frame));
            t = r;
        }
        // Names of their own, so elaboration prints distinct parameters.
        let vars: Vec<VarId> = params
            .iter()
            .map(|_| {
                let n = self.names.vars.len();
                self.fresh_var(&format!("x_{n}"))
            })
            .collect();
        let mut body = f;
        for (v, p) in vars.iter().zip(&params) {
            let x = TExpr {
                kind: TExprKind::Var(*v),
                ty: p.clone(),
                span,
            };
            let lifted = apply(&body.ty, &x.ty).ok()?;
            let ty = lifted.result.clone();
            body = TExpr {
                kind: TExprKind::App {
                    func: Box::new(body),
                    arg: Box::new(x),
                    lifted,
                },
                ty,
                span,
            };
        }
        for (v, p) in vars.into_iter().zip(params).rev() {
            let ty = Type::arrow(p, body.ty.clone());
            body = TExpr {
                kind: TExprKind::Array {
                    shape: Vec::new(),
                    atoms: vec![TAtom {
                        kind: TAtomKind::Lambda {
                            param: v,
                            body: Box::new(body),
                        },
                        span,
                    }],
                },
                ty,
                span,
            };
        }
        Some(body)
    }

    /// A lambda whose parameters are written without types, checked against
    /// the function type it is expected to have: each parameter gets the
    /// expected parameter type (extensions.md §1.5).
    fn lambda_expected(&mut self, e: &ast::Expr, want: &Type) -> Option<TExpr> {
        let (param, body) = match &e.kind {
            ExprKind::Array { shape, atoms } if shape.is_empty() => match atoms.as_slice() {
                [
                    ast::Atom {
                        kind: ast::AtomKind::Lambda { param, body },
                        ..
                    },
                ] => (param, body),
                _ => return self.expr(e),
            },
            _ => return self.expr(e),
        };
        let (pty, rest) = match (&want.atom, want.shape.is_scalar(), &param.ann) {
            (Atom::Arrow(p, r), true, ast::ParamAnn::Infer) => ((**p).clone(), (**r).clone()),
            _ => return self.expr(e),
        };
        let m = self.mark();
        let var = self.fresh_var(&param.name.name);
        self.values.bind(&param.name.name, Value::Var(var, pty.clone()));
        let body = self.lambda_expected(body, &rest);
        self.reset(m);
        let body = body?;
        let ty = Type::arrow(pty, body.ty.clone());
        Some(TExpr {
            kind: TExprKind::Array {
                shape: Vec::new(),
                atoms: vec![TAtom {
                    kind: TAtomKind::Lambda {
                        param: var,
                        body: Box::new(body),
                    },
                    span: e.span,
                }],
            },
            ty,
            span: e.span,
        })
    }

    fn unknown_type(&mut self, u: &mut Unknowns, v: remora_types::TVar) -> remora_types::TVar {
        let name = self
            .names
            .tvars
            .get(v.0 as usize)
            .cloned()
            .unwrap_or_else(|| "t".into());
        let w = self.fresh_tvar(&name);
        u.types.insert(w);
        w
    }

    fn unknown_index(&mut self, u: &mut Unknowns, v: IVar) -> Index {
        let (w, index) = self.fresh_index_like(v, "");
        match w {
            IVar::Dim(d) => u.dims.insert(d),
            IVar::Shape(s) => u.shapes.insert(s),
        };
        index
    }

    /// A fresh index variable of `v`'s sort, named after it (plus
    /// `suffix`), and the index that is that variable.
    pub(super) fn fresh_index_like(&mut self, v: IVar, suffix: &str) -> (IVar, Index) {
        match v {
            IVar::Dim(d) => {
                let name = self
                    .names
                    .dvars
                    .get(d.0 as usize)
                    .cloned()
                    .unwrap_or_else(|| "$d".into());
                let w = self.fresh_dvar(&format!("{name}{suffix}"));
                (IVar::Dim(w), Index::Dim(Dim::var(w)))
            }
            IVar::Shape(s) => {
                let name = self
                    .names
                    .svars
                    .get(s.0 as usize)
                    .cloned()
                    .unwrap_or_else(|| "@s".into());
                let w = self.fresh_svar(&format!("{name}{suffix}"));
                (IVar::Shape(w), Index::Shape(Shape::var(w)))
            }
        }
    }

    /// The best candidate (`rank`'s first), when it is the only one with
    /// the least principal frame; otherwise an error that says why and what
    /// to write.
    fn choose(
        &mut self,
        head: &Head<'_>,
        args: &[Option<Type>],
        unboxed: &[Option<Unboxed>],
        ranked: Vec<(Candidate, Vec<Inst>)>,
    ) -> Option<Candidate> {
        let span = head.e.span;
        let fname = print::expr_to_string(head.base);
        let mut ranked = ranked.into_iter();
        let Some((best, best_insts)) = ranked.next() else {
            let mut d = self
                .error(
                    span,
                    format!("no instantiation of `{fname}` fits these arguments"),
                )
                .note(format!("`{fname}` has type {}", self.show(&head.base_ty)));
            for (k, a) in args.iter().enumerate() {
                d = d.note(match a {
                    Some(a) => format!("argument {} has type {}", k + 1, self.show(a)),
                    None => format!("argument {} is a lambda without parameter types", k + 1),
                });
            }
            // The first argument nothing fits, given the ones before it.
            let misfit = self.first_misfit(head, args);
            let mut advice = None;
            if let Some(m) = misfit {
                d = d.note(m.note);
                advice = match m.elements {
                    // No instantiation changes an element type written in
                    // the function's type: the advice is another function,
                    // or a conversion.
                    Some(Elements {
                        param,
                        arg,
                        decided: false,
                    }) => Some(self.element_advice(&fname, &param, &arg)),
                    Some(Elements {
                        param,
                        arg,
                        decided: true,
                    }) => Some(self.decided_elements_advice(head.e, &param, &arg)),
                    None => self.box_advice(args, unboxed),
                };
            }
            let advice = advice.unwrap_or_else(|| {
                format!("write the instantiation: (@{fname} (type …) (index …) argument …)")
            });
            self.report(d.note(advice));
            return None;
        };
        if let Some((other, other_insts)) = ranked.next()
            && !best_beats(&best, &other)
        {
            let (a, b) = (
                self.show_insts(&fname, &best_insts),
                self.show_insts(&fname, &other_insts),
            );
            let d = self
                .error(span, format!("ambiguous instantiation of `{fname}`"))
                .note(format!(
                    "both {a} and {b} fit, with principal frames {} and {}",
                    self.show_shape(&best.principal),
                    self.show_shape(&other.principal)
                ))
                .note("write the one you mean");
            self.report(d);
            return None;
        }
        Some(best)
    }

    /// Which argument first fits no parameter, as a note: the parameter's
    /// type as far as the earlier arguments decided it, and the cells the
    /// argument's shape offers.
    fn first_misfit(&self, head: &Head<'_>, args: &[Option<Type>]) -> Option<Misfit> {
        let mut solution = Solution::default();
        for k in 0..args.len() {
            let fits = head.unknowns.spine_prefix(
                &head.ty,
                &args[..=k],
                &head.extensions[..=k],
                Solution::default(),
            );
            let Some(best) = fits.into_iter().min_by_key(|c| c.principal.min_rank()) else {
                let param = nth_param(&head.ty, k)?;
                let param = solution.ty(&param);
                let arg = args.get(k)?.as_ref()?;
                let segs = arg.shape.segs();
                let cells: Vec<String> = (0..=segs.len())
                    .map(|i| self.show_shape(&Shape::from_segs(segs[i..].to_vec())))
                    .collect();
                if !head.unknowns.atoms_fit(&param.atom, &arg.atom, &solution) {
                    let note = if param.shape.is_scalar() {
                        format!(
                            "argument {} has elements of type {}, where the parameter needs {}",
                            k + 1,
                            self.show(&Type::scalar(arg.atom.clone())),
                            self.show(&param)
                        )
                    } else {
                        format!(
                            "argument {} has elements of type {}, where the parameter {} needs {}",
                            k + 1,
                            self.show(&Type::scalar(arg.atom.clone())),
                            self.show(&param),
                            self.show(&Type::scalar(param.atom.clone()))
                        )
                    };
                    // The head's type writes the element type (`sum`'s
                    // Int), or an earlier argument decided it (`append`'s
                    // `&t`, Int after an Int first argument).
                    let unsolved = nth_param(&head.ty, k)?;
                    let decided = head.unknowns.mentions(&Type::scalar(unsolved.atom.clone()));
                    return Some(Misfit {
                        note,
                        elements: Some(Elements {
                            param: param.atom.clone(),
                            arg: arg.atom.clone(),
                            decided,
                        }),
                    });
                }
                // A dimension of two unknowns is not solved from one length.
                let underdetermined = param.shape.segs().iter().find_map(|seg| match seg {
                    remora_types::Seg::Dim(d)
                        if d.vars().iter().filter(|v| head.unknowns.dims.contains(v)).count() > 1 =>
                    {
                        Some(d.clone())
                    }
                    _ => None,
                });
                if let Some(d) = underdetermined {
                    return Some(Misfit::shape(format!(
                        "the parameter's dimension {} has more than one unknown, which one length cannot \
                         solve: give the first, as in ((i-app {} 2) …)",
                        self.show_shape(&Shape::from_dims([d]))
                            .trim_matches(|c| c == '[' || c == ']'),
                        print::expr_to_string(head.base)
                    )));
                }
                return Some(Misfit::shape(format!(
                    "argument {} of shape {} has no cell of the parameter's shape {} (its cells, by frame: {})",
                    k + 1,
                    self.show_shape(&arg.shape),
                    self.show_shape(&param.shape),
                    cells.join(", ")
                )));
            };
            solution = best.solution;
        }
        // Every argument fit, but an equation of two unknowns is left.
        let (d, _) = solution.deferred.first()?;
        Some(Misfit::shape(format!(
            "the parameter's dimension {} has more than one unknown, which the arguments do not \
             determine: give the first, as in ((i-app {} 2) …)",
            self.show_shape(&Shape::from_dims([d.clone()]))
                .trim_matches(|c| c == '[' || c == ']'),
            print::expr_to_string(head.base)
        )))
    }

    /// When an earlier argument of the spine `e` decided the element type
    /// `param` and a later one has `arg`: the earlier function argument's
    /// twin for the other number type (`(reduce + [1.0 2.0])` wants
    /// `f.+`), or a word that the arguments must agree.
    fn decided_elements_advice(&self, e: &ast::Expr, param: &Atom, arg: &Atom) -> String {
        let mut args = Vec::new();
        let mut head = e;
        while let ExprKind::App { func, arg } = &head.kind {
            args.push(&**arg);
            head = func;
        }
        args.reverse();
        let twin = |name: &str| match (param, arg) {
            (Atom::Int, Atom::Float) => Some(format!("f.{name}")),
            (Atom::Float, Atom::Int) => name.strip_prefix("f.").map(str::to_string),
            _ => None,
        };
        for a in args {
            if let ExprKind::Var(name) = &a.kind
                && let Some(twin) = twin(&name.name)
                && self.values.get(&twin).is_some()
                && self.values.get(&name.name).is_some_and(|v| match v {
                    Value::Var(_, t) | Value::Intrinsic(_, t) => matches!(t.atom, Atom::Arrow(..)),
                    Value::Poisoned => false,
                })
            {
                let elements = self.show(&Type::scalar(arg.clone()));
                return format!(
                    "`{}` made the element type {}: for {elements} elements use `{twin}`",
                    name.name,
                    self.show(&Type::scalar(param.clone()))
                );
            }
        }
        format!(
            "an earlier argument made the element type {}: the arguments' element types must agree",
            self.show(&Type::scalar(param.clone()))
        )
    }

    /// When no instantiation fits and the arguments' shapes mention the
    /// witnesses of automatic unboxes: each has a witness of its own, so
    /// no two are known to agree, nor is one known to equal a written
    /// dimension. The advice is to unbox once, by hand.
    fn box_advice(&self, args: &[Option<Type>], unboxed: &[Option<Unboxed>]) -> Option<String> {
        let opened: Vec<&Unboxed> = self.pending.iter().chain(unboxed.iter().flatten()).collect();
        // The boxes whose witnesses the arguments' types mention, each once.
        let mut boxes: Vec<&Unboxed> = Vec::new();
        for a in args.iter().flatten() {
            for u in &opened {
                if u.witness_in(a) && !boxes.iter().any(|b| b.witness == u.witness) {
                    boxes.push(u);
                }
            }
        }
        let first = boxes.first()?;
        let named = |u: &Unboxed| match &u.boxed.kind {
            TExprKind::Var(v) => self.names.vars.get(v.0 as usize).cloned(),
            _ => None,
        };
        let name = named(first);
        let witnesses: Vec<String> = boxes
            .iter()
            .map(|u| remora_types::ty::ivar_name(u.witness, &self.names))
            .collect();
        if boxes.len() < 2 {
            return None;
        }
        let what = name.clone().unwrap_or_else(|| "box".to_string());
        let same = boxes.iter().all(|u| named(u).is_some() && named(u) == name);
        let (boxes_are, fix) = if same {
            (
                format!("`{what}` is unboxed for you {} times", boxes.len()),
                format!("unbox it once, (unbox ($n x {what}) …), and use x"),
            )
        } else {
            (
                format!("{} boxes are unboxed for you", boxes.len()),
                "where they are one box, unbox it once, (unbox ($n x box) …), and use x".to_string(),
            )
        };
        Some(format!(
            "{boxes_are}, each automatic unbox with a witness of its own ({}), so their dimensions are \
             never known to agree: {fix}",
            witnesses.join(", ")
        ))
    }

    /// `(@f (T …) (i …))` for an instantiation.
    fn show_insts(&self, fname: &str, insts: &[Inst]) -> String {
        let mut types = Vec::new();
        let mut indices = Vec::new();
        for i in insts {
            match i {
                Inst::Type(a) => types.push(self.show(&Type::scalar(a.clone()))),
                Inst::Index(_, Index::Dim(d)) => indices.push(
                    self.show_shape(&Shape::from_dims([d.clone()]))
                        .trim_matches(|c| c == '[' || c == ']')
                        .to_string(),
                ),
                Inst::Index(_, Index::Shape(s)) => indices.push(self.show_shape(s)),
            }
        }
        let list = |v: Vec<String>| {
            if v.is_empty() {
                "_".to_string()
            } else {
                format!("({})", v.join(" "))
            }
        };
        format!("(@{fname} {} {} …)", list(types), list(indices))
    }
}

/// Why the first argument that fits no instantiation does not: the note
/// that says so, and for a mismatch of written element types, the
/// parameter's and the argument's.
struct Misfit {
    note: String,
    elements: Option<Elements>,
}

/// A mismatch of element types: the parameter's, the argument's, and
/// whether earlier arguments decided the parameter's (it is a type
/// variable of the head's type).
struct Elements {
    param: Atom,
    arg: Atom,
    decided: bool,
}

impl Misfit {
    fn shape(note: String) -> Misfit {
        Misfit { note, elements: None }
    }
}

/// A boxed argument unboxed for its application: the witness variable,
/// the payload's variable and the boxed expression.
#[derive(Clone, Debug)]
pub(super) struct Unboxed {
    pub(super) witness: IVar,
    pub(super) var: VarId,
    pub(super) boxed: TExpr,
}

impl Unboxed {
    /// Whether a type mentions this box's witness.
    pub(super) fn witness_in(&self, t: &Type) -> bool {
        t.mentions(self.witness)
    }
}

/// What an inferred application spine elaborates from.
struct Head<'a> {
    e: &'a ast::Expr,
    base: &'a ast::Expr,
    base_kind: TExprKind,
    base_ty: Type,
    insts: Vec<Inst>,
    /// The head's type with every binder instantiated.
    ty: Type,
    /// Each argument's rerank frame unknown, if it may be reranked.
    extensions: Vec<Option<remora_types::SVar>>,
    /// The unknowns of rank parameters the arguments' types mention.
    rank: RankUnknowns,
    unknowns: Unknowns,
}

/// Whether an instantiation still holds an unknown under `sol`.
fn unsolved(i: &Inst, sol: &Solution, unknowns: &Unknowns) -> bool {
    match i {
        Inst::Type(a) => unknowns.mentions(&Type::scalar(sol.atom(a))),
        Inst::Index(_, Index::Dim(d)) => {
            unknowns.mentions(&Type::array(Atom::Int, Shape::from_dims([sol.dim(d)])))
        }
        Inst::Index(_, Index::Shape(x)) => unknowns.mentions(&Type::array(Atom::Int, sol.shape(x))),
    }
}

/// The candidates with distinct instantiations, best first: a principal
/// frame that is a prefix of every other's first (the fewest implicit
/// lifts), then by rank.
/// A candidate and its instantiation, solved.
type Ranked = (Candidate, Vec<Inst>);

fn rank(insts: &[Inst], candidates: Vec<Candidate>) -> Vec<Ranked> {
    let mut distinct: Vec<Ranked> = Vec::new();
    for c in candidates {
        let solved: Vec<Inst> = insts
            .iter()
            .map(|i| match i {
                Inst::Type(a) => Inst::Type(c.solution.atom(a)),
                Inst::Index(v, x) => Inst::Index(*v, solve_index(&c.solution, x)),
            })
            .collect();
        if !distinct.iter().any(|(_, s)| *s == solved) {
            distinct.push((c, solved));
        }
    }
    let least: Vec<bool> = distinct
        .iter()
        .map(|(c, _)| {
            distinct
                .iter()
                .all(|(d, _)| c.principal.is_prefix_of(&d.principal).is_yes())
        })
        .collect();
    let mut keyed: Vec<(bool, Ranked)> = least.into_iter().zip(distinct).collect();
    keyed.sort_by_key(|(least, (c, _))| {
        (
            !least,
            c.principal.min_rank(),
            c.principal.segs().len(),
            replication(c),
        )
    });
    keyed.into_iter().map(|(_, r)| r).collect()
}

/// How many axes of the principal frame the arguments are replicated over,
/// all told (the second criterion: with equal frames, the instantiation
/// that lifts the arguments along with each other, not copies of one over
/// another, as `(select [#t #f] [1 2] [3 4])` ⇒ `[1 4]`).
fn replication(c: &Candidate) -> usize {
    let p = c.principal.min_rank();
    c.frames.iter().map(|f| p.saturating_sub(f.min_rank())).sum()
}

/// Whether the best candidate is strictly better than the runner-up: a
/// principal frame that is a proper prefix of the other's, or the same
/// frame with fewer replicated axes.
fn best_beats(best: &Candidate, other: &Candidate) -> bool {
    let (a, b) = (&best.principal, &other.principal);
    let proper = a.is_prefix_of(b).is_yes() && !b.is_prefix_of(a).is_yes();
    proper || (a.equals(b).is_yes() && replication(best) < replication(other))
}

/// An instantiation argument as written on the head.
enum Written<'a> {
    Type(&'a ast::Type),
    Index(&'a ast::Ispace),
}

impl Written<'_> {
    /// An index written with a `_` dimension in it, `[_ 3]`.
    fn has_dim_hole(&self) -> bool {
        let Written::Index(ast::Ispace::Shape(s)) = self else {
            return false;
        };
        matches!(&s.kind, ast::ShapeKind::Splice(parts) if parts.iter().any(|p| {
            matches!(p, ast::Ispace::Dim(ast::Dim { kind: ast::DimKind::Hole, .. }))
        }))
    }

    fn is_hole(&self) -> bool {
        match self {
            Written::Type(t) => matches!(t.kind, TypeKind::Hole),
            Written::Index(i) => matches!(i, ast::Ispace::Hole(_)),
        }
    }
}

/// Whether `e` is a lambda literal whose parameter has no type written.
/// A `∀`/`Π` function (not a `Π`-family of arrays such as `iota/static`).
pub(super) fn polymorphic_function(t: &Type) -> bool {
    t.shape.is_scalar()
        && matches!(t.atom, Atom::Forall(..) | Atom::Pi(..))
        && matches!(count_binders(t).1.atom, Atom::Arrow(..))
}

fn untyped_lambda(e: &ast::Expr) -> bool {
    match &e.kind {
        ExprKind::Array { shape, atoms } if shape.is_empty() => matches!(
            atoms.as_slice(),
            [ast::Atom {
                kind: ast::AtomKind::Lambda { param, .. },
                ..
            }] if matches!(param.ann, ast::ParamAnn::Infer)
        ),
        _ => false,
    }
}

/// The `k`th parameter type of a curried function type.
fn nth_param(t: &Type, k: usize) -> Option<Type> {
    let mut t = t;
    for _ in 0..k {
        match &t.atom {
            Atom::Arrow(_, r) => t = r,
            _ => return None,
        }
    }
    match &t.atom {
        Atom::Arrow(p, _) => Some((**p).clone()),
        _ => None,
    }
}

/// The number of `∀` and `Π` binders in front of a type, and what they bind.
fn count_binders(t: &Type) -> (usize, &Type) {
    let mut n = 0;
    let mut t = t;
    loop {
        match &t.atom {
            Atom::Forall(_, b) | Atom::Pi(_, b) if t.shape.is_scalar() => {
                n += 1;
                t = b;
            }
            _ => return (n, t),
        }
    }
}

fn solve_index(sol: &Solution, i: &Index) -> Index {
    match i {
        Index::Dim(d) => Index::Dim(sol.dim(d)),
        Index::Shape(s) => Index::Shape(sol.shape(s)),
    }
}

/// `(t-app f A)` for a scalar `∀` function.
/// `f` applied to its instantiation, solved: its `t-app`s and `i-app`s.
fn apply_insts(mut f: TExpr, insts: &[Inst], sol: &Solution, span: Span) -> Option<TExpr> {
    for inst in insts {
        f = match inst {
            Inst::Type(a) => t_app(f, sol.atom(a), span)?,
            Inst::Index(_, i) => i_app(f, solve_index(sol, i), span)?,
        };
    }
    Some(f)
}

fn t_app(f: TExpr, a: Atom, span: Span) -> Option<TExpr> {
    let Atom::Forall(v, body) = &f.ty.atom else {
        return None;
    };
    let ty = body.subst_type(*v, &a).lift(&f.ty.shape);
    Some(TExpr {
        kind: TExprKind::TApp {
            func: Box::new(f),
            arg: a,
        },
        ty,
        span,
    })
}

/// `(i-app f i)` for a scalar `Π` function.
fn i_app(f: TExpr, i: Index, span: Span) -> Option<TExpr> {
    let Atom::Pi(v, body) = &f.ty.atom else {
        return None;
    };
    let ty = body.subst_index(*v, &i).lift(&f.ty.shape);
    Some(TExpr {
        kind: TExprKind::IApp {
            func: Box::new(f),
            arg: i,
        },
        ty,
        span,
    })
}

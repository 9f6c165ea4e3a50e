//! Elaboration (extensions.md intro, `remora elaborate`): the typed tree
//! written back as a core program, with everything inference decided made
//! explicit — every `t-app` and `i-app`, every reranked function's
//! η-expansion, every lambda's parameter type. The output is in the form
//! `remora parse` prints (core.md §1.3), reads back with
//! `Dialect::Tree`, and is accepted by the core checker (inference off) with
//! the same meaning: the test suite checks this for every run case.

use crate::check::NameTable;
use crate::typed::{TAtom, TAtomKind, TDecl, TExpr, TExprKind, VarId};
use remora_syntax::Span;
use remora_syntax::ast::{self, AtomKind, BindKind, DeclKind, DimKind, ExprKind, ShapeKind, Sort, TypeKind};
use remora_types::{Atom, DVar, Dim, IVar, Index, SVar, Seg, Shape, TVar, Type};

/// A checked program as a core program.
/// Every `jvp`, `vjp` and `grad` is replaced by its derivative program
/// (`crate::ad`); an error is a form that cannot be differentiated yet,
/// or a program too large to write out ([`MAX_WRITTEN_TYPES`]).
pub fn program(decls: &[TDecl], names: &NameTable) -> Result<ast::Program, Vec<remora_syntax::Diagnostic>> {
    differentiated(decls, names)
}

/// [`program`], with the errors of the derivative forms.
pub fn differentiated(
    decls: &[TDecl],
    names: &NameTable,
) -> Result<ast::Program, Vec<remora_syntax::Diagnostic>> {
    let w = Writer::new(names, crate::ad::Pass::new(decls, names));
    let mut written = Vec::with_capacity(decls.len());
    for d in decls {
        written.push(w.decl(d));
        if w.over_budget() {
            let value = match d {
                TDecl::Def { value, .. } | TDecl::Expr(value) => value,
            };
            return Err(vec![too_large(value.span)]);
        }
    }
    w.ad.finish()?;
    Ok(ast::Program { decls: written })
}

/// A checked expression as a core expression.
pub fn expr(e: &TExpr, names: &NameTable) -> Result<ast::Expr, Vec<remora_syntax::Diagnostic>> {
    let w = Writer::new(names, crate::ad::Pass::new(&[], names));
    let written = w.expr(e);
    if w.over_budget() {
        return Err(vec![too_large(e.span)]);
    }
    Ok(written)
}

/// The most type nodes a program written out may hold. Types are written
/// in full where the typed tree shares them, so the written program can be
/// quadratic in the source: a box's type at every level of nested boxes
/// holds the types of all the boxes inside (5,000 nested boxes: 12.5
/// million nodes, past 4 GB). This many take about 500 MB.
pub const MAX_WRITTEN_TYPES: usize = 1 << 21;

fn too_large(span: Span) -> remora_syntax::Diagnostic {
    remora_syntax::Diagnostic::error(
        span,
        format!("too large to write out in core form: its types would take more than {MAX_WRITTEN_TYPES} nodes"),
    )
    .note("every type is written in full where it is needed: a box's type, at every level of nested boxes, holds all the types inside it")
}

pub(crate) struct Writer<'a> {
    names: &'a NameTable,
    pub(crate) ad: crate::ad::Pass<'a>,
    /// Type nodes written so far (past [`MAX_WRITTEN_TYPES`], each type is
    /// written as `Int`, and the program is refused).
    types_written: std::cell::Cell<usize>,
}

pub(crate) fn sp() -> Span {
    Span::default()
}

pub(crate) fn ident(name: impl Into<String>) -> ast::Ident {
    ast::Ident::new(name, sp())
}

pub(crate) fn node(kind: ExprKind) -> ast::Expr {
    ast::Expr { kind, span: sp() }
}

fn ty_node(kind: TypeKind) -> ast::Type {
    ast::Type { kind, span: sp() }
}

impl<'a> Writer<'a> {
    fn new(names: &'a NameTable, ad: crate::ad::Pass<'a>) -> Writer<'a> {
        Writer {
            names,
            ad,
            types_written: std::cell::Cell::new(0),
        }
    }

    fn over_budget(&self) -> bool {
        self.types_written.get() > MAX_WRITTEN_TYPES
    }

    pub(crate) fn names(&self) -> &'a NameTable {
        self.names
    }

    /// A variable's name: its source name, or the name the derivative
    /// code binds it to (`crate::ad`).
    pub(crate) fn var(&self, v: VarId) -> ast::Ident {
        if let Some(name) = self.ad.name_of(v) {
            return ident(name);
        }
        ident(self.source_name(v))
    }

    pub(crate) fn source_name(&self, v: VarId) -> String {
        self.names
            .vars
            .get(v.0 as usize)
            .cloned()
            .unwrap_or_else(|| format!("v{}", v.0))
    }

    pub(crate) fn tvar(&self, v: TVar) -> ast::Ident {
        ident(
            self.names
                .tvars
                .get(v.0 as usize)
                .cloned()
                .unwrap_or_else(|| format!("&t{}", v.0)),
        )
    }

    fn dvar(&self, v: DVar) -> ast::Ident {
        ident(
            self.names
                .dvars
                .get(v.0 as usize)
                .cloned()
                .unwrap_or_else(|| format!("$d{}", v.0)),
        )
    }

    fn svar(&self, v: SVar) -> ast::Ident {
        ident(
            self.names
                .svars
                .get(v.0 as usize)
                .cloned()
                .unwrap_or_else(|| format!("@s{}", v.0)),
        )
    }

    pub(crate) fn iparam(&self, v: IVar) -> ast::IParam {
        match v {
            IVar::Dim(d) => ast::IParam {
                sort: Sort::Dim,
                name: self.dvar(d),
            },
            IVar::Shape(s) => ast::IParam {
                sort: Sort::Shape,
                name: self.svar(s),
            },
        }
    }

    fn decl(&self, d: &TDecl) -> ast::Decl {
        let kind = match d {
            TDecl::Def {
                name,
                entry: true,
                value,
                ..
            } => {
                // The entry's parameters are its value's lambdas.
                let mut params = Vec::new();
                let mut body = value;
                while let Some((p, inner)) = lambda(body) {
                    let Atom::Arrow(pt, _) = &body.ty.atom else { break };
                    params.push(ast::Param {
                        name: self.var(p),
                        ann: ast::ParamAnn::Type(self.ty(pt)),
                        span: sp(),
                    });
                    body = inner;
                }
                DeclKind::Entry {
                    name: ident(name.clone()),
                    params,
                    ret: None,
                    body: self.expr(body),
                }
            }
            TDecl::Def { name, value, .. } => DeclKind::Def(ast::Bind {
                kind: BindKind::Val {
                    name: ident(name.clone()),
                    ty: None,
                    expr: self.expr(value),
                },
                span: sp(),
            }),
            TDecl::Expr(e) => DeclKind::Expr(self.expr(e)),
        };
        ast::Decl { kind, span: sp() }
    }

    /// `e` written back, with its position (derivative code: the form's).
    pub(crate) fn expr(&self, e: &TExpr) -> ast::Expr {
        if let Some(mut derivative) = crate::ad::form(self, e) {
            crate::ad::fill_spans(&mut derivative, e.span);
            return derivative;
        }
        let mut x = self.expr_unspanned(e);
        x.span = e.span;
        x
    }

    fn expr_unspanned(&self, e: &TExpr) -> ast::Expr {
        match &e.kind {
            TExprKind::Array { shape, atoms } if atoms.is_empty() => node(ExprKind::EmptyArray {
                shape: shape.clone(),
                elem: self.ty(&Type::scalar(e.ty.atom.clone())),
            }),
            TExprKind::Array { shape, atoms } => node(ExprKind::Array {
                shape: shape.clone(),
                atoms: atoms.iter().map(|a| self.atom(a, &e.ty.atom)).collect(),
            }),
            TExprKind::Frame { shape, elems } if elems.is_empty() => {
                let cell = Type {
                    atom: e.ty.atom.clone(),
                    shape: Shape::from_segs(
                        e.ty.shape.segs().get(shape.len()..).unwrap_or_default().to_vec(),
                    ),
                };
                node(ExprKind::EmptyFrame {
                    shape: shape.clone(),
                    elem: self.ty(&cell),
                })
            }
            TExprKind::Frame { shape, elems } => node(ExprKind::Frame {
                shape: shape.clone(),
                elems: elems.iter().map(|x| self.expr(x)).collect(),
            }),
            TExprKind::Var(v) => node(ExprKind::Var(self.var(*v))),
            TExprKind::Intrinsic(name) => node(ExprKind::Var(ident(*name))),
            TExprKind::App { func, arg, .. } => node(ExprKind::App {
                func: Box::new(self.expr(func)),
                arg: Box::new(self.expr(arg)),
            }),
            TExprKind::TApp { func, arg } => node(ExprKind::TApp {
                func: Box::new(self.expr(func)),
                arg: self.ty(&Type::scalar(arg.clone())),
            }),
            TExprKind::IApp { func, arg } => node(ExprKind::IApp {
                func: Box::new(self.expr(func)),
                arg: self.index(arg),
            }),
            TExprKind::Unbox {
                binder,
                var,
                boxed,
                body,
                ..
            } => node(ExprKind::Unbox {
                witness: self.iparam(*binder),
                var: self.var(*var),
                boxed: Box::new(self.expr(boxed)),
                body: Box::new(self.expr(body)),
            }),
            TExprKind::Let { var, value, body } => node(ExprKind::Let {
                binds: vec![ast::Bind {
                    kind: BindKind::Val {
                        name: self.var(*var),
                        ty: None,
                        expr: self.expr(value),
                    },
                    span: sp(),
                }],
                body: Box::new(self.expr(body)),
            }),
            TExprKind::Record(fields) => {
                let cells = match &e.ty.atom {
                    Atom::Record(fs) => fs.to_vec(),
                    _ => Vec::new(),
                };
                node(ExprKind::Record(
                    fields
                        .iter()
                        .map(|(name, value)| {
                            let cell = cells
                                .iter()
                                .find(|(n, _)| n == name)
                                .map(|(_, t)| t.shape.clone())
                                .unwrap_or_default();
                            ast::RecordField {
                                name: ident(name.clone()),
                                cell: self.shape(&cell),
                                value: self.expr(value),
                            }
                        })
                        .collect(),
                ))
            }
            TExprKind::Field { record, field } => node(ExprKind::Field {
                record: Box::new(self.expr(record)),
                field: ident(field.clone()),
            }),
            TExprKind::If {
                cond,
                then,
                otherwise,
            } => node(ExprKind::If {
                cond: Box::new(self.expr(cond)),
                then: Box::new(self.expr(then)),
                otherwise: Box::new(self.expr(otherwise)),
            }),
        }
    }

    /// An atom of an array literal whose atoms have type `atom`.
    fn atom(&self, a: &TAtom, atom: &Atom) -> ast::Atom {
        let kind = match &a.kind {
            TAtomKind::Bool(b) => AtomKind::Bool(*b),
            TAtomKind::Int(i) => AtomKind::Int(*i),
            TAtomKind::Float(x) => AtomKind::Float(*x),
            TAtomKind::Lambda { param, body } => {
                let pty = match atom {
                    Atom::Arrow(p, _) => self.ty(p),
                    _ => ty_node(TypeKind::Error),
                };
                AtomKind::Lambda {
                    param: Box::new(ast::Param {
                        name: self.var(*param),
                        ann: ast::ParamAnn::Type(pty),
                        span: sp(),
                    }),
                    body: Box::new(self.expr(body)),
                }
            }
            TAtomKind::TLambda { param, body } => AtomKind::TLambda {
                param: Box::new(ast::TParam {
                    name: self.tvar(*param),
                }),
                body: Box::new(self.expr(body)),
            },
            TAtomKind::ILambda { param, body } => AtomKind::ILambda {
                param: Box::new(self.iparam(*param)),
                body: Box::new(self.expr(body)),
            },
            TAtomKind::Box { witness, body } => AtomKind::Box {
                witness: Some(Box::new(self.index(witness))),
                body: Box::new(self.expr(body)),
                ty: Some(Box::new(self.ty(&Type::scalar(atom.clone())))),
            },
        };
        ast::Atom { kind, span: sp() }
    }

    pub(crate) fn ty(&self, t: &Type) -> ast::Type {
        self.types_written.set(self.types_written.get() + 1);
        if self.over_budget() {
            return ty_node(TypeKind::Int);
        }
        let elem = match &t.atom {
            Atom::Int => ty_node(TypeKind::Int),
            Atom::Bool => ty_node(TypeKind::Bool),
            Atom::Float => ty_node(TypeKind::Float),
            Atom::Var(v) => ty_node(TypeKind::Var(self.tvar(*v))),
            Atom::Arrow(p, r) => ty_node(TypeKind::Arrow {
                param: Box::new(self.ty(p)),
                result: Box::new(self.ty(r)),
            }),
            Atom::Forall(v, b) => ty_node(TypeKind::Forall {
                param: ast::TParam { name: self.tvar(*v) },
                body: Box::new(self.ty(b)),
            }),
            Atom::Pi(v, b) => ty_node(TypeKind::Pi {
                param: self.iparam(*v),
                body: Box::new(self.ty(b)),
            }),
            Atom::Sigma(v, b) => ty_node(TypeKind::Sigma {
                param: self.iparam(*v),
                body: Box::new(self.ty(b)),
            }),
            Atom::Record(fs) => ty_node(TypeKind::Record(
                fs.iter().map(|(n, t)| (ident(n.clone()), self.ty(t))).collect(),
            )),
        };
        if t.shape.is_scalar() {
            elem
        } else {
            ty_node(TypeKind::Array {
                elem: Box::new(elem),
                shape: self.shape(&t.shape),
            })
        }
    }

    fn index(&self, i: &Index) -> ast::Ispace {
        match i {
            Index::Dim(d) => ast::Ispace::Dim(self.dim(d)),
            Index::Shape(s) => ast::Ispace::Shape(self.shape(s)),
        }
    }

    pub(crate) fn shape(&self, s: &Shape) -> ast::Shape {
        let parts = s
            .segs()
            .iter()
            .map(|seg| match seg {
                Seg::Dim(d) => ast::Ispace::Dim(self.dim(d)),
                Seg::Var(v) => ast::Ispace::Shape(ast::Shape {
                    kind: ShapeKind::Var(self.svar(*v)),
                    span: sp(),
                }),
            })
            .collect();
        ast::Shape {
            kind: ShapeKind::Splice(parts),
            span: sp(),
        }
    }

    /// A dimension in normal form as a sum (and difference) of products.
    fn dim(&self, d: &Dim) -> ast::Dim {
        let dim = |kind| ast::Dim { kind, span: sp() };
        let term = |monomial: &[DVar], c: u64| {
            let mut factors: Vec<ast::Dim> = monomial
                .iter()
                .map(|v| dim(DimKind::Var(self.dvar(*v))))
                .collect();
            if c != 1 || factors.is_empty() {
                factors.insert(0, dim(DimKind::Nat(c)));
            }
            if factors.len() == 1 {
                factors.remove(0)
            } else {
                dim(DimKind::Mul(factors))
            }
        };
        let mut plus = Vec::new();
        let mut minus = Vec::new();
        for (m, c) in d.terms() {
            if *c >= 0 {
                plus.push(term(m, c.unsigned_abs()));
            } else {
                minus.push(term(m, c.unsigned_abs()));
            }
        }
        let k = d.constant();
        if k > 0 || (plus.is_empty() && minus.is_empty() && k == 0) {
            plus.push(dim(DimKind::Nat(k.max(0) as u64)));
        } else if k < 0 {
            // A negative constant alone is written (- 0 k), so that it
            // stays negative (a run-time error) when read back.
            minus.push(dim(DimKind::Nat(k.unsigned_abs())));
        }
        let sum = match plus.len() {
            0 => dim(DimKind::Nat(0)),
            1 => plus.remove(0),
            _ => dim(DimKind::Add(plus)),
        };
        if minus.is_empty() {
            sum
        } else {
            let mut parts = vec![sum];
            parts.extend(minus);
            dim(DimKind::Sub(parts))
        }
    }
}

/// `e` as a lambda literal: its parameter and body.
pub(crate) fn lambda(e: &TExpr) -> Option<(VarId, &TExpr)> {
    match &e.kind {
        TExprKind::Array { shape, atoms } if shape.is_empty() => match atoms.as_slice() {
            [
                TAtom {
                    kind: TAtomKind::Lambda { param, body },
                    ..
                },
            ] => Some((*param, body)),
            _ => None,
        },
        _ => None,
    }
}

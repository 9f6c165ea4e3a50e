//! The typed tree lowered to explicit maps ([`crate::maps`]): the lifting
//! the checker decided for each application (its principal frame, and the
//! frame of the function array and of each argument) written out as maps.
//!
//! An application spine `(((f a1) a2) … ak)` whose principal frame is `P`
//! becomes one nest of maps over `P`, cut where some part's frame ends:
//! with `f`'s frame `[]`, `a1`'s `[3]` and `a2`'s `[3 4]`,
//!
//! ```text
//! (map [3] ((x a1) (r a2))      ; a1's cells and a2's rows
//!   (map [4] ((y r))            ; the row's cells; x is captured
//!     (f x y)))
//! ```
//!
//! A part that is not a variable or a literal is bound by a `let` outside
//! the nest first, so that a captured part is computed once, not once per
//! cell. Records over a frame are built the same way from their fields; a
//! field of an array of records, and an unbox of an array of boxes, are
//! maps over that array's frame.

use crate::maps::{Atom, Bind, Decl, Expr, Kind, Program};
use remora_check::NameTable;
use remora_check::typed::{TAtom, TAtomKind, TDecl, TExpr, TExprKind, VarId};
use remora_syntax::Span;
use remora_types::{Atom as TyAtom, Dim, IVar, Index, Shape, Type};

/// A construct the lowering cannot express (yet), and where it is.
#[derive(Clone, Debug, PartialEq)]
pub struct Unsupported {
    pub span: Span,
    pub what: String,
}

/// The program at the explicit-maps level.
pub fn lower_program(decls: &[TDecl], names: &NameTable) -> Result<Program, Unsupported> {
    let mut lower = Lower {
        var_names: names.vars.clone(),
    };
    let mut out = Vec::with_capacity(decls.len());
    for d in decls {
        out.push(match d {
            TDecl::Def {
                var,
                name,
                entry,
                value,
            } => Decl::Def {
                var: *var,
                name: name.clone(),
                entry: *entry,
                value: lower.expr(value)?,
            },
            TDecl::Expr(e) => Decl::Expr(lower.expr(e)?),
        });
    }
    Ok(Program {
        decls: out,
        var_names: lower.var_names,
    })
}

struct Lower {
    var_names: Vec<String>,
}

/// One part of a lifted construct: its value at this level and its frame
/// (a prefix of the principal frame).
struct Part {
    value: Expr,
    frame: Shape,
}

fn unsupported<T>(span: Span, what: impl Into<String>) -> Result<T, Unsupported> {
    Err(Unsupported {
        span,
        what: what.into(),
    })
}

impl Lower {
    fn fresh(&mut self, like: &str) -> VarId {
        let id = VarId(self.var_names.len() as u32);
        self.var_names.push(like.to_string());
        id
    }

    /// A name for a variable standing for `e`'s cells.
    fn name_for(&self, e: &Expr) -> String {
        match &e.kind {
            Kind::Var(v) => self
                .var_names
                .get(v.0 as usize)
                .cloned()
                .unwrap_or_else(|| "x".into()),
            Kind::Prim(p) => (*p).to_string(),
            Kind::Record(_) => "r".into(),
            _ => "x".into(),
        }
    }

    fn expr(&mut self, e: &TExpr) -> Result<Expr, Unsupported> {
        let kind = match &e.kind {
            TExprKind::Array { shape, atoms } => Kind::Array {
                shape: shape.clone(),
                atoms: atoms
                    .iter()
                    .map(|a| self.atom(a, &e.ty.atom))
                    .collect::<Result<_, _>>()?,
            },
            TExprKind::Frame { shape, elems } => Kind::Frame {
                shape: shape.clone(),
                elems: elems.iter().map(|x| self.expr(x)).collect::<Result<_, _>>()?,
            },
            TExprKind::Var(v) => Kind::Var(*v),
            TExprKind::Intrinsic(name) => Kind::Prim(name),
            TExprKind::App { .. } => return self.spine(e),
            TExprKind::TApp { func, arg } => Kind::TApp {
                func: Box::new(self.expr(func)?),
                arg: arg.clone(),
            },
            TExprKind::IApp { func, arg } => Kind::IApp {
                func: Box::new(self.expr(func)?),
                arg: arg.clone(),
            },
            TExprKind::Let { var, value, body } => {
                let value = self.expr(value)?;
                let body = self.expr(body)?;
                Kind::Map {
                    frame: Shape::scalar(),
                    binds: vec![Bind {
                        var: *var,
                        ty: value.ty.clone(),
                        value,
                    }],
                    body: Box::new(body),
                }
            }
            TExprKind::Unbox {
                witness,
                binder,
                var,
                boxed,
                body,
            } => return self.unbox(e, *witness, *binder, *var, boxed, body),
            TExprKind::Record(fields) => return self.record(e, fields),
            TExprKind::Field { record, field } => return self.field(e, record, field),
            TExprKind::If {
                cond,
                then,
                otherwise,
            } => Kind::If {
                cond: Box::new(self.expr(cond)?),
                then: Box::new(self.expr(then)?),
                otherwise: Box::new(self.expr(otherwise)?),
            },
        };
        Ok(Expr {
            kind,
            ty: e.ty.clone(),
        })
    }

    /// An atom of a literal whose atoms are of type `ty`.
    fn atom(&mut self, a: &TAtom, ty: &TyAtom) -> Result<Atom, Unsupported> {
        Ok(match &a.kind {
            TAtomKind::Bool(b) => Atom::Bool(*b),
            TAtomKind::Int(n) => Atom::Int(*n),
            TAtomKind::Float(x) => Atom::Float(*x),
            TAtomKind::Lambda { param, body } => {
                let TyAtom::Arrow(param_ty, _) = ty else {
                    return unsupported(a.span, "a lambda without a function type");
                };
                Atom::Lambda {
                    param: *param,
                    param_ty: (**param_ty).clone(),
                    body: Box::new(self.expr(body)?),
                }
            }
            TAtomKind::TLambda { param, body } => Atom::TLambda {
                param: *param,
                body: Box::new(self.expr(body)?),
            },
            TAtomKind::ILambda { param, body } => Atom::ILambda {
                param: *param,
                body: Box::new(self.expr(body)?),
            },
            TAtomKind::Box { witness, body } => Atom::Box {
                witness: witness.clone(),
                body: Box::new(self.expr(body)?),
            },
        })
    }

    /// `(((f a1) a2) … ak)`: one nest of maps over the last application's
    /// principal frame, the function cell applied to the argument cells
    /// inside.
    fn spine(&mut self, e: &TExpr) -> Result<Expr, Unsupported> {
        let (head, args) = e.spine();
        let Some((_, first)) = args.first() else {
            return unsupported(e.span, "an application without arguments");
        };
        let Some((_, last)) = args.last() else {
            return unsupported(e.span, "an application without arguments");
        };
        let principal = last.principal.clone();
        let mut parts = Vec::with_capacity(args.len() + 1);
        let mut head_value = self.expr(head)?;
        // `(trace "label" y)`: a string literal as the label is printed as
        // its text (the loop level cannot tell a literal any more).
        if args.len() >= 2 && args.first().is_some_and(|(label, _)| is_string_literal(label)) {
            rename_prim(&mut head_value, "trace", "trace/text");
        }
        parts.push(Part {
            value: head_value,
            frame: first.fun_frame.clone(),
        });
        for (a, lifted) in &args {
            parts.push(Part {
                value: self.expr(a)?,
                frame: lifted.arg_frame.clone(),
            });
        }
        let Ok(cell) = e.ty.shape.strip_prefix(&principal) else {
            return unsupported(e.span, "an application whose type does not begin with its frame");
        };
        let cell_ty = Type::array(e.ty.atom.clone(), cell);
        self.nest(e.span, &principal, parts, cell_ty, |mut cells| {
            let func = cells.remove(0);
            Kind::App {
                func: Box::new(func),
                args: cells,
            }
        })
    }

    /// `{(x e) …}` over the record's frame: a nest of maps binding the
    /// fields' cells, one record made of them inside.
    fn record(&mut self, e: &TExpr, fields: &[(String, TExpr)]) -> Result<Expr, Unsupported> {
        let TyAtom::Record(cells) = &e.ty.atom else {
            return unsupported(e.span, "a record without a record type");
        };
        let mut parts = Vec::with_capacity(fields.len());
        for ((_, x), (_, cell)) in fields.iter().zip(cells.iter()) {
            let Ok(frame) = x.ty.shape.strip_suffix(&cell.shape) else {
                return unsupported(x.span, "a record field whose type does not end in its cell");
            };
            parts.push(Part {
                value: self.expr(x)?,
                frame,
            });
        }
        let names: Vec<String> = fields.iter().map(|(n, _)| n.clone()).collect();
        let cell_ty = Type::scalar(e.ty.atom.clone());
        self.nest(e.span, &e.ty.shape, parts, cell_ty, |cells| {
            Kind::Record(names.into_iter().zip(cells).collect())
        })
    }

    /// A field of an array of records: a map over its frame.
    fn field(&mut self, e: &TExpr, record: &TExpr, field: &str) -> Result<Expr, Unsupported> {
        let frame = record.ty.shape.clone();
        let Ok(cell) = e.ty.shape.strip_prefix(&frame) else {
            return unsupported(
                e.span,
                "a field whose type does not begin with its record's frame",
            );
        };
        let part = Part {
            value: self.expr(record)?,
            frame: frame.clone(),
        };
        let field = field.to_string();
        let cell_ty = Type::array(e.ty.atom.clone(), cell);
        self.nest(e.span, &frame, vec![part], cell_ty, |mut cells| Kind::Field {
            record: Box::new(cells.remove(0)),
            field,
        })
    }

    /// An unbox of an array of boxes: a map over its frame, one box opened
    /// inside.
    fn unbox(
        &mut self,
        e: &TExpr,
        witness: IVar,
        binder: IVar,
        var: VarId,
        boxed: &TExpr,
        body: &TExpr,
    ) -> Result<Expr, Unsupported> {
        let TyAtom::Sigma(bound, payload) = &boxed.ty.atom else {
            return unsupported(e.span, "an unbox of something that is not a box");
        };
        let var_ty = match use_type(body, var) {
            Some(t) => t,
            None => payload.subst_index(*bound, &index_of(witness)),
        };
        let frame = boxed.ty.shape.clone();
        let part = Part {
            value: self.expr(boxed)?,
            frame: frame.clone(),
        };
        let body = self.expr(body)?;
        let cell_ty = body.ty.clone();
        self.nest(e.span, &frame, vec![part], cell_ty, |mut cells| Kind::Unbox {
            witness,
            binder,
            var,
            var_ty,
            boxed: Box::new(cells.remove(0)),
            body: Box::new(body),
        })
    }

    /// The parts iterated over `principal` by a nest of maps, one map for
    /// each stretch of axes between the ends of the parts' frames; `build`
    /// makes the innermost node (of type `cell_ty`) from the parts' cells.
    /// Parts that would be captured and are not variables or literals are
    /// bound by a `let` around the nest first.
    fn nest(
        &mut self,
        span: Span,
        principal: &Shape,
        parts: Vec<Part>,
        cell_ty: Type,
        build: impl FnOnce(Vec<Expr>) -> Kind,
    ) -> Result<Expr, Unsupported> {
        let whole = cell_ty.lift(principal);
        if principal.is_scalar() {
            return Ok(Expr {
                kind: build(parts.into_iter().map(|p| p.value).collect()),
                ty: cell_ty,
            });
        }
        let segs = principal.segs();
        let mut ends = Vec::with_capacity(parts.len());
        for p in &parts {
            let k = p.frame.segs().len();
            let is_prefix = segs
                .get(..k)
                .is_some_and(|s| Shape::from_segs(s.to_vec()).equals(&p.frame).is_yes());
            if !is_prefix {
                return unsupported(span, "a frame that is not a prefix of the principal frame");
            }
            ends.push(k);
        }
        let mut cuts: Vec<usize> = ends.iter().copied().filter(|&k| k > 0).collect();
        cuts.push(segs.len());
        cuts.sort_unstable();
        cuts.dedup();
        // Parts computed once, outside the nest.
        let mut lets = Vec::new();
        let mut current = Vec::with_capacity(parts.len());
        for p in parts {
            let simple = is_simple(&p.value);
            if simple {
                current.push(p.value);
            } else {
                let var = self.fresh(&self.name_for(&p.value));
                let ty = p.value.ty.clone();
                lets.push(Bind {
                    var,
                    ty: ty.clone(),
                    value: p.value,
                });
                current.push(Expr {
                    kind: Kind::Var(var),
                    ty,
                });
            }
        }
        // Level by level, outside in: each map binds the next cells of the
        // parts whose frames reach past it.
        let mut levels: Vec<(Shape, Vec<Bind>)> = Vec::with_capacity(cuts.len());
        let mut start = 0;
        for &cut in &cuts {
            let frame = Shape::from_segs(segs[start..cut].to_vec());
            let mut binds = Vec::new();
            for (value, &end) in current.iter_mut().zip(&ends) {
                if end < cut {
                    continue;
                }
                let Ok(cell) = value.ty.shape.strip_prefix(&frame) else {
                    return unsupported(span, "a part whose type does not begin with its frame");
                };
                let ty = Type::array(value.ty.atom.clone(), cell);
                let var = self.fresh(&self.name_for(value));
                let outer = std::mem::replace(
                    value,
                    Expr {
                        kind: Kind::Var(var),
                        ty: ty.clone(),
                    },
                );
                binds.push(Bind {
                    var,
                    ty,
                    value: outer,
                });
            }
            levels.push((frame, binds));
            start = cut;
        }
        let mut e = Expr {
            kind: build(current),
            ty: cell_ty,
        };
        for (frame, binds) in levels.into_iter().rev() {
            let ty = e.ty.lift(&frame);
            e = Expr {
                kind: Kind::Map {
                    frame,
                    binds,
                    body: Box::new(e),
                },
                ty,
            };
        }
        if !lets.is_empty() {
            e = Expr {
                kind: Kind::Map {
                    frame: Shape::scalar(),
                    binds: lets,
                    body: Box::new(e),
                },
                ty: whole,
            };
        }
        Ok(e)
    }
}

/// Whether `e` costs nothing to repeat: a variable, an intrinsic, a
/// literal, or the instantiation of one of them that is a function (not
/// `(i-app iota/static [n])`, an array made each time).
fn is_simple(e: &Expr) -> bool {
    match &e.kind {
        Kind::Var(_) | Kind::Prim(_) | Kind::Array { .. } => true,
        Kind::TApp { func, .. } | Kind::IApp { func, .. } => {
            e.ty.shape.is_scalar()
                && matches!(e.ty.atom, TyAtom::Arrow(..) | TyAtom::Forall(..) | TyAtom::Pi(..))
                && is_simple(func)
        }
        _ => false,
    }
}

/// An index variable as an index.
fn index_of(v: IVar) -> Index {
    match v {
        IVar::Dim(d) => Index::Dim(Dim::var(d)),
        IVar::Shape(s) => Index::Shape(Shape::var(s)),
    }
}

/// The type of the first use of `var` in `e`, if it is used.
fn use_type(e: &TExpr, var: VarId) -> Option<Type> {
    e.find(&mut |x| matches!(x.kind, TExprKind::Var(v) if v == var))
        .map(|x| x.ty.clone())
}

/// Whether `e` is a string literal as the parser makes it: a vector of Int
/// atoms that all carry the literal's own position (as the interpreter
/// tells one, for `trace`'s label).
fn is_string_literal(e: &TExpr) -> bool {
    let same = |a: Span, b: Span| (a.file.0, a.start, a.end) == (b.file.0, b.start, b.end);
    match &e.kind {
        TExprKind::Array { shape, atoms } => {
            shape.len() == 1
                && !atoms.is_empty()
                && e.span.start < e.span.end
                && atoms
                    .iter()
                    .all(|a| same(a.span, e.span) && matches!(a.kind, TAtomKind::Int(_)))
        }
        _ => false,
    }
}

/// The intrinsic `from` at the head of `f` (under its type and index
/// applications) named `to`.
fn rename_prim(f: &mut Expr, from: &str, to: &'static str) {
    match &mut f.kind {
        Kind::Prim(name) if *name == from => *name = to,
        Kind::TApp { func, .. } | Kind::IApp { func, .. } => rename_prim(func, from, to),
        _ => {}
    }
}

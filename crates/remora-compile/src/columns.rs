//! A map over the columns of a transposed matrix, turned inside out (a
//! rule of the combinator level, before fusion): the cells of `(transpose2d
//! x)`, `x` of shape `[n C]`, are `x`'s columns, each `n` atoms `C` apart;
//! a function of one column — reductions of it, elementwise maps over its
//! atoms, scalar steps between them — is the same steps over all the
//! columns at once, the frame `[C]` pushed inside every step:
//!
//! ```text
//! (map [C] ((c (transpose2d x)))          (transpose2d
//!   (let ((m (reduce f.max c)))      ⟹      (let ((m (reduce f.max' x)))        ; [C]: rows reduced
//!     (map [n] ((a c)) (f.- a m))))           (map [n] ((a x))                 ; a: a row
//!                                               (map [C] ((a' a) (m' m)) (f.- a' m')))))
//! ```
//!
//! A reduction of a column is a reduction of `x`'s rows by the operator
//! lifted to rows (`f.max'`): each position sees the same items combined
//! in the same order (the reduction's tree depends only on the number of
//! items), so each column gets the same bits; a step on scalars is that
//! step over `[C]`. Every loop then walks `x` row by row, contiguously,
//! not down its columns; and `(transpose2d (transpose2d y))` is `y`, so a
//! column function written between two transposes writes its rows in
//! place. A function of the program applied to the columns is read
//! through its body (inlined). A body that reduces no column, or has
//! anything else in it (an `if`, a gather, a map whose cells are not
//! atoms), leaves the map as it is.

use crate::maps::{Atom, Bind, Expr, Kind};
use remora_check::typed::VarId;
use remora_types::{Atom as TyAtom, DVar, Dim, IVar, Index, SVar, Seg, Shape, TVar, Type};
use std::collections::HashMap;
use std::sync::Arc;

/// `e` with each map over the columns of a transposed matrix turned
/// inside out (see the module's comment). `functions` are the program's
/// functions, by variable, for the calls in those maps' bodies.
pub(crate) fn columns(e: &Expr, functions: &HashMap<VarId, Expr>, names: &mut Vec<String>) -> Expr {
    let mut transposes = HashMap::new();
    e.each(&mut |x| {
        if let Kind::Map { frame, binds, .. } = &x.kind
            && frame.is_scalar()
        {
            for b in binds {
                if let Some(m) = transposed(&b.value)
                    && matches!(m.kind, Kind::Var(_))
                {
                    transposes.insert(b.var, m.clone());
                }
            }
        }
    });
    if transposes.is_empty() && !mentions_transpose(e) && !mentions_sum(e) && functions.is_empty() {
        return e.clone();
    }
    rewrite(e, &transposes, functions, names)
}

/// Whether `e` reduces anything (a map over a frame of sums of one shared
/// vector may be turned inside out; so may one calling a function).
fn mentions_sum(e: &Expr) -> bool {
    let mut found = false;
    e.each(&mut |x| found |= matches!(x.kind, Kind::Prim("reduce" | "f.sum")));
    found
}

fn mentions_transpose(e: &Expr) -> bool {
    let mut found = false;
    e.each(&mut |x| found |= matches!(x.kind, Kind::Prim("transpose2d")));
    found
}

/// The matrix `m` of `(transpose2d m)`.
fn transposed(e: &Expr) -> Option<&Expr> {
    let Kind::App { func, args } = &e.kind else {
        return None;
    };
    let [m] = args.as_slice() else {
        return None;
    };
    matches!(prim_head(func).kind, Kind::Prim("transpose2d")).then_some(m)
}

fn rewrite(
    e: &Expr,
    transposes: &HashMap<VarId, Expr>,
    functions: &HashMap<VarId, Expr>,
    names: &mut Vec<String>,
) -> Expr {
    let e = e.map_children(&mut |c| rewrite(c, transposes, functions, names));
    if let Kind::Map { frame, binds, body } = &e.kind
        && let Some(turned) = inside_out(frame, binds, body, &e.ty, transposes, functions, names)
    {
        return turned;
    }
    if let Some(m) = transposed(&e)
        && let Some(y) = untransposed(m)
    {
        return y;
    }
    e
}

/// The fewest positions of a frame of reductions of a shared vector that
/// are turned inside out (see `inside_out`).
pub(crate) const MIN_SHARED: i64 = 8;

/// `y` for `m` a `(transpose2d y)`, maybe as the body of `let`s (which
/// stay around `y`).
fn untransposed(m: &Expr) -> Option<Expr> {
    match &m.kind {
        Kind::Map { frame, binds, body } if frame.is_scalar() => {
            let body = untransposed(body)?;
            Some(Expr {
                ty: body.ty.clone(),
                kind: Kind::Map {
                    frame: frame.clone(),
                    binds: binds.clone(),
                    body: Box::new(body),
                },
            })
        }
        _ => transposed(m).cloned(),
    }
}

/// The map over `frame` (one axis, `[C]`) turned inside out, if each of its
/// arrays is a transposed matrix (whose columns are its cells) or a
/// vector over `[C]` (a scalar for each column), at least one the first,
/// and its body is made of steps that `Lift` pushes the frame into.
#[allow(clippy::too_many_arguments)]
fn inside_out(
    frame: &Shape,
    binds: &[Bind],
    body: &Expr,
    ty: &Type,
    transposes: &HashMap<VarId, Expr>,
    functions: &HashMap<VarId, Expr>,
    names: &mut Vec<String>,
) -> Option<Expr> {
    if frame.rank() != Some(1) || body.ty.shape.rank().is_none_or(|r| r > 1) {
        return None;
    }
    let mut lifted = HashMap::new();
    let mut columns = 0;
    let mut new_binds = Vec::with_capacity(binds.len());
    for b in binds {
        let value = match b.ty.shape.rank()? {
            0 => b.value.clone(),
            1 => {
                columns += 1;
                match &b.value.kind {
                    Kind::Var(v) => transposes.get(v)?.clone(),
                    _ => transposed(&b.value)
                        .filter(|m| matches!(m.kind, Kind::Var(_)))?
                        .clone(),
                }
            }
            _ => return None,
        };
        let lifted_ty = b.ty.with_trailing(frame);
        lifted.insert(b.var, lifted_ty.clone());
        new_binds.push(Bind {
            var: b.var,
            ty: lifted_ty,
            value,
        });
    }
    // With no column, a map over a frame of reductions of one shared
    // vector (a lifted `(f.sum (select (== bins b) ws 0.0))`, each `b` a
    // pass over `bins` and `ws`): the reductions of rows of every `b`'s
    // items, one pass over the shared items (the same trees, so the same
    // bits). Over frames of at least `MIN_SHARED` positions: over fewer,
    // each reduction on its own thread is as fast.
    if columns == 0 && frame.dims()?.first()?.as_const().is_none_or(|n| n < MIN_SHARED) {
        return None;
    }
    let mut lift = Lift {
        frame: frame.clone(),
        lifted,
        reduced: false,
        functions,
        names,
    };
    // Only a body that reduces a column walks down the columns: one of
    // elementwise steps is read through the transposed view as it is
    // (a lifted product of columns, summed, is a contraction).
    let (body, true) = lift.expr(body)? else {
        return None;
    };
    if !lift.reduced {
        return None;
    }
    // (The steps pushed over the frame, each a map of its own, fused.)
    let body = crate::fuse::fuse(&body, lift.names);
    let ty_inner = Type::array(ty.atom.clone(), body.ty.shape.clone());
    let turned = Expr {
        ty: ty_inner,
        kind: Kind::Map {
            frame: Shape::scalar(),
            binds: new_binds,
            body: Box::new(body),
        },
    };
    match ty.shape.rank() {
        Some(2) => transpose(turned, ty),
        _ => Some(turned),
    }
}

/// `(transpose2d m)`, its type `ty`, where `m`'s shape is two axes.
fn transpose(m: Expr, ty: &Type) -> Option<Expr> {
    let [rows, cols] = <[&Dim; 2]>::try_from(m.ty.shape.dims()?).ok()?;
    let (t, a, b) = (TVar(u32::MAX), DVar(u32::MAX), DVar(u32::MAX - 1));
    let var = |d: DVar| Seg::Dim(Dim::var(d));
    let tv = TyAtom::Var(t);
    let poly = Type::scalar(TyAtom::Forall(
        t,
        Arc::new(pi(
            IVar::Dim(a),
            pi(
                IVar::Dim(b),
                Type::arrow(
                    Type::array(tv.clone(), Shape::from_segs(vec![var(a), var(b)])),
                    Type::array(tv, Shape::from_segs(vec![var(b), var(a)])),
                ),
            ),
        )),
    ));
    let func = instantiated(
        "transpose2d",
        poly,
        &m.ty.atom,
        &[Index::Dim(rows.clone()), Index::Dim(cols.clone())],
    );
    Some(Expr {
        ty: ty.clone(),
        kind: Kind::App {
            func: Box::new(func),
            args: vec![m],
        },
    })
}

/// `(Π (v) body)`.
fn pi(v: IVar, body: Type) -> Type {
    Type::scalar(TyAtom::Pi(v, Arc::new(body)))
}

/// The intrinsic `prim`, of the type `poly` (`∀` one atom type, then `Π`
/// its indices), applied to `atom` and to `indices`: each node typed as
/// the checker types it.
fn instantiated(prim: &'static str, poly: Type, atom: &TyAtom, indices: &[Index]) -> Expr {
    let mut e = Expr {
        ty: poly.clone(),
        kind: Kind::Prim(prim),
    };
    let mut ty = match &poly.atom {
        TyAtom::Forall(t, body) => body.subst_type(*t, atom),
        _ => poly.clone(),
    };
    e = Expr {
        ty: ty.clone(),
        kind: Kind::TApp {
            func: Box::new(e),
            arg: atom.clone(),
        },
    };
    for index in indices {
        if let TyAtom::Pi(v, body) = &ty.atom {
            ty = body.subst_index(*v, index);
        }
        e = Expr {
            ty: ty.clone(),
            kind: Kind::IApp {
                func: Box::new(e),
                arg: index.clone(),
            },
        };
    }
    e
}

trait Trailing {
    fn with_trailing(&self, frame: &Shape) -> Type;
}

impl Trailing for Type {
    /// `[T s C]` of `[T s]`: the frame pushed inside, as the last axes.
    fn with_trailing(&self, frame: &Shape) -> Type {
        Type::array(self.atom.clone(), self.shape.concat(frame))
    }
}

/// The steps of a column's function pushed over the frame of the columns.
struct Lift<'a> {
    frame: Shape,
    /// The variables bound to values over the frame, by their new types.
    lifted: HashMap<VarId, Type>,
    /// Whether a reduction of a column was turned into one of rows.
    reduced: bool,
    /// The program's functions, for the calls in the body.
    functions: &'a HashMap<VarId, Expr>,
    names: &'a mut Vec<String>,
}

impl Lift<'_> {
    /// `e` over the frame, and whether it varies over it (if not, it is
    /// `e` as it was: the same for every column).
    fn expr(&mut self, e: &Expr) -> Option<(Expr, bool)> {
        match &e.kind {
            Kind::Var(v) => Some(match self.lifted.get(v) {
                Some(ty) => (
                    Expr {
                        ty: ty.clone(),
                        kind: e.kind.clone(),
                    },
                    true,
                ),
                None => (e.clone(), false),
            }),
            Kind::Map { frame, binds, body } if frame.is_scalar() => {
                let mut new_binds = Vec::with_capacity(binds.len());
                for b in binds {
                    let (value, varies) = self.expr(&b.value)?;
                    let ty = if varies {
                        self.lifted.insert(b.var, value.ty.clone());
                        value.ty.clone()
                    } else {
                        b.ty.clone()
                    };
                    new_binds.push(Bind {
                        var: b.var,
                        ty,
                        value,
                    });
                }
                let (body, varies) = self.expr(body)?;
                Some((
                    Expr {
                        ty: body.ty.clone(),
                        kind: Kind::Map {
                            frame: frame.clone(),
                            binds: new_binds,
                            body: Box::new(body),
                        },
                    },
                    varies,
                ))
            }
            Kind::Map { frame, binds, body } if frame.rank() == Some(1) => {
                self.elementwise(e, frame, binds, body)
            }
            Kind::App { func, args } => {
                if let Kind::Prim(_) = prim_head(func).kind
                    && scalar_step(e, prim_head(func))
                {
                    return self.step(e, func, args);
                }
                if let Some(lifted) = self.reduction(e, func, args) {
                    return lifted;
                }
                // A function of the program, or a lambda, applied to what
                // varies: its body.
                let called = crate::fuse::instance(func, self.functions)
                    .or_else(|| crate::fuse::lambda(func).map(|_| (**func).clone()));
                match called {
                    Some(function) if self.fixed(e).is_none() => {
                        let inlined = crate::fuse::inlined_call(&function, args.to_vec(), &e.ty, self.names)?;
                        self.expr(&inlined)
                    }
                    _ => self.fixed(e),
                }
            }
            _ => self.fixed(e),
        }
    }

    /// `e` unchanged, where it mentions no variable that varies.
    fn fixed(&self, e: &Expr) -> Option<(Expr, bool)> {
        let mut varies = false;
        e.each(&mut |x| varies |= matches!(&x.kind, Kind::Var(v) if self.lifted.contains_key(v)));
        (!varies).then(|| (e.clone(), false))
    }

    /// An elementwise map over a column's atoms: a map over the rows, each
    /// cell a row of the columns' atoms at one place.
    fn elementwise(&mut self, e: &Expr, frame: &Shape, binds: &[Bind], body: &Expr) -> Option<(Expr, bool)> {
        if !body.ty.shape.is_scalar() || binds.iter().any(|b| !b.ty.shape.is_scalar()) {
            return None;
        }
        let mut new_binds = Vec::with_capacity(binds.len());
        let mut any = false;
        for b in binds {
            let (value, varies) = self.expr(&b.value)?;
            let ty = if varies {
                any = true;
                let ty = b.ty.with_trailing(&self.frame);
                self.lifted.insert(b.var, ty.clone());
                ty
            } else {
                b.ty.clone()
            };
            new_binds.push(Bind {
                var: b.var,
                ty,
                value,
            });
        }
        // (Where no array varies, the body may: a map over a vector shared
        // by every position of the frame, each reading its own scalars.)
        let (body, true) = self.expr(body)? else {
            return (!any).then(|| (e.clone(), false));
        };
        Some((
            Expr {
                ty: e.ty.with_trailing(&self.frame),
                kind: Kind::Map {
                    frame: frame.clone(),
                    binds: new_binds,
                    body: Box::new(body),
                },
            },
            true,
        ))
    }

    /// A primitive applied to scalars: the same primitive over the frame,
    /// applied to each column's atoms.
    fn step(&mut self, e: &Expr, func: &Expr, args: &[Expr]) -> Option<(Expr, bool)> {
        let mut binds = Vec::new();
        let mut cells = Vec::with_capacity(args.len());
        for a in args {
            let (value, varies) = self.expr(a)?;
            if varies {
                let var = self.fresh(a);
                cells.push(Expr {
                    ty: a.ty.clone(),
                    kind: Kind::Var(var),
                });
                binds.push(Bind {
                    var,
                    ty: a.ty.clone(),
                    value,
                });
            } else {
                cells.push(a.clone());
            }
        }
        if binds.is_empty() {
            return Some((e.clone(), false));
        }
        Some((self.over_frame(binds, func.clone(), cells, &e.ty), true))
    }

    /// `(map frame binds (func cells…))`, `ty` its body's type.
    fn over_frame(&self, binds: Vec<Bind>, func: Expr, cells: Vec<Expr>, ty: &Type) -> Expr {
        Expr {
            ty: ty.with_trailing(&self.frame),
            kind: Kind::Map {
                frame: self.frame.clone(),
                binds,
                body: Box::new(Expr {
                    ty: ty.clone(),
                    kind: Kind::App {
                        func: Box::new(func),
                        args: cells,
                    },
                }),
            },
        }
    }

    /// A new variable named as `like`'s is, or `c`.
    fn fresh(&mut self, like: &Expr) -> VarId {
        let name = match like.kind {
            Kind::Var(v) => self
                .names
                .get(v.0 as usize)
                .cloned()
                .unwrap_or_else(|| "c".into()),
            _ => "c".into(),
        };
        let v = VarId(self.names.len() as u32);
        self.names.push(name);
        v
    }

    /// `(reduce op c)` of a column by a primitive `op` (of two scalars):
    /// `(reduce op' x)` of the rows, `op'` the operator lifted to rows; and
    /// `(f.sum c)` of a column of at least one atom, `(f.+ 0.0 (reduce f.+'
    /// x))` (a sum left to right from `0.0` differs from one without a
    /// seed only where every item is `-0.0`, as adding `0.0` afterwards
    /// does). Nothing where `e` is no reduction of a column.
    fn reduction(&mut self, e: &Expr, func: &Expr, args: &[Expr]) -> Option<Option<(Expr, bool)>> {
        let Kind::IApp { func: inner, arg } = &func.kind else {
            return None;
        };
        match (&inner.kind, args, arg) {
            (Kind::IApp { func: head, arg: d }, [op, column], Index::Shape(cell))
                if cell.is_scalar() && (is_prim(head, "reduce") || is_prim(head, "iscan")) =>
            {
                let Some((column, true)) = self.expr(column) else {
                    return Some(None);
                };
                let Some(op) = self.lifted_operator(op) else {
                    return Some(None);
                };
                self.reduced = true;
                let fold = if is_prim(head, "reduce") {
                    Fold::Reduce
                } else {
                    Fold::Scan
                };
                Some(Some((self.fold_rows(fold, d.clone(), op, column, &e.ty), true)))
            }
            (Kind::Prim("f.sum"), [column], _) => {
                let Some((column, true)) = self.expr(column) else {
                    return Some(None);
                };
                let n = column
                    .ty
                    .shape
                    .dims()
                    .and_then(|d| d.first().and_then(|n| n.as_const()));
                let Some(n) = n.filter(|n| *n >= 1) else {
                    return Some(None);
                };
                let float = Type::scalar(TyAtom::Float);
                let plus = Expr {
                    ty: Type::arrow(float.clone(), Type::arrow(float.clone(), float.clone())),
                    kind: Kind::Prim("f.+"),
                };
                let Some(op) = self.lifted_operator(&plus) else {
                    return Some(None);
                };
                let sums = self.fold_rows(Fold::Reduce, Index::Dim(Dim::int(n - 1)), op, column, &float);
                self.reduced = true;
                let s = self.fresh(e);
                let zero = Expr {
                    ty: float.clone(),
                    kind: Kind::Array {
                        shape: vec![],
                        atoms: vec![Atom::Float(0.0)],
                    },
                };
                let bind = Bind {
                    var: s,
                    ty: float.clone(),
                    value: sums,
                };
                let cell = Expr {
                    ty: float.clone(),
                    kind: Kind::Var(s),
                };
                Some(Some((
                    self.over_frame(vec![bind], plus, vec![zero, cell], &float),
                    true,
                )))
            }
            _ => None,
        }
    }

    /// `op` (a primitive of two scalars) lifted to the frame's rows: `(λ
    /// (a) (λ (b) (map frame ((a' a) (b' b)) (op a' b'))))`.
    fn lifted_operator(&mut self, op: &Expr) -> Option<Expr> {
        let Kind::Prim(_) = op.kind else {
            return None;
        };
        let TyAtom::Arrow(p, rest) = &op.ty.atom else {
            return None;
        };
        let TyAtom::Arrow(q, r) = &rest.atom else {
            return None;
        };
        if !p.shape.is_scalar() || !q.shape.is_scalar() || !r.shape.is_scalar() {
            return None;
        }
        let (pt, qt, rt) = ((**p).clone(), (**q).clone(), (**r).clone());
        let (a, b) = (self.fresh(op), self.fresh(op));
        let (a1, b1) = (self.fresh(op), self.fresh(op));
        let frame = self.frame.clone();
        let row = |t: &Type| t.with_trailing(&frame);
        let var = |v: VarId, ty: &Type| Expr {
            ty: ty.clone(),
            kind: Kind::Var(v),
        };
        let body = self.over_frame(
            vec![
                Bind {
                    var: a1,
                    ty: pt.clone(),
                    value: var(a, &row(&pt)),
                },
                Bind {
                    var: b1,
                    ty: qt.clone(),
                    value: var(b, &row(&qt)),
                },
            ],
            op.clone(),
            vec![var(a1, &pt), var(b1, &qt)],
            &rt,
        );
        let lambda = |param: VarId, param_ty: Type, body: Expr| Expr {
            ty: Type::arrow(param_ty.clone(), body.ty.clone()),
            kind: Kind::Array {
                shape: vec![],
                atoms: vec![Atom::Lambda {
                    param,
                    param_ty,
                    body: Box::new(body),
                }],
            },
        };
        let inner = lambda(b, row(&qt), body);
        Some(lambda(a, row(&pt), inner))
    }

    /// `((i-app reduce d frame) op rows)`, each row's atoms of the type
    /// `cell` (`[T]` over the frame); or `((i-app iscan d frame) op
    /// rows)`, `cell` the column's scan (`[T n]`, `[T n C]` over it).
    fn fold_rows(&self, fold: Fold, d: Index, op: Expr, rows: Expr, cell: &Type) -> Expr {
        let (t, dv, sv) = (TVar(u32::MAX), DVar(u32::MAX), SVar(u32::MAX));
        let tv = TyAtom::Var(t);
        let item = Type::array(tv.clone(), Shape::var(sv));
        let count = match fold {
            Fold::Reduce => Dim::int(1).add(&Dim::var(dv)),
            Fold::Scan => Dim::var(dv),
        };
        let all = Type::array(tv, Shape::from_segs(vec![Seg::Dim(count), Seg::Var(sv)]));
        let (prim, result) = match fold {
            Fold::Reduce => ("reduce", item.clone()),
            Fold::Scan => ("iscan", all.clone()),
        };
        let poly = Type::scalar(TyAtom::Forall(
            t,
            Arc::new(pi(
                IVar::Dim(dv),
                pi(
                    IVar::Shape(sv),
                    Type::arrow(
                        Type::arrow(item.clone(), Type::arrow(item.clone(), item)),
                        Type::arrow(all, result),
                    ),
                ),
            )),
        ));
        let func = instantiated(prim, poly, &cell.atom, &[d, Index::Shape(self.frame.clone())]);
        Expr {
            ty: cell.with_trailing(&self.frame),
            kind: Kind::App {
                func: Box::new(func),
                args: vec![op, rows],
            },
        }
    }
}

/// The function under `func`'s type and index applications (`select` of
/// `(i-app (t-app select Float) [])`).
fn prim_head(func: &Expr) -> &Expr {
    let mut head = func;
    while let Kind::IApp { func, .. } | Kind::TApp { func, .. } = &head.kind {
        head = func;
    }
    head
}

/// A fold of a column that walks down it: its reduction, or its scan
/// (every partial left fold from the first item).
#[derive(Clone, Copy)]
enum Fold {
    Reduce,
    Scan,
}

/// `(i-app (t-app prim T) d)`.
fn is_prim(head: &Expr, prim: &str) -> bool {
    let Kind::TApp { func, .. } = &head.kind else {
        return false;
    };
    matches!(func.kind, Kind::Prim(p) if p == prim)
}

/// Whether `e`, an application of the primitive `func`, is one step on
/// scalars: every argument and the result a scalar of a base type.
fn scalar_step(e: &Expr, func: &Expr) -> bool {
    let Kind::App { args, .. } = &e.kind else {
        return false;
    };
    let base = |t: &Type| t.shape.is_scalar() && matches!(t.atom, TyAtom::Int | TyAtom::Float | TyAtom::Bool);
    !matches!(func.kind, Kind::Prim(p) if p.starts_with("trace") || p.contains("random"))
        && base(&e.ty)
        && args.iter().all(|a| base(&a.ty))
}

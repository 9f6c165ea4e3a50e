//! Level 2, begun: *monomorphic* explicit maps. Every polymorphic
//! definition (a `t-fn`/`i-fn`, as inference makes of `(fun (f (x [Float
//! $n])) …)`) is replaced by one copy for each instantiation the program
//! uses, its type and index variables substituted (so `$n` becomes `3`, and
//! `(+ 1 $n)` becomes `4`), its variables renamed apart. What is left
//! polymorphic is only intrinsics, instantiated where they are used.
//!
//! ```text
//! (def twice (iλ ($n) (λ ((x [Float $n])) …)))      (def twice.9 (λ ((x.10 [Float 3])) …))
//! ((i-app twice 3) v)                          ⟹   (twice.9 v)
//! ```
//!
//! Same IR as [`crate::maps`]; [`verify_monomorphic`] adds this level's
//! rules. Still to come at this level: functions made first-order
//! (defunctionalised), and sizes known only at run time computed before
//! the arrays that need them.

use crate::lower::Unsupported;
use crate::maps::{Atom, Bind, Decl, Expr, Kind, Program};
use remora_check::typed::VarId;
use remora_syntax::Span;
use remora_types::{Atom as TyAtom, IVar, Index, Shape, TVar, Type};
use std::collections::HashMap;

/// One instantiation argument.
#[derive(Clone, Debug)]
pub(crate) enum Inst {
    Type(TyAtom),
    Index(Index),
}

/// The program with every polymorphic definition replaced by its
/// instances.
pub fn monomorphise(p: &Program) -> Result<Program, Unsupported> {
    let mut m = Mono {
        var_names: p.var_names.clone(),
        generic: HashMap::new(),
        instances: HashMap::new(),
        pending: Vec::new(),
        needed: std::collections::HashSet::new(),
        aliases: HashMap::new(),
    };
    let mut decls = Vec::with_capacity(p.decls.len());
    // Where each polymorphic definition was, in case it is still needed.
    let mut places = Vec::new();
    for d in &p.decls {
        match d {
            Decl::Def {
                var,
                value,
                entry: false,
                ..
            } if is_generic(value) => {
                m.generic.insert(*var, value.clone());
                places.push((decls.len(), d.clone()));
            }
            Decl::Def {
                var,
                name,
                entry,
                value,
            } => {
                let value = m.expr(value)?;
                if is_alias(&value.ty, &value) {
                    m.aliases.insert(*var, value.clone());
                }
                m.declare_pending(&mut decls);
                decls.push(Decl::Def {
                    var: *var,
                    name: name.clone(),
                    entry: *entry,
                    value,
                });
            }
            Decl::Expr(e) => {
                let e = m.expr(e)?;
                m.declare_pending(&mut decls);
                decls.push(Decl::Expr(e));
            }
        }
    }
    // A definition used as a polymorphic value, or instantiated at sizes
    // known only at run time, stays (monomorphised inside).
    for (at, d) in places.into_iter().rev() {
        if let Decl::Def {
            var,
            name,
            entry,
            value,
        } = d
            && m.needed.contains(&var)
        {
            let value = m.expr(&value)?;
            let mut before = Vec::new();
            m.declare_pending(&mut before);
            let value = Decl::Def {
                var,
                name,
                entry,
                value,
            };
            decls.splice(at..at, before.into_iter().chain(std::iter::once(value)));
        }
    }
    Ok(Program {
        decls,
        var_names: m.var_names,
    })
}

/// Whether a binding of type `ty` to `value` names another polymorphic
/// function: an intrinsic or a variable, instantiated in part or not.
fn is_alias(ty: &Type, value: &Expr) -> bool {
    let polymorphic = ty.shape.is_scalar() && matches!(ty.atom, TyAtom::Forall(..) | TyAtom::Pi(..));
    let head = value.instantiated();
    polymorphic && matches!(head.kind, Kind::Prim(_) | Kind::Var(_))
}

/// The type of a polymorphic function of type `ty` instantiated by `arg`.
fn instantiated(ty: &Type, arg: &Inst) -> Option<Type> {
    match (&ty.atom, arg) {
        (TyAtom::Forall(v, body), Inst::Type(t)) => Some(body.subst_type(*v, t).lift(&ty.shape)),
        (TyAtom::Pi(v, body), Inst::Index(i)) => Some(body.subst_index(*v, i).lift(&ty.shape)),
        _ => None,
    }
}

/// Whether a value is a polymorphic function (a `tλ` or `iλ`).
fn is_generic(e: &Expr) -> bool {
    matches!(&e.kind, Kind::Array { shape, atoms } if shape.is_empty()
        && matches!(atoms.as_slice(), [Atom::TLambda { .. } | Atom::ILambda { .. }]))
}

struct Mono {
    var_names: Vec<String>,
    /// Polymorphic definitions (top-level and `let`-bound), by variable.
    generic: HashMap<VarId, Expr>,
    /// The instance made for each instantiation, by definition and
    /// arguments.
    instances: HashMap<(VarId, String), VarId>,
    /// Instances made while monomorphising the current declaration, to be
    /// bound before it (or, for a `let`-bound definition, in its `let`):
    /// the definition's variable, the instance's, and its value.
    pending: Vec<(VarId, VarId, Expr)>,
    /// Polymorphic definitions still referred to as such.
    needed: std::collections::HashSet<VarId>,
    /// Variables bound to another name for a polymorphic function (`(let
    /// ((val f reverse)) …)`): replaced by it, so that its instantiations
    /// are the intrinsic's or the definition's.
    aliases: HashMap<VarId, Expr>,
}

fn unsupported<T>(what: impl Into<String>) -> Result<T, Unsupported> {
    Err(Unsupported {
        span: Span::default(),
        what: what.into(),
    })
}

impl Mono {
    /// The pending instances as declarations.
    fn declare_pending(&mut self, decls: &mut Vec<Decl>) {
        for (_, var, value) in self.pending.drain(..) {
            let name = self.var_names.get(var.0 as usize).cloned().unwrap_or_default();
            decls.push(Decl::Def {
                var,
                name,
                entry: false,
                value,
            });
        }
    }

    fn fresh(&mut self, like: VarId) -> VarId {
        let name = self
            .var_names
            .get(like.0 as usize)
            .cloned()
            .unwrap_or_else(|| "v".into());
        let id = VarId(self.var_names.len() as u32);
        self.var_names.push(name);
        id
    }

    fn expr(&mut self, e: &Expr) -> Result<Expr, Unsupported> {
        let ty = e.ty.clone();
        let kind = match &e.kind {
            Kind::Var(v) => {
                if let Some(target) = self.aliases.get(v).cloned() {
                    return self.expr(&target);
                }
                if self.generic.contains_key(v) {
                    self.needed.insert(*v);
                }
                e.kind.clone()
            }
            Kind::TApp { .. } | Kind::IApp { .. } => return self.instantiation(e),
            Kind::Map { frame, binds, body } if frame.is_scalar() => {
                // `let`-bound polymorphic functions: kept aside, their
                // instances bound in their place.
                let mut kept = Vec::with_capacity(binds.len());
                let mut local = Vec::new();
                for b in binds {
                    if is_alias(&b.ty, &b.value) {
                        let target = self.expr(&b.value)?;
                        self.aliases.insert(b.var, target);
                    }
                    if is_generic(&b.value) {
                        self.generic.insert(b.var, b.value.clone());
                        local.push((kept.len(), b));
                    } else {
                        kept.push(Bind {
                            var: b.var,
                            ty: b.ty.clone(),
                            value: self.expr(&b.value)?,
                        });
                    }
                }
                let before = self.pending.len();
                let body = self.expr(body)?;
                // Instances of the local definitions made in the body are
                // bound here, after the bindings they may use.
                // Local definitions still needed as such, where they were.
                for &(at, b) in local.iter().rev() {
                    if self.needed.contains(&b.var) {
                        let value = self.expr(&b.value)?;
                        kept.insert(
                            at,
                            Bind {
                                var: b.var,
                                ty: b.ty.clone(),
                                value,
                            },
                        );
                    }
                }
                let mut k = before;
                while k < self.pending.len() {
                    if local.iter().any(|(_, b)| b.var == self.pending[k].0) {
                        let (_, var, value) = self.pending.remove(k);
                        kept.push(Bind {
                            var,
                            ty: value.ty.clone(),
                            value,
                        });
                    } else {
                        k += 1;
                    }
                }
                if kept.is_empty() {
                    return Ok(body);
                }
                Kind::Map {
                    frame: frame.clone(),
                    binds: kept,
                    body: Box::new(body),
                }
            }
            // (A polymorphic function that is not a definition, passed
            // along before being instantiated, is kept, its body
            // monomorphised as far as it goes.)
            _ => return e.try_map_children(&mut |x| self.expr(x)),
        };
        Ok(Expr { kind, ty })
    }

    /// A chain of `t-app`/`i-app` on a polymorphic definition, given all
    /// its arguments: its instance. On anything else: the chain with its
    /// head monomorphised.
    fn instantiation(&mut self, e: &Expr) -> Result<Expr, Unsupported> {
        let mut args = Vec::new();
        let mut head = e;
        loop {
            match &head.kind {
                Kind::TApp { func, arg } => {
                    args.push(Inst::Type(arg.clone()));
                    head = func;
                }
                Kind::IApp { func, arg } => {
                    args.push(Inst::Index(arg.clone()));
                    head = func;
                }
                _ => break,
            }
        }
        args.reverse();
        // An alias at the head: its target there instead (with its own
        // instantiation arguments first).
        if let Kind::Var(v) = &head.kind
            && let Some(target) = self.aliases.get(v).cloned()
        {
            let mut rebuilt = target;
            for a in &args {
                let Some(ty) = instantiated(&rebuilt.ty, a) else {
                    return unsupported("an instantiation of an alias of the wrong sort");
                };
                let func = Box::new(rebuilt);
                rebuilt = Expr {
                    kind: match a {
                        Inst::Type(t) => Kind::TApp { func, arg: t.clone() },
                        Inst::Index(i) => Kind::IApp { func, arg: i.clone() },
                    },
                    ty,
                };
            }
            return self.instantiation(&rebuilt);
        }
        let head_var = match &head.kind {
            Kind::Var(v) => Some(*v),
            _ => None,
        };
        let generic = head_var.and_then(|v| self.generic.get(&v).cloned().map(|g| (v, g)));
        let closed = args.iter().all(|a| match a {
            Inst::Type(t) => closed_atom(t),
            Inst::Index(i) => closed_index(i),
        });
        let Some((v, generic)) = generic.filter(|(_, g)| closed && binders(g) == args.len()) else {
            if let Some(v) = head_var
                && self.generic.contains_key(&v)
            {
                self.needed.insert(v);
            }
            // An intrinsic's instantiation, or one left partial.
            return e.try_map_children(&mut |x| self.expr(x));
        };
        let key = (v, format!("{args:?}"));
        if let Some(&made) = self.instances.get(&key) {
            return Ok(Expr {
                kind: Kind::Var(made),
                ty: e.ty.clone(),
            });
        }
        let mut body = generic;
        for a in &args {
            body = instantiate_one(&body, a)?;
        }
        let body = crate::maps::freshen(&body, &mut self.var_names);
        let made = self.fresh(v);
        self.instances.insert(key, made);
        let body = self.expr(&body)?;
        self.pending.push((v, made, body));
        Ok(Expr {
            kind: Kind::Var(made),
            ty: e.ty.clone(),
        })
    }
}

/// How many type and index binders a polymorphic value has in front
/// (through `(let ((f v)) f)`, as `fun` with written instantiation
/// parameters makes).
pub(crate) fn binders(e: &Expr) -> usize {
    let mut n = 0;
    let mut cur = through_let(e);
    loop {
        match &cur.kind {
            Kind::Array { shape, atoms } if shape.is_empty() => match atoms.as_slice() {
                [Atom::TLambda { body, .. } | Atom::ILambda { body, .. }] => {
                    n += 1;
                    cur = through_let(body);
                }
                _ => return n,
            },
            _ => return n,
        }
    }
}

/// `v` for `(let ((f v)) f)`; `e` otherwise.
fn through_let(e: &Expr) -> &Expr {
    match &e.kind {
        Kind::Map { frame, binds, body } if frame.is_scalar() => match (binds.as_slice(), &body.kind) {
            ([b], Kind::Var(v)) if b.var == *v => through_let(&b.value),
            _ => e,
        },
        _ => e,
    }
}

/// Whether an atom type has no variable (a polymorphic or dependent type
/// counts as having one: instances are made only at closed types).
fn closed_atom(a: &TyAtom) -> bool {
    match a {
        TyAtom::Int | TyAtom::Bool | TyAtom::Float => true,
        TyAtom::Var(_) | TyAtom::Forall(..) | TyAtom::Pi(..) | TyAtom::Sigma(..) => false,
        TyAtom::Arrow(p, r) => closed_type(p) && closed_type(r),
        TyAtom::Record(fields) => fields.iter().all(|(_, t)| closed_type(t)),
    }
}

fn closed_type(t: &Type) -> bool {
    closed_atom(&t.atom) && closed_index(&Index::Shape(t.shape.clone()))
}

/// Whether an index is a constant (not a size known only at run time).
fn closed_index(i: &Index) -> bool {
    match i {
        Index::Dim(d) => d.as_const().is_some(),
        Index::Shape(s) => s
            .dims()
            .is_some_and(|dims| dims.iter().all(|d| d.as_const().is_some())),
    }
}

/// A polymorphic value's body with its first binder replaced by `arg`.
pub(crate) fn instantiate_one(e: &Expr, arg: &Inst) -> Result<Expr, Unsupported> {
    let Kind::Array { atoms, .. } = &through_let(e).kind else {
        return unsupported("an instantiation of something that is not a polymorphic function");
    };
    match (atoms.as_slice(), arg) {
        ([Atom::TLambda { param, body }], Inst::Type(t)) => Ok(subst(body, &Sub::Type(*param, t))),
        ([Atom::ILambda { param, body }], Inst::Index(i)) => Ok(subst(body, &Sub::Index(*param, i))),
        _ => unsupported("an instantiation whose argument is of the wrong sort"),
    }
}

/// One substitution of a type or an index variable.
enum Sub<'a> {
    Type(TVar, &'a TyAtom),
    Index(IVar, &'a Index),
}

impl Sub<'_> {
    fn ty(&self, t: &Type) -> Type {
        match self {
            Sub::Type(v, by) => t.subst_type(*v, by),
            Sub::Index(v, by) => t.subst_index(*v, by),
        }
    }

    fn atom(&self, a: &TyAtom) -> TyAtom {
        self.ty(&Type::scalar(a.clone())).atom
    }

    fn shape(&self, s: &Shape) -> Shape {
        self.ty(&Type::array(TyAtom::Int, s.clone())).shape
    }

    fn index(&self, i: &Index) -> Index {
        match (self, i) {
            (Sub::Index(..), Index::Dim(d)) => {
                // A dimension is a shape of one axis for substituting.
                let s = self.shape(&Shape::from_dims([d.clone()]));
                match s.dims().as_deref() {
                    Some([d]) => Index::Dim((*d).clone()),
                    _ => i.clone(),
                }
            }
            (Sub::Index(..), Index::Shape(s)) => Index::Shape(self.shape(s)),
            (Sub::Type(..), _) => i.clone(),
        }
    }
}

/// `e` with the substitution made in every type, shape and index in it.
fn subst(e: &Expr, s: &Sub<'_>) -> Expr {
    let mut out = e.map_children(&mut |x| subst(x, s));
    out.ty = s.ty(&out.ty);
    match &mut out.kind {
        Kind::Array { atoms, .. } => {
            for a in atoms {
                match a {
                    Atom::Lambda { param_ty, .. } => *param_ty = s.ty(param_ty),
                    Atom::Box { witness, .. } => *witness = s.index(witness),
                    _ => {}
                }
            }
        }
        Kind::TApp { arg, .. } => *arg = s.atom(arg),
        Kind::IApp { arg, .. } => *arg = s.index(arg),
        Kind::Map { frame, binds, .. } => {
            *frame = s.shape(frame);
            for b in binds {
                b.ty = s.ty(&b.ty);
            }
        }
        Kind::Unbox { var_ty, .. } => *var_ty = s.ty(var_ty),
        _ => {}
    }
    out
}

/// This level's rules besides [`crate::maps::verify`]'s: no user
/// definition is instantiated completely at closed types (it has an
/// instance for them); what instantiations are left are of intrinsics, at
/// sizes known only at run time, or partial.
pub fn verify_monomorphic(p: &Program) -> Result<(), String> {
    crate::maps::verify(p)?;
    let mut left = None;
    let mut look = |e: &Expr| {
        // A complete instantiation (of a type no longer polymorphic; one
        // left partial is a polymorphic value, kept as such).
        let complete = !matches!(e.ty.atom, TyAtom::Forall(..) | TyAtom::Pi(..));
        if left.is_some() || !complete || !matches!(e.kind, Kind::TApp { .. } | Kind::IApp { .. }) {
            return;
        }
        let mut head = e;
        let mut closed = true;
        loop {
            match &head.kind {
                Kind::TApp { func, arg } => {
                    closed &= closed_atom(arg);
                    head = func;
                }
                Kind::IApp { func, arg } => {
                    closed &= closed_index(arg);
                    head = func;
                }
                _ => break,
            }
        }
        if let (Kind::Var(v), true) = (&head.kind, closed) {
            left = Some(*v);
        }
    };
    for d in &p.decls {
        match d {
            Decl::Def { value, .. } => value.each(&mut look),
            Decl::Expr(e) => e.each(&mut look),
        }
    }
    match left {
        Some(v) => Err(format!("variable {} is instantiated at closed types", v.0)),
        None => Ok(()),
    }
}

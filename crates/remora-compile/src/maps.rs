//! The explicit-maps level: the typed tree with every lift written out.
//!
//! Where the typed tree says "apply `f` to `a`, lifted over the principal
//! frame `F`", this level says
//!
//! ```text
//! (map [3] ((x.7 [Int 4] xs.1))        ; iterate xs's first axis
//!   (map [4] ((y.8 Int x.7))           ; then each row's items
//!     (+ y.8 k.2)))                    ; k.2 is captured: no copy of it
//! ```
//!
//! * `(map F ((v T e) …) body)` runs `body` once per position of the frame
//!   `F`, with each `v` bound to the cell of `e` at that position (`e`'s
//!   shape is `F` followed by `T`'s); its value is `F` followed by the
//!   body's shape. A variable bound outside is the same at every position:
//!   an argument with a shorter frame is bound by an outer map and captured
//!   by the inner ones, so replication is never an operation.
//! * `(let ((v T e) …) body)` is a map over the empty frame; its bindings
//!   are in sequence, each seen by the ones after it (a map's arrays are
//!   all outside its scope).
//! * `(f a …)` applies one function (a scalar) to argument cells of exactly
//!   its parameters' types: nothing is lifted, and fewer arguments than
//!   parameters leave a function.
//!
//! Everything else is as in the typed tree. [`verify`] checks that a tree
//! keeps these rules.

use remora_check::typed::VarId;
use remora_types::{Atom as TyAtom, IVar, Index, Names, Shape, TVar, Truth, Type};
use std::collections::HashMap;

/// A program at this level: its declarations in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    pub decls: Vec<Decl>,
    /// The name of every variable, by number (several may share a name).
    pub var_names: Vec<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Decl {
    /// A `def` or an `entry`.
    Def {
        var: VarId,
        name: String,
        entry: bool,
        value: Expr,
    },
    /// A bare top-level expression.
    Expr(Expr),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: Kind,
    pub ty: Type,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    /// Literal atoms in a shape (none for an empty array).
    Array {
        shape: Vec<u64>,
        atoms: Vec<Atom>,
    },
    /// A frame of expressions, all of one type (none for an empty frame).
    Frame {
        shape: Vec<u64>,
        elems: Vec<Expr>,
    },
    Var(VarId),
    /// One of the intrinsics.
    Prim(&'static str),
    /// A function (a scalar) applied to argument cells of its parameters'
    /// types, in order.
    App {
        func: Box<Expr>,
        args: Vec<Expr>,
    },
    TApp {
        func: Box<Expr>,
        arg: TyAtom,
    },
    IApp {
        func: Box<Expr>,
        arg: Index,
    },
    /// The body once per position of `frame`, each variable bound to its
    /// array's cell there.
    Map {
        frame: Shape,
        binds: Vec<Bind>,
        body: Box<Expr>,
    },
    /// One box (a scalar) opened: its witness bound to `binder`, its
    /// payload to `var`, of type `var_ty`.
    Unbox {
        witness: IVar,
        binder: IVar,
        var: VarId,
        var_ty: Type,
        boxed: Box<Expr>,
        body: Box<Expr>,
    },
    /// One record (a scalar) of the fields' values.
    Record(Vec<(String, Expr)>),
    /// A field of one record (a scalar).
    Field {
        record: Box<Expr>,
        field: String,
    },
    If {
        cond: Box<Expr>,
        then: Box<Expr>,
        otherwise: Box<Expr>,
    },
}

/// A variable a map binds: `var`, of type `ty`, the cell of `value` at each
/// position.
#[derive(Clone, Debug, PartialEq)]
pub struct Bind {
    pub var: VarId,
    pub ty: Type,
    pub value: Expr,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Atom {
    Bool(bool),
    Int(i64),
    Float(f32),
    Lambda {
        param: VarId,
        param_ty: Type,
        body: Box<Expr>,
    },
    TLambda {
        param: TVar,
        body: Box<Expr>,
    },
    ILambda {
        param: IVar,
        body: Box<Expr>,
    },
    Box {
        witness: Index,
        body: Box<Expr>,
    },
}

// ---------------------------------------------------------------------------
// Printing

/// The names a printed tree uses: the checker's for types and indices, the
/// program's for variables (each with its number, as `x.3`).
pub struct Printer<'a> {
    pub names: &'a dyn Names,
    pub vars: &'a [String],
}

impl Printer<'_> {
    pub fn program(&self, p: &Program) -> String {
        let mut out = String::new();
        for d in &p.decls {
            match d {
                Decl::Def {
                    var, entry, value, ..
                } => {
                    let kw = if *entry { "entry" } else { "def" };
                    out.push_str(&format!("({kw} {} ", self.var(*var)));
                    self.expr(&mut out, value, 1);
                    out.push_str(")\n");
                }
                Decl::Expr(e) => {
                    self.expr(&mut out, e, 0);
                    out.push('\n');
                }
            }
        }
        out
    }

    pub fn expr_to_string(&self, e: &Expr) -> String {
        let mut out = String::new();
        self.expr(&mut out, e, 0);
        out
    }

    fn var(&self, v: VarId) -> String {
        match self.vars.get(v.0 as usize) {
            Some(n) => format!("{n}.{}", v.0),
            None => format!("v.{}", v.0),
        }
    }

    fn ty(&self, t: &Type) -> String {
        t.show(self.names)
    }

    fn shape(&self, s: &Shape) -> String {
        let mut out = String::from("[");
        s.write_segs(&mut out, &|v| self.names.dvar(v), &|v| self.names.svar(v));
        out.push(']');
        out
    }

    fn index(&self, i: &Index) -> String {
        match i {
            Index::Dim(d) => {
                let mut out = String::new();
                d.write(&mut out, &|v| self.names.dvar(v));
                out
            }
            Index::Shape(s) => self.shape(s),
        }
    }

    fn ivar(&self, v: IVar) -> String {
        match v {
            IVar::Dim(d) => self.names.dvar(d),
            IVar::Shape(s) => self.names.svar(s),
        }
    }

    /// A line break and the indentation of nesting `depth`.
    fn newline(out: &mut String, depth: usize) {
        out.push('\n');
        for _ in 0..depth {
            out.push_str("  ");
        }
    }

    fn expr(&self, out: &mut String, e: &Expr, depth: usize) {
        match &e.kind {
            Kind::Array { shape, atoms } => {
                if shape.is_empty() && atoms.len() == 1 {
                    self.atom(out, &atoms[0], depth);
                } else if atoms.is_empty() {
                    out.push_str(&format!("(empty {})", self.ty(&e.ty)));
                } else {
                    out.push_str(&format!("(array {}", dims(shape)));
                    for a in atoms {
                        out.push(' ');
                        self.atom(out, a, depth + 1);
                    }
                    out.push(')');
                }
            }
            Kind::Frame { shape, elems } => {
                if elems.is_empty() {
                    out.push_str(&format!("(empty {})", self.ty(&e.ty)));
                    return;
                }
                out.push_str(&format!("(frame {}", dims(shape)));
                for x in elems {
                    out.push(' ');
                    self.expr(out, x, depth + 1);
                }
                out.push(')');
            }
            Kind::Var(v) => out.push_str(&self.var(*v)),
            Kind::Prim(name) => out.push_str(name),
            Kind::App { func, args } => {
                out.push('(');
                self.expr(out, func, depth + 1);
                for a in args {
                    out.push(' ');
                    self.expr(out, a, depth + 1);
                }
                out.push(')');
            }
            Kind::TApp { func, arg } => {
                out.push_str("(t-app ");
                self.expr(out, func, depth + 1);
                out.push(' ');
                out.push_str(&self.ty(&Type::scalar(arg.clone())));
                out.push(')');
            }
            Kind::IApp { func, arg } => {
                out.push_str("(i-app ");
                self.expr(out, func, depth + 1);
                out.push(' ');
                out.push_str(&self.index(arg));
                out.push(')');
            }
            Kind::Map { frame, binds, body } => {
                if frame.is_scalar() {
                    out.push_str("(let (");
                } else {
                    out.push_str(&format!("(map {} (", self.shape(frame)));
                }
                for (i, b) in binds.iter().enumerate() {
                    if i > 0 {
                        Self::newline(out, depth + 3);
                    }
                    out.push_str(&format!("({} {} ", self.var(b.var), self.ty(&b.ty)));
                    self.expr(out, &b.value, depth + 3);
                    out.push(')');
                }
                out.push(')');
                Self::newline(out, depth + 1);
                self.expr(out, body, depth + 1);
                out.push(')');
            }
            Kind::Unbox {
                binder,
                var,
                var_ty,
                boxed,
                body,
                ..
            } => {
                out.push_str(&format!(
                    "(unbox ({} {} {} ",
                    self.ivar(*binder),
                    self.var(*var),
                    self.ty(var_ty)
                ));
                self.expr(out, boxed, depth + 2);
                out.push(')');
                Self::newline(out, depth + 1);
                self.expr(out, body, depth + 1);
                out.push(')');
            }
            Kind::Record(fields) => {
                out.push('{');
                for (i, (name, x)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    out.push_str(&format!("({name} "));
                    self.expr(out, x, depth + 1);
                    out.push(')');
                }
                out.push('}');
            }
            Kind::Field { record, field } => {
                out.push_str("(field ");
                self.expr(out, record, depth + 1);
                out.push_str(&format!(" {field})"));
            }
            Kind::If {
                cond,
                then,
                otherwise,
            } => {
                out.push_str("(if ");
                self.expr(out, cond, depth + 1);
                Self::newline(out, depth + 1);
                self.expr(out, then, depth + 1);
                Self::newline(out, depth + 1);
                self.expr(out, otherwise, depth + 1);
                out.push(')');
            }
        }
    }

    fn atom(&self, out: &mut String, a: &Atom, depth: usize) {
        match a {
            Atom::Bool(b) => out.push_str(if *b { "#t" } else { "#f" }),
            Atom::Int(n) => out.push_str(&n.to_string()),
            Atom::Float(x) => out.push_str(&remora_syntax::float::format_float(*x)),
            Atom::Lambda {
                param,
                param_ty,
                body,
            } => {
                out.push_str(&format!("(λ (({} {}))", self.var(*param), self.ty(param_ty)));
                Self::newline(out, depth + 1);
                self.expr(out, body, depth + 1);
                out.push(')');
            }
            Atom::TLambda { param, body } => {
                out.push_str(&format!("(tλ ({}) ", self.names.tvar(*param)));
                self.expr(out, body, depth + 1);
                out.push(')');
            }
            Atom::ILambda { param, body } => {
                out.push_str(&format!("(iλ ({}) ", self.ivar(*param)));
                self.expr(out, body, depth + 1);
                out.push(')');
            }
            Atom::Box { witness, body } => {
                out.push_str(&format!("(box {} ", self.index(witness)));
                self.expr(out, body, depth + 1);
                out.push(')');
            }
        }
    }
}

impl Expr {
    /// The function this expression instantiates: itself with its type and
    /// index arguments (`TApp`, `IApp`) peeled off, the head of an
    /// instantiation chain (an intrinsic, a variable, a polymorphic lambda).
    pub fn instantiated(&self) -> &Expr {
        let mut head = self;
        while let Kind::TApp { func, .. } | Kind::IApp { func, .. } = &head.kind {
            head = func;
        }
        head
    }

    /// This node with every expression directly inside it (atoms' bodies,
    /// a map's arrays and body included) replaced by `f` of it, and nothing
    /// else changed: the one walk every pass that rebuilds a tree builds
    /// on.
    pub fn try_map_children<E>(&self, f: &mut dyn FnMut(&Expr) -> Result<Expr, E>) -> Result<Expr, E> {
        let kind = match &self.kind {
            Kind::Array { shape, atoms } => Kind::Array {
                shape: shape.clone(),
                atoms: atoms
                    .iter()
                    .map(|a| {
                        Ok(match a {
                            Atom::Bool(_) | Atom::Int(_) | Atom::Float(_) => a.clone(),
                            Atom::Lambda {
                                param,
                                param_ty,
                                body,
                            } => Atom::Lambda {
                                param: *param,
                                param_ty: param_ty.clone(),
                                body: Box::new(f(body)?),
                            },
                            Atom::TLambda { param, body } => Atom::TLambda {
                                param: *param,
                                body: Box::new(f(body)?),
                            },
                            Atom::ILambda { param, body } => Atom::ILambda {
                                param: *param,
                                body: Box::new(f(body)?),
                            },
                            Atom::Box { witness, body } => Atom::Box {
                                witness: witness.clone(),
                                body: Box::new(f(body)?),
                            },
                        })
                    })
                    .collect::<Result<_, E>>()?,
            },
            Kind::Frame { shape, elems } => Kind::Frame {
                shape: shape.clone(),
                elems: elems.iter().map(&mut *f).collect::<Result<_, E>>()?,
            },
            Kind::Var(_) | Kind::Prim(_) => self.kind.clone(),
            Kind::App { func, args } => Kind::App {
                func: Box::new(f(func)?),
                args: args.iter().map(&mut *f).collect::<Result<_, E>>()?,
            },
            Kind::TApp { func, arg } => Kind::TApp {
                func: Box::new(f(func)?),
                arg: arg.clone(),
            },
            Kind::IApp { func, arg } => Kind::IApp {
                func: Box::new(f(func)?),
                arg: arg.clone(),
            },
            Kind::Map { frame, binds, body } => Kind::Map {
                frame: frame.clone(),
                binds: binds
                    .iter()
                    .map(|b| {
                        Ok(Bind {
                            var: b.var,
                            ty: b.ty.clone(),
                            value: f(&b.value)?,
                        })
                    })
                    .collect::<Result<_, E>>()?,
                body: Box::new(f(body)?),
            },
            Kind::Unbox {
                witness,
                binder,
                var,
                var_ty,
                boxed: b,
                body,
            } => Kind::Unbox {
                witness: *witness,
                binder: *binder,
                var: *var,
                var_ty: var_ty.clone(),
                boxed: Box::new(f(b)?),
                body: Box::new(f(body)?),
            },
            Kind::Record(fields) => Kind::Record(
                fields
                    .iter()
                    .map(|(n, x)| Ok((n.clone(), f(x)?)))
                    .collect::<Result<_, E>>()?,
            ),
            Kind::Field { record, field } => Kind::Field {
                record: Box::new(f(record)?),
                field: field.clone(),
            },
            Kind::If {
                cond,
                then,
                otherwise,
            } => Kind::If {
                cond: Box::new(f(cond)?),
                then: Box::new(f(then)?),
                otherwise: Box::new(f(otherwise)?),
            },
        };
        Ok(Expr {
            kind,
            ty: self.ty.clone(),
        })
    }

    /// [`Expr::try_map_children`] with a function that cannot fail.
    pub fn map_children(&self, f: &mut dyn FnMut(&Expr) -> Expr) -> Expr {
        match self.try_map_children::<std::convert::Infallible>(&mut |x| Ok(f(x))) {
            Ok(e) => e,
            Err(never) => match never {},
        }
    }

    /// Every node of the tree, this one first (depth first, in order),
    /// given to `f`; iterative, so that deep trees cost no stack.
    pub fn each(&self, f: &mut dyn FnMut(&Expr)) {
        let mut stack = vec![self];
        while let Some(e) = stack.pop() {
            f(e);
            let mark = stack.len();
            match &e.kind {
                Kind::Array { atoms, .. } => {
                    for a in atoms {
                        match a {
                            Atom::Lambda { body, .. }
                            | Atom::TLambda { body, .. }
                            | Atom::ILambda { body, .. }
                            | Atom::Box { body, .. } => stack.push(body),
                            Atom::Bool(_) | Atom::Int(_) | Atom::Float(_) => {}
                        }
                    }
                }
                Kind::Frame { elems, .. } => stack.extend(elems),
                Kind::Var(_) | Kind::Prim(_) => {}
                Kind::App { func, args } => {
                    stack.push(func);
                    stack.extend(args);
                }
                Kind::TApp { func, .. } | Kind::IApp { func, .. } => stack.push(func),
                Kind::Map { binds, body, .. } => {
                    stack.extend(binds.iter().map(|b| &b.value));
                    stack.push(body);
                }
                Kind::Unbox { boxed, body, .. } => {
                    stack.push(boxed);
                    stack.push(body);
                }
                Kind::Record(fields) => stack.extend(fields.iter().map(|(_, x)| x)),
                Kind::Field { record, .. } => stack.push(record),
                Kind::If {
                    cond,
                    then,
                    otherwise,
                } => {
                    stack.push(cond);
                    stack.push(then);
                    stack.push(otherwise);
                }
            }
            // Children in order: the first pushed is taken first.
            stack[mark..].reverse();
        }
    }
}

/// A literal's shape as written: `[2 3]`.
fn dims(shape: &[u64]) -> String {
    let inner: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", inner.join(" "))
}

// ---------------------------------------------------------------------------
// Verifying

/// Checks the rules of this level (the module comment) on every node: each
/// map's bound arrays have its frame, each variable its binder's type, each
/// application argument cells of exactly its parameters' types, each node
/// the type its parts give it. The first broken rule, said in words.
pub fn verify(p: &Program) -> Result<(), String> {
    let mut v = Verifier::default();
    for d in &p.decls {
        match d {
            Decl::Def { var, value, .. } => {
                v.expr(value)?;
                v.vars.insert(*var, value.ty.clone());
            }
            Decl::Expr(e) => v.expr(e)?,
        }
    }
    Ok(())
}

#[derive(Default)]
struct Verifier {
    vars: HashMap<VarId, Type>,
}

/// Whether two types are the same for every valuation of their variables.
fn same(a: &Type, b: &Type) -> bool {
    a.equals(b) == Truth::Yes
}

impl Verifier {
    fn bind(&mut self, var: VarId, ty: &Type) {
        self.vars.insert(var, ty.clone());
    }

    fn expr(&mut self, e: &Expr) -> Result<(), String> {
        let wrong = |what: String| Err(format!("{what} (in a node of type {:?})", e.ty));
        match &e.kind {
            Kind::Array { atoms, .. } => {
                for a in atoms {
                    self.atom(a)?;
                }
            }
            Kind::Frame { elems, .. } => {
                for x in elems {
                    self.expr(x)?;
                }
                if let Some(first) = elems.first()
                    && elems.iter().any(|x| !same(&x.ty, &first.ty))
                {
                    return wrong("the elements of a frame differ in type".into());
                }
            }
            Kind::Var(v) => match self.vars.get(v) {
                Some(t) if same(t, &e.ty) => {}
                Some(t) => return wrong(format!("variable {} of type {t:?} used at another type", v.0)),
                None => return wrong(format!("variable {} is not bound", v.0)),
            },
            Kind::Prim(_) => {}
            Kind::App { func, args } => {
                self.expr(func)?;
                let mut f = func.ty.clone();
                for (k, a) in args.iter().enumerate() {
                    self.expr(a)?;
                    let TyAtom::Arrow(param, result) = &f.atom else {
                        return wrong(format!("argument {} given to a non-function", k + 1));
                    };
                    if !f.shape.is_scalar() {
                        return wrong("an application of an array of functions (no map around it)".into());
                    }
                    if !same(param, &a.ty) {
                        return wrong(format!(
                            "argument {} of type {:?} where the parameter is {param:?} (a lift without a map)",
                            k + 1,
                            a.ty
                        ));
                    }
                    f = (**result).clone();
                }
                if !same(&f, &e.ty) {
                    return wrong(format!("an application whose result is of type {f:?}"));
                }
            }
            Kind::TApp { func, .. } | Kind::IApp { func, .. } => self.expr(func)?,
            Kind::Map { frame, binds, body } => {
                for b in binds {
                    self.expr(&b.value)?;
                    // A `let`'s bindings are in sequence: each is seen by
                    // the ones after it.
                    if frame.is_scalar() {
                        self.bind(b.var, &b.ty);
                    }
                    match b.value.ty.shape.strip_prefix(frame) {
                        Ok(cell) if same(&Type::array(b.value.ty.atom.clone(), cell.clone()), &b.ty) => {}
                        _ => {
                            return wrong(format!(
                                "map binds variable {} of type {:?} to an array of type {:?}, not of its frame",
                                b.var.0, b.ty, b.value.ty
                            ));
                        }
                    }
                }
                for b in binds {
                    self.bind(b.var, &b.ty);
                }
                self.expr(body)?;
                if !same(&body.ty.lift(frame), &e.ty) {
                    return wrong(format!("a map whose body is of type {:?}", body.ty));
                }
            }
            Kind::Unbox {
                var,
                var_ty,
                boxed,
                body,
                ..
            } => {
                self.expr(boxed)?;
                if !matches!(boxed.ty.atom, TyAtom::Sigma(..)) {
                    return wrong("unbox of something that is not a box".into());
                }
                if !boxed.ty.shape.is_scalar() {
                    return wrong("unbox of an array of boxes (no map around it)".into());
                }
                self.bind(*var, var_ty);
                self.expr(body)?;
            }
            Kind::Record(fields) => {
                for (_, x) in fields {
                    self.expr(x)?;
                }
                if !e.ty.shape.is_scalar() {
                    return wrong("a record over a frame (no map around it)".into());
                }
            }
            Kind::Field { record, .. } => {
                self.expr(record)?;
                if !record.ty.shape.is_scalar() {
                    return wrong("a field of an array of records (no map around it)".into());
                }
            }
            Kind::If {
                cond,
                then,
                otherwise,
            } => {
                self.expr(cond)?;
                self.expr(then)?;
                self.expr(otherwise)?;
                if !matches!(cond.ty.atom, TyAtom::Bool) || !cond.ty.shape.is_scalar() {
                    return wrong("an `if` whose condition is not one Bool".into());
                }
            }
        }
        Ok(())
    }

    fn atom(&mut self, a: &Atom) -> Result<(), String> {
        match a {
            Atom::Bool(_) | Atom::Int(_) | Atom::Float(_) => Ok(()),
            Atom::Lambda {
                param,
                param_ty,
                body,
            } => {
                self.bind(*param, param_ty);
                self.expr(body)
            }
            Atom::TLambda { body, .. } | Atom::ILambda { body, .. } | Atom::Box { body, .. } => {
                self.expr(body)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use remora_types::Dim;

    fn int() -> Type {
        Type::scalar(TyAtom::Int)
    }

    fn ints(n: u64) -> Type {
        Type::array(TyAtom::Int, Shape::from_dims([Dim::nat(n)]))
    }

    fn plus() -> Expr {
        Expr {
            kind: Kind::Prim("+"),
            ty: Type::arrow(int(), Type::arrow(int(), int())),
        }
    }

    fn vector(n: u64) -> Expr {
        Expr {
            kind: Kind::Array {
                shape: vec![n],
                atoms: (0..n).map(|i| Atom::Int(i as i64)).collect(),
            },
            ty: ints(n),
        }
    }

    fn var(v: u32, ty: Type) -> Expr {
        Expr {
            kind: Kind::Var(VarId(v)),
            ty,
        }
    }

    fn app(func: Expr, args: Vec<Expr>, ty: Type) -> Expr {
        Expr {
            kind: Kind::App {
                func: Box::new(func),
                args,
            },
            ty,
        }
    }

    fn program(e: Expr) -> Program {
        Program {
            decls: vec![Decl::Expr(e)],
            var_names: vec!["x".into()],
        }
    }

    /// `(map [3] ((x Int v)) (+ x x))` with the map's bound variable of
    /// type `bound`.
    fn doubled(bound: Type) -> Expr {
        Expr {
            kind: Kind::Map {
                frame: Shape::from_dims([Dim::nat(3)]),
                binds: vec![Bind {
                    var: VarId(0),
                    ty: bound,
                    value: vector(3),
                }],
                body: Box::new(app(plus(), vec![var(0, int()), var(0, int())], int())),
            },
            ty: ints(3),
        }
    }

    #[test]
    fn a_map_over_the_frame_verifies() {
        assert_eq!(verify(&program(doubled(int()))), Ok(()));
    }

    #[test]
    fn a_lift_without_a_map_is_caught() {
        let lifted = app(plus(), vec![vector(3), vector(3)], ints(3));
        let err = verify(&program(lifted)).err().unwrap_or_default();
        assert!(err.contains("a lift without a map"), "{err}");
    }

    #[test]
    fn a_bound_cell_of_the_wrong_type_is_caught() {
        let err = verify(&program(doubled(ints(3)))).err().unwrap_or_default();
        assert!(err.contains("not of its frame"), "{err}");
    }

    #[test]
    fn an_unbound_variable_is_caught() {
        let err = verify(&program(var(7, int()))).err().unwrap_or_default();
        assert!(err.contains("not bound"), "{err}");
    }
}

/// A copy of `e` with every variable it binds renamed (new names pushed
/// on `names`), so that two copies of one definition (two instances, two
/// inlined calls) share no variable.
pub fn freshen(e: &Expr, names: &mut Vec<String>) -> Expr {
    Freshen::default().expr(e, names)
}

#[derive(Default)]
struct Freshen {
    renamed: HashMap<VarId, VarId>,
}

impl Freshen {
    fn bind(&mut self, v: VarId, names: &mut Vec<String>) -> VarId {
        let name = names.get(v.0 as usize).cloned().unwrap_or_else(|| "v".into());
        let new = VarId(names.len() as u32);
        names.push(name);
        self.renamed.insert(v, new);
        new
    }

    fn expr(&mut self, e: &Expr, names: &mut Vec<String>) -> Expr {
        let kind = match &e.kind {
            Kind::Array { shape, atoms } => Kind::Array {
                shape: shape.clone(),
                atoms: atoms.iter().map(|a| self.atom(a, names)).collect(),
            },
            Kind::Frame { shape, elems } => Kind::Frame {
                shape: shape.clone(),
                elems: elems.iter().map(|x| self.expr(x, names)).collect(),
            },
            Kind::Var(v) => Kind::Var(self.renamed.get(v).copied().unwrap_or(*v)),
            Kind::Prim(_) => e.kind.clone(),
            Kind::App { func, args } => Kind::App {
                func: Box::new(self.expr(func, names)),
                args: args.iter().map(|a| self.expr(a, names)).collect(),
            },
            Kind::TApp { func, arg } => Kind::TApp {
                func: Box::new(self.expr(func, names)),
                arg: arg.clone(),
            },
            Kind::IApp { func, arg } => Kind::IApp {
                func: Box::new(self.expr(func, names)),
                arg: arg.clone(),
            },
            Kind::Map { frame, binds, body } => {
                // A map's arrays are outside its scope, its variables
                // inside; a `let`'s bindings are in sequence.
                let mut renamed = Vec::with_capacity(binds.len());
                if frame.is_scalar() {
                    for b in binds {
                        let value = self.expr(&b.value, names);
                        renamed.push(Bind {
                            var: self.bind(b.var, names),
                            ty: b.ty.clone(),
                            value,
                        });
                    }
                } else {
                    let values: Vec<Expr> = binds.iter().map(|b| self.expr(&b.value, names)).collect();
                    for (b, value) in binds.iter().zip(values) {
                        renamed.push(Bind {
                            var: self.bind(b.var, names),
                            ty: b.ty.clone(),
                            value,
                        });
                    }
                }
                let binds = renamed;
                Kind::Map {
                    frame: frame.clone(),
                    binds,
                    body: Box::new(self.expr(body, names)),
                }
            }
            Kind::Unbox {
                witness,
                binder,
                var,
                var_ty,
                boxed,
                body,
            } => {
                let boxed = self.expr(boxed, names);
                let var = self.bind(*var, names);
                Kind::Unbox {
                    witness: *witness,
                    binder: *binder,
                    var,
                    var_ty: var_ty.clone(),
                    boxed: Box::new(boxed),
                    body: Box::new(self.expr(body, names)),
                }
            }
            Kind::Record(fields) => Kind::Record(
                fields
                    .iter()
                    .map(|(n, x)| (n.clone(), self.expr(x, names)))
                    .collect(),
            ),
            Kind::Field { record, field } => Kind::Field {
                record: Box::new(self.expr(record, names)),
                field: field.clone(),
            },
            Kind::If {
                cond,
                then,
                otherwise,
            } => Kind::If {
                cond: Box::new(self.expr(cond, names)),
                then: Box::new(self.expr(then, names)),
                otherwise: Box::new(self.expr(otherwise, names)),
            },
        };
        Expr {
            kind,
            ty: e.ty.clone(),
        }
    }

    fn atom(&mut self, a: &Atom, names: &mut Vec<String>) -> Atom {
        match a {
            Atom::Bool(_) | Atom::Int(_) | Atom::Float(_) => a.clone(),
            Atom::Lambda {
                param,
                param_ty,
                body,
            } => {
                let param = self.bind(*param, names);
                Atom::Lambda {
                    param,
                    param_ty: param_ty.clone(),
                    body: Box::new(self.expr(body, names)),
                }
            }
            Atom::TLambda { param, body } => Atom::TLambda {
                param: *param,
                body: Box::new(self.expr(body, names)),
            },
            Atom::ILambda { param, body } => Atom::ILambda {
                param: *param,
                body: Box::new(self.expr(body, names)),
            },
            Atom::Box { witness, body } => Atom::Box {
                witness: witness.clone(),
                body: Box::new(self.expr(body, names)),
            },
        }
    }
}

//! Types (core.md §3): every type is an array type — an atom type and a
//! shape — with the atom types base types, type variables, functions
//! between array types, `∀` over atom types, `Π` and `Σ` over indices,
//! and records. A scalar type has the shape `[]`.
//!
//! Binders are assumed distinct (the checker gives every bound variable a
//! fresh number), so substitution needs no renaming and equality of
//! binders is equality after substituting one bound variable for the other.

use crate::Truth;
use crate::dim::{DVar, Dim};
use crate::shape::{SVar, Seg, Shape};
use std::collections::HashMap;
use std::sync::Arc;

/// An atom type variable (`&t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TVar(pub u32);

/// An index variable: a dimension or a shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IVar {
    Dim(DVar),
    Shape(SVar),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Atom {
    Int,
    Bool,
    Float,
    Var(TVar),
    /// `(-> P R)`: one parameter, both array types.
    Arrow(Arc<Type>, Arc<Type>),
    Forall(TVar, Arc<Type>),
    Pi(IVar, Arc<Type>),
    Sigma(IVar, Arc<Type>),
    /// `{(x T) …}`, fields in written order.
    Record(Arc<Vec<(String, Type)>>),
}

/// An array type: atoms of one atom type, in a shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Type {
    pub atom: Atom,
    pub shape: Shape,
}

/// A value for an index variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Index {
    Dim(Dim),
    Shape(Shape),
}

/// Names for printing variables.
pub trait Names {
    fn tvar(&self, v: TVar) -> String;
    fn dvar(&self, v: DVar) -> String;
    fn svar(&self, v: SVar) -> String;
}

/// Numbered names: `&t0`, `$d1`, `@s2`.
pub struct Numbered;

impl Names for Numbered {
    fn tvar(&self, v: TVar) -> String {
        format!("&t{}", v.0)
    }
    fn dvar(&self, v: DVar) -> String {
        format!("$d{}", v.0)
    }
    fn svar(&self, v: SVar) -> String {
        format!("@s{}", v.0)
    }
}

impl Type {
    pub fn scalar(atom: Atom) -> Type {
        Type {
            atom,
            shape: Shape::scalar(),
        }
    }

    pub fn array(atom: Atom, shape: Shape) -> Type {
        Type { atom, shape }
    }

    /// `[T s]` of a type `T` that may itself be an array: frames nest outer
    /// first (`[[Int 2] 3]` is `[Int 3 2]`).
    pub fn lift(&self, frame: &Shape) -> Type {
        Type {
            atom: self.atom.clone(),
            shape: frame.concat(&self.shape),
        }
    }

    pub fn arrow(param: Type, result: Type) -> Type {
        Type::scalar(Atom::Arrow(
            std::sync::Arc::new(param),
            std::sync::Arc::new(result),
        ))
    }

    /// Substitutes an atom type for a type variable (`t-app`). An atom type
    /// `A` replaces `&t` inside `[&t s]`, keeping `s`.
    pub fn subst_type(&self, v: TVar, by: &Atom) -> Type {
        let atom = match &self.atom {
            Atom::Var(w) if *w == v => by.clone(),
            a => a.map_types(&|t| t.subst_type(v, by)),
        };
        Type {
            atom,
            shape: self.shape.clone(),
        }
    }

    /// Substitutes an index for an index variable (`i-app`).
    pub fn subst_index(&self, v: IVar, by: &Index) -> Type {
        let fd = |d: DVar| match (v, by) {
            (IVar::Dim(w), Index::Dim(x)) if w == d => Some(x.clone()),
            _ => None,
        };
        let fs = |s: SVar| match (v, by) {
            (IVar::Shape(w), Index::Shape(x)) if w == s => Some(x.clone()),
            _ => None,
        };
        Type {
            atom: self.atom.map_types(&|t| t.subst_index(v, by)),
            shape: self.shape.subst(&fd, &fs),
        }
    }

    /// Whether an index variable occurs in the type.
    pub fn mentions(&self, v: IVar) -> bool {
        let in_shape = self.shape.segs().iter().any(|seg| match (seg, v) {
            (Seg::Dim(d), IVar::Dim(x)) => d.vars().contains(&x),
            (Seg::Var(s), IVar::Shape(x)) => *s == x,
            _ => false,
        });
        in_shape
            || match &self.atom {
                Atom::Int | Atom::Bool | Atom::Float | Atom::Var(_) => false,
                Atom::Arrow(p, r) => p.mentions(v) || r.mentions(v),
                Atom::Forall(_, b) | Atom::Pi(_, b) | Atom::Sigma(_, b) => b.mentions(v),
                Atom::Record(fields) => fields.iter().any(|(_, t)| t.mentions(v)),
            }
    }

    /// Is `self = other` for every valuation, up to renaming of binders?
    pub fn equals(&self, other: &Type) -> Truth {
        self.equals_in(other, &mut Renaming::default())
    }

    /// [`Type::equals`] under binders: `other`'s bound variables read as
    /// `self`'s (`r`), renamed where they are compared (in shapes and atom
    /// variables) instead of substituted into `other` at every binder,
    /// which was quadratic in the nesting of binders (a box in a box …).
    fn equals_in(&self, other: &Type, r: &mut Renaming) -> Truth {
        let atoms = self.atom.equals_in(&other.atom, r);
        let shapes = if r.is_empty() {
            self.shape.equals(&other.shape)
        } else {
            self.shape.equals(
                &other
                    .shape
                    .subst(&|d| r.dims.get(&d).map(|&v| Dim::var(v)), &|s| {
                        r.shapes.get(&s).map(|&v| Shape::var(v))
                    }),
            )
        };
        atoms.and(shapes)
    }

    /// The type in remora-lang's bracket notation, one binder and one
    /// parameter at a time: `Int`, `[Int 3 1]`,
    /// `(∀ &t (Π $m (Π $n (-> [&t $m] (-> [&t $n] Int)))))`. What `remora
    /// check`, `remora elaborate` and `type { … }` expectations use.
    pub fn write(&self, out: &mut String, names: &dyn Names) {
        self.write_as(out, names, Form::Curried);
    }

    pub fn show(&self, names: &dyn Names) -> String {
        let mut s = String::new();
        self.write(&mut s, names);
        s
    }

    /// The type as the documentation writes it (docs/prelude.md, "Reading
    /// the types"): binders of one kind in a row in one list, and a
    /// curried function as one arrow of its parameters,
    /// `(∀ (&t) (Π ($m $n) (-> ([&t $m] [&t $n]) Int)))`. What error
    /// messages and the REPL's `:type` use. It reads back as the same type.
    pub fn write_grouped(&self, out: &mut String, names: &dyn Names) {
        self.write_as(out, names, Form::Grouped);
    }

    pub fn show_grouped(&self, names: &dyn Names) -> String {
        let mut s = String::new();
        self.write_grouped(&mut s, names);
        s
    }

    fn write_as(&self, out: &mut String, names: &dyn Names, form: Form) {
        if self.shape.is_scalar() {
            self.atom.write_as(out, names, form);
            return;
        }
        out.push('[');
        self.atom.write_as(out, names, form);
        out.push(' ');
        self.shape.write_segs(out, &|v| names.dvar(v), &|v| names.svar(v));
        out.push(']');
    }
}

/// How binders and arrows are written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// One binder, one parameter at a time (remora-lang's printing).
    Curried,
    /// Binders of one kind in a row in one list; a curried function's
    /// parameters in one list (the documentation's).
    Grouped,
}

impl Atom {
    /// The atom with every type directly inside it mapped (a variable is
    /// left as it is: substitutions handle it first).
    pub fn map_types(&self, f: &dyn Fn(&Type) -> Type) -> Atom {
        match self {
            Atom::Int | Atom::Bool | Atom::Float | Atom::Var(_) => self.clone(),
            Atom::Arrow(p, r) => Atom::Arrow(std::sync::Arc::new(f(p)), std::sync::Arc::new(f(r))),
            Atom::Forall(v, b) => Atom::Forall(*v, std::sync::Arc::new(f(b))),
            Atom::Pi(v, b) => Atom::Pi(*v, std::sync::Arc::new(f(b))),
            Atom::Sigma(v, b) => Atom::Sigma(*v, std::sync::Arc::new(f(b))),
            Atom::Record(fields) => {
                Atom::Record(Arc::new(fields.iter().map(|(n, t)| (n.clone(), f(t))).collect()))
            }
        }
    }

    pub fn equals(&self, other: &Atom) -> Truth {
        self.equals_in(other, &mut Renaming::default())
    }

    fn equals_in(&self, other: &Atom, r: &mut Renaming) -> Truth {
        match (self, other) {
            (Atom::Int, Atom::Int) | (Atom::Bool, Atom::Bool) | (Atom::Float, Atom::Float) => Truth::Yes,
            (Atom::Var(a), Atom::Var(b)) if *a == r.types.get(b).copied().unwrap_or(*b) => Truth::Yes,
            (Atom::Arrow(p1, r1), Atom::Arrow(p2, r2)) => p1.equals_in(p2, r).and(r1.equals_in(r2, r)),
            (Atom::Forall(v1, b1), Atom::Forall(v2, b2)) => {
                let kept = r.types.insert(*v2, *v1);
                let t = b1.equals_in(b2, r);
                restore(&mut r.types, *v2, kept);
                t
            }
            (Atom::Pi(v1, b1), Atom::Pi(v2, b2)) | (Atom::Sigma(v1, b1), Atom::Sigma(v2, b2)) => {
                match (*v1, *v2) {
                    (IVar::Dim(d1), IVar::Dim(d2)) => {
                        let kept = r.dims.insert(d2, d1);
                        let t = b1.equals_in(b2, r);
                        restore(&mut r.dims, d2, kept);
                        t
                    }
                    (IVar::Shape(s1), IVar::Shape(s2)) => {
                        let kept = r.shapes.insert(s2, s1);
                        let t = b1.equals_in(b2, r);
                        restore(&mut r.shapes, s2, kept);
                        t
                    }
                    _ => Truth::No,
                }
            }
            (Atom::Record(f1), Atom::Record(f2)) if f1.len() == f2.len() => {
                f1.iter()
                    .zip(f2.iter())
                    .fold(Truth::Yes, |t, ((n1, t1), (n2, t2))| {
                        if n1 != n2 {
                            Truth::No
                        } else {
                            t.and(t1.equals_in(t2, r))
                        }
                    })
            }
            // Two different variables may be instantiated alike.
            (Atom::Var(_), _) | (_, Atom::Var(_)) => Truth::Unknown,
            _ => Truth::No,
        }
    }

    pub fn write(&self, out: &mut String, names: &dyn Names) {
        self.write_as(out, names, Form::Curried);
    }

    fn write_as(&self, out: &mut String, names: &dyn Names, form: Form) {
        match self {
            Atom::Int => out.push_str("Int"),
            Atom::Bool => out.push_str("Bool"),
            Atom::Float => out.push_str("Float"),
            Atom::Var(v) => out.push_str(&names.tvar(*v)),
            Atom::Arrow(p, r) if form == Form::Grouped => {
                // The parameters of a curried function, while its result
                // is one scalar function after another.
                let mut params = vec![&**p];
                let mut result = &**r;
                while result.shape.is_scalar()
                    && let Atom::Arrow(p, r) = &result.atom
                {
                    params.push(&**p);
                    result = &**r;
                }
                out.push_str("(-> ");
                if let [one] = params.as_slice() {
                    one.write_as(out, names, form);
                } else {
                    out.push('(');
                    for (i, p) in params.iter().enumerate() {
                        if i > 0 {
                            out.push(' ');
                        }
                        p.write_as(out, names, form);
                    }
                    out.push(')');
                }
                out.push(' ');
                result.write_as(out, names, form);
                out.push(')');
            }
            Atom::Arrow(p, r) => {
                out.push_str("(-> ");
                p.write_as(out, names, form);
                out.push(' ');
                r.write_as(out, names, form);
                out.push(')');
            }
            Atom::Forall(v, b) if form == Form::Grouped => grouped(out, "∀", names.tvar(*v), b, names),
            Atom::Pi(v, b) if form == Form::Grouped => grouped(out, "Π", ivar_name(*v, names), b, names),
            Atom::Sigma(v, b) if form == Form::Grouped => grouped(out, "Σ", ivar_name(*v, names), b, names),
            Atom::Forall(v, b) => binder(out, "∀", &names.tvar(*v), b, names),
            Atom::Pi(v, b) => binder(out, "Π", &ivar_name(*v, names), b, names),
            Atom::Sigma(v, b) => binder(out, "Σ", &ivar_name(*v, names), b, names),
            Atom::Record(fields) => {
                out.push('{');
                for (i, (n, t)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    out.push('(');
                    out.push_str(n);
                    out.push(' ');
                    t.write_as(out, names, form);
                    out.push(')');
                }
                out.push('}');
            }
        }
    }
}

/// `(q (v w …) T)`: the binder `v` and those of the same quantifier `q`
/// directly inside it (each binding a scalar), then their body.
fn grouped(out: &mut String, q: &str, v: String, body: &Type, names: &dyn Names) {
    let mut binders = vec![v];
    let mut body = body;
    while body.shape.is_scalar() {
        let (inner_q, w, inner) = match &body.atom {
            Atom::Forall(w, b) => ("∀", names.tvar(*w), b),
            Atom::Pi(w, b) => ("Π", ivar_name(*w, names), b),
            Atom::Sigma(w, b) => ("Σ", ivar_name(*w, names), b),
            _ => break,
        };
        if inner_q != q {
            break;
        }
        binders.push(w);
        body = inner;
    }
    out.push('(');
    out.push_str(q);
    out.push_str(" (");
    out.push_str(&binders.join(" "));
    out.push_str(") ");
    body.write_as(out, names, Form::Grouped);
    out.push(')');
}

fn binder(out: &mut String, q: &str, v: &str, body: &Type, names: &dyn Names) {
    out.push('(');
    out.push_str(q);
    out.push(' ');
    out.push_str(v);
    out.push(' ');
    body.write(out, names);
    out.push(')');
}

pub fn ivar_name(v: IVar, names: &dyn Names) -> String {
    match v {
        IVar::Dim(d) => names.dvar(d),
        IVar::Shape(s) => names.svar(s),
    }
}

/// The bound variables of the right-hand type of a comparison, by the
/// left-hand type's binders they stand for.
#[derive(Default)]
struct Renaming {
    types: HashMap<TVar, TVar>,
    dims: HashMap<DVar, DVar>,
    shapes: HashMap<SVar, SVar>,
}

impl Renaming {
    fn is_empty(&self) -> bool {
        self.types.is_empty() && self.dims.is_empty() && self.shapes.is_empty()
    }
}

/// `v`'s renaming as it was before a binder's (none, or an outer one of
/// the same variable).
fn restore<V: std::hash::Hash + Eq>(map: &mut HashMap<V, V>, v: V, kept: Option<V>) {
    match kept {
        Some(k) => map.insert(v, k),
        None => map.remove(&v),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `head : (∀ (&t) (Π ($d @s) (-> [&t (+ 1 $d) @s] [&t @s])))`
    fn head_type() -> Type {
        let (t, d, s) = (TVar(0), DVar(1), SVar(2));
        let arg = Type::array(
            Atom::Var(t),
            Shape::from_segs(vec![Seg::Dim(Dim::nat(1).add(&Dim::var(d))), Seg::Var(s)]),
        );
        let res = Type::array(Atom::Var(t), Shape::var(s));
        let body = Type::scalar(Atom::Pi(
            IVar::Shape(s),
            std::sync::Arc::new(Type::arrow(arg, res)),
        ));
        Type::scalar(Atom::Forall(
            t,
            std::sync::Arc::new(Type::scalar(Atom::Pi(IVar::Dim(d), std::sync::Arc::new(body)))),
        ))
    }

    #[test]
    fn prints_like_remora_lang() {
        assert_eq!(
            head_type().show(&Numbered),
            "(∀ &t0 (Π $d1 (Π @s2 (-> [&t0 (+ 1 $d1) @s2] [&t0 @s2]))))"
        );
    }

    #[test]
    fn prints_as_the_documentation_writes() {
        assert_eq!(
            head_type().show_grouped(&Numbered),
            "(∀ (&t0) (Π ($d1 @s2) (-> [&t0 (+ 1 $d1) @s2] [&t0 @s2])))"
        );
        // A curried function of two parameters, one of them a function:
        // one arrow, its parameters in a list.
        let int = || Type::scalar(Atom::Int);
        let op = Type::arrow(int(), Type::arrow(int(), int()));
        let vector = Type::array(Atom::Int, Shape::from_dims([Dim::nat(3)]));
        let reduce = Type::arrow(op.clone(), Type::arrow(vector.clone(), int()));
        assert_eq!(
            reduce.show_grouped(&Numbered),
            "(-> ((-> (Int Int) Int) [Int 3]) Int)"
        );
        assert_eq!(
            reduce.show(&Numbered),
            "(-> (-> Int (-> Int Int)) (-> [Int 3] Int))"
        );
        // A function whose result is an array of functions keeps it.
        let frame = Type::arrow(int(), op.lift(&Shape::from_dims([Dim::nat(2)])));
        assert_eq!(frame.show_grouped(&Numbered), "(-> Int [(-> (Int Int) Int) 2])");
        // Binders of another kind, or binding an array, start a new list.
        let sigma =
            |v: u32, body: Type| Type::scalar(Atom::Sigma(IVar::Dim(DVar(v)), std::sync::Arc::new(body)));
        let boxes = sigma(
            0,
            sigma(
                1,
                Type::array(
                    Atom::Int,
                    Shape::from_dims([Dim::var(DVar(0)), Dim::var(DVar(1))]),
                ),
            ),
        );
        assert_eq!(boxes.show_grouped(&Numbered), "(Σ ($d0 $d1) [Int $d0 $d1])");
        let outer = sigma(0, sigma(1, int()).lift(&Shape::from_dims([Dim::var(DVar(0))])));
        assert_eq!(outer.show_grouped(&Numbered), "(Σ ($d0) [(Σ ($d1) Int) $d0])");
    }

    #[test]
    fn instantiation_substitutes() {
        let Atom::Forall(t, body) = head_type().atom else {
            return;
        };
        let body = body.subst_type(t, &Atom::Int);
        let Atom::Pi(d, body) = body.atom else {
            unreachable!("then a Π over $d")
        };
        let body = body.subst_index(d, &Index::Dim(Dim::nat(2)));
        let Atom::Pi(s, body) = body.atom else {
            unreachable!("then a Π over @s")
        };
        let body = body.subst_index(s, &Index::Shape(Shape::from_dims([Dim::nat(3)])));
        assert_eq!(body.show(&Numbered), "(-> [Int 3 3] [Int 3])");
    }

    #[test]
    fn binders_are_equal_up_to_renaming() {
        let a = Type::scalar(Atom::Forall(
            TVar(0),
            std::sync::Arc::new(Type::array(Atom::Var(TVar(0)), Shape::from_dims([Dim::nat(3)]))),
        ));
        let b = Type::scalar(Atom::Forall(
            TVar(7),
            std::sync::Arc::new(Type::array(Atom::Var(TVar(7)), Shape::from_dims([Dim::nat(3)]))),
        ));
        assert_eq!(a.equals(&b), Truth::Yes);
        assert_eq!(head_type().equals(&head_type()), Truth::Yes);
        let pi_d = Type::scalar(Atom::Pi(
            IVar::Dim(DVar(0)),
            std::sync::Arc::new(Type::scalar(Atom::Int)),
        ));
        let pi_s = Type::scalar(Atom::Pi(
            IVar::Shape(SVar(0)),
            std::sync::Arc::new(Type::scalar(Atom::Int)),
        ));
        assert_eq!(pi_d.equals(&pi_s), Truth::No);
        assert_eq!(
            Type::scalar(Atom::Int).equals(&Type::scalar(Atom::Float)),
            Truth::No
        );
    }
}

//! The desugared tree: core Remora (core.md §1.2) after every desugaring
//! the grammar defines, plus the syntax of our extensions (extensions.md
//! §1.5, §2, §3). This is what the checker reads.
//!
//! What desugaring has already done, so later phases never see it:
//! * applications are unary and curried: `(f a b)` is `((f a) b)`;
//! * `fn`, `t-fn`, `i-fn` bind one parameter each (inner lambdas are scalar
//!   arrays), `*t` type parameters are split into `&t` plus a shape `@t`;
//! * `(@ f tlist ilist args)` is `t-app`/`i-app`/application; a `t-app` of an
//!   array type `[T s]` is `t-app T` then `i-app s`;
//! * `->`, `∀`, `Π`, `Σ` have one binder each; `*t` in a type is `(A &t @t)`;
//!   nested array types are one `(A T s)` with the outer frame first;
//! * `box`/`unbox` carry one witness each;
//! * bracket frames are flattened into `array`/`frame` literals, strings are
//!   Int array literals;
//! * `(fun (@f …))` and `*t` parameters of `t-fun` are layers of
//!   `t-fun`/`i-fun`/`fun`; zero-parameter `fun`/`t-fun`/`i-fun` are `val`;
//!   `(type *t [T s])` is `(type &t T)` plus `(ispace @t s)`;
//! * shapes are splices `[…]` of dims and shapes (`dims` and `++` are
//!   splices too), flattened;
//! * imports are resolved and their declarations spliced in first.
//!
//! Names keep their sigil: `&t` (atom type variable), `$n` (dimension),
//! `@s` (shape). Every node carries its [`Span`]; spans never take part in
//! equality (see [`Span`]).

use crate::span::Span;

/// A name as written, with its sigil, and where.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

impl Ident {
    pub fn new(name: impl Into<String>, span: Span) -> Ident {
        Ident {
            name: name.into(),
            span,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    pub decls: Vec<Decl>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Decl {
    pub kind: DeclKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum DeclKind {
    /// `(def bind)`: in scope for all later declarations.
    Def(Bind),
    /// `(entry (name pat* [: type]) body)`.
    Entry {
        name: Ident,
        params: Vec<Param>,
        ret: Option<Type>,
        body: Expr,
    },
    /// A bare expression after the declarations (script mode, extensions §2).
    Expr(Expr),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// `(array [d …] atom …)`; a scalar when the shape is `[]`.
    Array {
        shape: Vec<u64>,
        atoms: Vec<Atom>,
    },
    /// `(array [d …] T)` with no elements; `T` should be an atom type.
    EmptyArray {
        shape: Vec<u64>,
        elem: Type,
    },
    /// `(frame [d …] e …)`.
    Frame {
        shape: Vec<u64>,
        elems: Vec<Expr>,
    },
    /// `(frame [d …] T)` with no elements.
    EmptyFrame {
        shape: Vec<u64>,
        elem: Type,
    },
    Var(Ident),
    /// Unary application `(f a)`.
    App {
        func: Box<Expr>,
        arg: Box<Expr>,
    },
    /// `(t-app e T)`, one type argument.
    TApp {
        func: Box<Expr>,
        arg: Type,
    },
    /// `(i-app e i)`, one index argument.
    IApp {
        func: Box<Expr>,
        arg: Ispace,
    },
    /// `(unbox (w x boxed) body)`, one witness.
    Unbox {
        witness: IParam,
        var: Ident,
        boxed: Box<Expr>,
        body: Box<Expr>,
    },
    /// `(let (bind …) body)`: sequential, not recursive.
    Let {
        binds: Vec<Bind>,
        body: Box<Expr>,
    },
    /// `{(x cell e) …}`.
    Record(Vec<RecordField>),
    /// `(field e x)`.
    Field {
        record: Box<Expr>,
        field: Ident,
    },
    /// `(if c a b)` (extensions §3).
    If {
        cond: Box<Expr>,
        then: Box<Expr>,
        otherwise: Box<Expr>,
    },
    /// `(rerank (r …) f)` (extensions §2): the η-expansion with rank parameters.
    Rerank {
        ranks: Vec<Rank>,
        func: Box<Expr>,
    },
    /// A form that did not parse; already reported.
    Error,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RecordField {
    pub name: Ident,
    /// The field's cell shape.
    pub cell: Shape,
    pub value: Expr,
}

/// An element of an `array` literal.
#[derive(Clone, Debug, PartialEq)]
pub struct Atom {
    pub kind: AtomKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum AtomKind {
    Bool(bool),
    Int(i64),
    Float(f32),
    // (What a number does not need is boxed: an atom is then a few words,
    // and a literal of millions of numbers is millions of small atoms.)
    /// `(λ (param) body)`.
    Lambda {
        param: Box<Param>,
        body: Box<Expr>,
    },
    /// `(tλ (&t) body)`.
    TLambda {
        param: Box<TParam>,
        body: Box<Expr>,
    },
    /// `(iλ ($n) body)`.
    ILambda {
        param: Box<IParam>,
        body: Box<Expr>,
    },
    /// `(box (w) body T)`. `witness: None` is `(box e)`, whose witnesses are
    /// every dimension of `e` (extensions §1.5); `ty: None` is a box whose
    /// `Σ` type comes from its context (an inner layer of a nested box).
    Box {
        witness: Option<Box<Ispace>>,
        body: Box<Expr>,
        ty: Option<Box<Type>>,
    },
    Error,
}

/// A value parameter: `(x T)`, `x` (type inferred) or `(x r)` (a rank).
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub name: Ident,
    pub ann: ParamAnn,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ParamAnn {
    Type(Type),
    Rank(Rank),
    /// No annotation: the type comes from inference.
    Infer,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rank {
    Nat(u64),
    All,
}

/// An atom type parameter `&t` (after `*t` is split).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TParam {
    pub name: Ident,
}

/// The sort of an index: a dimension `$d` or a shape `@s`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sort {
    Dim,
    Shape,
}

/// An index parameter `$d` or `@s`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IParam {
    pub sort: Sort,
    pub name: Ident,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Bind {
    pub kind: BindKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum BindKind {
    /// `(val x e)` / `(val (x : T) e)`.
    Val {
        name: Ident,
        ty: Option<Type>,
        expr: Expr,
    },
    /// `(fun (f pat … [: R]) body)`, at least one parameter.
    Fun {
        name: Ident,
        params: Vec<Param>,
        ret: Option<Type>,
        body: Expr,
    },
    /// `(t-fun (f (&t …) [: R]) body)`, at least one parameter.
    TFun {
        name: Ident,
        params: Vec<TParam>,
        ret: Option<Type>,
        body: Expr,
    },
    /// `(i-fun (f ($n …) [: R]) body)`, at least one parameter.
    IFun {
        name: Ident,
        params: Vec<IParam>,
        ret: Option<Type>,
        body: Expr,
    },
    /// `(type &t T)`.
    TypeAlias { param: TParam, ty: Type },
    /// `(ispace $d i)` / `(ispace @s i)`.
    IspaceAlias { param: IParam, ispace: Ispace },
}

impl Bind {
    /// The name this binding introduces.
    pub fn name(&self) -> &Ident {
        match &self.kind {
            BindKind::Val { name, .. }
            | BindKind::Fun { name, .. }
            | BindKind::TFun { name, .. }
            | BindKind::IFun { name, .. } => name,
            BindKind::TypeAlias { param, .. } => &param.name,
            BindKind::IspaceAlias { param, .. } => &param.name,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Type {
    pub kind: TypeKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum TypeKind {
    /// `&t`: an atom type variable or alias.
    Var(Ident),
    Int,
    Bool,
    Float,
    /// `(A T s)`: arrays of `T` with shape `s`.
    Array {
        elem: Box<Type>,
        shape: Shape,
    },
    /// `(-> P R)`, one parameter.
    Arrow {
        param: Box<Type>,
        result: Box<Type>,
    },
    Forall {
        param: TParam,
        body: Box<Type>,
    },
    Pi {
        param: IParam,
        body: Box<Type>,
    },
    Sigma {
        param: IParam,
        body: Box<Type>,
    },
    /// `{(x T) …}`.
    Record(Vec<(Ident, Type)>),
    /// `_` in an `@` type list: inferred (extensions §1.1).
    Hole,
    Error,
}

/// An index: a dimension or a shape.
#[derive(Clone, Debug, PartialEq)]
pub enum Ispace {
    Dim(Dim),
    Shape(Shape),
    /// `_` in an `@` index list: inferred.
    Hole(Span),
}

impl Ispace {
    pub fn span(&self) -> Span {
        match self {
            Ispace::Dim(d) => d.span,
            Ispace::Shape(s) => s.span,
            Ispace::Hole(s) => *s,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Dim {
    pub kind: DimKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum DimKind {
    Nat(u64),
    Var(Ident),
    Add(Vec<Dim>),
    Mul(Vec<Dim>),
    Sub(Vec<Dim>),
    /// `_`: a dimension left to be inferred (in `reshape`'s target shape,
    /// `(@reshape _ (_ [_ 3]) xs)`).
    Hole,
    Error,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    pub kind: ShapeKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ShapeKind {
    /// `@s`.
    Var(Ident),
    /// `[i …]`: the concatenation of its elements, dims as one axis each.
    /// Never directly contains another splice.
    Splice(Vec<Ispace>),
    Error,
}

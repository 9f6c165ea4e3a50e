//! Automatic differentiation (issue 15): `(jvp f x dx)`, `(vjp f x ct)` and
//! `(grad f)` replaced by derivative programs, as the typed program is
//! written back as a core program (`crate::elaborate`), which is checked
//! again (`crate::check_program_with`): both engines then run ordinary
//! Remora and know nothing of derivatives.
//!
//! The function `f` must be a lambda, or a name bound to one by `def` or
//! `let`, whose (first) parameter is a `Float` array. Its body is walked
//! once in A-normal form: every application of which the parameter's value
//! depends is bound to a fresh name `∂N`, and its tangent (forward mode)
//! beside it. Every variable the walk binds (a `let`, an inlined call's
//! parameter) gets a fresh name too, through the pass's renaming that
//! `Writer::var` consults, so shadowing and a function inlined twice keep
//! their values apart. Reverse mode walks the same bindings backwards,
//! Schenck's way (thesis ch. 3) but without a tape: the adjoint code
//! follows the forward code in one `let`, and each adjoint of a lifted
//! application is the rule's cell adjoint lifted over the same frame,
//! summed over the frame axes its argument was replicated along. An `if`'s
//! adjoint runs the branch taken again; a lifted call of a function the
//! program defines is the function's own derivative, lifted.
//!
//! A derivative is an ordinary function: `(grad f)` applied to a frame of
//! points is lifted like any function, giving the frame of gradients.
//! Subexpressions that do not depend on the parameter are kept as they are
//! (constants: Int, Bool, data); an expression whose type is not `Float`
//! (a comparison, a rounding) has zero derivative. Anything else that
//! depends on the parameter is a positioned error naming the construct.

use crate::elaborate::{Writer, ident, lambda, node, sp};
use crate::typed::{TAtom, TAtomKind, TDecl, TExpr, TExprKind, VarId};
use remora_syntax::ast::{self, AtomKind, BindKind, ExprKind};
use remora_syntax::{Diagnostic, Span};
use remora_types::{Atom, IVar, Lifted, Seg, Shape, TVar, Type};
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};

mod boxes;
mod hist;
mod loops;
mod outer;

/// The pass's state while a program is written back.
pub(crate) struct Pass<'a> {
    /// Lambdas bound by `def` and `let`, by variable.
    lambdas: HashMap<VarId, &'a TExpr>,
    /// Polymorphic functions bound by `def` and `let` (a lambda under
    /// `t-fn`s and `i-fn`s): their binders, outermost first, and lambda.
    generic: HashMap<VarId, (Vec<Binder>, &'a TExpr)>,
    /// Frames of functions bound by `def` and `let`, written out.
    frames: HashMap<VarId, &'a TExpr>,
    /// Every value bound by `def` and `let`, by variable.
    values: HashMap<VarId, &'a TExpr>,
    /// Parameters of functions inlined or lifted by the walk bound to a
    /// function: the function (a lambda; a primitive as one applying it).
    bound_lambdas: RefCell<HashMap<VarId, TExpr>>,
    /// Parameters of functions inlined by the walk bound to frames of
    /// functions written out: their functions, as a frame.
    bound_frames: RefCell<HashMap<VarId, TExpr>>,
    /// The intrinsics' arities (how many arguments their types take).
    arities: HashMap<&'static str, usize>,
    fresh: Cell<u32>,
    errors: RefCell<Vec<Diagnostic>>,
    /// The names the derivative code binds variables to, while it is
    /// written: every binding it makes has a name of its own, so shadowing
    /// and a function inlined twice keep their values apart.
    renames: RefCell<HashMap<VarId, String>>,
    /// Local variables named like a definition or an intrinsic, which the
    /// derivative code (an inlined body, a rule) may name where they are
    /// in scope: written `name∂N` in a program that uses a derivative form.
    shadowing: HashMap<VarId, String>,
}

impl<'a> Pass<'a> {
    pub(crate) fn new(decls: &'a [TDecl], names: &crate::check::NameTable) -> Pass<'a> {
        let mut lambdas = HashMap::new();
        let mut generic = HashMap::new();
        let mut frames = HashMap::new();
        let mut values = HashMap::new();
        let mut globals = HashSet::new();
        let mut known = |var: VarId, value: &'a TExpr| {
            values.insert(var, value);
            if lambda(value).is_some() {
                lambdas.insert(var, value);
            } else if let Some(g) = generic_lambda(value) {
                generic.insert(var, g);
            } else if matches!(value.ty.atom, Atom::Arrow(..))
                && matches!(value.kind, TExprKind::Frame { .. } | TExprKind::Array { .. })
            {
                frames.insert(var, value);
            }
        };
        for d in decls {
            let value = match d {
                TDecl::Def { var, value, .. } => {
                    globals.insert(*var);
                    known(*var, value);
                    value
                }
                TDecl::Expr(e) => e,
            };
            let mut stack = vec![value];
            while let Some(e) = stack.pop() {
                if let TExprKind::Let { var, value, .. } = &e.kind {
                    known(*var, value);
                }
                e.push_children(&mut stack);
            }
        }
        let mut shadowing = HashMap::new();
        let mut arities = HashMap::new();
        if uses_ad(decls) {
            let mut scratch = remora_syntax::SourceMap::new();
            for (name, text) in crate::intrinsics::names() {
                let parsed = remora_syntax::parse_type(&mut scratch, "<intrinsics>", text);
                arities.insert(name, arity(&parsed.value));
            }
            let mut taken: HashSet<&str> = crate::intrinsics::names().map(|(n, _)| n).collect();
            for v in &globals {
                if let Some(n) = names.vars.get(v.0 as usize) {
                    taken.insert(n);
                }
            }
            for (i, n) in names.vars.iter().enumerate() {
                let v = VarId(i as u32);
                if !globals.contains(&v) && taken.contains(n.as_str()) {
                    shadowing.insert(v, format!("{n}∂{i}"));
                }
            }
        }
        Pass {
            lambdas,
            generic,
            frames,
            values,
            arities,
            bound_frames: RefCell::new(HashMap::new()),
            bound_lambdas: RefCell::new(HashMap::new()),
            fresh: Cell::new(0),
            errors: RefCell::new(Vec::new()),
            renames: RefCell::new(HashMap::new()),
            shadowing,
        }
    }

    pub(crate) fn finish(&self) -> Result<(), Vec<Diagnostic>> {
        let errors = self.errors.take();
        if errors.is_empty() { Ok(()) } else { Err(errors) }
    }

    fn fresh(&self) -> String {
        let n = self.fresh.get() + 1;
        self.fresh.set(n);
        format!("∂{n}")
    }

    /// A variable of the derivative code's own (a parameter of a function
    /// it makes), named `∂N`.
    fn fresh_var(&self) -> VarId {
        let name = self.fresh();
        let var = VarId(u32::MAX - self.fresh.get());
        self.renames.borrow_mut().insert(var, name);
        var
    }

    /// The name the code being written gives `v`, if not its source name.
    pub(crate) fn name_of(&self, v: VarId) -> Option<String> {
        self.renames
            .borrow()
            .get(&v)
            .or_else(|| self.shadowing.get(&v))
            .cloned()
    }
}

/// How many arguments a function of type `t` takes: its parameters, one
/// `->` after another (under its `∀`s and `Π`s).
fn arity(t: &ast::Type) -> usize {
    match &t.kind {
        ast::TypeKind::Forall { body, .. } | ast::TypeKind::Pi { body, .. } => arity(body),
        ast::TypeKind::Arrow { result, .. } => 1 + arity(result),
        _ => 0,
    }
}

/// Gives every expression in `e` still without a position `span` (the
/// derivative code of a form: run-time errors in it point at the form).
pub(crate) fn fill_spans(e: &mut ast::Expr, span: Span) {
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        if e.span == Span::default() {
            e.span = span;
        }
        match &mut e.kind {
            ExprKind::Array { atoms, .. } => {
                for a in atoms {
                    match &mut a.kind {
                        AtomKind::Lambda { body, .. }
                        | AtomKind::TLambda { body, .. }
                        | AtomKind::ILambda { body, .. }
                        | AtomKind::Box { body, .. } => stack.push(body),
                        _ => {}
                    }
                }
            }
            ExprKind::Frame { elems, .. } => stack.extend(elems.iter_mut()),
            ExprKind::App { func, arg } => {
                stack.push(func);
                stack.push(arg);
            }
            ExprKind::TApp { func, .. } | ExprKind::IApp { func, .. } => stack.push(func),
            ExprKind::Unbox { boxed, body, .. } => {
                stack.push(boxed);
                stack.push(body);
            }
            ExprKind::Let { binds, body } => {
                for b in binds.iter_mut() {
                    if let BindKind::Val { expr, .. } = &mut b.kind {
                        stack.push(expr);
                    }
                }
                stack.push(body);
            }
            ExprKind::Record(fields) => stack.extend(fields.iter_mut().map(|f| &mut f.value)),
            ExprKind::Field { record, .. } => stack.push(record),
            ExprKind::If {
                cond,
                then,
                otherwise,
            } => {
                stack.push(cond);
                stack.push(then);
                stack.push(otherwise);
            }
            _ => {}
        }
    }
}

/// A binder of a polymorphic function.
#[derive(Clone, Copy)]
enum Binder {
    Type(TVar),
    Index(IVar),
}

/// `e` as a lambda under one or more `t-fn`s and `i-fn`s.
fn generic_lambda(e: &TExpr) -> Option<(Vec<Binder>, &TExpr)> {
    let mut binders = Vec::new();
    let mut e = e;
    loop {
        if lambda(e).is_some() {
            return (!binders.is_empty()).then_some((binders, e));
        }
        let TExprKind::Array { shape, atoms } = &e.kind else {
            return None;
        };
        let ([TAtom { kind, .. }], true) = (atoms.as_slice(), shape.is_empty()) else {
            return None;
        };
        match kind {
            TAtomKind::TLambda { param, body } => {
                binders.push(Binder::Type(*param));
                e = body;
            }
            TAtomKind::ILambda { param, body } => {
                binders.push(Binder::Index(*param));
                e = body;
            }
            _ => return None,
        }
    }
}

/// `d` under the binders of a polymorphic function, outermost first.
fn under_binders(w: &Writer, binders: &[Binder], d: ast::Expr) -> ast::Expr {
    binders.iter().rev().fold(d, |body, b| {
        let kind = match b {
            Binder::Type(t) => AtomKind::TLambda {
                param: Box::new(ast::TParam { name: w.tvar(*t) }),
                body: Box::new(body),
            },
            Binder::Index(i) => AtomKind::ILambda {
                param: Box::new(w.iparam(*i)),
                body: Box::new(body),
            },
        };
        node(ExprKind::Array {
            shape: Vec::new(),
            atoms: vec![ast::Atom { kind, span: sp() }],
        })
    })
}

/// `head`, a variable under `t-app`s and `i-app`s, with `d` in the
/// variable's place: `d` instantiated as the head was.
fn instantiated(head: &ast::Expr, d: ast::Expr) -> ast::Expr {
    match &head.kind {
        ExprKind::TApp { func, arg } => node(ExprKind::TApp {
            func: Box::new(instantiated(func, d)),
            arg: arg.clone(),
        }),
        ExprKind::IApp { func, arg } => node(ExprKind::IApp {
            func: Box::new(instantiated(func, d)),
            arg: arg.clone(),
        }),
        _ => d,
    }
}

/// The variable under `e`'s `t-app`s and `i-app`s, and how many there are.
fn instantiated_var(e: &TExpr) -> Option<(VarId, usize)> {
    match &e.kind {
        TExprKind::Var(v) => Some((*v, 0)),
        TExprKind::TApp { func, .. } | TExprKind::IApp { func, .. } => {
            instantiated_var(func).map(|(v, n)| (v, n + 1))
        }
        _ => None,
    }
}

/// The varying variables `body` reads (a function's free variables that
/// depend on the parameter), each once, in the order first read, with its
/// type and tangent name; through a function it reads that closes over
/// some (a [`CLOSURE`]), the ones that function reads.
pub(crate) fn varying_free(w: &Writer, body: &TExpr, env: &Env) -> Vec<(VarId, Type, String)> {
    let mut free = Vec::new();
    let mut seen = HashSet::new();
    let mut functions: Vec<std::borrow::Cow<TExpr>> = vec![std::borrow::Cow::Borrowed(body)];
    while let Some(f) = functions.pop() {
        f.any(&mut |x| {
            if let TExprKind::Var(v) = &x.kind
                && let Some(Some(t)) = env.get(v)
                && seen.insert(*v)
            {
                if t != CLOSURE {
                    free.push((*v, x.ty.clone(), t.clone()));
                } else if let Some(f) = w.ad.lambdas.get(v).or_else(|| w.ad.frames.get(v)) {
                    functions.push(std::borrow::Cow::Borrowed(*f));
                } else if let Some(f) = w.ad.bound_lambdas.borrow().get(v) {
                    functions.push(std::borrow::Cow::Owned(f.clone()));
                } else if let Some(f) = w.ad.bound_frames.borrow().get(v) {
                    functions.push(std::borrow::Cow::Owned(f.clone()));
                }
            }
            false
        });
    }
    free
}

/// The tangent (in reverse mode, the mark) of a function that closes over
/// values that depend on the parameter: never read as a value; where the
/// function is applied, its body is differentiated.
const CLOSURE: &str = "∂closure";

/// How many arguments a function of type `t` takes, one after another.
fn arrows(t: &Type) -> usize {
    match &t.atom {
        Atom::Arrow(_, r) if t.shape.is_scalar() => 1 + arrows(r),
        _ => 0,
    }
}

/// The key under which the adjoint of one field of the record `name` is
/// kept while contributions reach the fields one by one (not a name any
/// program can spell).
fn field_key(name: &str, field: &str) -> String {
    format!("{name}\u{0}{field}")
}

/// The expression under `e`'s `t-app`s and `i-app`s when it is not a
/// variable, and how many there are (at least one).
fn instantiated_literal(e: &TExpr) -> Option<(&TExpr, usize)> {
    let mut e = e;
    let mut n = 0;
    while let TExprKind::TApp { func, .. } | TExprKind::IApp { func, .. } = &e.kind {
        e = func;
        n += 1;
    }
    (n > 0 && !matches!(e.kind, TExprKind::Var(_))).then_some((e, n))
}

/// Whether the program uses a derivative form (and so must be rewritten).
pub fn uses_ad(decls: &[TDecl]) -> bool {
    decls.iter().any(|d| {
        let e = match d {
            TDecl::Def { value, .. } => value,
            TDecl::Expr(e) => e,
        };
        e.any(&mut is_form)
    })
}

/// The name of the intrinsic at the head of `e`, under its instantiations.
fn head_name(e: &TExpr) -> Option<&'static str> {
    match &e.kind {
        TExprKind::Intrinsic(n) => Some(n),
        TExprKind::TApp { func, .. } | TExprKind::IApp { func, .. } => head_name(func),
        _ => None,
    }
}

/// A derivative form written as its derivative program, if `e` is one.
pub(crate) fn form(w: &Writer, e: &TExpr) -> Option<ast::Expr> {
    let (head, args) = e.spine();
    let name = head_name(head)?;
    let mode = match name {
        "jvp" if args.len() == 3 => Mode::Forward,
        "vjp" if args.len() == 3 => Mode::Reverse,
        "grad" | "value-and-grad" if args.len() == 1 => Mode::Reverse,
        _ => return None,
    };
    // A derivative of a function that takes derivatives itself (a second
    // derivative): written as it is, for the next round, once the inner
    // ones are derivative programs (`crate::differentiate`).
    if args.first().is_some_and(|(f, _)| takes_derivatives(w, f)) {
        return None;
    }
    let result = derivative(w, name, mode, &args, e.span);
    match result {
        Ok(x) => Some(x),
        Err(d) => {
            w.ad.errors.borrow_mut().push(d);
            Some(node(ExprKind::Var(ident("undefined"))))
        }
    }
}

/// Whether `x` is the head of a derivative form.
fn is_form(x: &TExpr) -> bool {
    matches!(
        x.kind,
        TExprKind::Intrinsic("jvp" | "vjp" | "grad" | "value-and-grad")
    )
}

/// Whether `f` (a function, or a name bound to one) holds a derivative
/// form, or reads by name a function or value that does
/// (`(def (val g (grad h)))`): each value read once.
fn takes_derivatives(w: &Writer, f: &TExpr) -> bool {
    let mut seen = HashSet::new();
    let mut values = vec![f];
    while let Some(g) = values.pop() {
        let found = g.any(&mut |x| match &x.kind {
            TExprKind::Intrinsic(_) => is_form(x),
            TExprKind::Var(v) => {
                if seen.insert(*v) {
                    values.extend(w.ad.values.get(v).copied());
                }
                false
            }
            _ => false,
        });
        if found {
            return true;
        }
    }
    false
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Forward,
    Reverse,
}

fn var(name: &str) -> ast::Expr {
    node(ExprKind::Var(ident(name)))
}

fn app(f: ast::Expr, args: Vec<ast::Expr>) -> ast::Expr {
    args.into_iter().fold(f, |f, a| {
        node(ExprKind::App {
            func: Box::new(f),
            arg: Box::new(a),
        })
    })
}

fn call(f: &str, args: Vec<ast::Expr>) -> ast::Expr {
    app(var(f), args)
}

fn float(x: f32) -> ast::Expr {
    node(ExprKind::Array {
        shape: Vec::new(),
        atoms: vec![ast::Atom {
            kind: AtomKind::Float(x),
            span: sp(),
        }],
    })
}

fn int(x: i64) -> ast::Expr {
    node(ExprKind::Array {
        shape: Vec::new(),
        atoms: vec![ast::Atom {
            kind: AtomKind::Int(x),
            span: sp(),
        }],
    })
}

fn lam(w: &Writer, param: &str, ty: &Type, body: ast::Expr) -> ast::Expr {
    node(ExprKind::Array {
        shape: Vec::new(),
        atoms: vec![ast::Atom {
            kind: AtomKind::Lambda {
                param: Box::new(ast::Param {
                    name: ident(param),
                    ann: ast::ParamAnn::Type(w.ty(ty)),
                    span: sp(),
                }),
                body: Box::new(body),
            },
            span: sp(),
        }],
    })
}

fn let_in(binds: Vec<(String, ast::Expr)>, body: ast::Expr) -> ast::Expr {
    if binds.is_empty() {
        return body;
    }
    node(ExprKind::Let {
        binds: binds
            .into_iter()
            .map(|(name, expr)| ast::Bind {
                kind: BindKind::Val {
                    name: ident(name),
                    ty: None,
                    expr,
                },
                span: sp(),
            })
            .collect(),
        body: Box::new(body),
    })
}

/// `t` (Float, of a prefix of `like`'s shape) replicated to `like`'s shape,
/// by lifting `(λ (d) (λ (p) d))`.
fn broadcast(w: &Writer, t: ast::Expr, like: ast::Expr, like_atom: &Atom) -> ast::Expr {
    let inner = lam(w, "∂p", &Type::scalar(like_atom.clone()), var("∂d"));
    let f = lam(w, "∂d", &Type::scalar(Atom::Float), inner);
    app(f, vec![t, like])
}

/// Zeros of the shape of `like`, a Float array.
fn zeros(w: &Writer, like: ast::Expr) -> ast::Expr {
    broadcast(w, float(0.0), like, &Atom::Float)
}

fn float_type(shape: &Shape) -> Type {
    Type {
        atom: Atom::Float,
        shape: shape.clone(),
    }
}

/// `(λ (x1 : t1) … (λ (xk : tk) body))`.
fn lambdas(w: &Writer, params: &[(String, Type)], body: ast::Expr) -> ast::Expr {
    params
        .iter()
        .rev()
        .fold(body, |body, (name, ty)| lam(w, name, ty, body))
}

/// `body` of fresh names for `args`' cells, applied to `args`: lifted over
/// their frames.
fn lift(w: &Writer, args: Vec<(ast::Expr, Type)>, body: impl FnOnce(&[ast::Expr]) -> ast::Expr) -> ast::Expr {
    let names: Vec<(String, Type)> = args.iter().map(|(_, t)| (w.ad.fresh(), t.clone())).collect();
    let vars: Vec<ast::Expr> = names.iter().map(|(n, _)| var(n)).collect();
    let f = lambdas(w, &names, body(&vars));
    app(f, args.into_iter().map(|(a, _)| a).collect())
}

/// One application the body's value depends on, as reverse mode needs it.
struct Node {
    out: String,
    rule: Rule,
    /// The function applied, with its instantiations.
    head: ast::Expr,
    /// Each argument: its primal, the name of its primal when it depends
    /// on the parameter, its type and its frame in the application.
    args: Vec<Arg>,
    /// The application's principal frame.
    principal: Shape,
    /// The cell of the result (its shape after the principal frame).
    result_cell: Shape,
    span: Span,
}

#[derive(Clone)]
struct Arg {
    primal: ast::Expr,
    varying: Option<String>,
    frame: Shape,
    cell: Shape,
    /// The argument's atom type (`Float` for the arguments that have
    /// tangents).
    atom: Atom,
}

enum Rule {
    /// `let x = y`, a parameter bound to an argument.
    Alias,
    Scalar(&'static str),
    /// `f.sum` or `(reduce f.+ …)`: the adjoint is replicated to the cell.
    Sum,
    /// `(reduce f.max …)`, `(reduce f.min …)` of scalars (`f.argmax`,
    /// `f.argmin`): the tangent and the adjoint are the first extreme
    /// item's.
    Extremum(&'static str),
    Select,
    /// `f.product` or `(reduce f.* …)` of vectors: the derivative for each
    /// item is the product of the others (by prefix and suffix products:
    /// no division, right at zeros).
    Product,
    /// A function linear in its Float arguments (a gather, a reshaping,
    /// a prefix sum): the tangent is the function of the tangents; the
    /// adjoint its transpose (a scatter, the inverse reshaping).
    Linear(&'static str),
    Dot,
    Matmul,
    /// A function defined in the program, lifted: each varying argument's
    /// reverse derivative, `(λ (p1 … pk) (λ (ct) adjoint))`.
    Call(Vec<Option<ast::Expr>>),
    /// The same for several varying arguments at once: `(λ (p1 … pk) (λ
    /// (ct) {(d1 …) …}))`, the record of their cotangents (field
    /// [`grad_field`] of argument i's), from one forward and one backward
    /// pass.
    CallAll(ast::Expr),
    /// A frame of expressions, of this shape.
    Frame(Vec<u64>),
    /// A record made of its fields' values, in this order.
    Record(Vec<String>),
    /// A field of a record of these fields.
    Field(String, Fields),
    /// A loop (`fold`, `iterate`, `while`, `scan`, a `reduce` by a
    /// function of no rule of its own), with how it went.
    Loop(Box<loops::LoopNode>),
    /// `if`: the condition, and each branch's forward code.
    If(Box<IfNode>),
    /// `unbox`, its body's forward code kept to run again.
    Unbox(Box<boxes::UnboxNode>),
    /// `hist` by `f.max`, `f.min` or `f.*`.
    Hist(Box<hist::HistNode>),
    Outer(Box<outer::OuterNode>),
}

struct IfNode {
    cond: ast::Expr,
    branches: [Branch; 2],
    /// The names of the varying variables the branches read.
    free: Vec<String>,
}

struct Branch {
    binds: Vec<(String, ast::Expr)>,
    nodes: Vec<Node>,
    out: Option<String>,
}

/// The derivative of one function on cells, from its parameters and body.
type CellDerivative<'d> = dyn Fn(&[Param], &TExpr) -> Result<ast::Expr, Diagnostic> + 'd;

/// A parameter of a function being differentiated.
struct Param {
    var: VarId,
    ty: Type,
    varying: bool,
}

/// One derivative walk: the bindings written so far and the nodes.
struct Walk<'w, 'a> {
    w: &'w Writer<'a>,
    mode: Mode,
    binds: Vec<(String, ast::Expr)>,
    nodes: Vec<Node>,
    /// The variables renamed, with their earlier names, to restore.
    renamed: Vec<(VarId, Option<String>)>,
    /// The names bound to records (or frames of records), with their
    /// fields: their adjoints add field by field.
    records: HashMap<String, Fields>,
}

/// A record type's fields.
type Fields = Vec<(String, Type)>;

/// The fields of a record of Float arrays.
fn float_record(atom: &Atom) -> Option<Fields> {
    match atom {
        Atom::Record(fs) if fs.iter().all(|(_, t)| t.atom == Atom::Float) => Some(fs.to_vec()),
        _ => None,
    }
}

/// Whether values of this type have derivatives the walk follows.
fn differentiable(atom: &Atom) -> bool {
    matches!(atom, Atom::Float | Atom::Arrow(..)) || float_record(atom).is_some()
}

fn field_of(record: ast::Expr, name: &str) -> ast::Expr {
    node(ExprKind::Field {
        record: Box::new(record),
        field: ident(name),
    })
}

fn record_of(w: &Writer, fields: &Fields, mut value: impl FnMut(&str) -> ast::Expr) -> ast::Expr {
    node(ExprKind::Record(
        fields
            .iter()
            .map(|(name, t)| ast::RecordField {
                name: ident(name.clone()),
                cell: w.shape(&t.shape),
                value: value(name),
            })
            .collect(),
    ))
}

/// A value under the walk: its primal, and its tangent variable (forward
/// mode) or whether it depends on the parameter (reverse mode: `Some` of
/// any name).
type Env = HashMap<VarId, Option<String>>;

const SCALAR: &[&str] = &[
    "f.+", "f.-", "f.*", "f./", "f.^", "f.atan2", "f.max", "f.min", "f.neg", "f.abs", "f.exp", "f.ln",
    "f.sin", "f.cos", "f.tan", "f.sinh", "f.cosh", "f.asin", "f.acos", "f.atan", "f.log2", "f.log10",
    "f.tanh", "f.sqrt", "sqrt", "f.mod", "f.clip",
];

/// Functions linear in their Float arguments, with transposes below.
const LINEAR: &[&str] = &[
    "reverse",
    "transpose2d",
    "transpose",
    "rotate",
    "head",
    "tail",
    "last",
    "curtail",
    "take",
    "drop",
    "take-right",
    "drop-right",
    "append",
    "nth",
    "index",
    "reshape",
    "flatten",
    "replicate",
    "f.mean",
    "scatter",
    "f.sort",
    "windows",
    "index2d",
    "sort-by",
    "linspace",
    // (The identity on the value they return.)
    "trace",
    "trace-file",
];

/// Float functions whose derivative is zero wherever it exists.
const FLAT: &[&str] = &["f.signum", "f.floor", "f.ceiling", "f.round"];

/// The lambdas `f` is made of, up to `n` of them: their parameters and
/// types, the innermost body and its type.
fn params_of(f: &TExpr, n: usize) -> (Vec<(VarId, Type)>, &TExpr, Type) {
    let mut params = Vec::new();
    let mut body = f;
    let mut ty = f.ty.clone();
    while params.len() < n {
        let (Some((p, b)), Atom::Arrow(pt, rt)) = (lambda(body), &body.ty.atom) else {
            break;
        };
        params.push((p, (**pt).clone()));
        ty = (**rt).clone();
        body = b;
    }
    (params, body, ty)
}

/// `f`, a function of `n` parameters that is not a lambda (a primitive,
/// instantiated maybe), as the lambda `(λ (p1 … pn) (f p1 … pn))` of fresh
/// parameters typed as `f`'s: differentiated by the rules of the
/// application in its body.
fn eta(w: &Writer, f: &TExpr, n: usize) -> Option<TExpr> {
    let mut params = Vec::new();
    let mut call = f.clone();
    let mut ty = f.ty.clone();
    for _ in 0..n {
        let Atom::Arrow(pt, rt) = &ty.atom else {
            return None;
        };
        if !ty.shape.is_scalar() {
            return None;
        }
        let (pt, rt) = ((**pt).clone(), (**rt).clone());
        let param = w.ad.fresh_var();
        let lifted = Lifted {
            fun_frame: Shape::scalar(),
            arg_frame: Shape::scalar(),
            arg_cell: pt.shape.clone(),
            principal: Shape::scalar(),
            result: rt.clone(),
        };
        let arg = TExpr {
            kind: TExprKind::Var(param),
            ty: pt.clone(),
            span: f.span,
        };
        call = TExpr {
            kind: TExprKind::App {
                func: Box::new(call),
                arg: Box::new(arg),
                lifted,
            },
            ty: rt.clone(),
            span: f.span,
        };
        params.push((param, pt));
        ty = rt;
    }
    Some(curried(params, call, f.span))
}

/// `(λ (p1) … (λ (pn) body))`, each lambda typed by its parameter's type.
fn curried(params: Vec<(VarId, Type)>, body: TExpr, span: Span) -> TExpr {
    params.into_iter().rev().fold(body, |body, (param, pt)| TExpr {
        ty: Type::scalar(Atom::Arrow(
            std::sync::Arc::new(pt),
            std::sync::Arc::new(body.ty.clone()),
        )),
        kind: TExprKind::Array {
            shape: Vec::new(),
            atoms: vec![TAtom {
                kind: TAtomKind::Lambda {
                    param,
                    body: Box::new(body),
                },
                span,
            }],
        },
        span,
    })
}

/// The forward derivative of the function of `params` and `body`:
/// `(λ (p1 … pk) (λ (dp…) tangent))`, a tangent for each varying parameter.
fn forward_fn(w: &Writer, params: &[Param], body: &TExpr) -> Result<ast::Expr, Diagnostic> {
    let mut walk = Walk::new(w, Mode::Forward);
    let mut env = Env::new();
    let mut names = Vec::new();
    let mut tangents = Vec::new();
    for p in params {
        names.push((walk.rename(p.var), p.ty.clone()));
        if p.varying && matches!(p.ty.atom, Atom::Arrow(..)) {
            env.insert(p.var, Some(CLOSURE.to_string()));
        } else if p.varying {
            let dt = w.ad.fresh();
            env.insert(p.var, Some(dt.clone()));
            tangents.push((dt, p.ty.clone()));
        } else {
            env.insert(p.var, None);
        }
    }
    let (primal, tangent) = walk.expr(body, &env)?;
    let tangent = tangent.unwrap_or_else(|| loops::zeros_like(w, &body.ty.atom, primal));
    let body = let_in(std::mem::take(&mut walk.binds), tangent);
    walk.restore();
    names.extend(tangents);
    Ok(lambdas(w, &names, body))
}

/// The reverse derivative of the function of `params` and `body` for the
/// parameter `target`: the parameters' names, the cotangent's name, and
/// the adjoint's code (forward code, then adjoints, in one `let`).
fn reverse_core(
    w: &Writer,
    params: &[Param],
    body: &TExpr,
    target: usize,
) -> Result<ReverseCode, Diagnostic> {
    reverse_pass(w, params, body, |walk, names, adjoints| {
        let target_name = names.get(target).map(|(n, _)| n.clone()).unwrap_or_default();
        match walk.read_adjoint(&target_name, adjoints) {
            Some(a) => a,
            None => walk.zeros_of(&target_name),
        }
    })
}

/// The reverse derivative of the function of `params` and `body` for
/// several parameters at once: one forward pass and one backward pass,
/// the result the record of the targets' cotangents, field [`grad_field`]
/// of each.
fn reverse_many(
    w: &Writer,
    params: &[Param],
    body: &TExpr,
    targets: &[usize],
) -> Result<ReverseCode, Diagnostic> {
    reverse_pass(w, params, body, |walk, names, adjoints| {
        let mut fields: Fields = Vec::new();
        let mut values = HashMap::new();
        for &t in targets {
            let Some((name, ty)) = names.get(t).cloned() else {
                continue;
            };
            let gradient = match walk.read_adjoint(&name, adjoints) {
                Some(a) => a,
                None => walk.zeros_of(&name),
            };
            fields.push((grad_field(t), ty));
            values.insert(grad_field(t), gradient);
        }
        record_of(w, &fields, |f| values.remove(f).unwrap_or_else(|| float(0.0)))
    })
}

/// One forward pass over `body` and one backward pass over its nodes,
/// the cotangent flowing in from the result; `result` reads the
/// parameters' adjoints (by their names) into the derivative's value.
fn reverse_pass(
    w: &Writer,
    params: &[Param],
    body: &TExpr,
    result: impl FnOnce(&mut Walk, &[(String, Type)], &mut HashMap<String, String>) -> ast::Expr,
) -> Result<ReverseCode, Diagnostic> {
    let mut walk = Walk::new(w, Mode::Reverse);
    let mut env = Env::new();
    let mut names = Vec::new();
    for p in params {
        let name = walk.rename(p.var);
        let mark = if matches!(p.ty.atom, Atom::Arrow(..)) {
            CLOSURE.to_string()
        } else {
            name.clone()
        };
        env.insert(p.var, p.varying.then_some(mark));
        if let Some(fields) = float_record(&p.ty.atom) {
            walk.records.insert(name.clone(), fields);
        }
        names.push((name, p.ty.clone()));
    }
    let (primal, tangent) = walk.expr(body, &env)?;
    let ct = w.ad.fresh();
    let mut adjoints: HashMap<String, String> = HashMap::new();
    if let (Some(_), ExprKind::Var(out)) = (&tangent, &primal.kind) {
        adjoints.insert(out.name.clone(), ct.clone());
    }
    let nodes = std::mem::take(&mut walk.nodes);
    for n in nodes.iter().rev() {
        walk.adjoint(n, &mut adjoints)?;
    }
    let value = result(&mut walk, &names, &mut adjoints);
    let body = let_in(std::mem::take(&mut walk.binds), value);
    walk.restore();
    Ok(ReverseCode {
        params: names,
        ct,
        body,
        primal,
    })
}

/// The field of [`reverse_many`]'s record holding parameter `i`'s
/// cotangent.
fn grad_field(i: usize) -> String {
    format!("d{i}")
}

/// A function's reverse derivative for one parameter, as [`reverse_core`]
/// writes it.
struct ReverseCode {
    /// The parameters' names and types.
    params: Vec<(String, Type)>,
    /// The cotangent's name.
    ct: String,
    body: ast::Expr,
    /// The function's value, in scope at the end of `body`'s `let`.
    primal: ast::Expr,
}

/// `body`, a `let` whose result is a gradient of the first parameter's
/// type, with the record `{(value) (gradient)}` as its result instead.
fn with_value(w: &Writer, body: ast::Expr, value: ast::Expr, params: &[(String, Type)]) -> ast::Expr {
    let gradient_ty = params
        .first()
        .map(|(_, t)| t.clone())
        .unwrap_or_else(|| Type::scalar(Atom::Float));
    let fields: Fields = vec![
        ("value".to_string(), Type::scalar(Atom::Float)),
        ("gradient".to_string(), gradient_ty),
    ];
    let pair = |gradient: ast::Expr| {
        record_of(w, &fields, |f| {
            if f == "value" {
                value.clone()
            } else {
                gradient.clone()
            }
        })
    };
    match body.kind {
        ExprKind::Let { binds, body: inner } => node(ExprKind::Let {
            binds,
            body: Box::new(pair(*inner)),
        }),
        _ => pair(body),
    }
}

fn derivative(
    w: &Writer,
    name: &str,
    mode: Mode,
    args: &[(&TExpr, &Lifted)],
    span: Span,
) -> Result<ast::Expr, Diagnostic> {
    let f = args
        .first()
        .map(|a| a.0)
        .ok_or_else(|| Diagnostic::error(span, "malformed derivative form"))?;
    let lam_expr = match &f.kind {
        TExprKind::Var(v) => w.ad.lambdas.get(v).copied(),
        _ => Some(f),
    };
    let Some(lam_expr) = lam_expr.filter(|l| lambda(l).is_some()) else {
        return Err(Diagnostic::error(
            f.span,
            format!(
                "`{name}` differentiates a lambda, or a name bound to one by `def` or `let`; this function is neither"
            ),
        ));
    };
    let Atom::Arrow(pty, _) = &f.ty.atom else {
        return Err(Diagnostic::error(
            f.span,
            format!("`{name}` of a value that is not a function"),
        ));
    };
    if pty.atom != Atom::Float && float_record(&pty.atom).is_none() {
        return Err(Diagnostic::error(
            f.span,
            format!(
                "`{name}` differentiates with respect to a Float array or a record of them, and this parameter is `{}`",
                pty.show(w.names())
            ),
        ));
    }
    // `grad` of a function of several parameters: with respect to the
    // first, the others held constant.
    let count = if name == "vjp" || name == "jvp" {
        1
    } else {
        usize::MAX
    };
    let (params, body, rty) = params_of(lam_expr, count);
    let params: Vec<Param> = params
        .into_iter()
        .enumerate()
        .map(|(i, (var, ty))| Param {
            var,
            ty,
            varying: i == 0,
        })
        .collect();
    let rest: Vec<ast::Expr> = args.iter().skip(1).map(|a| w.expr(a.0)).collect();
    match mode {
        Mode::Forward => Ok(app(forward_fn(w, &params, body)?, rest)),
        Mode::Reverse => {
            let ReverseCode {
                params: mut names,
                ct,
                body,
                primal,
            } = reverse_core(w, &params, body, 0)?;
            if name == "grad" {
                Ok(lambdas(w, &names, let_in(vec![(ct, float(1.0))], body)))
            } else if name == "value-and-grad" {
                // The value and the gradient from one forward pass: the
                // adjoint code's result paired with the primal it kept.
                let out = let_in(vec![(ct, float(1.0))], with_value(w, body, primal, &names));
                Ok(lambdas(w, &names, out))
            } else {
                names.push((ct, rty));
                Ok(app(lambdas(w, &names, body), rest))
            }
        }
    }
}

impl<'w, 'a> Walk<'w, 'a> {
    fn new(w: &'w Writer<'a>, mode: Mode) -> Walk<'w, 'a> {
        Walk {
            w,
            mode,
            binds: Vec::new(),
            nodes: Vec::new(),
            renamed: Vec::new(),
            records: HashMap::new(),
        }
    }

    /// Zeros of the shape of the variable `name` (a record of them for a
    /// record).
    fn zeros_of(&self, name: &str) -> ast::Expr {
        match self.records.get(name) {
            Some(fields) => record_of(self.w, fields, |f| zeros(self.w, field_of(var(name), f))),
            None => zeros(self.w, var(name)),
        }
    }

    /// A fresh name for the variable `v`, which the code written from now
    /// on calls it by.
    fn rename(&mut self, v: VarId) -> String {
        let name = format!("{}{}", self.w.source_name(v), self.w.ad.fresh());
        let prev = self.w.ad.renames.borrow_mut().insert(v, name.clone());
        self.renamed.push((v, prev));
        name
    }

    /// The renamings of this walk undone.
    fn restore(&mut self) {
        let mut renames = self.w.ad.renames.borrow_mut();
        for (v, prev) in self.renamed.drain(..).rev() {
            match prev {
                Some(p) => renames.insert(v, p),
                None => renames.remove(&v),
            };
        }
    }

    /// `e` bound to a fresh name when it is a computation (an application,
    /// a `let`, an `if`), so the adjoint code can read its primal by name.
    fn named(&mut self, e: ast::Expr) -> ast::Expr {
        if matches!(
            e.kind,
            ExprKind::App { .. } | ExprKind::Let { .. } | ExprKind::If { .. }
        ) {
            self.bind(e)
        } else {
            e
        }
    }

    fn bind(&mut self, e: ast::Expr) -> ast::Expr {
        let name = self.w.ad.fresh();
        self.binds.push((name.clone(), e));
        var(&name)
    }

    /// The variable `v` bound to the primal `p` (tangent `t`), in `env`.
    fn bind_var(&mut self, v: VarId, p: ast::Expr, t: Option<ast::Expr>, env: &mut Env, span: Span) {
        let name = self.rename(v);
        if let ExprKind::Var(src) = &p.kind
            && let Some(fields) = self.records.get(&src.name).cloned()
        {
            self.records.insert(name.clone(), fields);
        }
        self.binds.push((name.clone(), p.clone()));
        match t {
            // A function closing over varying values: marked, no tangent.
            Some(t) if matches!(&t.kind, ExprKind::Var(c) if c.name == CLOSURE) => {
                env.insert(v, Some(CLOSURE.to_string()));
            }
            Some(t) => {
                let dt = self.w.ad.fresh();
                if self.mode == Mode::Forward {
                    self.binds.push((dt.clone(), t));
                }
                if let ExprKind::Var(src) = &p.kind {
                    self.nodes.push(Node {
                        out: name,
                        rule: Rule::Alias,
                        head: var("∂alias"),
                        args: vec![Arg {
                            primal: p.clone(),
                            varying: Some(src.name.clone()),
                            frame: Shape::scalar(),
                            cell: Shape::scalar(),
                            atom: Atom::Float,
                        }],
                        principal: Shape::scalar(),
                        result_cell: Shape::scalar(),
                        span,
                    });
                }
                env.insert(v, Some(dt));
            }
            None => {
                env.insert(v, None);
            }
        }
    }

    fn varying(e: &TExpr, env: &Env) -> bool {
        e.any(&mut |x| matches!(&x.kind, TExprKind::Var(v) if matches!(env.get(v), Some(Some(_)))))
    }

    /// `e`'s primal (a name when it depends on the parameter) and tangent
    /// (`None`: zero).
    fn expr(&mut self, e: &TExpr, env: &Env) -> Result<(ast::Expr, Option<ast::Expr>), Diagnostic> {
        if !Self::varying(e, env) || !differentiable(&e.ty.atom) {
            return Ok((self.w.expr(e), None));
        }
        // A function (or a frame of them) that closes over varying values:
        // as written, marked; differentiated where applied.
        if matches!(e.ty.atom, Atom::Arrow(..)) {
            return Ok((self.w.expr(e), Some(var(CLOSURE))));
        }
        let (p, t) = self.expr_varying(e, env)?;
        if let (Some(fields), ExprKind::Var(v)) = (float_record(&e.ty.atom), &p.kind) {
            self.records.insert(v.name.clone(), fields);
        }
        Ok((p, t))
    }

    fn expr_varying(&mut self, e: &TExpr, env: &Env) -> Result<(ast::Expr, Option<ast::Expr>), Diagnostic> {
        match &e.kind {
            TExprKind::Var(v) => Ok((
                node(ExprKind::Var(self.w.var(*v))),
                env.get(v).cloned().flatten().map(|t| var(&t)),
            )),
            TExprKind::Let { var: v, value, body } => {
                let (p, t) = self.expr(value, env)?;
                let mut inner = env.clone();
                self.bind_var(*v, p, t, &mut inner, e.span);
                self.expr(body, &inner)
            }
            TExprKind::If {
                cond,
                then,
                otherwise,
            } => self.if_(cond, then, otherwise, env),
            TExprKind::App { .. } => self.app(e, env),
            TExprKind::Frame { shape, elems } => self.frame(shape, elems, env, e.span),
            TExprKind::Record(fields) => self.record(e, fields, env),
            TExprKind::Field { record, field } => self.field(e, record, field, env),
            TExprKind::Unbox { .. } => self.unbox(e, env),
            _ => Err(self.unsupported(e, "this expression")),
        }
    }

    /// A record of Float arrays: its tangent the record of the fields'
    /// tangents; the adjoint of each field the cotangent's field.
    fn record(
        &mut self,
        e: &TExpr,
        fields: &[(String, TExpr)],
        env: &Env,
    ) -> Result<(ast::Expr, Option<ast::Expr>), Diagnostic> {
        let Some(types) = float_record(&e.ty.atom) else {
            return Err(self.unsupported(e, "a record with fields that are not Float"));
        };
        let mut args = Vec::new();
        let mut values = HashMap::new();
        let mut tangents = HashMap::new();
        for (name, x) in fields {
            let (mut p, t) = self.expr(x, env)?;
            p = self.named(p);
            let varying = varying_name(&t, &p);
            args.push(Arg {
                primal: p.clone(),
                varying,
                frame: Shape::scalar(),
                cell: Shape::scalar(),
                atom: Atom::Float,
            });
            let t = t.unwrap_or_else(|| zeros(self.w, p.clone()));
            values.insert(name.clone(), p);
            tangents.insert(name.clone(), t);
        }
        let take = |m: &HashMap<String, ast::Expr>, f: &str| m.get(f).cloned().unwrap_or_else(|| float(0.0));
        let out = self.bind(record_of(self.w, &types, |f| take(&values, f)));
        if self.mode == Mode::Forward {
            let t = self.bind(record_of(self.w, &types, |f| take(&tangents, f)));
            return Ok((out, Some(t)));
        }
        let out_name = match &out.kind {
            ExprKind::Var(v) => v.name.clone(),
            _ => String::new(),
        };
        self.nodes.push(Node {
            out: out_name,
            rule: Rule::Record(fields.iter().map(|(n, _)| n.clone()).collect()),
            head: var("∂record"),
            args,
            principal: Shape::scalar(),
            result_cell: Shape::scalar(),
            span: e.span,
        });
        Ok((out, Some(var("∂unused"))))
    }

    /// A field of a record of Float arrays: the tangent's field; the adjoint
    /// a record of the cotangent in that field and zeros in the others.
    fn field(
        &mut self,
        e: &TExpr,
        record: &TExpr,
        field: &str,
        env: &Env,
    ) -> Result<(ast::Expr, Option<ast::Expr>), Diagnostic> {
        let Some(types) = float_record(&record.ty.atom) else {
            return Err(self.unsupported(e, "a field of a record with fields that are not Float"));
        };
        let (p, t) = self.expr(record, env)?;
        let out = self.bind(field_of(p.clone(), field));
        if self.mode == Mode::Forward {
            let t = t.map(|t| self.bind(field_of(t, field)));
            return Ok((out, t));
        }
        let (Some(_), ExprKind::Var(r)) = (&t, &p.kind) else {
            return Ok((out, None));
        };
        let out_name = match &out.kind {
            ExprKind::Var(v) => v.name.clone(),
            _ => String::new(),
        };
        self.nodes.push(Node {
            out: out_name,
            rule: Rule::Field(field.to_string(), types),
            head: var("∂field"),
            args: vec![Arg {
                primal: p.clone(),
                varying: Some(r.name.clone()),
                frame: Shape::scalar(),
                cell: Shape::scalar(),
                atom: Atom::Float,
            }],
            principal: Shape::scalar(),
            result_cell: Shape::scalar(),
            span: e.span,
        });
        Ok((out, Some(var("∂unused"))))
    }

    /// A frame of expressions: the tangent is the frame of the tangents;
    /// the adjoint of each element the cell of the cotangent at its place.
    fn frame(
        &mut self,
        shape: &[u64],
        elems: &[TExpr],
        env: &Env,
        span: Span,
    ) -> Result<(ast::Expr, Option<ast::Expr>), Diagnostic> {
        let mut args = Vec::new();
        let mut primals = Vec::new();
        let mut tangents = Vec::new();
        for x in elems {
            let (mut p, t) = self.expr(x, env)?;
            p = self.named(p);
            let varying = varying_name(&t, &p);
            let t = match t {
                Some(t) => t,
                None => loops::zeros_like(self.w, &x.ty.atom, p.clone()),
            };
            args.push(Arg {
                primal: p.clone(),
                varying,
                frame: Shape::scalar(),
                cell: Shape::scalar(),
                atom: Atom::Float,
            });
            primals.push(p);
            tangents.push(t);
        }
        let frame = |elems| {
            node(ExprKind::Frame {
                shape: shape.to_vec(),
                elems,
            })
        };
        let out = self.bind(frame(primals));
        if self.mode == Mode::Forward {
            let t = self.bind(frame(tangents));
            return Ok((out, Some(t)));
        }
        let out_name = match &out.kind {
            ExprKind::Var(v) => v.name.clone(),
            _ => String::new(),
        };
        self.nodes.push(Node {
            out: out_name,
            rule: Rule::Frame(shape.to_vec()),
            head: var("∂frame"),
            args,
            principal: Shape::scalar(),
            result_cell: Shape::scalar(),
            span,
        });
        Ok((out, Some(var("∂unused"))))
    }

    fn if_(
        &mut self,
        cond: &TExpr,
        then: &TExpr,
        otherwise: &TExpr,
        env: &Env,
    ) -> Result<(ast::Expr, Option<ast::Expr>), Diagnostic> {
        let c = self.w.expr(cond);
        let c = if matches!(c.kind, ExprKind::Var(_) | ExprKind::Array { .. }) {
            c
        } else {
            self.bind(c)
        };
        if self.mode == Mode::Forward {
            let mut branch = |x: &TExpr| -> Result<(ast::Expr, ast::Expr), Diagnostic> {
                let saved = std::mem::take(&mut self.binds);
                let (p, t) = self.expr(x, env)?;
                let t = t.unwrap_or_else(|| zeros(self.w, p.clone()));
                let binds = std::mem::replace(&mut self.binds, saved);
                Ok((let_in(binds.clone(), p), let_in(binds, t)))
            };
            let (pt, tt) = branch(then)?;
            let (po, to) = branch(otherwise)?;
            let p = self.bind(if_node(c.clone(), pt, po));
            let t = self.bind(if_node(c, tt, to));
            return Ok((p, Some(t)));
        }
        // Reverse: each branch's forward code is kept, to run again in the
        // branch's adjoint (no tape).
        let mut free = Vec::new();
        let mut seen = HashSet::new();
        for x in [then, otherwise] {
            x.any(&mut |y| {
                if let TExprKind::Var(v) = &y.kind
                    && matches!(env.get(v), Some(Some(_)))
                    && !matches!(y.ty.atom, Atom::Arrow(..))
                    && seen.insert(*v)
                {
                    free.push(self.w.var(*v).name);
                }
                false
            });
        }
        let branch = |x: &TExpr| -> Result<(ast::Expr, Branch, HashMap<String, Fields>), Diagnostic> {
            let mut sub = Walk::new(self.w, self.mode);
            sub.records = self.records.clone();
            let (p, t) = sub.expr(x, env)?;
            sub.restore();
            let out = varying_name(&t, &p);
            let primal = let_in(sub.binds.clone(), p);
            Ok((
                primal,
                Branch {
                    binds: sub.binds,
                    nodes: sub.nodes,
                    out,
                },
                sub.records,
            ))
        };
        let (pt, bt, rt) = branch(then)?;
        let (po, bo, ro) = branch(otherwise)?;
        // The records the branches bound (fresh names), for their adjoints.
        self.records.extend(rt);
        self.records.extend(ro);
        let p = self.bind(if_node(c.clone(), pt, po));
        let out = match &p.kind {
            ExprKind::Var(v) => v.name.clone(),
            _ => String::new(),
        };
        self.nodes.push(Node {
            out,
            rule: Rule::If(Box::new(IfNode {
                cond: c,
                branches: [bt, bo],
                free,
            })),
            head: var("∂if"),
            args: Vec::new(),
            principal: Shape::scalar(),
            result_cell: Shape::scalar(),
            span: then.span,
        });
        Ok((p, Some(var("∂unused"))))
    }

    fn unsupported(&self, e: &TExpr, what: &str) -> Diagnostic {
        let mode = match self.mode {
            Mode::Forward => "forward mode (`jvp`)",
            Mode::Reverse => "reverse mode (`vjp`, `grad`)",
        };
        Diagnostic::error(e.span, format!("cannot differentiate {what} in {mode} yet"))
    }

    fn app(&mut self, e: &TExpr, env: &Env) -> Result<(ast::Expr, Option<ast::Expr>), Diagnostic> {
        let (head, spine) = e.spine();
        // A frame of functions: each differentiated, the frame of their
        // derivatives applied.
        if !head.ty.shape.is_scalar() {
            return self.lifted_on_cells("an application", e, &spine, env);
        }
        // A call of a lambda bound by name: unlifted, its body inlined;
        // lifted, its derivative lifted over the same frame.
        let bound = match &head.kind {
            TExprKind::Var(v) => self.w.ad.bound_lambdas.borrow().get(v).cloned(),
            _ => None,
        };
        let known = match &head.kind {
            TExprKind::Var(v) => self.w.ad.lambdas.get(v).copied().or(bound.as_ref()),
            _ => lambda(head).map(|_| head),
        };
        if let Some(f) = known {
            if spine.iter().all(|(_, l)| l.principal.is_scalar()) {
                return self.inline(f, &spine, env, e);
            }
            return self.lifted_call(&[f], &[], head, &[], &spine, env, e);
        }
        // A polymorphic function, instantiated: its derivative, under the
        // same binders, instantiated the same way.
        if let Some((v, n)) = instantiated_var(head)
            && let Some((binders, f)) = self.w.ad.generic.get(&v)
            && binders.len() == n
        {
            let binders = binders.clone();
            return self.lifted_call(&[f], &[], head, &binders, &spine, env, e);
        }
        // A polymorphic lambda written in place and instantiated there
        // (what `rerank` writes): the same, its binders read off the literal.
        if let Some((literal, n)) = instantiated_literal(head)
            && let Some((binders, f)) = generic_lambda(literal)
            && binders.len() == n
        {
            return self.lifted_call(&[f], &[], head, &binders, &spine, env, e);
        }
        let Some(name) = head_name(head) else {
            return Err(self.unsupported(e, "this application"));
        };
        let what = format!("`{name}`");
        // Applied to more arguments than it takes: the function applied is
        // one `name` computes.
        if self.w.ad.arities.get(name).is_some_and(|&n| spine.len() > n) {
            return Err(self.unsupported(e, &format!("an application of a function that {what} computes")));
        }
        // An intrinsic taking functions, lifted over a frame of them: on
        // cells, by each of them.
        if spine
            .iter()
            .any(|(a, l)| matches!(a.ty.atom, Atom::Arrow(..)) && !l.arg_frame.is_scalar())
        {
            return self.lifted_on_cells(&what, e, &spine, env);
        }
        if let Some(result) = self.loop_form(name, e, &spine, env) {
            return result;
        }
        if let Some(result) = self.hist_form(name, e, &spine, env) {
            return result;
        }
        if let Some(result) = self.outer_form(name, e, &spine, env) {
            return result;
        }
        let (args, primals, tangents) = self.arguments(&spine, env)?;
        let head_code = self.w.expr(head);
        // No Float argument depends on the parameter (a Float made of a
        // Bool or an Int), or the function is flat: the derivative is zero.
        if tangents.iter().all(Option::is_none) || FLAT.contains(&name) {
            return Ok((app(head_code, primals), None));
        }
        let reduce_by = |op: &str| name == "reduce" && spine.len() == 2 && head_name(spine[0].0) == Some(op);
        let rule = if SCALAR.contains(&name) {
            Rule::Scalar(name)
        } else if name == "f.sum" || reduce_by("f.+") {
            Rule::Sum
        } else if reduce_by("f.max") && spine[1].1.arg_cell.segs().len() == 1 {
            Rule::Extremum("f.argmax")
        } else if reduce_by("f.min") && spine[1].1.arg_cell.segs().len() == 1 {
            Rule::Extremum("f.argmin")
        } else if (name == "f.product" && spine.last().is_some_and(|(_, l)| l.arg_cell.dims().is_some()))
            || (reduce_by("f.*") && spine.last().is_some_and(|(_, l)| l.arg_cell.segs().len() == 1))
        {
            Rule::Product
        } else if name == "select" {
            Rule::Select
        } else if LINEAR.contains(&name)
            || ((name == "scan" || name == "iscan" || name == "hist") && head_name(spine[0].0) == Some("f.+"))
            || (name == "reduce/zero" && hist::adds(spine[0].0))
        {
            Rule::Linear(name)
        } else if name == "f.dot" {
            Rule::Dot
        } else if name == "f.matmul" {
            Rule::Matmul
        } else {
            return Err(self.unsupported(e, &what));
        };
        let principal = spine
            .last()
            .map(|(_, l)| l.principal.clone())
            .unwrap_or_else(Shape::scalar);
        let out = self.bind(app(head_code.clone(), primals.clone()));
        let ExprKind::Var(out_name) = &out.kind else {
            return Err(self.unsupported(e, &what));
        };
        let out_name = out_name.name.clone();
        let tangent = if self.mode == Mode::Forward {
            let t = self.tangent(&rule, &head_code, &primals, &tangents, &args, &principal, &out);
            t.map(|t| self.bind(t))
        } else {
            Some(var("∂unused"))
        };
        let principal_rank = principal.segs().len();
        self.nodes.push(Node {
            out: out_name,
            rule,
            head: head_code,
            args,
            principal,
            result_cell: Shape::from_segs(
                e.ty.shape
                    .segs()
                    .get(principal_rank..)
                    .unwrap_or_default()
                    .to_vec(),
            ),
            span: e.span,
        });
        Ok((out, tangent))
    }

    /// An application lifted over a frame of functions, or an intrinsic
    /// that takes functions (`hist`, `outer`, the loops…) lifted over a
    /// frame, as a call of a function on cells lifted over it: `(λ (a …)
    /// (name f a …))`, the arguments that are not functions its
    /// parameters. Differentiated as a lifted call of a function the
    /// program defines is (its derivative on cells, by the intrinsic's
    /// rule, lifted over the same frame; the adjoints of arguments of
    /// shorter frames summed over the axes they were replicated along).
    ///
    /// A frame of functions is a frame of such functions on cells, one for
    /// each of its functions, and so is its derivative: the functions must
    /// be written out (a frame of them, or a name bound to one), each
    /// differentiated on its own.
    #[allow(clippy::type_complexity)]
    fn lifted_on_cells(
        &mut self,
        what: &str,
        e: &TExpr,
        spine: &[(&TExpr, &Lifted)],
        env: &Env,
    ) -> Result<(ast::Expr, Option<ast::Expr>), Diagnostic> {
        let (head, _) = e.spine();
        // An intrinsic's function arguments are written into the cells'
        // function; a frame of functions at the head is applied there.
        let intrinsic = head_name(head).is_some();
        let is_function = |a: &TExpr| intrinsic && matches!(a.ty.atom, Atom::Arrow(..));
        // Each function, as the frame of functions it is: its dimensions
        // and functions (one, of no dimensions, for a function).
        let functions = |x: &TExpr, frame: &Shape| -> Result<(Vec<u64>, Vec<TExpr>), Diagnostic> {
            if frame.is_scalar() {
                return Ok((Vec::new(), vec![x.clone()]));
            }
            self.function_frame(x).ok_or_else(|| {
                self.unsupported(
                    x,
                    &format!("{what} lifted over a frame of functions that is not written out"),
                )
            })
        };
        let head_frame = spine
            .first()
            .map(|(_, l)| l.fun_frame.clone())
            .unwrap_or_else(Shape::scalar);
        let heads = functions(head, &head_frame)?;
        let mut slots = Vec::new();
        for (a, l) in spine {
            slots.push(if is_function(a) {
                Some(functions(a, &l.arg_frame)?)
            } else {
                None
            });
        }
        // The frame of the functions on cells: the longest of the frames of
        // functions (each a prefix of the principal frame, so of it).
        let frame = slots
            .iter()
            .flatten()
            .chain([&heads])
            .map(|(dims, _)| dims)
            .max_by_key(|dims| dims.len())
            .cloned()
            .unwrap_or_default();
        // Function `j` of a frame of functions of dimensions `dims` (a
        // prefix of `frame`) for the cell at `j` of `frame`, row-major.
        let nth = |(dims, fs): &(Vec<u64>, Vec<TExpr>), j: u64| -> Option<TExpr> {
            let below: u64 = frame.get(dims.len()..).unwrap_or_default().iter().product();
            fs.get(usize::try_from(j / below.max(1)).ok()?).cloned()
        };
        let unlifted = |l: &Lifted, arg_cell: Shape| {
            let ty = Type {
                atom: l.result.atom.clone(),
                shape: l
                    .result
                    .shape
                    .strip_prefix(&l.principal)
                    .unwrap_or_else(|_| l.result.shape.clone()),
            };
            let lifted = Lifted {
                fun_frame: Shape::scalar(),
                arg_frame: Shape::scalar(),
                arg_cell,
                principal: Shape::scalar(),
                result: ty.clone(),
            };
            (lifted, ty)
        };
        let count: u64 = frame.iter().product();
        let mut cells = Vec::new();
        for j in 0..count {
            let Some(mut call) = nth(&heads, j) else {
                return Err(self.unsupported(e, what));
            };
            let mut params = Vec::new();
            for ((a, l), slot) in spine.iter().zip(&slots) {
                let arg = match slot {
                    Some(fs) => nth(fs, j).ok_or_else(|| self.unsupported(e, what))?,
                    None => {
                        let param = self.w.ad.fresh_var();
                        let ty = Type {
                            atom: a.ty.atom.clone(),
                            shape: l.arg_cell.clone(),
                        };
                        params.push((param, ty.clone()));
                        TExpr {
                            kind: TExprKind::Var(param),
                            ty,
                            span: a.span,
                        }
                    }
                };
                let (lifted, ty) = unlifted(l, arg.ty.shape.clone());
                call = TExpr {
                    kind: TExprKind::App {
                        func: Box::new(call),
                        arg: Box::new(arg),
                        lifted,
                    },
                    ty,
                    span: e.span,
                };
            }
            cells.push(curried(params, call, e.span));
        }
        let args: Vec<(&TExpr, &Lifted)> = spine
            .iter()
            .zip(&slots)
            .filter(|(_, slot)| slot.is_none())
            .map(|(a, _)| *a)
            .collect();
        if args.is_empty() || cells.is_empty() {
            return Err(self.unsupported(e, what));
        }
        // The primal: the application as written, or (an intrinsic) the
        // functions on cells applied to the other arguments.
        let callee = match (intrinsic, cells.as_slice()) {
            (false, _) => head.clone(),
            (true, [one]) if frame.is_empty() => one.clone(),
            (true, _) => TExpr {
                ty: Type {
                    atom: cells.first().map(|c| c.ty.atom.clone()).unwrap_or(Atom::Float),
                    shape: Shape::from_dims(frame.iter().map(|&d| remora_types::Dim::nat(d))),
                },
                kind: TExprKind::Frame {
                    shape: frame.clone(),
                    elems: cells.clone(),
                },
                span: e.span,
            },
        };
        let cells: Vec<&TExpr> = cells.iter().collect();
        self.lifted_call(&cells, &frame, &callee, &[], &args, env, e)
    }

    /// The function `a` is, when known: a lambda, a name bound to one (by
    /// `def`, `let`, or a call the walk inlined), or any other function
    /// (a primitive, an instantiation, a partial application) as the
    /// lambda applying it.
    fn function_of(&self, a: &TExpr) -> Option<TExpr> {
        if !matches!(a.ty.atom, Atom::Arrow(..)) || !a.ty.shape.is_scalar() {
            return None;
        }
        if lambda(a).is_some() {
            return Some(a.clone());
        }
        if let TExprKind::Var(v) = &a.kind {
            let bound = self.w.ad.bound_lambdas.borrow().get(v).cloned();
            return self.w.ad.lambdas.get(v).map(|f| (*f).clone()).or(bound);
        }
        eta(self.w, a, arrows(&a.ty))
    }

    /// The functions of a frame of functions written out (a frame of them,
    /// an array of lambdas, or a name bound to one), with its dimensions.
    fn function_frame(&self, x: &TExpr) -> Option<(Vec<u64>, Vec<TExpr>)> {
        let function = |kind: TExprKind| TExpr {
            kind,
            ty: Type::scalar(x.ty.atom.clone()),
            span: x.span,
        };
        match &x.kind {
            TExprKind::Var(v) => match self.w.ad.frames.get(v) {
                Some(f) => self.function_frame(f),
                None => {
                    let bound = self.w.ad.bound_frames.borrow().get(v).cloned();
                    bound.and_then(|f| self.function_frame(&f))
                }
            },
            TExprKind::Array { shape, atoms } => {
                let fs = atoms
                    .iter()
                    .map(|a| {
                        function(TExprKind::Array {
                            shape: Vec::new(),
                            atoms: vec![a.clone()],
                        })
                    })
                    .collect();
                Some((shape.clone(), fs))
            }
            TExprKind::Frame { shape, elems } => {
                let mut dims = shape.clone();
                let mut fs = Vec::new();
                let mut inner = None;
                for x in elems {
                    let (d, f) = if x.ty.shape.is_scalar() {
                        (Vec::new(), vec![x.clone()])
                    } else {
                        self.function_frame(x)?
                    };
                    if inner.get_or_insert_with(|| d.clone()) != &d {
                        return None;
                    }
                    fs.extend(f);
                }
                dims.extend(inner.unwrap_or_default());
                Some((dims, fs))
            }
            _ => None,
        }
    }

    /// The arguments of an application: each one's primal (bound to a name
    /// when it is a computation, so the adjoint code does not run it again)
    /// and tangent.
    #[allow(clippy::type_complexity)]
    fn arguments(
        &mut self,
        spine: &[(&TExpr, &Lifted)],
        env: &Env,
    ) -> Result<(Vec<Arg>, Vec<ast::Expr>, Vec<Option<ast::Expr>>), Diagnostic> {
        let mut args = Vec::new();
        let mut primals = Vec::new();
        let mut tangents = Vec::new();
        for (a, lifted) in spine {
            let (mut p, mut t) = self.expr(a, env)?;
            if matches!(a.ty.atom, Atom::Arrow(..)) {
                // A function has no tangent; one that closes over varying
                // values is differentiated where it is applied.
                t = None;
            } else if self.mode == Mode::Reverse {
                p = self.named(p);
            }
            let varying = varying_name(&t, &p);
            args.push(Arg {
                primal: p.clone(),
                varying,
                frame: lifted.arg_frame.clone(),
                cell: lifted.arg_cell.clone(),
                atom: a.ty.atom.clone(),
            });
            primals.push(p);
            tangents.push(t);
        }
        Ok((args, primals, tangents))
    }

    fn inline(
        &mut self,
        f: &TExpr,
        spine: &[(&TExpr, &Lifted)],
        env: &Env,
        e: &TExpr,
    ) -> Result<(ast::Expr, Option<ast::Expr>), Diagnostic> {
        let mut inner = env.clone();
        let mut body = f;
        for (a, _) in spine {
            let Some((param, b)) = lambda(body) else {
                return Err(self.unsupported(e, "this call"));
            };
            // A function passed on: known where the body applies it.
            if let Some(f) = self.function_of(a) {
                self.w.ad.bound_lambdas.borrow_mut().insert(param, f);
            }
            // A frame of functions written out, passed on: its functions
            // known where the body applies it.
            if matches!(a.ty.atom, Atom::Arrow(..))
                && !a.ty.shape.is_scalar()
                && let Some((shape, elems)) = self.function_frame(a)
            {
                let frame = TExpr {
                    kind: TExprKind::Frame { shape, elems },
                    ty: a.ty.clone(),
                    span: a.span,
                };
                self.w.ad.bound_frames.borrow_mut().insert(param, frame);
            }
            let (p, t) = self.expr(a, env)?;
            self.bind_var(param, p, t, &mut inner, e.span);
            body = b;
        }
        self.expr(body, &inner)
    }

    /// A lifted call of a function defined in the program: the primal is
    /// the call; the tangent (the adjoints) the function's forward (reverse)
    /// derivative lifted over the same frame. `fs` is the function, or the
    /// functions of a frame of functions of dimensions `frame` (row-major),
    /// whose derivative is the frame of their derivatives.
    #[allow(clippy::too_many_arguments)]
    fn lifted_call(
        &mut self,
        fs: &[&TExpr],
        frame: &[u64],
        head: &TExpr,
        binders: &[Binder],
        spine: &[(&TExpr, &Lifted)],
        env: &Env,
        e: &TExpr,
    ) -> Result<(ast::Expr, Option<ast::Expr>), Diagnostic> {
        let cells: Vec<_> = fs.iter().map(|f| params_of(f, spine.len())).collect();
        let Some((_, _, rty)) = cells.first().cloned() else {
            return Err(self.unsupported(e, "a lifted call of a frame of no functions"));
        };
        if cells.iter().any(|(params, ..)| params.len() != spine.len()) {
            return Err(self.unsupported(e, "a lifted call of a function of this shape"));
        }
        let (mut args, primals, mut tangents) = self.arguments(spine, env)?;
        // The varying variables the functions close over: parameters of
        // their derivatives too, whole values replicated over the frame.
        let mut free = Vec::new();
        let mut seen = HashSet::new();
        for (_, body, _) in &cells {
            free.extend(
                varying_free(self.w, body, env)
                    .into_iter()
                    .filter(|(v, ..)| seen.insert(*v)),
            );
        }
        // A function argument (one for the whole frame) is known where the
        // functions apply it; one that closes over varying values makes
        // them depend on those values too.
        let mut closures = vec![false; spine.len()];
        for (k, (a, l)) in spine.iter().enumerate() {
            let Some(f) = l.arg_frame.is_scalar().then(|| self.function_of(a)).flatten() else {
                continue;
            };
            for (params, ..) in &cells {
                if let Some((param, _)) = params.get(k) {
                    self.w.ad.bound_lambdas.borrow_mut().insert(*param, f.clone());
                }
            }
            let closed = varying_free(self.w, &f, env);
            closures[k] = !closed.is_empty();
            free.extend(closed.into_iter().filter(|(v, ..)| seen.insert(*v)));
        }
        let head_code = self.w.expr(head);
        if tangents.iter().all(Option::is_none) && free.is_empty() {
            return Ok((app(head_code, primals), None));
        }
        let out = self.bind(app(head_code.clone(), primals.clone()));
        let mut primals = primals;
        let varying: Vec<bool> = tangents
            .iter()
            .zip(&closures)
            .map(|(t, &closure)| t.is_some() || closure)
            .collect();
        let closed: Vec<Param> = free
            .iter()
            .map(|(v, ty, _)| Param {
                var: *v,
                ty: ty.clone(),
                varying: true,
            })
            .collect();
        // Each function's parameters, then the variables they close over.
        let cells: Vec<(Vec<Param>, &TExpr)> = cells
            .into_iter()
            .map(|(params, body, _)| {
                let params = params
                    .into_iter()
                    .zip(&varying)
                    .map(|((var, ty), &varying)| Param { var, ty, varying })
                    .chain(closed.iter().map(|p| Param {
                        var: p.var,
                        ty: p.ty.clone(),
                        varying: true,
                    }))
                    .collect();
                (params, body)
            })
            .collect();
        for (v, ty, t) in free {
            let name = self.w.var(v).name;
            primals.push(var(&name));
            tangents.push(Some(var(&t)));
            args.push(Arg {
                primal: var(&name),
                varying: Some(name),
                frame: Shape::scalar(),
                cell: ty.shape.clone(),
                atom: ty.atom.clone(),
            });
        }
        let out_name = match &out.kind {
            ExprKind::Var(v) => v.name.clone(),
            _ => String::new(),
        };
        let principal = spine
            .last()
            .map(|(_, l)| l.principal.clone())
            .unwrap_or_else(Shape::scalar);
        let w = self.w;
        // The derivative of each function (instantiated as the head is),
        // as a frame when the functions are one.
        let derivative = |d: &CellDerivative| {
            let ds = cells
                .iter()
                .map(|(params, body)| d(params, body))
                .collect::<Result<Vec<_>, _>>()?;
            Ok::<_, Diagnostic>(match ds.as_slice() {
                [d] if frame.is_empty() && binders.is_empty() => d.clone(),
                [d] if frame.is_empty() => instantiated(&head_code, under_binders(w, binders, d.clone())),
                _ => node(ExprKind::Frame {
                    shape: frame.to_vec(),
                    elems: ds,
                }),
            })
        };
        if self.mode == Mode::Forward {
            let d = derivative(&|params, body| forward_fn(w, params, body))?;
            let mut all = primals;
            all.extend(tangents.into_iter().flatten());
            let t = self.bind(app(d, all));
            return Ok((out, Some(t)));
        }
        let params: Vec<&Param> = cells
            .first()
            .map(|(ps, _)| ps.iter().collect())
            .unwrap_or_default();
        // (A function has no cotangent.)
        let has_cotangent = |p: &Param| p.varying && !matches!(p.ty.atom, Atom::Arrow(..));
        let targets: Vec<usize> = (0..params.len()).filter(|&i| has_cotangent(params[i])).collect();
        let rule = if targets.len() > 1 {
            // One forward and one backward pass for all the varying
            // parameters: a record of their cotangents.
            Rule::CallAll(derivative(&|params, body| {
                let ReverseCode {
                    params: mut names,
                    ct,
                    body: adj,
                    ..
                } = reverse_many(w, params, body, &targets)?;
                names.push((ct, rty.clone()));
                Ok(lambdas(w, &names, adj))
            })?)
        } else {
            let mut fns = Vec::new();
            for (i, p) in params.iter().enumerate() {
                if !has_cotangent(p) {
                    fns.push(None);
                    continue;
                }
                fns.push(Some(derivative(&|params, body| {
                    let ReverseCode {
                        params: mut names,
                        ct,
                        body: adj,
                        ..
                    } = reverse_core(w, params, body, i)?;
                    names.push((ct, rty.clone()));
                    Ok(lambdas(w, &names, adj))
                })?));
            }
            Rule::Call(fns)
        };
        let principal_rank = principal.segs().len();
        self.nodes.push(Node {
            out: out_name,
            rule,
            head: head_code,
            args,
            principal,
            result_cell: Shape::from_segs(
                e.ty.shape
                    .segs()
                    .get(principal_rank..)
                    .unwrap_or_default()
                    .to_vec(),
            ),
            span: e.span,
        });
        Ok((out, Some(var("∂unused"))))
    }

    /// A rule's tangent, lifted like the function.
    #[allow(clippy::too_many_arguments)]
    fn tangent(
        &self,
        rule: &Rule,
        head: &ast::Expr,
        p: &[ast::Expr],
        t: &[Option<ast::Expr>],
        args: &[Arg],
        principal: &Shape,
        out: &ast::Expr,
    ) -> Option<ast::Expr> {
        let w = self.w;
        let or_zero = |i: usize| -> ast::Expr {
            match t.get(i).cloned().flatten() {
                Some(x) => x,
                None => zeros(w, p.get(i).cloned().unwrap_or_else(|| float(0.0))),
            }
        };
        match rule {
            Rule::Scalar(op) => self.scalar_tangent(op, p, t, args, principal, out),
            Rule::Sum => {
                let mut ts = p.to_vec();
                if let (Some(Some(x)), Some(last)) = (t.last(), ts.last_mut()) {
                    *last = x.clone();
                }
                Some(app(head.clone(), ts))
            }
            Rule::Extremum(arg) => {
                // The tangent of the first item equal to the result.
                let (x, dx) = (p.get(1).cloned()?, t.get(1).cloned().flatten()?);
                let cell = float_type(&args.get(1)?.cell);
                Some(lift(w, vec![(x, cell.clone()), (dx, cell)], |v| {
                    call("index", vec![v[1].clone(), call(arg, vec![v[0].clone()])])
                }))
            }
            Rule::Select => Some(app(
                head.clone(),
                vec![p.first()?.clone(), or_zero(1), or_zero(2)],
            )),
            Rule::Product => {
                let (x, dx) = (p.last().cloned()?, t.last().cloned().flatten()?);
                let cell = float_type(&args.last()?.cell);
                let others = |x: ast::Expr| product_of_others(w, x, &cell.shape);
                Some(lift(w, vec![(x, cell.clone()), (dx, cell.clone())], |v| {
                    call(
                        "f.sum",
                        vec![call("f.*", vec![v[1].clone(), others(v[0].clone())])],
                    )
                }))
            }
            // The value returned, not traced again.
            Rule::Linear("trace" | "trace-file") => Some(or_zero(p.len().saturating_sub(1))),
            // Sorting permutes: the tangent permuted the same way.
            Rule::Linear("f.sort") => {
                let (x, dx) = (p.first().cloned()?, t.first().cloned().flatten()?);
                let cell = float_type(&args.first()?.cell);
                Some(lift(w, vec![(x, cell.clone()), (dx, cell)], |v| {
                    call("nth", vec![v[1].clone(), call("f.grade", vec![v[0].clone()])])
                }))
            }
            // By the comparator's permutation: result item i is item perm[i],
            // written as a scatter by the inverse permutation (no gather whose
            // reading of the index vector could be ambiguous).
            Rule::Linear("sort-by") => {
                let lt = p.first().cloned()?;
                let (x, dx) = (p.get(1).cloned()?, t.get(1).cloned().flatten()?);
                let cell = float_type(&args.get(1)?.cell);
                Some(lift(w, vec![(x, cell.clone()), (dx, cell)], |v| {
                    let perm = call("grade-by", vec![lt.clone(), v[0].clone()]);
                    call(
                        "scatter",
                        vec![zeros(w, v[1].clone()), call("grade", vec![perm]), v[1].clone()],
                    )
                }))
            }
            Rule::Linear(_) => Some(app(
                head.clone(),
                args.iter()
                    .enumerate()
                    .map(|(i, a)| {
                        if a.atom == Atom::Float {
                            or_zero(i)
                        } else {
                            a.primal.clone()
                        }
                    })
                    .collect(),
            )),
            Rule::Dot | Rule::Matmul => {
                let a = t.first().cloned().flatten().map(|ta| {
                    app(
                        head.clone(),
                        vec![ta, p.get(1).cloned().unwrap_or_else(|| float(0.0))],
                    )
                });
                let b = t.get(1).cloned().flatten().map(|tb| {
                    app(
                        head.clone(),
                        vec![p.first().cloned().unwrap_or_else(|| float(0.0)), tb],
                    )
                });
                match (a, b) {
                    (Some(a), Some(b)) => Some(call("f.+", vec![a, b])),
                    (a, b) => a.or(b),
                }
            }
            Rule::Alias
            | Rule::Call(_)
            | Rule::CallAll(_)
            | Rule::If(_)
            | Rule::Loop(_)
            | Rule::Unbox(_)
            | Rule::Hist(_)
            | Rule::Outer(_)
            | Rule::Frame(_)
            | Rule::Record(_)
            | Rule::Field(..) => None,
        }
    }

    /// A scalar primitive's tangent, lifted like the primitive.
    fn scalar_tangent(
        &self,
        op: &str,
        p: &[ast::Expr],
        t: &[Option<ast::Expr>],
        args: &[Arg],
        principal: &Shape,
        out: &ast::Expr,
    ) -> Option<ast::Expr> {
        let w = self.w;
        // A tangent of an argument whose frame is smaller than the
        // principal frame is replicated to it.
        let full = |i: usize, x: ast::Expr| -> ast::Expr {
            if args.get(i).map(|a| &a.frame) == Some(principal) {
                x
            } else {
                broadcast(w, x, out.clone(), &Atom::Float)
            }
        };
        let pa = p.first().cloned().unwrap_or_else(|| float(0.0));
        let pb = p.get(1).cloned().unwrap_or_else(|| float(0.0));
        let ta = t.first().cloned().flatten();
        let tb = t.get(1).cloned().flatten();
        let f2 = |f: &str, a: ast::Expr, b: ast::Expr| call(f, vec![a, b]);
        let sum = |a: Option<ast::Expr>, b: Option<ast::Expr>| match (a, b) {
            (Some(a), Some(b)) => Some(f2("f.+", a, b)),
            (Some(a), None) => Some(full(0, a)),
            (None, Some(b)) => Some(full(1, b)),
            (None, None) => None,
        };
        match op {
            "f.+" | "f.-" | "f.*" | "f./" | "f.^" | "f.atan2" | "f.max" | "f.min" | "f.mod" => {
                let da = ta.map(|a| binary_partial(op, 0, a, &pa, &pb, out));
                let db = tb.map(|b| binary_partial(op, 1, b, &pa, &pb, out));
                sum(da, db)
            }
            "f.clip" => {
                let pc = p.get(2).cloned().unwrap_or_else(|| float(0.0));
                let terms: Vec<ast::Expr> = t
                    .iter()
                    .enumerate()
                    .filter_map(|(i, ti)| ti.clone().map(|ti| clip_partial(i, ti, &pa, &pb, &pc)))
                    .collect();
                terms.into_iter().reduce(|a, b| f2("f.+", a, b))
            }
            _ => ta.map(|a| unary_derivative(op, a, pa, out.clone())),
        }
    }

    /// The adjoint contributions of one node to its arguments.
    fn adjoint(&mut self, n: &Node, adjoints: &mut HashMap<String, String>) -> Result<(), Diagnostic> {
        let Some(ct) = self.read_adjoint(&n.out, adjoints) else {
            return Ok(());
        };
        let w = self.w;
        if let Rule::Unbox(node) = &n.rule {
            return self.unbox_adjoint(node, &ct, adjoints);
        }
        if let Rule::If(node) = &n.rule {
            return self.if_adjoint(node, &ct, adjoints);
        }
        if let Rule::Loop(node) = &n.rule {
            return self.loop_adjoint(node, &ct, adjoints);
        }
        if let Rule::Hist(node) = &n.rule {
            return self.hist_adjoint(node, &ct, adjoints, n.span);
        }
        if let Rule::Outer(node) = &n.rule {
            return self.outer_adjoint(node, &ct, adjoints, n.span);
        }
        let pa = n
            .args
            .first()
            .map(|a| a.primal.clone())
            .unwrap_or_else(|| float(0.0));
        let pb = n
            .args
            .get(1)
            .map(|a| a.primal.clone())
            .unwrap_or_else(|| float(0.0));
        let out = var(&n.out);
        let result_cell = float_type(&Shape::from_segs(
            n.args
                .last()
                .map(|a| a.cell.segs().len().saturating_sub(result_cell_rank(n)))
                .and_then(|k| n.args.last().and_then(|a| a.cell.segs().get(k..)))
                .unwrap_or_default()
                .to_vec(),
        ));
        // `Rule::CallAll`: the record of every argument's cotangent, once.
        let mut every: Option<ast::Expr> = None;
        for (i, arg) in n.args.iter().enumerate() {
            let Some(target) = &arg.varying else { continue };
            let cell = float_type(&arg.cell);
            let contribution = match &n.rule {
                Rule::Alias => ct.clone(),
                Rule::If(_) | Rule::Loop(_) | Rule::Unbox(_) | Rule::Hist(_) | Rule::Outer(_) => continue,
                Rule::Sum => {
                    if i + 1 != n.args.len() {
                        continue;
                    }
                    // The adjoint of each result cell, replicated over
                    // the axes the cell summed.
                    let summed = Shape::from_segs(
                        arg.cell
                            .segs()
                            .get(..arg.cell.segs().len().saturating_sub(result_cell_rank(n)))
                            .unwrap_or_default()
                            .to_vec(),
                    );
                    let kept = Shape::from_segs(
                        arg.cell
                            .segs()
                            .get(summed.segs().len()..)
                            .unwrap_or_default()
                            .to_vec(),
                    );
                    let rep = node(ExprKind::IApp {
                        func: Box::new(node(ExprKind::IApp {
                            func: Box::new(node(ExprKind::TApp {
                                func: Box::new(var("replicate")),
                                arg: w.ty(&Type::scalar(Atom::Float)),
                            })),
                            arg: ast::Ispace::Shape(w.shape(&summed)),
                        })),
                        arg: ast::Ispace::Shape(w.shape(&kept)),
                    });
                    app(rep, vec![ct.clone()])
                }
                Rule::Extremum(which) => {
                    if i + 1 != n.args.len() {
                        continue;
                    }
                    // To the first extreme item only, as forward mode's
                    // tangent is that item's (at a tie the two modes
                    // must choose alike for the transpose law).
                    let positions = node(ExprKind::IApp {
                        func: Box::new(var("iota/static")),
                        arg: ast::Ispace::Shape(w.shape(&arg.cell)),
                    });
                    lift(
                        w,
                        vec![
                            (arg.primal.clone(), cell.clone()),
                            (out.clone(), result_cell.clone()),
                            (ct.clone(), result_cell.clone()),
                        ],
                        |v| {
                            call(
                                "select",
                                vec![
                                    call("==", vec![positions.clone(), call(which, vec![v[0].clone()])]),
                                    v[2].clone(),
                                    float(0.0),
                                ],
                            )
                        },
                    )
                }
                Rule::Select => {
                    if i == 0 {
                        continue;
                    }
                    let c = pa.clone();
                    let z = zeros(w, ct.clone());
                    let (a, b) = if i == 1 { (ct.clone(), z) } else { (z, ct.clone()) };
                    app(n.head.clone(), vec![c, a, b])
                }
                Rule::Product => {
                    if i + 1 != n.args.len() {
                        continue;
                    }
                    lift(
                        w,
                        vec![
                            (ct.clone(), result_cell.clone()),
                            (arg.primal.clone(), cell.clone()),
                        ],
                        |v| {
                            call(
                                "f.*",
                                vec![v[0].clone(), product_of_others(w, v[1].clone(), &arg.cell)],
                            )
                        },
                    )
                }
                Rule::Linear(op) => {
                    let mut cells = vec![(ct.clone(), float_type(&n.result_cell))];
                    let mut place = Vec::new();
                    for a in &n.args {
                        if matches!(a.atom, Atom::Arrow(..)) {
                            place.push(None);
                        } else {
                            place.push(Some(cells.len()));
                            cells.push((
                                a.primal.clone(),
                                Type {
                                    atom: a.atom.clone(),
                                    shape: a.cell.clone(),
                                },
                            ));
                        }
                    }
                    let mut failed = None;
                    let c = lift(w, cells, |v| {
                        let x = |j: usize| {
                            place
                                .get(j)
                                .copied()
                                .flatten()
                                .and_then(|k| v.get(k).cloned())
                                .unwrap_or_else(|| float(0.0))
                        };
                        let ct = v.first().cloned().unwrap_or_else(|| float(0.0));
                        match self.transpose(op, i, ct, x, n, arg) {
                            Ok(c) => c,
                            Err(d) => {
                                failed = Some(d);
                                float(0.0)
                            }
                        }
                    });
                    if let Some(d) = failed {
                        return Err(d);
                    }
                    c
                }
                Rule::Dot => {
                    let other = if i == 0 { &pb } else { &pa };
                    let other_cell = n
                        .args
                        .get(1 - i)
                        .map(|a| float_type(&a.cell))
                        .unwrap_or_else(|| cell.clone());
                    lift(
                        w,
                        vec![
                            (ct.clone(), float_type(&Shape::scalar())),
                            (other.clone(), other_cell),
                        ],
                        |v| call("f.*", vec![v[0].clone(), v[1].clone()]),
                    )
                }
                Rule::Matmul => {
                    let other = if i == 0 { &pb } else { &pa };
                    let other_cell = n
                        .args
                        .get(1 - i)
                        .map(|a| float_type(&a.cell))
                        .unwrap_or_else(|| cell.clone());
                    let out_cell = matmul_out_cell(n).unwrap_or_else(|| cell.clone());
                    lift(
                        w,
                        vec![(ct.clone(), out_cell), (other.clone(), other_cell)],
                        |v| {
                            if i == 0 {
                                call(
                                    "f.matmul",
                                    vec![v[0].clone(), call("transpose2d", vec![v[1].clone()])],
                                )
                            } else {
                                call(
                                    "f.matmul",
                                    vec![call("transpose2d", vec![v[1].clone()]), v[0].clone()],
                                )
                            }
                        },
                    )
                }
                Rule::Record(names) => {
                    let Some(name) = names.get(i) else { continue };
                    field_of(ct.clone(), name)
                }
                Rule::Field(name, _) if self.records.contains_key(target) => {
                    // Kept per field: the record is built once, when its
                    // adjoint is read, with zeros only in the fields no
                    // contribution reached.
                    let c = self.bind(ct.clone());
                    self.accumulate(&field_key(target, name), c, adjoints);
                    continue;
                }
                Rule::Field(name, fields) => record_of(w, fields, |f| {
                    if f == name {
                        ct.clone()
                    } else {
                        zeros(w, field_of(arg.primal.clone(), f))
                    }
                }),
                Rule::Frame(shape) => {
                    // The element's place, axis by axis (row-major).
                    let mut place = Vec::new();
                    let mut k = i as u64;
                    for d in shape.iter().rev() {
                        place.push(k % d.max(&1));
                        k /= d.max(&1);
                    }
                    place
                        .iter()
                        .rev()
                        .fold(ct.clone(), |c, &j| call("nth", vec![c, int(j as i64)]))
                }
                Rule::Call(fns) => {
                    let Some(Some(f)) = fns.get(i) else { continue };
                    let mut all: Vec<ast::Expr> = n.args.iter().map(|a| a.primal.clone()).collect();
                    all.push(ct.clone());
                    app(f.clone(), all)
                }
                Rule::CallAll(f) => {
                    let all = match &every {
                        Some(all) => all.clone(),
                        None => {
                            let mut xs: Vec<ast::Expr> = n.args.iter().map(|a| a.primal.clone()).collect();
                            xs.push(ct.clone());
                            let all = self.bind(app(f.clone(), xs));
                            every = Some(all.clone());
                            all
                        }
                    };
                    field_of(all, &grad_field(i))
                }
                Rule::Scalar(op) => match (*op, i) {
                    ("f.+" | "f.-" | "f.*" | "f./" | "f.^" | "f.atan2" | "f.max" | "f.min" | "f.mod", _) => {
                        binary_partial(op, i, ct.clone(), &pa, &pb, &out)
                    }
                    ("f.clip", _) => {
                        let pc = n
                            .args
                            .get(2)
                            .map(|a| a.primal.clone())
                            .unwrap_or_else(|| float(0.0));
                        clip_partial(i, ct.clone(), &pa, &pb, &pc)
                    }
                    _ => unary_derivative(op, ct.clone(), pa.clone(), out.clone()),
                },
            };
            // Summed over the frame axes the argument was replicated along.
            let extra = Shape::from_segs(
                n.principal
                    .segs()
                    .get(arg.frame.segs().len()..)
                    .unwrap_or_default()
                    .to_vec(),
            );
            let contribution = if extra.is_scalar() || matches!(n.rule, Rule::Alias) {
                contribution
            } else if let Some(fields) = self.records.get(target).cloned() {
                // A record replicated along the extra axes: each field summed.
                let c = self.bind(contribution);
                let mut sums = HashMap::new();
                for (f, t) in &fields {
                    sums.insert(
                        f.clone(),
                        self.sum_axes(field_of(c.clone(), f), &extra, &t.shape, n.span)?,
                    );
                }
                record_of(w, &fields, |f| sums.remove(f).unwrap_or_else(|| float(0.0)))
            } else {
                self.sum_axes(contribution, &extra, &arg.cell, n.span)?
            };
            let c = self.bind(contribution);
            self.accumulate(target, c, adjoints);
        }
        Ok(())
    }

    /// The transpose of the linear function `op` for its argument `i`,
    /// on cells: `ct` the result cell's cotangent, `x(j)` argument `j`'s cell.
    fn transpose(
        &self,
        op: &str,
        i: usize,
        ct: ast::Expr,
        x: impl Fn(usize) -> ast::Expr,
        n: &Node,
        arg: &Arg,
    ) -> Result<ast::Expr, Diagnostic> {
        let w = self.w;
        let one = |e: ast::Expr| {
            node(ExprKind::Frame {
                shape: vec![1],
                elems: vec![e],
            })
        };
        let z = |e: ast::Expr| zeros(w, e);
        let append = |a: ast::Expr, b: ast::Expr| call("append", vec![a, b]);
        // The same instantiation, of another function of the same binders.
        let like = |f: &str, e: ast::Expr| app(instantiated(&n.head, var(f)), vec![e]);
        let reshape = |e: ast::Expr, from: &Shape, to: &Shape| reshaped(w, e, from, to);
        let scan_back = |e: ast::Expr| {
            call(
                "reverse",
                vec![call("iscan", vec![var("f.+"), call("reverse", vec![e])])],
            )
        };
        Ok(match (op, i) {
            ("reverse", _) => call("reverse", vec![ct]),
            ("transpose2d", _) => call("transpose2d", vec![ct]),
            ("transpose", _) => {
                let Some(inverse) = inverse_permutation(&n.head) else {
                    return Err(Diagnostic::error(
                        n.span,
                        "cannot differentiate `transpose` by a permutation not written out in reverse mode yet",
                    ));
                };
                let f = node(ExprKind::TApp {
                    func: Box::new(node(ExprKind::IApp {
                        func: Box::new(var("transpose")),
                        arg: ast::Ispace::Shape(ast::Shape {
                            kind: ast::ShapeKind::Splice(
                                inverse
                                    .into_iter()
                                    .map(|k| {
                                        ast::Ispace::Dim(ast::Dim {
                                            kind: ast::DimKind::Nat(k),
                                            span: sp(),
                                        })
                                    })
                                    .collect(),
                            ),
                            span: sp(),
                        }),
                    })),
                    arg: w.ty(&Type::scalar(Atom::Float)),
                });
                app(f, vec![ct])
            }
            ("rotate", 0) => call("rotate", vec![ct, call("-", vec![int(0), x(1)])]),
            ("head", _) => append(one(ct), z(call("tail", vec![x(0)]))),
            ("last", _) => append(z(call("curtail", vec![x(0)])), one(ct)),
            ("tail", _) => append(one(z(call("head", vec![x(0)]))), ct),
            ("curtail", _) => append(ct, one(z(call("last", vec![x(0)])))),
            ("take", _) => append(ct, z(like("drop", x(0)))),
            ("drop", _) => append(z(like("take", x(0))), ct),
            ("take-right", _) => append(z(like("drop-right", x(0))), ct),
            ("drop-right", _) => append(ct, z(like("take-right", x(0)))),
            ("append", 0) => like("take", ct),
            ("append", _) => like("drop", ct),
            // One place of the cell; the sum over the frame axes the cell
            // was replicated along (several indices) adds them up.
            ("nth" | "index", 0) => call("scatter", vec![z(x(0)), one(x(1)), one(ct)]),
            ("reshape" | "flatten", _) => reshape(ct, &n.result_cell, &arg.cell),
            ("replicate", _) => {
                let k = n.result_cell.segs().len().saturating_sub(arg.cell.segs().len());
                let f = Shape::from_segs(n.result_cell.segs().get(..k).unwrap_or_default().to_vec());
                self.sum_axes(ct, &f, &arg.cell, n.span)?
            }
            ("iscan", 1) => scan_back(ct),
            ("scan", 1) => call("reduce", vec![var("f.+"), ct]),
            // A sum from a seed: the seed's cotangent is the sum's, and so
            // is each item's.
            ("reduce/zero", 1) => ct,
            ("reduce/zero", 2) => {
                let item = float_type(&Shape::from_segs(
                    arg.cell.segs().get(1..).unwrap_or_default().to_vec(),
                ));
                app(lam(w, &w.ad.fresh(), &item, ct), vec![x(2)])
            }
            ("scan", 2) => scan_back(call("tail", vec![ct])),
            // hist by f.+ adds each value into its bin: the adjoint of the
            // initial bins is the cotangent, of each value its bin's.
            // (Every bin starts from the neutral cell.)
            ("hist", 1) => {
                let bins = Shape::from_segs(n.result_cell.segs().first().cloned().into_iter().collect());
                self.sum_axes(ct, &bins, &arg.cell, n.span)?
            }
            ("hist", 3) => call("nth", vec![ct, x(2)]),
            // scatter overwrites: the places written get no cotangent in the
            // destination; each value its place's (with repeated places, each
            // value gets it, though only one was kept).
            ("scatter", 0) => call("scatter", vec![ct, x(1), z(x(2))]),
            ("scatter", 2) => call("nth", vec![ct, x(1)]),
            // The cotangent sent back to where each item came from.
            ("f.sort", 0) => call("scatter", vec![z(x(0)), call("f.grade", vec![x(0)]), ct]),
            ("sort-by", 1) => {
                let lt = n
                    .args
                    .first()
                    .map(|a| a.primal.clone())
                    .unwrap_or_else(|| float(0.0));
                call("scatter", vec![z(x(1)), call("grade-by", vec![lt, x(1)]), ct])
            }
            // One place of the matrix: the row scattered into, scattered in.
            ("index2d", 0) => {
                let (i, j) = (
                    call("index", vec![x(1), int(0)]),
                    call("index", vec![x(1), int(1)]),
                );
                let row = call(
                    "scatter",
                    vec![z(call("nth", vec![x(0), i.clone()])), one(j), one(ct)],
                );
                call("scatter", vec![z(x(0)), one(i), one(row)])
            }
            // Each window's cotangent added into the places it covers: a
            // histogram by f.+ of the flattened windows, binned by the
            // windows of the positions.
            ("windows", 0) => {
                let (Some(items), Some(width)) = (
                    static_dim(w, arg.cell.segs().first()),
                    static_dim(w, n.result_cell.segs().get(1)),
                ) else {
                    return Err(Diagnostic::error(
                        n.span,
                        "cannot differentiate `windows` of an array of unknown rank in reverse mode (`vjp`, `grad`) yet",
                    ));
                };
                let positions = node(ExprKind::IApp {
                    func: Box::new(var("iota/static")),
                    arg: ast::Ispace::Shape(ast::Shape {
                        kind: ast::ShapeKind::Splice(vec![items.clone()]),
                        span: sp(),
                    }),
                });
                let windows = node(ExprKind::IApp {
                    func: Box::new(var("windows")),
                    arg: width,
                });
                let places = call("flatten", vec![app(windows, vec![positions])]);
                let hist = node(ExprKind::IApp {
                    func: Box::new(var("hist")),
                    arg: items,
                });
                app(
                    hist,
                    vec![
                        var("f.+"),
                        z(call("head", vec![x(0)])),
                        places,
                        call("flatten", vec![ct]),
                    ],
                )
            }
            ("trace", 1) | ("trace-file", 2) => ct,
            // (What is traced does not reach the value.)
            ("trace", 0) | ("trace-file", 1) => z(x(i)),
            // Item j is a·(1 − t) + b·t, t = j/(n−1): the same linspace
            // of 1 and 0 (of 0 and 1) weighs the cotangent.
            ("linspace", 0 | 1) => {
                let (from, to) = if i == 0 { (1.0, 0.0) } else { (0.0, 1.0) };
                call(
                    "f.sum",
                    vec![call(
                        "f.*",
                        vec![ct, app(n.head.clone(), vec![float(from), float(to)])],
                    )],
                )
            }
            ("f.mean", _) => broadcast(
                w,
                call("f./", vec![ct, call("i->f", vec![call("length", vec![x(0)])])]),
                x(0),
                &Atom::Float,
            ),
            _ => {
                return Err(Diagnostic::error(
                    n.span,
                    format!("cannot differentiate `{op}` in reverse mode (`vjp`, `grad`) yet"),
                ));
            }
        })
    }

    /// Adds the contribution `c` to the adjoint of `target`.
    /// The adjoint of `name` so far, if any contribution reached it: for a
    /// record whose fields were reached one by one, the record of them
    /// (zeros in the fields none reached), built now and kept whole.
    fn read_adjoint(&mut self, name: &str, adjoints: &mut HashMap<String, String>) -> Option<ast::Expr> {
        let whole = adjoints.get(name).cloned();
        let Some(fields) = self.records.get(name).cloned() else {
            return whole.map(|a| var(&a));
        };
        let parts: HashMap<&str, String> = fields
            .iter()
            .filter_map(|(f, _)| adjoints.remove(&field_key(name, f)).map(|a| (f.as_str(), a)))
            .collect();
        if parts.is_empty() {
            return whole.map(|a| var(&a));
        }
        let w = self.w;
        let record = record_of(w, &fields, |f| match (&whole, parts.get(f)) {
            (Some(r), Some(a)) => call("f.+", vec![field_of(var(r), f), var(a)]),
            (Some(r), None) => field_of(var(r), f),
            (None, Some(a)) => var(a),
            (None, None) => zeros(w, field_of(var(name), f)),
        });
        let total = self.bind(record);
        if let ExprKind::Var(t) = &total.kind {
            adjoints.insert(name.to_string(), t.name.clone());
        }
        Some(total)
    }

    fn accumulate(&mut self, target: &str, c: ast::Expr, adjoints: &mut HashMap<String, String>) {
        let total = match (adjoints.get(target), self.records.get(target)) {
            (Some(prev), Some(fields)) => {
                let sum = record_of(self.w, fields, |f| {
                    call("f.+", vec![field_of(var(prev), f), field_of(c.clone(), f)])
                });
                self.bind(sum)
            }
            (Some(prev), None) => self.bind(call("f.+", vec![var(prev), c])),
            (None, _) => c,
        };
        if let ExprKind::Var(t) = &total.kind {
            adjoints.insert(target.to_string(), t.name.clone());
        }
    }

    /// The adjoints of an `if`: for each varying variable its branches
    /// read, the adjoint of the branch taken (its forward code run again).
    fn if_adjoint(
        &mut self,
        node: &IfNode,
        ct: &ast::Expr,
        adjoints: &mut HashMap<String, String>,
    ) -> Result<(), Diagnostic> {
        for v in &node.free {
            let mut code = Vec::new();
            for b in &node.branches {
                let mut sub = Walk::new(self.w, Mode::Reverse);
                sub.binds = b.binds.clone();
                sub.records = self.records.clone();
                let mut inner: HashMap<String, String> = HashMap::new();
                if let (Some(out), ExprKind::Var(c)) = (&b.out, &ct.kind) {
                    inner.insert(out.clone(), c.name.clone());
                }
                for n in b.nodes.iter().rev() {
                    sub.adjoint(n, &mut inner)?;
                }
                let a = match sub.read_adjoint(v, &mut inner) {
                    Some(a) => a,
                    None => self.zeros_of(v),
                };
                code.push(let_in(sub.binds, a));
            }
            let mut code = code.into_iter();
            let (Some(then), Some(otherwise)) = (code.next(), code.next()) else {
                continue;
            };
            let c = self.bind(if_node(node.cond.clone(), then, otherwise));
            self.accumulate(v, c, adjoints);
        }
        Ok(())
    }

    /// `c`, of shape frame ++ `extra` ++ `cell`, summed over the `extra` axes.
    fn sum_axes(
        &self,
        c: ast::Expr,
        extra: &Shape,
        cell: &Shape,
        span: Span,
    ) -> Result<ast::Expr, Diagnostic> {
        let w = self.w;
        if cell.is_scalar() {
            let sum = node(ExprKind::IApp {
                func: Box::new(var("f.sum")),
                arg: ast::Ispace::Shape(w.shape(extra)),
            });
            return Ok(app(sum, vec![c]));
        }
        // A cell of its own: each extra axis, outermost first, reduced.
        let mut c = c;
        let segs = extra.segs();
        for (k, seg) in segs.iter().enumerate() {
            if matches!(seg, Seg::Var(_)) {
                return Err(Diagnostic::error(
                    span,
                    "cannot differentiate an argument replicated along a frame of unknown rank, with a cell of its own, yet",
                ));
            }
            let rest = Shape::from_segs(segs.get(k + 1..).unwrap_or_default().to_vec()).concat(cell);
            let rest_ty = float_type(&rest);
            let plus = lambdas(
                w,
                &[
                    ("∂a".to_string(), rest_ty.clone()),
                    ("∂b".to_string(), rest_ty.clone()),
                ],
                call("f.+", vec![var("∂a"), var("∂b")]),
            );
            let zero = app(
                node(ExprKind::IApp {
                    func: Box::new(node(ExprKind::IApp {
                        func: Box::new(node(ExprKind::TApp {
                            func: Box::new(var("replicate")),
                            arg: w.ty(&Type::scalar(Atom::Float)),
                        })),
                        arg: ast::Ispace::Shape(w.shape(&rest)),
                    })),
                    arg: ast::Ispace::Shape(w.shape(&Shape::scalar())),
                }),
                vec![float(0.0)],
            );
            let reduce = node(ExprKind::IApp {
                func: Box::new(node(ExprKind::IApp {
                    func: Box::new(node(ExprKind::TApp {
                        func: Box::new(var("reduce/zero")),
                        arg: w.ty(&Type::scalar(Atom::Float)),
                    })),
                    arg: ast::Ispace::Shape(w.shape(&Shape::from_segs(vec![seg.clone()]))),
                })),
                arg: ast::Ispace::Shape(w.shape(&rest)),
            });
            c = app(reduce, vec![plus, zero, c]);
        }
        Ok(c)
    }
}

fn if_node(cond: ast::Expr, then: ast::Expr, otherwise: ast::Expr) -> ast::Expr {
    node(ExprKind::If {
        cond: Box::new(cond),
        then: Box::new(then),
        otherwise: Box::new(otherwise),
    })
}

/// For a vector `x`, the product of the items other than each: the
/// exclusive prefix products times the exclusive suffix products.
///
/// A cell of another rank (`f.product` of a matrix) is read as the vector
/// of its items in row-major order, its shape's dimensions known.
fn product_of_others(w: &Writer, x: ast::Expr, cell: &Shape) -> ast::Expr {
    let scan = |e: ast::Expr| call("curtail", vec![call("scan", vec![var("f.*"), float(1.0), e])]);
    let of_vector = |x: ast::Expr| {
        let prefix = scan(x.clone());
        let suffix = call("reverse", vec![scan(call("reverse", vec![x]))]);
        call("f.*", vec![prefix, suffix])
    };
    match cell.dims() {
        Some(dims) if dims.len() != 1 => {
            let vector = Shape::from_dims([remora_types::Dim::product(dims)]);
            reshaped(w, of_vector(reshaped(w, x, cell, &vector)), &vector, cell)
        }
        _ => of_vector(x),
    }
}

/// `e`, a Float array of shape `from`, reshaped to `to`.
fn reshaped(w: &Writer, e: ast::Expr, from: &Shape, to: &Shape) -> ast::Expr {
    let f = node(ExprKind::IApp {
        func: Box::new(node(ExprKind::IApp {
            func: Box::new(node(ExprKind::TApp {
                func: Box::new(var("reshape")),
                arg: w.ty(&Type::scalar(Atom::Float)),
            })),
            arg: ast::Ispace::Shape(w.shape(from)),
        })),
        arg: ast::Ispace::Shape(w.shape(to)),
    });
    app(f, vec![e])
}

/// The inverse of the permutation of `(i-app transpose P)` under `head`'s
/// instantiations, when `P` is written out.
fn inverse_permutation(head: &ast::Expr) -> Option<Vec<u64>> {
    match &head.kind {
        ExprKind::IApp { func, arg } => {
            if let (ExprKind::Var(v), ast::Ispace::Shape(shape)) = (&func.kind, arg)
                && v.name == "transpose"
                && let ast::ShapeKind::Splice(parts) = &shape.kind
            {
                let perm: Vec<u64> = parts
                    .iter()
                    .map(|p| match p {
                        ast::Ispace::Dim(ast::Dim {
                            kind: ast::DimKind::Nat(k),
                            ..
                        }) => Some(*k),
                        _ => None,
                    })
                    .collect::<Option<_>>()?;
                let mut inverse = vec![0; perm.len()];
                for (i, &k) in perm.iter().enumerate() {
                    *inverse.get_mut(usize::try_from(k).ok()?)? = i as u64;
                }
                return Some(inverse);
            }
            inverse_permutation(func)
        }
        ExprKind::TApp { func, .. } => inverse_permutation(func),
        _ => None,
    }
}

/// One axis of a shape as an index argument (`None`: a shape variable).
fn static_dim(w: &Writer, seg: Option<&Seg>) -> Option<ast::Ispace> {
    let seg = seg?;
    if matches!(seg, Seg::Var(_)) {
        return None;
    }
    match w.shape(&Shape::from_segs(vec![seg.clone()])).kind {
        ast::ShapeKind::Splice(mut parts) if parts.len() == 1 => parts.pop(),
        _ => None,
    }
}

/// The cell of `f.matmul`'s result, `[Float m n]`, from its arguments'.
fn matmul_out_cell(n: &Node) -> Option<Type> {
    let a = n.args.first()?.cell.segs();
    let b = n.args.get(1)?.cell.segs();
    Some(float_type(&Shape::from_segs(vec![
        a.first()?.clone(),
        b.get(1)?.clone(),
    ])))
}

/// The rank of a summing node's result cell (`reduce`'s `@s`; `f.sum`'s
/// is scalar).
fn result_cell_rank(n: &Node) -> usize {
    match n.args.last() {
        Some(a) if n.args.len() == 2 => a.cell.segs().len().saturating_sub(1),
        _ => 0,
    }
}

/// `t · ∂f/∂(argument i)` for a binary scalar function `f` with
/// `out = f(a, b)` (a tangent of argument `i`, or the cotangent of `out`).
/// `f.max` and `f.min` pass it to the argument they chose, the first on a tie.
fn binary_partial(
    op: &str,
    i: usize,
    t: ast::Expr,
    a: &ast::Expr,
    b: &ast::Expr,
    out: &ast::Expr,
) -> ast::Expr {
    let f2 = |f: &str, x: ast::Expr, y: ast::Expr| call(f, vec![x, y]);
    let chosen = |cmp: &str, first: bool| {
        let c = f2(cmp, a.clone(), b.clone());
        let (x, y) = if first {
            (t.clone(), float(0.0))
        } else {
            (float(0.0), t.clone())
        };
        call("select", vec![c, x, y])
    };
    let norm2 = || {
        f2(
            "f.+",
            f2("f.*", a.clone(), a.clone()),
            f2("f.*", b.clone(), b.clone()),
        )
    };
    match (op, i) {
        ("f.+", _) | ("f.-", 0) => t,
        ("f.-", _) => call("f.neg", vec![t]),
        ("f.*", 0) => f2("f.*", t, b.clone()),
        ("f.*", _) => f2("f.*", t, a.clone()),
        ("f./", 0) => f2("f./", t, b.clone()),
        ("f./", _) => call("f.neg", vec![f2("f./", f2("f.*", t, out.clone()), b.clone())]),
        // d/da a^b = b·a^(b−1); d/db a^b = a^b·ln a
        ("f.^", 0) => f2(
            "f.*",
            t,
            f2(
                "f.*",
                b.clone(),
                f2("f.^", a.clone(), f2("f.-", b.clone(), float(1.0))),
            ),
        ),
        ("f.^", _) => f2("f.*", t, f2("f.*", out.clone(), call("f.ln", vec![a.clone()]))),
        // d atan2(a, b) = (b·da − a·db) / (a² + b²)
        ("f.atan2", 0) => f2("f./", f2("f.*", t, b.clone()), norm2()),
        ("f.atan2", _) => call("f.neg", vec![f2("f./", f2("f.*", t, a.clone()), norm2())]),
        // x mod y = x − y·floor(x/y): 1 and −floor(x/y) (where floor is flat)
        ("f.mod", 0) => t,
        ("f.mod", _) => f2(
            "f.*",
            t,
            call(
                "f.neg",
                vec![call("f.floor", vec![f2("f./", a.clone(), b.clone())])],
            ),
        ),
        ("f.max", 0) => chosen("f.>=", true),
        ("f.max", _) => chosen("f.>=", false),
        ("f.min", 0) => chosen("f.<=", true),
        _ => chosen("f.<=", false),
    }
}

/// `t · ∂(f.clip lo hi x)/∂(argument i)`: `(f.min (f.max x lo) hi)`, each
/// passing the derivative to the argument it returns (the first on a tie),
/// so `x` on the bounds, `hi` when the bounds cross.
fn clip_partial(i: usize, t: ast::Expr, lo: &ast::Expr, hi: &ast::Expr, x: &ast::Expr) -> ast::Expr {
    let f2 = |f: &str, a: ast::Expr, b: ast::Expr| call(f, vec![a, b]);
    let raised = f2("f.max", x.clone(), lo.clone());
    let below_hi = f2("f.<=", raised.clone(), hi.clone());
    let cond = match i {
        0 => f2("and", f2("f.<", x.clone(), lo.clone()), below_hi),
        1 => call("not", vec![below_hi]),
        _ => f2("and", f2("f.>=", x.clone(), lo.clone()), below_hi),
    };
    call("select", vec![cond, t, float(0.0)])
}

/// `t · f'(a)` for a unary scalar function `f` with `out = f(a)`.
fn unary_derivative(op: &str, t: ast::Expr, a: ast::Expr, out: ast::Expr) -> ast::Expr {
    let f2 = |f: &str, x: ast::Expr, y: ast::Expr| call(f, vec![x, y]);
    let one_minus_square = |x: ast::Expr| f2("f.-", float(1.0), f2("f.*", x.clone(), x));
    let one_plus_square = |x: ast::Expr| f2("f.+", float(1.0), f2("f.*", x.clone(), x));
    match op {
        "f.neg" => call("f.neg", vec![t]),
        // The subgradient 0 at 0 (`f.signum`).
        "f.abs" => f2("f.*", t, call("f.signum", vec![a])),
        "f.exp" => f2("f.*", t, out),
        "f.ln" => f2("f./", t, a),
        "f.log2" => f2("f./", t, f2("f.*", a, float(std::f32::consts::LN_2))),
        "f.log10" => f2("f./", t, f2("f.*", a, float(std::f32::consts::LN_10))),
        "f.sin" => f2("f.*", t, call("f.cos", vec![a])),
        "f.cos" => call("f.neg", vec![f2("f.*", t, call("f.sin", vec![a]))]),
        "f.tan" => f2("f.*", t, one_plus_square(out)),
        "f.sinh" => f2("f.*", t, call("f.cosh", vec![a])),
        "f.cosh" => f2("f.*", t, call("f.sinh", vec![a])),
        "f.asin" => f2("f./", t, call("f.sqrt", vec![one_minus_square(a)])),
        "f.acos" => call(
            "f.neg",
            vec![f2("f./", t, call("f.sqrt", vec![one_minus_square(a)]))],
        ),
        "f.atan" => f2("f./", t, one_plus_square(a)),
        "f.tanh" => f2("f.*", t, one_minus_square(out)),
        // f.sqrt, sqrt
        _ => f2("f./", t, f2("f.*", float(2.0), out)),
    }
}

/// The name of a primal that depends on the parameter (it has a tangent
/// and is a variable), which adjoints are keyed by.
fn varying_name(tangent: &Option<ast::Expr>, primal: &ast::Expr) -> Option<String> {
    match (tangent, &primal.kind) {
        (Some(_), ExprKind::Var(v)) => Some(v.name.clone()),
        _ => None,
    }
}

//! Automatic differentiation (issue 15): `(jvp f x dx)`, `(vjp f x ct)` and
//! `(grad f)` replaced by derivative programs, as the typed program is
//! written back as a core program (`crate::elaborate`), which is checked
//! again (`crate::check_program_with`): both engines then run ordinary
//! Remora and know nothing of derivatives.
//!
//! The function `f` must be a lambda, or a name bound to one by `def` or
//! `let`, whose parameter is a `Float` array. Its body is walked once in
//! A-normal form: every application of which the parameter's value
//! depends is bound to a fresh name `∂N`, and its tangent (forward mode)
//! beside it. Reverse mode walks the same bindings backwards, Schenck's
//! way (thesis ch. 3) but without a tape: the adjoint code follows the
//! forward code in one `let`, and each adjoint of a lifted application is
//! the rule's scalar (or cell) adjoint lifted over the same frame, summed
//! over the frame axes its argument was replicated along.
//!
//! A derivative is an ordinary function: `(grad f)` applied to a frame of
//! points is lifted like any function, giving the frame of gradients.
//! Subexpressions that do not depend on the parameter are kept as they are
//! (constants: Int, Bool, data); an expression whose type is not `Float`
//! (a comparison, a rounding) has zero derivative. Anything else that
//! depends on the parameter is a positioned error naming the construct.

use crate::elaborate::{Writer, ident, lambda, node, sp};
use crate::typed::{TDecl, TExpr, TExprKind, VarId};
use remora_syntax::ast::{self, AtomKind, BindKind, ExprKind};
use remora_syntax::{Diagnostic, Span};
use remora_types::{Atom, Lifted, Shape, Type};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

/// The pass's state while a program is written back.
pub(crate) struct Pass<'a> {
    /// Lambdas bound by `def` and `let`, by variable.
    lambdas: HashMap<VarId, &'a TExpr>,
    fresh: Cell<u32>,
    errors: RefCell<Vec<Diagnostic>>,
}

impl<'a> Pass<'a> {
    pub(crate) fn new(decls: &'a [TDecl]) -> Pass<'a> {
        let mut lambdas = HashMap::new();
        for d in decls {
            let value = match d {
                TDecl::Def { var, value, .. } => {
                    if lambda(value).is_some() {
                        lambdas.insert(*var, value);
                    }
                    value
                }
                TDecl::Expr(e) => e,
            };
            let mut stack = vec![value];
            while let Some(e) = stack.pop() {
                if let TExprKind::Let { var, value, .. } = &e.kind
                    && lambda(value).is_some()
                {
                    lambdas.insert(*var, &**value);
                }
                e.push_children(&mut stack);
            }
        }
        Pass {
            lambdas,
            fresh: Cell::new(0),
            errors: RefCell::new(Vec::new()),
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
}

/// Whether the program uses a derivative form (and so must be rewritten).
pub fn uses_ad(decls: &[TDecl]) -> bool {
    decls.iter().any(|d| {
        let e = match d {
            TDecl::Def { value, .. } => value,
            TDecl::Expr(e) => e,
        };
        e.any(&mut |x| matches!(x.kind, TExprKind::Intrinsic("jvp" | "vjp" | "grad")))
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
        "grad" if args.len() == 1 => Mode::Reverse,
        _ => return None,
    };
    let result = derivative(w, name, mode, &args, e.span);
    match result {
        Ok(x) => Some(x),
        Err(d) => {
            w.ad.errors.borrow_mut().push(d);
            Some(node(ExprKind::Var(ident("undefined"))))
        }
    }
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

/// One application the body's value depends on, as reverse mode needs it.
struct Node {
    out: String,
    rule: Rule,
    /// Each argument: its primal, the name of its primal when it depends
    /// on the parameter, its type and its frame in the application.
    args: Vec<Arg>,
    /// The application's principal frame.
    principal: Shape,
    span: Span,
}

struct Arg {
    primal: ast::Expr,
    varying: Option<String>,
    frame: Shape,
    cell: Shape,
}

#[derive(Clone, Copy)]
enum Rule {
    /// `let x = y`, a parameter bound to an argument.
    Alias,
    Scalar(&'static str),
    /// `f.sum` or `(reduce f.+ …)`: the adjoint is replicated to the cell.
    Sum,
}

/// One derivative walk: the bindings written so far and the nodes.
struct Walk<'w, 'a> {
    w: &'w Writer<'a>,
    mode: Mode,
    binds: Vec<(String, ast::Expr)>,
    nodes: Vec<Node>,
}

/// A value under the walk: its primal, and its tangent variable (forward
/// mode) or whether it depends on the parameter (reverse mode: `Some` of
/// any name).
type Env = HashMap<VarId, Option<String>>;

const SCALAR: &[&str] = &[
    "f.+", "f.-", "f.*", "f./", "f.neg", "f.exp", "f.ln", "f.sin", "f.cos", "f.tanh", "f.sqrt", "sqrt",
];

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
    let Some((param, body)) = lam_expr.and_then(lambda) else {
        return Err(Diagnostic::error(
            f.span,
            format!(
                "`{name}` differentiates a lambda, or a name bound to one by `def` or `let`; this function is neither"
            ),
        ));
    };
    let Atom::Arrow(pty, rty) = &f.ty.atom else {
        return Err(Diagnostic::error(
            f.span,
            format!("`{name}` of a value that is not a function"),
        ));
    };
    if pty.atom != Atom::Float {
        return Err(Diagnostic::error(
            f.span,
            format!(
                "`{name}` differentiates with respect to a Float array, and this parameter is `{}` (records and other types: not yet)",
                pty.show(w_names(w))
            ),
        ));
    }
    let mut walk = Walk {
        w,
        mode,
        binds: Vec::new(),
        nodes: Vec::new(),
    };
    let pname = w.var(param).name.clone();
    let mut env = Env::new();
    let dx = w.ad.fresh();
    env.insert(param, Some(dx.clone()));
    let (primal, tangent) = walk.expr(body, &env)?;
    let rest: Vec<ast::Expr> = args.iter().skip(1).map(|a| w.expr(a.0)).collect();
    match mode {
        Mode::Forward => {
            let tangent = tangent.unwrap_or_else(|| zeros(w, primal.clone()));
            let body = let_in(walk.binds, tangent);
            let f = lam(w, &pname, pty, lam(w, &dx, pty, body));
            Ok(app(f, rest))
        }
        Mode::Reverse => {
            let ct = w.ad.fresh();
            let mut adjoints: HashMap<String, String> = HashMap::new();
            if let (Some(_), ExprKind::Var(out)) = (&tangent, &primal.kind) {
                adjoints.insert(out.name.clone(), ct.clone());
            }
            let nodes = std::mem::take(&mut walk.nodes);
            for n in nodes.iter().rev() {
                walk.adjoint(n, &mut adjoints)?;
            }
            let gradient = match adjoints.get(&pname) {
                Some(a) => var(a),
                None => zeros(w, var(&pname)),
            };
            let body = let_in(walk.binds, gradient);
            if name == "grad" {
                let body = let_in(vec![(ct, float(1.0))], body);
                Ok(lam(w, &pname, pty, body))
            } else {
                Ok(app(lam(w, &pname, pty, lam(w, &ct, rty, body)), rest))
            }
        }
    }
}

fn w_names<'a>(w: &Writer<'a>) -> &'a crate::check::NameTable {
    w.names()
}

impl Walk<'_, '_> {
    fn bind(&mut self, e: ast::Expr) -> ast::Expr {
        let name = self.w.ad.fresh();
        self.binds.push((name.clone(), e));
        var(&name)
    }

    fn varying(e: &TExpr, env: &Env) -> bool {
        e.any(&mut |x| matches!(&x.kind, TExprKind::Var(v) if matches!(env.get(v), Some(Some(_)))))
    }

    /// `e`'s primal (a name when it depends on the parameter) and tangent
    /// (`None`: zero).
    fn expr(&mut self, e: &TExpr, env: &Env) -> Result<(ast::Expr, Option<ast::Expr>), Diagnostic> {
        if !Self::varying(e, env) || !matches!(e.ty.atom, Atom::Float | Atom::Arrow(..)) {
            return Ok((self.w.expr(e), None));
        }
        match &e.kind {
            TExprKind::Var(v) => Ok((
                node(ExprKind::Var(self.w.var(*v))),
                env.get(v).cloned().flatten().map(|t| var(&t)),
            )),
            TExprKind::Let { var: v, value, body } => {
                let (p, t) = self.expr(value, env)?;
                let name = self.w.var(*v).name.clone();
                self.binds.push((name.clone(), p.clone()));
                let mut inner = env.clone();
                match t {
                    Some(t) => {
                        let dt = self.w.ad.fresh();
                        if self.mode == Mode::Forward {
                            self.binds.push((dt.clone(), t));
                        }
                        if let ExprKind::Var(src) = &p.kind {
                            self.nodes.push(Node {
                                out: name,
                                rule: Rule::Alias,
                                args: vec![Arg {
                                    primal: p.clone(),
                                    varying: Some(src.name.clone()),
                                    frame: Shape::scalar(),
                                    cell: Shape::scalar(),
                                }],
                                principal: Shape::scalar(),
                                span: e.span,
                            });
                        }
                        inner.insert(*v, Some(dt));
                    }
                    None => {
                        inner.insert(*v, None);
                    }
                }
                self.expr(body, &inner)
            }
            TExprKind::If {
                cond,
                then,
                otherwise,
            } if self.mode == Mode::Forward => {
                let c = self.w.expr(cond);
                let mut branch = |x: &TExpr| -> Result<(ast::Expr, ast::Expr), Diagnostic> {
                    let saved = std::mem::take(&mut self.binds);
                    let (p, t) = self.expr(x, env)?;
                    let t = t.unwrap_or_else(|| zeros(self.w, p.clone()));
                    let binds = std::mem::replace(&mut self.binds, saved);
                    Ok((let_in(binds.clone(), p), let_in(binds, t)))
                };
                let (pt, tt) = branch(then)?;
                let (po, to) = branch(otherwise)?;
                let p = self.bind(node(ExprKind::If {
                    cond: Box::new(c.clone()),
                    then: Box::new(pt),
                    otherwise: Box::new(po),
                }));
                let t = self.bind(node(ExprKind::If {
                    cond: Box::new(c),
                    then: Box::new(tt),
                    otherwise: Box::new(to),
                }));
                Ok((p, Some(t)))
            }
            TExprKind::App { .. } => self.app(e, env),
            _ => Err(self.unsupported(e, "this expression")),
        }
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
        // A call of a lambda bound by name, unlifted: its body inlined.
        if let TExprKind::Var(v) = &head.kind
            && let Some(f) = self.w.ad.lambdas.get(v).copied()
        {
            if spine.iter().all(|(_, l)| l.principal.is_scalar()) {
                return self.inline(f, &spine, env, e);
            }
            return Err(self.unsupported(e, "a lifted call of a function defined in the program"));
        }
        let Some(name) = head_name(head) else {
            return Err(self.unsupported(e, "this application"));
        };
        let what = format!("`{name}`");
        let mut args = Vec::new();
        let mut primals = Vec::new();
        let mut tangents = Vec::new();
        for (a, lifted) in &spine {
            let (p, t) = self.expr(a, env)?;
            let varying = match (&t, &p.kind) {
                (Some(_), ExprKind::Var(v)) => Some(v.name.clone()),
                _ => None,
            };
            args.push(Arg {
                primal: p.clone(),
                varying,
                frame: lifted.arg_frame.clone(),
                cell: lifted.arg_cell.clone(),
            });
            primals.push(p);
            tangents.push(t);
        }
        // No Float argument depends on the parameter (a Float made of a
        // Bool or an Int): the derivative is zero.
        if tangents.iter().all(Option::is_none) {
            return Ok((app(self.w.expr(head), primals), None));
        }
        let rule = if SCALAR.contains(&name) {
            Rule::Scalar(name)
        } else if name == "f.sum"
            || (name == "reduce" && spine.len() == 2 && matches!(head_name(spine[0].0), Some("f.+")))
        {
            Rule::Sum
        } else {
            return Err(self.unsupported(e, &what));
        };
        let principal = spine
            .last()
            .map(|(_, l)| l.principal.clone())
            .unwrap_or_else(Shape::scalar);
        let out = self.bind(app(self.w.expr(head), primals.clone()));
        let ExprKind::Var(out_name) = &out.kind else {
            return Err(self.unsupported(e, &what));
        };
        let out_name = out_name.name.clone();
        let tangent = if self.mode == Mode::Forward {
            let t = match rule {
                Rule::Scalar(op) => self.scalar_tangent(op, &primals, &tangents, &args, &principal, &out),
                Rule::Sum => {
                    let mut ts = primals.clone();
                    if let (Some(Some(t)), Some(last)) = (tangents.last(), ts.last_mut()) {
                        *last = t.clone();
                    }
                    Some(app(self.w.expr(head), ts))
                }
                Rule::Alias => None,
            };
            t.map(|t| self.bind(t))
        } else {
            Some(var("∂unused"))
        };
        self.nodes.push(Node {
            out: out_name,
            rule,
            args,
            principal,
            span: e.span,
        });
        Ok((out, tangent))
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
            let (p, t) = self.expr(a, env)?;
            let name = self.w.var(param).name.clone();
            self.binds.push((name.clone(), p.clone()));
            match t {
                Some(t) => {
                    let dt = self.w.ad.fresh();
                    if self.mode == Mode::Forward {
                        self.binds.push((dt.clone(), t));
                    }
                    if let ExprKind::Var(src) = &p.kind {
                        self.nodes.push(Node {
                            out: name,
                            rule: Rule::Alias,
                            args: vec![Arg {
                                primal: p.clone(),
                                varying: Some(src.name.clone()),
                                frame: Shape::scalar(),
                                cell: Shape::scalar(),
                            }],
                            principal: Shape::scalar(),
                            span: e.span,
                        });
                    }
                    inner.insert(param, Some(dt));
                }
                None => {
                    inner.insert(param, None);
                }
            }
            body = b;
        }
        self.expr(body, &inner)
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
        match op {
            "f.+" => match (ta, tb) {
                (Some(a), Some(b)) => Some(f2("f.+", a, b)),
                (Some(a), None) => Some(full(0, a)),
                (None, Some(b)) => Some(full(1, b)),
                (None, None) => None,
            },
            "f.-" => match (ta, tb) {
                (Some(a), Some(b)) => Some(f2("f.-", a, b)),
                (Some(a), None) => Some(full(0, a)),
                (None, Some(b)) => Some(full(1, call("f.neg", vec![b]))),
                (None, None) => None,
            },
            "f.*" => match (ta, tb) {
                (Some(a), Some(b)) => Some(f2("f.+", f2("f.*", a, pb), f2("f.*", pa, b))),
                (Some(a), None) => Some(f2("f.*", a, pb)),
                (None, Some(b)) => Some(f2("f.*", pa, b)),
                (None, None) => None,
            },
            "f./" => {
                let da = ta.map(|a| f2("f./", a, pb.clone()));
                let db = tb.map(|b| call("f.neg", vec![f2("f./", f2("f.*", b, out.clone()), pb.clone())]));
                match (da, db) {
                    (Some(a), Some(b)) => Some(f2("f.+", a, b)),
                    (Some(a), None) => Some(a),
                    (None, Some(b)) => Some(b),
                    (None, None) => None,
                }
            }
            _ => ta.map(|a| unary_derivative(op, a, pa, out.clone())),
        }
    }

    /// The adjoint contributions of one node to its arguments.
    fn adjoint(&mut self, n: &Node, adjoints: &mut HashMap<String, String>) -> Result<(), Diagnostic> {
        let Some(ct) = adjoints.get(&n.out).cloned() else {
            return Ok(());
        };
        let ct = var(&ct);
        let w = self.w;
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
        let f2 = |f: &str, a: ast::Expr, b: ast::Expr| call(f, vec![a, b]);
        for (i, arg) in n.args.iter().enumerate() {
            let Some(target) = &arg.varying else { continue };
            let contribution = match n.rule {
                Rule::Alias => ct.clone(),
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
                Rule::Scalar(op) => match (op, i) {
                    ("f.+", _) => ct.clone(),
                    ("f.-", 0) => ct.clone(),
                    ("f.-", _) => call("f.neg", vec![ct.clone()]),
                    ("f.*", 0) => f2("f.*", ct.clone(), pb.clone()),
                    ("f.*", _) => f2("f.*", ct.clone(), pa.clone()),
                    ("f./", 0) => f2("f./", ct.clone(), pb.clone()),
                    ("f./", _) => call(
                        "f.neg",
                        vec![f2("f./", f2("f.*", ct.clone(), out.clone()), pb.clone())],
                    ),
                    _ => unary_derivative(op, ct.clone(), pa.clone(), out.clone()),
                },
            };
            // Summed over the frame axes the argument was replicated along.
            let extra = n
                .principal
                .segs()
                .get(arg.frame.segs().len()..)
                .unwrap_or_default()
                .to_vec();
            let contribution = if extra.is_empty() || matches!(n.rule, Rule::Alias) {
                contribution
            } else {
                let sum = node(ExprKind::IApp {
                    func: Box::new(var("f.sum")),
                    arg: ast::Ispace::Shape(w.shape(&Shape::from_segs(extra))),
                });
                app(sum, vec![contribution])
            };
            let c = self.bind(contribution);
            let total = match adjoints.get(target) {
                Some(prev) => self.bind(f2("f.+", var(prev), c)),
                None => c,
            };
            if let ExprKind::Var(t) = &total.kind {
                adjoints.insert(target.clone(), t.name.clone());
            }
        }
        let _ = n.span;
        Ok(())
    }
}

/// The rank of a summing node's result cell (`reduce`'s `@s`; `f.sum`'s
/// is scalar).
fn result_cell_rank(n: &Node) -> usize {
    match n.args.last() {
        Some(a) if n.args.len() == 2 => a.cell.segs().len().saturating_sub(1),
        _ => 0,
    }
}

/// `t · f'(a)` for a unary scalar function `f` with `out = f(a)`.
fn unary_derivative(op: &str, t: ast::Expr, a: ast::Expr, out: ast::Expr) -> ast::Expr {
    let f2 = |f: &str, x: ast::Expr, y: ast::Expr| call(f, vec![x, y]);
    match op {
        "f.neg" => call("f.neg", vec![t]),
        "f.exp" => f2("f.*", t, out),
        "f.ln" => f2("f./", t, a),
        "f.sin" => f2("f.*", t, call("f.cos", vec![a])),
        "f.cos" => call("f.neg", vec![f2("f.*", t, call("f.sin", vec![a]))]),
        "f.tanh" => f2("f.*", t, f2("f.-", float(1.0), f2("f.*", out.clone(), out))),
        // f.sqrt, sqrt
        _ => f2("f./", t, f2("f.*", float(2.0), out)),
    }
}

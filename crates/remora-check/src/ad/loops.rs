//! Loops under differentiation: `fold`, `iterate`, `while`, and `scan`,
//! `iscan` and `reduce` by a function without a rule of its own (a lambda,
//! `f.*` or `f.max` over cells that are not scalars…).
//!
//! Each is a step `s' = f s x` (`x` an item; none for `iterate` and
//! `while`) run from an initial state. Forward mode runs the state and its
//! tangent together, as a record. Reverse mode keeps the states each step
//! starts from — `fold`, `scan`, `iscan` and `reduce` by a scan in the
//! forward code; `iterate` and `while` (whose step count is known only at
//! run time) by running the loop again in the adjoint, inside an `unbox`
//! of `(range n)`, `while` counting its steps in the forward code — so a
//! loop of n steps keeps n states (memory O(n × state), not the steps'
//! intermediates), and scans the cotangent backwards over them with the
//! step's reverse derivative: for the state, for the item, and for each
//! varying variable the step closes over (summed over the steps).

use super::{
    Arg, Env, Mode, Node, Param, ReverseCode, Rule, Walk, app, binary_partial, call, field_of, float_record,
    forward_fn, head_name, int, lambdas, let_in, params_of, record_of, reverse_core, var, varying_name,
    zeros,
};
use crate::elaborate::{lambda, node, sp};
use crate::typed::{TExpr, TExprKind};
use remora_syntax::ast::{self, ExprKind};
use remora_syntax::{Diagnostic, Span};
use remora_types::{Atom, Dim, Lifted, Seg, Shape, Type};
use std::collections::HashMap;

/// How a loop runs.
enum How {
    /// One step per item; the last state is the result.
    Fold,
    /// `Fold` over items that may be none (`reduce`'s after the first).
    Reduce,
    /// One step per item; every state is the result (`scan`'s `[n+1 A]`).
    Scan,
    /// This many steps (an Int expression).
    Iterate(ast::Expr),
    /// While the test (a function of the state) holds.
    While(ast::Expr),
}

/// A loop's step as code.
#[derive(Clone)]
pub(super) struct Step {
    /// The primal step function, `(f s x)` or `(f s)`.
    pub(super) code: ast::Expr,
    pub(super) acc: Type,
    /// The items' type, when the step takes items.
    pub(super) item: Option<Type>,
    pub(super) item_varying: bool,
    /// The varying variables the step closes over: name, type, tangent.
    pub(super) closed: Vec<(String, Type, String)>,
    /// Forward mode: `(λ (s [x] closed… ds [dx] dclosed…) ds')`.
    pub(super) forward: Option<ast::Expr>,
    /// Reverse mode: `(λ (s [x] closed… ct) …)` for the state, the item
    /// (when varying), and each closed variable.
    pub(super) for_state: Option<ast::Expr>,
    pub(super) for_item: Option<ast::Expr>,
    pub(super) for_closed: Vec<ast::Expr>,
}

/// The frames and cells of a lifted loop's arguments: the count's frame
/// (`iterate`), the initial state's frame and cell, the items' frame, cell
/// and atom, and the principal frame.
struct LiftedArgs {
    count: Option<Shape>,
    init: (Shape, Shape),
    items: Option<(Shape, Shape, Atom)>,
    principal: Shape,
    /// `reduce`, `iscan`: the initial state is each cell's first item,
    /// the items the rest.
    split: bool,
}

/// A loop, as reverse mode needs it.
pub(super) struct LoopNode {
    /// The states each step started from, kept by the forward code (`[n A]`);
    /// or, for `iterate` and `while`, the step count, the states computed
    /// again in the adjoint.
    states: States,
    init: ast::Expr,
    init_name: Option<String>,
    /// The items (when the step takes items) and their name when varying.
    items: Option<ast::Expr>,
    items_name: Option<String>,
    /// `scan`: the result is every state, each with a cotangent of its own.
    every_state: bool,
    step: Step,
}

enum States {
    Kept(ast::Expr),
    Count(ast::Expr),
}

/// `[$name]` as a shape.
fn dim_shape(name: &str) -> ast::Shape {
    ast::Shape {
        kind: ast::ShapeKind::Splice(vec![ast::Ispace::Dim(ast::Dim {
            kind: ast::DimKind::Var(super::ident(name)),
            span: sp(),
        })]),
        span: sp(),
    }
}

/// Zeros of a Float type, or a record of them (the items' place in a
/// loop's first record, which may have no items to take one from).
fn zeros_of_type(w: &super::Writer, ty: &Type) -> ast::Expr {
    if let Some(fields) = float_record(&ty.atom) {
        return record_of(w, &fields, |f| {
            let field_ty = fields.iter().find(|(n, _)| n == f).map(|(_, t)| t.clone());
            let field_ty = field_ty.unwrap_or_else(|| Type::scalar(Atom::Float));
            zeros_of_type(
                w,
                &Type {
                    atom: Atom::Float,
                    shape: ty.shape.concat(&field_ty.shape),
                },
            )
        });
    }
    let rep = node(ExprKind::IApp {
        func: Box::new(node(ExprKind::IApp {
            func: Box::new(node(ExprKind::TApp {
                func: Box::new(var("replicate")),
                arg: w.ty(&Type::scalar(Atom::Float)),
            })),
            arg: ast::Ispace::Shape(w.shape(&ty.shape)),
        })),
        arg: ast::Ispace::Shape(w.shape(&Shape::scalar())),
    });
    app(rep, vec![super::float(0.0)])
}

/// Zeros like `like`, a Float array or an array of records of them (a
/// loop's state may be a record: `{(pos …) (vel …)}`).
pub(super) fn zeros_like(w: &super::Writer, atom: &Atom, like: ast::Expr) -> ast::Expr {
    match float_record(atom) {
        Some(fields) => record_of(w, &fields, |f| zeros(w, field_of(like.clone(), f))),
        None => zeros(w, like),
    }
}

/// `a + b`, Float arrays or records of them, field by field.
fn plus(w: &super::Writer, atom: &Atom, a: ast::Expr, b: ast::Expr) -> ast::Expr {
    match float_record(atom) {
        Some(fields) => record_of(w, &fields, |f| {
            call("f.+", vec![field_of(a.clone(), f), field_of(b.clone(), f)])
        }),
        None => call("f.+", vec![a, b]),
    }
}

/// `(λ (s) (λ (x) (f x s)))`: `fold-right`'s step `f` (item first) as
/// a step of a `fold` (state first).
fn flip(w: &super::Writer, f: ast::Expr, acc: &Type, item: &Type) -> ast::Expr {
    let (s, x) = (w.ad.fresh(), w.ad.fresh());
    lambdas(
        w,
        &[(s.clone(), acc.clone()), (x.clone(), item.clone())],
        app(f, vec![var(&x), var(&s)]),
    )
}

/// Whether a loop's state (or item, or a variable its step closes over)
/// of this atom has a derivative the loop rules follow.
fn float_state(atom: &Atom) -> bool {
    *atom == Atom::Float || float_record(atom).is_some()
}

/// A value of the items' type for a loop's first record: zeros for Floats
/// (there may be no items), else the first item (a `fold` has one).
fn placeholder(w: &super::Writer, item: &Type, xs: &ast::Expr) -> ast::Expr {
    if float_state(&item.atom) {
        zeros_of_type(w, item)
    } else {
        call("head", vec![xs.clone()])
    }
}

pub(super) fn record_type(fields: &super::Fields) -> Type {
    Type::scalar(Atom::Record(fields.clone().into()))
}

pub(super) fn fields(names: &[(&str, &Type)]) -> super::Fields {
    names.iter().map(|(n, t)| (n.to_string(), (*t).clone())).collect()
}

impl Walk<'_, '_> {
    /// `e` as a loop, when its function is one (`None`: not a loop, or a
    /// `reduce`/`scan` another rule has).
    #[allow(clippy::type_complexity)]
    pub(super) fn loop_form(
        &mut self,
        name: &str,
        e: &TExpr,
        spine: &[(&TExpr, &Lifted)],
        env: &Env,
    ) -> Option<Result<(ast::Expr, Option<ast::Expr>), Diagnostic>> {
        let op = spine.first().and_then(|(f, _)| head_name(f));
        let vector = spine.last().is_some_and(|(_, l)| l.arg_cell.segs().len() == 1);
        let covered = match name {
            "fold" | "fold-right" | "iterate" | "while" => false,
            // By `f.+`: a sum (`Rule::Linear`), summed as the engines sum.
            "reduce/zero" => spine.first().is_some_and(|(f, _)| super::hist::adds(f)),
            "reduce" => op == Some("f.+") || (matches!(op, Some("f.max" | "f.min" | "f.*")) && vector),
            "scan" | "iscan" => op == Some("f.+"),
            _ => true,
        };
        let arity = match name {
            "fold" | "fold-right" | "reduce/zero" | "iterate" | "while" | "scan" => 3,
            _ => 2,
        };
        if covered || spine.len() != arity {
            return None;
        }
        Some(self.loop_(name, e, spine, env))
    }

    #[allow(clippy::type_complexity)]
    fn loop_(
        &mut self,
        name: &str,
        e: &TExpr,
        spine: &[(&TExpr, &Lifted)],
        env: &Env,
    ) -> Result<(ast::Expr, Option<ast::Expr>), Diagnostic> {
        let what = format!("`{name}`");
        let lifted = spine.iter().any(|(_, l)| !l.principal.is_scalar());
        // A lifted `reduce` or `iscan` splits each cell into its first
        // item (the initial state) and the rest in the cell's derivative.
        let split = lifted && matches!(name, "reduce" | "iscan");
        // `fold-right` is a `fold` over the items reversed, by the step
        // with its parameters the other way round.
        let flipped = name == "fold-right";
        // The cell and frame of argument i.
        let cell = |i: usize| spine.get(i).map(|(_, l)| l.arg_cell.clone()).unwrap_or_default();
        let frame = |i: usize| spine.get(i).map(|(_, l)| l.arg_frame.clone()).unwrap_or_default();
        let arg = |i: usize| spine.get(i).map(|(a, _)| *a);
        let (Some(fe), Some(last)) = (
            arg(if matches!(name, "iterate" | "while") { 1 } else { 0 }),
            spine.last().map(|(a, _)| *a),
        ) else {
            return Err(self.unsupported(e, &what));
        };
        // The initial state and the items, primal and tangent.
        let (init, items) = match name {
            "fold" | "scan" | "reduce/zero" => {
                let (Some(ie), Some(xe)) = (arg(1), arg(2)) else {
                    return Err(self.unsupported(e, &what));
                };
                let init = self.expr(ie, env)?;
                let items = self.expr(xe, env)?;
                (init, Some(items))
            }
            "fold-right" => {
                let (Some(ie), Some(xe)) = (arg(1), arg(2)) else {
                    return Err(self.unsupported(e, &what));
                };
                let init = self.expr(ie, env)?;
                let (p, t) = self.expr(xe, env)?;
                let p = self.bind_named(p);
                // Lifted, each cell's items reversed.
                let items = Type {
                    atom: xe.ty.atom.clone(),
                    shape: cell(2),
                };
                (
                    init,
                    Some(self.structural("reverse", &p, &t, &items, &frame(2), e.span)),
                )
            }
            "iterate" | "while" => (self.expr(last, env)?, None),
            _ if split => (self.expr(last, env)?, None),
            // reduce, iscan: the first item is the initial state.
            _ => {
                let (p, t) = self.expr(last, env)?;
                let p = self.bind_named(p);
                let first = self.structural("head", &p, &t, &last.ty, &Shape::scalar(), e.span);
                let rest = self.structural("tail", &p, &t, &last.ty, &Shape::scalar(), e.span);
                (first, Some(rest))
            }
        };
        let (p_init, t_init) = init;
        let p_init = self.bind_named(p_init);
        let items = items.map(|(p, t)| (self.bind_named(p), t));
        let item_varying = if split {
            t_init.is_some()
        } else {
            items.as_ref().is_some_and(|(_, t)| t.is_some())
        };
        let acc = match name {
            "fold" | "fold-right" | "reduce/zero" | "scan" => Type {
                atom: e.ty.atom.clone(),
                shape: cell(1),
            },
            "iterate" | "while" => Type {
                atom: e.ty.atom.clone(),
                shape: cell(2),
            },
            // reduce, iscan: an item of the cell.
            _ => Type {
                atom: e.ty.atom.clone(),
                shape: Shape::from_segs(cell(1).segs().get(1..).unwrap_or_default().to_vec()),
            },
        };
        let item = match name {
            "fold" | "fold-right" | "reduce/zero" | "scan" => Some(Type {
                atom: last.ty.atom.clone(),
                shape: Shape::from_segs(cell(2).segs().get(1..).unwrap_or_default().to_vec()),
            }),
            "iterate" | "while" => None,
            _ => Some(acc.clone()),
        };
        if !float_state(&acc.atom)
            || item
                .as_ref()
                .is_some_and(|i| item_varying && !float_state(&i.atom))
        {
            return Err(self.unsupported(e, &format!("{what} of a state that is not a Float array")));
        }
        let step = match head_name(fe) {
            Some(op @ ("f.+" | "f.-" | "f.*" | "f./" | "f.max" | "f.min")) if item.as_ref() == Some(&acc) => {
                self.op_step(op, acc.clone(), item_varying, flipped)
            }
            _ => self.lambda_step(
                fe,
                acc.clone(),
                item.clone(),
                item_varying,
                flipped,
                env,
                e,
                &what,
            )?,
        };
        let how = match name {
            "fold" | "fold-right" => How::Fold,
            // `reduce/zero`: a fold that may have no items.
            "reduce" | "reduce/zero" => How::Reduce,
            "scan" | "iscan" => How::Scan,
            "iterate" => {
                let n = arg(0).map(|n| self.w.expr(n)).unwrap_or_else(|| int(0));
                How::Iterate(self.bind_named(n))
            }
            _ => How::While(arg(0).map(|t| self.w.expr(t)).unwrap_or_else(|| var("undefined"))),
        };
        let t_init = match t_init {
            Some(t) => Some(t),
            None if !step.closed.is_empty() || item_varying => None,
            None if split => None,
            // Nothing varies: no derivative.
            None => {
                return Ok((
                    self.primal_loop(&how, &step, &p_init, items.as_ref().map(|(p, _)| p)),
                    None,
                ));
            }
        };
        if lifted {
            let frames = frame;
            let (init_at, items_at) = match name {
                "iterate" | "while" => (2, None),
                "reduce" | "iscan" => (1, None),
                _ => (1, Some(2)),
            };
            let cells = LiftedArgs {
                count: (name == "iterate").then(|| frames(0)),
                init: (frames(init_at), cell(init_at)),
                items: items_at.map(|i| (frames(i), cell(i), last.ty.atom.clone())),
                principal: spine.last().map(|(_, l)| l.principal.clone()).unwrap_or_default(),
                split,
            };
            return self.lifted_loop(how, step, (p_init, t_init), items, cells, e);
        }
        match self.mode {
            Mode::Forward => Ok(self.forward_loop(how, &step, p_init, t_init, items)),
            Mode::Reverse => Ok(self.reverse_loop(how, step, p_init, t_init, items, e.span)),
        }
    }

    /// A loop lifted over a frame (`fold`, `scan` or `iterate` of a frame
    /// of initial states, items or counts): the derivative of the loop on
    /// cells, lifted as a function the program defines is (the adjoints of
    /// arguments of shorter frames, and of the variables the step closes
    /// over, summed over the frame axes they were replicated along).
    #[allow(clippy::type_complexity)]
    fn lifted_loop(
        &mut self,
        how: How,
        step: Step,
        init: (ast::Expr, Option<ast::Expr>),
        items: Option<(ast::Expr, Option<ast::Expr>)>,
        cells: LiftedArgs,
        e: &TExpr,
    ) -> Result<(ast::Expr, Option<ast::Expr>), Diagnostic> {
        let w = self.w;
        // The cell arguments: name, cell type, primal, tangent, frame.
        let mut args: Vec<(String, Type, ast::Expr, Option<ast::Expr>, Shape)> = Vec::new();
        if let (Some(frame), How::Iterate(n)) = (&cells.count, &how) {
            args.push((
                w.ad.fresh(),
                Type::scalar(Atom::Int),
                n.clone(),
                None,
                frame.clone(),
            ));
        }
        let (p_init, t_init) = init;
        let init_ty = if cells.split {
            Type {
                atom: step.acc.atom.clone(),
                shape: cells.init.1.clone(),
            }
        } else {
            step.acc.clone()
        };
        args.push((
            w.ad.fresh(),
            init_ty.clone(),
            p_init,
            t_init,
            cells.init.0.clone(),
        ));
        if let (Some((p, t)), Some((frame, cell, atom))) = (items, &cells.items) {
            let ty = Type {
                atom: atom.clone(),
                shape: cell.clone(),
            };
            args.push((w.ad.fresh(), ty, p, t, frame.clone()));
        }
        let has_count = cells.count.is_some();
        let cell_how = |how: &How, names: &[String]| match how {
            How::Iterate(_) => How::Iterate(var(names.first().map(String::as_str).unwrap_or("undefined"))),
            How::Fold => How::Fold,
            How::Reduce => How::Reduce,
            How::Scan => How::Scan,
            How::While(t) => How::While(t.clone()),
        };
        let names: Vec<String> = args.iter().map(|a| a.0.clone()).collect();
        let init_at = usize::from(has_count);
        let result_cell = Type {
            atom: e.ty.atom.clone(),
            shape: Shape::from_segs(
                e.ty.shape
                    .segs()
                    .get(cells.principal.segs().len()..)
                    .unwrap_or_default()
                    .to_vec(),
            ),
        };
        let cell_items = |tangent: Option<ast::Expr>| args.get(init_at + 1).map(|(n, ..)| (var(n), tangent));
        if self.mode == Mode::Forward {
            let mut params: Vec<(String, Type)> =
                args.iter().map(|(n, t, ..)| (n.clone(), t.clone())).collect();
            let mut values: Vec<ast::Expr> = args.iter().map(|a| a.2.clone()).collect();
            let mut tangent_of = Vec::new();
            for (_, t, _, dt, _) in &args {
                let name = dt.as_ref().map(|dt| {
                    let n = w.ad.fresh();
                    params.push((n.clone(), t.clone()));
                    values.push(dt.clone());
                    n
                });
                tangent_of.push(name);
            }
            let saved = std::mem::take(&mut self.binds);
            let init_t = tangent_of.get(init_at).cloned().flatten().map(|n| var(&n));
            let items_t = tangent_of.get(init_at + 1).cloned().flatten().map(|n| var(&n));
            let init_p = var(names.get(init_at).map(String::as_str).unwrap_or("undefined"));
            let (init_p, init_t, items) = if cells.split {
                let (first, first_t) =
                    self.structural("head", &init_p, &init_t, &init_ty, &Shape::scalar(), e.span);
                let (rest, rest_t) =
                    self.structural("tail", &init_p, &init_t, &init_ty, &Shape::scalar(), e.span);
                (first, first_t, Some((rest, rest_t)))
            } else {
                (init_p, init_t, cell_items(items_t))
            };
            let (out, t) = self.forward_loop(cell_how(&how, &names), &step, init_p, init_t, items);
            let binds = std::mem::replace(&mut self.binds, saved);
            let t = t.unwrap_or_else(|| zeros_like(w, &e.ty.atom, out.clone()));
            let pair: super::Fields = vec![("p".into(), result_cell.clone()), ("t".into(), result_cell)];
            let rec = record_of(w, &pair, |f| if f == "p" { out.clone() } else { t.clone() });
            let res = self.bind(app(lambdas(w, &params, let_in(binds, rec)), values));
            let out = self.bind(field_of(res.clone(), "p"));
            let t = self.bind(field_of(res, "t"));
            return Ok((out, Some(t)));
        }
        let out = {
            let (init_p, items_p) = (
                args.get(init_at).map(|a| a.2.clone()),
                args.get(init_at + 1).map(|a| a.2.clone()),
            );
            let init_p = init_p.unwrap_or_else(|| var("undefined"));
            if cells.split {
                // Each cell's first item and the rest, in a lambda lifted
                // over the frame.
                let x = w.ad.fresh();
                let (first, rest) = (call("head", vec![var(&x)]), call("tail", vec![var(&x)]));
                let body = self.primal_loop(&how, &step, &first, Some(&rest));
                self.bind(app(lambdas(w, &[(x, init_ty.clone())], body), vec![init_p]))
            } else if let (How::Reduce, Some(items_p), Some((_, items_ty, ..))) =
                (&how, items_p.clone(), args.get(init_at + 1))
            {
                // (`reduce/zero`: `last` of a `scan`, on cells.)
                let (s, x) = (w.ad.fresh(), w.ad.fresh());
                let body = self.primal_loop(&how, &step, &var(&s), Some(&var(&x)));
                let params = [(s, init_ty.clone()), (x, items_ty.clone())];
                self.bind(app(lambdas(w, &params, body), vec![init_p, items_p]))
            } else {
                self.bind(self.primal_loop(&how, &step, &init_p, items_p.as_ref()))
            }
        };
        let mut node_args: Vec<Arg> = args
            .iter()
            .map(|(_, t, p, dt, frame)| Arg {
                primal: p.clone(),
                varying: varying_name(dt, p),
                frame: frame.clone(),
                cell: t.shape.clone(),
                atom: t.atom.clone(),
            })
            .collect();
        let mut params: Vec<(String, Type)> = args.iter().map(|(n, t, ..)| (n.clone(), t.clone())).collect();
        for (name, ty, _) in &step.closed {
            node_args.push(Arg {
                primal: var(name),
                varying: Some(name.clone()),
                frame: Shape::scalar(),
                cell: ty.shape.clone(),
                atom: ty.atom.clone(),
            });
            params.push((name.clone(), ty.clone()));
        }
        // The loop's reverse derivative on cells, for these arguments (by
        // index): the cotangent of one, or the record of several's (one
        // forward and one backward pass for all).
        let derivative = |targets: &[usize]| -> Result<ast::Expr, Diagnostic> {
            let mut sub = Walk::new(w, Mode::Reverse);
            sub.records = self.records.clone();
            for (name, ty) in &params {
                if let Some(fields) = float_record(&ty.atom) {
                    sub.records.insert(name.clone(), fields);
                }
            }
            let marker = |i: usize| {
                node_args
                    .get(i)
                    .and_then(|a| a.varying.as_ref())
                    .map(|_| var("∂unused"))
            };
            let init_p = var(names.get(init_at).map(String::as_str).unwrap_or("undefined"));
            let (init_p, init_t, items) = if cells.split {
                let init_t = marker(init_at);
                let (first, first_t) =
                    sub.structural("head", &init_p, &init_t, &init_ty, &Shape::scalar(), e.span);
                let (rest, rest_t) =
                    sub.structural("tail", &init_p, &init_t, &init_ty, &Shape::scalar(), e.span);
                (first, first_t, Some((rest, rest_t)))
            } else {
                (init_p, marker(init_at), cell_items(marker(init_at + 1)))
            };
            let (o, _) = sub.reverse_loop(
                cell_how(&how, &names),
                step.clone(),
                init_p,
                init_t,
                items,
                e.span,
            );
            let ct = w.ad.fresh();
            let mut adjoints = HashMap::new();
            if let ExprKind::Var(o) = &o.kind {
                adjoints.insert(o.name.clone(), ct.clone());
            }
            let nodes = std::mem::take(&mut sub.nodes);
            for n in nodes.iter().rev() {
                sub.adjoint(n, &mut adjoints)?;
            }
            let mut fields: super::Fields = Vec::new();
            let mut values = HashMap::new();
            for &k in targets {
                let Some((target, ty)) = params.get(k).cloned() else {
                    continue;
                };
                let result = match sub.read_adjoint(&target, &mut adjoints) {
                    Some(a) => a,
                    None => sub.zeros_of(&target),
                };
                fields.push((super::grad_field(k), ty));
                values.insert(super::grad_field(k), result);
            }
            let result = if let [(only, _)] = fields.as_slice() {
                values.remove(only).unwrap_or_else(|| var("undefined"))
            } else {
                record_of(w, &fields, |f| {
                    values.remove(f).unwrap_or_else(|| var("undefined"))
                })
            };
            let body = let_in(std::mem::take(&mut sub.binds), result);
            let mut all = params.clone();
            all.push((ct, result_cell.clone()));
            Ok(lambdas(w, &all, body))
        };
        let targets: Vec<usize> = (0..node_args.len())
            .filter(|&k| node_args.get(k).is_some_and(|a| a.varying.is_some()))
            .collect();
        let rule = if targets.len() > 1 {
            Rule::CallAll(derivative(&targets)?)
        } else {
            let mut fns = Vec::new();
            for k in 0..node_args.len() {
                fns.push(if targets.contains(&k) {
                    Some(derivative(&[k])?)
                } else {
                    None
                });
            }
            Rule::Call(fns)
        };
        let out_name = match &out.kind {
            ExprKind::Var(v) => v.name.clone(),
            _ => String::new(),
        };
        self.nodes.push(Node {
            out: out_name,
            rule,
            head: var("∂loop"),
            args: node_args,
            principal: cells.principal.clone(),
            result_cell: result_cell.shape.clone(),
            span: e.span,
        });
        Ok((out, Some(var("∂unused"))))
    }

    /// `e` bound to a fresh name unless it is a variable or a literal.
    pub(super) fn bind_named(&mut self, e: ast::Expr) -> ast::Expr {
        if matches!(e.kind, ExprKind::Var(_) | ExprKind::Array { .. }) {
            e
        } else {
            self.bind(e)
        }
    }

    /// `(op x)` for a structural `op` without instantiations (`head`,
    /// `tail`, `reverse`) of a variable `x` of cells of type `ty` in the
    /// frame `frame` (lifted: `op` on each cell), with its tangent or its
    /// reverse-mode node.
    fn structural(
        &mut self,
        op: &'static str,
        x: &ast::Expr,
        t: &Option<ast::Expr>,
        ty: &Type,
        frame: &Shape,
        span: Span,
    ) -> (ast::Expr, Option<ast::Expr>) {
        let w = self.w;
        let on_cells = |x: &ast::Expr| {
            if frame.is_scalar() {
                call(op, vec![x.clone()])
            } else {
                super::lift(w, vec![(x.clone(), ty.clone())], |v| call(op, v.to_vec()))
            }
        };
        let out = self.bind(on_cells(x));
        let Some(t) = t else {
            return (out, None);
        };
        if self.mode == Mode::Forward {
            let dt = self.bind(on_cells(t));
            return (out, Some(dt));
        }
        let (ExprKind::Var(o), ExprKind::Var(src)) = (&out.kind, &x.kind) else {
            return (out, None);
        };
        let cell = Shape::from_segs(ty.shape.segs().get(1..).unwrap_or_default().to_vec());
        let result_cell = if op == "head" {
            cell
        } else if op == "reverse" {
            ty.shape.clone()
        } else {
            let mut segs = ty.shape.segs().to_vec();
            if let Some(Seg::Dim(d)) = segs.first_mut() {
                *d = d.sub(&Dim::nat(1));
            }
            Shape::from_segs(segs)
        };
        self.nodes.push(Node {
            out: o.name.clone(),
            rule: Rule::Linear(op),
            head: var(op),
            args: vec![Arg {
                primal: x.clone(),
                varying: Some(src.name.clone()),
                frame: frame.clone(),
                cell: ty.shape.clone(),
                atom: Atom::Float,
            }],
            principal: frame.clone(),
            result_cell,
            span,
        });
        (out, Some(var("∂unused")))
    }

    /// A step by a scalar primitive (`(reduce f.* xs)` of matrices…),
    /// lifted over the cells: its derivatives by the primitive's partials.
    pub(super) fn op_step(&mut self, op: &str, acc: Type, item_varying: bool, flipped: bool) -> Step {
        let w = self.w;
        let (s, x, d, dx, ct) = (
            w.ad.fresh(),
            w.ad.fresh(),
            w.ad.fresh(),
            w.ad.fresh(),
            w.ad.fresh(),
        );
        // `(op x s)` for `fold-right`: the state is the second argument.
        let (a, b) = if flipped { (&x, &s) } else { (&s, &x) };
        let out = call(op, vec![var(a), var(b)]);
        let (state_at, item_at) = if flipped { (1, 0) } else { (0, 1) };
        let partial = |i: usize, t: &str| binary_partial(op, i, var(t), &var(a), &var(b), &out);
        let mut forward = None;
        let (mut for_state, mut for_item) = (None, None);
        if self.mode == Mode::Forward {
            let mut params = vec![
                (s.clone(), acc.clone()),
                (x.clone(), acc.clone()),
                (d.clone(), acc.clone()),
            ];
            let mut t = partial(state_at, &d);
            if item_varying {
                params.push((dx.clone(), acc.clone()));
                t = call("f.+", vec![t, partial(item_at, &dx)]);
            }
            forward = Some(lambdas(w, &params, t));
        } else {
            let params = [
                (s.clone(), acc.clone()),
                (x.clone(), acc.clone()),
                (ct.clone(), acc.clone()),
            ];
            for_state = Some(lambdas(w, &params, partial(state_at, &ct)));
            if item_varying {
                for_item = Some(lambdas(w, &params, partial(item_at, &ct)));
            }
        }
        let code = if flipped {
            flip(w, var(op), &acc, &acc)
        } else {
            var(op)
        };
        Step {
            code,
            item: Some(acc.clone()),
            acc,
            item_varying,
            closed: Vec::new(),
            forward,
            for_state,
            for_item,
            for_closed: Vec::new(),
        }
    }

    /// A step by a lambda (or a name bound to one): its derivatives by
    /// differentiating its body.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn lambda_step(
        &mut self,
        fe: &TExpr,
        acc: Type,
        item: Option<Type>,
        item_varying: bool,
        flipped: bool,
        env: &Env,
        e: &TExpr,
        what: &str,
    ) -> Result<Step, Diagnostic> {
        let w = self.w;
        let bound = match &fe.kind {
            TExprKind::Var(v) => w.ad.bound_lambdas.borrow().get(v).cloned(),
            _ => None,
        };
        let f = match &fe.kind {
            TExprKind::Var(v) => w.ad.lambdas.get(v).copied().or(bound.as_ref()),
            _ => lambda(fe).map(|_| fe),
        };
        let arity = if item.is_some() { 2 } else { 1 };
        // A primitive (`f.sin`, `f.+` on cells…): as a lambda applying it.
        let expanded;
        let f = match f {
            Some(f) => f,
            None => {
                expanded = super::eta(w, fe, arity).ok_or_else(|| {
                    self.unsupported(
                        e,
                        &format!(
                            "{what} by a function that is not a lambda or a primitive with a derivative"
                        ),
                    )
                })?;
                &expanded
            }
        };
        let (mut params, body, _) = params_of(f, arity);
        if params.len() != arity {
            return Err(self.unsupported(e, &format!("{what} by a function of this shape")));
        }
        if flipped {
            params.reverse();
        }
        let free = super::varying_free(w, body, env);
        if free.iter().any(|(_, t, _)| !float_state(&t.atom)) {
            return Err(self.unsupported(
                e,
                &format!("{what} by a function that closes over a varying value that is not Float"),
            ));
        }
        let mut ps: Vec<Param> = params
            .iter()
            .enumerate()
            .map(|(i, (v, ty))| Param {
                var: *v,
                ty: ty.clone(),
                varying: i == 0 || item_varying,
            })
            .collect();
        ps.extend(free.iter().map(|(v, t, _)| Param {
            var: *v,
            ty: t.clone(),
            varying: true,
        }));
        let closed: Vec<(String, Type, String)> = free
            .iter()
            .map(|(v, t, dt)| (w.var(*v).name, t.clone(), dt.clone()))
            .collect();
        let code = match (&item, flipped) {
            (Some(item), true) => flip(w, w.expr(fe), &acc, item),
            _ => w.expr(fe),
        };
        let mut step = Step {
            code,
            acc: acc.clone(),
            item,
            item_varying,
            closed,
            forward: None,
            for_state: None,
            for_item: None,
            for_closed: Vec::new(),
        };
        if self.mode == Mode::Forward {
            step.forward = Some(forward_fn(w, &ps, body)?);
            return Ok(step);
        }
        let derivative = |target: usize| -> Result<ast::Expr, Diagnostic> {
            let ReverseCode {
                params: mut names,
                ct,
                body: adj,
                ..
            } = reverse_core(w, &ps, body, target)?;
            names.push((ct, acc.clone()));
            Ok(lambdas(w, &names, adj))
        };
        step.for_state = Some(derivative(0)?);
        if item_varying {
            step.for_item = Some(derivative(1)?);
        }
        for k in 0..step.closed.len() {
            step.for_closed.push(derivative(k + arity)?);
        }
        Ok(step)
    }

    /// The loop without derivatives.
    fn primal_loop(&self, how: &How, step: &Step, init: &ast::Expr, items: Option<&ast::Expr>) -> ast::Expr {
        let xs = || items.cloned().unwrap_or_else(|| var("undefined"));
        match how {
            How::Fold => call("fold", vec![step.code.clone(), init.clone(), xs()]),
            How::Reduce => call(
                "last",
                vec![call("scan", vec![step.code.clone(), init.clone(), xs()])],
            ),
            How::Scan => call("scan", vec![step.code.clone(), init.clone(), xs()]),
            How::Iterate(n) => call("iterate", vec![n.clone(), step.code.clone(), init.clone()]),
            How::While(test) => call("while", vec![test.clone(), step.code.clone(), init.clone()]),
        }
    }

    /// Forward mode: the state and its tangent stepped together, a record.
    fn forward_loop(
        &mut self,
        how: How,
        step: &Step,
        p_init: ast::Expr,
        t_init: Option<ast::Expr>,
        items: Option<(ast::Expr, Option<ast::Expr>)>,
    ) -> (ast::Expr, Option<ast::Expr>) {
        let w = self.w;
        let acc = &step.acc;
        let item = step.item.clone().unwrap_or_else(|| acc.clone());
        let t0 = t_init.unwrap_or_else(|| zeros_like(w, &acc.atom, p_init.clone()));
        let d = step.forward.clone().unwrap_or_else(|| var("undefined"));
        let (r, q) = (w.ad.fresh(), w.ad.fresh());
        let with_items = step.item.is_some();
        // The state record; with items, it carries an item too, so that
        // `scan` (whose state and items are of one type) can run it.
        let mut state: Vec<(&str, &Type)> = vec![("p", acc), ("t", acc)];
        if with_items {
            state.push(("x", &item));
            if step.item_varying {
                state.push(("dx", &item));
            }
        }
        let state = fields(&state);
        let rty = record_type(&state);
        let (x, dx) = if with_items {
            (Some(field_of(var(&q), "x")), Some(field_of(var(&q), "dx")))
        } else {
            (None, None)
        };
        let p = field_of(var(&r), "p");
        let mut all = vec![p.clone()];
        all.extend(x.clone());
        all.extend(step.closed.iter().map(|(n, _, _)| var(n)));
        all.push(field_of(var(&r), "t"));
        if step.item_varying {
            all.extend(dx.clone());
        }
        all.extend(step.closed.iter().map(|(_, _, dt)| var(dt)));
        let mut primal_args = vec![p];
        primal_args.extend(x.clone());
        let body = record_of(w, &state, |f| match f {
            "p" => app(step.code.clone(), primal_args.clone()),
            "t" => app(d.clone(), all.clone()),
            "x" => x.clone().unwrap_or_else(|| var("undefined")),
            _ => dx.clone().unwrap_or_else(|| var("undefined")),
        });
        let mut params = vec![(r.clone(), rty.clone())];
        if with_items {
            params.push((q, rty.clone()));
        }
        let f = lambdas(w, &params, body);
        let (xs, dxs) = match items {
            Some((p, t)) => (p, t),
            None => (var("undefined"), None),
        };
        let dxs = dxs.unwrap_or_else(|| zeros_like(w, &item.atom, xs.clone()));
        let record = |p: ast::Expr, t: ast::Expr, x: ast::Expr, dx: ast::Expr| {
            record_of(w, &state, |f| match f {
                "p" => p.clone(),
                "t" => t.clone(),
                "x" => x.clone(),
                _ => dx.clone(),
            })
        };
        let r0 = record(
            p_init.clone(),
            t0.clone(),
            placeholder(w, &item, &xs),
            zeros_of_type(w, &item),
        );
        let each = record(p_init, t0, xs, dxs);
        let res = match how {
            How::Fold => call("fold", vec![f, r0, each]),
            How::Reduce => call("last", vec![call("scan", vec![f, r0, each])]),
            How::Scan => call("scan", vec![f, r0, each]),
            How::Iterate(n) => call("iterate", vec![n, f, r0]),
            How::While(test) => {
                let s = w.ad.fresh();
                let test = lambdas(w, &[(s.clone(), rty)], app(test, vec![field_of(var(&s), "p")]));
                call("while", vec![test, f, r0])
            }
        };
        let res = self.bind(res);
        let out = self.bind(field_of(res.clone(), "p"));
        let t = self.bind(field_of(res, "t"));
        (out, Some(t))
    }

    /// Reverse mode's forward code: the loop's result, and the states kept
    /// (or the step count).
    fn reverse_loop(
        &mut self,
        how: How,
        step: Step,
        p_init: ast::Expr,
        t_init: Option<ast::Expr>,
        items: Option<(ast::Expr, Option<ast::Expr>)>,
        span: Span,
    ) -> (ast::Expr, Option<ast::Expr>) {
        let w = self.w;
        let acc = step.acc.clone();
        let init_name = varying_name(&t_init, &p_init);
        let items_name = items.as_ref().and_then(|(p, t)| varying_name(t, p));
        let xs = items.map(|(p, _)| p);
        let every_state = matches!(how, How::Scan);
        let (out, states) = match how {
            How::Fold | How::Reduce | How::Scan => {
                // The states, by a scan over records of (state, item).
                let item = step.item.clone().unwrap_or_else(|| acc.clone());
                let pair = fields(&[("state", &acc), ("item", &item)]);
                let pair_ty = record_type(&pair);
                let (r, q) = (w.ad.fresh(), w.ad.fresh());
                let body = record_of(w, &pair, |f| {
                    if f == "state" {
                        app(
                            step.code.clone(),
                            vec![field_of(var(&r), "state"), field_of(var(&q), "item")],
                        )
                    } else {
                        field_of(var(&q), "item")
                    }
                });
                let f = lambdas(w, &[(r, pair_ty.clone()), (q, pair_ty)], body);
                let xs = xs.clone().unwrap_or_else(|| var("undefined"));
                let r0 = record_of(w, &pair, |f| {
                    if f == "state" {
                        p_init.clone()
                    } else {
                        placeholder(w, &item, &xs)
                    }
                });
                let each = record_of(
                    w,
                    &pair,
                    |f| if f == "state" { p_init.clone() } else { xs.clone() },
                );
                let all = self.bind(field_of(call("scan", vec![f, r0, each]), "state"));
                let states = self.bind(call("curtail", vec![all.clone()]));
                let out = if every_state {
                    all
                } else {
                    self.bind(call("last", vec![all]))
                };
                (out, States::Kept(states))
            }
            How::Iterate(n) => {
                let out = self.bind(call(
                    "iterate",
                    vec![n.clone(), step.code.clone(), p_init.clone()],
                ));
                (out, States::Count(n))
            }
            How::While(test) => {
                // The steps counted beside the state.
                let int_ty = Type::scalar(Atom::Int);
                let counted = fields(&[("state", &acc), ("count", &int_ty)]);
                let cty = record_type(&counted);
                let (r, s) = (w.ad.fresh(), w.ad.fresh());
                let test = lambdas(
                    w,
                    &[(s.clone(), cty.clone())],
                    app(test, vec![field_of(var(&s), "state")]),
                );
                let body = record_of(w, &counted, |f| {
                    if f == "state" {
                        app(step.code.clone(), vec![field_of(var(&r), "state")])
                    } else {
                        call("+", vec![field_of(var(&r), "count"), int(1)])
                    }
                });
                let f = lambdas(w, &[(r, cty)], body);
                let r0 = record_of(
                    w,
                    &counted,
                    |f| if f == "state" { p_init.clone() } else { int(0) },
                );
                let res = self.bind(call("while", vec![test, f, r0]));
                let out = self.bind(field_of(res.clone(), "state"));
                let n = self.bind(field_of(res, "count"));
                (out, States::Count(n))
            }
        };
        let out_name = match &out.kind {
            ExprKind::Var(v) => v.name.clone(),
            _ => String::new(),
        };
        self.nodes.push(Node {
            out: out_name,
            rule: Rule::Loop(Box::new(LoopNode {
                states,
                init: p_init,
                init_name,
                items: xs,
                items_name,
                every_state,
                step,
            })),
            head: var("∂loop"),
            args: Vec::new(),
            principal: Shape::scalar(),
            result_cell: Shape::scalar(),
            span,
        });
        (out, Some(var("∂unused")))
    }

    /// The adjoints of a loop: the cotangent of the state scanned back over
    /// the steps, last first, each step giving its item's adjoint, with the
    /// adjoints of the variables the step closes over summed along.
    pub(super) fn loop_adjoint(
        &mut self,
        lp: &LoopNode,
        ct: &ast::Expr,
        adjoints: &mut HashMap<String, String>,
    ) -> Result<(), Diagnostic> {
        let w = self.w;
        let step = &lp.step;
        let acc = &step.acc;
        let item = step.item.clone().unwrap_or_else(|| acc.clone());
        let with_items = step.item.is_some();
        let mut names: Vec<(String, &Type)> = vec![("ct".into(), acc), ("state".into(), acc)];
        let closed_fields: Vec<String> = (0..step.closed.len()).map(|k| format!("v{k}")).collect();
        for (k, (_, t, _)) in step.closed.iter().enumerate() {
            names.push((closed_fields[k].clone(), t));
        }
        if with_items {
            names.push(("item".into(), &item));
            if step.item_varying {
                names.push(("dit".into(), &item));
            }
        }
        if lp.every_state {
            names.push(("out".into(), acc));
        }
        let all: super::Fields = names.iter().map(|(n, t)| (n.clone(), (*t).clone())).collect();
        let rty = record_type(&all);
        let (r, q) = (w.ad.fresh(), w.ad.fresh());
        let mut at = vec![field_of(var(&q), "state")];
        if with_items {
            at.push(field_of(var(&q), "item"));
        }
        at.extend(step.closed.iter().map(|(n, _, _)| var(n)));
        at.push(field_of(var(&r), "ct"));
        let undefined = || var("undefined");
        let body = record_of(w, &all, |f| match f {
            "ct" => {
                let c = app(step.for_state.clone().unwrap_or_else(undefined), at.clone());
                if lp.every_state {
                    plus(w, &acc.atom, c, field_of(var(&q), "out"))
                } else {
                    c
                }
            }
            "state" | "item" | "out" => field_of(var(&q), f),
            "dit" => app(step.for_item.clone().unwrap_or_else(undefined), at.clone()),
            _ => {
                let k: usize = f.get(1..).and_then(|k| k.parse().ok()).unwrap_or(0);
                let d = step.for_closed.get(k).cloned().unwrap_or_else(undefined);
                let atom = step
                    .closed
                    .get(k)
                    .map(|(_, t, _)| t.atom.clone())
                    .unwrap_or(Atom::Float);
                plus(w, &atom, field_of(var(&r), f), app(d, at.clone()))
            }
        });
        let bstep = lambdas(w, &[(r, rty.clone()), (q, rty)], body);
        let closed_zero = |f: &str| {
            let k: usize = f.get(1..).and_then(|k| k.parse().ok()).unwrap_or(0);
            step.closed
                .get(k)
                .map(|(n, t, _)| zeros_like(w, &t.atom, var(n)))
                .unwrap_or_else(undefined)
        };
        let xs = lp.items.clone().unwrap_or_else(undefined);
        let (first_ct, outs) = if lp.every_state {
            (
                call("last", vec![ct.clone()]),
                call("reverse", vec![call("curtail", vec![ct.clone()])]),
            )
        } else {
            (ct.clone(), undefined())
        };
        let r0 = record_of(w, &all, |f| match f {
            "ct" => first_ct.clone(),
            "state" => lp.init.clone(),
            "item" => placeholder(w, &item, &xs),
            "dit" => zeros_of_type(w, &item),
            "out" => zeros_like(w, &acc.atom, lp.init.clone()),
            f => closed_zero(f),
        });
        let scan_back = |states: ast::Expr| {
            let each = record_of(w, &all, |f| match f {
                "ct" => zeros_like(w, &acc.atom, lp.init.clone()),
                "state" => call("reverse", vec![states.clone()]),
                "item" => call("reverse", vec![xs.clone()]),
                "dit" => zeros_like(w, &item.atom, xs.clone()),
                "out" => outs.clone(),
                f => closed_zero(f),
            });
            call("scan", vec![bstep.clone(), r0.clone(), each])
        };
        let (last, dits) = match &lp.states {
            States::Kept(states) => {
                let res = self.bind(scan_back(states.clone()));
                let dits = step
                    .item_varying
                    .then(|| call("reverse", vec![field_of(call("tail", vec![res.clone()]), "dit")]));
                (self.bind(call("last", vec![res])), dits)
            }
            States::Count(n) => {
                // The states again, inside an unbox of `(range n)`.
                let d = format!("${}", w.ad.fresh());
                let i = w.ad.fresh();
                let s = w.ad.fresh();
                let rep = node(ExprKind::IApp {
                    func: Box::new(node(ExprKind::IApp {
                        func: Box::new(node(ExprKind::TApp {
                            func: Box::new(var("replicate")),
                            arg: w.ty(&Type::scalar(acc.atom.clone())),
                        })),
                        arg: ast::Ispace::Shape(dim_shape(&d)),
                    })),
                    arg: ast::Ispace::Shape(w.shape(&acc.shape)),
                });
                let (a, b) = (w.ad.fresh(), w.ad.fresh());
                let again = lambdas(
                    w,
                    &[(a.clone(), acc.clone()), (b, acc.clone())],
                    app(step.code.clone(), vec![var(&a)]),
                );
                let states = call(
                    "curtail",
                    vec![call(
                        "scan",
                        vec![again, lp.init.clone(), app(rep, vec![lp.init.clone()])],
                    )],
                );
                let body = let_in(vec![(s.clone(), states)], call("last", vec![scan_back(var(&s))]));
                let unboxed = node(ExprKind::Unbox {
                    witness: ast::IParam {
                        sort: ast::Sort::Dim,
                        name: super::ident(&d),
                    },
                    var: super::ident(&i),
                    boxed: Box::new(call("range", vec![n.clone()])),
                    body: Box::new(body),
                });
                (self.bind(unboxed), None)
            }
        };
        if let Some(init) = &lp.init_name {
            let c = self.bind(field_of(last.clone(), "ct"));
            self.accumulate(init, c, adjoints);
        }
        for (k, (name, _, _)) in step.closed.iter().enumerate() {
            let c = self.bind(field_of(last.clone(), &closed_fields[k]));
            self.accumulate(name, c, adjoints);
        }
        if let (Some(items), Some(dits)) = (&lp.items_name, dits) {
            let c = self.bind(dits);
            self.accumulate(items, c, adjoints);
        }
        Ok(())
    }
}

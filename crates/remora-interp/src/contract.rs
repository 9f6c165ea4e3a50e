//! Fused multiply-reduce: `(f.sum P)` and `(reduce f.+ P)` for a product
//! `P` — `(f.* x y)`, or a function whose body is one applied over a frame
//! — a dot product, and, lifted over frames, a matrix-vector or matrix
//! product as the papers write them (a lifted dot, rows scaled and added,
//! the sum of outer products) — run as one pass that never builds the
//! product array (which, for a matrix product, is the whole `[m p n]`
//! cube).
//!
//! The factors are read in place through their steps (zero where a factor
//! is replicated, as lifting replicates it), so the rule holds for any
//! frames and any way the lifting was written. The sum is the same bits as
//! the product summed by `reduce` (`kernel::Order::Tree`): each product
//! rounded, then added in the tree's order. A product whose result axes
//! are rows of one factor and columns of the other (a matrix product, or a
//! frame of them) runs as `matmul.rs`'s blocked loop, in that order; other
//! sums run side by side along a *lane* axis (the item's inner axis for
//! `reduce`, else the last frame axis), so the additions vectorise across
//! sums while each sum keeps its own order.
//!
//! A factor may be powers not made: `f.^` over a frame, written in the
//! product or bound by a `let` whose variable the product reads (a table
//! of powers, as a polynomial is written as a sum of terms). The lane sums
//! then make its powers a block of lanes at a time (`powers.rs`: each
//! base's log once for all its exponents), each block small enough to stay
//! in cache while it is summed, so the table is never built whole; the
//! powers are `fmath::pow`'s bits, summed in the same order.

use crate::batch::{Batched, Lifts, Try, place};
use crate::eval::{Binding, Env, Fun, Interpreter, Run, Value, atoms_in, check_size};
use crate::fmath;
use crate::kernel::{Layout, PAIRWISE_LEAF, row_major};
use crate::matmul::{Strided, Sums};
use remora_check::typed::{TAtomKind, TExpr, TExprKind, VarId};
use remora_syntax::Span;
use remora_value::{Array, Atom, Data};
use std::borrow::Cow;

/// The atoms of a factor for one row's run of lanes, as the sums read
/// them: its steps over the items and the lanes (the lane step 0 or 1).
struct Operand<'a> {
    data: Cow<'a, [f32]>,
    item: usize,
    lane: usize,
}

/// A factor of a product: its atoms, or — `f.^` over a frame, not applied
/// — the bases and the exponents of its powers (both over the same shape).
#[derive(Clone, Debug)]
enum Factor<T> {
    Atoms(T),
    Power(T, T),
}

impl<T> Factor<T> {
    fn as_ref(&self) -> Factor<&T> {
        match self {
            Factor::Atoms(x) => Factor::Atoms(x),
            Factor::Power(x, y) => Factor::Power(x, y),
        }
    }

    /// Each part of the factor through `f`.
    fn try_map<U>(self, mut f: impl FnMut(T) -> Option<U>) -> Option<Factor<U>> {
        Some(match self {
            Factor::Atoms(x) => Factor::Atoms(f(x)?),
            Factor::Power(x, y) => Factor::Power(f(x)?, f(y)?),
        })
    }

    /// The atoms, or the bases (which have the powers' shape).
    fn first(&self) -> &T {
        match self {
            Factor::Atoms(x) | Factor::Power(x, _) => x,
        }
    }
}

/// A `let`'s `f.^` over a frame, not applied: its bases and exponents,
/// each laid over the powers' shape (no batch axes). A product summed by
/// [`Interpreter::contraction`] makes the powers a block at a time;
/// anything else that reads the variable (once: see `defer_powers`) has
/// them all made.
#[derive(Debug)]
pub(crate) struct Powers<'p> {
    bases: Batched<'p>,
    exponents: Batched<'p>,
}

impl<'p> Powers<'p> {
    /// The powers (`None`: memory ran short).
    pub(crate) fn value(&self) -> Option<Value<'p>> {
        let (Data::Float(a), Data::Float(b)) = (&self.bases.v.data, &self.exponents.v.data) else {
            return None;
        };
        let shape = self.bases.v.shape.clone();
        let layouts = (self.bases.layout(), self.exponents.layout());
        let out = crate::powers::pow(&shape, (a, &layouts.0), (b, &layouts.1)).ok()?;
        Some(Array {
            shape,
            data: Data::Float(out.into()),
        })
    }

    /// As a factor of a product: the powers' parts.
    fn factor(&self) -> Factor<Batched<'p>> {
        Factor::Power(self.bases.clone(), self.exponents.clone())
    }
}

impl<'p> Interpreter {
    /// `e` as a fused multiply-reduce, when it is one: an application of
    /// `f.sum` (over a vector cell) or `reduce` by `f.+` to a product (see
    /// [`Interpreter::product_operands`]). `None` when `e` is not of that
    /// form or the operands do not suit (the caller then evaluates `e` as
    /// written).
    pub(crate) fn contraction(&mut self, e: &'p TExpr, env: &Env<'p>) -> Try<Batched<'p>> {
        let (reducer, product, lifted) = contraction_form(e)?;
        let pair = crate::semiring::PAIRS
            .into_iter()
            .find(|op| ends_in(product, env, 0, op))?;
        if let Reducer::Reduce(op) = reducer {
            let op = self.eval_batched(op, env)?;
            if op.nb != 0 {
                return None;
            }
            let op = crate::intrinsics::scalar_operator(&op.densify()?.v)?;
            if op != "f.+" {
                return self.folds_of_pairs(op, pair, product, lifted, env, e.span);
            }
        }
        if pair != "f.*" {
            return None;
        }
        let xcell = self.shape_of(&lifted.arg_cell, env, e.span).ok()?;
        let Product { a, b } = self.operands_of(product, env, 0, "f.*")?;
        let (nb, mut shape) = (a.first().nb, a.first().v.shape.clone());
        let (mut a, mut b) = (a, b);
        if matches!(reducer, Reducer::Sum) && xcell.len() > 1 {
            // `f.sum` over cells of several axes: over one axis where both
            // factors' cells lie evenly spaced (dense, or replicated), else
            // a weighted stencil read from the factors where they lie.
            match (one_item_axis(&a, xcell.len()), one_item_axis(&b, xcell.len())) {
                (Some(one_a), Some(one_b)) => {
                    shape = one_a.first().v.shape.clone();
                    (a, b) = (one_a, one_b);
                }
                _ => return self.stencil(&a, &b, xcell.len()),
            }
        }
        // [outer …, items, inner …] of the product.
        let (items_at, seed) = match reducer {
            Reducer::Sum => (shape.len().checked_sub(1)?, Some(0.0f32)),
            Reducer::Reduce(_) if !xcell.is_empty() => (shape.len().checked_sub(xcell.len())?, None),
            _ => return None,
        };
        if items_at < nb {
            return None;
        }
        let items = *shape.get(items_at)?;
        if items == 0 && seed.is_none() {
            return None;
        }
        let mut result_shape = shape.clone();
        result_shape.remove(items_at);
        check_size(atoms_in(&result_shape), Span::default()).ok()?;
        let product = Factors {
            a: a.as_ref().try_map(float_atoms)?,
            b: b.as_ref().try_map(float_atoms)?,
            shape: &shape,
            items_at,
        };
        let out = product.sums(seed)?;
        // The result: the product's shape less the summed axis, laid out
        // row-major.
        Some(Batched::dense(
            Array {
                shape: result_shape,
                data: Data::Float(out.into()),
            },
            nb,
        ))
    }

    /// `(f.sum (f.* a b))` over cells of the last `cell_axes` axes of the
    /// factors, each cell's sum a weighted stencil (`stencil.rs`).
    fn stencil(
        &self,
        a: &Factor<Batched<'p>>,
        b: &Factor<Batched<'p>>,
        cell_axes: usize,
    ) -> Try<Batched<'p>> {
        let (Factor::Atoms(a), Factor::Atoms(b)) = (a, b) else {
            return None;
        };
        let shape = &a.v.shape;
        let frame = shape.get(..shape.len().checked_sub(cell_axes)?)?;
        if frame.len() < a.nb {
            return None;
        }
        check_size(atoms_in(frame), Span::default()).ok()?;
        let out = crate::stencil::cell_sums(float_atoms(a)?, float_atoms(b)?, shape, cell_axes, 0.0)?;
        Some(Batched::dense(
            Array {
                shape: frame.to_vec(),
                data: Data::Float(out.into()),
            },
            a.nb,
        ))
    }

    /// `(reduce op P)` for `P` an application of the scalar primitive
    /// `pair` (as [`Interpreter::operands_of`] finds it) whose operands are
    /// replicated on complementary axes, folded as `semiring.rs` folds
    /// it, `P` never made. `None` when it is not so (or `op` and `pair`
    /// are not ones it folds).
    fn folds_of_pairs(
        &mut self,
        op: &str,
        pair: &str,
        product: &'p TExpr,
        lifted: &remora_types::Lifted,
        env: &Env<'p>,
        span: Span,
    ) -> Try<Batched<'p>> {
        if !crate::semiring::supports(op, pair) {
            return None;
        }
        let xcell = self.shape_of(&lifted.arg_cell, env, span).ok()?;
        if xcell.len() != 1 {
            return None;
        }
        let Product {
            a: Factor::Atoms(a),
            b: Factor::Atoms(b),
        } = self.operands_of(product, env, 0, pair)?
        else {
            return None;
        };
        let shape = a.v.shape.clone();
        let mut result_shape = shape.clone();
        result_shape.pop();
        if a.nb > result_shape.len() {
            return None;
        }
        check_size(atoms_in(&result_shape), Span::default()).ok()?;
        let data = crate::semiring::folds_of_pairs(
            op,
            pair,
            (&a.v.data, a.offset, &a.strides),
            (&b.v.data, b.offset, &b.strides),
            &shape,
        )?;
        Some(Batched::dense(
            Array {
                shape: result_shape,
                data,
            },
            a.nb,
        ))
    }

    /// The two operands of `e`, an application of the scalar primitive
    /// `op` (`f.*` or `f.^`): `(op x y)`, or a `let` or an application of a
    /// lambda whose body is one (a function of the operands of each cell,
    /// lifted over a frame) — each laid over the result's shape (zero
    /// steps where it is replicated), as the result would be made, but not
    /// computed. The result's shape is the batch's first `nb` axes and
    /// then its own. A factor of a product (`f.*`) may be powers not made.
    fn operands_of(&mut self, e: &'p TExpr, env: &Env<'p>, depth: usize, op: &str) -> Try<Product<'p>> {
        if depth > PRODUCT_DEPTH {
            return None;
        }
        match &e.kind {
            TExprKind::Let { var, value, body } => {
                let v = self.eval_batched(value, env)?;
                let env = crate::batch::bind(env, *var, v);
                self.operands_of(body, &env, depth + 1, op)
            }
            TExprKind::App { .. } => {
                let (head, spine) = e.spine();
                if is_intrinsic(head, op) {
                    let [(x, _), (y, _)] = spine.as_slice() else {
                        return None;
                    };
                    let (x, y) = if op == "f.*" {
                        (self.factor(x, env, depth)?, self.factor(y, env, depth)?)
                    } else {
                        (
                            Factor::Atoms(self.eval_batched(x, env)?),
                            Factor::Atoms(self.eval_batched(y, env)?),
                        )
                    };
                    return self.factors(&x, &y);
                }
                if is_intrinsic(head, "outer") {
                    return self.outer_operands(&spine, env, op);
                }
                let f = self.eval_batched(head, env)?;
                let Some(Atom::Fun(fun @ Fun::Lambda { .. })) = lambda_value(&f) else {
                    return None;
                };
                let fun = fun.clone();
                if self.batch.is_empty() && self.batching > 0 && fun.reads_batch() {
                    // (A closure made inside a batch, see `apply_lambda_to_views`.)
                    return None;
                }
                let mut args = Vec::with_capacity(spine.len());
                for (arg, lifted) in &spine {
                    let a = self.eval_batched(arg, env)?;
                    let cell = self.shape_of(&lifted.arg_cell, env, arg.span).ok()?;
                    args.push((a, cell));
                }
                self.batching += 1;
                let r = self
                    .lambda_batched_by(&fun, args, |s, body, env| s.operands_of(body, env, depth + 1, op));
                self.batching -= 1;
                r
            }
            _ => None,
        }
    }

    /// The operands of `(outer op x y)` for the scalar `op` and vectors `x`
    /// and `y` (no frame around `outer`'s cells): `x` replicated along
    /// `y`'s axis and `y` along `x`'s, over `batch ++ [m n]`, as `outer`
    /// lays them out for `op` (vocab.rs's `outer_batched`), never made.
    fn outer_operands(
        &mut self,
        spine: &[(&'p TExpr, &remora_types::Lifted)],
        env: &Env<'p>,
        op: &str,
    ) -> Try<Product<'p>> {
        let [(f, _), (x, _), (y, _)] = spine else {
            return None;
        };
        if !is_intrinsic(f, op) {
            return None;
        }
        let (x, y) = (self.eval_batched(x, env)?, self.eval_batched(y, env)?);
        let (&[m], &[n]) = (x.own(), y.own()) else {
            return None;
        };
        if m == 0 || n == 0 {
            return None;
        }
        let nb = x.nb.max(y.nb);
        let mut shape: Vec<usize> = self.batch.get(..nb)?.to_vec();
        shape.extend([m, n]);
        let mut xs = place(&x.strides, x.nb, nb, nb + 1);
        xs.push(0);
        let mut ys = place(&y.strides, y.nb, nb, nb + 1);
        ys.insert(nb, 0);
        let (a, b) = (
            x.view(shape.clone(), nb, x.offset, xs),
            y.view(shape, nb, y.offset, ys),
        );
        Some(Product {
            a: Factor::Atoms(a),
            b: Factor::Atoms(b),
        })
    }

    /// A factor of a product: powers not made where `x` is `f.^` over a
    /// frame (or a variable a `let` bound to such powers), else `x`'s value.
    fn factor(&mut self, x: &'p TExpr, env: &Env<'p>, depth: usize) -> Try<Factor<Batched<'p>>> {
        if let TExprKind::Var(v) = x.kind
            && let Some(p) = env.powers(v)
        {
            return Some(p.factor());
        }
        if ends_in(x, env, depth, "f.^")
            && let Some(Product {
                a: Factor::Atoms(bases),
                b: Factor::Atoms(exponents),
            }) = self.operands_of(x, env, depth + 1, "f.^")
        {
            return Some(Factor::Power(bases, exponents));
        }
        Some(Factor::Atoms(self.eval_batched(x, env)?))
    }

    /// The operands of `(op x y)` for a scalar `op` (the result's frame is
    /// the longer of theirs) over the result's shape.
    fn factors(&self, x: &Factor<Batched<'p>>, y: &Factor<Batched<'p>>) -> Try<Product<'p>> {
        let (own_x, own_y) = (x.first().own(), y.first().own());
        let frame = if own_x.len() >= own_y.len() { own_x } else { own_y }.to_vec();
        if !frame.starts_with(own_x) || !frame.starts_with(own_y) {
            return None;
        }
        let nb = x.first().nb.max(y.first().nb);
        let mut shape: Vec<usize> = self.batch.get(..nb)?.to_vec();
        shape.extend(&frame);
        let over = |f: &Batched<'p>| {
            let strides = place(&f.strides, f.nb, nb, shape.len());
            Some(f.view(shape.clone(), nb, f.offset, strides))
        };
        Some(Product {
            a: x.as_ref().try_map(over)?,
            b: y.as_ref().try_map(over)?,
        })
    }

    /// `(let ((val var p)) body)` for `p` an `f.^` over a frame (written
    /// so, or a lambda whose body is one, lifted), `var` read once in
    /// `body`, outside any lambda: the environment for `body` with `var`
    /// bound to the powers not made (their bases and exponents evaluated
    /// here, so every error comes where it would). `None`: not such a
    /// `let`, or operands that do not suit (evaluated as usual).
    pub(crate) fn defer_powers(
        &mut self,
        var: VarId,
        value: &'p TExpr,
        body: &'p TExpr,
        env: &Env<'p>,
    ) -> Run<Option<Env<'p>>> {
        if self.reference_only
            || !ends_in(value, env, 0, "f.^")
            || crate::partition::reads(body, var) != Some(1)
        {
            return Ok(None);
        }
        let saved = std::mem::take(&mut self.batch);
        let operands = self.operands_of(value, env, 0, "f.^");
        self.batch = saved;
        let Some(Product {
            a: Factor::Atoms(bases),
            b: Factor::Atoms(exponents),
        }) = operands
        else {
            return Ok(None);
        };
        let floats = matches!(
            (&bases.v.data, &exponents.v.data),
            (Data::Float(_), Data::Float(_))
        );
        if bases.nb != 0
            || exponents.nb != 0
            || !floats
            || check_size(atoms_in(&bases.v.shape), value.span).is_err()
        {
            return Ok(None);
        }
        let powers = Powers { bases, exponents };
        Ok(Some(env.with(Binding::Powers(var, std::rc::Rc::new(powers)))))
    }
}

/// A factor over cells of the last `cell_axes` axes viewed over one item
/// axis, when each of its parts steps through its cells evenly (every
/// axis's step its inner axis's times that axis's extent: a dense cell, a
/// replicated one).
fn one_item_axis<'p>(f: &Factor<Batched<'p>>, cell_axes: usize) -> Option<Factor<Batched<'p>>> {
    f.clone().try_map(|x| {
        let frame = x.v.shape.len().checked_sub(cell_axes)?;
        let (shape, steps) = (&x.v.shape, &x.strides);
        let even = (frame + 1..shape.len()).all(|k| steps.get(k - 1) == Some(&(steps[k] * shape[k])));
        if !even || frame < x.nb {
            return None;
        }
        let mut one = shape[..frame].to_vec();
        one.push(atoms_in(&shape[frame..]));
        let mut strides = steps[..frame].to_vec();
        strides.push(*steps.last()?);
        Some(x.view(one, x.nb, x.offset, strides))
    })
}

/// A factor's Float atoms (from its offset) and its steps.
fn float_atoms<'a>(f: &'a Batched<'_>) -> Option<(&'a [f32], &'a [usize])> {
    let Data::Float(d) = &f.v.data else {
        return None;
    };
    Some((d.get(f.offset..)?, &f.strides))
}

/// The operands of a scalar primitive's application not made (two
/// factors of a product, a power's bases and exponents), each viewed over
/// the result's shape (the same `nb` and shape).
struct Product<'p> {
    a: Factor<Batched<'p>>,
    b: Factor<Batched<'p>>,
}

impl<'p> Lifts<'p> for Product<'p> {
    fn outward(self, interp: &Interpreter, depth: usize, outer: usize) -> Try<Self> {
        let out = |b: Batched<'p>| b.outward(interp, depth, outer);
        Some(Product {
            a: self.a.try_map(out)?,
            b: self.b.try_map(out)?,
        })
    }
}

/// `head` is the intrinsic `name` (instantiated or not).
fn is_intrinsic(mut head: &TExpr, name: &str) -> bool {
    while let TExprKind::TApp { func, .. } | TExprKind::IApp { func, .. } = &head.kind {
        head = func;
    }
    matches!(head.kind, TExprKind::Intrinsic(n) if n == name)
}

/// The function a value is, when it is one atom.
fn lambda_value<'a, 'p>(f: &'a Batched<'p>) -> Option<&'a Atom<Fun<'p>>> {
    match &f.v.data {
        Data::Atoms(atoms) if f.nb == 0 && f.v.shape.is_empty() => atoms.get(f.offset),
        _ => None,
    }
}

/// How deep [`ends_in`] follows applications of lambdas.
const PRODUCT_DEPTH: usize = 8;

/// Whether `e`'s value is, as written, an application `(op x y)` of a
/// scalar primitive: directly, as a `let`'s body, or as the body of the
/// lambda it applies to all its parameters (a lambda written there, or a
/// variable bound to one). A cheap look that decides whether
/// [`Interpreter::operands_of`] is worth its evaluations.
fn ends_in<'p>(e: &'p TExpr, env: &Env<'p>, depth: usize, op: &str) -> bool {
    if depth > PRODUCT_DEPTH {
        return false;
    }
    match &e.kind {
        TExprKind::Let { body, .. } => ends_in(body, env, depth + 1, op),
        TExprKind::App { .. } => {
            let (head, spine) = e.spine();
            if is_intrinsic(head, op) {
                return spine.len() == 2;
            }
            // `(outer op x y)`: `op` over every pair.
            if is_intrinsic(head, "outer") {
                return matches!(spine.as_slice(), [(f, _), _, _] if is_intrinsic(f, op));
            }
            // The lambda's body past as many parameters as are given.
            let Some((mut body, env)) = applied_lambda(head, env, depth) else {
                return false;
            };
            for _ in 1..spine.len() {
                match lambda_literal(body) {
                    Some(TAtomKind::Lambda { body: inner, .. }) => body = inner,
                    _ => return false,
                }
            }
            crate::batch::lambda_params(body) == 0 && ends_in(body, &env, depth + 1, op)
        }
        _ => false,
    }
}

/// The one atom of an array literal of one atom.
fn lambda_literal(e: &TExpr) -> Option<&TAtomKind> {
    match &e.kind {
        TExprKind::Array { shape, atoms } if shape.is_empty() => match atoms.as_slice() {
            [a] => Some(&a.kind),
            _ => None,
        },
        _ => None,
    }
}

/// The body of the lambda that `head` is (written there, or bound to a
/// variable; through its type and index abstractions), and the scope
/// the body sees.
fn applied_lambda<'p>(head: &'p TExpr, env: &Env<'p>, depth: usize) -> Option<(&'p TExpr, Env<'p>)> {
    if depth > PRODUCT_DEPTH {
        return None;
    }
    match &head.kind {
        TExprKind::TApp { func, .. } | TExprKind::IApp { func, .. } => applied_lambda(func, env, depth + 1),
        TExprKind::Var(v) => {
            let f = env.lookup_batched(*v)?;
            match lambda_value(&f)? {
                Atom::Fun(Fun::Lambda { body, env, .. }) => Some((body, env.clone())),
                Atom::Fun(Fun::TLambda { body, env, .. } | Fun::ILambda { body, env, .. }) => {
                    applied_lambda(body, env, depth + 1)
                }
                _ => None,
            }
        }
        _ => match lambda_literal(head)? {
            TAtomKind::Lambda { body, .. } => Some((body, env.clone())),
            TAtomKind::TLambda { body, .. } | TAtomKind::ILambda { body, .. } => {
                applied_lambda(body, env, depth + 1)
            }
            _ => None,
        },
    }
}

/// What reduces the product.
enum Reducer<'p> {
    /// `f.sum` (from 0.0).
    Sum,
    /// `reduce` by this operator (which must be `f.+`).
    Reduce(&'p TExpr),
}

/// `(f.sum P)` or `(reduce op P)`: the reducer, `P`, and the lifting of the
/// reducer's argument.
fn contraction_form(e: &TExpr) -> Option<(Reducer<'_>, &TExpr, &remora_types::Lifted)> {
    let (head, spine) = e.spine();
    let mut name = head;
    while let TExprKind::TApp { func, .. } | TExprKind::IApp { func, .. } = &name.kind {
        name = func;
    }
    let TExprKind::Intrinsic(name) = name.kind else {
        return None;
    };
    let (reducer, (product, lifted)) = match (name, spine.as_slice()) {
        ("f.sum", [p]) => (Reducer::Sum, *p),
        ("reduce", [(op, _), p]) => (Reducer::Reduce(op), *p),
        _ => return None,
    };
    Some((reducer, product, lifted))
}

/// The factors of a product to be summed along axis `items_at` of
/// `shape`: each read from its atoms (or its bases' and exponents') through
/// its steps over the product's axes (zero where it is replicated).
struct Factors<'a> {
    a: Factor<(&'a [f32], &'a [usize])>,
    b: Factor<(&'a [f32], &'a [usize])>,
    shape: &'a [usize],
    items_at: usize,
}

/// The fewest rows a product runs as `matmul.rs`'s blocked loop.
const MIN_ROWS: usize = 4;

/// A product to be reduced along its items that is a matrix product (or
/// a frame of them): the result's axes (those of extent 1 aside) are
/// axes both factors step along (the frame), then axes only one factor
/// steps along (the rows, possibly none), then axes only the other does
/// (the columns), each group one step apart in its factor.
pub(crate) struct Matrices {
    /// The rows, the items and the columns of each product.
    pub m: usize,
    pub k: usize,
    pub n: usize,
    /// Whether the rows are the first factor's (else the second's).
    pub rows_are_a: bool,
    /// The rows' factor's steps along the rows and the items; the
    /// columns' along the items and the columns.
    row_steps: (usize, usize),
    col_steps: (usize, usize),
    /// The frame's axes: extent and each factor's step (rows', columns').
    frame: Vec<(usize, usize, usize)>,
}

impl Matrices {
    /// The product of factors stepping `steps_a` and `steps_b` over
    /// `shape`, summed along `items_at`, as matrix products, when it is
    /// so. Which factor is the rows' does not matter to a product of two
    /// atoms that commutes; for another operation see `rows_are_a`.
    pub(crate) fn of(
        shape: &[usize],
        items_at: usize,
        steps_a: &[usize],
        steps_b: &[usize],
    ) -> Option<Matrices> {
        let axes: Vec<usize> = (0..shape.len())
            .filter(|&i| i != items_at && shape[i] > 1)
            .collect();
        let mut roles = Vec::with_capacity(axes.len());
        for &i in &axes {
            roles.push(match (steps_a.get(i)? != &0, steps_b.get(i)? != &0) {
                (true, true) => Role::Both,
                (true, false) => Role::A,
                (false, true) => Role::B,
                (false, false) => return None,
            });
        }
        let frame = roles.iter().take_while(|r| **r == Role::Both).count();
        let columns_from = roles
            .iter()
            .rposition(|r| *r != roles[roles.len() - 1])
            .map_or(0, |i| i + 1);
        let columns_from = columns_from.max(frame);
        let column_role = *roles.get(columns_from)?;
        let row_role = match column_role {
            Role::A => Role::B,
            Role::B => Role::A,
            Role::Both => return None,
        };
        if roles[frame..columns_from].iter().any(|r| *r != row_role) {
            return None;
        }
        let (cols, rows) = match column_role {
            Role::B => (steps_b, steps_a),
            _ => (steps_a, steps_b),
        };
        let group = |range: std::ops::Range<usize>, steps: &[usize]| -> Option<(usize, usize)> {
            let group = &axes[range];
            let extent: usize = group.iter().map(|&i| shape[i]).product();
            let step = group.last().map_or(0, |&i| steps[i]);
            let flat = group.windows(2).all(|w| steps[w[0]] == steps[w[1]] * shape[w[1]]);
            flat.then_some((extent, step))
        };
        let (m, row_step) = group(frame..columns_from, rows)?;
        let (n, col_step) = group(columns_from..axes.len(), cols)?;
        Some(Matrices {
            m,
            k: *shape.get(items_at)?,
            n,
            rows_are_a: column_role == Role::B,
            row_steps: (row_step, *rows.get(items_at)?),
            col_steps: (*cols.get(items_at)?, col_step),
            frame: axes[..frame]
                .iter()
                .map(|&i| (shape[i], rows[i], cols[i]))
                .collect(),
        })
    }

    /// How many products (positions of the frame).
    pub(crate) fn positions(&self) -> usize {
        self.frame.iter().map(|f| f.0).product()
    }

    /// Where each product's rows and columns start in their factors, in
    /// the frame's row-major order.
    pub(crate) fn bases(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        let mut odometer = vec![0usize; self.frame.len()];
        let (mut rows, mut cols) = (0usize, 0usize);
        (0..self.positions()).map(move |_| {
            let here = (rows, cols);
            for f in (0..self.frame.len()).rev() {
                let (extent, step_rows, step_cols) = self.frame[f];
                odometer[f] += 1;
                rows += step_rows;
                cols += step_cols;
                if odometer[f] < extent {
                    break;
                }
                rows -= step_rows * extent;
                cols -= step_cols * extent;
                odometer[f] = 0;
            }
            here
        })
    }

    /// One product's two matrices: the rows' `[m k]`, the columns' `[k n]`.
    pub(crate) fn at<'a, T>(
        &self,
        rows: &'a [T],
        cols: &'a [T],
        base_rows: usize,
        base_cols: usize,
    ) -> (Strided<'a, T>, Strided<'a, T>) {
        (
            Strided {
                data: rows,
                offset: base_rows,
                row: self.row_steps.0,
                col: self.row_steps.1,
            },
            Strided {
                data: cols,
                offset: base_cols,
                row: self.col_steps.0,
                col: self.col_steps.1,
            },
        )
    }
}

/// What an axis of the result is to the two factors.
#[derive(Clone, Copy, PartialEq)]
enum Role {
    /// Both step along it.
    Both,
    /// Only `a` steps along it (`b` is replicated).
    A,
    /// Only `b`.
    B,
}

/// `f.dot` over `shape` (`[outer …, items]`, the batch and the frame
/// then the vectors' items): `x` and `y` read in place through `steps`
/// (each laid over `shape`, zero where it is replicated), each sum the
/// cell's own (`f.sum` of the products, from 0.0). Operands replicated on
/// complementary axes (`outer` of a lambda of `f.dot`, rows against
/// columns) are a matrix product, never laid out over the frame.
pub(crate) fn dot_in_place(
    (x, x_steps): (&[f32], &[usize]),
    (y, y_steps): (&[f32], &[usize]),
    shape: &[usize],
) -> Option<Vec<f32>> {
    let items_at = shape.len().checked_sub(1)?;
    if x_steps.len() != shape.len() || y_steps.len() != shape.len() {
        return None;
    }
    let product = Factors {
        a: Factor::Atoms((x, x_steps)),
        b: Factor::Atoms((y, y_steps)),
        shape,
        items_at,
    };
    product.sums(Some(0.0))
}

impl<'a> Factors<'a> {
    /// Every sum, in `reduce`'s order from `seed`: as matrix products
    /// where the product is one, else along the items or side by side
    /// along lanes.
    fn sums(&self, seed: Option<f32>) -> Option<Vec<f32>> {
        match self.matrix_product(Sums::Tree { seed }) {
            Some(out) => Some(out),
            None => match self.item_sums(seed) {
                Some(out) => Some(out),
                None => self.lane_sums(seed),
            },
        }
    }

    /// The sums as matrix products, when the product is one (or a frame of
    /// them, see [`Matrices`]): each by `matmul.rs`'s blocked loop, every
    /// sum in the order `sums`. (Which factor is the rows' does not
    /// matter: a product of two atoms is the same either way round.)
    fn matrix_product(&self, sums: Sums<f32>) -> Option<Vec<f32>> {
        let (Factor::Atoms((a, steps_a)), Factor::Atoms((b, steps_b))) = (&self.a, &self.b) else {
            return None;
        };
        let empty = (0..self.shape.len()).any(|i| i != self.items_at && self.shape[i] == 0);
        if empty {
            return Some(Vec::new());
        }
        let mx = Matrices::of(self.shape, self.items_at, steps_a, steps_b)?;
        // The factor the columns step through, and the rows'.
        let (rows, cols) = if mx.rows_are_a { (*a, *b) } else { (*b, *a) };
        let (m, k, n) = (mx.m, mx.k, mx.n);
        // The blocked loop packs the columns' factor (`k × n` atoms) once
        // for all the rows: worth it for a few rows at least, and only
        // where packing does not multiply what the factor holds (a
        // `windows` view's columns overlap) beyond the result's size.
        // Otherwise (and for many small products) the lanes' loops, which
        // read the factors in place, suit better.
        let packed = k.saturating_mul(n);
        if m < MIN_ROWS
            || (mx.positions() > 1 && n < 8)
            || packed > cols.len().saturating_mul(2).max(m.saturating_mul(n))
        {
            return None;
        }
        let mut out = crate::kernel::buffer(mx.positions().checked_mul(m)?.checked_mul(n)?).ok()?;
        for (base_rows, base_cols) in mx.bases() {
            let (a, b) = mx.at(rows, cols, base_rows, base_cols);
            out.extend(crate::matmul::matmul_strided(a, b, [m, k, n], sums).ok()?);
        }
        Some(out)
    }

    /// The axes the lanes of [`Factors::lane_sums`] run along — the
    /// inner axes (one axis, flattened, when both operands step through
    /// them alike), else the last outer axis — and the outer axes.
    fn lane_order(&self) -> (Vec<usize>, Vec<usize>) {
        let (n, items_at) = (self.shape.len(), self.items_at);
        if items_at + 1 < n {
            ((items_at + 1..n).collect(), (0..items_at).collect())
        } else if items_at > 0 {
            (vec![items_at - 1], (0..items_at - 1).collect())
        } else {
            (Vec::new(), Vec::new())
        }
    }

    /// The sums one after another, each along its items, where both
    /// factors' items lie one after another (or are one atom replicated)
    /// but the lanes' loops would first lay a factor out anew, its lanes
    /// apart: a matrix's rows times a vector, however lifted (a lambda of
    /// a row, `f.dot`, the columns of a transposition scaled and added).
    fn item_sums(&self, seed: Option<f32>) -> Option<Vec<f32>> {
        let (Factor::Atoms(a), Factor::Atoms(b)) = (&self.a, &self.b) else {
            return None;
        };
        let (shape, items_at) = (self.shape, self.items_at);
        let (lane_axes, outer_axes) = self.lane_order();
        let order = (outer_axes.as_slice(), items_at, lane_axes.as_slice());
        let laid_out =
            |(data, steps): &(&[f32], &[usize])| relayout(data, steps, shape, order, false).is_none();
        if a.1[items_at] > 1 || b.1[items_at] > 1 || !(laid_out(a) || laid_out(b)) {
            return None;
        }
        let line = |(data, steps): &(&'a [f32], &[usize])| Line {
            data,
            outer: (0..shape.len())
                .filter(|&i| i != items_at)
                .map(|i| (shape[i], steps[i]))
                .collect(),
            item: steps[items_at],
        };
        let positions = (0..shape.len())
            .filter(|&i| i != items_at)
            .map(|i| shape[i])
            .product();
        let (a, b) = merged(line(a), line(b));
        sums_along_items(&a, &b, positions, shape[items_at], seed).ok()
    }

    /// The sums side by side along a lane axis (the item's inner axes for
    /// `reduce`, else the last frame axis), each sum in `reduce`'s order
    /// (from `seed` when given).
    fn lane_sums(&self, seed: Option<f32>) -> Option<Vec<f32>> {
        let (shape, items_at) = (self.shape, self.items_at);
        let items = shape[items_at];
        let (lane_axes, outer_axes) = self.lane_order();
        let outer_shape: Vec<usize> = outer_axes.iter().map(|&i| shape[i]).collect();
        let lanes: usize = lane_axes.iter().map(|&i| shape[i]).product();
        let relaid = |(data, steps): (&'a [f32], &'a [usize])| {
            relayout(data, steps, shape, (&outer_axes, items_at, &lane_axes), true)
        };
        let ra = self.a.as_ref().try_map(|f| relaid(*f))?;
        let rb = self.b.as_ref().try_map(|f| relaid(*f))?;
        // The result is laid out [outer …, lanes …]: the same order as the
        // product's less the summed axis when the lanes are the inner axes
        // or the last frame axis.
        contract(&ra, &rb, &outer_shape, items, lanes, seed)
    }
}

/// An operand copied densely over the axes it varies on, in the order
/// `(outer …, items, lanes …)`, and its steps over them (zero on the axes
/// it is replicated along).
struct Relaid<'a> {
    data: Cow<'a, [f32]>,
    outer: Vec<usize>,
    item: usize,
    lane: usize,
}

impl Relaid<'_> {
    /// Where row `p` of the outer axes (`outer`, row-major) starts.
    fn start(&self, outer: &[usize], mut p: usize) -> usize {
        let mut at = 0;
        for (&n, &step) in outer.iter().zip(&self.outer).rev() {
            at += p % n * step;
            p /= n;
        }
        at
    }
}

/// A factor's atoms for row `p`'s lanes `l0 .. l0 + lanes` (`items` of
/// each), and where they start: read in place, or, for powers, made here
/// (`[items, lanes]`, on this thread).
fn block<'a>(
    f: &'a Factor<Relaid<'_>>,
    outer: &[usize],
    p: usize,
    (l0, lanes): (usize, usize),
    items: usize,
) -> Option<(Operand<'a>, usize)> {
    match f {
        Factor::Atoms(r) => {
            let operand = Operand {
                data: Cow::Borrowed(&r.data),
                item: r.item,
                lane: r.lane,
            };
            Some((operand, r.start(outer, p) + l0 * r.lane))
        }
        Factor::Power(x, y) => {
            let layout = |r: &Relaid<'_>| Layout {
                offset: r.start(outer, p) + l0 * r.lane,
                strides: vec![r.item, r.lane],
            };
            let (lx, ly) = (layout(x), layout(y));
            let table = crate::powers::pow_on(&[items, lanes], (&x.data, &lx), (&y.data, &ly), 1).ok()?;
            let operand = Operand {
                data: Cow::Owned(table),
                item: lanes,
                lane: 1,
            };
            Some((operand, 0))
        }
    }
}

/// The atoms of a block of powers (`[items, lanes]`, see [`block`]) made
/// at a time: small enough to stay in cache while they are summed.
const POWER_BLOCK: usize = 1 << 14;

/// The fewest lanes a row is cut into for threads.
const MIN_RUN: usize = 1 << 10;

/// A factor of [`Factors::lane_sums`] over the axes `(outer …, items,
/// lanes …)`: read in place where it lies so, else (if `copy`) laid out
/// anew.
fn relayout<'a>(
    data: &'a [f32],
    steps: &[usize],
    shape: &[usize],
    (outer_axes, items_at, lane_axes): (&[usize], usize, &[usize]),
    copy: bool,
) -> Option<Relaid<'a>> {
    let order: Vec<usize> = outer_axes
        .iter()
        .copied()
        .chain(std::iter::once(items_at))
        .chain(lane_axes.iter().copied())
        .collect();
    // The operand's own extent along each axis: 1 where it is replicated.
    let extent: Vec<usize> = order
        .iter()
        .map(|&i| if steps[i] == 0 { 1 } else { shape[i] })
        .collect();
    let from: Vec<usize> = order.iter().map(|&i| steps[i]).collect();
    let packed = row_major(&extent);
    let lanes_from = outer_axes.len() + 1;
    // A view whose lanes lie one after another (outer and item steps any:
    // shifted copies of one signal, a window) is read where it is too.
    let mut run = 1;
    let lanes_in_a_row = (lanes_from..order.len()).rev().all(|k| {
        let ok = extent[k] == 1 || from[k] == run;
        run *= extent[k];
        ok
    });
    let last = (0..extent.len())
        .map(|k| extent[k].saturating_sub(1).saturating_mul(from[k]))
        .fold(0usize, usize::saturating_add);
    if lanes_in_a_row && extent.iter().all(|&e| e > 0) && last < data.len() {
        let step = |k: usize| if extent[k] == 1 { 0 } else { from[k] };
        let lane = match (lanes_from..order.len()).map(step).any(|s| s != 0) {
            false => 0,
            true if (lanes_from..order.len()).all(|k| extent[k] == shape[order[k]]) => 1,
            true => return None,
        };
        return Some(Relaid {
            data: Cow::Borrowed(data),
            outer: (0..outer_axes.len()).map(step).collect(),
            item: step(outer_axes.len()),
            lane,
        });
    }
    // An operand already laid out so is read where it is.
    let in_place =
        (0..extent.len()).all(|k| extent[k] == 1 || from[k] == packed[k]) && data.len() >= atoms_in(&extent);
    let dense = if in_place {
        Cow::Borrowed(data)
    } else if !copy {
        return None;
    } else {
        let layout = Layout {
            offset: 0,
            strides: from,
        };
        Cow::Owned(crate::kernel::gather(&extent, data, &layout).ok()?)
    };
    let step = |k: usize| if extent[k] == 1 { 0 } else { packed[k] };
    // Lanes flattened: they must be all replicated or all dense.
    let lane_steps: Vec<usize> = (lanes_from..order.len()).map(step).collect();
    let lane = match lane_steps.last() {
        None => 0,
        Some(_) if lane_steps.iter().all(|s| *s == 0) => 0,
        Some(_) if (lanes_from..order.len()).all(|k| extent[k] == shape[order[k]]) => 1,
        Some(_) => return None,
    };
    Some(Relaid {
        data: dense,
        outer: (0..outer_axes.len()).map(step).collect(),
        item: step(outer_axes.len()),
        lane,
    })
}

/// `out[o, l] = Σ_k a[o, k, l] · b[o, k, l]`, each sum in the order of
/// `kernel::Order::Tree` (from `seed` when given). The rows `o` — or, when
/// they are fewer than the threads' parts, runs of each row's lanes — are
/// shared among threads (`crate::threads`); no sum's order depends on
/// that. A factor of powers is made a run of at most [`POWER_BLOCK`]
/// atoms at a time.
fn contract(
    a: &Factor<Relaid<'_>>,
    b: &Factor<Relaid<'_>>,
    outer: &[usize],
    items: usize,
    lanes: usize,
    seed: Option<f32>,
) -> Option<Vec<f32>> {
    let positions = atoms_in(outer);
    let mut out = vec![0.0f32; positions.checked_mul(lanes)?];
    if out.is_empty() {
        return Some(out);
    }
    let work = positions.saturating_mul(items).saturating_mul(lanes);
    let threads = crate::threads();
    let parallel = threads >= 2 && work >= 1 << 20;
    // The lanes of a row summed at a time.
    let mut run = lanes;
    if matches!(a, Factor::Power(..)) || matches!(b, Factor::Power(..)) {
        run = run.min((POWER_BLOCK / items.max(1)).max(fmath::LANES) / fmath::LANES * fmath::LANES);
    }
    if parallel && positions < threads * 4 {
        run = run.min(lanes.div_ceil((threads * 4).div_ceil(positions)).max(MIN_RUN));
    }
    let parts: Vec<Part<'_>> = if run >= lanes {
        // Whole rows, some to a part.
        let per = if parallel {
            positions.div_ceil(threads * 4)
        } else {
            positions
        };
        (out.chunks_mut(per * lanes).enumerate())
            .map(|(i, rows)| (i * per, 0, lanes, rows))
            .collect()
    } else {
        (out.chunks_exact_mut(lanes).enumerate())
            .flat_map(|(p, row)| {
                (row.chunks_mut(run).enumerate()).map(move |(i, lanes)| (p, i * run, lanes.len(), lanes))
            })
            .collect()
    };
    let sums = |(first, l0, width, out): Part<'_>| {
        if let (Factor::Atoms(a), Factor::Atoms(b)) = (a, b)
            && width == lanes
            && lanes <= CHUNK
            && items <= PAIRWISE_LEAF
        {
            return small_rows(a, b, (outer, first), (items, lanes), seed, out).is_some();
        }
        (out.chunks_exact_mut(width).enumerate())
            .all(|(i, row)| row_sum(a, b, (outer, first + i), l0, items, seed, row).is_some())
    };
    let ok = if parallel && parts.len() > 1 {
        let threads = threads.min(parts.len());
        crate::in_parallel(parts, threads, sums)
    } else {
        parts.into_iter().all(sums)
    };
    ok.then_some(out)
}

/// Rows of sums to compute: the first row, its first lane, the lanes of
/// each row, and where they go.
type Part<'a> = (usize, usize, usize, &'a mut [f32]);

/// Lanes `l0 ..` of row `p` of the sums (see [`contract`]), as many as
/// `row` holds.
fn row_sum(
    a: &Factor<Relaid<'_>>,
    b: &Factor<Relaid<'_>>,
    (outer, p): (&[usize], usize),
    l0: usize,
    items: usize,
    seed: Option<f32>,
    row: &mut [f32],
) -> Option<()> {
    let lanes = row.len();
    let (a, base_a) = block(a, outer, p, (l0, lanes), items)?;
    let (b, base_b) = block(b, outer, p, (l0, lanes), items)?;
    let (a, b) = (&a, &b);
    match seed {
        Some(s) if items <= PAIRWISE_LEAF => {
            // A left fold from the seed: the seed is its first term.
            row.fill(s);
            leaf_into(a, b, base_a, base_b, 0, items, row)
        }
        Some(s) => {
            for (r, x) in row.iter_mut().zip(tree(a, b, (base_a, base_b), 0, items, lanes)?) {
                *r = s + x;
            }
            Some(())
        }
        None => {
            row.copy_from_slice(&tree(a, b, (base_a, base_b), 0, items, lanes)?);
            Some(())
        }
    }
}

/// Whole rows of few lanes (at most [`CHUNK`]) and items (at most
/// [`PAIRWISE_LEAF`]: a left fold, from `seed` or else from the first
/// product), from row `first` on, as many as `out` holds: the sums
/// [`row_sum`] makes, in the same order, each row's start stepped to from
/// the last one's (an odometer over the outer axes) instead of found anew
/// — many small products, such as 3×3 matrices lifted over a batch.
fn small_rows(
    a: &Relaid<'_>,
    b: &Relaid<'_>,
    (outer, first): (&[usize], usize),
    (items, lanes): (usize, usize),
    seed: Option<f32>,
    out: &mut [f32],
) -> Option<()> {
    // Rows of a few lanes (the columns of a 3×3 product) with their
    // number known to the compiler, so that each item's lanes are a few
    // unrolled multiply-adds rather than a loop.
    match lanes {
        1 => small_rows_of::<1>(a, b, (outer, first), (items, lanes), seed, out),
        2 => small_rows_of::<2>(a, b, (outer, first), (items, lanes), seed, out),
        3 => small_rows_of::<3>(a, b, (outer, first), (items, lanes), seed, out),
        4 => small_rows_of::<4>(a, b, (outer, first), (items, lanes), seed, out),
        _ => small_rows_of::<CHUNK>(a, b, (outer, first), (items, lanes), seed, out),
    }
}

/// [`small_rows`] with an accumulator of `N` lanes: `N` of them when `N`
/// is less than [`CHUNK`], else `lanes` (at most `N`).
fn small_rows_of<const N: usize>(
    a: &Relaid<'_>,
    b: &Relaid<'_>,
    (outer, first): (&[usize], usize),
    (items, lanes): (usize, usize),
    seed: Option<f32>,
    out: &mut [f32],
) -> Option<()> {
    let lanes = if N < CHUNK { N } else { lanes };
    if out.is_empty() {
        return Some(());
    }
    if lanes == 0 || lanes > N {
        return None;
    }
    let mut index = vec![0usize; outer.len()];
    let mut rest = first;
    for (i, &n) in outer.iter().enumerate().rev() {
        index[i] = rest % n.max(1);
        rest /= n.max(1);
    }
    let (mut ba, mut bb) = (a.start(outer, first), b.start(outer, first));
    let (da, db) = (&a.data, &b.data);
    for row in out.chunks_exact_mut(lanes) {
        let mut acc = [0.0f32; N];
        let acc = &mut acc[..lanes];
        let from = match seed {
            Some(s) => {
                acc.fill(s);
                0
            }
            None => {
                for (l, x) in acc.iter_mut().enumerate() {
                    *x = da.get(ba + l * a.lane)? * db.get(bb + l * b.lane)?;
                }
                1
            }
        };
        for k in from..items {
            let (oa, ob) = (ba + k * a.item, bb + k * b.item);
            // Each factor's lanes a run of its atoms or one atom for all.
            match (a.lane, b.lane) {
                (1, 1) => {
                    let (xa, xb) = (da.get(oa..oa + lanes)?, db.get(ob..ob + lanes)?);
                    for ((s, x), y) in acc.iter_mut().zip(xa).zip(xb) {
                        *s += x * y;
                    }
                }
                (0, 1) => {
                    let (x, xb) = (*da.get(oa)?, db.get(ob..ob + lanes)?);
                    for (s, y) in acc.iter_mut().zip(xb) {
                        *s += x * y;
                    }
                }
                (1, 0) => {
                    let (xa, y) = (da.get(oa..oa + lanes)?, *db.get(ob)?);
                    for (s, x) in acc.iter_mut().zip(xa) {
                        *s += x * y;
                    }
                }
                _ => {
                    for (l, s) in acc.iter_mut().enumerate() {
                        *s += da.get(oa + l * a.lane)? * db.get(ob + l * b.lane)?;
                    }
                }
            }
        }
        row.copy_from_slice(acc);
        // The next row: the last outer axis on, carried into the ones
        // before it.
        for i in (0..outer.len()).rev() {
            index[i] += 1;
            ba += a.outer[i];
            bb += b.outer[i];
            if index[i] < outer[i] {
                break;
            }
            index[i] = 0;
            ba -= outer[i] * a.outer[i];
            bb -= outer[i] * b.outer[i];
        }
    }
    Some(())
}

/// The tree sum of items `k0 .. k0 + n` for every lane (`n ≥ 1`), as
/// `kernel::Order::Tree` sums: each leaf from its first product, left to
/// right.
fn tree(
    a: &Operand<'_>,
    b: &Operand<'_>,
    base: (usize, usize),
    k0: usize,
    n: usize,
    lanes: usize,
) -> Option<Vec<f32>> {
    let (base_a, base_b) = base;
    if n <= PAIRWISE_LEAF {
        let mut acc = vec![0.0f32; lanes];
        let (oa, ob) = (base_a + k0 * a.item, base_b + k0 * b.item);
        for (l, x) in acc.iter_mut().enumerate() {
            *x = a.data.get(oa + l * a.lane)? * b.data.get(ob + l * b.lane)?;
        }
        leaf_into(a, b, base_a, base_b, k0 + 1, n.checked_sub(1)?, &mut acc)?;
        return Some(acc);
    }
    let half = n / 2;
    let mut left = tree(a, b, base, k0, half, lanes)?;
    let right = tree(a, b, base, k0 + half, n - half, lanes)?;
    for (x, y) in left.iter_mut().zip(right) {
        *x += y;
    }
    Some(left)
}

/// How many lanes one pass over the items carries in registers.
const CHUNK: usize = 32;

/// `acc[l] += a[k, l] · b[k, l]` for items `k0 .. k0 + n` in order, the
/// lanes in chunks held across the items.
fn leaf_into(
    a: &Operand<'_>,
    b: &Operand<'_>,
    base_a: usize,
    base_b: usize,
    k0: usize,
    n: usize,
    acc: &mut [f32],
) -> Option<()> {
    let lanes = acc.len();
    let range = k0..k0 + n;
    // The last item read must exist (the loops below index by offsets).
    if n > 0 {
        let last = k0 + n - 1;
        let (oa, ob) = (base_a + last * a.item, base_b + last * b.item);
        a.data.get(oa + lanes.saturating_sub(1) * a.lane)?;
        b.data.get(ob + lanes.saturating_sub(1) * b.lane)?;
        a.data.get(base_a + k0 * a.item)?;
        b.data.get(base_b + k0 * b.item)?;
    }
    for (c, chunk) in acc.chunks_mut(CHUNK).enumerate() {
        let l0 = c * CHUNK;
        let mut r = [0.0f32; CHUNK];
        let r = &mut r[..chunk.len()];
        r.copy_from_slice(chunk);
        for k in range.clone() {
            let (oa, ob) = (
                base_a + k * a.item + l0 * a.lane,
                base_b + k * b.item + l0 * b.lane,
            );
            let len = r.len();
            match (a.lane, b.lane) {
                (1, 1) => {
                    let (xa, xb) = (a.data.get(oa..oa + len)?, b.data.get(ob..ob + len)?);
                    for ((s, x), y) in r.iter_mut().zip(xa).zip(xb) {
                        *s += x * y;
                    }
                }
                (0, 1) => {
                    let (x, xb) = (*a.data.get(oa)?, b.data.get(ob..ob + len)?);
                    for (s, y) in r.iter_mut().zip(xb) {
                        *s += x * y;
                    }
                }
                (1, 0) => {
                    let (xa, y) = (a.data.get(oa..oa + len)?, *b.data.get(ob)?);
                    for (s, x) in r.iter_mut().zip(xa) {
                        *s += x * y;
                    }
                }
                _ => {
                    let p = a.data.get(oa)? * b.data.get(ob)?;
                    for s in r.iter_mut() {
                        *s += p;
                    }
                }
            }
        }
        chunk.copy_from_slice(r);
    }
    Some(())
}

/// How many sums [`sums_along_items`] carries side by side.
const GROUP: usize = 8;

/// A factor of sums read along their items: where position `p`'s items
/// start (its steps over `outer`, the positions' own shape for this
/// factor, row-major) and the step from one item to the next (1: one
/// after another; 0: one atom for them all).
pub(crate) struct Line<'a> {
    pub(crate) data: &'a [f32],
    pub(crate) outer: Vec<(usize, usize)>,
    pub(crate) item: usize,
}

/// Two lines over the same positions with their outer axes of extent 1
/// left out and each run of axes that both step through as one (each
/// step the next one's times its extent) made one axis: fewer divisions
/// to find where a position starts.
fn merged<'a>(mut a: Line<'a>, mut b: Line<'a>) -> (Line<'a>, Line<'a>) {
    let mut outer_a: Vec<(usize, usize)> = Vec::with_capacity(a.outer.len());
    let mut outer_b: Vec<(usize, usize)> = Vec::with_capacity(b.outer.len());
    for (&(n, sa), &(_, sb)) in a.outer.iter().zip(&b.outer) {
        if n == 1 {
            continue;
        }
        if let (Some(la), Some(lb)) = (outer_a.last_mut(), outer_b.last_mut())
            && la.1 == sa.saturating_mul(n)
            && lb.1 == sb.saturating_mul(n)
        {
            *la = (la.0 * n, sa);
            *lb = (lb.0 * n, sb);
            continue;
        }
        outer_a.push((n, sa));
        outer_b.push((n, sb));
    }
    a.outer = outer_a;
    b.outer = outer_b;
    (a, b)
}

impl Line<'_> {
    /// Where position `p`'s items start (`p` one of the positions: along
    /// the outermost axis, no division).
    fn start(&self, mut p: usize) -> usize {
        let Some((&(_, outermost), inner)) = self.outer.split_first() else {
            return 0;
        };
        let mut at = 0;
        for &(n, step) in inner.iter().rev() {
            at += p % n.max(1) * step;
            p /= n.max(1);
        }
        at + p * outermost
    }

    /// Where each of [`GROUP`] positions from `p0` starts, the last of
    /// `count` repeated after it: stepping along the innermost axis of
    /// more than one position while the positions stay on it (one
    /// division for the group, not one per position and axis).
    fn starts(&self, p0: usize, count: usize) -> [usize; GROUP] {
        let first = self.start(p0);
        let inner = self.outer.iter().rposition(|&(n, _)| n > 1);
        // Positions along the outermost axis never leave it.
        let stays =
            inner.is_some_and(|i| i == 0 || p0 % self.outer[i].0 + count.min(GROUP) <= self.outer[i].0);
        let step = inner.map_or(0, |i| self.outer[i].1);
        std::array::from_fn(|j| {
            let j = j.min(count.max(1) - 1);
            if stays {
                first + j * step
            } else {
                self.start(p0 + j)
            }
        })
    }

    /// Whether every position's `items` items lie within the data.
    fn fits(&self, items: usize) -> bool {
        if items == 0 || self.outer.iter().any(|&(n, _)| n == 0) {
            return true;
        }
        let last = (self.outer.iter())
            .map(|&(n, step)| (n - 1).saturating_mul(step))
            .fold((items - 1).saturating_mul(self.item), usize::saturating_add);
        self.item <= 1 && last < self.data.len()
    }
}

/// Where the items of one position after another start in a [`Line`]:
/// the position's index along each outer axis, counted on like an
/// odometer (no division per position).
struct Cursor {
    digits: Vec<usize>,
    at: usize,
}

impl Cursor {
    /// At position `p`.
    fn new(line: &Line<'_>, p: usize) -> Cursor {
        let (mut digits, mut rest) = (vec![0; line.outer.len()], p);
        for (digit, &(n, _)) in digits.iter_mut().zip(&line.outer).rev() {
            *digit = rest % n.max(1);
            rest /= n.max(1);
        }
        Cursor {
            digits,
            at: line.start(p),
        }
    }

    /// On to the next position.
    fn advance(&mut self, line: &Line<'_>) {
        for (digit, &(n, step)) in self.digits.iter_mut().zip(&line.outer).rev() {
            *digit += 1;
            self.at += step;
            if *digit < n {
                return;
            }
            self.at -= step * n;
            *digit = 0;
        }
    }
}

/// The fewest items [`sums_along_items`] sums [`GROUP`] positions side by
/// side for: shorter sums (each pixel's three channels, a row of a 3×3
/// matrix) run one position after another, each a plain loop.
const SIDE_BY_SIDE: usize = 8;

/// `out[p] = seed + Σ_k a[p, k] · b[p, k]`, left to right, for positions
/// `first ..` (as many as `out` holds).
fn short_sums(a: &Line<'_>, b: &Line<'_>, first: usize, items: usize, seed: f32, out: &mut [f32]) {
    let (mut ca, mut cb) = (Cursor::new(a, first), Cursor::new(b, first));
    for o in out {
        let mut s = seed;
        for k in 0..items {
            s += a.data[ca.at + k * a.item] * b.data[cb.at + k * b.item];
        }
        *o = s;
        ca.advance(a);
        cb.advance(b);
    }
}

/// `Σ_k a[p, k] · b[p, k]` for each of `positions` positions, each sum in
/// `reduce`'s order (`kernel::Order::Tree`, from `seed` when given), the
/// factors read in place along the items (a matrix's rows, a vector
/// replicated over them). [`GROUP`] sums run side by side, their products
/// laid across a small tile so that their additions vectorise; runs of
/// positions are shared among threads. An error: a factor's items do not
/// lie so, or memory ran short.
pub(crate) fn sums_along_items(
    a: &Line<'_>,
    b: &Line<'_>,
    positions: usize,
    items: usize,
    seed: Option<f32>,
) -> Result<Vec<f32>, &'static str> {
    if !a.fits(items) || !b.fits(items) || (items == 0 && seed.is_none()) {
        return Err(crate::kernel::OUT_OF_BOUNDS);
    }
    let mut out = crate::kernel::buffer(positions)?;
    out.resize(positions, 0.0f32);
    if positions == 0 {
        return Ok(out);
    }
    if (1..GROUP).contains(&items)
        && let Some((rows, vector)) = rows_by_vector(a, b, positions, items)
    {
        // Short rows, one vector for all: each sum straight along its row.
        let sums = |first: usize, out: &mut [f32]| {
            let rows = rows[first * items..].chunks_exact(items);
            for (o, row) in out.iter_mut().zip(rows) {
                let mut products = row.iter().zip(vector).map(|(x, y)| x * y);
                let start = match seed {
                    Some(s) => s,
                    None => products.next().unwrap_or(0.0),
                };
                *o = products.fold(start, |s, p| s + p);
            }
            true
        };
        let work = positions.saturating_mul(items);
        return match crate::rows_in_parallel(&mut out, 1, work, 1 << 20, sums) {
            true => Ok(out),
            false => Err(crate::kernel::OUT_OF_MEMORY),
        };
    }
    let threads = crate::threads();
    let parallel = threads >= 2 && positions.saturating_mul(items) >= 1 << 20 && positions > GROUP;
    let per = match parallel {
        true => positions.div_ceil(threads * 4).next_multiple_of(GROUP),
        false => positions,
    };
    let parts: Vec<(usize, &mut [f32])> = (out.chunks_mut(per).enumerate())
        .map(|(i, part)| (i * per, part))
        .collect();
    let sums = |(first, part): (usize, &mut [f32])| {
        if let Some(s) = seed
            && items < SIDE_BY_SIDE
        {
            short_sums(a, b, first, items, s, part);
            return true;
        }
        for (g, sums) in part.chunks_mut(GROUP).enumerate() {
            let p0 = first + g * GROUP;
            // A last short group repeats its last position.
            let at = |line: &Line<'_>| line.starts(p0, sums.len());
            let group = Group {
                a,
                b,
                starts: (at(a), at(b)),
            };
            let got = match seed {
                Some(s) if items <= PAIRWISE_LEAF => {
                    let mut acc = [s; GROUP];
                    group.leaf(0, items, &mut acc);
                    acc
                }
                Some(s) => group.tree(0, items).map(|x| s + x),
                None => group.tree(0, items),
            };
            sums.copy_from_slice(&got[..sums.len()]);
        }
        true
    };
    let ok = if parallel && parts.len() > 1 {
        let threads = threads.min(parts.len());
        crate::in_parallel(parts, threads, sums)
    } else {
        parts.into_iter().all(sums)
    };
    ok.then_some(out).ok_or(crate::kernel::OUT_OF_MEMORY)
}

/// The rows of one factor, one after another from its first atom
/// (`positions` rows of `items`), and the vector the other factor is
/// for every position, when the factors are so (either way round: a
/// product of two atoms is the same either way).
fn rows_by_vector<'a>(
    a: &Line<'a>,
    b: &Line<'a>,
    positions: usize,
    items: usize,
) -> Option<(&'a [f32], &'a [f32])> {
    let rows = |l: &Line<'a>| {
        let mut step = items;
        let laid = l.item == 1
            && l.outer.iter().rev().all(|&(n, s)| {
                let ok = n == 1 || s == step;
                step *= n;
                ok
            });
        laid.then(|| l.data.get(..positions.checked_mul(items)?))
            .flatten()
    };
    let vector = |l: &Line<'a>| {
        let one = (l.item == 1 || items == 1) && l.outer.iter().all(|&(n, s)| n == 1 || s == 0);
        one.then(|| l.data.get(..items)).flatten()
    };
    match (rows(a), vector(b)) {
        (Some(r), Some(v)) => Some((r, v)),
        _ => Some((rows(b)?, vector(a)?)),
    }
}

/// [`GROUP`] sums of [`sums_along_items`]: where each one's items start
/// in each factor.
struct Group<'l, 'a> {
    a: &'l Line<'a>,
    b: &'l Line<'a>,
    starts: ([usize; GROUP], [usize; GROUP]),
}

impl Group<'_, '_> {
    /// The tree sums of items `k0 .. k0 + n` (`n ≥ 1`), as
    /// `kernel::Order::Tree` sums: each leaf from its first product, left
    /// to right.
    fn tree(&self, k0: usize, n: usize) -> [f32; GROUP] {
        if n <= PAIRWISE_LEAF {
            let mut first = [[0.0f32; GROUP]; 1];
            self.products(k0, &mut first);
            let [mut acc] = first;
            self.leaf(k0 + 1, n - 1, &mut acc);
            return acc;
        }
        let half = n / 2;
        let left = self.tree(k0, half);
        let right = self.tree(k0 + half, n - half);
        std::array::from_fn(|j| left[j] + right[j])
    }

    /// `acc[j] += a[j, k] · b[j, k]` for items `k0 .. k0 + n` in order
    /// (`n ≤ PAIRWISE_LEAF`).
    fn leaf(&self, mut k0: usize, mut n: usize, acc: &mut [f32; GROUP]) {
        #[cfg(target_arch = "x86_64")]
        if self.a.item == 1
            && self.b.item == 1
            && n >= GROUP
            && let Some(simd) = pulp::x86::V3::try_new()
        {
            let (da, db) = (self.a.data, self.b.data);
            let a: [&[f32]; GROUP] = std::array::from_fn(|j| &da[self.starts.0[j] + k0..][..n]);
            let b: [&[f32]; GROUP] = std::array::from_fn(|j| &db[self.starts.1[j] + k0..][..n]);
            let done = pulp::Simd::vectorize(
                simd,
                #[inline(always)]
                || transposed::leaf(simd, a, b, acc),
            );
            k0 += done;
            n -= done;
        }
        if n < GROUP {
            // A few items (a short cell, or what the vectors left): each
            // row's products added straight in, in order — the same
            // additions, with no tile to clear.
            let (a, b) = (self.a, self.b);
            for (j, acc) in acc.iter_mut().enumerate() {
                let (sa, sb) = (self.starts.0[j] + k0 * a.item, self.starts.1[j] + k0 * b.item);
                for k in 0..n {
                    *acc += a.data[sa + k * a.item] * b.data[sb + k * b.item];
                }
            }
            return;
        }
        // The products a tile of TILE items at a time (the tile cleared
        // once, small enough to stay in the first-level cache).
        const TILE: usize = 32;
        let mut tile = [[0.0f32; GROUP]; TILE];
        while n > 0 {
            let m = n.min(TILE);
            let tile = &mut tile[..m];
            self.products(k0, tile);
            fmath::widest(
                #[inline(always)]
                || {
                    for t in tile.iter() {
                        for j in 0..GROUP {
                            acc[j] += t[j];
                        }
                    }
                },
            );
            k0 += m;
            n -= m;
        }
    }

    /// `tile[k][j] = a[j, k0 + k] · b[j, k0 + k]` for `k < tile.len()`.
    fn products(&self, k0: usize, tile: &mut [[f32; GROUP]]) {
        let n = tile.len();
        let (a, b) = (self.a, self.b);
        for j in 0..GROUP {
            let (sa, sb) = (self.starts.0[j] + k0 * a.item, self.starts.1[j] + k0 * b.item);
            match (a.item, b.item) {
                (1, 1) => (tile.iter_mut().zip(&a.data[sa..sa + n]).zip(&b.data[sb..sb + n]))
                    .for_each(|((t, x), y)| t[j] = x * y),
                (1, _) => {
                    let y = b.data[sb];
                    (tile.iter_mut().zip(&a.data[sa..sa + n])).for_each(|(t, x)| t[j] = x * y)
                }
                (_, 1) => {
                    let x = a.data[sa];
                    (tile.iter_mut().zip(&b.data[sb..sb + n])).for_each(|(t, y)| t[j] = x * y)
                }
                _ => {
                    let p = a.data[sa] * b.data[sb];
                    tile.iter_mut().for_each(|t| t[j] = p)
                }
            }
        }
    }
}

/// The sums of a group eight items at a time where AVX is at hand: the
/// eight rows' products of eight items, turned in registers so that each
/// vector holds one item of every row, added in the items' order — the
/// same additions as one row at a time, in the same order.
#[cfg(target_arch = "x86_64")]
mod transposed {
    use super::GROUP;
    use core::arch::x86_64::__m256;
    use pulp::x86::V3;

    /// `acc[j] += a[j][k] · b[j][k]` for `k` up to the last whole eight
    /// of the rows (all of one length), in order; how many items that is.
    #[inline(always)]
    pub(super) fn leaf(simd: V3, a: [&[f32]; GROUP], b: [&[f32]; GROUP], acc: &mut [f32; GROUP]) -> usize {
        let avx = simd.avx;
        let n = a[0].len() / 8 * 8;
        let mut sum: __m256 = pulp::cast(*acc);
        let load = |row: &[f32], k: usize| -> __m256 {
            let mut x = [0.0f32; 8];
            x.copy_from_slice(&row[k..k + 8]);
            pulp::cast(x)
        };
        for k in (0..n).step_by(8) {
            let p: [__m256; GROUP] = std::array::from_fn(|j| avx._mm256_mul_ps(load(a[j], k), load(b[j], k)));
            // Rows of items to items of rows: pairs, then quads, then halves.
            let t = [
                avx._mm256_unpacklo_ps(p[0], p[1]),
                avx._mm256_unpackhi_ps(p[0], p[1]),
                avx._mm256_unpacklo_ps(p[2], p[3]),
                avx._mm256_unpackhi_ps(p[2], p[3]),
                avx._mm256_unpacklo_ps(p[4], p[5]),
                avx._mm256_unpackhi_ps(p[4], p[5]),
                avx._mm256_unpacklo_ps(p[6], p[7]),
                avx._mm256_unpackhi_ps(p[6], p[7]),
            ];
            let q = [
                avx._mm256_shuffle_ps::<0x44>(t[0], t[2]),
                avx._mm256_shuffle_ps::<0xEE>(t[0], t[2]),
                avx._mm256_shuffle_ps::<0x44>(t[1], t[3]),
                avx._mm256_shuffle_ps::<0xEE>(t[1], t[3]),
                avx._mm256_shuffle_ps::<0x44>(t[4], t[6]),
                avx._mm256_shuffle_ps::<0xEE>(t[4], t[6]),
                avx._mm256_shuffle_ps::<0x44>(t[5], t[7]),
                avx._mm256_shuffle_ps::<0xEE>(t[5], t[7]),
            ];
            let items = [
                avx._mm256_permute2f128_ps::<0x20>(q[0], q[4]),
                avx._mm256_permute2f128_ps::<0x20>(q[1], q[5]),
                avx._mm256_permute2f128_ps::<0x20>(q[2], q[6]),
                avx._mm256_permute2f128_ps::<0x20>(q[3], q[7]),
                avx._mm256_permute2f128_ps::<0x31>(q[0], q[4]),
                avx._mm256_permute2f128_ps::<0x31>(q[1], q[5]),
                avx._mm256_permute2f128_ps::<0x31>(q[2], q[6]),
                avx._mm256_permute2f128_ps::<0x31>(q[3], q[7]),
            ];
            for item in items {
                sum = avx._mm256_add_ps(sum, item);
            }
        }
        *acc = pulp::cast(sum);
        n
    }
}

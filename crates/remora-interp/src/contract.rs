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

use crate::batch::{Batched, Lifts, Try, place};
use crate::eval::{Env, Fun, Interpreter, atoms_in, check_size};
use crate::kernel::{Layout, PAIRWISE_LEAF, row_major};
use crate::matmul::{Strided, Sums};
use remora_check::typed::{TAtomKind, TExpr, TExprKind};
use remora_syntax::Span;
use remora_value::{Array, Atom, Data};

/// The sums of `[outer, items, lanes]` products, as prepared by
/// [`Interpreter::contraction`]: each operand dense over the axes it varies
/// on, with its steps over `(outer …, items, lanes)` (zero where
/// replicated; the lane step 0 or 1).
struct Operand<'a> {
    data: &'a [f32],
    outer: Vec<usize>,
    item: usize,
    lane: usize,
}

impl<'p> Interpreter {
    /// `e` as a fused multiply-reduce, when it is one: an application of
    /// `f.sum` (over a vector cell) or `reduce` by `f.+` to a product (see
    /// [`Interpreter::product_operands`]). `None` when `e` is not of that
    /// form or the operands do not suit (the caller then evaluates `e` as
    /// written).
    pub(crate) fn contraction(&mut self, e: &'p TExpr, env: &Env<'p>) -> Try<Batched<'p>> {
        let (reducer, product, lifted) = contraction_form(e)?;
        if !ends_in_product(product, env, 0) {
            return None;
        }
        if let Reducer::Reduce(op) = reducer {
            let op = self.eval_batched(op, env)?;
            if op.nb != 0 || crate::intrinsics::scalar_operator(&op.densify()?.v) != Some("f.+") {
                return None;
            }
        }
        let xcell = self.shape_of(&lifted.arg_cell, env, e.span).ok()?;
        let Product { a, b } = self.product_operands(product, env, 0)?;
        let (nb, shape) = (a.nb, a.v.shape.clone());
        // [outer …, items, inner …] of the product.
        let (items_at, seed) = match reducer {
            Reducer::Sum if xcell.len() == 1 => (shape.len().checked_sub(1)?, Some(0.0f32)),
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
        let (steps_a, steps_b) = (a.strides.clone(), b.strides.clone());
        let (Data::Float(da), Data::Float(db)) = (&a.v.data, &b.v.data) else {
            return None;
        };
        // (A view's atoms start at its offset.)
        let (da, db) = (da.get(a.offset..)?, db.get(b.offset..)?);
        let mut result_shape = shape.clone();
        result_shape.remove(items_at);
        check_size(atoms_in(&result_shape), Span::default()).ok()?;
        let product = Factors {
            a: da,
            b: db,
            steps_a: &steps_a,
            steps_b: &steps_b,
            shape: &shape,
            items_at,
        };
        let out = match product.matrix_product(Sums::Tree { seed }) {
            Some(out) => out,
            None => product.lane_sums(seed)?,
        };
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

    /// The two factors of `e`, a product: `(f.* x y)`, or a `let` or an
    /// application of a lambda whose body is one (a function of the
    /// factors of each cell, lifted over a frame) — each laid over the
    /// product's shape (zero steps where it is replicated), as the product
    /// would be made, but not multiplied. The product's shape is the
    /// batch's first `nb` axes and then its own.
    fn product_operands(&mut self, e: &'p TExpr, env: &Env<'p>, depth: usize) -> Try<Product<'p>> {
        if depth > PRODUCT_DEPTH {
            return None;
        }
        match &e.kind {
            TExprKind::Let { var, value, body } => {
                let v = self.eval_batched(value, env)?;
                let env = crate::batch::bind(env, *var, v);
                self.product_operands(body, &env, depth + 1)
            }
            TExprKind::App { .. } => {
                let (head, spine) = e.spine();
                if is_times(head) {
                    let [(x, _), (y, _)] = spine.as_slice() else {
                        return None;
                    };
                    let x = self.eval_batched(x, env)?;
                    let y = self.eval_batched(y, env)?;
                    return self.factors(&x, &y);
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
                let r = self.lambda_batched_by(&fun, args, |s, body, env| {
                    s.product_operands(body, env, depth + 1)
                });
                self.batching -= 1;
                r
            }
            _ => None,
        }
    }

    /// The factors of `(f.* x y)` (scalar cells: the product's frame is
    /// the longer of theirs) over the product's shape.
    fn factors(&self, x: &Batched<'p>, y: &Batched<'p>) -> Try<Product<'p>> {
        let (own_x, own_y) = (x.own(), y.own());
        let frame = if own_x.len() >= own_y.len() { own_x } else { own_y }.to_vec();
        if !frame.starts_with(own_x) || !frame.starts_with(own_y) {
            return None;
        }
        let nb = x.nb.max(y.nb);
        let mut shape: Vec<usize> = self.batch.get(..nb)?.to_vec();
        shape.extend(&frame);
        let over = |f: &Batched<'p>| {
            let strides = place(&f.strides, f.nb, nb, shape.len());
            f.view(shape.clone(), nb, f.offset, strides)
        };
        Some(Product {
            a: over(x),
            b: over(y),
        })
    }
}

/// A product not made: its two factors, each viewed over the product's
/// shape (the same `nb` and shape).
struct Product<'p> {
    a: Batched<'p>,
    b: Batched<'p>,
}

impl<'p> Lifts<'p> for Product<'p> {
    fn outward(self, interp: &Interpreter, depth: usize, outer: usize) -> Try<Self> {
        Some(Product {
            a: self.a.outward(interp, depth, outer)?,
            b: self.b.outward(interp, depth, outer)?,
        })
    }
}

/// `head` is `f.*` (instantiated or not).
fn is_times(mut head: &TExpr) -> bool {
    while let TExprKind::TApp { func, .. } | TExprKind::IApp { func, .. } = &head.kind {
        head = func;
    }
    matches!(head.kind, TExprKind::Intrinsic("f.*"))
}

/// The function a value is, when it is one atom.
fn lambda_value<'a, 'p>(f: &'a Batched<'p>) -> Option<&'a Atom<Fun<'p>>> {
    match &f.v.data {
        Data::Atoms(atoms) if f.nb == 0 && f.v.shape.is_empty() => atoms.get(f.offset),
        _ => None,
    }
}

/// How deep [`ends_in_product`] follows applications of lambdas.
const PRODUCT_DEPTH: usize = 8;

/// Whether `e`'s value is, as written, a product `(f.* x y)`: directly,
/// as a `let`'s body, or as the body of the lambda it applies to all its
/// parameters (a lambda written there, or a variable bound to one). A
/// cheap look that decides whether [`Interpreter::product_operands`] is
/// worth its evaluations.
fn ends_in_product<'p>(e: &'p TExpr, env: &Env<'p>, depth: usize) -> bool {
    if depth > PRODUCT_DEPTH {
        return false;
    }
    match &e.kind {
        TExprKind::Let { body, .. } => ends_in_product(body, env, depth + 1),
        TExprKind::App { .. } => {
            let (head, spine) = e.spine();
            if is_times(head) {
                return spine.len() == 2;
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
            crate::batch::lambda_params(body) == 0 && ends_in_product(body, &env, depth + 1)
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
                Atom::Fun(Fun::TLambda { body, env } | Fun::ILambda { body, env, .. }) => {
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
/// `shape`: each read from its atoms through its steps over the product's
/// axes (zero where it is replicated).
struct Factors<'a> {
    a: &'a [f32],
    b: &'a [f32],
    steps_a: &'a [usize],
    steps_b: &'a [usize],
    shape: &'a [usize],
    items_at: usize,
}

/// The fewest rows a product runs as `matmul.rs`'s blocked loop.
const MIN_ROWS: usize = 4;

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

impl Factors<'_> {
    /// The sums as matrix products, when the product is one (or a frame of
    /// them): the result's axes (those of extent 1 aside) are axes both
    /// factors step along (the frame), then axes only one factor steps
    /// along (the rows, possibly none), then axes only the other does (the
    /// columns), each group one step apart in its factor. Each product by
    /// `matmul.rs`'s blocked loop, every sum in the order `sums`. (Which
    /// factor is the rows' does not matter: a product of two atoms is the
    /// same either way round.)
    fn matrix_product(&self, sums: Sums<f32>) -> Option<Vec<f32>> {
        let empty = (0..self.shape.len()).any(|i| i != self.items_at && self.shape[i] == 0);
        if empty {
            return Some(Vec::new());
        }
        let axes: Vec<usize> = (0..self.shape.len())
            .filter(|&i| i != self.items_at && self.shape[i] > 1)
            .collect();
        let mut roles = Vec::with_capacity(axes.len());
        for &i in &axes {
            roles.push(match (self.steps_a[i] != 0, self.steps_b[i] != 0) {
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
        // The factor the columns step through, and the rows'.
        let (cols, rows) = match column_role {
            Role::B => ((self.b, self.steps_b), (self.a, self.steps_a)),
            _ => ((self.a, self.steps_a), (self.b, self.steps_b)),
        };
        let group = |range: std::ops::Range<usize>, steps: &[usize]| -> Option<(usize, usize)> {
            let group = &axes[range];
            let extent: usize = group.iter().map(|&i| self.shape[i]).product();
            let step = group.last().map_or(0, |&i| steps[i]);
            let flat = group
                .windows(2)
                .all(|w| steps[w[0]] == steps[w[1]] * self.shape[w[1]]);
            flat.then_some((extent, step))
        };
        let (m, row_step) = group(frame..columns_from, rows.1)?;
        let (n, col_step) = group(columns_from..axes.len(), cols.1)?;
        let k = self.shape[self.items_at];
        let positions: usize = axes[..frame].iter().map(|&i| self.shape[i]).product();
        // The blocked loop packs the columns' factor (`k × n` atoms) once
        // for all the rows: worth it for a few rows at least, and only
        // where packing does not multiply what the factor holds (a
        // `windows` view's columns overlap) beyond the result's size.
        // Otherwise (and for many small products) the lanes' loops, which
        // read the factors in place, suit better.
        let packed = k.saturating_mul(n);
        if m < MIN_ROWS
            || (positions > 1 && n < 8)
            || packed > cols.0.len().saturating_mul(2).max(m.saturating_mul(n))
        {
            return None;
        }
        let mut out = crate::kernel::buffer(positions.checked_mul(m)?.checked_mul(n)?).ok()?;
        let mut odometer = vec![0usize; frame];
        let (mut base_rows, mut base_cols) = (0usize, 0usize);
        for _ in 0..positions {
            let a = Strided {
                data: rows.0,
                offset: base_rows,
                row: row_step,
                col: rows.1[self.items_at],
            };
            let b = Strided {
                data: cols.0,
                offset: base_cols,
                row: cols.1[self.items_at],
                col: col_step,
            };
            out.extend(crate::matmul::matmul_strided(a, b, [m, k, n], sums).ok()?);
            for f in (0..frame).rev() {
                let axis = axes[f];
                odometer[f] += 1;
                base_rows += rows.1[axis];
                base_cols += cols.1[axis];
                if odometer[f] < self.shape[axis] {
                    break;
                }
                base_rows -= rows.1[axis] * self.shape[axis];
                base_cols -= cols.1[axis] * self.shape[axis];
                odometer[f] = 0;
            }
        }
        Some(out)
    }

    /// The sums side by side along a lane axis (the item's inner axes for
    /// `reduce`, else the last frame axis), each sum in `reduce`'s order
    /// (from `seed` when given).
    fn lane_sums(&self, seed: Option<f32>) -> Option<Vec<f32>> {
        let (shape, items_at) = (self.shape, self.items_at);
        let items = shape[items_at];
        // The lanes: the inner axes (one axis, flattened, when both
        // operands step through them alike), else the last outer axis.
        let (lane_axes, outer_axes): (Vec<usize>, Vec<usize>) = if items_at + 1 < shape.len() {
            ((items_at + 1..shape.len()).collect(), (0..items_at).collect())
        } else if items_at > 0 {
            (vec![items_at - 1], (0..items_at - 1).collect())
        } else {
            (Vec::new(), Vec::new())
        };
        let outer_shape: Vec<usize> = outer_axes.iter().map(|&i| shape[i]).collect();
        let lanes: usize = lane_axes.iter().map(|&i| shape[i]).product();
        let ra = relayout(self.a, self.steps_a, shape, &outer_axes, items_at, &lane_axes)?;
        let rb = relayout(self.b, self.steps_b, shape, &outer_axes, items_at, &lane_axes)?;
        // The result is laid out [outer …, lanes …]: the same order as the
        // product's less the summed axis when the lanes are the inner axes
        // or the last frame axis.
        contract(&ra.operand(), &rb.operand(), &outer_shape, items, lanes, seed)
    }
}

/// An operand copied densely over the axes it varies on, in the order
/// `(outer …, items, lanes …)`, and its steps over them (zero on the axes
/// it is replicated along).
struct Relaid<'a> {
    data: std::borrow::Cow<'a, [f32]>,
    outer: Vec<usize>,
    item: usize,
    lane: usize,
}

impl Relaid<'_> {
    fn operand(&self) -> Operand<'_> {
        Operand {
            data: &self.data,
            outer: self.outer.clone(),
            item: self.item,
            lane: self.lane,
        }
    }
}

fn relayout<'a>(
    data: &'a [f32],
    steps: &[usize],
    shape: &[usize],
    outer_axes: &[usize],
    items_at: usize,
    lane_axes: &[usize],
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
            data: std::borrow::Cow::Borrowed(data),
            outer: (0..outer_axes.len()).map(step).collect(),
            item: step(outer_axes.len()),
            lane,
        });
    }
    // An operand already laid out so is read where it is.
    let in_place =
        (0..extent.len()).all(|k| extent[k] == 1 || from[k] == packed[k]) && data.len() >= atoms_in(&extent);
    let dense = if in_place {
        std::borrow::Cow::Borrowed(data)
    } else {
        let layout = Layout {
            offset: 0,
            strides: from,
        };
        std::borrow::Cow::Owned(crate::kernel::gather(&extent, data, &layout).ok()?)
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
/// `kernel::Order::Tree` (from `seed` when given). The rows `o` are shared
/// among threads (`crate::threads`); no sum's order depends on that.
fn contract(
    a: &Operand<'_>,
    b: &Operand<'_>,
    outer: &[usize],
    items: usize,
    lanes: usize,
    seed: Option<f32>,
) -> Option<Vec<f32>> {
    let positions = atoms_in(outer);
    let mut out = vec![0.0f32; positions.checked_mul(lanes)?];
    // Where each row's operands start.
    let mut bases = Vec::with_capacity(positions);
    let mut odometer = vec![0usize; outer.len()];
    let (mut base_a, mut base_b) = (0usize, 0usize);
    for _ in 0..positions {
        bases.push((base_a, base_b));
        for axis in (0..outer.len()).rev() {
            odometer[axis] += 1;
            base_a += a.outer[axis];
            base_b += b.outer[axis];
            if odometer[axis] < outer[axis] {
                break;
            }
            base_a -= a.outer[axis] * outer[axis];
            base_b -= b.outer[axis] * outer[axis];
            odometer[axis] = 0;
        }
    }
    let rows = |out: &mut [f32], bases: &[(usize, usize)]| -> Option<()> {
        for (row, &base) in out.chunks_exact_mut(lanes.max(1)).zip(bases) {
            row_sum(a, b, base, items, seed, row)?;
        }
        Some(())
    };
    let work = positions.saturating_mul(items).saturating_mul(lanes);
    let threads = crate::threads().min(positions);
    if threads < 2 || work < 1 << 20 || lanes == 0 {
        rows(&mut out, &bases)?;
        return Some(out);
    }
    // Parts of rows shared among the threads.
    let per = positions.div_ceil(threads * 4);
    let parts: Vec<Part<'_>> = out.chunks_mut(per * lanes).zip(bases.chunks(per)).collect();
    let ok = crate::in_parallel(parts, threads, |(part, bases)| rows(part, bases).is_some());
    ok.then_some(out)
}

/// Rows of sums to compute, and where their operands start.
type Part<'a> = (&'a mut [f32], &'a [(usize, usize)]);

/// One row of sums (see [`contract`]).
fn row_sum(
    a: &Operand<'_>,
    b: &Operand<'_>,
    (base_a, base_b): (usize, usize),
    items: usize,
    seed: Option<f32>,
    row: &mut [f32],
) -> Option<()> {
    let lanes = row.len();
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

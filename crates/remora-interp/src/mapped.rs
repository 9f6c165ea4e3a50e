//! A fold or scan of a map's results, `(iscan op (f a1 … ak))` (also
//! `fold`, `scan`, `reduce`, and the map bound by a `let` read only as the
//! loop's items): at the top level, with `op` and `f` lambdas on small
//! cells, the map and the step are compiled into one cell program
//! (`cellprog.rs`) that makes each item from the arguments' cells where
//! the loop reads it, so the items (a `[n 2]` array of pairs, say) are
//! never laid out and the loop is one pass over the arguments.
//!
//! Only arguments that cost nothing to evaluate again are taken (variables,
//! intrinsics, lambda literals; a seed that is also a literal), so when
//! the cell program gives up (a form it does not know, a fault in a step)
//! nothing observable has happened, and the caller evaluates the
//! expression as written, which reports any error where the reference
//! meets it.

use crate::batch::{lambda_params, pure};
use crate::eval::{Env, Fun, Interpreter, Run, Value};
use remora_check::typed::{TExpr, TExprKind, VarId};
use remora_value::{Atom, Data};

/// Whether evaluating `e` again costs nothing and cannot fail or trace:
/// a variable, an intrinsic, a lambda literal, or a literal array or frame
/// of those.
pub(crate) fn plain(e: &TExpr) -> bool {
    match &e.kind {
        TExprKind::Array { atoms, .. } => atoms
            .iter()
            .all(|a| !matches!(a.kind, remora_check::typed::TAtomKind::Box { .. })),
        TExprKind::Frame { elems, .. } => elems.iter().all(plain),
        _ => pure(e),
    }
}

/// The intrinsic `e` applies (through type and index applications).
pub(crate) fn intrinsic(e: &TExpr) -> Option<&'static str> {
    let mut head = e;
    while let TExprKind::TApp { func, .. } | TExprKind::IApp { func, .. } = &head.kind {
        head = func;
    }
    match head.kind {
        TExprKind::Intrinsic(name) => Some(name),
        _ => None,
    }
}

/// The one lambda a value holds.
fn lambda_of<'p>(v: &Value<'p>) -> Option<Fun<'p>> {
    match &v.data {
        Data::Atoms(atoms) if v.shape.is_empty() => match atoms.first()? {
            Atom::Fun(f @ Fun::Lambda { .. }) => Some(f.clone()),
            _ => None,
        },
        _ => None,
    }
}

impl<'p> Interpreter {
    /// `e` evaluated as a fold or scan of a map's results (see the module
    /// comment), its items the map `items` (else `e`'s last argument);
    /// `Ok(None)` when it is not one, or the cell program gives up, with
    /// nothing observable evaluated.
    pub(crate) fn scan_of_map(
        &mut self,
        e: &'p TExpr,
        items: Option<&'p TExpr>,
        env: &Env<'p>,
    ) -> Run<Option<Value<'p>>> {
        self.scan_of_map_kept(e, items, None, None, env)
    }

    /// [`Self::scan_of_map`] keeping only the parts of each state that
    /// `g` selects (`projected.rs`).
    pub(crate) fn scan_of_map_projected(
        &mut self,
        e: &'p TExpr,
        g: &Fun<'p>,
        env: &Env<'p>,
    ) -> Run<Option<Value<'p>>> {
        self.scan_of_map_kept(e, None, None, Some(g), env)
    }

    /// [`Self::scan_of_map`] keeping, of a scan's states, only those
    /// `mask` flags (one flag per state), when given, and of each only
    /// the parts `project` selects.
    fn scan_of_map_kept(
        &mut self,
        e: &'p TExpr,
        items: Option<&'p TExpr>,
        mask: Option<&[bool]>,
        project: Option<&Fun<'p>>,
        env: &Env<'p>,
    ) -> Run<Option<Value<'p>>> {
        if self.reference_only || self.fuel.is_some() {
            return Ok(None);
        }
        let (head, spine) = e.spine();
        let Some(name @ ("fold" | "scan" | "iscan" | "reduce")) = intrinsic(head) else {
            return Ok(None);
        };
        let seeded = matches!(name, "fold" | "scan");
        if spine.len() != 2 + usize::from(seeded) {
            return Ok(None);
        }
        let Some(((items_arg, items_lifted), firsts)) = spine.split_last() else {
            return Ok(None);
        };
        if firsts.iter().any(|(a, _)| !plain(a)) {
            return Ok(None);
        }
        for (_, lifted) in &spine {
            if !self.shape_of(&lifted.arg_frame, env, e.span)?.is_empty() {
                return Ok(None);
            }
        }
        let map = items.unwrap_or(*items_arg);
        // The map: `(f a1 … ak)`, a lambda of k parameters applied in full.
        let (f_expr, apps) = map.spine();
        if apps.is_empty() || !pure(f_expr) || apps.iter().any(|(a, _)| !plain(a)) {
            return Ok(None);
        }
        let xcell = self.shape_of(&items_lifted.arg_cell, env, e.span)?;
        let Some((&n, item_shape)) = xcell.split_first() else {
            return Ok(None);
        };
        let op = self.eval(spine[0].0, env)?;
        let Some(op) = lambda_of(&op) else {
            return Ok(None);
        };
        // (`reduce` by a scalar primitive η-expanded folds in its own
        // order: its batched rule's.)
        if name == "reduce" && crate::intrinsics::scalar_operator(&self.eval(spine[0].0, env)?).is_some() {
            return Ok(None);
        }
        let f = self.eval(f_expr, env)?;
        let Some(map_fun) = lambda_of(&f) else {
            return Ok(None);
        };
        if let Fun::Lambda { body, .. } = &map_fun
            && lambda_params(body) + 1 != apps.len()
        {
            return Ok(None);
        }
        let mut args = Vec::with_capacity(apps.len());
        for (a, lifted) in &apps {
            let v = self.eval(a, env)?;
            let cell = self.shape_of(&lifted.arg_cell, env, a.span)?;
            args.push((v, cell));
        }
        let seed = if seeded {
            let s = self.eval(spine[1].0, env)?;
            let cell = self.shape_of(&spine[1].1.arg_cell, env, e.span)?;
            if s.shape != cell {
                return Ok(None);
            }
            Some(s)
        } else {
            None
        };
        let r = self.mapped_fold_by_cell_program(
            name,
            &op,
            seed.as_ref(),
            &map_fun,
            &args,
            n,
            item_shape,
            mask,
            project,
        );
        Ok(r)
    }

    /// `(let ((val v MAP)) (let ((val w LOOP)) body))` where `LOOP` is a
    /// fold or scan whose items are `v`, read nowhere else: `w`'s value
    /// by [`Self::scan_of_map`] (`v` never made), and the environment of
    /// `body`; `Ok(None)` otherwise.
    pub(crate) fn let_scan_of_map(
        &mut self,
        var: VarId,
        value: &'p TExpr,
        body: &'p TExpr,
        env: &Env<'p>,
    ) -> Run<Option<(&'p TExpr, Env<'p>)>> {
        if self.reference_only || self.fuel.is_some() {
            return Ok(None);
        }
        let Some((w, loop_expr, rest)) = loop_of_map(var, value, body) else {
            return Ok(None);
        };
        Ok(self
            .scan_of_map(loop_expr, Some(value), env)?
            .map(|v| (rest, env.bind(w, v))))
    }

    /// `(let ((val var value)) body)`'s value by [`Self::let_filtered_scan`]:
    /// `value` the scan, or the map whose scan `body` binds (as
    /// [`Self::let_scan_of_map`]).
    pub(crate) fn let_filtered(
        &mut self,
        var: VarId,
        value: &'p TExpr,
        body: &'p TExpr,
        env: &Env<'p>,
    ) -> Run<Option<Value<'p>>> {
        if self.reference_only || self.fuel.is_some() {
            return Ok(None);
        }
        match loop_of_map(var, value, body) {
            Some((w, loop_expr, rest)) => self.let_filtered_scan(w, loop_expr, Some(value), rest, env),
            None => self.let_filtered_scan(var, value, None, body, env),
        }
    }

    /// `(let ((val w LOOP)) REST)` for `LOOP` a scan of a map (as
    /// [`Self::scan_of_map`], its items `items` when given) that `REST`
    /// reads only through one `(filter flags w)` — `REST` a chain of
    /// `let`s none of whose values reads `w`, the filter in its final
    /// expression outside any binder: the chain's values and the flags
    /// evaluated first, then the scan keeping only the flagged states
    /// (its `[n …]` states never laid out), then the final expression,
    /// the filter's value given. The whole `let`'s value; `Ok(None)` when
    /// it is not one or gave up, with nothing observable done (nothing
    /// evaluated here traces, the final expression included; a value
    /// that fails fails again, in the written order, when the caller
    /// evaluates the `let` as written).
    pub(crate) fn let_filtered_scan(
        &mut self,
        w: VarId,
        loop_expr: &'p TExpr,
        items: Option<&'p TExpr>,
        rest: &'p TExpr,
        env: &Env<'p>,
    ) -> Run<Option<Value<'p>>> {
        if self.reference_only || self.fuel.is_some() || self.premade.is_some() {
            return Ok(None);
        }
        let (head, _) = loop_expr.spine();
        if !matches!(intrinsic(head), Some("scan" | "iscan")) {
            return Ok(None);
        }
        let traces =
            |e: &TExpr| e.any(&mut |x| matches!(x.kind, TExprKind::Intrinsic("trace" | "trace-file")));
        // The chain, and its final expression.
        let mut chain = Vec::new();
        let mut last = rest;
        while let TExprKind::Let { var, value, body } = &last.kind {
            if crate::partition::reads(value, w) != Some(0) || traces(value) {
                return Ok(None);
            }
            chain.push((*var, &**value));
            last = body;
        }
        let Some((filter, flags)) = filter_of(last, w) else {
            return Ok(None);
        };
        // `(unbox ($k x (filter flags w)) … (g x) …)`, `g` selecting parts
        // of each state and `x` read only there: only those parts kept.
        let selection = selection_of_filtered(last, filter);
        if crate::partition::reads(last, w) != Some(1)
            || crate::partition::reads(flags, w) != Some(0)
            || traces(last)
        {
            return Ok(None);
        }
        // (An error here is raised again by the `let` as written.)
        let mut inner = env.clone();
        for (var, value) in chain {
            let Ok(v) = self.eval(value, &inner) else {
                return Ok(None);
            };
            inner = inner.bind(var, v);
        }
        let Ok(mask) = self.eval(flags, &inner) else {
            return Ok(None);
        };
        let (Data::Bool(mask), [_]) = (&mask.data, mask.shape.as_slice()) else {
            return Ok(None);
        };
        let selection = match selection {
            Some((app, g)) if !matches!(g.kind, TExprKind::Var(v) if !inner.binds(v)) => {
                let g = self.eval(g, &inner)?;
                crate::projected::selection(&g.data, &g.shape, 0).map(|g| (app, g))
            }
            _ => None,
        };
        let mut states = None;
        let mut selected = None;
        if let Some((app, g)) = &selection {
            states = self.scan_of_map_kept(loop_expr, items, Some(mask), Some(g), env)?;
            selected = states.is_some().then_some(std::ptr::from_ref(*app) as usize);
        }
        if states.is_none() {
            states = self.scan_of_map_kept(loop_expr, items, Some(mask), None, env)?;
        }
        let Some(states) = states else {
            return Ok(None);
        };
        let Some((&k, cell)) = states.shape.split_first() else {
            return Ok(None);
        };
        self.premade = Some(Premade {
            at: std::ptr::from_ref(filter) as usize,
            count: k,
            cell: cell.to_vec(),
            data: states.data.base_atoms(),
            selection: selected,
        });
        let r = self.eval(last, &inner);
        // Not reached by `eval` (a batched rule read the filter or its
        // selection): the `let` is evaluated as written.
        if self.premade.take().is_some() | self.preselected.take().is_some() {
            return Ok(None);
        }
        r.map(Some)
    }
}

/// `(let ((val v MAP)) (let ((val w LOOP)) rest))` where `LOOP` is a
/// fold or scan whose items are `v`, read nowhere else (`var`, `value`
/// and `body` the outer `let`'s): `w`, `LOOP` and `rest`.
fn loop_of_map<'p>(var: VarId, value: &TExpr, body: &'p TExpr) -> Option<(VarId, &'p TExpr, &'p TExpr)> {
    if !matches!(value.kind, TExprKind::App { .. }) {
        return None;
    }
    let TExprKind::Let {
        var: w,
        value: loop_expr,
        body: rest,
    } = &body.kind
    else {
        return None;
    };
    let (_, spine) = loop_expr.spine();
    let reads_v_last =
        matches!(spine.last(), Some((a, _)) if matches!(a.kind, TExprKind::Var(x) if x == var));
    if !reads_v_last
        || crate::partition::reads(loop_expr, var) != Some(1)
        || crate::partition::reads(rest, var) != Some(0)
        || *w == var
    {
        return None;
    }
    Some((*w, loop_expr, rest))
}

/// The value of a `filter` application made before its evaluation
/// reaches it (`let_filtered_scan`), by the application's address: the
/// kept items' count, cell shape and atoms.
pub(crate) struct Premade {
    pub(crate) at: usize,
    pub(crate) count: usize,
    pub(crate) cell: Vec<usize>,
    pub(crate) data: Data,
    /// The address of the selection `(g x)` of the filter's unboxed
    /// states that these are already (only `g`'s parts kept).
    pub(crate) selection: Option<usize>,
}

/// In `e`, `(unbox ($k x FILTER) body)` with `x` read once in `body`, by
/// `(g x)` for `g` a variable or a lambda literal that only selects parts
/// of its parameter: that application and `g`.
fn selection_of_filtered<'e>(e: &'e TExpr, filter: &TExpr) -> Option<(&'e TExpr, &'e TExpr)> {
    let unbox =
        e.find(&mut |x| matches!(&x.kind, TExprKind::Unbox { boxed, .. } if std::ptr::eq(&**boxed, filter)))?;
    let TExprKind::Unbox { var, body, .. } = &unbox.kind else {
        return None;
    };
    if crate::partition::reads(body, *var) != Some(1) {
        return None;
    }
    // (Not under a lambda, which may run it more than once.)
    let app = evaluated_once(
        body,
        true,
        &|x| matches!(&x.kind, TExprKind::App { arg, .. } if matches!(arg.kind, TExprKind::Var(v) if v == *var)),
    )?;
    let TExprKind::App { func, .. } = &app.kind else {
        return None;
    };
    let lambda = |a: &TExpr| matches!(a.kind, TExprKind::Array { .. }) && crate::batch::pure(a);
    (matches!(func.kind, TExprKind::Var(_)) || lambda(func)).then_some((app, &**func))
}

/// In `e`, outside any binder (in what an `unbox` or `let` binds, not
/// under it), `(filter flags w)`: the application and `flags`.
fn filter_of(e: &TExpr, w: VarId) -> Option<(&TExpr, &TExpr)> {
    let app = evaluated_once(e, false, &|x| {
        matches!(&x.kind, TExprKind::App { func, arg, .. }
            if matches!(arg.kind, TExprKind::Var(v) if v == w)
                && matches!(&func.kind, TExprKind::App { func: f, .. } if intrinsic(f) == Some("filter")))
    })?;
    let TExprKind::App { func, .. } = &app.kind else {
        return None;
    };
    let TExprKind::App { arg: flags, .. } = &func.kind else {
        return None;
    };
    Some((app, flags))
}

/// The first expression in `e` of which `pred` holds that `e`'s
/// evaluation evaluates at most once: never under a lambda (which may
/// run many times), and, unless `binders`, never under a `let` or an
/// `unbox` either (only in what they bind, in `e`'s environment).
fn evaluated_once<'e>(e: &'e TExpr, binders: bool, pred: &dyn Fn(&TExpr) -> bool) -> Option<&'e TExpr> {
    let mut stack = vec![e];
    while let Some(x) = stack.pop() {
        if pred(x) {
            return Some(x);
        }
        match &x.kind {
            TExprKind::App { func, arg, .. } => {
                stack.push(func);
                stack.push(arg);
            }
            TExprKind::TApp { func, .. } | TExprKind::IApp { func, .. } => stack.push(func),
            TExprKind::Array { atoms, .. } => {
                for a in atoms {
                    if let remora_check::typed::TAtomKind::Box { body, .. } = &a.kind {
                        stack.push(body);
                    }
                }
            }
            TExprKind::Frame { elems, .. } => stack.extend(elems.iter()),
            TExprKind::Unbox { boxed, body, .. }
            | TExprKind::Let {
                value: boxed, body, ..
            } => {
                stack.push(boxed);
                if binders {
                    stack.push(body);
                }
            }
            _ => {}
        }
    }
    None
}

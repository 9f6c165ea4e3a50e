//! `(filter flags ((i-app iota/static [n])))` at the top level — the
//! positions of the set flags, NumPy's `flatnonzero`: the positions
//! written as the flags are read, the `[n]` counting vector never made
//! (the size check `iota/static` makes is still made, so a vector too
//! large is the same error).

use crate::eval::{Env, Interpreter, Run, Value, check_size, fail};
use remora_check::typed::{TExpr, TExprKind};
use remora_value::Data;

impl<'p> Interpreter {
    /// `e` evaluated as the positions of its flags when it is `(filter
    /// flags (iota/static [n]))` applied to whole arrays; `Ok(None)`
    /// otherwise, with nothing evaluated.
    pub(crate) fn filter_of_iota(&mut self, e: &'p TExpr, env: &Env<'p>) -> Run<Option<Value<'p>>> {
        if self.reference_only || self.fuel.is_some() {
            return Ok(None);
        }
        let (head, spine) = e.spine();
        let mut name = head;
        while let TExprKind::TApp { func, .. } | TExprKind::IApp { func, .. } = &name.kind {
            name = func;
        }
        let (TExprKind::Intrinsic("filter"), [(flags, flags_lifted), (items, items_lifted)]) =
            (&name.kind, spine.as_slice())
        else {
            return Ok(None);
        };
        if !self.shape_of(&flags_lifted.arg_frame, env, e.span)?.is_empty()
            || !self.shape_of(&items_lifted.arg_frame, env, e.span)?.is_empty()
        {
            return Ok(None);
        }
        // The vector `(iota/static [n])`, or a variable bound to it not
        // made (`Interpreter::bind_iota`, `range` in an `unbox`).
        let n = match &items.kind {
            TExprKind::Var(v) => env.counting(*v).map(|c| c.n),
            _ => self.iota_length(items, env)?,
        };
        let Some(n) = n else {
            return Ok(None);
        };
        // (The order of the reference: the flags, then the vector.)
        let f = self.eval(flags, env)?;
        check_size(n, items.span)?;
        let Data::Bool(keep) = &f.data else {
            return fail(e.span, "filter: the flags are not Bools");
        };
        if f.shape != [n] || keep.len() != n {
            return fail(e.span, "internal error: filter's items do not fit");
        }
        let count = keep.iter().filter(|k| **k).count();
        let mut at = crate::kernel::buffer(count).or_else(|m| fail(e.span, m))?;
        at.extend(
            keep.iter()
                .enumerate()
                .filter(|(_, k)| **k)
                .map(|(i, _)| i as i64),
        );
        Ok(Some(crate::intrinsics::boxed_items(
            count,
            &[],
            Data::Int(at.into()),
        )))
    }
}

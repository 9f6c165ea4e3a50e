//! Loop nests over frames whose cells hold no atoms: `(count (== 0
//! (i-app iota/static [9223372036854775807 0])))` must answer at once, as
//! the interpreter does (its work is proportional to the atoms, not to a
//! frame's extent).

use crate::loops::{Expr, Stmt, Var};

/// Every `for` whose body is one `for` (at any depth: the nest is
/// rewritten from the inside out), after at most buffers allocated and
/// [`UNFAILING`] runtime calls (a cell sorted into a buffer, then copied
/// out by the loop), whose extent does not depend on the outer index or
/// those buffers, is given the extent 0 when the inner one is not
/// positive: its iterations would do nothing visible. (Evaluating the inner extent first
/// can at worst fail where the nest would not have run, and a run-time
/// error runs the program again on the interpreter: never a wrong answer.)
pub(super) fn skip_empty_nests(stmts: &mut [Stmt]) {
    for s in stmts.iter_mut() {
        match s {
            Stmt::For {
                index, count, body, ..
            } => {
                skip_empty_nests(body);
                if let Some((Stmt::For { count: inner, .. }, before)) = body.split_last() {
                    let mut local = vec![*index];
                    let idle = before.iter().all(|s| match s {
                        Stmt::Alloc { buf, .. } => {
                            local.push(*buf);
                            true
                        }
                        Stmt::Call { func, .. } => UNFAILING.iter().any(|f| func.starts_with(f)),
                        _ => false,
                    });
                    if idle && !local.iter().any(|x| uses(inner, *x)) {
                        *count = guarded(count.clone(), inner);
                    }
                }
            }
            Stmt::Reduce { body, .. } | Stmt::DoWhile { body, .. } => skip_empty_nests(body),
            Stmt::If { then, otherwise, .. } => {
                skip_empty_nests(then);
                skip_empty_nests(otherwise);
            }
            Stmt::Let { .. }
            | Stmt::Set { .. }
            | Stmt::Alloc { .. }
            | Stmt::Data { .. }
            | Stmt::Store { .. }
            | Stmt::Fail { .. }
            | Stmt::Swap { .. }
            | Stmt::Call { .. } => {}
        }
    }
}

/// Runtime functions (by prefix) that cannot fail but for memory, and
/// write only into the buffer they are given last: a cell's sort or grade.
const UNFAILING: &[&str] = &["rt_sort_", "rt_grade_"];

/// `count`, or 0 where `inner` is not positive.
fn guarded(count: Expr, inner: &Expr) -> Expr {
    match inner {
        Expr::Int(n) if *n > 0 => count,
        Expr::Int(_) => Expr::Int(0),
        _ => Expr::mul(
            count,
            Expr::op(
                "max",
                vec![Expr::op("min", vec![inner.clone(), Expr::Int(1)]), Expr::Int(0)],
            ),
        ),
    }
}

fn uses(e: &Expr, x: Var) -> bool {
    let mut found = false;
    e.each_var(&mut |v| found |= v == x);
    found
}

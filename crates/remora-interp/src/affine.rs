//! Counting vectors not laid out, and `scatter` at affine indices as a
//! strided store (NumPy's `flags[p*p::p] = 0`).
//!
//! * `(unbox ($k i (range n)) body)` binds `i` to the counting vector
//!   0 … n-1 not made yet (`Binding::Counting`): made once, the first
//!   time anything reads `i` as a value (`Counting::value`); so does
//!   `(let ((val i (i-app iota/static [n]))) body)` (`bind_iota`). A
//!   scalar primitive of such a variable and a scalar (`(< i 2)`) is made
//!   a block of the vector at a time (`counting_with_scalar`), and
//!   `filter` of it gives the kept positions (`positions.rs`).
//! * Where `scatter` is evaluated in full (`moves.rs`'s `update`), an
//!   index argument that is an affine function of such a variable —
//!   `+`, `-`, `*` of it, Int literals and scalar Int variables, any
//!   nesting (`(+ (* p p) (* p i))`) — is the progression `base + step·i`
//!   (`Affine`), never made; so is a source that is one (`(* 0 i)`, `(* 2
//!   i)`). Int arithmetic wraps, a ring, so the progression's terms are the
//!   elementwise operations' bits exactly. The store then walks the
//!   progression in order: an index outside the destination is skipped
//!   and a repeated index (step 0) written again, the last write winning,
//!   as `scatter_onto` does.

use crate::batch::Batched;
use crate::eval::{Binding, Env, Interpreter, Run, Value};
use remora_check::typed::{TAtomKind, TExpr, TExprKind, VarId};
use remora_syntax::Span;
use remora_types::Lifted;
use remora_value::{Array, Data};
use std::cell::OnceCell;
use std::rc::Rc;

/// The counting vector 0 … n-1, made at its first read as a value (kept
/// as plain Ints, so that scopes stay covariant in their lifetime).
#[derive(Debug)]
pub(crate) struct Counting {
    pub(crate) n: usize,
    made: OnceCell<remora_value::Buf<i64>>,
}

impl Counting {
    /// The vector (`None`: memory ran short).
    pub(crate) fn value<'p>(&self) -> Option<Value<'p>> {
        let data = match self.made.get() {
            Some(v) => v.clone(),
            None => {
                let Array {
                    data: Data::Int(v), ..
                } = made(Affine::Progression {
                    n: self.n,
                    base: 0,
                    step: 1,
                })?
                else {
                    return None;
                };
                self.made.get_or_init(|| v).clone()
            }
        };
        Some(Array {
            shape: vec![self.n],
            data: Data::Int(data),
        })
    }
}

/// An Int array known by a rule: a scalar, or the progression `base +
/// step·i` for i in 0 … n-1 (wrapping).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Affine {
    Scalar(i64),
    Progression { n: usize, base: i64, step: i64 },
}

impl Affine {
    fn combine(self, op: &str, other: Affine) -> Option<Affine> {
        use Affine::{Progression as P, Scalar as S};
        let f = |a: i64, b: i64| match op {
            "+" => a.wrapping_add(b),
            "-" => a.wrapping_sub(b),
            _ => a.wrapping_mul(b),
        };
        Some(match (self, other) {
            (S(a), S(b)) => S(f(a, b)),
            (P { n, base, step }, S(b)) => P {
                n,
                base: f(base, b),
                step: if op == "*" { step.wrapping_mul(b) } else { step },
            },
            (S(a), P { n, base, step }) => P {
                n,
                base: f(a, base),
                step: match op {
                    "+" => step,
                    "-" => step.wrapping_neg(),
                    _ => a.wrapping_mul(step),
                },
            },
            (
                P {
                    n,
                    base: b1,
                    step: s1,
                },
                P {
                    n: m,
                    base: b2,
                    step: s2,
                },
            ) if n == m && op != "*" => P {
                n,
                base: f(b1, b2),
                step: f(s1, s2),
            },
            _ => return None,
        })
    }

    /// The run `lo .. hi` of i whose terms `base + step·i` lie in 0 …
    /// m-1, when no term of the progression's `n` wraps (`None`: some
    /// do, and each is checked).
    fn in_range(n: usize, base: i64, step: i64, m: usize) -> Option<(usize, usize)> {
        if n == 0 {
            return Some((0, 0));
        }
        let (b, s, m) = (i128::from(base), i128::from(step), m as i128);
        i64::try_from(b + s * (n as i128 - 1)).ok()?;
        let (lo, hi) = if s == 0 {
            if (0..m).contains(&b) {
                (0, n as i128)
            } else {
                (0, 0)
            }
        } else if s > 0 {
            // b + s·i ≥ 0 and b + s·i < m.
            let lo = if b >= 0 { 0 } else { (-b + s - 1) / s };
            let hi = if m <= b { 0 } else { (m - b + s - 1) / s };
            (lo, hi)
        } else {
            let t = -s;
            // b - t·i < m and b - t·i ≥ 0.
            let lo = if b < m { 0 } else { (b - m + t) / t };
            let hi = if b < 0 { 0 } else { b / t + 1 };
            (lo, hi)
        };
        let (lo, hi) = (lo.clamp(0, n as i128) as usize, hi.clamp(0, n as i128) as usize);
        Some((lo, hi.max(lo)))
    }
}

impl<'p> Interpreter {
    /// `(range n)` as an unbox's boxed expression, `n` one Int in range: its
    /// length (`Ok(Ok(n))`); otherwise the boxes `range` makes from the
    /// argument evaluated (`Ok(Err(Some(b)))`), or nothing evaluated
    /// (`Ok(Err(None))`) when `boxed` is no such application.
    pub(crate) fn lazy_range(
        &mut self,
        boxed: &'p TExpr,
        env: &Env<'p>,
    ) -> Run<Result<usize, Option<Value<'p>>>> {
        if self.reference_only || self.fuel.is_some() || !self.batch.is_empty() {
            return Ok(Err(None));
        }
        let TExprKind::App { func, arg, lifted } = &boxed.kind else {
            return Ok(Err(None));
        };
        if crate::tally::intrinsic_name(func) != Some("range") {
            return Ok(Err(None));
        }
        let a = self.eval(arg, env)?;
        if let (true, Data::Int(v)) = (a.shape.is_empty(), &a.data)
            && let [n] = v[..]
            && let Ok(n) = usize::try_from(n)
            && n <= crate::eval::atom_limit()
        {
            return Ok(Ok(n));
        }
        let f = self.eval(func, env)?;
        let cell = self.shape_of(&lifted.arg_cell, env, boxed.span)?;
        self.apply(&f, a, &cell, &boxed.ty, env, boxed.span)
            .map(|b| Err(Some(b)))
    }

    /// `(let ((val var (iota/static [n]))) …)`: `var` bound to the
    /// counting vector, not made (as `range`'s in an `unbox`), for the
    /// rules that read it without making it (`filter` of it, a scalar
    /// primitive of it and a scalar, an affine `scatter` index). `None`
    /// (nothing evaluated) for any other value.
    pub(crate) fn bind_iota(&mut self, var: VarId, value: &'p TExpr, env: &Env<'p>) -> Run<Option<Env<'p>>> {
        if self.reference_only || self.fuel.is_some() {
            return Ok(None);
        }
        let n = self
            .iota_length(value, env)?
            .filter(|n| *n <= crate::eval::atom_limit());
        Ok(n.map(|n| Interpreter::bind_counting(env, var, n)))
    }

    /// `n` when `e` is `(i-app iota/static [n])`, one axis (its index
    /// read, nothing evaluated).
    pub(crate) fn iota_length(&mut self, e: &'p TExpr, env: &Env<'p>) -> Run<Option<usize>> {
        let TExprKind::IApp { func, arg } = &e.kind else {
            return Ok(None);
        };
        if !matches!(func.kind, TExprKind::Intrinsic("iota/static")) {
            return Ok(None);
        }
        Ok(match self.index_val(arg, env, e.span)? {
            crate::eval::IndexVal::Shape(s) => match s.as_slice() {
                [n] => usize::try_from(*n).ok(),
                _ => None,
            },
            crate::eval::IndexVal::Dim(_) => None,
        })
    }

    /// `(op a b)` for a binary scalar primitive, one operand a variable
    /// bound to a counting vector not made and the other a scalar: made a
    /// block at a time, the vector never whole (`(< i 2)`). `None`
    /// (nothing evaluated) for any other operands.
    pub(crate) fn counting_with_scalar(
        &mut self,
        name: &str,
        a: &'p TExpr,
        b: &'p TExpr,
        env: &Env<'p>,
        span: Span,
    ) -> Run<Option<Value<'p>>> {
        let unmade = |e: &TExpr| match e.kind {
            TExprKind::Var(v) => env.counting(v).filter(|c| c.made.get().is_none()).map(|c| c.n),
            _ => None,
        };
        let (n, counting_first, other) = match (unmade(a), unmade(b)) {
            (Some(n), None) if b.ty.shape.is_scalar() => (n, true, b),
            (None, Some(n)) if a.ty.shape.is_scalar() => (n, false, a),
            _ => return Ok(None),
        };
        // (Reading a variable has no effect: the scalar first.)
        let s = self.eval(other, env)?;
        if !s.shape.is_empty() {
            return crate::eval::fail(span, "internal error: a scalar operand is not one");
        }
        crate::eval::check_size(n, span)?;
        const BLOCK: usize = 1 << 14;
        let mut out: Option<Data<crate::eval::Fun<'p>>> = None;
        let mut lo = 0;
        while lo < n || out.is_none() {
            let hi = (lo + BLOCK).min(n);
            let block = Array {
                shape: vec![hi - lo],
                data: Data::Int((lo as i64..hi as i64).collect::<Vec<_>>().into()),
            };
            let operands = if counting_first {
                [block, s.clone()]
            } else {
                [s.clone(), block]
            };
            let part = crate::intrinsics::scalar_apply(name, &operands, &[hi - lo])
                .or_else(|m| crate::eval::fail(span, m))?;
            Data::append_to(&mut out, part, n).or_else(|m| crate::eval::fail(span, m))?;
            lo = hi;
        }
        Ok(out.map(|data| Array { shape: vec![n], data }))
    }

    /// `var` bound to the counting vector of `n` items, not made.
    pub(crate) fn bind_counting(env: &Env<'p>, var: VarId, n: usize) -> Env<'p> {
        env.with(Binding::Counting(
            var,
            Rc::new(Counting {
                n,
                made: OnceCell::new(),
            }),
        ))
    }

    /// `e` as an affine function of counting variables (see the module's
    /// comment), evaluating nothing that could fail or print: variables
    /// and literals only. `None` when `e` is not one.
    pub(crate) fn affine(&self, e: &'p TExpr, env: &Env<'p>) -> Option<Affine> {
        match &e.kind {
            TExprKind::Var(v) => {
                if let Some(c) = env.counting(*v) {
                    return Some(Affine::Progression {
                        n: c.n,
                        base: 0,
                        step: 1,
                    });
                }
                if !e.ty.shape.is_scalar() || e.ty.atom != remora_types::Atom::Int {
                    return None;
                }
                let v = Interpreter::lookup(env, *v)?;
                match (&v.data, v.shape.is_empty()) {
                    (Data::Int(x), true) if x.len() == 1 => Some(Affine::Scalar(x[0])),
                    _ => None,
                }
            }
            TExprKind::Array { shape, atoms } if shape.is_empty() => match atoms.as_slice() {
                [a] => match a.kind {
                    TAtomKind::Int(x) => Some(Affine::Scalar(x)),
                    _ => None,
                },
                _ => None,
            },
            TExprKind::App { .. } => {
                let (head, spine) = e.spine();
                let op = crate::tally::intrinsic_name(head)?;
                if !matches!(op, "+" | "-" | "*") {
                    return None;
                }
                let [(a, _), (b, _)] = spine.as_slice() else {
                    return None;
                };
                let (a, b) = (self.affine(a, env)?, self.affine(b, env)?);
                a.combine(op, b)
            }
            _ => None,
        }
    }
}

impl<'p> Interpreter {
    /// `(scatter dest idx src)` applied in full (`spine`, from `moves.rs`'s
    /// `update`), `idx` a progression of `n` terms with no frame: the
    /// destination (`dest_value`, evaluated where the update would: after
    /// the source when `dest_last`) and the source evaluated as the
    /// update evaluates them, a source that is a progression too not
    /// made. `Some(Ok(v))`: written as a strided store; `Some(Err(args))`:
    /// the arguments, the progressions laid out, for the update to run
    /// as usual (a frame, a view); `None` (nothing evaluated): no such
    /// scatter.
    #[allow(clippy::type_complexity)]
    pub(crate) fn affine_scatter(
        &mut self,
        name: &str,
        spine: &[(&'p TExpr, &'p Lifted, &'p TExpr)],
        env: &Env<'p>,
        dest_last: bool,
        span: Span,
        dest_value: &mut dyn FnMut(&mut Self) -> Run<Batched<'p>>,
    ) -> Run<Option<Result<Value<'p>, Vec<(Batched<'p>, Vec<usize>)>>>> {
        if name != "scatter" {
            return Ok(None);
        }
        let [(dest, dl, _), (ie, il, _), (se, sl, _)] = spine else {
            return Ok(None);
        };
        let Some(idx @ Affine::Progression { n, .. }) = self.affine(ie, env) else {
            return Ok(None);
        };
        let (Ok(dcell), Ok(icell), Ok(scell)) = (
            self.shape_of(&dl.arg_cell, env, dest.span),
            self.shape_of(&il.arg_cell, env, ie.span),
            self.shape_of(&sl.arg_cell, env, se.span),
        ) else {
            return Ok(None);
        };
        if icell != [n] {
            return Ok(None);
        }
        let src_affine = self
            .affine(se, env)
            .filter(|a| matches!(a, Affine::Progression { n: k, .. } if *k == n));
        let mut d = None;
        if !dest_last {
            d = Some(dest_value(self)?);
        }
        let src = match src_affine {
            Some(_) => None,
            None => Some(self.eval_view(se, env)?),
        };
        let mut d = match d {
            Some(d) => d,
            None => dest_value(self)?,
        };
        let whole = d.nb == 0
            && d.own() == dcell.as_slice()
            && d.is_dense()
            && src
                .as_ref()
                .is_none_or(|s| s.nb == 0 && s.own() == scell.as_slice());
        let src_laid = match (&src, src_affine) {
            (Some(s), _) if whole => s.densify().map(|s| Err(s.v)),
            (None, Some(a)) if whole => Some(Ok(a)),
            _ => None,
        };
        if let Some(src_laid) = src_laid {
            let atoms = d.v.data.len() + src.as_ref().map_or(0, |s| s.v.data.len());
            crate::eval::admit(atoms, span)?;
            let src_laid = match &src_laid {
                Ok(a) => Ok(*a),
                Err(v) => Err(v),
            };
            match scatter(d.v, idx, src_laid) {
                Ok(v) => return Ok(Some(Ok(v))),
                Err(dest) => d = Batched::plain(dest),
            }
        }
        let laid = |a: Affine| match made(a) {
            Some(v) => Ok(Batched::plain(v)),
            None => crate::eval::fail(span, format!("not enough memory for an array of {n} atoms")),
        };
        let src = match (src, src_affine) {
            (Some(s), _) => s,
            (None, Some(a)) => laid(a)?,
            (None, None) => return crate::eval::fail(span, "internal error: scatter without its source"),
        };
        Ok(Some(Err(vec![(d, dcell), (laid(idx)?, icell), (src, scell)])))
    }
}

/// Term `i` of the progression `base + step·i` (wrapping).
fn term(base: i64, step: i64, i: usize) -> i64 {
    base.wrapping_add(step.wrapping_mul(i as i64))
}

/// A progression laid out (for a scatter that is not written in place).
pub(crate) fn made<'p>(a: Affine) -> Option<Value<'p>> {
    Some(match a {
        Affine::Scalar(x) => Array {
            shape: Vec::new(),
            data: Data::Int(vec![x].into()),
        },
        Affine::Progression { n, base, step } => {
            let mut v = remora_value::limits::try_vec(n)?;
            v.extend((0..n).map(|i| term(base, step, i)));
            Array {
                shape: vec![n],
                data: Data::Int(v.into()),
            }
        }
    })
}

/// `(scatter dest idx src)` with `idx` a progression of `n` terms and no
/// frame: `src`'s items (laid out, or a progression too, for Int items of
/// one atom) written over `dest` at the terms in range, in order.
/// `None` when the shapes do not fit (the caller lays the progression out
/// and runs the ordinary scatter).
pub(crate) fn scatter<'p>(
    dest: Value<'p>,
    idx: Affine,
    src: Result<Affine, &Value<'p>>,
) -> Result<Value<'p>, Value<'p>> {
    let Affine::Progression { n, base, step } = idx else {
        return Err(dest);
    };
    let m = dest.shape.first().copied().unwrap_or(0);
    let item: usize = dest.shape.iter().skip(1).product();
    let run = Affine::in_range(n, base, step, m);
    let wrapped = move |i: usize| {
        usize::try_from(term(base, step, i))
            .ok()
            .filter(|j| *j < m)
            .map(|j| (i, j))
    };
    let Array { shape, mut data } = dest;
    let ok = match src {
        Err(src) if src.shape.first() == Some(&n) && src.data.len() == n * item => match run {
            Some((lo, hi)) => crate::masked::put_rows(
                &mut data,
                &src.data,
                (lo..hi).map(|i| (i, term(base, step, i) as usize)),
                item,
            )
            .is_some(),
            None => crate::masked::put_rows(&mut data, &src.data, (0..n).filter_map(wrapped), item).is_some(),
        },
        Ok(Affine::Progression {
            n: k,
            base: b,
            step: s,
        }) if k == n && item == 1 => match &mut data {
            Data::Int(v) => {
                // (Copied first if another value shares it.)
                let out: &mut Vec<i64> = v;
                // (Every term of `lo..hi` is in range: `in_range`.)
                let mut put = |i: usize, j: usize| out.get_mut(j).map(|d| *d = term(b, s, i)).is_some();
                match run {
                    // Forwards: a strided walk, each term the last plus its
                    // step (`flags[p*p::p] = 0`).
                    Some((lo, hi)) if step > 0 && lo < hi => {
                        let first = term(base, step, lo) as usize;
                        match out.get_mut(first..) {
                            Some(from) => {
                                let mut v = term(b, s, lo);
                                for d in from.iter_mut().step_by(step as usize).take(hi - lo) {
                                    *d = v;
                                    v = v.wrapping_add(s);
                                }
                                true
                            }
                            None => false,
                        }
                    }
                    Some((lo, hi)) => (lo..hi).all(|i| put(i, term(base, step, i) as usize)),
                    None => (0..n).filter_map(wrapped).all(|(i, j)| put(i, j)),
                }
            }
            _ => false,
        },
        _ => false,
    };
    let dest = Array { shape, data };
    if ok { Ok(dest) } else { Err(dest) }
}

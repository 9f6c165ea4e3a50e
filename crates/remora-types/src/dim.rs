//! Dimensions in normal form: a polynomial over dimension variables with
//! integer coefficients — a constant plus a sorted list of (monomial,
//! coefficient) terms with no zero coefficient, a monomial being a sorted
//! product of variables. Sums are linear forms; a product of variables is
//! one opaque term (`(* $m $n)`), as the checker needs no more.
//!
//! Arithmetic wraps at 64 bits, like [`Dim::eval`] does, so that
//! normalising is exact with respect to it; a result that wrapped is marked
//! ([`Dim::overflowed`]), so that a size computed from sizes too large is an
//! error, never a wrong size. [`Dim::checked_eval`] is the evaluation that
//! says so.

use crate::Truth;
use std::fmt;

/// A dimension variable (`$d`), numbered by whoever builds the dims.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DVar(pub u32);

/// A sorted product of variables, with repetition (`$n * $n`).
pub type Monomial = Vec<DVar>;

/// A dimension in normal form.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Dim {
    constant: i64,
    /// Sorted by monomial; every coefficient nonzero; no empty monomial.
    terms: Vec<(Monomial, i64)>,
    /// Whether some arithmetic that made this dimension wrapped.
    overflowed: bool,
}

/// Why [`Dim::checked_eval`] or [`crate::Shape::checked_eval`] has no
/// value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvalError {
    /// A variable has no value.
    Unbound,
    /// A dimension does not fit 64 bits.
    Overflow,
}

/// `a op b`, wrapping, noting in `flag` when it wrapped.
fn noting(flag: &mut bool, checked: Option<i64>, wrapped: i64) -> i64 {
    if checked.is_none() {
        *flag = true;
    }
    wrapped
}

impl Dim {
    pub fn nat(n: u64) -> Dim {
        Dim::int(n as i64)
    }

    pub fn int(n: i64) -> Dim {
        Dim {
            constant: n,
            terms: Vec::new(),
            overflowed: false,
        }
    }

    pub fn var(v: DVar) -> Dim {
        Dim {
            constant: 0,
            terms: vec![(vec![v], 1)],
            overflowed: false,
        }
    }

    /// Whether arithmetic that made this dimension overflowed 64 bits (its
    /// value is then wrapped, and no size).
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// The value, when the dimension has no variables.
    pub fn as_const(&self) -> Option<i64> {
        self.terms.is_empty().then_some(self.constant)
    }

    pub fn constant(&self) -> i64 {
        self.constant
    }

    pub fn terms(&self) -> &[(Monomial, i64)] {
        &self.terms
    }

    /// The variables that occur, sorted, without repetition.
    pub fn vars(&self) -> Vec<DVar> {
        let mut vs: Vec<DVar> = self.terms.iter().flat_map(|(m, _)| m.iter().copied()).collect();
        vs.sort();
        vs.dedup();
        vs
    }

    fn from_terms(constant: i64, mut terms: Vec<(Monomial, i64)>, mut overflowed: bool) -> Dim {
        terms.sort_by(|a, b| a.0.cmp(&b.0));
        let mut merged: Vec<(Monomial, i64)> = Vec::with_capacity(terms.len());
        for (m, c) in terms {
            match merged.last_mut() {
                Some((last, lc)) if *last == m => {
                    *lc = noting(&mut overflowed, lc.checked_add(c), lc.wrapping_add(c))
                }
                _ => merged.push((m, c)),
            }
        }
        merged.retain(|(_, c)| *c != 0);
        Dim {
            constant,
            terms: merged,
            overflowed,
        }
    }

    pub fn add(&self, other: &Dim) -> Dim {
        let mut overflowed = self.overflowed || other.overflowed;
        let (a, b) = (self.constant, other.constant);
        let constant = noting(&mut overflowed, a.checked_add(b), a.wrapping_add(b));
        let terms = self.terms.iter().chain(&other.terms).cloned().collect();
        Dim::from_terms(constant, terms, overflowed)
    }

    pub fn neg(&self) -> Dim {
        self.scale(-1)
    }

    pub fn sub(&self, other: &Dim) -> Dim {
        self.add(&other.neg())
    }

    pub fn scale(&self, k: i64) -> Dim {
        let mut overflowed = self.overflowed;
        let mut times = |c: i64| noting(&mut overflowed, c.checked_mul(k), c.wrapping_mul(k));
        let constant = times(self.constant);
        let terms = self.terms.iter().map(|(m, c)| (m.clone(), times(*c))).collect();
        Dim::from_terms(constant, terms, overflowed)
    }

    pub fn mul(&self, other: &Dim) -> Dim {
        let mut overflowed = self.overflowed || other.overflowed;
        let mut times = |a: i64, b: i64| noting(&mut overflowed, a.checked_mul(b), a.wrapping_mul(b));
        let mut terms = Vec::new();
        for (m1, c1) in &self.terms {
            for (m2, c2) in &other.terms {
                let mut m: Monomial = m1.iter().chain(m2).copied().collect();
                m.sort();
                terms.push((m, times(*c1, *c2)));
            }
            terms.push((m1.clone(), times(*c1, other.constant)));
        }
        for (m2, c2) in &other.terms {
            terms.push((m2.clone(), times(*c2, self.constant)));
        }
        let constant = times(self.constant, other.constant);
        Dim::from_terms(constant, terms, overflowed)
    }

    /// The sum of several dims (`(+ …)`, 0 for none).
    pub fn sum<'a>(dims: impl IntoIterator<Item = &'a Dim>) -> Dim {
        dims.into_iter().fold(Dim::int(0), |acc, d| acc.add(d))
    }

    /// The product of several dims (`(* …)`, 1 for none).
    pub fn product<'a>(dims: impl IntoIterator<Item = &'a Dim>) -> Dim {
        dims.into_iter().fold(Dim::int(1), |acc, d| acc.mul(d))
    }

    /// Replaces variables; `None` keeps a variable as it is.
    pub fn subst(&self, f: &dyn Fn(DVar) -> Option<Dim>) -> Dim {
        let mut result = Dim::int(self.constant);
        result.overflowed = self.overflowed;
        for (m, c) in &self.terms {
            let mut term = Dim::int(*c);
            for v in m {
                let factor = f(*v).unwrap_or_else(|| Dim::var(*v));
                term = term.mul(&factor);
            }
            result = result.add(&term);
        }
        result
    }

    /// The value under a valuation of the variables (wrapping arithmetic).
    pub fn eval(&self, env: &dyn Fn(DVar) -> i64) -> i64 {
        let mut total = self.constant;
        for (m, c) in &self.terms {
            let mut term = *c;
            for v in m {
                term = term.wrapping_mul(env(*v));
            }
            total = total.wrapping_add(term);
        }
        total
    }

    /// The value under a valuation of the variables, unless a variable has
    /// none or the value does not fit 64 bits. Terms are summed in 128 bits,
    /// so that terms too large that cancel still give their sum.
    pub fn checked_eval(&self, env: &dyn Fn(DVar) -> Option<i64>) -> Result<i64, EvalError> {
        if self.overflowed {
            return Err(EvalError::Overflow);
        }
        let mut total = i128::from(self.constant);
        for (m, c) in &self.terms {
            let mut term = i128::from(*c);
            for v in m {
                let x = env(*v).ok_or(EvalError::Unbound)?;
                term = term.checked_mul(i128::from(x)).ok_or(EvalError::Overflow)?;
            }
            total = total.checked_add(term).ok_or(EvalError::Overflow)?;
        }
        i64::try_from(total).map_err(|_| EvalError::Overflow)
    }

    /// Is `self = other` for every valuation (of naturals)?
    pub fn equals(&self, other: &Dim) -> Truth {
        let diff = self.sub(other);
        if diff == Dim::int(0) {
            Truth::Yes
        } else if diff.never_zero() {
            Truth::No
        } else {
            Truth::Unknown
        }
    }

    /// True when the polynomial is nonzero for every valuation of naturals:
    /// a nonzero constant with every coefficient of the same sign.
    fn never_zero(&self) -> bool {
        let c = self.constant;
        (c > 0 && self.terms.iter().all(|(_, k)| *k > 0)) || (c < 0 && self.terms.iter().all(|(_, k)| *k < 0))
    }

    /// Writes the dim in Remora's syntax, naming variables with `name`.
    pub fn write(&self, out: &mut String, name: &dyn Fn(DVar) -> String) {
        let mut parts: Vec<String> = Vec::new();
        let mut negs: Vec<String> = Vec::new();
        for (m, c) in &self.terms {
            let vars: Vec<String> = m.iter().map(|v| name(*v)).collect();
            let mag = c.unsigned_abs();
            let body = match (mag, vars.len()) {
                (1, 1) => vars[0].clone(),
                (1, _) => format!("(* {})", vars.join(" ")),
                (k, _) => format!("(* {k} {})", vars.join(" ")),
            };
            if *c > 0 { parts.push(body) } else { negs.push(body) }
        }
        if self.constant > 0 || (parts.is_empty() && negs.is_empty()) {
            parts.insert(0, self.constant.to_string());
        } else if self.constant < 0 {
            negs.insert(0, self.constant.unsigned_abs().to_string());
        }
        let pos = match parts.len() {
            0 => "0".to_string(),
            1 => parts.remove(0),
            _ => format!("(+ {})", parts.join(" ")),
        };
        if negs.is_empty() {
            out.push_str(&pos);
        } else {
            out.push_str(&format!("(- {pos} {})", negs.join(" ")));
        }
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        self.write(&mut s, &|v| format!("$d{}", v.0));
        f.write_str(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(i: u32) -> Dim {
        Dim::var(DVar(i))
    }

    #[test]
    fn sums_and_products_normalise() {
        let a = v(0).add(&Dim::nat(1)).add(&v(0));
        assert_eq!(a, v(0).scale(2).add(&Dim::nat(1)));
        assert_eq!(v(0).mul(&v(1)), v(1).mul(&v(0)));
        assert_eq!(v(0).sub(&v(0)), Dim::nat(0));
        assert_eq!(Dim::nat(2).mul(&Dim::nat(3)).as_const(), Some(6));
    }

    #[test]
    fn decisions() {
        assert_eq!(v(0).add(&Dim::nat(1)).equals(&Dim::nat(1).add(&v(0))), Truth::Yes);
        assert_eq!(v(0).add(&Dim::nat(1)).equals(&v(0)), Truth::No);
        assert_eq!(v(0).add(&Dim::nat(1)).equals(&Dim::nat(0)), Truth::No);
        assert_eq!(v(0).equals(&v(1)), Truth::Unknown);
        assert_eq!(Dim::nat(3).equals(&Dim::nat(4)), Truth::No);
    }

    #[test]
    fn overflow_is_marked_and_checked() {
        let big = Dim::int(1 << 32);
        assert!(big.mul(&big).overflowed());
        assert!(!big.mul(&Dim::int(2)).overflowed());
        // Substituting a value into `$n * $n` marks it.
        let square = v(0).mul(&v(0));
        assert!(square.subst(&|_| Some(big.clone())).overflowed());
        assert!(Dim::int(i64::MIN).neg().overflowed());
        // Evaluation: too large is an error; terms that cancel are not.
        let env = |_: DVar| Some(1i64 << 32);
        assert_eq!(square.checked_eval(&env), Err(EvalError::Overflow));
        assert_eq!(square.sub(&v(0).mul(&v(1))).checked_eval(&env), Ok(0));
        assert_eq!(v(0).checked_eval(&|_| None), Err(EvalError::Unbound));
    }

    #[test]
    fn prints_in_remora_syntax() {
        assert_eq!(Dim::nat(1).add(&v(0)).to_string(), "(+ 1 $d0)");
        assert_eq!(v(0).sub(&Dim::nat(1)).to_string(), "(- $d0 1)");
        assert_eq!(v(0).mul(&v(1)).scale(2).to_string(), "(* 2 $d0 $d1)");
        assert_eq!(Dim::nat(0).to_string(), "0");
    }
}

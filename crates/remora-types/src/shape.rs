//! Shapes in normal form: a sequence of segments, each one axis (a [`Dim`]
//! in normal form) or a shape variable standing for any number of axes.
//! Concatenation and splicing are just sequence concatenation, so
//! `(++ [1] @s (dims $n))` and `[1 @s $n]` have one normal form.
//!
//! Decisions compare the two sequences from both ends, matching equal
//! dimensions and identical shape variables; what is left in the middle
//! decides `Yes`, `No` (rank or a dimension disagrees for every valuation)
//! or `Unknown`.

use crate::Truth;
use crate::dim::{DVar, Dim, EvalError};
use std::fmt;

/// A shape variable (`@s`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SVar(pub u32);

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Seg {
    /// One axis.
    Dim(Dim),
    /// Any number of axes.
    Var(SVar),
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Shape {
    segs: Vec<Seg>,
}

impl Shape {
    /// The scalar shape `[]`.
    pub fn scalar() -> Shape {
        Shape::default()
    }

    pub fn from_dims(dims: impl IntoIterator<Item = Dim>) -> Shape {
        Shape {
            segs: dims.into_iter().map(Seg::Dim).collect(),
        }
    }

    pub fn from_segs(segs: Vec<Seg>) -> Shape {
        Shape { segs }
    }

    pub fn var(v: SVar) -> Shape {
        Shape {
            segs: vec![Seg::Var(v)],
        }
    }

    pub fn segs(&self) -> &[Seg] {
        &self.segs
    }

    pub fn is_scalar(&self) -> bool {
        self.segs.is_empty()
    }

    pub fn concat(&self, other: &Shape) -> Shape {
        Shape {
            segs: self.segs.iter().chain(&other.segs).cloned().collect(),
        }
    }

    /// The dimensions, when the shape has no shape variable.
    pub fn dims(&self) -> Option<Vec<&Dim>> {
        self.segs
            .iter()
            .map(|s| match s {
                Seg::Dim(d) => Some(d),
                Seg::Var(_) => None,
            })
            .collect()
    }

    /// The rank, when the shape has no shape variable.
    pub fn rank(&self) -> Option<usize> {
        if self.has_vars() {
            None
        } else {
            Some(self.segs.len())
        }
    }

    /// The least rank any valuation can give (its number of axes).
    pub fn min_rank(&self) -> usize {
        self.segs.iter().filter(|s| matches!(s, Seg::Dim(_))).count()
    }

    pub fn has_vars(&self) -> bool {
        self.segs.iter().any(|s| matches!(s, Seg::Var(_)))
    }

    /// Replaces dimension and shape variables; `None` keeps a variable.
    pub fn subst(&self, fd: &dyn Fn(DVar) -> Option<Dim>, fs: &dyn Fn(SVar) -> Option<Shape>) -> Shape {
        let mut segs = Vec::with_capacity(self.segs.len());
        for s in &self.segs {
            match s {
                Seg::Dim(d) => segs.push(Seg::Dim(d.subst(fd))),
                Seg::Var(v) => match fs(*v) {
                    Some(shape) => segs.extend(shape.segs),
                    None => segs.push(Seg::Var(*v)),
                },
            }
        }
        Shape { segs }
    }

    /// The axes under a valuation of the variables.
    pub fn eval(&self, fd: &dyn Fn(DVar) -> i64, fs: &dyn Fn(SVar) -> Vec<i64>) -> Vec<i64> {
        let mut out = Vec::new();
        for s in &self.segs {
            match s {
                Seg::Dim(d) => out.push(d.eval(fd)),
                Seg::Var(v) => out.extend(fs(*v)),
            }
        }
        out
    }

    /// The axes under a valuation of the variables, unless a variable has
    /// no value or a dimension does not fit 64 bits.
    pub fn checked_eval(
        &self,
        fd: &dyn Fn(DVar) -> Option<i64>,
        fs: &dyn Fn(SVar) -> Option<Vec<i64>>,
    ) -> Result<Vec<i64>, EvalError> {
        let mut out = Vec::with_capacity(self.segs.len());
        for s in &self.segs {
            match s {
                Seg::Dim(d) => out.push(d.checked_eval(fd)?),
                Seg::Var(v) => out.extend(fs(*v).ok_or(EvalError::Unbound)?),
            }
        }
        Ok(out)
    }

    /// Whether some dimension overflowed 64 bits ([`Dim::overflowed`]).
    pub fn overflowed(&self) -> bool {
        self.segs
            .iter()
            .any(|s| matches!(s, Seg::Dim(d) if d.overflowed()))
    }

    /// Is `self = other` for every valuation?
    pub fn equals(&self, other: &Shape) -> Truth {
        let (a, b, early) = strip_common(&self.segs, &other.segs);
        if let Some(t) = early {
            return t;
        }
        if a.is_empty() && b.is_empty() {
            return Truth::Yes;
        }
        match (fixed(a), fixed(b)) {
            (Some(da), Some(db)) if da.len() != db.len() => Truth::No,
            (Some(da), Some(db)) => pairwise(&da, &db),
            (Some(da), None) if da.len() < min_rank(b) => Truth::No,
            (None, Some(db)) if db.len() < min_rank(a) => Truth::No,
            _ => Truth::Unknown,
        }
    }

    /// Is `self` a prefix of `other` (`other = self ++ c` for some `c`)?
    pub fn is_prefix_of(&self, other: &Shape) -> Truth {
        prefix(&self.segs, &other.segs)
    }

    /// Is `self` a suffix of `other` (`other = c ++ self` for some `c`)?
    pub fn is_suffix_of(&self, other: &Shape) -> Truth {
        let a: Vec<Seg> = self.segs.iter().rev().cloned().collect();
        let b: Vec<Seg> = other.segs.iter().rev().cloned().collect();
        prefix(&a, &b)
    }

    /// The `frame` with `self = frame ++ suffix`, when that can be proved;
    /// else whether `suffix` is a suffix at all (`No` or `Unknown`).
    pub fn strip_suffix(&self, suffix: &Shape) -> Result<Shape, Truth> {
        let mut a = self.segs.as_slice();
        let mut s = suffix.segs.as_slice();
        while let (Some(x), Some(y)) = (a.last(), s.last()) {
            if same(x, y) != Truth::Yes {
                break;
            }
            a = &a[..a.len() - 1];
            s = &s[..s.len() - 1];
        }
        if s.is_empty() {
            return Ok(Shape { segs: a.to_vec() });
        }
        Err(match suffix.is_suffix_of(self) {
            Truth::Yes => Truth::Unknown,
            t => t,
        })
    }

    /// The `rest` with `self = prefix ++ rest`, when that can be proved.
    pub fn strip_prefix(&self, prefix_shape: &Shape) -> Result<Shape, Truth> {
        let mut a = self.segs.as_slice();
        let mut p = prefix_shape.segs.as_slice();
        while let (Some(x), Some(y)) = (a.first(), p.first()) {
            if same(x, y) != Truth::Yes {
                break;
            }
            a = &a[1..];
            p = &p[1..];
        }
        if p.is_empty() {
            return Ok(Shape { segs: a.to_vec() });
        }
        Err(match prefix_shape.is_prefix_of(self) {
            Truth::Yes => Truth::Unknown,
            t => t,
        })
    }

    /// Writes the segments separated by spaces (no brackets), as they appear
    /// spliced into `[T …]`.
    pub fn write_segs(
        &self,
        out: &mut String,
        dname: &dyn Fn(DVar) -> String,
        sname: &dyn Fn(SVar) -> String,
    ) {
        for (i, s) in self.segs.iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            match s {
                Seg::Dim(d) => d.write(out, dname),
                Seg::Var(v) => out.push_str(&sname(*v)),
            }
        }
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::from("[");
        self.write_segs(&mut s, &|v| format!("$d{}", v.0), &|v| format!("@s{}", v.0));
        s.push(']');
        f.write_str(&s)
    }
}

/// Whether two segments are equal for every valuation.
fn same(a: &Seg, b: &Seg) -> Truth {
    match (a, b) {
        (Seg::Dim(x), Seg::Dim(y)) => x.equals(y),
        (Seg::Var(x), Seg::Var(y)) if x == y => Truth::Yes,
        _ => Truth::Unknown,
    }
}

/// Strips equal segments from both ends. A pair of dimensions that differ
/// for every valuation at an end where everything before matched is a
/// definite `No` (returned as the third component).
fn strip_common<'a>(mut a: &'a [Seg], mut b: &'a [Seg]) -> (&'a [Seg], &'a [Seg], Option<Truth>) {
    while let (Some(x), Some(y)) = (a.first(), b.first()) {
        match same(x, y) {
            Truth::Yes => {
                a = &a[1..];
                b = &b[1..];
            }
            Truth::No => return (a, b, Some(Truth::No)),
            Truth::Unknown => break,
        }
    }
    while let (Some(x), Some(y)) = (a.last(), b.last()) {
        match same(x, y) {
            Truth::Yes => {
                a = &a[..a.len() - 1];
                b = &b[..b.len() - 1];
            }
            Truth::No => return (a, b, Some(Truth::No)),
            Truth::Unknown => break,
        }
    }
    (a, b, None)
}

fn prefix(a: &[Seg], b: &[Seg]) -> Truth {
    let mut a = a;
    let mut b = b;
    while let (Some(x), Some(y)) = (a.first(), b.first()) {
        match same(x, y) {
            Truth::Yes => {
                a = &a[1..];
                b = &b[1..];
            }
            Truth::No => return Truth::No,
            Truth::Unknown => break,
        }
    }
    if a.is_empty() {
        return Truth::Yes;
    }
    match (fixed(a), fixed(b)) {
        (Some(da), Some(db)) if da.len() > db.len() => Truth::No,
        (Some(da), Some(db)) => pairwise(&da, &db[..da.len()]),
        (_, Some(db)) if min_rank(a) > db.len() => Truth::No,
        _ => Truth::Unknown,
    }
}

fn fixed(segs: &[Seg]) -> Option<Vec<&Dim>> {
    segs.iter()
        .map(|s| match s {
            Seg::Dim(d) => Some(d),
            Seg::Var(_) => None,
        })
        .collect()
}

fn min_rank(segs: &[Seg]) -> usize {
    segs.iter().filter(|s| matches!(s, Seg::Dim(_))).count()
}

fn pairwise(a: &[&Dim], b: &[&Dim]) -> Truth {
    a.iter().zip(b).fold(Truth::Yes, |t, (x, y)| t.and(x.equals(y)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(n: u64) -> Seg {
        Seg::Dim(Dim::nat(n))
    }
    fn dv(i: u32) -> Seg {
        Seg::Dim(Dim::var(DVar(i)))
    }
    fn sv(i: u32) -> Seg {
        Seg::Var(SVar(i))
    }
    fn sh(segs: Vec<Seg>) -> Shape {
        Shape::from_segs(segs)
    }

    #[test]
    fn equality() {
        assert_eq!(sh(vec![d(3), sv(0)]).equals(&sh(vec![d(3), sv(0)])), Truth::Yes);
        assert_eq!(sh(vec![d(3)]).equals(&sh(vec![d(4)])), Truth::No);
        assert_eq!(sh(vec![d(3)]).equals(&sh(vec![d(3), d(1)])), Truth::No);
        assert_eq!(sh(vec![]).equals(&sh(vec![sv(0), d(1)])), Truth::No);
        assert_eq!(sh(vec![sv(0)]).equals(&sh(vec![sv(1)])), Truth::Unknown);
        assert_eq!(sh(vec![dv(0)]).equals(&sh(vec![d(2)])), Truth::Unknown);
    }

    #[test]
    fn prefix_and_suffix() {
        let frame = sh(vec![d(2)]);
        let arg = sh(vec![d(2), d(3)]);
        assert_eq!(frame.is_prefix_of(&arg), Truth::Yes);
        assert_eq!(arg.is_prefix_of(&frame), Truth::No);
        assert_eq!(sh(vec![d(3)]).is_suffix_of(&arg), Truth::Yes);
        assert_eq!(sh(vec![d(2)]).is_suffix_of(&arg), Truth::No);
        assert_eq!(sh(vec![sv(0)]).is_suffix_of(&sh(vec![d(1), sv(0)])), Truth::Yes);
        assert_eq!(sh(vec![]).is_prefix_of(&sh(vec![sv(0)])), Truth::Yes);
        assert_eq!(sh(vec![d(1)]).is_prefix_of(&sh(vec![sv(0)])), Truth::Unknown);
    }

    #[test]
    fn frames_come_off_the_front() {
        // [&t (+ 1 $d) @s] against an argument [Int 5 2 3]: cell [2 3]
        let arg = sh(vec![d(4), d(5), d(2), d(3)]);
        let cell = sh(vec![d(2), d(3)]);
        assert_eq!(arg.strip_suffix(&cell), Ok(sh(vec![d(4), d(5)])));
        assert_eq!(arg.strip_suffix(&sh(vec![d(7)])), Err(Truth::No));
        assert_eq!(
            sh(vec![dv(0), sv(1)]).strip_suffix(&sh(vec![sv(1)])),
            Ok(sh(vec![dv(0)]))
        );
        assert_eq!(arg.strip_prefix(&sh(vec![d(4)])), Ok(sh(vec![d(5), d(2), d(3)])));
    }

    #[test]
    fn substitution_splices_shapes() {
        let s = sh(vec![d(1), sv(0), dv(0)]);
        let out = s.subst(&|_| Some(Dim::nat(7)), &|_| Some(sh(vec![d(2), d(3)])));
        assert_eq!(out, sh(vec![d(1), d(2), d(3), d(7)]));
    }
}

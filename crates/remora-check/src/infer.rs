//! Inference of instantiations (extensions.md §1.1–§1.3): the solver.
//!
//! A polymorphic function applied without (all of) its instantiation gets
//! *unknowns* for the missing type and index arguments. Each argument's
//! type is then matched against its parameter type: the argument's shape
//! splits into a frame and a cell in every way that can work, and the cell
//! must match the parameter's cell, which solves unknowns (an atom type
//! unknown takes the argument's atom; a dimension unknown is solved from a
//! linear equation such as `(+ 1 $d) = 4`; a shape unknown takes any run of
//! axes). The candidates over a whole application spine `(f a1 … ak)` are
//! searched depth first; among those whose frames agree, the one with the
//! smallest principal frame wins (the fewest implicit lifts), and two
//! different instantiations left is an ambiguity.
//!
//! Arguments are typed before their function (local constraints, as in
//! Slepak's proposal), so the targets of matching have no unknowns.

use remora_types::frame::principal_frame;
use remora_types::{Atom, DVar, Dim, SVar, Seg, Shape, TVar, Truth, Type};
use std::collections::{HashMap, HashSet};

/// The unknowns of one application spine.
#[derive(Clone, Debug, Default)]
pub struct Unknowns {
    pub types: HashSet<TVar>,
    pub dims: HashSet<DVar>,
    pub shapes: HashSet<SVar>,
}

/// Values found for unknowns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Solution {
    pub types: HashMap<TVar, Atom>,
    pub dims: HashMap<DVar, Dim>,
    pub shapes: HashMap<SVar, Shape>,
    /// Dimension equations `p = a` met with more than one unknown in `p`
    /// (`(+ $w $k) = 5`): solved once the other arguments have given all
    /// but one of them a value, so that the order of the parameters does
    /// not matter (see [`Unknowns::settle`]).
    pub deferred: Vec<(Dim, Dim)>,
}

/// How many rounds of substitution resolve a solution whose values mention
/// other unknowns (a reranked argument's frame inside a shape).
const ROUNDS: usize = 8;

impl Solution {
    pub fn dim(&self, d: &Dim) -> Dim {
        let mut cur = d.clone();
        for _ in 0..ROUNDS {
            let next = cur.subst(&|v| self.dims.get(&v).cloned());
            if next == cur {
                break;
            }
            cur = next;
        }
        cur
    }

    pub fn shape(&self, s: &Shape) -> Shape {
        let mut cur = s.clone();
        for _ in 0..ROUNDS {
            let next = cur.subst(&|v| self.dims.get(&v).cloned(), &|v| self.shapes.get(&v).cloned());
            if next == cur {
                break;
            }
            cur = next;
        }
        cur
    }

    pub fn ty(&self, t: &Type) -> Type {
        Type {
            atom: self.atom(&t.atom),
            shape: self.shape(&t.shape),
        }
    }

    pub fn atom(&self, a: &Atom) -> Atom {
        match a {
            Atom::Var(v) => self.types.get(v).cloned().unwrap_or_else(|| a.clone()),
            _ => a.map_types(&|t| self.ty(t)),
        }
    }
}

/// One way an application spine can type-check: the solution and each
/// argument's frame.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub solution: Solution,
    pub frames: Vec<Shape>,
    pub principal: Shape,
}

impl Unknowns {
    fn mentions_atom(&self, a: &Atom) -> bool {
        match a {
            Atom::Var(v) => self.types.contains(v),
            Atom::Int | Atom::Bool | Atom::Float => false,
            Atom::Arrow(p, r) => self.mentions(p) || self.mentions(r),
            Atom::Forall(_, b) | Atom::Pi(_, b) | Atom::Sigma(_, b) => self.mentions(b),
            Atom::Record(fs) => fs.iter().any(|(_, t)| self.mentions(t)),
        }
    }

    /// Whether an unknown occurs in `t`.
    pub fn mentions(&self, t: &Type) -> bool {
        self.mentions_atom(&t.atom)
            || t.shape.segs().iter().any(|s| match s {
                Seg::Dim(d) => d.vars().iter().any(|v| self.dims.contains(v)),
                Seg::Var(v) => self.shapes.contains(v),
            })
    }

    /// Solves `p = a` for the one unknown of `p`, when `p` is linear in it.
    fn match_dim(&self, p: &Dim, a: &Dim, sol: &Solution) -> Option<Solution> {
        let p = sol.dim(p);
        let a = &sol.dim(a);
        let free: Vec<DVar> = p.vars().into_iter().filter(|v| self.dims.contains(v)).collect();
        // An unknown on the argument's side (a rank parameter's
        // dimension): it takes the parameter's.
        if let [w] = a.vars().as_slice()
            && self.dims.contains(w)
            && *a == Dim::var(*w)
            && free.is_empty()
            && !p.vars().contains(w)
        {
            let mut s = sol.clone();
            s.dims.insert(*w, p);
            return Some(s);
        }
        match free.as_slice() {
            [] => (p.equals(a) == Truth::Yes).then(|| sol.clone()),
            [v] => {
                let mut coefficient = 0;
                for (monomial, c) in p.terms() {
                    if monomial.as_slice() == [*v] {
                        coefficient = *c;
                    } else if monomial.contains(v) {
                        return None;
                    }
                }
                let rest = p.sub(&Dim::var(*v).scale(coefficient));
                let target = a.sub(&rest);
                let value = match coefficient {
                    1 => target,
                    -1 => target.neg(),
                    c => {
                        let n = target.as_const()?;
                        (c != 0 && n % c == 0).then(|| Dim::int(n / c))?
                    }
                };
                if value.as_const().is_some_and(|n| n < 0) {
                    return None;
                }
                let mut s = sol.clone();
                s.dims.insert(*v, value);
                Some(s)
            }
            _ => {
                let mut s = sol.clone();
                s.deferred.push((p, a.clone()));
                Some(s)
            }
        }
    }

    /// `sol` with its deferred equations solved, as far as its values now
    /// allow: `None` when one is false, or, for a `complete` spine, when one
    /// is left with more than one unknown (one length cannot solve it).
    pub fn settle(&self, mut sol: Solution, complete: bool) -> Option<Solution> {
        loop {
            let pending = std::mem::take(&mut sol.deferred);
            let before = pending.len();
            if before == 0 {
                return Some(sol);
            }
            for (p, a) in pending {
                sol = self.match_dim(&p, &a, &sol)?;
            }
            if sol.deferred.len() >= before {
                return (!complete).then_some(sol);
            }
        }
    }

    /// Every way the segments `p` (with unknowns) can equal `a`.
    fn match_segs(&self, p: &[Seg], a: &[Seg], sol: Solution, out: &mut Vec<Solution>) {
        // An unknown on the argument's side (a reranked function's frame):
        // it takes a run of the parameter's axes.
        if let Some((Seg::Var(w), a_rest)) = a.split_first()
            && self.shapes.contains(w)
            && !matches!(p.first(), Some(Seg::Var(v)) if self.shapes.contains(v))
        {
            match sol.shapes.get(w) {
                Some(bound) => {
                    let mut segs = sol.shape(bound).segs().to_vec();
                    segs.extend_from_slice(a_rest);
                    self.match_segs(p, &segs, sol, out);
                }
                None => {
                    for k in 0..=p.len() {
                        let run = sol.shape(&Shape::from_segs(p[..k].to_vec()));
                        if run.segs().contains(&Seg::Var(*w))
                            || p[..k]
                                .iter()
                                .any(|s| matches!(s, Seg::Var(v) if self.shapes.contains(v)))
                        {
                            break;
                        }
                        let mut s = sol.clone();
                        s.shapes.insert(*w, run);
                        self.match_segs(&p[k..], a_rest, s, out);
                    }
                }
            }
            return;
        }
        let Some((first, rest)) = p.split_first() else {
            if a.is_empty() {
                out.push(sol);
            }
            return;
        };
        match first {
            Seg::Dim(dp) => {
                if let Some((Seg::Dim(da), a_rest)) = a.split_first()
                    && let Some(s) = self.match_dim(dp, da, &sol)
                {
                    self.match_segs(rest, a_rest, s, out);
                }
            }
            Seg::Var(v) if self.shapes.contains(v) => match sol.shapes.get(v) {
                Some(bound) => {
                    let mut segs = sol.shape(bound).segs().to_vec();
                    segs.extend_from_slice(rest);
                    self.match_segs(&segs, a, sol, out);
                }
                None => {
                    // The same unknown on both sides (a reranked function's
                    // frame meeting itself) matches itself.
                    if let Some((Seg::Var(w), a_rest)) = a.split_first()
                        && w == v
                    {
                        self.match_segs(rest, a_rest, sol, out);
                        return;
                    }
                    // With no other unknown shape on either side, each
                    // remaining segment takes one of the argument's: the
                    // unknown takes all but the last `rest.len()` (one
                    // split tried, not every one: a rank-3000 argument is
                    // not cubic work).
                    let unknown = |s: &Seg| matches!(s, Seg::Var(w) if self.shapes.contains(w));
                    let splits = if rest.iter().any(unknown) || a.iter().any(unknown) {
                        0..=a.len()
                    } else {
                        let Some(k) = a.len().checked_sub(rest.len()) else {
                            return;
                        };
                        k..=k
                    };
                    for k in splits {
                        if a[..k].contains(&Seg::Var(*v)) {
                            break;
                        }
                        let mut s = sol.clone();
                        s.shapes.insert(*v, Shape::from_segs(a[..k].to_vec()));
                        self.match_segs(rest, &a[k..], s, out);
                    }
                }
            },
            Seg::Var(v) => {
                if let Some((Seg::Var(w), a_rest)) = a.split_first()
                    && w == v
                {
                    self.match_segs(rest, a_rest, sol, out);
                }
            }
        }
    }

    /// Every way the atom type `p` (with unknowns) can equal `a`.
    fn match_atom(&self, p: &Atom, a: &Atom, sol: Solution) -> Vec<Solution> {
        // An unknown on the argument's side (a rank parameter's element
        // type): it takes the parameter's atom type.
        if let Atom::Var(w) = a
            && self.types.contains(w)
            && !matches!(p, Atom::Var(v) if self.types.contains(v))
        {
            return match sol.types.get(w).cloned() {
                Some(bound) => self.match_atom(p, &bound, sol),
                None => {
                    let p = sol.atom(p);
                    if self.mentions_atom(&p) {
                        return Vec::new();
                    }
                    let mut s = sol;
                    s.types.insert(*w, p);
                    vec![s]
                }
            };
        }
        match p {
            Atom::Var(v) if self.types.contains(v) => match sol.types.get(v).cloned() {
                Some(bound) => self.match_atom(&bound, a, sol),
                None => {
                    let mut s = sol;
                    s.types.insert(*v, a.clone());
                    vec![s]
                }
            },
            Atom::Arrow(pp, pr) => match a {
                Atom::Arrow(ap, ar) => self
                    .match_type(pp, ap, sol)
                    .into_iter()
                    .flat_map(|s| self.match_type(pr, ar, s))
                    .collect(),
                _ => Vec::new(),
            },
            Atom::Record(pf) => match a {
                Atom::Record(af) if af.len() == pf.len() => {
                    let mut sols = vec![sol];
                    for ((pn, pt), (an, at)) in pf.iter().zip(af.iter()) {
                        if pn != an {
                            return Vec::new();
                        }
                        sols = sols
                            .into_iter()
                            .flat_map(|s| self.match_type(pt, at, s))
                            .collect();
                    }
                    sols
                }
                _ => Vec::new(),
            },
            _ => {
                let p = sol.atom(p);
                if self.mentions_atom(&p) {
                    return Vec::new();
                }
                if p.equals(a) == Truth::Yes {
                    vec![sol]
                } else {
                    Vec::new()
                }
            }
        }
    }

    /// Whether the atom type `p` (with unknowns) can be `a`'s under `sol`.
    pub fn atoms_fit(&self, p: &Atom, a: &Atom, sol: &Solution) -> bool {
        !self.match_atom(p, a, sol.clone()).is_empty()
    }

    /// Every way the array type `p` can equal `a` exactly.
    pub fn match_type(&self, p: &Type, a: &Type, sol: Solution) -> Vec<Solution> {
        let mut out = Vec::new();
        for s in self.match_atom(&p.atom, &a.atom, sol) {
            self.match_segs(p.shape.segs(), a.shape.segs(), s, &mut out);
        }
        out
    }

    /// Every way an argument of type `arg` fits a parameter `param`: its
    /// shape split into a frame and a cell that equals the parameter's.
    fn match_arg(&self, param: &Type, arg: &Type, sol: Solution) -> Vec<(Solution, Shape)> {
        let segs = arg.shape.segs();
        let mut out = Vec::new();
        for s in self.match_atom(&param.atom, &arg.atom, sol) {
            for k in 0..=segs.len() {
                let mut found = Vec::new();
                self.match_segs(param.shape.segs(), &segs[k..], s.clone(), &mut found);
                let frame = Shape::from_segs(segs[..k].to_vec());
                out.extend(found.into_iter().map(|f| (f, frame.clone())));
            }
        }
        out
    }

    /// Every candidate for applying a function of type `fun` (with
    /// unknowns) to arguments of the given types, in order. An argument
    /// with an `extension` unknown `E` is a function that may also be
    /// reranked (§1.7): its parameter and result cells all extended by the
    /// frame `E`. An argument that is `None` is a lambda without parameter
    /// types: it fits any parameter, in an empty frame, and is typed
    /// afterwards against the parameter's solved type (extensions.md §1.5).
    pub fn spine(
        &self,
        fun: &Type,
        args: &[Option<Type>],
        extensions: &[Option<SVar>],
        sol: Solution,
    ) -> Vec<Candidate> {
        self.spine_with(fun, args, extensions, sol, true)
    }

    /// `spine` of the first arguments of a longer spine: an equation the
    /// later arguments may solve is left unsolved.
    pub fn spine_prefix(
        &self,
        fun: &Type,
        args: &[Option<Type>],
        extensions: &[Option<SVar>],
        sol: Solution,
    ) -> Vec<Candidate> {
        self.spine_with(fun, args, extensions, sol, false)
    }

    fn spine_with(
        &self,
        fun: &Type,
        args: &[Option<Type>],
        extensions: &[Option<SVar>],
        sol: Solution,
        complete: bool,
    ) -> Vec<Candidate> {
        let mut variants = Vec::with_capacity(args.len());
        for (k, a) in args.iter().enumerate() {
            let Some(a) = a else {
                // A lambda whose parameter types come from this application.
                variants.push(Vec::new());
                continue;
            };
            let mut v = vec![a.clone()];
            if let Some(Some(e)) = extensions.get(k)
                && let Some(x) = extend(a, *e)
            {
                v.push(x);
            }
            variants.push(v);
        }
        let mut out = Vec::new();
        self.spine_from(fun, &variants, sol, Vec::new(), complete, &mut out);
        out
    }

    fn spine_from(
        &self,
        fun: &Type,
        args: &[Vec<Type>],
        sol: Solution,
        frames: Vec<Shape>,
        complete: bool,
        out: &mut Vec<Candidate>,
    ) {
        let Some((variants, rest)) = args.split_first() else {
            let Some(sol) = self.settle(sol, complete) else {
                return;
            };
            let mut principal = Shape::scalar();
            for f in &frames {
                match principal_frame(&principal, f) {
                    Ok(p) => principal = p,
                    Err(_) => return,
                }
            }
            out.push(Candidate {
                solution: sol,
                frames,
                principal,
            });
            return;
        };
        let Atom::Arrow(param, result) = &fun.atom else {
            return;
        };
        if !fun.shape.is_scalar() {
            return;
        }
        if variants.is_empty() {
            let mut frames = frames;
            frames.push(Shape::scalar());
            self.spine_from(result, rest, sol, frames, complete, out);
            return;
        }
        for arg in variants {
            for (s, frame) in self.match_arg(param, arg, sol.clone()) {
                let mut frames = frames.clone();
                frames.push(frame);
                self.spine_from(result, rest, s, frames, complete, out);
            }
        }
    }
}

/// A scalar function type with its parameter and result cells all extended
/// by the frame `e`: the type of its η-expansion over cells `e` larger.
pub fn extend(t: &Type, e: SVar) -> Option<Type> {
    fn go(t: &Type, e: &Shape) -> Type {
        match &t.atom {
            Atom::Arrow(p, r) if t.shape.is_scalar() => Type::arrow(p.lift(e), go(r, e)),
            _ => t.lift(e),
        }
    }
    match &t.atom {
        Atom::Arrow(..) if t.shape.is_scalar() => Some(go(t, &Shape::var(e))),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ints(dims: &[u64]) -> Type {
        Type::array(Atom::Int, Shape::from_dims(dims.iter().map(|d| Dim::nat(*d))))
    }

    /// `[&t (+ 1 $d) @s]` with all three unknown.
    fn head_param() -> (Unknowns, Type, TVar, DVar, SVar) {
        let (t, d, s) = (TVar(0), DVar(0), SVar(0));
        let mut u = Unknowns::default();
        u.types.insert(t);
        u.dims.insert(d);
        u.shapes.insert(s);
        let shape = Shape::from_segs(vec![Seg::Dim(Dim::int(1).add(&Dim::var(d))), Seg::Var(s)]);
        (u, Type::array(Atom::Var(t), shape), t, d, s)
    }

    #[test]
    fn a_whole_argument_is_one_cell_when_it_can_be() {
        let (u, param, t, d, s) = head_param();
        let fun = Type::arrow(param, Type::scalar(Atom::Int));
        let cands = u.spine(&fun, &[Some(ints(&[2, 3]))], &[None], Solution::default());
        let best = cands.iter().min_by_key(|c| c.principal.min_rank()).unwrap();
        assert!(best.principal.is_scalar());
        assert_eq!(best.solution.types[&t], Atom::Int);
        assert_eq!(best.solution.dims[&d], Dim::int(1));
        assert_eq!(best.solution.shapes[&s], Shape::from_dims([Dim::int(3)]));
        // Other splits exist (frame [2], cell [3]) but have larger frames.
        assert!(cands.iter().any(|c| c.principal.min_rank() == 1));
    }

    #[test]
    fn dimension_equations_are_solved() {
        let (u, _, _, d, _) = head_param();
        let p = Dim::int(1).add(&Dim::var(d));
        let s = u.match_dim(&p, &Dim::int(4), &Solution::default()).unwrap();
        assert_eq!(s.dims[&d], Dim::int(3));
        assert!(u.match_dim(&p, &Dim::int(0), &Solution::default()).is_none());
    }
}

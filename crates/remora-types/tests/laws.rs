//! Laws of the index normal forms, checked on random expressions: the normal
//! form means what the expression means, is idempotent and canonical,
//! commutes with substitution, and every `Yes`/`No` the decisions give holds
//! on random valuations.

use proptest::prelude::*;
use remora_types::{DVar, Dim, SVar, Seg, Shape, Truth};

#[derive(Clone, Debug)]
enum Raw {
    Nat(u64),
    Var(u32),
    Add(Vec<Raw>),
    Sub(Vec<Raw>),
    Mul(Vec<Raw>),
}

const DVARS: u32 = 4;
const SVARS: u32 = 3;

fn raw() -> impl Strategy<Value = Raw> {
    let leaf = prop_oneof![(0u64..6).prop_map(Raw::Nat), (0..DVARS).prop_map(Raw::Var)];
    leaf.prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Raw::Add),
            prop::collection::vec(inner.clone(), 1..3).prop_map(Raw::Sub),
            prop::collection::vec(inner, 0..3).prop_map(Raw::Mul),
        ]
    })
}

/// `(- a b c)` is `a - b - c`, as a left fold; `(-)` is 0.
fn norm(r: &Raw) -> Dim {
    match r {
        Raw::Nat(n) => Dim::nat(*n),
        Raw::Var(v) => Dim::var(DVar(*v)),
        Raw::Add(xs) => xs.iter().fold(Dim::int(0), |a, x| a.add(&norm(x))),
        Raw::Mul(xs) => xs.iter().fold(Dim::int(1), |a, x| a.mul(&norm(x))),
        Raw::Sub(xs) => match xs.split_first() {
            None => Dim::int(0),
            Some((first, rest)) => rest.iter().fold(norm(first), |a, x| a.sub(&norm(x))),
        },
    }
}

fn eval_raw(r: &Raw, env: &[i64]) -> i64 {
    match r {
        Raw::Nat(n) => *n as i64,
        Raw::Var(v) => env[*v as usize],
        Raw::Add(xs) => xs.iter().fold(0i64, |a, x| a.wrapping_add(eval_raw(x, env))),
        Raw::Mul(xs) => xs.iter().fold(1i64, |a, x| a.wrapping_mul(eval_raw(x, env))),
        Raw::Sub(xs) => match xs.split_first() {
            None => 0,
            Some((first, rest)) => rest
                .iter()
                .fold(eval_raw(first, env), |a, x| a.wrapping_sub(eval_raw(x, env))),
        },
    }
}

/// The same polynomial written differently: children reversed, subtraction
/// as addition of a negation.
fn rearrange(r: &Raw) -> Raw {
    match r {
        Raw::Nat(_) | Raw::Var(_) => r.clone(),
        Raw::Add(xs) => Raw::Add(xs.iter().rev().map(rearrange).collect()),
        Raw::Mul(xs) => Raw::Mul(xs.iter().rev().map(rearrange).collect()),
        Raw::Sub(xs) => match xs.split_first() {
            None => Raw::Nat(0),
            Some((first, rest)) => {
                let mut parts = vec![rearrange(first)];
                parts.extend(rest.iter().map(|x| Raw::Sub(vec![Raw::Nat(0), rearrange(x)])));
                Raw::Add(parts)
            }
        },
    }
}

/// A normal form written back as an expression.
fn to_raw(d: &Dim) -> Raw {
    let mut parts = vec![signed(d.constant(), Raw::Nat(1))];
    for (m, c) in d.terms() {
        parts.push(signed(*c, Raw::Mul(m.iter().map(|v| Raw::Var(v.0)).collect())));
    }
    Raw::Add(parts)
}

fn signed(c: i64, term: Raw) -> Raw {
    let mag = Raw::Mul(vec![Raw::Nat(c.unsigned_abs()), term]);
    if c < 0 {
        Raw::Sub(vec![Raw::Nat(0), mag])
    } else {
        mag
    }
}

fn subst_raw(r: &Raw, sigma: &[Raw]) -> Raw {
    match r {
        Raw::Nat(_) => r.clone(),
        Raw::Var(v) => sigma[*v as usize].clone(),
        Raw::Add(xs) => Raw::Add(xs.iter().map(|x| subst_raw(x, sigma)).collect()),
        Raw::Sub(xs) => Raw::Sub(xs.iter().map(|x| subst_raw(x, sigma)).collect()),
        Raw::Mul(xs) => Raw::Mul(xs.iter().map(|x| subst_raw(x, sigma)).collect()),
    }
}

fn valuation() -> impl Strategy<Value = Vec<i64>> {
    prop::collection::vec(0i64..8, DVARS as usize)
}

fn shape_valuation() -> impl Strategy<Value = Vec<Vec<i64>>> {
    prop::collection::vec(prop::collection::vec(0i64..4, 0..3), SVARS as usize)
}

fn dims_of(env: &[i64]) -> impl Fn(DVar) -> i64 + '_ {
    move |v| env[v.0 as usize]
}

fn seg() -> impl Strategy<Value = Seg> {
    prop_oneof![
        3 => (0u64..4).prop_map(|n| Seg::Dim(Dim::nat(n))),
        2 => (0..DVARS).prop_map(|v| Seg::Dim(Dim::var(DVar(v)))),
        1 => (0..DVARS).prop_map(|v| Seg::Dim(Dim::var(DVar(v)).add(&Dim::nat(1)))),
        2 => (0..SVARS).prop_map(|v| Seg::Var(SVar(v))),
    ]
}

fn shape() -> impl Strategy<Value = Shape> {
    prop::collection::vec(seg(), 0..5).prop_map(Shape::from_segs)
}

/// Shapes built to share a part, so that Yes answers come up often.
fn related_shapes() -> impl Strategy<Value = (Shape, Shape)> {
    (shape(), shape(), shape()).prop_map(|(a, b, c)| (a.concat(&b), b.concat(&c)))
}

fn eval_shape(s: &Shape, env: &[i64], senv: &[Vec<i64>]) -> Vec<i64> {
    s.eval(&dims_of(env), &|v| senv[v.0 as usize].clone())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn normal_form_means_the_expression(r in raw(), env in valuation()) {
        prop_assert_eq!(norm(&r).eval(&dims_of(&env)), eval_raw(&r, &env));
    }

    #[test]
    fn normal_form_is_idempotent(r in raw()) {
        let n = norm(&r);
        prop_assert_eq!(norm(&to_raw(&n)), n);
    }

    #[test]
    fn normal_form_is_canonical(r in raw()) {
        prop_assert_eq!(norm(&rearrange(&r)), norm(&r));
    }

    #[test]
    fn substitution_commutes_with_normalisation(
        r in raw(),
        sigma in prop::collection::vec(raw(), DVARS as usize),
    ) {
        let direct = norm(&subst_raw(&r, &sigma));
        let via = norm(&r).subst(&|v| Some(norm(&sigma[v.0 as usize])));
        prop_assert_eq!(direct, via);
    }

    #[test]
    fn dim_decisions_hold_on_valuations(a in raw(), b in raw(), env in valuation()) {
        let (x, y) = (norm(&a), norm(&b));
        let (vx, vy) = (x.eval(&dims_of(&env)), y.eval(&dims_of(&env)));
        match x.equals(&y) {
            Truth::Yes => prop_assert_eq!(vx, vy),
            Truth::No => prop_assert_ne!(vx, vy),
            Truth::Unknown => {}
        }
        prop_assert_eq!(x.equals(&x), Truth::Yes);
    }

    #[test]
    fn shape_equality_holds_on_valuations(
        (a, b) in related_shapes(), env in valuation(), senv in shape_valuation()
    ) {
        let (va, vb) = (eval_shape(&a, &env, &senv), eval_shape(&b, &env, &senv));
        match a.equals(&b) {
            Truth::Yes => prop_assert_eq!(va, vb),
            Truth::No => prop_assert_ne!(va, vb),
            Truth::Unknown => {}
        }
        prop_assert_eq!(a.equals(&a), Truth::Yes);
    }

    #[test]
    fn prefix_and_suffix_hold_on_valuations(
        (a, b) in related_shapes(), env in valuation(), senv in shape_valuation()
    ) {
        let (va, vb) = (eval_shape(&a, &env, &senv), eval_shape(&b, &env, &senv));
        match a.is_prefix_of(&b) {
            Truth::Yes => prop_assert!(vb.starts_with(&va)),
            Truth::No => prop_assert!(!vb.starts_with(&va)),
            Truth::Unknown => {}
        }
        match a.is_suffix_of(&b) {
            Truth::Yes => prop_assert!(vb.ends_with(&va)),
            Truth::No => prop_assert!(!vb.ends_with(&va)),
            Truth::Unknown => {}
        }
        if let Ok(frame) = b.strip_suffix(&a) {
            let mut joined = eval_shape(&frame, &env, &senv);
            joined.extend(&va);
            prop_assert_eq!(joined, vb.clone());
        }
        if let Ok(rest) = b.strip_prefix(&a) {
            let mut joined = va.clone();
            joined.extend(eval_shape(&rest, &env, &senv));
            prop_assert_eq!(joined, vb);
        }
    }

    #[test]
    fn shape_substitution_means_evaluation(
        s in shape(),
        dsub in prop::collection::vec(raw(), DVARS as usize),
        ssub in prop::collection::vec(shape(), SVARS as usize),
        env in valuation(),
        senv in shape_valuation(),
    ) {
        let substituted = s.subst(
            &|v| Some(norm(&dsub[v.0 as usize])),
            &|v| Some(ssub[v.0 as usize].clone()),
        );
        // Evaluating the substituted shape = evaluating the original under
        // the valuation the substitution induces.
        let denv: Vec<i64> = dsub.iter().map(|r| eval_raw(r, &env)).collect();
        let sv: Vec<Vec<i64>> = ssub.iter().map(|x| eval_shape(x, &env, &senv)).collect();
        prop_assert_eq!(eval_shape(&substituted, &env, &senv), eval_shape(&s, &denv, &sv));
    }
}

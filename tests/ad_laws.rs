//! The laws of automatic differentiation on random differentiable programs
//! (`remora::generate_ad`, from fixed seeds): at random points, directions
//! and cotangents, lifted over random frames, `jvp` and `vjp` obey the
//! transpose law ⟨u, J·v⟩ = ⟨Jᵀ·u, v⟩, `grad` agrees with them, and `jvp`
//! agrees with central differences. Every rule of `RULES` must be reached.
//!
//! The compiled engine runs the same derivative programs and must print
//! what the interpreter prints, bit for bit (or not compile them).
//!
//! `REMORA_AD_CASES=N` runs N cases instead of the default (the engines'
//! comparison: `REMORA_AD_SEEDS=FROM..TO`, for a longer run);
//! `REMORA_SHOW_PROGRAMS=1` prints each program.

use remora::generate::{Tally, on_pipeline_stack, seeded_bytes};
use remora::generate_ad::{RULES, Verdict, case, check, compare_engines};

/// Enough to reach every rule in both modes many times, few enough to run
/// in seconds in a debug build.
const CASES: u64 = 400;

#[test]
fn derivatives_obey_the_transpose_law_and_central_differences() {
    let cases = std::env::var("REMORA_AD_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(CASES);
    let run = on_pipeline_stack(move || {
        let mut rejected = Vec::new();
        let mut skipped = 0usize;
        let mut agreed = 0usize;
        let mut disagreements = Vec::new();
        // Per rule: agreed cases using it with reverse mode checked,
        // and with forward mode only.
        let mut reached = vec![[0usize; 2]; RULES.len()];
        for seed in 0..cases {
            let c = case(&seeded_bytes(seed, 1024));
            if std::env::var_os("REMORA_SHOW_PROGRAMS").is_some() {
                eprintln!(";; seed {seed}\n{}", c.text);
            }
            match check(&c, true) {
                Verdict::Rejected(why) => rejected.push(format!("seed {seed}:\n{}{why}", c.text)),
                Verdict::Skipped(_) => skipped += 1,
                Verdict::Agreed => {
                    agreed += 1;
                    for &r in &c.rules {
                        reached[r][usize::from(!c.reverse)] += 1;
                    }
                }
                Verdict::Disagreed(how) => disagreements.push(format!("seed {seed}:\n{}{how}", c.text)),
            }
        }
        (rejected, skipped, agreed, disagreements, reached)
    });
    let Some((rejected, skipped, agreed, disagreements, reached)) = run else {
        return;
    };
    eprintln!(
        "{cases} cases: {} rejected by the checker, {skipped} skipped, {agreed} agreed, {} disagreed",
        rejected.len(),
        disagreements.len()
    );
    for (rule, [reverse, forward]) in RULES.iter().zip(&reached) {
        eprintln!(
            "  {:20} {reverse:4} both modes, {forward:4} forward only",
            rule.name
        );
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n\n"));
    // The generator writes well-typed programs: a rejection is its bug
    // (or a rule the transformation lost).
    assert!(rejected.is_empty(), "{}", rejected.join("\n\n"));
    assert!(
        skipped * 10 < cases as usize,
        "{skipped} of {cases} cases skipped"
    );
    if cases >= CASES {
        for (rule, [reverse, forward]) in RULES.iter().zip(&reached) {
            if rule.reverse {
                assert!(
                    *reverse > 0,
                    "no agreed case checked `{}` in both modes",
                    rule.name
                );
            } else {
                assert!(*forward > 0, "no agreed case checked `{}`", rule.name);
            }
        }
    }
}

/// How many cases the engines compare by default: each is a C build (cached
/// in ~/.cache/remora after the first run).
const COMPILED_CASES: u64 = 60;

/// The seeds the engines compare: `0..COMPILED_CASES`, or
/// `REMORA_AD_SEEDS=FROM..TO`.
fn compiled_seeds() -> std::ops::Range<u64> {
    remora::generate::seed_range("REMORA_AD_SEEDS", 0..COMPILED_CASES)
}

#[test]
fn compiled_derivatives_agree_with_the_interpreter() {
    if remora::native::c_compiler().is_none() {
        return;
    }
    let Some(tally) = on_pipeline_stack(|| {
        let mut tally = Tally::default();
        for seed in compiled_seeds() {
            let c = case(&seeded_bytes(seed, 1024));
            if std::env::var_os("REMORA_SHOW_PROGRAMS").is_some() {
                eprintln!(";; seed {seed}\n{}", c.text);
            }
            tally.count(seed, &c.text, compare_engines(&c));
        }
        tally
    }) else {
        return;
    };
    let cases = compiled_seeds().end.saturating_sub(compiled_seeds().start);
    tally.report(cases, "cases");
    assert!(
        tally.disagreements.is_empty(),
        "{}",
        tally.disagreements.join("\n\n")
    );
    assert_eq!(tally.rejected, 0, "a generated derivative program was rejected");
    assert!(tally.agreed > 0, "no derivative program compiled");
}

//! Differential testing of the compiled engine: random well-typed programs
//! (`remora::generate`, from a fixed seed) run on the interpreter and
//! compiled to C must print the same, or both fail. Skipped without a C
//! compiler. (The fuzz target `fuzz/fuzz_targets/compiled.rs` does the same
//! with the fuzzer's bytes.)

use remora::generate::{Tally, compare, on_pipeline_stack, program, seeded_bytes};

/// How many programs: enough to reach most forms, few enough to run in
/// well under a minute in a debug build (each compiled program is a C build,
/// cached in ~/.cache/remora after the first run).
const PROGRAMS: u64 = 300;

/// The seeds to run: `0..PROGRAMS`, or `REMORA_DIFF_SEEDS=FROM..TO` for a
/// longer run (several processes over disjoint ranges on a bigger machine).
fn seeds() -> std::ops::Range<u64> {
    remora::generate::seed_range("REMORA_DIFF_SEEDS", 0..PROGRAMS)
}

#[test]
fn compiled_agrees_with_the_interpreter_on_random_programs() {
    if remora::native::c_compiler().is_none() {
        return;
    }
    let Some(tally) = on_pipeline_stack(|| {
        let mut tally = Tally::default();
        let show = std::env::var_os("REMORA_SHOW_PROGRAMS").is_some();
        for seed in seeds() {
            let text = program(&seeded_bytes(seed, 512));
            if show {
                eprintln!(";; seed {seed}\n{text}");
            }
            let verdict = compare(&text);
            if show {
                eprintln!(";; {verdict:?}");
            }
            tally.count(seed, &text.to_string(), verdict);
        }
        tally
    }) else {
        return;
    };
    let programs = seeds().end.saturating_sub(seeds().start);
    tally.report(programs, "programs");
    assert!(
        tally.disagreements.is_empty(),
        "{}",
        tally.disagreements.join("\n\n")
    );
    // The generator must mostly write programs the checker accepts, and
    // some of them must compile, or this test tests nothing.
    assert!(
        tally.rejected * 2 < programs as usize,
        "most generated programs were rejected"
    );
    assert!(tally.agreed > 0, "no generated program compiled");
}

/// The same random programs on the interpreter alone: applications over
/// frames batched (the fast paths) must print what the reference path
/// (cell by cell) prints, or fail with the same message. No C compiler
/// needed.
#[test]
fn batched_application_agrees_with_the_reference_path_on_random_programs() {
    use remora::generate::compare_with_reference;
    let Some(tally) = on_pipeline_stack(|| {
        let mut tally = Tally::default();
        let show = std::env::var_os("REMORA_SHOW_PROGRAMS").is_some();
        for seed in seeds() {
            let generated = program(&seeded_bytes(seed, 512));
            if show {
                eprintln!(";; seed {seed}\n{generated}");
            }
            let verdict = compare_with_reference(&generated);
            if show {
                eprintln!(";; {verdict:?}");
            }
            tally.count(seed, &generated.to_string(), verdict);
        }
        tally
    }) else {
        return;
    };
    let programs = seeds().end.saturating_sub(seeds().start);
    eprintln!(
        "{programs} programs: {} rejected by the checker, {} over the interpreter's budget, \
         {} agreed batched and cell by cell, {} disagreed",
        tally.rejected,
        tally.over_budget,
        tally.agreed,
        tally.disagreements.len()
    );
    assert!(
        tally.disagreements.is_empty(),
        "{}",
        tally.disagreements.join("\n\n")
    );
    assert!(
        tally.agreed * 2 > programs as usize,
        "most generated programs did not run"
    );
}

//! Differential testing of the compiled engine: random well-typed programs
//! (`remora::generate`, from a fixed seed) run on the interpreter and
//! compiled to C must print the same, or both fail. Skipped without a C
//! compiler. (The fuzz target `fuzz/fuzz_targets/compiled.rs` does the same
//! with the fuzzer's bytes.)

use remora::generate::{Verdict, compare, program, seeded_bytes};

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
    let run = std::thread::Builder::new()
        .stack_size(remora_syntax::stack::PIPELINE_STACK)
        .spawn(|| {
            let mut counts = [0usize; 4];
            let mut reasons = std::collections::BTreeMap::<String, usize>::new();
            let mut disagreements = Vec::new();
            for seed in seeds() {
                let text = program(&seeded_bytes(seed, 512));
                if std::env::var_os("REMORA_SHOW_PROGRAMS").is_some() {
                    eprintln!(";; seed {seed}\n{text}");
                }
                let verdict = compare(&text);
                if std::env::var_os("REMORA_SHOW_PROGRAMS").is_some() {
                    eprintln!(";; {verdict:?}");
                }
                match verdict {
                    Verdict::Rejected => {
                        counts[0] += 1;
                        if std::env::var_os("REMORA_SHOW_REJECTED").is_some() {
                            eprintln!(";; rejected, seed {seed}\n{text}");
                        }
                    }
                    Verdict::OverBudget => counts[1] += 1,
                    Verdict::Unsupported(why) => {
                        counts[2] += 1;
                        *reasons.entry(why).or_default() += 1;
                    }
                    Verdict::Agreed => counts[3] += 1,
                    Verdict::Disagreed(how) => {
                        let found = format!("seed {seed}:\n{text}{how}");
                        if std::env::var_os("REMORA_SHOW_DISAGREEMENTS").is_some() {
                            // (A long run, killed at its time limit, still reports.)
                            eprintln!(";; disagreement, {found}");
                        }
                        disagreements.push(found);
                    }
                }
            }
            let mut reasons: Vec<_> = reasons.into_iter().collect();
            reasons.sort_by_key(|r| std::cmp::Reverse(r.1));
            for (why, n) in reasons.iter().take(12) {
                eprintln!("  {n:4}  not compiled: {why}");
            }
            (counts, disagreements)
        });
    let Ok(handle) = run else {
        return;
    };
    let (counts, disagreements) = match handle.join() {
        Ok(r) => r,
        Err(e) => std::panic::resume_unwind(e),
    };
    let programs = seeds().end.saturating_sub(seeds().start);
    eprintln!(
        "{programs} programs: {} rejected by the checker, {} over the interpreter's budget, \
         {} not compiled, {} compiled and agreed, {} disagreed",
        counts[0],
        counts[1],
        counts[2],
        counts[3],
        disagreements.len()
    );
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n\n"));
    // The generator must mostly write programs the checker accepts, and
    // some of them must compile, or this test tests nothing.
    assert!(
        counts[0] * 2 < programs as usize,
        "most generated programs were rejected"
    );
    assert!(counts[3] > 0, "no generated program compiled");
}

/// The same random programs on the interpreter alone: applications over
/// frames batched (the fast paths) must print what the reference path
/// (cell by cell) prints, or fail with the same message. No C compiler
/// needed.
#[test]
fn batched_application_agrees_with_the_reference_path_on_random_programs() {
    use remora::generate::compare_with_reference;
    let run = std::thread::Builder::new()
        .stack_size(remora_syntax::stack::PIPELINE_STACK)
        .spawn(|| {
            let (mut agreed, mut disagreements) = (0usize, Vec::new());
            for seed in seeds() {
                let generated = program(&seeded_bytes(seed, 512));
                match compare_with_reference(&generated) {
                    Verdict::Agreed => agreed += 1,
                    Verdict::Disagreed(how) => {
                        let found = format!("seed {seed}:\n{generated}{how}");
                        if std::env::var_os("REMORA_SHOW_DISAGREEMENTS").is_some() {
                            eprintln!(";; disagreement, {found}");
                        }
                        disagreements.push(found);
                    }
                    _ => {}
                }
            }
            (agreed, disagreements)
        });
    let Ok(handle) = run else {
        return;
    };
    let (agreed, disagreements) = match handle.join() {
        Ok(r) => r,
        Err(e) => std::panic::resume_unwind(e),
    };
    let programs = seeds().end.saturating_sub(seeds().start);
    eprintln!(
        "{programs} programs: {agreed} agreed batched and cell by cell, {} disagreed",
        disagreements.len()
    );
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n\n"));
    assert!(
        agreed * 2 > programs as usize,
        "most generated programs did not run"
    );
}

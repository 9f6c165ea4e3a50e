//! Differential fuzzing of the compiled engine: the fuzzer's bytes steer
//! `remora::generate` to a random well-typed program, which is checked, run
//! on the interpreter (with a budget) and, where it compiles, compiled to C
//! and run; both must print the same value, or both fail. A disagreement,
//! or the compiled engine breaking (our C rejected, the child crashing), is
//! a crash here.
//!
//! Inputs run on one long-lived worker thread with the pipeline's deep stack
//! (as `remora` runs them), fed through a channel.
#![no_main]

use libfuzzer_sys::fuzz_target;
use remora::generate::{Verdict, compare, program};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

#[path = "worker.rs"]
mod worker;
use worker::Worker;

/// Programs generated, checked, compiled (and compared).
static COUNTS: [AtomicUsize; 3] = [AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0)];

fn run(bytes: &[u8]) {
    let text = program(bytes);
    COUNTS[0].fetch_add(1, Ordering::Relaxed);
    let verdict = compare(&text);
    if verdict != Verdict::Rejected {
        COUNTS[1].fetch_add(1, Ordering::Relaxed);
    }
    if matches!(verdict, Verdict::Agreed | Verdict::Disagreed(_)) {
        COUNTS[2].fetch_add(1, Ordering::Relaxed);
    }
    let generated = COUNTS[0].load(Ordering::Relaxed);
    if std::env::var_os("REMORA_FUZZ_COUNTS").is_some() && generated % 500 == 0 {
        eprintln!(
            "remora: {generated} programs generated, {} checked, {} compiled",
            COUNTS[1].load(Ordering::Relaxed),
            COUNTS[2].load(Ordering::Relaxed)
        );
    }
    if let Verdict::Disagreed(how) = verdict {
        panic!("the engines disagree on\n{text}{how}");
    }
}

static WORKER: OnceLock<Worker<Vec<u8>>> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    Worker::get(&WORKER, |bytes: Vec<u8>| run(&bytes))
        .run(data.to_vec(), "the program was compared without a disagreement");
});

//! Fuzzing of automatic differentiation: the fuzzer's bytes steer
//! `remora::generate_ad` to a random differentiable function, point,
//! direction and cotangent, lifted over a random frame; the program is
//! checked and run on the interpreter (with a budget), and `jvp` against
//! `vjp` must obey the transpose law, and `grad` agree with them; where a
//! C compiler is found, the program is also compiled and must print what
//! the interpreter prints, bit for bit (or not compile). A generated
//! program the checker rejects (the derivative transformation lost a rule
//! it had), a law broken, the engines disagreeing, or a panic is a crash
//! here.
//!
//! Inputs run on one long-lived worker thread with the pipeline's deep stack
//! (as `remora` runs them), fed through a channel.
#![no_main]

use libfuzzer_sys::fuzz_target;
use remora::generate_ad::{Verdict, case, check, compare_engines};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

#[path = "worker.rs"]
mod worker;
use worker::Worker;

/// Cases generated, and agreed.
static COUNTS: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

fn run(bytes: &[u8]) {
    let c = case(bytes);
    let generated = COUNTS[0].fetch_add(1, Ordering::Relaxed) + 1;
    let verdict = check(&c, false);
    if verdict == Verdict::Agreed {
        COUNTS[1].fetch_add(1, Ordering::Relaxed);
    }
    if std::env::var_os("REMORA_FUZZ_COUNTS").is_some() && generated % 500 == 0 {
        eprintln!(
            "remora: {generated} cases generated, {} agreed",
            COUNTS[1].load(Ordering::Relaxed)
        );
    }
    match verdict {
        Verdict::Rejected(why) => panic!("a generated program was rejected:\n{}{why}", c.text),
        Verdict::Disagreed(how) => panic!("a law is broken on\n{}{how}", c.text),
        Verdict::Skipped(_) | Verdict::Agreed => {}
    }
    if remora::native::c_compiler().is_some()
        && let remora::generate::Verdict::Disagreed(how) = compare_engines(&c)
    {
        panic!("the engines disagree on\n{}{how}", c.text);
    }
}

static WORKER: OnceLock<Worker<Vec<u8>>> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    Worker::get(&WORKER, |bytes: Vec<u8>| run(&bytes)).run(data.to_vec(), "the case's laws held");
});

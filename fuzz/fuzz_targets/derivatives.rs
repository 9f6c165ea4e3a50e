//! Fuzzing of automatic differentiation: the fuzzer's bytes steer
//! `remora::generate_ad` to a random differentiable function, point,
//! direction and cotangent, lifted over a random frame; the program is
//! checked and run on the interpreter (with a budget), and `jvp` against
//! `vjp` must obey the transpose law, and `grad` agree with them. A
//! generated program the checker rejects (the derivative transformation
//! lost a rule it had), a law broken, or a panic is a crash here.
//!
//! Inputs run on one long-lived worker thread with the pipeline's deep stack
//! (as `remora` runs them), fed through a channel.
#![no_main]

use libfuzzer_sys::fuzz_target;
use remora::generate_ad::{Verdict, case, check};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Mutex, OnceLock};

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
}

struct Worker {
    inputs: SyncSender<Vec<u8>>,
    done: Mutex<Receiver<()>>,
}

fn worker() -> &'static Worker {
    static WORKER: OnceLock<Worker> = OnceLock::new();
    WORKER.get_or_init(|| {
        let (inputs, rx) = sync_channel::<Vec<u8>>(0);
        let (tx, done) = sync_channel::<()>(0);
        let spawned = std::thread::Builder::new()
            .stack_size(remora_syntax::stack::PIPELINE_STACK)
            .spawn(move || {
                for bytes in rx {
                    run(&bytes);
                    if tx.send(()).is_err() {
                        break;
                    }
                }
            });
        assert!(spawned.is_ok(), "cannot start the worker thread");
        Worker {
            inputs,
            done: Mutex::new(done),
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let w = worker();
    let done = w.done.lock().expect("worker lock");
    w.inputs.send(data.to_vec()).expect("worker alive");
    // (A panic on the worker closes the channel: reported as a crash.)
    done.recv().expect("the case's laws held");
});

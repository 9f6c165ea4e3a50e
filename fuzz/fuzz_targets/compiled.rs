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
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

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
    done.recv().expect("the program was compared without a disagreement");
});

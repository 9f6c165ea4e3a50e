//! The fuzz targets' worker: one long-lived thread with the pipeline's deep
//! stack (as `remora` runs programs), fed one input at a time through a
//! channel. A panic on it closes the channel, which the target reports as
//! a crash.

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Mutex, OnceLock};

pub struct Worker<T> {
    inputs: SyncSender<T>,
    done: Mutex<Receiver<()>>,
}

impl<T: Send + 'static> Worker<T> {
    /// The worker in `cell`, started on first use to `run` each input.
    pub fn get(cell: &'static OnceLock<Worker<T>>, run: fn(T)) -> &'static Worker<T> {
        cell.get_or_init(|| {
            let (inputs, rx) = sync_channel::<T>(0);
            let (tx, done) = sync_channel::<()>(0);
            let spawned = std::thread::Builder::new()
                .stack_size(remora_syntax::stack::PIPELINE_STACK)
                .spawn(move || {
                    for input in rx {
                        run(input);
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

    /// Runs `input` on the worker and waits for it; `what` says what a
    /// finished input means, for the crash report.
    pub fn run(&self, input: T, what: &str) {
        let done = self.done.lock().expect("worker lock");
        self.inputs.send(input).expect("worker alive");
        done.recv().expect(what);
    }
}

//! Deep recursion: the phases recurse over trees as deep as the reader
//! allows ([`crate::reader::MAX_NESTING`] brackets), so drivers run them on
//! a thread with a stack sized for that. The memory is reserved, not
//! committed: a shallow program touches only the first pages.

use std::sync::Mutex;

/// Stack for the pipeline thread: room for every phase at the deepest
/// nesting the reader accepts.
pub const PIPELINE_STACK: usize = 4 << 30;

/// Runs `f` on a thread with a [`PIPELINE_STACK`] stack, and returns its
/// result. Runs it on the current thread if no such thread can be made.
pub fn run_deep<R: Send, F: FnOnce() -> R + Send>(f: F) -> R {
    let slot = Mutex::new(Some(f));
    let take = || slot.lock().ok().and_then(|mut g| g.take());
    let from_thread = std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("remora".into())
            .stack_size(PIPELINE_STACK)
            .spawn_scoped(scope, || take().map(|f| f()));
        match spawned {
            Ok(handle) => match handle.join() {
                Ok(r) => r,
                Err(panic) => std::panic::resume_unwind(panic),
            },
            Err(_) => None,
        }
    });
    match from_thread {
        Some(r) => r,
        None => match take() {
            Some(f) => f(),
            // The closure ran on the thread and returned nothing: impossible,
            // since it returns `Some` whenever it ran.
            None => std::process::abort(),
        },
    }
}

//! Deep recursion: the phases recurse over trees as deep as the reader
//! allows, so drivers run them on a thread with a stack sized for that. The
//! memory is reserved, not committed: a shallow program touches only the
//! first pages.
//!
//! Under a memory limit (`ulimit -v`) the full reservation may be refused;
//! then a thread with half the stack is tried, and so on down to
//! [`SMALLEST_STACK`]. The deepest nesting the reader accepts
//! ([`nesting_limit`]) follows the stack actually granted, so a program too
//! deep for it is a clean error, never a stack overflow (`ulimit -s` limits
//! only the main thread, which runs the pipeline only when no thread at all
//! can be made).

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Stack for the pipeline thread: room for every phase at the deepest
/// nesting the reader accepts ([`crate::reader::MAX_NESTING`]).
pub const PIPELINE_STACK: usize = 4 << 30;

/// The smallest pipeline stack tried before running on the current thread.
pub const SMALLEST_STACK: usize = 16 << 20;

/// The stack assumed for the current thread when no pipeline thread could
/// be made (a main thread may have as little as 1 MiB).
const CURRENT_THREAD_STACK: usize = 1 << 20;

/// The stack of the pipeline thread running now (`PIPELINE_STACK` until
/// `run_deep` says otherwise).
static GRANTED: AtomicUsize = AtomicUsize::new(PIPELINE_STACK);

/// The soft limit on this process's address space (`ulimit -v`), from
/// `/proc/self/limits` (Linux); `None` when unlimited or unknown.
pub fn address_space_limit() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max address space"))?;
    let soft = line
        .trim_start_matches("Max address space")
        .split_whitespace()
        .next()?;
    soft.parse().ok()
}

/// The address space kept for the heap beside a large pipeline stack.
const HEAP: usize = 256 << 20;

/// The largest stack worth asking for: [`PIPELINE_STACK`], but under an
/// address-space limit no more than half of what is left (beside what is
/// mapped) once the heap has 256 MiB (an eighth of the limit when it is smaller than that: the
/// allocator takes 32 MiB a thread before anything else), so that the heap
/// keeps enough.
fn first_stack() -> usize {
    match address_space_limit() {
        // (Of what is left beside what is mapped already: the allocator
        // may have reserved a large arena before `main`, 1 GiB where the
        // limit allows it.)
        Some(limit) if limit > 2 * HEAP => PIPELINE_STACK
            .min(limit.saturating_sub(mapped().unwrap_or(0)).saturating_sub(HEAP) / 2)
            .max(SMALLEST_STACK),
        Some(limit) => (limit / 8).max(SMALLEST_STACK),
        None => PIPELINE_STACK,
    }
}

/// The bytes of address space this process has mapped (`VmSize`, from
/// `/proc/self/status`); `None` when unknown.
pub fn mapped() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find_map(|l| l.strip_prefix("VmSize:"))?;
    let kib: usize = line.split_whitespace().next()?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The least address space a run needs besides what the process has
/// mapped when it starts (the main thread's stack and first heap segment
/// among it): the pipeline's stack, and two of the allocator's 32 MiB
/// segments (its thread's first, and one more as its heap grows), so that
/// a small program never meets an allocation that fails.
pub const LEAST_ADDRESS_SPACE: usize = SMALLEST_STACK + (64 << 20);

/// What the C library reserves for a new thread's own malloc arena: the
/// pipeline thread's start registers its thread-local destructors through
/// it (seen with `strace` as a 64 MiB `PROT_NONE` map). Under a limit of
/// less than twice [`HEAP`] it is counted in the least a run needs: without
/// it, a run under `ulimit -v 140000` aborted about one time in thirty.
/// (Above that, the heap [`first_stack`] leaves holds it.)
/// It is counted with 16 MiB more for what the process maps as it goes
/// beyond what it had mapped when it was measured (without them, a release
/// binary 1.5 MB larger aborted under `ulimit -v 205000` instead of saying
/// that the limit is too small).
const THREAD_ARENA: usize = (64 + 16) << 20;

/// Under an address-space limit too small for a run (less than
/// [`LEAST_ADDRESS_SPACE`], and the pipeline's stack and the C library's
/// thread arena where they count, left beyond `in_use` bytes already
/// mapped): the bytes that are left and the bytes a run needs; `None` when
/// a run fits.
pub fn too_little_address_space(in_use: usize) -> Option<(usize, usize)> {
    let limit = address_space_limit()?;
    let left = limit.saturating_sub(in_use);
    let arena = if limit < 2 * HEAP { THREAD_ARENA } else { 0 };
    let need = LEAST_ADDRESS_SPACE + arena + first_stack().saturating_sub(SMALLEST_STACK);
    (left < need).then_some((left, need))
}

/// The stack reserved for the pipeline thread, in bytes: address space the
/// heap cannot have under `ulimit -v` (see `remora_value::limits`).
pub fn reserved() -> usize {
    GRANTED.load(Ordering::Relaxed)
}

/// The deepest bracket nesting the reader accepts with the stack granted:
/// [`crate::reader::MAX_NESTING`] with half of [`PIPELINE_STACK`] or more,
/// in proportion with less.
pub fn nesting_limit() -> usize {
    let granted = GRANTED.load(Ordering::Relaxed);
    if granted >= PIPELINE_STACK / 2 {
        return crate::reader::MAX_NESTING;
    }
    // Half of PIPELINE_STACK holds MAX_NESTING levels (about 10 KiB a
    // level; the deepest phases measured use less); an unoptimised build's
    // frames are several times larger.
    let frames = if cfg!(debug_assertions) { 8 } else { 1 };
    let limit = crate::reader::MAX_NESTING as u128 * granted as u128 * 2 / PIPELINE_STACK as u128 / frames;
    usize::try_from(limit).unwrap_or(0).max(64)
}

/// Runs `f` on a thread with a [`PIPELINE_STACK`] stack (or the largest
/// that can be had, see the module), and returns its result. Runs it on the
/// current thread if no such thread can be made.
pub fn run_deep<R: Send, F: FnOnce() -> R + Send>(f: F) -> R {
    let slot = Mutex::new(Some(f));
    let take = || slot.lock().ok().and_then(|mut g| g.take());
    let mut size = first_stack();
    while size >= SMALLEST_STACK {
        GRANTED.store(size, Ordering::Relaxed);
        let from_thread = std::thread::scope(|scope| {
            let spawned = std::thread::Builder::new()
                .name("remora".into())
                .stack_size(size)
                .spawn_scoped(scope, || take().map(|f| f()));
            match spawned {
                Ok(handle) => match handle.join() {
                    Ok(r) => Some(r),
                    Err(panic) => std::panic::resume_unwind(panic),
                },
                Err(_) => None,
            }
        });
        match from_thread {
            Some(Some(r)) => return r,
            // The thread ran and the closure was already taken: impossible,
            // since a thread that runs takes it.
            Some(None) => std::process::abort(),
            None => size /= 2,
        }
    }
    GRANTED.store(CURRENT_THREAD_STACK, Ordering::Relaxed);
    match take() {
        Some(f) => f(),
        None => std::process::abort(),
    }
}

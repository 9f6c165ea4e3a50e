//! How much memory this process may use, and so how large an array may
//! be: the limit follows the memory actually available — the address-space
//! limit (`ulimit -v`), the control group's limit, and physical memory,
//! whichever is least — not a constant, so a program asking for more than
//! the machine can give is refused with a message instead of aborting when
//! an allocation fails.
//!
//! Linux reports all three in files (`/proc/self/limits`,
//! `/sys/fs/cgroup/…/memory.max`, `/proc/meminfo`); elsewhere, or where
//! none can be read, the budget is unlimited and only [`MAX_ATOMS`] holds.

use std::sync::OnceLock;

/// The most atoms one array may ever hold (2^28: 2 GiB of Int), however
/// much memory there is.
pub const MAX_ATOMS: usize = 1 << 28;

/// The bytes of one atom as the interpreter stores the widest kind (Int).
const ATOM_BYTES: usize = 8;

/// What share of the memory budget one array may take: an operation holds
/// its operands and its result at once, and a program holds more than one
/// operation's worth.
const SHARE: usize = 4;

/// The bytes this process may use: the least of the limits that can be
/// read, or `usize::MAX` when none can.
pub fn memory_budget() -> usize {
    static BUDGET: OnceLock<usize> = OnceLock::new();
    *BUDGET.get_or_init(|| {
        [address_space_limit(), cgroup_limit(), physical_memory()]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(usize::MAX)
    })
}

/// The most atoms one array may hold here: [`MAX_ATOMS`], or less where
/// memory is scarcer.
pub fn atom_limit() -> usize {
    (memory_budget() / ATOM_BYTES / SHARE).clamp(1 << 16, MAX_ATOMS)
}

/// The soft limit on the address space (`ulimit -v`), less what the
/// pipeline's stack has reserved of it (`remora_syntax::stack`) and a
/// little for the program itself.
fn address_space_limit() -> Option<usize> {
    let limit = remora_syntax::stack::address_space_limit()?;
    let stack = remora_syntax::stack::reserved().min(limit / 2);
    Some(limit.saturating_sub(stack).saturating_sub(64 << 20))
}

/// The memory limit of this process's control group (v2, else v1).
fn cgroup_limit() -> Option<usize> {
    cgroup_file("memory.max", "memory.limit_in_bytes")
}

/// A number from a file of this process's memory control group: `v2` in
/// a v2 hierarchy, `v1` in a v1 one.
fn cgroup_file(v2: &str, v1: &str) -> Option<usize> {
    let group = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in group.lines() {
        // v2: "0::/path"; v1: "N:memory:/path".
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let file = if controllers.is_empty() {
            format!("/sys/fs/cgroup{path}/{v2}")
        } else if controllers.split(',').any(|c| c == "memory") {
            format!("/sys/fs/cgroup/memory{path}/{v1}")
        } else {
            continue;
        };
        if let Some(n) = std::fs::read_to_string(file)
            .ok()
            .and_then(|t| t.trim().parse::<usize>().ok())
        {
            return Some(n);
        }
    }
    None
}

/// A `Name: N kB` line of a `/proc` file, in bytes.
fn proc_kib(file: &str, name: &str) -> Option<usize> {
    let text = std::fs::read_to_string(file).ok()?;
    let line = text.lines().find(|l| l.starts_with(name))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The bytes that can still be had now, as far as can be read: under an
/// address-space limit, what it leaves beyond the address space in use;
/// under a control group's limit, what it leaves beyond the group's use;
/// and the memory the system reports available. `None` when none can be
/// read. (A few `/proc` reads: for large allocations, not every one.)
pub fn available() -> Option<usize> {
    // The limits stay; only the use is read each time, and only where
    // there is a limit.
    static LIMITS: OnceLock<(Option<usize>, Option<usize>)> = OnceLock::new();
    let (address_space_limit, group_limit) =
        *LIMITS.get_or_init(|| (remora_syntax::stack::address_space_limit(), cgroup_limit()));
    let address_space = address_space_limit
        .and_then(|limit| Some(limit.saturating_sub(proc_kib("/proc/self/status", "VmSize:")?)));
    let group = group_limit.and_then(|limit| {
        Some(limit.saturating_sub(cgroup_file("memory.current", "memory.usage_in_bytes")?))
    });
    let system = proc_kib("/proc/meminfo", "MemAvailable:");
    [address_space, group, system].into_iter().flatten().min()
}

/// What [`can_have`] keeps free beyond what is asked: the allocator takes
/// address space in large segments, and the program's own small
/// allocations, past any check, need room too.
pub const SLACK: usize = 128 << 20;

/// The address space this process has mapped now (`VmSize`).
pub fn address_space_in_use() -> Option<usize> {
    remora_syntax::stack::mapped()
}

/// Whether `bytes` more can be had now, with [`SLACK`] to spare
/// ([`available`]; yes when nothing can be read).
pub fn can_have(bytes: usize) -> bool {
    available().is_none_or(|a| bytes.saturating_add(SLACK) <= a)
}

/// Physical memory, from `/proc/meminfo`.
fn physical_memory() -> Option<usize> {
    proc_kib("/proc/meminfo", "MemTotal:")
}

/// The longest text a value may print as: a sixteenth of the memory
/// budget (the text grows by doubling, beside the value), at least 1 MiB,
/// at most 1 GiB.
pub fn text_limit() -> usize {
    (memory_budget() / 16).clamp(1 << 20, 1 << 30)
}

/// A vector with room for `n` items, or `None` when the memory cannot be
/// had (instead of aborting the process, as `Vec::with_capacity` does).
pub fn try_vec<T>(n: usize) -> Option<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).ok()?;
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_atom_limit_is_bounded_both_ways() {
        let n = atom_limit();
        assert!((1 << 16..=MAX_ATOMS).contains(&n));
    }

    #[test]
    fn a_vector_too_large_for_any_memory_is_refused() {
        assert!(try_vec::<u64>(usize::MAX / 4).is_none());
        assert_eq!(try_vec::<u64>(10).map(|v| v.capacity() >= 10), Some(true));
    }
}

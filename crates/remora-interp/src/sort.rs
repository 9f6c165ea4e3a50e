//! Sorting for `sort`, `grade`, `f.sort` and `f.grade`: a stable radix sort
//! on 64-bit keys (Ints and Floats become keys that order as unsigned
//! integers do). One scatter into 256 buckets by the highest byte on which
//! the keys differ, then each bucket (small enough to stay in cache) by a
//! least-significant-digit radix sort on the bytes below it, 8 bits a pass,
//! skipping the bytes on which the bucket's keys agree. Large inputs sort
//! their buckets on every core.

use crate::kernel::buffer;

/// An Int as a key: the sign bit flipped.
pub fn int_key(x: i64) -> u64 {
    (x as u64) ^ (1 << 63)
}

/// A Float as a key: ascending, -0.0 with 0.0 (they compare equal, so a
/// stable sort keeps their order), every NaN after +∞.
pub fn float_key(x: f32) -> u64 {
    let bits = if x.is_nan() {
        return u64::MAX;
    } else if x == 0.0 {
        0u32
    } else {
        x.to_bits()
    };
    let ordered = if bits & (1 << 31) != 0 {
        !bits
    } else {
        bits | (1 << 31)
    };
    // In the high half, so that the bucketing byte is the exponent's.
    u64::from(ordered) << 32
}

/// Items sorted stably by a 64-bit key (see the module comment), or an
/// error when the memory for the result and the scratch cannot be had.
fn radix_sort<T: Copy + Default + Send>(
    v: &[T],
    key: &(impl Fn(T) -> u64 + Sync),
) -> Result<Vec<T>, &'static str> {
    let n = v.len();
    // The highest byte on which the keys differ.
    let (and, or) = v
        .iter()
        .fold((u64::MAX, 0u64), |(a, o), &x| (a & key(x), o | key(x)));
    let differ = and ^ or;
    if differ == 0 {
        let mut out = buffer(n)?;
        out.extend_from_slice(v);
        return Ok(out);
    }
    let top = (63 - differ.leading_zeros()) / 8;
    let digit = |x: T| ((key(x) >> (8 * top)) & 0xff) as usize;
    let mut count = [0usize; 257];
    for &x in v {
        count[digit(x) + 1] += 1;
    }
    for d in 0..256 {
        count[d + 1] += count[d];
    }
    let starts = count;
    let mut next = count;
    let mut out = buffer(n)?;
    out.resize(n, T::default());
    for &x in v {
        let d = digit(x);
        out[next[d]] = x;
        next[d] += 1;
    }
    // The buckets are shared out: every worker takes the next one left
    // until none is (the calling thread too, so a thread the system
    // refuses only means fewer workers).
    let workers = if n < 1 << 17 { 1 } else { crate::threads() };
    let big = (0..256).map(|d| starts[d + 1] - starts[d]).max().unwrap_or(0);
    let mut buckets = Vec::with_capacity(256);
    let mut rest: &mut [T] = &mut out;
    for d in 0..256 {
        let (bucket, r) = rest.split_at_mut(starts[d + 1] - starts[d]);
        rest = r;
        if bucket.len() > 1 {
            buckets.push(bucket);
        }
    }
    let bytes = top as usize;
    let queue = std::sync::Mutex::new(buckets);
    let work = || {
        // A worker that cannot have its scratch leaves the buckets to the
        // others.
        // (Not `buffer`: one worker refused is no shortage.)
        let Some(mut tmp) = remora_value::limits::try_vec::<T>(big) else {
            return;
        };
        tmp.resize(big, T::default());
        loop {
            let next = queue
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .pop();
            let Some(bucket) = next else { break };
            let len = bucket.len();
            lsd_low_bytes(bucket, &mut tmp[..len], bytes, key);
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..workers {
            // Refused: the others take its share.
            let _ = std::thread::Builder::new().spawn_scoped(scope, work);
        }
        work();
    });
    // Buckets left over: no worker could have its scratch.
    if !queue
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .is_empty()
    {
        crate::eval::note_starved();
        return Err(crate::kernel::OUT_OF_MEMORY);
    }
    Ok(out)
}

/// A stable LSD radix sort of `a` on its keys' low `bytes` bytes (`tmp`
/// as long as `a`).
fn lsd_low_bytes<T: Copy>(a: &mut [T], tmp: &mut [T], bytes: usize, key: &impl Fn(T) -> u64) {
    let n = a.len();
    let mut hist = [[0usize; 256]; 7];
    let hist = &mut hist[..bytes.min(7)];
    for &x in a.iter() {
        let k = key(x);
        for (p, h) in hist.iter_mut().enumerate() {
            h[((k >> (8 * p)) & 0xff) as usize] += 1;
        }
    }
    let mut in_a = true;
    for (p, h) in hist.iter_mut().enumerate() {
        if h.contains(&n) {
            continue;
        }
        let mut sum = 0;
        for c in h.iter_mut() {
            let t = *c;
            *c = sum;
            sum += t;
        }
        let (src, dst) = if in_a { (&*a, &mut *tmp) } else { (&*tmp, &mut *a) };
        for &x in src {
            let d = ((key(x) >> (8 * p)) & 0xff) as usize;
            dst[h[d]] = x;
            h[d] += 1;
        }
        in_a = !in_a;
    }
    if !in_a {
        a.copy_from_slice(tmp);
    }
}

/// Ints in ascending order.
pub fn sort_ints(v: &[i64]) -> Result<Vec<i64>, &'static str> {
    radix_sort(v, &|x: i64| int_key(x))
}

/// The grade of Ints of a small range (at most 64 Ki values from the
/// least to the greatest: flags, bins, categories), as Int data: a stable
/// counting sort (one pass to count each value, one to place each index)
/// with a table that stays in cache, without the 64-bit keys and pairs of
/// the radix sort. `None` for a wider range.
pub fn grade_small_range(v: &[i64]) -> Option<Result<Vec<i64>, &'static str>> {
    // (A wide range is found out within its first 64 Ki items or so.)
    let first = *v.first()?;
    let (mut low, mut high) = (first, first);
    for &x in v {
        low = low.min(x);
        high = high.max(x);
        if high.abs_diff(low) >= 1 << 16 {
            return None;
        }
    }
    let span = high.abs_diff(low) as usize;
    let mut next = match buffer(span + 1) {
        Ok(next) => next,
        Err(m) => return Some(Err(m)),
    };
    next.resize(span + 1, 0usize);
    for &x in v {
        // (x - low ≤ span, checked above.)
        next[(x - low) as usize] += 1;
    }
    let mut start = 0;
    for c in next.iter_mut() {
        let count = *c;
        *c = start;
        start += count;
    }
    let mut order = match buffer(v.len()) {
        Ok(order) => order,
        Err(m) => return Some(Err(m)),
    };
    order.resize(v.len(), 0i64);
    for (i, &x) in v.iter().enumerate() {
        let slot = &mut next[(x - low) as usize];
        order[*slot] = i as i64;
        *slot += 1;
    }
    Some(Ok(order))
}

/// The Floats that are not NaN, in ascending order.
pub fn sort_floats(v: &[f32]) -> Result<Vec<f32>, &'static str> {
    let mut sorted = radix_sort(v, &|x: f32| float_key(x))?;
    let ordered = sorted.partition_point(|x| !x.is_nan());
    sorted.truncate(ordered);
    Ok(sorted)
}

/// The stable permutation that orders the keys: position i of the result
/// is the index of the i-th smallest key.
pub fn grade(keys: &[u64]) -> Result<Vec<usize>, &'static str> {
    let mut pairs = buffer(keys.len())?;
    pairs.extend(keys.iter().copied().zip(0usize..));
    let sorted = radix_sort(&pairs, &|p: (u64, usize)| p.0)?;
    drop(pairs);
    let mut order = buffer(keys.len())?;
    order.extend(sorted.into_iter().map(|(_, i)| i));
    Ok(order)
}

/// Which items of each row's stable order are wanted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Ends {
    All,
    /// The first `k` (the least).
    First(usize),
    /// The last `k` (the greatest), in order.
    Last(usize),
}

impl Ends {
    /// How many items of a row of `d`.
    pub(crate) fn count(self, d: usize) -> usize {
        match self {
            Ends::All => d,
            Ends::First(k) | Ends::Last(k) => k.min(d),
        }
    }
}

/// Rows of ordered items at least this many items in all are shared among
/// the threads.
const PARALLEL_ROW_ITEMS: usize = 1 << 16;

/// Up to this many of a row's ends are kept in a sorted buffer as the row
/// is read; more are selected (`select_nth_unstable`) and then sorted.
const FEW_ENDS: usize = 64;

/// The wanted items (`ends`) of the stable order of every row of `d` items
/// of `v` by `key`, each item of the result `pick`ed from its row by its
/// position there. Each key with its position is unique, so an unstable
/// sort (or selection) of the pairs is the stable order: one `u64` a pair
/// where the keys lie in the high 32 bits (Floats' keys), else a pair of
/// a key and a position (`wide`). Each row stays in cache; the rows are
/// shared among the threads when there are many items. (`d` below 2^32.)
pub(crate) fn rows_ordered<T: Copy + Sync, O: Copy + Default + Send>(
    v: &[T],
    d: usize,
    key: &(impl Fn(T) -> u64 + Sync),
    wide: bool,
    ends: Ends,
    pick: impl Fn(&[T], usize) -> O + Sync,
) -> Result<Vec<O>, &'static str> {
    let count = v.len().checked_div(d).unwrap_or(0);
    let each = ends.count(d);
    let mut out = buffer(count * each)?;
    out.resize(count * each, O::default());
    if each == 0 {
        return Ok(out);
    }
    let rows = |first: usize, out: &mut [O]| {
        let mut narrow: Vec<u64> = Vec::new();
        let mut pairs: Vec<(u64, u32)> = Vec::new();
        for (k, o) in out.chunks_exact_mut(each).enumerate() {
            let Some(row) = v.get((first + k) * d..(first + k + 1) * d) else {
                return false;
            };
            if wide {
                select_ends(
                    &mut pairs,
                    row.iter().zip(0u32..).map(|(&x, i)| (key(x), i)),
                    ends,
                );
                for (o, &(_, i)) in o.iter_mut().zip(&pairs) {
                    *o = pick(row, i as usize);
                }
            } else {
                let unique = row.iter().zip(0u64..).map(|(&x, i)| (key(x) & !0xffff_ffff) | i);
                select_ends(&mut narrow, unique, ends);
                for (o, &c) in o.iter_mut().zip(&narrow) {
                    *o = pick(row, (c & 0xffff_ffff) as usize);
                }
            }
        }
        true
    };
    if crate::rows_in_parallel(&mut out, each, v.len(), PARALLEL_ROW_ITEMS, rows) {
        Ok(out)
    } else {
        Err("internal error: a row out of its buffer")
    }
}

/// `buf` made the wanted ends of the distinct `items`, in order.
fn select_ends<C: Ord + Copy>(buf: &mut Vec<C>, items: impl Iterator<Item = C>, ends: Ends) {
    buf.clear();
    match ends {
        Ends::First(0) | Ends::Last(0) => {}
        Ends::First(k) | Ends::Last(k) if k <= FEW_ENDS => {
            let last = matches!(ends, Ends::Last(_));
            for c in items {
                if buf.len() < k {
                    // Filling: one step of an insertion sort.
                    buf.push(c);
                    let mut j = buf.len() - 1;
                    while j > 0 && buf[j - 1] > c {
                        buf[j] = buf[j - 1];
                        j -= 1;
                    }
                    buf[j] = c;
                } else if last && buf[0] < c {
                    // The least kept leaves; `c` moves down to its place.
                    let mut j = 0;
                    while j + 1 < k && buf[j + 1] < c {
                        buf[j] = buf[j + 1];
                        j += 1;
                    }
                    buf[j] = c;
                } else if !last && c < buf[k - 1] {
                    let mut j = k - 1;
                    while j > 0 && buf[j - 1] > c {
                        buf[j] = buf[j - 1];
                        j -= 1;
                    }
                    buf[j] = c;
                }
            }
        }
        _ => {
            buf.extend(items);
            let n = buf.len();
            match ends {
                Ends::First(k) if k < n => {
                    buf.select_nth_unstable(k);
                    buf.truncate(k);
                }
                Ends::Last(k) if k < n => {
                    buf.select_nth_unstable(n - k);
                    buf.drain(..n - k);
                }
                _ => {}
            }
            buf.sort_unstable();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints_sort_as_the_standard_sort_does() {
        let mut seed = 12345u64;
        let mut v: Vec<i64> = (0..5000)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                seed as i64 >> (seed % 60)
            })
            .collect();
        v.extend([i64::MIN, i64::MAX, 0, -1, 1]);
        let mut want = v.clone();
        want.sort();
        assert_eq!(sort_ints(&v).ok(), Some(want));
        assert_eq!(sort_ints(&[]).ok(), Some(Vec::<i64>::new()));
    }

    #[test]
    fn grade_is_stable_and_puts_nan_last() {
        let xs = [
            2.0f32,
            f32::NAN,
            -0.0,
            1.0,
            0.0,
            f32::NEG_INFINITY,
            2.0,
            f32::INFINITY,
        ];
        let keys: Vec<u64> = xs.iter().map(|&x| float_key(x)).collect();
        assert_eq!(grade(&keys).ok(), Some(vec![5, 2, 4, 3, 0, 6, 7, 1]));
        let ints: Vec<u64> = [3i64, -1, 3, -7].iter().map(|&x| int_key(x)).collect();
        assert_eq!(grade(&ints).ok(), Some(vec![3, 1, 0, 2]));
    }

    #[test]
    fn large_inputs_sort_on_every_core_stably() {
        let mut seed = 99u64;
        let v: Vec<i64> = (0..300_000)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (seed >> 20) as i64 % 1000 - 500
            })
            .collect();
        let mut want = v.clone();
        want.sort();
        assert_eq!(sort_ints(&v).ok(), Some(want));
        let keys: Vec<u64> = v.iter().map(|&x| int_key(x)).collect();
        let mut stable: Vec<usize> = (0..v.len()).collect();
        stable.sort_by_key(|&i| v[i]);
        assert_eq!(grade(&keys).ok(), Some(stable));
    }

    #[test]
    fn large_float_inputs_grade_stably_with_nan_last() {
        let mut seed = 7u64;
        let xs: Vec<f32> = (0..300_000)
            .map(|i| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                match i % 97 {
                    0 => f32::NAN,
                    1 => -0.0,
                    2 => 0.0,
                    _ => ((seed >> 40) as f32 - 8_388_608.0) / 1024.0,
                }
            })
            .collect();
        let keys: Vec<u64> = xs.iter().map(|&x| float_key(x)).collect();
        let mut want: Vec<usize> = (0..xs.len()).collect();
        want.sort_by(|&i, &j| match (xs[i].is_nan(), xs[j].is_nan()) {
            (true, true) => std::cmp::Ordering::Equal,
            (true, false) => std::cmp::Ordering::Greater,
            (false, true) => std::cmp::Ordering::Less,
            _ => xs[i].partial_cmp(&xs[j]).unwrap_or(std::cmp::Ordering::Equal),
        });
        assert_eq!(grade(&keys).ok(), Some(want));
    }
}

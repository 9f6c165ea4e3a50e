//! Sorting for `sort`, `grade`, `f.sort` and `f.grade`: a least-significant
//! digit radix sort on 64-bit keys, 8 bits a pass, stable, skipping the
//! passes whose digit is the same for every key (small ranges sort in few
//! passes). Ints and floats become keys that order as unsigned integers do.

/// An Int as a key: the sign bit flipped.
pub fn int_key(x: i64) -> u64 {
    (x as u64) ^ (1 << 63)
}

fn from_int_key(k: u64) -> i64 {
    (k ^ (1 << 63)) as i64
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
    u64::from(ordered)
}

/// The passes (digit shifts) on which the keys differ.
fn passes(keys: &[u64]) -> Vec<u32> {
    let (and, or) = keys.iter().fold((u64::MAX, 0u64), |(a, o), k| (a & k, o | k));
    let differ = and ^ or;
    (0..8)
        .map(|p| p * 8)
        .filter(|s| (differ >> s) & 0xff != 0)
        .collect()
}

/// Ints in ascending order.
pub fn sort_ints(v: &[i64]) -> Vec<i64> {
    let mut keys: Vec<u64> = v.iter().map(|&x| int_key(x)).collect();
    let mut buf = vec![0u64; keys.len()];
    for shift in passes(&keys) {
        let mut count = [0usize; 257];
        for k in &keys {
            count[((k >> shift) & 0xff) as usize + 1] += 1;
        }
        for d in 0..256 {
            count[d + 1] += count[d];
        }
        for &k in &keys {
            let d = ((k >> shift) & 0xff) as usize;
            buf[count[d]] = k;
            count[d] += 1;
        }
        std::mem::swap(&mut keys, &mut buf);
    }
    keys.into_iter().map(from_int_key).collect()
}

/// The stable permutation that orders the keys: position i of the result
/// is the index of the i-th smallest key.
pub fn grade(keys: &[u64]) -> Vec<usize> {
    let mut pairs: Vec<(u64, usize)> = keys.iter().copied().zip(0..).collect();
    let mut buf = vec![(0u64, 0usize); pairs.len()];
    for shift in passes(keys) {
        let mut count = [0usize; 257];
        for (k, _) in &pairs {
            count[((k >> shift) & 0xff) as usize + 1] += 1;
        }
        for d in 0..256 {
            count[d + 1] += count[d];
        }
        for &p in &pairs {
            let d = ((p.0 >> shift) & 0xff) as usize;
            buf[count[d]] = p;
            count[d] += 1;
        }
        std::mem::swap(&mut pairs, &mut buf);
    }
    pairs.into_iter().map(|(_, i)| i).collect()
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
        assert_eq!(sort_ints(&v), want);
        assert_eq!(sort_ints(&[]), Vec::<i64>::new());
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
        assert_eq!(grade(&keys), vec![5, 2, 4, 3, 0, 6, 7, 1]);
        let ints: Vec<u64> = [3i64, -1, 3, -7].iter().map(|&x| int_key(x)).collect();
        assert_eq!(grade(&ints), vec![3, 1, 0, 2]);
    }
}

//! `unique`, `unique-counts`, `searchsorted` and `searchsorted/right`: the
//! sorted distinct atoms of a vector with how often each occurs, and the
//! insertion index of a value among sorted breakpoints (NumPy's
//! `unique(return_counts=True)` and `searchsorted`, J's `~.` of a sorted
//! list and `I.`). Atoms are ordered as `sort` and `f.sort` order them:
//! by the keys of `crate::sort` (Floats ascending, -0.0 equal to 0.0,
//! every NaN equal to every other and after +∞), `#f` before `#t`.
//!
//! The functions here work on rows (one vector, or every row of a frame
//! at once); `intrinsics.rs` runs them on one cell and `batch.rs` over a
//! frame.

use crate::eval::check_size;
use crate::kernel::buffer;
use crate::sort::{float_key, int_key};
use remora_value::{Array, Atom, Boxed, Data, Witness};

/// Why an argument's atoms cannot be ordered.
pub const UNORDERED: &str = "only Int, Float and Bool atoms have an order";

/// Why `searchsorted` gave up on its breakpoints.
pub const UNSORTED: &str = "the breakpoints are not in ascending order";

fn bool_key(b: bool) -> u64 {
    u64::from(b)
}

/// A row's distinct atoms, ascending, and how many times each occurs.
#[derive(Debug)]
pub struct Distinct<V> {
    pub values: V,
    pub counts: Vec<i64>,
}

/// The distinct atoms of each row of `d` atoms of `data`, ascending (the
/// first of equal atoms stands for them all), and how many times each
/// occurs: for every row, its values and its counts.
pub fn unique_rows<F>(data: &Data<F>, d: usize) -> Result<Vec<Distinct<Data<F>>>, &'static str> {
    fn rows<T: Copy>(
        v: &[T],
        d: usize,
        key: impl Fn(T) -> u64,
    ) -> Result<Vec<Distinct<Vec<T>>>, &'static str> {
        let mut out = Vec::new();
        if d == 0 {
            return Ok(out);
        }
        let mut keys: Vec<u64> = buffer(d)?;
        for row in v.chunks_exact(d) {
            keys.clear();
            keys.extend(row.iter().map(|&x| key(x)));
            let order = if d <= 64 {
                let mut idx: Vec<usize> = (0..d).collect();
                idx.sort_by_key(|&i| keys[i]);
                idx
            } else {
                crate::sort::grade(&keys)?
            };
            let mut values = Vec::new();
            let mut counts: Vec<i64> = Vec::new();
            let mut last = None;
            for i in order {
                match counts.last_mut() {
                    Some(c) if last == Some(keys[i]) => *c += 1,
                    _ => {
                        values.push(row[i]);
                        counts.push(1);
                        last = Some(keys[i]);
                    }
                }
            }
            out.push(Distinct { values, counts });
        }
        Ok(out)
    }
    // Equal Ints (and Bools) are the same atom: the values themselves
    // sorted (the radix sort of `sort`), then runs counted.
    fn sorted_runs<T: Copy + PartialEq>(sorted: &[T]) -> Distinct<Vec<T>> {
        let mut values: Vec<T> = Vec::new();
        let mut counts: Vec<i64> = Vec::new();
        for &x in sorted {
            match (values.last(), counts.last_mut()) {
                (Some(&last), Some(c)) if last == x => *c += 1,
                _ => {
                    values.push(x);
                    counts.push(1);
                }
            }
        }
        Distinct { values, counts }
    }
    Ok(match data {
        Data::Int(v) if d > 64 => {
            let mut out = Vec::new();
            for row in v.chunks_exact(d) {
                let r = sorted_runs(&crate::sort::sort_ints(row)?);
                out.push(Distinct {
                    values: Data::Int(r.values.into()),
                    counts: r.counts,
                });
            }
            out
        }
        Data::Int(v) => rows(v, d, int_key)?
            .into_iter()
            .map(|r| Distinct {
                values: Data::Int(r.values.into()),
                counts: r.counts,
            })
            .collect(),
        Data::Float(v) => rows(v, d, float_key)?
            .into_iter()
            .map(|r| Distinct {
                values: Data::Float(r.values.into()),
                counts: r.counts,
            })
            .collect(),
        Data::Bool(v) => rows(v, d, bool_key)?
            .into_iter()
            .map(|r| Distinct {
                values: Data::Bool(r.values.into()),
                counts: r.counts,
            })
            .collect(),
        Data::Atoms(_) | Data::Records(_) => return Err(UNORDERED),
    })
}

/// `unique` (or, `counts`, `unique-counts`) of every row of `d` atoms of
/// `data`: one box per row, its witness the number of distinct atoms.
/// `rows` is how many rows there are (some, when `d` is 0).
pub fn unique_boxes<F: Clone>(
    data: &Data<F>,
    rows: usize,
    d: usize,
    counts: bool,
) -> Result<Vec<Atom<F>>, &'static str> {
    let boxed = |values: Data<F>, k: usize| {
        Atom::Box(Boxed {
            witnesses: vec![Witness::Dim(k as i64)],
            payload: Array {
                shape: vec![k],
                data: values,
            },
        })
    };
    if d == 0 {
        let empty = if counts {
            Data::Int(Vec::new().into())
        } else {
            data.empty_like()
        };
        if matches!(data, Data::Atoms(_) | Data::Records(_)) {
            return Err(UNORDERED);
        }
        return Ok(vec![boxed(empty, 0); rows]);
    }
    Ok(unique_rows(data, d)?
        .into_iter()
        .map(|r| {
            let k = r.counts.len();
            if counts {
                boxed(Data::Int(r.counts.into()), k)
            } else {
                boxed(r.values, k)
            }
        })
        .collect())
}

/// `unique`/`unique-counts` over a frame: the argument's shape is the
/// frame then the vector's length; the result is the frame of boxes.
pub fn unique_framed<F: Clone>(name: &str, xs: &Array<F>) -> Result<Array<F>, &'static str> {
    let Some((&d, frame)) = xs.shape.split_last() else {
        return Err("internal error: unique of a scalar");
    };
    let rows: usize = frame.iter().product();
    check_size(rows, remora_syntax::Span::default()).map_err(|_| crate::kernel::OUT_OF_MEMORY)?;
    let boxes = unique_boxes(&xs.data, rows, d, name == "unique-counts")?;
    Ok(Array {
        shape: frame.to_vec(),
        data: Data::Atoms(boxes.into()),
    })
}

/// The insertion index of `v` in the ascending `row`: how many of its atoms
/// are less than `v` (`right`: not greater than `v`).
fn position<T: Copy>(row: &[T], v: T, key: &impl Fn(T) -> u64, right: bool) -> usize {
    let k = key(v);
    if right {
        row.partition_point(|&x| key(x) <= k)
    } else {
        row.partition_point(|&x| key(x) < k)
    }
}

/// For each value, its insertion index in the row of `d` breakpoints that
/// starts where `starts` says (one start per value, in order): one binary
/// search each, or, once a row has served as many values as it has
/// breakpoints, a look-up in its [`Buckets`] then a search of the few
/// breakpoints there. Each row is checked to be ascending once (the first
/// time it is met); one that is not is an error.
fn search_rows<T: Copy>(
    rows: &[T],
    values: &[T],
    starts: impl Iterator<Item = usize>,
    d: usize,
    key: impl Fn(T) -> u64,
    right: bool,
) -> Result<Vec<i64>, &'static str> {
    let mut out = buffer(values.len())?;
    let mut checked = std::collections::HashSet::new();
    let mut last = None;
    // The current row's keys and buckets, once it has served `d` values.
    let mut served = 0;
    let mut indexed: Option<(Vec<u64>, Buckets)> = None;
    for (&v, s) in values.iter().zip(starts) {
        let row = rows
            .get(s..s.saturating_add(d))
            .ok_or("internal error: searchsorted's breakpoints do not fit")?;
        if last != Some(s) {
            if !checked.contains(&s) {
                if !row.windows(2).all(|w| key(w[0]) <= key(w[1])) {
                    return Err(UNSORTED);
                }
                checked.insert(s);
            }
            last = Some(s);
            served = 0;
            indexed = None;
        }
        served += 1;
        if served == d.max(MIN_INDEXED) {
            let keys: Vec<u64> = row.iter().map(|&x| key(x)).collect();
            indexed = Buckets::of(&keys).map(|b| (keys, b));
        }
        let at = match &indexed {
            Some((keys, buckets)) => buckets.position(keys, key(v), right),
            None => position(row, v, &key, right),
        };
        out.push(at as i64);
    }
    Ok(out)
}

/// Rows shorter than this are searched without [`Buckets`].
const MIN_INDEXED: usize = 16;

/// An ascending row of keys indexed by the keys' leading bits: the range
/// from its least key to its greatest cut into up to twice as many
/// buckets as it has keys, each bucket holding where the keys in it
/// begin and end. A value's insertion index is then found among the keys
/// of its bucket alone (one or two for evenly spread keys; all of them
/// at worst, where it is a binary search as before).
struct Buckets {
    least: u64,
    greatest: u64,
    shift: u32,
    bounds: Vec<(usize, usize)>,
}

impl Buckets {
    fn of(keys: &[u64]) -> Option<Buckets> {
        let (&least, &greatest) = (keys.first()?, keys.last()?);
        let span = greatest.checked_sub(least).filter(|&s| s > 0)?;
        let wanted = (keys.len() * 2).next_power_of_two().min(1 << 16);
        let shift = (u64::BITS - span.leading_zeros()).saturating_sub(wanted.trailing_zeros());
        let count = usize::try_from(span >> shift).ok()?.checked_add(1)?;
        let mut bounds = Vec::with_capacity(count);
        let (mut begin, mut end) = (0, 0);
        for b in 0..count as u64 {
            let first = least + (b << shift);
            let last = first.saturating_add((1u64 << shift) - 1);
            while keys.get(begin).is_some_and(|&k| k < first) {
                begin += 1;
            }
            end = end.max(begin);
            while keys.get(end).is_some_and(|&k| k <= last) {
                end += 1;
            }
            bounds.push((begin, end));
        }
        Some(Buckets {
            least,
            greatest,
            shift,
            bounds,
        })
    }

    /// `v`'s insertion index in `keys` (the row the buckets index): how
    /// many keys are less than `v` (`right`: not greater).
    fn position(&self, keys: &[u64], v: u64, right: bool) -> usize {
        if v < self.least {
            return 0;
        }
        if v > self.greatest {
            return keys.len();
        }
        let (begin, end) = usize::try_from((v - self.least) >> self.shift)
            .ok()
            .and_then(|b| self.bounds.get(b))
            .copied()
            .unwrap_or((0, keys.len()));
        let within = keys.get(begin..end).unwrap_or_default();
        begin
            + if right {
                within.partition_point(|&x| x <= v)
            } else {
                within.partition_point(|&x| x < v)
            }
    }
}

/// `searchsorted` (left) or `searchsorted/right` of every value of
/// `values` in the row of `d` breakpoints of `rows` that its start names.
pub fn search<F>(
    rows: &Data<F>,
    values: &Data<F>,
    starts: impl Iterator<Item = usize>,
    d: usize,
    right: bool,
) -> Result<Vec<i64>, &'static str> {
    match (rows, values) {
        (Data::Int(b), Data::Int(v)) => search_rows(b, v, starts, d, int_key, right),
        (Data::Float(b), Data::Float(v)) => search_rows(b, v, starts, d, float_key, right),
        (Data::Bool(b), Data::Bool(v)) => search_rows(b, v, starts, d, bool_key, right),
        _ => Err(UNORDERED),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The buckets' insertion indices are `partition_point`'s, for rows
    /// of repeated, clustered, evenly spread and extreme keys, values on,
    /// between and outside them, left and right.
    #[test]
    fn buckets_agree_with_partition_point() {
        let rows: Vec<Vec<u64>> = vec![
            (0..40).map(|i| i / 3 * 5).collect(),
            (0..100).map(|i| i * i * i).collect(),
            (0..64).map(|i| if i < 60 { 7 } else { 1 << 40 }).collect(),
            vec![0, 1, u64::MAX - 1, u64::MAX],
            (0..33).map(|i| u64::MAX / 2 + i * (1 << 50)).collect(),
            vec![3, 3],
        ];
        for keys in rows {
            let Some(buckets) = Buckets::of(&keys) else {
                assert!(keys.first() == keys.last());
                continue;
            };
            let mut values: Vec<u64> = keys
                .iter()
                .flat_map(|&k| [k.wrapping_sub(1), k, k.wrapping_add(1)])
                .collect();
            values.extend([0, 1, u64::MAX, u64::MAX / 2, 12345]);
            for v in values {
                for right in [false, true] {
                    let want = keys.partition_point(|&x| if right { x <= v } else { x < v });
                    assert_eq!(buckets.position(&keys, v, right), want, "{keys:?} {v} {right}");
                }
            }
        }
    }

    fn ints(v: &[i64]) -> Data {
        Data::Int(v.to_vec().into())
    }

    #[test]
    fn unique_of_rows() {
        let r = unique_rows(&ints(&[3, 1, 3, 2, 2, 2]), 3);
        let Ok([a, b]) = r.as_deref() else {
            return assert_eq!(format!("{r:?}"), "two rows");
        };
        assert!(matches!(&a.values, Data::Int(v) if **v == [1, 3]), "{a:?}");
        assert_eq!(a.counts, [1, 2]);
        assert!(matches!(&b.values, Data::Int(v) if **v == [2]), "{b:?}");
        assert_eq!(b.counts, [3]);
    }

    #[test]
    fn unique_floats_merge_zeros_and_nans() {
        let nan = f32::NAN;
        let data: Data = Data::Float(vec![nan, 0.0, -0.0, 1.0, nan].into());
        let r = unique_rows(&data, 5);
        let Ok(
            [
                Distinct {
                    values: Data::Float(v),
                    counts,
                },
            ],
        ) = r.as_deref()
        else {
            return assert_eq!(format!("{r:?}"), "one row of Floats");
        };
        assert_eq!(counts, &[2, 1, 2]);
        assert_eq!(v[0].to_bits(), 0.0f32.to_bits());
        assert_eq!(v[1], 1.0);
        assert!(v[2].is_nan());
    }

    #[test]
    fn search_left_and_right() {
        let b = ints(&[1, 3, 3, 5]);
        let v = ints(&[0, 1, 3, 4, 5, 6]);
        let starts = std::iter::repeat(0);
        assert_eq!(
            search(&b, &v, starts.clone(), 4, false),
            Ok(vec![0, 0, 1, 3, 3, 4])
        );
        assert_eq!(search(&b, &v, starts, 4, true), Ok(vec![0, 1, 3, 3, 4, 4]));
        let unsorted = ints(&[1, 0]);
        assert_eq!(
            search(&unsorted, &ints(&[0]), std::iter::repeat(0), 2, false),
            Err(UNSORTED)
        );
    }
}

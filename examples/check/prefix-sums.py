# NumPy check for examples/prefix-sums.remora: running totals (np.cumsum),
# running maxima (np.maximum.accumulate), the exclusive scan of the flags of
# the positive changes, and the positive changes themselves (boolean mask),
# twice. Remora prints each result as (box length vector), so each is
# printed as its length, then its items.
import numpy as np

day = np.arange(12, dtype=np.int64)
change = (7 * day) % 11 - 4
gain = change > 0

results = [
    np.cumsum(change),
    np.maximum.accumulate(change),
    np.concatenate([[0], np.cumsum(gain.astype(np.int64))]),
    change[gain],
    change[gain],
]
print(" ".join(" ".join([str(len(r))] + [str(int(v)) for v in r]) for r in results))

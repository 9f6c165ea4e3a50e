# NumPy check for examples/histogram.remora: 60 scores (-1 = absent) in ten
# bins of width 10; prints the counts per bin (np.bincount), the best score
# per bin (np.maximum.at, -1 when empty) and the last student per bin
# (-1 when empty).
import numpy as np

student = np.arange(60, dtype=np.int64)
score = (37 * student + 11 * student * student) % 61 + (13 * student) % 41
score[student % 7 == 6] = -1
present = score >= 0
bins = np.minimum(score // 10, 9)

counts = np.bincount(bins[present], minlength=10)
best = np.full(10, -1, dtype=np.int64)
np.maximum.at(best, bins[present], score[present])
last = np.array([student[present & (bins == b)].max(initial=-1) for b in range(10)])

print(" ".join(str(int(v)) for v in np.concatenate([counts, best, last])))

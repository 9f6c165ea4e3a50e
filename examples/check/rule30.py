# NumPy check for examples/rule30.remora: Rule 30 (left XOR (self OR
# right)) on a ring of 31 cells, generations 0 to 15 from one live cell.
import numpy as np

row = np.zeros(31, dtype=bool)
row[15] = True
rows = [row]
for _ in range(15):
    left, right = np.roll(row, 1), np.roll(row, -1)
    row = left ^ (row | right)
    rows.append(row)

print(" ".join(str(int(v)) for v in np.array(rows).ravel()))

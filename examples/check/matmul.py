# NumPy check for examples/matmul.remora: products of several shapes with
# the @ operator. Remora prints each result as a box, (box rows (box columns
# matrix)), so each result is printed here as its two dimensions, then its
# elements.
import numpy as np

f32 = np.float32
a = f32(0.5) * np.arange(12, dtype=f32).reshape(3, 4) - f32(2.0)
b = np.cos(np.arange(8, dtype=f32).reshape(4, 2))
ab = a @ b

results = [
    ab,
    ab,
    b.T @ a.T,
    (np.stack([a, f32(2.0) * a]) @ b).reshape(6, 2),
    (np.array([1.0, 0.0, -1.0], dtype=f32) @ ab).reshape(1, 2),
]
numbers = []
for r in results:
    numbers += [str(d) for d in r.shape] + [repr(float(x)) for x in r.ravel()]
print(" ".join(numbers))

# NumPy check for examples/mandelbrot.remora: escape counts (at most 50
# steps of z <- z^2 + c from z = 0, while |z|^2 <= 4) on a 16 x 32 grid over
# [-2, 1] x [-1.2, 1.2], float32, iterating the whole grid with a mask.
import numpy as np

f32 = np.float32
re = f32(-2.0) + (f32(3.0) / f32(31.0)) * np.arange(32, dtype=f32)
im = f32(1.2) - (f32(2.4) / f32(15.0)) * np.arange(16, dtype=f32)
cr, ci = np.meshgrid(re, im)          # [16, 32], row = imaginary part

zr = np.zeros_like(cr)
zi = np.zeros_like(ci)
count = np.zeros(cr.shape, dtype=np.int64)
for _ in range(50):
    live = zr * zr + zi * zi <= f32(4.0)
    zr_new = zr * zr - zi * zi + cr
    zi_new = f32(2.0) * (zr * zi) + ci
    zr = np.where(live, zr_new, zr)
    zi = np.where(live, zi_new, zi)
    count += live

print(" ".join(str(int(n)) for n in count.ravel()))

# NumPy check for examples/blend.remora: lerp = lo*(1-a) + hi*a with NumPy
# broadcasting (weights given explicit axes), on two 8 x 8 RGB images;
# prints the pixel blend, then the mean colour of each blended image: the
# dimmed image, the per-pixel blend, the per-channel blend and the five
# frames of the fade.
import numpy as np

f32 = np.float32


def lerp(lo, hi, a):
    return lo * (f32(1.0) - a) + hi * a


row, column = np.meshgrid(np.arange(8, dtype=f32), np.arange(8, dtype=f32), indexing="ij")
img_a = np.stack([f32(32) * row, f32(32) * column, f32(255) - f32(16) * (row + column)], axis=-1)
light = (np.add.outer(np.arange(8), np.arange(8)) % 2 == 0)
img_b = np.stack([np.where(light, f32(255), f32(0)), np.where(light, f32(255), f32(0)),
                  np.where(light, f32(255), f32(64))], axis=-1).astype(f32)

pixel = lerp(np.array([3, 8, 190], f32), np.array([120, 150, 0], f32), f32(0.2))
dimmed = lerp(f32(0.0), img_a, f32(0.6))
per_pixel = lerp(img_a, img_b, (column / f32(7.0))[:, :, None])
per_channel = lerp(img_a, img_b, np.array([0.25, 0.5, 0.75], f32))
alphas = np.array([0.0, 0.25, 0.5, 0.75, 1.0], f32)
video = lerp(img_a[None], img_b[None], alphas[:, None, None, None])   # [5, 8, 8, 3]

rows = [pixel] + [im.mean(axis=(0, 1)) for im in (dimmed, per_pixel, per_channel)] \
    + list(video.mean(axis=(1, 2)))
print(" ".join(repr(float(v)) for r in rows for v in r))

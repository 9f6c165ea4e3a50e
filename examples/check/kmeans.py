# NumPy check for examples/kmeans.remora: five Lloyd steps of k-means (k = 3)
# on 24 points, cluster sums with np.add.at and sizes with np.bincount;
# prints one row per cluster: centroid x, y and cluster size.
import numpy as np

f32 = np.float32
idx = np.arange(24)
i = idx.astype(f32)
angle = (f32(2.0) * f32(np.pi) / f32(3.0)) * (idx % 3).astype(f32)
points = np.stack([f32(3) * np.cos(angle) + f32(1.5) * np.sin(f32(2.1) * i),
                   f32(3) * np.sin(angle) + f32(1.5) * np.cos(f32(1.7) * i)], axis=1).astype(f32)
centroids = points[[0, 3, 6]].copy()


def assign(centroids):
    d = ((points[:, None, :] - centroids[None, :, :]) ** 2).sum(axis=-1)
    return d.argmin(axis=1)


for _ in range(5):
    cluster = assign(centroids)
    sums = np.zeros_like(centroids)
    np.add.at(sums, cluster, points)
    sizes = np.bincount(cluster, minlength=3)
    centroids = np.where(sizes[:, None] > 0,
                         sums / np.maximum(sizes, 1)[:, None].astype(f32), centroids)

sizes = np.bincount(assign(centroids), minlength=3)
table = np.concatenate([centroids, sizes[:, None].astype(f32)], axis=1)
print(" ".join(repr(float(x)) for x in table.ravel()))

# NumPy check for examples/nbody.remora: ten semi-implicit Euler steps of
# an 8-body gravitational system (G = 1, softening 0.01, dt 0.01), float32.
import numpy as np

f32 = np.float32
i = np.arange(8, dtype=f32)
angle = (f32(np.pi) / f32(4)) * i
radius = f32(1) + f32(0.1) * i
m = f32(1) + f32(0.1) * i
pos = np.stack([radius * np.cos(angle), radius * np.sin(angle),
                f32(0.1) * np.sin(f32(1.3) * i)], axis=1).astype(f32)
vel = np.stack([f32(-0.3) * np.sin(angle), f32(0.3) * np.cos(angle),
                np.zeros(8, f32)], axis=1).astype(f32)

eps, dt = f32(0.01), f32(0.01)


def acceleration(pos):
    d = pos[None, :, :] - pos[:, None, :]          # d[i, j] = pos[j] - pos[i]
    r2 = (d * d).sum(axis=-1) + eps
    w = m[None, :] / (r2 * np.sqrt(r2))
    return (w[:, :, None] * d).sum(axis=1)


for _ in range(10):
    vel = vel + dt * acceleration(pos)
    pos = pos + dt * vel

print(" ".join(repr(float(x)) for x in np.concatenate([pos.ravel(), vel.ravel()])))

"""The NumPy and JAX sides of `cargo bench --bench ad`: the gradient of an
MLP's loss (784→128→10, tanh hidden layer, softmax cross-entropy, mean over
the batch), float32, on the same generated data as the Rust side
(`benches/ad.rs`).

    python mlp_numpy.py numpy|jax REPS [--peak] B=256 D=784 H=128 K=10

prints `SECONDS CHECKSUM PEAK_KIB` (as `benches/interp/numpy_rows.py`):
the median time of REPS gradients, the float64 sum of the gradient with
respect to W1, and the process's peak resident memory. `numpy` is the
backward pass written by hand (all four gradients); `jax` is
`jit(grad(loss))` on the CPU (the first call, which compiles, is not
timed). Without JAX, `jax` exits with status 3.
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interp"))
from numpy_rows import floats, peak_kib  # noqa: E402

f32 = np.float32


def data(p):
    b, d, h, k = p["B"], p["D"], p["H"], p["K"]
    x = floats(b * d, 1).reshape(b, d)
    w1 = (floats(d * h, 2) - f32(0.5)) * f32(0.1)
    w1 = w1.reshape(d, h)
    b1 = (floats(h, 3) - f32(0.5)) * f32(0.1)
    w2 = ((floats(h * k, 4) - f32(0.5)) * f32(0.2)).reshape(h, k)
    b2 = (floats(k, 5) - f32(0.5)) * f32(0.1)
    labels = (np.arange(b) * 7) % k
    y = np.zeros((b, k), dtype=f32)
    y[np.arange(b), labels] = f32(1)
    return x, y, (w1, b1, w2, b2)


def numpy_grad(x, y, params):
    w1, b1, w2, b2 = params
    n = f32(x.shape[0])

    def run():
        z = x @ w1 + b1
        hidden = np.tanh(z)
        logits = hidden @ w2 + b2
        m = logits.max(axis=1, keepdims=True)
        e = np.exp(logits - m)
        p = e / e.sum(axis=1, keepdims=True)
        dlogits = (p - y) / n
        dw2 = hidden.T @ dlogits
        db2 = dlogits.sum(axis=0)
        dhidden = dlogits @ w2.T
        dz = dhidden * (f32(1) - hidden * hidden)
        dw1 = x.T @ dz
        db1 = dz.sum(axis=0)
        return dw1, db1, dw2, db2
    return run


def jax_grad(x, y, params):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        sys.exit(3)
    jax.config.update("jax_platforms", "cpu")

    def loss(ps, x, y):
        w1, b1, w2, b2 = ps
        hidden = jnp.tanh(x @ w1 + b1)
        logits = hidden @ w2 + b2
        return jnp.mean(jax.nn.logsumexp(logits, axis=1) - jnp.sum(y * logits, axis=1))
    g = jax.jit(jax.grad(loss))
    ps = tuple(jnp.asarray(a) for a in params)
    xj, yj = jnp.asarray(x), jnp.asarray(y)
    jax.block_until_ready(g(ps, xj, yj))

    def run():
        return jax.block_until_ready(g(ps, xj, yj))
    return run


def main():
    side, reps = sys.argv[1], int(sys.argv[2])
    peak = "--peak" in sys.argv
    p = {k: int(v) for k, v in (a.split("=") for a in sys.argv[3:] if "=" in a)}
    x, y, params = data(p)
    run = (numpy_grad if side == "numpy" else jax_grad)(x, y, params)
    times = []
    for _ in range(1 if peak else reps):
        t0 = time.perf_counter()
        r = run()
        times.append(time.perf_counter() - t0)
    times.sort()
    checksum = float(np.sum(np.asarray(r[0]), dtype=np.float64))
    print(f"{times[len(times) // 2]} {checksum} {peak_kib()}")


if __name__ == "__main__":
    main()

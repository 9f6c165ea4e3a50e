"""The NumPy side of `cargo bench --bench styles`: each workload once,
written the fastest natural NumPy way (float32 throughout), on the same
generated data as the Rust side (`benches/styles.rs`'s `arguments`).
Every Remora formulation of a workload is compared with this one.

    python numpy_styles.py WORKLOAD REPS [--peak] KEY=VALUE...

prints `SECONDS CHECKSUM PEAK_KIB`: the median time of REPS runs of the
computation alone, the float64 sum of its result, and the process's peak
resident memory (with --peak the computation runs once).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interp"))
from numpy_rows import floats, main, nbody_accel, life_run, mandelbrot_run  # noqa: E402

f32 = np.float32


def setup(w, p):
    n = p.get("N")
    if w == "horner":
        xs = floats(n, 1) * f32(2) - f32(1)
        cs = floats(p["C"], 2) - f32(0.5)
        return lambda: np.polyval(cs, xs)
    if w == "matmul":
        a = floats(n * n, 1).reshape(n, n) - f32(0.5)
        b = floats(n * n, 2).reshape(n, n) - f32(0.5)
        return lambda: a @ b
    if w == "softmax":
        x = floats(p["R"] * p["C"], 1).reshape(p["R"], p["C"]) * f32(4)

        def run():
            e = np.exp(x - x.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)
        return run
    if w == "logsumexp":
        x = floats(p["R"] * p["C"], 1).reshape(p["R"], p["C"]) * f32(4)

        def run():
            m = x.max(axis=1)
            return m + np.log(np.exp(x - m[:, None]).sum(axis=1))
        return run
    if w == "prefix":
        xs = floats(n, 1) - f32(0.5)
        return lambda: np.cumsum(xs)
    if w == "compact":
        xs = floats(n, 1)
        return lambda: xs[xs > f32(0.5)]
    if w == "gather":
        xs = floats(n, 1)
        idx = (np.arange(n, dtype=np.int64) * 7919 + 12345) % n
        return lambda: xs[idx]
    if w == "heat":
        u0 = floats(n, 1)
        r, two = f32(0.25), f32(2)

        def run():
            u = u0
            for _ in range(p["STEPS"]):
                u = u + r * ((np.roll(u, 1) + np.roll(u, -1)) - two * u)
            return u
        return run
    if w == "correlate":
        k = p["K"]
        xs, ws = floats(n, 1), floats(k, 2)
        return lambda: np.correlate(xs, ws, "valid")
    if w == "nbody":
        ps = (floats(3 * n, 1) * f32(10)).reshape(n, 3)
        ms = floats(n, 2) + f32(0.5)
        return lambda: nbody_accel(ps, ms)
    if w == "life":
        return life_run(n, p["STEPS"])
    if w == "mandelbrot":
        return mandelbrot_run(n, p["ITERS"])
    if w == "histogram":
        xs = floats(n, 1)
        b = p["B"]
        return lambda: np.bincount((xs * f32(b)).astype(np.int64), minlength=b)
    if w == "blackscholes":
        s = floats(n, 1) * f32(100) + f32(50)
        k = floats(n, 2) * f32(100) + f32(50)
        t = floats(n, 3) * f32(2) + f32(0.25)
        return lambda: black_scholes(s, k, t)
    if w == "nearest":
        ps = floats(2 * n, 1).reshape(n, 2)
        cs = floats(2 * p["K"], 2).reshape(p["K"], 2)

        def run():
            d = ps[:, None, :] - cs[None, :, :]
            return (d * d).sum(axis=2).argmin(axis=1)
        return run
    if w == "blur":
        x = floats(n * n, 1).reshape(n, n)

        def run():
            s = x[:-2, :-2] + x[:-2, 1:-1] + x[:-2, 2:]
            s = s + x[1:-1, :-2] + x[1:-1, 1:-1] + x[1:-1, 2:]
            s = s + x[2:, :-2] + x[2:, 1:-1] + x[2:, 2:]
            return s / f32(9)
        return run
    if w == "colscale":
        x = floats(p["R"] * p["C"], 1).reshape(p["R"], p["C"])

        def run():
            lo, hi = x.min(axis=0), x.max(axis=0)
            return (x - lo) / (hi - lo)
        return run
    if w == "colsoftmax":
        x = floats(p["R"] * p["C"], 1).reshape(p["R"], p["C"])

        def run():
            e = np.exp(x - x.max(axis=0))
            return e / e.sum(axis=0)
        return run
    if w == "matvec":
        m = floats(p["R"] * p["C"], 1).reshape(p["R"], p["C"])
        v = floats(p["C"], 2)
        return lambda: m @ v
    if w == "downsample":
        x = floats(n * n, 1).reshape(n, n)
        h = p["H"]
        return lambda: x.reshape(h, 2, h, 2).mean(axis=(1, 3))
    if w == "argmax":
        x = floats(p["R"] * p["C"], 1).reshape(p["R"], p["C"])
        return lambda: x.argmax(axis=1)
    if w == "mask":
        x = floats(n, 1)
        return lambda: np.where(x > f32(0.5), x * x, f32(1) - x)
    if w == "runmean":
        x = floats(n, 1)
        k = np.full(p["W"], f32(1) / f32(p["W"]), dtype=f32)
        return lambda: np.convolve(x, k, "valid")
    if w == "distmat":
        pts = (floats(3 * n, 1) * f32(10)).reshape(n, 3)

        def run():
            d = pts[:, None, :] - pts[None, :, :]
            return np.sqrt((d * d).sum(axis=2))
        return run
    if w == "topk":
        x = floats(p["R"] * p["C"], 1).reshape(p["R"], p["C"])
        return lambda: np.sort(x, axis=1)[:, -p["K"]:]
    if w == "sortby":
        x = floats(p["R"] * p["C"], 1).reshape(p["R"], p["C"])
        return lambda: np.take_along_axis(x, np.argsort(np.abs(x), axis=1, kind="stable"), axis=1)
    if w == "gather2d":
        x = floats(n * n, 1).reshape(n, n)
        i = np.arange(n, dtype=np.int64)

        def run():
            return x[(i[:, None] + 3 * i[None, :]) % n, (5 * i[:, None] + i[None, :]) % n]
        return run
    # The workloads written after the compiler was tuned.
    if w == "cosine":
        x = floats(n * p["D"], 1).reshape(n, p["D"]) - f32(0.5)

        def run():
            u = x / np.sqrt((x * x).sum(axis=1, keepdims=True))
            return u @ u.T
        return run
    if w == "attention":
        L, d = p["L"], p["DK"]
        q, k, v = (floats(L * d, s).reshape(L, d) - f32(0.5) for s in (1, 2, 3))

        def run():
            s = (q @ k.T) / np.sqrt(f32(d))
            e = np.exp(s - s.max(axis=1, keepdims=True))
            return (e / e.sum(axis=1, keepdims=True)) @ v
        return run
    if w == "floyd":
        d0 = (floats(n * n, 1) * f32(10) + f32(1)).reshape(n, n)

        def run():
            d = d0
            for k in range(n):
                d = np.minimum(d, d[:, k, None] + d[None, k, :])
            return d
        return run
    if w == "minplus":
        d = (floats(n * n, 1) * f32(10) + f32(1)).reshape(n, n)

        def run():
            r = np.full((n, n), f32(1e30), dtype=f32)
            for k in range(n):
                np.minimum(r, d[:, k, None] + d[None, k, :], out=r)
            return r
        return run
    if w == "colscan":
        x = floats(p["R"] * p["C"], 1).reshape(p["R"], p["C"])
        return lambda: np.cumsum(x, axis=0)
    if w == "sat":
        x = floats(n * n, 1).reshape(n, n)
        return lambda: np.cumsum(np.cumsum(x, axis=0), axis=1)
    if w == "knn":
        q = floats(2 * p["Q"], 1).reshape(p["Q"], 2)
        pts = floats(2 * p["P"], 2).reshape(p["P"], 2)
        k = p["K"]

        def run():
            e = q[:, None, :] - pts[None, :, :]
            d = (e * e).sum(axis=2)
            return np.sort(np.partition(d, k - 1, axis=1)[:, :k], axis=1)
        return run
    if w == "whist":
        xs, ws = floats(n, 1), floats(n, 2)
        b = p["B"]
        return lambda: np.bincount((xs * f32(b)).astype(np.int64), weights=ws, minlength=b).astype(f32)
    if w == "clipnorm":
        x = floats(n, 1)

        def run():
            y = np.clip(x, f32(0.1), f32(0.9))
            lo = y.min()
            return (y - lo) / (y.max() - lo)
        return run
    if w == "kron":
        a = floats(p["M"] * p["N"], 1).reshape(p["M"], p["N"])
        b = floats(p["P"] * p["Q"], 2).reshape(p["P"], p["Q"])
        return lambda: np.kron(a, b)
    if w == "movavg":
        x = floats(n, 1) - f32(0.5)
        wd = p["W"]

        def run():
            c = np.concatenate(([f32(0)], np.cumsum(x)))
            return (c[wd:] - c[:-wd]) / f32(wd)
        return run
    if w == "matpow":
        a = floats(9 * p["B"], 1).reshape(p["B"], 3, 3)
        return lambda: np.linalg.matrix_power(a, p["P"])
    # Workloads written from outside the tuned matrix (issue 11's unseen
    # formulations): z-scores, running max and product, Sobel, grey,
    # rotation, differences, one-hot means, segmented sums, Collatz,
    # sliding maximum, bilinear resampling.
    if w == "zscore":
        x = floats(p["R"] * p["C"], 1).reshape(p["R"], p["C"])

        def run():
            d = x - x.mean(axis=1, keepdims=True)
            return d / np.sqrt((d * d).mean(axis=1, keepdims=True))
        return run
    if w == "runmax":
        xs = floats(n, 1)
        return lambda: np.maximum.accumulate(xs)
    if w == "cumprod":
        xs = f32(1) + (floats(n, 1) - f32(0.5)) * f32(0.001)
        return lambda: np.cumprod(xs)
    if w == "sobel":
        x = floats(n * n, 1).reshape(n, n)

        def run():
            gx = (x[:-2, 2:] + f32(2) * x[1:-1, 2:] + x[2:, 2:]) - (x[:-2, :-2] + f32(2) * x[1:-1, :-2] + x[2:, :-2])
            gy = (x[2:, :-2] + f32(2) * x[2:, 1:-1] + x[2:, 2:]) - (x[:-2, :-2] + f32(2) * x[:-2, 1:-1] + x[:-2, 2:])
            return np.sqrt(gx * gx + gy * gy)
        return run
    if w == "grey":
        img = floats(n * n * 3, 1).reshape(n, n, 3)
        wts = np.array([0.299, 0.587, 0.114], dtype=f32)
        return lambda: img @ wts
    if w == "rot90":
        x = floats(n * n, 1).reshape(n, n)
        return lambda: np.ascontiguousarray(np.rot90(x))
    if w == "diff":
        xs = floats(n, 1)
        return lambda: np.abs(np.diff(xs))
    if w == "onehot":
        labels = np.arange(n, dtype=np.int64) * 7919 % p["K"]
        xs = floats(n, 1)

        def run():
            onehot = (labels[:, None] == np.arange(p["K"])).astype(f32)
            return (onehot * xs[:, None]).sum(axis=0) / onehot.sum(axis=0)
        return run
    if w == "segsum":
        flags = segment_flags(n)
        xs = floats(n, 1) - f32(0.5)
        return lambda: np.add.reduceat(xs, np.flatnonzero(flags))
    if w == "collatz":
        return lambda: collatz(np.arange(1, n + 1, dtype=np.int64))
    if w == "slidemax":
        xs = floats(n, 1)
        k = p["W"]

        def run():
            m = xs[: n - k + 1].copy()
            for j in range(1, k):
                np.maximum(m, xs[j: n - k + 1 + j], out=m)
            return m
        return run
    if w == "bilinear":
        img = floats(n * n, 1).reshape(n, n)
        k = np.arange(p["M"], dtype=f32)

        def run():
            y, x = k * f32(0.6) + f32(0.3), k * f32(0.7) + f32(0.25)
            y0, x0 = np.floor(y).astype(np.int64), np.floor(x).astype(np.int64)
            fy, fx = (y - y0)[:, None], x - x0
            r0, r1 = img[y0], img[y0 + 1]
            top = r0[:, x0] * (f32(1) - fx) + r0[:, x0 + 1] * fx
            bot = r1[:, x0] * (f32(1) - fx) + r1[:, x0 + 1] * fx
            return top * (f32(1) - fy) + bot * fy
        return run
    # The third round of unseen workloads (written after the matrix was
    # tuned, measured on both engines): many polynomials, a logistic
    # regression gradient, heat with fixed ends, maximum drawdown, L1
    # distances, 2×2 pooling of a wide image, run lengths, many short dot
    # products, exponential moving averages, rows over their maxima.
    if w == "polyval":
        cs = (floats(p["M"] * p["K"], 2) - f32(0.5)).reshape(p["M"], p["K"])
        xs = floats(p["P"], 1) * f32(2) - f32(1)

        def run():
            r = np.broadcast_to(cs[:, :1], (p["M"], p["P"]))
            for k in range(1, p["K"]):
                r = r * xs + cs[:, k, None]
            return r
        return run
    if w == "logreg":
        x = (floats(n * p["D"], 1) - f32(0.5)).reshape(n, p["D"])
        y = (floats(n, 3) > f32(0.5)).astype(f32)
        wt = floats(p["D"], 2) - f32(0.5)

        def run():
            pr = f32(1) / (f32(1) + np.exp(-(x @ wt)))
            return (x.T @ (pr - y)) / f32(n)
        return run
    if w == "heatfix":
        u0 = floats(n, 1)
        r, two = f32(0.25), f32(2)

        def run():
            u = u0
            for _ in range(p["STEPS"]):
                v = u.copy()
                v[1:-1] = u[1:-1] + r * ((u[:-2] + u[2:]) - two * u[1:-1])
                u = v
            return u
        return run
    if w == "drawdown":
        xs = floats(n, 1)
        return lambda: (np.maximum.accumulate(xs) - xs).max()
    if w == "l1dist":
        pts = (floats(n * p["D"], 1) * f32(10)).reshape(n, p["D"])
        return lambda: np.abs(pts[:, None, :] - pts[None, :, :]).sum(axis=2)
    if w == "pool2":
        x = floats(p["R"] * p["C"], 1).reshape(p["R"], p["C"])
        return lambda: x.reshape(p["H"], 2, p["W"], 2).mean(axis=(1, 3))
    if w == "runlen":
        xs = run_values(n)

        def run():
            starts = np.concatenate(([0], np.flatnonzero(xs[1:] != xs[:-1]) + 1))
            return np.diff(np.append(starts, n))
        return run
    if w == "dot4":
        a = floats(4 * p["M"], 1).reshape(p["M"], 4)
        b = floats(4 * p["M"], 2).reshape(p["M"], 4)
        return lambda: np.einsum("ij,ij->i", a, b)
    if w == "ema":
        x = floats(p["R"] * p["C"], 1).reshape(p["R"], p["C"])
        return lambda: ema_rows(x, f32(0.1))
    if w == "rownorm":
        x = floats(p["R"] * p["C"], 1).reshape(p["R"], p["C"])
        return lambda: x / x.max(axis=1, keepdims=True)
    if w == "thomas":
        sm = p["S"] * p["M"]
        a = floats(sm, 1).reshape(p["S"], p["M"])
        b = (floats(sm, 2) + f32(4)).reshape(p["S"], p["M"])
        c = floats(sm, 3).reshape(p["S"], p["M"])
        d = floats(sm, 4).reshape(p["S"], p["M"])
        return lambda: thomas(a, b, c, d)
    if w == "rk4":
        x = floats(n, 1) * f32(2) - f32(1)
        v = floats(n, 2) * f32(2) - f32(1)
        return lambda: rk4(x, v, p["STEPS"])
    if w == "interp":
        xp, fp = interp_table(p["T"])
        q = floats(n, 1) * f32(1.4) - f32(0.2)
        return lambda: np.interp(q, xp, fp)
    if w == "sieve":
        return lambda: sieve(n)
    if w == "cross":
        a = floats(3 * n, 1).reshape(n, 3)
        b = (floats(3 * n, 2) - f32(0.5)).reshape(n, 3)
        return lambda: np.cross(a, b)
    if w == "cov":
        x = floats(n * p["K"], 1).reshape(n, p["K"])

        def run():
            xc = x - x.mean(axis=0)
            return (xc.T @ xc) / f32(n - 1)
        return run
    if w == "gauss":
        img = floats(n * n, 1).reshape(n, n)
        return lambda: gauss5(img)
    if w == "median":
        x = floats(p["R"] * p["C"], 1).reshape(p["R"], p["C"])
        return lambda: np.median(x, axis=1)
    if w == "hist2d":
        x, y = floats(n, 1), hist2d_ys(n)
        b = p["B"]

        def run():
            bins = (x * f32(b)).astype(np.int64) * b + (y * f32(b)).astype(np.int64)
            return np.bincount(bins, minlength=b * b).reshape(b, b)
        return run
    if w == "mcpi":
        seeds = mcpi_seeds(p["W"])
        return lambda: mcpi(seeds, p["STEPS"])
    raise SystemExit(f"unknown workload {w}")


def thomas(a, b, c, d):
    # Many tridiagonal systems (a row each), vectorised over the systems,
    # a loop over the unknowns: the columns made contiguous first.
    a, b, c, d = (np.ascontiguousarray(v.T) for v in (a, b, c, d))
    m = a.shape[0]
    cp = np.empty_like(c)
    dp = np.empty_like(d)
    cp[0] = c[0] / b[0]
    dp[0] = d[0] / b[0]
    for i in range(1, m):
        den = b[i] - a[i] * cp[i - 1]
        cp[i] = c[i] / den
        dp[i] = (d[i] - a[i] * dp[i - 1]) / den
    x = np.empty_like(d)
    x[m - 1] = dp[m - 1]
    for i in range(m - 2, -1, -1):
        x[i] = dp[i] - cp[i] * x[i + 1]
    return x.T


def rk4(x, v, steps):
    # RK4 for x'' = -4x - 0.5x', dt = 0.01, every oscillator at once.
    h2, h, h6, two = f32(0.005), f32(0.01), f32(0.0016666667), f32(2)

    def accel(x, v):
        return f32(-4) * x - f32(0.5) * v
    for _ in range(steps):
        k1x, k1v = v, accel(x, v)
        x2, v2 = x + h2 * k1x, v + h2 * k1v
        k2x, k2v = v2, accel(x2, v2)
        x3, v3 = x + h2 * k2x, v + h2 * k2v
        k3x, k3v = v3, accel(x3, v3)
        x4, v4 = x + h * k3x, v + h * k3v
        k4x, k4v = v4, accel(x4, v4)
        x, v = (x + h6 * (((k1x + two * k2x) + two * k3x) + k4x),
                v + h6 * (((k1v + two * k2v) + two * k3v) + k4v))
    return x


def interp_table(t):
    # A sorted, unevenly spaced table of t points over [-0.1, 1.1).
    u = np.arange(t, dtype=f32) / f32(t)
    return u * u * f32(1.2) - f32(0.1), floats(t, 2)


def sieve(n):
    # The primes below n.
    flags = np.ones(n, dtype=bool)
    flags[:2] = False
    for p in range(2, int(np.sqrt(n - 1)) + 1):
        if flags[p]:
            flags[p * p::p] = False
    return np.flatnonzero(flags)


def gauss5(img):
    # A 5×5 Gaussian blur ("valid"), separable, by shifted slices.
    w = np.array([1, 4, 6, 4, 1], dtype=f32) / f32(16)
    n = img.shape[0]
    m = n - 4
    h = sum(w[k] * img[:, k:k + m] for k in range(5))
    return sum(w[k] * h[k:k + m, :] for k in range(5))


def hist2d_ys(n):
    # The second coordinates: each block of 1000 points one value, so the
    # pairs cover the grid.
    i = np.arange(n, dtype=np.int64)
    return (((i // 1000) * 7919 + 2 * 104729) % 1000).astype(f32) / f32(1000)


def mcpi_seeds(w):
    i = np.arange(w, dtype=np.int64)
    return (i * 7919 + 1) % 2147483648


def mcpi(seeds, steps):
    # W walkers, each drawing two LCG numbers a step and counting those
    # inside the quarter circle.
    s = seeds
    hits = np.zeros(s.size, dtype=np.int64)
    scale = f32(2147483648)
    for _ in range(steps):
        s1 = (1103515245 * s + 12345) & 2147483647
        s = (1103515245 * s1 + 12345) & 2147483647
        x = s1.astype(f32) / scale
        y = s.astype(f32) / scale
        hits += x * x + y * y <= f32(1)
    return hits


def run_values(n):
    # Values 0, 1, 2 in blocks of five, so runs of equal neighbours are
    # five items or more (neighbouring blocks of one value merge).
    i = np.arange(n, dtype=np.int64)
    return ((i // 5) * 7919 + 104729) % 1000 % 3


def ema_rows(x, alpha):
    # y[t] = alpha·x[t] + (1 − alpha)·y[t−1] from y[−1] = 0 along each row:
    # SciPy's lfilter (a C loop) where SciPy is installed, else a loop over
    # the columns, each step a vector operation over the rows.
    try:
        from scipy.signal import lfilter
        return lfilter([alpha], [f32(1), alpha - f32(1)], x, axis=1).astype(f32)
    except ImportError:
        y = np.empty_like(x)
        acc = np.zeros(x.shape[0], dtype=f32)
        for t in range(x.shape[1]):
            acc = alpha * x[:, t] + (f32(1) - alpha) * acc
            y[:, t] = acc
        return y


def segment_flags(n):
    # Segment starts: about one item in a hundred, and the first.
    i = np.arange(n, dtype=np.int64)
    flags = ((i * 7919 + 3 * 104729) % 1000 < 10).astype(np.int64)
    flags[0] = 1
    return flags


def collatz(n):
    # Steps to reach 1 from each start, the unfinished ones compacted at
    # every step.
    steps = np.zeros(n.size, dtype=np.int64)
    idx = np.flatnonzero(n != 1)
    v = n[idx]
    while idx.size:
        v = np.where(v & 1 == 0, v >> 1, 3 * v + 1)
        steps[idx] += 1
        keep = v != 1
        idx, v = idx[keep], v[keep]
    return steps


def cnd(d):
    # The cumulative normal distribution, Abramowitz and Stegun 26.2.17.
    a1, a2, a3, a4, a5 = f32(0.31938153), f32(-0.356563782), f32(1.781477937), f32(-1.821255978), f32(1.330274429)
    k = f32(1) / (f32(1) + f32(0.2316419) * np.abs(d))
    poly = k * (a1 + k * (a2 + k * (a3 + k * (a4 + k * a5))))
    w = f32(1) - f32(0.3989422804) * np.exp(f32(-0.5) * d * d) * poly
    return np.where(d < 0, f32(1) - w, w)


def black_scholes(s, k, t):
    r, v = f32(0.02), f32(0.3)
    sq = v * np.sqrt(t)
    d1 = (np.log(s / k) + (r + f32(0.5) * v * v) * t) / sq
    d2 = d1 - sq
    return s * cnd(d1) - k * np.exp(-r * t) * cnd(d2)


main(setup)

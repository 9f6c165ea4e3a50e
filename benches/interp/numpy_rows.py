"""The NumPy side of `cargo bench --bench interp`: each row written the way
the Remora program is (broadcasting for lifting, np.roll for rotation),
float32 throughout, on the same generated data.

    python numpy_rows.py ROW REPS [--peak] KEY=VALUE...

prints `SECONDS CHECKSUM PEAK_KIB`: the median time of REPS runs of the
computation alone, the float64 sum of its result, and the process's peak
resident memory (with --peak the computation runs once).
"""
import resource
import sys
import time

import numpy as np


def floats(n, seed):
    i = np.arange(n, dtype=np.int64)
    return ((i * 7919 + seed * 104729) % 1000).astype(np.float32) / np.float32(1000)


def cells(n, seed):
    i = np.arange(n, dtype=np.int64)
    return (((i * 7919 + seed * 104729) % 7) < 2).astype(np.int64)


def ints(n, seed):
    # splitmix64 of the position, as the Rust side's `ints`.
    x = np.arange(n, dtype=np.uint64) + np.uint64((seed * 0x9E3779B97F4A7C15) % 2**64)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return (x ^ (x >> np.uint64(31))).view(np.int64)


def life_run(n, steps):
    """STEPS generations of Life from the generated n×n board."""
    b0 = cells(n * n, 1).reshape(n, n)

    def run():
        b = b0
        for _ in range(steps):
            b = life_step(b)
        return b
    return run


def mandelbrot_run(n, iters):
    """Mandelbrot escape counts on the n×n grid over [-2, 1]×[-1.5, 1.5]."""
    re = np.linspace(-2, 1, n, dtype=np.float32)
    im = np.linspace(-1.5, 1.5, n, dtype=np.float32)
    return lambda: mandelbrot(re, im, iters)


def mandelbrot(re, im, iters):
    # The masked formulation: every step updates the points still inside.
    cr = np.broadcast_to(re[None, :], (len(im), len(re))).copy()
    ci = np.broadcast_to(im[:, None], (len(im), len(re))).copy()
    zr = np.zeros_like(cr)
    zi = np.zeros_like(ci)
    steps = np.zeros_like(cr)
    two, four = np.float32(2), np.float32(4)
    for _ in range(iters):
        m = zr * zr + zi * zi <= four
        if not m.any():
            break
        r, i = zr[m], zi[m]
        zr[m] = r * r - i * i + cr[m]
        zi[m] = two * (r * i) + ci[m]
        steps[m] += 1
    return steps


def kmeans_step(points, cs):
    k = len(cs)
    d = points[:, None, :] - cs[None, :, :]
    owner = (d * d).sum(axis=2).argmin(axis=1)
    sums = np.zeros_like(cs)
    np.add.at(sums, owner, points)
    counts = np.bincount(owner, minlength=k)
    return np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None].astype(np.float32), cs)


def nbody_accel(ps, ms):
    d = ps[None, :, :] - ps[:, None, :]
    r2 = np.float32(0.01) + (d * d).sum(axis=2)
    s = ms[None, :] / (r2 * np.sqrt(r2))
    return (s[:, :, None] * d).sum(axis=1)


def life_step(b):
    up = np.roll(b, 1, 0)
    down = np.roll(b, -1, 0)
    n = (np.roll(up, 1, 1) + up + np.roll(up, -1, 1) + np.roll(b, 1, 1) + np.roll(b, -1, 1)
         + np.roll(down, 1, 1) + down + np.roll(down, -1, 1))
    return ((n == 3) | ((b == 1) & (n == 2))).astype(np.int64)


def setup(row, p):
    n = p.get("N")
    if row == "sum_squares":
        x = floats(n, 1)
        return lambda: (x * x).sum(dtype=np.float32)
    if row == "axpbyc":
        a, b = np.float32(1.5), np.float32(-0.5)
        x, y, c = floats(n, 1), floats(n, 2), floats(n, 3)
        return lambda: a * x + b * y - c
    if row == "nbody_accel":
        ps = (floats(3 * n, 1) * np.float32(10)).reshape(n, 3)
        ms = floats(n, 2) + np.float32(0.5)
        return lambda: nbody_accel(ps, ms)
    if row == "convolve":
        k = p["K"]
        xs, ws = floats(n, 1), floats(k, 2)
        ks = np.arange(k) - k // 2
        return lambda: (ws[:, None] * np.stack([np.roll(xs, -s) for s in ks])).sum(axis=0)
    if row == "convolve_windows":
        k = p["K"]
        xs, ws = floats(n, 1), floats(k, 2)
        return lambda: (np.lib.stride_tricks.sliding_window_view(xs, k) * ws).sum(axis=1)
    if row == "replicate":
        v, m = floats(n, 1), floats(8 * n, 2).reshape(8, n)
        return lambda: m + v[None, :]
    if row == "life":
        return life_run(n, p["STEPS"])
    if row == "mandelbrot":
        return mandelbrot_run(n, p["ITERS"])
    if row == "kmeans":
        d, k = p["D"], p["K"]
        points = floats(n * d, 1).reshape(n, d)
        cs = floats(k * d, 2).reshape(k, d)
        return lambda: kmeans_step(points, cs)
    if row in ("matmul", "f_matmul"):
        a, b = floats(n * n, 1).reshape(n, n), floats(n * n, 2).reshape(n, n)
        return lambda: a @ b
    if row == "sort":
        xs = ints(n, 1)
        return lambda: np.sort(xs)
    if row == "nbody_sim":
        s0 = (floats(2 * n * 3, 1) * np.float32(10)).reshape(2, n, 3)
        ms = floats(n, 2) + np.float32(0.5)

        def run():
            ps, vs = s0[0], s0[1]
            for _ in range(p["STEPS"]):
                vs = vs + np.float32(0.01) * nbody_accel(ps, ms)
                ps = ps + np.float32(0.01) * vs
            return np.stack([ps, vs])
        return run
    raise SystemExit(f"unknown row {row}")


def peak_kib():
    # VmHWM is this process's own peak (ru_maxrss would carry over the
    # peak of the process that started us, across exec).
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def main(setup=setup):
    """Times `setup(NAME, sizes)`'s computation as the command line asks
    (NAME REPS [--peak] KEY=VALUE…) and prints the median time, a checksum
    and the peak memory. The style matrix's script calls it with its own
    `setup`."""
    row, reps = sys.argv[1], int(sys.argv[2])
    peak = "--peak" in sys.argv
    p = {k: int(v) for k, v in (a.split("=") for a in sys.argv[3:] if "=" in a)}
    run = setup(row, p)
    times = []
    for _ in range(1 if peak else reps):
        t0 = time.perf_counter()
        r = run()
        times.append(time.perf_counter() - t0)
    times.sort()
    checksum = float(np.sum(np.asarray(r), dtype=np.float64))
    kib = peak_kib()
    print(f"{times[len(times) // 2]} {checksum} {kib}")


if __name__ == "__main__":
    main()

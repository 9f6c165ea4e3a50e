# NumPy check for examples/dice.remora: the same random numbers, computed
# from docs/prelude.md's description of random.uniform, random.normal and
# random.int (Philox4x32-10 written out here), then counted by np.unique
# and binned by np.searchsorted. Each count is printed as Remora prints a
# box: how many, then the counts.
import math

import numpy as np

M0, M1, W0, W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
MASK = 0xFFFFFFFF


def philox4x32_10(counter, key):
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for r in range(10):
        if r:
            k0, k1 = (k0 + W0) & MASK, (k1 + W1) & MASK
        p0, p1 = M0 * c0, M1 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & MASK, (p0 >> 32) ^ c3 ^ k1, p0 & MASK
    return c0, c1, c2, c3


# Random123's first known answer.
assert philox4x32_10((0, 0, 0, 0), (0, 0)) == (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)


def block(seed, i, draw, tag):
    s, i = seed % 2**64, i % 2**64
    return philox4x32_10((i & MASK, i >> 32, draw, tag), (s & MASK, s >> 32))


def uniform(seed, i):
    return np.float32((block(seed, i, 0, 0)[0] >> 8) * 2.0**-24)


def normal(seed, i):
    x0, x1, _, _ = block(seed, i, 0, 1)
    u1, u2 = (x0 + 1) * 2.0**-32, x1 * 2.0**-32
    return np.float32(math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2))


def integer(seed, i, lo, hi):
    r = hi - lo
    t = (2**64 - r) % r
    draw = 0
    while True:
        x = block(seed, i, draw, 2)
        for c in (x[0] | x[1] << 32, x[2] | x[3] << 32):
            m = c * r
            if m % 2**64 >= t:
                return lo + (m >> 64)
        draw += 1


throw = range(10000)
faces = np.array([integer(2026, i, 1, 7) for i in throw], dtype=np.int64)
u = np.array([uniform(2026, i) for i in throw], dtype=np.float32)
z = np.array([normal(2026, i) for i in throw], dtype=np.float32)

values, counts = np.unique(faces, return_counts=True)
_, ubins = np.unique(np.searchsorted(np.array([0.1, 0.5, 0.9], dtype=np.float32), u), return_counts=True)
_, zbins = np.unique(
    np.searchsorted(np.array([-2.0, -1.0, 0.0, 1.0, 2.0], dtype=np.float32), z, side="right"),
    return_counts=True,
)
out = []
for r in (values, counts, ubins, zbins):
    out += [len(r)] + [int(v) for v in r]
print(" ".join(str(v) for v in out))

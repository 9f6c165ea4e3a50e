# NumPy check for examples/black-scholes.remora: European call and put prices
# for eight options, the normal CDF from the Abramowitz-Stegun 7.1.26 erf
# (as the Remora program), float32; prints [call put] per option.
import numpy as np

f32 = np.float32
k = np.arange(8)
spot = f32(80.0) + f32(6.0) * k.astype(f32)
strike = f32(100.0)
years = f32(0.25) * (1 + k % 4).astype(f32)
vol = f32(0.15) + f32(0.05) * (k % 3).astype(f32)
rate = f32(0.03)

A = np.array([1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592], dtype=f32)


def erf(x):
    z = np.abs(x)
    t = f32(1.0) / (f32(1.0) + f32(0.3275911) * z)
    y = f32(1.0) - t * np.polyval(A, t) * np.exp(-z * z)
    return np.sign(x) * y


def cdf(x):
    return f32(0.5) * (f32(1.0) + erf(x / np.sqrt(f32(2.0))))


d1 = (np.log(spot / strike) + (rate + f32(0.5) * vol * vol) * years) / (vol * np.sqrt(years))
d2 = d1 - vol * np.sqrt(years)
disc = strike * np.exp(-rate * years)
call = spot * cdf(d1) - disc * cdf(d2)
put = disc * cdf(-d2) - spot * cdf(-d1)

# sanity: put-call parity and the exact erf (not printed)
assert np.allclose(call - put, spot - disc, atol=1e-3)
from math import erf as exact_erf
assert all(abs(erf(f32(v)) - exact_erf(v)) < 1e-6 for v in np.linspace(-3, 3, 61))

print(" ".join(repr(float(v)) for v in np.stack([call, put], axis=1).astype(f32).ravel()))

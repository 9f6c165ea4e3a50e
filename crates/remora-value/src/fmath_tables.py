"""Writes fmath_tables.rs (beside this file): the tables of Remora's own
f32 exp, ln and ^, each entry the nearest double of the exact value
(computed with 80-digit decimal arithmetic; Python's float() of a Decimal
rounds correctly), and the coefficients of exp's and ln's polynomials
(interpolation at Chebyshev nodes, near the minimax polynomial, solved in
exact rational arithmetic, each coefficient then the nearest double).
Run: python3 fmath_tables.py > fmath_tables.rs"""
from decimal import Decimal as D, getcontext
from fractions import Fraction as F
import struct

getcontext().prec = 80
N = 128
LN2 = D(2).ln()
ONE = 0x3FF0000000000000
# ln's subinterval i holds z's bits from LN_OFF + i 2^45 (z in [0.705, 1.41));
# its centre c has the bits ONE + (i - K) 2^45, K = 75 the one holding 1.
K = 75


def from_bits(b):
    return struct.unpack("<d", struct.pack("<Q", b))[0]


exp2 = [float((D(j) / N * LN2).exp()) for j in range(N)]
centres = [D(from_bits(ONE + (i - K) * 2**45)) for i in range(N)]  # exact
log2c = [float(c.ln() / LN2) for c in centres]


def series(term):
    """The sum of term(0), term(1), ... until the terms are negligible."""
    total, n = D(0), 0
    while True:
        t = term(n)
        if abs(t) < D(10) ** -90:
            return total
        total, n = total + t, n + 1


def cos(x):
    def term(n):
        v = D(1)
        for k in range(1, 2 * n + 1):
            v = v * x / k
        return -v if n % 2 else v

    return series(term)


PI = 4 * series(lambda n: (D(-1) ** n / (2 * n + 1)) * (4 / D(5) ** (2 * n + 1) - 1 / D(239) ** (2 * n + 1)))


def chebyshev_fit(f, a, b, degree):
    """The polynomial of `degree` through f at the Chebyshev nodes of [a, b]:
    its coefficients, constant first, each the nearest double."""
    nodes = [(a + b) / 2 + (b - a) / 2 * cos(PI * (2 * k + 1) / (2 * (degree + 1))) for k in range(degree + 1)]
    rows = [[F(x) ** j for j in range(degree + 1)] + [F(f(x))] for x in nodes]
    n = degree + 1
    for c in range(n):  # Gauss-Jordan, exact
        p = max(range(c, n), key=lambda r: abs(rows[r][c]))
        rows[c], rows[p] = rows[p], rows[c]
        for r in range(n):
            if r != c and rows[r][c] != 0:
                m = rows[r][c] / rows[c][c]
                rows[r] = [x - m * y for x, y in zip(rows[r], rows[c])]
    return [float(rows[i][n] / rows[i][i]) for i in range(n)]


# exp: e^r = 1 + r + r^2 q(r) for |r| <= ln2/2, q(r) = sum r^n/(n+2)!.
def exp_q(r):
    def term(n):
        v = D(1)
        for k in range(1, n + 3):
            v = v / k
        return v * r**n

    return series(term)


# ln: ln z = 2 atanh(s) = 2s + 2s w R(w), w = s^2 <= ((sqrt2 - 1)/(sqrt2 + 1))^2,
# R(w) = sum w^n/(2n+3).
def ln_r(w):
    return series(lambda n: w**n / (2 * n + 3))


SQRT2 = D(2).sqrt()
exp_poly = chebyshev_fit(exp_q, -LN2 / 2, LN2 / 2, 8)
ln_poly = chebyshev_fit(ln_r, D(0), ((SQRT2 - 1) / (SQRT2 + 1)) ** 2, 5)


def table(name, doc, xs, length="N"):
    rows = "".join("    %r,\n" % x for x in xs)
    # An entry may be a constant's value (2^(1/2) is std's SQRT_2).
    allow = "#[allow(clippy::approx_constant)]\n"
    return "/// %s\n%spub const %s: [f64; %s] = [\n%s];\n\n" % (doc, allow, name, length, rows)


print('''//! The tables and polynomials of Remora's own f32 `exp`, `ln` and `^`
//! (the interpreter's `fmath` and the compiled engine's runtime, `rt_expf`
//! …): the one copy of them. The interpreter reads these arrays; the
//! compiler writes them into the C program ([`c_arrays`]), so both engines
//! use the same doubles.
//!
//! Written by `fmath_tables.py` (beside this file: each entry the nearest
//! double of the exact value, computed in 80-digit decimal arithmetic, and
//! the polynomials' coefficients by interpolation at Chebyshev nodes);
//! `remora-interp`'s `fmath` tests check them against the f64 functions.

/// Entries per table.
pub const N: usize = %d;
''' % N)
print(table("EXP2", "2^(j/N), the nearest double.", exp2), end="")
print(table("LOG2_C", "log2 c for the centre c of `^`'s log's subinterval i (the bits 0x3ff0… + (i − %d)·2^45; 1 for i = %d), the nearest double." % (K, K), log2c), end="")
print(table("EXP_Q", "exp's q(r) = (e^r − 1 − r)/r² for |r| ≤ ln2/2, degree %d, constant first (e^r's relative error below 2^-49)." % (len(exp_poly) - 1), exp_poly, len(exp_poly)), end="")
print(table("LN_R", "ln's R(w) = (atanh(s)/s − 1)/w for w = s² ≤ ((√2 − 1)/(√2 + 1))², degree %d, constant first (ln z's relative error below 2^-50)." % (len(ln_poly) - 1), ln_poly, len(ln_poly)), end="")
print('''/// The tables and coefficients as C arrays (`rt_exp2`, `rt_log2_c`,
/// `rt_exp_q`, `rt_ln_r`), for the compiled engine's runtime.
pub fn c_arrays() -> String {
    let mut out = String::new();
    let arrays: [(&str, &[f64]); 4] = [
        ("rt_exp2", &EXP2),
        ("rt_log2_c", &LOG2_C),
        ("rt_exp_q", &EXP_Q),
        ("rt_ln_r", &LN_R),
    ];
    for (name, table) in arrays {
        out.push_str(&format!("static const double {name}[{}] = {{\\n", table.len()));
        for x in table {
            // Debug prints the shortest decimal that reads back as x.
            out.push_str(&format!("  {x:?},\\n"));
        }
        out.push_str("};\\n");
    }
    out
}''')

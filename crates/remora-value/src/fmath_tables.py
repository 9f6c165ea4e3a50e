"""Writes fmath_tables.rs (beside this file): the tables of Remora's own
f32 exp, ln and ^, each entry the nearest double of the exact value
(computed with 80-digit decimal arithmetic; Python's float() of a Decimal
rounds correctly). Run: python3 fmath_tables.py > fmath_tables.rs"""
from decimal import Decimal as D, getcontext
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
logc = [float(c.ln()) for c in centres]
log2c = [float(c.ln() / LN2) for c in centres]


def table(name, doc, xs):
    rows = "".join("    %r,\n" % x for x in xs)
    # An entry may be a constant's value (2^(1/2) is std's SQRT_2).
    allow = "#[allow(clippy::approx_constant)]\n"
    return "/// %s\n%spub const %s: [f64; N] = [\n%s];\n\n" % (doc, allow, name, rows)


print('''//! The tables of Remora's own f32 `exp`, `ln` and `^` (the interpreter's
//! `fmath` and the compiled engine's runtime, `rt_expf` …): the one copy
//! of them. The interpreter reads these arrays; the compiler writes them
//! into the C program ([`c_arrays`]), so both engines look up the same
//! doubles.
//!
//! Written by `fmath_tables.py` (beside this file: each entry the nearest
//! double of the exact value, computed in 80-digit decimal arithmetic);
//! `remora-interp`'s `fmath` tests check them against the f64 functions.

/// Entries per table.
pub const N: usize = %d;
''' % N)
print(table("EXP2", "2^(j/N), the nearest double.", exp2), end="")
print(table("LN_C", "ln c for the centre c of ln's subinterval i (the bits 0x3ff0… + (i − %d)·2^45; 1 for i = %d), the nearest double." % (K, K), logc), end="")
print(table("LOG2_C", "log2 c, as `LN_C`.", log2c), end="")
print('''/// The tables as C arrays (`rt_exp2`, `rt_ln_c`, `rt_log2_c`), for the
/// compiled engine's runtime.
pub fn c_arrays() -> String {
    let mut out = String::new();
    for (name, table) in [("rt_exp2", &EXP2), ("rt_ln_c", &LN_C), ("rt_log2_c", &LOG2_C)] {
        out.push_str(&format!("static const double {name}[{N}] = {{\\n"));
        for x in table {
            // Debug prints the shortest decimal that reads back as x.
            out.push_str(&format!("  {x:?},\\n"));
        }
        out.push_str("};\\n");
    }
    out
}''')

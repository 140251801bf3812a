#!/usr/bin/env python3
"""Regenerate printf_g.txt: C printf("%.<p>g") reference strings (Python's % operator
formats doubles exactly as C's printf does: correctly rounded, ties to even on the exact
binary value).  Each line: <f64 bits in hex> <precision> <width> <'%*.*g' output>|"""
import random, struct

def bits(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]

r = random.Random(7)
vals = [0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, 0.125, 0.375, 1.25, 1e-4, 1e-5, 9.99995e-5,
        0.0001, 0.00012345678, 123456.0, 1234567.0, 12345678.0, 123456789.0, 99999.95,
        999999.5, 9999999.5, 99999995.0, 9.9999995, 0.99999995, 5e-324, 2.2250738585072014e-308,
        1.7976931348623157e308, 1e300, 1e-300, 238.04761904761904, 299.08192588330945,
        264.15903504888235, 212.2148, 70.73838, 102.30, 1000000.3, 999957.3, 2.1e150,
        12.125, 4.5, 1e15, 1e16, 1e17, 123e20, 0.1, 0.2, 0.3, 1/3, 2/3, 100.0, 80.0, 99.5]
for _ in range(300):
    e = r.randint(-30, 30)
    vals.append(r.uniform(-1, 1) * 10.0 ** e)
for _ in range(100):
    vals.append(struct.unpack("<d", struct.pack("<Q", r.getrandbits(64)))[0])
for _ in range(100):  # exact ties at various precisions
    vals.append(r.randint(1, 10**6) + r.choice([0.5, 0.25, 0.125, 0.75]))
with open("printf_g.txt", "w") as f:
    for v in vals:
        if v != v or v in (float("inf"), float("-inf")):
            continue
        for p, w in ((6, 0), (8, 13), (1, 0), (3, 0), (17, 0), (0, 0)):
            f.write("%016x %d %d %s|\n" % (bits(v), p, w, "%*.*g" % (w, p, v)))

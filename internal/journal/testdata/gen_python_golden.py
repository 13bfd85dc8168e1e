#!/usr/bin/env python3
"""Regenerates the Python goldens for the journal package's canonical JSON.

Run from internal/journal with CPython 3.11 (the reference's interpreter):

    python3 testdata/gen_python_golden.py

It writes
  testdata/float_repr.golden      "<float64 bits in hex> <repr(float)>" per line
  testdata/canonical.golden.jsonl {"in": text, "out": canonical} per line, where
                                  canonical = json.dumps(json.loads(text), ensure_ascii=False,
                                  allow_nan=False, sort_keys=True, separators=(",", ":"))
  testdata/equal.golden.jsonl     {"a": text, "b": text, "equal": json.loads(a) == json.loads(b)}
The golden files are ASCII (they use ensure_ascii=True themselves). The
generator is seeded, so reruns give the same files.
"""
import json
import math
import random
import struct

rng = random.Random(20240611)


def bits(f):
    return struct.unpack("<Q", struct.pack("<d", f))[0]


def floats():
    out = [0.0, -0.0, 1.0, -1.0, 300.0, 0.1, 0.2, 0.3, 1e-7, 1e16, 1e15, 1e17, 1e-4, 1e-5,
           9999999999999998.0, 999999999999999.9, 123456789.123, 5e-324, 2.2250738585072014e-308,
           1.7976931348623157e308, 0.5, 1.5, 100.0, 1e22, 1e21, 1e23, 2.0 ** 53, 2.0 ** 53 + 2,
           0.0001, 0.00011, 0.000099999, 12345678901234567.0, 1234567890123456.7, 1/3, 2/3]
    for e in range(-325, 309):
        for m in (1.0, 9.999999999999999, 5.0, 1.2345):
            try:
                f = float(f"{m}e{e}")
            except OverflowError:
                continue
            if math.isfinite(f):
                out.append(f)
    while len(out) < 6000:
        b = rng.getrandbits(64)
        f = struct.unpack("<d", struct.pack("<Q", b))[0]
        if math.isfinite(f):
            out.append(f)
        out.append(rng.uniform(-1e6, 1e6))
        out.append(round(rng.uniform(-1000, 1000), rng.randint(0, 6)))
    return out


def write_floats():
    with open("testdata/float_repr.golden", "w") as fh:
        for f in floats():
            fh.write(f"{bits(f):016x} {repr(f)}\n")


KEYS = ["a", "b", "A", "Z", "", "a\u0000", "a\u0001", "ab", "aa", "é", "e\u0301", "\u00ff", "\u0100",
        "\u2028", "😀", "\uffff", "\ue000", "\ud7ff", "日本", "key with space", "<>&", "\u007f", "/",
        "\\", '"', "\n", "id", "seq", "payload", "kind", "0", "10", "9"]
STRINGS = KEYS + ["hello", "\u0000\u001f\u0008\u000c\t\r\n", "tab\there", "\u2029", "</script>",
                  "emoji 😀 and 𝄞", "\U0010ffff", "\u00e9t\u00e9", "a/b", "\x7f", "mixed \"q\" \\ back"]


def enc_string(s):
    """A JSON string literal for s with randomly chosen escape forms."""
    out = ['"']
    for ch in s:
        c = ord(ch)
        r = rng.random()
        if ch == '"':
            out.append(rng.choice(['\\"', '\\u0022']))
        elif ch == "\\":
            out.append(rng.choice(["\\\\", "\\u005c", "\\u005C"]))
        elif c < 0x20:
            named = {8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r"}
            opts = [f"\\u{c:04x}", f"\\u{c:04X}"] + ([named[c]] if c in named else [])
            out.append(rng.choice(opts))
        elif ch == "/" and r < 0.5:
            out.append("\\/")
        elif r < 0.3:
            if c > 0xFFFF:
                v = c - 0x10000
                hi, lo = 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF)
                out.append(f"\\u{hi:04x}\\u{lo:04X}")
            else:
                out.append(rng.choice([f"\\u{c:04x}", f"\\u{c:04X}"]))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def enc_number():
    kind = rng.randrange(9)
    if kind == 0:
        return str(rng.randint(-10**6, 10**6))
    if kind == 1:
        return str(rng.randint(-10**40, 10**40))
    if kind == 2:
        return rng.choice(["0", "-0", "0.0", "-0.0", "1E2", "1e16", "1e-7", "1.0", "2.5e+3", "2.5E-3",
                           "5e-324", "1e-400", "-1e-400", "1.7976931348623157e308", "9007199254740993",
                           "9007199254740993.0", "123456789.123", "0.1", "1e0", "0e0", "-0e-0",
                           "100000000000000000000000", "1e23", "0.30000000000000004"])
    if kind == 3:
        return repr(rng.uniform(-1e9, 1e9))
    if kind == 4:
        m = rng.choice(["1", "12", "1.5", "0.000123", "987654321.5", "3"])
        return f"{m}{rng.choice('eE')}{rng.choice(['', '+', '-'])}{rng.randint(0, 330)}"
    if kind == 5:
        f = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        return repr(f) if math.isfinite(f) else "1.0"
    if kind == 6:
        return f"{rng.randint(-999, 999)}.{rng.randint(0, 10**rng.randint(1, 20))}"
    if kind == 7:
        return format(rng.uniform(-1, 1), f".{rng.randint(1, 25)}f")
    return str(rng.randint(0, 20))


def ws():
    return rng.choice(["", "", "", " ", "\n", "\t", "\r\n  "])


def gen(depth=0):
    r = rng.random()
    if depth > 3 or r < 0.5:
        k = rng.randrange(6)
        if k == 0:
            return enc_number()
        if k == 1:
            return rng.choice(["true", "false", "null"])
        return enc_string(rng.choice(STRINGS) if rng.random() < 0.7 else "".join(
            rng.choice(STRINGS) for _ in range(rng.randint(0, 3))))
    if r < 0.7:
        return "[" + ws() + ("," + ws()).join(gen(depth + 1) + ws() for _ in range(rng.randint(0, 5))) + "]"
    keys = rng.sample(KEYS, rng.randint(0, 6))
    members = [ws() + enc_string(k) + ws() + ":" + ws() + gen(depth + 1) + ws() for k in keys]
    return "{" + ",".join(members) + ws() + "}"


def dumps(v):
    return json.dumps(v, ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":"))


def write_canonical():
    with open("testdata/canonical.golden.jsonl", "w") as fh:
        n = 0
        while n < 1000:
            text = ws() + gen() + ws()
            try:
                out = dumps(json.loads(text))
                out.encode("utf-8")
            except (ValueError, UnicodeEncodeError):
                continue
            fh.write(json.dumps({"in": text, "out": out}, ensure_ascii=True) + "\n")
            n += 1


def mutate(text):
    """Returns another text whose value may or may not equal text's."""
    v = json.loads(text)

    def walk(x):
        if isinstance(x, bool):
            return rng.choice([x, int(x), float(x), not x, str(x).lower()])
        if isinstance(x, int):
            return rng.choice([x, float(x) if abs(x) < 1e300 else x, x + 1, -x, x if x not in (0, 1) else bool(x)])
        if isinstance(x, float):
            opts = [x, -x, x * 2 + 1]
            if x.is_integer() and abs(x) < 1e300:
                opts.append(int(x))
            return rng.choice(opts)
        if isinstance(x, str):
            return rng.choice([x, x, x + "x", x.upper()])
        if isinstance(x, list):
            y = [walk(e) for e in x]
            if y and rng.random() < 0.1:
                y.pop()
            return y
        if isinstance(x, dict):
            items = [(k, walk(e)) for k, e in x.items()]
            rng.shuffle(items)
            if items and rng.random() < 0.1:
                items.pop()
            if rng.random() < 0.05:
                items.append(("extra", None))
            return dict(items)
        return rng.choice([None, None, False, 0])

    w = walk(v) if rng.random() < 0.8 else v
    return json.dumps(w, allow_nan=False, ensure_ascii=rng.random() < 0.5, sort_keys=rng.random() < 0.5,
                      indent=rng.choice([None, 1]))


def write_equal():
    with open("testdata/equal.golden.jsonl", "w") as fh:
        n = 0
        while n < 1000:
            a = gen()
            try:
                json.loads(a)
                b = mutate(a)
            except (ValueError, UnicodeEncodeError, OverflowError):
                continue
            if rng.random() < 0.5:
                a, b = b, a
            eq = json.loads(a) == json.loads(b)
            fh.write(json.dumps({"a": a, "b": b, "equal": eq}, ensure_ascii=True) + "\n")
            n += 1


write_floats()
write_canonical()
write_equal()

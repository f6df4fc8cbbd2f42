#!/usr/bin/env python3
"""Writes tests/data/quant_oracle.bin: block formats decoded (and a few
encoded) by an implementation independent of seam, so that tests/test_quant.c
can check seam's decoders without Python at test time.

The oracle is the `gguf` Python package (gguf.quants.dequantize / quantize,
numpy underneath) for every type it has; Q8_K, which it lacks, and f32 -> f16
(numpy's own correctly rounded cast) are computed here with numpy, following
llama.cpp's quantize_row_q8_K_ref and dequantize_row_q8_K.

File format (all little-endian):

    magic    4 bytes  "SQOR"
    version  u32      1
    count    u32      number of records
    count x record:
        kind    u32   0 = decode: bytes -> values; 1 = encode: values -> bytes
        type    u32   ggml type number (gguf.GGMLQuantizationType)
        n       u32   number of values
        nbytes  u32   number of encoded bytes
        values  f32[n]
        bytes   u8[nbytes]

Decode records hold random blocks (random bytes with sane f16 scales) and
what the oracle decodes them to; encode records hold random floats and what
the oracle encodes them to. Deterministic: same package, same file.

    python3 tools/quant_oracle.py [out path]
"""

import struct
import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

QK_K = 256
rng = np.random.default_rng(20240611)


def q8_0_x86(x):
    """llama.cpp's x86 quantize_row_q8_0 (its AVX path): d = amax / 127 stored
    as f16, q = round_half_even(x * (127 / amax)), all in float32."""
    blocks = x.reshape(-1, 32).astype(np.float32)
    out = bytearray()
    for b in blocks:
        amax = np.float32(np.abs(b).max())
        d = np.float32(amax / np.float32(127))
        mul = np.float32(np.float32(127) / amax) if amax != 0 else np.float32(0)
        q = np.rint((b * mul).astype(np.float32)).astype(np.int8)
        out += np.float16(d).tobytes() + q.tobytes()
    return np.frombuffer(bytes(out), dtype=np.uint8)


def f16_bytes(values):
    return np.asarray(values, dtype=np.float16).view(np.uint8).reshape(-1, 2)


def random_scales(n_blocks, spread=2.0 ** -6):
    """Sane f16 scales of both signs, a few decades around `spread`."""
    mag = spread * 2.0 ** rng.uniform(-6, 6, n_blocks)
    sign = rng.choice([-1.0, 1.0], n_blocks)
    return f16_bytes(mag * sign)


def random_blocks(qtype, n_blocks):
    """Random bytes, with the f16 scale fields replaced by sane values."""
    _, size = gguf.GGML_QUANT_SIZES[qtype]
    b = rng.integers(0, 256, (n_blocks, size), dtype=np.uint8)
    if qtype in (T.Q4_0, T.Q5_0, T.Q8_0):
        b[:, 0:2] = random_scales(n_blocks)
    elif qtype in (T.Q4_K, T.Q5_K):
        b[:, 0:2] = random_scales(n_blocks)  # d
        b[:, 2:4] = random_scales(n_blocks)  # dmin
    elif qtype == T.Q6_K:
        b[:, size - 2:] = random_scales(n_blocks)
    return b


def special_f16_bits():
    return np.array([0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0x7bff,
                     0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe00, 0x3555], dtype=np.uint16)


def tricky_floats():
    """Values on the rounding edges of f16 and bf16 (ties, overflow, subnormals)."""
    v = [0.0, -0.0, 1.0, -1.0, 65504.0, 65519.996, 65520.0, -65520.0, 1e9, np.inf, -np.inf,
         2.0 ** -24, 2.0 ** -25, 2.0 ** -25 * 1.0000001, 3 * 2.0 ** -25, 2.0 ** -14,
         2.0 ** -14 - 2.0 ** -25, 1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 1e-30, -1e-30,
         np.float32(3.4028235e38)]
    bits = np.array([0x3f808000, 0x3f818000, 0x3f80ffff, 0x00000001, 0x807fffff, 0x7f7fffff],
                    dtype=np.uint32)
    return np.concatenate([np.array(v, dtype=np.float32), bits.view(np.float32)])


def wide_floats(n):
    """Random floats spread over the f16 range and beyond."""
    return (rng.choice([-1, 1], n) * 2.0 ** rng.uniform(-28, 17, n)).astype(np.float32)


def q8_K_ref(x):
    """llama.cpp quantize_row_q8_K_ref: block bytes (f32 d, i8 qs[256], i16 bsums[16])."""
    out = bytearray()
    for blk in x.reshape(-1, QK_K):
        amax_i = int(np.argmax(np.abs(blk)))  # first index of the largest |x|
        mx = blk[amax_i]
        if mx == 0:
            out += bytes(4 + QK_K + 32)
            continue
        iscale = np.float32(-127.0) / mx
        q = np.minimum(127, np.rint(iscale * blk)).astype(np.int8)
        bsums = q.reshape(16, 16).astype(np.int16).sum(axis=1, dtype=np.int16)
        out += (np.float32(1.0) / iscale).tobytes() + q.tobytes() + bsums.tobytes()
    return np.frombuffer(bytes(out), dtype=np.uint8)


def q8_K_dequant(b):
    b = b.reshape(-1, 4 + QK_K + 32)
    d = b[:, :4].copy().view(np.float32)
    q = b[:, 4:4 + QK_K].copy().view(np.int8).astype(np.float32)
    return (d * q).reshape(-1)


def main():
    out_path = Path(sys.argv[1] if len(sys.argv) > 1 else
                    Path(__file__).resolve().parent.parent / "tests/data/quant_oracle.bin")
    records = []  # (kind, type, values f32, bytes u8)

    # decode: f16 and bf16 bit patterns, specials included
    bits = np.concatenate([special_f16_bits(), rng.integers(0, 1 << 16, 500, dtype=np.uint16)])
    records.append((0, T.F16, dequantize(bits.view(np.uint8), T.F16), bits.view(np.uint8)))
    records.append((0, T.BF16, dequantize(bits.view(np.uint8), T.BF16), bits.view(np.uint8)))

    # decode: every block format seam computes with
    for qtype, n_blocks in [(T.Q4_0, 8), (T.Q5_0, 8), (T.Q8_0, 8),
                            (T.Q4_K, 4), (T.Q5_K, 4), (T.Q6_K, 4)]:
        b = random_blocks(qtype, n_blocks).reshape(-1)
        records.append((0, qtype, dequantize(b, qtype).reshape(-1), b))
    x = rng.normal(0, 1, 2 * QK_K).astype(np.float32)
    b = q8_K_ref(x)
    records.append((0, T.Q8_K, q8_K_dequant(b), b))

    # encode: f32 -> f16 (numpy's correctly rounded cast; nan left out, its
    # payload is the converter's choice) and -> bf16 (the gguf package, nan in)
    x = np.concatenate([tricky_floats(), wide_floats(1000)])
    with np.errstate(over="ignore"):  # overflow to inf is what is tested
        records.append((1, T.F16, x, x.astype(np.float16).view(np.uint8)))
    xb = np.concatenate([x, np.array([0x7fc00000, 0xffc00001, 0x7f800001], dtype=np.uint32).view(np.float32)])
    records.append((1, T.BF16, xb, quantize(xb, T.BF16).reshape(-1)))

    # encode: the activation quantisers, each with a zero block and a block
    # of exact ties (amax = 127 makes the step exactly 1): both round ties to
    # even (Q8_0 as llama.cpp's x86 quantize_row_q8_0 does, which is what
    # seam's logits are compared with).
    ties = np.arange(-15.5, 16, 1, dtype=np.float32)
    x = rng.normal(0, 1, 8 * 32).astype(np.float32)
    x[:32] = ties
    x[0] = 127
    x[32:64] = 0
    records.append((1, T.Q8_0, x, q8_0_x86(x)))
    x = (rng.normal(0, 1, 3 * QK_K) * 3).astype(np.float32)
    x[:32] = ties
    x[0] = 127
    x[QK_K:2 * QK_K] = 0
    records.append((1, T.Q8_K, x, q8_K_ref(x)))

    blob = bytearray(b"SQOR" + struct.pack("<II", 1, len(records)))
    for kind, qtype, values, raw in records:
        values = np.ascontiguousarray(values, dtype=np.float32)
        raw = np.ascontiguousarray(raw, dtype=np.uint8)
        blob += struct.pack("<IIII", kind, int(qtype), values.size, raw.size)
        blob += values.tobytes() + raw.tobytes()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_bytes(bytes(blob))
    print(f"{out_path}: {len(records)} records, {len(blob)} bytes")


if __name__ == "__main__":
    main()

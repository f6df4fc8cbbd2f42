#!/usr/bin/env python3
"""test_kv_state.py -- bench/kv_state.py's convert_kv_state on hand-made
llama.cpp sequence states (no llama.cpp needed): the cells' metadata kept, V
untransposed, K and V quantised to q8_0 by ggml's rule, bad states refused.

  python3 tests/test_kv_state.py
"""
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from kv_state import GGML_F16, GGML_Q8_0, STATE_SEQ_MAGIC, convert_kv_state, hadamard, kv_rotation  # noqa: E402

N_CELLS, N_EMBD, N_LAYER = 3, 64, 2  # 64 = two q8_0 blocks a row


def state(ks, vs, v_trans, n_stream=1):
    """A state as llama_state_seq_get_data writes it: ks, vs [layer][cell][embd] f16 (V written transposed when
    v_trans), cells at positions 10, 11, 12 of sequence 0."""
    b = struct.pack("<IiII", STATE_SEQ_MAGIC, 0, n_stream, N_CELLS)
    b += b"".join(struct.pack("<iIi", 10 + c, 1, 0) for c in range(N_CELLS))
    b += struct.pack("<II", v_trans, N_LAYER)
    for k in ks:
        b += struct.pack("<iQ", GGML_F16, N_EMBD * 2) + k.tobytes()
    for v in vs:
        if v_trans:
            b += struct.pack("<iII", GGML_F16, 2, N_EMBD) + np.ascontiguousarray(v.T).tobytes()
        else:
            b += struct.pack("<iQ", GGML_F16, N_EMBD * 2) + v.tobytes()
    return b


def parse(blob, row_bytes):
    """(metadata bytes, v_trans, [layer] K rows, [layer] V rows) of an untransposed state, rows as raw bytes."""
    meta_end = 16 + 12 * N_CELLS
    v_trans, n_layer = struct.unpack_from("<II", blob, meta_end)
    at, parts = meta_end + 8, []
    for _ in range(2 * n_layer):
        typ, row = struct.unpack_from("<iQ", blob, at)
        assert row == row_bytes, f"row of {row} bytes, {row_bytes} expected"
        parts.append((typ, blob[at + 12:at + 12 + N_CELLS * row]))
        at += 12 + N_CELLS * row
    assert at == len(blob), f"{len(blob) - at} bytes after the last layer"
    return blob[:meta_end], v_trans, parts[:n_layer], parts[n_layer:]


def dequant_q8_0(raw):
    blocks = np.frombuffer(raw, np.dtype([("d", "<f2"), ("qs", "i1", 32)]))
    return (blocks["d"].astype(np.float32)[:, None] * blocks["qs"].astype(np.float32)).reshape(N_CELLS, N_EMBD)


def main():
    rng = np.random.default_rng(17)
    ks = [rng.standard_normal((N_CELLS, N_EMBD)).astype(np.float16) for _ in range(N_LAYER)]
    vs = [rng.standard_normal((N_CELLS, N_EMBD)).astype(np.float16) for _ in range(N_LAYER)]
    # layer 1, cell 0: a block of exact multiples (amax 8: d = 8/127, q = rint(x * 127/8)) and a block of zeros
    ks[1][0, :32] = np.arange(-16, 16, dtype=np.float16) * np.float16(0.5)
    ks[1][0, 32:] = 0
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    plain, trans = state(ks, vs, 0), state(ks, vs, 1)
    check(convert_kv_state(plain, "f16") == plain, "f16, untransposed: not returned byte for byte")

    meta, v_trans, k_out, v_out = parse(bytes(convert_kv_state(trans, "f16")), N_EMBD * 2)
    check(meta == plain[:len(meta)], "f16: cell metadata changed")
    check(v_trans == 0, "f16: V still marked transposed")
    check(all(t == GGML_F16 and raw == k.tobytes() for (t, raw), k in zip(k_out, ks)), "f16: K rows changed")
    check(all(t == GGML_F16 and raw == v.tobytes() for (t, raw), v in zip(v_out, vs)), "f16: V not untransposed")

    meta, v_trans, k_out, v_out = parse(bytes(convert_kv_state(trans, "q8_0")), N_EMBD // 32 * 34)
    check(meta == plain[:len(meta)] and v_trans == 0, "q8_0: metadata or V layout wrong")
    check(all(t == GGML_Q8_0 for t, _ in k_out + v_out), "q8_0: a layer not of type q8_0")
    blk = np.frombuffer(k_out[1][1][:68], np.dtype([("d", "<f2"), ("qs", "i1", 32)]))
    check(blk["d"][0] == np.float16(8 / 127), f"q8_0: scale {blk['d'][0]}, 8/127 expected")
    want = np.rint(np.arange(-16, 16, dtype=np.float32) * np.float32(0.5) * np.float32(127 / 8)).astype(np.int8)
    check((blk["qs"][0] == want).all(), f"q8_0: quants {blk['qs'][0]}, {want} expected")
    check(blk["d"][1] == 0 and not blk["qs"][1].any(), "q8_0: a zero block not all zero")
    for name, (_, raw), x in [("K", p, a) for p, a in zip(k_out, ks)] + [("V", p, a) for p, a in zip(v_out, vs)]:
        x = x.astype(np.float32)
        scale = np.abs(x.reshape(N_CELLS, -1, 32)).max(axis=2, keepdims=True) / 127
        err = np.abs(dequant_q8_0(raw).reshape(N_CELLS, -1, 32) - x.reshape(N_CELLS, -1, 32))
        # half a step, plus the f16 scale's rounding (2^-11 relative) times up to 127 steps
        check((err <= scale * (0.5 + 127 * 2**-11) + 1e-7).all(), f"q8_0 {name}: off by more than half a step")

    # a quantised cache holds rows turned by llama.cpp's Walsh-Hadamard blocks: the conversion turns them first
    h = hadamard(64)
    check(np.abs(h @ h - np.eye(64)).max() < 1e-6 and (np.abs(h) == np.float32(1 / 8)).all(), "hadamard(64) not orthonormal")
    check([kv_rotation(128, 128), kv_rotation(256, 256), kv_rotation(32, 32)] == [(128, 64), (256, 64), (0, 0)],
          "kv_rotation: not llama.cpp's blocks")
    _, _, k_rot, v_rot = parse(bytes(convert_kv_state(trans, "q8_0", (64, 32))), N_EMBD // 32 * 34)
    for name, (_, raw), x in [("K", k_rot[0], ks[0].astype(np.float32) @ h),
                              ("V", v_rot[0], (vs[0].astype(np.float32).reshape(N_CELLS, 2, 32) @ hadamard(32)).reshape(N_CELLS, N_EMBD))]:
        step = np.abs(x.reshape(N_CELLS, -1, 32)).max(axis=2, keepdims=True) / 127
        err = np.abs(dequant_q8_0(raw).reshape(N_CELLS, -1, 32) - x.reshape(N_CELLS, -1, 32))
        check((err <= step * (0.5 + 127 * 2**-11) + 1e-6).all(), f"q8_0 {name} turned: not the turned rows")

    empty = struct.pack("<IiII", STATE_SEQ_MAGIC, 0, 1, 0)
    check(convert_kv_state(empty, "q8_0") == empty, "an empty state not returned as it is")

    for bad, what in [(trans[:-5], "truncated"), (trans + b"\0", "trailing byte"), (state(ks, vs, 1, 2), "2 streams"),
                      (b"\0" + trans[1:], "bad magic")]:
        try:
            convert_kv_state(bad, "q8_0")
            failures.append(f"a {what} state accepted")
        except ValueError:
            pass
    try:
        convert_kv_state(trans, "q4_0")
        failures.append("an unknown cache type accepted")
    except ValueError:
        pass

    for f in failures:
        print("FAIL:", f)
    print("kv_state:", "ok" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

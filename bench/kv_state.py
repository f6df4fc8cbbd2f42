"""kv_state.py -- llama.cpp's saved KV state of one sequence, converted to
another configuration's layout and cache type (compare_llamacpp.py's
--llama-fill snapshot; tests/test_kv_state.py). Needs numpy (the reference
venv has it; scripts/deps.sh installs python3-numpy)."""
import os
import struct

import numpy as np

# llama.cpp's KV state of one sequence, as llama_state_seq_get_data writes it (llama_context::state_seq_get_data
# in src/llama-context.cpp, then llama_kv_cache::state_write, state_write_meta and state_write_data in
# src/llama-kv-cache.cpp), for a cache of one stream whose cells carry no extension (no M-RoPE, no per-layer
# embeddings: the models here). Little-endian:
#   u32 magic (0xaf143cd8); i32 seq_id
#   u32 n_stream (1); u32 n_cells
#   n_cells x {i32 pos; u32 n_seq_id (1); i32 seq_id}       the cells' metadata, kept as it is
#   u32 v_trans; u32 n_layer
#   n_layer x {i32 k_type; u64 k_row_bytes; [n_cells][k_row_bytes] keys}
#   v_trans 0: n_layer x {i32 v_type; u64 v_row_bytes; [n_cells][v_row_bytes] values}
#   v_trans 1: n_layer x {i32 v_type; u32 v_elem_bytes; u32 n_embd_v; [n_embd_v][n_cells] values}
# (the layout without flash attention: V transposed, a row per value dimension)
STATE_SEQ_MAGIC, GGML_F16, GGML_Q8_0 = 0xaf143cd8, 1, 8
Q8_0_BLOCK = np.dtype([("d", "<f2"), ("qs", "i1", 32)])  # 34 bytes: the scale, 32 quants


def quantize_q8_0(rows):
    """[n][k] float rows (k a multiple of 32) -> [n][k / 32] q8_0 blocks, by ggml's rule on the x86 CPU path
    that fills a q8_0 cache (quantize_row_q8_0): per 32 values d = amax / 127 stored as f16, q = x * (127 / amax)
    rounded to nearest even."""
    x = rows.astype(np.float32).reshape(rows.shape[0], -1, 32)
    amax = np.abs(x).max(axis=2)
    inv = np.divide(np.float32(127), amax, out=np.zeros_like(amax), where=amax != 0)
    out = np.empty(amax.shape, Q8_0_BLOCK)
    out["d"] = (amax / np.float32(127)).astype(np.float16)
    out["qs"] = np.rint(x * inv[:, :, None]).astype(np.int8)
    return out


def kv_rotation(head_k, head_v):
    """The Walsh-Hadamard blocks (keys, values) in which llama.cpp turns a quantised cache's rows
    (llama_kv_cache's attn_rot_k/attn_rot_v, build_input_k_rot/build_input_v_rot; 0: none): keys in the largest
    power of two from 64 up that divides a head, values in 64s, for heads a multiple of 64, unless
    LLAMA_ATTN_ROT_DISABLE is set."""
    if int(os.environ.get("LLAMA_ATTN_ROT_DISABLE", "0") or 0):
        return 0, 0
    rot_k = 64 if head_k % 64 == 0 else 0
    while rot_k and head_k % (2 * rot_k) == 0:
        rot_k *= 2
    return rot_k, 64 if head_v % 64 == 0 else 0


def hadamard(n):
    """The orthonormal n x n Walsh-Hadamard matrix (Sylvester's order, as ggml_gen_hadamard builds it; symmetric)."""
    h = np.ones((1, 1), np.float32)
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h / np.float32(np.sqrt(n))


def convert_kv_state(blob, cache, rot=(0, 0)):
    """llama.cpp's state of one sequence with an f16 cache (either V layout) -> the same cells in flash attention's
    layout (V untransposed) with K and V of type `cache` (f16 or q8_0): a bytearray for llama_state_seq_set_data
    (blob: any buffer, e.g. an mmap of the saved state). rot: kv_rotation's blocks, applied before quantising to
    q8_0 (a quantised cache holds turned rows; the queries and the attention's output are turned to match). Raises
    ValueError on a state it does not know (several streams, cell extensions, another type, trailing bytes)."""
    buf = memoryview(blob)
    at = 0

    def take(fmt):
        nonlocal at
        vals = struct.unpack_from("<" + fmt, buf, at)
        at += struct.calcsize("<" + fmt)
        return vals

    def rows(n_rows, row_bytes):
        nonlocal at
        if at + n_rows * row_bytes > len(buf):
            raise ValueError("KV state: truncated")
        a = np.frombuffer(buf, np.float16, n_rows * row_bytes // 2, at).reshape(n_rows, row_bytes // 2)
        at += n_rows * row_bytes
        return a

    magic, seq_id, n_stream, n_cells = take("IiII")
    if magic != STATE_SEQ_MAGIC:
        raise ValueError(f"KV state: magic {magic:#x}, {STATE_SEQ_MAGIC:#x} expected")
    if n_stream != 1:
        raise ValueError(f"KV state: {n_stream} streams, one expected")
    if n_cells == 0 and len(buf) == at:  # an empty cache: no layers written
        return bytearray(buf)
    meta = np.frombuffer(buf, np.int32, 3 * n_cells, at).reshape(n_cells, 3)  # pos, n_seq_id, seq_id
    if n_cells and (meta[:, 1] != 1).any():
        raise ValueError("KV state: a cell without exactly one sequence (or with an extension)")
    at += meta.nbytes
    v_trans, n_layer = take("II")
    out = bytearray(struct.pack("<IiII", magic, seq_id, n_stream, n_cells)) + meta.tobytes() + struct.pack("<II", 0, n_layer)

    def put(a, block):  # [n_cells][n_embd] f16 -> this type's rows, with their header, a layer at a time (GiBs at 32K)
        if cache == "q8_0":
            if block:
                a = (a.astype(np.float32).reshape(a.shape[0], -1, block) @ hadamard(block)).reshape(a.shape[0], -1)
            q = quantize_q8_0(a)
            out.extend(struct.pack("<iQ", GGML_Q8_0, q.shape[1] * Q8_0_BLOCK.itemsize))
            out.extend(q.tobytes())
        elif cache == "f16":
            out.extend(struct.pack("<iQ", GGML_F16, a.shape[1] * 2))
            out.extend(np.ascontiguousarray(a).tobytes())
        else:
            raise ValueError(f"unknown cache type {cache}")

    for _ in range(n_layer):
        k_type, k_row = take("iQ")
        if k_type != GGML_F16:
            raise ValueError(f"KV state: K of ggml type {k_type}, f16 expected")
        put(rows(n_cells, k_row), rot[0])
    for _ in range(n_layer):
        if v_trans:
            v_type, v_el, n_embd_v = take("iII")
            if v_type != GGML_F16 or v_el != 2:
                raise ValueError(f"KV state: V of ggml type {v_type}, f16 expected")
            put(rows(n_embd_v, 2 * n_cells).T, rot[1])
        else:
            v_type, v_row = take("iQ")
            if v_type != GGML_F16:
                raise ValueError(f"KV state: V of ggml type {v_type}, f16 expected")
            put(rows(n_cells, v_row), rot[1])
    if at != len(buf):
        raise ValueError(f"KV state: {len(buf) - at} bytes left over")
    return out

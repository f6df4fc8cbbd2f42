#!/usr/bin/env python3
"""ref_logits.py — llama.cpp as the reference: logits and greedy continuations.

Runs llama.cpp through the llama-cpp-python package on its plain CPU path:
no weight repacking, no AMX, no flash attention, f16 KV cache. That is the
arithmetic seam mirrors, so the two can be compared at a tight tolerance.
Run it with the Python of the reference venv, which tools/setup-reference.sh
builds (the pinned version, from source, flags written down):
/opt/llamavenv/bin/python, or /opt/llamavenv-avx2/bin/python for the
AVX2-only build.

With a q8_0 KV cache (--cache-type-k/--cache-type-v, seam's -ctk/-ctv)
llama.cpp runs its flash attention, the only attention it has over a
quantised V cache, and the one seam follows for any q8_0 cache.

  ref_logits.py MODEL --tokens 1,2,3 [--prompt TEXT] [--greedy N]
                [--logits OUT.f32] [--json OUT.json] [--threads N] [--batch]
                [--cache-type-k f16|q8_0] [--cache-type-v f16|q8_0]
  ref_logits.py --system-info      the version and llama.cpp's system info line

--logits writes float32 little-endian, row-major [n_tokens][n_vocab]: the
logits after each prompt token (teacher forcing), the layout `seam logits`
writes. --greedy N also records llama.cpp's N-token greedy continuation.
By default tokens are evaluated one at a time (the decode path, as seam
runs them); --batch evaluates the prompt as one batch.
"""
import argparse
import ctypes
import hashlib
import json
import sys

import numpy as np

import llama_cpp as L


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@L.llama_log_callback
def _quiet_log(level, text, user_data):
    pass


def system_info():
    """The build that runs, in llama.cpp's words: the package version and its
    system info line (instruction sets, repack, llamafile)."""
    return f"llama-cpp-python {L.__version__}", L.llama_print_system_info().decode().strip()


# KV cache types by name, as ggml numbers them (GGML_TYPE_F16, GGML_TYPE_Q8_0).
CACHE_TYPES = {"f16": 1, "q8_0": 8}


def load(path, n_ctx, threads, cache_k="f16", cache_v="f16", n_batch=None, n_ubatch=None, repack=False, flash=None,
         swa_full=None):
    """llama.cpp's model and a context on the CPU: (model, ctx); exits with a
    message when either fails. n_batch and n_ubatch: n_ctx unless given.
    repack: llama.cpp's repacked weights and AMX buffers (use_extra_bufts), off
    on the plain path seam mirrors. flash: flash attention, by default exactly
    when a cache type is quantised, as seam's attention. swa_full: whether
    sliding-window layers keep every position (None: llama.cpp's default)."""
    L.llama_backend_init()
    L.llama_log_set(_quiet_log, None)
    mp = L.llama_model_default_params()
    mp.n_gpu_layers = 0
    mp.use_extra_bufts = repack
    mp.use_mmap = True
    model = L.llama_model_load_from_file(path.encode(), mp)
    if not model:
        sys.exit(f"llama.cpp could not load {path}")
    cp = L.llama_context_default_params()
    cp.n_ctx = n_ctx
    cp.n_batch = n_batch or n_ctx
    cp.n_ubatch = n_ubatch or n_ctx
    cp.n_threads = cp.n_threads_batch = threads
    if flash is None:
        flash = cache_k != "f16" or cache_v != "f16"
    cp.flash_attn_type = L.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash else L.LLAMA_FLASH_ATTN_TYPE_DISABLED
    cp.type_k = CACHE_TYPES[cache_k]
    cp.type_v = CACHE_TYPES[cache_v]
    if swa_full is not None:
        cp.swa_full = swa_full
    ctx = L.llama_init_from_model(model, cp)
    if not ctx:
        sys.exit("llama.cpp could not create a context")
    return model, ctx


class Reference:
    """llama.cpp on one model, on its plain path (load). cache_k, cache_v: the
    KV cache's types (CACHE_TYPES' names); flash attention runs exactly when
    one is quantised, as seam's attention does. swa_full: sliding-window layers
    keep every position (the golden fixtures' setting; llama.cpp's default is
    a ring)."""

    def __init__(self, path, n_ctx, threads, cache_k="f16", cache_v="f16", swa_full=True):
        self.model, self.ctx = load(path, n_ctx, threads, cache_k, cache_v, swa_full=swa_full)
        self.vocab = L.llama_model_get_vocab(self.model)
        self.n_vocab = L.llama_vocab_n_tokens(self.vocab)
        self.batch = L.llama_batch_init(n_ctx, 0, 1)

    def tokenize(self, text, add_special=True, parse_special=True):
        """As llama.cpp's tools (and seam -p) tokenise a prompt: BOS where the
        file asks for it, control-token text recognised."""
        raw = text.encode("utf-8") if isinstance(text, str) else text
        buf = (L.llama_token * (len(raw) + 16))()
        n = L.llama_tokenize(self.vocab, raw, len(raw), buf, len(buf), add_special, parse_special)
        if n < 0:
            buf = (L.llama_token * (-n))()
            n = L.llama_tokenize(self.vocab, raw, len(raw), buf, len(buf), add_special, parse_special)
        return list(buf[:n])

    def reset(self):
        L.llama_memory_clear(L.llama_get_memory(self.ctx), True)

    def _decode(self, tokens, pos0, want_logits):
        b = self.batch
        b.n_tokens = len(tokens)
        for i, t in enumerate(tokens):
            b.token[i] = t
            b.pos[i] = pos0 + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = 0
            b.logits[i] = want_logits
        if L.llama_decode(self.ctx, b) != 0:
            sys.exit("ref_logits: llama_decode failed")

    def logits_ith(self, i):
        p = L.llama_get_logits_ith(self.ctx, i)
        return np.ctypeslib.as_array(p, shape=(self.n_vocab,)).copy()

    def teacher_forced(self, tokens, batch):
        """Logits after each token of `tokens`, fed from position 0."""
        self.reset()
        out = np.zeros((len(tokens), self.n_vocab), dtype=np.float32)
        if batch:
            self._decode(tokens, 0, True)
            for i in range(len(tokens)):
                out[i] = self.logits_ith(i)
        else:
            for i, t in enumerate(tokens):
                self._decode([t], i, True)
                out[i] = self.logits_ith(0)
        return out

    def greedy(self, tokens, n):
        self.reset()
        for i, t in enumerate(tokens):
            self._decode([t], i, True)
        out = []
        pos = len(tokens)
        for _ in range(n):
            nxt = int(np.argmax(self.logits_ith(0)))
            out.append(nxt)
            self._decode([nxt], pos, True)
            pos += 1
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?")
    ap.add_argument("--system-info", action="store_true", help="print the build's version and system info, then exit")
    ap.add_argument("--tokens", help="comma-separated token ids")
    ap.add_argument("--prompt", help="text, tokenised by llama.cpp (BOS as the file says)")
    ap.add_argument("--greedy", type=int, default=0)
    ap.add_argument("--logits", help="write teacher-forced logits here (float32 [n_tokens][n_vocab])")
    ap.add_argument("--json", help="write tokens, greedy continuation and the model's SHA-256 here")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--batch", action="store_true")
    ap.add_argument("--cache-type-k", choices=CACHE_TYPES, default="f16")
    ap.add_argument("--cache-type-v", choices=CACHE_TYPES, default="f16")
    a = ap.parse_args()
    if a.system_info:
        print("\n".join(system_info()))
        return
    if not a.model:
        ap.error("give a MODEL (or --system-info)")

    ref = Reference(a.model, a.ctx, a.threads, a.cache_type_k, a.cache_type_v)
    if a.tokens:
        tokens = [int(t) for t in a.tokens.split(",")]
    elif a.prompt is not None:
        tokens = ref.tokenize(a.prompt)
    else:
        sys.exit("ref_logits: give --tokens or --prompt")
    result = {"model_sha256": sha256(a.model), "tokens": tokens}
    if a.logits:
        ref.teacher_forced(tokens, a.batch).tofile(a.logits)
    if a.greedy:
        result["greedy"] = ref.greedy(tokens, a.greedy)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f)
    else:
        print(json.dumps(result))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""mutate.py — the mutation check: does the suite fail when the code is wrong?

  tools/mutate.py [--rev REV] [--only N,M,...] [--list] [--keep] [-j N]

Each mutant of MUTANTS below changes one line of src/ or kernels/ (the
kernels, the tokenizer, the sampler, the engine, the plan, the CLI, the CUDA
side) the way a plausible bug would. The CUDA side's mutants run in an
emulated build (-DSEAM_CUDA_EMU=ON) against its GPU tests, the rest in a
CPU-only one. The check copies the tree (the working tree, or git revision REV:
its src/ must still hold every mutant's line) to a temporary folder, with the
installed models and vocabularies (models/*.gguf), builds it CPU-only
(-DSEAM_CUDA=OFF: no nvcc time), runs the suite once unmutated (it must
pass), then for each mutant: applies it, rebuilds, and runs ctest until the
first failing test. A mutant is killed when a test fails (or the build does),
and survives when the whole suite passes. The report lists each mutant, what
killed it and how long it took, and the kill rate.

Every mutant that is not equivalent (one that changes no behaviour a test
could see: `equivalent` says why) must be killed; a survivor is a hole in the
suite. ctest runs as ./test.sh runs it (SEAM_REQUIRE_INPUTS=1,
SEAM_REQUIRE_SIMD=1), so run models/get-default-model.sh and
models/get-vocabs.sh first. A mutant takes a rebuild (10-40 s on 2 cores)
and the suite up to its first failure (a survivor: the whole suite, ~2 min).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (file, the line's text as it stands, the mutant's, what the bug is[, why it is equivalent])
MUTANTS = [
    # the sampler
    ("src/text/sampler.c", "s->cand[i].prob = expf((logits[i] - max) / s->temperature);",
     "s->cand[i].prob = expf(logits[i] - max);", "temperature ignored"),
    ("src/text/sampler.c", "if (s->top_k > 0 && s->top_k < n) n = s->top_k;",
     "if (s->top_k > 0 && s->top_k < n) n = s->top_k + 1;", "top-k keeps one token more"),
    ("src/text/sampler.c", "if (kept >= s->top_p * sum) {", "if (kept >= s->top_p) {",
     "top-p's nucleus measured against 1, not the mass kept"),
    ("src/text/sampler.c", "s->rng_state = seed ? seed : 0x5eed5eedull;", "s->rng_state = 0x5eed5eedull;",
     "the seed ignored"),
    ("src/text/sampler.c", "if (logits[i] > logits[best]) best = i;", "if (logits[i] >= logits[best]) best = i;",
     "greedy takes the last of equal logits"),
    # the generation loop and the CLI
    ("src/cli/main.c", "while (n < n_max) {", "while (n <= n_max) {", "one token more than -n"),
    ("src/cli/main.c", "if (engine_forward(&s->eng, next, (*pos)++, &logits, err)) return -1;",
     "if (engine_forward(&s->eng, next, *pos, &logits, err)) return -1;",
     "every generated token fed at the same position"),
    ("src/cli/main.c", "        if (end) break;", "        if (end && n == n_max) break;",
     "generation goes on past an end-of-generation token"),
    ("src/text/chat.c", '{{"<start_of_turn>"}, "Gemma", &GEMMA},', '{{"<start_of_turn>"}, "Gemma", &CHATML},',
     "chat writes a Gemma file's turns in ChatML"),
    ("src/cli/main.c", "if (engine_forward(&ss.eng, ss.prompt[i], i, &logits, &err)) {",
     "if (engine_forward(&ss.eng, ss.prompt[i], 0, &logits, &err)) {", "logits -o feeds every token at position 0"),
    ("src/cli/options.c", "o->top_k = (int)x, i++;", "o->top_k = (int)x + 1, i++;", "--top-k read one too high"),
    ("src/base/timeline.c", 'i ? "," : "", tt->token, tt->pos, tt->prefill ? "true" : "false",',
     'i ? "," : "", tt->token, tt->pos, tt->prefill ? "false" : "true",', "--timeline's JSON swaps prefill and decode"),
    # gemma3's sliding window
    ("src/model/placement.c", "return c->layer_swa[il] && pos + 1 > c->n_swa ? c->n_swa : pos + 1;",
     "return c->layer_swa[il] && pos + 1 > c->n_swa ? c->n_swa + 1 : pos + 1;",
     "a sliding layer sees one position more than its window"),
    ("src/model/model.c", "c->layer_swa[il] = pattern == 0 || il % pattern < pattern - 1;",
     "c->layer_swa[il] = pattern == 0 || il % pattern < pattern;", "every layer slides, the global ones too"),
    ("src/model/placement.c", "const int ring = c->n_swa + SEAM_UBATCH;", "const int ring = c->n_swa;",
     "a sliding layer's ring without room for a batch"),
    ("src/model/model.c", '"rope.freq_base_swa", 10000.0f', '"rope.freq_base_swa", 1000000.0f',
     "the sliding layers rotate with the global layers' base"),
    # architectures: a bias, the RoPE pairs, the embedding scale
    ("src/model/layer.c", "TRY(op->add_bias(be, a->k, &l->bk, n, kv_dim, e));",
     "TRY(op->add_bias(be, a->k, &l->bq, n, kv_dim, e));", "qwen2's k takes q's bias"),
    ("src/model/model.c", "c->rope_neox = c->arch != ARCH_LLAMA;", "c->rope_neox = true;",
     "llama rotates NEOX pairs, not adjacent ones"),
    ("src/model/model.c", "c->embd_scale = c->arch == ARCH_GEMMA3 ? sqrtf((float)c->n_embd) : 1.0f;",
     "c->embd_scale = c->arch == ARCH_GEMMA3 ? sqrtf((float)c->n_embd + 1) : 1.0f;",
     "gemma3's embeddings scaled by sqrt(n_embd + 1)"),
    # the kernels
    ("src/cpu/ops.c", "const float scale = 1.0f / sqrtf(mean + eps);",
     "const float scale = 1.0f / sqrtf(mean + 2 * eps);", "RMS norm's epsilon doubled (logits move by ~1e-6)"),
    ("src/numeric/quant.c", "q[l] = (int8_t)(((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32);",
     "q[l] = (int8_t)(((ql[l] & 15) | ((qh[l] & 3) << 4)) - 31);", "Q6_K's first quarter off by one"),
    ("src/numeric/quant.c", "y[b].qs[j] = (int8_t)nearbyintf(fmaxf(-127.0f, fminf(127.0f, x[j] * id)));",
     "y[b].qs[j] = (int8_t)nearbyintf(fmaxf(-127.0f, fminf(126.0f, x[j] * id)));",
     "the Q8_0 activation quantiser clips at 126"),
    ("src/cpu/matvec_avx2.c", "for (; i < n; i++) sum += (double)(f16_to_f32(w[i]) * f16_to_f32(a[i]));",
     "for (; i < n; i++) sum -= (double)(f16_to_f32(w[i]) * f16_to_f32(a[i]));", "the AVX2 F16 dot's tail subtracts"),
    ("src/numeric/exact.c", "for (; i < n; i++) gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];",
     "for (; i < n; i++) gate[i] = gate[i] / (1.0f + expf(-gate[i]));", "SwiGLU's scalar tail drops up"),
    # the tokenizer
    ("src/text/tokenizer.c", "*prio = t->score[id];", "*prio = -t->score[id];", "SentencePiece merges the worst pair first"),
    ("src/text/tokenizer_bpe.c", "*prio = -(double)rank;", "*prio = (double)rank;", "BPE merges the last-ranked pair first"),
    ("src/text/tokenizer.c", "if (t->eos >= 0) t->eog[t->eos] = true;", "if (t->eos >= 0) t->eog[t->eos] = false;",
     "EOS does not end generation"),
    # the plan's memory
    ("src/engine/engine.c", "           (uint64_t)n_ctx * sizeof(seam_token_time);",
     "           0;", "the plan forgets the timeline's record per token"),
    ("src/model/placement.c",
     "return n * (ggml_row_bytes(plan_kv_ggml_type[kv.k], kv_dim) + ggml_row_bytes(plan_kv_ggml_type[kv.v], kv_dim));",
     "return n * (ggml_row_bytes(plan_kv_ggml_type[kv.k], kv_dim) + ggml_row_bytes(plan_kv_ggml_type[kv.k], kv_dim));",
     "a KV row counted as two K rows (wrong when -ctk and -ctv differ)"),
    ("src/plan/plan.c", "const seam_device kv_dev = il < n || overflow_on_gpu ? DEV_GPU : DEV_CPU;",
     "const seam_device kv_dev = il <= n || overflow_on_gpu ? DEV_GPU : DEV_CPU;",
     "the first CPU layer's KV cache counted on the GPU"),
    # the CUDA side, on the emulated device (CUDA_MUTANT_PATHS: an emulated
    # build and its GPU tests): the holes the emulator and the suite missed
    ("kernels/cuda_common.cuh", "for (int i = threadIdx.x; i < n; i += blockDim.x) max = fmaxf(max, x[i]);",
     "for (int i = threadIdx.x; i <= n; i += blockDim.x) max = fmaxf(max, x[i]);",
     "block_softmax's max reads one past the end"),
    ("kernels/norm_rope.cu", "for (int i = threadIdx.x; i < n; i += NORM_THREADS) ss += (double)(xr[i] * xr[i]);",
     "for (int i = threadIdx.x; i <= n; i += NORM_THREADS) ss += (double)(xr[i] * xr[i]);",
     "rmsnorm reads x[n] (past the end on a 1-row shape)"),
    ("kernels/norm_rope.cu", "const float pos = (float)step[blockIdx.x / n_heads].pos;",
     "const float pos = (float)step[blockIdx.x / n_heads ? 1 : 0].pos;",
     "RoPE gives every token of a batch but the first token 1's position"),
    ("kernels/matvec.cu", "if (row >= rows) return;  // the whole warp: the shuffles below see all 32 lanes",
     "if (row > rows) return;  // the whole warp: the shuffles below see all 32 lanes",
     "the matvec's row bound off by one"),
    ("src/gpu/gpu_segment.c", "if (gpu_crossing(g, CROSS_D2H, g->x_pinned, x_dev, x_bytes, g->n_layers, false, token, tl, e)) return -1;",
     "if (gpu_crossing(g, CROSS_D2H, g->x_pinned, x_dev, x_bytes - sizeof(float), g->n_layers, false, token, tl, e)) return -1;",
     "the hidden state crosses back one float short"),
    ("kernels/gemm.cu", "    cublasStatus_t st = b->stream == stream_of(s) ? CUBLAS_STATUS_SUCCESS : bind(b, stream_of(s), &what);",
     "    cublasStatus_t st = cublasSetStream(b->h, stream_of(s));",
     "cublasSetStream without the workspace again (cuBLAS's own pool)"),
    ("src/plan/memstat.c",
     '    m->gpu_free = gpu_free_bytes();\n    FILE *f = fopen("/proc/self/status", "r");\n    char line[256];\n    while (f && fgets(line, sizeof line, f)) {\n        unsigned long long kib;\n        if (sscanf(line, "VmRSS: %llu kB", &kib) == 1) m->rss = kib << 10;\n        else if (sscanf(line, "RssAnon: %llu kB", &kib) == 1) m->rss_anon = kib << 10;\n    }\n    if (f) fclose(f);\n',
     '    FILE *f = fopen("/proc/self/status", "r");\n    char line[256];\n    while (f && fgets(line, sizeof line, f)) {\n        unsigned long long kib;\n        if (sscanf(line, "VmRSS: %llu kB", &kib) == 1) m->rss = kib << 10;\n        else if (sscanf(line, "RssAnon: %llu kB", &kib) == 1) m->rss_anon = kib << 10;\n    }\n    if (f) fclose(f);\n    m->gpu_free = gpu_free_bytes();\n',
     "the GPU read after the resident set (the CUDA context counted as the engine's)"),
]
# Mutants of these paths run in an emulated build (-DSEAM_CUDA_EMU=ON) and its GPU tests.
CUDA_MUTANT_PATHS = ("kernels/", "src/gpu/", "src/plan/memstat.c")
CUDA_TESTS = "test_cuda|test_emu|test_engine|test_plan|golden_split"


def sh(cmd, cwd, log, env=None, timeout=None):
    """Runs cmd (a list) in cwd, its output appended to log; its exit status (124 past timeout)."""
    with open(log, "a") as f:
        f.write(f"\n$ {' '.join(cmd)}\n")
        f.flush()
        try:
            return subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, env=env, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            return 124


def copy_tree(rev, dest):
    """The working tree (tracked and untracked files git does not ignore), or
    revision rev, into dest; then the installed models and vocabularies."""
    if rev:
        archive = subprocess.run(["git", "archive", rev], cwd=ROOT, stdout=subprocess.PIPE, check=True).stdout
        subprocess.run(["tar", "-x", "-C", dest], input=archive, check=True)
    else:
        files = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                               stdout=subprocess.PIPE).stdout.decode().split("\0")
        for f in filter(None, files):
            src = os.path.join(ROOT, f)
            if os.path.lexists(src):
                os.makedirs(os.path.dirname(os.path.join(dest, f)), exist_ok=True)
                shutil.copy2(src, os.path.join(dest, f), follow_symlinks=False)
    for f in os.listdir(os.path.join(ROOT, "models")):
        if f.endswith(".gguf"):
            shutil.copy2(os.path.join(ROOT, "models", f), os.path.join(dest, "models", f), follow_symlinks=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rev", help="check this git revision instead of the working tree")
    ap.add_argument("--only", help="comma-separated mutant numbers (1-based), as --list shows them")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--keep", action="store_true", help="keep the temporary tree (its build and logs)")
    ap.add_argument("-j", type=int, default=2, help="ctest's parallel tests [2]")
    a = ap.parse_args()
    chosen = [int(x) for x in a.only.split(",")] if a.only else range(1, len(MUTANTS) + 1)
    if a.list:
        for i, m in enumerate(MUTANTS, 1):
            print(f"{i:3} {m[0]}: {m[3]}" + (f" (equivalent: {m[4]})" if len(m) > 4 else ""))
        return 0

    work = tempfile.mkdtemp(prefix="seam-mutate-")
    tree, log = os.path.join(work, "tree"), os.path.join(work, "log.txt")
    os.makedirs(tree)
    copy_tree(a.rev, tree)
    for i in chosen:  # every mutant's line must be there once, before anything is built
        path, old = os.path.join(tree, MUTANTS[i - 1][0]), MUTANTS[i - 1][1]
        n = open(path).read().count(old) if os.path.exists(path) else 0
        if n != 1:
            sys.exit(f"mutate: mutant {i}: {MUTANTS[i - 1][0]} holds its line {n} times, not once: {old}")
    env = dict(os.environ, SEAM_REQUIRE_INPUTS="1", SEAM_REQUIRE_SIMD="1")
    is_cuda = lambda i: MUTANTS[i - 1][0].startswith(CUDA_MUTANT_PATHS)  # noqa: E731
    builds = {}  # "cpu" and/or "emu": (build folder, ctest command)
    for kind in sorted({"emu" if is_cuda(i) else "cpu" for i in chosen}):
        b = os.path.join(tree, "build" if kind == "cpu" else "build-emu")
        ctest = ["ctest", "--test-dir", b, "--stop-on-failure", "--no-tests=error", "--output-on-failure",
                 "-j", str(a.j)] + (["-R", CUDA_TESTS] if kind == "emu" else [])
        flags = ["-DSEAM_CUDA=OFF"] if kind == "cpu" else ["-DSEAM_CUDA_EMU=ON", "-DCMAKE_BUILD_TYPE=RelWithDebInfo"]
        configure = ["cmake", "-S", tree, "-B", b, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"] + flags
        print(f"mutate: {a.rev or 'the working tree'} in {tree} ({kind} build); log {log}", flush=True)
        if sh(configure, tree, log) or sh(["cmake", "--build", b], tree, log) or sh(ctest, tree, log, env):
            sys.exit(f"mutate: the unmutated tree does not build or pass its suite in the {kind} build (see {log})")
        builds[kind] = (b, ctest)

    killed = survived = alive_equivalent = 0
    rows = []
    for i in chosen:
        path, old, new, what = MUTANTS[i - 1][:4]
        equivalent = MUTANTS[i - 1][4] if len(MUTANTS[i - 1]) > 4 else None
        full = os.path.join(tree, path)
        build, ctest = builds["emu" if is_cuda(i) else "cpu"]
        original = open(full).read()
        t0 = time.time()
        try:
            open(full, "w").write(original.replace(old, new))
            mark = os.path.getsize(log)  # the log holds test output: bytes, not always UTF-8
            if sh(["cmake", "--build", build], tree, log):
                verdict = "killed by the build"
            elif sh(ctest, tree, log, env, timeout=1800):
                with open(log, "rb") as f:
                    f.seek(mark)
                    lines = f.read().decode(errors="replace").splitlines()
                # ctest's closing list: "\t  7 - test_golden (Failed)"
                failed = [m.group(1) for m in map(re.compile(r"^\t\s*\d+ - (\S+) \(").match, lines) if m]
                verdict = "killed by " + (", ".join(failed) or "ctest")
            else:
                verdict = "SURVIVED" + (f" (equivalent: {equivalent})" if equivalent else "")
        finally:
            open(full, "w").write(original)
        killed += not verdict.startswith("SURVIVED")
        survived += verdict == "SURVIVED"
        alive_equivalent += bool(equivalent) and verdict.startswith("SURVIVED")
        rows.append(f"| {i} | {path} | {what} | {verdict} | {time.time() - t0:.0f} s |")
        print(f"mutate: {i:3} {path}: {what}: {verdict} ({time.time() - t0:.0f} s)", flush=True)

    print("\n| # | file | mutant | verdict | time |\n| --- | --- | --- | --- | --- |")
    print("\n".join(rows))
    total = killed + survived + alive_equivalent
    print(f"\nmutate: {killed} of {total} mutants killed ({100 * killed / total:.0f}%); {survived} survived, "
          f"{alive_equivalent} equivalent ones alive")
    if not a.keep:
        shutil.rmtree(work)
    return 0 if survived == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

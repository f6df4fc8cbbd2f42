#!/usr/bin/env python3
"""ref_tokenize.py — llama.cpp's tokenisations as fixtures for seam's tokenizer tests.

  golden MODEL.gguf OUT.txt [--random N --seed S]
      Loads MODEL.gguf's vocabulary in llama.cpp (llama-cpp-python, vocab_only),
      tokenises the corpus below (plus N seeded random strings mixing scripts,
      whitespace, digits, invalid bytes and the vocabulary's special tokens)
      with each add_special/parse_special pair, and writes OUT.txt, which
      tests/test_tokenizer.c reads. Run it with the Python of the
      reference venv that tools/setup-reference.sh builds
      (/opt/llamavenv/bin/python).

  vocab TOKENIZER_DIR OUT.gguf --pre NAME [--merges N] [--arch ARCH]
      Writes a vocabulary-only GGUF from a Hugging Face byte-level BPE
      tokenizer (tokenizer.json + tokenizer_config.json), the way llama.cpp's
      converter lays it out. --merges N keeps the first N merges and only the
      tokens they make (plus single characters and added tokens): a small but
      real vocabulary that can live in the repository. Needs the gguf package.

  spm-vocab SRC.gguf OUT.gguf --tokens N --add-space-prefix 0|1
      Writes the first N tokens of a SentencePiece vocabulary (e.g. Gemma 3's,
      whose first ids hold its control, user-defined and byte tokens) as a
      vocabulary-only GGUF, with add_space_prefix set as asked (Llama-style 1).

Fixture format (one record a line, bytes as lowercase hex, '-' for none):
  model PATH              the GGUF, relative to the repository root
  sha256 HEX              of that file; the test refuses a different file
  vocab N BOS EOS         n_vocab and llama_vocab_bos/eos (-1: none)
  eog N ID...             the ids llama_vocab_is_eog accepts
  pieces HEX HEX          SHA-256 over every id of u32le(len) + piece bytes,
                          render_special false, then true
  text HEX                a test string, followed by its four encodings:
  ids FLAGS N ID...       FLAGS = 2*add_special + parse_special
  piece ID HEX HEX        the piece of every id above, special false / true
"""
import argparse
import ctypes
import hashlib
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ENGLISH = (
    "The quick brown fox jumps over the lazy dog. It wasn't the first time; "
    "the dog, who'd seen it all before, didn't even look up. \"Again?\" he "
    "thought -- and went back to sleep. Meanwhile, in 2024, 1,234 foxes "
    "(roughly 12.5% of them) did the same thing 3x faster!"
)

# Each entry is bytes: invalid UTF-8 is part of the corpus.
CORPUS = [
    b"", b" ", b"  ", b"   ", b"\n", b"\n\n", b"\n\n\n", b"\t", b"\t\t\t", b"\r\n",
    b"Hello world", b" Hello world", b"Hello  world", b"Hello world ", b"hello\nworld",
    b"Hello, world! How's it going? I'm fine; you're OK. We'll see, they've done, he'd",
    b"HOW'S IT GOING? I'M FINE, YOU'RE OK, WE'LL SEE, THEY'VE GONE, HE'D GO",
    b"don't can't won't isn't ' 's 'x",
    b"1", b"12", b"123", b"1234", b"12345678901", b"3.14159", b"-42", b"1,000,000", b"v2.0.1-rc3",
    "٣٤٥ ١٢ Ⅻ ½ ²³".encode(),
    b"!!!???...", b"a...b", b"--> <-- == != ===", b"(foo)[bar]{baz}",
    b"`code` ~tilde~ ^caret^ |pipe| $5 + 3 = 8 <tag> @user #hash %pct &amp *star* _under_",
    b"\"quoted\" 'single' \\backslash/",
    b"   leading", b"trailing   ", b"a \t b", b"line1\r\nline2", b"\n\n\nx", b"a\n\n\n\nb",
    b"x  \n  y", b"a    b", b"a" + b" " * 40 + b"b", b"tab\there", b"end with newline\n",
    "\u00a0nbsp\u3000ideographic\u2003em".encode(),
    "안녕하세요, 세계!".encode(), "한국어 토크나이저 테스트입니다.".encode(),
    "你好，世界！".encode(), "我爱自然语言处理。".encode(), "こんにちは世界、カタカナ".encode(),
    "🙂👍🏽🇰🇷".encode(), "👨\u200d👩\u200d👧\u200d👦 family".encode(),
    "Hello 世界 안녕 мир العالم שלום".encode(), "naïve café résumé Ünïcödé".encode(),
    "e\u0301 combining a\u0308".encode(), "Ελληνικά Русский текст".encode(),
    b"def f(x):\n    return x**2  # square\n", b"int main() { return 0; }\n", b"    indented\n\tTabbed",
    b"\xff", b"abc\xffdef", b"\xc3", b"\xc3(", b"\xe2\x82", b"\x80", b"\xbf\xbf", b"\xed\xa0\x80",
    b"\xc0\x80", b"a\x00b", "caf\u00e9".encode("latin-1"),
    b"<bos>hi", b"<eos>", b"<pad><unk><mask>", b"<unused0><unused99>",
    b"<start_of_turn>user\nhello<end_of_turn>\n<start_of_turn>model\n",
    b"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", b"<|endoftext|>",
    b"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    b"<think>x</think><tool_call>{}</tool_call>", b"<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>",
    b"<|reserved_special_token_0|>", b"<<|im_end|>>", b"<|im_", b"<start_of_image>",
    ENGLISH.encode(), ((ENGLISH + "\n\n") * 3).encode(),
]


def random_corpus(n, seed, specials):
    """n random strings built from the pieces tokenizers find hard."""
    import random

    rng = random.Random(seed)
    words = ["the", "The", "HELLO", "naïve", "über", "straße", "ǅemal", "x", "foo_bar", "camelCase"]
    spaces = [" ", "  ", "\t", "\n", "\r\n", "\n\n", " \n ", "\u00a0", "\u3000", "\u2003", "\x0b", "\x85"]
    puncts = ["'s", "'T", "'re", "'LL", "'", "...", "!?", "--", "\"", "(", ")", "`", "~", "$", "<", ">", "|", "^", "_", "#"]
    ranges = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF),
              (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F), (0x2190, 0x23FF),
              (0x3000, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xFF00, 0xFFEF), (0x1F300, 0x1FAFF),
              (0x10000, 0x1007F), (0x20000, 0x2A6DF), (0x2EBF0, 0x2EE5D), (0xE0000, 0xE007F), (0xF0000, 0xF00FF)]

    def piece():
        k = rng.randrange(8)
        if k == 0:
            return rng.choice(words).encode()
        if k == 1:
            return "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 9))).encode()
        if k == 2:
            return "".join(rng.choice(spaces) for _ in range(rng.randrange(1, 4))).encode()
        if k == 3:
            return rng.choice(puncts).encode()
        if k == 4:
            lo, hi = rng.choice(ranges)
            return "".join(chr(rng.randint(lo, hi)) for _ in range(rng.randrange(1, 6))).encode()
        if k == 5 and specials:
            return rng.choice(specials)
        if k == 6:  # raw bytes, mostly invalid UTF-8
            return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4)))
        return b" " + rng.choice(words).encode()

    def decodable(b):
        # llama.cpp aborts on 4-byte sequences above U+10FFFF; keep them out
        for i in range(len(b) - 3):
            if b[i] in (0xF4, 0xF5, 0xF6, 0xF7) and all(0x80 <= c < 0xC0 for c in b[i + 1:i + 4]):
                if b[i] > 0xF4 or b[i + 1] >= 0x90:
                    return False
        return True

    out = []
    while len(out) < n:
        text = b"".join(piece() for _ in range(rng.randrange(1, 12)))
        if decodable(text):
            out.append(text)
    return out


def rel(path):
    path = os.path.abspath(path)
    return os.path.relpath(path, ROOT) if path.startswith(ROOT + os.sep) else path


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def hx(b):
    return b.hex() if b else "-"


def golden(args):
    import llama_cpp as L

    global QUIET  # kept alive: llama.cpp calls it for every log line
    QUIET = L.llama_log_callback(lambda level, text, data: None)

    L.llama_log_set(QUIET, ctypes.c_void_p())
    L.llama_backend_init()
    params = L.llama_model_default_params()
    params.vocab_only = True
    model = L.llama_model_load_from_file(args.model.encode(), params)
    if not model:
        sys.exit(f"llama.cpp could not load {args.model}")
    vocab = L.llama_model_get_vocab(model)
    n_vocab = L.llama_vocab_n_tokens(vocab)

    def tokenize(text, add_special, parse_special):
        cap = len(text) + 8
        while True:
            buf = (L.llama_token * cap)()
            n = L.llama_tokenize(vocab, text, len(text), buf, cap, add_special, parse_special)
            if n >= 0:
                return list(buf[:n])
            cap = -n

    def piece(tid, special):
        cap = 64
        while True:
            buf = ctypes.create_string_buffer(cap)
            n = L.llama_token_to_piece(vocab, tid, buf, cap, 0, special)
            if n >= 0:
                return buf.raw[:n]
            cap = -n

    corpus = list(CORPUS)
    if args.random:
        specials = [L.llama_vocab_get_text(vocab, t) for t in range(n_vocab)
                    if L.llama_vocab_get_attr(vocab, t) & (L.LLAMA_TOKEN_ATTR_CONTROL | L.LLAMA_TOKEN_ATTR_USER_DEFINED)]
        corpus += random_corpus(args.random, args.seed, specials)

    digests = []
    for special in (False, True):
        h = hashlib.sha256()
        for tid in range(n_vocab):
            p = piece(tid, special)
            h.update(len(p).to_bytes(4, "little") + p)
        digests.append(h.hexdigest())

    out = [
        "# llama.cpp's tokenisations of a test corpus, for tests/test_tokenizer.c.",
        f"# Written by tools/ref_tokenize.py with llama-cpp-python {L.__version__}; do not edit.",
        f"# Regenerate: python tools/ref_tokenize.py golden {rel(args.model)} {rel(args.out)}"
        + (f" --random {args.random} --seed {args.seed}" if args.random else ""),
        f"model {rel(args.model)}",
        f"sha256 {sha256_file(args.model)}",
        f"vocab {n_vocab} {L.llama_vocab_bos(vocab)} {L.llama_vocab_eos(vocab)}",
    ]
    eog = [t for t in range(n_vocab) if L.llama_vocab_is_eog(vocab, t)]
    out.append("eog %d %s" % (len(eog), " ".join(map(str, eog))))
    out.append(f"pieces {digests[0]} {digests[1]}")
    seen = set()
    for text in corpus:
        out.append(f"text {hx(text)}")
        new = []
        for flags in range(4):
            ids = tokenize(text, bool(flags & 2), bool(flags & 1))
            out.append("ids %d %d %s" % (flags, len(ids), " ".join(map(str, ids))))
            new += [t for t in ids if t not in seen and not seen.add(t)]
        for t in new:
            out.append(f"piece {t} {hx(piece(t, False))} {hx(piece(t, True))}")
    with open(args.out, "w") as f:
        f.write("\n".join(out) + "\n")
    L.llama_model_free(model)
    print(f"{args.out}: {len(corpus)} strings x 4 encodings, {n_vocab} tokens")


def looks_special(text):
    # llama.cpp's converter marks these control even when the tokenizer does not
    return (text in ("<pad>", "<mask>", "<2mass>", "[@BOS@]")
            or (text.startswith("<|") and text.endswith("|>"))
            or (text.startswith("<\uff5c") and text.endswith("\uff5c>"))
            or (text.startswith("<unused") and text.endswith(">")))


def vocab(args):
    import gguf

    with open(os.path.join(args.dir, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    cfg_path = os.path.join(args.dir, "tokenizer_config.json")
    cfg = json.load(open(cfg_path, encoding="utf-8")) if os.path.exists(cfg_path) else {}
    if tj["model"]["type"] != "BPE":
        sys.exit("only byte-level BPE tokenizers are supported")
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    base = dict(tj["model"]["vocab"])
    added = {a["content"]: a for a in tj["added_tokens"]}
    if args.merges is not None:
        merges = merges[: args.merges]
        keep = {t for t in base if len(t) == 1} | {m.replace(" ", "") for m in merges}
        base = {t: i for t, i in base.items() if t in keep}
    by_id = sorted([(i, t, None) for t, i in base.items() if t not in added]
                   + [(a["id"], t, a) for t, a in added.items()])
    tokens, types, new_id = [], [], {}
    for old, text, a in by_id:
        new_id[old] = len(tokens)
        tokens.append(text)
        if a is None:
            types.append(gguf.TokenType.NORMAL)
        elif a["special"] or looks_special(text):
            types.append(gguf.TokenType.CONTROL)
        else:
            types.append(gguf.TokenType.USER_DEFINED)

    def special_id(name):
        tok = cfg.get(name)
        if isinstance(tok, dict):
            tok = tok.get("content")
        return new_id.get(added[tok]["id"]) if tok in added else None

    w = gguf.GGUFWriter(args.out, args.arch)
    # the few hyperparameters llama.cpp reads before it looks at the vocabulary
    w.add_context_length(4096)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(128)
    w.add_head_count(1)
    w.add_head_count_kv(1)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(args.pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    for name, add in (("bos_token", w.add_bos_token_id), ("eos_token", w.add_eos_token_id),
                      ("pad_token", w.add_pad_token_id), ("unk_token", w.add_unk_token_id)):
        tid = special_id(name)
        if tid is not None:
            add(tid)
    if "add_bos_token" in cfg:
        w.add_add_bos_token(bool(cfg["add_bos_token"]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"{args.out}: {len(tokens)} tokens, {len(merges)} merges, pre '{args.pre}'")


def spm_vocab(args):
    import gguf

    r = gguf.GGUFReader(args.src)

    def get(key, default=None):
        field = r.fields.get(key)
        return field.contents() if field is not None else default

    if get("tokenizer.ggml.model") != "llama":
        sys.exit(f"{args.src} has no SentencePiece ('llama') vocabulary")
    n = args.tokens
    w = gguf.GGUFWriter(args.out, "llama")
    w.add_context_length(4096)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(128)
    w.add_head_count(1)
    w.add_head_count_kv(1)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_tokenizer_model("llama")
    w.add_token_list(get("tokenizer.ggml.tokens")[:n])
    w.add_token_scores(get("tokenizer.ggml.scores")[:n])
    w.add_token_types(get("tokenizer.ggml.token_type")[:n])
    for key, add in (("bos", w.add_bos_token_id), ("eos", w.add_eos_token_id),
                     ("unknown", w.add_unk_token_id), ("padding", w.add_pad_token_id)):
        tid = get(f"tokenizer.ggml.{key}_token_id")
        if tid is not None and tid < n:
            add(tid)
    for key, add in (("add_bos_token", w.add_add_bos_token), ("add_eos_token", w.add_add_eos_token)):
        if get(f"tokenizer.ggml.{key}") is not None:
            add(bool(get(f"tokenizer.ggml.{key}")))
    w.add_add_space_prefix(bool(args.add_space_prefix))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"{args.out}: the first {n} tokens of {args.src}, add_space_prefix {bool(args.add_space_prefix)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("golden")
    g.add_argument("model")
    g.add_argument("out")
    g.add_argument("--random", type=int, default=0, help="add this many random strings to the corpus")
    g.add_argument("--seed", type=int, default=1)
    v = sub.add_parser("vocab")
    v.add_argument("dir")
    v.add_argument("out")
    v.add_argument("--pre", required=True)
    v.add_argument("--merges", type=int)
    v.add_argument("--arch", default="llama")
    s = sub.add_parser("spm-vocab")
    s.add_argument("src")
    s.add_argument("out")
    s.add_argument("--tokens", type=int, required=True)
    s.add_argument("--add-space-prefix", type=int, choices=(0, 1), required=True)
    args = ap.parse_args()
    {"golden": golden, "vocab": vocab, "spm-vocab": spm_vocab}[args.cmd](args)


if __name__ == "__main__":
    main()

// test_cli.c — the `seam` command line. It generates what the engine and
// the sampler give in-process: -n tokens, fewer when one ends the
// generation, as ids (--ids) or as text; `logits -o` writes the engine's
// logits; chat wraps each turn in the chat template the file carries, and
// continues each line of a file that has none (a base model's).
// And it refuses bad input cleanly: every bad flag value, bad file and
// impossible request ends with a non-zero exit and a message on stderr, never
// a signal (and, in the sanitizer build, never a sanitizer report). The model
// is the committed micro seed of the fuzzers, a one-layer qwen3 with a
// 28-token vocabulary; chat's are the synthetic tiny qwen3, with and without
// a template, and the default model, base Gemma 3 (no template).
#include <criterion/criterion.h>
#include <math.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/engine.h"
#include "gpu/gpu_segment.h"
#include "helpers.h"
#include "model/model.h"
#include "text/sampler.h"
#include "text/tokenizer.h"

#define SEAM SEAM_BINARY_DIR "/seam"
#define MODEL SEAM_SOURCE_DIR "/tests/fuzz/corpus/gguf/micro-qwen3.gguf"

typedef struct {
    int status;  // as waitpid gives it
    char *out, *err;
} result;

static void result_free(result *r) {
    free(r->out);
    free(r->err);
}

// Appends what fd has to *buf; false at end of file.
static bool drain(int fd, char **buf, size_t *len) {
    char chunk[4096];
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n <= 0) return false;
    *buf = realloc(*buf, *len + (size_t)n + 1);
    cr_assert(*buf);
    memcpy(*buf + *len, chunk, (size_t)n);
    *len += (size_t)n;
    (*buf)[*len] = '\0';
    return true;
}

// Runs seam with argv (NULL-terminated, without the program name), stdin
// from `input` (NULL: /dev/null), and collects its exit status, stdout and
// stderr.
static result run_with_input(const char *const *args, const char *input) {
    const char *argv[64] = {SEAM};
    int argc = 1;
    while (args[argc - 1]) {
        cr_assert(argc < 63);
        argv[argc] = args[argc - 1];
        argc++;
    }
    argv[argc] = NULL;
    int out[2], err[2], in[2];
    cr_assert(pipe(out) == 0 && pipe(err) == 0 && pipe(in) == 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        dup2(input ? in[0] : open("/dev/null", O_RDONLY), 0);
        close(in[0]), close(in[1]);
        dup2(out[1], 1);
        dup2(err[1], 2);
        close(out[0]), close(err[0]);
        execv(SEAM, (char *const *)argv);
        _exit(127);
    }
    close(out[1]), close(err[1]), close(in[0]);
    // a few lines: the pipe's buffer takes them before seam reads any
    if (input) cr_assert(write(in[1], input, strlen(input)) == (ssize_t)strlen(input));
    close(in[1]);
    result r = {0, calloc(1, 1), calloc(1, 1)};
    size_t n_out = 0, n_err = 0;
    struct pollfd p[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    while (p[0].fd >= 0 || p[1].fd >= 0) {
        cr_assert(poll(p, 2, -1) > 0);
        for (int i = 0; i < 2; i++) {
            if (p[i].fd < 0 || !p[i].revents) continue;
            if (!drain(p[i].fd, i ? &r.err : &r.out, i ? &n_err : &n_out)) {
                close(p[i].fd);
                p[i].fd = -1;
            }
        }
    }
    cr_assert(waitpid(pid, &r.status, 0) == pid);
    return r;
}

static result run(const char *const *args) { return run_with_input(args, NULL); }

static void cmdline(const char *const *args, char *buf, size_t len) {
    size_t used = (size_t)snprintf(buf, len, "seam");
    for (int i = 0; args[i] && used < len; i++) used += (size_t)snprintf(buf + used, len - used, " '%s'", args[i]);
}

// No sanitizer spoke: in build-asan/ an error report would otherwise read as
// an ordinary failure with a message.
static void assert_no_sanitizer_report(const char *what, const result *r) {
    static const char *const marks[] = {"AddressSanitizer", "LeakSanitizer", "runtime error:", "UndefinedBehaviorSanitizer"};
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        cr_assert(!strstr(r->err, marks[i]), "%s: sanitizer report:\n%s", what, r->err);
}

// The command fails cleanly: exits (no signal) with a non-zero status and
// says why on stderr; when `says` is given, the message contains it.
static void expect_failure(const char *const *args, const char *says) {
    char what[1024];
    cmdline(args, what, sizeof what);
    result r = run(args);
    cr_assert(!WIFSIGNALED(r.status), "%s: killed by signal %d\n%s", what, WTERMSIG(r.status), r.err);
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) != 0, "%s: exited 0, expected a failure\n%s", what, r.err);
    cr_assert(WEXITSTATUS(r.status) != 127, "%s: could not execute %s", what, SEAM);
    cr_assert(strlen(r.err) > 0, "%s: failed without a message on stderr", what);
    assert_no_sanitizer_report(what, &r);
    if (says) cr_assert(strstr(r.err, says), "%s: stderr does not mention '%s':\n%s", what, says, r.err);
    result_free(&r);
}

static void expect_success(const char *const *args) {
    char what[1024];
    cmdline(args, what, sizeof what);
    result r = run(args);
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s: failed (status %d)\n%s", what, r.status, r.err);
    assert_no_sanitizer_report(what, &r);
    result_free(&r);
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

// The synthetic tiny model (4 layers, a Q8_0 head the GPU reads) at path,
// with tokenizer.chat_template tmpl (NULL: none). Run without a shell, so
// that the template's quotes and newlines reach the file as they are.
static void synth_shape(const char *shape, const char *path, const char *tmpl) {
    char shape_path[4096];
    snprintf(shape_path, sizeof shape_path, "%s/models/%s.shape", SEAM_SOURCE_DIR, shape);
    const char *argv[] = {SEAM_BINARY_DIR "/seam-synth", shape_path, "-o", path, tmpl ? "--chat-template" : NULL, tmpl,
                          NULL};
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        dup2(open("/dev/null", O_WRONLY), 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status;
    cr_assert(waitpid(pid, &status, 0) == pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "seam-synth failed on %s (status %d)", path, status);
}

// The tiny model without a template, made once.
static const char *tiny_model(void) {
    static char path[4096];
    if (!path[0]) {
        snprintf(path, sizeof path, "%s", test_path("cli-tiny.gguf"));
        synth_shape("tiny", path, NULL);
    }
    return path;
}

Test(cli, a_good_run_succeeds, .timeout = 120) {
    // the harness itself: the same model and flags the failures below vary
    expect_success(ARGS("run", "-m", MODEL, "-p", "hello world", "-n", "4", "-c", "16", "-t", "1"));
    expect_success(ARGS("run", "-m", MODEL, "--tokens", "1,2,3", "-n", "0", "--ids"));
    expect_success(ARGS("inspect", MODEL));
}

// With stdout and stderr in one pipe (a log file, `2>&1 | less`), the
// report starts on a line of its own: the text's last line reaches the pipe
// before the report does, whether or not the text ended with a newline (the
// micro model's does not).
Test(cli, the_report_starts_on_its_own_line, .timeout = 120) {
    FILE *p = popen("'" SEAM "' run -m '" MODEL "' -p 'hello world' -n 4 -c 16 -t 1 2>&1", "r");
    cr_assert(p);
    static char all[1 << 16];
    const size_t n = fread(all, 1, sizeof all - 1, p);
    all[n] = '\0';
    cr_assert(pclose(p) == 0, "seam run failed:\n%s", all);
    const char *report = strstr(all, "seam: prefill");
    cr_assert(report && report > all && report[-1] == '\n', "the report is glued to the text:\n%s", all);
}

Test(cli, bad_commands_and_options, .timeout = 120) {
    result r = run(ARGS(NULL));
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) != 0 && strstr(r.err, "usage"),
              "seam with no command: status %d\n%s", r.status, r.err);
    result_free(&r);
    expect_failure(ARGS("frobnicate"), "unknown command");
    expect_failure(ARGS("run", "-m", MODEL, "-p", "hi", "--frobnicate"), "--frobnicate");
    expect_failure(ARGS("run", "-p", "hi"), "-m");
    expect_failure(ARGS("run", "-m", MODEL), "prompt");
    expect_failure(ARGS("run", "-m", MODEL, "-p", "hi", "--tokens", "1"), "one of them");
    expect_failure(ARGS("inspect"), NULL);
    expect_failure(ARGS("tokenize", "-m", MODEL), NULL);
    expect_failure(ARGS("logits", "-m", MODEL, "-p", "hi"), "-o");
    expect_failure(ARGS("chat"), "-m");
}

Test(cli, flag_values_are_validated, .timeout = 300) {
    // flag, bad value: negative, zero, not a number, out of range
    static const char *const bad[][2] = {
        {"-n", "-1"},        {"-n", "abc"},      {"-n", ""},          {"-n", "1e3"},     {"-n", "99999999999"},
        {"-c", "0"},         {"-c", "-5"},       {"-c", "abc"},       {"-c", "99999999"}, {"-t", "0"},
        {"-t", "-3"},        {"-t", "abc"},      {"-t", "100000"},    {"--temp", "abc"}, {"--temp", "-1"},
        {"--temp", "nan"},   {"--temp", "inf"},  {"--top-p", "2"},    {"--top-p", "0"},  {"--top-p", "-0.5"},
        {"--top-p", "x"},    {"--top-k", "-1"},  {"--top-k", "k"},    {"--seed", "-5"},  {"--seed", "s"},
        {"-ngl", "-2"},      {"-ngl", "abc"},    {"--n-cpu-moe", "-1"}, {"--gpu-mem", "0"}, {"--gpu-mem", "lots"},
        {"--head", "xpu"},   {"--overflow", "disk"}, {"-ctk", "q4_0"}, {"-ctv", "f32"}, {"--cache-type-k", "Q8_0"},
        {"--cache-type-v", ""}, {"--gpu-prefill", "cublas"}, {"--gpu-prefill", "gemm,tokens"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_failure(ARGS("run", "-m", MODEL, "-p", "hi", bad[i][0], bad[i][1]), bad[i][0]);
    // a value flag with nothing after it
    static const char *const needs_value[] = {"-m", "-p", "--tokens", "-n", "-c", "-t", "-ngl", "--seed", "--temp",
                                              "--top-k", "--top-p", "-o", "--timeline", "--gpu-mem", "--head", "--n-cpu-moe",
                                              "--overflow", "-ctk", "-ctv", "--gpu-prefill"};
    for (size_t i = 0; i < sizeof needs_value / sizeof needs_value[0]; i++)
        expect_failure(ARGS("run", "-m", MODEL, "-p", "hi", needs_value[i]), needs_value[i]);
}

Test(cli, bad_model_files, .timeout = 120) {
    size_t size;
    uint8_t *model = test_read_file(MODEL, &size);
    cr_assert(model, "%s is missing", MODEL);
    const char *truncated = strdup(test_path("cli-truncated.gguf"));
    cr_assert(test_write_file(truncated, model, size / 2) == 0);
    const char *header_only = strdup(test_path("cli-header.gguf"));
    cr_assert(test_write_file(header_only, model, 20) == 0);
    const char *empty = strdup(test_path("cli-empty.gguf"));
    cr_assert(test_write_file(empty, "", 0) == 0);
    free(model);
    const struct {
        const char *path, *says;
    } files[] = {
        {truncated, "past the end of the file"},
        {header_only, "past the end of the file"},
        {empty, "empty"},
        {SEAM_SOURCE_DIR "/tests", "not a regular file"},
        {SEAM_SOURCE_DIR "/CMakeLists.txt", "not a GGUF file"},
        {SEAM_SOURCE_DIR "/no-such-model.gguf", "cannot open"},
        // a valid GGUF that is no model: a vocabulary only
        {SEAM_SOURCE_DIR "/tests/golden/vocab-spm-8k.gguf", "token_embd.weight"},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        expect_failure(ARGS("run", "-m", files[i].path, "-p", "hi"), files[i].says);
        expect_failure(ARGS("logits", "-m", files[i].path, "-p", "hi", "-o", test_path("cli.f32")), files[i].says);
        if (i < 6) expect_failure(ARGS("inspect", files[i].path), files[i].says);
    }
    free((void *)truncated), free((void *)header_only), free((void *)empty);
}

Test(cli, tokens_are_checked, .timeout = 120) {
    static const char *const bad[] = {"99999", "28", "-1", "1,,2", "abc", "1;2", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_failure(ARGS("run", "-m", MODEL, "--tokens", bad[i]), "--tokens");
}

// Positions beyond -c are an error before anything runs, never a write past
// the KV cache (which the sanitizer build would catch).
Test(cli, context_overflow_is_an_error, .timeout = 120) {
    expect_failure(ARGS("run", "-m", MODEL, "-p", "hello world", "-c", "4", "-n", "8"), "-c");
    expect_failure(ARGS("run", "-m", MODEL, "--tokens", "1,2,3,4,5", "-c", "3", "-n", "0"), "-c");
    expect_failure(ARGS("logits", "-m", MODEL, "--tokens", "1,2,3", "-c", "2", "-o", test_path("cli.f32")), "-c");
    // exactly full is fine
    expect_success(ARGS("run", "-m", MODEL, "--tokens", "1,2,3", "-c", "5", "-n", "2"));
}

// The context: at least one token, at most the model's trained context
// (the micro model's is 64), which is also the default when it is below 512;
// a q8_0 cache needs heads of whole blocks of 32 (the micro model's are 8);
// a cache type seam does not have is named as such.
Test(cli, context_and_cache_limits, .timeout = 120) {
    expect_failure(ARGS("run", "-m", MODEL, "-p", "hi", "-c", "65"), "trained");
    expect_failure(ARGS("plan", "-m", MODEL, "-c", "1000"), "at most -c 64");
    expect_failure(ARGS("run", "-m", MODEL, "-p", "hi", "-c", "0"), "-c");
    expect_success(ARGS("run", "-m", MODEL, "-p", "hi", "-c", "64", "-n", "2"));
    expect_success(ARGS("run", "-m", MODEL, "-p", "hi", "-n", "2"));  // the default: 512, lowered to 64
    expect_failure(ARGS("run", "-m", MODEL, "-p", "hi", "-ctk", "q8_0"), "multiple of 32");
    expect_failure(ARGS("run", "-m", MODEL, "-p", "hi", "-ctv", "q4_0"), "f16 or q8_0");
    expect_failure(ARGS("plan", "-m", MODEL, "-ctk"), "f16 or q8_0");
    expect_failure(ARGS("bench", "-m", MODEL, "-ctk", "f16,q4_0"), "f16, q8_0");
    expect_failure(ARGS("bench", "-m", MODEL, "-p", "65", "-n", "0"), "trained");
}

// seam plan --hw plans what a run would: -c's default (512, lowered to the
// micro model's 64) and the cache flags reach its plan.
Test(cli, plan_predicts_with_the_run_defaults, .timeout = 120) {
    const char *const args[] = {"plan", "-m", tiny_model(), "-ngl", "4", "--hw", SEAM_SOURCE_DIR "/models/hw/h200.hw",
                                NULL};
    result r = run(args);
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "plan --hw failed:\n%s", r.err);
    cr_assert(strstr(r.out, "filled to 512 positions") && strstr(r.out, "\n    4 "), "no prediction row:\n%s%s", r.out,
              r.err);
    result_free(&r);
    expect_failure(ARGS("plan", "-m", MODEL, "-ngl", "1", "--head", "gpu", "--hw", SEAM_SOURCE_DIR "/models/hw/h200.hw",
                        "-ctk", "q8_0"),
                   "multiple of 32");
}

// seam plan --fit, and -ngl auto with a profile, rank the placements that
// fit and choose the fastest: on the article's 12 GB card the expert split,
// a third faster than the fullest layer split, which --fit memory chooses.
// A head asked on the GPU counts against the budget, the plan says which of
// the profile's cards it assumes, and --fit needs a profile and chooses -ngl
// itself.
Test(cli, plan_fit_chooses_the_fastest_placement, .timeout = 120) {
#define FIT_SHAPE SEAM_SOURCE_DIR "/models/qwen3-30b-a3b.shape"
#define FIT_HW SEAM_SOURCE_DIR "/models/hw/rtx3060-seed.hw"
    const struct {
        const char *const *args;
        const char *says;
    } cases[] = {
        {ARGS("plan", "--shape", FIT_SHAPE, "--fit", "--gpu-mem", "12G", "--hw", FIT_HW),
         "chosen (by speed): -ngl 48 --n-cpu-moe 16 --head gpu,"},
        {ARGS("plan", "--shape", FIT_SHAPE, "-ngl", "auto", "--gpu-mem", "12G", "--hw", FIT_HW),
         "the fullest layer split (-ngl 34 --head cpu,"},
        {ARGS("plan", "--shape", FIT_SHAPE, "--fit", "--gpu-mem", "12G", "--hw", FIT_HW),
         "llama.cpp's --fit would place about -ngl 48 --n-cpu-moe 19 --head gpu (and part of one more layer)"},
        {ARGS("plan", "--shape", FIT_SHAPE, "--fit", "memory", "--gpu-mem", "12G", "--hw", FIT_HW),
         "chosen (by memory): -ngl 34 --head cpu,"},
        {ARGS("plan", "--shape", FIT_SHAPE, "-ngl", "auto", "--head", "gpu", "--gpu-mem", "12G", "--hw", FIT_HW),
         "chosen (by speed): -ngl 48 --n-cpu-moe 16 --head gpu,"},
        // the profile's two cards, or one of them when the budget is one card's
        {ARGS("plan", "--shape", FIT_SHAPE, "-ngl", "48", "--hw", FIT_HW),
         "GPU: 2 cards of 12 GiB, the GPU layers split between them, a budget of 24.00 GiB"},
        {ARGS("plan", "--shape", FIT_SHAPE, "-ngl", "20", "--gpu-mem", "12G", "--hw", FIT_HW),
         "GPU: one card of the profile's 2 (12 GiB each): the budget, 12.00 GiB, is one card's"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char what[1024];
        cmdline(cases[i].args, what, sizeof what);
        result r = run(cases[i].args);
        cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s failed:\n%s", what, r.err);
        cr_assert(strstr(r.out, cases[i].says), "%s does not say '%s':\n%s", what, cases[i].says, r.out);
        result_free(&r);
    }
    // llama.cpp's placement, the head on the GPU beside CPU layers, counts the head: 33 layers, not 34
    expect_failure(ARGS("plan", "--shape", FIT_SHAPE, "-ngl", "34", "--head", "gpu", "--gpu-mem", "12G", "--hw", FIT_HW),
                   "at most 33 layers fit");
    expect_failure(ARGS("plan", "--shape", FIT_SHAPE, "--fit", "--gpu-mem", "12G"), "add --hw PROFILE");
    expect_failure(ARGS("plan", "--shape", FIT_SHAPE, "--fit", "-ngl", "4", "--hw", FIT_HW), "--fit chooses the GPU layers");
#undef FIT_SHAPE
#undef FIT_HW
}

// What is wrong with the command line is said before any work: an output
// path that cannot be written before the model loads, a bad token id before
// the weights are read and the plan made; a flag that does nothing here is
// said; --version answers.
Test(cli, mistakes_are_said_before_the_work, .timeout = 120) {
    const char *const *const early[] = {
        ARGS("run", "-m", MODEL, "--tokens", "1,2", "--timeline", "/nonexistent-dir/t.json"),
        ARGS("logits", "-m", MODEL, "--tokens", "1", "-o", "/tmp"),
        ARGS("plan", "--shape", SEAM_SOURCE_DIR "/models/tiny.shape", "-ngl", "1", "--hw",
             SEAM_SOURCE_DIR "/models/hw/h200.hw", "--json", "/nonexistent-dir/p.json"),
        ARGS("run", "-m", MODEL, "-p", "a", "-p", "b"),
        ARGS("plan", "-m", MODEL, "--hw", SEAM_SOURCE_DIR "/models/hw/h200.hw", "--hw-out", "/tmp/x.hw"),
        ARGS("plan", "-m", MODEL, "--hw", "this", "--hw-out", "/nonexistent-dir/this.hw"),
    };
    for (size_t i = 0; i < sizeof early / sizeof *early; i++) {
        char what[1024];
        cmdline(early[i], what, sizeof what);
        result r = run(early[i]);
        cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 2, "%s: status %d\n%s", what, r.status, r.err);
        cr_assert(!strstr(r.err, "loaded") && !strstr(r.err, "plan:") && !r.out[0], "%s: worked first:\n%s%s", what,
                  r.out, r.err);
        result_free(&r);
    }
    result r = run(ARGS("bench", "-m", MODEL ",/nonexistent.gguf", "-p", "8", "-n", "0", "-r", "1"));
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 2 && strstr(r.err, "/nonexistent.gguf"), "%s", r.err);
    cr_assert(!r.out[0], "bench timed the first model before refusing the second:\n%s", r.out);
    result_free(&r);
    // a bad id is the command line's mistake too: status 2, as every usage error
    r = run(ARGS("run", "-m", MODEL, "--tokens", "1,99999", "-n", "2"));
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 2 && strstr(r.err, "not a token id"), "%s", r.err);
    cr_assert(!strstr(r.err, "plan:"), "the plan came before the bad id:\n%s", r.err);
    result_free(&r);
    r = run(ARGS("run", "-m", MODEL, "--tokens", "1,2", "-n", "2", "--top-k", "5", "--n-cpu-moe", "1"));
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s", r.err);
    cr_assert(strstr(r.err, "--top-k does nothing with --temp 0") &&
              strstr(r.err, "--n-cpu-moe does nothing here: this model has no experts"), "%s", r.err);
    result_free(&r);
    r = run(ARGS("--version"));
    int major, minor;
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0 && sscanf(r.out, "seam %d.%d", &major, &minor) == 2,
              "--version said:\n%s%s", r.out, r.err);
    result_free(&r);
}

// Each command's --help is its own: its usage line and the flags it takes,
// not another's; a flag given to a command that does nothing with it is
// refused (status 2) naming the commands it is for. Every flag of the
// general --help is some command's.
Test(cli, each_command_has_its_own_help, .timeout = 60) {
    static const struct {
        const char *command, *has, *lacks;
    } cases[] = {{"run", "--timeline", "--shape"}, {"chat", "--n-predict", "--tokens"},
                 {"plan", "--fit", "--temp"},      {"logits", "--output", "--seed"},
                 {"tokenize", "--file", "--gpu-layers"}, {"inspect", "--help", "--threads"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        result r = run(ARGS(cases[i].command, "--help"));
        char usage[64];
        snprintf(usage, sizeof usage, "usage: seam %s", cases[i].command);
        cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0 && strstr(r.out, usage), "%s --help:\n%s%s",
                  cases[i].command, r.out, r.err);
        cr_expect(strstr(r.out, cases[i].has), "seam %s --help lacks %s:\n%s", cases[i].command, cases[i].has, r.out);
        cr_expect(!strstr(r.out, cases[i].lacks), "seam %s --help lists %s:\n%s", cases[i].command, cases[i].lacks,
                  r.out);
        result_free(&r);
    }
    result r = run(ARGS("chat", "-m", MODEL, "--ids"));
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 2 && strstr(r.err, "--ids does nothing here") &&
                  strstr(r.err, "for run"), "%s", r.err);
    result_free(&r);
    r = run(ARGS("help", "bench"));  // bench has its own parser and help: the general one names it
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0 && strstr(r.out, "seam bench --help"), "%s", r.out);
    result_free(&r);
}

// -f FILE is -p with the file's text (one trailing newline dropped), for
// run, logits and tokenize; a missing file is a usage error. -q leaves
// stderr to errors: the generated ids alone come out.
Test(cli, a_prompt_from_a_file_and_a_quiet_run, .timeout = 60) {
    char path[4096];
    snprintf(path, sizeof path, "%s", test_path("prompt.txt"));
    const char *text = "Hello world\n";
    cr_assert_eq(test_write_file(path, text, strlen(text)), 0);
    const char *model = tiny_model();
    result by_flag = run(ARGS("tokenize", "-m", model, "-p", "Hello world"));
    result by_file = run(ARGS("tokenize", "-m", model, "-f", path));
    cr_assert(WIFEXITED(by_file.status) && WEXITSTATUS(by_file.status) == 0, "%s", by_file.err);
    cr_assert_str_eq(by_file.out, by_flag.out);
    result_free(&by_flag);
    result_free(&by_file);
    result r = run(ARGS("run", "-m", model, "-f", "/nonexistent/prompt.txt"));
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 2 && strstr(r.err, "/nonexistent/prompt.txt"), "%s",
              r.err);
    result_free(&r);
    r = run(ARGS("run", "-m", model, "-f", path, "-p", "hi"));
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 2 && strstr(r.err, "one of them"), "%s", r.err);
    result_free(&r);
    r = run(ARGS("run", "-m", model, "-f", path, "-n", "3", "--ids", "-q"));
    int ids[3];
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s", r.err);
    cr_assert(sscanf(r.out, "%d %d %d", &ids[0], &ids[1], &ids[2]) == 3, "%s", r.out);
    cr_assert(!r.err[0], "-q printed:\n%s", r.err);
    result_free(&r);
}

// bench -ngl auto places each model as run's does, says where, and
// reports the layers it placed in its rows.
Test(cli, bench_auto_places_and_says_where, .timeout = 120) {
    result r = run(ARGS("bench", "-m", tiny_model(), "-p", "8", "-n", "2", "-r", "1", "-ngl", "auto", "--hw",
                        SEAM_SOURCE_DIR "/models/hw/h200.hw", "-o", "json"));
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "bench -ngl auto failed:\n%s", r.err);
    const bool gpu = gpu_free_bytes() > 0;
    const char *said = strstr(r.err, "-ngl auto placed ");
    int placed = -1;
    cr_assert(said && sscanf(said, "-ngl auto placed %d layers", &placed) == 1, "%s", r.err);
    cr_assert(strstr(said, gpu ? "(the fastest predicted that fits)" : "(no CUDA device)"), "%s", r.err);
    if (!gpu) cr_assert_eq(placed, 0);
    char row[64];
    snprintf(row, sizeof row, "\"n_gpu_layers\": %d,", placed);
    cr_assert(strstr(r.out, row), "the rows do not say %d GPU layers:\n%s", placed, r.out);
    result_free(&r);
}

// run -ngl auto with --hw chooses by the fit where there is a GPU (the
// emulated one in an emulated build) and runs on the CPU where there is none.
Test(cli, run_auto_with_a_profile_fits_by_speed, .timeout = 120) {
    result r = run(ARGS("run", "-m", tiny_model(), "-p", "hi", "-n", "2", "-ngl", "auto", "--hw",
                        SEAM_SOURCE_DIR "/models/hw/h200.hw"));
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "run -ngl auto --hw failed:\n%s", r.err);
    if (gpu_free_bytes() == 0)
        cr_assert(strstr(r.err, "no CUDA device: --gpu-layers auto runs every layer on the CPU"), "%s", r.err);
    else
        cr_assert(strstr(r.err, "-ngl auto on 'h200'") && strstr(r.err, "chosen (by speed): -ngl "), "%s", r.err);
    result_free(&r);
}

// seam plan's GPU memory follows --gpu-prefill as a run's does: the batched
// prefill's GEMM buffers (the f16 copy of the largest matrix and the batch's
// activations, about 12 MiB on the Qwen3-0.6B shape) are in the GPU scratch
// under gemm and auto, not under the default tokens.
Test(cli, plan_counts_the_gemm_buffers_of_its_prefill_mode, .timeout = 120) {
    static const char *const modes[] = {"tokens", "gemm", "auto"};
    double scratch[3];
    for (int k = 0; k < 3; k++) {
        result r = run(ARGS("plan", "--shape", SEAM_SOURCE_DIR "/models/qwen3-0.6b.shape", "-ngl", "28", "--gpu-mem",
                            "8G", "--gpu-prefill", modes[k]));
        cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "plan --gpu-prefill %s failed:\n%s", modes[k],
                  r.err);
        const char *gpu = strstr(r.err, "\n  GPU  ");
        double weights, kv;
        cr_assert(gpu && sscanf(gpu, " GPU %*s %lf MiB %lf MiB %lf MiB", &weights, &kv, &scratch[k]) == 3,
                  "--gpu-prefill %s: no GPU row in the plan:\n%s", modes[k], r.err);
        result_free(&r);
    }
    cr_assert_gt(scratch[1] - scratch[0], 8.0, "the GEMM adds %.1f MiB of GPU scratch (tokens %.1f, gemm %.1f)",
                 scratch[1] - scratch[0], scratch[0], scratch[1]);
    cr_assert_eq(scratch[2], scratch[1], "auto holds the GEMM's buffers as gemm does");
}

// A GPU layer or overflow -- and -ngl past the model's layers, which means
// all of them -- is refused where there is no CUDA device (asked of the
// engine here, not read from a message) and runs where there is one.
Test(cli, gpu_layers_without_a_gpu, .timeout = 120) {
    const char *const *const gpu_work[] = {
        ARGS("run", "-m", MODEL, "-p", "hi", "-n", "2", "-ngl", "1"),
        ARGS("run", "-m", MODEL, "-p", "hi", "-n", "2", "-ngl", "5"),  // past the model's one layer: all of it
        ARGS("run", "-m", MODEL, "-p", "hi", "-n", "2", "--overflow", "mapped"),
        ARGS("bench", "-m", MODEL, "-p", "8", "-n", "0", "-r", "1", "--overflow", "stream"),
    };
    for (size_t i = 0; i < sizeof gpu_work / sizeof *gpu_work; i++) {
        if (gpu_free_bytes() == 0) expect_failure(gpu_work[i], "CUDA");
        else expect_success(gpu_work[i]);
    }
}

// The head on the GPU reads the last layer's output: with a layer left to
// the CPU it is refused, on any machine (the plan for a GPU of --gpu-mem's
// size needs none), and by run on a machine with or without one.
Test(cli, head_on_the_gpu_with_a_partial_split_is_refused, .timeout = 120) {
    expect_failure(ARGS("plan", "-m", MODEL, "-ngl", "0", "--head", "gpu", "--gpu-mem", "8G"),
                   "--head gpu needs every layer");
    expect_failure(ARGS("run", "-m", MODEL, "-p", "hi", "-ngl", "0", "--head", "gpu"), "--head gpu");
    expect_success(ARGS("plan", "-m", tiny_model(), "-ngl", "4", "--head", "gpu", "--gpu-mem", "8G"));
    // the micro model's head is BF16, which no kernel reads: refused on the GPU, and auto keeps it on the CPU
    expect_failure(ARGS("plan", "-m", MODEL, "-ngl", "1", "--head", "gpu", "--gpu-mem", "8G"), "no CUDA kernel");
    result r = run(ARGS("plan", "-m", MODEL, "-ngl", "1", "--gpu-mem", "8G"));
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0 && strstr(r.err, "head on the CPU"),
              "the BF16 head is not kept on the CPU:\n%s", r.err);
    result_free(&r);
}

// A command's --help names every flag its source parses (the IS("...")
// tests of its option loop); returns how many there are.
static int help_lists_flags_of(const char *const *help_args, const char *source, const char **help_out) {
    result r = run(help_args);
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s --help failed", source);
    size_t size;
    char *src = (char *)test_read_file(source, &size);
    cr_assert(src, "%s is missing", source);
    src = realloc(src, size + 1);
    src[size] = '\0';
    int n_flags = 0;
    for (const char *p = src; (p = strstr(p, "IS(\"")); n_flags++) {
        p += 4;
        const char *end = strchr(p, '"');
        char flag[64];
        snprintf(flag, sizeof flag, "%.*s", (int)(end - p), p);
        // the flag as a word of the help: followed by a space, a comma or a newline
        bool listed = false;
        for (const char *h = r.out; (h = strstr(h, flag)); h += strlen(flag))
            if ((h == r.out || h[-1] == ' ') && strchr(" ,\n", h[strlen(flag)])) listed = true;
        cr_expect(listed, "%s: --help does not list %s", source, flag);
    }
    free(src);
    *help_out = r.out;  // the caller's to free
    free(r.err);
    return n_flags;
}

// --help names every flag options.c and bench.c parse, and every numeric one
// with its default in brackets.
Test(cli, help_lists_every_flag_with_its_default, .timeout = 60) {
    const char *help;
    cr_assert(help_lists_flags_of(ARGS("--help"), SEAM_SOURCE_DIR "/src/cli/options.c", &help) > 10, "too few flags in options.c");
    static const char *const with_default[] = {"--n-predict", "--ctx-size", "--threads", "--gpu-layers", "--seed",
                                               "--temp", "--top-k", "--top-p", "--n-cpu-moe"};
    for (size_t i = 0; i < sizeof with_default / sizeof with_default[0]; i++) {
        const char *line = strstr(help, with_default[i]);
        cr_assert(line, "--help does not list %s", with_default[i]);
        const char *eol = strchr(line, '\n'), *open = strchr(line, '[');
        cr_expect(open && (!eol || open < eol), "--help gives no default for %s", with_default[i]);
    }
    free((void *)help);
    cr_assert(help_lists_flags_of(ARGS("bench", "--help"), SEAM_SOURCE_DIR "/src/cli/bench.c", &help) > 6,
              "too few flags in bench.c");
    free((void *)help);
}

// A member's number in JSON text, from `from` on.
static double json_number(const char *from, const char *key) {
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\": ", key);
    const char *p = strstr(from, quoted);
    cr_assert(p, "no %s in:\n%s", key, from);
    return strtod(p + strlen(quoted), NULL);
}

// The first tg row's segments (a decoded token's time in the CPU layers,
// their attention, the head) are there and fit in its token time.
static void assert_tg_segments_add_up(const char *json) {
    const char *row = strstr(json, "\"test\": \"tg");
    cr_assert(row);
    const double token_us = 1e6 / json_number(row, "avg_ts"), cpu = json_number(row, "cpu"),
                 attention = json_number(row, "cpu_attention"), head = json_number(row, "head");
    cr_assert(cpu > 0 && head > 0 && attention > 0 && attention < cpu, "segments cpu %g, attention %g, head %g", cpu,
              attention, head);
    cr_assert(cpu + head < token_us * 1.5, "segments %g + %g us against a %g us token", cpu, head, token_us);
}

// seam bench's repetitions run the same positions again, and the engine's
// timeline holds one of them at a time: a hundred repetitions of a prompt
// and of a decode hold the memory the plan predicts for one (appending
// every repetition's records doubled it on this model). Under
// AddressSanitizer the process holds its shadow and quarantine besides,
// so there the runs are only checked to end cleanly.
Test(cli, bench_repetitions_keep_the_plans_memory, .timeout = 120) {
    static const char *const tests[][2] = {{"-p", "64"}, {"-n", "32"}};
    for (size_t i = 0; i < 2; i++) {
        result r = run(ARGS("bench", "-m", MODEL, tests[i][0], tests[i][1], i ? "-p" : "-n", "0", "-t", "1", "-r",
                            "100", "-o", "json"));
        cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "seam bench %s %s failed:\n%s", tests[i][0],
                  tests[i][1], r.err);
        assert_no_sanitizer_report("seam bench -r 100", &r);
        const double held = json_number(r.out, "host_bytes"), predicted = json_number(r.out, "host_predicted");
        cr_assert(held > 0 && predicted > 0 && (UNDER_ASAN || held < 1.1 * predicted),
                  "seam bench %s %s -r 100: %.0f bytes held against %.0f predicted", tests[i][0], tests[i][1], held,
                  predicted);
        result_free(&r);
    }
}

// seam bench: a run in each output format (one row per test, the counts it
// was asked for), and its own flags validated.
Test(cli, bench_runs_and_validates, .timeout = 300) {
    static const char *const formats[] = {"md", "json", "csv"}, *const tg_mark[] = {"| tg", "\"test\": \"tg", ",\"tg"};
    for (size_t f = 0; f < 3; f++) {
        result r = run(ARGS("bench", "-m", MODEL, "-p", "8", "-n", "4,6", "-t", "1-2", "-r", "2", "-o", formats[f]));
        cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "seam bench -o %s failed:\n%s", formats[f], r.err);
        assert_no_sanitizer_report("seam bench", &r);
        int tests = 0;
        for (const char *p = r.out; (p = strstr(p, tg_mark[f])); p++) tests++;
        cr_assert_eq(tests, 4, "-o %s: %d tg rows, want 2 lengths x 2 thread counts:\n%s", formats[f], tests, r.out);
        cr_assert(strstr(r.out, "pp8"), "-o %s: no pp8 row:\n%s", formats[f], r.out);
        if (f == 0)  // the prompt's share of the int8 roof, and the roof it is a share of, per thread count
            cr_assert(strstr(r.out, "| % of roof |") && strstr(r.out, "% int8 |") &&
                          strstr(r.out, "\nroofs on 1 thread: ") && strstr(r.out, "\nroofs on 2 threads: ") &&
                          strstr(r.out, "int8 peak"),
                      "md: no int8 peak:\n%s", r.out);
        if (f == 0)  // every line within 120 columns (a UTF-8 character is one column)
            for (const char *line = r.out; *line;) {
                const char *eol = strchr(line, '\n');
                const size_t len = eol ? (size_t)(eol - line) : strlen(line);
                size_t cols = 0;
                for (size_t k = 0; k < len; k++) cols += ((unsigned char)line[k] & 0xC0) != 0x80;
                cr_expect(cols <= 120, "md: a line of %zu columns:\n%.*s", cols, (int)len, line);
                line += len + (eol != NULL);
            }
        if (f == 1) {
            cr_assert(strstr(r.out, "\"samples_ts\": ["), "json: no samples:\n%s", r.out);
            assert_tg_segments_add_up(r.out);
            const char *pp = strstr(r.out, "\"test\": \"pp8\"");
            cr_assert(pp && json_number(pp, "macs_per_token") > 0, "json: no multiply-adds for pp8:\n%s", r.out);
            if (!strstr(r.out, "\"kernels\": \"scalar\""))
                cr_assert(json_number(pp, "int8_peak_gmacs") > 0, "json: no int8 peak for pp8:\n%s", r.out);
        }
        result_free(&r);
    }
    static const char *const bad[][2] = {
        {"-p", "abc"}, {"-p", "-1"},  {"-t", "0"},   {"-t", "3-1"}, {"-t", "1-4+0"}, {"-n", "1,,2"},
        {"-r", "0"},   {"-r", "x"},   {"-o", "xml"}, {"-ngl", "-1"}, {"--frobnicate", "1"}, {"--overflow", "disk"},
        {"--overflow", "cpu,"}, {"-d", "-4"}, {"-d", "x"}, {"-ctk", "q4_0"}, {"-ctv", "f16,"}, {"--cache-type-k", ""},
        {"--gpu-prefill", "cublas"}, {"--gpu-prefill", "gemm,tokens"}, {"--gpu-prefill", ""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_failure(ARGS("bench", "-m", MODEL, bad[i][0], bad[i][1]), bad[i][0]);
    expect_failure(ARGS("bench", "-m", MODEL, "--gpu-prefill"), "auto, gemm or tokens");
    // the prefill path is a column of the report (on the CPU alone it changes nothing)
    result rp = run(ARGS("bench", "-m", MODEL, "-p", "4", "-n", "0", "-r", "1", "-o", "json", "--gpu-prefill", "tokens"));
    cr_assert(WIFEXITED(rp.status) && WEXITSTATUS(rp.status) == 0, "seam bench --gpu-prefill tokens failed:\n%s", rp.err);
    cr_assert(strstr(rp.out, "\"gpu_prefill\": \"tokens\""), "no gpu_prefill in the JSON:\n%s", rp.out);
    result_free(&rp);
    expect_failure(ARGS("bench", "-p", "8"), "-m");
    expect_failure(ARGS("bench", "-m", SEAM_SOURCE_DIR "/no-such-model.gguf"), "cannot open");
    expect_failure(ARGS("bench", "-m", MODEL, "-ngl", "-5"), "-ngl values must be");
    // depths: the cache filled first, the tests named as llama-bench names them
    result r = run(ARGS("bench", "-m", MODEL, "-p", "4", "-n", "4", "-d", "0,8", "-r", "1", "-o", "csv"));
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "seam bench -d 0,8 failed:\n%s", r.err);
    cr_assert(strstr(r.out, "\"tg4 @ d8\"") && strstr(r.out, "\"pp4 @ d8\"") && strstr(r.out, "\"tg4\""),
              "no depth tests:\n%s", r.out);
    result_free(&r);
    expect_failure(ARGS("bench", "-m", MODEL, "-p", "0", "-n", "4", "-d", "61"), "trained");  // 61 + 4 > 64
}

// ---------------------------------------------------------------------------
// Generation: what seam run prints is what the engine and the sampler give

// A model and its vocabulary, in this process.
typedef struct {
    seam_model m;
    seam_tokenizer *tok;
} loaded;

static void load(loaded *l, const char *path) {
    seam_error e = {{0}};
    cr_assert_eq(model_load(&l->m, path, &e), 0, "%s", e.msg);
    cr_assert_eq(tokenizer_load(&l->tok, &l->m.file, &e), 0, "%s", e.msg);
}

static void unload(loaded *l) {
    tokenizer_free(l->tok);
    model_free(&l->m);
}

// The sampler's settings: --temp (0: greedy), --top-k, --top-p, --seed.
typedef struct {
    float temp;
    int top_k;
    float top_p;
    uint64_t seed;
} sampling;

static const sampling GREEDY = {0.0f, 0, 1.0f, 0};

// The tokens generation gives after `prompt`: up to n_max drawn by the
// sampler, each fed back at the next position, stopping after one that ends
// generation. Returns how many.
static int generate_here(const loaded *l, int prompt, int n_max, sampling sp, int *out) {
    seam_engine eng;
    seam_sampler smp;
    seam_error e = {{0}};
    cr_assert_eq(engine_init(&eng, &l->m, 1 + n_max, &e), 0, "%s", e.msg);
    cr_assert_eq(sampler_init(&smp, l->m.cfg.n_vocab, sp.temp, sp.top_k, sp.top_p, sp.seed), 0);
    float *logits;
    cr_assert_eq(engine_forward(&eng, prompt, 0, &logits, &e), 0, "%s", e.msg);
    int n = 0;
    while (n < n_max) {
        out[n] = sampler_sample(&smp, logits);
        if (tokenizer_is_eog(l->tok, out[n++])) break;
        cr_assert_eq(engine_forward(&eng, out[n - 1], n, &logits, &e), 0, "%s", e.msg);
    }
    sampler_free(&smp);
    engine_free(&eng);
    return n;
}

// Space-separated ids, as --ids prints them.
static void ids_text(const int *ids, int n, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, i ? " %d" : "%d", ids[i]);
}

// seam run --tokens PROMPT -n N_MAX with sp's flags and --ids prints the ids
// generate_here gives, on one line; without --ids, their text (the end
// token's none). Returns how many.
static int check_run(const loaded *l, int prompt, int n_max, sampling sp) {
    int ids[64];
    const int n = generate_here(l, prompt, n_max, sp, ids);
    char want[1024], p[16], nm[16], t[32], k[16], tp[32], sd[32], what[256];
    snprintf(p, sizeof p, "%d", prompt), snprintf(nm, sizeof nm, "%d", n_max), snprintf(t, sizeof t, "%g", sp.temp);
    snprintf(k, sizeof k, "%d", sp.top_k), snprintf(tp, sizeof tp, "%g", sp.top_p);
    snprintf(sd, sizeof sd, "%llu", (unsigned long long)sp.seed);
    snprintf(what, sizeof what, "--tokens %s -n %s --temp %s --top-k %s --top-p %s --seed %s", p, nm, t, k, tp, sd);
    ids_text(ids, n, want, sizeof want - 1);
    strcat(want, "\n");
    result r = run(ARGS("run", "-m", MODEL, "--tokens", p, "-n", nm, "--temp", t, "--top-k", k, "--top-p", tp, "--seed",
                        sd, "-t", "1", "--ids"));
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "seam run failed:\n%s", r.err);
    cr_assert_str_eq(r.out, want, "%s --ids", what);
    result_free(&r);
    char text[1024];
    size_t len = 0;
    for (int i = 0; i < n; i++)
        if (!tokenizer_is_eog(l->tok, ids[i])) len += (size_t)tokenizer_piece(l->tok, ids[i], text + len, 64, false);
    text[len] = '\0';
    strcat(text, "\n");
    r = run(ARGS("run", "-m", MODEL, "--tokens", p, "-n", nm, "--temp", t, "--top-k", k, "--top-p", tp, "--seed", sd,
                 "-t", "1"));
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "seam run failed:\n%s", r.err);
    cr_assert_str_eq(r.out, text, "%s: not the text of its ids", what);
    result_free(&r);
    return n;
}

// Greedy runs of -n tokens (0 too), each token fed back; sampled runs with
// the sampler's flags, one that draws the end token early (found here, seed
// by seed) and stops after it, and one that does not.
Test(cli, run_generates_n_tokens_and_stops_at_the_end, .timeout = 300) {
    loaded l;
    load(&l, MODEL);
    for (int prompt = 2; prompt <= 24; prompt += 11)
        for (int n = 0; n <= 12; n += 6) cr_assert_eq(check_run(&l, prompt, n, GREEDY), n);
    for (int k = 2; k <= 5; k += 3) check_run(&l, 7, 12, (sampling){1.5f, k, 0.9f, 11});
    check_run(&l, 7, 12, (sampling){2.0f, 0, 0.5f, 12});
    bool ended = false, full = false;
    int ids[64];
    for (uint64_t seed = 1; seed < 200 && (!ended || !full); seed++) {
        const sampling sp = {3.0f, 0, 1.0f, seed};
        const int n = generate_here(&l, 5, 16, sp, ids);
        if (n < 16 && !ended) ended = check_run(&l, 5, 16, sp) == n && tokenizer_is_eog(l.tok, ids[n - 1]);
        if (n == 16 && !full) full = check_run(&l, 5, 16, sp) == 16;
    }
    cr_assert(ended && full, "no seed in 200 gave a run that %s", ended ? "ran to -n" : "ended early");
    unload(&l);
}

// seam logits -o writes float32 [n_tokens][n_vocab]: the engine's logits
// after each prompt token, bit for bit.
Test(cli, logits_writes_the_engines_logits, .timeout = 120) {
    loaded l;
    load(&l, MODEL);
    static const int prompt[] = {24, 3, 17, 9, 0, 26, 12};
    enum { N = sizeof prompt / sizeof *prompt };
    const char *out = test_path("cli-logits.f32");
    expect_success(ARGS("logits", "-m", MODEL, "--tokens", "24,3,17,9,0,26,12", "-o", out, "-t", "1"));
    size_t size;
    float *got = (float *)test_read_file(out, &size);
    const int V = l.m.cfg.n_vocab;
    cr_assert(got && size == sizeof(float) * N * (size_t)V, "%s: %zu bytes, want %d x %d floats", out, size, N, V);
    seam_engine eng;
    seam_error e = {{0}};
    cr_assert_eq(engine_init(&eng, &l.m, N, &e), 0, "%s", e.msg);
    for (int p = 0; p < N; p++) {
        float *want;
        cr_assert_eq(engine_forward(&eng, prompt[p], p, &want, &e), 0, "%s", e.msg);
        cr_assert(memcmp(got + (size_t)p * V, want, sizeof(float) * V) == 0, "position %d's logits differ", p);
    }
    engine_free(&eng);
    free(got);
    unload(&l);
}

// seam chat on `model`: two turns of -n 3, each prefilling its own turn in
// the template given (BOS, where the vocabulary adds one, opening the first
// turn only), the second after the first turn, its reply and the reply's
// closing newline. Checked from the counts chat reports. A base model's file
// (`base`) gets the note that it continues text, and a file with a template
// does not.
static void check_chat(const char *model, bool base, const char *user_prefix, const char *user_suffix) {
    loaded l;
    load(&l, model);
    static const char *const turns[2] = {"hello there", "and again"};
    int expect[2];
    seam_error e = {{0}};
    for (int k = 0; k < 2; k++) {
        char text[256];
        snprintf(text, sizeof text, "%s%s%s", user_prefix, turns[k], user_suffix);
        int32_t *ids;
        cr_assert_eq(tokenizer_encode(l.tok, text, strlen(text), k == 0, true, &ids, &expect[k], &e), 0, "%s", e.msg);
        free(ids);
    }
    int32_t *nl;
    int n_nl;
    cr_assert_eq(tokenizer_encode(l.tok, "\n", 1, false, true, &nl, &n_nl, &e), 0, "%s", e.msg);
    free(nl);
    result r = run_with_input(ARGS("chat", "-m", model, "-n", "3", "-c", "256", "-t", "1"), "hello there\nand again\n");
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "seam chat failed:\n%s", r.err);
    const char *note = strstr(r.err, "has no chat template (tokenizer.chat_template): a base model, which continues text");
    cr_assert(base ? note != NULL : note == NULL, "%s: the base-model note is %s:\n%s", model,
              base ? "missing" : "there, but the file has a template", r.err);
    int prefilled[2], held[2], generated[2];
    const char *at = r.err;
    for (int k = 0; k < 2; k++) {
        char mark[32];
        snprintf(mark, sizeof mark, "turn %d: prefilled", k + 1);
        at = strstr(at, mark);
        cr_assert(at && sscanf(at + strlen(mark), " %d new tokens in %*f s (cache held %d before), generated %d",
                               &prefilled[k], &held[k], &generated[k]) == 3,
                  "%s: no report of turn %d:\n%s", model, k + 1, r.err);
        cr_assert_eq(prefilled[k], expect[k], "%s, turn %d: prefilled %d tokens, its template gives %d", model, k + 1,
                     prefilled[k], expect[k]);
        cr_assert(generated[k] >= 1 && generated[k] <= 3, "%s, turn %d: generated %d tokens with -n 3", model, k + 1,
                  generated[k]);
    }
    cr_assert_eq(held[0], 0);
    cr_assert_eq(held[1], prefilled[0] + generated[0] + n_nl, "%s: the second turn found %d tokens in the cache, "
                 "want its first turn's %d, the reply's %d and the newline's %d", model, held[1], prefilled[0],
                 generated[0], n_nl);
    cr_log_info("%s: turns of %d and %d tokens in its template", model, prefilled[0], prefilled[1]);
    result_free(&r);
    unload(&l);
}

// The turns are the file's template's (ChatML here, an excerpt of Qwen3's),
// not the architecture's.
Test(cli, chat_writes_turns_in_the_files_template, .timeout = 300) {
    const char *path = test_path("cli-tiny-chatml.gguf");
    synth_shape("tiny", path, "{%- for message in messages %}\n    {{- '<|im_start|>' + message.role + '\\n' + "
                     "message.content + '<|im_end|>' + '\\n' }}\n{%- endfor %}");
    check_chat(path, false, "<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n");
}

// A base model's file (the default model, the tiny one) has no template:
// chat says so, and continues each line as it stands.
Test(cli, chat_without_a_template_continues_each_line, .timeout = 300) {
    check_chat(tiny_model(), true, "", "");
    static const char gemma[] = SEAM_SOURCE_DIR "/models/gemma-3-270m-q4_k_m.gguf";
    if (test_have_input(gemma, "chat on the default (base) model", "models/get-default-model.sh"))
        check_chat(gemma, true, "", "");
}

// Chat as a person types it: an empty or blank line is no turn; a turn that
// would pass the context starts a new conversation (the cache held nothing
// before it) instead of ending the chat; one that cannot fit even then is
// refused and the chat goes on; a turn's report counts the -n tokens it
// generated; Ctrl-D leaves the shell's prompt on a line of its own.
Test(cli, chat_goes_on_past_a_full_context, .timeout = 120) {
    result r = run_with_input(ARGS("chat", "-m", tiny_model(), "-n", "4", "-c", "24", "-t", "1"),
                              "hello there\n\n   \nand again\nonce more\nthen more and more and more and more and "
                              "more and more and more and more and more\nlast\n");
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "seam chat failed:\n%s", r.err);
    cr_assert(strstr(r.err, "a new one starts with this turn"), "no new conversation:\n%s", r.err);
    cr_assert(strstr(r.err, "write less, or raise -c"), "the long turn was not refused:\n%s", r.err);
    int turns = 0, restarted = 0;
    for (const char *at = r.err; (at = strstr(at, ": prefilled ")); at++) {
        int held, generated;
        cr_assert(sscanf(at, ": prefilled %*d new tokens in %*f s (cache held %d before), generated %d", &held,
                         &generated) == 2, "%s", at);
        turns++, restarted += held == 0;
        cr_assert(generated >= 1 && generated <= 4, "a turn generated %d with -n 4", generated);
    }
    cr_assert_eq(turns, 4, "%d turns of 4 non-empty lines that fit (one too long):\n%s", turns, r.err);
    cr_assert_geq(restarted, 2, "the first turn and a new conversation hold nothing before them:\n%s", r.err);
    const size_t n = strlen(r.err);
    cr_assert(n >= 3 && !strcmp(r.err + n - 3, "> \n"), "the end of input left the line open:\n%s", r.err);
    result_free(&r);
}

// A template seam does not write turns of: named when llama.cpp knows its
// family, its first characters quoted when not; either way no chat.
Test(cli, chat_refuses_a_template_it_does_not_know, .timeout = 120) {
    const char *path = test_path("cli-tiny-phi4.gguf");
    synth_shape("tiny", path, "{% for message in messages %}{{'<|im_start|>' + message['role'] + '<|im_sep|>' + "
                     "message['content'] + '<|im_end|>'}}{% endfor %}");
    expect_failure(ARGS("chat", "-m", path), "a phi-4 template; seam writes ChatML, Gemma and Llama 3 turns only");
    path = test_path("cli-tiny-unknown.gguf");
    synth_shape("tiny", path, "{% for m in messages %}\n{{ m.role }}: {{ m.content }}\n{% endfor %}");
    expect_failure(ARGS("chat", "-m", path),
                   "not a template seam recognises (it knows ChatML, Gemma and Llama 3 by their markers): "
                   "\"{% for m in messages %}\\n{{ m.role }}: {{ m.content }}\\n...\"; to talk to it, write its turns");
}

// --layers: a row a layer and one for the head, each segment's layers
// adding up to it, and the records in --timeline's JSON.
Test(cli, run_times_every_layer, .timeout = 120) {
    const char *json = test_path("cli-layers.json");
    result r = run(ARGS("run", "-m", tiny_model(), "--tokens", "1,2,3", "-n", "5", "-t", "2", "--layers", "--timeline",
                        json));
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "seam run --layers failed:\n%s", r.err);
    cr_assert(strstr(r.err, "layers: each decoded token's time in each layer (4 tokens)") &&
                  strstr(r.err, "      0 CPU ") && strstr(r.err, "      3 CPU ") && strstr(r.err, "   head CPU "),
              "no table of the layers:\n%s", r.err);
    cr_assert(strstr(r.err, "of the CPU layers, ") && strstr(r.err, "(within 3%)\n"), "the layers' sums:\n%s", r.err);
    size_t size;
    char *text = (char *)test_read_file(json, &size);
    cr_assert(text, "no timeline written");
    text = realloc(text, size + 1);
    text[size] = '\0';
    cr_assert(strstr(text, "\"layers\": [") && strstr(text, "\"layer\": 4, \"device\": \"CPU\""),
              "the timeline has no layer records:\n%.400s", text);
    free(text);
    result_free(&r);
    result q = run(ARGS("run", "-m", tiny_model(), "--tokens", "1,2,3", "-n", "5", "-t", "2"));
    cr_assert(WIFEXITED(q.status) && !strstr(q.err, "layers: each"), "a table of layers without --layers:\n%s", q.err);
    result_free(&q);
}

#ifdef SEAM_CUDA_EMU
// On the emulated device (the SEAM_CUDA_EMU build): seam run splits the
// model, its timeline's parts add up to the token, each crossing is counted
// with its bytes, and every report says that the device is emulated; the
// stream placement's weight copies are crossings too; seam bench marks its
// GPU rows CUDA-emu. The model is the synthetic tiny one (4 layers), whose
// layers outweigh a token's fixed costs as a real model's do.
Test(cli, an_emulated_split_reports_its_crossings, .timeout = 300) {
    const char *tiny = tiny_model();
    static const char *const placements[][4] = {{"-ngl", "2", "--overflow", "cpu"},
                                                 {"-ngl", "1", "--overflow", "stream"}};
    for (int i = 0; i < 2; i++) {
        const char *const *pl = placements[i];
        result r = run(ARGS("run", "-m", tiny, "--tokens", "1,2,3", "-n", "6", pl[0], pl[1], pl[2], pl[3], "-t", "1",
                            "--layers"));
        char what[256];
        cmdline(ARGS("run", "-m", tiny, "--tokens", "1,2,3", "-n", "6", pl[0], pl[1], pl[2], pl[3]), what, sizeof what);
        cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s failed:\n%s", what, r.err);
        assert_no_sanitizer_report(what, &r);
        cr_assert(strstr(r.err, "GPU: NVIDIA") && strstr(r.err, "an emulated device, its times are CPU times"),
                  "%s: the plan does not say the device is emulated:\n%s", what, r.err);
        cr_assert(strstr(r.err, "its times are CPU times, not GPU times\n"), "%s: the report does not say so:\n%s",
                  what, r.err);
        cr_assert(strstr(r.err, "of the token time (within 3%)"), "%s: the parts do not add up:\n%s", what, r.err);
        cr_assert(strstr(r.err, "  H2D ") && strstr(r.err, "  D2H "), "%s: no crossings counted:\n%s", what, r.err);
        if (i == 1) cr_assert(strstr(r.err, "  WTS "), "%s: no weight copies counted:\n%s", what, r.err);
        // --layers: the GPU's layers timed inside its graph, the crossings between the rows
        cr_assert(strstr(r.err, "      0 GPU ") && strstr(r.err, "   -- H2D ") && strstr(r.err, "of the GPU segment"),
                  "%s: no GPU layers in the table:\n%s", what, r.err);
        cr_assert(strstr(r.err, i == 1 ? "streamed: copy us, GPU stall us" : "      3 CPU "),
                  "%s: the table's streamed copies or CPU layers:\n%s", what, r.err);
        cr_assert(strstr(r.err, "(within 3%)\n") && !strstr(r.err, "NOT within"), "%s: a sum is off:\n%s", what,
                  r.err);
        cr_assert_null(strstr(r.err, "CUDA graph could not be captured"), "%s:\n%s", what, r.err);
        result_free(&r);
    }
    result b = run(ARGS("bench", "-m", MODEL, "-p", "4", "-n", "4", "-ngl", "0,1", "-r", "1"));
    cr_assert(WIFEXITED(b.status) && WEXITSTATUS(b.status) == 0, "seam bench -ngl 0,1 failed:\n%s", b.err);
    cr_assert(strstr(b.out, "| CUDA-emu + CPU ") && strstr(b.out, "| CPU "), "no CUDA-emu and CPU rows:\n%s", b.out);
    cr_assert(strstr(b.out, "CUDA-emu: the GPU layers ran on the emulated device"), "no note under the table:\n%s",
              b.out);
    result_free(&b);
}

// The GPU board's energy (NVML; on the emulated device its power model,
// SEAM_EMU_WATTS idle and busy watts): seam run reports W and J/token over
// the decode where GPU layers run, and the arithmetic holds -- J/token is W
// times the decode's seconds over its tokens, W lies between the idle and
// busy figures -- and says the CPU's energy is not counted; a run with no
// GPU layers reports none; seam bench has a line per decode test.
Test(cli, gpu_energy_per_token_is_reported, .timeout = 300) {
    setenv("SEAM_EMU_WATTS", "50,450", 1);
    const char *tiny = tiny_model();
    result r = run(ARGS("run", "-m", tiny, "--tokens", "1,2,3", "-n", "16", "-t", "1", "-ngl", "4"));
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "seam run -ngl 4 failed:\n%s", r.err);
    const char *line = strstr(r.err, "seam: GPU energy over the decode of ");
    cr_assert(line, "no energy line:\n%s", r.err);
    double watts, j_token, busy, seconds;
    int n, generated;
    cr_assert(sscanf(line, "seam: GPU energy over the decode of %d tokens: %lf W, %lf J/token, the GPU busy %lf%%", &n,
                     &watts, &j_token, &busy) == 4, "%s", line);
    const char *dec = strstr(r.err, "; decode ");
    cr_assert(dec && sscanf(dec, "; decode %d tokens in %lf s", &generated, &seconds) == 2, "no decode line:\n%s",
              r.err);
    cr_assert(watts >= 50 && watts <= 450, "%.1f W outside the board's 50..450 W", watts);
    cr_assert(busy > 0 && busy <= 100, "busy %.0f%%", busy);
    const double want = watts * seconds / n;
    cr_assert(n > 0 && fabs(j_token - want) <= 0.1 * want, "%.3f J/token, but %.1f W over %.3f s for %d tokens is %.3f",
              j_token, watts, seconds, n, want);
    cr_assert(strstr(line, "the emulated board's power model") && strstr(line, "the CPU's energy is not counted"),
              "%s", line);
    result_free(&r);
    result c = run(ARGS("run", "-m", tiny, "--tokens", "1,2,3", "-n", "4", "-t", "1"));
    cr_assert(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0 && !strstr(c.err, "GPU energy"),
              "a CPU run reports GPU energy:\n%s", c.err);
    result_free(&c);
    result b = run(ARGS("bench", "-m", tiny, "-p", "0", "-n", "8", "-ngl", "4", "-r", "2", "-t", "1"));
    cr_assert(WIFEXITED(b.status) && WEXITSTATUS(b.status) == 0, "seam bench -ngl 4 failed:\n%s", b.err);
    cr_assert(strstr(b.out, "GPU energy, tg8 ngl=4: ") && strstr(b.out, "J/token"), "no energy line:\n%s", b.out);
    result_free(&b);
}

// Experts on the CPU beside GPU layers (--n-cpu-moe): each such layer's
// experts' input and router logits cross to the CPU and their sum crosses
// back, each crossing counted and labelled, the CPU's rows in the layer
// table, and the parts still adding up to the token.
Test(cli, experts_on_the_cpu_cross_twice_a_layer, .timeout = 300) {
    const char *moe = test_path("cli-moe-small.gguf");
    synth_shape("moe-small", moe, NULL);
    result r = run(ARGS("run", "-m", moe, "--tokens", "1,2,3", "-n", "5", "-t", "2", "-ngl", "4", "--n-cpu-moe", "2",
                        "--layers"));
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "seam run --n-cpu-moe 2 failed:\n%s", r.err);
    assert_no_sanitizer_report("seam run --n-cpu-moe 2", &r);
    cr_assert(strstr(r.err, "  D2H    1024 B @0 ") && strstr(r.err, "  H2D    1024 B @1 ") &&
                  strstr(r.err, "  (experts)\n") && !strstr(r.err, " B @2 "),
              "the experts' crossings of layers 0 and 1 (not 2):\n%s", r.err);
    cr_assert(strstr(r.err, "      0 GPU ") && strstr(r.err, "      0 CPU ") && strstr(r.err, "      1 CPU ") &&
                  !strstr(r.err, "      2 CPU ") && strstr(r.err, "crosses (the experts')"),
              "the layer table's rows:\n%s", r.err);
    cr_assert(strstr(r.err, "of the token time (within 3%)") && !strstr(r.err, "NOT within"), "a sum is off:\n%s",
              r.err);
    result_free(&r);
}

// The seed's 12 GB card (SEAM_EMU_DEVICE=rtx3060) under the seed's model,
// planned from its shape: -ngl auto takes the layers that fit the card's
// free memory (30 beside the stream overflow's two staging buffers), all 48
// do not fit (33 would), and the overflow runs the rest on the GPU.
Test(cli, the_seeds_card_plans_the_seeds_model, .timeout = 120) {
    setenv("SEAM_EMU_DEVICE", "rtx3060", 1);
    const char *shape = SEAM_SOURCE_DIR "/models/qwen3-30b-a3b.shape";
    expect_failure(ARGS("plan", "--shape", shape, "-ngl", "48"), "and 11.71 GiB is available; at most 33 layers fit");
    result r = run(ARGS("plan", "--shape", shape, "-ngl", "auto", "--overflow", "stream"));
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "plan -ngl auto failed:\n%s", r.err);
    cr_assert(strstr(r.err, "plan: 30 of 48 layers on the GPU") && strstr(r.err, "GPU: NVIDIA GeForce RTX 3060") &&
                  strstr(r.err, "layers 30..47 stay in host memory and run on the GPU"),
              "not the 3060's plan:\n%s", r.err);
    result_free(&r);
}
#endif

#include "helpers.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>

// Leaks fail the test that made them. LeakSanitizer's own check runs when a
// test's process exits, after Criterion has counted the test as passed, so a
// leak would only be printed. The link wraps Criterion's call of each test
// body (CMakeLists.txt: --wrap=criterion_internal_test_main) so that the
// check runs in the test's process, after its body and before its result.
void __real_criterion_internal_test_main(void (*fn)(void));
void __wrap_criterion_internal_test_main(void (*fn)(void));

static void (*test_body)(void);  // one test per process

static void check_leaks(void) {
    if (__lsan_do_recoverable_leak_check())
        cr_assert_fail("the test leaked memory (LeakSanitizer's report above says where it was allocated)");
}

static void body_then_leaks(void) {
    test_body();
    check_leaks();
}

// A parameterized test's body takes its parameter, as Criterion calls it.
static void param_body_then_leaks(void *param) {
    ((void (*)(void *))test_body)(param);
    check_leaks();
}

void __wrap_criterion_internal_test_main(void (*fn)(void)) {
    test_body = fn;
    // whether the test takes a parameter; Criterion's worker keeps the
    // test's extra data unaligned, so its field is read bytewise
    struct criterion_test_params (*param)(void);
    memcpy(&param, (const char *)criterion_current_test->data + offsetof(struct criterion_test_extra_data, param_),
           sizeof param);
    __real_criterion_internal_test_main(param ? (void (*)(void))param_body_then_leaks : body_then_leaks);
}
#endif

bool test_required(const char *var) {
    const char *v = getenv(var);
    return v && !strcmp(v, "1");
}

bool test_have_input(const char *path, const char *what, const char *installer) {
    if (access(path, R_OK) == 0) return true;
    if (test_required("SEAM_REQUIRE_INPUTS"))
        cr_assert_fail("%s is missing, so %s cannot be checked; SEAM_REQUIRE_INPUTS=1 (./test.sh, CI) requires it: "
                       "run %s",
                       path, what, installer);
    cr_log_warn("not checked: %s, for want of %s (%s installs it; ./test.sh does)", what, path, installer);
    return false;
}

void test_require_input(const char *path, const char *what, const char *installer) {
    if (!test_have_input(path, what, installer))
        cr_skip_test("skipped: %s is missing, so %s is not checked (%s installs it)", path, what, installer);
}

void test_no_gpu(const char *why) {
    if (test_required("SEAM_REQUIRE_GPU"))
        cr_assert_fail("SEAM_REQUIRE_GPU=1, but there is no CUDA device to run this GPU test on (%s)", why);
    cr_skip_test("skipped: no CUDA device (%s)", why);
}

const char *test_path(const char *name) {
    static char buf[4096];
    mkdir(SEAM_BINARY_DIR "/test-scratch", 0755);
    snprintf(buf, sizeof buf, "%s/test-scratch/%s", SEAM_BINARY_DIR, name);
    return buf;
}

uint8_t *test_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) *size = (size_t)n;
    return buf;
}

int test_write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, size, f);
    return (fclose(f) == 0 && w == size) ? 0 : -1;
}

uint32_t test_bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

float test_float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint64_t test_rng_next(uint64_t *s) {  // splitmix64
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

float test_rng_uniform(uint64_t *s) {
    return (float)((test_rng_next(s) >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

float test_rng_normal(uint64_t *s) {
    double u1 = ((test_rng_next(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    double u2 = (test_rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static uint32_t ror32(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha256_block(test_sha256 *s, const uint8_t *p) {
    static const uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
    uint32_t w[64], v[8];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror32(w[i - 15], 7) ^ ror32(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror32(w[i - 2], 17) ^ ror32(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(v, s->h, sizeof v);
    for (int i = 0; i < 64; i++) {
        uint32_t ch = (v[4] & v[5]) ^ (~v[4] & v[6]);
        uint32_t maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
        uint32_t t1 = v[7] + (ror32(v[4], 6) ^ ror32(v[4], 11) ^ ror32(v[4], 25)) + ch + k[i] + w[i];
        uint32_t t2 = (ror32(v[0], 2) ^ ror32(v[0], 13) ^ ror32(v[0], 22)) + maj;
        v[7] = v[6], v[6] = v[5], v[5] = v[4], v[4] = v[3] + t1;
        v[3] = v[2], v[2] = v[1], v[1] = v[0], v[0] = t1 + t2;
    }
    for (int i = 0; i < 8; i++) s->h[i] += v[i];
}

void test_sha256_init(test_sha256 *s) {
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, h0, sizeof h0);
    s->fill = 0;
    s->bytes = 0;
}

void test_sha256_update(test_sha256 *s, const void *data, size_t n) {
    const uint8_t *p = data;
    s->bytes += n;
    while (n > 0) {
        size_t k = 64 - s->fill < n ? 64 - s->fill : n;
        memcpy(s->block + s->fill, p, k);
        s->fill += k, p += k, n -= k;
        if (s->fill == 64) {
            sha256_block(s, s->block);
            s->fill = 0;
        }
    }
}

void test_sha256_hex(test_sha256 *s, char out[65]) {
    const uint64_t bits = s->bytes * 8;
    uint8_t pad = 0x80, len[8];
    test_sha256_update(s, &pad, 1);
    pad = 0;
    while (s->fill != 56) test_sha256_update(s, &pad, 1);
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)(bits >> (56 - 8 * i));
    test_sha256_update(s, len, 8);
    for (int i = 0; i < 8; i++) snprintf(out + 8 * i, 9, "%08x", (unsigned)s->h[i]);
}

int test_sha256_file(const char *path, char out[65]) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    static uint8_t buf[1 << 16];
    test_sha256 s;
    test_sha256_init(&s);
    for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) test_sha256_update(&s, buf, n);
    const int failed = ferror(f);
    fclose(f);
    if (failed) return -1;
    test_sha256_hex(&s, out);
    return 0;
}

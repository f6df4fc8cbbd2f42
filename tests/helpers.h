// helpers.h — small utilities shared by the Criterion tests.
#ifndef SEAM_TEST_HELPERS_H
#define SEAM_TEST_HELPERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// A path under the build directory's test scratch folder (created on first
// use); the returned string is static storage, valid until the next call.
const char *test_path(const char *name);

// An input the suite reads but does not make: the default model and the
// real vocabularies (models/get-default-model.sh and models/get-vocabs.sh
// install them). test_have_input is true when path is readable. When it is
// not, the test fails where SEAM_REQUIRE_INPUTS=1 (./test.sh and CI, which
// install them: a missing input there is a broken install, not a pass), and
// elsewhere the test log says what goes unchecked and which script installs
// the input. test_require_input skips the whole test then, saying the same.
bool test_have_input(const char *path, const char *what, const char *installer);
// Whether the environment sets `var` to 1 (SEAM_REQUIRE_INPUTS, SEAM_REQUIRE_SIMD).
bool test_required(const char *var);
void test_require_input(const char *path, const char *what, const char *installer);

// A GPU test with no CUDA device to run on: skips, saying "skipped: no CUDA
// device" and why; under SEAM_REQUIRE_GPU=1 (bench/gpu-check.sh, where the
// device must be there: a runtime that cannot reach the driver would skip
// every GPU test and pass) it fails instead.
void test_no_gpu(const char *why);

// Whether this build runs under AddressSanitizer, whose allocator keeps its
// own books (mallinfo2 does not see them) and whose shadow and quarantine
// a process holds besides its own memory: the memory bounds are not checked there.
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN true
#else
#define UNDER_ASAN false
#endif

// Reads a whole file into a malloc'd buffer; NULL when it cannot.
uint8_t *test_read_file(const char *path, size_t *size);
int test_write_file(const char *path, const void *data, size_t size);

// The bits of a float, and the float of some bits.
uint32_t test_bits_of(float f);
float test_float_of(uint32_t u);

// Deterministic pseudo-random numbers for test data.
uint64_t test_rng_next(uint64_t *state);
float test_rng_uniform(uint64_t *state);  // [-1, 1)
float test_rng_normal(uint64_t *state);

// SHA-256 (FIPS 180-4): whether a fixture's model is the file it was made from.
typedef struct {
    uint32_t h[8];
    uint8_t block[64];
    size_t fill;
    uint64_t bytes;
} test_sha256;

void test_sha256_init(test_sha256 *s);
void test_sha256_update(test_sha256 *s, const void *data, size_t n);
void test_sha256_hex(test_sha256 *s, char out[65]);  // finishes s; lowercase hex
// The digest of a whole file; -1 when it cannot be read.
int test_sha256_file(const char *path, char out[65]);

#endif

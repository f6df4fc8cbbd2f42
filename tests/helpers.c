#include "helpers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

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

#define _POSIX_C_SOURCE 200809L
#include "base/common.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int seam_fail(seam_error *e, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

char *seam_trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1])) *--end = 0;
    return s;
}

char *seam_json_escape(const char *s, char *out, size_t len) {
    size_t at = 0;
    for (; *s && at + 7 < len; s++) {
        const unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') out[at++] = '\\', out[at++] = (char)ch;
        else if (ch < 0x20) at += (size_t)snprintf(out + at, len - at, "\\u%04x", ch);
        else out[at++] = (char)ch;
    }
    if (len) out[at < len ? at : len - 1] = 0;
    return out;
}

double seam_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int seam_parse_int_list(const char *flag, const char *s, int lo, int hi, int *v, int max, int *n, seam_error *e) {
    *n = 0;
    if (!s || !*s) return seam_fail(e, "%s wants a list such as 1,2 or 0-8+2", flag);
    for (const char *p = s; *p;) {
        char *end;
        errno = 0;
        long first = strtol(p, &end, 10), last = first, step = 1;
        if (end == p || errno) goto bad;
        p = end;
        if (*p == '-') {
            last = strtol(p + 1, &end, 10);
            if (end == p + 1 || errno) goto bad;
            p = end;
            if (*p == '+') {
                step = strtol(p + 1, &end, 10);
                if (end == p + 1 || errno || step < 1) goto bad;
                p = end;
            }
        }
        if (*p == ',' && p[1]) p++;
        else if (*p) goto bad;
        if (first < lo || last > hi || first > last)
            return seam_fail(e, "%s values must be in %d..%d (got '%s')", flag, lo, hi, s);
        for (long x = first; x <= last; x += step) {
            if (*n == max) return seam_fail(e, "%s lists at most %d values", flag, max);
            v[(*n)++] = (int)x;
        }
    }
    return 0;
bad:
    return seam_fail(e, "%s wants comma-separated values or first-last[+step] (got '%s')", flag, s);
}

void *seam_alloc_resident(size_t bytes) {
    const uint64_t n = seam_align_up(bytes ? bytes : 1, 64);
    if (n > SIZE_MAX) return NULL;
    void *p = aligned_alloc(64, (size_t)n);
    if (p) memset(p, 0, (size_t)n);
    return p;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void seam_sort_doubles(double *v, size_t n) { qsort(v, n, sizeof *v, cmp_double); }

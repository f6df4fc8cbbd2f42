// common.h — the error convention shared by every room of seam.
//
// Floor src/base/ (the lowest): what every other floor shares -- errors,
// the clock, resident allocations (here), and the timeline of a run that the
// clock fills (timeline.h). It includes nothing of seam's.
//
// Functions that can fail on input return 0 on success or -1 on failure and
// fill a seam_error with what failed, on which input, and what to do. The
// command line prints the message and exits non-zero; nothing aborts.
#ifndef SEAM_COMMON_H
#define SEAM_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    char msg[512];
} seam_error;

// Formats the message into e (when e is not NULL) and returns -1, so that a
// failing path reads `return seam_fail(e, "...", ...);`.
int seam_fail(seam_error *e, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

// Checked size arithmetic: return 0 and store the result, or -1 on overflow.
static inline int seam_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    if (a != 0 && b > UINT64_MAX / a) return -1;
    *out = a * b;
    return 0;
}
static inline int seam_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    if (b > UINT64_MAX - a) return -1;
    *out = a + b;
    return 0;
}

// x rounded up to a multiple of alignment (not zero).
static inline uint64_t seam_align_up(uint64_t x, uint64_t alignment) {
    return (x + alignment - 1) / alignment * alignment;
}

// A list of integers, each in lo..hi: comma-separated values or ranges
// first-last[+step] ("1,2", "0-28+4"), at most max of them into v (*n).
// flag names the option in the message.
int seam_parse_int_list(const char *flag, const char *s, int lo, int hi, int *v, int max, int *n, seam_error *e);

// s without its leading and trailing white space (isspace), the trailing
// part cut in place: the one rule of seam's key = value files.
char *seam_trim(char *s);

// s as the body of a JSON string into out (len bytes, NUL-terminated, cut
// short when it does not fit): quotes, backslashes and control characters
// escaped. Returns out.
char *seam_json_escape(const char *s, char *out, size_t len);

// v (n) sorted in ascending order (medians and percentiles of timings).
void seam_sort_doubles(double *v, size_t n);

// Monotonic wall clock in seconds.
double seam_now(void);

// bytes of zeroed memory, 64-byte aligned, every page written (resident):
// the memory a plan counts is held from the start, as measured, not when a
// token first touches it. (Not malloc + memset: a compiler may fold that
// into calloc, whose fresh pages stay untouched.) Release with free; NULL
// when out of memory.
void *seam_alloc_resident(size_t bytes);

#ifdef __cplusplus
}
#endif
#endif

// gguf_writer.c — writes GGUF files: metadata and the tensor table first,
// then the tensor data streamed in declaration order.
#include "format/gguf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf_format.h"

// The header (metadata and tensor table) is serialised into memory
// as it is declared, tensor offsets included: a tensor's offset depends only
// on the tensors declared before it. Declarations cannot return an error, so
// the first one is kept and reported by begin, data and finish.

typedef struct {
    uint8_t *p;
    size_t len, cap;
} byte_buf;

typedef struct {
    char **v;
    size_t n, cap;
} name_list;

struct gguf_writer {
    uint32_t alignment;
    seam_error err;     // the first error; empty while all is well
    byte_buf kvs;       // serialised metadata entries, in declaration order
    name_list keys;     // [n_kv], for the duplicate check
    byte_buf infos;     // serialised tensor infos
    name_list names;    // [n_tensors]
    uint64_t *sizes;    // [n_tensors] data bytes of each tensor
    size_t sizes_cap;
    uint64_t data_size; // aligned end of the last tensor declared, from the data start
    FILE *out;          // set by gguf_w_begin
    uint64_t pos;       // bytes written to out
    uint64_t cur;       // the tensor being streamed
    uint64_t cur_done;  // its bytes written so far
};

PRINTF_LIKE(2, 3) static int w_fail(gguf_writer *w, const char *fmt, ...) {
    if (w->err.msg[0] == '\0') {
        int n = snprintf(w->err.msg, sizeof w->err.msg, "gguf writer: ");
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->err.msg + n, sizeof w->err.msg - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int w_status(const gguf_writer *w, seam_error *e) {
    if (w->err.msg[0] == '\0') return 0;
    if (e) *e = w->err;
    return -1;
}

// Grows an array p of cap elements of size bytes to hold need (doubling);
// returns the new array, or NULL (p untouched) when memory runs out.
static void *grow(void *p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return p;
    size_t c = *cap ? *cap : 64;
    while (c < need && c <= SIZE_MAX / 2) c *= 2;
    if (c < need || c > SIZE_MAX / size) return NULL;
    void *q = realloc(p, c * size);
    if (q) *cap = c;
    return q;
}

static void put(gguf_writer *w, byte_buf *b, const void *data, size_t n) {
    if (n == 0) return;
    uint8_t *p = grow(b->p, &b->cap, b->len + n, 1);
    if (!p) {
        w_fail(w, "out of memory for the header (%zu bytes)", b->len + n);
        return;
    }
    b->p = p;
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void put_u32(gguf_writer *w, byte_buf *b, uint32_t v) { put(w, b, &v, 4); }
static void put_u64(gguf_writer *w, byte_buf *b, uint64_t v) { put(w, b, &v, 8); }

static void put_str(gguf_writer *w, byte_buf *b, const char *s) {
    size_t n = strlen(s);
    put_u64(w, b, n);
    put(w, b, s, n);
}

// Declares a key or tensor name (kind says which): one the reader accepts,
// before gguf_w_begin, and not declared before. Keeps a copy in l.
static int declare_name(gguf_writer *w, name_list *l, const char *kind, const char *s) {
    size_t n = strlen(s);
    if (w->out) return w_fail(w, "%s '%s' declared after gguf_w_begin", kind, s);
    if (n == 0 || n > GGUF_MAX_NAME) return w_fail(w, "a %s must have 1 to %u bytes", kind, GGUF_MAX_NAME);
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i], s) == 0) return w_fail(w, "duplicate %s '%s'", kind, s);
    char **v = grow(l->v, &l->cap, l->n + 1, sizeof *l->v);
    char *copy = v ? strdup(s) : NULL;
    if (v) l->v = v;
    if (!copy) return w_fail(w, "out of memory for the %s '%s'", kind, s);
    l->v[l->n++] = copy;
    return 0;
}

// Starts a metadata entry: its key and value type.
static int kv_begin(gguf_writer *w, const char *key, uint32_t type) {
    if (declare_name(w, &w->keys, "metadata key", key)) return -1;
    put_str(w, &w->kvs, key);
    put_u32(w, &w->kvs, type);
    return 0;
}

static void kv_scalar(gguf_writer *w, const char *key, uint32_t type, const void *v) {
    if (kv_begin(w, key, type) == 0) put(w, &w->kvs, v, SCALAR_BYTES[type]);
}

static int kv_array(gguf_writer *w, const char *key, uint32_t type, uint64_t n) {
    if (kv_begin(w, key, GGUF_TYPE_ARRAY)) return -1;
    put_u32(w, &w->kvs, type);
    put_u64(w, &w->kvs, n);
    return 0;
}

static void kv_num_array(gguf_writer *w, const char *key, uint32_t type, const void *v, uint64_t n) {
    if (kv_array(w, key, type, n) == 0) put(w, &w->kvs, v, (size_t)n * SCALAR_BYTES[type]);
}

void gguf_w_u32(gguf_writer *w, const char *key, uint32_t v) { kv_scalar(w, key, GGUF_TYPE_UINT32, &v); }
void gguf_w_i32(gguf_writer *w, const char *key, int32_t v) { kv_scalar(w, key, GGUF_TYPE_INT32, &v); }
void gguf_w_f32(gguf_writer *w, const char *key, float v) { kv_scalar(w, key, GGUF_TYPE_FLOAT32, &v); }

void gguf_w_bool(gguf_writer *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    kv_scalar(w, key, GGUF_TYPE_BOOL, &b);
}

void gguf_w_str(gguf_writer *w, const char *key, const char *v) {
    if (kv_begin(w, key, GGUF_TYPE_STRING) == 0) put_str(w, &w->kvs, v);
}

void gguf_w_arr_str(gguf_writer *w, const char *key, const char *const *v, uint64_t n) {
    if (kv_array(w, key, GGUF_TYPE_STRING, n)) return;
    for (uint64_t i = 0; i < n; i++) put_str(w, &w->kvs, v[i]);
}

void gguf_w_arr_f32(gguf_writer *w, const char *key, const float *v, uint64_t n) {
    kv_num_array(w, key, GGUF_TYPE_FLOAT32, v, n);
}

void gguf_w_arr_i32(gguf_writer *w, const char *key, const int32_t *v, uint64_t n) {
    kv_num_array(w, key, GGUF_TYPE_INT32, v, n);
}

// The alignment is chosen here; a non-default one is stored in the file as
// general.alignment (u32, as the spec has it). NULL when alignment is not a
// power of two or memory runs out.
gguf_writer *gguf_writer_new(uint32_t alignment) {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) return NULL;
    gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->alignment = alignment;
    if (alignment != GGUF_DEFAULT_ALIGNMENT) gguf_w_u32(w, "general.alignment", alignment);
    return w;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->keys.n; i++) free(w->keys.v[i]);
    for (size_t i = 0; i < w->names.n; i++) free(w->names.v[i]);
    free(w->keys.v);
    free(w->names.v);
    free(w->kvs.p);
    free(w->infos.p);
    free(w->sizes);
    free(w);
}

int gguf_w_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const uint64_t *ne) {
    gguf_tensor t = {.n_dims = n_dims, .type = type, .offset = w->data_size};
    seam_error why;
    for (uint32_t d = 0; d < n_dims && d < 4; d++) t.ne[d] = ne[d];
    if (gguf_tensor_size(&t, &why)) return w_fail(w, "tensor '%s': %s", name, why.msg);
    uint64_t end;
    if (seam_add_u64(t.offset, t.n_bytes, &end) || end > UINT64_MAX - w->alignment)
        return w_fail(w, "tensor '%s': the data section passes 2^64 bytes", name);
    uint64_t *sizes = grow(w->sizes, &w->sizes_cap, w->names.n + 1, sizeof *w->sizes);
    if (!sizes) return w_fail(w, "out of memory declaring tensor '%s'", name);
    w->sizes = sizes;
    if (declare_name(w, &w->names, "tensor name", name)) return -1;
    w->sizes[w->names.n - 1] = t.n_bytes;
    w->data_size = seam_align_up(end, w->alignment);

    put_str(w, &w->infos, name);
    put_u32(w, &w->infos, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) put_u64(w, &w->infos, ne[d]);
    put_u32(w, &w->infos, type);
    put_u64(w, &w->infos, t.offset);
    return (int)(w->names.n - 1);
}

static int w_write(gguf_writer *w, const void *p, uint64_t n) {
    if (n && fwrite(p, 1, n, w->out) != n)
        return w_fail(w, "write failed at byte %llu: %s", (ull)w->pos, strerror(errno));
    w->pos += n;
    return 0;
}

// Zeros up to the next multiple of the alignment.
static int w_pad(gguf_writer *w) {
    static const uint8_t zeros[4096];
    uint64_t n = seam_align_up(w->pos, w->alignment) - w->pos;
    while (n > 0) {
        uint64_t k = n < sizeof zeros ? n : sizeof zeros;
        if (w_write(w, zeros, k)) return -1;
        n -= k;
    }
    return 0;
}

// out must be at the start of the file: padding is counted from there.
uint64_t gguf_w_data_size(const gguf_writer *w) { return w->data_size; }

int gguf_w_begin(gguf_writer *w, FILE *out, seam_error *e) {
    if (w_status(w, e)) return -1;
    if (w->out) {
        w_fail(w, "gguf_w_begin called twice");
        return w_status(w, e);
    }
    w->out = out;
    uint32_t version = 3;
    uint64_t counts[2] = {w->names.n, w->keys.n};  // n_tensors, n_kv
    if (w_write(w, GGUF_MAGIC, 4) == 0 && w_write(w, &version, 4) == 0 && w_write(w, counts, 16) == 0 &&
        w_write(w, w->kvs.p, w->kvs.len) == 0 && w_write(w, w->infos.p, w->infos.len) == 0)
        w_pad(w);
    return w_status(w, e);
}

int gguf_w_data(gguf_writer *w, const void *data, uint64_t n, seam_error *e) {
    const uint8_t *p = data;
    if (!w->out) w_fail(w, "gguf_w_data before gguf_w_begin");
    while (n > 0 && w_status(w, NULL) == 0) {
        if (w->cur == w->names.n) {
            w_fail(w, "%llu bytes more than the declared tensors hold", (ull)n);
            break;
        }
        uint64_t left = w->sizes[w->cur] - w->cur_done;
        uint64_t k = n < left ? n : left;
        if (w_write(w, p, k)) break;
        p += k;
        n -= k;
        w->cur_done += k;
        if (w->cur_done == w->sizes[w->cur]) {
            if (w_pad(w)) break;  // the next tensor starts aligned
            w->cur++;
            w->cur_done = 0;
        }
    }
    return w_status(w, e);
}

int gguf_w_finish(gguf_writer *w, seam_error *e) {
    if (!w->out) w_fail(w, "gguf_w_finish before gguf_w_begin");
    else if (w->cur < w->names.n)
        w_fail(w, "tensor %llu '%s' is missing %llu of its %llu bytes", (ull)w->cur, w->names.v[w->cur],
               (ull)(w->sizes[w->cur] - w->cur_done), (ull)w->sizes[w->cur]);
    else if (fflush(w->out) != 0 || ferror(w->out))
        w_fail(w, "flushing the file failed: %s", strerror(errno));
    return w_status(w, e);
}

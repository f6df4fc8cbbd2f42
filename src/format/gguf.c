// gguf.c — the GGUF reader: mmap and validation (the writer is gguf_writer.c).
//
// The reader trusts nothing in the file: every read goes through take(),
// which checks the bytes left first, and every count is checked against the
// bytes left before anything is allocated for it. Sizes are computed with the
// checked arithmetic of common.h. A file that passes gguf_parse can be used
// without further bounds checks: every tensor's data lies inside the file,
// aligned, and no two tensors overlap.
#define _POSIX_C_SOURCE 200809L
#include "format/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/gguf_format.h"

static const char *const VALUE_TYPE_NAMES[GGUF_TYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};

static const char *value_type_name(uint32_t type) {
    return type < GGUF_TYPE_COUNT ? VALUE_TYPE_NAMES[type] : "?";
}

// Decodes a little-endian scalar of the given type from p (any alignment).
static void decode_scalar(uint32_t type, const uint8_t *p, gguf_kv *kv) {
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
            uint64_t u64; int64_t i64; float f32; double f64; } x;
    memcpy(&x, p, SCALAR_BYTES[type]);
    switch (type) {
    case GGUF_TYPE_UINT8: kv->v.u64 = x.u8; break;
    case GGUF_TYPE_INT8: kv->v.i64 = x.i8; break;
    case GGUF_TYPE_UINT16: kv->v.u64 = x.u16; break;
    case GGUF_TYPE_INT16: kv->v.i64 = x.i16; break;
    case GGUF_TYPE_UINT32: kv->v.u64 = x.u32; break;
    case GGUF_TYPE_INT32: kv->v.i64 = x.i32; break;
    case GGUF_TYPE_UINT64: kv->v.u64 = x.u64; break;
    case GGUF_TYPE_INT64: kv->v.i64 = x.i64; break;
    case GGUF_TYPE_FLOAT32: kv->v.f64 = x.f32; break;
    case GGUF_TYPE_FLOAT64: kv->v.f64 = x.f64; break;
    case GGUF_TYPE_BOOL: kv->v.b = x.u8 != 0; break;
    }
}

// ---------------------------------------------------------------------------
// Reading

// A bounds-checked cursor over the file, and what is being read, for messages.
typedef struct {
    const uint8_t *base;
    uint64_t size, pos;
    const char *label;  // the path, or "<buffer>"
    char where[160];    // "header", "key 3 'general.name'", "tensor 7 'output.weight'"
    seam_error *e;
} cursor;

// Fails with "label: where: reason".
PRINTF_LIKE(2, 3) static int rfail(cursor *c, const char *fmt, ...) {
    char why[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return seam_fail(c->e, "%s: %s: %s", c->label, c->where, why);
}

// How much of a name goes into a message, so that the reason still fits.
static int clip(gguf_str name) { return (int)(name.len < 80 ? name.len : 80); }

// Names the item being read: "tensor 3", or "tensor 3 'name'" once the name
// is known.
static void set_where(cursor *c, const char *kind, uint64_t i, gguf_str name) {
    if (name.ptr)
        snprintf(c->where, sizeof c->where, "%s %llu '%.*s'", kind, (ull)i, clip(name), name.ptr);
    else
        snprintf(c->where, sizeof c->where, "%s %llu", kind, (ull)i);
}

// The next n bytes, or -1 when the file ends first.
static int take(cursor *c, uint64_t n, const char *what, const uint8_t **p) {
    if (n > c->size - c->pos) {
        rfail(c, "%s (%llu bytes at byte %llu) runs past the end of the file (%llu bytes)", what, (ull)n,
              (ull)c->pos, (ull)c->size);
        return -1;  // spelled out, so that the compiler sees *p is set on success
    }
    *p = c->base + c->pos;
    c->pos += n;
    return 0;
}

static int rd_u32(cursor *c, const char *what, uint32_t *v) {
    const uint8_t *p;
    if (take(c, 4, what, &p)) return -1;
    memcpy(v, p, 4);
    return 0;
}

static int rd_u64(cursor *c, const char *what, uint64_t *v) {
    const uint8_t *p;
    if (take(c, 8, what, &p)) return -1;
    memcpy(v, p, 8);
    return 0;
}

static int rd_str(cursor *c, const char *what, gguf_str *s) {
    const uint8_t *p;
    if (rd_u64(c, what, &s->len) || take(c, s->len, what, &p)) return -1;
    s->ptr = (const char *)p;
    return 0;
}

// A key or tensor name: non-empty and of a sane length.
static int rd_name(cursor *c, const char *what, gguf_str *s) {
    if (rd_str(c, what, s)) return -1;
    if (s->len == 0) return rfail(c, "empty %s at byte %llu", what, (ull)(c->pos - 8));
    if (s->len > GGUF_MAX_NAME)
        return rfail(c, "%s of %llu bytes is longer than the %u allowed", what, (ull)s->len, GGUF_MAX_NAME);
    return 0;
}

static int rd_array(cursor *c, gguf_kv *kv) {
    uint32_t type;
    uint64_t n;
    if (rd_u32(c, "array element type", &type)) return -1;
    if (type == GGUF_TYPE_ARRAY) return rfail(c, "nested arrays are not supported");
    if (type >= GGUF_TYPE_COUNT) return rfail(c, "unknown array element type %u", type);
    if (rd_u64(c, "array length", &n)) return -1;
    uint64_t left = c->size - c->pos;
    uint64_t min_bytes = type == GGUF_TYPE_STRING ? 8 : SCALAR_BYTES[type];
    if (n > left / min_bytes)
        return rfail(c, "array of %llu %s at byte %llu cannot fit in the %llu bytes left", (ull)n,
                     value_type_name(type), (ull)c->pos, (ull)left);
    kv->v.arr.type = type;
    kv->v.arr.n = n;
    kv->v.arr.data = c->base + c->pos;
    if (type != GGUF_TYPE_STRING) {
        const uint8_t *p;
        return take(c, n * SCALAR_BYTES[type], "array data", &p);
    }
    // The index of a string array (a vocabulary can hold 262144 entries).
    if (n > 0 && !(kv->v.arr.strs = malloc(n * sizeof(gguf_str))))
        return rfail(c, "out of memory for an array of %llu strings", (ull)n);
    for (uint64_t i = 0; i < n; i++)
        if (rd_str(c, "array string", &kv->v.arr.strs[i])) return -1;
    return 0;
}

static int rd_value(cursor *c, uint32_t type, gguf_kv *kv) {
    kv->type = type;
    if (type == GGUF_TYPE_STRING) return rd_str(c, "string value", &kv->v.str);
    if (type == GGUF_TYPE_ARRAY) return rd_array(c, kv);
    if (type >= GGUF_TYPE_COUNT) return rfail(c, "unknown value type %u", type);
    const uint8_t *p;
    if (take(c, SCALAR_BYTES[type], value_type_name(type), &p)) return -1;
    decode_scalar(type, p, kv);
    return 0;
}

static bool same_str(gguf_str a, gguf_str b) {
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

// A name and where it came from, for the duplicate check.
typedef struct {
    gguf_str name;
    uint64_t index;
} named;

static int cmp_named(const void *pa, const void *pb) {
    const named *a = pa, *b = pb;
    int c = memcmp(a->name.ptr, b->name.ptr, a->name.len < b->name.len ? a->name.len : b->name.len);
    if (c == 0) c = (a->name.len > b->name.len) - (a->name.len < b->name.len);
    if (c == 0) c = (a->index > b->index) - (a->index < b->index);
    return c;
}

// Rejects a name that appears twice among n items (kvs or tensors) of
// `stride` bytes whose gguf_str name is at byte `name_at`: sorted by name,
// then by index, a repeat sits next to its first appearance.
static int check_unique(cursor *c, const char *kind, const void *items, uint64_t n, size_t stride,
                        size_t name_at) {
    named *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return rfail(c, "out of memory checking %llu %s names", (ull)n, kind);
    for (uint64_t i = 0; i < n; i++)
        v[i] = (named){*(const gguf_str *)((const char *)items + i * stride + name_at), i};
    qsort(v, n, sizeof *v, cmp_named);
    int rc = 0;
    for (uint64_t i = 1; i < n && rc == 0; i++)
        if (same_str(v[i].name, v[i - 1].name)) {
            set_where(c, kind, v[i].index, v[i].name);
            rc = rfail(c, "duplicate name: %s %llu has it too", kind, (ull)v[i - 1].index);
        }
    free(v);
    return rc;
}

static int cmp_offset(const void *pa, const void *pb) {
    const gguf_tensor *a = *(const gguf_tensor *const *)pa, *b = *(const gguf_tensor *const *)pb;
    return (a->offset > b->offset) - (a->offset < b->offset);
}

// Places every tensor's data: aligned, inside the file, not overlapping.
static int place_tensors(gguf_file *f, cursor *c) {
    snprintf(c->where, sizeof c->where, "tensor data");
    if (f->n_tensors > 0 && f->data_offset > c->size)
        return rfail(c, "the data section starts at byte %llu, past the end of the file (%llu bytes)",
                     (ull)f->data_offset, (ull)c->size);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        set_where(c, "tensor", i, t->name);
        if (t->offset % f->alignment != 0)
            return rfail(c, "data offset %llu is not a multiple of the alignment (%llu)", (ull)t->offset,
                         (ull)f->alignment);
        uint64_t room = c->size - f->data_offset;
        if (t->offset > room || t->n_bytes > room - t->offset)
            return rfail(c, "%llu bytes of data at offset %llu (+ %llu, the data section start) run past "
                         "the end of the file (%llu bytes)",
                         (ull)t->n_bytes, (ull)t->offset, (ull)f->data_offset, (ull)c->size);
        t->data = c->base + f->data_offset + t->offset;
    }
    const gguf_tensor **order = malloc((f->n_tensors ? f->n_tensors : 1) * sizeof *order);
    if (!order) return rfail(c, "out of memory sorting %llu tensors", (ull)f->n_tensors);
    for (uint64_t i = 0; i < f->n_tensors; i++) order[i] = &f->tensors[i];
    qsort(order, f->n_tensors, sizeof *order, cmp_offset);
    int rc = 0;
    for (uint64_t i = 1; i < f->n_tensors && rc == 0; i++) {
        const gguf_tensor *a = order[i - 1], *b = order[i];
        if (a->offset + a->n_bytes > b->offset) {
            set_where(c, "tensor", (uint64_t)(b - f->tensors), b->name);
            rc = rfail(c, "data [%llu, %llu) overlaps tensor %llu '%.*s' [%llu, %llu)", (ull)b->offset,
                       (ull)(b->offset + b->n_bytes), (ull)(a - f->tensors), clip(a->name), a->name.ptr,
                       (ull)a->offset, (ull)(a->offset + a->n_bytes));
        }
    }
    free(order);
    return rc;
}

// The value of an integer KV as sign and magnitude, so that any integer type
// can be checked against any range; -1 when the value is not an integer.
static int kv_integer(const gguf_kv *kv, uint64_t *mag, bool *neg) {
    switch (kv->type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_UINT32: case GGUF_TYPE_UINT64:
        *neg = false;
        *mag = kv->v.u64;
        return 0;
    case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64:
        *neg = kv->v.i64 < 0;
        *mag = *neg ? 0 - (uint64_t)kv->v.i64 : (uint64_t)kv->v.i64;
        return 0;
    default:
        return -1;
    }
}

static int read_alignment(gguf_file *f, cursor *c) {
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_kv *kv = gguf_find_kv(f, "general.alignment");
    if (!kv) return 0;
    uint64_t mag;
    bool neg;
    if (kv_integer(kv, &mag, &neg) || neg || mag == 0 || mag > UINT32_MAX || (mag & (mag - 1)) != 0) {
        char val[64];
        gguf_format_value(kv, val, sizeof val);
        set_where(c, "key", (uint64_t)(kv - f->kv), kv->key);
        return rfail(c, "the alignment must be a power of two that fits in a u32, not %s (%s)", val,
                     value_type_name(kv->type));
    }
    f->alignment = mag;
    return 0;
}

// name | u32 n_dims | u64 ne[n_dims] | u32 type | u64 offset
static int rd_tensor_info(cursor *c, uint64_t i, gguf_tensor *t) {
    seam_error why;
    set_where(c, "tensor", i, (gguf_str){0, NULL});
    if (rd_name(c, "tensor name", &t->name)) return -1;
    set_where(c, "tensor", i, t->name);
    if (rd_u32(c, "dimension count", &t->n_dims)) return -1;
    if (gguf_check_dims(t->n_dims, &why)) return rfail(c, "%s", why.msg);
    for (uint32_t d = 0; d < 4; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++)
        if (rd_u64(c, "dimension", &t->ne[d])) return -1;
    if (rd_u32(c, "tensor type", &t->type) || rd_u64(c, "data offset", &t->offset)) return -1;
    if (gguf_tensor_size(t, &why)) return rfail(c, "%s", why.msg);
    return 0;
}

static int read_file(gguf_file *f, cursor *c) {
    snprintf(c->where, sizeof c->where, "header");
    const uint8_t *magic;
    if (take(c, 4, "magic", &magic)) return -1;
    if (memcmp(magic, GGUF_MAGIC, 4) != 0)
        return rfail(c, "bad magic %02x %02x %02x %02x: not a GGUF file", magic[0], magic[1], magic[2],
                     magic[3]);
    if (rd_u32(c, "version", &f->version)) return -1;
    if (f->version != 2 && f->version != 3)
        return rfail(c, "unsupported GGUF version %u (seam reads versions 2 and 3, little-endian)",
                     f->version);
    uint64_t n_tensors, n_kv;
    if (rd_u64(c, "tensor count", &n_tensors) || rd_u64(c, "metadata count", &n_kv)) return -1;
    uint64_t left = c->size - c->pos;
    if (n_kv > left / MIN_KV_BYTES)
        return rfail(c, "%llu metadata entries cannot fit in the %llu bytes left", (ull)n_kv, (ull)left);
    if (n_tensors > left / MIN_TENSOR_BYTES)
        return rfail(c, "%llu tensors cannot fit in the %llu bytes left", (ull)n_tensors, (ull)left);
    if ((n_kv && !(f->kv = calloc(n_kv, sizeof *f->kv))) ||
        (n_tensors && !(f->tensors = calloc(n_tensors, sizeof *f->tensors))))
        return rfail(c, "out of memory for %llu metadata entries and %llu tensors", (ull)n_kv,
                     (ull)n_tensors);
    f->n_kv = n_kv;
    f->n_tensors = n_tensors;

    for (uint64_t i = 0; i < n_kv; i++) {
        gguf_kv *kv = &f->kv[i];
        uint32_t type;
        set_where(c, "key", i, (gguf_str){0, NULL});
        if (rd_name(c, "key", &kv->key)) return -1;
        set_where(c, "key", i, kv->key);
        if (rd_u32(c, "value type", &type) || rd_value(c, type, kv)) return -1;
    }
    snprintf(c->where, sizeof c->where, "metadata");
    if (check_unique(c, "key", f->kv, n_kv, sizeof *f->kv, offsetof(gguf_kv, key)) || read_alignment(f, c))
        return -1;

    for (uint64_t i = 0; i < n_tensors; i++)
        if (rd_tensor_info(c, i, &f->tensors[i])) return -1;
    snprintf(c->where, sizeof c->where, "tensor table");
    if (check_unique(c, "tensor", f->tensors, n_tensors, sizeof *f->tensors, offsetof(gguf_tensor, name)))
        return -1;

    // c->pos <= size and alignment <= 2^31, so this cannot wrap.
    f->data_offset = seam_align_up(c->pos, f->alignment);
    return place_tensors(f, c);
}

static int parse(gguf_file *f, const uint8_t *base, uint64_t size, bool mapped, const char *label,
                 seam_error *e) {
    memset(f, 0, sizeof *f);
    f->base = base;
    f->size = size;
    f->mapped = mapped;
    cursor c = {.base = base, .size = size, .label = label, .e = e};
    if (read_file(f, &c) == 0) return 0;
    gguf_close(f);
    return -1;
}

int gguf_parse(gguf_file *f, const void *buf, uint64_t size, seam_error *e) {
    return parse(f, buf, size, false, "<buffer>", e);
}

int gguf_open(gguf_file *f, const char *path, seam_error *e) {
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY | O_NONBLOCK);  // a FIFO must not block us before the regular-file check
    if (fd < 0) return seam_fail(e, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    const char *why = NULL;
    if (fstat(fd, &st) != 0) why = strerror(errno);
    else if (!S_ISREG(st.st_mode)) why = "not a regular file";
    else if (st.st_size == 0) why = "empty file, not GGUF";
    if (why) {
        close(fd);
        return seam_fail(e, "%s: %s", path, why);
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd);  // the mapping keeps the file
    if (p == MAP_FAILED) return seam_fail(e, "%s: cannot map: %s", path, strerror(err));
    return parse(f, p, (uint64_t)st.st_size, true, path, e);
}

void gguf_prefetch(const gguf_file *f) {
    volatile uint8_t sink = 0;
    for (uint64_t i = 0; i < f->size; i += 4096) sink ^= f->base[i];
    (void)sink;
}

void gguf_close(gguf_file *f) {
    for (uint64_t i = 0; f->kv && i < f->n_kv; i++)
        if (f->kv[i].type == GGUF_TYPE_ARRAY) free(f->kv[i].v.arr.strs);
    free(f->kv);
    free(f->tensors);
    if (f->mapped) munmap((void *)f->base, (size_t)f->size);
    memset(f, 0, sizeof *f);
}

bool gguf_str_eq(gguf_str s, const char *c) { return same_str(s, (gguf_str){strlen(c), c}); }

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key) {
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (gguf_str_eq(f->kv[i].key, key)) return &f->kv[i];
    return NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (gguf_str_eq(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

// ---------------------------------------------------------------------------
// Typed lookups. Each takes the kv found (NULL when missing) so that the
// plain and the _or forms share the conversion.

static int missing(const char *key, seam_error *e) {
    return seam_fail(e, "metadata key '%s' is missing", key);
}

static int kv_u32(const gguf_kv *kv, const char *key, uint32_t *out, seam_error *e) {
    uint64_t mag;
    bool neg;
    if (!kv) return missing(key, e);
    if (kv_integer(kv, &mag, &neg))
        return seam_fail(e, "metadata key '%s' holds a %s, not an integer", key, value_type_name(kv->type));
    if (neg || mag > UINT32_MAX)
        return seam_fail(e, "metadata key '%s' = %s%llu does not fit in a u32", key, neg ? "-" : "",
                         (ull)mag);
    *out = (uint32_t)mag;
    return 0;
}

static int kv_f32(const gguf_kv *kv, const char *key, float *out, seam_error *e) {
    uint64_t mag;
    bool neg;
    if (!kv) return missing(key, e);
    if (kv->type == GGUF_TYPE_FLOAT32 || kv->type == GGUF_TYPE_FLOAT64)
        *out = (float)kv->v.f64;
    else if (kv_integer(kv, &mag, &neg) == 0)
        *out = neg ? -(float)mag : (float)mag;
    else
        return seam_fail(e, "metadata key '%s' holds a %s, not a number", key, value_type_name(kv->type));
    return 0;
}

int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out, seam_error *e) {
    return kv_u32(gguf_find_kv(f, key), key, out, e);
}

int gguf_get_f32(const gguf_file *f, const char *key, float *out, seam_error *e) {
    return kv_f32(gguf_find_kv(f, key), key, out, e);
}

int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out, seam_error *e) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return missing(key, e);
    if (kv->type != GGUF_TYPE_STRING)
        return seam_fail(e, "metadata key '%s' holds a %s, not a string", key, value_type_name(kv->type));
    *out = kv->v.str;
    return 0;
}

int gguf_get_u32_or(const gguf_file *f, const char *key, uint32_t def, uint32_t *out, seam_error *e) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) *out = def;
    return kv ? kv_u32(kv, key, out, e) : 0;
}

int gguf_get_f32_or(const gguf_file *f, const char *key, float def, float *out, seam_error *e) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) *out = def;
    return kv ? kv_f32(kv, key, out, e) : 0;
}

// ---------------------------------------------------------------------------
// Formatting for humans

// A caller's buffer being filled; pos < len always, buf[pos] is the NUL.
typedef struct {
    char *buf;
    size_t len, pos;
} text;

// snprintf at the end of t, cut short when t is full.
PRINTF_LIKE(2, 3) static void appendf(text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + t->pos, t->len - t->pos, fmt, ap);
    va_end(ap);
    if (n > 0) t->pos = (size_t)n < t->len - 1 - t->pos ? t->pos + (size_t)n : t->len - 1;
}

// A string in quotes, with control bytes escaped (chat templates hold
// newlines, vocabularies hold every byte).
static void append_str(text *t, gguf_str s) {
    appendf(t, "\"");
    for (uint64_t i = 0; i < s.len && t->pos < t->len - 1; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        if (ch == '\n') appendf(t, "\\n");
        else if (ch == '"' || ch == '\\') appendf(t, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f) appendf(t, "\\x%02x", ch);
        else appendf(t, "%c", ch);
    }
    appendf(t, "\"");
}

static void append_scalar(text *t, const gguf_kv *kv) {
    uint64_t mag;
    bool neg;
    if (kv_integer(kv, &mag, &neg) == 0) appendf(t, "%s%llu", neg ? "-" : "", (ull)mag);
    else if (kv->type == GGUF_TYPE_FLOAT32 || kv->type == GGUF_TYPE_FLOAT64) appendf(t, "%g", kv->v.f64);
    else if (kv->type == GGUF_TYPE_BOOL) appendf(t, "%s", kv->v.b ? "true" : "false");
    else if (kv->type == GGUF_TYPE_STRING) append_str(t, kv->v.str);
}

// Scalars as themselves; arrays as "[i32 x 5] 1, 2, 3, 4, ..." (the first
// four elements).
void gguf_format_value(const gguf_kv *kv, char *buf, size_t len) {
    if (len == 0) return;
    text t = {buf, len, 0};
    buf[0] = '\0';
    if (kv->type != GGUF_TYPE_ARRAY) {
        append_scalar(&t, kv);
        return;
    }
    uint32_t type = kv->v.arr.type;
    appendf(&t, "[%s x %llu]", value_type_name(type), (ull)kv->v.arr.n);
    for (uint64_t i = 0; i < kv->v.arr.n && i < 4; i++) {
        gguf_kv el = {.type = type};
        if (type == GGUF_TYPE_STRING) el.v.str = kv->v.arr.strs[i];
        else decode_scalar(type, kv->v.arr.data + i * SCALAR_BYTES[type], &el);
        appendf(&t, i ? ", " : " ");
        append_scalar(&t, &el);
    }
    if (kv->v.arr.n > 4) appendf(&t, ", ...");
}

// gguf.c — the GGUF reader (mmap + validation) and writer.
//
// The reader trusts nothing in the file: every read goes through take(),
// which checks the bytes left first, and every count is checked against the
// bytes left before anything is allocated for it. Sizes are computed with the
// checked arithmetic of common.h. A file that passes gguf_parse can be used
// without further bounds checks: every tensor's data lies inside the file,
// aligned, and no two tensors overlap.
#define _POSIX_C_SOURCE 200809L
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef unsigned long long ull;  // for printf

#if defined(__GNUC__)
#define PRINTF_LIKE(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define PRINTF_LIKE(fmt, args)
#endif

// The GGUF spec caps keys at 2^16-1 bytes; we hold tensor names to the same,
// so that a garbage length is reported as such.
#define GGUF_MAX_NAME 65535u

// The fewest bytes a metadata entry (key length, 1-byte key, value type,
// 1-byte value) and a tensor info (name length, 1-byte name, n_dims, one
// dimension, type, offset) can take: counts that cannot fit are rejected
// before anything is allocated for them.
#define MIN_KV_BYTES (8 + 1 + 4 + 1)
#define MIN_TENSOR_BYTES (8 + 1 + 4 + 8 + 4 + 8)

// Bytes of a scalar of each value type; 0 for STRING and ARRAY, which carry
// their own lengths.
static const uint8_t SCALAR_BYTES[GGUF_TYPE_COUNT] = {
    [GGUF_TYPE_UINT8] = 1, [GGUF_TYPE_INT8] = 1,    [GGUF_TYPE_UINT16] = 2,
    [GGUF_TYPE_INT16] = 2, [GGUF_TYPE_UINT32] = 4,  [GGUF_TYPE_INT32] = 4,
    [GGUF_TYPE_FLOAT32] = 4, [GGUF_TYPE_BOOL] = 1,  [GGUF_TYPE_UINT64] = 8,
    [GGUF_TYPE_INT64] = 8, [GGUF_TYPE_FLOAT64] = 8,
};

static const char *const VALUE_TYPE_NAMES[GGUF_TYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};

static const char *value_type_name(uint32_t type) {
    return type < GGUF_TYPE_COUNT ? VALUE_TYPE_NAMES[type] : "?";
}

static uint64_t align_up(uint64_t x, uint64_t alignment) {
    return (x + alignment - 1) / alignment * alignment;
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

static int check_dims(uint32_t n_dims, seam_error *why) {
    if (n_dims < 1 || n_dims > 4) return seam_fail(why, "%u dimensions (GGUF tensors have 1 to 4)", n_dims);
    return 0;
}

// Checks a tensor's shape against its type and fills n_elems and n_bytes.
// Shared by the reader and the writer; the reason goes to why, without the
// file and tensor, which the caller adds.
static int tensor_size(gguf_tensor *t, seam_error *why) {
    if (check_dims(t->n_dims, why)) return -1;
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        if (t->ne[d] == 0) return seam_fail(why, "dimension %u is zero", d);
        if (seam_mul_u64(n, t->ne[d], &n))
            return seam_fail(why, "element count overflows at dimension %u (%llu)", d, (ull)t->ne[d]);
    }
    uint32_t block_elems, block_bytes;
    if (!ggml_type_layout(t->type, &block_elems, &block_bytes))
        return seam_fail(why, "unknown tensor type %u", t->type);
    if (t->ne[0] % block_elems != 0)
        return seam_fail(why, "row length %llu is not a multiple of %u, the block size of %s",
                         (ull)t->ne[0], block_elems, ggml_type_name(t->type));
    uint64_t row_bytes;
    if (seam_mul_u64(t->ne[0] / block_elems, block_bytes, &row_bytes) ||
        seam_mul_u64(row_bytes, n / t->ne[0], &t->n_bytes))
        return seam_fail(why, "byte size overflows (%llu elements of %s)", (ull)n, ggml_type_name(t->type));
    t->n_elems = n;
    return 0;
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
    if (check_dims(t->n_dims, &why)) return rfail(c, "%s", why.msg);
    for (uint32_t d = 0; d < 4; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++)
        if (rd_u64(c, "dimension", &t->ne[d])) return -1;
    if (rd_u32(c, "tensor type", &t->type) || rd_u64(c, "data offset", &t->offset)) return -1;
    if (tensor_size(t, &why)) return rfail(c, "%s", why.msg);
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
    f->data_offset = align_up(c->pos, f->alignment);
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

// ---------------------------------------------------------------------------
// Writing. The header (metadata and tensor table) is serialised into memory
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
    if (tensor_size(&t, &why)) return w_fail(w, "tensor '%s': %s", name, why.msg);
    uint64_t end;
    if (seam_add_u64(t.offset, t.n_bytes, &end) || end > UINT64_MAX - w->alignment)
        return w_fail(w, "tensor '%s': the data section passes 2^64 bytes", name);
    uint64_t *sizes = grow(w->sizes, &w->sizes_cap, w->names.n + 1, sizeof *w->sizes);
    if (!sizes) return w_fail(w, "out of memory declaring tensor '%s'", name);
    w->sizes = sizes;
    if (declare_name(w, &w->names, "tensor name", name)) return -1;
    w->sizes[w->names.n - 1] = t.n_bytes;
    w->data_size = align_up(end, w->alignment);

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
    uint64_t n = align_up(w->pos, w->alignment) - w->pos;
    while (n > 0) {
        uint64_t k = n < sizeof zeros ? n : sizeof zeros;
        if (w_write(w, zeros, k)) return -1;
        n -= k;
    }
    return 0;
}

// out must be at the start of the file: padding is counted from there.
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

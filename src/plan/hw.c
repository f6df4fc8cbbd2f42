// hw.c — hardware profiles: parsing, loading by name, measuring this CPU.
#include "plan/hw.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu/membw.h"
#include "cpu/ops.h"
#include "cpu/speed.h"

const char *const hw_key_name[HW_KEYS] = {
    "cpu_threads", "cpu_read_gbs", "cpu_read_gbs_1", "cpu_attn_read_gbs", "cpu_attn_gbs", "cpu_attn_pos_ns",
    "cpu_attn_llc_read_gbs", "cpu_attn_llc_gbs", "cpu_attn_llc_pos_ns", "cpu_call_us", "cpu_job_us", "cpu_wake_us", "cpu_llc_mib",
    "gpu_mem_gib", "gpu_peak_gbs", "gpu_efficiency", "gpu_kernel_us", "gpu_kernels_per_layer", "gpu_count",
    "launch_us", "pcie_gbs", "pcie_us",
};

// "floor": a measurement below what its probe resolves, held at the smallest value a profile holds
static const char *const SOURCES[] = {"measured", "published", "derived", "fitted", "floor"};

// Which group a key belongs to, and whether the group needs it.
static bool is_gpu_key(hw_key k) { return k >= HW_GPU_MEM_GIB; }
static bool is_optional(hw_key k) {
    return k == HW_CPU_THREADS || k == HW_CPU_READ_GBS_1 || (k >= HW_CPU_ATTN_READ_GBS && k <= HW_CPU_ATTN_LLC_POS_NS) ||
           k == HW_CPU_CALL_US || k == HW_CPU_JOB_US || k == HW_CPU_WAKE_US ||
           k == HW_CPU_LLC_MIB || k == HW_GPU_KERNELS_PER_LAYER || k == HW_GPU_COUNT;
}
static bool is_count(hw_key k) { return k == HW_CPU_THREADS || k == HW_GPU_KERNELS_PER_LAYER || k == HW_GPU_COUNT; }

// The value of key k (or of a dot rate) checked: positive and finite, an
// efficiency at most 1, a count a whole number.
static int check_value(const char *key, bool count, bool efficiency, const char *text, double *out, const char *where,
                       seam_error *e) {
    char *end;
    errno = 0;
    const double v = strtod(text, &end);
    if (end == text || *end || errno)
        return seam_fail(e, "%s: '%s' wants a number (got '%s')", where, key, text);
    if (!(v > 0) || v > 1e12)
        return seam_fail(e, "%s: '%s' must be positive (got %s): speeds, sizes and counts are never zero or negative",
                         where, key, text);
    if (efficiency && v > 1) return seam_fail(e, "%s: '%s' is a share of the peak, at most 1 (got %s)", where, key, text);
    if (count && (v != (double)(long)v || v > 4096))
        return seam_fail(e, "%s: '%s' wants a whole number in 1..4096 (got %s)", where, key, text);
    *out = v;
    return 0;
}

// "measured: ..." -> 0 when the comment names one of SOURCES first.
static int check_source(const char *src) {
    for (size_t i = 0; i < sizeof SOURCES / sizeof *SOURCES; i++) {
        const size_t n = strlen(SOURCES[i]);
        if (!strncmp(src, SOURCES[i], n) && (src[n] == ':' || src[n] == ' ' || src[n] == 0)) return 0;
    }
    return -1;
}

int hw_parse(hw_profile *hw, const char *text, const char *label, seam_error *e) {
    memset(hw, 0, sizeof *hw);
    snprintf(hw->path, sizeof hw->path, "%s", label);
    int lineno = 0;
    for (const char *p = text; *p;) {
        const size_t len = strcspn(p, "\n");
        char line[1024], where[600];
        lineno++;
        snprintf(where, sizeof where, "%s:%d", label, lineno);
        if (len >= sizeof line) return seam_fail(e, "%s: line too long", where);
        memcpy(line, p, len);
        line[len] = 0;
        p += len + (p[len] == '\n');
        char *hash = strchr(line, '#'), *src = NULL;
        if (hash) *hash = 0, src = seam_trim(hash + 1);
        char *s = seam_trim(line);
        if (!*s) continue;  // a blank or comment line
        char *eq = strchr(s, '=');
        if (!eq) return seam_fail(e, "%s: expected 'key = value  # source'", where);
        *eq = 0;
        const char *key = seam_trim(s), *val = seam_trim(eq + 1);
        if (!strcmp(key, "name")) {
            if (!*val || strlen(val) >= sizeof hw->name) return seam_fail(e, "%s: 'name' wants a short name", where);
            snprintf(hw->name, sizeof hw->name, "%s", val);
            continue;
        }
        if (!src || check_source(src))
            return seam_fail(e,
                             "%s: '%s' has no source: end the line with '# measured: ...', '# published: ...', "
                             "'# derived: ...', '# fitted: ...' or '# floor: ...'",
                             where, key);
        const bool rate = !strncmp(key, "cpu_dot_gbs.", 12), row = !strncmp(key, "cpu_dot_row_ns.", 15),
                   stream = !strncmp(key, "cpu_stream_gbs.", 15);
        if (rate || row || stream) {  // cpu_dot_gbs.Q4_K, cpu_dot_row_ns.Q4_K, cpu_stream_gbs.Q4_K
            const char *tname = strchr(key, '.') + 1;
            const int type = ggml_type_find(tname);
            if (type < 0) return seam_fail(e, "%s: unknown weight type in '%s' (e.g. cpu_dot_gbs.Q4_K)", where, key);
            double *slot = rate ? &hw->cpu_dot_gbs[type] : row ? &hw->cpu_dot_row_ns[type] : &hw->cpu_stream_gbs[type];
            if (*slot > 0) return seam_fail(e, "%s: '%s' given twice", where, key);
            if (check_value(key, false, false, val, slot, where, e)) return -1;
            snprintf(hw->dot_source, sizeof hw->dot_source, "%s", src);
            continue;
        }
        int k = -1;
        for (int i = 0; i < HW_KEYS && k < 0; i++)
            if (!strcmp(key, hw_key_name[i])) k = i;
        if (k < 0) return seam_fail(e, "%s: unknown key '%s' (see src/hw.h for the keys)", where, key);
        if (hw->set[k]) return seam_fail(e, "%s: '%s' given twice", where, key);
        if (check_value(key, is_count((hw_key)k), k == HW_GPU_EFFICIENCY, val, &hw->v[k], where, e)) return -1;
        hw->set[k] = true;
        snprintf(hw->source[k], HW_SOURCE_LEN, "%s", src);
    }
    if (!hw->name[0]) return seam_fail(e, "%s: missing key 'name'", label);
    for (int k = 0; k < HW_KEYS; k++) {
        if (!hw->set[k]) continue;
        if (is_gpu_key((hw_key)k)) hw->has_gpu = true;
        else hw->has_cpu = true;
    }
    for (int t = 0; t < GGML_TYPE_COUNT; t++) hw->has_cpu |= hw->cpu_dot_gbs[t] > 0 || hw->cpu_stream_gbs[t] > 0;
    if (!hw->has_cpu && !hw->has_gpu) return seam_fail(e, "%s: describes neither a CPU nor a GPU", label);
    for (int k = 0; k < HW_KEYS; k++) {
        const bool needed = is_gpu_key((hw_key)k) ? hw->has_gpu : hw->has_cpu;
        if (needed && !is_optional((hw_key)k) && !hw->set[k])
            return seam_fail(e, "%s: missing key '%s' (a profile with a %s gives all of its %s keys)", label,
                             hw_key_name[k], is_gpu_key((hw_key)k) ? "GPU" : "CPU",
                             is_gpu_key((hw_key)k) ? "gpu_*, launch_us and pcie_*" : "cpu_read_gbs");
    }
    for (hw_key first = HW_CPU_ATTN_READ_GBS; first <= HW_CPU_ATTN_LLC_READ_GBS; first += 3) {
        const int attn = hw->set[first] + hw->set[first + 1] + hw->set[first + 2];
        if (attn != 0 && attn != 3)
            return seam_fail(e, "%s: %s, %s and %s go together (all three or none)", label, hw_key_name[first],
                             hw_key_name[first + 1], hw_key_name[first + 2]);
    }
    if (hw->set[HW_CPU_READ_GBS_1] && hw->v[HW_CPU_READ_GBS_1] > hw->v[HW_CPU_READ_GBS] * 1.5)
        return seam_fail(e, "%s: cpu_read_gbs_1 (%g) is far above cpu_read_gbs (%g): more threads never read slower",
                         label, hw->v[HW_CPU_READ_GBS_1], hw->v[HW_CPU_READ_GBS]);
    return 0;
}

// models/hw/NAME.hw beside the build directory of the running executable
// (build/seam -> models/hw), else under the current directory.
static int find_profile(const char *name, char *path, size_t len) {
    char exe[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        snprintf(path, len, "%s/../models/hw/%s.hw", exe, name);
        if (access(path, R_OK) == 0) return 0;
    }
    snprintf(path, len, "models/hw/%s.hw", name);
    return access(path, R_OK);
}

int hw_load(hw_profile *hw, const char *name_or_path, seam_error *e) {
    char path[PATH_MAX + 64];
    if (strchr(name_or_path, '/') || strstr(name_or_path, ".hw")) snprintf(path, sizeof path, "%s", name_or_path);
    else if (find_profile(name_or_path, path, sizeof path))
        return seam_fail(e, "no hardware profile '%s': give a file, a name from models/hw/ or 'this'", name_or_path);
    FILE *f = fopen(path, "r");
    if (!f) return seam_fail(e, "cannot open hardware profile %s: %s", path, strerror(errno));
    char text[16384];
    const size_t n = fread(text, 1, sizeof text - 1, f);
    const bool more = fgetc(f) != EOF;
    fclose(f);
    if (more) return seam_fail(e, "%s: a hardware profile is a few lines, this file is over 16 KiB", path);
    text[n] = 0;
    return hw_parse(hw, text, path, e);
}

// The weight types a Q4_K_M file (and the synthetic ones) holds.
static const uint32_t TYPES[] = {GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_Q4_0, GGML_TYPE_Q5_0,
                                 GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K};

static void set_measured(hw_profile *hw, hw_key k, double v, const char *when, const char *how) {
    hw->v[k] = v;
    hw->set[k] = true;
    snprintf(hw->source[k], HW_SOURCE_LEN, "measured: %s, %s", when, how);
}

// A measured cost that noise can take to zero or below is held at the
// smallest a profile holds (its values are positive), and its source says
// so: the figure is a floor, not a measurement.
static const double HW_FLOOR = 0.01;
static double positive(double v) { return v > HW_FLOOR ? v : HW_FLOOR; }

static void set_measured_cost(hw_profile *hw, hw_key k, double v, const char *when, const char *how) {
    set_measured(hw, k, positive(v), when, how);
    if (v <= HW_FLOOR)
        snprintf(hw->source[k], HW_SOURCE_LEN, "floor: measured %.3g, held at %g (below what the probe resolves); "
                 "%.16s, %.150s", v, HW_FLOOR, when, how);
}

// Attention on every thread at once over caches of `bytes` in all, at the
// head size d of the model planned and g > 1 queries a job, as its decode
// shares them: one query a KV head with heads of d and of 2d, and g
// queries with heads of d, give the three costs of a KV head's position
// for p queries of B bytes of K and V (hw.h), set from key `first` on. The
// fit passes through the model's own jobs, not an extrapolation to them:
//   c(p, B) = B * read + p * (B * query + pos), in ns, read = 1 / attn_read_gbs, query = 1 / attn_gbs
static int measure_attention(hw_profile *hw, seam_pool *pool, int n_threads, int d, int g, uint64_t bytes,
                             hw_key first, const char *when, seam_error *e) {
    const double c1 = cpu_speed_attention(pool, 1, d, bytes), c2 = cpu_speed_attention(pool, 1, 2 * d, bytes),
                 cg = cpu_speed_attention(pool, g, d, bytes);
    if (c1 < 0 || c2 < 0 || cg < 0) return seam_fail(e, "out of memory measuring attention");
    const double b1 = d * 4, b2 = 2 * d * 4;  // K and V bytes of a position (f16)
    const double both = (c2 - c1) / (b2 - b1), pos = positive(c1 - b1 * both);  // read + query, ns a byte
    double query = (cg - g * pos - b1 * both) / ((g - 1) * b1);
    query = query > 0.01 * both ? query : 0.01 * both;
    const double read = both - query > 0.01 * both ? both - query : 0.01 * both;
    char how[200];
    snprintf(how, sizeof how, "cpu_attention on %d thread%s over %.0f MiB of f16 caches (1024 positions), one query "
             "a KV head with heads of %d and %d, %d with heads of %d (cpu_speed_attention)", n_threads,
             n_threads > 1 ? "s" : "", bytes / 1048576.0, d, 2 * d, g, d);
    set_measured(hw, first, 1 / read, when, how);
    set_measured(hw, first + 1, 1 / query, when, how);
    set_measured(hw, first + 2, pos, when, how);
    return 0;
}

int hw_measure_cpu(hw_profile *hw, int n_threads, const seam_config *shape, seam_error *e) {
    memset(hw, 0, sizeof *hw);
    snprintf(hw->name, sizeof hw->name, "this");
    snprintf(hw->path, sizeof hw->path, "(measured now)");
    char when[64], how[160];
    const time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M", localtime(&now));
    // the read probe on one thread and on all of them; the kernels streaming
    // from memory and the pool's cost per job on all of them
    membw_result r;
    if (membw_measure(NULL, 256u << 20, 5, &r, e)) return -1;
    set_measured(hw, HW_CPU_READ_GBS_1, membw_read_limit(&r), when,
                 "the read probe (src/cpu/membw.c) on 1 thread, 256 MiB, median of 5");
    seam_pool *pool = n_threads > 1 ? pool_create(n_threads, e) : NULL;
    if (n_threads > 1 && !pool) return -1;
    int rc = n_threads > 1 ? membw_measure(pool, 256u << 20, 5, &r, e) : 0;
    snprintf(how, sizeof how, "the read probe (src/cpu/membw.c) on %d thread%s, 256 MiB, median of 5", n_threads,
             n_threads > 1 ? "s" : "");
    if (!rc) set_measured(hw, HW_CPU_READ_GBS, n_threads > 1 ? membw_read_limit(&r) : hw->v[HW_CPU_READ_GBS_1], when, how);
    for (size_t i = 0; i < sizeof TYPES / sizeof *TYPES && !rc; i++)
        if ((hw->cpu_stream_gbs[TYPES[i]] = cpu_speed_stream(pool, TYPES[i], 256u << 20)) < 0)
            rc = seam_fail(e, "out of memory measuring the kernels' streaming speed");
    if (rc) return pool_destroy(pool), -1;
    set_measured(hw, HW_CPU_THREADS, n_threads, when, "the threads the probes ran on (-t)");
    // the kernel's view of the last cache (glibc's sysconf reads cpuid,
    // which a virtual machine may fill with its host's figure)
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    long kib = 0;
    if (f && fscanf(f, "%ldK", &kib) == 1 && kib > 0)
        set_measured(hw, HW_CPU_LLC_MIB, kib / 1024.0, when, "/sys/devices/system/cpu/cpu0/cache/index3/size");
    if (f) fclose(f);
    // two widths, rows of 256 and of 4096 weights, 4 MiB of each: past the
    // L2 and in the last cache, where the weights of a model that fits it
    // are; the time of a row is row_ns + bytes / gbs
    const cpu_kernels *fast = cpu_kernels_get();
    for (size_t i = 0; i < sizeof TYPES / sizeof *TYPES; i++) {
        const uint32_t t = TYPES[i];
        const double bn = (double)ggml_row_bytes(t, 256), bw = (double)ggml_row_bytes(t, 4096);
        double narrow, wide;
        if ((narrow = cpu_speed_dot_all(pool, t, 256, (int)((4 << 20) / bn))) < 0 ||
            (wide = cpu_speed_dot_all(pool, t, 4096, (int)((4 << 20) / bw))) < 0)
            return pool_destroy(pool), seam_fail(e, "out of memory measuring the dot kernels");
        const double ns_per_byte = (bw / wide - bn / narrow) / (bw - bn), row_ns = bn / narrow - bn * ns_per_byte;
        hw->cpu_dot_gbs[t] = ns_per_byte > 0 ? 1 / ns_per_byte : wide;
        hw->cpu_dot_row_ns[t] = positive(row_ns);
        hw->cpu_dot_row_floor[t] = row_ns <= HW_FLOOR;
    }
    // a call's own cost on one thread, and a job's on the pool beyond it
    const double dot = hw->cpu_dot_gbs[GGML_TYPE_Q4_K], row_ns = hw->cpu_dot_row_ns[GGML_TYPE_Q4_K];
    const double wake = pool ? cpu_speed_wake(pool) : 0;
    double call, job;
    if (cpu_speed_matvec_jobs(pool, dot, row_ns, wake, &call, &job))
        return pool_destroy(pool), seam_fail(e, "out of memory measuring a matvec's cost");
    set_measured_cost(hw, HW_CPU_CALL_US, call, when,
                 "128 chained matvecs of 256x256 Q4_K 2 us apart on 1 thread, less their rows' time, median of 41 cycles "
                 "(cpu_speed_matvec_jobs)");
    if (pool) {
        snprintf(how, sizeof how, "4001 jobs 2 us apart on %d threads, the mean less the slowest 1%% (cpu_speed_wake)",
                 n_threads);
        set_measured_cost(hw, HW_CPU_WAKE_US, wake, when, how);
        snprintf(how, sizeof how, "the same chain on %d threads in turns with 1, less their grabs' time over the "
                 "threads: the median of 41 cycles' differences (cpu_speed_matvec_jobs)", n_threads);
        set_measured_cost(hw, HW_CPU_JOB_US, job, when, how);
    }
    // attention over caches past the last-level cache (four times it, at least 64 MiB: a model's cache was
    // last read a token ago) and within it (a quarter of it, at least 4 MiB: a small model's stays there)
    const double llc = hw->set[HW_CPU_LLC_MIB] ? hw->v[HW_CPU_LLC_MIB] * 1048576.0 : 0;
    // the queries a job of decode's attention takes (cpu_attention_per_job: a whole group, or a share of it
    // when there are fewer KV heads than threads); without grouped queries the third point still separates
    // the costs
    const int d = shape ? shape->head_dim : 128,
              p = shape ? cpu_attention_per_job(1, shape->n_heads, shape->n_kv_heads, n_threads) : 4, g = p > 1 ? p : 2;
    const uint64_t past = 4 * llc > 64.0 * 1048576 ? (uint64_t)(4 * llc) : 64ull << 20,
                   within = llc / 4 > 4.0 * 1048576 ? (uint64_t)(llc / 4) : 4ull << 20;
    if (measure_attention(hw, pool, n_threads, d, g, past, HW_CPU_ATTN_READ_GBS, when, e) ||
        (llc > 0 && measure_attention(hw, pool, n_threads, d, g, within, HW_CPU_ATTN_LLC_READ_GBS, when, e)))
        return pool_destroy(pool), -1;
    pool_destroy(pool);
    snprintf(hw->dot_source, sizeof hw->dot_source,
             "measured: %s, the %s kernels on %d thread%s: dot on 4 MiB of rows of 256 and of 4096 weights on each "
             "thread at once (cpu_speed_dot_all), matvec streaming 256 MiB (cpu_speed_stream)", when, fast->name,
             n_threads, n_threads > 1 ? "s" : "");
    hw->has_cpu = true;
    return 0;
}

// Every value of the profile in hw_write's order, as `key = value  # source`
// lines or as the members of one JSON object.
static void write_values(const hw_profile *hw, bool json, FILE *out) {
    const char *fmt = json ? "%s\"%s%s\": %.6g" : "%s%s%s = %.6g  # %s\n";
    const char *sep = json ? ", " : "";
    int n = 0;
    for (int k = 0; k < HW_KEYS; k++)
        if (hw->set[k]) fprintf(out, fmt, json && n++ ? sep : "", hw_key_name[k], "", hw->v[k], hw->source[k]);
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        char key[64];
        const double *per_type[] = {hw->cpu_dot_gbs, hw->cpu_dot_row_ns, hw->cpu_stream_gbs};
        static const char *const names[] = {"cpu_dot_gbs.", "cpu_dot_row_ns.", "cpu_stream_gbs."};
        for (int i = 0; i < 3; i++) {
            if (!(per_type[i][t] > 0)) continue;
            snprintf(key, sizeof key, "%s%s", names[i], ggml_type_name((uint32_t)t));
            char floor[HW_SOURCE_LEN + 64];
            snprintf(floor, sizeof floor, "floor: measured at or below %g, held there; %s", HW_FLOOR, hw->dot_source);
            const bool held = i == 1 && hw->cpu_dot_row_floor[t];
            fprintf(out, fmt, json && n++ ? sep : "", key, "", per_type[i][t], held ? floor : hw->dot_source);
        }
    }
}

void hw_write(const hw_profile *hw, FILE *out) {
    fprintf(out, "name = %s\n", hw->name);
    write_values(hw, false, out);
}

void hw_write_json(const hw_profile *hw, FILE *out) {
    fprintf(out, "{");
    write_values(hw, true, out);
    fprintf(out, "}");
}

uint64_t hw_gpu_bytes(const hw_profile *hw) {
    if (!hw->has_gpu) return 0;
    const double cards = hw->set[HW_GPU_COUNT] ? hw->v[HW_GPU_COUNT] : 1;
    return (uint64_t)(cards * hw->v[HW_GPU_MEM_GIB] * 1073741824.0);
}

int hw_cards_for_budget(const hw_profile *hw, uint64_t budget) {
    const int cards = hw->set[HW_GPU_COUNT] ? (int)hw->v[HW_GPU_COUNT] : 1;
    return cards > 1 && budget <= (uint64_t)(hw->v[HW_GPU_MEM_GIB] * 1073741824.0) ? 1 : cards;
}

// hw.c — hardware profiles: parsing, loading by name, measuring this CPU.
#include "hw.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu/membw.h"
#include "cpu/speed.h"

const char *const hw_key_name[HW_KEYS] = {
    "cpu_threads", "cpu_read_gbs", "cpu_read_gbs_1", "cpu_attn_gbs", "cpu_job_us",
    "gpu_mem_gib", "gpu_peak_gbs", "gpu_efficiency", "gpu_kernel_us", "gpu_kernels_per_layer", "gpu_count",
    "launch_us", "pcie_gbs", "pcie_us",
};

static const char *const SOURCES[] = {"measured", "published", "derived", "fitted"};

// Which group a key belongs to, and whether the group needs it.
static bool is_gpu_key(hw_key k) { return k >= HW_GPU_MEM_GIB; }
static bool is_optional(hw_key k) {
    return k == HW_CPU_READ_GBS_1 || k == HW_CPU_ATTN_GBS || k == HW_CPU_JOB_US || k == HW_GPU_KERNELS_PER_LAYER ||
           k == HW_GPU_COUNT;
}
static bool is_count(hw_key k) { return k == HW_CPU_THREADS || k == HW_GPU_KERNELS_PER_LAYER || k == HW_GPU_COUNT; }

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1])) *--end = 0;
    return s;
}

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
        if (hash) *hash = 0, src = trim(hash + 1);
        char *s = trim(line);
        if (!*s) continue;  // a blank or comment line
        char *eq = strchr(s, '=');
        if (!eq) return seam_fail(e, "%s: expected 'key = value  # source'", where);
        *eq = 0;
        const char *key = trim(s), *val = trim(eq + 1);
        if (!strcmp(key, "name")) {
            if (!*val || strlen(val) >= sizeof hw->name) return seam_fail(e, "%s: 'name' wants a short name", where);
            snprintf(hw->name, sizeof hw->name, "%s", val);
            continue;
        }
        if (!src || check_source(src))
            return seam_fail(e,
                             "%s: '%s' has no source: end the line with '# measured: ...', '# published: ...', "
                             "'# derived: ...' or '# fitted: ...'",
                             where, key);
        if (!strncmp(key, "cpu_dot_gbs.", 12)) {  // cpu_dot_gbs.Q4_K
            int type = -1;
            for (int t = 0; t < GGML_TYPE_COUNT && type < 0; t++)
                if (!strcasecmp(key + 12, ggml_type_name((uint32_t)t))) type = t;
            if (type < 0) return seam_fail(e, "%s: unknown weight type in '%s' (e.g. cpu_dot_gbs.Q4_K)", where, key);
            if (hw->cpu_dot_gbs[type] > 0) return seam_fail(e, "%s: '%s' given twice", where, key);
            if (check_value(key, false, false, val, &hw->cpu_dot_gbs[type], where, e)) return -1;
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
    for (int t = 0; t < GGML_TYPE_COUNT; t++) hw->has_cpu |= hw->cpu_dot_gbs[t] > 0;
    if (!hw->has_cpu && !hw->has_gpu) return seam_fail(e, "%s: describes neither a CPU nor a GPU", label);
    for (int k = 0; k < HW_KEYS; k++) {
        const bool needed = is_gpu_key((hw_key)k) ? hw->has_gpu : hw->has_cpu;
        if (needed && !is_optional((hw_key)k) && !hw->set[k])
            return seam_fail(e, "%s: missing key '%s' (a profile with a %s gives all of its %s keys)", label,
                             hw_key_name[k], is_gpu_key((hw_key)k) ? "GPU" : "CPU",
                             is_gpu_key((hw_key)k) ? "gpu_*, launch_us and pcie_*" : "cpu_threads and cpu_read_gbs");
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

int hw_measure_cpu(hw_profile *hw, int n_threads, seam_error *e) {
    memset(hw, 0, sizeof *hw);
    snprintf(hw->name, sizeof hw->name, "this");
    snprintf(hw->path, sizeof hw->path, "(measured now)");
    char when[64], src[HW_SOURCE_LEN];
    const time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M", localtime(&now));
    membw_result r;
    for (int pass = 0; pass < 2; pass++) {
        const int t = pass == 0 ? 1 : n_threads;
        if (pass == 1 && n_threads == 1) break;
        seam_pool *pool = t > 1 ? pool_create(t, e) : NULL;
        if (t > 1 && !pool) return -1;
        const int rc = membw_measure(pool, 256u << 20, 5, &r, e);
        if (pass == 1 && rc == 0) {
            hw->v[HW_CPU_JOB_US] = cpu_speed_pool_job(pool);
            hw->set[HW_CPU_JOB_US] = true;
            snprintf(hw->source[HW_CPU_JOB_US], HW_SOURCE_LEN,
                     "measured: %s, an empty job on %d threads, median of 2001 (cpu_speed_pool_job)", when, t);
        }
        pool_destroy(pool);
        if (rc) return -1;
        const hw_key k = pass == 0 ? HW_CPU_READ_GBS_1 : HW_CPU_READ_GBS;
        hw->v[k] = membw_read_limit(&r);
        hw->set[k] = true;
        snprintf(hw->source[k], HW_SOURCE_LEN, "measured: %s, the read probe (src/cpu/membw.c) on %d thread%s, 256 MiB, median of 5",
                 when, t, t > 1 ? "s" : "");
    }
    if (n_threads == 1) {
        hw->v[HW_CPU_READ_GBS] = hw->v[HW_CPU_READ_GBS_1];
        hw->set[HW_CPU_READ_GBS] = true;
        snprintf(hw->source[HW_CPU_READ_GBS], HW_SOURCE_LEN, "%s", hw->source[HW_CPU_READ_GBS_1]);
    }
    hw->v[HW_CPU_THREADS] = n_threads;
    hw->set[HW_CPU_THREADS] = true;
    snprintf(hw->source[HW_CPU_THREADS], HW_SOURCE_LEN, "measured: the probes ran on the threads -t asks for");
    hw->v[HW_CPU_ATTN_GBS] = cpu_speed_attention();
    hw->set[HW_CPU_ATTN_GBS] = hw->v[HW_CPU_ATTN_GBS] > 0;
    snprintf(hw->source[HW_CPU_ATTN_GBS], HW_SOURCE_LEN,
             "measured: %s, one head over 512 cached positions, best of 31 (cpu_speed_attention)", when);
    // the weight types a Q4_K_M file (and the synthetic ones) holds
    static const uint32_t TYPES[] = {GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_Q4_0, GGML_TYPE_Q5_0,
                                     GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};
    const cpu_kernels *fast = cpu_kernels_get();
    for (size_t i = 0; i < sizeof TYPES / sizeof *TYPES; i++)
        if (cpu_speed_dot(TYPES[i], &fast, 1, &hw->cpu_dot_gbs[TYPES[i]]))
            return seam_fail(e, "out of memory measuring the dot kernels");
    snprintf(src, sizeof src, "measured: %s, the %s dot kernels on 256 rows in cache, best of 31 (cpu_speed_dot)", when,
             fast->name);
    snprintf(hw->dot_source, sizeof hw->dot_source, "%s", src);
    hw->has_cpu = true;
    return 0;
}

void hw_write(const hw_profile *hw, FILE *out) {
    fprintf(out, "name = %s\n", hw->name);
    for (int k = 0; k < HW_KEYS; k++)
        if (hw->set[k]) fprintf(out, "%s = %.6g  # %s\n", hw_key_name[k], hw->v[k], hw->source[k]);
    for (int t = 0; t < GGML_TYPE_COUNT; t++)
        if (hw->cpu_dot_gbs[t] > 0)
            fprintf(out, "cpu_dot_gbs.%s = %.4g  # %s\n", ggml_type_name((uint32_t)t), hw->cpu_dot_gbs[t], hw->dot_source);
}

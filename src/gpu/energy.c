// energy.c — NVML, loaded at run time, around a stretch of GPU work.
//
// Two readings, as NVML offers them: the board's energy counter
// (nvmlDeviceGetTotalEnergyConsumption, millijoules since the driver
// loaded; Volta on), read at the start and the end, which needs no
// sampling; and, every SAMPLE_MS, the board's power (milliwatts) and
// utilization (the percent of the last sample period in which a kernel
// ran), whose mean gives the busy share and, where the board has no energy
// counter, the energy.
#include "gpu/energy.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "base/common.h"

#ifdef SEAM_HAVE_CUDA

// NVML's C API, the calls seam makes (nvml.h's types, by value: an int
// status, 0 success; an opaque device handle).
typedef int nvml_return;
typedef void *nvml_device;
typedef struct {
    unsigned int gpu, memory;
} nvml_utilization;

typedef struct {
    nvml_return (*init)(void);
    nvml_return (*shutdown)(void);
    nvml_return (*handle)(unsigned int index, nvml_device *dev);
    nvml_return (*energy_mj)(nvml_device dev, unsigned long long *mj);
    nvml_return (*power_mw)(nvml_device dev, unsigned int *mw);
    nvml_return (*utilization)(nvml_device dev, nvml_utilization *u);
} nvml_api;

#ifdef SEAM_CUDA_EMU
// The emulated card's NVML (emu/nvml.cpp), linked in under NVML's names.
nvml_return nvmlInit_v2(void);
nvml_return nvmlShutdown(void);
nvml_return nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvml_device *dev);
nvml_return nvmlDeviceGetTotalEnergyConsumption(nvml_device dev, unsigned long long *mj);
nvml_return nvmlDeviceGetPowerUsage(nvml_device dev, unsigned int *mw);
nvml_return nvmlDeviceGetUtilizationRates(nvml_device dev, nvml_utilization *u);

static const char *nvml_load(nvml_api *a) {
    *a = (nvml_api){nvmlInit_v2, nvmlShutdown, nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetTotalEnergyConsumption,
                    nvmlDeviceGetPowerUsage, nvmlDeviceGetUtilizationRates};
    return NULL;
}
#else
#include <dlfcn.h>

static const char *nvml_load(nvml_api *a) {
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);  // kept open: the process's NVML
    if (!lib) return "NVML (libnvidia-ml.so.1, the driver's) is not installed";
    *(void **)&a->init = dlsym(lib, "nvmlInit_v2");
    *(void **)&a->shutdown = dlsym(lib, "nvmlShutdown");
    *(void **)&a->handle = dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
    *(void **)&a->energy_mj = dlsym(lib, "nvmlDeviceGetTotalEnergyConsumption");
    *(void **)&a->power_mw = dlsym(lib, "nvmlDeviceGetPowerUsage");
    *(void **)&a->utilization = dlsym(lib, "nvmlDeviceGetUtilizationRates");
    if (!a->init || !a->shutdown || !a->handle || !a->power_mw || !a->utilization)
        return "this NVML lacks a call seam needs (nvmlInit_v2, nvmlDeviceGetPowerUsage, ...)";
    return NULL;  // energy_mj may be missing (before Volta): the samples give the energy then
}
#endif

#define SAMPLE_MS 5

struct gpu_energy {
    nvml_api api;
    nvml_device dev;
    bool counter;
    unsigned long long mj0;
    double t0;
    pthread_t thread;
    pthread_mutex_t lock;
    bool stop;
    int samples;
    double sum_w, sum_busy;  // over the samples
};

static void *sampler(void *arg) {
    gpu_energy *m = arg;
    const struct timespec period = {0, SAMPLE_MS * 1000000L};
    for (;;) {
        nanosleep(&period, NULL);
        unsigned int mw = 0;
        nvml_utilization u = {0, 0};
        const bool ok = m->api.power_mw(m->dev, &mw) == 0 && m->api.utilization(m->dev, &u) == 0;
        pthread_mutex_lock(&m->lock);
        const bool stop = m->stop;
        if (ok) m->samples++, m->sum_w += mw / 1000.0, m->sum_busy += u.gpu / 100.0;
        pthread_mutex_unlock(&m->lock);
        if (stop) return NULL;
    }
}

gpu_energy *gpu_energy_start(const char **why) {
    gpu_energy *m = calloc(1, sizeof *m);
    if (!m) return *why = "out of memory", NULL;
    if ((*why = nvml_load(&m->api))) return free(m), NULL;
    if (m->api.init() != 0) return *why = "NVML did not start (nvmlInit)", free(m), NULL;
    if (m->api.handle(0, &m->dev) != 0) {
        m->api.shutdown();
        return *why = "NVML sees no device 0", free(m), NULL;
    }
    m->counter = m->api.energy_mj && m->api.energy_mj(m->dev, &m->mj0) == 0;
    pthread_mutex_init(&m->lock, NULL);
    m->t0 = seam_now();
    if (pthread_create(&m->thread, NULL, sampler, m)) {
        m->api.shutdown();
        pthread_mutex_destroy(&m->lock);
        return *why = "cannot start NVML's sampling thread", free(m), NULL;
    }
    return m;
}

void gpu_energy_stop(gpu_energy *m, gpu_energy_result *out) {
    unsigned long long mj1 = 0;
    const bool counter = m->counter && m->api.energy_mj(m->dev, &mj1) == 0 && mj1 >= m->mj0;
    const double t1 = seam_now();
    pthread_mutex_lock(&m->lock);
    m->stop = true;
    pthread_mutex_unlock(&m->lock);
    pthread_join(m->thread, NULL);
    const double seconds = t1 - m->t0, mean_w = m->samples ? m->sum_w / m->samples : 0;
    *out = (gpu_energy_result){.seconds = seconds, .counter = counter,
                               .busy = m->samples ? m->sum_busy / m->samples : 0};
    out->joules = counter ? (double)(mj1 - m->mj0) / 1000.0 : mean_w * seconds;
    out->watts = seconds > 0 ? out->joules / seconds : 0;
    m->api.shutdown();
    pthread_mutex_destroy(&m->lock);
    free(m);
}

#else

gpu_energy *gpu_energy_start(const char **why) {
    *why = "seam was built without CUDA";
    return NULL;
}

void gpu_energy_stop(gpu_energy *m, gpu_energy_result *out) { (void)m, (void)out; }

#endif

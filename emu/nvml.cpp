// nvml.cpp — NVML's calls seam makes (src/gpu/energy.c), on the emulated
// card: a power model of the board, idle watts while no kernel runs and
// busy watts while one does (the card's figures, or SEAM_EMU_WATTS=IDLE,BUSY),
// integrated over the emulator's busy clock into the energy counter, as a
// board's counter integrates its power. So the reports' arithmetic -- W,
// J/token, the busy share -- runs in CI, and a real GPU's readings replace
// the model's figures without another line of seam changing.
#include <stdio.h>
#include <stdlib.h>

#include <mutex>

#include "emu.h"

namespace {

enum { NVML_SUCCESS = 0, NVML_ERROR_UNINITIALIZED = 1, NVML_ERROR_INVALID_ARGUMENT = 2 };

struct nvml_utilization {
    unsigned int gpu, memory;
};

void watts(double *idle, double *busy) {
    const emu::card *c = emu::the_card();
    *idle = c->idle_watts, *busy = c->busy_watts;
    const char *v = getenv("SEAM_EMU_WATTS");
    double i, b;
    if (v && sscanf(v, "%lf,%lf", &i, &b) == 2 && i >= 0 && b >= i) *idle = i, *busy = b;
}

bool valid(void *dev) { return dev && dev == (void *)emu::the_card(); }

std::mutex last_mutex;
double last_elapsed = 0, last_busy = 0;  // at the last utilization reading

}  // namespace

extern "C" int nvmlInit_v2(void) { return emu::the_card() ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED; }

extern "C" int nvmlShutdown(void) { return NVML_SUCCESS; }

extern "C" int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **dev) {
    if (!emu::the_card()) return NVML_ERROR_UNINITIALIZED;
    if (index != 0 || !dev) return NVML_ERROR_INVALID_ARGUMENT;
    *dev = (void *)emu::the_card();
    return NVML_SUCCESS;
}

extern "C" int nvmlDeviceGetTotalEnergyConsumption(void *dev, unsigned long long *mj) {
    if (!valid(dev) || !mj) return NVML_ERROR_INVALID_ARGUMENT;
    double elapsed, busy, idle_w, busy_w;
    bool running;
    emu::busy_clock(&elapsed, &busy, &running);
    watts(&idle_w, &busy_w);
    *mj = (unsigned long long)(1000.0 * (idle_w * elapsed + (busy_w - idle_w) * busy));
    return NVML_SUCCESS;
}

// The power now: busy watts while a kernel runs, idle watts while none does.
extern "C" int nvmlDeviceGetPowerUsage(void *dev, unsigned int *mw) {
    if (!valid(dev) || !mw) return NVML_ERROR_INVALID_ARGUMENT;
    double elapsed, busy, idle_w, busy_w;
    bool running;
    emu::busy_clock(&elapsed, &busy, &running);
    watts(&idle_w, &busy_w);
    *mw = (unsigned int)(1000.0 * (running ? busy_w : idle_w));
    return NVML_SUCCESS;
}

// The percent of the time since the last reading some kernel ran, as NVML's
// utilization is over its last sample period.
extern "C" int nvmlDeviceGetUtilizationRates(void *dev, nvml_utilization *u) {
    if (!valid(dev) || !u) return NVML_ERROR_INVALID_ARGUMENT;
    double elapsed, busy;
    bool running;
    emu::busy_clock(&elapsed, &busy, &running);
    std::lock_guard<std::mutex> lock(last_mutex);
    const double de = elapsed - last_elapsed, db = busy - last_busy;
    last_elapsed = elapsed, last_busy = busy;
    u->gpu = de > 0 ? (unsigned int)(100.0 * (db < de ? db : de) / de + 0.5) : 0;
    u->memory = u->gpu;
    return NVML_SUCCESS;
}

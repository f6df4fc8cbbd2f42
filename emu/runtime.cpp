// runtime.cpp — the CUDA runtime calls seam makes, on the emulated card:
// the card itself, the emulator's state, errors, device queries and kernel
// attributes (memory.cpp and streams.cpp have the rest; runtime.h the map).
//
//   card      SEAM_EMU_DEVICE picks it: h200 (default), rtx3060 (a 12 GB
//             card, for -ngl auto and plans that do not fit), none (no device).
//   errors    each host thread has CUDA's last error: set by every call that
//             fails, cleared only by cudaGetLastError.
//
// What compute-sanitizer and CUDA would reject is a fault (emu::fault: a
// message naming the call, then abort), in all three files: an async copy
// from pageable memory, a copy past an allocation, a host pointer handed to
// a kernel, device memory touched by the host while the device is idle, a
// call that global-mode capture forbids, a kernel first launched inside a
// capture (where lazy loading would load its module), an unknown handle.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <thread>

#include "runtime.h"

namespace emu {

// ---------------------------------------------------------------- the cards

// ---------------------------------------------------------------- the cards

static const card cards[] = {
    // 143771 MiB as nvidia-smi shows an H200; HBM3e, 6144 bits, 4.8 TB/s
    // power: 700 W the SXM board's limit, ~75 W idle (nvidia-smi on an idle H200)
    {"h200", "NVIDIA H200 (emulated on the CPU)", 9, 0, 132, 143771ull << 20, 512ull << 20, 3125000, 6144, 48 << 10,
     227 << 10, 75.0, 700.0},
    // 12 GB GDDR6, 192 bits, 360 GB/s: the seed's card
    // power: 170 W the board's limit, ~15 W idle
    {"rtx3060", "NVIDIA GeForce RTX 3060 (emulated on the CPU)", 8, 6, 28, 12288ull << 20, 300ull << 20, 7500000, 192,
     48 << 10, 99 << 10, 15.0, 170.0},
};

state *S;
static std::once_flag init_once;
static thread_local cudaError_t last_error = cudaSuccess;

double now() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// Failed calls, by call and error, as compute-sanitizer counts them: it
// reports every CUDA call that returns an error (cudaErrorNotReady from a
// query is an answer, not an error) and, with --error-exitcode, fails the
// run for them. At exit the emulator prints the count and exits with
// FAILED_CALLS_EXIT, unless SEAM_EMU_API_ERRORS=expected says that the
// process fails calls on purpose (the kernels' tests: compute-sanitizer's
// --report-api-errors no, as bench/gpu-sanitize.sh runs them). On the card
// with no device nothing is counted: compute-sanitizer needs one to run.
static constexpr int FAILED_CALLS_EXIT = 86;
static std::mutex failed_mutex;
static std::map<std::pair<std::string, int>, int> *failed_calls;

cudaError_t status_of(const char *call, cudaError_t e) {
    if (e == cudaSuccess) return e;
    last_error = e;
    if (e != cudaErrorNotReady && S && S->gpu) {  // without a device compute-sanitizer has nothing to run on
        std::lock_guard<std::mutex> lock(failed_mutex);
        if (!failed_calls) failed_calls = new std::map<std::pair<std::string, int>, int>;
        (*failed_calls)[{call, (int)e}]++;
    }
    return e;
}

static void failed_calls_report() {
    std::lock_guard<std::mutex> lock(failed_mutex);
    if (!failed_calls || failed_calls->empty()) return;
    int total = 0;
    std::string list;
    for (const auto &f : *failed_calls) {
        total += f.second;
        list += (list.empty() ? "" : ", ") + f.first.first + ": " + cudaGetErrorName((cudaError_t)f.first.second) +
                " x" + std::to_string(f.second);
    }
    const char *v = getenv("SEAM_EMU_API_ERRORS");
    if (v && !strcmp(v, "expected")) return;
    fprintf(stderr,
            "seam-emu: %d CUDA call%s failed in this process (%s); compute-sanitizer reports each as an error and "
            "fails the run with --error-exitcode. A program that fails calls on purpose says so with "
            "SEAM_EMU_API_ERRORS=expected (compute-sanitizer: --report-api-errors no).\n",
            total, total == 1 ? "" : "s", list.c_str());
    fflush(stderr);
    _exit(FAILED_CALLS_EXIT);
}

static void init() {
    S = new state;  // never freed: stream threads may run until the process exits
    S->started = now();
    const char *id = getenv("SEAM_EMU_DEVICE");
    if (!id || !*id) id = "h200";
    for (const card &c : cards)
        if (!strcmp(c.id, id)) S->gpu = &c;
    if (!S->gpu && strcmp(id, "none")) {
        fprintf(stderr, "seam-emu: SEAM_EMU_DEVICE=%s is not a card this emulator knows (h200, rtx3060, none)\n", id);
        exit(2);
    }
    S->arena = (uint8_t *)mmap(NULL, ARENA_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (S->arena == MAP_FAILED) {
        fprintf(stderr, "seam-emu: cannot reserve %zu GiB of addresses for device memory\n",
                (size_t)(ARENA_BYTES >> 30));
        exit(2);
    }
    if (S->gpu) {  // the context's host memory, resident from now on (emu.h)
        void *context = malloc(CONTEXT_HOST_BYTES);
        if (!context) {
            fprintf(stderr, "seam-emu: no host memory for the context (%zu MiB)\n", CONTEXT_HOST_BYTES >> 20);
            exit(2);
        }
        memset(context, 1, CONTEXT_HOST_BYTES);
        S->context_host = context;
    }
    install_fault_handler();
    atexit(failed_calls_report);
    S->legacy = new CUstream_st;
    S->legacy->legacy = true;
    S->streams.insert(S->legacy);
    std::thread(worker, S->legacy).detach();
}

state &st() {
    std::call_once(init_once, init);
    return *S;
}

const card *the_card() { return st().gpu; }

bool racecheck_enabled() {
    static const bool on = [] {
        const char *v = getenv("SEAM_EMU_RACECHECK");
        return !v || strcmp(v, "0");
    }();
    return on;
}

}  // namespace emu

using namespace emu;

// ---------------------------------------------------------------- errors

extern "C" cudaError_t cudaGetLastError(void) {
    const cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

extern "C" cudaError_t cudaPeekAtLastError(void) { return last_error; }

static const struct {
    cudaError_t e;
    const char *name, *text;
} error_names[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInvalidSymbol, "cudaErrorInvalidSymbol", "invalid device symbol"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorIllegalState, "cudaErrorIllegalState", "the operation cannot be performed in the present state"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorHostMemoryAlreadyRegistered, "cudaErrorHostMemoryAlreadyRegistered",
     "part or all of the requested memory range is already mapped"},
    {cudaErrorHostMemoryNotRegistered, "cudaErrorHostMemoryNotRegistered",
     "pointer does not correspond to a registered memory region"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
};

extern "C" int seam_emu_captures_begun(void) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    return s.captures_begun;
}

extern "C" const char *cudaGetErrorName(cudaError_t e) {
    for (const auto &n : error_names)
        if (n.e == e) return n.name;
    return "cudaErrorUnknown";
}

extern "C" const char *cudaGetErrorString(cudaError_t e) {
    for (const auto &n : error_names)
        if (n.e == e) return n.text;
    return "unknown error";
}


// ---------------------------------------------------------------- devices

extern "C" cudaError_t cudaGetDeviceCount(int *count) {
    *count = st().gpu ? 1 : 0;
    return status(*count ? cudaSuccess : cudaErrorNoDevice);
}

static cudaError_t check_device(int device) {
    if (!st().gpu) return status(cudaErrorNoDevice);
    return status(device == 0 ? cudaSuccess : cudaErrorInvalidDevice);
}

extern "C" cudaError_t cudaSetDevice(int device) { return check_device(device); }

extern "C" cudaError_t cudaGetDevice(int *device) {
    *device = 0;
    return check_device(0);
}

extern "C" cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int device) {
    if (cudaError_t e = check_device(device)) return e;
    const card &c = *st().gpu;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", c.name);
    p->totalGlobalMem = c.total_bytes;
    p->sharedMemPerBlock = c.shared_per_block;
    p->sharedMemPerBlockOptin = c.shared_per_block_optin;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = INT32_MAX, p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->major = c.major, p->minor = c.minor;
    p->multiProcessorCount = c.sm_count;
    p->canMapHostMemory = 1;
    p->unifiedAddressing = 1;
    p->memoryBusWidth = c.bus_bits;
    p->hostRegisterSupported = 1;
    p->hostRegisterReadOnlySupported = 1;
    return cudaSuccess;
}

extern "C" cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device) {
    if (cudaError_t e = check_device(device)) return e;
    const card &c = *st().gpu;
    switch (attr) {
    case cudaDevAttrMemoryClockRate: *value = c.memory_clock_khz; break;
    case cudaDevAttrGlobalMemoryBusWidth: *value = c.bus_bits; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = c.shared_per_block; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = c.shared_per_block_optin; break;
    case cudaDevAttrHostRegisterReadOnlySupported: *value = 1; break;
    case cudaDevAttrMultiProcessorCount: *value = c.sm_count; break;
    case cudaDevAttrComputeCapabilityMajor: *value = c.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = c.minor; break;
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
    case cudaDevAttrWarpSize: *value = 32; break;
    default: fault("cudaDeviceGetAttribute: attribute %d is not emulated (add it to emu/runtime.cpp)", (int)attr);
    }
    return cudaSuccess;
}


// ---------------------------------------------------------------- kernels

extern "C" cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *attr, const void *func) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    if (!s.gpu) return status(cudaErrorNoDevice);
    memset(attr, 0, sizeof *attr);
    const kernel_resources *k = resources_of(func);  // nvcc's figures where the build has them
    attr->sharedSizeBytes = static_shared_of(func);
    attr->maxThreadsPerBlock = k && k->bound ? k->bound : 1024;
    attr->numRegs = k ? k->regs : 0;
    auto dyn = s.max_dynamic_shared.find(func);
    attr->maxDynamicSharedSizeBytes =
        dyn != s.max_dynamic_shared.end() ? dyn->second : s.gpu->shared_per_block - (int)attr->sharedSizeBytes;
    s.loaded.insert(func);  // as CUDA, asking about a kernel loads it
    return cudaSuccess;
}

extern "C" cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr, int value) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    if (!s.gpu) return status(cudaErrorNoDevice);
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
        fault("cudaFuncSetAttribute: attribute %d is not emulated", (int)attr);
    if (value < 0 || (size_t)value + static_shared_of(func) > (size_t)s.gpu->shared_per_block_optin)
        return status(cudaErrorInvalidValue);
    s.max_dynamic_shared[func] = value;
    s.loaded.insert(func);
    return cudaSuccess;
}

extern "C" cudaError_t cudaGetSymbolAddress(void **ptr, const void *symbol) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    const region *r = region_at(s.device, (uintptr_t)symbol);
    if (!r || r->begin != (uintptr_t)symbol || r->what.compare(0, 11, "__device__ "))
        return status(cudaErrorInvalidSymbol);
    *ptr = (void *)symbol;
    return cudaSuccess;
}

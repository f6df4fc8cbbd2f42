// memory.cpp — the emulated card's memory: device allocations, pinned host
// memory and the copies between them.
//
// Device allocations live in one reserved range of addresses that is never
// reused: each allocation on pages of its own, ending flush against an
// inaccessible page (a read or write past its end faults), a guard zone
// before it and CUDA's 256-byte granularity's slack after it (a canary
// checked after every kernel and copy; poisoned for AddressSanitizer),
// filled with 0xff (a NaN in f32 and f16) so that a read
// of what was never written shows; freed pages stay inaccessible. Live
// allocations are open only while the device has work (the access window),
// so that the host touching one faults. Pinned host memory (cudaHostAlloc,
// cudaHostRegister) is mapped with its device address equal to its host
// one, as under CUDA's unified addressing.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "runtime.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define EMU_ASAN 1
#endif

namespace emu {

static struct sigaction previous_segv;

const region *region_at(const std::map<uintptr_t, region> &m, uintptr_t p) {
    auto it = m.upper_bound(p);
    if (it == m.begin()) return nullptr;
    --it;
    const region &r = it->second;
    return p >= r.begin && (p < r.end || (p == r.begin && r.begin == r.end)) ? &r : nullptr;
}


// The host touched device memory (or a kernel touched freed memory or a gap).
static void on_segv(int sig, siginfo_t *si, void *uc) {
    const uintptr_t a = (uintptr_t)si->si_addr;
    if (S && a >= (uintptr_t)S->arena && a < (uintptr_t)S->arena + ARENA_BYTES) {
        const region *r = region_at(S->device, a);
        const region *f = r ? nullptr : region_at(S->freed, a);
        const region *near = nullptr, *before = nullptr;  // the allocation whose guard zone a lies in, or which ends below it
        for (const auto &kv : S->pages) {
            if (a >= kv.second.first && a < kv.second.second) near = &S->device.at(kv.first);
            if (a >= kv.second.second && a < kv.second.second + PAGE) before = &S->device.at(kv.first);
        }
        char msg[512];
        if (!r && near)
            snprintf(msg, sizeof msg, "out of bounds: device memory at %p is in the guard zone of %s (%zd bytes from "
                     "its start)", (void *)a, near->what.c_str(), (ssize_t)(a - near->begin));
        else if (!r && before)
            snprintf(msg, sizeof msg, "out of bounds: a read or write of device memory at %p, %zu bytes past the end "
                     "of %s (which ends flush against an inaccessible page)", (void *)a, (size_t)(a - before->end),
                     before->what.c_str());
        else if (r)
            snprintf(msg, sizeof msg, "the host touched device memory at %p, byte %zu of %s, while the device was "
                     "idle: device memory is for kernels and copies (copy it to the host first)",
                     (void *)a, (size_t)(a - r->begin), r->what.c_str());
        else if (f)
            snprintf(msg, sizeof msg, "use of freed device memory at %p, byte %zu of %s (freed)", (void *)a,
                     (size_t)(a - f->begin), f->what.c_str());
        else
            snprintf(msg, sizeof msg, "access to device memory at %p, outside every allocation", (void *)a);
        fault("%s", msg);
    }
    sigaction(SIGSEGV, &previous_segv, nullptr);  // not ours: whoever handled it before
    if (previous_segv.sa_flags & SA_SIGINFO && previous_segv.sa_sigaction) previous_segv.sa_sigaction(sig, si, uc);
}

void install_fault_handler() {
    struct sigaction sa = {};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, &previous_segv);
}

// ---------------------------------------------------------------- the access window

// Live allocations are accessible while the device has work and closed to
// everyone when it is idle and the host has seen it so: a host touching
// device memory then faults (on_segv). Workers never change the window.
void set_pages(const std::pair<uintptr_t, uintptr_t> &p, int prot) {
    mprotect((void *)p.first, p.second - p.first, prot);
}

void open_window(state &s) {
    if (s.window_open) return;
    for (auto &kv : s.pages) set_pages(kv.second, PROT_READ | PROT_WRITE);
    s.window_open = true;
}

bool device_idle(const state &s) {
    for (const CUstream_st *q : s.streams)
        if (q->busy || !q->queue.empty()) return false;
    return true;
}

void close_window_if_idle(state &s) {
    if (!s.window_open || !device_idle(s)) return;
    for (auto &kv : s.pages) set_pages(kv.second, PROT_NONE);
    s.window_open = false;
}

// ---------------------------------------------------------------- memory checks

// Where [p, p + n) lies, for a copy; faults when it runs past an
// allocation or into freed device memory.
side side_of(state &s, const void *p, size_t n, const char *call) {
    const uintptr_t a = (uintptr_t)p;
    if (a >= (uintptr_t)s.arena && a < (uintptr_t)s.arena + ARENA_BYTES) {
        const region *r = region_at(s.device, a);
        if (!r) {
            const region *f = region_at(s.freed, a);
            fault("%s: %p is %s", call, p, f ? ("freed device memory (" + f->what + ")").c_str()
                                             : "device memory outside every allocation");
        }
        if (a + n > r->end)
            fault("%s: %zu bytes at byte %zu of %s run %zu bytes past its end", call, n, (size_t)(a - r->begin),
                  r->what.c_str(), (size_t)(a + n - r->end));
        return SIDE_DEVICE;
    }
    if (const region *r = region_at(s.pinned, a)) {
        if (a + n > r->end)
            fault("%s: %zu bytes at byte %zu of %s run %zu bytes past its end", call, n, (size_t)(a - r->begin),
                  r->what.c_str(), (size_t)(a + n - r->end));
        return SIDE_PINNED;
    }
    return SIDE_PAGEABLE;
}

std::string describe_bytes(size_t n) {
    char b[64];
    snprintf(b, sizeof b, "%zu bytes", n);
    return b;
}

bool find_region(const void *p, size_t bytes, region *out) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    const uintptr_t a = (uintptr_t)p;
    const region *r = region_at(s.device, a);
    if (!r) r = region_at(s.pinned, a);
    if (!r || a + bytes > r->end + (r->begin == r->end)) return false;
    *out = *r;
    return true;
}

bool host_allocated(uintptr_t begin) {
    std::lock_guard<std::mutex> lock(S->m);
    return S->host_allocs.count(begin) > 0;
}

bool guards_intact(const region &r, std::string *why) {
    std::pair<uintptr_t, uintptr_t> pages;
    {
        std::lock_guard<std::mutex> lock(S->m);
        auto it = S->pages.find(r.begin);
        if (it == S->pages.end()) return true;  // freed meanwhile
        pages = it->second;
    }
#ifdef EMU_ASAN
    ASAN_UNPOISON_MEMORY_REGION((void *)pages.first, r.begin - pages.first);
    ASAN_UNPOISON_MEMORY_REGION((void *)r.end, pages.second - r.end);
#endif
    const uint8_t *bad = nullptr;
    for (uintptr_t a = pages.first; !bad && a < pages.second; a = a + 1 == r.begin ? r.end : a + 1)
        if (*(const uint8_t *)a != CANARY) bad = (const uint8_t *)a;
#ifdef EMU_ASAN
    ASAN_POISON_MEMORY_REGION((void *)pages.first, r.begin - pages.first);
    ASAN_POISON_MEMORY_REGION((void *)r.end, pages.second - r.end);
#endif
    if (!bad) return true;
    char b[512];
    if ((uintptr_t)bad < r.begin)
        snprintf(b, sizeof b, "%zu bytes before the start of %s", (size_t)(r.begin - (uintptr_t)bad), r.what.c_str());
    else
        snprintf(b, sizeof b, "byte %zu past the end of %s", (size_t)((uintptr_t)bad - r.end), r.what.c_str());
    *why = b;
    return false;
}

byte_ranges unwritten_in(const region &r) {
    std::lock_guard<std::mutex> lock(S->m);
    auto it = S->unwritten.find(r.begin);
    return it == S->unwritten.end() ? byte_ranges() : byte_ranges(it->second.begin(), it->second.end());
}

static std::pair<uintptr_t, uintptr_t> slack_of(const region &r) {
#ifdef EMU_ASAN
    return {r.end, r.end};  // poisoned: AddressSanitizer reports a read there
#else
    return {r.end, r.begin + round_up(r.end > r.begin ? r.end - r.begin : 1, GRANULE)};
#endif
}

void fill_unwritten(const region &r, const byte_ranges &gaps, bool again) {
    for (const auto &g : gaps) memset((void *)g.first, again ? UNWRITTEN_AGAIN : UNWRITTEN, g.second - g.first);
    const std::pair<uintptr_t, uintptr_t> slack = slack_of(r);
    memset((void *)slack.first, again ? UNWRITTEN_AGAIN : CANARY, slack.second - slack.first);
}

void mark_written(const void *p, size_t bytes) {
    const uintptr_t lo = (uintptr_t)p, hi = lo + bytes;
    std::lock_guard<std::mutex> lock(S->m);
    const region *r = region_at(S->device, lo);
    auto it = r ? S->unwritten.find(r->begin) : S->unwritten.end();
    if (it == S->unwritten.end()) return;
    std::map<uintptr_t, uintptr_t> &gaps = it->second;
    // every gap that overlaps [lo, hi) loses the overlap: what is left of it
    // below lo and above hi stays
    auto g = gaps.upper_bound(lo);
    if (g != gaps.begin() && std::prev(g)->second > lo) g = std::prev(g);
    while (g != gaps.end() && g->first < hi) {
        const uintptr_t a = g->first, b = g->second;
        g = gaps.erase(g);
        if (a < lo) gaps[a] = lo;
        if (b > hi) gaps[hi] = b;
    }
    if (gaps.empty()) S->unwritten.erase(it);
}

bool unwritten_restored(const region &r, std::string *why) {
    const std::pair<uintptr_t, uintptr_t> slack = slack_of(r);
    const uint8_t *bad = nullptr;
    for (uintptr_t a = slack.first; !bad && a < slack.second; a++)
        if (*(const uint8_t *)a != UNWRITTEN_AGAIN) bad = (const uint8_t *)a;
    fill_unwritten(r, unwritten_in(r), false);
    if (!bad) return true;
    char b[512];
    snprintf(b, sizeof b, "byte %zu past the end of %s", (size_t)((uintptr_t)bad - r.end), r.what.c_str());
    *why = b;
    return false;
}

// A device allocation of bytes (cudaMalloc, __device__ arrays): its own
// pages, its end flush against the page that stays inaccessible after it --
// at CUDA's granularity (256 bytes) -- so that a read past the end faults as
// a write does, where a guard zone sees only writes; the guard before it and
// the granularity's slack after it filled with the canary, the rest with 0xff.
void *allocate(state &s, size_t bytes, const std::string &what) {
    const size_t used = round_up(bytes ? bytes : 1, GRANULE);
    const size_t span = round_up(GUARD + used, PAGE);
    if (s.arena_used + span + PAGE > ARENA_BYTES) return nullptr;
    uint8_t *first = s.arena + s.arena_used;
    s.arena_used += span + PAGE;  // a page that stays inaccessible between allocations
    uint8_t *p = first + span - used;
    const std::pair<uintptr_t, uintptr_t> pages((uintptr_t)first, (uintptr_t)first + span);
    set_pages(pages, PROT_READ | PROT_WRITE);
    memset(first, CANARY, (size_t)(p - first));
    memset(p, UNWRITTEN, bytes);
    memset(p + bytes, CANARY, used - bytes);
#ifdef EMU_ASAN
    // the separating page too: a read in a granule's last, partly poisoned
    // 8 bytes is named by the shadow after it, which must say poisoned
    ASAN_POISON_MEMORY_REGION(first, (size_t)(p - first));
    ASAN_POISON_MEMORY_REGION(p + bytes, used - bytes + PAGE);
#endif
    if (!s.window_open) set_pages(pages, PROT_NONE);
    s.device[(uintptr_t)p] = {REGION_DEVICE, (uintptr_t)p, (uintptr_t)p + bytes, what};
    if (bytes) s.unwritten[(uintptr_t)p] = {{(uintptr_t)p, (uintptr_t)p + bytes}};
    s.pages[(uintptr_t)p] = pages;
    s.allocated += round_up(bytes, 256);
    return p;
}

void *device_array(size_t bytes, const char *name) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    void *p = allocate(s, bytes, std::string("__device__ ") + name);
    if (!p) fault("no device memory for __device__ %s", name);
    return p;
}

}  // namespace emu

using namespace emu;

extern "C" cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    refuse_in_capture(s, "cudaMemGetInfo");
    if (!s.gpu) return status(cudaErrorNoDevice);
    *total = s.gpu->total_bytes;
    const uint64_t used = s.gpu->context_bytes + s.allocated;
    *free_bytes = used < *total ? *total - used : 0;
    return cudaSuccess;
}

// ---------------------------------------------------------------- device memory

extern "C" cudaError_t cudaMalloc(void **ptr, size_t bytes) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    refuse_in_capture(s, "cudaMalloc");
    *ptr = nullptr;
    if (!s.gpu) return status(cudaErrorNoDevice);
    if (s.gpu->context_bytes + s.allocated + round_up(bytes, 256) > s.gpu->total_bytes)
        return status(cudaErrorMemoryAllocation);
    *ptr = allocate(s, bytes, "cudaMalloc of " + describe_bytes(bytes));
    return status(*ptr ? cudaSuccess : cudaErrorMemoryAllocation);
}

extern "C" cudaError_t cudaFree(void *ptr) {
    if (!ptr) return cudaSuccess;
    state &s = st();
    std::unique_lock<std::mutex> lock(s.m);
    refuse_in_capture(s, "cudaFree");
    auto it = s.device.find((uintptr_t)ptr);
    if (it == s.device.end() || !it->second.what.compare(0, 11, "__device__ ")) {
        const region *f = region_at(s.freed, (uintptr_t)ptr);
        fault("cudaFree(%p): %s", ptr, f && f->begin == (uintptr_t)ptr ? "freed twice" : "not a cudaMalloc'd pointer");
    }
    wait_idle(s, lock, nullptr);  // as CUDA, cudaFree waits for the device: no kernel may still read it
    const region r = it->second;
    const std::pair<uintptr_t, uintptr_t> pages = s.pages.at(r.begin);
    set_pages(pages, PROT_READ | PROT_WRITE);  // for the check: the window closed when the device went idle
    lock.unlock();
    std::string why;
    if (!guards_intact(r, &why)) fault("out of bounds, found at cudaFree: something wrote %s", why.c_str());
    lock.lock();
    s.pages.erase(r.begin);
    s.unwritten.erase(r.begin);
    s.device.erase(r.begin);
    s.accesses.erase(r.begin);
    s.freed[r.begin] = r;
    s.allocated -= round_up(r.end - r.begin, 256);
    set_pages(pages, PROT_NONE);
    madvise((void *)pages.first, pages.second - pages.first, MADV_DONTNEED);
    return cudaSuccess;
}

// ---------------------------------------------------------------- pinned host memory

static cudaError_t pin(state &s, void *p, size_t bytes, const std::string &what) {
    const uintptr_t a = (uintptr_t)p;
    auto it = s.pinned.lower_bound(a);
    if ((it != s.pinned.end() && it->first < a + bytes) || region_at(s.pinned, a))
        return status(cudaErrorHostMemoryAlreadyRegistered);
    s.pinned[a] = {REGION_PINNED, a, a + bytes, what};
    return cudaSuccess;
}

extern "C" cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned int flags) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    refuse_in_capture(s, "cudaHostAlloc");
    *ptr = nullptr;
    if (!s.gpu) return status(cudaErrorNoDevice);
    if (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined))
        return status(cudaErrorInvalidValue);
    // pinned memory is physical memory: no more than the machine has
    if (bytes > (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE))
        return status(cudaErrorMemoryAllocation);
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return status(cudaErrorMemoryAllocation);
    memset(p, UNWRITTEN, bytes);
    pin(s, p, bytes, "cudaHostAlloc of " + describe_bytes(bytes));
    s.host_allocs.insert((uintptr_t)p);
    *ptr = p;
    return cudaSuccess;
}

extern "C" cudaError_t cudaFreeHost(void *ptr) {
    if (!ptr) return cudaSuccess;
    state &s = st();
    std::unique_lock<std::mutex> lock(s.m);
    refuse_in_capture(s, "cudaFreeHost");
    if (!s.host_allocs.count((uintptr_t)ptr)) return status(cudaErrorInvalidValue);
    wait_idle(s, lock, nullptr);  // as CUDA: no copy may still read it
    const region r = s.pinned.at((uintptr_t)ptr);
    s.pinned.erase(r.begin);
    s.accesses.erase(r.begin);
    s.host_allocs.erase(r.begin);
    munmap(ptr, r.end > r.begin ? r.end - r.begin : 1);
    return cudaSuccess;
}

// Whether every page of [p, p + bytes) is mapped writable (/proc/self/maps).
static bool writable(const void *p, size_t bytes) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return true;
    uintptr_t want = (uintptr_t)p, end = want + bytes;
    char line[512];
    while (want < end && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || hi <= want || lo > want) continue;
        if (perms[1] != 'w') break;
        want = hi;
    }
    fclose(f);
    return want >= end;
}

extern "C" cudaError_t cudaHostRegister(void *ptr, size_t bytes, unsigned int flags) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    refuse_in_capture(s, "cudaHostRegister");
    if (!s.gpu) return status(cudaErrorNoDevice);
    if (!ptr || !bytes ||
        (flags & ~(unsigned)(cudaHostRegisterPortable | cudaHostRegisterMapped | cudaHostRegisterReadOnly)))
        return status(cudaErrorInvalidValue);
    if (!(flags & cudaHostRegisterReadOnly) && !writable(ptr, bytes)) return status(cudaErrorInvalidValue);
    return pin(s, ptr, bytes, "cudaHostRegister of " + describe_bytes(bytes));
}

extern "C" cudaError_t cudaHostUnregister(void *ptr) {
    state &s = st();
    std::unique_lock<std::mutex> lock(s.m);
    refuse_in_capture(s, "cudaHostUnregister");
    auto it = s.pinned.find((uintptr_t)ptr);
    if (it == s.pinned.end() || s.host_allocs.count((uintptr_t)ptr)) return status(cudaErrorHostMemoryNotRegistered);
    wait_idle(s, lock, nullptr);
    s.accesses.erase(it->first);
    s.pinned.erase(it);
    return cudaSuccess;
}

extern "C" cudaError_t cudaHostGetDevicePointer(void **dptr, void *host, unsigned int flags) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    *dptr = nullptr;
    if (flags || !region_at(s.pinned, (uintptr_t)host)) return status(cudaErrorInvalidValue);
    *dptr = host;  // unified addressing: the device sees pinned memory at its host address
    return cudaSuccess;
}

// ---------------------------------------------------------------- copies

static cudaError_t copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream,
                        bool async) {
    state &s = st();
    std::unique_lock<std::mutex> lock(s.m);
    const char *call = async ? "cudaMemcpyAsync" : "cudaMemcpy";
    if (!async) refuse_in_capture(s, call);
    if (!s.gpu) return status(cudaErrorNoDevice);
    if (!bytes) return cudaSuccess;
    if (!dst || !src) return status(cudaErrorInvalidValue);
    const side d = side_of(s, dst, bytes, call), from = side_of(s, src, bytes, call);
    const bool dst_dev = d == SIDE_DEVICE, src_dev = from == SIDE_DEVICE;
    const cudaMemcpyKind actual = src_dev ? (dst_dev ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                                          : (dst_dev ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
    if (kind != cudaMemcpyDefault && kind != actual &&
        !(actual == cudaMemcpyHostToHost && (kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToHost)))
        fault("%s: kind %d does not match the pointers (%s to %s)", call, (int)kind, src_dev ? "device" : "host",
              dst_dev ? "device" : "host");
    const bool pageable = (!dst_dev && d == SIDE_PAGEABLE) || (!src_dev && from == SIDE_PAGEABLE);
    if (async && pageable)
        fault("cudaMemcpyAsync of %zu bytes %s pageable host memory at %p: CUDA then copies synchronously (and a "
              "capture rejects it); pin it with cudaHostAlloc or cudaHostRegister",
              bytes, src_dev ? "to" : "from", src_dev ? dst : src);
    operation o;
    o.kind = operation::COPY;
    o.what = call;
    o.dst = dst, o.src = src, o.bytes = bytes;
    CUstream_st *q = stream_of(s, stream, call);
    enqueue(s, q, std::move(o));
    if (!async) wait_idle(s, lock, q);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    return copy(dst, src, bytes, kind, nullptr, false);
}

extern "C" cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                                       cudaStream_t stream) {
    return copy(dst, src, bytes, kind, stream, true);
}

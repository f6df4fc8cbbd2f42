// runtime.cpp — the CUDA runtime calls seam makes, on the emulated card.
//
//   card      SEAM_EMU_DEVICE picks it: h200 (default), rtx3060 (a 12 GB
//             card, for -ngl auto and plans that do not fit), none (no device).
//   memory    device allocations live in one reserved range of addresses
//             that is never reused: each allocation on pages of its own,
//             guard zones on both sides (a canary checked after every kernel
//             and copy; poisoned for AddressSanitizer), filled with 0xff (a
//             NaN in f32 and f16) so that a read of what was never written
//             shows; freed pages stay inaccessible. Pinned host memory
//             (cudaHostAlloc, cudaHostRegister) is mapped with its device
//             address equal to its host one, as under CUDA's unified
//             addressing.
//   streams   in-order queues, each run by an OS thread of its own, so work
//             runs asynchronously to the host as on a GPU. Events take the
//             host clock when their stream reaches them: emulated times are
//             CPU times. The legacy default stream (0) is one more queue;
//             seam's streams are non-blocking and never wait for it.
//   graphs    a capture records the stream's operations instead of running
//             them; a launch of the instantiated graph runs them in order.
//   order     each stream, each event and the host keep a vector clock (what
//             each stream has done that they are ordered after): an
//             operation that touches memory another stream wrote (or read,
//             when it writes) with no event or host synchronisation between
//             them is a fault when it is enqueued, whatever order the
//             threads then happen to run them in.
//   errors    each host thread has CUDA's last error: set by every call that
//             fails, cleared only by cudaGetLastError.
//
// What compute-sanitizer and CUDA would reject is a fault here (emu::fault:
// a message naming the call, then abort): an async copy from pageable
// memory, a copy past an allocation, a host pointer handed to a kernel,
// device memory touched by the host while the device is idle, a call that
// global-mode capture forbids, a kernel first launched inside a capture
// (where lazy loading would load its module), an unknown handle.
#include <cublas_v2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "emu.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define EMU_ASAN 1
#endif

// ---------------------------------------------------------------- handles

// What each stream (by id: 0 the legacy stream) had enqueued, as far as its
// holder is ordered after it.
struct vector_clock {
    std::vector<uint64_t> t;
    uint64_t at(int i) const { return (size_t)i < t.size() ? t[i] : 0; }
    void merge(const vector_clock &o) {
        if (o.t.size() > t.size()) t.resize(o.t.size());
        for (size_t i = 0; i < o.t.size(); i++) t[i] = o.t[i] > t[i] ? o.t[i] : t[i];
    }
    uint64_t tick(int i) {
        if ((size_t)i >= t.size()) t.resize(i + 1);
        return ++t[i];
    }
};

struct CUevent_st {
    uint64_t recorded = 0;   // records enqueued so far (each one a generation)
    uint64_t done = 0;       // of which the stream has reached this many
    double time = 0;         // the host clock at the last one reached
    bool captured = false;   // its last record ordered a capture, and ran nowhere
    vector_clock clock;      // its stream's, at the last record
};

struct CUgraph_st {
    std::vector<emu::operation> nodes;
};

struct CUgraphExec_st {
    std::vector<emu::operation> nodes;
};

struct CUstream_st {
    std::deque<emu::operation> queue;
    bool busy = false;        // its thread runs an operation now
    bool destroyed = false;   // cudaStreamDestroy: the thread leaves once the queue is empty
    bool legacy = false;
    int id = 0;                 // its index in the vector clocks
    vector_clock clock;         // what it is ordered after
    cudaStreamCaptureMode capture_mode = cudaStreamCaptureModeGlobal;
    CUgraph_st *capture = nullptr;  // the graph being captured, or none
};

namespace emu {

// ---------------------------------------------------------------- the cards

static const card cards[] = {
    // 143771 MiB as nvidia-smi shows an H200; HBM3e, 6144 bits, 4.8 TB/s
    {"h200", "NVIDIA H200 (emulated on the CPU)", 9, 0, 132, 143771ull << 20, 512ull << 20, 3125000, 6144, 48 << 10,
     227 << 10},
    // 12 GB GDDR6, 192 bits, 360 GB/s: the seed's card
    {"rtx3060", "NVIDIA GeForce RTX 3060 (emulated on the CPU)", 8, 6, 28, 12288ull << 20, 300ull << 20, 7500000, 192,
     48 << 10, 99 << 10},
};

namespace {

struct state {
    std::mutex m;
    std::condition_variable cv;
    const card *gpu = nullptr;
    // device memory
    uint8_t *arena = nullptr;
    size_t arena_used = 0;
    uint64_t allocated = 0;       // bytes of live allocations, as cudaMemGetInfo counts them
    bool window_open = false;     // live allocations accessible (the device has work)
    std::map<uintptr_t, region> device;     // live, by begin
    std::map<uintptr_t, region> freed;      // for the messages about them
    std::map<uintptr_t, std::pair<uintptr_t, uintptr_t>> pages;  // live allocation begin -> its pages
    std::map<uintptr_t, region> pinned;     // by begin
    std::set<uintptr_t> host_allocs;        // the pinned regions cudaHostAlloc made (the others are registered)
    // streams, events, graphs
    std::set<CUstream_st *> streams;
    CUstream_st *legacy = nullptr;
    std::set<CUevent_st *> events;
    std::vector<CUevent_st *> retired;      // destroyed events, kept: a queued wait or a graph may still read one
    std::set<CUgraph_st *> graphs;
    std::set<CUgraphExec_st *> execs;
    std::set<const void *> loaded;          // kernels whose module is loaded (launched, or asked about)
    std::map<const void *, int> max_dynamic_shared;  // cudaFuncSetAttribute's
    int global_captures = 0;
    int captures_begun = 0;
    // order between streams
    vector_clock host_clock;    // what the host has seen finish (its synchronisations)
    int next_stream_id = 1;
    struct access {
        int stream;             // -1: none
        uint64_t tick;
        std::string what;
    };
    struct history {
        access write = {-1, 0, ""};
        std::map<int, access> reads;  // since that write, by stream
    };
    std::map<uintptr_t, history> accesses;  // by region begin
};

state *S;
std::once_flag init_once;
thread_local cudaError_t last_error = cudaSuccess;
struct sigaction previous_segv;

constexpr size_t PAGE = 4096, GUARD = 256, ARENA_BYTES = 1ull << 40;
constexpr uint8_t CANARY = 0xa5, UNWRITTEN = 0xff;

double now() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

// A call's status: a failure becomes the thread's last error, as in CUDA.
cudaError_t status(cudaError_t e) {
    if (e != cudaSuccess) last_error = e;
    return e;
}

const region *region_at(const std::map<uintptr_t, region> &m, uintptr_t p) {
    auto it = m.upper_bound(p);
    if (it == m.begin()) return nullptr;
    --it;
    const region &r = it->second;
    return p >= r.begin && (p < r.end || (p == r.begin && r.begin == r.end)) ? &r : nullptr;
}

// The host touched device memory (or a kernel touched freed memory or a gap).
void on_segv(int sig, siginfo_t *si, void *uc) {
    const uintptr_t a = (uintptr_t)si->si_addr;
    if (S && a >= (uintptr_t)S->arena && a < (uintptr_t)S->arena + ARENA_BYTES) {
        const region *r = region_at(S->device, a);
        const region *f = r ? nullptr : region_at(S->freed, a);
        const region *near = nullptr;  // the allocation whose guard zone a lies in
        for (const auto &kv : S->pages)
            if (a >= kv.second.first && a < kv.second.second) near = &S->device.at(kv.first);
        char msg[512];
        if (!r && near)
            snprintf(msg, sizeof msg, "out of bounds: device memory at %p is in the guard zone of %s (%zd bytes from "
                     "its start)", (void *)a, near->what.c_str(), (ssize_t)(a - near->begin));
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

void worker(CUstream_st *s);

void init() {
    S = new state;  // never freed: stream threads may run until the process exits
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
    struct sigaction sa = {};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, &previous_segv);
    S->legacy = new CUstream_st;
    S->legacy->legacy = true;
    S->streams.insert(S->legacy);
    std::thread(worker, S->legacy).detach();
}

state &st() {
    std::call_once(init_once, init);
    return *S;
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

// ---------------------------------------------------------------- operations

// Runs o on the calling stream thread (the lock not held).
void execute(const operation &o) {
    switch (o.kind) {
    case operation::KERNEL: run_kernel(*o.kernel); break;
    case operation::COPY: {
        memcpy(o.dst, o.src, o.bytes);
        region r;
        std::string why;
        if (find_region(o.dst, 1, &r) && r.kind == REGION_DEVICE && !guards_intact(r, &why))
            fault("out of bounds: %s wrote %s", o.what.c_str(), why.c_str());
        break;
    }
    case operation::HOST: o.host(); break;
    case operation::GRAPH:
        for (const operation &n : o.graph->nodes) {
            execute(n);
            if (n.kind == operation::RECORD) {
                std::lock_guard<std::mutex> lock(S->m);
                n.event->time = now();
                n.event->done = o.graph_generation.at(n.event);
                S->cv.notify_all();
            }
        }
        break;
    case operation::RECORD: case operation::WAIT: break;  // the worker handles them under the lock
    }
}

void worker(CUstream_st *s) {
    std::unique_lock<std::mutex> lock(S->m);
    for (;;) {
        S->cv.wait(lock, [&] { return !s->queue.empty() || s->destroyed; });
        if (s->queue.empty()) break;
        operation o = std::move(s->queue.front());
        s->queue.pop_front();
        s->busy = true;
        if (o.kind == operation::WAIT) {
            S->cv.wait(lock, [&] { return o.event->done >= o.generation; });
        } else if (o.kind == operation::RECORD) {
            o.event->time = now();
            o.event->done = o.generation;
        } else {
            lock.unlock();
            execute(o);
            lock.lock();
        }
        s->busy = false;
        S->cv.notify_all();
    }
    S->streams.erase(s);
    delete s;
    S->cv.notify_all();
}

CUstream_st *stream_of(state &s, cudaStream_t h, const char *call) {
    if (!h || h == cudaStreamLegacy) return s.legacy;
    if (!s.streams.count(h) || h->destroyed) fault("%s: stream %p was destroyed or never created", call, (void *)h);
    return h;
}

CUevent_st *event_of(state &s, cudaEvent_t h, const char *call) {
    if (!s.events.count(h)) fault("%s: event %p was destroyed or never created", call, (void *)h);
    return h;
}

// A call global-mode capture forbids (it may synchronise, or allocate).
void refuse_in_capture(state &s, const char *call) {
    if (s.global_captures)
        fault("%s during a stream capture in global mode: CUDA refuses it (cudaErrorStreamCaptureUnsupported) and "
              "invalidates the capture; make the call before the capture begins", call);
}

// The regions o reads and writes (a kernel's non-const pointers count as
// writes, and so does every pointer inside a struct argument).
void accesses_of(state &s, const operation &o, std::vector<std::pair<const region *, bool>> &out) {
    auto add = [&](const void *p, bool write) {
        const region *r = region_at(s.device, (uintptr_t)p);
        if (!r) r = region_at(s.pinned, (uintptr_t)p);
        if (r) out.push_back({r, write});
    };
    switch (o.kind) {
    case operation::KERNEL:
        for (const pointer_arg &a : o.kernel->pointers)
            if (a.p) add(a.p, !(a.top_level && a.read_only));
        break;
    case operation::COPY: add(o.src, false), add(o.dst, true); break;
    case operation::HOST:
        for (const void *p : o.reads) add(p, false);
        for (const void *p : o.writes) add(p, true);
        break;
    case operation::GRAPH:
        for (const operation &n : o.graph->nodes) accesses_of(s, n, out);
        break;
    case operation::RECORD: case operation::WAIT: break;
    }
}

const char *stream_name(int id) {
    static thread_local char b[32];
    if (id == 0) return "the legacy default stream";
    snprintf(b, sizeof b, "stream %d", id);
    return b;
}

// o, about to be queued on q, against what other streams did to its memory.
void check_order(state &s, CUstream_st *q, const operation &o) {
    std::vector<std::pair<const region *, bool>> touched;
    accesses_of(s, o, touched);
    q->clock.merge(s.host_clock);
    const uint64_t tick = q->clock.tick(q->id);
    auto unordered = [&](const state::access &a) {
        return a.stream >= 0 && a.stream != q->id && q->clock.at(a.stream) < a.tick;
    };
    for (const auto &t : touched) {
        const state::history &h = s.accesses[t.first->begin];
        const state::access *clash = unordered(h.write) ? &h.write : nullptr;
        if (!clash && t.second)
            for (const auto &r : h.reads)
                if (unordered(r.second)) clash = &r.second;
        if (clash) {
            std::string other = stream_name(clash->stream);
            fault("%s on %s %s %s, which %s on %s %s with nothing ordering the two (record an event after the one "
                  "and make the other's stream wait for it, or synchronise in between)",
                  o.what.c_str(), stream_name(q->id), t.second ? "writes" : "reads", t.first->what.c_str(),
                  clash->what.c_str(), other.c_str(), clash == &h.write ? "wrote" : "read");
        }
    }
    for (const auto &t : touched) {
        state::history &h = s.accesses[t.first->begin];
        if (t.second) {
            h.write = {q->id, tick, o.what};
            h.reads.clear();
        } else {
            h.reads[q->id] = {q->id, tick, o.what};
        }
    }
}

// o onto stream q, or into its capture (checked for order when a graph of it is launched).
void enqueue(state &s, CUstream_st *q, operation o) {
    if (q->capture) {
        q->capture->nodes.push_back(std::move(o));
        return;
    }
    check_order(s, q, o);
    open_window(s);
    q->queue.push_back(std::move(o));
    s.cv.notify_all();
}

// Waits until q (NULL: every stream) has run what it holds; the host is
// then ordered after it.
void wait_idle(state &s, std::unique_lock<std::mutex> &lock, CUstream_st *q) {
    s.cv.wait(lock, [&] { return q ? q->queue.empty() && !q->busy : device_idle(s); });
    if (q) s.host_clock.merge(q->clock);
    for (const CUstream_st *other : s.streams)
        if (!q) s.host_clock.merge(other->clock);
    close_window_if_idle(s);
}

// ---------------------------------------------------------------- memory checks

enum side { SIDE_DEVICE, SIDE_PINNED, SIDE_PAGEABLE };

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

}  // namespace

const card *the_card() { return st().gpu; }

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

bool racecheck_enabled() {
    static const bool on = [] {
        const char *v = getenv("SEAM_EMU_RACECHECK");
        return !v || strcmp(v, "0");
    }();
    return on;
}

// A device allocation of bytes (cudaMalloc, __device__ arrays): its own
// pages, the guards filled with the canary, the rest with 0xff.
static void *allocate(state &s, size_t bytes, const std::string &what) {
    const size_t span = round_up(GUARD + bytes + GUARD, PAGE);
    if (s.arena_used + span + PAGE > ARENA_BYTES) return nullptr;
    uint8_t *first = s.arena + s.arena_used;
    s.arena_used += span + PAGE;  // a page that stays inaccessible between allocations
    uint8_t *p = first + GUARD;
    const std::pair<uintptr_t, uintptr_t> pages((uintptr_t)first, (uintptr_t)first + span);
    set_pages(pages, PROT_READ | PROT_WRITE);
    memset(first, CANARY, GUARD);
    memset(p, UNWRITTEN, bytes);
    memset(p + bytes, CANARY, span - GUARD - bytes);
#ifdef EMU_ASAN
    ASAN_POISON_MEMORY_REGION(first, GUARD);
    ASAN_POISON_MEMORY_REGION(p + bytes, span - GUARD - bytes);
#endif
    if (!s.window_open) set_pages(pages, PROT_NONE);
    s.device[(uintptr_t)p] = {REGION_DEVICE, (uintptr_t)p, (uintptr_t)p + bytes, what};
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

// ---------------------------------------------------------------- launches

void submit(const launch_site &site, const void *fn, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
            std::shared_ptr<const kernel_call> call, std::vector<pointer_arg> pointers) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    if (!s.gpu) return (void)status(cudaErrorNoDevice);
    const uint64_t threads = (uint64_t)block.x * block.y * block.z;
    if (threads == 0 || threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64 || grid.x == 0 ||
        grid.x > INT32_MAX || grid.y == 0 || grid.y > 65535 || grid.z == 0 || grid.z > 65535)
        return (void)status(cudaErrorInvalidConfiguration);
    // without opting in, what 48 KiB leave beside the static arrays
    auto dyn = s.max_dynamic_shared.find(fn);
    const size_t max_dynamic = dyn != s.max_dynamic_shared.end()
                                   ? (size_t)dyn->second
                                   : (size_t)s.gpu->shared_per_block - STATIC_SHARED_BOUND;
    if (smem > max_dynamic) return (void)status(cudaErrorInvalidValue);
    for (const pointer_arg &a : pointers) {
        if (!a.top_level || !a.p) continue;
        const uintptr_t p = (uintptr_t)a.p;
        const bool arena = p >= (uintptr_t)s.arena && p < (uintptr_t)s.arena + ARENA_BYTES;
        if (arena && !region_at(s.device, p))
            fault("argument %d of %s (%s:%d) is %p, %s", a.index, site.kernel, site.file, site.line, a.p,
                  region_at(s.freed, p) ? "freed device memory" : "device memory outside every allocation");
        if (!arena && !region_at(s.pinned, p))
            fault("argument %d of %s (%s:%d) is host memory at %p: a kernel takes device memory or pinned, mapped "
                  "host memory", a.index, site.kernel, site.file, site.line, a.p);
    }
    CUstream_st *q = stream_of(s, stream, site.kernel);
    if (!s.loaded.count(fn)) {
        if (s.global_captures)
            fault("the first launch of %s (%s:%d) is inside a stream capture: CUDA loads a kernel's module at its "
                  "first use (lazy loading), which a global-mode capture may reject; run the work once before "
                  "capturing it", site.kernel, site.file, site.line);
        s.loaded.insert(fn);
    }
    operation o;
    o.kind = operation::KERNEL;
    o.what = site.kernel;
    o.kernel = std::make_shared<kernel_launch>(
        kernel_launch{site, fn, grid, block, smem, std::move(call), std::move(pointers)});
    enqueue(s, q, std::move(o));
}

void enqueue_host(cudaStream_t stream, const char *what, std::function<void()> fn, std::vector<const void *> reads,
                  std::vector<const void *> writes) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    operation o;
    o.kind = operation::HOST;
    o.what = what;
    o.host = std::move(fn);
    o.reads = std::move(reads);
    o.writes = std::move(writes);
    enqueue(s, stream_of(s, stream, what), std::move(o));
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

extern "C" cudaError_t cudaDeviceSynchronize(void) {
    state &s = st();
    std::unique_lock<std::mutex> lock(s.m);
    refuse_in_capture(s, "cudaDeviceSynchronize");
    wait_idle(s, lock, nullptr);
    return cudaSuccess;
}

// ---------------------------------------------------------------- kernels

extern "C" cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *attr, const void *func) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    if (!s.gpu) return status(cudaErrorNoDevice);
    memset(attr, 0, sizeof *attr);
    attr->sharedSizeBytes = STATIC_SHARED_BOUND;
    attr->maxThreadsPerBlock = 1024;
    auto dyn = s.max_dynamic_shared.find(func);
    attr->maxDynamicSharedSizeBytes =
        dyn != s.max_dynamic_shared.end() ? dyn->second : s.gpu->shared_per_block - (int)STATIC_SHARED_BOUND;
    s.loaded.insert(func);  // as CUDA, asking about a kernel loads it
    return cudaSuccess;
}

extern "C" cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr, int value) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    if (!s.gpu) return status(cudaErrorNoDevice);
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
        fault("cudaFuncSetAttribute: attribute %d is not emulated", (int)attr);
    if (value < 0 || (size_t)value + STATIC_SHARED_BOUND > (size_t)s.gpu->shared_per_block_optin)
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

// ---------------------------------------------------------------- streams

extern "C" cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned int flags) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    *out = nullptr;
    if (!s.gpu) return status(cudaErrorNoDevice);
    if (flags != cudaStreamNonBlocking)
        fault("cudaStreamCreateWithFlags(%#x): only non-blocking streams are emulated (a blocking one would wait for "
              "the legacy default stream)", flags);
    CUstream_st *q = new CUstream_st;
    q->id = s.next_stream_id++;
    s.streams.insert(q);
    std::thread(worker, q).detach();
    *out = q;
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    CUstream_st *q = stream_of(s, stream, "cudaStreamDestroy");
    if (q->legacy) return status(cudaErrorInvalidResourceHandle);
    if (q->capture) fault("cudaStreamDestroy of a stream that is capturing");
    q->destroyed = true;  // its thread finishes the queue, then frees it
    s.cv.notify_all();
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    state &s = st();
    std::unique_lock<std::mutex> lock(s.m);
    CUstream_st *q = stream_of(s, stream, "cudaStreamSynchronize");
    if (q->capture) fault("cudaStreamSynchronize of a stream that is capturing: CUDA invalidates the capture");
    refuse_in_capture(s, "cudaStreamSynchronize");
    wait_idle(s, lock, q);
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    CUstream_st *q = stream_of(s, stream, "cudaStreamWaitEvent");
    CUevent_st *ev = event_of(s, event, "cudaStreamWaitEvent");
    if (flags) return status(cudaErrorInvalidValue);
    if (ev->captured || q->capture)
        fault("cudaStreamWaitEvent across a capture (an event recorded in one, or a capturing stream waiting): "
              "cross-stream capture is not emulated");
    if (!ev->recorded) return cudaSuccess;  // never recorded: nothing to wait for
    q->clock.merge(ev->clock);
    operation o;
    o.kind = operation::WAIT;
    o.what = "cudaStreamWaitEvent";
    o.event = ev, o.generation = ev->recorded;
    enqueue(s, q, std::move(o));
    return cudaSuccess;
}

// ---------------------------------------------------------------- events

extern "C" cudaError_t cudaEventCreate(cudaEvent_t *event) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    if (!s.gpu) return status(cudaErrorNoDevice);
    *event = new CUevent_st;
    s.events.insert(*event);
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventDestroy(cudaEvent_t event) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    CUevent_st *ev = event_of(s, event, "cudaEventDestroy");
    s.events.erase(ev);
    s.retired.push_back(ev);
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    CUevent_st *ev = event_of(s, event, "cudaEventRecord");
    CUstream_st *q = stream_of(s, stream, "cudaEventRecord");
    if (flags & ~(unsigned)cudaEventRecordExternal) return status(cudaErrorInvalidValue);
    if (flags & cudaEventRecordExternal && !q->capture) return status(cudaErrorInvalidValue);
    if (q->capture && !(flags & cudaEventRecordExternal)) {
        ev->captured = true;  // orders the capture's streams; records nothing when the graph runs
        return cudaSuccess;
    }
    operation o;
    o.kind = operation::RECORD;
    o.what = "cudaEventRecord";
    o.event = ev;
    if (!q->capture) {
        ev->captured = false;
        o.generation = ++ev->recorded;
        q->clock.merge(s.host_clock);
        ev->clock = q->clock;
    }
    enqueue(s, q, std::move(o));
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    return cudaEventRecordWithFlags(event, stream, 0);
}

extern "C" cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    state &s = st();
    std::unique_lock<std::mutex> lock(s.m);
    CUevent_st *ev = event_of(s, event, "cudaEventSynchronize");
    if (ev->captured) fault("cudaEventSynchronize of an event recorded inside a capture");
    const uint64_t want = ev->recorded;
    s.cv.wait(lock, [&] { return ev->done >= want; });
    s.host_clock.merge(ev->clock);
    close_window_if_idle(s);
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    CUevent_st *a = event_of(s, start, "cudaEventElapsedTime"), *b = event_of(s, end, "cudaEventElapsedTime");
    if (!a->recorded || !b->recorded || a->captured || b->captured) return status(cudaErrorInvalidResourceHandle);
    if (a->done < a->recorded || b->done < b->recorded) return status(cudaErrorNotReady);
    *ms = (float)((b->time - a->time) * 1e3);
    return cudaSuccess;
}

// ---------------------------------------------------------------- graphs

extern "C" cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *out) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    *out = stream_of(s, stream, "cudaStreamIsCapturing")->capture ? cudaStreamCaptureStatusActive
                                                                   : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    CUstream_st *q = stream_of(s, stream, "cudaStreamBeginCapture");
    if (q->legacy) return status(cudaErrorStreamCaptureUnsupported);
    if (q->capture) return status(cudaErrorIllegalState);
    q->capture = new CUgraph_st;
    q->capture_mode = mode;
    if (mode == cudaStreamCaptureModeGlobal) s.global_captures++;
    s.captures_begun++;
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    CUstream_st *q = stream_of(s, stream, "cudaStreamEndCapture");
    *graph = nullptr;
    if (!q->capture) return status(cudaErrorIllegalState);
    if (q->capture_mode == cudaStreamCaptureModeGlobal) s.global_captures--;
    const char *fail = getenv("SEAM_EMU_FAIL_CAPTURE");  // a test's injection (emu_hooks.h)
    if (fail && !strcmp(fail, "1")) {  // as CUDA ends a capture that something invalidated: no graph
        delete q->capture;
        q->capture = nullptr;
        return status(cudaErrorStreamCaptureInvalidated);
    }
    *graph = q->capture;
    s.graphs.insert(q->capture);
    q->capture = nullptr;
    return cudaSuccess;
}

extern "C" cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    if (!s.graphs.count(graph)) fault("cudaGraphInstantiate: graph %p was destroyed or never made", (void *)graph);
    if (flags) return status(cudaErrorInvalidValue);
    *exec = new CUgraphExec_st{graph->nodes};
    s.execs.insert(*exec);
    return cudaSuccess;
}

extern "C" cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    if (!s.graphs.erase(graph)) fault("cudaGraphDestroy: graph %p was destroyed or never made", (void *)graph);
    delete graph;
    return cudaSuccess;
}

extern "C" cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    state &s = st();
    std::unique_lock<std::mutex> lock(s.m);
    if (!s.execs.erase(exec)) fault("cudaGraphExecDestroy: %p was destroyed or never made", (void *)exec);
    wait_idle(s, lock, nullptr);  // a queued launch of it may still run
    delete exec;
    return cudaSuccess;
}

extern "C" cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    if (!s.execs.count(exec)) fault("cudaGraphLaunch: %p was destroyed or never made", (void *)exec);
    CUstream_st *q = stream_of(s, stream, "cudaGraphLaunch");
    if (q->capture) fault("cudaGraphLaunch into a capture (a child graph) is not emulated");
    operation o;
    o.kind = operation::GRAPH;
    o.what = "cudaGraphLaunch";
    o.graph = exec;
    for (const operation &n : exec->nodes)
        if (n.kind == operation::RECORD) {
            n.event->captured = false;
            o.graph_generation[n.event] = ++n.event->recorded;
        }
    enqueue(s, q, std::move(o));
    for (const operation &n : exec->nodes)  // ordered after the whole graph: a bound, not each node's place
        if (n.kind == operation::RECORD) n.event->clock = q->clock;
    return cudaSuccess;
}

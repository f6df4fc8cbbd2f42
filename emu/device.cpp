// device.cpp — the emulated device runs a launch: block after block on the
// stream's OS thread, each block's threads as fibers (Boost.Context), which
// meet at the points where a GPU's threads do:
//   - a warp's shuffle: all 32 lanes at the same __shfl_xor_sync, full mask;
//   - a block's barrier: every thread of the block at the same __syncthreads.
// Anything else is a fault, reported with the kernel, block and thread, as
// compute-sanitizer's synccheck would: a lane that exited before its warp's
// shuffle, a barrier that some threads never reach, threads at different
// barriers, a partial mask.
//
// A block runs warp by warp: warp 0's lanes until all of them wait (at a
// barrier) or have left, then warp 1's, ... This is one order a GPU may run
// them in; the race check runs the grid again with blocks, warps and lanes
// reversed and requires what the kernel wrote to be bitwise the same, so a
// missing barrier, or two threads writing one address, shows (racecheck's
// job). Shared memory is per block, sized as launched, filled with 0xff (a
// NaN) when the block starts and fenced by guard zones checked when it ends.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/context/fiber.hpp>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "emu.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#endif

namespace bctx = boost::context;

namespace emu {

namespace {

thread_local uint3 this_thread_index, this_block_index;
thread_local dim3 this_block_dim, this_grid_dim;

enum thread_status { RUNNABLE, AT_SHUFFLE, AT_BARRIER, EXITED };

struct code_site {
    const char *file;
    int line;
    bool operator==(const code_site &o) const { return line == o.line && (file == o.file || !strcmp(file, o.file)); }
};

struct emu_thread {
    uint3 idx;
    int linear;
    thread_status status;
    bctx::fiber fiber;      // the thread, while it is suspended
    bctx::fiber scheduler;  // the block's scheduler, while the thread runs
    code_site at;           // the barrier or shuffle it waits at
    uint64_t value;         // its shuffle's operand; the result when it resumes
    unsigned mask;
    int lane_mask, width;
    void *stack_bottom;
    size_t stack_size;
#ifdef EMU_ASAN
    void *fake_stack;
#endif
};

// ---------------------------------------------------------------- stacks

// One stack per thread of a block (1024 at most), made once per OS thread
// and reused by every block: 256 KiB of address space each, committed as
// touched, a guard page below.
constexpr size_t STACK_BYTES = 256 << 10, STACK_GUARD = 4096;
constexpr int MAX_THREADS = 1024;

struct stack_pool {
    std::vector<uint8_t *> bottoms;
    void *get(int i) {
        while ((int)bottoms.size() <= i) {
            void *p = mmap(NULL, STACK_BYTES + STACK_GUARD, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (p == MAP_FAILED) fault("cannot map a %zu KiB stack for an emulated thread", STACK_BYTES >> 10);
            mprotect(p, STACK_GUARD, PROT_NONE);
            bottoms.push_back((uint8_t *)p + STACK_GUARD);
        }
        return bottoms[i];
    }
};

// Hands Boost the pool's stack; the pool keeps it when the fiber ends.
struct pooled_stack {
    void *bottom;
    bctx::stack_context allocate() {
        bctx::stack_context sc;
        sc.size = STACK_BYTES;
        sc.sp = (uint8_t *)bottom + STACK_BYTES;
        return sc;
    }
    void deallocate(bctx::stack_context &) {}
};

// ---------------------------------------------------------------- shared memory

constexpr size_t SHARED_GUARD = 64;
constexpr uint8_t SHARED_CANARY = 0xcd;

// A block's shared memory: the dynamic part first, then each static array
// as the block first reaches its declaration, each followed by a guard.
struct shared_arena {
    uint8_t *base = nullptr;
    size_t capacity = 0, used = 0, static_bytes = 0, dynamic_bytes = 0;
    uint8_t fill = UNWRITTEN;  // what its bytes hold before a thread writes them (the pass's)
    struct slot {
        const void *site;  // NULL: the dynamic part
        uint8_t *p;
        size_t bytes;
        const char *name;
    };
    std::vector<slot> slots;

    void reserve(size_t bytes) {
        if (capacity >= bytes) return;
        capacity = bytes;
        base = (uint8_t *)mmap(NULL, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED) fault("cannot map %zu bytes of emulated shared memory", capacity);
    }
    uint8_t *take(const void *site, size_t bytes, size_t align, const char *name) {
        size_t at = (used + align - 1) / align * align;
        if (at + bytes + SHARED_GUARD > capacity) return nullptr;
        uint8_t *p = base + at;
        memset(p, fill, bytes);
        memset(p + bytes, SHARED_CANARY, SHARED_GUARD);
#ifdef EMU_ASAN
        ASAN_POISON_MEMORY_REGION(p + bytes, SHARED_GUARD);
#endif
        used = at + bytes + SHARED_GUARD;
        slots.push_back({site, p, bytes, name});
        return p;
    }
    void begin_block(size_t dynamic, uint8_t unwritten) {
        used = 0;
        fill = unwritten;
        slots.clear();
        static_bytes = 0;
        dynamic_bytes = dynamic;
        if (dynamic) take(nullptr, dynamic, 16, "dynamic shared memory");
    }
    // The first overrun guard, or NULL.
    const slot *overrun() const {
        for (const slot &s : slots) {
#ifdef EMU_ASAN
            ASAN_UNPOISON_MEMORY_REGION(s.p + s.bytes, SHARED_GUARD);
#endif
            for (size_t i = 0; i < SHARED_GUARD; i++)
                if (s.p[s.bytes + i] != SHARED_CANARY) return &s;
        }
        return nullptr;
    }
};

// ---------------------------------------------------------------- a block

struct block_run {
    const kernel_launch *L = nullptr;
    bool reverse = false;
    uint8_t unwritten = UNWRITTEN;  // what its shared memory holds before a thread writes it
    std::vector<emu_thread> threads = std::vector<emu_thread>(MAX_THREADS);  // never reallocated: fibers hold them
    int n_threads = 0;              // of which the block has these
    int n_fibers = 0;               // of which this many have their fiber (made once, reused by every block)
    emu_thread *running = nullptr;  // the thread whose fiber runs now
    stack_pool stacks;
    shared_arena shared;
    const card *gpu = nullptr;
    size_t static_shared = 0;         // what cudaFuncGetAttributes reports for the kernel
    void *os_stack_bottom = nullptr;  // the scheduler's stack, for ASan's fiber switches
    size_t os_stack_size = 0;
};

thread_local block_run *this_block;            // the block the calling OS thread runs, if any
thread_local const kernel_launch *this_launch;  // the launch the calling stream's thread runs, if any

void resume(block_run &b, emu_thread &t) {
    b.running = &t;
    this_thread_index = t.idx;
#ifdef EMU_ASAN
    void *fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, t.stack_bottom, t.stack_size);
#endif
    t.fiber = std::move(t.fiber).resume();
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
    b.running = nullptr;
}

// From the running thread back to its block's scheduler, until resumed.
void suspend(block_run &b, emu_thread &t) {
#ifdef EMU_ASAN
    __sanitizer_start_switch_fiber(&t.fake_stack, b.os_stack_bottom, b.os_stack_size);
#endif
    t.scheduler = std::move(t.scheduler).resume();
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(t.fake_stack, nullptr, nullptr);
#endif
}

emu_thread &running_thread(const char *what) {
    if (!this_block || !this_block->running) fault("%s called outside a kernel", what);
    return *this_block->running;
}

const char *where(code_site s) {
    static thread_local char buf[256];
    const char *base = strrchr(s.file, '/');
    snprintf(buf, sizeof buf, "%s:%d", base ? base + 1 : s.file, s.line);
    return buf;
}

// Runs warp w's lanes until none can go on: each until it waits or leaves,
// and a shuffle all 32 lanes reached is exchanged and they go on.
void run_warp(block_run &b, int w) {
    const int n = b.n_threads, lo = 32 * w, hi = lo + 32 < n ? lo + 32 : n, count = hi - lo;
    for (;;) {
        for (int k = 0; k < count; k++) {
            emu_thread &t = b.threads[b.reverse ? hi - 1 - k : lo + k];
            if (t.status == RUNNABLE) resume(b, t);
        }
        const emu_thread *first = nullptr;
        for (int i = lo; i < hi && !first; i++)
            if (b.threads[i].status == AT_SHUFFLE) first = &b.threads[i];
        if (!first) return;
        b.running = const_cast<emu_thread *>(first);  // the faults below name this thread
        if (count < 32)
            fault("__shfl_xor_sync at %s in a warp of %d threads (a block of %d): a full-mask shuffle needs 32 lanes",
                  where(first->at), count, n);
        for (int i = lo; i < hi; i++) {
            const emu_thread &t = b.threads[i];
            if (t.status == EXITED)
                fault("__shfl_xor_sync at %s: lane %d of the warp has exited (a lane that leaves early must leave "
                      "with its whole warp)", where(first->at), i - lo);
            if (t.status == AT_BARRIER)
                fault("__shfl_xor_sync at %s while lane %d of the warp waits at __syncthreads at %s", where(first->at),
                      i - lo, where(t.at));
            if (!(t.at == first->at))
                fault("the lanes of one warp are at different shuffles: %s and, lane %d, %s", where(first->at), i - lo,
                      where(t.at));
            if (t.mask != 0xffffffffu)
                fault("__shfl_xor_sync at %s with mask %#x: only full-warp masks are emulated (all 32 lanes)",
                      where(t.at), t.mask);
            if (t.width < 1 || t.width > 32 || (t.width & (t.width - 1)))
                fault("__shfl_xor_sync at %s: width %d is not a power of two up to 32", where(t.at), t.width);
        }
        uint64_t got[32];
        for (int l = 0; l < 32; l++) {
            const emu_thread &t = b.threads[lo + l];
            int src = l ^ t.lane_mask;
            if (src >= (l / t.width + 1) * t.width) src = l;  // a later group: the lane's own value, as CUDA gives
            got[l] = b.threads[lo + src].value;
        }
        for (int l = 0; l < 32; l++) {
            b.threads[lo + l].value = got[l];
            b.threads[lo + l].status = RUNNABLE;
        }
        b.running = nullptr;
    }
}

// Thread i's fiber: it runs the block's kernel as thread i, then waits as
// exited until the next block of a launch resumes it -- one fiber per
// thread slot for the life of the OS thread, not one per thread of every block.
void make_fiber(block_run &b, int i) {
    emu_thread &t = b.threads[i];
    t.stack_bottom = b.stacks.get(i);
    t.stack_size = STACK_BYTES;
    t.fiber = bctx::fiber(std::allocator_arg, pooled_stack{t.stack_bottom}, [&b, &t](bctx::fiber &&sched) {
#ifdef EMU_ASAN
        __sanitizer_finish_switch_fiber(nullptr, (const void **)&b.os_stack_bottom, &b.os_stack_size);
#endif
        t.scheduler = std::move(sched);
        for (;;) {
            b.L->call->run();
            t.status = EXITED;
            suspend(b, t);
        }
        return std::move(t.scheduler);
    });
}

void run_block(block_run &b, uint3 bidx) {
    const kernel_launch &L = *b.L;
    const int n = (int)(L.block.x * L.block.y * L.block.z), n_warps = (n + 31) / 32;
    this_block_index = bidx;
    b.shared.begin_block(L.smem, b.unwritten);
    b.n_threads = n;
    for (; b.n_fibers < n; b.n_fibers++) make_fiber(b, b.n_fibers);
    for (int i = 0; i < n; i++) {
        emu_thread &t = b.threads[i];
        t.linear = i;
        t.idx = make_uint3(i % L.block.x, i / L.block.x % L.block.y, i / (L.block.x * L.block.y));
        t.status = RUNNABLE;
    }
    for (;;) {
        for (int k = 0; k < n_warps; k++) run_warp(b, b.reverse ? n_warps - 1 - k : k);
        int exited = 0, waiting = 0;
        emu_thread *first_wait = nullptr, *first_exit = nullptr;
        for (int i = 0; i < n; i++) {
            emu_thread &t = b.threads[i];
            if (t.status == EXITED) exited++, first_exit = first_exit ? first_exit : &t;
            else waiting++, first_wait = first_wait ? first_wait : &t;
        }
        if (!waiting) break;
        b.running = first_wait;
        if (exited)
            fault("__syncthreads at %s is reached by %d of the block's %d threads: %d have exited (thread %d "
                  "first), so the barrier never completes",
                  where(first_wait->at), waiting, n, exited, first_exit->linear);
        for (int i = 0; i < n; i++)
            if (!(b.threads[i].at == first_wait->at))
                fault("the threads of one block wait at different barriers: %s and, thread %d, %s",
                      where(first_wait->at), i, where(b.threads[i].at));
        b.running = nullptr;
        for (int i = 0; i < n; i++) b.threads[i].status = RUNNABLE;
    }
    if (const shared_arena::slot *s = b.shared.overrun())
        fault("shared memory overrun: a thread wrote past the %zu bytes of %s", s->bytes, s->name);
}

// ---------------------------------------------------------------- the grid over OS threads
//
// The blocks of a launch are independent (a block cannot wait for another),
// so they are shared out among OS threads -- the stream's own and
// SEAM_EMU_THREADS - 1 helpers (default: one per core) -- each with its own
// fibers and shared memory, in chunks of consecutive blocks taken in order
// (from the last chunk, each run backwards, on the race check's reverse
// pass). The race check's two passes run on the stream's thread alone, so
// that each pass writes in one known order. One launch at a time holds the
// helpers: kernels of two streams take turns, an order a GPU may choose too.

struct grid_pool {
    std::mutex one_launch;
    std::mutex m;
    std::condition_variable cv;
    const kernel_launch *L = nullptr;
    bool reverse = false;
    uint8_t unwritten = UNWRITTEN;
    uint64_t n_blocks = 0, chunk = 1, generation = 0;
    std::atomic<uint64_t> next_chunk{0};
    int helpers = 0, working = 0;
};

// One per OS thread, kept for the process's life (its fibers never end),
// and listed so that it stays reachable when its thread (a destroyed
// stream's) has ended.
block_run &this_runner() {
    static std::mutex list_mutex;
    static std::vector<block_run *> *all = new std::vector<block_run *>;
    static thread_local block_run *runner;
    if (!runner) {
        runner = new block_run;
        std::lock_guard<std::mutex> lock(list_mutex);
        all->push_back(runner);
    }
    return *runner;
}

// Runs chunks of p's launch until none is left.
void take_blocks(grid_pool &p) {
    block_run &b = this_runner();
    const kernel_launch &L = *p.L;
    b.gpu = the_card();
    b.L = &L;
    b.static_shared = static_shared_of(L.fn);
    b.reverse = p.reverse;
    b.unwritten = p.unwritten;
    b.shared.reserve((size_t)b.gpu->shared_per_block_optin + 64 * SHARED_GUARD + 4096);
    this_block = &b;
    this_block_dim = L.block;
    this_grid_dim = L.grid;
    const uint64_t n_chunks = (p.n_blocks + p.chunk - 1) / p.chunk;
    for (uint64_t c; (c = p.next_chunk.fetch_add(1)) < n_chunks;) {
        const uint64_t chunk = p.reverse ? n_chunks - 1 - c : c, lo = chunk * p.chunk;
        const uint64_t hi = lo + p.chunk < p.n_blocks ? lo + p.chunk : p.n_blocks;
        for (uint64_t k = lo; k < hi; k++) {
            const uint64_t i = p.reverse ? hi - 1 - (k - lo) : k;
            run_block(b, make_uint3((unsigned)(i % L.grid.x), (unsigned)(i / L.grid.x % L.grid.y),
                                    (unsigned)(i / ((uint64_t)L.grid.x * L.grid.y))));
        }
    }
    this_block = nullptr;
    b.L = nullptr;
}

void helper(grid_pool *p) {
    std::unique_lock<std::mutex> lock(p->m);
    for (uint64_t seen = 0;; seen = p->generation) {
        p->cv.wait(lock, [&] { return p->generation != seen; });
        lock.unlock();
        take_blocks(*p);
        lock.lock();
        if (--p->working == 0) p->cv.notify_all();
    }
}

grid_pool &the_pool() {
    static grid_pool *p = [] {
        grid_pool *g = new grid_pool;  // never freed: its helpers wait until the process ends
        const char *v = getenv("SEAM_EMU_THREADS");
        const long cores = sysconf(_SC_NPROCESSORS_ONLN);
        const int threads = v && atoi(v) > 0 ? atoi(v) : cores > 0 ? (int)cores : 1;
        g->helpers = threads - 1;
        for (int i = 0; i < g->helpers; i++) std::thread(helper, g).detach();
        return g;
    }();
    return *p;
}

// The blocks of L in order (or reverse order), their shared memory filled
// with `unwritten` at the start of each; on the stream's thread alone when
// alone, so that blocks that race write in a known order.
void run_grid(const kernel_launch &L, bool reverse, uint8_t unwritten, bool alone) {
    grid_pool &p = the_pool();
    std::lock_guard<std::mutex> one(p.one_launch);
    {
        std::lock_guard<std::mutex> lock(p.m);
        p.L = &L;
        p.reverse = reverse;
        p.unwritten = unwritten;
        p.n_blocks = (uint64_t)L.grid.x * L.grid.y * L.grid.z;
        const uint64_t per_thread = p.n_blocks / (uint64_t)(p.helpers + 1);
        p.chunk = per_thread / 8 > 1 ? per_thread / 8 : 1;  // enough chunks to even the threads out
        p.next_chunk = 0;
        if (!alone) {
            p.working = p.helpers;
            p.generation++;
            p.cv.notify_all();
        }
    }
    take_blocks(p);
    std::unique_lock<std::mutex> lock(p.m);
    p.cv.wait(lock, [&] { return p.working == 0; });
}

// A region a kernel may write, its bytes before the kernel ran and after
// the forward pass.
struct target {
    region r;
    std::vector<uint8_t> before, forward;
};

// A device allocation a kernel may read, and its bytes nobody wrote.
struct unwritten_bytes {
    region r;
    byte_ranges gaps;
};

// Whether byte a lies in one of gaps.
bool in_gaps(const byte_ranges &gaps, uintptr_t a) {
    auto it = std::upper_bound(gaps.begin(), gaps.end(), std::make_pair(a, UINTPTR_MAX));
    return it != gaps.begin() && a < std::prev(it)->second;
}

}  // namespace

// ---------------------------------------------------------------- the kernel's side

uint3 thread_index() { return this_thread_index; }
bool in_kernel() { return this_block && this_block->running; }
uint3 block_index() { return this_block_index; }
dim3 block_dim() { return this_block_dim; }
dim3 grid_dim() { return this_grid_dim; }

void syncthreads(const char *file, int line) {
    emu_thread &t = running_thread("__syncthreads");
    t.status = AT_BARRIER;
    t.at = {file, line};
    suspend(*this_block, t);
}

uint64_t shuffle_xor(uint64_t bits, unsigned mask, int lane_mask, int width, const char *file, int line) {
    emu_thread &t = running_thread("__shfl_xor_sync");
    t.status = AT_SHUFFLE;
    t.at = {file, line};
    t.value = bits, t.mask = mask, t.lane_mask = lane_mask, t.width = width;
    suspend(*this_block, t);
    return t.value;
}

void *shared_static(const void *site, size_t bytes, size_t align, const char *name) {
    running_thread("a __shared__ declaration");
    block_run &b = *this_block;
    for (const shared_arena::slot &s : b.shared.slots)
        if (s.site == site) return s.p;
    b.shared.static_bytes += bytes;
    if (b.shared.static_bytes > b.static_shared)
        fault("%zu bytes of static shared memory (with %s): more than the %zu cudaFuncGetAttributes reports (nvcc's "
              "count, or emu::STATIC_SHARED_BOUND for a kernel outside kernels/)", b.shared.static_bytes, name,
              b.static_shared);
    if (b.shared.static_bytes + b.shared.dynamic_bytes > (size_t)b.gpu->shared_per_block_optin)
        fault("%zu bytes of static shared memory (with %s) and %zu dynamic: more than the %d a block of %s may have",
              b.shared.static_bytes, name, b.shared.dynamic_bytes, b.gpu->shared_per_block_optin, b.gpu->name);
    void *p = b.shared.take(site, bytes, align, name);
    if (!p) fault("out of emulated shared memory for %s (%zu bytes)", name, bytes);
    return p;
}

void *shared_dynamic(size_t align) {
    running_thread("extern __shared__");
    block_run &b = *this_block;
    if (b.shared.slots.empty() || b.shared.slots[0].site) return nullptr;  // launched with none
    if ((uintptr_t)b.shared.slots[0].p % align) fault("dynamic shared memory is not %zu-byte aligned", align);
    return b.shared.slots[0].p;
}

// ---------------------------------------------------------------- faults

void fault(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "seam-emu: fault: %s\n", msg);
    const kernel_launch *L = this_block && this_block->L ? this_block->L : this_launch;
    if (L) {
        const char *base = strrchr(L->site.file, '/');
        fprintf(stderr, "seam-emu:   in kernel %s launched at %s:%d, grid (%u,%u,%u) x block (%u,%u,%u)",
                L->site.kernel, base ? base + 1 : L->site.file, L->site.line, L->grid.x, L->grid.y, L->grid.z,
                L->block.x, L->block.y, L->block.z);
        if (this_block && this_block->running) {
            const uint3 t = this_block->running->idx;
            const uint3 b = this_block_index;
            fprintf(stderr, ", block (%u,%u,%u) thread (%u,%u,%u)%s", b.x, b.y, b.z, t.x, t.y, t.z,
                    this_block->reverse ? " (the race check's reverse pass)" : "");
        }
        fputc('\n', stderr);
    }
    fflush(stderr);
    abort();
}

// ---------------------------------------------------------------- a launch

void run_kernel(const kernel_launch &L) {
    this_launch = &L;
    // what the kernel may write: what its non-const pointers, and the
    // pointers inside its structs, point into; and the device allocations
    // it may read whose bytes are not all written yet
    std::vector<target> targets;
    std::vector<unwritten_bytes> unwritten;
    // one checked launch at a time, whatever its stream: another kernel's
    // pass must not see this one's fill
    static std::mutex one_checked;
    std::unique_lock<std::mutex> checked(one_checked, std::defer_lock);
    if (racecheck_enabled()) {
        checked.lock();
        for (const pointer_arg &a : L.pointers) {
            region r;
            if (!a.p || !find_region(a.p, 1, &r)) continue;
            bool seen = false;
            for (const unwritten_bytes &u : unwritten) seen = seen || u.r.begin == r.begin;
            if (!seen && r.kind == REGION_DEVICE) unwritten.push_back({r, unwritten_in(r)});
            if (a.top_level && a.read_only) continue;
            bool dup = false;
            for (const target &t : targets) dup = dup || t.r.begin == r.begin;
            if (!dup) targets.push_back({r, {}, {}});
        }
    }
    for (target &t : targets) t.before.assign((uint8_t *)t.r.begin, (uint8_t *)t.r.end);
    run_grid(L, false, UNWRITTEN, !targets.empty());
    if (!targets.empty()) {
        for (target &t : targets) {
            t.forward.assign((uint8_t *)t.r.begin, (uint8_t *)t.r.end);
            memcpy((void *)t.r.begin, t.before.data(), t.before.size());
            std::string why;
            if (t.r.kind == REGION_DEVICE && !guards_intact(t.r, &why))
                fault("out of bounds: %s wrote %s", L.site.kernel, why.c_str());
        }
        for (const unwritten_bytes &u : unwritten) fill_unwritten(u.r, u.gaps, true);
        run_grid(L, true, UNWRITTEN_AGAIN, true);
        for (const target &t : targets) {
            const uint8_t *now = (const uint8_t *)t.r.begin;
            const unwritten_bytes *u = nullptr;
            for (const unwritten_bytes &x : unwritten) u = x.r.begin == t.r.begin ? &x : u;
            for (size_t i = 0; i < t.forward.size(); i++) {
                if (now[i] == t.forward[i]) continue;
                if (u && t.forward[i] == UNWRITTEN && now[i] == UNWRITTEN_AGAIN && in_gaps(u->gaps, t.r.begin + i))
                    continue;  // unwritten, and left so
                // the order or the fill? The reverse order again, over the first fill
                const uint8_t second = now[i];
                for (const target &x : targets) memcpy((void *)x.r.begin, x.before.data(), x.before.size());
                for (const unwritten_bytes &x : unwritten) fill_unwritten(x.r, x.gaps, false);
                run_grid(L, true, UNWRITTEN, true);
                if (now[i] != t.forward[i])
                    fault("race: %s reads what another thread writes without a barrier between them, or two threads "
                          "write one address: byte %zu of %s is %#04x with threads in forward order and %#04x in "
                          "reverse order",
                          L.site.kernel, i, t.r.what.c_str(), t.forward[i], now[i]);
                fault("a read of bytes nobody wrote: %s's result depends on device or shared memory that no copy "
                      "or kernel wrote: byte %zu of %s is %#04x over unwritten memory filled with %#04x and %#04x "
                      "over it filled with %#04x",
                      L.site.kernel, i, t.r.what.c_str(), t.forward[i], UNWRITTEN, second, UNWRITTEN_AGAIN);
            }
            // the gaps' bytes the kernel wrote (the same in both passes) are written from now on
            if (u)
                for (const auto &g : u->gaps)
                    for (uintptr_t a = g.first; a < g.second;) {
                        const size_t i = a - t.r.begin;
                        if (now[i] != t.forward[i]) { a++; continue; }
                        uintptr_t b = a;
                        while (b < g.second && now[b - t.r.begin] == t.forward[b - t.r.begin]) b++;
                        mark_written((const void *)a, b - a);
                        a = b;
                    }
        }
        // what is still unwritten holds UNWRITTEN again, and the slacks their canary
        for (const unwritten_bytes &u : unwritten) {
            std::string why;
            if (!unwritten_restored(u.r, &why)) fault("out of bounds: %s wrote %s", L.site.kernel, why.c_str());
        }
    } else {
        // no check: what the kernel may have written counts as written
        for (const pointer_arg &a : L.pointers) {
            region r;
            if (a.p && !(a.top_level && a.read_only) && find_region(a.p, 1, &r) && r.kind == REGION_DEVICE)
                mark_written((const void *)r.begin, r.end - r.begin);
        }
    }
    // device memory written past an allocation's ends
    for (const pointer_arg &a : L.pointers) {
        region r;
        std::string why;
        if (a.p && find_region(a.p, 1, &r) && r.kind == REGION_DEVICE && !guards_intact(r, &why))
            fault("out of bounds: %s wrote %s", L.site.kernel, why.c_str());
    }
    this_launch = nullptr;
}

}  // namespace emu

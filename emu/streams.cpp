// streams.cpp — the emulated card's queues: streams, events, graphs and
// launches, and the order between streams.
//
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
#include <stdio.h>
#include <stdlib.h>

#include <thread>

#include "runtime.h"

namespace emu {

// ---------------------------------------------------------------- operations

// Runs o on the calling stream thread (the lock not held).
void execute(const operation &o) {
    switch (o.kind) {
    case operation::KERNEL: run_kernel(*o.kernel); break;
    case operation::COPY: {
        region r, from;
        std::string why;
        // A copy from the device into cudaHostAlloc'd memory leaves the rest
        // of that allocation after it 0xff (a NaN), as if unwritten: a copy
        // shorter than what the host then reads shows, where the host
        // buffer's old values would have hidden it.
        if (find_region(o.dst, 1, &r) && r.kind == REGION_PINNED && find_region(o.src, 1, &from) &&
            from.kind == REGION_DEVICE && host_allocated(r.begin))
            memset((uint8_t *)o.dst + o.bytes, UNWRITTEN, r.end - ((uintptr_t)o.dst + o.bytes));
        memcpy(o.dst, o.src, o.bytes);
        if (find_region(o.dst, 1, &r) && r.kind == REGION_DEVICE) {
            if (!guards_intact(r, &why)) fault("out of bounds: %s wrote %s", o.what.c_str(), why.c_str());
            mark_written(o.dst, o.bytes);
        }
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
            // a kernel, a graph of them or cuBLAS's work keeps the board busy (NVML's utilization); a copy does not
            const bool kernel = o.kind != operation::COPY;
            if (kernel && S->executing++ == 0) S->busy_since = now();
            lock.unlock();
            execute(o);
            lock.lock();
            if (kernel && --S->executing == 0) S->busy_seconds += now() - S->busy_since;
        }
        s->busy = false;
        S->cv.notify_all();
    }
    S->streams.erase(s);
    delete s;
    S->cv.notify_all();
}

void busy_clock(double *elapsed, double *busy, bool *running) {
    state &s = st();
    std::lock_guard<std::mutex> lock(s.m);
    const double t = now();
    *elapsed = t - s.started;
    *busy = s.busy_seconds + (s.executing ? t - s.busy_since : 0);
    *running = s.executing > 0;
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
    // what a GPU refuses for this kernel as nvcc compiled it (cudaErrorLaunchOutOfResources)
    if (const kernel_resources *k = resources_of(fn)) {
        if (k->bound && threads > (uint64_t)k->bound)
            fault("%s: a launch of %llu threads a block, past the kernel's __launch_bounds__(%d) (%s:%d); a GPU "
                  "refuses it (cudaErrorLaunchOutOfResources)", site.kernel, (unsigned long long)threads, k->bound,
                  site.file, site.line);
        if ((uint64_t)k->regs * threads > (uint64_t)REGISTERS_PER_SM)
            fault("%s: %llu threads a block x %d registers (nvcc's count) = %llu, past a multiprocessor's %d (%s:%d)",
                  site.kernel, (unsigned long long)threads, k->regs, (unsigned long long)k->regs * threads,
                  REGISTERS_PER_SM, site.file, site.line);
    }
    // without opting in, what 48 KiB leave beside the static arrays
    auto dyn = s.max_dynamic_shared.find(fn);
    const size_t max_dynamic = dyn != s.max_dynamic_shared.end()
                                   ? (size_t)dyn->second
                                   : (size_t)s.gpu->shared_per_block - static_shared_of(fn);
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

extern "C" cudaError_t cudaDeviceSynchronize(void) {
    state &s = st();
    std::unique_lock<std::mutex> lock(s.m);
    refuse_in_capture(s, "cudaDeviceSynchronize");
    wait_idle(s, lock, nullptr);
    return cudaSuccess;
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

// runtime.h — what emu/'s runtime files share (internal to emu/): the
// handles behind cudaStream_t, cudaEvent_t and graphs, the emulator's one
// state and its lock, and the helpers the CUDA calls are made of.
//
//   runtime.cpp  the card, the state, errors, device queries, kernel attributes
//   memory.cpp   device memory, pinned host memory, copies, the access window
//   streams.cpp  streams, events, graphs, launches, the order between streams
#ifndef SEAM_EMU_RUNTIME_H
#define SEAM_EMU_RUNTIME_H

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "emu.h"

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

// The emulator's state, one per process, behind one lock (m): every CUDA
// call takes it, and the stream threads wait on cv.
struct state {
    std::mutex m;
    std::condition_variable cv;
    const card *gpu = nullptr;
    void *context_host = nullptr;  // CONTEXT_HOST_BYTES, held as a context holds its host memory
    // the board's busy time (busy_clock)
    double started = 0;            // when the emulator started
    int executing = 0;             // operations running that count as a kernel
    double busy_since = 0, busy_seconds = 0;
    // device memory
    uint8_t *arena = nullptr;
    size_t arena_used = 0;
    uint64_t allocated = 0;       // bytes of live allocations, as cudaMemGetInfo counts them
    bool window_open = false;     // live allocations accessible (the device has work)
    std::map<uintptr_t, region> device;     // live, by begin
    std::map<uintptr_t, region> freed;      // for the messages about them
    std::map<uintptr_t, std::pair<uintptr_t, uintptr_t>> pages;  // live allocation begin -> its pages
    std::map<uintptr_t, std::map<uintptr_t, uintptr_t>> unwritten;  // live allocation begin -> its unwritten ranges
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

extern state *S;  // made at the first call, by st() (the card read from SEAM_EMU_DEVICE then)
state &st();

constexpr size_t PAGE = 4096, GUARD = 256, GRANULE = 256, ARENA_BYTES = 1ull << 40;
constexpr uint8_t CANARY = 0xa5;

inline size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }
double now();  // the host clock, in seconds
// A call's status: a failure becomes the thread's last error, as in CUDA,
// and is counted against the call that returned it (the count is reported
// at exit: failed_calls_report in runtime.cpp).
cudaError_t status_of(const char *call, cudaError_t e);
#define status(e) status_of(__func__, (e))

// memory.cpp
void install_fault_handler();  // SIGSEGV in device memory: a fault that says whose memory it was
bool host_allocated(uintptr_t begin);  // the pinned region at begin is cudaHostAlloc's (not registered)
const region *region_at(const std::map<uintptr_t, region> &m, uintptr_t p);
void *allocate(state &s, size_t bytes, const std::string &what);
void open_window(state &s);
void close_window_if_idle(state &s);
bool device_idle(const state &s);
enum side { SIDE_DEVICE, SIDE_PINNED, SIDE_PAGEABLE };
side side_of(state &s, const void *p, size_t n, const char *call);
std::string describe_bytes(size_t n);

// streams.cpp
void worker(CUstream_st *s);
CUstream_st *stream_of(state &s, cudaStream_t h, const char *call);
CUevent_st *event_of(state &s, cudaEvent_t h, const char *call);
void refuse_in_capture(state &s, const char *call);
void enqueue(state &s, CUstream_st *q, operation o);
void wait_idle(state &s, std::unique_lock<std::mutex> &lock, CUstream_st *q);

}  // namespace emu

#endif

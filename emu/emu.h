// emu.h — what the emulated device's two halves share (internal to emu/):
// a launch as the runtime queues it and the device runs it, the memory
// regions both check pointers against, the emulated card, and the checks'
// switches.
//
//   emu/cuda_emu.h   the kernels' side: indices, intrinsics, shared memory, launch
//   emu/device.cpp   runs a launch: blocks of fibers, barriers, shuffles, checks
//   emu/runtime.cpp  the CUDA runtime calls seam makes: the card, errors, devices
//   emu/memory.cpp   ... device memory, pinned host memory, copies
//   emu/streams.cpp  ... streams, events, graphs, launches, the order between streams
//                    (emu/runtime.h: what those three share)
//   emu/cublas.cpp   the one cuBLAS product seam calls, and its handle
#ifndef SEAM_EMU_H
#define SEAM_EMU_H

#include <stddef.h>
#include <stdint.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cuda_emu.h"

namespace emu {

// ---------------------------------------------------------------- the card

// The emulated card (SEAM_EMU_DEVICE=h200, the default; rtx3060; none for
// a machine with no device): what cudaGetDeviceProperties and the
// attributes report, the memory cudaMalloc may hand out, and the shared
// memory a block may have.
struct card {
    const char *id;
    const char *name;
    int major, minor, sm_count;
    uint64_t total_bytes;       // device memory
    uint64_t context_bytes;     // taken before seam allocates anything, as a CUDA context takes it
    int memory_clock_khz, bus_bits;
    int shared_per_block;       // without opting in (48 KiB)
    int shared_per_block_optin; // the most a block may have, static and dynamic together
    double idle_watts, busy_watts;  // the board's power with no kernel running and with one (emu/nvml.cpp)
};
const card *the_card();  // NULL when the profile has no device

// The host memory a CUDA context holds once created: a real driver maps its
// libraries and allocates its own tables, 100-300 MB resident on CUDA 12-13.
// The emulator's first call allocates and touches this much host memory
// where the card has a device, so that a memory account that counts the
// context as the engine's (or misses it) shows here as it would on a GPU.
constexpr size_t CONTEXT_HOST_BYTES = 128u << 20;

// ---------------------------------------------------------------- memory regions

// Every range a kernel or a copy may touch: device allocations (in the
// device arena) and pinned host memory (cudaHostAlloc, cudaHostRegister).
enum region_kind { REGION_DEVICE, REGION_PINNED };

struct region {
    region_kind kind;
    uintptr_t begin, end;  // the bytes asked for
    std::string what;      // "cudaMalloc of N bytes", "cudaHostRegister of N bytes", "__device__ gelu_table"
};

// The live region holding [p, p + bytes), copied (so that the caller holds
// no lock); false when there is none.
bool find_region(const void *p, size_t bytes, region *out);
// Checks the guard zones of the live device allocation at p: false (and a
// message) when a kernel or copy wrote past its ends.
bool guards_intact(const region &r, std::string *why);

// ---------------------------------------------------------------- bytes nobody wrote

// Device memory starts unwritten: a cudaMalloc's bytes, and a block's shared
// memory, hold UNWRITTEN (0xff: a NaN in f32 and f16), so that a read of
// them that reaches a result shows as a NaN. A read whose value is dropped
// (by fmaxf, a comparison, a mask) would not; so the race check's second
// pass runs over the same bytes filled with UNWRITTEN_AGAIN instead, and an
// output that differs between the passes depends on bytes nobody wrote
// (initcheck's job). The emulator keeps, per allocation, the ranges that no
// copy, kernel or cuBLAS product has written yet.
constexpr uint8_t UNWRITTEN = 0xff, UNWRITTEN_AGAIN = 0x5a;  // 0x5a5a5a5a: 1.5e16 in f32; 0x5a5a: 203.25 in f16
using byte_ranges = std::vector<std::pair<uintptr_t, uintptr_t>>;  // [begin, end), sorted
// The bytes of the device allocation r nothing has written.
byte_ranges unwritten_in(const region &r);
// Fills gaps (of r) with UNWRITTEN and the slack after r's end (to CUDA's
// 256-byte granularity: readable, unlike the page after it) with its
// canary, or, again, both with UNWRITTEN_AGAIN. Under AddressSanitizer,
// which watches the slack itself, the slack is left alone.
void fill_unwritten(const region &r, const byte_ranges &gaps, bool again);
// [p, p + bytes) of device memory is written from now on (a copy, a kernel's
// output, cuBLAS's product).
void mark_written(const void *p, size_t bytes);
// After the second pass: what of r is still unwritten holds UNWRITTEN
// again and its slack its canary; false (and a message) where the kernel
// wrote into the slack, past r's end.
bool unwritten_restored(const region &r, std::string *why);

// ---------------------------------------------------------------- launches

struct kernel_launch {
    launch_site site;
    const void *fn;
    dim3 grid, block;
    size_t smem;                                // dynamic shared memory
    std::shared_ptr<const kernel_call> call;
    std::vector<pointer_arg> pointers;
};

// Runs every block of L (on the calling thread, which is a stream's). With
// the race check, it runs them twice, threads in forward then reverse
// order, the second time over unwritten bytes filled with UNWRITTEN_AGAIN,
// and faults when what the kernel wrote differs.
void run_kernel(const kernel_launch &L);

// What cudaFuncGetAttributes reports as a kernel's static shared memory:
// nvcc knows it at compile time, the emulator only once a block declares
// it, so it reports this bound and faults when a block declares more.
constexpr size_t STATIC_SHARED_BOUND = 16 << 10;

// A kernel of kernels/ as nvcc compiles it (emu/resources.cpp): its launch
// bound (0: none), registers a thread and static shared bytes; NULL for a
// kernel nvcc's table does not hold. resources_known: whether the build has
// the table (nvcc ran at build time).
struct kernel_resources {
    const char *name;  // mangled
    int bound, regs, static_shared;
};
const kernel_resources *resources_of(const void *fn);
bool resources_known();
// The static shared memory cudaFuncGetAttributes reports for fn: nvcc's
// count where the table has it, else STATIC_SHARED_BOUND.
size_t static_shared_of(const void *fn);
constexpr int REGISTERS_PER_SM = 65536;

// ---------------------------------------------------------------- streams' work

// What a stream (or a captured graph) holds, in order: a kernel launch, a
// copy, an event's record or a wait for one, a graph's launch, or work on
// the host's side of the emulator (cuBLAS's product).
struct operation {
    enum kind_t { KERNEL, COPY, RECORD, WAIT, GRAPH, HOST } kind;
    std::string what;                              // the call that made it
    std::shared_ptr<const kernel_launch> kernel;          // KERNEL
    void *dst = nullptr;                           // COPY
    const void *src = nullptr;
    size_t bytes = 0;
    CUevent_st *event = nullptr;                   // RECORD, WAIT: the event, and which of its records
    uint64_t generation = 0;
    CUgraphExec_st *graph = nullptr;               // GRAPH, and the generation of each event it records
    std::map<CUevent_st *, uint64_t> graph_generation;
    std::function<void()> host;                    // HOST, and the memory it reads and writes
    std::vector<const void *> reads, writes;
};

// Queues fn on stream (or records it into the stream's capture); it reads
// and writes the memory at those pointers (for the order between streams).
void enqueue_host(cudaStream_t stream, const char *what, std::function<void()> fn, std::vector<const void *> reads,
                  std::vector<const void *> writes);

// ---------------------------------------------------------------- the board's power (emu/nvml.cpp)

// Seconds since the emulator started, of them the seconds some kernel (or a
// graph, or cuBLAS's work) was running on a stream, and whether one runs now.
void busy_clock(double *elapsed, double *busy, bool *running);

// ---------------------------------------------------------------- switches

// SEAM_EMU_RACECHECK=0 turns the forward/reverse race check off (on by default).
bool racecheck_enabled();

}  // namespace emu

#endif

// test_emu.cu — the emulated device's own checks (emu/), on kernels that
// break CUDA's rules one at a time: each must be caught, as a fault naming
// what went wrong (the process aborts, as a device fault ends a CUDA
// context). Built only in the SEAM_CUDA_EMU build, where kernels/*.cu run on
// the CPU; the kernels here use the same spellings (SEAM_LAUNCH,
// SEAM_SHARED) as kernels/*.cu.
//
// A faulting case runs in a child process (fork before the child's first
// CUDA call, so that it has a runtime of its own), with its stderr read
// back: the test passes when the child died and said what was expected.
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>

#include "cuda_common.cuh"
#include "emu.h"  // the emulator's own figures (CONTEXT_HOST_BYTES)

// Runs body in a child; passes when the child dies (a signal or a non-zero
// exit) and its stderr holds one of the expected phrases (a '|'-separated
// list: AddressSanitizer, where the build has it, reports some faults first).
static void expect_fault(const std::function<void()> &body, const char *expected) {
    int out[2];
    cr_assert_eq(pipe(out), 0);
    fflush(NULL);
    const pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dup2(out[1], STDERR_FILENO);
        close(out[0]);
        body();
        cudaDeviceSynchronize();
        _exit(0);  // no fault: the parent fails the test
    }
    close(out[1]);
    std::string said;
    char buf[4096];
    for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;) said.append(buf, (size_t)n);
    close(out[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    cr_assert(WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) != 0),
              "expected a fault saying '%s'; the child ended normally. It said:\n%s", expected, said.c_str());
    bool found = false;
    for (const char *p = expected; *p && !found;) {
        const char *bar = strchr(p, '|');
        const std::string phrase(p, bar ? (size_t)(bar - p) : strlen(p));
        found = said.find(phrase) != std::string::npos;
        p = bar ? bar + 1 : p + strlen(p);
    }
    cr_assert(found, "expected a fault saying '%s'; the child said:\n%s", expected, said.c_str());
}

static float *device_floats(int n) {
    float *p = nullptr;
    cr_assert_eq(cudaMalloc((void **)&p, sizeof(float) * (size_t)n), cudaSuccess);
    return p;
}

// ---------------------------------------------------------------- kernels that break the rules

__global__ void shuffle_after_an_early_exit(float *out) {
    if (threadIdx.x == 3) return;  // one lane leaves its warp
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (float)threadIdx.x, 1);
}

__global__ void shuffle_with_a_partial_mask(float *out) {
    out[threadIdx.x] = __shfl_xor_sync(0x0000ffffu, (float)threadIdx.x, 1);
}

__global__ void barrier_some_threads_skip(float *out) {
    if (threadIdx.x >= 32) return;
    __syncthreads();
    out[threadIdx.x] = 1.0f;
}

__global__ void barrier_at_two_places(float *out) {
    if (threadIdx.x % 2) {
        __syncthreads();
    } else {
        __syncthreads();
    }
    out[threadIdx.x] = 1.0f;
}

// Each thread reads its neighbour's slot with no barrier after the writes.
__global__ void shared_read_without_barrier(float *out) {
    SEAM_SHARED(float, slot, 64);
    slot[threadIdx.x] = (float)threadIdx.x;
    out[threadIdx.x] = slot[(threadIdx.x + 1) % 64];
}

// The same with the barrier: no race.
__global__ void shared_read_after_barrier(float *out) {
    SEAM_SHARED(float, slot, 64);
    slot[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = slot[(threadIdx.x + 1) % 64];
}

__global__ void blocks_write_one_address(float *out) { out[0] = (float)blockIdx.x; }

__global__ void write_one_past_the_end(float *out, int n) { out[threadIdx.x + n - 31] = 1.0f; }

__global__ void shared_write_past_its_end(float *out) {
    SEAM_SHARED(float, slot, 32);
    slot[threadIdx.x + 1] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = slot[threadIdx.x];
}

__global__ void copy_kernel(float *out, const float *in) { out[threadIdx.x] = in[threadIdx.x]; }

__global__ void misaligned_vector_load(float *out, const float *in) {
    const float4 v = __ldg((const float4 *)(in + 1));
    out[threadIdx.x] = v.x;
}

// ---------------------------------------------------------------- warps and barriers

Test(emu, a_shuffle_with_a_lane_that_exited_faults) {
    expect_fault([] { SEAM_LAUNCH(shuffle_after_an_early_exit, 1, 32, 0, 0, device_floats(32)); },
                 "lane 3 of the warp has exited");
}

Test(emu, a_shuffle_with_a_partial_mask_faults) {
    expect_fault([] { SEAM_LAUNCH(shuffle_with_a_partial_mask, 1, 32, 0, 0, device_floats(32)); },
                 "with mask 0xffff: only full-warp masks");
}

Test(emu, a_barrier_some_threads_never_reach_faults) {
    expect_fault([] { SEAM_LAUNCH(barrier_some_threads_skip, 1, 64, 0, 0, device_floats(64)); },
                 "is reached by 32 of the block's 64 threads");
}

Test(emu, threads_at_different_barriers_fault) {
    expect_fault([] { SEAM_LAUNCH(barrier_at_two_places, 1, 64, 0, 0, device_floats(64)); },
                 "wait at different barriers");
}

// ---------------------------------------------------------------- races

Test(emu, a_shared_memory_race_faults) {
    expect_fault([] { SEAM_LAUNCH(shared_read_without_barrier, 1, 64, 0, 0, device_floats(64)); },
                 "race: shared_read_without_barrier");
}

Test(emu, two_blocks_writing_one_address_fault) {
    expect_fault([] { SEAM_LAUNCH(blocks_write_one_address, 4, 32, 0, 0, device_floats(1)); },
                 "race: blocks_write_one_address");
}

Test(emu, a_barrier_makes_the_same_kernel_race_free) {
    float *d = device_floats(64), got[64];
    SEAM_LAUNCH(shared_read_after_barrier, 1, 64, 0, 0, d);
    cr_assert_eq(cudaGetLastError(), cudaSuccess);
    cr_assert_eq(cudaMemcpy(got, d, sizeof got, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int i = 0; i < 64; i++) cr_assert_eq(got[i], (float)((i + 1) % 64));
}

// ---------------------------------------------------------------- memory

Test(emu, a_write_past_an_allocation_faults) {
    expect_fault([] { SEAM_LAUNCH(write_one_past_the_end, 1, 32, 0, 0, device_floats(100), 100); },
                 "past the end of cudaMalloc of 400 bytes|use-after-poison");
}

Test(emu, a_shared_memory_overrun_faults) {
    expect_fault([] { SEAM_LAUNCH(shared_write_past_its_end, 1, 32, 0, 0, device_floats(32)); },
                 "shared memory overrun: a thread wrote past the 128 bytes of slot|use-after-poison");
}

Test(emu, fresh_device_memory_reads_as_nan) {
    float *in = device_floats(32), *out = device_floats(32), got[32];
    SEAM_LAUNCH(copy_kernel, 1, 32, 0, 0, out, in);
    cr_assert_eq(cudaMemcpy(got, out, sizeof got, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int i = 0; i < 32; i++) cr_assert(got[i] != got[i], "[%d] = %g, not the NaN of unwritten memory", i, got[i]);
}

Test(emu, a_host_pointer_given_to_a_kernel_faults) {
    expect_fault([] {
        static float host[32];
        SEAM_LAUNCH(copy_kernel, 1, 32, 0, 0, device_floats(32), host);
    }, "argument 1 of copy_kernel");
}

Test(emu, freed_device_memory_given_to_a_kernel_faults) {
    expect_fault([] {
        float *d = device_floats(32);
        cudaFree(d);
        SEAM_LAUNCH(copy_kernel, 1, 32, 0, 0, d, d);
    }, "freed device memory");
}

Test(emu, the_host_touching_device_memory_faults) {
    expect_fault([] {
        float *d = device_floats(32);
        cudaDeviceSynchronize();
        volatile float x = d[0];
        (void)x;
    }, "the host touched device memory");
}

Test(emu, a_misaligned_vector_load_faults) {
    expect_fault([] { SEAM_LAUNCH(misaligned_vector_load, 1, 32, 0, 0, device_floats(32), device_floats(64)); },
                 "misaligned address");
}

Test(emu, an_async_copy_from_pageable_memory_faults) {
    expect_fault([] {
        static float pageable[32];
        cudaMemcpyAsync(device_floats(32), pageable, sizeof pageable, cudaMemcpyHostToDevice, 0);
    }, "pageable host memory");
}

Test(emu, a_copy_past_an_allocation_faults) {
    expect_fault([] {
        float *pinned;
        cudaHostAlloc((void **)&pinned, 64 * sizeof(float), cudaHostAllocMapped);
        cudaMemcpyAsync(device_floats(32), pinned, 64 * sizeof(float), cudaMemcpyHostToDevice, 0);
    }, "run 128 bytes past its end");
}

// ---------------------------------------------------------------- captures

static cudaStream_t capturing_stream() {
    cudaStream_t s;
    cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    return s;
}

Test(emu, a_malloc_during_a_capture_faults) {
    expect_fault([] {
        capturing_stream();
        device_floats(1);
    }, "cudaMalloc during a stream capture");
}

Test(emu, mem_get_info_during_a_capture_faults) {
    expect_fault([] {
        capturing_stream();
        size_t f, t;
        cudaMemGetInfo(&f, &t);
    }, "cudaMemGetInfo during a stream capture");
}

Test(emu, synchronizing_a_capturing_stream_faults) {
    expect_fault([] { cudaStreamSynchronize(capturing_stream()); },
                 "cudaStreamSynchronize of a stream that is capturing");
}

Test(emu, a_kernel_first_launched_inside_a_capture_faults) {
    expect_fault([] {
        float *d = device_floats(32);
        cudaStream_t s = capturing_stream();
        SEAM_LAUNCH(copy_kernel, 1, 32, 0, s, d, d);
    }, "the first launch of copy_kernel");
}

Test(emu, a_captured_graph_replays_its_work) {
    // A kernel run once eagerly (loaded), then captured and replayed: the
    // capture itself runs nothing, each replay runs it.
    float *d = device_floats(32), *src = device_floats(32), host[32], got[32];
    for (int i = 0; i < 32; i++) host[i] = (float)i;
    cudaStream_t s;
    cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    cr_assert_eq(cudaMemcpy(src, host, sizeof host, cudaMemcpyHostToDevice), cudaSuccess);
    SEAM_LAUNCH(copy_kernel, 1, 32, 0, s, d, src);
    cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
    for (int i = 0; i < 32; i++) host[i] = -1.0f;
    cr_assert_eq(cudaMemcpy(d, host, sizeof host, cudaMemcpyHostToDevice), cudaSuccess);
    cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    SEAM_LAUNCH(copy_kernel, 1, 32, 0, s, d, src);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cr_assert_eq(cudaStreamEndCapture(s, &graph), cudaSuccess);
    cr_assert_eq(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    cr_assert_eq(cudaMemcpy(got, d, sizeof got, cudaMemcpyDeviceToHost), cudaSuccess);
    cr_assert_eq(got[5], -1.0f, "the capture ran the kernel");
    cr_assert_eq(cudaGraphLaunch(exec, s), cudaSuccess);
    cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
    cr_assert_eq(cudaMemcpy(got, d, sizeof got, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int i = 0; i < 32; i++) cr_assert_eq(got[i], (float)i);
    cudaGraphExecDestroy(exec), cudaGraphDestroy(graph), cudaStreamDestroy(s);
}

// ---------------------------------------------------------------- errors

Test(emu, a_failed_call_sets_the_last_error_until_it_is_read) {
    void *p;
    cr_assert_eq(cudaMalloc(&p, (size_t)1 << 50), cudaErrorMemoryAllocation);
    cr_assert_eq(cudaPeekAtLastError(), cudaErrorMemoryAllocation);
    float *d = device_floats(32);  // a call that succeeds leaves it
    cr_assert_eq(cudaPeekAtLastError(), cudaErrorMemoryAllocation);
    cr_assert_eq(cudaGetLastError(), cudaErrorMemoryAllocation);
    cr_assert_eq(cudaGetLastError(), cudaSuccess, "cudaGetLastError clears it");
    SEAM_LAUNCH(copy_kernel, 1, 2048, 0, 0, d, d);  // too many threads: a launch error
    cr_assert_eq(cudaGetLastError(), cudaErrorInvalidConfiguration);
}

Test(emu, the_card_is_chosen_by_profile) {
    // the default is the lent H200; SEAM_EMU_DEVICE=rtx3060 the seed's 12 GB card
    cudaDeviceProp p;
    cr_assert_eq(cudaGetDeviceProperties(&p, 0), cudaSuccess);
    cr_assert(strstr(p.name, "emulated"), "%s", p.name);
    size_t free_b, total;
    cr_assert_eq(cudaMemGetInfo(&free_b, &total), cudaSuccess);
    cr_assert_eq(total, (size_t)p.totalGlobalMem);
    cr_assert_lt(free_b, total, "a context takes some memory before seam allocates any");
    void *d;
    cr_assert_eq(cudaMalloc(&d, 1 << 20), cudaSuccess);
    size_t after;
    cr_assert_eq(cudaMemGetInfo(&after, &total), cudaSuccess);
    cr_assert_eq(free_b - after, (size_t)1 << 20, "cudaMemGetInfo counts what cudaMalloc took");
}

// ---------------------------------------------------------------- copies into pinned memory

// A copy from the device shorter than the pinned buffer the host then reads
// (a crossing one float short): the rest of the buffer reads as unwritten
// (a NaN), not as whatever the host left there.
Test(emu, a_short_copy_into_pinned_memory_leaves_the_rest_unwritten) {
    float *host, *dev = device_floats(64), ones[64];
    for (int i = 0; i < 64; i++) ones[i] = 1.0f;
    cr_assert_eq(cudaMemcpy(dev, ones, sizeof ones, cudaMemcpyHostToDevice), cudaSuccess);
    cr_assert_eq(cudaHostAlloc((void **)&host, sizeof ones, cudaHostAllocDefault), cudaSuccess);
    for (int i = 0; i < 64; i++) host[i] = 2.0f;
    cr_assert_eq(cudaMemcpy(host, dev, sizeof ones - sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    for (int i = 0; i < 63; i++) cr_assert_eq(host[i], 1.0f, "[%d] = %g", i, host[i]);
    cr_assert(host[63] != host[63], "the float the copy left out reads %g, not unwritten", host[63]);
    cr_assert_eq(cudaMemcpy(host, dev, sizeof ones, cudaMemcpyDeviceToHost), cudaSuccess);
    cr_assert_eq(host[63], 1.0f);
    cudaFreeHost(host);
}

// ---------------------------------------------------------------- a context's host memory

static size_t rss_anon_bytes() {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "RssAnon: %llu kB", &kib) == 1) break;
    if (f) fclose(f);
    return (size_t)kib << 10;
}

// The process's first CUDA call creates the context, whose host memory (a
// real driver's 100-300 MB) is resident from then on: a memory account
// that reads the resident set before that call and after it counts the
// context as its own. The emulator holds emu::CONTEXT_HOST_BYTES so that
// such an account fails in CI as it would on a GPU.
Test(emu, the_first_call_creates_a_contexts_host_memory) {
    fflush(NULL);
    const pid_t pid = fork();  // a process that has made no CUDA call yet
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        const size_t before = rss_anon_bytes();
        int n = 0;
        cudaGetDeviceCount(&n);
        // (under AddressSanitizer its shadow adds an eighth)
        const size_t grown = rss_anon_bytes() - before, want = emu::CONTEXT_HOST_BYTES;
        _exit(n == 1 && grown >= want && grown < want / 2 * 3 ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "the first CUDA call did not add the context's %zu MiB of host memory", emu::CONTEXT_HOST_BYTES >> 20);
}

// ---------------------------------------------------------------- cuBLAS's memory

#include <cublas_v2.h>

Test(emu, cublas_create_takes_its_default_pool_from_the_card) {
    size_t before, after, total;
    cr_assert_eq(cudaMemGetInfo(&before, &total), cudaSuccess);
    cublasHandle_t h;
    cr_assert_eq(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    cr_assert_eq(cudaMemGetInfo(&after, &total), cudaSuccess);
    cr_assert_eq(before - after, (size_t)32 << 20, "cuBLAS's default workspace pool is device memory");
    cr_assert_eq(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
    cr_assert_eq(cudaMemGetInfo(&after, &total), cudaSuccess);
    cr_assert_eq(after, before, "cublasDestroy gives it back");
}

// cublasSetStream puts the handle back on the default pool: a product there
// after the caller gave it a workspace of its own is a fault.
Test(emu, a_gemm_on_the_default_pool_after_set_stream_faults) {
    expect_fault([] {
        cublasHandle_t h;
        cublasCreate(&h);
        float *ws = device_floats(1 << 20);
        cublasSetWorkspace(h, ws, (size_t)4 << 20);
        cudaStream_t s;
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        cublasSetStream(h, s);  // the workspace is not set again
        float *a = device_floats(64), *c = device_floats(64);
        const float one = 1.0f, zero = 0.0f;
        cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &one, a, CUDA_R_16F, 8, a, CUDA_R_16F, 8, &zero, c,
                     CUDA_R_32F, 8, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }, "cuBLAS's default workspace pool");
}

// ---------------------------------------------------------------- failed calls, counted as compute-sanitizer counts them

// A process that fails a CUDA call reports it at exit and exits non-zero,
// as compute-sanitizer --error-exitcode makes it; unless it says it fails
// calls on purpose (SEAM_EMU_API_ERRORS=expected, which this suite's own
// process runs under: its tests fail calls deliberately).
Test(emu, a_failed_call_is_reported_at_exit) {
    expect_fault([] {
        unsetenv("SEAM_EMU_API_ERRORS");
        void *p;
        cudaMalloc(&p, (size_t)1 << 50);
        cudaGetLastError();  // read and cleared: the call still failed
        exit(0);
    }, "1 CUDA call failed in this process (cudaMalloc: cudaErrorMemoryAllocation x1)");
}

Test(emu, failed_calls_said_to_be_expected_pass) {
    fflush(NULL);
    const pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        setenv("SEAM_EMU_API_ERRORS", "expected", 1);
        void *p;
        cudaMalloc(&p, (size_t)1 << 50);
        exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a process that expects its failed calls exited %d",
              WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

// ---------------------------------------------------------------- reads past an allocation

// A read one past the end of an allocation (a loop bound off by one) faults
// as a write there does: the allocation ends flush against an inaccessible
// page, where a guard zone would have seen only a write.
__global__ void read_one_past_the_end(float *out, const float *x, int n) {
    float m = -INFINITY;
    for (int i = 0; i <= n; i++) m = fmaxf(m, x[i]);  // i <= n: the bug; fmaxf drops the NaN a fill would give
    out[0] = m;
}

Test(emu, a_read_past_the_end_of_an_allocation_faults) {
    expect_fault([] {
        float *x = device_floats(64), *out = device_floats(1);
        SEAM_LAUNCH(read_one_past_the_end, 1, 1, 0, 0, out, x, 64);
    }, "bytes past the end of cudaMalloc of|heap-buffer-overflow|use-after-poison");
}

// ---------------------------------------------------------------- bytes nobody wrote

// A maximum over 64 floats of which a copy wrote 32: fmaxf drops the NaN
// fresh memory reads as, so the result looks right on the first pass.
__global__ void max_over(float *out, const float *x, int n) {
    float m = -INFINITY;
    for (int i = 0; i < n; i++) m = fmaxf(m, x[i]);
    out[threadIdx.x] = m;
}

static float *half_written(int n) {
    float *x = device_floats(n), host[64];
    for (int i = 0; i < 64; i++) host[i] = -1.0f - (float)i;
    cudaMemcpy(x, host, sizeof(float) * (size_t)(n / 2), cudaMemcpyHostToDevice);
    return x;
}

Test(emu, a_result_from_bytes_nobody_wrote_faults) {
    expect_fault([] {
        float *x = half_written(64), *out = device_floats(1);
        SEAM_LAUNCH(max_over, 1, 1, 0, 0, out, x, 64);
    }, "a read of bytes nobody wrote");
}

// The same maximum over what was written passes, and so does one over what
// an earlier kernel wrote (the emulator keeps which bytes were written).
__global__ void fill_negative(float *x, int from) { x[from + threadIdx.x] = -100.0f - (float)threadIdx.x; }

Test(emu, a_result_from_written_bytes_passes) {
    float *x = half_written(64), *out = device_floats(1);
    SEAM_LAUNCH(max_over, 1, 1, 0, 0, out, x, 32);
    SEAM_LAUNCH(fill_negative, 1, 32, 0, 0, x, 32);
    SEAM_LAUNCH(max_over, 1, 1, 0, 0, out, x, 64);
    float got;
    cr_assert_eq(cudaMemcpy(&got, out, sizeof got, cudaMemcpyDeviceToHost), cudaSuccess);
    cr_assert_eq(got, -1.0f);
}

// A read in the slack after an allocation's last byte (CUDA rounds
// allocations up to 256 bytes, so it does not fault on a GPU either), its
// value dropped: 63 floats, the loop reads the 64th.
Test(emu, a_result_from_past_the_end_within_the_granule_faults) {
    expect_fault([] {
        float *x = device_floats(63), *out = device_floats(1), host[63];
        for (int i = 0; i < 63; i++) host[i] = (float)-i;
        cudaMemcpy(x, host, sizeof host, cudaMemcpyHostToDevice);
        SEAM_LAUNCH(max_over, 1, 1, 0, 0, out, x, 64);
    }, "a read of bytes nobody wrote|heap-buffer-overflow|use-after-poison");
}

// Shared memory read before any thread wrote it, the value dropped by a
// comparison: the second pass fills shared memory with another pattern.
__global__ void shared_read_before_write(float *out) {
    SEAM_SHARED(float, slot, 64);
    if (threadIdx.x < 32) slot[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = slot[threadIdx.x] > 1e9f ? 1.0f : 0.0f;  // the upper half was never written
}

Test(emu, a_result_from_unwritten_shared_memory_faults) {
    expect_fault([] { SEAM_LAUNCH(shared_read_before_write, 1, 64, 0, 0, device_floats(64)); },
                 "a read of bytes nobody wrote");
}

// ---------------------------------------------------------------- the kernels' resources, as nvcc compiles them

// kernels/norm_rope.cu's kernels (nvcc: rope_kernel's __launch_bounds__(64);
// rmsnorm_kernel's 256 bytes of static shared memory, its block's partials)
__global__ void rope_kernel(float *vec, int head_dim, int rope_dim, float theta_scale, float freq_scale, bool neox,
                            int n_heads, const seam_cuda_step *step);
__global__ void rmsnorm_kernel(float *out, const float *x, const float *w, int n, float eps);

Test(emu, a_launch_past_a_kernels_launch_bounds_faults) {
    expect_fault([] {
        float *v = device_floats(256);
        SEAM_LAUNCH(rope_kernel, 1, 128, 0, 0, v, 128, 128, 0.5f, 1.0f, true, 1, (const seam_cuda_step *)v);
    }, "past the kernel's __launch_bounds__(64)");
}

Test(emu, func_attributes_are_nvccs) {
    cudaFuncAttributes a;
    cr_assert_eq(cudaFuncGetAttributes(&a, (const void *)rmsnorm_kernel), cudaSuccess);
    cr_assert_eq(a.sharedSizeBytes, 256u, "rmsnorm_kernel's static shared memory, as nvcc counts it");
    cr_assert_eq(a.maxThreadsPerBlock, 256, "its __launch_bounds__(256)");
    cr_assert_gt(a.numRegs, 0, "nvcc's register count");
}

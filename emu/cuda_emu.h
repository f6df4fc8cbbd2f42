// cuda_emu.h — what nvcc gives a kernel, for kernels/*.cu compiled by the
// host C++ compiler against the emulated device (the SEAM_CUDA_EMU build).
//
// The real CUDA headers still supply the types and the runtime's
// declarations; emu/runtime.cpp defines those functions, emu/device.cpp runs
// the kernels: every block's threads as fibers, a warp's shuffles and a
// block's barriers as meeting points of its fibers, shared memory per block.
// This header is the kernels' side of it: the built-in indices, the
// intrinsics the kernels use, shared memory and the launch. It is included
// by kernels/cuda_common.cuh after the CUDA headers, and defines
// __CUDA_ARCH__ so that the kernels take their device branches (their
// __ldg, __dp4a, __vsub4), which then run here.
#ifndef SEAM_CUDA_EMU_H
#define SEAM_CUDA_EMU_H

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <memory>
#include <tuple>
#include <type_traits>
#include <vector>

#define __CUDA_ARCH__ 900  // the device branches of the kernels, from here on
#undef __launch_bounds__
#define __launch_bounds__(...)

#ifdef SEAM_EMU_CUDA_MATH
// The build that computes as nvcc's code does (-DSEAM_EMU_NVCC_MATH=ON):
// fused multiply-adds wherever the compiler may contract (nvcc's default,
// -fmad=true), and, in device code, CUDA's expf, tanhf, sinf, cosf and
// sincosf, which are not the host's libm: each result moved by up to CUDA's
// documented error for them (2 ulp, CUDA C Programming Guide, the maths
// functions' table), by a deterministic function of the argument. A
// tolerance or a bitwise claim that holds only on the host's libm, or only
// without fusing, fails here. Host code in a .cu file (a table built at
// init) calls the host's libm, as under nvcc: the functions ask whether a
// kernel is running.
namespace emu {
bool in_kernel();  // device.cpp: the calling thread runs a kernel's thread now
inline float cuda_ulps(float r, float x) {
    if (!in_kernel()) return r;
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    b = (b ^ (b >> 13)) * 0x5bd1e995u;
    for (int k = (int)((b >> 24) % 5) - 2; k != 0 && isfinite(r) && r != 0; k += k > 0 ? -1 : 1)
        r = nextafterf(r, k > 0 ? INFINITY : -INFINITY);
    return r;
}
inline float cuda_expf(float x) { return cuda_ulps(::expf(x), x); }
inline float cuda_tanhf(float x) { return cuda_ulps(::tanhf(x), x); }
inline float cuda_sinf(float x) { return cuda_ulps(::sinf(x), x); }
inline float cuda_cosf(float x) { return cuda_ulps(::cosf(x), -x); }
inline void cuda_sincosf(float x, float *s, float *c) { *s = cuda_sinf(x), *c = cuda_cosf(x); }
}  // namespace emu
#define expf emu::cuda_expf
#define tanhf emu::cuda_tanhf
#define sinf emu::cuda_sinf
#define cosf emu::cuda_cosf
#define sincosf emu::cuda_sincosf
#endif

namespace emu {

// ---------------------------------------------------------------- the current thread

// The indices of the thread that runs now (device.cpp keeps them per OS
// thread, and sets them as it resumes a thread's fiber), read by value
// through a call: a fiber switch may not leave a cached address behind.
uint3 thread_index();
uint3 block_index();
dim3 block_dim();
dim3 grid_dim();

// ---------------------------------------------------------------- meeting points

// The block's barrier: every thread of the block must reach the same one.
void syncthreads(const char *file, int line);

// The 32-lane exchange behind every shuffle: all lanes of the warp must
// call it at the same site with a full mask (device.cpp fails loudly
// otherwise). Each lane gets the 8 bytes of lane (its lane ^ lane_mask).
uint64_t shuffle_xor(uint64_t bits, unsigned mask, int lane_mask, int width, const char *file, int line);

template <class T> T shfl_xor_sync(const char *file, int line, unsigned mask, T v, int lane_mask, int width = 32) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "a shuffle moves at most 8 bytes");
    uint64_t bits = 0;
    memcpy(&bits, &v, sizeof v);
    bits = shuffle_xor(bits, mask, lane_mask, width, file, line);
    T r;
    memcpy(&r, &bits, sizeof r);
    return r;
}

// ---------------------------------------------------------------- shared memory

// The block's copy of the static shared array declared at site (one per
// declaration, and per template instantiation), bytes long; filled with
// 0xff (a NaN) when the block starts, guarded on both sides.
void *shared_static(const void *site, size_t bytes, size_t align, const char *name);
// The block's dynamic shared memory, as many bytes as its launch asked for.
void *shared_dynamic(size_t align);
// The device memory of a __device__ array (a device allocation, made once).
void *device_array(size_t bytes, const char *name);

// A __device__ array: its device memory made at first use, so that a
// process starts no emulated device until it uses one. Kernels index it;
// the host passes it to cudaGetSymbolAddress as the symbol.
template <class T> struct device_array_ref {
    size_t count;
    const char *name;
    mutable T *p;
    T *get() const {
        if (!p) p = (T *)device_array(sizeof(T) * count, name);
        return p;
    }
    T &operator[](size_t i) const { return get()[i]; }
    operator const void *() const { return get(); }
};

// ---------------------------------------------------------------- faults

// A fault of the running kernel (or a misuse of the runtime): says what and
// where (kernel, block, thread) on stderr, and aborts, as a device fault
// ends a CUDA context.
[[noreturn]] void fault(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// A load through the read-only cache: on the device it must be aligned to
// its size, or the kernel faults (misaligned address).
template <class T> T ldg(const T *p, const char *file, int line) {
    if ((uintptr_t)p % alignof(T))
        fault("%s:%d: __ldg of a %zu-byte value at %p: misaligned address", file, line, sizeof(T), (const void *)p);
    return *p;
}

// ---------------------------------------------------------------- launches

// A kernel's pointer arguments, for the launch's checks: a top-level pointer
// must be device memory, pinned mapped host memory or NULL; those and the
// pointers found inside struct arguments are what the kernel may write
// (the race check compares them between two thread orders).
struct pointer_arg {
    int index;         // the argument's position
    const void *p;
    bool top_level;    // a pointer argument, not a word inside a struct
    bool read_only;    // a pointer to const
};

struct kernel_call {
    virtual ~kernel_call() {}
    virtual void run() const = 0;  // the kernel, as the current thread
};

template <class... P> struct bound_call : kernel_call {
    void (*kernel)(P...);
    std::tuple<std::decay_t<P>...> args;
    template <class... A> bound_call(void (*k)(P...), A &&...a) : kernel(k), args(std::forward<A>(a)...) {}
    void run() const override { std::apply(kernel, args); }  // each thread its own copy of the arguments
};

template <class T> void scan_argument(int index, const T &arg, std::vector<pointer_arg> &out) {
    if constexpr (std::is_pointer<T>::value) {
        out.push_back({index, (const void *)arg, true, std::is_const<std::remove_pointer_t<T>>::value});
    } else if constexpr (std::is_class<T>::value) {
        // a struct of pointers and scalars: every aligned word that is a pointer
        for (size_t off = 0; off + sizeof(void *) <= sizeof(T); off += sizeof(void *)) {
            const void *p;
            memcpy(&p, (const char *)&arg + off, sizeof p);
            out.push_back({index, p, false, false});
        }
    }
}

struct launch_site {
    const char *kernel, *file;
    int line;
};

// Queues the launch on stream (runtime.cpp), or records it into the
// stream's capture; a bad configuration sets CUDA's last error, as a launch does.
void submit(const launch_site &site, const void *fn, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
            std::shared_ptr<const kernel_call> call, std::vector<pointer_arg> pointers);

template <class... P, class... A>
void launch(const launch_site &site, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
            A &&...args) {
    static_assert(sizeof...(P) == sizeof...(A), "a kernel takes as many arguments as it has parameters");
    auto call = std::make_shared<bound_call<P...>>(kernel, std::forward<A>(args)...);
    std::vector<pointer_arg> pointers;
    int i = 0;
    std::apply([&](const auto &...a) { (scan_argument(i++, a, pointers), ...); }, call->args);
    submit(site, (const void *)kernel, grid, block, smem, stream, std::move(call), std::move(pointers));
}

// ---------------------------------------------------------------- intrinsics

inline float int_as_float(int i) {
    float f;
    memcpy(&f, &i, sizeof f);
    return f;
}

// cvt.rni.s32.f32: to nearest, ties to even; NaN gives 0, out of range saturates.
inline int float2int_rn(float f) {
    if (f != f) return 0;
    if (f >= 2147483648.0f) return INT32_MAX;
    if (f <= -2147483648.0f) return INT32_MIN;
    return (int)nearbyintf(f);
}

inline int dp4a(int a, int b, int c) {
    for (int i = 0; i < 4; i++) c += (int8_t)(a >> 8 * i) * (int8_t)(b >> 8 * i);
    return c;
}

inline unsigned vsub4(unsigned a, unsigned b) {
    unsigned r = 0;
    for (int i = 0; i < 4; i++) r |= (unsigned)(uint8_t)((a >> 8 * i) - (b >> 8 * i)) << 8 * i;
    return r;
}

// Each rounded on its own: the emulated build compiles with
// -ffp-contract=off, so nothing is fused that the source does not fuse.
inline float fmul_rn(float a, float b) { return a * b; }
inline float fadd_rn(float a, float b) { return a + b; }
inline float fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }

}  // namespace emu

// CUDA's integer min, which device code has in the global namespace.
inline int min(int a, int b) { return b < a ? b : a; }

#define threadIdx (emu::thread_index())
#define blockIdx (emu::block_index())
#define blockDim (emu::block_dim())
#define gridDim (emu::grid_dim())
#define __syncthreads() emu::syncthreads(__FILE__, __LINE__)
#define __shfl_xor_sync(...) emu::shfl_xor_sync(__FILE__, __LINE__, __VA_ARGS__)
#define __ldg(p) emu::ldg((p), __FILE__, __LINE__)
#define __int_as_float emu::int_as_float
#define __float2int_rn emu::float2int_rn
#define __dp4a emu::dp4a
#define __vsub4 emu::vsub4
#define __fmul_rn emu::fmul_rn
#define __fadd_rn emu::fadd_rn
#define __fmaf_rn emu::fmaf_rn

// The kernels' launch, shared memory and __device__ arrays (cuda_common.cuh
// has nvcc's spelling of each).
#define SEAM_LAUNCH(kernel, grid, block, smem, stream, ...) \
    emu::launch(emu::launch_site{#kernel, __FILE__, __LINE__}, kernel, grid, block, smem, stream, __VA_ARGS__)
#define SEAM_SHARED(type, name, count)                                                                      \
    static char name##_emu_site;                                                                            \
    type *const name =                                                                                      \
        (type *)emu::shared_static(&name##_emu_site, sizeof(type) * (size_t)(count), alignof(type), #name)
#define SEAM_SHARED_DYNAMIC(type, name) type *const name = (type *)emu::shared_dynamic(alignof(type))
#define SEAM_DEVICE_ARRAY(type, name, count) emu::device_array_ref<type> name{(size_t)(count), #name, nullptr}

#endif

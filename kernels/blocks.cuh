// blocks.cuh — the block formats as the kernels read them (internal to kernels/).
//
// A row of weights is a run of blocks (QK weights in BYTES bytes; layouts in
// src/quant.h and src/quant.c). A kernel hands each block to CHUNKS lanes:
// chunk j of a block is one lane's share, decoded into 4-byte words of four
// signed 8-bit quants. The words form `runs` of consecutive weights that
// share one sub-block scale:
//
//   type   QK  BYTES CHUNKS  a chunk holds                      its bytes
//   Q4_K  256   144     8    2 runs of 16 (sub-blocks 2c, 2c+1)  qs[16j..+16]
//   Q5_K  256   176     8    as Q4_K                             + qh[16(j%2)..+16]
//   Q6_K  256   210    16    4 runs of 4 (one per 32-weight row) ql 2x4, qh 4
//   Q8_0   32    34     4    1 run of 8                          qs[8j..+8]
//   Q4_0   32    18     4    2 runs of 4 (weights 4j.., 16+4j..) qs[4j..+4]
//   Q5_0   32    22     4    as Q4_0                             + qh (4)
//
// The chunks of a block tile it exactly, and consecutive chunks read
// consecutive bytes, so a warp's lanes on consecutive chunks read the row
// coalesced. Q4_K, Q5_K (and the float types) are read in 16-byte words
// (their rows must be 16-byte aligned); Q6_K and the 32-wide types, whose
// blocks are only 2-byte aligned in a file, in 2-byte halves.
//
// A chunk's dot with the activation is integer-exact per run, as quant.c's
// per sub-block sums (int8 x int8 in __dp4a); scaling per chunk instead of
// per block changes only the order of the float sums. Dequantisation rounds
// exactly as seam_dequantize_row (bitwise equal). Everything is __host__
// __device__: the host runs the same decoders (seam_cuda_host_vec_dot), so a
// machine without a GPU still checks the bit layouts against quant.c.
#ifndef SEAM_BLOCKS_CUH
#define SEAM_BLOCKS_CUH

#include "cuda_common.cuh"

#define HD static __host__ __device__ __forceinline__
// Loops over a chunk's words must unroll, or its register arrays go to local
// memory; the host compiler does not know the pragma.
#ifdef __CUDA_ARCH__
#define UNROLL _Pragma("unroll")
#else
#define UNROLL
#endif

// ---------------------------------------------------------------- loads and byte arithmetic

HD uint32_t ld_u16(const uint8_t *p) {  // p 2-aligned
#ifdef __CUDA_ARCH__
    return __ldg((const unsigned short *)p);
#else
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
#endif
}

HD uint32_t ld_w2(const uint8_t *p) { return ld_u16(p) | ld_u16(p + 2) << 16; }  // 4 bytes, p 2-aligned

HD uint32_t ld_w4(const uint8_t *p) {  // p 4-aligned
#ifdef __CUDA_ARCH__
    return __ldg((const unsigned int *)p);
#else
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
#endif
}

// *p through the read-only cache (p aligned to its type).
template <class T> HD T ldg(const T *p) {
#ifdef __CUDA_ARCH__
    return __ldg(p);
#else
    return *p;
#endif
}

HD uint2 ld_w8(const uint8_t *p) {  // p 8-aligned
#ifdef __CUDA_ARCH__
    return __ldg((const uint2 *)p);
#else
    uint2 v;
    memcpy(&v, p, sizeof v);
    return v;
#endif
}

HD uint4 ld_w16(const uint8_t *p) {  // p 16-aligned
#ifdef __CUDA_ARCH__
    return __ldg((const uint4 *)p);
#else
    uint4 v;
    memcpy(&v, p, sizeof v);
    return v;
#endif
}

// c + the dot of the four signed bytes of a and b.
HD int dot4(uint32_t a, uint32_t b, int c) {
#ifdef __CUDA_ARCH__
    return __dp4a((int)a, (int)b, c);
#else
    for (int i = 0; i < 4; i++) c += (int8_t)(a >> 8 * i) * (int8_t)(b >> 8 * i);
    return c;
#endif
}

// a - b per byte, modulo 256 (no borrow between bytes).
HD uint32_t sub4(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
    return __vsub4(a, b);
#else
    uint32_t r = 0;
    for (int i = 0; i < 4; i++) r |= (uint32_t)(uint8_t)((a >> 8 * i) - (b >> 8 * i)) << 8 * i;
    return r;
#endif
}

// a * b rounded on its own: quant.c computes d * q - m with no fused
// multiply-add, and nvcc would fuse one (the host compiler, for x86-64
// without FMA, cannot).
HD float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

// ---------------------------------------------------------------- activations
//
// On the device an activation of n values is laid out as arrays, not as
// quant.c's blocks, so that the kernels read it in aligned 16-byte words
// (block_q8_K's quants start at byte 4 of 292): in one 16-byte aligned
// buffer, qs (n int8), then d (a float per block: Q8_K's, or Q8_0's f16
// value), then for Q8_K bsums (an int16 per 16 quants). The values are
// bitwise those of seam_quantize_row_q8_K / _q8_0. F16 and F32 activations
// are the n values themselves, in qs.
struct act_view {
    const int8_t *qs;
    const float *d;
    const int16_t *bsums;
};

template <int QK> static inline act_view act_layout(const void *act, int64_t n) {
    const int8_t *base = (const int8_t *)act;
    return {base, (const float *)(base + n), (const int16_t *)(base + n + 4 * (n / QK))};
}

// The RUNW words of a run of 4 RUNW quants at p, aligned to 4 RUNW bytes.
template <int RUNW> HD void ld_run(const int8_t *p, uint32_t w[RUNW]) {
    if constexpr (RUNW == 4) {
        const uint4 v = ld_w16((const uint8_t *)p);
        w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
    } else if constexpr (RUNW == 2) {
        const uint2 v = ld_w8((const uint8_t *)p);
        w[0] = v.x, w[1] = v.y;
    } else {
        static_assert(RUNW == 1, "runs are 4, 8 or 16 quants");
        w[0] = ld_w4((const uint8_t *)p);
    }
}

// Q8_K, the activation of the K types: 256 values a block.
struct act_q8_K {
    static constexpr int QK = 256;
    static constexpr bool BSUMS = true;
};

// Q8_0, the activation of the 32-wide types: 32 values a block.
struct act_q8_0 {
    static constexpr int QK = 32;
    static constexpr bool BSUMS = false;
};

// ---------------------------------------------------------------- quantised chunks

// One lane's chunk: NRUN runs of 4*RUNW weights. Weight i of run r is
// d * sc[r] * q - dmin * m[r], at position pos[r] + i of the block; the
// 32-wide types have sc 1 and no mins. Every pos[r] is a multiple of
// 4*RUNW, so the run's activation quants are one aligned load.
template <int NRUN, int RUNW, bool MINS> struct qchunk {
    uint32_t q[NRUN][RUNW];  // quants, four signed bytes a word, in weight order
    int pos[NRUN];           // block position of each run's first weight
    int sc[NRUN], m[NRUN];   // the run's sub-block scale and min (m only with MINS)
    float d, dmin;
};

// The chunk of block b . its activation: integer sums per run, then quant.c's
// float expression (for the 32-wide types, isum * (d * ad) is the same product).
template <class Act, int NRUN, int RUNW, bool MINS>
__host__ __device__ __forceinline__ float chunk_dot(const qchunk<NRUN, RUNW, MINS> &c, const act_view &a, int b) {
    static_assert(!MINS || (RUNW == 4 && Act::BSUMS), "a run with a min must be one 16-weight bsums group");
    const int8_t *aq = a.qs + (size_t)b * Act::QK;
    int isum = 0, msum = 0;
    UNROLL
    for (int r = 0; r < NRUN; r++) {
        uint32_t aw[RUNW];
        ld_run<RUNW>(aq + c.pos[r], aw);
        int dot = 0;
        UNROLL
        for (int k = 0; k < RUNW; k++) dot = dot4(c.q[r][k], aw[k], dot);
        isum += c.sc[r] * dot;
        if constexpr (MINS) msum += c.m[r] * ldg(a.bsums + (size_t)b * (Act::QK / 16) + c.pos[r] / 16);
    }
    const float ad = ldg(a.d + b);
    if constexpr (MINS) return c.d * ad * (float)isum - c.dmin * ad * (float)msum;
    return c.d * ad * (float)isum;
}

// A dequantised weight as stored: a float, or its f16 bits (the GEMM path's
// weights, rounded as seam_f32_to_f16).
HD void store_weight(float *y, float v) { *y = v; }
HD void store_weight(uint16_t *y, float v) { *y = f16_bits(v); }

// The chunk's weights into y (the block's QK outputs) times scale, rounded
// as seam_dequantize_row: ds * q - dm (dm = 0 for types without mins, which
// leaves ds * q bitwise), then the engine's separate scale multiply; Y
// uint16_t rounds that float to f16 (seam_dequantize_row_f16).
template <int NRUN, int RUNW, bool MINS, class Y>
__host__ __device__ __forceinline__ void chunk_dequant(const qchunk<NRUN, RUNW, MINS> &c, float scale, Y *y) {
    UNROLL
    for (int r = 0; r < NRUN; r++) {
        const float ds = c.d * (float)c.sc[r], dm = MINS ? c.dmin * (float)c.m[r] : 0.0f;
        UNROLL
        for (int k = 0; k < RUNW; k++) {
            UNROLL
            for (int i = 0; i < 4; i++)
                store_weight(y + c.pos[r] + 4 * k + i, (mul_rn(ds, (float)(int8_t)(c.q[r][k] >> 8 * i)) - dm) * scale);
        }
    }
}

// dot and dequant of a quantised type T (which supplies unpack) over Act.
template <class T, class A> struct quantised {
    typedef A Act;
    __host__ __device__ static float dot(const uint8_t *x, const act_view &a, int b, int j) {
        return chunk_dot<A>(T::unpack(x, j), a, b);
    }
    template <class Y> __host__ __device__ static void dequant(const uint8_t *x, int j, float scale, Y *y) {
        chunk_dequant(T::unpack(x, j), scale, y);
    }
};

// Scale and min of sub-block s (0..7) from the 12 scale bytes held in three
// words: the packing seam_q4k_scale_min (quant.h) decodes from memory,
// decoded here from registers, as byte loads would spend the L1 throughput
// the matvec lives on. seam_cuda_host_vec_dot checks the two agree.
HD void q4k_scale_min(uint32_t w0, uint32_t w1, uint32_t w2, int s, int *sc, int *m) {
    const int shift = 8 * (s & 3);
    const uint32_t b0 = w0 >> shift & 255, b1 = w1 >> shift & 255, b2 = w2 >> shift & 255;
    *sc = s < 4 ? b0 & 63 : (b2 & 15) | (b0 >> 6) << 4;
    *m = s < 4 ? b1 & 63 : (b2 >> 4) | (b1 >> 6) << 4;
}

// Q4_K / Q5_K chunk j: c = j/2, p0 = 16 (j%2). qs[16j..16j+16] holds, low
// nibbles, weights p0..p0+15 of sub-block 2c and, high nibbles, the same
// weights of sub-block 2c+1; Q5_K's fifth bits are bit s of qh[p0..p0+15].
// Header (16 bytes, one load): | d f16 | dmin f16 | scales[12] |, then
// (Q5_K) qh[32], then qs[128].
template <bool QH> HD qchunk<2, 4, true> unpack_k4(const uint8_t *x, int j) {
    qchunk<2, 4, true> c;
    const int lo = j & ~1, hi = lo + 1, p0 = 16 * (j & 1);
    const uint4 head = ld_w16(x);
    const uint4 qs = ld_w16(x + (QH ? 48 : 16) + 16 * j);
    const uint4 qh = QH ? ld_w16(x + 16 + p0) : make_uint4(0, 0, 0, 0);
    const uint32_t w[4] = {qs.x, qs.y, qs.z, qs.w}, h[4] = {qh.x, qh.y, qh.z, qh.w};
    UNROLL
    for (int k = 0; k < 4; k++) {
        c.q[0][k] = (w[k] & 0x0f0f0f0fu) | ((h[k] >> lo) & 0x01010101u) << 4;
        c.q[1][k] = (w[k] >> 4 & 0x0f0f0f0fu) | ((h[k] >> hi) & 0x01010101u) << 4;
    }
    c.pos[0] = 32 * lo + p0;
    c.pos[1] = 32 * hi + p0;
    q4k_scale_min(head.y, head.z, head.w, lo, &c.sc[0], &c.m[0]);
    q4k_scale_min(head.y, head.z, head.w, hi, &c.sc[1], &c.m[1]);
    c.d = f16_to_f32((uint16_t)head.x);
    c.dmin = f16_to_f32((uint16_t)(head.x >> 16));
    return c;
}

struct type_q4_K : quantised<type_q4_K, act_q8_K> {
    static constexpr int QK = 256, BYTES = 144, CHUNKS = 8, ALIGN = 16;
    static constexpr const char *NAME = "Q4_K";
    __host__ __device__ static qchunk<2, 4, true> unpack(const uint8_t *x, int j) { return unpack_k4<false>(x, j); }
};

struct type_q5_K : quantised<type_q5_K, act_q8_K> {
    static constexpr int QK = 256, BYTES = 176, CHUNKS = 8, ALIGN = 16;
    static constexpr const char *NAME = "Q5_K";
    __host__ __device__ static qchunk<2, 4, true> unpack(const uint8_t *x, int j) { return unpack_k4<true>(x, j); }
};

// Q6_K, | ql[128] | qh[64] | scales[16] int8 | d f16 |. Chunk j: half
// h = j/8 (ql += 64h, qh += 32h), l0 = 4 (j%8); for k = 0..3 its run k is
// weights l0+32k..+3 of the half: the low (k = 0, 1) or high (k = 2, 3)
// nibbles of ql[l0 + 32 (k%2)..], with bits 2k, 2k+1 of qh[l0..] on top,
// minus 32.
struct type_q6_K : quantised<type_q6_K, act_q8_K> {
    static constexpr int QK = 256, BYTES = 210, CHUNKS = 16, ALIGN = 2;
    static constexpr const char *NAME = "Q6_K";
    __host__ __device__ static qchunk<4, 1, false> unpack(const uint8_t *x, int j) {
        qchunk<4, 1, false> c;
        const int h = j / 8, l0 = 4 * (j % 8);
        const uint32_t ql[2] = {ld_w2(x + 64 * h + l0), ld_w2(x + 64 * h + l0 + 32)};
        const uint32_t qh = ld_w2(x + 128 + 32 * h + l0);
        UNROLL
        for (int k = 0; k < 4; k++) {
            const uint32_t nib = ql[k % 2] >> 4 * (k / 2) & 0x0f0f0f0fu;
            c.q[k][0] = sub4(nib | (qh >> 2 * k & 0x03030303u) << 4, 0x20202020u);
            c.pos[k] = 128 * h + l0 + 32 * k;
            c.sc[k] = (int8_t)x[192 + c.pos[k] / 16];
            c.m[k] = 0;
        }
        c.d = f16_to_f32(ld_u16(x + 208));
        c.dmin = 0.0f;
        return c;
    }
};

// Q8_0, | d f16 | qs[32] |: chunk j is qs[8j..8j+8].
struct type_q8_0 : quantised<type_q8_0, act_q8_0> {
    static constexpr int QK = 32, BYTES = 34, CHUNKS = 4, ALIGN = 2;
    static constexpr const char *NAME = "Q8_0";
    __host__ __device__ static qchunk<1, 2, false> unpack(const uint8_t *x, int j) {
        qchunk<1, 2, false> c;
        c.q[0][0] = ld_w2(x + 2 + 8 * j);
        c.q[0][1] = ld_w2(x + 6 + 8 * j);
        c.pos[0] = 8 * j;
        c.sc[0] = 1, c.m[0] = 0;
        c.d = f16_to_f32(ld_u16(x));
        c.dmin = 0.0f;
        return c;
    }
};

// Q4_0 | d f16 | qs[16] | and Q5_0 | d f16 | qh[4] | qs[16] |: chunk j is
// qs[4j..4j+4], whose low nibbles are weights 4j..4j+3 and high nibbles
// 16+4j..; Q5_0 adds bit e of qh (u32) as bit 4 of weight e.
template <bool QH> HD qchunk<2, 1, false> unpack_32(const uint8_t *x, int j) {
    qchunk<2, 1, false> c;
    const uint32_t w = ld_w2(x + (QH ? 6 : 2) + 4 * j), qh = QH ? ld_w2(x + 2) : 0;
    const uint32_t nib[2] = {w & 0x0f0f0f0fu, w >> 4 & 0x0f0f0f0fu};
    UNROLL
    for (int r = 0; r < 2; r++) {
        c.pos[r] = 16 * r + 4 * j;
        uint32_t fifth = 0;
        UNROLL
        for (int i = 0; i < 4; i++) fifth |= (qh >> (c.pos[r] + i) & 1u) << (8 * i + 4);
        c.q[r][0] = sub4(nib[r] | fifth, QH ? 0x10101010u : 0x08080808u);
        c.sc[r] = 1, c.m[r] = 0;
    }
    c.d = f16_to_f32(ld_u16(x));
    c.dmin = 0.0f;
    return c;
}

struct type_q4_0 : quantised<type_q4_0, act_q8_0> {
    static constexpr int QK = 32, BYTES = 18, CHUNKS = 4, ALIGN = 2;
    static constexpr const char *NAME = "Q4_0";
    __host__ __device__ static qchunk<2, 1, false> unpack(const uint8_t *x, int j) { return unpack_32<false>(x, j); }
};

struct type_q5_0 : quantised<type_q5_0, act_q8_0> {
    static constexpr int QK = 32, BYTES = 22, CHUNKS = 4, ALIGN = 2;
    static constexpr const char *NAME = "Q5_0";
    __host__ __device__ static qchunk<2, 1, false> unpack(const uint8_t *x, int j) { return unpack_32<true>(x, j); }
};

// ---------------------------------------------------------------- float types

// F16 and F32 rows in 16-byte "blocks" (8 halves, 4 floats), one chunk each;
// the activation has the weight's type (x rounded to f16 for F16). Products
// are exact in float (f16 x f16) or rounded once (f32), summed in float:
// quant.c sums them in double, so these match it to float rounding.
struct act_f16 {
    static constexpr int QK = 8;
};
struct act_f32 {
    static constexpr int QK = 4;
};

HD void halves(uint4 v, float f[8]) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    UNROLL
    for (int i = 0; i < 4; i++) {
        f[2 * i] = f16_to_f32((uint16_t)w[i]);
        f[2 * i + 1] = f16_to_f32((uint16_t)(w[i] >> 16));
    }
}

struct type_f16 {
    static constexpr int QK = 8, BYTES = 16, CHUNKS = 1, ALIGN = 16;
    static constexpr const char *NAME = "F16";
    typedef act_f16 Act;
    __host__ __device__ static float dot(const uint8_t *x, const act_view &a, int b, int) {
        float w[8], v[8], sum = 0.0f;
        halves(ld_w16(x), w);
        halves(ld_w16((const uint8_t *)a.qs + 16 * (size_t)b), v);
        UNROLL
        for (int i = 0; i < 8; i++) sum += w[i] * v[i];
        return sum;
    }
    template <class Y> __host__ __device__ static void dequant(const uint8_t *x, int, float scale, Y *y) {
        float w[8];
        halves(ld_w16(x), w);
        UNROLL
        for (int i = 0; i < 8; i++) store_weight(y + i, w[i] * scale);
    }
};

struct type_f32 {
    static constexpr int QK = 4, BYTES = 16, CHUNKS = 1, ALIGN = 16;
    static constexpr const char *NAME = "F32";
    typedef act_f32 Act;
    __host__ __device__ static float4 load(const uint8_t *x) {
        const uint4 u = ld_w16(x);
        float4 f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    __host__ __device__ static float dot(const uint8_t *x, const act_view &a, int b, int) {
        const float4 w = load(x), v = load((const uint8_t *)a.qs + 16 * (size_t)b);
        return w.x * v.x + w.y * v.y + w.z * v.z + w.w * v.w;
    }
    template <class Y> __host__ __device__ static void dequant(const uint8_t *x, int, float scale, Y *y) {
        const float4 w = load(x);
        store_weight(y, w.x * scale), store_weight(y + 1, w.y * scale);
        store_weight(y + 2, w.z * scale), store_weight(y + 3, w.w * scale);
    }
};

// ---------------------------------------------------------------- dispatch

// Calls f(T()) with the traits of a weight type; false for a type without a kernel.
template <class F> static bool with_type(uint32_t type, F &&f) {
    switch (type) {
    case GGML_TYPE_Q4_0: f(type_q4_0()); return true;
    case GGML_TYPE_Q5_0: f(type_q5_0()); return true;
    case GGML_TYPE_Q8_0: f(type_q8_0()); return true;
    case GGML_TYPE_Q4_K: f(type_q4_K()); return true;
    case GGML_TYPE_Q5_K: f(type_q5_K()); return true;
    case GGML_TYPE_Q6_K: f(type_q6_K()); return true;
    case GGML_TYPE_F16: f(type_f16()); return true;
    case GGML_TYPE_F32: f(type_f32()); return true;
    default: return false;
    }
}

#undef HD
#undef UNROLL
#endif

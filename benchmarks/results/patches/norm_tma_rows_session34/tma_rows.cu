// Feasibility: RMSNorm over rows off 16-byte boundaries, loads and stores by TMA.
// Input: flat 1-D map (box 256 elements) at the row's unaligned start coordinate.
// Output: one 2-D map per row phase (rows r = phases*q + p): base aligned down, dim0 = shift_p + n
// (clips the row's end), dim1 = q with stride phases*row_bytes.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
struct alignas(64) TMap { unsigned long long v[16]; };
struct OutMaps { TMap m[16]; int shift[16]; };

#define THREADS 128
#define BOX 256

__device__ __forceinline__ unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(unsigned long long* bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem_u32(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_expect(unsigned long long* bar, int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem_u32(bar)), "r"(bytes));
}
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, int parity) {
    asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}\n"
                 :: "r"(smem_u32(bar)), "r"(parity));
}
__device__ __forceinline__ void tma_load_1d(void* dst, const TMap* map, int c0, unsigned long long* bar) {
    asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2}], [%3];"
                 :: "r"(smem_u32(dst)), "l"(map), "r"(c0), "r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void tma_store_2d(const TMap* map, int c0, int c1, const void* src) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                 :: "l"(map), "r"(c0), "r"(c1), "r"(smem_u32(src)) : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;"); }
template <int N> __device__ __forceinline__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory");
}
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

template <typename Out> struct OutPack;
template <> struct OutPack<__nv_bfloat16> {
    static __device__ __forceinline__ uint4 pack(const float* v) {
        uint4 r; unsigned* w = (unsigned*)&r;
        #pragma unroll
        for (int i = 0; i < 4; ++i) {
            __nv_bfloat162 h = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
            w[i] = *(unsigned*)&h;
        }
        return r;
    }
    static constexpr int BYTES = 2;
};
template <> struct OutPack<__nv_fp8_e4m3> {
    static __device__ __forceinline__ uint2 pack(const float* v) {
        uint2 r; unsigned* w = (unsigned*)&r;
        #pragma unroll
        for (int i = 0; i < 2; ++i) {
            __nv_fp8x4_e4m3 q(make_float4(fminf(fmaxf(v[4*i], -448.f), 448.f), fminf(fmaxf(v[4*i+1], -448.f), 448.f),
                                          fminf(fmaxf(v[4*i+2], -448.f), 448.f), fminf(fmaxf(v[4*i+3], -448.f), 448.f)));
            w[i] = *(unsigned*)&q;
        }
        return r;
    }
    static constexpr int BYTES = 1;
};

// STAGES input stages of CHUNKS*BOX elements; 2 output buffers.
template <typename Out, int CHUNKS, int STAGES>
__device__ void rms_rows(const TMap* in_map, const OutMaps& outs, const __nv_bfloat16* __restrict__ weight,
                         int rows, int n, int phases, float eps, float inv_scale) {
    constexpr int ROW_ELEMS = CHUNKS * BOX;
    constexpr int VECS = ROW_ELEMS / 8 / THREADS;  // 16-byte input vectors a thread
    extern __shared__ __align__(1024) unsigned char smem[];
    __nv_bfloat16* in_buf = (__nv_bfloat16*)smem;                                   // STAGES * ROW_ELEMS
    Out* out_buf = (Out*)(smem + STAGES * ROW_ELEMS * 2);                            // 2 * ROW_ELEMS
    unsigned long long* full = (unsigned long long*)(smem + STAGES * ROW_ELEMS * 2 + 2 * ROW_ELEMS * sizeof(Out));
    float* red = (float*)(full + STAGES);
    const int tid = threadIdx.x;
    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) mbar_init(&full[s], 1);
        asm volatile("fence.mbarrier_init.release.cluster;");
    }
    __syncthreads();
    const int first = blockIdx.x, step = gridDim.x;
    auto issue = [&](int row, int stage) {
        mbar_expect(&full[stage], ROW_ELEMS * 2);
        long long c = (long long)row * n;
        #pragma unroll
        for (int k = 0; k < CHUNKS; ++k) tma_load_1d(in_buf + stage * ROW_ELEMS + k * BOX, in_map, (int)(c + k * BOX), &full[stage]);
    };
    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) { int row = first + s * step; if (row < rows) issue(row, s); }
    }
    // weight in registers: element j = 8 * (tid + THREADS * v) + e
    float wv[VECS][8];
    #pragma unroll
    for (int v = 0; v < VECS; ++v) {
        int j0 = 8 * (tid + THREADS * v);
        #pragma unroll
        for (int e = 0; e < 8; ++e) wv[v][e] = (j0 + e < n) ? __bfloat162float(weight[j0 + e]) : 0.f;
    }
    const float inv_n = 1.f / n;
    int it = 0;
    for (int row = first; row < rows; row += step, ++it) {
        const int stage = it % STAGES, parity = (it / STAGES) & 1;
        mbar_wait(&full[stage], parity);
        float x[VECS][8];
        float ss = 0.f;
        #pragma unroll
        for (int v = 0; v < VECS; ++v) {
            uint4 raw = *(const uint4*)(in_buf + stage * ROW_ELEMS + 8 * (tid + THREADS * v));
            const __nv_bfloat162* h = (const __nv_bfloat162*)&raw;
            #pragma unroll
            for (int e = 0; e < 4; ++e) { float2 f = __bfloat1622float2(h[e]); x[v][2*e] = f.x; x[v][2*e+1] = f.y; }
            int j0 = 8 * (tid + THREADS * v);
            #pragma unroll
            for (int e = 0; e < 8; ++e) { float t = (j0 + e < n) ? x[v][e] : 0.f; ss += t * t; }
        }
        #pragma unroll
        for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(0xffffffff, ss, o);
        const int obuf = it & 1;
        if ((tid & 31) == 0) red[obuf * 4 + (tid >> 5)] = ss;
        // everyone has read its slice of the stage: the barrier below lets thread 0 refill it
        // the output buffer obuf was last stored two rows ago: its reads must be done
        if (tid == 0) bulk_wait_read<1>();
        __syncthreads();
        if (tid == 0) { int nxt = row + STAGES * step; if (nxt < rows) issue(nxt, stage); }
        float tot = red[obuf * 4] + red[obuf * 4 + 1] + red[obuf * 4 + 2] + red[obuf * 4 + 3];
        float rstd = rsqrtf(tot * inv_n + eps) * inv_scale;
        #pragma unroll
        for (int v = 0; v < VECS; ++v) {
            float y[8];
            #pragma unroll
            for (int e = 0; e < 8; ++e) y[e] = x[v][e] * rstd * wv[v][e];
            Out* dst = out_buf + obuf * ROW_ELEMS + 8 * (tid + THREADS * v);
            if constexpr (OutPack<Out>::BYTES == 2) *(uint4*)dst = OutPack<Out>::pack(y);
            else *(uint2*)dst = OutPack<Out>::pack(y);
        }
        fence_async_smem();
        __syncthreads();
        if (tid == 0) {
            const int p = row % phases, q = row / phases;
            const int box_elems = BOX;   // store box: 256 elements (the box limit)
            #pragma unroll
            for (int k = 0; k < ROW_ELEMS / box_elems; ++k)
                tma_store_2d(&outs.m[p], outs.shift[p] + k * box_elems, q, out_buf + obuf * ROW_ELEMS + k * box_elems);
            bulk_commit();
        }
    }
    if (tid == 0) bulk_wait_read<0>();
}

extern "C" __global__ void __launch_bounds__(THREADS) rms_bf16(const __grid_constant__ TMap in_map, const __grid_constant__ OutMaps outs,
        const __nv_bfloat16* __restrict__ weight, int rows, int n, int phases, float eps, float inv_scale) {
    rms_rows<__nv_bfloat16, 16, STAGES_BF16>(&in_map, outs, weight, rows, n, phases, eps, inv_scale);
}
extern "C" __global__ void __launch_bounds__(THREADS) rms_fp8(const __grid_constant__ TMap in_map, const __grid_constant__ OutMaps outs,
        const __nv_bfloat16* __restrict__ weight, int rows, int n, int phases, float eps, float inv_scale) {
    rms_rows<__nv_fp8_e4m3, 16, STAGES_FP8>(&in_map, outs, weight, rows, n, phases, eps, inv_scale);
}

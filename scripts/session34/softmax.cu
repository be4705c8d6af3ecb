// sinter kernel k0_softmax: softmax
// fused graph nodes: %1
// reduce persistent x8 block 256 vec4: 8192 rows of 8192, 2 reductions, 4 elements per thread and step, 256 threads per block

// ---- helpers (sinter's scalar semantics) ----
// N consecutive elements of T as one aligned access (16-byte vector loads and stores)
template <typename T, int N>
struct alignas(sizeof(T) * N < 16 ? sizeof(T) * N : 16) sinter_vec {
    T v[N];
};

// max propagating NaN (torch, ONNX)
static __device__ __forceinline__ float sinter_fmax(float a, float b) {
    return (isnan(a) || isnan(b)) ? __int_as_float(0x7fc00000) : fmaxf(a, b);
}

extern "C" __global__ void __launch_bounds__(256) k0_softmax(
    const float* __restrict__ a0, // f32[67108864] (b0), read
    float* __restrict__ a1) // f32[67108864] (b1), written
{
    // one block per row: 8192 rows of 8192 elements, 4 consecutive elements per thread and step
    const unsigned row = blockIdx.x;
    const unsigned tid = threadIdx.x;
    const unsigned warp = threadIdx.x / 32u;
    const unsigned wlane = threadIdx.x % 32u;
    float c0[8][4]; // v0, kept in registers for the later phases
    // ---- reduction 0: Max of v0 in f32
    float acc0 = (-__int_as_float(0x7f800000));
    {
        const unsigned red0 = tid * 4u;
        const sinter_vec<float, 4> x0 = *reinterpret_cast<const sinter_vec<float, 4>*>(a0 + row * 8192u + red0);
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = x0.v[j];
            c0[0][j] = v0;
            acc0 = sinter_fmax(acc0, v0);
        }
    }
    {
        const unsigned red0 = (tid + 256u) * 4u;
        const sinter_vec<float, 4> x0 = *reinterpret_cast<const sinter_vec<float, 4>*>(a0 + row * 8192u + red0);
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = x0.v[j];
            c0[1][j] = v0;
            acc0 = sinter_fmax(acc0, v0);
        }
    }
    {
        const unsigned red0 = (tid + 512u) * 4u;
        const sinter_vec<float, 4> x0 = *reinterpret_cast<const sinter_vec<float, 4>*>(a0 + row * 8192u + red0);
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = x0.v[j];
            c0[2][j] = v0;
            acc0 = sinter_fmax(acc0, v0);
        }
    }
    {
        const unsigned red0 = (tid + 768u) * 4u;
        const sinter_vec<float, 4> x0 = *reinterpret_cast<const sinter_vec<float, 4>*>(a0 + row * 8192u + red0);
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = x0.v[j];
            c0[3][j] = v0;
            acc0 = sinter_fmax(acc0, v0);
        }
    }
    {
        const unsigned red0 = (tid + 1024u) * 4u;
        const sinter_vec<float, 4> x0 = *reinterpret_cast<const sinter_vec<float, 4>*>(a0 + row * 8192u + red0);
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = x0.v[j];
            c0[4][j] = v0;
            acc0 = sinter_fmax(acc0, v0);
        }
    }
    {
        const unsigned red0 = (tid + 1280u) * 4u;
        const sinter_vec<float, 4> x0 = *reinterpret_cast<const sinter_vec<float, 4>*>(a0 + row * 8192u + red0);
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = x0.v[j];
            c0[5][j] = v0;
            acc0 = sinter_fmax(acc0, v0);
        }
    }
    {
        const unsigned red0 = (tid + 1536u) * 4u;
        const sinter_vec<float, 4> x0 = *reinterpret_cast<const sinter_vec<float, 4>*>(a0 + row * 8192u + red0);
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = x0.v[j];
            c0[6][j] = v0;
            acc0 = sinter_fmax(acc0, v0);
        }
    }
    {
        const unsigned red0 = (tid + 1792u) * 4u;
        const sinter_vec<float, 4> x0 = *reinterpret_cast<const sinter_vec<float, 4>*>(a0 + row * 8192u + red0);
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = x0.v[j];
            c0[7][j] = v0;
            acc0 = sinter_fmax(acc0, v0);
        }
    }
    // combine reduction 0 across the block
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float other = __shfl_xor_sync(0xffffffffu, acc0, o);
        acc0 = sinter_fmax(acc0, other);
    }
    __shared__ float sh0[8];
    if (wlane == 0u) {
        sh0[warp] = acc0;
    }
    __syncthreads();
    acc0 = wlane < 8u ? sh0[wlane] : (-__int_as_float(0x7f800000));
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float other = __shfl_xor_sync(0xffffffffu, acc0, o);
        acc0 = sinter_fmax(acc0, other);
    }
    const float r0 = acc0;
    // ---- reduction 1: Sum of v3 in f32
    const float v1 = r0;
    float acc1 = 0.0f;
    {
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = c0[0][j];
            const float v2 = v0 - v1;
            const float v3 = expf(v2);
            acc1 = acc1 + v3;
        }
    }
    {
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = c0[1][j];
            const float v2 = v0 - v1;
            const float v3 = expf(v2);
            acc1 = acc1 + v3;
        }
    }
    {
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = c0[2][j];
            const float v2 = v0 - v1;
            const float v3 = expf(v2);
            acc1 = acc1 + v3;
        }
    }
    {
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = c0[3][j];
            const float v2 = v0 - v1;
            const float v3 = expf(v2);
            acc1 = acc1 + v3;
        }
    }
    {
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = c0[4][j];
            const float v2 = v0 - v1;
            const float v3 = expf(v2);
            acc1 = acc1 + v3;
        }
    }
    {
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = c0[5][j];
            const float v2 = v0 - v1;
            const float v3 = expf(v2);
            acc1 = acc1 + v3;
        }
    }
    {
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = c0[6][j];
            const float v2 = v0 - v1;
            const float v3 = expf(v2);
            acc1 = acc1 + v3;
        }
    }
    {
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = c0[7][j];
            const float v2 = v0 - v1;
            const float v3 = expf(v2);
            acc1 = acc1 + v3;
        }
    }
    // combine reduction 1 across the block
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float other = __shfl_xor_sync(0xffffffffu, acc1, o);
        acc1 = acc1 + other;
    }
    __shared__ float sh1[8];
    if (wlane == 0u) {
        sh1[warp] = acc1;
    }
    __syncthreads();
    acc1 = wlane < 8u ? sh1[wlane] : 0.0f;
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float other = __shfl_xor_sync(0xffffffffu, acc1, o);
        acc1 = acc1 + other;
    }
    const float r1 = acc1;
    // ---- element stores
    const float v4 = r1;
    {
        const unsigned red0 = tid * 4u;
        sinter_vec<float, 4> o0;
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = c0[0][j];
            const float v2 = v0 - v1;
            const float v3 = expf(v2);
            const float v5 = v3 / v4;
            o0.v[j] = v5;
        }
        *reinterpret_cast<sinter_vec<float, 4>*>(a1 + row * 8192u + red0) = o0;
    }
    {
        const unsigned red0 = (tid + 256u) * 4u;
        sinter_vec<float, 4> o0;
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = c0[1][j];
            const float v2 = v0 - v1;
            const float v3 = expf(v2);
            const float v5 = v3 / v4;
            o0.v[j] = v5;
        }
        *reinterpret_cast<sinter_vec<float, 4>*>(a1 + row * 8192u + red0) = o0;
    }
    {
        const unsigned red0 = (tid + 512u) * 4u;
        sinter_vec<float, 4> o0;
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = c0[2][j];
            const float v2 = v0 - v1;
            const float v3 = expf(v2);
            const float v5 = v3 / v4;
            o0.v[j] = v5;
        }
        *reinterpret_cast<sinter_vec<float, 4>*>(a1 + row * 8192u + red0) = o0;
    }
    {
        const unsigned red0 = (tid + 768u) * 4u;
        sinter_vec<float, 4> o0;
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = c0[3][j];
            const float v2 = v0 - v1;
            const float v3 = expf(v2);
            const float v5 = v3 / v4;
            o0.v[j] = v5;
        }
        *reinterpret_cast<sinter_vec<float, 4>*>(a1 + row * 8192u + red0) = o0;
    }
    {
        const unsigned red0 = (tid + 1024u) * 4u;
        sinter_vec<float, 4> o0;
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = c0[4][j];
            const float v2 = v0 - v1;
            const float v3 = expf(v2);
            const float v5 = v3 / v4;
            o0.v[j] = v5;
        }
        *reinterpret_cast<sinter_vec<float, 4>*>(a1 + row * 8192u + red0) = o0;
    }
    {
        const unsigned red0 = (tid + 1280u) * 4u;
        sinter_vec<float, 4> o0;
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = c0[5][j];
            const float v2 = v0 - v1;
            const float v3 = expf(v2);
            const float v5 = v3 / v4;
            o0.v[j] = v5;
        }
        *reinterpret_cast<sinter_vec<float, 4>*>(a1 + row * 8192u + red0) = o0;
    }
    {
        const unsigned red0 = (tid + 1536u) * 4u;
        sinter_vec<float, 4> o0;
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = c0[6][j];
            const float v2 = v0 - v1;
            const float v3 = expf(v2);
            const float v5 = v3 / v4;
            o0.v[j] = v5;
        }
        *reinterpret_cast<sinter_vec<float, 4>*>(a1 + row * 8192u + red0) = o0;
    }
    {
        const unsigned red0 = (tid + 1792u) * 4u;
        sinter_vec<float, 4> o0;
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = c0[7][j];
            const float v2 = v0 - v1;
            const float v3 = expf(v2);
            const float v5 = v3 / v4;
            o0.v[j] = v5;
        }
        *reinterpret_cast<sinter_vec<float, 4>*>(a1 + row * 8192u + red0) = o0;
    }
}

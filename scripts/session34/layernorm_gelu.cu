// sinter kernel k0_layer_norm_gelu: layer_norm, gelu
// fused graph nodes: %3 %4
// reduce persistent x4 block 256 vec4: 8192 rows of 4096, 2 reductions, 4 elements per thread and step, 256 threads per block

// ---- helpers (sinter's scalar semantics) ----
// N consecutive elements of T as one aligned access (16-byte vector loads and stores)
template <typename T, int N>
struct alignas(sizeof(T) * N < 16 ? sizeof(T) * N : 16) sinter_vec {
    T v[N];
};

extern "C" __global__ void __launch_bounds__(256) k0_layer_norm_gelu(
    const float* __restrict__ a0, // f32[33554432] (b0), read
    const float* __restrict__ a1, // f32[4096] (b1), read
    const float* __restrict__ a2, // f32[4096] (b2), read
    float* __restrict__ a3) // f32[33554432] (b3), written
{
    // one block per row: 8192 rows of 4096 elements, 4 consecutive elements per thread and step
    const unsigned row = blockIdx.x;
    const unsigned tid = threadIdx.x;
    const unsigned warp = threadIdx.x / 32u;
    const unsigned wlane = threadIdx.x % 32u;
    float c0[4][4]; // v0, kept in registers for the later phases
    // ---- reduction 0: Sum of v0 in f32
    float acc0 = 0.0f;
    {
        const unsigned red0 = tid * 4u;
        const sinter_vec<float, 4> x0 = *reinterpret_cast<const sinter_vec<float, 4>*>(a0 + row * 4096u + red0);
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = x0.v[j];
            c0[0][j] = v0;
            acc0 = acc0 + v0;
        }
    }
    {
        const unsigned red0 = (tid + 256u) * 4u;
        const sinter_vec<float, 4> x0 = *reinterpret_cast<const sinter_vec<float, 4>*>(a0 + row * 4096u + red0);
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = x0.v[j];
            c0[1][j] = v0;
            acc0 = acc0 + v0;
        }
    }
    {
        const unsigned red0 = (tid + 512u) * 4u;
        const sinter_vec<float, 4> x0 = *reinterpret_cast<const sinter_vec<float, 4>*>(a0 + row * 4096u + red0);
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = x0.v[j];
            c0[2][j] = v0;
            acc0 = acc0 + v0;
        }
    }
    {
        const unsigned red0 = (tid + 768u) * 4u;
        const sinter_vec<float, 4> x0 = *reinterpret_cast<const sinter_vec<float, 4>*>(a0 + row * 4096u + red0);
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = x0.v[j];
            c0[3][j] = v0;
            acc0 = acc0 + v0;
        }
    }
    // combine reduction 0 across the block
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float other = __shfl_xor_sync(0xffffffffu, acc0, o);
        acc0 = acc0 + other;
    }
    __shared__ float sh0[8];
    if (wlane == 0u) {
        sh0[warp] = acc0;
    }
    __syncthreads();
    acc0 = wlane < 8u ? sh0[wlane] : 0.0f;
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float other = __shfl_xor_sync(0xffffffffu, acc0, o);
        acc0 = acc0 + other;
    }
    const float r0 = acc0;
    // ---- reduction 1: Sum of v5 in f32
    const float v1 = r0;
    const float v2 = 0.00024414063f;
    const float v3 = v1 * v2;
    float acc1 = 0.0f;
    {
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = c0[0][j];
            const float v4 = v0 - v3;
            const float v5 = v4 * v4;
            acc1 = acc1 + v5;
        }
    }
    {
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = c0[1][j];
            const float v4 = v0 - v3;
            const float v5 = v4 * v4;
            acc1 = acc1 + v5;
        }
    }
    {
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = c0[2][j];
            const float v4 = v0 - v3;
            const float v5 = v4 * v4;
            acc1 = acc1 + v5;
        }
    }
    {
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = c0[3][j];
            const float v4 = v0 - v3;
            const float v5 = v4 * v4;
            acc1 = acc1 + v5;
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
    const float v6 = r1;
    const float v7 = v6 * v2;
    const float v8 = 1e-5f;
    const float v9 = v7 + v8;
    const float v10 = 1.0f / sqrtf(v9);
    const float v16 = 0.5f;
    const float v18 = 0.70710677f;
    const float v21 = 1.0f;
    {
        const unsigned red0 = tid * 4u;
        const sinter_vec<float, 4> x12 = *reinterpret_cast<const sinter_vec<float, 4>*>(a1 + red0);
        const sinter_vec<float, 4> x14 = *reinterpret_cast<const sinter_vec<float, 4>*>(a2 + red0);
        sinter_vec<float, 4> o0;
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = c0[0][j];
            const float v4 = v0 - v3;
            const float v11 = v4 * v10;
            const float v12 = x12.v[j];
            const float v13 = v11 * v12;
            const float v14 = x14.v[j];
            const float v15 = v13 + v14;
            const float v17 = v15 * v16;
            const float v19 = v15 * v18;
            const float v20 = erff(v19);
            const float v22 = v20 + v21;
            const float v23 = v17 * v22;
            o0.v[j] = v23;
        }
        *reinterpret_cast<sinter_vec<float, 4>*>(a3 + row * 4096u + red0) = o0;
    }
    {
        const unsigned red0 = (tid + 256u) * 4u;
        const sinter_vec<float, 4> x12 = *reinterpret_cast<const sinter_vec<float, 4>*>(a1 + red0);
        const sinter_vec<float, 4> x14 = *reinterpret_cast<const sinter_vec<float, 4>*>(a2 + red0);
        sinter_vec<float, 4> o0;
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = c0[1][j];
            const float v4 = v0 - v3;
            const float v11 = v4 * v10;
            const float v12 = x12.v[j];
            const float v13 = v11 * v12;
            const float v14 = x14.v[j];
            const float v15 = v13 + v14;
            const float v17 = v15 * v16;
            const float v19 = v15 * v18;
            const float v20 = erff(v19);
            const float v22 = v20 + v21;
            const float v23 = v17 * v22;
            o0.v[j] = v23;
        }
        *reinterpret_cast<sinter_vec<float, 4>*>(a3 + row * 4096u + red0) = o0;
    }
    {
        const unsigned red0 = (tid + 512u) * 4u;
        const sinter_vec<float, 4> x12 = *reinterpret_cast<const sinter_vec<float, 4>*>(a1 + red0);
        const sinter_vec<float, 4> x14 = *reinterpret_cast<const sinter_vec<float, 4>*>(a2 + red0);
        sinter_vec<float, 4> o0;
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = c0[2][j];
            const float v4 = v0 - v3;
            const float v11 = v4 * v10;
            const float v12 = x12.v[j];
            const float v13 = v11 * v12;
            const float v14 = x14.v[j];
            const float v15 = v13 + v14;
            const float v17 = v15 * v16;
            const float v19 = v15 * v18;
            const float v20 = erff(v19);
            const float v22 = v20 + v21;
            const float v23 = v17 * v22;
            o0.v[j] = v23;
        }
        *reinterpret_cast<sinter_vec<float, 4>*>(a3 + row * 4096u + red0) = o0;
    }
    {
        const unsigned red0 = (tid + 768u) * 4u;
        const sinter_vec<float, 4> x12 = *reinterpret_cast<const sinter_vec<float, 4>*>(a1 + red0);
        const sinter_vec<float, 4> x14 = *reinterpret_cast<const sinter_vec<float, 4>*>(a2 + red0);
        sinter_vec<float, 4> o0;
        #pragma unroll
        for (unsigned j = 0; j < 4u; ++j) {
            const float v0 = c0[3][j];
            const float v4 = v0 - v3;
            const float v11 = v4 * v10;
            const float v12 = x12.v[j];
            const float v13 = v11 * v12;
            const float v14 = x14.v[j];
            const float v15 = v13 + v14;
            const float v17 = v15 * v16;
            const float v19 = v15 * v18;
            const float v20 = erff(v19);
            const float v22 = v20 + v21;
            const float v23 = v17 * v22;
            o0.v[j] = v23;
        }
        *reinterpret_cast<sinter_vec<float, 4>*>(a3 + row * 4096u + red0) = o0;
    }
}

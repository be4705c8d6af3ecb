// sinter generic kernel sinter_attn_decode_f16_d128_causal: fused attention (f16 operands, d 128, causal), every extent a run-time parameter
// decode attention run-time extents, d 128 dv 128 (f16): a block per head, 8 warps, 16 lanes x 8 elements per key, 2 keys per warp, unrolled 8
// 16-bit floats: storage and round-to-nearest-even conversions (no cuda_fp16.h / cuda_bf16.h)
struct __align__(2) sinter_f16 { unsigned short bits; };
static __device__ __forceinline__ float sinter_f16_to_f32(sinter_f16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
    return f;
}
static __device__ __forceinline__ sinter_f16 sinter_f32_to_f16(float f) {
    sinter_f16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
    return h;
}

extern "C" __global__ void __launch_bounds__(256) sinter_attn_decode_f16_d128_causal(
    const sinter_f16* __restrict__ a0 /* Q */,
    const sinter_f16* __restrict__ a1 /* K */,
    const sinter_f16* __restrict__ a2 /* V */,
    sinter_f16* __restrict__ a3 /* the output */,
    const unsigned sx_heads,
    const unsigned sx_m,
    const unsigned sx_kv,
    const unsigned sx_tiles_m,
    const unsigned sx_n_work,
    const unsigned sx_sec,
    const unsigned sx_co,
    const unsigned sx_q_off,
    const unsigned sx_q_sb,
    const unsigned sx_q_sh,
    const unsigned sx_q_sr,
    const unsigned sx_k_off,
    const unsigned sx_k_sb,
    const unsigned sx_k_sh,
    const unsigned sx_k_sr,
    const unsigned sx_k_g,
    const unsigned sx_v_off,
    const unsigned sx_v_sb,
    const unsigned sx_v_sh,
    const unsigned sx_v_sr,
    const unsigned sx_v_g,
    const unsigned sx_y_off,
    const unsigned sx_y_sb,
    const unsigned sx_y_sh,
    const unsigned sx_y_sr,
    const float sx_sl,
    const unsigned sx_sec_tiles,
    const unsigned sx_heads_mul,
    const unsigned sx_heads_sh,
    const unsigned sx_tiles_m_mul,
    const unsigned sx_tiles_m_sh,
    const unsigned sx_sec_mul,
    const unsigned sx_sec_sh,
    const unsigned sx_sec_tiles_mul,
    const unsigned sx_sec_tiles_sh,
    const unsigned sx_k_g_mul,
    const unsigned sx_k_g_sh,
    const unsigned sx_v_g_mul,
    const unsigned sx_v_g_sh,
    const float sx_scale)
{
    // decode attention run-time extents, d 128 dv 128 (f16): a block per head, 8 warps, 16 lanes x 8 elements per key, 2 keys per warp, unrolled 8
    const float NINF = -__int_as_float(0x7f800000);
    __shared__ float red_m[8][1], red_l[8][1], red_o[8][1][128];
    const unsigned gi = blockIdx.x;
    const unsigned bh = gi;
    const unsigned tid = threadIdx.x, lane = tid % 32u, warp = tid / 32u;
    const unsigned sub = lane % 16u, grp = lane / 16u;
    auto sinter_div = [](unsigned x, unsigned d, unsigned mul, unsigned sh) { return d == 1u ? x : __umulhi(x, mul) >> sh; };
    const unsigned q_base = sx_q_off + sinter_div(bh, sx_heads, sx_heads_mul, sx_heads_sh) * sx_q_sb + (bh - sinter_div(bh, sx_heads, sx_heads_mul, sx_heads_sh) * sx_heads) * sx_q_sh;
    const unsigned k_base = sx_k_off + sinter_div(bh, sx_heads, sx_heads_mul, sx_heads_sh) * sx_k_sb + sinter_div((bh - sinter_div(bh, sx_heads, sx_heads_mul, sx_heads_sh) * sx_heads), sx_k_g, sx_k_g_mul, sx_k_g_sh) * sx_k_sh;
    const unsigned v_base = sx_v_off + sinter_div(bh, sx_heads, sx_heads_mul, sx_heads_sh) * sx_v_sb + sinter_div((bh - sinter_div(bh, sx_heads, sx_heads_mul, sx_heads_sh) * sx_heads), sx_v_g, sx_v_g_mul, sx_v_g_sh) * sx_v_sh;
    typedef sinter_f16 T;
    float qv[1][1][8];
    #pragma unroll
    for (unsigned qi = 0; qi < 1u; ++qi) {
        #pragma unroll
        for (unsigned r = 0; r < 1u; ++r) {
            const unsigned ch = sub + r * 16u;
            uint4 x = make_uint4(0u, 0u, 0u, 0u);
            if (ch < 16u) x = __ldg(reinterpret_cast<const uint4*>(a0 + (q_base + qi * sx_q_sr + ch * 8u)));
            #pragma unroll
            for (unsigned e = 0; e < 8u; ++e) qv[qi][r][e] = sinter_f16_to_f32(reinterpret_cast<const T*>(&x)[e]);
        }
    }
    float mx[1], l[1], o[1][1][8];
    #pragma unroll
    for (unsigned qi = 0; qi < 1u; ++qi) {
        mx[qi] = NINF; l[qi] = 0.0f;
        #pragma unroll
        for (unsigned r = 0; r < 1u; ++r) {
            #pragma unroll
            for (unsigned e = 0; e < 8u; ++e) o[qi][r][e] = 0.0f;
        }
    }
    const unsigned kend = min(sx_kv, sx_m + sx_co);
    for (unsigned kw = warp * 2u; kw < kend; kw += 128u) {
        const unsigned kb = kw + grp;
        uint4 kx[8][1], vx[8][1];
        #pragma unroll
        for (unsigned u = 0; u < 8u; ++u) {
            const unsigned j = kb + u * 16u;
            const bool in = j < kend;
            #pragma unroll
            for (unsigned r = 0; r < 1u; ++r) {
                const unsigned ch = sub + r * 16u;
                kx[u][r] = make_uint4(0u, 0u, 0u, 0u);
                if (in && ch < 16u) kx[u][r] = __ldg(reinterpret_cast<const uint4*>(a1 + (k_base + j * sx_k_sr + ch * 8u)));
            }
            #pragma unroll
            for (unsigned r = 0; r < 1u; ++r) {
                const unsigned ch = sub + r * 16u;
                vx[u][r] = make_uint4(0u, 0u, 0u, 0u);
                if (in && ch < 16u) vx[u][r] = __ldg(reinterpret_cast<const uint4*>(a2 + (v_base + j * sx_v_sr + ch * 8u)));
            }
        }
        #pragma unroll
        for (unsigned qi = 0; qi < 1u; ++qi) {
            float sc[8];
            #pragma unroll
            for (unsigned u = 0; u < 8u; ++u) {
                float dot = 0.0f;
                #pragma unroll
                for (unsigned r = 0; r < 1u; ++r) {
                    #pragma unroll
                    for (unsigned e = 0; e < 8u; ++e) dot = fmaf(qv[qi][r][e], sinter_f16_to_f32(reinterpret_cast<const T*>(&kx[u][r])[e]), dot);
                }
                #pragma unroll
                for (unsigned x = 1u; x < 16u; x *= 2u) dot += __shfl_xor_sync(0xffffffffu, dot, x);
                const unsigned key = kb + u * 16u;
                const unsigned m = qi;
                sc[u] = key < kend && key <= m + sx_co ? dot * sx_scale : NINF;
            }
            float mn = mx[qi];
            #pragma unroll
            for (unsigned u = 0; u < 8u; ++u) mn = fmaxf(mn, sc[u]);
            const float mu = mn == NINF ? 0.0f : mn;
            const float alpha = expf(mx[qi] - mu);
            mx[qi] = mn;
            l[qi] *= alpha;
            #pragma unroll
            for (unsigned r = 0; r < 1u; ++r) {
                #pragma unroll
                for (unsigned e = 0; e < 8u; ++e) o[qi][r][e] *= alpha;
            }
            #pragma unroll
            for (unsigned u = 0; u < 8u; ++u) {
                const float p = expf(sc[u] - mu);
                l[qi] += p;
                const float pr = sinter_f16_to_f32(sinter_f32_to_f16(p));
                #pragma unroll
                for (unsigned r = 0; r < 1u; ++r) {
                    #pragma unroll
                    for (unsigned e = 0; e < 8u; ++e) o[qi][r][e] = fmaf(pr, sinter_f16_to_f32(reinterpret_cast<const T*>(&vx[u][r])[e]), o[qi][r][e]);
                }
            }
        }
    }
    #pragma unroll
    for (unsigned qi = 0; qi < 1u; ++qi) {
        #pragma unroll
        for (unsigned x = 16u; x < 32u; x *= 2u) {
            const float mo = __shfl_xor_sync(0xffffffffu, mx[qi], x);
            const float lo = __shfl_xor_sync(0xffffffffu, l[qi], x);
            const float mn = fmaxf(mx[qi], mo);
            const float mu = mn == NINF ? 0.0f : mn;
            const float f0 = expf(mx[qi] - mu), f1 = expf(mo - mu);
            mx[qi] = mn;
            l[qi] = l[qi] * f0 + lo * f1;
            #pragma unroll
            for (unsigned r = 0; r < 1u; ++r) {
                #pragma unroll
                for (unsigned e = 0; e < 8u; ++e) o[qi][r][e] = o[qi][r][e] * f0 + __shfl_xor_sync(0xffffffffu, o[qi][r][e], x) * f1;
            }
        }
        if (grp == 0u) {
            if (sub == 0u) { red_m[warp][qi] = mx[qi]; red_l[warp][qi] = l[qi]; }
            #pragma unroll
            for (unsigned r = 0; r < 1u; ++r) {
                const unsigned ch = sub + r * 16u;
                if (ch < 16u) {
                    #pragma unroll
                    for (unsigned e = 0; e < 8u; ++e) red_o[warp][qi][ch * 8u + e] = o[qi][r][e];
                }
            }
        }
    }
    __syncthreads();
    const unsigned y_base = sx_y_off + sinter_div(bh, sx_heads, sx_heads_mul, sx_heads_sh) * sx_y_sb + (bh - sinter_div(bh, sx_heads, sx_heads_mul, sx_heads_sh) * sx_heads) * sx_y_sh;
    for (unsigned idx = tid; idx < 128u; idx += 256u) {
        const unsigned qi = idx / 128u;
        const unsigned m = qi;
        const unsigned n = idx % 128u;
        float mn = NINF;
        for (unsigned x = 0; x < 8u; ++x) mn = fmaxf(mn, red_m[x][qi]);
        const float mu = mn == NINF ? 0.0f : mn;
        float lt = 0.0f, ot = 0.0f;
        for (unsigned x = 0; x < 8u; ++x) {
            const float f = expf(red_m[x][qi] - mu);
            lt += red_l[x][qi] * f;
            ot += red_o[x][qi][n] * f;
        }
        a3[y_base + m * sx_y_sr + n] = sinter_f32_to_f16((ot / lt));
    }
}

// sinter generic kernel sinter_attn_bf16_d64: fused attention (bf16 operands, d 64), every extent a run-time parameter
// tensor-core attention run-time extents, d 64 dv 64 (bf16 -> f32, wgmma m64nNk16, 128-byte swizzled tiles), tile 64x128, 4 warps of 16 rows and a TMA producer (mbarriers, ping-pong), 3 stages (107616 bytes), Q in shared memory
// 16-bit floats: storage and round-to-nearest-even conversions (no cuda_fp16.h / cuda_bf16.h)
struct __align__(2) sinter_bf16 { unsigned short bits; };
static __device__ __forceinline__ unsigned sinter_pack_bf16x2(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// ---- helpers (sinter's scalar semantics) ----
// sinter: compiled alone: a tensor-core template
// N consecutive elements of T as one aligned access (16-byte vector loads and stores)
template <typename T, int N>
struct alignas(sizeof(T) * N < 16 ? sizeof(T) * N : 16) sinter_vec {
    T v[N];
};

// 4 or 8 bytes global -> shared without passing through registers; zero when src_bytes is 0
template <typename T>
static __device__ __forceinline__ void sinter_cp_async4(unsigned dst, const T* src, unsigned src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
template <typename T>
static __device__ __forceinline__ void sinter_cp_async8(unsigned dst, const T* src, unsigned src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
static __device__ __forceinline__ void sinter_cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
static __device__ __forceinline__ void sinter_cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}

// 16 bytes global -> shared without passing through registers; bytes past src_bytes are zero
template <typename T>
static __device__ __forceinline__ void sinter_cp_async16(unsigned dst, const T* src, unsigned src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
// four 8x8 b16 matrices from shared memory (transposed with TRANS); lane l gives the address of
// row l % 8 of matrix l / 8
template <bool TRANS>
static __device__ __forceinline__ void sinter_ldsm_x4(unsigned (&r)[4], unsigned addr) {
    if (TRANS) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
    } else {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
    }
}
// c += a (16x16, row) * b (16x8, col) with f32 accumulators; operands f16 with F16, else bf16.
// Not volatile: a pure register operation the compiler may interleave with the next ldmatrix.
template <bool F16>
static __device__ __forceinline__ void sinter_mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    if (F16) {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
}

// byte offset of element (r, c) (c a multiple of 8) in a tile of `rows` rows stored as 64-column
// blocks of 128-byte rows, 16-byte chunks swizzled by the row (the wgmma/TMA 128-byte swizzle)
static __device__ __forceinline__ unsigned sinter_swz128(unsigned r, unsigned c, unsigned rows) {
    return (c >> 6) * rows * 128u + r * 128u + ((((c >> 3) & 7u) ^ (r & 7u)) << 4);
}
// a wgmma shared-memory matrix descriptor: start address, leading and stride byte offsets,
// 128-byte swizzle (the start's 1024-byte period must be that of the swizzle pattern)
static __device__ __forceinline__ unsigned long long sinter_wgmma_desc(unsigned addr, unsigned lbo, unsigned sbo) {
    return (unsigned long long)((addr & 0x3FFFFu) >> 4) | ((unsigned long long)((lbo & 0x3FFFFu) >> 4) << 16)
        | ((unsigned long long)((sbo & 0x3FFFFu) >> 4) << 32) | (1ull << 62);
}
// The descriptor `bytes` (a multiple of 16) further along shared memory: the start-address field
// (bits 0-13, address / 16) takes the offset without a carry, since shared addresses are below
// 2^18; a 32-bit add on the low word, where recomputing the descriptor costs a mask, a shift and
// an or per product (measured: 13% of the d64 attention loop's stall samples were descriptor
// arithmetic).
static __device__ __forceinline__ unsigned long long sinter_wgmma_desc_add(unsigned long long d, unsigned bytes) {
    return (d & 0xFFFFFFFF00000000ull) | (unsigned long long)((unsigned)d + (bytes >> 4));
}
static __device__ __forceinline__ void sinter_wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
static __device__ __forceinline__ void sinter_wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
static __device__ __forceinline__ void sinter_wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
}
// generic-proxy writes to shared memory (cp.async, st.shared) made visible to the async proxy
// (wgmma) that reads them after the next barrier
static __device__ __forceinline__ void sinter_fence_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// keeps the compiler from moving accesses to accumulators across a wgmma issue or wait
template <int N>
static __device__ __forceinline__ void sinter_reg_fence(float (&d)[N][4]) {
    #pragma unroll
    for (int j = 0; j < N; ++j) {
        asm volatile("" : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3]) :: "memory");
    }
}

// d (m64 x n64, f32) = A x B + (acc ? d : 0): A in registers, B in shared memory (N-major), bf16; asynchronous
static __device__ __forceinline__ void sinter_wgmma_rs_bf16_n64_tb(float (&d)[8][4], const unsigned (&a)[4], unsigned long long b, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(acc));
}

// d (m64 x n128, f32) = A x B + (acc ? d : 0): A in shared memory, B in shared memory, bf16; asynchronous
static __device__ __forceinline__ void sinter_wgmma_ss_bf16_n128(float (&d)[16][4], unsigned long long a, unsigned long long b, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
        : "l"(a), "l"(b), "r"(acc));
}

// an mbarrier in shared memory expecting `count` arrivals per phase
static __device__ __forceinline__ void sinter_mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
// one arrival (release: this thread's earlier writes are visible to whoever waits)
static __device__ __forceinline__ void sinter_mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}
// the warpgroup's registers per thread lowered / raised to N (sm_90a; the whole warpgroup executes
// it; the kernel needs a register cap at entry: __launch_bounds__(threads, min_blocks))
template <int N>
static __device__ __forceinline__ void sinter_setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(N));
}
template <int N>
static __device__ __forceinline__ void sinter_setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(N));
}

// blocks until the phase with parity `parity` has completed (acquire; a fresh barrier counts its
// phase before the first as completed: parity 1 passes at once); a spin in PTX: a C loop around
// try_wait (with a clock for a time-out) costs the ping-pong attention tiles registers they spill
static __device__ __forceinline__ void sinter_mbar_wait(unsigned bar, unsigned parity) {
    asm volatile("{\n.reg .pred done;\nsinter_mbar_retry:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra sinter_mbar_retry;\n}\n" :: "r"(bar), "r"(parity) : "memory");
}
// named barrier `id`: wait until COUNT threads (this warp's included) arrived or synced
template <int COUNT>
static __device__ __forceinline__ void sinter_bar_sync(unsigned id) {
    asm volatile("bar.sync %0, %1;\n" :: "r"(id), "n"(COUNT) : "memory");
}
// named barrier `id`: count this warp among the COUNT threads, without waiting
template <int COUNT>
static __device__ __forceinline__ void sinter_bar_arrive(unsigned id) {
    asm volatile("bar.arrive %0, %1;\n" :: "r"(id), "n"(COUNT) : "memory");
}

// a tensor map (the driver's CUtensorMap, encoded on the host), a __grid_constant__ parameter
struct __align__(64) sinter_tmap {
    unsigned long long opaque[16];
};
// barrier initialization visible to the other threads and to the copy engine (before a barrier)
static __device__ __forceinline__ void sinter_mbar_fence_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// one arrival that also expects `bytes` more transaction bytes in the current phase
static __device__ __forceinline__ void sinter_mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
// whether the phase of parity `parity` of barrier `bar` has completed (acquire)
static __device__ __forceinline__ bool sinter_mbar_try_wait(unsigned bar, unsigned parity) {
    unsigned ok;
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(ok) : "r"(bar), "r"(parity) : "memory");
    return ok != 0u;
}
// sinter_mbar_wait, except that a wait past 2^34 cycles (seconds) traps: a pipeline bug is a launch
// error, not a hung GPU
static __device__ __forceinline__ void sinter_mbar_wait_or_trap(unsigned bar, unsigned parity) {
    if (sinter_mbar_try_wait(bar, parity)) return;
    const long long t0 = clock64();
    while (!sinter_mbar_try_wait(bar, parity)) {
        if (clock64() - t0 > (1ll << 34)) __trap();
    }
}
static __device__ __forceinline__ void sinter_tma_prefetch(const sinter_tmap* map) {
    asm volatile("prefetch.tensormap [%0];\n" :: "l"(reinterpret_cast<unsigned long long>(map)) : "memory");
}
// the box of the RANK-dimensional (2 or 3) `map` at element coordinates (c0, c1[, c2]) (innermost
// first) into shared memory at `dst`, its bytes completing on barrier `bar` (zeros past the
// tensor's extents, counted all the same)
template <int RANK>
static __device__ __forceinline__ void sinter_tma_load(unsigned dst, const sinter_tmap* map, int c0, int c1, int c2, unsigned bar) {
    if (RANK == 2) {
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                     :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar) : "memory");
    } else {
        asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
                     :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar) : "memory");
    }
}
// the box of the 4-dimensional `map` at (c0, c1, c2, c3) (innermost first), as above
template <int RANK>
static __device__ __forceinline__ void sinter_tma_load(unsigned dst, const sinter_tmap* map, int c0, int c1, int c2, int c3, unsigned bar) {
    static_assert(RANK == 4, "four coordinates: a 4-dimensional map");
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];\n"
                 :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar) : "memory");
}

// a 32-bit word of shared memory at `addr` (a persistent tile's schedule ring)
static __device__ __forceinline__ unsigned sinter_ld_shared_u32(unsigned addr) {
    unsigned v;
    asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(addr) : "memory");
    return v;
}
static __device__ __forceinline__ void sinter_st_shared_u32(unsigned addr, unsigned v) {
    asm volatile("st.shared.u32 [%0], %1;\n" :: "r"(addr), "r"(v) : "memory");
}

extern "C" __global__ void __launch_bounds__(256, 2) sinter_attn_bf16_d64(
    const sinter_bf16* __restrict__ a0 /* Q */,
    const sinter_bf16* __restrict__ a1 /* K */,
    const sinter_bf16* __restrict__ a2 /* V */,
    sinter_bf16* __restrict__ a3 /* the output */,
    float* __restrict__ sinter_ws /* 8 bytes of private scratch */,
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
    const float sx_scale,
    const __grid_constant__ sinter_tmap tm0,
    const __grid_constant__ sinter_tmap tm1)
{
    // tensor-core attention run-time extents, d 64 dv 64 (bf16 -> f32, wgmma m64nNk16, 128-byte swizzled tiles), tile 64x128, 4 warps of 16 rows and a TMA producer (mbarriers, ping-pong), 3 stages (107616 bytes), Q in shared memory
    extern __shared__ __align__(1024) unsigned char smem[];
    const float NINF = -__int_as_float(0x7f800000);
    // 2^x, flushing subnormal results to 0 (probabilities under 2^-126 round to 0 in bf16/f16 anyway)
    auto sinter_ex2 = [](float x) { float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; };
    const float SL = sx_sl; // log2(e) times the score's scale: exp(x) = 2^(x SL)
    auto sinter_div = [](unsigned x, unsigned d, unsigned mul, unsigned sh) { return d == 1u ? x : __umulhi(x, mul) >> sh; };
    const unsigned tid = threadIdx.x, lane = tid % 32u, warp = tid / 32u;
    const unsigned wm0 = warp * 16u; // the warp's rows in the tile
    const unsigned g = lane / 4u, t4 = lane % 4u;
    // the swizzle pattern repeats every 1024 bytes: tiles start on that period
    const unsigned s_base = ((unsigned)__cvta_generic_to_shared(smem) + 1023u) & ~1023u;
    const unsigned wg = warp / 4u; // the warpgroup, owning rows wg * 64 .. of the tile
    // Q at 0 (8192 bytes); stage s: K at 8192 + s * 32768, V 16384 after it
    // 1 consumer warpgroups (rows 64 wg ..), warpgroup 1 the producer of K and V
    const unsigned full0 = s_base + 106496u, empty0 = full0 + 24u; // mbarriers, 8 bytes each
    const unsigned sched0 = empty0 + 24u; // the schedule ring: 2 full and 2 empty mbarriers, 2 work-tile indices
    if (tid == 0u) {
        #pragma unroll
        for (unsigned s = 0; s < 3u; ++s) {
            sinter_mbar_init(full0 + s * 8u, 1u); // the producer's copy issue, plus the copies' bytes
            sinter_mbar_init(empty0 + s * 8u, 4u); // each consumer warp, once its products read it
        }
        #pragma unroll
        for (unsigned s = 0; s < 2u; ++s) {
            sinter_mbar_init(sched0 + s * 8u, 1u); // the producer, once it wrote the next work tile
            sinter_mbar_init(sched0 + 16u + s * 8u, 128u); // each consumer thread, once it read it
        }
        sinter_mbar_fence_init(); // visible to the copy engine
    }
    __syncthreads(); // the mbarriers are initialized (the block's only full barrier)
    if (wg == 1u) {
        sinter_setmaxnreg_dec<40>();
        if (tid == 128u) {
            sinter_tma_prefetch(&tm0);
            sinter_tma_prefetch(&tm1);
            // [0]: the next work tile to hand out past the first wave, [1]: blocks done fetching
            unsigned* const sched_ctr = reinterpret_cast<unsigned*>(sinter_ws);
            const unsigned n_work = sx_n_work;
            unsigned w = blockIdx.x, it = 0u; // the work tile, the ring's key tiles before it
            #pragma unroll 1
            for (unsigned wi = 0u;; ++wi) {
                const unsigned bh = sinter_div(w, sx_tiles_m, sx_tiles_m_mul, sx_tiles_m_sh);
                const unsigned n_tiles = (sx_kv + 127u) / 128u;
                const unsigned wn = atomicAdd(sched_ctr, 1u) + gridDim.x; // fetched before this tile's copies
                const int kh = (int)sinter_div((bh - sinter_div(bh, sx_heads, sx_heads_mul, sx_heads_sh) * sx_heads), sx_k_g, sx_k_g_mul, sx_k_g_sh), kb = (int)sinter_div(bh, sx_heads, sx_heads_mul, sx_heads_sh), vh = (int)sinter_div((bh - sinter_div(bh, sx_heads, sx_heads_mul, sx_heads_sh) * sx_heads), sx_v_g, sx_v_g_mul, sx_v_g_sh), vb = (int)sinter_div(bh, sx_heads, sx_heads_mul, sx_heads_sh);
                #pragma unroll 1
                for (unsigned j = 0; j < n_tiles; ++j) {
                    const unsigned slot = (it + j) % 3u, full = full0 + slot * 8u;
                    sinter_mbar_wait_or_trap(empty0 + slot * 8u, ((it + j) / 3u + 1u) & 1u); // tile j - 3 released
                    sinter_mbar_expect_tx(full, 32768u);
                    const unsigned st = s_base + 8192u + slot * 32768u;
                    const int j0 = (int)(j * 128u);
                    sinter_tma_load<4>(st + 0u, &tm0, 0, j0, kh, kb, full);
                    sinter_tma_load<4>(st + 16384u, &tm1, 0, j0, vh, vb, full);
                }
                sinter_mbar_wait_or_trap(sched0 + 16u + wi % 2u * 8u, (wi / 2u + 1u) & 1u); // publication wi - 2 read
                sinter_st_shared_u32(sched0 + 32u + wi % 2u * 4u, wn);
                sinter_mbar_arrive(sched0 + wi % 2u * 8u); // publication wi: the work tile after tile wi
                it += n_tiles;
                if (wn >= n_work) {
                    break;
                }
                w = wn;
            }
            __threadfence(); // this block's last fetch precedes its count
            if (atomicAdd(sched_ctr + 1, 1u) == gridDim.x - 1u) {
                sched_ctr[0] = 0u; // the last block to finish fetching: zero for the next launch
                sched_ctr[1] = 0u;
            }
        }
    }
    else {
        sinter_setmaxnreg_inc<216>();
        const unsigned n_work = sx_n_work;
        unsigned w = blockIdx.x, it = 0u; // the work tile, the ring's key tiles before it
        {
            const unsigned mt = (w - sinter_div(w, sx_tiles_m, sx_tiles_m_mul, sx_tiles_m_sh) * sx_tiles_m);
            const unsigned bh = sinter_div(w, sx_tiles_m, sx_tiles_m_mul, sx_tiles_m_sh);
            const unsigned m0 = mt * 64u;
            const unsigned q_base = sx_q_off + sinter_div(bh, sx_heads, sx_heads_mul, sx_heads_sh) * sx_q_sb + (bh - sinter_div(bh, sx_heads, sx_heads_mul, sx_heads_sh) * sx_heads) * sx_q_sh;
            #pragma unroll
            for (unsigned l = 0; l < 4u; ++l) {
                const unsigned e = tid % 128u + l * 128u;
                const unsigned r = wg * 64u + e / 8u, c = e % 8u * 8u;
                const unsigned valid = m0 + r < sx_m ? 16u : 0u;
                const unsigned off = valid ? q_base + (m0 + r) * sx_q_sr + c : 0u;
                sinter_cp_async16(s_base + sinter_swz128(r, c, 64u), &a0[off], valid);
            }
            sinter_cp_async_commit();
        }
        #pragma unroll 1
        for (unsigned wi = 0u;; ++wi) {
            const unsigned mt = (w - sinter_div(w, sx_tiles_m, sx_tiles_m_mul, sx_tiles_m_sh) * sx_tiles_m);
            const unsigned bh = sinter_div(w, sx_tiles_m, sx_tiles_m_mul, sx_tiles_m_sh);
            const unsigned m0 = mt * 64u;
            const unsigned n_tiles = (sx_kv + 127u) / 128u;
            sinter_cp_async_wait<0>(); // this thread's Q copies
            sinter_fence_async_shared();
            sinter_bar_sync<128>(2u); // the warpgroup's Q rows landed
            float o[1][8][4];
            float mx[1][2], l[1][2];
            #pragma unroll
            for (unsigned i = 0; i < 1u; ++i) {
                mx[i][0] = NINF; mx[i][1] = NINF; l[i][0] = 0.0f; l[i][1] = 0.0f;
                #pragma unroll
                for (unsigned j = 0; j < 8u; ++j) {
                    o[i][j][0] = 0.0f; o[i][j][1] = 0.0f; o[i][j][2] = 0.0f; o[i][j][3] = 0.0f;
                }
            }
            unsigned pf[8][4]; // P of the tile whose P V is next
            float al[1][2]; // the rescaling of o that the next tile's softmax found
            {
                sinter_mbar_wait(full0 + it % 3u * 8u, it / 3u & 1u); // key tile 0
                const unsigned sk = s_base + 8192u + it % 3u * 32768u;
                float s[1][16][4];
                sinter_wgmma_fence();
                {
                    const unsigned long long desc_q = sinter_wgmma_desc(s_base + wg * 8192u, 16u, 1024u);
                    const unsigned long long desc_k = sinter_wgmma_desc(sk, 16u, 1024u);
                    #pragma unroll
                    for (unsigned kk = 0; kk < 4u; ++kk) {
                        // k16 slice kk: 64-column block kk / 4, 32 bytes per slice inside the swizzled row
                        const unsigned qo = kk / 4u * 8192u + kk % 4u * 32u;
                        const unsigned ko = kk / 4u * 16384u + kk % 4u * 32u;
                        sinter_wgmma_ss_bf16_n128(s[0], sinter_wgmma_desc_add(desc_q, qo), sinter_wgmma_desc_add(desc_k, ko), kk > 0u ? 1 : 0);
                    }
                }
                sinter_wgmma_commit();
                sinter_wgmma_wait<0>();
                sinter_reg_fence<16>(s[0]);
                const unsigned k0 = 0u * 128u;
                const bool full = k0 + 128u <= sx_kv && m0 + 64u <= sx_m;
                if (!full) {
                    #pragma unroll
                    for (unsigned i = 0; i < 1u; ++i) {
                        #pragma unroll
                        for (unsigned h = 0; h < 2u; ++h) {
                            const unsigned mr = m0 + wm0 + i * 16u + h * 8u + g;
                            const int lim = mr < sx_m ? (int)(sx_kv - 1u) : -1; // the row's last key
                            #pragma unroll
                            for (unsigned j = 0; j < 16u; ++j) {
                                const int key = (int)(k0 + j * 8u + t4 * 2u);
                                if (key > lim) s[i][j][2u * h] = NINF;
                                if (key + 1 > lim) s[i][j][2u * h + 1u] = NINF;
                            }
                        }
                    }
                }
                #pragma unroll
                for (unsigned i = 0; i < 1u; ++i) {
                    #pragma unroll
                    for (unsigned h = 0; h < 2u; ++h) {
                        float rm = NINF;
                        #pragma unroll
                        for (unsigned j = 0; j < 16u; ++j) {
                            rm = fmaxf(rm, fmaxf(s[i][j][2u * h], s[i][j][2u * h + 1u]));
                        }
                        rm = fmaxf(rm, __shfl_xor_sync(0xffffffffu, rm, 1));
                        rm = fmaxf(rm, __shfl_xor_sync(0xffffffffu, rm, 2));
                        const float mn = fmaxf(mx[i][h], rm);
                        const float mu = mn == NINF ? 0.0f : mn; // no keys yet: p = 0, not NaN
                        const float alpha = sinter_ex2((mx[i][h] - mu) * SL);
                        const float ms = mu * SL;
                        mx[i][h] = mn;
                        float rs = 0.0f;
                        #pragma unroll
                        for (unsigned j = 0; j < 16u; ++j) {
                            #pragma unroll
                            for (unsigned c = 0; c < 2u; ++c) {
                                const float p = sinter_ex2(fmaf(s[i][j][2u * h + c], SL, -ms));
                                s[i][j][2u * h + c] = p;
                                rs += p;
                            }
                        }
                        l[i][h] = l[i][h] * alpha + rs;
                        al[i][h] = alpha;
                    }
                }
                #pragma unroll
                for (unsigned kk = 0; kk < 8u; ++kk) {
                    #pragma unroll
                    for (unsigned q = 0; q < 4u; ++q) {
                        // a0: (g, 2t..), a1: (g + 8, 2t..), a2: (g, 2t + 8..), a3: (g + 8, 2t + 8..)
                        const float* sp = &s[0][2u * kk + q / 2u][q % 2u * 2u];
                        pf[kk][q] = sinter_pack_bf16x2(sp[0], sp[1]);
                    }
                }
            }
            for (unsigned kt = 0; kt + 1u < n_tiles; ++kt) {
                const unsigned nk = kt + 1u;
                sinter_mbar_wait(full0 + (it + nk) % 3u * 8u, (it + nk) / 3u & 1u); // key tile kt + 1
                const unsigned sv = s_base + 8192u + (it + kt) % 3u * 32768u + 16384u;
                const unsigned sk = s_base + 8192u + (it + nk) % 3u * 32768u;
                float s[1][16][4];
                sinter_reg_fence<8>(o[0]);
                sinter_wgmma_fence(); // pf written in registers
                {
                    const unsigned long long desc_q = sinter_wgmma_desc(s_base + wg * 8192u, 16u, 1024u);
                    const unsigned long long desc_k = sinter_wgmma_desc(sk, 16u, 1024u);
                    #pragma unroll
                    for (unsigned kk = 0; kk < 4u; ++kk) {
                        // k16 slice kk: 64-column block kk / 4, 32 bytes per slice inside the swizzled row
                        const unsigned qo = kk / 4u * 8192u + kk % 4u * 32u;
                        const unsigned ko = kk / 4u * 16384u + kk % 4u * 32u;
                        sinter_wgmma_ss_bf16_n128(s[0], sinter_wgmma_desc_add(desc_q, qo), sinter_wgmma_desc_add(desc_k, ko), kk > 0u ? 1 : 0);
                    }
                }
                sinter_wgmma_commit(); // S of tile kt + 1
                sinter_reg_fence<8>(o[0]); // after the issue before
                #pragma unroll
                for (unsigned j = 0; j < 8u; ++j) {
                    o[0][j][0] *= al[0][0]; o[0][j][1] *= al[0][0]; o[0][j][2] *= al[0][1]; o[0][j][3] *= al[0][1];
                }
                sinter_wgmma_fence(); // o rescaled in registers
                {
                    const unsigned long long desc_v = sinter_wgmma_desc(sv, 16384u, 1024u);
                    #pragma unroll
                    for (unsigned kk = 0; kk < 8u; ++kk) {
                        sinter_wgmma_rs_bf16_n64_tb(o[0], pf[kk], sinter_wgmma_desc_add(desc_v, kk * 2048u), 1); // 16 key rows of 128 bytes
                    }
                }
                sinter_wgmma_commit(); // O += P V of tile kt
                sinter_wgmma_wait<1>(); // S done; P V may still run
                sinter_reg_fence<16>(s[0]);
                const unsigned k0 = (kt + 1u) * 128u;
                const bool full = k0 + 128u <= sx_kv && m0 + 64u <= sx_m;
                if (!full) {
                    #pragma unroll
                    for (unsigned i = 0; i < 1u; ++i) {
                        #pragma unroll
                        for (unsigned h = 0; h < 2u; ++h) {
                            const unsigned mr = m0 + wm0 + i * 16u + h * 8u + g;
                            const int lim = mr < sx_m ? (int)(sx_kv - 1u) : -1; // the row's last key
                            #pragma unroll
                            for (unsigned j = 0; j < 16u; ++j) {
                                const int key = (int)(k0 + j * 8u + t4 * 2u);
                                if (key > lim) s[i][j][2u * h] = NINF;
                                if (key + 1 > lim) s[i][j][2u * h + 1u] = NINF;
                            }
                        }
                    }
                }
                #pragma unroll
                for (unsigned i = 0; i < 1u; ++i) {
                    #pragma unroll
                    for (unsigned h = 0; h < 2u; ++h) {
                        float rm = NINF;
                        #pragma unroll
                        for (unsigned j = 0; j < 16u; ++j) {
                            rm = fmaxf(rm, fmaxf(s[i][j][2u * h], s[i][j][2u * h + 1u]));
                        }
                        rm = fmaxf(rm, __shfl_xor_sync(0xffffffffu, rm, 1));
                        rm = fmaxf(rm, __shfl_xor_sync(0xffffffffu, rm, 2));
                        const float mn = fmaxf(mx[i][h], rm);
                        const float mu = mn == NINF ? 0.0f : mn; // no keys yet: p = 0, not NaN
                        const float alpha = sinter_ex2((mx[i][h] - mu) * SL);
                        const float ms = mu * SL;
                        mx[i][h] = mn;
                        float rs = 0.0f;
                        #pragma unroll
                        for (unsigned j = 0; j < 16u; ++j) {
                            #pragma unroll
                            for (unsigned c = 0; c < 2u; ++c) {
                                const float p = sinter_ex2(fmaf(s[i][j][2u * h + c], SL, -ms));
                                s[i][j][2u * h + c] = p;
                                rs += p;
                            }
                        }
                        l[i][h] = l[i][h] * alpha + rs;
                        al[i][h] = alpha;
                    }
                }
                sinter_wgmma_wait<0>();
                sinter_reg_fence<8>(o[0]);
                if (lane == 0u) sinter_mbar_arrive(empty0 + (it + kt) % 3u * 8u); // tile kt read
                #pragma unroll
                for (unsigned kk = 0; kk < 8u; ++kk) {
                    #pragma unroll
                    for (unsigned q = 0; q < 4u; ++q) {
                        // a0: (g, 2t..), a1: (g + 8, 2t..), a2: (g, 2t + 8..), a3: (g + 8, 2t + 8..)
                        const float* sp = &s[0][2u * kk + q / 2u][q % 2u * 2u];
                        pf[kk][q] = sinter_pack_bf16x2(sp[0], sp[1]);
                    }
                }
            }
            sinter_mbar_wait(sched0 + wi % 2u * 8u, wi / 2u & 1u); // publication wi: the next work tile
            const unsigned wn = sinter_ld_shared_u32(sched0 + 32u + wi % 2u * 4u);
            sinter_mbar_arrive(sched0 + 16u + wi % 2u * 8u); // read
            if (wn < n_work) {
                // its Q rows, copied while this tile's last P V and epilogue run
                const unsigned mt = (wn - sinter_div(wn, sx_tiles_m, sx_tiles_m_mul, sx_tiles_m_sh) * sx_tiles_m);
                const unsigned bh = sinter_div(wn, sx_tiles_m, sx_tiles_m_mul, sx_tiles_m_sh);
                const unsigned m0 = mt * 64u;
                const unsigned q_base = sx_q_off + sinter_div(bh, sx_heads, sx_heads_mul, sx_heads_sh) * sx_q_sb + (bh - sinter_div(bh, sx_heads, sx_heads_mul, sx_heads_sh) * sx_heads) * sx_q_sh;
                #pragma unroll
                for (unsigned l = 0; l < 4u; ++l) {
                    const unsigned e = tid % 128u + l * 128u;
                    const unsigned r = wg * 64u + e / 8u, c = e % 8u * 8u;
                    const unsigned valid = m0 + r < sx_m ? 16u : 0u;
                    const unsigned off = valid ? q_base + (m0 + r) * sx_q_sr + c : 0u;
                    sinter_cp_async16(s_base + sinter_swz128(r, c, 64u), &a0[off], valid);
                }
                sinter_cp_async_commit();
            }
            {
                const unsigned sv = s_base + 8192u + (it + n_tiles - 1u) % 3u * 32768u + 16384u;
                sinter_reg_fence<8>(o[0]);
                sinter_wgmma_fence(); // pf written in registers
                sinter_reg_fence<8>(o[0]); // after the issue before
                #pragma unroll
                for (unsigned j = 0; j < 8u; ++j) {
                    o[0][j][0] *= al[0][0]; o[0][j][1] *= al[0][0]; o[0][j][2] *= al[0][1]; o[0][j][3] *= al[0][1];
                }
                sinter_wgmma_fence(); // o rescaled in registers
                {
                    const unsigned long long desc_v = sinter_wgmma_desc(sv, 16384u, 1024u);
                    #pragma unroll
                    for (unsigned kk = 0; kk < 8u; ++kk) {
                        sinter_wgmma_rs_bf16_n64_tb(o[0], pf[kk], sinter_wgmma_desc_add(desc_v, kk * 2048u), 1); // 16 key rows of 128 bytes
                    }
                }
                sinter_wgmma_commit();
                sinter_wgmma_wait<0>();
                sinter_reg_fence<8>(o[0]);
                if (lane == 0u) sinter_mbar_arrive(empty0 + (it + n_tiles - 1u) % 3u * 8u); // the last tile read
            }
            // ---- epilogue, per output element: rows g, g + 8 and columns 2t, 2t + 1 of each fragment
            const unsigned y_base = sx_y_off + sinter_div(bh, sx_heads, sx_heads_mul, sx_heads_sh) * sx_y_sb + (bh - sinter_div(bh, sx_heads, sx_heads_mul, sx_heads_sh) * sx_heads) * sx_y_sh;
            #pragma unroll
            for (unsigned i = 0; i < 1u; ++i) {
                #pragma unroll
                for (unsigned h = 0; h < 2u; ++h) {
                    float lt = l[i][h];
                    lt += __shfl_xor_sync(0xffffffffu, lt, 1);
                    lt += __shfl_xor_sync(0xffffffffu, lt, 2);
                    const float rl = 1.0f / lt;
                    const unsigned m = m0 + wm0 + i * 16u + h * 8u + g;
                    unsigned pk[8];
                    #pragma unroll
                    for (unsigned jf = 0; jf < 8u; ++jf) {
                        pk[jf] = sinter_pack_bf16x2(o[i][jf][h * 2u] * rl, o[i][jf][h * 2u + 1u] * rl);
                    }
                    // the quad's exchange: lane t4 ends with the four words of column groups 4 qs + t4
                    #pragma unroll
                    for (unsigned qk = 1u; qk <= 2u; qk <<= 1) {
                        const bool qup = (t4 & qk) != 0u;
                        #pragma unroll
                        for (unsigned qs = 0; qs < 2u; ++qs) {
                            #pragma unroll
                            for (unsigned qc = 0; qc < 4u; ++qc) {
                                if ((qc & qk) != 0u) continue;
                                const unsigned lo = qs * 4u + qc, hi = lo + qk;
                                const unsigned got = __shfl_xor_sync(0xffffffffu, qup ? pk[lo] : pk[hi], qk);
                                if (qup) pk[lo] = got; else pk[hi] = got;
                            }
                        }
                    }
                    if (m < sx_m) {
                        #pragma unroll
                        for (unsigned qs = 0; qs < 2u; ++qs) {
                            sinter_vec<unsigned, 4> w4;
                            #pragma unroll
                            for (unsigned qc = 0; qc < 4u; ++qc) w4.v[qc] = pk[qs * 4u + qc];
                            *reinterpret_cast<sinter_vec<unsigned, 4>*>(a3 + y_base + m * sx_y_sr + (qs * 4u + t4) * 8u) = w4;
                        }
                    }
                }
            }
            it += n_tiles;
            if (wn >= n_work) {
                break;
            }
            w = wn;
        }
    }
}

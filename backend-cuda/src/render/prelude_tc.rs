//! The tensor-core and Hopper asynchronous primitives of the generated CUDA: `cp.async`,
//! `ldmatrix` and `mma.sync` (the `mma` template), `wgmma` descriptors, fences and products,
//! `mbarrier`s, named barriers and register reallocation (warp-specialized tiles), TMA copies and
//! thread-block clusters. Each is a source fragment `prelude::body` emits for its `H` helper.

use super::prelude::PRE;

/// Asynchronous copies of 4 and 8 bytes from global to shared memory (sm_80+; `src_bytes` 0
/// zero-fills), the commit and the wait of a group of them: what the `mma` templates' pipelines and
/// the CUDA-core tile's one-step reduction share.
pub(super) const CP_ASYNC: &str = r#"// 4 or 8 bytes global -> shared without passing through registers; zero when src_bytes is 0
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
"#;

/// The tensor-core primitives of the `mma` template (with [`CP_ASYNC`]): asynchronous 16-byte copies
/// into shared memory (`src_bytes` < 16 zero-fills the rest), `ldmatrix` (four 8x8 b16 matrices, optionally
/// transposed) and the m16n8k16 products with f32 accumulators.
pub(super) const MMA: &str = r#"// 16 bytes global -> shared without passing through registers; bytes past src_bytes are zero
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
"#;

/// The TF32 primitives of the `mma` template (f32 operands where the product allows TF32).
pub(super) const MMA_TF32: &str = r#"// an f32 from shared memory rounded to TF32 (nearest, ties away: cvt.rna), as an mma operand
static __device__ __forceinline__ unsigned sinter_lds_tf32(unsigned addr) {
    float x;
    asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(x) : "r"(addr) : "memory");
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}
// c += a (16x8, row) * b (8x8, col) in TF32 with f32 accumulators
static __device__ __forceinline__ void sinter_mma_tf32(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
"#;

/// Hopper warpgroup primitives of the `wgmma` tiles: the software 128-byte swizzle,
pub(super) const WGMMA_SWIZZLE: &str = r#"// byte offset of element (r, c) (c a multiple of 8) in a tile of `rows` rows stored as 64-column
// blocks of 128-byte rows, 16-byte chunks swizzled by the row (the wgmma/TMA 128-byte swizzle)
static __device__ __forceinline__ unsigned sinter_swz128(unsigned r, unsigned c, unsigned rows) {
    return (c >> 6) * rows * 128u + r * 128u + ((((c >> 3) & 7u) ^ (r & 7u)) << 4);
}
"#;

/// shared-memory matrix descriptors, `wgmma` fences, commit and wait,
pub(super) const WGMMA_DESC: &str = r#"// a wgmma shared-memory matrix descriptor: start address, leading and stride byte offsets,
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
"#;

/// the async-proxy fence after ordinary shared-memory writes,
pub(super) const WGMMA_PROXY_FENCE: &str = r#"// generic-proxy writes to shared memory (cp.async, st.shared) made visible to the async proxy
// (wgmma) that reads them after the next barrier
static __device__ __forceinline__ void sinter_fence_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
"#;

/// and a compiler fence on accumulators.
pub(super) const WGMMA_REG_FENCE: &str = r#"// keeps the compiler from moving accesses to accumulators across a wgmma issue or wait
template <int N>
static __device__ __forceinline__ void sinter_reg_fence(float (&d)[N][4]) {
    #pragma unroll
    for (int j = 0; j < N; ++j) {
        asm volatile("" : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3]) :: "memory");
    }
}
"#;

/// What warp-specialized kernels share: `mbarrier` init and arrival, register reallocation.
pub(super) const MBARRIER: &str = r#"// an mbarrier in shared memory expecting `count` arrivals per phase
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
"#;

/// The `mbarrier` spin and the named barriers of the ping-pong attention tiles.
pub(super) const WARP_SPEC: &str = r#"// blocks until the phase with parity `parity` has completed (acquire; a fresh barrier counts its
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
"#;

/// The TMA copies of the `mma_tma` template and the TMA attention producer.
pub(super) const TMA: &str = r#"// a tensor map (the driver's CUtensorMap, encoded on the host), a __grid_constant__ parameter
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
"#;

/// The cluster helpers of the `mma_tma` template's cluster tiles.
pub(super) const CLUSTER: &str = r#"// this block's rank in its cluster
static __device__ __forceinline__ unsigned sinter_cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
// every thread of every block of the cluster arrives, then waits (release / acquire at cluster
// scope: barrier initialization before, and shared memory a peer still writes into, after)
static __device__ __forceinline__ void sinter_cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// one arrival on the barrier at `bar` (this block's shared address) of the cluster's block `cta`
// (the default release semantics at CTA scope, as CUTLASS's cluster pipelines arrive: the
// products that read what the barrier guards were waited for before)
static __device__ __forceinline__ void sinter_mbar_arrive_cluster(unsigned bar, unsigned cta) {
    asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" :: "r"(bar), "r"(cta) : "memory");
}
// sinter_tma_load's box copied into the shared memory of every block of `mask` in the cluster at
// the same address `dst`, its bytes completing on each one's barrier at `bar`
template <int RANK>
static __device__ __forceinline__ void sinter_tma_load_multicast(unsigned dst, const sinter_tmap* map, int c0, int c1, int c2, unsigned bar, unsigned short mask) {
    if (RANK == 2) {
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n"
                     :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar), "h"(mask) : "memory");
    } else {
        asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3, %4}], [%5], %6;\n"
                     :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar), "h"(mask) : "memory");
    }
}
"#;

/// The name of the `H::WgmmaMma` helper.
pub(crate) fn wgmma_name(n: u32, rs: bool, trans_b: bool, f16: bool) -> String {
    format!(
        "sinter_wgmma_{}_{}_n{n}{}",
        if rs { "rs" } else { "ss" },
        if f16 { "f16" } else { "bf16" },
        if trans_b { "_tb" } else { "" }
    )
}

/// `d (m64 x n, f32) = A (m64 x k16) B (k16 x n) + (acc ? d : 0)`, issued asynchronously (the
/// caller fences, commits and waits).
pub(super) fn wgmma_mma(n: u32, rs: bool, trans_b: bool, f16: bool) -> String {
    let regs = n / 2;
    let ty = if f16 { "f16" } else { "bf16" };
    let d: Vec<String> = (0..regs).map(|i| format!("%{i}")).collect();
    let (a_param, a_ops, a_asm, next) = if rs {
        (
            "const unsigned (&a)[4]",
            "\"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), ".to_string(),
            format!("{{%{}, %{}, %{}, %{}}}", regs, regs + 1, regs + 2, regs + 3),
            regs + 4,
        )
    } else {
        ("unsigned long long a", "\"l\"(a), ".to_string(), format!("%{regs}"), regs + 1)
    };
    let (b, acc) = (next, next + 1);
    let imm = if rs { format!("1, 1, {}", trans_b as u32) } else { format!("1, 1, 0, {}", trans_b as u32) };
    let outs: Vec<String> = (0..regs).map(|i| format!("\"+f\"(d[{}][{}])", i / 4, i % 4)).collect();
    format!(
        "// d (m64 x n{n}, f32) = A x B + (acc ? d : 0): A {}, B in shared memory{}, {ty}; asynchronous
{PRE} void {name}(float (&d)[{n8}][4], {a_param}, unsigned long long b, int acc) {{
    asm volatile(
        \"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{acc}, 0;\\n\"
        \"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ty}.{ty} {{{d}}}, {a_asm}, %{b}, p, {imm};\\n}}\\n\"
        : {outs}
        : {a_ops}\"l\"(b), \"r\"(acc));
}}
",
        if rs { "in registers" } else { "in shared memory" },
        if trans_b { " (N-major)" } else { "" },
        name = wgmma_name(n, rs, trans_b, f16),
        n8 = n / 8,
        d = d.join(", "),
        outs = outs.join(", "),
    )
}

/// 32-bit shared-memory loads and stores by address (a persistent attention tile's schedule ring).
pub(super) const SHARED_WORD: &str = r#"// a 32-bit word of shared memory at `addr` (a persistent tile's schedule ring)
static __device__ __forceinline__ unsigned sinter_ld_shared_u32(unsigned addr) {
    unsigned v;
    asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(addr) : "memory");
    return v;
}
static __device__ __forceinline__ void sinter_st_shared_u32(unsigned addr, unsigned v) {
    asm volatile("st.shared.u32 [%0], %1;\n" :: "r"(addr), "r"(v) : "memory");
}
"#;

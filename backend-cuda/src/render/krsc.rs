//! The `KRSC` weight permutation of a library convolution as a hand-written transpose: a dense
//! `[K, C, RS]` weight (`RS` the window's taps) to `[K, RS, C]`, through shared memory. The kernel
//! IR's form of the same permutation (`library_conv::krsc_weight_kernel`, which defines it and is
//! checked against the interpreter) is a pointwise kernel: one side of it is strided, and a
//! 512x512x3x3 f32 weight took 14.5 us under ncu on an H200 (session 19), ~2.5x its bytes.
//!
//! A block takes [`CHANNELS`] channels of one filter: it reads their `CHANNELS * RS` consecutive
//! elements, and writes, per tap, `CHANNELS` consecutive elements. Both sides coalesce; the shared
//! tile is read with stride `RS` (conflict-free for odd `RS`, as 3x3 and 7x7 windows are).

use super::Rendered;

/// Channels per block.
pub const CHANNELS: usize = 64;

/// The transpose kernel `name` over a kernel's `args` pointer parameters (the weight is argument
/// `w`, from element `w_offset`; the output argument `out` is dense `[K, RS, C]`), for `k`
/// filters of `c` channels and `taps` window taps, of `elem_bytes`-byte elements (2 or 4).
pub fn render(
    name: &str,
    args: usize,
    (w, w_offset): (usize, u64),
    out: usize,
    [k, c, taps]: [usize; 3],
    elem_bytes: usize,
) -> Rendered {
    let ty = if elem_bytes == 2 { "unsigned short" } else { "unsigned int" };
    let blocks_per_filter = c.div_ceil(CHANNELS);
    let blocks = (k * blocks_per_filter) as u32;
    let params: Vec<String> = (0..args)
        .map(|i| if i == out { format!("void* __restrict__ a{i}") } else { format!("const void* __restrict__ a{i}") })
        .collect();
    let ch = CHANNELS;
    let source = format!(
        "// sinter kernel {name}: a [{k}, {c}, {taps}] weight (argument {w}, from element {w_offset}) to [{k}, {taps}, {c}] \
         (KRSC), {ch} channels of one filter per block through shared memory, {blocks} blocks\n\
         extern \"C\" __global__ void __launch_bounds__(256) {name}({params}) {{\n\
         \x20   __shared__ {ty} tile[{tile}];\n\
         \x20   const {ty}* __restrict__ w = (const {ty}*)a{w} + {w_offset}ull;\n\
         \x20   {ty}* __restrict__ o = ({ty}*)a{out};\n\
         \x20   const unsigned ko = blockIdx.x / {blocks_per_filter}u;\n\
         \x20   const unsigned c0 = blockIdx.x % {blocks_per_filter}u * {ch}u;\n\
         \x20   const unsigned n = min({ch}u, {c}u - c0);\n\
         \x20   // read: the block's channels of filter ko, n * {taps} consecutive elements\n\
         \x20   const {ty}* src = w + ((unsigned long long)ko * {c}u + c0) * {taps}u;\n\
         \x20   for (unsigned i = threadIdx.x; i < n * {taps}u; i += 256u) {{\n\
         \x20       tile[i] = src[i];\n\
         \x20   }}\n\
         \x20   __syncthreads();\n\
         \x20   // write: per tap, the n channels consecutively\n\
         \x20   {ty}* dst = o + (unsigned long long)ko * {taps}u * {c}u + c0;\n\
         \x20   for (unsigned i = threadIdx.x; i < {taps}u * {ch}u; i += 256u) {{\n\
         \x20       const unsigned t = i / {ch}u, ci = i % {ch}u;\n\
         \x20       if (ci < n) {{\n\
         \x20           dst[(unsigned long long)t * {c}u + ci] = tile[ci * {taps}u + t];\n\
         \x20       }}\n\
         \x20   }}\n\
         }}\n",
        params = params.join(", "),
        tile = ch * taps,
    );
    Rendered {
        name: name.to_string(),
        source,
        grid: [blocks, 1, 1],
        block: [256, 1, 1],
        dynamic_shared_bytes: 0,
        strategy: format!("transpose {ch} channels per block"),
        split: None,
        scratch_bytes: 0,
        tensor_maps: Vec::new(),
        compute: None,
        params: Vec::new(),
    }
}

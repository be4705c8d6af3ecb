// sinter kernel k0_cos: cos
// fused graph nodes: %1
// pointwise over 16777216 lanes, 4 per thread, 256 threads per block, 16384 blocks

// ---- helpers (sinter's scalar semantics) ----
// N consecutive elements of T as one aligned access (16-byte vector loads and stores)
template <typename T, int N>
struct alignas(sizeof(T) * N < 16 ? sizeof(T) * N : 16) sinter_vec {
    T v[N];
};

// sin(x) for quadrant offset 0, cos(x) for 1, |x| <= 1.05615e5f: Cody-Waite reduction by
// pi/2 in three fmaf steps, then a polynomial of sin or cos on [-pi/4, pi/4]
static __device__ __forceinline__ float sinter_sincosf_fast(float x, int offset) {
    // j = x 2/pi rounded to the nearest integer by the 1.5 * 2^23 shift (FMA-pipe operations, no
    // conversions): t holds j in its low mantissa bits, so its bits give the quadrant
    const float t = fmaf(x, 6.3661975e-1f, 12582912.0f);
    const float j = t - 12582912.0f;
    float r = fmaf(-j, 1.5707963e0f, x);
    r = fmaf(-j, 7.54979e-8f, r);
    r = fmaf(-j, -1.7151245e-15f, r);
    r = j == 0.0f ? x : r; // the last part of pi/2 is negative: -0 * it + -0 is +0, sin(-0) is -0
    const int q = __float_as_int(t) + offset;
    const float z = r * r;
    // sin r has the sign of r on [-pi/4, pi/4]; copysignf keeps sin(-0) = -0
    const float s = copysignf(fmaf(fmaf(fmaf(-1.9515296e-4f, z, 8.332161e-3f), z, -1.6666655e-1f), z * r, r), r);
    const float c = fmaf(fmaf(fmaf(2.4433157e-5f, z, -1.3887316e-3f), z, 4.1666646e-2f), z * z, fmaf(-0.5f, z, 1.0f));
    const float v = (q & 1) ? c : s;
    return (q & 2) ? -v : v;
}

// cosf with libdevice's Payne-Hanek path out of line (|x| > 1.05615e5f, infinities, NaN),
// so many calls in one kernel do not each carry it
static __device__ __noinline__ float sinter_cosf_slow(float x) {
    return cosf(x);
}
static __device__ __forceinline__ float sinter_cosf(float x) {
    return fabsf(x) <= 1.05615e5f ? sinter_sincosf_fast(x, 1) : sinter_cosf_slow(x);
}

extern "C" __global__ void __launch_bounds__(256) k0_cos(
    const float* __restrict__ a0, // f32[16777216] (b0), read
    float* __restrict__ a1) // f32[16777216] (b1), written
{
    // 4 consecutive lanes per thread: 16777216 lanes
    const unsigned lane0 = (blockIdx.x * 256u + threadIdx.x) * 4u;
    const sinter_vec<float, 4> x0 = *reinterpret_cast<const sinter_vec<float, 4>*>(a0 + lane0);
    sinter_vec<float, 4> o0;
    #pragma unroll
    for (unsigned j = 0; j < 4u; ++j) {
        const float v0 = x0.v[j];
        const float v1 = sinter_cosf(v0);
        o0.v[j] = v1;
    }
    *reinterpret_cast<sinter_vec<float, 4>*>(a1 + lane0) = o0;
}

// The driver's own launch cost on the device machine, apart from sinter: host microseconds per
// cuLaunchKernel of a one-block kernel (empty, and a 1024-element add like `device`'s
// host-overhead test), per cudaLaunchKernel, and per cudaGraphLaunch of a one-kernel graph.
// Built on the device with `nvcc -O2 -arch=sm_90a launch_floor.cu -lcuda`.
#include <cuda.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <vector>
#include <algorithm>

extern "C" __global__ void empty_k(const float*, float*, unsigned) {}
extern "C" __global__ void add_k(const float* a, float* b, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) b[i] = a[i] + 1.0f;
}

template <typename F> double per_call_us(F f, int calls, cudaStream_t s) {
    std::vector<double> med;
    for (int rep = 0; rep < 20; ++rep) {
        cudaStreamSynchronize(s);
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < calls; ++i) f();
        auto t1 = std::chrono::steady_clock::now();
        med.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / calls);
    }
    cudaStreamSynchronize(s);
    std::sort(med.begin(), med.end());
    return med[med.size() / 2];
}

int main() {
    float *a, *b;
    cudaMalloc(&a, 4096); cudaMalloc(&b, 4096);
    cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    CUfunction fe, fa;
    cudaGetFuncBySymbol((cudaFunction_t*)&fe, (const void*)empty_k);
    cudaGetFuncBySymbol((cudaFunction_t*)&fa, (const void*)add_k);
    unsigned n = 1024;
    void* args[] = {&a, &b, &n};
    for (int i = 0; i < 100; ++i) cuLaunchKernel(fa, 4, 1, 1, 256, 1, 1, 0, (CUstream)s, args, nullptr);
    printf("cuLaunchKernel empty: %.2f us\n", per_call_us([&] { cuLaunchKernel(fe, 1, 1, 1, 32, 1, 1, 0, (CUstream)s, args, nullptr); }, 100, s));
    printf("cuLaunchKernel add 1024: %.2f us\n", per_call_us([&] { cuLaunchKernel(fa, 4, 1, 1, 256, 1, 1, 0, (CUstream)s, args, nullptr); }, 100, s));
    printf("cudaLaunchKernel add 1024: %.2f us\n", per_call_us([&] { cudaLaunchKernel((const void*)add_k, dim3(4), dim3(256), args, 0, s); }, 100, s));
    cudaGraph_t g; cudaGraphExec_t ge;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    cuLaunchKernel(fa, 4, 1, 1, 256, 1, 1, 0, (CUstream)s, args, nullptr);
    cudaStreamEndCapture(s, &g);
    cudaGraphInstantiate(&ge, g, 0);
    printf("cudaGraphLaunch add 1024: %.2f us\n", per_call_us([&] { cudaGraphLaunch(ge, s); }, 100, s));
    // one launch then a wait for it, as a synchronous run would
    printf("cuLaunchKernel add 1024 + sync: %.2f us\n", per_call_us([&] { cuLaunchKernel(fa, 4, 1, 1, 256, 1, 1, 0, (CUstream)s, args, nullptr); cudaStreamSynchronize(s); }, 100, s));
    printf("error state: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
}

// Runs the engine's CUDA C kernels on the CPU for tests (tests/engine/cuda_emulator.py): one std::thread per CUDA
// thread, one block at a time, __shared__ as function statics, __syncthreads as a barrier, atomics under a mutex.
// Only what kernels/*.cu use is provided. Floating point: no contraction (as --fmad=false), no flush to zero.
#pragma once
#include <math.h>

#include <atomic>
#include <barrier>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

struct dim3 {
    unsigned int x = 1, y = 1, z = 1;
};
inline thread_local dim3 threadIdx;
inline dim3 blockIdx, blockDim, gridDim;
inline std::barrier<>* emulated_barrier = nullptr;
inline std::mutex emulated_atomics;

#define __global__
#define __device__
#define __shared__ static

inline void __syncthreads() { emulated_barrier->arrive_and_wait(); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline float __int_as_float(int bits) { float f; std::memcpy(&f, &bits, sizeof f); return f; }
inline double __longlong_as_double(long long bits) { double d; std::memcpy(&d, &bits, sizeof d); return d; }
inline long long min(long long a, long long b) { return a < b ? a : b; }

template <typename T> T atomicAdd(T* address, T value) {
    std::lock_guard<std::mutex> lock(emulated_atomics);
    const T old = *address;
    *address = old + value;
    return old;
}

inline void emulated_launch(unsigned gx, unsigned gy, unsigned bx, unsigned by, const std::function<void()>& body) {
    gridDim = {gx, gy, 1};
    blockDim = {bx, by, 1};
    const unsigned threads = bx * by;
    std::barrier<> barrier(threads);
    emulated_barrier = &barrier;
    for (unsigned y = 0; y < gy; ++y) {
        for (unsigned x = 0; x < gx; ++x) {
            blockIdx = {x, y, 0};
            std::vector<std::thread> pool;
            pool.reserve(threads);
            for (unsigned t = 0; t < threads; ++t) {
                pool.emplace_back([&body, t, bx]() {
                    threadIdx = {t % bx, t / bx, 0};
                    body();
                });
            }
            for (auto& thread : pool) thread.join();
        }
    }
    emulated_barrier = nullptr;
}

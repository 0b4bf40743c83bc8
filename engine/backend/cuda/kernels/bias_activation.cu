// Fused bias + activation (ReLU, exact-erf GELU) over a (rows, cols) array, bias on the last axis.
// Forward: one pass, y = act(x + b). Backward: one pass computing grad_x and per-(row slice, column) partial bias
// sums, then a small kernel adding the slices in order (deterministic). As engine/ops/activation.py.
#define TILE_COLS 32
#define TILE_ROWS 8

template <typename T> __device__ T erf_t(T x);
template <> __device__ float erf_t<float>(float x) { return erff(x); }
template <> __device__ double erf_t<double>(double x) { return erf(x); }
template <typename T> __device__ T exp_t(T x);
template <> __device__ float exp_t<float>(float x) { return expf(x); }
template <> __device__ double exp_t<double>(double x) { return exp(x); }

#define SQRT_HALF 0.70710678118654752440
#define INV_SQRT_2PI 0.39894228040143267794

// kind 0: ReLU (NaN stays NaN, as np.maximum); 1: GELU x * Phi(x).
template <typename T> __device__ T activate(T v, int kind) {
    if (kind == 0) return v < T(0) ? T(0) : v;
    return v * (T(0.5) * (T(1) + erf_t(v * T(SQRT_HALF))));
}

template <typename T> __device__ T activation_slope(T v, int kind) {
    if (kind == 0) return T(v > T(0));
    const T cdf = T(0.5) * (T(1) + erf_t(v * T(SQRT_HALF)));
    const T pdf = exp_t(T(-0.5) * v * v) * T(INV_SQRT_2PI);
    return cdf + v * pdf;
}

template <typename T>
__device__ void forward(const T* x, const T* bias, long long total, long long cols, int kind, T* y) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        y[i] = activate(x[i] + bias[i % cols], kind);
    }
}

// Block (TILE_COLS, TILE_ROWS) covers TILE_COLS columns of the row slice blockIdx.y of gridDim.y slices.
template <typename T>
__device__ void backward(const T* x, const T* bias, const T* grad_y, long long rows, long long cols, int kind,
                         T* grad_x, T* partial) {
    __shared__ T sums[TILE_ROWS][TILE_COLS];
    const long long col = blockIdx.x * (long long)TILE_COLS + threadIdx.x;
    const long long per_slice = (rows + gridDim.y - 1) / gridDim.y;
    const long long first = blockIdx.y * per_slice;
    const long long last = min(first + per_slice, rows);
    T acc = 0;
    if (col < cols) {
        const T b = bias[col];
        for (long long row = first + threadIdx.y; row < last; row += TILE_ROWS) {
            const long long i = row * cols + col;
            const T g = grad_y[i] * activation_slope(x[i] + b, kind);
            grad_x[i] = g;
            acc += g;
        }
    }
    sums[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && col < cols) {
        T total = sums[0][threadIdx.x];
        for (int r = 1; r < TILE_ROWS; ++r) total += sums[r][threadIdx.x];
        partial[blockIdx.y * cols + col] = total;
    }
}

template <typename T>
__device__ void sum_slices(const T* partial, long long slices, long long cols, T* grad_bias) {
    for (long long col = blockIdx.x * (long long)blockDim.x + threadIdx.x; col < cols;
         col += (long long)gridDim.x * blockDim.x) {
        T total = 0;
        for (long long s = 0; s < slices; ++s) total += partial[s * cols + col];
        grad_bias[col] = total;
    }
}

extern "C" __global__ void bias_activation_forward_f32(const float* x, const float* bias, long long total,
                                                       long long cols, int kind, float* y) {
    forward<float>(x, bias, total, cols, kind, y);
}
extern "C" __global__ void bias_activation_forward_f64(const double* x, const double* bias, long long total,
                                                       long long cols, int kind, double* y) {
    forward<double>(x, bias, total, cols, kind, y);
}
extern "C" __global__ void bias_activation_backward_f32(const float* x, const float* bias, const float* grad_y,
                                                        long long rows, long long cols, int kind, float* grad_x,
                                                        float* partial) {
    backward<float>(x, bias, grad_y, rows, cols, kind, grad_x, partial);
}
extern "C" __global__ void bias_activation_backward_f64(const double* x, const double* bias, const double* grad_y,
                                                        long long rows, long long cols, int kind, double* grad_x,
                                                        double* partial) {
    backward<double>(x, bias, grad_y, rows, cols, kind, grad_x, partial);
}
extern "C" __global__ void bias_grad_sum_f32(const float* partial, long long slices, long long cols,
                                             float* grad_bias) {
    sum_slices<float>(partial, slices, cols, grad_bias);
}
extern "C" __global__ void bias_grad_sum_f64(const double* partial, long long slices, long long cols,
                                             double* grad_bias) {
    sum_slices<double>(partial, slices, cols, grad_bias);
}

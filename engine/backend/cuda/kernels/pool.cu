// Max and average pooling over an already padded (N, C, H, W) input, as engine/ops/pool.py: max takes the first
// maximum along each kernel row, then over the rows (NaN propagates); average sums in row-major kernel order and
// multiplies by 1/(kh*kw). Max backward scatters with atomicAdd (windows may share their maximum); average backward
// gathers (one thread per input element).

template <typename T> __device__ T nan_max(T a, T b) { return (a > b || a != a) ? a : b; }

template <typename T>
__device__ void max_forward(const T* x, long long planes, long long h, long long w, int kh, int kw, int sh, int sw,
                            long long oh, long long ow, T* y, long long* argmax) {
    const long long total = planes * oh * ow;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long ox = i % ow;
        const long long oy = (i / ow) % oh;
        const long long plane = i / (oh * ow);
        const long long origin = plane * h * w + oy * sh * w + ox * sw;
        T best = 0;
        int best_row = 0, best_col = 0;
        for (int k = 0; k < kh; ++k) {
            const T* line = x + origin + k * w;
            T row = line[0];
            int col = 0;
            for (int j = 1; j < kw; ++j) {
                const T v = line[j];
                if (v > row) col = j;
                row = nan_max(row, v);
            }
            if (k == 0) {
                best = row;
                best_col = col;
            } else {
                if (row > best) {
                    best_row = k;
                    best_col = col;
                }
                best = nan_max(best, row);
            }
        }
        y[i] = best;
        argmax[i] = origin + (long long)best_row * w + best_col;
    }
}

template <typename T>
__device__ void max_backward(const T* grad_y, const long long* argmax, long long total, T* grad_x) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        atomicAdd(grad_x + argmax[i], grad_y[i]);
    }
}

template <typename T>
__device__ void avg_forward(const T* x, long long planes, long long h, long long w, int kh, int kw, int sh, int sw,
                            long long oh, long long ow, T* y) {
    const long long total = planes * oh * ow;
    const T share = T(1.0 / (kh * kw));
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long ox = i % ow;
        const long long oy = (i / ow) % oh;
        const long long plane = i / (oh * ow);
        const T* origin = x + plane * h * w + oy * sh * w + ox * sw;
        T acc = 0;
        for (int k = 0; k < kh; ++k)
            for (int j = 0; j < kw; ++j) acc += origin[k * w + j];
        y[i] = acc * share;
    }
}

template <typename T>
__device__ void avg_backward(const T* grad_y, long long planes, long long h, long long w, int kh, int kw, int sh,
                             int sw, long long oh, long long ow, T* grad_x) {
    const long long total = planes * h * w;
    const T share = T(1.0 / (kh * kw));
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long xx = i % w;
        const long long y = (i / w) % h;
        const T* g = grad_y + (i / (h * w)) * oh * ow;
        T acc = 0;
        for (int k = 0; k < kh; ++k) {
            const long long dy = y - k;
            if (dy < 0) break;
            if (dy % sh != 0 || dy / sh >= oh) continue;
            for (int j = 0; j < kw; ++j) {
                const long long dx = xx - j;
                if (dx < 0) break;
                if (dx % sw != 0 || dx / sw >= ow) continue;
                acc += g[(dy / sh) * ow + dx / sw] * share;
            }
        }
        grad_x[i] = acc;
    }
}

#define POOL_ARGS long long planes, long long h, long long w, int kh, int kw, int sh, int sw, long long oh, long long ow
#define POOL_PASS planes, h, w, kh, kw, sh, sw, oh, ow

extern "C" __global__ void max_pool_forward_f32(const float* x, POOL_ARGS, float* y, long long* argmax) {
    max_forward<float>(x, POOL_PASS, y, argmax);
}
extern "C" __global__ void max_pool_forward_f64(const double* x, POOL_ARGS, double* y, long long* argmax) {
    max_forward<double>(x, POOL_PASS, y, argmax);
}
extern "C" __global__ void max_pool_backward_f32(const float* grad_y, const long long* argmax, long long total,
                                                 float* grad_x) {
    max_backward<float>(grad_y, argmax, total, grad_x);
}
extern "C" __global__ void max_pool_backward_f64(const double* grad_y, const long long* argmax, long long total,
                                                 double* grad_x) {
    max_backward<double>(grad_y, argmax, total, grad_x);
}
extern "C" __global__ void avg_pool_forward_f32(const float* x, POOL_ARGS, float* y) {
    avg_forward<float>(x, POOL_PASS, y);
}
extern "C" __global__ void avg_pool_forward_f64(const double* x, POOL_ARGS, double* y) {
    avg_forward<double>(x, POOL_PASS, y);
}
extern "C" __global__ void avg_pool_backward_f32(const float* grad_y, POOL_ARGS, float* grad_x) {
    avg_backward<float>(grad_y, POOL_PASS, grad_x);
}
extern "C" __global__ void avg_pool_backward_f64(const double* grad_y, POOL_ARGS, double* grad_x) {
    avg_backward<double>(grad_y, POOL_PASS, grad_x);
}

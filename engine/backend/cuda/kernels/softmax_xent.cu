// Fused softmax cross-entropy. Forward: one block per row (max, exp-sum, probabilities and the row's loss in one
// pass over the logits); backward: one thread per logit, (p - onehot(label)) * scale. As engine/ops/loss.py.
#define MAX_THREADS 256

template <typename T> __device__ T exp_t(T x);
template <> __device__ float exp_t<float>(float x) { return expf(x); }
template <> __device__ double exp_t<double>(double x) { return exp(x); }
template <typename T> __device__ T log_t(T x);
template <> __device__ float log_t<float>(float x) { return logf(x); }
template <> __device__ double log_t<double>(double x) { return log(x); }
template <typename T> __device__ T quiet_nan();
template <> __device__ float quiet_nan<float>() { return __int_as_float(0x7fc00000); }
template <> __device__ double quiet_nan<double>() { return __longlong_as_double(0x7ff8000000000000LL); }
template <typename T> __device__ T negative_inf();
template <> __device__ float negative_inf<float>() { return __int_as_float(0xff800000); }
template <> __device__ double negative_inf<double>() { return __longlong_as_double(0xfff0000000000000LL); }

// The maximum that propagates NaN, as np.max.
template <typename T> __device__ T nan_max(T a, T b) { return (a > b || a != a) ? a : b; }

struct MaxOp { template <typename T> __device__ T operator()(T a, T b) const { return nan_max(a, b); } };
struct SumOp { template <typename T> __device__ T operator()(T a, T b) const { return a + b; } };

// Tree reduction over a power-of-two block; every thread gets the result.
template <typename T, typename Op>
__device__ T block_reduce(T value, T* shared, Op op) {
    shared[threadIdx.x] = value;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half) shared[threadIdx.x] = op(shared[threadIdx.x], shared[threadIdx.x + half]);
        __syncthreads();
    }
    T result = shared[0];
    __syncthreads();
    return result;
}

template <typename T>
__device__ void xent_forward(const T* logits, const long long* labels, int classes, long long ignore_index,
                             T* loss, T* probs) {
    __shared__ T shared[MAX_THREADS];
    const long long row = blockIdx.x;
    const T* z = logits + row * classes;
    T* p = probs + row * classes;
    T top = negative_inf<T>();
    for (int c = threadIdx.x; c < classes; c += blockDim.x) top = nan_max(top, z[c]);
    top = block_reduce(top, shared, MaxOp());
    T total = 0;
    for (int c = threadIdx.x; c < classes; c += blockDim.x) {
        T e = exp_t(z[c] - top);
        p[c] = e;
        total += e;
    }
    total = block_reduce(total, shared, SumOp());
    for (int c = threadIdx.x; c < classes; c += blockDim.x) p[c] = p[c] / total;
    if (threadIdx.x == 0) {
        const long long label = labels[row];
        T value;
        if (label == ignore_index) value = 0;
        else if (label < 0 || label >= classes) value = quiet_nan<T>();
        else value = log_t(total) - (z[label] - top);
        loss[row] = value;
    }
}

// scale_stride 0: one scale for every row; 1: one per row.
template <typename T>
__device__ void xent_backward(const T* probs, const long long* labels, const T* scale, long long scale_stride,
                              long long rows, int classes, long long ignore_index, T* grad) {
    const long long total = rows * classes;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long row = i / classes;
        const long long label = labels[row];
        T g;
        if (label == ignore_index) g = 0;
        else if (label < 0 || label >= classes) g = quiet_nan<T>();
        else {
            const T s = scale[row * scale_stride];
            g = probs[i] * s;
            if (i - row * classes == label) g = g - s;
        }
        grad[i] = g;
    }
}

extern "C" __global__ void softmax_xent_forward_f32(const float* logits, const long long* labels, int classes,
                                                    long long ignore_index, float* loss, float* probs) {
    xent_forward<float>(logits, labels, classes, ignore_index, loss, probs);
}
extern "C" __global__ void softmax_xent_forward_f64(const double* logits, const long long* labels, int classes,
                                                    long long ignore_index, double* loss, double* probs) {
    xent_forward<double>(logits, labels, classes, ignore_index, loss, probs);
}
extern "C" __global__ void softmax_xent_backward_f32(const float* probs, const long long* labels, const float* scale,
                                                     long long scale_stride, long long rows, int classes,
                                                     long long ignore_index, float* grad) {
    xent_backward<float>(probs, labels, scale, scale_stride, rows, classes, ignore_index, grad);
}
extern "C" __global__ void softmax_xent_backward_f64(const double* probs, const long long* labels,
                                                     const double* scale, long long scale_stride, long long rows,
                                                     int classes, long long ignore_index, double* grad) {
    xent_backward<double>(probs, labels, scale, scale_stride, rows, classes, ignore_index, grad);
}

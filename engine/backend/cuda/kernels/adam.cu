// Adam / AdamW over every parameter in one launch (multi-tensor). ``table`` (int64, on the device) holds, for
// ``tensors`` tensors and ``chunks`` chunks: the addresses of the parameters, gradients, first moments, second
// moments and AMSGrad maxima (0 without AMSGrad), the sizes, then per chunk its tensor and first element. Block b
// updates chunk b: elements [start, min(start + chunk_size, size)). The operation order is engine/optim/adam.py's
// (torch's), so with --fmad=false float32 results equal NumPy's bit for bit.

template <typename T> __device__ T sqrt_t(T x);
template <> __device__ float sqrt_t<float>(float x) { return sqrtf(x); }
template <> __device__ double sqrt_t<double>(double x) { return sqrt(x); }
template <typename T> __device__ T nan_max(T a, T b) { return (a > b || a != a) ? a : b; }

template <typename T>
__device__ void adam_impl(const long long* table, int tensors, int chunks, long long chunk_size, T keep, T weight_decay,
                          T one_minus_beta1, T beta2, T one_minus_beta2, T negative_step_size,
                          T bias_correction2_sqrt, T eps, int mode) {
    // mode: bit 0 weight decay on, bit 1 decoupled (AdamW), bit 2 AMSGrad
    const long long* sizes = table + 5 * tensors;
    const int tensor = (int)table[6 * tensors + blockIdx.x];
    const long long start = table[6 * tensors + chunks + blockIdx.x];
    const long long end = min(start + chunk_size, sizes[tensor]);
    T* param = (T*)table[tensor];
    const T* grad = (const T*)table[tensors + tensor];
    T* exp_avg = (T*)table[2 * tensors + tensor];
    T* exp_avg_sq = (T*)table[3 * tensors + tensor];
    T* max_exp_avg_sq = (T*)table[4 * tensors + tensor];
    for (long long i = start + threadIdx.x; i < end; i += blockDim.x) {
        T data = param[i];
        T g = grad[i];
        if (mode & 1) {
            if (mode & 2) data = data * keep;
            else g = g + data * weight_decay;
        }
        T m = exp_avg[i];
        m = m + (g - m) * one_minus_beta1;
        T v = exp_avg_sq[i] * beta2;
        v = v + (g * one_minus_beta2) * g;
        T base = v;
        if (mode & 4) {
            base = nan_max(max_exp_avg_sq[i], v);
            max_exp_avg_sq[i] = base;
        }
        const T denominator = sqrt_t(base) / bias_correction2_sqrt + eps;
        param[i] = data + (m * negative_step_size) / denominator;
        exp_avg[i] = m;
        exp_avg_sq[i] = v;
    }
}

#define ADAM_ARGS(T) const long long* table, int tensors, int chunks, long long chunk_size, T keep, T weight_decay, \
    T one_minus_beta1, T beta2, T one_minus_beta2, T negative_step_size, T bias_correction2_sqrt, T eps, int mode
#define ADAM_PASS table, tensors, chunks, chunk_size, keep, weight_decay, one_minus_beta1, beta2, one_minus_beta2, \
    negative_step_size, bias_correction2_sqrt, eps, mode

extern "C" __global__ void adam_step_f32(ADAM_ARGS(float)) { adam_impl<float>(ADAM_PASS); }
extern "C" __global__ void adam_step_f64(ADAM_ARGS(double)) { adam_impl<double>(ADAM_PASS); }

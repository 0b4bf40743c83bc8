// im2col / col2im for Conv2d on an already padded (N, C, H, W) input. cols is (N, C*kh*kw, OH*OW) with row
// (c*kh + i)*kw + j. col2im gathers (one thread per input element, no atomics) and adds the kernel offsets in
// row-major order, as the NumPy reference's slice adds.

template <typename T>
__device__ void im2col_impl(const T* x, long long n, long long c, long long h, long long w, int kh, int kw, int sh,
                            int sw, long long oh, long long ow, T* cols) {
    const long long positions = oh * ow;
    const long long patch = c * kh * kw;
    const long long total = n * patch * positions;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long position = i % positions;
        const long long t = i / positions;
        const long long row = t % patch;
        const long long image = t / patch;
        const int j = row % kw;
        const int k = (row / kw) % kh;
        const long long channel = row / ((long long)kh * kw);
        const long long y = (position / ow) * sh + k;
        const long long xx = (position % ow) * sw + j;
        cols[i] = x[((image * c + channel) * h + y) * w + xx];
    }
}

template <typename T>
__device__ void col2im_impl(const T* cols, long long n, long long c, long long h, long long w, int kh, int kw, int sh,
                            int sw, long long oh, long long ow, T* x) {
    const long long positions = oh * ow;
    const long long patch = c * kh * kw;
    const long long total = n * c * h * w;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long xx = i % w;
        const long long y = (i / w) % h;
        const long long plane = i / (h * w);
        const long long channel = plane % c;
        const long long image = plane / c;
        const T* base = cols + image * patch * positions;
        T acc = 0;
        for (int k = 0; k < kh; ++k) {
            const long long dy = y - k;
            if (dy < 0) break;
            if (dy % sh != 0 || dy / sh >= oh) continue;
            for (int j = 0; j < kw; ++j) {
                const long long dx = xx - j;
                if (dx < 0) break;
                if (dx % sw != 0 || dx / sw >= ow) continue;
                acc += base[((channel * kh + k) * kw + j) * positions + (dy / sh) * ow + dx / sw];
            }
        }
        x[i] = acc;
    }
}

extern "C" __global__ void im2col_f32(const float* x, long long n, long long c, long long h, long long w, int kh,
                                      int kw, int sh, int sw, long long oh, long long ow, float* cols) {
    im2col_impl<float>(x, n, c, h, w, kh, kw, sh, sw, oh, ow, cols);
}
extern "C" __global__ void im2col_f64(const double* x, long long n, long long c, long long h, long long w, int kh,
                                      int kw, int sh, int sw, long long oh, long long ow, double* cols) {
    im2col_impl<double>(x, n, c, h, w, kh, kw, sh, sw, oh, ow, cols);
}
extern "C" __global__ void col2im_f32(const float* cols, long long n, long long c, long long h, long long w, int kh,
                                      int kw, int sh, int sw, long long oh, long long ow, float* x) {
    col2im_impl<float>(cols, n, c, h, w, kh, kw, sh, sw, oh, ow, x);
}
extern "C" __global__ void col2im_f64(const double* cols, long long n, long long c, long long h, long long w, int kh,
                                      int kw, int sh, int sw, long long oh, long long ow, double* x) {
    col2im_impl<double>(cols, n, c, h, w, kh, kw, sh, sw, oh, ow, x);
}

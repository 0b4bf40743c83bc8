// The statistics watch() needs, in one launch each.
// segment_stats: per segment of a flat buffer, the sum of squares (float64 accumulation), the minimum and maximum of
// the finite values, the NaN and the +-Inf counts, as instrumentation/dynamics/segment_stats.py. Each block reduces
// one chunk of one segment into ``partials``; the last block of a segment to finish (an atomic counter per segment,
// reset by that block) adds the segment's partials in chunk order, so the result does not depend on block timing.
// ``table`` (int64): per chunk its segment, first and end element; per segment its first chunk and chunk count.
// ``out`` is 5 rows of ``segments`` doubles: sum of squares, minimum, maximum, NaN count, Inf count.
// dead_units: per unit, how many values are not > 0 (NaN counts), over (N, units) or (N, units, positions).
#define THREADS 256

struct Stats {
    double sum, low, high, nans, infs;
};

__device__ double positive_inf() { return __longlong_as_double(0x7ff0000000000000LL); }

__device__ Stats empty_stats() {
    Stats s;
    s.sum = 0; s.low = positive_inf(); s.high = -positive_inf(); s.nans = 0; s.infs = 0;
    return s;
}

__device__ Stats merge(Stats a, const Stats& b) {
    a.sum += b.sum;
    a.low = fmin(a.low, b.low);
    a.high = fmax(a.high, b.high);
    a.nans += b.nans;
    a.infs += b.infs;
    return a;
}

// Tree reduction of a THREADS-thread block; thread 0 gets the result.
__device__ Stats block_merge(Stats value) {
    __shared__ double shared[5][THREADS];
    const int t = threadIdx.x;
    for (int half = THREADS / 2; half > 0; half >>= 1) {
        if (t >= half && t < 2 * half) {
            shared[0][t - half] = value.sum; shared[1][t - half] = value.low; shared[2][t - half] = value.high;
            shared[3][t - half] = value.nans; shared[4][t - half] = value.infs;
        }
        __syncthreads();
        if (t < half) {
            Stats other;
            other.sum = shared[0][t]; other.low = shared[1][t]; other.high = shared[2][t];
            other.nans = shared[3][t]; other.infs = shared[4][t];
            value = merge(value, other);
        }
        __syncthreads();
    }
    return value;
}

template <typename T>
__device__ void segment_stats_impl(const T* flat, const long long* table, int segments, int chunks, double* partials,
                                   unsigned int* counters, double* out) {
    __shared__ bool last;
    const int chunk = blockIdx.x;
    const int segment = (int)table[chunk];
    Stats s = empty_stats();
    for (long long i = table[chunks + chunk] + threadIdx.x; i < table[2 * chunks + chunk]; i += THREADS) {
        const double v = (double)flat[i];
        if (v != v) s.nans += 1;
        else if (fabs(v) == positive_inf()) s.infs += 1;
        else { s.low = fmin(s.low, v); s.high = fmax(s.high, v); }
        s.sum += v * v;  // NaN if a NaN is in the segment, else inf if an inf is
    }
    s = block_merge(s);
    if (threadIdx.x == 0) {
        double* mine = partials + 5 * (long long)chunk;
        mine[0] = s.sum; mine[1] = s.low; mine[2] = s.high; mine[3] = s.nans; mine[4] = s.infs;
        __threadfence();
        const unsigned int done = atomicAdd(counters + segment, 1u);
        last = done + 1 == (unsigned int)table[3 * chunks + segments + segment];
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    const int first = (int)table[3 * chunks + segment];
    const int count = (int)table[3 * chunks + segments + segment];
    const volatile double* all = partials;
    Stats total = empty_stats();
    for (int k = threadIdx.x; k < count; k += THREADS) {
        const volatile double* p = all + 5 * (long long)(first + k);
        Stats other;
        other.sum = p[0]; other.low = p[1]; other.high = p[2]; other.nans = p[3]; other.infs = p[4];
        total = merge(total, other);
    }
    total = block_merge(total);
    if (threadIdx.x == 0) {
        const double nan = __longlong_as_double(0x7ff8000000000000LL);
        const bool none = total.low > total.high;  // no finite value
        out[segment] = total.sum;
        out[segments + segment] = none ? nan : total.low;
        out[2 * segments + segment] = none ? nan : total.high;
        out[3 * segments + segment] = total.nans;
        out[4 * segments + segment] = total.infs;
        counters[segment] = 0;
    }
}

// (rows, units), units contiguous: blocks of (32, 8) threads cover 32 units of a slice of the rows.
template <typename T>
__device__ void dead_units_rows(const T* a, long long rows, long long units, unsigned long long* counts) {
    __shared__ unsigned long long sums[8][32];
    const long long unit = blockIdx.x * 32LL + threadIdx.x;
    const long long per_slice = (rows + gridDim.y - 1) / gridDim.y;
    const long long first = blockIdx.y * per_slice;
    const long long last = min(first + per_slice, rows);
    unsigned long long n = 0;
    if (unit < units)
        for (long long row = first + threadIdx.y; row < last; row += 8) n += !(a[row * units + unit] > T(0));
    sums[threadIdx.y][threadIdx.x] = n;
    __syncthreads();
    if (threadIdx.y == 0 && unit < units) {
        for (int r = 1; r < 8; ++r) n += sums[r][threadIdx.x];
        if (n) atomicAdd(counts + unit, n);
    }
}

// (batch, units, positions): block b counts the positions of (image b / units, unit b % units).
template <typename T>
__device__ void dead_units_planes(const T* a, long long units, long long positions, unsigned long long* counts) {
    __shared__ unsigned long long sums[THREADS];
    const T* plane = a + blockIdx.x * positions;
    unsigned long long n = 0;
    for (long long p = threadIdx.x; p < positions; p += THREADS) n += !(plane[p] > T(0));
    sums[threadIdx.x] = n;
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half) sums[threadIdx.x] += sums[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0 && sums[0]) atomicAdd(counts + blockIdx.x % units, sums[0]);
}

extern "C" __global__ void segment_stats_f32(const float* flat, const long long* table, int segments, int chunks,
                                             double* partials, unsigned int* counters, double* out) {
    segment_stats_impl<float>(flat, table, segments, chunks, partials, counters, out);
}
extern "C" __global__ void segment_stats_f64(const double* flat, const long long* table, int segments, int chunks,
                                             double* partials, unsigned int* counters, double* out) {
    segment_stats_impl<double>(flat, table, segments, chunks, partials, counters, out);
}
extern "C" __global__ void dead_units_rows_f32(const float* a, long long rows, long long units,
                                               unsigned long long* counts) {
    dead_units_rows<float>(a, rows, units, counts);
}
extern "C" __global__ void dead_units_rows_f64(const double* a, long long rows, long long units,
                                               unsigned long long* counts) {
    dead_units_rows<double>(a, rows, units, counts);
}
extern "C" __global__ void dead_units_planes_f32(const float* a, long long units, long long positions,
                                                 unsigned long long* counts) {
    dead_units_planes<float>(a, units, positions, counts);
}
extern "C" __global__ void dead_units_planes_f64(const double* a, long long units, long long positions,
                                                 unsigned long long* counts) {
    dead_units_planes<double>(a, units, positions, counts);
}

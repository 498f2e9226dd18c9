/* Batch normalization with the batch's statistics, its gradient, and ReLU's gradient, as compiled loops
 * called by compiled_normalization.py through ctypes.
 *
 * For X of shape (N, C, S) (S the product of the spatial sizes), per channel c over its N * S elements:
 *
 *     mean = sum(X) / (N S),  var = sum((X - mean)^2) / (N S),  k = scale / sqrt(var + epsilon)
 *     Y = X k + (B - mean k), computed as (X - m) k + (B - r k) for m the float mean of a first pass and
 *     r = sum(X - m) / (N S) (so mean = m + r, var = sum((X - m)^2) / (N S) - r^2)
 *
 *     dX = G k - k / (N S) * (sum(G) + (X - mean) sum(G (X - mean)) / (var + epsilon))
 *     dscale = sum(G (X - mean)) / sqrt(var + epsilon),  dB = sum(G)
 *
 * and ReLU's gradient dX = 0 where Y <= 0, else G (NaN in Y gives G, as PyTorch's threshold_backward and
 * Where(LessOrEqual(Y, 0), 0, G)). When a
 * ReLU reads the normalization's output, the forward may write that ReLU's output in place of Y, and
 * the gradient may take G masked by it: the ReLU and its gradient then cost no pass of their own. At a
 * residual block's end the forward may also add the shortcut R to Y first (relu(Y + R)), which saves
 * that Add's pass as well.
 *
 * onnxruntime runs each as several graph nodes (runtime/ops/batch_norm_training.py), each a full pass
 * over the activations; ReLU's gradient is a Greater and a Where, whose kernel is three times slower than
 * a Mul. Here one channel's N planes are read once from memory and re-read from the cache: a 32-sample
 * 16-channel layer at 32x32 (2 MB) takes 0.25 ms forward against 0.8 in onnxruntime's nodes.
 *
 * Rounding: each plane's sums in float32 by lane (vectors of eight), added into a double per channel;
 * the per-channel coefficients in double. The second pass sums X - m and its squares, which X - m's
 * small mean keeps accurate, and Y reads X - m, exact for X within a factor 2 of m: the float mean's
 * rounding (ulp(mean) / (2 std) in Y: 1e-3 for a mean of 1e4) never enters Y, as in the corrected
 * two-pass algorithm (Chan, Golub and LeVeque, 1983). Threads take pieces of whole channels (or, for ReLU's gradient,
 * ranges of elements), so the results do not depend on their number.
 */
#include "convolution_loops.h"

#include <math.h>


#define NORMALIZATION_LOOPS_VERSION 6

EXPORTED int onnxnn_normalization_loops_version(void) { return NORMALIZATION_LOOPS_VERSION; }

typedef int32_t mask8 __attribute__((vector_size(8 * sizeof(int32_t))));

/* One thread's share of a call: the arrays, the sizes and its range [first, end) of channels or elements. */
typedef struct {
    void (*loop)(const void *share);
    const float *x, *g, *scale, *bias, *mean, *variance, *mask, *residual;
    float *y, *mean_out, *variance_out, *scale_gradient, *bias_gradient;
    int64_t batch, channels, plane, first, end;
    float epsilon;
} Share;

/* Eight floats at any float's address (the planes start anywhere), read or written as one vector. */
typedef float unaligned8 __attribute__((vector_size(8 * sizeof(float)), aligned(sizeof(float)), may_alias));
#define LOAD8(from) (*(const unaligned8 *)(from))
#define STORE8(to, value) (*(unaligned8 *)(to) = (value))
#define SPLAT8(value) ((vector8){0} + (value))

/* The sum of the lanes of ``*value`` (by address: a vector argument draws GCC's ABI note). */
ALWAYS_INLINE float lanes_sum(const vector8 *value)
{
    float sum = 0.0f;
    for (int lane = 0; lane < 8; lane++) sum += (*value)[lane];
    return sum;
}

/* Elements a plane's sums take in float32 lanes before their lanes are added into a double: each lane then
 * adds at most 64 (128 in ``plane_sums``) elements, so that a sum errs by at most about that many ulps of
 * a block's sum of magnitudes, whatever the plane's size (one lane adding a 224x224 plane's 1568: 1568). */
#define SUM_BLOCK 2048

/* sum(p[i]) over one plane of ``size`` floats. */
ALWAYS_INLINE double plane_sum(const float *p, int64_t size)
{
    double sum = 0.0;
    int64_t i = 0;
    while (i + 32 <= size) {
        const int64_t end = size - i < SUM_BLOCK ? size : i + SUM_BLOCK;
        vector8 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        for (; i + 32 <= end; i += 32) {
            a0 += LOAD8(p + i), a1 += LOAD8(p + i + 8), a2 += LOAD8(p + i + 16), a3 += LOAD8(p + i + 24);
        }
        const vector8 total = (a0 + a1) + (a2 + a3);
        sum += (double)lanes_sum(&total);
    }
    float tail = 0.0f;
    for (; i < size; i++) tail += p[i];
    return sum + (double)tail;
}

/* sum(p[i] - shift) into ``*sum`` and sum((p[i] - shift)^2) into ``*squares`` over one plane of ``size`` floats. */
ALWAYS_INLINE void plane_sums(const float *p, int64_t size, float shift, double *sum, double *squares)
{
    const vector8 center = SPLAT8(shift);
    int64_t i = 0;
    while (i + 16 <= size) {
        const int64_t end = size - i < SUM_BLOCK ? size : i + SUM_BLOCK;
        vector8 a0 = {0}, a1 = {0}, q0 = {0}, q1 = {0};
        for (; i + 16 <= end; i += 16) {
            const vector8 d0 = LOAD8(p + i) - center, d1 = LOAD8(p + i + 8) - center;
            a0 += d0, a1 += d1;
            q0 += d0 * d0, q1 += d1 * d1;
        }
        const vector8 total = a0 + a1, total_squares = q0 + q1;
        *sum += (double)lanes_sum(&total);
        *squares += (double)lanes_sum(&total_squares);
    }
    float tail = 0.0f, tail_squares = 0.0f;
    for (; i < size; i++) {
        const float d = p[i] - shift;
        tail += d, tail_squares += d * d;
    }
    *sum += (double)tail;
    *squares += (double)tail_squares;
}

/* ``residual``: Y + the residual in place of Y (an Add reading Y: a residual block's sum), rounded once as
 * onnxruntime's Add rounds it; ``relu``: then the ReLU of that (NaN and -0 kept, negatives 0, as
 * onnxruntime's Relu), for a ReLU reading it. */
ALWAYS_INLINE void forward_channels(const Share *s, int residual, int relu)
{
    const int64_t plane = s->plane, stride = s->channels * plane, count = s->batch * plane;
    for (int64_t c = s->first; c < s->end; c++) {
        const float *x = s->x + c * plane;
        double total = 0.0;
        for (int64_t n = 0; n < s->batch; n++) total += plane_sum(x + n * stride, plane);
        /* The corrected two-pass algorithm: the statistics of X - center (exact where X is within a factor
         * 2 of center), whose mean ``residual`` is small, and Y from X - center with that mean. The float
         * mean's rounding, ulp(mean) / 2 (ulp(mean) / (2 std) in Y), never enters. */
        const float center = (float)(total / (double)count);
        double sum = 0.0, squares = 0.0;
        for (int64_t n = 0; n < s->batch; n++) plane_sums(x + n * stride, plane, center, &sum, &squares);
        const double residual_mean = sum / (double)count;
        const float variance = (float)fmax(squares / (double)count - residual_mean * residual_mean, 0.0);
        s->mean_out[c] = (float)((double)center + residual_mean);
        s->variance_out[c] = variance;
        const double factor = (double)s->scale[c] / sqrt((double)variance + (double)s->epsilon);
        const float k = (float)factor, shift = (float)((double)s->bias[c] - residual_mean * factor);
        const vector8 center_v = SPLAT8(center), kv = SPLAT8(k), shift_v = SPLAT8(shift);
        for (int64_t n = 0; n < s->batch; n++) {
            const float *from = x + n * stride;
            const float *added = residual ? s->residual + c * plane + n * stride : NULL;
            float *to = s->y + c * plane + n * stride;
            int64_t i = 0;
            for (; i + 8 <= plane; i += 8) {
                vector8 value = (LOAD8(from + i) - center_v) * kv + shift_v;
                if (residual) value += LOAD8(added + i);
                STORE8(to + i, relu ? (vector8)((mask8)value & ~(value < (vector8){0})) : value);
            }
            for (; i < plane; i++) {
                float value = (from[i] - center) * k + shift;
                if (residual) value += added[i];
                to[i] = relu && value < 0.0f ? 0.0f : value;
            }
        }
    }
}

ALWAYS_INLINE void plain_forward_channels(const Share *s) { forward_channels(s, 0, 0); }

ALWAYS_INLINE void relu_forward_channels(const Share *s) { forward_channels(s, 0, 1); }

ALWAYS_INLINE void residual_forward_channels(const Share *s) { forward_channels(s, 1, 0); }

ALWAYS_INLINE void residual_relu_forward_channels(const Share *s) { forward_channels(s, 1, 1); }

/* G's eight floats at ``i`` (``masked``: 0 where the ReLU output ``y`` is at most 0, NaN passing G), and one float. */
#define GRADIENT8(gp, yp, i, masked) \
    ((masked) ? (vector8)((mask8)LOAD8((gp) + (i)) & ~(LOAD8((yp) + (i)) <= (vector8){0})) : (vector8)LOAD8((gp) + (i)))
#define GRADIENT1(gp, yp, i, masked) ((masked) ? ((yp)[i] <= 0.0f ? 0.0f : (gp)[i]) : (gp)[i])

/* ``masked``: G is first masked by the ReLU output (``s->mask``) it went through, ReluGradient's pass folded in. */
ALWAYS_INLINE void gradient_channels(const Share *s, int masked)
{
    const int64_t plane = s->plane, stride = s->channels * plane, count = s->batch * plane;
    for (int64_t c = s->first; c < s->end; c++) {
        const float *x = s->x + c * plane, *g = s->g + c * plane, *y = masked ? s->mask + c * plane : NULL;
        const float mean = s->mean[c];
        const vector8 center = SPLAT8(mean);
        double sum_g = 0.0, sum_gc = 0.0;
        for (int64_t n = 0; n < s->batch; n++) {
            const float *xp = x + n * stride, *gp = g + n * stride, *yp = masked ? y + n * stride : NULL;
            vector8 s0 = {0}, s1 = {0}, t0 = {0}, t1 = {0};
            int64_t i = 0;
            for (; i + 16 <= plane; i += 16) {
                const vector8 g0 = GRADIENT8(gp, yp, i, masked), g1 = GRADIENT8(gp, yp, i + 8, masked);
                s0 += g0, s1 += g1;
                t0 += g0 * (LOAD8(xp + i) - center), t1 += g1 * (LOAD8(xp + i + 8) - center);
            }
            float g_tail = 0.0f, gc_tail = 0.0f;
            for (; i < plane; i++) {
                const float gi = GRADIENT1(gp, yp, i, masked);
                g_tail += gi, gc_tail += gi * (xp[i] - mean);
            }
            const vector8 g_lanes = s0 + s1, gc_lanes = t0 + t1;
            sum_g += (double)lanes_sum(&g_lanes) + (double)g_tail;
            sum_gc += (double)lanes_sum(&gc_lanes) + (double)gc_tail;
        }
        const double inverse_std = 1.0 / sqrt((double)s->variance[c] + (double)s->epsilon);
        const double factor = (double)s->scale[c] * inverse_std, per_element = -factor / (double)count;
        s->scale_gradient[c] = (float)(sum_gc * inverse_std);
        s->bias_gradient[c] = (float)sum_g;
        const float k = (float)factor, shift = (float)(per_element * sum_g);
        const float centered_factor = (float)(per_element * inverse_std * inverse_std * sum_gc);
        const vector8 kv = SPLAT8(k), shift_v = SPLAT8(shift), centered_v = SPLAT8(centered_factor);
        for (int64_t n = 0; n < s->batch; n++) {
            const float *xp = x + n * stride, *gp = g + n * stride, *yp = masked ? y + n * stride : NULL;
            float *to = s->y + c * plane + n * stride;
            int64_t i = 0;
            for (; i + 8 <= plane; i += 8)
                STORE8(to + i, GRADIENT8(gp, yp, i, masked) * kv + shift_v + (LOAD8(xp + i) - center) * centered_v);
            for (; i < plane; i++) to[i] = GRADIENT1(gp, yp, i, masked) * k + shift + (xp[i] - mean) * centered_factor;
        }
    }
}

ALWAYS_INLINE void plain_gradient_channels(const Share *s) { gradient_channels(s, 0); }

ALWAYS_INLINE void masked_gradient_channels(const Share *s) { gradient_channels(s, 1); }

ALWAYS_INLINE void relu_gradient_range(const Share *s)
{
    int64_t i = s->first;
    for (; i + 8 <= s->end; i += 8) {
        const mask8 drop = LOAD8(s->x + i) <= (vector8){0};
        STORE8(s->y + i, (vector8)((mask8)LOAD8(s->g + i) & ~drop));
    }
    for (; i < s->end; i++) s->y[i] = s->x[i] <= 0.0f ? 0.0f : s->g[i];
}

/* Each loop in two builds: AVX2 (for builds 0 and 1: these loops wait on memory, AVX-512 gains nothing)
 * and the baseline. */
#define DEFINE_BUILDS(name, body)                                                                                 \
    __attribute__((target("avx2,fma"))) static void name##_avx2(const void *share) { body(share); }             \
    static void name##_baseline(const void *share) { body(share); }                                               \
    static void (*name##_loop(void))(const void *) { return chosen_build() == 2 ? name##_baseline : name##_avx2; }

DEFINE_BUILDS(forward, plain_forward_channels)
DEFINE_BUILDS(relu_forward, relu_forward_channels)
DEFINE_BUILDS(residual_forward, residual_forward_channels)
DEFINE_BUILDS(residual_relu_forward, residual_relu_forward_channels)
DEFINE_BUILDS(gradient, plain_gradient_channels)
DEFINE_BUILDS(masked_gradient, masked_gradient_channels)
DEFINE_BUILDS(relu_gradient, relu_gradient_range)

static void *run_share(void *argument)
{
    const Share *share = argument;
    share->loop(share);
    return NULL;
}

/* Pieces per thread a call is cut into, and at most: a thread that starts late, or loses its core for a
 * while, leaves its pieces to the others (loop_threads.c). */
#define PIECES_PER_THREAD 8
#define MOST_PIECES 128

/* Runs ``share``'s loop over [0, parts) on up to ``threads`` threads (one per 2^18 elements of
 * ``elements``), in pieces of whole multiples of ``granule``: a normalization's channels, a ReLU's ranges
 * of elements. Each element's arithmetic is the same in any piece, so the results do not depend on the
 * number of threads. Returns 0. */
static int run_split(Share share, int threads, int64_t parts, int64_t elements, int64_t granule)
{
    Share shares[MOST_PIECES];
    const int64_t count = thread_count(threads, parts / granule, elements * 16);
    const int64_t granules = parts / granule > 0 ? parts / granule : 1;
    int64_t pieces = count == 1 ? 1 : count * PIECES_PER_THREAD;
    pieces = pieces < granules ? pieces : granules;
    pieces = pieces < MOST_PIECES ? pieces : MOST_PIECES;
    for (int64_t t = 0; t < pieces; t++) {
        shares[t] = share;
        shares[t].first = t == 0 ? 0 : granules * t / pieces * granule;
        shares[t].end = t == pieces - 1 ? parts : granules * (t + 1) / pieces * granule;
    }
    run_shares(run_share, shares, sizeof(Share), pieces, count);
    return 0;
}

/* Y (N, C, S), mean and variance (C) from C-contiguous float32 X (N, C, S), scale and B (C); with ``residual``
 * (N, C, S; or NULL), Y + residual in place of Y; ``relu``: then its ReLU in place of it. Returns 0. */
EXPORTED int onnxnn_batch_norm_training_float32(const float *x, const float *scale, const float *bias,
                                                const float *residual, float *y, float *mean, float *variance,
                                                int64_t batch, int64_t channels, int64_t plane, float epsilon,
                                                int relu, int threads)
{
    void (*loop)(const void *) = residual != NULL ? (relu ? residual_relu_forward_loop() : residual_forward_loop())
                                                  : (relu ? relu_forward_loop() : forward_loop());
    const Share share = {.loop = loop, .x = x, .scale = scale, .bias = bias, .residual = residual, .y = y,
                         .mean_out = mean, .variance_out = variance, .batch = batch, .channels = channels,
                         .plane = plane, .epsilon = epsilon};
    return run_split(share, threads, channels, batch * channels * plane, 1);
}

/* dX (N, C, S), dscale and dB (C) from C-contiguous float32 G and X (N, C, S), scale and the forward's mean and
 * variance (C); with ``relu_output`` (N, C, S; or NULL), 0 where it is at most 0, else G, in place of G (the
 * gradient reaching a ReLU that reads the normalization's output). Returns 0. */
EXPORTED int onnxnn_batch_norm_training_gradient_float32(const float *g, const float *x, const float *scale,
                                                         const float *mean, const float *variance,
                                                         const float *relu_output, float *dx, float *scale_gradient,
                                                         float *bias_gradient, int64_t batch, int64_t channels,
                                                         int64_t plane, float epsilon, int threads)
{
    const Share share = {.loop = relu_output != NULL ? masked_gradient_loop() : gradient_loop(), .x = x, .g = g,
                         .scale = scale, .mean = mean, .variance = variance, .mask = relu_output, .y = dx,
                         .scale_gradient = scale_gradient, .bias_gradient = bias_gradient, .batch = batch,
                         .channels = channels, .plane = plane, .epsilon = epsilon};
    return run_split(share, threads, channels, (relu_output != NULL ? 3 : 2) * batch * channels * plane, 1);
}

/* dX = 0 where Y <= 0, else G (NaN passing G), over ``count`` float32 elements. Returns 0. */
EXPORTED int onnxnn_relu_gradient_float32(const float *g, const float *y, float *dx, int64_t count, int threads)
{
    const Share share = {.loop = relu_gradient_loop(), .x = y, .g = g, .y = dx};
    return run_split(share, threads, count, count, 64);
}

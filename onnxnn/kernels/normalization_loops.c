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
 * and an activation's gradient from its output A: for a ReLU, dX = 0 where A <= 0, else G (NaN in A gives
 * G, as PyTorch's threshold_backward and Where(LessOrEqual(A, 0), 0, G)); for a clamp to [low, high] (a
 * Hardtanh, ReLU6), also 0 where A >= high (PyTorch's hardtanh_backward, which tests its input X: A is
 * X clamped, on the same side of each bound). When such an activation reads the normalization's output,
 * the forward may write the activation's output in place of Y, and the gradient may take G masked by it:
 * the activation and its gradient then cost no pass of their own. At a residual block's end the forward
 * may also add the shortcut R to Y first (relu(Y + R)), which saves that Add's pass as well.
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


#define NORMALIZATION_LOOPS_VERSION 7

/* The activation a loop folds in: none, a ReLU (a clamp to [0, +inf)), or a clamp to [low, high]. */
enum { NO_ACTIVATION = 0, RELU = 1, CLAMP = 2 };

EXPORTED int onnxnn_normalization_loops_version(void) { return NORMALIZATION_LOOPS_VERSION; }

typedef int32_t mask8 __attribute__((vector_size(8 * sizeof(int32_t))));

/* One thread's share of a call: the arrays, the sizes and its range [first, end) of channels or elements. */
typedef struct {
    void (*loop)(const void *share);
    const float *x, *g, *scale, *bias, *mean, *variance, *mask, *residual;
    float *y, *mean_out, *variance_out, *scale_gradient, *bias_gradient;
    int64_t batch, channels, plane, first, end;
    float epsilon, low, high; /* ``low`` and ``high``: a CLAMP's bounds (a RELU's ``low`` is 0) */
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

/* ``*value`` through the activation: below ``low`` is ``low``, then above ``high`` (CLAMP) is ``high``, as
 * min(max(value, low), high) (onnxruntime's Relu and Clip); NaN and -0 are kept. (Vectors by address:
 * a vector argument draws GCC's ABI note.) */
ALWAYS_INLINE void activate8(vector8 *value, int activation, const vector8 *low, const vector8 *high)
{
    if (activation == NO_ACTIVATION) return;
    const mask8 below = *value < *low;
    *value = (vector8)(((mask8)*low & below) | ((mask8)*value & ~below));
    if (activation == RELU) return;
    const mask8 above = *value > *high;
    *value = (vector8)(((mask8)*high & above) | ((mask8)*value & ~above));
}

ALWAYS_INLINE float activated1(float value, int activation, float low, float high)
{
    if (activation == NO_ACTIVATION) return value;
    value = value < low ? low : value;
    return activation == CLAMP && value > high ? high : value;
}

/* ``residual``: Y + the residual in place of Y (an Add reading Y: a residual block's sum), rounded once as
 * onnxruntime's Add rounds it; ``activation``: then that through a ReLU or a clamp, for such an activation
 * reading it. */
ALWAYS_INLINE void forward_channels(const Share *s, int residual, int activation)
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
        const vector8 low = SPLAT8(s->low), high = SPLAT8(s->high);
        for (int64_t n = 0; n < s->batch; n++) {
            const float *from = x + n * stride;
            const float *added = residual ? s->residual + c * plane + n * stride : NULL;
            float *to = s->y + c * plane + n * stride;
            int64_t i = 0;
            for (; i + 8 <= plane; i += 8) {
                vector8 value = (LOAD8(from + i) - center_v) * kv + shift_v;
                if (residual) value += LOAD8(added + i);
                activate8(&value, activation, &low, &high);
                STORE8(to + i, value);
            }
            for (; i < plane; i++) {
                float value = (from[i] - center) * k + shift;
                if (residual) value += added[i];
                to[i] = activated1(value, activation, s->low, s->high);
            }
        }
    }
}

ALWAYS_INLINE void plain_forward_channels(const Share *s) { forward_channels(s, 0, NO_ACTIVATION); }

ALWAYS_INLINE void relu_forward_channels(const Share *s) { forward_channels(s, 0, RELU); }

ALWAYS_INLINE void clamp_forward_channels(const Share *s) { forward_channels(s, 0, CLAMP); }

ALWAYS_INLINE void residual_forward_channels(const Share *s) { forward_channels(s, 1, NO_ACTIVATION); }

ALWAYS_INLINE void residual_relu_forward_channels(const Share *s) { forward_channels(s, 1, RELU); }

/* ``*to``: G's eight floats at ``i`` masked by the activation's output ``a`` (0 where it is at most ``low``
 * or, for a CLAMP, at least ``high``; NaN passing G); ``gradient1``: one float. */
ALWAYS_INLINE void gradient8(vector8 *to, const float *g, const float *a, int64_t i, int activation, const vector8 *low,
                             const vector8 *high)
{
    *to = LOAD8(g + i);
    if (activation == NO_ACTIVATION) return;
    const vector8 output = LOAD8(a + i);
    mask8 dropped = output <= *low;
    if (activation == CLAMP) dropped |= output >= *high;
    *to = (vector8)((mask8)*to & ~dropped);
}

ALWAYS_INLINE float gradient1(const float *g, const float *a, int64_t i, int activation, float low, float high)
{
    if (activation == NO_ACTIVATION) return g[i];
    return a[i] <= low || (activation == CLAMP && a[i] >= high) ? 0.0f : g[i];
}

/* ``activation``: G is first masked by the activation's output (``s->mask``) it went through, that
 * activation's gradient pass folded in. */
ALWAYS_INLINE void gradient_channels(const Share *s, int activation)
{
    const int64_t plane = s->plane, stride = s->channels * plane, count = s->batch * plane;
    for (int64_t c = s->first; c < s->end; c++) {
        const float *x = s->x + c * plane, *g = s->g + c * plane, *y = activation ? s->mask + c * plane : NULL;
        const float mean = s->mean[c], low1 = s->low, high1 = s->high;
        const vector8 center = SPLAT8(mean), low = SPLAT8(low1), high = SPLAT8(high1);
        double sum_g = 0.0, sum_gc = 0.0;
        for (int64_t n = 0; n < s->batch; n++) {
            const float *xp = x + n * stride, *gp = g + n * stride, *yp = activation ? y + n * stride : NULL;
            vector8 s0 = {0}, s1 = {0}, t0 = {0}, t1 = {0};
            int64_t i = 0;
            for (; i + 16 <= plane; i += 16) {
                vector8 g0, g1;
                gradient8(&g0, gp, yp, i, activation, &low, &high);
                gradient8(&g1, gp, yp, i + 8, activation, &low, &high);
                s0 += g0, s1 += g1;
                t0 += g0 * (LOAD8(xp + i) - center), t1 += g1 * (LOAD8(xp + i + 8) - center);
            }
            float g_tail = 0.0f, gc_tail = 0.0f;
            for (; i < plane; i++) {
                const float gi = gradient1(gp, yp, i, activation, low1, high1);
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
            const float *xp = x + n * stride, *gp = g + n * stride, *yp = activation ? y + n * stride : NULL;
            float *to = s->y + c * plane + n * stride;
            int64_t i = 0;
            for (; i + 8 <= plane; i += 8) {
                vector8 gi;
                gradient8(&gi, gp, yp, i, activation, &low, &high);
                STORE8(to + i, gi * kv + shift_v + (LOAD8(xp + i) - center) * centered_v);
            }
            for (; i < plane; i++)
                to[i] = gradient1(gp, yp, i, activation, low1, high1) * k + shift + (xp[i] - mean) * centered_factor;
        }
    }
}

ALWAYS_INLINE void plain_gradient_channels(const Share *s) { gradient_channels(s, NO_ACTIVATION); }

ALWAYS_INLINE void relu_gradient_channels(const Share *s) { gradient_channels(s, RELU); }

ALWAYS_INLINE void clamp_gradient_channels(const Share *s) { gradient_channels(s, CLAMP); }

/* dX = G masked by the activation's output (``s->x``), over a range of elements. */
ALWAYS_INLINE void activation_gradient_range(const Share *s, int activation)
{
    const vector8 low = SPLAT8(s->low), high = SPLAT8(s->high);
    int64_t i = s->first;
    for (; i + 8 <= s->end; i += 8) {
        vector8 value;
        gradient8(&value, s->g, s->x, i, activation, &low, &high);
        STORE8(s->y + i, value);
    }
    for (; i < s->end; i++) s->y[i] = gradient1(s->g, s->x, i, activation, s->low, s->high);
}

ALWAYS_INLINE void relu_gradient_range(const Share *s) { activation_gradient_range(s, RELU); }

ALWAYS_INLINE void clamp_gradient_range(const Share *s) { activation_gradient_range(s, CLAMP); }

/* Each loop in two builds: AVX2 (for builds 0 and 1: these loops wait on memory, AVX-512 gains nothing)
 * and the baseline. */
#define DEFINE_BUILDS(name, body)                                                                                 \
    __attribute__((target("avx2,fma"))) static void name##_avx2(const void *share) { body(share); }             \
    static void name##_baseline(const void *share) { body(share); }                                               \
    static void (*name##_loop(void))(const void *) { return chosen_build() == 2 ? name##_baseline : name##_avx2; }

DEFINE_BUILDS(forward, plain_forward_channels)
DEFINE_BUILDS(relu_forward, relu_forward_channels)
DEFINE_BUILDS(clamp_forward, clamp_forward_channels)
DEFINE_BUILDS(residual_forward, residual_forward_channels)
DEFINE_BUILDS(residual_relu_forward, residual_relu_forward_channels)
DEFINE_BUILDS(gradient, plain_gradient_channels)
DEFINE_BUILDS(relu_masked_gradient, relu_gradient_channels)
DEFINE_BUILDS(clamp_masked_gradient, clamp_gradient_channels)
DEFINE_BUILDS(relu_gradient, relu_gradient_range)
DEFINE_BUILDS(clamp_gradient, clamp_gradient_range)

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
 * (N, C, S; or NULL), Y + residual in place of Y; ``activation`` (RELU, CLAMP to [low, high]): then that
 * through it in place of it (a residual sum takes a ReLU only). Returns 0, or -1 for an activation it
 * does not take. */
EXPORTED int onnxnn_batch_norm_training_float32(const float *x, const float *scale, const float *bias,
                                                const float *residual, float *y, float *mean, float *variance,
                                                int64_t batch, int64_t channels, int64_t plane, float epsilon,
                                                int activation, float low, float high, int threads)
{
    void (*loop)(const void *) = NULL;
    if (residual != NULL)
        loop = activation == RELU ? residual_relu_forward_loop()
               : activation == NO_ACTIVATION ? residual_forward_loop() : NULL;
    else
        loop = activation == RELU ? relu_forward_loop()
               : activation == CLAMP ? clamp_forward_loop() : activation == NO_ACTIVATION ? forward_loop() : NULL;
    if (loop == NULL) return -1;
    const Share share = {.loop = loop, .x = x, .scale = scale, .bias = bias, .residual = residual, .y = y,
                         .mean_out = mean, .variance_out = variance, .batch = batch, .channels = channels,
                         .plane = plane, .epsilon = epsilon, .low = activation == RELU ? 0.0f : low, .high = high};
    return run_split(share, threads, channels, batch * channels * plane, 1);
}

/* dX (N, C, S), dscale and dB (C) from C-contiguous float32 G and X (N, C, S), scale and the forward's mean and
 * variance (C); with ``activation`` (RELU, CLAMP to [low, high]) and its output ``activation_output`` (N, C,
 * S), G masked by it in place of G (the gradient reaching such an activation that reads the normalization's
 * output). Returns 0, or -1 for an activation it does not take. */
EXPORTED int onnxnn_batch_norm_training_gradient_float32(const float *g, const float *x, const float *scale,
                                                         const float *mean, const float *variance,
                                                         const float *activation_output, float *dx,
                                                         float *scale_gradient, float *bias_gradient, int64_t batch,
                                                         int64_t channels, int64_t plane, float epsilon,
                                                         int activation, float low, float high, int threads)
{
    void (*loop)(const void *) = activation == RELU ? relu_masked_gradient_loop()
                                 : activation == CLAMP ? clamp_masked_gradient_loop()
                                 : activation == NO_ACTIVATION ? gradient_loop() : NULL;
    if (loop == NULL) return -1;
    const Share share = {.loop = loop, .x = x, .g = g, .scale = scale, .mean = mean, .variance = variance,
                         .mask = activation_output, .y = dx, .scale_gradient = scale_gradient,
                         .bias_gradient = bias_gradient, .batch = batch, .channels = channels, .plane = plane,
                         .epsilon = epsilon, .low = activation == RELU ? 0.0f : low, .high = high};
    return run_split(share, threads, channels, (activation ? 3 : 2) * batch * channels * plane, 1);
}

/* dX = G masked by the output ``a`` of a RELU (0 where a <= 0) or a CLAMP to [low, high] (0 where a <= low or
 * a >= high), NaN passing G, over ``count`` float32 elements. Returns 0, or -1 for another activation. */
EXPORTED int onnxnn_activation_gradient_float32(const float *g, const float *a, float *dx, int64_t count,
                                                int activation, float low, float high, int threads)
{
    void (*loop)(const void *) = activation == RELU ? relu_gradient_loop()
                                 : activation == CLAMP ? clamp_gradient_loop() : NULL;
    if (loop == NULL) return -1;
    const Share share = {.loop = loop, .x = a, .g = g, .y = dx, .low = activation == RELU ? 0.0f : low, .high = high};
    return run_split(share, threads, count, count, 64);
}

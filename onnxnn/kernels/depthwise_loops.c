/* The weight gradient of a depthwise convolution (as many groups as input channels: MobileNet's and
 * ConvNeXt's 3x3 to 7x7 layers) as one compiled loop, called by compiled_convolutions.py through ctypes.
 *
 *     dW[m][0][a][b] = sum over n, oh, ow of  G[n][m][oh][ow] * X[n][m / K][oh * sh + a * dh - ph][ow * sw + b * dw - pw]
 *
 * with K = M / C output channels per input channel (X read as zero outside its bounds). onnxruntime runs it
 * as one grouped Conv whose kernel is G (runtime/ops/conv_weight_gradient.py): its im2col copies every
 * input element once per kernel tap and its GEMMs are one row each (a 96-channel layer on 56x56 images,
 * batch 8: 24 ms for 22 million multiply-adds). Here each output channel is its own small problem: for
 * each sample, G's plane and, per kernel column b, the input columns that tap column reads (row by row,
 * ``ow * sw + b * dw - pw``, zero outside X) are copied into rows padded to whole vectors; then for a block
 * of taps the loop walks G's rows once, one vector of G against one vector of each tap's copy, the sums in
 * registers. The padding lanes hold zeros in both operands, so they add nothing, whatever X holds.
 *
 * Rounding: per sample, float32 sums by lane (positions ow of one residue modulo the vector width) over
 * the rows, added to the previous samples' sums, then the lanes added: exact up to the rounding of sums of
 * N * OH * OW products. Threads take whole output channels, so the result does not depend on their number.
 */
#include "convolution_loops.h"

/* The most taps one block sums at a time, for the block's array: AVX-512's 32 registers hold 12 sums of
 * 16 floats beside G's vector and a loaded one; AVX2's and the baseline's 16 registers hold 8. */
#define MOST_TAPS 12
#define AVX512_TAPS 12
#define NARROW_TAPS 8

/* totals[t] += the sum over rows oh and vectors v of gradient[oh][v] * (bases[t] + oh * row_step)[v], for
 * ``count`` taps: ``gradient`` has ``out_height`` rows of ``row_width`` floats (a whole number of vectors). */
#define DEFINE_TAP_BLOCK(name, vector, width)                                                                     \
    ALWAYS_INLINE void name(int count, vector *totals, const float *gradient, const float *const *bases,          \
                            int64_t row_step, int64_t out_height, int64_t row_width)                             \
    {                                                                                                             \
        vector sum[MOST_TAPS];                                                                                    \
        for (int t = 0; t < count; t++) sum[t] = totals[t];                                                       \
        for (int64_t oh = 0; oh < out_height; oh++) {                                                             \
            const float *gradient_row = gradient + oh * row_width;                                                \
            const int64_t row = oh * row_step;                                                                    \
            for (int64_t v = 0; v < row_width; v += (width)) {                                                    \
                const vector value = *(const vector *)(gradient_row + v);                                         \
                for (int t = 0; t < count; t++) sum[t] += value * *(const vector *)(bases[t] + row + v);          \
            }                                                                                                     \
        }                                                                                                         \
        for (int t = 0; t < count; t++) totals[t] = sum[t];                                                       \
    }

DEFINE_TAP_BLOCK(tap_block16, vector16, 16)
DEFINE_TAP_BLOCK(tap_block8, vector8, 8)
DEFINE_TAP_BLOCK(tap_block4, vector4, 4)

/* The block with ``count`` (1 to MOST_TAPS) as a constant, so that its sums stay in registers. */
#define WITH_COUNT(block, totals, gradient, bases, row_step, out_height, row_width)                              \
    switch (count) {                                                                                              \
    case 1: block(1, totals, gradient, bases, row_step, out_height, row_width); break;                           \
    case 2: block(2, totals, gradient, bases, row_step, out_height, row_width); break;                           \
    case 3: block(3, totals, gradient, bases, row_step, out_height, row_width); break;                           \
    case 4: block(4, totals, gradient, bases, row_step, out_height, row_width); break;                           \
    case 5: block(5, totals, gradient, bases, row_step, out_height, row_width); break;                           \
    case 6: block(6, totals, gradient, bases, row_step, out_height, row_width); break;                           \
    case 7: block(7, totals, gradient, bases, row_step, out_height, row_width); break;                           \
    case 8: block(8, totals, gradient, bases, row_step, out_height, row_width); break;                           \
    case 9: block(9, totals, gradient, bases, row_step, out_height, row_width); break;                           \
    case 10: block(10, totals, gradient, bases, row_step, out_height, row_width); break;                         \
    case 11: block(11, totals, gradient, bases, row_step, out_height, row_width); break;                         \
    default: block(12, totals, gradient, bases, row_step, out_height, row_width); break;                         \
    }

/* Stride 2: the even lanes of two vectors, which GCC and clang write differently. */
typedef float unaligned16 __attribute__((vector_size(16 * sizeof(float)), aligned(sizeof(float))));
typedef float unaligned8 __attribute__((vector_size(8 * sizeof(float)), aligned(sizeof(float))));
typedef float unaligned4 __attribute__((vector_size(4 * sizeof(float)), aligned(sizeof(float))));
#if defined(__clang__)
#define EVEN_LANES16(low, high) __builtin_shufflevector(low, high, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30)
#define EVEN_LANES8(low, high) __builtin_shufflevector(low, high, 0, 2, 4, 6, 8, 10, 12, 14)
#define EVEN_LANES4(low, high) __builtin_shufflevector(low, high, 0, 2, 4, 6)
#else
typedef int32_t lanes16 __attribute__((vector_size(16 * sizeof(int32_t))));
typedef int32_t lanes8 __attribute__((vector_size(8 * sizeof(int32_t))));
typedef int32_t lanes4 __attribute__((vector_size(4 * sizeof(int32_t))));
#define EVEN_LANES16(low, high) \
    __builtin_shuffle(low, high, (lanes16){0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30})
#define EVEN_LANES8(low, high) __builtin_shuffle(low, high, (lanes8){0, 2, 4, 6, 8, 10, 12, 14})
#define EVEN_LANES4(low, high) __builtin_shuffle(low, high, (lanes4){0, 2, 4, 6})
#endif

/* target[i] = source[2 * i] for i below count, in vectors as far as their loads stay within the
 * 2 * count - 1 floats read; returns where it stopped. */
#define DEFINE_EVEN_COPY(name, unaligned, width, EVEN_LANES)                                                  \
    ALWAYS_INLINE int64_t name(float *restrict target, const float *restrict source, int64_t count)          \
    {                                                                                                         \
        int64_t i = 0;                                                                                        \
        for (; i + (width) < count; i += (width)) {                                                           \
            const unaligned low = *(const unaligned *)(source + 2 * i);                                       \
            const unaligned high = *(const unaligned *)(source + 2 * i + (width));                            \
            *(unaligned *)(target + i) = EVEN_LANES(low, high);                                               \
        }                                                                                                     \
        return i;                                                                                             \
    }

DEFINE_EVEN_COPY(even_copy16, unaligned16, 16, EVEN_LANES16)
DEFINE_EVEN_COPY(even_copy8, unaligned8, 8, EVEN_LANES8)
DEFINE_EVEN_COPY(even_copy4, unaligned4, 4, EVEN_LANES4)

/* Copies the input columns kernel column ``b`` reads into ``columns``: ``padded_height`` rows (input row
 * r - pad_top) of ``row_width`` floats, element ow the input's column ow * stride + b * dilation - pad_left,
 * in the build's vectors of ``lanes`` floats where the stride is 2. Only elements inside the input are
 * written: the others (rows and columns in the padding, and ow from out_width on) are the same zeros for
 * every plane, written once when the buffer was allocated. */
ALWAYS_INLINE void copy_columns(int lanes, float *restrict columns, const float *restrict plane,
                                const int64_t *geometry, int64_t b, int64_t padded_height, int64_t row_width)
{
    const int64_t height = geometry[HEIGHT], width = geometry[WIDTH], out_width = geometry[OUT_WIDTH];
    const int64_t stride = geometry[STRIDE_WIDTH], offset = b * geometry[DILATION_WIDTH] - geometry[PAD_LEFT];
    /* The output columns whose input column lies inside the input: first to end. */
    int64_t first = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
    int64_t end = offset > width - 1 ? 0 : (width - 1 - offset) / stride + 1;
    end = end > out_width ? out_width : end;
    first = first > end ? end : first;
    const int64_t top = geometry[PAD_TOP], count = end - first;
    /* Rows past the windows' reach (an end pad below zero) are not read. */
    const int64_t rows = height < padded_height - top ? height : padded_height - top;
    for (int64_t source_row = 0; source_row < rows; source_row++) {
        float *restrict row = columns + (source_row + top) * row_width + first;
        const float *restrict source = plane + source_row * width + offset + first * stride;
        int64_t i = 0;
        if (stride == 1) {
            memcpy(row, source, (size_t)count * sizeof(float));
            continue;
        }
        if (stride == 2) {
            i = lanes == 16 ? even_copy16(row, source, count)
                : lanes == 8 ? even_copy8(row, source, count)
                             : even_copy4(row, source, count);
        }
        for (; i < count; i++) row[i] = source[i * stride];
    }
}

/* dW of output channels ``first_channel`` to ``end_channel`` in vectors of ``lanes`` floats and blocks of at
 * most ``most_taps`` taps; returns 0, or 1 when memory ran out. */
ALWAYS_INLINE int depthwise_channels(int lanes, int most_taps, const float *x, const float *g, float *dw,
                                     const int64_t *geometry, int64_t first_channel, int64_t end_channel)
{
    const int64_t batch = geometry[BATCH], channels = geometry[CHANNELS], out_channels = geometry[OUT_CHANNELS];
    const int64_t height = geometry[HEIGHT], input_width = geometry[WIDTH];
    const int64_t out_height = geometry[OUT_HEIGHT], out_width = geometry[OUT_WIDTH];
    const int64_t kernel_height = geometry[KERNEL_HEIGHT], kernel_width = geometry[KERNEL_WIDTH];
    const int64_t taps = kernel_height * kernel_width, multiplier = out_channels / channels;
    const int64_t row_width = round_up(out_width, lanes);
    /* The input rows the windows reach, from the first padded row on. */
    const int64_t padded_height =
        (out_height - 1) * geometry[STRIDE_HEIGHT] + (kernel_height - 1) * geometry[DILATION_HEIGHT] + 1;
    const int64_t column_plane = padded_height * row_width;
    /* Blocks of taps as even as most_taps allows: 9 taps in blocks of 5 and 4 rather than 8 and 1. */
    const int64_t blocks = (taps + most_taps - 1) / most_taps;

    float *columns = zeroed_floats(kernel_width * column_plane);
    float *gradient = zeroed_floats(out_height * row_width);
    float *totals = zeroed_floats(taps * lanes);
    if (columns == NULL || gradient == NULL || totals == NULL) {
        free(columns), free(gradient), free(totals);
        return 1;
    }
    for (int64_t m = first_channel; m < end_channel; m++) {
        memset(totals, 0, (size_t)(taps * lanes) * sizeof(float));
        for (int64_t n = 0; n < batch; n++) {
            const float *plane = x + (n * channels + m / multiplier) * height * input_width;
            const float *gradient_plane = g + (n * out_channels + m) * out_height * out_width;
            for (int64_t oh = 0; oh < out_height; oh++) {
                memcpy(gradient + oh * row_width, gradient_plane + oh * out_width, (size_t)out_width * sizeof(float));
            }
            for (int64_t b = 0; b < kernel_width; b++)
                copy_columns(lanes, columns + b * column_plane, plane, geometry, b, padded_height, row_width);
            const float *bases[MOST_TAPS];
            for (int64_t block = 0, tap = 0; block < blocks; block++) {
                const int64_t end_tap = taps * (block + 1) / blocks;
                const int count = (int)(end_tap - tap);
                for (int t = 0; t < count; t++) {
                    const int64_t a = (tap + t) / kernel_width, b = (tap + t) % kernel_width;
                    bases[t] = columns + b * column_plane + a * geometry[DILATION_HEIGHT] * row_width;
                }
                const int64_t row_step = geometry[STRIDE_HEIGHT] * row_width;
                float *block_totals = totals + tap * lanes;
                if (lanes == 16) {
                    WITH_COUNT(tap_block16, (vector16 *)block_totals, gradient, bases, row_step, out_height, row_width)
                } else if (lanes == 8) {
                    WITH_COUNT(tap_block8, (vector8 *)block_totals, gradient, bases, row_step, out_height, row_width)
                } else {
                    WITH_COUNT(tap_block4, (vector4 *)block_totals, gradient, bases, row_step, out_height, row_width)
                }
                tap = end_tap;
            }
        }
        for (int64_t t = 0; t < taps; t++) {
            float sum = 0.0f;
            for (int lane = 0; lane < lanes; lane++) sum += totals[t * lanes + lane];
            dw[m * taps + t] = sum;
        }
    }
    free(columns), free(gradient), free(totals);
    return 0;
}

typedef int (*depthwise_loop)(const float *, const float *, float *, const int64_t *, int64_t, int64_t);

/* Each build with the narrowest of its vectors that spans an output row, so that small images (7x7) do not
 * sum mostly padding lanes. */
static int depthwise_baseline(const float *x, const float *g, float *dw, const int64_t *geometry,
                              int64_t first_channel, int64_t end_channel)
{
    return depthwise_channels(4, NARROW_TAPS, x, g, dw, geometry, first_channel, end_channel);
}

#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("avx2,fma"))) static int depthwise_avx2(const float *x, const float *g, float *dw,
                                                               const int64_t *geometry, int64_t first_channel,
                                                               int64_t end_channel)
{
    if (geometry[OUT_WIDTH] <= 4) return depthwise_channels(4, NARROW_TAPS, x, g, dw, geometry, first_channel, end_channel);
    return depthwise_channels(8, NARROW_TAPS, x, g, dw, geometry, first_channel, end_channel);
}

__attribute__((target("avx512f"))) static int depthwise_avx512(const float *x, const float *g, float *dw,
                                                                const int64_t *geometry, int64_t first_channel,
                                                                int64_t end_channel)
{
    if (geometry[OUT_WIDTH] <= 4) return depthwise_channels(4, AVX512_TAPS, x, g, dw, geometry, first_channel, end_channel);
    if (geometry[OUT_WIDTH] <= 8) return depthwise_channels(8, AVX512_TAPS, x, g, dw, geometry, first_channel, end_channel);
    return depthwise_channels(16, AVX512_TAPS, x, g, dw, geometry, first_channel, end_channel);
}
#endif

static depthwise_loop loop_numbered(int build)
{
#if defined(__GNUC__) && defined(__x86_64__)
    if (build == 0) return depthwise_avx512;
    if (build == 1) return depthwise_avx2;
#endif
    return depthwise_baseline;
}

/* One thread's share: a range of output channels. */
typedef struct {
    depthwise_loop loop;
    const float *x, *g;
    float *dw;
    const int64_t *geometry;
    int64_t first_channel, end_channel;
    int status;
} Share;

static void *run_share(void *argument)
{
    Share *share = argument;
    share->status = share->loop(share->x, share->g, share->dw, share->geometry, share->first_channel, share->end_channel);
    return NULL;
}

/* dW (M, 1, KH, KW) of a depthwise convolution from C-contiguous float32 X (N, C, H, W) and G (N, M, OH, OW),
 * M a multiple of C, with the geometry's 15 integers (convolution_loops.h); the windows must stay within X
 * padded by the begin pads and whatever end pads they need. Up to ``threads`` threads each take a range
 * of output channels. Returns 0, or 1 when memory ran out. */
EXPORTED int onnxnn_depthwise_weight_gradient_float32(const float *x, const float *g, float *dw,
                                                      const int64_t *geometry, int threads)
{
    const depthwise_loop loop = loop_numbered(chosen_build());
    const int64_t out_channels = geometry[OUT_CHANNELS];
    const int64_t products = out_channels * geometry[KERNEL_HEIGHT] * geometry[KERNEL_WIDTH] * geometry[BATCH]
                             * geometry[OUT_HEIGHT] * geometry[OUT_WIDTH];
    const int64_t count = thread_count(threads, out_channels, products);
    Share shares[MOST_THREADS];
    for (int64_t t = 0; t < count; t++)
        shares[t] = (Share){loop, x, g, dw, geometry, out_channels * t / count, out_channels * (t + 1) / count, 0};
    run_shares(run_share, shares, sizeof(Share), count, count);
    int status = 0;
    for (int64_t t = 0; t < count; t++)
        if (shares[t].status) status = shares[t].status;
    return status;
}

/* The weight gradient of a 2-d convolution (onnxnn's ConvWeightGradient) as one compiled loop, called by
 * compiled_convolutions.py through ctypes.
 *
 *     dW[m][c][a][b] = sum over n, oh, ow of  G[n][m][oh][ow] * X[n][c][oh * sh + a * dh - ph][ow * sw + b * dw - pw]
 *
 * (X read as zero outside its bounds). onnxruntime runs it as one GEMM per kernel tap of G with a copied,
 * shifted window of the input (runtime/ops/conv_weight_gradient.py): each tap copies the input once more,
 * and a GEMM with 16 rows and 16 columns spends most of its time packing its operands. Here each sample's
 * input is copied once, into a padded channels-last buffer, and for a block of output channels and 16
 * input channels the loop keeps its sums in registers while it walks every output position: one vector
 * load of 16 input channels and one multiply-add per output channel of the block, with G's value
 * broadcast. Where G has more channels than X (an RGB stem: 3 input channels), the roles swap: G is
 * copied channels-last and X's padded planes supply the broadcast values. The AVX-512 build takes three
 * neighbouring taps of a kernel row at once (their sums take 24 of its 32 registers), reading each broadcast
 * value once for all three, and copies channels-last through 16 x 16 transposes in registers: one thread,
 * a small ResNet's 16-channel 3x3 layer (batch 32, 32x32) 1.78 -> 1.37 ms, resnet18's 64-channel layer at
 * 56x56 (batch 8) 16.3 -> 12.4 ms, 85-113 -> 110-152 GFLOP/s. The AVX2 build copies through 8 x 8 ones.
 *
 * Rounding: float32 sums in an order of their own (per sample by position, then across samples), with
 * fused multiply-adds where the CPU has them, as a GEMM's are: exact up to the rounding of sums of
 * N * OH * OW products (setup.py builds this file with FMA contraction, unlike update_loops.c).
 *
 * The vectors are GCC's generic vectors, each build with its registers' width (AVX-512 16 floats, AVX2 with
 * FMA 8, the baseline 4: a group of 16 channels is one, two or four of them) and as many accumulator rows
 * as its registers hold; the first call picks the best build the CPU runs. Up to the caller's number of
 * threads each sum a range of samples into their own sums, added at the end.
 */
#include "convolution_loops.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

/* compiled_convolutions.py uses a library only if this matches its own number. */
#define CONVOLUTION_LOOPS_VERSION 4
EXPORTED int onnxnn_convolution_loops_version(void) { return CONVOLUTION_LOOPS_VERSION; }

#define LANES 16
/* The most accumulator rows any build uses (AVX-512's), for the tile's array. */
#define MOST_ROWS 8
/* Output rows walked per block: about this many bytes of broadcast values per block of rows stay in L1. */
#define BLOCK_BYTES 24576
/* Samples copied at a time: their channels-last copy stays in L2. */
#define GROUP_BYTES (1 << 20)

#define DEFINE_TILE(name, vector, width)                                                                         \
    ALWAYS_INLINE void name(int rows, float *sums, int64_t sums_step, const float *const *broadcast,            \
                            int64_t broadcast_start, const int64_t *broadcast_steps, const float *wide,          \
                            const int64_t *wide_steps, int64_t samples, int64_t out_rows, int64_t out_width)     \
    {                                                                                                            \
        enum { PARTS = LANES / (width) };                                                                        \
        vector sum[MOST_ROWS][PARTS];                                                                            \
        for (int row = 0; row < rows; row++)                                                                     \
            for (int part = 0; part < PARTS; part++)                                                             \
                sum[row][part] = *(const vector *)(sums + row * sums_step + part * (width));                     \
        for (int64_t sample = 0; sample < samples; sample++)                                                     \
            for (int64_t oh = 0; oh < out_rows; oh++) {                                                          \
                const float *wide_row = wide + sample * wide_steps[2] + oh * wide_steps[1];                      \
                int64_t at = broadcast_start + sample * broadcast_steps[2] + oh * broadcast_steps[1];            \
                for (int64_t ow = 0; ow < out_width; ow++, at += broadcast_steps[0]) {                           \
                    vector values[PARTS];                                                                        \
                    for (int part = 0; part < PARTS; part++)                                                     \
                        values[part] = *(const vector *)(wide_row + ow * wide_steps[0] + part * (width));        \
                    for (int row = 0; row < rows; row++) {                                                       \
                        const float value = broadcast[row][at];                                                  \
                        for (int part = 0; part < PARTS; part++) sum[row][part] += value * values[part];         \
                    }                                                                                            \
                }                                                                                                \
            }                                                                                                    \
        for (int row = 0; row < rows; row++)                                                                     \
            for (int part = 0; part < PARTS; part++)                                                             \
                *(vector *)(sums + row * sums_step + part * (width)) = sum[row][part];                           \
    }

/* sums[row][lane] += broadcast[row][position] * wide[position][lane] over the positions of ``samples``
 * samples x ``out_rows`` output rows x ``out_width`` for one tap, in vectors of ``width`` floats: ``wide``
 * holds groups of 16 channels, ``wide_steps`` floats apart along an output row, from one output row to
 * the next and from one sample to the next; ``broadcast[row]`` is one plane per accumulator row, read
 * from ``broadcast_start`` on at ``broadcast_steps`` likewise. ``sums`` rows are ``sums_step`` floats apart. */
DEFINE_TILE(tile16, vector16, 16)
DEFINE_TILE(tile8, vector8, 8)
DEFINE_TILE(tile4, vector4, 4)

/* TAP_GROUP neighbouring taps of one kernel row at once, for AVX-512 (one vector of 16 channels): the value
 * broadcast for a position and row (input_wide: G's) or the vector loaded for it (else: G's channels) is the
 * same for the three taps, so it is read once for 3 x rows multiply-adds instead of once per tap, and the
 * 3 x rows independent sums keep both multiply-add units busy past their latency. ``tap_step`` is the
 * distance between neighbouring taps along the operand that moves with the tap (the wide one where
 * ``input_wide``, else the broadcast planes); ``tap_sums_step`` between their sums. */
#define TAP_GROUP 3
ALWAYS_INLINE void tap_group_tile16(int rows, int input_wide, float *sums, int64_t sums_step, int64_t tap_sums_step,
                                    const float *const *broadcast, int64_t broadcast_start,
                                    const int64_t *broadcast_steps, const float *wide, const int64_t *wide_steps,
                                    int64_t tap_step, int64_t samples, int64_t out_rows, int64_t out_width)
{
    vector16 sum[TAP_GROUP][MOST_ROWS];
    for (int tap = 0; tap < TAP_GROUP; tap++)
        for (int row = 0; row < rows; row++) sum[tap][row] = *(const vector16 *)(sums + tap * tap_sums_step + row * sums_step);
    const int64_t wide_tap_step = input_wide ? tap_step : 0, broadcast_tap_step = input_wide ? 0 : tap_step;
    for (int64_t sample = 0; sample < samples; sample++)
        for (int64_t oh = 0; oh < out_rows; oh++) {
            const float *wide_row = wide + sample * wide_steps[2] + oh * wide_steps[1];
            int64_t at = broadcast_start + sample * broadcast_steps[2] + oh * broadcast_steps[1];
            for (int64_t ow = 0; ow < out_width; ow++, at += broadcast_steps[0]) {
                vector16 values[TAP_GROUP];
                for (int tap = 0; tap < TAP_GROUP; tap++)
                    values[tap] = *(const vector16 *)(wide_row + ow * wide_steps[0] + tap * wide_tap_step);
                for (int row = 0; row < rows; row++)
                    for (int tap = 0; tap < TAP_GROUP; tap++)
                        sum[tap][row] += broadcast[row][at + tap * broadcast_tap_step] * values[tap];
            }
        }
    for (int tap = 0; tap < TAP_GROUP; tap++)
        for (int row = 0; row < rows; row++) *(vector16 *)(sums + tap * tap_sums_step + row * sums_step) = sum[tap][row];
}

/* Copies ``count`` channel planes of ``height`` x ``width`` (contiguous) into ``target``, element
 * (channel, row, column) to [(row + top) * target_width + column + left] * channel_step + channel *
 * plane_step; rows and columns outside the target's ``target_height`` x ``target_width`` are dropped.
 * Each plane's row is read in order: a channels-last target's row (all channels of one row) stays in L1
 * while its channels are written. Not inlined: inside the loop's builds it competed for their registers
 * (a stack reload per element took a quarter of a small layer's time). */
static __attribute__((noinline)) void copy_planes(float *target, const float *planes, int64_t count, int64_t height,
                                                  int64_t width, int64_t top, int64_t left, int64_t target_height,
                                                  int64_t target_width, int64_t channel_step, int64_t plane_step)
{
    const int64_t first_column = left < 0 ? -left : 0;
    const int64_t end_column = width < target_width - left ? width : target_width - left;
    for (int64_t row = top < 0 ? -top : 0; row < height && row + top < target_height; row++)
        for (int64_t channel = 0; channel < count; channel++) {
            float *target_row = target + ((row + top) * target_width + left) * channel_step + channel * plane_step;
            const float *source = planes + (channel * height + row) * width;
            for (int64_t column = first_column; column < end_column; column++)
                target_row[column * channel_step] = source[column];
        }
}

#if defined(__GNUC__) && defined(__x86_64__)
/* Transposes 16 rows of 16 floats in registers: afterwards rows[k] holds what was column k. */
__attribute__((target("avx512f"))) static inline void transpose16(__m512 rows[16])
{
    __m512 pairs[16];
    for (int i = 0; i < 16; i += 2) {
        pairs[i] = _mm512_unpacklo_ps(rows[i], rows[i + 1]);
        pairs[i + 1] = _mm512_unpackhi_ps(rows[i], rows[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        const __m512d low = _mm512_castps_pd(pairs[i]), high = _mm512_castps_pd(pairs[i + 1]);
        const __m512d next_low = _mm512_castps_pd(pairs[i + 2]), next_high = _mm512_castps_pd(pairs[i + 3]);
        rows[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(low, next_low));
        rows[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(low, next_low));
        rows[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(high, next_high));
        rows[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(high, next_high));
    }
    for (int i = 0; i < 4; i++) {
        pairs[i] = _mm512_shuffle_f32x4(rows[i], rows[i + 4], 0x88);
        pairs[i + 4] = _mm512_shuffle_f32x4(rows[i], rows[i + 4], 0xdd);
        pairs[i + 8] = _mm512_shuffle_f32x4(rows[i + 8], rows[i + 12], 0x88);
        pairs[i + 12] = _mm512_shuffle_f32x4(rows[i + 8], rows[i + 12], 0xdd);
    }
    for (int i = 0; i < 4; i++) {
        rows[i] = _mm512_shuffle_f32x4(pairs[i], pairs[i + 8], 0x88);
        rows[i + 8] = _mm512_shuffle_f32x4(pairs[i], pairs[i + 8], 0xdd);
        rows[i + 4] = _mm512_shuffle_f32x4(pairs[i + 4], pairs[i + 12], 0x88);
        rows[i + 12] = _mm512_shuffle_f32x4(pairs[i + 4], pairs[i + 12], 0xdd);
    }
}

/* Transposes 8 rows of 8 floats in registers: afterwards rows[k] holds what was column k. */
__attribute__((target("avx2"))) static inline void transpose8(__m256 rows[8])
{
    __m256 pairs[8], quads[8];
    for (int i = 0; i < 8; i += 2) {
        pairs[i] = _mm256_unpacklo_ps(rows[i], rows[i + 1]);
        pairs[i + 1] = _mm256_unpackhi_ps(rows[i], rows[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        quads[i] = _mm256_shuffle_ps(pairs[i], pairs[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        quads[i + 1] = _mm256_shuffle_ps(pairs[i], pairs[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        quads[i + 2] = _mm256_shuffle_ps(pairs[i + 1], pairs[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        quads[i + 3] = _mm256_shuffle_ps(pairs[i + 1], pairs[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; i++) {
        rows[i] = _mm256_permute2f128_ps(quads[i], quads[i + 4], 0x20);
        rows[i + 4] = _mm256_permute2f128_ps(quads[i], quads[i + 4], 0x31);
    }
}

/* copy_planes into a channels-last target (``plane_step`` 1) for a multiple of ``block`` channels, ``block``
 * channels by ``block`` columns at a time through a transpose in registers: a small layer's copy took a third
 * of its loop's time one element at a time. On an AVX2 CPU (Zen 2), one thread, 8 x 8 at a time: a small
 * ResNet's weight gradients (batch 32, 32x32) 6.05 -> 5.55 ms in all, its 1x1 downsampling layer 0.37 ->
 * 0.29 ms, the 16-channel 3x3 layer 1.93 -> 1.83 ms. */
#define DEFINE_CHANNELS_LAST_COPY(name, instructions, vector, block, load, store, transpose)                   \
    __attribute__((target(instructions), noinline)) static void name(                                          \
        float *target, const float *planes, int64_t count, int64_t height, int64_t width, int64_t top,         \
        int64_t left, int64_t target_height, int64_t target_width, int64_t channel_step)                       \
    {                                                                                                           \
        const int64_t first_column = left < 0 ? -left : 0;                                                      \
        const int64_t end_column = width < target_width - left ? width : target_width - left;                  \
        const int64_t plane = height * width;                                                                   \
        for (int64_t row = top < 0 ? -top : 0; row < height && row + top < target_height; row++) {             \
            float *target_row = target + ((row + top) * target_width + left) * channel_step;                    \
            for (int64_t first = 0; first < count; first += (block)) {                                          \
                const float *source = planes + first * plane + row * width;                                     \
                int64_t column = first_column;                                                                  \
                for (; column + (block) <= end_column; column += (block)) {                                     \
                    vector rows[block];                                                                         \
                    for (int channel = 0; channel < (block); channel++)                                         \
                        rows[channel] = load(source + channel * plane + column);                                \
                    transpose(rows);                                                                            \
                    for (int k = 0; k < (block); k++)                                                           \
                        store(target_row + (column + k) * channel_step + first, rows[k]);                       \
                }                                                                                               \
                for (; column < end_column; column++)                                                           \
                    for (int channel = 0; channel < (block); channel++)                                         \
                        target_row[column * channel_step + first + channel] = source[channel * plane + column]; \
            }                                                                                                   \
        }                                                                                                       \
    }

DEFINE_CHANNELS_LAST_COPY(copy_planes_channels_last_avx512, "avx512f", __m512, 16, _mm512_loadu_ps, _mm512_storeu_ps,
                          transpose16)
DEFINE_CHANNELS_LAST_COPY(copy_planes_channels_last_avx2, "avx2", __m256, 8, _mm256_loadu_ps, _mm256_storeu_ps,
                          transpose8)
#endif

/* Which operand's channels the vectors run over, and the sums' layout: (taps, row_channels, wide_channels). */
typedef struct {
    int input_wide;        /* vectors over X's channels (else over G's) */
    int64_t wide_channels; /* the vectors' channels, padded to whole vectors */
    int64_t row_channels;  /* the broadcast channels, padded to whole blocks of rows */
} Layout;

static Layout layout_for(int rows, const int64_t *geometry)
{
    const int64_t channels = geometry[CHANNELS], out_channels = geometry[OUT_CHANNELS];
    Layout layout;
    /* Vectors over X's channels, unless G's give fewer padded products (few input channels). */
    layout.input_wide = round_up(out_channels, rows) * round_up(channels, LANES)
                        <= round_up(channels, rows) * round_up(out_channels, LANES);
    layout.wide_channels = round_up(layout.input_wide ? channels : out_channels, LANES);
    layout.row_channels = round_up(layout.input_wide ? out_channels : channels, rows);
    return layout;
}

/* Adds the products of samples ``first_sample`` to ``end_sample`` to ``sums`` (laid out as layout_for says),
 * with ``rows`` accumulator rows of vectors of ``vector_width`` floats; returns 0, or 1 when memory ran out. */
ALWAYS_INLINE int weight_gradient(int vector_width, int rows, const float *x, const float *g, float *sums,
                                  const int64_t *geometry, int64_t first_sample, int64_t end_sample)
{
    const int64_t channels = geometry[CHANNELS], height = geometry[HEIGHT];
    const int64_t width = geometry[WIDTH], out_channels = geometry[OUT_CHANNELS];
    const int64_t out_height = geometry[OUT_HEIGHT], out_width = geometry[OUT_WIDTH];
    const int64_t kernel_height = geometry[KERNEL_HEIGHT], kernel_width = geometry[KERNEL_WIDTH];
    const int64_t stride_height = geometry[STRIDE_HEIGHT], stride_width = geometry[STRIDE_WIDTH];
    const int64_t dilation_height = geometry[DILATION_HEIGHT], dilation_width = geometry[DILATION_WIDTH];
    const int64_t positions = out_height * out_width;
    /* The padded input as far as the windows reach. */
    const int64_t padded_height = (out_height - 1) * stride_height + (kernel_height - 1) * dilation_height + 1;
    const int64_t padded_width = (out_width - 1) * stride_width + (kernel_width - 1) * dilation_width + 1;
    const int64_t padded_area = padded_height * padded_width;
    const int64_t batch = end_sample - first_sample; /* the samples summed here */
    const Layout layout = layout_for(rows, geometry);
    const int input_wide = layout.input_wide;
    /* Only AVX-512 has the registers for TAP_GROUP taps' sums at once (3 x 8 rows of one vector). */
    const int64_t tap_group = vector_width == 16 && kernel_width % TAP_GROUP == 0 ? TAP_GROUP : 1;
    const int64_t wide_channels = layout.wide_channels, row_channels = layout.row_channels;
    const int64_t tap_sums_step = row_channels * wide_channels;
    /* Samples are copied in groups of about GROUP_BYTES, and one tile walks several whole samples when
     * their positions' broadcast values fit in BLOCK_BYTES (small images), else a block of output rows. */
    const int64_t wide_sample = (input_wide ? padded_area : positions) * wide_channels;
    const int64_t plane_sample = input_wide ? 0 : channels * padded_area;
    int64_t group = GROUP_BYTES / (int64_t)(sizeof(float) * (wide_sample + plane_sample));
    group = group < 1 ? 1 : group > batch ? batch : group;
    const int64_t row_bytes = rows * (int64_t)sizeof(float) * out_width;
    int64_t tile_samples = BLOCK_BYTES / (row_bytes * out_height);
    tile_samples = tile_samples < 1 ? 1 : tile_samples > group ? group : tile_samples;
    int64_t block_rows = tile_samples > 1 ? out_height : BLOCK_BYTES / row_bytes;
    block_rows = block_rows < 1 ? 1 : block_rows;

    float *wide = zeroed_floats(group * wide_sample);
    float *planes = input_wide ? NULL : zeroed_floats(group * plane_sample);
    if (wide == NULL || (!input_wide && planes == NULL)) {
        free(wide), free(planes);
        return 1;
    }
    x += first_sample * channels * height * width;
    g += first_sample * out_channels * positions;
    /* Steps along an output row, from row to row and from sample to sample, in floats. */
    const int64_t window_steps[3] = {stride_width, stride_height * padded_width, input_wide ? padded_area : plane_sample};
    const int64_t gradient_steps[3] = {1, out_width, input_wide ? out_channels * positions : positions};
    int64_t wide_steps[3], broadcast_steps[3];
    for (int axis = 0; axis < 3; axis++) {
        wide_steps[axis] = (input_wide ? window_steps[axis] : gradient_steps[axis]) * (axis < 2 ? wide_channels : 1);
        broadcast_steps[axis] = input_wide ? gradient_steps[axis] : window_steps[axis];
    }
    wide_steps[2] = wide_sample;

    for (int64_t group_first = 0; group_first < batch; group_first += group) {
        const int64_t group_size = group_first + group <= batch ? group : batch - group_first;
        for (int64_t n = 0; n < group_size; n++) {
            const float *x_sample = x + (group_first + n) * channels * height * width;
            if (input_wide) {
#if defined(__GNUC__) && defined(__x86_64__)
                if (vector_width == 16 && channels % 16 == 0)
                    copy_planes_channels_last_avx512(wide + n * wide_sample, x_sample, channels, height, width,
                                                     geometry[PAD_TOP], geometry[PAD_LEFT], padded_height,
                                                     padded_width, wide_channels);
                else if (vector_width == 8 && channels % 8 == 0)
                    copy_planes_channels_last_avx2(wide + n * wide_sample, x_sample, channels, height, width,
                                                   geometry[PAD_TOP], geometry[PAD_LEFT], padded_height,
                                                   padded_width, wide_channels);
                else
#endif
                    copy_planes(wide + n * wide_sample, x_sample, channels, height, width, geometry[PAD_TOP],
                                geometry[PAD_LEFT], padded_height, padded_width, wide_channels, 1);
            } else {
                const float *g_sample = g + (group_first + n) * out_channels * positions;
#if defined(__GNUC__) && defined(__x86_64__)
                if (vector_width == 16 && out_channels % 16 == 0)
                    copy_planes_channels_last_avx512(wide + n * wide_sample, g_sample, out_channels, out_height,
                                                     out_width, 0, 0, out_height, out_width, wide_channels);
                else if (vector_width == 8 && out_channels % 8 == 0)
                    copy_planes_channels_last_avx2(wide + n * wide_sample, g_sample, out_channels, out_height,
                                                   out_width, 0, 0, out_height, out_width, wide_channels);
                else
#endif
                    copy_planes(wide + n * wide_sample, g_sample, out_channels, out_height, out_width, 0, 0,
                                out_height, out_width, wide_channels, 1);
                copy_planes(planes + n * plane_sample, x_sample, channels, height, width, geometry[PAD_TOP],
                            geometry[PAD_LEFT], padded_height, padded_width, 1, padded_area);
            }
        }
        for (int64_t tile_first = 0; tile_first < group_size; tile_first += tile_samples) {
            const int64_t samples = tile_first + tile_samples <= group_size ? tile_samples : group_size - tile_first;
            for (int64_t first_row = 0; first_row < out_height; first_row += block_rows) {
                const int64_t block = first_row + block_rows <= out_height ? block_rows : out_height - first_row;
                for (int64_t row0 = 0; row0 < row_channels; row0 += rows) {
                    const float *broadcast[MOST_ROWS];
                    for (int row = 0; row < rows; row++) {
                        /* Rows past the last channel read the first channel's plane into sums never read out. */
                        const int64_t channel = row0 + row < (input_wide ? out_channels : channels) ? row0 + row : 0;
                        broadcast[row] = input_wide ? g + ((group_first + tile_first) * out_channels + channel) * positions
                                                    : planes + tile_first * plane_sample + channel * padded_area;
                    }
                    for (int64_t a = 0; a < kernel_height; a++)
                        for (int64_t b = 0; b < kernel_width; b += tap_group) {
                            /* Where this tap's window of the padded input starts, at the block's first row. */
                            const int64_t window = (first_row * stride_height + a * dilation_height) * padded_width
                                                + b * dilation_width;
                            const int64_t gradient = first_row * out_width;
                            float *tap_sums = sums + ((a * kernel_width + b) * row_channels + row0) * wide_channels;
                            const float *wide_start =
                                wide + tile_first * wide_sample + (input_wide ? window : gradient) * wide_channels;
                            for (int64_t lane0 = 0; lane0 < wide_channels; lane0 += LANES)
                                if (tap_group == TAP_GROUP && input_wide)
                                    tap_group_tile16(rows, 1, tap_sums + lane0, wide_channels, tap_sums_step, broadcast,
                                                     gradient, broadcast_steps, wide_start + lane0, wide_steps,
                                                     dilation_width * wide_channels, samples, block, out_width);
                                else if (tap_group == TAP_GROUP)
                                    tap_group_tile16(rows, 0, tap_sums + lane0, wide_channels, tap_sums_step, broadcast,
                                                     window, broadcast_steps, wide_start + lane0, wide_steps,
                                                     dilation_width, samples, block, out_width);
                                else if (vector_width == 16)
                                    tile16(rows, tap_sums + lane0, wide_channels, broadcast, input_wide ? gradient : window,
                                     broadcast_steps, wide_start + lane0, wide_steps, samples, block, out_width);
                                else if (vector_width == 8)
                                    tile8(rows, tap_sums + lane0, wide_channels, broadcast, input_wide ? gradient : window,
                                     broadcast_steps, wide_start + lane0, wide_steps, samples, block, out_width);
                                else
                                    tile4(rows, tap_sums + lane0, wide_channels, broadcast, input_wide ? gradient : window,
                                     broadcast_steps, wide_start + lane0, wide_steps, samples, block, out_width);
                        }
                }
            }
        }
    }
    free(wide), free(planes);
    return 0;
}

typedef int (*weight_gradient_loop)(int, const float *, const float *, float *, const int64_t *, int64_t, int64_t);

/* Each build with as many accumulator rows (groups of 16 sums) as its registers hold beside the loaded
 * group: AVX-512 32 registers of 16 floats, AVX2 16 of 8, the baseline (SSE) 16 of 4. */
#define BASELINE_ROWS 2
#define AVX2_ROWS 6
#define AVX512_ROWS 8

/* The rows a build of ``most_rows`` uses: fewer where the broadcast operand has fewer channels (one
 * grayscale input channel would otherwise leave seven of eight rows summing padding). */
static int rows_for(int most_rows, const int64_t *geometry)
{
    const Layout layout = layout_for(most_rows, geometry);
    const int64_t narrow = layout.input_wide ? geometry[OUT_CHANNELS] : geometry[CHANNELS];
    if (narrow >= most_rows) return most_rows;
    return narrow <= 1 ? 1 : narrow <= 2 ? 2 : narrow <= 4 && most_rows > 4 ? 4 : most_rows;
}

/* The loop with ``rows`` (one of rows_for's values) as a constant. */
#define WITH_ROWS(vector_width, most_rows)                                                                     \
    switch (rows) {                                                                                     \
    case 1: return weight_gradient(vector_width, 1, x, g, sums, geometry, first_sample, end_sample);           \
    case 2: return weight_gradient(vector_width, 2, x, g, sums, geometry, first_sample, end_sample);           \
    case 4: return weight_gradient(vector_width, 4, x, g, sums, geometry, first_sample, end_sample);           \
    default: return weight_gradient(vector_width, most_rows, x, g, sums, geometry, first_sample, end_sample);  \
    }

static int weight_gradient_baseline(int rows, const float *x, const float *g, float *sums, const int64_t *geometry,
                                    int64_t first_sample, int64_t end_sample)
{
    WITH_ROWS(4, BASELINE_ROWS)
}

#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("avx2,fma"))) static int weight_gradient_avx2(int rows, const float *x, const float *g,
                                                                     float *sums, const int64_t *geometry,
                                                                     int64_t first_sample, int64_t end_sample)
{
    WITH_ROWS(8, AVX2_ROWS)
}

__attribute__((target("avx512f"))) static int weight_gradient_avx512(int rows, const float *x, const float *g,
                                                                      float *sums, const int64_t *geometry,
                                                                      int64_t first_sample, int64_t end_sample)
{
    WITH_ROWS(16, AVX512_ROWS)
}
#endif

typedef struct {
    weight_gradient_loop loop;
    int rows;
} Build;

static int runs_here(int build)
{
#if defined(__GNUC__) && defined(__x86_64__)
    __builtin_cpu_init();
    if (build == 0) return __builtin_cpu_supports("avx512f");
    if (build == 1) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    return build == BUILDS - 1;
}

static Build build_numbered(int build)
{
#if defined(__GNUC__) && defined(__x86_64__)
    if (build == 0) return (Build){weight_gradient_avx512, AVX512_ROWS};
    if (build == 1) return (Build){weight_gradient_avx2, AVX2_ROWS};
#endif
    return (Build){weight_gradient_baseline, BASELINE_ROWS};
}

static int chosen = -1;

/* The best build this CPU runs (0-2, as convolution_loops.h numbers them). */
EXPORTED int onnxnn_convolution_loops_best_build(void)
{
    int build = 0;
    while (!runs_here(build)) build++;
    return build;
}

/* Makes later calls of every loop use build ``build`` (0-2; -1: the best this CPU runs); returns 0, or 1
 * where this CPU cannot run it (nothing changes). For the tests, which check every build the CPU runs. */
EXPORTED int onnxnn_convolution_loops_use_build(int build)
{
    if (build < 0) {
        build = onnxnn_convolution_loops_best_build();
    } else if (build >= BUILDS || !runs_here(build)) {
        return 1;
    }
    chosen = build;
    return 0;
}

int chosen_build(void)
{
    if (chosen < 0) onnxnn_convolution_loops_use_build(-1);
    return chosen;
}

/* The build every loop runs (0-2): the one use_build chose, else the best this CPU runs. */
EXPORTED int onnxnn_convolution_loops_chosen_build(void) { return chosen_build(); }

/* One thread's share: a range of samples summed into its own buffer. */
typedef struct {
    weight_gradient_loop loop;
    int rows;
    const float *x, *g;
    float *sums;
    const int64_t *geometry;
    int64_t first_sample, end_sample;
    int status;
} Share;

static void *run_share(void *argument)
{
    Share *share = argument;
    share->status = share->loop(share->rows, share->x, share->g, share->sums, share->geometry, share->first_sample,
                                share->end_sample);
    return NULL;
}

/* dW (M, C, KH, KW) from C-contiguous float32 X (N, C, H, W) and G (N, M, OH, OW), with the geometry's 15
 * integers (convolution_loops.h); the windows must stay within X padded by the begin pads and whatever end
 * pads they need. Up to ``threads`` threads each sum a range of samples, their sums added in thread order
 * at the end (so results depend on the number of threads used, as a threaded GEMM's do). Returns 0, or 1 when
 * memory ran out (dW is then unwritten). */
EXPORTED int onnxnn_conv_weight_gradient_float32(const float *x, const float *g, float *dw, const int64_t *geometry,
                                                 int threads)
{
    const Build build = build_numbered(chosen_build());
    const int64_t batch = geometry[BATCH], channels = geometry[CHANNELS], out_channels = geometry[OUT_CHANNELS];
    const int64_t taps = geometry[KERNEL_HEIGHT] * geometry[KERNEL_WIDTH];
    const int rows = rows_for(build.rows, geometry);
    const Layout layout = layout_for(rows, geometry);
    const int64_t sums_size = taps * layout.row_channels * layout.wide_channels;
    const int64_t products = out_channels * channels * taps * batch * geometry[OUT_HEIGHT] * geometry[OUT_WIDTH];
    const int64_t count = thread_count(threads, batch, products);

    Share shares[MOST_THREADS];
    float *sums = zeroed_floats(count * sums_size);
    if (sums == NULL) return 1;
    for (int64_t t = 0; t < count; t++)
        shares[t] = (Share){build.loop, rows, x, g, sums + t * sums_size, geometry, batch * t / count,
                            batch * (t + 1) / count, 0};
    run_shares(run_share, shares, sizeof(Share), count, count);
    int status = 0;
    for (int64_t t = 0; t < count; t++)
        if (shares[t].status) status = shares[t].status;
    if (!status) {
        for (int64_t t = 1; t < count; t++)
            for (int64_t i = 0; i < sums_size; i++) sums[i] += sums[t * sums_size + i];
        for (int64_t m = 0; m < out_channels; m++)
            for (int64_t c = 0; c < channels; c++)
                for (int64_t tap = 0; tap < taps; tap++)
                    dw[(m * channels + c) * taps + tap] =
                        layout.input_wide ? sums[(tap * layout.row_channels + m) * layout.wide_channels + c]
                                          : sums[(tap * layout.row_channels + c) * layout.wide_channels + m];
    }
    free(sums);
    return status;
}

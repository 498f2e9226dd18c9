/* The two nodes of a 2-d max pooling's gradient as compiled loops, called by compiled_pooling.py through ctypes.
 *
 * onnxnn records the gradient of MaxPool as MaxPool again with its Indices output, then a ScatterElements
 * adding the output gradient at those flat indices (runtime/ops/pooling.py). onnxruntime's MaxPool with
 * Indices takes another path than without (resnet18's 3x3 stride-2 layer on 8 x 64 x 112 x 112: 48 ms
 * against 3.4), and its ScatterElements adds one element at a time through a general indexer (12 ms).
 * Both loops here compute what PyTorch's CPU kernels compute, in the same order:
 *
 * - the maximum of each window over the positions inside X, in row-major order: the first position's
 *   value, replaced by a strictly greater one or by a NaN (so a window holding NaN gives NaN and its last
 *   NaN's position, where onnxruntime's kernel skips NaN, and a window of -infinity gives its first
 *   position); the index is plane * H * W + h * W + w of that position
 *   (storage order 0), float's lowest and h = w = -1 where no position of the window lies inside X;
 * - data copied, then each update added at its index in turn (an index from -size up to -1 counts from
 *   the end), after every index was checked: a bad one changes nothing.
 */
#include <float.h>
#include <stdint.h>
#include <string.h>

#define EXPORTED __attribute__((visibility("default")))
#define POOLING_LOOPS_VERSION 2

EXPORTED int onnxnn_pooling_loops_version(void) { return POOLING_LOOPS_VERSION; }

/* The first tap index in [0, kernel) whose position start + tap * dilation is at least 0, and the end of
 * those below ``size``: the window's taps inside X along one axis. */
static inline void taps_inside(int64_t start, int64_t kernel, int64_t dilation, int64_t size, int64_t *first,
                               int64_t *end)
{
    int64_t begin = start < 0 ? (-start + dilation - 1) / dilation : 0;
    int64_t stop = start >= size ? 0 : (size - start + dilation - 1) / dilation;
    *first = begin;
    *end = stop < kernel ? stop : kernel;
}

/* One output position's window by taps (the columns at the edges, where the taps inside X vary). */
static inline void pool_window(const float *x_plane, int64_t top, int64_t left, int64_t first_i, int64_t end_i,
                               int64_t kernel_width, int64_t dilation_height, int64_t dilation_width,
                               int64_t width, float *best_out, int64_t *position_out)
{
    int64_t first_j, end_j;
    taps_inside(left, kernel_width, dilation_width, width, &first_j, &end_j);
    float best = -FLT_MAX;
    int64_t best_position = -width - 1; /* h = w = -1: no tap inside X */
    if (first_i < end_i && first_j < end_j) {
        best_position = (top + first_i * dilation_height) * width + left + first_j * dilation_width;
        best = x_plane[best_position];
        for (int64_t i = first_i; i < end_i; i++) {
            const int64_t row = (top + i * dilation_height) * width + left;
            for (int64_t j = first_j; j < end_j; j++) {
                const int64_t position = row + j * dilation_width;
                const float value = x_plane[position];
                const int greater = value > best || value != value;
                best = greater ? value : best;
                best_position = greater ? position : best_position;
            }
        }
    }
    *best_out = best;
    *position_out = best_position;
}

/* Y and Indices (planes, OH, OW) of X (planes, H, W); ``geometry``: planes, H, W, OH, OW, then the kernel's
 * height and width, strides, dilations and begin pads, two each. Each tap's comparison selects without a
 * branch (after a ReLU half the values tie at 0, and a branch per tap mispredicted so often that the loop
 * took as long as onnxruntime's: 50 ms for resnet18's pooling above), and the windows whose taps all lie
 * inside X along the width go four at a time, four independent chains of comparisons. */
EXPORTED void onnxnn_max_pool_2d_with_indices_float32(const float *x, float *y, int64_t *indices,
                                                      const int64_t *geometry)
{
    const int64_t planes = geometry[0], height = geometry[1], width = geometry[2];
    const int64_t out_height = geometry[3], out_width = geometry[4];
    const int64_t kernel_height = geometry[5], kernel_width = geometry[6];
    const int64_t stride_height = geometry[7], stride_width = geometry[8];
    const int64_t dilation_height = geometry[9], dilation_width = geometry[10];
    const int64_t pad_top = geometry[11], pad_left = geometry[12];
    const int64_t plane_size = height * width;
    /* Output columns [inner_begin, inner_end) read only columns inside X. */
    int64_t inner_begin = (pad_left + stride_width - 1) / stride_width;
    int64_t inner_end = width - 1 - (kernel_width - 1) * dilation_width + pad_left;
    inner_end = inner_end < 0 ? 0 : inner_end / stride_width + 1;
    if (inner_end > out_width) inner_end = out_width;
    if (inner_begin > inner_end) inner_begin = inner_end;
    for (int64_t plane = 0; plane < planes; plane++) {
        const float *x_plane = x + plane * plane_size;
        float *y_row = y + plane * out_height * out_width;
        int64_t *index_row = indices + plane * out_height * out_width;
        for (int64_t oh = 0; oh < out_height; oh++, y_row += out_width, index_row += out_width) {
            const int64_t top = oh * stride_height - pad_top;
            int64_t first_i, end_i;
            taps_inside(top, kernel_height, dilation_height, height, &first_i, &end_i);
            int64_t ow = 0;
            while (ow < out_width) {
                if (ow >= inner_begin && ow + 4 <= inner_end && first_i < end_i) {
                    /* Four windows at once: every tap of their rows is inside X. */
                    const int64_t first_row = (top + first_i * dilation_height) * width - pad_left;
                    int64_t position[4];
                    float best[4];
                    for (int k = 0; k < 4; k++) {
                        position[k] = first_row + (ow + k) * stride_width;
                        best[k] = x_plane[position[k]];
                    }
                    for (int64_t i = first_i; i < end_i; i++) {
                        const int64_t row = (top + i * dilation_height) * width - pad_left;
                        for (int64_t j = 0; j < kernel_width; j++) {
                            const int64_t offset = row + j * dilation_width + ow * stride_width;
                            for (int k = 0; k < 4; k++) {
                                const int64_t at = offset + k * stride_width;
                                const float value = x_plane[at];
                                const int greater = value > best[k] || value != value;
                                best[k] = greater ? value : best[k];
                                position[k] = greater ? at : position[k];
                            }
                        }
                    }
                    for (int k = 0; k < 4; k++) {
                        y_row[ow + k] = best[k];
                        index_row[ow + k] = plane * plane_size + position[k];
                    }
                    ow += 4;
                    continue;
                }
                pool_window(x_plane, top, ow * stride_width - pad_left, first_i, end_i, kernel_width,
                            dilation_height, dilation_width, width, &y_row[ow], &index_row[ow]);
                index_row[ow] += plane * plane_size;
                ow++;
            }
        }
    }
}

/* out (size) = data, then updates[i] added at indices[i] for i = 0 .. count - 1. Returns 0, or 1 when an
 * index lies outside [-size, size) (out then holds data unchanged). */
EXPORTED int onnxnn_scatter_add_float32(const float *data, const int64_t *indices, const float *updates, float *out,
                                        int64_t size, int64_t count)
{
    for (int64_t i = 0; i < count; i++)
        if (indices[i] < -size || indices[i] >= size) return 1;
    memcpy(out, data, (size_t)size * sizeof(float));
    for (int64_t i = 0; i < count; i++) {
        const int64_t index = indices[i] < 0 ? indices[i] + size : indices[i];
        out[index] += updates[i];
    }
    return 0;
}

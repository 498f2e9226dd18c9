/* What the layer loops' files share: the geometry's layout, the vector types, the build the CPU runs and
 * the threads. convolution_loops.c holds the ungrouped weight gradient and defines the shared functions;
 * depthwise_loops.c the depthwise one; normalization_loops.c batch normalization's and ReLU's training
 * passes; loop_threads.c the threads they share. All are one library (setup.py). */
#ifndef ONNXNN_CONVOLUTION_LOOPS_H
#define ONNXNN_CONVOLUTION_LOOPS_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORTED __attribute__((visibility("default")))
#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* The geometry, as compiled_convolutions.py passes it: 15 integers. */
enum {
    BATCH, CHANNELS, HEIGHT, WIDTH, OUT_CHANNELS, OUT_HEIGHT, OUT_WIDTH,
    KERNEL_HEIGHT, KERNEL_WIDTH, STRIDE_HEIGHT, STRIDE_WIDTH, DILATION_HEIGHT, DILATION_WIDTH, PAD_TOP, PAD_LEFT,
    GEOMETRY_SIZE
};

/* Each build's native vector: AVX-512 16 floats, AVX2 with FMA 8, the baseline 4. (Generic vectors wider
 * than the build's registers are split through memory, which costs more than the arithmetic.) */
typedef float vector16 __attribute__((vector_size(16 * sizeof(float))));
typedef float vector8 __attribute__((vector_size(8 * sizeof(float))));
typedef float vector4 __attribute__((vector_size(4 * sizeof(float))));

/* The builds, best first: 0 AVX-512, 1 AVX2 with FMA, 2 the baseline. */
#define BUILDS 3

/* The fewest multiply-adds worth a thread of their own: waking a parked worker (loop_threads.c) and
 * waiting for its last piece costs some microseconds. */
#define THREAD_MIN_PRODUCTS (INT64_C(1) << 22)
#define MOST_THREADS 64

static inline int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

/* ``count`` floats (at least 16), 64-byte aligned and zeroed, or NULL. */
static inline float *zeroed_floats(int64_t count)
{
    size_t bytes = (size_t)round_up(count > 16 ? count : 16, 16) * sizeof(float);
    float *buffer = aligned_alloc(64, bytes);
    if (buffer != NULL) memset(buffer, 0, bytes);
    return buffer;
}

/* The build later calls use (0-2, as above): the one chosen by onnxnn_convolution_loops_use_build, else
 * the best this CPU runs. */
int chosen_build(void);

/* How many threads share ``products`` multiply-adds split into ``parts`` independent parts: at most
 * ``threads`` (and MOST_THREADS), one per part at most, and one per THREAD_MIN_PRODUCTS products. */
int64_t thread_count(int threads, int64_t parts, int64_t products);

/* Runs ``run`` on each of ``count`` shares (``share_size`` bytes apart from ``shares``) on up to ``threads``
 * threads: this one and workers of a pool kept between calls (loop_threads.c), each taking the next share
 * not yet taken. Where no worker can start, or another call has them, this thread runs them all. */
void run_shares(void *(*run)(void *), void *shares, size_t share_size, int64_t count, int64_t threads);

#endif

/* The optimizer updates of training.py and ir/update_formulas.py as one loop each, called by compiled_updates.py through ctypes.
 *
 * numpy runs an update as a pass over the parameters per product, sum and root (Adam: 13); a loop
 * here reads each array once and writes each result once.
 *
 * Same bits as the numpy formulas: each loop does its formula's operations in their order, in the
 * arrays' dtype. The build (setup.py) leaves out fast-math and turns off FMA contraction, so nothing
 * is reassociated or fused; -fno-math-errno only lets sqrt be one instruction, as numpy's is.
 *
 * Speed: every function below takes its options (weight decay, maximize, amsgrad, ...) as bits and
 * switches to a copy of its loop with those options as constants, so the compiler vectorizes each
 * copy; target_clones builds each function for AVX-512, AVX2 and the baseline and picks one for the
 * CPU when the library loads.
 *
 * Each function updates a list of tensors with one call, since a call through ctypes costs
 * microseconds and a model has tens of tensors: it takes the number of tensors, their element
 * counts, their arrays (per tensor, the update's inputs in training.py's order, then the new X and
 * the new states; NULL for an absent state), the factors in training.py's order (0 for an absent
 * one) and the option bits, both shared by every tensor.
 *
 * Streaming (option bit STREAM_OPTION, x86-64): the new arrays are written with non-temporal stores,
 * which go to memory without first reading each line they fill into the caches. A large update's
 * results leave the caches before the next step reads them anyway, and every ordinary store to a
 * fresh array first reads the line it writes: streamed, Momentum moves 5 arrays' bytes instead of 7.
 * The loops still compute into ordinary stores, a block at a time into arrays on the stack that stay
 * in the first-level cache, and the blocks are then streamed out: the same loops, the same bits.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__)
#define CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CPU_CLONES
#endif

#if defined(_MSC_VER)
#define EXPORTED __declspec(dllexport)
#define ALWAYS_INLINE static __forceinline
#define RESTRICT __restrict
#else
#define EXPORTED __attribute__((visibility("default")))
#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define RESTRICT restrict
#endif

/* The loops over a tensor's elements. A loop's arrays are not restrict: a result may be written over
 * the array it replaces (an update in place: compiled_updates.loop's caller knows when nobody else
 * can read that array), though never over another. Every iteration reads its elements before it
 * writes them, so no iteration depends on another, and the pragma tells the compiler so: it then
 * vectorizes without comparing the arrays' addresses at run time, a check that would find an
 * update in place overlapping and fall back to scalar code. */
#if defined(__clang__)
#define EACH_ELEMENT _Pragma("clang loop vectorize(assume_safety)") for (size_t i = 0; i < count; i++)
#elif defined(__GNUC__)
#define EACH_ELEMENT _Pragma("GCC ivdep") for (size_t i = 0; i < count; i++)
#elif defined(_MSC_VER)
#define EACH_ELEMENT __pragma(loop(ivdep)) for (size_t i = 0; i < count; i++)
#else
#define EACH_ELEMENT for (size_t i = 0; i < count; i++)
#endif

/* compiled_updates.py uses a library only if this matches its own number: an editable install
 * keeps the library built from an older update_loops.c until it is reinstalled. */
#define UPDATE_LOOPS_VERSION 5
EXPORTED int onnxnn_update_loops_version(void) { return UPDATE_LOOPS_VERSION; }

/* The factors are REAL (the function's dtype), passed as void: loop_threads.c calls every function
 * through one pointer type when it shares an update among threads. */
#define UPDATE_PARAMETERS \
    size_t tensors, const size_t *counts, void *const *arrays, const void *factors, int options
/* The loop over an exported function's tensors, each with its count (counts[tensor]) and its
 * ``per_tensor`` arrays, the first of them at ``arrays``. */
#define EACH_TENSOR(per_tensor) for (size_t tensor = 0; tensor < tensors; tensor++, arrays += (per_tensor))

/* Streaming: the option bit that asks for it, and where the machine has non-temporal stores (SSE2's,
 * on every x86-64 CPU), how a block of results is streamed out. Elsewhere the bit is ignored. */
#define STREAM_OPTION (1 << 8)
#define STREAM_BLOCK 512
#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
#define STREAMING_STORES 1
#define STREAM_FENCE(options) \
    if ((options) & STREAM_OPTION) _mm_sfence() /* the streamed stores are ordered before the return */
#else
#define STREAMING_STORES 0
#define STREAM_FENCE(options)
#endif

/* One tensor's update: DISPATCH (a switch over the option bits calling the loop on ``count`` elements
 * of ``arrays``) on the tensor's ``per_tensor`` arrays, of which the first ``inputs`` are read and the
 * rest written (NULL: absent). Streamed, DISPATCH runs block by block, its results in ``scratch``
 * vectors that NAMED(stream) then copies out. */
#if STREAMING_STORES
#define RUN_TENSOR(per_tensor, inputs, DISPATCH)                                                                  \
    if (options & STREAM_OPTION) {                                                                                \
        REAL scratch[(per_tensor) - (inputs)][STREAM_BLOCK];                                                      \
        void *const *whole = arrays;                                                                              \
        void *block[per_tensor];                                                                                  \
        for (size_t start = 0; start < counts[tensor]; start += STREAM_BLOCK) {                                   \
            const size_t count = counts[tensor] - start < STREAM_BLOCK ? counts[tensor] - start : STREAM_BLOCK;  \
            for (int k = 0; k < (per_tensor); k++)                                                                \
                block[k] = whole[k] == NULL ? NULL                                                                \
                           : k < (inputs)   ? (void *)((REAL *)whole[k] + start)                                  \
                                            : (void *)scratch[k - (inputs)];                                      \
            {                                                                                                     \
                void *const *arrays = block;                                                                      \
                DISPATCH                                                                                          \
            }                                                                                                     \
            for (int k = (inputs); k < (per_tensor); k++)                                                         \
                if (whole[k] != NULL) NAMED(stream)((REAL *)whole[k] + start, scratch[k - (inputs)], count);      \
        }                                                                                                         \
    } else {                                                                                                      \
        const size_t count = counts[tensor];                                                                      \
        DISPATCH                                                                                                  \
    }
#else
#define RUN_TENSOR(per_tensor, inputs, DISPATCH) \
    {                                            \
        const size_t count = counts[tensor];     \
        DISPATCH                                 \
    }
#endif

/* The switch of an exported function over its option bits: CASES_n(CALL, loop, arrays) is one case per
 * value of n bits, and CALL_WITH_k_OPTIONS(loop, arrays, bits) calls the function's loop on its first
 * 3, 5, 7 or 9 arrays (``arrays``: ARRAYS_3 to ARRAYS_9 of update_loops_template.h) with bits 0 to k - 1 as constant
 * flags (OPTION(bits, i) is bit i), passing on ``count`` (RUN_TENSOR's) and the function's factors. */
#define OPTION(bits, n) (((bits) >> (n)) & 1)
#define CASES_2(CALL, loop, arrays) CALL(loop, arrays, 0) CALL(loop, arrays, 1)
#define CASES_4(CALL, loop, arrays) CALL(loop, arrays, 0) CALL(loop, arrays, 1) CALL(loop, arrays, 2) CALL(loop, arrays, 3)
#define CASES_8(CALL, loop, arrays)                                                                   \
    CASES_4(CALL, loop, arrays) CALL(loop, arrays, 4) CALL(loop, arrays, 5) CALL(loop, arrays, 6) \
    CALL(loop, arrays, 7)
#define CASES_16(CALL, loop, arrays)                                                                   \
    CASES_8(CALL, loop, arrays) CALL(loop, arrays, 8) CALL(loop, arrays, 9) CALL(loop, arrays, 10) \
    CALL(loop, arrays, 11) CALL(loop, arrays, 12) CALL(loop, arrays, 13) CALL(loop, arrays, 14)    \
    CALL(loop, arrays, 15)
#define CALL_WITH_1_OPTION(loop, arrays, bits) \
    case bits: NAMED(loop)(count, ARRAYS_##arrays, factors, OPTION(bits, 0)); break;
#define CALL_WITH_2_OPTIONS(loop, arrays, bits) \
    case bits: NAMED(loop)(count, ARRAYS_##arrays, factors, OPTION(bits, 0), OPTION(bits, 1)); break;
#define CALL_WITH_3_OPTIONS(loop, arrays, bits) \
    case bits: NAMED(loop)(count, ARRAYS_##arrays, factors, OPTION(bits, 0), OPTION(bits, 1), OPTION(bits, 2)); break;
#define CALL_WITH_4_OPTIONS(loop, arrays, bits)                                                                  \
    case bits:                                                                                                   \
        NAMED(loop)(count, ARRAYS_##arrays, factors, OPTION(bits, 0), OPTION(bits, 1), OPTION(bits, 2), \
                    OPTION(bits, 3));                                                                            \
        break;

#define REAL float
#define SQRT sqrtf
#define FABS fabsf
#define STREAM_STORE(destination, source) _mm_stream_ps((destination), _mm_loadu_ps(source))
#define NAMED(update) onnxnn_##update##_float32
#include "update_loops_template.h"
#undef REAL
#undef SQRT
#undef FABS
#undef STREAM_STORE
#undef NAMED

#define REAL double
#define SQRT sqrt
#define FABS fabs
#define STREAM_STORE(destination, source) _mm_stream_pd((destination), _mm_loadu_pd(source))
#define NAMED(update) onnxnn_##update##_float64
#include "update_loops_template.h"

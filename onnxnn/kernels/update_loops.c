/* The optimizer updates of training.py as one loop each, called by compiled_updates.py through ctypes.
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
 * Each function takes the element count, the arrays (the update's inputs in training.py's order,
 * then the new X and the new states; NULL for an absent state), the factors in training.py's order
 * (0 for an absent one) and the option bits.
 */
#include <math.h>
#include <stddef.h>

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

/* The cases of a switch over option bits: CASES_n(CASE) is CASE(0) ... CASE(n - 1), and OPTION(bits, n)
 * is bit n, a constant in each case. */
#define OPTION(bits, n) (((bits) >> (n)) & 1)
#define CASES_4(CASE) CASE(0) CASE(1) CASE(2) CASE(3)
#define CASES_8(CASE) CASES_4(CASE) CASE(4) CASE(5) CASE(6) CASE(7)
#define CASES_16(CASE) CASES_8(CASE) CASE(8) CASE(9) CASE(10) CASE(11) CASE(12) CASE(13) CASE(14) CASE(15)

#define REAL float
#define SQRT sqrtf
#define NAMED(update) onnxnn_##update##_float32
#include "update_loops_template.h"
#undef REAL
#undef SQRT
#undef NAMED

#define REAL double
#define SQRT sqrt
#define NAMED(update) onnxnn_##update##_float64
#include "update_loops_template.h"

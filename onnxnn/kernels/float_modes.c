/* The calling thread's handling of subnormal floats, for onnxnn.set_flush_denormal (float_modes.py).
 *
 * Arithmetic on subnormal numbers (below 1.2e-38 in float32) takes a microcode assist of about a
 * hundred cycles per operation on x86: an optimizer whose squared gradients underflow runs four
 * times slower. Flushing makes such results zero (flush-to-zero) and reads such inputs as zero
 * (denormals-are-zero), as PyTorch's torch.set_flush_denormal does: MXCSR's bits 15 and 6 on x86,
 * FPCR's FZ bit on AArch64. The mode is the thread's own.
 */
#if defined(_MSC_VER)
#define EXPORTED __declspec(dllexport)
#else
#define EXPORTED __attribute__((visibility("default")))
#endif

/* float_modes.py uses the library only if this matches its own number. */
#define FLOAT_MODES_VERSION 1
EXPORTED int onnxnn_float_modes_version(void) { return FLOAT_MODES_VERSION; }

#if defined(__SSE__) || defined(_M_X64)
#include <xmmintrin.h>
#define FLUSH_BITS 0x8040u /* flush-to-zero (bit 15), denormals-are-zero (bit 6) */

/* Sets (on != 0) or clears flushing on the calling thread; returns 1 where it is supported. */
EXPORTED int onnxnn_set_flush_denormal(int on) {
    unsigned int status = _mm_getcsr();
    _mm_setcsr(on ? (status | FLUSH_BITS) : (status & ~FLUSH_BITS));
    return 1;
}

EXPORTED int onnxnn_flushes_denormal(void) { return (_mm_getcsr() & FLUSH_BITS) == FLUSH_BITS; }

#elif defined(__aarch64__) && defined(__GNUC__)
#define FLUSH_BIT (1ul << 24) /* FPCR.FZ: flush-to-zero for inputs and results */

EXPORTED int onnxnn_set_flush_denormal(int on) {
    unsigned long control;
    __asm__ volatile("mrs %0, fpcr" : "=r"(control));
    control = on ? (control | FLUSH_BIT) : (control & ~FLUSH_BIT);
    __asm__ volatile("msr fpcr, %0" : : "r"(control));
    return 1;
}

EXPORTED int onnxnn_flushes_denormal(void) {
    unsigned long control;
    __asm__ volatile("mrs %0, fpcr" : "=r"(control));
    return (control & FLUSH_BIT) != 0;
}

#else
EXPORTED int onnxnn_set_flush_denormal(int on) {
    (void)on;
    return 0;
}

EXPORTED int onnxnn_flushes_denormal(void) { return 0; }
#endif

/* update_loops.c's loops for one dtype: included once per REAL (the element type), with SQRT (its
 * square root), STREAM_STORE (a 16-byte non-temporal store of REALs) and NAMED(update) (the exported
 * function's name). */

#if STREAMING_STORES
/* Copies ``count`` REALs with non-temporal stores from ``destination``'s first 16-byte boundary on. */
ALWAYS_INLINE void NAMED(stream)(REAL *RESTRICT destination, const REAL *RESTRICT source, size_t count) {
    const size_t lanes = 16 / sizeof(REAL);
    size_t i = 0;
    for (; i < count && ((uintptr_t)(destination + i) & 15); i++) destination[i] = source[i];
    for (; i + lanes <= count; i += lanes) STREAM_STORE(destination + i, source + i);
    for (; i < count; i++) destination[i] = source[i];
}
#endif

/* A function's arrays as its loop's pointers: the update's inputs, then its results. The loops take
 * them as restrict parameters: no array overlaps another, and the compiler vectorizes only knowing so. */
#define ARRAYS_5 arrays[0], arrays[1], arrays[2], arrays[3], arrays[4]
#define ARRAYS_9 ARRAYS_5, arrays[5], arrays[6], arrays[7], arrays[8]

/* Momentum: x, g, v, new_x, new_v; learning_rate, alpha, beta, norm_coefficient. */
ALWAYS_INLINE void NAMED(momentum_loop)(size_t count, const REAL *RESTRICT x, const REAL *RESTRICT g,
                                        const REAL *RESTRICT v, REAL *RESTRICT new_x, REAL *RESTRICT new_v,
                                        const REAL *factors, const int scaled, const int decayed, const int nesterov) {
    const REAL learning_rate = factors[0], alpha = factors[1], beta = factors[2], norm_coefficient = factors[3];
    for (size_t i = 0; i < count; i++) {
        const REAL gradient = decayed ? x[i] * norm_coefficient + g[i] : g[i];
        const REAL velocity = v[i] * alpha + (scaled ? gradient * beta : gradient);
        new_v[i] = velocity;
        const REAL direction = nesterov ? velocity * alpha + gradient : velocity;
        new_x[i] = x[i] - learning_rate * direction;
    }
}

#define MOMENTUM_DISPATCH switch (options & 7) { CASES_8(CALL_WITH_3_OPTIONS, momentum_loop, 5) }
EXPORTED CPU_CLONES void NAMED(momentum)(UPDATE_PARAMETERS) {
    EACH_TENSOR(5) RUN_TENSOR(5, 3, MOMENTUM_DISPATCH)
    STREAM_FENCE(options);
}
#undef MOMENTUM_DISPATCH

/* Adam: x, g, m, v, v_max, new_x, new_m, new_v, new_v_max; one_minus_beta1, beta2, one_minus_beta2,
 * epsilon, step_size, bias_correction2_sqrt, decay. Maximizing without L2 decay negates G by the
 * signs of the moment's difference, as training.py does. */
ALWAYS_INLINE void NAMED(adam_loop)(size_t count, const REAL *RESTRICT x, const REAL *RESTRICT g,
                                    const REAL *RESTRICT m, const REAL *RESTRICT v, const REAL *RESTRICT v_max,
                                    REAL *RESTRICT new_x, REAL *RESTRICT new_m, REAL *RESTRICT new_v,
                                    REAL *RESTRICT new_v_max, const REAL *factors, const int l2_decay,
                                    const int decoupled_decay, const int maximize, const int amsgrad) {
    const REAL one_minus_beta1 = factors[0], beta2 = factors[1], one_minus_beta2 = factors[2];
    const REAL epsilon = factors[3], step_size = factors[4], bias_correction2_sqrt = factors[5], decay = factors[6];
    const int negated = maximize && !l2_decay;
    for (size_t i = 0; i < count; i++) {
        REAL gradient = g[i];
        if (l2_decay) gradient = maximize ? x[i] * decay - gradient : x[i] * decay + gradient;
        REAL moment = negated ? -(gradient + m[i]) : gradient - m[i];
        moment = moment * one_minus_beta1 + m[i];
        new_m[i] = moment;
        REAL square = v[i] * beta2 + (gradient * gradient) * one_minus_beta2;
        new_v[i] = square;
        if (amsgrad) {
            const REAL kept = v_max[i];
            square = (kept >= square || kept != kept) ? kept : square; /* numpy's maximum: NaN wins */
            new_v_max[i] = square;
        }
        const REAL step = moment / (SQRT(square) / bias_correction2_sqrt + epsilon) * step_size;
        new_x[i] = decoupled_decay ? x[i] * decay - step : x[i] - step;
    }
}

#define ADAM_DISPATCH switch (options & 15) { CASES_16(CALL_WITH_4_OPTIONS, adam_loop, 9) }
EXPORTED CPU_CLONES void NAMED(adam)(UPDATE_PARAMETERS) {
    EACH_TENSOR(9) RUN_TENSOR(9, 5, ADAM_DISPATCH)
    STREAM_FENCE(options);
}
#undef ADAM_DISPATCH

/* Adagrad: x, g, sum, new_x, new_sum; epsilon, decayed_lr, weight_decay. */
ALWAYS_INLINE void NAMED(adagrad_loop)(size_t count, const REAL *RESTRICT x, const REAL *RESTRICT g,
                                       const REAL *RESTRICT state_sum, REAL *RESTRICT new_x, REAL *RESTRICT new_sum,
                                       const REAL *factors, const int decayed, const int maximize) {
    const REAL epsilon = factors[0], decayed_lr = factors[1], weight_decay = factors[2];
    const int negated = maximize && !decayed;
    for (size_t i = 0; i < count; i++) {
        REAL gradient = g[i];
        if (decayed) gradient = maximize ? x[i] * weight_decay - gradient : x[i] * weight_decay + gradient;
        const REAL total = gradient * gradient + state_sum[i];
        new_sum[i] = total;
        const REAL step = gradient / (SQRT(total) + epsilon) * decayed_lr;
        new_x[i] = negated ? x[i] + step : x[i] - step;
    }
}

#define ADAGRAD_DISPATCH switch (options & 3) { CASES_4(CALL_WITH_2_OPTIONS, adagrad_loop, 5) }
EXPORTED CPU_CLONES void NAMED(adagrad)(UPDATE_PARAMETERS) {
    EACH_TENSOR(5) RUN_TENSOR(5, 3, ADAGRAD_DISPATCH)
    STREAM_FENCE(options);
}
#undef ADAGRAD_DISPATCH

/* RMSprop: x, g, square_avg, grad_avg, buffer, new_x, new_square_avg, new_grad_avg, new_buffer;
 * learning_rate, alpha, one_minus_alpha, epsilon, weight_decay, momentum. */
ALWAYS_INLINE void NAMED(rmsprop_loop)(size_t count, const REAL *RESTRICT x, const REAL *RESTRICT g,
                                       const REAL *RESTRICT square_avg, const REAL *RESTRICT grad_avg,
                                       const REAL *RESTRICT buffer, REAL *RESTRICT new_x,
                                       REAL *RESTRICT new_square_avg, REAL *RESTRICT new_grad_avg,
                                       REAL *RESTRICT new_buffer, const REAL *factors, const int decayed,
                                       const int maximize, const int centered, const int with_momentum) {
    const REAL learning_rate = factors[0], alpha = factors[1], one_minus_alpha = factors[2];
    const REAL epsilon = factors[3], weight_decay = factors[4], momentum = factors[5];
    const int negated = maximize && !decayed;
    for (size_t i = 0; i < count; i++) {
        REAL gradient = g[i];
        if (decayed) gradient = maximize ? x[i] * weight_decay - gradient : x[i] * weight_decay + gradient;
        const REAL square = square_avg[i] * alpha + (gradient * gradient) * one_minus_alpha;
        new_square_avg[i] = square;
        REAL root;
        if (centered) {
            REAL average = negated ? -(gradient + grad_avg[i]) : gradient - grad_avg[i];
            average = average * one_minus_alpha + grad_avg[i];
            new_grad_avg[i] = average;
            root = SQRT(square - average * average);
        } else {
            root = SQRT(square);
        }
        const REAL quotient = gradient / (root + epsilon); /* G' / A, or -(G' / A) while negated */
        if (with_momentum) {
            const REAL velocity = negated ? buffer[i] * momentum - quotient : buffer[i] * momentum + quotient;
            new_buffer[i] = velocity;
            new_x[i] = x[i] - velocity * learning_rate;
        } else {
            const REAL step = quotient * learning_rate;
            new_x[i] = negated ? x[i] + step : x[i] - step;
        }
    }
}

#define RMSPROP_DISPATCH switch (options & 15) { CASES_16(CALL_WITH_4_OPTIONS, rmsprop_loop, 9) }
EXPORTED CPU_CLONES void NAMED(rmsprop)(UPDATE_PARAMETERS) {
    EACH_TENSOR(9) RUN_TENSOR(9, 5, RMSPROP_DISPATCH)
    STREAM_FENCE(options);
}
#undef RMSPROP_DISPATCH

#undef ARRAYS_5
#undef ARRAYS_9

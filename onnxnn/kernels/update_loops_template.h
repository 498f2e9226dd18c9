/* update_loops.c's loops for one dtype: included once per REAL (the element type), with SQRT (its
 * square root), FABS (its absolute value), STREAM_STORE (a 16-byte non-temporal store of REALs) and NAMED(update) (the exported
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

/* A function's arrays as its loop's pointers: the update's inputs, then its results (update_loops.c's
 * EACH_ELEMENT says why they are not restrict). */
#define ARRAYS_3 arrays[0], arrays[1], arrays[2]
#define ARRAYS_5 ARRAYS_3, arrays[3], arrays[4]
#define ARRAYS_7 ARRAYS_5, arrays[5], arrays[6]
#define ARRAYS_9 ARRAYS_5, arrays[5], arrays[6], arrays[7], arrays[8]

/* Momentum: x, g, v, new_x, new_v; learning_rate, alpha, beta, norm_coefficient. */
ALWAYS_INLINE void NAMED(momentum_loop)(size_t count, const REAL *x, const REAL *g, const REAL *v, REAL *new_x,
                                        REAL *new_v, const REAL *factors, const int scaled, const int decayed,
                                        const int nesterov) {
    const REAL learning_rate = factors[0], alpha = factors[1], beta = factors[2], norm_coefficient = factors[3];
    EACH_ELEMENT {
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
ALWAYS_INLINE void NAMED(adam_loop)(size_t count, const REAL *x, const REAL *g, const REAL *m, const REAL *v,
                                    const REAL *v_max, REAL *new_x, REAL *new_m, REAL *new_v, REAL *new_v_max,
                                    const REAL *factors, const int l2_decay, const int decoupled_decay,
                                    const int maximize, const int amsgrad) {
    const REAL one_minus_beta1 = factors[0], beta2 = factors[1], one_minus_beta2 = factors[2];
    const REAL epsilon = factors[3], step_size = factors[4], bias_correction2_sqrt = factors[5], decay = factors[6];
    const int negated = maximize && !l2_decay;
    EACH_ELEMENT {
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
ALWAYS_INLINE void NAMED(adagrad_loop)(size_t count, const REAL *x, const REAL *g, const REAL *state_sum, REAL *new_x,
                                       REAL *new_sum, const REAL *factors, const int decayed, const int maximize) {
    const REAL epsilon = factors[0], decayed_lr = factors[1], weight_decay = factors[2];
    const int negated = maximize && !decayed;
    EACH_ELEMENT {
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
ALWAYS_INLINE void NAMED(rmsprop_loop)(size_t count, const REAL *x, const REAL *g, const REAL *square_avg,
                                       const REAL *grad_avg, const REAL *buffer, REAL *new_x, REAL *new_square_avg,
                                       REAL *new_grad_avg, REAL *new_buffer, const REAL *factors, const int decayed,
                                       const int maximize, const int centered, const int with_momentum) {
    const REAL learning_rate = factors[0], alpha = factors[1], one_minus_alpha = factors[2];
    const REAL epsilon = factors[3], weight_decay = factors[4], momentum = factors[5];
    const int negated = maximize && !decayed;
    EACH_ELEMENT {
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

/* The updates of ir/update_formulas.py: each formula's operations in its order. Their arrays are x, g,
 * two states, new_x and the two new states; their factors are the formula's hyperparameters, in order. */

/* G': negated when maximizing, then plus x * decay for L2 weight decay, as update_formulas._gradient. */
#define FORMULA_GRADIENT(l2_decay, maximize, decay) \
    REAL gradient = (maximize) ? -g[i] : g[i];      \
    if (l2_decay) gradient = gradient + x[i] * (decay);

/* SGD without momentum: x, g, new_x; lr, weight_decay. */
ALWAYS_INLINE void NAMED(sgd_loop)(size_t count, const REAL *x, const REAL *g, REAL *new_x, const REAL *factors,
                                   const int decayed, const int maximize) {
    const REAL learning_rate = factors[0], weight_decay = factors[1];
    EACH_ELEMENT {
        FORMULA_GRADIENT(decayed, maximize, weight_decay)
        new_x[i] = x[i] - learning_rate * gradient;
    }
}

#define SGD_DISPATCH switch (options & 3) { CASES_4(CALL_WITH_2_OPTIONS, sgd_loop, 3) }
EXPORTED CPU_CLONES void NAMED(sgd)(UPDATE_PARAMETERS) {
    EACH_TENSOR(3) RUN_TENSOR(3, 2, SGD_DISPATCH)
    STREAM_FENCE(options);
}
#undef SGD_DISPATCH

/* Adamax: step_size, one_minus_beta1, beta2, epsilon, weight_decay. */
ALWAYS_INLINE void NAMED(adamax_loop)(size_t count, const REAL *x, const REAL *g, const REAL *m, const REAL *u,
                                      REAL *new_x, REAL *new_m, REAL *new_u, const REAL *factors, const int decayed,
                                      const int maximize) {
    const REAL step_size = factors[0], one_minus_beta1 = factors[1], beta2 = factors[2];
    const REAL epsilon = factors[3], weight_decay = factors[4];
    EACH_ELEMENT {
        FORMULA_GRADIENT(decayed, maximize, weight_decay)
        const REAL moment = m[i] + (gradient - m[i]) * one_minus_beta1;
        new_m[i] = moment;
        const REAL scaled = u[i] * beta2, bound = FABS(gradient) + epsilon;
        const REAL norm = (scaled >= bound || scaled != scaled) ? scaled : bound; /* numpy's maximum: NaN wins */
        new_u[i] = norm;
        new_x[i] = x[i] - moment / norm * step_size;
    }
}

#define ADAMAX_DISPATCH switch (options & 3) { CASES_4(CALL_WITH_2_OPTIONS, adamax_loop, 7) }
EXPORTED CPU_CLONES void NAMED(adamax)(UPDATE_PARAMETERS) {
    EACH_TENSOR(7) RUN_TENSOR(7, 4, ADAMAX_DISPATCH)
    STREAM_FENCE(options);
}
#undef ADAMAX_DISPATCH

/* NAdam: one_minus_beta1, beta2, one_minus_beta2, bias_correction2, epsilon, gradient_step, average_step, decay. */
ALWAYS_INLINE void NAMED(nadam_loop)(size_t count, const REAL *x, const REAL *g, const REAL *m, const REAL *v,
                                     REAL *new_x, REAL *new_m, REAL *new_v, const REAL *factors, const int l2_decay,
                                     const int decoupled_decay, const int maximize) {
    const REAL one_minus_beta1 = factors[0], beta2 = factors[1], one_minus_beta2 = factors[2];
    const REAL bias_correction2 = factors[3], epsilon = factors[4], gradient_step = factors[5];
    const REAL average_step = factors[6], decay = factors[7];
    EACH_ELEMENT {
        FORMULA_GRADIENT(l2_decay, maximize, decay)
        const REAL weight = decoupled_decay ? x[i] * decay : x[i];
        const REAL moment = m[i] + (gradient - m[i]) * one_minus_beta1;
        new_m[i] = moment;
        const REAL square = v[i] * beta2 + (gradient * gradient) * one_minus_beta2;
        new_v[i] = square;
        const REAL denominator = SQRT(square / bias_correction2) + epsilon;
        new_x[i] = weight - gradient / denominator * gradient_step - moment / denominator * average_step;
    }
}

#define NADAM_DISPATCH switch (options & 7) { CASES_8(CALL_WITH_3_OPTIONS, nadam_loop, 7) }
EXPORTED CPU_CLONES void NAMED(nadam)(UPDATE_PARAMETERS) {
    EACH_TENSOR(7) RUN_TENSOR(7, 4, NADAM_DISPATCH)
    STREAM_FENCE(options);
}
#undef NADAM_DISPATCH

/* RAdam: one_minus_beta1, beta2, one_minus_beta2, epsilon, step_size, decay. */
ALWAYS_INLINE void NAMED(radam_loop)(size_t count, const REAL *x, const REAL *g, const REAL *m, const REAL *v,
                                     REAL *new_x, REAL *new_m, REAL *new_v, const REAL *factors, const int l2_decay,
                                     const int decoupled_decay, const int maximize, const int rectified) {
    const REAL one_minus_beta1 = factors[0], beta2 = factors[1], one_minus_beta2 = factors[2];
    const REAL epsilon = factors[3], step_size = factors[4], decay = factors[5];
    EACH_ELEMENT {
        FORMULA_GRADIENT(l2_decay, maximize, decay)
        const REAL weight = decoupled_decay ? x[i] * decay : x[i];
        const REAL moment = m[i] + (gradient - m[i]) * one_minus_beta1;
        new_m[i] = moment;
        const REAL square = v[i] * beta2 + (gradient * gradient) * one_minus_beta2;
        new_v[i] = square;
        new_x[i] = weight - (rectified ? moment / (SQRT(square) + epsilon) * step_size : moment * step_size);
    }
}

#define RADAM_DISPATCH switch (options & 15) { CASES_16(CALL_WITH_4_OPTIONS, radam_loop, 7) }
EXPORTED CPU_CLONES void NAMED(radam)(UPDATE_PARAMETERS) {
    EACH_TENSOR(7) RUN_TENSOR(7, 4, RADAM_DISPATCH)
    STREAM_FENCE(options);
}
#undef RADAM_DISPATCH

/* Adadelta: lr, rho, one_minus_rho, epsilon, weight_decay. */
ALWAYS_INLINE void NAMED(adadelta_loop)(size_t count, const REAL *x, const REAL *g, const REAL *square_avg,
                                        const REAL *acc_delta, REAL *new_x, REAL *new_square_avg, REAL *new_acc_delta,
                                        const REAL *factors, const int decayed, const int maximize) {
    const REAL learning_rate = factors[0], rho = factors[1], one_minus_rho = factors[2];
    const REAL epsilon = factors[3], weight_decay = factors[4];
    EACH_ELEMENT {
        FORMULA_GRADIENT(decayed, maximize, weight_decay)
        const REAL square = square_avg[i] * rho + (gradient * gradient) * one_minus_rho;
        new_square_avg[i] = square;
        const REAL delta = SQRT(acc_delta[i] + epsilon) / SQRT(square + epsilon) * gradient;
        new_acc_delta[i] = acc_delta[i] * rho + (delta * delta) * one_minus_rho;
        new_x[i] = x[i] - delta * learning_rate;
    }
}

#define ADADELTA_DISPATCH switch (options & 3) { CASES_4(CALL_WITH_2_OPTIONS, adadelta_loop, 7) }
EXPORTED CPU_CLONES void NAMED(adadelta)(UPDATE_PARAMETERS) {
    EACH_TENSOR(7) RUN_TENSOR(7, 4, ADADELTA_DISPATCH)
    STREAM_FENCE(options);
}
#undef ADADELTA_DISPATCH

/* ASGD: x, g, ax, new_x, new_ax; one_minus_lambd_eta, eta, mu, weight_decay. Not averaged (mu
 * omitted: before t0), the new average is the new parameter. */
ALWAYS_INLINE void NAMED(asgd_loop)(size_t count, const REAL *x, const REAL *g, const REAL *average, REAL *new_x,
                                    REAL *new_average, const REAL *factors, const int decayed, const int maximize,
                                    const int averaged) {
    const REAL one_minus_lambd_eta = factors[0], eta = factors[1], mu = factors[2], weight_decay = factors[3];
    EACH_ELEMENT {
        FORMULA_GRADIENT(decayed, maximize, weight_decay)
        const REAL weight = x[i] * one_minus_lambd_eta - gradient * eta;
        new_x[i] = weight;
        new_average[i] = averaged ? average[i] + (weight - average[i]) * mu : weight;
    }
}

#define ASGD_DISPATCH switch (options & 7) { CASES_8(CALL_WITH_3_OPTIONS, asgd_loop, 5) }
EXPORTED CPU_CLONES void NAMED(asgd)(UPDATE_PARAMETERS) {
    EACH_TENSOR(5) RUN_TENSOR(5, 3, ASGD_DISPATCH)
    STREAM_FENCE(options);
}
#undef ASGD_DISPATCH

/* Rprop: x, g, prev, step_size, new_x, new_prev, new_step_size; etaminus, etaplus, step_size_min,
 * step_size_max. numpy's maximum and minimum (NaN wins) and sign (NaN stays, zeros give +0), written
 * as selects on whole conditions (``|``, not ``||``) so that the loop vectorizes: random signs made
 * the branches' version ten times slower. */
ALWAYS_INLINE void NAMED(rprop_loop)(size_t count, const REAL *x, const REAL *g, const REAL *previous,
                                     const REAL *step_size, REAL *new_x, REAL *new_previous, REAL *new_step_size,
                                     const REAL *factors, const int maximize) {
    const REAL etaminus = factors[0], etaplus = factors[1], smallest = factors[2], largest = factors[3];
    EACH_ELEMENT {
        const REAL gradient = maximize ? -g[i] : g[i];
        const REAL agreement = gradient * previous[i];
        const REAL factor = agreement > 0 ? etaplus : agreement < 0 ? etaminus : (REAL)1;
        const REAL scaled = step_size[i] * factor;
        const REAL raised = ((scaled < smallest) | (smallest != smallest)) ? smallest : scaled;
        const REAL size = ((raised > largest) | (largest != largest)) ? largest : raised;
        new_step_size[i] = size;
        const REAL kept = agreement < 0 ? (REAL)0 : gradient;
        new_previous[i] = kept;
        const REAL sign = kept != kept ? kept : (REAL)(kept > 0) - (REAL)(kept < 0);
        new_x[i] = x[i] - sign * size;
    }
}

#define RPROP_DISPATCH switch (options & 1) { CASES_2(CALL_WITH_1_OPTION, rprop_loop, 7) }
EXPORTED CPU_CLONES void NAMED(rprop)(UPDATE_PARAMETERS) {
    EACH_TENSOR(7) RUN_TENSOR(7, 4, RPROP_DISPATCH)
    STREAM_FENCE(options);
}
#undef RPROP_DISPATCH
#undef FORMULA_GRADIENT

#undef ARRAYS_3
#undef ARRAYS_5
#undef ARRAYS_7
#undef ARRAYS_9

"""The ONNX RNN, LSTM and GRU recurrences written once, over an array backend.

``unroll(backend, op_type, inputs, attrs, num_outputs)`` computes a node's outputs step by step
with only matrix products, elementwise arithmetic, activations, slicing, stacking and selection.
The kernels executor runs it on numpy arrays (onnxnn/kernels/recurrent.py); the gradient rules
run it on recorded tensors and differentiate the unrolled graph (onnxnn/runtime/ops/recurrent.py),
so the forward the kernels compute and the one the gradients describe cannot disagree.

Semantics follow the ONNX operator specification (opset 14+): gate orders iofc (LSTM), zrh (GRU);
``sequence_lens`` masks the steps at and past each batch entry's length, where the state stops
changing and ``Y`` is zero (a reverse direction then starts at its entry's last valid step, which
is the same mask); ``clip`` bounds every gate's pre-activation; ``layout=1`` swaps the batch and
sequence axes of X, Y, the initial states and the final states.

This module imports nothing of the runtime's, so the kernels may use it without cycles.
"""

from __future__ import annotations

__all__ = ["unroll", "activation_functions", "GATES", "DEFAULT_ACTIVATIONS"]

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
DEFAULT_ACTIVATIONS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}

# (alpha, beta) defaults of the activations that take them, as onnxruntime reads them; each
# activation consumes the next entries of activation_alpha/activation_beta only if it takes them.
_PARAMETERS = {
    "Affine": (1.0, 0.0),
    "LeakyRelu": (0.01, None),
    "ThresholdedRelu": (1.0, None),
    "ScaledTanh": (1.0, 1.0),
    "HardSigmoid": (0.2, 0.5),
    "Elu": (1.0, None),
}
_KNOWN = {"Relu", "Tanh", "Sigmoid", "Softsign", "Softplus"} | set(_PARAMETERS)


def activation_functions(op_type: str, attrs: dict, directions: int) -> list[list[tuple]]:
    """Per direction, the list of ``(name, alpha, beta)`` the recurrence applies (f, g, h order)."""
    per_direction = len(DEFAULT_ACTIVATIONS[op_type])
    names = [name.decode() if isinstance(name, bytes) else str(name) for name in attrs.get("activations") or []]
    if not names:
        names = DEFAULT_ACTIVATIONS[op_type] * directions
    elif len(names) == per_direction and directions == 2:
        names = names * 2
    elif op_type == "RNN" and directions == 1 and len(names) == 2:
        names = names[:1]  # the RNN schema's own default lists one activation per direction of a pair
    if len(names) != per_direction * directions:
        raise ValueError(
            f"{op_type}: {len(names)} activations given; {per_direction * directions} expected "
            f"({per_direction} per direction, {directions} direction(s))"
        )
    alphas = list(attrs.get("activation_alpha") or [])
    betas = list(attrs.get("activation_beta") or [])
    result = []
    for name in names:
        canonical = next((known for known in _KNOWN if known.lower() == name.lower()), None)
        if canonical is None:
            raise ValueError(f"{op_type}: unsupported activation '{name}'")
        alpha, beta = _PARAMETERS.get(canonical, (None, None))
        if alpha is not None and alphas:
            alpha = float(alphas.pop(0))
        if beta is not None and betas:
            beta = float(betas.pop(0))
        result.append((canonical, alpha, beta))
    return [result[d * per_direction : (d + 1) * per_direction] for d in range(directions)]


def _input(inputs, index):
    return inputs[index] if len(inputs) > index else None


def unroll(backend, op_type: str, inputs, attrs: dict, num_outputs: int) -> list:
    """The node's outputs (the first ``num_outputs`` of Y, Y_h, Y_c) computed by unrolling time.

    ``backend`` supplies ``activation(x, name, alpha, beta)``, ``clip(x, bound)``, ``stack(list,
    axis)``, ``unstack(x)`` (``x``'s entries along axis 0), ``split(x, parts, axis)`` (``parts`` equal
    pieces), ``transpose(x, perm)``, ``mask(lengths, t)`` (a ``[batch, 1]`` selector of the entries
    whose length exceeds ``t``), ``where(mask, a, b)``, ``zeros_like(x)`` and ``zeros(shape, like)``.

    The steps and the gates are taken apart by ``unstack`` and ``split`` rather than sliced one at a
    time: recorded, each is one node whose gradient is one Concat, where each slice's gradient is
    a Pad to the whole and a sum with the others' (quadratic in the steps). Slices of the weights
    are taken once, outside the loop, for the same reason.
    """
    x, w, r = inputs[0], inputs[1], inputs[2]
    bias, lengths, initial_h = _input(inputs, 3), _input(inputs, 4), _input(inputs, 5)
    initial_c = _input(inputs, 6) if op_type == "LSTM" else None
    peepholes = _input(inputs, 7) if op_type == "LSTM" else None
    layout = int(attrs.get("layout", 0))
    direction = attrs.get("direction", "forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    directions = 2 if direction == "bidirectional" else 1
    hidden = int(attrs.get("hidden_size") or r.shape[-1])
    clip = attrs.get("clip")
    linear_before_reset = int(attrs.get("linear_before_reset", 0))
    input_forget = int(attrs.get("input_forget", 0))
    functions = activation_functions(op_type, attrs, directions)
    if layout:
        x = backend.transpose(x, (1, 0, 2))
        initial_h = None if initial_h is None else backend.transpose(initial_h, (1, 0, 2))
        initial_c = None if initial_c is None else backend.transpose(initial_c, (1, 0, 2))
    steps, batch = x.shape[0], x.shape[1]
    gates = GATES[op_type]

    def act(value, which):
        name, alpha, beta = which
        return backend.activation(value, name, alpha, beta)

    def clipped(value):
        return value if clip is None else backend.clip(value, float(clip))

    ys, finals_h, finals_c = [], [], []
    for d in range(directions):
        f, g = functions[d][0], functions[d][1] if gates > 1 else None
        h_act = functions[d][2] if op_type == "LSTM" else None
        w_t = backend.transpose(w[d], (1, 0))
        r_t = backend.transpose(r[d], (1, 0))
        if bias is not None:
            wb, rb = backend.split(bias[d], 2, 0)
        else:
            wb = rb = None
        if op_type == "GRU":  # the update and reset gates' recurrent weights, and the candidate's
            r_zr, r_c = r_t[:, : 2 * hidden], r_t[:, 2 * hidden :]
            rb_zr, rb_c = (None, None) if rb is None else (rb[: 2 * hidden], rb[2 * hidden :])
        h = backend.zeros((batch, hidden), x) if initial_h is None else initial_h[d]
        c = None
        if op_type == "LSTM":
            c = backend.zeros((batch, hidden), x) if initial_c is None else initial_c[d]
        if peepholes is not None:
            p_i, p_o, p_f = (peepholes[d][k * hidden : (k + 1) * hidden] for k in range(3))
        reverse = direction == "reverse" or d == 1
        outputs = [None] * steps
        # The input projection does not depend on the state: one product for every step.
        projected = x @ w_t if steps else None
        if wb is not None and steps:
            projected = projected + wb
        projected_steps = backend.unstack(projected) if steps else []
        for t in reversed(range(steps)) if reverse else range(steps):
            xw = projected_steps[t]
            if op_type == "GRU":
                hr = h @ r_zr
                if rb_zr is not None:
                    hr = hr + rb_zr
                x_z, x_r, x_c = backend.split(xw, 3, 1)
                h_z, h_r = backend.split(hr, 2, 1)
                z = act(clipped(x_z + h_z), f)
                reset = act(clipped(x_r + h_r), f)
                if linear_before_reset:
                    recurrent = h @ r_c
                    if rb_c is not None:
                        recurrent = recurrent + rb_c
                    recurrent = reset * recurrent
                else:
                    recurrent = (reset * h) @ r_c
                    if rb_c is not None:
                        recurrent = recurrent + rb_c
                candidate = act(clipped(x_c + recurrent), g)
                new_h = (1 - z) * candidate + z * h
                new_c = None
            else:
                pre = xw + h @ r_t
                if rb is not None:
                    pre = pre + rb
                if op_type == "RNN":
                    new_h = act(clipped(pre), f)
                    new_c = None
                else:
                    i_pre, o_pre, f_pre, c_pre = backend.split(pre, 4, 1)
                    if peepholes is not None:
                        i_pre = i_pre + p_i * c
                        f_pre = f_pre + p_f * c
                    i_gate = act(clipped(i_pre), f)
                    f_gate = 1 - i_gate if input_forget else act(clipped(f_pre), f)
                    new_c = f_gate * c + i_gate * act(clipped(c_pre), g)
                    if peepholes is not None:
                        o_pre = o_pre + p_o * new_c
                    new_h = act(clipped(o_pre), f) * act(new_c, h_act)
            if lengths is None:
                h, c = new_h, new_c
                outputs[t] = new_h
            else:
                valid = backend.mask(lengths, t)
                h = backend.where(valid, new_h, h)
                if new_c is not None:
                    c = backend.where(valid, new_c, c)
                outputs[t] = backend.where(valid, new_h, backend.zeros_like(new_h))
        ys.append(backend.stack(outputs, 0) if steps else backend.zeros((0, batch, hidden), x))
        finals_h.append(h)
        finals_c.append(c)
    y = backend.stack(ys, 1)
    y_h = backend.stack(finals_h, 0)
    results = [y, y_h]
    if op_type == "LSTM":
        results.append(backend.stack(finals_c, 0))
    if layout:
        results = [backend.transpose(results[0], (2, 0, 1, 3))] + [backend.transpose(v, (1, 0, 2)) for v in results[1:]]
    return results[:num_outputs]

"""onnxnn's fused optimizer ops, Momentum, Adam, Adagrad, RMSprop: shape rules and decompositions.

An SGD or Adam step records one node per group of parameters instead of six to fifteen elementwise
nodes per parameter, which keeps a training step's recording and planning short and lets the
kernels update all parameters in one pass. The ops follow ONNX's ``ai.onnx.preview.training``
Momentum and Adam with their hyperparameters as inputs instead of attributes (so they live in
onnxnn's own custom-op domain, ``ai.onnxnn``), so a scheduler changing the learning rate, the
momentum or the weight decay feeds new data to the same compiled step:

    Momentum(R, T, alpha, beta?, norm_coefficient?, X_1..X_n, G_1..G_n, V_1..V_n; mode)
        -> X_1_new..X_n_new, V_1_new..V_n_new

    Adam(R, T, beta1, beta2, epsilon, weight_decay?, X_1..X_n, G_1..G_n, M_1..M_n, V_1..V_n,
         [Vmax_1..Vmax_n]; decoupled_weight_decay, amsgrad, maximize)
        -> X_new.., M_new.., V_new.., [Vmax_new..]

    Adagrad(R, T, lr_decay, epsilon, weight_decay?, X_1..X_n, G_1..G_n, S_1..S_n; maximize)
        -> X_new.., S_new..

    RMSprop(R, alpha, epsilon, weight_decay?, momentum?, X_1..X_n, G_1..G_n, SQ_1..SQ_n,
            [GA_1..GA_n], [B_1..B_n]; centered, maximize)
        -> X_new.., SQ_new.., [GA_new..], [B_new..]

Momentum: an omitted ``beta`` means 1 and an omitted ``norm_coefficient`` means no weight decay
(whether they are given is structure, as PyTorch's ``if weight_decay != 0`` is). float16 and
bfloat16 tensors are updated as ``torch.optim.SGD``'s default (for-loop) step updates them on the
CPU: each of its ops computes in float32 and rounds its result to the tensor's dtype. Its
``buf.mul_(momentum)`` takes ``alpha`` in float32, while its ``add(..., alpha=s)`` ops round ``s`` (R,
beta, norm_coefficient, and alpha in Nesterov's direction) to the tensor's dtype first. With ``r``
that rounding and ``G' = r(G + r(norm_coefficient) * X)``:

    V_new = r(r(V * alpha) + r(beta') * G');   X_new = r(X - r(R) * V_new)
    Nesterov: X_new = r(X - r(R) * r(G' + r(alpha) * V_new))

Rounding ``alpha`` itself instead would bias the velocity: in bfloat16, 0.99 is 0.98828125, and
a constant gradient's velocity would tend to 85 times the gradient instead of 100.

Adam is ``torch.optim.Adam``'s step (not the preview spec's, whose bias corrections and epsilon
differ): its hyperparameters are 0-d tensors of one floating dtype (the optimizer feeds float64,
the Python numbers themselves) and ``T`` is the step count after this step's increment. The
derived factors, ``R / (1 - beta1**T)``, ``sqrt(1 - beta2**T)``, ``1 - beta1``, ``1 - beta2``
and ``1 - R * weight_decay``, are computed in that dtype and then cast to each tensor's dtype, as
PyTorch's host-side step computes them in Python floats. Per tensor, in the tensor's dtype:

    G' = -G if maximize else G;  G' = G' + X * weight_decay  (L2 decay)
    X' = X * (1 - R * weight_decay)  (decoupled decay), else X
    M_new = M + (G' - M) * (1 - beta1);   V_new = V * beta2 + G' * G' * (1 - beta2)
    Vmax_new = max(Vmax, V_new)  (amsgrad; it replaces V_new in the denominator)
    X_new = X' - M_new / (sqrt(V_new) / sqrt(1 - beta2**T) + epsilon) * (R / (1 - beta1**T))

float16 and bfloat16 tensors are updated op for op as the single-tensor step's CPU kernels compute:
``exp_avg.lerp_(grad, 1 - beta1)`` is ``fma(w, G' - M, M)`` (``fma(w - 1, G' - M, G')`` for ``w >=
0.5``), ``.addcmul_(grad, grad, value=1 - beta2)`` is ``fma((1 - beta2) * G', G', r(V * beta2))`` and
``param.addcdiv_(exp_avg, denom, value=-step_size)`` is ``X' + (-step_size * M_new) / denom``, each
in float32 and rounded to the dtype (``r``), as are ``sqrt``, ``/`` and ``add_(eps)``.

Adagrad is ``torch.optim.Adagrad``'s step, its factor ``R / (1 + (T - 1) * lr_decay)`` computed
in the hyperparameters' dtype as Adam's are; per tensor: ``G'`` as Adam's (L2 decay),
``S_new = S + G' * G'`` and ``X_new = X - G' / (sqrt(S_new) + epsilon) * factor``.

RMSprop is ``torch.optim.RMSprop``'s step: the gradient averages (GA) are there when
``centered``, the momentum buffers (B) when ``momentum`` is given (omitted: 0). Per tensor, with
``G'`` as Adam's (L2 decay): ``SQ_new = SQ * alpha + G' * G' * (1 - alpha)``, ``GA_new = GA +
(G' - GA) * (1 - alpha)``, the average ``A = sqrt(SQ_new [- GA_new * GA_new]) + epsilon``,
``B_new = B * momentum + G' / A`` and ``X_new = X - B_new * R`` (without momentum ``X - G' / A * R``).
float16 and bfloat16 tensors round as Momentum's: each of PyTorch's ops (``grad.add(param,
alpha=weight_decay)``, ``square_avg.mul_(alpha)``, ``.addcmul_(grad, grad, value=1 - alpha)``,
``grad_avg.lerp_``, ``sqrt``, ``add_(eps)``, ``buf.mul_(momentum)``, ``.addcdiv_``, ``param.add_(buf,
alpha=-lr)`` or ``param.addcdiv_(grad, avg, value=-lr)``) computes in float32 and rounds to the
tensor's dtype; ``weight_decay``, ``epsilon`` and R where it multiplies B are rounded to the dtype
first, the others (``alpha``, ``1 - alpha``, ``momentum``, R where it multiplies G' / A) are float32.
``addcmul_`` and ``lerp_`` are fused multiply-adds and ``addcdiv_`` is ``X + (-R * G') / A``, as Adam's.

The float16/bfloat16 forms live in ``training_half_precision.py``. An omitted ``weight_decay`` means
none. onnxruntime lacks these ops, so ``build_model`` writes them
as standard ONNX through their decompositions; onnxnn's kernels (``kernels/training.py``) run them
directly, op for op the same arithmetic.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from ...ir import dtypes
from ...ir.registry import decompositions, non_differentiable, shape_rules
from ...ir.domains import (
    ADAGRAD_TENSORS_START,
    ADAM_TENSORS_START,
    MOMENTUM_TENSORS_START,
    RMSPROP_TENSORS_START,
    TRAINING_DOMAIN,
)
from .opmath import REDUCED_FLOATS
from .training_half_precision import (
    Opmath,
    half_precision_scalars,
    low_precision_adam,
    low_precision_momentum,
    low_precision_rmsprop,
)

__all__ = [
    "TRAINING_DOMAIN",
    "MOMENTUM_TENSORS_START",
    "ADAM_TENSORS_START",
    "ADAGRAD_TENSORS_START",
    "RMSPROP_TENSORS_START",
]


@shape_rules.register("Momentum", domain=TRAINING_DOMAIN)
def _momentum_shape(inputs, attrs):
    tensors = inputs[MOMENTUM_TENSORS_START:]
    if len(tensors) == 0 or len(tensors) % 3:
        raise RuntimeError(
            f"Momentum takes R, T, alpha, beta, norm_coefficient and then X, G and V for each "
            f"tensor, got {len(inputs)} inputs"
        )
    if attrs.get("mode", "standard") not in ("standard", "nesterov"):
        raise RuntimeError(f"Momentum: mode must be 'standard' or 'nesterov', got {attrs.get('mode')!r}")
    count = len(tensors) // 3
    for index in range(count):
        x, g, v = tensors[index], tensors[count + index], tensors[2 * count + index]
        if not (x.shape == g.shape == v.shape) or not (x.dtype is g.dtype is v.dtype):
            raise RuntimeError(
                f"Momentum: tensor {index} has X {x.dtype.name}{list(x.shape)}, "
                f"G {g.dtype.name}{list(g.shape)} and V {v.dtype.name}{list(v.shape)}; "
                "they must agree"
            )
    return [(x.shape, x.dtype) for x in tensors[:count]] + [(v.shape, v.dtype) for v in tensors[2 * count :]]


non_differentiable.mark("Momentum", domain=TRAINING_DOMAIN)


@decompositions.register("Momentum", domain=TRAINING_DOMAIN)
def _momentum_decomposition(node, input_names: list, output_names: list, fresh_name):
    """Momentum as Mul/Add/Sub nodes per tensor; hyperparameters are cast once per tensor dtype."""
    learning_rate, update_count, alpha, beta, norm_coefficient = input_names[:MOMENTUM_TENSORS_START]
    hyperparameter_dtype = node.inputs[0].dtype
    tensors = node.inputs[MOMENTUM_TENSORS_START:]
    names = input_names[MOMENTUM_TENSORS_START:]
    count = len(tensors) // 3
    nesterov = node.attrs.get("mode", "standard") == "nesterov"
    nodes: list = []
    initializers: list = []
    emit = node_emitter(nodes, fresh_name)
    typed = hyperparameter_caster(emit, hyperparameter_dtype)

    low_precision_scalars: dict = {}
    beta_adjusted = None
    if beta:
        # beta applies from the second update on (T > 0): the first one takes the whole gradient.
        one = fresh_name("one")
        initializers.append(onnx.numpy_helper.from_array(np.array(1, hyperparameter_dtype.numpy_dtype), one))
        zero = int64_initializers(initializers, fresh_name)(0)
        beta_adjusted = emit("Where", emit("Greater", update_count, zero), beta, one)
    for index in range(count):
        dtype = tensors[index].dtype
        x_name, g_name, v_name = names[index], names[count + index], names[2 * count + index]
        if dtype in REDUCED_FLOATS:
            if dtype not in low_precision_scalars:
                hyperparameters = {
                    "R": (learning_rate, True),
                    "alpha": (alpha, False),
                    "rounded alpha": (alpha, True),
                    "beta": (beta_adjusted, True),
                    "norm_coefficient": (norm_coefficient, True),
                }
                low_precision_scalars[dtype] = half_precision_scalars(emit, typed, dtype, hyperparameters)
            outputs = (output_names[index], output_names[count + index])
            inputs = (x_name, g_name, v_name)
            low_precision_momentum(emit, dtype, low_precision_scalars[dtype], inputs, outputs, nesterov)
            continue
        gradient = g_name
        if norm_coefficient:
            gradient = emit("Add", emit("Mul", x_name, typed(norm_coefficient, dtype)), g_name)
        scaled = gradient if beta_adjusted is None else emit("Mul", gradient, typed(beta_adjusted, dtype))
        momentum = typed(alpha, dtype)
        velocity = emit("Add", emit("Mul", v_name, momentum), scaled, output=output_names[count + index])
        direction = velocity
        if nesterov:
            direction = emit("Add", gradient, emit("Mul", velocity, momentum))
        emit("Sub", x_name, emit("Mul", typed(learning_rate, dtype), direction), output=output_names[index])
    return nodes, initializers


# ---------------------------------------------------------------------- Adam

ADAM_HYPERPARAMETERS = ("R", "T", "beta1", "beta2", "epsilon", "weight_decay")


def adam_tensor_lists(attrs: dict) -> tuple:
    """The lists of tensors an Adam node takes after its hyperparameters: X, G, M, V (and Vmax)."""
    return ("X", "G", "M", "V", "Vmax") if attrs.get("amsgrad", 0) else ("X", "G", "M", "V")


@shape_rules.register("Adam", domain=TRAINING_DOMAIN)
def _adam_shape(inputs, attrs):
    return fused_update_shapes("Adam", inputs, ADAM_HYPERPARAMETERS, {"weight_decay"}, adam_tensor_lists(attrs))


def fused_update_shapes(op_type: str, inputs, hyperparameter_names: tuple, optional: set, list_names: tuple):
    """The shape rule of a fused optimizer update: its outputs are the new X and states (every list but G).

    The inputs are 0-d hyperparameters of one floating dtype (those in ``optional`` may be omitted),
    then one list of tensors per name in ``list_names``, where the tensors of one index agree.
    """
    start = len(hyperparameter_names)
    hyperparameters, tensors = inputs[:start], inputs[start:]
    lists = len(list_names)
    if len(hyperparameters) < start or len(tensors) == 0 or len(tensors) % lists:
        raise RuntimeError(
            f"{op_type} takes {', '.join(hyperparameter_names)} and then "
            f"{', '.join(list_names[:-1])} and {list_names[-1]} for each tensor, "
            f"got {len(inputs)} inputs"
        )
    missing = [
        name for name, value in zip(hyperparameter_names, hyperparameters) if value is None and name not in optional
    ]
    if missing:
        raise RuntimeError(f"{op_type}: {', '.join(missing)} omitted; only {' and '.join(sorted(optional))} may be")
    given = [value for value in hyperparameters if value is not None]
    hyperparameter_dtype = hyperparameters[0].dtype
    for value in given:
        if value.shape != () or value.dtype is not hyperparameter_dtype or not value.dtype.is_floating_point:
            raise RuntimeError(
                f"{op_type}: the hyperparameters must be 0-d tensors of one floating dtype, got "
                f"{', '.join(f'{v.dtype.name}{list(v.shape)}' for v in given)}"
            )
    count = len(tensors) // lists
    for index in range(count):
        group = tensors[index::count]
        if any(t.shape != group[0].shape or t.dtype is not group[0].dtype for t in group):
            described = ", ".join(f"{name} {t.dtype.name}{list(t.shape)}" for name, t in zip(list_names, group))
            raise RuntimeError(f"{op_type}: tensor {index} has {described}; they must agree")
    outputs = tensors[:count] + tensors[2 * count :]  # X, then the states (G is only read)
    return [(t.shape, t.dtype) for t in outputs]


non_differentiable.mark("Adam", domain=TRAINING_DOMAIN)


@decompositions.register("Adam", domain=TRAINING_DOMAIN)
def _adam_decomposition(node, input_names: list, output_names: list, fresh_name):
    """Adam as standard nodes: the factors once in the hyperparameters' dtype, then ~14 nodes per tensor."""
    learning_rate, step, beta1, beta2, epsilon, weight_decay = input_names[:ADAM_TENSORS_START]
    hyperparameter_dtype = node.inputs[0].dtype
    tensors = node.inputs[ADAM_TENSORS_START:]
    names = input_names[ADAM_TENSORS_START:]
    amsgrad = bool(node.attrs.get("amsgrad", 0))
    decoupled = bool(node.attrs.get("decoupled_weight_decay", 0))
    maximize = bool(node.attrs.get("maximize", 0))
    count = len(tensors) // len(adam_tensor_lists(node.attrs))
    nodes: list = []
    initializers: list = []
    emit = node_emitter(nodes, fresh_name)
    one = fresh_name("one")
    initializers.append(onnx.numpy_helper.from_array(np.array(1, hyperparameter_dtype.numpy_dtype), one))
    factors = {
        "1-beta1": emit("Sub", one, beta1),
        "beta2": beta2,
        "1-beta2": emit("Sub", one, beta2),
        "epsilon": epsilon,
        "step_size": emit("Div", learning_rate, emit("Sub", one, emit("Pow", beta1, step))),
        "bias_correction2_sqrt": emit("Sqrt", emit("Sub", one, emit("Pow", beta2, step))),
    }
    if weight_decay:
        factors["decay"] = emit("Sub", one, emit("Mul", learning_rate, weight_decay)) if decoupled else weight_decay
    typed = hyperparameter_caster(emit, hyperparameter_dtype)
    opmath = Opmath(emit, initializers, fresh_name)
    for index in range(count):
        dtype = tensors[index].dtype
        x, g, m, v = names[index], names[count + index], names[2 * count + index], names[3 * count + index]
        if dtype in REDUCED_FLOATS:
            factor = {name: typed(value, dtypes.float32) for name, value in factors.items()}
            # ``add_(eps)`` and ``add(param, alpha=weight_decay)`` round their scalar to the dtype first.
            for name in ("epsilon",) if decoupled else ("epsilon", "decay"):
                if name in factor:
                    factor[name] = typed(typed(factor[name], dtype), dtypes.float32)
            new_names = [output_names[index + count * position] for position in range(4 if amsgrad else 3)]
            v_max = names[4 * count + index] if amsgrad else None
            low_precision_adam(emit, opmath, dtype, factor, (x, g, m, v, v_max), new_names, decoupled, maximize)
            continue
        factor = {name: typed(value, dtype) for name, value in factors.items()}
        gradient = emit("Neg", g) if maximize else g
        if weight_decay and not decoupled:
            gradient = emit("Add", gradient, emit("Mul", x, factor["decay"]))
        elif weight_decay:
            x = emit("Mul", x, factor["decay"])
        new_m = emit(
            "Add", m, emit("Mul", emit("Sub", gradient, m), factor["1-beta1"]), output=output_names[count + index]
        )
        new_v = emit(
            "Add",
            emit("Mul", v, factor["beta2"]),
            emit("Mul", emit("Mul", gradient, gradient), factor["1-beta2"]),
            output=output_names[2 * count + index],
        )
        second_moment = new_v
        if amsgrad:
            second_moment = emit("Max", names[4 * count + index], new_v, output=output_names[3 * count + index])
        denominator = emit(
            "Add", emit("Div", emit("Sqrt", second_moment), factor["bias_correction2_sqrt"]), factor["epsilon"]
        )
        emit("Sub", x, emit("Mul", emit("Div", new_m, denominator), factor["step_size"]), output=output_names[index])
    return nodes, initializers


# ---------------------------------------------------------------------- Adagrad

ADAGRAD_HYPERPARAMETERS = ("R", "T", "lr_decay", "epsilon", "weight_decay")
ADAGRAD_TENSOR_LISTS = ("X", "G", "S")


@shape_rules.register("Adagrad", domain=TRAINING_DOMAIN)
def _adagrad_shape(inputs, attrs):
    return fused_update_shapes("Adagrad", inputs, ADAGRAD_HYPERPARAMETERS, {"weight_decay"}, ADAGRAD_TENSOR_LISTS)


non_differentiable.mark("Adagrad", domain=TRAINING_DOMAIN)


@decompositions.register("Adagrad", domain=TRAINING_DOMAIN)
def _adagrad_decomposition(node, input_names: list, output_names: list, fresh_name):
    """Adagrad as standard nodes: the decayed learning rate once, then 6 to 9 nodes per tensor."""
    learning_rate, step, lr_decay, epsilon, weight_decay = input_names[:ADAGRAD_TENSORS_START]
    hyperparameter_dtype = node.inputs[0].dtype
    tensors = node.inputs[ADAGRAD_TENSORS_START:]
    names = input_names[ADAGRAD_TENSORS_START:]
    maximize = bool(node.attrs.get("maximize", 0))
    count = len(tensors) // len(ADAGRAD_TENSOR_LISTS)
    nodes: list = []
    initializers: list = []
    emit = node_emitter(nodes, fresh_name)
    one = fresh_name("one")
    initializers.append(onnx.numpy_helper.from_array(np.array(1, hyperparameter_dtype.numpy_dtype), one))
    factors = {
        "epsilon": epsilon,
        "clr": emit("Div", learning_rate, emit("Add", one, emit("Mul", emit("Sub", step, one), lr_decay))),
    }
    if weight_decay:
        factors["weight_decay"] = weight_decay
    typed = hyperparameter_caster(emit, hyperparameter_dtype)
    for index in range(count):
        x, g, state_sum = names[index], names[count + index], names[2 * count + index]
        factor = {name: typed(value, tensors[index].dtype) for name, value in factors.items()}
        gradient = emit("Neg", g) if maximize else g
        if weight_decay:
            gradient = emit("Add", gradient, emit("Mul", x, factor["weight_decay"]))
        new_sum = emit("Add", state_sum, emit("Mul", gradient, gradient), output=output_names[count + index])
        std = emit("Add", emit("Sqrt", new_sum), factor["epsilon"])
        emit("Sub", x, emit("Mul", emit("Div", gradient, std), factor["clr"]), output=output_names[index])
    return nodes, initializers


# ---------------------------------------------------------------------- RMSprop

RMSPROP_HYPERPARAMETERS = ("R", "alpha", "epsilon", "weight_decay", "momentum")


def rmsprop_tensor_lists(inputs, attrs: dict) -> tuple:
    """The lists of tensors an RMSprop node takes: X, G, SQ, GA when centered, B with a momentum input."""
    with_momentum = len(inputs) > RMSPROP_TENSORS_START - 1 and inputs[RMSPROP_TENSORS_START - 1] is not None
    return ("X", "G", "SQ") + (("GA",) if attrs.get("centered", 0) else ()) + (("B",) if with_momentum else ())


@shape_rules.register("RMSprop", domain=TRAINING_DOMAIN)
def _rmsprop_shape(inputs, attrs):
    return fused_update_shapes(
        "RMSprop", inputs, RMSPROP_HYPERPARAMETERS, {"weight_decay", "momentum"}, rmsprop_tensor_lists(inputs, attrs)
    )


non_differentiable.mark("RMSprop", domain=TRAINING_DOMAIN)


@decompositions.register("RMSprop", domain=TRAINING_DOMAIN)
def _rmsprop_decomposition(node, input_names: list, output_names: list, fresh_name):
    """RMSprop as standard nodes: ``1 - alpha`` once, then 7 to 14 nodes per tensor."""
    learning_rate, alpha, epsilon, weight_decay, momentum = input_names[:RMSPROP_TENSORS_START]
    hyperparameter_dtype = node.inputs[0].dtype
    tensors = node.inputs[RMSPROP_TENSORS_START:]
    names = input_names[RMSPROP_TENSORS_START:]
    lists = rmsprop_tensor_lists(node.inputs, node.attrs)
    centered, maximize = bool(node.attrs.get("centered", 0)), bool(node.attrs.get("maximize", 0))
    count = len(tensors) // len(lists)
    nodes: list = []
    initializers: list = []
    emit = node_emitter(nodes, fresh_name)
    one = fresh_name("one")
    initializers.append(onnx.numpy_helper.from_array(np.array(1, hyperparameter_dtype.numpy_dtype), one))
    factors = {"lr": learning_rate, "alpha": alpha, "1-alpha": emit("Sub", one, alpha), "epsilon": epsilon}
    if weight_decay:
        factors["weight_decay"] = weight_decay
    if momentum:
        factors["momentum"] = momentum
    typed = hyperparameter_caster(emit, hyperparameter_dtype)
    low_precision_scalars: dict = {}
    opmath = Opmath(emit, initializers, fresh_name)
    for index in range(count):
        named = {name: names[kind * count + index] for kind, name in enumerate(lists)}
        new_name = {name: output_names[kind * count + index] for kind, name in enumerate(n for n in lists if n != "G")}
        dtype = tensors[index].dtype
        if dtype in REDUCED_FLOATS:
            if dtype not in low_precision_scalars:
                hyperparameters = {
                    "lr": (learning_rate, False),
                    "rounded lr": (learning_rate, True),
                    "alpha": (alpha, False),
                    "1-alpha": (factors["1-alpha"], False),
                    "epsilon": (epsilon, True),
                    "weight_decay": (weight_decay, True),
                    "momentum": (momentum, False),
                }
                low_precision_scalars[dtype] = half_precision_scalars(emit, typed, dtype, hyperparameters)
            scalars = low_precision_scalars[dtype]
            low_precision_rmsprop(emit, opmath, dtype, scalars, (named, new_name), centered, maximize)
            continue
        factor = {name: typed(value, dtype) for name, value in factors.items()}
        x = named["X"]
        gradient = emit("Neg", named["G"]) if maximize else named["G"]
        if weight_decay:
            gradient = emit("Add", gradient, emit("Mul", x, factor["weight_decay"]))
        square_avg = emit(
            "Add",
            emit("Mul", named["SQ"], factor["alpha"]),
            emit("Mul", emit("Mul", gradient, gradient), factor["1-alpha"]),
            output=new_name["SQ"],
        )
        if centered:
            grad_avg = emit(
                "Add",
                named["GA"],
                emit("Mul", emit("Sub", gradient, named["GA"]), factor["1-alpha"]),
                output=new_name["GA"],
            )
            average = emit("Sqrt", emit("Sub", square_avg, emit("Mul", grad_avg, grad_avg)))
        else:
            average = emit("Sqrt", square_avg)
        average = emit("Add", average, factor["epsilon"])
        if momentum:
            buffer = emit(
                "Add", emit("Mul", named["B"], factor["momentum"]), emit("Div", gradient, average), output=new_name["B"]
            )
            emit("Sub", x, emit("Mul", buffer, factor["lr"]), output=new_name["X"])
        else:
            emit("Sub", x, emit("Mul", emit("Div", gradient, average), factor["lr"]), output=new_name["X"])
    return nodes, initializers


def node_emitter(nodes: list, fresh_name):
    """``emit(op_type, *inputs, output=None, **attributes)``: appends one node to ``nodes``, returns its output."""

    def emit(op_type: str, *inputs: str, output: str | None = None, **attributes) -> str:
        output = output or fresh_name(op_type)
        nodes.append(helper.make_node(op_type, list(inputs), [output], name=fresh_name(op_type), **attributes))
        return output

    return emit


def int64_initializers(initializers: list, fresh_name):
    """``constant(values)``: appends an int64 initializer holding ``values`` to ``initializers``, returns its name."""

    def constant(values) -> str:
        name = fresh_name("constant")
        initializers.append(onnx.numpy_helper.from_array(np.array(values, np.int64), name))
        return name

    return constant


def hyperparameter_caster(emit, hyperparameter_dtype):
    """``typed(name, dtype)``: a hyperparameter in a tensor's dtype, cast once per (name, dtype) where they differ."""
    as_dtype: dict = {}

    def typed(name: str, dtype) -> str:
        if dtype is hyperparameter_dtype:
            return name
        if (name, dtype) not in as_dtype:
            as_dtype[(name, dtype)] = emit("Cast", name, to=dtype.onnx_type)
        return as_dtype[(name, dtype)]

    return typed

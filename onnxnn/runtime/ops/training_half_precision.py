"""float16 and bfloat16 updates of the fused optimizer ops (``training.py``), op for op as PyTorch's
single-tensor steps compute them on the CPU: each op in float32 ("opmath"), its result rounded to the
tensor's dtype, with the hyperparameters PyTorch reads at float32 kept there and those it rounds
(``add``'s alpha) rounded first; ``lerp_`` and ``addcmul_`` as the fused multiply-adds PyTorch's
vectorized kernels are (``Opmath``). ``training.py``'s module doc writes out each op's formulas.
"""

from __future__ import annotations

import numpy as np
import onnx

from ...ir import dtypes

__all__ = [
    "half_precision_scalars",
    "half_casts",
    "low_precision_momentum",
    "low_precision_adam",
    "Opmath",
    "low_precision_rmsprop",
]


def half_precision_scalars(emit, typed, dtype, hyperparameters: dict) -> dict:
    """The hyperparameters ``{key: (name, rounded)}`` as float32 names (None where omitted) for the
    float16/bfloat16 updates of ``dtype``; the ``rounded`` ones rounded to ``dtype`` on the way, as
    PyTorch rounds the scalar of ``add``: to float32, then to the tensor's dtype."""
    float32 = dtypes.float32
    scalars: dict = {}
    for key, (name, rounded) in hyperparameters.items():
        scalars[key] = typed(name, float32) if name else None
        if name and rounded:
            scalars[key] = emit("Cast", emit("Cast", scalars[key], to=dtype.onnx_type), to=float32.onnx_type)
    return scalars


def half_casts(emit, dtype):
    """``(wide, rounded, narrow)`` for a float16/bfloat16 update written in float32: a name cast to
    float32; a float32 result rounded to ``dtype`` and back (one of PyTorch's ops); a float32 result
    cast to ``dtype`` as the node's ``output``."""
    float32 = dtypes.float32.onnx_type

    def wide(name: str) -> str:
        return emit("Cast", name, to=float32)

    def rounded(name: str) -> str:
        return wide(emit("Cast", name, to=dtype.onnx_type))

    def narrow(name: str, output: str) -> str:
        return emit("Cast", name, to=dtype.onnx_type, output=output)

    return wide, rounded, narrow


def low_precision_momentum(emit, dtype, scalars: dict, inputs, outputs, nesterov: bool) -> None:
    """One float16/bfloat16 tensor's Momentum update: float32 ops, each of PyTorch's rounded to ``dtype``."""
    learning_rate, alpha, rounded_alpha = scalars["R"], scalars["alpha"], scalars["rounded alpha"]
    beta, norm_coefficient = scalars["beta"], scalars["norm_coefficient"]
    wide, rounded, narrow = half_casts(emit, dtype)
    x, g, v = (wide(name) for name in inputs)
    gradient = g
    if norm_coefficient:
        gradient = rounded(emit("Add", g, emit("Mul", x, norm_coefficient)))
    velocity = rounded(emit("Mul", v, alpha))
    scaled = emit("Mul", gradient, beta) if beta else gradient
    new_velocity = narrow(emit("Add", velocity, scaled), outputs[1])
    direction = wide(new_velocity)
    if nesterov:
        direction = rounded(emit("Add", gradient, emit("Mul", direction, rounded_alpha)))
    step = emit("Mul", learning_rate, direction)
    narrow(emit("Sub", x, step), outputs[0])


def low_precision_adam(emit, opmath, dtype, factor: dict, inputs: tuple, outputs: list, decoupled, maximize):
    """One float16/bfloat16 tensor's Adam update as PyTorch's single-tensor step computes it: float32
    ops and factors (its "opmath"), each of its ops rounded to ``dtype`` (``lerp_``, ``mul_``, ``addcmul_``,
    ``sqrt``, ``/``, ``add_``, ``addcdiv_``). Factors rounded to the dtype first bias the moments: bfloat16's
    0.99 is 0.98828125, and the second moment settled 15% low."""
    wide, rounded, narrow = half_casts(emit, dtype)
    x_name, g_name, m_name, v_name, v_max_name = inputs
    x, gradient = wide(x_name), wide(g_name)
    if maximize:
        gradient = emit("Neg", gradient)
    if "decay" in factor and decoupled:
        x = rounded(emit("Mul", x, factor["decay"]))  # param.mul_(1 - lr * weight_decay)
    elif "decay" in factor:
        gradient = rounded(emit("Add", gradient, emit("Mul", factor["decay"], x)))  # grad.add(param, alpha=wd)
    new_m = wide(narrow(opmath.lerp(wide(m_name), gradient, factor["1-beta1"]), outputs[1]))
    square_avg = rounded(emit("Mul", wide(v_name), factor["beta2"]))
    scaled = emit("Mul", factor["1-beta2"], gradient)  # .addcmul_(grad, grad, value=1 - beta2)
    new_v = narrow(opmath.fused_multiply_add(scaled, gradient, square_avg), outputs[2])
    second_moment = wide(new_v)
    if v_max_name is not None:
        second_moment = wide(emit("Max", v_max_name, new_v, output=outputs[3]))
    root = rounded(emit("Sqrt", second_moment))
    denominator = rounded(emit("Add", rounded(emit("Div", root, factor["bias_correction2_sqrt"])), factor["epsilon"]))
    # param.addcdiv_(exp_avg, denom, value=-step_size): ``param + (value * exp_avg) / denom``
    step = emit("Div", emit("Mul", emit("Neg", factor["step_size"]), new_m), denominator)
    narrow(emit("Add", x, step), outputs[0])


class Opmath:
    """PyTorch's fused multiply-adds on float32 names, for float16/bfloat16 updates: its vectorized CPU
    kernels of ``lerp_`` and ``addcmul_`` round ``a * b + c`` once, not the product and then the sum."""

    def __init__(self, emit, initializers: list, fresh_name) -> None:
        self.emit, self.initializers, self.fresh_name = emit, initializers, fresh_name
        self.constants: dict = {}  # float32 initializers by value, made on first use
        self.lerp_weights: dict = {}  # weight name -> (whether it is small, the coefficient)

    def constant(self, value: float) -> str:
        if value not in self.constants:
            name = self.constants[value] = self.fresh_name("opmath_constant")
            self.initializers.append(onnx.numpy_helper.from_array(np.array(value, np.float32), name))
        return self.constants[value]

    def fused_multiply_add(self, first: str, second: str, addend: str) -> str:
        """``first * second + addend`` rounded once to float32: computed in float64, where the product of
        two float32 values is exact (the sum's two roundings differ from one only at a float32 tie,
        which float64's 29 extra bits make vanishingly rare)."""
        emit, float64 = self.emit, dtypes.float64.onnx_type
        product = emit("Mul", emit("Cast", first, to=float64), emit("Cast", second, to=float64))
        return emit("Cast", emit("Add", product, emit("Cast", addend, to=float64)), to=dtypes.float32.onnx_type)

    def lerp(self, start: str, end: str, weight: str) -> str:
        """``start.lerp_(end, weight)``: ``fma(weight, end - start, start)`` where ``|weight| < 0.5``, else
        ``fma(weight - 1, end - start, end)`` (so a weight of 1 gives ``end`` exactly); ``weight`` is fed."""
        emit = self.emit
        if weight not in self.lerp_weights:
            small = emit("Less", emit("Abs", weight), self.constant(0.5))
            coefficient = emit("Where", small, weight, emit("Sub", weight, self.constant(1.0)))
            self.lerp_weights[weight] = (small, coefficient)
        small, coefficient = self.lerp_weights[weight]
        difference = emit("Sub", end, start)
        return self.fused_multiply_add(coefficient, difference, emit("Where", small, start, end))


def low_precision_rmsprop(emit, opmath, dtype, scalars: dict, names: tuple, centered, maximize) -> None:
    """One float16/bfloat16 tensor's RMSprop update: float32 ops, each of PyTorch's rounded to ``dtype``;
    ``names``: the inputs' and the outputs' names by list (X, G, SQ, GA, B)."""
    named, new_name = names
    wide, rounded, narrow = half_casts(emit, dtype)
    x = wide(named["X"])
    gradient = emit("Neg", wide(named["G"])) if maximize else wide(named["G"])
    if scalars["weight_decay"]:
        gradient = rounded(emit("Add", gradient, emit("Mul", x, scalars["weight_decay"])))
    # square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
    square_avg = rounded(emit("Mul", wide(named["SQ"]), scalars["alpha"]))
    scaled = emit("Mul", scalars["1-alpha"], gradient)
    square_avg = wide(narrow(opmath.fused_multiply_add(scaled, gradient, square_avg), new_name["SQ"]))
    if centered:
        grad_avg = opmath.lerp(wide(named["GA"]), gradient, scalars["1-alpha"])
        grad_avg = wide(narrow(grad_avg, new_name["GA"]))
        # square_avg.addcmul(grad_avg, grad_avg, value=-1): the product of two float16/bfloat16 values
        # is exact in float32, so the fused multiply-add's one rounding is the difference's.
        variance = rounded(emit("Sub", square_avg, emit("Mul", grad_avg, grad_avg)))
        average = rounded(emit("Sqrt", variance))
    else:
        average = rounded(emit("Sqrt", square_avg))
    average = rounded(emit("Add", average, scalars["epsilon"]))
    if scalars["momentum"]:
        # buf.mul_(momentum).addcdiv_(grad, avg), then param.add_(buf, alpha=-lr)
        buffer = rounded(emit("Mul", wide(named["B"]), scalars["momentum"]))
        buffer = wide(narrow(emit("Add", buffer, emit("Div", gradient, average)), new_name["B"]))
        narrow(emit("Sub", x, emit("Mul", scalars["rounded lr"], buffer)), new_name["X"])
    else:
        # param.addcdiv_(grad, avg, value=-lr): ``param + (value * grad) / avg``
        step = emit("Div", emit("Mul", emit("Neg", scalars["lr"]), gradient), average)
        narrow(emit("Add", x, step), new_name["X"])

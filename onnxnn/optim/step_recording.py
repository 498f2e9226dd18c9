"""Recording an optimizer's step: the helpers every functional step (``sgd``, ``adam``, ...) shares.

Hyperparameters become fed 0-d values (one per distinct value, so a scheduler changing ``lr``
reuses the compiled session), updates are recorded as nodes on values (or one fused node per
dtype, device and step count), and the ``step`` counter is counted on the host.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..ir import dtypes
from ..ir.caches import register_cache
from ..ir.device import CPU
from ..ir.domains import TRAINING_DOMAIN
from ..ir.graph import Value, constant
from ..ir.update_formulas import FUSED_UPDATES
from ..runtime.internal import full_tensor, rebind, record_op, record_update, tensor_of, value_of
from ..runtime.tensor import Tensor


def _hyperparameter(name: str, value, like: Tensor) -> Tensor:
    """A Python hyperparameter of a functional step as a 0-d tensor fed to the step's graph.

    Each distinct (name, value, dtype, device) is one graph input, shared by every parameter that
    uses it. Values are data, not structure: a scheduler changing ``lr`` reuses the session.
    """
    return tensor_of(_hyperparameter_value(name, value, value_of(like)))


def _hyperparameter_value(name: str, value, like: Value) -> Value:
    """:func:`_hyperparameter` as a realized 0-d Value of ``like``'s dtype and device."""
    return _hyperparameter_scalar(name, value, like.dtype, like.device)


def _hyperparameter_scalar(name: str, value, dtype: dtypes.dtype, device) -> Value:
    """A hyperparameter as a realized 0-d Value of ``dtype`` on ``device``.

    Values never change, so the same ones serve every step until a scheduler changes them.
    """
    value = float(value)
    key = (name, value, dtype, device)
    scalar = _HYPERPARAMETER_VALUES.get(key)
    if scalar is None:
        if len(_HYPERPARAMETER_VALUES) >= 1024:  # schedulers and step counts make new values every step
            _HYPERPARAMETER_VALUES.clear()
        scalar = _HYPERPARAMETER_VALUES[key] = constant(np.array(value, dtype=dtype.numpy_dtype), dtype, device)
    return scalar


_HYPERPARAMETER_VALUES: dict = {}
register_cache("optimizer hyperparameter constants", _HYPERPARAMETER_VALUES.clear)


class OpmathStep:
    """One float16/bfloat16 parameter's update written op for op as PyTorch's CPU kernels compute it.

    Each of PyTorch's ops reads its half-precision operands into float32 ("opmath"), computes there,
    and rounds its result to the parameter's dtype once. A Python scalar that multiplies or divides
    (``mul_(beta2)``, ``lerp_``'s weight, ``addcmul_``'s and ``addcdiv_``'s ``value``) is read at
    float32; one that is added (``add_(eps)``, ``add(param, alpha=weight_decay)``'s alpha) is rounded
    to the dtype first. Making every hyperparameter a constant of the parameter's dtype instead
    biases the running averages: bfloat16's 0.99 is 0.98828125, and a second moment settled 15% low.

    Every tensor here is a float32 tensor holding a value of the parameter's dtype (each method
    returns one rounded so); :meth:`store` writes one back to a state or the parameter.
    """

    def __init__(self, like: Tensor) -> None:
        self.dtype = like.dtype
        self.device = like.device

    def load(self, tensor: Tensor) -> Tensor:
        """A tensor of the parameter's dtype as float32 (exactly)."""
        return tensor.to(dtypes.float32)

    def rounded(self, result: Tensor) -> Tensor:
        """A float32 result rounded to the parameter's dtype: the end of one of PyTorch's ops."""
        return result.to(self.dtype).to(dtypes.float32)

    def store(self, target: Tensor, result: Tensor) -> None:
        """Rebinds ``target`` (a state or the parameter) to a rounded ``result``."""
        record_update(target, result.to(self.dtype))

    def number(self, name: str, value) -> Tensor:
        """A Python scalar as the float32 value PyTorch's kernels multiply or divide by."""
        return tensor_of(_hyperparameter_scalar(name, float(np.float32(float(value))), dtypes.float32, self.device))

    def rounded_number(self, name: str, value) -> Tensor:
        """A Python scalar rounded to the parameter's dtype (through float32, as ``Scalar.to<T>()``)."""
        rounded = float(np.float32(float(value)).astype(self.dtype.numpy_dtype))
        return tensor_of(_hyperparameter_scalar(name, rounded, dtypes.float32, self.device))

    def multiply(self, tensor: Tensor, name: str, value) -> Tensor:
        """``tensor * value`` (``mul``, ``mul_``) with a Python scalar."""
        return self.rounded(tensor * self.number(name, value))

    def divide(self, tensor: Tensor, name: str, value) -> Tensor:
        """``tensor / value`` with a Python scalar."""
        return self.rounded(tensor / self.number(name, value))

    def add(self, tensor: Tensor, other: Tensor, name: str, alpha) -> Tensor:
        """``tensor.add(other, alpha=alpha)``: ``alpha`` rounded to the dtype, the product exact in float32."""
        return self.rounded(tensor + self.rounded_number(name, alpha) * other)

    def add_number(self, tensor: Tensor, name: str, value) -> Tensor:
        """``tensor.add(value)`` with a Python scalar, which is rounded to the dtype first."""
        return self.rounded(tensor + self.rounded_number(name, value))

    def sqrt(self, tensor: Tensor) -> Tensor:
        return self.rounded(tensor.sqrt())

    def lerp(self, start: Tensor, end: Tensor, name: str, weight) -> Tensor:
        """``start.lerp(end, weight)``: PyTorch's kernel is ``fma(weight, end - start, start)``."""
        return self.rounded(_fused_multiply_add(self.number(name, weight), end - start, start))

    def addcmul(self, start: Tensor, first: Tensor, second: Tensor, name: str, value) -> Tensor:
        """``start.addcmul(first, second, value=value)``: PyTorch's kernel is ``fma(value * first, second, start)``."""
        return self.rounded(_fused_multiply_add(self.number(name, value) * first, second, start))

    def decay(self, weights: Tensor, gradient: Tensor, lr: float, weight_decay: float, decoupled: bool) -> tuple:
        """``(weights, gradient)`` after PyTorch's weight decay: decoupled, ``param.mul_(1 - lr * weight_decay)``,
        or L2, ``grad.add(param, alpha=weight_decay)``."""
        if weight_decay == 0:
            return weights, gradient
        if decoupled:
            return self.multiply(weights, "1-lr*weight_decay", 1 - lr * weight_decay), gradient
        return weights, self.add(gradient, weights, "weight_decay", weight_decay)

    def moments(self, exp_avg: Tensor, exp_avg_sq: Tensor, gradient: Tensor, beta1: float, beta2: float) -> tuple:
        """Adam's moments: ``exp_avg.lerp_(grad, 1 - beta1)`` and
        ``exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)``."""
        first = self.lerp(self.load(exp_avg), gradient, "1-beta1", 1 - beta1)
        second = self.multiply(self.load(exp_avg_sq), "beta2", beta2)
        return first, self.addcmul(second, gradient, gradient, "1-beta2", 1 - beta2)

    def addcdiv(self, start: Tensor, first: Tensor, second: Tensor, name: str, value) -> Tensor:
        """``start.addcdiv(first, second, value=value)``: ``start + value * first / second``, left to right."""
        return self.rounded(start + self.number(name, value) * first / second)

    def lerp_either(self, start: Tensor, end: Tensor, name: str, weight) -> Tensor:
        """``start.lerp(end, weight)`` for any ``weight``: PyTorch's vectorized kernel computes
        ``fma(weight, end - start, start)`` for ``|weight| < 0.5`` and ``fma(weight - 1, end - start, end)``
        otherwise (Muon's Nesterov ``grad.lerp(buf, 0.95)``, Adafactor's early ``step**beta2_decay``)."""
        if abs(float(np.float32(float(weight)))) < 0.5:
            return self.lerp(start, end, name, weight)
        weight_minus_one = float(np.float32(float(weight)) - np.float32(1.0))  # in float32, as the kernel
        return self.rounded(_fused_multiply_add(self.number(name + "-1", weight_minus_one), end - start, end))

    def add_wide(self, tensor: Tensor, other: Tensor, name: str, alpha) -> Tensor:
        """``tensor.add(other, alpha=alpha)`` whose operands' dtypes differ (a float16 parameter plus a
        bfloat16 update): computed in float32 with ``alpha`` at float32, ``fma(alpha, other, tensor)``."""
        return self.rounded(_fused_multiply_add(self.number(name, alpha), other, tensor))

    def host_number(self, name: str, value) -> Tensor:
        """A Python scalar as a float64 0-d tensor: for arithmetic PyTorch does on the host in Python
        floats with values it reads from the step's tensors (``.item()``)."""
        return tensor_of(_hyperparameter_scalar(name, float(value), dtypes.float64, self.device))

    def alpha_of(self, host_value: Tensor) -> Tensor:
        """A float64 0-d tensor (a host value computed in the graph) as the ``alpha`` of ``add``:
        rounded to the parameter's dtype through float32, as ``Scalar.to<T>()``; held in float32."""
        return self.rounded(host_value.to(dtypes.float32))


def _fused_multiply_add(first: Tensor, second: Tensor, addend: Tensor) -> Tensor:
    """``first * second + addend`` of float32 tensors, rounded once to float32, as a fused multiply-add.

    Computed in float64, where the product of two float32 values is exact; the sum's rounding to
    float64 and then to float32 differs from one rounding only at a float32 tie, which float64's 29
    extra bits make vanishingly rare.
    """
    float64 = dtypes.float64
    return (first.to(float64) * second.to(float64) + addend.to(float64)).to(dtypes.float32)


def update_node(op_type: str, *inputs: Value) -> Value:
    """Records one node of an optimizer update directly on values (``internal.record_op``).

    Updates run under ``no_grad`` on values of one dtype, so the Tensor layer (promotion, autograd
    bookkeeping, wrappers) would only cost time: a step records dozens of these per parameter group.
    """
    return record_op(op_type, inputs)[0]


def _same_dtype(gradient: Value, weight: Value) -> Value:
    """``gradient`` in ``weight``'s dtype (a Cast node where they differ)."""
    if gradient.dtype is weight.dtype:
        return gradient
    return record_op("Cast", (gradient,), {"to": weight.dtype})[0]


def _record_fused_updates(
    op_type: str,
    attributes: dict,
    params: list[Tensor],
    grads: list[Tensor],
    state_lists: list[list[Tensor]],
    state_steps: list[Tensor],
    hyperparameters: Callable,
    reads_step: bool = True,
    capturable: bool = False,
) -> None:
    """Records one fused update node (runtime/ops/training.py) per dtype, device and step count of ``params``.

    Increments every ``step`` on the host first. The node's inputs are ``hyperparameters(step,
    scalar)`` (``scalar(name, value)`` makes a fed float64 0-d value: the Python number itself, so
    factors computed from it in the node equal the host's), then the parameters, their gradients
    and each list of ``state_lists``; its outputs rebind the parameters and the states, in that order.
    An update that ``reads_step`` not (RMSprop only counts) groups parameters of any step count.
    A parameter listed twice (deprecated, but PyTorch steps it once per occurrence) is updated
    again by a later node, which reads the first one's results. With ``capturable`` the steps are
    counted in the graph (``_captured_count``), and an update that reads its count gets a node
    per parameter, fed that count.
    """
    groups: dict = {}
    counts: dict = {}  # group key -> its step count
    occurrences = _occurrences(params)
    for index, param in enumerate(params):
        step = _count_step(state_steps[index], capturable)
        weight = value_of(param)
        key = (
            weight.dtype,
            weight.device,
            (id(step) if capturable else step) if reads_step else None,
            occurrences[index],
        )
        groups.setdefault(key, []).append(index)
        counts[key] = step
    for key, indices in groups.items():
        device, step = key[1], counts[key]

        def scalar(name: str, value, device=device) -> Value:
            if isinstance(value, Tensor):
                return value_of(value)  # computed in the graph
            return _hyperparameter_scalar(name, value, dtypes.float64, device)

        _record_group(op_type, attributes, hyperparameters(step, scalar), params, grads, state_lists, indices)


def _record_formula_updates(
    op_type: str,
    params: list[Tensor],
    grads: list[Tensor],
    state_lists: list[list[Tensor]],
    settings: list[tuple[dict, tuple]],
) -> None:
    """Records one ``op_type`` node (``ir/update_formulas.py``) per group of ``params`` updated alike.

    ``settings[i]`` is parameter ``i``'s ``(attributes, hyperparameters)``: the node's attributes and
    its hyperparameters' values (Python numbers computed on the host for that parameter's step, or
    float64 0-d tensors computed in the graph for a ``capturable`` one, in the order
    ``FUSED_UPDATES[op_type]`` lists them; None where omitted). Parameters of one dtype and
    device with the same settings share a node, whose hyperparameters are fed float64 0-d values;
    its inputs are those, then the parameters, their gradients and each list of ``state_lists``,
    and its outputs rebind the parameters and the states, in that order.
    """
    groups: dict = {}
    occurrences = _occurrences(params)
    for index, param in enumerate(params):
        attributes, hyperparameters = settings[index]
        hyperparameters = tuple(value_of(h) if isinstance(h, Tensor) else h for h in hyperparameters)
        weight = value_of(param)
        key = (weight.dtype, weight.device, occurrences[index], tuple(attributes.items()), hyperparameters)
        groups.setdefault(key, []).append(index)
    for (_, device, _, _, hyperparameters), indices in groups.items():
        fed = _fed_hyperparameters(op_type, hyperparameters, device)
        _record_group(op_type, settings[indices[0]][0], fed, params, grads, state_lists, indices)


def _decay_factor(weight_decay: float, lr: float = 0.0, decoupled: bool = False) -> float | None:
    """A fused update's weight decay input: None without decay, ``1 - lr * weight_decay`` for
    decoupled decay, else the L2 coefficient (``ir/update_formulas.py``'s ``decay``)."""
    if weight_decay == 0:
        return None
    return 1 - lr * weight_decay if decoupled else weight_decay


def _fed_hyperparameters(op_type: str, hyperparameters: tuple, device) -> list:
    """A fused update's hyperparameter inputs: each a float64 0-d value (a Python number fed as one, a
    tensor computed in the graph as it is) or None (omitted)."""
    return [
        value
        if value is None or isinstance(value, Value)
        else value_of(value)
        if isinstance(value, Tensor)
        else _fed_number(name, value, device)
        for name, value in zip(FUSED_UPDATES[op_type].hyperparameters, hyperparameters)
    ]


def _formula_outputs(
    op_type: str, attributes: dict, hyperparameters: tuple, param: Tensor, grad: Tensor, states: list[Tensor]
) -> list[Tensor]:
    """One parameter's ``op_type`` node (``ir/update_formulas.py``), its new parameter and states
    returned, not bound: for a ``capturable`` step that picks between two forms in the graph.
    ``hyperparameters`` are Python numbers, float64 0-d tensors or None, as ``_record_formula_updates``'."""
    weight = value_of(param)
    fed = _fed_hyperparameters(op_type, hyperparameters, weight.device)
    inputs = (*fed, weight, _same_dtype(value_of(grad), weight), *map(value_of, states))
    return [tensor_of(output) for output in record_op(op_type, inputs, attributes, TRAINING_DOMAIN)]


def _picked(
    indices: list[int], params: list[Tensor], grads: list[Tensor], *state_lists: list[Tensor]
) -> tuple[list[Tensor], list[Tensor], list[list[Tensor]]]:
    """``(params, grads, state_lists)`` of the entries at ``indices``: those a fused node updates."""
    return (
        [params[i] for i in indices],
        [grads[i] for i in indices],
        [[states[i] for i in indices] for states in state_lists],
    )


def _record_group(
    op_type: str,
    attributes: dict,
    hyperparameters,
    params: list[Tensor],
    grads: list[Tensor],
    state_lists: list[list[Tensor]],
    indices: list[int],
) -> None:
    """Records one fused update node of the parameters at ``indices`` and rebinds them and their states
    to its outputs; its inputs are ``hyperparameters`` (values), then the parameters, their gradients
    and each list of states."""
    weights = [value_of(params[i]) for i in indices]
    inputs = (
        *hyperparameters,
        *weights,
        *[_same_dtype(value_of(grads[i]), weight) for i, weight in zip(indices, weights)],
        *[value_of(states[i]) for states in state_lists for i in indices],
    )
    outputs = record_op(op_type, inputs, attributes, TRAINING_DOMAIN)
    for kind, tensors in enumerate([params, *state_lists]):
        for position, index in enumerate(indices):
            record_update(tensors[index], outputs[kind * len(indices) + position])


def _fed_number(name: str, value: float, device) -> Value:
    return _hyperparameter_scalar(name, value, dtypes.float64, device)


def _captured_count(step: Tensor) -> Tensor:
    """``step += 1`` recorded in the graph (``capturable``): the new count as a float64 0-d tensor, from
    which a step's factors are computed in the graph as the host computes them in Python floats."""
    count = step + 1.0
    record_update(step, count)
    return count.to(dtypes.float64)


def _count_step(step: Tensor, in_graph: bool):
    """``step += 1``: in the graph (``_captured_count``, a float64 tensor) or on the host (a number)."""
    return _captured_count(step) if in_graph else _increment_step(step)


def _graph_number(value: float, like: Tensor) -> Tensor:
    """A Python number as a float64 0-d tensor beside ``like``: the dividend of a quotient computed in
    the graph (a number divided by a tensor would multiply by the tensor's reciprocal)."""
    return tensor_of(_fed_number("number", value, like.device))


def _occurrences(params: list[Tensor]) -> list[int]:
    """For each entry of ``params``, how many times its tensor came before it in the list.

    Fused updates group entries by this too: a node reads every tensor before it writes any, so the
    second occurrence of a duplicated parameter needs a node of its own, recorded after the first's.
    """
    seen: dict[int, int] = {}
    counts = []
    for param in params:
        counts.append(seen.get(id(param), 0))
        seen[id(param)] = counts[-1] + 1
    return counts


def _new_step_tensor(device=CPU) -> Tensor:
    """The ``step`` state entry: a float32 0-d tensor, as PyTorch keeps it: on the CPU, or on the
    parameter's ``device`` where the step is counted in the graph (``capturable``)."""
    return full_tensor((), 0.0, dtypes.float32, device)


def _as_step_tensor(step) -> Tensor:
    """``step`` from an old checkpoint (a Python number) as a tensor; tensors pass through."""
    if isinstance(step, Tensor):
        return step
    return full_tensor((), float(step), dtypes.float32)


def _increment_step(step: Tensor) -> float:
    """``step += 1`` on the host (it is a counter, not data of the graph); returns the new count.

    The new count is a shared realized value (values never change), so the steps of a model's
    parameters, which count together, take one instead of one each per step.
    """
    count = float(step.item()) + 1.0
    rebind(step, _hyperparameter_scalar("step", count, step.dtype, step.device))
    return count


def _zeros_like(param: Tensor) -> Tensor:
    return full_tensor(param.shape, 0, param.dtype, param.device)


def _check_differentiable(differentiable: bool) -> None:
    """Rejects ``differentiable=True``: the step is computed outside autograd.

    ``foreach``, ``fused`` and ``capturable`` are accepted as no-ops, since every step already is
    one fused graph.
    """
    if differentiable:
        raise NotImplementedError(
            "onnxnn optimizers do not support differentiable=True: the step is computed outside autograd"
        )

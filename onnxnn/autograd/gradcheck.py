"""``gradcheck`` and ``gradgradcheck``: analytical gradients against finite differences, as in ``torch.autograd``.

``gradcheck(func, inputs)`` compares, for every input that requires grad and every output that
does, the Jacobian that backward computes (one ``autograd.grad`` per output element, run twice to
check that backward is deterministic) with central differences ``(f(x + eps) - f(x - eps)) / 2 eps``
taken element by element. ``fast_mode`` compares one number per pair instead: ``v^T J u`` for random
unit vectors ``u`` and ``v``, from one backward and two evaluations of ``func``. Then backward must
give exact zeros for zero output gradients, and (``check_undefined_grad``) must accept outputs whose
gradient never arrives. ``gradgradcheck`` runs ``gradcheck`` on the function that returns the
gradients, with ``create_graph=True``.

The finite differences are taken on new leaf tensors holding the perturbed values (PyTorch
perturbs the inputs' storage in place; an onnxnn in-place write would bump their versions and
invalidate the graphs already recorded on them). onnxnn has no forward-mode AD and no ``vmap``, so
``check_forward_ad``, ``check_batched_grad`` and ``check_batched_forward_grad`` raise
``NotImplementedError``; ``masked`` concerns sparse tensors, which onnxnn lacks, and changes nothing.
"""

from __future__ import annotations

import warnings
from typing import Callable, Sequence, Union

import numpy as np

from ..ir import dtypes as _dtypes
from ..ir import random as _random
from ..runtime.backward import grad
from ..runtime.creation import tensor as _tensor
from ..runtime.internal import constant_tensor
from ..runtime.tensor import Tensor
from .function import Function

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]

TensorOrTensors = Union[Tensor, Sequence[Tensor]]


class GradcheckError(RuntimeError):
    """Raised by :func:`gradcheck` and :func:`gradgradcheck` when a check fails (a ``RuntimeError``, as PyTorch's)."""


_NONDETERMINISM_NOTE = (
    "\n\nIf backward is meant to vary between runs (it accumulates in a nondeterministic order), pass "
    "`nondet_tol=<tol>` to gradcheck/gradgradcheck with the variation it may have."
)
_FAST_MODE_NOTE = (
    "\nfast_mode compares one random projection v^T J u of the Jacobians; here the element-wise "
    "(slow mode) Jacobians are within tolerance, so gradcheck with fast_mode=False would pass: "
    "call it that way if this projection is too sensitive."
)


def _as_tuple(value) -> tuple:
    if isinstance(value, tuple):
        return value
    if isinstance(value, list):
        return tuple(value)
    return (value,)


def _is_float_tensor(value) -> bool:
    return isinstance(value, Tensor) and value.dtype.is_floating_point


def _differentiable_outputs(value) -> tuple:
    return tuple(output for output in _as_tuple(value) if isinstance(output, Tensor) and output.requires_grad)


def _host(tensor: Tensor) -> np.ndarray:
    return np.asarray(tensor.detach().cpu().numpy())


def _check_inputs(inputs: tuple) -> list[int]:
    """The positions of the inputs that require grad; warns for those not in float64."""
    positions = []
    for index, value in enumerate(inputs):
        if isinstance(value, Tensor) and value.requires_grad:
            if value.dtype is not _dtypes.float64:
                warnings.warn(
                    f"Input #{index} requires gradient and is not a double precision floating point. "
                    "This check will likely fail if all the inputs are not of double precision floating point.",
                    stacklevel=4,
                )
            positions.append(index)
    if not positions:
        raise ValueError(
            "gradcheck expects at least one input tensor to require gradient, but none of them have requires_grad=True."
        )
    return positions


# ------------------------------------------------------------------------------ finite differences
def _evaluate(func: Callable, inputs: tuple, position: int, values: np.ndarray) -> list[np.ndarray]:
    """``func``'s floating outputs on the host, with input ``position`` replaced by a leaf holding ``values``."""
    original = inputs[position]
    arguments = list(inputs)
    arguments[position] = constant_tensor(values, original.dtype, original.device, original.requires_grad)
    return [_host(output) for output in _as_tuple(func(*arguments)) if _is_float_tensor(output)]


def _difference_quotients(func, inputs, position: int, direction: np.ndarray, eps: float, where: str) -> list:
    """``(f(x + d) - f(x - d)) / (2 eps)`` for each floating output, flattened (``d`` already scaled by eps)."""
    base = _host(inputs[position])
    below = _evaluate(func, inputs, position, base - direction)
    above = _evaluate(func, inputs, position, base + direction)
    quotients = []
    for low, high in zip(below, above):
        if low.shape != high.shape:
            raise AssertionError(
                f"Expected `func` to return outputs with the same shape when inputs are perturbed {where}by "
                f"{eps}, but got: shapes {tuple(low.shape)} and {tuple(high.shape)}."
            )
        if low.dtype != high.dtype:
            raise AssertionError(
                f"Expected `func` to return outputs with the same dtype when inputs are perturbed {where}by "
                f"{eps}, but got: dtypes {low.dtype} and {high.dtype}."
            )
        # In the output's dtype, as PyTorch divides the two output tensors.
        quotients.append(((high - low) / low.dtype.type(2 * eps)).reshape(-1))
    return quotients


def _numerical_jacobians(func, inputs: tuple, position: int, eps: float, outputs: list) -> list[np.ndarray]:
    """The Jacobian ``(input elements, output elements)`` of each floating output (``outputs``, from
    the unperturbed call) with respect to one input."""
    base = _host(inputs[position])
    columns = []
    for flat in range(base.size):
        direction = np.zeros_like(base)
        index = np.unravel_index(flat, base.shape)
        direction[index] = eps
        where = f"on index {tuple(int(i) for i in index)} "
        columns.append(_difference_quotients(func, inputs, position, direction, eps, where))
    jacobians = []
    for number, output in enumerate(outputs):
        jacobian = np.zeros((base.size, output.numel()), dtype=np.dtype(output.dtype.numpy_dtype))
        for flat, column in enumerate(columns):
            jacobian[flat] = column[number]
        jacobians.append(jacobian)
    return jacobians


# ------------------------------------------------------------------------------ backward
def _vector_jacobian_rows(output: Tensor, inputs: list, grad_outputs: list) -> tuple[list[np.ndarray], bool, bool]:
    """``v^T J`` for each ``v`` in ``grad_outputs``: per input, a ``(input elements, len(grad_outputs))``
    array; and whether every gradient had its input's shape and dtype."""
    rows = [np.zeros((value.numel(), len(grad_outputs)), dtype=np.dtype(value.dtype.numpy_dtype)) for value in inputs]
    sizes_ok = types_ok = True
    for column, grad_output in enumerate(grad_outputs):
        gradients = grad(output, inputs, grad_output, retain_graph=True, allow_unused=True)
        for number, (gradient, value) in enumerate(zip(gradients, inputs)):
            if gradient is None:
                continue
            if gradient.shape != value.shape:
                sizes_ok = False
                continue
            if gradient.dtype is not value.dtype:
                types_ok = False
            rows[number][:, column] = _host(gradient).reshape(-1)
    return rows, sizes_ok, types_ok


def _analytical(output: Tensor, inputs: list, grad_outputs: list, nondet_tol: float, check_grad_dtypes: bool) -> list:
    """The backward products, computed twice: refused if they differ by more than ``nondet_tol``."""
    first, sizes_ok, types_ok = _vector_jacobian_rows(output, inputs, grad_outputs)
    second, _, _ = _vector_jacobian_rows(output, inputs, grad_outputs)
    if not types_ok and check_grad_dtypes:
        raise GradcheckError("Gradient has dtype mismatch")
    if not sizes_ok:
        raise GradcheckError("Analytical gradient has incorrect size")
    for one, other in zip(first, second):
        if one.size and float(np.max(np.abs(one.astype(np.float64) - other.astype(np.float64)))) > nondet_tol:
            raise GradcheckError(
                "Backward is not reentrant, i.e., running backward with same input and grad_output multiple "
                "times gives different values, although analytical gradient matches numerical gradient. "
                f"The tolerance for nondeterminism was {nondet_tol}." + _NONDETERMINISM_NOTE
            )
    return first


def _basis(output: Tensor) -> list[Tensor]:
    """One gradient per output element: 1 there, 0 elsewhere (each backward gives a Jacobian row)."""
    count = output.numel()
    identity = np.eye(count, dtype=np.dtype(output.dtype.numpy_dtype))
    return [
        constant_tensor(identity[row].reshape(tuple(output.shape)), output.dtype, output.device) for row in range(count)
    ]


def _allclose(analytical, numerical, rtol: float, atol: float) -> bool:
    dtype = _dtypes.promote_types(_dtype_of(analytical), _dtype_of(numerical))
    kind = np.dtype(dtype.numpy_dtype)
    return bool(np.all(np.isclose(np.asarray(analytical, kind), np.asarray(numerical, kind), rtol=rtol, atol=atol)))


def _dtype_of(values) -> _dtypes.dtype:
    return _DTYPE_OF_NUMPY[np.asarray(values).dtype]


_DTYPE_OF_NUMPY = {np.dtype(d.numpy_dtype): d for d in _dtypes.ALL_DTYPES}


def _mismatch(analytical, numerical, output: int, input: int) -> str:
    def shown(values):
        return _tensor(values) if isinstance(values, np.ndarray) and values.ndim else float(values)

    return (
        f"Jacobian mismatch for output {output:d} with respect to input {input:d},\n"
        f"numerical:{shown(numerical)}\nanalytical:{shown(analytical)}\n"
    )


# ------------------------------------------------------------------------------ the two modes
def _slow_check(func, inputs, positions, func_out, outputs, eps, rtol, atol, check_grad_dtypes, nondet_tol):
    diff_inputs = [inputs[position] for position in positions]
    floating = [output for output in _as_tuple(func_out) if _is_float_tensor(output)]
    # numerical[input][floating output]
    numerical = [_numerical_jacobians(func, inputs, position, eps, floating) for position in positions]
    if not outputs:
        for per_input in numerical:
            if any(np.any(jacobian != 0) for jacobian in per_input):
                raise GradcheckError("Numerical gradient for function expected to be zero")
        return
    for output_index, output in enumerate(outputs):
        number = next(n for n, candidate in enumerate(floating) if candidate is output)
        analytical = _analytical(output, diff_inputs, _basis(output), nondet_tol, check_grad_dtypes)
        for input_index, (mine, theirs) in enumerate(zip(analytical, numerical)):
            if not _allclose(mine, theirs[number], rtol, atol):
                raise GradcheckError(_mismatch(mine, theirs[number], output_index, input_index))


def _unit_vector(tensor: Tensor, generator: _random.Generator) -> np.ndarray:
    """A random non-negative unit vector with one entry per element (PyTorch's draws, from a fresh generator)."""
    vector = _random.uniform((tensor.numel(),), np.float32, generator=generator)
    vector = vector.astype(np.dtype(tensor.dtype.numpy_dtype))
    return vector / np.linalg.norm(vector.astype(np.float64)).astype(vector.dtype)


def _fast_check(func, inputs, positions, func_out, outputs, eps, rtol, atol, check_grad_dtypes, nondet_tol):
    # A generator of its own (seeded as a new one always is): the caller's random state stays as it was.
    generator = _random.Generator()
    diff_inputs = [inputs[position] for position in positions]
    all_u = [_unit_vector(value, generator) for value in diff_inputs]
    all_v = [_unit_vector(output, generator) for output in outputs]
    floating = [output for output in _as_tuple(func_out) if _is_float_tensor(output)]
    numerical = []  # numerical[input][differentiable output] = v^T (J u)
    for position, u in zip(positions, all_u):
        direction = (u * u.dtype.type(eps)).reshape(tuple(inputs[position].shape))
        products = _difference_quotients(func, inputs, position, direction, eps, "")
        if not outputs:
            if any(product.size and float(np.max(np.abs(product))) > nondet_tol for product in products):
                raise GradcheckError("Numerical gradient for function expected to be zero")
            continue
        by_output = {id(output): product for output, product in zip(floating, products)}
        numerical.append([float(np.sum(v * by_output[id(output)])) for output, v in zip(outputs, all_v)])
    if not outputs:
        return
    for output_index, (output, v) in enumerate(zip(outputs, all_v)):
        grad_output = constant_tensor(v.reshape(tuple(output.shape)), output.dtype, output.device)
        rows = _analytical(output, diff_inputs, [grad_output], nondet_tol, check_grad_dtypes)
        for input_index, (row, u) in enumerate(zip(rows, all_u)):
            mine = float(np.sum(row[:, 0] * u))
            theirs = numerical[input_index][output_index]
            # The element-wise atol, carried through the projections: |v^T E u| = atol sum(u) sum(v).
            projected_atol = atol * float(np.sum(u)) * float(np.sum(v))
            if not _allclose(np.float64(mine), np.float64(theirs), rtol, projected_atol):
                number = next(n for n, candidate in enumerate(floating) if candidate is output)
                report = _slow_report(func, inputs, positions[input_index], floating, number, eps, rtol, atol)
                raise GradcheckError(_mismatch(mine, theirs, output_index, input_index) + report)


def _slow_report(func, inputs, position: int, floating: list, number: int, eps: float, rtol: float, atol: float) -> str:
    """The element-wise Jacobians of one failing pair of fast mode (the ``number``-th floating output
    and input ``position``), for the error message."""
    output = floating[number]
    numerical = _numerical_jacobians(func, inputs, position, eps, floating)[number]
    analytical = _analytical(output, [inputs[position]], _basis(output), float("inf"), False)[0]
    difference = float(np.max(np.abs(numerical.astype(np.float64) - analytical.astype(np.float64))))
    report = (
        "\nThe quantities above are projections of the Jacobians on random vectors (fast mode). "
        "Recomputed element by element (slow mode):\n\n"
        f"Numerical:\n {_tensor(numerical)}\nAnalytical:\n{_tensor(analytical)}\n\n"
        f"The max per-element difference (slow mode) is: {difference}.\n"
    )
    if _allclose(analytical, numerical, rtol, atol):
        report += _FAST_MODE_NOTE
    return report


# ------------------------------------------------------------------------------ backward's contracts
def _check_zero_gradients(outputs: tuple, diff_inputs: list) -> None:
    """Zero output gradients must give exactly zero input gradients, of the inputs' dtype, device and shape."""
    zeros = [
        constant_tensor(np.zeros(tuple(o.shape), np.dtype(o.dtype.numpy_dtype)), o.dtype, o.device) for o in outputs
    ]
    gradients = grad(list(outputs), diff_inputs, zeros, allow_unused=True)
    for gradient, value in zip(gradients, diff_inputs):
        if gradient is None:
            continue
        if not np.all(_host(gradient) == 0):
            raise GradcheckError("backward not multiplied by grad_output")
        if gradient.dtype is not value.dtype:
            raise GradcheckError("grad is incorrect type")
        if gradient.device != value.device:
            raise GradcheckError("grad is incorrect device")
        if gradient.shape != value.shape:
            raise GradcheckError("grad is incorrect size")


class _UndefinedGrad(Function):
    """An identity whose backward sends nothing on: what lies before it sees an output gradient that
    never arrived (PyTorch's undefined gradient), which the engine makes zeros or, for a Function
    that asked (``set_materialize_grads(False)``), None."""

    @staticmethod
    def forward(ctx, value):
        return value

    @staticmethod
    def backward(ctx, grad_output):
        return None


def _check_undefined_gradients(func: Callable, inputs: tuple, diff_inputs: list, count: int) -> None:
    """Backward must accept outputs whose gradient never arrives, and give zero (or no) input gradients then."""

    def warn_compatibility() -> None:
        warnings.warn(
            "Backwards compatibility: the check of undefined output gradients is on by default and may "
            'fail callers that passed before it; call gradcheck with "check_undefined_grad=False" to skip it.',
            stacklevel=5,
        )

    # Every output undefined at once, then (with several) one at a time.
    masks = [None] + (list(range(count)) if count > 1 else [])
    for undefined in masks:
        outputs = _differentiable_outputs(func(*inputs))
        checked = [
            _UndefinedGrad.apply(output) if undefined is None or number == undefined else output
            for number, output in enumerate(outputs)
        ]
        zeros = [
            constant_tensor(np.zeros(tuple(o.shape), np.dtype(o.dtype.numpy_dtype)), o.dtype, o.device) for o in checked
        ]
        try:
            gradients = grad(checked, diff_inputs, zeros, allow_unused=True)
        except RuntimeError as error:
            warn_compatibility()
            raise GradcheckError(
                "Expected backward function to handle undefined output grads: it failed when the gradient of "
                "an output never arrived (zeros, or None for a Function that set_materialize_grads(False))"
            ) from error
        for gradient in gradients:
            if gradient is not None and not np.all(_host(gradient) == 0):
                warn_compatibility()
                raise GradcheckError(
                    "Expected all input grads to be undefined or zero when all output grads are undefined or zero."
                )


# ------------------------------------------------------------------------------ public functions
def gradcheck(
    func: Callable[..., TensorOrTensors],
    inputs: TensorOrTensors,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_batched_forward_grad: bool = False,
    check_forward_ad: bool = False,
    check_backward_ad: bool = True,
    fast_mode: bool = False,
    masked: bool | None = None,
) -> bool:
    """Checks the gradients backward computes for ``func`` against finite differences.

    For every input that requires grad and every output that requires grad, the Jacobian from
    backward must satisfy ``allclose(analytical, numerical, rtol, atol)`` with the Jacobian from
    central differences of step ``eps``. The defaults suit float64 inputs (others warn). Backward
    is run twice per check and must give the same values up to ``nondet_tol``; zero output
    gradients must give exactly zero input gradients; and with ``check_undefined_grad`` backward
    must accept outputs no gradient reaches.

    Args:
        func: a function of the inputs returning a Tensor or a tuple of Tensors.
        inputs: a Tensor or a tuple of arguments for ``func``.
        eps: perturbation for finite differences.
        atol: absolute tolerance.
        rtol: relative tolerance.
        raise_exception: raise :class:`GradcheckError` on a failure (otherwise return False).
        nondet_tol: tolerance for backward giving different values on identical runs.
        check_undefined_grad: check that backward treats gradients that never arrived as zeros.
        check_grad_dtypes: check that the gradients have their inputs' dtypes.
        check_batched_grad: needs ``vmap``, which onnxnn lacks: NotImplementedError if True.
        check_batched_forward_grad: needs forward-mode AD and ``vmap``: NotImplementedError if True.
        check_forward_ad: onnxnn has no forward-mode AD: NotImplementedError if True.
        check_backward_ad: check backward (the checks above); must be True here.
        fast_mode: compare random projections ``v^T J u`` instead of whole Jacobians.
        masked: for sparse tensors, which onnxnn lacks; ignored.

    Returns:
        True if every check passes (False instead of raising when ``raise_exception=False``).

    Raises:
        GradcheckError: a check failed; the message shows the numerical and analytical Jacobians.
        ValueError: no input requires grad.

    Example::

        >>> x = onnxnn.randn(3, dtype=onnxnn.float64, requires_grad=True)
        >>> onnxnn.autograd.gradcheck(lambda t: (t.sin() * t).sum(), (x,))
        True
    """
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError("Expected at least one of check_forward_ad or check_backward_ad to be True")
    if check_batched_grad and not check_backward_ad:
        raise AssertionError("Setting check_batched_grad=True requires check_backward_ad to be True")
    if check_batched_forward_grad and not check_forward_ad:
        raise AssertionError("Setting check_batched_forward_grad=True requires check_forward_ad to be True")
    if check_forward_ad:
        raise NotImplementedError(
            "gradcheck(check_forward_ad=True) needs forward-mode AD, which onnxnn does not have; "
            "check backward only (check_forward_ad=False)"
        )
    if check_batched_grad:
        raise NotImplementedError(
            "gradcheck(check_batched_grad=True) needs vmap (batched gradients), which onnxnn does not have; "
            "pass check_batched_grad=False"
        )
    try:
        return _gradcheck(func, inputs, eps, atol, rtol, nondet_tol, check_undefined_grad, check_grad_dtypes, fast_mode)
    except GradcheckError:
        if raise_exception:
            raise
        return False


def _gradcheck(func, inputs, eps, atol, rtol, nondet_tol, check_undefined_grad, check_grad_dtypes, fast_mode) -> bool:
    inputs = _as_tuple(inputs)
    positions = _check_inputs(inputs)
    func_out = func(*inputs)
    outputs = _differentiable_outputs(func_out)
    check = _fast_check if fast_mode else _slow_check
    check(func, inputs, positions, func_out, outputs, eps, rtol, atol, check_grad_dtypes, nondet_tol)
    diff_inputs = [inputs[position] for position in positions]
    if outputs:
        _check_zero_gradients(outputs, diff_inputs)
    if check_undefined_grad and outputs:
        _check_undefined_gradients(func, inputs, diff_inputs, len(outputs))
    return True


def gradgradcheck(
    func: Callable[..., TensorOrTensors],
    inputs: TensorOrTensors,
    grad_outputs: TensorOrTensors | None = None,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    gen_non_contig_grad_outputs: bool = False,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_fwd_over_rev: bool = False,
    check_rev_over_rev: bool = True,
    fast_mode: bool = False,
    masked: bool = False,
) -> bool:
    """Checks second derivatives: :func:`gradcheck` of the function returning ``func``'s input gradients.

    That function takes the inputs and ``grad_outputs`` and returns
    ``autograd.grad(func(*inputs), inputs, grad_outputs, create_graph=True)``, so its Jacobian holds
    the second derivatives (and backward of backward is checked against finite differences of
    backward). Without ``grad_outputs``, random ones in ``[-1, 1)`` that require grad are drawn from
    the default generator, as PyTorch draws them.

    Args:
        func: a function of the inputs returning a Tensor or a tuple of Tensors.
        inputs: a Tensor or a tuple of arguments for ``func``.
        grad_outputs: the gradients of ``func``'s differentiable outputs (drawn when None).
        eps: perturbation for finite differences.
        atol: absolute tolerance.
        rtol: relative tolerance.
        gen_non_contig_grad_outputs: accepted for PyTorch's signature (onnxnn tensors have no strides).
        raise_exception: raise :class:`GradcheckError` on a failure (otherwise return False).
        nondet_tol: tolerance for backward giving different values on identical runs.
        check_undefined_grad: as in :func:`gradcheck`.
        check_grad_dtypes: as in :func:`gradcheck`.
        check_batched_grad: needs ``vmap``, which onnxnn lacks: NotImplementedError if True.
        check_fwd_over_rev: needs forward-mode AD, which onnxnn lacks: NotImplementedError if True.
        check_rev_over_rev: check backward of backward; must be True here.
        fast_mode: as in :func:`gradcheck`.
        masked: for sparse tensors, which onnxnn lacks; ignored.

    Returns:
        True if every check passes (False instead of raising when ``raise_exception=False``).

    Example::

        >>> x = onnxnn.randn(3, dtype=onnxnn.float64, requires_grad=True)
        >>> onnxnn.autograd.gradgradcheck(lambda t: (t**3).sum(), (x,))
        True
    """
    if not (check_fwd_over_rev or check_rev_over_rev):
        raise AssertionError("Expected at least one of check_fwd_over_rev or check_rev_over_rev to be True")
    if check_undefined_grad and not check_rev_over_rev:
        raise AssertionError("Setting check_undefined_grad=True requires check_rev_over_rev to be True")
    if check_batched_grad and not check_rev_over_rev:
        raise AssertionError("Setting check_batched_grad=True requires check_rev_over_rev to be True")
    inputs = _as_tuple(inputs)
    if grad_outputs is None:
        drawn = []
        for output in _differentiable_outputs(func(*inputs)):
            dtype = output.dtype if output.dtype.is_floating_point else _dtypes.float64
            values = _random.uniform(tuple(output.shape), np.dtype(dtype.numpy_dtype), -1.0, 1.0)
            drawn.append(constant_tensor(values, dtype, output.device, requires_grad=True))
        grad_outputs = tuple(drawn)
    else:
        grad_outputs = _as_tuple(grad_outputs)
    count = len(grad_outputs)
    differentiated = {i for i, value in enumerate(inputs) if isinstance(value, Tensor) and value.requires_grad}
    differentiated_outputs = {i for i, value in enumerate(grad_outputs) if value.requires_grad}

    def gradients_of_func(*arguments):
        # gradcheck passes new leaves for the perturbed argument: give them back their requires_grad.
        values = tuple(v.requires_grad_() if i in differentiated else v for i, v in enumerate(arguments[:-count]))
        outputs = _differentiable_outputs(func(*values))
        vectors = tuple(
            v.requires_grad_() if i in differentiated_outputs else v for i, v in enumerate(arguments[-count:])
        )
        diff_values = tuple(v for i, v in enumerate(values) if i in differentiated)
        found = grad(outputs, diff_values, vectors, create_graph=True, allow_unused=True)
        return tuple(gradient for gradient in found if gradient is not None)

    return gradcheck(
        gradients_of_func,
        inputs + grad_outputs,
        eps=eps,
        atol=atol,
        rtol=rtol,
        raise_exception=raise_exception,
        nondet_tol=nondet_tol,
        check_undefined_grad=check_undefined_grad,
        check_grad_dtypes=check_grad_dtypes,
        check_batched_grad=check_batched_grad,
        fast_mode=fast_mode,
        check_forward_ad=check_fwd_over_rev,
        check_backward_ad=check_rev_over_rev,
        masked=masked,
    )

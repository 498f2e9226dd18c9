"""``onnxnn.autograd.functional``: Jacobians, Hessians and their products with vectors, as in
``torch.autograd.functional``.

Each function calls ``func`` once on fresh leaves that require grad (views of the inputs with
``create_graph=True``, so that a caller's graph reaches through) and differentiates its outputs with
``onnxnn.autograd.grad``: a vector-Jacobian product is one backward, a Jacobian one backward per
output element (the backwards share one structure, so all but the first are replayed). Forward-mode
products use the double-backward trick: ``J v`` is the gradient, with respect to a dummy ``u``, of
``v . (u^T J)``, whose rules are linear in ``u``. ``vectorize`` and ``strategy`` choose how PyTorch
batches that work; here they change nothing in the results, and the checks PyTorch makes on them are
made.
"""

from __future__ import annotations

from typing import Callable

from ..runtime.backward import grad
from ..runtime.creation import zeros, zeros_like
from ..runtime.grad_mode import enable_grad, is_grad_enabled, set_grad_enabled
from ..runtime.ops.shape import cat, stack
from ..runtime.ops.splitting import split
from ..runtime.tensor import Tensor

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]

_REVERSE, _FORWARD = "reverse-mode", "forward-mode"


def _as_tensors(value, argument: str, function: str) -> tuple[bool, tuple]:
    """``value`` as a tuple of tensors, and whether it was a tuple; TypeError naming ``argument`` else."""
    is_tuple = isinstance(value, tuple)
    values = value if is_tuple else (value,)
    for index, item in enumerate(values):
        if not isinstance(item, Tensor):
            where = f"the value at index {index}" if is_tuple else f"the given {argument}"
            raise TypeError(
                f"The {argument} given to {function} must be either a Tensor or a tuple of Tensors but "
                f"{where} has type {type(item)}."
            )
    return is_tuple, values


def _leaves(tensors: tuple, create_graph: bool, need_graph: bool) -> tuple:
    """Fresh tensors to differentiate with respect to; with ``create_graph`` a tensor that requires grad
    stays connected to its own graph (a view), so higher derivatives reach the caller's leaves."""
    return tuple(
        tensor.view_as(tensor) if create_graph and tensor.requires_grad else tensor.detach().requires_grad_(need_graph)
        for tensor in tensors
    )


def _finished(tensors, create_graph: bool):
    """Results detached unless the caller asked for a graph; nested tuples alike."""
    if isinstance(tensors, Tensor):
        return tensors if create_graph else tensors.detach()
    return tuple(_finished(tensor, create_graph) for tensor in tensors)


def _unpacked(values: tuple, is_tuple: bool):
    return values if is_tuple else values[0]


def _check_vector(v: tuple, others: tuple, others_are_tuple: bool) -> None:
    if len(v) != len(others):
        if others_are_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(others)} but got {len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for index, (vector, other) in enumerate(zip(v, others)):
        if vector.shape != other.shape:
            prefix = f"Entry {index} in " if others_are_tuple else ""
            raise RuntimeError(f"{prefix}v has invalid size: should be {other.shape} but got {vector.shape}.")


def _vector_like_inputs(v, inputs: tuple, inputs_are_tuple: bool, create_graph: bool, function: str):
    """``v`` (a tensor or tuple shaped as ``inputs``) as a tuple of leaves, or None where the input is one
    tensor of one element (the vector is then 1)."""
    if v is None:
        if len(inputs) != 1 or inputs[0].numel() != 1:
            raise RuntimeError(
                "The vector v can only be None if the input to the user-provided function is a single "
                "Tensor with a single element."
            )
        return None
    v = _leaves(_as_tensors(v, "v", function)[1], create_graph, need_graph=False)
    _check_vector(v, inputs, inputs_are_tuple)
    return v


_INDEPENDENT = {
    # PyTorch's words for a gradient that is missing in strict mode, by the backward that missed it.
    "back": "The output of the user-provided function is independent of input {i}. This is not allowed in strict mode.",
    "back_trick": (
        "The gradient with respect to the input is independent of entry {i} in the grad_outputs when using the "
        "double backward trick to compute forward mode gradients. This is not allowed in strict mode."
    ),
    "double_back": (
        "The jacobian of the user-provided function is independent of input {i}. This is not allowed in strict mode."
    ),
    "double_back_trick": (
        "The hessian of the user-provided function is independent of entry {i} in the grad_jacobian. This is not "
        "allowed in strict mode as it prevents from using the double backward trick to replace forward mode AD."
    ),
}


def _check_requires_grad(tensors: tuple, kind: str, strict: bool) -> None:
    """Strict mode's refusal of an output (``kind`` "outputs"), a first gradient ("grad_inputs") or a
    Jacobian ("jacobian") that is missing or does not depend on the inputs."""
    if not strict:
        return
    for i, tensor in enumerate(tensors):
        if tensor is None:
            raise RuntimeError(_INDEPENDENT["back"].format(i=i))
        if tensor.requires_grad:
            continue
        if kind == "jacobian":
            raise RuntimeError(
                f"While computing the hessian, found that the jacobian of the user-provided function with respect "
                f"to input {i} is independent of the input. This is not allowed in strict mode. You should ensure "
                "that your function is twice differentiable and that the jacobian depends on the inputs (this "
                "would be violated by a linear function for example)."
            )
        if kind == "grad_inputs":
            raise RuntimeError(
                f"The gradient with respect to input {i} is independent of the inputs of the user-provided "
                "function. This is not allowed in strict mode."
            )
        raise RuntimeError(
            f"Output {i} of the user-provided function does not require gradients. The outputs must be computed "
            "in a differentiable manner from the input when running in strict mode."
        )


def _autograd_grad(outputs: tuple, inputs: tuple, grad_outputs, create_graph: bool) -> tuple:
    """``grad(outputs, inputs, grad_outputs)`` over the outputs that are not None and require grad; None
    where an input gets no gradient (all of them where no output requires grad)."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    pairs = [(output, g) for output, g in zip(outputs, grad_outputs) if output is not None and output.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    return grad(
        [output for output, _ in pairs],
        list(inputs),
        [g for _, g in pairs],
        retain_graph=True,
        create_graph=create_graph,
        allow_unused=True,
    )


def _fill_in_zeros(gradients: tuple, references: tuple, strict: bool, create_graph: bool, stage: str) -> tuple:
    """Zeros shaped as ``references`` for the missing gradients (which do not require grad, as PyTorch's);
    strict mode refuses them instead, and, with ``create_graph``, gradients that do not depend on the
    inputs."""
    results = []
    for i, gradient in enumerate(gradients):
        if gradient is None:
            if strict:
                raise RuntimeError(_INDEPENDENT[stage].format(i=i))
            gradient = zeros_like(references[i])
        elif strict and create_graph and not gradient.requires_grad:
            what = "hessian" if stage.startswith("double") else "jacobian"
            raise RuntimeError(
                f"The {what} of the user-provided function is independent of input {i}. This is not allowed in "
                "strict mode when create_graph=True."
            )
        results.append(gradient)
    return tuple(results)


def _call(func: Callable, inputs: tuple, function: str, strict: bool) -> tuple[bool, tuple]:
    is_tuple, outputs = _as_tensors(func(*inputs), "outputs of the user-provided function", function)
    _check_requires_grad(outputs, "outputs", strict)
    return is_tuple, outputs


def vjp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """The vector-Jacobian product ``v^T J`` of ``func`` at ``inputs``.

    Args:
        func: a function of tensors returning a tensor or a tuple of tensors.
        inputs: a tensor or a tuple of tensors, the point.
        v: a tensor (tuple) shaped as the outputs; may be None for an output of one element.
        create_graph: whether the results are differentiable.
        strict: raise where an output does not depend on an input, instead of giving zeros.

    Returns:
        ``(func(*inputs), vjp)``, ``vjp`` shaped as ``inputs``.

    Example::

        >>> output, product = onnxnn.autograd.functional.vjp(lambda x: x**2, onnxnn.ones(3), onnxnn.ones(3))
        >>> product
        tensor([2., 2., 2.])
    """
    with enable_grad():
        inputs_are_tuple, inputs = _as_tensors(inputs, "inputs", "vjp")
        inputs = _leaves(inputs, create_graph, need_graph=True)
        outputs_are_tuple, outputs = _call(func, inputs, "vjp", strict)
        if v is None:
            if len(outputs) != 1 or outputs[0].numel() != 1:
                raise RuntimeError(
                    "The vector v can only be None if the user-provided function returns a single Tensor "
                    "with a single element."
                )
        else:
            v = _leaves(_as_tensors(v, "v", "vjp")[1], create_graph, need_graph=False)
            _check_vector(v, outputs, outputs_are_tuple)
    with set_grad_enabled(create_graph or is_grad_enabled()):
        found = _autograd_grad(outputs, inputs, v, create_graph)
        products = _fill_in_zeros(found, inputs, strict, create_graph, "back")
    return (
        _unpacked(_finished(outputs, create_graph), outputs_are_tuple),
        _unpacked(_finished(products, create_graph), inputs_are_tuple),
    )


def jvp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """The Jacobian-vector product ``J v`` of ``func`` at ``inputs`` (by the double-backward trick).

    Args:
        func: a function of tensors returning a tensor or a tuple of tensors.
        inputs: a tensor or a tuple of tensors, the point.
        v: a tensor (tuple) shaped as ``inputs``; may be None for one input of one element.
        create_graph: whether the results are differentiable.
        strict: raise where an output does not depend on an input, instead of giving zeros.

    Returns:
        ``(func(*inputs), jvp)``, ``jvp`` shaped as the outputs.
    """
    with enable_grad():
        inputs_are_tuple, inputs = _as_tensors(inputs, "inputs", "jvp")
        inputs = _leaves(inputs, create_graph, need_graph=True)
        v = _vector_like_inputs(v, inputs, inputs_are_tuple, create_graph, "jvp")
        outputs_are_tuple, outputs = _call(func, inputs, "jvp", strict)
        dummies = tuple(zeros_like(output).requires_grad_() for output in outputs)
        transposed = _autograd_grad(outputs, inputs, dummies, create_graph=True)
        _check_requires_grad(transposed, "grad_inputs", strict)
    with set_grad_enabled(create_graph or is_grad_enabled()):
        found = _autograd_grad(transposed, dummies, v, create_graph)
        products = _fill_in_zeros(found, outputs, strict, create_graph, "back_trick")
    return (
        _unpacked(_finished(outputs, create_graph), outputs_are_tuple),
        _unpacked(_finished(products, create_graph), outputs_are_tuple),
    )


def jacobian(
    func: Callable,
    inputs,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    strategy: str = _REVERSE,
):
    """The Jacobian of ``func`` at ``inputs``: ``J[i][j]`` of shape ``outputs[i].shape + inputs[j].shape``.

    Args:
        func: a function of tensors returning a tensor or a tuple of tensors.
        inputs: a tensor or a tuple of tensors, the point.
        create_graph: whether the Jacobian is differentiable.
        strict: raise where an output does not depend on an input, instead of giving zeros.
        vectorize, strategy: how PyTorch batches the products ("reverse-mode" or "forward-mode", the
            latter only with ``vectorize=True`` and without ``create_graph``); the results are the same.

    Returns:
        A tensor for one input and one output; a tuple over the inputs (outputs) where only they are a
        tuple; else a tuple over the outputs of tuples over the inputs.

    Example::

        >>> onnxnn.autograd.functional.jacobian(lambda x: x.exp(), onnxnn.zeros(2))
        tensor([[1., 0.],
                [0., 1.]])
    """
    # PyTorch's checks, in its order (the inputs' types are checked between those of forward mode).
    if strategy not in (_FORWARD, _REVERSE):
        raise AssertionError(
            'Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your function has more '
            'outputs than inputs, "forward-mode" tends to be more performant. Otherwise, prefer to use "reverse-mode".'
        )
    if strategy == _FORWARD:
        if create_graph:
            raise NotImplementedError(
                'onnxnn.autograd.functional.jacobian: `create_graph=True` and `strategy="forward-mode"` are not '
                'supported together (yet). Please either set `create_graph=False` or `strategy="reverse-mode"`.'
            )
        if strict:
            raise RuntimeError(
                'onnxnn.autograd.functional.jacobian: `strict=True` and `strategy="forward-mode"` are not '
                'supported together (yet). Please either set `strict=False` or `strategy="reverse-mode"`.'
            )
        _as_tensors(inputs, "inputs", "jacobian")
        if not vectorize:
            raise NotImplementedError(
                "Computing Jacobian using forward-AD or forward-over-reverse Hessian is only implemented "
                "for `vectorize=True`."
            )
    with enable_grad():
        inputs_are_tuple, inputs = _as_tensors(inputs, "inputs", "jacobian")
        inputs = _leaves(inputs, create_graph, need_graph=True)
        outputs_are_tuple, outputs = _call(func, inputs, "jacobian", strict)
        if vectorize and strict:
            raise RuntimeError(
                "onnxnn.autograd.functional.jacobian: `strict=True` and `vectorized=True` are not supported "
                "together. Please either set `strict=False` or `vectorize=False`."
            )
        rows = [_jacobian_rows(output, index, inputs, create_graph, strict) for index, output in enumerate(outputs)]
        if vectorize and create_graph:
            rows = _as_vectorized(rows, outputs, inputs)
    return _unpacked(
        tuple(_unpacked(_finished(row, create_graph), inputs_are_tuple) for row in rows), outputs_are_tuple
    )


def _jacobian_rows(output: Tensor, index: int, inputs: tuple, create_graph: bool, strict: bool) -> tuple:
    """``d output / d input`` for each input, one backward per element of ``output`` (the ``index``-th)."""
    flat = output.reshape(-1)
    per_input: list[list] = [[] for _ in inputs]
    for element in range(flat.shape[0]):
        selected = zeros_like(flat)
        selected[element] = 1
        gradients = _autograd_grad((flat,), inputs, (selected,), create_graph)
        for position, (rows, gradient, input) in enumerate(zip(per_input, gradients, inputs)):
            if gradient is None:
                if strict:
                    raise RuntimeError(
                        f"Output {index} of the user-provided function is independent of input {position}. This "
                        "is not allowed in strict mode."
                    )
                gradient = zeros_like(input)
            elif strict and create_graph and not gradient.requires_grad:
                raise RuntimeError(
                    f"The jacobian of the user-provided function is independent of input {position}. This is not "
                    "allowed in strict mode when create_graph=True."
                )
            rows.append(gradient)
    return tuple(
        (stack(rows) if rows else zeros((0,) + tuple(input.shape), dtype=input.dtype)).reshape(
            tuple(output.shape) + tuple(input.shape)
        )
        for rows, input in zip(per_input, inputs)
    )


def _as_vectorized(rows: list, outputs: tuple, inputs: tuple) -> list:
    """PyTorch's vectorized Jacobian is one tensor per input, over all outputs, split by output: each block
    requires grad where any block of its input does (which only ``create_graph`` shows)."""
    numels = [output.numel() for output in outputs]
    columns = []
    for position, input in enumerate(inputs):
        whole = cat([row[position].reshape((-1,) + tuple(input.shape)) for row in rows])
        columns.append(
            [
                block.reshape(tuple(output.shape) + tuple(input.shape))
                for block, output in zip(split(whole, numels), outputs)
            ]
        )
    return [tuple(column[index] for column in columns) for index in range(len(outputs))]


def _single_output(func: Callable, function: str, strict: bool, squeeze: bool) -> Callable:
    """``func`` checked to return one tensor of one element; as a 0-d tensor where ``squeeze`` (the
    Hessian's), else in its own shape (the products return it so, as PyTorch)."""

    def checked(*inputs):
        is_tuple, outputs = _call(func, inputs, function, strict)
        if is_tuple:
            raise RuntimeError(f"The function given to {function} should return a single Tensor")
        if outputs[0].numel() != 1:
            raise RuntimeError(
                f"The Tensor returned by the function given to {function} should contain a single element"
            )
        return outputs[0].reshape(()) if squeeze else outputs[0]

    return checked


def hessian(
    func: Callable,
    inputs,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    outer_jacobian_strategy: str = _REVERSE,
):
    """The Hessian of a scalar ``func`` at ``inputs``: ``H[i][j]`` of shape ``inputs[i].shape + inputs[j].shape``.

    Args:
        func: a function of tensors returning a tensor of one element.
        inputs: a tensor or a tuple of tensors, the point.
        create_graph: whether the Hessian is differentiable.
        strict: raise where the function does not depend on an input, instead of giving zeros.
        vectorize, outer_jacobian_strategy: as for :func:`jacobian`; the results are the same.

    Example::

        >>> onnxnn.autograd.functional.hessian(lambda x: (x**3).sum(), onnxnn.tensor([1.0, 2.0]))
        tensor([[ 6.,  0.],
                [ 0., 12.]])
    """
    inputs_are_tuple, inputs = _as_tensors(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in (_FORWARD, _REVERSE):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')
    scalar = _single_output(func, "hessian", strict, squeeze=True)

    def gradient(*point):
        # As PyTorch: the inner Jacobian fills in zeros, which strict mode then refuses as independent.
        first = jacobian(scalar, point if inputs_are_tuple else point[0], create_graph=True)
        _check_requires_grad(first if inputs_are_tuple else (first,), "jacobian", strict)
        return first

    # The inner Jacobian is a tuple exactly when the inputs are: the outer one nests as H[i][j].
    return jacobian(
        gradient,
        inputs if inputs_are_tuple else inputs[0],
        create_graph=create_graph,
        strict=strict,
        vectorize=vectorize,
        strategy=outer_jacobian_strategy,
    )


def vhp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """The vector-Hessian product ``v^T H`` of a scalar ``func`` at ``inputs``.

    Returns:
        ``(func(*inputs), vhp)``: the value in the shape ``func`` gave it, ``vhp`` shaped as ``inputs``.
    """
    return _hessian_product(func, inputs, v, create_graph, strict, "vhp")


def hvp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """The Hessian-vector product ``H v`` of a scalar ``func`` at ``inputs``: ``v^T H`` transposed, which
    is the same wherever ``func`` is twice continuously differentiable (its Hessian is symmetric).

    Returns:
        ``(func(*inputs), hvp)``: the value in the shape ``func`` gave it, ``hvp`` shaped as ``inputs``.
    """
    return _hessian_product(func, inputs, v, create_graph, strict, "hvp")


def _hessian_product(func: Callable, inputs, v, create_graph: bool, strict: bool, function: str):
    with enable_grad():
        inputs_are_tuple, inputs = _as_tensors(inputs, "inputs", function)
        inputs = _leaves(inputs, create_graph, need_graph=True)
        v = _vector_like_inputs(v, inputs, inputs_are_tuple, create_graph, function)
        output = _single_output(func, function, strict, squeeze=False)(*inputs)
        first = _autograd_grad((output,), inputs, None, create_graph=True)
        _check_requires_grad(first, "jacobian", strict)
    with set_grad_enabled(create_graph or is_grad_enabled()):
        found = _autograd_grad(first, inputs, v, create_graph)
        # hvp's words are those of PyTorch's double-backward trick, which it uses where this transposes.
        stage = "double_back" if function == "vhp" else "double_back_trick"
        products = _fill_in_zeros(found, inputs, strict, create_graph, stage)
    return _finished(output, create_graph), _unpacked(_finished(products, create_graph), inputs_are_tuple)

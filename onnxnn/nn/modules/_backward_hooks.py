"""The machinery of module backward hooks, after PyTorch's ``torch.utils.hooks.BackwardHook``.

Full backward hooks: the tensors going into and out of a module are passed through one identity
``onnxnn.autograd.Function`` each way (``BackwardHookFunction``); a pre-hook on the output node
sees the gradients of the module's outputs, a hook on the input node sees the gradients of its
inputs and may replace them. The deprecated ``register_backward_hook`` attaches to the node that
made the module's output instead, with PyTorch's warnings where that misses gradients.
"""

from __future__ import annotations

import warnings
from typing import Callable

from ...autograd.function import Function
from ...ir.mode import MODE
from ...runtime.autograd import Function as BackwardNode
from ...runtime.tensor import Tensor
from ._wrapped_hook import _WrappedHook

__all__ = ["BackwardHook", "BackwardHookFunction", "attach_non_full_backward_hooks"]

_NO_INPUT_GRAD_WARNING = (
    "Full backward hook is firing when gradients are computed with respect to module outputs since no "
    "inputs require gradients. See https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html"
    "#torch.nn.Module.register_full_backward_hook for more details."
)


class BackwardHookFunction(Function):
    """The identity that module backward hooks attach to (PyTorch's ``BackwardHookFunction``).

    Its outputs are new handles on the very Values of its inputs, so no ONNX node is recorded
    and compiled graphs (and their cache keys) are the same with or without hooks.
    """

    @staticmethod
    def forward(ctx, *tensors: Tensor) -> tuple:
        return tensors

    @staticmethod
    def backward(ctx, *grad_outputs: Tensor) -> tuple:
        return grad_outputs


class BackwardHook:
    """Calls a module's full backward (pre-)hooks with the gradients of its inputs and outputs.

    One instance serves one call of the module: ``setup_input_hook`` wraps the positional tensor
    arguments, ``setup_output_hook`` wraps the outputs. In backward the output node's pre-hook
    records ``grad_output`` (after the backward pre-hooks had their say), then the input node's
    hook calls the full backward hooks, whose result replaces ``grad_input``.
    """

    def __init__(self, module, user_hooks: list, user_pre_hooks: list):
        self.module = module
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self.grad_outputs = None
        self.n_outputs = -1
        self.output_tensors_index: list | None = None
        self.n_inputs = -1
        self.input_tensors_index: list | None = None
        self.frozen_inputs: list = []

    @staticmethod
    def _pack_with_none(indices: list, values, size: int) -> tuple:
        packed = [None] * size
        for index, value in zip(indices, values):
            packed[index] = value
        return tuple(packed)

    @staticmethod
    def _unpack_none(indices: list, values) -> tuple:
        return tuple(values[index] for index in indices)

    def _apply_on_tensors(self, attach: Callable, args: tuple) -> tuple[tuple, list | None]:
        """Passes the tensors among ``args`` that require grad through one ``BackwardHookFunction``.

        Returns the new arguments and the positions that went through the node (None when
        nothing requires grad); ``attach`` gets the node. The other tensors get None gradients.
        """
        if not MODE.grad.enabled:
            return args, None
        differentiable = [i for i, arg in enumerate(args) if isinstance(arg, Tensor) and arg.requires_grad]
        if not differentiable:
            return args, None
        new_tensors = BackwardHookFunction.apply(*(args[i] for i in differentiable))
        attach(new_tensors[0].grad_fn)
        arguments = list(args)
        for position, tensor in zip(differentiable, new_tensors):
            arguments[position] = tensor
        return tuple(arguments), differentiable

    def setup_input_hook(self, args: tuple) -> tuple:
        """Wraps the tensor arguments; the node's hook will call the user's full backward hooks."""
        result, self.input_tensors_index = self._apply_on_tensors(self._set_user_hook, args)
        self.n_inputs = len(args)
        # PyTorch's grad_input holds zeros for a tensor argument that does not require grad (None
        # for any other argument): their positions and what their zeros are.
        self.frozen_inputs = [
            (position, arg.shape, arg.dtype, arg.device)
            for position, arg in enumerate(args)
            if isinstance(arg, Tensor) and not arg.requires_grad
        ]
        return result

    def _set_user_hook(self, function: BackwardNode) -> None:
        def hook(grad_inputs, _grad_outputs):
            if self.grad_outputs is None:
                # The gradient reached the inputs without passing through the outputs
                # (e.g. double backward): PyTorch calls no module hook then either.
                return None
            packed = self._pack_with_none(self.input_tensors_index, grad_inputs, self.n_inputs)
            if self.frozen_inputs:
                filled = list(packed)
                for position, shape, dtype, device in self.frozen_inputs:
                    filled[position] = Tensor._zeros(tuple(shape), dtype, device)
                packed = tuple(filled)
            for user_hook in self.user_hooks:
                replaced = user_hook(self.module, packed, self.grad_outputs)
                if replaced is None:
                    continue
                if len(replaced) != len(packed):
                    raise RuntimeError(
                        "Backward hook returned an invalid number of grad_input, "
                        f"got {len(replaced)}, but expected {len(packed)}"
                    )
                packed = tuple(replaced)
            self.grad_outputs = None
            return self._unpack_none(self.input_tensors_index, packed)

        function.register_hook(hook)

    def setup_output_hook(self, outputs):
        """Wraps the module's outputs; the node's pre-hook records (and may replace) grad_output."""
        is_tuple = isinstance(outputs, tuple)
        args = outputs if is_tuple else (outputs,)
        result, self.output_tensors_index = self._apply_on_tensors(self._set_output_pre_hook, args)
        self.n_outputs = len(args)
        return result if is_tuple else result[0]

    def _set_output_pre_hook(self, function: BackwardNode) -> None:
        def pre_hook(grad_outputs):
            self.grad_outputs = self._pack_with_none(self.output_tensors_index, grad_outputs, self.n_outputs)
            for user_pre_hook in self.user_pre_hooks:
                replaced = user_pre_hook(self.module, self.grad_outputs)
                if replaced is None:
                    continue
                if len(replaced) != len(self.grad_outputs):
                    raise RuntimeError(
                        "Backward pre hook returned an invalid number of grad_output, "
                        f"got {len(replaced)}, but expected {len(self.grad_outputs)}"
                    )
                self.grad_outputs = tuple(replaced)
            local_grad_outputs = self.grad_outputs
            if self.input_tensors_index is None:
                # No input requires grad: no input node will run, so the hooks run here, with
                # PyTorch's warning that they fire for the outputs' gradients.
                warnings.warn(_NO_INPUT_GRAD_WARNING, stacklevel=2)
                grad_inputs = self._pack_with_none([], [], self.n_inputs)
                for user_hook in self.user_hooks:
                    replaced = user_hook(self.module, grad_inputs, self.grad_outputs)
                    if replaced is not None and not (
                        isinstance(replaced, tuple) and all(item is None for item in replaced)
                    ):
                        raise RuntimeError(
                            "Backward hook for Modules where no input requires gradient "
                            "should always return None or None for all gradients."
                        )
                self.grad_outputs = None
            return self._unpack_none(self.output_tensors_index, local_grad_outputs)

        function.register_prehook(pre_hook)


def _first_tensor(result):
    value = result
    while not isinstance(value, Tensor):
        if isinstance(value, dict):
            value = next(v for v in value.values() if isinstance(v, Tensor))
        else:
            value = value[0]
    return value


def _warn_non_full_backward_hook(inputs, result, grad_fn) -> None:
    """PyTorch's warnings for the deprecated ``register_backward_hook``: say which grads it misses."""
    if not isinstance(result, Tensor):
        if not (isinstance(result, tuple) and all(isinstance(r, Tensor) for r in result)):
            warnings.warn(
                "Using non-full backward hooks on a Module that does not return a single Tensor "
                "or a tuple of Tensors is deprecated and will be removed in future versions. This "
                "hook will be missing some of the grad_output. Please use "
                "register_full_backward_hook to get the documented behavior.",
                FutureWarning,
                stacklevel=4,
            )
            return
    else:
        result = (result,)
    if not isinstance(inputs, Tensor):
        if not (isinstance(inputs, tuple) and all(isinstance(i, Tensor) for i in inputs)):
            warnings.warn(
                "Using non-full backward hooks on a Module that does not take as input a single "
                "Tensor or a tuple of Tensors is deprecated and will be removed in future versions. "
                "This hook will be missing some of the grad_input. Please use "
                "register_full_backward_hook to get the documented behavior.",
                FutureWarning,
                stacklevel=4,
            )
            return
    else:
        inputs = (inputs,)
    output_functions = {id(r.grad_fn) for r in result if r.grad_fn is not None}
    if not output_functions or (len(output_functions) == 1 and id(grad_fn) not in output_functions):
        warnings.warn(
            "Using a non-full backward hook when outputs are nested in python data structure is "
            "deprecated and will be removed in future versions. This hook will be missing some "
            "grad_output.",
            FutureWarning,
            stacklevel=4,
        )
    elif len(output_functions) > 1:
        warnings.warn(
            "Using a non-full backward hook when outputs are generated by different autograd Nodes "
            "is deprecated and will be removed in future versions. This hook will be missing some "
            "grad_output. Please use register_full_backward_hook to get the documented behavior.",
            FutureWarning,
            stacklevel=4,
        )
    else:
        input_functions = {id(i.grad_fn) for i in inputs if i.grad_fn is not None}
        next_functions = {id(edge[0]) for edge in grad_fn._edges if edge is not None}
        if input_functions != next_functions:
            warnings.warn(
                "Using a non-full backward hook when the forward contains multiple autograd Nodes "
                "is deprecated and will be removed in future versions. This hook will be missing "
                "some grad_input. Please use register_full_backward_hook to get the documented "
                "behavior.",
                FutureWarning,
                stacklevel=4,
            )


def attach_non_full_backward_hooks(module, hooks: list, args: tuple, result) -> None:
    grad_fn = _first_tensor(result).grad_fn
    if grad_fn is None or not isinstance(grad_fn, BackwardNode):
        return
    for hook in hooks:
        grad_fn.register_hook(_WrappedHook(hook, module))
    _warn_non_full_backward_hook(args, result, grad_fn)

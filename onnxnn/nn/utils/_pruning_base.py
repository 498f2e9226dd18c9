"""The pruning machinery shared by every method: ``BasePruningMethod`` and ``PruningContainer``.

``BasePruningMethod.apply`` moves a parameter ``name`` to ``name + "_orig"``, registers the
``name + "_mask"`` buffer and the method as the forward pre-hook that recomputes ``name``;
pruning a tensor again composes the methods in a ``PruningContainer``. The concrete methods and
the functions users call are in :mod:`onnxnn.nn.utils.prune`, which re-exports these classes.
"""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from ...runtime.internal import constant_tensor
from ...runtime.tensor import Tensor
from ..modules.module import Module

__all__ = ["BasePruningMethod", "PruningContainer"]


# ---------------------------------------------------------------------- numpy <-> tensor
def _array(tensor: Tensor) -> np.ndarray:
    """The realized values of ``tensor`` as a writable numpy array (masks are computed on data)."""
    return np.array(tensor.numpy(force=True))


def _tensor_like(array: np.ndarray, like: Tensor) -> Tensor:
    """A leaf tensor holding ``array`` with the dtype and device of ``like``."""
    return constant_tensor(np.asarray(array, dtype=like.dtype.numpy_dtype, order="C"), like.dtype, like.device)


# ---------------------------------------------------------------------- amount checks
def _validate_pruning_amount_init(amount) -> None:
    """Refuses an amount that is neither a non-negative int nor a float in [0, 1]."""
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
        not isinstance(amount, numbers.Integral) and not 0.0 <= float(amount) <= 1.0
    ):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative integer")


def _validate_pruning_amount(amount, tensor_size: int) -> None:
    """Refuses an absolute amount larger than the number of units there are to prune."""
    if isinstance(amount, numbers.Integral) and int(amount) > tensor_size:
        raise ValueError(f"amount={amount} should be smaller than the number of parameters to prune={tensor_size}")


def _compute_nparams_toprune(amount, tensor_size: int) -> int:
    """The number of units to prune: ``amount`` itself (int) or rounded fraction of ``tensor_size``."""
    if isinstance(amount, numbers.Integral):
        return int(amount)
    return round(amount * tensor_size)


def _validate_structured_pruning(t: Tensor) -> None:
    if len(t.shape) <= 1:
        raise ValueError(
            "Structured pruning can only be applied to multidimensional tensors. "
            f"Found tensor of shape {tuple(t.shape)} with {len(t.shape)} dims"
        )


def _validate_pruning_dim(t: Tensor, dim: int) -> None:
    if dim >= len(t.shape) or dim < -len(t.shape):
        raise IndexError(f"Invalid index {dim} for tensor of size {tuple(t.shape)}")


def _channel_slice(ndim: int, dim: int, channels) -> tuple:
    index: list[Any] = [slice(None)] * ndim
    index[dim] = channels
    return tuple(index)


# ---------------------------------------------------------------------- the base class
class BasePruningMethod(ABC):
    """Abstract base class for the creation of new pruning techniques.

    A subclass sets ``PRUNING_TYPE`` ("unstructured", "structured" or "global": how a
    :class:`PruningContainer` hands it the entries still unpruned) and implements
    :meth:`compute_mask`. The instance is the forward pre-hook that recomputes the pruned tensor.
    """

    PRUNING_TYPE: str
    _tensor_name: str | None = None

    def __call__(self, module: Module, inputs) -> None:
        """Recomputes ``module.<name>`` as ``<name>_orig * <name>_mask`` (the forward pre-hook)."""
        setattr(module, self._tensor_name, self.apply_mask(module))  # type: ignore[arg-type]

    @abstractmethod
    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """Computes the mask for ``t``, on top of ``default_mask`` (the mask of earlier prunings).

        Args:
            t: the tensor to prune (or its importance scores).
            default_mask: mask from previous pruning iterations, same shape as ``t``; entries it
                zeroes stay zero.

        Returns:
            The mask to apply to ``t``, of the same shape.
        """

    def apply_mask(self, module: Module) -> Tensor:
        """Returns the pruned tensor ``<name>_mask * <name>_orig`` of ``module`` (recorded, differentiable).

        Args:
            module: the module holding the pruned tensor.
        """
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned")
        mask = getattr(module, self._tensor_name + "_mask")
        orig = getattr(module, self._tensor_name + "_orig")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module: Module, name: str, *args, importance_scores: Tensor | None = None, **kwargs):
        """Prunes ``module.<name>`` with a new ``cls(*args, **kwargs)`` and registers the reparametrization.

        A tensor already pruned gets the new method composed with the old ones in a
        :class:`PruningContainer`. On any error the module is left as it was.

        Args:
            module: module containing the tensor to prune.
            name: parameter name within ``module``.
            args, kwargs: arguments of the pruning method's constructor.
            importance_scores: tensor of the parameter's shape whose values rank the entries
                (default: the parameter itself).

        Returns:
            The pruning method now registered as the forward pre-hook.
        """
        old_keys = [
            key
            for key, hook in module._forward_pre_hooks.items()
            if isinstance(hook, BasePruningMethod) and hook._tensor_name == name
        ]
        if len(old_keys) > 1:
            raise AssertionError(
                f"Avoid adding multiple pruning hooks to the same tensor {name} of module {module}. "
                "Use a PruningContainer."
            )
        new_method = cls(*args, **kwargs)
        new_method._tensor_name = name
        old_method = module._forward_pre_hooks[old_keys[0]] if old_keys else None
        method: BasePruningMethod = new_method
        previous_methods = None
        if isinstance(old_method, PruningContainer):
            previous_methods = old_method._pruning_methods
            old_method.add_pruning_method(new_method)
            method = old_method
        elif old_method is not None:
            method = PruningContainer(old_method)
            method.add_pruning_method(new_method)

        orig = getattr(module, name)
        if importance_scores is not None and tuple(importance_scores.shape) != tuple(orig.shape):
            if previous_methods is not None:
                old_method._pruning_methods = previous_methods  # type: ignore[union-attr]
            raise AssertionError(
                f"importance_scores should have the same shape as parameter {name} of {module}, "
                f"got {tuple(importance_scores.shape)} vs {tuple(orig.shape)}"
            )
        scores = importance_scores if importance_scores is not None else orig
        first_pruning = old_method is None
        if first_pruning:
            default_mask = _tensor_like(np.ones(tuple(orig.shape)), orig)
        else:
            default_mask = _tensor_like(_array(getattr(module, name + "_mask")), orig)
        old_mask = None if first_pruning else module._buffers[name + "_mask"]
        try:
            mask = method.compute_mask(scores, default_mask=default_mask)
            if first_pruning:
                module.register_parameter(name + "_orig", orig)
                del module._parameters[name]
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
        except Exception:
            if first_pruning:
                if name + "_orig" in module._parameters:
                    del module._parameters[name + "_orig"]
                module._buffers.pop(name + "_mask", None)
                module.__dict__.pop(name, None)
                module.register_parameter(name, orig)
            else:
                module._buffers[name + "_mask"] = old_mask
                setattr(module, name, old_method.apply_mask(module))  # type: ignore[union-attr]
                if previous_methods is not None:
                    old_method._pruning_methods = previous_methods  # type: ignore[union-attr]
            raise
        # Only now that everything succeeded is the old hook replaced (torch drops it up front).
        for key in old_keys:
            del module._forward_pre_hooks[key]
        module.register_forward_pre_hook(method)
        return method

    def prune(self, t: Tensor, default_mask: Tensor | None = None, importance_scores: Tensor | None = None) -> Tensor:
        """Returns ``t`` pruned by this method's :meth:`compute_mask` (the module is not involved).

        Args:
            t: tensor to prune.
            default_mask: mask from a previous pruning, if any (default: ones).
            importance_scores: tensor of ``t``'s shape that ranks the entries (default: ``t``).
        """
        if importance_scores is not None:
            if tuple(importance_scores.shape) != tuple(t.shape):
                raise AssertionError(
                    "importance_scores should have the same shape as tensor t, "
                    f"got {tuple(importance_scores.shape)} vs {tuple(t.shape)}"
                )
        else:
            importance_scores = t
        if default_mask is None:
            default_mask = _tensor_like(np.ones(tuple(t.shape)), t)
        return t * self.compute_mask(importance_scores, default_mask=default_mask)

    def remove(self, module: Module) -> None:
        """Makes the pruning permanent: ``<name>`` becomes a Parameter holding the masked values.

        ``<name>_orig`` and ``<name>_mask`` are removed. The pruned entries stay zero; the caller
        removes the hook itself (as :func:`remove` does).
        """
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned before pruning can be removed")
        weight = self.apply_mask(module)
        if self._tensor_name in module.__dict__:
            delattr(module, self._tensor_name)
        orig = module._parameters[self._tensor_name + "_orig"]
        if orig is None:
            raise AssertionError(f"Module {module} has no parameter {self._tensor_name}_orig to restore")
        orig.data = weight.data
        del module._parameters[self._tensor_name + "_orig"]
        del module._buffers[self._tensor_name + "_mask"]
        setattr(module, self._tensor_name, orig)


# ---------------------------------------------------------------------- the container
class PruningContainer(BasePruningMethod):
    """A sequence of pruning methods for iterative pruning of one tensor.

    Its mask is the last method's mask computed on the entries (or channels) the earlier masks
    kept, combined with the earlier masks. Built by :meth:`BasePruningMethod.apply` when a tensor is
    pruned a second time.

    Args:
        *args: the pruning methods, all acting on the same tensor name.
    """

    def __init__(self, *args) -> None:
        self._pruning_methods: tuple[BasePruningMethod, ...] = ()
        if len(args) >= 1 and isinstance(args[0], BasePruningMethod):
            self._tensor_name = args[0]._tensor_name
        for method in args:
            self.add_pruning_method(method)

    def add_pruning_method(self, method: BasePruningMethod | None) -> None:
        """Adds a child pruning ``method`` (acting on the same tensor name) to the container."""
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and self._tensor_name != method._tensor_name:
            raise ValueError(
                f"Can only add pruning methods acting on the parameter named '{self._tensor_name}' "
                f"to PruningContainer {self}. Found '{method._tensor_name}'"
            )
        self._pruning_methods += (method,)  # type: ignore[operator]

    def __len__(self) -> int:
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, index):
        return self._pruning_methods[index]

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """Applies the newest method to the part of ``t`` the previous mask ``default_mask`` keeps.

        "unstructured": the entries where the mask is one; "structured": the channels along the
        method's ``dim`` that still have a nonzero entry; "global": the whole tensor.
        """
        method = self._pruning_methods[-1]
        values = _array(t)
        new_mask = _array(default_mask).astype(t.dtype.numpy_dtype)
        if method.PRUNING_TYPE == "unstructured":
            index: Any = new_mask == 1
        elif method.PRUNING_TYPE == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError("Pruning methods of type 'structured' need to have the attribute `dim` defined.")
            ndim = values.ndim
            dim = method.dim if method.dim >= 0 else ndim + method.dim
            if dim < 0:
                raise IndexError(f"Index is out of bounds for tensor of size {tuple(t.shape)}")
            others = tuple(axis for axis in range(ndim) if axis != dim)
            keep_channel = new_mask.sum(axis=others) != 0
            index = _channel_slice(ndim, dim, keep_channel)
        elif method.PRUNING_TYPE == "global":
            index = (slice(None),) * values.ndim
        else:
            raise ValueError(f"Unrecognized PRUNING_TYPE {method.PRUNING_TYPE}")
        partial = method.compute_mask(_tensor_like(values[index], t), default_mask=_tensor_like(new_mask[index], t))
        new_mask[index] = _array(partial)
        return _tensor_like(new_mask, default_mask)

"""Pruning: ``onnxnn.nn.utils.prune`` (PyTorch's ``torch.nn.utils.prune``).

Pruning a parameter ``name`` of a module reparametrizes it as ``name_orig * name_mask``: the
parameter moves to ``name + "_orig"``, a ``name + "_mask"`` buffer of zeros and ones is
registered, and ``name`` becomes a plain attribute recomputed by a forward pre-hook (the pruning
method itself, kept in ``module._forward_pre_hooks``) before every call. Gradients reach
``name_orig``, zero where the mask is zero. :func:`remove` makes the pruning permanent.

Masks are data, not part of any graph: they are computed with numpy from realized values, so the
methods here never record nodes; random methods draw from onnxnn's generator, so
``onnxnn.manual_seed`` makes them repeat.

Example::

    >>> from onnxnn.nn.utils import prune
    >>> layer = nn.Linear(4, 3)
    >>> prune.l1_unstructured(layer, "weight", amount=0.5)
    >>> sorted(name for name, _ in layer.named_parameters())
    ['bias', 'weight_orig']
    >>> prune.remove(layer, "weight")  # weight is a Parameter again, with its zeros
"""

from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

import numpy as np

from ...ir import random as _random
from ...runtime.internal import constant_tensor
from ...runtime.tensor import Tensor
from ..modules.module import Module

__all__ = [
    "BasePruningMethod",
    "PruningContainer",
    "Identity",
    "RandomUnstructured",
    "L1Unstructured",
    "RandomStructured",
    "LnStructured",
    "CustomFromMask",
    "identity",
    "random_unstructured",
    "l1_unstructured",
    "random_structured",
    "ln_structured",
    "global_unstructured",
    "custom_from_mask",
    "remove",
    "is_pruned",
]


# ---------------------------------------------------------------------- numpy <-> tensor
def _array(tensor: Tensor) -> np.ndarray:
    """The realized values of ``tensor`` as a writable numpy array (masks are computed on data)."""
    return np.array(tensor.numpy(force=True))


def _tensor_like(array: np.ndarray, like: Tensor) -> Tensor:
    """A leaf tensor holding ``array`` with the dtype and device of ``like``."""
    return constant_tensor(np.ascontiguousarray(array, dtype=like.dtype.numpy_dtype), like.dtype, like.device)


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


def _channel_norms(values: np.ndarray, n, dim: int) -> np.ndarray:
    """The ``n``-norm of each slice of ``values`` along ``dim`` (as ``torch.norm(t, p=n, dim=others)``)."""
    channels = np.moveaxis(values, dim, 0).reshape(values.shape[dim], -1).astype(np.float64)
    magnitudes = np.abs(channels)
    if n == "fro":
        n = 2
    if not isinstance(n, numbers.Real) or isinstance(n, bool):
        raise ValueError(f"LnStructured: unsupported norm n={n!r}; use a number, inf, -inf or 'fro'")
    if n == math.inf:
        return magnitudes.max(axis=1)
    if n == -math.inf:
        return magnitudes.min(axis=1)
    if n == 0:
        return (magnitudes != 0).sum(axis=1).astype(np.float64)
    return (magnitudes**n).sum(axis=1) ** (1.0 / n)


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


# ---------------------------------------------------------------------- the methods
class Identity(BasePruningMethod):
    """Leaves the tensor unpruned (a mask of ones), still registering the reparametrization."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        return default_mask

    @classmethod
    def apply(cls, module: Module, name: str):  # type: ignore[override]
        """Adds the identity reparametrization to ``module.<name>``."""
        return super().apply(module, name)


class RandomUnstructured(BasePruningMethod):
    """Prunes entries of a tensor chosen at random (from onnxnn's generator).

    Args:
        amount: fraction (float in [0, 1]) or absolute number (int >= 0) of entries to prune.
    """

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        size = int(np.prod(tuple(t.shape), dtype=np.int64))
        count = _compute_nparams_toprune(self.amount, size)
        _validate_pruning_amount(count, size)
        mask = _array(default_mask)
        if count != 0:
            scores = _random.default_generator.numpy.random(size)
            mask.reshape(-1)[np.argsort(-scores, kind="stable")[:count]] = 0
        return _tensor_like(mask, default_mask)

    @classmethod
    def apply(cls, module: Module, name: str, amount):  # type: ignore[override]
        """Prunes ``amount`` random entries of ``module.<name>``."""
        return super().apply(module, name, amount=amount)


class L1Unstructured(BasePruningMethod):
    """Prunes the entries of smallest absolute value (L1 norm); ties in any order.

    Args:
        amount: fraction (float in [0, 1]) or absolute number (int >= 0) of entries to prune.
    """

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        values = _array(t)
        count = _compute_nparams_toprune(self.amount, values.size)
        _validate_pruning_amount(count, values.size)
        mask = _array(default_mask)
        if count != 0:
            mask.reshape(-1)[np.argsort(np.abs(values).reshape(-1), kind="stable")[:count]] = 0
        return _tensor_like(mask, default_mask)

    @classmethod
    def apply(cls, module: Module, name: str, amount, importance_scores: Tensor | None = None):  # type: ignore[override]
        """Prunes the ``amount`` entries of ``module.<name>`` (or ``importance_scores``) smallest in magnitude."""
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class RandomStructured(BasePruningMethod):
    """Prunes whole channels along ``dim``, chosen at random (from onnxnn's generator).

    Args:
        amount: fraction (float in [0, 1]) or absolute number (int >= 0) of channels to prune.
        dim: the dimension whose slices are the channels. Default: -1.
    """

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim: int = -1) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        channels = int(t.shape[self.dim])
        count = _compute_nparams_toprune(self.amount, channels)
        _validate_pruning_amount(count, channels)
        if count == 0:
            return default_mask
        scores = _random.default_generator.numpy.random(channels)
        keep = np.ones(channels, dtype=bool)
        keep[np.argsort(scores, kind="stable")[:count]] = False
        mask = np.zeros(tuple(t.shape), dtype=t.dtype.numpy_dtype)
        mask[_channel_slice(mask.ndim, self.dim, keep)] = 1
        return _tensor_like(mask * _array(default_mask), default_mask)

    @classmethod
    def apply(cls, module: Module, name: str, amount, dim: int = -1):  # type: ignore[override]
        """Prunes ``amount`` random channels of ``module.<name>`` along ``dim``."""
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(BasePruningMethod):
    """Prunes whole channels along ``dim`` with the smallest L``n`` norm; ties in any order.

    Args:
        amount: fraction (float in [0, 1]) or absolute number (int >= 0) of channels to prune.
        n: the norm's order (a number, ``inf``, ``-inf`` or ``'fro'``), as ``p`` of ``torch.norm``.
        dim: the dimension whose slices are the channels. Default: -1.
    """

    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim: int = -1) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.n = n
        self.dim = dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        channels = int(t.shape[self.dim])
        count = _compute_nparams_toprune(self.amount, channels)
        _validate_pruning_amount(count, channels)
        norms = _channel_norms(_array(t), self.n, self.dim)
        if count == 0:
            return default_mask
        keep = np.zeros(channels, dtype=bool)
        keep[np.argsort(-norms, kind="stable")[: channels - count]] = True
        mask = np.zeros(tuple(t.shape), dtype=t.dtype.numpy_dtype)
        mask[_channel_slice(mask.ndim, self.dim, keep)] = 1
        return _tensor_like(mask * _array(default_mask), default_mask)

    @classmethod
    def apply(  # type: ignore[override]
        cls, module: Module, name: str, amount, n, dim: int, importance_scores: Tensor | None = None
    ):
        """Prunes the ``amount`` channels of ``module.<name>`` along ``dim`` smallest in L``n`` norm."""
        return super().apply(module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes with a given mask (combined with any previous mask).

    Args:
        mask: a tensor of the pruned tensor's shape, zero where entries are pruned.
    """

    PRUNING_TYPE = "global"

    def __init__(self, mask: Tensor) -> None:
        self.mask = mask

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        if tuple(default_mask.shape) != tuple(self.mask.shape):
            raise AssertionError(
                f"mask should have the shape of the pruned tensor, got {tuple(self.mask.shape)} "
                f"vs {tuple(default_mask.shape)}"
            )
        return _tensor_like(_array(default_mask) * _array(self.mask), default_mask)

    @classmethod
    def apply(cls, module: Module, name: str, mask: Tensor):  # type: ignore[override]
        """Prunes ``module.<name>`` where ``mask`` is zero."""
        return super().apply(module, name, mask=mask)


# ---------------------------------------------------------------------- the functions
def identity(module: Module, name: str) -> Module:
    """Applies the pruning reparametrization to ``module.<name>`` without pruning any entry.

    Args:
        module: module containing the tensor to prune.
        name: parameter name within ``module``.

    Returns:
        The modified (input) module.

    Example::

        >>> m = prune.identity(nn.Linear(2, 3), "bias")
        >>> m.bias_mask
    """
    Identity.apply(module, name)
    return module


def random_unstructured(module: Module, name: str, amount) -> Module:
    """Prunes ``amount`` entries of ``module.<name>`` chosen at random.

    Args:
        module: module containing the tensor to prune.
        name: parameter name within ``module``.
        amount: fraction (float in [0, 1]) or absolute number (int >= 0) of entries to prune.

    Returns:
        The modified (input) module.

    Example::

        >>> m = prune.random_unstructured(nn.Linear(2, 3), "weight", amount=1)
        >>> int((m.weight == 0).sum())
        1
    """
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module: Module, name: str, amount, importance_scores: Tensor | None = None) -> Module:
    """Prunes the ``amount`` entries of ``module.<name>`` with the smallest absolute value.

    Args:
        module: module containing the tensor to prune.
        name: parameter name within ``module``.
        amount: fraction (float in [0, 1]) or absolute number (int >= 0) of entries to prune.
        importance_scores: tensor of the parameter's shape ranking the entries (default: the parameter).

    Returns:
        The modified (input) module.

    Example::

        >>> m = prune.l1_unstructured(nn.Linear(2, 3), "weight", amount=0.2)
        >>> m.state_dict().keys()
        odict_keys(['bias', 'weight_orig', 'weight_mask'])
    """
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module: Module, name: str, amount, dim: int) -> Module:
    """Prunes ``amount`` channels of ``module.<name>`` along ``dim`` chosen at random.

    Args:
        module: module containing the tensor to prune.
        name: parameter name within ``module``.
        amount: fraction (float in [0, 1]) or absolute number (int >= 0) of channels to prune.
        dim: the dimension whose slices are the channels.

    Returns:
        The modified (input) module.

    Example::

        >>> m = prune.random_structured(nn.Linear(5, 3), "weight", amount=3, dim=1)
        >>> int((m.weight.abs().sum(0) == 0).sum())
        3
    """
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module: Module, name: str, amount, n, dim: int, importance_scores: Tensor | None = None) -> Module:
    """Prunes the ``amount`` channels of ``module.<name>`` along ``dim`` with the smallest L``n`` norm.

    Args:
        module: module containing the tensor to prune.
        name: parameter name within ``module``.
        amount: fraction (float in [0, 1]) or absolute number (int >= 0) of channels to prune.
        n: the norm's order (a number, ``inf``, ``-inf`` or ``'fro'``).
        dim: the dimension whose slices are the channels (0: a Conv's output channels).
        importance_scores: tensor of the parameter's shape ranking the channels (default: the parameter).

    Returns:
        The modified (input) module.

    Example::

        >>> m = prune.ln_structured(nn.Conv2d(5, 3, 2), "weight", amount=0.3, n=2, dim=0)
    """
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(parameters: Iterable, pruning_method: type, importance_scores: dict | None = None, **kwargs):
    """Prunes the tensors of ``parameters`` together, as one concatenated vector.

    The entries are ranked across every tensor (for ``L1Unstructured``: the globally smallest
    magnitudes go), and each tensor gets its share of the mask through :class:`CustomFromMask`.

    Args:
        parameters: an iterable of ``(module, name)`` pairs.
        pruning_method: an "unstructured" :class:`BasePruningMethod` subclass.
        importance_scores: ``{(module, name): tensor}`` replacing a parameter's values for ranking.
        kwargs: arguments of ``pruning_method`` (``amount=``).

    Raises:
        TypeError: if ``parameters`` is not an iterable, ``importance_scores`` not a dict, or the
            method is not "unstructured".

    Example::

        >>> net = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
        >>> prune.global_unstructured([(net[0], "weight"), (net[1], "weight")],
        ...                           pruning_method=prune.L1Unstructured, amount=10)
    """
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    parameters = list(parameters)
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(
            'Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. '
            f"Found method {pruning_method} of type {method.PRUNING_TYPE}"
        )
    if not parameters:
        return
    tensors = [getattr(module, name) for module, name in parameters]
    scores = [
        _array(importance_scores.get((module, name), tensor)) for (module, name), tensor in zip(parameters, tensors)
    ]
    masks = [
        _array(getattr(module, name + "_mask")) if hasattr(module, name + "_mask") else np.ones(tuple(tensor.shape))
        for (module, name), tensor in zip(parameters, tensors)
    ]
    like = tensors[0]
    container = PruningContainer()
    container._tensor_name = "temp"
    container.add_pruning_method(method)
    final_mask = _array(
        container.compute_mask(
            _tensor_like(np.concatenate([s.reshape(-1) for s in scores]), like),
            _tensor_like(np.concatenate([m.reshape(-1) for m in masks]), like),
        )
    )
    start = 0
    for (module, name), tensor in zip(parameters, tensors):
        count = int(np.prod(tuple(tensor.shape), dtype=np.int64))
        piece = final_mask[start : start + count].reshape(tuple(tensor.shape))
        custom_from_mask(module, name, mask=_tensor_like(piece, tensor))
        start += count


def custom_from_mask(module: Module, name: str, mask: Tensor) -> Module:
    """Prunes ``module.<name>`` where ``mask`` is zero.

    Args:
        module: module containing the tensor to prune.
        name: parameter name within ``module``.
        mask: tensor of the parameter's shape, zero where entries are pruned.

    Returns:
        The modified (input) module.

    Example::

        >>> m = prune.custom_from_mask(nn.Linear(5, 3), "bias", mask=onnxnn.tensor([0.0, 1.0, 0.0]))
    """
    CustomFromMask.apply(module, name, mask=mask)
    return module


def remove(module: Module, name: str) -> Module:
    """Makes the pruning of ``module.<name>`` permanent and removes its reparametrization.

    ``<name>`` becomes a Parameter again holding the pruned values; ``<name>_orig``,
    ``<name>_mask`` and the forward pre-hook are removed. Pruning is not undone.

    Args:
        module: module containing the pruned tensor.
        name: parameter name within ``module``.

    Raises:
        ValueError: if ``module.<name>`` is not pruned.

    Example::

        >>> m = prune.remove(prune.random_unstructured(nn.Linear(5, 7), "weight", amount=0.2), "weight")
    """
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed")


def is_pruned(module: Module) -> bool:
    """Whether ``module`` or any of its submodules has a pruning forward pre-hook.

    Example::

        >>> net = nn.Sequential(nn.Linear(5, 7), nn.ReLU())
        >>> prune.is_pruned(net)
        False
    """
    return any(
        isinstance(hook, BasePruningMethod)
        for _, submodule in module.named_modules()
        for hook in submodule._forward_pre_hooks.values()
    )

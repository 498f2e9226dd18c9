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
from collections.abc import Iterable

import numpy as np

from ...ir import random as _random
from ...runtime.tensor import Tensor
from ..modules.module import Module
from ._pruning_base import (
    BasePruningMethod,
    PruningContainer,
    _array,
    _channel_slice,
    _compute_nparams_toprune,
    _tensor_like,
    _validate_pruning_amount,
    _validate_pruning_amount_init,
    _validate_pruning_dim,
    _validate_structured_pruning,
)

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


def _channel_norms(values: np.ndarray, n, dim: int) -> np.ndarray:
    """The ``n``-norm of each slice of ``values`` along ``dim`` (as ``torch.norm(t, p=n, dim=others)``)."""
    others = math.prod(size for axis, size in enumerate(values.shape) if axis != dim % values.ndim)
    # (not reshape(..., -1): no channels left after an earlier pruning is a valid, empty case)
    channels = np.moveaxis(values, dim, 0).reshape(values.shape[dim], others).astype(np.float64)
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


class _UnstructuredByScore(BasePruningMethod):
    """Prunes the ``amount`` entries of lowest score (``_scores``: one per entry, flat)."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def _scores(self, t: Tensor, size: int) -> np.ndarray:
        raise NotImplementedError

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        size = int(np.prod(tuple(t.shape), dtype=np.int64))
        count = _compute_nparams_toprune(self.amount, size)
        _validate_pruning_amount(count, size)
        mask = _array(default_mask)
        if count != 0:
            mask.reshape(-1)[np.argsort(self._scores(t, size), kind="stable")[:count]] = 0
        return _tensor_like(mask, default_mask)


class RandomUnstructured(_UnstructuredByScore):
    """Prunes entries of a tensor chosen at random (from onnxnn's generator).

    Args:
        amount: fraction (float in [0, 1]) or absolute number (int >= 0) of entries to prune.
    """

    def _scores(self, t: Tensor, size: int) -> np.ndarray:
        return -_random.default_generator.numpy.random(size)

    @classmethod
    def apply(cls, module: Module, name: str, amount):  # type: ignore[override]
        """Prunes ``amount`` random entries of ``module.<name>``."""
        return super().apply(module, name, amount=amount)


class L1Unstructured(_UnstructuredByScore):
    """Prunes the entries of smallest absolute value (L1 norm); ties in any order.

    Args:
        amount: fraction (float in [0, 1]) or absolute number (int >= 0) of entries to prune.
    """

    def _scores(self, t: Tensor, size: int) -> np.ndarray:
        return np.abs(_array(t)).reshape(-1)

    @classmethod
    def apply(cls, module: Module, name: str, amount, importance_scores: Tensor | None = None):  # type: ignore[override]
        """Prunes the ``amount`` entries of ``module.<name>`` (or ``importance_scores``) smallest in magnitude."""
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


def _channels_to_prune(t: Tensor, amount, dim: int) -> tuple[int, int]:
    """``(channels, count)``: how many channels ``t`` has along ``dim`` and how many of them ``amount``
    prunes, after PyTorch's checks of a structured method's tensor, dimension and amount."""
    _validate_structured_pruning(t)
    _validate_pruning_dim(t, dim)
    channels = int(t.shape[dim])
    count = _compute_nparams_toprune(amount, channels)
    _validate_pruning_amount(count, channels)
    return channels, count


def _channel_mask(t: Tensor, dim: int, keep: np.ndarray, default_mask: Tensor) -> Tensor:
    """``default_mask`` with every channel along ``dim`` not in ``keep`` (booleans) zeroed."""
    mask = np.zeros(tuple(t.shape), dtype=t.dtype.numpy_dtype)
    mask[_channel_slice(mask.ndim, dim, keep)] = 1
    return _tensor_like(mask * _array(default_mask), default_mask)


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
        channels, count = _channels_to_prune(t, self.amount, self.dim)
        if count == 0:
            return default_mask
        scores = _random.default_generator.numpy.random(channels)
        keep = np.ones(channels, dtype=bool)
        keep[np.argsort(scores, kind="stable")[:count]] = False
        return _channel_mask(t, self.dim, keep, default_mask)

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
        channels, count = _channels_to_prune(t, self.amount, self.dim)
        norms = _channel_norms(_array(t), self.n, self.dim)
        if count == 0:
            return default_mask
        keep = np.zeros(channels, dtype=bool)
        keep[np.argsort(-norms, kind="stable")[: channels - count]] = True
        return _channel_mask(t, self.dim, keep, default_mask)

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

"""The hook-based weight normalization (PyTorch's ``torch.nn.utils.weight_norm``), deprecated there in
favour of :func:`onnxnn.nn.utils.parametrizations.weight_norm` but still what many published models
call (HiFi-GAN and WaveNet vocoders, for instance), whose checkpoints store ``weight_g`` and ``weight_v``.

The weight is split into the parameters ``<name>_g`` (magnitude) and ``<name>_v`` (direction) and
recomputed as ``g * v / ||v||`` by a forward pre-hook before every call, the same math as the
parametrization's.
"""

from __future__ import annotations

import warnings
from typing import Any, TypeVar

from ...runtime.grad_mode import no_grad
from ...runtime.tensor import Tensor
from ..modules.lazy import UninitializedParameter
from ..modules.module import Module
from ..parameter import Parameter
from .parametrizations import _norm_except_dim, _weight_norm

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm"]

T_module = TypeVar("T_module", bound=Module)


class WeightNorm:
    """The forward pre-hook that recomputes ``module.<name>`` from ``<name>_g`` and ``<name>_v``.

    Args:
        name: the parameter's name.
        dim: the dimension kept by the norm; ``None`` or -1: one norm of the whole tensor.
    """

    name: str
    dim: int

    def __init__(self, name: str, dim: int | None) -> None:
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module: Module) -> Tensor:
        """``g * v / ||v||`` from the module's current ``<name>_g`` and ``<name>_v``."""
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return _weight_norm(v, g, self.dim)

    @staticmethod
    def apply(module: Module, name: str, dim: int | None) -> "WeightNorm":
        """Replaces ``module.<name>`` by ``<name>_g`` and ``<name>_v`` and registers the hook."""
        warnings.warn(
            "`onnxnn.nn.utils.weight_norm` is deprecated in favor of `onnxnn.nn.utils.parametrizations.weight_norm`.",
            FutureWarning,
            stacklevel=3,
        )
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        if isinstance(weight, UninitializedParameter):
            raise ValueError(
                "The module passed to `WeightNorm` can't have uninitialized parameters. "
                "Make sure to run the dummy forward before applying weight normalization"
            )
        if not isinstance(weight, Tensor):
            raise TypeError(f"norm_except_dim(): argument 'v' (position 1) must be Tensor, not {type(weight).__name__}")
        if fn.dim != -1:
            weight.size(fn.dim)  # PyTorch's IndexError for a dim out of range, here before the module changes
        with no_grad():
            g = _norm_except_dim(weight, fn.dim)
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(g))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))  # a plain attribute, recomputed by the hook
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module: Module) -> None:
        """Puts back ``module.<name>`` as a parameter holding the current ``g * v / ||v||``."""
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module: T_module, name: str = "weight", dim: int | None = 0) -> T_module:
    r"""Applies weight normalization to a parameter: ``w = g v / ||v||`` (deprecated in PyTorch).

    The parameter ``name`` is replaced by ``<name>_g`` (the norm, one per slice along ``dim``) and
    ``<name>_v`` (the direction, the weight itself at first); a forward pre-hook recomputes
    ``module.<name>`` from them before every call. The ``state_dict`` keys are ``<name>_g`` and
    ``<name>_v``, as PyTorch's, so checkpoints of models built with it load as they are. Emits a
    ``FutureWarning``: :func:`onnxnn.nn.utils.parametrizations.weight_norm` is the modern form (and
    loads these checkpoints too).

    Args:
        module: the module holding the parameter.
        name: the parameter's name. Default: ``"weight"``.
        dim: the dimension kept by the norm (negative counts from the end); ``None``: one norm of
            the whole tensor. Default: 0 (one per output channel of a Linear or Conv).

    Returns:
        ``module``, with the hook registered.

    Raises:
        RuntimeError: ``name`` already has a weight_norm hook.
        IndexError: ``dim`` out of range.

    Example::

        >>> m = nn.utils.weight_norm(nn.Linear(20, 40), name="weight")
        >>> m.weight_g.size()
        onnxnn.Size([40, 1])
        >>> m.weight_v.size()
        onnxnn.Size([40, 20])
    """
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module: T_module, name: str = "weight") -> T_module:
    """Removes the weight normalization of ``name``, leaving a plain parameter with its current value.

    Args:
        module: the module holding the parameter.
        name: the parameter's name. Default: ``"weight"``.

    Returns:
        ``module``.

    Raises:
        ValueError: ``name`` has no weight_norm hook.

    Example::

        >>> m = nn.utils.weight_norm(nn.Linear(20, 40))
        >>> m = nn.utils.remove_weight_norm(m)
    """
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")

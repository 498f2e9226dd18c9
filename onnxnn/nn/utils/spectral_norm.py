"""The hook-based spectral normalization (PyTorch's ``torch.nn.utils.spectral_norm``), which PyTorch
keeps beside :func:`onnxnn.nn.utils.parametrizations.spectral_norm`; GAN checkpoints store its
``weight_orig``, ``weight_u`` and ``weight_v``.

The parameter becomes ``<name>_orig``; the buffers ``<name>_u`` and ``<name>_v`` hold the power
method's estimates of the first left and right singular vectors of the weight seen as a
(size(dim), -1) matrix. Before every call a forward pre-hook sets ``module.<name>`` to
``<name>_orig / sigma`` with ``sigma = u^T W v``, after ``n_power_iterations`` steps of the power
method in training mode (none in eval mode). A ``state_dict`` records the layout's version in its
metadata, and checkpoints of the version before it (which stored ``<name>`` and no ``<name>_v``) are
converted when loaded.
"""

from __future__ import annotations

from typing import Any, TypeVar

from ...runtime.grad_mode import no_grad
from ...runtime.tensor import Tensor
from ..functional import normalize
from ..modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from ..modules.lazy import UninitializedParameter
from ..modules.module import Module
from ..parameter import Parameter
from .parametrizations import _reshape_weight_to_matrix

__all__ = [
    "SpectralNorm",
    "SpectralNormLoadStateDictPreHook",
    "SpectralNormStateDictHook",
    "spectral_norm",
    "remove_spectral_norm",
]

T_module = TypeVar("T_module", bound=Module)


class SpectralNorm:
    """The forward pre-hook that sets ``module.<name>`` to ``<name>_orig`` divided by its spectral norm.

    Before and after each training-mode call ``u = normalize(W v)``. Version 1 of the layout (the
    current one) keeps ``<name>`` out of the ``state_dict``, stores ``<name>_v`` and reads ``sigma``
    as ``u^T W v`` in eval mode too.

    Args:
        name: the parameter's name.
        n_power_iterations: power-method steps per training-mode call (positive).
        dim: the dimension of output channels (non-negative).
        eps: the smallest norm a vector is divided by.
    """

    _version: int = 1
    name: str
    dim: int
    n_power_iterations: int
    eps: float

    def __init__(self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        self.name = name
        self.dim = dim
        if n_power_iterations <= 0:
            raise ValueError(
                f"Expected n_power_iterations to be positive, but got n_power_iterations={n_power_iterations}"
            )
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        """``weight`` as a (size(dim), -1) matrix."""
        return _reshape_weight_to_matrix(weight, self.dim)

    def compute_weight(self, module: Module, do_power_iteration: bool) -> Tensor:
        """``<name>_orig / (u^T W v)``, after updating ``u`` and ``v`` in place when ``do_power_iteration``."""
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            # In place: the buffers stay the module's objects (and the state_dict's tensors).
            with no_grad():
                for _ in range(self.n_power_iterations):
                    # W^T u as u W: the same product without a Transpose node.
                    v.copy_(normalize(u @ weight_mat, dim=0, eps=self.eps))
                    u.copy_(normalize(weight_mat.mv(v), dim=0, eps=self.eps))
            # Copies, so that a later call's update does not change what this call's backward saved
            # (two forwards, one backward: a GAN discriminator's real and fake passes).
            u, v = u.clone(), v.clone()
        sigma = u.dot(weight_mat.mv(v))
        return weight / sigma

    def remove(self, module: Module) -> None:
        """Puts back ``module.<name>`` as a parameter holding the normalized weight (no power iteration)."""
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))

    def _solve_v_and_rescale(self, weight_mat: Tensor, u: Tensor, target_sigma: Tensor) -> Tensor:
        """A ``v`` with ``u = normalize(W v)`` (least squares, through a pseudo-inverse in case W^T W
        is singular), scaled so that ``u^T W v = target_sigma``."""
        v = (weight_mat.t().mm(weight_mat).pinverse() @ weight_mat.t() @ u.unsqueeze(1)).squeeze(1)
        return v * (target_sigma / u.dot(weight_mat.mv(v)))

    @staticmethod
    def apply(module: Module, name: str, n_power_iterations: int, dim: int, eps: float) -> "SpectralNorm":
        """Moves ``module.<name>`` to ``<name>_orig``, adds the ``u``/``v`` buffers and registers the hooks."""
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]
        if weight is None:
            raise ValueError(f"`SpectralNorm` cannot be applied as parameter `{name}` is None")
        if isinstance(weight, UninitializedParameter):
            raise ValueError(
                "The module passed to `SpectralNorm` can't have uninitialized parameters. "
                "Make sure to run the dummy forward before applying spectral normalization"
            )
        ndim = weight.dim()
        if not -ndim <= dim < ndim:
            raise IndexError(
                f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}], but got {dim})"
            )
        fn.dim = dim % ndim
        with no_grad():
            weight_mat = fn.reshape_weight_to_matrix(weight)
            h, w = weight_mat.shape
            # Random unit vectors to start the power method from.
            u = normalize(weight.new_empty(h).normal_(0, 1), dim=0, eps=fn.eps)
            v = normalize(weight.new_empty(w).normal_(0, 1), dim=0, eps=fn.eps)
        delattr(module, fn.name)
        module.register_parameter(fn.name + "_orig", weight)
        # ``module.<name>`` exists from the start (code may read it, to initialize it say), as a plain
        # attribute: assigned as a Parameter it would be registered again.
        setattr(module, fn.name, weight.detach())
        module.register_buffer(fn.name + "_u", u)
        module.register_buffer(fn.name + "_v", v)
        module.register_forward_pre_hook(fn)
        module._register_state_dict_hook(SpectralNormStateDictHook(fn))
        module._register_load_state_dict_pre_hook(SpectralNormLoadStateDictPreHook(fn))
        return fn


class SpectralNormLoadStateDictPreHook:
    """Converts a ``state_dict`` of version 0 (``<name>``, ``<name>_orig``, ``<name>_u``; no ``<name>_v``).

    After a training-mode call ``u = normalize(W_orig v)`` and ``W = W_orig / sigma``: ``sigma`` is
    read back as ``mean(W_orig / W)`` and ``v`` solved from ``W_orig v ~ u``, scaled to
    ``u^T W_orig v = sigma``. A ``state_dict`` without version metadata but with the three current
    keys and no ``<name>`` is taken as current (a hand-made one).
    """

    def __init__(self, fn: SpectralNorm) -> None:
        self.fn = fn

    def __call__(
        self,
        state_dict: dict,
        prefix: str,
        local_metadata: dict,
        strict: bool,
        missing_keys: list,
        unexpected_keys: list,
        error_msgs: list,
    ) -> None:
        fn = self.fn
        version = local_metadata.get("spectral_norm", {}).get(fn.name + ".version", None)
        if version is not None and version >= 1:
            return
        weight_key = prefix + fn.name
        if (
            version is None
            and all(weight_key + suffix in state_dict for suffix in ("_orig", "_u", "_v"))
            and weight_key not in state_dict
        ):
            return
        has_missing_keys = False
        for suffix in ("_orig", "", "_u"):
            key = weight_key + suffix
            if key not in state_dict:
                has_missing_keys = True
                if strict:
                    missing_keys.append(key)
        if has_missing_keys:
            return
        with no_grad():
            weight_orig = state_dict[weight_key + "_orig"]
            weight = state_dict.pop(weight_key)
            sigma = (weight_orig / weight).mean()
            weight_mat = fn.reshape_weight_to_matrix(weight_orig)
            u = state_dict[weight_key + "_u"]
            state_dict[weight_key + "_v"] = fn._solve_v_and_rescale(weight_mat, u, sigma)


class SpectralNormStateDictHook:
    """Writes the layout's version into the ``state_dict``'s metadata:
    ``metadata[prefix]["spectral_norm"]["<name>.version"]``."""

    def __init__(self, fn: SpectralNorm) -> None:
        self.fn = fn

    def __call__(self, module: Module, state_dict: dict, prefix: str, local_metadata: dict) -> None:
        if "spectral_norm" not in local_metadata:
            local_metadata["spectral_norm"] = {}
        key = self.fn.name + ".version"
        if key in local_metadata["spectral_norm"]:
            raise RuntimeError(f"Unexpected key in metadata['spectral_norm']: {key}")
        local_metadata["spectral_norm"][key] = self.fn._version


def spectral_norm(
    module: T_module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12, dim: int | None = None
) -> T_module:
    r"""Applies spectral normalization to a parameter: ``W / sigma(W)``, sigma estimated by power iteration.

    The parameter ``name`` moves to ``<name>_orig``; the buffers ``<name>_u`` and ``<name>_v`` hold
    the singular-vector estimates (random unit vectors at first). A forward pre-hook sets
    ``module.<name>`` to ``<name>_orig / (u^T W v)`` before every call, after ``n_power_iterations``
    power-method steps in training mode (``v = normalize(W^T u)``, then ``u = normalize(W v)``, in
    place) and none in eval mode. The ``state_dict`` keys and metadata are PyTorch's, so its
    checkpoints load as they are. :func:`onnxnn.nn.utils.parametrizations.spectral_norm` is the
    modern form.

    Args:
        module: the module holding the parameter.
        name: the parameter's name. Default: ``"weight"``.
        n_power_iterations: power-method steps per training-mode call. Default: 1.
        eps: the smallest norm a vector is divided by. Default: ``1e-12``.
        dim: the dimension of output channels (negative counts from the end). Default: 1 for
            ``ConvTranspose1d/2d/3d``, 0 otherwise.

    Returns:
        ``module``, with the hooks registered.

    Raises:
        RuntimeError: ``name`` already has a spectral_norm hook.
        KeyError: ``module`` has no parameter ``name``.
        ValueError: ``n_power_iterations`` not positive, or the parameter is None or uninitialized.
        IndexError: ``dim`` out of range.

    Example::

        >>> m = nn.utils.spectral_norm(nn.Linear(20, 40))
        >>> m.weight_u.size()
        onnxnn.Size([40])
    """
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module: T_module, name: str = "weight") -> T_module:
    """Removes the spectral normalization of ``name``, leaving a plain parameter with the normalized weight.

    The weight is ``<name>_orig / (u^T W v)`` with the current estimates (no power iteration). The
    hooks on ``state_dict`` and ``load_state_dict`` go too.

    Args:
        module: the module holding the parameter.
        name: the parameter's name. Default: ``"weight"``.

    Returns:
        ``module``.

    Raises:
        ValueError: ``name`` has no spectral_norm hook.

    Example::

        >>> m = nn.utils.spectral_norm(nn.Linear(40, 10))
        >>> m = nn.utils.remove_spectral_norm(m)
    """
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            break
    else:
        raise ValueError(f"spectral_norm of '{name}' not found in {module}")
    for key, hook in module._state_dict_hooks.items():
        if isinstance(hook, SpectralNormStateDictHook) and hook.fn.name == name:
            del module._state_dict_hooks[key]
            break
    for key, hook in module._load_state_dict_pre_hooks.items():
        # Registered wrapped (``_WrappedHook``): the hook itself is its ``hook``. PyTorch 2.13 tests
        # the wrapper and so keeps the hook, after which the module's own state_dict no longer loads.
        inner = getattr(hook, "hook", hook)
        if isinstance(inner, SpectralNormLoadStateDictPreHook) and inner.fn.name == name:
            del module._load_state_dict_pre_hooks[key]
            break
    return module

"""``autocast``: ops in a region run in float16 or bfloat16 where that is safe, as ``torch.autocast``.

The state (enabled and dtype per device type, the cast cache switch, the nesting depth) is per
thread, as PyTorch's. Recording consults it through one slot, ``MODE.autocast``: while no thread
has autocast enabled the slot is None and recording pays one attribute read; while some thread
has, the slot holds :func:`_autocast_inputs`, which reads the calling thread's state and casts an
op's floating inputs as ``op_lists`` says. The casts are ordinary recorded ``Cast`` ops, so
gradients flow through them to float32 parameters and exported graphs keep them.
"""

from __future__ import annotations

import collections.abc
import contextlib
import functools
import threading
import warnings
from typing import Any, Callable, Literal, TypeVar

import numpy as np

from ..ir import dtypes
from ..ir.device import cuda_is_available
from ..ir.mode import MODE
from ..runtime.recomputation import register_recomputation_state
from ..runtime.tensor import Tensor, apply_op
from .op_lists import FP32, LOWER_PRECISION_FP, PROMOTE, policy_for

__all__ = [
    "autocast",
    "is_autocast_available",
    "is_autocast_enabled",
    "set_autocast_enabled",
    "get_autocast_dtype",
    "set_autocast_dtype",
    "is_autocast_cache_enabled",
    "set_autocast_cache_enabled",
    "clear_autocast_cache",
    "custom_fwd",
    "custom_bwd",
]

_DEVICE_TYPES = ("cpu", "cuda")
_DEFAULT_DTYPES = {"cpu": dtypes.bfloat16, "cuda": dtypes.float16}
_SUPPORTED_DTYPES = (dtypes.bfloat16, dtypes.float16)
# The floating types autocast casts; float64 is left alone, as PyTorch leaves it.
_CASTABLE = frozenset({dtypes.float32, dtypes.float16, dtypes.bfloat16})

F = TypeVar("F", bound=Callable[..., Any])


class _AutocastState(threading.local):
    """One thread's autocast state (a new thread starts with autocast disabled)."""

    def __init__(self):
        self.enabled = dict.fromkeys(_DEVICE_TYPES, False)
        self.dtype = dict(_DEFAULT_DTYPES)
        self.cache_enabled = True
        self.nesting = 0
        # Casts of leaf parameters, reused while the outermost autocast region lasts: a weight
        # used by several ops is cast once (PyTorch's weight cache). Keyed by the tensor's id with
        # the tensor itself held, so the id cannot be reused while the entry lives; and by the
        # dtype, since a nested region may cast to the other low dtype.
        self.cache: dict[tuple[int, dtypes.dtype], tuple[Tensor, int, Tensor]] = {}
        self.counted = False  # whether this thread counts among those with autocast enabled


_STATE = _AutocastState()
_ACTIVE_THREADS = 0
_ACTIVE_LOCK = threading.Lock()


def _refresh_slot() -> None:
    """Sets ``MODE.autocast`` from whether any thread has autocast enabled for some device type."""
    global _ACTIVE_THREADS
    state = _STATE
    active = any(state.enabled.values())
    if active == state.counted:
        return
    with _ACTIVE_LOCK:
        _ACTIVE_THREADS += 1 if active else -1
        state.counted = active
        MODE.autocast = _autocast_inputs if _ACTIVE_THREADS > 0 else None


def _check_device_type(device_type: str) -> str:
    """The device type ``device_type`` names: "cpu" or "cuda", with an index allowed ("cpu:0"), as
    PyTorch parses it."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    kind, colon, index = device_type.partition(":")
    if colon and not (index.isascii() and index.isdigit()):
        raise RuntimeError(f"Invalid device string: '{device_type}'")
    if kind not in _DEVICE_TYPES:
        raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")
    return kind


def is_autocast_available(device_type: str) -> bool:
    """Whether autocast knows ``device_type`` ("cpu" and "cuda", with or without an index)."""
    try:
        _check_device_type(device_type)
    except (ValueError, RuntimeError):
        return False
    return True


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether autocast is enabled for ``device_type`` in this thread ("cuda" when None, as PyTorch).

    Example::

        >>> with onnxnn.autocast("cpu"):
        ...     onnxnn.is_autocast_enabled("cpu")
        True
    """
    if device_type is None:
        device_type = "cuda"
    return _STATE.enabled[_check_device_type(device_type)]


def set_autocast_enabled(device_type: str, enabled: bool) -> None:
    """Enables or disables autocast for ``device_type`` in this thread (prefer :class:`autocast`)."""
    _STATE.enabled[_check_device_type(device_type)] = bool(enabled)
    _refresh_slot()


def get_autocast_dtype(device_type: str) -> dtypes.dtype:
    """The dtype low-precision ops run in under autocast for ``device_type`` in this thread.

    Example::

        >>> onnxnn.get_autocast_dtype("cpu")
        onnxnn.bfloat16
    """
    return _STATE.dtype[_check_device_type(device_type)]


def set_autocast_dtype(device_type: str, dtype: dtypes.dtype) -> None:
    """Sets the autocast dtype of ``device_type`` in this thread (prefer :class:`autocast`)."""
    _STATE.dtype[_check_device_type(device_type)] = dtypes.as_dtype(dtype)


def is_autocast_cache_enabled() -> bool:
    """Whether casts of parameters are cached inside autocast regions in this thread."""
    return _STATE.cache_enabled


def set_autocast_cache_enabled(enabled: bool) -> None:
    """Turns the cache of parameter casts on or off in this thread."""
    _STATE.cache_enabled = bool(enabled)


def clear_autocast_cache() -> None:
    """Drops this thread's cached parameter casts (done on leaving the outermost region)."""
    _STATE.cache.clear()


class autocast:
    """A region (context manager or decorator) in which ops run in a lower-precision dtype.

    Inside, ops on tensors of ``device_type`` follow PyTorch's autocast lists (``onnxnn.amp.op_lists``):
    matrix products and convolutions cast their floating inputs to ``dtype``; ops that need range
    or accuracy cast them to float32; ops that need one dtype cast them to the widest one. The casts
    are recorded ``Cast`` ops: gradients reach float32 parameters as float32, and exported graphs
    contain them. Regions nest (``autocast(..., enabled=False)`` inside turns it off) and the state
    is per thread. Run ``backward()`` outside the region; gradient ops are never autocast.

    Args:
        device_type: "cpu" or "cuda" (an index, as in "cpu:0", is allowed and ignored): autocast
            applies to ops on tensors of that device type.
        dtype: float16 or bfloat16; None is ``get_autocast_dtype(device_type)`` (bfloat16 on
            CPU, float16 on CUDA unless changed). Another dtype warns and disables the region.
        enabled: False makes the region disable autocast (for ``device_type``) instead.
        cache_enabled: whether casts of leaf parameters are reused within the region; None is
            ``is_autocast_cache_enabled()``.

    Raises:
        ValueError: ``device_type`` is not a string.
        RuntimeError: ``device_type`` names neither "cpu" nor "cuda".

    Example::

        >>> model = onnxnn.nn.Linear(4, 2)
        >>> with onnxnn.autocast("cpu", dtype=onnxnn.bfloat16):
        ...     y = model(onnxnn.randn(3, 4))
        >>> y.dtype
        onnxnn.bfloat16
    """

    def __init__(
        self,
        device_type: str,
        dtype: dtypes.dtype | None = None,
        enabled: bool = True,
        cache_enabled: bool | None = None,
    ):
        kind = _check_device_type(device_type)
        self.device = device_type  # as given ("cpu:0"), as PyTorch keeps it
        self._device_type = kind
        self.fast_dtype = get_autocast_dtype(kind) if dtype is None else dtypes.as_dtype(dtype)
        self._cache_enabled = is_autocast_cache_enabled() if cache_enabled is None else bool(cache_enabled)
        if enabled:
            if kind == "cuda" and not cuda_is_available():
                warnings.warn("CUDA is not available. Disabling autocast.", stacklevel=2)
                enabled = False
            elif self.fast_dtype not in _SUPPORTED_DTYPES:
                name = kind.upper()
                warnings.warn(
                    f"In {name} autocast, but the target dtype is not supported. Disabling autocast.\n"
                    f"{name} Autocast only supports dtypes of onnxnn.bfloat16, onnxnn.float16 currently.",
                    stacklevel=2,
                )
                enabled = False
        self._enabled = bool(enabled)

    def __enter__(self) -> autocast:
        state = _STATE
        kind = self._device_type
        self.prev_cache_enabled = state.cache_enabled
        self.prev = state.enabled[kind]
        self.prev_fastdtype = state.dtype[kind]
        state.enabled[kind] = self._enabled
        state.dtype[kind] = self.fast_dtype
        state.nesting += 1
        state.cache_enabled = self._cache_enabled
        _refresh_slot()
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> Literal[False]:
        state = _STATE
        state.nesting -= 1
        if state.nesting == 0:
            state.cache.clear()  # casts cached for the region die with the outermost one
        state.enabled[self._device_type] = self.prev
        state.dtype[self._device_type] = self.prev_fastdtype
        state.cache_enabled = self.prev_cache_enabled
        _refresh_slot()
        return False

    def __call__(self, func: F) -> F:
        if not callable(func):
            raise TypeError(
                f"autocast()(func) requires a callable, but got {type(func).__name__}. "
                "Did you mean to use autocast as a context manager? For example:\n"
                "    with onnxnn.autocast(device_type=...):\n"
                "        output = model(input)"
            )

        @functools.wraps(func)
        def decorated(*args, **kwargs):
            with self:
                return func(*args, **kwargs)

        return decorated  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"autocast(device_type={self.device!r}, dtype={self.fast_dtype}, enabled={self._enabled})"


def custom_fwd(fwd: Callable | None = None, *, device_type: str, cast_inputs: dtypes.dtype | None = None) -> Callable:
    """Decorates the ``forward`` of a custom :class:`onnxnn.autograd.Function` for autocast, as
    ``torch.amp.custom_fwd``.

    Inside an autocast region for ``device_type``, ``cast_inputs=None`` runs ``forward`` with the
    region's state (its ops are cast as anywhere else), while a dtype casts the floating tensor
    arguments of that device type (float64 ones excepted, also inside lists, tuples and dicts) to
    it and runs ``forward`` with autocast disabled. Outside a region it changes nothing. Either way
    it records the state on ``ctx`` for :func:`custom_bwd`.

    Args:
        fwd: the ``forward``; omitted when used as ``@custom_fwd(device_type=...)``.
        device_type: "cpu" or "cuda".
        cast_inputs: the dtype to run ``forward`` in, or None.

    Raises:
        ValueError: ``device_type`` is not a string.

    Example::

        >>> class Scale(onnxnn.autograd.Function):
        ...     @staticmethod
        ...     @onnxnn.amp.custom_fwd(device_type="cpu", cast_inputs=onnxnn.float32)
        ...     def forward(ctx, x):
        ...         return x * 2
        ...
        ...     @staticmethod
        ...     @onnxnn.amp.custom_bwd(device_type="cpu")
        ...     def backward(ctx, grad):
        ...         return grad * 2
        >>> with onnxnn.autocast("cpu"):
        ...     Scale.apply(onnxnn.ones(2, dtype=onnxnn.bfloat16)).dtype
        onnxnn.float32
    """
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
    target = None if cast_inputs is None else dtypes.as_dtype(cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = get_autocast_dtype(device_type)
        if target is None:
            ctx._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        ctx._fwd_used_autocast = False
        if not is_autocast_enabled(device_type):
            return fwd(*args, **kwargs)
        with autocast(device_type, enabled=False):
            kind = _check_device_type(device_type)
            return fwd(*_cast_inputs(args, kind, target), **_cast_inputs(kwargs, kind, target))

    return decorate_fwd


def custom_bwd(bwd: Callable | None = None, *, device_type: str) -> Callable:
    """Decorates the ``backward`` of a custom :class:`onnxnn.autograd.Function` whose ``forward``
    :func:`custom_fwd` decorates: ``backward`` runs in the autocast state ``forward`` ran in (its
    ops cast as they would be in that region), as ``torch.amp.custom_bwd``.

    Args:
        bwd: the ``backward``; omitted when used as ``@custom_bwd(device_type=...)``.
        device_type: "cpu" or "cuda".

    Raises:
        ValueError: ``device_type`` is not a string.
    """
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        grad_mode = MODE.grad
        with autocast(device_type, enabled=ctx._fwd_used_autocast, dtype=ctx._dtype):
            # Autocast leaves the ops of a backward as they are, except forward code run again in
            # it (``recomputing``), which the user's backward is here.
            grad_mode.recomputing += 1
            try:
                return bwd(*args, **kwargs)
            finally:
                grad_mode.recomputing -= 1

    return decorate_bwd


def _cast_inputs(value: Any, device_type: str, dtype: dtypes.dtype) -> Any:
    """``value`` with its floating tensors of ``device_type`` (float64 excepted) cast to ``dtype``,
    through lists, tuples, dicts and other iterables (strings and arrays left whole), as PyTorch's."""
    if isinstance(value, Tensor):
        eligible = value.is_floating_point() and value.device.type == device_type and value.dtype is not dtypes.float64
        return value.to(dtype) if eligible else value
    if isinstance(value, (str, bytes, np.ndarray)):
        return value
    if isinstance(value, collections.abc.Mapping):
        return {_cast_inputs(k, device_type, dtype): _cast_inputs(v, device_type, dtype) for k, v in value.items()}
    if isinstance(value, collections.abc.Iterable):
        items = (_cast_inputs(item, device_type, dtype) for item in value)
        return type(value)(items) if isinstance(value, (list, tuple)) else items
    return value


def _captured_regions() -> Callable[[], contextlib.ExitStack]:
    """This thread's autocast state now, as what re-enters it: a region per device type (enabled
    or not), as PyTorch's checkpoint re-enters the first call's state in its recomputation."""
    state = _STATE
    settings = [(device, state.dtype[device], state.enabled[device]) for device in _DEVICE_TYPES]
    cache_enabled = state.cache_enabled

    def regions() -> contextlib.ExitStack:
        stack = contextlib.ExitStack()
        for device, dtype, enabled in settings:
            stack.enter_context(autocast(device, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled))
        return stack

    return regions


register_recomputation_state(_captured_regions)


def _device_type_of(inputs: tuple) -> str | None:
    for item in inputs:
        if isinstance(item, Tensor):
            return item.device.type
    return None


def _autocast_inputs(op_type: str, inputs: tuple, domain: str, name: str | None) -> tuple:
    """``MODE.autocast``: ``inputs`` cast as the op's autocast policy says, for this thread."""
    grad_mode = MODE.grad
    if domain or (grad_mode.in_backward and not grad_mode.recomputing) or grad_mode.autocast_paused:
        # Gradient ops run in the dtypes their forward ops ran in (a checkpoint's recomputation of
        # forward ops inside a backward is cast as the first call was); an op autocast does not list
        # (runtime.tensor.outside_autocast) runs its own products as its inputs come.
        return inputs
    state = _STATE
    device_type = _device_type_of(inputs)
    if device_type is None or not state.enabled.get(device_type, False):
        return inputs
    policy = policy_for(device_type, op_type, name)
    if policy is None:
        return inputs
    low = state.dtype[device_type]
    if policy is LOWER_PRECISION_FP:
        target = low
    elif policy is FP32:
        target = dtypes.float32
    elif policy is PROMOTE:
        target = low
        for item in inputs:
            if isinstance(item, Tensor) and item.dtype in _CASTABLE:
                target = dtypes.promote_types(target, item.dtype)
    else:
        raise RuntimeError(f"unknown autocast policy {policy!r} for {op_type}")
    if not any(isinstance(item, Tensor) and item.dtype in _CASTABLE and item.dtype is not target for item in inputs):
        return inputs
    return tuple(_cast(item, target, low, state) if isinstance(item, Tensor) else item for item in inputs)


def _cast(tensor: Tensor, target: dtypes.dtype, low: dtypes.dtype, state: _AutocastState) -> Tensor:
    if tensor.dtype not in _CASTABLE or tensor.dtype is target:
        return tensor
    # Only float32 leaf parameters cast to the low dtype are cached, as PyTorch's weight cache;
    # under no_grad a cast has no grad_fn, so caching it would cut later gradients off.
    cacheable = (
        state.cache_enabled
        and target is low
        and tensor.dtype is dtypes.float32
        and tensor.requires_grad
        and tensor.is_leaf
        and MODE.grad.enabled
    )
    key = (id(tensor), target)
    if cacheable:
        entry = state.cache.get(key)
        if entry is not None and entry[0] is tensor and entry[1] == tensor._version:
            return entry[2]
    cast = apply_op("Cast", (tensor,), {"to": target}, "ToCopyBackward0")
    if cacheable:
        state.cache[key] = (tensor, tensor._version, cast)
    return cast

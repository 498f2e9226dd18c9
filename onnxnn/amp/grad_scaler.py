"""``GradScaler``: loss scaling for float16 training, with PyTorch's ``torch.amp.GradScaler`` semantics.

A float16 gradient underflows to zero where its float32 counterpart would not. Scaling the loss
by ``S`` scales every gradient by ``S``; ``unscale_`` divides them back (in float32, the
parameters' dtype) and notes whether any is inf or NaN; ``step`` skips the optimizer's step
when one is; ``update`` backs the scale off after such a step and grows it after
``growth_interval`` steps in a row without one.
"""

from __future__ import annotations

import enum
import math
import warnings
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..ir import dtypes
from ..ir.device import cuda_is_available
from ..optim.optimizer import Optimizer
from ..runtime import creation
from ..runtime.grad_mode import no_grad
from ..runtime.tensor import Tensor

__all__ = ["GradScaler", "OptState"]


class OptState(enum.Enum):
    """Where an optimizer is in one iteration: nothing done, gradients unscaled, stepped."""

    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _refresh_per_optimizer_state() -> dict[str, Any]:
    return {"stage": OptState.READY, "found_inf_per_device": {}}


class GradScaler:
    """Scales the loss so that low-precision gradients do not underflow, and steps only on finite ones.

    Args:
        device: the device type of the scaled losses ("cuda" or "cpu"). With "cuda" and no CUDA
            device the scaler warns and is disabled.
        init_scale: the first scale factor.
        growth_factor: what the scale is multiplied by after ``growth_interval`` iterations in a
            row without inf or NaN gradients (must be > 1).
        backoff_factor: what the scale is multiplied by after an iteration with inf or NaN
            gradients (must be < 1).
        growth_interval: the number of such iterations before the scale grows.
        enabled: False makes every method a pass-through (``scale`` returns its input, ``step``
            calls ``optimizer.step()``, ``update`` does nothing).

    Raises:
        AssertionError: ``growth_factor <= 1`` or ``backoff_factor >= 1`` (as PyTorch).

    Example::

        >>> scaler = onnxnn.amp.GradScaler("cpu")
        >>> for x, y in data:
        ...     optimizer.zero_grad()
        ...     with onnxnn.autocast("cpu", dtype=onnxnn.float16):
        ...         loss = loss_fn(model(x), y)
        ...     scaler.scale(loss).backward()
        ...     scaler.step(optimizer)
        ...     scaler.update()
    """

    def __init__(
        self,
        device: str = "cuda",
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        self._device = device
        self._enabled = enabled
        if device == "cuda" and enabled and not cuda_is_available():
            warnings.warn("onnxnn.amp.GradScaler is enabled, but CUDA is not available.  Disabling.", stacklevel=2)
            self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
            self._init_scale = init_scale
            self._scale: Tensor | None = None  # made by the first scale(), on the loss's device
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker: Tensor | None = None
            self._per_optimizer_states: defaultdict[int, dict[str, Any]] = defaultdict(_refresh_per_optimizer_state)

    def _check_scale_growth_tracker(self, funcname: str) -> tuple[Tensor, Tensor]:
        fix = "This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration."
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  " + fix)
        if self._growth_tracker is None:
            raise AssertionError(f"Attempted {funcname} but _growth_tracker is None.  " + fix)
        return self._scale, self._growth_tracker

    def _lazy_init_scale_growth_tracker(self, device) -> None:
        self._scale = creation.full((), self._init_scale, dtype=dtypes.float32, device=device)
        self._growth_tracker = creation.full((), self._init_growth_tracker, dtype=dtypes.int32, device=device)

    def scale(self, outputs):
        """Multiplies ``outputs`` (a tensor, or nested lists/tuples/iterables of them) by the scale factor.

        Returns:
            The scaled outputs, in the same structure; ``outputs`` unchanged when disabled.

        Raises:
            ValueError: something in ``outputs`` is neither a tensor nor an iterable.
        """
        if not self._enabled:
            return outputs

        def apply_scale(value):
            if isinstance(value, Tensor):
                if self._scale is None:
                    self._lazy_init_scale_growth_tracker(value.device)
                assert self._scale is not None
                return value * self._scale.to(value.device)
            if isinstance(value, Iterable):
                scaled = map(apply_scale, value)
                if isinstance(value, (list, tuple)):
                    return type(value)(scaled)
                return scaled
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")

        return apply_scale(outputs)

    def _unscale_grads_(self, optimizer: Optimizer, inv_scale: Tensor, allow_fp16: bool) -> dict:
        """Multiplies every gradient by ``inv_scale`` in place; per device, 1.0 if any is inf or NaN."""
        found_inf_per_device: dict = {}
        with no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    if not isinstance(param, Tensor):
                        raise AssertionError(f"expected param to be onnxnn.Tensor, got {type(param).__name__}")
                    grad = param.grad
                    if grad is None:
                        continue
                    if not allow_fp16 and grad.dtype is dtypes.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    device = grad.device
                    # The check and the product in float32 at least, as PyTorch's kernel computes them.
                    widened = grad if grad.dtype in (dtypes.float32, dtypes.float64) else grad.float()
                    non_finite = (~widened.isfinite()).any().to(dtypes.float32)
                    previous = found_inf_per_device.get(device)
                    found_inf_per_device[device] = non_finite if previous is None else previous + non_finite
                    grad.copy_(widened * inv_scale.to(device))
        return found_inf_per_device

    def unscale_(self, optimizer: Optimizer) -> None:
        """Divides ``optimizer``'s gradients by the scale factor, in place (once per iteration).

        Call it between ``backward()`` and ``step()`` to read or clip the true gradients;
        ``step`` calls it when it was not called.

        Raises:
            RuntimeError: it was already called for this optimizer since the last ``update()``,
                or ``step()`` was.
            ValueError: a gradient is float16 (the parameters must be float32).
        """
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        optimizer_state = self._per_optimizer_states[id(optimizer)]
        if optimizer_state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if optimizer_state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        assert self._scale is not None
        inv_scale = self._scale.double().reciprocal().float()
        optimizer_state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, False)
        optimizer_state["stage"] = OptState.UNSCALED

    def _maybe_opt_step(self, optimizer: Optimizer, optimizer_state: dict, *args: Any, **kwargs: Any):
        found_inf = sum(value.item() for value in optimizer_state["found_inf_per_device"].values())
        if not found_inf:
            return optimizer.step(*args, **kwargs)
        return None

    def step(self, optimizer: Optimizer, *args: Any, **kwargs: Any):
        """Unscales the gradients (unless ``unscale_`` did) and runs ``optimizer.step()`` if they are finite.

        Returns:
            What ``optimizer.step`` returned, or None when the step was skipped.

        Raises:
            RuntimeError: ``closure`` is passed, or ``step`` was already called since ``update()``.
        """
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        optimizer_state = self._per_optimizer_states[id(optimizer)]
        if optimizer_state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if optimizer_state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if len(optimizer_state["found_inf_per_device"]) == 0:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        result = self._maybe_opt_step(optimizer, optimizer_state, *args, **kwargs)
        optimizer_state["stage"] = OptState.STEPPED
        return result

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Updates the scale factor for the next iteration and starts a new one.

        Without ``new_scale``: multiplies the scale by ``backoff_factor`` if any optimizer saw
        inf or NaN gradients this iteration, else counts a good iteration and multiplies it by
        ``growth_factor`` when ``growth_interval`` of them came in a row.

        Args:
            new_scale: a float, or a one-element float32 tensor not requiring grad, to set the
                scale to directly.
        """
        if not self._enabled:
            return
        scale, growth_tracker = self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, float):
                scale.fill_(new_scale)
            else:
                reason = "new_scale should be a float or a 1-element onnxnn.FloatTensor with requires_grad=False."
                if not isinstance(new_scale, Tensor) or new_scale.device.type != scale.device.type:
                    raise AssertionError(reason)
                if new_scale.numel() != 1 or new_scale.requires_grad:
                    raise AssertionError(reason)
                scale.copy_(new_scale.reshape(()))
        else:
            found_infs = [
                found_inf
                for state in self._per_optimizer_states.values()
                for found_inf in state["found_inf_per_device"].values()
            ]
            if len(found_infs) == 0:
                raise AssertionError("No inf checks were recorded prior to update.")
            found_inf = sum(value.item() for value in found_infs)
            self._update_scale(scale, growth_tracker, found_inf)
        self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    def _update_scale(self, scale: Tensor, growth_tracker: Tensor, found_inf: float) -> None:
        """PyTorch's ``_amp_update_scale_``: back off on inf, grow after ``growth_interval`` good steps."""
        current = scale.item()
        if found_inf:
            scale.fill_(current * self._backoff_factor)
            growth_tracker.fill_(0)
            return
        successful = int(growth_tracker.item()) + 1
        if successful == self._growth_interval:
            # Rounded to float32 before the check, as the scale is stored.
            with np.errstate(over="ignore"):
                grown = float(np.float32(current * self._growth_factor))
            if math.isfinite(grown):
                scale.fill_(grown)
            successful = 0
        growth_tracker.fill_(successful)

    def get_scale(self) -> float:
        """The current scale factor (``init_scale`` before the first ``scale()``; 1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale.item())

    def get_growth_factor(self) -> float:
        """The scale growth factor."""
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        """Sets the scale growth factor."""
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        """The scale backoff factor."""
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        """Sets the scale backoff factor."""
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        """The number of good iterations in a row after which the scale grows."""
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        """Sets the number of good iterations in a row after which the scale grows."""
        self._growth_interval = new_interval

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else int(self._growth_tracker.item())

    def is_enabled(self) -> bool:
        """Whether the scaler is enabled."""
        return self._enabled

    def state_dict(self) -> dict[str, Any]:
        """The scaler's state: ``scale``, ``growth_factor``, ``backoff_factor``, ``growth_interval``,
        ``_growth_tracker`` (empty when disabled). Save it after ``update()``."""
        if not self._enabled:
            return {}
        return {
            "scale": self.get_scale(),
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._get_growth_tracker(),
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Loads a state from :meth:`state_dict`.

        Raises:
            RuntimeError: ``state_dict`` is empty (saved from a disabled scaler).
            KeyError: an entry is missing; nothing is changed then.
        """
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError(
                "The source state dict is empty, possibly because it was saved from a disabled instance of GradScaler."
            )
        keys = ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker")
        missing = [key for key in keys if key not in state_dict]
        if missing:
            raise KeyError(f"GradScaler state_dict is missing {missing}")
        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:
            self._scale.fill_(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(state_dict["_growth_tracker"])

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if self._enabled:
            if len(self._per_optimizer_states) != 0:
                raise AssertionError(
                    "A GradScaler instance may only be pickled at the beginning "
                    "of an iteration, or at the end after scaler.update()."
                )
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._get_growth_tracker()
            state["_scale"] = None
            state["_growth_tracker"] = None
            state["_per_optimizer_states"] = None  # a defaultdict of a local function: rebuilt on load
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self._enabled:
            self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

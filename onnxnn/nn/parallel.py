"""``onnxnn.nn.parallel``: PyTorch's single-process ``DataParallel`` wrapper.

onnxnn runs one process per device, so ``DataParallel`` never scatters a batch: it calls the wrapped
module (on the one CUDA device when there is one), keeping PyTorch's ``module.`` prefix in the
``state_dict``. Training on several devices is ``onnxnn.distributed.DistributedDataParallel``'s job
(one process per device, launched with ``mpiexec``); it lives in ``onnxnn.distributed`` because
``onnxnn.nn`` sits below that package.
"""

from __future__ import annotations

from itertools import chain
from typing import Any, Sequence

from ..ir.device import as_device, cuda_is_available, device
from ..runtime.tensor import Tensor
from .modules.module import Module

__all__ = ["DataParallel"]


def _device_index(value: int | str | device) -> int:
    """A CUDA device's index, from an int, a ``"cuda:1"`` string or a device (PyTorch's errors)."""
    if isinstance(value, int):
        return value
    target = as_device(value)
    if target.type == "cpu":
        raise ValueError(f"Expected a non cpu device, but got: {target}")
    return 0 if target.index is None else target.index


def _to_device(value: Any, target: device) -> Any:
    """``value`` with every tensor in it (through tuples, lists and dicts) moved to ``target``."""
    if isinstance(value, Tensor):
        return value.to(target)
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
        return type(value)(*(_to_device(item, target) for item in value))
    if isinstance(value, (tuple, list)):
        return type(value)(_to_device(item, target) for item in value)
    if isinstance(value, dict):
        return type(value)((key, _to_device(item, target)) for key, item in value.items())
    return value


class DataParallel(Module):
    """Wraps a module as PyTorch's ``nn.DataParallel`` does, for one process on one device.

    PyTorch splits each batch along ``dim`` across the GPUs of ``device_ids``, runs a replica of
    the module on each and gathers the outputs. onnxnn does not scatter: a process drives one
    device (onnxruntime's CUDA provider, or the CPU), so the wrapper calls the module on the whole
    batch. Without a CUDA device it is a plain call, as PyTorch's on a machine without GPUs. With
    one, the module is moved to ``device_ids[0]``, the inputs' tensors too, as PyTorch's does for a
    single device. For several devices use ``onnxnn.distributed.DistributedDataParallel``, one
    process per device.

    The wrapped module is the submodule ``module``, so the ``state_dict`` keys start with
    ``module.`` exactly as PyTorch's (checkpoints saved from DataParallel models load both ways).

    Args:
        module: the module to wrap.
        device_ids: CUDA devices (ints, ``"cuda:0"`` strings or devices). Default: all of them
            (onnxnn sees at most one). Ignored without CUDA.
        output_device: where outputs go when ``device_ids`` names more than one device.
            Default: ``device_ids[0]``.
        dim: the batch dimension PyTorch scatters along; kept as an attribute.

    Attributes:
        module: the wrapped module.
        device_ids: the CUDA device indices (empty without CUDA).

    Raises:
        AssertionError: a device index that does not exist here.
        RuntimeError: (at a call) the module's parameters or buffers are not on ``device_ids[0]``.

    Example::

        >>> model = nn.DataParallel(nn.Linear(4, 2))
        >>> list(model.state_dict())
        ['module.weight', 'module.bias']
        >>> model(onnxnn.randn(3, 4)).shape
        onnxnn.Size([3, 2])
    """

    def __init__(
        self,
        module: Module,
        device_ids: Sequence[int | str | device] | None = None,
        output_device: int | str | device | None = None,
        dim: int = 0,
    ) -> None:
        super().__init__()
        self.dim = dim
        if not cuda_is_available():
            self.module = module
            self.device_ids: list[int] = []
            return
        if device_ids is None:
            device_ids = [0]  # onnxnn drives one CUDA device per process
        if output_device is None:
            output_device = device_ids[0]
        self.module = module
        self.device_ids = [_device_index(value) for value in device_ids]
        for index in self.device_ids:
            if index != 0:
                raise AssertionError("Invalid device id")
        self.output_device = _device_index(output_device)
        self.src_device_obj = device("cuda", self.device_ids[0])
        if len(self.device_ids) == 1:
            self.module.to(self.src_device_obj)

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        for tensor in chain(self.module.parameters(), self.module.buffers()):
            if tensor.device != self.src_device_obj:
                raise RuntimeError(
                    "module must have its parameters and buffers "
                    f"on device {self.src_device_obj} (device_ids[0]) but found one of "
                    f"them on device: {tensor.device}"
                )
        output = self.module(*_to_device(inputs, self.src_device_obj), **_to_device(kwargs, self.src_device_obj))
        if len(self.device_ids) == 1:
            return output
        return _to_device(output, device("cpu") if self.output_device == -1 else device("cuda", self.output_device))

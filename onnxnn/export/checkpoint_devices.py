"""Where loaded tensors go: ``map_location`` of :func:`onnxnn.load`, as PyTorch's ``torch.load`` reads it."""

from __future__ import annotations

from ..ir.device import as_device, cuda_is_available, device

__all__ = ["DeviceMap"]


class _StorageStandIn:
    """What a callable ``map_location`` gets for the storage: its moves only choose a device."""

    def __init__(self, chosen: str = "cpu"):
        self.device = chosen

    def cpu(self) -> "_StorageStandIn":
        return _StorageStandIn("cpu")

    def cuda(self, index=None, non_blocking: bool = False) -> "_StorageStandIn":
        return _StorageStandIn("cuda" if index is None else f"cuda:{int(index)}")

    def to(self, target, *args, **kwargs) -> "_StorageStandIn":
        return _StorageStandIn(str(target))


def _chosen_device(choose, location: str) -> device:
    """The device a PyTorch-style ``map_location(storage, location)`` moves a storage saved at ``location`` to."""
    result = choose(_StorageStandIn(), location)
    if result is None:  # PyTorch's "leave it where it was saved"
        return device(location)
    if not isinstance(result, _StorageStandIn):
        raise TypeError(
            f"map_location returned a {type(result).__name__}: onnxnn calls it with a stand-in storage and "
            "reads the device it is moved to (storage, storage.cpu(), storage.cuda(i) or storage.to(device))"
        )
    return as_device(result.device)


def _is_torch_device(value) -> bool:
    return type(value).__name__ == "device" and hasattr(value, "type")


def _target_device(value) -> device:
    """A device ``map_location`` names: onnxnn's, a string or a CUDA index (``as_device``), or a ``torch.device``."""
    return as_device(str(value)) if _is_torch_device(value) else as_device(value)


class DeviceMap:
    """Resolves the location a tensor was saved from to the device ``map_location`` asks for."""

    def __init__(self, map_location):
        self._target = None
        self._table: dict[str, device] = {}
        self._choose = None
        if isinstance(map_location, dict):
            self._table = {str(key): _target_device(value) for key, value in map_location.items()}
        elif isinstance(map_location, (str, device)) or _is_torch_device(map_location):
            self._target = _target_device(map_location)
        elif callable(map_location):
            self._choose = map_location
        elif map_location is not None:
            raise TypeError(
                "map_location should be None, a device, a device string, a dict of locations or a "
                f"callable, got {type(map_location).__name__}"
            )
        self._resolved: dict[str, device] = {}

    def __call__(self, location: str) -> device:
        resolved = self._resolved.get(location)
        if resolved is not None:
            return resolved
        if self._target is not None:
            resolved = self._target
        elif self._choose is not None:
            resolved = _chosen_device(self._choose, location)
        elif location in self._table:
            resolved = self._table[location]
        else:
            try:
                resolved = device(location)
            except RuntimeError:
                raise RuntimeError(
                    f"don't know how to restore data location {location!r}: pass map_location, e.g. map_location='cpu'"
                ) from None
        if resolved.type == "cuda" and not cuda_is_available():
            raise RuntimeError(
                "Attempting to deserialize object on a CUDA device but onnxnn.cuda.is_available() "
                "is False. If you are running on a CPU-only machine, please use onnxnn.load with "
                "map_location='cpu' to map your tensors to the CPU."
            )
        self._resolved[location] = resolved
        return resolved

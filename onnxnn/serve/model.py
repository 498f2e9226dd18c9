"""A served model: an onnxruntime session, its protocol metadata, and the checks of a request against it."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .codec import datatype_of
from .errors import BadRequest, ModelUnavailable

__all__ = ["ServedModel", "TensorSpec", "load_model", "parse_model_argument"]

# onnxruntime's type strings, "tensor(float)", to numpy.
_ORT_TYPES = {
    "tensor(bool)": np.bool_,
    "tensor(uint8)": np.uint8,
    "tensor(uint16)": np.uint16,
    "tensor(uint32)": np.uint32,
    "tensor(uint64)": np.uint64,
    "tensor(int8)": np.int8,
    "tensor(int16)": np.int16,
    "tensor(int32)": np.int32,
    "tensor(int64)": np.int64,
    "tensor(float16)": np.float16,
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
}


@dataclass(frozen=True)
class TensorSpec:
    """An input or output: its name, dtype and shape, ``-1`` for a dynamic axis."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]

    def metadata(self) -> dict:
        return {"name": self.name, "datatype": datatype_of(self.dtype), "shape": list(self.shape)}


def _spec(node_arg) -> TensorSpec:
    if node_arg.type not in _ORT_TYPES:
        raise ValueError(f"'{node_arg.name}' is a {node_arg.type}, which the server does not serve")
    # Symbolic ("batch") and unknown (None) dimensions are both dynamic for the protocol.
    shape = tuple(d if isinstance(d, int) and d >= 0 else -1 for d in node_arg.shape)
    return TensorSpec(node_arg.name, np.dtype(_ORT_TYPES[node_arg.type]), shape)


@dataclass
class ServedModel:
    """One model of the server. ``session`` is None when loading failed; ``error`` then says why.

    ``batchable`` is True when every input and output has a dynamic first axis, so that requests
    can be stacked along it.
    """

    name: str
    path: str
    version: str = "1"
    session: Any = None  # an onnxruntime.InferenceSession (onnxruntime has no type stubs)
    inputs: list[TensorSpec] = field(default_factory=list)
    outputs: list[TensorSpec] = field(default_factory=list)
    error: str | None = None

    @property
    def ready(self) -> bool:
        return self.session is not None

    @property
    def batchable(self) -> bool:
        specs = self.inputs + self.outputs
        return bool(specs) and all(len(spec.shape) >= 1 and spec.shape[0] == -1 for spec in specs)

    def metadata(self) -> dict:
        return {
            "name": self.name,
            "versions": [self.version],
            "platform": "onnxruntime_onnx",
            "inputs": [spec.metadata() for spec in self.inputs],
            "outputs": [spec.metadata() for spec in self.outputs],
        }

    def check_request(self, arrays: dict[str, np.ndarray], output_names: list[str] | None) -> list[str]:
        """Raise BadRequest unless the tensors are exactly the model's inputs; return the outputs to send."""
        expected = [spec.name for spec in self.inputs]
        if sorted(arrays) != sorted(expected):
            raise BadRequest(
                f"model '{self.name}' expects {len(expected)} input(s) {expected}, got {len(arrays)}: {list(arrays)}"
            )
        for spec in self.inputs:
            array = arrays[spec.name]
            if array.dtype != spec.dtype:
                raise BadRequest(
                    f"input '{spec.name}' of model '{self.name}' must be {datatype_of(spec.dtype)}, "
                    f"got {datatype_of(array.dtype)}"
                )
            fits = len(array.shape) == len(spec.shape) and all(
                want in (-1, got) for want, got in zip(spec.shape, array.shape)
            )
            if not fits:
                raise BadRequest(
                    f"input '{spec.name}' of model '{self.name}' must have shape {list(spec.shape)} "
                    f"(-1: any size), got {list(array.shape)}"
                )
        names = [spec.name for spec in self.outputs]
        if output_names is None:
            return names
        unknown = [name for name in output_names if name not in names]
        if unknown:
            raise BadRequest(f"model '{self.name}' has no output(s) {unknown}; its outputs are {names}")
        return output_names

    def run(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run the session; an onnxruntime failure is the model's (503), the request was already checked."""
        try:
            results = self.session.run(None, arrays)
        except Exception as error:  # onnxruntime's exceptions derive from Exception only
            message = " ".join(str(error).split())
            raise ModelUnavailable(f"model '{self.name}' failed to run: {message}") from None
        return {spec.name: result for spec, result in zip(self.outputs, results)}


def parse_model_argument(argument: str) -> tuple[str, str]:
    """``NAME=PATH`` or ``PATH`` (the name is then the file's stem) -> ``(name, path)``."""
    name, separator, path = argument.partition("=")
    if not separator:
        path = argument
        name = os.path.splitext(os.path.basename(argument))[0]
    if not name or not path:
        raise ValueError(f"'{argument}': expected PATH or NAME=PATH")
    return name, path


def load_model(name: str, path: str, intra_op_threads: int = 0, inter_op_threads: int = 0) -> ServedModel:
    """A ServedModel for an ONNX file; a file that fails to load gives a model that is not ready.

    Args:
        name: the name clients use in ``/v2/models/{name}``.
        path: an ``.onnx`` file.
        intra_op_threads, inter_op_threads: onnxruntime's thread pools (0: its default).
    """
    import onnxruntime  # deferred: ~0.3 s that only serving needs, not ``onnxnn serve --help``

    model = ServedModel(name=name, path=path)
    try:
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = intra_op_threads
        options.inter_op_num_threads = inter_op_threads
        # Each model's pool spins within its runs only: left spinning after a run, it took the cores
        # from the next model's (two models in turn on two cores: 2.2x the time, bench_sessions_in_turn.py).
        options.add_session_config_entry("session.force_spinning_stop", "1")
        session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        model.inputs = [_spec(arg) for arg in session.get_inputs()]
        model.outputs = [_spec(arg) for arg in session.get_outputs()]
        model.session = session
    except Exception as error:  # a bad file must not stop the other models from serving
        model.error = " ".join(str(error).split()) or type(error).__name__
    return model

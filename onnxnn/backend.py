"""The ONNX backend API (``onnx.backend.base``) over ``import_.from_onnx`` and onnxnn's executor.

``onnx.backend.test.BackendTest(onnxnn.backend, __name__)`` runs the official conformance tests
against it. A prepared model is a :class:`~onnxnn.import_.GraphModule` run in eval mode under
``no_grad``.

Example::

    >>> import onnxnn.backend
    >>> outputs = onnxnn.backend.run_model(model_proto, [np.ones((2, 3), np.float32)])
    >>> outputs[0].shape
    (2, 3)
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx
from onnx import helper
from onnx.backend.base import Backend as _OnnxBackend
from onnx.backend.base import BackendRep as _OnnxBackendRep
from onnx.backend.base import Device, DeviceType, namedtupledict

from .cuda import is_available as _cuda_is_available
from .import_ import GraphModule, from_onnx
from .import_.loading import convert_opset
from .ir.plan import IR_VERSION, OPSET_VERSION
from .runtime.grad_mode import no_grad
from .runtime.tensor import Tensor

__all__ = ["Backend", "BackendRep", "prepare", "run_model", "run_node", "supports_device"]


def _torch_device(device: str) -> str:
    parsed = Device(device)
    if parsed.type == DeviceType.CUDA:
        return f"cuda:{parsed.device_id}"
    return "cpu"


def _to_numpy(value):
    if value is None or isinstance(value, (np.ndarray, dict)):
        return value  # ai.onnx.ml results onnxnn tensors cannot hold: strings, ZipMap's maps
    if isinstance(value, (list, tuple)):
        return [_to_numpy(item) for item in value]
    return value.detach().cpu().numpy()


class BackendRep(_OnnxBackendRep):
    """A prepared model: ``run(inputs)`` computes its outputs as numpy arrays.

    Args:
        module: the imported GraphModule (put in eval mode).
        device: ``"CPU"`` or ``"CUDA"`` / ``"CUDA:1"``.
    """

    def __init__(self, module: GraphModule, device: str = "CPU") -> None:
        self.module = module.eval()
        self.device = _torch_device(device)
        if self.device != "cpu":
            self.module.to(self.device)

    def _move(self, value):
        if isinstance(value, (list, tuple)):
            return [self._move(item) for item in value]
        if self.device != "cpu":
            if not isinstance(value, Tensor):
                value = Tensor._from_array(np.asarray(value, order="C"))
            return value.to(self.device)
        return value

    def _as_declared(self, name: str, value):
        """A one-element array given for a scalar input becomes a scalar, as onnxruntime accepts it."""
        dims = self.module._input_types.get(name, (None, None))[0]
        if dims == () and isinstance(value, np.ndarray) and value.shape == (1,):
            return value.reshape(())
        return value

    def run(self, inputs: Any, **kwargs: Any) -> tuple:
        """Runs the model on ``inputs``: a list of arrays in graph-input order, a dict by name, or one array.

        Returns:
            A tuple of numpy arrays (lists of arrays for sequence outputs), also indexable by
            output name.
        """
        if isinstance(inputs, dict):
            named = dict(inputs)
        elif isinstance(inputs, (list, tuple)):
            names = self.module.input_names + self.module.optional_input_names
            if len(inputs) > len(names):
                raise TypeError(f"the model takes {len(names)} inputs ({names}) but {len(inputs)} were given")
            named = dict(zip(names, inputs))
        else:
            named = {self.module.input_names[0]: inputs}
        named = {name: self._move(self._as_declared(name, value)) for name, value in named.items()}
        positional = ()
        with no_grad():
            outputs = self.module(*positional, **named)
        if not isinstance(outputs, tuple) or len(self.module.output_names) == 1:
            outputs = (outputs,)
        arrays = [_to_numpy(value) for value in outputs]
        return namedtupledict("Outputs", self.module.output_names)(*arrays)


class Backend(_OnnxBackend):
    """onnxnn as an ONNX backend: models are imported with ``from_onnx`` and run by onnxnn."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto | str | bytes, device: str = "CPU", **kwargs: Any) -> BackendRep:
        """Imports ``model`` (a ModelProto, path or bytes) for repeated runs on ``device``.

        ``base_dir=`` names the folder of external data files for a ModelProto or bytes.

        Raises:
            RuntimeError: the device is not supported here (e.g. CUDA without a GPU).
            ModelLoadError: the model is malformed or cannot run on onnxnn (see ``from_onnx``).
        """
        if not cls.supports_device(device):
            raise RuntimeError(f"onnxnn backend: device '{device}' is not available on this machine")
        return BackendRep(from_onnx(model, base_dir=kwargs.get("base_dir")), device)

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple:
        """Prepares ``model`` and runs it once on ``inputs``."""
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(
        cls,
        node: onnx.NodeProto,
        inputs: Any,
        device: str = "CPU",
        outputs_info: Sequence[tuple[np.dtype, tuple[int, ...]]] | None = None,
        **kwargs: Any,
    ) -> tuple:
        """Runs a single node on ``inputs`` (a list of arrays for the node's inputs, or a dict by name).

        Args:
            node: the NodeProto; its default-domain opset is ``kwargs["opset_version"]`` (default 21).
            inputs: the input arrays.
            device: ``"CPU"`` or ``"CUDA"``.
            outputs_info: unused (output types come from onnxnn's shape rules).
        """
        super().run_node(node, inputs, device=device, outputs_info=outputs_info, **kwargs)
        if isinstance(inputs, dict):
            arrays = [inputs[name] if name else None for name in node.input]
        else:
            arrays = list(inputs) + [None] * (len(node.input) - len(inputs))
        graph_inputs: list = []
        feeds: list = []
        for name, array in zip(node.input, arrays):
            if not name or array is None or any(name == existing.name for existing in graph_inputs):
                continue
            array = np.asarray(array)
            graph_inputs.append(
                helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(array.dtype), array.shape)
            )
            feeds.append(array)
        graph_outputs = [onnx.ValueInfoProto(name=name) for name in node.output if name]
        graph = helper.make_graph([node], "run_node", graph_inputs, graph_outputs)
        opset = int(kwargs.get("opset_version", OPSET_VERSION))
        domains = [helper.make_opsetid("", opset)]
        if node.domain not in ("", "ai.onnx"):
            domains.append(helper.make_opsetid(node.domain, 1))
        model = helper.make_model(graph, opset_imports=domains, ir_version=IR_VERSION)
        if opset < OPSET_VERSION:
            model = convert_opset(model)  # a newer opset's node is recorded at its own (see import_.opsets)
        rep = BackendRep(GraphModule(model, original_opset_version=opset), device)
        return rep.run(feeds)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """CPU always; CUDA when onnxruntime's CUDA provider works here (``onnxnn.cuda.is_available()``)."""
        try:
            parsed = Device(device)
        except (AttributeError, ValueError):
            return False
        if parsed.type == DeviceType.CPU:
            return True
        return parsed.type == DeviceType.CUDA and _cuda_is_available()


prepare = Backend.prepare
run_model = Backend.run_model
run_node = Backend.run_node
supports_device = Backend.supports_device

"""``ai.onnx.ml`` nodes (scikit-learn pipelines): run by onnxruntime as opaque, gradient-free ops.

onnxnn has no kernels or gradient rules for the classical-ML operators (LinearRegressor,
TreeEnsembleRegressor/Classifier, Normalizer, Scaler, ZipMap, ...), but onnxruntime implements
them all. An imported ``ai.onnx.ml`` node therefore realizes its inputs, runs alone in an
onnxruntime session built for its input signature (at the model's ``ai.onnx.ml`` opset) and
returns onnxruntime's own results: numeric tensors become onnxnn constants, string tensors stay
numpy arrays and ZipMap's sequence of maps stays a list of dicts, as onnxruntime returns them.

Their parameters are attributes, not initializers, so those parts of a module hold nothing to
train. No gradient passes through them: when an input requires grad, the outputs carry a
backward node whose gradient rule raises a RuntimeError naming the op and node, so a backward
that would need it fails clearly instead of silently leaving earlier parameters without a
gradient.
"""

from __future__ import annotations

import numpy as np
import onnx

from ..errors import ModelLoadError
from ..ir import dtypes
from ..autograd.function import Function
from ..ir.mode import MODE
from ..runtime.tensor import Tensor
from .importers import array_of, constant_tensor
from .single_node import single_node_session
from .validation import ML_DOMAIN
from ..ir.plan import OPSET_VERSION

__all__ = ["MLNode", "ML_DOMAIN"]


class _NoGradient(Function):
    """The outputs of an ai.onnx.ml node, unchanged, with a backward that refuses: onnxnn runs these
    ops in onnxruntime, which has no gradients for them, and a silent zero would leave the
    parameters before the node untrained without a word."""

    @staticmethod
    def forward(ctx, message: str, count: int, *tensors: Tensor):
        ctx.message = message
        return tensors[:count]  # the outputs; the tracked inputs after them only give the edges

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise RuntimeError(ctx.message)


def _tensor_type(array: np.ndarray) -> int:
    if array.dtype.kind in "OUS":
        return onnx.TensorProto.STRING
    return onnx.helper.np_dtype_to_tensor_dtype(array.dtype)


class MLNode:
    """The importer of one ``ai.onnx.ml`` node: runs it in onnxruntime at the model's opsets."""

    def __init__(self, node: onnx.NodeProto, opsets: dict[str, int]):
        self.node = node
        # The default domain at onnxnn's opset: a model newer than it is not converted down, but
        # its ai.onnx.ml node reads no default-domain op, and onnxruntime may not load the newer opset.
        self.opsets = {"": OPSET_VERSION, ML_DOMAIN: opsets.get(ML_DOMAIN, 1)}
        self.sessions: dict = {}

    def __getstate__(self) -> dict:
        # onnxruntime sessions neither copy nor pickle: they are rebuilt on the next call.
        return {"node": self.node, "opsets": self.opsets, "sessions": {}}

    def _session(self, arrays: list):
        # onnxruntime needs typed graph outputs: onnx's type inference for the ML ops gives them.
        types = [None if array is None else (_tensor_type(array), array.shape) for array in arrays]
        return single_node_session(self.node, self.opsets, types, typed_outputs=True)

    def __call__(self, call, *inputs):
        arrays = []
        for value in inputs:
            if value is None or isinstance(value, np.ndarray):
                arrays.append(value)
            elif isinstance(value, Tensor):
                arrays.append(array_of(value))
            else:
                raise RuntimeError(
                    f"{call.op_type} node '{call.name}' (domain {ML_DOMAIN}) got a "
                    f"{type(value).__name__} input; onnxnn passes only tensors to ai.onnx.ml ops"
                )
        key = tuple(None if array is None else (array.dtype.str, array.shape) for array in arrays)
        session = self.sessions.get(key)
        if session is None:
            try:
                session = self.sessions[key] = self._session(arrays)
            except Exception as error:  # onnxruntime's and onnx's own exception types
                raise RuntimeError(
                    f"onnxruntime cannot run {call.op_type} node '{call.name}' (domain {ML_DOMAIN}) "
                    "on inputs "
                    f"{[None if a is None else (a.dtype.name, list(a.shape)) for a in arrays]}: "
                    f"{' '.join(str(error).split())}"
                ) from None
        feeds = {f"input_{index}": array for index, array in enumerate(arrays) if array is not None}
        try:
            results = iter(session.run(None, feeds))
        except Exception as error:
            raise RuntimeError(
                f"onnxruntime failed to run {call.op_type} node '{call.name}' (domain {ML_DOMAIN}): "
                f"{' '.join(str(error).split())}"
            ) from None
        outputs = [_as_output(next(results)) if name else None for name in self.node.output]
        return self._attach_no_gradient(call, inputs, outputs)

    def _attach_no_gradient(self, call, inputs: tuple, outputs: list) -> list:
        """Outputs carrying a backward node that refuses, when an input requires grad."""
        tracked = [value for value in inputs if isinstance(value, Tensor) and value.requires_grad]
        if not (MODE.grad.enabled and tracked):
            return outputs
        floats = [
            index for index, value in enumerate(outputs) if isinstance(value, Tensor) and value.is_floating_point()
        ]
        if not floats:
            return outputs
        message = (
            f"backward through {self.node.op_type} node '{call.name}' (domain {ML_DOMAIN}) is not possible: "
            "onnxnn runs ai.onnx.ml ops in onnxruntime without gradients; detach its inputs, or "
            "train only the parts of the model after it"
        )
        tracked_outputs = _NoGradient.apply(message, len(floats), *[outputs[index] for index in floats], *tracked)
        result = list(outputs)
        for index, tensor in zip(floats, tracked_outputs):
            result[index] = tensor
        return result


def _as_output(value):
    """onnxruntime's result as onnxnn gives it back: tensors where onnxnn can hold them."""
    if isinstance(value, np.ndarray):
        try:
            return constant_tensor(np.asarray(value, order="C"), dtypes.as_dtype(value.dtype))
        except TypeError:
            return value  # strings: kept as onnxruntime returns them
    return value  # ZipMap's list of dicts


def check_ml_node(node: onnx.NodeProto, opsets: dict, name: str) -> None:
    """Refuses an ``ai.onnx.ml`` op that onnx does not define at the model's ml opset."""
    try:
        onnx.defs.get_schema(node.op_type, opsets.get(ML_DOMAIN, 1), ML_DOMAIN)
    except onnx.defs.SchemaError:
        raise ModelLoadError(
            f"op_type '{node.op_type}' of domain {ML_DOMAIN} (opset {opsets.get(ML_DOMAIN, 1)}), "
            f"used by node '{name}', is not an ONNX ML operator"
        ) from None

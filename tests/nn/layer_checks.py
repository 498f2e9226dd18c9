"""Checks shared by the layer-family tests: both executors, export to plain onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime

import onnxnn
from onnxnn.export import to_onnx

EXECUTORS = ("onnxruntime", "kernels")


def forward_on(executor: str, function, *arrays, dtype=onnxnn.float32):
    """``function`` of tensors made from ``arrays`` (floating ones in ``dtype``), run on ``executor``, as float64."""
    with onnxnn.set_executor(executor):
        tensors = [
            onnxnn.tensor(a, dtype=dtype) if np.asarray(a).dtype.kind == "f" else onnxnn.tensor(a) for a in arrays
        ]
        return np.asarray(function(*tensors).detach().numpy(), dtype=np.float64)


def exported_output(module, *inputs) -> np.ndarray:
    """The module, in eval mode, exported with to_onnx and run by a plain onnxruntime session on ``inputs``."""
    proto = to_onnx(module.eval(), tuple(inputs))
    onnx.checker.check_model(proto, full_check=True)
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {graph_input.name: tensor.numpy() for graph_input, tensor in zip(session.get_inputs(), inputs)}
    return session.run(None, feeds)[0]


def float32_atol(reference: np.ndarray, ulps: float = 8.0) -> float:
    """A few float32 units in the last place of the largest value: elementwise formulas round a few times."""
    scale = float(np.max(np.abs(reference))) if reference.size else 1.0
    return ulps * float(np.finfo(np.float32).eps) * max(scale, 1.0)

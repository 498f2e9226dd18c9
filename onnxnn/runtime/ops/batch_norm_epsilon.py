"""A float64 inference ``BatchNormalization`` in onnxnn's sessions adds PyTorch's epsilon, not its float32 rounding.

ONNX's ``epsilon`` attribute is a FLOAT: ``eps=1e-5`` is stored as 9.99999974738e-06, and onnxruntime's
float64 kernel added that, so a channel of tiny running variance came out up to 1e-9 relative away
from PyTorch's. onnxnn's kernels add the recorded Python float in the input's dtype (the kernels'
executor keeps the floats of ops with a session form: kernels/executor.py), and its CPU sessions
write the node with the attribute as it is and the remainder, ``eps - float32(eps)``, added to the
variance in float64: onnxruntime then adds the two, within an ulp of ``var + eps``. Exports keep the
one node (an ``Add`` before it would make the running variance a computed value, and a re-import
would add the remainder once more): a file can only say float32(eps), as torch.onnx.export's do.
"""

from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper

from ...ir import dtypes
from ...ir.model_building import onnx_attribute_value
from ...ir.registry import session_lowerings, size_blind_session_lowerings

__all__: list[str] = []


@session_lowerings.register("BatchNormalization")
def _lowered(node, input_names: list, output_names: list, fresh_name, embedded=None):
    if node.inputs[0].dtype is not dtypes.float64 or node.attrs.get("training_mode", 0):
        return None
    epsilon = float(node.attrs.get("epsilon", 1e-5))
    remainder = epsilon - float(np.float32(epsilon))
    if remainder == 0.0:
        return None
    name, shifted = fresh_name("epsilon_remainder"), fresh_name("shifted_variance")
    attributes = {key: onnx_attribute_value(value) for key, value in node.attrs.items()}
    nodes = [
        helper.make_node("Add", [input_names[4], name], [shifted], name=fresh_name("Add")),
        helper.make_node(
            "BatchNormalization",
            [*input_names[:4], shifted],
            output_names,
            name=fresh_name("BatchNormalization"),
            **attributes,
        ),
    ]
    return nodes, [numpy_helper.from_array(np.array(remainder, np.float64), name)]


size_blind_session_lowerings.mark("BatchNormalization")

"""A floating ``Clip`` with a missing bound, written for onnxruntime with an infinite bound there.

PyTorch's ``clamp(x, min=0)`` leaves ``+inf`` as it is; ONNX's Clip-13 defaults a missing bound to the
dtype's finite limit, so onnxruntime turned ``+inf`` into ``FLT_MAX``. onnxnn records the bound as
missing (its kernels, like ``onnx.reference``, read that as no bound, and the gradient rule then
compares against one bound only) and writes ``-inf``/``+inf`` in its place in sessions and exports,
which means the same on every runtime. An integer Clip needs nothing: its limits bound nothing.
"""

from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper

from ...ir.registry import decompositions, value_blind_decompositions

__all__: list[str] = []


@decompositions.register("Clip")
def _decomposition(node, input_names: list, output_names: list, fresh_name):
    dtype = node.inputs[0].dtype
    names = list(input_names) + [""] * (3 - len(input_names))
    if not dtype.is_floating_point or (names[1] and names[2]):
        return None
    initializers = []
    for position, unbounded in ((1, -np.inf), (2, np.inf)):
        if not names[position]:
            names[position] = fresh_name("unbounded")
            initializers.append(numpy_helper.from_array(np.array(unbounded, dtype.numpy_dtype), names[position]))
    return [helper.make_node("Clip", names, output_names, name=fresh_name("Clip"))], initializers


value_blind_decompositions.mark("Clip")

"""``Sigmoid`` in onnxnn's sessions: PyTorch's ``1 / (1 + exp(-x))``, accurate where the output is small.

onnxruntime's CPU Sigmoid (1.31) approximates the logistic function with a small absolute error,
which is a large relative one wherever the output is small: float32 ``sigmoid(-10)`` is off by 2e-4
of itself, ``sigmoid(-17)`` by a factor of two, and from -20 on it is 0 (PyTorch: 2.06e-9); float64
loses digits the same way and is 0 from about -37 on. Anything read on a logarithmic scale then
breaks: ``log(sigmoid(x))`` is -inf, a distribution's probabilities from logits are 0 and its mean
(``Geometric``'s ``1 / p - 1``) inf. onnxnn's CPU sessions run the node as PyTorch's formula, one Exp
whose relative error is an ulp or two; it underflows where PyTorch's does (float32 from -88.7: exp
overflows, the reciprocal is 0). On a 2-core machine's one thread, 0.52 ms for a million float32
elements, against 0.27 for the approximation: the price of a result PyTorch's users can take logs of.

onnxnn's kernels compute it accurately themselves (kernels/elementwise.py). Exports keep the plain
node, as ``torch.onnx.export`` writes it: a model served by plain onnxruntime gets its approximation
(docs/differences.md).
"""

from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper

from ...ir import dtypes
from ...ir.registry import session_lowerings, size_blind_session_lowerings
from .opmath import REDUCED_FLOATS

__all__: list[str] = []

# float16 and bfloat16 are computed in float32 and rounded once, PyTorch's "opmath" (onnxruntime's
# float16 Sigmoid rounds its approximation: sigmoid(-17) two subnormal steps above the nearest).
_COMPUTED_IN = {dtypes.float32: dtypes.float32, dtypes.float64: dtypes.float64}
_COMPUTED_IN.update({dtype: dtypes.float32 for dtype in REDUCED_FLOATS})


@session_lowerings.register("Sigmoid")
def _lowered(node, input_names: list, output_names: list, fresh_name, embedded=None):
    dtype = node.inputs[0].dtype
    computed = _COMPUTED_IN.get(dtype)
    if computed is None:
        return None
    nodes = []
    x, result = input_names[0], output_names[0]
    if computed is not dtype:
        x, result = fresh_name("widened"), fresh_name("sigmoid")
        nodes.append(helper.make_node("Cast", input_names, [x], name=fresh_name("Cast"), to=computed.onnx_type))
    one = fresh_name("one")
    negated, exponential, denominator = fresh_name("negated"), fresh_name("exponential"), fresh_name("denominator")
    nodes += [
        helper.make_node("Neg", [x], [negated], name=fresh_name("Neg")),
        helper.make_node("Exp", [negated], [exponential], name=fresh_name("Exp")),
        helper.make_node("Add", [exponential, one], [denominator], name=fresh_name("Add")),
        helper.make_node("Reciprocal", [denominator], [result], name=fresh_name("Reciprocal")),
    ]
    if computed is not dtype:
        nodes.append(helper.make_node("Cast", [result], output_names, name=fresh_name("Cast"), to=dtype.onnx_type))
    return nodes, [numpy_helper.from_array(np.array(1, computed.numpy_dtype), one)]


size_blind_session_lowerings.mark("Sigmoid")

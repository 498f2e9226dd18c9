"""``onnxnn.fx``: symbolic tracing and graph rewriting of Modules, with ``torch.fx``'s API.

``symbolic_trace(model)`` runs ``forward`` on Proxies and returns a ``GraphModule``: an
``nn.Module`` whose ``forward`` is Python generated from a ``Graph`` of ``Node`` objects. Edit the
graph (insert, replace, erase nodes), call ``recompile()``, and the module runs the new program;
an ``Interpreter`` runs the graph node by node for analyses such as per-op timing.

Example::

    >>> import onnxnn
    >>> from onnxnn import fx, nn
    >>> gm = fx.symbolic_trace(nn.Sequential(nn.Linear(4, 4), nn.ReLU()))
    >>> print(gm.code)
    def forward(self, input):
        _0 = getattr(self, '0')(input)
        _1 = getattr(self, '1')(_0)
        return _1
"""

from __future__ import annotations

from .graph import Graph, PythonCode
from .graph_module import GraphModule
from .interpreter import Interpreter, Transformer
from .node import Node, map_arg
from .proxy import Attribute, Proxy, TraceError
from .subgraph_rewriter import replace_pattern
from .tracer import Tracer, symbolic_trace, wrap

__all__ = [
    "Attribute",
    "Graph",
    "GraphModule",
    "Interpreter",
    "Node",
    "Proxy",
    "PythonCode",
    "TraceError",
    "Tracer",
    "Transformer",
    "map_arg",
    "replace_pattern",
    "symbolic_trace",
    "wrap",
]

"""An onnxruntime session running one node of an imported model on its own.

Nodes onnxnn does not record (``ai.onnx.ml`` ops, standard ops without a shape rule that must run
at once) are run by onnxruntime as a one-node model: the node with numbered inputs and outputs,
declared at the model's opsets.
"""

from __future__ import annotations

import onnx

from ..ir.plan import IR_VERSION

__all__ = ["single_node_session"]


def single_node_session(node: onnx.NodeProto, opsets: dict, input_types: list, typed_outputs: bool = False):
    """An InferenceSession of ``node`` alone.

    Args:
        node: the node as the model holds it; its inputs and outputs are renamed here.
        opsets: ``{domain: version}`` to declare.
        input_types: per node input, ``(onnx element type, shape)`` or None for an omitted one.
        typed_outputs: copy the output types onnx's (strict) type inference gives into the graph
            outputs, for ops whose outputs onnxruntime cannot type itself (the ML ops).
    """
    import onnxruntime  # deferred: importing onnxruntime costs ~0.3 s, paid only when such a node runs

    helper = onnx.helper
    names = [f"input_{index}" if entry is not None else "" for index, entry in enumerate(input_types)]
    graph_inputs = [
        helper.make_tensor_value_info(name, element_type, tuple(shape))
        for name, (element_type, shape) in ((n, e) for n, e in zip(names, input_types) if e is not None)
    ]
    single = onnx.NodeProto()
    single.CopyFrom(node)
    del single.input[:]
    single.input.extend(names)
    del single.output[:]
    single.output.extend([f"output_{index}" if name else "" for index, name in enumerate(node.output)])
    outputs = [onnx.ValueInfoProto(name=name) for name in single.output if name]
    graph = helper.make_graph([single], node.op_type, graph_inputs, outputs)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid(domain, version) for domain, version in opsets.items()],
        ir_version=IR_VERSION,
    )
    if typed_outputs:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        types = {info.name: info.type for info in inferred.graph.value_info}
        for output in model.graph.output:
            if output.name in types:
                output.type.CopyFrom(types[output.name])
    else:
        model = onnx.shape_inference.infer_shapes(model)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])

"""Rewrites of an exported graph around onnxruntime graph optimizers that change what it computes.

An exported model is served by plain onnxruntime, whose sessions run its graph optimizers. onnxnn's
own sessions leave the faulty ones out (``runtime/sessions.py``); a file cannot. So an export writes
each pattern a faulty optimizer matches as an equal computation it does not match. The patterns
below were found by differential runs of onnxruntime 1.31's optimized sessions against onnxnn's
kernels; each rewrite is exact (the same values, bit for bit) and leaves every other node alone.

``GUARDS`` is the table: one function per optimizer, each taking a graph and its opset.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .graph_editing import fresh_name, graphs_within

__all__ = ["GUARDS", "guard_against_onnxruntime_optimizers"]


class _Graph:
    """A graph's constants, consumers and names, and the nodes and initializers a rewrite adds."""

    def __init__(self, graph: onnx.GraphProto, opset: int):
        self.graph = graph
        self.opset = opset
        self._constants: dict[str, onnx.TensorProto] = {tensor.name: tensor for tensor in graph.initializer}
        for node in graph.node:
            if _default_domain(node, "Constant"):
                value = next((attribute.t for attribute in node.attribute if attribute.name == "value"), None)
                if value is not None:
                    self._constants[node.output[0]] = value
        self.consumers: dict[str, list[onnx.NodeProto]] = {}
        self.producer: dict[str, onnx.NodeProto] = {}
        for node in graph.node:
            for name in node.input:
                self.consumers.setdefault(name, []).append(node)
            for name in node.output:
                self.producer[name] = node
        self.graph_outputs = {output.name for output in graph.output}
        # Tensor and node names: ``new_name`` names both, and onnxruntime refuses a graph whose nodes
        # share a name (the exporter names them ``<op>_<index>``, as guards name theirs).
        self.names = set(self.producer) | set(self.consumers) | set(self._constants) | self.graph_outputs
        self.names |= {graph_input.name for graph_input in graph.input} | {node.name for node in graph.node}
        self._ranks: dict[str, int] | None = None  # inferred when first asked (``rank``)
        self._around: dict[int, tuple[list, list]] = {}  # nodes to insert before and after a node, by id
        self._removed: set[int] = set()

    def constant_tensor(self, name: str) -> onnx.TensorProto | None:
        """The TensorProto of ``name`` if the graph holds it (an initializer or a Constant's output)."""
        return self._constants.get(name)

    def constant(self, name: str) -> np.ndarray | None:
        """The value of ``name`` if the graph holds it (an initializer or a Constant's output); read
        only when asked, since a model's weights are initializers too."""
        tensor = self._constants.get(name)
        if tensor is None or tensor.external_data:
            return None
        return numpy_helper.to_array(tensor)

    def rank(self, name: str) -> int | None:
        """The rank of ``name`` by onnx's shape inference (None where it cannot tell). Exported
        graphs carry no value_info, so the first question infers every rank, on a copy of the graph
        whose weights are inputs of their types (no weight is copied)."""
        if self._ranks is None:
            skeleton = onnx.GraphProto()
            skeleton.node.extend(self.graph.node)
            skeleton.input.extend(self.graph.input)
            skeleton.input.extend(
                helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims))
                for tensor in self.graph.initializer
            )
            skeleton.output.extend(self.graph.output)
            model = helper.make_model(skeleton, opset_imports=[helper.make_opsetid("", self.opset)])
            try:
                inferred = onnx.shape_inference.infer_shapes(model).graph
            except Exception:  # noqa: BLE001 - a graph onnx cannot infer keeps its patterns
                inferred = skeleton
            self._ranks = {
                info.name: len(info.type.tensor_type.shape.dim)
                for info in (*inferred.value_info, *inferred.input, *inferred.output)
                if info.type.tensor_type.HasField("shape")
            }
        return self._ranks.get(name)

    def sole_consumer(self, name: str) -> onnx.NodeProto | None:
        consumers = self.consumers.get(name, [])
        return consumers[0] if len(consumers) == 1 and name not in self.graph_outputs else None

    def new_name(self, base: str) -> str:
        return fresh_name(base, self.names)

    def add_constant(self, base: str, value: np.ndarray) -> str:
        name = self.new_name(base)
        self.graph.initializer.append(numpy_helper.from_array(value, name))
        return name

    def insert_before(self, node: onnx.NodeProto, new: onnx.NodeProto) -> None:
        self._around.setdefault(id(node), ([], []))[0].append(new)

    def insert_after(self, node: onnx.NodeProto, new: onnx.NodeProto) -> None:
        self._around.setdefault(id(node), ([], []))[1].append(new)

    def remove(self, node: onnx.NodeProto) -> None:
        self._removed.add(id(node))

    def commit(self) -> None:
        """Places the inserted nodes beside the nodes they were inserted at (keeping topological order)
        and drops the removed ones."""
        if not (self._around or self._removed):
            return
        nodes: list[onnx.NodeProto] = []
        for node in self.graph.node:
            before, after = self._around.get(id(node), ((), ()))
            nodes.extend(before)
            if id(node) not in self._removed:
                nodes.append(node)
            nodes.extend(after)
        del self.graph.node[:]
        self.graph.node.extend(nodes)


def _default_domain(node: onnx.NodeProto, op_type: str) -> bool:
    return node.op_type == op_type and node.domain in ("", "ai.onnx")


def _pad_before_pool(graph: _Graph) -> None:
    """Pad_Fusion: a zero ``Pad`` whose only reader is a MaxPool or AveragePool (directly or through
    one Cast) is folded into the pool's ``pads``. MaxPool pads with -inf, not zeros:
    ``max_pool2d(F.pad(x, (1, 1, 1, 1)), 2)`` of negative x lost its zeros. AveragePool is folded only
    when it counts its padding (the same values), but the two paddings together may reach the
    kernel's size, which onnxruntime's pool refuses: the session cannot be built. The fusion leaves
    a Pad with an ``axes`` input alone, so from opset 18 the Pad gets one naming every axis (the same
    padding); below 18 (no ``axes``) its padding goes one element further on the last axis and a
    Slice takes that element off."""
    for node in list(graph.graph.node):
        pads = graph.constant(node.input[1]) if _default_domain(node, "Pad") and len(node.input) > 1 else None
        if pads is None:
            continue  # onnxruntime folds only a Pad whose pads it can read
        if (len(node.input) > 3 and node.input[3]) or any(
            a.name == "mode" and a.s != b"constant" for a in node.attribute
        ):
            continue
        reader = graph.sole_consumer(node.output[0])
        if reader is not None and _default_domain(reader, "Cast"):
            reader = graph.sole_consumer(reader.output[0])
        if reader is None or reader.op_type not in ("MaxPool", "AveragePool") or reader.domain not in ("", "ai.onnx"):
            continue
        rank = pads.size // 2
        if graph.opset >= 18:
            axes = graph.add_constant(f"{node.output[0]}_axes", np.arange(rank, dtype=np.int64))
            inputs = list(node.input) + [""] * (3 - len(node.input))
            del node.input[:]
            node.input.extend(inputs + [axes])
            continue
        widened = pads.astype(np.int64).copy()
        widened[-1] += 1
        padded = graph.new_name(f"{node.output[0]}_widened")
        slice_node = helper.make_node(
            "Slice",
            [
                padded,
                graph.add_constant(f"{padded}_starts", np.array([0], np.int64)),
                graph.add_constant(f"{padded}_ends", np.array([-1], np.int64)),
                graph.add_constant(f"{padded}_axes", np.array([rank - 1], np.int64)),
            ],
            [node.output[0]],
            name=graph.new_name(f"{node.name or 'Pad'}_unwiden"),
        )
        node.input[1] = graph.add_constant(f"{node.input[1]}_widened", widened)
        node.output[0] = padded
        graph.insert_after(node, slice_node)


def _integer_reciprocal(graph: _Graph) -> None:
    """DivMulFusion: ``Div(1, a)`` read only by a Mul with b becomes ``Div(b, a)``, which for integers
    is not ``(1 / a) * b`` (``div(1, a, rounding_mode="trunc") * b`` is 0 for |a| > 1). An integer
    ``1 / a`` is written as the values it takes: a where |a| is 1, else 0."""
    for node in list(graph.graph.node):
        if not _default_domain(node, "Div") or len(node.input) < 2:
            continue
        one = graph.constant(node.input[0])
        if one is None or one.dtype not in (np.int32, np.int64) or one.size != 1 or one.reshape(-1)[0] != 1:
            continue
        divisor = node.input[1]
        magnitude = graph.new_name(f"{node.output[0]}_magnitude")
        is_unit = graph.new_name(f"{node.output[0]}_divisor_is_unit")
        zero = graph.add_constant(f"{node.output[0]}_zero", np.zeros((), one.dtype))
        graph.insert_before(node, helper.make_node("Abs", [divisor], [magnitude], name=graph.new_name("Abs")))
        graph.insert_before(
            node, helper.make_node("Equal", [magnitude, node.input[0]], [is_unit], name=graph.new_name("Equal"))
        )
        node.op_type = "Where"
        inputs = [is_unit, divisor, zero]
        del node.input[:]
        node.input.extend(inputs)


def _is_constant_two(graph: _Graph, name: str) -> bool:
    value = graph.constant(name)
    return value is not None and value.size == 1 and float(value.reshape(-1)[0]) == 2.0


def _centred_power_mean(graph: _Graph) -> None:
    """LayerNormFusionL1 fuses ``d = x - mean(x)``, ``d / sqrt(mean(Pow(d, p)) + eps) * w + b`` into
    LayerNormalization without reading the exponent: a ``pow(4)`` normalization was served as
    LayerNorm. Where a Pow of a difference with any exponent but a constant 2 feeds a ReduceMean,
    the difference is written ``x + (-mean)`` (the same value in IEEE arithmetic), which the fusion
    does not match."""
    for node in list(graph.graph.node):
        if not _default_domain(node, "Pow") or _is_constant_two(graph, node.input[1]):
            continue
        if not any(_default_domain(reader, "ReduceMean") for reader in graph.consumers.get(node.output[0], [])):
            continue
        difference = graph.producer.get(node.input[0])
        if difference is None or not _default_domain(difference, "Sub"):
            continue
        negated = graph.new_name(f"{difference.input[1]}_negated")
        graph.insert_before(
            difference, helper.make_node("Neg", [difference.input[1]], [negated], name=graph.new_name("Neg"))
        )
        difference.op_type = "Add"
        difference.input[1] = negated


def _half_precision_product_of_transpose(graph: _Graph) -> None:
    """MatmulTransposeFusion, with FuseFp16InitializerToFp32NodeTransformer and NchwcTransformer: a
    MatMul of a batch-axes Transpose and a constant 2-d float16 matrix crashes the process building
    the session (a segmentation fault), as ``Linear.half()`` applied to ``x.transpose(0, 1)`` or to
    a sequence-first LSTM's output exports. The fusion folds a Transpose that reaches the MatMul,
    also one onnxruntime's transpose optimizer moves there (merged chains, a recurrent layer's output
    transposes), so where a Transpose or a recurrent layer lies behind the other input, the product
    is taken with that input's leading axes flattened into one and given back after it: a Reshape is
    nothing the fusion folds. A matrix on the left (``W @ x.permute(1, 0, 2)``) acts on the
    second-to-last axis: the product is taken transposed, ``(x^T W^T)^T``, the same way."""
    for node in list(graph.graph.node):
        if not _default_domain(node, "MatMul"):
            continue
        right = _folded_constant_shape(graph, node.input[1])
        if right is not None and len(right[1]) == 2 and right[0] in _HALF_PRECISION:
            if _behind(graph, node.input[0], _LAYOUT_FOLLOWING, _TRANSPOSING) is not None:
                output, node.output[0] = node.output[0], graph.new_name(f"{node.output[0]}_flat")
                _flatten_leading_axes(graph, node, right[1], output)
            continue
        left = _folded_constant_shape(graph, node.input[0])
        rank = _rank_of_batch_transpose_behind(graph, node.input[1])
        if left is None or len(left[1]) != 2 or left[0] not in _HALF_PRECISION or rank is None:
            continue
        swap = list(range(rank))
        swap[-2:] = swap[-1], swap[-2]
        matrix, transposed = node.input[0], graph.new_name(f"{node.input[1]}_transposed")
        graph.insert_before(
            node,
            helper.make_node("Transpose", [node.input[1]], [transposed], name=graph.new_name("Transpose"), perm=swap),
        )
        node.input[0] = transposed
        node.input[1] = graph.new_name(f"{matrix}_transposed")
        graph.insert_before(
            node,
            helper.make_node("Transpose", [matrix], [node.input[1]], name=graph.new_name("Transpose"), perm=[1, 0]),
        )
        output, node.output[0] = node.output[0], graph.new_name(f"{node.output[0]}_flat")
        product = graph.new_name(f"{output}_transposed")
        _flatten_leading_axes(graph, node, left[1][::-1], product)
        graph.insert_after(
            node, helper.make_node("Transpose", [product], [output], name=graph.new_name("Transpose"), perm=swap)
        )


def _flatten_leading_axes(graph: _Graph, node: onnx.NodeProto, matrix_shape: list[int], output: str) -> None:
    """Rewrites ``node`` (a MatMul of an input by a ``matrix_shape`` matrix, its output renamed
    already) to take its input with the leading axes flattened, and writes the product with them
    restored as ``output``."""
    rows, columns = matrix_shape
    matrix_input = node.input[0]
    flat = graph.new_name(f"{matrix_input}_flat")
    leading = graph.new_name(f"{output}_leading_shape")
    shape = graph.new_name(f"{output}_shape")
    graph.insert_before(
        node,
        helper.make_node(
            "Reshape",
            [matrix_input, graph.add_constant(f"{flat}_shape", np.array([-1, rows], np.int64))],
            [flat],
            name=graph.new_name("Reshape"),
        ),
    )
    for new in (
        helper.make_node("Shape", [matrix_input], [leading], name=graph.new_name("Shape"), end=-1),
        helper.make_node(
            "Concat",
            [leading, graph.add_constant(f"{shape}_columns", np.array([columns], np.int64))],
            [shape],
            name=graph.new_name("Concat"),
            axis=0,
        ),
        # allowzero: an empty axis of the input is a 0 in the shape, not "copy that axis".
        helper.make_node("Reshape", [node.output[0], shape], [output], name=graph.new_name("Reshape"), allowzero=1),
    ):
        graph.insert_after(node, new)
    node.input[0] = flat


_HALF_PRECISION = (onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)


def _relu_before_clip(graph: _Graph) -> None:
    """FuseReluClip folds a Relu into the Clip that alone reads it by raising the Clip's constant
    ``min`` to 0, and throws for a ``min`` that is neither float32 nor float16: the session of a
    float64 ``F.relu(x).clamp(max=6.0)`` (or hardtanh, ReLU6 after a ReLU) could not be built. The
    fold is done here instead, in the bound's own dtype: ``Clip(x, max(min, 0), max)``."""
    for node in list(graph.graph.node):
        if not _default_domain(node, "Relu"):
            continue
        clip = graph.sole_consumer(node.output[0])
        if clip is None or not _default_domain(clip, "Clip") or clip.input[0] != node.output[0] or len(clip.input) < 2:
            continue
        bound = graph.constant(clip.input[1])
        if bound is None or bound.dtype in (np.float32, np.float16) or bound.dtype.kind != "f":
            continue
        clip.input[1] = graph.add_constant(f"{clip.input[1]}_at_least_zero", np.maximum(bound, bound.dtype.type(0)))
        clip.input[0] = node.input[0]
        graph.remove(node)


# Ops through which a Transpose behind a MatMul's input may be moved up to it (by onnxruntime's
# transpose optimizer); what it moves: a Transpose, or the transposes of a recurrent layer's output.
_LAYOUT_FOLLOWING = frozenset(
    {"Cast", "Identity", "Squeeze", "Unsqueeze", "Relu", "Sigmoid", "Tanh", "Neg", "Abs", "Add", "Sub", "Mul", "Div"}
)
_TRANSPOSING = frozenset({"Transpose", "RNN", "LSTM", "GRU"})
# Those of them that keep the rank whatever the other operand (the left-hand case reads the rank
# from the Transpose's perm).
_RANK_KEEPING = frozenset({"Cast", "Identity", "Relu", "Sigmoid", "Tanh", "Neg", "Abs"})


def _behind(graph: _Graph, name: str, through: frozenset, wanted: frozenset) -> onnx.NodeProto | None:
    """The first node of ``wanted`` op types behind ``name`` within 8 producers, following first
    inputs through ops of ``through``, else None."""
    for _ in range(8):
        producer = graph.producer.get(name)
        if producer is None or producer.domain not in ("", "ai.onnx"):
            return None
        if producer.op_type in wanted:
            return producer
        if producer.op_type not in through:
            return None
        name = producer.input[0]
    return None


def _rank_of_batch_transpose_behind(graph: _Graph, name: str) -> int | None:
    """The rank of ``name`` where a batch-axes Transpose lies behind it through ops that keep the
    rank (the perm's length), else None."""
    transpose = _behind(graph, name, _RANK_KEEPING, frozenset({"Transpose"}))
    perm = None if transpose is None else next((list(a.ints) for a in transpose.attribute if a.name == "perm"), None)
    return len(perm) if perm and len(perm) >= 3 and perm[0] != 0 else None


def _folded_constant_shape(graph: _Graph, name: str) -> tuple[int, list[int]] | None:
    """The element type and shape of the constant behind ``name``, through the Transposes and
    Unsqueezes of constants onnxruntime folds (``Linear`` exports its weight as ``Transpose(weight)``,
    a matrix-vector product its vector as ``Unsqueeze(vector)``)."""
    steps = []
    producer = graph.producer.get(name)
    while (
        producer is not None and producer.op_type in ("Transpose", "Unsqueeze") and producer.domain in ("", "ai.onnx")
    ):
        steps.append(producer)
        name = producer.input[0]
        producer = graph.producer.get(name)
    tensor = graph.constant_tensor(name)
    if tensor is None:
        return None
    shape = list(tensor.dims)
    for step in reversed(steps):
        if step.op_type == "Transpose":
            perm = (
                next((list(a.ints) for a in step.attribute if a.name == "perm"), None) or list(range(len(shape)))[::-1]
            )
            shape = [shape[axis] for axis in perm]
        else:
            axes = graph.constant(step.input[1]) if len(step.input) > 1 else None
            if axes is None:
                return None
            rank = len(shape) + axes.size
            for axis in sorted(int(a) % rank for a in axes.reshape(-1)):
                shape.insert(axis, 1)
    return tensor.data_type, shape


def _adding_zero(graph: _Graph) -> None:
    """NoopElimination removes ``Add(y, 0.0)`` and ``Sub(y, -0.0)`` as identities, which they are not
    for ``y = -0.0`` (the sum is +0.0): ``1 / (-x.abs() + 0.0)`` at 0 was served as -inf. Such a
    sum is written ``0.0 - (-y)``, the same value for every y (NaN and both zeros included), which
    the rule does not match."""
    for node in list(graph.graph.node):
        if not (_default_domain(node, "Add") or _default_domain(node, "Sub")) or len(node.input) != 2:
            continue
        slots = (0, 1) if node.op_type == "Add" else (1,)
        for slot in slots:
            zero = graph.constant(node.input[slot])
            if zero is None or zero.size != 1 or zero.dtype.kind != "f" or zero.reshape(-1)[0] != 0:
                continue
            if np.signbit(zero.reshape(-1)[0]) != (node.op_type == "Sub"):
                continue  # y + (-0.0) and y - (+0.0) are identities: the rule may remove them
            other = node.input[1 - slot]
            negated = graph.new_name(f"{other}_negated")
            graph.insert_before(node, helper.make_node("Neg", [other], [negated], name=graph.new_name("Neg")))
            node.op_type = "Sub"
            inputs = [graph.add_constant(f"{node.output[0]}_zero", np.zeros((), zero.dtype)), negated]
            del node.input[:]
            node.input.extend(inputs)
            break


def _float64_scaled_product(graph: _Graph) -> None:
    """MatMulScaleFusion folds a Mul or Div by a one-element constant next to a MatMul into
    FusedMatMul's ``alpha``, a float32 attribute, for float64 too (onnxruntime 1.31.1): a float64
    ``(x / 3.0) @ y * 0.1`` or ``F.scaled_dot_product_attention`` was served with float32 scales
    (1e-8 relative errors). The fusion takes a constant as a scale only when its rank is at most
    the other operand's, so the constant is given one more leading axis and a Squeeze takes the
    product's off: the same values."""
    done: set[int] = set()
    for node in list(graph.graph.node):
        if not _default_domain(node, "MatMul"):
            continue
        neighbours = [graph.producer.get(name) for name in node.input[:2]]
        neighbours.append(graph.sole_consumer(node.output[0]))
        for scale in neighbours:
            if (
                scale is None
                or id(scale) in done
                or not (_default_domain(scale, "Mul") or _default_domain(scale, "Div"))
            ):
                continue
            slots = (1,) if scale.op_type == "Div" else (0, 1)
            for slot in slots:
                tensor = graph.constant_tensor(scale.input[slot])
                if tensor is None or tensor.data_type != onnx.TensorProto.DOUBLE or math.prod(tensor.dims) != 1:
                    continue
                value = graph.constant(scale.input[slot])
                if value is None:
                    continue
                rank = graph.rank(scale.input[1 - slot])  # only now: shape inference takes time
                if rank is None:
                    continue
                done.add(id(scale))
                widened = value.reshape((1,) * (rank + 1))
                scale.input[slot] = graph.add_constant(f"{scale.input[slot]}_widened", widened)
                output, scale.output[0] = scale.output[0], graph.new_name(f"{scale.output[0]}_widened")
                axes = graph.add_constant(f"{output}_leading_axis", np.array([0], np.int64))
                graph.insert_after(
                    scale,
                    helper.make_node("Squeeze", [scale.output[0], axes], [output], name=graph.new_name("Squeeze")),
                )
                break


# One guard per onnxruntime optimizer that changes an exported graph's meaning.
GUARDS: dict[str, Callable[[_Graph], None]] = {
    "Pad_Fusion": _pad_before_pool,
    "DivMulFusion": _integer_reciprocal,
    "LayerNormFusionL1": _centred_power_mean,
    "MatmulTransposeFusion": _half_precision_product_of_transpose,
    "FuseReluClip": _relu_before_clip,
    "NoopElimination": _adding_zero,
    "MatMulScaleFusion": _float64_scaled_product,
}


def guard_against_onnxruntime_optimizers(proto: onnx.ModelProto) -> None:
    """Rewrites ``proto`` in place so that onnxruntime's optimizers keep its meaning (``GUARDS``)."""
    opset = next((entry.version for entry in proto.opset_import if entry.domain in ("", "ai.onnx")), 0)
    for graph in list(graphs_within(proto.graph)):
        for guard in GUARDS.values():
            view = _Graph(graph, opset)
            guard(view)
            view.commit()

"""Compiling an ONNX graph into a :class:`Program` of steps, and replaying it as onnxnn ops.

Compiling a graph (once, at import time) converts every attribute to Python (subgraph attributes
to nested programs) and checks that each op can run: it has an importer function
(``ir.registry.importers``), a shape rule, or is a standard ONNX op that shape inference and
onnxruntime handle. Replaying walks the steps with ``apply_op``, so an imported model records the
same lazy nodes as code written with onnxnn's own ops.

A model newer than opset 21 is replayed as written: each of its nodes is recorded at the oldest
opset that means the same (``opsets.recorded_opset``), most at 21.

Ops newer than onnxnn's opset 21 replay the function body ONNX defines them by
(:class:`FunctionBody`, which compiles that body into a Program of its own, hence here) or, without
one, run at their own opset in onnxruntime (``importers.EagerNode``).

The package's modules import one another in one direction: ``importers`` (and the importer
modules beside it) <- ``program`` <- ``graph_module``.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np
import onnx

from ..errors import ModelLoadError
from ..ir.graph import FrozenAttributes, static_constant
from ..ir.plan import OPSET_VERSION
from ..ir.registry import importers, shape_rules
from ..runtime.internal import tensor_of, value_of
from ..runtime.realization import realize
from ..runtime.tensor import Tensor, apply_op
from .attributes import attribute_value, sparse_to_dense, tensor_to_array
from .importers import EagerNode, NodeCall, make_constant
from .limits import check_allocation
from .loading import DEFAULT_DOMAINS
from .ml import ML_DOMAIN, MLNode, check_ml_node
from .opsets import attribute_opset, recorded_opset

__all__ = [
    "Program",
    "Scope",
    "compile_graph",
    "run_program",
    "initializer_arrays",
    "initializer_constant",
    "value_type",
    "is_implemented",
    "with_converted_constants",
    "FunctionBody",
]


class Scope(dict):
    """The values visible while a graph replays; a subgraph's scope falls back to its parent's."""

    __slots__ = ("parent",)

    def __init__(self, parent: "Scope | None" = None):
        super().__init__()
        self.parent = parent

    def __missing__(self, name: str):
        if self.parent is None:
            raise KeyError(name)
        return self.parent[name]


class Step:
    """One node to replay: an importer function call, or one recorded ``apply_op`` node."""

    __slots__ = ("op_type", "domain", "inputs", "outputs", "attrs", "importer", "name", "num_outputs", "model_opset")

    def __init__(self, op_type, domain, inputs, outputs, attrs, importer, name, num_outputs, model_opset=None):
        self.op_type = op_type
        self.domain = domain
        self.inputs = inputs
        self.outputs = outputs
        self.attrs = attrs
        self.importer = importer
        self.name = name
        self.num_outputs = num_outputs
        # ``(opset, attribute names)``: the model's default-domain opset when it is newer than
        # onnxnn's and the node is recorded directly or by an importer function, which the node
        # may need (``opsets.recorded_opset``), and the attributes it sets. None otherwise.
        self.model_opset = model_opset


class Program:
    """A compiled graph: its steps, formal inputs and outputs, and its own constant initializers."""

    __slots__ = ("steps", "input_names", "output_names", "output_types", "constants")

    def __init__(self, steps, input_names, output_names, output_types, constants):
        self.steps = steps
        self.input_names = input_names
        self.output_names = output_names
        self.output_types = output_types
        self.constants = constants


def value_type(info: onnx.ValueInfoProto) -> tuple[tuple | None, int | None]:
    """``(dims, elem_type)`` of a tensor ValueInfo: dims hold ints, or the dim_param name/None when symbolic.

    Non-tensor values (sequences, optionals) and tensors without a shape give ``None`` dims.
    """
    if info.type.WhichOneof("value") != "tensor_type":
        return None, None
    tensor_type = info.type.tensor_type
    if not tensor_type.HasField("shape"):
        return None, tensor_type.elem_type
    dims = tuple(
        dim.dim_value if dim.HasField("dim_value") else (dim.dim_param or None) for dim in tensor_type.shape.dim
    )
    return dims, tensor_type.elem_type


def _static_output_type(info: onnx.ValueInfoProto) -> tuple[tuple | None, int | None]:
    dims, elem_type = value_type(info)
    if dims is not None and any(not isinstance(size, int) for size in dims):
        dims = tuple(size if isinstance(size, int) else None for size in dims)
    return dims, elem_type


def is_implemented(op_type: str, domain: str) -> bool:
    """Whether onnxnn can replay ``op_type`` of ``domain`` (default domain spelled ``""``)."""
    if (domain, op_type) in importers or shape_rules.get(op_type, domain) is not None:
        return True
    try:
        return onnx.defs.has(op_type, domain)
    except Exception:  # unknown domains raise in some onnx versions
        return False


@functools.lru_cache(maxsize=None)
def _schema(op_type: str, opset: int, domain: str = ""):
    try:
        return onnx.defs.get_schema(op_type, opset, domain)
    except onnx.defs.SchemaError:
        return None


def _num_outputs(node: onnx.NodeProto) -> int:
    count = len(node.output)
    while count > 1 and not node.output[count - 1]:
        count -= 1  # trailing omitted optional outputs are not computed
    return count


def _with_defaults(node: onnx.NodeProto, schema) -> onnx.NodeProto:
    """A copy of ``node`` with every attribute the schema defaults written out."""
    completed = onnx.NodeProto()
    completed.CopyFrom(node)
    given = {attribute.name for attribute in node.attribute}
    for name, attribute in schema.attributes.items():
        if name not in given and attribute.default_value.type != onnx.AttributeProto.UNDEFINED:
            default = onnx.AttributeProto()
            default.CopyFrom(attribute.default_value)
            default.name = name
            completed.attribute.append(default)
    return completed


def _unavailable(node: onnx.NodeProto, domain: str, opsets: dict, name: str, reason: str = "") -> ModelLoadError:
    return ModelLoadError(
        f"onnxnn has no implementation for op_type '{node.op_type}' of domain '{domain or 'ai.onnx'}' "
        f"(opset {opsets.get(domain, 'not imported')}), used by node '{name}'{reason}"
    )


def compile_graph(
    graph: onnx.GraphProto, opsets: dict[str, int], with_initializers: bool = True, source_opset: int | None = None
) -> Program:
    """Compiles ``graph`` (and its subgraphs) into a :class:`Program`.

    Args:
        graph: the graph.
        opsets: the model's ``{domain: version}`` (default domain as ``""``), for error messages.
        with_initializers: make the graph's initializers constants of the program (subgraphs);
            the main graph's initializers become the module's parameters and buffers instead.
        source_opset: the default-domain opset the model was written for: ops newer than
            onnxnn's opset 21 replay the function body ONNX defines them by at that opset.

    Raises:
        ModelLoadError: naming the node and op_type, for an op onnxnn cannot run (with domain and
            opset), an attribute it cannot read, or a constant of an element type onnxnn tensors
            cannot hold.
    """
    steps = []
    source_opset = source_opset or OPSET_VERSION
    for index, node in enumerate(graph.node):
        domain = "" if node.domain in DEFAULT_DOMAINS else node.domain
        name = node.name or f"{node.op_type}_{index}"
        if domain == ML_DOMAIN:
            check_ml_node(node, opsets, name)
            steps.append(
                Step(
                    node.op_type,
                    domain,
                    tuple(node.input),
                    tuple(node.output),
                    {},
                    MLNode(node, opsets),
                    name,
                    _num_outputs(node),
                )
            )
            continue
        if not is_implemented(node.op_type, domain):
            raise _unavailable(node, domain, opsets, name)
        function = importers.get(node.op_type, domain)
        if function is None and domain == "" and _schema(node.op_type, OPSET_VERSION) is None:
            # An op added after opset 21: its ONNX function body, or onnxruntime at its own opset.
            schema = _schema(node.op_type, max(source_opset, OPSET_VERSION))
            if schema is None:
                raise _unavailable(node, domain, {"": source_opset}, name)
            if schema.has_function or schema.has_context_dependent_function:
                function = FunctionBody(_with_defaults(node, schema), source_opset, opsets)
            else:
                function = EagerNode(node, {"": max(source_opset, schema.since_version)})
        elif function is None and shape_rules.get(node.op_type, domain) is not None:
            pass  # recorded with its shape rule
        elif function is None and domain and opsets.get(domain, 1) != 1:
            # Recorded graphs declare other domains at version 1; later versions run on their own.
            function = EagerNode(node, {"": OPSET_VERSION, domain: opsets[domain]})
        elif function is None:
            # Shape inference of ops defined by functions needs every attribute spelled out: those
            # of the opset the node is recorded at (not a newer one's added attributes, which would
            # make the node need that opset).
            schema_opset = opsets.get(domain, OPSET_VERSION)
            if domain == "" and source_opset > OPSET_VERSION:
                schema_opset = attribute_opset(node.op_type, source_opset, {a.name for a in node.attribute})
            schema = _schema(node.op_type, schema_opset, domain)
            if schema is not None:
                node = _with_defaults(node, schema)
        attrs: dict[str, Any] = {}
        for attribute in node.attribute:
            try:
                value = attribute_value(attribute)
            except ModelLoadError as error:
                raise ModelLoadError(
                    f"node '{name}' ({node.op_type}), attribute '{attribute.name}': {error}"
                ) from error
            except (ValueError, TypeError, KeyError, IndexError, NotImplementedError, OverflowError) as error:
                raise ModelLoadError(
                    f"node '{name}' ({node.op_type}): attribute '{attribute.name}' cannot be read: "
                    f"{type(error).__name__}: {error}"
                ) from error
            if isinstance(value, onnx.GraphProto):
                value = compile_graph(value, opsets, source_opset=source_opset)
            elif isinstance(value, list) and value and isinstance(value[0], onnx.GraphProto):
                value = [compile_graph(item, opsets, source_opset=source_opset) for item in value]
            attrs[attribute.name] = value
        if isinstance(function, (FunctionBody, EagerNode)):
            attrs = {}  # these read the node's attributes themselves
        elif function is None and attrs:
            attrs = compiled_attributes(attrs)
        newer = None
        if domain == "" and source_opset > OPSET_VERSION and not isinstance(function, (FunctionBody, EagerNode)):
            newer = (source_opset, frozenset(attrs))
        steps.append(
            Step(
                node.op_type,
                domain,
                tuple(node.input),
                tuple(node.output),
                attrs,
                function,
                name,
                _num_outputs(node),
                newer,
            )
        )
    constants = {}
    if with_initializers:
        for name, array in initializer_arrays(graph):
            constants[name] = initializer_constant(name, array)
    return Program(
        steps,
        [info.name for info in graph.input],
        [info.name for info in graph.output],
        [_static_output_type(info) for info in graph.output],
        constants,
    )


def compiled_attributes(attrs: dict) -> dict:
    """A recorded node's attributes, frozen once for every replay (its nodes' signatures and the
    shape rules' per-shape memos then cost a lookup per call), or as they are if one has no
    hashable form."""
    try:
        frozen = FrozenAttributes(attrs)
        hash(frozen.frozen)
    except TypeError:
        return attrs
    return frozen


# The attributes of a node that hold a constant the node computes with, by (domain, op_type): a
# module's dtype conversion (``.double()``) converts them as it converts the parameters, or a float64
# graph would combine them with float32 constants (which onnxruntime refuses).
_CONSTANT_ATTRIBUTES: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "Constant"): ("value", "sparse_value"),
    ("", "ConstantOfShape"): ("value",),
}
# Constant's list and scalar forms, read as the float32 tensor they mean so that they convert too.
_FLOAT32_FORMS = ("value_float", "value_floats")


def _converted_attributes(step: Step, convert_array: Callable[[np.ndarray], np.ndarray]) -> dict:
    attrs = dict(step.attrs)
    if step.domain == "" and step.op_type == "Constant":
        for form in _FLOAT32_FORMS:
            if attrs.get(form) is not None:
                attrs["value"] = np.array(attrs.pop(form), dtype=np.float32)
    for name in _CONSTANT_ATTRIBUTES.get((step.domain, step.op_type), ()):
        if isinstance(attrs.get(name), np.ndarray):
            attrs[name] = convert_array(attrs[name])
    return attrs


def with_converted_constants(
    program: Program, convert_tensor: Callable[[Tensor], Tensor], convert_array: Callable[[np.ndarray], np.ndarray]
) -> Program:
    """A copy of ``program`` whose constants are converted: the constant attributes of its nodes
    by ``convert_array``, its subgraphs' initializers by ``convert_tensor``, subgraphs included.

    The module's conversions (``.double()``, ``.to(dtype)``) apply it: the constants a graph holds
    in its nodes are part of what it computes with, as its parameters are.
    """

    def converted_subgraphs(value):
        if isinstance(value, Program):
            return with_converted_constants(value, convert_tensor, convert_array)
        if isinstance(value, list) and value and isinstance(value[0], Program):
            return [with_converted_constants(item, convert_tensor, convert_array) for item in value]
        return value

    steps = []
    for step in program.steps:
        attrs = {name: converted_subgraphs(value) for name, value in _converted_attributes(step, convert_array).items()}
        if step.importer is None and attrs:
            attrs = compiled_attributes(attrs)  # as compile_graph freezes a recorded node's attributes
        steps.append(
            Step(
                step.op_type,
                step.domain,
                step.inputs,
                step.outputs,
                attrs,
                step.importer,
                step.name,
                step.num_outputs,
                step.model_opset,
            )
        )
    constants = {name: convert_tensor(value) for name, value in program.constants.items()}
    return Program(steps, program.input_names, program.output_names, program.output_types, constants)


def initializer_arrays(graph: onnx.GraphProto) -> list[tuple[str, np.ndarray]]:
    """The graph's initializers and sparse initializers (made dense) as ``(name, array)`` pairs.

    Raises:
        ModelLoadError: naming a tensor whose data disagrees with its dims or type.
    """
    arrays = []
    for tensor in graph.initializer:
        try:
            arrays.append((tensor.name, tensor_to_array(tensor)))
        except (ValueError, TypeError, KeyError, IndexError, OverflowError) as error:
            raise ModelLoadError(
                f"initializer '{tensor.name}' cannot be read: {type(error).__name__}: {error}"
            ) from error
    for sparse in graph.sparse_initializer:
        arrays.append((sparse.values.name, sparse_to_dense(sparse)))
    return arrays


def initializer_constant(name: str, array: np.ndarray) -> Tensor:
    """The initializer ``name`` of a graph as a constant Tensor (see ``make_constant``).

    Raises:
        ModelLoadError: the array's dtype is not one onnxnn tensors hold.
    """
    try:
        return make_constant(array)
    except TypeError:
        raise ModelLoadError(
            f"initializer '{name}' holds {array.dtype} values, which onnxnn tensors cannot hold"
        ) from None


_NONDETERMINISTIC = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli", "Multinomial"}
)
_FOLD_LIMIT = 64


def _foldable(step: Step, arguments: list, results) -> bool:
    """Whether a node computes a small integer value from structural constants only.

    Shape arithmetic of exported models (Shape -> Gather -> Concat -> Reshape) is such a chain;
    folding it keeps reshape targets and slice bounds structural, as onnxnn's own ops record them.
    """
    if step.op_type in _NONDETERMINISTIC:
        return False
    for argument in arguments:
        if argument is not None and (not isinstance(argument, Tensor) or value_of(argument).static is None):
            return False
    return all(
        isinstance(result, Tensor) and result.dtype.category != 2 and result.numel() <= _FOLD_LIMIT
        for result in results
    )


def _fold(results) -> tuple:
    values = [value_of(result) for result in results]
    realize(values)
    return tuple(tensor_of(static_constant(value.data, value.dtype)) for value in values)


def _describe(arguments: list) -> str:
    return (
        "["
        + ", ".join(
            "None"
            if value is None
            else f"{value.dtype.name}{list(value.shape)}"
            if isinstance(value, Tensor)
            else type(value).__name__
            for value in arguments
        )
        + "]"
    )


def run_program(program: Program, scope: Scope, training: bool) -> list:
    """Replays ``program`` with its inputs already in ``scope``; returns the values of its outputs."""

    def run_graph(subprogram: Program, inputs: list) -> list:
        inner = Scope(scope)
        inner.update(subprogram.constants)
        for name, value in zip(subprogram.input_names, inputs):
            inner[name] = value
        return run_program(subprogram, inner, training)

    for step in program.steps:
        try:
            arguments = [scope[name] if name else None for name in step.inputs]
        except KeyError as missing:
            raise RuntimeError(
                f"node '{step.name}' ({step.op_type}) reads '{missing.args[0]}', which no "
                "graph input, initializer or earlier node defines"
            ) from None
        try:
            if step.importer is not None:
                model_opset = None if step.model_opset is None else step.model_opset[0]
                call = NodeCall(step.name, step.op_type, step.num_outputs, training, run_graph, model_opset)
                results = step.importer(call, *arguments, **step.attrs)
            else:
                opset = (
                    None
                    if step.model_opset is None
                    # model_opset: the (opset, attribute names) pair, which mypy cannot count when unpacked.
                    else recorded_opset(step.op_type, *step.model_opset, step.attrs, arguments)  # type: ignore[call-arg]
                )
                results = apply_op(
                    step.op_type,
                    tuple(arguments),
                    step.attrs,
                    domain=step.domain,
                    num_outputs=step.num_outputs,
                    opset=opset,
                )
        except (ModelLoadError, RuntimeError, MemoryError) as error:
            # Already documented types: a failure for these inputs (RuntimeError, as PyTorch and
            # onnxruntime raise), or a node of an enclosing body that named itself.
            # add_note is Python 3.11+ (3.10 raises the error without the node's name).
            if hasattr(error, "add_note"):
                error.add_note(f"(while replaying ONNX node '{step.name}' of op_type '{step.op_type}')")
            raise
        except Exception as error:
            # A shape rule or importer tripping over the node's attributes (a Transpose perm out
            # of range): the model is malformed, and the message must say which node.
            raise ModelLoadError(
                f"ONNX node '{step.name}' of op_type '{step.op_type}' is invalid for inputs "
                f"{_describe(arguments)}: {type(error).__name__}: {error}"
            ) from error
        if isinstance(results, Tensor):
            results = (results,)
        check_allocation(step.name, step.op_type, results)
        if step.importer is None and _foldable(step, arguments, results):
            results = _fold(results)
        for name, value in zip(step.outputs, results):
            if name:
                scope[name] = value
    return [scope[name] if name else None for name in program.output_names]


class FunctionBody:
    """The importer of an op newer than opset 21: replays the function body ONNX defines it by.

    Context-dependent bodies (Attention, RMSNormalization, RotaryEmbedding) depend on the input
    types, so a body is built and compiled per input signature and cached.
    """

    def __init__(self, node: onnx.NodeProto, opset: int, opsets: dict):
        self.node = node
        self.opset = opset
        self.opsets = opsets
        self.programs: dict = {}

    @property
    def schema(self):
        return onnx.defs.get_schema(self.node.op_type, max(self.opset, OPSET_VERSION), "")

    def __getstate__(self) -> dict:
        # Compiled bodies are a cache (and hold tensors): copies and pickles rebuild them.
        return {"node": self.node, "opset": self.opset, "opsets": self.opsets, "programs": {}}

    def _function(self, inputs: tuple) -> onnx.FunctionProto:
        schema, function = self.schema, onnx.FunctionProto()
        if schema.has_function:
            versions = [v for v in schema.function_opset_versions if v <= self.opset] or [schema.since_version]
            function.ParseFromString(schema.get_function_with_opset_version(max(versions)))
            return function
        types = [
            onnx.TypeProto()
            if value is None
            else onnx.helper.make_tensor_type_proto(value.dtype.onnx_type, tuple(value.shape))
            for value in inputs
        ]
        versions = [v for v in schema.context_dependent_function_opset_versions if v <= self.opset]
        function.ParseFromString(
            schema.get_context_dependent_function_with_opset_version(
                max(versions or [schema.since_version]),
                self.node.SerializeToString(),
                [proto.SerializeToString() for proto in types],
            )
        )
        return function

    def _compile(self, inputs: tuple):
        function = self._function(inputs)
        given = {attribute.name: attribute for attribute in self.node.attribute}
        defaults = {attribute.name: attribute for attribute in function.attribute_proto}
        nodes = []
        for body_node in function.node:
            resolved = onnx.NodeProto()
            resolved.CopyFrom(body_node)
            del resolved.attribute[:]
            for attribute in body_node.attribute:
                if attribute.ref_attr_name:
                    source = given.get(attribute.ref_attr_name, defaults.get(attribute.ref_attr_name))
                    if source is None:
                        continue  # an unset optional attribute: the body op's own default applies
                    replaced = onnx.AttributeProto()
                    replaced.CopyFrom(source)
                    replaced.name = attribute.name
                    attribute = replaced
                resolved.attribute.append(attribute)
            nodes.append(resolved)
        # Outputs the node omits may be left undefined by the body: they are not read back.
        wanted = [
            name if position < len(self.node.output) and self.node.output[position] else ""
            for position, name in enumerate(function.output)
        ]
        graph = onnx.helper.make_graph(
            nodes,
            function.name,
            [onnx.ValueInfoProto(name=n) for n in function.input],
            [onnx.ValueInfoProto(name=n) for n in wanted],
        )
        body_opset = next(
            (entry.version for entry in function.opset_import if entry.domain in ("", "ai.onnx")), self.opset
        )
        return compile_graph(graph, self.opsets, source_opset=body_opset)

    def __call__(self, call: NodeCall, *inputs):
        key = tuple(None if not isinstance(value, Tensor) else (value.dtype, tuple(value.shape)) for value in inputs)
        program = self.programs.get(key)
        if program is None:
            program = self.programs[key] = self._compile(inputs)
        arguments = list(inputs) + [None] * (len(program.input_names) - len(inputs))
        outputs = call.run_graph(program, arguments)
        return outputs[: call.num_outputs]

"""GraphModule: an ONNX graph as a trainable Module, and the compiled node list it replays.

Compiling a graph (once, at import time) converts every attribute to Python (subgraph attributes
to nested programs) and checks that each op can run: it has a shape rule, an importer function,
or is a standard ONNX op that shape inference and onnxruntime handle. Replaying walks the steps
with ``apply_op``, so an imported model records the same lazy nodes as code written with
onnxnn's own ops.
"""
from __future__ import annotations

import dataclasses
import functools
import re
from collections import OrderedDict
from typing import Any

import numpy as np
import onnx

from ..errors import ModelLoadError
from ..nn.modules.module import Module
from ..nn.parameter import Parameter
from ..ir import dtypes
from ..ir.plan import OPSET_VERSION
from ..runtime.grad_mode import no_grad
from ..ir.graph import static_constant
from ..ir.registry import importers, shape_rules
from ..runtime.tensor import Tensor, apply_op
from .attributes import attribute_value, sparse_to_dense, tensor_to_array
from .limits import check_allocation
from .loading import DEFAULT_DOMAINS
from .ml import ML_DOMAIN, MLNode, check_ml_node
from .importers import EMPTY_OPTIONAL, EagerNode, FunctionBody, NodeCall, make_constant
from ..runtime.realization import realize

__all__ = ["GraphModule", "ModelMetadata", "compile_graph", "run_program"]


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

    __slots__ = ("op_type", "domain", "inputs", "outputs", "attrs", "importer", "name", "num_outputs")

    def __init__(self, op_type, domain, inputs, outputs, attrs, importer, name, num_outputs):
        self.op_type = op_type
        self.domain = domain
        self.inputs = inputs
        self.outputs = outputs
        self.attrs = attrs
        self.importer = importer
        self.name = name
        self.num_outputs = num_outputs


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
    dims = tuple(dim.dim_value if dim.HasField("dim_value") else (dim.dim_param or None)
                 for dim in tensor_type.shape.dim)
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
        f"(opset {opsets.get(domain, 'not imported')}), used by node '{name}'{reason}")


def compile_graph(graph: onnx.GraphProto, opsets: dict[str, int], with_initializers: bool = True,
                  source_opset: int | None = None) -> Program:
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
            steps.append(Step(node.op_type, domain, tuple(node.input), tuple(node.output), {},
                              MLNode(node, opsets), name, _num_outputs(node)))
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
            # Shape inference of ops defined by functions needs every attribute spelled out.
            schema = _schema(node.op_type, opsets.get(domain, OPSET_VERSION), domain)
            if schema is not None:
                node = _with_defaults(node, schema)
        attrs: dict[str, Any] = {}
        for attribute in node.attribute:
            try:
                value = attribute_value(attribute)
            except ModelLoadError as error:
                raise ModelLoadError(f"node '{name}' ({node.op_type}), attribute '{attribute.name}': {error}") from error
            except (ValueError, TypeError, KeyError, IndexError, NotImplementedError, OverflowError) as error:
                raise ModelLoadError(f"node '{name}' ({node.op_type}): attribute '{attribute.name}' cannot be read: "
                                     f"{type(error).__name__}: {error}") from error
            if isinstance(value, onnx.GraphProto):
                value = compile_graph(value, opsets, source_opset=source_opset)
            elif isinstance(value, list) and value and isinstance(value[0], onnx.GraphProto):
                value = [compile_graph(item, opsets, source_opset=source_opset) for item in value]
            attrs[attribute.name] = value
        if isinstance(function, (FunctionBody, EagerNode)):
            attrs = {}  # these read the node's attributes themselves
        steps.append(Step(node.op_type, domain, tuple(node.input), tuple(node.output), attrs, function, name,
                          _num_outputs(node)))
    constants = {}
    if with_initializers:
        for name, array in initializer_arrays(graph):
            constants[name] = _constant(name, array)
    return Program(steps, [info.name for info in graph.input], [info.name for info in graph.output],
                   [_static_output_type(info) for info in graph.output], constants)


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
            raise ModelLoadError(f"initializer '{tensor.name}' cannot be read: {type(error).__name__}: "
                                 f"{error}") from error
    for sparse in graph.sparse_initializer:
        arrays.append((sparse.values.name, sparse_to_dense(sparse)))
    return arrays


def _constant(name: str, array: np.ndarray) -> Tensor:
    try:
        return make_constant(array)
    except TypeError:
        raise ModelLoadError(f"initializer '{name}' holds {array.dtype} values, which onnxnn tensors "
                             "cannot hold") from None


_NONDETERMINISTIC = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                               "Bernoulli", "Multinomial"})
_FOLD_LIMIT = 64


def _foldable(step: Step, arguments: list, results) -> bool:
    """Whether a node computes a small integer value from structural constants only.

    Shape arithmetic of exported models (Shape -> Gather -> Concat -> Reshape) is such a chain;
    folding it keeps reshape targets and slice bounds structural, as onnxnn's own ops record them.
    """
    if step.op_type in _NONDETERMINISTIC:
        return False
    for argument in arguments:
        if argument is not None and (not isinstance(argument, Tensor) or argument._value.static is None):
            return False
    return all(isinstance(result, Tensor) and result.dtype.category != 2 and result.numel() <= _FOLD_LIMIT
               for result in results)


def _fold(results) -> tuple:
    realize([result._value for result in results])
    return tuple(Tensor._from_value(static_constant(result._value.data, result.dtype)) for result in results)


def _describe(arguments: list) -> str:
    return "[" + ", ".join("None" if value is None
                           else f"{value.dtype.name}{list(value.shape)}" if isinstance(value, Tensor)
                           else type(value).__name__ for value in arguments) + "]"


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
            raise RuntimeError(f"node '{step.name}' ({step.op_type}) reads '{missing.args[0]}', which no "
                               "graph input, initializer or earlier node defines") from None
        try:
            if step.importer is not None:
                call = NodeCall(step.name, step.op_type, step.num_outputs, training, run_graph)
                results = step.importer(call, *arguments, **step.attrs)
            else:
                results = apply_op(step.op_type, tuple(arguments), step.attrs, domain=step.domain,
                                   num_outputs=step.num_outputs)
        except (ModelLoadError, RuntimeError, MemoryError) as error:
            # Already documented types: a failure for these inputs (RuntimeError, as PyTorch and
            # onnxruntime raise), or a node of an enclosing body that named itself.
            error.add_note(f"(while replaying ONNX node '{step.name}' of op_type '{step.op_type}')")
            raise
        except Exception as error:
            # A shape rule or importer tripping over the node's attributes (a Transpose perm out
            # of range): the model is malformed, and the message must say which node.
            raise ModelLoadError(f"ONNX node '{step.name}' of op_type '{step.op_type}' is invalid for inputs "
                                 f"{_describe(arguments)}: {type(error).__name__}: {error}") from error
        if isinstance(results, Tensor):
            results = (results,)
        check_allocation(step.name, step.op_type, results)
        if step.importer is None and _foldable(step, arguments, results):
            results = _fold(results)
        for name, value in zip(step.outputs, results):
            if name:
                scope[name] = value
    return [scope[name] if name else None for name in program.output_names]


# ============================================================================= GraphModule

_SEGMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")
# onnxnn's exporter names anonymous constants (scalars of the forward, reshape targets) like this;
# they are part of the graph, not of the exported module's state.
_ANONYMOUS_CONSTANT = re.compile(r"(onnxnn::)?constant_[0-9]+")


@dataclasses.dataclass(frozen=True)
class ModelMetadata:
    """What the ONNX file says about itself, kept on the imported module as ``.metadata``."""

    producer_name: str
    producer_version: str
    domain: str
    model_version: int
    doc_string: str
    ir_version: int
    graph_name: str
    opset_imports: dict
    original_opset_version: int | None
    metadata_props: dict


def _tensor_type_name(elem_type: int | None) -> str:
    if elem_type is None:
        return "a non-tensor value"
    try:
        return dtypes.as_dtype(elem_type).name
    except TypeError:
        return onnx.TensorProto.DataType.Name(elem_type).lower()


def _format_dims(dims: tuple) -> str:
    return "[" + ", ".join(str(size) if isinstance(size, int) else repr(size or "?") for size in dims) + "]"


class GraphModule(Module):
    """An ONNX graph as a trainable :class:`~onnxnn.nn.Module`; create it with :func:`from_onnx`.

    Floating-point initializers become Parameters, the others buffers, registered under their
    ONNX names: dotted names rebuild the submodule tree (``layer1.0.conv1.weight`` is parameter
    ``weight`` of ``layer1`` -> ``0`` -> ``conv1``), so ``state_dict()`` keys equal the initializer
    names and ``named_modules()`` shows the exporter's hierarchy. Names that cannot be attribute
    paths (``onnx::Conv_123``, a name that is also a prefix of others) live on this module under
    a sanitized attribute name while their ``state_dict`` key stays the ONNX name.

    ``forward(*inputs)`` replays the graph's nodes as onnxnn ops, so the module composes with
    others, fires hooks, exports again with ``to_onnx`` and trains: gradients reach its
    Parameters through each op's gradient rule. Inputs bind to the graph inputs in order; graph
    inputs that are also initializers (older exporters) are optional and default to the
    initializer. ``If``, ``Loop`` and ``Scan`` are unrolled at call time.

    Args:
        model: a checked model at onnxnn's opset 21, as ``loading.load_model`` returns it
            (:func:`from_onnx` does the reading, checking and conversion).
        original_opset_version: the default-domain opset the model was written for.

    Attributes:
        input_names: the required graph inputs, in order.
        optional_input_names: graph inputs backed by an initializer, in order.
        output_names: the graph outputs.
        metadata: a :class:`ModelMetadata` (producer, opsets, ...).

    Example::

        >>> model = onnxnn.import_.from_onnx("resnet18.onnx")
        >>> logits = model(onnxnn.randn(1, 3, 224, 224))
        >>> [name for name, _ in model.named_children()][:2]
        ['conv1', 'bn1']
    """

    def __init__(self, model: onnx.ModelProto, original_opset_version: int | None = None) -> None:
        super().__init__()
        graph = model.graph
        opsets = {("" if entry.domain in DEFAULT_DOMAINS else entry.domain): entry.version
                  for entry in model.opset_import}
        program = compile_graph(graph, opsets, with_initializers=False, source_opset=original_opset_version)
        arrays = initializer_arrays(graph)
        anonymous = model.producer_name == "onnxnn"
        state, constants = [], {}
        for name, array in arrays:
            if anonymous and _ANONYMOUS_CONSTANT.fullmatch(name):
                constants[name] = _constant(name, array)
            else:
                state.append((name, _state_tensor(name, array)))
        initializer_names = {name for name, _ in arrays}
        inputs = [info for info in graph.input]
        self.input_names = [info.name for info in inputs if info.name not in initializer_names]
        self.optional_input_names = [info.name for info in inputs if info.name in initializer_names]
        self.output_names = list(program.output_names)
        self.metadata = ModelMetadata(
            producer_name=model.producer_name, producer_version=model.producer_version, domain=model.domain,
            model_version=model.model_version, doc_string=model.doc_string, ir_version=model.ir_version,
            graph_name=graph.name, opset_imports=opsets, original_opset_version=original_opset_version,
            metadata_props={entry.key: entry.value for entry in model.metadata_props})
        self._program = program
        self._constants = constants
        self._float_dtype = None  # set by .double(), .half(), .to(dtype): what float inputs must be
        self._input_types = {info.name: value_type(info) for info in inputs}
        self._renamed: dict[str, str] = {}     # attribute on this module -> ONNX name
        self._attribute_of: dict[str, str] = {}  # ONNX name -> attribute on this module
        self._state_paths: list[tuple[str, tuple[str, ...], str]] = []
        self._register_state(state)

    # ------------------------------------------------------------------ building the module tree
    def _register_state(self, state: list) -> None:
        names = [name for name, _ in state]
        prefixes = set()
        for name in names:
            parts = name.split(".")
            for end in range(1, len(parts)):
                prefixes.add(".".join(parts[:end]))
        # Children the tree will need: a sanitized root attribute must not take their names.
        reserved = {prefix for prefix in prefixes if "." not in prefix}
        for name, tensor in state:
            parts = name.split(".")
            placeable = name not in prefixes and all(_SEGMENT.fullmatch(part) for part in parts)
            if placeable and self._fits(parts):
                owner = self
                for part in parts[:-1]:
                    if part not in owner._modules:
                        owner.add_module(part, Module())
                    owner = owner._modules[part]
                _register(owner, parts[-1], tensor)
                self._state_paths.append((name, tuple(parts[:-1]), parts[-1]))
                continue
            attribute = re.sub(r"[^A-Za-z0-9_]", "_", name) or "_"
            while hasattr(self, attribute) or attribute in self._renamed or attribute in reserved:
                attribute += "_"
            _register(self, attribute, tensor)
            self._renamed[attribute] = name
            self._attribute_of[name] = attribute
            self._state_paths.append((name, (), attribute))

    def _fits(self, parts: list[str]) -> bool:
        """Whether the dotted path can be registered without shadowing an existing attribute."""
        owner = self
        for depth, part in enumerate(parts[:-1]):
            child = owner._modules.get(part)
            if child is None:
                # The rest of the path goes into new plain containers.
                return not hasattr(owner, part) and not any(hasattr(_PLAIN_MODULE, p) for p in parts[depth + 1:])
            owner = child
        return not hasattr(owner, parts[-1])

    # ------------------------------------------------------------------ state_dict keys = ONNX names
    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        if not self._renamed:
            super()._save_to_state_dict(destination, prefix, keep_vars)
            return
        local: dict = OrderedDict()
        super()._save_to_state_dict(local, prefix, keep_vars)
        for key, value in local.items():
            name = key[len(prefix):]
            destination[prefix + self._renamed.get(name, name)] = value

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs) -> None:
        if not self._renamed:
            super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                          unexpected_keys, error_msgs)
            return
        translated: dict = OrderedDict()
        for key, value in state_dict.items():
            if key.startswith(prefix) and key[len(prefix):] in self._attribute_of:
                key = prefix + self._attribute_of[key[len(prefix):]]
            translated[key] = value
        first_missing, first_unexpected = len(missing_keys), len(unexpected_keys)
        super()._load_from_state_dict(translated, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)
        for keys, start in ((missing_keys, first_missing), (unexpected_keys, first_unexpected)):
            for position in range(start, len(keys)):
                name = keys[position][len(prefix):]
                keys[position] = prefix + self._renamed.get(name, name)

    def _apply(self, fn, recurse: bool = True):
        # Conversions (to, double, cuda, ...) reach the graph's own constants too, and a float
        # dtype change makes the module expect float inputs of the new dtype, as PyTorch does.
        super()._apply(fn, recurse)
        with no_grad():
            self._constants = {name: fn(value) for name, value in self._constants.items()}
            as32 = fn(Tensor._zeros((), dtypes.float32))
            as64 = fn(Tensor._zeros((), dtypes.float64))
        if not (as32.dtype is dtypes.float32 and as64.dtype is dtypes.float64):
            self._float_dtype = None if as32.dtype is dtypes.float32 else as32.dtype
        return self

    # ------------------------------------------------------------------ calling
    @property
    def opset_version(self) -> int | None:
        """The default-domain opset the graph runs at (onnxnn's, after conversion)."""
        return self.metadata.opset_imports.get("")

    def extra_repr(self) -> str:
        text = f"inputs={self.input_names}, outputs={self.output_names}, opset={self.opset_version}"
        if self.metadata.producer_name:
            text += f", producer={self.metadata.producer_name!r}"
        return text

    def _state_values(self, scope: Scope) -> None:
        for name, path, attribute in self._state_paths:
            owner = self
            for part in path:
                owner = owner._modules[part]
            value = owner._parameters.get(attribute)
            if value is None:
                value = owner._buffers.get(attribute)
            if value is None:
                raise RuntimeError(f"GraphModule: initializer '{name}' was removed from the module "
                                   "(its parameter or buffer is None)")
            scope[name] = value

    def _convert_input(self, name: str, value):
        dims, elem_type = self._input_types[name]
        if isinstance(value, (list, tuple)) and dims is None and elem_type is None:
            return [self._as_tensor(name, item) for item in value]  # an ONNX sequence input
        tensor = self._as_tensor(name, value)
        if self._float_dtype is not None and elem_type in _FLOAT_TYPES:
            elem_type = self._float_dtype.onnx_type
        if elem_type is not None and elem_type != onnx.TensorProto.UNDEFINED and tensor.dtype.onnx_type != elem_type:
            raise TypeError(f"GraphModule: input '{name}' expects dtype {_tensor_type_name(elem_type)}, "
                            f"but got {tensor.dtype.name}")
        if dims is not None:
            shape = tuple(tensor.shape)
            if len(shape) != len(dims) or any(isinstance(size, int) and size != got for size, got in zip(dims, shape)):
                raise ValueError(f"GraphModule: input '{name}' expects shape {_format_dims(dims)}, "
                                 f"but got {list(shape)}")
        return tensor

    @staticmethod
    def _as_tensor(name: str, value) -> Tensor:
        if isinstance(value, Tensor):
            return value
        if isinstance(value, (np.ndarray, np.generic)):
            try:
                return Tensor._from_array(np.asarray(value, order="C"))
            except TypeError:
                raise TypeError(f"GraphModule: input '{name}' is a numpy array of dtype {value.dtype}, "
                                "which onnxnn tensors cannot hold") from None
        raise TypeError(f"GraphModule: input '{name}' must be a Tensor or a numpy array, "
                        f"got {type(value).__name__}")

    def _bind_inputs(self, args: tuple, kwargs: dict) -> dict:
        required, optional = self.input_names, self.optional_input_names
        if len(args) > len(required) + len(optional):
            more = f" (and {len(optional)} optional)" if optional else ""
            raise TypeError(f"GraphModule.forward() takes {len(required)} positional inputs{more} "
                            f"but {len(args)} were given")
        bound = dict(zip(required + optional, args))
        for name, value in kwargs.items():
            if name not in self._input_types:
                raise TypeError(f"GraphModule.forward() got an unexpected input '{name}'; "
                                f"the graph inputs are {required + optional}")
            if name in bound:
                raise TypeError(f"GraphModule.forward() got multiple values for input '{name}'")
            bound[name] = value
        missing = [name for name in required if name not in bound]
        if missing:
            raise TypeError(f"GraphModule.forward() missing {len(missing)} required input(s): "
                            + ", ".join(f"'{name}'" for name in missing))
        return {name: self._convert_input(name, value) for name, value in bound.items()}

    def forward(self, *inputs, **named_inputs):
        """Runs the graph on tensors or numpy arrays; returns a Tensor, or a tuple for several outputs.

        Raises:
            TypeError: a wrong number of inputs, or an input of the wrong dtype.
            ValueError: an input whose shape disagrees with a static dimension of the graph.
            ModelLoadError: a node invalid for these inputs (an attribute out of range for their
                rank), naming the node and op_type; the shape rule's exception is ``__cause__``.
            RuntimeError: a computation that fails (onnxruntime's errors, a tensor larger than
                the process may allocate, a backward through an ``ai.onnx.ml`` op).
        """
        feeds = self._bind_inputs(inputs, named_inputs)
        scope = Scope()
        scope.update(self._constants)
        self._state_values(scope)
        scope.update(feeds)
        outputs = [None if value is EMPTY_OPTIONAL else value
                   for value in run_program(self._program, scope, self.training)]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


_PLAIN_MODULE = Module()
_FLOAT_TYPES = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
                          onnx.TensorProto.BFLOAT16})


def _state_tensor(name: str, array: np.ndarray) -> Tensor:
    try:
        value_dtype = dtypes.as_dtype(array.dtype)
    except TypeError:
        raise ModelLoadError(f"initializer '{name}' holds {array.dtype} values, which onnxnn tensors "
                             "cannot hold") from None
    tensor = Tensor._from_array(np.asarray(array, order="C"), value_dtype)
    if value_dtype.is_floating_point:
        return Parameter(tensor)
    return tensor


def _register(owner: Module, attribute: str, tensor: Tensor) -> None:
    if isinstance(tensor, Parameter):
        owner.register_parameter(attribute, tensor)
    else:
        owner.register_buffer(attribute, tensor)

"""GraphModule: an ONNX graph as a trainable Module.

The graph is compiled once, when the module is built, into a :class:`~onnxnn.import_.program.Program`;
``forward`` replays it (``program.run_program``) with the module's parameters and buffers bound to
the initializers' names.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections import OrderedDict

import numpy as np
import onnx

from ..errors import ModelLoadError
from ..ir import dtypes
from ..nn.modules.module import Module
from ..nn.parameter import Parameter
from ..runtime.grad_mode import no_grad
from ..runtime.tensor import Tensor
from .attributes import attribute_subgraphs
from .importers import EMPTY_OPTIONAL, constant_tensor
from .loading import DEFAULT_DOMAINS
from .program import (
    Scope,
    compile_graph,
    initializer_arrays,
    initializer_constant,
    run_program,
    value_type,
    with_converted_constants,
)

__all__ = ["GraphModule", "ModelMetadata"]

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

    Floating-point initializers become Parameters, the others buffers (and those read only as a
    BatchNormalization's mean or variance, as in PyTorch's BatchNorm), registered under their ONNX
    names: dotted names rebuild the submodule tree (``layer1.0.conv1.weight`` is parameter
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
        model: a checked model at onnxnn's opset 21 or newer, as ``loading.load_model`` returns it
            (:func:`from_onnx` does the reading, checking and conversion of older opsets).
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
        opsets = {
            ("" if entry.domain in DEFAULT_DOMAINS else entry.domain): entry.version for entry in model.opset_import
        }
        program = compile_graph(graph, opsets, with_initializers=False, source_opset=original_opset_version)
        arrays = initializer_arrays(graph)
        anonymous = model.producer_name == "onnxnn"
        statistics = _batch_norm_statistics(graph)
        state, constants = [], {}
        for name, array in arrays:
            if anonymous and _ANONYMOUS_CONSTANT.fullmatch(name):
                constants[name] = initializer_constant(name, array)
            else:
                state.append((name, _state_tensor(name, array, trainable=name not in statistics)))
        initializer_names = {name for name, _ in arrays}
        inputs = [info for info in graph.input]
        self.input_names = [info.name for info in inputs if info.name not in initializer_names]
        self.optional_input_names = [info.name for info in inputs if info.name in initializer_names]
        self.output_names = list(program.output_names)
        self.metadata = ModelMetadata(
            producer_name=model.producer_name,
            producer_version=model.producer_version,
            domain=model.domain,
            model_version=model.model_version,
            doc_string=model.doc_string,
            ir_version=model.ir_version,
            graph_name=graph.name,
            opset_imports=opsets,
            original_opset_version=original_opset_version,
            metadata_props={entry.key: entry.value for entry in model.metadata_props},
        )
        self._program = program
        self._constants = constants
        self._float_dtype = None  # set by .double(), .half(), .to(dtype): what float inputs must be
        self._input_types = {info.name: value_type(info) for info in inputs}
        self._renamed: dict[str, str] = {}  # attribute on this module -> ONNX name
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
                owner: Module = self
                for part in parts[:-1]:
                    if part not in owner._modules:
                        owner.add_module(part, Module())
                    owner = owner._modules[part]  # type: ignore[assignment]  # not None: the path's modules exist
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
        owner: Module = self
        for depth, part in enumerate(parts[:-1]):
            child = owner._modules.get(part)
            if child is None:
                # The rest of the path goes into new plain containers.
                return not hasattr(owner, part) and not any(hasattr(_PLAIN_MODULE, p) for p in parts[depth + 1 :])
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
            name = key[len(prefix) :]
            destination[prefix + self._renamed.get(name, name)] = value

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ) -> None:
        if not self._renamed:
            super()._load_from_state_dict(
                state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
            )
            return
        translated: dict = OrderedDict()
        for key, value in state_dict.items():
            if key.startswith(prefix) and key[len(prefix) :] in self._attribute_of:
                key = prefix + self._attribute_of[key[len(prefix) :]]
            translated[key] = value
        first_missing, first_unexpected, first_error = len(missing_keys), len(unexpected_keys), len(error_msgs)
        super()._load_from_state_dict(
            translated, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )
        for keys, start in ((missing_keys, first_missing), (unexpected_keys, first_unexpected)):
            for position in range(start, len(keys)):
                name = keys[position][len(prefix) :]
                keys[position] = prefix + self._renamed.get(name, name)
        for position in range(first_error, len(error_msgs)):
            error_msgs[position] = self._with_onnx_names(error_msgs[position], prefix)

    # How Module's load errors name a key (size mismatch, a value that is not a tensor).
    _KEY_FORMS = ("size mismatch for {}:", 'parameter named "{}"')

    def _with_onnx_names(self, message: str, prefix: str) -> str:
        """``message`` naming the state_dict keys (ONNX names) where it names sanitized attributes."""
        for attribute, name in self._renamed.items():
            for form in self._KEY_FORMS:
                message = message.replace(form.format(prefix + attribute), form.format(prefix + name))
        return message

    def _apply(self, fn, recurse: bool = True):
        # Conversions (to, double, cuda, ...) reach the graph's own constants too, and a float
        # dtype change makes the module expect float inputs of the new dtype, as PyTorch does.
        super()._apply(fn, recurse)
        with no_grad():
            self._constants = {name: fn(value) for name, value in self._constants.items()}
            as32 = fn(constant_tensor(np.zeros((), np.float32)))
            as64 = fn(constant_tensor(np.zeros((), np.float64)))
            targets = {
                source: fn(constant_tensor(np.zeros((), source.numpy_dtype))).dtype
                for source in (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
            }
            self._program = with_converted_constants(self._program, fn, functools.partial(_converted, targets))
        if not (as32.dtype is dtypes.float32 and as64.dtype is dtypes.float64):
            self._float_dtype = None if as32.dtype is dtypes.float32 else as32.dtype
        return self

    # ------------------------------------------------------------------ calling
    @property
    def opset_version(self) -> int | None:
        """The default-domain opset of the graph: the model's own from opset 21 on, else 21 (converted)."""
        return self.metadata.opset_imports.get("")

    def extra_repr(self) -> str:
        text = f"inputs={self.input_names}, outputs={self.output_names}, opset={self.opset_version}"
        if self.metadata.producer_name:
            text += f", producer={self.metadata.producer_name!r}"
        return text

    def _state_values(self, scope: Scope) -> None:
        owner: Module = self
        owner_path: tuple = ()
        for name, path, attribute in self._state_paths:
            if path != owner_path:  # a layer's entries are consecutive: its owner is found once
                owner, owner_path = self, path
                for part in path:
                    owner = owner._modules[part]  # type: ignore[assignment]  # not None: the path's modules exist
            value: Tensor | None = owner._parameters.get(attribute)
            if value is None:
                value = owner._buffers.get(attribute)
            if value is None:
                raise RuntimeError(
                    f"GraphModule: initializer '{name}' was removed from the module (its parameter or buffer is None)"
                )
            scope[name] = value

    def _convert_input(self, name: str, value):
        dims, elem_type = self._input_types[name]
        if isinstance(value, (list, tuple)) and dims is None and elem_type is None:
            return [self._as_tensor(name, item) for item in value]  # an ONNX sequence input
        tensor = self._as_tensor(name, value)
        if self._float_dtype is not None and elem_type in _FLOAT_TYPES:
            elem_type = self._float_dtype.onnx_type
        if elem_type is not None and elem_type != onnx.TensorProto.UNDEFINED and tensor.dtype.onnx_type != elem_type:
            raise TypeError(
                f"GraphModule: input '{name}' expects dtype {_tensor_type_name(elem_type)}, but got {tensor.dtype.name}"
            )
        if dims is not None:
            shape = tuple(tensor.shape)
            if len(shape) != len(dims) or any(isinstance(size, int) and size != got for size, got in zip(dims, shape)):
                raise ValueError(
                    f"GraphModule: input '{name}' expects shape {_format_dims(dims)}, but got {list(shape)}"
                )
        return tensor

    @staticmethod
    def _as_tensor(name: str, value) -> Tensor:
        if isinstance(value, Tensor):
            return value
        if isinstance(value, (np.ndarray, np.generic)):
            try:
                return constant_tensor(np.asarray(value, order="C"))
            except TypeError:
                raise TypeError(
                    f"GraphModule: input '{name}' is a numpy array of dtype {value.dtype}, "
                    "which onnxnn tensors cannot hold"
                ) from None
        raise TypeError(f"GraphModule: input '{name}' must be a Tensor or a numpy array, got {type(value).__name__}")

    def _bind_inputs(self, args: tuple, kwargs: dict) -> dict:
        required, optional = self.input_names, self.optional_input_names
        if len(args) > len(required) + len(optional):
            more = f" (and {len(optional)} optional)" if optional else ""
            raise TypeError(
                f"GraphModule.forward() takes {len(required)} positional inputs{more} but {len(args)} were given"
            )
        bound = dict(zip(required + optional, args))
        for name, value in kwargs.items():
            if name not in self._input_types:
                raise TypeError(
                    f"GraphModule.forward() got an unexpected input '{name}'; "
                    f"the graph inputs are {required + optional}"
                )
            if name in bound:
                raise TypeError(f"GraphModule.forward() got multiple values for input '{name}'")
            bound[name] = value
        missing = [name for name in required if name not in bound]
        if missing:
            raise TypeError(
                f"GraphModule.forward() missing {len(missing)} required input(s): "
                + ", ".join(f"'{name}'" for name in missing)
            )
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
        outputs = [
            None if value is EMPTY_OPTIONAL else value for value in run_program(self._program, scope, self.training)
        ]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _converted(targets: dict, array: np.ndarray) -> np.ndarray:
    """``array`` in the float dtype a conversion maps its own to (``targets``); others as they are."""
    source = dtypes.as_dtype(array.dtype)
    target = targets.get(source, source)
    return array if target is source else np.asarray(array, dtype=target.numpy_dtype)


_PLAIN_MODULE = Module()
_FLOAT_TYPES = frozenset(
    {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16}
)


# BatchNormalization's inputs that hold statistics (input_mean, input_var), not weights.
_STATISTICS_INPUTS = {("BatchNormalization", 3), ("BatchNormalization", 4)}


def _batch_norm_statistics(graph: onnx.GraphProto) -> set[str]:
    """The names read only as a BatchNormalization's mean or variance, in ``graph`` and its subgraphs.

    They become buffers, as PyTorch's BatchNorm keeps its running statistics: an optimizer never
    moves them (an update could make a variance negative, and the layer's output NaN).
    """
    statistics: set[str] = set()
    other_uses: set[str] = set()
    graphs = [graph]
    while graphs:
        current = graphs.pop()
        for node in current.node:
            default_domain = node.domain in DEFAULT_DOMAINS
            for position, name in enumerate(node.input):
                is_statistic = default_domain and (node.op_type, position) in _STATISTICS_INPUTS
                (statistics if is_statistic else other_uses).add(name)
            for attribute in node.attribute:
                graphs.extend(attribute_subgraphs(attribute))
        other_uses.update(output.name for output in current.output)
    return statistics - other_uses


def _state_tensor(name: str, array: np.ndarray, trainable: bool = True) -> Tensor:
    try:
        value_dtype = dtypes.as_dtype(array.dtype)
    except TypeError:
        raise ModelLoadError(
            f"initializer '{name}' holds {array.dtype} values, which onnxnn tensors cannot hold"
        ) from None
    tensor = constant_tensor(np.asarray(array, order="C"), value_dtype)
    if value_dtype.is_floating_point and trainable:
        return Parameter(tensor)
    return tensor


def _register(owner: Module, attribute: str, tensor: Tensor) -> None:
    if isinstance(tensor, Parameter):
        owner.register_parameter(attribute, tensor)
    else:
        owner.register_buffer(attribute, tensor)

"""The kernel table: one array function per ONNX op, keyed by ``(domain, op_type)``.

A kernel is ``kernel(xp, inputs, attrs) -> list[array]``: ``xp`` is the array module (numpy or
cupy), ``inputs`` the node's input arrays in ONNX order (None for an omitted optional input) and
``attrs`` the node's attributes plus ``"_num_outputs"`` (the node's output count) and
``"_used_outputs"`` (the indices of the outputs anything reads: a kernel may skip the others).
Kernels never modify their inputs; they may return views of them.

Registration also says what the executor does around the kernel, so kernels stay plain math:

- ``types``: the dtypes the op's first input may have; any other raises TypeError when the plan
  is compiled, before anything runs.
- ``native_low_precision``: whether the kernel runs on float16/bfloat16 arrays as they are (data
  movement: reshapes, gathers, concatenation). Every other kernel gets float16/bfloat16 inputs
  widened to float32 and its results rounded back to the recorded dtype, which is what PyTorch's
  CPU kernels do and what keeps numpy off its slow float16 loops.
- ``direct``: a direct form, a plain numpy function of the node's input arrays (``np.add`` for Add)
  that computes exactly what the kernel computes when the node's attributes do not matter for it.
  The executor's generated straight-line code calls it instead of the kernel, which saves the
  kernel's list building and attribute handling (most of the cost of a small elementwise node).
  ``register_direct`` declares direct forms that depend on attribute values (Gemm's transA/transB),
  on the dtype (Div on floats) or on the node's recorded output shape (Reshape, Unsqueeze).
- ``finished_results``: the kernel promises that, given inputs of the node's recorded dtypes and
  shapes, every output it returns is a C-contiguous numpy array (never a numpy scalar) of the
  recorded dtype and shape. The generated code then checks nothing after the call (the Momentum
  update, whose eight outputs would cost four checks each).

Example::

    @kernels.register("Relu", types=FLOATING | SIGNED)
    def relu(xp, inputs, attrs):
        return [xp.maximum(inputs[0], 0)]
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from .registry import Registry

__all__ = [
    "KernelRegistry",
    "DirectForm",
    "kernels",
    "FLOATING",
    "SIGNED",
    "UNSIGNED",
    "INTEGER",
    "NUMERIC",
    "BOOL",
    "ALL_TYPES",
    "LOW_PRECISION",
]

FLOATING = frozenset({"float16", "bfloat16", "float32", "float64"})
LOW_PRECISION = frozenset({"float16", "bfloat16"})
SIGNED = frozenset({"int8", "int16", "int32", "int64"})
UNSIGNED = frozenset({"uint8", "uint16", "uint32", "uint64"})
INTEGER = SIGNED | UNSIGNED
NUMERIC = FLOATING | INTEGER
BOOL = frozenset({"bool"})
ALL_TYPES = NUMERIC | BOOL


class DirectForm(NamedTuple):
    """A numpy function computing an op exactly like its kernel under stated conditions.

    ``function`` is called with the node's input arrays (None for an omitted optional input) and
    returns the one output; with ``output_shape`` set it is called with the first input and the
    node's recorded output shape instead, and applies only where the node's other inputs are
    constants embedded in the plan (so the recorded shape cannot change between runs). Nodes whose
    kernel widens float16/bfloat16 to float32 never use a direct form, so it need only be exact
    for the dtypes the kernel runs on as they are.
    """

    function: Callable
    kernel: Callable  # the kernel it stands for: a kernel replaced later voids the form
    defaults: dict  # the attributes the form depends on, with ONNX's default values
    required: dict  # the values those attributes must have (defaults filled in)
    types: frozenset | None  # dtype names the first input may have (None: any the kernel takes)
    output_shape: bool  # called as function(first_input, recorded_output_shape)

    def applies(self, attrs: dict, dtype_name: str | None) -> bool:
        """Whether a node with these attributes and first-input dtype may use this form."""
        if self.types is not None and dtype_name not in self.types:
            return False
        if self.output_shape:
            return True  # the recorded output shape already accounts for every attribute
        if any(name not in self.defaults for name in attrs):
            return False  # an attribute the form knows nothing about may change the result
        return all(attrs.get(name, self.defaults[name]) == value for name, value in self.required.items())


class KernelRegistry(Registry):
    """The ``(domain, op_type) -> kernel`` table, with each kernel's dtype contract and direct forms."""

    def __init__(self):
        super().__init__("kernel")
        self.types: dict[tuple[str, str], frozenset] = {}
        self.native_low_precision: set[tuple[str, str]] = set()
        # Per op, the kernel that promised finished results (a kernel replaced in the table did not).
        self.finished_results: dict[tuple[str, str], Callable] = {}
        self.direct_forms: dict[tuple[str, str], list[DirectForm]] = {}

    def register(
        self,
        *op_types: str,
        domain: str = "",
        types: frozenset = ALL_TYPES,
        native_low_precision: bool = False,
        direct: Callable | None = None,
        finished_results: bool = False,
    ) -> Callable[[Callable], Callable]:
        """Decorator registering ``kernel(xp, inputs, attrs) -> list[array]`` for each of ``op_types``.

        Args:
            op_types: the ONNX op types the function computes.
            domain: the ONNX domain ("" is the default domain, ai.onnx).
            types: dtype names the first input may have.
            native_low_precision: run float16/bfloat16 inputs as they are instead of widening them.
            direct: a numpy function of the input arrays computing exactly what the kernel does for
                every dtype in ``types``, used for nodes without attributes (see ``register_direct``).
            finished_results: the kernel returns C-contiguous numpy arrays of the recorded dtypes and
                shapes whenever its inputs have theirs, so its results need no checks.

        Example::

            @kernels.register("Add", types=NUMERIC, direct=np.add)
            def add(xp, inputs, attrs):
                return [xp.add(inputs[0], inputs[1])]
        """

        def decorate(function: Callable) -> Callable:
            for op_type in op_types:
                key = (domain, op_type)
                self.table[key] = function
                self.types[key] = types
                self.direct_forms.pop(key, None)
                if native_low_precision:
                    self.native_low_precision.add(key)
                else:
                    self.native_low_precision.discard(key)
                if finished_results:
                    self.finished_results[key] = function
                else:
                    self.finished_results.pop(key, None)
                if direct is not None:
                    self.register_direct(op_type, direct, domain=domain)
            return function

        return decorate

    def register_direct(
        self,
        op_type: str,
        function: Callable,
        *,
        domain: str = "",
        defaults: dict | None = None,
        when: dict | None = None,
        types: frozenset | None = None,
        output_shape: bool = False,
    ) -> Callable:
        """Declares a direct form of an already registered kernel (several may be declared; the first
        that applies to a node is used).

        Args:
            op_type: the ONNX op type.
            function: a numpy function of the node's input arrays returning its one output, exactly
                equal (values and dtype) to the kernel's result wherever this form applies.
            domain: the ONNX domain.
            defaults: the attributes the form depends on, with their ONNX default values. A node
                with any other attribute never uses the form.
            when: the values those attributes must have (by default: their defaults).
            types: dtype names of the first input the form is exact for (default: every dtype the
                kernel takes).
            output_shape: ``function(first_input, recorded_output_shape)`` computes the node, whatever
                its attributes, for ops that only reshape their first input.

        Returns:
            ``function``, so the declaration can sit right under the kernel.

        Example::

            kernels.register_direct("Gemm", np.matmul, defaults=GEMM_DEFAULTS)
        """
        key = (domain, op_type)
        if key not in self.table:
            raise KeyError(
                f"no kernel registered for op_type '{op_type}' (domain '{domain or 'ai.onnx'}'): "
                f"register the kernel before its direct forms"
            )
        defaults = dict(defaults or {})
        required = {**defaults, **(when or {})}
        unknown = sorted(set(required) - set(defaults))
        if unknown:
            raise ValueError(f"{op_type} direct form: attributes {unknown} in `when` have no declared default")
        form = DirectForm(function, self.table[key], defaults, required, types, output_shape)
        self.direct_forms.setdefault(key, []).append(form)
        return function

    def direct_form(self, op_type: str, domain: str, attrs: dict, dtype_name: str | None) -> DirectForm | None:
        """The first direct form declared for the op that applies to a node, or None.

        A form declared for another kernel than the one now in the table (a kernel replaced in
        the table, as tests do) never applies: the direct form must compute what the kernel does.
        """
        kernel = self.table.get((domain, op_type))
        for form in self.direct_forms.get((domain, op_type), ()):
            if form.kernel is kernel and form.applies(attrs, dtype_name):
                return form
        return None

    def lookup(
        self, op_type: str, domain: str = "", *, opset: int | None = None, node_name: str | None = None
    ) -> Callable:
        """The kernel of an op; NotImplementedError naming the op, its domain and this executor otherwise."""
        function = self.table.get((domain, op_type))
        if function is None:
            raise NotImplementedError(
                f"onnxnn kernels executor has no kernel for op_type '{op_type}' (domain '{domain or 'ai.onnx'}')"
            )
        return function

    def check_dtype(self, op_type: str, domain: str, dtype_name: str) -> None:
        """Raises TypeError when the op's kernel does not take ``dtype_name`` as its first input."""
        allowed = self.types.get((domain, op_type), ALL_TYPES)
        if dtype_name not in allowed:
            raise TypeError(
                f"onnxnn kernels executor: {op_type} does not support dtype {dtype_name} "
                f"(supported: {', '.join(sorted(allowed))})"
            )


kernels = KernelRegistry()

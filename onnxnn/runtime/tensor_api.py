"""More of torch.Tensor's methods: those that only call one function of ``runtime/ops`` with the
tensor first, their in-place variants, and the ``new_*`` constructors.

Kept apart from ``tensor_methods.py`` (operators and the original math methods) so each file stays
one readable idea: a method here is a row of a table, documented by the function it calls
(``Tensor.topk`` is ``onnxnn.topk``). ``docs/api_status.md`` lists what is covered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import creation, ops
from . import tensor as _tensor  # circular (Tensor subclasses TensorAPI): attributes are read at call time
from ..ir.graph import hold
from .aliases import leave_group
from .autocast_scope import outside_autocast
from .views import reshape_in_place

if TYPE_CHECKING:
    # Type checkers see the methods attached below from the tables; at run time the base is object.
    from .tensor_declarations import TensorDeclarations as _AttachedMethods
else:
    _AttachedMethods = object

# Methods ``x.name(*args, **kwargs)`` that are ``onnxnn.name(x, *args, **kwargs)``.
DELEGATED = (
    # sorting and scans
    "topk",
    "sort",
    "argsort",
    "msort",
    "kthvalue",
    "median",
    "nanmedian",
    "cumsum",
    "cumprod",
    "logcumsumexp",
    "cummax",
    "cummin",
    # matrices
    "addmm",
    "addbmm",
    "baddbmm",
    "addmv",
    "addr",
    "mv",
    "outer",
    "ger",
    "inner",
    "kron",
    "tril",
    "triu",
    "diagonal",
    "diag",
    "diag_embed",
    "diagflat",
    "trace",
    "cross",
    "vdot",
    # rearranging and index writes
    "roll",
    "fliplr",
    "flipud",
    "rot90",
    "tensor_split",
    "hsplit",
    "vsplit",
    "dsplit",
    "repeat_interleave",
    "movedim",
    "moveaxis",
    "swapaxes",
    "swapdims",
    "unfold",
    "select",
    "ravel",
    "index_add",
    "index_copy",
    "index_fill",
    "masked_scatter",
    # pointwise
    "addcmul",
    "addcdiv",
    "nan_to_num",
    "square",
    "log1p",
    "expm1",
    "log2",
    "log10",
    "exp2",
    "logaddexp",
    "logaddexp2",
    "xlogy",
    "hypot",
    "deg2rad",
    "rad2deg",
    "frac",
    "fmod",
    "remainder",
    "floor_divide",
    "clamp_min",
    "clamp_max",
    "sgn",
    "positive",
    "negative",
    "absolute",
    "multiply",
    "subtract",
    "divide",
    "true_divide",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "not_equal",
    "float_power",
    "heaviside",
    "signbit",
    "nansum",
    "nanmean",
    "logit",
    "isposinf",
    "isneginf",
    "isreal",
    "logical_xor",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_not",
    "diff",
    "count_nonzero",
    "aminmax",
    "tan",
    "asin",
    "arcsin",
    "acos",
    "arccos",
    "atan",
    "arctan",
    "sinh",
    "cosh",
    "asinh",
    "arcsinh",
    "acosh",
    "arccosh",
    "atanh",
    "arctanh",
    "atan2",
    "arctan2",
    "copysign",
    "fmax",
    "fmin",
    "erfc",
    "sinc",
    "fix",
    "ldexp",
    # statistics, data-dependent results, out-of-place writes
    "quantile",
    "nanquantile",
    "cov",
    "corrcoef",
    "dist",
    "unique",
    "unique_consecutive",
    "bincount",
    "histc",
    "mode",
    "matrix_power",
    "index_put",
    "put",
    "scatter_reduce",
    "select_scatter",
    "slice_scatter",
    "diagonal_scatter",
    "renorm",
    "histogram",
    "nonzero_static",
    "bernoulli",
    "unsafe_split_with_sizes",
    "is_inference",
    # spectral; bit hashing
    "stft",
    "istft",
    "hash_tensor",
    # special functions
    "lgamma",
    "digamma",
    "mvlgamma",
    "erfinv",
    "i0",
    "igamma",
    "igammac",
    # integers and float representation
    "gcd",
    "lcm",
    "bitwise_left_shift",
    "bitwise_right_shift",
    "frexp",
    "nextafter",
    # random samples; index reductions
    "multinomial",
    "index_reduce",
    # linear algebra (runtime/ops/linalg_lu.py, linalg_qr.py)
    "det",
    "slogdet",
    "logdet",
    "inverse",
    "cholesky",
    "cholesky_solve",
    "cholesky_inverse",
    "triangular_solve",
    "lu",
    "lu_solve",
    "matrix_exp",
    "qr",
    "geqrf",
    "orgqr",
    "ormqr",
    "svd",
    "pinverse",
)

# ``x.name_(...)`` rebinds x to ``x.name(...)`` (DESIGN principle 5). Arithmetic ones refuse a result
# of a higher dtype category (an int tensor cannot take a float result in place), as PyTorch does.
IN_PLACE_ARITHMETIC = (
    "addmm",
    "addbmm",
    "baddbmm",
    "addmv",
    "addr",
    "square",
    "log1p",
    "expm1",
    "log2",
    "log10",
    "exp2",
    "xlogy",
    "hypot",
    "deg2rad",
    "rad2deg",
    "frac",
    "fmod",
    "remainder",
    "floor_divide",
    "clamp_min",
    "clamp_max",
    "sgn",
    "negative",
    "absolute",
    "multiply",
    "subtract",
    "divide",
    "true_divide",
    "reciprocal",
    "rsqrt",
    "sign",
    "sin",
    "cos",
    "tan",
    "asin",
    "arcsin",
    "acos",
    "arccos",
    "atan",
    "arctan",
    "sinh",
    "cosh",
    "asinh",
    "arcsinh",
    "acosh",
    "arccosh",
    "atanh",
    "arctanh",
    "erf",
    "floor",
    "ceil",
    "round",
    "trunc",
    "logit",
    "nan_to_num",
    "index_add",
    "cumsum",
    "cumprod",
    "float_power",
    "heaviside",
    "atan2",
    "arctan2",
    "copysign",
    "erfc",
    "sinc",
    "fix",
    "ldexp",
    "index_put",
    "put",
    "scatter_reduce",
    "renorm",
    "lgamma",
    "digamma",
    "mvlgamma",
    "erfinv",
    "i0",
    "polygamma",
    "nextafter",
    "index_reduce",
    "igamma",
    "igammac",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
)
# In-place ops that change the shape: the handle takes the new shape (no broadcast back).
IN_PLACE_RESHAPING = ("squeeze", "unsqueeze", "t", "transpose", "swapaxes", "swapdims")
IN_PLACE = (
    "tril",
    "triu",
    "index_copy",
    "index_fill",
    "masked_scatter",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "not_equal",
    "logical_and",
    "logical_or",
    "logical_not",
    "logical_xor",
    "bitwise_not",
    "gcd",
    "lcm",
    "bitwise_left_shift",
    "bitwise_right_shift",
)


def _delegate(name: str):
    def method(self, *args, **kwargs):
        return getattr(ops, name)(self, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"See :func:`onnxnn.{name}`."
    return method


def _in_place_reshaping(name: str):
    def method(self, *args, **kwargs):
        result = getattr(self._alias(), name)(*args, **kwargs)
        leave_group(self)  # a new shape: PyTorch's tensors sharing the storage keep theirs
        reshape_in_place(self, name, args, kwargs, result._value.shape)  # its views keep sharing it
        self._value = result._value
        hold(self._value, self)
        if result._grad_fn is not None:
            self._grad_fn, self._output_nr, self._requires_grad = result._grad_fn, result._output_nr, True
        self._bump_version()
        return self

    method.__name__ = method.__qualname__ = name + "_"
    method.__doc__ = f"In-place :meth:`Tensor.{name}`: this tensor takes the result's shape."
    return method


# Ops whose kernels take only integers (and bools): their in-place forms refuse a higher-category
# operand as a cast before the op would refuse it as a float kernel (see _check_in_place_operand).
_INTEGER_KERNELS = (
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "gcd",
    "lcm",
    "bitwise_left_shift",
    "bitwise_right_shift",
)


def _in_place(name: str, arithmetic: bool):
    integer_kernel = name in _INTEGER_KERNELS

    def method(self, *args, **kwargs):
        if integer_kernel:
            other = args[0] if args else kwargs.get("other")
            if name in ("gcd", "lcm") and not isinstance(other, _tensor.Tensor):
                raise TypeError(f"{name}_(): argument 'other' (position 1) must be Tensor, not {type(other).__name__}")
            self._check_in_place_operand(other)
        result = getattr(self._alias(), name)(*args, **kwargs)
        return self._assign_arithmetic(result) if arithmetic else self._assign(result)

    method.__name__ = method.__qualname__ = name + "_"
    method.__doc__ = f"In-place :meth:`Tensor.{name}` (rebinds this tensor to the result)."
    return method


# In-place versions of functions autocast lowers: PyTorch's autocast casts no in-place op, so
# ``c.addmm_(a, b)`` computes in its operands' dtypes inside a region too.
_IN_PLACE_OUTSIDE_AUTOCAST = ("addmm", "addbmm", "baddbmm")


class TensorAPI(_AttachedMethods):
    __slots__ = ()

    # ---------------------------------------------------------------- constructors like this tensor
    def _new_dtype(self, dtype, function: str):
        """A ``new_*`` method's dtype: this tensor's unless given, checked in that method's name."""
        return self.dtype if dtype is None else creation.dtype_argument(dtype, function)

    def new_tensor(self, data, *, dtype=None, device=None, requires_grad: bool = False):
        """A new tensor of ``data`` with this tensor's dtype and device unless given."""
        if isinstance(data, _tensor.Tensor):
            data = data.detach()
        return creation.tensor(
            data,
            dtype=self._new_dtype(dtype, "new_tensor"),
            device=device or self.device,
            requires_grad=requires_grad,
        )

    def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad: bool = False):
        return creation.full(
            tuple(size),
            fill_value,
            dtype=self._new_dtype(dtype, "new_full"),
            device=device or self.device,
            requires_grad=requires_grad,
        )

    def new_zeros(self, *size, dtype=None, device=None, requires_grad: bool = False):
        dtype = self._new_dtype(dtype, "new_zeros")
        return self.new_full(_size(size), 0, dtype=dtype, device=device, requires_grad=requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad: bool = False):
        dtype = self._new_dtype(dtype, "new_ones")
        return self.new_full(_size(size), 1, dtype=dtype, device=device, requires_grad=requires_grad)

    def new_empty(self, *size, dtype=None, device=None, requires_grad: bool = False):
        """Like PyTorch's, the contents are unspecified: onnxnn fills them with zeros."""
        dtype = self._new_dtype(dtype, "new_empty")
        return self.new_full(_size(size), 0, dtype=dtype, device=device, requires_grad=requires_grad)

    def type_as(self, other):
        """This tensor converted to ``other``'s dtype."""
        return self.to(other.dtype)

    def hardshrink(self, lambd: float = 0.5):
        """See :func:`onnxnn.nn.functional.hardshrink`."""
        return ops.hardshrink(self, lambd)  # type: ignore[arg-type]  # self is a Tensor

    def prelu(self, weight):
        """See :func:`onnxnn.nn.functional.prelu`."""
        return ops.prelu(self, weight)

    def polygamma(self, n: int):
        """``onnxnn.polygamma(n, self)``: the ``n``-th derivative of digamma (torch's argument order)."""
        return ops.polygamma(n, self)  # type: ignore[arg-type]  # self is a Tensor

    # ---------------------------------------------------------------- random fills (onnxnn's generator)
    def exponential_(self, lambd: float = 1.0, *, generator=None):
        """Fills with samples of the exponential distribution of rate ``lambd``."""
        return self._fill_random(ops.exponential_fill(self.shape, lambd, generator).astype(self.dtype.numpy_dtype))

    def geometric_(self, p: float, *, generator=None):
        """Fills with the number of Bernoulli(``p``) trials up to the first success (1, 2, ...)."""
        return self._fill_random(ops.geometric_fill(self.shape, p, generator).astype(self.dtype.numpy_dtype))

    def cauchy_(self, median: float = 0.0, sigma: float = 1.0, *, generator=None):
        """Fills with samples of the Cauchy distribution ``median + sigma tan(pi (u - 1/2))``."""
        return self._fill_random(ops.cauchy_fill(self.shape, median, sigma, generator).astype(self.dtype.numpy_dtype))

    def log_normal_(self, mean: float = 1.0, std: float = 2.0, *, generator=None):
        """Fills with ``exp(N(mean, std^2))`` samples."""
        return self._fill_random(ops.log_normal_fill(self.shape, mean, std, generator).astype(self.dtype.numpy_dtype))

    def __lshift__(self, other):
        return ops.bitwise_left_shift(self, other)

    def __rshift__(self, other):
        return ops.bitwise_right_shift(self, other)

    def __rlshift__(self, other):
        return ops.bitwise_left_shift(other, self)

    def __rrshift__(self, other):
        return ops.bitwise_right_shift(other, self)

    def __ilshift__(self, other):
        return self.bitwise_left_shift_(other)

    def __irshift__(self, other):
        return self.bitwise_right_shift_(other)

    def fill_diagonal_(self, fill_value, wrap: bool = False):
        """Writes ``fill_value`` on the main diagonal (rows past the square part too when ``wrap``)."""
        return self._assign(ops.fill_diagonal(self._alias(), fill_value, wrap))

    def as_subclass(self, cls):
        """This tensor's values as an instance of ``cls`` (a subclass of Tensor), still attached to autograd.

        As PyTorch's: a tensor that requires grad gives a non-leaf whose gradient flows back into it
        (through an Identity node, AliasBackward0); one that does not gives a new leaf.
        """
        if not (isinstance(cls, type) and issubclass(cls, _tensor.Tensor)):
            raise TypeError(
                "Creating a Tensor subclass from a class that does not inherit from Tensor is not "
                "possible. Make sure your class inherits from Tensor."
            )
        source = _tensor.apply_op("Identity", (self,), None, "AliasBackward0") if self.requires_grad else self
        return cls._from_value(source._value, source._grad_fn, source._output_nr, False)

    # ---------------------------------------------------------------- metadata
    def ndimension(self) -> int:
        return self.dim()

    def is_same_size(self, other) -> bool:
        return tuple(self.shape) == tuple(other.shape)

    def is_signed(self) -> bool:
        return self.dtype.is_floating_point or np.issubdtype(self.dtype.numpy_dtype, np.signedinteger)

    def is_complex(self) -> bool:
        return False  # onnxnn has no complex dtypes

    def is_conj(self) -> bool:
        return False

    def is_neg(self) -> bool:
        return False

    def is_nonzero(self) -> bool:
        return bool(self)  # which raises for anything but one element, as PyTorch's

    @property
    def itemsize(self) -> int:
        return self.element_size()

    @property
    def nbytes(self) -> int:
        return self.element_size() * self.numel()

    @property
    def is_cpu(self) -> bool:
        return self.device.type == "cpu"

    def get_device(self) -> int:
        return -1 if self.device.type == "cpu" else (self.device.index or 0)

    # Real dtypes only: conjugation is the identity and the adjoint is the transpose.
    def conj(self):
        return self

    resolve_conj = resolve_neg = conj_physical = conj

    @property
    def mH(self):
        return ops.matrix_transpose(self, "mH")  # type: ignore[arg-type]  # self is a Tensor

    @property
    def H(self):
        rank = self.dim()
        if rank not in (0, 2):
            raise RuntimeError(
                f"tensor.H is only supported on matrices (2-D tensors). Got {rank}-D tensor."
                + (" For batches of matrices, consider using tensor.mH" if rank > 2 else "")
            )
        return self.transpose(0, 1) if rank == 2 else self

    def adjoint(self):
        return ops.matrix_transpose(self, "adjoint()")  # type: ignore[arg-type]  # self is a Tensor

    # ---------------------------------------------------------------- shape helpers
    def split_with_sizes(self, split_sizes, dim: int = 0):
        return ops.split(self, list(split_sizes), dim)  # type: ignore[arg-type]  # self is a Tensor

    def unsafe_split(self, split_size, dim: int = 0):
        return ops.split(self, split_size, dim)  # type: ignore[arg-type]  # self is a Tensor

    def unsafe_chunk(self, chunks: int, dim: int = 0):
        return ops.chunk(self, chunks, dim)  # type: ignore[arg-type]  # self is a Tensor

    def narrow_copy(self, dim: int, start: int, length: int):
        return ops.narrow(self, dim, start, length)  # type: ignore[arg-type]  # self is a Tensor

    def sum_to_size(self, *size):
        """Sums the broadcast dims away so the result has ``size`` (which must broadcast to this shape)."""
        size = _size(size)
        shape = tuple(self.shape)
        lead = len(shape) - len(size)
        if lead < 0 or any(s != 1 and s != shape[lead + i] for i, s in enumerate(size)):
            raise RuntimeError(
                f"size {{{', '.join(map(str, size))}}} is not expandable to size {{{', '.join(map(str, shape))}}}."
            )
        dims = list(range(lead)) + [lead + i for i, s in enumerate(size) if s == 1 and shape[lead + i] != 1]
        result = self.sum(dim=dims, keepdim=True) if dims else self
        return result.reshape(size)


def _size(size: tuple) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return tuple(size[0])
    return tuple(size)


for _name in DELEGATED:
    setattr(TensorAPI, _name, _delegate(_name))
for _name in IN_PLACE_ARITHMETIC:
    setattr(TensorAPI, _name + "_", _in_place(_name, True))
for _name in _IN_PLACE_OUTSIDE_AUTOCAST:
    setattr(TensorAPI, _name + "_", outside_autocast()(_in_place(_name, True)))
for _name in IN_PLACE:
    setattr(TensorAPI, _name + "_", _in_place(_name, False))
for _name in IN_PLACE_RESHAPING:
    setattr(TensorAPI, _name + "_", _in_place_reshaping(_name))
del _name

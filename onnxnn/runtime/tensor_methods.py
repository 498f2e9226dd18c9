"""Tensor's operator and math methods, each a thin call into the op families of ``runtime/ops``.

Kept apart from ``tensor.py`` (identity, autograd, materialization) so each file holds one idea.
The op families import Tensor (which subclasses this class), so both ``ops`` and ``tensor`` are
module references here, read at call time; ``onnxnn/runtime/__init__.py`` imports the op families first.
"""

from __future__ import annotations

import numpy as np

from ..ir import dtypes as _dtypes
from ..ir import random as _random
from ..ir.memory_formats import check_memory_format
from . import ops
from . import tensor as _tensor
from .views import is_contiguous


# random_'s default for ``to``: random_(5) is random_(0, 5), while random_(5, None) draws from 5 up.
_TO_ONLY = object()
# The significand's bits with the implicit one (C++'s numeric_limits<T>::digits): random_() of a float
# dtype draws from [0, 2**digits].
_SIGNIFICAND_DIGITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}


class TensorMethods:
    __slots__ = ()

    # ---------------------------------------------------------------- arithmetic operators
    def __add__(self, other):
        return ops.add(self, other)

    def __radd__(self, other):
        return ops.add(other, self)

    def __sub__(self, other):
        return ops.sub(self, other)

    def __rsub__(self, other):
        return ops.sub(other, self)

    def __mul__(self, other):
        return ops.mul(self, other)

    def __rmul__(self, other):
        return ops.mul(other, self)

    def __truediv__(self, other):
        return ops.div(self, other)

    def __rtruediv__(self, other):
        return ops.div(other, self)

    def __floordiv__(self, other):
        return ops.floor_divide(self, other)

    def __rfloordiv__(self, other):
        return ops.floor_divide(other, self)

    def __mod__(self, other):
        return ops.remainder(self, other)

    def __rmod__(self, other):
        return ops.remainder(other, self)

    def __pow__(self, exponent):
        return ops.pow(self, exponent)

    def __rpow__(self, base):
        return ops.pow(base, self)

    def __matmul__(self, other):
        return ops.matmul(self, other)

    def __rmatmul__(self, other):
        return ops.matmul(other, self)

    def __neg__(self):
        return ops.neg(self)

    def __pos__(self):
        if self._value.dtype is _dtypes.bool:
            raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
        return self

    def __abs__(self):
        return ops.abs(self)

    # Bitwise, as PyTorch's operators: logical on bool tensors, bit by bit on integers, refused on floats.
    def __invert__(self):
        if self.is_floating_point():
            raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors")
        return ops.bitwise_not(self)

    def __and__(self, other):
        return ops.bitwise_and(self, other)

    __rand__ = __and__

    def __or__(self, other):
        return ops.bitwise_or(self, other)

    __ror__ = __or__

    def __xor__(self, other):
        return ops.bitwise_xor(self, other)

    __rxor__ = __xor__

    # With the in-place dtype check: bool &= int is refused (its result is int64), as in PyTorch.
    def __iand__(self, other):
        return self.bitwise_and_(other)

    def __ior__(self, other):
        return self.bitwise_or_(other)

    def __ixor__(self, other):
        return self.bitwise_xor_(other)

    # In-place operators rebind the handle (DESIGN principle 5).
    def __iadd__(self, other):
        return self.add_(other)

    def __isub__(self, other):
        return self.sub_(other)

    def __imul__(self, other):
        return self.mul_(other)

    def __itruediv__(self, other):
        return self.div_(other)

    # Without these Python would rebind the name to a new tensor: views and aliases would keep the old value.
    def __ifloordiv__(self, other):
        return self._assign_arithmetic(ops.floor_divide(self._alias(), other))

    def __imod__(self, other):
        return self._assign_arithmetic(ops.remainder(self._alias(), other))

    def __ipow__(self, exponent):
        return self.pow_(exponent)

    # ---------------------------------------------------------------- comparisons
    # ``tensor == None`` is False and ``!= None`` True, as PyTorch's: Python compares identities.
    def __eq__(self, other):
        return NotImplemented if other is None else ops.eq(self, other)

    def __ne__(self, other):
        return NotImplemented if other is None else ops.ne(self, other)

    def __lt__(self, other):
        return ops.lt(self, other)

    def __le__(self, other):
        return ops.le(self, other)

    def __gt__(self, other):
        return ops.gt(self, other)

    def __ge__(self, other):
        return ops.ge(self, other)

    def eq(self, other):
        return ops.eq(self, other)

    def ne(self, other):
        return ops.ne(self, other)

    def lt(self, other):
        return ops.lt(self, other)

    def le(self, other):
        return ops.le(self, other)

    def gt(self, other):
        return ops.gt(self, other)

    def ge(self, other):
        return ops.ge(self, other)

    def equal(self, other) -> bool:
        return ops.equal(self, other)  # type: ignore[arg-type]  # self is a Tensor (its only subclass)

    def allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
        return ops.allclose(self, other, rtol, atol, equal_nan)  # type: ignore[arg-type]  # self is a Tensor

    def isclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        return ops.isclose(self, other, rtol, atol, equal_nan)  # type: ignore[arg-type]  # self is a Tensor

    def logical_and(self, other):
        return ops.logical_and(self, other)

    def logical_or(self, other):
        return ops.logical_or(self, other)

    def logical_not(self):
        return ops.logical_not(self)

    def isnan(self):
        return ops.isnan(self)

    def isinf(self):
        return ops.isinf(self)

    def isfinite(self):
        return ops.isfinite(self)

    # ---------------------------------------------------------------- math methods
    def add(self, other, *, alpha=1):
        return ops.add(self, other, alpha=alpha)

    def sub(self, other, *, alpha=1):
        return ops.sub(self, other, alpha=alpha)

    def mul(self, other):
        return ops.mul(self, other)

    def div(self, other, *, rounding_mode=None):
        return ops.div(self, other, rounding_mode=rounding_mode)

    def pow(self, exponent):
        return ops.pow(self, exponent)

    def matmul(self, other):
        return ops.matmul(self, other)

    def mm(self, other):
        return ops.mm(self, other)

    def bmm(self, other):
        return ops.bmm(self, other)

    def dot(self, other):
        return ops.dot(self, other)

    def neg(self):
        return ops.neg(self)

    def abs(self):
        return ops.abs(self)

    def exp(self):
        return ops.exp(self)

    def log(self):
        return ops.log(self)

    def sqrt(self):
        return ops.sqrt(self)

    def rsqrt(self):
        return ops.rsqrt(self)

    def reciprocal(self):
        return ops.reciprocal(self)

    def sin(self):
        return ops.sin(self)

    def cos(self):
        return ops.cos(self)

    def erf(self):
        return ops.erf(self)

    def sign(self):
        return ops.sign(self)

    def floor(self):
        return ops.floor(self)

    def ceil(self):
        return ops.ceil(self)

    def round(self, *, decimals=0):
        return ops.round(self, decimals=decimals)

    def trunc(self):
        return ops.trunc(self)

    def relu(self):
        return ops.relu(self)

    def sigmoid(self):
        return ops.sigmoid(self)

    def tanh(self):
        return ops.tanh(self)

    def softmax(self, dim, dtype=None):
        return ops.softmax(self, dim, dtype)

    def log_softmax(self, dim, dtype=None):
        return ops.log_softmax(self, dim, dtype)

    def clamp(self, min=None, max=None):
        return ops.clamp(self, min, max)

    clip = clamp

    def maximum(self, other):
        return ops.maximum(self, other)

    def minimum(self, other):
        return ops.minimum(self, other)

    def where(self, condition, other):
        return ops.where(condition, self, other)

    def masked_fill(self, mask, value):
        return ops.masked_fill(self, mask, value)  # (the value takes this tensor's dtype, as in PyTorch)

    def lerp(self, end, weight):
        return self + (end - self) * weight

    # ---------------------------------------------------------------- reductions
    def sum(self, dim=None, keepdim=False, *, dtype=None):
        return ops.sum(self, dim, keepdim, dtype=dtype)

    def mean(self, dim=None, keepdim=False, *, dtype=None):
        return ops.mean(self, dim, keepdim, dtype=dtype)

    def prod(self, dim=None, keepdim=False, *, dtype=None):
        return ops.prod(self, dim, keepdim, dtype=dtype)

    def max(self, dim=None, keepdim=False):
        return ops.max(self, dim, keepdim)

    def min(self, dim=None, keepdim=False):
        return ops.min(self, dim, keepdim)

    def amax(self, dim=(), keepdim=False):
        return ops.amax(self, dim, keepdim)

    def amin(self, dim=(), keepdim=False):
        return ops.amin(self, dim, keepdim)

    def argmax(self, dim=None, keepdim=False):
        return ops.argmax(self, dim, keepdim)

    def argmin(self, dim=None, keepdim=False):
        return ops.argmin(self, dim, keepdim)

    def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        return ops.var(self, dim, unbiased, keepdim, correction=correction)

    def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        return ops.std(self, dim, unbiased, keepdim, correction=correction)

    def logsumexp(self, dim, keepdim=False):
        return ops.logsumexp(self, dim, keepdim)

    def all(self, dim=None, keepdim=False):
        return ops.all(self, dim, keepdim)

    def any(self, dim=None, keepdim=False):
        return ops.any(self, dim, keepdim)

    def norm(self, p=2, dim=None, keepdim=False, dtype=None):
        return ops.norm(self, p, dim, keepdim, dtype=dtype)

    # ---------------------------------------------------------------- shape
    def reshape(self, *shape, **named):
        if named:
            shape = _varargs_or_keyword(shape, named, "shape", "reshape")
        return ops.reshape(self, *shape)

    def view(self, *shape, **named):
        if named:
            if named.keys() == {"dtype"} and not shape:
                return ops.view_dtype(self, named["dtype"])
            shape = _varargs_or_keyword(shape, named, "size", "view")
        if len(shape) == 1 and not isinstance(shape[0], (int, tuple, list)):
            return ops.view_dtype(self, shape[0])
        return ops.reshape(self, *shape)

    def view_as(self, other):
        return ops.reshape(self, other.shape)

    def reshape_as(self, other):
        return ops.reshape(self, other.shape)

    def flatten(self, start_dim=0, end_dim=-1):
        return ops.flatten(self, start_dim, end_dim)

    def unflatten(self, dim, sizes):
        dim = self._normalize_dim(dim)
        return ops.reshape(self, self.shape[:dim] + tuple(sizes) + self.shape[dim + 1 :])

    def permute(self, *dims, **named):
        if named:
            dims = _varargs_or_keyword(dims, named, "dims", "permute")
        return ops.permute(self, *dims)

    def transpose(self, dim0, dim1):
        return ops.transpose(self, dim0, dim1)

    def t(self):
        return ops.t(self)

    @property
    def T(self):
        return ops.permute(self, list(reversed(range(self.dim()))))

    @property
    def mT(self):
        return ops.matrix_transpose(self, "mT")  # type: ignore[arg-type]  # self is a Tensor

    def squeeze(self, dim=None):
        return ops.squeeze(self, dim)

    def unsqueeze(self, dim):
        return ops.unsqueeze(self, dim)

    def expand(self, *sizes, **named):
        if named:
            sizes = _varargs_or_keyword(sizes, named, "size", "expand")
        return ops.expand(self, *sizes)

    def expand_as(self, other):
        return ops.expand_as(self, other)

    def broadcast_to(self, shape):
        return ops.broadcast_to(self, shape)

    def repeat(self, *sizes, **named):
        if named:
            sizes = _varargs_or_keyword(sizes, named, "repeats", "repeat")
        return ops.repeat(self, *sizes)

    def tile(self, *dims, **named):
        return ops.tile(self, _dims_argument(dims, named, "tile"))

    def flip(self, *dims, **named):
        return ops.flip(self, _dims_argument(dims, named, "flip"))

    def split(self, split_size=None, dim=0, *, split_size_or_sections=None):
        # ``split_size_or_sections`` is torch.split's name, which onnxnn.split forwards here.
        if split_size is None:
            if split_size_or_sections is None:
                raise TypeError("split() missing 1 required positional argument: 'split_size'")
            split_size = split_size_or_sections
        return ops.split(self, split_size, dim)

    def chunk(self, chunks, dim=0):
        return ops.chunk(self, chunks, dim)

    def unbind(self, dim=0):
        return ops.unbind(self, dim)

    def narrow(self, dim, start, length):
        return ops.narrow(self, dim, start, length)

    def contiguous(self, memory_format=None):
        """This tensor if its elements are row-major consecutive in its storage, else a copy, as
        PyTorch's: ``x.t().contiguous()`` is a new tensor, which an in-place write changes alone.
        (Every format is one layout here.)"""
        check_memory_format(len(self._value.shape), memory_format)
        return self if is_contiguous(self) else ops.clone(self)

    def clone(self, *, memory_format=None):
        """A copy with the same value; gradients flow back to this tensor."""
        check_memory_format(len(self._value.shape), memory_format)
        return ops.clone(self)

    def __getitem__(self, key):
        return ops.getitem(self, key)

    def __setitem__(self, key, value) -> None:
        ops.setitem(self, key, value)  # type: ignore[arg-type]  # self is a Tensor

    def index_select(self, dim, index):
        return ops.index_select(self, dim, index)

    def gather(self, dim, index):
        return ops.gather(self, dim, index)

    def masked_select(self, mask):
        return ops.masked_select(self, mask)

    def nonzero(self, *, as_tuple=False):
        return ops.nonzero(self, as_tuple=as_tuple)

    def argwhere(self):
        return ops.argwhere(self)

    def take(self, index):
        return ops.take(self, index)

    def take_along_dim(self, indices, dim=None):
        return ops.take_along_dim(self, indices, dim)

    def scatter(self, dim, index, src=None, *, value=None, reduce=None):
        return ops.scatter(self, dim, index, src, value=value, reduce=reduce)

    def scatter_add(self, dim, index, src):
        return ops.scatter_add(self, dim, index, src)

    def scatter_(self, dim, index, src=None, *, value=None, reduce=None):
        return self._assign(ops.scatter(self._alias(), dim, index, src, value=value, reduce=reduce))

    def scatter_add_(self, dim, index, src):
        return self._assign(ops.scatter_add(self._alias(), dim, index, src))

    # ---------------------------------------------------------------- in place (rebinding)
    def add_(self, other, *, alpha=1):
        return self._assign_arithmetic(ops.add(self._alias(), other, alpha=alpha))

    def sub_(self, other, *, alpha=1):
        return self._assign_arithmetic(ops.sub(self._alias(), other, alpha=alpha))

    def mul_(self, other):
        return self._assign_arithmetic(ops.mul(self._alias(), other))

    def div_(self, other, *, rounding_mode=None):
        return self._assign_arithmetic(ops.div(self._alias(), other, rounding_mode=rounding_mode))

    def pow_(self, exponent):
        return self._assign_arithmetic(ops.pow(self._alias(), exponent))

    def neg_(self):
        return self._assign(ops.neg(self._alias()))

    def abs_(self):
        return self._assign_arithmetic(ops.abs(self._alias()))

    def exp_(self):
        return self._assign_arithmetic(ops.exp(self._alias()))

    def log_(self):
        return self._assign_arithmetic(ops.log(self._alias()))

    def sqrt_(self):
        return self._assign_arithmetic(ops.sqrt(self._alias()))

    def relu_(self):
        return self._assign_arithmetic(ops.relu(self._alias()))

    def sigmoid_(self):
        return self._assign_arithmetic(ops.sigmoid(self._alias()))

    def tanh_(self):
        return self._assign_arithmetic(ops.tanh(self._alias()))

    def clamp_(self, min=None, max=None):
        return self._assign_arithmetic(ops.clamp(self._alias(), min, max))

    clip_ = clamp_

    def masked_fill_(self, mask, value):
        return self._assign(ops.masked_fill(self._alias(), mask, value))

    def lerp_(self, end, weight):
        return self._assign(ops.lerp(self._alias(), end, weight))

    def addcmul_(self, tensor1, tensor2, *, value=1):
        return self._assign_arithmetic(ops.addcmul(self._alias(), tensor1, tensor2, value=value))

    def addcdiv_(self, tensor1, tensor2, *, value=1):
        return self._assign_arithmetic(ops.addcdiv(self._alias(), tensor1, tensor2, value=value))

    def normal_(self, mean=0.0, std=1.0, *, generator=None):
        """Fills with samples of N(mean, std^2) from onnxnn's generator."""
        _random.check_standard_deviation(std)
        return self._fill_random(_random.normal(self.shape, self.dtype.numpy_dtype, mean, std, generator))

    def uniform_(self, a=0.0, b=1.0, *, generator=None):
        """Fills with samples of U(a, b) from onnxnn's generator."""
        return self._fill_random(_random.uniform(self.shape, self.dtype.numpy_dtype, a, b, generator))

    def bernoulli_(self, p=0.5, *, generator=None):
        return self._fill_random(ops.bernoulli_fill(self.shape, p, generator).astype(self.dtype.numpy_dtype))

    def random_(self, low=None, high=_TO_ONLY, *, generator=None):
        """Fills with integers drawn uniformly from ``[low, high)``: ``random_(to)`` from ``[0, to)``;
        without ``to`` (``random_()``, ``random_(low, None)``) up to the largest integer of the dtype,
        included (for floats ``2**digits``, up to which every integer is exact), as PyTorch's."""
        if high is _TO_ONLY:
            low, high = 0, low  # random_(to), or random_(): high None
        if high is None:
            name = self.dtype.name
            if name in ("uint16", "uint32", "uint64"):
                raise NotImplementedError(
                    f"\"random_kernel_cpu\" not implemented for '{_dtypes.scalar_type_name(self.dtype)}'"
                )
            if self.dtype.is_floating_point:
                high = 2 ** _SIGNIFICAND_DIGITS[name] + 1
            else:
                high = 2 if name == "bool" else int(np.iinfo(self.dtype.numpy_dtype).max) + 1
        return self._fill_random(_random.integers(low, high, self.shape, self.dtype.numpy_dtype, generator))

    def _fill_random(self, array):
        return self._assign(_tensor.Tensor._from_array(array, self.dtype, self.device))


def _varargs_or_keyword(positional: tuple, named: dict, keyword: str, method: str) -> tuple:
    """The arguments of a method PyTorch takes as varargs or as one keyword (``x.view(size=(2, 3))``,
    ``x.permute(dims=(1, 0))``); called only when keywords were given (these methods are on the hot path)."""
    if positional or named.keys() != {keyword}:
        unexpected = sorted(set(named) - {keyword}) or [keyword]
        raise TypeError(f"{method}() got an unexpected keyword argument '{unexpected[0]}'")
    return (named[keyword],)


def _dims_argument(positional: tuple, named: dict, method: str):
    """flip's and tile's dims, given as PyTorch's methods take them: ``(0, 1)``, ``0, 1`` or ``dims=``."""
    if named:
        return _varargs_or_keyword(positional, named, "dims", method)[0]
    if not positional:
        raise TypeError(f'{method}() missing 1 required positional arguments: "dims"')
    if len(positional) == 1 and isinstance(positional[0], (tuple, list)):
        return positional[0]
    return positional

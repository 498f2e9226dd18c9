"""Parametrizations: a parameter or buffer computed by modules from stored tensors (PyTorch's
``torch.nn.utils.parametrize``).

``register_parametrization(module, "weight", P)`` moves ``module.weight`` into
``module.parametrizations.weight.original`` and makes ``weight`` a property of a subclass made for
this one module (``ParametrizedLinear``), whose getter returns ``P(original)``. Every read records
``P``'s ops, so the parametrized tensor is part of the recorded graph: gradients flow to
``original`` and ``export.to_onnx`` writes ``P``'s ops with ``original`` as the initializer. The
``state_dict`` keys are PyTorch's (``parametrizations.weight.original``).

Assigning ``module.weight = X`` stores ``P.right_inverse(X)`` in ``original``. Writes keep the
identity of ``original`` (the tensor is rebound to the new value, PyTorch's ``set_``), so an
optimizer built on it keeps working.
"""

from __future__ import annotations

import collections.abc
import contextlib
import copy
from collections.abc import Iterable, Iterator, Sequence

from ...runtime.grad_mode import no_grad
from ...runtime.internal import rebind, requires_grad_flag, restore_state, save_state, value_of
from ...runtime.tensor import Tensor
from ..modules.container import ModuleDict, ModuleList
from ..modules.module import Module
from ..parameter import Parameter

__all__ = [
    "cached",
    "ParametrizationList",
    "register_parametrization",
    "is_parametrized",
    "remove_parametrizations",
    "type_before_parametrizations",
    "transfer_parametrizations_and_params",
]

# Nesting depth of ``cached()`` blocks, and the values computed inside them, by (id(module), name).
_cache_depth = 0
_cache: dict[tuple[int, str], Tensor] = {}


@contextlib.contextmanager
def cached() -> Iterator[None]:
    """Computes each parametrized tensor at most once inside the block.

    Without it, every read of ``module.weight`` records the parametrization's ops again; inside
    it the first read's tensor is kept and returned by later reads (an RNN reading its
    parametrized recurrent weight at every time step records it once). The cache is emptied when
    the outermost block exits. Blocks may nest.

    Example::

        >>> with parametrize.cached():
        ...     output = rnn(inputs)
    """
    global _cache_depth, _cache
    _cache_depth += 1
    try:
        yield
    finally:
        _cache_depth -= 1
        if not _cache_depth:
            _cache = {}


def _register_parameter_or_buffer(module: Module, name: str, tensor: Tensor) -> None:
    if isinstance(tensor, Parameter):
        module.register_parameter(name, tensor)
    else:
        module.register_buffer(name, tensor)


def _set_keeping_identity(destination: Tensor, source: Tensor) -> None:
    """PyTorch's ``destination.set_(source)``: ``destination`` (the same object, so optimizers that
    hold it keep working) now holds ``source``'s value, whatever its shape."""
    rebind(destination, value_of(source))


def _apply_right_inverse(modules: Iterable[Module], value, *, missing_is_identity: bool):
    """``right_inverse`` of the chain, last parametrization first."""
    for parametrization in reversed(list(modules)):
        inverse = getattr(parametrization, "right_inverse", None)
        if inverse is None:
            if missing_is_identity:
                continue
            raise RuntimeError(f"parametrization {type(parametrization).__name__} does not implement right_inverse.")
        try:
            value = inverse(value)
        except NotImplementedError:
            if not missing_is_identity:
                raise
    return value


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor of a module, with the tensor(s) they are computed from.

    Made by :func:`register_parametrization` and stored in ``module.parametrizations[tensor_name]``;
    not meant to be built by hand. It holds the unparametrized tensor as ``original``, or as
    ``original0``, ``original1``, ... when the first parametrization's ``right_inverse`` returns
    a sequence of tensors. Calling it evaluates the chain: ``self[-1](...self[1](self[0](original)))``.

    Args:
        modules: the parametrizations, applied first to last.
        original: the parameter or buffer being parametrized.
        unsafe: skip the checks that the parametrization keeps the tensor's shape and dtype.
    """

    original: Tensor
    unsafe: bool
    is_tensor: bool
    ntensors: int

    def __init__(self, modules: Sequence[Module], original: Tensor, unsafe: bool = False) -> None:
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        original_shape, original_dtype = original.shape, original.dtype

        with no_grad():
            new = _apply_right_inverse(self, original, missing_is_identity=True)
        if not isinstance(new, (Tensor, collections.abc.Sequence)):
            raise ValueError(
                "'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                f"Got {type(new).__name__}"
            )
        self.is_tensor = isinstance(new, Tensor)
        saved = save_state(original)
        self.ntensors = 1 if isinstance(new, Tensor) else len(new)

        if isinstance(new, Tensor):
            if new.dtype != original.dtype:
                raise ValueError(
                    "When `right_inverse` outputs one tensor, it may not change the dtype.\n"
                    f"original.dtype: {original.dtype}\nright_inverse(original).dtype: {new.dtype}"
                )
            if new.device != original.device:
                raise ValueError(
                    "When `right_inverse` outputs one tensor, it may not change the device.\n"
                    f"original.device: {original.device}\nright_inverse(original).device: {new.device}"
                )
            # The original object itself is kept (now holding right_inverse's value), so an optimizer
            # built on it before the registration still updates the right tensor.
            _set_keeping_identity(original, new)
            _register_parameter_or_buffer(self, "original", original)
        else:
            requires_grad = requires_grad_flag(original)
            for index, tensor in enumerate(new):
                if not isinstance(tensor, Tensor):
                    raise ValueError(
                        "'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                        f"Got element {index} of the sequence with type {type(tensor).__name__}."
                    )
                if isinstance(original, Parameter):
                    tensor = Parameter(tensor, requires_grad)
                else:
                    tensor = tensor.detach().requires_grad_(requires_grad)
                _register_parameter_or_buffer(self, f"original{index}", tensor)

        if not self.unsafe:
            try:
                self._check_consistency(original_shape, original_dtype)
            except BaseException:
                # The module keeps the value it had before the call.
                restore_state(original, saved, rewind_version=True)
                raise

    def _check_consistency(self, original_shape, original_dtype) -> None:
        """forward(right_inverse(original)) must live where the original did: same dtype and shape."""
        result = self()
        if not isinstance(result, Tensor):
            raise ValueError(f"A parametrization must return a tensor. Got {type(result).__name__}.")
        if result.dtype != original_dtype:
            raise ValueError(
                "Registering a parametrization may not change the dtype of the tensor, unless `unsafe` "
                f"flag is enabled.\nunparametrized dtype: {original_dtype}\nparametrized dtype: {result.dtype}"
            )
        if result.shape != original_shape:
            raise ValueError(
                "Registering a parametrization may not change the shape of the tensor, unless `unsafe` "
                f"flag is enabled.\nunparametrized shape: {original_shape}\nparametrized shape: {result.shape}"
            )

    def right_inverse(self, value: Tensor) -> None:
        """Stores ``value`` as the parametrized tensor: the originals become the chain's
        ``right_inverse`` of it (called by ``module.tensor_name = value``).

        Raises:
            RuntimeError: a parametrization in the chain has no ``right_inverse``.
            ValueError: ``right_inverse`` returned something of another kind, length or dtype than
                at registration.
        """
        with no_grad():
            value = _apply_right_inverse(self, value, missing_is_identity=False)
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError(f"`right_inverse` should return a tensor. Got {type(value).__name__}")
                if value.dtype != self.original.dtype:
                    raise ValueError(
                        f"The tensor returned by `right_inverse` has dtype {value.dtype} "
                        f"while `original` has dtype {self.original.dtype}"
                    )
                _set_keeping_identity(self.original, value)
                return
            if not isinstance(value, collections.abc.Sequence):
                raise ValueError(f"'right_inverse' must return a sequence of tensors. Got {type(value).__name__}.")
            if len(value) != self.ntensors:
                raise ValueError(
                    f"'right_inverse' must return a sequence of tensors of length {self.ntensors}. "
                    f"Got a sequence of length {len(value)}."
                )
            originals = [getattr(self, f"original{index}") for index in range(self.ntensors)]
            # Every element is checked before any is written, so a bad one leaves the module as it was.
            for index, (tensor, original) in enumerate(zip(value, originals)):
                if not isinstance(tensor, Tensor):
                    raise ValueError(
                        "'right_inverse' must return a sequence of tensors. "
                        f"Got element {index} of type {type(tensor).__name__}."
                    )
                if tensor.dtype != original.dtype:
                    raise ValueError(
                        f"Tensor {index} returned by `right_inverse` has dtype {tensor.dtype} "
                        f"while `original{index}` has dtype {original.dtype}"
                    )
            for tensor, original in zip(value, originals):
                _set_keeping_identity(original, tensor)

    def forward(self) -> Tensor:
        if self.is_tensor:
            result = self[0](self.original)
        else:
            result = self[0](*(getattr(self, f"original{index}") for index in range(self.ntensors)))
        for parametrization in list(self)[1:]:
            result = parametrization(result)
        return result


def _deepcopy_module(self: Module, memo: dict) -> Module:
    """``copy.deepcopy`` for a parametrized module, whose ``__getstate__`` refuses pickling."""
    existing = memo.get(id(self))
    if existing is not None:
        return existing
    replica = type(self).__new__(type(self))
    memo[id(self)] = replica
    replica.__dict__.update(copy.deepcopy(self.__dict__, memo))
    return replica


def _refuse_pickling(self: Module) -> dict:
    raise RuntimeError(
        "Serialization of parametrized modules is only supported through state_dict(). Save "
        "module.state_dict() and load it into a module parametrized the same way."
    )


def _inject_new_class(module: Module) -> None:
    """Gives ``module`` a class of its own (``Parametrized<Name>``, a subclass of its class), on
    which the parametrized tensors' properties are defined without touching other instances."""
    cls = module.__class__
    namespace: dict = {"__getstate__": _refuse_pickling}
    if not hasattr(cls, "__deepcopy__"):
        namespace["__deepcopy__"] = _deepcopy_module
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), namespace)


def _inject_property(module: Module, tensor_name: str) -> None:
    """Defines ``tensor_name`` on the module's own class: reading computes the parametrization
    (once per ``cached()`` block), assigning calls its ``right_inverse``."""
    if hasattr(module, tensor_name):
        raise AssertionError(f"Module already has an attribute named '{tensor_name}'")

    def get_parametrized(self: Module) -> Tensor:
        parametrization = self.parametrizations[tensor_name]
        if not _cache_depth:
            return parametrization()
        key = (id(self), tensor_name)
        tensor = _cache.get(key)
        if tensor is None:
            tensor = _cache[key] = parametrization()
        return tensor

    def set_original(self: Module, value: Tensor) -> None:
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


def _check_appended_parametrization(module: Module, tensor_name: str, parametrization: Module) -> None:
    """A parametrization added on top of others must map the tensor's shape and dtype to
    themselves, and so must its ``right_inverse`` when it has one."""
    current = getattr(module, tensor_name)
    result = parametrization(current)
    if not isinstance(result, Tensor):
        raise ValueError(f"A parametrization must return a tensor. Got {type(result).__name__}.")
    if result.dtype != current.dtype:
        raise ValueError(
            "Registering a parametrization may not change the dtype of the tensor, unless the `unsafe` flag "
            f"is enabled.\nmodule.{tensor_name}.dtype: {current.dtype}\n"
            f"parametrization(module.{tensor_name}).dtype: {result.dtype}"
        )
    if result.shape != current.shape:
        raise ValueError(
            "Registering a parametrization may not change the shape of the tensor, unless the `unsafe` flag "
            f"is enabled.\nmodule.{tensor_name}.shape: {current.shape}\n"
            f"parametrization(module.{tensor_name}).shape: {result.shape}"
        )
    inverse = getattr(parametrization, "right_inverse", None)
    if inverse is None:
        return
    try:
        back = inverse(result)
    except NotImplementedError:
        return
    if not isinstance(back, Tensor):
        raise ValueError(f"parametrization.right_inverse must return a tensor. Got: {type(back).__name__}")
    if back.dtype != current.dtype:
        raise ValueError(
            "The tensor returned by parametrization.right_inverse must have the same dtype as "
            f"module.{tensor_name}, unless the `unsafe` flag is enabled.\n"
            f"module.{tensor_name}.dtype: {current.dtype}\nreturned dtype: {back.dtype}"
        )
    if back.shape != current.shape:
        raise ValueError(
            "The tensor returned by parametrization.right_inverse must have the same shape as "
            f"module.{tensor_name}, unless the `unsafe` flag is enabled.\n"
            f"module.{tensor_name}.shape: {current.shape}\nreturned shape: {back.shape}"
        )


def register_parametrization(
    module: Module, tensor_name: str, parametrization: Module, *, unsafe: bool = False
) -> Module:
    """Replaces ``module.<tensor_name>`` by ``parametrization`` applied to a stored tensor.

    The parameter or buffer moves to ``module.parametrizations[tensor_name].original``; reading
    ``module.<tensor_name>`` then returns ``parametrization(original)``, computed from recorded
    ops so that gradients reach ``original``. If ``parametrization`` has a ``right_inverse``,
    ``original`` is initialized to ``right_inverse(tensor)`` (which may return a sequence of
    tensors: they are stored as ``original0``, ``original1``, ... and passed to ``forward`` in
    that order), and ``module.<tensor_name> = X`` stores ``right_inverse(X)``. Registering on an
    already parametrized tensor appends to its chain.

    Args:
        module: the module holding the tensor.
        tensor_name: the name of a parameter, a buffer, or an already parametrized tensor.
        parametrization: a module whose ``forward`` computes the tensor.
        unsafe: skip the checks that the parametrization keeps the tensor's shape and dtype.

    Returns:
        ``module``, now of a class ``Parametrized<ClassName>``.

    Raises:
        ValueError: ``module`` has no parameter, buffer or parametrized tensor ``tensor_name``,
            or (unless ``unsafe``) the parametrization changes the tensor's shape or dtype.

    Example::

        >>> class Symmetric(nn.Module):
        ...     def forward(self, X):
        ...         return X.triu() + X.triu(1).mT
        >>> layer = nn.Linear(3, 3)
        >>> parametrize.register_parametrization(layer, "weight", Symmetric())
        >>> onnxnn.equal(layer.weight, layer.weight.T)
        True
    """
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            _check_appended_parametrization(module, tensor_name, parametrization)
        parametrizations = module.parametrizations[tensor_name]
        parametrizations.append(parametrization)
        # Once a chain is unsafe it stays so.
        parametrizations.unsafe = parametrizations.unsafe or unsafe
        return module
    if tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        # Built first: its checks raise before the module is changed.
        parametrizations = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = parametrizations
        return module
    raise ValueError(
        f"Module '{module}' does not have a parameter, a buffer, or a parametrized element with name '{tensor_name}'"
    )


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether ``module`` has a parametrized tensor (named ``tensor_name``, or any if None).

    Example::

        >>> parametrize.is_parametrized(orthogonal(nn.Linear(3, 3)), "weight")
        True
    """
    parametrizations = getattr(module, "parametrizations", None)
    if not isinstance(parametrizations, ModuleDict):
        return False
    if tensor_name is None:
        return len(parametrizations) > 0
    return tensor_name in parametrizations


def remove_parametrizations(module: Module, tensor_name: str, leave_parametrized: bool = True) -> Module:
    """Removes the parametrizations of ``module.<tensor_name>``, making it a plain parameter or buffer again.

    Args:
        module: the parametrized module.
        tensor_name: the parametrized tensor.
        leave_parametrized: keep the tensor's current parametrized value (True) or put back the
            stored ``original`` (False). When ``original`` is a single tensor, it is the object
            that stays registered either way, so optimizers holding it keep working.

    Returns:
        ``module``, back to its original class once no tensor of it is parametrized.

    Raises:
        ValueError: ``tensor_name`` is not parametrized, or ``leave_parametrized=False`` for a
            tensor parametrized by several originals.

    Example::

        >>> parametrize.remove_parametrizations(layer, "weight")
        >>> type(layer).__name__
        'Linear'
    """
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    parametrizations = module.parametrizations[tensor_name]
    if parametrizations.is_tensor:
        original = parametrizations.original
        if leave_parametrized:
            with no_grad():
                value = getattr(module, tensor_name)
            _set_keeping_identity(original, value)
    else:
        if not leave_parametrized:
            raise ValueError(
                "Cannot leave unparametrized (`leave_parametrized=False`) a tensor "
                "that is parametrized in terms of a sequence of tensors."
            )
        # Gradients are on here: whether the value requires grad says whether any original did.
        value = getattr(module, tensor_name)
        original = Parameter(value.detach()) if value.requires_grad else value.detach()

    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module: Module) -> type:
    """The module's class before any parametrization was registered (``Linear`` for ``ParametrizedLinear``)."""
    if is_parametrized(module):
        return module.__class__.__bases__[0]
    return type(module)


def transfer_parametrizations_and_params(
    from_module: Module, to_module: Module, tensor_name: str | None = None
) -> Module:
    """Registers ``from_module``'s parametrizations (of ``tensor_name``, or all) on ``to_module``
    and makes ``to_module``'s originals the same tensors as ``from_module``'s.

    A tensor ``to_module`` lacks is first created as a parameter holding ``from_module``'s
    parametrized value. The parametrization modules themselves are shared, not copied.

    Returns:
        ``to_module``.

    Example::

        >>> quantized_linear = parametrize.transfer_parametrizations_and_params(linear, quantized_linear)
    """
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        source = from_module.parametrizations[name]
        if not hasattr(to_module, name):
            with no_grad():
                setattr(to_module, name, Parameter(getattr(from_module, name).detach()))
        for parametrization in source:
            register_parametrization(to_module, name, parametrization)
        target = to_module.parametrizations[name]
        # The originals are re-registered, not copied: both modules then train the same tensors.
        if source.is_tensor:
            _register_parameter_or_buffer(target, "original", source.original)
        else:
            for index in range(source.ntensors):
                _register_parameter_or_buffer(target, f"original{index}", getattr(source, f"original{index}"))
    return to_module

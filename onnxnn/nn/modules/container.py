"""Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict (as in PyTorch)."""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections import abc as container_abcs
from itertools import chain, islice
from typing import Any, Callable, Iterable, Iterator, Mapping, overload

from ...runtime.tensor import Tensor
from ...runtime.type_queries import typename
from ..parameter import Parameter
from ._tables import TABLE_NAMES
from .module import Module, _addindent

__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]


def _abs_index(idx, length: int) -> int:
    idx = operator.index(idx)
    if not -length <= idx < length:
        raise IndexError(f"index {idx} is out of range")
    return idx % length if length else idx


class Sequential(Module):
    """A chain of modules: each one's output is the next one's input.

    Modules are added in the order they are passed, or from an ``OrderedDict`` with names.

    Example::

        >>> model = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
        >>> model = nn.Sequential(OrderedDict([("fc", nn.Linear(4, 3)), ("act", nn.ReLU())]))
    """

    _modules: OrderedDict[str, Module]  # type: ignore[assignment]  # a container holds modules, never None

    @overload
    def __init__(self, *args: Module) -> None: ...

    @overload
    def __init__(self, arg: OrderedDict[str, Module], /) -> None: ...

    def __init__(self, *args: Any) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for index, module in enumerate(args):
                self.add_module(str(index), module)

    def _get_item_by_idx(self, iterator: Iterable, idx) -> Any:
        return next(islice(iterator, _abs_index(idx, len(self)), None))

    def __getitem__(self, idx) -> "Sequential | Module":
        if isinstance(idx, slice):
            return self.__class__(OrderedDict(list(self._modules.items())[idx]))
        return self._get_item_by_idx(self._modules.values(), idx)

    def __setitem__(self, idx: int, module: Module) -> None:
        key = self._get_item_by_idx(self._modules.keys(), idx)
        setattr(self, key, module)

    def __delitem__(self, idx) -> None:
        if isinstance(idx, slice):
            for key in list(self._modules.keys())[idx]:
                delattr(self, key)
        else:
            delattr(self, self._get_item_by_idx(self._modules.keys(), idx))
        # Keep the numbering contiguous.
        self._modules = OrderedDict(zip((str(i) for i in range(len(self._modules))), self._modules.values()))

    def __len__(self) -> int:
        return len(self._modules)

    def __add__(self, other: "Sequential") -> "Sequential":
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")
        combined = Sequential()
        for layer in chain(self, other):
            combined.append(layer)
        return combined

    def __iadd__(self, other: "Sequential") -> "Sequential":
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")
        offset = len(self)
        for index, module in enumerate(other):
            self.add_module(str(index + offset), module)
        return self

    def __mul__(self, other: int) -> "Sequential":
        if not isinstance(other, int):
            raise TypeError(f"unsupported operand type(s) for *: {type(self)} and {type(other)}")
        if other <= 0:
            raise ValueError(f"Non-positive multiplication factor {other} for {type(self)}")
        combined = Sequential()
        offset = 0
        for _ in range(other):
            for module in self:
                combined.add_module(str(offset), module)
                offset += 1
        return combined

    def __rmul__(self, other: int) -> "Sequential":
        return self.__mul__(other)

    def __imul__(self, other: int) -> "Sequential":
        if not isinstance(other, int):
            raise TypeError(f"unsupported operand type(s) for *: {type(self)} and {type(other)}")
        if other <= 0:
            raise ValueError(f"Non-positive multiplication factor {other} for {type(self)}")
        original = list(self._modules.values())
        offset = len(self)
        for _ in range(other - 1):
            for index, module in enumerate(original):
                self.add_module(str(index + offset), module)
            offset += len(original)
        return self

    def pop(self, key) -> Module:
        value = self[key]
        del self[key]
        return value

    def __dir__(self) -> list:
        return [key for key in super().__dir__() if not key.isdigit()]

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def forward(self, input):
        for module in self:
            input = module(input)
        return input

    def append(self, module: Module) -> "Sequential":
        """Appends ``module`` at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index: int, module: Module) -> "Sequential":
        """Inserts ``module`` before position ``index``; returns self."""
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        length = len(self._modules)
        if not -length <= index <= length:
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += length
        for position in range(length, index, -1):
            self._modules[str(position)] = self._modules[str(position - 1)]
        self._modules[str(index)] = module
        return self

    def extend(self, sequential: Iterable[Module]) -> "Sequential":
        """Appends every module of ``sequential``; returns self."""
        for layer in sequential:
            self.append(layer)
        return self


class ModuleList(Module):
    """Holds submodules in a list; they are registered and visible to all Module methods.

    Example::

        >>> self.linears = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
    """

    _modules: OrderedDict[str, Module]  # type: ignore[assignment]  # a container holds modules, never None

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self += modules

    def _get_abs_string_index(self, idx) -> str:
        return str(_abs_index(idx, len(self)))

    def __getitem__(self, idx) -> "Module | ModuleList":
        if isinstance(idx, slice):
            return self.__class__(list(self._modules.values())[idx])
        return self._modules[self._get_abs_string_index(idx)]

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, self._get_abs_string_index(idx), module)

    def __delitem__(self, idx) -> None:
        if isinstance(idx, slice):
            for position in range(len(self._modules))[idx]:
                delattr(self, str(position))
        else:
            delattr(self, self._get_abs_string_index(idx))
        self._modules = OrderedDict(zip((str(i) for i in range(len(self._modules))), self._modules.values()))

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __iadd__(self, modules: Iterable[Module]) -> "ModuleList":
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> "ModuleList":
        combined = ModuleList()
        for index, module in enumerate(chain(self, other)):
            combined.add_module(str(index), module)
        return combined

    def __repr__(self) -> str:
        # PyTorch's ModuleList compresses runs of identical reprs: "(0-2): 3 x Linear(...)".
        reprs = [repr(item) for item in self]
        if not reprs:
            return self._get_name() + "()"
        runs = [[0, 0]]
        blocks = [reprs[0]]
        for index, text in enumerate(reprs[1:], 1):
            if text == blocks[-1]:
                runs[-1][1] += 1
                continue
            runs.append([index, index])
            blocks.append(text)
        lines = []
        for (start, end), block in zip(runs, blocks):
            line = f"({start}): {block}" if start == end else f"({start}-{end}): {end - start + 1} x {block}"
            lines.append(_addindent(line, 2))
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"

    def __dir__(self) -> list:
        return [key for key in super().__dir__() if not key.isdigit()]

    def insert(self, index: int, module: Module) -> None:
        """Inserts ``module`` before position ``index``."""
        for position in range(len(self._modules), index, -1):
            self._modules[str(position)] = self._modules[str(position - 1)]
        self._modules[str(index)] = module

    def append(self, module: Module) -> "ModuleList":
        """Appends ``module`` at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def pop(self, key) -> Module:
        value = self[key]
        del self[key]
        return value

    def extend(self, modules: Iterable[Module]) -> "ModuleList":
        """Appends the modules of an iterable; returns self."""
        if not isinstance(modules, container_abcs.Iterable):
            raise TypeError("ModuleList.extend should be called with an iterable, but got " + type(modules).__name__)
        offset = len(self)
        for index, module in enumerate(modules):
            self.add_module(str(offset + index), module)
        return self


class ModuleDict(Module):
    """Holds submodules in an ordered dictionary (insertion order), registered like attributes.

    Example::

        >>> self.activations = nn.ModuleDict({"relu": nn.ReLU(), "lrelu": nn.LeakyReLU()})
    """

    _modules: OrderedDict[str, Module]  # type: ignore[assignment]  # a container holds modules, never None

    def __init__(self, modules: Mapping[str, Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def clear(self) -> None:
        """Removes all items."""
        self._modules.clear()

    def pop(self, key: str) -> Module:
        """Removes ``key`` and returns its module."""
        value = self[key]
        del self[key]
        return value

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules) -> None:
        """Adds the items of a mapping (in its order) or of an iterable of ``(key, module)`` pairs."""
        if not isinstance(modules, container_abcs.Iterable):
            raise TypeError(
                "ModuleDict.update should be called with an iterable of key/value pairs, but got "
                + type(modules).__name__
            )
        if isinstance(modules, (OrderedDict, ModuleDict, container_abcs.Mapping)):
            for key, module in modules.items():
                self[key] = module
            return
        for index, pair in enumerate(modules):
            if not isinstance(pair, container_abcs.Iterable):
                raise TypeError(
                    "ModuleDict update sequence element #"
                    + str(index)
                    + " should be Iterable; is"
                    + type(pair).__name__
                )
            if not len(pair) == 2:  # type: ignore[arg-type]  # pair: an Iterable that has a length
                raise ValueError(
                    "ModuleDict update sequence element #"
                    + str(index)
                    + " has length "
                    + str(len(pair))  # type: ignore[arg-type]
                    + "; 2 is required"
                )
            self[pair[0]] = pair[1]  # type: ignore[index]  # a (key, value) pair


def _tensor_summary(value, type_name: Callable[[Tensor], Any] = operator.attrgetter("dtype")) -> str:
    """One line of a parameter container's repr; ``type_name`` names a tensor's type (ParameterList
    writes its dtype, ParameterDict ``typename``'s ``onnxnn.FloatTensor``, as PyTorch's do)."""
    if isinstance(value, Tensor):
        size = "x".join(str(s) for s in value.size())
        device = f" ({value.device})" if value.device.type == "cuda" else ""
        kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
        return f"{kind} containing: [{type_name(value)} of size {size}{device}]"
    return "Object of type: " + type(value).__name__


class ParameterList(Module):
    """Holds parameters in a list; tensors appended are wrapped as Parameters and registered.

    Example::

        >>> self.params = nn.ParameterList([nn.Parameter(onnxnn.randn(2)) for _ in range(3)])
    """

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def _get_abs_string_index(self, idx) -> str:
        return str(_abs_index(idx, len(self)))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            out = self.__class__()
            for position in range(*idx.indices(len(self))):
                out.append(self[position])
            return out
        return getattr(self, self._get_abs_string_index(idx))

    def __setitem__(self, idx: int, param: Any) -> None:
        # Every way of adding to the list ends here, so this is where tensors become Parameters.
        name = self._get_abs_string_index(idx)
        if isinstance(param, Tensor) and not isinstance(param, Parameter):
            param = Parameter(param)
        setattr(self, name, param)

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Any]:
        return iter(self[i] for i in range(len(self)))

    def __iadd__(self, parameters: Iterable[Any]) -> "ParameterList":
        return self.extend(parameters)

    def __dir__(self) -> list:
        return [key for key in super().__dir__() if not key.isdigit()]

    def append(self, value: Any) -> "ParameterList":
        """Appends ``value`` (a tensor becomes a Parameter); returns self."""
        new_index = len(self)
        self._size += 1
        self[new_index] = value
        return self

    def extend(self, values: Iterable[Any]) -> "ParameterList":
        """Appends the values of an iterable; returns self."""
        # A Tensor is iterable but is never unpacked here.
        if not isinstance(values, container_abcs.Iterable) or isinstance(values, Tensor):
            raise TypeError("ParameterList.extend should be called with an iterable, but got " + type(values).__name__)
        for value in values:
            self.append(value)
        return self

    def extra_repr(self) -> str:
        return "\n".join(f"  ({index}): " + _tensor_summary(value) for index, value in enumerate(self))

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """Holds parameters in an ordered dictionary; tensors set are wrapped as Parameters.

    A plain ``dict`` given to the constructor or ``update`` is added in sorted key order (an
    ``OrderedDict`` or another ParameterDict keeps its order), as in PyTorch.

    Example::

        >>> self.params = nn.ParameterDict({"foo": nn.Parameter(onnxnn.randn(3))})
    """

    def __init__(self, parameters: Any = None) -> None:
        super().__init__()
        self._keys: dict = {}
        if parameters is not None:
            self.update(parameters)

    def _key_to_attr(self, key: str) -> str:
        if not isinstance(key, str):
            raise TypeError(
                "Index given to ParameterDict cannot be used as a key as it is not a string "
                f"(type is '{type(key).__name__}'). Open an issue on github if you need "
                "non-string keys."
            )
        return key

    def __getitem__(self, key: str) -> Any:
        return getattr(self, self._key_to_attr(key))

    def __setitem__(self, key: str, value: Any) -> None:
        # Every way of adding to the dict ends here, so this is where tensors become Parameters.
        attr = self._key_to_attr(key)
        if attr in TABLE_NAMES:  # the attribute would replace the module's own table
            raise AttributeError(
                f"'{key}' cannot be a key of a ParameterDict: its entries are attributes of the "
                "module, and this name is the module's own table of parameters, buffers or submodules"
            )
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, attr, value)
        self._keys[key] = None

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, self._key_to_attr(key))

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __reversed__(self) -> Iterator[str]:
        return reversed(list(self._keys))

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def copy(self) -> "ParameterDict":
        """A new ParameterDict holding the same parameters."""
        return ParameterDict(OrderedDict((k, self[k]) for k in self._keys))

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self) -> None:
        for key in self._keys.copy():
            del self[key]

    def pop(self, key: str) -> Any:
        value = self[key]
        del self[key]
        return value

    def popitem(self) -> tuple[str, Any]:
        key = next(reversed(self._keys)) if self._keys else None
        if key is None:
            raise KeyError("popitem(): dictionary is empty")
        return key, self.pop(key)

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default

    def fromkeys(self, keys: Iterable[str], default: Any = None) -> "ParameterDict":
        return ParameterDict((k, default) for k in keys)

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def update(self, parameters) -> None:
        """Adds the items of a mapping or of an iterable of ``(key, value)`` pairs."""
        if not isinstance(parameters, container_abcs.Iterable):
            raise TypeError(
                "ParametersDict.update should be called with an iterable of key/value pairs, but got "
                + type(parameters).__name__
            )
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            for key, parameter in parameters.items():
                self[key] = parameter
        elif isinstance(parameters, container_abcs.Mapping):
            for key, parameter in sorted(parameters.items()):
                self[key] = parameter
        else:
            for index, pair in enumerate(parameters):
                if not isinstance(pair, container_abcs.Iterable):
                    raise TypeError(
                        "ParameterDict update sequence element #"
                        + str(index)
                        + " should be Iterable; is"
                        + type(pair).__name__
                    )
                if not len(pair) == 2:  # type: ignore[arg-type]  # pair: an Iterable that has a length
                    raise ValueError(
                        "ParameterDict update sequence element #"
                        + str(index)
                        + " has length "
                        + str(len(pair))  # type: ignore[arg-type]
                        + "; 2 is required"
                    )
                self[pair[0]] = pair[1]  # type: ignore[index]  # a (key, value) pair

    def extra_repr(self) -> str:
        return "\n".join(f"  ({key}): " + _tensor_summary(value, typename) for key, value in self.items())

    def __call__(self, input):
        raise RuntimeError("ParameterDict should not be called.")

    def __or__(self, other: "ParameterDict") -> "ParameterDict":
        copy = self.copy()
        copy.update(other)
        return copy

    def __ror__(self, other: "ParameterDict") -> "ParameterDict":
        copy = other.copy()
        copy.update(self)
        return copy

    def __ior__(self, other: "ParameterDict") -> "ParameterDict":
        self.update(other)
        return self

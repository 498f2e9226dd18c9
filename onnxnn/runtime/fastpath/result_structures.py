"""What a replayed forward returns: its tensors, and the containers around them, taken apart and made again.

A trace keeps a forward's result as a structure: each tensor replaced by its position among the
outputs, inside the containers that held it. A replay (``replay_source``) and a compiled call's
prepared run (``compiled_calls``) make the same containers around their new tensors.

The containers are tuples, lists and dicts with string keys, and None, as PyTorch's tracers take
them, plus the named ones models return: namedtuples, and dict subclasses made from their
fields by keyword (``OrderedDict``, the language models' ``ModelOutput``, as transformers'
``ModelOutput``). A named container is kept only where making it again from its own contents
gives the same thing: the same type and the very same items, and no attributes of its own. So a
subclass whose constructor does something else (renames, fills in, keeps extra state) leaves its
forward unreplayed, as before, rather than returned otherwise.
"""

from __future__ import annotations

from operator import is_
from typing import Callable

from ..tensor import Tensor

__all__ = ["rebuilt", "rebuilt_source", "result_structure"]


def result_structure(
    result, outputs: list, produced: dict | None = None, returned: list | None = None, gradients: bool = False
):
    """``result`` with each tensor replaced by its value's position in ``outputs``, or None when
    the result is not made of tensors (in the containers of the module doc, with None around them).

    With ``produced`` (a trace's values, ``produced_by``), each tensor must also be a new one the
    traced nodes produced, carrying no attributes and needing no gradient unless ``gradients`` (its
    backward function is then the traced one's, which ``_backward_steps`` checks): a replay returns
    new tensors, and would not return the very objects given to it. ``returned``: gets the tensors.
    """
    if result is None:
        return ()
    kind = type(result)
    if kind is Tensor:
        value = result._value
        if produced is not None and (
            value not in produced or (result._requires_grad and not gradients) or result.__dict__
        ):
            return None
        outputs.append(value)
        if returned is not None:
            returned.append(result)
        return len(outputs) - 1
    if kind is tuple or kind is list or (isinstance(result, tuple) and _made_again_from_items(result)):
        parts = []
        for item in result:
            part = result_structure(item, outputs, produced, returned, gradients)
            if part is None:
                return None
            parts.append(part)
        return (kind, parts)
    if (
        isinstance(result, dict)
        and all(type(key) is str for key in result)
        and (kind is dict or _made_again_from_fields(result))
    ):
        entries = []
        for key, item in dict.items(result):
            part = result_structure(item, outputs, produced, returned, gradients)
            if part is None:
                return None
            entries.append((key, part))
        return (kind, entries)
    return None


def rebuilt(structure, made: list):
    """The result of ``structure`` (``result_structure``) around the tensors ``made``."""
    if type(structure) is int:
        return made[structure]
    if structure == ():
        return None
    kind, parts = structure
    if kind is dict:
        return {key: rebuilt(part, made) for key, part in parts}
    if issubclass(kind, dict):
        return kind(**{key: rebuilt(part, made) for key, part in parts})
    items = [rebuilt(part, made) for part in parts]
    return kind(items) if kind is tuple or kind is list else kind(*items)


def rebuilt_source(structure, leaf: Callable[[int], str], namespace: dict) -> str:
    """The expression that makes the result of ``structure`` from its tensors (``leaf`` of each
    position), as ``rebuilt`` does; a named container's type is put in ``namespace``."""
    if structure == ():
        return "None"
    if type(structure) is int:
        return leaf(structure)
    kind, parts = structure
    if issubclass(kind, dict):  # string keys, written as their literals
        fields = "{" + "".join(f"{key!r}: {rebuilt_source(part, leaf, namespace)}, " for key, part in parts) + "}"
        return fields if kind is dict else f"{_named(kind, namespace)}(**{fields})"
    items = "".join(f"{rebuilt_source(part, leaf, namespace)}, " for part in parts)
    if kind is tuple:
        return f"({items})"
    return f"[{items}]" if kind is list else f"{_named(kind, namespace)}({items})"


def _named(kind: type, namespace: dict) -> str:
    name = f"result_type_{id(kind)}"
    namespace[name] = kind
    return name


def _made_again_from_items(result: tuple) -> bool:
    """Whether ``type(result)(*result)`` (a namedtuple's constructor) makes ``result`` again."""
    if not hasattr(type(result), "_fields"):
        return False
    try:
        again = type(result)(*result)
    except Exception:
        return False
    same_items = len(again) == len(result) and all(map(is_, again, result))
    return type(again) is type(result) and same_items and _no_attributes(result, again)


def _made_again_from_fields(result: dict) -> bool:
    """Whether ``type(result)(**result)`` makes ``result`` again: its items, in their order."""
    try:
        again = type(result)(**dict(dict.items(result)))
    except Exception:
        return False
    if type(again) is not type(result) or list(dict.keys(again)) != list(dict.keys(result)):
        return False
    return all(map(is_, dict.values(again), dict.values(result))) and _no_attributes(result, again)


def _no_attributes(result, again) -> bool:
    return not getattr(result, "__dict__", None) and not getattr(again, "__dict__", None)

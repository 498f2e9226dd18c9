"""``functional_call``: run a module with some parameters and buffers swapped for given tensors.

PyTorch's ``torch.nn.utils.stateless.functional_call`` / ``torch.func.functional_call``. The swap
writes the given tensors into the owning modules' ``_parameters`` / ``_buffers`` tables for the
duration of the call and restores the originals afterwards (also when the call raises), so the
forward records its graph from the given tensors and gradients flow to them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

from ...runtime.tensor import Tensor

__all__ = ["functional_call"]

_MISSING = object()


def _owner_and_attribute(module, name: str):
    path, _, attribute = name.rpartition(".")
    return (module.get_submodule(path) if path else module), attribute


def _merge_dicts(dicts: Union[Mapping[str, Any], Sequence[Mapping[str, Any]]]) -> dict:
    if isinstance(dicts, Mapping):
        return dict(dicts)
    merged: dict = {}
    for mapping in dicts:
        for key, value in mapping.items():
            if key in merged:
                raise ValueError(f"{key} appeared in multiple dictionaries; behavior of functional call is ambiguous")
            merged[key] = value
    return merged


def _tie_names(module, replacements: dict) -> dict:
    """Extends ``replacements`` to every other name of a tied (shared) parameter or buffer."""
    names_by_tensor: dict = {}
    for name, value in list(module.named_parameters(remove_duplicate=False)) + list(
        module.named_buffers(remove_duplicate=False)
    ):
        names_by_tensor.setdefault(id(value), []).append(name)
    extended = dict(replacements)
    for names in names_by_tensor.values():
        if len(names) < 2:
            continue
        given = [name for name in names if name in replacements]
        if not given:
            continue
        values = {id(replacements[name]) for name in given}
        if len(values) > 1:
            raise ValueError(
                f"functional_call got multiple values for keys {sorted(given)}, which are tied. "
                "Consider using tie_weights=False"
            )
        for name in names:
            extended.setdefault(name, replacements[given[0]])
    return extended


@contextlib.contextmanager
def _reparametrize(module, replacements: dict, strict: bool):
    parameter_names = {name for name, _ in module.named_parameters(remove_duplicate=False)}
    buffer_names = {name for name, _ in module.named_buffers(remove_duplicate=False)}
    known = parameter_names | buffer_names
    if strict:
        missing = sorted(known - set(replacements))
        unexpected = sorted(set(replacements) - known)
        messages = []
        if unexpected:
            messages.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
        if missing:
            messages.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
        if messages:
            raise RuntimeError(f"Error(s) in reparametrizing for {module._get_name()}:\n\t" + "\n\t".join(messages))
    saved = []  # (table or None, owner, attribute, original value or _MISSING), restored in reverse order
    try:
        for name, value in replacements.items():
            owner, attribute = _owner_and_attribute(module, name)
            if attribute in owner._parameters or attribute in owner._buffers:
                table = owner._parameters if attribute in owner._parameters else owner._buffers
                saved.append((table, owner, attribute, table[attribute]))
                table[attribute] = value
            else:
                # Not a registered tensor: set for the call with setattr, as PyTorch does, so that a
                # parametrized name takes the value through its right_inverse into its original.
                saved.append((None, owner, attribute, getattr(owner, attribute, _MISSING)))
                setattr(owner, attribute, value)
        yield
    finally:
        for table, owner, attribute, original in reversed(saved):
            if table is not None:
                table[attribute] = original
            elif original is _MISSING:
                delattr(owner, attribute)
            else:
                setattr(owner, attribute, original)


def functional_call(
    module,
    parameter_and_buffer_dicts: Union[Mapping[str, Tensor], Sequence[Mapping[str, Tensor]]],
    args: Optional[Union[Any, tuple]] = None,
    kwargs: Optional[dict[str, Any]] = None,
    *,
    tie_weights: bool = True,
    strict: bool = False,
):
    r"""Performs a functional call on the module by replacing its parameters and buffers with the given ones.

    Args:
        module: the module to call.
        parameter_and_buffer_dicts: a mapping (or sequence of mappings) from ``state_dict``-style
            names to the tensors used in the call instead of the module's own.
        args: positional arguments of the call (a non-tuple is passed as the only argument).
        kwargs: keyword arguments of the call.
        tie_weights: if ``True``, a tensor given for one name of a tied parameter replaces all its
            names.
        strict: if ``True``, the given names must match the module's parameters and buffers exactly.

    Returns:
        Whatever ``module(*args, **kwargs)`` returns.

    Example::

        >>> params = {k: v * 2 for k, v in model.named_parameters()}
        >>> out = nn.utils.stateless.functional_call(model, params, (x,))
    """
    replacements = _merge_dicts(parameter_and_buffer_dicts)
    if tie_weights:
        replacements = _tie_names(module, replacements)
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    if kwargs is None:
        kwargs = {}
    with _reparametrize(module, replacements, strict):
        return module(*args, **kwargs)

"""Walking a module tree: its parameters, buffers, children and modules, each once, as PyTorch names them.

One ``_named_members`` walk serves ``named_parameters`` and ``named_buffers``: every module of
``named_modules`` (this one first, then its submodules depth-first, each reached once unless
``remove_duplicate=False``) gives its own table's entries, each member once, named by its dotted path.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ...runtime.tensor import Tensor

if TYPE_CHECKING:
    from ..parameter import Parameter
    from .module import Module

__all__ = ["TreeWalksMixin"]


class TreeWalksMixin:
    """``parameters``, ``buffers``, ``children``, ``modules`` and their named forms, for ``Module``."""

    _parameters: OrderedDict[str, Parameter | None]
    _buffers: OrderedDict[str, Tensor | None]
    _modules: OrderedDict[str, Module | None]

    def _named_members(
        self, get_members: Callable, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Any]]:
        """The one walk behind ``named_parameters`` and ``named_buffers``."""
        seen: set = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in get_members(module):
                if value is None or id(value) in seen:
                    continue
                if remove_duplicate:
                    seen.add(id(value))
                yield module_prefix + ("." if module_prefix else "") + name, value

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """Returns an iterator over module parameters (each once), typically passed to an optimizer.

        Args:
            recurse: include the parameters of all submodules, not only direct members.
        """
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Parameter]]:
        """Returns an iterator over ``(name, parameter)`` pairs, names dotted from this module.

        Args:
            prefix: prepended to every name.
            recurse: include the parameters of all submodules.
            remove_duplicate: yield a parameter shared by several modules only once.

        Example::

            >>> [name for name, _ in net.named_parameters()]
            ['l1.weight', 'l1.bias']
        """
        yield from self._named_members(
            lambda module: module._parameters.items(), prefix=prefix, recurse=recurse, remove_duplicate=remove_duplicate
        )

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """Returns an iterator over module buffers."""
        for _, buffer in self.named_buffers(recurse=recurse):
            yield buffer

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        """Returns an iterator over ``(name, buffer)`` pairs (see :meth:`named_parameters`)."""
        yield from self._named_members(
            lambda module: module._buffers.items(), prefix=prefix, recurse=recurse, remove_duplicate=remove_duplicate
        )

    def children(self) -> Iterator[Module]:
        """Returns an iterator over immediate child modules."""
        for _, module in self.named_children():
            yield module

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """Returns an iterator over ``(name, module)`` pairs of immediate children (each module once)."""
        seen: set = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def modules(self) -> Iterator[Module]:
        """Returns an iterator over all modules in the network, this one first (each once)."""
        for _, module in self.named_modules():
            yield module

    def named_modules(
        self, memo: set | None = None, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Module]]:
        """Returns an iterator over ``(name, module)`` of all modules, this one first with name ``prefix``.

        Args:
            memo: a set of modules already yielded (they are skipped).
            prefix: the name of this module; added to all names.
            remove_duplicate: yield a module reachable by several paths only once.
        """
        if memo is None:
            memo = set()
        if self in memo:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self  # type: ignore[misc]  # a mixin of Module only: ``self`` is a Module
        for name, module in self._modules.items():
            if module is None:
                continue
            submodule_prefix = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, submodule_prefix, remove_duplicate)

"""PyTorch's ``*_copy`` functions: each view op as a new tensor that shares nothing with its input.

A view aliases its base (``runtime/views.py``): writing to ``x.narrow(0, 0, 1)`` writes ``x``.
``torch.narrow_copy`` and its siblings give the same values as a tensor of their own, which a write
changes alone. One table names each and the view op it copies.
"""

from __future__ import annotations

from typing import Callable

from ._common import Tensor

__all__ = [
    "alias_copy",
    "detach_copy",
    "diagonal_copy",
    "expand_copy",
    "narrow_copy",
    "permute_copy",
    "select_copy",
    "slice_copy",
    "split_copy",
    "split_with_sizes_copy",
    "squeeze_copy",
    "t_copy",
    "transpose_copy",
    "unbind_copy",
    "unfold_copy",
    "unsqueeze_copy",
    "view_copy",
]


def _slice(input: Tensor, dim: int = 0, start: int | None = None, end: int | None = None, step: int = 1) -> Tensor:
    index = [slice(None)] * input.dim()
    index[dim] = slice(start, end, step)
    return input[tuple(index)]


# name -> the view it copies (a Tensor method's name, or a function of the input)
VIEW_COPIES: dict[str, str | Callable] = {
    "alias_copy": lambda input: input,
    "detach_copy": "detach",
    "diagonal_copy": "diagonal",
    "expand_copy": "expand",
    "narrow_copy": "narrow",
    "permute_copy": "permute",
    "select_copy": "select",
    "slice_copy": _slice,
    "split_copy": "split",
    "split_with_sizes_copy": "split",
    "squeeze_copy": "squeeze",
    "t_copy": "t",
    "transpose_copy": "transpose",
    "unbind_copy": "unbind",
    "unfold_copy": "unfold",
    "unsqueeze_copy": "unsqueeze",
    "view_copy": "view",
}


def _copying(name: str, view: str | Callable) -> Callable:
    def copy(input: Tensor, *args, **kwargs):
        result = getattr(input, view)(*args, **kwargs) if isinstance(view, str) else view(input, *args, **kwargs)
        if isinstance(result, (tuple, list)):
            return tuple(part.clone() for part in result)
        return result.clone()

    label = view if isinstance(view, str) else name.removesuffix("_copy")
    copy.__name__ = copy.__qualname__ = name
    copy.__doc__ = f"``{label}`` of ``input`` as a new tensor sharing nothing with it, as ``torch.{name}``."
    return copy


alias_copy = _copying("alias_copy", VIEW_COPIES["alias_copy"])
detach_copy = _copying("detach_copy", VIEW_COPIES["detach_copy"])
diagonal_copy = _copying("diagonal_copy", VIEW_COPIES["diagonal_copy"])
expand_copy = _copying("expand_copy", VIEW_COPIES["expand_copy"])
narrow_copy = _copying("narrow_copy", VIEW_COPIES["narrow_copy"])
permute_copy = _copying("permute_copy", VIEW_COPIES["permute_copy"])
select_copy = _copying("select_copy", VIEW_COPIES["select_copy"])
slice_copy = _copying("slice_copy", VIEW_COPIES["slice_copy"])
split_copy = _copying("split_copy", VIEW_COPIES["split_copy"])
split_with_sizes_copy = _copying("split_with_sizes_copy", VIEW_COPIES["split_with_sizes_copy"])
squeeze_copy = _copying("squeeze_copy", VIEW_COPIES["squeeze_copy"])
t_copy = _copying("t_copy", VIEW_COPIES["t_copy"])
transpose_copy = _copying("transpose_copy", VIEW_COPIES["transpose_copy"])
unbind_copy = _copying("unbind_copy", VIEW_COPIES["unbind_copy"])
unfold_copy = _copying("unfold_copy", VIEW_COPIES["unfold_copy"])
unsqueeze_copy = _copying("unsqueeze_copy", VIEW_COPIES["unsqueeze_copy"])
view_copy = _copying("view_copy", VIEW_COPIES["view_copy"])

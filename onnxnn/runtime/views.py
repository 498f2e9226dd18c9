"""Views alias their base, as PyTorch's do: a write through either reaches the other.

In PyTorch ``x[0]``, ``x.t()``, ``x.view(...)``, ``x.diagonal()``, ``x.narrow(...)`` and their kin
read ``x``'s storage: ``layer.weight[0].fill_(1.0)`` changes the layer, ``x.diagonal().zero_()``
changes ``x``, and a view taken before ``x.add_(1)`` sees the addition. onnxnn's values are
immutable and an in-place op rebinds its tensor (DESIGN principle 5), so a view is a tensor linked
to its base by the op that made it (``VIEW_OPS``, by method name) and that op's numpy twin
(``view_positions.py``), which says which of the base's elements each of the view's elements is:

- a write that rebinds a view writes its values into the base at those positions, as the base's
  own in-place write (a ScatterElements over the flattened base, recorded through autograd as
  PyTorch's ``CopySlices``); the base's version bumps;
- a write that rebinds a base (a view's write-through included) makes its other live views again
  from the new value with the ops that made them.

The top-level functions of these ops (``onnxnn.transpose(x, 0, 1)``, ``onnxnn.split(x, 2)``:
``view_function``) call the methods, so they make the same linked views, as PyTorch's do.

A view of a view is linked to the root base, as PyTorch's ``_base`` is, with both ops composed:
``x.t()[0].fill_(1)`` reaches ``x`` though the transposed tensor in between is gone.

A write through a view of a leaf that requires grad is refused while gradients are recorded,
before anything changes, as PyTorch refuses it. Every op here gives each element of the view its
own element of the base; ``expand`` and ``unfold``, whose elements may share one (PyTorch refuses
most writes to them), are copies, as are ``reshape`` and ``flatten`` (PyTorch's copy when they
must, and onnxnn has no strides to tell when) and advanced indexing; ``.data`` and ``detach()``
share the value whole (``aliases.py``), but of a view they are detached views of its root
(``share_storage``: ``x[0].detach().fill_(1)`` writes ``x``). A view is contiguous, and
``contiguous()`` returns it, exactly when its root positions are row-major consecutive, as
PyTorch's strides say (``is_contiguous``).

Links are weak both ways and kept by tensor ids, so a view never keeps its base alive, and copies
and pickles never carry a link. The views of one root are a family, which outlives the root (as
PyTorch's storage outlives its base tensor): once the root is collected, or given new storage
(``p.data = other``) or a new shape in place (``x.t_()``), a write through one view reaches the
others where they overlap (``_write_family``). An index or size given as a 0-d tensor is read once,
when the view is made.
"""

from __future__ import annotations

import inspect
import threading
import weakref
from typing import Callable

import numpy as np

from ..ir import dtypes
from ..ir.graph import hold
from ..ir.mode import MODE
from .aliases import ALIAS_GROUPS, anchor, join_value_of
from .grad_mode import set_grad_enabled
from .view_positions import VIEW_OPS, is_integer_scalar_tensor

__all__ = [
    "VIEW_LINKS",
    "VIEWS_OF",
    "VIEW_OPS",
    "view_function",
    "viewing",
    "install_view_ops",
    "check_view_write",
    "after_write",
    "forget_links",
    "reshape_in_place",
    "view_root",
    "share_storage",
    "same_storage",
    "detached_alias",
    "is_contiguous",
    "view_path",
    "made_again",
    "overlapping_views",
]


# id(view) -> its link; id(base) -> its entry (a weak reference to it, with the links of its views).
# A link is a weak reference to its view whose callback removes it, so that the links of a forward's
# temporary views go with them, young (a link outliving its view would reach the collector's older
# generations and make its full collections more frequent).
VIEW_LINKS: dict[int, "_Link"] = {}
VIEWS_OF: dict[int, "_Base"] = {}


class _ThreadState(threading.local):
    """Per thread (threads may record at once): ``making`` > 0 inside a view op or a refresh, where
    the views made are no new links; ``writers``: the views whose write is going through, which
    their bases do not make again."""

    def __init__(self):
        self.making = 0
        self.writers: list[int] = []


_STATE = _ThreadState()


class _Base(weakref.ref):
    """A weak reference to a base, holding its views' links by view id and its shape (its storage's,
    which the views' positions index); removed from ``VIEWS_OF`` with the base, kept by the links."""

    __slots__ = ("key", "links", "shape")
    key: int
    links: dict[int, "_Link"]
    shape: tuple


class _Storage:
    """The referent of a family's entry once its root has new storage: gone as soon as made."""

    __slots__ = ("__weakref__",)


def _orphaned(entry: _Base) -> _Base:
    """``entry``'s family without its root: its views keep sharing their storage among themselves."""
    orphan = _Base(_Storage())  # the referent is freed at once: the entry's root reads as gone
    orphan.key, orphan.links, orphan.shape = -1, entry.links, entry.shape
    for link in entry.links.values():
        link.base = orphan
    return orphan


def _base_collected(entry: _Base) -> None:
    if VIEWS_OF.get(entry.key) is entry:
        del VIEWS_OF[entry.key]


class _Link(weakref.ref):
    """A weak reference to a view: its link to its root base, the view op that made it from its parent
    (the root, or a view of it: a view of a view links to the root, as PyTorch's ``_base``, so a
    temporary in between may go), and that op's numpy twin. Made by ``_link`` (its fields set there:
    a view op runs it every call, and Python-level constructors would double its cost).

    ``base``: the root's entry; ``detached``: a view of the root's ``.data``, whose writes stay outside
    autograd; ``parent``: the parent view's link, or None when the parent is the root; ``recipe``:
    ``(method, args, kwargs, piece, twin, shape)``, the view op with its arguments (which makes the
    view again from a new parent value), the position among a multi-view op's results (else None),
    the numpy twin and the result's shape (or its results'); ``positions``: the root's flat
    positions, shaped as the view, once a write needs them; ``no_grad``: made while gradients were
    not recorded.
    """

    __slots__ = ("key", "base", "detached", "parent", "recipe", "positions", "no_grad")
    key: int
    base: _Base
    detached: bool
    parent: "_Link | None"
    recipe: tuple
    positions: np.ndarray | None
    no_grad: bool

    def live_base(self, view):
        """The root while both it and ``view`` (this link's) live, else None."""
        return self.base() if self() is view else None

    def remake(self, base):
        """This view made again from a new value of its root ``base``."""
        parent = base if self.parent is None else self.parent.remake(base)
        method, args, kwargs, piece, _, _ = self.recipe
        result = method(parent, *args, **kwargs)
        result = result if piece is None else result[piece]
        return parent._new_handle("ViewBackward0") if result is parent else result

    def root_positions(self) -> np.ndarray:
        """The flat positions in the root (its storage) of each of this view's elements."""
        if self.positions is None:
            shape = self.base.shape
            self.positions = np.asarray(self.made_from(np.arange(int(np.prod(shape))).reshape(shape)), np.int64)
        return self.positions

    def made_from(self, root: np.ndarray) -> np.ndarray:
        """The numpy twins of this view's ops applied to ``root``, an array of the root's shape. (A
        loop, not a recursion: ``x = x[1:]`` repeated makes a chain as long as the loop.)"""
        chain: list[_Link] = []
        link: _Link | None = self
        while link is not None:
            chain.append(link)
            link = link.parent
        result = root
        for made in reversed(chain):
            _, args, kwargs, piece, twin, shape = made.recipe
            result = twin(result, shape, *args, **kwargs)
            result = result if piece is None else result[piece]
        return result


def _view_collected(link: _Link) -> None:
    if VIEW_LINKS.get(link.key) is link:
        del VIEW_LINKS[link.key]
    link.base.links.pop(link.key, None)


def viewing(name: str, method: Callable) -> Callable:
    """``method`` (the Tensor method ``name`` of ``VIEW_OPS``) returning views linked to its tensor."""
    twin, makes_view = VIEW_OPS[name]

    def view_method(self, *args, **kwargs):
        state = _STATE
        if state.making or (makes_view is not None and not makes_view(*args, **kwargs)):
            return method(self, *args, **kwargs)
        state.making += 1  # the views the op makes on its way (``x[0, 1]`` selects twice) are its own
        try:
            result = method(self, *args, **kwargs)
        finally:
            state.making -= 1
        if args:
            args = _read_now(args)
        if kwargs and _holds_tensor(kwargs.values()):
            kwargs = {name: _frozen(item) for name, item in kwargs.items()}
        parent = VIEW_LINKS.get(id(self))
        if parent is not None and parent() is self:  # a view of a view: of its root, if gone too
            entry, detached = parent.base, parent.detached
        else:
            # A view of a ``.data`` links to the tensor it came from (which outlives it), outside autograd.
            parent, root = None, anchor(self) if ALIAS_GROUPS and id(self) in ALIAS_GROUPS else self
            detached = root is not self
            entry = VIEWS_OF.get(id(root))
            if entry is None or entry() is not root:
                entry = VIEWS_OF[id(root)] = _Base(root, _base_collected)
                entry.key, entry.links, entry.shape = id(root), {}, root._value.shape
        if isinstance(result, (tuple, list)):
            if any(piece is self for piece in result):  # one piece, the whole tensor
                result = type(result)(self._new_handle("ViewBackward0") if piece is self else piece for piece in result)
            shapes = [piece._value.shape for piece in result]
            for position, piece in enumerate(result):
                _link(piece, entry, detached, parent, (method, args, kwargs, position, twin, shapes))
        else:
            if result is self:  # a view that changes nothing (the same shape, t() of a vector)
                result = self._new_handle("ViewBackward0")
            _link(result, entry, detached, parent, (method, args, kwargs, None, twin, result._value.shape))
        return result

    view_method.__name__ = view_method.__qualname__ = getattr(method, "__name__", name)
    view_method.__doc__ = method.__doc__
    view_method.__wrapped__ = method  # type: ignore[attr-defined]  # the op a recipe remakes a view with
    _LINKING[method] = view_method
    return view_method


# A recipe's op (unlinked, as ``_Link.remake`` runs it) -> its method that links the views it makes.
_LINKING: dict[Callable, Callable] = {}


def _read_now(args: tuple) -> tuple:
    """``args`` with each 0-d integer tensor read as its int: PyTorch reads an index (``x[i]``,
    ``narrow(0, start, 2)``) when it makes the view, so a later write to ``i`` moves nothing."""
    return tuple([_frozen(item) for item in args]) if _holds_tensor(args) else args


_PLAIN = frozenset((int, slice, type(None), type(Ellipsis), bool, str))


def _holds_tensor(items) -> bool:
    for item in items:
        kind = type(item)
        if kind in _PLAIN:
            continue
        if kind is tuple or kind is list:
            if _holds_tensor(item):
                return True
        elif hasattr(item, "_value"):
            return True
    return False


def _frozen(item):
    kind = type(item)
    if kind is tuple or kind is list:
        return kind([_frozen(part) for part in item])
    return int(item) if is_integer_scalar_tensor(item) else item


def _link(view, entry: _Base, detached: bool, parent, recipe: tuple) -> None:
    link = _Link(view, _view_collected)
    link.key = key = id(view)
    link.base, link.detached, link.parent, link.recipe, link.positions = entry, detached, parent, recipe, None
    link.no_grad = not MODE.grad.enabled
    VIEW_LINKS[key] = link
    entry.links[key] = link


def forget_links(tensor) -> None:
    """Unlinks ``tensor`` from its base and from its views (its storage replaced, or its shape
    changed): its views keep sharing their storage among themselves, as its siblings do."""
    link = VIEW_LINKS.pop(id(tensor), None)
    if link is not None:
        link.base.links.pop(link.key, None)
    entry = VIEWS_OF.pop(id(tensor), None)
    if entry is not None and entry() is tensor:
        _orphaned(entry)


def reshape_in_place(tensor, name: str, args: tuple, kwargs: dict, shape: tuple) -> None:
    """``tensor`` takes the new ``shape`` of the view op ``name`` in place (``x.t_()``, ``x.unsqueeze_(0)``):
    it stays in its family as that op's view of its old self, as PyTorch's keeps its storage, so writes
    through it and through its earlier views (or its base, for a view) keep reaching each other."""
    twin, makes_view = VIEW_OPS[name]
    link, entry = VIEW_LINKS.get(id(tensor)), VIEWS_OF.get(id(tensor))
    viewed = makes_view is None or makes_view(*args, **kwargs)
    if viewed and link is not None and link() is tensor:
        family, detached, parent = link.base, link.detached, link  # a view: its root's, through one op more
    elif viewed and entry is not None and entry() is tensor and entry.links:
        del VIEWS_OF[id(tensor)]  # a base: the storage its views share stays theirs and its own
        family, detached, parent = _orphaned(entry), False, None
    else:
        forget_links(tensor)  # nothing else shares its storage (the usual case)
        return
    method = getattr(type(tensor), name).__wrapped__
    _link(tensor, family, detached, parent, (method, _read_now(args), kwargs, None, twin, shape))
    if parent is not None and parent.no_grad:  # made under no_grad: its writes are still refused as such
        VIEW_LINKS[id(tensor)].no_grad = True


def view_root(tensor, differentiable: bool = False):
    """PyTorch's ``_base``: the root the view ``tensor`` was made from, while both live (the links are
    weak), else None. With ``differentiable``, None also for a view outside its root's autograd
    (``.data`` or ``detach()`` of one)."""
    link = VIEW_LINKS.get(id(tensor))
    if link is None or differentiable and link.detached:
        return None
    return link.live_base(tensor)


def view_path(tensor, anchors: dict) -> tuple | None:
    """How the view ``tensor`` is made from the nearest of ``anchors`` (tensors by id) among its parents
    and root: ``(anchor, steps)``, ``steps`` the view ops to apply to ``anchor`` (``made_again``);
    ``(None, ())`` where it is no live view, or a view of a root that is gone; None where it is a
    detached view (``.data``, ``detach()``) or one of a live root that is none of the anchors."""
    link = VIEW_LINKS.get(id(tensor))
    if link is None or link() is not tensor:
        return None, ()
    steps: list = []
    while True:
        if link.detached:
            return None
        steps.append(link.recipe[:4])  # (op, args, kwargs, piece)
        parent = link.parent
        above = link.base() if parent is None else parent()
        if above is not None and id(above) in anchors:
            return anchors[id(above)], tuple(reversed(steps))
        if parent is None:
            return (None, ()) if above is None else None
        link = parent


def made_again(anchor, steps: tuple):
    """The view ``steps`` (of ``view_path``) make of ``anchor``, linked to it as those ops' views are."""
    result = anchor
    for method, args, kwargs, piece in steps:
        result = _LINKING[method](result, *args, **kwargs)
        result = result if piece is None else result[piece]
    return result


def overlapping_views(tensors: list) -> bool:
    """Whether two of ``tensors`` are views of one root, gone or not, that may share elements."""
    families: dict = {}
    for tensor in tensors:
        link = VIEW_LINKS.get(id(tensor))
        if link is not None and link() is tensor:
            families.setdefault(id(link.base), []).append(link)
    for links in families.values():
        for position, link in enumerate(links):
            storage, layout = _layout(link)
            if any(_overlapping(layout, _layout(other, storage)[1], storage) for other in links[position + 1 :]):
                return True
    return False


def share_storage(source, tensor) -> None:
    """``tensor``, made on ``source``'s value, shares ``source``'s storage from now on (``detach()``,
    ``.data``, ``nn.Parameter(w)``, ``p.data = w``). Of a view, it is a detached view of the view's
    root with the same positions, so that writes reach the root and the root's writes reach it; of
    any other tensor, it joins ``source``'s alias group (``aliases.py``)."""
    link = VIEW_LINKS.get(id(source)) if VIEW_LINKS else None
    if link is not None and link() is source:
        _link(tensor, link.base, True, link.parent, link.recipe)
        VIEW_LINKS[id(tensor)].positions = link.positions
    else:
        join_value_of(source, tensor)


def detached_alias(tensor):
    """``tensor.data`` and ``tensor.detach()``: a new tensor of the same value, without history,
    sharing ``tensor``'s storage."""
    twin = tensor._detached()
    share_storage(tensor, twin)
    return twin


def same_storage(tensor, other) -> bool:
    """Whether ``other`` already shares ``tensor``'s storage whole (``p.data = p.data``, and
    ``p.data -= x``, which Python runs as ``p.data = p.data.__isub__(x)``)."""
    if other is tensor:
        return True
    group = ALIAS_GROUPS.get(id(tensor)) if ALIAS_GROUPS else None
    if group is not None and ALIAS_GROUPS.get(id(other)) is group:
        return True
    link, other_link = VIEW_LINKS.get(id(tensor)), VIEW_LINKS.get(id(other))
    if link is None or other_link is None or link() is not tensor or other_link() is not other:
        return False
    return link.base is other_link.base and link.parent is other_link.parent and link.recipe is other_link.recipe


def is_contiguous(tensor) -> bool:
    """PyTorch's ``is_contiguous()``: whether the elements are row-major consecutive in the storage.
    A tensor that is no view owns its value whole; a view's root positions tell (``x.t()`` of a
    matrix, ``x[:, 0]`` are not; ``x[1]``, ``x[1:]`` are)."""
    link = VIEW_LINKS.get(id(tensor)) if VIEW_LINKS else None
    if link is None or link() is not tensor:
        return True
    storage, layout = _layout(link)
    if np.may_share_memory(layout, storage) or layout.size < 2:
        return bool(layout.flags.c_contiguous)  # numpy's C order ignores dims of size 1, as PyTorch's
    positions = link.root_positions().reshape(-1)  # a twin copied (``view`` of a non-contiguous view)
    return bool((np.diff(positions) == 1).all())


def _layout(link: _Link, storage: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(storage, layout)``: a bare byte array of the root's size (untouched), and the view's twins
    made from it, numpy views of it whose strides are PyTorch's, where no twin had to copy."""
    if storage is None:
        storage = np.empty(int(np.prod(link.base.shape)), np.uint8)
    return storage, link.made_from(storage.reshape(link.base.shape))


def _overlapping(layout: np.ndarray, other: np.ndarray, storage: np.ndarray) -> bool:
    """Whether two views' layouts may share elements (yes where a twin copied, or it is too hard to tell)."""
    if not (np.may_share_memory(layout, storage) and np.may_share_memory(other, storage)):
        return True
    try:
        # (numpy's stubs admit only 0 and -1; a positive bound is its documented int.)
        return bool(np.shares_memory(layout, other, max_work=100_000))  # type: ignore[arg-type]
    except np.exceptions.TooHardError:
        return True


def _base_link(tensor):
    """``(link, base)`` of the view ``tensor`` while its base lives, else ``(None, None)``."""
    link = VIEW_LINKS.get(id(tensor))
    base = None if link is None else link.live_base(tensor)
    return (link, base) if base is not None else (None, None)


# PyTorch's refusal of a write, with gradients recorded, through a view of a tensor that requires grad
# made while they were not: whether the write should be tracked is ambiguous (onnxnn took it as not
# tracked, zeroing the written elements' gradient).
NO_GRAD_VIEW_WRITE = (
    "A view was created in no_grad mode and is being modified inplace with grad mode enabled. Given that "
    "this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving both "
    "the view and the inplace either both inside the no_grad block (if you don't want the inplace to be "
    "tracked) or both outside (if you want the inplace to be tracked)."
)


def check_view_write(tensor) -> None:
    """Raises, before anything changes, where PyTorch refuses a write through the view ``tensor``."""
    link, base = _base_link(tensor)
    if link is not None and link.no_grad and not link.detached and MODE.grad.enabled:
        root = link.base()
        if root is not None and root._requires_grad:
            raise RuntimeError(NO_GRAD_VIEW_WRITE)
    while base is not None:
        if not link.detached and base._grad_fn is None and base._requires_grad and MODE.grad.enabled:
            raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
        link, base = _base_link(base)


def after_write(tensor) -> None:
    """``tensor`` was just rebound by a write: its base takes its values, its other views are remade."""
    link = VIEW_LINKS.get(id(tensor))
    if link is not None and link() is tensor:
        _written_through(link, tensor)
    refresh_views(tensor)


def _written_through(link: _Link, tensor) -> None:
    """The write of the view ``tensor`` (of ``link``) reaches its root, or its family if the root is gone."""
    base = link.base()
    if base is None:
        _write_family(link, tensor)
    else:
        index = type(tensor)._from_array(link.root_positions().reshape(-1), None, base._value.device)
        _STATE.writers.append(id(tensor))
        try:
            if link.detached:  # through ``.data``: the value changes, the base's history stays
                with set_grad_enabled(False):
                    written = _scattered(type(base)._from_value(base._value), index, tensor)
                base._value = written._value
                hold(base._value, base)
                base._written()
            else:
                base._assign(_scattered(base._alias(), index, tensor))  # its other views, its version
        finally:
            _STATE.writers.pop()


def _scattered(base, index, view):
    """``base`` with ``view``'s values at the flat positions ``index``."""
    return base.reshape(-1).scatter(0, index, view.reshape(-1)).reshape(base._value.shape)


def _write_family(link: _Link, tensor) -> None:
    """A write through the view ``tensor`` whose root is gone (collected, given new storage or a new
    shape): the root's other live views take its values where they overlap, as views of one storage."""
    family = []
    layouts: tuple[np.ndarray, np.ndarray] | None = None
    for key, other in list(link.base.links.items()):
        view = other()
        if view is not None and key != link.key and key not in _STATE.writers and VIEW_LINKS.get(key) is other:
            # Told from the layouts' strides, not from positions: ``q, k, v = qkv.chunk(3)`` of a
            # temporary, then ``q.mul_(scale)``, costs no pass over qkv's elements.
            storage, written = layouts = layouts or _layout(link)
            if _overlapping(written, _layout(other, storage)[1], storage):
                family.append((other, view))
    if not family:  # (the usual case: a forward's view of a temporary, written in place)
        return
    written = link.root_positions().reshape(-1)
    place = np.full(int(np.prod(link.base.shape)), -1, np.int64)
    place[written] = np.arange(written.size)
    device = tensor._value.device
    _STATE.writers.append(id(tensor))
    try:
        for other, view in family:
            taken = place[other.root_positions()]
            overlap = taken >= 0
            if not overlap.any():
                continue
            with set_grad_enabled(not other.detached and (view._requires_grad or MODE.grad.enabled)):
                flat = tensor.reshape(-1)
                index = type(tensor)._from_array(np.where(overlap, taken, 0).reshape(-1), None, device)
                mask = type(tensor)._from_array(overlap, dtypes.bool, device)
                own = type(tensor)._from_value(view._value, view._grad_fn, view._output_nr)
                _rebound(view, other, flat.gather(0, index).reshape(view._value.shape).where(mask, own))
            refresh_views(view)
    finally:
        _STATE.writers.pop()


def _rebound(view, link: _Link, remade) -> None:
    """``view`` takes the value ``remade`` its root's write gave it; a detached one (``.data``,
    ``detach()``, a Parameter made over a view) keeps its own autograd state, as PyTorch's."""
    view._value = remade._value
    hold(view._value, view)
    if not link.detached:
        view._grad_fn, view._output_nr = remade._grad_fn, remade._output_nr
        view._requires_grad = remade._requires_grad
    view._bump_version()  # PyTorch's views share their base's version


def refresh_views(tensor) -> None:
    """Makes the live views of ``tensor`` (but the ones writing through it) again from its new value."""
    entry = VIEWS_OF.get(id(tensor))
    if entry is None or entry() is not tensor:
        return
    for key, view_link in list(entry.links.items()):
        view = view_link()
        if view is None or key in _STATE.writers or VIEW_LINKS.get(key) is not view_link:
            continue
        _STATE.making += 1
        try:
            # A view that carried gradient keeps carrying it from the new base, as PyTorch's does.
            with set_grad_enabled(not view_link.detached and (view._requires_grad or MODE.grad.enabled)):
                remade = view_link.remake(tensor)
        finally:
            _STATE.making -= 1
        _rebound(view, view_link, remade)


def view_function(name: str, function: Callable, tensor_class: type) -> Callable:
    """The top-level ``function`` of the view method ``name``, returning the method's linked views, as
    PyTorch's function and method forms make the same view (``torch.select(x, 0, 1).fill_(0)`` writes x)."""

    def function_view(*args, **kwargs):
        if args:
            input, rest = args[0], args[1:]
        elif "input" in kwargs:
            input, rest = kwargs.pop("input"), ()
        else:
            return function(*args, **kwargs)  # its own error for the missing argument
        if not isinstance(input, tensor_class):
            return function(input, *rest, **kwargs)
        return getattr(input, name)(*rest, **kwargs)

    function_view.__name__ = function_view.__qualname__ = getattr(function, "__name__", name)
    function_view.__doc__ = function.__doc__
    function_view.__wrapped__ = function  # type: ignore[attr-defined]  # inspect.signature reads it
    return function_view


def install_view_ops(tensor_class) -> None:
    """Makes each method (or property) of ``VIEW_OPS`` on ``tensor_class`` return linked views."""
    for name in VIEW_OPS:
        attribute = inspect.getattr_static(tensor_class, name)
        if isinstance(attribute, property) and attribute.fget is not None:
            setattr(tensor_class, name, property(viewing(name, attribute.fget), doc=attribute.__doc__))
        else:
            setattr(tensor_class, name, viewing(name, attribute))

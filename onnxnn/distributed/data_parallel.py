"""``DistributedDataParallel``: one model replica per rank, gradients averaged with bucketed all-reduces.

PyTorch's names and semantics: the wrapped module is ``self.module`` (so ``state_dict`` keys carry the
``module.`` prefix), parameters and buffers are broadcast from rank 0 when the model is wrapped, and
every backward of a forward run through the wrapper averages the parameters' gradients over the ranks.

How the reduction overlaps the backward in onnxnn. Parameters are put into buckets of about
``bucket_cap_mb`` megabytes, in reverse registration order (the order a backward usually reaches
them). A gradient hook on every parameter copies its accumulated gradient into its bucket's flat
buffer; when all of a bucket's gradients are in, an ``MPI_Iallreduce`` of the bucket starts at once,
nonblocking, while the backward engine goes on with the earlier layers. onnxnn records lazily, so the
hook realizes the gradient it receives: the part of the backward that produces it is computed then,
and the engine computes the rest while the bucket's all-reduce is in flight. When the last
parameter's gradient is in, the wrapper waits for every bucket and writes the averages into ``.grad``.
"""

from __future__ import annotations

import contextlib
import functools
import time
import warnings

import numpy as np
from mpi4py import MPI

from ..nn.modules.module import Module
from ..runtime import internal
from ..runtime.grad_mode import is_grad_enabled
from ..runtime.tensor import Tensor
from .collectives import Work, _array, _bytes, _write
from .process_group import ProcessGroup, _group_or_default

__all__ = ["DistributedDataParallel"]

_MEGABYTE = 1024 * 1024
# PyTorch 2.13's FutureWarning for broadcast_buffers, alone or with forward_sync_buffers.
_BROADCAST_BUFFERS_DEPRECATED = {
    False: "`broadcast_buffers` is deprecated. Use `forward_sync_buffers` instead. IMPORTANT: unlike "
    "`broadcast_buffers=False`, `forward_sync_buffers=False` still syncs buffers at init. If you rely on buffers "
    "NOT being synced at init (e.g. rank-local buffers), keep using `broadcast_buffers=False` until "
    "`init_sync_buffers` is available.",
    True: "Both `broadcast_buffers` and `forward_sync_buffers` were specified. `broadcast_buffers` is deprecated "
    "and its value is ignored when `forward_sync_buffers` is provided.",
}


class _Bucket:
    """A run of parameters of one dtype whose gradients are all-reduced together."""

    def __init__(self, indices: list[int], sizes: list[int], dtype: np.dtype):
        self.indices = indices
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        # MPI reduces float32/float64 natively; half precision is reduced in float32.
        self.dtype = dtype if dtype in (np.dtype(np.float32), np.dtype(np.float64)) else np.dtype(np.float32)
        self.buffer = np.zeros(int(self.offsets[-1]), self.dtype)
        self.ready: set[int] = set()
        self.work: Work | None = None


def _tensors_in(value):
    if isinstance(value, Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors_in(item)


def _reachable_parameters(outputs) -> set[int]:
    """The ids of the leaf tensors a backward from ``outputs`` reaches (walking ``grad_fn`` edges)."""
    found, seen = set(), set()
    stack = []
    for tensor in _tensors_in(outputs):
        function = internal.grad_function(tensor)
        if function is None:
            found.add(id(tensor))
        else:
            stack.append(function)
    while stack:
        function = stack.pop()
        if function is None or id(function) in seen:
            continue
        seen.add(id(function))
        variable = getattr(function, "variable", None)
        if variable is not None:  # AccumulateGrad: a leaf
            found.add(id(variable))
        for edge in getattr(function, "_edges", ()) or ():
            if edge is not None and edge[0] is not None:
                stack.append(edge[0])
    return found


def _sum_to_shape(array: np.ndarray, shape: tuple) -> np.ndarray:
    while array.ndim > len(shape):
        array = array.sum(axis=0)
    axes = tuple(axis for axis, size in enumerate(shape) if size == 1 and array.shape[axis] != 1)
    return array.sum(axis=axes, keepdims=True) if axes else array


class DistributedDataParallel(Module):
    """Data parallelism across the ranks of a process group (PyTorch's ``DistributedDataParallel``).

    Args:
        module: the model; every rank wraps a replica (rank 0's parameters and buffers win at wrap time).
        device_ids, output_device, dim: accepted for PyTorch compatibility (one device per rank).
        broadcast_buffers: deprecated, as in PyTorch 2.13 (a FutureWarning): whether buffers are broadcast
            at wrap time and before forwards. None (the default) means True.
        process_group: the group to average over (default: the default group).
        bucket_cap_mb: the size of a gradient bucket in megabytes (default 25, as PyTorch).
        find_unused_parameters: walk each forward's output graph and count parameters it does not
            reach as ready, so a backward that leaves some parameters without gradient still finishes.
        gradient_as_bucket_view, static_graph: accepted; onnxnn copies gradients into the buckets.
        forward_sync_buffers: broadcast rank 0's buffers (BatchNorm statistics) before a forward that
            follows a synced training forward (default: ``broadcast_buffers``); buffers are always
            broadcast at wrap time when it is given. As PyTorch, a forward under ``no_grad`` or
            ``no_sync()`` leaves the next forward unsynced, so each rank keeps its own updates.

    Raises:
        RuntimeError: the module has no parameter that requires gradient.

    Example::

        >>> dist.init_process_group("mpi")
        >>> model = DistributedDataParallel(MLP())
        >>> loss_fn(model(x), y).backward()   # .grad is now the average over the ranks
    """

    def __init__(
        self,
        module: Module,
        device_ids=None,
        output_device=None,
        dim: int = 0,
        broadcast_buffers: bool | None = None,
        process_group: ProcessGroup | None = None,
        bucket_cap_mb: float | None = None,
        find_unused_parameters: bool = False,
        check_reduction: bool = False,
        gradient_as_bucket_view: bool = False,
        static_graph: bool = False,
        forward_sync_buffers: bool | None = None,
        **kwargs,
    ):
        super().__init__()
        self.module = module
        self.process_group = _group_or_default(process_group)
        if broadcast_buffers is not None:
            warnings.warn(_BROADCAST_BUFFERS_DEPRECATED[forward_sync_buffers is not None], FutureWarning, stacklevel=2)
        if forward_sync_buffers is not None:
            self.forward_sync_buffers, sync_buffers_at_wrap = forward_sync_buffers, True
        else:
            self.forward_sync_buffers = sync_buffers_at_wrap = broadcast_buffers is not False
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        # PyTorch's rule: buffers are synced before a forward only if the previous forward was a
        # training forward whose backward syncs (grad enabled, outside no_sync); the first forward syncs.
        self.require_forward_param_sync = True
        self.bucket_bytes_cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * _MEGABYTE)
        self._params = [p for p in module.parameters() if p.requires_grad]
        if not self._params:
            raise RuntimeError(
                "DistributedDataParallel is not needed when a module doesn't have any parameter "
                "that requires a gradient."
            )
        self._sync_module_states(sync_buffers_at_wrap)
        self._buckets, self._slot = self._build_buckets()
        self._expect_reduction = False
        self._unused: set[int] = set()
        # Seconds the backward spent blocked on gradient all-reduces (the communication the
        # backward did not hide), summed over backward passes; benchmarks read it.
        self.communication_wait_seconds = 0.0
        for index, parameter in enumerate(self._params):
            parameter.register_hook(functools.partial(self._on_gradient, index))

    # ------------------------------------------------------------------ wrap time
    def _broadcast_from_rank0(self, tensors: list) -> None:
        if not tensors or self.process_group.size() == 1:
            return
        arrays = [_array(t) for t in tensors]
        flat = np.concatenate([_bytes(a) for a in arrays]) if arrays else np.zeros(0, np.uint8)
        pg = self.process_group
        Work([pg.comm.Ibcast(flat, root=0)], pg, None, "DistributedDataParallel broadcast").wait()
        if pg.rank() != 0:
            start = 0
            for tensor, array in zip(tensors, arrays):
                _write(tensor, flat[start : start + array.nbytes].view(array.dtype))
                start += array.nbytes

    def _sync_module_states(self, buffers: bool) -> None:
        self._broadcast_from_rank0(list(self.module.parameters()) + (list(self.module.buffers()) if buffers else []))

    @property
    def broadcast_buffers(self) -> bool:
        return self.forward_sync_buffers

    @broadcast_buffers.setter
    def broadcast_buffers(self, value: bool) -> None:
        self.forward_sync_buffers = value

    def will_sync_module_buffers(self) -> bool:
        """Whether the next forward broadcasts rank 0's buffers first."""
        return (
            self.require_forward_param_sync and self.forward_sync_buffers and any(True for _ in self.module.buffers())
        )

    def _build_buckets(self):
        """Buckets in reverse parameter order, each of one dtype and at most ``bucket_bytes_cap`` bytes."""
        buckets, slot = [], {}
        current, sizes, nbytes, dtype = [], [], 0, None
        for index in reversed(range(len(self._params))):
            parameter = self._params[index]
            item_dtype = np.dtype(parameter.dtype.numpy_dtype)
            size = parameter.numel()
            if current and (item_dtype != dtype or nbytes + size * item_dtype.itemsize > self.bucket_bytes_cap):
                buckets.append(_Bucket(current, sizes, dtype))
                current, sizes, nbytes = [], [], 0
            current.append(index)
            sizes.append(size)
            nbytes += size * item_dtype.itemsize
            dtype = item_dtype
        buckets.append(_Bucket(current, sizes, dtype))
        for number, bucket in enumerate(buckets):
            for position, index in enumerate(bucket.indices):
                slot[index] = (number, int(bucket.offsets[position]), int(bucket.offsets[position + 1]))
        return buckets, slot

    # ------------------------------------------------------------------ forward
    @contextlib.contextmanager
    def no_sync(self):
        """Inside, backward passes accumulate gradients locally; the first backward after it averages them all."""
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous

    def forward(self, *inputs, **kwargs):
        if self._expect_reduction and any(bucket.ready for bucket in self._buckets):
            self._expect_reduction = False
            raise RuntimeError(
                "Expected to have finished reduction in the prior iteration before starting a new one. This error "
                "indicates that your module has parameters that were not used in producing loss. You can enable "
                "unused parameter detection by passing the keyword argument `find_unused_parameters=True` to "
                "`torch.nn.parallel.DistributedDataParallel`, and by making sure all `forward` function outputs "
                "participate in calculating loss."
            )
        if self.will_sync_module_buffers():
            self._broadcast_from_rank0(list(self.module.buffers()))
        output = self.module(*inputs, **kwargs)
        self._expect_reduction = is_grad_enabled() and self.require_backward_grad_sync
        self.require_forward_param_sync = self._expect_reduction
        if self._expect_reduction:
            self._prepare_for_backward(output)
        return output

    def _prepare_for_backward(self, output) -> None:
        for bucket in self._buckets:
            bucket.ready.clear()
            bucket.work = None
        self._next_bucket = 0
        self._unused = set()
        if self.find_unused_parameters:
            reached = _reachable_parameters(output)
            self._unused = {index for index, p in enumerate(self._params) if id(p) not in reached}
            for index in sorted(self._unused):
                parameter = self._params[index]
                grad = parameter.grad
                local = _array(grad) if grad is not None else np.zeros(tuple(parameter.shape))
                self._store(index, local)

    # ------------------------------------------------------------------ backward
    def _store(self, index: int, local: np.ndarray) -> None:
        number, start, stop = self._slot[index]
        bucket = self._buckets[number]
        if index in bucket.ready:
            raise RuntimeError(
                f"Expected to mark a variable ready only once. Parameter at index {index} "
                "has been marked as ready twice."
            )
        bucket.buffer[start:stop] = local.reshape(-1)
        bucket.ready.add(index)
        # Buckets start in index order on every rank, so the ranks' all-reduces pair up.
        pg = self.process_group
        while self._next_bucket < len(self._buckets):
            bucket = self._buckets[self._next_bucket]
            if len(bucket.ready) < len(bucket.indices):
                break
            request = pg.comm.Iallreduce(MPI.IN_PLACE, bucket.buffer, op=MPI.SUM)
            bucket.work = Work([request], pg, None, "DistributedDataParallel gradient all_reduce")
            self._next_bucket += 1

    def _on_gradient(self, index: int, grad: Tensor):
        if not self._expect_reduction:
            return None
        parameter = self._params[index]
        local = _sum_to_shape(_array(grad), tuple(parameter.shape))
        if parameter.grad is not None:  # what accumulation would make: earlier no_sync steps included
            local = _array(parameter.grad) + local
        self._store(index, local)
        if self._next_bucket < len(self._buckets):
            return None
        return self._finalize(index)

    def _finalize(self, current: int):
        """Waits for every bucket and writes the averaged gradients; returns the current parameter's."""
        self._expect_reduction = False
        pg = self.process_group
        started = time.perf_counter()
        for bucket in self._buckets:
            bucket.work.wait()
        self.communication_wait_seconds += time.perf_counter() - started
        for bucket in self._buckets:
            bucket.buffer /= bucket.dtype.type(pg.size())
        globally_unused = set()
        if self.find_unused_parameters:
            used = np.array([0 if index in self._unused else 1 for index in range(len(self._params))], np.int8)
            Work([pg.comm.Iallreduce(MPI.IN_PLACE, used, op=MPI.MAX)], pg, None, "find_unused_parameters").wait()
            globally_unused = {index for index in range(len(self._params)) if not used[index]}
        result = None
        for index, parameter in enumerate(self._params):
            if index in globally_unused:
                continue  # no rank computed a gradient: leave .grad as it is, as PyTorch does
            number, start, stop = self._slot[index]
            average = self._buckets[number].buffer[start:stop].reshape(tuple(parameter.shape))
            if index == current:
                # The engine accumulates what this hook returns into .grad right after it: start from None.
                parameter.grad = None
                result = internal.constant_tensor(
                    average.astype(parameter.dtype.numpy_dtype), parameter.dtype, parameter.device
                )
            elif parameter.grad is None:
                parameter.grad = internal.constant_tensor(
                    average.astype(parameter.dtype.numpy_dtype), parameter.dtype, parameter.device
                )
            else:
                _write(parameter.grad, average)
        for bucket in self._buckets:
            bucket.ready.clear()
        return result

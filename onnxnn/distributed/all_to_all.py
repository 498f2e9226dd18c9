"""All-to-all exchanges: every rank sends a part of its data to every rank, in ``torch.distributed``'s names.

Parts may differ in size (``all_to_all_single``'s split sizes, ``all_to_all``'s tensors), so both run as
one ``MPI_Ialltoallv`` on the bytes: any dtype travels, and the receivers rebuild their tensors.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from ..runtime.tensor import Tensor
from .collectives import Work, _array, _bytes, _check_tensor, _check_tensor_list, _run, _same_dtype, _write
from .process_group import _group_or_default, _not_in_group

__all__ = ["all_to_all", "all_to_all_single"]


def all_to_all(output_tensor_list: list, input_tensor_list: list, group=None, async_op: bool = False):
    """Sends ``input_tensor_list[r]`` to rank ``r``, which receives it in its ``output_tensor_list[this rank]``."""
    if _not_in_group(group, "all_to_all"):
        return None
    _check_tensor_list(output_tensor_list, "output_tensor_list")
    _check_tensor_list(input_tensor_list, "input_tensor_list")
    _same_dtype([*output_tensor_list, *input_tensor_list])
    pg = _group_or_default(group)
    for name, tensors in (("input", input_tensor_list), ("output", output_tensor_list)):
        if len(tensors) != pg.size():
            raise RuntimeError(
                f"ProcessGroupMPI::alltoall: {name} tensor list size {len(tensors)} "
                f"does not match world size {pg.size()}"
            )
    sources = [_array(item) for item in input_tensor_list]
    send = np.concatenate([_bytes(item) for item in sources]) if sources else np.zeros(0, np.uint8)
    receive_sizes = [item.numel() * item.element_size() for item in output_tensor_list]
    received = np.empty(sum(receive_sizes), np.uint8)
    request = pg.comm.Ialltoallv(
        [send, ([item.nbytes for item in sources], _offsets([item.nbytes for item in sources])), MPI.BYTE],
        [received, (receive_sizes, _offsets(receive_sizes)), MPI.BYTE],
    )

    def finish(_):
        for item, start, size in zip(output_tensor_list, _offsets(receive_sizes), receive_sizes):
            _write(item, received[start : start + size].view(item.dtype.numpy_dtype))

    return _run(Work([request], pg, finish, "all_to_all", list(output_tensor_list)), async_op)


def all_to_all_single(
    output: Tensor,
    input: Tensor,
    output_split_sizes: list[int] | None = None,
    input_split_sizes: list[int] | None = None,
    group=None,
    async_op: bool = False,
):
    """Splits ``input`` along dim 0 (equally, or by ``input_split_sizes``) and sends split ``r`` to rank ``r``;
    ``output`` receives the ranks' splits concatenated in rank order (sized by ``output_split_sizes``)."""
    if _not_in_group(group, "all_to_all_single"):
        return None
    _check_tensor(output, "output")
    _check_tensor(input, "input")
    _same_dtype([output, input])
    pg = _group_or_default(group)
    send_rows = _split_sizes(input_split_sizes, input, pg.size())
    receive_rows = _split_sizes(output_split_sizes, output, pg.size())
    send_sizes = [rows * _row_bytes(input) for rows in send_rows]
    receive_sizes = [rows * _row_bytes(output) for rows in receive_rows]
    send = _bytes(_array(input))
    received = np.empty(output.numel() * output.element_size(), np.uint8)
    request = pg.comm.Ialltoallv(
        [send, (send_sizes, _offsets(send_sizes)), MPI.BYTE],
        [received, (receive_sizes, _offsets(receive_sizes)), MPI.BYTE],
    )
    finish = lambda _: _write(output, received.view(output.dtype.numpy_dtype))  # noqa: E731
    return _run(Work([request], pg, finish, "all_to_all_single", [output]), async_op)


def _split_sizes(sizes: list[int] | None, tensor: Tensor, group_size: int) -> list[int]:
    """Rows of dim 0 per rank: ``sizes``, or equal splits; the checks are PyTorch's."""
    rows = tensor.shape[0] if tensor.dim() > 0 else 1
    if not sizes:
        if rows % group_size != 0:
            raise RuntimeError("Tensor's dim 0 does not divide equally across group size")
        return [rows // group_size] * group_size
    if len(sizes) != group_size:
        raise RuntimeError("Number of tensor splits not equal to group size")
    if sum(sizes) != rows:
        raise RuntimeError("Split sizes doesn't match total dim 0 size")
    return [int(size) for size in sizes]


def _row_bytes(tensor: Tensor) -> int:
    rows = tensor.shape[0] if tensor.dim() > 0 else 1
    return tensor.numel() * tensor.element_size() // rows if rows else 0


def _offsets(sizes: list[int]) -> list[int]:
    return [int(offset) for offset in np.concatenate([[0], np.cumsum(sizes)[:-1]])] if sizes else []

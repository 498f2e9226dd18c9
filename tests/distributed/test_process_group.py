"""onnxnn.distributed in this process (a world of one rank): bad input raises PyTorch's errors at the call."""

from __future__ import annotations

import pytest

pytest.importorskip("mpi4py")  # the ``distributed`` extra, part of ``test``

import onnxnn  # noqa: E402
import onnxnn.distributed as dist  # noqa: E402
from onnxnn import nn  # noqa: E402


@pytest.fixture
def world():
    dist.init_process_group("mpi")
    yield
    dist.destroy_process_group()


def test_queries_before_init_raise():
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        dist.get_rank()
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        dist.all_reduce(onnxnn.ones(2))


def test_only_the_mpi_backend():
    with pytest.raises(ValueError, match="Invalid backend: 'nccl'"):
        dist.init_process_group("nccl")
    assert not dist.is_initialized()


def test_launcher_environment_must_agree_with_mpi(monkeypatch):
    monkeypatch.setenv("RANK", "3")
    with pytest.raises(ValueError, match="RANK=3 disagrees with MPI's rank 0"):
        dist.init_process_group("mpi")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    dist.init_process_group("mpi")  # torchrun-style variables that agree are fine
    dist.destroy_process_group()


def test_world_of_one(world):
    assert (dist.get_rank(), dist.get_world_size(), dist.is_initialized()) == (0, 1, True)
    with pytest.raises(RuntimeError, match="trying to initialize the default process group twice!"):
        dist.init_process_group("mpi")
    t = onnxnn.tensor([1.0, 2.0])
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    assert t.tolist() == [1.0, 2.0]
    with pytest.raises(TypeError, match="Expected parameter `tensor` of type torch.Tensor"):
        dist.all_reduce([1.0, 2.0])
    with pytest.raises(ValueError, match="output tensor size must be equal to world_size times input tensor size"):
        dist.all_gather_into_tensor(onnxnn.zeros(3), t)
    with pytest.raises(ValueError, match="Argument ``gather_list`` must be specified on destination rank."):
        dist.gather(t, None, dst=0)


# Misuse in a world of one: PyTorch's (gloo's) exception type and message, checked before any communication.
_MISUSE = [
    ("op name", lambda: dist.all_reduce(onnxnn.ones(1), op="sum"), TypeError, "Invalid reduce operation"),  # type: ignore[arg-type]
    (
        "bool average",
        lambda: dist.all_reduce(onnxnn.tensor([True]), op=dist.ReduceOp.AVG),
        RuntimeError,
        "result type Float can't be cast to the desired output type Bool",
    ),
    (
        "float bitwise",
        lambda: dist.all_reduce(onnxnn.ones(1), op=dist.ReduceOp.BAND),
        RuntimeError,
        "Cannot use ReduceOp.BAND with non-integral dtype",
    ),
    ("root out of range", lambda: dist.broadcast(onnxnn.ones(1), src=4), RuntimeError, "invalid root rank: 4"),
    ("negative root", lambda: dist.reduce(onnxnn.ones(1), dst=-1), RuntimeError, "invalid root rank: -1"),
    (
        "all_gather list",
        lambda: dist.all_gather([onnxnn.zeros(1)] * 2, onnxnn.ones(1)),
        RuntimeError,
        "invalid output tensor list size 2",
    ),
    (
        "all_gather shape",
        lambda: dist.all_gather([onnxnn.zeros(2)], onnxnn.ones(1)),
        RuntimeError,
        "invalid output tensor list at index 0",
    ),
    (
        "all_gather_into_tensor dtype",
        lambda: dist.all_gather_into_tensor(onnxnn.zeros(1), onnxnn.ones(1, dtype=onnxnn.int64)),
        RuntimeError,
        "output tensor must have the same type as input tensor",
    ),
    (
        "scatter shape",
        lambda: dist.scatter(onnxnn.zeros(2), [onnxnn.zeros(3)], src=0),
        RuntimeError,
        r"invalid tensor size at index 0 \(expected \(2,\), got \(3,\)\)",
    ),
    (
        "reduce_scatter list",
        lambda: dist.reduce_scatter(onnxnn.zeros(2), [onnxnn.zeros(2)] * 2),
        RuntimeError,
        "invalid input tensor list size, must be world size",
    ),
    (
        "reduce_scatter dtype",
        lambda: dist.reduce_scatter(onnxnn.zeros(2), [onnxnn.zeros(2, dtype=onnxnn.int64)]),
        ValueError,
        "Invalid usage of tensors with different dtypes",
    ),
    (
        "all_to_all list",
        lambda: dist.all_to_all([onnxnn.zeros(1)], [onnxnn.zeros(1)] * 2),
        RuntimeError,
        "alltoall: input tensor list size 2 does not match world size 1",
    ),
    (
        "all_to_all_single splits",
        lambda: dist.all_to_all_single(onnxnn.zeros(3), onnxnn.zeros(3), [1, 2], [3]),
        RuntimeError,
        "Number of tensor splits not equal to group size",
    ),
    (
        "all_to_all_single split sum",
        lambda: dist.all_to_all_single(onnxnn.zeros(3), onnxnn.zeros(3), [3], [2]),
        RuntimeError,
        "Split sizes doesn't match total dim 0 size",
    ),
    (
        "all_to_all_single dtype",
        lambda: dist.all_to_all_single(onnxnn.zeros(2), onnxnn.zeros(2, dtype=onnxnn.int64)),
        ValueError,
        "Invalid usage of tensors with different dtypes",
    ),
    (
        "gather_object list",
        lambda: dist.gather_object(1, None, dst=0),
        ValueError,
        "Argument ``gather_list`` must be specified on destination rank.",
    ),
    (
        "scatter_object_list output",
        lambda: dist.scatter_object_list([], [1]),
        ValueError,
        "Expected argument scatter_object_output_list to be a list of size at least 1.",
    ),
    (
        "scatter_object_list input",
        lambda: dist.scatter_object_list([None], None),
        ValueError,
        "source rank must provide non-None scatter_object_input_list",
    ),
    ("barrier timeout", lambda: dist.barrier(timeout=5), TypeError, "timeout must be a datetime.timedelta"),  # type: ignore[arg-type]
    (
        "reduce_scatter_tensor result",
        lambda: dist.reduce_scatter_tensor(onnxnn.zeros(1), onnxnn.ones(1), async_op=True).result(),
        RuntimeError,
        r"result\(\) not implemented.",
    ),
    (
        "group rank of None",
        lambda: dist.get_group_rank(None, 0),  # type: ignore[arg-type]
        ValueError,
        "Group None is not registered, please create group with torch.distributed.new_group API",
    ),
    (
        "global rank of None",
        lambda: dist.get_global_rank(None, 0),  # type: ignore[arg-type]
        ValueError,
        "Group None is not registered, please create group with torch.distributed.new_group API",
    ),
]


@pytest.mark.parametrize(
    ("call", "error", "message"), [case[1:] for case in _MISUSE], ids=[case[0] for case in _MISUSE]
)
def test_misuse_raises_pytorchs_errors(world, call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_broadcast_buffers_is_deprecated_as_in_pytorch(world):
    with pytest.warns(FutureWarning, match="`broadcast_buffers` is deprecated. Use `forward_sync_buffers` instead."):
        wrapped = dist.DistributedDataParallel(nn.Linear(2, 2), broadcast_buffers=False)
    assert (wrapped.broadcast_buffers, wrapped.forward_sync_buffers) == (False, False)
    wrapped.broadcast_buffers = True  # PyTorch's property: the same setting
    assert wrapped.forward_sync_buffers is True


def test_ddp_needs_parameters_that_require_grad(world):
    frozen = nn.Linear(2, 2).requires_grad_(False)
    with pytest.raises(RuntimeError, match="DistributedDataParallel is not needed when a module doesn't have any"):
        dist.DistributedDataParallel(frozen)


def test_ddp_of_one_rank_gives_the_plain_gradients(world):
    onnxnn.manual_seed(0)
    model = nn.Linear(3, 2)
    wrapped = dist.DistributedDataParallel(model)
    x = onnxnn.randn(4, 3)
    wrapped(x).square().sum().backward()
    expected = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    model(x).square().sum().backward()  # the module alone: no hooks reduce
    for got, p in zip(expected, model.parameters()):
        assert (got == p.grad.numpy()).all()
    assert list(wrapped.state_dict()) == ["module.weight", "module.bias"]

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
    with pytest.raises(ValueError, match="Invalid reduce operation"):
        dist.all_reduce(t, op="sum")
    with pytest.raises(ValueError, match="output tensor size must be equal to world_size times input tensor size"):
        dist.all_gather_into_tensor(onnxnn.zeros(3), t)
    with pytest.raises(ValueError, match="Argument ``gather_list`` must be specified on destination rank."):
        dist.gather(t, None, dst=0)
    with pytest.raises(ValueError, match="Global rank 4 is not part of group"):
        dist.broadcast(t, src=4)


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

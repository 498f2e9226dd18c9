"""nn.DataParallel: a call of the wrapped module (onnxnn does not scatter), state_dict keys under
``module.`` as PyTorch's, and the one-device path (module and inputs moved to ``cuda:0``) on "cuda"
mapped onto the CPU's provider, as tests/runtime/test_devices.py does.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.ir import device_arrays
from onnxnn.nn import parallel

EXECUTORS = ["onnxruntime", "kernels"]
RNG = np.random.default_rng(31)


class TwoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 2)

    def forward(self, x, y, *, scale=1.0):
        return {"sum": self.linear(x) + y, "scaled": scale * y}


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(parallel, "cuda_is_available", lambda: False)


@pytest.fixture
def cuda_on_cpu(monkeypatch):
    monkeypatch.setitem(device_arrays.ONNXRUNTIME_PLACEMENT, "cuda", ("CPUExecutionProvider", "cpu"))
    onnxnn.clear_caches()  # sessions are cached by device
    yield
    onnxnn.clear_caches()


def _linear_numpy(layer, x):
    return x @ layer.weight.detach().cpu().numpy().T + layer.bias.detach().cpu().numpy()


@pytest.mark.parametrize("executor", EXECUTORS)
def test_without_cuda_it_calls_the_module_on_the_whole_batch(no_cuda, executor):
    inner = nn.Linear(3, 2).double()
    model = nn.DataParallel(inner)
    assert model.module is inner and model.device_ids == [] and model.dim == 0
    x = RNG.standard_normal((5, 3))
    with onnxnn.set_executor(executor):
        output = model(onnxnn.tensor(x))
        output.sum().backward()
    np.testing.assert_allclose(output.detach().numpy(), _linear_numpy(inner, x), rtol=1e-13)
    np.testing.assert_allclose(inner.weight.grad.numpy(), np.tile(x.sum(0), (2, 1)), rtol=1e-13)


def test_positional_and_keyword_inputs_and_structured_outputs_pass_through(no_cuda):
    inner = TwoInputs().double()
    model = nn.DataParallel(inner, device_ids=[0, 1], output_device=1, dim=1)  # no CUDA: ids ignored
    x, y = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 2))
    output = model(onnxnn.tensor(x), onnxnn.tensor(y), scale=2.0)
    np.testing.assert_allclose(output["sum"].detach().numpy(), _linear_numpy(inner.linear, x) + y, rtol=1e-13)
    np.testing.assert_array_equal(output["scaled"].numpy(), 2.0 * y)
    assert model.dim == 1


def test_state_dict_keys_are_prefixed_with_module_and_round_trip(no_cuda):
    source = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    model = nn.DataParallel(source)
    assert list(model.state_dict()) == ["module." + key for key in source.state_dict()]
    plain = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    wrapped_again = nn.DataParallel(plain)
    wrapped_again.load_state_dict(model.state_dict())
    for key, value in source.state_dict().items():
        np.testing.assert_array_equal(plain.state_dict()[key].numpy(), value.numpy())
    prefix_stripped = OrderedDict((key[len("module.") :], value) for key, value in model.state_dict().items())
    nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)).load_state_dict(prefix_stripped)


def test_one_cuda_device_gets_the_module_and_the_inputs(cuda_on_cpu):
    inner = TwoInputs()
    model = nn.DataParallel(inner)
    cuda = onnxnn.device("cuda", 0)
    assert model.device_ids == [0] and model.output_device == 0
    assert all(p.device == cuda for p in inner.parameters())
    x, y = RNG.standard_normal((4, 3)).astype(np.float32), RNG.standard_normal((4, 2)).astype(np.float32)
    output = model(onnxnn.tensor(x), y=onnxnn.tensor(y))
    assert output["sum"].device == cuda
    expected = _linear_numpy(inner.linear, x.astype(np.float64)) + y
    np.testing.assert_allclose(output["sum"].cpu().detach().numpy(), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device_ids", [["cuda:0"], [onnxnn.device("cuda", 0)]], ids=["string", "device"])
def test_device_ids_may_be_strings_or_devices(cuda_on_cpu, device_ids):
    assert nn.DataParallel(nn.Linear(2, 2), device_ids=device_ids).device_ids == [0]


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda: nn.DataParallel(nn.Linear(2, 2), device_ids=[1]), AssertionError, "Invalid device id"),
        (lambda: nn.DataParallel(nn.Linear(2, 2), device_ids=["cpu"]), ValueError, "Expected a non cpu device"),
        (
            lambda: nn.DataParallel(nn.Linear(2, 2), device_ids=[0, 0])(onnxnn.ones(1, 2)),
            RuntimeError,
            r"module must have its parameters and buffers on device cuda:0 \(device_ids\[0\]\) "
            "but found one of them on device: cpu",
        ),
    ],
    ids=["no_such_device", "cpu", "module_elsewhere"],
)
def test_device_errors(cuda_on_cpu, make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_torch_data_parallel_state_dict_loads(no_cuda):
    torch = pytest.importorskip("torch")
    torch_model = torch.nn.DataParallel(
        torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    )
    model = nn.DataParallel(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)))
    assert list(model.state_dict()) == list(torch_model.state_dict())
    # Where PyTorch sees a GPU, its DataParallel moves the module there: its values are read through cpu().
    model.load_state_dict({key: onnxnn.tensor(value.cpu().numpy()) for key, value in torch_model.state_dict().items()})
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    expected = torch_model(torch.tensor(x)).detach().cpu().numpy()
    np.testing.assert_allclose(model(onnxnn.tensor(x)).detach().numpy(), expected, rtol=1e-5, atol=1e-6)

"""Tensors and modules on a GPU: values stay in the device's memory between graphs, and every result
equals the CPU's (or numpy's) to the rounding the arithmetic allows.

Each case runs twice: on "cuda" for real where onnxruntime's CUDA provider loads (skipped with the
reason elsewhere), and on "cuda" mapped onto the CPU's provider and OrtValues (``cuda-on-cpu``), which
runs the same device path (io_binding, device arrays, uploads, host copies) on any machine.
"""

from __future__ import annotations

import re
import io

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxnn
from onnxnn import nn
from onnxnn.ir import device_arrays
from onnxnn.runtime import device_sessions
from onnxnn.runtime.device_sessions import DeviceBinder
from onnxnn.runtime.fastpath import cuda_graphs
from onnxnn.runtime.realization import realize
from onnxnn.runtime.sessions import session_for
from tests.tolerances import (
    TRANSCENDENTAL_ULPS,
    accumulation_bound,
    assert_close_to_matmul,
    assert_within,
    conv_bound,
    sum_bound,
    ulps,
)

REAL_CUDA = onnxnn.cuda.is_available()
NO_CUDA_REASON = "needs onnxruntime's CUDA provider and a GPU (onnxnn.cuda.is_available() is False)"


@pytest.fixture(
    params=[
        "cuda-on-cpu",
        pytest.param("cuda", marks=pytest.mark.skipif(not REAL_CUDA, reason=NO_CUDA_REASON)),
    ]
)
def cuda(request, monkeypatch):
    """The device "cuda", real or mapped onto the CPU's provider; yields the OrtValue device name."""
    if request.param == "cuda-on-cpu":
        monkeypatch.setitem(device_arrays.ONNXRUNTIME_PLACEMENT, "cuda", ("CPUExecutionProvider", "cpu"))
    onnxnn.clear_caches()  # sessions are cached by device: the two forms of "cuda" must not share them
    yield device_arrays.ONNXRUNTIME_PLACEMENT["cuda"][1]
    onnxnn.clear_caches()


def _device_array(tensor):
    """The tensor's computed array as it is held, without a copy to the host."""
    realize([tensor._value])
    return tensor._value.data


def test_results_stay_in_the_devices_memory(cuda):
    x = onnxnn.randn(8, 16, device="cuda")
    y = (x @ x.T).relu()
    held = _device_array(y)
    assert type(held).__name__ == "OrtValue" and held.device_name().lower() == cuda
    assert y.device == onnxnn.device("cuda", 0)
    z = y.sum(1)  # the next graph reads y where it lies
    assert type(_device_array(z)).__name__ == "OrtValue"
    host = x.cpu().numpy()
    assert_close_to_matmul(y.cpu().numpy(), host, host.T, then=lambda v: np.maximum(v, 0))


def test_a_value_is_copied_to_the_device_once(cuda):
    source = np.arange(12, dtype=np.float32).reshape(3, 4)
    moved = onnxnn.tensor(source).to("cuda")
    created = onnxnn.tensor(source, device="cuda")
    assert type(moved._value.data).__name__ == "OrtValue"  # to() copies at once, as PyTorch's
    for x in (moved, created):
        _device_array(x * 2)
        held = x._value.data
        assert type(held).__name__ == "OrtValue"  # the first run uploaded it; later runs feed it as it is
        _device_array(x + 1)
        assert x._value.data is held
        np.testing.assert_array_equal(x.cpu().numpy(), source)


OPS = {
    "add": (lambda a, b: a + b, lambda a, b: a + b, lambda a, b, r: 0),
    "mul": (lambda a, b: a * b, lambda a, b: a * b, lambda a, b, r: 0),
    "relu": (lambda a, b: a.relu(), lambda a, b: np.maximum(a, 0), lambda a, b, r: 0),
    "exp": (lambda a, b: a.exp(), np.exp, lambda a, b, r: ulps(r)),
    "sum": (lambda a, b: a.sum(1), lambda a, b: a.sum(1), lambda a, b, r: sum_bound(a, 1)),
    "transpose_matmul": (lambda a, b: a.T @ b, lambda a, b: a.T @ b, None),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_ops_on_the_device_match_numpy(cuda, name):
    function, formula, bound = OPS[name]
    a = np.random.default_rng(1).standard_normal((6, 5)).astype(np.float32)
    b = np.random.default_rng(2).standard_normal((6, 5)).astype(np.float32)
    result = function(onnxnn.tensor(a, device="cuda"), onnxnn.tensor(b, device="cuda"))
    assert result.device.type == "cuda"
    actual = result.cpu().numpy()
    if bound is None:
        assert_close_to_matmul(actual, a.T, b)
    else:
        expected = formula(a.astype(np.float64), b.astype(np.float64))
        assert_within(actual, expected, bound(a, b, expected) + ulps(expected, 1))


def test_convolution_and_its_gradients_on_the_device(cuda):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 9, 9)).astype(np.float32)
    conv = nn.Conv2d(3, 4, 3, padding=1)
    on_cpu = conv(onnxnn.tensor(x))
    on_cpu.sum().backward()
    cpu_grad = conv.weight.grad.numpy().copy()
    conv.zero_grad()
    conv.to("cuda")
    on_device = conv(onnxnn.tensor(x, device="cuda"))
    on_device.sum().backward()
    assert conv.weight.grad.device.type == "cuda"
    weight = conv.weight.detach().cpu().numpy()
    assert_within(
        on_device.detach().cpu().numpy(),
        on_cpu.detach().numpy(),
        conv_bound(x, weight, conv.bias.detach().cpu().numpy()),
    )
    # d sum / d w[o, c, i, j] sums x over the 2 * 9 * 9 output positions each tap meets
    assert_within(conv.weight.grad.cpu().numpy(), cpu_grad, accumulation_bound(np.abs(x).sum(), 2 * 9 * 9))


@pytest.mark.parametrize(
    "size,kernel,stride,padding,dilation",
    [(8, 3, 2, 1, 1), (9, 3, 2, 1, 1), (7, 2, 3, 0, 1), (10, 3, 1, 2, 2), (6, 1, 2, 0, 1), (5, 3, 3, 2, 1)],
)
def test_convolution_input_gradients_of_every_geometry(cuda, size, kernel, stride, padding, dilation):
    # On a GPU the input gradient is a ConvTranspose with equal pads at both ends and a Slice or Pad
    # (conv_gradients._scatter_windows_symmetric): the same values as the CPU's forms.
    rng = np.random.default_rng(size * 100 + kernel * 10 + stride)
    x = rng.standard_normal((2, 3, size, size)).astype(np.float32)
    w = rng.standard_normal((4, 3, kernel, kernel)).astype(np.float32)
    grads = []
    for device in ("cpu", "cuda"):
        tensor = onnxnn.tensor(x, device=device, requires_grad=True)
        out = nn.functional.conv2d(
            tensor, onnxnn.tensor(w, device=device), stride=stride, padding=padding, dilation=dilation
        )
        out.backward(onnxnn.tensor(np.cos(np.arange(out.numel(), dtype=np.float32)).reshape(out.shape), device=device))
        grads.append(tensor.grad.cpu().numpy())
    # each element sums at most 4 * kernel * kernel products |g| |w| with |g| <= 1
    assert_within(grads[1], grads[0], accumulation_bound(np.abs(w).sum(), 4 * kernel * kernel))


def test_a_module_moves_in_place_and_back(cuda):
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
    weight = model[0].weight
    before = {name: tensor.detach().numpy().copy() for name, tensor in model.state_dict().items()}
    assert model.to("cuda") is model
    assert model[0].weight is weight and weight.device.type == "cuda"  # the parameter's identity stays
    assert all(tensor.device.type == "cuda" for tensor in model.state_dict().values())
    model.cpu()
    for name, tensor in model.state_dict().items():
        np.testing.assert_array_equal(tensor.numpy(), before[name])


def test_mixing_devices_is_a_clear_error(cuda):
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*cpu"):
        onnxnn.ones(2, device="cuda") + onnxnn.ones(2)


def test_numpy_of_a_device_tensor_asks_for_cpu_first(cuda):
    x = onnxnn.ones(2, 2, device="cuda")
    with pytest.raises(TypeError, match=r"Use Tensor.cpu\(\)"):
        x.numpy()
    # Reads by the host copy, as PyTorch's synchronize and copy.
    assert x.sum().item() == 4.0 and x.tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert "device='cuda:0'" in repr(x)


def test_gradient_of_a_device_copy_returns_to_the_source_device(cuda):
    x = onnxnn.randn(3, 4, requires_grad=True)
    (x.to("cuda") * 3).sum().backward()
    assert x.grad.device.type == "cpu"
    np.testing.assert_array_equal(x.grad.numpy(), np.full((3, 4), 3, np.float32))


def _mlp():
    return nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 3))


def _convolutional():
    return nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3)
    )


def _train(device: str, optimizer_name: str, steps: int, build=_mlp, input_shape=(16, 10)) -> tuple[list, dict]:
    """``steps`` steps of ``build()`` in float64 on ``device``: each loss, then the state."""
    onnxnn.manual_seed(7)
    model = build().double().to(device)
    optimizer = {
        "SGD": lambda p: onnxnn.optim.SGD(p, lr=0.1, momentum=0.9),
        "Adam": lambda p: onnxnn.optim.Adam(p, lr=1e-2),
        "AdamW": lambda p: onnxnn.optim.AdamW(p, lr=1e-2),
    }[optimizer_name](model.parameters())
    rng = np.random.default_rng(0)
    inputs = onnxnn.tensor(rng.standard_normal(input_shape), device=device)
    targets = onnxnn.tensor(rng.standard_normal((input_shape[0], 3)), device=device)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        # (Mean squared error: onnxruntime's CUDA Softmax and LogSoftmax compute float64 to ~1e-8, not
        # to float64's rounding, so a cross entropy would measure them rather than onnxnn's device path.)
        loss = nn.functional.mse_loss(model(inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses, {name: tensor.detach().cpu().numpy() for name, tensor in model.state_dict().items()}


@pytest.mark.parametrize("optimizer_name", ["SGD", "Adam", "AdamW"])
def test_training_on_the_device_follows_the_cpu(cuda, optimizer_name):
    # float64: each step's sums have at most 32 terms (gamma(32) ~ 3.6e-15 relative); the optimizers'
    # updates are Lipschitz with constants near 1 over 8 steps, so 1e-10 bounds the drift with room.
    cpu_losses, cpu_state = _train("cpu", optimizer_name, 8)
    losses, state = _train("cuda", optimizer_name, 8)
    np.testing.assert_allclose(losses, cpu_losses, rtol=1e-10)
    assert losses[-1] < losses[0]
    for name, value in cpu_state.items():
        np.testing.assert_allclose(state[name], value, rtol=1e-10, atol=1e-12, err_msg=name)


def test_a_convolutional_training_step_on_the_device_follows_the_cpu(cuda):
    # Batch normalization's and the convolution gradients' lowerings read shapes in the graph; on
    # the device, the static graph gets them as constants (runtime/static_shapes.py). float64: the
    # statistics sum 8 * 6 * 6 = 288 terms (gamma(288) ~ 6.4e-14 relative), over 5 steps.
    cpu_losses, cpu_state = _train("cpu", "SGD", 5, _convolutional, (8, 2, 6, 6))
    losses, state = _train("cuda", "SGD", 5, _convolutional, (8, 2, 6, 6))
    np.testing.assert_allclose(losses, cpu_losses, rtol=1e-10)
    assert losses[-1] < losses[0]
    for name, value in cpu_state.items():
        np.testing.assert_allclose(state[name], value, rtol=1e-10, atol=1e-12, err_msg=name)


def test_compiled_inference_and_checkpoints_on_the_device(cuda):
    model = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 2)).eval()
    x = np.random.default_rng(4).standard_normal((3, 6)).astype(np.float32)
    expected = model(onnxnn.tensor(x)).detach().numpy()
    model.to("cuda")
    compiled = onnxnn.compile(model)
    for _ in range(3):  # later calls take the compiled fast path
        out = compiled(onnxnn.tensor(x, device="cuda"))
        assert out.device.type == "cuda"
        np.testing.assert_allclose(out.detach().cpu().numpy(), expected, rtol=1e-5, atol=1e-6)
    buffer = io.BytesIO()
    onnxnn.save(model.state_dict(), buffer)
    buffer.seek(0)
    restored = onnxnn.load(buffer, map_location="cpu")
    assert all(tensor.device.type == "cpu" for tensor in restored.values())
    np.testing.assert_array_equal(restored["0.weight"].numpy(), model[0].weight.detach().cpu().numpy())


def test_in_place_writes_through_views_on_the_device(cuda):
    weight = nn.Linear(3, 4).to("cuda").weight
    with onnxnn.no_grad():
        weight[1].fill_(2.0)
        weight[:, 0].zero_()
    host = weight.detach().cpu().numpy()
    np.testing.assert_array_equal(host[1, 1:], [2.0, 2.0])
    np.testing.assert_array_equal(host[:, 0], np.zeros(4, np.float32))


@pytest.mark.skipif(not REAL_CUDA, reason=NO_CUDA_REASON)
def test_kernels_executor_runs_on_cupy():
    cupy = pytest.importorskip("cupy", reason="the kernels executor on CUDA needs CuPy")
    a = np.random.default_rng(5).standard_normal((5, 7)).astype(np.float32)
    x = onnxnn.tensor(a, device="cuda")
    with onnxnn.set_executor("kernels"):
        y = (x.exp() * 2 + x).sum(0)
        held = _device_array(y)
    assert isinstance(held, cupy.ndarray)
    exp = np.exp(a.astype(np.float64))
    expected = (exp * 2 + a).sum(0)
    assert_within(y.cpu().numpy(), expected, sum_bound(exp * 2 + np.abs(a), 0, extra=2) + ulps(exp * 2).sum(0))
    z = (y * 3).sum()  # onnxruntime reads the CuPy array where it lies
    computed = y.cpu().numpy().astype(np.float64)
    assert_within(z.item(), computed.sum() * 3, sum_bound(np.abs(computed) * 3, extra=1))


@pytest.mark.skipif(not REAL_CUDA, reason=NO_CUDA_REASON)
def test_kernels_executor_trains_on_cupy_with_fused_elementwise_kernels():
    pytest.importorskip("cupy", reason="the kernels executor on CUDA needs CuPy")
    from onnxnn.kernels import executor as kernels_executor
    from onnxnn.kernels.cuda_fusion import FusedElementwise

    features = np.random.default_rng(6).standard_normal((8, 16))

    def trained(device):
        onnxnn.manual_seed(0)
        model = nn.Sequential(nn.Linear(16, 32), nn.GELU(approximate="tanh"), nn.Linear(32, 1), nn.Sigmoid())
        model = model.double().to(device)
        optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.5)
        with onnxnn.set_executor("kernels"):
            for _ in range(3):
                optimizer.zero_grad()
                loss = ((model(onnxnn.tensor(features, device=device)) - 0.5) ** 2).mean()
                loss.backward()
                optimizer.step()
        return [parameter.detach().cpu().numpy() for parameter in model.parameters()]

    kernels_executor.clear_cache()
    on_gpu = trained("cuda")
    fused = [
        step[0]
        for compiled in kernels_executor._cache.plans.values()
        if getattr(compiled, "xp", None) is not np
        for step in getattr(compiled, "steps", ())
        if isinstance(step[0], FusedElementwise)
    ]
    assert fused, "no fused kernel ran"
    # float64 through three steps: the GPU's transcendental functions differ from libm's by an ulp or two.
    for gpu, cpu in zip(on_gpu, trained("cpu")):
        np.testing.assert_allclose(gpu, cpu, rtol=1e-10, atol=1e-12)


@pytest.mark.skipif(not REAL_CUDA, reason=NO_CUDA_REASON)
def test_auto_runs_large_elementwise_plans_as_fused_kernels_on_the_gpu():
    cupy = pytest.importorskip("cupy", reason="generated kernels need CuPy")
    from onnxnn.runtime.fastpath import plan_cache

    shape = (plan_cache.GPU_FUSED_MIN_ELEMENTS // 1024, 1024)
    host = np.random.default_rng(8).standard_normal(shape).astype(np.float32)
    x = onnxnn.from_numpy(host).to("cuda")
    large = ((x * 0.5).tanh() + 1) * x
    assert isinstance(_device_array(large), cupy.ndarray)
    small_host = host[:8, :8].copy()
    small = onnxnn.from_numpy(small_host).to("cuda")
    for on_onnxruntime in (((small * 0.5).tanh() + 1) * small, (x.T * 0.5).tanh()):  # small; a Transpose
        assert type(_device_array(on_onnxruntime)).__name__ == "OrtValue"
    wide = host.astype(np.float64)
    hyperbolic = np.tanh(wide * 0.5)
    activation = hyperbolic + 1
    # tanh off by a few of its ulps (CUDA's), then the sum's and the product's roundings; near x = -5
    # the sum cancels, so tanh's ulps (of a value near 1) weigh, not the small sum's
    bound = np.abs(wide) * (ulps(hyperbolic, TRANSCENDENTAL_ULPS) + ulps(activation, 1)) + ulps(activation * wide, 1)
    assert_within(large.cpu().numpy(), activation * wide, bound)


def test_without_a_usable_gpu_the_error_names_what_is_missing():
    if REAL_CUDA:
        pytest.skip("a GPU is usable here")
    for attempt in (lambda: onnxnn.zeros(2, device="cuda"), lambda: onnxnn.ones(2).to("cuda")):
        with pytest.raises(RuntimeError, match="CUDA is not available: .+: .+") as raised:
            attempt()
        assert any(
            word in str(raised.value) for word in ("driver", "onnxruntime-gpu", "GPU", "CUDA's libraries", "cuDNN")
        )
    model = nn.Linear(2, 2)
    weight = model.weight
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        model.to("cuda")
    assert model.weight is weight and weight.device.type == "cpu"  # nothing changed


def _add_session(device):
    graph = helper.make_graph(
        [helper.make_node("Add", ["w", "x"], ["y"])],
        "add",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [3]) for name in ("w", "x")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return session_for(model, device)


def test_a_session_keeps_its_binding_while_its_weights_stay(cuda, monkeypatch):
    # The plain session's binding: on a GPU, its later runs would replay a CUDA graph instead.
    monkeypatch.setattr(cuda_graphs, "CAPTURE_AFTER_RUNS", 100)
    session = _add_session(onnxnn.device("cuda"))
    weight = device_arrays.to_ortvalue(np.array([1, 2, 3], np.float32), onnxnn.device("cuda"))
    bound = []
    original = DeviceBinder._bind
    monkeypatch.setattr(
        DeviceBinder,
        "_bind",
        lambda self, binding, name, data: bound.append(name) or original(self, binding, name, data),
    )
    results = []
    for step in range(4):
        batch = np.full(3, step, np.float32)
        (result,) = session([weight, batch])
        results.append(result)  # read at the end: a later run must not write into it
    # The first two runs bind both inputs; once the weight was fed twice, only the batch is bound again.
    assert bound == ["w", "x", "w", "x", "x", "x"] and session.binder.kept is not None
    for step, result in enumerate(results):
        np.testing.assert_array_equal(device_arrays.to_host(result), np.array([1, 2, 3], np.float32) + step)


def test_a_training_like_session_keeps_no_binding(cuda):
    session = _add_session(onnxnn.device("cuda"))
    for step in range(3):  # every input new each run, as a training step's parameters
        (result,) = session([np.full(3, step, np.float32), np.full(3, 1, np.float32) + step])
        np.testing.assert_array_equal(device_arrays.to_host(result), np.full(3, 2 * step + 1, np.float32))
    assert session.binder.kept is None


@pytest.mark.parametrize("make", [lambda: onnxnn.tensor(5).to("cuda"), lambda: onnxnn.tensor(5, device="cuda")])
def test_a_scalar_on_the_device_keeps_no_dimension(cuda, make):
    scalar = make()
    doubled = scalar * 2
    realize([doubled._value])
    assert device_arrays.shape_of(scalar._value.data) == () and device_arrays.shape_of(doubled._value.data) == ()
    assert doubled.tolist() == 10 and doubled.cpu().shape == ()
    norm = nn.BatchNorm1d(3).to("cuda")
    norm(onnxnn.randn(4, 3, device="cuda"))
    assert norm.num_batches_tracked.tolist() == 1 and norm.num_batches_tracked.cpu().numpy().shape == ()


def test_python_scalars_on_the_device_are_uploaded_once(cuda, monkeypatch):
    x = onnxnn.randn(4).to("cuda")  # copied now: the uploads counted below are the scalars
    uploads = []
    original = device_arrays.to_ortvalue
    monkeypatch.setattr(
        device_sessions, "to_ortvalue", lambda data, device: uploads.append(data.shape) or original(data, device)
    )
    results = [(x * 0.5 + step).cpu().numpy() for step in (1, 1, 2, 1)]
    assert uploads == [(), (), ()]  # 0.5, 1 and 2: each copied to the device once
    z = (x * -0.0).cpu().numpy()  # -0.0 is not the 0.0 of an earlier scalar
    np.testing.assert_array_equal(np.signbit(z), ~np.signbit(x.cpu().numpy()))
    host = x.cpu().numpy()
    for result, step in zip(results, (1, 1, 2, 1)):
        np.testing.assert_allclose(result, host * 0.5 + step, rtol=2**-23)


def _counted_replays(monkeypatch) -> list:
    """A list that gains an entry at each CUDA graph replay of a session made from now on."""
    onnxnn.clear_caches()  # an earlier test's sessions may have captured their graphs already
    replays: list = []
    original = cuda_graphs._Replay.__call__
    monkeypatch.setattr(
        cuda_graphs._Replay, "__call__", lambda self, arrays: replays.append(1) or original(self, arrays)
    )
    return replays


@pytest.mark.skipif(not REAL_CUDA, reason=NO_CUDA_REASON)
def test_compiled_calls_replay_a_cuda_graph(monkeypatch):
    replays = _counted_replays(monkeypatch)
    model = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 2)).eval()
    batches = [np.random.default_rng(seed).standard_normal((3, 6)).astype(np.float32) for seed in range(6)]
    expected = [model(onnxnn.tensor(x)).detach().numpy() for x in batches]
    model.to("cuda")
    compiled = onnxnn.compile(model)
    with onnxnn.no_grad():  # a compiled module's calls take their fast path in inference
        outputs = [compiled(onnxnn.tensor(x, device="cuda")) for x in batches]
    assert len(replays) >= 2  # the later calls replayed the graph
    for output, reference in zip(outputs, expected):  # read at the end: each call's result is its own
        np.testing.assert_allclose(output.detach().cpu().numpy(), reference, rtol=1e-5, atol=1e-6)
    replayed = len(replays)
    with onnxnn.no_grad():
        model[2].bias.add_(1.0)  # a new weight: copied into the graph's buffer at the next replay
        moved = [compiled(onnxnn.tensor(batches[0], device="cuda")).cpu().numpy() for _ in range(4)]
    assert len(replays) > replayed
    for result in moved:
        np.testing.assert_allclose(result, expected[0] + 1.0, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not REAL_CUDA, reason=NO_CUDA_REASON)
@pytest.mark.parametrize("optimizer_name", ["SGD", "Adam"])
def test_training_steps_replay_a_cuda_graph_and_follow_the_cpu(monkeypatch, optimizer_name):
    replays = _counted_replays(monkeypatch)
    cpu_losses, cpu_state = _train("cpu", optimizer_name, 8)
    losses, state = _train("cuda", optimizer_name, 8)
    assert len(replays) >= 4  # each step is one graph: captured after its first runs, replayed after
    # The tolerances of test_training_on_the_device_follows_the_cpu: float64, at most 32 terms a sum.
    np.testing.assert_allclose(losses, cpu_losses, rtol=1e-10)
    for name, value in cpu_state.items():
        np.testing.assert_allclose(state[name], value, rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.skipif(not REAL_CUDA, reason=NO_CUDA_REASON)
@pytest.mark.parametrize("condition", ["fast path off", "over the memory bound"])
def test_graphs_are_not_replayed_where_they_should_not_be(monkeypatch, condition):
    replays = _counted_replays(monkeypatch)
    if condition == "over the memory bound":
        monkeypatch.setattr(cuda_graphs, "CAPTURE_BYTES", 16)
    with onnxnn.set_fast_path(condition != "fast path off"):
        losses, _ = _train("cuda", "SGD", 6)
    assert replays == [] and losses[-1] < losses[0]


# --------------------------------------------------------------------- the default device


@pytest.fixture
def _default_device_restored():
    yield
    onnxnn.set_default_device(None)


@pytest.mark.usefixtures("_default_device_restored")
def test_factories_and_new_layers_use_the_default_device(cuda):
    assert onnxnn.get_default_device() == onnxnn.device("cpu")
    onnxnn.set_default_device("cuda")
    assert onnxnn.get_default_device() == onnxnn.device("cuda", 0)
    made = [
        onnxnn.zeros(2),
        onnxnn.randn(2),
        onnxnn.tensor([1.0]),
        onnxnn.arange(3),
        onnxnn.as_tensor(np.ones(2, np.float32)),
        onnxnn.tril_indices(3, 3),
        onnxnn.hann_window(4),
        nn.Linear(2, 3).weight,
    ]
    assert [tensor.device for tensor in made] == [onnxnn.device("cuda", 0)] * len(made)
    # from_numpy shares host memory and the *_like functions follow their input, as PyTorch's.
    assert onnxnn.from_numpy(np.ones(2, np.float32)).device == onnxnn.device("cpu")
    assert onnxnn.zeros_like(onnxnn.zeros(2, device="cpu")).device == onnxnn.device("cpu")
    assert onnxnn.zeros(2, device="cpu").device == onnxnn.device("cpu")  # an explicit device wins
    onnxnn.set_default_device(None)
    assert onnxnn.zeros(2).device == onnxnn.device("cpu")


def test_a_device_block_sets_the_default_inside_and_restores_it(cuda):
    outer = onnxnn.device("cpu")
    with onnxnn.device("cuda") as inside:
        assert inside == onnxnn.device("cuda", 0) and onnxnn.ones(1).device == inside
        with outer:
            assert onnxnn.ones(1).device == outer
        assert onnxnn.get_default_device() == inside
    assert onnxnn.get_default_device() == outer


def test_the_default_device_is_per_thread(cuda):
    import threading

    seen = []
    with onnxnn.device("cuda"):
        worker = threading.Thread(target=lambda: seen.append(onnxnn.zeros(1).device))
        worker.start()
        worker.join()
    assert seen == [onnxnn.device("cpu")]


@pytest.mark.skipif(REAL_CUDA, reason="CUDA is usable here")
@pytest.mark.usefixtures("_default_device_restored")
def test_an_unusable_default_device_is_refused_and_changes_nothing():
    for attempt in (lambda: onnxnn.set_default_device("cuda"), lambda: onnxnn.device("cuda").__enter__()):
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            attempt()
        assert onnxnn.get_default_device() == onnxnn.device("cpu")
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda"):
        onnxnn.set_default_device("tpu")


# PyTorch 2.13's answers: the index is a C++ int64 (a C int when parsed from a string), never negative.
BAD_DEVICES = [
    (("cuda", -1), RuntimeError, "Device index must not be negative"),
    (("cpu", -1), RuntimeError, "Device index must not be negative"),
    (("cuda", 2**63), ValueError, "Overflow when unpacking long long"),
    (("cuda", 2**70), ValueError, "Overflow when unpacking long long"),
    (
        ("cuda:2147483648",),
        RuntimeError,
        "Could not parse device index '2147483648' in device string 'cuda:2147483648'",
    ),
    (("cuda:-1",), RuntimeError, "Invalid device string: 'cuda:-1'"),
    (("cuda:\u00b2",), RuntimeError, "Invalid device string"),  # a digit to str.isdigit, not to int()
]


@pytest.mark.parametrize("arguments,error,message", BAD_DEVICES, ids=[repr(case[0]) for case in BAD_DEVICES])
def test_device_indices_pytorch_refuses_are_refused(arguments, error, message):
    with pytest.raises(error, match=re.escape(message)):
        onnxnn.device(*arguments)

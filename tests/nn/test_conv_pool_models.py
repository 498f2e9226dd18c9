"""A small CNN of the conv and pooling layers: trains, exports, and imports back as a trainable model.

The network uses every kind of graph the layers record: reflect padding (Slice/Concat), 'same'
padding, grouped convolution, max/average/adaptive pooling, a transposed convolution. Exported
values are held to Higham's bound ``2 * gamma(n) * m``: ``n`` the longest chain of accumulated
terms through the network, ``m`` the same network run with ``|weights|`` on ``|x|`` (every layer
here is monotone in those, so ``m`` bounds every intermediate magnitude).
"""

from __future__ import annotations

import copy

import numpy as np
import onnxruntime
import pytest
from tolerances import gamma

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn
from onnxnn.export import to_onnx
from onnxnn.import_ import from_onnx


def small_cnn():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, padding_mode="reflect"),  # 27 terms
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 8, 3, padding="same", groups=2),  # 36 terms
        nn.ReLU(),
        nn.ConvTranspose2d(8, 4, 2, stride=2),  # 8 terms
        nn.AvgPool2d(2),  # 4 terms
        nn.AdaptiveAvgPool2d(1),  # 16 terms (a 4x4 plane)
        nn.Flatten(),
        nn.Linear(4, 2),  # 4 terms
    )


TERMS = 27 + 36 + 8 + 4 + 16 + 4 + 6  # plus one bias add per layer with a bias


def _magnitude_network(model):
    absolute = copy.deepcopy(model)
    for parameter in absolute.parameters():
        parameter.data = parameter.data.abs()
    return absolute


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_small_cnn_trains_its_loss_down(executor):
    teacher, model = small_cnn(), small_cnn()
    x = onnxnn.randn(16, 3, 8, 8)
    with onnxnn.no_grad():
        target = teacher(x) * 4  # reachable: another network of the same shape, scaled
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    with onnxnn.set_executor(executor):
        for _ in range(40):
            loss = F.mse_loss(model(x), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    assert losses[-1] < 0.1 * losses[0]
    assert all(np.isfinite(losses))


def test_small_cnn_exports_and_imports_back_trainable():
    model = small_cnn().eval()
    x = onnxnn.randn(4, 3, 8, 8)
    proto = to_onnx(model, x, input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "batch"}})
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    with onnxnn.set_executor("kernels"):
        ours = np.asarray(model(x).detach().numpy(), dtype=np.float64)
        magnitude = np.asarray(_magnitude_network(model)(x.abs()).detach().numpy(), dtype=np.float64)
    bound = 2 * gamma(TERMS) * magnitude
    (exported,) = session.run(None, {"x": x.numpy()})
    assert np.all(np.abs(exported - ours) <= bound)
    # A batch of another size runs too (dynamic batch axis).
    (other,) = session.run(None, {"x": x.numpy()[:3]})
    assert other.shape == (3, 2) and np.all(np.abs(other - ours[:3]) <= bound[:3])

    imported = from_onnx(proto).eval()
    with onnxnn.set_executor("kernels"):
        assert np.all(np.abs(np.asarray(imported(x).detach().numpy(), np.float64) - ours) <= bound)
        # The imported graph trains: its parameters get the gradients the original model's get.
        target = onnxnn.randn(4, 2)
        F.mse_loss(imported(x), target).backward()
        F.mse_loss(model(x), target).backward()
    imported_parameters = dict(imported.named_parameters())  # named by the state_dict keys
    for name, parameter in model.named_parameters():
        expected = parameter.grad.numpy().astype(np.float64)
        actual = imported_parameters[name].grad.numpy().astype(np.float64)
        # The imported graph is the recorded one, run by the same kernels: the same sums in the same order.
        np.testing.assert_array_equal(actual, expected, err_msg=name)

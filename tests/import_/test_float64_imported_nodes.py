"""float64 models exported by torch.onnx.export, imported and run on the "onnxruntime" executor.

onnxruntime has no float64 kernels for LSTM, GRU, InstanceNormalization, HardSigmoid, HardSwish
and Resize; imported nodes of these types take onnxnn's own float64 forms, so a float64 file runs
on that executor, its input gradient too, and exports (under that executor) to a file onnxruntime
loads. Expected values come from PyTorch 2.13 in float64.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import onnxruntime
import pytest

import onnxnn
from onnxnn.export import to_onnx
from onnxnn.import_ import from_onnx

torch = pytest.importorskip("torch")

EPSILON = 2.0**-52


def _interpolate(**options):
    """``F.interpolate(x, **options)`` as a torch module."""
    return _module_of(lambda x: torch.nn.functional.interpolate(x, **options))


def _first_output(layer):
    """A recurrent layer's output sequence (torch exports h0 and c0 as ConstantOfShape)."""
    return _module_of(lambda x: layer(x)[0], layer)


def _module_of(function, *children):
    """A torch module computing ``function(x)``, holding ``children`` (their parameters)."""
    module = torch.nn.Module()
    for index, child in enumerate(children):
        module.add_module(str(index), child)
    module.forward = function
    return module


CASES = [
    # name, torch module, input shape, roundings per output element (dtype eps times that bounds the error)
    ("lstm", lambda: _first_output(torch.nn.LSTM(4, 3, batch_first=True)), (2, 5, 4), 8 * 5 * 9),
    ("lstm_bidirectional", lambda: _first_output(torch.nn.LSTM(4, 3, bidirectional=True)), (5, 2, 4), 8 * 5 * 9),
    ("gru", lambda: _first_output(torch.nn.GRU(4, 3, batch_first=True)), (2, 5, 4), 8 * 5 * 9),
    # eps a float32 value: the file's epsilon attribute is float32, and onnxruntime adds that.
    (
        "instance_norm",
        lambda: torch.nn.InstanceNorm2d(3, eps=float(np.float32(1e-5)), affine=True),
        (2, 3, 4, 4),
        4 * 16,
    ),
    ("hardswish", lambda: torch.nn.Hardswish(), (4, 5), 4),
    ("hardsigmoid", lambda: torch.nn.Hardsigmoid(), (4, 5), 4),
    ("nearest", lambda: _interpolate(scale_factor=2), (1, 2, 3, 3), 1),
    ("bilinear", lambda: _interpolate(scale_factor=2, mode="bilinear"), (1, 2, 3, 3), 8),
    ("bilinear_corners", lambda: _interpolate(size=(5, 4), mode="bilinear", align_corners=True), (1, 2, 3, 3), 8),
    ("bicubic", lambda: _interpolate(scale_factor=2, mode="bicubic"), (1, 2, 3, 3), 32),
]
IDS = [case[0] for case in CASES]


def _exported(build, shape):
    """The float64 module, its file (opset 17, legacy exporter) and a float64 input."""
    torch.manual_seed(0)
    module = build().double().eval()
    x = torch.randn(*shape, dtype=torch.float64) * 2
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter's deprecation and recurrent-layer notes
        torch.onnx.export(module, (x,), buffer, dynamo=False, opset_version=17)
    return module, buffer.getvalue(), x


def _bound(terms: int, reference: np.ndarray) -> float:
    return terms * EPSILON * max(1.0, float(np.abs(reference).max()))


@pytest.mark.parametrize("name, build, shape, terms", CASES, ids=IDS)
def test_float64_file_runs_on_onnxruntime_with_its_gradient(name, build, shape, terms):
    module, data, x = _exported(build, shape)
    x.requires_grad_(True)
    expected = module(x)
    (expected_grad,) = torch.autograd.grad((expected * expected).sum(), x)
    imported = from_onnx(data)
    with onnxnn.set_executor("onnxruntime"):
        ours = onnxnn.tensor(x.detach().numpy(), requires_grad=True)
        result = imported(ours)
        (result * result).sum().backward()
        values, grad = result.detach().numpy(), ours.grad.numpy()
    reference = expected.detach().numpy()
    assert values.dtype == np.float64
    np.testing.assert_allclose(values, reference, rtol=0, atol=_bound(terms, reference))
    np.testing.assert_allclose(grad, expected_grad.numpy(), rtol=0, atol=_bound(4 * terms, expected_grad.numpy()))


@pytest.mark.parametrize("name, build, shape, terms", CASES, ids=IDS)
def test_float64_file_exported_back_loads_in_onnxruntime(name, build, shape, terms):
    module, data, x = _exported(build, shape)
    imported = from_onnx(data).eval()
    with onnxnn.set_executor("onnxruntime"), onnxnn.no_grad():
        proto = to_onnx(imported, (onnxnn.tensor(x.numpy()),), input_names=["x"])
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    other = torch.randn(*shape, dtype=torch.float64)  # not the traced input: the file computes from x
    (result,) = session.run(None, {"x": other.numpy()})
    with torch.no_grad():
        reference = module(other).numpy()
    np.testing.assert_allclose(result, reference, rtol=0, atol=_bound(terms, reference))

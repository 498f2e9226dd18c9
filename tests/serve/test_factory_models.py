"""``onnxnn serve module:factory --weights CHECKPOINT``: a module exported on start, served like a file."""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn.cli import main

from tests.tolerances import accumulation_bound

from .conftest import tritonclient_http
from .process import ServerProcess

FACTORY = """
import onnxnn

def make_classifier():
    return onnxnn.nn.Sequential(onnxnn.nn.Linear(4, 8), onnxnn.nn.ReLU(), onnxnn.nn.Linear(8, 3))
"""


@pytest.fixture
def factory_and_weights(tmp_path):
    source = tmp_path / "models.py"
    source.write_text(FACTORY)
    onnxnn.manual_seed(7)
    trained = onnxnn.nn.Sequential(onnxnn.nn.Linear(4, 8), onnxnn.nn.ReLU(), onnxnn.nn.Linear(8, 3))
    weights = tmp_path / "classifier.pt"
    onnxnn.save(trained.state_dict(), str(weights))
    return f"{source}:make_classifier", str(weights), trained


def test_factory_model_with_weights_serves_their_outputs_at_any_batch_size(factory_and_weights):
    factory, weights, trained = factory_and_weights
    # Exported with example shape (1, 4); three rows only fit if axis 0 became the dynamic batch axis.
    server = ServerProcess([factory, "--weights", weights, "--input-shape", "1,4"])
    try:
        client = tritonclient_http.InferenceServerClient(server.address)
        assert client.is_model_ready("make_classifier")
        x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
        request = tritonclient_http.InferInput("input_0", list(x.shape), "FP32")
        request.set_data_from_numpy(x)
        served = client.infer("make_classifier", [request]).as_numpy(
            client.get_model_metadata("make_classifier")["outputs"][0]["name"]
        )
    finally:
        server.stop()
    # The checkpoint's weights, not the factory's fresh initialization, computed in float64.
    w1, b1, w2, b2 = (value.numpy().astype(np.float64) for value in trained.state_dict().values())
    hidden = np.maximum(x @ w1.T + b1, 0)
    expected = hidden @ w2.T + b2
    magnitude = (np.abs(x) @ np.abs(w1.T) + np.abs(b1)) @ np.abs(w2.T) + np.abs(b2)
    np.testing.assert_array_less(np.abs(served - expected), accumulation_bound(magnitude, 4 + 8 + 2) + 1e-30)


@pytest.mark.parametrize(
    "extra, message",
    [
        ([], "needs --input-shape"),
        (["--input-shape", "1,4", "--weights", "WRONG"], "size mismatch for 0.weight"),
    ],
    ids=["no_input_shape", "weights_that_do_not_fit"],
)
def test_factory_model_errors_are_one_line(factory_and_weights, tmp_path, capsys, extra, message):
    factory, _, _ = factory_and_weights
    wrong = tmp_path / "wrong.pt"
    onnxnn.save(onnxnn.nn.Sequential(onnxnn.nn.Linear(5, 8)).state_dict(), str(wrong))
    status = main(["serve", factory, "--port", "0", *[str(wrong) if a == "WRONG" else a for a in extra]])
    stderr = capsys.readouterr().err
    assert status == 2, stderr
    assert len(stderr.strip().splitlines()) == 1
    assert message in stderr, stderr

"""``onnxnn serve`` over the Open Inference Protocol, talked to by Triton's own client (tritonclient.http)."""

from __future__ import annotations

import http.client
import json
import signal
import threading

import numpy as np
import onnxruntime
import pytest

from tolerances import assert_within
from .conftest import MAX_BODY_BYTES, tritonclient_http, wait_until
from .process import ServerProcess
from .models import CLASSES, FEATURES, mlp_logits_bound

InferInput, InferRequestedOutput = tritonclient_http.InferInput, tritonclient_http.InferRequestedOutput
InferenceServerException = pytest.importorskip("tritonclient.utils").InferenceServerException


def _post(server, path: str, body: bytes, headers: dict | None = None) -> tuple[int, dict]:
    connection = http.client.HTTPConnection(*server.address.split(":"), timeout=60)
    connection.request("POST", path, body=body, headers=headers or {"Content-Type": "application/json"})
    response = connection.getresponse()
    status, payload = response.status, json.loads(response.read())
    connection.close()
    return status, payload


def _get(server, path: str) -> tuple[int, dict]:
    connection = http.client.HTTPConnection(*server.address.split(":"), timeout=60)
    connection.request("GET", path)
    response = connection.getresponse()
    status, text = response.status, response.read().decode()
    connection.close()
    return status, text


def _mlp_input(rows: int, seed: int, binary: bool):
    x = np.random.default_rng(seed).standard_normal((rows, FEATURES)).astype(np.float32)
    tensor = InferInput("x", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x, binary_data=binary)
    return x, tensor


def _assert_logits_match(logits, x, mlp_path):
    """The server's logits against a plain onnxruntime session's, within float32 rounding."""
    session = onnxruntime.InferenceSession(mlp_path, providers=["CPUExecutionProvider"])
    expected, _ = session.run(None, {"x": x})
    assert_within(logits, expected, mlp_logits_bound(x, mlp_path))


def _metric(server, line_start: str) -> float:
    _, text = _get(server, "/metrics")
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(line_start)]
    return sum(values)


def test_health_and_server_metadata(server):
    client = server.client()
    assert client.is_server_live() and client.is_server_ready()
    assert client.get_server_metadata()["extensions"] == ["binary_tensor_data"]


def test_metadata_gives_dtypes_and_minus_one_for_dynamic_axes(server):
    client = server.client()
    assert client.get_model_metadata("mlp") == {
        "name": "mlp",
        "versions": ["1"],
        "platform": "onnxruntime_onnx",
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, FEATURES]}],
        "outputs": [
            {"name": "logits", "datatype": "FP32", "shape": [-1, CLASSES]},
            {"name": "label", "datatype": "INT64", "shape": [-1]},
        ],
    }
    fixed = client.get_model_metadata("fixed", model_version="1")
    assert [(t["name"], t["datatype"], t["shape"]) for t in fixed["inputs"]] == [
        ("a", "INT32", [2, 3]),
        ("b", "FP64", [2, 3]),
    ]


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_inference_matches_onnxruntime(server, model_files, binary):
    x, tensor = _mlp_input(3, seed=1, binary=binary)
    outputs = [InferRequestedOutput("logits", binary_data=binary), InferRequestedOutput("label", binary_data=binary)]
    result = server.client().infer("mlp", [tensor], outputs=outputs)
    logits, label = result.as_numpy("logits"), result.as_numpy("label")
    assert logits.dtype == np.float32 and logits.shape == (3, CLASSES)
    _assert_logits_match(logits, x, model_files["mlp"])
    np.testing.assert_array_equal(label, np.argmax(logits, axis=1))  # the server's own logits decide ties


def test_fixed_shape_model_with_two_inputs_and_a_chosen_output(server):
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    b = np.linspace(-1, 1, 6).reshape(2, 3)
    inputs = [InferInput("a", [2, 3], "INT32"), InferInput("b", [2, 3], "FP64")]
    inputs[0].set_data_from_numpy(a, binary_data=True)
    inputs[1].set_data_from_numpy(b, binary_data=False)
    result = server.client().infer("fixed", inputs, model_version="1", outputs=[InferRequestedOutput("scaled")])
    np.testing.assert_array_equal(result.as_numpy("scaled"), b + b)  # doubling is exact
    assert result.as_numpy("sum") is None  # not asked for


def _infer_error(server, model, inputs) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as caught:
        server.client().infer(model, inputs)
    return caught.value


def test_unknown_model_is_400(server):
    _, tensor = _mlp_input(1, seed=0, binary=False)
    error = _infer_error(server, "nope", [tensor])
    assert error.status() == "400" and "unknown model 'nope'" in error.message()


def test_wrong_dtype_is_400(server):
    tensor = InferInput("x", [1, FEATURES], "FP64")
    tensor.set_data_from_numpy(np.zeros((1, FEATURES)), binary_data=False)
    error = _infer_error(server, "mlp", [tensor])
    assert error.status() == "400" and "must be FP32, got FP64" in error.message()


def test_wrong_shape_is_400(server):
    tensor = InferInput("x", [2, FEATURES + 1], "FP32")
    tensor.set_data_from_numpy(np.zeros((2, FEATURES + 1), np.float32))
    error = _infer_error(server, "mlp", [tensor])
    assert error.status() == "400" and f"must have shape [-1, {FEATURES}]" in error.message()


def test_wrong_input_count_is_400(server):
    _, first = _mlp_input(1, seed=0, binary=False)
    second = InferInput("extra", [1], "FP32")
    second.set_data_from_numpy(np.zeros(1, np.float32))
    error = _infer_error(server, "mlp", [first, second])
    assert error.status() == "400" and "expects 1 input(s) ['x'], got 2" in error.message()


def test_data_count_not_matching_the_shape_is_400(server):
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, FEATURES], "data": [1.0, 2.0]}]}
    status, payload = _post(server, "/v2/models/mlp/infer", json.dumps(body).encode())
    assert status == 400 and "holds 2 values" in payload["error"]


def test_malformed_json_is_400(server):
    status, payload = _post(server, "/v2/models/mlp/infer", b'{"inputs": [')
    assert status == 400 and payload["error"].startswith("malformed JSON")


def test_body_over_the_limit_is_400(server):
    status, payload = _post(server, "/v2/models/mlp/infer", b" " * (MAX_BODY_BYTES + 1))
    assert status == 400 and f"over the limit of {MAX_BODY_BYTES} bytes" in payload["error"]


def test_failing_model_is_503_on_ready_while_the_others_serve(server):
    client = server.client()
    assert not client.is_model_ready("broken") and client.is_model_ready("mlp")
    status, text = _get(server, "/v2/models/broken/ready")
    assert status == 503 and "failed to load" in json.loads(text)["error"]
    _, tensor = _mlp_input(1, seed=0, binary=False)
    error = _infer_error(server, "broken", [tensor])
    assert error.status() == "503" and "not ready" in error.message()
    assert client.infer("mlp", [tensor]).as_numpy("logits").shape == (1, CLASSES)


def test_dynamic_batching_merges_concurrent_requests(server, model_files):
    runs_before = _metric(server, 'onnxnn_batch_size_count{model="mlp"}')
    rows_before = _metric(server, 'onnxnn_batch_size_sum{model="mlp"}')
    requests = 8
    client = server.client(concurrency=requests)  # one connection per request in flight
    inputs = [_mlp_input(1, seed=10 + i, binary=True) for i in range(requests)]
    pending = [client.async_infer("mlp", [tensor]) for _, tensor in inputs]
    results = [request.get_result() for request in pending]
    for (x, _), result in zip(inputs, results):
        _assert_logits_match(result.as_numpy("logits"), x, model_files["mlp"])
    runs = _metric(server, 'onnxnn_batch_size_count{model="mlp"}') - runs_before
    assert _metric(server, 'onnxnn_batch_size_sum{model="mlp"}') - rows_before == requests
    assert runs < requests, f"{requests} concurrent one-row requests ran as {runs} batches"


def test_metrics_count_requests_by_status(server):
    assert _metric(server, 'onnxnn_inference_requests_total{code="200",model="mlp"}') >= 1
    assert _metric(server, 'onnxnn_inference_requests_total{code="400",model="<unknown>"}') >= 0
    status, text = _get(server, "/metrics")
    assert status == 200 and "# TYPE onnxnn_inference_request_duration_seconds histogram" in text


def test_sigterm_finishes_the_requests_in_flight(model_files):
    # A long batching window keeps the request in flight while the signal arrives.
    running = ServerProcess([model_files["mlp"], "--max-batch-size", "4", "--max-queue-delay-ms", "1500"])
    x, tensor = _mlp_input(1, seed=3, binary=True)
    outcome = {}

    def request() -> None:
        try:
            outcome["result"] = running.client().infer("mlp", [tensor])
        except Exception as error:  # reported by the assertion below
            outcome["error"] = error

    thread = threading.Thread(target=request)
    thread.start()
    try:
        wait_until(lambda: _metric(running, "onnxnn_inference_requests_in_flight") == 1)
    finally:
        status = running.stop()
    thread.join(60)
    assert "error" not in outcome, outcome.get("error")
    _assert_logits_match(outcome["result"].as_numpy("logits"), x, model_files["mlp"])
    # uvicorn re-raises the signal once shut down, so supervisors see the process ended by SIGTERM.
    assert status == -signal.SIGTERM, "".join(running.lines)
    assert "Traceback" not in "".join(running.lines)

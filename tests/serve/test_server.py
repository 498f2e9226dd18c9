"""``onnxnn serve`` over the Open Inference Protocol, talked to by Triton's own client (tritonclient.http)."""

from __future__ import annotations

import asyncio
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
from .models import CLASSES, FEATURES, GATHER_TABLE, mlp_logits_bound

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


def _post_for_json(server, path: str, body: bytes, headers: dict | None = None) -> tuple[int, dict]:
    """POST; the status and the JSON body, failing the test on any other kind of body (a plain-text 500)."""
    connection = http.client.HTTPConnection(*server.address.split(":"), timeout=60)
    connection.request("POST", path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
    response = connection.getresponse()
    status, content_type, raw = response.status, response.getheader("content-type"), response.read()
    connection.close()
    assert content_type == "application/json", f"{status} {content_type}: {raw[:200]!r}"
    return status, json.loads(raw)


def _binary_request(inputs: list[dict], data: bytes) -> tuple[bytes, dict]:
    """A binary tensor data extension body: the JSON header, then the raw tensors."""
    header = json.dumps({"inputs": inputs}).encode()
    return header + data, {"Inference-Header-Content-Length": str(len(header))}


@pytest.mark.parametrize(
    "raw, expected",
    [
        (b"\x00\x01\x00\x01", [0, 1, 0, 1]),
        (b"\x07\xff\x00\x80", [1, 1, 0, 1]),  # any non-zero byte is true, as in onnxnn's safetensors reader
    ],
    ids=["zero-one", "other-bytes"],
)
def test_bool_sent_as_binary_reaches_the_model_as_a_bool(server, raw, expected):
    body, headers = _binary_request(
        [{"name": "x", "datatype": "BOOL", "shape": [1, 4], "parameters": {"binary_data_size": 4}}], raw
    )
    status, payload = _post_for_json(server, "/v2/models/boolean/infer", body, headers)
    assert status == 200, payload
    assert payload["outputs"][0]["data"] == expected  # Cast(BOOL -> INT32) of a true bool is 1


def _json_input(datatype: str, shape: list, data) -> bytes:
    return json.dumps({"inputs": [{"name": "x", "datatype": datatype, "shape": shape, "data": data}]}).encode()


# (datatype, data, the offending value as the error quotes it): Triton's JSON rules, each a 400 naming
# input 'x'. Sent to mlp, whose x is FP32: the data is refused before the model's datatype is checked.
_JSON_DATA_REFUSED = [
    ("BOOL", ["false", "0"], 'takes JSON true or false, got "false"'),
    ("BOOL", [2, 0], "takes JSON true or false, got 2"),
    ("BOOL", [1.0, 0.0], "takes JSON true or false, got 1.0"),
    ("INT32", [1.9, -2.7], "takes JSON integers, got 1.9"),
    ("INT32", [True, 1], "takes JSON integers, got true"),
    ("INT32", ["1", 2], 'takes JSON integers, got "1"'),
    ("INT32", [float("nan"), 1], "takes JSON integers, got NaN"),
    ("INT32", [2**31, 0], "2147483648 is outside the INT32 range"),
    ("INT8", [0, -129], "-129 is outside the INT8 range"),
    ("UINT8", [-1, 0], "-1 is outside the UINT8 range"),
    ("UINT16", [0, 2**16], "65536 is outside the UINT16 range"),
    ("UINT64", [2**64, 0], f"{2**64} is outside the UINT64 range"),
    ("INT64", [-(2**63) - 1, 0], f"{-(2**63) - 1} is outside the INT64 range"),
    ("FP32", ["0.5", 1.0], 'takes JSON numbers, got "0.5"'),
    ("FP32", [True, 1.0], "takes JSON numbers, got true"),
    ("FP32", [None, 1.0], "takes JSON numbers, got null"),
    ("FP32", [{"a": 1}, 1.0], "takes JSON numbers, got an object"),
    ("FP32", [1e40, 0.0], "1e+40 is outside the FP32 range"),  # finite in JSON, beyond float32: not silently inf
    ("FP16", [70000.0, 0.0], "70000.0 is outside the FP16 range"),
    ("FP64", [10**400, 0.0], f"{str(10**400)[:37]}... is outside the FP64 range"),  # quoted shortened
    ("FP32", [[1.0], 2.0], "mixes nested lists and values"),
]


@pytest.mark.parametrize(
    "datatype, data, offending",
    _JSON_DATA_REFUSED,
    ids=[f"{t}-{json.dumps(d[0])[:12]}" for t, d, _ in _JSON_DATA_REFUSED],
)
def test_json_data_not_of_the_declared_datatype_is_400_naming_the_value(server, datatype, data, offending):
    body = _json_input(datatype, [1, 2], data)
    status, payload = _post_for_json(server, "/v2/models/mlp/infer", body)
    assert status == 400 and "input 'x'" in payload["error"] and offending in payload["error"], payload


# Values at the edges of each datatype, accepted by the decoder: the 400 then comes from the model's
# datatype check (mlp's x is FP32), which runs only on decoded tensors.
_JSON_DATA_ACCEPTED = [
    ("BOOL", [True, False]),
    ("INT8", [-128, 127]),
    ("UINT8", [0, 255]),
    ("INT32", [-(2**31), 2**31 - 1]),
    ("UINT64", [0, 2**64 - 1]),
    ("INT64", [-(2**63), 2**63 - 1]),
    ("FP16", [65504.0, -1]),
    ("FP64", [1e308, float("-inf")]),
]


@pytest.mark.parametrize("datatype, data", _JSON_DATA_ACCEPTED, ids=[t for t, _ in _JSON_DATA_ACCEPTED])
def test_json_data_at_the_edges_of_its_datatype_is_decoded(server, datatype, data):
    status, payload = _post_for_json(server, "/v2/models/mlp/infer", _json_input(datatype, [1, 2], data))
    assert status == 400 and f"must be FP32, got {datatype}" in payload["error"], payload


def test_json_bool_and_integer_values_reach_the_model_exactly(server):
    status, payload = _post_for_json(
        server, "/v2/models/boolean/infer", _json_input("BOOL", [1, 4], [True, False, False, True])
    )
    assert status == 200 and payload["outputs"][0]["data"] == [1, 0, 0, 1], payload
    a = [2**31 - 1, -(2**31), 0, 1, -1, 7]
    body = {
        "inputs": [
            {"name": "a", "datatype": "INT32", "shape": [2, 3], "data": a},
            {"name": "b", "datatype": "FP64", "shape": [2, 3], "data": [0] * 6},  # JSON integers for FP64
        ],
        "outputs": [{"name": "sum"}],
    }
    status, payload = _post_for_json(server, "/v2/models/fixed/infer", json.dumps(body).encode())
    assert status == 200 and payload["outputs"][0]["data"] == a, payload  # a + Cast(0.0) is exact


@pytest.mark.parametrize(
    "data",
    [[[0.5] * 4] * 4, [[[0.5] * 4, [0.5] * 4], [[0.5] * 4, [0.5] * 4]], [0.5] * 15 + [1]],
    ids=["nested", "nested-three-deep", "integer-among-floats"],
)
def test_fp32_json_data_nested_or_with_integers_is_accepted(server, model_files, data):
    status, payload = _post_for_json(server, "/v2/models/mlp/infer", _json_input("FP32", [1, FEATURES], data))
    assert status == 200, payload
    x = np.asarray(data, np.float32).reshape(1, FEATURES)
    _assert_logits_match(
        np.asarray(payload["outputs"][0]["data"], np.float32).reshape(1, CLASSES), x, model_files["mlp"]
    )


def test_fp32_json_nan_literal_is_accepted_and_answered_as_nan(server):
    body = b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 16], "data": [NaN' + b", 0.5" * 15 + b"]}]}"
    status, payload = _post_for_json(server, "/v2/models/mlp/infer", body)
    assert status == 200 and all(np.isnan(payload["outputs"][0]["data"])), payload  # NaN flows into every logit


_FP32_ROW = [0.5] * FEATURES


def _mlp_json(**fields) -> bytes:
    tensor = {"name": "x", "datatype": "FP32", "shape": [1, FEATURES], "data": _FP32_ROW}
    tensor.update(fields.pop("tensor", {}))
    return json.dumps({"inputs": [tensor], **fields}).encode()


_MALFORMED = {
    "deeply-nested-inputs": (b'{"inputs": ' + b"[" * 5000 + b"]" * 5000 + b"}", {}, "nested too deeply"),
    "deeply-nested-extra-key": (
        _mlp_json()[:-1] + b', "extra": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        {},
        "nested too deeply",
    ),
    "integer-of-5000-digits": (_mlp_json()[:-1] + b', "extra": ' + b"1" * 5000 + b"}", {}, "malformed JSON"),
    "zero-next-to-huge-dims": (
        _mlp_json(tensor={"shape": [0, 2**62, 2**62], "data": []}),
        {},
        "too large",
    ),
    "zero-next-to-huge-dims-binary": _binary_request(
        [{"name": "x", "datatype": "FP32", "shape": [0, 2**62, 2**62], "parameters": {"binary_data_size": 0}}], b""
    )
    + ("too large",),
    "65-axes": (_mlp_json(tensor={"shape": [1] * 65, "data": [0.5]}), {}, "too large"),
    "input-parameters-a-string": (
        _mlp_json(tensor={"parameters": "a"}),
        {},
        "input 'x' 'parameters' must be an object",
    ),
    "request-parameters-a-string": (_mlp_json(parameters="x"), {}, "'parameters' must be an object"),
    "output-parameters-a-number": (
        _mlp_json(outputs=[{"name": "label", "parameters": 1}]),
        {},
        "output 'label' 'parameters' must be an object",
    ),
    "binary-data-output-a-string": (
        _mlp_json(parameters={"binary_data_output": "false"}),
        {},
        "'binary_data_output' must be true or false",
    ),
    "binary-data-size-a-string": _binary_request(
        [{"name": "x", "datatype": "FP32", "shape": [1, FEATURES], "parameters": {"binary_data_size": "64"}}],
        b"\x00" * 4 * FEATURES,
    )
    + ("binary_data_size",),
    "id-an-object": (_mlp_json(id={"a": 1}), {}, "'id' must be a string"),
    "header-length-a-non-ascii-digit": (_mlp_json(), {"Inference-Header-Content-Length": "\u00b2"}, "byte count"),
}


@pytest.mark.parametrize("body, headers, message", _MALFORMED.values(), ids=_MALFORMED.keys())
def test_malformed_request_is_a_json_400_counted_in_the_metrics(server, body, headers, message):
    counted = 'onnxnn_inference_requests_total{code="400",model="mlp"}'
    timed = 'onnxnn_inference_request_duration_seconds_count{model="mlp"}'
    before = _metric(server, counted), _metric(server, timed)
    status, payload = _post_for_json(server, "/v2/models/mlp/infer", body, headers)
    assert status == 400 and message in payload["error"], payload
    assert (_metric(server, counted), _metric(server, timed)) == (before[0] + 1, before[1] + 1)
    assert server.client().is_server_live()


def test_a_failing_batch_fails_only_its_bad_requests_each_with_its_own_error(server):
    def batch_rows() -> tuple[float, float]:
        return (
            _metric(server, 'onnxnn_batch_size_count{model="gather"}'),
            _metric(server, 'onnxnn_batch_size_bucket{le="1.0",model="gather"}'),
        )

    runs_before, single_before = batch_rows()
    indices = [0, 1, 99, 2, -77]  # 99 and -77 are outside the 4-row table
    client = server.client(concurrency=len(indices))
    tensors = []
    for index in indices:
        tensor = InferInput("i", [1], "INT64")
        tensor.set_data_from_numpy(np.array([index], np.int64), binary_data=True)
        tensors.append(tensor)
    pending = [client.async_infer("gather", [tensor]) for tensor in tensors]
    for index, request in zip(indices, pending):
        if 0 <= index < len(GATHER_TABLE):
            np.testing.assert_array_equal(request.get_result().as_numpy("y"), GATHER_TABLE[[index]])
            continue
        with pytest.raises(InferenceServerException) as caught:
            request.get_result()
        others = [str(other) for other in indices if other != index]
        assert caught.value.status() == "503" and f"idx={index}" in caught.value.message()
        assert not any(f"idx={other}" in caught.value.message() for other in others), caught.value.message()
    runs, single = batch_rows()
    assert runs - runs_before > single - single_before, "the requests never ran as one batch: nothing was tested"


def test_an_unexpected_error_is_a_json_500_counted_in_the_metrics():
    # In-process, over ASGI: a real server has no way left to raise one. The session answers an
    # object array, which the codec has no datatype for.
    from onnxnn.serve.app import create_app
    from onnxnn.serve.model import ServedModel, TensorSpec

    class ObjectSession:
        def run(self, output_names, feeds):
            return [np.array(["not a number"], dtype=object)]

    spec = TensorSpec("x", np.dtype(np.float32), (-1,))
    model = ServedModel("odd", "odd.onnx", session=ObjectSession(), inputs=[spec], outputs=[spec])
    app = create_app([model])
    body = _json_input("FP32", [1], [1.0])
    messages: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict) -> None:
        messages.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v2/models/odd/infer",
        "raw_path": b"/v2/models/odd/infer",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 1),
        "app": app,
    }
    asyncio.run(app(scope, receive, send))
    start = next(message for message in messages if message["type"] == "http.response.start")
    payload = json.loads(
        b"".join(message.get("body", b"") for message in messages if message["type"] == "http.response.body")
    )
    assert start["status"] == 500 and payload == {"error": "internal server error: KeyError"}
    registry = app.state.server.metrics.registry
    assert registry.get_sample_value("onnxnn_inference_requests_total", {"model": "odd", "code": "500"}) == 1
    assert registry.get_sample_value("onnxnn_inference_request_duration_seconds_count", {"model": "odd"}) == 1

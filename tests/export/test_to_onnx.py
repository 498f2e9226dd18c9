"""to_onnx: exported graphs run in plain onnxruntime with the module's outputs and names."""

from __future__ import annotations

import errno
import io
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import onnx
import onnxruntime
import pytest
from layer_chains import assert_same_model_output, chain_steps, relu_step
from tolerances import assert_close_to_matmul
from onnx import TensorProto, helper

import onnxnn
from onnxnn import nn
from onnxnn.export import atomic_write, max_opset_version, to_onnx
from onnxnn.export.onnx_export import write_model
from onnxnn.import_ import from_onnx


class FlattenNet(nn.Module):
    """Shape-dependent Python (x.view(x.size(0), -1)) that must not bake the traced batch in."""

    def __init__(self):
        super().__init__()
        self.features = nn.Linear(4, 6)
        self.norm = nn.BatchNorm1d(18)
        self.head = nn.Linear(18, 2)

    def forward(self, x):
        hidden = self.features(x).relu()
        return self.head(self.norm(hidden.view(x.size(0), -1)))

    def chain_steps(self, shape):
        return (
            chain_steps(self.features)
            + [relu_step(), ("reshape", (shape[0], -1))]
            + chain_steps(self.norm)
            + chain_steps(self.head)
        )


def _session(proto):
    return onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])


MODELS = [
    ("mlp", lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)), (5, 4)),
    ("flatten_batchnorm", FlattenNet, (5, 3, 4)),
    ("dropout_in_eval", lambda: nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.Tanh()), (2, 4)),
]


@pytest.mark.parametrize("name, build, shape", MODELS, ids=[m[0] for m in MODELS])
def test_exported_model_matches_the_module_in_onnxruntime(name, build, shape):
    model = build().eval()
    x = onnxnn.randn(*shape)
    proto = to_onnx(model, x, input_names=["x"], output_names=["y"])
    onnx.checker.check_model(proto, full_check=True)
    names = [init.name for init in proto.graph.initializer]
    state = model.state_dict()
    # Initializers are named by state_dict keys, in state_dict order; every parameter is used here
    # (an unused buffer such as num_batches_tracked in eval mode is left out, as PyTorch does).
    assert [n for n in names if n in state] == [k for k in state if k in names]
    assert {k for k, _ in model.named_parameters()} <= set(names)
    for init in proto.graph.initializer:
        if init.name in state:
            np.testing.assert_array_equal(onnx.numpy_helper.to_array(init), state[init.name].numpy())
    (result,) = _session(proto).run(None, {"x": x.numpy()})
    assert_same_model_output(result, model, x)


@pytest.mark.parametrize("name, build, shape", MODELS, ids=[m[0] for m in MODELS])
def test_dynamic_batch_axis_runs_at_other_sizes(name, build, shape):
    model = build().eval()
    proto = to_onnx(
        model,
        onnxnn.randn(*shape),
        input_names=["x"],
        output_names=["y"],
        dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
    )
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert proto.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    session = _session(proto)
    for batch in (1, 3, 11):
        x = onnxnn.randn(batch, *shape[1:])
        (result,) = session.run(None, {"x": x.numpy()})
        assert_same_model_output(result, model, x)


class _Function(nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, x):
        return self.function(x)


class _Recurrent(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.layer = kind(3, 4, batch_first=True)

    def forward(self, x):
        return self.layer(x)[0]  # no initial state: zeros of the batch's size


# Shapes that follow one of two independent dynamic axes, or their product: each size grows by
# its own amount in the export's traces, so a size following T is not taken for one following B.
# The last entry: rounded operations each output accumulates (0: data moved, compared exactly).
TWO_AXES_MODELS = [
    ("drop-last-step", lambda: _Function(lambda x: x[:, :-1]), (2, 6, 3), 0),
    ("batch-times-length", lambda: _Function(lambda x: x.reshape(x.shape[0] * x.shape[1], -1) * 2), (2, 5, 3), 0),
    ("roll-along-length", lambda: _Function(lambda x: onnxnn.roll(x, 2, 1)), (2, 6, 3), 0),
    # Constants filled with one value over the input's shape, or over a shape read from its sizes.
    (
        "filled-like-the-input",
        lambda: _Function(lambda x: onnxnn.minimum(x, onnxnn.zeros_like(x)) + onnxnn.full_like(x, 2.0)),
        (2, 6, 3),
        1,
    ),
    ("ones-of-its-sizes", lambda: _Function(lambda x: x * onnxnn.ones(x.shape[0], x.shape[1], 1)), (2, 5, 3), 1),
    # Sizes used as values: a mean over the batch (up to 4 rows) and integers offset by the sizes.
    ("mean-over-the-batch", lambda: _Function(lambda x: x - x.sum(0, keepdim=True) / x.shape[0]), (2, 5, 3), 6),
    (
        "sizes-as-integers",
        lambda: _Function(lambda x: x * x.shape[1] + (x.argmax(2) + x.shape[0]).unsqueeze(2)),
        (2, 5, 3),
        2,
    ),
    # Nine steps of 4 gates over 3 + 4 inputs, through sigmoid and tanh.
    ("lstm-without-state", lambda: _Recurrent(nn.LSTM), (2, 5, 3), 9 * 16),
    ("gru-without-state", lambda: _Recurrent(nn.GRU), (2, 5, 3), 9 * 16),
    # Attention over 9 positions of width 8, a 16-wide feed-forward and two layer norms.
    ("transformer-layer", lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), (2, 5, 8), 128),
]


@pytest.mark.parametrize("name, build, shape, operations", TWO_AXES_MODELS, ids=[m[0] for m in TWO_AXES_MODELS])
def test_dynamic_batch_and_length_axes_run_at_other_sizes(name, build, shape, operations):
    onnxnn.manual_seed(0)
    model = build().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no constant baked in from a traced size
        proto = to_onnx(
            model, onnxnn.randn(*shape), input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "b", 1: "t"}}
        )
    session = _session(proto)
    for batch, length in ((3, shape[1]), (shape[0], 9), (4, 7), (1, 2)):
        x = onnxnn.randn(batch, length, *shape[2:])
        (result,) = session.run(None, {"x": x.numpy()})
        expected = model(x).detach().numpy()
        assert result.shape == expected.shape
        bound = 2 * operations * 2.0**-24 * max(1.0, float(np.abs(expected).max()))
        np.testing.assert_allclose(result, expected, rtol=0, atol=bound)


@pytest.mark.parametrize(
    "forward, message",
    [
        (lambda x: x / (x.shape[0] / 2), r"Div depends on a dynamic axis and is not a whole number \(\[1.5\]"),
        # arange(B) exports as a Range (tests/export/test_dynamic_axes_soundness.py); a constant that
        # follows the batch in no form onnxnn writes is still refused.
        (
            lambda x: x * onnxnn.tensor([index * index for index in range(x.shape[0])]).float().unsqueeze(1),
            "read by Cast was computed from the size",
        ),
    ],
    ids=["half-the-batch", "squares-of-the-batch-indices"],
)
def test_a_tensor_following_an_axis_in_a_way_onnx_cannot_express_is_refused(forward, message):
    # Written as traced, it would be silently wrong at every other size.
    with pytest.raises(RuntimeError, match=message):
        to_onnx(_Function(forward), onnxnn.randn(3, 4), input_names=["x"], dynamic_axes={"x": {0: "b"}})


class _ClassToken(nn.Module):
    """A ViT's class token: ``expand`` to the batch records no node when the batch is 1."""

    def __init__(self):
        super().__init__()
        self.token = nn.Parameter(onnxnn.randn(1, 1, 4))
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(onnxnn.cat([self.token.expand(x.shape[0], -1, -1), x], 1))


def test_an_example_of_batch_1_exports_the_graph_every_batch_shares():
    # Traced at 1, broadcasting and same-shape expands need no node; to_onnx traces dynamic axes
    # of size 0 or 1 at size 2 instead, so the export neither refuses nor specializes.
    model = _ClassToken().eval()
    proto = to_onnx(
        model,
        onnxnn.randn(1, 3, 4),
        input_names=["x"],
        output_names=["y"],
        dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
    )
    session = _session(proto)
    token, weight, bias = (p.detach().numpy() for p in (model.token, model.proj.weight, model.proj.bias))
    for batch in (1, 2, 5):
        x = np.random.default_rng(batch).standard_normal((batch, 3, 4)).astype(np.float32)
        (result,) = session.run(None, {"x": x})
        rows = np.concatenate([np.broadcast_to(token, (batch, 1, 4)), x], 1)
        assert_close_to_matmul(result, rows, weight.T, bias)


# Models where an op written as several ONNX nodes (BatchNorm with batch statistics, GroupNorm)
# comes before a shape that follows the batch (Flatten's reshape target); (id, build, training).
SEVERAL_NODE_OP_MODELS = [
    (
        "batchnorm2d_training",
        lambda: nn.Sequential(
            nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(100, 3)
        ),
        True,
    ),
    (
        "groupnorm_eval",
        lambda: nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.GroupNorm(2, 4), nn.Flatten(), nn.Linear(100, 3)),
        False,
    ),
]


@pytest.mark.parametrize(
    "name, build, training", SEVERAL_NODE_OP_MODELS, ids=[model[0] for model in SEVERAL_NODE_OP_MODELS]
)
def test_dynamic_axes_after_an_op_written_as_several_nodes(name, build, training):
    # The shape the batch changes must be rewritten in the Reshape that reads it, not in whichever
    # ONNX node stands at the Reshape's position among the recorded ops.
    onnxnn.manual_seed(0)
    model = build().train(training)
    proto = to_onnx(
        model,
        onnxnn.randn(2, 3, 5, 5),
        input_names=["input"],
        output_names=["output"],
        dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
        training=training,
    )
    onnx.checker.check_model(proto, full_check=True)
    session = _session(proto)
    for batch in (3, 7):
        x = onnxnn.randn(batch, 3, 5, 5)
        with onnxnn.no_grad():
            expected = model(x).numpy()  # in training mode, with this batch's statistics
        (result,) = session.run(None, {"input": x.numpy()})
        assert result.shape == expected.shape == (batch, 3)
        np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)
    assert model.training is training


@pytest.mark.parametrize("opset", [17, 18, 21, max_opset_version()])
def test_every_supported_opset_exports_and_runs(opset):
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1)).eval()
    x = onnxnn.randn(2, 3)
    proto = to_onnx(model, x, opset_version=opset)
    assert next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")) == opset
    (result,) = _session(proto).run(None, {"input_0": x.numpy()})
    assert_same_model_output(result, model, x)


def test_writes_to_paths_and_file_objects(tmp_path):
    model = nn.Linear(3, 2).eval()
    x = onnxnn.randn(1, 3)
    proto = to_onnx(model, x, tmp_path / "model.onnx")
    assert onnx.load(str(tmp_path / "model.onnx")) == proto
    buffer = io.BytesIO()
    to_onnx(model, x, buffer)
    assert onnx.load_from_string(buffer.getvalue()) == proto


def test_external_data_above_a_threshold(tmp_path):
    model = nn.Linear(64, 64).eval()
    path = tmp_path / "big.onnx"
    proto = to_onnx(model, onnxnn.randn(1, 64), path, external_data=1024)
    assert (tmp_path / "big.onnx.data").exists()
    assert path.stat().st_size < 4096, "weights live in the external file"
    loaded = onnx.load(str(path))
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = onnxnn.randn(1, 64)
    assert_same_model_output(session.run(None, {"input_0": x.numpy()})[0], model, x)
    assert len(proto.graph.initializer) == len(loaded.graph.initializer)


# ---------------------------------------------------------------- writing files

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _linear(seed: int, size: int = 64) -> nn.Module:
    onnxnn.manual_seed(seed)
    return nn.Linear(size, size).eval()


def _files(folder) -> dict:
    return {path.name: path.read_bytes() if path.is_file() else "a folder" for path in sorted(folder.iterdir())}


def _weight_of(path) -> np.ndarray:
    return onnx.numpy_helper.to_array(onnx.load(str(path)).graph.initializer[0])


def _whole(proto: onnx.ModelProto) -> bool:
    """Every weight in the proto itself, none left as a reference to a file."""
    return all(t.HasField("raw_data") and not t.external_data for t in proto.graph.initializer)


@pytest.mark.parametrize("external_data", [None, True], ids=["one_file", "external_data"])
def test_a_failed_write_keeps_the_files_there_before_and_names_the_path(tmp_path, monkeypatch, external_data):
    path = tmp_path / "model.onnx"
    to_onnx(_linear(0), onnxnn.randn(1, 64), path, external_data=external_data)
    before = _files(tmp_path)

    def full_disk(descriptor):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError) as raised:
        to_onnx(_linear(1), onnxnn.randn(1, 64), path, external_data=external_data)
    assert raised.value.errno == errno.ENOSPC and str(path) in str(raised.value)
    assert _files(tmp_path) == before  # the model (and its data) as before, no temporary left


def test_a_write_failing_part_way_keeps_the_files_there_before(tmp_path):
    # RLIMIT_FSIZE makes write() fail with EFBIG once a file would pass 20 kB, as a full disk fails it;
    # in a child process, as it limits every file the process writes.
    for external_data in (None, True):
        folder = tmp_path / str(external_data)
        folder.mkdir()
        to_onnx(_linear(0), onnxnn.randn(1, 64), folder / "model.onnx", external_data=external_data)
    before = {name: _files(tmp_path / name) for name in ("None", "True")}
    script = textwrap.dedent(f"""
        import json, resource, signal
        import onnxnn
        from onnxnn.export import to_onnx
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))
        onnxnn.manual_seed(1)
        model = onnxnn.nn.Linear(128, 128).eval()  # 64 kB of weights
        for external_data in (None, True):
            try:
                path = {str(tmp_path)!r} + "/" + str(external_data) + "/model.onnx"
                to_onnx(model, onnxnn.randn(1, 128), path, external_data=external_data)
                print(json.dumps({{"raised": None}}))
            except BaseException as error:
                print(json.dumps({{"raised": type(error).__name__, "errno": error.errno, "message": str(error)}}))
    """)
    finished = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        cwd=ROOT,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=ROOT),
    )
    outcomes = [json.loads(line) for line in finished.stdout.decode().strip().splitlines()[-2:]]
    for outcome, name in zip(outcomes, ("None", "True")):
        assert outcome["raised"] == "OSError" and outcome["errno"] == errno.EFBIG, (outcome, finished.stderr[-2000:])
        assert str(tmp_path / name / "model.onnx") in outcome["message"]
        assert _files(tmp_path / name) == before[name]


def test_exporting_again_with_external_data_replaces_both_files(tmp_path):
    path = tmp_path / "model.onnx"
    to_onnx(_linear(0), onnxnn.randn(1, 64), path, external_data=True)
    sizes = {name: len(data) for name, data in _files(tmp_path).items()}
    second = _linear(1)
    proto = to_onnx(second, onnxnn.randn(1, 64), path, external_data=True)
    assert {name: len(data) for name, data in _files(tmp_path).items()} == sizes  # replaced, not appended to
    np.testing.assert_array_equal(_weight_of(path), second.weight.detach().numpy())
    assert _whole(proto)


STAGING = re.compile(r"\.model\.onnx\.(\d+)\.[0-9a-f]+\.tmp")


def _staging_folders(folder) -> list[str]:
    """The hidden folders in ``folder``, however named."""
    return sorted(name for name in os.listdir(folder) if name.startswith(".") and (folder / name).is_dir())


def _start_blocked_export(path) -> subprocess.Popen:
    """A child exporting to ``path`` with external data that has written both files in its staging
    folder, not yet moved them, and waits to be killed."""
    script = textwrap.dedent(f"""
        import time
        import onnx
        import onnxnn
        from onnxnn.export import to_onnx

        written = onnx.save_model

        def stalled(*args, **kwargs):
            written(*args, **kwargs)
            print("writing", flush=True)
            time.sleep(600)

        onnx.save_model = stalled
        onnxnn.manual_seed(2)
        to_onnx(onnxnn.nn.Linear(64, 64).eval(), onnxnn.randn(1, 64), {str(path)!r}, external_data=True)
    """)
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT)
    )
    assert child.stdout.readline() == b"writing\n"
    return child


def _kill(child: subprocess.Popen) -> None:
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    child.stdout.close()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("external_data", [True, None], ids=["external_data", "one_file"])
def test_an_export_killed_mid_write_leaves_a_staging_folder_the_next_export_removes(tmp_path, external_data):
    path = tmp_path / "model.onnx"
    to_onnx(_linear(0), onnxnn.randn(1, 64), path, external_data=True)
    before = _files(tmp_path)
    child = _start_blocked_export(path)
    _kill(child)
    leftovers = _staging_folders(tmp_path)
    assert len(leftovers) == 1
    assert sorted(os.listdir(tmp_path / leftovers[0])) == ["model.onnx", "model.onnx.data"]
    assert {name: data for name, data in _files(tmp_path).items() if name not in leftovers} == before
    second = _linear(1)
    to_onnx(second, onnxnn.randn(1, 64), path, external_data=external_data)
    assert _staging_folders(tmp_path) == []
    np.testing.assert_array_equal(_weight_of(path), second.weight.detach().numpy())
    # Discoverable: named for its target and the process that wrote it.
    assert STAGING.fullmatch(leftovers[0]) and STAGING.fullmatch(leftovers[0]).group(1) == str(child.pid)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_live_exports_staging_folder_is_never_removed(tmp_path):
    path = tmp_path / "model.onnx"
    child = _start_blocked_export(path)
    try:
        busy = _staging_folders(tmp_path)
        assert len(busy) == 1
        second = _linear(1)
        to_onnx(second, onnxnn.randn(1, 64), path, external_data=True)  # a concurrent export of the same path
        assert _staging_folders(tmp_path) == busy
        assert sorted(os.listdir(tmp_path / busy[0])) == ["model.onnx", "model.onnx.data"]
        np.testing.assert_array_equal(_weight_of(path), second.weight.detach().numpy())
    finally:
        _kill(child)
    to_onnx(_linear(3), onnxnn.randn(1, 64), path, external_data=True)
    assert _staging_folders(tmp_path) == []


def test_without_flock_only_staging_folders_of_dead_processes_are_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(atomic_write, "fcntl", None)
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    dead, alive, own = (f".model.onnx.{pid}.0a1b.tmp" for pid in (int(finished.stdout), os.getppid(), os.getpid()))
    other = f".other.onnx.{int(finished.stdout)}.0a1b.tmp"  # another target's
    for name in (dead, alive, own, other):
        (tmp_path / name).mkdir()
        (tmp_path / name / "model.onnx.data").write_bytes(b"half")
    to_onnx(_linear(0), onnxnn.randn(1, 64), tmp_path / "model.onnx", external_data=True)
    assert _staging_folders(tmp_path) == sorted([alive, own, other])
    assert (tmp_path / other / "model.onnx.data").read_bytes() == b"half"


def test_external_data_keeps_structural_constants_in_the_file_onnxruntime_loads(tmp_path):
    # A training-mode batch norm reads its statistics' axes from a small int64 constant, which
    # onnxruntime's shape inference must read from the file itself ("Cannot parse data from external
    # tensors" when it was stored beside it); the weight (64 x 64 floats) goes beside it.
    model = onnxnn.nn.Sequential(onnxnn.nn.Linear(64, 64), onnxnn.nn.BatchNorm1d(64))
    path = tmp_path / "model.onnx"
    x = onnxnn.randn(4, 64)
    to_onnx(model, x, path, training=True, external_data=True)
    assert (tmp_path / "model.onnx.data").stat().st_size >= 64 * 64 * 4
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (output,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    assert output.shape == (4, 64)


def test_write_model_leaves_the_callers_proto_whole_when_it_fails(tmp_path, monkeypatch):
    proto = to_onnx(_linear(0), onnxnn.randn(1, 64))

    def full_disk(descriptor):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        write_model(proto, tmp_path / "model.onnx", external_data=True)
    assert _whole(proto) and os.listdir(tmp_path) == []


@pytest.mark.parametrize("external_data", [None, True], ids=["one_file", "external_data"])
def test_a_missing_folder_is_a_file_not_found_error_naming_the_path(tmp_path, external_data):
    path = tmp_path / "missing" / "model.onnx"
    with pytest.raises(FileNotFoundError, match=re.escape(str(path))):
        to_onnx(_linear(0), onnxnn.randn(1, 64), path, external_data=external_data)


def test_training_mode_export_warns_and_keeps_the_mode():
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    with pytest.warns(UserWarning, match="training mode"):
        to_onnx(model, onnxnn.randn(4, 3))
    assert model.training
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        to_onnx(model.eval(), onnxnn.randn(4, 3))


class _CountingCalls(nn.Module):
    """Counts its calls in a non-persistent buffer (not in the state_dict, still the model's state)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("calls", onnxnn.zeros((), dtype=onnxnn.int64), persistent=False)

    def forward(self, x):
        self.calls.add_(1)
        return x


# (id, to_onnx keyword arguments, width the last layer takes (4 runs; 5 is a shape error), error).
# Each export traces a training-mode model whose forward writes its buffers, once or several times.
STATE_KEEPING_EXPORTS = [
    ("plain", {}, 4, None),
    ("training", {"training": True}, 4, None),
    ("dynamic_axes", {"input_names": ["x"], "dynamic_axes": {"x": {0: "batch"}}}, 4, None),
    ("bad_dynamic_axes", {"input_names": ["x"], "dynamic_axes": {"nope": {0: "b"}}}, 4, ValueError),
    ("shape_error_after_batch_norm", {}, 5, RuntimeError),
]


@pytest.mark.parametrize("name, kwargs, width, error", STATE_KEEPING_EXPORTS, ids=[c[0] for c in STATE_KEEPING_EXPORTS])
def test_export_leaves_the_model_buffers_as_they_were(name, kwargs, width, error):
    model = nn.Sequential(_CountingCalls(), nn.BatchNorm1d(3), nn.Linear(3, 4), nn.Linear(width, 2)).train()
    norm = model[1]
    version = norm.running_mean._version
    x = onnxnn.randn(8, 3) * 4 + 10  # batch statistics far from the initial running ones
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the training-mode warning
        if error is None:
            to_onnx(model, x, **kwargs)
        else:
            with pytest.raises(error):
                to_onnx(model, x, **kwargs)
    np.testing.assert_array_equal(norm.running_mean.numpy(), np.zeros(3, np.float32))
    np.testing.assert_array_equal(norm.running_var.numpy(), np.ones(3, np.float32))
    assert norm.num_batches_tracked.item() == 0 and model[0].calls.item() == 0
    assert norm.running_mean._version == version and model.training


def test_multiple_inputs_and_outputs_keep_their_names_and_order():
    class TwoWay(nn.Module):
        def forward(self, a, b):
            return a + b, a * b

    a, b = onnxnn.randn(2, 3), onnxnn.randn(2, 3)
    proto = to_onnx(TwoWay().eval(), (a, b), input_names=["a", "b"], output_names=["sum", "product"])
    assert [i.name for i in proto.graph.input] == ["a", "b"]
    assert [o.name for o in proto.graph.output] == ["sum", "product"]
    total, product = _session(proto).run(None, {"a": a.numpy(), "b": b.numpy()})
    # One correctly rounded float32 operation each: the same bits in every order.
    np.testing.assert_array_equal(total, a.numpy() + b.numpy())
    np.testing.assert_array_equal(product, a.numpy() * b.numpy())


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"opset_version": 12}, ValueError, "opset_version 12 is not supported"),
        ({"opset_version": 99}, ValueError, "opset_version 99 is not supported"),
        ({"input_names": ["a", "b"]}, ValueError, "2 input_names given for 1 inputs"),
        ({"dynamic_axes": {"nope": [0]}}, ValueError, "dynamic_axes names 'nope'"),
    ],
)
def test_bad_arguments_are_clear_errors(kwargs, error, message):
    with pytest.raises(error, match=message):
        to_onnx(nn.Linear(2, 2).eval(), onnxnn.randn(1, 2), **kwargs)


def test_a_non_tensor_argument_is_a_type_error():
    with pytest.raises(TypeError, match="argument 0 must be a Tensor"):
        to_onnx(nn.Linear(2, 2).eval(), "not a tensor")


def test_state_named_like_generated_names_re_exports():
    """Optimized models name folded weights like onnxnn's generated names ("node_0_0",
    "onnxnn::constant_0"); re-exporting the imported module must keep the graph SSA."""
    graph = helper.make_graph(
        [
            helper.make_node("Add", ["x", "node_0_0"], ["a"]),
            helper.make_node("Mul", ["a", "onnxnn::constant_0"], ["b"]),
            helper.make_node("Constant", [], ["c"], value=helper.make_tensor("c", TensorProto.FLOAT, [2], [3.0, 4.0])),
            helper.make_node("Add", ["b", "c"], ["y"]),
        ],
        "names",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [
            helper.make_tensor("node_0_0", TensorProto.FLOAT, [2], [1.0, 2.0]),
            helper.make_tensor("onnxnn::constant_0", TensorProto.FLOAT, [2], [5.0, 6.0]),
        ],
    )
    module = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])).eval()
    x = np.array([0.5, -1.0], np.float32)
    proto = to_onnx(module, onnxnn.tensor(x), input_names=["x"])
    assert {"node_0_0", "onnxnn::constant_0"} <= {tensor.name for tensor in proto.graph.initializer}
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], (x + [1.0, 2.0]) * [5.0, 6.0] + [3.0, 4.0])

"""onnxnn.profiler: torch.profiler's API over onnxnn's recording, planning, compilation and runs."""

from __future__ import annotations

import contextlib
import json
import re
import weakref

import numpy as np
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.ir.mode import MODE
from onnxnn.kernels import compiled_convolutions
from onnxnn.profiler import ProfilerAction, profile, record_function, schedule
from onnxnn.runtime import sessions
from onnxnn.runtime.ops.conv_nchwc import block_size

NODE_KINDS = ("onnxruntime", "kernels", "fused")


def _mlp():
    onnxnn.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def _train_step(model, optimizer, x):
    loss = model(x).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()  # onnxnn is lazy: reading the loss runs what is still pending


def _nodes(prof, name=None):
    return [e for e in prof.events() if e.kind in NODE_KINDS and (name is None or e.name == name)]


@pytest.mark.parametrize("executor", ["kernels", "onnxruntime"])
def test_mlp_forward_backward_counts_each_op_call(executor):
    model = _mlp()
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1)
    x = onnxnn.randn(5, 8)
    steps = 3
    with onnxnn.set_executor(executor), profile() as prof:
        for _ in range(steps):
            _train_step(model, optimizer, x)
    averages = {average.key: average for average in prof.key_averages()}
    # Per step: two Linear forwards (Gemm), one ReLU; backward: dX of the second Linear and dW of both.
    assert averages["Gemm"].count == 5 * steps
    assert averages["Relu"].count == steps
    assert averages["nn.Module: Linear"].count == 2 * steps
    assert averages["onnxnn::backward"].count == steps
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=50)
    for column in ("Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"):
        assert column in table
    # The name column is padded; "Gemm (recomputed)", a row of its own, must not be taken for it.
    gemm_row = next(line for line in table.splitlines() if re.split(r"\s{2,}", line)[0] == "Gemm")
    assert gemm_row.split()[-1] == str(5 * steps)
    assert table.rstrip().splitlines()[-1].startswith("Self CPU time total:")
    assert {e.kind for e in _nodes(prof)} <= ({"kernels"} if executor == "kernels" else {"onnxruntime", "fused"})


def test_onnxruntime_node_events_have_positive_durations_and_map_to_modules():
    model = _mlp()
    with onnxnn.set_executor("onnxruntime"), profile() as prof:
        model(onnxnn.randn(5, 8)).sum().item()
    timed = [e for e in _nodes(prof) if e.kind == "onnxruntime"]
    assert timed and all(e.duration_ns > 0 for e in timed)
    assert all(e.args["provider"] == "CPUExecutionProvider" for e in timed)
    modules = {e.module for e in _nodes(prof) if e.name in ("Gemm", "Relu")}
    assert modules == {"model.0", "model.1", "model.2"}
    names = [e.name for e in prof.events()]
    for phase in (
        "onnxnn::realize",
        "onnxnn::plan",
        "onnxnn::compile",
        "onnxnn::build_model",
        "onnxnn::create_session",
    ):
        assert phase in names


def test_every_kernel_of_a_decomposed_node_is_attributed_to_where_the_node_was_recorded():
    # onnxruntime has no Adam: build_model writes it as ~13 standard nodes per tensor. Each of
    # their kernels is the Adam node's time, so each carries its scope; the node counts once.
    model = _mlp()
    optimizer = onnxnn.optim.Adam(model.parameters(), lr=0.1)
    x = onnxnn.randn(5, 8)
    with onnxnn.set_executor("onnxruntime"), profile() as prof:
        loss = model(x).sum()
        optimizer.zero_grad()
        loss.backward()
        with record_function("optimizer"):
            optimizer.step()
        model[0].weight.detach().numpy()
    timed = [e for e in _nodes(prof) if e.kind == "onnxruntime"]
    update = [e for e in timed if "optimizer" in e.scope]
    assert {"Adam", "Sub", "Mul", "Sqrt", "Div"} <= {e.name for e in update}
    assert sum(e.name == "Adam" for e in update) == 1
    unattributed = [e.name for e in timed if e.module is None and not e.scope and e.name != "Adam"]
    assert not [name for name in unattributed if name in ("Sub", "Sqrt", "Div")]
    # A decomposition's kernel never lends its time to another node (its names' counts are not plan indices).
    assert all(e.args["onnxruntime_kernel"] in ("Gemm", "FusedGemm") for e in timed if e.name == "Gemm")


def test_the_profiled_session_runs_the_graph_onnxnn_runs_with_its_lowerings():
    # A Conv with a fed weight over 2x2 images runs as one GEMM in onnxnn's sessions
    # (runtime/ops/conv_lowering.py); a profile timing onnxruntime's Conv instead would blame a kernel
    # that never runs.
    x = onnxnn.randn(4, 64, 2, 2)
    weight = onnxnn.randn(128, 64, 3, 3)
    with onnxnn.set_executor("onnxruntime"), profile() as prof:
        onnxnn.nn.functional.conv2d(x, weight, padding=1).numpy()
    kernels = {e.args["onnxruntime_kernel"] for e in _nodes(prof) if e.kind == "onnxruntime"}
    assert "MatMul" in kernels and "Conv" not in kernels


@pytest.mark.skipif(block_size() is None, reason="onnxruntime has no blocked-channel kernels on this CPU")
def test_a_blocked_convolution_counts_once_under_its_own_kernel():
    # On the blocked-channel layout a Conv runs as ReorderInput, Conv and ReorderOutput kernels. The
    # Conv kernel carries the node's name whichever comes first; the reorders are named as they are.
    x = onnxnn.randn(4, 16, 32, 32)
    weight = onnxnn.randn(16, 16, 3, 3)
    runs = 2
    with onnxnn.set_executor("onnxruntime"), profile() as prof:
        for _ in range(runs):
            onnxnn.nn.functional.conv2d(x, weight, padding=1).numpy()
    timed = [e for e in _nodes(prof) if e.kind == "onnxruntime"]
    assert {"ReorderInput", "ReorderOutput"} <= {e.args["onnxruntime_kernel"] for e in timed}
    assert [e.name for e in timed] == [e.args["onnxruntime_kernel"] for e in timed]
    assert sum(e.name == "Conv" for e in timed) == runs


@pytest.mark.skipif(not compiled_convolutions.available(), reason=f"{compiled_convolutions.unavailable_reason()}")
def test_a_profiled_step_runs_its_weight_gradients_compiled_as_onnxnn_does():
    # onnxnn's sessions run a small convolution's weight gradient as a compiled loop between two
    # sessions (runtime/split_sessions.py); the profile times that loop, not onnxruntime's GEMMs.
    layer = nn.Conv2d(8, 16, 3, padding=1)
    x = onnxnn.randn(4, 8, 12, 12)
    expected_weight = None
    with onnxnn.set_executor("onnxruntime"):
        for profiled in (False, True):
            with profile() if profiled else contextlib.nullcontext() as prof:
                layer.weight.grad = None
                layer(x).square().sum().backward()
                gradient = layer.weight.grad.numpy()
            if not profiled:
                expected_weight = gradient
    compiled = _nodes(prof, "ConvWeightGradient")
    assert len(compiled) == 1 and compiled[0].kind == "kernels" and compiled[0].args["compiled"]
    assert compiled[0].duration_ns > 0
    kernels = {e.args.get("onnxruntime_kernel") for e in _nodes(prof) if e.kind == "onnxruntime"}
    assert "Conv" in kernels and "MatMul" not in kernels  # the forward ran; no GEMM per tap did
    np.testing.assert_array_equal(gradient, expected_weight)  # the same graph, the same values


@pytest.mark.parametrize("executor", ["kernels", "onnxruntime"])
def test_a_profile_keeps_no_array_of_the_steps_it_timed(executor):
    # Holding them would make every later run write fresh memory: the profile would time page faults.
    model = _mlp()
    with onnxnn.set_executor(executor), profile() as prof:
        array = np.ones((5, 8), np.float32)
        freed = weakref.ref(array)
        model(onnxnn.from_numpy(array)).sum().item()
        del array
        assert freed() is None
    assert any(e.name == "Gemm" for e in _nodes(prof))


def test_module_attribution_on_the_kernels_executor():
    model = _mlp()
    with onnxnn.set_executor("kernels"), profile() as prof:
        model(onnxnn.randn(5, 8)).sum().item()
    by_module = {(e.name, e.module) for e in _nodes(prof)}
    assert {("Gemm", "model.0"), ("Relu", "model.1"), ("Gemm", "model.2")} <= by_module
    assert all(e.duration_ns >= 0 for e in _nodes(prof))


def test_record_function_ranges_contain_their_ops_and_appear_in_the_trace(tmp_path):
    model = _mlp()

    @record_function("decorated")
    def inner(x):
        return (x * 2).sum().item()

    with profile() as prof:
        with record_function("forward_pass"):
            value = model(onnxnn.randn(5, 8)).sum().item()
        inner(onnxnn.randn(3))
    assert isinstance(value, float)
    events = prof.events()
    (forward_range,) = [e for e in events if e.name == "forward_pass"]
    (decorated,) = [e for e in events if e.name == "decorated"]
    inside = [e for e in _nodes(prof) if "forward_pass" in e.scope]
    assert {"Gemm", "Relu"} <= {e.name for e in inside}
    for event in inside:  # realized inside the range: its interval holds theirs
        assert forward_range.start_ns <= event.start_ns and event.end_ns <= forward_range.end_ns
    assert any(e.name == "Mul" and "decorated" in e.scope for e in _nodes(prof))
    assert decorated.end_ns <= forward_range.start_ns or decorated.start_ns >= forward_range.end_ns
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    assert {"forward_pass", "decorated", "Gemm"} <= {e["name"] for e in trace["traceEvents"]}


def test_chrome_trace_is_valid_json_whose_events_nest(tmp_path):
    model = _mlp()
    with profile(record_shapes=True) as prof:
        with record_function("step"):
            loss = model(onnxnn.randn(5, 8)).sum()
            loss.backward()
            loss.item()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    assert events and all(e["ph"] == "X" for e in events)
    for event in events:
        assert {"name", "ts", "dur", "pid", "tid", "args"} <= set(event)
        assert event["dur"] >= 0
    # Events on one thread never partly overlap: each lies within the one before it or after it.
    # (1e-3 us: times are whole nanoseconds written as float microseconds.)
    by_thread: dict = {}
    for event in events:
        by_thread.setdefault(event["tid"], []).append(event)
    for thread_events in by_thread.values():
        thread_events.sort(key=lambda e: (e["ts"], -e["dur"]))
        open_ends: list = []
        for event in thread_events:
            while open_ends and event["ts"] >= open_ends[-1] - 1e-3:
                open_ends.pop()
            if open_ends:
                assert event["ts"] + event["dur"] <= open_ends[-1] + 1e-3
            open_ends.append(event["ts"] + event["dur"])
    # And the profiler's own parent links agree: each child lies within its parent.
    for event in prof.events():
        if event.parent is not None:
            assert event.parent.start_ns <= event.start_ns and event.end_ns <= event.parent.end_ns
    gemm = next(e for e in events if e["name"] == "Gemm" and e["args"].get("module") == "model.0")
    assert gemm["args"]["Input Dims"] == [[5, 8], [16, 8], [16]]


def test_record_shapes_memory_and_stack():
    model = _mlp()
    with profile(record_shapes=True, profile_memory=True, with_stack=True, with_flops=True) as prof:
        model(onnxnn.randn(5, 8)).sum().item()
    gemm = next(e for e in _nodes(prof, "Gemm") if e.module == "model.0")
    assert gemm.input_shapes == [[5, 8], [16, 8], [16]]
    assert gemm.cpu_memory_usage == 5 * 16 * 4  # one float32 [5, 16] output
    assert gemm.flops == 2 * 5 * 16 * 8
    assert any(__file__ in frame for frame in gemm.stack)
    grouped = prof.key_averages(group_by_input_shape=True)
    assert {str(a.input_shapes) for a in grouped if a.key == "Gemm"} == {
        str([[5, 8], [16, 8], [16]]),
        str([[5, 16], [4, 16], [4]]),
    }
    assert "Input Shapes" in grouped.table(row_limit=5)
    assert "CPU Mem" in prof.key_averages().table(sort_by="cpu_memory_usage", row_limit=5)


@pytest.mark.parametrize(
    "wait, warmup, active, repeat, skip_first, expected",
    [
        (1, 1, 2, 1, 0, ["NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE", "NONE", "NONE"]),
        (0, 0, 1, 0, 0, ["RECORD_AND_SAVE"] * 6),
        (1, 0, 1, 2, 1, ["NONE", "NONE", "RECORD_AND_SAVE", "NONE", "RECORD_AND_SAVE", "NONE"]),
    ],
)
def test_schedule_actions(wait, warmup, active, repeat, skip_first, expected):
    action = schedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first)
    assert [action(step).name for step in range(6)] == expected
    assert all(isinstance(action(step), ProfilerAction) for step in range(3))


def test_schedule_records_only_active_steps():
    model = _mlp()
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1)
    x = onnxnn.randn(5, 8)
    ready = []
    plan = schedule(wait=1, warmup=1, active=2, repeat=1)
    with profile(schedule=plan, on_trace_ready=lambda p: ready.append(list(p.events()))) as prof:
        for _ in range(6):
            _train_step(model, optimizer, x)
            prof.step()
    assert len(ready) == 1
    steps = sorted(e.name for e in ready[0] if e.name.startswith("ProfilerStep#"))
    assert steps == ["ProfilerStep#2", "ProfilerStep#3"]
    assert sum(1 for e in ready[0] if e.name == "nn.Module: Linear") == 2 * 2
    assert sum(1 for e in ready[0] if e.name == "Gemm") == 5 * 2


def test_no_profiler_leaves_normal_sessions_unprofiled_and_modes_restored():
    model = _mlp()
    before = (MODE.profiler, MODE.observer, MODE.fast_path)
    with pytest.raises(ZeroDivisionError), profile():
        model(onnxnn.randn(5, 8)).sum().item()
        raise ZeroDivisionError
    assert (MODE.profiler, MODE.observer, MODE.fast_path) == before
    assert MODE.profiler is None and MODE.observer is None
    onnxnn.manual_seed(3)
    with onnxnn.set_executor("onnxruntime"):
        model(onnxnn.randn(7, 8)).sum().item()  # a new structure: a normal session is compiled
    for runner in sessions.ONNXRUNTIME.cache.sessions.values():
        parts = (
            [run for run, _, is_session, _ in runner.stages if is_session] if hasattr(runner, "stages") else [runner]
        )
        for session in parts:
            assert not session.session.get_session_options().enable_profiling
    with profile() as prof:  # module hooks were removed: nothing recorded outside a profile
        pass
    model(onnxnn.randn(5, 8)).sum().item()
    assert not [e for e in prof.events() if e.name.startswith("nn.Module")]


def test_errors():
    model = _mlp()
    with profile() as prof:
        model(onnxnn.randn(5, 8)).sum().item()
    with pytest.raises(ValueError, match="cpu_time_total.*self_cpu_time_total.*count"):
        prof.key_averages().table(sort_by="bogus")
    fresh = profile()
    with pytest.raises(RuntimeError, match="no profile has been recorded"):
        fresh.export_chrome_trace("never_written.json")
    with pytest.raises(RuntimeError, match="no profile has been recorded"):
        fresh.key_averages()
    with pytest.raises(ValueError, match="active"):
        schedule(wait=1, warmup=0, active=0)
    with pytest.raises(RuntimeError, match="record_shapes"):
        prof.key_averages(group_by_input_shape=True)
    with profile(), pytest.raises(RuntimeError, match="already running"):
        profile().start()
    assert MODE.profiler is None


def test_results_are_the_same_with_and_without_the_profiler():
    model = _mlp()
    x = onnxnn.randn(5, 8)
    expected = model(x).detach().numpy()
    with profile():
        profiled = model(x).detach().numpy()
    assert (profiled == expected).all()


def test_export_stacks_writes_flame_graph_lines_of_the_users_frames(tmp_path):
    model = _mlp()
    x = onnxnn.randn(5, 8)
    model(x).sum().item()
    with profile(with_stack=True) as prof:
        model(x).sum().item()
    path = tmp_path / "stacks.txt"
    prof.export_stacks(str(path))
    lines = path.read_text().splitlines()
    assert lines, "no stack recorded"
    for line in lines:
        frames, microseconds = line.rsplit(" ", 1)
        assert int(microseconds) >= 0
        assert "test_profiler.py" in frames  # the user's line that recorded the op, not onnxnn's
    assert any(line.rsplit(" ", 1)[0].endswith(";Gemm") for line in lines)
    with pytest.raises(ValueError, match="unknown metric"):
        prof.export_stacks(str(path), metric="wall_time")


@pytest.mark.parametrize("use_gzip", [False, True])
def test_tensorboard_trace_handler_writes_one_trace_per_window(tmp_path, use_gzip):
    import gzip

    from onnxnn.profiler import tensorboard_trace_handler

    model = _mlp()
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1)
    x = onnxnn.randn(5, 8)
    handler = tensorboard_trace_handler(str(tmp_path / "runs"), worker_name="worker0", use_gzip=use_gzip)
    with profile(schedule=schedule(wait=0, warmup=1, active=1, repeat=2), on_trace_ready=handler) as prof:
        for _ in range(4):
            _train_step(model, optimizer, x)
            prof.step()
    files = sorted((tmp_path / "runs").iterdir())
    assert len(files) == 2 and all(f.name.startswith("worker0.") for f in files)
    for file in files:
        assert file.name.endswith(".pt.trace.json.gz" if use_gzip else ".pt.trace.json")
        text = gzip.decompress(file.read_bytes()) if use_gzip else file.read_bytes()
        assert any(event["name"] == "Gemm" for event in json.loads(text)["traceEvents"])

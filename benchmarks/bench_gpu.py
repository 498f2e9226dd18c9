"""onnxnn on a CUDA GPU against PyTorch CUDA eager and raw onnxruntime CUDA sessions, one JSON line per workload.

Workloads:

- ``mlp_adam_train``: MLP 784-512-512-10 (bench_vs_torch's), cross entropy, one Adam step,
  batch 64 (``--batch``).
- ``small_resnet_sgd_train``: bench_vs_torch's small ResNet (two stages of BasicBlocks with
  BatchNorm) on 32x32 images, batch 32, one SGD-with-momentum step, training mode.
- ``resnet50_infer``: ``onnxnn.models.vision.resnet50`` (random initialization) in ``eval()``,
  a forward under ``no_grad`` on 224x224 images, batch 8 (``--infer-batch``);
  ``resnet50_infer_compiled``: the same through ``onnxnn.compile`` (its calls run their graph
  directly, and on a GPU replay it as a CUDA graph). PyTorch's twin is
  ``torchvision.models.resnet50()`` with onnxnn's weights; without torchvision the row says so.

The contenders, in one process, each from the same initial weights (copied into PyTorch's model
with ``_same_weights``) and the same batch, already on the device:

- onnxnn: ``model.to(device)``, inputs ``onnxnn.from_numpy(array).to(device)``.
- torch: the same module in PyTorch eager, ``.to(device)``, with ``cudnn.benchmark`` on and TF32 off (onnxruntime's
  CUDA provider also searches cuDNN's algorithms); rows record PyTorch's TF32 settings.
- onnxruntime: the same computation as one ONNX graph in an ``InferenceSession`` with the CUDA
  provider, run with io_binding (the best raw onnxruntime can do): inputs bound once as OrtValues
  on the device, outputs bound to the device. Training rows run the step that
  ``onnxnn.export.training_step_to_onnx`` records; two bindings take turns, each fed the other's
  output buffers (parameters, buffers, optimizer state), so the state never leaves the device and
  nothing is rebound between steps. The inference row runs the graph ``to_onnx`` exports.

Inference takes a different input each call, from four prepared on the device, as bench_vs_torch's
inference rows do (on the CPU, onnxnn folds a forward whose input and weights never change into a
constant). A baseline that cannot run (no torch, no CUDA build of it, no torchvision, an exported
step onnxruntime rejects) has null times and its reason under ``skipped``. A row onnxnn cannot run
prints its traceback and gets ``error``; the other rows still run, and the exit code is then 1.

Every call ends by reading one number on the host, the same for every contender: training steps
read the loss (``loss.item()``; onnxruntime's loss output is bound to host memory), inference
reads ``output.sum().item()`` (onnxruntime's graph gets the same ReduceSum as an extra output bound
to host memory; its logits stay on the device). So each time covers the whole computation and one
synchronization. Timings are bench_vs_torch's interleaved blocks (``_interleaved``): per-framework
medians, and ``vs_torch`` / ``vs_onnxruntime`` = the median over blocks of ``onnxnn time / other
time`` (below 1: onnxnn is faster), with its quartiles as the ``spread``. ``results`` holds each
contender's first and last warm-up loss (or output sum): they start equal and stay close when the
three compute the same thing (``results_agree``: within 1%).

``--device cpu`` runs everything on the CPU (CPU provider, OrtValues in host memory), to check the
script on a machine without a GPU. ``--device cuda`` (the default) stops with exit code 2 when
``onnxnn.cuda.is_available()`` is False.

Run: python benchmarks/bench_gpu.py [--device cuda|cpu] [--only NAME ...] [--quick] [--batch N]
     [--infer-batch N] [--blocks N] [--block-seconds S]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import onnxruntime
from onnx import helper

import onnxnn
from onnxnn.export import to_onnx, training_step_to_onnx
from onnxnn.ir.device_arrays import execution_provider
from onnxnn.models.vision import resnet50

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_vs_torch import (  # noqa: E402
    _apply_threads,
    _cores,
    _interleaved,
    _mlp,
    _same_weights,
    _small_resnet,
    classifier,
    keep_freed_memory,
    torch,
)

try:
    import torchvision  # type: ignore[import-not-found]
except ImportError:  # the PyTorch contender of resnet50_infer is left out
    torchvision = None

WARMUP = {"train": 10, "infer": 4}  # onnxnn traces and compiles in its first calls; cuDNN picks algorithms


def _torch_missing(device: str) -> str | None:
    """Why PyTorch cannot take part on ``device``, or None."""
    if torch is None:
        return "torch is not installed"
    if device == "cuda" and not torch.cuda.is_available():
        return f"torch.cuda.is_available() is False (torch {torch.__version__})"
    return None


# --- the contenders: each a function that runs one call and returns the number it reads --------


def _framework_train(library, build, optimizer_name: str, x: np.ndarray, y: np.ndarray, device: str, weights_from):
    model, optimizer = classifier(library, build, optimizer_name)
    if weights_from is not None:
        _same_weights(weights_from, model)
    model.to(device)
    inputs, labels = library.from_numpy(x.copy()).to(device), library.from_numpy(y.copy()).to(device)
    loss_function = library.nn.CrossEntropyLoss()

    def step() -> float:
        optimizer.zero_grad()
        loss = loss_function(model(inputs), labels)
        loss.backward()
        optimizer.step()
        return loss.item()

    return step


def _framework_infer(library, model, xs: list, device: str, compiled: bool = False):
    model.eval().to(device)
    if compiled:  # onnxnn.compile: calls run their graph directly, replayed as a CUDA graph on a GPU
        model = library.compile(model)
    inputs = [library.from_numpy(x.copy()).to(device) for x in xs]
    count = [0]

    def forward() -> float:
        count[0] += 1
        with library.no_grad():
            return model(inputs[count[0] % len(inputs)]).sum().item()

    return forward


def _raw_session(proto, device: str):
    # onnxnn's own provider options (TF32 off, as onnxnn's sessions run), so both compute alike
    providers = list(execution_provider(onnxnn.device("cuda"))) if device == "cuda" else ["CPUExecutionProvider"]
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=providers)
    if device == "cuda" and session.get_providers()[0] != "CUDAExecutionProvider":
        raise RuntimeError(f"onnxruntime gave the session {session.get_providers()}, not CUDA")
    return session, (lambda array: onnxruntime.OrtValue.ortvalue_from_numpy(array, device, 0))


def _host_scalar(binding, name: str):
    """Binds output ``name`` to a float32 scalar in host memory; returns it (read with ``.numpy()``)."""
    value = onnxruntime.OrtValue.ortvalue_from_shape_and_type([], np.float32, "cpu", 0)
    binding.bind_ortvalue_output(name, value)
    return value


def _raw_train(build, optimizer_name: str, x: np.ndarray, y: np.ndarray, device: str):
    """The exported training step with state fed back on the device; two bindings take turns."""
    model, optimizer = classifier(onnxnn, build, optimizer_name)
    # Recorded on the device, so the gradients take the forms onnxnn records there (its CUDA graphs)
    model.to(device)
    batch = (onnxnn.tensor(x, device=device), onnxnn.tensor(y, device=device))
    proto, signature = training_step_to_onnx(model, onnxnn.nn.CrossEntropyLoss(), optimizer, batch)
    session, place = _raw_session(proto, device)
    names = [output.name for output in session.get_outputs()]
    bindings = [session.io_binding(), session.io_binding()]
    losses = []
    for binding in bindings:
        for name, array in zip(signature.batch, (x, y)):
            binding.bind_ortvalue_input(name, place(array))
        for name in names:  # in the session's order, which get_outputs() then follows
            if name == signature.loss:
                losses.append(_host_scalar(binding, name))
            else:
                binding.bind_output(name, device, 0)

    def feed(binding, values: dict) -> None:  # values: {input name: OrtValue}
        for name in signature.state:
            binding.bind_ortvalue_input(name, values[name])

    def outputs(binding) -> dict:  # the state a run produced, by the input name it feeds
        produced = dict(zip(names, binding.get_outputs()))
        return {name: produced[next_name] for name, next_name in signature.state.items()}

    def pointers() -> list:
        return [value.data_ptr() for binding in bindings for value in binding.get_outputs()]

    count = [0]

    def step() -> float:
        index = count[0] % 2
        session.run_with_iobinding(bindings[index])
        count[0] += 1
        return float(losses[index].numpy())

    # Steps 1 and 2 allocate each binding's outputs and bind them as the other's inputs. From then on
    # onnxruntime writes each step's results into the buffers the other binding reads, so nothing is
    # rebound: steps 3 and 4 check that the buffers stayed the same.
    feed(bindings[0], {name: place(array) for name, array in signature.initial_state.items()})
    done = [step()]
    feed(bindings[1], outputs(bindings[0]))
    done.append(step())
    feed(bindings[0], outputs(bindings[1]))
    before = pointers()
    done += [step(), step()]
    if pointers() != before:
        raise RuntimeError("onnxruntime allocated new output buffers: the bound state would be stale")
    return step, done


def _resnet50_graph(model, x: np.ndarray):
    """``to_onnx``'s graph of ``model`` (input ``x``, logits ``y``) plus ``y_sum``, the sum the others read."""
    proto = to_onnx(model, onnxnn.from_numpy(x.copy()), input_names=["x"], output_names=["y"])
    proto.graph.node.append(helper.make_node("ReduceSum", ["y"], ["y_sum"], keepdims=0))
    proto.graph.output.append(
        helper.make_tensor_value_info("y_sum", proto.graph.output[0].type.tensor_type.elem_type, [])
    )
    return proto


def _raw_infer(proto, xs: list, device: str):
    session, place = _raw_session(proto, device)
    bindings = [session.io_binding() for _ in xs]  # one per input: nothing is rebound between calls
    for binding, x in zip(bindings, xs):
        binding.bind_ortvalue_input("x", place(x))
        binding.bind_output("y", device, 0)
    totals = [_host_scalar(binding, "y_sum") for binding in bindings]
    count = [0]

    def forward() -> float:
        count[0] += 1
        index = count[0] % len(bindings)
        session.run_with_iobinding(bindings[index])
        return float(totals[index].numpy())

    return forward


# --- rows ------------------------------------------------------------------------------------


def _run_row(builders: dict, skipped: dict, warmup: int, settings) -> dict:
    """Times contenders ``name: build() -> (call, results of the calls build made)`` after ``warmup`` calls each."""
    contenders, results = {}, {}
    for name, build in builders.items():
        try:
            call, done = build()
            values = done + [call() for _ in range(warmup - len(done))]
        except Exception as error:  # a baseline that cannot run (say, a step the exporter cannot express)
            if name == "onnxnn":
                raise
            skipped[name] = f"{type(error).__name__}: {error}"
            continue
        contenders[name] = (call, lambda: None)  # every call reads its result on the host
        results[name] = [values[0], values[-1]]
    timed = _interleaved(contenders, settings.blocks, settings.block_seconds)
    row = {f"{name}_ms": timed.get(f"{name}_ms") for name in ("onnxnn", "torch", "onnxruntime")}
    row.update({f"vs_{name}": timed.get(f"ratio_onnxnn_to_{name}") for name in ("torch", "onnxruntime")})
    row["spread"] = {name: timed[f"ratio_onnxnn_to_{name}_quartiles"] for name in contenders if name != "onnxnn"}
    reference = results["onnxnn"]
    agree = all(np.allclose(values, reference, rtol=1e-2, atol=1e-3) for values in results.values())
    return {
        **row,
        "results": results,
        "results_agree": agree,
        "skipped": skipped,
        "calls_per_block": timed["calls_per_block"],
    }


def _training_row(build, input_shape, optimizer_name: str, settings) -> dict:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(input_shape).astype(np.float32)
    y = rng.integers(0, 10, input_shape[0]).astype(np.int64)
    device, skipped = settings.device, {}
    initial, _ = classifier(onnxnn, build, optimizer_name)  # onnxnn's seeded weights, copied into PyTorch's model
    builders: dict = {"onnxnn": lambda: (_framework_train(onnxnn, build, optimizer_name, x, y, device, None), [])}
    reason = _torch_missing(device)
    if reason is None:
        builders["torch"] = lambda: (_framework_train(torch, build, optimizer_name, x, y, device, initial), [])
    else:
        skipped["torch"] = reason
    builders["onnxruntime"] = lambda: _raw_train(build, optimizer_name, x, y, device)
    return {"batch": input_shape[0], **_run_row(builders, skipped, WARMUP["train"], settings)}


def bench_mlp_adam_train(settings) -> dict:
    return _training_row(_mlp, (settings.batch, 784), "adam", settings)


def bench_small_resnet_sgd_train(settings) -> dict:
    return _training_row(_small_resnet, (32, 3, 32, 32), "sgd", settings)


def bench_resnet50_infer(settings, compiled: bool = False) -> dict:
    x = np.random.default_rng(0).standard_normal((settings.infer_batch, 3, 224, 224)).astype(np.float32)
    xs = [x + np.float32(index * 1e-3) for index in range(4)]
    onnxnn.manual_seed(0)
    model = resnet50().eval()
    for tensor in model.state_dict().values():
        tensor.numpy()  # realized state, as in a module loaded from a checkpoint (bench_vs_torch does the same)
    proto = _resnet50_graph(model, x)
    device, skipped = settings.device, {}
    builders: dict = {"onnxnn": lambda: (_framework_infer(onnxnn, model, xs, device, compiled), [])}
    reason = _torch_missing(device) or (None if torchvision is not None else "torchvision is not installed")
    if reason is None:
        twin = torchvision.models.resnet50()
        _same_weights(model, twin)  # before onnxnn's model moves to the device
        builders["torch"] = lambda: (_framework_infer(torch, twin, xs, device), [])
    else:
        skipped["torch"] = reason
    builders["onnxruntime"] = lambda: (_raw_infer(proto, xs, device), [])
    return {"batch": settings.infer_batch, **_run_row(builders, skipped, WARMUP["infer"], settings)}


WORKLOADS = {
    "mlp_adam_train": bench_mlp_adam_train,
    "small_resnet_sgd_train": bench_small_resnet_sgd_train,
    "resnet50_infer": bench_resnet50_infer,
    "resnet50_infer_compiled": lambda settings: bench_resnet50_infer(settings, compiled=True),
}


_COLUMNS = [  # (heading, row key, alignment and width, number format)
    ("workload", "workload", "<24", ""),
    ("batch", "batch", ">6", ""),
    ("onnxnn ms", "onnxnn_ms", ">11", ".3f"),
    ("torch ms", "torch_ms", ">10", ".3f"),
    ("ort ms", "onnxruntime_ms", ">10", ".3f"),
    ("vs torch", "vs_torch", ">10", ".2f"),
    ("vs ort", "vs_onnxruntime", ">8", ".2f"),
]


def _table(rows: list) -> str:
    lines = ["".join(format(heading, align) for heading, _, align, _ in _COLUMNS)]
    for row in rows:
        cells = ["-" if row.get(key) is None else format(row[key], form) for _, key, _, form in _COLUMNS]
        lines.append("".join(format(cell, align) for cell, (_, _, align, _) in zip(cells, _COLUMNS)))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--only", nargs="+", default=[], help="workloads whose name contains any of these")
    parser.add_argument("--quick", action="store_true", help="fewer and shorter blocks (a rough figure)")
    parser.add_argument("--batch", type=int, default=64, help="mlp_adam_train's batch")
    parser.add_argument("--infer-batch", type=int, default=8, help="resnet50_infer's batch")
    parser.add_argument("--blocks", type=int, help="timing blocks per row (default 9, 5 with --quick)")
    parser.add_argument("--block-seconds", type=float, help="seconds per block (default 0.15, 0.05 with --quick)")
    settings = parser.parse_args()
    if settings.device == "cuda" and not onnxnn.cuda.is_available():
        parser.error(
            "--device cuda: CUDA is not available to onnxnn (onnxnn.cuda.is_available() is False: no GPU, or "
            "onnxruntime's CUDA provider cannot load); --device cpu runs the same script on the CPU"
        )
    settings.blocks = settings.blocks or (5 if settings.quick else 9)
    settings.block_seconds = settings.block_seconds or (0.05 if settings.quick else 0.15)
    allocator = keep_freed_memory()  # bench_vs_torch's default: PyTorch's CPU temporaries at their best
    _apply_threads(None)  # one intra-op thread per core for onnxnn and PyTorch (raw sessions: their default)
    if torch is not None:
        # PyTorch at its best, as onnxruntime's CUDA provider, which searches every cuDNN algorithm by default.
        torch.backends.cudnn.benchmark = True
        # float32 products and convolutions in float32 for all three (onnxnn turns TF32 off, as
        # PyTorch's matmul default; PyTorch's cuDNN default would use TF32 for its convolutions)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    selected = [name for name in WORKLOADS if not settings.only or any(part in name for part in settings.only)]
    rows, failed = [], False
    for name in selected:
        start = time.perf_counter()
        row = {"workload": name, "device": settings.device}
        try:
            row.update(WORKLOADS[name](settings))
        except Exception as error:  # onnxnn cannot run this row (yet): the others still run
            traceback.print_exc()
            row["error"], failed = f"{type(error).__name__}: {error}", True
        row["threads"] = f"default ({_cores()})"
        row["allocator"] = allocator
        row["onnxruntime_version"] = onnxruntime.__version__
        if torch is not None:
            row["torch_version"] = torch.__version__
            if settings.device == "cuda":
                row["torch_cuda"] = {
                    "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
                    "tf32_cudnn": torch.backends.cudnn.allow_tf32,
                    "cudnn_benchmark": torch.backends.cudnn.benchmark,
                }
        row["bench_seconds"] = round(time.perf_counter() - start, 1)
        print(json.dumps(row), flush=True)
        rows.append(row)
    print(_table(rows))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

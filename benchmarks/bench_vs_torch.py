"""Issue 16's table: onnxnn against PyTorch eager and against raw onnxruntime sessions, one JSON line per workload.

Workloads (the issue's rows):

- ``note_loop``: the modules note's loop with ``nn.Linear`` (Net 4-3-1, SGD with momentum and
  weight decay, loss ``abs``), one step per call.
- ``mlp_adam_bN``: MLP 784-512-512-10, cross entropy, one Adam step, batch N in 1/16/64/256/1024.
- ``mlp_<optimizer>_b16`` (beyond the issue's table): the same MLP's step at batch 16 with each other
  optimizer whose update is one fused node (SGD without momentum, AdamW, RMSprop, Adagrad, Adamax,
  NAdam, RAdam, Adadelta, ASGD, Rprop), at its default hyperparameters and ``lr=1e-3``.
- ``transformer_layer_adam_b8`` (beyond the issue's table): a ``TransformerEncoderLayer(256, 4, 1024)``
  Adam step on 8 sequences of 64 tokens, mean squared error against fixed targets.
- ``lstm_adam_b16``, ``gru_adam_b16`` (beyond the issue's table): an ``LSTM(128, 256)``'s or a
  ``GRU(128, 256)``'s Adam step over 32 time steps of a batch of 16, mean squared error of its
  output sequence against fixed targets.
- ``small_resnet_b32``: a ResNet of two stages (BasicBlocks with BatchNorm) on 32x32 images,
  batch 32, one SGD-with-momentum step, training mode.
- ``resnet18_imported_b8``: ResNet-18 (torchvision's layout) built with ``onnxnn.nn``, exported
  with ``to_onnx`` and loaded back with ``from_onnx``; one SGD-with-momentum training step at
  batch 8 on 64x64 images (224x224 would take seconds per step on one core). The exported graph
  is in evaluation form (BatchNormalization with running statistics), so PyTorch's twin runs in
  ``eval()`` too: the same arithmetic, gradients through every weight.
- ``infer_{mlp,cnn,transformer,resnet18}``: a forward under ``no_grad`` (``module(x).numpy()``)
  against ``InferenceSession.run`` of the graph ``to_onnx`` exported for the same module (the
  resnet18 row: the imported model against a session of its file). The ``_compiled`` rows call
  ``onnxnn.compile(module)`` instead, which runs a traced call's session without the forward's
  Python (the CNN's blocks are a user's classes, whose forwards a plain call runs every time).
- ``first_step``: in fresh processes, the first training step of the note's loop and of the MLP
  (batch 16), and the first forward of the MLP, after the imports and the model's construction
  (the import times are reported beside them).

Every row runs with one intra-op thread for every framework (``threads=1``) and again with each
framework's default (``threads=default``: one per core). Timings are interleaved blocks
alternating which framework goes first, so that the drifting load of a shared machine falls on all
alike; each row gives per-framework medians, and the ratio ``onnxnn / other`` as the median of the
per-block ratios with its quartiles (the spread). PyTorch rows appear only when torch imports.
Each block starts after one untimed call, and every framework's pool stops spinning when its work
ends (the onnxruntime sessions' ``session.force_spinning_stop``, as onnxnn's own): on every core,
one framework's threads still spinning took the cores from the next block's (the first onnxnn
step after a block of PyTorch's, MLP batch 64 on two cores: 4-9 ms against 2.9).

The allocator (``--allocator``): by default the process tells glibc's malloc to keep the memory
it frees (``mallopt``: no trimming, mmap only above 32 MB), so that no framework pays page faults
for memory it allocated and freed before. PyTorch's CPU tensors come from malloc; with glibc's
defaults, whether its temporaries fault in fresh pages every step depends on the process's
history, and its step times with them swing by up to 2x from row to row (MLP batch 16: Adam
2.3 against 1.2 ms). onnxnn's own buffers (onnxruntime's arena, the kernels' recycled buffers)
change by a few percent. So the default is PyTorch at its best; ``--allocator default`` measures
glibc's defaults. Every row says which it ran with. The ``first_step`` rows always start fresh
processes with glibc's defaults.

The optimizer updates run as compiled loops where onnxnn's install built them (kernels/update_loops.c;
each row says whether they ran), as numpy passes where it did not or with
``ONNXNN_COMPILED_UPDATES=0``.

Run: python benchmarks/bench_vs_torch.py [--only NAME ...] [--quick] [--threads 1|default|both]
     [--allocator kept|default]
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime

import onnxnn
from onnxnn.export import to_onnx
from onnxnn.import_ import from_onnx
from onnxnn.kernels import compiled_updates

try:
    import torch
except ImportError:  # the onnxruntime-relative rows still run
    torch = None

MLP_BATCHES = (1, 16, 64, 256, 1024)


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


# --- models, written once for either library (onnxnn mirrors torch's API) ---------------------


def _mlp(library):
    nn = library.nn
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))


def _basic_block(library, in_channels: int, out_channels: int, stride: int):
    nn = library.nn

    class BasicBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(out_channels)
            self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(out_channels)
            self.relu = nn.ReLU()
            self.downsample = None
            if stride != 1 or in_channels != out_channels:
                self.downsample = nn.Sequential(
                    nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False), nn.BatchNorm2d(out_channels)
                )

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            return self.relu(self.bn2(self.conv2(out)) + identity)

    return BasicBlock()


def _small_resnet(library):
    nn = library.nn
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1, bias=False),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        _basic_block(library, 16, 16, 1),
        _basic_block(library, 16, 32, 2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    )


def _resnet18(library):
    nn = library.nn
    layers = [
        nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
        nn.BatchNorm2d(64),
        nn.ReLU(),
        nn.MaxPool2d(3, stride=2, padding=1),
    ]
    channels = 64
    for width, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [_basic_block(library, channels, width, stride), _basic_block(library, width, width, 1)]
        channels = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)]
    return nn.Sequential(*layers)


def _transformer_layer(library):
    return library.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True)


def _same_weights(source, target) -> None:
    """Copies onnxnn module ``source``'s state into torch module ``target`` (the same layout)."""
    state = {name: torch.from_numpy(np.array(value.numpy())) for name, value in source.state_dict().items()}
    target.load_state_dict(state)


# --- timing ----------------------------------------------------------------------------------


def _calibrated_calls(function, sync, target_seconds: float) -> int:
    """How many calls of ``function`` take about ``target_seconds`` (at least 1), from the fastest of three."""
    elapsed = []
    for _ in range(3):
        start = time.perf_counter()
        function()
        sync()
        elapsed.append(time.perf_counter() - start)
    return max(1, min(2000, int(target_seconds / max(min(elapsed), 1e-7))))


def _interleaved(contenders: dict, blocks: int, block_seconds: float) -> dict:
    """Times each contender ``(step, sync)`` in interleaved blocks; per-call medians and ratios."""
    calls = {name: _calibrated_calls(step, sync, block_seconds) for name, (step, sync) in contenders.items()}
    samples = {name: [] for name in contenders}
    names = list(contenders)
    for block in range(blocks):
        for name in names if block % 2 == 0 else names[::-1]:
            step, sync = contenders[name]
            # One untimed call first: the other framework's threads may still be spinning on the
            # cores (PyTorch's OpenMP workers for milliseconds after its last op), and its first call
            # would pay for them.
            step()
            sync()
            start = time.perf_counter()
            for _ in range(calls[name]):
                step()
            sync()
            samples[name].append((time.perf_counter() - start) / calls[name])
    result = {f"{name}_ms": statistics.median(values) * 1e3 for name, values in samples.items()}
    for other in names[1:]:
        ratios = [mine / theirs for mine, theirs in zip(samples["onnxnn"], samples[other])]
        quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
        result[f"ratio_onnxnn_to_{other}"] = statistics.median(ratios)
        result[f"ratio_onnxnn_to_{other}_quartiles"] = [quartiles[0], quartiles[2]]
    result["calls_per_block"] = calls
    return result


# --- training workloads ----------------------------------------------------------------------


def _training_step(library, model, loss_function, optimizer, inputs, targets):
    def step():
        optimizer.zero_grad()
        loss = loss_function(model(inputs), targets)
        loss.backward()
        optimizer.step()
        holder[0] = loss

    holder = [None]

    def sync():
        float(holder[0].detach())

    return step, sync


def _note_loop_contender(library):
    nn = library.nn
    library.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1))
    optimizer = library.optim.SGD(net.parameters(), lr=1e-4, weight_decay=1e-2, momentum=0.9)
    holder = [None]

    def step():
        output = net(library.randn(4))
        loss = library.abs(output)
        net.zero_grad()
        loss.backward()
        optimizer.step()
        holder[0] = loss

    def sync():
        float(net[2].weight.detach().sum())

    return step, sync


def _contenders(builders: dict, warmup: int) -> dict:
    contenders = {name: build() for name, build in builders.items()}
    for step, sync in contenders.values():
        for _ in range(warmup):
            step()
        sync()
    return contenders


def _torch_available() -> bool:
    return torch is not None


def bench_note_loop(settings) -> dict:
    builders = {"onnxnn": lambda: _note_loop_contender(onnxnn)}
    if _torch_available():
        builders["torch"] = lambda: _note_loop_contender(torch)
    return _interleaved(_contenders(builders, 30), settings.blocks, settings.block_seconds)


def classifier(library, build, optimizer_name: str, train: bool = True):
    """``build(library)``, seeded, in training mode or not, and its optimizer: Adam, SGD with momentum,
    or any other ``optim`` class by its name, all at ``lr=1e-3``."""
    library.manual_seed(0)
    model = build(library)
    model.train(train)
    if optimizer_name == "adam":
        return model, library.optim.Adam(model.parameters(), lr=1e-3)
    if optimizer_name == "sgd":
        return model, library.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    return model, getattr(library.optim, optimizer_name)(model.parameters(), lr=1e-3)


def _classifier_contender(library, build, inputs: np.ndarray, labels: np.ndarray, optimizer_name: str, train=True):
    model, optimizer = classifier(library, build, optimizer_name, train)
    return _training_step(
        library,
        model,
        library.nn.CrossEntropyLoss(),
        optimizer,
        library.from_numpy(inputs.copy()),
        library.from_numpy(labels.copy()),
    )


def _classifier_row(build, input_shape, classes: int, optimizer_name: str, settings, train=True) -> dict:
    rng = np.random.default_rng(0)
    inputs = rng.standard_normal(input_shape).astype(np.float32)
    labels = rng.integers(0, classes, input_shape[0]).astype(np.int64)
    builders = {"onnxnn": lambda: _classifier_contender(onnxnn, build, inputs, labels, optimizer_name, train)}
    if _torch_available():
        builders["torch"] = lambda: _classifier_contender(torch, build, inputs, labels, optimizer_name, train)
    return _interleaved(_contenders(builders, 8), settings.blocks, settings.block_seconds)


def bench_mlp_adam(batch: int):
    return lambda settings: _classifier_row(_mlp, (batch, 784), 10, "adam", settings)


# The other optimizers with fused updates (runtime/ops/training.py, ir/update_formulas.py).
FUSED_OPTIMIZERS = ("SGD", "AdamW", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam", "Adadelta", "ASGD", "Rprop")


def bench_mlp_optimizer(optimizer_name: str):
    return lambda settings: _classifier_row(_mlp, (16, 784), 10, optimizer_name, settings)


def bench_small_resnet(settings) -> dict:
    return _classifier_row(_small_resnet, (32, 3, 32, 32), 10, "sgd", settings)


def _regression_contender(library, build, inputs: np.ndarray, targets: np.ndarray):
    """An Adam step of ``build(library)``'s first output against ``targets`` (mean squared error), the
    torch twin loaded with the onnxnn model's initial weights."""

    def built(of):
        of.manual_seed(0)
        return build(of)

    model = built(library)
    if library is torch:
        _same_weights(built(onnxnn), model)
    optimizer = library.optim.Adam(model.parameters(), lr=1e-4)

    def first_output(x):
        output = model(x)
        return output[0] if isinstance(output, tuple) else output

    arrays = (library.from_numpy(inputs.copy()), library.from_numpy(targets.copy()))
    return _training_step(library, first_output, library.nn.MSELoss(), optimizer, *arrays)


def _regression_row(build, input_shape, target_shape, settings) -> dict:
    rng = np.random.default_rng(0)
    inputs = rng.standard_normal(input_shape).astype(np.float32)
    targets = rng.standard_normal(target_shape).astype(np.float32)
    builders = {"onnxnn": lambda: _regression_contender(onnxnn, build, inputs, targets)}
    if _torch_available():
        builders["torch"] = lambda: _regression_contender(torch, build, inputs, targets)
    return _interleaved(_contenders(builders, 4), settings.blocks, settings.block_seconds)


def bench_transformer_training(settings) -> dict:
    """A TransformerEncoderLayer's Adam step on 8 sequences of 64 tokens (not in the issue's table)."""
    return _regression_row(_transformer_layer, (8, 64, 256), (8, 64, 256), settings)


def bench_lstm_training(settings) -> dict:
    """An LSTM(128, 256)'s Adam step over 32 steps of a batch of 16 (not in the issue's table)."""
    return _regression_row(lambda library: library.nn.LSTM(128, 256), (32, 16, 128), (32, 16, 256), settings)


def bench_gru_training(settings) -> dict:
    """A GRU(128, 256)'s Adam step over 32 steps of a batch of 16 (not in the issue's table)."""
    return _regression_row(lambda library: library.nn.GRU(128, 256), (32, 16, 128), (32, 16, 256), settings)


def _imported_resnet18_file(directory: str) -> str:
    path = os.path.join(directory, "resnet18.onnx")
    if not os.path.exists(path):
        onnxnn.manual_seed(0)
        model = _resnet18(onnxnn).eval()
        to_onnx(model, onnxnn.randn(8, 3, 64, 64), path, input_names=["x"], output_names=["logits"])
    return path


def bench_resnet18_imported(settings) -> dict:
    path = _imported_resnet18_file(settings.directory)
    rng = np.random.default_rng(0)
    inputs = rng.standard_normal((8, 3, 64, 64)).astype(np.float32)
    labels = rng.integers(0, 1000, 8).astype(np.int64)

    def imported(_library):
        return from_onnx(path)

    def torch_twin(_library):
        # The same weights in PyTorch's twin, in eval() like the exported graph (see the docstring).
        model = _resnet18(torch)
        _same_weights(from_onnx(path), model)
        return model

    builders = {"onnxnn": lambda: _classifier_contender(onnxnn, imported, inputs, labels, "sgd", train=False)}
    if _torch_available():
        builders["torch"] = lambda: _classifier_contender(torch, torch_twin, inputs, labels, "sgd", train=False)
    return _interleaved(_contenders(builders, 4), settings.blocks, settings.block_seconds)


# --- inference against raw onnxruntime sessions ----------------------------------------------


def _session(path_or_proto, threads: int | None):
    options = onnxruntime.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
    # Its pool spins within a run only, as onnxnn's do: one spinning after its block would take the
    # cores from onnxnn's next one (bench_sessions_in_turn.py; alone, it runs as fast either way).
    options.add_session_config_entry("session.force_spinning_stop", "1")
    model = path_or_proto if isinstance(path_or_proto, str) else path_or_proto.SerializeToString()
    return onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _inference_row(module, input_array: np.ndarray, model_file_or_proto, settings, compiled: bool) -> dict:
    module.eval()
    if compiled:
        module = onnxnn.compile(module)
    session = _session(model_file_or_proto, settings.ort_threads)
    input_name = session.get_inputs()[0].name
    # A fresh input each call, as when serving requests (from a few prepared arrays), read-only as
    # a request's arrays decoded from bytes are: from_numpy shares those (a writable one it copies).
    arrays = [input_array + np.float32(index) * np.float32(1e-3) for index in range(4)]
    for array in arrays:
        array.setflags(write=False)
    counter = [0]

    def next_array():
        counter[0] += 1
        return arrays[counter[0] % len(arrays)]

    def through_onnxnn():
        with onnxnn.no_grad():
            module(onnxnn.from_numpy(next_array())).numpy()

    def raw_session():
        session.run(None, {input_name: next_array()})

    contenders = {"onnxnn": (through_onnxnn, lambda: None), "onnxruntime": (raw_session, lambda: None)}
    for step, _ in contenders.values():
        for _ in range(5):
            step()
    return _interleaved(contenders, settings.blocks, settings.block_seconds)


def _exported_inference(build, input_shape, settings, compiled: bool) -> dict:
    onnxnn.manual_seed(0)
    module = build(onnxnn).eval()
    example = onnxnn.randn(*input_shape)
    for tensor in module.state_dict().values():
        tensor.numpy()  # realized state, as in a module loaded from a checkpoint
    proto = to_onnx(module, example, input_names=["x"], output_names=["y"])
    return _inference_row(module, example.numpy(), proto, settings, compiled)


def bench_infer_mlp(compiled: bool):
    return lambda settings: _exported_inference(_mlp, (64, 784), settings, compiled)


def bench_infer_cnn(compiled: bool):
    return lambda settings: _exported_inference(_small_resnet, (32, 3, 32, 32), settings, compiled)


def bench_infer_transformer(compiled: bool):
    return lambda settings: _exported_inference(_transformer_layer, (8, 64, 256), settings, compiled)


def bench_infer_resnet18(compiled: bool):
    def row(settings) -> dict:
        path = _imported_resnet18_file(settings.directory)
        example = np.random.default_rng(0).standard_normal((8, 3, 64, 64)).astype(np.float32)
        return _inference_row(from_onnx(path), example, path, settings, compiled)

    return row


# --- first calls in fresh processes ----------------------------------------------------------

_FIRST_CALLS = r"""
import json, sys, time
start = time.perf_counter()
name, threads = sys.argv[1], sys.argv[2]
if name == "onnxnn":
    import onnxnn as library
else:
    import torch as library
if threads != "default":
    library.set_num_threads(int(threads))
imported = time.perf_counter()
nn = library.nn
library.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1))
optimizer = library.optim.SGD(net.parameters(), lr=1e-4, weight_decay=1e-2, momentum=0.9)
begin = time.perf_counter()
loss = library.abs(net(library.randn(4)))
net.zero_grad(); loss.backward(); optimizer.step(); float(net[2].weight.detach().sum())
note_step = time.perf_counter() - begin
mlp = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
x = library.randn(16, 784)
begin = time.perf_counter()
with library.no_grad():
    float(mlp(x).sum())
forward = time.perf_counter() - begin
labels = library.zeros(16, dtype=library.int64)
adam = library.optim.Adam(mlp.parameters(), lr=1e-3)
begin = time.perf_counter()
loss = nn.functional.cross_entropy(mlp(x), labels)
adam.zero_grad(); loss.backward(); adam.step(); float(mlp[0].weight.detach().sum())
mlp_step = time.perf_counter() - begin
print(json.dumps({"import_ms": (imported - start) * 1e3, "note_first_step_ms": note_step * 1e3,
                  "mlp_first_forward_ms": forward * 1e3, "mlp_first_step_ms": mlp_step * 1e3}))
"""


def bench_first_step(settings) -> dict:
    names = ["onnxnn"] + (["torch"] if _torch_available() else [])
    samples = {name: [] for name in names}
    threads = "1" if settings.threads == 1 else "default"
    for run in range(settings.processes):
        for name in names if run % 2 == 0 else names[::-1]:
            completed = subprocess.run(
                [sys.executable, "-c", _FIRST_CALLS, name, threads],
                capture_output=True,
                text=True,
                check=True,
                env=dict(os.environ),
            )
            samples[name].append(json.loads(completed.stdout.strip().splitlines()[-1]))
    result = {}
    for name, runs in samples.items():
        for key in runs[0]:
            result[f"{name}_{key}"] = statistics.median(run[key] for run in runs)
    if "torch" in samples:
        for key in ("note_first_step_ms", "mlp_first_step_ms", "mlp_first_forward_ms"):
            ratios = [mine[key] / theirs[key] for mine, theirs in zip(samples["onnxnn"], samples["torch"])]
            result[f"ratio_{key.removesuffix('_ms')}"] = statistics.median(ratios)
            result[f"ratio_{key.removesuffix('_ms')}_range"] = [min(ratios), max(ratios)]
    result["processes"] = settings.processes
    return result


WORKLOADS = {
    "note_loop": bench_note_loop,
    **{f"mlp_adam_b{batch}": bench_mlp_adam(batch) for batch in MLP_BATCHES},
    **{f"mlp_{name.lower()}_b16": bench_mlp_optimizer(name) for name in FUSED_OPTIMIZERS},
    "small_resnet_b32": bench_small_resnet,
    "resnet18_imported_b8": bench_resnet18_imported,
    "transformer_layer_adam_b8": bench_transformer_training,
    "lstm_adam_b16": bench_lstm_training,
    "gru_adam_b16": bench_gru_training,
    **{
        f"infer_{name}{'_compiled' if compiled else ''}": bench(compiled)
        for name, bench in [
            ("mlp", bench_infer_mlp),
            ("cnn", bench_infer_cnn),
            ("transformer", bench_infer_transformer),
            ("resnet18", bench_infer_resnet18),
        ]
        for compiled in (False, True)
    },
    "first_step": bench_first_step,
}


class _Settings:
    def __init__(self, quick: bool, threads: int | None, directory: str):
        self.blocks = 5 if quick else 9
        self.block_seconds = 0.05 if quick else 0.15
        self.processes = 2 if quick else 4
        self.threads = threads
        self.ort_threads = threads  # None: onnxruntime's default (one per core)
        self.directory = directory


# glibc's mallopt parameters (malloc.h) and the largest mmap threshold it accepts on 64-bit systems.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD_MAX = 32 << 20


def keep_freed_memory() -> str:
    """Makes glibc's malloc keep freed memory in this process (see the module doc); returns what applies."""
    library = ctypes.util.find_library("c")
    libc = ctypes.CDLL(library) if library else None
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None or not sys.platform.startswith("linux"):
        return "default (no glibc mallopt)"
    if not (mallopt(_M_TRIM_THRESHOLD, 1 << 30) and mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX)):
        return "default (mallopt refused)"
    return "kept"


def _apply_threads(threads: int | None) -> None:
    count = threads if threads is not None else _cores()
    onnxnn.set_num_threads(count)
    if _torch_available():
        torch.set_num_threads(count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="+", default=[], help="workloads whose name contains any of these")
    parser.add_argument("--quick", action="store_true", help="fewer and shorter blocks (a rough figure in ~1 min)")
    parser.add_argument("--threads", choices=["1", "default", "both"], default="both")
    parser.add_argument(
        "--allocator", choices=["kept", "default"], default="kept", help="glibc keeps freed memory, or its defaults"
    )
    arguments = parser.parse_args()
    allocator = keep_freed_memory() if arguments.allocator == "kept" else "default"
    selected = [name for name in WORKLOADS if not arguments.only or any(part in name for part in arguments.only)]
    thread_settings = {"1": [1], "default": [None], "both": [1, None]}[arguments.threads]
    with tempfile.TemporaryDirectory() as directory:
        for threads in thread_settings:
            _apply_threads(threads)
            settings = _Settings(arguments.quick, threads, directory)
            for name in selected:
                start = time.perf_counter()
                row = {"workload": name, "threads": 1 if threads == 1 else f"default ({_cores()})"}
                row.update(WORKLOADS[name](settings))
                row["allocator"] = "default" if name == "first_step" else allocator
                row["compiled_updates"] = compiled_updates.available()
                row["bench_seconds"] = round(time.perf_counter() - start, 1)
                if _torch_available():
                    row["torch_version"] = torch.__version__
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()

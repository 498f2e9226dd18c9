"""Convolution, pooling and normalization layers against raw onnxruntime sessions of the same exported graphs.

The measurement is bench_conv_pool.py's (reused, not duplicated): ``forward`` is one call
``layer(x).numpy()`` under no_grad in eval mode on the onnxruntime executor, against ``session.run``
of the graph ``onnxnn.export.to_onnx`` exported for it (weights as initializers), a new input each
call; ``training_step`` is one forward + MSE + backward + SGD step against ``session.run`` of
``training_step_to_onnx``'s graph. This file adds the normalization layers and, to explain the
forward ratio, per layer:

- ``raw_weights_fed``: the exported graph with its initializers turned into inputs and fed each
  call, against the exported graph itself: what embedding the weights buys onnxruntime (folding,
  prepacking), which onnxnn's general session (weights fed as inputs) does not get.
- ``specialized``: whether onnxnn's executor specialized the structure (compiled a second session
  with the unchanged weights embedded as initializers) during the forward measurement.
- ``forward_breakdown_us``: medians of one forward's parts in onnxnn: ``record`` (the module call,
  recording nodes), ``realize`` (``.numpy()``: planning, the cache lookup, running, storing) and
  ``session`` (the very session onnxnn runs, called directly with the same arrays). ``realize -
  session`` is the realization overhead; ``record + realize - session`` all of onnxnn's per call.

All side by side in one process, as JSON, with ratios (onnxnn / raw).

Target (issue 12): forward within 1.1x of the raw session. What the columns showed (2026-11, 2 shared
CPU cores): onnxnn's own session runs as fast as the raw one, and specialization is reached for
every layer with a weight of at least ``executor.SPECIALIZE_MIN_ELEMENTS`` (4096) elements (the
3x3 32->32 conv, the Conv1d, the ConvTranspose2d), embedding it as an initializer; smaller
weights (the 16-channel reflect conv, every norm layer) are embedded too since 2026-11-29 when a
call processes at least ``plan_cache.SPECIALIZE_MIN_RUN_ELEMENTS`` (65,536) elements, so that a
normalization's statistics fold into one scale and shift (resnet's BatchNorm2d_64: 1.15x -> 1.05-1.10x).
The rest of the gap is a fixed cost per call. Since 2026-11-29 (mirrored module attributes,
shared node attributes, a convolution's checks done once per shape) it is about 17-26 us for a
one-op layer, and on one thread 11 of the 12 model-size layers are within 1.1x: convolutions
1.00-1.02, pools 1.05-1.06, norms 1.03-1.08. ResNet's head (AdaptiveAvgPool2d to 1 on
8x512x14x14), whose whole raw run is 0.19-0.28 ms, was at 1.08-1.14x. Since 2026-11-29 onnxnn's
sessions of graphs without a convolution, AveragePool or GlobalMaxPool leave out onnxruntime's
NCHWc layout (``session_optimizers.NCHWC_REPAYING_OPS``), whose reorders cost MaxPool and GlobalAveragePool
more than its kernels save; the raw sessions keep onnxruntime's defaults, so those rows now
measure a faster session plus onnxnn's per-call cost (``forward_breakdown_us`` separates them):
the head 0.60-0.69x, MaxPool2d(3, 2, 1) 0.37-0.39x.
Run: python benchmarks/bench_layers.py [rounds] [name-substring] [--sizes small|model|all] [--forward-only]
[--threads 1|default]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import onnx

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx
from onnxnn.runtime import realization as executor
from onnxnn.runtime.fastpath import plan_cache

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_conv_pool import LAYERS as CONV_POOL_LAYERS  # noqa: E402
from bench_conv_pool import SESSION_THREADS, _compare, _cycle, _session, bench_forward, bench_training_step  # noqa: E402

NORM_LAYERS = [
    ("BatchNorm2d_32", lambda: nn.BatchNorm2d(32), (8, 32, 32, 32)),
    ("LayerNorm_256", lambda: nn.LayerNorm(256), (64, 32, 256)),
    ("GroupNorm_8x32", lambda: nn.GroupNorm(8, 32), (8, 32, 32, 32)),
    ("InstanceNorm2d_32", lambda: nn.InstanceNorm2d(32, affine=True), (8, 32, 32, 32)),
]


def _loaded(build):
    """``build`` with the module's state realized, as in a model loaded from a checkpoint: a fresh
    module's buffers (BatchNorm's running statistics) are pending Expand nodes of a scalar, which
    every forward would otherwise recompute and feed as scalars."""

    def build_loaded():
        layer = build()
        for tensor in layer.state_dict().values():
            tensor.numpy()
        return layer

    return build_loaded


# The same kinds of layer at the sizes they have inside common models (ResNet-18's first stages at
# batch 8, BERT-base's LayerNorm, a U-Net-style upsampling): there the raw run takes milliseconds
# and onnxnn's fixed cost per call is a small part of it.
MODEL_SIZED_LAYERS = [
    ("resnet_Conv2d_3x3_64", lambda: nn.Conv2d(64, 64, 3, padding=1, bias=False), (8, 64, 56, 56)),
    ("resnet_Conv2d_reflect_64", lambda: nn.Conv2d(64, 64, 3, padding=1, padding_mode="reflect"), (8, 64, 56, 56)),
    ("Conv1d_k5_256", lambda: nn.Conv1d(256, 256, 5, padding=2), (8, 256, 512)),
    ("unet_ConvTranspose2d_s2", lambda: nn.ConvTranspose2d(128, 64, 2, stride=2), (8, 128, 56, 56)),
    ("resnet_MaxPool2d_3s2", lambda: nn.MaxPool2d(3, stride=2, padding=1), (8, 64, 112, 112)),
    ("AvgPool2d_2_64", lambda: nn.AvgPool2d(2), (8, 64, 112, 112)),
    ("resnet_AdaptiveAvgPool2d_1", lambda: nn.AdaptiveAvgPool2d(1), (8, 512, 14, 14)),
    ("AdaptiveMaxPool2d_7", lambda: nn.AdaptiveMaxPool2d(7), (8, 512, 28, 28)),
    ("resnet_BatchNorm2d_64", lambda: nn.BatchNorm2d(64), (8, 64, 56, 56)),
    ("bert_LayerNorm_768", lambda: nn.LayerNorm(768), (8, 128, 768)),
    ("GroupNorm_32x256", lambda: nn.GroupNorm(32, 256), (8, 256, 28, 28)),
    ("InstanceNorm2d_64", lambda: nn.InstanceNorm2d(64, affine=True), (8, 64, 56, 56)),
]

SIZES = {
    "small": CONV_POOL_LAYERS + NORM_LAYERS,
    "model": MODEL_SIZED_LAYERS,
    "all": CONV_POOL_LAYERS + NORM_LAYERS + MODEL_SIZED_LAYERS,
}


def _weights_as_inputs(proto: onnx.ModelProto) -> tuple[onnx.ModelProto, dict]:
    """A copy of ``proto`` whose initializers are graph inputs, and the arrays to feed them."""
    fed = onnx.ModelProto()
    fed.CopyFrom(proto)
    feeds = {}
    for initializer in fed.graph.initializer:
        array = onnx.numpy_helper.to_array(initializer)
        feeds[initializer.name] = array
        fed.graph.input.append(onnx.helper.make_tensor_value_info(initializer.name, initializer.data_type, array.shape))
    del fed.graph.initializer[:]
    return fed, feeds


def bench_weights_fed(build, shape, rounds: int) -> dict:
    layer = build().eval()
    proto = to_onnx(layer, onnxnn.randn(*shape), input_names=["x"], output_names=["y"])
    if not proto.graph.initializer:
        return {}
    fed_proto, weights = _weights_as_inputs(proto)
    embedded, fed = _session(proto), _session(fed_proto)
    next_array = _cycle([onnxnn.randn(*shape).numpy() for _ in range(4)])
    result = _compare(
        lambda: fed.run(None, {"x": next_array(), **weights}), lambda: embedded.run(None, {"x": next_array()}), rounds
    )
    return {"fed_ms": result["onnxnn_ms"], "embedded_ms": result["raw_onnxruntime_ms"], "ratio": result["ratio"]}


def forward_breakdown(build, shape, calls: int = 60) -> dict:
    """Times the parts of onnxnn's forward (executor internals: a diagnostic, not an API)."""
    layer = build().eval()
    next_input = _cycle([onnxnn.randn(*shape) for _ in range(4)])
    parts = {"record": [], "realize": [], "session": []}
    with onnxnn.no_grad():
        for call in range(calls + 5):
            start = time.perf_counter()
            output = layer(next_input())
            recorded = time.perf_counter()
            graph = executor.plan([output._value])
            entry = plan_cache.entry(graph)
            arrays = [value.data for value in graph.inputs]
            specialization = entry.specialization
            matches = specialization is not None and specialization.matches(graph.inputs)
            between = time.perf_counter()
            output.numpy()
            realized = time.perf_counter()
            specialization(arrays) if matches else entry.runner(arrays)
            ran = time.perf_counter()
            if call >= 5:  # after the specialization (if any) is compiled
                parts["record"].append(recorded - start)
                parts["realize"].append(realized - between)
                parts["session"].append(ran - realized)
    result = {name: statistics.median(times) * 1e6 for name, times in parts.items()}
    result["specialized"] = entry.specialization is not None
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("rounds", nargs="?", type=int, default=9, help="alternating rounds (default 9)")
    parser.add_argument("only", nargs="?", default="", help="only layers whose name contains this")
    parser.add_argument(
        "--sizes",
        choices=sorted(SIZES),
        default="all",
        help="small: the sizes below 1 ms; model: sizes inside common models (default: all)",
    )
    parser.add_argument("--forward-only", action="store_true", help="skip the training step and the diagnostics")
    parser.add_argument(
        "--threads",
        choices=["1", "default"],
        default="1",
        help="intra-op threads of both onnxnn's and the raw sessions (default 1: on a small shared "
        "machine two thread pools contend, and the ratio measures the contention)",
    )
    arguments = parser.parse_args()
    if arguments.threads == "1":
        onnxnn.set_num_threads(1)
        SESSION_THREADS[0] = 1
    onnxnn.manual_seed(0)
    results = {}
    with onnxnn.set_executor("onnxruntime"):
        for name, build, shape in SIZES[arguments.sizes]:
            if arguments.only not in name:
                continue
            build = _loaded(build)
            results[name] = {"input": list(shape), "forward": bench_forward(build, shape, arguments.rounds)}
            if not arguments.forward_only:
                breakdown = forward_breakdown(build, shape)
                results[name].update(
                    {
                        "training_step": bench_training_step(build, shape, arguments.rounds),
                        "raw_weights_fed": bench_weights_fed(build, shape, arguments.rounds),
                        "specialized": breakdown.pop("specialized"),
                        "forward_breakdown_us": breakdown,
                    }
                )
    print(json.dumps(results, indent=1))
    print(f"\n{'layer':28s} {'input':22s} {'raw ms':>8s} {'onnxnn ms':>10s} {'forward ratio':>14s}  (target <= 1.1)")
    for name, result in results.items():
        forward = result["forward"]
        print(
            f"{name:28s} {str(tuple(result['input'])):22s} {forward['raw_onnxruntime_ms']:8.3f} "
            f"{forward['onnxnn_ms']:10.3f} {forward['ratio']:14.3f}"
        )


if __name__ == "__main__":
    main()

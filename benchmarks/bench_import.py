"""Forward through an onnxnn Module against the same graph in a direct onnxruntime session, as JSON.

Two models: an imported one (resnet50 from onnx's light models, with random float32 weights in
place of its ConstantOfShape ones) and an onnxnn-defined one (an MLP exported with to_onnx). For
each, the Module forward (recording, planning, the cached session run, reading the result) is
timed against InferenceSession.run on the model file, interleaved in one process.

Target (issue 4): the Module forward within 10% of the direct session.
Run: python benchmarks/bench_import.py
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time

import numpy as np
import onnx
import onnxruntime
from onnx import numpy_helper

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx
from onnxnn.import_ import from_onnx


def _resnet50_with_weights(path: str) -> None:
    light = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", "light_resnet50.onnx")
    model = onnx.load(light)
    rng = np.random.default_rng(0)
    constants = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    kept, weights = [], []
    for node in model.graph.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in constants:
            shape = tuple(int(d) for d in constants[node.input[0]])
            values = rng.uniform(0.5, 1.5, shape) if len(shape) == 1 else rng.standard_normal(shape) * 0.05
            weights.append(numpy_helper.from_array(values.astype(np.float32), node.output[0]))
        else:
            kept.append(node)
    del model.graph.node[:]
    model.graph.node.extend(kept)
    model.graph.initializer.extend(weights)
    model.ir_version = max(model.ir_version, 4)
    onnx.save(model, path)


def _compare(module, session, feeds: dict, repeats: int, rounds: int = 5) -> dict:
    module.eval()

    def through_module():
        # A new input tensor per call, as when serving requests.
        inputs = [onnxnn.from_numpy(array) for array in feeds.values()]
        with onnxnn.no_grad():
            output = module(*inputs)
        (output if isinstance(output, onnxnn.Tensor) else output[0]).numpy()

    def direct():
        session.run(None, feeds)

    through_module(), direct()
    samples = {"module": [], "direct": []}
    for _ in range(rounds):
        for name, function in (("module", through_module), ("direct", direct)):
            start = time.perf_counter()
            for _ in range(repeats):
                function()
            samples[name].append((time.perf_counter() - start) / repeats)
    module_time, direct_time = statistics.median(samples["module"]), statistics.median(samples["direct"])
    return {
        "module_forward_ms": module_time * 1e3,
        "direct_session_ms": direct_time * 1e3,
        "ratio_module_to_direct": module_time / direct_time,
    }


def main() -> None:
    directory = tempfile.mkdtemp()
    resnet_path = os.path.join(directory, "resnet50.onnx")
    _resnet50_with_weights(resnet_path)
    resnet_session = onnxruntime.InferenceSession(resnet_path, providers=["CPUExecutionProvider"])
    resnet_feeds = {"gpu_0/data_0": np.random.default_rng(1).random((1, 3, 224, 224), np.float32)}
    resnet_feeds = {resnet_session.get_inputs()[0].name: next(iter(resnet_feeds.values()))}

    onnxnn.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)).eval()
    x = onnxnn.randn(256, 512)
    mlp_path = os.path.join(directory, "mlp.onnx")
    to_onnx(mlp, x, mlp_path, input_names=["x"])
    mlp_session = onnxruntime.InferenceSession(mlp_path, providers=["CPUExecutionProvider"])

    result = {
        "imported_resnet50": _compare(from_onnx(resnet_path), resnet_session, resnet_feeds, repeats=3),
        "onnxnn_defined_mlp": _compare(mlp, mlp_session, {"x": x.numpy()}, repeats=20),
        "target": "ratio_module_to_direct <= 1.10",
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

"""Float against dynamic-int8 and static-int8 (QDQ) models in onnxruntime, side by side in one process.

For an MLP (512-1024-1024-10, batch 64) and a small CNN (batch 32 of 3x32x32), this quantizes the
float model with ``onnxnn.quantization.quantize_dynamic`` and ``quantize_static`` (calibrated on
synthetic batches), exports all three with ``export.to_onnx``, and serves each file in a plain
onnxruntime session. Rounds alternate between the three models so machine load hits all alike.
Prints JSON: milliseconds per batch (median over rounds), the quantized/float time ratios, the
file sizes, and the accuracy on a synthetic dataset (max abs difference of the logits from
float's, and the fraction of samples whose argmax agrees).

Run: python benchmarks/bench_quantization.py [--rounds 20] [--runs 10] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import onnxruntime

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx
from onnxnn.quantization import quantize_dynamic, quantize_static


def _models():
    onnxnn.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    cnn = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 8 * 8, 10),
    )  # fmt: skip
    return {"mlp": (mlp.eval(), (64, 512)), "cnn": (cnn.eval(), (32, 3, 32, 32))}


def _session(proto, threads: int) -> onnxruntime.InferenceSession:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    return onnxruntime.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _bench(name: str, model, shape: tuple, rounds: int, runs: int, threads: int) -> dict:
    example = onnxnn.randn(*shape)
    calibration = [onnxnn.randn(*shape) for _ in range(8)]
    variants = {
        "float": model,
        "dynamic_int8": quantize_dynamic(model, example),
        "static_int8": quantize_static(model, example, calibration, per_channel=True),
    }
    protos = {key: to_onnx(module, (example,)) for key, module in variants.items()}
    sessions = {key: _session(proto, threads) for key, proto in protos.items()}
    dataset = [onnxnn.randn(*shape).numpy() for _ in range(8)]
    outputs = {
        key: np.concatenate([session.run(None, {"input_0": x})[0] for x in dataset])
        for key, session in sessions.items()
    }
    times: dict[str, list[float]] = {key: [] for key in sessions}
    feed = {"input_0": dataset[0]}
    for session in sessions.values():
        session.run(None, feed)  # warm-up
    for _ in range(rounds):
        for key, session in sessions.items():
            start = time.perf_counter()
            for _ in range(runs):
                session.run(None, feed)
            times[key].append((time.perf_counter() - start) * 1e3 / runs)
    median = {key: statistics.median(values) for key, values in times.items()}
    reference = outputs["float"]
    report: dict = {"ms_per_batch": {key: round(value, 3) for key, value in median.items()}}
    report["time_ratio_vs_float"] = {key: round(median[key] / median["float"], 3) for key in median if key != "float"}
    report["file_bytes"] = {key: proto.ByteSize() for key, proto in protos.items()}
    report["size_ratio_float_over"] = {
        key: round(protos["float"].ByteSize() / proto.ByteSize(), 2) for key, proto in protos.items() if key != "float"
    }
    report["accuracy_vs_float"] = {
        key: {
            "max_abs_diff": float(np.abs(output - reference).max()),
            "logit_scale": float(np.abs(reference).max()),
            "argmax_agreement": float((output.argmax(1) == reference.argmax(1)).mean()),
        }
        for key, output in outputs.items()
        if key != "float"
    }
    return {name: report}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    results = {"threads": args.threads}
    for name, (model, shape) in _models().items():
        results.update(_bench(name, model, shape, args.rounds, args.runs, args.threads))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

"""Quantizes a small trained classifier three ways and compares each with the float model.

A 64-256-256-10 MLP learns a synthetic 10-class task; then
- ``quantize_dynamic`` stores its weights in int8 and quantizes activations on the fly,
- ``quantize_static`` also calibrates the activations' ranges on sample batches (QDQ format),
- quantization-aware training (``prepare_qat``, a few fine-tuning steps, ``convert``) learns
  weights that survive the rounding, exported as a QDQ model.
Each model is exported to ONNX and served by onnxruntime: the script prints the file size, the
time per batch against float, the test accuracy and how often its prediction agrees with float's.
"""

from __future__ import annotations

import time

import numpy as np
import onnxruntime

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx
from onnxnn.quantization import DeQuantStub, QuantStub, convert, prepare_qat, quantize_dynamic, quantize_static

FEATURES, CLASSES, BATCH = 64, 10, 256


def make_data(count: int, teacher: np.ndarray, generator: np.random.Generator):
    """Inputs and the labels a fixed random linear teacher gives them."""
    x = generator.standard_normal((count, FEATURES)).astype(np.float32)
    return x, (x @ teacher).argmax(1)


def train(model: nn.Module, x: np.ndarray, y: np.ndarray, steps: int, learning_rate: float) -> float:
    optimizer = onnxnn.optim.Adam(model.parameters(), lr=learning_rate)
    model.train()
    for step in range(steps):
        rows = slice((step * BATCH) % len(x), (step * BATCH) % len(x) + BATCH)
        loss = nn.functional.cross_entropy(model(onnxnn.tensor(x[rows])), onnxnn.tensor(y[rows]))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def serve(proto, x: np.ndarray, runs: int = 20) -> tuple[np.ndarray, float]:
    """The logits onnxruntime computes for ``x``, and its milliseconds per batch of ``BATCH``."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    logits = np.concatenate([session.run(None, {"input_0": x[i : i + BATCH]})[0] for i in range(0, len(x), BATCH)])
    feed = {"input_0": x[:BATCH]}
    session.run(None, feed)
    start = time.perf_counter()
    for _ in range(runs):
        session.run(None, feed)
    return logits, (time.perf_counter() - start) * 1e3 / runs


def main(train_steps: int = 150, qat_steps: int = 30) -> dict:
    onnxnn.manual_seed(0)
    generator = np.random.default_rng(0)
    teacher = generator.standard_normal((FEATURES, CLASSES)).astype(np.float32)
    x_train, y_train = make_data(4096, teacher, generator)
    x_test, y_test = make_data(1024, teacher, generator)

    model = nn.Sequential(
        QuantStub(), nn.Linear(FEATURES, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, CLASSES),
        DeQuantStub(),
    )  # fmt: skip
    loss = train(model, x_train, y_train, train_steps, 3e-3)
    print(f"trained float model: final loss {loss:.3f}")
    model.eval()

    example = onnxnn.tensor(x_train[:BATCH])
    calibration = [x_train[i : i + BATCH] for i in range(0, 8 * BATCH, BATCH)]
    qat_model = prepare_qat(model.train())
    train(qat_model, x_train, y_train, qat_steps, 1e-3)
    variants = {
        "float": model.eval(),
        "dynamic int8": quantize_dynamic(model, example, {nn.Linear}),
        "static int8": quantize_static(model, example, calibration),
        "QAT int8": convert(qat_model),
    }

    results: dict = {}
    float_logits = None
    for name, variant in variants.items():
        proto = to_onnx(variant, (example,))
        logits, milliseconds = serve(proto, x_test)
        if float_logits is None:
            float_logits, float_ms = logits, milliseconds
        results[name] = {
            "bytes": proto.ByteSize(),
            "ms": milliseconds,
            "accuracy": float((logits.argmax(1) == y_test).mean()),
            "agreement": float((logits.argmax(1) == float_logits.argmax(1)).mean()),
        }
        row = results[name]
        print(
            f"{name:>13}: {row['bytes'] / 1024:7.1f} KiB  {milliseconds:6.3f} ms/batch "
            f"({float_ms / milliseconds:4.2f}x float's speed)  accuracy {row['accuracy']:.3f}  "
            f"agrees with float on {row['agreement']:.1%}"
        )
    return results


if __name__ == "__main__":
    results = main()

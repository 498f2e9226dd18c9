"""Per-operation CPU performance analysis with an onnxnn.fx Interpreter (the Modules note's second FX example).

An ``Interpreter`` runs a traced model one node at a time; this subclass times each ``run_node``.
onnxnn is lazy (an op records a node; values are computed when needed), so each node's tensor
results are realized with ``.numpy()`` inside the timing: the time of a node is then the time to
compute it from its already computed inputs. The report lists the nodes by time, then the time
per op type (Conv2d, BatchNorm2d, add, ...), as the PyTorch tutorial does.

Run: ``python examples/advanced/fx_profiling.py``
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import onnxnn
from onnxnn import fx, nn
from onnxnn.fx.node import map_aggregate


class BasicBlock(nn.Module):
    """ResNet's basic block: two 3x3 conv-bn pairs and an identity (or 1x1 conv) shortcut."""

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.downsample = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride, bias=False), nn.BatchNorm2d(out_channels)
            )

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class TinyResNet(nn.Module):
    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU()
        self.layer1 = nn.Sequential(BasicBlock(16, 16), BasicBlock(16, 16))
        self.layer2 = nn.Sequential(BasicBlock(16, 32, stride=2), BasicBlock(32, 32))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        return self.fc(onnxnn.flatten(self.avgpool(x), 1))


def _realize(value: Any) -> None:
    map_aggregate(value, lambda leaf: leaf.numpy() if isinstance(leaf, onnxnn.Tensor) else None)


class ProfilingInterpreter(fx.Interpreter):
    """Runs the traced model, recording the wall time of every node (results realized)."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__(fx.symbolic_trace(module))
        self.total_runtimes: list[float] = []
        self.node_runtimes: dict[fx.Node, list[float]] = {node: [] for node in self.graph.nodes}

    def run(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        result = super().run(*args, **kwargs)
        _realize(result)
        self.total_runtimes.append(time.perf_counter() - start)
        return result

    def run_node(self, n: fx.Node) -> Any:
        start = time.perf_counter()
        result = super().run_node(n)
        _realize(result)  # lazy evaluation would otherwise move the cost to a later node
        self.node_runtimes[n].append(time.perf_counter() - start)
        return result

    def op_type(self, node: fx.Node) -> str:
        if node.op == "call_module":
            return type(self.fetch_attr(node.target)).__name__
        if node.op == "call_function":
            return getattr(node.target, "__name__", str(node.target))
        return node.target if node.op == "call_method" else node.op

    def summary(self, should_sort: bool = True) -> str:
        """Tables of the mean time per node and per op type, each with its share of the total."""
        mean_total = statistics.mean(self.total_runtimes)
        rows = [
            (node.name, self.op_type(node), statistics.mean(times) * 1e3, statistics.mean(times) / mean_total * 100)
            for node, times in self.node_runtimes.items()
            if times
        ]
        if should_sort:
            rows.sort(key=lambda row: row[2], reverse=True)
        per_type: dict[str, float] = {}
        for _, kind, milliseconds, _ in rows:
            per_type[kind] = per_type.get(kind, 0.0) + milliseconds
        type_rows = sorted(per_type.items(), key=lambda item: item[1], reverse=True)
        lines = [f"Total time: {mean_total * 1e3:.3f} ms over {len(self.total_runtimes)} runs", ""]
        lines.append(f"{'node':<24} {'op type':<20} {'time (ms)':>10} {'% of total':>11}")
        lines += [f"{name:<24} {kind:<20} {ms:>10.4f} {share:>10.2f}%" for name, kind, ms, share in rows]
        lines += ["", f"{'op type':<20} {'time (ms)':>10} {'% of total':>11}"]
        lines += [f"{kind:<20} {ms:>10.4f} {ms / (mean_total * 1e3) * 100:>10.2f}%" for kind, ms in type_rows]
        return "\n".join(lines)


def main(runs: int = 3) -> ProfilingInterpreter:
    onnxnn.manual_seed(0)
    model = TinyResNet().eval()
    x = onnxnn.randn(2, 3, 16, 16)
    x.numpy()  # realized now, so that drawing the random input is not charged to the first node
    interpreter = ProfilingInterpreter(model)
    with onnxnn.no_grad():
        interpreter.run(x)  # warm up: compiles each node's session once
        interpreter.total_runtimes.clear()
        for times in interpreter.node_runtimes.values():
            times.clear()
        for _ in range(runs):
            output = interpreter.run(x)
    print(interpreter.summary(should_sort=True))
    with onnxnn.no_grad():
        difference = float(abs(output.numpy() - model(x).numpy()).max())
    print(f"\ninterpreted output equals the model's: max abs difference {difference:.3g}")
    return interpreter


if __name__ == "__main__":
    interpreter = main()

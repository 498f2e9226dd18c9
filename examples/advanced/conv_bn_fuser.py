"""Convolution + batch-norm fusion with onnxnn.fx (the Modules note's first FX example).

In eval mode a BatchNorm2d after a Conv2d is an affine map per channel, so it can be folded into
the convolution's weight and bias. We trace the model, find each ``call_module`` BatchNorm2d whose
input is a ``call_module`` Conv2d used only there, swap the convolution for the fused one
(``nn.utils.fuse_conv_bn_eval``), send the batch norm's users to the convolution, erase the batch
norm node and recompile. The fused model computes the same function with fewer operations.

Run: ``python examples/advanced/conv_bn_fuser.py``
"""

from __future__ import annotations

import copy
import time

import numpy as np

import onnxnn
from onnxnn import fx, nn
from onnxnn.nn.utils import fuse_conv_bn_eval


class ConvBnRelu(nn.Module):
    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))


class SmallCnn(nn.Module):
    """Three conv-bn-relu blocks, a residual conv-bn branch, pooling and a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = ConvBnRelu(3, 16)
        self.body = nn.Sequential(ConvBnRelu(16, 16), ConvBnRelu(16, 16))
        self.shortcut = nn.Conv2d(16, 16, 1)
        self.shortcut_bn = nn.BatchNorm2d(16)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.stem(x)
        x = self.body(x) + self.shortcut_bn(self.shortcut(x))
        return self.fc(onnxnn.flatten(self.pool(x), 1))


def _parent_name(target: str) -> tuple[str, str]:
    """``"body.0.conv"`` -> ``("body.0", "conv")``."""
    *parent, name = target.rsplit(".", 1)
    return (parent[0] if parent else ""), name


def _module_of(node: fx.Node, modules: dict[str, nn.Module], kind: type) -> bool:
    return node.op == "call_module" and isinstance(modules.get(node.target), kind)


def fuse(model: nn.Module, inplace: bool = False) -> fx.GraphModule:
    """Returns a GraphModule of ``model`` (eval mode) with every Conv2d -> BatchNorm2d pair fused."""
    if not inplace:
        model = copy.deepcopy(model)
    graph_module = fx.symbolic_trace(model)
    modules = dict(graph_module.named_modules())
    for node in list(graph_module.graph.nodes):
        if not _module_of(node, modules, nn.BatchNorm2d):
            continue
        conv_node = node.args[0]
        if not isinstance(conv_node, fx.Node) or not _module_of(conv_node, modules, nn.Conv2d):
            continue
        if len(conv_node.users) > 1:  # the convolution's output is needed unnormalized elsewhere
            continue
        fused = fuse_conv_bn_eval(modules[conv_node.target], modules[node.target])
        parent, name = _parent_name(conv_node.target)
        setattr(modules[parent], name, fused)
        modules[conv_node.target] = fused
        node.replace_all_uses_with(conv_node)
        graph_module.graph.erase_node(node)
    graph_module.graph.lint()
    graph_module.delete_all_unused_submodules()
    graph_module.recompile()
    return graph_module


def _seconds_per_call(model: nn.Module, x: onnxnn.Tensor, iterations: int) -> float:
    with onnxnn.no_grad():
        model(x).numpy()  # warm up: the first call compiles the graph's session
        start = time.perf_counter()
        for _ in range(iterations):
            model(x).numpy()  # .numpy() realizes the lazy result, so the work is inside the timing
    return (time.perf_counter() - start) / iterations


def main(iterations: int = 10) -> dict:
    onnxnn.manual_seed(0)
    model = SmallCnn()
    # Give the batch norms non-trivial statistics, as a trained model would have.
    with onnxnn.no_grad():
        for _ in range(3):
            model(onnxnn.randn(8, 3, 16, 16) * 2 + 0.5)
    model.eval()

    fused = fuse(model)
    print(fused.code)
    counts = {
        "original": len(fx.symbolic_trace(model).graph.nodes),
        "fused": len(fused.graph.nodes),
    }
    print(f"nodes: {counts['original']} before fusion, {counts['fused']} after")

    x = onnxnn.randn(4, 3, 16, 16)
    with onnxnn.no_grad():
        difference = float(np.abs(model(x).numpy() - fused(x).numpy()).max())
    print(f"max abs difference of outputs: {difference:.3g} (float32 rounding)")

    # Side by side in one run, alternating, so both see the same machine load.
    unfused_time = fused_time = 0.0
    for _ in range(3):
        unfused_time += _seconds_per_call(model, x, iterations)
        fused_time += _seconds_per_call(fused, x, iterations)
    print(f"unfused: {unfused_time / 3 * 1e3:.3f} ms/call, fused: {fused_time / 3 * 1e3:.3f} ms/call")
    print(f"speedup: {unfused_time / fused_time:.2f}x")
    return {"counts": counts, "difference": difference, "fused": fused, "model": model}


if __name__ == "__main__":
    result = main()

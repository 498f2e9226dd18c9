"""``onnxnn summary MODEL``: a torchinfo-style table of layers, output shapes, parameters, MACs and memory."""

from __future__ import annotations

from typing import Any

import argparse
import json

from .common import add_model_arguments, input_shapes_of, load_model
from .layers import analyze

__all__ = ["DESCRIPTION", "EPILOG", "add_arguments", "run"]

DESCRIPTION = "a torchinfo-style table: layer tree, output shapes, parameter counts, MACs, memory"
EPILOG = """Layers are the modules the initializer names give (state_dict keys such as 'layer1.0.conv1.weight'),
or PyTorch exporter's node names ('/layer1/conv1/Conv'); nodes reading no parameter are rows of their own.
Parameters are floating-point initializers (what onnxnn.import_.from_onnx makes Parameters), the other
initializers buffers. MACs count MatMul, Gemm, Conv and ConvTranspose multiply-accumulates.

examples:
  onnxnn summary model.onnx
  onnxnn summary model.onnx --input-shape 8,3,224,224 --depth 2
  onnxnn summary mypackage.models:make_model --input-shape 1,4
  onnxnn summary model.onnx --json
"""

_WIDTHS = (44, 22, 14, 16)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds this command\'s arguments to its parser (the protocol of :mod:`onnxnn.commands`)."""
    add_model_arguments(parser)
    parser.add_argument("--depth", type=int, default=3, help="module levels shown (deeper ones are summed; default 3)")
    parser.add_argument("--json", action="store_true", help="print the totals as JSON instead of the table")


def run(args: argparse.Namespace) -> int:
    """Runs the command; returns its exit status (failures raise, and :mod:`onnxnn.cli` prints them)."""
    model, name = load_model(args.model, args.input_shape, args.input_dtype)
    shapes = input_shapes_of(model, args.input_shape)
    analysis = analyze(model, shapes)
    if args.json:
        print(json.dumps(_totals(analysis, shapes), indent=2))
        return 0
    rows = _rows(analysis.layers, max(args.depth, 1))
    last_shape = next((row["shape"] for row in reversed(rows) if row["shape"] is not None), None)
    rule = "=" * sum(_WIDTHS)
    print(rule)
    print(_line("Layer (ops)", "Output Shape", "Param #", "MACs"))
    print(rule)
    print(_line(model.graph.name or name, _shape(last_shape), _count(analysis.parameters), _count(analysis.macs)))
    for row in rows:
        label = "│ " * (row["level"] - 1) + "├─" + row["label"]
        print(_line(label, _shape(row["shape"]), _count(row["parameters"]), _count(row["macs"])))
    print(rule)
    totals = _totals(analysis, shapes)
    print(f"Total params: {analysis.parameters:,}")
    print(f"Buffers (non-float initializers): {analysis.buffers:,}")
    print(f"Total mult-adds (M): {analysis.macs / 1e6:.2f}")
    if analysis.hidden_nodes:
        print(f"Shape-computation nodes not shown: {analysis.hidden_nodes}")
    print(rule)
    print(f"Input size (MB): {totals['input_mb']:.2f}")
    print(f"Forward pass size (MB): {totals['activation_mb']:.2f}")
    print(f"Params size (MB): {totals['parameter_mb']:.2f}")
    print(f"Estimated Total Size (MB): {totals['total_mb']:.2f}")
    print(rule)
    return 0


def _totals(analysis, shapes: dict) -> dict:
    megabyte = 1e6  # torchinfo's MB
    parameter_mb = (analysis.parameter_bytes + analysis.buffer_bytes) / megabyte
    return {
        "inputs": {name: list(shape) for name, shape in shapes.items()},
        "parameters": analysis.parameters,
        "buffers": analysis.buffers,
        "macs": analysis.macs,
        "layers": len(analysis.layers),
        "input_mb": analysis.input_bytes / megabyte,
        "activation_mb": analysis.activation_bytes / megabyte,
        "parameter_mb": parameter_mb,
        "total_mb": (analysis.input_bytes + analysis.activation_bytes) / megabyte + parameter_mb,
    }


def _rows(layers: list, depth: int) -> list[dict]:
    """Display rows: module paths cut at ``depth``, with a header row for each enclosing module."""
    # Each row: path, label, level, header, shape, parameters, macs, ops (mixed types).
    rows: list[dict[str, Any]] = []
    open_headers: list[dict[str, Any]] = []
    for layer in layers:
        path = tuple(layer.scope.split(".")[:depth]) if layer.scope else ()
        ops = sorted({node.op_type for node in layer.nodes}, key=[node.op_type for node in layer.nodes].index)
        previous = rows[-1] if rows else None
        if path and previous is not None and previous.get("path") == path and not previous["header"]:
            _add(previous, layer, ops)
            for header in open_headers:
                _add(header, layer, [])
            continue
        # A module's own nodes beside its submodules' (a Relu in a block) are rows under its header.
        own_nodes = bool(path) and any(header["path"] == path for header in open_headers)
        ancestors = [path[:length] for length in range(1, len(path) + own_nodes)]
        kept = 0
        while kept < min(len(open_headers), len(ancestors)) and open_headers[kept]["path"] == ancestors[kept]:
            kept += 1
        open_headers = open_headers[:kept]
        for ancestor in ancestors[kept:]:
            header = {"path": ancestor, "label": ancestor[-1], "level": len(ancestor), "header": True}
            header.update(shape=None, parameters=0, macs=0, ops=[])
            rows.append(header)
            open_headers.append(header)
        if own_nodes:
            row: dict[str, Any] = {"path": None, "label": ", ".join(ops), "level": len(path) + 1, "header": False}
        else:
            label = path[-1] if path else layer.name
            row = {"path": path, "label": label, "level": max(len(path), 1), "header": False}
        row.update(shape=None, parameters=0, macs=0, ops=[])
        rows.append(row)
        _add(row, layer, ops)
        for header in open_headers:
            _add(header, layer, [])
    for row in rows:
        if row["path"] and row["ops"]:
            row["label"] += f" ({', '.join(row['ops'])})"
    return rows


def _add(row: dict, layer, ops: list) -> None:
    row["parameters"] += layer.parameters
    row["macs"] = None if row["macs"] is None or layer.macs is None else row["macs"] + layer.macs
    row["ops"] += [op for op in ops if op not in row["ops"]]
    if layer.output_shape is not None:
        row["shape"] = layer.output_shape


def _count(value) -> str:
    return "--" if not value else f"{value:,}"


def _shape(shape) -> str:
    return "--" if shape is None else "[" + ", ".join(str(size) for size in shape) + "]"


def _line(*cells) -> str:
    return "".join(str(cell)[: width - 1].ljust(width) for cell, width in zip(cells, _WIDTHS)).rstrip()

"""``onnxnn inspect MODEL``: an ONNX model as the onnxnn module it imports to."""

from __future__ import annotations

import argparse
import collections

import onnx

from ..import_ import from_onnx

__all__ = ["DESCRIPTION", "EPILOG", "add_arguments", "run"]

DESCRIPTION = "print an ONNX model as an onnxnn module: module tree, parameter counts, ops"
EPILOG = """examples:
  onnxnn inspect model.onnx
  onnxnn inspect resnet.onnx | less
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds this command\'s arguments to its parser (the protocol of :mod:`onnxnn.commands`)."""
    parser.add_argument("model", metavar="MODEL", help="an .onnx file")


def run(args: argparse.Namespace) -> int:
    """Runs the command; returns its exit status (failures raise, and :mod:`onnxnn.cli` prints them)."""
    module = from_onnx(args.model)  # validates the file before anything else reads it
    model = onnx.load(args.model, load_external_data=False)
    print(module)
    parameters = sum(p.numel() for p in module.parameters())
    buffers = sum(b.numel() for b in module.buffers())
    print(f"\nparameters: {parameters:,}   buffers: {buffers:,}")
    counts = collections.Counter(node.op_type for node in model.graph.node)
    print("ops: " + ", ".join(f"{op} x{count}" for op, count in counts.most_common()))
    return 0

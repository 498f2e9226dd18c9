"""``onnxnn export module:factory --input-shape ... -o out.onnx``: a Python module to ONNX."""

from __future__ import annotations

import argparse

from .common import CommandError, add_input_dtype_argument, export_module, load_factory, parse_shape, progress

__all__ = ["DESCRIPTION", "EPILOG", "add_arguments", "run"]

DESCRIPTION = "export a Python 'module:factory' model to ONNX, traced on inputs of the given shapes"
EPILOG = """FACTORY names a callable taking no arguments and returning an onnxnn module: 'package.module:name'
(imported from the current folder or PYTHONPATH) or 'path/to/file.py:name'. The module is put in eval
mode and called on random inputs of each --input-shape: standard-normal float32, or the --input-dtype
given (integers are drawn from [0, 4), valid token ids for any embedding).

examples:
  onnxnn export mypackage.models:make_model --input-shape 1,4 -o model.onnx
  onnxnn export models.py:resnet --input-shape 1,3,224,224 --dynamic-batch -o resnet.onnx
  onnxnn export lm.py:make --input-shape 2,16 --input-dtype int64 --input-names tokens -o lm.onnx
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds this command\'s arguments to its parser (the protocol of :mod:`onnxnn.commands`)."""
    parser.add_argument("factory", metavar="FACTORY", help="'package.module:name' or 'file.py:name'")
    parser.add_argument(
        "--input-shape", action="append", type=parse_shape, required=True, metavar="SHAPE", help="e.g. 1,3,32,32"
    )
    add_input_dtype_argument(parser)
    parser.add_argument("-o", "--output", required=True, metavar="OUT.onnx", help="the ONNX file to write")
    parser.add_argument("--input-names", nargs="+", metavar="NAME", help="graph input names (default input_0 ...)")
    parser.add_argument("--dynamic-batch", action="store_true", help="make axis 0 of every input dynamic")
    parser.add_argument("--opset", type=int, default=None, help="default-domain opset (17 to the newest supported)")
    parser.add_argument("--train", action="store_true", help="export in training mode (dropout, batch statistics)")


def run(args: argparse.Namespace) -> int:
    """Runs the command; returns its exit status (failures raise, and :mod:`onnxnn.cli` prints them)."""
    if not args.output.lower().endswith(".onnx"):
        raise CommandError(f"'{args.output}': the output must be an .onnx file")
    names = args.input_names or [f"input_{index}" for index in range(len(args.input_shape))]
    if len(names) != len(args.input_shape):
        raise CommandError(f"{len(names)} --input-names for {len(args.input_shape)} --input-shape")
    with progress(total=3, desc="export", unit="step") as bar:
        bar.set_postfix_str("building the model")
        module = load_factory(args.factory)
        if not callable(module):
            raise CommandError(f"'{args.factory}': the factory returned {type(module).__name__}, not a module")
        if hasattr(module, "train"):
            module.train(args.train)
        bar.update()
        bar.set_postfix_str("tracing and checking")
        dynamic_axes = {name: {0: "batch"} for name in names} if args.dynamic_batch else None
        model = export_module(
            module,
            args.input_shape,
            args.input_dtype,
            args.output,
            input_names=names,
            dynamic_axes=dynamic_axes,
            opset_version=args.opset,
            training=args.train,
        )
        bar.update(2)
    parameters = sum(p.numel() for p in module.parameters()) if hasattr(module, "parameters") else 0
    print(f"wrote {args.output}: {len(model.graph.node)} nodes, {parameters:,} parameters, opset {_opset(model)}")
    return 0


def _opset(model) -> int | str:
    return next((entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx")), "?")

"""The ``onnxnn`` command: inspect an ONNX model as a module, and check it against onnxruntime.

Usage::

    onnxnn inspect model.onnx      # module tree, parameters, ops
    onnxnn check model.onnx        # run it on onnxnn and on onnxruntime with random inputs, compare

Exit status: 0 on success, 1 when ``check`` finds a mismatch, 2 when the model cannot be loaded or
run; the reason is then one line on stderr naming the file, without a traceback.
"""

from __future__ import annotations

import argparse
import collections
import sys

import numpy as np
import onnx

# The onnxnn package (which imports onnx and import_) is loaded before this module anyway, so these
# cost ``onnxnn --help`` nothing.
from .commands import export_triton, serve
from .import_ import from_onnx
from .runtime.creation import from_numpy
from .runtime.grad_mode import no_grad

__all__ = ["main"]


def _random_inputs(model, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    initializers = {init.name for init in model.graph.initializer}
    feeds = {}
    for graph_input in model.graph.input:
        if graph_input.name in initializers:
            continue
        if graph_input.type.WhichOneof("value") != "tensor_type":
            raise ValueError(f"input '{graph_input.name}' is not a tensor; 'onnxnn check' feeds random tensors only")
        tensor_type = graph_input.type.tensor_type
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in tensor_type.shape.dim)
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)
        if np.issubdtype(dtype, np.floating):
            feeds[graph_input.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            feeds[graph_input.name] = rng.random(shape) < 0.5
        else:
            feeds[graph_input.name] = rng.integers(0, 4, shape).astype(dtype)
    return feeds


def _inspect(path: str) -> int:
    module = from_onnx(path)  # validates the file before anything else reads it
    model = onnx.load(path, load_external_data=False)
    print(module)
    parameters = sum(p.numel() for p in module.parameters())
    buffers = sum(b.numel() for b in module.buffers())
    print(f"\nparameters: {parameters:,}   buffers: {buffers:,}")
    counts = collections.Counter(node.op_type for node in model.graph.node)
    print("ops: " + ", ".join(f"{op} x{count}" for op, count in counts.most_common()))
    return 0


def _check(path: str, seed: int, rtol: float, atol: float) -> int:
    import onnxruntime  # deferred: costs ~0.3 s, which only ``check`` needs (not ``inspect`` nor ``--help``)

    module = from_onnx(path).eval()  # validates the file before anything else reads it
    model = onnx.load(path)
    feeds = _random_inputs(model, seed)
    with no_grad():
        outputs = module(*[from_numpy(array) for array in feeds.values()])
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    try:
        session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        expected = session.run(None, feeds)
    except Exception as error:  # onnxruntime's exception types derive from Exception only
        raise RuntimeError(f"onnxruntime cannot run it: {error}") from None
    failures = 0
    for info, ours, theirs in zip(session.get_outputs(), outputs, expected):
        if not isinstance(theirs, np.ndarray):  # ZipMap's list of dicts, compared as a whole
            close = ours == theirs
            print(f"{info.name}: {'ok' if close else 'MISMATCH'}  {type(theirs).__name__} of {len(theirs)}")
            failures += not close
            continue
        ours = np.asarray(ours if isinstance(ours, np.ndarray) else ours.numpy())
        if theirs.dtype.kind in "OUS":
            close = ours.shape == theirs.shape and bool(np.all(ours == theirs))
            print(f"{info.name}: {'ok' if close else 'MISMATCH'}  shape {list(ours.shape)}  strings")
            failures += not close
            continue
        close = ours.shape == theirs.shape and np.allclose(ours, theirs, rtol=rtol, atol=atol, equal_nan=True)
        difference = float(np.max(np.abs(ours.astype(np.float64) - theirs))) if ours.shape == theirs.shape else None
        print(f"{info.name}: {'ok' if close else 'MISMATCH'}  shape {list(ours.shape)}  max |diff| {difference}")
        failures += not close
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="onnxnn", description="Inspect an ONNX model as an onnxnn module, or check it against onnxruntime."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    inspect = commands.add_parser("inspect", help="print an ONNX model as an onnxnn module")
    inspect.add_argument("model")
    check = commands.add_parser("check", help="compare onnxnn with onnxruntime on random inputs")
    check.add_argument("model")
    check.add_argument("--seed", type=int, default=0)
    check.add_argument("--rtol", type=float, default=1e-4)
    check.add_argument("--atol", type=float, default=1e-5)
    # The subcommands in onnxnn/commands (DESCRIPTION, EPILOG, add_arguments, run).
    modules = {"serve": serve, "export-triton": export_triton}
    for name, module in modules.items():
        subparser = commands.add_parser(
            name, help=module.DESCRIPTION, epilog=module.EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        module.add_arguments(subparser)
    arguments = parser.parse_args(argv)
    if arguments.command in modules:
        return modules[arguments.command].run(arguments)
    try:
        if arguments.command == "inspect":
            return _inspect(arguments.model)
        return _check(arguments.model, arguments.seed, arguments.rtol, arguments.atol)
    except (OSError, ValueError, TypeError, RuntimeError) as error:
        # ModelLoadError is a ValueError, FileNotFoundError an OSError, NotImplementedError a RuntimeError.
        message = " ".join(str(error).split()) or type(error).__name__
        if arguments.model not in message:
            message = f"'{arguments.model}': {message}"
        print(f"onnxnn {arguments.command}: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

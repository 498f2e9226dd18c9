"""``onnxnn check MODEL``: run a model on onnxnn and on onnxruntime with the same random inputs, compare."""

from __future__ import annotations

import argparse

import numpy as np
import onnx

from ..import_ import from_onnx
from ..runtime.creation import from_numpy
from ..runtime.grad_mode import no_grad
from .common import input_shapes_of, random_feeds

__all__ = ["DESCRIPTION", "EPILOG", "add_arguments", "run"]

DESCRIPTION = "compare onnxnn with onnxruntime on random inputs (exit 1 on a mismatch)"
EPILOG = """exit status: 0 when every output agrees, 1 when one does not, 2 when the model cannot be loaded or run.

examples:
  onnxnn check model.onnx
  onnxnn check model.onnx --seed 3 --rtol 1e-3 --atol 1e-4
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds this command\'s arguments to its parser (the protocol of :mod:`onnxnn.commands`)."""
    parser.add_argument("model", metavar="MODEL", help="an .onnx file")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    parser.add_argument("--rtol", type=float, default=1e-4, help="relative tolerance (default 1e-4)")
    parser.add_argument("--atol", type=float, default=1e-5, help="absolute tolerance (default 1e-5)")


def run(args: argparse.Namespace) -> int:
    """Runs the command; returns its exit status (failures raise, and :mod:`onnxnn.cli` prints them)."""
    import onnxruntime  # deferred: costs ~0.3 s, which only ``check`` needs (not ``inspect`` nor ``--help``)

    module = from_onnx(args.model).eval()  # validates the file before anything else reads it
    model = onnx.load(args.model)
    feeds = random_feeds(model, input_shapes_of(model, None), args.seed)
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
        failures += not _report(info.name, ours, theirs, args.rtol, args.atol)
    return 1 if failures else 0


def _report(name: str, ours, theirs, rtol: float, atol: float) -> bool:
    """Prints one output's comparison; True when it agrees."""
    if not isinstance(theirs, np.ndarray):  # ZipMap's list of dicts, compared as a whole
        close = ours == theirs
        print(f"{name}: {'ok' if close else 'MISMATCH'}  {type(theirs).__name__} of {len(theirs)}")
        return bool(close)
    ours = np.asarray(ours if isinstance(ours, np.ndarray) else ours.numpy(force=True))
    if theirs.dtype.kind in "OUS":
        close = ours.shape == theirs.shape and bool(np.all(ours == theirs))
        print(f"{name}: {'ok' if close else 'MISMATCH'}  shape {list(ours.shape)}  strings")
        return close
    close = ours.shape == theirs.shape and np.allclose(ours, theirs, rtol=rtol, atol=atol, equal_nan=True)
    difference = float(np.max(np.abs(ours.astype(np.float64) - theirs))) if ours.shape == theirs.shape else None
    print(f"{name}: {'ok' if close else 'MISMATCH'}  shape {list(ours.shape)}  max |diff| {difference}")
    return bool(close)

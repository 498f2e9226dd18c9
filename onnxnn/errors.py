"""The exceptions onnxnn raises for bad files, so callers can catch every refusal with one type.

Each subclasses the built-in type the reference library raises for the same problem, so code
written against PyTorch or onnx keeps working:

- :class:`CheckpointError` for ``onnxnn.load``: ``torch.load`` raises ``RuntimeError`` for a
  damaged archive and ``pickle.UnpicklingError`` for a refused pickle (``weights_only=True``);
  a CheckpointError is both.
- :class:`ModelLoadError` for ``onnxnn.import_.from_onnx`` and ``onnxnn.backend``: a ``ValueError``,
  as onnx raises for models that fail its checker.
- :class:`LinAlgError` (not about files) for ``onnxnn.linalg``'s ``check_errors=True``: a
  ``RuntimeError``, as ``torch.linalg.LinAlgError``.

Messages name the file (or "the given file object") and what is wrong with it. For checkpoints that
covers every way a file can be bad, hostile ones included: truncated or damaged archives, refused
pickle globals, malformed pickles and safetensors headers, tensor records reaching outside their
storage, sizes beyond what the file can back; no other exception type escapes ``onnxnn.load`` for a
bad file. (Failures to *write* a checkpoint are ``OSError``s naming the target path.) This module imports
nothing of onnxnn, so every layer may raise these.
"""

from __future__ import annotations

import pickle

__all__ = ["CheckpointError", "LinAlgError", "ModelLoadError"]


class CheckpointError(RuntimeError, pickle.UnpicklingError):
    """A checkpoint is empty, truncated, malformed, hostile or in a format onnxnn does not read.

    Example::

        >>> try:
        ...     state = onnxnn.load("weights.pt")
        ... except onnxnn.CheckpointError as error:
        ...     print(error)   # cannot load 'weights.pt': the zip archive is damaged or truncated (...)
    """


class ModelLoadError(ValueError):
    """An ONNX model is truncated, malformed, fails onnx's checker, or reads outside its folder.

    ``from_onnx`` raises it for everything wrong with a model's content: a file that does not
    parse, a string that is not UTF-8 (naming the field), onnx's checker or strict shape
    inference failing, external data that is missing, outside the model's folder or out of
    range, an op or domain onnxnn cannot run, an unreadable attribute or constant. Calling an
    imported module raises it, naming the node and op_type, when a node is invalid for the
    given inputs (the shape rule's exception is its ``__cause__``); computations that fail
    raise ``RuntimeError`` there, as in PyTorch.
    """


class LinAlgError(RuntimeError):
    """A linear-algebra function asked to check its result (``check_errors=True`` of ``linalg.inv_ex``,
    ``cholesky_ex``...) found the input singular or not positive-definite: ``torch.linalg.LinAlgError``,
    also a RuntimeError. Without ``check_errors`` onnxnn does not read the values at the call (the
    result then holds inf or NaN)."""

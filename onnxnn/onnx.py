"""``torch.onnx``'s names over onnxnn's exporter, for code written against PyTorch.

``import onnxnn as torch`` code calls ``torch.onnx.export(model, args, "model.onnx", ...)``; here that
is :func:`onnxnn.export.to_onnx` with PyTorch's arguments. onnxnn has one exporter (it traces the
recorded graph), so ``dynamo`` chooses nothing; the options that would change what the file holds
and that onnxnn's exporter does not offer raise NotImplementedError rather than being ignored.
"""

from __future__ import annotations

import enum
from typing import Any

from .export.onnx_export import to_onnx
from .runtime.depth import exporting

__all__ = ["export", "is_in_onnx_export", "TrainingMode"]


class TrainingMode(enum.IntEnum):
    """The mode a model is exported in, as ``torch.onnx.TrainingMode``."""

    EVAL = 0  # in evaluation mode, whatever mode the model is in (restored afterwards)
    PRESERVE = 1  # in the model's own mode
    TRAINING = 2  # in training mode (dropout active, batch statistics)


def export(
    model,
    args: Any = (),
    f=None,
    *,
    kwargs: dict | None = None,
    verbose: bool | None = None,
    input_names=None,
    output_names=None,
    opset_version: int | None = None,
    dynamo: bool = True,
    external_data: bool = True,
    dynamic_shapes=None,
    export_params: bool = True,
    keep_initializers_as_inputs: bool = False,
    dynamic_axes=None,
    training: TrainingMode = TrainingMode.EVAL,
    do_constant_folding: bool = True,
    **options,
):
    """Exports ``model`` to ONNX, as ``torch.onnx.export`` does; returns the ``onnx.ModelProto``.

    Args:
        model: the module (or callable over tensors) to trace.
        args: the example inputs: a tensor or a tuple of tensors.
        f: optional path or binary file to write the model to.
        input_names, output_names, dynamic_axes, opset_version: as :func:`onnxnn.export.to_onnx`.
        external_data: store the weights (tensors of 1 KiB and more) beside ``f`` (PyTorch's
            default, True) or inside the file (False; models over 2 GB still go beside it).
        training: :class:`TrainingMode`: ``EVAL`` (the default) exports in evaluation mode and
            restores the model's mode afterwards, ``PRESERVE`` in the model's mode, ``TRAINING`` in
            training mode.
        dynamo, verbose, do_constant_folding: accepted for PyTorch's signature; onnxnn's single
            exporter writes the same graph whatever they say.

    Raises:
        NotImplementedError: for ``kwargs``, ``dynamic_shapes`` (use ``dynamic_axes``),
            ``export_params=False``, ``keep_initializers_as_inputs=True`` and PyTorch's other
            exporter-specific options, which onnxnn's exporter does not offer.

    Example::

        >>> import onnxnn as torch
        >>> torch.onnx.export(model, (x,), "model.onnx", input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    """
    refused = {
        "kwargs": kwargs is not None,
        "dynamic_shapes": dynamic_shapes is not None,
        "export_params=False": not export_params,
        "keep_initializers_as_inputs=True": keep_initializers_as_inputs,
    }
    refused.update({name: True for name in options})
    unsupported = [name for name, asked in refused.items() if asked]
    if unsupported:
        raise NotImplementedError(
            f"onnxnn.onnx.export: {', '.join(unsupported)} not supported by onnxnn's exporter "
            "(dynamic sizes: dynamic_axes; keyword inputs: pass them positionally)"
        )
    try:
        mode = TrainingMode(training)
    except ValueError:
        raise ValueError(f"onnxnn.onnx.export: training must be a TrainingMode, got {training!r}") from None
    arguments = dict(
        input_names=input_names,
        output_names=output_names,
        dynamic_axes=dynamic_axes,
        opset_version=opset_version,
        external_data=True if external_data and f is not None else None,
    )
    modules = _modes(model)
    if mode is TrainingMode.PRESERVE:
        return to_onnx(model, args, f, training=any(training for _, training in modules), **arguments)
    if mode is TrainingMode.TRAINING:
        return to_onnx(model, args, f, training=True, **arguments)
    try:
        for module, _ in modules:
            module.train(False)
        return to_onnx(model, args, f, **arguments)
    finally:
        for module, was_training in modules:
            module.training = was_training


def _modes(model) -> list:
    """``(module, training)`` of every module of ``model`` (none for a plain callable)."""
    modules = getattr(model, "modules", None)
    return [(module, module.training) for module in modules()] if callable(modules) else []


def is_in_onnx_export() -> bool:
    """Whether an export is tracing the model now (``to_onnx`` is running its forward)."""
    return exporting()

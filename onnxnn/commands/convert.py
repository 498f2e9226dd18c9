"""``onnxnn convert IN OUT``: weights between PyTorch .pt/.pth/.bin/.ckpt, safetensors and ONNX initializers."""

from __future__ import annotations

import argparse
from collections import OrderedDict
from pathlib import Path

import onnx
from onnx import numpy_helper

from ..export.checkpoint import TORCH_CHECKPOINT_SUFFIXES, load, save
from ..export.onnx_export import write_model
from ..runtime.creation import from_numpy
from ..runtime.tensor import Tensor
from .common import CommandError, existing_file, progress, read_onnx

__all__ = ["DESCRIPTION", "EPILOG", "add_arguments", "run"]

DESCRIPTION = "convert weights between .pt/.pth/.bin/.ckpt, .safetensors (onnxnn checkpoints) and ONNX initializers"
EPILOG = """Formats come from the extensions: .pt .pth .bin .ckpt (PyTorch's zip format; read without running code,
written so that torch.load(weights_only=True) reads it), .safetensors (what onnxnn.save writes; any
safetensors reader opens it), .onnx (a model's initializers, named by their state_dict keys).
Nested checkpoints ({"model": ..., "optimizer": ...}) keep their structure between .pt and .safetensors;
into .onnx their tensors are flattened to dotted names ("model.fc.weight"), or pick one part with --key.

examples:
  onnxnn convert resnet18.pth resnet18.safetensors
  onnxnn convert model.onnx weights.pt                        # the initializers as a state_dict
  onnxnn convert finetuned.safetensors finetuned.onnx --template model.onnx
  onnxnn convert lightning.ckpt weights.safetensors --key state_dict
"""

_SAFETENSORS = (".safetensors",)
_ONNX = (".onnx",)
_ALL = TORCH_CHECKPOINT_SUFFIXES + _SAFETENSORS + _ONNX
# Past this many bytes of initializers an ONNX file must keep them outside the protobuf (2 GB limit).
_EXTERNAL_DATA_BYTES = 1_800_000_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds this command\'s arguments to its parser (the protocol of :mod:`onnxnn.commands`)."""
    parser.add_argument("source", metavar="IN", help="a .pt/.pth/.bin/.ckpt, .safetensors or .onnx file")
    parser.add_argument("target", metavar="OUT", help="the file to write; its extension picks the format")
    parser.add_argument("--key", help="convert only this entry of a checkpoint dict (e.g. 'state_dict', 'model')")
    parser.add_argument(
        "--template",
        metavar="MODEL.onnx",
        help="for an .onnx OUT: a model whose initializers are replaced by IN's tensors (names, shapes and "
        "dtypes must match); without it OUT is a weights-only ONNX model",
    )


def run(args: argparse.Namespace) -> int:
    """Runs the command; returns its exit status (failures raise, and :mod:`onnxnn.cli` prints them)."""
    source = existing_file(args.source, _ALL, "a checkpoint or ONNX model")
    target = Path(args.target)
    if target.suffix.lower() not in _ALL:
        raise CommandError(
            f"'{args.target}': cannot write a '{target.suffix or 'extensionless'}' file; use one of {', '.join(_ALL)}"
        )
    if target.resolve() == source.resolve():
        raise CommandError(f"'{args.target}': IN and OUT are the same file")
    if args.template is not None and target.suffix.lower() not in _ONNX:
        raise CommandError("--template applies only to an .onnx OUT")
    state = _read(source)
    if args.key is not None:
        if not isinstance(state, dict) or args.key not in state:
            keys = ", ".join(map(repr, list(state)[:10])) if isinstance(state, dict) else type(state).__name__
            raise CommandError(f"'{args.source}': has no entry {args.key!r} (it has {keys})")
        state = state[args.key]
    tensors = _flat_tensors(state)
    if not tensors:
        raise CommandError(f"'{args.source}': holds no tensors")
    if target.suffix.lower() in _ONNX:
        _write_onnx(tensors, target, args.template)
    else:
        # onnxnn.save writes the whole file in one call: the bar says which (possibly long) phase runs.
        size = sum(tensor.numel() * tensor.element_size() for tensor in tensors.values())
        with progress(total=1, desc="writing", unit="file") as bar:
            bar.set_postfix_str(f"{target.name}, {size / 1e6:,.1f} MB")
            save(state, str(target))
            bar.update()
    print(f"wrote {len(tensors):,} tensors ({sum(t.numel() for t in tensors.values()):,} values) to {target}")
    return 0


def _read(source: Path):
    if source.suffix.lower() in _ONNX:
        model = read_onnx(str(source))
        state = OrderedDict()
        for initializer in progress(model.graph.initializer, desc="reading", unit="tensor"):
            state[initializer.name] = from_numpy(numpy_helper.to_array(initializer).copy())
        return state
    with progress(total=1, desc="reading", unit="file") as bar:  # onnxnn.load reads the file in one call
        bar.set_postfix_str(f"{source.name}, {source.stat().st_size / 1e6:,.1f} MB")
        state = load(str(source), map_location="cpu")
        bar.update()
    return state


def _flat_tensors(value, prefix: str = "") -> "OrderedDict[str, Tensor]":
    """Every tensor in nested dicts, lists and tuples, under dotted names (``model.fc.weight``)."""
    found = OrderedDict()
    if isinstance(value, Tensor):
        found[prefix or "tensor"] = value
    elif isinstance(value, dict):
        for key, item in value.items():
            found.update(_flat_tensors(item, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found.update(_flat_tensors(item, f"{prefix}.{index}" if prefix else str(index)))
    return found


def _write_onnx(tensors: dict, target: Path, template: str | None) -> None:
    initializers = [
        numpy_helper.from_array(tensor.numpy(force=True), name)
        for name, tensor in progress(tensors.items(), desc="converting", unit="tensor", total=len(tensors))
    ]
    if template is None:
        model = _weights_only_model(initializers)
    else:
        model = read_onnx(template)
        _replace_initializers(model, initializers, template)
    large = sum(len(initializer.raw_data) for initializer in initializers) > _EXTERNAL_DATA_BYTES
    # Replaced in one step (the weights beside it, as target.name + ".data", when large): a failed
    # write leaves the file there before intact.
    write_model(model, target, external_data=1024 if large else False)


def _weights_only_model(initializers: list) -> onnx.ModelProto:
    """A model whose outputs are its initializers (Identity nodes), so onnxruntime can open it too."""
    nodes, outputs = [], []
    for initializer in initializers:
        output = f"{initializer.name}::output"
        nodes.append(onnx.helper.make_node("Identity", [initializer.name], [output]))
        outputs.append(onnx.helper.make_tensor_value_info(output, initializer.data_type, list(initializer.dims)))
    graph = onnx.helper.make_graph(nodes, "weights", [], outputs, initializers)
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 21)], ir_version=10)


def _replace_initializers(model: onnx.ModelProto, initializers: list, template: str) -> None:
    new = {initializer.name: initializer for initializer in initializers}
    old = {initializer.name: initializer for initializer in model.graph.initializer}
    missing, unexpected = sorted(set(old) - set(new)), sorted(set(new) - set(old))
    if missing or unexpected:
        raise CommandError(
            f"'{template}': the tensors do not match its initializers: missing {missing[:5]}"
            f"{' ...' if len(missing) > 5 else ''}, unexpected {unexpected[:5]}{' ...' if len(unexpected) > 5 else ''}",
            hint="names must equal the initializer names (state_dict keys); --key picks a part of a checkpoint",
        )
    for name, initializer in old.items():
        if (tuple(initializer.dims), initializer.data_type) != (tuple(new[name].dims), new[name].data_type):
            raise CommandError(
                f"'{template}': initializer '{name}' is {list(initializer.dims)} of "
                f"{onnx.TensorProto.DataType.Name(initializer.data_type).lower()}, the new tensor "
                f"{list(new[name].dims)} of {onnx.TensorProto.DataType.Name(new[name].data_type).lower()}"
            )
    for index, initializer in enumerate(model.graph.initializer):
        model.graph.initializer[index].CopyFrom(new[initializer.name])

"""A Triton Inference Server model repository for an ONNX model: ``REPO/name/1/model.onnx`` and ``config.pbtxt``.

The configuration is Triton's ``ModelConfig`` protobuf in text format, for the onnxruntime backend.
When every input and output has a dynamic first axis, that axis is Triton's batch axis: ``max_batch_size``
is set, ``dims`` leave it out, and ``dynamic_batching`` is on; otherwise ``max_batch_size`` is 0 and
``dims`` are the full shapes. Other dynamic axes are ``-1``.
"""

from __future__ import annotations

import json
import os
import re

import onnx
from google.protobuf.message import DecodeError

from ..export.onnx_export import write_model

__all__ = ["write_triton_repository", "triton_config_text"]

# ONNX element types to Triton's DataType enum.
_TRITON_TYPES = {
    onnx.TensorProto.BOOL: "TYPE_BOOL",
    onnx.TensorProto.UINT8: "TYPE_UINT8",
    onnx.TensorProto.UINT16: "TYPE_UINT16",
    onnx.TensorProto.UINT32: "TYPE_UINT32",
    onnx.TensorProto.UINT64: "TYPE_UINT64",
    onnx.TensorProto.INT8: "TYPE_INT8",
    onnx.TensorProto.INT16: "TYPE_INT16",
    onnx.TensorProto.INT32: "TYPE_INT32",
    onnx.TensorProto.INT64: "TYPE_INT64",
    onnx.TensorProto.FLOAT16: "TYPE_FP16",
    onnx.TensorProto.FLOAT: "TYPE_FP32",
    onnx.TensorProto.DOUBLE: "TYPE_FP64",
    onnx.TensorProto.BFLOAT16: "TYPE_BF16",
    onnx.TensorProto.STRING: "TYPE_STRING",
}


def _tensors(values, skip: set[str]) -> list[tuple[str, str, list[int]]]:
    tensors = []
    for value in values:
        if value.name in skip:
            continue
        if value.type.WhichOneof("value") != "tensor_type":
            raise ValueError(f"'{value.name}' is not a tensor; a Triton onnxruntime model takes tensors only")
        tensor_type = value.type.tensor_type
        if tensor_type.elem_type not in _TRITON_TYPES:
            name = onnx.TensorProto.DataType.Name(tensor_type.elem_type)
            raise ValueError(f"'{value.name}' has element type {name}, which Triton does not serve")
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tensor_type.shape.dim]
        tensors.append((value.name, _TRITON_TYPES[tensor_type.elem_type], dims))
    return tensors


def _block(kind: str, tensors, batched: bool) -> str:
    entries = []
    for name, data_type, dims in tensors:
        shown = dims[1:] if batched else dims
        # A scalar per batch row still needs one dim in Triton: [1] with reshape to [] (its documented idiom).
        reshape = "\n    reshape: { shape: [ ] }" if not shown else ""
        entries.append(
            f"  {{\n    name: {json.dumps(name)}\n    data_type: {data_type}\n"
            f"    dims: [ {', '.join(str(d) for d in (shown or [1]))} ]{reshape}\n  }}"
        )
    return f"{kind} [\n" + ",\n".join(entries) + "\n]\n"


def triton_config_text(
    model: onnx.ModelProto, name: str, max_batch_size: int = 8, max_queue_delay_us: int = 1000, instances: int = 1
) -> str:
    """``config.pbtxt`` for ``model`` served by Triton's onnxruntime backend under ``name``."""
    initializers = {init.name for init in model.graph.initializer}
    inputs = _tensors(model.graph.input, initializers)
    outputs = _tensors(model.graph.output, set())
    batched = max_batch_size > 0 and all(dims and dims[0] == -1 for _, _, dims in inputs + outputs)
    text = f'name: {json.dumps(name)}\nbackend: "onnxruntime"\nmax_batch_size: {max_batch_size if batched else 0}\n'
    text += _block("input", inputs, batched) + _block("output", outputs, batched)
    if batched:
        text += f"dynamic_batching {{\n  max_queue_delay_microseconds: {max_queue_delay_us}\n}}\n"
    text += f"instance_group [\n  {{\n    count: {instances}\n    kind: KIND_CPU\n  }}\n]\n"
    return text


def write_triton_repository(
    model_path: str,
    repository: str,
    name: str | None = None,
    max_batch_size: int = 8,
    max_queue_delay_us: int = 1000,
    instances: int = 1,
) -> str:
    """Write ``repository/name/1/model.onnx`` and ``repository/name/config.pbtxt``; return the model's folder.

    Args:
        model_path: an ONNX file (external data files next to it are copied with it).
        repository: the model repository, created if missing; other models in it are left alone.
        name: the model's name in Triton, by default the file's stem.
        max_batch_size: Triton's batch limit when the model has a dynamic first axis.
        max_queue_delay_us: Triton's dynamic batching window.
        instances: model instances Triton runs (``instance_group``), on the CPU.
    """
    name = name or os.path.splitext(os.path.basename(model_path))[0]
    # A folder inside the repository: not "." or "..", which would write beside or above it, nor a
    # hidden folder or one that reads as a command-line option.
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*", name):
        raise ValueError(
            f"model name {name!r} must be letters, digits, '_', '.', or '-', starting with a letter, digit or '_' "
            "(it is a folder name in REPO_DIR)"
        )
    try:
        model = onnx.load(model_path)  # external data loaded, so model.onnx below is self-contained
        onnx.checker.check_model(model)
    except (DecodeError, onnx.checker.ValidationError) as error:  # neither is a ValueError
        raise ValueError(f"not a valid ONNX model: {error}") from None
    folder = os.path.join(repository, name)
    os.makedirs(os.path.join(folder, "1"), exist_ok=True)
    large = model.ByteSize() > 2**31 - 1 - 2**20
    target = os.path.join(folder, "1", "model.onnx")
    # Replaced in one step, so a failed write leaves the model there before; over protobuf's 2 GiB
    # limit the weights go to model.onnx.data beside it.
    write_model(model, target, external_data=1024 if large else False)
    with open(os.path.join(folder, "config.pbtxt"), "w") as file:
        file.write(triton_config_text(model, name, max_batch_size, max_queue_delay_us, instances))
    return folder

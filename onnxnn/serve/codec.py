"""The Open Inference Protocol's tensors: JSON ``data`` or the binary data extension, to numpy and back.

A request body is either JSON, or (binary data extension) a JSON header of
``Inference-Header-Content-Length`` bytes followed by the raw tensors, in input order, of the sizes
the header's ``parameters.binary_data_size`` give. Responses mirror it: outputs asked for with
``binary_data`` (or the request's ``binary_data_output``) are sent raw after the JSON header.
"""

from __future__ import annotations

import json
import math

import numpy as np

from .errors import BadRequest

__all__ = ["DATATYPES", "datatype_of", "decode_request", "encode_response", "requested_outputs"]

# The protocol's tensor datatypes (BYTES, strings, is not served: the models here take numbers).
DATATYPES: dict[str, np.dtype] = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
}
_NAME_OF = {dtype: name for name, dtype in DATATYPES.items()}


def datatype_of(dtype: np.dtype) -> str:
    """The protocol's name of a numpy dtype (``float32`` -> ``"FP32"``)."""
    return _NAME_OF[np.dtype(dtype)]


def _parse_header(raw: bytes) -> dict:
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BadRequest(f"malformed JSON in the request body: {error}") from None
    if not isinstance(header, dict):
        raise BadRequest("malformed request: the body must be a JSON object")
    inputs = header.get("inputs")
    if not isinstance(inputs, list) or not inputs:
        raise BadRequest("malformed request: 'inputs' must be a non-empty list")
    return header


def _tensor_fields(tensor) -> tuple[str, str, tuple[int, ...]]:
    if not isinstance(tensor, dict) or not isinstance(tensor.get("name"), str):
        raise BadRequest("malformed request: each input must be an object with a 'name'")
    name, datatype, shape = tensor["name"], tensor.get("datatype"), tensor.get("shape")
    if datatype not in DATATYPES:
        raise BadRequest(f"input '{name}': unsupported datatype {datatype!r}; expected one of {', '.join(DATATYPES)}")
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise BadRequest(f"input '{name}': 'shape' must be a list of non-negative integers, got {shape!r}")
    return name, datatype, tuple(shape)


def decode_request(body: bytes, header_length: int | None) -> tuple[dict[str, np.ndarray], dict]:
    """The request's input tensors by name, and its JSON header (for ``outputs`` and ``parameters``).

    Raises:
        BadRequest: malformed JSON, a tensor whose data does not match its datatype and shape.
    """
    binary: bytes | memoryview
    if header_length is None:
        header, binary = _parse_header(body), b""
    else:
        if not 0 <= header_length <= len(body):
            raise BadRequest(
                f"Inference-Header-Content-Length {header_length} is outside the body of {len(body)} bytes"
            )
        header, binary = _parse_header(body[:header_length]), memoryview(body)[header_length:]
    arrays, offset = {}, 0
    for tensor in header["inputs"]:
        name, datatype, shape = _tensor_fields(tensor)
        if name in arrays:
            raise BadRequest(f"input '{name}' is given twice")
        dtype = DATATYPES[datatype]
        size = (tensor.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            expected = math.prod(shape) * dtype.itemsize
            if size != expected or offset + size > len(binary):
                raise BadRequest(
                    f"input '{name}': binary_data_size {size} does not hold a {datatype} tensor of shape "
                    f"{list(shape)} ({expected} bytes) within the {len(binary) - offset} bytes left"
                )
            arrays[name] = np.frombuffer(binary[offset : offset + size], dtype=dtype).reshape(shape)
            offset += size
            continue
        if "data" not in tensor:
            raise BadRequest(f"input '{name}' has neither 'data' nor parameters.binary_data_size")
        try:
            array = np.asarray(tensor["data"], dtype=dtype)
        except (TypeError, ValueError, OverflowError):
            raise BadRequest(f"input '{name}': 'data' is not a list of {datatype} values") from None
        if array.size != math.prod(shape):
            raise BadRequest(
                f"input '{name}': 'data' holds {array.size} values, shape {list(shape)} needs {math.prod(shape)}"
            )
        arrays[name] = array.reshape(shape)
    if offset != len(binary):
        raise BadRequest(f"the body has {len(binary) - offset} bytes of binary data that no input claims")
    return arrays, header


def _wants_binary(header: dict) -> tuple[bool, dict[str, bool]]:
    everything = bool((header.get("parameters") or {}).get("binary_data_output", False))
    per_output = {}
    for output in header.get("outputs") or []:
        if isinstance(output, dict) and isinstance(output.get("name"), str):
            per_output[output["name"]] = bool((output.get("parameters") or {}).get("binary_data", everything))
    return everything, per_output


def requested_outputs(header: dict) -> list[str] | None:
    """The output names the request asks for, or None for all of them."""
    outputs = header.get("outputs")
    if outputs is None:
        return None
    if not isinstance(outputs, list) or not all(
        isinstance(o, dict) and isinstance(o.get("name"), str) for o in outputs
    ):
        raise BadRequest("malformed request: 'outputs' must be a list of objects with a 'name'")
    return [output["name"] for output in outputs]


def encode_response(
    model_name: str, version: str, request_header: dict, outputs: dict[str, np.ndarray]
) -> tuple[bytes, int | None]:
    """The response body, and the JSON header's length when binary tensors follow it (else None)."""
    everything, per_output = _wants_binary(request_header)
    tensors, chunks = [], []
    for name, array in outputs.items():
        entry: dict[str, object] = {"name": name, "datatype": datatype_of(array.dtype), "shape": list(array.shape)}
        if per_output.get(name, everything):
            raw = np.asarray(array, order="C").tobytes()
            entry["parameters"] = {"binary_data_size": len(raw)}
            chunks.append(raw)
        else:
            entry["data"] = array.reshape(-1).tolist()
        tensors.append(entry)
    response = {"model_name": model_name, "model_version": version, "outputs": tensors}
    if "id" in request_header:
        response["id"] = request_header["id"]
    body = json.dumps(response).encode()
    if not chunks:
        return body, None
    return body + b"".join(chunks), len(body)

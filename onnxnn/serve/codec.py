"""The Open Inference Protocol's tensors: JSON ``data`` or the binary data extension, to numpy and back.

A request body is either JSON, or (binary data extension) a JSON header of
``Inference-Header-Content-Length`` bytes followed by the raw tensors, in input order, of the sizes
the header's ``parameters.binary_data_size`` give. Responses mirror it: outputs asked for with
``binary_data`` (or the request's ``binary_data_output``) are sent raw after the JSON header.
"""

from __future__ import annotations

import itertools
import json
import math
import sys
from typing import Any

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

# The JSON values ``data`` may hold, by the datatype's numpy kind, as Triton's JSON parser requires:
# BOOL takes true/false only, the integer types integers only, the floating types any number (NaN and
# Infinity included: Python's json reads those literals, and the responses write them). Compared by
# ``type``, not isinstance: a JSON true is a bool, which is an int subclass.
_JSON_TYPES: dict[str, tuple[frozenset[type], str]] = {
    "b": (frozenset({bool}), "JSON true or false"),
    "i": (frozenset({int}), "JSON integers"),
    "u": (frozenset({int}), "JSON integers"),
    "f": (frozenset({int, float}), "JSON numbers"),
}

# numpy's limits: at most 64 axes, and the product of the non-zero axes times the item size must fit
# in an intp even when another axis is 0 (else reshape raises "array is too big").
_MAX_AXES = 64
_MAX_BYTES = int(np.iinfo(np.intp).max)


def _json_text(value: object) -> str:
    """A short JSON rendering of one offending value for an error message."""
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "a list"
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _parameters(owner: dict, where: str) -> dict:
    """``owner['parameters']``: an object, or {} when absent or null."""
    parameters = owner.get("parameters")
    if parameters is None:
        return {}
    if not isinstance(parameters, dict):
        raise BadRequest(f"malformed request: {where} 'parameters' must be an object, got {_json_text(parameters)}")
    return parameters


def _flag(parameters: dict, key: str, default: bool, where: str) -> bool:
    value = parameters.get(key, default)
    if not isinstance(value, bool):  # bool("false") would be True
        raise BadRequest(f"malformed request: {where} parameter '{key}' must be true or false, got {_json_text(value)}")
    return value


def datatype_of(dtype: np.dtype) -> str:
    """The protocol's name of a numpy dtype (``float32`` -> ``"FP32"``)."""
    return _NAME_OF[np.dtype(dtype)]


def _parse_header(raw: bytes) -> dict:
    try:
        header = json.loads(raw)
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError, or an integer of over 4300 digits
        raise BadRequest(f"malformed JSON in the request body: {error}") from None
    except RecursionError:
        raise BadRequest("malformed JSON in the request body: nested too deeply") from None
    if not isinstance(header, dict):
        raise BadRequest("malformed request: the body must be a JSON object")
    inputs = header.get("inputs")
    if not isinstance(inputs, list) or not inputs:
        raise BadRequest("malformed request: 'inputs' must be a non-empty list")
    if "id" in header and not isinstance(header["id"], str):
        raise BadRequest(f"malformed request: 'id' must be a string, got {_json_text(header['id'])}")
    # Checked before the model runs, so that encode_response cannot fail on them afterwards.
    _flag(_parameters(header, "the request's"), "binary_data_output", False, "the request's")
    for output in _outputs(header) or []:
        where = f"output '{output['name']}'"
        _flag(_parameters(output, where), "binary_data", False, where)
    return header


def _outputs(header: dict) -> list[dict] | None:
    outputs = header.get("outputs")
    if outputs is None:
        return None
    if not isinstance(outputs, list) or not all(
        isinstance(o, dict) and isinstance(o.get("name"), str) for o in outputs
    ):
        raise BadRequest("malformed request: 'outputs' must be a list of objects with a 'name'")
    return outputs


def _tensor_fields(tensor) -> tuple[str, str, tuple[int, ...]]:
    if not isinstance(tensor, dict) or not isinstance(tensor.get("name"), str):
        raise BadRequest("malformed request: each input must be an object with a 'name'")
    name, datatype, shape = tensor["name"], tensor.get("datatype"), tensor.get("shape")
    if datatype not in DATATYPES:
        raise BadRequest(f"input '{name}': unsupported datatype {datatype!r}; expected one of {', '.join(DATATYPES)}")
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise BadRequest(f"input '{name}': 'shape' must be a list of non-negative integers, got {shape!r}")
    nominal_bytes = math.prod(d for d in shape if d) * DATATYPES[datatype].itemsize
    if len(shape) > _MAX_AXES or nominal_bytes > _MAX_BYTES:
        raise BadRequest(f"input '{name}': shape {shape} is too large for a {datatype} tensor")
    return name, datatype, tuple(shape)


def _flatten(name: str, data: object) -> tuple[list, set[type]]:
    """``data``'s values in row-major order, and their types; nested lists are unpacked a level at a time."""
    values: list[Any] = data if isinstance(data, list) else [data]
    while True:
        kinds = set(map(type, values))  # one pass in C, not a Python loop per element
        if list not in kinds:
            return values, kinds
        if kinds != {list}:
            raise BadRequest(f"input '{name}': 'data' mixes nested lists and values at the same depth")
        values = list(itertools.chain.from_iterable(values))


def _json_array(name: str, datatype: str, data: object) -> np.ndarray:
    """The flat array of a JSON ``data``: BadRequest for a value of another type or out of the datatype's range."""
    dtype = DATATYPES[datatype]
    values, kinds = _flatten(name, data)
    allowed, description = _JSON_TYPES[dtype.kind]
    if not kinds <= allowed:
        wrong = next(value for value in values if type(value) not in allowed)
        raise BadRequest(f"input '{name}': {datatype} 'data' takes {description}, got {_json_text(wrong)}")
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        for bound in (min(values, default=0), max(values, default=0)):
            if not info.min <= bound <= info.max:
                raise BadRequest(
                    f"input '{name}': {_json_text(bound)} is outside the {datatype} range [{info.min}, {info.max}]"
                )
        return np.asarray(values, dtype=dtype)
    if dtype.kind == "b":
        return np.asarray(values, dtype=dtype)
    try:
        wide = np.asarray(values, dtype=np.float64)
    except OverflowError:  # an integer beyond float64's range
        wrong = next(value for value in values if type(value) is int and abs(value) > sys.float_info.max)
        raise BadRequest(f"input '{name}': {_json_text(wrong)} is outside the {datatype} range") from None
    with np.errstate(over="ignore"):
        array = wide.astype(dtype, copy=False)
    overflowed = np.isinf(array) & np.isfinite(wide)  # a finite number that the datatype cannot hold
    if overflowed.any():
        raise BadRequest(f"input '{name}': {_json_text(float(wide[overflowed][0]))} is outside the {datatype} range")
    return array


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
        size = _parameters(tensor, f"input '{name}'").get("binary_data_size")
        if size is not None:
            expected = math.prod(shape) * dtype.itemsize
            if type(size) is not int or size != expected or offset + size > len(binary):
                raise BadRequest(
                    f"input '{name}': binary_data_size {_json_text(size)} does not hold a {datatype} tensor of "
                    f"shape {list(shape)} ({expected} bytes) within the {len(binary) - offset} bytes left"
                )
            arrays[name] = _binary_array(binary[offset : offset + size], dtype).reshape(shape)
            offset += size
            continue
        if "data" not in tensor:
            raise BadRequest(f"input '{name}' has neither 'data' nor parameters.binary_data_size")
        array = _json_array(name, datatype, tensor["data"])
        if array.size != math.prod(shape):
            raise BadRequest(
                f"input '{name}': 'data' holds {array.size} values, shape {list(shape)} needs {math.prod(shape)}"
            )
        arrays[name] = array.reshape(shape)
    if offset != len(binary):
        raise BadRequest(f"the body has {len(binary) - offset} bytes of binary data that no input claims")
    return arrays, header


def _binary_array(raw: bytes | memoryview, dtype: np.dtype) -> np.ndarray:
    if dtype.kind == "b":
        # Any non-zero byte is true, as onnxnn's safetensors reader reads BOOL: a raw 7 or 255 handed
        # to onnxruntime as a bool would leak through a Cast unchanged.
        return np.frombuffer(raw, dtype=np.uint8) != 0
    return np.frombuffer(raw, dtype=dtype)


def _wants_binary(header: dict) -> tuple[bool, dict[str, bool]]:
    # The header passed _parse_header: the parameters are objects and the flags booleans.
    everything = _flag(_parameters(header, "the request's"), "binary_data_output", False, "the request's")
    per_output = {}
    for output in _outputs(header) or []:
        where = f"output '{output['name']}'"
        per_output[output["name"]] = _flag(_parameters(output, where), "binary_data", everything, where)
    return everything, per_output


def requested_outputs(header: dict) -> list[str] | None:
    """The output names the request asks for, or None for all of them."""
    outputs = _outputs(header)
    return None if outputs is None else [output["name"] for output in outputs]


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

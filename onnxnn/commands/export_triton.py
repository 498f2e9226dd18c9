"""``onnxnn export-triton MODEL REPO_DIR``: a Triton Inference Server model repository for an ONNX model."""

from __future__ import annotations

import argparse
import os
import sys

from ..serve.triton import write_triton_repository

__all__ = ["DESCRIPTION", "EPILOG", "add_arguments", "run"]

DESCRIPTION = "write a Triton Inference Server model repository (config.pbtxt, onnxruntime backend) for a model"

EPILOG = """examples:
  onnxnn export-triton model.onnx models/                 # models/model/1/model.onnx, models/model/config.pbtxt
  onnxnn export-triton model.onnx models/ --name clf --max-batch-size 32 --instances 2
  docker run --rm -p8000:8000 -v $PWD/models:/models nvcr.io/nvidia/tritonserver:<tag>-py3 \\
      tritonserver --model-repository=/models

A model whose inputs and outputs all have a dynamic first axis gets Triton's max_batch_size and
dynamic_batching; otherwise max_batch_size 0 and full shapes. Exit status: 0, or 2 with one line on
stderr when the model cannot be read."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="an ONNX file")
    parser.add_argument("repository", metavar="REPO_DIR", help="the model repository (created if missing)")
    parser.add_argument("--name", help="the model's name in Triton (default: the file's stem)")
    parser.add_argument("--max-batch-size", type=int, default=8, help="Triton's max_batch_size (default: 8)")
    parser.add_argument(
        "--max-queue-delay-us", type=int, default=1000, help="dynamic batching window in microseconds (default: 1000)"
    )
    parser.add_argument("--instances", type=int, default=1, help="model instances on the CPU (default: 1)")


def run(args: argparse.Namespace) -> int:
    if args.max_batch_size < 0 or args.max_queue_delay_us < 0 or args.instances < 1:
        print(
            "onnxnn export-triton: --max-batch-size and --max-queue-delay-us must be >= 0, --instances >= 1",
            file=sys.stderr,
        )
        return 2
    if not os.path.isfile(args.model):
        print(f"onnxnn export-triton: '{args.model}': no such file", file=sys.stderr)
        return 2
    try:
        folder = write_triton_repository(
            args.model, args.repository, args.name, args.max_batch_size, args.max_queue_delay_us, args.instances
        )
    except (OSError, ValueError) as error:  # write_triton_repository turns onnx's errors into ValueErrors
        message = " ".join(str(error).split()) or type(error).__name__
        print(f"onnxnn export-triton: '{args.model}': {message}", file=sys.stderr)
        return 2
    config, weights = os.path.join(folder, "config.pbtxt"), os.path.join(folder, "1", "model.onnx")
    print(f"onnxnn export-triton: wrote {config} and {weights}")
    return 0

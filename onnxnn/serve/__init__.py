"""Serving exported models over the Open Inference Protocol (KServe v2 / Triton's REST API).

The server runs each model with a plain onnxruntime ``InferenceSession``, never through onnxnn's
recording path, so serving costs what onnxruntime costs. One idea per module:

- :mod:`onnxnn.serve.codec`: the protocol's tensors (JSON and the binary data extension) to numpy and back.
- :mod:`onnxnn.serve.model`: a served model, its metadata and the checks of a request against it.
- :mod:`onnxnn.serve.batching`: dynamic batching, requests arriving within a window run as one batch.
- :mod:`onnxnn.serve.metrics`: Prometheus metrics (requests, latencies, batch sizes).
- :mod:`onnxnn.serve.app`: the Starlette application (routes, error bodies, body size limit).
- :mod:`onnxnn.serve.server`: uvicorn, the bound port, graceful shutdown.
- :mod:`onnxnn.serve.triton`: a Triton Inference Server model repository for a model.

Starlette, uvicorn and prometheus_client are the ``serve`` extra: ``pip install onnxnn[serve]``.
"""

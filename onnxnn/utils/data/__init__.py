"""onnxnn.utils.data: data loading utilities (``distributed.DistributedSampler``)."""

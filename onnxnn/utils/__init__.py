"""onnxnn.utils: PyTorch's ``torch.utils`` names (``data.distributed.DistributedSampler`` for now)."""

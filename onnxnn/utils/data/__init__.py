"""onnxnn.utils.data: PyTorch's ``torch.utils.data`` datasets and samplers.

``distributed.DistributedSampler`` lives in its own module, as in PyTorch; ``DataLoader`` and
``default_collate`` are not there yet.
"""

from .dataset import ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset
from .sampler import BatchSampler, Sampler, SequentialSampler

__all__ = [
    "Dataset",
    "IterableDataset",
    "TensorDataset",
    "ConcatDataset",
    "Subset",
    "Sampler",
    "SequentialSampler",
    "BatchSampler",
]

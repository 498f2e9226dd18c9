"""onnxnn.utils.data: PyTorch's ``torch.utils.data``: datasets, samplers, collation and ``DataLoader``.

``DistributedSampler`` lives in ``distributed``, and is exported here too, as in PyTorch.
"""

from ._worker import WorkerInfo, get_worker_info
from .collate import default_collate, default_convert
from .dataloader import DataLoader
from .distributed import DistributedSampler
from .dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)
from .sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = [
    "DataLoader",
    "Dataset",
    "IterableDataset",
    "TensorDataset",
    "StackDataset",
    "ChainDataset",
    "ConcatDataset",
    "Subset",
    "random_split",
    "Sampler",
    "SequentialSampler",
    "RandomSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
    "BatchSampler",
    "DistributedSampler",
    "default_collate",
    "default_convert",
    "get_worker_info",
    "WorkerInfo",
]

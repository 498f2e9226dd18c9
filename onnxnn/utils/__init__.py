"""onnxnn.utils: PyTorch's ``torch.utils`` names (``data``: datasets, samplers and ``DataLoader``;
``checkpoint``: activation checkpointing; ``hooks``: ``RemovableHandle``)."""


def __getattr__(name: str):
    # ``torch.utils.data.DataLoader`` and ``torch.utils.checkpoint.checkpoint`` work after ``import torch``
    # alone: the submodules load on first use here.
    if name in ("data", "checkpoint", "hooks"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

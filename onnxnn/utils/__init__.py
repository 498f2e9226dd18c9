"""onnxnn.utils: PyTorch's ``torch.utils`` names (``data``: datasets, samplers and ``DataLoader``)."""


def __getattr__(name: str):
    # ``torch.utils.data.DataLoader`` works without importing torch.utils.data first.
    if name == "data":
        import importlib

        return importlib.import_module(".data", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""torchvision's weights, saved with torch.save, load into the onnxnn models and give torchvision's outputs.

Runs only where torch and torchvision are installed (they are not onnxnn dependencies):
``PYTHONPATH=$PWD /path/to/venv-with-torchvision/bin/python -m pytest tests/models/vision/test_torchvision_weights.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn.models import vision

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")

SMALL_VIT = {"image_size": 32, "patch_size": 16, "num_layers": 2, "num_heads": 2, "hidden_dim": 32, "mlp_dim": 64}

# name -> (torchvision builder, onnxnn builder, kwargs, input side)
CASES = {
    "resnet18": ("resnet18", vision.resnet18, {}, 64),
    "mobilenet_v3_small": ("mobilenet_v3_small", vision.mobilenet_v3_small, {}, 64),
    "vit_small": ("VisionTransformer", vision.VisionTransformer, SMALL_VIT, 32),
    "efficientnet_b0": ("efficientnet_b0", vision.efficientnet_b0, {}, 64),
    "squeezenet1_0": ("squeezenet1_0", vision.squeezenet1_0, {}, 64),
    "squeezenet1_1": ("squeezenet1_1", vision.squeezenet1_1, {}, 64),
    "densenet121": ("densenet121", vision.densenet121, {}, 64),
    "convnext_tiny": ("convnext_tiny", vision.convnext_tiny, {}, 64),
    "resnext50_32x4d": ("resnext50_32x4d", vision.resnext50_32x4d, {}, 64),
    "mobilenet_v2": ("mobilenet_v2", vision.mobilenet_v2, {}, 64),
    "regnet_y_400mf": ("regnet_y_400mf", vision.regnet_y_400mf, {}, 64),
    # 64x64: stage maps 16, 8, 4, 2 exercise the shifted-window mask, the padding to a window and its skip.
    "swin_t": ("swin_t", vision.swin_t, {}, 64),
}
# The three in both file formats; the other families in torch.save's.
FILES = [
    (name, suffix) for name in ("resnet18", "mobilenet_v3_small", "vit_small") for suffix in (".pth", ".safetensors")
]
FILES += [(name, ".pth") for name in CASES if name not in ("resnet18", "mobilenet_v3_small", "vit_small")]


def _randomize(model) -> None:
    """Makes every float tensor non-trivial (ViT's head starts at zero, BatchNorm's statistics at 0 and 1)."""
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, value in model.state_dict().items():
            if not value.is_floating_point():
                continue
            if name.endswith("running_var"):
                value.copy_(torch.rand(value.shape, generator=generator) + 0.5)
            elif name.endswith("weight") and value.dim() == 1:  # normalization scales stay near 1
                value.copy_(1 + 0.1 * torch.randn(value.shape, generator=generator))
            else:
                value.copy_(value + 0.05 * torch.randn(value.shape, generator=generator))


@pytest.mark.parametrize("name, suffix", FILES)
def test_torchvision_weights_give_torchvision_outputs(name, suffix, tmp_path):
    tv_builder, builder, kwargs, side = CASES[name]
    reference_model = getattr(torchvision.models, tv_builder)(**kwargs)
    _randomize(reference_model)
    reference_model.eval()
    path = tmp_path / f"{name}{suffix}"
    if suffix == ".pth":
        torch.save(reference_model.state_dict(), path)
    else:
        safetensors_torch = pytest.importorskip("safetensors.torch")
        safetensors_torch.save_file(reference_model.state_dict(), str(path))
    x = np.random.default_rng(1).standard_normal((2, 3, side, side)).astype(np.float32)
    with torch.no_grad():
        expected = reference_model(torch.from_numpy(x)).numpy()

    if builder is vision.VisionTransformer:  # a configuration without a builder: load the file by hand
        model = builder(**kwargs)
        model.load_state_dict(onnxnn.load(path))
    else:
        model = builder(weights=path, **kwargs)
    model.eval()
    actual = model(onnxnn.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


def test_imagenet_preprocess_matches_torchvision_transforms():
    from torchvision.transforms import v2

    image = np.random.default_rng(3).integers(0, 256, size=(300, 410, 3), dtype=np.uint8)
    preset = v2.Compose(
        [
            v2.Resize(256, antialias=True),
            v2.CenterCrop(224),
            v2.Normalize(mean=list(vision.transforms.IMAGENET_MEAN), std=list(vision.transforms.IMAGENET_STD)),
        ]
    )
    # torchvision on a float image (a uint8 tensor would be rounded back to uint8 after resizing).
    expected = preset(torch.from_numpy(image).permute(2, 0, 1).float() / 255.0).numpy()
    actual = vision.imagenet_preprocess(image)
    # Both resample with the same antialiased triangle filter; torchvision's kernel computes its
    # weights and sums in another order, which differs by well under a hundredth of a uint8 level.
    hundredth_of_a_level = 0.01 / 255 / min(vision.transforms.IMAGENET_STD)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=hundredth_of_a_level)

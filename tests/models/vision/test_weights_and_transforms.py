"""weights= loads local state_dict files (and refuses anything else); the ImageNet preprocessing on numpy."""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn.models import vision
from onnxnn.models.vision import transforms

SMALL_VIT = {"image_size": 32, "patch_size": 16, "num_layers": 1, "num_heads": 2, "hidden_dim": 16, "mlp_dim": 32}


@pytest.mark.parametrize("suffix", [".pth", ".safetensors"])
def test_weights_file_round_trips(tmp_path, suffix):
    source = vision.mobilenet_v3_small(num_classes=3)
    path = tmp_path / f"weights{suffix}"
    onnxnn.save(source.state_dict(), path)
    loaded = vision.mobilenet_v3_small(weights=path, num_classes=3)
    for (key, expected), (other_key, actual) in zip(source.state_dict().items(), loaded.state_dict().items()):
        assert key == other_key
        np.testing.assert_array_equal(actual.numpy(), expected.numpy())


def test_weights_of_another_head_size_raise_at_load(tmp_path):
    path = tmp_path / "weights.pth"
    onnxnn.save(vision.mobilenet_v3_small(num_classes=3).state_dict(), path)
    with pytest.raises(RuntimeError, match="size mismatch"):
        vision.mobilenet_v3_small(weights=path, num_classes=5)


def test_missing_weights_file_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="only local files"):
        vision.resnet18(weights=tmp_path / "absent.pth")


def test_weights_enum_object_is_refused():
    with pytest.raises(TypeError, match="path to a local state_dict file"):
        vision.resnet18(weights=1)


def test_vit_refuses_wrong_image_size_and_indivisible_patches():
    model = vision.VisionTransformer(**SMALL_VIT)
    with pytest.raises(AssertionError, match="Wrong image size"):
        model(onnxnn.randn(1, 3, 16, 16))
    with pytest.raises(ValueError, match="indivisible"):
        vision.VisionTransformer(**{**SMALL_VIT, "image_size": 30})


def test_resize_keeps_aspect_and_constant_images():
    image = np.full((40, 80, 3), 7, dtype=np.uint8)
    resized = transforms.resize(image, 20)
    assert resized.shape == (20, 40, 3)
    # Bilinear weights sum to one, so a constant image stays constant up to float32 rounding.
    np.testing.assert_allclose(resized, 7, rtol=4 * np.finfo(np.float32).eps)


def test_resize_is_exact_on_a_linear_ramp_interior():
    # Halving: output i is centred at source 2i + 0.5 with a triangle of half-width 2, which weighs
    # pixels 2i-1 .. 2i+2 by 1/8, 3/8, 3/8, 1/8: the ramp's value at the centre, 2i + 0.5.
    ramp = np.tile(np.arange(8, dtype=np.float32)[None, :, None], (8, 1, 1))
    resized = transforms.resize(ramp, 4)
    np.testing.assert_allclose(resized[0, 1:3, 0], [2.5, 4.5], rtol=4 * np.finfo(np.float32).eps)


def test_center_crop_and_normalize():
    image = np.arange(6 * 6 * 3, dtype=np.float32).reshape(6, 6, 3)
    crop = transforms.center_crop(image, 2)
    np.testing.assert_array_equal(crop, image[2:4, 2:4])
    normalized = transforms.normalize(np.ones((2, 2, 3), dtype=np.float32) * 0.5)
    assert normalized.shape == (3, 2, 2)
    expected = (0.5 - np.array(transforms.IMAGENET_MEAN, np.float32)) / np.array(transforms.IMAGENET_STD, np.float32)
    np.testing.assert_allclose(normalized[:, 0, 0], expected)
    with pytest.raises(ValueError, match="cannot crop"):
        transforms.center_crop(image, 7)


def test_imagenet_preprocess_shape_and_dtype():
    image = np.random.default_rng(0).integers(0, 256, size=(300, 400, 3), dtype=np.uint8)
    batch = transforms.imagenet_preprocess(image)
    assert batch.shape == (3, 224, 224)
    assert batch.dtype == np.float32


def test_stochastic_depth_drops_whole_rows_and_rescales_survivors():
    from onnxnn.models.vision._layers import StochasticDepth

    layer = StochasticDepth(0.5, "row")
    x = onnxnn.ones(64, 3, 2, 2)
    out = layer(x).numpy()
    per_row = out.reshape(64, -1)
    # Each sample is either dropped (all zeros) or kept and scaled by 1 / (1 - p) = 2, never mixed.
    assert set(np.unique(per_row)) <= {0.0, 2.0}
    assert (per_row.min(axis=1) == per_row.max(axis=1)).all()
    assert 0 < (per_row[:, 0] == 0).sum() < 64
    layer.eval()
    np.testing.assert_array_equal(layer(x).numpy(), x.numpy())
    with pytest.raises(ValueError, match="mode has to be either"):
        StochasticDepth(0.5, "column")

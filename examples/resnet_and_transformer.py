"""A small ResNet-style CNN and a small transformer-style encoder, written as in PyTorch, trained and exported.

Both models use only onnxnn modules (the same code runs on PyTorch with ``import torch`` in place of
``import onnxnn as torch``). Each trains for a few hundred Adam steps on synthetic data whose labels
it can learn, printing the falling loss, then is exported with ``onnxnn.export.to_onnx`` with a
dynamic batch axis, and plain onnxruntime runs the exported graph on a batch of another size and
gives the outputs onnxnn gives.

- ResNet: Conv2d, BatchNorm2d, ReLU, residual blocks (one with a strided 1x1 projection shortcut),
  AdaptiveAvgPool2d, Linear. Task: which of four quadrants of an 8x8 image holds a bright square.
- Encoder: Embedding (tokens, with padding_idx, and learned positions), LayerNorm, multi-head
  self-attention written with Linear + matmul + softmax and a key padding mask, a GELU MLP, dropout,
  and a masked mean over the sequence. Task: the class of the sequence's first token, in sequences
  of random lengths padded with token 0.

Run: python examples/resnet_and_transformer.py [steps]   (default 300 steps per model; the
environment variable ONNXNN_EXAMPLE_STEPS sets it too, as the test does)
"""

from __future__ import annotations

import math
import os
import sys
import tempfile

import numpy as np
import onnxruntime
from tqdm import tqdm

import onnxnn as torch
import onnxnn.nn.functional as F
from onnxnn import nn

# ----------------------------------------------------------------------------------------------- ResNet


class BasicBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU()
        self.shortcut = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False), nn.BatchNorm2d(out_channels)
            )

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.shortcut(x))


class SmallResNet(nn.Module):
    def __init__(self, in_channels: int = 1, width: int = 8, num_classes: int = 4):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU()
        )
        self.layer1 = BasicBlock(width, width)
        self.layer2 = BasicBlock(width, 2 * width, stride=2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2 * width, num_classes)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


def quadrant_images(batch: int, generator: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """8x8 noise images with a bright 2x2 square in one quadrant; the label is the quadrant."""
    images = generator.normal(0.0, 0.5, size=(batch, 1, 8, 8)).astype(np.float32)
    labels = generator.integers(0, 4, size=batch)
    for index, label in enumerate(labels):
        top, left = 4 * (label // 2) + generator.integers(0, 3), 4 * (label % 2) + generator.integers(0, 3)
        images[index, 0, top : top + 2, left : left + 2] += 2.0
    return images, labels.astype(np.int64)


# ---------------------------------------------------------------------------------------------- Encoder


class SelfAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, dropout: float):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, key_padding_mask):
        batch, length, d_model = x.shape
        q, k, v = self.qkv(x).reshape(batch, length, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        # Padded keys get no attention: (batch, 1, 1, length) broadcasts over heads and queries.
        scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        weights = self.dropout(F.softmax(scores, dim=-1))
        context = torch.matmul(weights, v).transpose(1, 2).reshape(batch, length, d_model)
        return self.out(context)


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, num_heads: int, d_hidden: int, dropout: float):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attention = SelfAttention(d_model, num_heads, dropout)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, d_hidden), nn.GELU(), nn.Dropout(dropout), nn.Linear(d_hidden, d_model)
        )
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, key_padding_mask):
        x = x + self.dropout(self.attention(self.norm1(x), key_padding_mask))
        return x + self.dropout(self.mlp(self.norm2(x)))


class SmallEncoder(nn.Module):
    def __init__(
        self,
        vocab: int = 16,
        max_length: int = 12,
        d_model: int = 32,
        num_heads: int = 4,
        num_layers: int = 2,
        num_classes: int = 4,
        dropout: float = 0.1,
    ):
        super().__init__()
        self.tokens = nn.Embedding(vocab, d_model, padding_idx=0)
        self.positions = nn.Embedding(max_length, d_model)
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, 2 * d_model, dropout) for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, tokens):
        padding = tokens == 0
        positions = torch.arange(tokens.shape[1])
        x = self.tokens(tokens) + self.positions(positions)
        for layer in self.layers:
            x = layer(x, padding)
        keep = (~padding).to(x.dtype).unsqueeze(-1)
        pooled = (self.norm(x) * keep).sum(1) / keep.sum(1)
        return self.head(pooled)


def token_sequences(
    batch: int, generator: np.random.Generator, vocab: int = 16, max_length: int = 12
) -> tuple[np.ndarray, np.ndarray]:
    """Sequences of tokens 1..vocab-1 of random lengths, padded with 0; the label is the first
    token's class (token mod 4)."""
    tokens = generator.integers(1, vocab, size=(batch, max_length))
    lengths = generator.integers(3, max_length + 1, size=batch)
    tokens[np.arange(max_length)[None, :] >= lengths[:, None]] = 0
    return tokens.astype(np.int64), (tokens[:, 0] % 4).astype(np.int64)


# ------------------------------------------------------------------------------------- training, export


def train(model: nn.Module, data, steps: int, lr: float, label: str, log_every: int = 50) -> list[float]:
    """Adam on fresh synthetic batches; returns the loss of every step."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    losses = []
    progress = tqdm(range(steps), desc=label, unit="step")  # on stderr, with the running loss
    for step in progress:
        inputs, labels = data()
        loss = F.cross_entropy(model(torch.from_numpy(inputs)), torch.from_numpy(labels))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        progress.set_postfix(loss=f"{losses[-1]:.4f}")
        if step % log_every == 0 or step == steps - 1:
            progress.write(f"{label} step {step:4d}  loss {losses[-1]:.4f}")  # above the bar
    progress.close()
    return losses


def export_and_compare(model: nn.Module, example: np.ndarray, other_batch: np.ndarray, label: str) -> float:
    """Exports ``model`` (eval mode) with a dynamic batch axis, runs the file on plain onnxruntime for
    a batch of another size and returns the largest difference from onnxnn's outputs."""
    model.eval()
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, f"{label}.onnx")
        torch.export.to_onnx(
            model,
            torch.from_numpy(example),
            path,
            input_names=["input"],
            output_names=["logits"],
            dynamic_axes={"input": {0: "batch"}},
        )
        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    (served,) = session.run(None, {"input": other_batch})
    with torch.no_grad():
        ours = model(torch.from_numpy(other_batch)).numpy()
    difference = float(np.abs(served - ours).max())
    print(f"{label}: exported, onnxruntime on a batch of {len(other_batch)}: max |difference| {difference:.2e}")
    return difference


def save_loss_curves(curves: dict, path: str) -> None:
    """Saves each model's loss per step to a PNG with matplotlib, or says the plot was skipped without it."""
    try:
        from matplotlib.figure import Figure  # the object API: no GUI backend, no global pyplot state
    except ImportError:
        print("matplotlib is not installed: skipped the loss-curve plot (pip install 'onnxnn[plot]')")
        return
    figure = Figure(figsize=(6, 4))
    axes = figure.add_subplot()
    for label, losses in curves.items():
        axes.plot(losses, label=label)
    axes.set(xlabel="step", ylabel="cross entropy", yscale="log")
    axes.legend()
    figure.savefig(path, dpi=100, bbox_inches="tight")
    print(f"saved the loss curves to {path}")


def run(steps: int, seed: int = 0) -> dict:
    """Trains and exports both models; returns the models, their losses and export differences."""
    torch.manual_seed(seed)
    generator = np.random.default_rng(seed)
    results = {}

    resnet = results["resnet"] = SmallResNet()
    results["resnet_losses"] = train(resnet, lambda: quadrant_images(32, generator), steps, 1e-2, "resnet")
    results["resnet_export_difference"] = export_and_compare(
        resnet, quadrant_images(4, generator)[0], quadrant_images(7, generator)[0], "resnet"
    )

    encoder = results["encoder"] = SmallEncoder()
    results["encoder_losses"] = train(encoder, lambda: token_sequences(32, generator), steps, 3e-3, "encoder")
    results["encoder_export_difference"] = export_and_compare(
        encoder, token_sequences(4, generator)[0], token_sequences(7, generator)[0], "encoder"
    )
    return results


if __name__ == "__main__":
    results = run(int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("ONNXNN_EXAMPLE_STEPS", "300")))
    save_loss_curves(
        {label: results[f"{label}_losses"] for label in ("resnet", "encoder")}, "resnet_and_transformer_loss.png"
    )

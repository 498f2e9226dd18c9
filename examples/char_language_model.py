"""Character-level language models, written as in PyTorch: an LSTM and a small causal transformer.

Both models learn to predict the next character of ``examples/data/nursery_rhymes.txt`` (traditional
English nursery rhymes, in the public domain, about 3.5 KB). Each prints a seeded sample before
training, trains with Adam (printing the falling cross entropy, in nats per character), prints a
sample again, and is exported with ``onnxnn.export.to_onnx``; plain onnxruntime then runs the file
and gives the logits onnxnn gives.

- LSTM: ``nn.Embedding`` + ``nn.LSTM`` (batch_first) + ``nn.Linear``, trained by truncated
  backpropagation through time: 32 streams read the text 16 characters per step, the LSTM's state
  carried (detached) from step to step. Sampling carries the state from one character to the next.
  Exported for a fixed batch size (onnxnn's LSTM is recorded unrolled over Python-int sizes).
- Transformer: ``nn.Embedding`` for tokens and for positions + a pre-norm ``nn.TransformerEncoder``
  given a causal mask (``nn.Transformer.generate_square_subsequent_mask``) with ``is_causal=True`` +
  ``nn.Linear``, trained on random 48-character windows. Sampling slides a 48-character window over
  the text generated so far. Exported with a dynamic batch axis, checked on a batch of another size.

The models, the training loop and the samplers use only PyTorch's API (``import onnxnn as torch``);
``onnxnn.export.to_onnx`` stands where PyTorch has ``torch.onnx.export``.

Run: python examples/char_language_model.py [steps]   (default 200 steps per model, about a minute on
two CPU cores; the environment variable ONNXNN_EXAMPLE_STEPS sets it too, as the test does)
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnxruntime
from tqdm import tqdm

import onnxnn as torch
import onnxnn.nn.functional as F
from onnxnn import nn

TEXT_PATH = Path(__file__).resolve().parent / "data" / "nursery_rhymes.txt"
CONTEXT = 48  # the transformer's training windows and attention span, in characters
LSTM_CHUNK = 16  # characters per LSTM training step (its state carries over from step to step)
BATCH = 32
SAMPLE_LENGTH = 160
PROMPT = "Little "


class Vocabulary:
    """Maps the characters of a text to token ids 0..size-1 (sorted, so the mapping is reproducible)."""

    def __init__(self, text: str):
        self.characters = sorted(set(text))
        self.index = {character: token for token, character in enumerate(self.characters)}

    def __len__(self) -> int:
        return len(self.characters)

    def encode(self, text: str) -> np.ndarray:
        return np.array([self.index[character] for character in text], dtype=np.int64)

    def decode(self, tokens) -> str:
        return "".join(self.characters[int(token)] for token in tokens)


def windows(tokens: np.ndarray, batch: int, length: int, generator: np.random.Generator):
    """``batch`` random windows of the text: inputs ``(batch, length)`` and the next characters."""
    starts = generator.integers(0, len(tokens) - length - 1, size=batch)
    rows = starts[:, None] + np.arange(length + 1)[None, :]
    chunk = tokens[rows]
    return chunk[:, :-1], chunk[:, 1:]


# ------------------------------------------------------------------------------------------- models


class LSTMLanguageModel(nn.Module):
    """Embedding -> one-layer LSTM -> Linear: next-character logits at every position."""

    def __init__(self, vocab_size: int, embedding_dim: int = 32, hidden_size: int = 128):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        self.lstm = nn.LSTM(embedding_dim, hidden_size, batch_first=True)
        self.head = nn.Linear(hidden_size, vocab_size)

    def forward(self, tokens):
        return self.advance(tokens)[0]

    def advance(self, tokens, state=None):
        """Logits ``(batch, length, vocab)`` for every position, and the LSTM's final ``(h, c)``."""
        output, state = self.lstm(self.embedding(tokens), state)
        return self.head(output), state


class TransformerLanguageModel(nn.Module):
    """Token + learned position embeddings -> pre-norm causal TransformerEncoder -> Linear."""

    def __init__(
        self,
        vocab_size: int,
        context: int = CONTEXT,
        d_model: int = 64,
        nhead: int = 4,
        num_layers: int = 2,
        dim_feedforward: int = 128,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.positions = nn.Embedding(context, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward, dropout, activation="gelu", batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers, norm=nn.LayerNorm(d_model), enable_nested_tensor=False)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, tokens):
        length = tokens.shape[1]
        x = self.embedding(tokens) + self.positions(torch.arange(length))
        # Position i attends to positions 0..i only: -inf above the diagonal.
        mask = nn.Transformer.generate_square_subsequent_mask(length, dtype=x.dtype)
        return self.head(self.encoder(x, mask=mask, is_causal=True))


# ----------------------------------------------------------------------------------------- sampling


def _draw(logits: np.ndarray, temperature: float, generator: np.random.Generator) -> int:
    scaled = logits.astype(np.float64) / temperature
    probabilities = np.exp(scaled - scaled.max())
    return int(generator.choice(len(probabilities), p=probabilities / probabilities.sum()))


def sample_lstm(
    model: LSTMLanguageModel, vocabulary: Vocabulary, prompt: str, length: int, temperature: float, seed: int
) -> str:
    """Runs the prompt through the LSTM, then feeds back one drawn character at a time with its state."""
    generator = np.random.default_rng(seed)
    model.eval()
    drawn = []
    with torch.no_grad():
        logits, state = model.advance(torch.from_numpy(vocabulary.encode(prompt)[None, :]))
        for _ in range(length):
            # onnxnn is lazy: reading the logits computes what they need, not the state beside
            # them. Computing the state now keeps each step's graph one step long (left pending,
            # every step would recompute the chain of all steps before it).
            for tensor in state:
                tensor.numpy()
            drawn.append(_draw(logits[0, -1].numpy(), temperature, generator))
            logits, state = model.advance(torch.tensor([[drawn[-1]]]), state)
    return prompt + vocabulary.decode(drawn)


def sample_transformer(
    model: TransformerLanguageModel,
    vocabulary: Vocabulary,
    prompt: str,
    length: int,
    temperature: float,
    seed: int,
    context: int = CONTEXT,
) -> str:
    """Slides a window of ``context`` characters (the prompt left-padded with newlines, as between
    rhymes) over the text generated so far; every call has the same shape, so one graph serves all."""
    generator = np.random.default_rng(seed)
    model.eval()
    tokens = list(vocabulary.encode("\n" * context + prompt))
    with torch.no_grad():
        for _ in range(length):
            window = np.array(tokens[-context:], dtype=np.int64)[None, :]
            tokens.append(_draw(model(torch.from_numpy(window))[0, -1].numpy(), temperature, generator))
    return prompt + vocabulary.decode(tokens[context + len(prompt) :])


# ------------------------------------------------------------------------------------- training, export


def stream_batches(tokens: np.ndarray, batch: int, length: int):
    """Truncated backpropagation through time: ``batch`` streams read the text (as a ring) from evenly
    spaced starts, ``length`` characters per call, so each call continues where the last one ended
    and the LSTM's final state is the next call's initial state."""
    starts = np.arange(batch) * (len(tokens) // batch)
    position = 0
    while True:
        rows = (starts[:, None] + position + np.arange(length + 1)[None, :]) % len(tokens)
        chunk = tokens[rows]
        yield chunk[:, :-1], chunk[:, 1:]
        position += length


def lstm_losses(model: LSTMLanguageModel, tokens: np.ndarray):
    """Yields the LSTM's cross entropy on consecutive chunks, carrying its state between them
    (detached, so each backward stops at the chunk's start)."""
    state = None
    for inputs, targets in stream_batches(tokens, BATCH, LSTM_CHUNK):
        logits, state = model.advance(torch.from_numpy(inputs), state)
        state = tuple(tensor.detach() for tensor in state)
        yield F.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.from_numpy(targets).reshape(-1))


def transformer_losses(model: TransformerLanguageModel, tokens: np.ndarray, generator: np.random.Generator):
    """Yields the transformer's cross entropy on random windows of ``CONTEXT`` characters."""
    while True:
        inputs, targets = windows(tokens, BATCH, CONTEXT, generator)
        logits = model(torch.from_numpy(inputs))
        yield F.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.from_numpy(targets).reshape(-1))


def train(model: nn.Module, losses, steps: int, lr: float, label: str, log_every: int = 25) -> list[float]:
    """Adam on the losses ``losses`` yields; returns the cross entropy of every step (nats per character)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    history = []
    progress = tqdm(zip(range(steps), losses), total=steps, desc=label, unit="step")  # on stderr
    for step, loss in progress:
        # Reading the loss before backward() runs the forward on its own, so the backward graph
        # starts from computed values: the recurrence's forward and backward together would be
        # deeper than onnxnn lets one pending graph grow, and it would run in many pieces.
        history.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        progress.set_postfix(loss=f"{history[-1]:.4f}")
        if step % log_every == 0 or step == steps - 1:
            progress.write(f"{label} step {step:4d}  loss {history[-1]:.4f}")  # above the bar
    progress.close()
    return history


def export_and_compare(
    model: nn.Module, example: np.ndarray, other: np.ndarray, label: str, dynamic_batch: bool = True
) -> float:
    """Exports ``model`` (eval mode), runs the file on plain onnxruntime and returns the largest
    difference from onnxnn's logits. With ``dynamic_batch`` the batch axis is dynamic and ``other``
    (a batch of another size) is what both run; without, both run ``example``'s batch size."""
    model.eval()
    batch = other if dynamic_batch else np.resize(other, example.shape)
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, f"{label}.onnx")
        torch.export.to_onnx(
            model,
            torch.from_numpy(example),
            path,
            input_names=["tokens"],
            output_names=["logits"],
            dynamic_axes={"tokens": {0: "batch"}} if dynamic_batch else None,
        )
        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    (served,) = session.run(None, {"tokens": batch})
    with torch.no_grad():
        ours = model(torch.from_numpy(batch)).numpy()
    difference = float(np.abs(served - ours).max())
    print(f"{label}: exported, onnxruntime on a batch of {len(batch)}: max |logit difference| {difference:.2e}")
    return difference


def _show(label: str, when: str, sample: str) -> None:
    print(f"--- {label} sample {when} training ---\n{sample}\n---")


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
    axes.set(xlabel="step", ylabel="cross entropy (nats per character)", yscale="log")
    axes.legend()
    figure.savefig(path, dpi=100, bbox_inches="tight")
    print(f"saved the loss curves to {path}")


def run(steps: int, seed: int = 0, sample_length: int = SAMPLE_LENGTH, temperature: float = 0.8) -> dict:
    """Trains, samples from and exports both models; returns the models, losses, samples and export
    differences."""
    torch.manual_seed(seed)
    generator = np.random.default_rng(seed)
    text = TEXT_PATH.read_text(encoding="utf-8")
    vocabulary = Vocabulary(text)
    tokens = vocabulary.encode(text)
    print(
        f"{len(text)} characters, {len(vocabulary)} distinct; uniform guessing costs "
        f"log({len(vocabulary)}) = {np.log(len(vocabulary)):.3f} nats per character"
    )
    results = {"vocabulary": vocabulary}

    lstm = results["lstm"] = LSTMLanguageModel(len(vocabulary))
    transformer = results["transformer"] = TransformerLanguageModel(len(vocabulary))
    for label, model, sampler, losses, lr, length in [
        ("lstm", lstm, sample_lstm, lstm_losses(lstm, tokens), 1e-2, LSTM_CHUNK),
        (
            "transformer",
            transformer,
            sample_transformer,
            transformer_losses(transformer, tokens, generator),
            1e-2,
            CONTEXT,
        ),
    ]:
        results[f"{label}_sample_before"] = sampler(model, vocabulary, PROMPT, sample_length, temperature, seed)
        _show(label, "before", results[f"{label}_sample_before"])
        results[f"{label}_losses"] = train(model, losses, steps, lr, label)
        results[f"{label}_sample_after"] = sampler(model, vocabulary, PROMPT, sample_length, temperature, seed)
        _show(label, "after", results[f"{label}_sample_after"])
        # Each model is exported for the sequence length it was trained on. The LSTM has a fixed
        # batch size too: onnxnn's LSTM is recorded unrolled over Python-int batch sizes, which the
        # exported graph keeps as constants.
        results[f"{label}_export_difference"] = export_and_compare(
            model,
            windows(tokens, 4, length, generator)[0],
            windows(tokens, 7, length, generator)[0],
            label,
            dynamic_batch=label == "transformer",
        )
    return results


if __name__ == "__main__":
    results = run(int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("ONNXNN_EXAMPLE_STEPS", "200")))
    save_loss_curves(
        {label: results[f"{label}_losses"] for label in ("lstm", "transformer")}, "char_language_model_loss.png"
    )

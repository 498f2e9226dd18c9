"""A LLaMA-style decoder block written with the Tensor API (issue #13).

RMSNorm, rotary position embeddings (cos/sin tables from ``arange``/``outer``, rotate_half by
``chunk``/``cat``), grouped-query causal attention (``enable_gqa`` and, equivalently, explicit
``repeat_interleave`` of the key/value heads) and a SwiGLU MLP, with residuals. The forward pass is
checked against a float64 numpy transcription of the same formulas; gradients against finite
differences; the exported graph (dynamic batch) in plain onnxruntime; and, when torch is
installed, against the same block written in torch with the same state_dict.

Tolerance (``_bound``): the block chains at most a dozen steps (two RMSNorms, five matmuls of at
most ``HIDDEN`` terms, the rotation, the attention's dot products and softmax, SiLU); each step's
rounding is ``gamma(HIDDEN)`` relative to the magnitudes involved, which are O(1) here (unit-RMS
activations, weights below 1), and each later step scales an earlier error by its Lipschitz
constant, at most ``HIDDEN`` for a matmul. The bound is ``gamma(16 * HIDDEN) * 256 * max(1, |out|)``,
the same chain bound test_transformer.py uses for the encoder layer.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check_gradients
from tolerances import assert_within, gamma

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn

from .layer_checks import EXECUTORS, forward_on

DIM, HEADS, KV_HEADS, HIDDEN, SEQ, BATCH = 16, 4, 2, 32, 6, 2
HEAD_DIM = DIM // HEADS
THETA, EPS = 10000.0, 1e-6
RNG = np.random.default_rng(13)


def rotate_half(x):
    first, second = x.chunk(2, dim=-1)
    return onnxnn.cat((-second, first), dim=-1)


def rotary_tables(seq_len, head_dim, dtype):
    """cos and sin of ``position * THETA ** (-2i / head_dim)``, each frequency repeated for both halves."""
    inv_freq = 1.0 / (THETA ** (onnxnn.arange(0, head_dim, 2, dtype=dtype) / head_dim))
    angles = onnxnn.outer(onnxnn.arange(seq_len, dtype=dtype), inv_freq)
    angles = onnxnn.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


class LlamaBlock(nn.Module):
    def __init__(self, explicit_repeat: bool = False):
        super().__init__()
        self.explicit_repeat = explicit_repeat
        self.attention_norm = nn.RMSNorm(DIM, eps=EPS)
        self.wq = nn.Linear(DIM, HEADS * HEAD_DIM, bias=False)
        self.wk = nn.Linear(DIM, KV_HEADS * HEAD_DIM, bias=False)
        self.wv = nn.Linear(DIM, KV_HEADS * HEAD_DIM, bias=False)
        self.wo = nn.Linear(HEADS * HEAD_DIM, DIM, bias=False)
        self.ffn_norm = nn.RMSNorm(DIM, eps=EPS)
        self.w1 = nn.Linear(DIM, HIDDEN, bias=False)
        self.w2 = nn.Linear(HIDDEN, DIM, bias=False)
        self.w3 = nn.Linear(DIM, HIDDEN, bias=False)

    def forward(self, x):
        batch, seq, _ = x.shape
        h = self.attention_norm(x)
        q = self.wq(h).view(batch, seq, HEADS, HEAD_DIM).transpose(1, 2)
        k = self.wk(h).view(batch, seq, KV_HEADS, HEAD_DIM).transpose(1, 2)
        v = self.wv(h).view(batch, seq, KV_HEADS, HEAD_DIM).transpose(1, 2)
        cos, sin = rotary_tables(seq, HEAD_DIM, x.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if self.explicit_repeat:
            k = k.repeat_interleave(HEADS // KV_HEADS, dim=1)
            v = v.repeat_interleave(HEADS // KV_HEADS, dim=1)
            attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            attended = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.wo(attended.transpose(1, 2).reshape(batch, seq, DIM))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


def _randomized(block):
    # RMSNorm starts at weight 1: give it values that matter.
    with onnxnn.no_grad():
        for norm in (block.attention_norm, block.ffn_norm):
            norm.weight.copy_(onnxnn.tensor(1 + 0.3 * RNG.standard_normal(DIM), dtype=norm.weight.dtype))
    return block


def llama_reference(weights, x):
    """The block in float64 numpy, from the LLaMA formulas, on the state_dict's arrays."""
    w = {name: np.asarray(value, np.float64) for name, value in weights.items()}
    batch, seq, _ = x.shape

    def rms_norm(a, weight):
        return a / np.sqrt(np.mean(a * a, axis=-1, keepdims=True) + EPS) * weight

    def heads(a, count):
        return a.reshape(batch, seq, count, HEAD_DIM).transpose(0, 2, 1, 3)

    def rope(a):
        inv_freq = THETA ** (-np.arange(0, HEAD_DIM, 2) / HEAD_DIM)
        angles = np.arange(seq)[:, None] * inv_freq[None, :]
        half = HEAD_DIM // 2
        first, second = a[..., :half], a[..., half:]
        cos, sin = np.cos(angles), np.sin(angles)
        return np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)

    h = rms_norm(x, w["attention_norm.weight"])
    q = rope(heads(h @ w["wq.weight"].T, HEADS))
    k = np.repeat(rope(heads(h @ w["wk.weight"].T, KV_HEADS)), HEADS // KV_HEADS, axis=1)
    v = np.repeat(heads(h @ w["wv.weight"].T, KV_HEADS), HEADS // KV_HEADS, axis=1)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(HEAD_DIM)
    scores = np.where(np.tril(np.ones((seq, seq), bool)), scores, -np.inf)
    probabilities = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probabilities /= probabilities.sum(axis=-1, keepdims=True)
    attended = (probabilities @ v).transpose(0, 2, 1, 3).reshape(batch, seq, DIM)
    x = x + attended @ w["wo.weight"].T
    h = rms_norm(x, w["ffn_norm.weight"])
    gate = h @ w["w1.weight"].T
    return x + (gate / (1 + np.exp(-gate)) * (h @ w["w3.weight"].T)) @ w["w2.weight"].T


def _bound(expected, dtype=np.float64):
    return gamma(16 * HIDDEN, dtype) * 256 * max(1.0, float(np.max(np.abs(expected))))


def _state(block):
    return {name: value.detach().numpy() for name, value in block.state_dict().items()}


@pytest.mark.parametrize("explicit_repeat", [False, True], ids=["enable_gqa", "repeat_interleave"])
@pytest.mark.parametrize("executor", EXECUTORS)
def test_block_matches_the_numpy_llama_formulas(executor, explicit_repeat):
    block = _randomized(LlamaBlock(explicit_repeat).double())
    x = RNG.standard_normal((BATCH, SEQ, DIM))
    expected = llama_reference(_state(block), x)
    actual = forward_on(executor, block, x, dtype=onnxnn.float64)
    assert_within(actual, expected, _bound(expected))


def test_later_positions_do_not_change_earlier_outputs():
    # Causality through the whole block: rotary tables and masking must both be per position.
    block = _randomized(LlamaBlock().double())
    x = RNG.standard_normal((BATCH, SEQ, DIM))
    changed = x.copy()
    changed[:, -1] += 1.0
    with onnxnn.no_grad():
        out, out_changed = (block(onnxnn.tensor(a)).numpy() for a in (x, changed))
    np.testing.assert_array_equal(out[:, :-1], out_changed[:, :-1])
    assert np.all(np.abs(out[:, -1] - out_changed[:, -1]).max(axis=-1) > 1e-3)


def test_gradients_wrt_input_and_weights_match_finite_differences():
    block = _randomized(LlamaBlock().double())
    wq = block.wq.weight.detach().numpy()
    w3 = block.w3.weight.detach().numpy()
    norm = block.attention_norm.weight.detach().numpy()

    def run(x, wq_weight, w3_weight, norm_weight):
        # The weights become the check's differentiated inputs, as test_conv_against_numpy.py does for a layer.
        block.wq._parameters["weight"] = wq_weight
        block.w3._parameters["weight"] = w3_weight
        block.attention_norm._parameters["weight"] = norm_weight
        return block(x)

    check_gradients(run, [RNG.standard_normal((BATCH, SEQ, DIM)), wq, w3, norm])


def test_exported_block_with_dynamic_batch_matches_onnxnn_in_onnxruntime():
    onnx = pytest.importorskip("onnx")
    import onnxruntime

    block = _randomized(LlamaBlock()).eval()
    example = onnxnn.tensor(RNG.standard_normal((BATCH, SEQ, DIM)), dtype=onnxnn.float32)
    proto = onnxnn.export.to_onnx(block, example, input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    onnx.checker.check_model(proto, full_check=True)
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    for batch in (BATCH, 3, 1):
        x = RNG.standard_normal((batch, SEQ, DIM)).astype(np.float32)
        with onnxnn.no_grad():
            expected = block(onnxnn.tensor(x)).numpy()
        (actual,) = session.run(None, {"x": x})
        assert actual.shape == (batch, SEQ, DIM)
        assert_within(actual, expected, _bound(expected, np.float32))


class TorchLlamaBlock:
    """The same block in torch, built by a function so that torch stays an optional import."""

    @staticmethod
    def build(torch):
        tnn, tF = torch.nn, torch.nn.functional

        def rotate(a):
            first, second = a.chunk(2, dim=-1)
            return torch.cat((-second, first), dim=-1)

        class Block(tnn.Module):
            def __init__(self):
                super().__init__()
                self.attention_norm = tnn.RMSNorm(DIM, eps=EPS)
                self.wq = tnn.Linear(DIM, DIM, bias=False)
                self.wk = tnn.Linear(DIM, KV_HEADS * HEAD_DIM, bias=False)
                self.wv = tnn.Linear(DIM, KV_HEADS * HEAD_DIM, bias=False)
                self.wo = tnn.Linear(DIM, DIM, bias=False)
                self.ffn_norm = tnn.RMSNorm(DIM, eps=EPS)
                self.w1 = tnn.Linear(DIM, HIDDEN, bias=False)
                self.w2 = tnn.Linear(HIDDEN, DIM, bias=False)
                self.w3 = tnn.Linear(DIM, HIDDEN, bias=False)

            def forward(self, x):
                batch, seq, _ = x.shape
                h = self.attention_norm(x)
                q = self.wq(h).view(batch, seq, HEADS, HEAD_DIM).transpose(1, 2)
                k = self.wk(h).view(batch, seq, KV_HEADS, HEAD_DIM).transpose(1, 2)
                v = self.wv(h).view(batch, seq, KV_HEADS, HEAD_DIM).transpose(1, 2)
                inv_freq = 1.0 / (THETA ** (torch.arange(0, HEAD_DIM, 2, dtype=x.dtype) / HEAD_DIM))
                angles = torch.outer(torch.arange(seq, dtype=x.dtype), inv_freq)
                angles = torch.cat((angles, angles), dim=-1)
                q = q * angles.cos() + rotate(q) * angles.sin()
                k = k * angles.cos() + rotate(k) * angles.sin()
                attended = tF.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
                x = x + self.wo(attended.transpose(1, 2).reshape(batch, seq, DIM))
                h = self.ffn_norm(x)
                return x + self.w2(tF.silu(self.w1(h)) * self.w3(h))

        return Block()


def test_block_equals_the_torch_block_with_its_state_dict():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    reference = TorchLlamaBlock.build(torch).double().eval()
    with torch.no_grad():
        for norm in (reference.attention_norm, reference.ffn_norm):
            norm.weight.copy_(torch.tensor(1 + 0.3 * RNG.standard_normal(DIM)))
    block = LlamaBlock().double().eval()
    assert list(block.state_dict()) == list(reference.state_dict())
    block.load_state_dict({key: onnxnn.tensor(value.detach().numpy()) for key, value in reference.state_dict().items()})
    x = RNG.standard_normal((BATCH, SEQ, DIM))
    with torch.no_grad():
        expected = reference(torch.tensor(x)).numpy()
    with onnxnn.no_grad():
        actual = block(onnxnn.tensor(x)).numpy()
    assert_within(actual, expected, _bound(expected))

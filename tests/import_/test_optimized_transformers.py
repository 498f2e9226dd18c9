"""Models optimized by onnxruntime's transformer optimizer import, train and re-export.

Small BERT and GPT-2 graphs are built with onnxnn's modules, exported with
``onnxnn.export.to_onnx`` and rewritten by ``onnxruntime.transformers.optimizer.optimize_model``,
which fuses them into com.microsoft ops: on BERT, Attention (with the mask as per-sequence
lengths) and SkipLayerNormalization; on GPT-2, SkipLayerNormalization and FastGelu (its
Attention fusion wants the past-state pattern of Hugging Face's export, which this graph has
not). The optimized model imported with ``from_onnx`` must:

- compute what onnxruntime computes on the optimized model;
- give the gradients of a loss that the unoptimized model gives (parameters the optimizer kept
  by name directly; Attention's fused QKV weight and bias against the concatenated gradients of
  the separate projections);
- train: SGD steps lower the loss;
- re-export (``onnxnn.export.to_onnx`` of the imported module) to a model onnxruntime runs to
  the same values.

Tolerances: every value is float32 and O(1) (LayerNorm outputs); the fused and unfused
computations round each of at most ``CHAIN`` operations along any path differently, so they
differ by at most ``2 * gamma(CHAIN)`` relative to the magnitudes summed (``accumulation_bound``).
Gradients run the chain twice (forward and backward).
"""

from __future__ import annotations

import collections
import itertools
import math

import numpy as np
import onnx
import onnxruntime
import pytest
from tolerances import accumulation_bound, assert_within

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn
from onnxnn.import_ import from_onnx

optimizer = pytest.importorskip("onnxruntime.transformers.optimizer")

HIDDEN, HEADS, VOCAB, LENGTH, BATCH = 16, 2, 30, 5, 2
CHAIN = 200  # bounds the operations along any path of the two-layer graphs (about 100 nodes)


def _heads(x):
    batch, length, _ = x.shape
    return x.reshape(batch, length, HEADS, HIDDEN // HEADS).permute(0, 2, 1, 3)


def _merge(x):
    batch, _, length, _ = x.shape
    return x.permute(0, 2, 1, 3).reshape(batch, length, HIDDEN)


def _attention(query, key, value, bias):
    scores = onnxnn.matmul(query, key.transpose(-1, -2)) / math.sqrt(HIDDEN // HEADS)
    return onnxnn.matmul(F.softmax(scores + bias, dim=-1), value)


class BertLayer(nn.Module):
    """Hugging Face's BertLayer: separate Q/K/V projections, post-LayerNorm, erf Gelu."""

    def __init__(self):
        super().__init__()
        self.query, self.key, self.value, self.dense = (nn.Linear(HIDDEN, HIDDEN) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(HIDDEN, eps=1e-12), nn.LayerNorm(HIDDEN, eps=1e-12)
        self.fc1, self.fc2 = nn.Linear(HIDDEN, 4 * HIDDEN), nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, x, mask_bias):
        attended = _attention(_heads(self.query(x)), _heads(self.key(x)), _heads(self.value(x)), mask_bias)
        x = self.ln1(x + self.dense(_merge(attended)))
        return self.ln2(x + self.fc2(F.gelu(self.fc1(x))))


class Bert(nn.Module):
    def __init__(self):
        super().__init__()
        self.word, self.position = nn.Embedding(VOCAB, HIDDEN), nn.Embedding(LENGTH, HIDDEN)
        self.segment = nn.Embedding(2, HIDDEN)
        self.ln = nn.LayerNorm(HIDDEN, eps=1e-12)
        self.layers = nn.ModuleList([BertLayer(), BertLayer()])

    def forward(self, input_ids, attention_mask, token_type_ids):
        positions = onnxnn.arange(input_ids.shape[1]).unsqueeze(0)
        x = self.ln(self.word(input_ids) + self.position(positions) + self.segment(token_type_ids))
        mask_bias = (1.0 - attention_mask.unsqueeze(1).unsqueeze(2).to(onnxnn.float32)) * -10000.0
        for layer in self.layers:
            x = layer(x, mask_bias)
        return x


def _gelu_new(x):
    """Hugging Face GPT-2's tanh Gelu, written out as its modeling code does."""
    return 0.5 * x * (1.0 + onnxnn.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * onnxnn.pow(x, 3.0))))


class GPT2Block(nn.Module):
    """Hugging Face's GPT2Block: fused QKV projection, causal mask buffer, pre-LayerNorm."""

    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(HIDDEN), nn.LayerNorm(HIDDEN)
        self.c_attn, self.attn_proj = nn.Linear(HIDDEN, 3 * HIDDEN), nn.Linear(HIDDEN, HIDDEN)
        self.c_fc, self.c_proj = nn.Linear(HIDDEN, 4 * HIDDEN), nn.Linear(4 * HIDDEN, HIDDEN)
        self.register_buffer(
            "bias", onnxnn.tril(onnxnn.ones(LENGTH, LENGTH, dtype=onnxnn.bool)).reshape(1, 1, LENGTH, LENGTH)
        )

    def forward(self, x):
        query, key, value = self.c_attn(self.ln_1(x)).split(HIDDEN, dim=2)
        length = x.shape[1]
        causal = onnxnn.where(self.bias[:, :, :length, :length], onnxnn.tensor(0.0), onnxnn.tensor(-10000.0))
        x = x + self.attn_proj(_merge(_attention(_heads(query), _heads(key), _heads(value), causal)))
        return x + self.c_proj(_gelu_new(self.c_fc(self.ln_2(x))))


class GPT2(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, HIDDEN), nn.Embedding(LENGTH, HIDDEN)
        self.h = nn.ModuleList([GPT2Block(), GPT2Block()])
        self.ln_f = nn.LayerNorm(HIDDEN)

    def forward(self, input_ids):
        x = self.wte(input_ids) + self.wpe(onnxnn.arange(input_ids.shape[1]).unsqueeze(0))
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


def _bert_inputs():
    rng = np.random.default_rng(1)
    return {
        "input_ids": rng.integers(0, VOCAB, (BATCH, LENGTH)),
        "attention_mask": np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]),
        "token_type_ids": np.array([[0, 0, 1, 1, 1], [0, 0, 0, 1, 1]]),
    }


def _gpt2_inputs():
    return {"input_ids": np.random.default_rng(1).integers(0, VOCAB, (BATCH, LENGTH))}


MODELS = {
    "bert": (Bert, _bert_inputs, {"com.microsoft:Attention": 2, "com.microsoft:SkipLayerNormalization": 5}),
    "gpt2": (GPT2, _gpt2_inputs, {"com.microsoft:FastGelu": 2, "com.microsoft:SkipLayerNormalization": 4}),
}


@pytest.fixture(scope="module", params=sorted(MODELS))
def exported(request, tmp_path_factory):
    """(name, plain model path, optimized ModelProto, inputs) for each model."""
    build, make_inputs, _ = MODELS[request.param]
    onnxnn.manual_seed(0)
    inputs = make_inputs()
    path = str(tmp_path_factory.mktemp(request.param) / "plain.onnx")
    onnxnn.export.to_onnx(
        build().eval(), tuple(onnxnn.tensor(a) for a in inputs.values()), path, input_names=list(inputs)
    )
    # optimize_model's default (opt_level=1) is onnxruntime's basic graph optimizations, then the
    # fusions. Its helper for the first part imports torch (a GPU-build check), which the test
    # environment does not have, so the same session-level optimization is run here directly.
    basic_path = path.replace("plain.onnx", "basic.onnx")
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = basic_path
    onnxruntime.InferenceSession(
        path, options, providers=["CPUExecutionProvider"], disabled_optimizers=["ConstantSharing"]
    )
    optimized_path = path.replace("plain.onnx", "optimized.onnx")
    optimizer.optimize_model(
        basic_path,
        model_type="bert" if request.param == "bert" else "gpt2",
        num_heads=HEADS,
        hidden_size=HIDDEN,
        opt_level=0,
    ).save_model_to_file(optimized_path)
    return request.param, path, onnx.load(optimized_path), inputs


def _onnxruntime_run(model: onnx.ModelProto, inputs: dict, optimize: bool = True) -> np.ndarray:
    options = onnxruntime.SessionOptions()
    if not optimize:
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, inputs)[0]


def _bound(reference, passes: int = 1):
    return accumulation_bound(4 * (1 + np.abs(reference)), passes * CHAIN)


def test_the_optimizer_fuses_our_export(exported):
    name, _, optimized, _ = exported
    counts = collections.Counter(f"{node.domain}:{node.op_type}" for node in optimized.graph.node)
    for op, count in MODELS[name][2].items():
        assert counts[op] == count, f"{name}: {dict(counts)}"


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_forward_matches_onnxruntime_on_the_optimized_model(exported, executor):
    _, _, optimized, inputs = exported
    expected = _onnxruntime_run(optimized, inputs)
    module = from_onnx(optimized)
    with onnxnn.set_executor(executor), onnxnn.no_grad():
        actual = module(*inputs.values()).numpy()
    assert_within(actual, expected, _bound(expected))


def _loss(module, inputs):
    output = module(*inputs.values())
    weights = onnxnn.tensor(np.random.default_rng(2).standard_normal(output.shape).astype(np.float32))
    return (output * weights).sum()


def _fused_qkv_gradients(plain: dict, index: int) -> tuple[np.ndarray, np.ndarray]:
    """Attention_<index>'s QKV weight [H, 3H] and bias [3H] gradients from the plain model's.

    The plain model's Linear weights are stored [out, in] and transposed in the graph, so the
    fused weight's columns are the transposed Q, K and V weights side by side.
    """
    prefix = f"layers.{index}.attention." if "layers.0.attention.query.weight" in plain else f"layers.{index}."
    parts = ("query", "key", "value")
    weight = np.concatenate([plain[f"{prefix}{part}.weight"].T for part in parts], axis=1)
    bias = np.concatenate([plain[f"{prefix}{part}.bias"] for part in parts])
    return weight, bias


def test_gradients_equal_those_of_the_unoptimized_model(exported):
    name, path, optimized, inputs = exported
    gradients = {}
    for label, source in (("plain", path), ("optimized", optimized)):
        module = from_onnx(source)
        _loss(module, inputs).backward()
        gradients[label] = {
            key: parameter.grad.numpy() for key, parameter in module.named_parameters() if parameter.grad is not None
        }
    plain, fused = gradients["plain"], gradients["optimized"]
    shared = sorted(set(plain) & set(fused))
    assert len(shared) >= 10, shared
    for key in shared:
        assert_within(fused[key], plain[key], _bound(plain[key], passes=2), key)
    if name == "bert":
        for index in range(2):
            weight, bias = _fused_qkv_gradients(plain, index)
            assert_within(fused[f"Attention_{index}_qkv_weight"], weight, _bound(weight, passes=2))
            assert_within(fused[f"Attention_{index}_qkv_bias"], bias, _bound(bias, passes=2))


def test_training_steps_lower_the_loss_and_the_result_re_exports(exported, tmp_path):
    _, _, optimized, inputs = exported
    module = from_onnx(optimized)
    sgd = onnxnn.optim.SGD(module.parameters(), lr=0.05)
    losses = []
    for _ in range(4):
        sgd.zero_grad()
        loss = _loss(module, inputs)
        loss.backward()
        sgd.step()
        losses.append(float(loss.item()))
    assert all(later < earlier for earlier, later in itertools.pairwise(losses)), losses
    module.eval()
    with onnxnn.no_grad():
        expected = module(*inputs.values()).numpy()
    exported_again = onnxnn.export.to_onnx(
        module, tuple(onnxnn.tensor(a) for a in inputs.values()), input_names=list(inputs)
    )
    # onnxruntime's own graph optimizations refuse this model: its MatMul+Add -> Gemm fusion adds
    # initializers under fixed names ("gemm_input_shape", ...) that the optimizer already wrote
    # into the file (they are the module's buffers now), and "Attempt to replace the existing
    # tensor" fails the session. Unoptimized, onnxruntime runs the graph as written.
    assert_within(_onnxruntime_run(exported_again, inputs, optimize=False), expected, _bound(expected))


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_the_float16_conversion_imports_and_runs(exported, executor):
    """optimize_model's float16 conversion (weights and fused ops in float16, float32 inputs and
    outputs): within float16 rounding along the chain of the float32 model's result."""
    onnx_model = pytest.importorskip("onnxruntime.transformers.onnx_model")
    _, _, optimized, inputs = exported
    halved = onnx.ModelProto()
    halved.CopyFrom(optimized)
    converted = onnx_model.OnnxModel(halved)
    converted.convert_float_to_float16(keep_io_types=True)
    expected = _onnxruntime_run(optimized, inputs)
    with onnxnn.set_executor(executor), onnxnn.no_grad():
        actual = from_onnx(converted.model)(*inputs.values()).numpy()
    assert_within(actual, expected, accumulation_bound(4 * (1 + np.abs(expected)), CHAIN, dtype=np.float16))

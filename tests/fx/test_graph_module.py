"""A GraphModule is a real Module: same state_dict, trains, exports to ONNX, copies, prints."""

from __future__ import annotations

import copy

import numpy as np
import onnxruntime as ort

import onnxnn
from onnxnn import fx, nn
from onnxnn.export import to_onnx

from .fx_models import Mixed


class SmallCnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(4, 3)

    def forward(self, x):
        return self.head(onnxnn.flatten(self.pool(self.features(x)), 1))


def test_state_dict_keys_and_values_equal_the_original():
    for model in (Mixed(), SmallCnn()):
        gm = fx.symbolic_trace(model)
        assert list(gm.state_dict()) == list(model.state_dict())
        for key, value in model.state_dict().items():
            assert gm.state_dict()[key] is value or np.array_equal(gm.state_dict()[key].numpy(), value.numpy())
    gm = fx.symbolic_trace(SmallCnn())
    assert [name for name, _ in gm.named_modules()][:3] == ["", "features", "features.0"]


def test_a_graph_module_exports_to_onnx_like_any_module():
    model = SmallCnn().eval()
    gm = fx.symbolic_trace(model)
    x = onnxnn.randn(2, 2, 5, 5)
    proto = to_onnx(gm, (x,))
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (exported,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    with onnxnn.no_grad():
        expected = gm(x).numpy()
    np.testing.assert_allclose(exported, expected, rtol=1e-5, atol=1e-6)
    assert {init.name for init in proto.graph.initializer} >= {"head.weight", "features.0.weight"}


def test_gradients_flow_through_a_graph_module_to_the_original_parameters():
    model = Mixed()
    gm = fx.symbolic_trace(model)
    x, y = onnxnn.randn(3, 4), onnxnn.randn(3, 6)
    gm(x, y).sum().backward()
    traced_grads = {name: p.grad.numpy().copy() for name, p in model.named_parameters()}
    model.zero_grad()
    model(x, y).sum().backward()
    for name, p in model.named_parameters():
        # the GraphModule shares the original's parameters, so their .grad was set by the traced run
        np.testing.assert_allclose(traced_grads[name], p.grad.numpy(), rtol=1e-5, atol=1e-6)
    optimizer = onnxnn.optim.SGD(gm.parameters(), lr=0.1)
    before = model.fc.weight.detach().numpy().copy()
    optimizer.step()
    assert not np.array_equal(model.fc.weight.detach().numpy(), before)


def test_each_graph_module_has_its_own_forward_and_class_name():
    first, second = fx.symbolic_trace(Mixed()), fx.symbolic_trace(SmallCnn())
    assert type(first) is not type(second) and isinstance(first, fx.GraphModule)
    assert type(first).__name__ == "Mixed" and repr(second).startswith("SmallCnn(")
    assert "onnxnn.cat" in first.code and "onnxnn.cat" not in second.code
    readable = second.print_readable(print_output=False)
    assert readable.startswith("class SmallCnn(onnxnn.nn.Module):\n    def forward(self, x):")


def test_deepcopy_gives_an_independent_module_with_the_same_outputs():
    gm = fx.symbolic_trace(SmallCnn().eval())
    copied = copy.deepcopy(gm)
    x = onnxnn.randn(1, 2, 4, 4)
    with onnxnn.no_grad():
        np.testing.assert_array_equal(copied(x).numpy(), gm(x).numpy())
    assert copied.head.weight is not gm.head.weight
    assert copied.graph is not gm.graph and str(copied.graph) == str(gm.graph)
    assert copied.graph.owning_module is copied
    copied.graph.find_nodes(op="call_module", target="pool")[0].target = "features.2"
    copied.recompile()
    assert "self.pool" not in copied.code and "self.pool" in gm.code  # the original is unaffected


def test_modules_added_and_removed_after_tracing():
    gm = fx.symbolic_trace(SmallCnn().eval())
    relu = gm.graph.find_nodes(op="call_module", target="features.2")[0]
    assert gm.add_submodule("extra.act", nn.Sigmoid())
    relu.target = "extra.act"
    gm.recompile()
    gm.delete_all_unused_submodules()
    assert not hasattr(gm.features, "2") and isinstance(gm.extra.act, nn.Sigmoid)
    x = onnxnn.randn(1, 2, 4, 4)
    with onnxnn.no_grad():
        out = gm(x)
    assert out.shape == (1, 3)
    gm.graph.lint()


def test_a_graph_module_pickles_and_runs_after_loading():
    import pickle

    gm = fx.symbolic_trace(SmallCnn().eval())
    loaded = pickle.loads(pickle.dumps(gm))
    assert type(loaded).__name__ == "SmallCnn" and loaded.code == gm.code
    assert [n.name for n in loaded.graph.nodes] == [n.name for n in gm.graph.nodes]
    loaded.graph.lint()
    x = onnxnn.randn(1, 2, 4, 4)
    with onnxnn.no_grad():
        np.testing.assert_array_equal(loaded(x).numpy(), gm(x).numpy())


class _LeafBlock(nn.Module):
    """A module traced as a leaf whose forward runs layers of its own."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(3, 3), nn.Tanh())

    def forward(self, x):
        return self.inner(x) * 2


class _WithLeaf(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = _LeafBlock()
        self.unused = nn.Linear(3, 3)

    def forward(self, x):
        return self.block(x) + 1


class _LeafTracer(fx.Tracer):
    def is_leaf_module(self, module, qualified_name: str) -> bool:
        return isinstance(module, _LeafBlock) or super().is_leaf_module(module, qualified_name)


def test_deleting_unused_submodules_keeps_what_called_modules_run():
    model = _WithLeaf().eval()
    gm = fx.GraphModule(model, _LeafTracer().trace(model))
    x = onnxnn.randn(2, 3)
    with onnxnn.no_grad():
        expected = model(x).numpy()
    gm.delete_all_unused_submodules()
    assert not hasattr(gm, "unused") and isinstance(gm.block.inner[0], nn.Linear)
    with onnxnn.no_grad():
        np.testing.assert_array_equal(gm(x).numpy(), expected)
        np.testing.assert_array_equal(model(x).numpy(), expected)  # the original shares its modules

"""Size-0 dimensions split, chunk, unbind and iterate as PyTorch's do (an empty detection batch, a
sequence with no steps): pieces are PyTorch's, never an error."""

from __future__ import annotations

import pytest

import onnxnn

# (name, program, the pieces' shapes PyTorch returns)
CASES = [
    ("unbind", lambda: onnxnn.zeros(0, 3).unbind(0), []),
    ("iteration", lambda: list(onnxnn.zeros(0, 3)), []),
    ("split by size", lambda: onnxnn.zeros(0, 2).split(3), [(0, 2)]),
    ("split an empty vector", lambda: onnxnn.zeros(0).split(1), [(0,)]),
    ("split by sizes with zeros", lambda: onnxnn.zeros(5).split([0, 5]), [(0,), (5,)]),
    ("chunk", lambda: onnxnn.zeros(0, 2).chunk(2), [(0, 2), (0, 2)]),
    ("chunk along an empty dim", lambda: onnxnn.zeros(4, 0).chunk(3, 1), [(4, 0)] * 3),
    ("tensor_split", lambda: onnxnn.zeros(0).tensor_split(3), [(0,)] * 3),
]


@pytest.mark.parametrize("name, program, shapes", CASES, ids=[case[0] for case in CASES])
def test_pieces_of_an_empty_dimension(name, program, shapes):
    assert [tuple(piece.shape) for piece in program()] == shapes


def test_pieces_of_an_empty_dimension_pass_gradients():
    x = onnxnn.zeros(0, 3, requires_grad=True)
    pieces = x.chunk(2)
    (sum(piece.sum() for piece in pieces) + x.sum()).backward()
    assert tuple(x.grad.shape) == (0, 3)


@pytest.mark.parametrize(
    "program, message",
    [
        (lambda: onnxnn.zeros(3).split(0), "split_size can only be 0 if dimension size is 0"),
        (lambda: onnxnn.zeros(3).split(-1), "split expects split_size be non-negative"),
        (lambda: onnxnn.zeros(3).chunk(0), "chunk expects `chunks` to be greater than 0"),
    ],
)
def test_impossible_pieces_are_refused(program, message):
    with pytest.raises(RuntimeError, match=message):
        program()


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("shape, normalized", [((2, 0), [0]), ((0, 3), [3])], ids=["no_features", "no_rows"])
def test_layer_norm_of_an_empty_tensor(executor, shape, normalized):
    x = onnxnn.ones(*shape, requires_grad=True)
    with onnxnn.set_executor(executor):
        result = onnxnn.nn.functional.layer_norm(x, normalized, onnxnn.ones(*normalized), onnxnn.zeros(*normalized))
        result.sum().backward()
        assert result.detach().numpy().shape == shape and x.grad.numpy().shape == shape

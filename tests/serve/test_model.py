"""How the server builds each model's onnxruntime session (onnxnn/serve/model.py)."""

from __future__ import annotations

import pytest

from onnxnn.serve.model import load_model

from .models import write_mlp


@pytest.mark.parametrize("intra_op_threads", [0, 2])
def test_a_served_models_pool_never_spins_after_its_run(tmp_path, intra_op_threads):
    # Several models serve from one process: a pool left spinning after its run takes the cores from
    # the next request's model (benchmarks/bench_sessions_in_turn.py).
    model = load_model("mlp", write_mlp(tmp_path / "mlp.onnx"), intra_op_threads=intra_op_threads)
    assert model.error is None
    options = model.session.get_session_options()
    assert options.get_session_config_entry("session.force_spinning_stop") == "1"
    assert options.intra_op_num_threads == intra_op_threads

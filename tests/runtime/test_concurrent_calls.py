"""One model used from several threads at once (a threaded server): the threads share its realized
weights, and the planner's walk keeps scratch on the values it visits, so walks take turns."""

from __future__ import annotations

import threading

import numpy as np

import onnxnn
from onnxnn.ir.plan import _WALKING


def test_a_walk_waits_while_another_thread_walks():
    weight = onnxnn.randn(8, 8)
    x = onnxnn.randn(4, 8)
    results = []
    with _WALKING:  # as if another thread were walking
        reader = threading.Thread(target=lambda: results.append((x @ weight).numpy()))
        reader.start()
        reader.join(timeout=0.5)
        assert reader.is_alive() and not results, "the realization planned while another walk was under way"
    reader.join()
    np.testing.assert_allclose(results[0], x.numpy() @ weight.numpy(), rtol=1e-5, atol=1e-5)


def test_threads_sharing_weights_get_their_own_results():
    # Two structures that read the shared weight at different input positions, so a walk reading the
    # other's scratch would wire it wrongly.
    onnxnn.manual_seed(0)
    weight = onnxnn.randn(16, 16)
    shared = weight.numpy()
    failures: list = []

    def work(kind: int) -> None:
        rng = np.random.default_rng(kind)
        for _ in range(300):
            a = rng.standard_normal((16, 16)).astype(np.float32)
            x = onnxnn.from_numpy(a)
            with onnxnn.no_grad():
                if kind == 0:
                    got, want = (x @ weight - weight).numpy(), a @ shared - shared
                else:
                    got, want = ((weight * 2.0 + x) @ weight + weight).numpy(), (shared * 2 + a) @ shared + shared
            if not np.allclose(got, want, rtol=1e-4, atol=1e-3):
                failures.append(kind)

    threads = [threading.Thread(target=work, args=(kind,)) for kind in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures

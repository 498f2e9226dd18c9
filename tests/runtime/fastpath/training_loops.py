"""A short training loop whose every step the fast-path tests record, to compare with the fast path off."""

from __future__ import annotations

from typing import Callable

import numpy as np

import onnxnn


def recorded_steps(build, shape: tuple, fast: bool, optimizer_for: Callable, read: Callable) -> tuple[list, object]:
    """Eight steps of ``build()`` on seeded inputs of ``shape``: each step's loss, then ``read(model)``.

    The caches start empty (a structure's first run is on the kernels and later ones on onnxruntime's
    sessions, whose bits may differ) and the seed is 0. ``optimizer_for(parameters)`` makes the
    optimizer, or None (a model without parameters: no backward). Returns the record and the model.
    """
    onnxnn.clear_caches()
    onnxnn.manual_seed(0)
    model = build()
    optimizer = optimizer_for(list(model.parameters()))
    rng = np.random.default_rng(1)
    record = []
    with onnxnn.set_fast_path(fast):
        for _ in range(8):
            x = onnxnn.tensor(rng.standard_normal(shape).astype(np.float32))
            loss = (model(x) ** 2).mean()
            if optimizer is not None:
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            record.append(loss.detach().numpy())
            record += read(model)
    return record, model

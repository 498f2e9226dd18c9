"""Forwards a replay could not repeat: each does one thing that running it again does differently.

Forward replays (test_forward_replay.py) and compiled calls (test_compiled_calls.py) must keep
running such a forward at every call; ``EXPECTED`` says what each returns at its ``call``-th call.
"""

from __future__ import annotations

import onnxnn
import onnxnn.nn as nn

# Read by "reads a global tensor"; the tests set it to the call's number before each call.
GLOBAL_OFFSET = onnxnn.zeros(4)


class Misbehaving(nn.Module):
    """A forward doing ``behaviour``: a user's class (a subclass may claim to be onnxnn's)."""

    def __init__(self, behaviour: str):
        super().__init__()
        self.behaviour = behaviour
        self.register_buffer("count", onnxnn.zeros(()))
        self.seen: list = []
        self.tally: dict = {"calls": 0}

    def forward(self, x):
        if self.behaviour == "reads data":
            return x * 2 if float(x.sum()) > 0 else x * 3
        if self.behaviour == "reads a global tensor":
            return x + GLOBAL_OFFSET
        if self.behaviour == "changes its argument":
            return x.mul_(2)
        if self.behaviour == "returns its argument":
            return x
        if self.behaviour == "changes its state":
            self.count.add_(1)
            return x + self.count
        if self.behaviour == "changes itself":
            self.calls = getattr(self, "calls", 0) + 1
            return x + self.calls
        if self.behaviour == "changes a list it keeps":
            self.seen.append(x.shape)
            return x + len(self.seen)
        if self.behaviour == "changes a dict it keeps":
            self.tally["calls"] += 1
            return x + self.tally["calls"]
        if self.behaviour == "draws random numbers":
            return x + onnxnn.randn(*x.shape)
        raise AssertionError(self.behaviour)


# behaviour -> its result for input x (a numpy array) at the call numbered ``call`` from 0.
EXPECTED = {
    "reads data": lambda x, call: x * 2 if x.sum() > 0 else x * 3,
    "reads a global tensor": lambda x, call: x + call,
    "changes its argument": lambda x, call: x * 2,
    "returns its argument": lambda x, call: x,
    "changes its state": lambda x, call: x + call + 1,
    "changes itself": lambda x, call: x + call + 1,
    "changes a list it keeps": lambda x, call: x + call + 1,
    "changes a dict it keeps": lambda x, call: x + call + 1,
}

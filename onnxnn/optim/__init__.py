"""Optimizers (``onnxnn.optim``) and learning-rate schedulers (``onnxnn.optim.lr_scheduler``), as in torch.optim.

Each optimizer's ``step()`` computes the update of every parameter and state tensor in one ONNX
graph and one onnxruntime session run; hyperparameters are fed to that graph as data.

Example::

    >>> optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    >>> scheduler = onnxnn.optim.lr_scheduler.StepLR(optimizer, step_size=10)
    >>> for input, target in data:
    ...     optimizer.zero_grad()
    ...     loss_fn(model(input), target).backward()
    ...     optimizer.step()
    ...     scheduler.step()
"""

from __future__ import annotations

from . import lr_scheduler, swa_utils
from .adadelta import Adadelta
from .adafactor import Adafactor
from .asgd import ASGD
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .lbfgs import LBFGS
from .muon import Muon
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .rprop import Rprop
from .sgd import SGD

__all__ = [
    "Optimizer",
    "SGD",
    "Adam",
    "AdamW",
    "RMSprop",
    "Adagrad",
    "Adamax",
    "NAdam",
    "RAdam",
    "Adadelta",
    "Rprop",
    "ASGD",
    "LBFGS",
    "Adafactor",
    "Muon",
    "lr_scheduler",
    "swa_utils",
]

"""A whole training step as one ONNX model that plain onnxruntime runs.

``training_step_to_onnx`` records one step of onnxnn training (forward, loss, backward, optimizer
update) without running it, and writes the recorded graph: its inputs are the batch, the
parameters, the buffers and the optimizer state; its outputs are the loss and the updated
parameters, buffers and state. Feeding each run's outputs back as the next run's inputs trains
the model in onnxruntime alone (no training build needed), step for step as onnxnn would.
"""

from __future__ import annotations


import numpy as np
import onnx
from onnx import helper

from ..ir.plan import IR_VERSION, plan as plan_of
from ..ir.model_building import build_model
from ..runtime.creation import as_tensor
from ..runtime.depth import unbounded_depth
from ..runtime.grad_mode import enable_grad, no_grad
from ..runtime.internal import full_tensor, realize_values, rebind, restore_state, save_state, value_of
from ..runtime.realization import recording_only
from ..runtime.tensor import Tensor
from .onnx_export import MIN_OPSET_VERSION, declared_opset, max_opset_version, write_model
from .onnxruntime_optimizer_guards import guard_against_onnxruntime_optimizers
from .opset_conversion import convert_opset

__all__ = ["training_step_to_onnx", "TrainingStepSignature"]


class TrainingStepSignature:
    """The names of a training-step model's inputs and outputs, and the values they start from.

    Attributes:
        batch: input names of the batch tensors, in ``example_batch`` order.
        state: ``{input name: output name}`` for every carried value (parameters, buffers,
            optimizer state); feed each output back under its input name on the next step.
        loss: the output name of the loss.
        initial_state: ``{input name: numpy array}``, the values to feed on the first step.
    """

    def __init__(self, batch: list[str], state: dict[str, str], loss: str, initial_state: dict):
        self.batch = batch
        self.state = state
        self.loss = loss
        self.initial_state = initial_state

    def __repr__(self) -> str:
        return f"TrainingStepSignature(batch={self.batch}, loss={self.loss!r}, state={list(self.state)})"


class _Snapshot:
    """Values, versions and gradients of every tensor a step rebinds, to put back after recording."""

    def __init__(self, tensors: list[Tensor]):
        self.entries = [(tensor, save_state(tensor), tensor.grad) for tensor in tensors]

    def restore(self) -> None:
        for tensor, state, grad in self.entries:
            # The recorded step was never run nor read: as if it never happened, versions included.
            restore_state(tensor, state, rewind_version=True)
            tensor.grad = grad


def _state_tensors(optimizer) -> list[tuple[Tensor, str, Tensor]]:
    found = []
    for group in optimizer.param_groups:
        for param in group["params"]:
            for key, value in optimizer.state.get(param, {}).items():
                if isinstance(value, Tensor):
                    found.append((param, key, value))
    return found


def _initialize_state(model, optimizer, parameters: list[Tensor]) -> None:
    """Creates the optimizer's state entries as they are before any step, if missing.

    Each optimizer's ``_init_group`` creates its entries with their first values (zeros, and also
    Rprop's step sizes at ``lr``, ASGD's ``eta`` and ``mu``, NAdam's ``mu_product``, Adagrad's
    ``initial_accumulator_value``) for the parameters that have a gradient, so every parameter is
    given a zero one meanwhile. A dry step then creates the entries a step makes (SGD's momentum
    buffer, and under ``capturable`` a dampened buffer's update count); its effect on the parameters
    and the existing entries is undone, and those entries start at zeros (a zero buffer whose count
    is 0 takes the whole gradient at its first update, as PyTorch's copy of it). The export drops
    the entries it created when it is done (``_forget_new_state``).
    """
    existing_tensors = _state_tensors(optimizer)  # (Adagrad makes its state when it is built)
    existing = {(id(param), key) for param, key, _ in existing_tensors}
    snapshot = _Snapshot(parameters + [value for _, _, value in existing_tensors])
    with no_grad():
        for param in parameters:
            param.grad = full_tensor(param.shape, 0, param.dtype, param.device)
        first_values = {}
        if hasattr(optimizer, "_init_group"):
            for group in optimizer.param_groups:
                optimizer._init_group(group)
            first_values = {(id(param), key): value_of(value) for param, key, value in _state_tensors(optimizer)}
        optimizer.step()
    snapshot.restore()
    for param, key, value in _state_tensors(optimizer):
        if (id(param), key) not in existing:
            first = first_values.get((id(param), key))
            rebind(
                value, first if first is not None else value_of(full_tensor(value.shape, 0, value.dtype, value.device))
            )
    realize_values([value for _, _, value in _state_tensors(optimizer)])


def _forget_new_state(optimizer, state_keys: dict) -> None:
    """Drops the optimizer's state entries that the export created (``state_keys``: each parameter's
    entries before it). Left behind, they would change the optimizer's next step: a zero momentum
    buffer, where PyTorch's first step copies the gradient, dampens it."""
    for param in list(optimizer.state):
        kept = state_keys.get(param)
        if kept is None:
            del optimizer.state[param]
            continue
        entries = optimizer.state[param]
        for key in [key for key in entries if key not in kept]:
            del entries[key]


def _use_capturable_steps(optimizer) -> list:
    """Every group counts its steps in the graph while recording (``capturable``, given for the
    recording to optimizers without the option too): returns ``(group, its former setting)``,
    the setting absent as ``_ABSENT``."""
    changed = []
    for group in optimizer.param_groups:
        if not group.get("capturable", False):
            changed.append((group, group.get("capturable", _ABSENT)))
            group["capturable"] = True
    return changed


def _restore_capturable(changed: list) -> None:
    for group, former in changed:
        if former is _ABSENT:
            del group["capturable"]
        else:
            group["capturable"] = former


_ABSENT = object()


def training_step_to_onnx(
    model, loss_fn, optimizer, example_batch, f=None, *, batch_names=None, opset_version: int | None = None
) -> tuple[onnx.ModelProto, TrainingStepSignature]:
    """Exports one training step (forward, loss, backward, optimizer update) as an ONNX model.

    Args:
        model: the module to train (put in training mode for the step, then restored).
        loss_fn: ``loss_fn(model_output, *targets) -> scalar tensor``.
        optimizer: an ``onnxnn.optim`` optimizer over (some of) the model's parameters.
        example_batch: ``(input, *targets)`` tensors or numpy arrays; the first is passed to the model.
        f: optional path or binary file to write the model to.
        batch_names: names of the batch inputs (default ``input``, ``target``, ``target_1``, ...).
        opset_version: default-domain opset (17 up to what the installed onnxruntime runs); by
            default the opset the recorded ops need (21, or an imported model's newer one).

    Returns:
        ``(model_proto, signature)``; ``signature`` names the carried inputs/outputs and holds
        the initial values to feed (see :class:`TrainingStepSignature`). The model and optimizer
        are left as they were.

    Example::

        >>> proto, sig = training_step_to_onnx(net, F.mse_loss, opt, (x, y))
        >>> session = onnxruntime.InferenceSession(proto.SerializeToString())
        >>> feeds = dict(sig.initial_state)
        >>> for step in range(10):
        ...     outputs = dict(zip([o.name for o in session.get_outputs()],
        ...                        session.run(None, {**feeds, "input": x_np, "target": y_np})))
        ...     feeds = {name: outputs[next_name] for name, next_name in sig.state.items()}
    """
    opset = None if opset_version is None else int(opset_version)
    if opset is not None and not MIN_OPSET_VERSION <= opset <= max_opset_version():
        raise ValueError(
            f"training_step_to_onnx: opset_version {opset} is not supported; choose one from "
            f"{MIN_OPSET_VERSION} to {max_opset_version()}"
        )
    batch = [arg if isinstance(arg, Tensor) else as_tensor(np.asarray(arg)) for arg in example_batch]
    if not batch:
        raise ValueError("training_step_to_onnx: example_batch must hold at least the model input")
    if batch_names:
        names = list(batch_names)
    else:
        names = ["input", "target"] + [f"target_{i}" for i in range(1, len(batch) - 1)]
    names = names[: len(batch)]
    # Dropout is recorded as ONNX Dropout nodes here (the trace runs under unbounded_depth): each run of
    # the exported step draws its own masks, as each eager step does.
    named_parameters = dict(model.named_parameters())
    name_of_parameter = {id(p): name for name, p in named_parameters.items()}
    trained = [p for group in optimizer.param_groups for p in group["params"]]
    for param in trained:
        if id(param) not in name_of_parameter:
            raise ValueError(
                "training_step_to_onnx: the optimizer updates a tensor that is not a parameter of the model"
            )
    buffers = dict(model.named_buffers())
    previous_mode = model.training
    capturable_groups = _use_capturable_steps(optimizer)
    state_keys = {param: set(entries) for param, entries in optimizer.state.items()}
    realize_values(list(named_parameters.values()) + list(buffers.values()) + batch)
    try:
        _initialize_state(model, optimizer, trained)
        state_entries = _state_tensors(optimizer)
        carried: list[tuple[str, Tensor]] = [(name, p) for name, p in named_parameters.items()]
        carried += [(name, b) for name, b in buffers.items()]
        carried += [(f"optimizer.{name_of_parameter[id(param)]}.{key}", value) for param, key, value in state_entries]
        start_values = {name: value_of(tensor) for name, tensor in carried}
        snapshot = _Snapshot([tensor for _, tensor in carried])
        model.train(True)
        try:
            # unbounded_depth: a forward deeper than MAX_PENDING_DEPTH would otherwise realize part of
            # itself on the way, and the file would hold it as a constant of the example batch.
            with enable_grad(), unbounded_depth():
                output = model(batch[0])
                loss = loss_fn(output, *batch[1:])
                if not isinstance(loss, Tensor) or loss.numel() != 1:
                    raise ValueError("training_step_to_onnx: loss_fn must return a one-element tensor")
                optimizer.zero_grad(set_to_none=True)
                with recording_only():
                    loss.backward()
                    optimizer.step()
            end_values = {name: value_of(tensor) for name, tensor in carried}
        finally:
            snapshot.restore()
            model.train(previous_mode)
    finally:
        _restore_capturable(capturable_groups)
        _forget_new_state(optimizer, state_keys)
    _reject_host_updates(optimizer, carried, start_values, end_values)

    outputs = [value_of(loss)] + [end_values[name] for name, _ in carried]
    output_names = ["loss"] + [f"{name}.next" for name, _ in carried]
    plan = plan_of(outputs, include_shared=False)
    input_ids = {id(value): name for name, value in zip(names, [value_of(t) for t in batch])}
    input_ids.update({id(start_values[name]): name for name, _ in carried})
    roles, constants = [], 0
    for value in plan.inputs:
        if id(value) in input_ids:
            roles.append(("input", input_ids[id(value)]))
        else:
            roles.append(("initializer", f"onnxnn::constant_{constants}"))
            constants += 1
    proto = build_model(plan, roles, output_names, graph_name=f"{type(model).__name__}_training_step")
    _declare_every_input(proto, names, batch, carried, start_values)
    recorded = declared_opset(proto)
    if opset is None:
        opset = recorded  # what the recorded ops need: onnxnn's opset, or an imported model's newer one
    if opset != recorded:
        proto = convert_opset(proto, opset)
        proto.ir_version = IR_VERSION
    guard_against_onnxruntime_optimizers(proto)
    onnx.checker.check_model(proto, full_check=True)
    if f is not None:
        write_model(proto, f)
    signature = TrainingStepSignature(
        names,
        {name: f"{name}.next" for name, _ in carried},
        "loss",
        {name: np.array(start_values[name].data) for name, _ in carried},
    )
    return proto, signature


def _reject_host_updates(optimizer, carried: list, start_values: dict, end_values: dict) -> None:
    """Refuses a step that set optimizer state to a number computed on the host while it was recorded.

    The file would hold that one step's number as a constant, and every run would repeat it (a
    step count that never advances, a bias correction frozen at its value at export). Optimizers
    count in the graph under ``capturable``, which the export sets; float16/bfloat16 parameters of
    the optimizers whose op-by-op steps read host numbers (Adafactor, Adamax, NAdam, RAdam, ASGD)
    still do not.
    """
    for name, _ in carried:
        if not name.startswith("optimizer."):
            continue  # a buffer a forward sets to a constant is that constant at every run
        end = end_values[name]
        if end is not start_values[name] and end.node is None and end.data is not None:
            raise NotImplementedError(
                f"training_step_to_onnx: {type(optimizer).__name__}'s step sets {name!r} to a number computed "
                "on the host, which the exported file would repeat at every run: it cannot count this "
                "tensor's steps in the graph (Adafactor, Adamax, NAdam, RAdam and ASGD cannot for "
                "float16/bfloat16 parameters)"
            )


def _declare_every_input(proto: onnx.ModelProto, names, batch, carried, start_values) -> None:
    """Graph inputs in a stable order (batch, then carried state), unused ones declared too."""
    existing = {graph_input.name: graph_input for graph_input in proto.graph.input}
    ordered = []
    for name, tensor in zip(names, batch):
        ordered.append(existing.get(name) or helper.make_tensor_value_info(name, tensor.dtype.onnx_type, tensor.shape))
    for name, tensor in carried:
        value = start_values[name]
        ordered.append(existing.get(name) or helper.make_tensor_value_info(name, value.dtype.onnx_type, value.shape))
    del proto.graph.input[:]
    proto.graph.input.extend(ordered)

"""A traced forward written out as straight-line Python: the ``replay(tensors, state)`` of a template.

``forward_replay`` traces a forward and keeps what its replay needs (the constants, where to
gather each value read, the recorded steps, the structure to return, the backward functions, the
state writes and the draws); ``replay_source`` writes that down as one function, compiled once per
template at its first replay. Interpreting the same tables at each call costs about twice as much.
"""

from __future__ import annotations

from ...ir.graph import constant
from ..realization import data_of, host_data
from .known_plans import KnownPlan
from .recorded_steps import write_steps
from .replayed_functions import backward_lines
from .result_structures import rebuilt_source
from .state_writes import write_lines

__all__ = ["STALE", "ARGUMENT", "STATE", "OUTPUT", "Fresh", "Drawn", "replay_source"]

STALE = object()  # what a replay returns when the state's shapes or sharing changed since the trace
# Where a replay finds a value it reads, or a returned tensor's anchor (``forward_replay.output_links``):
# an argument, a state tensor, or another returned tensor.
ARGUMENT, STATE, OUTPUT = range(3)


class Fresh:
    """A template's constant that the forward made: each replay makes a new value of its data."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class Drawn:
    """A template's constant that the forward drew (``internal.drawn_constant_tensor``: a dropout mask):
    each replay draws it anew (``replay_source``'s ``draws``)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def replay_source(
    constants: list,
    gathers: list,
    steps: list,
    output_slots: list,
    structure,
    links: list | None,
    backward: tuple | None,
    effects: list,
    drawn_and_checked: list,
    namespace: dict,
) -> str:
    """The source of ``replay(tensors, state)``, its constants put in ``namespace``.

    ``backward``: what ``replayed_functions.backward_steps`` found, where the forward recorded gradients.
    ``effects``: the state writes and ``realize_alongside`` requests after the nodes (``state_writes``).
    ``drawn_and_checked``: in the forward's order, ``("draw", value, draw)`` for every constant it drew
    and ``("check", slot, check, force)`` for every check of a gathered value's data: a replay makes
    them before it records anything, a check on an array already computed only unless ``force``
    (``internal.check_known_data``), as the forward did.

    It returns ``STALE``, having recorded nothing, when a state tensor's shape, dtype or device
    is not what was traced (a parameter given other ``.data``), or when positions that held one
    value when traced hold different ones now: the caller traces again.
    """
    lines = ["def replay(tensors, state):"]
    made = []
    for slot, value in enumerate(constants):
        if type(value) is Drawn:
            continue
        if type(value) is Fresh:  # a value the forward makes: a new one at every call
            value = value.value
            names = [f"made_{slot}_{part}" for part in ("shape", "dtype", "device", "data")]
            namespace.update(zip(names, (value.shape, value.dtype, value.device, value.data)))
            made.append(f"    value_{slot} = Value(None, 0, {', '.join(names)})")
        else:
            namespace[f"value_{slot}"] = value
    slot = len(constants)
    for kind, index, meta, shared in gathers:
        if kind == ARGUMENT:
            lines.append(f"    value_{slot} = tensors[{index}]._value")
        else:
            namespace.update(zip((f"state_shape_{slot}", f"state_dtype_{slot}", f"state_device_{slot}"), meta))
            lines.append(f"    value_{slot} = state[{index}]._value")
            lines.append(
                f"    if value_{slot}.shape != state_shape_{slot} or value_{slot}.dtype is not state_dtype_{slot} "
                f"or value_{slot}.device is not state_device_{slot}: return STALE"
            )
        if shared:  # positions of the state that held this value when traced (``forward_replay._Template.build``)
            held = " or ".join(f"state[{other}]._value is not value_{slot}" for other in shared)
            lines.append(f"    if {held}: return STALE")
        slot += 1
    lines += _drawn_and_checked_lines(drawn_and_checked, constants, namespace)
    lines += made
    after_node = None
    returned_functions = [None] * len(output_slots)
    if backward is not None:
        functions, saved, returned_functions = backward
        after_node = backward_lines(functions, saved, namespace)
    write_steps(steps, slot, namespace, lines, after_node=after_node)
    lines += write_lines(effects, namespace)
    if type(structure) is int and links is None:  # one new tensor returned: its plan can be known (known_plans)
        read = [
            f"value_{index}, "
            for index, value in enumerate(constants)
            if index and (type(value) in (Fresh, Drawn) or value.static is None)
        ]
        read += [f"value_{index}, " for index in range(len(constants), len(constants) + len(gathers))]
        namespace["known_plan"] = KnownPlan(len(steps))
        lines.append(f"    value_{output_slots[structure]}.node.known_plan = (known_plan, ({''.join(read)}))")

    def wrapped_at(position: int) -> str:
        function = returned_functions[position]
        if function is None:
            return f"wrap(value_{output_slots[position]})"
        return f"wrap(value_{output_slots[position]}, function_{function[0]}, {function[1]})"

    if links is None:
        lines.append(f"    return {rebuilt_source(structure, wrapped_at, namespace)}")
    else:  # returned tensors that alias each other or the inputs: made again as the trace made them
        namespace["output_links"] = links  # the caller puts ``relinked`` (forward_replay) in the namespace
        wrapped = "".join(f"{wrapped_at(position)}, " for position in range(len(output_slots)))
        lines.append(f"    made = relinked([{wrapped}], output_links, tensors, state)")
        lines.append(f"    return {rebuilt_source(structure, lambda position: f'made[{position}]', namespace)}")
    return "\n".join(lines) + "\n"


def _drawn_and_checked_lines(drawn_and_checked: list, constants: list, namespace: dict) -> list:
    """The lines making a replay's draws (into the slots of the constants they made) and checks."""
    slot_of_drawn = {id(value.value): slot for slot, value in enumerate(constants) if type(value) is Drawn}
    namespace.update(constant=constant, host_data=host_data, data_of=data_of)
    lines = []
    for index, (kind, subject, function, *force) in enumerate(drawn_and_checked):
        namespace[f"{kind}_{index}"] = function
        if kind == "check":
            lines.append(f"    data = host_data(value_{subject})")
            if force[0]:  # pending (or on a device): computed now, as the forward computed it
                lines.append(f"    if data is None: data = data_of(value_{subject})")
            lines.append(f"    if data is not None: check_{index}(data)")
            continue
        namespace.update({f"drawn_dtype_{index}": subject.dtype, f"drawn_device_{index}": subject.device})
        slot = slot_of_drawn.get(id(subject))  # None: a draw nothing reads
        target = "" if slot is None else f"value_{slot} = "
        lines.append(f"    {target}constant(draw_{index}(), drawn_dtype_{index}, drawn_device_{index})")
    return lines

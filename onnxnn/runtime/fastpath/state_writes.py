"""What a forward replay does besides recording nodes: the writes of a forward that rebinds its state.

A BatchNorm layer in training rebinds its running statistics and its batch count in place
(``running.copy_(...)``, ``num_batches_tracked.add_(1)``) and asks for the new statistics to be
computed with the next run (``ir.plan.realize_alongside``). A trace notes both (``RecordingTrace.effects``);
a replay (``forward_replay``) makes them again after its nodes, each write as ``_assign`` makes it
(``Tensor._rebind``: the value, its holder, the version, the tensors sharing or viewing it following).
Nodes the forward recorded after a write read the written value by its slot, so only the writes'
place in time moves, which a backward function could see (its saved version of a written tensor):
such a forward is not replayed.
"""

from __future__ import annotations

from ...ir.plan import realize_alongside
from ..views import VIEW_LINKS

__all__ = ["state_effects", "reads_written_state", "write_lines"]


def state_effects(effects: list, produced: dict, state_tensors: list, state_before: list, strict: bool):
    """What a replay does besides recording nodes, from a traced forward's ``effects``: in order,
    ``("write", index, value)`` (rebind the state tensor at ``index`` to that produced value) and
    ``("alongside", value)`` (``realize_alongside``). None where a replay could not do the same: a
    write to anything but the state (an argument, a global), one that moved history onto the tensor,
    a write to a view (which writes through to its base: a state tensor that is no view now never
    becomes one while its module tree lives, as registering another changes the module), a state
    tensor changed some other way (``.data =``, ``unsqueeze_``), or a strict owner's forward
    changing or drawing anything (``compiled_calls``; its prepared runs make its checks of data
    again, ``_Template.checks``). A write to the forward's own
    intermediate (``ReLU(inplace=True)`` on a convolution's output) needs nothing: the replay's
    nodes read the written value by its slot."""
    if not effects:
        unchanged = all(tensor._value is value for tensor, value in zip(state_tensors, state_before))
        return [] if unchanged else None
    position: dict = {}
    for index, tensor in enumerate(state_tensors):
        position.setdefault(id(tensor), index)
    done: list = []
    final: dict = {}  # id(tensor) -> the value its last write left
    for effect in effects:
        if effect[0] == "write" and _of_an_intermediate(effect, produced, position):
            continue
        if strict and effect[0] != "check":
            return None
        if effect[0] in ("draw", "check"):
            continue  # made again by the replay itself (``replay_source``)
        if effect[0] == "alongside":
            if effect[1] not in produced:
                return None
            done.append(effect)
            continue
        _, tensor, value, plain, _ = effect
        written = position.get(id(tensor))
        if written is None or not plain or value not in produced or (VIEW_LINKS and id(tensor) in VIEW_LINKS):
            return None
        final[id(tensor)] = value
        done.append(("write", written, value))
    for tensor, value in zip(state_tensors, state_before):
        if tensor._value is not final.get(id(tensor), value):
            return None
    return done


def _of_an_intermediate(write: tuple, produced: dict, position: dict) -> bool:
    """Whether a write rebinds a tensor that held a value the forward made, and is no state and no
    view (a view's write goes through to its base, which may be state)."""
    _, tensor, _, _, before = write
    return before in produced and id(tensor) not in position and not (VIEW_LINKS and id(tensor) in VIEW_LINKS)


def reads_written_state(functions: dict, effects: list) -> bool:
    """Whether a replayed backward function has an edge to, or saves the version of, a state tensor
    the forward rebinds: the replay rebinds it after every node, where the forward may have before."""
    written = {("state", effect[1]) for effect in effects if effect[0] == "write"}
    return any(item in written for edges, versions, _ in functions.values() for item in (*edges, *versions))


def write_lines(effects: list, namespace: dict) -> list:
    """The replay's lines making ``effects`` (``state_effects``, their values as slots) after its nodes."""
    lines = []
    for effect in effects:
        if effect[0] == "write":
            lines.append(f"    state[{effect[1]}]._rebind(value_{effect[2]})")
        else:
            namespace["realize_alongside"] = realize_alongside
            lines.append(f"    realize_alongside(value_{effect[1]})")
    return lines

"""A small pickle interpreter that builds only plain data, for checkpoints from untrusted sources.

``pickle.Unpickler`` with a restrictive ``find_class`` still trusts the rest of the stream: its memo is
an array sized by the largest index the file names (``LONG_BINPUT 0x10000000`` allocates gigabytes),
its ``BUILD`` sets attributes on whatever object is on the stack, and the objects it returns may share
one list a billion times over (a "billion laughs"), which every later walk that does not respect
sharing expands. This interpreter reads the opcodes ``torch.save`` and Python's picklers emit
(protocols 0 to 5, except those that name classes by extension codes, out-of-band buffers or text
persistent ids) and builds nothing but

- ``None``, bools, ints, floats, str, bytes, lists, tuples, dicts, sets and frozensets;
- ``collections.OrderedDict`` (``BUILD`` may only give it attributes, as PyTorch's state_dicts carry
  ``_metadata``) and ``collections.Counter`` (MultiStepLR's milestones);
- whatever the ``find_global`` callback returns for a ``GLOBAL``, and the results of ``REDUCE`` calls
  on those, which the callback's objects decide (they are called as ``global(*args)``).

Every opcode does a bounded amount of work outside the callbacks: the memo is a dict, arguments are
bounds-checked before they are sliced, and a value used as a dict key or set member (where Python
hashes it, recursively and without caching for tuples) must be a scalar, or a tuple whose expansion,
counting each shared tuple every time it occurs, stays under ``MAX_KEY_ELEMENTS``. So loading takes
time and memory linear in the size of the pickle, whatever sharing it sets up; walks over the result
must respect sharing too (memoize by ``id``), as :func:`onnxnn.export.checkpoint.load` does.
"""

from __future__ import annotations

import struct
from collections import Counter, OrderedDict
from typing import Any, Callable

from ..errors import CheckpointError

__all__ = ["RestrictedUnpickler", "Constructor", "SET", "FROZENSET", "ORDERED_DICT", "COUNTER", "describe"]

# A key's expansion: tuple keys in real checkpoints are shapes, betas and module paths.
MAX_KEY_ELEMENTS = 100_000
# Elements hashed over a whole load, per byte of pickle: every key of a real checkpoint is a scalar
# or a short tuple, so this only stops a pickle reusing one large tuple key over and over.
HASHED_ELEMENTS_PER_BYTE = 16
# Deeper nesting than any checkpoint needs; walks over the result stay far from Python's recursion limit.
MAX_DEPTH = 200
_MAX_LONG_BYTES = 4096  # ints beyond 2**32768 are not weights; int() would refuse their text form anyway

_UNPACK_D = struct.Struct(">d").unpack_from
_UNPACK_I = struct.Struct("<i").unpack_from
_UNPACK_HI = struct.Struct("<H").unpack_from
_UNPACK_UI = struct.Struct("<I").unpack_from
_UNPACK_Q = struct.Struct("<Q").unpack_from


class Constructor:
    """A global the interpreter builds itself (sets, OrderedDicts), so it can check what gets hashed."""

    __slots__ = ("qualified_name",)

    def __init__(self, qualified_name: str):
        self.qualified_name = qualified_name

    def __repr__(self) -> str:
        return self.qualified_name


SET = Constructor("builtins.set")
FROZENSET = Constructor("builtins.frozenset")
ORDERED_DICT = Constructor("collections.OrderedDict")
COUNTER = Constructor("collections.Counter")


class _Mark:
    __slots__ = ()


_MARK = _Mark()
_UNHASHABLE = -1


def describe(value, limit: int = 80) -> str:
    """A short description of a value from a file, for error messages.

    ``repr`` of a value built by a hostile pickle can be exponentially long (shared lists), so only
    scalars are shown, and only their first ``limit`` characters.
    """
    if value is None or type(value) in (bool, int, float):
        text = repr(value) if type(value) is not int or abs(value) < 10**30 else f"an int of {value.bit_length()} bits"
    elif type(value) in (str, bytes):
        text = repr(value[:limit])
    else:
        return f"a value of type {type(value).__name__}"
    return text if len(text) <= limit else text[:limit] + "..."


class RestrictedUnpickler:
    """Reads one pickle from ``data``.

    Args:
        data: the pickle bytes.
        find_global: ``(module, name) -> object`` for ``GLOBAL``; raises to refuse the name.
        persistent_load: ``persistent_id -> object`` for ``BINPERSID``.
        source: how error messages name the file.
    """

    def __init__(
        self, data: bytes, find_global: Callable[[str, str], Any], persistent_load: Callable[[Any], Any], source: str
    ):
        self._data = memoryview(data).cast("B") if not isinstance(data, bytes) else data
        self._find_global = find_global
        self._persistent_load = persistent_load
        self._source = source
        # id(tuple) -> (tuple, its expansion or _UNHASHABLE); the tuple is kept so its id stays unique.
        self._tuple_sizes: dict[int, tuple] = {}
        self._hash_budget = HASHED_ELEMENTS_PER_BYTE * len(self._data) + MAX_KEY_ELEMENTS

    # ------------------------------------------------------------------------------------- errors
    def _error(self, position: int, message: str) -> CheckpointError:
        return CheckpointError(f"cannot load {self._source}: malformed pickle at byte {position}: {message}")

    # -------------------------------------------------------------------------------- hashing guard
    def _key_size(self, value) -> int:
        kind = type(value)
        if kind is tuple:
            known = self._tuple_sizes.get(id(value))
            if known is not None:
                return known[1]
            return self._register_tuple(value)
        if kind in (list, dict, OrderedDict, Counter, set, bytearray):
            return _UNHASHABLE
        return 1  # scalars hash in time linear in their size; other objects hash by identity

    def _register_tuple(self, value: tuple) -> int:
        size = 1
        for item in value:
            item_size = self._key_size(item)
            if item_size == _UNHASHABLE:
                size = _UNHASHABLE
                break
            size += item_size
            if size > MAX_KEY_ELEMENTS:
                size = MAX_KEY_ELEMENTS + 1  # saturate: only "too large" matters from here on
        self._tuple_sizes[id(value)] = (value, size)
        return size

    def _check_key(self, key, position: int):
        size = self._key_size(key)
        if size == _UNHASHABLE:
            raise self._error(position, f"a dict key or set member is {describe(key)}, which is unhashable")
        if size > MAX_KEY_ELEMENTS:
            raise self._error(
                position,
                f"a dict key or set member expands to more than {MAX_KEY_ELEMENTS} "
                "elements (a tuple sharing itself over and over)",
            )
        self._hash_budget -= size
        if self._hash_budget < 0:
            raise self._error(
                position,
                "its dict keys and set members expand to more elements than "
                f"{HASHED_ELEMENTS_PER_BYTE} per byte of pickle "
                "(large keys used over and over)",
            )
        return key

    # ------------------------------------------------------------------------------------- reading
    def load(self) -> Any:
        """Runs the pickle and returns its value.

        Raises:
            CheckpointError: the pickle is truncated, malformed, uses an opcode outside the supported
                set, or ``find_global``/``persistent_load``/a global's call refused something.
        """
        data = self._data
        end = len(data)
        stack: list = []
        marks: list[int] = []
        memo: dict[int, Any] = {}
        position = 0
        check_key = self._check_key
        while True:
            if position >= end:
                raise self._error(position, "the pickle ends without a STOP opcode (truncated)")
            start = position
            opcode = data[position]
            position += 1
            # The most frequent opcodes in torch.save's pickles come first.
            if opcode == 0x72:  # LONG_BINPUT
                if position + 4 > end or not stack:
                    raise self._error(start, "LONG_BINPUT without an index or a value")
                memo[_UNPACK_UI(data, position)[0]] = stack[-1]
                position += 4
            elif opcode == 0x6A:  # LONG_BINGET
                if position + 4 > end:
                    raise self._error(start, "truncated LONG_BINGET")
                index = _UNPACK_UI(data, position)[0]
                if index not in memo:
                    raise self._error(start, f"LONG_BINGET of memo entry {index}, which was never set")
                stack.append(memo[index])
                position += 4
            elif opcode == 0x71:  # BINPUT
                if position + 1 > end or not stack:
                    raise self._error(start, "BINPUT without an index or a value")
                memo[data[position]] = stack[-1]
                position += 1
            elif opcode == 0x68:  # BINGET
                if position + 1 > end:
                    raise self._error(start, "BINGET without an index")
                try:
                    stack.append(memo[data[position]])
                except KeyError:
                    raise self._error(start, f"BINGET of memo entry {data[position]}, which was never set") from None
                position += 1
            elif opcode == 0x58:  # BINUNICODE
                position, value = self._counted(start, position, 4, end)
                stack.append(self._text(value, start))
            elif opcode == 0x4B:  # BININT1
                if position + 1 > end:
                    raise self._error(start, "truncated BININT1")
                stack.append(data[position])
                position += 1
            elif opcode == 0x4D:  # BININT2
                if position + 2 > end:
                    raise self._error(start, "truncated BININT2")
                stack.append(_UNPACK_HI(data, position)[0])
                position += 2
            elif opcode == 0x4A:  # BININT
                if position + 4 > end:
                    raise self._error(start, "truncated BININT")
                stack.append(_UNPACK_I(data, position)[0])
                position += 4
            elif opcode == 0x28:  # MARK
                marks.append(len(stack))
            elif opcode == 0x74:  # TUPLE
                items = self._pop_mark(stack, marks, start)
                stack.append(tuple(items))
            elif opcode in (0x85, 0x86, 0x87):  # TUPLE1, TUPLE2, TUPLE3
                count = opcode - 0x84
                if len(stack) - (marks[-1] if marks else 0) < count:
                    raise self._error(start, "TUPLE with too few values on the stack")
                items = tuple(stack[-count:])  # type: ignore[assignment]  # items: popped values, list or tuple
                del stack[-count:]
                stack.append(items)
            elif opcode == 0x29:  # EMPTY_TUPLE
                stack.append(())
            elif opcode == 0x52:  # REDUCE
                if len(stack) - (marks[-1] if marks else 0) < 2:
                    raise self._error(start, "REDUCE with too few values on the stack")
                arguments = stack.pop()
                stack[-1] = self._call(stack[-1], arguments, start)
            elif opcode == 0x63:  # GLOBAL
                module, position = self._line(position, end, start)
                name, position = self._line(position, end, start)
                stack.append(self._global(module.decode("utf-8", "strict"), name.decode("utf-8", "strict"), start))
            elif opcode == 0x51:  # BINPERSID
                if len(stack) - (marks[-1] if marks else 0) < 1:
                    raise self._error(start, "BINPERSID without a persistent id")
                stack[-1] = self._persistent_load(stack[-1])
            elif opcode in (0x88, 0x89):  # NEWTRUE, NEWFALSE
                stack.append(opcode == 0x88)
            elif opcode == 0x4E:  # NONE
                stack.append(None)
            elif opcode == 0x7D:  # EMPTY_DICT
                stack.append({})
            elif opcode == 0x5D:  # EMPTY_LIST
                stack.append([])
            elif opcode in (0x75, 0x73):  # SETITEMS, SETITEM
                if opcode == 0x75:
                    items = self._pop_mark(stack, marks, start)
                else:
                    if len(stack) - (marks[-1] if marks else 0) < 3:
                        raise self._error(start, "SETITEM with too few values on the stack")
                    items = stack[-2:]
                    del stack[-2:]
                if not stack or type(stack[-1]) not in (dict, OrderedDict, Counter):
                    raise self._error(start, "SETITEMS on something other than a dict")
                if len(items) % 2:
                    raise self._error(start, "SETITEMS with an odd number of values")
                target = stack[-1]
                for index in range(0, len(items), 2):
                    target[check_key(items[index], start)] = items[index + 1]
            elif opcode in (0x65, 0x61):  # APPENDS, APPEND
                if opcode == 0x65:
                    items = self._pop_mark(stack, marks, start)
                else:
                    if len(stack) - (marks[-1] if marks else 0) < 2:
                        raise self._error(start, "APPEND with too few values on the stack")
                    items = [stack.pop()]
                if not stack or type(stack[-1]) is not list:
                    raise self._error(start, "APPENDS on something other than a list")
                stack[-1].extend(items)
            elif opcode == 0x94:  # MEMOIZE
                if not stack:
                    raise self._error(start, "MEMOIZE with an empty stack")
                memo[len(memo)] = stack[-1]
            elif opcode == 0x8C:  # SHORT_BINUNICODE
                position, value = self._counted(start, position, 1, end)
                stack.append(self._text(value, start))
            elif opcode == 0x8D:  # BINUNICODE8
                position, value = self._counted(start, position, 8, end)
                stack.append(self._text(value, start))
            elif opcode in (0x43, 0x42, 0x8E, 0x96):  # SHORT_BINBYTES, BINBYTES, BINBYTES8, BYTEARRAY8
                width = {0x43: 1, 0x42: 4, 0x8E: 8, 0x96: 8}[opcode]
                position, value = self._counted(start, position, width, end)
                stack.append(bytes(value) if opcode != 0x96 else bytearray(value))
            elif opcode in (0x55, 0x54):  # SHORT_BINSTRING, BINSTRING: Python 2 str, read as UTF-8 text
                position, value = self._counted(start, position, 1 if opcode == 0x55 else 4, end)
                stack.append(self._text(value, start))
            elif opcode == 0x47:  # BINFLOAT
                if position + 8 > end:
                    raise self._error(start, "truncated BINFLOAT")
                stack.append(_UNPACK_D(data, position)[0])
                position += 8
            elif opcode in (0x8A, 0x8B):  # LONG1, LONG4
                position, value = self._counted(start, position, 1 if opcode == 0x8A else 4, end)
                if len(value) > _MAX_LONG_BYTES:
                    raise self._error(start, f"an int of {len(value)} bytes")
                stack.append(int.from_bytes(value, "little", signed=True))
            elif opcode == 0x95:  # FRAME: a length prefix for buffering, nothing to do
                if position + 8 > end:
                    raise self._error(start, "truncated FRAME")
                position += 8
            elif opcode == 0x80:  # PROTO
                if position + 1 > end or data[position] > 5:
                    raise self._error(start, "unsupported pickle protocol")
                position += 1
            elif opcode == 0x2E:  # STOP
                if len(stack) != 1 or marks:
                    raise self._error(start, "STOP with a stack that does not hold exactly one value")
                return stack[0]
            else:
                position = self._rare(opcode, start, position, end, stack, marks, memo)

    def _rare(self, opcode: int, start: int, position: int, end: int, stack: list, marks: list, memo: dict) -> int:
        """Opcodes of older and newer protocols than torch.save's (2), and of Python's own pickles."""
        base = marks[-1] if marks else 0
        if opcode == 0x93:  # STACK_GLOBAL
            if len(stack) - base < 2 or type(stack[-1]) is not str or type(stack[-2]) is not str:
                raise self._error(start, "STACK_GLOBAL needs two strings on the stack")
            module, name = stack[-2], stack[-1]
            del stack[-2:]
            stack.append(self._global(module, name, start))
        elif opcode == 0x8F:  # EMPTY_SET
            stack.append(set())
        elif opcode == 0x90:  # ADDITEMS
            items = self._pop_mark(stack, marks, start)
            if not stack or type(stack[-1]) is not set:
                raise self._error(start, "ADDITEMS on something other than a set")
            stack[-1].update(self._check_key(item, start) for item in items)
        elif opcode == 0x91:  # FROZENSET
            items = self._pop_mark(stack, marks, start)
            stack.append(frozenset(self._check_key(item, start) for item in items))
        elif opcode == 0x6C:  # LIST
            stack.append(list(self._pop_mark(stack, marks, start)))
        elif opcode == 0x64:  # DICT
            items = self._pop_mark(stack, marks, start)
            if len(items) % 2:
                raise self._error(start, "DICT with an odd number of values")
            stack.append({self._check_key(items[i], start): items[i + 1] for i in range(0, len(items), 2)})
        elif opcode == 0x30:  # POP
            if len(stack) > base:
                stack.pop()
            elif marks:
                marks.pop()  # Python's unpickler pops a MARK here too
            else:
                raise self._error(start, "POP from an empty stack")
        elif opcode == 0x31:  # POP_MARK
            self._pop_mark(stack, marks, start)
        elif opcode == 0x32:  # DUP
            if len(stack) <= base:
                raise self._error(start, "DUP with an empty stack")
            stack.append(stack[-1])
        elif opcode == 0x62:  # BUILD
            if len(stack) - base < 2:
                raise self._error(start, "BUILD with too few values on the stack")
            state = stack.pop()
            self._build(stack[-1], state, start)
        elif opcode in (0x70, 0x67):  # PUT, GET (decimal index on a line)
            line, position = self._line(position, end, start)
            index = self._decimal(line, start)
            if opcode == 0x70:
                if not stack:
                    raise self._error(start, "PUT with an empty stack")
                memo[index] = stack[-1]
            elif index not in memo:
                raise self._error(start, f"GET of memo entry {index}, which was never set")
            else:
                stack.append(memo[index])
        elif opcode in (0x49, 0x4C):  # INT, LONG (decimal text; INT 00/01 are False/True)
            line, position = self._line(position, end, start)
            if opcode == 0x49 and line in (b"00", b"01"):
                stack.append(line == b"01")
            else:
                stack.append(self._decimal(line.rstrip(b"L"), start, signed=True))
        elif opcode == 0x46:  # FLOAT
            line, position = self._line(position, end, start)
            try:
                stack.append(float(line.decode("ascii")))
            except (UnicodeDecodeError, ValueError):
                raise self._error(start, "FLOAT with a malformed number") from None
        elif opcode == 0x56:  # UNICODE
            line, position = self._line(position, end, start)
            try:
                stack.append(line.decode("raw-unicode-escape"))
            except UnicodeDecodeError:
                raise self._error(start, "UNICODE with malformed text") from None
        else:
            name = {  # type: ignore[assignment]  # None for an opcode without a name
                0x69: "INST",
                0x6F: "OBJ",
                0x81: "NEWOBJ",
                0x92: "NEWOBJ_EX",
                0x50: "PERSID",
                0x82: "EXT1",
                0x83: "EXT2",
                0x84: "EXT4",
                0x97: "NEXT_BUFFER",
                0x98: "READONLY_BUFFER",
                0x53: "STRING",
            }.get(opcode)
            what = f"opcode {name}, which checkpoints do not need" if name else f"unknown opcode 0x{opcode:02x}"
            raise self._error(start, what)
        return position

    # ------------------------------------------------------------------------------------- helpers
    def _counted(self, start: int, position: int, width: int, end: int):
        """Reads a ``width``-byte little-endian length and that many bytes after it."""
        if position + width > end:
            raise self._error(start, "truncated length")
        length = int.from_bytes(self._data[position : position + width], "little")
        position += width
        if length > end - position:
            raise self._error(start, f"a string of {length} bytes runs past the end of the pickle")
        return position + length, self._data[position : position + length]

    def _line(self, position: int, end: int, start: int):
        data = self._data
        if isinstance(data, bytes):
            newline = data.find(b"\n", position, min(end, position + 4096))
        else:
            newline = bytes(data[position : position + 4096]).find(b"\n")
            newline = -1 if newline < 0 else position + newline
        if newline < 0:
            raise self._error(start, "a text argument without its newline")
        return bytes(data[position:newline]), newline + 1

    def _decimal(self, line: bytes, start: int, signed: bool = False) -> int:
        if not 0 < len(line) <= 1000 or not line.lstrip(b"-" if signed else b"").isdigit():
            raise self._error(start, f"malformed decimal number {describe(bytes(line))}")
        return int(line)

    def _text(self, raw, start: int) -> str:
        try:
            return str(raw, "utf-8", "surrogatepass")
        except UnicodeDecodeError:
            raise self._error(start, "a string that is not valid UTF-8") from None

    def _pop_mark(self, stack: list, marks: list, start: int) -> list:
        if not marks:
            raise self._error(start, "an opcode needs a MARK that is not there")
        base = marks.pop()
        items = stack[base:]
        del stack[base:]
        return items

    def _global(self, module: str, name: str, start: int):
        return self._find_global(module, name)

    def _call(self, function, arguments, start: int):
        if type(arguments) is not tuple:
            raise self._error(start, f"REDUCE with arguments {describe(arguments)}, expected a tuple")
        if isinstance(function, Constructor):
            return self._construct(function, arguments, start)
        if not callable(function):
            raise self._error(start, f"REDUCE calls {describe(function)}")
        return function(*arguments)

    def _construct(self, constructor: Constructor, arguments: tuple, start: int):
        if len(arguments) > 1:
            raise self._error(start, f"{constructor.qualified_name} with {len(arguments)} arguments")
        items = arguments[0] if arguments else ()
        if constructor is COUNTER:
            return self._counter(items, start)
        if type(items) not in (list, tuple):
            raise self._error(start, f"{constructor.qualified_name} of {describe(items)}, expected a list")
        if constructor is ORDERED_DICT:
            result = OrderedDict()
            for pair in items:
                if type(pair) not in (list, tuple) or len(pair) != 2:
                    raise self._error(start, "collections.OrderedDict of something other than pairs")
                result[self._check_key(pair[0], start)] = pair[1]
            return result
        members = [self._check_key(item, start) for item in items]
        return set(members) if constructor is SET else frozenset(members)

    def _counter(self, items, start: int) -> Counter:
        # Python pickles a Counter as collections.Counter(dict); like Counter itself (and PyTorch's
        # loader, which calls it), a list or a str is counted instead.
        result: Counter = Counter()
        if type(items) in (dict, OrderedDict, Counter):
            for key, value in items.items():
                result[self._check_key(key, start)] = value
        elif type(items) in (list, tuple, str):
            for item in items:
                result[self._check_key(item, start)] += 1
        else:
            raise self._error(start, f"collections.Counter of {describe(items)}, expected a dict or a list")
        return result

    def _build(self, target, state, start: int) -> None:
        # PyTorch's state_dicts are OrderedDicts carrying ``_metadata``; nothing else gets attributes.
        if type(target) is not OrderedDict or type(state) is not dict or not all(type(k) is str for k in state):
            raise self._error(
                start,
                f"a checkpoint tried to set attributes on {describe(target)} (pickle BUILD); "
                "only an OrderedDict's _metadata may be set",
            )
        for key, value in state.items():
            if key != "_metadata":
                raise self._error(
                    start,
                    f"a checkpoint tried to set the attribute {describe(key)} on an "
                    "OrderedDict; only _metadata may be set",
                )
            target._metadata = value  # type: ignore[attr-defined]  # PyTorch keeps it as an attribute of the dict

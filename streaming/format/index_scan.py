"""A vectorised reading of index.json for its common shape: shard entries that share one layout
and differ only in file names, digests, byte counts, sample counts and size limits.

Shard 0 is parsed with `json` and becomes the template. Its text splits into the varying
fields (slots) and the constant text between them; every other entry must be the template with
only its slots replaced, the entries separated by one constant gap. The document's bytes are
scanned with numpy (the quote positions anchor every slot, since no string holds an escape),
never turned into one dict per shard. Anything else (escapes, non-ASCII bytes, floats or signs
in a slot, entries of other layouts) makes `scan_index` return None, and the caller parses the
document with the checked `json` path instead.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass

import numpy as np

from streaming.format.index_columns import Names

_CHUNK = 1 << 24  # bytes scanned per numpy pass, bounding the temporary masks
_BATCH = 1 << 15  # shard entries checked per pass
MAX_DIGITS = 18  # every integer of up to 18 digits fits an int64
_MAX_ENTRY = 1 << 24  # bytes of shard 0's entry the template parse may read
_VAR_INTS = {("raw_data", "bytes"), ("zip_data", "bytes"), ("samples",), ("size_limit",)}
_SHARDS = re.compile(rb'"shards"\s*:\s*\[\s*\{')
_GAP = re.compile(rb"\s*,\s*")
_END = re.compile(rb"\s*\]")
_DIGITS = re.compile(rb"\d+")


@dataclass(frozen=True)
class Scanned:
    """What the scan found: the document without its entries, shard 0's entry, and the columns
    of the fields that vary (key path -> Names or int64 array).

    Args:
        top: the document with `shards` emptied.
        template: shard 0's entry.
        fields: the varying fields' columns.
        count: the number of shard entries.
    """

    top: dict
    template: dict
    fields: dict[tuple, Names | np.ndarray]
    count: int


@dataclass(frozen=True)
class _Slot:
    """One varying field of the template: a string between quotes `quote` and `quote + 1`
    (indices within the entry), or a number after quote `quote` (`after` bytes past it) and
    `before` bytes ahead of quote `quote + 1`."""

    path: tuple
    number: bool
    quote: int
    after: int = 0
    before: int = 0


class _Decline(Exception):
    """The document is not of the shape the scan reads."""


def varies(path: tuple, kind: type) -> bool:
    """Whether the entry field at `path` may differ between shards on the fast path.

    Args:
        path: the key path of the field within an entry.
        kind: `int` or `str`.
    """
    if kind is int:
        return path in _VAR_INTS
    return path[0] in ("raw_data", "zip_data") and (
        path[1:] == ("basename",) or (len(path) == 3 and path[1] == "hashes"))


def scan_index(doc: bytes) -> Scanned | None:
    """Read index.json bytes whose shard entries share one layout, or None for any other.

    Args:
        doc: the document's bytes.
    """
    if b"\\" in doc or not doc.isascii():
        return None
    try:
        return _scan(np.frombuffer(doc, np.uint8), doc)
    except (_Decline, ValueError, TypeError, KeyError, IndexError, RecursionError):
        return None


def _scan(b: np.ndarray, doc: bytes) -> Scanned:
    quotes = _where(doc, b, ord('"'))
    if len(quotes) % 2:
        raise _Decline
    list_open, start = _shards_start(doc, quotes)
    template, end = json.JSONDecoder().raw_decode(doc[start:start + _MAX_ENTRY].decode())
    if not isinstance(template, dict):
        raise _Decline
    text = doc[start:start + end]
    first = int(np.searchsorted(quotes, start))
    slots, chunks, width = _layout(text, template)
    if not np.array_equal(quotes[first:first + width] - start, _quotes_in(text)):
        raise _Decline
    count, list_close = _count(doc, b, quotes, first, width, text)
    top = _top(doc, list_open, list_close)
    anchors = quotes[first:first + count * width].reshape(count, width)
    inner = _quotes_in(text)
    ends = (-int(inner[0]), len(text) - int(inner[-1]))  # entry start and end from its quotes
    fields = _read_slots(b, anchors, slots, chunks, ends)
    return Scanned(top, template, fields, count)


def _where(doc: bytes, b: np.ndarray, byte: int) -> np.ndarray:
    """Positions of `byte` in `doc` (whose bytes `b` views), scanned in bounded chunks into one
    preallocated array."""
    kind = np.int32 if len(b) < 2**31 else np.int64  # positions take half the memory
    out = np.empty(doc.count(bytes([byte])), kind)
    at = 0
    for lo in range(0, len(b), _CHUNK):
        found = np.flatnonzero(b[lo:lo + _CHUNK] == byte)
        out[at:at + len(found)] = found + lo
        at += len(found)
    return out


def _quotes_in(text: bytes) -> np.ndarray:
    return np.flatnonzero(np.frombuffer(text, np.uint8) == ord('"'))


def _shards_start(doc: bytes, quotes: np.ndarray) -> tuple[int, int]:
    """The '[' of the "shards" list and the '{' of its first entry (the list's last mention;
    `_top` proves it is the top-level key)."""
    found = None
    for match in _SHARDS.finditer(doc):
        at = int(np.searchsorted(quotes, match.start()))
        if at % 2 == 0 and at < len(quotes) and quotes[at] == match.start():
            found = match  # an opening quote: the key, not text inside a string
    if found is None:
        raise _Decline
    return doc.index(b"[", found.start()), found.end() - 1


def _layout(text: bytes, template: dict) -> tuple[list[_Slot], list[bytes], int]:
    """The template's slots, the constant text around them (one more chunk than slots), and
    its number of quotes."""
    strings, ints = [], []
    _walk(template, (), strings, ints)
    quotes = _quotes_in(text).tolist()
    slots: list[_Slot] = []
    values = numbers = 0
    for k in range(0, len(quotes), 2):
        close, following = quotes[k + 1], (quotes + [len(text)])[k + 2]
        between = text[close + 1:following]
        if not between.lstrip().startswith(b":"):  # a value string
            if varies(strings[values], str):
                slots.append(_Slot(strings[values], False, k))
            values += 1
        for run in _DIGITS.finditer(between):
            path = ints[numbers]
            numbers += 1
            if varies(path, int):
                if following == len(text):
                    raise _Decline  # a varying number last in the entry
                slots.append(_Slot(path, True, k + 1, run.start() + 1,
                                   len(between) - run.end()))
    if values != len(strings) or numbers != len(ints) or _DIGITS.search(text[:quotes[0]]):
        raise _Decline
    return slots, _chunks(text, quotes, slots), len(quotes)


def _chunks(text: bytes, quotes: list[int], slots: list[_Slot]) -> list[bytes]:
    spans = [_span_in(quotes, slot) for slot in slots]
    cuts = [0] + [x for span in spans for x in span] + [len(text)]
    return [text[cuts[i]:cuts[i + 1]] for i in range(0, len(cuts), 2)]


def _span_in(quotes: list[int], slot: _Slot) -> tuple[int, int]:
    if not slot.number:
        return quotes[slot.quote] + 1, quotes[slot.quote + 1]
    return quotes[slot.quote] + slot.after, quotes[slot.quote + 1] - slot.before


def _walk(node: object, path: tuple, strings: list, ints: list) -> None:
    """Paths of the string and integer values of `node`, in document order."""
    if isinstance(node, dict):
        for key, value in node.items():
            _walk(value, (*path, key), strings, ints)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _walk(value, (*path, i), strings, ints)
    elif isinstance(node, str):
        strings.append(path)
    elif isinstance(node, int) and not isinstance(node, bool):
        ints.append(path)
    elif not (node is None or isinstance(node, bool)):
        raise _Decline  # a float


def _count(doc: bytes, b: np.ndarray, quotes: np.ndarray, first: int, width: int,
           text: bytes) -> tuple[int, int]:
    """How many entries follow one another from quote `first`, each the template's number of
    quotes and one constant gap apart; and the position of the list's ']'."""
    inner = _quotes_in(text)
    lead, tail = int(inner[0]), len(text) - 1 - int(inner[-1])
    after = int(quotes[first + width - 1]) + 1 + tail  # just past entry 0
    gap = _GAP.match(doc, after)
    count = 1
    if gap is not None:
        join = doc[after - tail:gap.end() + lead]  # a tail, the gap, the next entry's head
        ends = quotes[first + width - 1:len(quotes) - 1:width] + 1
        nexts = quotes[first + width::width]
        size = min(len(ends), len(nexts))
        ends, nexts = ends[:size], nexts[:size]
        fits = (nexts - ends) == len(join)
        fits[fits] = _equal_at(b, ends[fits], join)
        count = 1 + (int(np.argmin(fits)) if not fits.all() else size)
    end = int(quotes[first + count * width - 1]) + 1 + tail
    closing = _END.match(doc, end)
    if closing is None:
        raise _Decline
    return count, closing.end() - 1


def _equal_at(b: np.ndarray, starts: np.ndarray, expected: bytes) -> np.ndarray:
    """Per start: whether the bytes there are `expected`."""
    want = np.frombuffer(expected, np.uint8)
    out = np.ones(len(starts), bool)
    if not len(want) or not len(starts):
        return out
    if int(starts.max()) + len(want) > len(b):
        raise _Decline
    if len(starts) * len(want) <= _BATCH:  # few: gather directly
        return (b[starts[:, None] + np.arange(len(want))] == want).all(axis=1)
    windows = np.lib.stride_tricks.sliding_window_view(b, len(want))
    for lo in range(0, len(starts), _BATCH):
        out[lo:lo + _BATCH] = (windows[starts[lo:lo + _BATCH]] == want).all(axis=1)
    return out


def _top(doc: bytes, list_open: int, list_close: int) -> dict:
    """The document with its shard list emptied, proving that list is the top-level one."""
    marker = f"shards-{secrets.token_hex(8)}"
    top = json.loads(doc[:list_open] + json.dumps(marker).encode() + doc[list_close + 1:])
    if not isinstance(top, dict) or top.get("shards") != marker:
        raise _Decline
    top["shards"] = []
    return top


def _read_slots(b: np.ndarray, anchors: np.ndarray, slots: list[_Slot], chunks: list[bytes],
                ends: tuple[int, int]) -> dict[tuple, Names | np.ndarray]:
    """Check every entry's constant text against the template's, batch by batch, and gather
    the slots' values."""
    strings: dict[tuple, list[Names]] = {s.path: [] for s in slots if not s.number}
    numbers: dict[tuple, list[np.ndarray]] = {s.path: [] for s in slots if s.number}
    for lo in range(0, len(anchors), _BATCH):
        part = anchors[lo:lo + _BATCH]
        cut = [part[:, 0] + ends[0]]
        for slot in slots:
            cut += list(_slot_span(part, slot))
        cut.append(part[:, -1] + ends[1])
        for k, chunk in enumerate(chunks):
            begin, stop = cut[2 * k], cut[2 * k + 1]
            if ((stop - begin) != len(chunk)).any() or not _equal_at(b, begin, chunk).all():
                raise _Decline
        for k, slot in enumerate(slots):
            begin, stop = cut[2 * k + 1], cut[2 * k + 2]
            if slot.number:
                numbers[slot.path].append(_integers(b, begin, stop))
            else:
                strings[slot.path].append(_names(b, begin, stop))
    out: dict[tuple, Names | np.ndarray] = {p: Names.concat(v) for p, v in strings.items()}
    out.update({p: np.concatenate(v) for p, v in numbers.items()})
    return out


def _slot_span(anchors: np.ndarray, slot: _Slot) -> tuple[np.ndarray, np.ndarray]:
    if not slot.number:
        return anchors[:, slot.quote] + 1, anchors[:, slot.quote + 1]
    return anchors[:, slot.quote] + slot.after, anchors[:, slot.quote + 1] - slot.before


def _ramp(lengths: np.ndarray) -> np.ndarray:
    """0..n-1 for each run of the given lengths, concatenated."""
    total = int(lengths.sum())
    return np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)


def _names(b: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> Names:
    """The strings at [lo, hi), which may hold no control character."""
    lengths = hi - lo
    data = b[np.repeat(lo, lengths) + _ramp(lengths)]
    if (data < 0x20).any():
        raise _Decline
    offsets = np.zeros(len(lo) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return Names(data.tobytes(), offsets)


def _integers(b: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The plain non-negative integers at [lo, hi): 1 to MAX_DIGITS digits, no sign, fraction,
    exponent or leading zero."""
    lengths = hi - lo
    if ((lengths < 1) | (lengths > MAX_DIGITS)).any():
        raise _Decline
    at = np.repeat(lo, lengths) + _ramp(lengths)
    digits = b[at].astype(np.int64) - ord("0")
    if ((digits < 0) | (digits > 9)).any() or ((b[lo] == ord("0")) & (lengths > 1)).any():
        raise _Decline
    powers = np.repeat(hi, lengths) - at - 1
    return np.add.reduceat(digits * (10 ** powers), np.cumsum(lengths) - lengths)

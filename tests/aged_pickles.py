"""A finished Ray experiment made to look saved by an older astune: every module path its
pickles name (the Tuner, the searcher, the scheduler, the callbacks, the trainable) set back to
the path of the time, as :mod:`astune._moved` maps it forward.

The pickles are rewritten opcode by opcode (:mod:`pickletools`), not byte for byte, since an old
path is seldom of the new one's length (``astune.tuning.searcher``, ``astune.tuning.searchers.
searcher``): each string that names a moved module is written anew with its length; frames,
which would count the old lengths, are left out (framing is optional to the unpickler); a
pickle held as bytes in a pickle, or as hex in Ray's JSON (``experiment_state-*.json``), is
rewritten the same way.
"""

from __future__ import annotations

import pickletools
import re
import struct
from collections.abc import Callable, Mapping
from pathlib import Path

Rename = Callable[[str], str]

_UNICODE = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8"}
_BYTES = {"SHORT_BINBYTES", "BINBYTES", "BINBYTES8"}
_MODULE_PATH = re.compile(r"astune(?:\.\w+)+")
# a JSON string of hex that begins as a pickle of protocol 2 to 5 does (Ray's JSON holds its
# trials so), in a JSON string of its own or one inside another (its quote escaped)
_HEX_PICKLE = re.compile(rb'(?<=")800[2-5](?:[0-9a-f]{2})+(?=\\*")')


# Written out, not read from astune._moved: a test of the aliases must not take its old paths
# from them (an alias left out there would leave its path unaged here, and the test green).
_FLAT_TUNING = {
    "searchers": ("searcher", "algorithms", "mo_halving"),
    "lifecycle": ("stop", "ray_watch", "resume", "ending", "backfill", "scratch", "trial_errors"),
    "confirmation": ("confirm", "confirm_summary"),
}


def before_issue_61() -> dict[str, str]:
    """Today's path -> the path before ``astune/tuning`` went by job (``astune.tuning.*``)."""
    return {
        f"astune.tuning.{package}.{module}": f"astune.tuning.{module}"
        for package, modules in _FLAT_TUNING.items()
        for module in modules
    }


def before_issue_60() -> dict[str, str]:
    """Today's path -> the path of the fourth layout's first days (``astune.search.*``, flat)."""
    flat = {
        new: "astune.search" + old[len("astune.tuning") :] for new, old in before_issue_61().items()
    }
    return {"astune.tuning": "astune.search", **flat}


def renamer(homes: Mapping[str, str], named: set[str]) -> Rename:
    """A module path (or a dotted name under one) under the old name ``homes`` gives it; the
    longest path that matches wins, so that a module's own entry beats its package's. Each
    name given is added to ``named``."""

    def rename(text: str) -> str:
        def one(match: re.Match[str]) -> str:
            name = match.group(0)
            for new in sorted(homes, key=len, reverse=True):
                if name == new or name.startswith(new + "."):
                    named.add(homes[new] + name[len(new) :])
                    return homes[new] + name[len(new) :]
            return name

        return _MODULE_PATH.sub(one, text)

    return rename


def age_pickle(data: bytes, rename: Rename) -> bytes:
    """``data`` (one pickle or several end to end) with every string renamed."""
    out, start = bytearray(), 0
    while start < len(data):
        ops = list(pickletools.genops(data[start:]))
        ends = [pos for _, _, pos in ops[1:]] + [ops[-1][2] + 1]  # STOP is one byte
        for (op, arg, pos), end in zip(ops, ends):
            raw = data[start + pos : start + end]
            if op.name == "FRAME":
                continue
            if op.name in _UNICODE and rename(arg) != arg:
                raw = _unicode(rename(arg))
            elif op.name in ("GLOBAL", "INST") and rename(arg) != arg:
                module, name = rename(arg).split(" ", 1)
                raw = raw[:1] + f"{module}\n{name}\n".encode()
            elif op.name in _BYTES and arg[:1] == b"\x80" and b"astune." in arg:
                raw = _bytes(_age_or_keep(arg, rename))
            out += raw
        start += ends[-1]
    return bytes(out)


def _age_or_keep(data: bytes, rename: Rename) -> bytes:
    try:
        return age_pickle(data, rename)
    except ValueError:  # bytes that begin as a pickle does, but are none
        return data


def _unicode(text: str) -> bytes:
    data = text.encode("utf-8")
    if len(data) < 256:
        return b"\x8c" + struct.pack("<B", len(data)) + data  # SHORT_BINUNICODE
    return b"X" + struct.pack("<I", len(data)) + data  # BINUNICODE


def _bytes(data: bytes) -> bytes:
    if len(data) < 256:
        return b"C" + struct.pack("<B", len(data)) + data  # SHORT_BINBYTES
    return b"B" + struct.pack("<I", len(data)) + data  # BINBYTES


def age_experiment(folder: Path, homes: Mapping[str, str]) -> list[str]:
    """Rewrite the experiment's pickles and JSON under ``folder`` to name the old paths of
    ``homes`` (today's path -> the old one); the old names they hold now."""
    named: set[str] = set()
    rename = renamer(homes, named)

    def hex_pickle(match: re.Match[bytes]) -> bytes:
        return _age_or_keep(bytes.fromhex(match[0].decode()), rename).hex().encode()

    for path in sorted(folder.rglob("*")):
        if path.suffix not in (".pkl", ".json"):
            continue
        data = path.read_bytes()
        if data[:1] == b"\x80":  # a pickle, whatever its name (Ray's search_gen_state-*.json)
            aged = _age_or_keep(data, rename)
        else:
            aged = rename(_HEX_PICKLE.sub(hex_pickle, data).decode("utf-8")).encode("utf-8")
        if aged != data:
            path.write_bytes(aged)
    return sorted(named)

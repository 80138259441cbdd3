"""Big HLO text read by XLA's own parser (the installed jaxlib), then by the proto reader.

XLA's parser is C++: it turns a 50 MB text into a module proto in about 4 s of CPU, where
reading it line by line in Python takes about 16 s. It is a private jaxlib API
(`xla_client.hlo.hlo_module_from_text`), so it is used only on the jax versions it was checked
on (`CHECKED_JAX`), only for texts big enough to be worth jaxlib's import, and never on its own
word: text it refuses, or a proto the proto reader refuses, is read by our text parser, whose
errors are the ones a user sees. XLA's parser renames an instruction whose name repeats (text
pasted together by hand: XLA's dumps name each instruction once); that is harmless inside a fused
computation, whose instructions are not ops of the report, but an op's name must stay the one the
text gives it, so a text where XLA renamed an op is read by ours too.
Small texts always go to our parser.
"""

from __future__ import annotations

import ctypes
import re
from importlib.metadata import PackageNotFoundError, version

from ..errors import InputError
from .hlo_model import Module
from .hlo_proto import read_hlo_proto_bytes

# jax versions (major, minor) on which the equivalence tests ran against this API.
CHECKED_JAX = ((0, 10),)
_INSTRUCTION_NAME = re.compile(r"^\s*(?:ROOT\s+)?%?([^\s=]+)\s*=\s", re.MULTILINE)
# Below this size our parser is as quick as importing jaxlib and converting.
MIN_BYTES = 4 << 20


def jax_checked() -> bool:
    """Whether the installed jax is one the XLA parser's path was checked on."""
    try:
        parts = version("jax").split(".")
        return (int(parts[0]), int(parts[1])) in CHECKED_JAX
    except (PackageNotFoundError, ValueError, IndexError):
        return False


def text_to_proto(held: list[str]) -> bytes | None:
    """The serialized HloModuleProto XLA's parser makes of the text in `held`; None when it refuses
    the text or the API is not there. Once XLA's module holds the text, `held` is emptied: the text
    is not kept beside the module and its proto (800 MB for a 50 MB text)."""
    try:
        # jaxlib's own module (what jax._src.lib.xla_client names), without importing JAX: 50 MB
        # and half a second less beside XLA's module of a big text.
        from jaxlib import xla_client
        module = xla_client.hlo.hlo_module_from_text(held[0])
        held.clear()
        data = bytes(module.as_serialized_hlo_module_proto())
    except Exception:  # any refusal (a syntax error, a moved API): our parser reads it and says why
        return None
    del module
    _release_freed_memory()
    return data


def _release_freed_memory() -> None:
    """Give the C++ heap XLA freed back to the system: its module and proto of a 50 MB text take
    800 MB, which glibc would otherwise keep under the model the proto reader then builds."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def read_with_xla(held: list[str], origin: str = "") -> Module | None:
    """The module XLA's parser and the proto reader make of the text in `held`, or None (read it
    with ours): the text is small, the jax untested, XLA or the proto reader refuses it, or an op's
    name is not the text's. `held` is emptied once XLA holds the text (`text_to_proto`)."""
    text = held[0]
    if len(text) < MIN_BYTES or not jax_checked():
        return None
    names = _INSTRUCTION_NAME.findall(text)
    written = set(names)
    repeated = len(written) < len(names)
    del text, names
    if not repeated:
        written.clear()  # every name is the text's: nothing to check after
    data = text_to_proto(held)
    if data is None:
        return None
    try:
        module = read_hlo_proto_bytes(data, origin=origin)
    except InputError:
        return None
    if repeated and not _ops_named_as_written(module, written):
        return None
    module.source = "text"
    return module


def _ops_named_as_written(module: Module, written: set[str]) -> bool:
    """Every op has a name the text gives: XLA's parser gives a repeated name to one instruction
    and a new name to each of the others."""
    return all(instr.name in written for comp in module.running() for instr in comp.instructions)

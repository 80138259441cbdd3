"""Compressed inputs expanded within bounds: xz streams and zip archive members.

A compressed file's size says little about what it holds: xz and deflate reach ratios of
thousands on repeated bytes, so a megabyte can expand to gigabytes (a decompression bomb).
Everything compressed is expanded in chunks and refused, naming the member, once it passes
`MAX_RATIO` times its compressed size (past a floor every real member stays under) or
`MAX_EXPANDED_BYTES` whatever its ratio. Real HLO dumps and traces compress 8 to 30 times.
"""

from __future__ import annotations

import lzma
import zipfile
import zlib

from ...base.errors import InputError

MAX_EXPANDED_BYTES = (1 << 31) - 1  # protobuf's limit on one message: no HLO proto is larger
MAX_RATIO = 200
RATIO_FLOOR_BYTES = 64 << 20  # below this, any ratio (a small file of zeros is no threat)
_CHUNK = 1 << 24


def expansion_limit(compressed_bytes: int) -> int:
    """The most bytes `compressed_bytes` of compressed data may expand to."""
    return min(MAX_EXPANDED_BYTES, max(RATIO_FLOOR_BYTES, MAX_RATIO * compressed_bytes))


def _too_big(member: str, compressed: int) -> InputError:
    limit = expansion_limit(compressed)
    why = (f"{limit // max(compressed, 1):,} times as many" if limit < MAX_EXPANDED_BYTES
           else "more than any HLO proto holds")
    return InputError(f"{member}: {compressed:,} compressed bytes expand to more than {limit:,} ({why}): refused "
                      "as a decompression bomb (real dumps expand 8 to 30 times)")


def xz_bytes(data: bytes, member: str) -> bytes:
    """The bytes of an xz file (one stream or several, one after another), within `expansion_limit`.

    **Raises:** `InputError` naming `member` for data that is not xz, is truncated, or expands too far.
    """
    limit = expansion_limit(len(data))
    out: list[bytes] = []
    size = 0
    rest = data
    try:
        while rest:
            stream = lzma.LZMADecompressor(lzma.FORMAT_XZ)
            pending = rest
            while not stream.eof:
                if stream.needs_input and not pending:
                    raise lzma.LZMAError("the data ends inside a stream")
                piece = stream.decompress(pending, max_length=min(_CHUNK, limit + 1 - size))
                pending = b""
                size += len(piece)
                if size > limit:
                    raise _too_big(member, len(data))
                out.append(piece)
            rest = stream.unused_data.lstrip(b"\0")  # streams may be padded with zero bytes
    except lzma.LZMAError as exc:
        raise InputError(f"{member} is not valid xz ({exc}): truncated or damaged") from None
    return b"".join(out)


def zip_member(archive: zipfile.ZipFile, name: str) -> bytes:
    """One member of a zip, refused before it is expanded when its stated size passes the limit
    (the zip reader never returns more than the stated size).

    **Raises:** `InputError` naming the member for one that expands too far; the zip reader's own
    errors (`BadZipFile`, `KeyError`, `EOFError`) for a damaged archive.
    """
    info = archive.getinfo(name)
    if info.flag_bits & 1:
        raise InputError(f"{name} is encrypted: audit reads archives as nsys-jax writes them, unencrypted")
    if info.compress_type not in _METHODS:
        raise InputError(f"{name} is compressed by method {info.compress_type}, which no zip reader here has "
                         f"(it reads {', '.join(_METHODS.values())})")
    if info.compress_type != zipfile.ZIP_STORED and info.file_size > expansion_limit(info.compress_size):
        raise _too_big(name, info.compress_size)
    try:
        return archive.read(info)
    except (zlib.error, lzma.LZMAError, OSError, EOFError, RuntimeError, NotImplementedError, ValueError) as exc:
        # bytes that are not what their method says (bz2's errors are OSError, a wrong password RuntimeError)
        raise InputError(f"{name} is not valid {_METHODS[info.compress_type]} data ({exc}): truncated or "
                         "damaged") from None


_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate", zipfile.ZIP_BZIP2: "bzip2",
            zipfile.ZIP_LZMA: "lzma"}

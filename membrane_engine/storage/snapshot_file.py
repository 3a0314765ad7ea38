"""The column cache persisted on disk, so a process that opens a large store does not read every
record again (``ColumnCache`` writes one after a full load and reads it on the first one).

A snapshot is an accelerator, never a source of truth. It is used only when all of these hold
(anything else is ignored and the store is loaded in full, as without one):
- the file is a regular file of this user, readable and writable by nobody else (mode 0600, in a
  directory of mode 0700), not a symbolic link;
- its MAC is right: HMAC-SHA256 over every byte before it, with a key kept in the store's
  ``meta`` table (``store.SNAPSHOT_KEY``), so whoever can write the file but cannot read the
  store cannot make one the cache accepts, and a truncated or corrupted file fails;
- it is of this store (the store id it names is the store's) at a change the store's log still
  holds as it was (that change's number is at most the store's newest and names the same
  record), so a snapshot of another store, of a store restored from an older copy, or from
  beyond the log is refused; the cache then applies the changes after it, as after any refresh;
- its layout is the one this code writes (columns, lengths, codes within their vocabularies).

Layout: MAGIC, the header's length (8 bytes, little-endian), the header (JSON: what it is of, the
column layout, the scope, tag-set and custom-curve vocabularies), each column's raw bytes, the
record ids (UTF-8, newline-separated), then the 32-byte MAC. Written to a temporary file beside
it and renamed over the old one, so a reader never sees half a snapshot.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np

MAGIC = b"membrane column snapshot\n"
VERSION = 2  # a file of another version (1: keyed BLAKE2b) is ignored, and written anew
MAC_SIZE = 32
_DOMAIN = b"membrane-columns\0"  # the MAC's first bytes: what this key signs, and nothing else
_CHUNK = 1 << 22


class SnapshotRejected(Exception):
    """The snapshot file may not be used; the message says why (logged, never shown as an error)."""


def _mac(key: bytes) -> Any:
    return hmac.new(key, _DOMAIN, hashlib.sha256)


def private_dir(directory: Path) -> None:
    """``directory`` made if missing, and kept readable by its owner alone (0700)."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    if stat.S_IMODE(directory.stat().st_mode) != 0o700:
        os.chmod(directory, 0o700)


def write(path: Path, key: bytes, header: dict[str, Any], columns: dict[str, np.ndarray], ids: list[str]) -> int:
    """Write a snapshot atomically (owner-only file in an owner-only directory); its size in bytes."""
    private_dir(path.parent)
    _drop_abandoned(path)
    blob = "\n".join(ids).encode("utf-8")
    if blob.count(b"\n") != max(len(ids) - 1, 0):
        raise ValueError("a record id holds a line break")
    layout = []
    offset = 0
    parts: list[memoryview] = []
    for name, arr in columns.items():
        arr = np.ascontiguousarray(arr)
        layout.append([name, arr.dtype.str, int(arr.shape[0]), offset, int(arr.nbytes)])
        parts.append(memoryview(arr).cast("B"))
        offset += arr.nbytes
    head = dict(header, version=VERSION, columns=layout, ids=[offset, len(blob)])
    parts.append(memoryview(blob))
    head_bytes = json.dumps(head, separators=(",", ":")).encode("utf-8")
    mac = _mac(key)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            for piece in (MAGIC, len(head_bytes).to_bytes(8, "little"), head_bytes, *parts):
                for start in range(0, len(piece), _CHUNK):
                    chunk = piece[start:start + _CHUNK]
                    mac.update(chunk)
                    out.write(chunk)
            out.write(mac.digest())
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return len(MAGIC) + 8 + len(head_bytes) + offset + len(blob) + MAC_SIZE


def _drop_abandoned(path: Path) -> None:
    """Remove temporary files of ``path`` that a process which is gone left half written."""
    for tmp in path.parent.glob(f".{path.name}.*.tmp"):
        try:
            pid = int(tmp.name[len(path.name) + 2:-4])
            if pid == os.getpid():
                continue
            os.kill(pid, 0)  # still running: its file
        except ProcessLookupError:
            try:
                tmp.unlink()
            except OSError:
                pass
        except (ValueError, OSError):
            continue


def header_of(path: Path, max_header: int = 64 << 20) -> tuple[dict[str, Any], bytes]:
    """(the header, the whole file) of an owner-only regular file with a well-formed start; the
    MAC is not checked yet (``verified``). SnapshotRejected otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        raise SnapshotRejected("no snapshot") from None
    except OSError as exc:
        raise SnapshotRejected(f"cannot open it ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise SnapshotRejected("not a regular file")
        if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
            raise SnapshotRejected("owned by another user")
        if stat.S_IMODE(st.st_mode) & 0o077:
            raise SnapshotRejected("readable or writable by others than its owner")
        data = f.read()
    start = len(MAGIC) + 8
    if len(data) < start + MAC_SIZE or not data.startswith(MAGIC):
        raise SnapshotRejected("not a column snapshot, or truncated")
    size = int.from_bytes(data[len(MAGIC):start], "little")
    if size > min(max_header, len(data) - start - MAC_SIZE):
        raise SnapshotRejected("truncated header")
    try:
        header = json.loads(data[start:start + size])
    except ValueError:
        raise SnapshotRejected("unreadable header") from None
    if not isinstance(header, dict) or header.get("version") != VERSION:
        raise SnapshotRejected("of another version")
    return header, data


def verified(header: dict[str, Any], data: bytes, key: bytes, dtypes: dict[str, np.dtype]) -> tuple[dict[str, np.ndarray], list[str]]:
    """The columns (read-only views of ``data``) and ids of a snapshot whose MAC ``key`` confirms
    and whose layout is ``dtypes`` (name -> dtype, every one present, same length); else
    SnapshotRejected."""
    body = memoryview(data)[:len(data) - MAC_SIZE]
    mac = _mac(key)
    for start in range(0, len(body), _CHUNK):
        mac.update(body[start:start + _CHUNK])
    if not hmac.compare_digest(mac.digest(), data[len(data) - MAC_SIZE:]):
        raise SnapshotRejected("its MAC does not match (altered, truncated, or signed by another store)")
    base = len(MAGIC) + 8 + int.from_bytes(data[len(MAGIC):len(MAGIC) + 8], "little")
    end = len(body)
    try:
        n = int(header["n"])
        layout = {name: (np.dtype(dt), int(count), int(off), int(size)) for name, dt, count, off, size in header["columns"]}
        ids_off, ids_size = (int(v) for v in header["ids"])
    except (KeyError, TypeError, ValueError):
        raise SnapshotRejected("malformed layout") from None
    if set(layout) != set(dtypes):
        raise SnapshotRejected("other columns than this version's")
    columns = {}
    for name, (dt, count, off, size) in layout.items():
        if dt != np.dtype(dtypes[name]) or count != n or size != n * dt.itemsize or off < 0 or base + off + size > end:
            raise SnapshotRejected(f"column {name} is malformed")
        columns[name] = np.frombuffer(data, dtype=dt, count=n, offset=base + off)
    if ids_off < 0 or base + ids_off + ids_size != end:
        raise SnapshotRejected("malformed ids")
    ids = bytes(body[base + ids_off:end]).decode("utf-8", errors="strict").split("\n") if n else []
    if len(ids) != n:
        raise SnapshotRejected("ids do not match the columns")
    return columns, ids

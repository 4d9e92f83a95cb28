"""Opening a store file's connections, and the boundary past which no ``apsw`` exception goes.

``access_of`` decides how a file is opened: read-write (creating it when asked), or, for a
file that cannot be written (``file_is_read_only``), for reading only without ``-wal`` or
``-shm`` files. ``open_writer`` opens the one writer connection (checking the file's store
schema first), ``open_reader`` a reader or checkpointer connection. ``store_error`` turns
each SQLite error into its ``StoreError``.
"""

from __future__ import annotations

import errno
import os
import stat
import time
import urllib.parse
from typing import Final, NamedTuple

import apsw

from contextledger.store._errors import (
    StoreBusyError,
    StoreCorruptError,
    StoreError,
    StoreFullError,
    StoreIOError,
    StoreReadOnlyError,
    StoreSchemaError,
)
from contextledger.store._schema import check_schema

#: How long a connection waits for a lock held by another process before failing.
BUSY_TIMEOUT_MS: Final = 10_000
#: How often a writer tries again to put a new file in WAL mode while another connection
#: holds a lock (each try takes microseconds; opening writers hold their locks for about
#: as long).
WAL_RETRY_SECONDS: Final = 0.001

#: What SQLite raises through apsw: its own errors, and text that is not UTF-8 (a damaged
#: row's column read as text).
SQLITE_ERRORS: Final = (apsw.Error, UnicodeDecodeError)


#: The operating system's ways of saying a write found no room: the disk is full, the file
#: reached the process's size limit (``RLIMIT_FSIZE``), the user's quota is used up. SQLite
#: reports only a short write as ``FULL``; a write refused outright is an ``IOERR``.
_NO_ROOM: Final = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})


def store_error(
    exc: apsw.Error | UnicodeDecodeError, path: str, system_errno: int = 0
) -> StoreError:
    """The ``StoreError`` for SQLite's ``exc`` on the store at ``path`` (``system_errno``:
    the connection's last ``errno``): the boundary past which no ``apsw`` exception goes."""
    reason = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, UnicodeDecodeError):
        return StoreCorruptError(f"{path} is damaged (text that is not UTF-8: {reason})")
    if isinstance(exc, apsw.BusyError | apsw.LockedError):
        return StoreBusyError(path, BUSY_TIMEOUT_MS)
    if isinstance(exc, apsw.CorruptError | apsw.NotADBError):
        return StoreCorruptError(f"{path} is damaged ({reason})")
    if isinstance(exc, apsw.FullError) or (
        isinstance(exc, apsw.IOError) and system_errno in _NO_ROOM
    ):
        return StoreFullError(f"{path}: the disk or the file size limit is full ({reason})")
    if isinstance(exc, apsw.ReadOnlyError):
        return StoreReadOnlyError(f"{path} cannot be written ({reason})")
    return StoreIOError(f"{path}: {reason}")


class Access(NamedTuple):
    """How connections open the file: the name passed to SQLite (a path, or a ``file:`` URI
    for read-only access), the open flags, and whether the store may write."""

    name: str
    flags: int
    read_only: bool


def file_is_read_only(path: str) -> bool:
    """Whether the store file at ``path`` exists and can only be read: it has no write
    permission bit (so even root treats it as read-only), this process may not write it, or
    it is on a read-only mount."""
    try:
        info = os.stat(path)
    except OSError:
        return False
    if not stat.S_ISREG(info.st_mode):
        return False
    if not info.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        return True
    if not os.access(path, os.W_OK):
        return True
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def access_of(path: str, create: bool) -> Access:
    """Read-write (creating the file when ``create``), or read-only for a file that
    ``file_is_read_only``. Read-only, SQLite would create ``-wal`` and ``-shm`` files it
    could never remove; with no ``-wal`` file there is nothing to read from one, and the
    file is opened ``immutable`` (no locks, no side files). An existing ``-wal`` means the
    file is open elsewhere or was not closed cleanly: it is read through (``mode=ro``)."""
    if not file_is_read_only(path):
        flags = apsw.SQLITE_OPEN_READWRITE | (apsw.SQLITE_OPEN_CREATE if create else 0)
        return Access(path, flags, False)
    mode = "mode=ro" if os.path.exists(path + "-wal") else "mode=ro&immutable=1"
    uri = f"file:{urllib.parse.quote(os.path.abspath(path))}?{mode}"
    return Access(uri, apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI, True)


def open_writer(path: str, access: Access, durability: str, create: bool) -> apsw.Connection:
    """The writer: WAL, the chosen ``synchronous``, no automatic checkpoints. The file's
    store schema is checked before any setting is changed (``check_schema``). Read-only,
    it changes nothing and only reads."""
    try:
        conn = apsw.Connection(access.name, flags=access.flags)
    except apsw.CantOpenError as exc:
        raise StoreSchemaError(f"cannot open {path}: {exc}") from exc
    except apsw.Error as exc:
        raise store_error(exc, path) from exc
    try:
        conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        check_schema(conn, path, create, not access.read_only)
        if not access.read_only:
            cur = conn.cursor()
            _enter_wal(cur, time.monotonic() + BUSY_TIMEOUT_MS / 1000)
            cur.execute(f"PRAGMA synchronous={'FULL' if durability == 'full' else 'NORMAL'}")
            cur.execute("PRAGMA wal_autocheckpoint=0")
    except BaseException as exc:
        conn.close()
        if isinstance(exc, apsw.NotADBError):
            raise StoreSchemaError(f"{path} is not a SQLite database") from exc
        if isinstance(exc, SQLITE_ERRORS):
            raise store_error(exc, path) from exc
        raise
    return conn


def _enter_wal(cur: apsw.Cursor, deadline: float) -> None:
    """Put the file in WAL mode (it stays so), trying again until ``deadline`` while another
    connection holds a lock: leaving the rollback journal takes an exclusive lock, and
    SQLite refuses it at once, without waiting, when waiting could deadlock (another writer
    opening the same new file at the same moment holds a shared lock)."""
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except apsw.BusyError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(WAL_RETRY_SECONDS)


def open_reader(path: str, access: Access) -> apsw.Connection:
    """A connection for reads and checkpoints; it changes no database setting."""
    conn = apsw.Connection(access.name, flags=access.flags & ~apsw.SQLITE_OPEN_CREATE)
    conn.set_busy_timeout(BUSY_TIMEOUT_MS)
    return conn

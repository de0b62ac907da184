"""A ``pyarrow.fs.FileSystemHandler`` for object storage whose every call waits out an outage
(:func:`astune.store.storage_retry.retried`), and that reads absolute local paths as the local
disk.

The local paths are what keep a checkpoint upload's errors: Ray copies a checkpoint folder with
``pyarrow.fs.copy_files`` from the checkpoint's filesystem to the storage's. When both are this
filesystem, pyarrow hands each file to :meth:`RetryingHandler.copy_file`, whose errors reach
the trial; a stream written through a Python handler would lose an error raised when it closes
(pyarrow 25's ``copy_files`` drops it: measured), and with it the news that a file never
arrived. Object storage paths are ``bucket/key``, never absolute, so the two cannot be confused.

A file goes up whole from a local file and comes down whole into one, so a transfer cut short
is tried again from its start, never left half done.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
from pyarrow import fs as pafs

from astune.store.storage_retry import retried

if TYPE_CHECKING:
    from pyarrow import NativeFile

logger = logging.getLogger(__name__)
T = TypeVar("T")
_CHUNK_BYTES = 16 * 1024 * 1024
_LOCAL = pafs.LocalFileSystem()


def is_local(path: str) -> bool:
    return path.startswith("/")


class RetryingHandler(pafs.FileSystemHandler):
    """Object storage ``inner`` with each call retried for up to ``timeout_s`` seconds of an
    outage; ``where`` names the storage in messages (``s3://bucket/prefix``)."""

    def __init__(self, inner: pafs.FileSystem, *, timeout_s: float, where: str) -> None:
        self.inner, self.timeout_s, self.where = inner, timeout_s, where
        # One whole-file transfer at a time: uploads waiting on pyarrow's IO threads from inside
        # copy_files' own threads can hang (https://github.com/apache/arrow/issues/32372).
        self._transfers = threading.Lock()

    def __reduce__(self) -> tuple[Any, ...]:  # the lock stays behind; trials get their own
        return (_rebuild, (self.inner, self.timeout_s, self.where))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RetryingHandler) and self.inner.equals(other.inner)

    def __hash__(self) -> int:  # equal handlers (equal inner filesystems) hash alike
        return hash(self.inner.type_name)

    def _call(self, what: str, call: Callable[[], T]) -> T:
        return retried(call, what=what, where=self.where, timeout_s=self.timeout_s)

    # ---------------------------------------------------------------- FileSystemHandler
    def get_type_name(self) -> str:
        return f"retrying-{self.inner.type_name}"

    def normalize_path(self, path: str) -> str:
        return path if is_local(path) else self.inner.normalize_path(path)

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        remote = [p for p in paths if not is_local(p)]
        if not remote:
            return [_LOCAL.get_file_info(p) for p in paths]
        found = iter(self._call(f"reading {remote[:1]}", lambda: self.inner.get_file_info(remote)))
        return [_LOCAL.get_file_info(p) if is_local(p) else next(found) for p in paths]

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        if is_local(selector.base_dir):
            return _LOCAL.get_file_info(selector)
        what = f"listing {selector.base_dir}"
        return self._call(what, lambda: self.inner.get_file_info(selector))

    def create_dir(self, path: str, recursive: bool) -> None:
        if is_local(path):
            return _LOCAL.create_dir(path, recursive=recursive)
        self._call(f"creating {path}", lambda: self.inner.create_dir(path, recursive=recursive))

    def delete_dir(self, path: str) -> None:
        if is_local(path):
            return _LOCAL.delete_dir(path)
        self._call(f"deleting {path}", lambda: self.inner.delete_dir(path))

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        if is_local(path):
            return _LOCAL.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)
        self._call(
            f"emptying {path}",
            lambda: self.inner.delete_dir_contents(path, missing_dir_ok=missing_dir_ok),
        )

    def delete_root_dir_contents(self) -> None:
        raise OSError("astune never empties the root of object storage")

    def delete_file(self, path: str) -> None:
        if is_local(path):
            return _LOCAL.delete_file(path)
        self._call(f"deleting {path}", lambda: self.inner.delete_file(path))

    def move(self, src: str, dest: str) -> None:
        if is_local(src) and is_local(dest):
            return _LOCAL.move(src, dest)
        self._call(f"moving {src}", lambda: self.inner.move(src, dest))

    def copy_file(self, src: str, dest: str) -> None:
        if is_local(src) and not is_local(dest):
            return self.upload(src, dest)
        if not is_local(src) and is_local(dest):
            return self.download(src, dest)
        if is_local(src):
            return _LOCAL.copy_file(src, dest)
        self._call(f"copying {src}", lambda: self.inner.copy_file(src, dest))

    def open_input_stream(self, path: str) -> NativeFile:
        return _LOCAL.open_input_stream(path) if is_local(path) else self._downloaded(path)

    def open_input_file(self, path: str) -> NativeFile:
        return _LOCAL.open_input_file(path) if is_local(path) else self._downloaded(path)

    def open_output_stream(self, path: str, metadata: Any = None) -> NativeFile:
        if is_local(path):
            return _LOCAL.open_output_stream(path, metadata=metadata)
        return pa.PythonFile(_UploadOnClose(self, path, metadata), mode="w")

    def open_append_stream(self, path: str, metadata: Any = None) -> NativeFile:
        raise OSError(f"cannot append to {path}: object storage has no append")

    # ------------------------------------------------------------------------ transfers
    def upload(self, local: str, path: str, metadata: Any = None) -> None:
        """The local file ``local`` written whole to ``path`` (tried again whole)."""

        def upload() -> None:
            with open(local, "rb") as source, self.inner.open_output_stream(path, metadata) as out:
                shutil.copyfileobj(source, out, _CHUNK_BYTES)

        with self._transfers:
            self._call(f"writing {path}", upload)

    def download(self, path: str, local: str) -> None:
        """``path`` read whole into the local file ``local`` (tried again whole)."""

        def download() -> None:
            with self.inner.open_input_stream(path) as source, open(local, "wb") as target:
                while chunk := source.read(_CHUNK_BYTES):
                    target.write(chunk)

        with self._transfers:
            self._call(f"reading {path}", download)

    def _downloaded(self, path: str) -> NativeFile:
        """``path`` downloaded to a local temporary file, opened for reading."""
        local = _temporary_file("astune-download-")
        try:
            self.download(path, local)
            return pa.OSFile(local, "rb")
        finally:
            os.unlink(local)  # the open file stays readable


def checkpoint_filesystem(storage: pafs.FileSystem) -> pafs.FileSystem:
    """The filesystem to hand Ray a local checkpoint folder on: ``storage`` itself when it is
    this retrying one (its uploads then keep their errors, see above), else the local disk."""
    if isinstance(storage, pafs.PyFileSystem) and isinstance(storage.handler, RetryingHandler):
        return storage
    return _LOCAL


def _rebuild(inner: pafs.FileSystem, timeout_s: float, where: str) -> RetryingHandler:
    return RetryingHandler(inner, timeout_s=timeout_s, where=where)


def _temporary_file(prefix: str) -> str:
    handle, local = tempfile.mkstemp(prefix=prefix)
    os.close(handle)
    return local


class _UploadOnClose:
    """A writable file object collecting into a local temporary file, uploaded when closed.
    Written through ``copy_files`` an error on close is dropped by pyarrow: it is logged here
    too, so that it is never silent."""

    def __init__(self, handler: RetryingHandler, path: str, metadata: Any) -> None:
        self._handler, self._path, self._metadata = handler, path, metadata
        self._local = _temporary_file("astune-upload-")
        self._file = open(self._local, "wb")  # noqa: SIM115 (closed in close())
        self.closed = False

    def write(self, data: bytes) -> int:
        return self._file.write(data)

    def tell(self) -> int:
        return self._file.tell()

    def flush(self) -> None:
        self._file.flush()

    def writable(self) -> bool:
        return True

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self._file.close()
            self._handler.upload(self._local, self._path, self._metadata)
        except OSError as err:
            logger.error("%s was not written: %s", self._path, str(err).splitlines()[0])
            raise
        finally:
            os.unlink(self._local)

"""The search's storage path as Ray gets it: an ``s3://`` one through a filesystem whose calls
wait out an outage for up to ``--storage-timeout`` seconds (:mod:`astune.store.storage_retry`),
anything else as Ray resolves it.

Past the bound a call raises ``StorageUnreachableError`` (one line, naming the storage and the
bound): the trial fails and Ray's failure config retries it. Other errors (a missing key, access
denied) are raised at once. Ray-free and torch-free (pyarrow only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from astune._checks import check_range
from astune.store.storage_retry import DEFAULT_STORAGE_TIMEOUT

if TYPE_CHECKING:
    from pyarrow import fs as pafs


def storage_filesystem(
    path: str, *, timeout_s: float = DEFAULT_STORAGE_TIMEOUT
) -> tuple[pafs.FileSystem | None, str]:
    """``(filesystem, path on it)`` for Ray's ``storage_filesystem`` and ``storage_path``.

    An ``s3://`` URI (with its query options, or ``AWS_ENDPOINT_URL``) gets the retrying
    filesystem; anything else ``(None, path)``: Ray resolves it as it always does (a local
    folder's errors will not go away by waiting).
    """
    check_range("storage_timeout", timeout_s, 0.0)
    if not path.startswith("s3://"):
        return None, path
    from pyarrow import fs

    from astune._private import s3_options
    from astune.store.storage_handler import RetryingHandler

    plain, fs_path = fs.FileSystem.from_uri(path)
    # Written synchronously: an upload must not wait on pyarrow's IO threads, which Ray's
    # copy_files may be holding (https://github.com/apache/arrow/issues/32372).
    inner = fs.S3FileSystem(**{**s3_options(plain), "background_writes": False})
    handler = RetryingHandler(inner, timeout_s=timeout_s, where=path.split("?", 1)[0])
    return fs.PyFileSystem(handler), fs_path

"""The retrying filesystem of an ``s3://`` storage path against a real ``moto_server``, reached
through a TCP proxy process that the tests kill (the network gone) and start again on the same
port (the network back, the server's objects kept). No Ray: the search under such an outage is
``test_storage_outage.py``."""

from __future__ import annotations

import logging
import os
import pickle
import sys
import threading
from pathlib import Path

import pytest
from cluster_processes import S3_CREDENTIALS, Processes, await_s3, start_s3, wait_for
from ports import free_port
from pyarrow import fs

from astune.store.object_storage import storage_filesystem
from astune.store.storage_handler import RetryingHandler, checkpoint_filesystem
from astune.store.storage_retry import StorageUnreachableError, is_transient

pytestmark = pytest.mark.cluster

BUCKET = "astune-storage"
PROXY = Path(__file__).with_name("tcp_proxy.py")


class Network:
    """``moto_server`` behind a proxy; ``cut()`` and ``mend()`` the proxy."""

    def __init__(self, procs: Processes) -> None:
        self.procs, self.port, self.server_port = procs, free_port(), free_port()

    def mend(self) -> None:
        argv = [sys.executable, str(PROXY), str(self.port), str(self.server_port)]
        self.procs.start("proxy", argv)
        wait_for(self._answers, "the proxy", timeout=30, every=0.1)

    def cut(self) -> None:
        self.procs.end_group(self.procs.named["proxy"])

    def _answers(self) -> bool:
        import socket

        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False


@pytest.fixture(scope="module")
def network(tmp_path_factory):
    root = tmp_path_factory.mktemp("object-storage")
    procs = Processes(root, dict(os.environ))
    net = Network(procs)
    with pytest.MonkeyPatch.context() as patch:
        for key, value in S3_CREDENTIALS.items():
            patch.setenv(key, value)
        patch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{net.port}")  # read by pyarrow
        try:
            endpoint = start_s3(procs, net.server_port)
            net.mend()
            await_s3(endpoint, BUCKET)
            yield net
        finally:
            procs.end_all()


def checkpoint_folder(root: Path) -> Path:
    """A folder as Ray uploads one: a binary file and a file in a subfolder."""
    (root / "sub").mkdir(parents=True)
    (root / "weights.bin").write_bytes(os.urandom(3 * 2**20))
    (root / "sub" / "state.json").write_text('{"step": 3}')
    return root


def test_a_local_storage_path_is_left_to_ray(tmp_path):
    assert storage_filesystem(str(tmp_path), timeout_s=5) == (None, str(tmp_path))


def test_ray_gets_a_checkpoint_on_the_retrying_filesystem_only():
    """Through the retrying filesystem a checkpoint's upload errors reach the trial; any other
    storage (a local folder, an s3 filesystem Ray made) takes it from the local disk."""
    s3 = fs.S3FileSystem(endpoint_override="http://127.0.0.1:9", scheme="http")
    retrying = fs.PyFileSystem(RetryingHandler(s3, timeout_s=1, where="s3://b/p"))
    assert checkpoint_filesystem(retrying) is retrying
    for other in (fs.LocalFileSystem(), s3):
        assert isinstance(checkpoint_filesystem(other), fs.LocalFileSystem)


def test_only_errors_that_waiting_may_cure_are_retried():
    refused = OSError(
        "When testing for existence of bucket 'b': AWS Error NETWORK_CONNECTION during "
        "HeadBucket operation: curlCode: 7, Could not connect to server"
    )
    denied = OSError("When reading 'b/k': AWS Error ACCESS_DENIED during GetObject operation")
    assert is_transient(refused) and not is_transient(denied)
    assert not is_transient(FileNotFoundError("[Errno 2] Path does not exist 'b/k'"))


def test_uploads_during_an_outage_wait_for_the_storage_and_arrive_whole(network, tmp_path, caplog):
    filesystem, root = storage_filesystem(f"s3://{BUCKET}/searches", timeout_s=60)
    assert root == f"{BUCKET}/searches"
    filesystem = pickle.loads(pickle.dumps(filesystem))  # as Ray hands it to a trial
    source = checkpoint_folder(tmp_path / "source")
    fs.copy_files(str(source), f"{root}/checkpoint_000000", destination_filesystem=filesystem)

    network.cut()
    mend = threading.Timer(4.0, network.mend)  # pyarrow alone gives up after 1-2 s
    mend.start()
    with caplog.at_level(logging.WARNING, logger="astune.store.storage_retry"):
        # as Ray uploads a trial's checkpoint: from the local folder through the same filesystem
        fs.copy_files(
            str(source),
            f"{root}/checkpoint_000001",
            source_filesystem=filesystem,
            destination_filesystem=filesystem,
        )
    mend.join()
    said = [r.getMessage() for r in caplog.records]
    assert any(f"object storage s3://{BUCKET}/searches unreachable while" in m for m in said)
    assert any("reachable again" in m for m in said), said

    back = tmp_path / "back"
    fs.copy_files(f"{root}/checkpoint_000001", str(back), source_filesystem=filesystem)
    for name in ("weights.bin", "sub/state.json"):
        assert (back / name).read_bytes() == (source / name).read_bytes()
    with pytest.raises(FileNotFoundError):  # not an outage: raised at once, nothing waited
        filesystem.open_input_stream(f"{root}/checkpoint_000001/missing").read()
    assert not [r for r in caplog.records if "missing" in r.getMessage()]


def test_past_the_bound_a_call_fails_with_one_line_naming_the_storage(network, tmp_path):
    filesystem, root = storage_filesystem(f"s3://{BUCKET}/searches", timeout_s=2)
    source = checkpoint_folder(tmp_path / "source")
    network.cut()
    try:
        with pytest.raises(StorageUnreachableError) as raised:  # the folder, as Ray copies it
            fs.copy_files(str(source), f"{root}/ck", filesystem, filesystem)
        with pytest.raises(StorageUnreachableError) as written:  # one file: the upload itself
            fs.copy_files(str(source / "weights.bin"), f"{root}/w", filesystem, filesystem)
    finally:
        network.mend()
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"object storage s3://{BUCKET}/searches unreachable for 2 s ")
    assert "(--storage-timeout)" in message and "NETWORK_CONNECTION" in message
    assert f"while writing {root}/w:" in str(written.value)
    with filesystem.open_output_stream(f"{root}/after") as out:  # the storage is back
        out.write(b"ok")
    assert filesystem.open_input_stream(f"{root}/after").read() == b"ok"

"""A real S3-compatible server on 127.0.0.1 for the object storage tests: moto's standalone
server (``moto[server]``, from PyPI) in a thread of the test process, on a free port.

Requests are signed and checked: before authentication is switched on, an IAM user with an
allow-all policy and its access key are created; afterwards only that key is accepted (a wrong
key gets InvalidAccessKeyId, as from AWS).  :func:`s3_server` stops exactly the server it started.
"""

from __future__ import annotations

import json
import os
import socket
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class S3:
    endpoint: str  # http://127.0.0.1:PORT
    access_key: str
    secret_key: str

    def options(self) -> dict[str, str]:
        """The ``fs.s3.*`` options of the data sources for this server."""
        return {"fs.s3.endpoint": self.endpoint, "fs.s3.accessKey": self.access_key,
                "fs.s3.secretKey": self.secret_key, "fs.s3.region": "us-east-1"}

    def filesystem(self):  # -> pyarrow.fs.S3FileSystem
        from pyarrow import fs

        return fs.S3FileSystem(endpoint_override=self.endpoint.removeprefix("http://"), scheme="http",
                               access_key=self.access_key, secret_key=self.secret_key, region="us-east-1",
                               allow_bucket_creation=True)

    def upload(self, local: Path, url: str) -> str:
        """Copy the directory tree ``local`` to ``s3://bucket/prefix`` (``url``); returns ``url``."""
        from pyarrow import fs

        s3 = self.filesystem()
        key = url.removeprefix("s3://").rstrip("/")
        bucket = key.split("/", 1)[0]
        if s3.get_file_info(bucket).type == fs.FileType.NotFound:
            s3.create_dir(bucket)
        for root, _dirs, files in os.walk(local, followlinks=True):
            for name in files:
                p = Path(root) / name
                rel = p.relative_to(local).as_posix()
                with s3.open_output_stream(f"{key}/{rel}") as out:
                    out.write(p.read_bytes())
        return url


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def s3_server() -> Iterator[S3]:
    moto_server = pytest.importorskip("moto.server", reason="moto[server] (the test extra) is not installed")
    boto3 = pytest.importorskip("boto3")
    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        # moto keeps its state per process: a server started earlier in this test process left
        # users and buckets behind; start from nothing
        urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", data=b"", method="POST")).read()
        iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1",
                           aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap")
        iam.create_user(UserName="mqstore-test")
        iam.put_user_policy(UserName="mqstore-test", PolicyName="all", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="mqstore-test")["AccessKey"]
        # from now on every request must be signed by a known key
        urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset-auth", data=b"0", method="POST",
                                                      headers={"Content-Type": "text/plain"})).read()
        yield S3(endpoint, key["AccessKeyId"], key["SecretAccessKey"])
    finally:
        server.stop()
        from moto import settings

        settings.INITIAL_NO_AUTH_ACTION_COUNT = float("inf")  # (the server ran in this process)

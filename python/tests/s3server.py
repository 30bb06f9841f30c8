"""moto's S3 server on loopback for the Python tests (``test_remote.py``) and the ``python s3``
blocks of the docs (``test_docs.py``): started from the test venv (the Makefile installs
``moto[server]``), stokehold pointed at it, and a boto3 client as the independent side."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict

import stokehold as sh

KEYS = {"aws_region": "us-east-1", "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing"}


def _bin() -> str:
    here = Path(sys.executable).parent / "moto_server"
    found = str(here) if here.exists() else shutil.which("moto_server")
    if found is None:
        raise RuntimeError("moto_server not found: `make test` installs moto[server] into .venv")
    return found


class Moto:
    """A running moto_server; ``stop()`` kills it."""

    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.proc = subprocess.Popen([_bin(), "-H", "127.0.0.1", "-p", str(port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.endpoint = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"moto_server did not start (exit {self.proc.poll()})") from None
                time.sleep(0.1)
        # Every store opened from now on reaches this server.
        sh.set_storage_options({"aws_endpoint": self.endpoint, **KEYS})

    def env(self) -> Dict[str, str]:
        """The environment variables a user would set for this endpoint."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_REGION": KEYS["aws_region"],
                "AWS_ACCESS_KEY_ID": KEYS["aws_access_key_id"],
                "AWS_SECRET_ACCESS_KEY": KEYS["aws_secret_access_key"], "AWS_ALLOW_HTTP": "true"}

    def client(self) -> Any:
        import boto3  # installed with moto[server]

        return boto3.client("s3", endpoint_url=self.endpoint, region_name=KEYS["aws_region"],
                            aws_access_key_id=KEYS["aws_access_key_id"],
                            aws_secret_access_key=KEYS["aws_secret_access_key"])

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()

"""Fixtures shared by integration tests: a real `transformers serve` process on loopback, and an
rclpy context of a test's own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest
from serving import free_port

from r3.reasoning.tiny import build_tiny_model
from r3.workers import die_with_parent


def _serve_command() -> list[str]:
    exe = Path(sys.executable).with_name("transformers")
    return [str(exe)] if exe.exists() else [shutil.which("transformers") or "transformers"]


@contextmanager
def transformers_serve(model_dir: Path, log_path: Path):
    """`transformers serve MODEL_DIR` on a free loopback port (CPU, float32, offline) for the block;
    yields its /v1 URL. The positional argument preloads the folder, and requests name it as the model."""
    port = free_port()
    with open(log_path, "w+") as log:
        proc = subprocess.Popen(
            [*_serve_command(), "serve", str(model_dir), "--host", "127.0.0.1", "--port", str(port)]
            + ["--device", "cpu", "--dtype", "float32"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
            preexec_fn=die_with_parent,  # noqa: PLW1509  (a killed test run must not leave its server)
        )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(url + "/health", timeout=1).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.kill()
                    log.seek(0)
                    pytest.fail(f"transformers serve did not start:\n{log.read()[-3000:]}")
                time.sleep(0.5)
        try:
            yield f"{url}/v1"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """A tiny random idefics3 served by `transformers serve`: (its /v1 URL, the model's name)."""
    model_dir = build_tiny_model("idefics3", tmp_path_factory.mktemp("serve") / "idefics3")
    with transformers_serve(model_dir, tmp_path_factory.mktemp("serve-log") / "serve.log") as url:
        yield url, str(model_dir)


@pytest.fixture
def context(private_ros_env):
    """An rclpy context on a private ROS domain, for a test that makes its nodes in this process."""
    import rclpy

    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=int(private_ros_env(in_process=True)["ROS_DOMAIN_ID"]))
    yield ctx
    rclpy.try_shutdown(context=ctx)

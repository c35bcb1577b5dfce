"""A spec's device= and dtype= reach the loaded model wherever a reasoner is built: the reasoner node
(its ``backend`` parameter), the `r3 eval` worker and the `r3 collect` worker; and `r3 run` refuses
a bad spec in one line before any node starts. Tiny random model on cpu, in bfloat16 (not the
float32 that "auto" picks on cpu), so the dtype seen proves the option arrived."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from r3.reasoning.tiny import build_tiny_model

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def spec(tmp_path_factory) -> str:
    tiny = build_tiny_model("idefics3", tmp_path_factory.mktemp("tiny") / "idefics3")
    return f"transformers:{tiny},device=cpu,dtype=bfloat16,max_new_tokens=8,temperature=0"


def assert_bfloat16_on_cpu(backend) -> None:
    import torch

    assert backend.model.dtype == torch.bfloat16
    assert {p.device.type for p in backend.model.parameters()} == {"cpu"}
    assert backend.max_new_tokens == 8 and backend.temperature == 0


@pytest.mark.ros
def test_the_reasoner_node_loads_the_model_its_backend_parameter_describes(spec, private_ros_env):
    import rclpy

    from r3_reasoner_node.main import ReasonerNode

    # A domain of its own: this process's DDS participant outlives rclpy.shutdown(), and its RunTask
    # server would look like a running graph to the `r3 run` of the test after this one.
    domain = int(private_ros_env(in_process=True)["ROS_DOMAIN_ID"])
    rclpy.init(args=["--ros-args", "-p", f"backend:={spec}"], domain_id=domain)
    try:
        node = ReasonerNode()
        assert node.get_parameter("backend").value == spec
        assert_bfloat16_on_cpu(node.backend)
        node.destroy_node()
    finally:
        rclpy.try_shutdown()


def test_the_eval_worker_loads_the_model_its_reasoner_spec_describes(spec):
    from r3.eval.runner import EpisodeWorker, EvalConfig

    assert_bfloat16_on_cpu(EpisodeWorker(EvalConfig(reasoner=spec, tasks=("V",), scenes=1, trials=1)).backend)


def test_the_collect_worker_loads_the_model_its_backend_spec_describes(spec, tmp_path):
    from r3.data import collect

    config = collect.CollectConfig(out=str(tmp_path), backend=spec, scenes=1, trials=1, max_steps=1)
    collect.run_one(collect.EpisodeSpec("V", 0, 0, 3), config)
    assert_bfloat16_on_cpu(collect._WORKER["backend"])


@pytest.mark.ros
def test_r3_run_refuses_an_unknown_key_before_any_node_starts(spec, tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "r3.cli",
            "run",
            "--quiet",
            "--out",
            str(tmp_path),
            "--set",
            f"r3_reasoner_node.backend={spec},colour=red",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "unknown key 'colour'; valid keys: device, dtype" in errors[0], done.stderr
    assert not (Path(tmp_path) / "logs").exists()  # the graph was never started

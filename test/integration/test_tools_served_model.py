"""ZAP's pose tools through the graph, decided by a real model behind a real `transformers serve`.

A random tiny model never ends its answer, so the parser refuses every one as truncated before the tool
grammar reads it. So the model here is a tiny idefics3 built from scratch and trained for 80 SFT steps
(the CPU recipe of ``config/train/sft_tiny_cpu.yaml``) on the first four turns of a mined expert tools
episode of task 1, and run on task 4. It writes answers in the tools format, some of which end and
some of which are its own garbled calls. The test asks what a client of any model needs: calls reach
the tool grammar, every refusal names its kind and reason, only accepted calls are carried out, the
joints do not move while a refusal stands, and the run ends cleanly (the step limit, or the guard after
three refusals in a row).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import transformers_serve

from r3.data.bags import COMPLETE, INCOMPLETE, read_episode_info, read_messages
from r3.data.turns import record_packing_episode
from r3.graph import names
from r3.instructions.tools import ToolErrorKind
from r3.reasoning.backends import make_backend
from r3.reasoning.tiny import build_tiny_model
from r3.safety.guard import MAX_CONSECUTIVE_INVALID
from r3.train.config import SFTConfig, load_config
from r3.train.mining import mine
from r3.train.sft import run_sft

pytestmark = [pytest.mark.ros, pytest.mark.slow]
CONFIGS = Path(__file__).resolve().parents[2] / "config" / "train"
STEPS = 6
#: What a refused answer of this model may say: the tool grammar's own kinds (inside
#: instruction_outside_grammar's reason), or an answer-level refusal of its text.
TOOL_KINDS = tuple(f"{k.value}:" for k in ToolErrorKind)
GUARD_ENDED = f"error: {MAX_CONSECUTIVE_INVALID} consecutive invalid reasoner outputs"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(the /v1 URL, the model's name) of the trained tiny model under `transformers serve`."""
    root = tmp_path_factory.mktemp("tools-model")
    expert = make_backend("expert")
    record_packing_episode("1", 0, expert, root / "episodes", interface="tools")  # run on task 4
    mine(root / "episodes", root / "mined")
    over = {
        "model": str(build_tiny_model("idefics3", root / "tiny", seed=0, hidden=128)),
        "dataset": str(root / "mined"),
        "output_dir": str(root / "sft"),
        "max_rows": 4,  # task 1's first four calls: update_todo, change_query, move_to, set_gripper
        "max_steps": 80,
        "learning_rate": 3.0e-3,
    }
    checkpoint = run_sft(load_config(CONFIGS / "sft_tiny_cpu.yaml", SFTConfig, over))
    with transformers_serve(checkpoint, root / "serve.log") as url:
        yield url, str(checkpoint)


def test_a_served_model_s_tool_calls_reach_the_tool_grammar_and_bad_ones_move_nothing(
    served, tmp_path, private_ros_env
):
    url, model = served
    reasoner = f"openai:{url},model={model},max_new_tokens=128,temperature=0"
    run = subprocess.run(
        [sys.executable, "-m", "r3.cli", "run", "--quiet", "--video", "none", "--out", str(tmp_path)]
        + ["--suite", "packing", "--task", "4", "--seed", "0", "--interface", "tools"]
        + ["--max-steps", str(STEPS), "--reasoner", reasoner],
        capture_output=True,
        text=True,
        timeout=420,
        env=private_ros_env(),
        check=False,
    )
    assert "outcome:" in run.stdout, run.stdout + run.stderr
    bag = Path(re.search(r"^bag:\s+(\S+)$", run.stdout, re.MULTILINE).group(1))
    info = read_episode_info(bag)  # an episode the guard ends is kept, marked incomplete
    assert info.reason == "step_budget" or info.reason.startswith(GUARD_ENDED), info
    assert info.status == (INCOMPLETE if info.reason.startswith("error") else COMPLETE), info
    by_topic: dict[str, list] = {}
    for topic, _, received, msg in read_messages(bag):  # in the order the recorder received them
        by_topic.setdefault(topic, []).append((received, msg))
    steps = [msg for _, msg in by_topic[names.REASONER_STEPS]]
    print("\n" + "\n".join(f"{s.valid} {s.raw_response!r} -> {s.error or s.instruction}" for s in steps))
    assert steps and all(f"@{url}" in s.model_id and s.completion_tokens > 0 for s in steps), steps
    refused = [s for s in steps if not s.valid]
    # Calls reached the tool grammar: accepted ones, or ones it refused with its own kind and reason.
    read_by_grammar = [s for s in steps if s.valid or any(k in s.error for k in TOOL_KINDS)]
    assert read_by_grammar, [s.error for s in steps]
    # Every refusal says why, as the grammar's kind or as the answer's (no call section, two of them).
    assert all(re.fullmatch(r"[a-z_]+: .+", s.error, re.DOTALL) for s in refused), [s.error for s in refused]
    # Only the accepted calls were carried out, and the arm did not move while a refusal stood.
    outcomes = by_topic.get(names.INSTRUCTION_OUTCOMES, [])
    assert len(outcomes) == len(steps) - len(refused), ([o.outcome for _, o in outcomes], steps)
    _assert_still_after_refusals(by_topic)


def _assert_still_after_refusals(by_topic: dict) -> None:
    """The joints recorded between a refused step and the next step are where they were before it."""
    joints = [(t, np.asarray(msg.position)) for t, msg in by_topic[names.JOINT_STATES]]
    steps = by_topic[names.REASONER_STEPS]
    ends = [t for t, _ in steps[1:]] + [2**63]
    for (start, step), end in zip(steps, ends):
        if step.valid:
            continue
        before = [q for t, q in joints if t < start][-1:]
        during = [q for t, q in joints if start <= t < end]
        assert all(np.array_equal(q, before[0]) for q in during), f"the arm moved after step {step.step}"

"""r3_suite_sim_node under bad calls: each is refused with a reason and moves nothing, and the node
keeps serving (the toy suite of test/suites/toy, found through its entry point as a user's package
would be)."""

from __future__ import annotations

import os
import time

import pytest
from hostile import Client, own_domain
from suites.toy import SUITE, entry_point_env

from r3.graph import names
from r3.graph.description import Member, Profile
from r3.graph.supervisor import Supervisor

pytestmark = [pytest.mark.ros, pytest.mark.slow]


def test_bad_resets_and_instructions_are_refused_with_a_reason_and_move_nothing(tmp_path):
    from rclpy.action import ActionClient

    from r3_msgs.action import FollowInstruction
    from r3_msgs.msg import PrivilegedState
    from r3_msgs.srv import ResetScene
    from r3_ros.qos import LATCHED

    domain = own_domain()
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain)) | entry_point_env(tmp_path / "site")
    sim = Member("r3_suite_sim_node", "r3", "r3_suite_sim_node", {"suite": SUITE.name})
    client = Client("r3_suite_sim_test_client", domain)
    states: list = []
    client.node.create_subscription(PrivilegedState, names.PRIVILEGED_STATE, states.append, LATCHED)
    reset = client.node.create_client(ResetScene, names.RESET_SCENE)
    follow = ActionClient(client.node, FollowInstruction, names.FOLLOW_INSTRUCTION)

    def reset_scene(**fields):
        return client.call(reset, ResetScene.Request(**{"suite": SUITE.name, "episode_id": "e1", **fields}))

    def instruct(text: str, **fields):
        goal = FollowInstruction.Goal(instruction=text, **{"suite": SUITE.name, **fields})
        return client.action(follow, goal)

    def wait_for_states(arrived, timeout_s: float = 30.0) -> list:
        """The states received once one of them is ``arrived`` (within ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        while not any(arrived(s) for s in states) and time.monotonic() < deadline:
            client.spin(0.05)
        assert any(arrived(s) for s in states), states
        return states

    with Supervisor(Profile("toy_sim", "", [sim]), tmp_path / "logs", env=env) as supervisor:
        try:
            before = instruct("step right")
            assert (before.success, before.reason) == (
                False,
                "error: invalid goal: no scene has been reset yet",
            )
            refused = {
                "another suite": reset_scene(suite="language_table", task="reach"),
                "an unknown task": reset_scene(task="fly"),
                "a negative seed": reset_scene(task="reach", seed=-1),
            }
            for what, answer in refused.items():
                assert not answer.ok and answer.reason, what
            assert "is not simulated" in refused["another suite"].reason
            assert "unknown toy_line task 'fly'" in refused["an unknown task"].reason
            assert reset_scene(task="reach", seed=1).goal == "move the marker to cell 3"
            bad = {
                "outside the grammar": instruct("step forward"),
                "two instructions": instruct("step right step right"),
                "unicode": instruct("step rïght"),
                "another suite": instruct("step right", suite="packing"),
                "another interface": instruct("step right", interface="tools"),
                "a negative seed": instruct("step right", seed=-3),
            }
            for what, result in bad.items():
                assert not result.success and result.steps == 0 and result.reason, what
            assert bad["outside the grammar"].reason.startswith("parse_error: not a number-line instruction")
            assert "interface 'tools' is not served here" in bad["another interface"].reason

            done = instruct("STEP right")  # the node keeps serving
            assert (done.success, done.reason, done.steps) == (True, "done", 1)
            # The state of that one step: the marker one cell on (progress 1/3 of the way to cell 3),
            # so no refused call moved it; and every state is of the one scene reset.
            after = wait_for_states(lambda s: s.header.stamp == done.finished)
            assert next(s for s in after if s.header.stamp == done.finished).progress == pytest.approx(1 / 3)
            assert {(s.episode_id, s.task_instance_json) for s in after} == {("e1", '{"goal_cell": 3}')}
            assert supervisor.poll() is None
        finally:
            client.close()

"""The low-level node acts on the simulator's states only: the participant that both publishes states
and subscribes to the pusher commands. Found by a hostile client over DDS: any publisher on
``/sim/privileged/state`` steered the scripted policy, and one forged state sent between
instructions became the next instruction's first state."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from r3.graph import names

pytestmark = [pytest.mark.ros, pytest.mark.slow]

#: Stamps of the forged states: later than any the probe simulator sends.
FORGED_NS = 10**15
STATE_TIMEOUT_S = 6.0
MAX_STEPS = 8
#: The node's watchdog on this probe's heartbeat, which is not what this test checks: the probe beats
#: from its own spin loop, in a test worker shared with other tests' threads, and one clean-clone run
#: under load ended the first instruction after 4 of 8 commands with "/r3_state_probe stopped
#: responding for 1.0 s" (the default). The watchdog itself: test_silent_nodes.py.
CLIENT_TIMEOUT_S = 5.0


def test_the_lowlevel_node_acts_on_the_simulators_states_only(private_ros_env):
    """This probe plays the simulator (it answers each command with a state stamped 1 ms after it)
    and the reasoner (its heartbeat). A forger in another process publishes states stamped far
    later, before the first goal and every 100 ms through both. Every command must be stamped with
    one of the probe's states (a command carries the stamp of the state it was decided on). Before
    the second goal the forger also subscribes to the commands, as the simulator does: the node
    keeps acting on the simulator it acted on before."""
    import rclpy
    from geometry_msgs.msg import Vector3Stamped
    from rclpy.action import ActionClient

    from r3.sim.language_table.env import LanguageTableEnv
    from r3_msgs.action import FollowInstruction
    from r3_msgs.msg import Heartbeat, PrivilegedState
    from r3_ros.conversions import board_state_to_msg, ns_to_stamp, stamp_to_ns
    from r3_ros.qos import HEARTBEAT, LATCHED

    env = private_ros_env(in_process=True)
    lowlevel = subprocess.Popen(
        [sys.executable, "-m", "r3_lowlevel_node.main", "--ros-args"]
        + ["-p", "reasoner_node:=/r3_state_probe", "-p", f"state_timeout_s:={STATE_TIMEOUT_S}"]
        + ["-p", f"client_timeout_s:={CLIENT_TIMEOUT_S}"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    rclpy.init(domain_id=int(env["ROS_DOMAIN_ID"]))
    node = rclpy.create_node("r3_state_probe")
    forger_context = rclpy.Context()  # another DDS participant, as another process would be
    rclpy.init(context=forger_context, domain_id=int(env["ROS_DOMAIN_ID"]))
    forger = rclpy.create_node("r3_state_forger", context=forger_context)
    board = LanguageTableEnv(width=64, height=48)
    board.reset(seed=5, options={"task": "T"})

    def state(stamp_ns: int, effector_x: float) -> PrivilegedState:
        msg = board_state_to_msg(board.state(), PrivilegedState())
        msg.header.stamp, msg.header.frame_id, msg.suite = ns_to_stamp(stamp_ns), "board", "language_table"
        msg.effector.x = effector_x
        return msg

    state_pub = node.create_publisher(PrivilegedState, names.PRIVILEGED_STATE, LATCHED)
    forged_pub = forger.create_publisher(PrivilegedState, names.PRIVILEGED_STATE, LATCHED)
    beat_pub = node.create_publisher(Heartbeat, names.HEARTBEAT, HEARTBEAT)
    sent, commands, forged = [10**9], [], [FORGED_NS]

    def answer(command: Vector3Stamped) -> None:
        commands.append(stamp_to_ns(command.header.stamp))
        sent.append(commands[-1] + 1_000_000)
        state_pub.publish(state(sent[-1], 0.3))

    node.create_subscription(Vector3Stamped, names.PUSHER_COMMAND, answer, 10)
    follow = ActionClient(node, FollowInstruction, names.FOLLOW_INSTRUCTION)

    def spin(seconds: float, until=lambda: False) -> None:
        end, beat = time.monotonic() + seconds, 0.0
        while time.monotonic() < end and not until():
            rclpy.spin_once(node, timeout_sec=0.005)
            rclpy.spin_once(forger, timeout_sec=0)
            if time.monotonic() - beat >= 0.1:
                beat_pub.publish(Heartbeat(node=node.get_fully_qualified_name(), state="busy"))
                forged.append(forged[-1] + 1_000_000)  # every 100 ms
                forged_pub.publish(state(forged[-1], -0.3))
                beat = time.monotonic()

    def follow_instruction() -> str:
        goal = FollowInstruction.Goal(
            instruction="move your arm to the top left corner",
            suite="language_table",
            max_steps=MAX_STEPS,
            seed=0,
        )
        accepted = follow.send_goal_async(goal)
        spin(30, accepted.done)
        assert accepted.done() and accepted.result().accepted
        result = accepted.result().get_result_async()
        spin(STATE_TIMEOUT_S + 10, result.done)
        assert result.done(), "no result"
        spin(0.5)  # a command after the result would arrive now
        return result.result().result.reason

    counts = []
    try:
        state_pub.publish(state(sent[0], 0.3))
        forged_pub.publish(state(forged[0], -0.3))
        assert follow.wait_for_server(timeout_sec=60), "the low-level node did not come up"
        spin(1.0)  # it hears both states and this probe's heartbeat
        reasons = [follow_instruction()]
        counts.append(len(commands))
        forger.create_subscription(Vector3Stamped, names.PUSHER_COMMAND, lambda _: None, 10)
        spin(30, lambda: node.count_subscribers(names.PUSHER_COMMAND) >= 2)
        reasons.append(follow_instruction())
        counts.append(len(commands) - counts[0])
    finally:
        node.destroy_node()
        forger.destroy_node()
        rclpy.shutdown()
        rclpy.shutdown(context=forger_context)
        lowlevel.terminate()
        lowlevel.wait(timeout=20)
    forged_commands = [c for c in commands if c >= FORGED_NS]
    assert not forged_commands, (
        f"{len(forged_commands)} of {len(commands)} commands decided on forged states",
        counts,
        reasons,
    )
    assert counts == [MAX_STEPS, MAX_STEPS] and set(commands) <= set(sent), (counts, reasons)


@pytest.mark.parametrize(
    "sources, listening, acted_on, chosen, why_not",
    [
        ([b"sim", b"forger"], {b"sim", b"recorder"}, b"", b"sim", ""),
        ([b"sim", b"forger"], {b"sim", b"forger"}, b"sim", b"sim", ""),
        ([b"new_sim", b"old_sim"], {b"new_sim"}, b"old_sim", b"new_sim", ""),  # a restarted simulator
        ([b""], {b"sim"}, b"", b"", ""),  # an rmw that gives no GUID: the count alone
        ([b"sim", b"forger"], {b"sim", b"forger"}, b"", None, "2 participants publish"),
        ([b"sim"], {b"recorder"}, b"", None, "no simulator subscribes"),
        ([], {b"sim"}, b"", None, "no state from the simulator"),
    ],
)
def test_choose_simulator(sources, listening, acted_on, chosen, why_not):
    from r3_lowlevel_node.main import choose_simulator

    got, why = choose_simulator(sources, listening, acted_on)
    assert got == chosen and why.startswith(why_not), why

"""The core rules behind issue 18's fixes, without a graph: goal validation and bag names, the
refusing callback wrapper, the pusher's refuse-never-clip rule, GroundPoint's label check, the
supervisor's member-exits file and the freeze watch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from r3.data.bags import EpisodeBagWriter, EpisodeInfo, check_bag_name
from r3.graph.supervisor import MemberExits, Supervisor
from r3.instructions.language_table import parse as parse_language_table
from r3.perception.pipeline import ANY_LABEL, LABEL_MISMATCH, Perception
from r3.perception.segmenters import Segment, Segmenter, make_segmenter
from r3.safety.freeze import FreezeWatch, GoalStop
from r3.safety.goals import (
    MAX_GOAL_CHARS,
    GoalRefused,
    canonical_task,
    check_instruction_goal,
    check_run_task,
    episode_id,
)
from r3.sim.language_table.env import LanguageTableEnv
from r3.tasks.language_table.board import BoardState


def run_task_goal(suite="language_table", task="V", seed=3, reasoning_budget=-1, goal=""):
    from r3_msgs.action import RunTask

    return RunTask.Goal(suite=suite, task=task, seed=seed, reasoning_budget=reasoning_budget, goal=goal)


@pytest.mark.parametrize(
    "fields, why",
    [
        ({"seed": -1}, "seed must be in 0.."),
        ({"task": "../../x"}, "unknown language_table task"),
        ({"task": "V" * 300}, "unknown language_table task"),
        ({"suite": "mars"}, "unknown suite"),
        ({"reasoning_budget": -2}, "reasoning_budget"),
        ({"suite": "packing"}, "unknown packing task"),
        ({"goal": "x" * 1_000_000}, "the goal is 1,000,000 characters long; at most 2,000"),
        ({"goal": "stack the blocks\x1b[2J"}, "the goal holds the control character U\\+001B at 16"),
        ({"goal": "line up \u202ethe blocks"}, "U\\+202E at 8"),
        ({"goal": "line\x00up"}, "U\\+0000 at 4"),
        # Found by a hostile user: direction marks and Unicode line breaks were taken.
        ({"goal": "line up\u200f the blocks"}, "U\\+200F at 7"),
        ({"goal": "line up\u2028the blocks"}, "U\\+2028 at 7"),
        ({"goal": "line up\u2029the blocks"}, "U\\+2029 at 7"),
    ],
)
def test_bad_run_task_fields_are_refused_with_the_reason(fields, why):
    with pytest.raises(GoalRefused, match=why):
        check_run_task(run_task_goal(**fields))


def test_a_goal_of_a_few_lines_in_any_script_is_accepted():
    goal = "把红色方块推到左边 🚀\n\tthen line up the rest, ça va"
    assert check_run_task(run_task_goal(goal=goal)) == ("language_table", "V")
    assert check_run_task(run_task_goal(goal="x" * MAX_GOAL_CHARS)) == ("language_table", "V")


@pytest.mark.parametrize(
    "fields, why",
    [
        ({"instruction": "push " * 100_000}, "the instruction is 500,000 characters long; at most 4,096"),
        ({"instruction": "push the red moon left\x07"}, "U\\+0007 at 22"),
        ({"suite": "packing"}, "suite 'packing' is not served here"),
        ({"seed": -1}, "seed must be in 0.."),
        ({"interface": "../x"}, "interface '../x' is not served here"),
    ],
)
def test_bad_follow_instruction_fields_are_refused_with_the_reason(fields, why):
    from r3_msgs.action import FollowInstruction

    fields = {"instruction": "push the red moon left", "suite": "language_table", **fields}
    goal = FollowInstruction.Goal(**fields)
    with pytest.raises(GoalRefused, match=why):
        check_instruction_goal(goal, "language_table", served=("instruction",))


def test_an_instruction_goal_without_a_suite_is_for_the_default_suite():
    from r3_msgs.action import FollowInstruction

    goal = FollowInstruction.Goal(instruction="push the red moon left")
    assert check_instruction_goal(goal, "language_table", served=("instruction",)) == "instruction"
    with pytest.raises(GoalRefused, match="suite '' is not served here"):
        check_instruction_goal(goal, "packing", served=("instruction",))


def test_a_parse_error_names_a_few_of_many_repeated_words_not_all():
    reason = parse_language_table("push " * 1000).reason
    assert reason == "more than one instruction (verbs 'push', 'push', 'push' and 997 more)"


def test_episode_ids_come_from_canonical_tasks_and_are_plain_folder_names():
    assert check_run_task(run_task_goal(suite="", reasoning_budget=0)) == ("language_table", "V")
    assert canonical_task("packing", "task4") == "4"
    for task in ("V", "clear_qtr", "iL"):
        name = episode_id(task, 2**63 - 1)
        assert check_bag_name(name) == name and name.startswith(f"{task}-s{2**63 - 1}-")


@pytest.mark.parametrize("bad", ["../../x", "/tmp/abs", "", ".hidden", "-x", "a/b", "V\0", "x" * 129, "é"])
def test_the_bag_writer_refuses_an_episode_id_that_is_not_a_plain_folder_name(tmp_path, bad):
    root = tmp_path / "bags"
    with pytest.raises(ValueError, match="not a plain folder name"):
        EpisodeBagWriter(root, EpisodeInfo(episode_id=bad))
    assert not root.exists() and list(tmp_path.iterdir()) == []


class _Logger:
    def __init__(self):
        self.errors = []

    def error(self, text, **_):
        self.errors.append(text)


def _node():
    logger = _Logger()
    return SimpleNamespace(get_logger=lambda: logger), logger


def test_an_exception_in_a_callback_becomes_a_refusal_carrying_its_message():
    from r3_msgs.action import FollowInstruction
    from r3_msgs.srv import ResetScene
    from r3_ros.refusals import refusing_action, refusing_message, refusing_service

    node, logger = _node()

    def boom(*_):
        raise RuntimeError("seed out of range")

    response = refusing_service(node, boom)(ResetScene.Request(), ResetScene.Response())
    assert not response.ok and response.reason == "error: RuntimeError: seed out of range"
    ended = []
    result = refusing_action(node, boom, FollowInstruction.Result, lambda h, o: ended.append(o))(object())
    assert (
        result.reason == "error: RuntimeError: seed out of range"
        and not result.success
        and ended == ["aborted"]
    )
    assert refusing_message(node, boom)(object()) is None
    assert len(logger.errors) == 3 and all("seed out of range" in e for e in logger.errors)


@pytest.fixture(scope="module")
def env():
    e = LanguageTableEnv()
    yield e
    e.close()


@pytest.mark.parametrize("bad", [[0.5, 0.0], [0.0, -0.0301], [np.nan, 0.0]])
def test_out_of_range_actions_are_refused_counted_and_change_nothing(env, bad):
    env.reset(seed=0)
    before, refused = env.snapshot(), env.refused_actions
    with pytest.raises(ValueError, match="refused"):
        env.step(np.array(bad))
    assert env.snapshot() == before and env.refused_actions == refused + 1


def test_an_action_off_the_board_is_named_by_off_board_and_stopped_at_the_edge_by_step(env):
    env.reset(seed=0)
    env.set_state(BoardState(blocks={}, pusher=(0.0, -0.17)))  # 1.8 cm from the lower edge
    off = np.array([0.0, -0.025])
    assert "off the reachable board area" in env.off_board(off)
    assert env.off_board(np.array([0.0, 0.025])) == ""
    stops = env.edge_stops
    *_, info = env.step(off)
    assert info["stopped_at_edge"] and env.edge_stops == stops + 1
    assert env.state().pusher[1] == pytest.approx(-0.188, abs=0.003)


def test_the_scripted_policy_never_commands_the_pusher_off_the_board(env):
    from r3.instructions.language_table import parse
    from r3.lowlevel.pushing import PushingPolicyConfig, ScriptedPushingPolicy

    policy, commands = ScriptedPushingPolicy(PushingPolicyConfig()), 0
    for seed in range(6):
        env.reset(seed=seed)
        for instruction in (
            "move your arm to the bottom left corner",
            "push the red moon to the bottom side",
        ):
            policy.reset(parse(instruction), env.state(), np.random.default_rng(seed))
            while (action := policy.act(env.state())) is not None:
                assert env.off_board(action) == ""
                env.step(action)
                commands += 1
    assert commands > 50


class _PointOnly(Segmenter):
    """A backend that reads no names (as sam2): every point lands on one square object."""

    def set_frame(self, frame) -> None:
        self.shape = frame.depth_m.shape

    def segment_point(self, col, row, label):
        mask = np.zeros(self.shape, bool)
        mask[100:140, 100:140] = True
        return Segment(label, mask, 1.0) if mask[row, col] else None


@pytest.mark.parametrize("label", ["unicorn", "", "   ", "x" * 100_000, "green box"])
def test_ground_point_refuses_a_label_that_names_nothing_at_the_point(tabletop_frame, label):
    frame = tabletop_frame
    p = Perception(make_segmenter("sim"))
    p.process(frame)
    red = next(i for i, n in frame.instance_names.items() if n == "red box")
    rows, cols = np.nonzero(frame.instances == red)
    u, v = [
        (c + 0.5) / s * 1000
        for c, s in ((cols[len(cols) // 2], frame.camera.width), (rows[len(rows) // 2], frame.camera.height))
    ]
    assert p.ground_point("red box", u, v, "pick", frame.stamp_ns).ok
    assert p.ground_point(ANY_LABEL, u, v, "pick", frame.stamp_ns).ok
    refused = p.ground_point(label, u, v, "pick", frame.stamp_ns)
    assert not refused.ok and refused.reason.startswith(LABEL_MISMATCH)


def test_a_backend_that_reads_no_names_grounds_only_the_queried_names(tabletop_frame):
    p = Perception(_PointOnly())
    assert p.set_query(["mug"]) == ""
    p.process(tabletop_frame)
    u, v = 120.5 / tabletop_frame.camera.width * 1000, 120.5 / tabletop_frame.camera.height * 1000
    refused = p.ground_point("unicorn", u, v, "pick", tabletop_frame.stamp_ns)
    assert refused.reason.startswith(LABEL_MISMATCH) and "not among the perceived names" in refused.reason
    assert not p.ground_point("mug", u, v, "pick", tabletop_frame.stamp_ns).reason.startswith(LABEL_MISMATCH)


@pytest.mark.parametrize(
    "label",
    ["mug\u202e", "m\u200bug", "mug\x1b[2J", "mug\u2028bowl", "mug\u2029bowl"],
    ids=["bidi", "zero_width", "escape", "line_separator", "paragraph_separator"],
)
def test_a_query_label_that_shows_one_name_and_is_another_is_refused(label):
    """Found by a hostile client: SetPerceptionQuery took a label with a right-to-left override (and
    one with a Unicode line or paragraph separator, which breaks a log line unseen)."""
    p = Perception(_PointOnly())
    assert p.set_query(["mug"]) == ""
    assert p.set_query(["bowl", label]).startswith("a label holds the hidden character U+")
    assert p.query == ["mug"]


def test_the_supervisor_writes_the_first_member_exit_where_members_read_it(tmp_path):
    sup = Supervisor(SimpleNamespace(started=[]), tmp_path / "logs")
    sup.start()
    exits = MemberExits(sup.env["R3_MEMBER_EXITS"])
    assert exits.read() == []
    sup.processes["r3_sim_node"] = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    sup.processes["r3_sim_node"].wait()
    assert str(sup.poll()) == "r3_sim_node exited with code 3"
    assert exits.read() == ["r3_sim_node exited with code 3"]
    sup.stop()


@pytest.mark.parametrize(
    ("output", "said"),
    [
        ("starting\nfatal: policy 'x' (of package 'p'): no\nbye\n", "policy 'x' (of package 'p'): no"),
        ("starting\nValueError: bad\n\n", "ValueError: bad"),
        ("", "no output"),
    ],
)
def test_the_supervisor_says_why_a_member_exited_in_its_own_words(output, said, tmp_path):
    """`r3 launch` said "r3_lowlevel_node exited with code 1; see LOG": why was only in the log."""
    echoed = []
    sup = Supervisor(SimpleNamespace(started=[]), tmp_path, echo=echoed.append)
    sup.start()
    (tmp_path / "r3_lowlevel_node.log").write_text(output)
    sup.processes["r3_lowlevel_node"] = subprocess.Popen([sys.executable, "-c", "raise SystemExit(1)"])
    sup.processes["r3_lowlevel_node"].wait()
    sup.poll()
    sup.stop()
    assert echoed == [
        f"[r3 launch] r3_lowlevel_node exited with code 1: {said}; see {tmp_path}/r3_lowlevel_node.log"
    ]


def test_the_freeze_watch_sees_a_sigstop_of_this_process():
    watch = FreezeWatch(deadline_s=0.3, period_s=0.02)
    time.sleep(0.1)
    before = time.monotonic()
    assert watch.frozen_since(before) == 0.0
    subprocess.Popen(["sh", "-c", f"sleep 0.8; kill -CONT {os.getpid()}"])
    os.kill(os.getpid(), signal.SIGSTOP)
    assert watch.frozen_since(before) > 0.5  # right after the wake-up, before or after the thread saw it
    time.sleep(0.1)
    assert watch.frozen_since(before) > 0.5 and watch.frozen_since(time.monotonic()) == 0.0
    watch.close()
    assert "freeze-watch" not in {t.name for t in threading.enumerate()}  # it outlived its owners before


class _Freezes:
    """A freeze watch whose freezes the test sets."""

    deadline_s = 2.0
    frozen_s = 0.0

    def frozen_since(self, t: float) -> float:
        return self.frozen_s


def test_a_goal_stop_keeps_its_first_reason_and_names_a_freeze():
    freezes, other = _Freezes(), [None]
    stop = GoalStop(freezes, "/r3_packing_sim_node", lambda: other[0])
    assert not stop() and stop.reason is None
    other[0] = "canceled"
    assert stop() and stop.reason == "canceled"
    other[0], freezes.frozen_s = None, 3.0  # the client heard again, then a freeze: the first reason sticks
    assert stop() and stop.reason == "canceled"
    frozen = GoalStop(freezes, "/r3_packing_sim_node", lambda: "canceled")
    assert frozen() and frozen.reason == (
        "error: /r3_packing_sim_node was frozen or starved for 3.0 s (deadline 2.0 s); "
        "its goal is stale, motion stopped"
    )


def test_a_dataset_step_takes_the_frames_its_reasoner_step_names_even_without_a_camera_image(tmp_path):
    """The camera topic is best effort; the frames a step names come from /r3/reasoner/frames."""
    from r3.data.bagtypes import typestore
    from r3.data.build import read_episode
    from r3.graph import names

    types = typestore().types
    writer = EpisodeBagWriter(tmp_path, EpisodeInfo(episode_id="V-s1-test", suite="language_table", task="V"))

    def stamp(ns):
        return types["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9)

    rgb = np.full((4, 6, 3), 7, np.uint8)
    image = types["sensor_msgs/msg/Image"](
        header=types["std_msgs/msg/Header"](stamp=stamp(200), frame_id="c"),
        height=4,
        width=6,
        encoding="rgb8",
        is_bigendian=0,
        step=18,
        data=rgb.reshape(-1),
    )
    writer.write_message(names.REASONER_FRAMES, "sensor_msgs/msg/Image", 1, image)
    fields = {
        f: ""
        for f in (
            "episode_id",
            "suite",
            "task",
            "goal",
            "history",
            "reasoning",
            "raw_response",
            "finish_reason",
            "error",
            "model_id",
        )
    }
    step = types["r3_msgs/msg/ReasonerStep"](
        header=types["std_msgs/msg/Header"](stamp=stamp(300), frame_id=""),
        image_stamps=[stamp(200)],
        step=0,
        instruction="push the red moon to the top left corner",
        valid=True,
        latency_prompt_s=0.0,
        latency_model_s=0.0,
        latency_parse_s=0.0,
        prompt_tokens=0,
        completion_tokens=0,
        **fields,
    )
    writer.write_message(names.REASONER_STEPS, "r3_msgs/msg/ReasonerStep", 2, step)
    env = LanguageTableEnv(task="V")
    env.reset(seed=1)
    state = types["r3_msgs/msg/PrivilegedState"](
        header=types["std_msgs/msg/Header"](stamp=stamp(100), frame_id="board"),
        episode_id="",
        control_step=0,
        suite="language_table",
        task="V",
        goal="",
        task_instance_json=json.dumps(env.task_instance.to_dict()),
        objects=[],
        effector=types["geometry_msgs/msg/Point"](x=0.0, y=0.0, z=0.0),
        held="",
        progress=0.0,
        success=False,
    )
    env.close()
    writer.write_message(names.PRIVILEGED_STATE, "r3_msgs/msg/PrivilegedState", 3, state)
    bag = writer.close(success=True, progress=1.0, steps=1, reason="success")
    (record,) = read_episode(bag).steps
    assert len(record.images) == 1 and np.array_equal(record.images[0], rgb)


def handed_beats(monitor_type):
    """A watcher of no graph (node "/watcher"): the test hands it its beats (``_on_beat``)."""
    node = SimpleNamespace(
        get_fully_qualified_name=lambda: "/watcher",
        create_subscription=lambda *a, **k: None,
        create_timer=lambda *a, **k: None,
    )
    monitor = monitor_type(node)
    monitor._take = lambda: None  # no subscription to take from
    return monitor


def test_a_watcher_remembers_a_bounded_number_of_nodes_and_keeps_those_it_hears():
    """Anyone may publish heartbeats under any name: 5,000 invented names held 5,000 entries in every
    watcher. Now the one heard longest ago is forgotten past REMEMBERED_NODES, and a node that keeps
    beating is never it."""
    from r3_msgs.msg import Heartbeat
    from r3_ros.heartbeat import REMEMBERED_NODES, HeartbeatMonitor

    monitor = handed_beats(HeartbeatMonitor)
    for i in range(5_000):
        monitor._on_beat(Heartbeat(node=f"/forged_{i}", state="x" * 10_000), {})
        if i % 100 == 0:
            monitor._on_beat(Heartbeat(node="/r3_sim_node", state="idle"), {})
    assert len(monitor._last) == len(monitor._states) == REMEMBERED_NODES
    assert monitor.state("/r3_sim_node") == "idle" and monitor.silent_for("/r3_sim_node") < 60
    assert monitor.state("/forged_4999") == "x" * 200 and monitor.state("/forged_0") is None


def test_a_watcher_drops_a_beat_whose_node_name_no_node_has():
    """Found by a hostile client: names were kept whole as the watcher's keys, so 200 beats named
    with a megabyte each grew the packing simulator and the reasoner by 250 MB."""
    from r3_msgs.msg import Heartbeat
    from r3_ros.heartbeat import HeartbeatMonitor

    monitor = handed_beats(HeartbeatMonitor)
    huge = "/" + "n" * 1_000_000
    monitor._on_beat(Heartbeat(node=huge, state="idle"), {})
    monitor._on_beat(Heartbeat(node="/" + "n" * 254, state="idle"), {})  # as long as a name can be
    assert monitor.state(huge) is None and len(monitor._last) == 1


def test_a_watcher_that_stood_still_blames_nobody_for_its_own_freeze():
    """After a SIGSTOP of 10 s the reasoner said "/r3_sim_node stopped responding": its own beat came
    back first, the simulator's a moment later. A node is dead only when silent for a whole timeout
    after the watcher was heard again; a node that then stays silent still is."""
    from r3_msgs.msg import Heartbeat
    from r3_ros.heartbeat import HeartbeatMonitor

    node = SimpleNamespace(
        get_fully_qualified_name=lambda: "/watcher",
        create_subscription=lambda *a, **k: None,
        create_timer=lambda *a, **k: None,
    )

    def beat(monitor, name: str, seconds_ago: float) -> None:
        received = {"received_timestamp": time.time_ns() - int(seconds_ago * 1e9)}
        monitor._on_beat(Heartbeat(node=name, state="idle"), received)

    frozen = HeartbeatMonitor(node)
    frozen._take = lambda: None
    for name in ("/watcher", "/r3_sim_node"):
        beat(frozen, name, 10.2)  # both heard before a 10 s freeze
    beat(frozen, "/watcher", 0.0)  # its own beat, back first
    assert frozen.dead(["/r3_sim_node"], 5.0) == []

    resumed_long_ago = HeartbeatMonitor(node)
    resumed_long_ago._take = lambda: None
    for name in ("/watcher", "/r3_sim_node"):
        beat(resumed_long_ago, name, 20.0)
    for quarter in range(24, -1, -1):  # heard again 6 s ago, every 0.25 s since; the simulator silent
        beat(resumed_long_ago, "/watcher", quarter / 4)
    assert resumed_long_ago.dead(["/r3_sim_node"], 5.0) == ["/r3_sim_node"]


def test_a_reasoner_frozen_while_it_waits_for_a_decision_point_names_its_own_freeze():
    """A reasoner frozen (SIGSTOP) while it waited for a decision's state and image woke past the
    wait's deadline and said the simulator "sent no state and image": the frames sent during the
    freeze were lost to its full socket. The wait asks its check (this node's stillness, a dead
    member, a shutdown) before it blames the simulator."""
    import threading

    from r3_ros.episode_watch import EpisodeError
    from r3_ros.observation import SceneObserver

    scene = object.__new__(SceneObserver)  # the wait alone: nothing was received
    scene.param = {"observation_timeout_s": 0.0, "wrist_camera": False, "sim_node": "/r3_sim_node"}
    scene.cv, scene.image, scene.scene_id = threading.Condition(), None, "e1"
    scene.latest_state = lambda: None

    def stood_still() -> None:
        raise EpisodeError("/r3_reasoner_node stood still for 8.0 s (frozen or starved)")

    with pytest.raises(EpisodeError, match="^/r3_reasoner_node stood still"):
        scene.observe(0, stood_still)
    with pytest.raises(EpisodeError, match="^/r3_sim_node sent no state and image"):
        scene.observe(0, lambda: None)


def test_the_packing_cell_refuses_an_instruction_budget_it_cannot_keep():
    """Found by a hostile client: a FollowInstruction goal with ``max_steps=1`` to the packing
    simulator was accepted and its budget ignored: the arm went through a whole pick and place. The
    packing policy's instructions run to their own end, so a goal that gives a budget is refused."""
    from r3_msgs.action import FollowInstruction
    from r3_packing_sim_node.main import PackingSimNode

    def refusal(max_steps: int) -> str:
        goal = FollowInstruction.Goal(
            instruction="home()", suite="packing", interface="semantic", max_steps=max_steps
        )
        return PackingSimNode.goal_refusal(SimpleNamespace(), goal)

    assert refusal(0) == ""
    for budget in (1, 2**32 - 1):
        assert refusal(budget).startswith(f"error: invalid goal: max_steps {budget}"), refusal(budget)

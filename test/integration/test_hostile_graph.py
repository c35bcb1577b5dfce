"""Hostile input to a running Language Table graph (issue 18): bad goals, calls and raw messages over
DDS, a forged episode event, a frozen simulator. Each is refused with a reason, moves nothing, writes
nothing outside the bag folder, and the graph serves a valid episode afterwards. One graph, started
once by `r3 launch`, serves every case of this module."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from action_msgs.msg import GoalStatus
from hostile import (
    R3,
    Client,
    Graph,
    bag_topics,
    closed,
    freeze_the_simulator_mid_episode,
    missing_decision_frames,
    own_domain,
)

from r3.data.bags import COMPLETE, read_episode_info
from r3.graph import names
from r3_ros.commander import TaskStatus

PEERS = Path(__file__).parent / "peers"

pytestmark = [pytest.mark.ros, pytest.mark.slow]


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    g = Graph("sim_language_table", tmp_path_factory.mktemp("hostile"), own_domain())
    yield g
    g.stop()


@pytest.fixture(scope="module")
def client(graph):
    c = Client("r3_hostile_client", graph.domain)
    assert c.wait_until_ready(90), "the graph did not come up:\n" + "".join(graph.lines)
    yield c
    c.close()


def goal(**fields):
    from r3_msgs.action import RunTask

    return RunTask.Goal(**{"suite": "language_table", "task": "V", "seed": 3, "reset_scene": True, **fields})


def assert_serves_a_valid_episode(graph: Graph, client: Client, seed: int = 3) -> Path:
    """A valid episode runs to success afterwards, its bag complete and holding every decision frame."""
    result, _ = client.run_task(goal(seed=seed))
    assert result.reason == "success", result.reason
    bag = closed(Path(result.bag))
    assert bag.parent == graph.bags.resolve() and bag.name == result.episode_id
    assert read_episode_info(bag).status == COMPLETE
    wanted, missing = missing_decision_frames(bag)
    assert wanted == result.steps and missing == 0
    return bag


def test_bad_run_task_goals_are_refused_before_anything_is_written_or_moved(graph, client, tmp_path):
    client.spin(1.0)  # the latched state arrives
    outside = tmp_path / f"r3-hostile-{uuid.uuid4().hex[:8]}"
    cases = {
        "negative seed": goal(seed=-1),
        "task climbing out of the bag folder": goal(task="../../x"),
        "absolute task path": goal(task=str(outside)),
        "300-character task": goal(task="V" * 300),
        "unknown task": goal(task="unicorn"),
        "unknown suite": goal(suite="mars"),
        "a suite this graph does not simulate": goal(suite="packing", task="4"),
        "reasoning budget below -1": goal(reasoning_budget=-7),
        "continuing a scene of another task": goal(task="L", reset_scene=False),
        "a megabyte of goal": goal(goal="line up the blocks " * 55_000),
        "a goal that clears the terminal": goal(goal="line up the blocks\x1b[2J"),
        "a blank goal": goal(goal="\n\n\t"),
    }
    bags_before = graph.bag_dirs()
    for case, bad in cases.items():
        t0 = time.monotonic()
        result, _ = client.run_task(bad, timeout_s=30)
        client.spin(0.2)
        assert result.reason.startswith("error: invalid goal: "), f"{case}: {result.reason}"
        assert not client.moved_after(t0), f"{case}: the pusher moved"
        assert graph.bag_dirs() == bags_before, f"{case}: a bag was written"
    assert not outside.exists() and not (graph.root.parent / "x").exists() and not (graph.root / "x").exists()
    assert "seed must be in 0.." in client.run_task(cases["negative seed"])[0].reason
    assert_serves_a_valid_episode(graph, client)


def test_bad_calls_to_the_simulator_and_the_lowlevel_node_are_refused_and_they_keep_serving(graph, client):
    from rclpy.action import ActionClient

    from r3_msgs.action import FollowInstruction
    from r3_msgs.srv import ResetScene

    reset = client.node.create_client(ResetScene, names.RESET_SCENE)
    follow = ActionClient(client.node, FollowInstruction, names.FOLLOW_INSTRUCTION)
    t0 = time.monotonic()
    for bad in (
        ResetScene.Request(suite="language_table", task="V", seed=-1),
        ResetScene.Request(suite="language_table", task="../../x", seed=1),
        ResetScene.Request(suite="language_table", task="V", seed=1, episode_id="../../x"),
        ResetScene.Request(suite="language_table", task="V", seed=1, episode_id="x" * 100_000),
    ):
        answer = client.call(reset, bad)
        assert not answer.ok and "cannot reset" in answer.reason, answer.reason
    result = client.action(
        follow,
        FollowInstruction.Goal(
            instruction="push the red moon to the top left corner", suite="language_table", seed=-1
        ),
    )
    assert result is not None and not result.success
    assert result.reason.startswith("error: invalid goal: seed must be"), result.reason
    result = client.action(
        follow, FollowInstruction.Goal(instruction="push the red moon left " * 50_000, suite="language_table")
    )
    assert result.reason == (
        "error: invalid goal: the instruction is 1,150,000 characters long; at most 4,096"
    ), result.reason[:300]
    client.spin(0.3)
    assert not client.moved_after(t0)
    assert client.call(reset, ResetScene.Request(suite="language_table", task="V", seed=1)).ok
    assert_serves_a_valid_episode(graph, client)


def test_pusher_commands_off_the_board_are_refused_not_clipped(graph, client):
    """Each is answered on /pusher/refusals under its own stamp, with the reason; so is a command in
    another frame or with a z (both were carried out before, as if in the board's plane)."""
    from geometry_msgs.msg import Vector3Stamped

    from r3_msgs.msg import CommandRefusal
    from r3_msgs.srv import ResetScene
    from r3_ros.conversions import ns_to_stamp, stamp_to_ns
    from r3_ros.qos import REFUSALS

    assert client.call(
        client.node.create_client(ResetScene, names.RESET_SCENE),
        ResetScene.Request(suite="language_table", task="V", seed=1),
    ).ok  # pusher at (0, -0.17)
    pub = client.node.create_publisher(Vector3Stamped, names.PUSHER_COMMAND, 10)
    refusals: list[CommandRefusal] = []
    sub = client.node.create_subscription(CommandRefusal, names.PUSHER_REFUSALS, refusals.append, REFUSALS)
    deadline = time.monotonic() + 10
    while not (pub.get_subscription_count() and sub.get_publisher_count()) and time.monotonic() < deadline:
        client.spin(0.05)
    client.spin(0.5)
    t0 = time.monotonic()
    off = "off the reachable board area"
    commands = [  # (x, y, frame, z, the refusal's reason)
        (0.0, -0.025, "board", 0.0, off),
        (0.0, -0.019, "", 0.0, off),
        (0.02, -0.03, "board", 0.0, off),
        (0.0, 0.01, "world", 0.0, "frame 'world'"),
        (0.0, 0.01, "board", 1e30, "z=1e+30"),
        (0.0, 0.01, "board", float("nan"), "z=nan"),
    ]
    (sim_log,) = graph.root.glob("logs/*/r3_sim_node.log")
    logged_before = sim_log.read_text().count("the pusher holds still")
    stamps = [7_000_000_001 + i for i in range(len(commands))]
    for stamp, (x, y, frame, z, _) in zip(stamps, commands, strict=True):
        cmd = Vector3Stamped()
        cmd.header.stamp, cmd.header.frame_id = ns_to_stamp(stamp), frame
        cmd.vector.x, cmd.vector.y, cmd.vector.z = x, y, z
        pub.publish(cmd)
        client.spin(0.3)
    assert not client.sent_after(t0), "a refused command moved the pusher"
    assert [stamp_to_ns(r.header.stamp) for r in refusals] == stamps
    reasons = [r.reason for r in refusals]
    assert all(c[-1] in reason for c, reason in zip(commands, reasons, strict=True)), reasons
    # Each refusal is answered; its log line comes at most once a second (a flood of 14,000 bad
    # commands a second wrote 357 KiB of log in 2 s).
    assert sim_log.read_text().count("the pusher holds still") - logged_before <= 3
    assert all(r.command_topic == names.PUSHER_COMMAND for r in refusals)
    client.node.destroy_subscription(sub)
    cmd = Vector3Stamped()
    cmd.vector.y = 0.01  # back towards the middle: a valid command still steps
    pub.publish(cmd)
    client.spin(0.5)
    assert len(client.sent_after(t0)) == 1
    client.node.destroy_publisher(pub)
    assert_serves_a_valid_episode(graph, client)


def test_a_flood_of_stops_that_name_no_goal_is_logged_at_most_once_a_second(graph, client):
    """A stop that names no goal id is ignored with a log line, and a flood of them logged each one
    (the low-level node and the reasoner, which take the stops); as a flood of bad pusher commands,
    each kind is logged at most once a second."""
    from std_msgs.msg import String

    from r3_ros.qos import STOP

    takers = ("r3_lowlevel_node", "r3_reasoner_node")
    logs = {node: next(graph.root.glob(f"logs/*/{node}.log")) for node in takers}
    said = "a stop that names no goal id"
    before = {node: log.read_text().count(said) for node, log in logs.items()}
    pub = client.node.create_publisher(String, names.STOP_MOTION, STOP)
    deadline = time.monotonic() + 10
    while pub.get_subscription_count() < len(logs) and time.monotonic() < deadline:
        client.spin(0.05)
    for i in range(2000):
        pub.publish(String(data=f"not a goal {i}"))
    client.spin(1.0)
    client.node.destroy_publisher(pub)
    logged = {node: log.read_text().count(said) - before[node] for node, log in logs.items()}
    assert all(1 <= n <= 3 for n in logged.values()), logged


def test_a_peer_whose_topics_cannot_match_is_named_and_neither_moves_nor_deafens_anything(graph, client):
    """A peer on the pusher command topic with another message type (publishing and subscribing)
    and a reader asking for kept refusals. r3's nodes create their topics without rclpy's QoS-event
    handlers, so their audit must say who cannot match and why; and while the peer is there, an
    episode runs and its bag holds the real commands: the recorder did not take the peer's type,
    and the low-level node did not wait for the peer's reader to match its commands."""
    from r3_ros.node import AUDIT_PERIOD_S

    client.spin(1.0)
    env = dict(os.environ, ROS_DOMAIN_ID=str(graph.domain))
    t0 = time.monotonic()
    peer = subprocess.Popen([sys.executable, str(PEERS / "mismatched_peer.py")], env=env)
    wanted = (
        (
            f"this node subscribes to {names.PUSHER_COMMAND}, and /mismatched_peer cannot match it: "
            "it uses std_msgs/msg/String, this node geometry_msgs/msg/Vector3Stamped"
        ),
        (
            f"this node publishes {names.PUSHER_REFUSALS}, and /mismatched_peer cannot match it: "
            "it asks reliable, transient_local, this node offers reliable, volatile"
        ),
    )
    sim_log = next((graph.root / "logs").glob("*/r3_sim_node.log"))
    try:
        deadline = time.monotonic() + 30 + 2 * AUDIT_PERIOD_S
        while not all(w in sim_log.read_text() for w in wanted) and time.monotonic() < deadline:
            client.spin(0.2)
        log = sim_log.read_text()
        assert all(w in log for w in wanted), log[-3000:]
        client.spin(2 * AUDIT_PERIOD_S)
        assert all(sim_log.read_text().count(w) == 1 for w in wanted)  # once, not every audit
        assert not client.moved_after(t0), "the pusher moved"
        commands = bag_topics(assert_serves_a_valid_episode(graph, client)).get(names.PUSHER_COMMAND, [])
        assert commands and all(hasattr(c, "vector") for c in commands)  # Vector3Stamped, not String
    finally:
        peer.kill()
        peer.wait(timeout=10)


def test_reset_scene_false_continues_on_the_current_scene(graph, client):
    first, _ = client.run_task(goal(max_steps=1))
    assert first.reason == "step_budget", first.reason
    result, _ = client.run_task(goal(reset_scene=False))
    assert result.reason == "success" and result.steps >= 1, result.reason
    before = bag_topics(Path(first.bag))[names.PRIVILEGED_STATE]
    after = bag_topics(Path(result.bag))[names.PRIVILEGED_STATE]
    # No reset: the second episode acts on the first one's scene, its control steps going on from there.
    assert {s.episode_id for s in after} == {before[-1].episode_id}
    assert min(s.control_step for s in after) == before[-1].control_step + 1


def test_a_clients_own_goal_text_is_the_one_recorded_throughout(graph, client):
    """Found by a hostile user: with a goal text of its own, START and every ReasonerStep carried the
    client's text (the model was prompted with it) but END and the bag's sidecar the scene's."""
    text = "put the blocks in a line across the middle"
    result, _ = client.run_task(goal(goal=text, max_steps=1))
    assert result.reason == "step_budget", result.reason
    topics = bag_topics(Path(result.bag))
    events = topics[names.EPISODE_EVENTS]
    assert [e.goal for e in events] == [text, text], [e.goal for e in events]
    assert {s.goal for s in topics[names.REASONER_STEPS]} == {text}
    assert read_episode_info(Path(result.bag)).goal == text


def test_bad_goals_sent_during_an_episode_are_refused_and_the_episode_goes_on(graph, client):
    """A goal the reasoner or the low-level node refuses preempts nothing (before, a RunTask goal with
    a negative seed cancelled the running episode, and a FollowInstruction that did not parse aborted
    the instruction the reasoner had sent)."""
    from rclpy.action import ActionClient

    from r3_msgs.action import FollowInstruction, RunTask

    run_task = ActionClient(client.node, RunTask, names.RUN_TASK)
    follow = ActionClient(client.node, FollowInstruction, names.FOLLOW_INSTRUCTION)
    refusals = []

    def send_bad_goals(_handle) -> None:
        if not refusals and client.sent_after(started):  # the pusher moves
            bad_episode = client.action(run_task, goal(seed=-1))
            bad_instruction = client.action(
                follow, FollowInstruction.Goal(instruction="fly to the moon", suite="language_table")
            )
            refusals.extend([bad_episode.reason, bad_instruction.reason])

    started = time.monotonic()
    result, _ = client.run_task(goal(task="T", seed=7), during=send_bad_goals)
    assert refusals, "the episode ended before the bad goals went out"
    assert refusals[0].startswith("error: invalid goal: seed must be in 0.."), refusals
    assert refusals[1].startswith("parse_error: no verb"), refusals
    assert result.reason in ("success", "step_budget"), result.reason
    assert client.last_task.result_status == GoalStatus.STATUS_SUCCEEDED  # not aborted by the bad goal
    bag = closed(Path(result.bag))
    assert read_episode_info(bag).status == COMPLETE
    outcomes = bag_topics(bag)[names.INSTRUCTION_OUTCOMES]
    assert len(outcomes) == result.steps and all(o.reason in ("done", "step_budget") for o in outcomes), [
        o.reason for o in outcomes
    ]


def test_the_nodes_an_episode_runs_on_are_not_changed_under_it(graph, client):
    """A client set the reasoner's ``sim_node`` while an episode ran: the reasoner took it, refused the
    simulator's own states from then on, and the episode ended "/elsewhere sent no state and image".
    The nodes an episode runs on are refused with a reason while it runs, and it goes on."""
    from rclpy.parameter import Parameter
    from rclpy.parameter_client import AsyncParameterClient

    parameters = AsyncParameterClient(client.node, "/r3_reasoner_node")
    assert parameters.wait_for_services(timeout_sec=30)
    elsewhere = {"sim_node": "/elsewhere", "lowlevel_node": "/elsewhere", "recorder_node": ""}
    answers = []

    def set_elsewhere(_handle) -> None:
        if not answers and client.sent_after(started):  # the pusher moves
            for name, value in elsewhere.items():
                setting = parameters.set_parameters([Parameter(name, value=value)])
                while not setting.done():
                    client.rclpy.spin_once(client.node, timeout_sec=0.01)
                answers.append(setting.result().results[0])

    started = time.monotonic()
    result, _ = client.run_task(goal(), during=set_elsewhere)
    assert answers, "the episode ended before the parameters were set"
    assert [(a.successful, a.reason.split(":")[0]) for a in answers] == [(False, name) for name in elsewhere]
    assert "an episode is running on /r3_sim_node; set it between episodes" in answers[0].reason
    assert result.reason == "success", result.reason
    assert read_episode_info(closed(Path(result.bag))).status == COMPLETE
    getting = parameters.get_parameters(list(elsewhere))
    while not getting.done():
        client.rclpy.spin_once(client.node, timeout_sec=0.01)
    assert [v.string_value for v in getting.result().values] == [
        "/r3_sim_node",
        "/r3_lowlevel_node",
        "/r3_recorder_node",
    ]


@pytest.mark.parametrize(
    "encoding, height, width, step, data",
    [("mono8", 2, 2, 2, bytes(4)), ("rgb8", 480, 640, 1920, bytes(10))],
    ids=["encoding", "size"],
)
def test_a_camera_frame_the_reasoner_cannot_read_is_refused_and_the_episode_goes_on(
    graph, client, encoding, height, width, step, data
):
    """Anyone may publish on the camera topic. Before, the frame (stamped ahead of every state) became
    the next decision's image, its decoding raised in the middle of the episode, and the episode ended
    with a bare ValueError: no END (its bag left open until the next START), no episode id, no bag."""
    from sensor_msgs.msg import Image

    from r3_ros.qos import recorded

    forger = client.node.create_publisher(Image, names.CAMERA_IMAGE, recorded(5))
    sent = []

    def forge(_handle) -> None:
        if len(client.moved_after(started)) >= 2 and len(sent) < 200:
            frame = Image(encoding=encoding, height=height, width=width, step=step, data=data)
            frame.header.stamp.sec = 2_000_000_000
            forger.publish(frame)
            sent.append(frame)

    started = time.monotonic()
    try:
        result, _ = client.run_task(goal(task="T", seed=7), during=forge)
    finally:
        client.node.destroy_publisher(forger)
    assert sent, "the episode ended before a frame was forged"
    assert result.reason in ("success", "step_budget"), result.reason
    bag = closed(Path(result.bag))
    assert read_episode_info(bag).status == COMPLETE
    assert_serves_a_valid_episode(graph, client)


def test_a_goal_sent_while_an_episode_runs_preempts_it_and_runs_once_it_has_ended(graph, client):
    """Two episodes at once: one ends "canceled" (its bag closed, saying so), the other runs
    to its end in a bag holding every decision frame. Before, the two episodes ran side by side in the
    reasoner, their STARTs and ENDs interleaved, and the recorder lost the second one."""
    handles = [client.commander.start_task(goal(seed=3)), client.commander.start_task(goal(seed=4))]
    end = time.monotonic() + 120
    while not all(h.status in (TaskStatus.DONE, TaskStatus.REJECTED) for h in handles):
        assert time.monotonic() < end, "no result within 120 s"
        for h in handles:
            if h.status not in (TaskStatus.DONE, TaskStatus.REJECTED):
                h.spin_once(0.01)
    results = sorted((h.result for h in handles), key=lambda r: r.reason)
    assert [r.reason for r in results] == ["canceled", "success"], [r.reason for r in results]
    canceled, ran = results
    if canceled.bag:  # preempted once recording: its bag holds it to its END, closed
        info = read_episode_info(closed(Path(canceled.bag)))
        assert (info.status, info.reason, info.steps) == (COMPLETE, "canceled", canceled.steps)
    else:  # preempted before its START: nothing recorded, nothing moved
        assert canceled.steps == 0
    bag = closed(Path(ran.bag))
    assert read_episode_info(bag).status == COMPLETE and missing_decision_frames(bag) == (ran.steps, 0)


def test_a_forged_episode_start_neither_truncates_the_running_bag_nor_opens_one(graph, client):
    from rclpy.qos import QoSDurabilityPolicy, QoSProfile

    from r3_msgs.msg import EpisodeEvent

    pub = client.node.create_publisher(
        EpisodeEvent,
        names.EPISODE_EVENTS,
        QoSProfile(depth=10, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL),
    )
    forged = [f"forged-{uuid.uuid4().hex[:6]}", "../../forged"]
    sent = []

    def forge(_handle) -> None:
        if not sent and client.sent_after(started):  # mid-episode: the pusher moves
            for episode_id in forged:
                pub.publish(
                    EpisodeEvent(
                        episode_id=episode_id, event=EpisodeEvent.START, suite="language_table", task="V"
                    )
                )
            sent.append(time.monotonic())

    started = time.monotonic()
    result, _ = client.run_task(goal(task="T", seed=7), during=forge)
    assert sent, "the episode ended before the forged start went out"
    assert result.reason in ("success", "step_budget"), result.reason
    bag = closed(Path(result.bag))
    info = read_episode_info(bag)
    assert info.status == COMPLETE and info.steps == result.steps
    assert len(bag_topics(bag)[names.REASONER_STEPS]) == result.steps
    assert not (graph.bags / forged[0]).exists() and not (graph.root.parent / "forged").exists()
    client.node.destroy_publisher(pub)


def test_a_node_that_takes_the_reasoners_name_cannot_end_its_episode(graph, client):
    """The recorder takes episode events from the reasoner's node name; a second node of that name
    sent END for the running episode, and the recorder closed its bag 0.3 s in, marked complete with
    2 of 7 steps. An END now counts only from the publisher of its START."""
    from rclpy.qos import QoSDurabilityPolicy, QoSProfile

    from r3_msgs.msg import EpisodeEvent
    from r3_ros.qos import EVENTS

    impostor = client.rclpy.create_node(names.EPISODE_SOURCE.lstrip("/"))
    pub = impostor.create_publisher(
        EpisodeEvent,
        names.EPISODE_EVENTS,
        QoSProfile(depth=10, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL),
    )
    starts: list[str] = []
    sub = client.node.create_subscription(
        EpisodeEvent,
        names.EPISODE_EVENTS,
        lambda m: m.event == EpisodeEvent.START and starts.append(m.episode_id),
        EVENTS,
    )
    sent = []

    def forge(_handle) -> None:
        if starts and not sent and len(client.moved_after(started)) >= 2:
            end = EpisodeEvent(
                episode_id=starts[-1], event=EpisodeEvent.END, suite="language_table", task="T"
            )
            end.success, end.reason, end.steps = True, "success", 1
            pub.publish(end)
            sent.append(time.monotonic())

    started = time.monotonic()
    try:
        result, _ = client.run_task(goal(task="T", seed=7), during=forge)
    finally:
        client.node.destroy_subscription(sub)
        impostor.destroy_node()
    assert sent, "the episode ended before the forged END went out"
    bag = closed(Path(result.bag))
    info = read_episode_info(bag)
    assert info.status == COMPLETE and info.steps == result.steps and info.reason == result.reason
    assert len(bag_topics(bag)[names.REASONER_STEPS]) == result.steps


def test_a_forged_state_saying_success_neither_ends_the_episode_nor_is_decided_on(graph, client):
    """Found by a hostile client: the reasoner took a state from any publisher, so a copy of the
    simulator's latest state saying success, with its stamp, ended the running episode as a success.
    It now takes states only from its ``sim_node``."""
    from r3_msgs.msg import PrivilegedState
    from r3_ros.qos import LATCHED

    real: list = []
    sub = client.node.create_subscription(PrivilegedState, names.PRIVILEGED_STATE, real.append, LATCHED)
    pub = client.node.create_publisher(PrivilegedState, names.PRIVILEGED_STATE, LATCHED)
    sent = []

    def forge(_handle) -> None:
        latest = next((m for m in reversed(real) if m.goal != "forged"), None)
        if latest is not None and len(client.moved_after(started)) >= 2:
            latest.success, latest.progress, latest.goal = True, 1.0, "forged"
            pub.publish(latest)
            sent.append(time.monotonic())

    started = time.monotonic()
    try:
        result, _ = client.run_task(goal(task="T", seed=7), during=forge)
    finally:
        client.node.destroy_subscription(sub)
        client.node.destroy_publisher(pub)
    assert sent, "the episode ended before a forged state went out"
    bag = closed(Path(result.bag))
    states = [m for m in bag_topics(bag)[names.PRIVILEGED_STATE] if m.goal != "forged"]
    assert (result.success, result.progress) == (states[-1].success, states[-1].progress), result.reason
    assert read_episode_info(bag).status == COMPLETE
    reasoner_log = next((graph.root / "logs").glob("*/r3_reasoner_node.log")).read_text()
    refused = "refused a state from '/r3_hostile_client': only /r3_sim_node publishes the simulator's state"
    assert refused in reasoner_log, reasoner_log[-3000:]
    assert_serves_a_valid_episode(graph, client)


@pytest.mark.parametrize("reset_scene", [True, False], ids=["own_scene", "scene_gone_on_with"])
def test_a_reset_scene_call_during_an_episode_is_refused_and_moves_nothing(graph, client, reset_scene):
    """ResetScene carries no caller, so any DDS client could reset the scene under a running episode
    (before, the simulator did it, and the episode ended in an error once no state of its own scene
    came). Now the simulator refuses it, naming the episode, and the episode runs to its end; also an
    episode that goes on with the last one's scene (``reset_scene=false``), which resets nothing."""
    from r3_msgs.msg import PrivilegedState, ReasonerStep
    from r3_msgs.srv import ResetScene
    from r3_ros.qos import LATCHED

    reset = client.node.create_client(ResetScene, names.RESET_SCENE)
    scene = []  # the running scene's id, as the simulator's state tells anyone
    state = client.node.create_subscription(
        PrivilegedState, names.PRIVILEGED_STATE, lambda m: scene.append(m.episode_id), LATCHED
    )
    decided = []  # when each decision step was heard (none kept from before: a volatile reader)
    steps = client.node.create_subscription(
        ReasonerStep, names.REASONER_STEPS, lambda _: decided.append(time.monotonic()), 50
    )
    answers = []

    def reset_mid_episode(_handle) -> None:
        # Once the episode has decided a step: a joint state of the episode before, heard late, once
        # sent the resets before this episode's START, when no episode owned the scene.
        if not answers and decided and decided[-1] > started:
            for request in (
                ResetScene.Request(suite="language_table", task="L", seed=5, episode_id="hostile-1"),
                ResetScene.Request(suite="language_table", task="T", seed=5, episode_id=scene[-1]),
            ):
                answers.append(client.call(reset, request))

    deadline = time.monotonic() + 30  # the simulator's latched state, once DDS has matched this reader
    while not scene and time.monotonic() < deadline:
        client.spin(0.05)
    assert scene, "no simulator state reached the test's subscription"
    if not reset_scene:  # the scene to go on with
        assert client.run_task(goal(task="T", seed=7, max_steps=1))[0].reason == "step_budget"
    started = time.monotonic()
    result, _ = client.run_task(goal(task="T", seed=7, reset_scene=reset_scene), during=reset_mid_episode)
    assert answers, "the episode ended before the resets went out"
    for answer in answers:
        assert not answer.ok
        assert answer.reason == (
            f"episode {result.episode_id!r} is running on this scene; a reset would move it under that "
            "episode (resets are served between episodes)"
        )
    assert result.reason in ("success", "step_budget"), result.reason
    bag = closed(Path(result.bag))
    assert read_episode_info(bag).status == COMPLETE
    states = bag_topics(bag)[names.PRIVILEGED_STATE]
    assert len({s.episode_id for s in states}) == 1  # no state of another scene
    assert client.call(reset, ResetScene.Request(suite="language_table", task="V", seed=1)).ok  # served again
    client.node.destroy_client(reset)
    client.node.destroy_subscription(state)
    client.node.destroy_subscription(steps)


def test_a_frozen_simulator_executes_no_stale_command_after_the_episode_error(graph, client):
    """The low-level node's command queued while the simulator was frozen, one more sent after the
    episode's error, and the control step in flight at the freeze are stale when it wakes: no joint
    state sent after the error result arrived shows the pusher moved but the report of a step that
    ended before the freeze (``freeze_the_simulator_mid_episode``; before, the low-level node ended its
    stopped goal without waiting for its last command's answer; without the deadline both stale
    commands step)."""
    freeze_the_simulator_mid_episode(graph, client, goal(task="T", seed=11))
    assert_serves_a_valid_episode(graph, client)


def test_r3_run_on_the_running_graph_prints_the_bags_absolute_path_from_any_directory(
    graph, client, tmp_path
):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = subprocess.run(
        R3 + ["run", "--use-running-graph", "--task", "V", "--seed", "3", "--quiet", "--video", "none"],
        cwd=elsewhere,
        env=dict(os.environ, ROS_DOMAIN_ID=str(graph.domain)),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    (line,) = [line for line in run.stdout.splitlines() if line.startswith("bag:")]
    bag = Path(line.split(None, 1)[1])
    assert bag.is_absolute() and bag.is_dir() and bag.parent == graph.bags.resolve()
    assert not (elsewhere / "runs").exists()


def test_every_bag_of_this_graph_holds_every_decision_frame(graph, client):
    """Every bag the module's episodes left (hostile ones included, in whatever order they ran: run
    first, this test once found no bag at all), and two of its own."""
    for seed in (4, 5):
        assert_serves_a_valid_episode(graph, client, seed)
    counts = [missing_decision_frames(bag) for bag in sorted(graph.bag_dirs())]
    assert len(counts) >= 2 and sum(w for w, _ in counts) > 0
    assert sum(m for _, m in counts) == 0, counts

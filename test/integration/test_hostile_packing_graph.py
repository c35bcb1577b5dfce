"""Hostile input to a running packing graph (issue 18): GroundPoint labels that name nothing there,
bad seeds for the packing simulator and its arm, and a frozen packing simulator. One graph, started
once by `r3 launch sim_packing`, serves every case of this module."""

from __future__ import annotations

import math
import os
import signal
import time
from pathlib import Path

import pytest
from hostile import Client, Graph, bag_topics, closed, missing_decision_frames, own_domain

from r3.data.bags import COMPLETE, read_episode_info
from r3.graph import names
from r3.sim.packing.scene import CONTROL_DT

STEP_NS = round(CONTROL_DT * 1e9)

pytestmark = [pytest.mark.ros, pytest.mark.slow]


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    g = Graph("sim_packing", tmp_path_factory.mktemp("hostile-packing"), own_domain())
    yield g
    g.stop()


@pytest.fixture(scope="module")
def client(graph):
    from r3_msgs.msg import DetectedObjects
    from r3_ros.qos import recorded

    c = Client("r3_hostile_packing_client", graph.domain)
    c.detections = []
    # As the recorder takes them: the perception node keeps its last looks for a reader that matched
    # late. A volatile reader matched after a fast episode's looks heard none (IndexError below).
    c.node.create_subscription(DetectedObjects, names.DETECTED_OBJECTS, c.detections.append, recorded(10))
    assert c.wait_until_ready(120), "the graph did not come up:\n" + "".join(graph.lines)
    yield c
    c.close()


def goal(**fields):
    from r3_msgs.action import RunTask

    return RunTask.Goal(**{"suite": "packing", "task": "4", "seed": 0, "reset_scene": True, **fields})


def assert_serves_a_valid_episode(client: Client, **fields) -> Path:
    """Two decision steps run (packing episodes are long; two steps show a working graph), their bag
    complete and holding both frames of every step."""
    result, _ = client.run_task(goal(max_steps=2, **fields), timeout_s=400)
    assert result.reason in ("success", "step_budget") and result.steps >= 1, result.reason
    bag = closed(Path(result.bag))
    assert read_episode_info(bag).status == COMPLETE
    wanted, missing = missing_decision_frames(bag)
    assert wanted == 2 * result.steps and missing == 0  # base and wrist frame of every step
    return bag


def test_ground_point_refuses_a_label_that_names_nothing_at_the_point(graph, client):
    from r3_msgs.srv import GroundPoint

    assert_serves_a_valid_episode(client)  # the perception node has a current frame now
    ground = client.node.create_client(GroundPoint, names.GROUND_POINT)
    client.spin(0.5)
    frame = client.detections[-1]
    assert len(frame.objects) >= 2, "perception saw fewer than two items"
    width, height = 320, 240
    checked = 0
    for obj, other in zip(frame.objects, frame.objects[1:] + frame.objects[:1]):
        x0, y0, x1, y1 = obj.box_xyxy
        u, v = ((x0 + x1) / 2 + 0.5) / width * 1000, ((y0 + y1) / 2 + 0.5) / height * 1000
        anything = client.call(ground, GroundPoint.Request(label="*", u=u, v=v, purpose="pick"))
        if not anything.ok or anything.mask_id != obj.mask_id:
            continue  # the box centre misses the item (a mug's handle, a hollow): not a label question
        assert client.call(ground, GroundPoint.Request(label=obj.label, u=u, v=v, purpose="pick")).ok
        for label in ("unicorn", "", " ", "x" * 100_000, other.label):
            refused = client.call(ground, GroundPoint.Request(label=label, u=u, v=v, purpose="pick"))
            assert not refused.ok and refused.reason.startswith("label_mismatch"), (
                label[:20],
                refused.reason,
            )
        checked += 1
    assert checked >= 1


@pytest.mark.parametrize("labels", [["milk"], []], ids=["absent_item", "empty"])
def test_a_perception_query_set_by_a_client_lasts_one_episode(graph, client, labels):
    """Found by a hostile client: SetPerceptionQuery(["milk"]) (or []) was accepted and kept, and
    every later packing episode saw no item and ended in "3 consecutive invalid reasoner outputs".
    A query set through the service lasts for the episode it comes in; the next one starts from the
    node's ``query`` parameter and sees the scene's items."""
    from r3_msgs.srv import SetPerceptionQuery

    query = client.node.create_client(SetPerceptionQuery, names.SET_PERCEPTION_QUERY)
    assert query.wait_for_service(timeout_sec=30)
    assert client.call(query, SetPerceptionQuery.Request(labels=labels)).ok
    bag = assert_serves_a_valid_episode(client)
    seen = [len(msg.objects) for msg in bag_topics(bag)[names.DETECTED_OBJECTS]]
    assert seen and min(seen) >= 2, seen


def test_bad_seeds_for_the_packing_simulator_and_its_arm_are_refused(graph, client):
    from rclpy.action import ActionClient

    from r3_msgs.action import FollowInstruction
    from r3_msgs.srv import ResetScene

    reset = client.node.create_client(ResetScene, names.RESET_SCENE)
    t0 = time.monotonic()
    answer = client.call(reset, ResetScene.Request(suite="packing", task="4", seed=-1))
    assert not answer.ok and "seed must be" in answer.reason, answer.reason
    follow = ActionClient(client.node, FollowInstruction, names.FOLLOW_INSTRUCTION)
    result = client.action(
        follow,
        FollowInstruction.Goal(
            instruction="Pack the sugar box into the medium tray.", suite="packing", seed=-1
        ),
    )
    assert result is not None and result.reason.startswith("error: invalid goal: seed must be"), result
    run, _ = client.run_task(goal(seed=-1))
    assert run.reason.startswith("error: invalid goal: seed must be"), run.reason
    client.spin(0.3)
    assert not client.moved_after(t0)


def test_forged_detections_that_are_no_objects_are_refused_and_the_instruction_goes_on(graph, client):
    """Found by a hostile client: one DetectedObjects message with an infinite footprint yaw, sent
    with the stamp of the simulator's camera frame before the perception node answered, failed the
    instruction with an OverflowError (and, with NaN places, moved the arm toward them). The policy
    now takes only detections whose 3D fields are all finite or all NaN."""
    from geometry_msgs.msg import Point
    from rclpy.action import ActionClient
    from sensor_msgs.msg import Image

    from r3_msgs.action import FollowInstruction
    from r3_msgs.msg import DetectedObject, DetectedObjects
    from r3_msgs.srv import ResetScene
    from r3_ros.qos import SENSOR

    forged_pub = client.node.create_publisher(DetectedObjects, names.DETECTED_OBJECTS, 10)
    forged = []

    def forge(frame: Image) -> None:  # the frame's own stamp, before the perception node answers
        item = DetectedObject(label="sugar box", score=1.0, mask_id=1, valid_points=500)
        item.top_centre = item.centroid = Point(x=0.5, y=0.1, z=0.1)
        item.footprint_yaw, item.footprint, item.bottom_height = float("inf"), [0.05, 0.03], 0.02
        bad_place = DetectedObject(label="cracker box", score=1.0, mask_id=2, valid_points=500)
        bad_place.top_centre = Point(x=float("nan"), y=float("nan"), z=0.1)
        bad_place.footprint_yaw, bad_place.footprint, bad_place.bottom_height = 0.0, [0.05, 0.03], 0.02
        message = DetectedObjects(objects=[item, bad_place])
        message.header.stamp, message.header.frame_id = frame.header.stamp, "world"
        forged_pub.publish(message)
        forged.append(frame.header.stamp)

    camera = client.node.create_subscription(Image, names.CAMERA_IMAGE, forge, SENSOR)
    try:
        reset = client.node.create_client(ResetScene, names.RESET_SCENE)
        assert client.call(reset, ResetScene.Request(suite="packing", task="4", seed=0)).ok
        follow = ActionClient(client.node, FollowInstruction, names.FOLLOW_INSTRUCTION)
        result = client.action(
            follow,
            FollowInstruction.Goal(instruction="Pack the sugar box into the medium tray.", suite="packing"),
            timeout_s=300,
        )
    finally:
        client.node.destroy_subscription(camera)
        client.node.destroy_publisher(forged_pub)
    assert forged, "no camera frame came to forge detections for"
    assert not result.reason.startswith("error"), result.reason
    (sim_log,) = graph.root.glob("logs/*/r3_packing_sim_node.log")
    log = sim_log.read_text()
    assert "Overflow" not in log and "message refused: ValueError: detection 'sugar box'" in log, log[-3000:]
    assert_serves_a_valid_episode(client)


def test_an_episode_records_its_task_as_the_registry_names_it(graph, client):
    """Found by a hostile client: RunTask task " 4" was served as packing task 4 (the registry reads
    it so), but the episode's events and steps in the bag carried " 4"."""
    from r3_msgs.msg import EpisodeEvent

    result, _ = client.run_task(goal(task=" 4", max_steps=1), timeout_s=400)
    assert result.reason in ("success", "step_budget"), result.reason
    topics = bag_topics(closed(Path(result.bag)))
    events = [(m.event, m.suite, m.task) for m in topics[names.EPISODE_EVENTS]]
    assert events == [(kind, "packing", "4") for kind in (EpisodeEvent.START, EpisodeEvent.END)]
    assert {m.task for m in topics[names.REASONER_STEPS]} == {"4"}


def test_a_perception_node_frozen_for_seconds_serves_the_instruction_once_it_wakes(graph, client):
    """Found by a hostile client: after a SIGSTOP of the perception node, it refused every frame the
    simulator sent again ("stamped more than 1.0 s from this node's clock") until the instruction
    failed: the simulator sent the frames again but not their time, which the frozen node had
    missed."""
    perception = graph.pids["r3_perception_node"]
    frozen = []

    def freeze(_handle) -> None:
        if not frozen and len(client.moved_after(started)) >= 5:  # the arm is moving
            os.kill(perception, signal.SIGSTOP)
            frozen.append(time.monotonic())
        elif frozen and len(frozen) == 1 and time.monotonic() - frozen[0] > 3.0:
            os.kill(perception, signal.SIGCONT)
            frozen.append(time.monotonic())

    started = time.monotonic()
    try:
        result, _ = client.run_task(goal(max_steps=2), during=freeze, timeout_s=400)
    finally:
        os.kill(perception, signal.SIGCONT)
    assert len(frozen) == 2, "the episode ended before the perception node was frozen and woken"
    assert result.reason in ("success", "step_budget"), result.reason


@pytest.mark.parametrize("second", ["valid", "unparsable"])
def test_a_goal_sent_while_an_instruction_runs_preempts_it_only_when_valid(graph, client, second):
    """Found by a hostile client: the packing simulator queued every FollowInstruction and MoveToPose
    goal behind the running one, so an outsider's goal ran in the middle of an episode with nothing
    to show for it. It now keeps the single-goal rule of the Language Table servers (SAFETY.md row
    19): a valid goal preempts the running one, whose result says so, and runs once it has stopped;
    one its grammar refuses preempts nothing and is refused after it."""
    from rclpy.action import ActionClient

    from r3_msgs.action import FollowInstruction, MoveToPose
    from r3_msgs.srv import ResetScene

    reset = client.node.create_client(ResetScene, names.RESET_SCENE)
    assert client.call(reset, ResetScene.Request(suite="packing", task="4", seed=0)).ok
    follow = ActionClient(client.node, FollowInstruction, names.FOLLOW_INSTRUCTION)
    move = ActionClient(client.node, MoveToPose, names.MOVE_TO_POSE)
    assert follow.wait_for_server(timeout_sec=30) and move.wait_for_server(timeout_sec=30)
    started = time.monotonic()
    running = follow.send_goal_async(
        FollowInstruction.Goal(instruction="Pack the sugar box into the medium tray.", suite="packing")
    )
    while len(client.moved_after(started)) < 5:  # the arm is moving
        client.spin(0.01)
        assert time.monotonic() - started < 120, "the instruction never moved the arm"
    if second == "valid":
        above = MoveToPose.Goal(gripper_opening=math.nan)
        above.target.header.frame_id = "panda_link0"
        above.target.pose.position.x, above.target.pose.position.z = 0.45, 0.4
        above.target.pose.orientation.x, above.target.pose.orientation.w = 1.0, 0.0  # pointing down
        sent = move.send_goal_async(above)
    else:
        sent = follow.send_goal_async(
            FollowInstruction.Goal(instruction="pack the unicorn into the moon", suite="packing")
        )
    results = []
    for future in (running, sent):
        while not future.done():
            client.spin(0.01)
        done = future.result().get_result_async()
        while not done.done():
            client.spin(0.01)
        results.append(done.result().result.reason)
    if second == "valid":
        assert results == ["preempted: a newer goal took over", "reached"], results
    else:
        assert not results[0].startswith(("preempted", "error")), results
        assert results[1].startswith("rejected: "), results


def test_a_frozen_packing_simulator_moves_no_joint_after_the_episode_error(graph, client):
    sim = graph.pids["r3_packing_sim_node"]
    frozen = []

    def freeze(_handle) -> None:
        if not frozen and len(client.moved_after(started)) >= 5:  # the arm is moving
            os.kill(sim, signal.SIGSTOP)
            frozen.append(time.monotonic())

    started = time.monotonic()
    try:
        result, ended = client.run_task(goal(), during=freeze, timeout_s=400)
        assert frozen, "the episode ended before the simulator was frozen"
        assert result.reason.startswith("error: ") and "r3_packing_sim_node" in result.reason, result.reason
        client.spin(max(0.0, frozen[0] + 8.0 - time.monotonic()))  # longer than the 5 s heartbeat timeout
    finally:
        os.kill(sim, signal.SIGCONT)
    client.spin(3.0)
    in_flight, begun = client.steps_after(ended, STEP_NS)
    print(
        f"\npacking simulator frozen 8 s mid-instruction: episode error after {ended - frozen[0]:.2f} s; "
        f"after it "
        f"{in_flight} control step in flight at the freeze completed, {begun} began"
    )
    assert begun == 0 and in_flight <= 1
    assert_serves_a_valid_episode(client, seed=1)

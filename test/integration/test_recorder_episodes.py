"""Messages of one episode that reach the recorder only after the next episode's START (a recorder
that fell behind) are not filed into the next episode's bag: it holds what was sent after its START."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from r3.data.bags import BagBusyError, read_messages
from r3.graph import names

pytestmark = pytest.mark.ros

TOPIC = "/r3_probe/chatter"
LATE = 50  # messages of episode A queued at the frozen recorder


def test_messages_sent_before_an_episodes_start_stay_out_of_its_bag(tmp_path, private_ros_env):
    import rclpy
    from sensor_msgs.msg import Image
    from std_msgs.msg import String

    from r3_msgs.msg import EpisodeEvent, Heartbeat
    from r3_ros.qos import EVENTS, HEARTBEAT

    env = private_ros_env(in_process=True)
    bags = tmp_path / "bags"
    recorder = subprocess.Popen(
        [sys.executable, "-m", "r3_recorder_node.main", "--ros-args", "-p", f"output_dir:={bags}"]
        + ["-p", f"topics:=['{TOPIC}']", "-p", "close_delay_s:=0.2"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    rclpy.init(domain_id=int(env["ROS_DOMAIN_ID"]))
    node = rclpy.create_node("r3_reasoner_node")  # the recorder takes episode events from it only
    events = node.create_publisher(EpisodeEvent, "/r3/episode_events", EVENTS)
    chatter = node.create_publisher(String, TOPIC, 100)
    node.create_publisher(Image, names.REASONER_FRAMES, 10)  # recorded always: ready once it is there
    states: list[str] = []
    node.create_subscription(
        Heartbeat,
        names.HEARTBEAT,
        lambda beat: states.append(beat.state) if beat.node.endswith("r3_recorder_node") else None,
        HEARTBEAT,
    )

    def spin(seconds: float, until=lambda: False) -> bool:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not until():
            rclpy.spin_once(node, timeout_sec=0.01)
        return until()

    def event(kind: int, episode: str) -> None:
        events.publish(EpisodeEvent(event=kind, episode_id=episode, suite="language_table", task="V"))

    try:
        assert spin(60, lambda: events.get_subscription_count() > 0), "the recorder did not come up"
        event(EpisodeEvent.START, "A")
        assert spin(30, lambda: names.recording_state("A") in states), "the recorder did not record A"
        for k in range(3):
            chatter.publish(String(data=f"A{k}"))
        spin(1.0)
        os.kill(recorder.pid, signal.SIGSTOP)
        try:
            for k in range(LATE):  # sent in episode A, delivered once the recorder wakes, after B's START
                chatter.publish(String(data=f"late-A{k}"))
            event(EpisodeEvent.END, "A")
            event(EpisodeEvent.START, "B")
            spin(0.5)
        finally:
            os.kill(recorder.pid, signal.SIGCONT)
        assert spin(30, lambda: names.recording_state("B") in states), "the recorder did not record B"
        for k in range(3):
            chatter.publish(String(data=f"B{k}"))
        spin(1.0)
        event(EpisodeEvent.END, "B")
        in_b = None
        deadline = time.monotonic() + 30
        while in_b is None and time.monotonic() < deadline:
            spin(0.2)
            try:
                in_b = [m.data for _, _, _, m in read_messages(bags / "B", {TOPIC})]
            except (BagBusyError, FileNotFoundError):
                pass
    finally:
        node.destroy_node()
        rclpy.shutdown()
        recorder.send_signal(signal.SIGINT)
        recorder.wait(timeout=30)
    assert in_b == ["B0", "B1", "B2"], in_b

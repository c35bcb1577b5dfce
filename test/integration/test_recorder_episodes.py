"""The recorder files each message into the bag of the episode it was sent in: messages of one episode
that reach it only after the next episode's START (a recorder that fell behind) stay out of the next
bag, and a message sent after START but before DDS had matched the recorder to its publisher is
still recorded."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest

from r3.data.bags import BagBusyError, read_messages
from r3.graph import names

pytestmark = pytest.mark.ros

TOPIC = "/r3_probe/chatter"
LATE = 50  # messages of episode A queued at the frozen recorder


@dataclass
class Session:
    """A recorder process of ``TOPIC`` and, in this process, the node it takes episodes from."""

    recorder: subprocess.Popen
    node: object
    bags: object
    states: list

    def spin(self, seconds: float, until=lambda: False) -> bool:
        import rclpy

        end = time.monotonic() + seconds
        while time.monotonic() < end and not until():
            rclpy.spin_once(self.node, timeout_sec=0.01)
        return until()

    def event(self, kind: int, episode: str) -> None:
        from r3_msgs.msg import EpisodeEvent

        self.events.publish(EpisodeEvent(event=kind, episode_id=episode, suite="language_table", task="V"))

    def bag(self, episode: str) -> list[str]:
        """The chatter of ``episode``'s bag, once the recorder has closed it."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            self.spin(0.2)
            try:
                return [m.data for _, _, _, m in read_messages(self.bags / episode, {TOPIC})]
            except (BagBusyError, FileNotFoundError):
                pass
        raise AssertionError(f"the recorder did not close {episode}'s bag")


@pytest.fixture
def session(tmp_path, private_ros_env):
    import rclpy
    from sensor_msgs.msg import Image

    from r3_msgs.msg import EpisodeEvent, Heartbeat
    from r3_ros.qos import EVENTS, HEARTBEAT

    env = private_ros_env(in_process=True)
    bags = tmp_path / "bags"
    recorder = subprocess.Popen(
        [sys.executable, "-m", "r3_recorder_node.main", "--ros-args", "-p", f"output_dir:={bags}"]
        + ["-p", f"topics:=['{TOPIC}']"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    rclpy.init(domain_id=int(env["ROS_DOMAIN_ID"]))
    node = rclpy.create_node("r3_reasoner_node")  # the recorder takes episode events from it only
    run = Session(recorder, node, bags, [])
    run.events = node.create_publisher(EpisodeEvent, "/r3/episode_events", EVENTS)
    node.create_publisher(Image, names.REASONER_FRAMES, 10)  # recorded always: ready once it is there
    node.create_subscription(
        Heartbeat,
        names.HEARTBEAT,
        lambda beat: run.states.append(beat.state) if beat.node.endswith("r3_recorder_node") else None,
        HEARTBEAT,
    )
    try:
        assert run.spin(60, lambda: run.events.get_subscription_count() > 0), "the recorder did not come up"
        yield run
    finally:
        node.destroy_node()
        rclpy.shutdown()
        recorder.send_signal(signal.SIGINT)
        recorder.wait(timeout=30)


def test_messages_sent_before_an_episodes_start_stay_out_of_its_bag(session):
    from std_msgs.msg import String

    from r3_msgs.msg import EpisodeEvent

    chatter = session.node.create_publisher(String, TOPIC, 100)
    session.event(EpisodeEvent.START, "A")
    assert session.spin(30, lambda: names.recording_state("A") in session.states), "A was not recorded"
    for k in range(3):
        chatter.publish(String(data=f"A{k}"))
    session.spin(1.0)
    os.kill(session.recorder.pid, signal.SIGSTOP)
    try:
        for k in range(LATE):  # sent in episode A, delivered once the recorder wakes, after B's START
            chatter.publish(String(data=f"late-A{k}"))
        session.event(EpisodeEvent.END, "A")
        session.event(EpisodeEvent.START, "B")
        session.spin(0.5)
    finally:
        os.kill(session.recorder.pid, signal.SIGCONT)
    assert session.spin(30, lambda: names.recording_state("B") in session.states), "B was not recorded"
    for k in range(3):
        chatter.publish(String(data=f"B{k}"))
    session.spin(1.0)
    session.event(EpisodeEvent.END, "B")
    assert session.bag("B") == ["B0", "B1", "B2"]


def test_messages_sent_before_end_reach_its_bag_when_the_recorder_was_frozen_across_end(session):
    """The bag closes once what was sent before END has stopped arriving, not after a fixed wait: a
    recorder frozen while 30 large messages and END were sent takes all of them into the bag."""
    from std_msgs.msg import String

    from r3_msgs.msg import EpisodeEvent

    chatter = session.node.create_publisher(String, TOPIC, LATE)
    session.event(EpisodeEvent.START, "A")
    assert session.spin(30, lambda: names.recording_state("A") in session.states), "A was not recorded"
    os.kill(session.recorder.pid, signal.SIGSTOP)
    try:
        for k in range(30):
            chatter.publish(String(data=f"A{k:02d}" + "x" * 200_000))  # each many UDP datagrams
        session.event(EpisodeEvent.END, "A")
        session.spin(0.5)
    finally:
        os.kill(session.recorder.pid, signal.SIGCONT)
    assert [m[:3] for m in session.bag("A")] == [f"A{k:02d}" for k in range(30)]


def test_a_message_sent_before_the_recorder_matched_its_publisher_is_recorded(session):
    """An episode's first image goes out at the reset, right after the recorder subscribed: its
    publisher may not have matched the new subscription yet, and DDS sends a sample only to the
    readers its writer has matched. r3's publishers keep their last samples (``recorded``) and the
    recorder subscribes so as to take them."""
    from std_msgs.msg import String

    from r3_msgs.msg import EpisodeEvent
    from r3_ros.qos import recorded

    session.event(EpisodeEvent.START, "A")
    assert session.spin(30, lambda: (session.bags / "A").is_dir()), "the recorder did not open A's bag"
    chatter = session.node.create_publisher(String, TOPIC, recorded(5))
    assert chatter.get_subscription_count() == 0  # not matched: a plain writer sends this to no one
    chatter.publish(String(data="first"))
    assert session.spin(30, lambda: names.recording_state("A") in session.states), "A was not recorded"
    assert session.spin(30, lambda: chatter.get_subscription_count() > 0)
    chatter.publish(String(data="second"))
    session.spin(1.0)
    session.event(EpisodeEvent.END, "A")
    assert session.bag("A") == ["first", "second"]


def test_a_publisher_that_keeps_no_samples_joining_later_is_recorded_too(session):
    """The recorder took the kept samples of the topic's first publisher; one that keeps none cannot
    match that subscription, so the recorder subscribes again in the way that matches both."""
    from std_msgs.msg import String

    from r3_msgs.msg import EpisodeEvent
    from r3_ros.qos import recorded

    keeping = session.node.create_publisher(String, TOPIC, recorded(5))
    session.event(EpisodeEvent.START, "A")
    assert session.spin(30, lambda: names.recording_state("A") in session.states), "A was not recorded"
    plain = session.node.create_publisher(String, TOPIC, 10)
    assert session.spin(30, lambda: plain.get_subscription_count() > 0), "the plain publisher was not matched"
    assert session.spin(30, lambda: keeping.get_subscription_count() > 0)
    keeping.publish(String(data="kept"))
    plain.publish(String(data="plain"))
    session.spin(1.0)
    session.event(EpisodeEvent.END, "A")
    assert sorted(session.bag("A")) == ["kept", "plain"]

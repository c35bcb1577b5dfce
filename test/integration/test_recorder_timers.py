"""The recorder's per-episode timers go away with their episode: each timer a node keeps, even a
cancelled one, is rebuilt into every wake-up's wait set, so timers left behind by finished episodes
would make the recorder slower with every episode of a long evaluation."""

from __future__ import annotations

import time

import pytest

from r3.graph import names

pytestmark = pytest.mark.ros

TOPIC = "/r3_probe/chatter"
EPISODES = 4


def test_finished_episodes_leave_no_timers_behind(tmp_path, private_ros_env):
    import rclpy
    from rclpy.executors import MultiThreadedExecutor
    from sensor_msgs.msg import Image
    from std_msgs.msg import String

    from r3_msgs.msg import EpisodeEvent
    from r3_recorder_node.main import RecorderNode
    from r3_ros.qos import EVENTS

    env = private_ros_env(in_process=True)
    args = ["--ros-args", "-p", f"output_dir:={tmp_path}", "-p", f"topics:=['{TOPIC}']"]
    rclpy.init(args=args, domain_id=int(env["ROS_DOMAIN_ID"]))
    executor = MultiThreadedExecutor()
    try:
        recorder = RecorderNode()
        reasoner = rclpy.create_node("r3_reasoner_node")  # the only node episodes are taken from
        events = reasoner.create_publisher(EpisodeEvent, names.EPISODE_EVENTS, EVENTS)
        reasoner.create_publisher(Image, names.REASONER_FRAMES, 10)
        reasoner.create_publisher(String, TOPIC, 10)
        for node in (recorder, reasoner):
            executor.add_node(node)

        def spin_until(done, seconds=30.0) -> bool:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline and not done():
                executor.spin_once(timeout_sec=0.05)
            return done()

        assert spin_until(lambda: recorder.heartbeat.state == "idle"), recorder.heartbeat.state
        timers = len(list(recorder.timers))
        for k in range(EPISODES):
            episode = f"episode_{k}"
            events.publish(EpisodeEvent(event=EpisodeEvent.START, episode_id=episode, task="V"))
            assert spin_until(lambda e=episode: recorder.heartbeat.state == names.recording_state(e))
            events.publish(EpisodeEvent(event=EpisodeEvent.END, episode_id=episode, reason="success"))
            assert spin_until(lambda: recorder.heartbeat.state == "idle"), f"{episode} was not closed"
        assert sorted(p.name for p in tmp_path.iterdir()) == [f"episode_{k}" for k in range(EPISODES)]
        assert len(list(recorder.timers)) == timers
    finally:
        executor.shutdown()
        rclpy.shutdown()

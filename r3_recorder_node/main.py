"""r3_recorder_node: records the configured topics into one rosbag2 MCAP bag per episode.

Episodes are delimited by EpisodeEvent START / END. Subscriptions take serialised messages
(``raw=True``), so recording never deserialises; the bytes go to the bag as they came (CDR), with
r3_msgs types registered from the interface files. Topic types are discovered from the graph, as
``ros2 bag record`` does. An episode that never sees END (the graph stopped, the reasoner died) is
closed as incomplete; ``r3_episode.yaml`` in the bag says so from the first message on.
"""

from __future__ import annotations

import importlib
import threading
import time
from pathlib import Path

from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.serialization import serialize_message

from r3.data.bags import EpisodeBagWriter, EpisodeInfo
from r3.graph import names
from r3.graph.node_params import NODE_PARAMETERS
from r3_msgs.msg import EpisodeEvent
from r3_ros.heartbeat import HeartbeatPublisher
from r3_ros.params import declare_parameters
from r3_ros.qos import EVENTS, RECORD
from r3_ros.spin import run_node

EVENTS_TYPE = "r3_msgs/msg/EpisodeEvent"


def recording_state(episode_id: str) -> str:
    """Heartbeat state while an episode's bag is open."""
    return f"recording:{episode_id}"


def message_class(msgtype: str):
    """'sensor_msgs/msg/Image' -> the rclpy message class."""
    package, kind, name = msgtype.split("/")
    return getattr(importlib.import_module(f"{package}.{kind}"), name)


class RecorderNode(Node):
    def __init__(self):
        super().__init__("r3_recorder_node")
        p = declare_parameters(self, NODE_PARAMETERS["r3_recorder_node"])
        self.output_dir = Path(p["output_dir"])
        self.topics = [t for t in p["topics"] if t != names.EPISODE_EVENTS]
        self.close_delay_s = p["close_delay_s"]
        self.lock = threading.Lock()
        self.closing: list[threading.Thread] = []
        self.writer: EpisodeBagWriter | None = None
        self.subscribed: dict[str, str] = {}
        wall = Clock(clock_type=ClockType.STEADY_TIME)
        self.create_subscription(EpisodeEvent, names.EPISODE_EVENTS, self.on_event, EVENTS)
        self.create_timer(0.2, self.discover, clock=wall)
        self.heartbeat = HeartbeatPublisher(self)
        self.discover()
        self.get_logger().info(f"recording {len(self.topics)} topics per episode into {self.output_dir}")

    def discover(self) -> None:
        """Subscribe to every configured topic that has appeared in the graph since the last look."""
        types = dict(self.get_topic_names_and_types())
        for topic in self.topics:
            if topic in self.subscribed or not types.get(topic):
                continue
            msgtype = types[topic][0]
            self.create_subscription(message_class(msgtype), topic, self.record_to(topic, msgtype), RECORD,
                                     raw=True)
            self.subscribed[topic] = msgtype

    def record_to(self, topic: str, msgtype: str):
        def callback(data: bytes) -> None:
            with self.lock:
                if self.writer is not None:
                    self.writer.write(topic, msgtype, time.time_ns(), data)
        return callback

    def on_event(self, msg: EpisodeEvent) -> None:
        if msg.event == EpisodeEvent.START:
            with self.lock:
                self.close_current(complete=False, reason="a new episode started before this one ended")
                info = EpisodeInfo(episode_id=msg.episode_id, suite=msg.suite, task=msg.task, seed=msg.seed,
                                   goal=msg.goal, backend=msg.backend)
                self.writer = EpisodeBagWriter(self.output_dir, info)
                self.writer.write(names.EPISODE_EVENTS, EVENTS_TYPE, time.time_ns(), serialize_message(msg))
            self.announce_when_ready(msg.episode_id)
            self.get_logger().info(f"recording episode {msg.episode_id}")
        elif msg.event == EpisodeEvent.END:
            self.record_to(names.EPISODE_EVENTS, EVENTS_TYPE)(serialize_message(msg))
            # Let messages still in flight (the last image, the last outcome) reach the bag first.
            timer = None

            def close() -> None:
                timer.cancel()
                with self.lock:
                    if self.writer is not None and self.writer.info.episode_id == msg.episode_id:
                        complete = not msg.reason.startswith("error")
                        self.writer.info.goal = msg.goal or self.writer.info.goal
                        self.close_current(complete, msg.reason, msg.success, msg.progress, msg.steps)

            timer = self.create_timer(self.close_delay_s, close, clock=Clock(clock_type=ClockType.STEADY_TIME))

    def announce_when_ready(self, episode_id: str) -> None:
        """Say "recording:<id>" (the reasoner waits for it) once every configured topic is
        subscribed and has a publisher, so that the episode's first messages are not lost."""
        timer = None

        def check() -> None:
            self.discover()
            if all(t in self.subscribed and self.count_publishers(t) > 0 for t in self.topics):
                timer.cancel()
                if self.writer is not None and self.writer.info.episode_id == episode_id:
                    self.heartbeat.state = recording_state(episode_id)

        timer = self.create_timer(0.02, check, clock=Clock(clock_type=ClockType.STEADY_TIME))

    def close_current(self, complete: bool, reason: str, success=False, progress=0.0, steps=0) -> None:
        """Detach the episode's writer (called with the lock held) and finish its bag on a thread of
        its own: converting the stream takes up to a few hundred ms, and recording callbacks that
        waited for it would stop taking messages, which backs up the publishers of the whole graph."""
        writer, self.writer = self.writer, None
        if writer is None:
            return
        self.heartbeat.state = "idle"

        def finish() -> None:
            path = writer.close(success=success, progress=progress, steps=steps, reason=reason, complete=complete)
            self.get_logger().info(f"bag {path} closed ({'complete' if complete else 'incomplete'}: {reason})")

        self.closing = [t for t in self.closing if t.is_alive()] + [threading.Thread(target=finish)]
        self.closing[-1].start()

    def shutdown(self) -> None:
        with self.lock:
            self.close_current(complete=False, reason="the recorder stopped before the episode ended")
        for thread in self.closing:
            thread.join()


def main(args=None) -> None:
    run_node(RecorderNode, args)


if __name__ == "__main__":
    main()

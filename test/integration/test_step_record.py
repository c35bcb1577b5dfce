"""A decision step's record goes out once its instruction is on its way (``EpisodeTopics.step_record``),
but it is stamped when the step was decided: a bag's reader (the LeRobot export) gives each pusher
command the instruction of the latest step stamped no later than it, and the instruction's first
commands may be stamped before its record is published. Published once, however often it is asked."""

from __future__ import annotations

import time

import numpy as np
import pytest

pytestmark = pytest.mark.ros


def test_a_step_record_is_stamped_when_decided_and_published_once(context):
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.time import Time
    from sensor_msgs.msg import Image

    from r3.episode_loop import StepDecision
    from r3.graph import names
    from r3.reasoning import ReasonerInput
    from r3.reasoning.backends.base import BackendOutput
    from r3.reasoning.parsing import ParsedResponse
    from r3.reasoning.reasoner import Decision
    from r3_msgs.msg import ReasonerStep
    from r3_ros.conversions import image_to_msg, ns_to_stamp, stamp_to_ns
    from r3_ros.episode_topics import EpisodeTopics
    from r3_ros.node import R3Node
    from r3_ros.qos import recorded

    node = R3Node("r3_step_record_probe", context=context)
    clock = node.get_clock()
    clock._set_ros_time_is_active(True)  # simulated time, set by this test as /clock would
    clock.set_ros_time_override(Time(seconds=5))
    steps, frames = [], []
    node.create_subscription(ReasonerStep, names.REASONER_STEPS, steps.append, recorded(50))
    node.create_subscription(Image, names.REASONER_FRAMES, frames.append, recorded(50))
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        topics = EpisodeTopics(node, "script")
        instruction = "push the red moon left"
        inp = ReasonerInput("language_table", "put the blocks in a line", [np.zeros((8, 8, 3), np.uint8)])
        output = BackendOutput(instruction, "stop", None, None, None, 0.0, 0.0, "script", 1, False)
        decision = Decision(output, ParsedResponse("r", None, instruction, instruction), inp)
        record = StepDecision(0, inp, decision, instruction, "", "", "")
        image = image_to_msg(np.zeros((8, 8, 3), np.uint8), ns_to_stamp(5 * 10**9), "camera")
        publish = topics.step_record("episode", "line", record, (0.0, 0.0, 0.0), [image])
        clock.set_ros_time_override(Time(seconds=7))  # the instruction's first steps went by
        publish()
        publish()  # the step's end asks again
        deadline = time.monotonic() + 10
        while not (steps and frames) and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            executor.spin_once(timeout_sec=0.05)
    finally:
        executor.shutdown()
        node.destroy_node()
    assert len(steps) == 1 and len(frames) == 1
    assert stamp_to_ns(steps[0].header.stamp) == 5 * 10**9
    assert steps[0].instruction == instruction and list(steps[0].image_stamps) == [image.header.stamp]

"""After the first SIGINT rclpy's context is down while a node's goals and episodes still run in its
pool (``r3_ros.shutdown``): they end at their next check, what they still send is dropped, and the
node is destroyed only once they have returned. The graph-level check is
``test_silent_nodes.py::test_a_node_stopped_by_sigint_mid_motion_ends_its_goal_and_exits``."""

from __future__ import annotations

import gc
import threading
import time
from types import SimpleNamespace

import pytest

pytestmark = pytest.mark.ros


def test_motions_and_episode_waits_end_once_the_context_is_down(context):
    from rclpy.node import Node

    from r3_ros.episode_watch import EpisodeError, EpisodeWatch
    from r3_ros.heartbeat import HeartbeatMonitor
    from r3_ros.stop import MotionGuard, StopPublisher, new_goal_id

    node = Node("winding_down", context=context)
    guard = MotionGuard(node, HeartbeatMonitor(node), 1.0, "/r3_reasoner_node")
    param = {
        "heartbeat_timeout_s": 5.0,
        "lowlevel_node": "/l",
        "sim_node": "/s",
        "perception_node": "",
        "max_episode_s": 900.0,
    }
    watch = EpisodeWatch(node, param)
    stops = StopPublisher(node)
    goal = SimpleNamespace(is_cancel_requested=False, is_active=True, goal_id=new_goal_id())
    watch.start()
    watch.check_alive()  # nothing to say yet: no verdict without this node's own beats
    assert guard.stop_reason(goal, watch_client=False) is None and not guard.stopping(goal)

    context.shutdown()
    assert guard.stopping(goal)
    assert guard.stop_reason(goal) == "error: /winding_down is shutting down; motion stopped"
    with pytest.raises(EpisodeError, match="^/winding_down is shutting down$"):
        watch.check_alive()  # waited for a verdict that this node's silent beats never give
    stops.stop("anything")  # raised RCLError: the publisher's context is invalid


def test_a_node_is_destroyed_only_once_its_pool_callbacks_have_returned(context):
    from rclpy.node import Node

    from r3_ros.executor import QueueAwareExecutor

    node = Node("pool", context=context)
    release, returned = threading.Event(), []
    node.create_timer(0.01, lambda: returned.append(release.wait(10)))  # runs in the pool
    executor = QueueAwareExecutor(num_threads=2, context=context)
    executor.add_node(node)
    deadline = time.monotonic() + 10
    while executor.submissions == 0 and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.05)
    assert executor.submissions == 1
    assert not executor.wind_down(0.1) and not returned  # still running
    threading.Timer(0.2, release.set).start()
    assert executor.wind_down(10.0) and returned == [True]
    executor.shutdown()


def test_a_callback_that_outlived_its_publisher_is_not_reported_as_never_retrieved(context, capsys):
    """A callback that fails because an entity it uses was destroyed under it (a node torn down while
    its executor still ran it) is teardown: rclpy printed "The following exception was never
    retrieved: cannot use Destroyable because destruction was requested" once the executor that held
    the failed task was collected. A spin that goes on still raises the failure."""
    from rclpy._rclpy_pybind11 import InvalidHandle
    from rclpy.node import Node
    from std_msgs.msg import Empty

    from r3_ros.executor import QueueAwareExecutor, at_once

    node = Node("outlived", context=context)
    publisher = node.create_publisher(Empty, "/outlived", 1)
    node.destroy_publisher(publisher)
    executor = QueueAwareExecutor(num_threads=2, context=context)
    executor.add_node(node)

    def publish_in_pool(executor):
        """A task that publishes in the pool once released (the spin has looked at it by then)."""
        started, release = threading.Event(), threading.Event()
        task = executor.create_task(lambda: started.set() or release.wait(5.0) and publisher.publish(Empty()))
        deadline = time.monotonic() + 5.0
        while not started.is_set() and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)  # hands it to the pool
        release.set()
        assert executor.wind_down(5.0) and task.done()
        return task

    executor.create_task(at_once(lambda: publisher.publish(Empty())))  # fails at once
    publish_in_pool(executor)
    executor.create_task(lambda: None)
    with pytest.raises(InvalidHandle):
        executor.spin_once(timeout_sec=1.0)  # the next round looks at the failed task
    failed = publish_in_pool(executor)
    executor.shutdown()  # the spin has ended: nobody looks at the failed task again
    del executor, failed
    gc.collect()
    assert "never retrieved" not in capsys.readouterr().err


def test_callbacks_still_queued_for_a_worker_at_shutdown_are_not_reported_as_never_retrieved(context, capsys):
    """rclpy's shutdown destroys the executor's guard condition, then lets the pool run the callbacks
    still queued to it; each triggers that guard before its callback and fails: in the integration
    suite a test's ``executor.shutdown()`` printed "The following exception was never retrieved:
    cannot use Destroyable because destruction was requested" for them."""
    from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
    from rclpy.node import Node

    from r3_ros.executor import QueueAwareExecutor

    node = Node("queued_at_shutdown", context=context)
    release = threading.Event()
    for _ in range(3):  # two keep both workers busy, the third waits for one
        node.create_timer(0.001, lambda: release.wait(5.0), callback_group=MutuallyExclusiveCallbackGroup())
    executor = QueueAwareExecutor(num_threads=2, context=context)
    executor.add_node(node)
    deadline = time.monotonic() + 5.0
    while executor.submissions < 3 and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.1)
    assert executor.submissions >= 3
    threading.Timer(0.1, release.set).start()
    executor.shutdown()  # returns once the pool has run what was queued
    del executor
    gc.collect()
    node.destroy_node()
    assert "never retrieved" not in capsys.readouterr().err

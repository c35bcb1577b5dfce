"""r3_ros.executor: a callback waiting for a worker is handed to the pool once, and the spinning thread
waits instead of spinning. rclpy's multi-threaded executor resubmitted it in a tight loop that held
the GIL (about 4,800 submissions a second here, a 10 ms timer silent for 1.4 s); a loaded node went
deaf that way and its pusher commands went stale."""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter

import pytest

pytestmark = pytest.mark.ros


def test_no_callback_is_resubmitted_while_it_waits_for_a_worker(context):
    """The simulator's shape: a command subscription and a 10 ms timer in one mutually exclusive
    group, commands that take a few ms each, arriving every 5 ms."""
    from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
    from rclpy.node import Node
    from std_msgs.msg import String

    from r3_ros.executor import QueueAwareExecutor

    node = Node("executor_probe", context=context)
    exclusive = MutuallyExclusiveCallbackGroup()
    ticks: list[float] = []

    def command(_msg) -> None:
        busy_until = time.monotonic() + 0.004
        while time.monotonic() < busy_until:
            pass

    publisher = node.create_publisher(String, "/executor_probe/commands", 10)
    node.create_subscription(String, "/executor_probe/commands", command, 10, callback_group=exclusive)
    node.create_timer(0.01, lambda: ticks.append(time.monotonic()), callback_group=exclusive)
    node.create_timer(
        0.005, lambda: publisher.publish(String(data="go")), callback_group=ReentrantCallbackGroup()
    )
    executor = QueueAwareExecutor(num_threads=8, context=context)
    submitted: Counter = Counter()
    started: set = set()
    resubmitted_while_queued, kept = [], []
    pool_submit = executor._executor.submit

    def counting_submit(fn, *args):
        task = args[-1] if args else fn
        kept.append(task)  # no id is reused while the test counts
        if submitted[id(task)] and id(task) not in started:
            resubmitted_while_queued.append(task)
        submitted[id(task)] += 1

        def run():
            started.add(id(task))
            fn(*args)

        return pool_submit(run)

    executor._executor.submit = counting_submit
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    time.sleep(2.0)
    executor.shutdown()
    node.destroy_node()
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    print(
        f"\n{sum(submitted.values())} submissions of {len(submitted)} callbacks in 2 s; "
        f"10 ms timer: longest gap {max(gaps) * 1000:.0f} ms"
    )
    assert len(ticks) > 20  # the timer kept running next to the commands
    assert not resubmitted_while_queued


def test_inline_callbacks_run_in_the_spinning_thread_and_pool_callbacks_do_not(context):
    """The lock-step loop's short callbacks (a state stored, a message written to a bag, a heartbeat)
    skip the pool: no queue, no worker's wake-up per message. Blocking callbacks still go to it."""
    from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
    from rclpy.node import Node
    from std_msgs.msg import String

    from r3_ros.executor import InlineCallbackGroup, QueueAwareExecutor

    node = Node("inline_probe", context=context)
    threads: dict[str, set] = {"inline": set(), "pool": set()}
    received: Counter = Counter()

    def on(kind):
        def callback(_msg) -> None:
            threads[kind].add(threading.get_ident())
            received[kind] += 1

        return callback

    publisher = node.create_publisher(String, "/inline_probe", 10)
    node.create_subscription(String, "/inline_probe", on("inline"), 10, callback_group=InlineCallbackGroup())
    node.create_subscription(
        String, "/inline_probe", on("pool"), 10, callback_group=MutuallyExclusiveCallbackGroup()
    )
    executor = QueueAwareExecutor(num_threads=4, context=context)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    deadline = time.monotonic() + 10
    while min(received["inline"], received["pool"]) < 20 and time.monotonic() < deadline:
        publisher.publish(String(data="x"))
        time.sleep(0.01)
    executor.shutdown()
    node.destroy_node()
    assert received["inline"] >= 20 and received["pool"] >= 20
    assert threads["inline"] == {spinner.ident}
    assert spinner.ident not in threads["pool"]
    assert executor.inline_runs >= received["inline"]
    assert executor.submissions >= received["pool"]


def test_polled_subscriptions_never_wake_the_executor_and_keep_each_topics_order(context):
    """The recorder's subscriptions: the executor leaves them out of its wait set, and
    ``deliver_pending`` hands every queued message to its callback, each topic in its own order."""
    from rclpy.node import Node
    from std_msgs.msg import String

    from r3.profiling import WakeLedger
    from r3_ros.executor import PolledCallbackGroup, QueueAwareExecutor, count_wakes, deliver_pending

    node = Node("polled_probe", context=context)
    delivered: list[tuple[str, str]] = []
    polled, publishers = PolledCallbackGroup(), {}
    for topic in ("/polled_probe/a", "/polled_probe/b"):
        publishers[topic] = node.create_publisher(String, topic, 100)
        node.create_subscription(
            String,
            topic,
            lambda msg, info, t=topic: delivered.append((t, msg.data)),
            100,
            callback_group=polled,
        )
    subscriptions = [s for s in node.subscriptions if s.callback_group is polled]
    executor = QueueAwareExecutor(num_threads=2, context=context)
    wakes = WakeLedger()
    count_wakes(executor, wakes)
    wakes.start()
    executor.add_node(node)
    heard = []  # a plain subscription beside them, which does wake the executor
    node.create_subscription(String, "/polled_probe/plain", heard.append, 10)
    node.create_publisher(String, "/polled_probe/plain", 10).publish(String(data="plain"))
    sent = []
    for k in range(40):
        topic = "/polled_probe/a" if k % 3 else "/polled_probe/b"
        publishers[topic].publish(String(data=f"{k:02d}" + "x" * (k % 5) * 40_000))  # some are fragmented
        sent.append((topic, f"{k:02d}"))
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.05)
    assert len(heard) == 1 and wakes.wakes["/polled_probe/plain"] == 1
    assert delivered == [] and not any(source in publishers for source in wakes.wakes), dict(wakes.wakes)
    while len(delivered) < len(sent) and time.monotonic() < deadline + 5:
        deliver_pending(subscriptions)
    for topic in publishers:
        assert [m[:2] for t, m in delivered if t == topic] == [m for t, m in sent if t == topic]
    executor.shutdown()


def test_a_waiting_threads_wakeup_runs_when_its_future_completes_not_in_a_later_round(context):
    """``Completion``'s done callback runs in the thread that completes the future (``at_once``):
    as a task of the executor's next round, handed to the pool, it delayed every answer 1-2 ms.
    Other done callbacks still wait for the executor."""
    from rclpy.task import Future

    from r3_ros.executor import QueueAwareExecutor
    from r3_ros.services import Completion

    executor = QueueAwareExecutor(num_threads=2, context=context)
    future, other = Future(executor=executor), []
    completion = Completion(future)
    future.add_done_callback(other.append)
    future.set_result("answer")  # no spinning at all
    assert completion._done.is_set()
    assert other == []  # a plain done callback is a task of the next round, as in rclpy
    executor.spin_once(timeout_sec=0.5)
    assert other == [future]
    executor.shutdown()


def test_an_action_result_goes_out_from_the_thread_that_ends_the_goal(context):
    """rclpy sends an action's result from a done callback of the goal's result future; run at once,
    it goes out from the worker that ran the execute callback, with no round of the server's executor
    in between (the result arrives while that executor is not spun at all)."""
    from rclpy.action import ActionClient, ActionServer
    from rclpy.node import Node

    from r3_msgs.action import FollowInstruction
    from r3_ros.executor import QueueAwareExecutor

    server_node, client_node = (
        Node("result_probe_server", context=context),
        Node("result_probe_client", context=context),
    )
    release, executed = threading.Event(), threading.Event()

    def execute(handle):
        executed.set()
        release.wait(5.0)
        handle.succeed()
        return FollowInstruction.Result(success=True, reason="done")

    ActionServer(server_node, FollowInstruction, "/result_probe", execute)
    client = ActionClient(client_node, FollowInstruction, "/result_probe")
    server, caller = QueueAwareExecutor(num_threads=2, context=context), QueueAwareExecutor(context=context)
    server.add_node(server_node)
    caller.add_node(client_node)
    assert client.wait_for_server(timeout_sec=5.0)
    sending = client.send_goal_async(FollowInstruction.Goal(instruction="x"))
    deadline = time.monotonic() + 5.0
    while not (sending.done() and executed.is_set()) and time.monotonic() < deadline:
        server.spin_once(timeout_sec=0.01)
        caller.spin_once(timeout_sec=0.01)
    result = sending.result().get_result_async()
    for _ in range(20):  # the result request reaches the server and is registered there
        server.spin_once(timeout_sec=0.01)
    spun = server.spin_once
    server.spin_once = None  # from here on the server's executor never runs a round
    release.set()
    while not result.done() and time.monotonic() < deadline:
        caller.spin_once(timeout_sec=0.01)
    assert result.done() and result.result().result.reason == "done"
    server.spin_once = spun
    server.shutdown()
    caller.shutdown()

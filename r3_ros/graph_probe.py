"""Which of a graph's nodes already run on this ROS domain.

A second graph on one domain (``r3 launch`` run twice, or two users on one network with the default
domain) answers every goal twice and refuses the other graph's resets, so neither serves: ``r3
launch`` asks this before it starts anything (``python -m r3_ros.graph_probe NAME...`` prints the
names found, one per line). A node counts when it beats (``r3_ros.heartbeat``): DDS discovery keeps
a killed participant's node names for its lease (20 s), and a graph relaunched after a kill must
not be refused for them. A running graph's beats are heard once discovery has matched this
process, which on one idle host takes 0.2 to 1 s and with a busy loop on every core up to about 3 s
(measured against a running graph): the probe is a guard for the common mistake, not a lock. A
graph not yet discovered when it ends (a machine busier still, two launches in the same second)
is not seen, and both graphs start as before.
"""

from __future__ import annotations

import sys
import time

#: How long to listen for the beats of nodes of the names asked about.
LISTEN_S = 3.0


def running(names: list[str], listen_s: float = LISTEN_S) -> list[str]:
    """Those of ``names`` (node names in the root namespace) heard beating within ``listen_s``."""
    import rclpy
    from rclpy.context import Context

    import r3_ros  # noqa: F401 - r3's DDS profile for the participant, as the graph's nodes have it
    from r3_ros.heartbeat import HeartbeatMonitor

    context = Context()
    rclpy.init(context=context)
    try:
        node = rclpy.create_node("r3_graph_probe", context=context)
        monitor = HeartbeatMonitor(node)
        deadline = time.monotonic() + listen_s
        while not (found := [n for n in names if monitor.silent_for(f"/{n}") < listen_s]):
            if time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        node.destroy_node()
        return found
    finally:
        rclpy.try_shutdown(context=context)


def main(argv: list[str] | None = None) -> int:
    for name in running(sys.argv[1:] if argv is None else argv):
        print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())

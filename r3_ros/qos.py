"""The QoS profiles of r3's topics, defined once (every node and helper imports them from here), and
the one QoS matching rule r3 applies itself."""

from __future__ import annotations

from rclpy.qos import QoSDurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data

#: The last message stays for late subscribers (simulator state, instance names).
LATCHED = QoSProfile(depth=1, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL)
#: The simulator states a node acts on (the low-level node, the reasoner), latched, with room for
#: several publishers' latest: a reader of depth 1 keeps one sample of all its writers together, so
#: a peer publishing states of its own pushed the simulator's out of the queue before it was taken.
STATES_HEARD = QoSProfile(depth=50, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL)
#: The recorder's bag names as the reasoner takes them, latched, with room beside the recorder's for
#: other publishers' names (refused by their sender): a node answering each START with a name of its
#: own pushed the recorder's out of a queue of one, and the episode ended "did not start recording".
BAGS_HEARD = QoSProfile(depth=50, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL)
#: The camera frames a reasoner decides on: room for a burst of other publishers' frames, which a
#: queue of 5 shared by every writer let push the simulator's one frame of a decision out before it
#: was taken (a flood of forged frames ended an episode "no state and image within 5 s" in CI).
FRAMES_HEARD_DEPTH = 50
#: Episode start/end: a recorder that subscribes late still sees the episode's START.
EVENTS = QoSProfile(depth=10, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL)
#: The same, for a simulator that takes the events only when a reset comes: room for a burst of
#: forged events in between, which would otherwise push the reasoner's START out of its queue.
EVENTS_HELD = QoSProfile(depth=256, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL)
#: The recorder's subscriptions: deep enough that a burst of images is not dropped while writing.
RECORD_DEPTH = 200
#: Heartbeats: every beat delivered, none kept for late joiners (a stale beat would say "alive").
HEARTBEAT = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
#: A watcher's heartbeats, taken when it asks or once a second (``HeartbeatMonitor``): room for a
#: second of beats from a graph of 100 nodes at 4 Hz.
HEARTBEATS_WATCHED = QoSProfile(depth=400, reliability=ReliabilityPolicy.RELIABLE)
#: Stops on /r3/stop_motion: reliable, and never replayed to a node that starts later.
STOP = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=QoSDurabilityPolicy.VOLATILE)
#: A driver's refusals of commands: each delivered, none replayed to a sender that starts later.
REFUSALS = QoSProfile(
    depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=QoSDurabilityPolicy.VOLATILE
)
#: Camera streams subscribed as the RealSense driver publishes them (best effort, a short queue).
SENSOR = qos_profile_sensor_data


def recorded(depth: int) -> QoSProfile:
    """A topic r3's own nodes publish and the recorder records: reliable, its last ``depth`` samples
    kept for a recorder that matched late. DDS matches a new reader to a writer asynchronously; a
    sample written before the writer had matched the recorder's reader never reaches it (a reset's
    first image was lost so, 1 run in 4)."""
    return QoSProfile(depth=depth, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL)


def recording(offered: list, depth: int = RECORD_DEPTH) -> QoSProfile:
    """A subscription to a topic whose publishers offer these QoS profiles (the recorder's, by
    default): it matches every one of them, and takes the kept samples when all of them keep some."""
    keep = bool(offered) and all(q.durability == QoSDurabilityPolicy.TRANSIENT_LOCAL for q in offered)
    best_effort = any(q.reliability == ReliabilityPolicy.BEST_EFFORT for q in offered)
    return QoSProfile(
        depth=depth,
        reliability=ReliabilityPolicy.BEST_EFFORT if best_effort else ReliabilityPolicy.RELIABLE,
        durability=QoSDurabilityPolicy.TRANSIENT_LOCAL if keep else QoSDurabilityPolicy.VOLATILE,
    )


def can_match(publisher, subscription) -> bool:
    """Whether a subscription's durability and reliability can match a publisher's (rclpy's
    ``qos_check_compatible`` misreads a discovered endpoint's infinite deadline as a deadline)."""
    return not (
        subscription.durability == QoSDurabilityPolicy.TRANSIENT_LOCAL
        and publisher.durability == QoSDurabilityPolicy.VOLATILE
    ) and not (
        subscription.reliability == ReliabilityPolicy.RELIABLE
        and publisher.reliability == ReliabilityPolicy.BEST_EFFORT
    )

"""The base of every r3 node: rclpy's Node without a QoS-event waitable per topic, and one QoS audit.

rclpy gives each publisher and subscription two event handlers by default (incompatible QoS,
incompatible type) that log a warning when a peer cannot match. Each handler is a waitable that the
executor adds to its wait set and polls in Python on every wake-up, whatever woke it: with the
15-30 topics of an r3 node they were half of a wake-up's CPU (0.19 against 0.09 ms in a node of 8
subscriptions and 7 publishers), and the lock-step loop wakes four processes per 0.1 s control step.
:class:`R3Node` creates its topics without them and keeps the diagnosis with one audit instead:
every :data:`AUDIT_PERIOD_S` it compares each of its topics with the peers the ROS graph reports and
logs once, for each peer that cannot match (``r3_ros.qos.can_match``: reliability, durability) or
uses another message type, who it is and what differs. A topic created with ``event_callbacks``
of its own keeps them.

On sim time, rclpy's ``/clock`` subscription is taken when the node reads its time (:meth:`R3Node.now`)
and every :data:`CLOCK_TAKE_S`, instead of waking the executor once per ``/clock`` message.
"""

from __future__ import annotations

import threading

from rclpy._rclpy_pybind11 import InvalidHandle
from rclpy.clock import Clock, ClockType
from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks
from rclpy.exceptions import ParameterNotDeclaredException
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile
from rclpy.time import Time
from rclpy.time_source import CLOCK_TOPIC

from r3_ros.executor import InlineCallbackGroup, PolledCallbackGroup, deliver_pending
from r3_ros.qos import can_match
from r3_ros.refusals import refusing_message

#: Seconds of steady time between two QoS audits of a node's topics.
AUDIT_PERIOD_S = 2.0
#: Wall seconds between takes of /clock while nothing reads the time (an action goal's stamp, say).
CLOCK_TAKE_S = 0.25
#: The ROS graph's name for an endpoint whose node it has not learnt yet (audited once it has).
UNKNOWN_NODE = "_NODE_NAME_UNKNOWN_"


def named_publishers(node, topic: str, qualified: bool = False) -> dict[bytes, str]:
    """The node name of each publisher on ``topic`` (with its namespace when ``qualified``), by DDS
    gid, where the graph view gives one yet (``r3_ros.senders`` waits for the rest)."""
    return {
        bytes(e.endpoint_gid): f"{e.node_namespace.rstrip('/')}/{e.node_name}" if qualified else e.node_name
        for e in node.get_publishers_info_by_topic(topic)
        if e.node_name != UNKNOWN_NODE
    }


def type_name(msg_type) -> str:
    """``sensor_msgs/msg/Image`` for ``sensor_msgs.msg.Image``: how the ROS graph names a type."""
    package, kind = msg_type.__module__.split(".")[:2]
    return f"{package}/{kind}/{msg_type.__name__}"


def endpoint_node(endpoint) -> str:
    """The fully qualified name of the node of a graph endpoint (``/cell/peer``)."""
    return f"{endpoint.node_namespace.rstrip('/')}/{endpoint.node_name}"


def matchable_subscribers(node: Node, publisher) -> list:
    """The subscribers of ``publisher``'s topic in ``node``'s view of the graph that can match it:
    the same message type and a QoS that can match (``r3_ros.qos.can_match``). Only these can ever
    count in ``publisher.get_subscription_count()``; a peer of another type or an incompatible QoS
    never will, and waiting for it would stall on anyone's whim."""
    ours = type_name(publisher.msg_type)
    return [
        s
        for s in node.get_subscriptions_info_by_topic(publisher.topic_name)
        if s.topic_type == ours and can_match(publisher.qos_profile, s.qos_profile)
    ]


def _describe(qos: QoSProfile) -> str:
    return f"{qos.reliability.name.lower()}, {qos.durability.name.lower()}"


class R3Node(Node):
    """A node whose peers' QoS mismatches are logged, and whose ``/clock`` (on sim time) is taken
    when the time is read (:meth:`now`) and every ``CLOCK_TAKE_S`` of wall time, not by an executor
    woken for each message: a packing decision step's simulated seconds woke the perception and
    reasoner nodes 73 times each for it."""

    def __init__(self, node_name: str, **kwargs):
        # Node.__init__ subscribes to /clock for use_sim_time, through create_subscription below.
        self._clock_subscriptions: list = []
        self._clock_timer = None
        self._clock_lock = threading.Lock()  # two takes at once could set the time back
        super().__init__(node_name, **kwargs)
        self._qos_reported: set[tuple] = set()
        self.create_timer(
            AUDIT_PERIOD_S,
            self.audit_qos,
            callback_group=InlineCallbackGroup(),
            clock=Clock(clock_type=ClockType.STEADY_TIME),
        )

    def create_publisher(self, msg_type, topic, qos_profile, *, event_callbacks=None, **kwargs):
        if event_callbacks is None:
            event_callbacks = PublisherEventCallbacks(use_default_callbacks=False)
        return super().create_publisher(
            msg_type, topic, qos_profile, event_callbacks=event_callbacks, **kwargs
        )

    def create_subscription(self, msg_type, topic, callback, qos_profile, *, event_callbacks=None, **kwargs):
        if event_callbacks is None:
            event_callbacks = SubscriptionEventCallbacks(use_default_callbacks=False)
        clock = topic == CLOCK_TOPIC and kwargs.get("callback_group") is None  # rclpy's TimeSource
        if clock:
            kwargs["callback_group"] = PolledCallbackGroup()
            # Anyone may publish on /clock: rclpy's callback raises on a time it cannot hold (negative
            # seconds), which would end the node; such a message is dropped with the reason logged.
            callback = refusing_message(self, callback)
        subscription = super().create_subscription(
            msg_type, topic, callback, qos_profile, event_callbacks=event_callbacks, **kwargs
        )
        if clock:
            self._clock_subscriptions.append(subscription)
            if self._clock_timer is None:  # one, however often sim time is switched on
                steady, inline = Clock(clock_type=ClockType.STEADY_TIME), InlineCallbackGroup()
                self._clock_timer = self.create_timer(
                    CLOCK_TAKE_S, self.take_clock, callback_group=inline, clock=steady
                )
        return subscription

    def _check_undeclared_parameters(self, parameter_list) -> None:
        """rclpy's check, whose refusal names the parameters this node does not declare (rclpy's own
        spends its generator of names before it lists them: "undeclared parameter(s): []")."""
        named = [p.name for p in parameter_list if isinstance(p, Parameter)]
        undeclared = [name for name in named if name not in self._parameters]
        if undeclared and not self._allow_undeclared_parameters:
            raise ParameterNotDeclaredException(undeclared)
        super()._check_undeclared_parameters(parameter_list)

    def take_clock(self) -> None:
        """Set this node's time from the ``/clock`` DDS has received (nothing without sim time)."""
        if not self._clock_subscriptions:  # never on sim time: each read of the time comes here
            return
        with self._clock_lock:
            live = set(self.subscriptions)  # rclpy drops its /clock subscription when sim time goes off
            self._clock_subscriptions = [s for s in self._clock_subscriptions if s in live]
            try:
                deliver_pending(self._clock_subscriptions)
            except InvalidHandle:  # the node is being destroyed
                pass

    def now(self) -> Time:
        """This node's time: on sim time, the latest ``/clock`` received."""
        self.take_clock()
        return self.get_clock().now()

    def audit_qos(self) -> list[str]:
        """Warn about each peer of this node's topics that cannot match it (once per peer and
        topic); returns the new warnings."""
        me = self.get_fully_qualified_name()
        found = []
        endpoints = [(p, "publishes", self.get_subscriptions_info_by_topic) for p in self.publishers]
        endpoints += [(s, "subscribes to", self.get_publishers_info_by_topic) for s in self.subscriptions]
        for endpoint, verb, peers_of in endpoints:
            ours = type_name(endpoint.msg_type)
            for peer in peers_of(endpoint.topic_name):
                name = endpoint_node(peer)
                if name == me or peer.node_name == UNKNOWN_NODE:
                    continue
                if peer.topic_type != ours:
                    why = f"it uses {peer.topic_type}, this node {ours}"
                elif verb == "publishes" and not can_match(endpoint.qos_profile, peer.qos_profile):
                    why = (
                        f"it asks {_describe(peer.qos_profile)}, this node offers "
                        f"{_describe(endpoint.qos_profile)}"
                    )
                elif verb == "subscribes to" and not can_match(peer.qos_profile, endpoint.qos_profile):
                    why = (
                        f"it offers {_describe(peer.qos_profile)}, this node asks "
                        f"{_describe(endpoint.qos_profile)}"
                    )
                else:
                    continue
                key = (endpoint.topic_name, verb, name, why)
                if key in self._qos_reported:
                    continue
                self._qos_reported.add(key)
                found.append(
                    f"this node {verb} {endpoint.topic_name}, and {name} cannot match it: {why}; "
                    "no message flows between them"
                )
                self.get_logger().warning(found[-1])
        return found

"""What each r3 node publishes, subscribes, serves and calls, under its default names.

The nodes create exactly these interfaces (an integration test compares this table with the
running graph), so profiles can be checked for wiring without starting anything. ``/clock`` is not
listed: every node with ``use_sim_time`` subscribes to it, which the graph description adds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from r3.graph import names


@dataclass
class NodeInterface:
    publishes: dict[str, str] = field(default_factory=dict)  # topic -> type
    subscribes: dict[str, str] = field(default_factory=dict)
    services: list[str] = field(default_factory=list)  # served
    service_clients: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)  # served
    action_clients: list[str] = field(default_factory=list)
    #: Subscribed topics a profile need not publish: the node works without them (a driver that
    #: refuses nothing publishes no refusals).
    optional: frozenset[str] = frozenset()

    def remapped(self, remappings: dict[str, str]) -> NodeInterface:
        """The interface after ROS remapping rules ``from:=to`` on fully qualified names."""

        def r(name: str) -> str:
            return remappings.get(name, name)

        return NodeInterface(
            publishes={r(t): v for t, v in self.publishes.items()},
            subscribes={r(t): v for t, v in self.subscribes.items()},
            services=[r(s) for s in self.services],
            service_clients=[r(s) for s in self.service_clients],
            actions=[r(a) for a in self.actions],
            action_clients=[r(a) for a in self.action_clients],
            optional=frozenset(r(t) for t in self.optional),
        )


HEARTBEAT = {names.HEARTBEAT: "r3_msgs/msg/Heartbeat"}
STOP_MOTION = {names.STOP_MOTION: "std_msgs/msg/String"}
#: A simulator follows the episode events so that no ResetScene moves a running episode's scene; a
#: graph without a reasoner has none, and every reset is served.
EPISODES = {names.EPISODE_EVENTS: "r3_msgs/msg/EpisodeEvent"}

NODE_INTERFACES: dict[str, NodeInterface] = {
    "r3_sim_node": NodeInterface(
        publishes={
            names.CAMERA_IMAGE: "sensor_msgs/msg/Image",
            names.CAMERA_INFO: "sensor_msgs/msg/CameraInfo",
            names.JOINT_STATES: "sensor_msgs/msg/JointState",
            names.CLOCK: "rosgraph_msgs/msg/Clock",
            names.PRIVILEGED_STATE: "r3_msgs/msg/PrivilegedState",
            names.SCENE_SNAPSHOT: "r3_msgs/msg/SceneSnapshot",
            names.PUSHER_REFUSALS: "r3_msgs/msg/CommandRefusal",
            **HEARTBEAT,
        },
        subscribes={
            names.PUSHER_COMMAND: "geometry_msgs/msg/Vector3Stamped",
            names.FOLLOW_INSTRUCTION_STATUS: "action_msgs/msg/GoalStatusArray",
            **EPISODES,
        },
        services=[names.RESET_SCENE],
        # Without a FollowInstruction server (commands from a teleoperator) settle_s finds decision points.
        optional=frozenset({names.FOLLOW_INSTRUCTION_STATUS, *EPISODES}),
    ),
    "r3_packing_sim_node": NodeInterface(
        publishes={
            names.CAMERA_IMAGE: "sensor_msgs/msg/Image",
            names.CAMERA_INFO: "sensor_msgs/msg/CameraInfo",
            names.WRIST_IMAGE: "sensor_msgs/msg/Image",
            names.WRIST_INFO: "sensor_msgs/msg/CameraInfo",
            names.JOINT_STATES: "sensor_msgs/msg/JointState",
            names.CLOCK: "rosgraph_msgs/msg/Clock",
            names.PRIVILEGED_STATE: "r3_msgs/msg/PrivilegedState",
            names.SCENE_SNAPSHOT: "r3_msgs/msg/SceneSnapshot",
            # grounding: perception: what the perception node's sim backend reads
            names.CAMERA_DEPTH: "sensor_msgs/msg/Image",
            names.SIM_INSTANCES: "sensor_msgs/msg/Image",
            names.SIM_INSTANCE_NAMES: "std_msgs/msg/String",
            **HEARTBEAT,
        },
        subscribes={
            **STOP_MOTION,
            names.HEARTBEAT: "r3_msgs/msg/Heartbeat",
            names.DETECTED_OBJECTS: "r3_msgs/msg/DetectedObjects",
            **EPISODES,
        },
        services=[names.RESET_SCENE],
        service_clients=[names.GROUND_POINT],
        actions=[names.FOLLOW_INSTRUCTION, names.MOVE_TO_POSE],
        optional=frozenset(EPISODES),
    ),
    "r3_suite_sim_node": NodeInterface(  # a suite's own simulator (Suite.make_sim), low-level side too
        publishes={
            names.CAMERA_IMAGE: "sensor_msgs/msg/Image",
            names.PRIVILEGED_STATE: "r3_msgs/msg/PrivilegedState",
            **HEARTBEAT,
        },
        subscribes={**EPISODES},
        services=[names.RESET_SCENE],
        actions=[names.FOLLOW_INSTRUCTION],
        optional=frozenset(EPISODES),
    ),
    "r3_lowlevel_node": NodeInterface(
        publishes={names.PUSHER_COMMAND: "geometry_msgs/msg/Vector3Stamped", **HEARTBEAT},
        subscribes={
            names.PRIVILEGED_STATE: "r3_msgs/msg/PrivilegedState",
            names.PUSHER_REFUSALS: "r3_msgs/msg/CommandRefusal",
            names.HEARTBEAT: "r3_msgs/msg/Heartbeat",
            **STOP_MOTION,
        },
        optional=frozenset({names.PUSHER_REFUSALS}),
        actions=[names.FOLLOW_INSTRUCTION],
    ),
    "r3_reasoner_node": NodeInterface(
        publishes={
            names.REASONER_STEPS: "r3_msgs/msg/ReasonerStep",
            names.INSTRUCTION_OUTCOMES: "r3_msgs/msg/InstructionOutcome",
            names.EPISODE_EVENTS: "r3_msgs/msg/EpisodeEvent",
            names.REASONER_FRAMES: "sensor_msgs/msg/Image",
            **HEARTBEAT,
            **STOP_MOTION,  # stops the FollowInstruction it runs for a stopped or cancelled RunTask
        },
        subscribes={
            names.CAMERA_IMAGE: "sensor_msgs/msg/Image",  # plus the wrist camera when `wrist_camera` is set
            names.CAMERA_INFO: "sensor_msgs/msg/CameraInfo",  # the expert's image points (semantic)
            names.PRIVILEGED_STATE: "r3_msgs/msg/PrivilegedState",
            names.HEARTBEAT: "r3_msgs/msg/Heartbeat",
            names.RECORDER_BAGS: "std_msgs/msg/String",  # unless `recorder_node` is '' (no recorder)
            **STOP_MOTION,  # a stop naming its RunTask goal
        },
        # Only the semantic expert reads camera_info; a suite's own simulator may show no camera model.
        optional=frozenset({names.CAMERA_INFO}),
        service_clients=[names.RESET_SCENE],
        actions=[names.RUN_TASK],
        action_clients=[names.FOLLOW_INSTRUCTION],
    ),
    "r3_execution_node": NodeInterface(  # a real arm's MoveToPose through MoveIt (sim: r3_packing_sim_node)
        publishes=dict(HEARTBEAT),
        actions=[names.MOVE_TO_POSE],
    ),
    "r3_perception_node": NodeInterface(
        publishes={
            names.DETECTED_OBJECTS: "r3_msgs/msg/DetectedObjects",
            names.PERCEPTION_ANNOTATED: "sensor_msgs/msg/Image",
            **HEARTBEAT,
        },
        subscribes={
            names.CAMERA_IMAGE: "sensor_msgs/msg/Image",
            names.CAMERA_DEPTH: "sensor_msgs/msg/Image",
            names.CAMERA_INFO: "sensor_msgs/msg/CameraInfo",
            names.EPISODE_EVENTS: "r3_msgs/msg/EpisodeEvent",  # each episode starts from `query`
            # backend: sim only
            names.SIM_INSTANCES: "sensor_msgs/msg/Image",
            names.SIM_INSTANCE_NAMES: "std_msgs/msg/String",
        },
        services=[names.GROUND_POINT, names.SET_PERCEPTION_QUERY],
    ),
    "r3_realsense_node": NodeInterface(
        publishes={
            names.CAMERA_IMAGE: "sensor_msgs/msg/Image",
            names.CAMERA_INFO: "sensor_msgs/msg/CameraInfo",
            names.CAMERA_DEPTH: "sensor_msgs/msg/Image",
            names.CAMERA_DEPTH_INFO: "sensor_msgs/msg/CameraInfo",
            **HEARTBEAT,
        },
    ),
    "r3_recorder_node": NodeInterface(
        publishes={names.RECORDER_BAGS: "std_msgs/msg/String", **HEARTBEAT},
        subscribes={
            names.EPISODE_EVENTS: "r3_msgs/msg/EpisodeEvent",
            names.REASONER_FRAMES: "sensor_msgs/msg/Image",
        },  # plus the configured topics
    ),
}


def _published_types() -> dict[str, str]:
    types: dict[str, str] = {}
    for node, interface in NODE_INTERFACES.items():
        for topic, msgtype in interface.publishes.items():
            if types.setdefault(topic, msgtype) != msgtype:
                raise ValueError(f"{node} publishes {topic} as {msgtype}, another node as {types[topic]}")
    return types


#: topic -> the message type r3's nodes publish it with (default names).
PUBLISHED_TYPES = _published_types()


def with_controller(sim: NodeInterface) -> NodeInterface:
    """``r3_sim_node``'s interface with a ``controller``: it serves FollowInstruction itself (watching
    the stops and the reasoner's heartbeat, as the low-level node does) and publishes each command it
    applies; it takes no commands and follows no one's FollowInstruction status."""
    taken = {names.PUSHER_COMMAND, names.FOLLOW_INSTRUCTION_STATUS}
    return NodeInterface(
        publishes={**sim.publishes, names.PUSHER_COMMAND: "geometry_msgs/msg/Vector3Stamped"},
        subscribes={
            **{t: ty for t, ty in sim.subscribes.items() if t not in taken},
            names.HEARTBEAT: "r3_msgs/msg/Heartbeat",
            **STOP_MOTION,
        },
        services=list(sim.services),
        actions=[names.FOLLOW_INSTRUCTION],
        optional=sim.optional - taken,
    )

"""Default topic, service and action names of the r3 graph, in one place.

Camera names follow the RealSense ROS driver (``/camera/camera/...``), so a real camera's topics
need no remapping. The privileged topics say so in their names: only the expert reasoner, the
evaluator and the simulator-only scripted policy read them.
"""

CAMERA_IMAGE = "/camera/camera/color/image_raw"
CAMERA_INFO = "/camera/camera/color/camera_info"
CAMERA_DEPTH = "/camera/camera/aligned_depth_to_color/image_raw"
CAMERA_DEPTH_INFO = "/camera/camera/aligned_depth_to_color/camera_info"
WRIST_IMAGE = "/wrist_camera/camera/color/image_raw"
WRIST_INFO = "/wrist_camera/camera/color/camera_info"
JOINT_STATES = "/joint_states"
CLOCK = "/clock"
#: A simulator publishes /clock at most this often in simulated time while the robot moves, and at
#: every reset, frame it must be seen with and decision point: each message wakes every node on sim
#: time (rclpy's executor, about 0.7 ms of CPU a wake), and a control step is 0.05-0.1 s.
CLOCK_PERIOD_NS = 250_000_000
PUSHER_COMMAND = "/pusher/command"
#: A pusher command older than this (wall clock, from its DDS source stamp) is stale: the pusher driver
#: (r3_sim_node) refuses it, and undoes a step it was running when the command went stale.
PUSHER_COMMAND_DEADLINE_S = 1.0
#: The pusher driver's answer to each command it refused (r3_msgs/CommandRefusal).
PUSHER_REFUSALS = "/pusher/refusals"

PRIVILEGED_STATE = "/sim/privileged/state"
SCENE_SNAPSHOT = "/sim/snapshot"
#: The base camera's per-pixel instance ids (32SC1, aligned with colour and depth), for the
#: perception node's sim backend (ground truth, so privileged).
SIM_INSTANCES = "/sim/privileged/instances"
SIM_INSTANCE_NAMES = "/sim/privileged/instance_names"  # std_msgs/String, latched: JSON {"id": "name"}
RESET_SCENE = "/sim/reset_scene"

FOLLOW_INSTRUCTION = "/r3/follow_instruction"
MOVE_TO_POSE = "/r3/execution/move_to_pose"
RUN_TASK = "/r3/run_task"
REASONER_STEPS = "/r3/reasoner/steps"
INSTRUCTION_OUTCOMES = "/r3/reasoner/outcomes"
EPISODE_EVENTS = "/r3/episode_events"
#: The node whose episode events count: the recorder and the simulators take START and END from it only.
EPISODE_SOURCE = "r3_reasoner_node"


def is_episode_source(node: str) -> bool:
    """``node`` (a node name, with its namespace or without) is ``EPISODE_SOURCE``, in any namespace."""
    return node.rpartition("/")[2] == EPISODE_SOURCE


#: The frames each decision step was made on (sensor_msgs/Image, reliable), recorded in every bag;
#: ReasonerStep.image_stamps names them. The camera topics stay best effort for live viewing.
REASONER_FRAMES = "/r3/reasoner/frames"
RECORDER_BAGS = "/r3/recorder/bags"  # std_msgs/String, latched: absolute path of the bag being recorded
HEARTBEAT = "/r3/heartbeat"
#: Wall seconds between two beats of every node (``r3_ros.heartbeat``).
HEARTBEAT_PERIOD_S = 0.25
STOP_MOTION = "/r3/stop_motion"  # std_msgs/String: the id of a goal to stop at once (r3_ros/stop.py)

DETECTED_OBJECTS = "/r3/perception/objects"
PERCEPTION_ANNOTATED = "/r3/perception/annotated/image_raw"
GROUND_POINT = "/r3/perception/ground_point"
SET_PERCEPTION_QUERY = "/r3/perception/set_query"


#: The recorder's heartbeat state while a configured topic has no publisher (or subscription) yet:
#: discovery, which a loaded machine can stretch over many seconds, is waited for before START.
RECORDER_WAITING = "waiting_for_publishers"


def recording_state(episode_id: str) -> str:
    """The recorder's heartbeat state while an episode's bag is open (the reasoner waits for it
    before the first step and for its end after the episode's END)."""
    return f"recording:{episode_id}"


def action_status(action: str) -> str:
    """The status topic (action_msgs/GoalStatusArray, latched) that every ROS 2 action ``action`` has."""
    return f"{action}/_action/status"


#: r3_sim_node takes the end of a FollowInstruction goal as a decision point.
FOLLOW_INSTRUCTION_STATUS = action_status(FOLLOW_INSTRUCTION)

"""What parameters each r3 node declares: one schema per node, the only place they are written.

Beside :mod:`r3.graph.interfaces` (what each node creates) because both describe a node without
starting it: the nodes declare these through ``r3_ros.params``, the graph description's overrides are
checked against them without rclpy, and the README's tables are generated from them:

    python -m r3.graph.node_params --markdown        # print the tables
    python -m r3.graph.node_params --readme README.md  # rewrite the README's generated section
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from r3.graph import names
from r3.graph.params import NodeParameters, ParameterSpec, ordered
from r3.lowlevel import GROUNDINGS, POLICIES
from r3.perception.segmenters import SEGMENTERS
from r3.reasoning.prompts import HISTORY_MODES
from r3.safety.goals import INTERFACE_ANSWERS, interfaces_help
from r3.safety.guard import MAX_CONSECUTIVE_INVALID
from r3.sim import IMAGE_SIDES

P = ParameterSpec
#: rclpy declares use_sim_time on every node; r3 describes it. (rclpy's read-only
#: start_type_description_service carries rclpy's own description.)
USE_SIM_TIME = P(
    "use_sim_time",
    "bool",
    False,
    "Take time from /clock (the simulator's) instead of the system clock.",
    read_only=False,
)
IMAGE_SIZE = (
    P("image_width", "int", 320, "Camera image width, pixels.", range=IMAGE_SIDES),
    P("image_height", "int", 240, "Camera image height, pixels.", range=IMAGE_SIDES),
)
#: A fully qualified ROS node name, as heartbeats carry it.
NODE_NAME = r"(/[A-Za-z_][A-Za-z0-9_]*)+"
#: The shortest silence a watchdog may call death: two heartbeat periods. A node that beats on time is
#: silent for a whole period between two beats (a reasoner given 0.1 s ended its episode naming the
#: recorder dead).
SILENCE_MIN_S = 2 * names.HEARTBEAT_PERIOD_S
#: Declared by every node that moves an actuator (r3_ros.stop.MotionGuard reads them).
MOTION_GUARD = (
    P(
        "client_timeout_s",
        "float",
        1.0,
        "Watchdog: stop the goal's motion when `reasoner_node` has been silent "
        "(no heartbeat) this long, wall seconds.",
        range=(SILENCE_MIN_S, 60.0),
    ),
    P(
        "reasoner_node",
        "str",
        "/r3_reasoner_node",
        "Fully qualified name of the node that sends the goals, watched through its heartbeat.",
        pattern=NODE_NAME,
    ),
)
SECONDS = (0.1, 3600.0)  # the range of a wall-clock timeout
#: The shortest wait of r3_lowlevel_node for the answer to a command: above the pusher driver's
#: command deadline, so that a stopped instruction ends only once its last command can move nothing
#: (the driver refuses it, or undoes its step, once it is stale), with half that deadline again for
#: the answer's way back (what the driver counts as late on a command's way there).
STATE_TIMEOUT_MIN_S = 1.5 * names.PUSHER_COMMAND_DEADLINE_S
#: Declared by every node that serves FollowInstruction with a Language Table policy.
DEFAULT_MAX_STEPS = P(
    "default_max_steps",
    "int",
    20,
    "Control steps of an instruction whose goal gives no budget.",
    range=(1, 10000),
)

NODE_PARAMETERS: dict[str, NodeParameters] = {
    s.node: s
    for s in (
        NodeParameters(
            "r3_sim_node",
            (
                USE_SIM_TIME,
                P(
                    "suite",
                    "str",
                    "language_table",
                    "The suite simulated (grocery packing runs in r3_packing_sim_node).",
                    choices=("language_table",),
                ),
                *IMAGE_SIZE,
                P(
                    "camera_rate_hz",
                    "float",
                    0.0,
                    "Camera frames per second of simulated time; 0 = a frame only at each decision point.",
                    range=(0.0, 1000.0),
                ),
                P(
                    "settle_s",
                    "float",
                    0.05,
                    "Wall time without commands that counts as a decision point (a frame and a "
                    "snapshot are published) when no FollowInstruction goal's end marks one "
                    "(commands from a teleoperator).",
                    range=(0.001, 10.0),
                ),
                P(
                    "camera_frame",
                    "str",
                    "camera_color_optical_frame",
                    "frame_id of the images and camera_info.",
                ),
                P(
                    "controller",
                    "str",
                    "",
                    "A low-level policy (r3.lowlevel.POLICIES) to run inside this process as the "
                    "pusher's controller, serving FollowInstruction itself, as ros2_control runs a "
                    "controller beside its hardware: the lock-step control loop never crosses DDS, "
                    "and each command it applies is published on /pusher/command for the record. "
                    "Empty: commands come on /pusher/command (r3_lowlevel_node, a teleoperator).",
                    choices=("", *POLICIES.names()),
                ),
                DEFAULT_MAX_STEPS,
                *MOTION_GUARD,
            ),
        ),
        NodeParameters(
            "r3_suite_sim_node",
            (
                USE_SIM_TIME,
                P(
                    "suite",
                    "str",
                    "",
                    "The suite simulated: a registered suite that brings its own simulator "
                    "(Suite.make_sim), e.g. one added through the r3.suites entry points.",
                ),
                P("camera_frame", "str", "camera_color_optical_frame", "frame_id of the images."),
            ),
        ),
        NodeParameters(
            "r3_lowlevel_node",
            (
                USE_SIM_TIME,
                P(
                    "policy",
                    "str",
                    "scripted",
                    "Low-level policy (r3.lowlevel.POLICIES; a package adds one through the r3.policies "
                    "entry points): scripted acts on the privileged simulator state.",
                    choices=POLICIES.names(),
                ),
                DEFAULT_MAX_STEPS,
                P(
                    "state_timeout_s",
                    "float",
                    2.0,
                    "A simulator or robot state must follow each command within this, wall seconds; "
                    "above the simulator's command deadline "
                    f"({names.PUSHER_COMMAND_DEADLINE_S} s), so that an instruction ends only once its "
                    "last command can no longer move the pusher.",
                    range=(STATE_TIMEOUT_MIN_S, 600.0),
                ),
                *MOTION_GUARD,
            ),
        ),
        NodeParameters(
            "r3_reasoner_node",
            (
                USE_SIM_TIME,
                P(
                    "backend",
                    "str",
                    "expert",
                    "Reasoner backend: expert, transformers:DIR[,options] or "
                    "openai:URL,model=NAME; loaded once, at start-up.",
                ),
                P(
                    "history",
                    "str",
                    "response",
                    "What the model is told of its previous step.",
                    choices=HISTORY_MODES,
                    read_only=False,
                ),
                P(
                    "interface",
                    "str",
                    "instruction",
                    f"How the model's answers act; {interfaces_help()}. The prompt and grammar follow it.",
                    choices=tuple(INTERFACE_ANSWERS),
                    read_only=False,
                ),
                P(
                    "default_max_steps",
                    "int",
                    20,
                    "Decision steps of an episode whose goal gives no budget.",
                    range=(1, 1000),
                    read_only=False,
                ),
                P(
                    "steps_per_instruction",
                    "int",
                    20,
                    "Control-step budget of each instruction; 0 = the low-level policy's own (the packing "
                    "simulator takes 0 only).",
                    range=(0, 10000),
                    read_only=False,
                ),
                P(
                    "heartbeat_timeout_s",
                    "float",
                    5.0,
                    "A watched node silent this long is dead (gaps up to 3 s were seen on 2 loaded cores).",
                    range=(SILENCE_MIN_S, SECONDS[1]),
                    read_only=False,
                ),
                P(
                    "recorder_timeout_s",
                    "float",
                    5.0,
                    "Wait this long for the recorder to record an episode, then end it with an error.",
                    range=SECONDS,
                    read_only=False,
                ),
                P(
                    "startup_timeout_s",
                    "float",
                    60.0,
                    "Wait this long for the low-level, simulator, perception and recorder nodes to come "
                    "up (cold start).",
                    range=SECONDS,
                    read_only=False,
                ),
                P(
                    "observation_timeout_s",
                    "float",
                    5.0,
                    "Wait this long for the state and image of each step.",
                    range=SECONDS,
                    read_only=False,
                ),
                P(
                    "service_timeout_s",
                    "float",
                    10.0,
                    "Wait this long for a reset or an instruction to be accepted.",
                    range=SECONDS,
                    read_only=False,
                ),
                P(
                    "instruction_timeout_s",
                    "float",
                    30.0,
                    "One instruction, end to end.",
                    range=SECONDS,
                    read_only=False,
                ),
                P(
                    "max_episode_s",
                    "float",
                    900.0,
                    "Wall-clock budget of one episode.",
                    range=(1.0, 86400.0),
                    read_only=False,
                ),
                P(
                    "max_consecutive_invalid",
                    "int",
                    MAX_CONSECUTIVE_INVALID,
                    "Refused answers in a row that end the episode.",
                    range=(1, 100),
                    read_only=False,
                ),
                P("wrist_camera", "bool", False, "Decide on the wrist camera's image too (packing)."),
                P(
                    "base_from_camera",
                    "float[]",
                    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
                    "x y z qx qy qz qw of the base camera's optical frame in the world: the expert "
                    "points at items in the image with it (semantic interface).",
                    length=7,
                ),
                P(
                    "lowlevel_node",
                    "str",
                    "/r3_lowlevel_node",
                    "The node that runs the instructions, watched through its heartbeat; set between "
                    "episodes (refused while one runs).",
                    pattern=NODE_NAME,
                    read_only=False,
                ),
                P(
                    "sim_node",
                    "str",
                    "/r3_sim_node",
                    "The node that publishes the state and resets the scene, watched through its "
                    "heartbeat; set between episodes (refused while one runs).",
                    pattern=NODE_NAME,
                    read_only=False,
                ),
                P(
                    "perception_node",
                    "str",
                    "",
                    "The node the low-level policy sees through: a goal waits for it to be up "
                    "(startup_timeout_s), and its heartbeat is watched while the episode runs ('' = none: "
                    "a policy that sees the scene itself); set between episodes (refused while one runs).",
                    pattern=f"({NODE_NAME})?",
                    read_only=False,
                ),
                P(
                    "recorder_node",
                    "str",
                    "/r3_recorder_node",
                    "The graph's recorder: every episode is recorded by it or ends with an error "
                    "naming it ('' = a graph without a recorder); set between episodes (refused while "
                    "one runs).",
                    pattern=f"({NODE_NAME})?",
                    read_only=False,
                ),
            ),
        ),
        NodeParameters(
            "r3_recorder_node",
            (
                USE_SIM_TIME,
                P("output_dir", "str", "runs/bags", "Folder of the bags, one per episode.", path=True),
                P(
                    "topics",
                    "str[]",
                    [names.CAMERA_IMAGE],
                    "Topics recorded (types found on the graph); the episode events are always recorded.",
                ),
                P(
                    "close_delay_s",
                    "float",
                    0.005,
                    "After an episode's END, keep recording at least this long; the bag closes "
                    "once messages sent before END stop arriving (at most 5 s more).",
                    range=(0.0, 60.0),
                ),
                P(
                    "max_bag_mb",
                    "int",
                    16384,
                    "An episode's bag stops taking messages (but its episode events) at this size, "
                    "megabytes, and is closed incomplete, naming what it dropped.",
                    range=(1, 10_000_000),
                    read_only=False,
                ),
                P(
                    "min_free_mb",
                    "int",
                    1024,
                    "The same once the disk holding output_dir has less than this free, megabytes.",
                    range=(0, 10_000_000),
                    read_only=False,
                ),
                P(
                    "reasoner_timeout_s",
                    "float",
                    10.0,
                    "An episode's bag is closed incomplete once the reasoner that started it has "
                    "sent no heartbeat for this long (it died or was stopped before its END).",
                    range=(SILENCE_MIN_S, SECONDS[1]),
                    read_only=False,
                ),
            ),
        ),
        NodeParameters(
            "r3_packing_sim_node",
            (
                USE_SIM_TIME,
                *IMAGE_SIZE,
                P(
                    "base_frame",
                    "str",
                    "panda_link0",
                    "The arm base frame (the world origin): MoveToPose targets must be given in it.",
                ),
                P(
                    "grounding",
                    "str",
                    "sim",
                    "What the packing policy sees: sim (the simulator's state) or perception "
                    "(DetectedObjects and GroundPoint only).",
                    choices=GROUNDINGS.names(),
                ),
                P(
                    "perception_timeout_s",
                    "float",
                    10.0,
                    "Wait this long for r3_perception_node's detections or answer.",
                    range=SECONDS,
                ),
                *MOTION_GUARD,
            ),
        ),
        NodeParameters(
            "r3_perception_node",
            (
                USE_SIM_TIME,
                P(
                    "backend",
                    "str",
                    "sam2",
                    "Segmenter (a package adds one through the r3.segmenters entry points): sim (the "
                    "simulator's instance masks), sam2, owlv2+sam2; each reads its options from these "
                    "parameters.",
                    choices=SEGMENTERS.names(),
                ),
                P(
                    "sam2_model_config",
                    "str",
                    "configs/sam2.1/sam2.1_hiera_t.yaml",
                    "SAM 2 model config (hydra name).",
                ),
                P(
                    "sam2_checkpoint",
                    "str",
                    "",
                    "SAM 2 checkpoint file; empty = random weights (tests only).",
                    path=True,
                ),
                P("sam2_image_size", "int", 1024, "SAM 2 input size, pixels.", range=(64, 4096)),
                P(
                    "detector",
                    "str",
                    "",
                    "owlv2+sam2: local folder with the OWLv2 model and processor.",
                    path=True,
                ),
                P("device", "str", "cpu", "torch device of the models (cpu, cuda, cuda:0, ...)."),
                P(
                    "camera_name",
                    "str",
                    "camera",
                    "The camera this node serves; GroundPoint requests naming another are refused.",
                ),
                P("base_frame", "str", "", "frame_id of the 3D results; empty = the camera's optical frame."),
                P(
                    "base_from_camera",
                    "float[]",
                    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
                    "x y z qx qy qz qw of the camera's optical frame in base_frame.",
                    length=7,
                ),
                P(
                    "min_depth_m",
                    "float",
                    0.1,
                    "Depth readings nearer than this are ignored, metres.",
                    range=(0.0, 100.0),
                    read_only=False,
                ),
                P(
                    "max_depth_m",
                    "float",
                    3.0,
                    "Depth readings farther than this are ignored, metres.",
                    range=(0.0, 100.0),
                    read_only=False,
                ),
                P(
                    "min_valid_pixels",
                    "int",
                    20,
                    "An object needs this many pixels with depth to be measured.",
                    range=(1, 1_000_000),
                ),
                P(
                    "max_frame_age_s",
                    "float",
                    1.0,
                    "A frame stamped more than this before or after this node's clock is refused.",
                    range=(0.001, 600.0),
                ),
                P(
                    "sync_slop_s",
                    "float",
                    0.02,
                    "Colour and depth stamps this close make a pair.",
                    range=(0.0, 10.0),
                ),
                P(
                    "query",
                    "str[]",
                    [""],
                    "Names segmented at each episode's start ([''] = none: ROS cannot type an empty "
                    "list); SetPerceptionQuery changes them for the episode it comes in.",
                ),
                P(
                    "instance_wait_s",
                    "float",
                    1.0,
                    "sim backend: how long a frame waits for its instance mask (the first frame also for "
                    "the id -> name table).",
                    range=(0.0, 60.0),
                    read_only=False,
                ),
            ),
            rules=(ordered("min_depth_m", "max_depth_m"),),
        ),
        NodeParameters(
            "r3_realsense_node",
            (
                USE_SIM_TIME,
                P("serial", "str", "", "Serial number of the camera; empty = the first one found."),
                P("width", "int", 640, "Stream width, pixels.", range=(16, 4096)),
                P("height", "int", 480, "Stream height, pixels.", range=(16, 4096)),
                P("fps", "int", 30, "Frames per second the camera streams.", range=(1, 300)),
                P("frame_id", "str", "camera_color_optical_frame", "frame_id of the images and camera_info."),
                P(
                    "read_timeout_ms",
                    "int",
                    1000,
                    "A frameset must arrive within this, milliseconds.",
                    range=(1, 60000),
                    read_only=False,
                ),
            ),
        ),
        NodeParameters(
            "r3_execution_node",
            (
                USE_SIM_TIME,
                P(
                    "executor",
                    "str",
                    "moveit",
                    "Arm executor: moveit (a real arm; the sim executor runs inside "
                    "r3_packing_sim_node, which owns the simulated arm).",
                    choices=("moveit",),
                ),
                P("planning_group", "str", "panda_arm", "MoveIt planning group of the arm."),
                P("pose_link", "str", "panda_hand_tcp", "The link whose pose MoveToPose sets."),
                P("base_frame", "str", "panda_link0", "The robot base frame: targets must be given in it."),
                P("hand_group", "str", "hand", "MoveIt planning group of the gripper."),
                P(
                    "linear_planner",
                    "str",
                    "pilz_lin",
                    "Planner of the straight-line approach (a PlanRequestParameters namespace).",
                ),
                P("max_opening", "float", 0.08, "Widest gripper opening, metres.", range=(0.0, 1.0)),
                P(
                    "workspace_low",
                    "float[]",
                    [0.15, -0.55, 0.005],
                    "Lowest x y z of the workspace box in base_frame, metres; targets outside are refused.",
                    length=3,
                ),
                P(
                    "workspace_high",
                    "float[]",
                    [0.85, 0.55, 0.75],
                    "Highest x y z of the workspace box in base_frame, metres.",
                    length=3,
                ),
            ),
            rules=(ordered("workspace_low", "workspace_high"),),
        ),
    )
}

BEGIN = "<!-- node parameters: generated by `python -m r3.graph.node_params --readme README.md` -->"
END = "<!-- end of node parameters -->"


def markdown() -> str:
    """Every node's parameter table, in the order above; ``use_sim_time``, which every node has, once."""
    common = (
        f"Every node also has `{USE_SIM_TIME.name}` ({USE_SIM_TIME.type}, default "
        f"`{json.dumps(USE_SIM_TIME.default)}`, can be set while running): {USE_SIM_TIME.description}"
    )
    tables = [schema.markdown(omit=(USE_SIM_TIME.name,)) for schema in NODE_PARAMETERS.values()]
    return "\n\n".join([common, *tables])


def with_tables(text: str) -> str:
    """``text`` (the README) with its generated section replaced by the current tables."""
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(text):
        raise ValueError(f"no generated section: expected a line {BEGIN!r} ... a line {END!r}")
    return pattern.sub(lambda _: f"{BEGIN}\n\n{markdown()}\n\n{END}", text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m r3.graph.node_params", description=__doc__.splitlines()[0]
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--markdown", action="store_true", help="print the parameter tables")
    mode.add_argument("--readme", type=Path, metavar="FILE", help="rewrite FILE's generated section")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown())
    else:
        args.readme.write_text(with_tables(args.readme.read_text()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

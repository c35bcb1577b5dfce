"""The packing workcell in MuJoCo: MJCF written in code (table, trays, items, arm, cameras).

The physics half of the packing simulator (dm_control's Physics/Task split); goals live in
``r3.tasks.packing``. Shared geometry (items, trays, frames) is in ``r3.tasks.packing.workcell``.

The arm is ours, built on the Franka Panda's kinematics: joint names, joint origins, axes and
limits copy the Panda URDF, the flange is 0.107 m past joint 7 and the tool centre point (TCP)
0.1034 m past the flange, as in MoveIt's Panda configuration. That makes a pose target mean the
same thing to the ``sim`` and ``moveit`` executors. Links are capsules rather than the Panda
meshes (no mesh files to ship, cheap collision); masses are the URDF's. Every arm body has
gravity compensation and every joint a stiff position servo, so a joint trajectory is tracked to
well under a millimetre.

Grasping (an honest simplification): friction grasps of boxes and cans between two capsule
fingers slip in MuJoCo unless contact parameters are tuned per object. Instead each item has an
inactive weld to the hand; the environment switches it on when the gripper closes on an item that
lies between the fingers and touches both (see ``PackingEnv``) and off when the gripper opens.
The item still collides with everything, so it can knock other items and rests physically when
released.

Cameras: ``base`` looks down at the table from high on the far side (opposite the robot),
``wrist`` sits on the hand looking along the fingers. Both render RGB, depth and segmentation.
"""

from __future__ import annotations

import math

from r3.tasks.packing.workcell import ITEM_SPECS, TABLE_EXTENT, TRAY_SPECS

TIMESTEP = 0.004
#: One control step is 50 ms (20 Hz).
CONTROL_DT = 0.05
#: One control step in nanoseconds of sim time (the stamps of a frame or a message).
STEP_NS = round(CONTROL_DT * 1e9)
SUBSTEPS = round(CONTROL_DT / TIMESTEP)

ARM_JOINTS: tuple[str, ...] = tuple(f"panda_joint{i}" for i in range(1, 8))
FINGER_JOINTS = ("panda_finger_joint1", "panda_finger_joint2")
#: Panda joint limits (rad), from the URDF.
JOINT_LIMITS = (
    (-2.8973, 2.8973),
    (-1.7628, 1.7628),
    (-2.8973, 2.8973),
    (-3.0718, -0.0698),
    (-2.8973, 2.8973),
    (-0.0175, 3.7525),
    (-2.8973, 2.8973),
)
#: Panda joint speed limits (rad/s).
JOINT_SPEED = (2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61)
#: The ready pose of MoveIt's Panda configuration: hand above the table, fingers down.
HOME_Q = (0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785)
MAX_OPENING = 0.08
FLANGE = 0.107
TCP = 0.1034
#: Finger pads: half sizes, and how far past the finger origin the pad centre sits.
PAD_HALF = (0.010, 0.006, 0.022)
FINGER_ORIGIN = 0.0584

TABLE_RGBA = (0.72, 0.62, 0.50, 1)
TRAY_RGBA = {"small": (0.45, 0.70, 0.45, 1), "medium": (0.40, 0.55, 0.80, 1), "large": (0.80, 0.65, 0.35, 1)}
ARM_RGBA = (0.92, 0.92, 0.94, 1)
#: Where unused items wait: a shelf far from the table that no camera sees.
STORAGE = (4.0, 0.0)

#: Base camera: position and the point it looks at; wrist camera: offset in the hand frame.
BASE_CAMERA = ((1.05, 0.0, 1.05), (0.42, 0.0, 0.0))
BASE_FOVY = 55.0
WRIST_FOVY = 70.0
WRIST_CAMERA_POS = (0.06, 0.0, 0.03)


def body_name(item: str) -> str:
    return item.replace(" ", "_")


def _f(values) -> str:
    return " ".join(f"{v:.6g}" for v in values)


def _look_at_quat(pos, target) -> tuple[float, float, float, float]:
    """Camera quaternion (MuJoCo: looks along -z, image up = +y) from ``pos`` towards ``target``."""
    fwd = [t - p for p, t in zip(pos, target)]
    n = math.sqrt(sum(c * c for c in fwd))
    z = [-c / n for c in fwd]
    up = (0.0, 0.0, 1.0)
    x = [up[1] * z[2] - up[2] * z[1], up[2] * z[0] - up[0] * z[2], up[0] * z[1] - up[1] * z[0]]
    nx = math.sqrt(sum(c * c for c in x))
    x = [c / nx for c in x]
    y = [z[1] * x[2] - z[2] * x[1], z[2] * x[0] - z[0] * x[2], z[0] * x[1] - z[1] * x[0]]
    m = [[x[0], y[0], z[0]], [x[1], y[1], z[1]], [x[2], y[2], z[2]]]
    w = math.sqrt(max(0.0, 1 + m[0][0] + m[1][1] + m[2][2])) / 2
    return (w, (m[2][1] - m[1][2]) / (4 * w), (m[0][2] - m[2][0]) / (4 * w), (m[1][0] - m[0][1]) / (4 * w))


def _x_rot(angle: float) -> str:
    return _f((math.cos(angle / 2), math.sin(angle / 2), 0, 0))


def _arm() -> str:
    """The Panda kinematic chain with capsule links (joint origins from the URDF)."""
    h = math.pi / 2
    links = [
        # (joint index, pos, quat, mass, capsule fromto in the link frame, radius)
        (1, (0, 0, 0.333), _x_rot(0), 2.70, (0, 0, -0.15, 0, 0, 0.0), 0.060),
        (2, (0, 0, 0), _x_rot(-h), 2.73, (0, 0, 0, 0, -0.30, 0), 0.060),
        (3, (0, -0.316, 0), _x_rot(h), 2.04, (0, 0, -0.10, 0.0825, 0, 0), 0.055),
        (4, (0.0825, 0, 0), _x_rot(h), 2.08, (0, 0, 0, -0.0825, 0.10, 0), 0.055),
        (5, (-0.0825, 0.384, 0), _x_rot(-h), 3.00, (0, 0, -0.26, 0, 0, -0.02), 0.050),
        (6, (0, 0, 0), _x_rot(h), 1.30, (0, 0, 0, 0.088, 0, 0), 0.045),
        (7, (0.088, 0, 0), _x_rot(h), 0.20, (0, 0, -0.02, 0, 0, 0.07), 0.040),
    ]
    xml, close = [], []
    for i, pos, quat, mass, fromto, radius in links:
        lo, hi = JOINT_LIMITS[i - 1]
        xml.append(
            f'<body name="panda_link{i}" pos="{_f(pos)}" quat="{quat}" gravcomp="1">'
            f'<inertial pos="0 0 0" mass="{mass}" diaginertia="0.02 0.02 0.02"/>'
            f'<joint name="panda_joint{i}" axis="0 0 1" range="{lo} {hi}" class="arm"/>'
            f'<geom name="panda_link{i}" type="capsule" fromto="{_f(fromto)}" size="{radius}" class="robot"/>'
        )
        close.append("</body>")
    pad_x, pad_y, pad_z = PAD_HALF
    fingers = "".join(
        f'<body name="panda_{side}finger" pos="0 0 {FINGER_ORIGIN}" gravcomp="1">'
        f'<inertial pos="0 0 0.02" mass="0.1" diaginertia="1e-4 1e-4 1e-4"/>'
        f'<joint name="{joint}" type="slide" axis="0 {sign} 0" range="0 0.04" class="finger"/>'
        f'<geom name="panda_{side}finger" type="box" size="{pad_x} {pad_y} {pad_z}" '
        f'pos="0 {sign * pad_y:.6g} {2 * pad_z + 0.006 - pad_z:.6g}" class="robot" '
        f'friction="1.5 0.01 0.001"/>'
        f"</body>"
        for side, joint, sign in (("left", FINGER_JOINTS[0], 1), ("right", FINGER_JOINTS[1], -1))
    )
    wrist_quat = _f((0, 1, 0, 0))  # camera -z along the hand's +z (towards the fingertips)
    hand_quat = _f((math.cos(-math.pi / 8), 0, 0, math.sin(-math.pi / 8)))
    hand = (
        f'<body name="panda_hand" pos="0 0 {FLANGE}" quat="{hand_quat}" '
        f'gravcomp="1">'
        f'<inertial pos="0 0 0.04" mass="0.81" diaginertia="0.003 0.003 0.003"/>'
        f'<geom name="panda_hand" type="box" size="0.025 0.10 0.028" pos="0 0 0.028" class="robot"/>'
        f'<site name="tcp" pos="0 0 {TCP}" size="0.005" rgba="1 0 0 0"/>'
        f'<camera name="wrist" pos="{_f(WRIST_CAMERA_POS)}" quat="{wrist_quat}" fovy="{WRIST_FOVY}"/>'
        f"{fingers}</body>"
    )
    return (
        '<body name="panda_link0" pos="0 0 0">'
        '<geom name="panda_link0" type="cylinder" size="0.07 0.07" pos="0 0 0.07" class="robot"/>'
        + "".join(xml)
        + hand
        + "".join(close)
        + "</body>"
    )


def _trays() -> str:
    out = []
    for name, t in TRAY_SPECS.items():
        cx, cy = t.centre
        hx, hy = t.inner[0] / 2, t.inner[1] / 2
        w, hz = t.wall, t.wall_height / 2
        rgba = _f(TRAY_RGBA[name])
        z = t.floor + hz
        parts = [
            (f"{name}_tray", (0, 0, t.floor / 2), (hx + w, hy + w, t.floor / 2)),
            (f"{name}_tray_wall0", (hx + w / 2, 0, z), (w / 2, hy + w, hz)),
            (f"{name}_tray_wall1", (-hx - w / 2, 0, z), (w / 2, hy + w, hz)),
            (f"{name}_tray_wall2", (0, hy + w / 2, z), (hx, w / 2, hz)),
            (f"{name}_tray_wall3", (0, -hy - w / 2, z), (hx, w / 2, hz)),
        ]
        geoms = "".join(
            f'<geom name="{g}" type="box" pos="{_f(p)}" size="{_f(s)}" class="static" rgba="{rgba}"/>'
            for g, p, s in parts
        )
        out.append(f'<body name="{name}_tray" pos="{cx} {cy} 0">{geoms}</body>')
    return "".join(out)


def _items() -> str:
    out = []
    for k, (item, spec) in enumerate(ITEM_SPECS.items()):
        name = body_name(item)
        sx, sy, sz = spec.size
        if spec.shape == "box":
            geom = f'type="box" size="{sx / 2:.6g} {sy / 2:.6g} {sz / 2:.6g}"'
            ixx, iyy, izz = (spec.mass * (b * b + c * c) / 12 for b, c in ((sy, sz), (sx, sz), (sx, sy)))
        else:
            geom = f'type="cylinder" size="{sx / 2:.6g} {sz / 2:.6g}"'
            r2 = (sx / 2) ** 2
            ixx = iyy = spec.mass * (3 * r2 + sz * sz) / 12
            izz = spec.mass * r2 / 2
        extra = ""
        if item == "coffee mug":  # a handle, drawn only (it would catch the fingers otherwise)
            extra = (
                f'<geom type="box" size="0.008 0.012 0.025" pos="{sx / 2 + 0.008:.6g} 0 0" '
                f'contype="0" conaffinity="0" group="2" rgba="{_f(spec.rgba)}"/>'
            )
        out.append(
            f'<body name="{name}" pos="{STORAGE[0]} {STORAGE[1] + 0.3 * k} {sz / 2 + 0.001:.6g}">'
            f'<freejoint name="{name}"/>'
            f'<inertial pos="0 0 0" mass="{spec.mass}" diaginertia="{ixx:.6g} {iyy:.6g} {izz:.6g}"/>'
            f'<geom name="{name}" {geom} class="item" rgba="{_f(spec.rgba)}"/>{extra}</body>'
        )
    return "".join(out)


def _welds() -> str:
    return "".join(
        f'<weld name="grasp_{body_name(item)}" body1="panda_hand" body2="{body_name(item)}" active="false"/>'
        for item in ITEM_SPECS
    )


def build_mjcf(width: int = 320, height: int = 240) -> str:
    """MJCF text of the workcell; ``width`` x ``height`` sizes the offscreen framebuffer."""
    (tx0, tx1), (ty0, ty1) = TABLE_EXTENT
    cam_pos, cam_target = BASE_CAMERA
    arm_actuators = "".join(
        f'<position name="{j}" joint="{j}" class="arm" ctrlrange="{lo} {hi}"/>'
        for j, (lo, hi) in zip(ARM_JOINTS, JOINT_LIMITS)
    )
    return f"""
<mujoco model="packing">
  <compiler angle="radian" autolimits="true"/>
  <option timestep="{TIMESTEP}" integrator="implicitfast" cone="elliptic" impratio="5"/>
  <visual>
    <global offwidth="{max(width, 640)}" offheight="{max(height, 480)}"/>
    <headlight ambient="0.4 0.4 0.4" diffuse="0.4 0.4 0.4" specular="0 0 0"/>
    <quality shadowsize="0"/>
  </visual>
  <default>
    <!-- Bits: static (table, trays) = 2, robot = 4, items = 1. Items touch everything; the robot
         touches items and static geometry; static touches nothing static. -->
    <default class="static"><geom contype="2" conaffinity="5" friction="0.8 0.01 0.001"/></default>
    <default class="robot"><geom contype="4" conaffinity="3" group="1" rgba="{_f(ARM_RGBA)}"
                                 friction="1 0.01 0.001"/></default>
    <default class="item"><geom contype="1" conaffinity="7" group="2" friction="0.8 0.01 0.001"
                                condim="4"/></default>
    <default class="arm"><joint damping="8" armature="0.1"/><position kp="3000" kv="150"/></default>
    <default class="finger"><joint damping="5" armature="0.01"/></default>
  </default>
  <worldbody>
    <light pos="0.5 0 2.0" dir="0 0 -1" directional="true" diffuse="0.4 0.4 0.4" castshadow="false"/>
    <camera name="base" pos="{_f(cam_pos)}" quat="{_f(_look_at_quat(cam_pos, cam_target))}"
            fovy="{BASE_FOVY}"/>
    <geom name="table" type="box" pos="{(tx0 + tx1) / 2:.6g} {(ty0 + ty1) / 2:.6g} -0.02"
          size="{(tx1 - tx0) / 2:.6g} {(ty1 - ty0) / 2:.6g} 0.02" class="static" rgba="{_f(TABLE_RGBA)}"/>
    <geom name="storage" type="box" pos="{STORAGE[0]} {STORAGE[1] + 1.5} -0.02" size="0.3 2 0.02"
          class="static"/>
    {_trays()}
    {_arm()}
    {_items()}
  </worldbody>
  <equality>
    <joint joint1="{FINGER_JOINTS[0]}" joint2="{FINGER_JOINTS[1]}" polycoef="0 1 0 0 0"/>
    {_welds()}
  </equality>
  <contact>
    <exclude body1="panda_link0" body2="panda_link1"/>
  </contact>
  <actuator>
    {arm_actuators}
    <position name="gripper" joint="{FINGER_JOINTS[0]}" kp="400" kv="20" ctrlrange="0 0.04"
              forcerange="-40 40"/>
  </actuator>
</mujoco>
"""

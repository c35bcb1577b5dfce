"""The Language Table scene: MJCF generated in code, plus seeded layout sampling.

This module is the *physics* half of the simulator (dm_control's Physics/Task split): it knows
geometry, masses and friction, nothing about goals. :mod:`r3.sim.language_table.env` adds the task.

Frames: the board frame of :mod:`r3.tasks.language_table.board` is the world x-y plane, the board's
top surface is z = 0, and the camera looks straight down so image right = +x and image up = +y.

Physics choices (why):
  * Pusher: a body on two slide joints driven by stiff, force-limited position servos. Position
    servos make a commanded delta land where asked (no drift as with velocity control), the force
    limit keeps a pusher that is blocked by a pinned block from crushing through it, and unlike a
    mocap weld there is no extra constraint to tune. The pusher floats ``PUSHER_GAP`` above the board
    and never touches it, so only blocks feel board friction.
  * Collision geometry is simple (box for the cube, cylinders for the others; a vertical capsule for
    the pusher, which collides with boxes analytically); the recognisable shapes are visual-only
    meshes (contype = conaffinity = 0) that cost nothing in the solver.
  * Friction: block-board 0.4 (a pushed block stops within ~1 cm once released); the pusher has
    friction 0.1 and a higher priority, so it slides along a block's face rather than dragging it
    sideways.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from r3.tasks.language_table.board import (
    BLOCK_RADIUS,
    BLOCKS,
    BOARD_HALF_EXTENTS,
    PUSHER_RADIUS,
)

#: Physics timestep (s) and control period (s): one env step = ``SUBSTEPS`` physics steps.
TIMESTEP = 0.005
CONTROL_DT = 0.1
SUBSTEPS = round(CONTROL_DT / TIMESTEP)
#: Substeps over which the pusher target ramps; the rest let the servo settle onto the target.
RAMP_SUBSTEPS = 16

BLOCK_HEIGHT = 0.03
BLOCK_MASS = 0.05
#: Collision radius of the non-cube blocks and half side of the cube.
BLOCK_COLLISION_RADIUS = 0.019
CUBE_HALF = 0.0155
PUSHER_HEIGHT = 0.06
PUSHER_GAP = 0.003
PUSHER_MASS = 0.1
#: Servo natural frequency (rad/s) -> kp = m w^2, critically damped kv = 2 m w.
PUSHER_OMEGA = 150.0
PUSHER_FORCE_LIMIT = 10.0
RIM_WIDTH = 0.02
#: Height of the top-down camera above the board (high, so little perspective distortion).
CAMERA_HEIGHT = 2.0
RIM_HEIGHT = 0.04
#: Where the pusher starts every episode (bottom centre, near the camera side).
PUSHER_START = (0.0, -0.17)
#: Minimum distance between block centres in a sampled layout.
MIN_BLOCK_SPACING = 0.07
#: Inset of sampled block centres from the usable board edge.
LAYOUT_MARGIN = BLOCK_RADIUS + 0.008

COLOUR_RGBA = {
    "red": (0.86, 0.12, 0.12, 1.0),
    "blue": (0.12, 0.32, 0.90, 1.0),
    "green": (0.10, 0.68, 0.22, 1.0),
    "yellow": (0.96, 0.84, 0.08, 1.0),
}
BOARD_RGBA = (0.80, 0.79, 0.76, 1.0)
RIM_RGBA = (0.35, 0.30, 0.26, 1.0)
PUSHER_RGBA = (0.50, 0.50, 0.52, 1.0)

#: Reachable pusher area: the usable board minus the pusher radius.
PUSHER_LIMITS = (
    BOARD_HALF_EXTENTS[0] - PUSHER_RADIUS,
    BOARD_HALF_EXTENTS[1] - PUSHER_RADIUS,
)


def body_name(block: str) -> str:
    """MJCF body name of a block ("red moon" -> "red_moon")."""
    return block.replace(" ", "_")


def _fmt(values) -> str:
    return " ".join(f"{v:.6g}" for v in values)


def _prism(polygon: list[tuple[float, float]], z0: float, z1: float) -> str:
    """Vertex list of a vertical prism over a convex polygon (MuJoCo takes the convex hull)."""
    pts = [(x, y, z) for z in (z0, z1) for x, y in polygon]
    return _fmt(c for p in pts for c in p)


def _regular_polygon(n: int, radius: float, phase: float = math.pi / 2) -> list[tuple[float, float]]:
    return [
        (radius * math.cos(phase + 2 * math.pi * k / n), radius * math.sin(phase + 2 * math.pi * k / n))
        for k in range(n)
    ]


def _shape_meshes(shape: str) -> list[list[tuple[float, float]]]:
    """Convex pieces (polygons in the block frame) whose union draws ``shape`` seen from above."""
    if shape == "cube":
        h = CUBE_HALF
        return [[(-h, -h), (h, -h), (h, h), (-h, h)]]
    if shape == "pentagon":
        return [_regular_polygon(5, 0.021)]
    if shape == "star":
        outer = _regular_polygon(5, 0.023)
        inner = _regular_polygon(5, 0.0095, phase=math.pi / 2 + math.pi / 5)
        # Inner vertex k sits between outer tips k and k+1.
        spikes = [[inner[k - 1], outer[k], inner[k]] for k in range(5)]
        return [inner] + spikes
    if shape == "moon":
        # A crescent opening towards +x: a thick arc, widest at the back, thin at the tips.
        outer_r, max_thick, min_thick, half_span, n = 0.021, 0.013, 0.004, math.radians(125), 8
        pieces = []
        angles = np.linspace(math.pi - half_span, math.pi + half_span, n + 1)
        for a0, a1 in itertools.pairwise(angles):
            quad = []
            for a in (a0, a1):
                w = abs(a - math.pi) / half_span
                t = min_thick + (max_thick - min_thick) * math.cos(w * math.pi / 2)
                quad.append((outer_r * math.cos(a), outer_r * math.sin(a)))
                quad.append(((outer_r - t) * math.cos(a), (outer_r - t) * math.sin(a)))
            pieces.append(quad)
        return pieces
    raise ValueError(f"unknown shape {shape!r}")


def camera_fovy(width: int, height: int, distance: float) -> float:
    """Vertical field of view (degrees) that shows the whole board and rim at this aspect ratio."""
    half_x = BOARD_HALF_EXTENTS[0] + RIM_WIDTH + 0.01
    half_y = BOARD_HALF_EXTENTS[1] + RIM_WIDTH + 0.01
    needed = max(half_y, half_x * height / width)
    return math.degrees(2 * math.atan(needed / distance))


def build_mjcf(width: int = 320, height: int = 240) -> str:
    """MJCF text of the scene; ``width`` x ``height`` sizes the offscreen framebuffer."""
    hx, hy = BOARD_HALF_EXTENTS
    cam_z = CAMERA_HEIGHT
    kp = PUSHER_MASS * PUSHER_OMEGA**2
    kv = 2 * PUSHER_MASS * PUSHER_OMEGA
    lx, ly = PUSHER_LIMITS
    z_top = BLOCK_HEIGHT + 0.0005  # visual tops sit just above the hidden collision geometry

    assets, bodies = [], []
    for block in BLOCKS:
        colour, shape = block.split()
        name = body_name(block)
        visuals = []
        for i, poly in enumerate(_shape_meshes(shape)):
            mesh = f"{name}_{i}"
            assets.append(f'<mesh name="{mesh}" vertex="{_prism(poly, 0.0, z_top)}"/>')
            visuals.append(
                f'<geom type="mesh" mesh="{mesh}" pos="0 0 {-BLOCK_HEIGHT / 2:.6g}" '
                f'contype="0" conaffinity="0" group="0" rgba="{_fmt(COLOUR_RGBA[colour])}"/>'
            )
        if shape == "cube":
            collision = f'type="box" size="{CUBE_HALF} {CUBE_HALF} {BLOCK_HEIGHT / 2}"'
        else:
            collision = f'type="cylinder" size="{BLOCK_COLLISION_RADIUS} {BLOCK_HEIGHT / 2}"'
        r2 = BLOCK_COLLISION_RADIUS**2
        izz = 0.5 * BLOCK_MASS * r2
        ixx = BLOCK_MASS * (3 * r2 + BLOCK_HEIGHT**2) / 12
        bodies.append(
            f"""
    <body name="{name}" pos="0 0 {BLOCK_HEIGHT / 2}">
      <freejoint name="{name}"/>
      <inertial pos="0 0 0" mass="{BLOCK_MASS}" diaginertia="{ixx:.6g} {ixx:.6g} {izz:.6g}"/>
      <geom name="{name}" {collision} class="block"/>
      {"".join(visuals)}
    </body>"""
        )

    rim = []
    for i, (px, py, sx, sy) in enumerate(
        [
            (0, hy + RIM_WIDTH / 2, hx + RIM_WIDTH, RIM_WIDTH / 2),
            (0, -hy - RIM_WIDTH / 2, hx + RIM_WIDTH, RIM_WIDTH / 2),
            (hx + RIM_WIDTH / 2, 0, RIM_WIDTH / 2, hy),
            (-hx - RIM_WIDTH / 2, 0, RIM_WIDTH / 2, hy),
        ]
    ):
        rim.append(
            f'<geom name="rim{i}" type="box" pos="{px:.6g} {py:.6g} {RIM_HEIGHT / 2}" '
            f'size="{sx:.6g} {sy:.6g} {RIM_HEIGHT / 2}" class="static" rgba="{_fmt(RIM_RGBA)}"/>'
        )

    pusher_len = PUSHER_HEIGHT - 2 * PUSHER_RADIUS
    return f"""
<mujoco model="language_table">
  <compiler angle="radian" autolimits="true"/>
  <option timestep="{TIMESTEP}" integrator="implicitfast" cone="pyramidal"/>
  <visual>
    <global offwidth="{width}" offheight="{height}"/>
    <headlight ambient="0.35 0.35 0.35" diffuse="0.3 0.3 0.3" specular="0 0 0"/>
    <quality shadowsize="0"/>
  </visual>
  <default>
    <!-- Bits: static (board, rim) = 2, movers (blocks, pusher) = 1; blocks accept both. -->
    <default class="static"><geom contype="2" conaffinity="0" friction="0.4 0.005 0.0001"/></default>
    <default class="block"><geom contype="1" conaffinity="3" group="3" friction="0.4 0.005 0.0001"/></default>
  </default>
  <asset>
    {"".join(assets)}
  </asset>
  <worldbody>
    <light pos="0 0 1.5" dir="0 0 -1" directional="true" diffuse="0.35 0.35 0.35" castshadow="false"/>
    <camera name="top" pos="0 0 {cam_z}" quat="1 0 0 0" fovy="{camera_fovy(width, height, cam_z):.6g}"/>
    <geom name="board" type="box" pos="0 0 -0.01" size="{hx + RIM_WIDTH:.6g} {hy + RIM_WIDTH:.6g} 0.01"
          class="static" rgba="{_fmt(BOARD_RGBA)}"/>
    {"".join(rim)}
    {"".join(bodies)}
    <body name="pusher" pos="0 0 {PUSHER_GAP + PUSHER_HEIGHT / 2}">
      <joint name="pusher_x" type="slide" axis="1 0 0" range="{-lx:.6g} {lx:.6g}"/>
      <joint name="pusher_y" type="slide" axis="0 1 0" range="{-ly:.6g} {ly:.6g}"/>
      <inertial pos="0 0 0" mass="{PUSHER_MASS}" diaginertia="1e-4 1e-4 1e-5"/>
      <geom name="pusher" type="capsule" size="{PUSHER_RADIUS} {pusher_len / 2:.6g}" contype="1"
            conaffinity="1" group="3" friction="0.1 0.005 0.0001" priority="1"/>
      <geom type="cylinder" size="{PUSHER_RADIUS} {PUSHER_HEIGHT / 2}" contype="0" conaffinity="0"
            rgba="{_fmt(PUSHER_RGBA)}"/>
    </body>
  </worldbody>
  <actuator>
    <position name="pusher_x" joint="pusher_x" kp="{kp:.6g}" kv="{kv:.6g}"
              forcerange="{-PUSHER_FORCE_LIMIT} {PUSHER_FORCE_LIMIT}" ctrlrange="{-lx:.6g} {lx:.6g}"/>
    <position name="pusher_y" joint="pusher_y" kp="{kp:.6g}" kv="{kv:.6g}"
              forcerange="{-PUSHER_FORCE_LIMIT} {PUSHER_FORCE_LIMIT}" ctrlrange="{-ly:.6g} {ly:.6g}"/>
  </actuator>
</mujoco>
"""


def sample_layout(rng: np.random.Generator) -> dict[str, tuple[float, float, float]]:
    """Random non-overlapping block poses ``name -> (x, y, yaw)``, clear of the pusher start.

    Rejection sampling, one block at a time; with 8 blocks on a 0.6 x 0.4 m board it succeeds in a
    handful of draws, and every draw comes from ``rng`` so the layout is a function of the seed.
    """
    hx = BOARD_HALF_EXTENTS[0] - LAYOUT_MARGIN
    hy = BOARD_HALF_EXTENTS[1] - LAYOUT_MARGIN
    pusher_clear = BLOCK_RADIUS + PUSHER_RADIUS + 0.02
    placed: dict[str, tuple[float, float, float]] = {}
    for block in BLOCKS:
        for _ in range(10_000):
            x, y = rng.uniform((-hx, -hy), (hx, hy))
            if math.dist((x, y), PUSHER_START) < pusher_clear:
                continue
            if all(math.dist((x, y), p[:2]) >= MIN_BLOCK_SPACING for p in placed.values()):
                placed[block] = (float(x), float(y), float(rng.uniform(-math.pi, math.pi)))
                break
        else:  # pragma: no cover - geometry makes this unreachable
            raise RuntimeError("could not place all blocks")
    return placed

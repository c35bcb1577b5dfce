"""r3.sim.offscreen: a process that renders with OSMesa and then loads torch's compiler (triton)
keeps running."""

import subprocess
import sys

RENDER_THEN_TRITON = """
import sys
from r3.sim.offscreen import mujoco
model = mujoco.MjModel.from_xml_string('<mujoco><worldbody><geom size="0.1"/></worldbody></mujoco>')
renderer = mujoco.Renderer(model, 32, 32)
renderer.update_scene(mujoco.MjData(model))
renderer.render()
import torch._dynamo  # imports triton where torch has it
print("triton" in sys.modules)
renderer.close()
"""


def test_triton_loaded_after_rendering_does_not_crash_the_process():
    done = subprocess.run(
        [sys.executable, "-c", RENDER_THEN_TRITON],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env={"MUJOCO_GL": "osmesa", "PATH": "/usr/bin:/bin", "HOME": "/tmp"},
    )
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    assert done.stdout.strip() in ("True", "False")

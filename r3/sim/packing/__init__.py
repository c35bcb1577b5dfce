"""The packing workcell in MuJoCo: the scene (:mod:`.scene`) and the Gymnasium env (:mod:`.env`).

Registered as ``r3/Packing-v0``.
"""

import gymnasium

gymnasium.register(id="r3/Packing-v0", entry_point="r3.sim.packing.env:PackingEnv")

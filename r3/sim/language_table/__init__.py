"""Language Table in MuJoCo: the scene (:mod:`.scene`) and the Gymnasium env (:mod:`.env`).

Registered as ``r3/LanguageTable-v0`` so ``gymnasium.make`` works; the env truncates episodes
itself (``max_episode_steps`` is a constructor option), so no TimeLimit wrapper is added.
"""

import gymnasium

gymnasium.register(id="r3/LanguageTable-v0", entry_point="r3.sim.language_table.env:LanguageTableEnv")

"""Language-conditioned low-level policies: they turn one short-horizon instruction into motion.

They are frozen stand-ins for the learned policies of R^3 (the reasoner above them is what is
trained), deliberately imperfect so the reasoner has mistakes to notice and recover from. The
contract is small: ``reset(instruction, state, rng)`` then ``act(state)`` until it returns ``None``.
"""

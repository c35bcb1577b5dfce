"""Language-conditioned low-level policies: they turn one short-horizon instruction into motion.

They are frozen stand-ins for the learned policies of R^3 (the reasoner above them is what is
trained), deliberately imperfect so the reasoner has mistakes to notice and recover from. The
contract is small: ``reset(instruction, state, rng)`` then ``act(state)`` until it returns ``None``.
"""

from r3.plugins import Registry

#: How the packing skills see the scene, name -> "module:factory" with ``factory(env, source)`` ->
#: ``(grounder, state)``: ``sim`` reads item poses and the held item from the simulator (ray casts,
#: known poses); ``perception`` uses only the base camera through r3.perception (sim segmenter, depth
#: back-projection, or ``source``'s detections) and the arm's joint readings. More: ``r3.groundings``.
GROUNDINGS = Registry(
    "grounding",
    {
        "sim": "r3.lowlevel.grounding:ground_in_sim",
        "perception": "r3.lowlevel.perceived:ground_by_perception",
    },
)

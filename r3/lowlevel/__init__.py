"""Language-conditioned low-level policies: they turn one short-horizon instruction into motion.

They are frozen stand-ins for the learned policies of R^3 (the reasoner above them is what is
trained), deliberately imperfect so the reasoner has mistakes to notice and recover from. The
contract is small: ``reset(instruction, state, rng)`` then ``act(state)`` until it returns ``None``.
r3_lowlevel_node runs the one its ``policy`` parameter names (:data:`POLICIES`).
"""

from typing import Protocol

from r3.plugins import Registry, built_as, having


class Policy(Protocol):
    """A low-level policy, as the episode loops and r3_lowlevel_node's instruction server call it."""

    def reset(self, instruction, state, rng) -> None:
        """Start following ``instruction`` (parsed) from the board ``state``, drawing noise from ``rng``."""

    def act(self, state):
        """The next action for the board ``state``, or None once the instruction is done."""


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
    check=having("__call__"),
)

#: The Language Table policies r3_lowlevel_node can run, name -> "module:factory" with ``factory()`` ->
#: a policy (``reset``/``act``), imported only when chosen: ``scripted`` is the scripted pushing policy
#: (:mod:`r3.lowlevel.pushing`), which reads the privileged simulator state. More: ``r3.policies``.
POLICIES = Registry(
    "policy",
    {"scripted": "r3.lowlevel.pushing:ScriptedPushingPolicy"},
    group="r3.policies",
    check=having("__call__"),
    built=built_as(Policy),
)


def make_policy(name: str) -> Policy:
    """A new policy of the kind ``name`` stands for, with its defaults; an unknown name is refused with
    the known ones.

    >>> type(make_policy("scripted")).__name__
    'ScriptedPushingPolicy'
    """
    return POLICIES.build(name)

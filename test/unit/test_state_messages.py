"""The simulator refills one privileged state message per episode at every control step
(``board_state_to_msg`` on a message that already holds the blocks): a refill must read back exactly
as a message built anew, and a message of another scene must not keep that scene's blocks."""

from __future__ import annotations

from r3.tasks.language_table.board import BoardState
from r3_msgs.msg import PrivilegedState
from r3_ros.conversions import board_state_to_msg, msg_to_board_state

FIRST = BoardState(blocks={"red moon": (0.1, -0.2, 0.3), "blue cube": (0.4, 0.05, -1.2)}, pusher=(0.3, 0.0))
MOVED = BoardState(blocks={"red moon": (0.12, -0.19, 0.5), "blue cube": (0.4, 0.05, -1.2)}, pusher=(0.3, 0.1))
OTHER = BoardState(blocks={"green star": (0.2, 0.2, 0.0)}, pusher=(0.25, -0.1))


def test_a_refilled_message_reads_back_as_one_built_anew():
    kept = board_state_to_msg(FIRST, PrivilegedState())
    objects = kept.objects
    refilled = board_state_to_msg(MOVED, kept)
    assert refilled is kept and refilled.objects is objects  # the same objects, refilled
    assert refilled == board_state_to_msg(MOVED, PrivilegedState())
    read = msg_to_board_state(refilled)
    assert read.blocks.keys() == MOVED.blocks.keys()
    for name, pose in MOVED.blocks.items():
        assert all(abs(a - b) < 1e-12 for a, b in zip(read.blocks[name], pose, strict=True))
    assert read.pusher == MOVED.pusher


def test_a_message_of_another_scene_gets_that_scene_blocks_only():
    kept = board_state_to_msg(FIRST, PrivilegedState())
    other = board_state_to_msg(OTHER, kept)
    assert [o.name for o in other.objects] == ["green star"]
    assert other == board_state_to_msg(OTHER, PrivilegedState())

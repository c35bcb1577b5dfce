"""Packing grammar: canonical texts, round trips, errors and exact-match normalisation."""

import doctest
import itertools

import pytest

from r3.instructions import language_table, packing
from r3.instructions.language_table import ParseError
from r3.instructions.packing import (
    ITEMS,
    TRAYS,
    PackingInstruction,
    format_instruction,
    normalise_text,
    parse,
)

P = packing.PackingInstructionType


def _all_instructions():
    for item, tray in itertools.product(ITEMS, TRAYS):
        yield PackingInstruction(P.PACK, item, tray)
        yield PackingInstruction(P.REMOVE, item, tray)
        for to_tray in TRAYS:
            if to_tray != tray:
                yield PackingInstruction(P.TRANSFER, item, tray, to_tray)


def test_round_trip_over_every_instruction():
    instructions = list(_all_instructions())
    assert len(instructions) == len(ITEMS) * len(TRAYS) * 4
    for instr in instructions:
        assert parse(format_instruction(instr)) == instr


@pytest.mark.parametrize(
    "instr, text",
    [
        (PackingInstruction(P.PACK, "can opener", "medium"), "Pack the can opener into the medium tray."),
        (
            PackingInstruction(P.REMOVE, "tuna fish can", "medium"),
            "Remove the tuna fish can from the medium tray.",
        ),
        (
            PackingInstruction(P.TRANSFER, "coffee mug", "medium", "large"),
            "Transfer the coffee mug from the medium tray to the large tray.",
        ),
    ],
)
def test_canonical_text(instr, text):
    assert format_instruction(instr) == text


@pytest.mark.parametrize(
    "text",
    [
        "pack the sugar box into the medium tray",
        "  PACK the Sugar Box into the medium   tray.",
        "Pack sugar box into medium tray.",
    ],
)
def test_lenient_parse(text):
    assert parse(text) == PackingInstruction(P.PACK, "sugar box", "medium")


@pytest.mark.parametrize(
    "text, reason",
    [
        ("Pack the banana into the medium tray.", "unknown item 'banana'"),
        ("Pack the sugar box into the huge tray.", "unknown tray 'huge'"),
        ("Transfer the soup can from the small tray to the small tray.", "same tray 'small'"),
        ("Put the sugar box into the medium tray.", "no verb"),
        ("Pack the sugar box onto the medium tray.", "a pack instruction reads"),
        (
            "Pack the sugar box into the medium tray. Remove the soup can from the large tray.",
            "more than one",
        ),
        ("", "empty instruction"),
    ],
)
def test_errors(text, reason):
    result = parse(text)
    assert isinstance(result, ParseError) and reason in result.reason, result


def test_non_string_is_parse_error():
    assert isinstance(parse(None), ParseError)


def test_invalid_instruction_is_refused():
    with pytest.raises(ValueError, match="same tray"):
        PackingInstruction(P.TRANSFER, "soup can", "small", "small")
    with pytest.raises(ValueError, match="to_tray must be None"):
        PackingInstruction(P.PACK, "soup can", "small", "large")


def test_normalise_text_for_exact_match():
    assert (
        normalise_text(" Pack the sugar box  into the medium tray. ")
        == "pack the sugar box into the medium tray"
    )
    assert normalise_text("Pack the sugar box into the medium tray") != normalise_text(
        "Pack the sugar box into the large tray"
    )


def test_docstring_examples():
    assert doctest.testmod(packing).failed == 0


@pytest.mark.parametrize("hidden", ["\x1f", "\x1c", "\x85", "\u2028", "\u200b", "\u202e", "\x00"])
def test_an_instruction_with_a_hidden_character_is_refused_naming_it(hidden):
    """Found by a hostile test: "soup\\x1fcan" was carried out as "soup can" (split() reads U+001F
    as a space) in process, where the ROS goal check refuses it."""
    for grammar, text in (
        (packing, f"Pack the soup{hidden}can into the small tray."),
        (language_table, f"push the red moon{hidden}left"),
    ):
        got = grammar.parse(text)
        assert isinstance(got, ParseError) and got.reason == f"holds the hidden character U+{ord(hidden):04X}"
    tab = packing.parse("Pack the soup\tcan into the small tray.")  # a tab is a space
    assert not isinstance(tab, ParseError) and tab.item == "soup can"

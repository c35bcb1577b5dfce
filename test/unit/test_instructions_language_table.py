"""Language Table grammar: round trips, the rubric's paraphrase classes, errors and a fuzz."""

import doctest

import numpy as np
import pytest

from r3.instructions import language_table as lt
from r3.instructions.language_table import (
    ADVERB_MISMATCH,
    DIFFERENT,
    MATCH,
    Instruction,
    ParseError,
    compare,
    format_instruction,
    paraphrase,
    parse,
    sample_instruction,
)
from r3.tasks.language_table.board import BLOCKS, COLOURS, SHAPES

T = lt.InstructionType


def _sample(n, seed):
    rng = np.random.default_rng(seed)
    return [sample_instruction(rng) for _ in range(n)], rng


def test_format_parse_round_trip_covers_every_type():
    instructions, _ = _sample(600, seed=0)
    assert {i.type for i in instructions} == set(T)
    assert {i.adverb for i in instructions} == {None, "slightly", "a bit"}
    for instr in instructions:
        text = format_instruction(instr)
        assert parse(text) == instr, text
        assert text == text.lower() and not text.endswith(".")


def test_paraphrase_round_trip():
    instructions, rng = _sample(800, seed=1)
    texts = set()
    for instr in instructions:
        text = paraphrase(instr, rng)
        texts.add(text)
        assert parse(text) == instr, text
    assert len(texts) > 700  # the paraphrases really vary


def test_sample_instruction_restricts_types():
    rng = np.random.default_rng(2)
    kinds = {sample_instruction(rng, types=[T.TOUCH, "separate"]).type for _ in range(50)}
    assert kinds == {T.TOUCH, T.SEPARATE}


@pytest.mark.parametrize(
    "instr, text",
    [
        (
            Instruction(T.BLOCK_TO_LOCATION, block="red moon", location="top left corner"),
            "move the red moon to the top left corner",
        ),
        (
            Instruction(T.BLOCK_TO_SIDE, block="yellow star", other="blue moon", direction="up"),
            "move the yellow star to the top side of the blue moon",
        ),
        (
            Instruction(T.BLOCK_INTO_BLOCK, block="green star", other="yellow pentagon"),
            "push the green star into the yellow pentagon",
        ),
        (
            Instruction(T.BLOCK_DIRECTION, block="blue cube", direction="down and right", adverb="slightly"),
            "move the blue cube down and right slightly",
        ),
        (
            Instruction(T.SEPARATE, block="red moon", other="blue cube"),
            "separate the red moon from the blue cube",
        ),
        (Instruction(T.TOUCH, block="green cube"), "touch the green cube"),
        (Instruction(T.ARM_TO_LOCATION, location="bottom center"), "move your arm to the bottom center"),
    ],
)
def test_canonical_forms(instr, text):
    assert format_instruction(instr) == text


def _direction(direction, block="red moon", adverb=None):
    return Instruction(T.BLOCK_DIRECTION, block=block, direction=direction, adverb=adverb)


def _location(location, block="red pentagon"):
    return Instruction(T.BLOCK_TO_LOCATION, block=block, location=location)


def _side(direction, block="yellow star", other="blue moon"):
    return Instruction(T.BLOCK_TO_SIDE, block=block, other=other, direction=direction)


PARAPHRASES = {
    "verbs": [
        ("move the red moon up", _direction("up")),
        ("place the red moon up", _direction("up")),
        ("slide the red moon up", _direction("up")),
        ("push the red moon up", _direction("up")),
        (
            "move the green star into the yellow pentagon",
            Instruction(T.BLOCK_INTO_BLOCK, block="green star", other="yellow pentagon"),
        ),
        ("slide your arm to the center", Instruction(T.ARM_TO_LOCATION, location="center")),
    ],
    "articles, case, whitespace, punctuation": [
        ("move red moon up", _direction("up")),
        ("Move The Red Moon Up.", _direction("up")),
        ("  move   the red moon\tup .", _direction("up")),
        ('"move the red moon up"', _direction("up")),
        ("separate red moon from blue cube", Instruction(T.SEPARATE, block="red moon", other="blue cube")),
        ("touch green cube", Instruction(T.TOUCH, block="green cube")),
        ("place red pentagon at center of board", _location("center")),
    ],
    "location wording": [
        ("place the red pentagon at the center of the board", _location("center")),
        ("move the red pentagon to the centre", _location("center")),
        ("move the red pentagon to the middle of the board", _location("center")),
        ("move the red pentagon to the top left corner", _location("top left corner")),
        ("move the red pentagon to the left top of the board", _location("top left corner")),
        ("move the red pentagon to the top-left corner of the board", _location("top left corner")),
        ("move the red pentagon to the top left", _location("top left corner")),
        ("move the red pentagon to the upper left corner", _location("top left corner")),
        ("move the red pentagon to the lower right", _location("bottom right corner")),
        ("move the red pentagon to the left side of the board", _location("center left")),
        ("move the red pentagon to the center left", _location("center left")),
        ("move the red pentagon to the middle left", _location("center left")),
        ("move the red pentagon to the left edge", _location("center left")),
        ("move the red pentagon to the right of the board", _location("center right")),
        ("move the red pentagon to the top of the board", _location("top center")),
        ("move the red pentagon to the top middle", _location("top center")),
        ("move the red pentagon to the bottom edge of the board", _location("bottom center")),
        ("move your arm near the bottom center", Instruction(T.ARM_TO_LOCATION, location="bottom center")),
        ("move the arm to the center", Instruction(T.ARM_TO_LOCATION, location="center")),
        ("move your arm bottom center", Instruction(T.ARM_TO_LOCATION, location="bottom center")),
    ],
    "direction wording": [
        ("move the red moon upwards", _direction("up")),
        ("move the red moon upward", _direction("up")),
        ("move the red moon to the top", _direction("up")),
        ("move the red moon left", _direction("left")),
        ("move the red moon to the left", _direction("left")),
        ("move the red moon to the left side", _direction("left")),
        ("move the red moon leftwards", _direction("left")),
        ("move the red moon towards the left", _direction("left")),
        ("move the red moon downward", _direction("down")),
        ("move the red moon right and down", _direction("down and right")),
        ("move the red moon down and right", _direction("down and right")),
        ("move the red moon down-right", _direction("down and right")),
        ("move the red moon diagonally down and to the right", _direction("down and right")),
        ("move the red moon to the right and downwards", _direction("down and right")),
        ("move the red moon up left", _direction("up and left")),
        ("move the red moon up and to the left", _direction("up and left")),
    ],
    "equivalent prepositions": [
        (
            "push the green star into the yellow pentagon",
            Instruction(T.BLOCK_INTO_BLOCK, block="green star", other="yellow pentagon"),
        ),
        (
            "push the green star to the yellow pentagon",
            Instruction(T.BLOCK_INTO_BLOCK, block="green star", other="yellow pentagon"),
        ),
        ("slide the yellow star into the top side of the blue moon", _side("up")),
        ("move the yellow star to the top side of the blue moon", _side("up")),
        ("move the yellow star to the top of the blue moon", _side("up")),
        ("move the yellow star above the blue moon", _side("up")),
        ("move the yellow star below the blue moon", _side("down")),
        ("move the yellow star to the bottom side of the blue moon", _side("down")),
        ("place the yellow star to the left side of the blue moon", _side("left")),
        ("move the yellow star on the left of the blue moon", _side("left")),
        ("move the yellow star left of the blue moon", _side("left")),
        ("move the yellow star to the right of the blue moon", _side("right")),
        ("move the red pentagon into the center", _location("center")),
        ("move the red pentagon at the center", _location("center")),
        (
            "separate the red moon away from the blue cube",
            Instruction(T.SEPARATE, block="red moon", other="blue cube"),
        ),
    ],
    "adverb position and wording": [
        ("slightly move the red moon upwards", _direction("up", adverb="slightly")),
        ("move the red moon slightly upwards", _direction("up", adverb="slightly")),
        ("move the red moon upwards slightly", _direction("up", adverb="slightly")),
        ("move the blue cube right and down (a bit)", _direction("down and right", "blue cube", "a bit")),
        ("move the blue cube a bit right and down", _direction("down and right", "blue cube", "a bit")),
        ("move the blue cube right and down a little", _direction("down and right", "blue cube", "a bit")),
        ("a little bit move the blue cube down-right", _direction("down and right", "blue cube", "a bit")),
        (
            "separate the red moon slightly from the blue cube",
            Instruction(T.SEPARATE, block="red moon", other="blue cube", adverb="slightly"),
        ),
    ],
}


@pytest.mark.parametrize(
    "text, expected",
    [case for cases in PARAPHRASES.values() for case in cases],
    ids=[f"{name}: {case[0]}" for name, cases in PARAPHRASES.items() for case in cases],
)
def test_rubric_paraphrases(text, expected):
    assert parse(text) == expected


def test_verb_is_kept_for_display_but_not_compared():
    parsed = parse("slide the red moon up")
    assert parsed.verb == "slide"
    assert parsed == _direction("up") and hash(parsed) == hash(_direction("up"))


@pytest.mark.parametrize(
    "text, reason",
    [
        ("move the red block up", "ambiguous block 'the red block'"),
        ("move the cube up", "ambiguous block 'the cube'"),
        ("move it up", "ambiguous block 'it'"),
        ("push the red moon into the moon", "ambiguous block 'the moon'"),
        ("move the purple moon up", "unknown block 'purple moon'"),
        ("move the red cube up", "unknown block 'red cube'"),
        ("touch the green triangle", "unknown block 'green triangle'"),
        ("move the red moon to the far corner", "unknown location or direction 'to the far corner'"),
        ("move the red moon top", "unknown location or direction 'top'"),
        ("move the red moon up and down", "conflicting directions 'up and down'"),
        ("move your arm to the middle of nowhere", "unknown location 'to the middle of nowhere'"),
        ("move your arm up", "the arm moves only to absolute locations"),
        ("move your arm to the red moon", "the arm moves only to absolute locations"),
        ("move your arm", "missing location"),
        ("push the red moon into the red moon", "the same block 'red moon' twice"),
        ("separate the blue cube from the blue cube", "the same block 'blue cube' twice"),
        ("move the red moon to the left side of the red moon", "the same block 'red moon' twice"),
        ("move the red moon up and push the blue cube down", "more than one instruction"),
        ("move the red moon up. touch the blue cube", "more than one instruction"),
        ("move the red moon up; move the blue cube down", "more than one instruction"),
        ("move the red moon up, then left", "more than one instruction"),
        ("move the red moon on top of the blue cube", "ambiguous relation 'on top of'"),
        ("move the red moon next to the blue cube", "ambiguous relation 'next to'"),
        ("move the red moon under the blue cube", "ambiguous relation 'under'"),
        ("move the red moon the blue cube", "missing relation"),
        ("move the green cube lower the blue cube", "unknown relation 'lower'"),
        ("push the red moon left the green cube", "unknown relation 'left'"),
        ("separate the red moon and the blue cube", "unknown relation 'and'"),
        ("separate the red moon", "missing the block to separate"),
        ("move the red moon", "missing where to move the red moon"),
        ("put the red moon up", "no verb"),
        ("the red moon up", "no verb"),
        ("slightly", "no verb"),
        ("move the red moon slightly up a bit", "more than one adverb"),
        ("touch the green cube please", "unexpected text 'please'"),
        ("", "empty instruction"),
        ("   .  ", "empty instruction"),
        ("@@@ ###", "no verb"),
    ],
)
def test_errors_name_the_problem(text, reason):
    result = parse(text)
    assert isinstance(result, ParseError), result
    assert result.text == text
    assert reason in result.reason


@pytest.mark.parametrize("value", [None, 3, b"move the red moon up", ["move the red moon up"]])
def test_non_strings_are_parse_errors(value):
    result = parse(value)
    assert isinstance(result, ParseError) and "expected a str" in result.reason


def test_fuzz_parse_never_raises():
    rng = np.random.default_rng(3)
    vocabulary = [
        "move",
        "push",
        "touch",
        "separate",
        "the",
        "to",
        "into",
        "of",
        "from",
        "side",
        "and",
        "your",
        "arm",
        "top",
        "left",
        "up",
        "down",
        "right",
        "center",
        "corner",
        "board",
        "slightly",
        "a",
        "bit",
        "diagonally",
        "-",
        ".",
        "above",
        *COLOURS,
        *SHAPES,
    ]
    for _ in range(1500):
        kind = rng.integers(3)
        if kind == 0:
            text = rng.bytes(int(rng.integers(0, 40))).decode("utf-8", errors="replace")
        elif kind == 1:
            text = "".join(chr(int(c)) for c in rng.integers(1, 0x2FFF, size=int(rng.integers(0, 30))))
        else:
            text = " ".join(rng.choice(vocabulary, size=int(rng.integers(0, 12))))
        assert isinstance(parse(text), (Instruction, ParseError)), text


def test_compare_follows_the_rubric_tiers():
    up = _direction("up")
    assert compare(up, parse("push the red moon upwards")) == MATCH
    assert compare(_direction("up", adverb="slightly"), _direction("up", adverb="a bit")) == MATCH
    assert compare(up, _direction("up", adverb="slightly")) == ADVERB_MISMATCH
    assert compare(up, _direction("down")) == DIFFERENT
    assert compare(up, _direction("up", block="blue cube")) == DIFFERENT
    into = Instruction(T.BLOCK_INTO_BLOCK, block="red moon", other="blue cube")
    reverse = Instruction(T.BLOCK_INTO_BLOCK, block="blue cube", other="red moon")
    assert compare(into, reverse) == DIFFERENT


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"type": T.TOUCH}, "block must be one of"),
        ({"type": T.TOUCH, "block": "green cube", "location": "center"}, "location must be None"),
        (
            {"type": T.BLOCK_TO_SIDE, "block": "red moon", "other": "blue cube", "direction": "up and left"},
            "direction must be one of",
        ),
        ({"type": T.BLOCK_INTO_BLOCK, "block": "red moon", "other": "red moon"}, "both 'red moon'"),
        ({"type": T.BLOCK_DIRECTION, "block": "red moon", "direction": "up", "adverb": "a lot"}, "adverb"),
        ({"type": "fly", "block": "red moon"}, "fly"),
    ],
)
def test_invalid_instructions_are_refused(fields, message):
    with pytest.raises(ValueError, match=message):
        Instruction(**fields)


def test_plain_string_type_is_coerced():
    instr = Instruction("touch", block="green cube")
    assert instr.type is T.TOUCH and hash(instr) == hash(Instruction(T.TOUCH, block="green cube"))


def test_every_block_is_parsed():
    for block in BLOCKS:
        assert parse(f"touch the {block}") == Instruction(T.TOUCH, block=block)


def test_docstring_examples():
    assert doctest.testmod(lt).failed == 0

"""Rule judge tiers, the simulated semantic tier, and the ``r3 judge`` command (table-driven)."""

import json
import pickle
from pathlib import Path

import pytest

import r3.rewards as rw
from r3.instructions.language_table import parse
from r3.rewards.cli import judge_main
from r3.rewards.judge import RuleJudge, judge_instruction
from r3.rewards.result import Tier
from r3.tasks.language_table.board import BLOCKS, BoardState

SNAPSHOTS = Path(rw.__file__).parent / "data" / "snapshots"
# Blue moon at the origin-ish with the blue cube 0.14 m to its right (see make_semantic_cases.py).
INTO = next(SNAPSHOTS.glob("000_into.npz"))


def _case(path):
    for line in (Path(rw.__file__).parent / "data" / "judge_cases.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row.get("snapshot") == f"snapshots/{path.name}" and row["human_score"] == 0.25:
            return row
    raise LookupError(path)


@pytest.mark.parametrize(
    "candidate, reference, suite, tier",
    [
        ("Slide the blue cube to the right.", "move the blue cube right", "language_table", Tier.LINGUISTIC),
        (
            "move the blue cube a bit right",
            "move the blue cube slightly right",
            "language_table",
            Tier.LINGUISTIC,
        ),
        (
            "move the blue cube right",
            "move the blue cube right slightly",
            "language_table",
            Tier.ADVERB_MISMATCH,
        ),
        (
            "push the blue cube into the red moon",
            "push the red moon into the blue cube",
            "language_table",
            Tier.NO_MATCH,
        ),
        ("move the blue cube left", "move the blue cube right", "language_table", Tier.NO_MATCH),
        ("move the blue block left", "move the blue cube left", "language_table", Tier.INVALID),
        ("", "touch the red moon", "language_table", Tier.INVALID),
        (
            "pack the soup can into the small tray",
            "Pack the soup can into the small tray.",
            "packing",
            Tier.LINGUISTIC,
        ),
        (
            "Pack the soup can into the large tray.",
            "Pack the soup can into the small tray.",
            "packing",
            Tier.NO_MATCH,
        ),
        ("pack the soup can", "Pack the soup can into the small tray.", "packing", Tier.INVALID),
    ],
)
def test_rule_tiers(candidate, reference, suite, tier):
    result = judge_instruction(candidate, reference, suite=suite)
    assert result.tier is tier
    assert result.score == {Tier.LINGUISTIC: 1.0, Tier.ADVERB_MISMATCH: 0.5}.get(tier, 0.0)
    assert result.reason


def test_parse_error_is_the_reason():
    result = judge_instruction("move the red block up", "move the red moon up")
    assert result.score == 0.0 and "ambiguous block" in result.reason


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"candidate": "touch the red moon", "reference": "move the red block"}, "reference"),
        (
            {"candidate": "touch the red moon", "reference": "touch the red moon", "suite": "chess"},
            "unknown suite",
        ),
    ],
)
def test_bad_reference_or_suite_raises(kwargs, match):
    with pytest.raises(ValueError, match=match):
        judge_instruction(**kwargs)


def test_semantic_tier_from_snapshot():
    row = _case(INTO)
    judge = RuleJudge()
    same = judge.judge(row["candidate"], row["reference"], snapshot=INTO)
    assert same.tier is Tier.SEMANTIC and "tolerance 0.030 m" in same.reason
    block, other = parse(row["candidate"]).block, parse(row["candidate"]).other
    reverse = judge.judge(f"push the {other} into the {block}", row["candidate"], snapshot=INTO.read_bytes())
    assert reverse.tier is Tier.NO_MATCH and f"moves the {other}" in reverse.reason
    touch = judge.judge(f"touch the {block}", row["candidate"], snapshot=INTO)
    assert touch.tier is Tier.NO_MATCH and "moves no block" in touch.reason
    # Linguistic tiers come first, with or without a snapshot.
    assert judge.judge(row["candidate"], row["candidate"], snapshot=INTO).tier is Tier.LINGUISTIC


def test_simulator_is_deterministic_cached_and_picklable():
    sim = rw.OutcomeSimulator()
    snap, instr = INTO.read_bytes(), parse(_case(INTO)["reference"])
    first = sim.outcome(snap, instr)
    assert sim.outcome(snap, instr) is first  # cached
    copy = pickle.loads(pickle.dumps(RuleJudge(sim))).simulator
    assert copy._env is None and not copy._cache
    again = copy.outcome(snap, instr)
    assert again.moved == first.moved and (again.positions == first.positions).all()


def _snapshot_jobs(n):
    rows = [json.loads(line) for line in (SNAPSHOTS.parent / "judge_cases.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r.get("snapshot")][:n]
    return [
        ((SNAPSHOTS.parent / r["snapshot"]).read_bytes(), parse(r[k]))
        for r in rows
        for k in ("candidate", "reference")
    ]


def test_sleeping_rollouts_are_a_function_of_their_inputs_and_end_where_awake_ones_do():
    """Sleep state is not part of a snapshot: a restore must wake every block, or a rollout would
    depend on which rollout ran before it in that env. And sleeping must not change what a verdict
    reads: the same block moves, and every block ends within the tier's tolerance of where it ends
    awake (pushes are sensitive: moving the blocks 0.1 mm before a rollout shifts outcomes as much)."""
    jobs = _snapshot_jobs(6)
    asleep, awake = rw.OutcomeSimulator(), rw.OutcomeSimulator(sleep=False)
    forward = [asleep.rollout(*job) for job in jobs]
    env = asleep._get_env()
    assert (env.data.tree_asleep >= 0).any()  # resting blocks did fall asleep
    env.restore(jobs[0][0])
    assert (env.data.tree_asleep < 0).all()
    backward = [asleep.rollout(*job) for job in reversed(jobs)][::-1]
    fresh = rw.OutcomeSimulator().rollout(*jobs[-1])
    assert all((a.positions == b.positions).all() for a, b in zip(forward, backward))
    assert (fresh.positions == forward[-1].positions).all()
    for slept, job in zip(forward, jobs):
        reference = awake.rollout(*job)
        assert slept.moved == reference.moved
        assert abs(slept.positions - reference.positions).max() < rw.semantic.SEMANTIC_TOLERANCE_M


@pytest.mark.parametrize("kwargs", [{"tolerance_m": 0.0}, {"moved_threshold_m": -1.0}])
def test_simulator_validates_tolerances(kwargs):
    with pytest.raises(ValueError):
        rw.OutcomeSimulator(**kwargs)


def test_cli_prints_json(capsys):
    row = _case(INTO)
    assert (
        judge_main(
            ["--candidate", row["candidate"], "--reference", row["reference"], "--snapshot", str(INTO)]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["score"] == 0.25 and out["tier"] == "semantic_match" and out["reason"]
    assert judge_main(["--candidate", "touch the red moon", "--reference", "touch the red moon"]) == 0
    assert json.loads(capsys.readouterr().out)["score"] == 1.0


def test_cli_help_describes_every_option(capsys):
    with pytest.raises(SystemExit):
        judge_main(["--help"])
    text = capsys.readouterr().out
    for option in (
        "--candidate",
        "--reference",
        "--snapshot",
        "--backend",
        "--suite",
        "--image",
        "--vlm-url",
    ):
        assert option in text


@pytest.mark.parametrize(
    "argv",
    [
        ["--candidate", "touch the red moon", "--reference", "move the red block"],
        [
            "--candidate",
            "touch the red moon",
            "--reference",
            "touch the red moon",
            "--snapshot",
            "/nonexistent.npz",
            "--candidate",
            "move the red moon up",
        ],
        ["--candidate", "a", "--reference", "b", "--backend", "vlm", "--vlm-model", ""],
    ],
)
def test_cli_bad_input_exits_2(argv):
    with pytest.raises(SystemExit) as exc:
        judge_main(argv)
    assert exc.value.code == 2


@pytest.mark.parametrize(
    "candidate, low, high",
    [
        ("push the red moon into the green cube", 0.99, 1.0),  # the same outcome, other words
        ("move the red moon up slightly", 0.3, 0.55),  # the right block, part of the way
        ("move the red moon up and to the left", 0.15, 0.4),  # the right block, a neighbouring direction
        ("move the red moon left slightly", 0.0, 0.05),  # a short push sideways: hedging earns ~nothing
        ("move the red moon down", 0.0, 0.0),  # the right block, the opposite way
        ("move the green cube up", 0.0, 0.0),  # another block
        ("touch the red moon", 0.0, 0.0),  # no block moves
    ],
)
def test_outcome_agreement_grades_the_semantic_tier(candidate, low, high):
    sim = rw.OutcomeSimulator()
    score = sim.agreement(INTO.read_bytes(), parse(candidate), parse("move the red moon up"))
    assert low <= score <= high


def test_outcome_reward_shares_the_judges_rollouts_and_skips_what_it_cannot_score():
    judge = RuleJudge()
    outcome = rw.OutcomeReward(judge)
    answers = [
        "Reasoning: it sits low. Instruction: move the red moon up slightly",
        "Instruction: move the red moon sideways",  # outside the grammar
        "Instruction: move the red moon up",
        "Instruction: move the red moon up",
    ]
    scores = outcome(
        answers,
        expert_instruction=["move the red moon up"] * 4,
        suite=["language_table", "language_table", "language_table", "packing"],
        snapshot=[INTO, INTO, None, INTO],
    )
    assert 0.3 < scores[0] < 0.55 and scores[1] == 0.0
    assert scores[2] is None and scores[3] is None  # no snapshot; a suite the pushing policy does not run
    # The judge finds both rollouts of the first answer in the shared cache.
    snap = INTO.read_bytes()
    assert (
        judge.simulator.prefetch(
            [(snap, parse("move the red moon up slightly")), (snap, parse("move the red moon up"))]
        )
        == 0
    )


def test_outcome_reward_skips_a_reference_outside_the_grammar_with_a_warning_naming_it():
    outcome = rw.OutcomeReward(RuleJudge())
    with pytest.warns(RuntimeWarning, match="reference 'fly to mars' does not parse: no verb"):
        scores = outcome(
            ["Instruction: move the red moon up"],
            expert_instruction=["fly to mars"],
            suite=["language_table"],
            snapshot=[INTO],
        )
    assert scores == [None]


def test_progress_gain_is_the_task_progress_a_rollout_makes():
    """Seed 2 of "group": pushing the first goal block into the second gathers them (progress
    rises), pushing it up spreads them (falls), touching moves nothing, and the gain is the task's
    own progress after the rollout minus before it."""
    from r3.sim.language_table.env import LanguageTableEnv

    env = LanguageTableEnv(task="group", render_mode=None)
    env.reset(seed=2)
    task, snap = env.task_instance, env.snapshot()
    a, b = task.blocks[:2]
    sim = rw.OutcomeSimulator()
    into = sim.progress_gain(snap, parse(f"push the {a} into the {b}"))
    assert into > 0.1
    assert sim.progress_gain(snap, parse(f"move the {a} up")) < 0
    assert sim.progress_gain(snap, parse(f"touch the {a}")) == pytest.approx(0, abs=1e-4)
    env.restore(snap)
    before = task.progress(env.state())
    end = sim.outcome(snap, parse(f"push the {a} into the {b}")).positions
    after = task.progress(BoardState({name: (*xy, 0.0) for name, xy in zip(BLOCKS, end)}, (0.0, 0.0)))
    assert into == pytest.approx(after - before)
    # A snapshot without a task (the judge's shipped cases) has no progress to gain.
    assert sim.progress_gain(INTO.read_bytes(), parse("move the red moon up")) is None


def test_progress_reward_scores_a_bad_answer_as_the_worst_move_and_skips_what_it_cannot_score():
    from r3.sim.language_table.env import LanguageTableEnv

    env = LanguageTableEnv(task="group", render_mode=None)
    env.reset(seed=2)
    a, b = env.task_instance.blocks[:2]
    judge = RuleJudge()
    progress = rw.ProgressReward(judge)
    snap = env.snapshot()
    scores = progress(
        [f"Reasoning: they are apart. Instruction: push the {a} into the {b}", "Instruction: fly", "x", "x"],
        suite=["language_table", "language_table", "language_table", "packing"],
        snapshot=[snap, snap, None, snap],
    )
    assert scores[0] > 0.1 and scores[1] == -1.0
    assert scores[2] is None and scores[3] is None  # no snapshot; a suite the pushing policy does not run
    assert judge.simulator.prefetch([(snap, parse(f"push the {a} into the {b}"))]) == 0  # shared cache

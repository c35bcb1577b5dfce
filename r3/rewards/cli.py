"""``r3 judge``: score one candidate instruction against a reference and print the verdict as JSON."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from r3.cli_args import readable_file
from r3.rewards.judge import RuleJudge
from r3.rewards.semantic import load_snapshot
from r3.rewards.vlm import DEFAULT_URL, KEY_ENV, JudgeFailure, VLMJudge
from r3.suites import DEFAULT_SUITE, get_suite, suite_names


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="r3 judge",
        description="Score a candidate instruction against the expert's reference with the R^3 rubric "
        "(1.0 linguistic match, 0.5 adverb mismatch, 0.25 semantic match, 0.0 otherwise) and print "
        'JSON: {"score": ..., "tier": ..., "reason": ...}.',
    )
    p.add_argument(
        "--candidate", required=True, help="the instruction to score, e.g. 'slide the blue cube right'"
    )
    p.add_argument("--reference", required=True, help="the expert's instruction for the same state")
    p.add_argument(
        "--suite",
        choices=suite_names(),
        default=DEFAULT_SUITE,
        help="instruction grammar; packing uses exact string match (default: language_table)",
    )
    p.add_argument(
        "--snapshot",
        metavar="FILE",
        type=readable_file,
        help="simulator snapshot (LanguageTableEnv.snapshot() bytes) of the state; enables the "
        "simulated semantic tier of the rule backend",
    )
    p.add_argument(
        "--backend",
        choices=("rule", "vlm"),
        default="rule",
        help="rule: grammar + simulator (default); vlm: ask an OpenAI-compatible VLM server",
    )
    p.add_argument(
        "--image", metavar="FILE", type=readable_file, help="PNG/JPEG of the scene, sent to the VLM backend"
    )
    p.add_argument(
        "--vlm-url",
        default=os.environ.get("R3_JUDGE_URL", DEFAULT_URL),
        help=f"base URL of the VLM server, ending in /v1 (default: env R3_JUDGE_URL, else {DEFAULT_URL})",
    )
    p.add_argument(
        "--vlm-model",
        default=os.environ.get("R3_JUDGE_MODEL"),
        help="served model name for the VLM backend (env R3_JUDGE_MODEL); the API key, if "
        f"any, comes from env {KEY_ENV}",
    )
    return p


def _snapshot_of(suite: str, path: str) -> bytes:
    """The snapshot at ``path``, read once and restored into ``suite``'s simulator, whatever the verdict
    will be; a ValueError saying why it is none the rule judge can simulate: a file of random bytes
    was taken whenever the instructions matched as text, and refused only when the judge came to
    simulate it."""
    if not get_suite(suite).outcome_simulated:
        raise ValueError(f"the {suite} judge compares the instructions as text and simulates no snapshot")
    try:
        snapshot = load_snapshot(path)
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or exc}") from None
    env = get_suite(suite).hook("make_env")(task=None, render_mode=None)
    try:
        env.restore(snapshot)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    finally:
        env.close()
    return snapshot


def judge_main(argv: list[str] | None = None) -> int:
    """Entry point of ``r3 judge``; returns 0 on a verdict, 1 when the VLM gave none, 2 on bad input."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.backend == "rule" and args.image:
        parser.error("--image is for --backend vlm; the rule backend simulates --snapshot instead")
    if args.backend == "vlm" and args.snapshot:
        parser.error("--snapshot is for the rule backend; --backend vlm looks at --image instead")
    snapshot = None
    if args.snapshot:
        try:
            snapshot = _snapshot_of(args.suite, args.snapshot)
        except ValueError as exc:
            parser.error(f"argument --snapshot: {exc}")
    try:
        if args.backend == "vlm":
            if not args.vlm_model:
                parser.error("--backend vlm needs --vlm-model (or R3_JUDGE_MODEL)")
            if not get_suite(args.suite).vlm_judged:
                vlm_suites = ", ".join(name for name in suite_names() if get_suite(name).vlm_judged)
                parser.error(f"the VLM backend grades the {vlm_suites} suite only")
            image = Path(args.image).read_bytes() if args.image else None
            vlm = VLMJudge(args.vlm_url, args.vlm_model, api_key=os.environ.get(KEY_ENV))
            result = vlm.judge(args.candidate, args.reference, image)
        else:
            result = RuleJudge().judge(args.candidate, args.reference, suite=args.suite, snapshot=snapshot)
    except JudgeFailure as err:
        print(json.dumps({"error": err.kind, "detail": err.detail}))
        return 1
    except (ValueError, OSError) as err:
        parser.error(str(err))
    print(json.dumps(result.to_dict()))
    return 0


if __name__ == "__main__":
    sys.exit(judge_main())

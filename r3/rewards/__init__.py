"""Rewards for the reasoner: the rubric judge, exact match, length penalty, plan rewards, composition.

ROS-free. The simulator (MuJoCo) loads only when a semantic judgement first needs it.

- :func:`judge_instruction` / :class:`RuleJudge`: R^3 rubric tiers 1.0 / 0.5 / 0.25 / 0.0, the
  semantic tier verified by executing both instructions in the simulator (:mod:`.semantic`).
- :class:`VLMJudge`: the same rubric asked of an OpenAI-compatible VLM, for real-robot data.
- :class:`OutcomeReward`: the semantic tier graded (how far the answer carries the board towards the
  expert's outcome), a denser Stage II term beside the judge.
- :class:`ProgressReward`: the task progress the answer's instruction makes in the simulator, with no
  reference (an environment reward).
- :func:`exact_match`, :func:`length_penalty`, :func:`lcs_reward`, :func:`plan_format_reward`,
  :func:`plan_reward`: unscaled reward terms (the packing plan interface's in :mod:`.plan`).
- :class:`RewardComposer` and the TRL reward functions (:mod:`.functions`).
"""

from r3.rewards.functions import (
    ComposedReward,
    JudgeReward,
    LengthPenaltyReward,
    OutcomeReward,
    PackingPlanFormatReward,
    PackingPlanLCSReward,
    PlanFormatReward,
    PlanLCSReward,
    ProgressReward,
    RewardComposer,
    completion_text,
    instruction_rewards,
    plan_rewards,
)
from r3.rewards.judge import RuleJudge, judge_instruction
from r3.rewards.plan import plan_actions, plan_format_reward, plan_format_terms, plan_reward
from r3.rewards.result import JudgeResult, Tier
from r3.rewards.semantic import MOVED_THRESHOLD_M, SEMANTIC_TOLERANCE_M, OutcomeSimulator
from r3.rewards.terms import exact_match, lcs_reward, length_penalty
from r3.rewards.vlm import JudgeFailure, VLMJudge

__all__ = [
    "MOVED_THRESHOLD_M",
    "SEMANTIC_TOLERANCE_M",
    "ComposedReward",
    "JudgeFailure",
    "JudgeResult",
    "JudgeReward",
    "LengthPenaltyReward",
    "OutcomeReward",
    "OutcomeSimulator",
    "PackingPlanFormatReward",
    "PackingPlanLCSReward",
    "PlanFormatReward",
    "PlanLCSReward",
    "ProgressReward",
    "RewardComposer",
    "RuleJudge",
    "Tier",
    "VLMJudge",
    "completion_text",
    "exact_match",
    "instruction_rewards",
    "judge_instruction",
    "lcs_reward",
    "length_penalty",
    "plan_actions",
    "plan_format_reward",
    "plan_format_terms",
    "plan_reward",
    "plan_rewards",
]

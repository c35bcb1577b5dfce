"""Training the reasoner on TRL: Stage I SFT (mid-training) and Stage II single-step RL (Dr. GRPO).

- :mod:`.config`: one self-validating config per job (:class:`SFTConfig`, :class:`RLConfig`,
  :class:`ImputeConfig`), read from YAML with unknown keys rejected.
- :mod:`.rows`: dataset rows -> TRL rows, prompts built by :mod:`r3.reasoning.prompts`.
- :mod:`.args`: every value that reaches ``trl.SFTConfig`` / ``trl.GRPOConfig``.
- :mod:`.sft`, :mod:`.grpo`, :mod:`.impute`: the jobs; :mod:`.checkpoint`: loading and saving.
- :mod:`.multiturn`: turn-level GSPO for the semantic interface (``interface: semantic``).

``r3 train sft|rl|impute --config FILE`` runs them (:mod:`.cli`); see docs/training.md.
Importing this package loads neither torch nor TRL.
"""

from r3.train.config import ConfigError, ImputeConfig, LoraSettings, RLConfig, SFTConfig, load_config

__all__ = ["ConfigError", "ImputeConfig", "LoraSettings", "RLConfig", "SFTConfig", "load_config"]

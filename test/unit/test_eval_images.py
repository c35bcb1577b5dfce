"""`r3 eval` on Language Table shows the reasoner the camera image, the same frame the ROS graph's
reasoner gets: an image model evaluated on blank frames would score as if blind (found by `r3 mini`'s
via-ROS check, where the same checkpoint decided differently in process and on the graph)."""

from __future__ import annotations

import numpy as np
import pytest

from r3.eval.runner import EvalConfig, evaluate
from r3.reasoning.backends import BACKENDS, register_backend
from r3.reasoning.backends.base import BackendOutput, ReasonerBackend
from r3.sim.language_table.env import LanguageTableEnv

SEEN: list[np.ndarray] = []


class ImageRecorder(ReasonerBackend):
    """Records the image of every input and answers one fixed instruction."""

    model_id = "image_recorder"

    @classmethod
    def from_spec(cls, rest: str, **options) -> ImageRecorder:
        return cls()

    def _generate(self, messages, prefix, max_tokens, stop, on_text):
        raise NotImplementedError

    def decide(self, inp, budget=None, on_text=None) -> BackendOutput:
        SEEN.append(np.asarray(inp.images[0]).copy())
        text = "Reasoning: it is close.\nInstruction: move the red moon left"
        return BackendOutput(text, "stop", None, None, None, 0.0, 0.0, self.model_id, 1, False)


@pytest.fixture
def forget_registered_backends():
    yield
    BACKENDS.reload()


def test_the_eval_reasoner_sees_the_rendered_camera_image(tmp_path, forget_registered_backends):
    register_backend("image_recorder", f"{__name__}:ImageRecorder")
    SEEN.clear()
    config = EvalConfig("image_recorder", tasks=("group",), scenes=1, trials=1, max_steps=1)
    (record,) = evaluate(config, tmp_path / "eval", workers=1)
    env = LanguageTableEnv()
    env.reset(seed=record["seed"], options={"task": "group"})
    assert len(SEEN) == 1
    assert SEEN[0].shape == (env.height, env.width, 3)
    assert np.array_equal(SEEN[0], env.render())

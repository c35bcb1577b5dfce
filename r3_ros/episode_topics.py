"""What the reasoner publishes of an episode: its START and END events, each decision step after the
frames it was decided on, and what came of each instruction; the messages are built in
``r3_ros/conversions.py``. A recorder records them (``r3_ros/recording.py``); a simulator follows
the events to keep its scene for the running episode (:func:`scene_resets`)."""

from __future__ import annotations

import time
from collections.abc import Callable

from sensor_msgs.msg import Image

from r3.graph import names
from r3.safety.freeze import FreezeWatch
from r3_msgs.msg import EpisodeEvent, InstructionOutcome, ReasonerStep
from r3_ros.conversions import episode_event_msg, instruction_outcome_msg, publisher_gid, reasoner_step_msg
from r3_ros.executor import PolledCallbackGroup, deliver_pending
from r3_ros.node import R3Node, named_publishers
from r3_ros.qos import EVENTS, EVENTS_HELD, recorded
from r3_ros.senders import NAME_WAIT_S, Decided, Senders
from r3_ros.services import ResetRecord
from r3_ros.shutdown import unless_shut_down


class EpisodeSources:
    """Episode events by who sent them: those of ``names.EPISODE_SOURCE`` count, in the order they
    came, once each publisher's name is settled (``r3_ros.senders``); any other node's are refused and
    logged, saying that only the source ``does`` (a forged START closed a running bag in the
    recorder). Not thread-safe: the caller holds its own lock around both calls."""

    def __init__(self, node: R3Node, does: str):
        self.node, self.does = node, does
        self._senders = Senders(
            lambda: named_publishers(node, names.EPISODE_EVENTS, qualified=True), NAME_WAIT_S
        )

    @property
    def pending(self) -> bool:
        return self._senders.pending

    def add(self, msg: EpisodeEvent, info) -> None:
        self._senders.add(msg, info, publisher_gid(info), time.monotonic())

    def decided(self) -> list[Decided]:
        """The source's events whose sender is settled now; the others' are refused and logged."""
        kept = []
        for event in self._senders.decided(time.monotonic()) if self._senders.pending else []:
            if names.is_episode_source(event.sender):
                kept.append(event)
            else:
                self.node.get_logger().error(
                    f"refused an episode event for {event.message.episode_id[:80]!r} from "
                    f"{event.sender or 'an unknown node'!r}: only {names.EPISODE_SOURCE} {self.does}",
                    throttle_duration_sec=1.0,
                )
        return kept


def scene_resets(node: R3Node, freezes: FreezeWatch) -> ResetRecord:
    """How a simulator node serves ResetScene (``ResetRecord.answer``): following the episode events,
    taken when a reset comes (no executor wakes for them), so that no reset moves the scene of a
    running episode, and watching the node's ``freezes``, so that no reset that waited through one
    moves the scene of an episode given up on meanwhile."""

    def on_event(msg: EpisodeEvent, info) -> None:
        record.on_event(msg.episode_id, msg.event == EpisodeEvent.START, publisher_gid(info))

    def publishers() -> dict[bytes, str]:
        return {
            bytes(p.endpoint_gid): p.node_name
            for p in node.get_publishers_info_by_topic(names.EPISODE_EVENTS)
        }

    events = node.create_subscription(
        EpisodeEvent, names.EPISODE_EVENTS, on_event, EVENTS_HELD, callback_group=PolledCallbackGroup()
    )
    record = ResetRecord(lambda: deliver_pending([events]), publishers, freezes)
    return record


class EpisodeTopics:
    """The reasoner's episode publishers; its events name ``backend`` (the model id)."""

    def __init__(self, node: R3Node, backend: str):
        self.node, self.backend = node, backend
        self.steps_pub = node.create_publisher(ReasonerStep, names.REASONER_STEPS, recorded(50))
        self.frames_pub = node.create_publisher(Image, names.REASONER_FRAMES, recorded(50))
        self.outcome_pub = node.create_publisher(InstructionOutcome, names.INSTRUCTION_OUTCOMES, recorded(50))
        self.event_pub = node.create_publisher(EpisodeEvent, names.EPISODE_EVENTS, EVENTS)
        #: The publishers whose messages an episode's bag must hold from its first step on.
        self.recorded = [self.steps_pub, self.frames_pub, self.outcome_pub]

    def step_record(
        self, episode_id: str, task: str, record, latencies, images: list[Image]
    ) -> Callable[[], None]:
        """Publishes the step, after the frames it was decided on (reliable: every recorded step finds
        its frames), when first called; later calls do nothing. The reasoner calls it once the step's
        instruction is on its way (a frame takes 1-2 ms to send, which need not hold the motion up),
        and again when the step ends, for a step whose instruction never went out. The step is
        stamped now, when it was decided: a bag's reader gives each pusher command the instruction of
        the latest step stamped no later than it, and the instruction's first commands may be
        stamped before its record goes out."""
        msg = reasoner_step_msg(episode_id, task, record, latencies, images, self.node.now().to_msg())
        sent = False

        def publish() -> None:
            nonlocal sent
            if sent:
                return
            sent = True
            with unless_shut_down(self.node):  # after a SIGINT the bag ends incomplete anyway
                for image in images:
                    self.frames_pub.publish(image)
                self.steps_pub.publish(msg)

        return publish

    def publish_outcome(self, episode_id: str, step: int, instruction: str, follow, progress: float) -> None:
        self.outcome_pub.publish(instruction_outcome_msg(episode_id, step, instruction, follow, progress))

    def publish_event(self, event: int, episode_id: str, goal, goal_text: str, result=None) -> None:
        """START or END (with the RunTask ``result``) of the episode of RunTask ``goal``."""
        stamp = self.node.now().to_msg()
        msg = episode_event_msg(event, episode_id, goal, goal_text, self.backend, stamp, result)
        with unless_shut_down(self.node):  # an END after a SIGINT cannot go out: the bag ends incomplete
            self.event_pub.publish(msg)

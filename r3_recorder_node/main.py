"""r3_recorder_node: records the configured topics into one rosbag2 MCAP bag per episode.

Episodes are delimited by EpisodeEvent START / END. Subscriptions take serialised messages
(``raw=True``), so recording never deserialises; the bytes go to the bag as they came (CDR), with
r3_msgs types registered from the interface files. The recorder takes what its subscriptions
received every ``TICK_S`` while an episode records (``IDLE_POLL_S`` between episodes), all topics
at once in the order they arrived, instead of waking once per message
(``r3_ros.executor.PolledCallbackGroup``): a packing step sends it some 200 messages. Topic types
are discovered from the graph, as ``ros2 bag record`` does. An episode that never sees END is
closed as incomplete: at the next START, at the recorder's stop, or once the reasoner that started
it has sent no heartbeat for ``reasoner_timeout_s`` (it died or was stopped); ``r3_episode.yaml``
in the bag says so from the first message on. An END sent again by the reasoner (its result changed
after END: this recorder fell silent before closing the bag) is the outcome the bag closes with, or,
once closed, takes (``EpisodeBagWriter.amend``). A message sent before the episode's START (by its
DDS source stamp) belongs to the one before, however late it arrives: it is not filed into this
episode's bag.

``output_dir`` is the bag root (``~`` is the user's home); a relative one is taken from the
recorder's working directory, made absolute and created at start, and one it cannot write ends the
node at launch. The absolute path of each bag opened goes out on ``/r3/recorder/bags``
(latched), so the RunTask result can carry it. The reasoner's decision frames
(``/r3/reasoner/frames``, reliable) are recorded whatever the ``topics`` list says.

Episode events are taken only from ``names.EPISODE_SOURCE``'s publishers (the publisher of each event is
looked up by its DDS gid): a START from anyone else, such as one forged mid-episode, is refused and
never closes the running bag; an END counts only from the publisher of its episode's START (a node
that takes the reasoner's name cannot end its bag early); and an episode id that is not a plain
folder name opens nothing. An
event whose publisher the graph does not name yet waits behind that publisher's own events only
(``r3_ros.senders``), so a writer that never gets a name holds up nobody else's.

A bag takes no more messages but its episode events once it reaches ``max_bag_mb`` or its disk has
less than ``min_free_mb`` free: it closes incomplete, its reason naming what was dropped, so a flood
on a recorded topic cannot fill the disk under the rest of the graph. A bag that never received some
messages of a reliable topic (gaps in a publisher's sequence numbers, ``open_bag``) closes incomplete.
"""

from __future__ import annotations

import threading
import time

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.qos import ReliabilityPolicy
from rclpy.serialization import serialize_message
from std_msgs.msg import String

from r3.data.bags import EpisodeBagWriter, EpisodeInfo, bag_root
from r3.graph import names
from r3.graph.interfaces import PUBLISHED_TYPES
from r3.graph.node_params import NODE_PARAMETERS
from r3_msgs.msg import EpisodeEvent
from r3_recorder_node.closing import DRAIN_TICK_S, TICK_S, KernelDrops
from r3_recorder_node.open_bag import OpenBag
from r3_ros.adaptive_subscriptions import AdaptiveSubscriptions
from r3_ros.conversions import publisher_gid
from r3_ros.episode_topics import EpisodeSources
from r3_ros.executor import InlineCallbackGroup, PolledCallbackGroup, deliver_pending
from r3_ros.heartbeat import HeartbeatMonitor, HeartbeatPublisher
from r3_ros.node import R3Node
from r3_ros.params import declare_parameters
from r3_ros.qos import EVENTS, LATCHED, RECORD_DEPTH
from r3_ros.refusals import refusing_message
from r3_ros.spin import run_node

EVENTS_TYPE = "r3_msgs/msg/EpisodeEvent"
#: Waiting this long for a configured topic's publisher is worth a warning naming the topics.
WAITING_WARN_S = 2.0
#: After END, how much longer than ``close_delay_s`` a bag waits, at most, for the episode's last steps
#: and frames and for what else was sent before END.
STRAGGLERS_S = 5.0
#: Between episodes the recorder only drops what it receives (sent before any START): seldom is enough.
IDLE_POLL_S = 0.25
BEST_EFFORT = ReliabilityPolicy.BEST_EFFORT


class RecorderNode(R3Node):
    def __init__(self):
        super().__init__("r3_recorder_node")
        self.param = p = declare_parameters(self, NODE_PARAMETERS["r3_recorder_node"])
        self.output_dir = bag_root(p["output_dir"])
        self.topics = [t for t in p["topics"] if t != names.EPISODE_EVENTS]
        self.topics += [names.REASONER_FRAMES] if names.REASONER_FRAMES not in self.topics else []
        self.close_delay_s = p["close_delay_s"]
        self.lock = threading.Lock()
        self.closing: list[threading.Thread] = []
        self.bag: OpenBag | None = None  # the episode being recorded
        self.last_closed: tuple[OpenBag, threading.Thread] | None = None  # the bag closed last, its closing
        self.deciding = threading.Lock()  # events are acted on one at a time, in the order they came
        self.sources = EpisodeSources(self, "starts and ends episodes")  # looked at again each poll
        # Made once publishers appear; no executor wakes for them: poll() takes what they received.
        self.subscribed = AdaptiveSubscriptions(
            self, RECORD_DEPTH, raw=True, callback_group=PolledCallbackGroup()
        )
        self.taking = threading.Lock()  # one taker at a time; no subscription is remade while taken from
        self.drops = KernelDrops(time.monotonic())  # a bag waits for the repair of what was dropped
        for topic in self.topics:  # r3's own topics with the type r3 publishes them with
            self.subscribed.add(
                topic, lambda msgtype, topic=topic: self.record_to(topic, msgtype), PUBLISHED_TYPES.get(topic)
            )
        wall = Clock(clock_type=ClockType.STEADY_TIME)
        self.bags_pub = self.create_publisher(String, names.RECORDER_BAGS, LATCHED)
        # A group of its own: an event waiting for its sender's name never holds up the recording.
        self.create_subscription(
            EpisodeEvent,
            names.EPISODE_EVENTS,
            refusing_message(self, self.on_event),
            EVENTS,
            callback_group=MutuallyExclusiveCallbackGroup(),
        )
        self.heartbeat = HeartbeatPublisher(self, state=names.RECORDER_WAITING)
        self.starter_watch = HeartbeatMonitor(self)  # the reasoner that started the open episode
        self.starter = ""  # its fully qualified node name
        self.up_since, self.told_waiting = time.monotonic(), False
        self.create_timer(0.2, refusing_message(self, self.say_if_ready), clock=wall)
        self.poll_timer = self.create_timer(
            IDLE_POLL_S, refusing_message(self, self.poll), clock=wall, callback_group=InlineCallbackGroup()
        )
        self.get_logger().info(f"recording {len(self.topics)} topics per episode into {self.output_dir}")

    def record_to(self, topic: str, msgtype: str):
        def callback(data: bytes, info) -> None:
            sequence = (publisher_gid(info), info.get("publication_sequence_number"))
            subscription = self.subscribed.subscriptions.get(topic)
            best_effort = subscription is not None and subscription.qos_profile.reliability == BEST_EFFORT
            self.write(topic, msgtype, data, info["source_timestamp"], sequence, best_effort)

        return callback

    def write(self, topic: str, msgtype: str, data: bytes, sent_ns=None, sequence=None, best_effort=False):
        """Into the open bag (``OpenBag.write``); nothing between episodes."""
        with self.lock:
            if self.bag is not None:
                self.say_full(self.bag.write(topic, msgtype, data, sent_ns, sequence, best_effort))

    def say_full(self, why: str) -> None:
        """Log that the open bag has just become full (``why`` "": it has not)."""
        if why:
            self.get_logger().error(f"episode {self.bag.episode_id}: {why}; its bag takes no more messages")

    def on_event(self, msg: EpisodeEvent, info) -> None:
        with self.deciding:
            self.sources.add(msg, info)
        self.take_decided()

    def take_decided(self) -> None:
        """Act on each event of ``names.EPISODE_SOURCE`` whose sender is settled, in the order they came."""
        with self.deciding:
            for decided in self.sources.decided():
                self.act_on(decided.message, decided.info, decided.sender)

    def act_on(self, msg: EpisodeEvent, info, sender: str) -> None:
        self.take_received()  # what came before the event goes before it, into the bag open until now
        if msg.event == EpisodeEvent.START:
            with self.lock:
                episode = EpisodeInfo(
                    episode_id=msg.episode_id,
                    suite=msg.suite,
                    task=msg.task,
                    seed=msg.seed,
                    goal=msg.goal,
                    backend=msg.backend,
                )
                writer = EpisodeBagWriter(self.output_dir, episode)  # refuses an id that is no folder name
                if self.bag is not None and self.bag.ended is not None:  # its END came: it was draining
                    steps_recorded = names.REASONER_STEPS in self.topics
                    came = self.bag.records_arrived(steps_recorded)
                    self.close_ended("" if came else "the next episode started before its step records came")
                else:
                    self.close_current(complete=False, reason="a new episode started before this one ended")
                self.bag = OpenBag(writer, info["source_timestamp"], self.param, publisher_gid(info))
                self.starter = sender
                self.say_full(self.bag.check_room())
                self.poll_every(TICK_S)
                self.say_full(self.bag.write(names.EPISODE_EVENTS, EVENTS_TYPE, serialize_message(msg)))
                self.bags_pub.publish(String(data=str(writer.path)))
            self.announce_when_ready(msg.episode_id)
            self.get_logger().info(f"recording episode {msg.episode_id}")
        elif msg.event == EpisodeEvent.END:
            with self.lock:
                bag = self.bag
            if bag is not None and bag.episode_id == msg.episode_id and publisher_gid(info) != bag.source:
                self.get_logger().error(  # a node that took the reasoner's name: the bag stays open
                    f"refused an END of episode {msg.episode_id!r} from another publisher than its START's",
                    throttle_duration_sec=1.0,
                )
                return
            self.write(names.EPISODE_EVENTS, EVENTS_TYPE, serialize_message(msg))
            self.close_when_drained(msg, info["source_timestamp"], publisher_gid(info))

    def close_when_drained(self, msg: EpisodeEvent, end_sent_ns: int, source: bytes) -> None:
        """Close the ended episode's bag once what was sent before END has come (``closing.Drain``,
        checked at each poll): its step records and a frame for each, and whatever else was still
        on its way. An END that comes again (the reasoner's result changed after it: this recorder
        fell silent before it closed the bag) is the outcome the bag closes with, or takes once
        closed: the bag says what the episode's result said."""
        with self.lock:
            if self.bag is None or self.bag.episode_id != msg.episode_id:
                self.restate_closed(msg, source)
                return
            if self.bag.ended is not None:
                self.bag.ended = msg
                return
            delay = self.close_delay_s
            self.bag.end(msg, end_sent_ns, time.monotonic(), delay, delay + STRAGGLERS_S)
            self.poll_every(DRAIN_TICK_S)  # the next tick ends a whole one after END (``closing``)

    def restate_closed(self, msg: EpisodeEvent, source: bytes) -> None:
        """The closed bag of an ended episode takes the outcome of its END sent again by the publisher
        of its START (called with the lock held); other ENDs close nothing."""
        if self.last_closed is None:
            return
        bag, closing = self.last_closed
        if bag.episode_id != msg.episode_id or bag.ended is None or bag.source != source:
            return
        bag.ended = msg

        def amend() -> None:
            closing.join()
            complete, reason = bag.outcome(*end_outcome(msg))
            path = bag.writer.amend(
                success=msg.success, progress=msg.progress, steps=msg.steps, reason=reason, complete=complete
            )
            self.get_logger().warning(
                f"bag {path}: its episode's result came again after the bag closed; now "
                f"{'complete' if complete else 'incomplete'}: {reason}"
            )

        self.closing = [t for t in self.closing if t.is_alive()] + [threading.Thread(target=amend)]
        self.closing[-1].start()

    def take_received(self) -> None:
        """Into the open bag (or dropped, between episodes): every message received since the last take."""
        with self.taking:
            deliver_pending(self.subscribed.subscriptions.values())

    def poll_every(self, seconds: float) -> None:
        """From now on (a changed period alone would wait out the old one first)."""
        self.poll_timer.timer_period_ns = round(seconds * 1e9)
        self.poll_timer.reset()

    def poll(self) -> None:
        """Act on the episode events whose sender is now known; take what was received; then close
        the ended episode's bag if it has drained."""
        if self.sources.pending:
            self.take_decided()
        self.take_received()
        now = time.monotonic()
        since = self.drops.new_since(now)
        with self.lock:
            if self.bag is None:
                return
            if since is not None:
                self.bag.saw_drops(now, since)
            self.say_full(self.bag.check_room())
            if self.bag.ended is None and (gone := self.starter_gone()):
                self.close_current(complete=False, reason=gone)
                return
            if self.bag.may_close(time.monotonic(), names.REASONER_STEPS in self.topics):
                self.close_ended()

    def close_ended(self, cut_short: str = "") -> None:
        """Close the open bag, whose END has come, with that END's outcome (called with the lock held);
        ``cut_short`` says why it closes before its records came, which makes it incomplete. (The
        next episode's START closed a draining bag as one that never ended, and its outcome was lost:
        the reasoner waits for no bag after an error, so its next goal starts at once.)"""
        msg, info = self.bag.ended, self.bag.writer.info
        info.goal = msg.goal or info.goal
        complete, reason = end_outcome(msg)
        if cut_short:
            complete, reason = False, f"{reason}; {cut_short}"
        self.close_current(complete, reason, msg.success, msg.progress, msg.steps)

    def starter_gone(self) -> str:
        """Why the open episode will never see its END: the reasoner that started it has been silent
        for ``reasoner_timeout_s`` ("" while it beats)."""
        timeout = self.param["reasoner_timeout_s"]
        if not self.starter or not self.starter_watch.dead([self.starter], timeout):
            return ""
        silent = f"no heartbeat for {timeout:.1f} s"
        return f"{self.starter} stopped responding ({silent}) before the episode ended"

    def announce_when_ready(self, episode_id: str) -> None:
        """Say "recording:<id>" (the reasoner waits for it) once every configured topic is
        subscribed and has a publisher, so that the episode's first messages are not lost."""
        timer, waited_since, told = None, time.monotonic(), False

        def announced() -> bool:
            nonlocal told
            waiting = self.waiting_topics()
            if not waiting:
                with self.lock:
                    if self.bag is not None and self.bag.episode_id == episode_id:
                        self.heartbeat.state = names.recording_state(episode_id)
                return True
            if not told and time.monotonic() - waited_since > WAITING_WARN_S:
                told = True
                self.warn_waiting(f"episode {episode_id}", waiting)
            return False

        def poll() -> None:
            if announced():
                self.destroy_timer(timer)  # a cancelled timer would stay in every wait set

        if not announced():  # at once when every topic is ready, as between episodes it usually is
            timer = self.create_timer(0.02, poll, clock=Clock(clock_type=ClockType.STEADY_TIME))

    def waiting_topics(self) -> list[str]:
        """The configured topics not yet recordable: no subscription, or no publisher seen."""
        with self.taking:
            self.subscribed.refresh()
        return [t for t in self.topics if t not in self.subscribed or self.count_publishers(t) == 0]

    def warn_waiting(self, what: str, waiting: list[str]) -> None:
        self.get_logger().warning(
            f"{what}: after {WAITING_WARN_S:.0f} s, no publisher seen yet of " + ", ".join(waiting)
        )

    def say_if_ready(self) -> None:
        """Between episodes the heartbeat says whether every configured topic can be recorded:
        "idle", or RECORDER_WAITING (the reasoner sends no START until it is idle)."""
        waiting = self.waiting_topics()
        with self.lock:
            if self.bag is None and self.heartbeat.state in ("idle", names.RECORDER_WAITING):
                self.heartbeat.state = names.RECORDER_WAITING if waiting else "idle"
        if waiting and not self.told_waiting and time.monotonic() - self.up_since > WAITING_WARN_S:
            self.told_waiting = True
            self.warn_waiting("waiting to record", waiting)

    def close_current(self, complete: bool, reason: str, success=False, progress=0.0, steps=0) -> None:
        """Detach the episode's writer (called with the lock held) and finish its bag on a thread of
        its own: converting the stream takes up to a few hundred ms, and recording callbacks that
        waited for it would stop taking messages, which backs up the publishers of the whole graph."""
        bag, self.bag = self.bag, None
        if bag is None:
            return
        self.poll_every(IDLE_POLL_S)
        writer, (complete, reason) = bag.writer, bag.outcome(complete, reason)

        def finish() -> None:
            try:
                path = writer.close(
                    success=success, progress=progress, steps=steps, reason=reason, complete=complete
                )
            finally:  # "recording:<id>" ends once the bag is finished: the reasoner waits for it
                with self.lock:
                    if self.bag is None:
                        self.heartbeat.state = "idle"
            self.get_logger().info(
                f"bag {path} closed ({'complete' if complete else 'incomplete'}: {reason})"
            )

        self.closing = [t for t in self.closing if t.is_alive()] + [threading.Thread(target=finish)]
        self.last_closed = (bag, self.closing[-1])
        self.closing[-1].start()

    def shutdown(self) -> None:
        with self.lock:
            self.close_current(complete=False, reason="the recorder stopped before the episode ended")
        for thread in self.closing:
            thread.join()


def end_outcome(msg: EpisodeEvent) -> tuple[bool, str]:
    """(complete, reason) of a bag closed with END ``msg``: an episode that ended in an error is
    incomplete."""
    return not msg.reason.startswith("error"), msg.reason


def main(args=None) -> None:
    run_node(RecorderNode, args)


if __name__ == "__main__":
    main()

"""r3_reasoner_node: runs episodes as the RunTask action, one decision step at a time.

Each step mirrors ``r3.episode_loop.run_loop``: wait for the settled state and images
(``r3_ros/observation.py``), stop on success, decide with the core's ``Decider`` (history, refusal
note and guard live there), publish a ReasonerStep, send the instruction to the low-level policy
(``r3_ros/follow_client.py``, which also stops it the moment the RunTask is cancelled or stopped),
publish its outcome. Every wait is bounded and watches the low-level, simulator and perception nodes
(``r3_ros/episode_watch.py``), so a dead node ends the episode with an error naming it instead of
a hang. The backend is a parameter (``backend``): ``expert``, ``transformers:DIR`` or
``openai:URL,model=NAME``; it is loaded once, at start-up. The suite comes with each goal.
"""

from __future__ import annotations

import copy
import functools
import time
import traceback

from rcl_interfaces.msg import SetParametersResult

from r3.episode_loop import Decider, end_reason, ends_episode
from r3.graph import names
from r3.graph.node_params import NODE_PARAMETERS
from r3.reasoning import BackendError, ReasoningBudget, make_backend
from r3.safety.goals import GoalRefused, check_interface, check_run_task
from r3.safety.goals import episode_id as new_episode_id
from r3.seeds import policy_seed
from r3_msgs.action import RunTask
from r3_msgs.msg import EpisodeEvent
from r3_msgs.srv import ResetScene
from r3_ros.conversions import stamp_to_ns
from r3_ros.episode_topics import EpisodeTopics
from r3_ros.episode_watch import EpisodeError, EpisodeWatch
from r3_ros.executor import InlineCallbackGroup
from r3_ros.follow_client import FollowClient
from r3_ros.goals import SingleGoal
from r3_ros.heartbeat import HeartbeatPublisher
from r3_ros.node import R3Node
from r3_ros.observation import SceneObserver
from r3_ros.params import declare_parameters
from r3_ros.recording import RecorderHandshake, RecordingError
from r3_ros.services import ServiceTimeout, call_resending
from r3_ros.spin import run_node
from r3_ros.stop import end_stopped

#: The nodes an episode runs on: its states, instructions and bag come from them, and they are watched
#: while it runs, so each is set between episodes (a sim_node set mid-episode refused the simulator's
#: own states, and the episode ended "/elsewhere sent no state and image").
EPISODE_NODES = ("lowlevel_node", "sim_node", "perception_node", "recorder_node")


class ReasonerNode(R3Node):
    def __init__(self):
        super().__init__("r3_reasoner_node")
        self.param = declare_parameters(self, NODE_PARAMETERS["r3_reasoner_node"])  # read at each use
        self.add_on_set_parameters_callback(self.episode_nodes_refusal)
        self.backend = make_backend(self.param["backend"])
        self.backend.load()

        self.goals = SingleGoal(self, self.goal_refusal)
        sensors = InlineCallbackGroup()  # images, bag names: stored, never waited on
        self.scene = SceneObserver(self, self.param, callback_group=sensors)
        self.heartbeat = HeartbeatPublisher(self)
        self.watch = EpisodeWatch(self, self.param, self.heartbeat)
        self.topics = EpisodeTopics(self, self.backend.model_id)
        recorded = self.topics.recorded
        self.recording = RecorderHandshake(self, self.watch.monitor, self.param, recorded, sensors)
        # Answers to its calls and requests of its own action are short (a future set, a goal accepted,
        # a stop sent): handled in the spinning thread, one at a time in the order they came, as
        # ``r3_ros.instruction_server`` handles FollowInstruction's (on pool threads two goals'
        # acceptances could run in the other order there, and each answer waited for a worker).
        clients = InlineCallbackGroup()
        self.reset_client = self.create_client(ResetScene, names.RESET_SCENE, callback_group=clients)
        self.follower = FollowClient(self, self.param, self.watch, callback_group=clients)
        self.server = self.goals.serve(
            RunTask, names.RUN_TASK, self.execute, clients, cancel=self.follower.on_cancel
        )
        self.get_logger().info(f"reasoner ready with backend {self.backend.model_id}")

    def shutdown(self) -> None:
        self.backend.close()

    def episode_nodes_refusal(self, parameters) -> SetParametersResult:
        """Refuses a change of ``EPISODE_NODES`` while an episode runs."""
        for p in parameters:
            if p.name in EPISODE_NODES and p.value != self.param[p.name] and self.goals.running:
                now = self.param[p.name] or f"no {p.name.removesuffix('_node')}"  # '' = none
                why = f"{p.name}: an episode is running on {now}; set it between episodes"
                return SetParametersResult(successful=False, reason=why)
        return SetParametersResult(successful=True)

    def goal_refusal(self, goal) -> str:
        """Why ``goal`` is refused before anything is written, reset or moved ("" = it is not)."""
        try:
            suite, _ = check_run_task(goal)
            check_interface(self.param["interface"], suite)  # fixed for the episode
        except GoalRefused as exc:
            return f"error: invalid goal: {exc}"
        simulated = self.scene.latest_state()  # its simulator says which suite it runs in every state
        if simulated is not None and simulated.suite and simulated.suite != suite:
            return f"error: invalid goal: suite {suite!r}: this graph's simulator runs {simulated.suite}"
        return ""

    def execute(self, handle) -> RunTask.Result:
        """Episodes run one at a time: a goal that preempts a running episode starts once that one
        has ended (two at once sent each other's START and END, and the recorder lost both)."""
        if reason := self.goal_refusal(handle.request):
            return self.finish(handle, RunTask.Result(), reason)
        with self.goals.turn(handle) as has_turn:
            if not has_turn:
                return self.finish(handle, RunTask.Result(), "canceled")
            return self.run_episode(handle)

    def run_episode(self, handle) -> RunTask.Result:
        suite, task = check_run_task(handle.request)
        goal = copy.copy(handle.request)  # as checked: the bag, the reset and the steps name the task
        goal.suite, goal.task = suite, task  # the way the registry does (" 4", "task4": "4")
        interface = check_interface(self.param["interface"], suite)
        try:  # a continued scene must be the goal's task: checked before anything is written or moved
            self.scene.scene_id = None if goal.reset_scene else self.scene.current_scene(suite, task)
        except GoalRefused as exc:
            return self.finish(handle, RunTask.Result(), f"error: invalid goal: {exc}")
        episode_id = new_episode_id(task, goal.seed)
        self.scene.scene_id = self.scene.scene_id or episode_id
        result = RunTask.Result(episode_id=episode_id)
        continued = "" if goal.reset_scene else self.scene.latest_state().goal
        started, goal_text, agent_ended = False, goal.goal or continued, False
        self.follower.begin(handle)
        self.watch.start()
        try:
            self.watch.wait_until_graph_up(self.recording)
            # START goes out before the reset, so that the recording holds the first scene.
            self.topics.publish_event(EpisodeEvent.START, episode_id, goal, goal_text)
            started = True
            self.watch.recorder = self.recording.recorder  # from now on, losing it loses the episode's data
            result.bag = self.recording.wait_recording(episode_id, self.watch.check_alive)
            if goal.reset_scene:  # the scene's goal, unless the client gave its own (which START named)
                scene_goal = self.reset(goal, episode_id, handle)
                goal_text = None if scene_goal is None else goal.goal or scene_goal
            if goal_text is None:
                result.reason = "canceled"
            else:
                agent_ended = self.run_steps(goal, interface, episode_id, handle, result)
        except (EpisodeError, RecordingError) as exc:
            result.reason = f"error: {exc}"
        except BackendError as exc:
            result.reason = f"error: reasoner backend: {exc}"
        except Exception as exc:  # noqa: BLE001 - whatever failed, the episode still ends: END, stop
            self.get_logger().error(f"episode {episode_id}: {traceback.format_exc()}")
            result.reason = f"error: {type(exc).__name__}: {exc}"
        stopped = self.follower.end(handle)
        if not result.reason:  # cancelled, stopped or preempted, wherever in the episode it came
            canceled = stopped or self.follower.stopping(handle)
            result.reason = end_reason(result.success, agent_ended, canceled)
        if started:
            self.topics.publish_event(EpisodeEvent.END, episode_id, goal, goal_text or "", result)
            # A finished episode's result names a closed bag; an error's comes at once (a dead member
            # is reported within 2 s), and the recorder closes that bag, incomplete, right after. One
            # that ended before the recorder named its bag waits for the name: the bag is opened all
            # the same, and the result is the client's only way to it.
            if not result.bag:
                result.bag = self.recording.wait_named(episode_id, self.watch.exits.read)
            elif not result.reason.startswith("error"):
                try:
                    self.recording.wait_closed(episode_id, self.watch.exits.read)
                except RecordingError as exc:  # the recorder fell silent after END, frozen or dead
                    result.reason = f"error: {exc}"
                    # END said otherwise: it goes again with the result, which the bag then says
                    # (a frozen recorder closes it once it wakes; r3_recorder_node)
                    self.topics.publish_event(EpisodeEvent.END, episode_id, goal, goal_text or "", result)
        return self.finish(handle, result, result.reason)

    def reset(self, goal, episode_id: str, handle) -> str | None:
        timeout = self.param["service_timeout_s"]
        if not self.reset_client.wait_for_service(timeout_sec=self.param["startup_timeout_s"]):
            raise EpisodeError(f"{self.param['sim_node']} does not offer {names.RESET_SCENE}")
        request = ResetScene.Request(suite=goal.suite, task=goal.task, seed=goal.seed, episode_id=episode_id)
        try:
            waiting = functools.partial(self.follower.waiting, handle)
            response = call_resending(self.reset_client, request, timeout, waiting)
        except ServiceTimeout as exc:
            raise EpisodeError(str(exc)) from None
        if response is None:
            return None
        if not response.ok:
            raise EpisodeError(f"{self.param['sim_node']} refused the reset: {response.reason}")
        return response.goal

    def run_steps(self, goal, interface: str, episode_id: str, handle, result: RunTask.Result) -> bool:
        """The episode's decision steps; whether the agent ended it itself (``done()``)."""
        max_steps = goal.max_steps or self.param["default_max_steps"]
        budget = ReasoningBudget(None if goal.reasoning_budget < 0 else goal.reasoning_budget)
        decider = Decider(self.backend, budget, self.param["history"], self.param["max_consecutive_invalid"])
        not_before, agent_ended = 0, False
        for step in range(max_steps):
            obs = self.scene.observe(not_before, self.watch.check_alive)
            result.success, result.progress = obs.state.success, obs.state.progress
            if obs.state.success or self.follower.stopping(handle):
                return False
            t0 = time.perf_counter()
            view = self.scene.step_view(obs, goal.goal, goal.seed, interface)
            t1 = time.perf_counter()
            self.heartbeat.state = "busy"
            record = decider.decide(step, view)
            self.heartbeat.state = "idle"
            model_s = record.decision.output.model_s
            parse_s = time.perf_counter() - t1 - model_s
            latencies = (t1 - t0, model_s, parse_s)
            record_step = self.topics.step_record(episode_id, goal.task, record, latencies, obs.images)
            result.steps = step + 1
            result.instructions.append(record.instruction)
            try:
                if record.abort:
                    raise EpisodeError(record.abort)
                if record.valid:
                    seed = policy_seed(goal.seed, step)
                    suite, steps_left = goal.suite, max_steps - step - 1
                    follow = self.follower.follow(
                        record.instruction, suite, interface, seed, steps_left, handle, while_sent=record_step
                    )
                    if follow is None:
                        return False
                    not_before = stamp_to_ns(follow.finished)
                    if follow.outcome:
                        decider.report(follow.outcome)
                    # The state the instruction left: its result can come before that state does
                    # (they travel apart), and the latest state then is one control step short of it.
                    progress = self.scene.observe(not_before, self.watch.check_alive).state.progress
                    self.topics.publish_outcome(episode_id, step, record.instruction, follow, progress)
            finally:
                record_step()  # a step that moved nothing, or whose instruction never went out
            reasoning = record.decision.parsed.reasoning or ""
            feedback = RunTask.Feedback(step=step, reasoning=reasoning, instruction=record.instruction)
            feedback.progress = self.scene.progress()
            handle.publish_feedback(feedback)
            if ends_episode(record, fell_short=record.valid and not follow.success):
                agent_ended = True
                break
        obs = self.scene.observe(not_before, self.watch.check_alive)
        result.success, result.progress = obs.state.success, obs.state.progress
        return agent_ended

    def finish(self, handle, result: RunTask.Result, reason: str) -> RunTask.Result:
        result.reason = reason
        if reason == "canceled":  # a stop without an action cancel (yet): wait for it, bounded
            end_stopped(handle, reason, self.goals.end)
        else:
            self.goals.end(handle, "aborted" if reason.startswith("error") else "succeeded")
        self.get_logger().info(f"episode {result.episode_id}: {reason}, {result.steps} steps")
        return result


def main(args=None) -> None:
    run_node(ReasonerNode, args)


if __name__ == "__main__":
    main()

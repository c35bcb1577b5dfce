"""r3_reasoner_node: runs episodes as the RunTask action, one decision step at a time.

Each step mirrors ``r3.episode_loop.run_loop``: wait for the settled state and image, stop on
success, decide with the core's ``Decider`` (history, refusal note and guard live there), publish a
ReasonerStep, send the instruction to the low-level policy (FollowInstruction), publish its
outcome. Every wait has a timeout, and the low-level and simulator nodes are watched through their
heartbeats, so a dead node ends the episode with an error naming it instead of a hang. The
backend is a parameter (``backend``): ``expert``, ``transformers:DIR`` or
``openai:URL,model=NAME``; it is loaded once, at start-up. The suite comes with each goal:
Language Table decides on the base camera, packing (with ``wrist_camera`` set) on the base and
wrist cameras; the expert reads the privileged state of either.

Stopping: the moment a RunTask is cancelled (its cancel callback) or a stop naming it arrives on
``/r3/stop_motion``, the FollowInstruction running for it is stopped with a stop of its own on that
topic, then cancelled through its action as well (``r3_ros/stop.py``); no later instruction is sent.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from rclpy.action import ActionClient, ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image

from r3.episode_loop import Decider, StepDecision, StepView, ends_episode
from r3.graph import names
from r3.graph.node_params import NODE_PARAMETERS
from r3.graph.supervisor import MemberExits
from r3.perception.camera import pose_matrix
from r3.reasoning import BackendError, ReasoningBudget, make_backend
from r3.reasoning.expert import ExpertView
from r3.reasoning.packing_expert import PackingExpertView
from r3.safety.goals import GoalRefused, check_interface, check_run_task
from r3.safety.goals import episode_id as new_episode_id
from r3.seeds import policy_seed
from r3.suites import DEFAULT_SUITE, get_suite
from r3_msgs.action import FollowInstruction, RunTask
from r3_msgs.msg import EpisodeEvent, InstructionOutcome, PrivilegedState, ReasonerStep
from r3_msgs.srv import ResetScene
from r3_ros.adaptive_subscriptions import AdaptiveSubscriptions
from r3_ros.conversions import (
    msg_to_board_state,
    msg_to_camera_model,
    msg_to_image,
    msg_to_packing_state,
    stamp_to_ns,
    task_instance_from_msg,
)
from r3_ros.goals import SingleGoal
from r3_ros.heartbeat import HeartbeatMonitor, HeartbeatPublisher
from r3_ros.params import declare_parameters
from r3_ros.qos import EVENTS, LATCHED, recorded
from r3_ros.recording import RecorderHandshake, RecordingError
from r3_ros.refusals import refusing_action, refusing_message
from r3_ros.services import ServiceTimeout, call_resending
from r3_ros.spin import run_node
from r3_ros.stop import StopListener, StopPublisher, end_stopped, goal_key, new_goal_id


class EpisodeError(RuntimeError):
    """Ends an episode with ``error: <message>``; the message names the node or part at fault."""


@dataclass
class Run:
    """A RunTask goal being executed: stopped or not, and the goal key of the FollowInstruction it runs."""

    stopped: bool = False
    follow: str | None = None


@dataclass
class Observation:
    state: PrivilegedState
    images: list[Image]  # base camera, then the wrist camera where there is one


class ReasonerNode(Node):
    def __init__(self):
        super().__init__("r3_reasoner_node")
        self.param = declare_parameters(self, NODE_PARAMETERS["r3_reasoner_node"])  # read at each use
        self.backend = make_backend(self.param["backend"])
        self.backend.load()

        self.obs_cv = threading.Condition()
        self.state: PrivilegedState | None = None
        self.image: Image | None = None
        self.wrist_image: Image | None = None
        self.goals = SingleGoal(self)
        self.episode_deadline = float("inf")
        self.watch_recorder: list[str] = []
        self.runs_lock = threading.Lock()
        self.runs: dict[str, Run] = {}  # by RunTask goal key
        self.scene_id = ""  # the simulator's episode id of the scene the running episode acts on
        self.exits = MemberExits.from_environment()  # members a supervisor saw exit
        sensors = MutuallyExclusiveCallbackGroup()
        self.create_subscription(
            PrivilegedState,
            names.PRIVILEGED_STATE,
            refusing_message(self, self.on_state),
            LATCHED,
            callback_group=sensors,
        )
        # The cameras as their publishers offer them: a simulator's frame, sent once per decision right
        # after a reset, reaches this node even when DDS matched the two sides late.
        self.cameras = AdaptiveSubscriptions(self, 5, callback_group=sensors)
        self.camera_info: CameraInfo | None = None  # the base camera's, for the expert's image points
        self.cameras.add(names.CAMERA_IMAGE, lambda _: Image, lambda _: self.on_image)
        self.cameras.add(names.CAMERA_INFO, lambda _: CameraInfo, lambda _: self.on_camera_info)
        if self.param["wrist_camera"]:
            self.cameras.add(names.WRIST_IMAGE, lambda _: Image, lambda _: self.on_wrist_image)
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(0.2, self.cameras.refresh, callback_group=sensors, clock=steady)
        self.monitor = HeartbeatMonitor(self, callback_group=MutuallyExclusiveCallbackGroup())
        self.heartbeat = HeartbeatPublisher(self)
        self.steps_pub = self.create_publisher(ReasonerStep, names.REASONER_STEPS, recorded(50))
        self.frames_pub = self.create_publisher(Image, names.REASONER_FRAMES, recorded(50))
        self.outcome_pub = self.create_publisher(InstructionOutcome, names.INSTRUCTION_OUTCOMES, recorded(50))
        self.event_pub = self.create_publisher(EpisodeEvent, names.EPISODE_EVENTS, EVENTS)
        self.recording = RecorderHandshake(
            self, self.monitor, self.param, [self.steps_pub, self.frames_pub, self.outcome_pub], sensors
        )
        self.stop_pub = StopPublisher(self)
        self.stops = StopListener(self, on_stop=self.stop_run)
        clients = ReentrantCallbackGroup()
        self.reset_client = self.create_client(ResetScene, names.RESET_SCENE, callback_group=clients)
        self.follow_client = ActionClient(
            self, FollowInstruction, names.FOLLOW_INSTRUCTION, callback_group=clients
        )
        self.server = ActionServer(
            self,
            RunTask,
            names.RUN_TASK,
            execute_callback=refusing_action(self, self.execute, RunTask.Result, self.goals.end),
            goal_callback=lambda _: GoalResponse.ACCEPT,
            handle_accepted_callback=self.goals.accept,
            cancel_callback=self.on_cancel,
            callback_group=ReentrantCallbackGroup(),
        )
        self.get_logger().info(f"reasoner ready with backend {self.backend.model_id}")

    def shutdown(self) -> None:
        self.backend.close()

    # -- inputs ----------------------------------------------------------------------------------
    def on_state(self, msg: PrivilegedState) -> None:
        with self.obs_cv:
            self.state = msg
            self.obs_cv.notify_all()

    def on_camera_info(self, msg: CameraInfo) -> None:
        self.camera_info = msg

    def on_image(self, msg: Image) -> None:
        with self.obs_cv:
            self.image = msg
            self.obs_cv.notify_all()

    def on_wrist_image(self, msg: Image) -> None:
        with self.obs_cv:
            self.wrist_image = msg
            self.obs_cv.notify_all()

    # -- stopping --------------------------------------------------------------------------------
    def on_cancel(self, handle) -> CancelResponse:
        """Runs as the cancel request arrives, before the execute loop polls: stop the motion now."""
        self.stop_run(goal_key(handle.goal_id))
        return CancelResponse.ACCEPT

    def stop_run(self, key: str) -> None:
        """Stop RunTask ``key``: no instruction after this, and a stop for the one running now."""
        with self.runs_lock:
            run = self.runs.get(key)
            if run is None or run.stopped:
                return
            run.stopped, follow = True, run.follow
        if follow is not None:
            self.stop_pub.stop(follow)

    def stopping(self, handle) -> bool:
        """The RunTask ``handle`` was cancelled, stopped or preempted."""
        if handle.is_cancel_requested or not handle.is_active:
            return True
        with self.runs_lock:
            run = self.runs.get(goal_key(handle.goal_id))
        return run is not None and run.stopped

    # -- waiting, always bounded -------------------------------------------------------------------
    def check_alive(self) -> None:
        """Raise when a watched node has gone silent or the episode has run out of time."""
        timeout = self.param["heartbeat_timeout_s"]
        watched = [self.param["lowlevel_node"], self.param["sim_node"]] + self.watch_recorder
        for member_exit in self.exits.read():  # the process manager's word: faster than any heartbeat
            raise EpisodeError(member_exit)
        for node in self.monitor.dead(watched, timeout):
            raise EpisodeError(f"{node} stopped responding (no heartbeat for {timeout:.1f} s)")
        if time.monotonic() > self.episode_deadline:
            raise EpisodeError(f"the episode ran past its time budget of {self.param['max_episode_s']:.0f} s")

    def observe(self, not_before_ns: int) -> Observation:
        """The settled state of the episode's scene at or after ``not_before_ns`` and the images of it."""
        deadline = time.monotonic() + self.param["observation_timeout_s"]
        with self.obs_cv:
            while True:
                s = self.state
                images = [self.image, self.wrist_image] if self.param["wrist_camera"] else [self.image]
                if (
                    s is not None
                    and s.episode_id == self.scene_id
                    and stamp_to_ns(s.header.stamp) >= not_before_ns
                    and all(
                        im is not None and stamp_to_ns(im.header.stamp) >= stamp_to_ns(s.header.stamp)
                        for im in images
                    )
                ):
                    return Observation(s, images)
                if time.monotonic() > deadline:
                    raise EpisodeError(
                        f"{self.param['sim_node']} sent no state and image for this episode within "
                        f"{self.param['observation_timeout_s']:.1f} s"
                    )
                self.obs_cv.wait(0.05)
                self.check_alive()

    def waiting(self, handle) -> bool:
        """False once the goal is stopping; raises when a watched node is gone."""
        if self.stopping(handle):
            return False
        self.check_alive()
        return True

    def wait_future(
        self, future, what: str, handle, timeout_s: float | None = None, since: float | None = None
    ):
        """``future``'s result, within ``timeout_s`` of ``since`` (default now); None once stopping."""
        deadline = None if timeout_s is None else (time.monotonic() if since is None else since) + timeout_s
        while not future.done():
            if not self.waiting(handle):
                return None
            if deadline is not None and time.monotonic() > deadline:
                raise EpisodeError(f"{what} did not answer within {timeout_s:.1f} s")
            time.sleep(0.01)
        return future.result()

    # -- the episode -------------------------------------------------------------------------------
    def execute(self, handle) -> RunTask.Result:
        goal = handle.request
        try:  # every field is checked before anything is written, reset or moved
            suite, task = check_run_task(goal.suite, goal.task, goal.seed, goal.reasoning_budget)
            interface = check_interface(self.param["interface"], suite)  # fixed for the episode
            self.scene_id = None if goal.reset_scene else self.current_scene(suite, task)
        except GoalRefused as exc:
            return self.finish(handle, RunTask.Result(), f"error: invalid goal: {exc}")
        episode_id = new_episode_id(task, goal.seed)
        self.scene_id = self.scene_id or episode_id
        result = RunTask.Result(episode_id=episode_id)
        started, goal_text = False, goal.goal or (self.state.goal if not goal.reset_scene else "")
        key = goal_key(handle.goal_id)
        with self.runs_lock:
            self.runs[key] = Run(stopped=self.stops.requested(key))
        self.episode_deadline = time.monotonic() + self.param["max_episode_s"]
        self.watch_recorder = []
        try:
            self.wait_until_graph_up()
            # START goes out before the reset, so that the recording holds the first scene.
            self.publish_event(EpisodeEvent.START, episode_id, goal, goal_text)
            started = True
            if self.recording.recorder:  # from now on, losing the recorder loses the episode's data
                self.watch_recorder = [self.recording.recorder]
            result.bag = self.recording.wait_recording(episode_id, self.check_alive)
            if goal.reset_scene:
                goal_text = self.reset(goal, episode_id, handle)
            if goal_text is None:
                result.reason = "canceled"
            else:
                self.run_steps(goal, interface, episode_id, handle, result)
        except (EpisodeError, RecordingError) as exc:
            result.reason = f"error: {exc}"
        except BackendError as exc:
            result.reason = f"error: reasoner backend: {exc}"
        with self.runs_lock:
            stopped = self.runs.pop(key).stopped
        if not result.reason:
            result.reason = (
                "success"
                if result.success
                else ("canceled" if handle.is_cancel_requested or stopped else "step_budget")
            )
        if started:
            self.publish_event(EpisodeEvent.END, episode_id, goal, goal_text or "", result)
            # A finished episode's result names a closed bag; an error's comes at once (a dead member
            # is reported within 2 s), and the recorder closes that bag, incomplete, right after.
            if result.bag and not result.reason.startswith("error"):
                try:
                    self.recording.wait_closed(episode_id, self.exits.read)
                except RecordingError as exc:
                    result.reason = f"error: {exc}"
        return self.finish(handle, result, result.reason)

    def wait_until_graph_up(self) -> None:
        """The low-level node must be up and have seen the simulator before it gets an instruction,
        and the graph's recorder (if it has one) must be up before START, which opens the bag.

        Bounded by ``startup_timeout_s``: on a cold machine the first start of the graph's processes
        (imports, MuJoCo model compilation) can take longer than any single call should.
        """
        node, timeout = self.param["lowlevel_node"], self.param["startup_timeout_s"]
        deadline = time.monotonic() + timeout
        while self.monitor.state(node) in (None, "waiting_for_state") or (why := self.recording.not_up()):
            if time.monotonic() > deadline:
                if self.monitor.state(node) is None:
                    raise EpisodeError(f"{node} is not running after {timeout:.1f} s")
                if self.monitor.state(node) == "waiting_for_state":
                    raise EpisodeError(f"{node} has no simulator state after {timeout:.1f} s")
                raise EpisodeError(
                    f"after {timeout:.1f} s, {why} "
                    "(recorder_node names it; set it to '' for a graph without a recorder)"
                )
            for member_exit in self.exits.read():
                raise EpisodeError(member_exit)
            time.sleep(0.02)

    def current_scene(self, suite: str, task: str) -> str:
        """reset_scene=false: the simulator's episode id of the scene to continue on, which must be
        a ``task`` scene of ``suite``; GoalRefused otherwise."""
        s = self.state
        if s is None or not s.episode_id:
            raise GoalRefused("reset_scene is false but no scene has been reset yet")
        if (s.suite, s.task) != (suite, task):
            raise GoalRefused(
                f"reset_scene is false but the current scene is {s.suite} task {s.task!r}, "
                f"not {suite} task {task!r}"
            )
        return s.episode_id

    def reset(self, goal, episode_id: str, handle) -> str | None:
        timeout = self.param["service_timeout_s"]
        if not self.reset_client.wait_for_service(timeout_sec=self.param["startup_timeout_s"]):
            raise EpisodeError(f"{self.param['sim_node']} does not offer {names.RESET_SCENE}")
        request = ResetScene.Request(
            suite=goal.suite or DEFAULT_SUITE, task=goal.task, seed=goal.seed, episode_id=episode_id
        )
        try:
            response = call_resending(self.reset_client, request, timeout, lambda: self.waiting(handle))
        except ServiceTimeout as exc:
            raise EpisodeError(str(exc)) from None
        if response is None:
            return None
        if not response.ok:
            raise EpisodeError(f"{self.param['sim_node']} refused the reset: {response.reason}")
        return response.goal

    def run_steps(self, goal, interface: str, episode_id: str, handle, result: RunTask.Result) -> None:
        max_steps = goal.max_steps or self.param["default_max_steps"]
        budget = ReasoningBudget(None if goal.reasoning_budget < 0 else goal.reasoning_budget)
        decider = Decider(self.backend, budget, self.param["history"], self.param["max_consecutive_invalid"])
        not_before = 0
        for step in range(max_steps):
            obs = self.observe(not_before)
            result.success, result.progress = obs.state.success, obs.state.progress
            if obs.state.success or self.stopping(handle):
                return
            t0 = time.perf_counter()
            view = self.step_view(goal, interface, obs)
            t1 = time.perf_counter()
            self.heartbeat.state = "busy"
            record = decider.decide(step, view)
            self.heartbeat.state = "idle"
            model_s = record.decision.output.model_s
            parse_s = time.perf_counter() - t1 - model_s
            self.publish_step(episode_id, goal, record, (t1 - t0, model_s, parse_s), obs.images)
            result.steps = step + 1
            result.instructions.append(record.instruction)
            if record.abort:
                raise EpisodeError(record.abort)
            if record.valid:
                seed = policy_seed(goal.seed, step)
                suite, steps_left = goal.suite or DEFAULT_SUITE, max_steps - step - 1
                follow = self.follow(record.instruction, suite, interface, seed, steps_left, handle)
                if follow is None:
                    return
                not_before = stamp_to_ns(follow.finished)
                if follow.outcome:
                    decider.report(follow.outcome)
                self.publish_outcome(episode_id, step, record.instruction, follow)
            handle.publish_feedback(
                RunTask.Feedback(
                    step=step,
                    reasoning=record.decision.parsed.reasoning or "",
                    instruction=record.instruction,
                    progress=self.state.progress if self.state else 0.0,
                )
            )
            if ends_episode(record, fell_short=record.valid and not follow.success):
                break
        obs = self.observe(not_before)
        result.success, result.progress = obs.state.success, obs.state.progress

    def step_view(self, goal, interface: str, obs: Observation) -> StepView:
        """The suite's view for the reasoner: its camera views and, for the expert, its privileged view."""
        instance, suite = task_instance_from_msg(obs.state), get_suite(obs.state.suite)
        if suite.make_sim is not None:  # a suite's own simulator shows the reasoner its camera only
            view = None
        elif suite.workcell:
            info, pose = self.camera_info, pose_matrix(self.param["base_from_camera"])
            camera = None if info is None else msg_to_camera_model(info, pose, "base")
            view = PackingExpertView(msg_to_packing_state(obs.state), instance, camera)
        else:
            view = ExpertView(msg_to_board_state(obs.state), instance)
        return StepView(
            obs.state.suite,
            goal.goal or instance.goal,
            [msg_to_image(im) for im in obs.images],
            instance.note,
            view,
            goal.seed,
            interface,
        )

    def follow(self, instruction: str, suite: str, interface: str, seed: int, steps_left: int, handle):
        """Send one instruction to the low-level policy; its result, or None when the episode was canceled."""
        if self.stopping(handle):
            return None  # canceled while deciding: no new motion
        if not self.follow_client.wait_for_server(timeout_sec=self.param["service_timeout_s"]):
            raise EpisodeError(f"{self.param['lowlevel_node']} does not offer {names.FOLLOW_INSTRUCTION}")
        goal = FollowInstruction.Goal(
            instruction=instruction,
            suite=suite,
            max_steps=self.param["steps_per_instruction"],
            seed=seed,
            interface=interface,
            steps_left=steps_left,
        )
        # The goal id is chosen here and recorded before the goal goes out, so that from now on a
        # stop of the RunTask stops this instruction (stop_run), even before it is accepted.
        run_key = goal_key(handle.goal_id)
        follow_id = new_goal_id(parent=run_key)  # of the RunTask's family: a stop of it stops this too
        follow_key = goal_key(follow_id)
        with self.runs_lock:
            run = self.runs[run_key]
            if run.stopped:
                return None
            run.follow = follow_key
        sending = self.follow_client.send_goal_async(goal, goal_uuid=follow_id)
        # The instruction's budget runs from here, end to end: the goal's acceptance counts too (a
        # low-level node that stalls before accepting must not get the longer service timeout).
        sent_at, budget = time.monotonic(), self.param["instruction_timeout_s"]
        accept_s = min(self.param["service_timeout_s"], budget)
        try:
            sent = self.wait_future(sending, names.FOLLOW_INSTRUCTION, handle, accept_s, since=sent_at)
        except EpisodeError:  # not accepted in time: a goal accepted later must not move anything
            self.stop_unanswered(follow_key, sending)
            raise
        if sent is None:  # canceled before the low-level node answered: cancel the goal once it does
            self.stop_unanswered(follow_key, sending)
            return None
        if not sent.accepted:
            raise EpisodeError(f"{self.param['lowlevel_node']} rejected the instruction {instruction!r}")
        try:
            done = self.wait_future(
                sent.get_result_async(), names.FOLLOW_INSTRUCTION, handle, budget, since=sent_at
            )
        except EpisodeError:
            self.stop_pub.stop(follow_key)
            sent.cancel_goal_async()
            raise
        if done is None:  # RunTask canceled, stopped or preempted: stop the motion too (stop, then cancel)
            self.stop_pub.stop(follow_key)
            sent.cancel_goal_async()
            return None
        if done.result.reason.startswith("error"):
            raise EpisodeError(f"{self.param['lowlevel_node']}: {done.result.reason[len('error: ') :]}")
        return done.result

    def stop_unanswered(self, follow_key: str, sending) -> None:
        """Stop a FollowInstruction goal that has not been accepted yet, and cancel it once it is."""
        self.stop_pub.stop(follow_key)
        sending.add_done_callback(lambda f: f.result().cancel_goal_async() if f.result().accepted else None)

    def finish(self, handle, result: RunTask.Result, reason: str) -> RunTask.Result:
        result.reason = reason
        if reason == "canceled":  # a stop without an action cancel (yet): wait for it, bounded
            end_stopped(handle, reason, self.goals.end)
        else:
            self.goals.end(handle, "aborted" if reason.startswith("error") else "succeeded")
        self.get_logger().info(f"episode {result.episode_id}: {reason}, {result.steps} steps")
        return result

    # -- publishing ------------------------------------------------------------------------------
    def publish_step(self, episode_id, goal, record: StepDecision, latencies, images) -> None:
        """The step, after the frames it was decided on (reliable: every recorded step finds its frames)."""
        for image in images:
            self.frames_pub.publish(image)
        out, parsed, inp = record.decision.output, record.decision.parsed, record.input
        msg = ReasonerStep(
            episode_id=episode_id,
            step=record.step,
            suite=inp.suite,
            task=goal.task,
            goal=inp.goal,
            history=record.history,
            reasoning=parsed.reasoning or "",
            instruction=record.instruction,
            raw_response=out.raw_text,
            valid=record.valid,
            error=record.error,
            model_id=out.model_id,
            image_stamps=[im.header.stamp for im in images],
        )
        msg.latency_prompt_s, msg.latency_model_s, msg.latency_parse_s = (max(0.0, v) for v in latencies)
        msg.prompt_tokens, msg.completion_tokens = out.prompt_tokens or 0, out.completion_tokens or 0
        msg.header.stamp = self.get_clock().now().to_msg()
        self.steps_pub.publish(msg)

    def publish_outcome(self, episode_id, step, instruction, follow) -> None:
        msg = InstructionOutcome(
            episode_id=episode_id,
            step=step,
            instruction=instruction,
            success=follow.success,
            reason=follow.reason,
            control_steps=follow.steps,
            progress=self.state.progress if self.state else 0.0,
            outcome=follow.outcome,
        )
        msg.header.stamp = follow.finished
        self.outcome_pub.publish(msg)

    def publish_event(self, event, episode_id, goal, goal_text, result=None) -> None:
        msg = EpisodeEvent(
            episode_id=episode_id,
            event=event,
            suite=goal.suite or DEFAULT_SUITE,
            task=goal.task,
            seed=goal.seed,
            goal=goal_text,
            backend=self.backend.model_id,
        )
        if result is not None:
            msg.success, msg.progress, msg.steps, msg.reason = (
                result.success,
                result.progress,
                result.steps,
                result.reason,
            )
        msg.header.stamp = self.get_clock().now().to_msg()
        self.event_pub.publish(msg)


def main(args=None) -> None:
    run_node(ReasonerNode, args)


if __name__ == "__main__":
    main()

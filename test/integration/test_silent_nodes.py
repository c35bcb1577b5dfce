"""SAFETY.md rows 4, 6 and 7 without a supervisor: a node that dies or falls silent is found by its
heartbeat, the Language Table low-level node stops when the reasoner falls silent, and every
instruction and episode has a wall-clock budget. Each test prints the figure it measures."""

from __future__ import annotations

import itertools
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest
import yaml

from r3.graph import names
from r3.graph.description import load_profile
from r3.graph.supervisor import resolve_executable, ros_arguments

pytestmark = [pytest.mark.ros, pytest.mark.slow]
R3 = [sys.executable, "-m", "r3.cli"]


#: The reasoner's heartbeat timeout in these graphs: shorter than the default (5 s) so that the
#: silence is found well before the episode could end by itself.
HEARTBEAT_TIMEOUT_S = 2.0
PACKING_EPISODE = ("--suite", "packing", "--task", "4", "--seed", "3")


def _start_unsupervised(
    env: dict[str, str],
    out: Path,
    profile: str = "sim_language_table",
    recorder: dict | None = None,
    **reasoner,
) -> dict[str, subprocess.Popen]:
    """The members of ``profile`` as separate processes, as launch_ros starts them: no supervisor
    watches them, so only the heartbeats can tell the reasoner that one is gone.
    ``reasoner``: parameters of the reasoner node, over ``heartbeat_timeout_s=HEARTBEAT_TIMEOUT_S``;
    ``recorder``: the recorder's, over ``output_dir``."""
    profile = load_profile(
        profile,
        overrides={
            "r3_recorder_node": {"output_dir": str(out / "bags"), **(recorder or {})},
            "r3_reasoner_node": {"heartbeat_timeout_s": HEARTBEAT_TIMEOUT_S, **reasoner},
        },
    )
    (out / "logs").mkdir(parents=True)
    procs = {}
    for member in profile.started:
        params = out / "logs" / f"{member.name}.yaml"
        params.write_text(yaml.safe_dump({member.name: {"ros__parameters": member.parameters}}))
        with open(out / "logs" / f"{member.name}.log", "w") as log:
            procs[member.name] = subprocess.Popen(
                resolve_executable(member) + member.arguments + ros_arguments(member, params),
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
    return procs


def _lines_of(proc: subprocess.Popen) -> tuple[list[tuple[float, str]], threading.Thread]:
    lines: list[tuple[float, str]] = []
    reader = threading.Thread(target=lambda: [lines.append((time.monotonic(), line)) for line in proc.stdout])
    reader.start()
    return lines, reader


class Fault(NamedTuple):
    returncode: int  # the run's
    lines: list[tuple[float, str]]  # the run's output, each line with the time it came
    signalled_at: float
    victim_exit: tuple[int, float] | None  # its exit status and seconds after the signal, if it exited


def _episode_with_a_fault(
    env: dict[str, str],
    out: Path,
    victim: str,
    sig: signal.Signals,
    profile: str = "sim_language_table",
    episode: tuple[str, ...] = ("--task", "T", "--seed", "5"),
    recorder: dict | None = None,
    until: Callable[[], bool] = lambda: True,
    **reasoner,
) -> Fault:
    """``r3 run --use-running-graph`` of ``episode`` on an unsupervised graph of ``profile``; once
    step 0 is printed (the first instruction is on its way), ``sig`` goes to ``victim``. The graph
    stops once the run has ended and ``until()`` holds (at most 60 s after the signal); a victim
    frozen by SIGSTOP is woken once the run has ended."""
    procs = _start_unsupervised(env, out, profile, recorder, **reasoner)
    run = subprocess.Popen(
        R3 + ["run", "--use-running-graph", *episode, "--out", str(out), "--video", "none"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    lines, reader = _lines_of(run)
    try:
        deadline = time.monotonic() + 120
        while (
            time.monotonic() < deadline
            and run.poll() is None
            and not any(" step 0 " in line for _, line in lines)
        ):
            time.sleep(0.02)
        assert any(" step 0 " in line for _, line in lines), "".join(line for _, line in lines)
        signalled_at = time.monotonic()
        procs[victim].send_signal(sig)
        victim_exit, stops = None, sig in (signal.SIGINT, signal.SIGTERM)  # a stop is waited for too
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
            run.poll() is None or (stops and victim_exit is None) or not until()
        ):
            if victim_exit is None and procs[victim].poll() is not None:
                victim_exit = (procs[victim].returncode, time.monotonic() - signalled_at)
            if sig == signal.SIGSTOP and run.poll() is not None:  # a frozen victim wakes once the run ended
                procs[victim].send_signal(signal.SIGCONT)
            time.sleep(0.01)
        run.wait(timeout=1)
    finally:
        if procs[victim].poll() is None:
            procs[victim].send_signal(signal.SIGCONT)
        for proc in [run, *procs.values()]:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in [run, *procs.values()]:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        reader.join(timeout=5)
    return Fault(run.returncode, lines, signalled_at, victim_exit)


def test_a_recorder_stopped_mid_episode_closes_its_bag_and_says_why(tmp_path, private_ros_env):
    """SIGINT to the recorder alone while an episode records: the bag is closed as it stands, marked
    incomplete with the reason, and the log says so, with no traceback (its last "idle" beat, sent
    after rclpy had shut the context down, raised in the closing thread and cut that line off)."""
    from r3.data.bags import read_episode_info

    returncode, lines, _, victim_exit = _episode_with_a_fault(
        private_ros_env(), tmp_path, "r3_recorder_node", signal.SIGINT
    )
    text = "".join(line for _, line in lines)
    log = (tmp_path / "logs" / "r3_recorder_node.log").read_text()
    assert returncode == 1 and victim_exit is not None and victim_exit[0] == 0, (victim_exit, log)
    assert "Traceback" not in log, log
    stopped = "the recorder stopped before the episode ended"
    (bag,) = (tmp_path / "bags").iterdir()
    info = read_episode_info(bag)
    assert (info.status, info.reason) == ("incomplete", stopped), (info, text)
    assert f"bag {bag} closed (incomplete: {stopped})" in log, log


def test_a_recorder_frozen_across_end_leaves_a_bag_that_says_what_the_result_said(tmp_path, private_ros_env):
    """Found by a hostile client: the recorder frozen (SIGSTOP) at the step of a one-step episode,
    across its END, and woken once `r3 run` has ended. The RunTask result said the recorder stopped
    responding (it was silent for heartbeat_timeout_s while the reasoner waited for the bag), while
    the bag it closed once woken said complete, success. The bag now says what the result said."""
    from r3.data.bags import INCOMPLETE, read_episode_info, read_messages

    timeout_s = 5.0  # the step's motion ends, and END goes out, well before the silence is found
    log = tmp_path / "logs" / "r3_recorder_node.log"
    fault = _episode_with_a_fault(
        private_ros_env(),
        tmp_path,
        "r3_recorder_node",
        signal.SIGSTOP,
        episode=("--task", "T", "--seed", "5", "--max-steps", "1"),
        until=lambda: any(said in log.read_text() for said in (" closed (incomplete", "; now incomplete")),
        heartbeat_timeout_s=timeout_s,
    )
    text = "".join(line for _, line in fault.lines)
    fell_silent = f"error: /r3_recorder_node stopped responding (no heartbeat for {timeout_s:.1f} s)"
    outcome = [line for _, line in fault.lines if line.startswith("outcome:")]
    assert fault.returncode == 1 and outcome and fell_silent in outcome[0], text
    (bag,) = (tmp_path / "bags").iterdir()
    ends = [m.reason for _, _, _, m in read_messages(bag, {names.EPISODE_EVENTS}) if m.event == 1]
    assert not ends[0].startswith("error"), ends  # the first END went out before the silence was found
    # The second END is in the bag when it came while the bag drained; when it came once the bag had
    # closed (on waking the recorder may close it before a sample DDS sends again comes), it rewrote
    # the closed bag's outcome instead: either way the bag says what the result said.
    assert ends[1:] in ([fell_silent], []), ends
    info = read_episode_info(bag)
    assert (info.status, info.reason) == (INCOMPLETE, fell_silent), (info, log.read_text())


def test_a_bag_whose_reasoner_died_mid_episode_is_closed_incomplete(tmp_path, private_ros_env):
    """SIGKILL to the reasoner mid-episode: no END will come. The recorder closes the bag, incomplete,
    once that reasoner has been silent for ``reasoner_timeout_s``; before, it recorded on into that
    bag until the next episode or its own stop (a camera streaming beside it filled it meanwhile)."""
    from r3.data.bags import read_episode_info

    log = tmp_path / "logs" / "r3_recorder_node.log"
    died = "/r3_reasoner_node stopped responding (no heartbeat for 1.0 s) before the episode ended"
    _episode_with_a_fault(
        private_ros_env(),
        tmp_path,
        "r3_reasoner_node",
        signal.SIGKILL,
        recorder={"reasoner_timeout_s": 1.0},
        until=lambda: died in log.read_text(),
    )
    (bag,) = (tmp_path / "bags").iterdir()
    info = read_episode_info(bag)
    assert (info.status, info.reason) == ("incomplete", died), (info, log.read_text())
    assert f"bag {bag} closed (incomplete: {died})" in log.read_text()


def test_r3_run_that_gives_up_on_a_frozen_reasoner_stops_its_episode(tmp_path, private_ros_env):
    """``r3 run --use-running-graph`` counts the reasoner dead after 3 s without a heartbeat and
    exits with an error. It left the episode running: a reasoner that was only frozen (SIGSTOP, a
    long stall) woke and ran the episode on to its end (9 and 20 steps in two runs), moving the robot
    for an episode its client had reported failed. The client now stops the task before it exits (a
    stop on /r3/stop_motion, then the action cancel; a frozen process may lose both, its socket
    full), and the reasoner ends an episode in which it stood still longer than that client waits
    (``RUN_CLIENT_TIMEOUT_S``) with an error that says so."""
    log = tmp_path / "logs" / "r3_reasoner_node.log"
    returncode, lines, _, _ = _episode_with_a_fault(
        private_ros_env(),
        tmp_path,
        "r3_reasoner_node",
        signal.SIGSTOP,
        until=lambda: re.search(r"episode T-s5-\S+: ", log.read_text()) is not None,
    )
    text = "".join(line for _, line in lines)
    assert returncode == 1 and "/r3_reasoner_node stopped responding; the episode was stopped" in text, text
    ended = re.search(r"episode T-s5-\S+: (.*), \d+ steps", log.read_text())
    assert ended, log.read_text()
    assert ended.group(1) == "canceled" or re.fullmatch(  # the cancel, or its own stillness found first
        r"error: /r3_reasoner_node stood still for [\d.]+ s \(frozen or starved\); its clients count it "
        r"dead after 3 s, so the episode ends here",
        ended.group(1),
    ), log.read_text()


@pytest.mark.parametrize("victim", ["r3_reasoner_node", "r3_packing_sim_node"])
def test_a_node_stopped_by_sigint_mid_motion_ends_its_goal_and_exits(victim, tmp_path, private_ros_env):
    """A SIGINT shuts rclpy's context down at once, while the node's goal still runs in a pool thread:
    a packing motion, or the reasoner's wait for that motion's result. The goal ends at its next
    check (``r3_ros.shutdown``) and what it still sends is dropped. Before, the packing simulator's
    motion went on publishing into destroyed publishers and logged tracebacks, and the reasoner
    waited for a result that no executor would take any more until ``max_episode_s`` (900 s): the
    process did not exit."""
    fault = _episode_with_a_fault(
        private_ros_env(), tmp_path, victim, signal.SIGINT, "sim_packing", PACKING_EPISODE
    )
    text = "".join(line for _, line in fault.lines)
    log = (tmp_path / "logs" / f"{victim}.log").read_text()
    assert fault.victim_exit is not None and fault.victim_exit[0] == 0, (fault.victim_exit, log)
    assert "Traceback" not in log, log
    outcome = [line for _, line in fault.lines if line.startswith("outcome:")]
    assert fault.returncode == 1 and outcome and f"/{victim} stopped responding" in outcome[0], text
    if victim == "r3_reasoner_node":
        assert "error: /r3_reasoner_node is shutting down" in log, log
    print(f"\n{victim} exited {fault.victim_exit[1]:.2f} s after the SIGINT")


@pytest.mark.parametrize(
    "victim", ["r3_lowlevel_node", "r3_sim_node", "r3_recorder_node", "r3_perception_node"]
)
def test_a_dead_node_of_an_unsupervised_graph_is_named_by_its_silence(victim, tmp_path, private_ros_env):
    """The perception node, sim_packing's (the packing policy sees through it), was named only once
    the policy's ``perception_timeout_s`` (30 s) ran out, until the reasoner watched it too."""
    timeout_s = HEARTBEAT_TIMEOUT_S
    graph = ("sim_packing", PACKING_EPISODE) if victim == "r3_perception_node" else ()
    returncode, lines, killed_at, _ = _episode_with_a_fault(
        private_ros_env(), tmp_path, victim, signal.SIGKILL, *graph
    )
    text = "".join(line for _, line in lines)
    outcome = [(t, line) for t, line in lines if line.startswith("outcome:")]
    assert returncode == 1 and outcome and "error" in outcome[0][1], text
    if victim == "r3_sim_node":  # mid-instruction, the low-level node's state_timeout_s (2 s) may come first
        assert (
            "the simulator stopped publishing state" in outcome[0][1]
            or f"/{victim} stopped responding (no heartbeat for {timeout_s:.1f} s)" in outcome[0][1]
        ), text
    else:
        assert f"/{victim} stopped responding (no heartbeat for {timeout_s:.1f} s)" in outcome[0][1], text
    ended_after = outcome[0][0] - killed_at
    print(
        f"\nkill -9 {victim} (no supervisor): the episode ended with an error naming it "
        f"after {ended_after:.2f} s (heartbeat_timeout_s {timeout_s:.1f} s): {outcome[0][1].strip()}"
    )
    assert ended_after < timeout_s + 2.0, text  # SAFETY.md row 6's bound: heartbeat_timeout_s + 2 s


@pytest.mark.parametrize("controller", [False, True], ids=["lowlevel_node", "controller_in_the_simulator"])
def test_the_pusher_stops_when_the_reasoner_falls_silent(controller, private_ros_env):
    """SAFETY.md row 4 for the Language Table low-level node, and for the simulator running the policy
    as its own controller: once the FollowInstruction client (the reasoner; here this probe, by name)
    has been silent for ``client_timeout_s``, no pusher command follows, within 0.2 s, and the
    instruction ends with an error naming the client."""
    import rclpy
    from geometry_msgs.msg import Vector3Stamped
    from rclpy.action import ActionClient

    from r3_msgs.action import FollowInstruction
    from r3_msgs.msg import Heartbeat
    from r3_msgs.srv import ResetScene
    from r3_ros.qos import HEARTBEAT as BEAT_QOS

    env = private_ros_env(in_process=True)
    client_timeout_s = 0.5
    guard = ["-p", "reasoner_node:=/r3_silent_probe", "-p", f"client_timeout_s:={client_timeout_s}"]
    commands_from = (
        [["r3_sim_node.main", "-p", "controller:=scripted", *guard]]
        if controller
        else [["r3_sim_node.main"], ["r3_lowlevel_node.main", *guard]]
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", module, "--ros-args", *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for module, *args in commands_from
    ]
    rclpy.init(domain_id=int(env["ROS_DOMAIN_ID"]))
    node = rclpy.create_node("r3_silent_probe")
    commands: list[float] = []
    node.create_subscription(
        Vector3Stamped, names.PUSHER_COMMAND, lambda _: commands.append(time.monotonic()), 100
    )
    beat_pub = node.create_publisher(Heartbeat, names.HEARTBEAT, BEAT_QOS)
    reset = node.create_client(ResetScene, names.RESET_SCENE)
    follow = ActionClient(node, FollowInstruction, names.FOLLOW_INSTRUCTION)
    beating, last_beat = [True], [0.0]

    def spin(seconds: float, until=lambda: False) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not until():
            rclpy.spin_once(node, timeout_sec=0.005)
            if beating[0] and time.monotonic() - last_beat[0] >= 0.1:
                beat_pub.publish(Heartbeat(node=node.get_fully_qualified_name(), state="busy"))
                last_beat[0] = time.monotonic()

    def reason_of(sent) -> str:
        spin(10, sent.done)
        assert sent.done() and sent.result().accepted
        result = sent.result().get_result_async()
        spin(30, result.done)
        assert result.done(), "the instruction did not end"
        return result.result().result.reason

    try:
        assert follow.wait_for_server(timeout_sec=60) and reset.wait_for_service(timeout_sec=30)
        done = reset.call_async(
            ResetScene.Request(suite="language_table", task="T", seed=5, episode_id="silent")
        )
        spin(60, done.done)
        assert done.done() and done.result().ok
        spin(1.0)  # the low-level node hears this probe's heartbeat and the first state
        # Corner to corner until the watchdog ends one: how many instructions that takes depends on how
        # fast the pusher gets there (the simulator's own controller, unpaced, makes several within the
        # silence), so the bound is the silence, not a count (a fixed 8 all ended "done" in 0.4 s).
        reasons: list[str] = []
        corners = itertools.cycle(
            ["move your arm to the top left corner", "move your arm to the bottom right corner"]
        )
        deadline = None
        while deadline is None or time.monotonic() < deadline + 10.0:
            instruction = next(corners)
            goal = FollowInstruction.Goal(
                instruction=instruction, suite="language_table", max_steps=200, seed=0
            )
            sent = follow.send_goal_async(goal)
            if beating[0]:
                spin(30, lambda: bool(commands))
                assert commands, "the pusher did not move"
                beating[0] = False  # silent from the first command on
                deadline = last_beat[0] + client_timeout_s
            reasons.append(reason_of(sent))
            if reasons[-1].startswith("error"):
                break
        assert reasons[-1].startswith("error: /r3_silent_probe stopped responding"), reasons
        spin(0.3)  # anything still coming counts
        latency = max([deadline] + commands) - deadline
    finally:
        node.destroy_node()
        rclpy.shutdown()
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=20)
    print(
        f"\npusher: last command {latency * 1000:.0f} ms after the watchdog's deadline "
        f"({client_timeout_s:.1f} s of silence; {len(reasons)} instructions)"
    )
    assert latency < 0.2


def _run(args: list[str], out: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        R3 + ["run", "--quiet", "--video", "none", "--task", "T", "--seed", "5", "--out", str(out)] + args,
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        check=False,
    )


@pytest.mark.parametrize(
    "budget, value, expected",
    [
        ("instruction_timeout_s", 0.3, r"/r3/follow_instruction did not answer within 0\.3 s"),
        ("max_episode_s", 5.0, r"the episode ran past its time budget of 5 s"),
    ],
)
def test_every_instruction_and_episode_has_a_wall_clock_budget(
    budget, value, expected, tmp_path, private_ros_env
):
    """SAFETY.md row 7: an instruction that runs past ``instruction_timeout_s``, or an episode past
    ``max_episode_s``, ends the episode with an error saying which budget ran out. The low-level node
    is frozen (SIGSTOP) during the first instruction, so the budget runs out whatever the machine's
    speed; its heartbeat timeout (60 s here) is far behind either budget."""
    returncode, lines, frozen_at, _ = _episode_with_a_fault(
        private_ros_env(),
        tmp_path,
        "r3_lowlevel_node",
        signal.SIGSTOP,
        heartbeat_timeout_s=60.0,
        **{budget: value},
    )
    text = "".join(line for _, line in lines)
    outcome = [(t, line) for t, line in lines if line.startswith("outcome:")]
    assert returncode == 1 and outcome and "error" in outcome[0][1], text
    assert re.search(expected, outcome[0][1]), text
    print(f"\n{budget}={value}: {outcome[0][1].strip()} {outcome[0][0] - frozen_at:.2f} s after the freeze")

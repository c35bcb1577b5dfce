"""The main() every r3 node shares: init, spin an executor, shut down cleanly.

A node whose callbacks block (an action's execute waits for states another callback takes) spins
the multi-threaded ``r3_ros.executor``; a node whose callbacks are all short asks for one thread
(``threads=1``): rclpy's single-threaded executor runs each callback in the spinning thread, without
the hand-off to a pool thread that every message costs otherwise (r3_sim_node, on the lock-step
loop's critical path: the graph's CPU per decision step went from 208 to 188 ms).

A node that cannot configure itself (a model path that does not exist, a server that does not
answer, a bad parameter) prints one ``fatal:`` line naming the problem and exits with status 1.
The first SIGINT stops the node; later ones are ignored: launch forwards one on top of the
shell's when its stdin is not a terminal, and a KeyboardInterrupt inside ``destroy_node`` would end
the process with -2 and leave the node's cleanup (a bag being closed) half done.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable

import rclpy
from rclpy._rclpy_pybind11 import RCLError
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node

from r3.graph.supervisor import FATAL
from r3.profiling import PROFILE_DIR_ENV, WakeLedger, record_while_flagged
from r3_ros.executor import QueueAwareExecutor, count_wakes
from r3_ros.fast_logging import speed_up_rclpy_logging

#: After the spin has ended (a SIGINT shut the context down), how long the goals and episodes still
#: running in the pool may take to wind down before the node is destroyed under them.
WIND_DOWN_S = 5.0


#: What CPython reports, as an unraisable OSError, for a SIGINT it took just before its handler
#: became SIG_IGN: in a node that is a later SIGINT, ignored as meant.
IGNORED_SIGINT = f"Signal {int(signal.SIGINT)} ignored due to race condition"


def quiet_ignored_sigint(hook: Callable) -> Callable:
    """``sys.unraisablehook`` that drops CPython's report of an ignored SIGINT and hands everything
    else to ``hook``: a double SIGINT under load printed it as a traceback ("OSError: Signal 2
    ignored due to race condition") from a node that then exited 0."""

    def unraisable(info) -> None:
        if not (isinstance(info.exc_value, OSError) and str(info.exc_value) == IGNORED_SIGINT):
            hook(info)

    return unraisable


def run_node(node_class, args=None, threads: int | Callable[[Node], int] = 8) -> None:
    """Spin one ``node_class()``; ``threads``: the executor's, or a function of the node that says
    (its parameters choose)."""
    spinning, executor = False, None

    def on_sigint(signum, frame) -> None:
        """Runs after rclpy's own SIGINT handler, which shuts the context down, so a spinning
        executor returns by itself; a KeyboardInterrupt raised into it could land inside the
        thread pool's bookkeeping and leave a worker that blocks the exit. Before spinning (a
        model still loading) it stops the configuration at once."""
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if not spinning:
            raise KeyboardInterrupt

    sys.unraisablehook = quiet_ignored_sigint(sys.unraisablehook)
    signal.signal(signal.SIGINT, on_sigint)  # before rclpy.init, whose handler calls it
    speed_up_rclpy_logging()
    rclpy.init(args=args)
    node, stop_profiling = None, None
    try:
        node = node_class()
        # With a pool, long action callbacks never starve the rest.
        threads = threads(node) if callable(threads) else threads
        executor = SingleThreadedExecutor() if threads == 1 else QueueAwareExecutor(num_threads=threads)
        if os.environ.get(PROFILE_DIR_ENV):  # bench/profile_graph.py: where a node's CPU time goes
            wakes = WakeLedger()
            count_wakes(executor, wakes)
            stop_profiling = record_while_flagged(os.environ[PROFILE_DIR_ENV], node.get_name(), wakes=wakes)
        executor.add_node(node)
        spinning = True
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except RCLError:
        # The SIGINT handler shut the context down while the executor was building its wait set;
        # rclpy raises this instead of ExternalShutdownException in that window. A shutdown, not a fault.
        if rclpy.ok():
            raise
    except Exception as exc:  # configuration failed: one line, then a non-zero exit
        if node is not None:
            raise
        print(f"{FATAL}{exc}", file=sys.stderr, flush=True)
        rclpy.try_shutdown()
        sys.exit(1)
    finally:
        if isinstance(executor, QueueAwareExecutor) and not executor.wind_down(WIND_DOWN_S):
            late = f"a callback still ran {WIND_DOWN_S:.0f} s after the spin ended"
            print(f"{node.get_name()}: {late}", file=sys.stderr)
        if stop_profiling is not None:
            stop_profiling()
        if node is not None:
            if hasattr(node, "shutdown"):
                node.shutdown()
            node.destroy_node()
        rclpy.try_shutdown()

"""rclpy's ActionClient with each goal request registered once, under the client's lock.

rclpy 9.1 (the pip wheels r3 runs on) registers a goal request's future under the client's lock, then
makes a second one after the lock is released and registers it again (removed upstream in
ros2/rclpy#1532). An executor thread that takes the server's answer between the two completes the
second future before the client has added it to its waitable, so its done callback removes it from a
list it is not in: ``send_goal_async`` raised ``ValueError: list.remove(x): x not in list`` and the
episode ended in that error (seen on cores busy with other work), or the future it returned never
completed. Here the one future is registered and added before the lock is released, so the answer
cannot be taken before the client knows what it answers.
"""

from __future__ import annotations

from rclpy.action import ActionClient as RclpyActionClient
from rclpy.task import Future


class ActionClient(RclpyActionClient):
    """Every r3 node's action client (the commander's RunTask, the reasoner's FollowInstruction)."""

    def send_goal_async(self, goal, feedback_callback=None, goal_uuid=None) -> Future:
        """As rclpy's, with the goal's future made and registered once; feedback is routed before the
        request leaves, so none sent right after the goal's acceptance is dropped."""
        if not isinstance(goal, self._action_type.Goal):
            raise TypeError(f"Expected goal type ({self._action_type.Goal}) but received ({type(goal)})")
        request = self._action_type.Impl.SendGoalService.Request()
        request.goal_id = self._generate_random_uuid() if goal_uuid is None else goal_uuid
        request.goal = goal
        if feedback_callback is not None:
            self._feedback_callbacks[bytes(request.goal_id.uuid)] = feedback_callback
        future = Future()
        with self._lock:  # taking the answer needs this lock too
            sequence_number = self._client_handle.send_goal_request(request)
            if sequence_number in self._pending_goal_requests:
                raise RuntimeError(f"Sequence ({sequence_number}) conflicts with pending goal request")
            self._pending_goal_requests[sequence_number] = future
            self._goal_sequence_number_to_goal_id[sequence_number] = request.goal_id
            future.add_done_callback(self._remove_pending_goal_request)
            self.add_future(future)
        return future

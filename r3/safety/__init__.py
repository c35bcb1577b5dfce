"""Safety rules shared by the in-process loop and the ROS graph, so both refuse and stop alike."""

from r3.safety.guard import MAX_CONSECUTIVE_INVALID, ResponseGuard, refusal_note

__all__ = ["MAX_CONSECUTIVE_INVALID", "ResponseGuard", "refusal_note"]

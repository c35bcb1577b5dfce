"""Stand-in for ROS 2's `launch`: the slice r3's launch file uses, evaluated without starting anything.

``LaunchDescription.entities``, ``LaunchContext.launch_configurations`` and each action's
``execute(context)`` behave like the real ones, so a test can walk a description the same way over
the stand-in and over the real package.
"""

from launch.launch_context import LaunchContext
from launch.launch_description import LaunchDescription

__all__ = ["LaunchContext", "LaunchDescription"]

"""Test stand-in for moveit_py (see ../README.md)."""

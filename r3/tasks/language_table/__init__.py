"""The Language Table suite: board contract (board.py), the 14 tasks (tasks.py), their checkers and
planner."""

"""Evaluation: held-out runs of a reasoner, metrics with confidence intervals, tables and plots.

``r3 eval`` (``r3.eval.cli``) is the command; ``runner`` runs episodes (processes or Ray) into a
resumable cache; ``metrics`` holds every interval and the ERR metrics; ``tables`` and ``plots``
present the results. ROS-free: the ``--via-ros`` check lives in ``r3_ros.eval_via_ros``.
"""

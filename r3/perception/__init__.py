"""Perception: segment the named objects in an RGB-D frame and ground names and image points in 3D.

Backends behind one :class:`~r3.perception.segmenters.Segmenter` interface (``sim``, ``sam2``,
``owlv2+sam2``); depth back-projection and per-object statistics in :mod:`.geometry`; ERR's
2D-to-3D grounding rules in :mod:`.grounding`; the continuous loop that a node drives in
:mod:`.pipeline`. Nothing here imports rclpy: nodes convert messages once, at their boundary.
"""

"""A :class:`~r3.lowlevel.perceived.PerceptionSource` over ROS: the perception node's
DetectedObjects and GroundPoint, for a packing policy that sees only through perception.

``capture(resend=False)`` is the camera side: it makes sure a frame of the scene as it is now has
gone out (again, with ``resend``) and returns that frame's stamp (a simulator publishes one on
demand; a streaming camera would return the newest stamp). ``observe`` then waits for the
DetectedObjects of exactly that stamp, so the policy never acts on a frame from before its last
motion; ``ground`` calls GroundPoint on it. Both waits end once ``should_stop()`` says the goal they
serve must stop (cancelled, preempted, its client silent), as the arm's motions do: the policy runs
holding its simulator's lock, which a wait out to ``timeout_s`` held past the goal's end.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from rclpy.callback_groups import ReentrantCallbackGroup

from r3.graph import names
from r3.lowlevel.perceived import ArmReading, PerceivedFrame, SeenItem
from r3.perception.camera import CameraModel
from r3.perception.pipeline import ANY_LABEL
from r3.perception.sync import StampedBuffer
from r3_msgs.msg import DetectedObjects
from r3_msgs.srv import GroundPoint
from r3_ros.conversions import check_detections, stamp_to_ns
from r3_ros.refusals import refusing_message
from r3_ros.services import ServiceTimeout, call_resending

#: DetectedObjects kept by stamp while the policy may still ask about them.
KEEP = 8
#: Seconds to wait for a frame's detections before sending the frame again.
RESEND_S = 1.0
#: Seconds between two looks at ``should_stop`` while a wait goes on.
STOP_LOOK_S = 0.05


class PerceptionUnavailable(RuntimeError):
    """No perception to act on: the perception node did not answer in time (not running, or too
    slow), or the goal that waited for it must stop."""


class RosPerception:
    def __init__(
        self,
        node,
        camera: CameraModel,
        capture: Callable[..., int],
        arm: Callable[[], ArmReading],
        timeout_s: float = 10.0,
        should_stop: Callable[[], bool] = lambda: False,
    ):
        self.camera, self.capture, self.arm, self.timeout_s = camera, capture, arm, timeout_s
        self.should_stop = should_stop
        group = ReentrantCallbackGroup()
        self.client = node.create_client(GroundPoint, names.GROUND_POINT, callback_group=group)
        node.create_subscription(
            DetectedObjects,
            names.DETECTED_OBJECTS,
            refusing_message(node, self._on_objects),
            10,
            callback_group=group,
        )
        self._objects = StampedBuffer(KEEP)

    def _on_objects(self, msg: DetectedObjects) -> None:
        """Detections kept by stamp, checked on arrival (``check_detections``): a malformed message
        (anyone may publish on the topic) is refused, never stored for the policy."""
        self._objects.put(stamp_to_ns(msg.header.stamp), check_detections(msg))

    def _detections(self, stamp_ns: int) -> DetectedObjects:
        """The detections of that frame; the frame goes out again every :data:`RESEND_S` meanwhile
        (camera streams are best effort: a large image can be lost, a streaming camera sends the
        next one)."""
        deadline = time.monotonic() + self.timeout_s
        resend_at = time.monotonic() + RESEND_S
        while self._keep_waiting() and (left := deadline - time.monotonic()) > 0:
            found = self._objects.wait(stamp_ns, min(left, STOP_LOOK_S))
            if found is not None:
                return found
            if time.monotonic() >= resend_at:
                self.capture(resend=True)
                resend_at = time.monotonic() + RESEND_S
        raise PerceptionUnavailable(
            f"no detections for the frame stamped {stamp_ns} ns within "
            f"{self.timeout_s} s (is r3_perception_node running?)"
        )

    def _keep_waiting(self) -> bool:
        """True while the goal may wait on; raises once it must stop, so that it ends now."""
        if self.should_stop():
            raise PerceptionUnavailable("the goal stopped while it waited for perception")
        return True

    def observe(self) -> PerceivedFrame:
        stamp = self.capture()
        items = {}
        for o in self._detections(stamp).objects:
            if math.isfinite(o.top_centre.z):  # objects with too few valid depth pixels have no 3D
                items[o.label] = SeenItem(
                    o.label,
                    (o.top_centre.x, o.top_centre.y, o.top_centre.z),
                    float(o.footprint_yaw),
                    (float(o.footprint[0]), float(o.footprint[1])),
                    float(o.bottom_height),
                    int(o.valid_points),
                )
        return PerceivedFrame(stamp, items)

    def ground(self, u: float, v: float):
        stamp = self.capture()
        detections = self._detections(stamp)
        request = GroundPoint.Request(label=ANY_LABEL, u=float(u), v=float(v), purpose="pick")
        try:
            r = call_resending(self.client, request, self.timeout_s, self._keep_waiting)  # a read: safe twice
        except ServiceTimeout:
            raise PerceptionUnavailable(f"GroundPoint did not answer within {self.timeout_s} s") from None
        if not r.ok:
            return r.reason
        if stamp_to_ns(r.target.header.stamp) != stamp:
            return f"stale_frame: grounded on {stamp_to_ns(r.target.header.stamp)} ns, not {stamp} ns"
        label = next((o.label for o in detections.objects if o.mask_id == r.mask_id), None)
        if label is None:
            return f"unknown_mask: {r.mask_id}"
        return label, (r.target.point.x, r.target.point.y, r.target.point.z)

"""r3_perception_node: segmentation + depth -> DetectedObjects, an annotated image, and grounding.

Colour, aligned depth and camera_info come in under the RealSense driver's names; colour and depth
are paired by stamp (approximate sync), and a pair older than ``max_frame_age_s`` on this node's
clock is refused. A worker thread processes the newest accepted pair whenever it is free (ZAP's
background perception), so a slow segmenter skips frames instead of queueing them. GroundPoint
answers on the last processed frame. The annotated image is drawn only while something subscribes to
it (a live view, a recorder): a viewer that joins later gets the next frame. The segmenter is built
once, when the node is constructed, from the node's parameters
(``r3.perception.segmenters.make_segmenter``: each backend reads those it needs).

A segmenter that reads the simulator's instance masks (``sim``) gets them: a 32SC1 image on
``/sim/privileged/instances`` with the colour image's stamp, and the id -> name table (latched JSON)
on ``/sim/privileged/instance_names``; a frame waits up to ``instance_wait_s`` for its mask.

The names segmented are the ``query`` parameter's at each episode's START (``/r3/episode_events``);
SetPerceptionQuery (ZAP's change_query) replaces them for the episode it comes in. A query that
outlived its episode (a client's ``["milk"]`` once did) left every later episode seeing nothing.
"""

from __future__ import annotations

import json
import threading

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import String

from r3.graph import names
from r3.graph.node_params import NODE_PARAMETERS
from r3.perception.annotate import annotate
from r3.perception.camera import RGBDFrame, pose_matrix
from r3.perception.grounding import GroundingConfig
from r3.perception.pipeline import Perception, PerceptionConfig
from r3.perception.segmenters import make_segmenter
from r3.perception.sync import PairSync, StampedBuffer
from r3_msgs.msg import DetectedObjects, EpisodeEvent
from r3_msgs.srv import GroundPoint, SetPerceptionQuery
from r3_ros.conversions import (
    check_camera_info,
    detections_to_msg,
    image_to_msg,
    msg_to_camera_model,
    msg_to_depth,
    msg_to_image,
    msg_to_instances,
    ns_to_stamp,
    stamp_to_ns,
)
from r3_ros.heartbeat import HeartbeatPublisher
from r3_ros.node import R3Node
from r3_ros.params import declare_parameters
from r3_ros.qos import EVENTS, LATCHED, SENSOR, recorded
from r3_ros.refusals import refusing_message, refusing_service
from r3_ros.spin import run_node

#: Instance masks kept for frames still on their way.
INSTANCE_QUEUE = 8


class PerceptionNode(R3Node):
    def __init__(self):
        super().__init__("r3_perception_node")
        self.p = declare_parameters(self, NODE_PARAMETERS["r3_perception_node"])
        self.extrinsics = pose_matrix(self.p["base_from_camera"])
        self.perception = Perception(
            make_segmenter(self.p["backend"], self.p),
            PerceptionConfig(
                GroundingConfig(self.p["min_valid_pixels"]), max_frame_age_s=self.p["max_frame_age_s"]
            ),
        )
        reason = self.perception.set_query([q for q in self.p["query"] if q])
        if reason:
            raise ValueError(f"parameter query refused: {reason}")
        self.configured_query = list(self.perception.query)  # as accepted: each episode starts from it

        self.lock = threading.Lock()  # the perception state: frame, detections, query
        self.wake = threading.Condition()
        self.pending: tuple[int, Image, Image, CameraInfo] | None = None
        self.running = True
        self.sync = PairSync(self.p["sync_slop_s"])
        self.info: CameraInfo | None = None
        self.refused_stale = 0
        self.instances = StampedBuffer(INSTANCE_QUEUE)  # simulator instance masks by stamp
        self.instance_names: dict[int, str] = {}
        self.names_came = threading.Condition()  # the table is latched: it comes once, maybe late

        sensors = MutuallyExclusiveCallbackGroup()
        self.create_subscription(
            Image, names.CAMERA_IMAGE, refusing_message(self, self.on_colour), SENSOR, callback_group=sensors
        )
        self.create_subscription(
            Image, names.CAMERA_DEPTH, refusing_message(self, self.on_depth), SENSOR, callback_group=sensors
        )
        on_info = refusing_message(self, self.on_info)
        self.create_subscription(CameraInfo, names.CAMERA_INFO, on_info, SENSOR, callback_group=sensors)
        self.create_subscription(
            Image, names.SIM_INSTANCES, refusing_message(self, self.on_instances), 10, callback_group=sensors
        )
        self.create_subscription(
            String,
            names.SIM_INSTANCE_NAMES,
            refusing_message(self, self.on_instance_names),
            LATCHED,
            callback_group=sensors,
        )
        self.objects_pub = self.create_publisher(DetectedObjects, names.DETECTED_OBJECTS, recorded(10))
        self.annotated_pub = self.create_publisher(Image, names.PERCEPTION_ANNOTATED, recorded(5))
        services = ReentrantCallbackGroup()
        self.create_service(
            GroundPoint, names.GROUND_POINT, refusing_service(self, self.on_ground), callback_group=services
        )
        self.create_service(
            SetPerceptionQuery,
            names.SET_PERCEPTION_QUERY,
            refusing_service(self, self.on_query),
            callback_group=services,
        )
        self.create_subscription(
            EpisodeEvent, names.EPISODE_EVENTS, refusing_message(self, self.on_episode_event), EVENTS
        )
        self.heartbeat = HeartbeatPublisher(self)
        self.worker = threading.Thread(target=self.process_loop, daemon=True)
        self.worker.start()
        self.get_logger().info(
            f"perception ready: backend {self.p['backend']}, camera {self.p['camera_name']}"
        )

    def shutdown(self) -> None:
        with self.wake:
            self.running = False
            self.wake.notify_all()
        self.worker.join(timeout=5.0)

    # -- inputs ----------------------------------------------------------------------------------
    def on_info(self, msg: CameraInfo) -> None:
        self.info = check_camera_info(msg)

    def on_instances(self, msg: Image) -> None:
        self.instances.put(stamp_to_ns(msg.header.stamp), msg)

    def on_instance_names(self, msg: String) -> None:
        table = json.loads(msg.data)
        if not isinstance(table, dict) or not all(isinstance(name, str) for name in table.values()):
            raise ValueError(f"{names.SIM_INSTANCE_NAMES} must map instance ids to names: {msg.data[:80]!r}")
        with self.names_came:
            self.instance_names = {int(k): v for k, v in table.items()}
            self.names_came.notify_all()

    def on_colour(self, msg: Image) -> None:
        self.on_image(0, msg)

    def on_depth(self, msg: Image) -> None:
        self.on_image(1, msg)

    def on_image(self, stream: int, msg: Image) -> None:
        pair = self.sync.add(stream, stamp_to_ns(msg.header.stamp), msg)
        if pair is None or self.info is None:
            return
        if not self.perception.is_fresh(pair[0], self.now().nanoseconds):
            self.refused_stale += 1
            self.get_logger().warn(
                f"refused a frame stamped more than {self.p['max_frame_age_s']} s from this node's clock "
                f"({self.refused_stale} so far)",
                throttle_duration_sec=5.0,
            )
            return
        with self.wake:
            self.pending = (*pair, self.info)
            self.wake.notify_all()

    # -- the background loop ---------------------------------------------------------------------------
    def process_loop(self) -> None:
        while True:
            with self.wake:
                self.wake.wait_for(lambda: self.pending is not None or not self.running)
                if not self.running:
                    return
                (stamp_ns, colour, depth, info), self.pending = self.pending, None
            try:
                self.perceive(stamp_ns, colour, depth, info)
            except Exception as exc:  # noqa: BLE001 - the node's perception thread must outlive any frame
                why = f"{type(exc).__name__}: {str(exc)[:300]}"
                with self.lock:  # GroundPoint's answers name it while they ground on an older frame
                    self.perception.refuse_frame(why)
                self.get_logger().error(f"frame skipped: {why}", throttle_duration_sec=5.0)

    def perceive(self, stamp_ns: int, colour: Image, depth: Image, info: CameraInfo) -> None:
        """One frame: segment and measure, publish the objects (and the annotated image when read)."""
        frame = self.to_frame(stamp_ns, colour, depth, info)
        with self.lock:
            detections = self.perception.process(frame)
        frame_id = self.p["base_frame"] or colour.header.frame_id
        out = DetectedObjects()
        out.header.stamp, out.header.frame_id = colour.header.stamp, frame_id
        self.objects_pub.publish(detections_to_msg(detections, out, self.p["camera_name"]))
        if self.annotated_pub.get_subscription_count():  # drawn for a live view or a recorder only
            self.annotated_pub.publish(
                image_to_msg(annotate(frame.rgb, detections), colour.header.stamp, colour.header.frame_id)
            )

    def to_frame(self, stamp_ns: int, colour: Image, depth: Image, info: CameraInfo) -> RGBDFrame:
        camera = msg_to_camera_model(
            info,
            self.extrinsics,
            self.p["camera_name"],
            min_depth_m=self.p["min_depth_m"],
            max_depth_m=self.p["max_depth_m"],
        )
        instances = instance_names = None
        if self.perception.segmenter.reads_sim_instances:
            mask = self.instances.wait(stamp_ns, self.p["instance_wait_s"])
            if mask is None:
                raise ValueError(
                    f"no simulator instance mask stamped {stamp_ns} ns within {self.p['instance_wait_s']} s"
                )
            # Without the id -> name table every object is nameless and the frame would say "nothing
            # here": a first frame can come before the latched table on a loaded machine.
            with self.names_came:
                if not self.names_came.wait_for(lambda: self.instance_names, self.p["instance_wait_s"]):
                    raise ValueError(
                        f"no simulator instance names ({names.SIM_INSTANCE_NAMES}) within "
                        f"{self.p['instance_wait_s']} s"
                    )
                instance_names = dict(self.instance_names)
            instances = msg_to_instances(mask)
        return RGBDFrame(
            rgb=msg_to_image(colour),
            depth_m=msg_to_depth(depth),
            camera=camera,
            stamp_ns=stamp_ns,
            instances=instances,
            instance_names=instance_names,
        )

    # -- services ----------------------------------------------------------------------------------
    def on_ground(self, request: GroundPoint.Request, response: GroundPoint.Response) -> GroundPoint.Response:
        if request.camera not in ("", self.p["camera_name"]):
            response.reason = (
                f"unknown_camera: {request.camera[:80]!r} (this node serves {self.p['camera_name']!r})"
            )
            return response
        with self.lock:
            frame = self.perception.frame
            result = self.perception.ground_point(
                request.label, request.u, request.v, request.purpose, self.now().nanoseconds
            )
        response.ok, response.mask_id, response.reason = result.ok, result.mask_id, result.reason
        if result.ok:
            response.target.header.frame_id = self.p["base_frame"] or self.info.header.frame_id
            response.target.header.stamp = ns_to_stamp(frame.stamp_ns)
            response.target.point.x, response.target.point.y, response.target.point.z = map(
                float, result.target
            )
        return response

    def on_episode_event(self, msg: EpisodeEvent) -> None:
        """An episode starts from the configured query, whatever the one before set."""
        if msg.event != EpisodeEvent.START:
            return
        with self.lock:
            if self.perception.query == self.configured_query:
                return
            was = self.perception.query
            self.perception.set_query(self.configured_query)  # accepted once already, at start
        self.get_logger().info(
            f"episode {msg.episode_id[:80]!r} starts: the query is {self.configured_query} again "
            f"(it was {was[:10]})"
        )

    def on_query(
        self, request: SetPerceptionQuery.Request, response: SetPerceptionQuery.Response
    ) -> SetPerceptionQuery.Response:
        with self.lock:
            response.reason = self.perception.set_query(list(request.labels))
        response.ok = not response.reason
        return response


def main(args=None) -> None:
    run_node(PerceptionNode, args)


if __name__ == "__main__":
    main()

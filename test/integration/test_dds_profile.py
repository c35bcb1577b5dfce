"""r3's Fast DDS profile (config/fastdds.xml, fastdds_localhost.xml): every process of r3's ROS layer
loads it, it parses, a default writer profile does reach the publishers rmw_fastrtps creates for
rclpy (ROS QoS override only the policies ROS names), so its heartbeat period is the one r3's writers
use, its one transport (UDP) carries camera frames from one process to another, and no r3 process
takes anything through shared memory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from r3_ros import DDS_PROFILES, DDS_PROFILES_LOCALHOST

pytestmark = pytest.mark.ros

#: Publishes on a topic of its own until its own subscription hears it (3 s at most); prints whether it did.
ROUND_TRIP = """
import time
import r3_ros, rclpy
from std_msgs.msg import String
rclpy.init()
node = rclpy.create_node("dds_profile_probe")
heard = []
node.create_subscription(String, "/dds_profile_probe", lambda m: heard.append(m.data), 10)
pub = node.create_publisher(String, "/dds_profile_probe", 10)
end = time.monotonic() + 3
while not heard and time.monotonic() < end:
    pub.publish(String(data="x"))
    rclpy.spin_once(node, timeout_sec=0.1)
print("heard" if heard else "not heard", r3_ros.os.environ["FASTDDS_DEFAULT_PROFILES_FILE"])
"""


def _round_trip(
    profile: str | None, private_ros_env, discovery_range="LOCALHOST"
) -> subprocess.CompletedProcess:
    env = private_ros_env()
    env.pop("FASTRTPS_DEFAULT_PROFILES_FILE", None)
    env.pop("FASTDDS_DEFAULT_PROFILES_FILE", None)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = discovery_range
    if profile is not None:
        env["FASTDDS_DEFAULT_PROFILES_FILE"] = profile
    return subprocess.run(
        [sys.executable, "-c", ROUND_TRIP], env=env, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize(
    ("discovery_range", "profile"), [("LOCALHOST", DDS_PROFILES_LOCALHOST), ("SUBNET", DDS_PROFILES)]
)
def test_every_process_of_r3s_ros_layer_loads_the_profile_and_it_parses(
    discovery_range, profile, private_ros_env
):
    done = _round_trip(None, private_ros_env, discovery_range)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["heard", str(profile)], done.stdout + done.stderr
    assert profile.is_file()
    assert "XMLPARSER" not in done.stderr, done.stderr


def test_a_profile_of_the_users_own_wins(tmp_path, private_ros_env):
    own = tmp_path / "own.xml"
    own.write_text(DDS_PROFILES.read_text())
    done = _round_trip(str(own), private_ros_env)
    assert done.stdout.split() == ["heard", str(own)], done.stdout + done.stderr


def test_a_default_writer_profile_reaches_the_publishers_of_rclpy(tmp_path, private_ros_env):
    """The premise of r3's profile: rmw_fastrtps builds every DataWriter on the default writer
    profile. Shown with a policy ROS never sets: an exclusive-ownership writer cannot match the
    shared-ownership reader rclpy creates, so nothing is heard."""
    exclusive = tmp_path / "exclusive.xml"
    exclusive.write_text(
        '<?xml version="1.0" encoding="UTF-8" ?>\n<dds xmlns="http://www.eprosima.com"><profiles>'
        '<data_writer profile_name="exclusive" is_default_profile="true">'
        "<qos><ownership><kind>EXCLUSIVE</kind></ownership></qos></data_writer></profiles></dds>\n"
    )
    done = _round_trip(str(exclusive), private_ros_env)
    assert done.stdout.split()[:2] == ["not", "heard"], done.stdout + done.stderr


#: Publishes a 1280x720 rgb8 frame (2.6 MiB: over Fast DDS's default shared-memory segment, within
#: r3's) every 0.1 s until stdin closes.
FRAME_PUBLISHER = """
import sys, threading, time
import numpy as np, r3_ros, rclpy
from sensor_msgs.msg import Image
from r3_ros.conversions import image_to_msg
rclpy.init()
node = rclpy.create_node("dds_frame_publisher")
pub = node.create_publisher(Image, "/dds_profile_frames", 10)
frame = np.full((720, 1280, 3), 7, np.uint8)
threading.Thread(target=lambda: (sys.stdin.read(), rclpy.shutdown()), daemon=True).start()
while rclpy.ok():
    try:
        pub.publish(image_to_msg(frame, node.get_clock().now().to_msg(), "camera"))
    except Exception:
        break
    time.sleep(0.1)
"""

#: Waits (20 s at most) for one whole frame from another process; prints its size and a checksum.
FRAME_SUBSCRIBER = """
import time
import r3_ros, rclpy
from sensor_msgs.msg import Image
rclpy.init()
node = rclpy.create_node("dds_frame_subscriber")
frames = []
node.create_subscription(Image, "/dds_profile_frames", frames.append, 10)
end = time.monotonic() + 20
while not frames and time.monotonic() < end:
    rclpy.spin_once(node, timeout_sec=0.1)
if frames:
    print(frames[0].width, frames[0].height, len(frames[0].data), sum(frames[0].data[::997]))
"""


def test_the_profiles_transports_carry_a_camera_frame_between_processes(private_ros_env):
    """The round trips above stay inside one participant (no transport at all); this one crosses
    processes, where the profile's own transports replace Fast DDS's built-in ones."""
    env = private_ros_env()
    publisher = subprocess.Popen(
        [sys.executable, "-c", FRAME_PUBLISHER], env=env, stdin=subprocess.PIPE, text=True
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", FRAME_SUBSCRIBER],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        publisher.communicate("", timeout=30)
    assert "XMLPARSER" not in done.stderr, done.stderr
    assert done.stdout.split() == [
        "1280",
        "720",
        str(1280 * 720 * 3),
        str(7 * len(range(0, 1280 * 720 * 3, 997))),
    ]


def test_r3s_two_profiles_take_no_shared_memory_and_differ_only_in_discovery():
    """One rule, two files: UDP is the only transport (config/fastdds.xml says why), and the LOCALHOST
    profile adds only discovery kept on this host."""
    import xml.etree.ElementTree as ET

    def transport_types(path) -> list[str]:
        root = ET.parse(path).getroot()
        return [e.findtext("{*}type") for e in root.iterfind(".//{*}transport_descriptor")]

    def without(path, dropped) -> str:
        root = ET.parse(path).getroot()
        for parent in root.iter():
            for child in list(parent):
                shared_memory = child.findtext("{*}type") == "SHM" or child.text == "r3_shared_memory"
                if shared_memory or child.tag.split("}")[-1] in dropped:
                    parent.remove(child)
        ET.indent(root)
        return ET.tostring(root, encoding="unicode")

    assert transport_types(DDS_PROFILES) == transport_types(DDS_PROFILES_LOCALHOST) == ["UDPv4"]
    localhost_only = ("builtin", "maxInitialPeersRange")
    assert without(DDS_PROFILES_LOCALHOST, localhost_only) == without(DDS_PROFILES, ())
    peers = ET.parse(DDS_PROFILES_LOCALHOST).getroot().iterfind(".//{*}initialPeersList//{*}address")
    assert [a.text for a in peers] == ["127.0.0.1"]


#: Starts a node (``python -m <module> --ros-args <args>``), waits (60 s at most) for its heartbeat,
#: then prints whether it came and how many Fast DDS shared-memory files the node and this process
#: (r3's default profile) map.
NODE_PROBE = """
import subprocess, sys, time
import r3_ros, rclpy
from r3.graph import names
from r3_msgs.msg import Heartbeat
from r3_ros.qos import HEARTBEAT
module, name = sys.argv[1], "/" + sys.argv[1].split(".")[0]
probed = subprocess.Popen([sys.executable, "-m", module, "--ros-args", *sys.argv[2:]])
rclpy.init()
node = rclpy.create_node("transport_probe")
beats = []
node.create_subscription(Heartbeat, names.HEARTBEAT, lambda m: beats.append(m.node), HEARTBEAT)
end = time.monotonic() + 60
while name not in beats and time.monotonic() < end:
    rclpy.spin_once(node, timeout_sec=0.1)

def shared_memory_maps(pid) -> int:
    with open(f"/proc/{pid}/maps") as maps:
        return sum("/dev/shm/fastdds" in line for line in maps)

heard = "heard" if name in beats else "silent"
print(heard, shared_memory_maps(probed.pid), shared_memory_maps("self"))
probed.terminate()
probed.wait(30)
"""


@pytest.mark.parametrize(
    ("module", "discovery_range"),
    [
        ("r3_recorder_node.main", "LOCALHOST"),
        ("r3_recorder_node.main", "SUBNET"),
        ("r3_lowlevel_node.main", "LOCALHOST"),
        ("r3_reasoner_node.main", "LOCALHOST"),
        ("r3_perception_node.main", "LOCALHOST"),
        ("r3_sim_node.main", "LOCALHOST"),
        ("r3_packing_sim_node.main", "LOCALHOST"),
    ],
)
def test_no_r3_process_takes_anything_through_shared_memory(
    module, discovery_range, tmp_path, private_ros_env
):
    """A process frozen or killed inside its shared-memory port's lock stalls everyone who sends to
    it, whole, for up to 1 s a message (config/fastdds.xml): a perception node stopped 3 s
    mid-instruction stalled the packing simulator 2.0 s, and its freeze watch stopped the goal. So no
    r3 node, and no r3 client (this probe), has such a port, in either discovery range."""
    env = private_ros_env()
    env.pop("FASTRTPS_DEFAULT_PROFILES_FILE", None)
    env.pop("FASTDDS_DEFAULT_PROFILES_FILE", None)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = discovery_range
    args = ["-p", f"output_dir:={tmp_path / 'bags'}"] if module.startswith("r3_recorder_node") else []
    done = subprocess.run(
        [sys.executable, "-c", NODE_PROBE, module, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    heard, node_maps, own_maps = done.stdout.split()[-3:]
    assert heard == "heard", done.stdout + done.stderr
    assert int(own_maps) == 0 and int(node_maps) == 0, done.stdout + done.stderr


#: Starts the recorder recording one image topic, sends it FRAMES frames of 640x480 at once, and prints
#: whether the recorder was heard and how many datagrams the kernel dropped at its UDP sockets.
BURST_PROBE = """
import os, re, subprocess, sys, time
import numpy as np
import r3_ros, rclpy
from r3.graph import names
from r3_msgs.msg import Heartbeat
from r3_ros.conversions import image_to_msg
from r3_ros.qos import HEARTBEAT
from sensor_msgs.msg import Image
recorder = subprocess.Popen(
    [sys.executable, "-m", "r3_recorder_node.main", "--ros-args", "-p", f"output_dir:={sys.argv[1]}",
     "-p", "topics:=['/dds_profile_probe/image']"]
)
rclpy.init()
node = rclpy.create_node("burst_probe")
beats = []
node.create_subscription(Heartbeat, names.HEARTBEAT, lambda m: beats.append(m.node), HEARTBEAT)
pub = node.create_publisher(Image, "/dds_profile_probe/image", 10)
end = time.monotonic() + 60
while ("/r3_recorder_node" not in beats or pub.get_subscription_count() < 1) and time.monotonic() < end:
    rclpy.spin_once(node, timeout_sec=0.1)
frame = np.random.default_rng(0).integers(0, 255, (480, 640, 3), dtype=np.uint8)
for _ in range(int(sys.argv[2])):
    pub.publish(image_to_msg(frame, node.get_clock().now().to_msg(), "camera"))
end = time.monotonic() + 1.0
while time.monotonic() < end:
    rclpy.spin_once(node, timeout_sec=0.05)

def udp_drops(pid) -> int:
    links = (os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd"))
    inodes = {m.group(1) for link in links if (m := re.fullmatch(r"socket:\\[(\\d+)\\]", link))}
    rows = [line.split() for table in ("/proc/net/udp", "/proc/net/udp6") for line in open(table)]
    return sum(int(row[-1]) for row in rows if len(row) > 9 and row[9] in inodes)

print("heard" if "/r3_recorder_node" in beats else "silent", udp_drops(recorder.pid))
recorder.terminate()
recorder.wait(30)
"""


def test_a_burst_of_frames_to_the_recorder_is_not_dropped_by_its_socket(tmp_path, private_ros_env):
    """The profiles ask for UDP receive buffers that hold a burst of frames: with the kernel's default
    (208 KiB, less than one 320x240 frame) the recorder's sockets dropped some 1,600 datagrams of 4
    frames sent at once, and a bag closed before their repair lacked them (a Language Table episode
    lost 4 datagrams even on an idle machine). The kernel grants at most net.core.rmem_max."""
    rmem_max = int(Path("/proc/sys/net/core/rmem_max").read_text())
    if rmem_max < 4 * 640 * 480 * 3:
        pytest.skip(f"net.core.rmem_max is {rmem_max} bytes here: too small for 4 frames in one buffer")
    env = private_ros_env()
    env.pop("FASTRTPS_DEFAULT_PROFILES_FILE", None)
    env.pop("FASTDDS_DEFAULT_PROFILES_FILE", None)
    done = subprocess.run(
        [sys.executable, "-c", BURST_PROBE, str(tmp_path / "bags"), "4"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    heard, drops = done.stdout.split()[-2:]
    assert heard == "heard", done.stdout + done.stderr
    assert int(drops) == 0, f"{drops} datagrams dropped at the recorder's sockets\n{done.stderr[-2000:]}"

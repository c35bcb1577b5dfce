"""ROS-side helpers shared by the r3 nodes and the `r3 run` client: message conversions,
heartbeats, a common main(). Helpers take a node; they are not nodes themselves.

Importing this package gives the process r3's Fast DDS profile (:data:`DDS_PROFILES`, see the file
for why), unless the process was given a profile file of its own. It must happen before the
process's first DDS participant, which every r3 node and client does by importing r3_ros first.
A node may do without the shared-memory transport (:func:`without_shared_memory`).
"""

import os

from r3.graph.description import CONFIG_DIR

DDS_PROFILES = CONFIG_DIR / "fastdds.xml"
#: The same profile without the shared-memory transport, for a node that takes no camera frames
#: (the recorder, the low-level node): a process killed or frozen inside a shared-memory port's
#: lock stalls every process that sends to it (see the file). The second keeps discovery on this host.
DDS_PROFILES_UDP_ONLY = CONFIG_DIR / "fastdds_udp_only.xml"
DDS_PROFILES_UDP_ONLY_LOCALHOST = CONFIG_DIR / "fastdds_udp_only_localhost.xml"
_PROFILES_ENV = "FASTDDS_DEFAULT_PROFILES_FILE"
_RANGE_ENV = "ROS_AUTOMATIC_DISCOVERY_RANGE"
#: A profile file given to this process that is not r3's default (which children inherit from r3's
#: own processes: `r3 launch`, `r3 run`).
_USERS_OWN = {os.environ.get(_PROFILES_ENV), os.environ.get("FASTRTPS_DEFAULT_PROFILES_FILE")} - {
    None,
    "",
    str(DDS_PROFILES),
}
if not _USERS_OWN:
    os.environ[_PROFILES_ENV] = str(DDS_PROFILES)


def without_shared_memory() -> None:
    """This process's participant takes no shared-memory transport (:data:`DDS_PROFILES_UDP_ONLY`),
    unless the user gave a profile file of their own. Call it before ``rclpy.init``.

    For a discovery range of LOCALHOST rmw_fastrtps adds transports of its own to a profile's,
    shared memory among them; so the process asks for SUBNET and takes a profile that keeps
    discovery on this host itself, as rmw_fastrtps does for LOCALHOST.
    """
    if _USERS_OWN:
        return
    localhost = os.environ.get(_RANGE_ENV, "").upper() == "LOCALHOST"
    if localhost:
        os.environ[_RANGE_ENV] = "SUBNET"
    os.environ[_PROFILES_ENV] = str(DDS_PROFILES_UDP_ONLY_LOCALHOST if localhost else DDS_PROFILES_UDP_ONLY)

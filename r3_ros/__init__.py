"""ROS-side helpers shared by the r3 nodes and the `r3 run` client: message conversions,
heartbeats, a common main(). Helpers take a node; they are not nodes themselves.

Importing this package gives the process r3's Fast DDS profile (:data:`DDS_PROFILES`: UDP only, see
the file for why), unless the process was given a profile file of its own. It must happen before the
process's first DDS participant, which every r3 node and client does by importing r3_ros first.
"""

import os

from r3.graph.description import CONFIG_DIR

DDS_PROFILES = CONFIG_DIR / "fastdds.xml"
#: The same profile for a discovery range of LOCALHOST: for that range rmw_fastrtps adds transports
#: of its own to a profile's, shared memory among them; so the process asks for SUBNET and takes a
#: profile that keeps discovery on this host itself, as rmw_fastrtps does for LOCALHOST.
DDS_PROFILES_LOCALHOST = CONFIG_DIR / "fastdds_localhost.xml"
_PROFILES_ENV = "FASTDDS_DEFAULT_PROFILES_FILE"
_RANGE_ENV = "ROS_AUTOMATIC_DISCOVERY_RANGE"
#: A profile file given to this process that is not one of r3's (which children inherit from r3's
#: own processes: `r3 launch`, `r3 run`).
_USERS_OWN = {os.environ.get(_PROFILES_ENV), os.environ.get("FASTRTPS_DEFAULT_PROFILES_FILE")} - {
    None,
    "",
    str(DDS_PROFILES),
    str(DDS_PROFILES_LOCALHOST),
}
if not _USERS_OWN:
    # a child of an r3 process inherits SUBNET with the LOCALHOST profile, and keeps both
    if os.environ.get(_RANGE_ENV, "").upper() == "LOCALHOST" or os.environ.get(_PROFILES_ENV) == str(
        DDS_PROFILES_LOCALHOST
    ):
        os.environ[_RANGE_ENV] = "SUBNET"
        os.environ[_PROFILES_ENV] = str(DDS_PROFILES_LOCALHOST)
    else:
        os.environ[_PROFILES_ENV] = str(DDS_PROFILES)

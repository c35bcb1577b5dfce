"""ROS-side helpers shared by the r3 nodes and the `r3 run` client: message conversions,
heartbeats, a common main(). Helpers take a node; they are not nodes themselves.

Importing this package gives the process r3's Fast DDS profile (:data:`DDS_PROFILES`, see the file
for why), unless the process was given a profile file of its own. It must happen before the
process's first DDS participant, which every r3 node and client does by importing r3_ros first.
"""

import os

from r3.graph.description import CONFIG_DIR

DDS_PROFILES = CONFIG_DIR / "fastdds.xml"
if not (os.environ.get("FASTDDS_DEFAULT_PROFILES_FILE") or os.environ.get("FASTRTPS_DEFAULT_PROFILES_FILE")):
    os.environ["FASTDDS_DEFAULT_PROFILES_FILE"] = str(DDS_PROFILES)

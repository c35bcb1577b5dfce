"""ROS-side helpers shared by the r3 nodes and the `r3 run` client: message conversions,
heartbeats, a common main(). Helpers take a node; they are not nodes themselves."""

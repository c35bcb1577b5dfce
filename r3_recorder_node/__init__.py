"""r3_recorder_node: one rosbag2 bag per episode, written with rosbags."""

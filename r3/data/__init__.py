"""Episode data: rosbag2 IO with the r3_msgs types, dataset building, frame sampling."""

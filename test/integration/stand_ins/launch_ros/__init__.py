"""Stand-in for launch_ros: ``launch_ros.actions.Node`` records what it would start (see launch/)."""

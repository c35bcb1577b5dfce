"""r3_sim_node: the MuJoCo simulator behind the topics a real cell publishes."""

"""r3_suite_sim_node: the graph's simulator of any registered suite that brings its own."""

"""r3_packing_sim_node: the MuJoCo packing workcell, its simulated arm driver (MoveToPose) and
packing policy."""

"""The r3 node graph: topic names, node interfaces and parameters, the graph description, its supervisor."""

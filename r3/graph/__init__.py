"""The r3 node graph: topic names, node interfaces, the graph description and its supervisor."""

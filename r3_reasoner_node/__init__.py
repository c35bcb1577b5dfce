"""r3_reasoner_node: the high-level reasoner as the RunTask action."""

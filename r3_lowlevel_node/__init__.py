"""r3_lowlevel_node: the language-conditioned low-level policy as a FollowInstruction action."""

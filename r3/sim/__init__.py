"""MuJoCo scenes and Gymnasium environments with exact snapshot / restore."""

"""Self-checking exercises, one module per lab: ``from labkit.exercises import lab00``."""

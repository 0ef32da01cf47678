"""Self-checking exercises, one module per lab: ``from labkit.course.exercises import lab00``."""

"""thinwan: see and fix why interactive traffic feels slow over wide-area TCP."""

__version__ = "0.1.0"

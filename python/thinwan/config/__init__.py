"""Stage 1, configuration: scenario files (with ``inherits`` and the ``[lab]`` section)
and sweep files, read and validated. Imports nothing else of thinwan."""

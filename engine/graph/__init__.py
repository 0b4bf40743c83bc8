"""Traced graph mode: ``engine.function`` records a step into a graph IR (``ir``), optimises it (``passes``) and
replays it (``replay``) without running the function's Python."""

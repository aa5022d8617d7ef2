"""Doctest collection of the package: `mcp_framing.httpx1` needs `httpx` (the `mcp` 1.x line's
HTTP client), which the 2.x line's environment does not install; tests_mcp1/ runs it there."""

import importlib.util

collect_ignore = [] if importlib.util.find_spec("httpx") else ["mcp_framing/httpx1.py"]

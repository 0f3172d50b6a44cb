"""perflab: find the fastest way to serve an LLM on your own GPU/NPU hosts.

The package is split by concern: ``bench`` (load generator and metrics), ``sim`` (simulated engines),
``transport``/``remote``/``probe`` (hosts), ``engines`` (serve commands), ``runner``/``worker`` (run
lifecycle and queue), ``study`` (optimization studies), ``charts``/``report`` (presentation).
"""

__version__ = "0.1.0"

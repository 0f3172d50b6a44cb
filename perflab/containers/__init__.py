"""Engines run from container images (Docker or Podman) instead of the host's own installation.

- :mod:`~perflab.containers.image`: image references (grammar, bounds) and the vendors' images;
- :mod:`~perflab.containers.runtime`: the runtime's argv (run, stop, rm, inspect, pull, exec), the
  accelerator flags per vendor, container names and labels, the process that supervises a container;
- :mod:`~perflab.containers.launch`: one replica as a container (mounts, env, secrets file);
- :mod:`~perflab.containers.images`: pulling an image when missing, with progress and failure class;
- :mod:`~perflab.containers.control`: state, stop and remove, find by label, the engine version inside;
- :mod:`~perflab.containers.failures`: pull and runtime failures, classified from the runtime's words.
"""

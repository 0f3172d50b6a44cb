"""Why a container could not be pulled or started, read from the runtime's own words.

Each class has the messages Docker and Podman print for it (sources below); the first class in
:data:`CONTAINER_FAILURE_CLASSES` order that matches a line wins, and that line is the evidence
(Docker's "pull access denied …, repository does not exist or may require 'docker login'" is read as
not found, its likelier cause; the message keeps Docker's words). An
engine's own log lines never match these, so the runner checks them before the engine adapter's.

Sources: Podman 4.3.1 output recorded on a Debian 12 host (a registry answering ``manifest unknown``
and ``unauthorized: authentication required``, an unreachable registry, ``unresolvable CDI devices``);
Docker (moby) daemon and CLI messages: ``could not select device driver %q with capabilities: %v``
(daemon/errors.go), ``pull access denied for %s, repository does not exist or may require 'docker
login'`` (distribution/errors.go), ``manifest for %s not found: manifest unknown``, ``Conflict. The
container name %q is already in use by container %s`` (daemon/names.go), ``Cannot connect
to the Docker daemon at …. Is the docker daemon running?`` (CLI 28.2.2, recorded), ``unknown or
invalid runtime name``; the NVIDIA Container Toolkit's ``nvidia-container-cli: initialization error``.
"""

from __future__ import annotations

import re

from perflab.engines.failures import FailureInfo, condense

CONTAINER_FAILURE_CLASSES: dict[str, str] = {
    "container_runtime_missing": "no usable container runtime (docker or podman) on the host",
    "image_no_space": "the host ran out of disk space while storing the image",
    "image_not_found": "the image (or its tag) does not exist in the registry",
    "image_unauthorized": "the registry refused the image without credentials",
    "registry_unreachable": "the image's registry could not be reached",
    "container_gpu_unavailable": "the container runtime cannot pass the accelerators through",
    "container_name_in_use": "a container perflab did not start for this run holds the run's container name",
    "image_pull_failed": "the image could not be pulled",
}

# (class, pattern, only in a pull's output): a full disk or an unreachable host in an engine's own log
# means something else, so those are read only from what ``pull`` printed.
_SIGNATURES: tuple[tuple[str, re.Pattern[str], bool], ...] = tuple(
    (failure_class, re.compile(regex), pull_only)
    for failure_class, regex, pull_only in (
        (
            "container_runtime_missing",
            r"Cannot connect to the Docker daemon|Is the docker daemon running",
            False,
        ),
        ("image_no_space", r"no space left on device", True),
        (
            "image_unauthorized",
            r"unauthorized: authentication required|unauthorized: incorrect username",
            False,
        ),
        ("image_unauthorized", r"requested access to the resource is denied", False),
        ("image_not_found", r"manifest unknown|pull access denied for|name unknown: repository", False),
        ("image_not_found", r"manifest for \S+ not found|: image not known", False),
        ("registry_unreachable", r"pinging container registry|dial tcp|Get \"https?://[^\"]*/v2/", True),
        ("container_gpu_unavailable", r"could not select device driver|unresolvable CDI devices", False),
        ("container_gpu_unavailable", r"unknown or invalid runtime name|nvidia-container-cli: ", False),
        (
            "container_name_in_use",
            r"is already in use by container|the container name \S+ is already in use",
            False,
        ),
    )
)
_PULL_FALLBACK = "image_pull_failed"


def _failure(failure_class: str, line: str, subject: str) -> FailureInfo:
    summary = CONTAINER_FAILURE_CLASSES[failure_class]
    return FailureInfo(failure_class, f"{subject}: {summary}: {condense(line)}", line.rstrip())


def classify_container_failure(
    text: str, *, subject: str = "container", pulling: bool = False
) -> FailureInfo | None:
    """The container failure ``text`` (a runtime's output or an engine log; ``pulling``: the output of
    ``pull``) shows, or None."""
    lines = [line for line in text.splitlines() if line.strip()]
    first: dict[str, str] = {}
    for line in lines:
        for failure_class, pattern, pull_only in _SIGNATURES:
            if pull_only and not pulling:
                continue
            if failure_class not in first and pattern.search(line):
                first[failure_class] = line
    for failure_class in CONTAINER_FAILURE_CLASSES:
        if failure_class in first:
            return _failure(failure_class, first[failure_class], subject)
    return None


def classify_pull_failure(output: str, image: str) -> FailureInfo:
    """Why ``<runtime> pull image`` failed (``image_pull_failed`` with its last line when unknown)."""
    found = classify_container_failure(output, subject=f"pulling {image}", pulling=True)
    if found is not None:
        return found
    lines = [line for line in output.splitlines() if line.strip()]
    return _failure(_PULL_FALLBACK, lines[-1] if lines else "no output", f"pulling {image}")

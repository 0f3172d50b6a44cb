"""Making sure a run's image is on its host: inspect it, pull it when missing, report what it is.

The pull follows policy "missing": an image already present (e.g. built or loaded locally) is used as
it is; otherwise ``<runtime> pull`` runs with its output streamed line by line to the caller (the
run's progress), and a failed pull raises :class:`PullFailed` with its class (see
:mod:`perflab.containers.failures`). :class:`ImageInfo` (the image id and registry digests) goes into
the run's environment snapshot.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from perflab.containers.failures import classify_pull_failure
from perflab.containers.runtime import image_inspect_argv, pull_argv
from perflab.engines.failures import FailureInfo
from perflab.transport.base import Transport
from perflab.transport.errors import CommandTimeout

INSPECT_TIMEOUT_S = 60.0


class PullFailed(Exception):
    """The image could not be made available; ``info`` holds the failure class and message."""

    def __init__(self, info: FailureInfo) -> None:
        super().__init__(info.message)
        self.info = info


@dataclass(frozen=True)
class ImageInfo:
    """An image present on a host: its reference, local id and registry digests (``repo@sha256:…``)."""

    image: str
    image_id: str
    digests: tuple[str, ...]
    pulled: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "image": self.image,
            "image_id": self.image_id,
            "digests": list(self.digests),
            "pulled": self.pulled,
        }


def parse_inspect(image: str, text: str) -> ImageInfo:
    """``<id> <RepoDigests JSON>`` as :func:`image_inspect_argv` prints it."""
    image_id, _, digests = text.strip().partition(" ")
    found = json.loads(digests) if digests.strip() else []
    return ImageInfo(image, image_id, tuple(str(digest) for digest in (found or [])))


def image_info(transport: Transport, runtime: str, image: str) -> ImageInfo | None:
    """The image as present on the host, or None when the runtime does not have it."""
    result = transport.run(image_inspect_argv(runtime, image), timeout=INSPECT_TIMEOUT_S)
    if not result.ok or not result.stdout.strip():
        return None
    return parse_inspect(image, result.stdout)


def ensure_image(
    transport: Transport, runtime: str, image: str, *, timeout_s: float, on_line: Callable[[str], None]
) -> ImageInfo:
    """The image on the host, pulled first when missing (each output line goes to ``on_line``, which
    may raise to stop the pull); raises :class:`PullFailed`."""
    present = image_info(transport, runtime, image)
    if present is not None:
        return present
    lines: list[str] = []
    try:
        with transport.stream(pull_argv(runtime, image), timeout=timeout_s) as stream:
            for line in stream:
                lines.append(line)
                on_line(line)
            status = stream.exit_status
    except CommandTimeout:
        lines.append(f"the pull did not finish within {timeout_s:g} s")
        status = None
    if status != 0:
        raise PullFailed(classify_pull_failure("\n".join(lines[-200:]), image))
    pulled = image_info(transport, runtime, image)
    if pulled is None:
        raise PullFailed(classify_pull_failure(f"{runtime} pull ended but {image} is not present", image))
    return ImageInfo(pulled.image, pulled.image_id, pulled.digests, pulled=True)

"""Container image references: the grammar perflab accepts, and the engines' well-known images.

A reference follows the grammar of the distribution project's ``reference`` package, which Docker and
Podman both parse (``[registry[:port]/]path[:tag][@digest]``; lower-case path components joined by
``.``, ``_``, ``__`` or dashes; a tag of at most 128 word characters, dots and dashes; a name of at
most 255 characters). Nothing else is accepted, so a reference never starts with ``-`` and can never
be read as a runtime option.

:data:`IMAGE_PRESETS` lists the images the engines' vendors publish, with a tag the user edits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_NAME_LENGTH = 255
MAX_REFERENCE_LENGTH = 512
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_NAME = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(rf"^(?P<name>{_NAME})(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?$")


def check_image(value: str) -> str:
    """``value`` stripped, or ValueError saying why it is not an image reference."""
    text = value.strip()
    if not text:
        raise ValueError("image must not be empty")
    if len(text) > MAX_REFERENCE_LENGTH:
        raise ValueError(f"image is longer than {MAX_REFERENCE_LENGTH} characters")
    match = _REFERENCE.match(text)
    if match is None:
        raise ValueError(
            f"image {text[:80]!r} is not an image reference such as vllm/vllm-openai:v0.32.0 "
            "(lower-case name, optional registry, ':tag' and '@sha256:…' digest)"
        )
    if len(match.group("name")) > MAX_NAME_LENGTH:
        raise ValueError(f"image name is longer than {MAX_NAME_LENGTH} characters")
    return text


@dataclass(frozen=True)
class ImagePreset:
    """A vendor's image for one engine; ``tag`` is a starting point the user edits."""

    engine: str
    repository: str
    tag: str
    note: str

    @property
    def reference(self) -> str:
        return f"{self.repository}:{self.tag}"


# Repositories as the vendors publish them: Docker Hub (vLLM, SGLang), NVIDIA NGC (TensorRT-LLM),
# quay.io (vLLM-Ascend, per its installation guide) and Huawei's Ascend hub on SWR (MindIE). Tags are ones
# seen in use in public deployment scripts and reports (November 2026): vllm/vllm-openai:v0.32.0 (the
# release perflab's fallback tables follow; v0.33.0 is on PyPI, its image not yet seen in use),
# lmsysorg/sglang:v0.5.21, nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc20,
# quay.io/ascend/vllm-ascend:v0.19.1rc1. The preflight asks the image's own engine either way.
IMAGE_PRESETS: tuple[ImagePreset, ...] = (
    ImagePreset("vllm", "vllm/vllm-openai", "v0.32.0", "vLLM's OpenAI server image (CUDA)"),
    ImagePreset("sglang", "lmsysorg/sglang", "v0.5.21", "SGLang's image (CUDA)"),
    ImagePreset(
        "trtllm", "nvcr.io/nvidia/tensorrt-llm/release", "1.3.0rc20", "TensorRT-LLM release image (NGC)"
    ),
    ImagePreset(
        "vllm-ascend", "quay.io/ascend/vllm-ascend", "v0.19.1rc1", "vLLM-Ascend for Atlas A2 (Ubuntu)"
    ),
    ImagePreset(
        "mindie",
        "swr.cn-south-1.myhuaweicloud.com/ascendhub/mindie",
        "2.1.RC1-800I-A2-py311-openeuler24.03-lts",
        "MindIE for Atlas 800I A2 (openEuler)",
    ),
)


def presets_for(engine: str) -> list[ImagePreset]:
    """The well-known images of ``engine`` (none for an engine without a published image)."""
    return [preset for preset in IMAGE_PRESETS if preset.engine == engine]

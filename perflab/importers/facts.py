"""What an imported document states about its whole experiment, and one name per model.

Seed-style write-ups have an "Experimental Setup" with ``### Model``, ``### Hardware`` and
``### Engine Version`` sections (also in copies that lost their line breaks: ``### Model -
Qwen/Qwen3.5-35B-A3B ### Hardware NVIDIA H200 ### Engine Version - vLLM v0.17.1``).
:func:`document_facts` reads them: the model, the hardware sentence, the accelerator it names
(``NVIDIA A100 SXM 80GB``, ``Ascend 910B``), how many of them a node has ("8 × NVIDIA A100 …" → 8,
"A single NVIDIA H100 SXM GPU" → 1; unknown when the sentence gives no count), the engine versions by
engine name, and the figures the document multiplies by a replica count ("Total TPS: 3019.19x2": a
block measured one replica of two on the node). :func:`replicas_of` turns these into the replicas of
one imported configuration, so imported runs keep the node the write-up compared.

Model names (:func:`canonical_model`): a hub id (``Qwen/Qwen3-30B-A3B``) stays as it is. A name
without an organisation (``Qwen3-30B-A3B``) or a local path (``/models/Qwen3-30B-A3B``) is the
hub id whose last part is the same name (ignoring case), when exactly one such hub id is known —
from the same document or from runs already stored; otherwise it stays as written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

SECTION_CHARS = 300
_SECTION = re.compile(r"#{2,4}[ \t]*(Model|Hardware|Engine Versions?)\b[ \t]*:?", re.IGNORECASE)
_NEXT_HEADING = re.compile(r"#{1,6}[ \t]")
_MODEL_NAME = re.compile(r"[A-Za-z0-9~./][\w.\-/]*")
_ASCEND = re.compile(r"\bascend\s*(910[a-z0-9]*|310[a-z0-9]*)", re.IGNORECASE)
_NVIDIA = re.compile(
    r"\b((?:[ABHL]|GB|RTX\s?)\d{2,4}[A-Z]?)(\s+(?:SXM|PCIe|NVL)\d?)?(\s+\d{2,3}\s?GB)?\b", re.IGNORECASE
)
_NODE_COUNT = re.compile(r"(?:^|\s)(\d{1,3})\s*(?:×|Ã—|x|X|\*)\s*(?=[A-Za-z])")
_SINGLE = re.compile(r"\b(?:a\s+single|one|single)\b", re.IGNORECASE)
_REPLICATED = re.compile(r"(\d+\.\d+)\s?[x×](\d{1,2})\b")
_ENGINE_VERSION = re.compile(
    r"(vLLM[-\s]Ascend|vLLM|SGLang|TensorRT[-\s]LLM|MindIE)\s*:?\s*(v?\d[\w.+\-]*)", re.IGNORECASE
)
ENGINE_KEYS = {
    "vllm-ascend": "vllm-ascend",
    "vllm ascend": "vllm-ascend",
    "vllm": "vllm",
    "sglang": "sglang",
    "tensorrt-llm": "trtllm",
    "tensorrt llm": "trtllm",
    "mindie": "mindie",
}


@dataclass(frozen=True)
class DocumentFacts:
    """The experiment's model, hardware sentence, accelerator and engine versions, as stated."""

    model: str | None = None
    hardware: str | None = None
    accelerator: str | None = None
    accelerators: int | None = None
    engine_versions: dict[str, str] = field(default_factory=dict)
    replicated: dict[str, int] = field(default_factory=dict)

    def environment(self) -> dict[str, object]:
        """The run's environment snapshot for what the document states (empty when nothing)."""
        stated = {"hardware": self.hardware, "engine_versions": self.engine_versions or None}
        facts = {name: value for name, value in stated.items() if value}
        return {"source": "imported document", **facts} if facts else {}

    def only_engine(self) -> str | None:
        """The engine, when the document names exactly one."""
        return next(iter(self.engine_versions)) if len(self.engine_versions) == 1 else None


def _sections(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for match in _SECTION.finditer(text):
        name = match.group(1).lower().split()[0]
        if name in found:
            continue
        body = text[match.end() : match.end() + SECTION_CHARS]
        following = _NEXT_HEADING.search(body)
        found[name] = body[: following.start()] if following else body
    return found


def accelerator_name(hardware: str) -> str | None:
    """The accelerator a hardware sentence names: ``NVIDIA A100 SXM 80GB``, ``Ascend 910B``."""
    ascend = _ASCEND.search(hardware)
    if ascend:
        return f"Ascend {ascend.group(1).upper()}"
    nvidia = _NVIDIA.search(hardware)
    if nvidia:
        model, form, memory = nvidia.group(1), nvidia.group(2) or "", nvidia.group(3) or ""
        form = f" {form.strip().upper().replace('PCIE', 'PCIe')}" if form else ""
        memory = f" {memory.strip().upper().replace(' ', '')}" if memory else ""
        return f"NVIDIA {model.upper().replace(' ', '')}{form}{memory}"
    return None


def document_facts(text: str) -> DocumentFacts:
    """The setup a document states (all None/empty for a bare result file)."""
    sections = _sections(text)
    model = None
    model_text = sections.get("model", "").strip().lstrip("-*` ").strip()
    match = _MODEL_NAME.match(model_text)
    if match:
        model = match.group(0).rstrip("./")
    hardware_text = " ".join(sections.get("hardware", "").split()).lstrip("-* ").strip().rstrip(".")
    hardware = hardware_text or None
    versions: dict[str, str] = {}
    for found in _ENGINE_VERSION.finditer(sections.get("engine", "")):
        key = ENGINE_KEYS.get(" ".join(found.group(1).lower().split()).replace("- ", "-"))
        if key is not None:
            versions.setdefault(key, found.group(2))
    return DocumentFacts(
        model=model or None,
        hardware=hardware,
        accelerator=accelerator_name(hardware) if hardware else None,
        accelerators=node_accelerators(hardware) if hardware else None,
        engine_versions=versions,
        replicated={match.group(1): int(match.group(2)) for match in _REPLICATED.finditer(text)},
    )


def node_accelerators(hardware: str) -> int | None:
    """The accelerators a hardware sentence gives the node: ``8 × NVIDIA A100 …`` → 8, ``A single
    NVIDIA H100 SXM GPU`` → 1; None when it states no count (``NVIDIA A100 GPUs``)."""
    counted = _NODE_COUNT.search(hardware)
    if counted:
        return int(counted.group(1)) or None
    return 1 if _SINGLE.search(hardware) else None


def replicas_of(facts: DocumentFacts, result: dict[str, object], tp: int, dp: int) -> int:
    """Replicas of a configuration with ``tp × dp`` accelerators per replica behind an imported
    ``result``: the document's "N×" figure for one of its throughputs, else the node's accelerators ÷
    (tp × dp) when that is whole, else 1."""
    for name in ("total_token_throughput", "output_throughput", "request_throughput"):
        value = result.get(name)
        if isinstance(value, (int, float)) and f"{value:.2f}" in facts.replicated:
            return facts.replicated[f"{value:.2f}"]
    per_replica = tp * dp
    if facts.accelerators and facts.accelerators % per_replica == 0:
        return facts.accelerators // per_replica
    return 1


def _is_hub_id(name: str) -> bool:
    return name.count("/") == 1 and not name.startswith(("/", ".", "~")) and all(name.split("/"))


def canonical_model(name: str | None, known: Iterable[str | None]) -> str | None:
    """``name`` as the one hub id it stands for among ``known`` names (see the module's rule)."""
    if not name or _is_hub_id(name):
        return name
    last = name.rstrip("/").rsplit("/", 1)[-1].lower()
    matches = {
        other for other in known if other and _is_hub_id(other) and other.split("/")[1].lower() == last
    }
    return matches.pop() if len(matches) == 1 else name

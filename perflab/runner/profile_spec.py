"""``--profile`` values of ``python -m perflab run``: a preset name, or a one-line profile spec.

``SPEC := BASE[:KEY=VALUE,...]`` where BASE is a preset of :data:`perflab.profiles.PRESETS` (the keys
override it) or a dataset (``random``, ``sharegpt``, ``custom``) for a new profile. Keys:

====================  ==========================================================
``in``, ``out``       input / output tokens (random)
``n``                 number of prompts
``rate``              request rate in requests/s (``inf``: all at once)
``concurrency``       maximum concurrent requests
``burstiness``        gamma shape of arrivals (1 = Poisson)
``seed``, ``warmup``  dataset seed; warm-up requests left out of the statistics
``range``, ``prefix`` random range ratio; shared prefix tokens
``endpoint``          ``chat`` or ``completions``
``path``              dataset: stored dataset id, content hash or name, or a file
``name``, ``title``   how results are labelled
``ttft``, ``tpot``,   goodput SLOs in ms
``e2el``
``sweep``             load curve: ``rate:1/2/4/8`` or ``concurrency:1/4/16``
``flat``              ``no`` to run every sweep point (default: stop when throughput is flat)
``scale``             fraction of the prompts (and warm-up) to send
====================  ==========================================================

Example: ``random:in=1024,out=128,n=100``, ``short:n=50``, ``throughput:sweep=concurrency:16/64/256``.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from perflab.profiles import PRESETS, BenchmarkProfile, scaled

DATASETS = ("random", "sharegpt", "custom")
FIELD_KEYS: dict[str, str] = {
    "in": "input_len",
    "out": "output_len",
    "n": "num_prompts",
    "rate": "request_rate",
    "concurrency": "max_concurrency",
    "burstiness": "burstiness",
    "seed": "seed",
    "warmup": "warmup",
    "range": "range_ratio",
    "prefix": "prefix_len",
    "endpoint": "endpoint",
    "path": "dataset_ref",
    "name": "name",
    "title": "title",
}
GOODPUT_KEYS = ("ttft", "tpot", "e2el")
SWEEP_KINDS = {"rate": "request_rate", "concurrency": "max_concurrency"}
OTHER_KEYS = ("sweep", "flat", "scale")


class ProfileSpecError(ValueError):
    """A ``--profile`` value that does not describe a profile (the message says why)."""


def _pairs(spec: str, text: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not value.strip():
            raise ProfileSpecError(f"--profile {spec!r}: {item!r} is not KEY=VALUE")
        if key not in FIELD_KEYS and key not in GOODPUT_KEYS and key not in OTHER_KEYS:
            known = ", ".join([*FIELD_KEYS, *GOODPUT_KEYS, *OTHER_KEYS])
            raise ProfileSpecError(f"--profile {spec!r}: unknown key {key!r} (known: {known})")
        if key in pairs:
            raise ProfileSpecError(f"--profile {spec!r}: key {key!r} is given twice")
        pairs[key] = value.strip()
    return pairs


def _sweep(spec: str, text: str, flat: str | None) -> dict[str, Any]:
    kind, _, values = text.partition(":")
    if kind not in SWEEP_KINDS or not values:
        raise ProfileSpecError(f"--profile {spec!r}: sweep must be rate:V1/V2/... or concurrency:V1/V2/...")
    sweep: dict[str, Any] = {"kind": SWEEP_KINDS[kind], "values": values.split("/")}
    if flat is not None:
        if flat not in ("yes", "no"):
            raise ProfileSpecError(f"--profile {spec!r}: flat must be yes or no")
        sweep["stop_when_flat"] = flat == "yes"
    return sweep


def _describe(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def parse_profile(spec: str) -> BenchmarkProfile:
    """The profile a ``--profile`` value describes; :class:`ProfileSpecError` says what is wrong."""
    base, _, rest = spec.strip().partition(":")
    if base not in PRESETS and base not in DATASETS:
        raise ProfileSpecError(
            f"--profile {spec!r}: {base!r} is neither a preset ({', '.join(PRESETS)}) "
            f"nor a dataset ({', '.join(DATASETS)})"
        )
    pairs = _pairs(spec, rest)
    fields: dict[str, Any] = (
        _preset_fields(PRESETS[base]) if base in PRESETS else {"name": base, "title": base, "dataset": base}
    )
    for key, field in FIELD_KEYS.items():
        if key in pairs:
            fields[field] = pairs[key]
    goodput = {f"{key}_ms": pairs[key] for key in GOODPUT_KEYS if key in pairs}
    if goodput:
        fields["goodput"] = {**fields.get("goodput", {}), **goodput}
    if "sweep" in pairs:
        fields["sweep"] = _sweep(spec, pairs["sweep"], pairs.get("flat"))
    elif "flat" in pairs:
        raise ProfileSpecError(f"--profile {spec!r}: flat applies to a sweep only")
    try:
        profile = BenchmarkProfile.model_validate(fields)
        if "scale" in pairs:
            profile = scaled(profile, float(pairs["scale"]))
    except ValidationError as exc:
        raise ProfileSpecError(f"--profile {spec!r}: {_describe(exc)}") from None
    except ValueError as exc:
        raise ProfileSpecError(f"--profile {spec!r}: scale: {exc}") from None
    return profile


def _preset_fields(profile: BenchmarkProfile) -> dict[str, Any]:
    """A preset's fields as a mutable mapping (sweeps and SLOs as plain dicts)."""
    return profile.model_dump(mode="json", exclude_none=True)

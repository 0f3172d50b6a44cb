"""Whether compared results measure the same thing: Compare's warnings and the columns it does not judge.

A change against the baseline is a gain or a loss of the configuration only when both results served
the same model (its quantized variants count as the same: trying FP8 is what a study's quantization
stage does), the same workload — the same dataset, the same load (request rate, most requests in
flight) and prompts and outputs of about the same length (their means within :data:`LENGTH_RATIO`
of each other) — and each can be judged, as the study pages say
(:func:`perflab.runner.evidence.unjudged_reason`: it lasted long enough and did not ride an earlier
run's prefix cache). A run that differs from the baseline in one of these is warned about by name, and
its changes are shown but not coloured as better or worse. Engine versions that differ for the same
engine are said too, the changes still judged: comparing versions is a question the page answers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from perflab.runner.evidence import unjudged_reason
from perflab.views.compare import CompareRun, CompareSet
from perflab.views.run_detail import ProfileView

# Prompt or output lengths whose means differ by more than this factor are different workloads.
LENGTH_RATIO = 1.25
# Suffixes that name a quantized variant of a model (Qwen/Qwen3-8B-FP8 is Qwen/Qwen3-8B quantized).
_QUANTIZED = re.compile(
    r"[-_.](fp8|fp4|nvfp4|mxfp4|int4|int8|awq|gptq|gguf|bnb|w4a16|w8a8|w8a16|4bit|8bit|dynamic)$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Comparability:
    """What the page says before its table: ``warnings`` (results that do not measure the same thing,
    or cannot be judged), ``notes`` (what differs but still compares), the runs whose changes are not
    judged (``unjudged``), and the column mark of each result that cannot be judged (``marks``:
    ``(too short to judge)``, ``(rode an earlier run's prefix cache)``), by column name."""

    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    unjudged: frozenset[str] = frozenset()
    marks: Mapping[str, str] = field(default_factory=dict)


def base_model(model: str | None) -> str | None:
    """The model without its quantization suffixes (``Qwen/Qwen3-8B-FP8`` → ``qwen/qwen3-8b``)."""
    if not model:
        return None
    name = model.strip().rstrip("/").lower()
    while (stripped := _QUANTIZED.sub("", name)) != name:
        name = stripped
    return name


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _mean_per_request(result: Mapping[str, Any], total: str) -> float | None:
    tokens, completed = _number(result.get(total)), _number(result.get("completed"))
    return tokens / completed if tokens is not None and completed else None


def _dataset(result: ProfileView) -> str | None:
    """``sharegpt``, ``custom prompts.jsonl``: the dataset kind and file the result names (None when
    it does not say)."""
    dataset = result.result.get("dataset")
    if not isinstance(dataset, Mapping) or not isinstance(dataset.get("name"), str):
        return None
    path = dataset.get("path")
    return (
        f"{dataset['name']} {PurePosixPath(path).name}" if isinstance(path, str) and path else dataset["name"]
    )


def _load(result: ProfileView) -> str:
    """``request rate inf, max concurrency 64``: the load a result was measured at."""
    rate = _number(result.result.get("request_rate"))
    concurrency = _number(result.result.get("max_concurrency"))
    rate_text = "inf" if rate is None or rate == float("inf") else f"{rate:g}/s"
    return (
        f"request rate {rate_text}, max concurrency {concurrency:g}"
        if concurrency
        else f"request rate {rate_text}"
    )


def _lengths(result: ProfileView) -> str:
    """``~128 in / ~128 out tokens``: the mean prompt and output lengths per request."""
    means = [_mean_per_request(result.result, key) for key in ("total_input_tokens", "total_output_tokens")]
    return (
        " / ".join(f"~{mean:.0f} {side}" for mean, side in zip(means, ("in", "out"), strict=True) if mean)
        + " tokens"
    )


def _far(one: float | None, other: float | None) -> bool:
    """Whether two known mean lengths differ by more than :data:`LENGTH_RATIO`."""
    if not one or not other:
        return False
    return max(one, other) / min(one, other) > LENGTH_RATIO


def _workload_differs(result: ProfileView, baseline: ProfileView) -> bool:
    """Whether ``result`` was measured at another load or with prompts or outputs of other lengths."""
    if _load(result) != _load(baseline):
        return True
    return any(
        _far(_mean_per_request(result.result, key), _mean_per_request(baseline.result, key))
        for key in ("total_input_tokens", "total_output_tokens")
    )


def _listed(runs: list[tuple[CompareRun, str]]) -> str:
    return "; ".join(f"{run.name}: {what}" for run, what in runs)


def _differing(
    pairs: list[tuple[CompareRun, ProfileView]],
    baseline: tuple[CompareRun, ProfileView],
    differs: Callable[[CompareRun, ProfileView], bool],
    describe: Callable[[CompareRun, ProfileView], str],
) -> tuple[list[CompareRun], str]:
    """The runs that differ from the baseline by ``differs``, and every run described (baseline first)."""
    odd = [run for run, result in pairs if run is not baseline[0] and differs(run, result)]
    shown = [baseline, *((run, result) for run, result in pairs if run in odd)]
    return odd, _listed([(run, describe(run, result)) for run, result in shown])


def comparability(compare: CompareSet, *, profile: str, baseline_id: int) -> Comparability:
    """The warnings and notes for comparing the runs' ``profile`` results against run ``baseline_id``'s
    (see the module), and the columns not to judge."""
    pairs = [(run, result) for run in compare.runs if (result := run.result_for(profile)) is not None]
    anchor = next((pair for pair in pairs if pair[0].run.id == baseline_id), None)
    warnings: list[str] = []
    unjudged: set[str] = set()
    unusable = [(run, reason) for run, result in pairs if (reason := unjudged_reason(result.result))]
    if anchor is not None:
        base_run, base_result = anchor
        checks = (
            (
                "different models",
                lambda run, _: (
                    base_model(run.run.model) != base_model(base_run.run.model)
                    and None not in (base_model(run.run.model), base_model(base_run.run.model))
                ),
                lambda run, _: run.run.model or "model unknown",
            ),
            (
                "different workloads (load, prompt and output lengths)",
                lambda _, result: _workload_differs(result, base_result),
                lambda _, result: f"{result.title}: {_load(result)}, {_lengths(result)}",
            ),
            (
                "different datasets",
                lambda _, result: (
                    None not in (_dataset(result), _dataset(base_result))
                    and _dataset(result) != _dataset(base_result)
                ),
                lambda _, result: _dataset(result) or "dataset unknown",
            ),
        )
        for what, differs, describe in checks:
            odd, listed = _differing(pairs, anchor, differs, describe)
            if odd:
                unjudged.update(run.name for run in odd)
                warnings.append(
                    f"These results are of {what}: {listed}. Their changes against the baseline are shown "
                    "without colour, as neither better nor worse."
                )
        notes = _version_notes(pairs, base_run)
    else:
        notes = []
    if unusable:
        warnings.append(
            "Not judged, as the study pages say: "
            + "; ".join(f"{run.name}: {reason}" for run, reason in unusable)
            + ". Their changes are shown without colour."
        )
        unjudged.update(run.name for run, _ in unusable)
    marks = {run.name: unjudged_mark(reason) for run, reason in unusable}
    return Comparability(tuple(warnings), tuple(notes), frozenset(unjudged), marks)


def unjudged_mark(reason: str) -> str:
    """A column's mark from why its result cannot be judged: ``(too short to judge)`` from ``too short
    to judge: 1.2 s and …``."""
    return f"({reason.split(':', 1)[0]})"


def _version(run: CompareRun) -> str | None:
    version = (run.run.environment or {}).get("engine_version")
    return str(version) if version else None


def _version_notes(pairs: list[tuple[CompareRun, ProfileView]], baseline: CompareRun) -> list[str]:
    """A note when runs of the baseline's engine report another version of it than the baseline."""
    base = _version(baseline)
    other = [
        run
        for run, _ in pairs
        if run is not baseline and run.run.engine == baseline.run.engine and _version(run) not in (None, base)
    ]
    if base is None or not other:
        return []
    listed = _listed([(run, f"{run.run.engine} {_version(run)}") for run in (baseline, *other)])
    return [f"Engine versions differ ({listed}): the changes include the version's."]

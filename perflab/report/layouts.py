"""Aggregated or disaggregated, in a study's result: each stage's choice between them, from its runs.

:func:`study_layouts` gives every decided stage that weighed a prefill/decode split against an
aggregated layout its :class:`~perflab.study.layout_trade.LayoutChoice` — the layout chosen, the trade
of the best split against the best aggregated layout, the verdict between them or why a side met no SLO
— with each configuration's figures read from its launches as the study scored them (each run of the
tuning profile at its objective's point, a launch the mean of its runs, a configuration the mean of its
launches). :func:`layout_records` adds, in a study that made such a choice, each CSV row's layout and,
on the rows of the configurations a choice compares, the choice itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from perflab.report.launches import config_launches, repetitions
from perflab.study.layout_trade import Figures, LayoutChoice, configuration_figures, layout_choices, layout_of
from perflab.study.progress import StudyProgress
from perflab.study.types import CandidatePlan, StudyPlan


def study_layouts(progress: StudyProgress) -> tuple[LayoutChoice, ...]:
    """The study's choices between aggregated and disaggregated serving, stage by stage."""
    spec = progress.spec
    tuning = spec.tuning()

    def figures_of(candidate: CandidatePlan) -> Figures | None:
        if candidate.config is None:
            return None
        launches = [
            [
                [(result.sweep_point, result.result) for result in group]
                for group in repetitions(launch, tuning, tuning, spec.repeats)
            ]
            for launch in config_launches(progress.runs, progress.results, candidate.fingerprint)
        ]
        return configuration_figures(launches, spec.objective, spec.slos, candidate.config.gpus_needed)

    return layout_choices(progress.plan, progress.rules, figures_of)


def layout_records(
    records: Sequence[dict[str, Any]], choices: Sequence[LayoutChoice], plan: StudyPlan
) -> list[dict[str, Any]]:
    """The CSV rows of a study with ``choices``, each with its configuration's ``layout`` and, on the
    rows of a configuration that a choice compares, that choice's sentences (``layout_choice``); the rows
    as they are without any choice."""
    if not choices:
        return list(records)
    layouts = {
        candidate.fingerprint: layout_of(candidate.config)
        for candidate in plan.candidates()
        if candidate.config is not None
    }
    compared = {
        side.fingerprint: choice.text()
        for choice in choices
        for side in (choice.split, choice.aggregated)
        if side is not None and side.fingerprint is not None
    }
    return [
        {
            **row,
            "layout": layouts.get(row.get("fingerprint") or ""),
            "layout_choice": compared.get(row.get("fingerprint") or ""),
        }
        for row in records
    ]

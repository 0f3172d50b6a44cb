"""What the studies pages show, computed away from Streamlit: the list of studies, a study's id from
its URL, what its result depends on (its version: the page rebuilds the result when it changes, at most
every :data:`REDRAW_EVERY_S` while the study runs) and its runs in flight, the tables of a study's
result (its candidates with their states, baseline against optimized, the summary, a search's trials,
its launches — plain text cells, nothing drawn as HTML) with the words and columns they use explained,
the new-study form's stages or search template and help, and a spec built from the form or an uploaded
file."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import sqlalchemy as sa
import yaml
from sqlmodel import Session

from db import crud
from db.crud.studies import FINISHED_STUDY_STATUSES
from db.models import FINISHED_RUN_STATUSES, ProfileResult, Run, Study
from perflab import safe_yaml
from perflab.inventory import Inventory
from perflab.problems import syntax_problem
from perflab.profiles import BenchmarkProfile, scaled
from perflab.report.costs import cost_change_text, cost_text
from perflab.report.model import Figures, Report, SearchSection, StageSection, SummaryRow
from perflab.report.published import PublishedGain
from perflab.runner.evidence import MIN_COMPLETED, MIN_DURATION_S
from perflab.study.spec import SPEC_FORMATS, StudySpec, StudySpecError, parse_spec, spec_from_data
from perflab.views.formatting import format_time
from perflab.views.urlstate import BadParam, parse_id

# While a study runs, its page draws its result again at most this often (its runs' live lines are
# polled more often); a change of the study's status is drawn at once.
REDRAW_EVERY_S = 15.0

# The stages the form starts with: the seeds' usual order.
STAGES_TEMPLATE = """\
- name: Engine
  dimension: engine
  candidates: [vllm, sglang, trtllm]
- name: Quantization
  dimension: model
  candidates: [{model}-FP8]
- name: Parallelism
  candidates:
    - {{tp: 2, replicas: fill}}
- name: Max batched tokens
  dimension: max_num_batched_tokens
  candidates: [4096, 8192]
"""
# The form's search: the seeds' batching knobs and the parallelism layouts that fit the budget.
SEARCH_TEMPLATE = """\
- name: Batching and parallelism
  search:
    knobs:
      max_num_seqs: [64, 128, 256, 512]
      max_num_batched_tokens: [2048, 4096, 8192, 16384]
    parallelism: [{layouts}]
    budget: {{launches: {launches}}}
    screening: 0.25
    seed: 0
"""
METHODS = {
    "stages": "Stages: one dimension at a time on top of the best so far",
    "search": "Search: batching knobs and parallelism together (Optuna)",
}


def search_template(gpus: int | None) -> str:
    """The form's search stage: parallelism layouts that divide ``gpus`` (1, 2, 4, 8 when unknown), a
    budget of about a quarter of the space's launches."""
    sizes = [size for size in (1, 2, 4, 8) if gpus is None or (size <= gpus and gpus % size == 0)]
    layouts = ", ".join(f"{{tp: {size}}}" for size in sizes)
    return SEARCH_TEMPLATE.format(layouts=layouts, launches=max(4, 16 * len(sizes) // 4))


def stages_template(method: str, model: str, gpus: int | None) -> str:
    """The text the form's stages box starts with for ``method``."""
    return search_template(gpus) if method == "search" else STAGES_TEMPLATE.format(model=model)


def relaunches_help() -> str:
    """The form's help on launches per configuration, by the planner's rules (the confidence of every
    verdict, the most launches a close call may take)."""
    defaults = StudySpec.model_fields
    confidence = defaults["confidence"].default * 100
    return (
        "Launches of each configuration before it is first judged (launch-to-launch noise). Whatever "
        f"this is, every decision is a verdict with a {confidence:g} % interval: the study measures its "
        "own spread (its references are launched more than once), and a close call is launched again, "
        f"up to {defaults['max_launches'].default} launches, until it is decided. More launches cost GPU "
        "time and catch smaller gains."
    )


# A simulated first host makes the form a demo: a tenth of each preset's prompts (the study takes
# minutes instead of the better part of an hour on the simulator's timings).
SIMULATED_SCALE = 0.1
SCALE_HELP = (
    f"The form starts at {SIMULATED_SCALE:g} when the first host is simulated (a quick demo). Whatever the "
    f"scale, every benchmark runs at least {MIN_DURATION_S:g} s of the engine's time and {MIN_COMPLETED} "
    "requests, so that it can be judged: a benchmark shorter than that is sent again in rounds of fresh "
    "prompts of the scaled count."
)


def scale_warnings(scale: float, profiles: Sequence[BenchmarkProfile]) -> list[str]:
    """What the form says, before the study is created, of the profiles at ``scale``. None can end too
    short to judge: every benchmark is sized to the floor of evidence (rounds of fresh prompts;
    :func:`perflab.runner.evidence.sized_benchmark` censors only past a hundred thousand requests a
    second). A profile whose rounds hold a single prompt is still worth a word: each round then
    measures one request alone, not the profile's load."""
    warnings = []
    for profile in profiles:
        if scaled(profile, scale).num_prompts == 1 and profile.num_prompts > 1:
            warnings.append(
                f"{profile.title}: at a scale of {scale:g} each round sends 1 of its {profile.num_prompts} "
                "prompts: its figures measure one request at a time, not the profile's load"
            )
    return warnings


@dataclass(frozen=True)
class FormDefaults:
    """What the new-study form starts with."""

    name: str
    scale: float
    gpus_help: str = "0 = the node of the smallest host (every configuration is filled to it with replicas)."
    gpus: int | None = None


def form_defaults(inventory: Inventory, model: str) -> FormDefaults:
    """The form's name (``Qwen3-8B on local-sim``), prompt scale and budget help for its first host."""
    names = inventory.names()
    short_model = model.rstrip("/").rsplit("/", 1)[-1]
    if not names:
        return FormDefaults(name=f"{short_model} study", scale=1.0)
    first = inventory.get(names[0])
    node = first.simulate.count if first.simulate is not None else None
    gpus_help = FormDefaults.gpus_help
    if node is not None:
        gpus_help = (
            f"0 = the node of the smallest host ({node} on {first.name}): the baseline and every "
            "candidate use that many accelerators, filled with replicas, so node totals compare. "
            "1 = a single-GPU study."
        )
    return FormDefaults(
        name=f"{short_model} on {first.name}",
        scale=SIMULATED_SCALE if first.simulated else 1.0,
        gpus_help=gpus_help,
        gpus=node,
    )


# The study page's words, explained where they appear: in its legend and its columns' tooltips.
TOTAL_TPS_HELP = (
    "Total token throughput: prompt and generated tokens per second that the whole node served over the "
    "benchmark (vLLM bench's 'Total token throughput'). 6421.15×8 is 6421.15 per replica on 8 replicas: "
    "51369.20 for the node."
)
TERMS: dict[str, str] = {
    "Total TPS": TOTAL_TPS_HELP,
    "launch": "one start of the engine with a configuration (a run of the study); a configuration launched "
    "several times shows how much a fresh start changes its figures.",
    "run": "one benchmark of the tuning profile on a launch (Runs per launch); a launch's value is the mean "
    "of its runs, a configuration's the mean of its launches.",
    "CV": "coefficient of variation: the standard deviation as a percentage of the mean. 'CV 3 % per "
    "launch' means one launch's value typically lands within about 3 % of the configuration's mean.",
    "df": "degrees of freedom: how many independent launch-to-launch differences a spread rests on. On 1 "
    "df it is a rough guess and the intervals are very wide; they narrow as launches accumulate.",
    "spread of the verdicts": "the launch-to-launch CV every verdict uses, pooled over every configuration "
    "measured on two launches or more (and over an earlier study's, while today's launches agree with it).",
    "look": "a candidate is judged after each of its launches: each judgement is a look ('look 1 of 4' is "
    "the first of at most 4). The bar a gain must clear is set so that judging it several times keeps no "
    "more no-gain candidates than judging once would.",
    "± interval": "'+4.1 % ± 1.3 %, 95 %, 3 vs 2' is the gain over the configuration it is judged against, "
    "its 95 % confidence interval, and how many launches of each side it rests on.",
    "within noise": "neither kept nor beaten: the interval still straddles the smallest gain kept when the "
    "candidate's launches ran out or its estimate was too weak to ever reach the bar.",
    "detectable gain": "the smallest gain this study keeps 80 % of the time at its spread. It is "
    "re-estimated after every launch, so it moves while the study runs and firms up as launches accumulate.",
}
FIRMING_UP = (
    "While the study runs, the spread and the smallest detectable gain are re-estimated after every launch: "
    "they move as launches accumulate and settle as the spread's degrees of freedom grow."
)


CHART_TITLES = {
    "comparison": "Baseline vs optimized",
    "stages": "Per stage",
    "load_curve": "Load curve",
    "search_convergence": "Search convergence",
    "search_pareto": "Search Pareto front",
    "search_importance": "Which knobs mattered",
}


def chart_title(name: str) -> str:
    """A study chart's tab title by its name (:func:`perflab.report.charts.report_charts`):
    ``comparison`` → ``Baseline vs optimized``, ``load_curve_2`` → ``Load curve 2``, ``search_pareto_3`` →
    ``Search Pareto front (stage 3)``."""
    stem, _, number = name.rpartition("_")
    if stem in CHART_TITLES and number.isdigit():
        return f"{CHART_TITLES[stem]} ({'stage ' if stem.startswith('search') else ''}{number})"
    return CHART_TITLES.get(name, name.replace("_", " ").capitalize())


def terms_markdown() -> str:
    """The legend of the study page: each term in bold, then what it means."""
    return "\n".join(f"- **{term}**: {meaning}" for term, meaning in TERMS.items())


def candidate_help(unit: str) -> dict[str, str]:
    """Tooltips of a stage's candidates table, by column."""
    return {
        "Decision": "What the stage decided about the candidate (winner, not better, within noise, …).",
        f"Mean ({unit})" if unit else "Mean": "The study's objective averaged over the candidate's launches "
        "(each launch the mean of its runs), for the whole node: the figure its verdict compares.",
        "Launches": "How many launches the figures of this row are the mean of.",
        "Total TPS": TOTAL_TPS_HELP,
        "Note": "Why: the verdict against the best configuration before the stage (gain, 95 % interval, "
        "launches compared) and how it was reached (see 'What the words on this page mean').",
    }


SUMMARY_HELP: dict[str, str] = {
    "Best candidate against the baseline": "The stage's best measured candidate against the baseline, "
    "whether or not the stage kept it ('not kept': the stage kept nothing).",
    "Not kept (against the best before it)": "Why the stage kept nothing: its best candidate's verdict "
    "against the best configuration before the stage.",
}
LAUNCH_HELP: dict[str, str] = {
    "Launch": "first: a configuration's first measurement; again: a further launch of it; validation: the "
    "validation profiles alone.",
    "Why": "Why the study launched it (again).",
    "Runs": "Complete runs of the tuning profile on this launch.",
    "Mean": "The launch's own value of the objective (the mean of its runs).",
}


def parse_study_id(raw: str | None) -> int:
    """The study id of ``?study=ID``; raises BadParam with a sentence a user can act on."""
    if raw is None or not raw.strip():
        raise BadParam("No study given: open one on the Studies page, or add ?study=ID to the address.")
    return parse_id(raw, "study", "study", 3)


def study_version(session: Session, study_id: int) -> str | None:
    """What a study's result depends on, in one small query's worth of text: its status and last
    change, and each of its runs' status, profiles and stored results (None for an unknown study). The
    study page rebuilds the result only when this changes."""
    study = session.execute(sa.select(Study.status, Study.updated_at).where(Study.id == study_id)).first()
    if study is None:
        return None
    results = (
        sa.select(ProfileResult.run_id, sa.func.count().label("results"))
        .group_by(ProfileResult.run_id)
        .subquery()
    )
    runs = session.execute(
        sa.select(Run.id, Run.status, sa.func.coalesce(results.c.results, 0))
        .outerjoin(results, results.c.run_id == Run.id)
        .where(Run.study_id == study_id)
        .order_by(Run.id)
    ).all()
    return "|".join(
        [study.status, str(study.updated_at), *(f"{run}:{status}:{count}" for run, status, count in runs)]
    )


def redraw_due(shown: str, current: str | None, shown_for_s: float) -> bool:
    """Whether a page that drew a study's result at version ``shown``, ``shown_for_s`` seconds ago,
    draws it again now that the study stands at ``current`` (None: it was deleted): at once when its
    status changed (it finished, paused, failed or is gone); when only its runs moved on, once the
    drawn result is :data:`REDRAW_EVERY_S` old, so a study whose runs end every few seconds (a
    time-scaled simulated host) does not rebuild its tables and charts at every poll."""
    if current == shown:
        return False
    if current is None or _status_of(current) != _status_of(shown):
        return True
    return shown_for_s >= REDRAW_EVERY_S


def _status_of(version: str) -> str:
    """The study's status in a :func:`study_version` text (its first field)."""
    return version.split("|", 1)[0]


def active_runs(session: Session, study_id: int) -> list[int]:
    """The study's runs a worker holds or will (queued, launching, ready, benchmarking), oldest first."""
    query = (
        sa.select(Run.id)
        .where(Run.study_id == study_id, Run.status.not_in(FINISHED_RUN_STATUSES))
        .order_by(Run.id)
    )
    return list(session.execute(query).scalars())


def studies_table(session: Session) -> pd.DataFrame:
    """One row per study, newest first."""
    rows = []
    for study in crud.list_studies(session):
        state = study.state or {}
        rows.append(
            {
                "Study": study.id,
                "Name": study.name,
                "Status": study.status,
                "Phase": state.get("phase", ""),
                "Model": (study.spec or {}).get("model"),
                "Hosts": ", ".join((study.spec or {}).get("hosts") or []),
                "Best": best_text(state.get("best"), finished=study.status in FINISHED_STUDY_STATUSES),
                "Created": format_time(study.created_at),
            }
        )
    columns = ["Study", "Name", "Status", "Phase", "Model", "Hosts", "Best", "Created"]
    return pd.DataFrame(rows, columns=columns)


def best_text(best: str | None, *, finished: bool) -> str | None:
    """A study's best configuration as its row shows it: ``SGLang``, or ``SGLang (so far)`` while
    the study is not finished."""
    if not best:
        return None
    return best if finished else f"{best} (so far)"


def shown_value(value: float | None) -> float | None:
    """An objective value for the table: two decimals, or three significant digits below 1 (a cost of
    0.0042 per 1M tokens is not 0.0)."""
    if value is None:
        return None
    return round(value, 2) if abs(value) >= 1 else float(f"{value:.3g}")


def candidates_table(stage: StageSection, unit: str) -> pd.DataFrame:
    """A stage's candidates: label, state, mean objective value and launches, run, note."""
    rows = [
        {
            "Candidate": candidate.label,
            "Decision": candidate.state or "waiting",
            f"Mean ({unit})" if unit else "Mean": shown_value(candidate.value),
            "Launches": candidate.launches,
            "Total TPS": candidate.figures.tps_text if candidate.figures else None,
            "Run": f"/run?run={candidate.run_id}" if candidate.run_id else None,
            "Note": candidate.note,
        }
        for candidate in stage.candidates
    ]
    return pd.DataFrame(rows)


def _figures_text(figures: Figures | None) -> str:
    if figures is None:
        return "not measured"
    sample = f" ({figures.sample_text})" if figures.sample_text else ""
    return f"Total TPS {figures.tps_text}, mean TPOT {figures.tpot_text} ms{sample}"


def _gain_text(gain: PublishedGain | None, decimals: int, missing: str | None = None) -> str | None:
    """A gain as the report prints it (its published figure and interval)."""
    return gain.text(decimals) if gain is not None else missing


def comparison_table(report: Report) -> pd.DataFrame:
    """Baseline against optimized, per case: throughput rows, then cost rows."""
    rows = [
        {
            "Case": row.case,
            "Baseline": _figures_text(row.baseline),
            "Optimized": _figures_text(row.optimized),
            "Change": _gain_text(row.gain, report.decimals),
        }
        for row in report.comparison
    ]
    rows += [
        {
            "Case": f"{row.case} cost" + (f" at {row.at}" if row.at else ""),
            "Baseline": cost_text(row.baseline),
            "Optimized": cost_text(row.optimized),
            "Change": cost_change_text(row, report.decimals),
        }
        for row in report.costs
        if row.baseline is not None or row.optimized is not None
    ]
    return pd.DataFrame(rows, columns=["Case", "Baseline", "Optimized", "Change"])


def summary_table(report: Report) -> pd.DataFrame:
    """The Summary of Optimization Options: one figure per column, each saying what it is against; a
    stage that kept nothing says so, and its best candidate's figure against the baseline says it was
    not kept."""
    column = "Cost change kept" if report.lower_is_better else "Throughput improvement kept"
    rows = [
        {
            "Optimization option": row.option,
            column: _gain_text(row.improvement, report.decimals, "nothing kept"),
            "Best candidate against the baseline": _versus_baseline(row, report.decimals),
            "Not kept (against the best before it)": row.note,
        }
        for row in report.summary
    ]
    return pd.DataFrame(rows, columns=["Optimization option", column, *SUMMARY_HELP])


def _versus_baseline(row: SummaryRow, decimals: int) -> str | None:
    """``+13.7% ± 4.1%`` (its published gain), or ``+13.7% (not kept)`` for the best candidate of a
    stage that kept nothing."""
    text = _gain_text(row.versus_baseline, decimals)
    if text is None or row.improvement is not None:
        return text
    return f"{text} (not kept)"


def trials_table(search: SearchSection) -> pd.DataFrame:
    """A search's trials: parameters, state, screening value, mean over launches, note."""
    rows = [
        {
            "Trial": trial.number,
            "Configuration": " · ".join(f"{name}={value}" for name, value in sorted(trial.params.items())),
            "State": trial.state,
            "Screening": shown_value(trial.screening),
            "Mean": shown_value(trial.mean),
            "Launches": len(trial.samples),
            "Note": trial.note,
        }
        for trial in search.trials
    ]
    return pd.DataFrame(rows)


def launches_table(report: Report) -> pd.DataFrame:
    """Every launch of the study: run, configuration, why, status, complete runs and their mean."""
    rows = [
        {
            "Run": f"/run?run={launch.run_id}",
            "Configuration": launch.configuration,
            "Launch": launch.kind,
            "Why": launch.reason,
            "Status": launch.status,
            "Runs": launch.runs,
            "Mean": shown_value(launch.value),
            "Marks": ", ".join(launch.marks),
        }
        for launch in report.launches
    ]
    return pd.DataFrame(rows)


def spec_from_form(
    *,
    name: str,
    model: str,
    hosts: Sequence[str],
    engine: str,
    tuning_profile: str | Mapping[str, Any],
    validation_profiles: Sequence[str | Mapping[str, Any]],
    stages_yaml: str,
    objective: str,
    scale: float,
    min_success_pct: float,
    min_gain_pct: float,
    baseline_extra: dict[str, Any] | None = None,
    gpus: int = 0,
    repeats: int = 1,
    relaunches: int = 1,
) -> StudySpec:
    """The spec the new-study form describes; raises StudySpecError (the stages' YAML by line)."""
    try:
        stages = safe_yaml.load(stages_yaml).data
    except yaml.YAMLError as error:
        raise StudySpecError([syntax_problem("stages", error, SPEC_FORMATS)]) from None
    data = {
        "name": name,
        "model": model,
        "hosts": list(hosts),
        "baseline": {"engine": engine, **(baseline_extra or {})},
        "tuning_profile": tuning_profile,
        "validation_profiles": list(validation_profiles),
        "stages": stages,
        "objective": objective,
        "scale": scale,
        "min_success_pct": min_success_pct,
        "min_gain_pct": min_gain_pct,
        "repeats": repeats,
        "relaunches": relaunches,
    }
    if gpus:
        data["gpus"] = gpus
    return spec_from_data(data, name="new study")


def spec_from_upload(name: str, content: bytes) -> StudySpec:
    """An uploaded spec file; raises StudySpecError naming the file and line."""
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        raise StudySpecError([f"{name}: not a UTF-8 text file"]) from None
    return parse_spec(text, name=name)

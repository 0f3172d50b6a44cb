"""What ``python -m perflab run`` prints when a run ends: its outcome, then each profile's result
block (vllm-bench text) headed by why it cannot be judged when it cannot (too short, or riding an
earlier run's prefix cache: :mod:`perflab.runner.evidence`), or the same as one JSON object."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Engine

from db import crud
from db.models import Run
from db.session import new_session
from perflab.engines.registry import display_name
from perflab.runner.evidence import unjudged_reason


def run_json(engine: Engine, run_id: int) -> dict[str, Any]:
    """The run's facts and every profile result (with its sweep point), JSON-able."""
    with new_session(engine) as session:
        run = crud.require_run(session, run_id=run_id)
        results = crud.list_profile_results(session, run_id=run_id)
        samples = crud.count_samples(session, run_id=run_id)
    return {
        "run_id": run.id,
        "status": run.status,
        "host": run.host_name,
        "simulated": run.simulated,
        "accelerator": run.accelerator,
        "engine": run.engine,
        "model": run.model,
        "knobs": run.knobs_summary,
        "replicas": run.replicas,
        "gpu_ids": run.gpu_ids,
        "failure_class": run.failure_class,
        "failure_message": run.failure_message,
        "serve_commands": run.serve_commands,
        "bench_commands": run.bench_commands,
        "environment": run.environment,
        "timestamps": {
            name: value.isoformat() if value is not None else None
            for name, value in (
                ("created", run.created_at),
                ("launching", run.launching_at),
                ("ready", run.ready_at),
                ("benchmarking", run.benchmarking_at),
                ("finished", run.finished_at),
            )
        },
        "samples": samples,
        "results": [
            {"profile": result.profile_name, "sweep_point": result.sweep_point, "result": result.result}
            for result in results
        ],
    }


def outcome_line(run: Run) -> str:
    """``run 7 done: vLLM Qwen/Qwen3-8B on gpu-a (tp=4 ×2)`` or the failure with its class."""
    engine = display_name(run.engine) if run.engine else run.engine
    head = f"run {run.id} {run.status}: {engine} {run.model} on {run.host_name} ({run.knobs_summary})"
    if run.status == "failed":
        return f"{head}\n  {run.failure_class}: {run.failure_message}"
    return head


def run_text(engine: Engine, run_id: int) -> str:
    """The outcome line and, per stored result, a heading, why it cannot be judged (when it cannot) and
    its text block."""
    with new_session(engine) as session:
        run = crud.require_run(session, run_id=run_id)
        results = crud.list_profile_results(session, run_id=run_id)
    parts = [outcome_line(run)]
    for result in results:
        heading = result.profile.get("title") or result.profile_name
        if result.sweep_point:
            heading += f" ({result.sweep_point['kind']} = {result.sweep_point['value']:g})"
        unjudged = unjudged_reason(result.result)
        warning = f"Warning: {unjudged}\n" if unjudged else ""
        parts.append(f"\n{heading}\n{warning}{result.text_block or ''}".rstrip("\n"))
    return "\n".join(parts) + "\n"

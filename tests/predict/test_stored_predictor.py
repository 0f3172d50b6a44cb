"""The search's predictor over a study's stored predictions: AIConfigurator's figures answer as node
totals; a failed estimate, a configuration not covered and one not predicted yet answer None (the
search launches them), and the one not predicted yet is handed to the background thread once."""

from __future__ import annotations

import pytest

from perflab.engines import EngineConfig
from perflab.predict.figures import PredictedFigures, Prediction
from perflab.predict.store import STATE_KEY
from perflab.study.stored_predictions import stored_predictor, take_wanted

FIGURES = PredictedFigures(
    output_tps_per_gpu=900.0, requests_per_s_per_gpu=3.0, mean_tpot_ms=20.0, mean_ttft_ms=150.0
)


def _config(**knobs: object) -> EngineConfig:
    return EngineConfig(engine="vllm", model="Qwen/Qwen3-8B", **knobs)


def _state(entries: dict[str, dict]) -> dict:
    return {STATE_KEY: {"source": "AIConfigurator 0.12.0", "configs": entries}}


def test_stored_figures_answer_as_node_totals_and_failures_as_unknown() -> None:
    predicted, failed, uncovered, unseen = (
        _config(tp=2),
        _config(tp=4),
        _config(tp=8),
        _config(max_num_seqs=8),
    )
    state = _state(
        {
            predicted.fingerprint(): Prediction(2, 512, 128, "vLLM 0.24.0", 14.0, FIGURES).to_dict(),
            failed.fingerprint(): Prediction(
                4, 512, 128, "vLLM 0.24.0", 120.0, error="AIConfigurator gave no estimate within 120 s"
            ).to_dict(),
            uncovered.fingerprint(): {"not_covered": "no tables for this accelerator"},
        }
    )
    take_wanted(7)
    lookup = stored_predictor(7, state)

    found = lookup(predicted)
    assert found is not None and found.infeasible is None
    assert found.source == "AIConfigurator (vLLM 0.24.0 tables)"
    assert found.values["output_throughput"] == pytest.approx(1800.0)
    assert found.values["total_token_throughput"] == pytest.approx(6.0 * (512 + 128))
    assert found.values["mean_tpot_ms"] == pytest.approx(20.0)
    # a timeout is not a verdict on the configuration: the search launches it
    assert lookup(failed) is None and lookup(uncovered) is None and lookup(unseen) is None
    assert take_wanted(7) == {unseen.fingerprint(): unseen}
    assert take_wanted(7) == {}


def test_a_study_without_predictions_wants_nothing_predicted() -> None:
    state = {STATE_KEY: {"unavailable": "AIConfigurator is not installed"}}
    take_wanted(8)
    assert stored_predictor(8, state)(_config(tp=2)) is None
    assert take_wanted(8) == {}

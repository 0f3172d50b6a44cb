"""The Launch page's model: form → config, the live command, profiles, queuing and re-running."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from sqlmodel import Session

from db import crud
from perflab.engines import EngineConfig, UnsupportedKnob
from perflab.engines.preflight import HelpCache
from perflab.inventory import HostConfig
from perflab.profiles import PRESETS, BenchmarkProfile
from perflab.views import launch
from perflab.views.commands import command_preview, stored_command_preview
from perflab.views.run_detail import run_view

SIM_HOST = HostConfig(name="local-sim", transport="local", simulate={"accelerator": "H100", "count": 8})


def test_form_becomes_a_config() -> None:
    form = launch.ConfigForm(
        engine="vllm",
        model=" Qwen/Qwen3-32B ",
        tp=2,
        replicas=2,
        kv_cache_dtype="fp8",
        max_num_seqs=256,
        enable_prefix_caching="off",
        speculative_config='{"method": "mtp", "num_speculative_tokens": 2}',
        extra_args="--enforce-eager --served-model-name 'my model'",
        env="HF_HOME=/data/hf\n\nVLLM_LOGGING_LEVEL=DEBUG",
        gpu_ids="0, 1 2,3",
    )
    config = launch.build_config(form)
    assert config.model == "Qwen/Qwen3-32B" and config.kv_cache_dtype == "fp8" and config.quantization is None
    assert config.enable_prefix_caching is False and config.enable_chunked_prefill is None
    assert config.speculative_config == {"method": "mtp", "num_speculative_tokens": 2}
    assert config.extra_args == ("--enforce-eager", "--served-model-name", "my model")
    assert config.env == {"HF_HOME": "/data/hf", "VLLM_LOGGING_LEVEL": "DEBUG"}
    assert config.gpu_ids == (0, 1, 2, 3)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"model": "  "}, "model: enter a model id"),
        ({"env": "JUST_A_NAME"}, "env: line 1 'JUST_A_NAME' is not NAME=value"),
        ({"gpu_ids": "0;1"}, "gpu ids: '0;1' must be GPU indexes"),
        ({"extra_args": "--x 'open"}, "extra args: cannot split"),
        ({"speculative_config": "[1]"}, "speculative config: expected a JSON object"),
        ({"gpu_memory_utilization": 1.5}, "gpu memory utilization: Input should be less than or equal to 1"),
    ],
)
def test_bad_form_values_name_their_field(changes: dict[str, object], message: str) -> None:
    form = dataclasses.replace(launch.ConfigForm(engine="vllm", model="m"), **changes)
    with pytest.raises(launch.LaunchInputError) as caught:
        launch.build_config(form)
    assert str(caught.value).startswith(message)


def test_command_preview_and_unsupported_knob() -> None:
    preview = command_preview(EngineConfig(engine="sglang", model="Qwen/Qwen3-8B", tp=2))
    assert preview.command == "python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp-size 2"
    bad = command_preview(EngineConfig(engine="mindie", model="Qwen3-8B", quantization="fp8"))
    assert (
        bad.command is None
        and bad.knob == "quantization"
        and bad.error.startswith("MindIE has no quantization")
    )
    assert stored_command_preview(None) is None
    stale = stored_command_preview({"engine": "vllm", "model": "m", "tp": 0})
    assert (
        stale is not None
        and stale.error is not None
        and stale.error.startswith("the stored config is not valid")
    )


def test_profiles() -> None:
    choices = launch.preset_choices()
    assert len(choices) == len(PRESETS)
    assert "Short Prompt (random 128→4, 1000 prompts)" in choices
    assert "Throughput Profile (random 1024→128, 1000 prompts, concurrency 512, 1000 req/s)" in choices
    custom = launch.custom_profile(
        launch.CustomProfileForm(name="My Load", input_len=64, output_len=8, num_prompts=5, request_rate=2.0)
    )
    assert (custom.name, custom.title, custom.dataset, custom.request_rate) == (
        "my-load",
        "My Load",
        "random",
        2.0,
    )
    stored = launch.custom_profile(
        launch.CustomProfileForm(
            name="x", dataset="stored", dataset_fields={"dataset": "custom", "dataset_ref": "ab" * 32}
        )
    )
    assert (stored.dataset, stored.dataset_ref, stored.input_len) == ("custom", "ab" * 32, None)
    with pytest.raises(launch.LaunchInputError, match="dataset: pick an uploaded dataset"):
        launch.custom_profile(launch.CustomProfileForm(name="x", dataset="stored"))
    with pytest.raises(
        launch.LaunchInputError, match="num prompts: Input should be greater than or equal to 1"
    ):
        launch.custom_profile(launch.CustomProfileForm(name="x", num_prompts=0))
    scaled = launch.scale_profiles([PRESETS["short"]], 0.02)
    assert scaled[0].num_prompts == 20 and launch.scale_profiles([PRESETS["short"]], 1.0) == [
        PRESETS["short"]
    ]
    frame = launch.profiles_frame(scaled, "m")
    assert frame.iloc[0]["vllm bench serve"].startswith("vllm bench serve --model m --backend openai-chat")


def test_queue_and_rerun(db_session: Session) -> None:
    config = EngineConfig(engine="vllm", model="Qwen/Qwen3-8B", tp=2)
    with pytest.raises(launch.LaunchInputError, match="pick at least one benchmark profile"):
        launch.queue_run(db_session, host=SIM_HOST, config=config, profiles=[])
    with pytest.raises(UnsupportedKnob):
        launch.queue_run(
            db_session,
            host=SIM_HOST,
            config=EngineConfig(engine="mindie", model="m", quantization="fp8"),
            profiles=[PRESETS["short"]],
        )
    assert crud.list_runs(db_session).total == 0
    crud.record_probe(
        db_session,
        name="local-sim",
        reachable=True,
        probe={
            "host": "local-sim",
            "simulated": True,
            "python": {"command": "python3"},
            "probed_at": "2025-01-01T00:00:00Z",
            "duration_s": 1.0,
            "accelerators": [{"index": 0, "vendor": "nvidia", "name": "NVIDIA H100 80GB HBM3"}],
        },
    )
    run = launch.queue_run(
        db_session,
        host=SIM_HOST,
        config=config,
        profiles=[PRESETS["short"]],
        queued_by="ana",
        label="  first  ",
    )
    assert (run.status, run.host_name, run.simulated, run.accelerator) == (
        "queued",
        "local-sim",
        True,
        "NVIDIA H100 80GB HBM3",
    )
    assert (run.label, run.queued_by, run.knobs_summary) == ("first", "ana", "tp=2")
    assert run.profiles[0]["request_rate"] == "Infinity"
    assert BenchmarkProfile.model_validate(run.profiles[0]) == PRESETS["short"]

    view = run_view(run)
    assert launch.rerun_blocker(view) is None
    again = launch.rerun(db_session, view)
    assert again.id != run.id and again.config == run.config and again.profiles == run.profiles
    assert (again.status, again.host_name, again.queued_by) == ("queued", "local-sim", "ana")

    imported = crud.create_run(
        db_session, source="imported", status="done", engine="vllm", profiles=[{"name": "imported"}]
    )
    assert launch.rerun_blocker(run_view(imported)) == (
        "this run has no engine config (an imported result without a serving command)"
    )
    with pytest.raises(launch.LaunchInputError, match=f"cannot re-run run {imported.id}"):
        launch.rerun(db_session, run_view(imported))
    no_host = crud.create_run(db_session, config=config, profiles=[{"name": "imported"}])
    assert launch.rerun_blocker(run_view(no_host)).startswith("this run has no host")
    odd = crud.create_run(db_session, config=config, host_name="gpu-a", profiles=[{"name": "imported"}])
    assert (
        launch.rerun_blocker(run_view(odd))
        == "its profiles are not perflab benchmark profiles (imported results)"
    )


def test_one_word_knobs_name_the_values_and_version_the_engine_accepts() -> None:
    assert launch.accepted_words("sglang", "kv_cache_dtype") == (
        "SGLang 0.5.23 accepts: auto, fp8_e5m2, fp8_e4m3, mxfp8, bf16, bfloat16, nvfp4, fp4_mx_block16"
    )
    assert (launch.accepted_words("vllm", "attention_backend") or "").startswith(
        "vLLM 0.33.0 accepts: FLASH_ATTN, FLASH_ATTN_DIFFKV, TRITON_ATTN"
    )
    assert launch.accepted_words("mindie", "quantization") is None


def test_knob_tooltips_name_the_hosts_own_version(tmp_path: Path) -> None:
    cache = HelpCache(tmp_path)
    cache.store_words(("gpu1", "vllm", "0.33.0"), {"kv_cache_dtype": ["auto", "octave_k3v4"]})

    asked = launch.accepted_words("vllm", "kv_cache_dtype", host="gpu1", version="0.33.0", cache=cache)
    not_asked = launch.accepted_words("vllm", "kv_cache_dtype", host="gpu2", version="0.33.0", cache=cache)
    newer = launch.accepted_words("vllm", "kv_cache_dtype", host="gpu3", version="0.34.0", cache=cache)

    assert asked == "vLLM 0.33.0 on 'gpu1' accepts: auto, octave_k3v4"
    assert (not_asked or "").startswith("vLLM 0.33.0 accepts: auto,") and "octave_k3v4" in (not_asked or "")
    assert (newer or "").startswith(
        "vLLM 0.33.0 (perflab's newest table; 'gpu3' has 0.34.0, whose own check runs before launch) "
        "accepts: auto,"
    )
    cpu = launch.accepted_words("vllm", "kv_cache_dtype", host="cpu", version="0.32.0+cpu") or ""
    assert cpu.startswith("vLLM 0.32.0 accepts: auto") and "octave_k3v4" not in cpu

"""The preflight against the real vLLM CPU build: its own serve parser (run by the Python of the ``vllm`` on
PATH) refuses a flag and a value it does not know, in its own words with the version it reports; its
registries are cached; no engine is started; a study spec it refuses is refused when created, in its words.
The same against SGLang 0.5.23's own server-argument parser (the real package;
``tests/fixtures/real_sglang.py``), run by the ``python3`` on PATH."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab import settings
from perflab.engines import EngineConfig, get_adapter
from perflab.engines.preflight import HelpCache, default_cache, preflight
from perflab.inventory import HostConfig
from perflab.probe import probe_host
from perflab.study.coordinator import create_study
from perflab.study.spec import StudySpecError, parse_spec
from perflab.transport.local import LocalTransport
from tests.fixtures.real_sglang import SGLANG_VERSION, require_sglang_args, sglang_python_bin
from tests.fixtures.real_vllm import vllm_bin
from tests.fixtures.runs import inventory_of

pytestmark = [pytest.mark.real_engine, pytest.mark.parser_only, pytest.mark.timeout(900)]
STEP5_SPEC = """
name: step5 on the CPU build
model: /models/tiny
hosts: [cpu-local]
baseline: {engine: vllm, speculative_config: {method: step5_mtp, num_speculative_tokens: 1}}
tuning_profile: {name: tune, title: Chat, dataset: random, input_len: 16, output_len: 4, num_prompts: 2}
stages: [{name: Batching, dimension: max_num_seqs, candidates: [4]}]
"""


def _host(tmp_path: Path, bin_dir: Path) -> LocalTransport:
    transport = LocalTransport(HostConfig(name="cpu-local", transport="local", workdir=str(tmp_path / "w")))
    transport.extra_env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    return transport


def test_the_installed_vllm_refuses_an_unknown_flag_before_it_starts(
    tmp_path: Path, vllm_reported_version: str
) -> None:
    transport = _host(tmp_path, vllm_bin().parent)
    version = vllm_reported_version
    adapter = get_adapter("vllm")
    cache = HelpCache(tmp_path / "cache")
    good = EngineConfig(engine="vllm", model="/models/tiny", kv_cache_dtype="bfloat16", max_num_seqs=4)
    bad = good.model_copy(update={"extra_args": ("--no-such-flag", "--dtype", "float99")})

    verdict = preflight(transport, adapter, bad, engine_version=None, cache=cache)

    assert verdict.checked and verdict.asked and not verdict.missing
    assert verdict.version == version
    assert verdict.problems == (
        f"vLLM {version} refuses --dtype 'float99': argument --dtype: invalid choice: 'float99' "
        "(choose from 'auto', 'bfloat16', 'float', 'float16', 'float32', 'half')",
        f"vLLM {version} refuses --no-such-flag: unrecognized arguments: --no-such-flag",
    )
    good_verdict = preflight(transport, adapter, good, engine_version=version, cache=cache)
    assert good_verdict.ok and good_verdict.asked
    assert good_verdict.effective is not None and good_verdict.effective["max_num_seqs"] == 4
    words = cache.load_words(("cpu-local", "vllm", version))
    assert words is not None and "CPU_ATTN" in words["attention_backend"]


def test_sglangs_own_parser_reads_the_argv_and_refuses_what_it_does_not_know(tmp_path: Path) -> None:
    require_sglang_args()
    transport = _host(tmp_path, sglang_python_bin(tmp_path))
    adapter = get_adapter("sglang")
    cache = HelpCache(tmp_path / "cache")
    good = EngineConfig(
        engine="sglang", model="/models/tiny", kv_cache_dtype="fp8", enable_prefix_caching=False,
        enable_chunked_prefill=False, max_num_seqs=4,
        speculative_config={"method": "mtp", "num_speculative_tokens": 2},
    )  # fmt: skip

    verdict = preflight(transport, adapter, good, engine_version=None, cache=cache)

    assert verdict.ok and verdict.asked and verdict.version == SGLANG_VERSION, verdict.problems
    assert verdict.effective is not None
    read = {
        knob: verdict.effective[knob] for knob in ("kv_cache_dtype", "enable_prefix_caching", "max_num_seqs")
    }
    assert read == {"kv_cache_dtype": "fp8_e4m3", "enable_prefix_caching": False, "max_num_seqs": 4}
    assert (verdict.effective["enable_chunked_prefill"], verdict.effective["model"]) == (
        False,
        "/models/tiny",
    )
    words = cache.load_words(("cpu-local", "sglang", SGLANG_VERSION))
    assert (
        words is not None and "fa3" in words["attention_backend"] and "NEXTN" in words["speculative_config"]
    )

    bad = EngineConfig(
        engine="sglang", model="/models/tiny", attention_backend="fa9", extra_args=("--no-such-flag",)
    )
    refused = preflight(transport, adapter, bad, engine_version=None, cache=cache)
    assert len(refused.problems) == 2, refused.problems
    assert refused.problems[0].startswith(
        f"SGLang {SGLANG_VERSION} refuses --attention-backend 'fa9': "
        "argument --attention-backend: invalid choice: 'fa9' (choose from 'triton', "
    )
    assert (
        refused.problems[1]
        == f"SGLang {SGLANG_VERSION} refuses --no-such-flag: unrecognized arguments: --no-such-flag"
    )

    # the probe: the host's Python (here Debian's) lacks SGLang, so the python3 on PATH names it
    probed = LocalTransport(
        HostConfig(
            name="sglang-venv", transport="local", workdir=str(tmp_path / "p"), python="/usr/bin/python3"
        )
    )
    probed.extra_env = transport.extra_env
    assert probe_host(probed).engines["sglang"] == SGLANG_VERSION

    # perflab's tables refuse --disable-radix-cache itself; SGLang's parser also takes an abbreviation
    contradicted = good.model_copy(update={"enable_prefix_caching": True, "extra_args": ("--disable-radix",)})
    assert preflight(transport, adapter, contradicted, engine_version=None, cache=cache).problems == (
        "extra_args --disable-radix makes SGLang read enable_prefix_caching as false, contradicting the "
        "typed knob enable_prefix_caching: true",
    )


def test_a_study_the_installed_vllm_refuses_is_refused_when_created_in_its_own_words(
    runs_db: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, vllm_reported_version: str
) -> None:
    """The real vLLM 0.32 CPU build's parser answered the Launch page's check of a step5_mtp baseline (a
    0.33 method); creating a study of it on that host is refused in vLLM's words, naming its version, and
    a candidate on it, which no check asked about, by the registries that vLLM listed."""
    monkeypatch.setenv(settings.APP_WORKDIR_ENV, str(tmp_path / "app"))
    transport = _host(tmp_path, vllm_bin().parent)
    version = vllm_reported_version
    spec = parse_spec(STEP5_SPEC)
    checked = preflight(
        transport,
        get_adapter("vllm"),
        spec.baseline_config(None, 1),
        engine_version=version,
        cache=default_cache(),
    )
    assert checked.asked and not checked.ok
    probe = {
        "host": "cpu-local", "python": {"command": "python3"}, "engines": {"vllm": version},
        "probed_at": "2026-11-27T00:00:00Z", "duration_s": 1.0, "accelerators": [],
    }  # fmt: skip
    with new_session(runs_db) as session:
        crud.record_probe(session, name="cpu-local", reachable=True, probe=probe)

    with pytest.raises(StudySpecError) as refused:
        create_study(runs_db, spec, inventory=inventory_of(HostConfig(name="cpu-local", transport="local")))

    baseline, candidate = refused.value.problems
    assert baseline.startswith(
        f"baseline on host 'cpu-local': vLLM {version} refuses --speculative-config 'step5_mtp': "
        "Input should be"
    )
    assert "'medusa'" in baseline
    assert candidate.startswith(
        f"stages[0].candidates[0] (max_num_seqs=4) on host 'cpu-local': vLLM: speculative_config 'step5_mtp' "
        f"is not one of vLLM {version}'s values"
    )

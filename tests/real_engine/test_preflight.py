"""The preflight against the real vLLM CPU build: its own serve parser (run by the Python of the ``vllm`` on
PATH) refuses a flag and a value it does not know, in its own words with the version it reports; its
registries are cached; no engine is started."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from perflab.engines import EngineConfig, get_adapter
from perflab.engines.preflight import HelpCache, preflight
from perflab.inventory import HostConfig
from perflab.transport.local import LocalTransport
from tests.fixtures.real_vllm import require_real_vllm, vllm_bin

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(900)]


def _vllm_host(tmp_path: Path) -> LocalTransport:
    transport = LocalTransport(HostConfig(name="cpu-local", transport="local", workdir=str(tmp_path / "w")))
    transport.extra_env = {"PATH": f"{vllm_bin().parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return transport


def test_the_installed_vllm_refuses_an_unknown_flag_before_it_starts(tmp_path: Path) -> None:
    require_real_vllm()
    transport = _vllm_host(tmp_path)
    version = transport.run(["vllm", "--version"], timeout=300).stdout.strip().splitlines()[-1]
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

"""``perflab bench`` against the real ``vllm bench serve`` (vLLM 0.32.0, CPU build): every flag of
vLLM's parser is either accepted by perflab or named as unsupported, and the Launch page's equivalent
command runs unchanged under both tools on one real vLLM, with the same sections and token counts."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from perflab.bench.vllm_flags import UNSUPPORTED_FLAGS
from perflab.importers.vllm_text import parse_block
from perflab.profiles import PRESETS
from perflab.views import launch
from tests.bench.test_vllm_commands import accepted_flags, write_sharegpt_standin
from tests.fixtures.real_vllm import (
    RealVllmServer,
    require_real_vllm,
    serve_env,
    vllm_bin,
    vllm_python,
)

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(1200)]
REPO_ROOT = Path(__file__).resolve().parents[2]
DUMP_VLLM_FLAGS = """
import json
from vllm.benchmarks.serve import add_cli_args
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = FlexibleArgumentParser()
add_cli_args(parser)
print(json.dumps(sorted(flag for action in parser._actions for flag in action.option_strings)))
"""


@pytest.mark.parser_only
def test_every_vllm_bench_serve_flag_is_accepted_or_named_unsupported() -> None:
    require_real_vllm()
    dumped = subprocess.run(
        [str(vllm_python()), "-c", DUMP_VLLM_FLAGS],
        capture_output=True,
        text=True,
        timeout=600,
        env=serve_env(),
    )
    assert dumped.returncode == 0, dumped.stderr
    vllm_flags = set(json.loads(dumped.stdout.strip().splitlines()[-1])) - {"-h", "--help"}
    assert sorted(vllm_flags - accepted_flags() - set(UNSUPPORTED_FLAGS)) == []
    assert sorted(set(UNSUPPORTED_FLAGS) - vllm_flags) == []  # no stale entry in the table


def run_tool(prefix: list[str], command: str, base_url: str, cwd: Path) -> tuple[dict, str]:
    """Run a displayed ``vllm bench serve …`` command with ``prefix`` in place of ``vllm bench serve``."""
    argv = [*prefix, "--base-url", base_url, *shlex.split(command)[3:]]
    finished = subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, timeout=900, env=serve_env(PYTHONPATH=str(REPO_ROOT))
    )
    assert finished.returncode == 0, (
        f"{shlex.join(argv)}\n{finished.stdout[-3000:]}\n{finished.stderr[-3000:]}"
    )
    start = finished.stdout.index("=== Serving Benchmark Result")
    end = finished.stdout.index("\n" + "=" * 50 + "\n", start) + 52
    block = finished.stdout[start:end]
    fields, problems = parse_block(block)
    assert problems == []
    return fields, block


@pytest.mark.parametrize("preset", ["short", "sharegpt_concurrency_4"])
def test_launch_command_runs_unchanged_under_both_tools(
    preset: str, real_vllm_server: RealVllmServer, tmp_path: Path
) -> None:
    profile = launch.scale_profiles([PRESETS[preset]], 0.01)[0]
    [command] = launch.profiles_frame([profile], str(real_vllm_server.model_dir))["vllm bench serve"]
    write_sharegpt_standin(tmp_path / "ShareGPT_V3_unfiltered_cleaned_split.json")
    url = real_vllm_server.base_url
    perflab_fields, perflab_block = run_tool(
        [sys.executable, "-m", "perflab", "bench"], command, url, tmp_path
    )
    vllm_fields, vllm_block = run_tool([str(vllm_bin()), "bench", "serve"], command, url, tmp_path)
    for fields in (perflab_fields, vllm_fields):
        assert (fields["completed"], fields["failed"]) == (profile.num_prompts, 0)
    # The same lines in the same order (the sections --percentile-metrics chose, the same percentiles).
    labels = [[line.split(":")[0] for line in block.splitlines()] for block in (perflab_block, vllm_block)]
    assert labels[0] == labels[1]
    if profile.dataset == "random":
        # ignore_eos: every request generates its max_tokens under both tools.
        assert perflab_fields["total_output_tokens"] == vllm_fields["total_output_tokens"]
        # Both count the server's usage.prompt_tokens of prompts aligned to the server's tokenizer
        # (vLLM leaves a prompt that decodes a token short as it is, so not always to the token).
        assert perflab_fields["total_input_tokens"] == pytest.approx(
            vllm_fields["total_input_tokens"], rel=0.01
        )

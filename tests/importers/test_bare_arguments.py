"""Bare engine arguments ("Backend Parameters") become the full serve command they stand for: the engine's
program, the model as served (the write-up's own serving command with the same configuration, the
quantized variant under a heading that names quantization, else the stated model) and every argument, so
an imported write-up recommends a command that runs as it is."""

from __future__ import annotations

from pathlib import Path

from sqlmodel import Session

from perflab.engines import parse_serve_command
from perflab.importers import import_content, import_files
from perflab.report.from_runs import build_report_from_runs

SEEDS = Path(__file__).resolve().parents[1] / "data" / "seeds"
DOCUMENT = """# Tuning Qwen3-8B

```bash
vllm serve Qwen/Qwen3-8B-AWQ --max-num-seqs 64
```

### Model

- Qwen/Qwen3-8B

## Baseline

- Backend Parameters:

```bash
--max-num-seqs 32
```

{block}

## Batching

- Backend Parameters:

```bash
--max-num-seqs 64
```

{block}
"""
BLOCK = """```
============ Serving Benchmark Result ============
Successful requests:                     10
Benchmark duration (s):                  1.00
Total input tokens:                      100
Total generated tokens:                  50
Total Token throughput (tok/s):          {value}
==================================================
```"""


def test_imported_seed_002_recommends_its_full_serve_command_keeping_fp8(db_session: Session) -> None:
    runs = import_files(db_session, sorted(SEEDS.glob("002_*.txt")))
    report = build_report_from_runs(db_session, [run.id for run in runs], tuning_title="ShareGPT", decimals=2)

    command = report.recommended_command or ""
    assert command.startswith("vllm serve Qwen/Qwen3.5-35B-A3B-FP8 "), command
    recommended = parse_serve_command(command)
    assert (recommended.engine, recommended.model) == ("vllm", "Qwen/Qwen3.5-35B-A3B-FP8")
    assert (recommended.reasoning_parser, recommended.performance_mode) == ("qwen3", "throughput")
    assert (recommended.max_model_len, recommended.enable_prefix_caching) == (32768, True)
    # the first kept optimization is the FP8 variant: the Quantization stage ran it, the baseline did not
    by_label = {run.label: run for run in runs}
    assert by_label["Quantization"].model == "Qwen/Qwen3.5-35B-A3B-FP8"
    assert by_label["vLLM"].model == by_label["ShareGPT · Baseline"].model == "Qwen/Qwen3.5-35B-A3B"
    assert (
        by_label["SGLang"]
        .serve_commands[0]
        .startswith("python3 -m sglang.launch_server --model-path Qwen/Qwen3.5-35B-A3B ")
    )


def test_bare_arguments_take_the_documents_command_with_their_configuration_else_its_stated_model(
    db_session: Session,
) -> None:
    text = DOCUMENT.replace("{block}", BLOCK, 1).replace("{block}", BLOCK).replace("{value}", "150.00")
    baseline, batching = import_content(db_session, name="tuning.md", content=text)

    # only the batching block has the configuration of the document's own command (its model: AWQ)
    assert baseline.serve_commands == ["vllm serve Qwen/Qwen3-8B --max-num-seqs 32"]
    assert batching.serve_commands == ["vllm serve Qwen/Qwen3-8B-AWQ --max-num-seqs 64"]
    assert (baseline.config or {})["max_num_seqs"] == 32 and batching.model == "Qwen/Qwen3-8B-AWQ"


def test_bare_arguments_whose_model_the_document_does_not_state_stay_bare(db_session: Session) -> None:
    text = "## vLLM\n\n- Backend Parameters:\n\n```bash\n--max-num-seqs 32\n```\n\n" + BLOCK.replace(
        "{value}", "150.00"
    )
    (run,) = import_content(db_session, name="bare.md", content=text)

    assert run.serve_commands == ["--max-num-seqs 32"] and run.config is None and run.engine == "vllm"

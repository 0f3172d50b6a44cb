"""Re-imports are recognised by content; imported runs take the document's model, hardware and
engine versions; one canonical name per model."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from sqlmodel import Session

from db import crud
from perflab.importers import AlreadyImported, import_content, import_files
from perflab.importers.cli import run as import_cli
from perflab.importers.facts import accelerator_name, canonical_model, document_facts

SEEDS = Path(__file__).resolve().parents[1] / "data" / "seeds"
ASCEND_SEED = SEEDS / "004_66c74e108a0d1776.txt"
BLOCK = """vllm serve Qwen/Qwen3-8B -tp 2
============ Serving Benchmark Result ============
Successful requests:                     10
Benchmark duration (s):                  1.00
Total input tokens:                      100
Total generated tokens:                  50
Request throughput (req/s):              10.00
Output token throughput (tok/s):         50.00
Total Token throughput (tok/s):          150.00
==================================================
"""


def test_the_same_file_twice_is_recognised_and_stores_nothing(db_session: Session) -> None:
    first = import_content(db_session, name="a.txt", content=BLOCK)
    with pytest.raises(
        AlreadyImported, match=rf"^b.txt: already imported as run {first[0].id}; nothing stored"
    ):
        import_content(db_session, name="b.txt", content=BLOCK.replace("\n", "\r\n").encode())
    assert crud.list_runs(db_session).total == 1
    assert first[0].import_hash is not None and len(first[0].import_hash) == 64
    # A different file is imported as usual.
    import_content(db_session, name="c.txt", content=BLOCK.replace("10.00", "11.00"))
    assert crud.list_runs(db_session).total == 2


def test_a_seed_imported_twice_names_all_its_runs(db_session: Session) -> None:
    runs = import_files(db_session, [ASCEND_SEED])
    with pytest.raises(AlreadyImported) as known:
        import_files(db_session, [ASCEND_SEED])
    assert known.value.run_ids == [run.id for run in runs]
    assert str(known.value).startswith(
        f"{ASCEND_SEED.name}: already imported as runs {runs[0].id}–{runs[-1].id}"
    )
    assert crud.list_runs(db_session).total == len(runs)


def test_the_cli_reports_a_reimport_and_goes_on(
    database_url: str, db_session: Session, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    block = tmp_path / "block.txt"
    block.write_text(BLOCK)
    args = argparse.Namespace(
        files=[str(block), str(block)], json=False, label=None, queued_by=None, url=database_url
    )
    assert import_cli(args) == 0
    out, err = capsys.readouterr()
    assert out.count("stored 1 run") == 1
    assert "block.txt: already imported as run " in err


def test_imported_runs_take_the_documents_hardware_engine_and_model(db_session: Session) -> None:
    runs = import_files(db_session, [ASCEND_SEED])
    assert {run.accelerator for run in runs} == {"Ascend 910B"}
    assert runs[0].environment == {
        "source": "imported document",
        "hardware": "A single Ascend 910B NPU",
        "engine_versions": {"vllm-ascend": "v0.9.1", "mindie": "2.1RC1"},
    }
    # `vllm serve Qwen/Qwen3-30B-A3B` and `mindie serve Qwen3-30B-A3B` are one model.
    models = {run.model for run in runs if run.model and "30B" in run.model}
    assert models == {"Qwen/Qwen3-30B-A3B"}
    assert set(crud.run_filter_choices(db_session)["accelerator"]) == {"Ascend 910B"}


def test_document_facts_and_names() -> None:
    flattened = document_facts(
        "## Experimental Setup ### Model - Qwen/Qwen3.5-35B-A3B ### Hardware NVIDIA H200 "
        "### Engine Version - vLLM v0.17.1 - SGLang v0.5.9 ### Benchmark Method ..."
    )
    assert (flattened.model, flattened.accelerator) == ("Qwen/Qwen3.5-35B-A3B", "NVIDIA H200")
    assert flattened.engine_versions == {"vllm": "v0.17.1", "sglang": "v0.5.9"}
    assert flattened.only_engine() is None
    assert document_facts("just a result block").environment() == {}
    assert accelerator_name("8 × NVIDIA A100 SXM 80GB GPUs on a single node") == "NVIDIA A100 SXM 80GB"
    assert accelerator_name("ASCEND 910B2 NPUs") == "Ascend 910B2"
    assert accelerator_name("a laptop") is None
    known = ["Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-8B", "team/Qwen3-8B"]
    assert canonical_model("Qwen3-30B-A3B", known) == "Qwen/Qwen3-30B-A3B"
    assert canonical_model("/models/qwen3-30b-a3b", known) == "Qwen/Qwen3-30B-A3B"
    assert canonical_model("Qwen3-8B", known) == "Qwen3-8B"  # two organisations: left as written
    assert canonical_model("Llama-3-8B", known) == "Llama-3-8B"
    assert canonical_model("other/Qwen3-30B-A3B", known) == "other/Qwen3-30B-A3B"

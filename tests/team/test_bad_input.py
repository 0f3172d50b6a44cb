"""Bad input, one parametrized test per family, from the corpus in ``tests/data/bad``: malformed
hosts.yaml files, uploaded datasets and imported results, engine arguments and page URLs. Each gets a
clear message naming the file, line and field where there is one — on the command line and on the
page — and changes nothing else: the file is left as it was and no database row appears or goes."""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlmodel import SQLModel
from streamlit.testing.v1 import AppTest

from db import session as db_session
from perflab.cli import main
from tests.fixtures.runs import SimHostFactory, write_hosts_file
from tests.ui.conftest import run_app, texts

BAD = Path(__file__).resolve().parents[1] / "data" / "bad"
HUGE_BYTES = 70 * 1024 * 1024
GOOD = json.loads((BAD / "imports" / "good.json").read_text())

# hosts.yaml files → what `hosts list` prints (one line per problem, each naming file and line).
HOSTS_FILES = {
    "not_yaml.yaml": "not_yaml.yaml:5: not valid YAML: expected ',' or ']'",
    "list_root.yaml": "list_root.yaml:1: expected a mapping of 'hosts' (a list of hosts) and optionally "
    "'currency' and 'accelerator_prices'",
    "hosts_not_a_list.yaml": "hosts_not_a_list.yaml:2: 'hosts' must be a list of hosts",
    "unknown_field.yaml": "unknown_field.yaml:3: host 'gpu-a' field 'adress': is not a known field",
    "duplicate_names.yaml": "duplicate_names.yaml:6: host 'gpu-a' is defined twice",
    "bad_port.yaml": "bad_port.yaml:4: host 'gpu-a' field 'port': must be <= 65535",
    "bad_name.yaml": "bad_name.yaml:2: host 'gpu a; rm -rf /' field 'name': must start with a letter",
    "password_inline.yaml": "password_inline.yaml:5: host 'gpu-a' field 'auth.password': secrets are never "
    "stored in hosts.yaml",
    "jump_unknown.yaml": "jump_unknown.yaml:4: host 'gpu-a' field 'jump': no host named 'bastion'",
    "simulate_unknown_accelerator.yaml": "simulate_unknown_accelerator.yaml:5: host 'sim-a' field "
    "'simulate': simulate.accelerator: 'Z9000' is not one of",
    "local_with_address.yaml": "local_with_address.yaml:4: host 'here' field 'address': has no meaning with "
    "transport: local",
}

# Uploaded prompt sets → the message the Datasets page and `bench --dataset-path` give.
DATASET_FILES = {
    "empty.jsonl": "empty.jsonl: the file holds no prompts",
    "binary.jsonl": "binary.jsonl:1: not valid UTF-8 text",
    "latin1.txt": "latin1.txt:2: not valid UTF-8 text",
    "one_bad_line.jsonl": "one_bad_line.jsonl:4: invalid JSON",
    "wrong_field_type.jsonl": "wrong_field_type.jsonl:2: field 'prompt': must be a non-empty string",
    "no_prompt_column.csv": "no_prompt_column.csv:1: field 'prompt': the header has no 'prompt' column",
    "wrong_fields.json": "wrong_fields.json:2: field 'conversations': missing",
    "not_an_array.json": "not_an_array.json:1: expected a JSON array of conversations",
}
# The page reads a JSON object as a session file (`bench --dataset sharegpt` reads it as ShareGPT): this
# one is bad in both forms (not an array; an empty list of conversations), and the page names both.
DATASET_PAGE_FILES = {
    **DATASET_FILES,
    "not_an_array.json": "not_an_array.json:1: expected an object with a non-empty list 'conversations' "
    "(a ShareGPT file is a JSON array of conversations; a session file is an object",
}

# Results to import → the message of `python -m perflab import`.
IMPORT_FILES = {
    "empty.json": "empty.json: the file is empty; expected vllm bench serve JSON",
    "binary.json": "binary.json: binary content; expected vllm bench serve JSON",
    "wrong_fields.json": "wrong_fields.json:1: is not a vllm bench serve result: no completed, duration",
    "one_bad_line.jsonl": "one_bad_line.jsonl:3: invalid JSON",
}

# Shared links → what the page says instead of a traceback.
URLS = [
    ("pages/run.py", {"run": "abc"}, "'abc' in ?run= is not a run id: run ids are whole numbers like 42."),
    ("pages/run.py", {"run": "-1"}, "'-1' in ?run= is not a run id"),
    ("pages/run.py", {"run": "0"}, "'0' in ?run= is not a run id"),
    ("pages/run.py", {"run": "²"}, "'\\xb2' in ?run= is not a run id"),
    ("pages/run.py", {"run": "99999999999999999999"}, "There is no run 99999999999999999999"),
    ("pages/run.py", {"run": "999999"}, "Run 999999 does not exist"),
    ("pages/compare.py", {"compare": ""}, "No runs to compare"),
    ("pages/compare.py", {"compare": "1,,x"}, "'x' in ?compare= is not a run id"),
    ("pages/compare.py", {"compare": "999998,999999"}, "999998"),
    ("pages/study.py", {"study": "\x00"}, "'\\x00' in ?study= is not a study id"),
    ("pages/study.py", {"study": "abc"}, "'abc' in ?study= is not a study id"),
    ("pages/study.py", {"study": "99999999999999999999"}, "There is no study 99999999999999999999"),
    ("pages/study.py", {"study": "424242"}, "Study 424242 does not exist"),
]


def good_result(**fields: object) -> str:
    """The good result file's text with ``fields`` set: a file of its own, not a re-import."""
    return json.dumps({**GOOD, **fields})


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def row_counts(url: str) -> dict[str, int]:
    """Rows per perflab table."""
    with db_session.get_engine(url).connect() as connection:
        return {
            table.name: connection.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
            for table in SQLModel.metadata.sorted_tables
        }


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``python -m perflab ARGV`` in this process: exit status, stdout, stderr."""
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def hosts_file(sim_host: SimHostFactory, tmp_path: Path) -> Path:
    """A hosts.yaml with one simulated local host, ``local-sim``."""
    return write_hosts_file(tmp_path / "hosts.yaml", [sim_host("local-sim", kind="local")])


@pytest.fixture
def page(
    suite_database_url: str, hosts_file: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., AppTest]:
    """``page(path, params, hosts=…)``: a page of the real app on this module's database."""
    monkeypatch.setenv("PERFLAB_DATABASE_URL", suite_database_url)
    monkeypatch.setenv("PERFLAB_APP_WORKER", "0")

    def open_(path: str, params: dict[str, str] | None = None, hosts: Path = hosts_file) -> AppTest:
        monkeypatch.setenv("PERFLAB_HOSTS", str(hosts))
        app = run_app(path, params)
        assert not app.exception, app.exception
        return app

    return open_


# ----- hosts.yaml --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(HOSTS_FILES))
def test_malformed_hosts_files(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = BAD / "hosts" / name
    before = digest(path)

    code, out, err = cli(capsys, "hosts", "--file", str(path), "list")

    assert code == 2 and out == ""
    assert err.splitlines()[0].startswith(HOSTS_FILES[name])
    assert all(line.startswith(f"{name}:") for line in err.splitlines())
    assert "Traceback" not in err and digest(path) == before


@pytest.mark.parametrize("name", ["not_yaml.yaml", "password_inline.yaml", "duplicate_names.yaml"])
def test_malformed_hosts_files_on_the_pages(
    name: str, page: Callable[..., AppTest], suite_database_url: str
) -> None:
    path = BAD / "hosts" / name
    before, rows = digest(path), row_counts(suite_database_url)

    for page_path in ("pages/hosts.py", "pages/launch.py"):
        [error] = texts(page(page_path, hosts=path).main.error)
        assert error.startswith("The hosts file cannot be used:") and HOSTS_FILES[name] in error

    assert digest(path) == before and row_counts(suite_database_url) == rows


@pytest.mark.parametrize("encoding", ["latin-1", "utf-16"])
def test_hosts_files_that_are_not_utf8(
    encoding: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "hosts.yaml"
    path.write_bytes("hosts:\n  - name: café\n    transport: local\n".encode(encoding))

    code, _, err = cli(capsys, "hosts", "--file", str(path), "list")

    assert code == 2 and err.startswith(f"{path}: cannot read:") and err.count("\n") == 1


def test_a_missing_key_file_is_named_when_the_host_is_probed(capsys: pytest.CaptureFixture[str]) -> None:
    path = BAD / "hosts" / "key_file_missing.yaml"

    code, out, _ = cli(capsys, "hosts", "--file", str(path), "probe")

    assert code == 1
    assert (
        "The key file /nonexistent/perflab-test-key for host 'gpu-a' does not exist on this machine. "
        "Fix auth.key_file in hosts.yaml." in out
    )


# ----- uploaded datasets -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def huge_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """70 MB of one JSON line that never closes."""
    path = tmp_path_factory.mktemp("huge") / "huge.jsonl"
    with path.open("w") as handle:
        handle.write('{"prompt": "')
        handle.write("y" * HUGE_BYTES)
    return path


@pytest.mark.parametrize("name", sorted(DATASET_FILES))
def test_bad_datasets_on_the_bench_command_line(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = BAD / "datasets" / name
    before = digest(path)
    dataset = "sharegpt" if name.endswith(".json") else "custom"

    code, out, err = cli(
        capsys, "bench", "--base-url", "http://127.0.0.1:9", "--model", "m", "--dataset", dataset,
        "--dataset-path", str(path), "--num-prompts", "4", "--no-progress",
    )  # fmt: skip

    assert code == 2 and out == ""
    assert err.startswith(f"perflab bench: error: {path.parent}/{DATASET_FILES[name]}")
    assert err.count("\n") == 1 and digest(path) == before


def test_a_huge_broken_dataset_on_the_bench_command_line(
    huge_dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(
        capsys, "bench", "--base-url", "http://127.0.0.1:9", "--model", "m", "--dataset", "custom",
        "--dataset-path", str(huge_dataset), "--num-prompts", "4", "--no-progress",
    )  # fmt: skip

    assert code == 2 and err.startswith(f"perflab bench: error: {huge_dataset}:1: invalid JSON")


def _upload(app: AppTest, name: str, content: bytes) -> AppTest:
    app.file_uploader(key="dataset_file").set_value((name, content, "application/octet-stream"))
    app.run()
    app.button(key="dataset_store").click().run()
    assert not app.exception
    return app


@pytest.mark.parametrize("name", sorted(DATASET_PAGE_FILES))
def test_bad_datasets_uploaded_on_the_page(
    name: str, page: Callable[..., AppTest], suite_database_url: str
) -> None:
    rows = row_counts(suite_database_url)

    app = _upload(page("pages/datasets.py"), name, (BAD / "datasets" / name).read_bytes())

    [error] = texts(app.error)
    assert error.startswith(DATASET_PAGE_FILES[name]) and "\n" not in error and not app.success
    assert row_counts(suite_database_url) == rows


def test_a_huge_upload_is_refused_on_the_page(
    huge_dataset: Path, page: Callable[..., AppTest], suite_database_url: str
) -> None:
    rows = row_counts(suite_database_url)

    app = _upload(page("pages/datasets.py"), "huge.jsonl", huge_dataset.read_bytes())

    assert texts(app.error) == ["huge.jsonl: the file is 70.0 MiB; datasets are limited to 32.0 MiB"]
    assert row_counts(suite_database_url) == rows


# ----- imported results --------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(IMPORT_FILES))
def test_bad_result_files_to_import(
    name: str, suite_database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad, good = BAD / "imports" / name, tmp_path / "good.json"
    good.write_text(good_result(label=f"beside {name}"))
    before, rows = digest(bad), row_counts(suite_database_url)

    code, out, err = cli(capsys, "import", "--url", suite_database_url, str(bad))

    assert code == 1 and out == "" and err.startswith(f"error: {bad}")
    assert IMPORT_FILES[name] in err and err.count("\n") == 1
    assert row_counts(suite_database_url) == rows and digest(bad) == before

    # Next to a good file, the bad one still stores nothing; the good one is imported.
    code, out, err = cli(capsys, "import", "--url", suite_database_url, str(good), str(bad))

    assert code == 1 and IMPORT_FILES[name] in err and out.startswith(f"{good}: stored 1 run")
    assert row_counts(suite_database_url)["run"] == rows["run"] + 1


# ----- database URLs -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["db", "upgrade", "--url", "{url}"],
        ["import", "--url", "{url}", "{file}"],
        ["study", "--url", "{url}", "list"],
        ["report", "1", "--out", "{out}", "--url", "{url}"],
    ],
    ids=["db", "import", "study", "report"],
)
def test_a_database_url_whose_driver_is_missing(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "mysql://perflab:secret@127.0.0.1/perflab"  # no MySQL driver is installed
    values = {"url": url, "file": str(BAD / "imports" / "good.json"), "out": str(tmp_path / "report")}

    code, out, err = cli(capsys, *(part.format(**values) for part in argv))

    assert code == 1 and out == "" and "Traceback" not in err
    assert err == "database mysql://perflab:***@127.0.0.1/perflab: No module named 'MySQLdb'\n"


# ----- engine arguments --------------------------------------------------------------------------


def _engine_cases() -> list[tuple[str, str]]:
    """``(arguments, message)`` pairs of tests/data/bad/engine_args.tsv."""
    lines = (BAD / "engine_args.tsv").read_text().splitlines()
    return [tuple(line.split("\t")) for line in lines if line.strip() and not line.startswith("#")]  # type: ignore[misc]


@pytest.mark.parametrize(("arguments", "message"), _engine_cases())
def test_bad_engine_arguments_on_the_command_line(
    arguments: str,
    message: str,
    suite_database_url: str,
    hosts_file: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PERFLAB_DATABASE_URL", suite_database_url)
    rows = row_counts(suite_database_url)

    code, out, err = cli(
        capsys, "run", "--hosts", str(hosts_file), "--host", "local-sim", "--engine", "vllm", "--model",
        "Qwen/Qwen3-8B", "--profile", "short", "--queue", *shlex.split(arguments),
    )  # fmt: skip

    assert code == 2 and out == ""
    assert err.startswith(f"error: {message}") and err.count("\n") == 1, err
    assert row_counts(suite_database_url) == rows


LAUNCH_CASES = [
    ({"launch_gpu_ids": "0,0"}, "gpu_ids must not repeat"),
    ({"launch_gpu_ids": "-1"}, "gpu ids: '-1' must be GPU indexes like 0,1,2,3"),
    ({"launch_gpu_ids": "0", "launch_tp": 2}, "gpu_ids lists 1 devices but tp×dp×replicas needs 2"),
    ({"launch_extra_args": "--max-num-seqs 8"}, "vLLM: extra_args repeats --max-num-seqs"),
    ({"launch_performance_mode": "fast"}, "vLLM: performance_mode 'fast' is not one of vLLM 0.33.0's values"),
]


@pytest.mark.parametrize(("inputs", "message"), LAUNCH_CASES)
def test_bad_engine_arguments_on_the_launch_page(
    inputs: dict[str, object], message: str, page: Callable[..., AppTest], suite_database_url: str
) -> None:
    rows = row_counts(suite_database_url)
    app = page("pages/launch.py")
    app.multiselect(key="launch_presets").select(app.multiselect(key="launch_presets").options[0]).run()
    for key, value in inputs.items():
        widget = app.number_input(key=key) if isinstance(value, int) else app.text_input(key=key)
        widget.set_value(value).run()

    assert any(message in error for error in texts(app.error)), texts(app.error)
    assert app.button(key="launch_queue").disabled
    assert row_counts(suite_database_url) == rows


# ----- URLs --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "params", "message"), URLS)
def test_bad_links(
    path: str, params: dict[str, str], message: str, page: Callable[..., AppTest], suite_database_url: str
) -> None:
    rows = row_counts(suite_database_url)

    app = page(path, params)

    shown = texts(app.info) + texts(app.warning)
    assert any(message in text for text in shown), shown
    assert row_counts(suite_database_url) == rows


def test_corpus_files_are_what_the_tests_say() -> None:
    """Every file of the corpus is used by a test above (and nothing used is missing)."""
    used = (
        {f"hosts/{name}" for name in [*HOSTS_FILES, "key_file_missing.yaml"]}
        | {f"datasets/{name}" for name in DATASET_FILES}
        | {f"imports/{name}" for name in [*IMPORT_FILES, "good.json"]}
        | {"engine_args.tsv"}
    )
    present = {str(path.relative_to(BAD)) for path in BAD.rglob("*") if path.is_file()}
    assert present == used
    assert json.loads((BAD / "imports" / "good.json").read_text())["completed"] == 4

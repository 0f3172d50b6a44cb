"""Where secrets come from (hosts.yaml names environment variables and files, never values), how a
host's secrets reach its commands, and the boundaries that keep them out of the database: engine
configs that would carry one are refused; the runner's store and the importers mask them."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.cli import main
from perflab.engines import EngineConfig
from perflab.importers import import_content
from perflab.inventory import HostConfig, InventoryError, load_inventory
from perflab.profiles import BenchmarkProfile
from perflab.redact import MASK, Redactor, SecretInConfig
from perflab.runner.store import RunStore
from perflab.runner.submit import submit_run
from perflab.secrets import SecretUnavailable, host_secret_env, known_values
from perflab.transport import AuthenticationFailed, open_transport
from perflab.views import launch
from tests.fixtures.runs import perflab_env, write_hosts_file

TOKEN = "hf_scanTokenValue0123456789abcdef"
API_KEY = "pl-api-key-6f1d2c"
PROFILE = BenchmarkProfile(
    name="tiny", title="Tiny", dataset="random", input_len=16, output_len=4, num_prompts=2
)


def hosts_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hosts.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_a_secret_written_into_env_is_refused_with_its_line(tmp_path: Path) -> None:
    path = hosts_file(
        tmp_path,
        """\
        hosts:
          - name: gpu-a
            transport: local
            env:
              HF_HOME: /data/hf
              HF_TOKEN: hf_written_in_the_file
        """,
    )
    with pytest.raises(InventoryError) as caught:
        load_inventory(path)
    [problem] = caught.value.problems
    assert problem.startswith("hosts.yaml:6: host 'gpu-a' field 'env.HF_TOKEN': secrets are never stored")
    assert "secrets: {HF_TOKEN: {env: VARIABLE}}" in problem


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("{env: A, file: /x}", "give exactly one of 'env' (a variable name) or 'file' (a path)"),
        ("{}", "give exactly one of 'env' (a variable name) or 'file' (a path)"),
        ("{env: 'not a name'}", "'not a name' is not a valid environment variable name"),
        ("{path: /x}", "is not a known field"),
    ],
)
def test_bad_secret_sources_name_the_field(tmp_path: Path, entry: str, message: str) -> None:
    path = hosts_file(
        tmp_path, f"hosts:\n  - name: gpu-a\n    transport: local\n    secrets:\n      HF_TOKEN: {entry}\n"
    )
    with pytest.raises(InventoryError) as caught:
        load_inventory(path)
    assert any(
        problem.startswith("hosts.yaml:5: host 'gpu-a' field 'secrets.HF_TOKEN") and message in problem
        for problem in caught.value.problems
    ), caught.value.problems


def test_host_secrets_are_read_from_the_environment_and_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_file = tmp_path / "vllm-key"
    key_file.write_text(f"{API_KEY}\nsecond line ignored\n")
    monkeypatch.setenv("SCAN_HF_TOKEN", TOKEN)
    path = hosts_file(
        tmp_path,
        f"""\
        hosts:
          - name: gpu-a
            transport: local
            workdir: {tmp_path / "work"}
            secrets:
              HF_TOKEN: {{env: SCAN_HF_TOKEN}}
              VLLM_API_KEY: {{file: {key_file}}}
        """,
    )
    host = load_inventory(path).get("gpu-a")
    assert host_secret_env(host) == {"HF_TOKEN": TOKEN, "VLLM_API_KEY": API_KEY}
    assert {TOKEN, API_KEY} <= known_values([host])

    with open_transport(host) as transport:
        shown = transport.run(["sh", "-c", 'printf "%s|%s" "$HF_TOKEN" "$VLLM_API_KEY"'], timeout=10)
    assert shown.stdout == f"{TOKEN}|{API_KEY}"

    monkeypatch.delenv("SCAN_HF_TOKEN")
    with pytest.raises(SecretUnavailable, match=r"host 'gpu-a' field 'secrets.HF_TOKEN': the environment"):
        host_secret_env(host)
    with pytest.raises(AuthenticationFailed, match="SCAN_HF_TOKEN is not set"):
        open_transport(host)
    key_file.write_text("\n")
    monkeypatch.setenv("SCAN_HF_TOKEN", TOKEN)
    with pytest.raises(SecretUnavailable, match=r"secrets.VLLM_API_KEY': the file .* is empty"):
        host_secret_env(host)


def test_known_values_cover_passwords_the_app_password_and_the_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    password_file = tmp_path / "app-password"
    password_file.write_text("app-shared-password\n")
    host = HostConfig.model_validate(
        {
            "name": "gpu-a",
            "address": "10.0.0.5",
            "auth": {"password_env": "GPU_A_LOGIN", "passphrase_env": "KEY_PP"},
        }
    )
    environ = {
        "GPU_A_LOGIN": "ssh-login-password",
        "KEY_PP": "key-passphrase",
        "PERFLAB_PASSWORD_FILE": str(password_file),
        "PERFLAB_DATABASE_URL": "postgresql://perflab:db-password-1@db/perflab",
        "OPENAI_API_KEY": "sk-from-the-environment",
        "HF_HOME": "/data/hf",
    }
    assert known_values([host], environ) == {
        "ssh-login-password",
        "key-passphrase",
        "app-shared-password",
        "db-password-1",
        "sk-from-the-environment",
    }


def test_configs_carrying_a_secret_are_refused_everywhere(
    runs_db: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SecretInConfig, match="env: HF_TOKEN is a secret"):
        submit_run(
            runs_db,
            host_name="gpu-a",
            config=EngineConfig(engine="vllm", model="m", env={"HF_TOKEN": TOKEN}),
            profiles=[PROFILE],
        )
    with pytest.raises(launch.LaunchInputError, match="extra args: --api-key carries a secret"):
        launch.build_config(launch.ConfigForm(engine="vllm", model="m", extra_args=f"--api-key {API_KEY}"))

    host = HostConfig(name="gpu-a", transport="local", workdir=str(tmp_path / "work"))
    for name, value in perflab_env(runs_db, write_hosts_file(tmp_path / "hosts.yaml", [host])).items():
        monkeypatch.setenv(name, value)
    code = main(
        ["run", "--host", "gpu-a", "--engine", "vllm", "--model", "m", "--queue", "--profile", "short",
         "--env", f"HF_TOKEN={TOKEN}"]
    )  # fmt: skip
    assert code == 2
    assert "error: env: HF_TOKEN is a secret" in capsys.readouterr().err
    with new_session(runs_db) as session:
        assert crud.list_runs(session).total == 0


def test_the_runner_store_masks_what_comes_from_the_host(runs_db: Engine) -> None:
    run = submit_run(
        runs_db, host_name="gpu-a", config=EngineConfig(engine="vllm", model="m"), profiles=[PROFILE]
    )
    store = RunStore(runs_db, run.id, Redactor([TOKEN, API_KEY]))
    store.update(
        serve_commands=[f"VLLM_API_KEY={API_KEY} vllm serve m"],
        remote_state={"cleanup_error": f"login with {TOKEN} refused"},
    )
    store.heartbeat({"phase": "launching", "log_line": f"Downloading with token {TOKEN}"})
    request = {"index": 0, "success": False, "error": f"Authorization: Bearer {API_KEY}", "ttft_ms": None}
    result_id = store.add_result(
        profile={"name": "tiny"},
        result={"completed": 1, "errors": [f"401 for key {API_KEY}", ""], "requests": [request]},
        text_block=f"token {TOKEN}",
        bench_mode="on-host",
    )
    store.set_status(
        "failed", failure_message=f"--api-key {API_KEY} rejected", log_tail=f"HF_TOKEN={TOKEN}\n"
    )

    with new_session(runs_db) as session:
        stored = crud.require_run(session, run_id=run.id)
        [result] = crud.list_profile_results(session, run_id=run.id)
        [record] = crud.list_request_records(session, profile_result_id=result_id)
    assert stored.serve_commands == [f"VLLM_API_KEY={MASK} vllm serve m"]
    assert stored.remote_state == {"cleanup_error": f"login with {MASK} refused"}
    assert stored.progress == {"phase": "launching", "log_line": f"Downloading with token {MASK}"}
    assert stored.failure_message == f"--api-key {MASK} rejected"
    assert stored.log_tail == f"HF_TOKEN={MASK}\n"
    assert result.text_block == f"token {MASK}"
    assert result.result["errors"] == [f"401 for key {MASK}", ""]
    assert record.error == f"Authorization: Bearer {MASK}"


def test_imported_serve_commands_lose_their_secrets(db_session) -> None:  # type: ignore[no-untyped-def]
    content = textwrap.dedent(
        f"""\
        $ HF_TOKEN={TOKEN} vllm serve Qwen/Qwen3-8B --api-key {API_KEY} --max-num-seqs 64
        ============ Serving Benchmark Result ============
        Successful requests:                     10
        Benchmark duration (s):                  2.00
        Total input tokens:                      1000
        Total generated tokens:                  500
        Request throughput (req/s):              5.00
        Output token throughput (tok/s):         250.00
        Total token throughput (tok/s):          750.00
        ---------------Time to First Token----------------
        Mean TTFT (ms):                          45.10
        Median TTFT (ms):                        41.00
        P99 TTFT (ms):                           120.40
        ==================================================
        """
    )
    [run] = import_content(db_session, name="capture.log", content=content)
    assert run.serve_commands == [
        f"HF_TOKEN={MASK} vllm serve Qwen/Qwen3-8B --api-key {MASK} --max-num-seqs 64"
    ]
    assert run.config is not None and TOKEN not in str(run.config) and API_KEY not in str(run.config)

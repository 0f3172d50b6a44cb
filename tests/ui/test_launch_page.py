"""The Launch page with AppTest: the live serve command, unsupported knobs, profiles (presets, custom,
uploaded datasets), queuing a run and following it."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from sqlmodel import select

from db import crud
from db import session as db_session
from db.models import Run
from perflab.datasets import parse_upload, store_dataset
from perflab.probe import ProbeResult, PythonInfo, SystemInfo
from perflab.probe.cpu import cpu_devices
from tests.ui.conftest import preformatted, texts

LAUNCH_PAGE = "pages/launch.py"


def chosen_profiles(app) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    """The rows of the page's table of chosen profiles: (profile, load)."""
    (table,) = [text for text in texts(app.markdown) if text.startswith("| Profile | Load |")]
    return [tuple(cell.strip() for cell in line.strip("|").split(" | ")) for line in table.splitlines()[2:]]  # type: ignore[misc]


def queued_runs(url: str) -> list[Run]:
    with db_session.session_scope(db_session.get_engine(url)) as session:
        return list(session.exec(select(Run).order_by(Run.id)))


def test_command_follows_the_knobs(empty_db: str, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(empty_db, LAUNCH_PAGE)
    assert not app.exception
    assert app.selectbox(key="launch_host").options == ["local-sim (simulated)"]
    assert "Not probed yet: the Hosts page lists its accelerators and engine versions." in texts(app.caption)
    assert "vllm serve Qwen/Qwen3-8B" in preformatted(app)
    app.number_input(key="launch_tp").set_value(4).run()
    app.selectbox(key="launch_prefix_caching").select("on").run()
    app.text_input(key="launch_kv_cache_dtype").input("fp8").run()
    assert "vllm serve Qwen/Qwen3-8B -tp 4 --enable-prefix-caching --kv-cache-dtype fp8" in preformatted(app)
    app.selectbox(key="launch_engine").select("sglang").run()
    assert any(
        block.startswith("python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B")
        for block in preformatted(app)
    )
    assert not app.button(key="launch_queue").disabled  # the default profile is picked


def test_unsupported_knob_and_bad_inputs_are_named(empty_db: str, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(empty_db, LAUNCH_PAGE)
    app.selectbox(key="launch_engine").select("mindie").run()
    app.text_input(key="launch_quantization").input("fp8").run()
    assert not app.exception
    assert texts(app.error) and texts(app.error)[0].startswith("MindIE has no quantization setting")
    app.text_input(key="launch_quantization").input("").run()
    app.selectbox(key="launch_engine").select("vllm").run()
    app.text_input(key="launch_speculative").input("{not json").run()
    assert texts(app.error)[0].startswith("speculative config: expected a JSON object")
    app.text_input(key="launch_speculative").input("").run()
    app.text_input(key="launch_gpu_ids").input("0,x").run()
    assert texts(app.error) == ["gpu ids: '0,x' must be GPU indexes like 0,1,2,3"]
    app.text_input(key="launch_gpu_ids").input("0,1,2").run()
    app.number_input(key="launch_tp").set_value(2).run()
    assert texts(app.error)[0].startswith(
        "config: Value error, gpu_ids lists 3 devices but tp×dp×replicas needs 2"
    )
    assert app.button(key="launch_queue").disabled


def test_the_defaults_can_be_queued_as_they_are(empty_db: str, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(empty_db, LAUNCH_PAGE)
    assert app.multiselect(key="launch_presets").value == [
        "Throughput Profile (random 1024→128, 1000 prompts, concurrency 512, 1000 req/s)"
    ]
    assert [profile for profile, _ in chosen_profiles(app)] == ["Throughput Profile"]
    assert not app.button(key="launch_queue").disabled
    app.multiselect(key="launch_presets").set_value([]).run()
    assert app.button(key="launch_queue").disabled
    assert texts(app.main.warning) == ["Pick at least one profile to queue a run."]


def test_queue_a_run_with_presets_and_follow_it(empty_db: str, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(empty_db, LAUNCH_PAGE)
    presets = app.multiselect(key="launch_presets").options
    app.multiselect(key="launch_presets").set_value([presets[1], presets[2]]).run()
    app.selectbox(key="launch_scale").select("2 % (quick demo)").run()
    assert chosen_profiles(app) == [
        ("Short Prompt", "random 128→4, 20 prompts"),
        ("Medium Prompt", "random 2000→100, 10 prompts"),
    ]
    app.text_input(key="launch_label").input("demo").run()
    app.text_input(key="launch_queued_by").input("ana").run()
    app.button(key="launch_queue").click().run()
    assert not app.exception
    [run] = queued_runs(empty_db)
    assert (run.status, run.host_name, run.simulated, run.engine, run.model) == (
        "queued",
        "local-sim",
        True,
        "vllm",
        "Qwen/Qwen3-8B",
    )
    assert [profile["name"] for profile in run.profiles] == ["short", "medium"]
    assert [profile["num_prompts"] for profile in run.profiles] == [20, 10]
    assert (run.label, run.queued_by) == ("demo", "ana")
    assert f"Run {run.id} is queued; the worker starts it when the host's GPUs are free." in texts(
        app.success
    )
    assert app.get("progress")[0].proto.text.startswith(f"Run {run.id}: queued")

    # The note follows the run: once it is done it says so, and no longer that it is queued.
    engine = db_session.get_engine(empty_db)
    with db_session.session_scope(engine) as session:
        for status in ("launching", "ready", "benchmarking"):
            crud.set_run_status(session, run_id=run.id, status=status)
    app.run()
    assert f"Run {run.id} is benchmarking." in texts(app.info)
    with db_session.session_scope(engine) as session:
        crud.set_run_status(session, run_id=run.id, status="done")
    app.run()
    assert texts(app.success) == [f"Run {run.id} is done: its results are on its page."]
    assert not app.get("progress")


def test_custom_profile_with_an_uploaded_dataset(empty_db: str, open_page, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    content = b'{"prompt": "Explain KV caches."}\n{"prompt": "What is TPOT?", "output_len": 12}\n'
    with db_session.session_scope(db_session.get_engine(empty_db)) as session:
        dataset, _ = store_dataset(session, parse_upload("support.jsonl", content), content, name="support")
    app = open_page(empty_db, LAUNCH_PAGE)
    app.checkbox(key="launch_custom_enabled").check().run()
    app.multiselect(key="launch_presets").set_value([]).run()
    app.selectbox(key="launch_custom_dataset").select(f"#{dataset.id} · support (jsonl, 2 prompts)").run()
    app.text_input(key="launch_custom_name").input("Support traffic").run()
    # The dataset's own size is the default; its prompts set the input lengths, so no such field.
    prompts = app.number_input(key=f"launch_custom_num_prompts_{dataset.id}")
    assert prompts.value == 2 and "Input tokens" not in [field.label for field in app.number_input]
    assert "Input lengths: the dataset's own prompts." in [caption.value for caption in app.caption]
    assert not app.main.warning
    # One prompt of two carries its own output length: the field is the others' length.
    lengths_note = "1 of 2 prompts carry their own output length; Output tokens applies to the others."
    assert lengths_note in texts(app.caption)
    assert not app.number_input(key="launch_custom_output_len").disabled
    (command,) = [block for block in preformatted(app) if block.startswith("vllm bench serve")]
    assert "--dataset-name custom --dataset-path support.jsonl " in command
    prompts.set_value(8).run()
    assert [warning.value for warning in app.main.warning] == [
        "The dataset holds 2 prompts: 8 requests send them again in order (each about 4.0 times), "
        "which a prefix cache may favour."
    ]
    app.number_input(key="launch_custom_concurrency").set_value(2).run()
    assert [load for _, load in chosen_profiles(app)] == ["custom, 8 prompts, concurrency 2"]
    app.button(key="launch_queue").click().run()
    assert not app.exception
    [run] = queued_runs(empty_db)
    [profile] = run.profiles
    assert (profile["name"], profile["dataset"], profile["dataset_ref"]) == (
        "support-traffic",
        "custom",
        crud.content_hash(content),
    )


def test_output_tokens_are_disabled_when_every_prompt_carries_its_own(empty_db: str, open_page) -> None:  # type: ignore[no-untyped-def]
    content = b'{"prompt": "One", "output_len": 40}\n{"prompt": "Two", "output_tokens": 12}\n'
    with db_session.session_scope(db_session.get_engine(empty_db)) as session:
        dataset, _ = store_dataset(session, parse_upload("own.jsonl", content), content, name="own lengths")
    app = open_page(empty_db, LAUNCH_PAGE)
    app.multiselect(key="launch_presets").set_value([]).run()
    app.checkbox(key="launch_custom_enabled").check().run()
    app.selectbox(key="launch_custom_dataset").select(f"#{dataset.id} · own lengths (jsonl, 2 prompts)").run()
    assert app.number_input(key="launch_custom_output_len").disabled
    assert "Output lengths: the dataset's own (every prompt carries one)." in texts(app.caption)
    app.button(key="launch_queue").click().run()
    [run] = queued_runs(empty_db)
    assert run.profiles[0]["output_len"] is None


def test_a_session_file_is_a_custom_profile_of_sessions(empty_db: str, open_page) -> None:  # type: ignore[no-untyped-def]
    content = (
        b'[{"messages": [{"role": "user", "content": "List the files."}], "output_len": 64}, '
        b'{"messages": [{"role": "tool", "content": "README.md"}]}]\n'
        b'{"turns": [{"messages": [{"role": "user", "content": "Summarise the KV cache."}]}]}\n'
    )
    with db_session.session_scope(db_session.get_engine(empty_db)) as session:
        dataset, _ = store_dataset(session, parse_upload("agents.jsonl", content), content, name="agents")
    app = open_page(empty_db, LAUNCH_PAGE)
    app.multiselect(key="launch_presets").set_value([]).run()
    app.checkbox(key="launch_custom_enabled").check().run()
    app.selectbox(key="launch_custom_dataset").select(
        f"#{dataset.id} · agents (agentic-jsonl, 2 sessions, 3 turns)"
    )
    app.run()
    assert not app.exception
    sessions = app.number_input(key=f"launch_custom_num_prompts_{dataset.id}")
    assert (sessions.label, sessions.value) == ("Sessions", 2)
    # each turn asks for its own output length unless a value is given
    output = app.number_input(key="launch_custom_output_len_sessions")
    assert output.value is None and not output.disabled
    assert any(
        text.startswith("Empty: each turn asks for its own output_len, else 220")
        for text in texts(app.caption)
    )
    app.number_input(key="launch_custom_concurrency").set_value(2).run()
    (command,) = [block for block in preformatted(app) if "--dataset agentic-trace" in block]
    assert command.startswith("# vllm bench serve (vLLM 0.32.0) has no agentic-trace dataset; perflab bench")
    assert "--dataset-path agents.jsonl" in command
    app.button(key="launch_queue").click().run()
    assert not app.exception
    [run] = queued_runs(empty_db)
    [profile] = run.profiles
    assert (profile["dataset"], profile["dataset_ref"], profile["num_prompts"], profile["output_len"]) == (
        "agentic-trace",
        crud.content_hash(content),
        2,
        None,
    )
    assert profile["endpoint"] == "chat" and profile["max_concurrency"] == 2


def test_the_hosts_engine_judges_the_config_before_queueing(empty_db: str, open_page) -> None:  # type: ignore[no-untyped-def]
    """The preflight button asks the simulated host's vLLM (``--help=all``) as the worker does."""
    app = open_page(empty_db, LAUNCH_PAGE)
    app.text_input(key="launch_extra_args").input("--no-such-flag").run()
    app.button(key="launch_preflight").click().run()
    assert not app.exception
    (refusal,) = texts(app.error)
    assert refusal.startswith("preflight: vLLM ") and refusal.endswith("has no flag --no-such-flag")
    app.text_input(key="launch_extra_args").input("--enforce-eager").run()
    app.button(key="launch_preflight").click().run()
    assert not texts(app.error)
    assert texts(app.success)[0].endswith("accepts every flag and value of this configuration")


def test_an_engine_image_is_picked_from_the_vendor_presets_with_its_tag_edited(  # type: ignore[no-untyped-def]
    empty_db: str, open_page
) -> None:
    app = open_page(empty_db, LAUNCH_PAGE)
    sources = app.selectbox(key="launch_image_source").options
    assert sources == ["the host's installation", "vllm/vllm-openai", "another image"]
    app.selectbox(key="launch_image_source").select("vllm/vllm-openai").run()
    field = app.text_input(key="launch_image_vllm_vllm/vllm-openai")
    assert field.value == "vllm/vllm-openai:v0.32.0"
    field.input("vllm/vllm-openai:v0.10.2 --privileged").run()
    assert not app.exception
    assert texts(app.error)[0].startswith("image: Value error, image 'vllm/vllm-openai:v0.10.2 --privileged'")
    app.text_input(key="launch_image_vllm_vllm/vllm-openai").input("vllm/vllm-openai:v0.10.2").run()
    assert "Runs inside vllm/vllm-openai:v0.10.2" in " ".join(texts(app.caption))
    app.multiselect(key="launch_presets").select(app.multiselect(key="launch_presets").options[1]).run()
    app.button(key="launch_queue").click().run()
    [run] = queued_runs(empty_db)
    assert run.config["image"] == "vllm/vllm-openai:v0.10.2"
    app.selectbox(key="launch_engine").select("vllm-ascend").run()
    assert "quay.io/ascend/vllm-ascend" in app.selectbox(key="launch_image_source").options


def test_cpu_host_offers_vllm_cpu_knobs(empty_db: str, open_page) -> None:  # type: ignore[no-untyped-def]
    system = SystemInfo(cpu_model="AMD EPYC", cpu_cores=2, ram_total_mib=24000)
    probe = ProbeResult(
        host="local-sim",
        simulated=False,
        accelerators=cpu_devices(system),
        system=system,
        python=PythonInfo(command="python3"),
        engines={"vllm": "0.32.0+cpu"},
        probed_at=datetime.now(timezone.utc),
        duration_s=0.1,
    )
    with db_session.session_scope(db_session.get_engine(empty_db)) as session:
        crud.record_probe(session, name="local-sim", reachable=True, probe=probe.model_dump(mode="json"))
    app = open_page(empty_db, LAUNCH_PAGE)
    assert not app.exception
    assert any(text.startswith("CPU (AMD EPYC): 2 cores, 1 NUMA node") for text in texts(app.caption))
    app.number_input(key="launch_cpu_kvcache").set_value(4).run()
    app.text_input(key="launch_cpu_bind").input("0-1").run()
    command = "VLLM_CPU_KVCACHE_SPACE=4 VLLM_CPU_OMP_THREADS_BIND=0-1 vllm serve Qwen/Qwen3-8B"
    assert command in preformatted(app)
    app.text_input(key="launch_cpu_bind").input("all").run()
    assert texts(app.error)[0].startswith("vLLM: cpu_omp_threads_bind must be auto, nobind")

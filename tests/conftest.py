"""Shared pytest configuration: fixture plugins for the real servers the suite starts."""

pytest_plugins: list[str] = [
    "tests.fixtures.database",
    "tests.fixtures.sshd",
    "tests.fixtures.sim_server",
    "tests.fixtures.streaming_server",
    "tests.fixtures.rxstamps",
    "tests.fixtures.tokenizer",
    "tests.fixtures.runs",
    "tests.fixtures.podman",
    "tests.fixtures.ui_data",
    "tests.fixtures.study_data",
    "tests.fixtures.streamlit_app",
    "tests.fixtures.hub_server",
    "tests.fixtures.real_vllm",
    "tests.fixtures.aiconfigurator",
    "tests.fixtures.leftovers",
    "tests.fixtures.parallel",
]

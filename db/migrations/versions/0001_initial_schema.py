"""Initial schema: hosts, datasets, engine configs, runs and their results, the queue, studies.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "dataset",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("content_hash", sa.String(), nullable=False),
        sa.Column("format", sa.String(), nullable=False),
        sa.Column("owner_note", sa.Text(), nullable=True),
        sa.Column("size_bytes", sa.Integer(), nullable=False),
        sa.Column("num_prompts", sa.Integer(), nullable=True),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("prompt_token_lengths", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_dataset_content_hash", "dataset", ["content_hash"], unique=True)
    op.create_index("ix_dataset_name", "dataset", ["name"])

    op.create_table(
        "engineconfig",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("fingerprint", sa.String(), nullable=False),
        sa.Column("engine", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_engineconfig_engine", "engineconfig", ["engine"])
    op.create_index("ix_engineconfig_fingerprint", "engineconfig", ["fingerprint"], unique=True)
    op.create_index("ix_engineconfig_model", "engineconfig", ["model"])

    op.create_table(
        "host",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("address", sa.String(), nullable=True),
        sa.Column("transport", sa.String(), nullable=True),
        sa.Column("simulated", sa.Boolean(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("last_probe", sa.JSON(), nullable=True),
        sa.Column("last_probe_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("reachable", sa.Boolean(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_host_name", "host", ["name"], unique=True)

    op.create_table(
        "study",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("recommended_command", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("queued_by", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_study_created_at", "study", ["created_at"])
    op.create_index("ix_study_status", "study", ["status"])

    op.create_table(
        "worker",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("hostname", sa.String(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_worker_heartbeat_at", "worker", ["heartbeat_at"])

    op.create_table(
        "run",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("simulated", sa.Boolean(), nullable=False),
        sa.Column("host_name", sa.String(), nullable=True),
        sa.Column("accelerator", sa.String(), nullable=True),
        sa.Column("engine", sa.String(), nullable=True),
        sa.Column("model", sa.String(), nullable=True),
        sa.Column("engine_config_id", sa.Integer(), nullable=True),
        sa.Column("config", sa.JSON(), nullable=True),
        sa.Column("config_fingerprint", sa.String(), nullable=True),
        sa.Column("knobs_summary", sa.String(), nullable=True),
        sa.Column("replicas", sa.Integer(), nullable=False),
        sa.Column("profiles", sa.JSON(), nullable=False),
        sa.Column("serve_commands", sa.JSON(), nullable=False),
        sa.Column("bench_commands", sa.JSON(), nullable=False),
        sa.Column("environment", sa.JSON(), nullable=False),
        sa.Column("log_tail", sa.Text(), nullable=True),
        sa.Column("failure_class", sa.String(), nullable=True),
        sa.Column("failure_message", sa.Text(), nullable=True),
        sa.Column("queued_by", sa.String(), nullable=True),
        sa.Column("study_id", sa.Integer(), nullable=True),
        sa.Column("label", sa.String(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("launching_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ready_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("benchmarking_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("worker_id", sa.String(), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("progress", sa.JSON(), nullable=True),
        sa.Column("gpu_ids", sa.JSON(), nullable=True),
        sa.Column("remote_state", sa.JSON(), nullable=True),
        sa.Column("bench_mode", sa.String(), nullable=True),
        sa.Column("imported_from", sa.String(), nullable=True),
        sa.ForeignKeyConstraint(["engine_config_id"], ["engineconfig.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["study_id"], ["study.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_run_accelerator", "run", ["accelerator"])
    op.create_index("ix_run_config_fingerprint", "run", ["config_fingerprint"])
    op.create_index("ix_run_created_at", "run", ["created_at"])
    op.create_index("ix_run_engine", "run", ["engine"])
    op.create_index("ix_run_engine_config_id", "run", ["engine_config_id"])
    op.create_index("ix_run_host_name", "run", ["host_name"])
    op.create_index("ix_run_model", "run", ["model"])
    op.create_index("ix_run_source", "run", ["source"])
    op.create_index("ix_run_status", "run", ["status"])
    op.create_index("ix_run_status_created_at", "run", ["status", "created_at"])
    op.create_index("ix_run_study_id", "run", ["study_id"])
    op.create_index("ix_run_worker_id", "run", ["worker_id"])

    op.create_table(
        "gpulock",
        sa.Column("host_name", sa.String(), nullable=False),
        sa.Column("gpu_index", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.String(), nullable=True),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("host_name", "gpu_index"),
    )
    op.create_index("ix_gpulock_run_id", "gpulock", ["run_id"])

    op.create_table(
        "profileresult",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("profile_name", sa.String(), nullable=True),
        sa.Column("profile", sa.JSON(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("text_block", sa.Text(), nullable=True),
        sa.Column("completed", sa.Integer(), nullable=True),
        sa.Column("failed", sa.Integer(), nullable=True),
        sa.Column("duration", sa.Float(), nullable=True),
        sa.Column("success_rate", sa.Float(), nullable=True),
        sa.Column("total_token_throughput", sa.Float(), nullable=True),
        sa.Column("output_throughput", sa.Float(), nullable=True),
        sa.Column("request_throughput", sa.Float(), nullable=True),
        sa.Column("request_goodput", sa.Float(), nullable=True),
        sa.Column("mean_ttft_ms", sa.Float(), nullable=True),
        sa.Column("median_ttft_ms", sa.Float(), nullable=True),
        sa.Column("p99_ttft_ms", sa.Float(), nullable=True),
        sa.Column("mean_tpot_ms", sa.Float(), nullable=True),
        sa.Column("median_tpot_ms", sa.Float(), nullable=True),
        sa.Column("p99_tpot_ms", sa.Float(), nullable=True),
        sa.Column("mean_itl_ms", sa.Float(), nullable=True),
        sa.Column("median_itl_ms", sa.Float(), nullable=True),
        sa.Column("p99_itl_ms", sa.Float(), nullable=True),
        sa.Column("mean_e2el_ms", sa.Float(), nullable=True),
        sa.Column("median_e2el_ms", sa.Float(), nullable=True),
        sa.Column("p99_e2el_ms", sa.Float(), nullable=True),
        sa.Column("sweep_point", sa.JSON(), nullable=True),
        sa.Column("bench_mode", sa.String(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id", "position", name="uq_profileresult_run_position"),
    )
    op.create_index("ix_profileresult_mean_tpot_ms", "profileresult", ["mean_tpot_ms"])
    op.create_index("ix_profileresult_mean_ttft_ms", "profileresult", ["mean_ttft_ms"])
    op.create_index("ix_profileresult_output_throughput", "profileresult", ["output_throughput"])
    op.create_index("ix_profileresult_run_id", "profileresult", ["run_id"])
    op.create_index("ix_profileresult_total_token_throughput", "profileresult", ["total_token_throughput"])

    op.create_table(
        "runsample",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("t_s", sa.Float(), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("values", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_runsample_run_id", "runsample", ["run_id"])

    op.create_table(
        "studycandidate",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("stage_index", sa.Integer(), nullable=False),
        sa.Column("stage_name", sa.String(), nullable=False),
        sa.Column("label", sa.String(), nullable=True),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("config_fingerprint", sa.String(), nullable=True),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("role", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("objective_value", sa.Float(), nullable=True),
        sa.Column("decision", sa.String(), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["study_id"], ["study.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_studycandidate_config_fingerprint", "studycandidate", ["config_fingerprint"])
    op.create_index("ix_studycandidate_run_id", "studycandidate", ["run_id"])
    op.create_index("ix_studycandidate_study_id", "studycandidate", ["study_id"])

    op.create_table(
        "requestrecord",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("profile_result_id", sa.Integer(), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("start_s", sa.Float(), nullable=True),
        sa.Column("ttft_ms", sa.Float(), nullable=True),
        sa.Column("e2el_ms", sa.Float(), nullable=True),
        sa.Column("itl_ms", sa.JSON(), nullable=True),
        sa.Column("input_tokens", sa.Integer(), nullable=True),
        sa.Column("output_tokens", sa.Integer(), nullable=True),
        sa.Column("output_tokens_source", sa.String(), nullable=True),
        sa.Column("success", sa.Boolean(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("base_url", sa.String(), nullable=True),
        sa.ForeignKeyConstraint(["profile_result_id"], ["profileresult.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_requestrecord_profile_result_id", "requestrecord", ["profile_result_id"])


def downgrade() -> None:
    op.drop_table("requestrecord")
    op.drop_table("studycandidate")
    op.drop_table("runsample")
    op.drop_table("profileresult")
    op.drop_table("gpulock")
    op.drop_table("run")
    op.drop_table("worker")
    op.drop_table("study")
    op.drop_table("host")
    op.drop_table("engineconfig")
    op.drop_table("dataset")

"""Storing parsed results as runs with source ``imported``.

Every file is parsed completely before anything of it is stored, so a file with an error stores
nothing. Each result becomes one run (status ``done`` with one profile result, or ``failed`` with
the recorded message) whose engine, model and config come from its serving command when that
command can be read, else from what the document states (:mod:`perflab.importers.facts`: model,
hardware and accelerator, engine versions); model names are made canonical against the document's
and the stored runs' hub ids. Each run keeps the SHA-256 of its file's text (``import_hash``): the
same file imported again stores nothing and raises :class:`AlreadyImported` naming the runs it
became. Secrets in the files (``--api-key …``, ``HF_TOKEN=…``, known values) are masked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlmodel import Session, select

from db import crud
from db.models import Run
from perflab.bench.user_files import UserFileError, check_regular, read_capped
from perflab.engines import get_adapter
from perflab.importers.commands import config_from_command, engine_named_in
from perflab.importers.detect import decode, parse_content
from perflab.importers.facts import DocumentFacts, canonical_model, document_facts, replicas_of
from perflab.importers.limits import MAX_FILE_BYTES, check_size
from perflab.importers.model import ImportedResult, ImportFileError
from perflab.redact import Redactor, process_redactor


class ImportFailed(ValueError):
    """One or more files could not be parsed; nothing was stored."""

    def __init__(self, errors: list[ImportFileError]) -> None:
        self.errors = errors
        super().__init__("\n".join(str(error) for error in errors))


class AlreadyImported(ValueError):
    """The file was imported before (same text); nothing was stored. ``run_ids`` are its runs."""

    def __init__(self, name: str, run_ids: list[int]) -> None:
        self.name = name
        self.run_ids = run_ids
        super().__init__(f"{name}: already imported as {_runs_text(run_ids)}; nothing stored again")


def _runs_text(run_ids: list[int]) -> str:
    if len(run_ids) == 1:
        return f"run {run_ids[0]}"
    if run_ids == list(range(run_ids[0], run_ids[-1] + 1)):
        return f"runs {run_ids[0]}–{run_ids[-1]}"
    return "runs " + ", ".join(str(run_id) for run_id in run_ids)


@dataclass(frozen=True)
class ParsedFile:
    """A file's name (as stored in ``imported_from``), the results parsed from it, what the document
    states about its experiment and the SHA-256 of its text."""

    name: str
    results: list[ImportedResult]
    facts: DocumentFacts = DocumentFacts()
    content_hash: str | None = None


def parse_file(name: str, content: bytes | str) -> ParsedFile:
    """Parse one file's content; raises :class:`ImportFileError` naming it."""
    results = parse_content(name, content)
    text = decode(name, content)
    return ParsedFile(
        Path(name).name,
        results,
        facts=document_facts(text),
        content_hash=hashlib.sha256(text.encode("utf-8")).hexdigest(),
    )


def read_file(path: str | Path) -> ParsedFile:
    """Read (a regular file only, at most :data:`~perflab.importers.limits.MAX_FILE_BYTES`; see
    :mod:`perflab.bench.user_files`) and parse one file; raises :class:`ImportFileError` naming it."""
    path = Path(path)
    try:
        check_size(str(path), check_regular(str(path)))
        content = read_capped(str(path), MAX_FILE_BYTES)
    except UserFileError as error:
        raise ImportFileError(str(path), str(error)) from None
    except OSError as error:
        raise ImportFileError(str(path), f"cannot read: {error.strerror or error}") from None
    return parse_file(str(path), content)


def imported_runs(session: Session, content_hash: str | None) -> list[int]:
    """The runs an earlier import of the same text became (oldest first)."""
    if content_hash is None:
        return []
    query = select(Run.id).where(Run.import_hash == content_hash).order_by(Run.id)
    return [run_id for run_id in session.exec(query) if run_id is not None]


def _known_models(session: Session, parsed: ParsedFile) -> set[str | None]:
    """Model names a bare one may stand for: the document's own and the stored runs'."""
    stored = set(session.exec(select(Run.model).where(Run.model.is_not(None)).distinct()))
    commands = (config_from_command(item.serve_command) for item in parsed.results if item.serve_command)
    return {parsed.facts.model, *stored, *(config.model for config in commands if config is not None)}


def _failure_class(engine: str | None, message: str) -> str:
    if engine is not None:
        info = get_adapter(engine).classify_failure(message)
        if info is not None:
            return info.failure_class
    return "crash"


def _create_run(
    session: Session,
    item: ImportedResult,
    *,
    parsed: ParsedFile,
    known_models: set[str | None],
    queued_by: str | None,
    label: str | None,
    redactor: Redactor,
) -> Run:
    command = redactor.optional(item.serve_command)
    config = config_from_command(command) if command and not item.serve_args_only else None
    facts = parsed.facts
    fields: dict[str, Any] = {
        "status": "failed" if item.failure_message else "done",
        "source": "imported",
        "imported_from": parsed.name,
        "import_hash": parsed.content_hash,
        "label": label or item.label,
        "queued_by": queued_by,
        "profiles": [redactor.data(item.profile)],
        "serve_commands": [command] if command else [],
        "bench_commands": [redactor.text(item.bench_command)] if item.bench_command else [],
        "accelerator": facts.accelerator,
        "environment": redactor.data(facts.environment()),
    }
    if config is not None:
        model = canonical_model(config.model, known_models)
        if model != config.model:
            config = config.model_copy(update={"model": model})
        if not item.failure_message:
            replicas = replicas_of(facts, item.result, config.tp, config.dp)
            config = config.model_copy(update={"replicas": replicas})
    else:
        fields["engine"] = (
            item.engine
            or (engine_named_in(" ".join(command.split()[:3])) if command else None)
            or facts.only_engine()
        )
        model_id = item.result.get("model_id")
        fields["model"] = canonical_model(
            model_id if isinstance(model_id, str) else facts.model, known_models
        )
    if item.failure_message:
        engine = config.engine if config else fields["engine"]
        fields["failure_class"] = _failure_class(engine, item.failure_message)
        fields["failure_message"] = redactor.text(item.failure_message)
    return crud.create_run(session, config=config, **fields)


def store_parsed(
    session: Session, parsed: ParsedFile, *, queued_by: str | None = None, label: str | None = None
) -> list[Run]:
    """Store a parsed file's results as runs, in file order (all of them or, on error, none), with
    every secret in them masked."""
    earlier = imported_runs(session, parsed.content_hash)
    if earlier:
        raise AlreadyImported(parsed.name, earlier)
    runs: list[Run] = []
    redactor = process_redactor()
    known_models = _known_models(session, parsed)
    try:
        for item in parsed.results:
            run = _create_run(
                session,
                item,
                parsed=parsed,
                known_models=known_models,
                queued_by=queued_by,
                label=label,
                redactor=redactor,
            )
            runs.append(run)
            if not item.failure_message:
                crud.add_profile_result(
                    session,
                    run_id=run.id,
                    profile=redactor.data(item.profile),
                    result=redactor.data(item.result),
                    text_block=redactor.optional(item.text_block),
                    bench_mode=None,
                )
    except BaseException:
        session.rollback()
        for run in runs:
            crud.delete_run(session, run_id=run.id)
        raise
    return runs


def import_content(
    session: Session,
    *,
    name: str,
    content: bytes | str,
    queued_by: str | None = None,
    label: str | None = None,
) -> list[Run]:
    """Parse and store one uploaded file's content; raises :class:`ImportFileError`, or
    :class:`AlreadyImported` when the same text was imported before."""
    return store_parsed(session, parse_file(name, content), queued_by=queued_by, label=label)


def import_files(
    session: Session,
    paths: Iterable[str | Path],
    *,
    queued_by: str | None = None,
    label: str | None = None,
) -> list[Run]:
    """Import every file, runs in file order; if any file fails to parse, store nothing at all.

    Raises :class:`ImportFailed` listing every file that failed, :class:`AlreadyImported` for a file
    imported before (the files before it are stored).
    """
    parsed: list[ParsedFile] = []
    errors: list[ImportFileError] = []
    for path in paths:
        try:
            parsed.append(read_file(path))
        except ImportFileError as error:
            errors.append(error)
    if errors:
        raise ImportFailed(errors)
    runs: list[Run] = []
    for parsed_file in parsed:
        runs.extend(store_parsed(session, parsed_file, queued_by=queued_by, label=label))
    return runs


def run_record(session: Session, run: Run) -> dict[str, Any]:
    """A stored imported run as one JSON-able dict: run facts, then its result's fields."""
    record: dict[str, Any] = {
        "run_id": run.id,
        "status": run.status,
        "source": run.source,
        "imported_from": run.imported_from,
        "label": run.label,
        "engine": run.engine,
        "model": run.model,
        "serve_command": run.serve_commands[0] if run.serve_commands else None,
    }
    if run.failure_message is not None:
        record["failure_class"] = run.failure_class
        record["failure_message"] = run.failure_message
    for profile_result in crud.list_profile_results(session, run_id=run.id)[:1]:
        record.update(profile_result.result)
    return record

"""Hosts seen: one row per host name, written when a host is probed (its hosts.yaml identity and the
probe's outcome)."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, select

from db.crud.fields import check_columns
from db.models import Host, utcnow
from db.session import begin_write


def upsert_host(session: Session, *, name: str, **fields: Any) -> Host:
    """Create the host ``name`` or update the given columns of the stored one."""
    check_columns(Host, fields, forbidden=("id", "name"))
    begin_write(session)
    host = session.exec(
        select(Host).where(Host.name == name).execution_options(populate_existing=True)
    ).first()
    if host is None:
        host = Host(name=name)
        session.add(host)
    for column, value in fields.items():
        setattr(host, column, value)
    session.commit()
    return host


def record_probe(
    session: Session,
    *,
    name: str,
    reachable: bool,
    probe: dict[str, Any] | None = None,
    error: str | None = None,
) -> Host:
    """Store the outcome of probing host ``name`` now (a failed probe keeps the last good one)."""
    fields: dict[str, Any] = {"reachable": reachable, "last_error": error, "last_probe_at": utcnow()}
    if probe is not None:
        fields["last_probe"] = probe
    return upsert_host(session, name=name, **fields)


def get_host(session: Session, *, name: str) -> Host | None:
    """The host called ``name``, or None."""
    return session.exec(select(Host).where(Host.name == name)).first()


def list_hosts(session: Session) -> list[Host]:
    """Every host seen, by name."""
    return list(session.exec(select(Host).order_by(Host.name)))

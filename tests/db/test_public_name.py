"""What the app's sidebar calls the database: its kind and name, never a server path, host or secret."""

from __future__ import annotations

import pytest

from db.session import public_name


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("sqlite:////srv/team/perflab/var/perflab.db", "SQLite · perflab.db"),
        ("sqlite:///relative/dir/lab.sqlite", "SQLite · lab.sqlite"),
        ("sqlite://", "SQLite · in memory"),
        ("sqlite:///:memory:", "SQLite · in memory"),
        ("postgresql://perflab:s3cret@db.example.com:5432/perflab", "PostgreSQL · perflab"),
        ("postgres://ana@10.0.0.5/bench_team", "PostgreSQL · bench_team"),
        ("postgresql+psycopg://db.example.com", "PostgreSQL"),
        ("not a url", "invalid database URL"),
    ],
)
def test_kind_and_name_only(url: str, shown: str) -> None:
    assert public_name(url) == shown
    for private in ("/srv", "relative/dir", "s3cret", "db.example.com", "10.0.0.5", "ana@", "5432"):
        assert private not in public_name(url)

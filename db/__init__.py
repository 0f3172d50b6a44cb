"""perflab's database: SQLModel tables (:mod:`db.models`), the engine/session factory and Alembic
runner (:mod:`db.session`), and keyword-only crud functions (:mod:`db.crud`).

The same code and migrations serve SQLite (the default, a WAL-mode file) and PostgreSQL, selected by
a SQLAlchemy URL in ``PERFLAB_DATABASE_URL``.
"""

"""How many database connections a worker process keeps: the runs it executes at once (default
:data:`DEFAULT_MAX_PARALLEL`) plus :data:`POOL_FIXED_CONNECTIONS`. Apart from :mod:`db.session`, so the
``perflab worker`` parser states them without loading SQLAlchemy."""

# A worker's threads that may use a connection at once: the claim loop, the heartbeat, and per run
# its lifecycle thread; a run's sampler and progress writes wait for the pool (each session is short).
POOL_FIXED_CONNECTIONS = 2
DEFAULT_MAX_PARALLEL = 4

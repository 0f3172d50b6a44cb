"""What a result costs and the energy it took, computed from stored rows (pure functions).

- :mod:`~perflab.cost.prices`: accelerator-hour prices the team gives in hosts.yaml, and which one
  applies to a run;
- :mod:`~perflab.cost.energy`: the energy a run's accelerators (or CPU packages) drew over a benchmark
  window, from its ``runsample`` rows;
- :mod:`~perflab.cost.figures`: a result's $ per 1M tokens, energy per request, joules per output token
  and tokens per joule; at the SLO on a swept profile.
"""

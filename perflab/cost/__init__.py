"""What a result costs and the energy it took, computed from stored rows (pure functions).

- :mod:`~perflab.cost.prices`: accelerator-hour prices the team gives in hosts.yaml, and which one
  applies to a run;
- :mod:`~perflab.cost.energy`: the energy a run's accelerators (or CPU packages) drew over a benchmark
  window, from its ``runsample`` rows;
- :mod:`~perflab.cost.figures`: a result's $ per 1M tokens, energy per request, joules per output token
  and tokens per joule;
- :mod:`~perflab.cost.stored`: the same for stored results, with the prices of hosts.yaml and the runs'
  samples read from the database (pages, reports and the study's cost objectives).

The figure at the SLO of a swept profile is taken by :mod:`perflab.study.objective` and
:mod:`perflab.report.costs` from these.
"""

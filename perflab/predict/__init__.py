"""Predictions before measurements: NVIDIA's AIConfigurator (the optional ``predict`` extra) estimates
each configuration of a study offline, beside perflab's own simulator, where it covers the model,
accelerator, engine and workload.

- :mod:`perflab.predict.installation`: finding the installed AIConfigurator (never imported here).
- :mod:`perflab.predict.case`: a configuration and tuning profile as one prediction case, or why not.
- :mod:`perflab.predict.support`: what its support matrix covers, and which table version to follow.
- :mod:`perflab.predict.aiconfigurator`: its ``cli estimate`` argv, run and printed estimate.
- :mod:`perflab.predict.simulated`: perflab's simulator's figures for the same case.
- :mod:`perflab.predict.figures`: a stored prediction, its disagreement and its result fields.
- :mod:`perflab.predict.predictor`: the two together, each case estimated once per process.
- :mod:`perflab.predict.store`: a study's predictions in ``study.state["predictions"]``.
"""

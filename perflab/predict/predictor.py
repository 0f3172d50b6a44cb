"""Predicting configurations: a case checked against what AIConfigurator covers, estimated by it, and
set beside perflab's simulator's figures for the same case.

:class:`Predictor` finds the installation once (:func:`~perflab.predict.installation.find_installation`;
:attr:`Predictor.unavailable` is the one line saying why there is none) and keeps every prediction it
made by case (:meth:`~perflab.predict.case.Case.key`), so one process never estimates a case twice;
studies also store theirs (:mod:`perflab.predict.store`).
"""

from __future__ import annotations

import threading

from perflab.engines import EngineConfig
from perflab.predict.aiconfigurator import ESTIMATE_TIMEOUT_S, EstimateError, run_estimate
from perflab.predict.case import ENGINE_TITLES, Case
from perflab.predict.figures import PredictedFigures, Prediction
from perflab.predict.installation import Installation, NotInstalled, find_installation
from perflab.predict.simulated import simulated_figures
from perflab.predict.support import tables_version


class Predictor:
    """AIConfigurator beside perflab's simulator (see the module); safe to share between threads."""

    def __init__(self, installation: Installation | None = None, *, timeout_s: float = ESTIMATE_TIMEOUT_S):
        self.timeout_s = timeout_s
        self.unavailable: str | None = None
        self.installation = installation
        if installation is None:
            try:
                self.installation = find_installation()
            except NotInstalled as reason:
                self.unavailable = str(reason)
        self._made: dict[str, Prediction] = {}
        self._lock = threading.Lock()

    @property
    def source(self) -> str:
        return self.installation.source if self.installation is not None else "AIConfigurator"

    def tables(self, case: Case) -> str:
        """The table version AIConfigurator follows for ``case``; raises
        :class:`~perflab.predict.case.NotCovered` when it lists none."""
        if self.installation is None:
            raise NotInstalled(self.unavailable or "AIConfigurator is not installed")
        return tables_version(self.installation, case.model, case.system, case.backend)

    def predict(self, config: EngineConfig, case: Case) -> Prediction:
        """``config``'s prediction as ``case`` (an estimate that failed is a prediction with its
        ``error``); raises :class:`~perflab.predict.case.NotCovered` or
        :class:`~perflab.predict.installation.NotInstalled` where there can be none."""
        version = self.tables(case)
        key = f"{case.key()}:{version}"
        with self._lock:
            made = self._made.get(key)
        if made is not None:
            return made
        assert self.installation is not None  # tables() checked it
        tables = f"{ENGINE_TITLES[case.engine]} {version}"
        simulated = simulated_figures(config, case)
        try:
            estimate = run_estimate(self.installation, case, version, timeout_s=self.timeout_s)
        except EstimateError as error:
            made = Prediction(
                case.gpus, case.isl, case.osl, tables, 0.0, None, simulated, str(error), case.ignored
            )
        else:
            per_gpu = estimate.tokens_per_s_per_gpu
            figures = PredictedFigures(
                output_tps_per_gpu=per_gpu,
                requests_per_s_per_gpu=estimate.seq_per_s * per_gpu / estimate.tokens_per_s,
                mean_tpot_ms=estimate.tpot_ms,
                mean_ttft_ms=estimate.ttft_ms,
            )
            tables = f"{ENGINE_TITLES[case.engine]} {estimate.backend_version}"
            made = Prediction(
                case.gpus,
                case.isl,
                case.osl,
                tables,
                estimate.seconds,
                figures,
                simulated,
                None,
                case.ignored,
            )
        with self._lock:
            self._made[key] = made
        return made

"""Simulated LLM engines for tests and for the no-GPU demo.

``perflab.sim`` serves the OpenAI API the way vLLM, SGLang, TensorRT-LLM and MindIE do, with token
timings either fixed (exact ground truth for accuracy tests) or derived from a performance model of
the model, the accelerator and the serving knobs. The engine CLI shims in :mod:`perflab.sim.engines`
answer each engine's real argv, and :mod:`perflab.sim.smi` answers ``nvidia-smi``/``npu-smi``.

This package ships to remote hosts inside the agent zipapp: it uses the standard library only,
parses with Python 3.9 and imports nothing from perflab outside ``perflab.sim``.
"""

"""An engine that starts a child in a session of its own (outside its process group): stopping the
engine stops that child too, found by the environment marker every process of a run inherits."""

from __future__ import annotations

import sys

from perflab.remote import process as rp
from perflab.transport import Transport
from tests.fixtures.polling import wait_for_text, wait_until
from tests.hosts.test_transport_contract import pid_alive

ESCAPING = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
print("child", child.pid, flush=True)
time.sleep(120)
"""


def test_a_child_in_its_own_session_is_stopped_with_the_engine(transport: Transport) -> None:
    process = rp.start_detached(transport, [sys.executable, "-c", ESCAPING], run_key="run-8", name="engine")
    log = wait_for_text(lambda: rp.tail_log(transport, process), "child")
    child = int(log.split("child", 1)[1].split()[0])
    assert pid_alive(child)
    rp.stop(transport, process, grace_s=1)
    wait_until(lambda: not pid_alive(child), 10, interval_s=0.2, failure="the child outlived its engine")

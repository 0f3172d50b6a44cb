"""Slowing down password guessing: failed logins counted per client address and in total, with
growing waits and a lockout.

Every attempt is counted as a failure when it is admitted (before the password is compared) and
forgiven when the password was right, so parallel sessions cannot slip extra guesses through one
wait. The first :data:`FREE_FAILURES` failures within :attr:`LoginPolicy.window_s` cost nothing (a
typo); after the ``n``-th the address waits ``min(2 ** (n - 4), 60)`` seconds before its next try
(1, 2, 4, … s); at :attr:`LoginPolicy.max_failures` failures
it is locked out for the window; at :attr:`LoginPolicy.max_total_failures` failures from all
addresses together every login is locked out for the window (guessing spread over many addresses),
a right password included. The counts live in the app's process: each process counts its own.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

FREE_FAILURES = 3
FIRST_WAIT_S = 1.0
MAX_WAIT_S = 60.0
TOTAL_FACTOR = 10


@dataclass(frozen=True)
class LoginPolicy:
    """How many failures an address (and all of them together) may have within ``window_s``."""

    max_failures: int = 10
    window_s: float = 15 * 60.0

    @property
    def max_total_failures(self) -> int:
        return TOTAL_FACTOR * self.max_failures


@dataclass
class _Address:
    failures: deque[float]
    next_try: float = 0.0


def duration_text(seconds: float) -> str:
    """``14 min 59 s``, ``3 s``: a wait in words, rounded up to the second."""
    whole = max(1, math.ceil(seconds))
    minutes, rest = divmod(whole, 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"


class LoginGuard:
    """Failed-login counts of one app process (thread-safe)."""

    def __init__(self, policy: LoginPolicy, clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self._clock = clock
        self._lock = threading.Lock()
        self._addresses: dict[str, _Address] = {}
        self._all_failures: deque[float] = deque()

    def admit(self, address: str) -> str | None:
        """Count an attempt from ``address`` as a failure and return None, or say why it may not be
        tried now (nothing counted): the address or the whole server is locked out, or must wait."""
        with self._lock:
            now = self._clock()
            self._forget_before(now - self.policy.window_s)
            refusal = self._refusal(address, now)
            if refusal is not None:
                return refusal
            record = self._addresses.setdefault(address, _Address(deque()))
            record.failures.append(now)
            self._all_failures.append(now)
            beyond = len(record.failures) - FREE_FAILURES
            record.next_try = now + min(FIRST_WAIT_S * 2 ** (beyond - 1), MAX_WAIT_S) if beyond > 0 else now
            return None

    def forgive(self, address: str) -> None:
        """The admitted attempt from ``address`` had the right password: its failures are forgotten."""
        with self._lock:
            record = self._addresses.pop(address, None)
            if record is not None and record.failures:
                self._all_failures.remove(record.failures[-1])

    def failures_left(self, address: str) -> int:
        """How many more failures ``address`` may have before it is locked out."""
        with self._lock:
            record = self._addresses.get(address)
            return self.policy.max_failures - (len(record.failures) if record else 0)

    def _refusal(self, address: str, now: float) -> str | None:
        window = duration_text(self.policy.window_s)
        if len(self._all_failures) >= self.policy.max_total_failures:
            left = self._all_failures[-self.policy.max_total_failures] + self.policy.window_s - now
            return (
                f"Too many wrong passwords on this server ({len(self._all_failures)} in {window}): "
                f"logins are locked for everyone for another {duration_text(left)}."
            )
        record = self._addresses.get(address)
        if record is None:
            return None
        if len(record.failures) >= self.policy.max_failures:
            left = record.failures[-self.policy.max_failures] + self.policy.window_s - now
            return (
                f"Too many wrong passwords from your address ({len(record.failures)} in {window}): "
                f"logins from it are locked for another {duration_text(left)}."
            )
        if now < record.next_try:
            return (
                f"Too many wrong passwords: wait {duration_text(record.next_try - now)} before trying again."
            )
        return None

    def _forget_before(self, oldest: float) -> None:
        while self._all_failures and self._all_failures[0] < oldest:
            self._all_failures.popleft()
        for address in list(self._addresses):
            record = self._addresses[address]
            while record.failures and record.failures[0] < oldest:
                record.failures.popleft()
            if not record.failures:
                del self._addresses[address]

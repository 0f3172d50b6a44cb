"""Password guessing: failures counted per client address and in total, growing waits, lockouts that
a right password does not lift, and parallel attempts that cannot slip through one wait. The guard's
clock is a hand-moved one so the waits are checked without sleeping."""

from __future__ import annotations

import threading

import pytest

from perflab import auth
from perflab.login_guard import LoginGuard, LoginPolicy, duration_text

PASSWORD = "guard-test-password"


class Clock:
    """A clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def fail(guard: LoginGuard, address: str) -> str | None:
    """One wrong password from ``address``: None when it was compared, else the refusal."""
    return guard.admit(address)


def test_waits_grow_after_three_free_failures_then_the_address_is_locked() -> None:
    clock = Clock()
    guard = LoginGuard(LoginPolicy(max_failures=7, window_s=900), clock)
    for _ in range(3):
        assert fail(guard, "192.0.2.1") is None  # typos cost nothing
    for wait in (1, 2, 4):
        assert fail(guard, "192.0.2.1") is None
        refusal = guard.admit("192.0.2.1")
        assert refusal == f"Too many wrong passwords: wait {wait} s before trying again."
        clock.now += wait - 0.5
        assert guard.admit("192.0.2.1") is not None
        clock.now += 0.5
    assert fail(guard, "192.0.2.1") is None  # the 7th failure
    assert guard.failures_left("192.0.2.1") == 0
    clock.now += 120
    refusal = guard.admit("192.0.2.1")
    assert refusal is not None and refusal.startswith(
        "Too many wrong passwords from your address (7 in 15 min 0 s)"
    )
    assert refusal.endswith("locked for another 12 min 53 s.")
    # another address is not affected
    assert guard.admit("192.0.2.2") is None
    # once the window has passed over the failures, the address may try again
    clock.now += 900
    assert guard.admit("192.0.2.1") is None


def test_a_right_password_forgives_the_address_but_not_the_total() -> None:
    clock = Clock()
    guard = LoginGuard(LoginPolicy(max_failures=3, window_s=60), clock)
    assert fail(guard, "a") is None and fail(guard, "a") is None
    assert guard.admit("a") is None
    guard.forgive("a")
    assert guard.failures_left("a") == 3
    # 2 failures of "a" still count towards the server's 30
    for index in range(14):
        assert fail(guard, f"b{index}") is None and fail(guard, f"b{index}") is None
    refusal = guard.admit("c")
    assert refusal == (
        "Too many wrong passwords on this server (30 in 1 min 0 s): "
        "logins are locked for everyone for another 1 min 0 s."
    )


def test_guessing_spread_over_addresses_locks_every_login_even_a_right_one() -> None:
    environ = {
        "PERFLAB_PASSWORD": PASSWORD,
        "PERFLAB_LOGIN_MAX_FAILURES": "2",
        "PERFLAB_LOGIN_WINDOW_S": "901",
    }
    for index in range(10):
        for _ in range(2):
            with pytest.raises(auth.LoginRefused, match=r"^Wrong password"):
                auth.check_login("mallory", "guess", f"198.51.100.{index}", environ)
    with pytest.raises(auth.LoginRefused, match="on this server .* locked for everyone"):
        auth.check_login("ana", PASSWORD, "203.0.113.7", environ)


def test_a_locked_address_is_refused_even_with_the_right_password() -> None:
    environ = {
        "PERFLAB_PASSWORD": PASSWORD,
        "PERFLAB_LOGIN_MAX_FAILURES": "3",
        "PERFLAB_LOGIN_WINDOW_S": "902",
    }
    messages = []
    for _ in range(3):
        with pytest.raises(auth.LoginRefused) as refused:
            auth.check_login("mallory", "guess", "192.0.2.9", environ)
        messages.append(str(refused.value))
    assert messages == [
        "Wrong password (2 more wrong tries lock logins from your address).",
        "Wrong password (1 more wrong try lock logins from your address).",
        "Wrong password. Logins from your address are now locked for 15 min 2 s.",
    ]
    with pytest.raises(auth.LoginRefused, match="from your address .* locked for another"):
        auth.check_login("mallory", PASSWORD, "192.0.2.9", environ)
    assert auth.check_login("ana", PASSWORD, "192.0.2.10", environ) == "ana"


def test_parallel_attempts_cannot_slip_through_one_wait() -> None:
    guard = LoginGuard(LoginPolicy(max_failures=10, window_s=900), Clock())
    start = threading.Barrier(40)
    admitted: list[bool] = []

    def attempt() -> None:
        start.wait()
        admitted.append(guard.admit("192.0.2.50") is None)

    threads = [threading.Thread(target=attempt) for _ in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # three free failures and a fourth that starts the first wait; every other guess is refused
    assert admitted.count(True) == 4 and admitted.count(False) == 36


def test_login_settings_are_checked() -> None:
    assert auth.login_policy({}) == LoginPolicy(max_failures=10, window_s=900)
    for bad in (
        {"PERFLAB_LOGIN_MAX_FAILURES": "0"},
        {"PERFLAB_LOGIN_MAX_FAILURES": "x"},
        {"PERFLAB_LOGIN_WINDOW_S": "-1"},
    ):
        with pytest.raises(auth.AccessConfigError, match="PERFLAB_LOGIN_MAX_FAILURES must be a whole number"):
            auth.login_policy(bad)
    assert duration_text(0.2) == "1 s" and duration_text(61) == "1 min 1 s"

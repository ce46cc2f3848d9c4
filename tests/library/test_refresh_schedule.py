"""The parts of the freshness feature that need no daemon and no mount: the timer's waits
(a fake clock and a seeded random source), its wake and its survival of a failing check;
the backoff of a failing source (doubling, capped, `Retry-After` honoured and capped); the
one-line kinds of a failed check; and the conditional-request cache against a loopback
server (a damaged or foreign entry is a miss, a `304` gives back the kept body).
"""

from __future__ import annotations

import datetime as dt
import email.utils
import itertools
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from acxfs.errors import (
    AcxfsError,
    DamagedState,
    KeyChangeError,
    NetworkError,
    PolicyRefusal,
    RollbackError,
    SourceError,
    StaleIndexError,
)
from acxfs.library.serving.schedule import JITTER, Schedule
from acxfs.library.store.checks import (
    MAX_FAILURES,
    Checks,
    SourceCheck,
    load_checks,
    parse_time,
    save_checks,
)
from acxfs.library.updates import refresh
from acxfs.sources.http import Http
from acxfs.sources.revalidate import Revalidator
from tests.support.freshness import wait_until
from tests.support.servers import Reply, Scripted

NOW = dt.datetime(2026, 12, 1, 12, 0, 0, tzinfo=dt.UTC)
HOUR = 3600.0


def never() -> None:
    raise AssertionError("no check was due")


def schedule(every: float | None, last: float | None, now: float, seed: int = 7) -> Schedule:
    return Schedule(interval=lambda: every, check=never, last=lambda: last,
                    clock=lambda: now, rng=random.Random(seed), offline=False)


# --- the timer ----------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(20))
def test_a_wait_is_the_interval_within_ten_percent(seed: int) -> None:
    never_checked = schedule(HOUR, None, 1000.0, seed).delay()
    assert never_checked is not None
    assert HOUR * (1 - JITTER) <= never_checked <= HOUR * (1 + JITTER)
    after_last = schedule(HOUR, 1000.0 - 600.0, 1000.0, seed).delay()
    assert after_last is not None
    assert HOUR * (1 - JITTER) - 600 <= after_last <= HOUR * (1 + JITTER) - 600


def test_the_waits_of_a_fleet_spread_over_the_jitter() -> None:
    waits = [schedule(HOUR, None, 0.0, seed).delay() or 0.0 for seed in range(200)]
    assert min(waits) < HOUR * 0.95 and max(waits) > HOUR * 1.05


def test_a_check_long_overdue_is_due_now() -> None:
    assert schedule(HOUR, 0.0, 10 * HOUR).delay() == 0.0


def test_off_and_offline_mean_no_check_until_woken() -> None:
    assert schedule(None, None, 0.0).delay() is None
    assert schedule(0, None, 0.0).delay() is None
    offline = schedule(HOUR, None, 0.0)
    offline.offline = True
    assert offline.delay() is None


def test_a_wake_restarts_the_wait_without_a_check() -> None:
    asked: list[float] = []
    checks: list[float] = []

    def interval() -> float:
        asked.append(time.monotonic())
        return HOUR

    timer = Schedule(interval=interval, check=lambda: checks.append(1.0), offline=False)
    timer.start()
    try:
        wait_until("the first wait began", lambda: len(asked) == 1, 10)
        timer.wake()
        wait_until("the wait began anew", lambda: len(asked) == 2, 10)
        timer.wake()
        wait_until("and again", lambda: len(asked) == 3, 10)
        assert checks == []
    finally:
        timer.stop()
    assert timer._thread is not None
    timer._thread.join(5)
    assert not timer._thread.is_alive()


def test_a_check_that_raises_never_stops_the_timer() -> None:
    ran = threading.Semaphore(0)
    count: list[int] = []

    def failing() -> None:
        count.append(1)
        ran.release()
        raise RuntimeError("a check that crashed")

    timer = Schedule(interval=lambda: 0.01, check=failing, offline=False)
    timer.start()
    try:
        for _ in range(3):
            assert ran.acquire(timeout=10), "the timer stopped after a failed check"
    finally:
        timer.stop()
    assert timer._thread is not None
    timer._thread.join(5)
    assert len(count) >= 3


# --- the backoff of a failing source --------------------------------------------------------


def waited(failures: int, interval: float = HOUR, retry_after: float | None = None) -> float:
    """Seconds after NOW before a scheduled round asks again after `failures` failures."""
    when = refresh._backoff(SourceCheck(failures=failures), NOW, interval, retry_after)
    return 0.0 if when is None else (parse_time(when) - NOW).total_seconds()


def test_the_first_failure_is_asked_again_next_round() -> None:
    assert waited(1) == 0.0


def test_the_backoff_doubles_per_failure() -> None:
    skipped = [waited(n) / HOUR - 0.5 for n in range(2, 6)]
    assert skipped == [1, 3, 7, 15]  # rounds skipped: 2**(n-1) - 1
    rounds = [s + 1 for s in skipped]  # the round it is asked again
    assert all(b == 2 * a for a, b in itertools.pairwise(rounds))


def test_the_backoff_is_capped_at_sixteen_rounds() -> None:
    cap = waited(6)
    assert cap <= 16 * HOUR
    assert waited(7) == waited(60) == waited(10_000) == cap


def test_failures_in_a_row_are_counted_up_to_where_the_backoff_stops(tmp_path: Path) -> None:
    check = SourceCheck()
    for _ in range(100):
        check = check.failed_again("2026-12-01T12:00:00Z", "unreachable: down")
    assert check.failures == MAX_FAILURES
    stored = Checks(sources={"a": SourceCheck(failures=10 ** 40), "b": SourceCheck(failures=-3)})
    save_checks(tmp_path / "checks.json", stored)
    loaded = load_checks(tmp_path / "checks.json").sources
    assert (loaded["a"].failures, loaded["b"].failures) == (MAX_FAILURES, 0)
    assert waited(10 ** 40) == waited(MAX_FAILURES)


def test_retry_after_is_honoured_and_capped() -> None:
    assert waited(1, retry_after=120) == 120
    assert waited(2, retry_after=60) == 1.5 * HOUR  # the longer of the two
    assert waited(2, retry_after=5 * HOUR) == 5 * HOUR
    assert waited(1, retry_after=365 * 86400) == refresh.RETRY_AFTER_CAP == 86400
    assert waited(60, retry_after=0) == waited(60)


# --- a failed check in one line --------------------------------------------------------------


@pytest.mark.parametrize(("exc", "kind"), [
    (RollbackError("index generatedAt 2026-11-01 is older than 2026-11-20"), "rollback"),
    (StaleIndexError("index is 40 days old"), "stale"),
    (KeyChangeError("signed by another key"), "refused key"),
    (NetworkError("http://127.0.0.1:9/index.json: Connection refused"), "unreachable"),
    (PolicyRefusal("publisher not allowed"), "policy"),
    (SourceError("index.json: not JSON"), "refused"),
    (DamagedState("library.json", "installed", "not an object"), "failed"),
])
def test_a_failed_check_says_its_kind_first(exc: AcxfsError, kind: str) -> None:
    line = refresh.check_error(exc)
    assert line.startswith(f"{kind}: ")
    assert " ".join(str(exc).split()) in line


def test_a_failed_check_is_one_line() -> None:
    line = refresh.check_error(SourceError("index.json:\n  cartridges[3]:\tnot an object\n"))
    assert line == "refused: index.json: cartridges[3]: not an object"


# --- conditional requests ---------------------------------------------------------------------


class Validated:
    """A loopback server of one document per path, with an ETag (or only a Last-Modified),
    answering `304` to the validator it gave."""

    def __init__(self, etag: bool = True) -> None:
        self.etag = etag
        self.body = b'{"generatedAt": "2026-11-20"}' * 40
        self.server = Scripted(self.route)

    def validator(self) -> str:
        return '"v1"' if self.etag else "Fri, 20 Nov 2026 00:00:00 GMT"

    def route(self, path: str) -> Reply:
        asked = self.server.requests[-1].headers
        header = "If-None-Match" if self.etag else "If-Modified-Since"
        given = {("ETag" if self.etag else "Last-Modified"): self.validator(),
                 "Content-Type": "application/json"}
        if asked.get(header) == self.validator():
            return Reply(304, b"", given)
        return Reply(200, self.body, given)

    def conditional(self) -> list[bool]:
        """For each request: whether it carried a validator."""
        return [("If-None-Match" in r.headers or "If-Modified-Since" in r.headers)
                for r in self.server.requests]


def client(cache: Path) -> Http:
    return Http(timeout=5, revalidator=Revalidator(cache))


@pytest.mark.parametrize("etag", [True, False])
def test_an_unchanged_document_costs_a_304_and_gives_the_kept_body(
        tmp_path: Path, etag: bool) -> None:
    origin = Validated(etag)
    with origin.server.running() as base:
        first = client(tmp_path / "cache")
        assert first.fetch(base + "index.json", revalidate=True).body == origin.body
        assert first.received == len(origin.body)
        second = client(tmp_path / "cache")
        answer = second.fetch(base + "index.json", revalidate=True)
    assert (answer.status, answer.body) == (200, origin.body)
    assert answer.header("Content-Type") == "application/json"
    assert second.received == 0
    assert origin.conditional() == [False, True]
    sent = origin.server.requests[1].headers
    assert ("If-None-Match" in sent) == etag and ("If-Modified-Since" in sent) == (not etag)


def entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.iterdir() if p.is_file())


@pytest.mark.parametrize("damage", [
    lambda data: data[:-5],  # a body cut short
    lambda data: data + b"x",  # a body longer than its header says
    lambda data: b"not json\n" + data,  # no header
    lambda data: b"",  # empty
])
def test_a_damaged_entry_is_a_miss(tmp_path: Path, damage: Callable[[bytes], bytes]) -> None:
    origin = Validated()
    cache = tmp_path / "cache"
    with origin.server.running() as base:
        client(cache).fetch(base + "index.json", revalidate=True)
        (entry,) = entries(cache)
        entry.write_bytes(damage(entry.read_bytes()))
        answer = client(cache).fetch(base + "index.json", revalidate=True)
    assert answer.body == origin.body
    assert origin.conditional() == [False, False]


def test_another_urls_entry_is_a_miss(tmp_path: Path) -> None:
    origin = Validated()
    cache = tmp_path / "cache"
    with origin.server.running() as base:
        client(cache).fetch(base + "status.json", revalidate=True)
        (theirs,) = entries(cache)
        client(cache).fetch(base + "index.json", revalidate=True)
        (mine,) = [p for p in entries(cache) if p != theirs]
        mine.write_bytes(theirs.read_bytes())  # status.json's entry under index.json's name
        answer = client(cache).fetch(base + "index.json", revalidate=True)
    assert answer.body == origin.body
    assert origin.conditional() == [False, False, False]


def test_a_last_modified_of_the_second_it_was_sent_is_no_validator(tmp_path: Path) -> None:
    """A static host's Last-Modified has whole seconds: a file rewritten within the second of
    the last GET keeps it, so `If-Modified-Since` with it would be answered 304 for good."""
    stamp = email.utils.formatdate(usegmt=True)
    bodies = [b'{"updatedAt": "2026-11-20"}', b'{"updatedAt": "2026-11-21", "withdrawn": 1}']

    def route(path: str) -> Reply:
        asked = server.requests[-1].headers.get("If-Modified-Since")
        body = bodies[min(len(server.requests), 2) - 1]
        headers = {"Last-Modified": stamp, "Date": stamp}
        return Reply(304, b"", headers) if asked == stamp else Reply(200, body, headers)

    server = Scripted(route)
    with server.running() as base:
        for body in bodies:
            assert client(tmp_path / "cache").fetch(base + "status.json",
                                                    revalidate=True).body == body
    assert ["If-Modified-Since" in r.headers for r in server.requests] == [False, False]


def test_a_304_to_a_request_without_validators_is_no_body(tmp_path: Path) -> None:
    server = Scripted(lambda path: Reply(304, b"", {"ETag": '"v1"'}))
    with server.running() as base:
        answer = client(tmp_path / "cache").fetch(base + "index.json", errors_ok=True,
                                                  revalidate=True)
    assert answer.status == 304 and answer.body == b""

"""The meter's delivery (:mod:`tenantcost_meter._delivery`) against a real ``tenantcost serve``:
batches spooled before any POST, posted in order, and through an outage, a lost answer, a
restart, two processes on one spool and refusals, the stored totals equal what was submitted,
exactly (no batch lost, none counted twice).

A loopback proxy (:mod:`tests.dropping_proxy`) sits between the meter and the server where a
test needs a fault or needs to see each request: it refuses connections (the server is down),
or forwards a request and drops the answer once the server has committed it.

The store holds the bundled example (2026-11 closed); the meter's usage goes to 2026-12, one
day per test, and is read back from the store (:func:`stored_usage`). CPU seconds are
multiples of 1/64, so their float sums are exact.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tenantcost.split import connect
from tenantcost.store.data import DataDir, Store
from tenantcost.store.engine import open_engine
from tenantcost.store.settings import resolve_settings
from tenantcost.store.stored import stored_usage
from tenantcost.windows import Period

from .dropping_proxy import DroppingProxy
from .postgres_fixture import free_port
from .service_server import Service, create_token, example_store, running_service

METER = Path(__file__).resolve().parents[1] / "meter"
if not any(Path(p).resolve() == METER for p in sys.path if p):  # until `pip install -e ./meter`
    sys.path.insert(0, str(METER))

from tenantcost_meter._delivery import Delivery  # noqa: E402

Totals = dict[tuple[str, str], tuple[int, float]]


@dataclass(frozen=True)
class Served:
    service: Service
    db: str
    data: Path
    token: str

    def totals(self, day: int) -> Totals:
        """Stored (window_start, client) -> (requests, cpu_seconds) of one day of December
        (every service the meter posts is ``api``, named by the example's rules), but the
        clients of the tests of a whole ``Meter`` (``meter-...``), which count today's hours."""
        start = pd.Timestamp(f"2026-12-{day:02d}", tz="UTC")
        period = Period(start, start + pd.Timedelta(days=1))
        return self._totals(period, lambda client: not client.startswith("meter-"))

    def requests_now(self, prefix: str) -> dict[str, int]:
        """Stored requests per client whose id starts with ``prefix``, around now (where a
        ``Meter`` counts)."""
        today = pd.Timestamp.now(tz="UTC").floor("D")
        period = Period(today - pd.Timedelta(days=1), today + pd.Timedelta(days=2))
        out: dict[str, int] = {}
        for (_, client), (requests, _) in self._totals(period, lambda c: c.startswith(prefix)
                                                       ).items():  # fmt: skip
            out[client] = out.get(client, 0) + requests
        return out

    def _totals(self, period: Period, keep: Callable[[str], bool]) -> Totals:
        store = Store(
            open_engine(resolve_settings(db=self.db, environ={})), DataDir(str(self.data))
        )
        con = connect()
        try:
            source = stored_usage(store, period, con)
        finally:
            store.engine.dispose()
        if source is None:
            return {}
        frame = con.execute(source.relation(con)).df()
        frame = frame[frame["client"].map(keep).astype(bool)].copy()
        frame["hour"] = frame["window_start"].dt.strftime("%Y-%m-%dT%H:00:00Z")
        sums = frame.groupby(["hour", "client"])[["requests", "cpu_seconds"]].sum()
        return {key: (int(row.requests), float(row.cpu_seconds))
                for key, row in sums.iterrows()}  # fmt: skip


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("meter-delivery")
    db, data = f"sqlite:///{tmp / 'store.db'}", tmp / "data"
    example_store(db, str(data))  # 2026-11 closed
    token = create_token(db, "ingest", "meter")
    with running_service(db, str(data), tmp / "serve.log") as service:
        yield Served(service, db, data, token)


@pytest.fixture
def proxy(served: Served) -> Iterator[DroppingProxy]:
    forwarder = DroppingProxy(served.service.url, free_port())
    forwarder.start()
    yield forwarder
    forwarder.stop()


def cell(day: int, hour: int, client: str, requests: int, cpu: float,
         month: int = 12) -> dict[str, Any]:  # fmt: skip
    """One record as the meter posts it to ``POST /api/v1/usage`` (docs/meter.md, "Delivery")."""
    start = f"2026-{month:02d}-{day:02d}T{hour:02d}:00:00Z"
    end_hour = (hour + 1) % 24
    end_day, end_month = (day, month) if end_hour else (day + 1, month)
    if month == 11 and end_day == 31:
        end_day, end_month = 1, 12
    end = f"2026-{end_month:02d}-{end_day:02d}T{end_hour:02d}:00:00Z"
    return {"window_start": start, "window_end": end, "service": "api", "client": client,
            "requests": requests, "cpu_seconds": cpu}  # fmt: skip


def expected(records: list[dict[str, Any]]) -> Totals:
    out: dict[tuple[str, str], tuple[int, float]] = {}
    for r in records:
        n, cpu = out.get((r["window_start"], r["client"]), (0, 0.0))
        out[(r["window_start"], r["client"])] = (n + r["requests"], cpu + r["cpu_seconds"])
    return out


def traffic(day: int, batches: int, hours: int = 3) -> list[list[dict[str, Any]]]:
    """``batches`` flushes of three clients (one of them the empty client) over ``hours``."""
    return [
        [cell(day, (b + h) % hours, c, 1 + b + h, (1 + b % 7) / 64) for h in range(2)
         for c in ("client-a", "client-b", "")]
        for b in range(batches)
    ]  # fmt: skip


def delivery(url: str, token: str, spool: Path) -> Delivery:
    return Delivery(url, token, spool, timeout=30.0, max_backoff=0.05)


def deliver_all(meter: Delivery, seconds: float = 60.0) -> None:
    """deliver() until the spool is empty (through the meter's own backoff)."""
    deadline = time.monotonic() + seconds
    while not meter.deliver():
        assert time.monotonic() < deadline, "the spool was not delivered in time"
        time.sleep(0.02)


def spooled(spool: Path) -> list[Path]:
    return sorted(spool.glob("*.json"))


def keys(spool: Path) -> list[str]:
    return [json.loads(p.read_text())["key"] for p in spooled(spool)]


def test_batches_are_spooled_then_delivered_in_order_with_exact_totals(
    served: Served, proxy: DroppingProxy, tmp_path: Path
) -> None:
    meter = delivery(proxy.url, served.token, tmp_path)
    sent = traffic(8, 4)
    for batch in sent:
        meter.submit(batch)
    order = keys(tmp_path)
    assert len(order) == 4 and len(set(order)) == 4 and proxy.forwarded == []  # no POST yet
    first = json.loads(spooled(tmp_path)[0].read_text())
    assert first["body"] == {"mode": "sum", "records": sent[0]}
    assert meter.deliver() is True
    assert [f.key for f in proxy.forwarded] == order  # oldest first, each once
    assert {f.status for f in proxy.forwarded} == {200}
    assert spooled(tmp_path) == [] and list(tmp_path.glob("*.tmp")) == []
    assert served.totals(8) == expected([r for b in sent for r in b])
    assert served.token not in served.service.log_text()


def test_usage_submitted_while_the_server_is_down_arrives_when_it_is_back(
    served: Served, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    down = DroppingProxy(served.service.url, free_port())  # not listening yet: refused
    meter = delivery(down.url, served.token, tmp_path)
    sent = traffic(2, 3)
    with caplog.at_level(logging.WARNING, logger="tenantcost_meter"):
        for batch in sent:
            meter.submit(batch)
            assert meter.deliver() is False
            time.sleep(0.06)
    assert len(spooled(tmp_path)) == 3 and served.totals(2) == {}
    assert "Connection refused" in caplog.text and served.token not in caplog.text
    down.start()
    try:
        deliver_all(meter)
    finally:
        down.stop()
    assert served.totals(2) == expected([r for b in sent for r in b])


def test_an_answer_lost_after_the_commit_is_replayed_not_added(
    served: Served, proxy: DroppingProxy, tmp_path: Path
) -> None:
    meter = delivery(proxy.url, served.token, tmp_path)
    sent = traffic(3, 2)
    for batch in sent:
        meter.submit(batch)
    proxy.drop_answers = 1
    assert meter.deliver() is False  # the first answer is lost: stop, back off
    assert len(spooled(tmp_path)) == 2
    deliver_all(meter)
    first, retry, second = proxy.forwarded
    assert first.dropped and first.status == 200 and not first.replayed
    assert retry.key == first.key and retry.status == 200 and retry.replayed
    assert second.key != first.key and not second.replayed
    assert served.totals(3) == expected([r for b in sent for r in b])


def _python(
    code: str, spool: Path, url: str, token: str, go: Path | None = None
) -> subprocess.Popen[bytes]:
    """``code`` in a new Python process (the token in its environment, not its arguments);
    with ``go``, a DELIVER process waits for that file to exist before it starts."""
    env = dict(os.environ, SPOOL=str(spool), URL=url, METER_TOKEN=token, GO=str(go or ""))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(METER), env.get("PYTHONPATH")]))
    return subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE)


SUBMIT_THEN_SIGKILL = """
import json, os, signal
from tenantcost_meter._delivery import Delivery
meter = Delivery(os.environ["URL"], os.environ["METER_TOKEN"], os.environ["SPOOL"])
with open(os.environ["SPOOL"] + ".in") as batches:
    sent = json.load(batches)
for batch in sent:
    meter.submit(batch)
os.kill(os.getpid(), signal.SIGKILL)
"""

DELIVER = """
import logging, os, time
from tenantcost_meter._delivery import Delivery
logging.basicConfig(level=logging.DEBUG, format="%(message)s")
while os.environ.get("GO") and not os.path.exists(os.environ["GO"]):
    time.sleep(0.005)
meter = Delivery(os.environ["URL"], os.environ["METER_TOKEN"], os.environ["SPOOL"],
                 max_backoff=0.05)
deadline = time.monotonic() + 60
while not meter.deliver():
    assert time.monotonic() < deadline
    time.sleep(0.01)
"""


def test_a_new_process_delivers_the_spool_of_a_killed_one(served: Served, tmp_path: Path) -> None:
    spool, sent = tmp_path / "spool", traffic(4, 3)
    Path(f"{spool}.in").write_text(json.dumps(sent))
    dead = "http://127.0.0.1:9"  # nothing listens: had it posted, it would have failed
    killed = _python(SUBMIT_THEN_SIGKILL, spool, dead, served.token)
    killed.communicate(timeout=60)
    assert killed.returncode == -signal.SIGKILL
    assert len(spooled(spool)) == 3
    again = _python(DELIVER, spool, served.service.url, served.token)
    assert again.communicate(timeout=90) and again.returncode == 0
    assert spooled(spool) == []
    assert served.totals(4) == expected([r for b in sent for r in b])


def test_two_processes_sharing_a_spool_post_each_batch_once(
    served: Served, proxy: DroppingProxy, tmp_path: Path
) -> None:
    sent = traffic(5, 12)
    meter = delivery(proxy.url, served.token, tmp_path)
    for batch in sent:
        meter.submit(batch)
    order = keys(tmp_path)
    go = tmp_path / "go"
    workers = [_python(DELIVER, tmp_path, proxy.url, served.token, go) for _ in range(2)]
    time.sleep(0.5)  # both imported and waiting
    go.touch()
    logs = [w.communicate(timeout=120)[1].decode() for w in workers]
    assert [w.returncode for w in workers] == [0, 0], logs
    assert all(log.count("delivered (HTTP 200)") >= 1 for log in logs), logs  # both took part
    assert sum(log.count("delivered (HTTP 200)") for log in logs) == len(order)
    posted = [f.key for f in proxy.forwarded]
    assert sorted(posted) == sorted(order)  # every batch posted exactly once
    assert not any(f.replayed for f in proxy.forwarded) and spooled(tmp_path) == []
    assert served.totals(5) == expected([r for b in sent for r in b])


def test_refused_batches_go_to_rejected_with_the_reason_and_are_not_retried(
    served: Served, proxy: DroppingProxy, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    meter = delivery(proxy.url, served.token, tmp_path)
    closed = [cell(12, 10, "client-a", 5, 0.5, month=11)]
    invalid = [cell(6, 1, "client-a", 5, 0.5) | {"cpu_seconds": "lots"}]
    good = [cell(6, 2, "client-b", 7, 0.25)]
    for batch in (closed, invalid, good):
        meter.submit(batch)
    names = [p.name for p in spooled(tmp_path)]
    with caplog.at_level(logging.WARNING, logger="tenantcost_meter"):
        assert meter.deliver() is True
    assert [f.status for f in proxy.forwarded] == [409, 422, 200]  # in order, refusals skipped
    rejected = tmp_path / "rejected"
    assert sorted(p.name for p in rejected.glob("*.json")) == names[:2]
    reasons = [(rejected / n).with_suffix(".reason").read_text() for n in names[:2]]
    assert reasons[0].startswith("HTTP 409: ") and "closed" in reasons[0]
    assert reasons[1].startswith("HTTP 422: ") and "records[0].cpu_seconds" in reasons[1]
    for reason in reasons:
        assert reason.strip().removeprefix("HTTP 409: ").removeprefix("HTTP 422: ") in caplog.text
    assert served.token not in caplog.text
    assert meter.deliver() is True and len(proxy.forwarded) == 3  # not retried
    assert served.totals(6) == expected(good)


def test_a_batch_across_two_months_is_two_batches_and_a_closed_month_refuses_its_part_only(
    served: Served, tmp_path: Path
) -> None:
    meter = delivery(served.service.url, served.token, tmp_path)
    november = [cell(30, 23, c, 3, 0.125, month=11) for c in ("client-a", "client-b")]
    december = [cell(1, 0, c, 4, 0.375) for c in ("client-a", "client-b")]
    meter.submit([november[0], december[0], november[1], december[1]])
    batches = [json.loads(p.read_text())["body"]["records"] for p in spooled(tmp_path)]
    assert batches == [november, december]  # November first, each month's records in order
    assert meter.deliver() is True
    assert [json.loads(p.read_text())["body"]["records"]
            for p in (tmp_path / "rejected").glob("*.json")] == [november]  # fmt: skip
    assert served.totals(1) == expected(december)


HOLD_LOCK = """
import fcntl, os, sys
handle = open(sys.argv[1], "rb")
fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("held", flush=True)
sys.stdin.read()
"""


def test_a_file_another_process_holds_is_skipped_and_delivered_once_released(
    served: Served, proxy: DroppingProxy, tmp_path: Path
) -> None:
    meter = delivery(proxy.url, served.token, tmp_path)
    sent = traffic(9, 2)
    for batch in sent:
        meter.submit(batch)
    held, _later = spooled(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(held)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        assert meter.deliver() is False  # not empty: one file is another process's
        assert spooled(tmp_path) == [held] and served.totals(9) == expected(sent[1])
    finally:
        holder.communicate(b"", timeout=30)
    assert meter.deliver() is True
    assert served.totals(9) == expected(sent[0] + sent[1]) and len(proxy.forwarded) == 2


def test_a_refused_token_or_a_wrong_url_keeps_the_batches(
    served: Served, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """401 says the token is wrong, 404 the url, not the batch: nothing goes to rejected/."""
    wrong = "tc_not-a-token-0123456789"
    sent = traffic(10, 2)
    stale = delivery(served.service.url, wrong, tmp_path)
    for batch in sent:
        stale.submit(batch)
    with caplog.at_level(logging.WARNING, logger="tenantcost_meter"):
        assert stale.deliver() is False
    assert "HTTP 401" in caplog.text and wrong not in caplog.text and wrong not in repr(stale)
    assert len(spooled(tmp_path)) == 2 and list((tmp_path / "rejected").iterdir()) == []
    misplaced = delivery(f"{served.service.url}/not-tenantcost", served.token, tmp_path)
    with caplog.at_level(logging.WARNING, logger="tenantcost_meter"):
        assert misplaced.deliver() is False  # 404: the url is wrong, not the batch
    assert "HTTP 404" in caplog.text and len(spooled(tmp_path)) == 2
    assert list((tmp_path / "rejected").iterdir()) == []
    deliver_all(delivery(served.service.url, served.token, tmp_path))
    assert served.totals(10) == expected(sent[0] + sent[1])


def test_backoff_spool_leftovers_and_a_damaged_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No server needed: nothing listens on port 9."""
    stale, young = tmp_path / "0-stale.json.tmp", tmp_path / "1-young.json.tmp"
    for leftover in (stale, young):
        leftover.write_text('{"key": "half-writ')
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    (tmp_path / "00000000000000000001-0000000001-00000001.json").write_text("not json")
    meter = Delivery("http://127.0.0.1:9", "tc_x", tmp_path, max_backoff=300.0)
    with caplog.at_level(logging.WARNING, logger="tenantcost_meter"):
        assert meter.deliver() is True  # the damaged file is set aside, never posted
        assert not stale.exists() and young.exists()
        reason = next((tmp_path / "rejected").glob("*.reason")).read_text()
        assert reason.startswith("spool file not a spooled batch")
        meter.submit(traffic(11, 1)[0])
        assert [meter.deliver() for _ in range(5)] == [False] * 5
        assert caplog.text.count("Connection refused") == 1  # within the backoff: no attempt
        meter.close(timeout=2.0)  # one more attempt at close, the batch stays spooled
        assert caplog.text.count("Connection refused") == 2
        fresh = Delivery("http://127.0.0.1:9", "tc_x", tmp_path)
        assert fresh.deliver(deadline=time.monotonic() - 1) is False  # past: no attempt
        assert caplog.text.count("Connection refused") == 2
    assert len(spooled(tmp_path)) == 1


@pytest.mark.timing
def test_a_server_that_never_answers_is_a_timeout_and_a_flush_from_a_signal_handler_returns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as mute:  # the kernel accepts the connection; nobody answers
        mute.bind(("127.0.0.1", 0))
        mute.listen(8)
        url = f"http://127.0.0.1:{mute.getsockname()[1]}"
        meter = Delivery(url, "tc_x", tmp_path, timeout=0.5)
        meter.submit(traffic(11, 1)[0])
        inner: list[tuple[bool, float]] = []

        def flush_on_signal(signum: int, frame: Any) -> None:  # as a SIGTERM handler would
            started = time.monotonic()
            inner.append((meter.deliver(), time.monotonic() - started))
            meter.close(timeout=30.0)

        previous = signal.signal(signal.SIGALRM, flush_on_signal)
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.1)  # while the POST waits for its answer
            with caplog.at_level(logging.WARNING, logger="tenantcost_meter"):
                started = time.monotonic()
                assert meter.deliver() is False
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        assert time.monotonic() - started < 5 and "timed out" in caplog.text
        assert len(inner) == 1 and inner[0][0] is False and inner[0][1] < 0.1  # no deadlock
    assert len(spooled(tmp_path)) == 1


def test_submits_from_one_thread_while_another_delivers(served: Served, tmp_path: Path) -> None:
    """The meter's flusher delivers while request threads' cells are submitted."""
    meter = delivery(served.service.url, served.token, tmp_path)
    sent = traffic(12, 10)
    stop = threading.Event()

    def keep_delivering() -> None:
        while not stop.is_set():
            meter.deliver()
            time.sleep(0.01)

    flusher = threading.Thread(target=keep_delivering)
    flusher.start()
    try:
        for batch in sent:
            meter.submit(batch)
            time.sleep(0.01)
    finally:
        stop.set()
        flusher.join(timeout=60)
    deliver_all(meter)
    assert served.totals(12) == expected([r for b in sent for r in b])


def test_big_flushes_are_cut_and_a_failed_submit_spools_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flush over MAX_BATCH_RECORDS is several batches; a write failing midway (a full
    disk) leaves no batch visible, so submitting the same records again counts none twice."""
    from tenantcost_meter import _delivery, _spool

    records = [cell(1, h % 24, f"client-{n}", 1, 0.0) for n, h in enumerate(range(25_001))]
    assert [len(b) for b in _delivery.month_batches(records)] == [10_000, 10_000, 5_001]
    meter = Delivery("http://127.0.0.1:9", "tc_x", tmp_path)
    real, calls = _spool._write_synced, []

    def disk_full_at_the_second(path: Path, text: str) -> Path:
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(path, text)

    monkeypatch.setattr(_spool, "_write_synced", disk_full_at_the_second)
    with pytest.raises(_delivery.Unspooled, match="No space left") as failed:
        meter.submit(records)
    assert failed.value.records == records  # all of them are given back, none is on disk
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rejected"]
    monkeypatch.setattr(_spool, "_write_synced", real)
    meter.submit(records)
    bodies = [json.loads(p.read_text())["body"]["records"] for p in spooled(tmp_path)]
    assert [r for b in bodies for r in b] == records


def test_a_rename_failing_midway_gives_back_only_the_batches_not_spooled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two batches (two months); the folder fails between the renames: the first batch is on
    disk (it will be posted), so only the second's records come back to the meter."""
    from tenantcost_meter import _delivery, _spool

    records = [cell(30, 23, "client-a", 1, 0.0, month=11), cell(1, 0, "client-a", 2, 0.0)]
    meter = Delivery("http://127.0.0.1:9", "tc_x", tmp_path)
    real, calls = os.replace, []

    def second_rename_fails(src: Any, dst: Any) -> None:
        calls.append(dst)
        if len(calls) == 2:
            raise FileNotFoundError(2, "No such file or directory")
        real(src, dst)

    monkeypatch.setattr(_spool.os, "replace", second_rename_fails)
    with pytest.raises(_delivery.Unspooled) as failed:
        meter.submit(records)
    monkeypatch.setattr(_spool.os, "replace", real)
    assert failed.value.records == records[1:]
    assert [json.loads(p.read_text())["body"]["records"] for p in spooled(tmp_path)] == [
        records[:1]]  # fmt: skip
    assert not list(tmp_path.glob("*.tmp"))


def test_flush_is_false_when_a_batch_was_rejected(served: Served, tmp_path: Path) -> None:
    """A batch for the closed month 2026-11 is refused for good (409): flush() says False,
    although everything else was stored; the next flush, with nothing refused, says True."""
    from tenantcost_meter import Meter

    meter = Meter("api", served.service.url, served.token, flush_seconds=3600,
                  spool_dir=tmp_path)  # fmt: skip
    try:
        meter._stop.set()  # no flusher: this test's flushes are the only deliveries
        assert meter._thread is not None
        meter._thread.join(timeout=30)
        meter._delivery.submit([cell(2, 0, "client-a", 1, 0.0, month=11)])
        with meter.record(tenant="meter-flush"):
            pass
        assert meter.flush(timeout=30) is False
        assert len(list((tmp_path / "rejected").glob("*.json"))) == 1 and not spooled(tmp_path)
        assert served.requests_now("meter-flush") == {"meter-flush": 1}
        assert meter.flush(timeout=30) is True
    finally:
        meter.close(timeout=5)


@contextmanager
def tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on ``folder`` (skips the test where mounting is refused)."""
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs",
                              str(folder)], capture_output=True, text=True)  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root or CAP_SYS_ADMIN): {mounted.stderr}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def fill(folder: Path) -> Path:
    """A file filling ``folder``'s filesystem to the last byte."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for chunk in (b"x" * 65536, b"x" * 512):
            while True:
                try:
                    os.write(fd, chunk)
                except OSError:
                    break
    finally:
        os.close(fd)
    return filler


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["full", "removed"])
def test_usage_the_spool_cannot_take_is_kept_and_delivered_once_it_can(
    served: Served, tmp_path: Path, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A real Meter flushing every 0.1 s while its spool's filesystem is full (a small
    tmpfs), or its folder is removed: nothing is stored, and nothing is lost. Once the
    filesystem has room again, or the folder is back, every request counted arrives, once."""
    from tenantcost_meter import Meter

    prefix = f"meter-{fault}-"
    sent: dict[str, int] = {}

    def requests(meter: Meter, count: int) -> None:
        for n in range(count):
            client = prefix + "abc"[n % 3]
            with meter.record(tenant=client):
                pass
            sent[client] = sent.get(client, 0) + 1
            time.sleep(0.01)

    with ExitStack() as stack:
        spool = tmp_path / "spool"
        if fault == "full":
            spool = stack.enter_context(tmpfs(tmp_path / "fs", "256k")) / "spool"
        meter = Meter("api", served.service.url, served.token, flush_seconds=0.1,
                      spool_dir=spool)  # fmt: skip
        stack.callback(meter.close, timeout=5)
        requests(meter, 30)
        assert meter.flush(timeout=30) is True
        filler = fill(spool.parent) if fault == "full" else None
        if fault == "removed":
            shutil.rmtree(spool)
        with caplog.at_level(logging.WARNING, logger="tenantcost_meter"):
            requests(meter, 90)  # about a second: ten flushes fail
            assert meter.flush(timeout=30) is False
        said = [r.getMessage() for r in caplog.records if "could not be spooled" in r.getMessage()]
        assert len(said) == 1 and not [r for r in caplog.records if r.levelname == "ERROR"], said
        assert served.requests_now(prefix) == {prefix + c: 10 for c in "abc"}
        if filler is not None:
            filler.unlink()
        else:
            spool.mkdir()
        requests(meter, 30)
        deadline = time.monotonic() + 60
        while not meter.flush(timeout=30):
            assert time.monotonic() < deadline, "the usage kept was not delivered"
            time.sleep(0.1)
        assert served.requests_now(prefix) == sent == {prefix + c: 50 for c in "abc"}


@contextmanager
def dripping_server(seconds_per_byte: float) -> Iterator[str]:
    """A server that reads a request and answers 200, one byte every ``seconds_per_byte``."""
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
    stop = threading.Event()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def drip(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                conn.recv(65536)
                for byte in answer:
                    conn.sendall(bytes([byte]))
                    if stop.wait(seconds_per_byte):
                        return
            except OSError:
                return

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=drip, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()


@pytest.mark.timing
def test_close_flush_and_a_post_are_bounded_against_an_answer_dripped_slowly(
    tmp_path: Path,
) -> None:
    """The server drips its 200 a byte every 0.25 s (about 16 s in all), which no socket
    timeout catches: flush(timeout=1), close(timeout=1) and a POST under the delivery's own
    timeout each end on time, and the batch stays spooled."""
    from tenantcost_meter import Meter

    with dripping_server(0.25) as url:
        took = {}
        post = Delivery(url, "tc_x", tmp_path / "post", timeout=1.0)
        post.submit(traffic(13, 1)[0])
        started = time.monotonic()
        assert post.deliver() is False
        took["post"] = time.monotonic() - started
        meter = Meter("api", url, "tc_x", flush_seconds=3600, spool_dir=tmp_path / "meter")
        with meter.record(tenant="client-a"):
            pass
        started = time.monotonic()
        assert meter.flush(timeout=1.0) is False
        took["flush"] = time.monotonic() - started
        started = time.monotonic()
        meter.close(timeout=1.0)  # within the backoff: one more attempt, cut at the end
        took["close"] = time.monotonic() - started
    assert all(0.8 < seconds < 1.6 for seconds in took.values()), took
    assert len(spooled(tmp_path / "post")) == 1 and len(spooled(tmp_path / "meter")) == 1

"""Read per-client usage from Prometheus into the canonical usage table.

Configuration is :class:`tenantcost.config.sources.PrometheusSource` (``sources.prometheus`` in
the rule file): one PromQL template per usage column, by default
``sum by (client, service) (increase(app_requests_total[1h]))`` for ``requests`` and the same
over ``app_cpu_seconds_total`` for ``cpu_seconds``. Each query is evaluated at every window
end; its value there is the usage of the window that ends at that time.

**One range query per column.** A range query (``/api/v1/query_range``) with ``start`` = the
first window end, ``end`` = the last window end and ``step`` = the window length evaluates the
expression at exactly the times ``start + k * step``, and Prometheus evaluates each of those
steps as an independent instant query at that time (same range selection ``[t - 1h, t]``, same
``increase``, same aggregation). So it returns the same numbers as one instant query per window
end, in one request per column instead of one per window. Periods longer than
:data:`MAX_POINTS` windows are split into several range queries (Prometheus refuses more than
11,000 points per series).

**What the reader guarantees.**

- Counter resets are handled by ``increase`` (Prometheus adds the value before the reset).
- A series without the client label is usage without a client id: ``client`` is ``""``
  (unattributed). A series without the service label is an error naming the query.
- Missing windows are reported, not invented. A (service, client) pair that has a sample in
  some window of the period but none in others gets one :func:`tenantcost.errors.warn` per
  column and service, naming the clients and the missing windows as time ranges. No row is
  created for a window in which no query has a sample. When one query has a sample for a
  (window, service, client) and another has none, the row exists (for the query that has data)
  and the other column is 0.0 there; that window is part of the warning for that column. For
  allocation, a 0 measure and an absent row give the client the same (zero) share.
- Values arrive as strings and are converted to float64; NaN, infinite or negative values, and
  two series with the same (service, client) in one query, are errors.
- Client label values and windows meet the rules of every usage reader
  (:func:`tenantcost.readers.usage.check_usage_keys`: valid client ids, windows that cross
  no hour boundary off the hour, as a period starting at 10:30 with a 1h step would).
- Connection problems, timeouts, HTTP errors and Prometheus' own error responses (bad PromQL)
  become :class:`tenantcost.errors.InputError` naming the URL (without credentials) and the
  problem, quoting Prometheus' message; no traceback.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import requests
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from urllib3.util.retry import Retry

from tenantcost.client_id import bad_client_ids, client_id_problem
from tenantcost.config.sources import PrometheusSource
from tenantcost.errors import InputError, warn
from tenantcost.gauges import LEVEL_PLACES
from tenantcost.readers.samples import empty_samples
from tenantcost.readers.usage import check_usage_keys
from tenantcost.tables import empty_usage
from tenantcost.timefmt import ISO_Z_FORMAT, iso_z_seconds

MAX_POINTS = 10_000
"""Most window ends per range query (Prometheus' limit is 11,000 points per series)."""

MAX_CLIENTS_NAMED = 5
"""Clients listed by name in one missing-data warning; the rest are counted."""

_RETRY = Retry(
    total=2,
    connect=1,
    read=0,
    backoff_factor=0.5,
    status_forcelist=(502, 503, 504),
    allowed_methods=("GET",),
    raise_on_status=False,
)


def read_prometheus_usage(
    source: PrometheusSource,
    start: pd.Timestamp,
    end: pd.Timestamp,
    gauges: Collection[str] = (),
) -> pd.DataFrame:
    """The canonical usage table for the windows of ``source.step`` from ``start`` to ``end``.

    ``start`` and ``end`` are window boundaries (UTC if naive; whole seconds); ``end - start``
    must be a whole number of steps. Each column's query is evaluated at every window end
    (``start + step``, ..., ``end``) with one range query (see the module docstring). Rows are
    sorted by window, service and client; ``origin`` reads
    ``prometheus <url> query '<column>' at <window end>``.
    """
    step = source.step_timedelta
    first_end, last_end = _period(start, end, step)
    window_ends = pd.date_range(first_end, last_end, freq=step).as_unit("ns")
    columns = [c for c in source.queries if c not in gauges]  # gauges: read_prometheus_samples
    url = _display_url(source.url)
    if last_end > pd.Timestamp.now(tz="UTC"):
        warn(
            f"prometheus {url}: the period ends at {iso_z_seconds(last_end)}, in the future; the "
            "windows after now are incomplete or missing"
        )

    samples, pairs = _query_columns(source, columns, window_ends, url)

    for column, (_, values) in zip(columns, samples, strict=True):
        if not len(values):
            warn(
                f"prometheus {url} query '{column}': no data between "
                f"{iso_z_seconds(first_end - step)} and {iso_z_seconds(last_end)} "
                f"({source.render(column)})"
            )
    if not pairs:
        return empty_usage(columns)

    # Row key = window slot * number of pairs + rank of (service, client): sorting the keys
    # sorts the table by window, service and client.
    names = sorted(pairs)
    rank = np.empty(len(pairs), dtype=np.int64)
    rank[[pairs[name] for name in names]] = np.arange(len(names))
    n_windows, n_pairs = len(window_ends), len(names)
    row_keys = [(keys % n_windows) * n_pairs + rank[keys // n_windows] for keys, _ in samples]
    rows = np.sort(np.concatenate(row_keys))  # each column's keys are unique; dedupe:
    rows = rows[np.concatenate(([True], rows[1:] != rows[:-1]))]
    if not len(rows):
        return empty_usage(columns)
    table = np.full((len(columns), len(rows)), np.nan)
    for i, (keys, (_, values)) in enumerate(zip(row_keys, samples, strict=True)):
        table[i, np.searchsorted(rows, keys)] = values
    slot, pair = rows // n_pairs, rows % n_pairs
    present = ~np.isnan(table)
    _report_missing(present, slot, pair, names, columns, window_ends, step, url)

    ends = window_ends[slot]
    ends_text = window_ends.strftime(ISO_Z_FORMAT)
    origins = [f"prometheus {url} query '{c}' at {t}" for c in columns for t in ends_text]
    usage = pd.DataFrame(
        {
            "window_start": pd.Series(ends - step, dtype="datetime64[ns, UTC]"),
            "window_end": pd.Series(ends, dtype="datetime64[ns, UTC]"),
            "service": _take([s for s, _ in names], pair),
            "client": _take([c for _, c in names], pair),
            **{
                c: pd.Series(np.where(present[i], table[i], 0.0), dtype="float64")
                for i, c in enumerate(columns)
            },
            "origin": _take(origins, present.argmax(axis=0) * n_windows + slot),
        }
    )
    check_usage_keys(usage["window_start"], usage["window_end"], usage["client"],
                     lambda position: (None, str(usage["origin"].iloc[position])))  # fmt: skip
    return usage


def read_prometheus_samples(
    source: PrometheusSource, gauges: Sequence[str], start: pd.Timestamp, end: pd.Timestamp
) -> pd.DataFrame:
    """Gauge samples: each gauge column's query (the level, such as ``sum by (client,
    service) (tenant_storage_bytes)``) evaluated at every step from ``start`` to
    ``end - step`` in one range query per column; each value is the level of its series at
    that instant (:mod:`tenantcost.readers.samples`' table, ``origin`` naming the query).
    Prometheus' values are floats: each is kept as the shortest decimal of the float rounded
    to :data:`~tenantcost.gauges.LEVEL_PLACES` places (a float's further digits are noise)."""
    step = source.step_timedelta
    first, last = _period(start, end, step)
    instants = pd.date_range(first - step, last - step, freq=step).as_unit("ns")
    url = _display_url(source.url)
    found, pairs = _query_columns(source, gauges, instants, url)
    names = sorted(pairs, key=pairs.__getitem__)  # by pair id
    frames = []
    for column, (keys, values) in zip(gauges, found, strict=True):
        pair, slot = keys // len(instants), keys % len(instants)
        levels = pc.cast(pa.array(np.round(values, LEVEL_PLACES)), pa.string())
        frames.append(
            pd.DataFrame(
                {
                    "metric": column,
                    "service": _take([s for s, _ in names], pair),
                    "client": _take([c for _, c in names], pair),
                    "t_us": instants[slot].asi8 // 1000,
                    "value": pd.Series(levels, dtype="str"),
                    "origin": f"prometheus {url} query '{column}'",
                }
            )
        )
    samples = pd.concat(frames, ignore_index=True) if frames else empty_samples()
    bad = bad_client_ids(samples["client"]).to_numpy()
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        raise InputError(
            client_id_problem(str(samples["client"].iloc[position])) or "client id refused",
            file=f"prometheus {url}",
            where=f"query '{samples['metric'].iloc[position]}'",
        )
    return samples


def _query_columns(
    source: PrometheusSource, columns: Sequence[str], times: pd.DatetimeIndex, url: str
) -> tuple[list[tuple[np.ndarray, np.ndarray]], dict[tuple[str, str], int]]:
    """Each column's range query over ``times`` (:func:`_query_column`), through one client,
    and the (service, client) pairs their keys number."""
    client, responses = _connect(source)
    pairs: dict[tuple[str, str], int] = {}
    try:
        found = [
            _query_column(client, responses, source, column, times, url, pairs)
            for column in columns
        ]
    finally:
        client.close()
    return found, pairs


def _connect(source: PrometheusSource) -> tuple[PrometheusConnect, list[requests.Response]]:
    """A client of ``source`` and the list its responses are recorded in (for errors)."""
    session = requests.Session()
    responses: list[requests.Response] = []
    session.hooks["response"].append(lambda response, *args, **kwargs: responses.append(response))
    client = PrometheusConnect(
        url=source.url,
        headers=dict(source.headers) or None,
        retry=_RETRY,
        auth=(
            (source.basic_auth.username, source.basic_auth.password.get_secret_value())
            if source.basic_auth
            else None
        ),
        session=session,
        timeout=source.timeout_seconds,
    )
    return client, responses


def _take(texts: list[str], codes: np.ndarray) -> pd.Series:
    """``texts[codes]`` as a ``str`` column, without a Python object per row."""
    return pd.Series(pa.array(texts, pa.large_string()).take(pa.array(codes)), dtype="str")


# --------------------------------------------------------------------------- period


def _period(
    start: pd.Timestamp, end: pd.Timestamp, step: pd.Timedelta
) -> tuple[pd.Timestamp, pd.Timestamp]:
    """(first window end, last window end), after checking the period fits the step."""
    start, end = _utc(start, "start"), _utc(end, "end")
    if end <= start:
        raise InputError(
            f"period end {iso_z_seconds(end)} is not after its start {iso_z_seconds(start)}"
        )
    for name, ts in (("start", start), ("end", end)):
        if ts != ts.floor("s"):
            raise InputError(f"period {name} {ts.isoformat()} must be a whole second")
    if (end - start) % step != pd.Timedelta(0):
        raise InputError(
            f"period {iso_z_seconds(start)} to {iso_z_seconds(end)} is not a whole number of "
            f"{_step_text(step)} windows"
        )
    return start + step, end


def _utc(value: Any, name: str) -> pd.Timestamp:
    try:
        ts = pd.Timestamp(value)
    except (TypeError, ValueError):
        raise InputError(f"period {name}: not a date or time: {value!r}") from None
    if ts is pd.NaT:
        raise InputError(f"period {name}: not a date or time: {value!r}")
    ts = ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")
    return ts.as_unit("ns")


# --------------------------------------------------------------------------- querying


def _query_column(
    client: PrometheusConnect,
    responses: list[requests.Response],
    source: PrometheusSource,
    column: str,
    window_ends: pd.DatetimeIndex,
    url: str,
    pairs: dict[tuple[str, str], int],
) -> tuple[np.ndarray, np.ndarray]:
    """One column's samples as (keys, values): key = pair id * number of windows + slot.

    ``pairs`` maps (service, client) to a pair id shared by all columns; new pairs are added.
    """
    query = source.render(column)
    step_seconds = str(int(source.step_timedelta.total_seconds()))
    keys: list[np.ndarray] = []
    values: list[np.ndarray] = []
    for chunk_start in range(0, len(window_ends), MAX_POINTS):
        chunk = window_ends[chunk_start : chunk_start + MAX_POINTS]
        responses.clear()
        try:
            data = client.custom_query_range(
                query,
                start_time=chunk[0].to_pydatetime(),
                end_time=chunk[-1].to_pydatetime(),
                step=step_seconds,
                params={"timeout": f"{source.timeout_seconds:g}"},
            )
        except PrometheusApiClientException:
            raise _http_error(responses, source, column, query, url) from None
        except requests.exceptions.RequestException as exc:
            raise _connection_error(exc, source, url) from None
        except (ValueError, KeyError, TypeError):
            raise InputError(
                "the answer is not a Prometheus API response (expected JSON with "
                "data.result); check the url",
                file=f"prometheus {url}",
            ) from None
        if not isinstance(data, list):
            raise InputError(
                "the answer is not a Prometheus API response (data.result is not a list)",
                file=f"prometheus {url}",
            )
        chunk_keys, chunk_values = _samples(data, source, column, query, window_ends, url, pairs)
        keys.append(chunk_keys)
        values.append(chunk_values)
    return np.concatenate(keys), np.concatenate(values)


def _samples(
    results: list[dict[str, Any]],
    source: PrometheusSource,
    column: str,
    query: str,
    window_ends: pd.DatetimeIndex,
    url: str,
    pairs: dict[tuple[str, str], int],
) -> tuple[np.ndarray, np.ndarray]:
    """Flatten one range-query answer into (keys, values), checking labels and values."""
    where = f"query '{column}'"
    place = f"prometheus {url}"
    labels = [r.get("metric") or {} for r in results]
    services = [m.get(source.service_label, "") for m in labels]
    clients = [m.get(source.client_label, "") for m in labels]
    for metric, service in zip(labels, services, strict=True):
        if not service:
            raise InputError(
                f"a series has no '{source.service_label}' label: {_labels_text(metric)}; "
                f"every series must name its service, e.g. sum by ({source.client_label}, "
                f"{source.service_label}) (...); query: {query}",
                file=place,
                where=where,
            )
    ids = [pairs.setdefault(pair, len(pairs)) for pair in zip(services, clients, strict=True)]
    if len(set(ids)) < len(ids):
        first: dict[int, int] = {}
        for i, pair_id in enumerate(ids):
            if pair_id in first:
                raise InputError(
                    f"two series have the same {source.service_label} '{services[i]}' and "
                    f"{source.client_label} {_client_text(clients[i])}: "
                    f"{_labels_text(labels[first[pair_id]])} and {_labels_text(labels[i])}; "
                    f"aggregate the other labels away, e.g. sum by ({source.client_label}, "
                    f"{source.service_label}) (...); query: {query}",
                    file=place,
                    where=where,
                )
            first[pair_id] = i
    series = [r.get("values") or [] for r in results]
    lengths = np.fromiter((len(v) for v in series), dtype=np.int64, count=len(series))
    flat = [point for points in series for point in points]
    seconds = np.fromiter((p[0] for p in flat), dtype="float64", count=len(flat))
    try:
        numbers = (
            pc.cast(pa.array([p[1] for p in flat], type=pa.string()), pa.float64())
            .to_numpy(zero_copy_only=False)
            .astype("float64")
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise InputError(
            f"a value is not a number ({exc}); query: {query}", file=place, where=where
        ) from None
    pair_of = np.repeat(np.asarray(ids, dtype=np.int64), lengths)
    step_ms = int(source.step_timedelta.total_seconds()) * 1000
    offset = np.rint(seconds * 1000).astype(np.int64) - window_ends[0].value // 1_000_000
    slot = offset // step_ms
    outside = (offset % step_ms != 0) | (slot < 0) | (slot >= len(window_ends))
    if outside.any():
        at = pd.Timestamp(float(seconds[int(np.flatnonzero(outside)[0])]), unit="s", tz="UTC")
        raise InputError(
            f"Prometheus returned a sample at {at.isoformat()}, which is not a window end; "
            f"query: {query}",
            file=place,
            where=where,
        )
    bad = ~np.isfinite(numbers) | (numbers < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        number = float(numbers[i])
        shown = "NaN" if np.isnan(number) else repr(number)
        service, client = services[ids.index(int(pair_of[i]))], clients[ids.index(int(pair_of[i]))]
        raise InputError(
            f"value {shown} for {source.service_label} '{service}', {source.client_label} "
            f"{_client_text(client)} at {iso_z_seconds(window_ends[int(slot[i])])}: usage must "
            "be a "
            f"finite number >= 0; query: {query}",
            file=place,
            where=where,
        )
    return pair_of * len(window_ends) + slot, numbers


def _http_error(
    responses: list[requests.Response],
    source: PrometheusSource,
    column: str,
    query: str,
    url: str,
) -> InputError:
    """An InputError for a non-200 answer, quoting Prometheus' own error when it sent one."""
    place = f"prometheus {url}"
    where = f"query '{column}'"
    response = responses[-1] if responses else None
    if response is None:
        return InputError("the request failed without an answer", file=place, where=where)
    status = response.status_code
    if status in (401, 403):
        how = "basic_auth" if source.basic_auth else "headers" if source.headers else "nothing"
        return InputError(
            f"HTTP {status}: access refused; credentials sent: {how} "
            "(check sources.prometheus.basic_auth / headers)",
            file=place,
        )
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("error"):
        kind = f"{body['errorType']}, " if body.get("errorType") else ""
        return InputError(
            f"Prometheus rejected the query (HTTP {status}, {kind}{body['error']}); query: {query}",
            file=place,
            where=where,
        )
    text = " ".join(response.text.split())[:200]
    return InputError(f"HTTP {status} {response.reason}: {text}", file=place, where=where)


def _connection_error(
    exc: requests.exceptions.RequestException, source: PrometheusSource, url: str
) -> InputError:
    """An InputError for a request that got no usable answer (connection, TLS, timeout)."""
    place = f"prometheus {url}"
    if isinstance(exc, requests.exceptions.Timeout):
        return InputError(
            f"no answer within {source.timeout_seconds:g} s (timeout_seconds)", file=place
        )
    if isinstance(exc, requests.exceptions.SSLError):
        return InputError(f"TLS error: {_reason(exc)}", file=place)
    if isinstance(exc, requests.exceptions.ConnectionError):
        return InputError(f"cannot connect: {_reason(exc)}", file=place)
    return InputError(f"request failed: {_reason(exc)}", file=place)


def _reason(exc: BaseException) -> str:
    """The innermost human part of a requests/urllib3 error ("Connection refused", ...)."""
    text = str(exc)
    errno = re.findall(r"\[Errno -?\d+\] ([^'\")\]]+)", text)
    if errno:
        return errno[-1].strip()
    caused = re.findall(r"\(Caused by \w+\((.*)\)\)", text)
    if caused:
        text = caused[-1]
    return " ".join(text.split())[:200] or type(exc).__name__


# --------------------------------------------------------------------------- missing data


def _report_missing(
    present: np.ndarray,
    slot: np.ndarray,
    pair: np.ndarray,
    names: list[tuple[str, str]],
    columns: list[str],
    window_ends: pd.DatetimeIndex,
    step: pd.Timedelta,
    url: str,
) -> None:
    """Warn, per column and service, about windows a known (service, client) pair lacks.

    ``present[i, r]``: column ``i`` has a sample in row ``r``, whose window slot and pair are
    ``slot[r]`` and ``pair[r]`` (an index into ``names``). A pair is known when any query has a
    sample for it in the period. Pairs of one service with the same missing windows share one
    warning.
    """
    n = len(window_ends)
    first_start = window_ends[0] - step
    for i, column in enumerate(columns):
        has = present[i]
        if not has.any():
            continue  # already reported as "no data"
        counts = np.bincount(pair[has], minlength=len(names))
        gappy = np.flatnonzero(counts < n)
        if not len(gappy):
            continue
        row_of = np.full(len(names), -1, dtype=np.int64)
        row_of[gappy] = np.arange(len(gappy))
        seen = np.zeros((len(gappy), n), dtype=bool)
        rows = row_of[pair[has]]
        keep = rows >= 0
        seen[rows[keep], slot[has][keep]] = True
        patterns, pattern_of = np.unique(~seen, axis=0, return_inverse=True)
        groups: dict[tuple[str, int], list[str]] = {}
        for pair_index, pattern in zip(gappy.tolist(), np.ravel(pattern_of).tolist(), strict=True):
            service, client = names[pair_index]
            groups.setdefault((service, pattern), []).append(client)
        for (service, pattern), clients in sorted(groups.items()):
            missing = np.flatnonzero(patterns[pattern])
            named = ", ".join(_client_text(c) for c in clients[:MAX_CLIENTS_NAMED])
            if len(clients) > MAX_CLIENTS_NAMED:
                named += f" and {len(clients) - MAX_CLIENTS_NAMED} more"
            label = "client" if len(clients) == 1 else "clients"
            warn(
                f"prometheus {url} query '{column}': service '{service}', {label} {named}: "
                f"no sample for {len(missing)} of {n} {_step_text(step)} windows "
                f"({_ranges(missing, first_start, step)}); those windows are reported, not "
                f"filled: no row where no query has data, else '{column}' is 0 in that row"
            )


def _ranges(slots: np.ndarray, first_start: pd.Timestamp, step: pd.Timedelta) -> str:
    """Consecutive window slots as ``2024-03-04 06:00 to 09:00 UTC`` ranges."""
    breaks = np.flatnonzero(np.diff(slots) != 1)
    starts = np.concatenate(([slots[0]], slots[breaks + 1]))
    ends = np.concatenate((slots[breaks], [slots[-1]]))
    parts = []
    for a, b in zip(starts, ends, strict=True):
        begin = first_start + int(a) * step
        finish = first_start + (int(b) + 1) * step
        same_day = begin.normalize() == finish.normalize()
        tail = finish.strftime("%H:%M" if same_day else "%Y-%m-%d %H:%M")
        parts.append(f"{begin:%Y-%m-%d %H:%M} to {tail} UTC")
    return ", ".join(parts)


# --------------------------------------------------------------------------- text helpers


def _display_url(url: str) -> str:
    """The URL without user:password, for messages and ``origin``."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def _step_text(step: pd.Timedelta) -> str:
    seconds = int(step.total_seconds())
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _client_text(client: str) -> str:
    return f"'{client}'" if client else "'' (no client label)"


def _labels_text(metric: dict[str, str]) -> str:
    inner = ", ".join(f'{k}="{v}"' for k, v in sorted(metric.items()))
    return "{" + inner + "}"

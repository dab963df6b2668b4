"""The largest numbers tenantcost holds exactly, and why each limit is where it is.

Amounts are ``int64`` micro-units (``tenantcost.money``) and measures are integers of 10^-6
of their unit (``tenantcost.split``). Both come from IEEE doubles (CSV text, Parquet, JSON)
and both are summed and multiplied. Each limit below keeps one of those steps exact; a value
beyond a limit is refused by its reader with a one-line :class:`~tenantcost.errors.InputError`
(file, row or JSON path, column) instead of being silently rounded, wrapped or overflowed.

The chain of reasoning, in short:

* a cost row converts to the right micro-unit while ``value * 10^6`` carries less than half a
  micro-unit of double rounding error: :data:`MAX_COST_PER_ROW`;
* every sum of amounts (a pool, a client's period total, a cascade line, the reference
  total) is a sum of non-negative parts of the costs of a run plus its external costs, so
  capping those two totals (:data:`MAX_AMOUNT_TOTAL`) keeps every ``int64`` sum (up to
  9.22e18) exact, with room for differences such as the cascade gap;
* a split computes ``floor(P * w / W)`` and its remainder in 128-bit integers (DuckDB
  ``HUGEINT``, up to 1.7e38) in two limbs of :data:`SPLIT_LIMB`; with ``P <=``
  :data:`MAX_AMOUNT_TOTAL` and ``W <=`` :data:`MAX_POOL_MEASURE` no intermediate exceeds
  2e37;
* a usage value of at most :data:`MAX_USAGE_VALUE` becomes a measure of at most 1e21
  micro-units, so a pool needs a million rows at the limit before it reaches
  :data:`MAX_POOL_MEASURE`.

This module imports nothing heavy: readers, rule-file models and the split all import it.
"""

from __future__ import annotations

MAX_COST_PER_ROW = 1_000_000_000
"""Largest cost of one input row (or one component of it), in currency units: one billion.

A cost is read as a double and converted to micro-units by rounding ``value * 10^6``. Two
double roundings (reading the text, multiplying) move the product by at most
``2 * 2^-53 * value * 10^6``, which stays below half a micro-unit up to about 2.2e9 currency
units; so below this limit a figure written with six decimals or fewer (OpenCost writes five)
converts to exactly its micro-units. No real cost row (one container for one day, one
workload for one hour) comes near it; a corrupt export (``totalCost: 1e19``) does."""

MAX_MICROS_PER_ROW = MAX_COST_PER_ROW * 1_000_000
""":data:`MAX_COST_PER_ROW` in micro-units (1e15)."""

MAX_AMOUNT_TOTAL = 10**18
"""Largest total, in micro-units (one trillion currency units), of the costs read for a run,
and separately of its external costs.

Amounts are ``int64`` (at most 9.22e18). Every amount is >= 0, so every sum tenantcost forms
(a pool in a window, a client's period total, each cascade line, the reference total of
costs plus external costs) is at most the sum of these two totals, 2e18: exact in ``int64``
with a margin for differences. The cost readers check the running total and name the row at
which it passes this limit."""

MAX_EXTERNAL_AMOUNT = 1_000_000
"""Largest ``amount`` of one external cost in the rule file, in currency units (per hour or
per month): one million.

External costs accrue in ``int64`` from epoch seconds (``tenantcost.external``):
``amount_micros / 3600 * epoch_seconds`` must stay below 9.22e18 up to 2262, the last year a
timestamp can hold, which allows about 3.6e12 micro-units an hour; this limit (1e12) keeps a
factor of 3.6 below that. The total of the external costs of a run is then checked against
:data:`MAX_AMOUNT_TOTAL` like the costs."""

MEASURE_SCALE = 1_000_000
"""Measures are held as integers of 10^-6 of their unit (requests, CPU-seconds, ...), in
128-bit integers: a usage value up to :data:`MAX_USAGE_VALUE` (1e15) is 1e21
micro-units, beyond ``int64``."""

MAX_USAGE_VALUE = 1e15
"""Largest usage value of one row, in the metric column's own unit (requests, bytes, CPU
seconds): 1e15.

A counter such as bytes transferred reaches 1e12 an hour for one client, so 1e15 leaves three
orders of magnitude. A value is held as its double and quantised to micro-units of its unit
(``round_half_even(value * 10^6)``, at most 1e21) in a 128-bit integer; larger values would
still fit, but they are corrupt data far more often than real usage, and the limit keeps the
pool sums (:data:`MAX_POOL_MEASURE`) far from their own limit."""

MAX_CONTRACT_WEIGHT = 1e12
"""Largest contract weight in a rule file's ``{weights: {client: w}}`` key.

Weights are relative (``{a: 2, b: 1}``); quantised to micro-units they must fit ``int64``
(1e18 at this limit)."""

MAX_POOL_MEASURE = 10**27
"""Largest sum of the measures of one pool (one window, its key, its clients), in micro-units
of the key's unit (1e21 units, a million rows at :data:`MAX_USAGE_VALUE`).

With the pool amount at most :data:`MAX_AMOUNT_TOTAL` and limbs of :data:`SPLIT_LIMB`, the
split's largest intermediate is ``2 * MAX_POOL_MEASURE * SPLIT_LIMB = 2e37``, below the 1.7e38
of a 128-bit integer. Only a sum can pass it, so the split names the window and key."""

SPLIT_LIMB = 10**10
"""The pool amount is split as ``P = P1 * SPLIT_LIMB + P0`` so that ``P * w`` is never formed
whole: ``P1 * w <= 10^8 * 10^27`` and ``P0 * w < 10^10 * 10^27``."""

INT64_MAX = 2**63 - 1
"""The largest ``int64`` (amounts, ``BIGINT`` in DuckDB)."""

FIRST_MONTH = "2000-01"
"""The first month tenantcost accepts (``YYYY-MM``, UTC), in every command, route and input.

Months and timestamps outside 2000-01 .. 2099-12 are typing errors or corrupt exports far more
often than real data (``0000-01``, ``9999-12``, a nanosecond count near 2^63); they also break
the calendar arithmetic of the month ends (``9999-12`` has no next month in ``datetime``).
One range, checked where the text is parsed, keeps every later step total."""

LAST_MONTH = "2099-12"
"""The last month tenantcost accepts; see :data:`FIRST_MONTH`."""

EARLIEST_INSTANT_ISO = "2000-01-01T00:00:00+00:00"
"""The earliest instant of any input (the start of :data:`FIRST_MONTH`)."""

LATEST_INSTANT_ISO = "2100-01-01T00:00:00+00:00"
"""The end (exclusive) of the instants of any input (the end of :data:`LAST_MONTH`)."""

MAX_UTC_OFFSET_MINUTES = 14 * 60
"""The largest UTC offset a timestamp may carry (±14:00, the range of real time zones and of
RFC 3339 in practice); ``+25:00`` is refused."""

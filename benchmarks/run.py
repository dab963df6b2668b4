"""Benchmark tenantcost against the plain-DuckDB reference on the same generated data.

    python benchmarks/run.py                       # small and large, 3 runs each
    python benchmarks/run.py --cases small --repeat 5
    python benchmarks/run.py --cases large --engine-args "--engine dask --workers 2"

For each case the data set is generated once into ``--data-dir/<case>`` (reused while its
``meta.json`` matches the case). Then, ``--repeat`` times and alternately, two separate
processes run on it:

* tenantcost: ``tenantcost allocate --config DIR/rules.yaml --from START --to END --format json``
  (the whole JSON document, what a user runs) and ``... --out DIR`` (every file it writes),
  one table row each (``--allocate-output json,out``, the default), plus ``--engine-args``;
* the reference: ``python benchmarks/reference.py --config DIR/rules.yaml --from ... --to ...``
  (its query, ``reference.sql``, is the yardstick and is not changed).

Measured per run: wall time (spawn to exit), peak RSS of the whole process tree (psutil,
sampled every 50 ms, sum of the process and all its descendants), and the kernel's maximum
resident set size of the process and the children it waited for (``ru_maxrss`` from
``os.wait4``, the counter ``/usr/bin/time`` reports; a cross-check of the sampled peak for
single-process runs). Every run's per-client totals are compared with the reference's to the
micro-unit; any difference is printed and makes the script exit with status 1.

A separate section measures start-up: the installed ``tenantcost`` console script (the one
next to this Python, not a shell shim) running ``--help`` and ``check-config`` on the
bundled example, warm (one unmeasured run first), median of ``--startup-repeat`` (5) wall
times, and which heavy modules each imports (``python -X importtime``): none should.

    python benchmarks/run.py --sections startup    # only the start-up section

Two more sections: ``report`` times ``tenantcost report --month 2026-10 --format html,md``
(every client, the whole process, peak RSS) on one month of 300 and 10,000 clients
(``--report-cases``); ``pdf`` gives PDF pages per second per core, the PDF writer of
``report --jobs N`` on pages of the 300-client month (``--pdf-clients``, ``--pdf-jobs``),
and the Dask writer of ``report --engine dask --workers N`` (``--pdf-dask-workers``).
``csv`` (benchmarks/csv_usage.py): ``allocate`` on the 300-client month's usage as one CSV
file against the same rows as Parquet (``--csv-case``).
``store`` (on demand, benchmarks/store.py): ingest rows/s and ``run --month`` against
``allocate`` on SQLite and PostgreSQL (``--store-cases``, ``--store-backends``).
``billing`` (on demand, benchmarks/billing_section.py): ``allocate`` on the small case with a
10 M-row FOCUS billing file against without, and the plain DuckDB query that bounds it.
``watch`` (on demand, benchmarks/watch_section.py): ``watch`` at mid-month on the store against
``allocate`` on the same hours (``--watch-cases``, default the 10,000-client case).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import pandas as pd
import psutil

HERE = Path(__file__).resolve().parent
CASES: dict[str, dict[str, int]] = {
    "tiny": {"clients": 50, "services": 3, "hours": 48},
    "small": {"clients": 1_000, "services": 10, "hours": 744},
    "large": {"clients": 10_000, "services": 20, "hours": 744},
}
REPORT_CASES: dict[str, dict[str, int]] = {
    "pack300": {"clients": 300, "services": 10, "hours": 744},
    "pack10k": {"clients": 10_000, "services": 20, "hours": 744},
}
"""Report pack cases: one calendar month (October 2026), so ``--month`` and no bridge."""
REPORT_START = "2026-10-01T00:00:00Z"
GENERATED_AT = "2026-11-01T00:00:00Z"
"""``report --generated-at``: every run writes the same pages."""
SAMPLE_SECONDS = 0.05
ALLOCATE_OUTPUTS = {"json": "`--format json`", "out": "`--out DIR`"}
"""What the timed ``allocate`` writes (``--allocate-output``), as the table names it."""


@dataclass
class Run:
    """One measured process run."""

    seconds: float
    peak_rss: int  # bytes, sampled sum over the process tree
    maxrss: int  # bytes, ru_maxrss of wait4 (largest single process, incl. waited children)
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False
    cpu_seconds: float = 0.0  # user + system time of the process and its waited children


@dataclass
class CaseResult:
    case: str
    rows: int
    tenantcost: dict[str, list[Run]] = field(default_factory=dict)  # per --allocate-output
    reference: list[Run] = field(default_factory=list)
    differences: dict[str, list[str]] = field(default_factory=dict)  # per --allocate-output
    errors: list[str] = field(default_factory=list)


def _tree_rss(proc: psutil.Process, seen: dict[int, psutil.Process]) -> int:
    """RSS of ``proc`` and its descendants; remembers every descendant in ``seen``."""
    total = 0
    try:
        members = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    for member in members[1:]:
        seen.setdefault(member.pid, member)
    for member in members:
        with contextlib.suppress(psutil.Error):
            total += member.memory_info().rss
    return total


def measure(cmd: list[str], timeout: float | None, env: dict[str, str] | None = None) -> Run:
    """Run ``cmd``; return its wall time, peak tree RSS, ru_maxrss and output."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        popen = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, start_new_session=True)
        try:
            proc = psutil.Process(popen.pid)
        except psutil.NoSuchProcess:
            proc = None
        peak = 0
        seen: dict[int, psutil.Process] = {}
        done = threading.Event()
        timed_out = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.is_set():
                if proc is not None:
                    peak = max(peak, _tree_rss(proc, seen))
                done.wait(SAMPLE_SECONDS)

        def expire() -> None:
            timed_out.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGKILL)  # the run's own session: its whole tree

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        timer = threading.Timer(timeout, expire) if timeout else None
        if timer is not None:
            timer.start()
        _, status, usage = os.wait4(popen.pid, 0)
        seconds = time.perf_counter() - t0
        done.set()
        if timer is not None:
            timer.cancel()
        sampler.join()
        popen.returncode = os.waitstatus_to_exitcode(status)
        for child in seen.values():  # descendants the run left behind (orphaned workers)
            try:
                if child.is_running():  # psutil checks pid *and* start time
                    child.kill()
            except psutil.Error:
                pass
        out.seek(0)
        err.seek(0)
        return Run(
            seconds=seconds,
            peak_rss=peak,
            maxrss=usage.ru_maxrss * 1024,  # Linux reports KiB
            returncode=popen.returncode,
            stdout=out.read().decode("utf-8", "replace"),
            stderr=err.read().decode("utf-8", "replace"),
            timed_out=timed_out.is_set(),
            cpu_seconds=usage.ru_utime + usage.ru_stime,
        )


def ensure_data(case: str, data_dir: Path, seed: int, layout: str) -> dict[str, object]:
    """Generate the case's data unless a matching ``meta.json`` is already there."""
    params = CASES[case] if case in CASES else REPORT_CASES[case]
    start = None if case in CASES else REPORT_START
    folder = data_dir / case
    meta_file = folder / "meta.json"
    if meta_file.exists():
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
        wanted = {**params, "seed": seed, "layout": layout}
        same_start = start is None or pd.Timestamp(str(meta.get("start"))) == pd.Timestamp(start)
        if same_start and all(meta.get(k) == v for k, v in wanted.items()):
            print(f"[{case}] reusing {folder} ({meta['usage_rows']:,} usage rows)", flush=True)
            return meta
        print(f"[{case}] {folder} holds other parameters: regenerating", flush=True)
    cmd = [
        sys.executable,
        str(HERE / "generate.py"),
        "--clients",
        str(params["clients"]),
        "--services",
        str(params["services"]),
        "--hours",
        str(params["hours"]),
        "--seed",
        str(seed),
        "--layout",
        layout,
        "--out",
        str(folder),
        *(["--start", start] if start else []),
    ]
    print(f"[{case}] generating: {shlex.join(cmd)}", flush=True)
    subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
    meta = json.loads(meta_file.read_text(encoding="utf-8"))
    print(f"[{case}] generated {meta['usage_rows']:,} usage rows in {meta['seconds']} s")
    return meta


def read_totals(text: str, column: str = "amount_micros") -> pd.Series:
    """``client -> amount_micros`` from a CSV printed by either tool."""
    from io import StringIO

    frame = pd.read_csv(StringIO(text), dtype={"client": "str"}, keep_default_na=False)
    if "client" not in frame or column not in frame:
        raise ValueError(f"expected columns client and {column}, got {list(frame.columns)}")
    return frame.set_index("client")[column].astype("int64")


def read_json_totals(text: str) -> pd.Series:
    """``client -> amount`` (micro-units) from ``allocate --format json``."""
    clients = json.loads(text)["clients"]
    return pd.Series(
        [int(c["amount"]) for c in clients],
        index=pd.Index([str(c["client"]) for c in clients], name="client"),
        dtype="int64",
    )


def tool_totals(run: Run, output: str, out_dir: Path) -> pd.Series:
    """The per-client totals of a tenantcost run: its JSON, or the ``clients.csv`` it wrote."""
    if output == "json":
        return read_json_totals(run.stdout)
    return read_totals((out_dir / "clients.csv").read_text(encoding="utf-8"))


def compare(tool: pd.Series, ref: pd.Series, limit: int = 10) -> list[str]:
    """Differences to the micro-unit (a client missing on one side counts as 0)."""
    both = pd.concat({"tenantcost": tool, "reference": ref}, axis=1).fillna(0).astype("int64")
    diff = both[both["tenantcost"] != both["reference"]]
    lines = [
        f"{client}: tenantcost {row.tenantcost} reference {row.reference} "
        f"(diff {row.tenantcost - row.reference:+d})"
        for client, row in diff.head(limit).iterrows()
    ]
    if len(diff) > limit:
        lines.append(f"... {len(diff) - limit} more")
    if len(diff):
        lines.insert(
            0,
            f"{len(diff)} of {len(both)} clients differ; sum of |diff| "
            f"{int((diff['tenantcost'] - diff['reference']).abs().sum())} micros; totals "
            f"tenantcost {int(both['tenantcost'].sum())} reference {int(both['reference'].sum())}",
        )
    return lines


def period_args(meta: dict[str, object]) -> list[str]:
    """``--month`` when the data is exactly one calendar month, else ``--from/--to``."""
    start, end = pd.Timestamp(str(meta["start"])), pd.Timestamp(str(meta["end"]))
    month_start = start.tz_convert(None).to_period("M").start_time.tz_localize("UTC")
    if start == month_start and end == start + pd.offsets.MonthBegin(1):
        return ["--month", start.strftime("%Y-%m")]
    return ["--from", str(meta["start"]), "--to", str(meta["end"])]


def run_case(case: str, args: argparse.Namespace) -> CaseResult:
    meta = ensure_data(case, args.data_dir, args.seed, args.layout)
    folder = args.data_dir / case
    rules = str(folder / "rules.yaml")
    period = period_args(meta)
    out_dir = Path(tempfile.mkdtemp(prefix=f"tenantcost-bench-{case}-"))
    # Exactly what a user runs: the whole JSON document, or every file of --out.
    outputs = {"json": ["--format", "json"], "out": ["--out", str(out_dir)]}
    tool_cmds = {
        output: [
            *shlex.split(args.tenantcost),
            "allocate",
            "--config",
            rules,
            *period,
            *outputs[output],
            *shlex.split(args.engine_args),
        ]
        for output in args.allocate_output
    }
    ref_cmd = [
        sys.executable,
        str(HERE / "reference.py"),
        "--config",
        rules,
        *period,
        *shlex.split(args.reference_args),
    ]
    result = CaseResult(case=case, rows=int(str(meta["usage_rows"])))
    for tool_cmd in tool_cmds.values():
        print(f"[{case}] tenantcost: {shlex.join(tool_cmd)}")
    print(f"[{case}] reference:  {shlex.join(ref_cmd)}", flush=True)
    ref_totals: pd.Series | None = None
    runs = [("reference", "", ref_cmd)] + [("tenantcost", o, c) for o, c in tool_cmds.items()]
    for i in range(args.repeat):
        for name, output, cmd in runs:
            if name not in args.engines:
                continue
            run = measure(cmd, args.timeout)
            if name == "reference":
                result.reference.append(run)
            else:
                result.tenantcost.setdefault(output, []).append(run)
            label = f"{name} {output}".strip()
            status = "TIMEOUT" if run.timed_out else ("ok" if run.returncode == 0 else "FAILED")
            print(
                f"[{case}] run {i + 1}/{args.repeat} {label:15s} {run.seconds:8.2f} s  "
                f"peak RSS {_mib(run.peak_rss)}  maxrss {_mib(run.maxrss)}  {status}",
                flush=True,
            )
            if run.returncode != 0:
                tail = "\n".join(run.stderr.strip().splitlines()[-15:])
                result.errors.append(f"{label} run {i + 1}: exit {run.returncode}\n{tail}")
                print(tail, file=sys.stderr)
                continue
            totals = (
                read_totals(run.stdout)
                if name == "reference"
                else tool_totals(run, output, out_dir)
            )
            if name == "reference":
                if ref_totals is not None and not totals.equals(ref_totals):
                    result.errors.append("the reference is not deterministic")
                ref_totals = totals
            elif ref_totals is not None:
                diffs = compare(totals, ref_totals)
                if diffs and output not in result.differences:
                    result.differences[output] = diffs
                    print(f"[{case}] {label} DIFFERENCES:\n  " + "\n  ".join(diffs),
                          file=sys.stderr)
    shutil.rmtree(out_dir, ignore_errors=True)
    return result


def _mib(value: float) -> str:
    return f"{value / 2**20:,.0f} MiB"


def _median(runs: list[Run], attr: str) -> float | None:
    good = [getattr(r, attr) for r in runs if r.returncode == 0]
    return statistics.median(good) if good else None


def machine_info() -> list[str]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass

    def version(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"

    return [
        f"- CPU: {model}; nproc {len(os.sched_getaffinity(0))} (cpu_count {os.cpu_count()})",
        f"- memory: {psutil.virtual_memory().total / 2**30:.1f} GiB total",
        f"- OS: {platform.platform()}",
        f"- python {platform.python_version()}, pandas {version('pandas')}, "
        f"pyarrow {version('pyarrow')}, duckdb {version('duckdb')}, "
        f"tenantcost {version('tenantcost')}",
    ]


def _fmt(v: float | None, runs: list[Run], mib: bool = False) -> str:
    """A median for the table: seconds or MiB, or why there is none."""
    if v is None:
        return ("failed" if runs else "not run") if not mib else "-"
    return _mib(v) if mib else f"{v:.2f}"


def report(results: list[CaseResult], args: argparse.Namespace) -> str:
    head = (
        "| case | tenantcost writes | usage rows | tenantcost median s | reference median s | "
        "ratio | tenantcost peak RSS | reference peak RSS | tenantcost maxrss | "
        "reference maxrss | agree |"
    )
    lines = [head, "|" + "---|" * 11]
    for r in results:
        ref_s, ref_rss = _median(r.reference, "seconds"), _median(r.reference, "peak_rss")
        ref_max = _median(r.reference, "maxrss")
        for output in args.allocate_output:
            runs = r.tenantcost.get(output, [])
            tc_s, tc_rss = _median(runs, "seconds"), _median(runs, "peak_rss")
            tc_max = _median(runs, "maxrss")
            compared = tc_s is not None and ref_s is not None
            agree = "n/a" if not compared else ("no" if r.differences.get(output) else "yes")
            if any("not deterministic" in e for e in r.errors):
                agree = "no"
            ratio = f"{tc_s / ref_s:.2f}" if tc_s is not None and ref_s else "-"
            lines.append(
                f"| {CASES[r.case]['clients']:,} x {CASES[r.case]['services']} x "
                f"{CASES[r.case]['hours']} h ({r.case}) | {ALLOCATE_OUTPUTS[output]} | "
                f"{r.rows:,} | "
                f"{_fmt(tc_s, runs)} | {_fmt(ref_s, r.reference)} | {ratio} | "
                f"{_fmt(tc_rss, runs, True)} | {_fmt(ref_rss, r.reference, True)} | "
                f"{_fmt(tc_max, runs, True)} | {_fmt(ref_max, r.reference, True)} | {agree} |"
            )
    lines += [
        "",
        f"{args.repeat} run(s) each, medians; ratio = tenantcost / reference wall time. "
        "Peak RSS: sum over the process tree, sampled every 50 ms; maxrss: ru_maxrss of the "
        "process (wait4).",
        f"tenantcost extra arguments: {args.engine_args or '(none)'}",
        "Cross-check: the largest ru_maxrss of any child of this script "
        f"(getrusage(RUSAGE_CHILDREN), /usr/bin/time's counter): "
        f"{_mib(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)}.",
        "",
        *machine_info(),
    ]
    return "\n".join(lines)


def report_cmd(args: argparse.Namespace, case: str, out: Path, *extra: str) -> list[str]:
    """``tenantcost report`` on a report case's month, pinned generation time."""
    folder = args.data_dir / case
    return [
        *shlex.split(args.tenantcost),
        "report",
        "--config",
        str(folder / "rules.yaml"),
        "--month",
        REPORT_START[:7],
        "--generated-at",
        GENERATED_AT,
        "--out",
        str(out),
        *extra,
    ]


def _timed(cmd: list[str], args: argparse.Namespace, label: str) -> Run:
    run = measure(cmd, args.timeout)
    status = "TIMEOUT" if run.timed_out else ("ok" if run.returncode == 0 else "FAILED")
    print(f"[{label}] {run.seconds:8.2f} s  peak RSS {_mib(run.peak_rss)}  {status}", flush=True)
    if run.returncode != 0:
        print("\n".join(run.stderr.strip().splitlines()[-15:]), file=sys.stderr)
    return run


def report_section(args: argparse.Namespace, errors: list[str]) -> str:
    """The report pack (``--format html,md``, every client) of each report case: wall time
    and peak RSS of the whole process, ``--repeat`` runs, medians."""
    lines = [
        "| case | usage rows | sheets | files | median s | peak RSS | runs |",
        "|---|---|---|---|---|---|---|",
    ]
    for case in args.report_cases:
        meta = ensure_data(case, args.data_dir, args.seed, args.layout)
        out = Path(tempfile.mkdtemp(prefix=f"tenantcost-bench-{case}-"))
        cmd = report_cmd(args, case, out, "--format", "html,md")
        print(f"[{case}] {shlex.join(cmd)}", flush=True)
        runs = []
        for i in range(args.repeat):
            shutil.rmtree(out, ignore_errors=True)
            run = _timed(cmd, args, f"{case} run {i + 1}/{args.repeat}")
            runs.append(run)
            if run.returncode != 0:
                errors.append(f"report {case} run {i + 1}: exit {run.returncode}")
        files = sum(1 for p in out.rglob("*.*") if p.is_file())
        sheets = len(list((out / "clients").glob("*.html"))) if (out / "clients").exists() else 0
        shutil.rmtree(out, ignore_errors=True)
        seconds, rss = _median(runs, "seconds"), _median(runs, "peak_rss")
        params = REPORT_CASES[case]
        lines.append(
            f"| {params['clients']:,} x {params['services']} x {params['hours']} h ({case}) | "
            f"{int(str(meta['usage_rows'])):,} | {sheets:,} | {files:,} | "
            f"{'failed' if seconds is None else f'{seconds:.2f}'} | "
            f"{'-' if rss is None else _mib(rss)} | {len(runs)} |"
        )
    lines += [
        "",
        "`tenantcost report --month 2026-10 --format html,md --generated-at T --out DIR`, whole "
        "process (allocation under the rule and every alternative key, grades, every sheet in "
        "HTML and Markdown, the finance summary, the index).",
    ]
    return "\n".join(lines)


PdfWriter = Callable[[list[Path], int, Path], float]
"""A PDF writer under test: (pages, processes, target folder) -> seconds."""


def _pdf_pages(pages: list[Path], jobs: int, target: Path) -> float:
    """Seconds for tenantcost's PDF pool (``report --jobs``) to write ``pages`` (HTML files)
    as PDFs into ``target``, worker start-up included; ``jobs`` 1 writes in this process."""
    import weasyprint

    from tenantcost.report.pdf import PdfPool, write_pdf

    texts = [(p.read_text(encoding="utf-8"), target / p.with_suffix(".pdf").name) for p in pages]
    begin = time.perf_counter()
    if jobs == 1:
        for html, out in texts:
            write_pdf(weasyprint, html, out)
    else:
        with PdfPool(jobs, lambda _: None) as pool:
            for html, out in texts:
                pool.submit(html, out)
            pool.finish()
    return time.perf_counter() - begin


def _pdf_pages_dask(pages: list[Path], workers: int, target: Path) -> float:
    """Seconds for ``report --engine dask --workers N``'s PDF writer to write ``pages``: the
    local cluster the command starts (its start-up included), WeasyPrint on its workers, the
    bytes written here."""
    from tenantcost.engine.dask import DaskEngine
    from tenantcost.report.pdf_dask import DaskPdfPool

    texts = [(p.read_text(encoding="utf-8"), target / p.with_suffix(".pdf").name) for p in pages]
    begin = time.perf_counter()
    with DaskEngine(workers=workers) as engine, DaskPdfPool(engine.client, lambda _: None) as pool:
        for html, out in texts:
            pool.submit(html, out)
        pool.finish()
    return time.perf_counter() - begin


def pdf_section(args: argparse.Namespace, errors: list[str]) -> str:
    """PDF pages per second: ``report --format html`` writes ``--pdf-clients`` sheets and the
    summary of pack300 once; then tenantcost's PDF writer (the pool of ``report --jobs``)
    turns those pages into PDFs with each ``--pdf-jobs``. Timing the PDF step alone keeps
    the allocation's noise out of a figure that is WeasyPrint's."""
    case = "pack300"
    ensure_data(case, args.data_dir, args.seed, args.layout)
    chosen = [x for i in range(1, args.pdf_clients + 1) for x in ("--client", f"client-{i:04d}")]
    out = Path(tempfile.mkdtemp(prefix="tenantcost-bench-pdf-"))
    html = _timed(report_cmd(args, case, out, "--format", "html", *chosen), args, "pdf html")
    if html.returncode != 0:
        errors.append(f"pdf: report --format html exit {html.returncode}")
        return "failed"
    pages = [*sorted(out.glob("clients/*.html")), out / "finance-summary.html"]
    target = out / "pdf"
    target.mkdir()
    lines = [
        "| engine | processes | pages | seconds | pages/s | pages/s per core |",
        "|---|---|---|---|---|---|",
    ]
    runs: list[tuple[str, int, PdfWriter]] = [
        *((f"local `--jobs {j}`", j, _pdf_pages) for j in args.pdf_jobs),
        *((f"dask `--workers {w}`", w, _pdf_pages_dask) for w in args.pdf_dask_workers),
    ]
    serial: dict[str, bytes] = {}
    for label, procs, write in runs:
        seconds = write(pages, procs, target)
        rate = len(pages) / seconds
        print(f"[pdf {label}] {len(pages)} pages in {seconds:.2f} s", flush=True)
        lines.append(
            f"| {label} | {procs} | {len(pages)} | {seconds:.2f} | {rate:.2f} | "
            f"{rate / procs:.2f} |"
        )
        files = {f.name: f.read_bytes() for f in sorted(target.glob("*.pdf"))}
        serial = serial or files
        if files != serial:  # every engine writes the same files
            errors.append(f"pdf: {label} wrote other PDFs than {runs[0][0]}")
        shutil.rmtree(target)
        target.mkdir()
    shutil.rmtree(out, ignore_errors=True)
    lines += [
        "",
        f"{args.pdf_clients} client sheets and the finance summary of {case} (HTML from "
        "`report --format html`), written as PDFs by tenantcost's writer: in process for 1 "
        "job, in the process pool of `report --jobs N` otherwise, and on the local Dask "
        "cluster of `report --engine dask --workers N` (worker and cluster start-up "
        "included); every engine's PDFs are compared byte for byte.",
    ]
    return "\n".join(lines)


HEAVY_MODULES = ("pandas", "numpy", "duckdb", "pyarrow", "weasyprint", "jinja2", "requests")
STARTUP_COMMANDS: dict[str, list[str]] = {
    "--help": ["--help"],
    "check-config": [
        "check-config",
        str(HERE.parent / "examples" / "saas-three-clients" / "rules.yaml"),
    ],
    "allocate": [  # the main job on the bundled example (target: under 1.5 s wall)
        "allocate",
        "--config",
        str(HERE.parent / "examples" / "saas-three-clients" / "rules.yaml"),
    ],
}


def csv_section(args: argparse.Namespace, errors: list[str]) -> str:
    """``allocate --format json`` on usage as CSV against Parquet (``benchmarks/csv_usage.py``):
    ``--repeat`` alternating runs, medians; both must give the same totals."""
    from csv_usage import allocate_cmd, csv_rows, write_csv_case

    meta = ensure_data(args.csv_case, args.data_dir, args.seed, args.layout)
    folder = args.data_dir / args.csv_case
    csv_rules = write_csv_case(folder)
    parquet_cmd = allocate_cmd(args, folder / "rules.yaml", REPORT_START[:7])
    csv_cmd = allocate_cmd(args, csv_rules, REPORT_START[:7])
    table = []
    for i in range(args.repeat):
        parquet = _timed(parquet_cmd, args, f"csv {args.csv_case} parquet {i + 1}")
        csv = _timed(csv_cmd, args, f"csv {args.csv_case} csv {i + 1}")
        if parquet.returncode or csv.returncode:
            errors.append(f"csv section run {i + 1} failed")
            continue
        if not read_json_totals(parquet.stdout).equals(read_json_totals(csv.stdout)):
            errors.append("csv section: CSV and Parquet give different totals")
        table.append((args.csv_case, parquet, csv))
    if not table:
        return "failed"
    rows = int(str(meta["usage_rows"]))
    return "\n".join(
        [
            *csv_rows(table),
            "",
            f"`tenantcost allocate --month {REPORT_START[:7]} --format json`, whole process, "
            f"{rows:,} usage rows ({args.csv_case}); median of {len(table)} runs.",
        ]
    )


def installed_script(name: str) -> str:
    """The console script itself: a pyenv or asdf shim would add a shell's start-up."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else name


def heavy_imports(args: list[str]) -> list[str]:
    """The heavy top-level modules a command imports (from ``python -X importtime``)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tenantcost", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    found = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in proc.stderr.splitlines()}
    return [m for m in HEAVY_MODULES if m in found]


def startup_section(script: str, repeat: int) -> str:
    """Wall time of the installed script for ``--help``, ``check-config`` and ``allocate`` on
    the bundled example: warm (one
    unmeasured run first), median of ``repeat`` runs; a benchmark, not a timed unit test."""
    lines = [
        "| command | median s | min s | max s | heavy modules imported |",
        "|---|---|---|---|---|",
    ]
    for label, command in STARTUP_COMMANDS.items():
        argv = [script, *command]
        subprocess.run(argv, capture_output=True, check=True)  # warm the file cache
        times = []
        for _ in range(repeat):
            begin = time.perf_counter()
            subprocess.run(argv, capture_output=True, check=True)
            times.append(time.perf_counter() - begin)
        heavy = ", ".join(heavy_imports(command)) or "none"
        lines.append(
            f"| `tenantcost {label}` | {statistics.median(times):.3f} | {min(times):.3f} | "
            f"{max(times):.3f} | {heavy} |"
        )
    lines += ["", f"Start-up of {script}: warm, {repeat} run(s) each, wall time (spawn to exit)."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--cases", default="small,large", help="comma list of tiny,small,large")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--data-dir", type=Path, default=HERE / "data", help="where generated data is kept"
    )
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--layout", choices=("hive", "folder", "file"), default="hive")
    parser.add_argument("--tenantcost", default="tenantcost", help="the tenantcost command")
    parser.add_argument(
        "--engine-args", default="", help='extra tenantcost arguments, e.g. "--engine dask"'
    )
    parser.add_argument(
        "--reference-args", default="", help='extra reference.py arguments, e.g. "--threads 2"'
    )
    parser.add_argument(
        "--engines",
        default="tenantcost,reference",
        help="which to run (comma list); the comparison needs both",
    )
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per run")
    parser.add_argument("--results", type=Path, help="also write the Markdown report here")
    parser.add_argument(
        "--sections",
        default="startup,cases,report,pdf,csv",
        help="comma list of startup,cases,report,pdf,csv,store,billing,watch (default: all but "
        "store, billing and watch)",
    )
    parser.add_argument(
        "--allocate-output",
        default="json,out",
        help="what the timed allocate writes (comma list): json (--format json), out (--out "
        "DIR); default both, one table row each",
    )
    parser.add_argument(
        "--report-cases", default="pack300,pack10k", help="comma list of pack300,pack10k"
    )
    parser.add_argument("--pdf-clients", type=int, default=20, help="sheets in the PDF section")
    parser.add_argument(
        "--pdf-dask-workers",
        default="2",
        help="comma list of --workers for the Dask PDF writer ('' to leave it out)",
    )
    parser.add_argument(
        "--pdf-jobs", default=f"1,{len(os.sched_getaffinity(0))}", help="comma list of --jobs"
    )
    parser.add_argument("--startup-repeat", type=int, default=5)
    parser.add_argument(
        "--csv-case", default="pack300", choices=list(REPORT_CASES), help="the csv section's case"
    )
    from billing_section import add_arguments as add_billing_arguments
    from billing_section import billing_section
    from store import add_arguments, store_section  # the store section (benchmarks/store.py)
    from watch_section import add_arguments as add_watch_arguments
    from watch_section import watch_section

    add_arguments(parser)
    add_billing_arguments(parser)
    add_watch_arguments(parser)
    args = parser.parse_args(argv)
    sections = {s.strip() for s in args.sections.split(",") if s.strip()}
    args.engines = {e.strip() for e in args.engines.split(",") if e.strip()}
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        parser.error(f"unknown case {unknown[0]!r}; cases: {', '.join(CASES)}")
    args.allocate_output = [o.strip() for o in args.allocate_output.split(",") if o.strip()]
    if not args.allocate_output or not set(args.allocate_output) <= set(ALLOCATE_OUTPUTS):
        parser.error("--allocate-output: give json, out or json,out")
    args.report_cases = [c.strip() for c in args.report_cases.split(",") if c.strip()]
    unknown = [c for c in args.report_cases if c not in REPORT_CASES]
    if unknown:
        parser.error(f"unknown report case {unknown[0]!r}; cases: {', '.join(REPORT_CASES)}")
    args.pdf_jobs = sorted({int(j) for j in args.pdf_jobs.split(",") if j.strip()})
    args.pdf_dask_workers = sorted({int(w) for w in args.pdf_dask_workers.split(",") if w.strip()})

    texts = []
    if "startup" in sections:
        script = installed_script(args.tenantcost)
        texts.append("## Start-up\n\n" + startup_section(script, args.startup_repeat))
    results = [run_case(case, args) for case in cases] if "cases" in sections else []
    if "cases" in sections:
        texts.append("## Allocation\n\n" + report(results, args))
    other_errors: list[str] = []
    if "report" in sections:
        texts.append("## Report pack\n\n" + report_section(args, other_errors))
    if "pdf" in sections:
        texts.append("## PDF\n\n" + pdf_section(args, other_errors))
    if "csv" in sections:
        texts.append("## Usage as CSV\n\n" + csv_section(args, other_errors))
    if "store" in sections:
        texts.append("## Store\n\n" + store_section(args, other_errors))
    if "billing" in sections:
        texts.append("## Billing data\n\n" + billing_section(args, other_errors))
    if "watch" in sections:
        texts.append("## Watch\n\n" + watch_section(args, other_errors))
    text = "\n\n".join(texts)
    print()
    print(text)
    if args.results:
        args.results.write_text(text + "\n", encoding="utf-8")
    failed = bool(other_errors)
    for error in other_errors:
        print(f"ERROR: {error}", file=sys.stderr)
    for r in results:
        for error in r.errors:
            print(f"[{r.case}] ERROR: {error}", file=sys.stderr)
            failed = True
        for output, diffs in r.differences.items():
            print(
                f"[{r.case}] tenantcost ({output}) and the reference DISAGREE:\n  "
                + "\n  ".join(diffs),
                file=sys.stderr,
            )
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

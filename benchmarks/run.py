"""Benchmark tenantcost against the plain-DuckDB reference on the same generated data.

    python benchmarks/run.py                       # small and large, 3 runs each
    python benchmarks/run.py --cases small --repeat 5
    python benchmarks/run.py --cases large --engine-args "--engine dask --workers 2"

For each case the data set is generated once into ``--data-dir/<case>`` (reused while its
``meta.json`` matches the case). Then, ``--repeat`` times and alternately, two separate
processes run on it:

* tenantcost: ``tenantcost allocate --config DIR/rules.yaml --from START --to END --format csv``
  (plus ``--engine-args``);
* the reference: ``python benchmarks/reference.py --config DIR/rules.yaml --from ... --to ...``.

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
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
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
SAMPLE_SECONDS = 0.05


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


@dataclass
class CaseResult:
    case: str
    rows: int
    tenantcost: list[Run] = field(default_factory=list)
    reference: list[Run] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
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
        )


def ensure_data(case: str, data_dir: Path, seed: int, layout: str) -> dict[str, object]:
    """Generate the case's data unless a matching ``meta.json`` is already there."""
    params = CASES[case]
    folder = data_dir / case
    meta_file = folder / "meta.json"
    if meta_file.exists():
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
        wanted = {**params, "seed": seed, "layout": layout}
        if all(meta.get(k) == v for k, v in wanted.items()):
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
    tool_cmd = [
        *shlex.split(args.tenantcost),
        "allocate",
        "--config",
        rules,
        *period,
        "--format",
        "csv",
        *shlex.split(args.engine_args),
    ]
    ref_cmd = [
        sys.executable,
        str(HERE / "reference.py"),
        "--config",
        rules,
        *period,
        *shlex.split(args.reference_args),
    ]
    result = CaseResult(case=case, rows=int(str(meta["usage_rows"])))
    print(f"[{case}] tenantcost: {shlex.join(tool_cmd)}")
    print(f"[{case}] reference:  {shlex.join(ref_cmd)}", flush=True)
    ref_totals: pd.Series | None = None
    for i in range(args.repeat):
        for name in ("reference", "tenantcost"):
            if name not in args.engines:
                continue
            run = measure(ref_cmd if name == "reference" else tool_cmd, args.timeout)
            getattr(result, name).append(run)
            status = "TIMEOUT" if run.timed_out else ("ok" if run.returncode == 0 else "FAILED")
            print(
                f"[{case}] run {i + 1}/{args.repeat} {name:10s} {run.seconds:8.2f} s  "
                f"peak RSS {_mib(run.peak_rss)}  maxrss {_mib(run.maxrss)}  {status}",
                flush=True,
            )
            if run.returncode != 0:
                tail = "\n".join(run.stderr.strip().splitlines()[-15:])
                result.errors.append(f"{name} run {i + 1}: exit {run.returncode}\n{tail}")
                print(tail, file=sys.stderr)
                continue
            totals = read_totals(run.stdout)
            if name == "reference":
                if ref_totals is not None and not totals.equals(ref_totals):
                    result.errors.append("the reference is not deterministic")
                ref_totals = totals
            elif ref_totals is not None:
                diffs = compare(totals, ref_totals)
                if diffs and not result.differences:
                    result.differences = diffs
                    print(f"[{case}] DIFFERENCES:\n  " + "\n  ".join(diffs), file=sys.stderr)
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


def report(results: list[CaseResult], args: argparse.Namespace) -> str:
    head = (
        "| case | usage rows | tenantcost median s | reference median s | ratio | "
        "tenantcost peak RSS | reference peak RSS | tenantcost maxrss | reference maxrss | "
        "agree |"
    )
    lines = [head, "|" + "---|" * 10]
    for r in results:
        tc_s, ref_s = _median(r.tenantcost, "seconds"), _median(r.reference, "seconds")
        tc_rss, ref_rss = _median(r.tenantcost, "peak_rss"), _median(r.reference, "peak_rss")
        tc_max, ref_max = _median(r.tenantcost, "maxrss"), _median(r.reference, "maxrss")
        compared = tc_s is not None and ref_s is not None
        agree = "n/a" if not compared else ("no" if r.differences else "yes")
        if any("not deterministic" in e for e in r.errors):
            agree = "no"

        def fmt(v: float | None, runs: list[Run], mib: bool = False) -> str:
            if v is None:
                return ("failed" if runs else "not run") if not mib else "-"
            return _mib(v) if mib else f"{v:.2f}"

        ratio = f"{tc_s / ref_s:.1f}" if tc_s is not None and ref_s else "-"
        lines.append(
            f"| {CASES[r.case]['clients']:,} x {CASES[r.case]['services']} x "
            f"{CASES[r.case]['hours']} h ({r.case}) | {r.rows:,} | {fmt(tc_s, r.tenantcost)} | "
            f"{fmt(ref_s, r.reference)} | {ratio} | {fmt(tc_rss, r.tenantcost, True)} | "
            f"{fmt(ref_rss, r.reference, True)} | {fmt(tc_max, r.tenantcost, True)} | "
            f"{fmt(ref_max, r.reference, True)} | {agree} |"
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


HEAVY_MODULES = ("pandas", "numpy", "duckdb", "pyarrow", "weasyprint", "jinja2", "requests")
STARTUP_COMMANDS: dict[str, list[str]] = {
    "--help": ["--help"],
    "check-config": [
        "check-config",
        str(HERE.parent / "examples" / "saas-three-clients" / "rules.yaml"),
    ],
}


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
    """Wall time of the installed script for ``--help`` and ``check-config``: warm (one
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
        "--sections", default="startup,cases", help="comma list of startup,cases (default both)"
    )
    parser.add_argument("--startup-repeat", type=int, default=5)
    args = parser.parse_args(argv)
    sections = {s.strip() for s in args.sections.split(",") if s.strip()}
    args.engines = {e.strip() for e in args.engines.split(",") if e.strip()}
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        parser.error(f"unknown case {unknown[0]!r}; cases: {', '.join(CASES)}")

    texts = []
    if "startup" in sections:
        script = installed_script(args.tenantcost)
        texts.append("## Start-up\n\n" + startup_section(script, args.startup_repeat))
    results = [run_case(case, args) for case in cases] if "cases" in sections else []
    if "cases" in sections:
        texts.append("## Allocation\n\n" + report(results, args))
    text = "\n\n".join(texts)
    print()
    print(text)
    if args.results:
        args.results.write_text(text + "\n", encoding="utf-8")
    failed = False
    for r in results:
        for error in r.errors:
            print(f"[{r.case}] ERROR: {error}", file=sys.stderr)
            failed = True
        if r.differences:
            print(
                f"[{r.case}] tenantcost and the reference DISAGREE:\n  "
                + "\n  ".join(r.differences),
                file=sys.stderr,
            )
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Compares h5_api_test runs test by test (used by tests/vol_api/run).

Each run directory holds stdout.log, stderr.log and rc written by the runner, and for
connector runs the PRESCIENT_STATS files. A test that passes in the baseline run must pass
in every connector run; a connector run must also prove that the connector was active.
Exit status: 0 no regression, 1 regression or inactive connector, 2 unusable output.
"""

import argparse
import glob
import json
import os
import re
import sys

RESULT_TOKENS = {" PASSED": "passed", "*FAILED*": "failed", " -SKIP-": "skipped"}
TEST_LINE = re.compile(r"^(  )?Testing (.*)$")
# h5_api_test_parallel says "At least N/M ... passed across all ranks" when ranks disagree.
SUMMARY = re.compile(r"^(?:At least )?(\d+)/(\d+) \([\d.]+%\) API tests "
                     r"(passed|did not pass|were skipped)")


def split_result(text):
    """Returns (name, status) when text ends with a result token, else (text, None)."""
    stripped = text.rstrip()
    for token, status in RESULT_TOKENS.items():
        if stripped.endswith(token.strip()) and (
            token.startswith(" ") or stripped.endswith(token)
        ):
            return stripped[: -len(token.strip())].strip(), status
    return stripped.strip(), None


def parse(stdout_text):
    """Parses h5_api_test output into ([(test_id, status)], summary counts).

    Top-level tests print 'Testing NAME' and their result on one line; multi-part tests
    print a header line without result followed by indented '  Testing PART' lines. Test
    ids are 'HEADER / PART' for parts, with '#k' appended to repeated ids.
    """
    results = []
    summary = {}
    header = None  # current multi-part header
    pending = None  # (name, indented) of a test line still waiting for its result

    def flush_pending(next_indented):
        nonlocal header
        if pending is None:
            return
        name, indented = pending
        if not indented and next_indented:
            header = name  # a multi-part header: its parts follow
        elif indented:
            results.append((f"{header} / {name}", "unresolved"))
        elif name:
            results.append((name, "unresolved"))

    for line in stdout_text.splitlines():
        match = SUMMARY.match(line)
        if match:
            summary[match.group(3)] = int(match.group(1))
            summary["run"] = int(match.group(2))
            continue
        match = TEST_LINE.match(line)
        if match:
            indented = match.group(1) is not None
            flush_pending(indented)
            pending = None
            if not indented:
                header = None
            name, status = split_result(match.group(2))
            if status is None:
                pending = (name, indented)
            else:
                results.append((f"{header} / {name}" if indented else name, status))
            continue
        if pending is None and line.strip() in ("PASSED", "*FAILED*", "-SKIP-"):
            # a multi-part test reporting its overall result after its parts
            _, status = split_result(line)
            results.append((f"{header or 'unnamed'} [overall]", status))
            continue
        if pending is not None:
            _, status = split_result(line)
            if status is not None:  # output printed between the name and the result
                name, indented = pending
                results.append((f"{header} / {name}" if indented else name, status))
                pending = None
    flush_pending(False)

    seen = {}
    unique = []
    for test_id, status in results:
        seen[test_id] = seen.get(test_id, 0) + 1
        unique.append((test_id if seen[test_id] == 1 else f"{test_id} #{seen[test_id]}", status))
    return unique, summary


INTERFACES = ["file", "group", "dataset", "datatype", "attribute", "link", "object", "misc"]


def load_run(runs, name):
    """Reads runs/NAME/INTERFACE/{stdout.log,stderr.log,rc} for every interface."""
    run = {"name": name, "dir": os.path.join(runs, name), "results": {}, "order": [],
           "summary": {}, "rc": {}, "stdout": {}, "stderr": {}}
    for interface in INTERFACES:
        directory = os.path.join(runs, name, interface)
        if not os.path.isdir(directory):
            continue
        with open(os.path.join(directory, "stdout.log"), errors="replace") as f:
            stdout_text = f.read()
        with open(os.path.join(directory, "stderr.log"), errors="replace") as f:
            stderr_text = f.read()
        with open(os.path.join(directory, "rc")) as f:
            run["rc"][interface] = int(f.read().strip())
        results, summary = parse(stdout_text)
        for test_id, status in results:
            key = f"{interface}: {test_id}"
            run["results"][key] = status
            run["order"].append(key)
        for key, value in summary.items():
            run["summary"][key] = run["summary"].get(key, 0) + value
        run["summary"].setdefault("per_interface", {})[interface] = summary
        run["stdout"][interface] = stdout_text
        run["stderr"][interface] = stderr_text
    if not run["rc"]:
        raise SystemExit(f"[vol_api] no results for run '{name}' in {runs}")
    return run


def counts(run):
    out = {"passed": 0, "failed": 0, "skipped": 0, "unresolved": 0}
    for status in run["results"].values():
        out[status] += 1
    return out


def check_parse(run):
    """The parser must agree with the program's own pass counts, or the comparison is void."""
    problems = []
    for interface, summary in run["summary"]["per_interface"].items():
        parsed = sum(1 for key, status in run["results"].items()
                     if key.startswith(interface + ": ") and status == "passed")
        if "passed" not in summary:
            problems.append(f"{interface}: no summary line (exit {run['rc'][interface]}; crashed?)")
        elif parsed != summary["passed"]:
            problems.append(f"{interface}: parsed {parsed} passed tests but the program reports "
                            f"{summary['passed']}")
    return problems


def stats_files(directory):
    files = []
    for path in sorted(glob.glob(os.path.join(directory, "*", "stats*.json"))):
        try:
            with open(path) as f:
                files.append((path, json.load(f)))
        except (OSError, ValueError) as err:
            files.append((path, {"_error": str(err)}))
    return files


def check_activity(run, mode):
    """Proves the connector was loaded: the program checks registration, the stats show it.

    h5_api_test itself verifies that the named connector is registered and set on the default
    FAPL before running (and exits otherwise); the stats files show it handled the files.
    """
    problems = []
    expected = "pass_through" if mode == "stand-in" else "prescient"
    for interface, out in run["stdout"].items():
        if (f"Running API tests with VOL connector '{expected}'" not in out and
                f"Running parallel API tests with VOL connector '{expected}'" not in out):
            problems.append(f"{interface}: h5_api_test did not report running with '{expected}'")
        err = run["stderr"][interface]
        if "wasn't correctly registered" in err or "didn't match" in err:
            problems.append(f"{interface}: the connector was not registered/set on the default FAPL")
    if mode == "stand-in":
        return problems
    expect_enabled = mode == "enabled"
    files = stats_files(run["dir"])
    if not files:
        problems.append("no PRESCIENT_STATS file was written")
        return problems
    good = [d for _, d in files if d.get("prescient_stats_version") == 1]
    if len(good) != len(files):
        problems.append("unreadable or unversioned stats: " +
                        ", ".join(p for p, d in files if d.get("prescient_stats_version") != 1))
    opened = sum(d.get("files_opened", 0) for d in good)
    if opened <= 0:
        problems.append("stats show no file opened through the connector")
    states = {d.get("enabled") for d in good}
    if states != {expect_enabled}:
        problems.append(f"stats 'enabled' is {sorted(states, key=str)}, expected {expect_enabled}")
    run["stats_summary"] = {
        "files": len(files),
        "files_opened": opened,
        "datasets_opened": sum(d.get("datasets_opened", 0) for d in good),
        "reads": sum(d.get("reads", 0) for d in good),
    }
    if expect_enabled and run["stats_summary"]["reads"] <= 0:
        problems.append("stats show no dataset read through the connector")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", required=True)
    parser.add_argument("--baseline", required=True)
    parser.add_argument(
        "--connector", action="append", default=[], help="RUN:MODE, MODE one of enabled, disabled, stand-in"
    )
    args = parser.parse_args()

    baseline = load_run(args.runs, args.baseline)
    problems = check_parse(baseline)
    if problems:
        print(f"[vol_api] baseline run unusable: {'; '.join(problems)}")
        return 2
    base_counts = counts(baseline)
    passed_natively = [t for t in baseline["order"] if baseline["results"][t] == "passed"]
    print(
        f"[vol_api] {args.baseline}: {base_counts['passed']}/{baseline['summary']['run']} passed, "
        f"{base_counts['failed']} failed, {base_counts['skipped']} skipped"
    )

    failed = False
    for spec in args.connector:
        name, _, mode = spec.partition(":")
        run = load_run(args.runs, name)
        run_counts = counts(run)
        issues = check_parse(run)
        issues += check_activity(run, mode)
        regressions = [t for t in passed_natively if run["results"].get(t) != "passed"]
        gained = [t for t, s in run["results"].items()
                  if s == "passed" and baseline["results"].get(t) != "passed"]
        for interface, rc in run["rc"].items():
            if rc != 0 and baseline["rc"].get(interface) == 0:
                last = [t for t in run["order"] if t.startswith(interface + ": ")][-1:]
                issues.append(f"{interface}: exit status {rc} (native 0)"
                              + (f", last test started: {last[0]}" if last else ""))
        total = run["summary"].get("run", "?")
        stats = run.get("stats_summary", {})
        print(
            f"[vol_api] {name}: {run_counts['passed']}/{total} passed, {run_counts['failed']} failed, "
            f"{run_counts['skipped']} skipped, {len(regressions)} regressions vs {args.baseline}; "
            f"stats: {stats.get('files', 0)} file(s), files_opened={stats.get('files_opened', 0)} "
            f"datasets_opened={stats.get('datasets_opened', 0)} reads={stats.get('reads', 0)}"
        )
        by_status = {}
        for test_id in regressions:
            by_status.setdefault(run["results"].get(test_id, "missing"), []).append(test_id)
        for status in ("failed", "unresolved", "skipped"):
            for test_id in by_status.get(status, [])[:40]:
                print(f"    REGRESSION ({status}) {test_id}")
            if len(by_status.get(status, [])) > 40:
                print(f"    ... and {len(by_status[status]) - 40} more {status}")
        if by_status.get("missing"):
            print(f"    REGRESSION {len(by_status['missing'])} natively passing tests never ran "
                  f"(first: {by_status['missing'][0]})")
        for test_id in gained:
            print(f"    note: passes only with the connector: {test_id}")
        for issue in issues:
            print(f"    PROBLEM {issue}")
        if regressions or issues:
            failed = True
            print(f"    details: {run['dir']}/<interface>/stdout.log and stderr.log")

    print(
        "[vol_api] SUMMARY: "
        + ("FAIL (regressions or inactive connector, see above)" if failed else
           f"OK: all {len(passed_natively)} natively passing tests pass in every connector run")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

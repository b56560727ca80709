#!/usr/bin/env python3
"""The figures of hack/bench-upstream.sh and hack/bench-scaling.sh, from the
reports their runs wrote. Only the standard library.

  bench-report.py select DIR
      reads DIR/upstream/junit_01.xml (upstream's run), DIR/table.md (the
      output of `dra-e2e upstream`) and DIR/all-scenarios.txt (`dra-e2e
      --features features --list`), writes DIR/selection.json: the upstream
      tests that ran, the scenarios that port each (feature:line), the
      feature files and the --name regex that select those scenarios.
      Prints the --features arguments, one a line, then the regex.

  bench-report.py check-list DIR LIST-FILE
      compares `dra-e2e --list` output with the scenarios selection.json
      wants; exit 1 (and says which) when they differ.

  bench-report.py upstream DIR
      prints the side-by-side figures from DIR/selection.json,
      DIR/dra-e2e.xml (our JUnit) and DIR/walls.env.

  bench-report.py scaling DIR
      prints the scaling table from DIR/runs.tsv and each run's log and JUnit.
"""
import json
import os
import re
import statistics
import sys
import xml.etree.ElementTree as ET

UPSTREAM_PREFIX = "[sig-node] [DRA] "


def fail(msg):
    print(f"bench-report: {msg}", file=sys.stderr)
    sys.exit(1)


def unbracketed(text):
    """A test name without its [labels], spaces collapsed: labels may sit in
    another order in the JUnit name than in the table."""
    while True:
        # Innermost first: ginkgo writes "[kubelet: [>=1.34]]".
        stripped = re.sub(r"\[[^\[\]]*\]", " ", text)
        if stripped == text:
            return " ".join(text.split())
        text = stripped


def feature_rel(path):
    """features/x.feature however the path was given (absolute, ./...)."""
    i = path.rfind("features/")
    return path[i:] if i >= 0 else path


def read_table(path):
    """Rows of `dra-e2e upstream`'s table: (context, test, [feature:line])."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("| ") or line.startswith("| upstream context") or line.startswith("| scenario"):
                continue
            # Cells are separated by " | "; a test or reason never holds an
            # unescaped one (the table escapes a pipe as "\|").
            cells = [c.strip() for c in re.split(r"(?<!\\) \| ", line.strip().strip("|"))]
            if len(cells) < 3:
                continue
            context, test, third = cells[0], cells[1], cells[2]
            locs = re.findall(r"\[(features/[^\]]+\.feature:\d+)\]", third)
            rows.append((context, test.replace("\\|", "|"), locs))
    if not rows:
        fail(f"{path} holds no table rows (is it `dra-e2e upstream`'s output?)")
    return rows


def upstream_cases(path):
    """(name, seconds, status) of every spec that ran in a ginkgo JUnit file."""
    root = ET.parse(path).getroot()
    out = []
    for case in root.iter("testcase"):
        name = case.get("name", "")
        if not name.startswith("[It] "):
            continue  # suite set-up and tear-down nodes
        status = case.get("status")
        if status is None:
            if case.find("skipped") is not None:
                status = "skipped"
            elif case.find("failure") is not None or case.find("error") is not None:
                status = "failed"
            else:
                status = "passed"
        if status in ("skipped", "pending", "disabled"):
            continue
        out.append((name[len("[It] "):], float(case.get("time", "0")), status))
    return out


def our_cases(path):
    """{feature:line: (name, seconds, status)} of our JUnit report; the line is
    the first line of each case's output."""
    root = ET.parse(path).getroot()
    out = {}
    for case in root.iter("testcase"):
        so = case.find("system-out")
        first = ((so.text or "") if so is not None else "").strip().splitlines()
        if not first:
            continue
        loc = feature_rel(first[0].strip())
        if case.find("failure") is not None or case.find("error") is not None:
            status = "failed"
        elif case.find("skipped") is not None:
            status = "skipped"
        else:
            status = "passed"
        out[loc] = (case.get("name", ""), float(case.get("time", "0")), status)
    return out


def listed(path):
    """{feature:line: "Rule / name" as printed} of a `dra-e2e --list` output;
    an Examples row is a scenario of its own there, its name filled in."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^(\S+\.feature:\d+)  (.*)$", line.rstrip("\n"))
            if m:
                # The tags come after the last double space (empty without tags).
                out[feature_rel(m.group(1))] = m.group(2).rsplit("  ", 1)[0]
    return out


def rule_names(root, path):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return [m.group(1).strip() for m in re.finditer(r"^\s*Rule:(.*)$", f.read(), re.M)]


def scenario_name(root, loc, shown):
    """The name --name matches: the list's text without its "Rule / "."""
    for rule in rule_names(root, loc.rsplit(":", 1)[0]):
        if shown.startswith(rule + " / "):
            return shown[len(rule) + 3:]
    return shown


def rust_escape(s):
    return "".join("\\" + c if c in "\\.+*?()|[]{}^$#&-~" else c for c in s)


def select(d):
    rows = read_table(os.path.join(d, "table.md"))
    exact = {}
    loose = {}
    for context, test, locs in rows:
        full = f"{context} {test}"
        exact[full] = (full, locs)
        loose.setdefault(unbracketed(full), []).append((full, locs))
    ran = upstream_cases(os.path.join(d, "upstream", "junit_01.xml"))
    if not ran:
        fail("upstream's JUnit report holds no spec that ran")
    tests, unmatched = [], []
    for name, secs, status in ran:
        key = name[len(UPSTREAM_PREFIX):] if name.startswith(UPSTREAM_PREFIX) else name
        hit = exact.get(key)
        if hit is None:
            cands = loose.get(unbracketed(key), [])
            hit = cands[0] if len(cands) == 1 else None
        if hit is None:
            unmatched.append({"name": name, "seconds": secs, "status": status, "why": "not in docs/upstream-tests.tsv"})
        elif not hit[1]:
            unmatched.append({"name": name, "seconds": secs, "status": status, "why": "not ported"})
        else:
            tests.append({"name": name, "row": hit[0], "seconds": secs, "status": status, "ours": hit[1]})
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    every = listed(os.path.join(d, "all-scenarios.txt"))
    scenarios = {}
    for t in tests:
        for loc in t["ours"]:
            if loc not in every:
                fail(f"{loc} (the port of {t['name']}) is no scenario of `dra-e2e --list`")
            scenarios[loc] = scenario_name(root, loc, every[loc])
    files = sorted({s.rsplit(":", 1)[0] for s in scenarios})
    names = sorted(set(scenarios.values()))
    regex = "^(?:" + "|".join(rust_escape(n) for n in names) + ")$"
    sel = {
        "tests": tests,
        "unmatched": unmatched,
        "scenarios": sorted(scenarios),
        "files": files,
        "regex": regex,
    }
    with open(os.path.join(d, "selection.json"), "w", encoding="utf-8") as f:
        json.dump(sel, f, indent=1)
    for p in files:
        print(p)
    print(regex)


def check_list(d, list_file):
    with open(os.path.join(d, "selection.json"), encoding="utf-8") as f:
        sel = json.load(f)
    got = set(listed(list_file))
    want = set(sel["scenarios"])
    extra, missing = sorted(got - want), sorted(want - got)
    for s in missing:
        print(f"  not selected: {s}", file=sys.stderr)
    if missing:
        fail("--features/--name miss ports of upstream's tests (above)")
    sel["extra"] = extra
    with open(os.path.join(d, "selection.json"), "w", encoding="utf-8") as f:
        json.dump(sel, f, indent=1)
    # A title shared with a scenario that ports no test upstream ran: --name
    # cannot tell them apart. They run, and stay out of the comparison.
    for s in extra:
        print(f"bench-report: warning: {s} shares a selected title but ports no test upstream ran: "
              "it runs too, outside the comparison", file=sys.stderr)
    print(f"selection: {len(want)} scenarios port the {len(sel['tests'])} ported tests upstream ran"
          + (f", {len(extra)} more share their titles" if extra else ""))


def read_env(path):
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                out[k] = v
    return out


def fmt_ratio(x):
    return f"{x:.2f}"


def upstream_report(d):
    with open(os.path.join(d, "selection.json"), encoding="utf-8") as f:
        sel = json.load(f)
    walls = read_env(os.path.join(d, "walls.env"))
    ours = our_cases(os.path.join(d, "dra-e2e.xml"))
    up_ran = len(sel["tests"]) + len(sel["unmatched"])
    up_failed = sum(1 for t in sel["tests"] + sel["unmatched"] if t["status"] != "passed")
    print("== upstream's [DRA] suite and the scenarios that port it, two real nodes each")
    print(f"upstream dra.test: {up_ran} specs ran, {up_ran - up_failed} passed, {up_failed} failed, "
          f"{walls.get('UPSTREAM_PROCS', '?')} ginkgo processes; exit {walls.get('UPSTREAM_RC', '?')}")
    print(f"  wall: {float(walls['UPSTREAM_GINKGO']):.1f} s for the tests (ginkgo), "
          f"{float(walls['UPSTREAM_WALL']):.1f} s with cluster start and stop")
    our_ran = [v for v in ours.values() if v[2] != "skipped"]
    our_failed = sum(1 for v in our_ran if v[2] == "failed")
    our_skipped = len(ours) - len(our_ran)
    print(f"dra-e2e: {len(ours)} scenarios, {len(our_ran) - our_failed} passed, {our_failed} failed, "
          f"{our_skipped} skipped; exit {walls.get('OURS_RC', '?')}")
    print(f"  wall: {float(walls['OURS_RUN']):.1f} s for the run (--timings' run: cluster start, scenarios, "
          f"the waits after them), {float(walls['OURS_WALL']):.1f} s the whole process")
    print()
    rows, missing = [], []
    for t in sel["tests"]:
        got = [ours.get(loc) for loc in t["ours"]]
        if any(g is None for g in got):
            missing.append(t)
            continue
        secs = sum(g[1] for g in got)
        status = "passed" if all(g[2] == "passed" for g in got) else (
            "skipped" if any(g[2] == "skipped" for g in got) else "failed")
        rows.append((t, secs, status))
    compared = [(t, s) for t, s, st in rows if st == "passed" and t["status"] == "passed" and s > 0]
    print(f"{'upstream':>9} {'dra-e2e':>9} {'ratio':>7}  test (upstream's name after [sig-node] [DRA]; our scenario)")
    for t, secs, status in sorted(rows, key=lambda r: -r[0]["seconds"]):
        ratio = t["seconds"] / secs if secs > 0 else float("inf")
        mark = "" if status == "passed" and t["status"] == "passed" else f"  [upstream {t['status']}, ours {status}: not compared]"
        name = t["name"][len(UPSTREAM_PREFIX):] if t["name"].startswith(UPSTREAM_PREFIX) else t["name"]
        print(f"{t['seconds']:>8.1f}s {secs:>8.1f}s {ratio:>6.1f}x  {name}  ({', '.join(t['ours'])}){mark}")
    for t in missing:
        print(f"{t['seconds']:>8.1f}s {'-':>9} {'-':>7}  {t['name']}  ({', '.join(t['ours'])})  [no result of ours]")
    for t in sel["unmatched"]:
        print(f"{t['seconds']:>8.1f}s {'-':>9} {'-':>7}  {t['name']}  [{t['why']}]")
    extra = [loc for loc in sel.get("extra", []) if loc in ours]
    if extra:
        print(f"also ran (titles shared with ports, porting no test upstream ran; not compared): {', '.join(extra)}")
    print()
    if not compared:
        fail("no test passed on both sides: nothing to compare")
    up_sum = sum(t["seconds"] for t, _ in compared)
    our_sum = sum(s for _, s in compared)
    median = statistics.median(t["seconds"] / s for t, s in compared)
    print(f"tests compared (passed on both sides): {len(compared)} of {up_ran} upstream ran")
    print(f"summed per-test times: upstream {up_sum:.1f} s, dra-e2e {our_sum:.1f} s: "
          f"dra-e2e {up_sum / our_sum:.2f}x faster")
    print(f"median per-test ratio (upstream / dra-e2e): {median:.2f}x")
    print(f"walls: upstream {float(walls['UPSTREAM_WALL']):.1f} s, dra-e2e {float(walls['OURS_WALL']):.1f} s "
          f"(each with its cluster's start and stop): {float(walls['UPSTREAM_WALL']) / float(walls['OURS_WALL']):.2f}x")


def scaling_report(d):
    runs = []
    with open(os.path.join(d, "runs.tsv"), encoding="utf-8") as f:
        for line in f:
            kind, nodes, rc, wall, log, junit = line.rstrip("\n").split("\t")
            runs.append((kind, int(nodes), int(rc), float(wall), log, junit))
    print("== the whole suite by node count")
    print(f"{'nodes':>14} {'result':>32} {'run':>8} {'floor':>8} {'run/floor':>9} {'wall':>8} "
          f"{'vs fewest':>9} {'vs previous':>11} {'fixed cost med/p90':>19}")
    base, prev = {}, {}
    for kind, nodes, rc, wall, log, junit in runs:
        text = open(log, encoding="utf-8", errors="replace").read() if os.path.exists(log) else ""
        run = re.search(r"^run: ([0-9.]+)s for (\d+) scenarios", text, re.M)
        floor = re.search(r"^floor: ([0-9.]+)s .*run/floor ([0-9.]+)", text, re.M)
        fixed = re.search(r"^fixed cost per scenario .*median ([0-9.]+)s, 90th percentile ([0-9.]+)s", text, re.M)
        result = "no report"
        if os.path.exists(junit):
            cases = our_cases(junit).values()
            p = sum(1 for c in cases if c[2] == "passed")
            fl = sum(1 for c in cases if c[2] == "failed")
            sk = sum(1 for c in cases if c[2] == "skipped")
            result = f"{p} passed, {fl} failed, {sk} skipped"
        label = f"{nodes} {kind}"
        if run and floor:
            base.setdefault(kind, wall)
            fewest = f"{base[kind] / wall:.2f}x"
            previous = f"{prev[kind] / wall:.2f}x" if kind in prev else "-"
            prev[kind] = wall
            print(f"{label:>14} {result:>32} {float(run.group(1)):>7.1f}s {float(floor.group(1)):>7.1f}s "
                  f"{float(floor.group(2)):>9.2f} {wall:>7.1f}s {fewest:>9} {previous:>11} "
                  f"{(fixed.group(1) + 's / ' + fixed.group(2) + 's') if fixed else '-':>19}")
        else:
            tail = [l for l in text.strip().splitlines() if l.strip()][-3:]
            print(f"{label:>14} did not run through (exit {rc}, {wall:.0f} s); last lines of {log}:")
            for l in tail:
                print(f"{'':>16}{l[:200]}")
    print("vs fewest, vs previous: the wall of the fewest nodes of that kind, and of the count before, over this\n"
          "one's (above 1: the added nodes paid; 1 or below: they did not). Wall: the process, cluster start and stop included")


def main():
    if len(sys.argv) < 3:
        fail(__doc__)
    cmd, d = sys.argv[1], sys.argv[2]
    if cmd == "select":
        select(d)
    elif cmd == "check-list" and len(sys.argv) == 4:
        check_list(d, sys.argv[3])
    elif cmd == "upstream":
        upstream_report(d)
    elif cmd == "scaling":
        scaling_report(d)
    else:
        fail(__doc__)


if __name__ == "__main__":
    main()

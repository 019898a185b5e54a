"""The per-task table of a tile-scheduled forward: where one forward's time goes, task kind by kind.

    python3 -m experiments.probes.task_table TASKS.csv [--out TABLE.csv] [--path-out PATH.csv]
                                             [--schedule SCHEDULE.csv]

TASKS.csv is what the encoder bench's --task-times appends (the tile-scheduled steps: every task of
one eager forward with its SM and three stamps, in us from the kernel's first task: the CTA turned
to it, its inputs were there, its output was stored). Per version and batch, one row per task kind:
tasks, the median and total time they ran (inputs there -> output stored), the median and total
time their CTA waited for their inputs, their share of the CTAs' time (CTAs x the forward's span),
and the median over blocks of the kind's stage span (its first task's inputs there -> its last
task's output stored: the time the kind holds a block's chain). A last row per version gives the
span, the CTAs' time spent running tasks, waiting for inputs and idle (between tasks, and after a
CTA's last task). The CSV names SMs, not CTAs: the CTAs an SM holds are the most of its tasks that
overlap in time (a CTA runs one task at a time).

Where the CSV names each task's counters (columns `signals` and `waits`, "counter:target ..."),
a second table follows: the forward's critical path, from the task that ended last back through,
at each step, the task whose arrival met its last-met wait (the target-th task to signal that
counter, by end stamp). Per kind on the path: its tasks, the time they ran, the hand-off (the
predecessor stored -> the task's inputs seen there, while its CTA waited) and the time queued (the
predecessor stored -> a CTA turned to the task, when none had). Run + hand-off + queued over the
path add up to the span exactly. A CSV written before the bench recorded the counters gets them
from --schedule: what build/stages/encoder/tile_schedule_csv prints for the forward's shape,
joined by ticket (each task's kind and block must match). Where the CSV stamps the read-once GEMM
tasks' meeting (columns `arrived_us` and `met_us`, tile_shape=read_once), a third table splits
their run, per kind: the products (inputs there -> partial sums stored and arrival counted), the
meeting (-> every slice of the tile arrived) and the share (-> the slice's rows added and stored).
Standard library only; exit 2 with one line on stderr for a file that is not such a CSV.
"""
import argparse
import csv
import statistics
import sys
from collections import defaultdict

COLUMNS = ("version", "batch", "kind", "tasks", "run_median_us", "run_total_us", "wait_median_us", "wait_total_us",
           "share_of_cta_time", "stage_span_median_us")
NEEDED = ("version", "batch", "ticket", "kind", "block", "sm", "start_us", "ready_us", "end_us")
PATH_COLUMNS = ("version", "batch", "kind", "tasks", "run_us", "handoff_us", "queued_us", "share_of_span")
MEETING_COLUMNS = ("version", "batch", "kind", "tasks", "products_median_us", "meeting_median_us",
                   "share_median_us", "run_median_us")


def die(msg):
    print(f"task_table.py: {msg}", file=sys.stderr)
    sys.exit(2)


def read_rows(path):
    try:
        with open(path, newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        die(f"cannot read {path}: {e}")


def parse_waits(text):
    """ "12:4 30:1" -> [(12, 4), (30, 1)] """
    return [tuple(int(v) for v in w.split(":")) for w in text.split()]


def read(path):
    rows = read_rows(path)
    if not rows or any(c not in rows[0] for c in NEEDED):
        die(f"{path} is not a --task-times CSV (columns {', '.join(NEEDED)})")
    try:
        for r in rows:
            for c in ("start_us", "ready_us", "end_us"):
                r[c] = float(r[c])
            r["sm"] = int(r["sm"])
            r["block"] = int(r["block"])
            if "waits" in r and "signals" in r:
                r["signals"] = int(r["signals"])
                r["waits"] = parse_waits(r["waits"])
            for c in ("arrived_us", "met_us"):
                if c in r:
                    r[c] = float(r[c])
    except ValueError as e:
        die(f"{path}: a stamp or SM that is not a number ({e})")
    return rows


def ctas_on(tasks):
    """How many CTAs ran the tasks: per SM, the most tasks running at one instant (an end and a
    start at the same stamp do not overlap), summed over SMs."""
    events = defaultdict(list)
    for t in tasks:
        events[t["sm"]] += [(t["start_us"], 1), (t["end_us"], -1)]
    ctas = 0
    for evs in events.values():
        running = most = 0
        for _, step in sorted(evs):  # -1 sorts before +1 at one stamp
            running += step
            most = max(most, running)
        ctas += most
    return ctas


def stage_span(ts):
    """Median over blocks of the kind's span: its first task's inputs there -> its last task's end."""
    blocks = defaultdict(list)
    for t in ts:
        blocks[t["block"]].append(t)
    return statistics.median(max(t["end_us"] for t in b) - min(t["ready_us"] for t in b) for b in blocks.values())


def forwards(rows):
    """The tasks of each forward in the file, by (version, batch), in order of first appearance."""
    out = defaultdict(list)
    for r in rows:
        out[(r["version"], r["batch"])].append(r)
    return out


def table(rows):
    """The table's rows: per (version, batch), one per kind in order of first appearance, then 'all'."""
    out = []
    for (version, batch), tasks in forwards(rows).items():
        span = max(t["end_us"] for t in tasks)
        sms = len({t["sm"] for t in tasks})
        ctas = ctas_on(tasks)
        cta_time = span * ctas
        kinds = defaultdict(list)
        for t in tasks:
            kinds[t["kind"]].append(t)
        for kind, ts in kinds.items():
            run = [t["end_us"] - t["ready_us"] for t in ts]
            wait = [t["ready_us"] - t["start_us"] for t in ts]
            out.append({"version": version, "batch": batch, "kind": kind, "tasks": len(ts),
                        "run_median_us": statistics.median(run), "run_total_us": sum(run),
                        "wait_median_us": statistics.median(wait), "wait_total_us": sum(wait),
                        "share_of_cta_time": sum(run) / cta_time, "stage_span_median_us": stage_span(ts)})
        run = sum(t["end_us"] - t["ready_us"] for t in tasks)
        wait = sum(t["ready_us"] - t["start_us"] for t in tasks)
        out.append({"version": version, "batch": batch, "kind": f"all ({ctas} CTAs on {sms} SMs, span {span:.1f} us)",
                    "tasks": len(tasks), "run_median_us": statistics.median(t["end_us"] - t["ready_us"] for t in tasks),
                    "run_total_us": run, "wait_median_us": statistics.median(t["ready_us"] - t["start_us"] for t in tasks),
                    "wait_total_us": wait, "share_of_cta_time": run / cta_time, "stage_span_median_us": ""})
        out.append({"version": version, "batch": batch, "kind": "idle (between and after tasks)", "tasks": "",
                    "run_median_us": "", "run_total_us": cta_time - run - wait, "wait_median_us": "",
                    "wait_total_us": "", "share_of_cta_time": (cta_time - run - wait) / cta_time,
                    "stage_span_median_us": ""})
    return out


def join_schedule(tasks, path):
    """Each task's signals and waits from tile_schedule_csv's output, by ticket."""
    sched = read_rows(path)
    if not sched or any(c not in sched[0] for c in ("ticket", "kind", "block", "signals", "waits")):
        die(f"{path} is not tile_schedule_csv's output (columns ticket, kind, block, signals, waits)")
    by_ticket = {r["ticket"]: r for r in sched}
    for t in tasks:
        s = by_ticket.get(t["ticket"])
        if s is None or s["kind"] != t["kind"] or int(s["block"]) != t["block"]:
            die(f"{path} does not match the tasks (ticket {t['ticket']}: {t['kind']} of block {t['block']})")
        try:
            t["signals"] = int(s["signals"])
            t["waits"] = parse_waits(s["waits"])
        except ValueError as e:
            die(f"{path}: a counter that is not a number ({e})")


def critical_path(tasks):
    """[(task, predecessor or None)] from the forward's first task to the one that ended last."""
    signalers = defaultdict(list)
    for t in tasks:
        signalers[t["signals"]].append(t)
    for ts in signalers.values():
        ts.sort(key=lambda t: t["end_us"])

    def predecessor(t):
        best = None
        for counter, target in t["waits"]:
            if not 1 <= target <= len(signalers[counter]):
                die(f"a {t['kind']} task waits for counter {counter} to reach {target}, "
                    f"which {len(signalers[counter])} tasks signal")
            p = signalers[counter][target - 1]
            if best is None or p["end_us"] > best["end_us"]:
                best = p
        return best

    path, t = [], max(tasks, key=lambda t: t["end_us"])
    while t is not None and len(path) <= len(tasks):
        p = predecessor(t)
        path.append((t, p))
        t = p
    if len(path) > len(tasks):
        die("the waits form a cycle")
    return path[::-1]


def path_table(rows):
    """Per (version, batch), the critical path's time by kind: run, hand-off, queued; then the total."""
    out = []
    for (version, batch), tasks in forwards(rows).items():
        path = critical_path(tasks)
        span = path[-1][0]["end_us"]
        kinds = defaultdict(lambda: {"tasks": 0, "run_us": 0.0, "handoff_us": 0.0, "queued_us": 0.0})
        for t, p in path:
            before = p["end_us"] if p else 0.0
            k = kinds[t["kind"]]
            k["tasks"] += 1
            k["queued_us"] += max(0.0, t["start_us"] - before)
            k["handoff_us"] += t["ready_us"] - max(t["start_us"], before)
            k["run_us"] += t["end_us"] - t["ready_us"]
        total = {"tasks": 0, "run_us": 0.0, "handoff_us": 0.0, "queued_us": 0.0}
        for kind, k in kinds.items():
            out.append({"version": version, "batch": batch, "kind": kind, **k,
                        "share_of_span": (k["run_us"] + k["handoff_us"] + k["queued_us"]) / span})
            for c in total:
                total[c] += k[c]
        out.append({"version": version, "batch": batch, "kind": f"path ({len(path)} tasks, span {span:.1f} us)",
                    **total, "share_of_span": 1.0})
    return out


def meeting_table(rows):
    """Per (version, batch) and kind, the read-once GEMM tasks' run split at their meeting (the tasks
    stamped there: arrived_us >= 0)."""
    out = []
    for (version, batch), tasks in forwards(rows).items():
        kinds = defaultdict(list)
        for t in tasks:
            if t.get("arrived_us", -1) >= 0 and t.get("met_us", -1) >= 0:
                kinds[t["kind"]].append(t)
        for kind, ts in kinds.items():
            out.append({"version": version, "batch": batch, "kind": kind, "tasks": len(ts),
                        "products_median_us": statistics.median(t["arrived_us"] - t["ready_us"] for t in ts),
                        "meeting_median_us": statistics.median(t["met_us"] - t["arrived_us"] for t in ts),
                        "share_median_us": statistics.median(t["end_us"] - t["met_us"] for t in ts),
                        "run_median_us": statistics.median(t["end_us"] - t["ready_us"] for t in ts)})
    return out


def print_table(columns, rows):
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for r in rows:
        print("| " + " | ".join(fmt(r[c]) for c in columns) + " |")


def write_table(path, columns, rows):
    try:
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=columns)
            w.writeheader()
            w.writerows(rows)
    except OSError as e:
        die(f"cannot write {path}: {e}")


def fmt(v):
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 10 else f"{v:,.1f}"
    return str(v)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tasks", help="the CSV the encoder bench's --task-times wrote")
    ap.add_argument("--out", help="also write the table here as CSV")
    ap.add_argument("--path-out", help="also write the critical path's table here as CSV (needs the waits)")
    ap.add_argument("--schedule", help="tile_schedule_csv's output for a CSV without the counters")
    a = ap.parse_args(argv)
    tasks = read(a.tasks)
    if a.schedule:
        join_schedule(tasks, a.schedule)
    rows = table(tasks)
    print_table(COLUMNS, rows)
    if a.out:
        write_table(a.out, COLUMNS, rows)
    if "waits" in tasks[0] and "signals" in tasks[0]:
        path = path_table(tasks)
        print()
        print_table(PATH_COLUMNS, path)
        if a.path_out:
            write_table(a.path_out, PATH_COLUMNS, path)
    elif a.path_out:
        die(f"{a.tasks} has no waits column: no critical path (written by an older build)")
    meetings = meeting_table(tasks)
    if meetings:
        print()
        print_table(MEETING_COLUMNS, meetings)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Running one configuration of a sweep: a stage bench or an anchor script as a subprocess
writing into a private temporary CSV (collected only once it has ended), with a timeout, a
clean stop on SIGTERM, and the runner's own row when the process wrote none; and a kept anchor
process (AnchorWorker) that answers every row of its script in turn.
"""
import datetime
import json
import os
import select
import shlex
import signal
import subprocess
import sys
import tempfile
import time

from experiments.anchors.harness import SERVE_DONE
from studylib.row_file import read_csv
from studylib.schema import MODELS, PATCH, UTC_FORMAT
from studylib.specs import (EXTRA_RE, ROUND_RE, STREAMS_SM, STREAMS_SM_TAG, UsageError, extra_value, extra_text,
                            round_tag, weights_tag)

class Terminated(Exception):
    pass


def _on_signal(signum, _frame):
    raise Terminated(signum)


def runner_row(cfg, version, status, note, prov):
    """A row the runner writes itself (the subprocess wrote none, or the budget skipped it)."""
    try:
        hidden = extra_value(cfg.extra, "--hidden") or MODELS[cfg.model][0]
    except ValueError:
        hidden = ""
    row = {"family": cfg.family, "version": version, "model": cfg.model, "batch": cfg.batch,
           "image_size": cfg.image_size, "tokens": (cfg.image_size // PATCH) ** 2 + 1,
           "hidden": hidden, "streams": "" if cfg.streams == STREAMS_SM else cfg.streams,
           "warmup": cfg.warmup, "iters": cfg.iters,
           "flush_l2": "1" if cfg.flush_l2 else "0", "status": status, "note": note}
    try:
        row["rows"] = extra_value(cfg.extra, "--rows") or cfg.batch * (
            extra_value(cfg.extra, "--tokens") or row["tokens"])
    except ValueError:
        row["rows"] = ""
    if cfg.shapeless:
        row.update(model="", batch="", image_size="", tokens="", hidden="", rows="")
    row.update(prov)
    row["utc"] = datetime.datetime.now(datetime.timezone.utc).strftime(UTC_FORMAT)
    return row


def with_extra_note(row, cfg):
    """The runner's tags at the end of the note: `[streams: sm]`, `[round: k]` (multi-round
    sweeps only), `[weights: ...]` (timm_weights), then `[extra: ...]`, which stays last."""
    note = row.get("note", "") or ""
    m = EXTRA_RE.search(note)
    body = EXTRA_RE.sub("", note)
    tags = []
    if cfg.streams == STREAMS_SM and STREAMS_SM_TAG not in note:
        tags.append(STREAMS_SM_TAG)
    if cfg.rounds > 1 and not ROUND_RE.search(note):
        tags.append(round_tag(cfg.round))
    if cfg.weights and weights_tag(cfg.seed) not in note:
        tags.append(weights_tag(cfg.seed))
    if tags:
        row["note"] = " ".join(([body] if body else []) + tags) + (m.group(0) if m else "")
    if cfg.extra:
        note = EXTRA_RE.sub("", row.get("note", "") or "")
        row["note"] = (note + " " if note else "") + f"[extra: {extra_text(cfg.extra)}]"
    return row


class Outcome:
    def __init__(self, rows, returncode, timed_out, last_stderr):
        self.rows, self.returncode = rows, returncode
        self.timed_out, self.last_stderr = timed_out, last_stderr

    def reason(self, timeout_s):
        """Why a row is missing, for the `failed` row the runner writes in its place."""
        tail = f": {self.last_stderr}" if self.last_stderr else ""
        if self.timed_out:
            return f"timeout after {timeout_s:g} s{tail}"
        if self.returncode is None:
            return self.last_stderr
        if self.returncode < 0:
            return f"killed by signal {-self.returncode}, no row{tail}"
        return f"exit code {self.returncode}, no row{tail}"


def collect(cfg, csv_path, lines):
    """The rows a configuration wrote into its private CSV; a problem reading them is added to
    `lines` (its stderr), whose last line explains a missing row."""
    rows = []
    if os.path.exists(csv_path):
        try:
            rows, problems = read_csv(csv_path)
        except UsageError as e:
            rows, problems = [], [str(e)]
        for p in problems:
            print(f"  warning: {cfg.label}: {p}", file=sys.stderr)
            lines.append(p)
    return rows


def run_config(cfg, cmd, env, timeout_s, verbose):
    """Runs one configuration into a private temporary CSV and returns its Outcome."""
    with tempfile.TemporaryDirectory(prefix="study_sweep_") as tmpdir:
        csv_path = os.path.join(tmpdir, "rows.csv")
        full = cmd + cfg.args(csv_path, env["STUDY_SWEEP_DEVICE"])
        if verbose:
            print("  $ " + " ".join(shlex.quote(c) for c in full), flush=True)
        # Own session, so a timeout or an interrupted runner kills the bench and its children.
        try:
            proc = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, errors="replace", env=env, start_new_session=True)
        except OSError as e:  # e.g. the binary is being relinked right now
            return Outcome([], None, False, f"cannot run {full[0]}: {e.strerror}")
        timed_out = False
        try:
            try:
                out, err = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)
                out, err = proc.communicate()
        except BaseException:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()
            raise
        if verbose:
            for line in (out + err).strip().splitlines():
                print("  | " + line, flush=True)
        lines = [l.strip() for l in err.splitlines() if l.strip()]
        rows = collect(cfg, csv_path, lines)
        return Outcome(rows, proc.returncode, timed_out, lines[-1] if lines else "")


class AnchorWorker:
    """One long-lived process of an anchor script (`SCRIPT --serve`, anchors/common.py serve())
    answering the rows of a sweep's anchors in turn: a compiled model is then compiled once per
    shape, not once per round. A row keeps its own timeout: past it the process is killed (its
    row is `failed`) and the next row starts a new one. stderr goes to a file opened for
    appending, read back from where each row began."""

    def __init__(self, cmd, env):
        self.cmd, self.env = cmd, env
        self.proc = self.err = None

    def _start(self):
        if self.err is not None:
            self.err.close()
        self.err = tempfile.TemporaryFile(mode="a+", errors="replace")
        # Unbuffered bytes: readline() then never reads past the line select() saw arrive, so
        # the next select() cannot miss a line already read into a buffer.
        self.proc = subprocess.Popen(self.cmd + ["--serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.err, bufsize=0,
                                     env=self.env, start_new_session=True)

    def _kill(self):
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()
            self.proc = None

    def close(self):
        """Ends the process: end of its input, then a kill if it does not exit in 30 s."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._kill()
        if self.err is not None:
            self.err.close()
            self.err = None

    def run(self, cfg, timeout_s, verbose):
        with tempfile.TemporaryDirectory(prefix="study_sweep_") as tmpdir:
            csv_path = os.path.join(tmpdir, "rows.csv")
            argv = ["--version", cfg.label] + cfg.args(csv_path, self.env["STUDY_SWEEP_DEVICE"])
            if self.proc is None or self.proc.poll() is not None:
                self._kill()
                try:
                    self._start()
                except OSError as e:
                    return Outcome([], None, False, f"cannot run {self.cmd[0]}: {e.strerror}")
            if verbose:
                print("  $ (kept) " + " ".join(shlex.quote(c) for c in self.cmd + argv), flush=True)
            self.err.seek(0, os.SEEK_END)
            err_from = self.err.tell()
            code, timed_out = None, False
            deadline = time.monotonic() + timeout_s
            try:
                self.proc.stdin.write((json.dumps(argv) + "\n").encode())
                while True:
                    left = deadline - time.monotonic()
                    if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                        timed_out = True
                        break
                    line = self.proc.stdout.readline().decode(errors="replace")
                    if not line:   # the process ended without answering
                        break
                    answer = line.split()
                    if len(answer) == 2 and answer[0] == SERVE_DONE and answer[1].lstrip("-").isdigit():
                        code = int(answer[1])
                        break
                    if verbose:
                        print("  | " + line.rstrip(), flush=True)
            except (BrokenPipeError, ValueError):
                pass
            except BaseException:
                self._kill()
                raise
            if code is None:   # timed out or died: the next row gets a fresh process
                if not timed_out:
                    try:
                        code = self.proc.wait(timeout=30)
                    except subprocess.TimeoutExpired:   # closed its output, still running
                        pass
                self._kill()
            self.err.seek(err_from)
            lines = [l.strip() for l in self.err.read().splitlines() if l.strip()]
            rows = collect(cfg, csv_path, lines)
            return Outcome(rows, code, timed_out, lines[-1] if lines else "")

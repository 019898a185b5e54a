#!/usr/bin/env python3
"""The Python half keeps its rooms. studylib/ is the floor every room imports by name;
analysis/, experiments/, sbatch/ and report/ never import each other; vitstudy/, the module pip
installs alone, imports none of them and not studylib (any room may import it); no file edits sys.path
(a script runs as a module of the checkout, python3 -m ROOM.MODULE, or beside the module it
imports); studylib/ imports no room; no Python file is longer than MAX_LINES, except those
listed in SPLIT_PENDING, which may only shrink; no function of analysis/ is longer than
MAX_FUNCTION_LINES (one finding, figure or table a function); and no notebook's cells share a single-letter
global (a `t` set in one cell and read in another: give the section a function, or the value a
name); and the notebooks in PROSE_AS_CLAIMS write no report sentence in code (findings through
ctx.claims, targets through ctx.judge, captions, reasons, titles and labels as claim records:
studylib/claims.py; an f-string of FSTRING_WORDS words or more is such a sentence).
Usage: python_rooms.py REPO_ROOT"""
import ast
import re
import subprocess
import sys
from pathlib import Path

ROOMS = ("analysis", "experiments", "sbatch", "report")
FLOOR = "studylib"
MODULE = "vitstudy"
MAX_LINES = 700
MAX_FUNCTION_LINES = 80
LONG_FUNCTIONS_BARRED = ("analysis",)
# Files still over MAX_LINES, with their length now: they may only shrink (lower the number as they do).
SPLIT_PENDING: dict[str, int] = {}
# The one place that may put a folder on sys.path: the anchors' offline install of the torchao
# wheel into a temporary site folder on a GPU node without network (a package, not the study).
SYS_PATH_ALLOWED = {"experiments/anchors/harness.py"}
# Notebooks whose report sentences are claim records rendered through report/sentences/: a
# finding, target, caption or reason written in code there is a regression. Grows family by family.
PROSE_AS_CLAIMS = {
    "analysis/attention.py", "analysis/attention_data.py", "analysis/attention_figures.py",
    "analysis/attention_findings.py", "analysis/attention_tables.py", "analysis/encoder.py",
    "analysis/encoder_answer.py", "analysis/encoder_answer_figure.py", "analysis/encoder_figures.py",
    "analysis/encoder_ladder.py", "analysis/encoder_side.py", "analysis/encoder_tables.py",
    "analysis/encoder_waterfall.py", "analysis/gpus.py",
    "analysis/layernorm.py", "analysis/layernorm_data.py", "analysis/layernorm_figures.py",
    "analysis/layernorm_findings.py", "analysis/layernorm_tables.py", "analysis/mlp.py", "analysis/mlp_data.py",
    "analysis/mlp_figures.py", "analysis/mlp_findings.py", "analysis/mlp_side.py", "analysis/patch_embed.py",
    "analysis/patch_embed_costs.py", "analysis/patch_embed_data.py", "analysis/patch_embed_figures.py",
    "analysis/patch_embed_findings.py", "analysis/patch_embed_tables.py", "analysis/patch_embed_timeline.py",
    "analysis/plots.py"}
SENTENCE_ARG = {"figure": 2, "table": 2, "missing": 2}  # the index of ctx.<method>'s caption or reason
# An f-string whose own text holds this many words is a sentence (a title, an axis, a legend entry):
# it belongs in a sentence file. Fewer is a table's column name or a number's unit; an exception's
# message is the code's own voice, not the report's.
FSTRING_WORDS = 3
WORD = re.compile(r"(?<![\w/.])[A-Za-z]{2,}(?![\w/.])")
SYS_PATH_EDIT = re.compile(r"sys\.path\s*(\.\s*(insert|append|extend)\s*\(|\[[^\]]*\]\s*=|\s*\+=)")


def imported_modules(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


def prose_in_code(tree):
    """(line, why) for each report sentence a notebook writes in code instead of as a claim."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and getattr(node.func.value, "id", None) == "ctx"):
            continue
        name = node.func.attr
        if name in ("text", "target"):
            yield node.lineno, f"ctx.{name}: findings go through ctx.claims, targets through ctx.judge"
        i = SENTENCE_ARG.get(name)
        if i is not None and len(node.args) > i and isinstance(node.args[i], (ast.Constant, ast.JoinedStr, ast.BinOp)):
            yield node.lineno, f"ctx.{name}'s caption or reason is written in code: make it a claim record"
    raised = {id(m) for node in ast.walk(tree) if isinstance(node, ast.Raise) for m in ast.walk(node)}
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and id(node) not in raised:
            text = " ".join(v.value for v in node.values if isinstance(v, ast.Constant))
            if len(WORD.findall(text)) >= FSTRING_WORDS:
                yield node.lineno, "a sentence as an f-string: make it a claim record (ctx.said, claims.say)"


def shared_single_letters(text, tree):
    """Single-letter names a notebook's top level assigns in one cell and reads in another."""
    starts = [n for n, line in enumerate(text.splitlines(), 1) if line.startswith("# %%")]
    if not starts:
        return set()

    def cell(lineno):
        return sum(1 for s in starts if s <= lineno)
    def bound_inside(fn):  # a function's parameters and the names it assigns: its own, not globals
        names = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
        names |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        return names
    set_in, read_in = {}, {}
    for stmt in tree.body:
        c = cell(stmt.lineno)
        local = isinstance(stmt, (ast.FunctionDef, ast.ClassDef))
        own = bound_inside(stmt) if isinstance(stmt, ast.FunctionDef) else set()
        lambda_own = {id(n) for lam in ast.walk(stmt) if isinstance(lam, ast.Lambda)
                      for n in ast.walk(lam.body) if isinstance(n, ast.Name)
                      and n.id in {a.arg for a in ast.walk(lam.args) if isinstance(a, ast.arg)}}
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and len(node.id) == 1:
                if isinstance(node.ctx, ast.Store) and not local:
                    set_in.setdefault(node.id, set()).add(c)
                elif isinstance(node.ctx, ast.Load) and node.id not in own and id(node) not in lambda_own:
                    read_in.setdefault(node.id, set()).add(c)
    return {n for n, cells in set_in.items() if read_in.get(n, set()) - cells}


def main(root):
    root = Path(root).resolve()
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=root, capture_output=True, text=True,
                           check=True).stdout.split()
    problems = []
    for rel in files:
        path = root / rel
        text = path.read_text()
        room = rel.split("/")[0]
        for n, line in enumerate(text.splitlines(), 1):
            if SYS_PATH_EDIT.search(line) and rel not in SYS_PATH_ALLOWED:
                problems.append(f"{rel}:{n}: edits sys.path: import the package by name (python3 -m ...)")
        lines = text.count("\n")
        limit = SPLIT_PENDING.get(rel, MAX_LINES)
        if lines > limit:
            problems.append(f"{rel}: {lines} lines, more than {limit}: split it by concern")
        if room not in ROOMS + (FLOOR, MODULE):
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError as e:
            problems.append(f"{rel}: does not parse ({e})")
            continue
        if room in LONG_FUNCTIONS_BARRED:
            for fn in ast.walk(tree):
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    n = fn.end_lineno - fn.lineno + 1
                    if n > MAX_FUNCTION_LINES:
                        problems.append(f"{rel}:{fn.lineno}: {fn.name} is {n} lines, more than "
                                        f"{MAX_FUNCTION_LINES}: give each of its parts a function")
        if rel in PROSE_AS_CLAIMS:
            problems += [f"{rel}:{n}: {why}" for n, why in prose_in_code(tree)]
        shared = shared_single_letters(text, tree)
        if shared:
            problems.append(f"{rel}: cells share the single-letter globals {', '.join(sorted(shared))}: "
                            "give each section a function, or the value a name")
        for mod in imported_modules(tree):
            top = mod.split(".")[0]
            if room == MODULE and top in ROOMS + (FLOOR,):
                problems.append(f"{rel}: imports {mod}: {MODULE} is installed alone and imports no room")
            elif room == FLOOR and top in ROOMS:
                problems.append(f"{rel}: the floor imports the room {mod}")
            elif top in ROOMS and top != room:
                problems.append(f"{rel}: imports {mod}: rooms import {FLOOR}, never each other")
    for rel, was in SPLIT_PENDING.items():
        if rel not in files:
            problems.append(f"tests/python_rooms.py lists {rel}, which is gone: remove it from SPLIT_PENDING")
        elif (root / rel).read_text().count("\n") <= MAX_LINES:
            problems.append(f"{rel} is {MAX_LINES} lines or fewer now: remove it from SPLIT_PENDING")
    for p in problems:
        print("FAIL " + p)
    print(f"{len(files)} Python files: " + (f"{len(problems)} problem(s)" if problems else
          f"rooms kept, no sys.path edit, at most {MAX_LINES} lines, functions of "
          f"{', '.join(LONG_FUNCTIONS_BARRED)}/ at most {MAX_FUNCTION_LINES}"
          + (f" but {len(SPLIT_PENDING)} files still to split" if SPLIT_PENDING else "")))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

"""Where the study's folders are, from this package's place in the checkout."""
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS_ROOT = REPO / "experiments" / "results"
REPORT_DIR = REPO / "report"
STAGES_DIR = REPO / "stages"


def with_checkout_on_path(env, build_dir=None):
    """`env` with this checkout on PYTHONPATH: a script the study runs by path (an anchor)
    imports the package and its room by name, wherever it is started from. A build folder goes
    before it: the build's vitstudy/ (the Python files beside the compiled half) must win over
    the checkout's source folder of the same name, which has no compiled half."""
    import os
    rest = env.get("PYTHONPATH", "")
    paths = (str(build_dir) if build_dir else "", str(REPO), rest)
    return {**env, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}

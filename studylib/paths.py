"""Where the study's folders are, from this package's place in the checkout."""
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS_ROOT = REPO / "experiments" / "results"
REPORT_DIR = REPO / "report"
STAGES_DIR = REPO / "stages"


def with_checkout_on_path(env):
    """`env` with this checkout first on PYTHONPATH: a script the study runs by path (an anchor)
    imports the package and its room by name, wherever it is started from."""
    import os
    rest = env.get("PYTHONPATH", "")
    return {**env, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), rest) if p)}

"""Where the study's folders are, from this package's place in the checkout."""
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS_ROOT = REPO / "experiments" / "results"
REPORT_DIR = REPO / "report"
STAGES_DIR = REPO / "stages"

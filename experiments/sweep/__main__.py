"""python3 -m experiments.sweep --spec NAME ...: the sweep runner (experiments/sweep/run.py)."""
import sys

from experiments.sweep.run import cli

sys.exit(cli())

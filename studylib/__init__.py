"""The bottom floor of the study's Python half, imported by name by analysis/, experiments/,
sbatch/ and report/ (which never import each other): the CSV schema and model table
(`schema`), the encoder's step table and the families' version lists (`steps`, `catalog`), run
folders and their README (`rundata`, `run_folder`), number formats and markdown tables
(`formatting`), and the notebook-to-report contract (`notebook`).

The modules `schema`, `steps` and `run_folder` use the standard library only, so that a GPU
node's PyTorch anchors and the sweep runner import them without pandas.
"""


class DataError(Exception):
    """Committed data (or the report template) cannot be used as is.

    report/build.py turns this into one line on stderr and exit code 2, so the message must
    name the file and, where it applies, the line and column.
    """


class FigureError(DataError):
    """A figure a reader could not use: two series drawn alike, or too wide for the report."""


class NoData(DataError):
    """No run holds rows of the requested family."""

"""The Pareto front of a multi-objective search, and each objective's parameter importances.

Run: python analysis/pareto.py --experiment NAME [--tracking-uri URI] [--output-dir DIR]
"""

import sys

from astune.analysis.entry import main

if __name__ == "__main__":
    sys.exit(main("pareto"))

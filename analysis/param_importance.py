"""Parameter importances of a search (Optuna's fANOVA over the finished trials).

Run: python analysis/param_importance.py --experiment NAME [--tracking-uri URI] [--output-dir DIR]
"""

import sys

from astune.analysis.entry import main

if __name__ == "__main__":
    sys.exit(main("param_importance"))

"""Distribution of p_margin: best softmax against best AS-Softmax trial.

Run: python analysis/p_margin.py --experiment NAME [--tracking-uri URI] [--output-dir DIR]
"""

import sys

from astune.analysis.entry import main

if __name__ == "__main__":
    sys.exit(main("p_margin"))

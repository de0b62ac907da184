"""Masked samples over training, one line per AS-Softmax trial.

Run: python analysis/masked_ratio.py --experiment NAME [--tracking-uri URI] [--output-dir DIR]
"""

import sys

from astune.analysis.entry import main

if __name__ == "__main__":
    sys.exit(main("masked_ratio"))

"""Every study of one search into report.md with its figures (as `python -m astune report`).

Run: python analysis/report.py --experiment NAME [--tracking-uri URI] [--output-dir DIR]
"""

import sys

from astune.analysis.entry import main

if __name__ == "__main__":
    sys.exit(main(None))

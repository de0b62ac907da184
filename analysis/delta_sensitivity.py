"""Impact of delta: best objective of each AS-Softmax trial against delta.

Run: python analysis/delta_sensitivity.py --experiment NAME [--tracking-uri URI] [--output-dir DIR]
"""

import sys

from astune.analysis.entry import main

if __name__ == "__main__":
    sys.exit(main("delta_sensitivity"))

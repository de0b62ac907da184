"""Loss/metric consistency: Pearson r between validation loss and metric, per loss.

Run: python analysis/loss_metric_correlation.py --experiment NAME [--tracking-uri URI]
     [--output-dir DIR]
"""

import sys

from astune.analysis.entry import main

if __name__ == "__main__":
    sys.exit(main("loss_metric_correlation"))

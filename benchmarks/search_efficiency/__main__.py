"""``python -m benchmarks.search_efficiency COMMAND``: the study's commands (:mod:`.cli`)."""

from benchmarks.search_efficiency.cli import main

main()

"""The paper's analyses ("Result Analysis") of one search, read from its MLflow runs.

``runs`` loads an experiment into pandas; one module per study draws one figure and returns the
data behind it; ``report`` runs them all into a markdown report (`python -m astune report`);
``entry`` is the command line of the scripts in the repository's ``analysis/`` folder.
Heavy imports (mlflow, matplotlib) happen when a submodule is imported, not here.
"""

"""MLflow without Ray: astune's naming conventions, tracking URIs and the reader of past searches.

``export``, ``recommend``, ``confirm`` and ``analysis`` read through this package and never import
Ray; the search layer writes runs with its names.
"""

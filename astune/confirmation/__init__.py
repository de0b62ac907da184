"""`astune confirm` without Ray: which configs to re-run over seeds (``plan``), the statistics of
their runs (``stats``) and the table, files and figure they give (``table``). The Ray runner is
:mod:`astune.tuning.confirmation.confirm`."""

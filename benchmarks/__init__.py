"""astune's benchmarks, one package per study (README.md lists them); run each as a module from the
checkout's root, ``python -m benchmarks.<study>.<script>``."""

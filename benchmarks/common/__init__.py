"""What several studies share: the harness (configs from flags, the machine line, the commit), the
provenance of saved results and the GPU scripts' steps."""

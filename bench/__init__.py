"""zarrfuse's benchmarks: ``python -m bench run [NAMES...]`` (see ``bench/README.md``)."""

"""zarrfuse."""

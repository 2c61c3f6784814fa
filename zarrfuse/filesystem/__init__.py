"""The filesystem without FUSE: which paths exist, what a file's bytes are and how writes
become chunks. Nothing here imports pyfuse3, so tests drive it without a kernel."""

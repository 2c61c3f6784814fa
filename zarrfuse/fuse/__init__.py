"""The FUSE adapter (``operations``) and the mount lifecycle (``mount``), which need the
``mount`` extra; ``config`` and ``mountpoint`` do not, so the command line can use them."""

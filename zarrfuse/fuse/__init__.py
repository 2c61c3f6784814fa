"""The FUSE adapter (``operations``: pyfuse3 requests onto the filesystem) and the mount
lifecycle (``mount``: build, serve, unmount). Needs the ``mount`` extra (pyfuse3, trio);
``config`` and ``mountpoint`` do not, so the command line can use them without it.
"""

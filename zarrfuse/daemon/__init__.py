"""What runs beside a mount in its daemon: the control socket ``zarrfuse stats`` asks, the
readiness and status it tells systemd, and where its log goes. The command line (``cli``)
starts the daemon; nothing here parses arguments."""

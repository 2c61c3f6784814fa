# zarrfuse in a container: serves one mount in the foreground, as the container's main process.
#
#   docker build -t zarrfuse .
#   docker run -d --name images --device /dev/fuse --cap-add SYS_ADMIN \
#       --security-opt apparmor=unconfined \
#       -v /data/images.zarr:/data:ro \
#       -v /srv/images:/mnt/zarr:rshared \
#       zarrfuse /data /mnt/zarr --read-only
#
# The host sees the mount at /srv/images (rshared propagation; /srv/images must be on a
# shared mount, as it is on systemd hosts). `docker stop` sends SIGTERM: zarrfuse unmounts
# cleanly and exits. Arguments after the image name are `zarrfuse mount` arguments.

# --- build: the mount extra's pyfuse3 has no wheels and compiles against libfuse3 -----------
FROM python:3.11-slim-bookworm AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev pkg-config libfuse3-dev \
    && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml README.md /src/
COPY zarrfuse /src/zarrfuse
RUN python -m venv /opt/zarrfuse \
    && /opt/zarrfuse/bin/pip install --no-cache-dir '/src[mount]'

# --- run: the venv, libfuse3 and fusermount3; no compiler ---------------------------------------
FROM python:3.11-slim-bookworm
RUN apt-get update \
    && apt-get install -y --no-install-recommends fuse3 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/zarrfuse /opt/zarrfuse
RUN ln -s /opt/zarrfuse/bin/zarrfuse /usr/local/bin/zarrfuse \
    && ln -s /opt/zarrfuse/bin/mount.fuse.zarrfuse /usr/sbin/mount.fuse.zarrfuse \
    && mkdir -p /data /mnt/zarr
STOPSIGNAL SIGTERM
ENTRYPOINT ["zarrfuse", "mount", "--foreground"]
CMD ["/data", "/mnt/zarr"]

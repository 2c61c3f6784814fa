"""``s3://`` sources: one obstore client, configured once, shared by zarr and the mount.

obstore (Rust's ``object_store``) does the requests: on the loopback S3 server it listed
1.6x and fetched whole objects 3x faster than s3fs (README, "Object stores"). Credentials are
resolved by botocore, as the AWS CLI does (environment variables, ``~/.aws/credentials`` and
``~/.aws/config``, profiles, SSO, instance roles), and handed to obstore; object_store alone
reads only the environment. Every request has a timeout and a bounded number of retries with
backoff, so a dead server costs an error within seconds, never a hang.
"""

from __future__ import annotations

import datetime
import os
import urllib.parse
from typing import Any

from zarr.storage import ObjectStore, StorePath

from zarrfuse.errors import ConfigurationError, SourceError

__all__ = ["S3_SCHEMES", "STORAGE_OPTIONS", "is_s3_url", "open_s3"]

S3_SCHEMES = ("s3://", "s3a://")
STORAGE_OPTIONS = ("endpoint_url", "anon", "region", "profile")
"""The ``--storage-option`` keys an ``s3://`` source takes."""

# One request: connecting must succeed within CONNECT_TIMEOUT, the whole exchange within
# REQUEST_TIMEOUT (a 64 MiB part at 10 MB/s fits). Transient failures (connection errors,
# 5xx, timeouts of reads) are retried MAX_RETRIES times with exponential backoff, and never
# after RETRY_WINDOW: a read that keeps failing reports EIO after at most about 30 s.
CONNECT_TIMEOUT = "5s"
REQUEST_TIMEOUT = "30s"
MAX_RETRIES = 4
RETRY_WINDOW = datetime.timedelta(seconds=10)
BACKOFF = {
    "init_backoff": datetime.timedelta(milliseconds=100),
    "max_backoff": datetime.timedelta(seconds=2),
    "base": 2,
}

_TRUE = frozenset({"1", "yes", "true", "on"})
_FALSE = frozenset({"", "0", "no", "false", "off"})


def is_s3_url(source: Any) -> bool:
    return isinstance(source, str) and source.startswith(S3_SCHEMES)


def _flag(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigurationError(f"storage option {key}={value!r}: expected true or false")


def _check_options(options: dict[str, Any]) -> None:
    unknown = sorted(set(options) - set(STORAGE_OPTIONS))
    if unknown:
        raise ConfigurationError(
            f"unknown storage option {', '.join(unknown)} for s3:// sources "
            f"(known: {', '.join(STORAGE_OPTIONS)})"
        )


class BotocoreCredentials:
    """obstore credential provider backed by botocore's resolution chain.

    Temporary credentials (SSO, assumed roles, instance roles) carry their expiry, so obstore
    asks again before they lapse; botocore refreshes them.
    """

    def __init__(self, credentials: Any) -> None:
        self.credentials = credentials

    def __call__(self) -> dict[str, Any]:
        frozen = self.credentials.get_frozen_credentials()
        expiry = getattr(self.credentials, "_expiry_time", None)
        return {
            "access_key_id": frozen.access_key,
            "secret_access_key": frozen.secret_key,
            "token": frozen.token,
            "expires_at": expiry,
        }


def _aws_defaults(profile: str | None, *, anon: bool) -> tuple[str | None, Any]:
    """The region and credentials the AWS configuration gives (credentials None if anon)."""
    import botocore.exceptions  # noqa: PLC0415  (only s3:// sources need botocore)
    import botocore.session  # noqa: PLC0415

    try:
        session = botocore.session.Session(profile=profile)
        region = session.get_config_variable("region")
        credentials = None if anon else session.get_credentials()
    except botocore.exceptions.ProfileNotFound as e:
        raise SourceError(f"AWS profile {profile!r} not found ({e})") from e
    except botocore.exceptions.BotoCoreError as e:
        raise SourceError(f"cannot read the AWS configuration: {e}") from e
    if credentials is None and not anon:
        raise SourceError(
            "no AWS credentials found (environment, ~/.aws/credentials, profile); "
            "use --storage-option anon=true for public buckets"
        )
    return region, credentials


def s3_client_config(options: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments for ``obstore.store.S3Store`` from the storage options and the
    standard AWS configuration; no request is made."""
    _check_options(options)
    anon = _flag("anon", options.get("anon", False))
    default_region, credentials = _aws_defaults(options.get("profile") or None, anon=anon)
    region = options.get("region") or default_region or "us-east-1"
    endpoint = options.get("endpoint_url") or os.environ.get("AWS_ENDPOINT_URL_S3") or (
        os.environ.get("AWS_ENDPOINT_URL")
    )
    config: dict[str, Any] = {"region": region}
    client_options: dict[str, Any] = {
        "connect_timeout": CONNECT_TIMEOUT,
        "timeout": REQUEST_TIMEOUT,
    }
    if endpoint:
        config["endpoint"] = endpoint
        # A custom endpoint (MinIO, Ceph, moto) is addressed by path, as the AWS CLI does.
        config["virtual_hosted_style_request"] = False
        client_options["allow_http"] = endpoint.startswith("http://")
    kwargs: dict[str, Any] = {
        "config": config,
        "client_options": client_options,
        "retry_config": {
            "max_retries": MAX_RETRIES,
            "backoff": BACKOFF,
            "retry_timeout": RETRY_WINDOW,
        },
    }
    if anon:
        config["skip_signature"] = True
    else:
        kwargs["credential_provider"] = BotocoreCredentials(credentials)
    return kwargs


def split_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/some/path`` -> ``("bucket", "some/path")``."""
    parsed = urllib.parse.urlparse(url)
    bucket = parsed.netloc
    if not bucket:
        raise SourceError(f"{url}: no bucket in the URL (expected s3://BUCKET/PATH)")
    return bucket, urllib.parse.unquote(parsed.path).strip("/")


def open_s3(url: str, *, read_only: bool, storage_options: dict[str, Any] | None) -> StorePath:
    """A zarr ``StorePath`` for ``url`` on an obstore-backed ``ObjectStore`` rooted at the
    bucket (the path inside it is the store path)."""
    from obstore.store import S3Store  # noqa: PLC0415

    bucket, path = split_s3_url(url)
    store = S3Store(bucket, **s3_client_config(dict(storage_options or {})))
    return StorePath(ObjectStore(store, read_only=read_only), path)

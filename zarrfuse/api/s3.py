"""``s3://`` sources: one obstore client, configured once, shared by zarr and the mount.

obstore (Rust's ``object_store``) listed 1.6x and fetched whole objects 3x faster than s3fs
on the loopback S3 server (docs/sources.md, "Object stores"). Credentials given as storage
options (``key``/``secret``/``token``, as s3fs takes them) are used as given; otherwise
botocore resolves them as the AWS CLI does (environment, ``~/.aws``, profiles, SSO,
instance roles): object_store alone reads only the environment. Every request has a
timeout and bounded retries (``retry_config``): a dead server costs an error, never a hang.
"""

from __future__ import annotations

import datetime
import json
import os
import urllib.parse
from collections.abc import Mapping
from typing import Any

from zarr.storage import ObjectStore, StorePath

from zarrfuse.errors import ConfigurationError, SourceError

__all__ = [
    "ALIASES", "CLIENT_KWARGS", "S3_SCHEMES", "STORAGE_OPTIONS", "client_options", "is_s3_url",
    "normalize_storage_options", "open_s3", "retry_config"
]

S3_SCHEMES = ("s3://", "s3a://")
STORAGE_OPTIONS = (
    "endpoint_url", "anon", "region", "profile",
    "access_key_id", "secret_access_key", "session_token",
)
"""zarrfuse's own ``--storage-option`` keys for ``s3://`` sources."""

ALIASES = {"key": "access_key_id", "secret": "secret_access_key", "token": "session_token"}
"""s3fs's names (what zarr users pass to zarr and fsspec) for zarrfuse's own."""

CLIENT_KWARGS = {"endpoint_url": "endpoint_url", "region_name": "region"}
"""The keys of s3fs's ``client_kwargs`` (botocore client arguments) zarrfuse takes, and
zarrfuse's name for each."""

_CREDENTIALS = ("access_key_id", "secret_access_key", "session_token")
"""Options whose values never appear in an error message."""


def client_options(endpoint: str | None) -> dict[str, Any]:
    """obstore's client options for every remote source: connecting must succeed within 5 s,
    the whole exchange within 30 s (a 64 MiB part at 10 MB/s fits)."""
    options: dict[str, Any] = {"connect_timeout": "5s", "timeout": "30s"}
    if endpoint and endpoint.startswith("http://"):
        options["allow_http"] = True  # an emulator or test server on loopback
    return options


def retry_config() -> dict[str, Any]:
    """Transient failures (connection errors, 5xx, timeouts of reads) retried 4 times with
    exponential backoff, never after 10 s: a read that keeps failing reports EIO after at
    most about 30 s."""
    backoff = {"init_backoff": datetime.timedelta(milliseconds=100),
               "max_backoff": datetime.timedelta(seconds=2), "base": 2}
    return {"max_retries": 4, "backoff": backoff,
            "retry_timeout": datetime.timedelta(seconds=10)}


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


def _client_kwargs(value: Any) -> dict[str, Any]:
    """s3fs's ``client_kwargs``: a dict (Python) or its JSON text (command line, mount options)."""
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except json.JSONDecodeError as e:
            raise ConfigurationError(
                f"storage option client_kwargs: not JSON ({e.msg}); expected e.g. "
                'client_kwargs={"region_name": "eu-west-1"}, or give region= and endpoint_url='
            ) from None
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f"storage option client_kwargs: expected a JSON object, got {type(value).__name__}"
        )
    unknown = sorted(str(k) for k in set(value) - set(CLIENT_KWARGS))
    if unknown:
        raise ConfigurationError(
            f"unknown key {', '.join(unknown)} in storage option client_kwargs for s3:// "
            f"sources (known: {', '.join(CLIENT_KWARGS)})"
        )
    return dict(value)


def _spellings(options: Mapping[str, Any]) -> dict[str, list[tuple[str, Any]]]:
    """Each of zarrfuse's names -> the ``(spelling, value)`` pairs that set it, in order;
    values of None or "" (s3fs's defaults, an empty ``KEY=``) set nothing."""
    found: dict[str, list[tuple[str, Any]]] = {}
    unknown = []
    for key, value in options.items():
        if key == "client_kwargs":
            inner = _client_kwargs(value).items()
            pairs = [(CLIENT_KWARGS[k], f"client_kwargs.{k}", v) for k, v in inner]
        elif key in STORAGE_OPTIONS or key in ALIASES:
            pairs = [(ALIASES.get(key, key), key, value)]
        else:
            unknown.append(str(key))
            continue
        for name, spelling, given in pairs:
            if given is None or given == "":
                continue
            if name != "anon" and not isinstance(given, str):
                raise ConfigurationError(
                    f"storage option {spelling}: expected a string, got {type(given).__name__}"
                )
            found.setdefault(name, []).append((spelling, given))
    if unknown:
        known = (*STORAGE_OPTIONS, *ALIASES, "client_kwargs")
        raise ConfigurationError(
            f"unknown storage option {', '.join(sorted(unknown))} for s3:// sources "
            f"(known: {', '.join(known)})"
        )
    return found


def _conflict(name: str, first: tuple[str, Any], other: tuple[str, Any]) -> ConfigurationError:
    if name in _CREDENTIALS:  # never echo a credential
        return ConfigurationError(
            f"storage options {first[0]} and {other[0]} conflict: they give different values"
        )
    return ConfigurationError(
        f"storage options {first[0]}={first[1]!r} and {other[0]}={other[1]!r} conflict: "
        "give one"
    )


def _partner(spelling: str, name: str) -> str:
    """How to spell the credential ``name`` in the vocabulary ``spelling`` comes from."""
    if spelling in ALIASES:
        return next(alias for alias, own in ALIASES.items() if own == name)
    return name


def _check_credentials(options: dict[str, Any], spelled: dict[str, str]) -> None:
    """Explicit credentials are a key id and its secret (and maybe a session token), which
    replace botocore's chain; they cannot be combined with unsigned requests or a profile."""
    key, secret = "access_key_id" in options, "secret_access_key" in options
    if key != secret:
        given = spelled["access_key_id" if key else "secret_access_key"]
        missing = _partner(given, "secret_access_key" if key else "access_key_id")
        raise ConfigurationError(f"storage option {given} needs {missing} as well")
    if "session_token" in options and not key:
        token = spelled["session_token"]
        raise ConfigurationError(
            f"storage option {token} needs {_partner(token, 'access_key_id')} and "
            f"{_partner(token, 'secret_access_key')} as well"
        )
    if not key:
        return
    if _flag("anon", options.get("anon", False)):
        raise ConfigurationError(
            f"storage options anon=true and {spelled['access_key_id']} conflict: "
            "anonymous requests use no credentials"
        )
    if "profile" in options:
        raise ConfigurationError(
            f"storage options profile and {spelled['access_key_id']} conflict: credentials "
            "come from a profile or are given, not both"
        )


def normalize_storage_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """``storage_options`` with s3fs's spellings mapped onto zarrfuse's own names.

    zarr users pass s3fs's names (``key``, ``secret``, ``token``, ``client_kwargs``) to zarr
    and fsspec; zarrfuse takes them too, so the same dict works here. Two spellings of one
    setting must agree; otherwise, as for unknown keys and incomplete credentials, a one-line
    ConfigurationError. The result holds only zarrfuse's names, and normalizing it again
    changes nothing.
    """
    normalized: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for name, given in _spellings(options or {}).items():
        first, *others = given
        for other in others:
            if other[1] != first[1]:
                raise _conflict(name, first, other)
        normalized[name], spelled[name] = first[1], first[0]
    _check_credentials(normalized, spelled)
    return normalized


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
        return {"access_key_id": frozen.access_key, "secret_access_key": frozen.secret_key,
                "token": frozen.token, "expires_at": expiry}


class StaticCredentials:
    """obstore credential provider for credentials given as storage options.

    A provider rather than obstore's ``access_key_id`` config keys: object_store also reads
    ``AWS_SESSION_TOKEN`` from the environment, and would sign the given key with another
    identity's token.
    """

    def __init__(self, access_key_id: str, secret_access_key: str, token: str | None) -> None:
        self.credential = {"access_key_id": access_key_id, "secret_access_key": secret_access_key,
                           "token": token, "expires_at": None}  # None: never asks again

    def __call__(self) -> dict[str, Any]:
        return dict(self.credential)


def _aws_defaults(profile: str | None, *, credentials: bool) -> tuple[str | None, Any]:
    """The region the AWS configuration gives, and its credentials if ``credentials``
    (else None: anonymous, or given as storage options)."""
    import botocore.exceptions  # noqa: PLC0415  (only s3:// sources need botocore)
    import botocore.session  # noqa: PLC0415  (as above)

    try:
        session = botocore.session.Session(profile=profile)
        region = session.get_config_variable("region")
        found = session.get_credentials() if credentials else None
    except botocore.exceptions.ProfileNotFound as e:
        raise SourceError(f"AWS profile {profile!r} not found ({e})") from e
    except botocore.exceptions.BotoCoreError as e:
        raise SourceError(f"cannot read the AWS configuration: {e}") from e
    if found is None and credentials:
        raise SourceError("no AWS credentials found (environment, ~/.aws/credentials, profile); "
                          "use --storage-option anon=true for public buckets")
    return region, found


def s3_client_config(storage_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Keyword arguments for ``obstore.store.S3Store`` from the storage options (either
    spelling) and the standard AWS configuration; no request is made."""
    options = normalize_storage_options(storage_options)
    anon = _flag("anon", options.get("anon", False))
    given = "access_key_id" in options
    default_region, credentials = _aws_defaults(
        options.get("profile"), credentials=not (anon or given)
    )
    region = options.get("region") or default_region or "us-east-1"
    endpoint = options.get("endpoint_url") or os.environ.get("AWS_ENDPOINT_URL_S3") or (
        os.environ.get("AWS_ENDPOINT_URL")
    )
    config: dict[str, Any] = {"region": region}
    if endpoint:
        config["endpoint"] = endpoint
        # A custom endpoint (MinIO, Ceph, moto) is addressed by path, as the AWS CLI does.
        config["virtual_hosted_style_request"] = False
    kwargs: dict[str, Any] = {"config": config, "client_options": client_options(endpoint),
                              "retry_config": retry_config()}
    if anon:
        config["skip_signature"] = True
    elif given:
        kwargs["credential_provider"] = StaticCredentials(
            options["access_key_id"], options["secret_access_key"], options.get("session_token")
        )
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


def open_s3(
    url: str, *, read_only: bool, storage_options: Mapping[str, Any] | None
) -> StorePath:
    """A zarr ``StorePath`` for ``url`` on an obstore-backed ``ObjectStore`` rooted at the
    bucket (the path inside it is the store path)."""
    from obstore.store import S3Store  # noqa: PLC0415  (only s3:// sources need obstore)

    bucket, path = split_s3_url(url)
    store = S3Store(bucket, **s3_client_config(storage_options))
    return StorePath(ObjectStore(store, read_only=read_only), path)

"""``az://`` (Azure Blob Storage), ``gs://`` (Google Cloud Storage) and ``http(s)://`` (web
server) sources, through obstore.

As ``s3://``: one obstore client per source, the same timeouts and retries, in zarr's
``ObjectStore``. Options take the names users give adlfs, gcsfs and fsspec's HTTP filesystem,
translated to obstore's; credentials not given come from the usual environment variables.
A web server's redirect to another host is refused unless allowed (``--allow-redirects``):
obstore follows every redirect and has no setting against it, so requests to any host but
the source's go to a proxy that cannot be reached (``REDIRECT_TRAP``), and fail there.
"""

from __future__ import annotations

import logging
import os
import urllib.parse
from collections.abc import Mapping
from typing import Any

from zarr.storage import ObjectStore, StorePath

from zarrfuse.api.s3 import client_options, retry_config
from zarrfuse.errors import ConfigurationError, SourceError
from zarrfuse.limits import REDIRECT_TRAP

__all__ = [
    "AZURE_OPTIONS", "AZURE_SCHEMES", "GCS_OPTIONS", "GCS_SCHEMES", "WEB_OPTIONS", "WEB_SCHEMES",
    "azure_config", "gcs_config", "is_cloud_url", "open_cloud"
]

AZURE_SCHEMES = ("az://", "abfs://", "abfss://", "azure://")
GCS_SCHEMES = ("gs://", "gcs://")
WEB_SCHEMES = ("http://", "https://")

AZURE_OPTIONS = (
    "account_name", "account_key", "sas_token", "connection_string", "anon",
    "tenant_id", "client_id", "client_secret", "endpoint_url",
)
"""adlfs's names (and ``endpoint_url``, for Azurite or a sovereign cloud)."""

GCS_OPTIONS = ("token", "project", "endpoint_url")
"""gcsfs's names: ``token`` is ``"anon"`` (public buckets) or a service account JSON file."""

WEB_OPTIONS = ("headers",)
"""fsspec's HTTP filesystem's name: ``headers`` sent with every request (a mapping, or
``Name: value`` lines), such as an ``Authorization`` token."""

_AZURE_ENV = {
    "connection_string": "AZURE_STORAGE_CONNECTION_STRING",
    "account_name": "AZURE_STORAGE_ACCOUNT_NAME",
    "account_key": "AZURE_STORAGE_ACCOUNT_KEY",
    "sas_token": "AZURE_STORAGE_SAS_TOKEN",
}
"""The environment variables adlfs and the Azure CLI read, for options not given."""

_TRUE = frozenset({"1", "yes", "true", "on"})


def is_cloud_url(source: Any) -> bool:
    return isinstance(source, str) and source.startswith(
        (*AZURE_SCHEMES, *GCS_SCHEMES, *WEB_SCHEMES))


def _checked(options: Mapping[str, Any] | None, known: tuple[str, ...], kind: str) -> dict:
    given = {k: v for k, v in (options or {}).items() if v not in (None, "")}
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ConfigurationError(f"unknown storage option {', '.join(unknown)} for {kind} sources "
                                 f"(known: {', '.join(known)})")
    return given


def parse_connection_string(text: str) -> dict[str, str]:
    """An Azure Storage connection string (``Key=Value;...``) as obstore configuration."""
    fields = dict(
        part.split("=", 1) for part in text.strip().strip(";").split(";") if "=" in part
    )
    if fields.get("UseDevelopmentStorage", "").lower() == "true":
        return {"use_emulator": "true"}
    config = {}
    for field, key in (("AccountName", "account_name"), ("AccountKey", "account_key"),
                       ("BlobEndpoint", "endpoint"), ("SharedAccessSignature", "sas_key")):
        if fields.get(field):
            config[key] = fields[field]
    if not config:
        raise ConfigurationError("connection_string: no AccountName, AccountKey or "
                                 "BlobEndpoint in it")
    return config


def azure_config(storage_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Keyword arguments for ``obstore.store.AzureStore`` (no request is made)."""
    options = _checked(storage_options, AZURE_OPTIONS, "az://")
    for name, variable in _AZURE_ENV.items():
        if name not in options and os.environ.get(variable):
            options[name] = os.environ[variable]
    config: dict[str, Any] = {}
    if "connection_string" in options:
        config.update(parse_connection_string(str(options["connection_string"])))
    for name in ("account_name", "account_key", "tenant_id", "client_id", "client_secret",
                 "endpoint_url"):
        if name in options:
            config["endpoint" if name == "endpoint_url" else name] = str(options[name])
    if "sas_token" in options:
        config["sas_key"] = str(options["sas_token"]).lstrip("?")
    if str(options.get("anon", "")).strip().lower() in _TRUE or options.get("anon") is True:
        config["skip_signature"] = True
    if "account_name" not in config and "use_emulator" not in config:
        raise ConfigurationError(
            "az:// sources need a storage account: give --storage-option account_name=... "
            "(or connection_string=...), or set AZURE_STORAGE_ACCOUNT_NAME or "
            "AZURE_STORAGE_CONNECTION_STRING"
        )
    return {"config": config, "client_options": client_options(config.get("endpoint")),
            "retry_config": retry_config()}


def gcs_config(storage_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Keyword arguments for ``obstore.store.GCSStore`` (no request is made)."""
    options = _checked(storage_options, GCS_OPTIONS, "gs://")
    config: dict[str, Any] = {}
    emulator = os.environ.get("STORAGE_EMULATOR_HOST")  # what gcsfs and Google's SDKs honour
    endpoint = options.get("endpoint_url") or emulator
    if endpoint:
        config["base_url"] = str(endpoint)
    token = options.get("token")
    if token == "anon" or (token is None and emulator):
        config["skip_signature"] = True
    elif isinstance(token, str) and token not in ("google_default", "cloud", "cache"):
        config["service_account"] = token  # a service account JSON file, as gcsfs takes it
    return {"config": config, "client_options": client_options(config.get("base_url")),
            "retry_config": retry_config()}


def _split(url: str) -> tuple[str, str, str]:
    """(container or bucket, path, account from the host or ""), for every scheme here."""
    parsed = urllib.parse.urlparse(url)
    host, path = parsed.netloc, urllib.parse.unquote(parsed.path).strip("/")
    account = ""
    if "@" in host:  # abfs://container@account.dfs.core.windows.net/path
        host, _, domain = host.partition("@")
        account = domain.split(".")[0]
    if not host:
        raise SourceError(f"{url}: no bucket or container in the URL")
    return host, path, account


def open_cloud(
    url: str, *, read_only: bool, storage_options: Mapping[str, Any] | None,
    allow_redirects: bool = False,
) -> StorePath:
    """A zarr ``StorePath`` for an ``az://`` or ``gs://`` URL, rooted at the container or
    bucket (the path inside it is the store path); for a web server's URL, rooted at the URL
    itself, and read-only (a web server takes no writes)."""
    from obstore.store import AzureStore, GCSStore  # noqa: PLC0415  (only these sources)

    if url.startswith(WEB_SCHEMES):
        return StorePath(ObjectStore(_web_store(url, storage_options, allow_redirects),
                                     read_only=True))
    container, path, account = _split(url)
    store: Any
    if url.startswith(AZURE_SCHEMES):
        options = dict(storage_options or {})
        if account and "account_name" not in options:
            options["account_name"] = account
        store = AzureStore(container, **azure_config(options))
    else:
        store = GCSStore(container, **gcs_config(storage_options))
    return StorePath(ObjectStore(store, read_only=read_only), path)


def _web_store(url: str, options: Mapping[str, Any] | None, allow_redirects: bool) -> Any:
    """An obstore ``HTTPStore`` rooted at ``url`` (no request is made): zarrfuse's timeouts
    and retries, the ``headers`` option on every request, redirects to another host refused
    unless allowed. A proxy named by the environment (``https_proxy``...) is the client's
    only while no proxy is set: with one, redirects are followed."""
    from obstore.store import HTTPStore  # noqa: PLC0415  (only these sources)

    given = _checked(options, WEB_OPTIONS, "http(s)://")
    client = client_options(url)
    headers = given.get("headers")
    if isinstance(headers, str):
        headers = dict(line.split(":", 1) for line in headers.splitlines() if ":" in line)
    if headers:
        client["default_headers"] = {str(k).strip(): str(v).strip()
                                     for k, v in dict(headers).items()}
    if not allow_redirects and _proxied():
        logging.getLogger(__name__).warning(
            "%s: a proxy is set (https_proxy...): redirects to other hosts are followed", url)
    elif not allow_redirects:
        client["proxy_url"] = f"http://{REDIRECT_TRAP}"
        client["proxy_excludes"] = urllib.parse.urlparse(url).hostname or ""
    config: dict[str, Any] = {"client_options": client, "retry_config": retry_config()}
    return HTTPStore.from_url(url.rstrip("/"), **config)


def _proxied() -> bool:
    """Whether the environment names a proxy for web requests (reqwest honours these)."""
    return any(os.environ.get(name) for name in (
        "http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"))

"""``storage_options`` for ``s3://`` sources in s3fs's spelling (what zarr users pass to zarr
and fsspec) as well as zarrfuse's own: the mapping, its errors, and real round trips.

The round trips run against moto's S3 on 127.0.0.1 with signature checking on
(``signatures_checked``): an unknown key id, a wrong secret or a stray session token is
refused there, so a request that succeeds was signed with the credentials the test gave.
The environment holds other, wrong credentials throughout, which must lose.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pytest

import zarrfuse
from tests.mounting import ZARRFUSE, mounted, requires_fuse, run_with_timeout
from tests.s3server import S3Server, aws_environment, iam_user, signatures_checked
from zarrfuse.api.s3 import StaticCredentials, normalize_storage_options, s3_client_config
from zarrfuse.errors import ConfigurationError

BUCKET = "zarrfuse-options"
WRONG_ENV = {  # what the environment offers; the options' credentials must win over it
    "AWS_ACCESS_KEY_ID": "AKIAWRONGWRONGWRONG0",
    "AWS_SECRET_ACCESS_KEY": "wrong",
    "AWS_SESSION_TOKEN": "stray-token",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


# --- the mapping ------------------------------------------------------------------------------


def test_fsspec_names_map_onto_zarrfuse_names():
    given = {
        "key": "AKIA1", "secret": "s3cr3t", "token": "tok", "anon": False,
        "client_kwargs": {"endpoint_url": "http://minio:9000", "region_name": "eu-west-1"},
    }
    expected = {
        "access_key_id": "AKIA1", "secret_access_key": "s3cr3t", "session_token": "tok",
        "anon": False, "endpoint_url": "http://minio:9000", "region": "eu-west-1",
    }
    assert normalize_storage_options(given) == expected
    assert normalize_storage_options(expected) == expected  # zarrfuse's own names: unchanged


def test_client_kwargs_as_json_text_as_the_command_line_gives_it():
    text = '{"endpoint_url": "http://minio:9000", "region_name": "eu-west-1"}'
    assert normalize_storage_options({"client_kwargs": text, "anon": "true"}) == {
        "endpoint_url": "http://minio:9000", "region": "eu-west-1", "anon": "true"}
    assert normalize_storage_options({"client_kwargs": ""}) == {}
    assert normalize_storage_options({"client_kwargs": "{}", "profile": "p"}) == {"profile": "p"}


def test_unset_values_are_absent():
    """s3fs's defaults written out (``key=None``), and an empty ``KEY=`` on the command line."""
    assert normalize_storage_options(
        {"key": None, "secret": None, "token": None, "client_kwargs": None, "region": ""}
    ) == {}
    assert normalize_storage_options(None) == {}


def test_the_same_value_under_two_spellings_is_fine():
    options = {
        "endpoint_url": "http://e", "client_kwargs": {"endpoint_url": "http://e",
                                                      "region_name": "r"},
        "region": "r", "key": "k", "access_key_id": "k", "secret": "s",
        "secret_access_key": "s",
    }
    assert normalize_storage_options(options) == {
        "endpoint_url": "http://e", "region": "r", "access_key_id": "k",
        "secret_access_key": "s"}


@pytest.mark.parametrize(
    ("options", "names"),
    [
        ({"endpoint_url": "http://a", "client_kwargs": {"endpoint_url": "http://b"}},
         ("endpoint_url='http://a'", "client_kwargs.endpoint_url='http://b'")),
        ({"client_kwargs": '{"region_name": "eu-west-1"}', "region": "us-east-1"},
         ("client_kwargs.region_name='eu-west-1'", "region='us-east-1'")),
        ({"key": "AKIA1", "access_key_id": "AKIA2", "secret": "s"},
         ("key", "access_key_id")),
        ({"key": "k", "secret": "hush-1", "secret_access_key": "hush-2"},
         ("secret", "secret_access_key")),
        ({"key": "k", "secret": "s", "session_token": "tok-1", "token": "tok-2"},
         ("session_token", "token")),
    ],
    ids=["endpoint", "region", "key", "secret", "token"],
)
def test_conflicting_spellings_are_a_one_line_error_naming_both(options, names):
    with pytest.raises(ConfigurationError) as caught:
        normalize_storage_options(options)
    message = str(caught.value)
    assert "\n" not in message and "conflict" in message
    assert all(name in message for name in names), message
    for secret in ("AKIA1", "AKIA2", "hush-1", "hush-2", "tok-1", "tok-2"):
        assert secret not in message  # credentials are named, never shown


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"key": "k"}, "storage option key needs secret as well"),
        ({"secret_access_key": "s"}, "storage option secret_access_key needs access_key_id"),
        ({"token": "t"}, "storage option token needs key and secret as well"),
        ({"key": "k", "secret": "s", "anon": "true"}, "anon=true and key conflict"),
        ({"key": "k", "secret": "s", "anon": True}, "anon=true and key conflict"),
        ({"access_key_id": "k", "secret": "s", "profile": "p"},
         "profile and access_key_id conflict"),
        ({"client_kwargs": {"region_name": "r", "verify": False, "config": {}}},
         r"unknown key config, verify in storage option client_kwargs .*"
         r"known: endpoint_url, region_name"),
        ({"client_kwargs": "{region_name: r}"},  # what fstab's option list leaves of JSON
         "client_kwargs: not JSON .*or give region= and endpoint_url="),
        ({"client_kwargs": "[1]"}, "client_kwargs: expected a JSON object, got list"),
        ({"colour": "red"}, "unknown storage option colour .*known: .*key, secret, token"),
        ({"key": 1, "secret": "s"}, "storage option key: expected a string, got int"),
        ({"client_kwargs": {"endpoint_url": 9000}},
         "client_kwargs.endpoint_url: expected a string"),
    ],
)
def test_bad_options_are_one_line_errors(options, match):
    with pytest.raises(ConfigurationError, match=match) as caught:
        normalize_storage_options(options)
    assert "\n" not in str(caught.value)


def test_explicit_credentials_replace_the_aws_chain(monkeypatch, tmp_path):
    """No credentials anywhere else, yet the client is configured: no botocore chain asked."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    config = s3_client_config(
        {"key": "k", "secret": "s", "client_kwargs": {"region_name": "eu-west-1"}}
    )
    provider = config["credential_provider"]
    assert isinstance(provider, StaticCredentials)
    assert provider() == {
        "access_key_id": "k", "secret_access_key": "s", "token": None, "expires_at": None}
    assert config["config"]["region"] == "eu-west-1"


# --- round trips through moto, signatures checked ---------------------------------------------


@dataclass
class Server:
    s3: S3Server
    key: str
    secret: str

    @property
    def url(self) -> str:
        return self.s3.url

    def fsspec_options(self, **extra: Any) -> dict[str, Any]:
        """What a zarr user passes to ``zarr.open_array(..., storage_options=...)``."""
        client_kwargs = {"endpoint_url": self.url, "region_name": "us-east-1"}
        return {"key": self.key, "secret": self.secret, "client_kwargs": client_kwargs,
                **extra}


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with aws_environment(WRONG_ENV), S3Server() as s3:
        key, secret = iam_user(s3, "zarrfuse-options")
        boto3.client("s3", endpoint_url=s3.url, region_name="us-east-1",
                     aws_access_key_id=key, aws_secret_access_key=secret,
                     aws_session_token="").create_bucket(Bucket=BUCKET)
        yield Server(s3, key, secret)


@pytest.fixture
def checked(server: Server) -> Iterator[Server]:
    with signatures_checked():
        yield server


def written(server: Server, path: str) -> np.ndarray:
    data = np.arange(24, dtype="u1").reshape(4, 6)
    array = zarrfuse.create_array(
        f"s3://{BUCKET}/{path}", shape=data.shape, chunks=(2, 3), dtype="u1",
        compressors=None, storage_options=server.fsspec_options(),
    )
    array[:] = data
    return data


def test_create_and_open_array_with_fsspec_options(checked):
    data = written(checked, "api/a")
    array = zarrfuse.open_array(f"s3://{BUCKET}/api/a", storage_options=checked.fsspec_options())
    assert (array[:] == data).all()
    writable = zarrfuse.open_array(
        f"s3://{BUCKET}/api/a", mode="r+",
        storage_options={"access_key_id": checked.key, "secret_access_key": checked.secret,
                         "endpoint_url": checked.url},
    )
    writable[0, 0] = 99
    assert array[0, 0] == 99


def test_the_server_refuses_other_credentials(checked):
    written(checked, "refused/a")
    url = f"s3://{BUCKET}/refused/a"
    with pytest.raises(Exception, match="SignatureDoesNotMatch"):
        zarrfuse.open_array(url, storage_options=checked.fsspec_options(secret="wrong"))
    with pytest.raises(Exception, match="InvalidAccessKeyId"):  # the environment's
        zarrfuse.open_array(url, storage_options={"endpoint_url": checked.url})
    with pytest.raises(Exception, match="InvalidToken"):  # a given key with a stray token
        zarrfuse.open_array(url, storage_options=checked.fsspec_options(token="stray"))


def test_command_line_takes_fsspec_names(checked):
    written(checked, "cli/a")
    flags = ["--storage-option", f"key={checked.key}", "--storage-option",
             f"secret={checked.secret}", "--storage-option", f"endpoint_url={checked.url}",
             "--storage-option", 'client_kwargs={"region_name": "us-east-1"}']
    result = run_with_timeout([*ZARRFUSE, "info", f"s3://{BUCKET}/cli/a", *flags])
    assert "Zarr v3 array, shape [4, 6], uint8" in result.stdout, result.stdout
    result = run_with_timeout(
        [*ZARRFUSE, "info", f"s3://{BUCKET}/cli/a", *flags, "--storage-option", "secret=wrong"],
        check=False,
    )
    assert result.returncode == 1 and "SignatureDoesNotMatch" in result.stderr, result.stderr
    result = run_with_timeout(
        [*ZARRFUSE, "info", f"s3://{BUCKET}/cli/a", *flags, "--storage-option",
         'client_kwargs={"endpoint_url": "http://127.0.0.1:1"}'], check=False,
    )
    assert result.returncode != 0
    assert result.stderr.count("\n") == 1, result.stderr
    assert "endpoint_url=" in result.stderr and "client_kwargs.endpoint_url=" in result.stderr


@requires_fuse
@pytest.mark.fuse
def test_mount_with_fsspec_names_from_flags_and_a_config_file(checked, tmp_path: Path):
    data = written(checked, "mount/a")
    config = tmp_path / "mount.conf"
    client_kwargs = json.dumps({"endpoint_url": checked.url, "region_name": "us-east-1"})
    config.write_text(
        f"source = s3://{BUCKET}/mount/a\nmountpoint = {tmp_path / 'mnt'}\n"
        f"storage_option.client_kwargs = {client_kwargs}\nro\n"
    )
    with mounted(f"s3://{BUCKET}/mount/a", tmp_path / "mnt", "--config", str(config),
                 "--storage-option", f"key={checked.key}",
                 "--storage-option", f"secret={checked.secret}") as mnt:
        # Through subprocesses: the S3 server answering the daemon runs in this process.
        names = run_with_timeout(["find", "c", "-type", "f"], cwd=mnt).stdout.split()
        first = run_with_timeout(["od", "-An", "-tu1", "-v", sorted(names)[0]], cwd=mnt)
    assert [int(v) for v in first.stdout.split()] == data[:2, :3].ravel().tolist()

"""URL -> backend. Adding a scheme is one backend file plus one line in `_FACTORIES`."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from streaming.errors import StorageError
from streaming.storage.backend import Backend

Factory = Callable[[str, str, dict[str, Any]], tuple[Backend, str]]


def _path(path: str) -> tuple[Backend, str]:
    """A plain filesystem path, taken as written (never URL-decoded)."""
    from streaming.storage.local_folder import LocalBackend

    return LocalBackend(), os.path.abspath(path)


def _local(netloc: str, path: str, options: dict[str, Any]) -> tuple[Backend, str]:
    """A `file://` URL: its path is percent-decoded once, as file URLs are (RFC 8089); a
    dataset's file names are percent-encoded when joined onto one (`Stream.remote_url`), so
    a name comes back exactly as written."""
    if netloc not in ("", "localhost"):
        raise StorageError(f"file://{netloc}{path}: file URLs must name a local path (file:///...)")
    return _path(unquote(path))


def _s3(netloc: str, path: str, options: dict[str, Any]) -> tuple[Backend, str]:
    from streaming.storage.s3 import S3Backend

    if not netloc:
        raise StorageError(f"s3://{path.lstrip('/')}: an S3 URL needs a bucket (s3://bucket/key)")
    return S3Backend(netloc, **options), path.lstrip("/")


def _lazy(module: str, name: str = "from_url") -> Factory:
    """A factory that imports `streaming.storage.<module>` only when its scheme is used."""

    def factory(netloc: str, path: str, options: dict[str, Any]) -> tuple[Backend, str]:
        import importlib

        return getattr(importlib.import_module(f"streaming.storage.{module}"), name)(
            netloc, path, options
        )

    return factory


def _https(netloc: str, path: str, options: dict[str, Any]) -> tuple[Backend, str]:
    """Azure account endpoints go to the Azure backend; every other host is plain HTTPS."""
    from streaming.storage.azure import is_azure_host

    module = "azure" if is_azure_host(netloc) else "http"
    return _lazy(module, "from_https_url")(netloc, path, options)


_FACTORIES: dict[str, Factory] = {
    "file": _local,
    "s3": _s3,
    "gs": _lazy("gcs"),
    "az": _lazy("azure", "from_az_url"),
    "azure": _lazy("azure", "from_az_url"),  # the reference implementation's spelling
    "abfs": _lazy("azure", "from_abfs_url"),
    "abfss": _lazy("azure", "from_abfs_url"),
    "http": _lazy("http", "from_http_url"),
    "https": _https,
}


def register_scheme(scheme: str, factory: Factory) -> None:
    """Make `scheme://` URLs resolve through `factory(netloc, path, options)`."""
    _FACTORIES[scheme.lower()] = factory


def split_scheme(url: str | os.PathLike) -> tuple[str, str]:
    """('s3', rest) for URLs, ('', path) for plain paths (a Windows drive letter is no scheme)."""
    text = os.fspath(url)
    scheme, sep, rest = text.partition("://")
    if sep and scheme.isalnum() and len(scheme) > 1:
        return scheme.lower(), rest
    return "", text


def backend_for(url: str | os.PathLike, **options: Any) -> tuple[Backend, str]:
    """The backend serving `url` and the backend-native path inside it.

    `options` go to remote backends (e.g. `read_timeout`, `endpoint_url` for S3)."""
    scheme, rest = split_scheme(url)
    if not scheme:
        return _path(os.fspath(url))
    factory = _FACTORIES.get(scheme)
    if factory is None:
        known = ", ".join(sorted(f"{s}://" for s in _FACTORIES))
        raise StorageError(f"{url}: unsupported URL scheme {scheme!r} (supported: {known}, paths)")
    netloc, slash, path = rest.partition("/")
    return factory(netloc, slash + path, options)


open_url = backend_for  # the name the rest of the ecosystem tends to look for


def join(url: str | os.PathLike, *parts: str) -> str:
    """Join relative parts onto a local path or a URL (parts never reset the root)."""
    scheme, _ = split_scheme(url)
    pieces = [p.strip("/") for p in parts if p and p.strip("/")]
    joiner = posixpath.join if scheme else os.path.join
    return joiner(os.fspath(url), *pieces)

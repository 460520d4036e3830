"""Read-only file access for the readers that may run far from the files: a local directory
(memory-mapped, as everywhere else) or an object store / remote file system reached through
pyarrow's file systems (``s3://``, ``gs://``, ``hdfs://``, ``file://``), read by byte ranges.

A :class:`FileIO` lists directories (on an object store: a prefix listing) and opens files as a
:class:`RangeFile`: ``read(pos, n)`` gives a ``uint8`` numpy array of those bytes (zero-copy out
of the mapping for a local file, one ranged GET for an object), ``whole`` the entire local
mapping (``None`` for a remote file: callers then read bounded chunks, see
:data:`CHUNK_BYTES`).  The decoders only ever see numpy buffers, so what they decode does not
depend on where the bytes came from.

The one home of: what counts as a URL, which ``fs.*`` options configure a file system, how a
refused or failed request becomes a typed error (:class:`~mqstore.errors.StoreNotFoundError`
for a missing bucket or prefix, :class:`~mqstore.errors.ObjectStoreError` for credentials and
everything else the store refuses).  Nothing here writes, except :func:`output_filesystem`,
which hands the export a file system to write Parquet to.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mqstore.errors import InvalidArgumentError, MqStoreError, ObjectStoreError, StoreNotFoundError
from mqstore.storage.mapped import ReadOnlyMap

__all__ = [
    "CHUNK_BYTES",
    "FS_OPTIONS",
    "LOCAL",
    "ArrowFileIO",
    "Entry",
    "FileIO",
    "LocalFileIO",
    "RangeFile",
    "fileio_for",
    "is_remote",
    "is_url",
    "local_path",
    "localize_paths",
    "output_filesystem",
    "split_fs_options",
]

#: bytes read per request from a remote file (a record longer than this is read whole)
CHUNK_BYTES = 8 << 20
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
#: the schemes pyarrow's ``FileSystem.from_uri`` understands
SCHEMES = ("s3", "gs", "gcs", "hdfs", "viewfs", "file")
#: data source options that configure the file system (case-insensitive), and what they set
FS_OPTIONS = {
    "fs.s3.endpoint": "endpoint URL of an S3-compatible store (http://host:port); env AWS_ENDPOINT_URL",
    "fs.s3.region": "bucket region; env AWS_REGION / AWS_DEFAULT_REGION",
    "fs.s3.accesskey": "access key id; env AWS_ACCESS_KEY_ID",
    "fs.s3.secretkey": "secret access key; env AWS_SECRET_ACCESS_KEY",
    "fs.s3.sessiontoken": "session token of temporary credentials; env AWS_SESSION_TOKEN",
    "fs.s3.anonymous": "true: unsigned requests (a public bucket)",
}


def is_url(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a URL (``scheme://...``) rather than a local path."""
    return bool(_URL.match(os.fspath(path)))


def is_remote(path: str | os.PathLike[str]) -> bool:
    """A URL of anything but the local file system (``file://`` is a local path)."""
    m = _URL.match(os.fspath(path))
    return bool(m) and m.group(1).lower() != "file"


def local_path(path: str | os.PathLike[str]) -> str:
    """``file:///a/b`` → ``/a/b``; other paths unchanged."""
    p = os.fspath(path)
    m = _URL.match(p)
    if m and m.group(1).lower() == "file":
        return p[len(m.group(0)):] or "/"
    return p


def split_fs_options(options: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    """``(fs options, the other options)``: ``fs.*`` keys (lower-cased) are the file system's and
    are checked here (an unknown one is refused, naming the known ones)."""
    fs: dict[str, str] = {}
    rest: dict[str, Any] = {}
    for k, v in options.items():
        low = str(k).lower()
        if low.startswith("fs."):
            if low not in FS_OPTIONS:
                raise InvalidArgumentError(f"unknown file system option {k!r} (known: "
                                           + ", ".join(sorted(FS_OPTIONS)) + ")")
            fs[low] = "" if v is None else str(v)
        else:
            rest[k] = v
    return fs, rest


def localize_paths(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with ``file://`` URLs in ``path`` / ``paths`` (a JSON list or a comma list)
    turned into local paths (the data sources' path options)."""
    out: dict[str, Any] = {}
    for k, v in options.items():
        low = str(k).lower()
        if low == "path" and isinstance(v, str):
            v = local_path(v.strip())
        elif low == "paths" and isinstance(v, str) and "file://" in v:
            text = v.strip()
            if text.startswith("["):
                try:
                    items = json.loads(text)
                except ValueError:
                    items = None
                if isinstance(items, list):
                    v = json.dumps([local_path(x) if isinstance(x, str) else x for x in items])
            else:
                v = ",".join(local_path(x.strip()) for x in text.split(","))
        out[k] = v
    return out


@dataclass(frozen=True, slots=True)
class Entry:
    """One directory entry: its full path (a URL for a remote file), name, size and kind."""

    path: str
    name: str
    size: int
    is_dir: bool


class RangeFile:
    """A file opened for ranged reads (a context manager).  ``whole`` is the complete local mapping
    (``None`` for a remote file)."""

    path: str
    size: int
    whole: np.ndarray | None = None

    def read(self, pos: int, n: int) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> RangeFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _LocalFile(RangeFile):
    def __init__(self, path: str, what: str) -> None:
        self.path = path
        self._m = ReadOnlyMap(path, what=what)
        self.whole = self._m.array
        self.size = len(self._m)

    def read(self, pos: int, n: int) -> np.ndarray:
        pos = max(0, min(pos, self.size))
        return self.whole[pos:min(self.size, pos + max(0, n))] if self.whole is not None else np.empty(0, np.uint8)

    def close(self) -> None:
        self.whole = None
        self._m.close()


class _ArrowFile(RangeFile):
    def __init__(self, io: ArrowFileIO, path: str, what: str) -> None:
        self.path = path
        self._io = io
        self._f = io._call(lambda: io.fs.open_input_file(io._key(path)), path, what)
        self.size = int(self._f.size())

    def read(self, pos: int, n: int) -> np.ndarray:
        pos = max(0, min(pos, self.size))
        n = max(0, min(n, self.size - pos))
        if n == 0:
            return np.empty(0, np.uint8)
        buf = self._io._call(lambda: self._f.read_at(n, pos), self.path, "file")
        return np.frombuffer(buf, np.uint8)

    def close(self) -> None:
        self._f.close()


class FileIO:
    """Read-only access to one file system; paths are what the user gave (local paths, URLs)."""

    remote = False

    def list(self, path: str) -> list[Entry]:  # pragma: no cover - abstract
        raise NotImplementedError

    def stat(self, path: str) -> Entry | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def open(self, path: str, *, what: str = "file") -> RangeFile:  # pragma: no cover - abstract
        raise NotImplementedError

    def join(self, base: str, *names: str) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def name(self, path: str) -> str:
        return posixpath.basename(path.rstrip("/"))

    def is_dir(self, path: str) -> bool:
        e = self.stat(path)
        return e is not None and e.is_dir

    def read_all(self, path: str, *, what: str = "file") -> bytes:
        with self.open(path, what=what) as f:
            return f.read(0, f.size).tobytes()


class LocalFileIO(FileIO):
    """The local file system (files are memory-mapped)."""

    def list(self, path: str) -> list[Entry]:
        p = local_path(path)
        try:
            it = list(os.scandir(p))
        except (FileNotFoundError, NotADirectoryError):
            return []
        out = []
        for e in it:
            try:
                is_dir = e.is_dir()
                size = 0 if is_dir else e.stat().st_size
            except FileNotFoundError:
                continue
            out.append(Entry(e.path, e.name, size, is_dir))
        return sorted(out, key=lambda e: e.name)

    def stat(self, path: str) -> Entry | None:
        p = local_path(path)
        try:
            st = os.stat(p)
        except (FileNotFoundError, NotADirectoryError):
            return None
        is_dir = os.path.isdir(p)
        return Entry(p, self.name(p), 0 if is_dir else st.st_size, is_dir)

    def open(self, path: str, *, what: str = "file") -> RangeFile:
        return _LocalFile(local_path(path), what)

    def join(self, base: str, *names: str) -> str:
        return os.path.join(local_path(base), *names)


LOCAL = LocalFileIO()

_MISSING_BUCKET = ("NO_SUCH_BUCKET", "NoSuchBucket", "bucket does not exist")
_DENIED = ("ACCESS_DENIED", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "INVALID_ACCESS_KEY",
           "SIGNATURE_DOES_NOT_MATCH", "Forbidden", "HTTP status 403", "credentials")


class ArrowFileIO(FileIO):
    """A pyarrow file system (S3, GCS, HDFS...) read by byte ranges; ``prefix`` is the URL's
    ``scheme://`` (paths inside ``fs`` carry no scheme)."""

    remote = True

    def __init__(self, fs: Any, prefix: str) -> None:
        self.fs = fs
        self.prefix = prefix

    def __reduce__(self) -> tuple[Any, ...]:
        return (ArrowFileIO, (self.fs, self.prefix))

    def _key(self, path: str) -> str:
        p = path[len(self.prefix):] if path.startswith(self.prefix) else path
        return p.rstrip("/")

    def _url(self, key: str) -> str:
        return self.prefix + key

    def _call(self, fn: Any, path: str, what: str) -> Any:
        """Run a pyarrow call, turning its failures into typed errors naming ``path``."""
        try:
            return fn()
        except MqStoreError:
            raise
        except FileNotFoundError:
            raise StoreNotFoundError(f"{what} does not exist", path=path) from None
        except OSError as exc:
            text = str(exc)
            if any(s in text for s in _MISSING_BUCKET):
                bucket = self._key(path).split("/", 1)[0]
                raise StoreNotFoundError(f"bucket {bucket!r} does not exist", path=path) from None
            m = re.search(r"AWS Error (\S+) during (\S+) operation", text)
            short = f"{m.group(1)} during {m.group(2)}" if m else text.splitlines()[0][:300]
            if any(s in text for s in _DENIED):
                raise ObjectStoreError(f"the object store refused access: check the credentials and the endpoint "
                                       f"({short})", path=path) from None
            raise ObjectStoreError(f"object store request failed ({short})", path=path) from None

    def list(self, path: str) -> list[Entry]:
        from pyarrow import fs as pafs

        key = self._key(path)
        infos = self._call(lambda: self.fs.get_file_info(pafs.FileSelector(key, allow_not_found=True)),
                           path, "directory")
        out = [Entry(self._url(i.path), i.base_name, int(i.size or 0), i.type == pafs.FileType.Directory)
               for i in infos if i.type in (pafs.FileType.File, pafs.FileType.Directory)]
        return sorted(out, key=lambda e: e.name)

    def stat(self, path: str) -> Entry | None:
        from pyarrow import fs as pafs

        info = self._call(lambda: self.fs.get_file_info(self._key(path)), path, "file")
        if info.type == pafs.FileType.NotFound:
            return None
        return Entry(path, info.base_name, int(info.size or 0), info.type == pafs.FileType.Directory)

    def open(self, path: str, *, what: str = "file") -> RangeFile:
        return _ArrowFile(self, path, what)

    def join(self, base: str, *names: str) -> str:
        return "/".join([base.rstrip("/"), *names])

    def check_bucket(self, path: str) -> None:
        """A listing of the URL's bucket root: a missing bucket or refused credentials raise here,
        before any planning (an object store answers "not found" to both a missing prefix and a
        missing bucket only on some requests)."""
        from pyarrow import fs as pafs

        if not self.prefix.lower().startswith(("s3://", "gs://", "gcs://")):
            return  # a file system without buckets (HDFS): a missing path is found by the listing
        bucket = self._key(path).split("/", 1)[0]
        self._call(lambda: self.fs.get_file_info(pafs.FileSelector(bucket)), self._url(bucket), "bucket")


def _s3(opts: Mapping[str, str], *, for_write: bool = False) -> Any:
    from pyarrow import fs as pafs

    kw: dict[str, Any] = {}
    endpoint = opts.get("fs.s3.endpoint") or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        m = _URL.match(endpoint)
        if m:
            kw["scheme"] = m.group(1).lower()
            endpoint = endpoint[len(m.group(0)):]
        kw["endpoint_override"] = endpoint.rstrip("/")
    region = opts.get("fs.s3.region") or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        kw["region"] = region
    elif endpoint:
        kw["region"] = "us-east-1"  # a custom endpoint: no region lookup against AWS
    if opts.get("fs.s3.accesskey") or opts.get("fs.s3.secretkey"):
        if not (opts.get("fs.s3.accesskey") and opts.get("fs.s3.secretkey")):
            raise InvalidArgumentError("options fs.s3.accessKey and fs.s3.secretKey go together")
        kw["access_key"] = opts["fs.s3.accesskey"]
        kw["secret_key"] = opts["fs.s3.secretkey"]
        if opts.get("fs.s3.sessiontoken"):
            kw["session_token"] = opts["fs.s3.sessiontoken"]
    if str(opts.get("fs.s3.anonymous", "")).strip().lower() == "true":
        kw["anonymous"] = True
    if for_write:
        kw["allow_bucket_creation"] = False
    try:
        return pafs.S3FileSystem(**kw)
    except (OSError, ValueError, TypeError) as exc:
        raise ObjectStoreError(f"cannot set up the S3 file system: {exc}") from None


def _filesystem(url: str, opts: Mapping[str, str]) -> tuple[Any, str]:
    """``(pyarrow file system, "scheme://")`` of a URL."""
    m = _URL.match(url)
    assert m is not None
    scheme = m.group(1).lower()
    if scheme not in SCHEMES:
        raise InvalidArgumentError(f"unsupported URL scheme {scheme!r} (supported: s3://, gs://, hdfs://, "
                                   f"file://): {url}")
    if scheme == "s3":
        return _s3(opts), m.group(0)
    import pyarrow as pa
    from pyarrow import fs as pafs

    try:
        fs, _path = pafs.FileSystem.from_uri(url)
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise ObjectStoreError(f"cannot open the file system of {url}: {exc}", path=url) from None
    if scheme in ("hdfs", "viewfs"):
        # HDFS paths inside the file system are absolute paths (the host:port is the file system's)
        rest = url[len(m.group(0)):]
        host = rest.split("/", 1)[0]
        return fs, f"{m.group(0)}{host}"
    return fs, m.group(0)


_CACHE: dict[tuple[str, tuple[tuple[str, str], ...]], FileIO] = {}


def fileio_for(path: str | os.PathLike[str], fs_options: Mapping[str, str] | None = None) -> FileIO:
    """The :class:`FileIO` of ``path``: :data:`LOCAL` for a local path or ``file://`` URL, else an
    :class:`ArrowFileIO` configured by ``fs_options`` (see :data:`FS_OPTIONS`) and the
    environment (cached per scheme/host and options)."""
    p = os.fspath(path)
    if not is_remote(p):
        return LOCAL
    fs_options, _rest = split_fs_options({k: v for k, v in (fs_options or {}).items() if str(k).lower().startswith("fs.")})
    m = _URL.match(p)
    assert m is not None
    scheme = m.group(1).lower()
    host = p[len(m.group(0)):].split("/", 1)[0] if scheme in ("hdfs", "viewfs") else ""
    key = (f"{scheme}://{host}", tuple(sorted((fs_options or {}).items())))
    io = _CACHE.get(key)
    if io is None:
        fs, prefix = _filesystem(p, fs_options or {})
        io = _CACHE[key] = ArrowFileIO(fs, prefix)
    return io


def output_filesystem(url: str, fs_options: Mapping[str, str] | None = None) -> tuple[Any, str]:
    """``(pyarrow file system, path inside it)`` to write an export to (a remote URL)."""
    io = fileio_for(url, fs_options)
    if not isinstance(io, ArrowFileIO):
        raise InvalidArgumentError(f"{url} is a local path, not an object store URL")
    io.check_bucket(url)
    return io.fs, io._key(url)

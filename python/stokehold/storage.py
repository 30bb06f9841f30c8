"""Object-store options. Every reader and writer takes ``s3://``, ``gs://``, ``az://`` and
``http(s)://`` URLs wherever it takes a path (see ``docs/STORAGE.md``); credentials and
endpoints come from the usual environment variables, or from :func:`set_storage_options`."""

from typing import Dict, Mapping

from . import _native
from ._args import fail

__all__ = ["set_storage_options", "storage_stats"]


def set_storage_options(options: Mapping[str, str], store: str = "") -> None:
    """Options for the object stores opened from now on, overriding the environment: for every
    store, or with ``store="s3://bucket"`` for that bucket only. Keys are the Rust
    ``object_store`` crate's, e.g. ``aws_endpoint``, ``aws_region``, ``aws_access_key_id``,
    ``aws_secret_access_key``, ``aws_allow_http``."""
    op = "set_storage_options"
    if not isinstance(options, Mapping):
        raise fail(op, "options", options, "must be a mapping of str to str")
    pairs = []
    for k, v in options.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise fail(op, "options", options, f"keys and values must be str, got {k!r}: {v!r}")
        pairs.append((k, v))
    if not isinstance(store, str):
        raise fail(op, "store", store, "must be a str such as 's3://bucket'")
    _native.set_storage_options(pairs, store)


def storage_stats() -> Dict[str, int]:
    """This process's object-store reads so far (counters since the process started; a forked
    child goes on from its parent's): ``requests`` (GETs, hedges and resumed downloads included),
    ``hedges`` (second requests sent for reads slower than the hedge delay, docs/STORAGE.md),
    ``hedge_wins`` (hedges that answered first) and ``bytes`` (body bytes received)."""
    return dict(_native.storage_stats())

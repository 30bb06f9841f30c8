"""Object-store options. Every reader and writer takes ``s3://``, ``gs://``, ``az://`` and
``http(s)://`` URLs wherever it takes a path (see ``docs/STORAGE.md``); credentials and
endpoints come from the usual environment variables, or from :func:`set_storage_options`."""

from typing import Dict, List, Mapping, Optional, Tuple

from . import _native
from ._args import fail

__all__ = ["set_storage_options", "storage_stats"]


def set_storage_options(options: Optional[Mapping[str, str]] = None, store: str = "", *,
                        retry_timeout: Optional[float] = None,
                        max_retries: Optional[int] = None) -> None:
    """Options for the object stores opened from now on, overriding the environment: for every
    store, or with ``store="s3://bucket"`` for that bucket only. Keys are the Rust
    ``object_store`` crate's, e.g. ``aws_endpoint``, ``aws_region``, ``aws_access_key_id``,
    ``aws_secret_access_key``, ``aws_allow_http``.

    ``retry_timeout`` (seconds, default 120) bounds the time a request is retried on throttling,
    5xx answers and dropped connections; ``max_retries`` (default: as many as that time allows)
    bounds the retries (docs/STORAGE.md, "Retries"). They may be given as option keys too. Every
    value is checked here: a negative or NaN time, a negative count, or an endpoint URL the
    client cannot use is an ``InvalidArgumentError`` naming the option and the value."""
    op = "set_storage_options"
    if options is None:
        options = {}
    if not isinstance(options, Mapping):
        raise fail(op, "options", options, "must be a mapping of str to str")
    pairs: List[Tuple[str, str]] = []
    for k, v in options.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise fail(op, "options", options, f"keys and values must be str, got {k!r}: {v!r}")
        pairs.append((k, v))
    if not isinstance(store, str):
        raise fail(op, "store", store, "must be a str such as 's3://bucket'")
    # The values themselves (a negative or NaN time, a negative count) are checked once, by the
    # native layer, which names the option and the value.
    if retry_timeout is not None:
        if isinstance(retry_timeout, bool) or not isinstance(retry_timeout, (int, float)):
            raise fail(op, "retry_timeout", retry_timeout, "must be a number of seconds")
        pairs.append(("retry_timeout", repr(float(retry_timeout))))
    if max_retries is not None:
        if isinstance(max_retries, bool) or not isinstance(max_retries, int):
            raise fail(op, "max_retries", max_retries, "must be an int")
        pairs.append(("max_retries", str(max_retries)))
    _native.set_storage_options(pairs, store)


def storage_stats() -> Dict[str, int]:
    """This process's object-store reads so far (counters since the process started; a forked
    child goes on from its parent's): ``requests`` (GETs, hedges and resumed downloads included),
    ``hedges`` (second requests sent for reads slower than the hedge delay, docs/STORAGE.md),
    ``hedge_wins`` (hedges that answered first), ``bytes`` (body bytes received) and
    ``keys_left_out`` (listed keys with a ``..``, ``.`` or empty path segment, which no listing
    returns)."""
    return dict(_native.storage_stats())

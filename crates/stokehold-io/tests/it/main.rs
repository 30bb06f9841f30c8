//! Integration tests of stokehold-io (one binary; one module per area).

mod adversarial;
#[cfg(feature = "audio")]
mod audio;
#[cfg(unix)]
mod cached_shards;
mod conformance_io;
#[cfg(feature = "image")]
mod image;
mod jsonl;
mod local_cache;
#[cfg(feature = "parquet")]
mod parquet;
#[cfg(feature = "remote")]
mod remote;
#[cfg(all(feature = "remote", unix))]
mod remote_cache;
#[cfg(feature = "remote")]
mod remote_hedge;
#[cfg(feature = "remote")]
mod remote_retry;
#[cfg(feature = "remote")]
mod remote_server;
#[cfg(feature = "remote")]
mod remote_stream;
mod shard_bad;
mod shard_compat;
mod shard_crash;
mod shard_format;
mod shard_resume;
mod table;
mod table_big;
mod table_gather;
mod table_shared;
mod tfrecord_corrupt;
mod tfrecord_dataset;
mod tfrecord_interop;
mod tfrecord_props;
#[cfg(feature = "tokenize")]
mod tokenize;
mod tokens;
mod webdataset;

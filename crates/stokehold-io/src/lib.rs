//! # stokehold-io
//!
//! Formats and sources for stokehold pipelines. Each module owns one format and builds on the
//! dataset model of `stokehold-core`.
#![deny(missing_docs)]

pub mod atomic;
#[cfg(feature = "audio")]
pub mod audio;
pub mod files;
#[cfg(feature = "image")]
pub mod image;
pub mod shard;
/// Object storage. Until the storage seam (`storage/mod.rs`) lands, only the local shard cache
/// and read-ahead.
pub mod storage {
    pub mod cached_shards;
    pub mod local_cache;
    pub mod read_ahead;
}
pub mod table;
pub mod tfrecord;
pub mod units;

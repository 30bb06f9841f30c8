//! Native shards: an indexed, checksummed, memory-mapped record format (spec: `docs/FORMAT.md`).
//!
//! A dataset folder holds `manifest.json` (format version, schema, shards with record counts,
//! sizes and checksums) and `shard-NNNNN.stk` files (header, records, offset index, footer).
//! [`write_shards`] writes any dataset atomically; [`ShardDataset`] reads a folder as a
//! random-access dataset, so global shuffle, rank sharding and checkpoints are arithmetic on
//! indices; [`CacheExt::cache_to`] caches a pipeline's first epoch in this format.
//!
//! ```
//! use stokehold_core::{Dataset, MapDataset};
//! use stokehold_io::shard::{write_shards, ShardDataset, WriteOptions};
//! let dir = tempfile::tempdir().unwrap();
//! write_shards(&Dataset::range(10), dir.path(), WriteOptions::default(), None).unwrap();
//! let ds = ShardDataset::open(dir.path()).unwrap();
//! assert_eq!(ds.len(), 10);
//! assert_eq!(ds.get(3).unwrap(), Dataset::range(10).get(3).unwrap());
//! ```

pub mod assemble;
pub mod cache;
pub mod cached_shards;
pub mod codec;
pub mod format;
pub mod reader;
pub mod skip;
pub mod write_dataset;
pub mod writer;

pub use assemble::assemble_shards;
pub use cache::CacheExt;
pub use format::{Compression, Kind, Manifest, ShardEntry, ShardFeature, DEFAULT_SHARD_BYTES};
pub use reader::ShardDataset;
pub use skip::{open_shards_with, ShardReadOptions};
pub use write_dataset::{write_shards, ProgressFn};
pub use writer::{Progress, ShardWriter, WriteOptions};

/// Opens a shard folder as a [`Dataset`](stokehold_core::Dataset).
pub fn open_shards(
    dir: impl AsRef<std::path::Path>,
) -> stokehold_core::Result<stokehold_core::Dataset> {
    Ok(stokehold_core::Dataset::from_map(ShardDataset::open(dir)?))
}

//! TFRecord files and `tf.train.Example`: read, write, index, parse, skip corrupt records.
//!
//! * Framing ([`RecordReader`], [`RecordWriter`]): `u64 length | u32 masked CRC32C(length) |
//!   data | u32 masked CRC32C(data)`, little-endian; NONE, GZIP or ZLIB as TensorFlow writes
//!   them. CRCs are checked by default; corrupt records raise or are skipped ([`OnCorrupt`]).
//! * Datasets: [`TFRecordDataset`] streams files (state: file index + offset);
//!   [`IndexedTFRecord`] reads indexed files at random ([`index`] documents the sidecar format);
//!   [`tfrecord_dataset`] picks random access when every file has an index.
//! * Examples: [`ParseSpec`] / [`ParseFeature`] as in `tf.io`, [`Parser`] for batches (the fast
//!   order) and single elements, [`encode_example`] / [`decode_example`] (and
//!   [`decode_sequence_example`]) through prost.
//! * Writing datasets to shards: [`write_tfrecord_shards`] (`train-00000-of-00032.tfrecord`, atomic,
//!   optional seeded order, index sidecars, progress callback).
//!
//! ```
//! use stokehold_core::{DType, Dataset, Example, Tensor};
//! use stokehold_io::tfrecord::*;
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("a.tfrecord");
//! let mut w = RecordWriter::create(&path, Compression::None).unwrap();
//! for i in 0..10i64 {
//!     let e = Example::new().with("x", Tensor::from_vec(vec![1], vec![i]).unwrap());
//!     w.write(&encode_example(&e).unwrap()).unwrap();
//! }
//! w.finish().unwrap();
//! let spec = ParseSpec::new().with("x", ParseFeature::fixed(vec![], DType::I64)).unwrap();
//! let ds = TFRecordDataset::new([&path], ReadOptions::default()).into_dataset()
//!     .batch(4, false).unwrap()
//!     .map("parse", Parser::new(spec).batch_fn(RECORD));
//! let batches = ds.iter(0).unwrap().collect_all().unwrap();
//! assert_eq!(batches[2].tensor("t", "x").unwrap().to_vec::<i64>().unwrap(), vec![8, 9]);
//! ```

pub mod batched;
pub mod compression;
pub mod crc;
pub mod dataset;
mod element;
pub mod example;
pub mod index;
pub mod indexed;
pub mod inspect;
pub mod reader;
pub mod shards;
pub mod writer;

pub use compression::Compression;
pub use dataset::{tfrecord_dataset, tfrecord_fn, TFRecordDataset};
pub use example::convert::{decode_example, decode_sequence_example, encode_example};
pub use example::parse::{Parser, RECORD};
pub use example::spec::{ParseFeature, ParseSpec};
pub use index::{build_index, index_path, read_index, IndexEntry};
pub use indexed::IndexedTFRecord;
pub use reader::{OnCorrupt, ReadOptions, RecordReader};
pub use shards::{write_tfrecord_shards, ShardOptions, WriteProgress};
pub use writer::RecordWriter;

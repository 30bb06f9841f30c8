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
pub mod jsonl;
pub mod options;
#[cfg(feature = "parquet")]
pub mod parquet;
pub mod shard;
pub mod sniff;
pub mod storage;
pub mod table;
pub mod tfrecord;
#[cfg(feature = "tokenize")]
pub mod tokenize;
pub mod tokens;
pub mod units;
pub mod webdataset;

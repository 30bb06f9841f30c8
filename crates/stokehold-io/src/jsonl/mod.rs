//! JSON Lines (`.jsonl`, `.jsonl.gz`, `.jsonl.zst`): one JSON object per line, read at random.
//!
//! * [`JsonlDataset`] reads named fields of each line into typed features ([`fields`] says how
//!   each JSON value converts) with `len`, `get(i)`, global shuffle, sharding and checkpoints, as
//!   every random-access source.
//! * [`index`]: the line-offset sidecar (`data.jsonl.idx`) a plain file gets the first time it is
//!   read; compressed files are decompressed into memory when opened instead.
//! * A line that is not a JSON object is [`stokehold_core::Error::Corrupt`], a field that is
//!   missing or does not convert [`stokehold_core::Error::Schema`]; both name the file, the line
//!   and its byte offset. With [`OnError::Skip`](stokehold_core::skip::OnError) such lines are
//!   left out and counted in the dataset's error log.
//!
//! ```
//! use stokehold_core::Dataset;
//! use stokehold_io::jsonl::{JsonlDataset, JsonlOptions};
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("a.jsonl");
//! std::fs::write(&path, "{\"x\": 1, \"m\": {\"s\": \"hi\"}}\n{\"x\": 2, \"m\": {\"s\": \"yo\"}}\n").unwrap();
//! let ds = JsonlDataset::open(&[&path], JsonlOptions::default()).unwrap();
//! let e = stokehold_core::MapDataset::get(&ds, 1).unwrap();
//! assert_eq!(e.tensor("t", "x").unwrap().to_vec::<i64>().unwrap(), vec![2]);
//! assert_eq!(e.tensor("t", "m.s").unwrap().string(0), Some(&b"yo"[..]));
//! assert!(path.with_extension("jsonl.idx").exists());
//! let _ = Dataset::from_map(ds);
//! ```

pub mod dataset;
pub mod fields;
pub mod index;

pub use dataset::{JsonlDataset, JsonlOptions};
pub use fields::{FieldRequest, JsonField};

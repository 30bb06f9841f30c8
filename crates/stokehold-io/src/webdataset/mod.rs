//! WebDataset tar shards: members grouped into samples by key as the `webdataset` package does
//! ([`scan`] states the rules), read at random ([`WebDataset`]), and written
//! ([`write_webdataset`], as webdataset's `ShardWriter`).
//!
//! Members are bytes features named by extension, with `__key__` and `__url__`, as webdataset
//! yields them without a decoder; [`WebDatasetOptions::decode`] decodes them by extension
//! through the native decoders instead ([`decode`]: images, audio, `.npy`, class labels). Each
//! shard gets an index sidecar the first time it is opened ([`index`]), so later opens read one
//! small file per shard instead of every tar header. A member that runs past the end of its
//! shard, a header that does not parse, an extension twice in one sample, or a member that does
//! not decode is [`stokehold_core::Error::Corrupt`] naming the shard and the member's offset.
//!
//! ```
//! use stokehold_io::webdataset::WebDataset;
//! use stokehold_core::MapDataset;
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("shard-0.tar");
//! let mut b = tar::Builder::new(std::fs::File::create(&path).unwrap());
//! for (name, data) in [("a.txt", &b"hi"[..]), ("a.cls", b"3"), ("b.txt", b"yo")] {
//!     let mut h = tar::Header::new_gnu();
//!     h.set_size(data.len() as u64);
//!     h.set_cksum();
//!     b.append_data(&mut h, name, data).unwrap();
//! }
//! b.into_inner().unwrap();
//! let ds = WebDataset::open(&[&path]).unwrap();
//! assert_eq!(ds.len(), 2);
//! let a = ds.get(0).unwrap();
//! assert_eq!(a.tensor("t", "cls").unwrap().string(0), Some(&b"3"[..]));
//! assert_eq!(a.tensor("t", "__key__").unwrap().string(0), Some(&b"a"[..]));
//! // The member list was written beside the shard: the next open reads it, not the headers.
//! assert!(dir.path().join("shard-0.tar.idx").exists());
//! ```

pub mod dataset;
pub mod decode;
pub mod index;
pub mod scan;
pub mod writer;

pub use dataset::{WebDataset, WebDatasetOptions};
pub use decode::{Decoders, Kind};
pub use writer::{write_webdataset, WriteOptions};

//! WebDataset tar shards: members grouped into samples by key as the `webdataset` package does
//! ([`scan`] states the rules), read at random ([`WebDataset`]).
//!
//! Members are bytes features named by extension, with `__key__` and `__url__`, as webdataset
//! yields them without a decoder; decode them with the native decoders as for any bytes feature
//! (`decode_image`, `decode_audio`). A member that runs past the end of its shard, a header that
//! does not parse, or an extension twice in one sample is [`stokehold_core::Error::Corrupt`]
//! naming the shard and the member's header offset.
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
//! ```

pub mod dataset;
pub mod scan;

pub use dataset::WebDataset;

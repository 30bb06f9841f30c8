//! One module per subcommand (see `main.rs` for how to add one).

pub mod audio;
pub mod bench;
pub mod demo;
pub mod image;
pub mod shard;
pub mod table;
pub mod tfrecord;
pub mod upload;

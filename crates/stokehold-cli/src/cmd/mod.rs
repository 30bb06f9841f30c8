//! One module per subcommand (see `main.rs` for how to add one).

pub mod demo;
pub mod table;
pub mod tfrecord;
pub mod shard;

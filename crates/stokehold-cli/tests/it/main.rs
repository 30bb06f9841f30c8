//! Integration tests of the `stokehold` binary.

mod cli;
mod shard;
mod tfrecord;

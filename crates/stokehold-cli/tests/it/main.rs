//! Integration tests of the `stokehold` binary.

mod cli;
mod polish;
mod shard;
mod tfrecord;

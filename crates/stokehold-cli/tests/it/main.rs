//! Integration tests of the `stokehold` binary.

mod cli;
mod image;
mod polish;
mod shard;
mod tfrecord;

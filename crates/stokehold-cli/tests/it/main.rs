//! Integration tests of the `stokehold` binary and the demo library.

mod cli;
mod demo;
mod shard;
mod tfrecord;

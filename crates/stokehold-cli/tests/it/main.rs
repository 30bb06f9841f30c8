//! Integration tests of the `stokehold` binary.

mod cli;
mod first_hour;
mod image;
mod polish;
mod remote;
mod shard;
mod special_files;
mod tfrecord;

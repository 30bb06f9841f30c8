//! Integration tests of stokehold-core: one binary, one module per theme.

mod adversarial;
mod autotune;
mod bucket;
mod budget;
mod buffers;
mod combine;
mod common;
mod conformance;
mod interleave;
mod map_batch;
mod pack;
mod parallel;
mod plan;
mod stats;
mod tfdata_ops;
mod warm;

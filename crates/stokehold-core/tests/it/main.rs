//! Integration tests of stokehold-core: one binary, one module per theme.

mod common;
mod conformance;
mod parallel;

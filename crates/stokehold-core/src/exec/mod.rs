//! Execution: threads, channels and the ops that own them.

pub mod prefetch;

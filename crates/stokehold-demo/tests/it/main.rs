//! Integration tests of the demo library.

mod demo;

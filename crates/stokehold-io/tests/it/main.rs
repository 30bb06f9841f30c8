//! Integration tests of stokehold-io (one binary; one module per area).

mod table;
mod table_big;
mod table_shared;

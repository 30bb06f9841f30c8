//! `tf.train.Example`: the prost messages, conversions to and from core examples, feature specs
//! and the batch / element parsers.

pub mod convert;
pub mod layout;
pub mod parse;
pub mod proto;
pub mod spec;
pub mod wire;

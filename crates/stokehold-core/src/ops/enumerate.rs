//! `enumerate`: adds the element's position within its epoch as an int64 feature.

use std::sync::Arc;

use crate::example::Example;
use crate::ops::map::{Ctx, MapFn};
use crate::tensor::Tensor;

/// The function behind `enumerate(name)` over a random-access dataset of `len` elements: the
/// feature `name` gets `index % len`.
pub fn enumerate_fn(name: &str, len: Option<u64>) -> MapFn {
    let name = name.to_string();
    Arc::new(move |mut e: Example, ctx: &Ctx| {
        let pos = match len {
            Some(n) if n > 0 && n != crate::dataset::INFINITE => ctx.index % n,
            _ => ctx.index,
        };
        let pos = crate::checked::to_i64("enumerate", "the position", pos)?;
        e.insert(&name, Tensor::scalar(pos));
        Ok(e)
    })
}

//! What the TFRecord datasets share, below both: a record as an element, a file list's name.

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use stokehold_core::{Example, Tensor};

use super::example::parse::RECORD;

/// A record as a dataset element: `{"record": bytes scalar}` (zero-copy over `data`).
pub fn record_element(data: Bytes) -> Example {
    let len = data.len() as u64;
    let t = Tensor::strings_from_parts(vec![], data, Arc::from([0, len]))
        .expect("offsets match the data");
    Example::new().with(RECORD, t)
}

/// A short stable description of a file list for op names and fingerprints.
pub fn describe_files(files: &[PathBuf]) -> String {
    let words: Vec<u64> = files
        .iter()
        .flat_map(|f| {
            f.to_string_lossy()
                .bytes()
                .map(u64::from)
                .collect::<Vec<_>>()
        })
        .collect();
    let first = files
        .first()
        .map(|f| f.display().to_string())
        .unwrap_or_default();
    format!(
        "{} files, first {first:?}, hash {:016x}",
        files.len(),
        stokehold_core::rng::key(7, &words)
    )
}

//! JSON Lines from Python (`python/stokehold/jsonl.py` holds the API and its documentation). The
//! GIL is released while the files are opened (indexed or decompressed) and read.

use std::path::PathBuf;

use pyo3::prelude::*;
use stokehold_core::skip::OnError;
use stokehold_core::{Dataset, Error};
use stokehold_io::jsonl::{FieldRequest, JsonlDataset, JsonlOptions};

use crate::dataset::PyDataset;
use crate::errors::{guard, ok};
use crate::options::Wrap;

/// One field from Python: (name, kind or None to infer, default as JSON text or None).
/// Python passes defaults separately (`defaults`), as (name, JSON text).
type FieldItem = (String, Option<String>, Option<String>);

fn request((name, kind, default): FieldItem) -> stokehold_core::Result<FieldRequest> {
    let default = match default {
        None => None,
        Some(text) => Some(serde_json::from_str(&text).map_err(|e| {
            Error::invalid(format!(
                "read_jsonl: default of field {name:?} is not JSON: {e}"
            ))
        })?),
    };
    Ok(FieldRequest {
        name,
        kind,
        default,
    })
}

#[pymethods]
impl PyDataset {
    /// The lines of `files` as elements: `fields` (None: every field of the first line) read
    /// into typed features; random access through each plain file's line index.
    #[staticmethod]
    fn read_jsonl(
        py: Python<'_>,
        files: Vec<PathBuf>,
        fields: Option<Vec<FieldItem>>,
        on_error: Wrap<OnError>,
        defaults: Vec<(String, String)>,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let on_error = ok(py, on_error.get("read_jsonl"))?;
            let fields = match fields {
                None => None,
                Some(items) => Some(ok(
                    py,
                    items
                        .into_iter()
                        .map(request)
                        .collect::<Result<Vec<_>, _>>(),
                )?),
            };
            let defaults = defaults
                .into_iter()
                .map(|(name, text)| {
                    let r = request((name, None, Some(text)))?;
                    Ok((r.name, r.default.expect("given")))
                })
                .collect::<stokehold_core::Result<Vec<_>>>();
            let defaults = ok(py, defaults)?;
            let opts = JsonlOptions {
                fields,
                on_error,
                defaults,
            };
            let ds = ok(py, py.detach(|| JsonlDataset::open(&files, opts)))?;
            Ok(PyDataset::from_dataset(Dataset::from_map(ds)))
        })
    }
}

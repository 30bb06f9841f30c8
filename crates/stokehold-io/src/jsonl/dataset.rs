//! [`JsonlDataset`]: JSON Lines files read at random through their line index.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value};
use stokehold_core::skip::{ErrorLog, OnError, SkippedElement};
use stokehold_core::{Error, Example, MapDataset, Result};

use super::fields::{infer, infer_all, FieldRequest, JsonField};
use super::index::{read_or_build, scan_lines};
use crate::tfrecord::index::IndexEntry;
use crate::tfrecord::Compression;

/// How to read JSONL files.
#[derive(Clone, Debug, Default)]
pub struct JsonlOptions {
    /// The fields to read; `None`: every field of the first line (nested objects flattened).
    pub fields: Option<Vec<FieldRequest>>,
    /// A line that is not a JSON object, or whose fields do not convert: raise (the default), or
    /// skip it and count it in the dataset's [`ErrorLog`]. Skip reads every line once when the
    /// files are opened, so that the dataset's indices stay the same on every read.
    pub on_error: OnError,
    /// Defaults by field name (JSON values): what a line without the field, or with `null`,
    /// holds. With `fields = None`, a default for a field the first line lacks adds that field,
    /// typed by its default.
    pub defaults: Vec<(String, Value)>,
}

/// The bytes of one file: the local memory map or remote object of a plain file, or the whole
/// decompressed stream of a `.gz` / `.zst` one.
enum Data {
    Object(crate::storage::Object),
    Memory(Bytes),
}

impl Data {
    fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        match self {
            Data::Object(o) => o.read_range(offset..offset + len),
            Data::Memory(b) => Ok(b.slice(offset as usize..(offset + len) as usize)),
        }
    }
}

/// JSON Lines files (plain, `.gz`, `.zst`) with random access: `len`, `get(i)`, global shuffle.
///
/// A plain file is memory-mapped (a URL read through the storage seam) and read through its line
/// index ([`super::index`]), built once and written beside it. A compressed file is decompressed
/// into memory when opened (its lines cannot be found without decompressing): it costs its
/// decompressed size in memory.
pub struct JsonlDataset {
    files: Vec<PathBuf>,
    data: Vec<Data>,
    entries: Vec<Vec<IndexEntry>>,
    /// `cum[k]` = lines in files before `k`; one more entry than files.
    cum: Vec<u64>,
    fields: Vec<JsonField>,
    log: Arc<ErrorLog>,
}

/// Where a line is, for errors: `data.jsonl, line 3, byte 42`.
fn place(path: &Path, data: &Data, offset: u64) -> String {
    let before = data
        .read(0, offset)
        .map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count() as u64);
    format!("{}, line {}, byte {offset}", path.display(), before + 1)
}

fn open_data(f: &Path) -> Result<Data> {
    let name = f.to_string_lossy();
    let mut out = Vec::new();
    if name.ends_with(".gz") {
        Compression::Gzip
            .open(f)?
            .read_to_end(&mut out)
            .map_err(|e| Error::corrupt(f, out.len() as u64, format!("gzip: {e}")))?;
    } else if name.ends_with(".zst") || name.ends_with(".zstd") {
        let raw = crate::storage::reader(f, 0)?;
        let mut d = zstd::stream::read::Decoder::new(raw).map_err(|e| Error::io(f, e))?;
        d.read_to_end(&mut out)
            .map_err(|e| Error::corrupt(f, out.len() as u64, format!("zstd: {e}")))?;
    } else {
        return Ok(Data::Object(crate::storage::open_object(f)?));
    }
    Ok(Data::Memory(Bytes::from(out)))
}

fn line_index(f: &Path, data: &Data) -> Result<Vec<IndexEntry>> {
    match data {
        Data::Memory(b) => Ok(scan_lines(b)),
        Data::Object(o) => {
            let all = o.read_range(0..o.size())?;
            Ok(read_or_build(f, &all, o.is_remote())?.0)
        }
    }
}

impl JsonlDataset {
    /// Opens `files` (each indexed, or decompressed, once) with `opts`.
    pub fn open<P: AsRef<Path>>(files: &[P], opts: JsonlOptions) -> Result<Self> {
        let mut ds = JsonlDataset {
            files: Vec::new(),
            data: Vec::new(),
            entries: Vec::new(),
            cum: vec![0],
            fields: Vec::new(),
            log: Arc::new(ErrorLog::default()),
        };
        for f in files {
            let f = f.as_ref();
            let data = open_data(f)?;
            let entries = line_index(f, &data)?;
            ds.files.push(f.to_path_buf());
            ds.data.push(data);
            ds.entries.push(entries);
        }
        ds.fields = ds.resolve_fields(opts.fields.as_deref())?;
        apply_defaults(&mut ds.fields, &opts.defaults, opts.fields.is_none())?;
        if opts.on_error == OnError::Skip {
            ds.leave_out_bad_lines()?;
        }
        for e in &ds.entries {
            ds.cum.push(ds.cum.last().unwrap() + e.len() as u64);
        }
        Ok(ds)
    }

    /// The skipped lines (`on_error = skip`): the log `error_log()` reports.
    pub fn log(&self) -> &Arc<ErrorLog> {
        &self.log
    }

    /// The fields read from each line, typed.
    pub fn fields(&self) -> &[JsonField] {
        &self.fields
    }

    /// The first line of the first file that has one, as an object (to infer types from).
    fn first_object(&self) -> Result<Option<(usize, Map<String, Value>)>> {
        let Some(k) = self.entries.iter().position(|e| !e.is_empty()) else {
            return Ok(None);
        };
        self.object(k, self.entries[k][0]).map(|o| Some((k, o)))
    }

    fn resolve_fields(&self, asked: Option<&[FieldRequest]>) -> Result<Vec<JsonField>> {
        let needs_first = asked.is_none_or(|a| a.iter().any(|r| r.kind.is_none()));
        let first = if needs_first {
            self.first_object()?
        } else {
            None
        };
        let at = |k: usize| {
            format!(
                "read_jsonl({})",
                place(&self.files[k], &self.data[k], self.entries[k][0].offset)
            )
        };
        let Some(asked) = asked else {
            return match &first {
                None => Ok(Vec::new()),
                Some((k, o)) => infer_all(o).map_err(|e| Error::schema(at(*k), e)),
            };
        };
        let mut out: Vec<JsonField> = Vec::with_capacity(asked.len());
        for r in asked {
            if out.iter().any(|f| f.name == r.name) {
                return Err(Error::invalid(format!(
                    "read_jsonl: field {:?} is named twice",
                    r.name
                )));
            }
            let f = match (&r.kind, &first) {
                (Some(kind), _) => JsonField::parse(&r.name, kind, r.default.clone())?,
                (None, None) => {
                    return Err(Error::invalid(format!(
                        "read_jsonl: field {:?} has no type and the files have no line to infer \
                         it from; declare it: fields={{{:?}: \"int64\"}}",
                        r.name, r.name
                    )))
                }
                (None, Some((k, o))) => {
                    let v = super::fields::lookup(o, &r.name).unwrap_or(&Value::Null);
                    let mut f = infer(&r.name, v).map_err(|e| Error::schema(at(*k), e))?;
                    if let Some(d) = &r.default {
                        f = JsonField::parse(&r.name, &f.kind(), Some(d.clone()))?;
                    }
                    f
                }
            };
            out.push(f);
        }
        Ok(out)
    }

    /// Line `e` of file `k` parsed, as an object.
    fn object(&self, k: usize, e: IndexEntry) -> Result<Map<String, Value>> {
        let (path, data) = (&self.files[k], &self.data[k]);
        let line = data.read(e.offset, e.len)?;
        match serde_json::from_slice::<Value>(&line) {
            Ok(Value::Object(o)) => Ok(o),
            Ok(other) => Err(Error::corrupt(
                path,
                e.offset,
                format!(
                    "{}: a JSON {} where each line must hold an object",
                    place(path, data, e.offset),
                    kind_name(&other)
                ),
            )),
            Err(err) => Err(Error::corrupt(
                path,
                e.offset,
                format!("{}: not JSON: {err}", place(path, data, e.offset)),
            )),
        }
    }

    fn element(&self, k: usize, e: IndexEntry) -> Result<Example> {
        let o = self.object(k, e)?;
        let mut ex = Example::new();
        for f in &self.fields {
            let t = f.read(&o).map_err(|why| {
                let at = place(&self.files[k], &self.data[k], e.offset);
                Error::schema(format!("read_jsonl({at})"), why)
            })?;
            ex = ex.with(&f.name, t);
        }
        Ok(ex)
    }

    fn leave_out_bad_lines(&mut self) -> Result<()> {
        for k in 0..self.entries.len() {
            let mut kept = Vec::with_capacity(self.entries[k].len());
            for (ordinal, &e) in self.entries[k].iter().enumerate() {
                match self.element(k, e) {
                    Ok(_) => kept.push(e),
                    Err(err @ (Error::Corrupt { .. } | Error::Schema { .. })) => {
                        let mut s = SkippedElement::new(ordinal as u64, &err);
                        s.at = Some((self.files[k].clone(), e.offset));
                        self.log.push(s);
                    }
                    Err(other) => return Err(other),
                }
            }
            self.entries[k] = kept;
        }
        Ok(())
    }
}

/// Gives the fields their `defaults`; a default for a field not read is an error, unless the
/// fields were inferred (`add`): then it adds the field, typed by the default.
fn apply_defaults(
    fields: &mut Vec<JsonField>,
    defaults: &[(String, Value)],
    add: bool,
) -> Result<()> {
    for (name, d) in defaults {
        let at = fields.iter().position(|f| &f.name == name);
        let kind = match at {
            Some(i) => fields[i].kind(),
            None if add => infer(name, d)
                .map_err(|e| Error::invalid(format!("read_jsonl: default of {e}")))?
                .kind(),
            None => {
                let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
                return Err(Error::invalid(format!(
                    "read_jsonl: a default for {name:?}, which is not among the fields read \
                     ({}); name it in fields too",
                    names.join(", ")
                )));
            }
        };
        let f = JsonField::parse(name, &kind, Some(d.clone()))?;
        match at {
            Some(i) => fields[i] = f,
            None => fields.push(f),
        }
    }
    Ok(())
}

fn kind_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

impl MapDataset for JsonlDataset {
    fn len(&self) -> u64 {
        *self.cum.last().unwrap()
    }

    fn get(&self, index: u64) -> Result<Example> {
        let (_, i) = stokehold_core::checked::wrap_index(index, self.len(), || self.name())?;
        let (k, j) = stokehold_core::checked::locate(&self.cum, i);
        self.element(k, self.entries[k][j as usize])
    }

    fn name(&self) -> String {
        let files = match self.files.as_slice() {
            [one] => one.display().to_string(),
            many => format!("{} files", many.len()),
        };
        let fields: Vec<String> = self
            .fields
            .iter()
            .map(|f| format!("{}:{}", f.name, f.kind()))
            .collect();
        format!("read_jsonl({files}, [{}])", fields.join(","))
    }

    fn error_log(&self) -> Option<Arc<ErrorLog>> {
        Some(self.log.clone())
    }
}

//! What is in a TFRecord file: record count and sizes, features seen (with dtypes and value
//! counts), corrupt records. Backs `stokehold inspect`, `stokehold verify` and `stokehold index`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use stokehold_core::{DType, Result};

use super::example::convert::{decode_proto, feature_summary};
use super::example::layout;
use super::reader::{OnCorrupt, ReadOptions, RecordReader};
use crate::units::{bytes, count};
use std::sync::Arc;
use stokehold_core::skip::{ErrorLog, SkippedElement};

/// The verdict on a file of which no record framed from its first byte on (`records` good
/// records, `first` the first corrupt ones), shared by `stokehold inspect` and `verify`: `None`
/// when the file is a TFRecord file with corrupt records (or none at all, an empty file), else
/// what it is: "not a TFRecord file (...): it looks like a NumPy .npy file", or for a file read
/// as GZIP / ZLIB the decompressor's error with its hint ([`super::compression::
/// not_compressed_hint`]).
pub fn not_a_tfrecord(
    path: &Path,
    compression: super::Compression,
    records: u64,
    first: &[SkippedElement],
) -> Option<String> {
    let c = first.first()?;
    if records > 0 || offset_of(c) != 0 {
        return None;
    }
    if compression != super::Compression::None {
        return Some(format!("not a {compression} TFRecord file: {}", c.reason()));
    }
    let looks = match head_of(path).map(|head| (crate::sniff::is_tfrecord_frame(&head), head)) {
        Ok((true, _)) => return None,
        Ok((false, head)) => {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            crate::sniff::guess(&name, &head).map_or(String::new(), |g| format!(": {g}"))
        }
        Err(_) => String::new(),
    };
    Some(format!(
        "not a TFRecord file (no record frame checks out, from offset 0 on){looks}"
    ))
}

/// The first [`crate::sniff::HEAD_LEN`] bytes of the file or object at `path`.
fn head_of(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut head = Vec::with_capacity(crate::sniff::HEAD_LEN);
    crate::storage::reader(path, 0)?
        .take(crate::sniff::HEAD_LEN as u64)
        .read_to_end(&mut head)
        .map_err(|e| stokehold_core::Error::io(path, e))?;
    Ok(head)
}

/// One feature as seen across the records of a file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeatureSeen {
    /// List kinds seen (`int64`, `float32`, `bytes`; `none` for a feature with no list).
    pub dtypes: Vec<String>,
    /// Records holding the feature.
    pub present: u64,
    /// Fewest values in one record.
    pub min_values: usize,
    /// Most values in one record.
    pub max_values: usize,
    /// What stokehold's reader restores from the `<name>:dtype` / `<name>:shape` side features
    /// (`example/layout.rs`), as `dtype[shape]`, each form seen once: `uint8[256]`, `int32[]`.
    pub restored: Vec<String>,
}

impl FeatureSeen {
    /// How `tf.io` would parse it: `FixedLen([n])` when every record has it with `n` values,
    /// `VarLen` otherwise.
    pub fn suggested_spec(&self, records: u64) -> String {
        let d = self.dtypes.join("|");
        if self.present == records && self.min_values == self.max_values {
            let shape = if self.min_values == 1 {
                "[]".into()
            } else {
                format!("[{}]", self.min_values)
            };
            format!("FixedLen({shape}, {d})")
        } else {
            format!("VarLen({d})")
        }
    }
}

/// The summary of one file.
#[derive(Clone, Debug, Default)]
pub struct FileReport {
    /// Good records.
    pub records: u64,
    /// Bytes of record data (excluding framing).
    pub data_bytes: u64,
    /// Smallest record.
    pub min_record: u64,
    /// Largest record.
    pub max_record: u64,
    /// Records that did not decode as a `tf.train.Example`.
    pub not_examples: u64,
    /// Features seen, by name.
    pub features: BTreeMap<String, FeatureSeen>,
    /// Corrupt records skipped.
    pub corrupt: u64,
    /// The first few corrupt records.
    pub first_corrupt: Vec<SkippedElement>,
}

/// How many corrupt records a report lists in detail (the log keeps more).
pub const SHOW_FIRST: usize = 8;

/// The first [`SHOW_FIRST`] records of `log`.
fn first_few(log: &ErrorLog) -> Vec<SkippedElement> {
    let mut first = log.first();
    first.truncate(SHOW_FIRST);
    first
}

/// The byte offset of a record a reader skipped (every entry of a report's `first_corrupt`).
pub fn offset_of(c: &SkippedElement) -> u64 {
    c.at.as_ref().map_or(0, |(_, o)| *o)
}

/// Reads `path` (skipping and counting corrupt records) and summarises it; `max_records` limits
/// the records decoded as Examples (all are still counted).
pub fn inspect_file(
    path: &Path,
    opts: ReadOptions,
    max_records: Option<u64>,
) -> Result<FileReport> {
    inspect_file_with(path, opts, max_records, &mut |_| {})
}

/// [`inspect_file`], telling `progress` the file offset reached (every 4 MiB and at the end).
pub fn inspect_file_with(
    path: &Path,
    opts: ReadOptions,
    max_records: Option<u64>,
    progress: &mut dyn FnMut(u64),
) -> Result<FileReport> {
    let log = Arc::new(ErrorLog::default());
    let opts = ReadOptions {
        on_corrupt: OnCorrupt::Skip,
        ..opts
    };
    let mut r = RecordReader::open(path, opts)?.with_log(log.clone());
    let mut rep = FileReport {
        min_record: u64::MAX,
        ..Default::default()
    };
    let mut last = 0;
    while let Some((at, data)) = r.next_ref()? {
        let n = data.len() as u64;
        if at - last >= 4 << 20 {
            last = at;
            progress(last);
        }
        rep.records += 1;
        rep.data_bytes += n;
        rep.min_record = rep.min_record.min(n);
        rep.max_record = rep.max_record.max(n);
        if max_records.is_some_and(|m| rep.records > m) {
            continue;
        }
        let Ok(ex) = decode_proto(data) else {
            rep.not_examples += 1;
            continue;
        };
        let empty = BTreeMap::new();
        let all = ex.features.as_ref().map_or(&empty, |f| &f.feature);
        for (name, f) in all {
            // A side feature is shown as what it restores, on its feature's line.
            if layout::is_side_feature(all, name) {
                continue;
            }
            let (dtype, count) = feature_summary(f);
            let seen = rep
                .features
                .entry(name.clone())
                .or_insert_with(|| FeatureSeen {
                    min_values: usize::MAX,
                    ..Default::default()
                });
            let d = dtype.map_or("none", DType::name).to_string();
            if !seen.dtypes.contains(&d) {
                seen.dtypes.push(d);
            }
            let (rdtype, rshape) = (
                layout::recorded_dtype(all, name),
                layout::recorded_shape(all, name),
            );
            if rdtype.is_some() || rshape.is_some() {
                let d = rdtype.or(dtype).map_or("none", DType::name);
                let shape = rshape.map_or_else(|| format!("[{count}]"), |s| format!("{s:?}"));
                let r = format!("{d}{}", shape.replace(' ', ""));
                if !seen.restored.contains(&r) {
                    seen.restored.push(r);
                }
            }
            seen.present += 1;
            seen.min_values = seen.min_values.min(count);
            seen.max_values = seen.max_values.max(count);
        }
    }
    progress(r.offset());
    if rep.records == 0 {
        rep.min_record = 0;
    }
    rep.corrupt = log.count();
    rep.first_corrupt = first_few(&log);
    Ok(rep)
}

impl fmt::Display for FileReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mean = self.data_bytes.checked_div(self.records).unwrap_or(0);
        writeln!(
            f,
            "  {}, {} of record data; record size min {} / mean {} / max {}",
            count(self.records, "record"),
            bytes(self.data_bytes),
            bytes(self.min_record),
            bytes(mean),
            bytes(self.max_record)
        )?;
        if self.not_examples > 0 {
            writeln!(
                f,
                "  records that are not tf.train.Example: {}",
                self.not_examples
            )?;
        }
        let examined = self.records.saturating_sub(self.not_examples);
        for (name, s) in &self.features {
            let counts = if s.min_values == s.max_values {
                format!("{}", s.min_values)
            } else {
                format!("{}..{}", s.min_values, s.max_values)
            };
            writeln!(
                f,
                "  {name:<24} {:<10} values/record {counts:<10} in {}/{}  -> {}",
                s.dtypes.join("|"),
                s.present,
                examined,
                s.suggested_spec(examined)
            )?;
            if !s.restored.is_empty() {
                writeln!(
                    f,
                    "  {:<24} stokehold reads it back as {} (its side features, docs/FORMAT.md)",
                    "",
                    s.restored.join(" | ")
                )?;
            }
        }
        if self.corrupt > 0 {
            writeln!(f, "  {}", count(self.corrupt, "corrupt record"))?;
            for c in &self.first_corrupt {
                writeln!(f, "    offset {}: {}", offset_of(c), c.reason())?;
            }
        }
        Ok(())
    }
}

/// The result of checking every CRC of a file.
#[derive(Clone, Debug, Default)]
pub struct VerifyReport {
    /// Good records.
    pub records: u64,
    /// Corrupt records (bad CRC, bad length, truncated).
    pub corrupt: u64,
    /// The first few of them.
    pub first_corrupt: Vec<SkippedElement>,
}

/// Checks every record of `path`; `progress` gets the stream offset reached, now and then.
pub fn verify_file(
    path: &Path,
    compression: super::Compression,
    progress: &mut dyn FnMut(u64),
) -> Result<VerifyReport> {
    let log = Arc::new(ErrorLog::default());
    let opts = ReadOptions {
        compression,
        verify: true,
        on_corrupt: OnCorrupt::Skip,
    };
    let mut r = RecordReader::open(path, opts)?.with_log(log.clone());
    let mut last = 0;
    while r.next_ref()?.is_some() {
        // Report every 4 MiB: often enough for a smooth bar, rarely enough to cost nothing.
        if r.offset() - last >= 4 << 20 {
            last = r.offset();
            progress(last);
        }
    }
    progress(r.offset());
    Ok(VerifyReport {
        records: r.records(),
        corrupt: log.count(),
        first_corrupt: first_few(&log),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tfrecord::{encode_example, Compression, RecordWriter};
    use stokehold_core::{Example, Tensor};

    #[test]
    fn inspect_and_verify_a_small_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.tfrecord");
        let mut w = RecordWriter::create(&path, Compression::None).unwrap();
        for i in 0..5i64 {
            let ids: Vec<i64> = (0..i).collect();
            let e = Example::new()
                .with("label", Tensor::from_vec(vec![1], vec![i]).unwrap())
                .with("ids", Tensor::from_vec(vec![ids.len()], ids).unwrap());
            w.write(&encode_example(&e).unwrap()).unwrap();
        }
        w.write(b"not an example \xff").unwrap();
        w.finish().unwrap();
        let rep = inspect_file(&path, ReadOptions::default(), None).unwrap();
        assert_eq!((rep.records, rep.not_examples, rep.corrupt), (6, 1, 0));
        assert_eq!(
            rep.features["label"].suggested_spec(5),
            "FixedLen([], int64)"
        );
        assert_eq!(rep.features["ids"].suggested_spec(5), "VarLen(int64)");
        assert_eq!(
            (
                rep.features["ids"].min_values,
                rep.features["ids"].max_values
            ),
            (0, 4)
        );
        let text = rep.to_string();
        assert!(
            text.contains("6 records, 179 B of record data") && text.contains("label"),
            "{text}"
        );

        let mut bytes = std::fs::read(&path).unwrap();
        bytes[20] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let mut seen = Vec::new();
        let v = verify_file(&path, Compression::None, &mut |o| seen.push(o)).unwrap();
        assert_eq!(
            (v.records, v.corrupt, offset_of(&v.first_corrupt[0])),
            (5, 1, 0)
        );
        assert_eq!(seen.last().copied(), Some(bytes.len() as u64));
    }

    #[test]
    fn side_features_show_as_what_they_restore() {
        // Issue 48: a uint8[3] and an int32 scalar are written with `:dtype` / `:shape` side
        // features; inspect lists the two features, each with what reading restores.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.tfrecord");
        let mut w = RecordWriter::create(&path, Compression::None).unwrap();
        let e = Example::new()
            .with(
                "pixels",
                Tensor::from_vec(vec![3], vec![1u8, 2, 3]).unwrap(),
            )
            .with("id", Tensor::from_vec(vec![], vec![7i32]).unwrap());
        w.write(&encode_example(&e).unwrap()).unwrap();
        w.finish().unwrap();
        let rep = inspect_file(&path, ReadOptions::default(), None).unwrap();
        let names: Vec<_> = rep.features.keys().cloned().collect();
        assert_eq!(names, ["id", "pixels"]);
        assert_eq!(rep.features["pixels"].restored, ["uint8[3]"]);
        assert_eq!(rep.features["id"].restored, ["int32[]"]);
        let text = rep.to_string();
        assert!(text.contains("reads it back as uint8[3]"), "{text}");
    }
}

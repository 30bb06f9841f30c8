//! JSONL files: values, the line index, compressed files, bad lines (raise names file, line and
//! byte; skip counts them and keeps indices stable), fields that are null or missing.

use std::io::Write;
use std::path::{Path, PathBuf};

use stokehold_core::skip::OnError;
use stokehold_core::{Dataset, Error, MapDataset};
use stokehold_io::jsonl::{FieldRequest, JsonlDataset, JsonlOptions};

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn field(name: &str, kind: Option<&str>, default: Option<serde_json::Value>) -> FieldRequest {
    FieldRequest {
        name: name.into(),
        kind: kind.map(String::from),
        default,
    }
}

fn ints(ds: &JsonlDataset, name: &str) -> Vec<i64> {
    (0..ds.len())
        .map(|i| {
            ds.get(i)
                .unwrap()
                .tensor("t", name)
                .unwrap()
                .to_vec::<i64>()
                .unwrap()[0]
        })
        .collect()
}

const GOOD: &str =
    "{\"x\": 1, \"s\": \"a\"}\n\n{\"x\": 2, \"s\": \"b\"}\r\n{\"x\": 3, \"s\": \"c\"}";

#[test]
fn the_index_is_written_once_and_read_back_and_a_stale_one_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "a.jsonl", GOOD);
    let ds = JsonlDataset::open(&[&p], JsonlOptions::default()).unwrap();
    assert_eq!(ints(&ds, "x"), [1, 2, 3]);
    let idx = dir.path().join("a.jsonl.idx");
    let first = std::fs::read(&idx).unwrap();
    // The sidecar is what a second open reads: one listing only the last line gives one element.
    let (entries, size) = stokehold_io::jsonl::index::decode(&idx, &first).unwrap();
    let one = stokehold_io::jsonl::index::encode(&entries[2..], size);
    std::fs::write(&idx, one).unwrap();
    let again = JsonlDataset::open(&[&p], JsonlOptions::default()).unwrap();
    assert_eq!(ints(&again, "x"), [3]);
    std::fs::write(&idx, &first).unwrap();
    // Grow the file: the stale index is rebuilt.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&p)
        .unwrap()
        .write_all(b"\n{\"x\": 4, \"s\": \"d\"}\n")
        .unwrap();
    let grown = JsonlDataset::open(&[&p], JsonlOptions::default()).unwrap();
    assert_eq!(ints(&grown, "x"), [1, 2, 3, 4]);
    assert_ne!(std::fs::read(&idx).unwrap(), first);
}

#[test]
fn a_corrupt_index_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "a.jsonl", GOOD);
    JsonlDataset::open(&[&p], JsonlOptions::default()).unwrap();
    let idx = dir.path().join("a.jsonl.idx");
    let mut b = std::fs::read(&idx).unwrap();
    b[30] ^= 0xff;
    std::fs::write(&idx, b).unwrap();
    let err = JsonlDataset::open(&[&p], JsonlOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("a.jsonl.idx") && err.contains("CRC"), "{err}");
}

#[test]
fn a_line_that_is_not_json_names_file_line_and_byte_or_is_skipped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let text = "{\"x\": 1}\n{\"x\": 2}\n\n{\"x\": oops}\n[1, 2]\n{\"x\": 5}\n";
    let p = write(dir.path(), "bad.jsonl", text);
    let ds = JsonlDataset::open(&[&p], JsonlOptions::default()).unwrap();
    assert_eq!(ds.len(), 5);
    let err = ds.get(2).unwrap_err();
    assert!(matches!(err, Error::Corrupt { offset: 19, .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("bad.jsonl") && msg.contains("line 4") && msg.contains("not JSON"),
        "{msg}"
    );
    let msg = ds.get(3).unwrap_err().to_string();
    assert!(
        msg.contains("line 5") && msg.contains("a JSON array"),
        "{msg}"
    );

    let opts = JsonlOptions {
        on_error: OnError::Skip,
        ..Default::default()
    };
    let ds = JsonlDataset::open(&[&p], opts).unwrap();
    assert_eq!(ints(&ds, "x"), [1, 2, 5]);
    assert_eq!(ds.log().count(), 2);
    let first = ds.log().first();
    assert_eq!(first[0].at, Some((p.clone(), 19)));
    assert!(first[0].error.contains("line 4"), "{}", first[0].error);
    // Through a pipeline: the same three, and the log is the pipeline's.
    let pipe = Dataset::from_map(ds).shuffle(3);
    assert_eq!(pipe.iter(0).unwrap().collect_all().unwrap().len(), 3);
}

#[test]
fn null_or_missing_fields_take_their_default_or_name_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "n.jsonl",
        "{\"x\": 1, \"y\": 2}\n{\"x\": null}\n{}\n",
    );
    let ds = JsonlDataset::open(&[&p], JsonlOptions::default()).unwrap();
    let msg = ds.get(1).unwrap_err().to_string();
    assert!(
        msg.contains("n.jsonl, line 2")
            && msg.contains("\"x\" is null")
            && msg.contains("defaults="),
        "{msg}"
    );
    let msg = ds.get(2).unwrap_err().to_string();
    assert!(
        msg.contains("line 3") && msg.contains("\"x\" is missing"),
        "{msg}"
    );
    let opts = JsonlOptions {
        fields: Some(vec![
            field("x", None, Some(serde_json::json!(-1))),
            field("y", Some("int8"), Some(serde_json::json!(0))),
        ]),
        ..Default::default()
    };
    let ds = JsonlDataset::open(&[&p], opts).unwrap();
    assert_eq!(ints(&ds, "x"), [1, -1, -1]);
    let y: Vec<i8> = (0..3)
        .map(|i| {
            ds.get(i)
                .unwrap()
                .tensor("t", "y")
                .unwrap()
                .to_vec::<i8>()
                .unwrap()[0]
        })
        .collect();
    assert_eq!(y, [2, 0, 0]);
}

#[test]
fn a_value_the_inferred_type_cannot_hold_names_the_declaration_that_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "f.jsonl", "{\"v\": 1}\n{\"v\": 2.5}\n");
    let ds = JsonlDataset::open(&[&p], JsonlOptions::default()).unwrap();
    let msg = ds.get(1).unwrap_err().to_string();
    assert!(
        msg.contains("line 2") && msg.contains("fields={\"v\": \"float64\"}"),
        "{msg}"
    );
    // The hint works.
    let opts = JsonlOptions {
        fields: Some(vec![field("v", Some("float64"), None)]),
        ..Default::default()
    };
    let ds = JsonlDataset::open(&[&p], opts).unwrap();
    let v = ds
        .get(1)
        .unwrap()
        .tensor("t", "v")
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    assert_eq!(v, [2.5]);
}

#[test]
fn compressed_files_read_as_plain_ones_and_a_truncated_one_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("a.jsonl.gz");
    let mut w = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    w.write_all(GOOD.as_bytes()).unwrap();
    let gz_bytes = w.finish().unwrap();
    std::fs::write(&gz, &gz_bytes).unwrap();
    let zst = dir.path().join("a.jsonl.zst");
    std::fs::write(&zst, zstd::encode_all(GOOD.as_bytes(), 3).unwrap()).unwrap();
    let ds = JsonlDataset::open(&[&gz, &zst], JsonlOptions::default()).unwrap();
    assert_eq!(ints(&ds, "x"), [1, 2, 3, 1, 2, 3]);
    assert!(!dir.path().join("a.jsonl.gz.idx").exists());
    std::fs::write(&gz, &gz_bytes[..gz_bytes.len() / 2]).unwrap();
    let msg = JsonlDataset::open(&[&gz], JsonlOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(msg.contains("a.jsonl.gz"), "{msg}");
}

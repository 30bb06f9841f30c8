//! Interop with TensorFlow: fixtures written by `tf.io.TFRecordWriter` (testdata/tfrecord, made by
//! make_fixtures.py) are read and every value compared; files written here are checked by the
//! same script (`--check`) when STOKEHOLD_TFRECORD_OUT names a folder to leave them in.

use std::path::{Path, PathBuf};

use serde_json::Value as Json;
use stokehold_core::{DType, Example, Tensor, Value};
use stokehold_io::tfrecord::*;

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/tfrecord")
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The expected examples: (label, float bits, data, ids, tags).
pub struct Want {
    pub label: i64,
    pub floats: Vec<f32>,
    pub data: Vec<u8>,
    pub ids: Vec<i64>,
    pub tags: Vec<Vec<u8>>,
}

pub fn expected() -> (Vec<Want>, Vec<Vec<u8>>) {
    let j: Json =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join("expected.json")).unwrap())
            .unwrap();
    let ints = |v: &Json| {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_i64().unwrap())
            .collect::<Vec<_>>()
    };
    let strs = |v: &Json| {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| hex(x.as_str().unwrap()))
            .collect::<Vec<_>>()
    };
    let exs = j["examples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| Want {
            label: ints(&e["label"])[0],
            floats: ints(&e["floats_bits"])
                .iter()
                .map(|b| f32::from_bits(*b as u32))
                .collect(),
            data: strs(&e["data"]).remove(0),
            ids: ints(&e["ids"]),
            tags: strs(&e["tags"]),
        })
        .collect();
    (exs, strs(&j["raw"]))
}

pub fn spec() -> ParseSpec {
    ParseSpec::new()
        .with("label", ParseFeature::fixed(vec![], DType::I64))
        .unwrap()
        .with("floats", ParseFeature::fixed(vec![4], DType::F32))
        .unwrap()
        .with("data", ParseFeature::fixed(vec![], DType::Bytes))
        .unwrap()
        .with("ids", ParseFeature::var(DType::I64))
        .unwrap()
        .with("tags", ParseFeature::var(DType::Bytes))
        .unwrap()
}

const FILES: [(&str, Compression); 3] = [
    ("plain.tfrecord", Compression::None),
    ("gzip.tfrecord.gz", Compression::Gzip),
    ("zlib.tfrecord.zz", Compression::Zlib),
];

fn strings(t: &Tensor) -> Vec<Vec<u8>> {
    (0..t.len())
        .map(|i| t.string(i).unwrap().to_vec())
        .collect()
}

fn ragged_row(v: &Value, i: usize) -> Tensor {
    let Value::Ragged(r) = v else {
        panic!("ragged expected")
    };
    r.row(i).unwrap()
}

fn check_batch(b: &Example, want: &[Want], first: usize) {
    let label = b.tensor("t", "label").unwrap().to_vec::<i64>().unwrap();
    let floats = b.tensor("t", "floats").unwrap();
    assert_eq!(floats.shape(), &[label.len(), 4]);
    let floats = floats.to_vec::<f32>().unwrap();
    let data = strings(b.tensor("t", "data").unwrap());
    for (k, w) in want[first..first + label.len()].iter().enumerate() {
        assert_eq!(label[k], w.label);
        let got: Vec<u32> = floats[4 * k..4 * k + 4]
            .iter()
            .map(|f| f.to_bits())
            .collect();
        assert_eq!(
            got,
            w.floats.iter().map(|f| f.to_bits()).collect::<Vec<_>>()
        );
        assert_eq!(data[k], w.data);
        let ids = ragged_row(b.get("ids").unwrap(), k);
        assert_eq!(ids.to_vec::<i64>().unwrap(), w.ids);
        assert_eq!(strings(&ragged_row(b.get("tags").unwrap(), k)), w.tags);
    }
}

#[test]
fn reads_tf_written_files_batch_parse() {
    let (want, _) = expected();
    for (name, comp) in FILES {
        let opts = ReadOptions {
            compression: comp,
            ..Default::default()
        };
        let ds = TFRecordDataset::new([fixtures().join(name)], opts)
            .into_dataset()
            .batch(5, false)
            .unwrap()
            .map("parse", Parser::new(spec()).batch_fn(RECORD));
        let batches = ds.iter(0).unwrap().collect_all().unwrap();
        assert_eq!(batches.len(), want.len().div_ceil(5), "{name}");
        for (i, b) in batches.iter().enumerate() {
            check_batch(b, &want, i * 5);
        }
    }
}

#[test]
fn reads_tf_written_files_element_parse_and_prost() {
    let (want, _) = expected();
    for (name, comp) in FILES {
        let opts = ReadOptions {
            compression: comp,
            ..Default::default()
        };
        let ds = TFRecordDataset::new([fixtures().join(name)], opts).into_dataset();
        let raw = ds.iter(0).unwrap().collect_all().unwrap();
        let parsed = ds.map("parse", Parser::new(spec()).element_fn(RECORD));
        let parsed = parsed.iter(0).unwrap().collect_all().unwrap();
        assert_eq!(parsed.len(), want.len(), "{name}");
        for ((p, r), w) in parsed.iter().zip(&raw).zip(&want) {
            assert_eq!(p.tensor("t", "label").unwrap().shape(), &[] as &[usize]);
            assert_eq!(
                p.tensor("t", "label").unwrap().to_vec::<i64>().unwrap(),
                vec![w.label]
            );
            assert_eq!(
                p.tensor("t", "floats").unwrap().to_vec::<f32>().unwrap(),
                w.floats
            );
            assert_eq!(
                p.tensor("t", "ids").unwrap().to_vec::<i64>().unwrap(),
                w.ids
            );
            assert_eq!(strings(p.tensor("t", "tags").unwrap()), w.tags);
            // prost decoding of the same record agrees.
            let rec = r.tensor("t", RECORD).unwrap().string(0).unwrap();
            let d = decode_example(rec).unwrap();
            assert_eq!(d.names(), vec!["data", "floats", "ids", "label", "tags"]);
            assert_eq!(
                strings(d.tensor("t", "data").unwrap()),
                vec![w.data.clone()]
            );
            assert_eq!(
                d.tensor("t", "ids").unwrap().to_vec::<i64>().unwrap(),
                w.ids
            );
        }
    }
}

#[test]
fn reads_tf_written_raw_records_streamed_and_indexed() {
    let (_, raw) = expected();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("raw.tfrecord");
    std::fs::copy(fixtures().join("raw.tfrecord"), &copy).unwrap();
    let (ds, _) = tfrecord_dataset([&copy], ReadOptions::default()).unwrap();
    assert!(!ds.is_random_access());
    let got: Vec<Vec<u8>> = ds
        .iter(0)
        .unwrap()
        .collect_all()
        .unwrap()
        .iter()
        .map(|e| e.tensor("t", RECORD).unwrap().string(0).unwrap().to_vec())
        .collect();
    assert_eq!(got, raw);
    let s = build_index(&copy, ReadOptions::default()).unwrap();
    assert_eq!((s.records, s.skipped), (raw.len() as u64, 0));
    let (ds, _) = tfrecord_dataset([&copy], ReadOptions::default()).unwrap();
    assert_eq!(ds.len(), Some(raw.len() as u64));
    for i in (0..raw.len()).rev() {
        let e = ds.get(i as u64).unwrap();
        assert_eq!(
            e.tensor("t", RECORD).unwrap().string(0).unwrap(),
            &raw[i][..]
        );
    }
}

/// Writes the files that `make_fixtures.py --check DIR` reads with TensorFlow, and reads them
/// back here. They go to $STOKEHOLD_TFRECORD_OUT when set (to run the script on them), else to a
/// temporary folder.
#[test]
fn write_for_tf_check() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = std::env::var_os("STOKEHOLD_TFRECORD_OUT").map(PathBuf::from);
    let dir = dir.as_deref().unwrap_or(tmp.path());
    std::fs::create_dir_all(dir).unwrap();
    let (want, raw) = expected();
    for (name, comp) in FILES {
        let mut w = RecordWriter::create(dir.join(name), comp).unwrap();
        for x in &want {
            let e = Example::new()
                .with("label", Tensor::from_vec(vec![1], vec![x.label]).unwrap())
                .with(
                    "floats",
                    Tensor::from_vec(vec![4], x.floats.clone()).unwrap(),
                )
                .with("data", Tensor::strings(&[&x.data]))
                .with(
                    "ids",
                    Tensor::from_vec(vec![x.ids.len()], x.ids.clone()).unwrap(),
                )
                .with("tags", Tensor::strings(&x.tags));
            w.write(&encode_example(&e).unwrap()).unwrap();
        }
        w.finish().unwrap();
        let opts = ReadOptions {
            compression: comp,
            ..Default::default()
        };
        let ds = TFRecordDataset::new([dir.join(name)], opts)
            .into_dataset()
            .batch(want.len(), false)
            .unwrap()
            .map("parse", Parser::new(spec()).batch_fn(RECORD));
        check_batch(&ds.iter(0).unwrap().next().unwrap().unwrap(), &want, 0);
    }
    let mut w = RecordWriter::create(dir.join("raw.tfrecord"), Compression::None).unwrap();
    for r in &raw {
        w.write(r).unwrap();
    }
    w.finish().unwrap();
    // Byte-identical to TensorFlow's own framing of the same records.
    assert_eq!(
        std::fs::read(dir.join("raw.tfrecord")).unwrap(),
        std::fs::read(fixtures().join("raw.tfrecord")).unwrap()
    );
}

//! Format compatibility: the fixtures of `testdata/shard/` (shard format version 1, written by
//! `cargo run -p stokehold-io --example make_shard_fixtures`, one folder per per-record
//! compression) must read exactly, by index, in iteration and in batches; and a folder of a
//! newer version is refused with an error that names the file and both versions.

use std::path::{Path, PathBuf};

use stokehold_core::{Dataset, DatasetIter, Example, MapDataset, Value};
use stokehold_io::shard::ShardDataset;

const N: u64 = 7;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/shard")
}

fn values_f32(v: &Value) -> Vec<f32> {
    let Value::Tensor(t) = v else {
        panic!("expected a tensor")
    };
    t.data()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Record `i` as the generator wrote it.
fn check_record(e: &Example, i: u64) {
    let x = e.tensor("t", "x").unwrap();
    assert_eq!(
        (x.shape(), &x.data()[..]),
        (&[][..], &(i as i64).to_le_bytes()[..])
    );
    let img = e.tensor("t", "img").unwrap();
    assert_eq!(
        (img.shape(), &img.data()[..]),
        (&[2usize, 3][..], &[i as u8; 6][..])
    );
    let want: Vec<f32> = (0..i % 4).map(|k| i as f32 + k as f32 / 2.0).collect();
    assert_eq!(values_f32(e.get("v").unwrap()), want, "record {i}");
    let s = e.tensor("t", "s").unwrap();
    assert_eq!(
        s.string(0).unwrap(),
        vec![b'r'; i as usize].as_slice(),
        "record {i}"
    );
}

#[test]
fn version_1_fixtures_read_exactly() {
    for name in ["v1-none", "v1-lz4", "v1-zstd"] {
        let ds =
            ShardDataset::open(fixtures().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(ds.len(), N, "{name}");
        assert!(
            ds.shard_starts().len() > 2,
            "{name}: the fixture spans several shards"
        );
        for i in 0..N {
            check_record(&ds.get(i).unwrap(), i);
        }
        let d = Dataset::from_map(ds);
        let mut it = d.iter(0).unwrap();
        let mut i = 0;
        while let Some(e) = it.next().unwrap() {
            check_record(&e, i);
            i += 1;
        }
        assert_eq!(i, N, "{name}");
        let batch = d.get_batch(&[6, 0, 3]).unwrap();
        let x = batch.tensor("t", "x").unwrap();
        let got: Vec<i64> = x
            .data()
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, [6, 0, 3], "{name}");
    }
}

fn copy_fixture(name: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(fixtures().join(name)).unwrap() {
        let p = entry.unwrap().path();
        std::fs::copy(&p, tmp.path().join(p.file_name().unwrap())).unwrap();
    }
    tmp
}

#[test]
fn a_newer_manifest_version_is_refused_clearly() {
    let tmp = copy_fixture("v1-none");
    let m = tmp.path().join("manifest.json");
    let text = std::fs::read_to_string(&m)
        .unwrap()
        .replacen("\"version\": 1", "\"version\": 2", 1);
    std::fs::write(&m, text).unwrap();
    let err = ShardDataset::open(tmp.path())
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("manifest.json") && err.contains("version 2") && err.contains("version 1"),
        "{err}"
    );
}

#[test]
fn a_newer_shard_file_version_is_refused_clearly() {
    let tmp = copy_fixture("v1-none");
    let shard = tmp.path().join("shard-00000.stk");
    let mut bytes = std::fs::read(&shard).unwrap();
    bytes[8..12].copy_from_slice(&2u32.to_le_bytes()); // the header's version field
    std::fs::write(&shard, bytes).unwrap();
    let err = ShardDataset::open(tmp.path())
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("shard-00000.stk") && err.contains("version 2") && err.contains("reads 1"),
        "{err}"
    );
}

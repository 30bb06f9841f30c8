//! WebDataset shards: the samples equal what the `webdataset` package yields from tars its own
//! TarWriter wrote (testdata/webdataset, made by make_fixture.py); random access under the
//! conformance suite; a truncated member and a duplicate extension named by file and offset.

use std::path::{Path, PathBuf};

use stokehold_core::{testing, Dataset, Error, MapDataset, ShardPolicy};
use stokehold_io::webdataset::WebDataset;

fn fixture() -> (Vec<PathBuf>, serde_json::Value) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/webdataset");
    let shards = vec![dir.join("shard-0.tar"), dir.join("shard-1.tar")];
    let expected = std::fs::read_to_string(dir.join("expected.json")).unwrap();
    (shards, serde_json::from_str(&expected).unwrap())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn samples_equal_what_webdataset_yields() {
    let (shards, expected) = fixture();
    let ds = WebDataset::open(&shards).unwrap();
    let want = expected["samples"].as_array().unwrap();
    assert_eq!(ds.len(), want.len() as u64);
    for (i, w) in want.iter().enumerate() {
        let got = ds.get(i as u64).unwrap();
        let w = w.as_object().unwrap();
        // webdataset also yields __local_path__ (the local file); stokehold does not.
        let mut names: Vec<&str> = w
            .keys()
            .map(String::as_str)
            .filter(|k| *k != "__local_path__")
            .collect();
        names.sort();
        let mut got_names = got.names();
        got_names.sort();
        assert_eq!(got_names, names, "sample {i}");
        for name in names {
            let b = got.tensor("t", name).unwrap().string(0).unwrap().to_vec();
            let want = w[name].as_str().unwrap();
            match name {
                "__key__" => assert_eq!(String::from_utf8(b).unwrap(), want),
                "__url__" => assert!(String::from_utf8(b).unwrap().ends_with(want)),
                _ => assert_eq!(hex(&b), want, "sample {i} {name}"),
            }
        }
    }
}

#[test]
fn webdataset_shards_conform() {
    let (shards, _) = fixture();
    // Every sample of shard 1 has the same members: batchable, as the suite's batch path needs.
    let ds = Dataset::from_map(WebDataset::open(&shards[1..]).unwrap());
    testing::check("webdataset", &ds, 40);
    testing::check("webdataset.shuffle", &ds.shuffle(3), 40);
    testing::check(
        "webdataset.shard",
        &ds.shard(2, 1, ShardPolicy::Even).unwrap(),
        40,
    );
}

#[test]
fn a_truncated_member_names_the_file_and_its_header_offset() {
    let (shards, _) = fixture();
    let bytes = std::fs::read(&shards[1]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // val/s0005.BIN's 256 bytes start at 7680 (its PAX header at 6144, tarfile says): cut
    // inside them. The error names its header.
    let cut = dir.path().join("cut.tar");
    std::fs::write(&cut, &bytes[..7680 + 100]).unwrap();
    let err = WebDataset::open(&[&cut]).err().unwrap();
    assert!(
        matches!(
            err,
            Error::Corrupt {
                offset: 6144..7680,
                ..
            }
        ),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("cut.tar") && msg.contains("val/s0005.BIN") && msg.contains("truncated"),
        "{msg}"
    );
    // Cut inside a header: named too, never read silently short.
    let cut = dir.path().join("cut2.tar");
    std::fs::write(&cut, &bytes[..6144 + 100]).unwrap();
    let msg = WebDataset::open(&[&cut]).err().unwrap().to_string();
    assert!(msg.contains("cut2.tar") && msg.contains("tar"), "{msg}");
}

#[test]
fn an_extension_twice_in_a_sample_is_an_error_as_in_webdataset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dup.tar");
    let mut b = tar::Builder::new(std::fs::File::create(&path).unwrap());
    for name in ["a.txt", "a.TXT"] {
        let mut h = tar::Header::new_gnu();
        h.set_size(1);
        h.set_cksum();
        b.append_data(&mut h, name, &b"x"[..]).unwrap();
    }
    b.into_inner().unwrap();
    let msg = WebDataset::open(&[&path]).err().unwrap().to_string();
    assert!(
        msg.contains("dup.tar") && msg.contains("offset 1024") && msg.contains("twice"),
        "{msg}"
    );
}

//! Bad input, one test each: every error is clear and names the file (and the record).

use std::fs;
use std::path::Path;

use serde_json::Value as Json;
use stokehold_core::{Dataset, MapDataset, PipelineIter};
use stokehold_io::shard::{write_shards, Compression, ShardDataset};

use super::shard_format::{opts, sample};

fn written(n: u64, shard_bytes: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_shards(
        &sample(n),
        dir.path(),
        opts(shard_bytes, Compression::None),
        None,
    )
    .unwrap();
    dir
}

fn edit_manifest(dir: &Path, f: impl FnOnce(&mut Json)) {
    let p = dir.join("manifest.json");
    let mut m: Json = serde_json::from_slice(&fs::read(&p).unwrap()).unwrap();
    f(&mut m);
    fs::write(&p, serde_json::to_vec(&m).unwrap()).unwrap();
}

fn open_err(dir: &Path) -> String {
    match ShardDataset::open(dir) {
        Ok(_) => panic!("{} opened", dir.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn manifest_pointing_outside_the_folder_is_refused() {
    let outer = tempfile::tempdir().unwrap();
    let dir = outer.path().join("ds");
    write_shards(&sample(10), &dir, opts(1 << 20, Compression::None), None).unwrap();
    // A real shard outside the folder: refused by name, never opened.
    fs::copy(dir.join("shard-00000.stk"), outer.path().join("evil.stk")).unwrap();
    for bad in ["../evil.stk", "/etc/passwd", "sub/../../evil.stk"] {
        edit_manifest(&dir, |m| m["shards"][0]["file"] = bad.into());
        let e = open_err(&dir);
        assert!(e.contains("not a plain name") && e.contains(bad), "{e}");
    }
}

#[test]
fn record_count_disagreement_names_the_file() {
    let dir = written(30, 1 << 20);
    edit_manifest(dir.path(), |m| {
        m["shards"][0]["records"] = 31.into();
        m["num_records"] = 31.into();
    });
    let e = open_err(dir.path());
    assert!(
        e.contains("shard-00000.stk") && e.contains("footer says 30 records"),
        "{e}"
    );
    let dir = written(30, 1 << 20);
    edit_manifest(dir.path(), |m| m["num_records"] = 29.into());
    let e = open_err(dir.path());
    assert!(e.contains("manifest.json") && e.contains("hold 30"), "{e}");
}

#[test]
fn flipped_byte_is_caught_naming_file_and_record() {
    let dir = written(30, 1 << 20);
    let ds = ShardDataset::open(dir.path()).unwrap();
    let (s, local) = ds.locate(17);
    drop(ds);
    let path = dir.path().join(format!("shard-{s:05}.stk"));
    let mut bytes = fs::read(&path).unwrap();
    // Record 17's bytes: find them through a clean reader's raw view.
    let clean = ShardDataset::open(dir.path())
        .unwrap()
        .raw_record(17)
        .unwrap();
    let at = bytes
        .windows(clean.len())
        .position(|w| w == &clean[..])
        .unwrap();
    bytes[at + clean.len() / 2] ^= 0x40;
    fs::write(&path, &bytes).unwrap();
    let ds = ShardDataset::open(dir.path()).unwrap(); // sizes and index still agree
    let e = ds.get(17).unwrap_err().to_string();
    assert!(
        e.contains("shard-00000.stk") && e.contains(&format!("record {local}")),
        "{e}"
    );
    assert!(e.contains("checksum mismatch"), "{e}");
    assert!(ds.get(16).is_ok());
    // Read through a batch (the shard reader's own batch path) the error is the same.
    let e = ds.get_batch(&[3, 17, 4]).unwrap_err().to_string();
    assert!(
        e.contains("shard-00000.stk") && e.contains(&format!("record {local}")),
        "{e}"
    );
    let e = ds.verify().unwrap_err().to_string();
    assert!(
        e.contains("shard-00000.stk") && e.contains("file checksum"),
        "{e}"
    );
}

#[test]
fn truncated_shard_is_caught_naming_the_file() {
    let dir = written(200, 2048);
    let path = dir.path().join("shard-00002.stk");
    let len = fs::metadata(&path).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 100)
        .unwrap();
    let e = open_err(dir.path());
    assert!(
        e.contains("shard-00002.stk") && e.contains("truncated"),
        "{e}"
    );
    // Even with the manifest edited to match, the missing footer is caught.
    edit_manifest(dir.path(), |m| m["shards"][2]["bytes"] = (len - 100).into());
    let e = open_err(dir.path());
    assert!(e.contains("shard-00002.stk") && e.contains("footer"), "{e}");
}

#[test]
fn unknown_format_version_is_refused() {
    let dir = written(5, 1 << 20);
    edit_manifest(dir.path(), |m| m["version"] = 2.into());
    let e = open_err(dir.path());
    assert!(
        e.contains("unknown format version 2") && e.contains("reads version 1"),
        "{e}"
    );
    let dir = written(5, 1 << 20);
    let path = dir.path().join("shard-00000.stk");
    let mut b = fs::read(&path).unwrap();
    b[8] = 9; // header version
    fs::write(&path, b).unwrap();
    let e = open_err(dir.path());
    assert!(
        e.contains("shard-00000.stk") && e.contains("version 9"),
        "{e}"
    );
}

#[test]
fn incomplete_folder_says_so() {
    let dir = written(5, 1 << 20);
    fs::remove_file(dir.path().join("manifest.json")).unwrap();
    let e = open_err(dir.path());
    assert!(e.contains("incomplete dataset"), "{e}");
}

#[test]
fn state_from_another_pipeline_or_version_is_refused() {
    let dir = written(40, 2048);
    let ds = stokehold_io::shard::open_shards(dir.path()).unwrap();
    let a = ds.shuffle(1);
    let mut it = PipelineIter::new(a.clone(), 0).unwrap();
    it.next().unwrap();
    let state = it.state();
    for other in [
        ds.shuffle(2),
        ds.window_shuffle(8, 1).unwrap(),
        Dataset::range(40).shuffle(1),
    ] {
        let mut o = PipelineIter::new(other, 0).unwrap();
        let e = o.set_state(&state).unwrap_err().to_string();
        assert!(e.contains("another pipeline"), "{e}");
    }
    let mut bumped = state.clone();
    bumped["version"] = 99.into();
    let e = PipelineIter::new(a.clone(), 0)
        .unwrap()
        .set_state(&bumped)
        .unwrap_err()
        .to_string();
    assert!(e.contains("version 99"), "{e}");
    // The same folder copied elsewhere is the same pipeline: the state applies.
    let copy = tempfile::tempdir().unwrap();
    for f in fs::read_dir(dir.path()).unwrap() {
        let f = f.unwrap();
        fs::copy(f.path(), copy.path().join(f.file_name())).unwrap();
    }
    let moved = stokehold_io::shard::open_shards(copy.path())
        .unwrap()
        .shuffle(1);
    PipelineIter::new(moved, 0)
        .unwrap()
        .set_state(&state)
        .unwrap();
    assert_eq!(ds.as_map().unwrap().len(), 40);
}

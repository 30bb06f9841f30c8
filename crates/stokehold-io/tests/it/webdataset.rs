//! WebDataset shards: the samples equal what the `webdataset` package yields from tars its own
//! TarWriter wrote (testdata/webdataset, made by make_fixture.py); random access under the
//! conformance suite; a truncated member and a duplicate extension named by file and offset.

use std::path::{Path, PathBuf};

use stokehold_core::{testing, Dataset, Error, MapDataset, ShardPolicy};
use stokehold_io::webdataset::{
    write_webdataset, Decoders, Kind, WebDataset, WebDatasetOptions, WriteOptions,
};

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

/// A tar shard at `path` holding `members` (name, data), as tar writes them (GNU headers).
fn write_tar(path: &Path, members: &[(&str, &[u8])]) {
    let mut b = tar::Builder::new(std::fs::File::create(path).unwrap());
    for (name, data) in members {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_cksum();
        b.append_data(&mut h, name, *data).unwrap();
    }
    b.into_inner().unwrap();
}

fn npy_bytes(t: &stokehold_core::Tensor) -> Vec<u8> {
    let mut b = stokehold_io::table::npy::encode_header(t.dtype(), t.shape(), 0).unwrap();
    b.extend_from_slice(t.data());
    b
}

#[test]
fn the_sidecar_is_written_once_then_read_instead_of_the_headers() {
    let (shards, _) = fixture();
    let dir = tempfile::tempdir().unwrap();
    let shard = dir.path().join("s.tar");
    std::fs::copy(&shards[0], &shard).unwrap();
    let first = WebDataset::open(&[&shard]).unwrap();
    let idx = dir.path().join("s.tar.idx");
    assert!(idx.exists());
    // Blank every header (the size stays): the headers no longer parse, the sidecar still lists
    // where every member is, so an open that reads it gives the same samples.
    let mut bytes = std::fs::read(&shard).unwrap();
    for s in first.samples(0) {
        for m in &s.members {
            let h = (m.offset - 512) as usize;
            bytes[h..h + 512].fill(0xAB);
        }
    }
    std::fs::write(&shard, &bytes).unwrap();
    let again = WebDataset::open(&[&shard]).unwrap();
    assert_eq!(again.samples(0), first.samples(0));
    let opts = WebDatasetOptions {
        index: false,
        ..Default::default()
    };
    assert!(WebDataset::open_with(&[&shard], opts).is_err());
}

#[test]
fn a_stale_sidecar_is_rebuilt_and_a_corrupt_one_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let shard = dir.path().join("s.tar");
    write_tar(&shard, &[("a.txt", b"hi"), ("b.txt", b"yo")]);
    assert_eq!(WebDataset::open(&[&shard]).unwrap().len(), 2);
    let idx = dir.path().join("s.tar.idx");
    let old = std::fs::read(&idx).unwrap();
    write_tar(
        &shard,
        &[("a.txt", b"hi"), ("b.txt", b"yo"), ("c.txt", &[7; 600])],
    );
    assert_eq!(WebDataset::open(&[&shard]).unwrap().len(), 3);
    assert_ne!(std::fs::read(&idx).unwrap(), old);
    let mut bad = std::fs::read(&idx).unwrap();
    bad[26] ^= 0x10;
    std::fs::write(&idx, &bad).unwrap();
    let err = WebDataset::open(&[&shard]).err().unwrap();
    let msg = err.to_string();
    assert!(
        matches!(err, Error::Corrupt { .. }) && msg.contains("s.tar.idx") && msg.contains("CRC"),
        "{msg}"
    );
}

#[cfg(all(feature = "image", feature = "audio"))]
#[test]
fn members_decode_by_extension_through_the_native_decoders() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata");
    let jpg = std::fs::read(data.join("image/baseline.jpg")).unwrap();
    let wav = std::fs::read(data.join("audio/tiny.flac")).unwrap();
    let arr =
        stokehold_core::Tensor::from_vec(vec![2, 3], vec![1.5f32, 2., 3., 4., 5., 6.]).unwrap();
    let npy = npy_bytes(&arr);
    let dir = tempfile::tempdir().unwrap();
    let shard = dir.path().join("s.tar");
    write_tar(
        &shard,
        &[
            ("a.jpg", &jpg),
            ("a.flac", &wav),
            ("a.x.npy", &npy),
            ("a.cls", b" 42\n"),
            ("a.seg.json", b"[1]"),
        ],
    );
    let opts = WebDatasetOptions {
        decode: Decoders::defaults(),
        ..Default::default()
    };
    let e = WebDataset::open_with(&[&shard], opts)
        .unwrap()
        .get(0)
        .unwrap();
    let want_img = stokehold_io::image::decode::decode(&jpg, &Default::default()).unwrap();
    assert_eq!(e.tensor("t", "jpg").unwrap(), &want_img);
    let want_audio =
        stokehold_io::audio::decode::decode_bytes(bytes_of(wav), Path::new("x")).unwrap();
    let got = e.tensor("t", "flac").unwrap();
    assert_eq!(
        got.shape(),
        &[want_audio.channels.len(), want_audio.frames()]
    );
    assert_eq!(got.to_vec::<f32>().unwrap(), want_audio.channels.concat());
    let rate = e.tensor("t", "flac.sample_rate").unwrap();
    assert_eq!(
        rate.to_vec::<i64>().unwrap(),
        vec![want_audio.sample_rate as i64]
    );
    assert_eq!(e.tensor("t", "x.npy").unwrap(), &arr);
    assert_eq!(
        e.tensor("t", "cls").unwrap().to_vec::<i64>().unwrap(),
        vec![42]
    );
    assert_eq!(
        e.tensor("t", "seg.json").unwrap().string(0),
        Some(&b"[1]"[..])
    );
    // Kinds by extension: only those named are decoded.
    let mut d = Decoders::default();
    d.by_ext.insert("cls".into(), Kind::Int);
    let opts = WebDatasetOptions {
        decode: d,
        ..Default::default()
    };
    let e = WebDataset::open_with(&[&shard], opts)
        .unwrap()
        .get(0)
        .unwrap();
    assert_eq!(
        e.tensor("t", "cls").unwrap().to_vec::<i64>().unwrap(),
        vec![42]
    );
    assert_eq!(e.tensor("t", "jpg").unwrap().string(0), Some(&jpg[..]));
}

#[cfg(feature = "audio")]
fn bytes_of(b: Vec<u8>) -> bytes::Bytes {
    b.into()
}

#[test]
fn a_bad_member_names_the_shard_the_member_and_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let shard = dir.path().join("s.tar");
    let mut npy =
        npy_bytes(&stokehold_core::Tensor::from_vec(vec![4], vec![1i64, 2, 3, 4]).unwrap());
    npy.truncate(npy.len() - 8);
    write_tar(&shard, &[("k0.npy", &npy), ("k1.cls", b"seven")]);
    let opts = WebDatasetOptions {
        decode: Decoders::defaults(),
        ..Default::default()
    };
    let ds = WebDataset::open_with(&[&shard], opts).unwrap();
    for (i, member, offset) in [
        (0, "k0.npy", 512),
        (
            1,
            "k1.cls",
            512 * 3 + npy.len().div_ceil(512) as u64 * 512 - 512,
        ),
    ] {
        let err = ds.get(i).err().unwrap();
        let msg = err.to_string();
        assert!(matches!(err, Error::Corrupt { .. }), "{msg}");
        assert!(
            msg.contains("s.tar")
                && msg.contains(member)
                && msg.contains(&format!("offset {offset}")),
            "{msg}"
        );
    }
}

#[test]
fn written_shards_read_back_equal() {
    use stokehold_core::{Example, Tensor};
    let from_examples = |items: &[Example]| {
        let columns = stokehold_core::stack_examples("t", items).unwrap();
        Dataset::from_map(stokehold_core::ops::source::InMemory::new(columns).unwrap())
    };
    let dir = tempfile::tempdir().unwrap();
    let items: Vec<Example> = (0..7i64)
        .map(|i| {
            Example::new()
                .with(
                    "__key__",
                    Tensor::strings(&[format!("d/k{i}").as_bytes()])
                        .reshape(vec![])
                        .unwrap(),
                )
                .with("cls", Tensor::scalar(i))
                .with(
                    "txt",
                    Tensor::strings(&[format!("t{i}").as_bytes()])
                        .reshape(vec![])
                        .unwrap(),
                )
                .with(
                    "npy",
                    Tensor::from_vec(vec![2], vec![i as f32, 0.5]).unwrap(),
                )
        })
        .collect();
    let ds = from_examples(&items);
    let pattern = dir.path().join("out/w-%03d.tar");
    let mut seen = Vec::new();
    let paths = write_webdataset(
        &ds,
        pattern.to_str().unwrap(),
        WriteOptions {
            maxcount: 3,
            ..Default::default()
        },
        &mut |p| seen.push(p.samples),
    )
    .unwrap();
    let names: Vec<_> = paths
        .iter()
        .map(|p| p.file_name().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["w-000.tar", "w-001.tar", "w-002.tar"]);
    assert_eq!(*seen.last().unwrap(), 7);
    // Nothing left under a temporary name.
    assert_eq!(
        std::fs::read_dir(dir.path().join("out")).unwrap().count(),
        3
    );
    let opts = WebDatasetOptions {
        decode: Decoders::defaults(),
        ..Default::default()
    };
    let back = WebDataset::open_with(&paths, opts).unwrap();
    assert_eq!(back.len(), 7);
    for (i, want) in items.iter().enumerate() {
        let got = back.get(i as u64).unwrap();
        for name in ["__key__", "cls", "txt", "npy"] {
            assert_eq!(
                got.tensor("t", name).unwrap(),
                want.tensor("t", name).unwrap(),
                "{i} {name}"
            );
        }
    }
    // A value with no encoding for its extension: named, and no shard is left.
    let bad = from_examples(&[Example::new().with("jpg", Tensor::scalar(1.5f32))]);
    let p2 = dir.path().join("bad-%d.tar");
    let err = write_webdataset(
        &bad,
        p2.to_str().unwrap(),
        WriteOptions::default(),
        &mut |_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("element 0") && err.contains("\"jpg\""),
        "{err}"
    );
    assert!(!dir.path().join("bad-0.tar").exists());
}

/// Shards at `s3://` URLs (moto on loopback): without a sidecar each is fetched whole and scanned
/// (nothing is written to the bucket); with the sidecar uploaded beside it, the member list comes
/// from the sidecar alone (proved by blanking every header of the uploaded shard).
#[cfg(feature = "remote")]
#[test]
fn shards_read_from_s3_equal_the_local_read_with_and_without_sidecars() {
    use super::remote_server::{make_bucket, moto};
    use stokehold_io::storage;
    moto();
    make_bucket("wds");
    let (shards, _) = fixture();
    let dir = tempfile::tempdir().unwrap();
    let local: Vec<PathBuf> = shards
        .iter()
        .map(|s| {
            let p = dir.path().join(s.file_name().unwrap());
            std::fs::copy(s, &p).unwrap();
            p
        })
        .collect();
    let want = WebDataset::open(&local).unwrap(); // writes the sidecars
    let same = |ds: &WebDataset| {
        assert_eq!(ds.len(), want.len());
        for k in 0..local.len() {
            assert_eq!(ds.samples(k), want.samples(k));
        }
        for i in 0..ds.len() {
            let (a, b) = (ds.get(i).unwrap(), want.get(i).unwrap());
            for name in b.names() {
                if name != "__url__" {
                    assert_eq!(a.tensor("t", name).unwrap(), b.tensor("t", name).unwrap());
                }
            }
        }
    };
    let put = |p: &Path, url: &str| storage::upload(p, Path::new(url)).unwrap();
    let plain: Vec<String> = local
        .iter()
        .map(|p| {
            let url = format!(
                "s3://wds/plain/{}",
                p.file_name().unwrap().to_string_lossy()
            );
            put(p, &url);
            url
        })
        .collect();
    same(&WebDataset::open(&plain).unwrap());
    let idx = |url: &str| PathBuf::from(format!("{url}.idx"));
    assert!(storage::head(&idx(&plain[0])).unwrap().is_none());
    let mut indexed = Vec::new();
    for (k, p) in local.iter().enumerate() {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let url = format!("s3://wds/indexed/{name}");
        let mut bytes = std::fs::read(p).unwrap();
        for s in want.samples(k) {
            for m in &s.members {
                let h = (m.offset - 512) as usize;
                bytes[h..h + 512].fill(0xAB);
            }
        }
        let blank = dir.path().join(format!("blank-{name}"));
        std::fs::write(&blank, &bytes).unwrap();
        put(&blank, &url);
        put(
            &dir.path().join(format!("{name}.idx")),
            &format!("{url}.idx"),
        );
        indexed.push(url);
    }
    same(&WebDataset::open(&indexed).unwrap());
    let opts = WebDatasetOptions {
        index: false,
        ..Default::default()
    };
    assert!(WebDataset::open_with(&indexed, opts).is_err());
}

//! `stokehold inspect`, `verify` and `index` on TFRecord files written by TensorFlow
//! (testdata/tfrecord) and on a damaged copy.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn stokehold(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stokehold"))
        .args(args)
        .output()
        .expect("run stokehold")
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/tfrecord")
        .join(name)
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

#[test]
fn inspect_tf_written_files() {
    let files: Vec<String> = ["plain.tfrecord", "gzip.tfrecord.gz", "zlib.tfrecord.zz"]
        .iter()
        .map(|f| fixture(f).display().to_string())
        .collect();
    let mut args = vec!["inspect"];
    args.extend(files.iter().map(String::as_str));
    let out = stokehold(&args);
    assert!(out.status.success(), "{}", text(&out));
    let s = text(&out);
    assert_eq!(s.matches("  24 records, ").count(), 3, "{s}");
    assert!(s.contains("FixedLen([4], float32)"), "{s}");
    assert!(s.contains("VarLen(int64)"), "{s}");
    assert!(
        s.contains("(GZIP)") && s.contains("(ZLIB)") && s.contains("(uncompressed)"),
        "{s}"
    );
    // Figures for people: byte units, no Rust Debug names.
    assert!(
        s.contains(" KiB of record data") && !s.contains("None") && !s.contains("Some("),
        "{s}"
    );
}

#[test]
fn verify_reports_corrupt_records_and_fails() {
    let ok = stokehold(&["verify", &fixture("plain.tfrecord").display().to_string()]);
    assert!(ok.status.success(), "{}", text(&ok));
    assert!(
        text(&ok).contains("24 good records, 0 corrupt"),
        "{}",
        text(&ok)
    );
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.tfrecord");
    let mut bytes = std::fs::read(fixture("plain.tfrecord")).unwrap();
    bytes[100] ^= 0x40;
    std::fs::write(&bad, &bytes).unwrap();
    let out = stokehold(&["verify", &bad.display().to_string()]);
    assert!(!out.status.success());
    let s = text(&out);
    assert!(s.contains("1 corrupt") && s.contains("offset 0"), "{s}");
    // The detail line, read from the one skip log: the offset, then the reason alone.
    assert!(s.contains("\n  offset 0: bad data CRC (record of "), "{s}");
}

#[test]
fn index_writes_sidecars() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("raw.tfrecord");
    std::fs::copy(fixture("raw.tfrecord"), &f).unwrap();
    let out = stokehold(&["index", &f.display().to_string()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("10 records"), "{}", text(&out));
    let ix = stokehold_io::tfrecord::read_index(&f).unwrap();
    assert_eq!(ix.len(), 10);
    let gz = stokehold(&["index", &fixture("gzip.tfrecord.gz").display().to_string()]);
    assert!(
        !gz.status.success() && text(&gz).contains("uncompressed"),
        "{}",
        text(&gz)
    );
}

#[test]
fn inspect_prints_audio_headers() {
    let audio = |n: &str| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/audio")
            .join(n)
            .display()
            .to_string()
    };
    let out = stokehold(&[
        "inspect",
        &audio("s24.flac"),
        &audio("speech.mp3"),
        &audio("stereo.ogg"),
    ]);
    let s = text(&out);
    assert!(out.status.success(), "{s}");
    assert!(
        s.contains("format flac, codec flac, 16000 Hz, 2 channels, 24-bit")
            && s.contains("16000 frames, duration 1.000 s"),
        "{s}"
    );
    assert!(
        s.contains("format mp3, codec mp3, 16000 Hz, 1 channel"),
        "{s}"
    );
    assert!(s.contains("24000 frames, duration 1.500 s"), "{s}");
    assert!(
        s.contains("format ogg, codec vorbis, 16000 Hz, 2 channels"),
        "{s}"
    );
    // Not audio after all: the error names the file.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.wav");
    std::fs::write(&bad, b"RIFF but nothing else").unwrap();
    let out = stokehold(&["inspect", &bad.display().to_string()]);
    assert!(!out.status.success());
    assert!(text(&out).contains("bad.wav"), "{}", text(&out));
}

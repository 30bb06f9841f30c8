//! What the CLI prints, as people read it: exit codes on damage, shard folders in `inspect` and
//! `verify`, a clear word for a file that is not TFRecord, OS errors said once, plurals, and
//! `stokehold bench`. Each test failed on the CLI before these fixes.

use std::path::Path;
use std::process::{Command, Output};

fn stokehold(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stokehold"))
        .args(args)
        .output()
        .expect("run stokehold")
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

/// A shard folder of `n` synthetic records and its TFRecord conversion, in `dir`.
fn data(dir: &Path, n: &str) -> (String, String) {
    let shards = dir.join("shards").display().to_string();
    let tfr = dir.join("tfr").display().to_string();
    let o = stokehold(&["write", &shards, "--synthetic", n, "--no-progress"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = stokehold(&["convert", &shards, "-o", &tfr, "--no-progress"]);
    assert!(o.status.success(), "{}", text(&o));
    let file = std::fs::read_dir(&tfr)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "tfrecord"))
        .unwrap();
    (shards, file.display().to_string())
}

#[test]
fn writing_one_record_says_record_and_shard_in_the_singular() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("one").display().to_string();
    let o = stokehold(&["write", &out, "--synthetic", "1", "--no-progress"]);
    let s = text(&o);
    assert!(
        s.contains("wrote 1 record in 1 shard (") && s.contains("compression none"),
        "{s}"
    );
}

#[test]
fn inspect_exits_non_zero_on_a_corrupt_file() {
    let dir = tempfile::tempdir().unwrap();
    let (_, file) = data(dir.path(), "5");
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[20] ^= 0xff; // inside the first record's data
    std::fs::write(&file, bytes).unwrap();
    let o = stokehold(&["inspect", &file]);
    let s = text(&o);
    assert!(!o.status.success(), "{s}");
    assert!(
        s.contains("1 corrupt record\n") && s.contains("error: 1 corrupt record found"),
        "{s}"
    );
}

#[test]
fn verify_says_when_a_file_is_not_tfrecord() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("notes.txt");
    std::fs::write(&f, "plain text, not a TFRecord file\n".repeat(4)).unwrap();
    let o = stokehold(&["verify", f.to_str().unwrap()]);
    let s = text(&o);
    assert!(!o.status.success(), "{s}");
    assert!(s.contains("notes.txt: not a TFRecord file"), "{s}");
    assert!(!s.contains("CRC"), "not reported as a checksum error: {s}");
}

#[test]
fn inspect_and_verify_read_shard_folders() {
    let dir = tempfile::tempdir().unwrap();
    let (shards, _) = data(dir.path(), "12");
    let o = stokehold(&["inspect", &shards]);
    let s = text(&o);
    assert!(o.status.success(), "{s}");
    assert!(
        s.contains("(shard folder, format version 1)") && s.contains("12 records in 1 shard"),
        "{s}"
    );
    assert!(s.contains("payload") && s.contains("uint8"), "{s}");
    let o = stokehold(&["verify", &shards]);
    let s = text(&o);
    assert!(o.status.success() && s.contains(": ok, 12 records"), "{s}");
    // A flipped byte in the shard file fails verify.
    let shard = std::fs::read_dir(&shards)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "stk"))
        .unwrap();
    let mut bytes = std::fs::read(&shard).unwrap();
    bytes[100] ^= 1;
    std::fs::write(&shard, bytes).unwrap();
    let o = stokehold(&["verify", &shards]);
    assert!(!o.status.success(), "{}", text(&o));
}

#[test]
fn an_os_error_is_said_once() {
    let o = stokehold(&["verify", "/nonexistent/dir/x.tfrecord"]);
    let s = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success());
    assert_eq!(s.matches("No such file or directory").count(), 1, "{s}");
    assert!(s.contains("/nonexistent/dir/x.tfrecord"), "{s}");
}

#[test]
fn bench_prints_rates_and_the_stats_table() {
    let dir = tempfile::tempdir().unwrap();
    let (shards, file) = data(dir.path(), "300");
    for path in [&shards, &file] {
        let o = stokehold(&["bench", path, "--shuffle", "3", "--batch-size", "32"]);
        let s = text(&o);
        assert!(o.status.success(), "{s}");
        assert!(
            s.contains("read 300 records (") && s.contains("records/s") && s.contains("MB/s"),
            "{s}"
        );
        assert!(
            s.contains("parallelize[") && s.contains("prefetch(") && s.contains("verdict:"),
            "{s}"
        );
    }
}

#[test]
fn indexes_in_a_side_folder_keep_globs_to_data_files_and_still_give_random_access() {
    let dir = tempfile::tempdir().unwrap();
    let shards = dir.path().join("shards").display().to_string();
    let tfr = dir.path().join("tfr");
    let o = stokehold(&["write", &shards, "--synthetic", "20", "--no-progress"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = stokehold(&[
        "convert",
        &shards,
        "-o",
        tfr.to_str().unwrap(),
        "--index-side-folder",
        "--no-progress",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let names: Vec<String> = std::fs::read_dir(&tfr)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    assert!(
        !names.is_empty() && names.iter().all(|n| n.ends_with(".tfrecord")),
        "{names:?}"
    );
    let files: Vec<std::path::PathBuf> = names.iter().map(|n| tfr.join(n)).collect();
    let (ds, _) = stokehold_io::tfrecord::tfrecord_dataset(&files, Default::default()).unwrap();
    assert!(ds.is_random_access(), "the side-folder indexes are found");
    assert_eq!(ds.len(), Some(20));
    // `index --side-folder` on a file without one.
    let side = tfr.join(".stokehold-idx");
    std::fs::remove_dir_all(&side).unwrap();
    let f = files[0].to_str().unwrap();
    let o = stokehold(&["index", f, "--side-folder"]);
    assert!(
        o.status.success() && side.join(format!("{}.idx", names[0])).exists(),
        "{}",
        text(&o)
    );
}

/// `verify` on audio and images decodes every frame and pixel (issue 50: a valid WAV was "not a
/// TFRecord file"); a cut file fails it, naming the file.
#[test]
fn verify_decodes_audio_and_images() {
    let testdata = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata");
    let wav = testdata.join("audio/speech.wav");
    let flac = testdata.join("audio/s24.flac");
    let png = testdata.join("image/rgb8.png");
    let o = stokehold(&[
        "verify",
        wav.to_str().unwrap(),
        flac.to_str().unwrap(),
        png.to_str().unwrap(),
        "--no-progress",
    ]);
    let s = text(&o);
    assert!(o.status.success(), "{s}");
    assert!(
        s.contains("speech.wav: ok, ") && s.contains(" frames decoded ("),
        "{s}"
    );
    assert!(s.contains("s24.flac: ok, "), "{s}");
    assert!(
        s.contains("rgb8.png: ok, ") && s.contains("image decoded"),
        "{s}"
    );
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.png");
    std::fs::write(&cut, &std::fs::read(&png).unwrap()[..60]).unwrap();
    let o = stokehold(&["verify", cut.to_str().unwrap(), "--no-progress"]);
    let s = text(&o);
    assert!(!o.status.success() && s.contains("cut.png: "), "{s}");
    assert!(!s.contains("not a TFRecord"), "{s}");
}

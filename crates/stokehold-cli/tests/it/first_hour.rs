//! Issue 48, a new user's first hour on the command line: GZIP / ZLIB TFRecords through every
//! verb that reads or writes them, `--compression` spelled as Python spells it, files that are
//! not TFRecord named for what they look like, an uncompressed file named `.gz` with a hint
//! that works when followed, `--overwrite` named as the flag, and `bench`'s legend.

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

/// Runs `args`, asserts the exit code, returns stdout and stderr together.
fn run(code: i32, args: &[&str]) -> String {
    let o = stokehold(args);
    assert_eq!(o.status.code(), Some(code), "{args:?}: {}", text(&o));
    text(&o)
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// A shard folder of 40 synthetic records in `dir/src`.
fn shards(dir: &Path) -> String {
    let src = s(&dir.join("src"));
    run(
        0,
        &[
            "write",
            &src,
            "--synthetic",
            "40",
            "--record-bytes",
            "32",
            "--no-progress",
        ],
    );
    src
}

#[test]
fn gzip_and_zlib_tfrecords_go_through_every_verb() {
    let dir = tempfile::tempdir().unwrap();
    let src = shards(dir.path());
    for (spelling, ext) in [("gzip", "gz"), ("ZLIB", "zz")] {
        let out = s(&dir.path().join(spelling));
        let said = run(
            0,
            &[
                "convert",
                &src,
                "-o",
                &out,
                "--compression",
                spelling,
                "--no-progress",
            ],
        );
        assert!(said.contains("wrote 40 records"), "{said}");
        let file = s(&dir
            .path()
            .join(spelling)
            .join(format!("data-00000-of-00001.tfrecord.{ext}")));
        // The name says the compression, so each reading verb finds it as Python does.
        let seen = run(0, &["inspect", &file, "--no-progress"]);
        assert!(seen.contains("40 records"), "{seen}");
        assert!(seen.contains(&spelling.to_ascii_uppercase()), "{seen}");
        assert!(run(0, &["verify", &file, "--no-progress"]).contains("ok, 40 records"));
        let bench = run(0, &["bench", &file, "--batch-size", "8"]);
        assert!(bench.contains("read 40 records"), "{bench}");
        let back = s(&dir.path().join(format!("back-{ext}")));
        let said = run(0, &["convert", &file, "-o", &back, "--no-progress"]);
        assert!(said.contains("wrote 40 records"), "{said}");
        let again = s(&dir.path().join(format!("again-{ext}")));
        let said = run(0, &["write", &again, "--tfrecord", &file, "--no-progress"]);
        assert!(said.contains("wrote 40 records"), "{said}");
    }
}

#[test]
fn compression_spellings_are_checked_and_name_the_right_format() {
    let dir = tempfile::tempdir().unwrap();
    let src = shards(dir.path());
    let out = s(&dir.path().join("x"));
    let said = run(1, &["convert", &src, "-o", &out, "--compression", "zstd"]);
    assert!(
        said.contains("TFRecord files take one of 'none', 'gzip', 'zlib'")
            && said.contains("lz4 and zstd compress a shard folder's records"),
        "{said}"
    );
    let said = run(
        1,
        &["write", &out, "--synthetic", "3", "--compression", "gzip"],
    );
    assert!(
        said.contains("a shard folder's records take one of 'none', 'lz4', 'zstd'"),
        "{said}"
    );
    let said = run(2, &["inspect", &src, "--compression", "bz2"]);
    assert!(
        said.contains("must be one of 'none', 'gzip', 'zlib'"),
        "{said}"
    );
}

#[test]
fn inspect_and_verify_name_what_a_file_that_is_not_tfrecord_looks_like() {
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("x.npy");
    let mut bytes = b"\x93NUMPY\x01\x00v\x00{'descr': '<i8', 'fortran_order': False}".to_vec();
    bytes.resize(128, b' ');
    std::fs::write(&npy, &bytes).unwrap();
    let noise = dir.path().join("noise.bin");
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let random: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    std::fs::write(&noise, random).unwrap();
    for verb in ["inspect", "verify"] {
        let said = run(1, &[verb, &s(&npy), &s(&noise), "--no-progress"]);
        assert!(
            said.contains("x.npy: not a TFRecord file") && said.contains("a NumPy .npy array"),
            "{verb}: {said}"
        );
        assert!(
            said.contains("noise.bin: not a TFRecord file"),
            "{verb}: {said}"
        );
        assert!(!said.contains("bad length CRC"), "{verb}: {said}");
    }
}

#[test]
fn an_uncompressed_file_named_gz_gets_a_hint_that_works() {
    let dir = tempfile::tempdir().unwrap();
    let src = shards(dir.path());
    let out = dir.path().join("plain");
    run(0, &["convert", &src, "-o", &s(&out), "--no-progress"]);
    let fake = dir.path().join("fake.tfrecord.gz");
    std::fs::copy(out.join("data-00000-of-00001.tfrecord"), &fake).unwrap();
    let said = run(1, &["inspect", &s(&fake), "--no-progress"]);
    assert!(
        said.contains("invalid gzip header")
            && said.contains(
                "the file is not gzip-compressed: it looks like an uncompressed TFRecord file"
            )
            && said.contains("--compression none"),
        "{said}"
    );
    // The hint, followed.
    let seen = run(
        0,
        &[
            "inspect",
            &s(&fake),
            "--compression",
            "none",
            "--no-progress",
        ],
    );
    assert!(seen.contains("40 records"), "{seen}");
    let said = run(1, &["convert", &s(&fake), "-o", &s(&dir.path().join("y"))]);
    assert!(
        said.contains("invalid gzip header") && said.contains("drop .gz from its name"),
        "{said}"
    );
    // The other hint, followed: convert has no flag for its inputs' compression.
    let renamed = dir.path().join("fake.tfrecord");
    std::fs::rename(&fake, &renamed).unwrap();
    let said = run(
        0,
        &[
            "convert",
            &s(&renamed),
            "-o",
            &s(&dir.path().join("y")),
            "--no-progress",
        ],
    );
    assert!(said.contains("wrote 40 records"), "{said}");
}

#[test]
fn an_existing_dataset_asks_for_the_overwrite_flag() {
    let dir = tempfile::tempdir().unwrap();
    let src = shards(dir.path());
    let said = run(1, &["write", &src, "--synthetic", "5", "--no-progress"]);
    assert!(said.contains("pass --overwrite"), "{said}");
    let said = run(
        0,
        &[
            "write",
            &src,
            "--synthetic",
            "5",
            "--overwrite",
            "--no-progress",
        ],
    );
    assert!(said.contains("wrote 5 records"), "{said}");
}

#[test]
fn bench_explains_its_table() {
    let dir = tempfile::tempdir().unwrap();
    let src = shards(dir.path());
    let said = run(0, &["bench", &src, "--batch-size", "4"]);
    for word in ["fill:", "busy:", "par:", "(max M)", "threads are busy"] {
        assert!(said.contains(word), "{word}: {said}");
    }
    let rate = said
        .split(" records/s")
        .next()
        .and_then(|l| l.rsplit(": ").next())
        .unwrap();
    assert!(
        rate.chars().all(|c| c.is_ascii_digit() || c == ','),
        "{rate}"
    );
}

#[test]
fn inspect_help_names_images_in_its_description_and_its_arguments() {
    let help = run(0, &["inspect", "--help"]);
    let (about, args) = help.split_once("Arguments:").unwrap();
    assert!(about.contains("images"), "{help}");
    assert!(args.contains("images"), "{help}");
}

#[test]
fn the_library_returns_the_binarys_exit_codes() {
    assert_eq!(stokehold_cli::run(["stokehold", "--version"]), 0);
    assert_eq!(stokehold_cli::run(["stokehold", "verify"]), 2);
    assert_eq!(
        stokehold_cli::run(["stokehold", "inspect", "/nonexistent/x.tfrecord"]),
        1
    );
    assert_eq!(stokehold(&["verify"]).status.code(), Some(2));
    assert_eq!(
        stokehold(&["inspect", "/nonexistent/x.tfrecord"])
            .status
            .code(),
        Some(1)
    );
}

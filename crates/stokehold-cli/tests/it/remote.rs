//! The `stokehold` binary on `s3://` URLs against moto's S3 server on loopback (started as the
//! stokehold-io tests start it): `write` and `convert` to S3, then `verify` and `inspect` there,
//! the results equal to the same commands on local folders.

use std::path::Path;
use std::process::Command;

use stokehold_core::MapDataset;
use stokehold_io::shard::ShardDataset;
use stokehold_io::storage;

#[allow(dead_code)] // the CLI tests use moto and buckets, not the fault-injecting proxy
#[path = "../../../stokehold-io/tests/it/remote_server.rs"]
mod remote_server;

use remote_server::{make_bucket, moto};

/// Runs the binary with S3 pointed at moto through the environment, as a user would.
fn stokehold(args: &[&str]) -> std::process::Output {
    let port = moto().port;
    Command::new(env!("CARGO_BIN_EXE_stokehold"))
        .args(args)
        .env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}"))
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        .output()
        .expect("run stokehold")
}

fn ok(o: &std::process::Output) -> String {
    assert!(
        o.status.success(),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn write_convert_verify_inspect_on_s3() {
    moto();
    make_bucket("cli");
    let tmp = tempfile::tempdir().unwrap();
    let local = tmp.path().join("a").to_string_lossy().into_owned();
    let write = |out: &str| {
        stokehold(&[
            "write",
            out,
            "--synthetic",
            "300",
            "--record-bytes",
            "40",
            "--shard-size",
            "4KiB",
            "--compression",
            "zstd",
        ])
    };
    let out = ok(&write("s3://cli/ds"));
    assert!(
        out.contains("wrote 300 records") && out.contains("s3://cli/ds"),
        "{out}"
    );
    ok(&write(&local));
    let (a, b) = (
        ShardDataset::open(&local).unwrap(),
        ShardDataset::open("s3://cli/ds").unwrap(),
    );
    assert_eq!(a.len(), b.len());
    for i in 0..a.len() {
        assert_eq!(
            a.raw_record(i).unwrap(),
            b.raw_record(i).unwrap(),
            "record {i}"
        );
    }

    let out = ok(&stokehold(&["verify", "s3://cli/ds"]));
    assert!(out.contains("s3://cli/ds: ok, 300 records"), "{out}");
    let out = ok(&stokehold(&["inspect", "s3://cli/ds"]));
    assert!(
        out.contains("300 records") && out.contains("payload"),
        "{out}"
    );

    // Shards on S3 to TFRecords on S3, and back to shards on S3.
    let out = ok(&stokehold(&[
        "convert",
        "s3://cli/ds",
        "--out",
        "s3://cli/tf",
    ]));
    assert!(out.contains("wrote 300 records"), "{out}");
    let files: Vec<String> = storage::list("s3://cli/tf/*.tfrecord")
        .unwrap()
        .into_iter()
        .map(|m| m.location)
        .collect();
    assert!(!files.is_empty());
    let mut args = vec!["verify"];
    args.extend(files.iter().map(String::as_str));
    let out = ok(&stokehold(&args));
    assert!(
        out.contains("300 good records") && out.contains("0 corrupt"),
        "{out}"
    );
    let out = ok(&stokehold(&["inspect", &files[0]]));
    assert!(out.contains(&files[0]) && out.contains("payload"), "{out}");
    let mut args = vec!["convert"];
    args.extend(files.iter().map(String::as_str));
    args.extend(["--out", "s3://cli/back"]);
    ok(&stokehold(&args));
    let back = ShardDataset::open("s3://cli/back").unwrap();
    assert_eq!(back.len(), 300);
    back.verify().unwrap();

    // A corrupt object is reported by URL and the command fails.
    let shard = &b.manifest().shards[1].file;
    let url = format!("s3://cli/ds/{shard}");
    let mut bytes = storage::read(Path::new(&url)).unwrap().to_vec();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    storage::write(Path::new(&url), bytes.into()).unwrap();
    let o = stokehold(&["verify", "s3://cli/ds"]);
    assert!(!o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(shard.as_str()) && out.contains("checksum"),
        "{out}"
    );
}

//! Crash test: a writer process killed with SIGKILL at random moments never leaves a folder that
//! opens as a complete dataset unless it is one (verified byte for byte); otherwise opening says
//! the folder is incomplete, and writing again finishes cleanly.
//!
//! The writer is this test binary itself, re-run as a child with only `child_writer` selected
//! and the folder passed in an environment variable.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use stokehold_core::rng::Rng;
use stokehold_core::MapDataset;
use stokehold_io::shard::{write_shards, Compression, ShardDataset, WriteOptions};

use super::shard_format::{opts, sample};

const CHILD_ENV: &str = "STOKEHOLD_SHARD_CRASH_CHILD";
const RECORDS: u64 = 1500;

fn child_opts(overwrite: bool) -> WriteOptions {
    WriteOptions {
        overwrite,
        ..opts(4096, Compression::Lz4)
    }
}

/// The child's body; does nothing unless started by the crash test below.
#[test]
fn child_writer() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (dir, overwrite) = spec.split_once('|').expect("dir|overwrite");
    write_shards(&sample(RECORDS), dir, child_opts(overwrite == "1"), None).unwrap();
}

fn spawn(dir: &Path, overwrite: bool) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "shard_crash::child_writer",
            "--test-threads=1",
            "-q",
        ])
        .env(
            CHILD_ENV,
            format!("{}|{}", dir.display(), u8::from(overwrite)),
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Whether a writer has put anything in `dir` yet.
fn started(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some())
}

/// What a folder holds after a kill: a verified dataset of `n` records, or `None` (incomplete, or
/// absent when the kill came before the child created it).
fn outcome(dir: &Path) -> Option<u64> {
    if !dir.exists() {
        return None;
    }
    match ShardDataset::open(dir) {
        Ok(ds) => {
            ds.verify().unwrap();
            Some(ds.len())
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("incomplete dataset"), "{msg}");
            None
        }
    }
}

#[test]
fn writer_killed_at_random_moments_never_leaves_a_half_dataset() {
    let root = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let full_dir = root.path().join("full");
    assert!(spawn(&full_dir, false).wait().unwrap().success());
    let full = t0.elapsed();
    assert_eq!(outcome(&full_dir), Some(RECORDS));

    let mut rng = Rng::keyed(0xc7a5, &[]);
    let (mut incomplete, mut complete) = (0, 0);
    for trial in 0..24 {
        let dir = root.path().join(format!("t{trial}"));
        // Every other trial overwrites a complete, older dataset of 50 records.
        let overwrite = trial % 2 == 1;
        if overwrite {
            write_shards(&sample(50), &dir, child_opts(false), None).unwrap();
        }
        let mut child = spawn(&dir, overwrite);
        let delay = full.mul_f64(rng.next_f64() * 1.1);
        if trial % 4 == 2 {
            // Killed as soon as the folder shows the write under way: mid-write however the
            // load on the machine stretches or shrinks the child's time against `full`.
            let t = Instant::now();
            while !started(&dir) && t.elapsed() < full * 20 + Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(1));
            }
        } else {
            std::thread::sleep(delay);
        }
        let _ = child.kill(); // SIGKILL; an error means it had already finished
        child.wait().unwrap();
        match outcome(&dir) {
            None => incomplete += 1,
            Some(n) => {
                assert!(
                    n == RECORDS || (overwrite && n == 50),
                    "trial {trial}: {n} records"
                );
                complete += 1;
            }
        }
        // Starting again after the kill finishes cleanly.
        if trial % 4 == 0 {
            assert!(spawn(&dir, true).wait().unwrap().success());
            assert_eq!(outcome(&dir), Some(RECORDS));
        }
    }
    // The six kills at the first sign of the write, at least, land mid-write.
    assert!(
        incomplete >= 3,
        "kills landed mid-write only {incomplete} times ({complete} done)"
    );
}

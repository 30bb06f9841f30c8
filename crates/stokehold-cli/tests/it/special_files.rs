//! Every CLI verb that reads files refuses what is no regular file, promptly and by name: a FIFO
//! (opening one for reading blocks until a writer appears) and `/dev/zero` (reads forever) made
//! `inspect` and `verify` hang before.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `stokehold args...`, killed after 60 s: its exit status and output.
fn run(args: &[&str]) -> (bool, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stokehold"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("stokehold {args:?} still running after 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    (o.status.success(), text)
}

fn mkfifo(path: &Path) {
    let ok = Command::new("mkfifo").arg(path).status().unwrap().success();
    assert!(ok, "mkfifo {}", path.display());
}

#[test]
fn reading_verbs_refuse_a_fifo_and_a_character_device_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe.tfrecord");
    mkfifo(&fifo);
    let out = dir.path().join("out");
    let fifo = fifo.to_str().unwrap();
    for special in [fifo, "/dev/zero"] {
        for args in [
            vec!["inspect", special],
            vec!["verify", special],
            vec!["index", special],
            vec!["convert", "--out", out.to_str().unwrap(), special],
        ] {
            let (ok, text) = run(&args);
            assert!(!ok, "{args:?} succeeded: {text}");
            assert!(
                text.contains("not a regular file") && text.contains(special),
                "{args:?}: {text}"
            );
        }
    }
}

//! The built `stokehold` binary, run as a user would.

use std::process::{Command, Output};

fn stokehold(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stokehold"))
        .args(args)
        .output()
        .expect("run stokehold")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("utf-8 output")
}

/// A small demo: a few short clips, two epochs, no step, so it runs in well under a second.
fn small_demo(extra: &[&str]) -> Output {
    let mut args = vec![
        "demo",
        "--clips",
        "9",
        "--epochs",
        "2",
        "--batch-size",
        "4",
        "--step-ms",
        "0",
        "--min-seconds",
        "4",
        "--max-seconds",
        "10",
    ];
    args.extend_from_slice(extra);
    let out = stokehold(&args);
    assert!(
        out.status.success(),
        "demo failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The first-batch checksums printed in the epoch table, in epoch order.
fn checksums(table: &str) -> Vec<String> {
    table
        .lines()
        .filter_map(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            let sum = t.get(3)?;
            let ok = t.len() == 4
                && t[0].parse::<usize>().is_ok()
                && sum.len() == 16
                && sum.chars().all(|c| c.is_ascii_hexdigit());
            ok.then(|| sum.to_string())
        })
        .collect()
}

#[test]
fn help_lists_demo() {
    let out = stokehold(&["--help"]);
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(text.contains("Usage: stokehold"), "{text}");
    assert!(text.contains("demo"), "{text}");
    let out = stokehold(&["demo", "--help"]);
    assert!(stdout(&out).contains("--crop-seconds"));
}

#[test]
fn version_is_the_crate_version() {
    let out = stokehold(&["--version"]);
    assert!(out.status.success());
    assert_eq!(
        stdout(&out).trim(),
        format!("stokehold {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn demo_prints_every_row_of_the_table() {
    let text = stdout(&small_demo(&[]));
    for row in [
        "raw samples",
        "cache RSS growth",
        "padded matrix (computed: 9 x",
        "steady batch wait (median, step excluded)",
        "steady batch interval",
        "1 -> 2",
        "stall = gap - step - steady wait; median",
        "cache RSS growth <= 1.05 x raw + 16 MiB",
        "epoch-boundary stall median < 1 ms",
    ] {
        assert!(text.contains(row), "missing {row:?} in:\n{text}");
    }
    assert_eq!(checksums(&text).len(), 2, "{text}");
    // Each verdict is computed, so it reads met or NOT MET, never anything else.
    let verdicts = text
        .lines()
        .filter(|l| l.ends_with(": met") || l.ends_with(": NOT MET"));
    assert_eq!(verdicts.count(), 2, "{text}");
}

#[test]
fn same_seed_same_batches_other_seed_other_batches() {
    let a = checksums(&stdout(&small_demo(&["--seed", "11"])));
    let b = checksums(&stdout(&small_demo(&["--seed", "11"])));
    let c = checksums(&stdout(&small_demo(&["--seed", "12"])));
    assert_eq!(a.len(), 2);
    assert_eq!(a, b);
    assert_ne!(a[0], c[0]);
    assert_ne!(a[1], c[1]);
    // Epochs reshuffle and recrop: the first batches of two epochs differ.
    assert_ne!(a[0], a[1]);
}

#[test]
fn prefetch_depth_does_not_change_batches() {
    let a = checksums(&stdout(&small_demo(&["--prefetch", "1"])));
    let b = checksums(&stdout(&small_demo(&["--prefetch", "16"])));
    assert_eq!(a, b);
}

#[test]
fn json_report_matches_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.json");
    let text = stdout(&small_demo(&["--json", path.to_str().unwrap()]));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).expect("valid JSON");
    let sums: Vec<String> = report["first_batch_checksums"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| format!("{:016x}", v.as_u64().unwrap()))
        .collect();
    assert_eq!(sums, checksums(&text));
    assert_eq!(report["options"]["clips"], 9);
    assert_eq!(report["boundaries"].as_array().unwrap().len(), 1);
    // No temporary file is left beside the report.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn bad_options_fail_with_a_clear_message() {
    let out = stokehold(&["demo", "--crop-seconds", "6", "--min-seconds", "5"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("crop_seconds (6) is longer than the shortest clip"),
        "{err}"
    );
    let out = stokehold(&["demo", "--batch-size", "0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("batch_size must be > 0"));
    let out = stokehold(&["demo", "--clips", "many"]);
    assert_eq!(out.status.code(), Some(2), "clap's usage error");
}

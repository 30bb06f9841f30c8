//! `stokehold write` and `stokehold convert`, run as a user would.

use std::process::Command;

use stokehold_core::MapDataset;
use stokehold_io::shard::ShardDataset;

fn stokehold(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_stokehold"))
        .args(args)
        .output()
        .expect("run stokehold")
}

#[test]
fn write_then_convert_to_tfrecord_and_back() {
    let tmp = tempfile::tempdir().unwrap();
    let p = |s: &str| tmp.path().join(s).to_string_lossy().into_owned();
    let o = stokehold(&[
        "write",
        &p("a"),
        "--synthetic",
        "300",
        "--record-bytes",
        "40",
        "--shard-size",
        "4KiB",
        "--compression",
        "zstd",
        "--shuffle-seed",
        "5",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("wrote 300 records"));
    let a = ShardDataset::open(p("a")).unwrap();
    assert!(a.manifest().shards.len() > 2);
    a.verify().unwrap();

    let again = stokehold(&["write", &p("a"), "--synthetic", "3"]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("overwrite"));

    let o = stokehold(&["convert", &p("a"), "-o", &p("tfr")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut files: Vec<String> = std::fs::read_dir(p("tfr"))
        .unwrap()
        .map(|e| e.unwrap().path().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".tfrecord"))
        .collect();
    files.sort();
    let mut args = vec!["convert"];
    args.extend(files.iter().map(String::as_str));
    let out = p("b");
    args.extend(["-o", &out]);
    let o = stokehold(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let b = ShardDataset::open(p("b")).unwrap();
    assert_eq!(b.len(), 300);
    for i in [0, 17, 299] {
        // tf.train.Example keeps int64 lists: the ids survive the round trip in order.
        let (x, y) = (a.get(i).unwrap(), b.get(i).unwrap());
        let id =
            |e: &stokehold_core::Example| e.tensor("t", "id").unwrap().to_vec::<i64>().unwrap();
        assert_eq!(id(&x), id(&y));
    }
}

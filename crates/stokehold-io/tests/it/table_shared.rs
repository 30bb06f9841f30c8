//! Two processes that open the same table share its pages: the parent maps and reads a table, a
//! child process (this test binary again) does the same, and the child's `/proc/<pid>/smaps`
//! entry for the file shows its resident pages as `Shared_Clean`, i.e. mapped by both processes
//! from one copy in the page cache.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use stokehold_core::{DType, Tensor};
use stokehold_io::table::{Table, TableWriter};

const ENV: &str = "STOKEHOLD_SHARED_TABLE";

/// Touches every row (one copy of all rows) so every page of the table is mapped.
fn read_all(t: &Table) -> f64 {
    let idx: Vec<u64> = (0..t.len()).collect();
    t.take(&idx)
        .unwrap()
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|v| *v as f64)
        .sum()
}

/// (Rss, Shared_Clean, Private_Clean) in KiB of the mapping of `file` in `/proc/<pid>/smaps`.
fn smaps_kib(pid: &str, file: &Path) -> (u64, u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    let name = file.to_str().unwrap();
    let (mut inside, mut out) = (false, (0, 0, 0));
    for line in text.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && !first.ends_with(':') {
            inside = line.ends_with(name);
            continue;
        }
        let field = |k: &str| {
            line.strip_prefix(k)
                .map(|r| r.trim().trim_end_matches(" kB").parse::<u64>().unwrap())
        };
        if inside {
            out.0 += field("Rss:").unwrap_or(0);
            out.1 += field("Shared_Clean:").unwrap_or(0);
            out.2 += field("Private_Clean:").unwrap_or(0);
        }
    }
    out
}

#[test]
#[ignore = "child process of table_shared::two_processes_share_pages (runs only with its env var)"]
fn child_holds_table() {
    let Ok(path) = std::env::var(ENV) else { return };
    let t = Table::open(&path).unwrap();
    println!("child sum {}", read_all(&t));
    println!("ready");
    // Keep the mapping alive until the parent closes our stdin.
    let _ = std::io::stdin().lines().count();
}

#[test]
#[cfg(target_os = "linux")]
fn two_processes_share_pages() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().canonicalize().unwrap().join("shared.npy");
    let (rows, width) = (2048usize, 1024usize); // 8 MiB
    let mut w = TableWriter::create(&path, DType::F32, &[width]).unwrap();
    let block: Vec<f32> = (0..rows * width).map(|x| (x % 977) as f32).collect();
    w.append(&Tensor::from_vec(vec![rows, width], block).unwrap())
        .unwrap();
    let table = w.finish().unwrap();
    let parent_sum = read_all(&table);

    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "table_shared::child_holds_table",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ENV, &path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut child_sum = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        // libtest prints "test <name> ... " on the same line before our output.
        if let Some((_, s)) = line.split_once("child sum ") {
            child_sum = Some(s.trim().parse::<f64>().unwrap());
        }
        if line.trim() == "ready" {
            break;
        }
    }
    assert_eq!(
        child_sum,
        Some(parent_sum),
        "both processes read the same rows"
    );
    let pid = child.id().to_string();
    let (rss, shared, private) = smaps_kib(&pid, &path);
    let mine = smaps_kib("self", &path);
    eprintln!(
        "table {} KiB; child: Rss {rss} kB, Shared_Clean {shared} kB, Private_Clean {private} kB; \
         parent: Rss {} kB, Shared_Clean {} kB",
        rows * width * 4 / 1024,
        mine.0,
        mine.1
    );
    drop(child.stdin.take());
    let _ = lines.count();
    assert!(child.wait().unwrap().success());
    let data_kib = (rows * width * 4 / 1024) as u64;
    assert!(
        rss >= data_kib,
        "child maps the whole table: Rss {rss} kB < {data_kib} kB"
    );
    assert!(
        shared >= data_kib,
        "pages are shared, not copied: Shared_Clean {shared} kB < {data_kib} kB"
    );
    assert_eq!(private, 0, "no page of the table is private to the child");
}

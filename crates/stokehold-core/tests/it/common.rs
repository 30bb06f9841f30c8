//! Helpers shared by the integration tests.

use stokehold_core::exec::{ExecOptions, Executor};
use stokehold_core::{Dataset, DatasetIter, Example, Result};

/// Feature `x` (int64 scalar) of every element.
pub fn xs(elements: &[Example]) -> Vec<i64> {
    elements
        .iter()
        .map(|e| e.tensor("test", "x").unwrap().to_vec::<i64>().unwrap()[0])
        .collect()
}

/// Runs epoch 0 of `ds` to the end and returns feature `x`.
pub fn run(ds: &Dataset) -> Result<Vec<i64>> {
    let mut it = ds.iter(0)?;
    Ok(xs(&it.collect_all()?))
}

/// Runs `ds` on an executor with `cores` cores.
pub fn run_on(ds: &Dataset, cores: usize) -> Result<Vec<i64>> {
    let exec = Executor::new(ExecOptions {
        cores,
        ..ExecOptions::default()
    });
    let mut it = exec.iter(ds, 0)?;
    Ok(xs(&it.collect_all()?))
}

/// Takes `k` elements, saves, restores into a fresh iterator and finishes; returns the whole
/// sequence (to compare with an uninterrupted run).
pub fn save_restore_run(ds: &Dataset, k: usize) -> Result<Vec<i64>> {
    let mut it = ds.iter(0)?;
    let mut out = Vec::new();
    for _ in 0..k {
        match it.next()? {
            Some(e) => out.push(e),
            None => break,
        }
    }
    let state = it.state();
    drop(it);
    let mut it2 = ds.iter(0)?;
    it2.set_state(&state)?;
    out.extend(it2.collect_all()?);
    Ok(xs(&out))
}

/// Live threads of this process.
pub fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Waits (up to a few seconds) until the thread count is at most `n`; returns the last count.
pub fn wait_threads_at_most(n: usize) -> usize {
    let mut c = threads();
    for _ in 0..300 {
        if c <= n {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        c = threads();
    }
    c
}

/// Runs the ignored test `name` alone in a child process (for tests that measure the whole
/// process: thread counts, RSS) and fails if it fails.
pub fn run_isolated(name: &str) {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([
            name,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{name} failed in its own process:\n{text}"
    );
    assert!(text.contains("1 passed"), "{name} did not run:\n{text}");
}

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

/// Waits (up to 30 s: a loaded machine may take long to run the exiting threads) until the
/// thread count is at most `n`; returns the last count.
pub fn wait_threads_at_most(n: usize) -> usize {
    let mut c = threads();
    for _ in 0..3000 {
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

/// A gate that holds whoever waits at it until the test opens it: an element that is "slow" for
/// exactly as long as a test needs, however busy the machine (a sleep of a fixed length ended
/// before a loaded machine ran the check the test meant to land in it). The wait gives up after
/// a minute, so that a pipeline that should not have waited for it fails its test instead of
/// hanging it.
#[derive(Clone, Default)]
pub struct Gate(std::sync::Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>);

impl Gate {
    /// Waits until the gate is open (at most a minute).
    pub fn wait(&self) {
        let (open, cv) = &*self.0;
        let open = open.lock().unwrap();
        let _ = cv
            .wait_timeout_while(open, std::time::Duration::from_secs(60), |o| !*o)
            .unwrap();
    }

    /// Opens the gate for good.
    pub fn open(&self) {
        let (open, cv) = &*self.0;
        *open.lock().unwrap() = true;
        cv.notify_all();
    }

    /// A map that holds element `x == held` at this gate (feature `x`, int64 scalar).
    pub fn holding(&self, held: i64) -> stokehold_core::MapFn {
        let gate = self.clone();
        stokehold_core::map_fn(move |e: Example, _| {
            if e.tensor("held", "x")?.to_vec::<i64>()?[0] == held {
                gate.wait();
            }
            Ok(e)
        })
    }
}

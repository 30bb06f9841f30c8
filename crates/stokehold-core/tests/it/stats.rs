//! Stats, verdicts, AUTOTUNE's choices, and the Chrome trace export.

use std::time::Duration;

use stokehold_core::exec::{ExecOptions, Executor, Parallelism};
use stokehold_core::{map_fn, Dataset, DatasetIter, Example};

fn busy(micros: u64) -> stokehold_core::MapFn {
    map_fn(move |e: Example, _| {
        let t = std::time::Instant::now();
        while t.elapsed() < Duration::from_micros(micros) {
            std::hint::black_box(0);
        }
        Ok(e)
    })
}

#[test]
fn autotune_stays_within_cores_unless_its_workers_wait_and_explains_itself() {
    for cores in [1, 2, 3] {
        let ds = Dataset::range(1500).map_parallel("busy", busy(300), Parallelism::Autotune, true);
        let exec = Executor::new(ExecOptions {
            cores,
            trace_events: 1000,
            ..ExecOptions::default()
        });
        let mut it = exec.iter(&ds, 0).unwrap();
        assert_eq!(it.collect_all().unwrap().len(), 1500);
        let s = it.stats();
        assert_eq!(s.ops.len(), 1);
        let op = &s.ops[0];
        // 0 is inline (the consumer computing each element), which AUTOTUNE may pick at one core.
        // A new op starts at the cores; it goes past them only for workers that waited for a
        // core (this suite's other tests hold them), and says so.
        assert!(
            op.parallelism <= cores || op.autotune.contains("past the"),
            "{cores} cores: {op:?}"
        );
        assert!(op.parallelism <= 4 * cores, "{cores} cores: {op:?}");
        assert_eq!(op.elements, 1500);
        assert!(!op.autotune.is_empty(), "no autotune note: {op:?}");
        assert!(s.table().contains("verdict:"));
        // Every slot is back once the iterator is gone.
        drop(it);
        assert_eq!(exec.free_slots(), cores - 1);
    }
}

#[test]
fn two_autotuned_ops_share_the_cores() {
    let ds = Dataset::range(400)
        .map_parallel("a", busy(200), Parallelism::Autotune, true)
        .map_parallel("b", busy(200), Parallelism::Autotune, true);
    let exec = Executor::new(ExecOptions {
        cores: 2,
        ..ExecOptions::default()
    });
    let mut it = exec.iter(&ds, 0).unwrap();
    assert_eq!(it.collect_all().unwrap().len(), 400);
    let s = it.stats();
    assert_eq!(s.ops.len(), 2, "{s:?}");
    let total: usize = s.ops.iter().map(|o| o.parallelism).sum();
    // Each op always has one worker; the extra slots are the cores beyond the first.
    assert!(total <= 3, "{}", s.table());
}

#[test]
fn verdict_names_the_slow_stage_or_the_consumer() {
    let slow = Dataset::range(60).map_parallel("slow", busy(2000), Parallelism::Fixed(1), true);
    let exec = Executor::new(ExecOptions::default());
    let mut it = exec.iter(&slow, 0).unwrap();
    it.collect_all().unwrap();
    let v = it.stats().verdict;
    assert!(
        v.contains("bound in op map[slow]") || v.contains("input-bound"),
        "{v}"
    );

    // 100 elements at 3 ms: the consumer's wait for the workers to start (tens of ms when the
    // test suite loads both cores; 40 elements failed CI once so) stays under a tenth of it.
    let fast = Dataset::range(100).map_parallel("fast", busy(1), Parallelism::Fixed(2), true);
    let exec = Executor::new(ExecOptions::default());
    let mut it = exec.iter(&fast, 0).unwrap();
    while it.next().unwrap().is_some() {
        std::thread::sleep(Duration::from_millis(3)); // a slow consumer
    }
    let v = it.stats().verdict;
    assert!(v.starts_with("consumer-bound"), "{v}");
}

#[test]
fn trace_export_is_chrome_json() {
    let ds = Dataset::range(50).map_parallel("t", busy(10), Parallelism::Fixed(2), true);
    let exec = Executor::new(ExecOptions {
        trace_events: 30,
        ..ExecOptions::default()
    });
    let mut it = exec.iter(&ds, 0).unwrap();
    it.collect_all().unwrap();
    let v: serde_json::Value = serde_json::from_str(&exec.trace_json()).unwrap();
    let all = v["traceEvents"].as_array().unwrap();
    // Spans (at most the window), and one thread_name metadata event per thread that has one.
    let events: Vec<_> = all.iter().filter(|e| e["ph"] == "X").collect();
    assert!(!events.is_empty() && events.len() <= 30);
    for e in &events {
        assert!(e["ts"].is_u64() && e["dur"].is_u64() && e["tid"].is_u64());
    }
    let named: Vec<_> = all.iter().filter(|e| e["ph"] == "M").collect();
    assert!(!named.is_empty() && named.iter().all(|e| e["name"] == "thread_name"));
    assert!(events
        .iter()
        .all(|e| named.iter().any(|m| m["tid"] == e["tid"])));
}

#[test]
fn with_options_owns_one_executor_across_epochs() {
    let opts = ExecOptions {
        memory_budget: 1 << 20,
        cores: 2,
        ..ExecOptions::default()
    };
    let ds = Dataset::range(30)
        .map_parallel("x", busy(1), Parallelism::Fixed(2), true)
        .with_options(opts);
    let later = ds.take(100);
    for epoch in 0..3 {
        assert_eq!(later.iter(epoch).unwrap().collect_all().unwrap().len(), 30);
    }
    let exec = stokehold_core::exec::executor_of(&later).expect("found through the plan");
    assert_eq!(exec.budget().limit(), 1 << 20);
    let s = exec.stats();
    assert_eq!(s.ops.len(), 1);
    assert_eq!(s.ops[0].elements, 90, "counted over the three epochs");
    assert!(stokehold_core::exec::executor_of(&Dataset::range(3)).is_none());
}

//! Stats, verdicts, and the Chrome trace export (AUTOTUNE's choices: `autotune.rs`).

use std::time::Duration;

use stokehold_core::exec::{
    Budget, ExecOptions, Executor, OpReport, OpStats, Parallelism, StatsReport,
};
use stokehold_core::{filter_fn, map_fn, Dataset, DatasetIter, Example};

/// A map that spins for `micros` on every element.
pub(crate) fn busy(micros: u64) -> stokehold_core::MapFn {
    map_fn(move |e: Example, _| {
        let t = std::time::Instant::now();
        while t.elapsed() < Duration::from_micros(micros) {
            std::hint::black_box(0);
        }
        Ok(e)
    })
}

#[test]
fn verdict_names_the_slow_stage_or_the_consumer() {
    let slow = Dataset::range(60).map_parallel("slow", busy(2000), Parallelism::Fixed(1), true);
    let exec = Executor::new(ExecOptions::default());
    let mut it = exec.iter(&slow, 0).unwrap();
    it.collect_all().unwrap();
    let v = it.stats().verdict;
    assert!(
        // Over random access the parallel map is map().parallelize(): the stage's row names
        // the ops its workers run.
        v.contains("bound in op parallelize[range(60) -> map[slow]]") || v.contains("input-bound"),
        "{v}"
    );

    // A consumer that waited under a tenth of the time is the bound, a stage otherwise.
    let row = |consumer_wait_s: f64| OpReport {
        elements: 100,
        wall_s: 1.0,
        consumer_wait_s,
        busy_s: 0.02,
        busy_per_thread: 0.01,
        capacity: 6,
        parallelism: 2,
        feeds_consumer: true,
        ..OpStats::new("map[fast]".into()).report()
    };
    let verdict = |r: OpReport| StatsReport::new(vec![r], &Budget::new(1 << 20), 2).verdict;
    let v = verdict(row(0.05));
    assert!(v.starts_with("consumer-bound"), "{v}");
    let v = verdict(row(0.5));
    assert!(v.starts_with("bound in op map[fast]"), "{v}");
    // A slow consumer of a fast stage on real threads: how long it waited for the workers to
    // start is up to the load (tens of ms when the test suite loads both cores), so only that
    // the verdict follows from the figures is checked.
    let fast = Dataset::range(100).map_parallel("fast", busy(1), Parallelism::Fixed(2), true);
    let exec = Executor::new(ExecOptions::default());
    let mut it = exec.iter(&fast, 0).unwrap();
    while it.next().unwrap().is_some() {
        std::thread::sleep(Duration::from_millis(3)); // a slow consumer
    }
    let s = it.stats();
    let op = &s.ops[0];
    assert_eq!(
        s.verdict.starts_with("consumer-bound"),
        op.consumer_wait_s < 0.1 * op.wall_s,
        "{}",
        s.table()
    );
}

#[test]
fn the_verdict_reads_the_stage_the_consumer_takes_from_behind_a_batch_and_a_prefetch() {
    // tf.data's idiom: map(num_parallel_calls).batch().prefetch(). The batch, built on the
    // prefetch thread, registers its row after both stages; read as the outermost op (it has no
    // consumer waits of its own) it made every such pipeline "consumer-bound", and the
    // prefetch counted none of its consumer's waits either. (Over a stream: over random access
    // the batch is built under the stage, as below.)
    let ds = Dataset::range(120)
        .filter("all", filter_fn(|_, _| Ok(true)))
        .map_parallel("slow", busy(2000), Parallelism::Fixed(1), true)
        .batch(4, false)
        .unwrap()
        .prefetch(2)
        .unwrap();
    let exec = Executor::new(ExecOptions::default());
    let mut it = exec.iter(&ds, 0).unwrap();
    assert_eq!(it.collect_all().unwrap().len(), 30);
    let s = it.stats();
    let row = |name: &str| s.ops.iter().find(|o| o.op.starts_with(name)).unwrap();
    let (prefetch, stage) = (row("prefetch"), row("map[slow]"));
    assert!(prefetch.feeds_consumer && !stage.feeds_consumer, "{s:?}");
    assert!(!row("batch").feeds_consumer, "{s:?}");
    // The consumer waited for nearly all of the 0.24 s the map took.
    assert!(prefetch.consumer_wait_s > 0.1, "{}", s.table());
    assert!(!s.verdict.starts_with("consumer-bound"), "{}", s.table());

    // A batch built by a stage's two workers: its row's busy time is theirs summed; the verdict
    // names the stage, whose threads can be added, not the batch.
    let ds = Dataset::range(120)
        .map("slow", busy(2000))
        .batch(4, false)
        .unwrap()
        .parallelize(Parallelism::Fixed(2), true);
    let exec = Executor::new(ExecOptions::default());
    let mut it = exec.iter(&ds, 0).unwrap();
    assert_eq!(it.collect_all().unwrap().len(), 30);
    let s = it.stats();
    assert!(
        s.ops.iter().any(|o| o.op.starts_with("batch")),
        "{}",
        s.table()
    );
    assert!(
        s.verdict.contains("bound in op parallelize"),
        "{}",
        s.table()
    );
    // The batch's row, shown per thread of the stage (it said 199 %).
    assert_batch_busy_per_thread(&s);
}

/// The batch row of `s` is busy per thread of those that build it: never more than all of
/// their time (its busy time is theirs summed).
fn assert_batch_busy_per_thread(s: &stokehold_core::exec::StatsReport) {
    let batch = s.ops.iter().find(|o| o.op.starts_with("batch")).unwrap();
    assert!(
        batch.busy_per_thread > 0.2 && batch.busy_per_thread <= 1.1,
        "{}",
        s.table()
    );
}

#[test]
fn a_batch_built_by_an_interleaves_readers_is_busy_per_reader_and_a_stage_fills_its_bound() {
    // A batch built by an interleave's two readers at once (it said 133 %).
    let opener = stokehold_core::interleave_fn(|_: Example, _| {
        Dataset::range(20).map("slow", busy(1000)).batch(4, false)
    });
    let ds = Dataset::range(6)
        .interleave("open", opener, 2, 1, Some(Parallelism::Fixed(2)), true)
        .unwrap();
    let exec = Executor::new(ExecOptions::default());
    let mut it = exec.iter(&ds, 0).unwrap();
    assert_eq!(it.collect_all().unwrap().len(), 30);
    assert_batch_busy_per_thread(&it.stats());

    // A stage of cheap elements claims runs of them, far past its window of 2 x parallelism
    // + 2, and holds them until taken: its fill is a fraction of that bound (read against the
    // window, a slow consumer's stage said 1000 % and more).
    let ds = Dataset::range(4000).map_parallel(
        "cheap",
        map_fn(|e: Example, _| Ok(e)),
        Parallelism::Fixed(1),
        true,
    );
    let exec = Executor::new(ExecOptions::default());
    let mut it = exec.iter(&ds, 0).unwrap();
    let mut n = 0;
    while it.next().unwrap().is_some() {
        n += 1;
        if n % 500 == 0 {
            // The worker fills the buffer while the consumer is away.
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    assert_eq!(n, 4000);
    let s = it.stats();
    let stage = s.ops.iter().find(|o| o.op.contains("cheap")).unwrap();
    assert!(stage.capacity > 4, "{}", s.table());
    assert!(
        stage.queue_fill > 0.0 && stage.queue_fill <= 1.0,
        "{} {:?}",
        s.table(),
        stage
    );
}

#[test]
fn a_parallel_interleave_read_directly_is_the_consumers_stage() {
    // tf.data's reading idiom without a prefetch: the consumer takes from the interleave, whose
    // row the verdict reads (its readers count the consumer's waits).
    let opener = stokehold_core::interleave_fn(|_: Example, _| {
        Ok(Dataset::range(25).map("slow", busy(1000)))
    });
    let ds = Dataset::range(8)
        .interleave("open", opener, 2, 1, Some(Parallelism::Fixed(2)), true)
        .unwrap();
    let exec = Executor::new(ExecOptions::default());
    let mut it = exec.iter(&ds, 0).unwrap();
    assert_eq!(it.collect_all().unwrap().len(), 200);
    let s = it.stats();
    let row = s.ops.iter().find(|o| o.op.contains("interleave")).unwrap();
    assert!(row.feeds_consumer, "{s:?}");
    assert!(row.consumer_wait_s > 0.04, "{}", s.table());
    assert!(!s.verdict.starts_with("consumer-bound"), "{}", s.table());
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

#[test]
fn verdicts_name_the_known_bottleneck_and_what_to_change() {
    use stokehold_core::exec::histogram::Percentiles;
    use stokehold_core::exec::steps::StepReport;
    let cores = 4;
    let verdict = |ops: Vec<OpReport>, steps: Option<StepReport>| {
        StatsReport::new(ops, &Budget::new(1 << 20), cores)
            .with_steps(steps)
            .verdict
    };
    // A stage over 10 s that handed out 1,000 elements.
    let row = |name: &str, busy: f64, parallelism: usize, consumer_wait_s: f64| OpReport {
        elements: 1000,
        wall_s: 10.0,
        capacity: 8,
        parallelism,
        busy_per_thread: busy,
        busy_s: busy * 10.0 * parallelism.max(1) as f64,
        consumer_wait_s,
        feeds_consumer: consumer_wait_s > 0.0,
        ..OpStats::new(name.into()).report()
    };
    // The training loop: the share of its time spent in next(), and next()'s median.
    let loop_waits = |share: f64, p50_s: f64| {
        let q = |s: f64| Percentiles {
            count: 1000,
            p50_s: s,
            p90_s: s,
            p99_s: s,
        };
        Some(StepReport {
            steps: 1000,
            next: q(p50_s),
            between: q(0.01),
            next_total_s: share * 10.0,
            input_share: share,
            input_bound: p50_s > 50e-6,
        })
    };

    // A slow map, with threads to spare: more threads.
    let v = verdict(
        vec![row("parallelize[map[decode]]", 0.97, 2, 6.0)],
        loop_waits(0.6, 5e-3),
    );
    assert!(
        v.starts_with("input-bound: the training loop waits in next() 60%"),
        "{v}"
    );
    assert!(v.contains("median next() 5.0 ms"), "{v}");
    assert!(v.contains("bound in op parallelize[map[decode]]"), "{v}");
    assert!(v.contains("give it more threads"), "{v}");
    // ... with a thread on every core already: cheaper elements or more cores.
    let v = verdict(
        vec![row("parallelize[map[decode]]", 0.97, cores, 6.0)],
        None,
    );
    assert!(v.starts_with("bound in op parallelize[map[decode]]"), "{v}");
    assert!(v.contains("a thread for every core"), "{v}");

    // A slow reader under a fast map: the reader is named, not the map that waits for it.
    let mut map = row("parallelize[map[parse]]", 0.2, 2, 7.0);
    map.input_wait_s = 15.0;
    let v = verdict(
        vec![row("interleave[read]", 0.95, 2, 0.0), map],
        loop_waits(0.7, 7e-3),
    );
    assert!(v.contains("bound in op interleave[read]"), "{v}");

    // A slow consumer: the stages keep up, next() returns at once.
    let v = verdict(
        vec![row("parallelize[map[decode]]", 0.3, 2, 0.1)],
        loop_waits(0.002, 8e-6),
    );
    assert!(v.starts_with("not input-bound"), "{v}");
    assert!(v.contains("within tf.data's rule of 50 us"), "{v}");
    assert!(v.contains("speed up the training step"), "{v}");
    let v = verdict(vec![row("parallelize[map[decode]]", 0.3, 2, 0.1)], None);
    assert!(v.starts_with("consumer-bound"), "{v}");

    // A starved prefetch: it waits for its input more than it works.
    let mut prefetch = row("prefetch(8)[generator]", 0.05, 1, 9.0);
    prefetch.input_wait_s = 9.0;
    let v = verdict(vec![prefetch], loop_waits(0.9, 9e-3));
    assert!(
        v.contains("input-bound: prefetch(8)[generator] waits for its input"),
        "{v}"
    );
    assert!(v.contains("speed up what feeds it"), "{v}");

    // next() slow while the stages keep up: the time is in handing elements over.
    let v = verdict(
        vec![row("parallelize[map[decode]]", 0.3, 2, 0.1)],
        loop_waits(0.3, 2e-4),
    );
    assert!(v.contains("the stages keep up"), "{v}");
    assert!(v.contains("next_many"), "{v}");
}

#[test]
fn the_pipeline_iterator_records_the_loops_steps_and_each_stage_its_percentiles() {
    use stokehold_core::PipelineIter;
    // A map that sleeps 3 ms on one thread, a loop that does nothing: every next() waits.
    let slow = map_fn(|e: Example, _| {
        std::thread::sleep(Duration::from_millis(3));
        Ok(e)
    });
    let ds = Dataset::range(30)
        .map_parallel("sleepy", slow, Parallelism::Fixed(1), true)
        .with_options(ExecOptions::default());
    let mut it = PipelineIter::new(ds.clone(), 0).unwrap();
    let mut n = 0;
    while it.next().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, 30);
    let s = stokehold_core::exec::executor_of(&ds).unwrap().stats();
    let steps = s.steps.expect("the loop's steps");
    // 31 calls (the last returns the end); the first has no step before it.
    assert_eq!((steps.steps, steps.next.count), (30, 31));
    // What the loop waited follows from how the machine ran it; the verdict follows from that.
    assert!((0.0..=1.0).contains(&steps.input_share), "{steps:?}");
    assert_eq!(steps.input_bound, steps.next.p50_s > 50e-6, "{steps:?}");
    assert_eq!(
        s.verdict
            .starts_with("input-bound: the training loop waits"),
        steps.input_bound,
        "{}",
        s.table()
    );
    assert!(s.table().contains("steps: 30; next() p50"), "{}", s.table());
    let stage = s.ops.iter().find(|o| o.op.contains("sleepy")).unwrap();
    // Each element slept 3 ms: its time's median is at least that.
    assert_eq!(stage.element_time.count, 30);
    assert!(stage.element_time.p50_s >= 3e-3 * 0.93, "{stage:?}");
    assert!(stage.element_time.p99_s >= stage.element_time.p50_s);
    // One wait or none per element taken.
    assert_eq!(stage.consumer_wait.count, 30);
}

#[test]
fn the_picture_marks_the_bottleneck_the_verdict_names_and_plots_the_recorded_window() {
    use stokehold_core::exec::picture::{BOTTLENECK_MARK, BOTTLENECK_RED};
    // A slow map on one thread behind a fast one: the slow one is the bottleneck.
    let ds = Dataset::range(40)
        .map_parallel("fast", busy(10), Parallelism::Fixed(1), true)
        .map_parallel("slow", busy(1500), Parallelism::Fixed(1), true)
        .with_options(ExecOptions {
            trace_events: 10_000,
            ..ExecOptions::default()
        });
    let mut it = stokehold_core::PipelineIter::new(ds.clone(), 0).unwrap();
    while it.next().unwrap().is_some() {}
    let exec = stokehold_core::exec::executor_of(&ds).unwrap();
    let s = exec.stats();
    let html = exec.stats_html();
    assert!(html.starts_with("<!DOCTYPE html>") && html.ends_with("</html>"));
    for o in &s.ops {
        let shown: String = o.op.chars().take(31).collect();
        assert!(
            html.contains(&shown.replace('>', "&gt;")),
            "{} not in the picture",
            o.op
        );
    }
    match &s.bottleneck {
        Some(b) => {
            assert!(s.verdict.contains(b.as_str()), "{}", s.verdict);
            assert_eq!(html.matches(BOTTLENECK_MARK).count(), 1);
            assert_eq!(html.matches("class=\"stage bottleneck\"").count(), 1);
            assert!(html.contains(BOTTLENECK_RED));
        }
        None => assert!(!html.contains(BOTTLENECK_MARK)),
    }
    assert!(
        html.contains("training loop") && html.contains("40 steps"),
        "{html}"
    );
    // The recorded window: a throughput line per stage that finished elements in it.
    let t = exec.trace().timeline().expect("a recorded window");
    assert!(t.span_s > 0.0);
    let ops: Vec<&str> = t.series.iter().map(|s| s.op.as_str()).collect();
    let slow = t
        .series
        .iter()
        .find(|s| s.op.contains("slow"))
        .unwrap_or_else(|| panic!("{ops:?}"));
    let done: f64 = slow.elements_per_s.iter().sum::<f64>() * t.span_s / 60.0;
    assert!((done - 40.0).abs() < 1e-6, "{done}");
    assert!(html.contains("Throughput over the recorded window") && html.contains("<polyline"));
}

//! AUTOTUNE's decisions on real threads, in two parts. What it decides is checked on a
//! [`Machine`] the test describes, read through the op's sampler (`OpStats::set_sampler`), so
//! that how busy the machine running the tests is changes nothing. What a real machine's
//! readings give depends on its load, so there only what holds under any load is checked: the
//! bounds, and that every step past the cores is explained by the figures that allow it.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use stokehold_core::exec::autotune::{OpCounters, ProcSampler, Reading, Sampler};
use stokehold_core::exec::{ExecOptions, Executor, OpReport, OpStats, Parallelism, StatsReport};
use stokehold_core::{map_fn, Dataset, DatasetIter, Example};

use crate::stats::busy;

/// How an op runs on a described machine: `unit` per element on one worker, faster with more
/// workers up to `helps` of them; the consumer waits `wait` of the time; the workers run `ran`
/// of their busy time and wait `queued` of it for a core (blocked the rest); other processes
/// keep `others` cores busy.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Machine {
    unit: Duration,
    helps: usize,
    wait: f64,
    ran: f64,
    queued: f64,
    others: f64,
}

/// Workers that run all their busy time, on a machine nobody else uses, and a consumer that
/// waits for them: more workers than cores would only share the cores.
pub(crate) const CPU_BOUND: Machine = Machine {
    unit: Duration::from_millis(1),
    helps: usize::MAX,
    wait: 0.5,
    ran: 1.0,
    queued: 0.0,
    others: 0.0,
};

/// A [`Sampler`] of a [`Machine`]: its clock and counters move with the elements the op's
/// consumer takes, at the pace of the op's parallelism then.
#[derive(Debug)]
pub(crate) struct Described {
    machine: Machine,
    op: Weak<OpStats>,
    /// Elements counted so far, the clock, the counters, and how often the tuner read them.
    now: Mutex<(u64, Duration, Reading, u64)>,
}

impl Described {
    fn advance(&self) -> (Duration, Reading) {
        let m = self.machine;
        let mut now = self.now.lock().unwrap();
        if let Some(op) = self.op.upgrade() {
            let elements = op.elements();
            let threads = op.report().parallelism.max(1) as f64;
            let n = (elements - now.0) as f64;
            let dt = m.unit.as_nanos() as f64 * n / threads.min(m.helps as f64);
            let busy = dt * threads;
            let cpu = (m.ran * busy) as u64;
            let r = &mut now.2;
            r.consumer_wait_ns += (m.wait * dt) as u64;
            r.workers.wall += busy as u64;
            r.workers.cpu += cpu;
            r.workers.queue_wall += busy as u64;
            r.workers.queued += (m.queued * busy) as u64;
            r.process_cpu_ns = Some(r.process_cpu_ns.unwrap_or(0) + cpu);
            r.machine_cpu_ns = Some(r.machine_cpu_ns.unwrap_or(0) + cpu + (m.others * dt) as u64);
            now.0 = elements;
            now.1 += Duration::from_nanos(dt as u64);
        }
        (now.1, now.2)
    }
}

impl Sampler for Described {
    fn now(&self) -> Duration {
        self.advance().0
    }

    fn read(&self, _: OpCounters) -> Reading {
        self.now.lock().unwrap().3 += 1;
        self.advance().1
    }
}

/// Has every autotuned op of `ds` on `exec` read `machine`: an iterator makes the ops' rows
/// (named as the plan names each stage), and the samplers go on them before the iterators that
/// run. `ds` should have no prefetch above its stages, whose thread would make their rows later.
pub(crate) fn describe(exec: &Executor, ds: &Dataset, machine: Machine) -> Vec<Arc<Described>> {
    drop(exec.iter(ds, 0).unwrap());
    let rows = exec.stats().ops;
    assert!(!rows.is_empty(), "no parallel op in {}", ds.describe());
    rows.iter()
        .map(|o| {
            let stats = exec.op_stats(&o.op);
            let sampler = Arc::new(Described {
                machine,
                op: Arc::downgrade(&stats),
                now: Mutex::default(),
            });
            stats.set_sampler(sampler.clone());
            sampler
        })
        .collect()
}

/// Whether each of `samplers` was read (by a tuner of an iterator made after [`describe`]).
pub(crate) fn assert_read(samplers: &[Arc<Described>], s: &StatsReport) {
    for sampler in samplers {
        assert!(
            sampler.now.lock().unwrap().3 > 0,
            "an op did not read the described machine:\n{}",
            s.table()
        );
    }
}

/// One epoch of `ds` on `cores` cores of `machine`, every autotuned op of it reading the
/// machine: the iterator's stats.
fn run_on(machine: Machine, ds: &Dataset, cores: usize) -> StatsReport {
    let exec = Executor::new(ExecOptions {
        cores,
        ..ExecOptions::default()
    });
    let samplers = describe(&exec, ds, machine);
    let mut it = exec.iter(ds, 0).unwrap();
    it.collect_all().unwrap();
    let s = it.stats();
    assert_read(&samplers, &s);
    s
}

/// One epoch of 5000 elements through an autotuned map on `cores` cores of `machine`: its
/// final parallelism, and its trace.
fn tuned_on(machine: Machine, cores: usize) -> (usize, String) {
    let ds = Dataset::range(5000).map_parallel(
        "described",
        map_fn(|e: Example, _| Ok(e)),
        Parallelism::Autotune,
        true,
    );
    let op = run_on(machine, &ds, cores).ops.remove(0);
    assert_eq!(op.elements, 5000);
    let trace: Vec<String> = op.autotune_trace.iter().map(|d| d.note.clone()).collect();
    (op.parallelism, trace.join("\n"))
}

/// What holds of an autotuned op's row however busy the machine was: within the bounds, a
/// trace that starts where the op started and goes forward in time, and workers past the cores
/// only after a step there that the figures of its note allow.
pub(crate) fn assert_explained(op: &OpReport, cores: usize) {
    // 0 is inline (the consumer computing each element).
    assert!(op.parallelism <= 4 * cores, "{cores} cores: {op:?}");
    assert!(!op.autotune.is_empty(), "no autotune note: {op:?}");
    let trace = &op.autotune_trace;
    assert!(
        op.autotune_trace_dropped > 0
            || trace
                .first()
                .is_some_and(|d| d.note.contains("where a new op starts")),
        "{cores} cores: {trace:?}"
    );
    assert!(trace.windows(2).all(|w| w[0].at_s <= w[1].at_s));
    assert!(trace.last().unwrap().at_s <= op.wall_s);
    let past = format!("past the {cores} cores");
    for d in trace.iter().filter(|d| d.note.contains(&past)) {
        assert_step_past_the_cores_allowed(&d.note);
    }
    assert!(
        op.parallelism <= cores
            || op.autotune_trace_dropped > 0
            || trace.iter().any(|d| d.note.contains(&past)),
        "{cores} cores: {op:?}"
    );
}

/// The figure in `note` between `before` and `after`.
fn figure(note: &str, before: &str, after: &str) -> Option<f64> {
    let rest = &note[note.find(before)? + before.len()..];
    rest[..rest.find(after)?].parse().ok()
}

/// A step past the cores is allowed while the consumer waits (5 %), for workers blocked more
/// than 25 % of their busy time, or waiting more than 15 % of it for a core while other
/// processes keep half a core busy (the notes round to whole percents and tenths of cores).
fn assert_step_past_the_cores_allowed(note: &str) {
    let waited = figure(note, "the consumer waited ", "%").expect(note);
    let ran = figure(note, "the workers ran ", "%").expect(note);
    let blocked = figure(note, "were blocked ", "%").unwrap_or(100.0 - ran);
    let queued = figure(note, ", waited ", "% for a core").unwrap_or(0.0);
    let others = figure(note, "other processes kept ", " cores").unwrap_or(0.0);
    assert!(waited >= 5.0, "{note}");
    assert!(
        blocked >= 25.0 || (queued >= 15.0 && others >= 0.5),
        "{note}"
    );
}

#[test]
fn autotune_stays_within_cores_unless_its_workers_wait_and_explains_itself() {
    for cores in [1, 2, 3] {
        // Workers that run all their busy time: within the cores, which the notes say.
        let (p, trace) = tuned_on(CPU_BOUND, cores);
        assert!(p <= cores, "{cores} cores: {p}: {trace}");
        assert!(trace.starts_with("parallelism"), "{trace}");
        assert!(trace.contains("where a new op starts"), "{trace}");
        assert!(trace.contains("at the core limit"), "{trace}");
        assert!(!trace.contains("past the"), "{cores} cores: {trace}");
        // Workers blocked half their busy time: past the cores, twice as many (they fill the
        // cores), kept for the gain; the next step, which gains nothing, goes back.
        let blocked = Machine {
            ran: 0.5,
            helps: 2 * cores,
            ..CPU_BOUND
        };
        let (p, trace) = tuned_on(blocked, cores);
        assert_eq!(p, 2 * cores, "{cores} cores: {trace}");
        let trial = format!("on trial at {} past the {cores} cores", 2 * cores);
        assert!(trace.contains(&trial), "{cores} cores: {trace}");
        assert!(trace.contains("were blocked 50%"), "{trace}");
    }
    // The same on real threads, where the load decides: only what holds under any load.
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
        assert_eq!(s.ops[0].elements, 1500);
        assert_explained(&s.ops[0], cores);
        assert!(s.table().contains("verdict:"));
        // Every slot is back once the iterator is gone.
        drop(it);
        assert_eq!(exec.free_slots(), cores - 1);
    }
}

#[test]
fn autotune_takes_workers_past_the_cores_when_they_block_or_other_processes_hold_the_cores() {
    // Workers blocked half their busy time (as on reads) leave their cores idle half of it:
    // four workers fill the two cores, and are kept for the gain; eight gain nothing more and
    // go back.
    let blocked = Machine {
        ran: 0.5,
        helps: 4,
        ..CPU_BOUND
    };
    let (p, trace) = tuned_on(blocked, 2);
    assert_eq!(p, 4, "{trace}");
    for step in [
        "on trial at 4 past the 2 cores",
        "waited 0% for a core and were blocked 50%",
        "tried 2 -> 4: throughput 2.00x",
        "on trial at 8 past the 2 cores",
        "tried 4 -> 8: throughput 1.00x",
    ] {
        assert!(trace.contains(step), "{step}: {trace}");
    }
    assert!(
        trace.contains("kept") && trace.contains("reverted"),
        "{trace}"
    );
    // Workers that wait for cores this process's own threads hold (another stage's workers,
    // threads set by hand) are short of a core, not of workers: more would take from the
    // process itself, so AUTOTUNE stays within the cores and says why.
    let own = Machine {
        ran: 0.6,
        queued: 0.4,
        helps: 4,
        ..CPU_BOUND
    };
    let (p, trace) = tuned_on(own, 2);
    assert_eq!(p, 2, "{trace}");
    assert!(!trace.contains("past the"), "{trace}");
    assert!(
        trace.contains("at the core limit (2)")
            && trace.contains("waited 40% for a core")
            && trace.contains("other processes kept 0.0 cores busy"),
        "{trace}"
    );
    // Workers that wait for cores other processes hold: the kernel shares the cores per
    // runnable thread, so more workers than cores (2 / 0.6 of them) get a larger share, kept
    // for the gain.
    let shared = Machine { others: 1.0, ..own };
    let (p, trace) = tuned_on(shared, 2);
    assert_eq!(p, 4, "{trace}");
    for step in [
        "on trial at 4 past the 2 cores",
        "waited 40% for a core",
        "other processes kept 1.0 cores busy",
        "tried 2 -> 4: throughput 2.00x",
    ] {
        assert!(trace.contains(step), "{step}: {trace}");
    }
    // On real threads that sleep (as on a read): whatever AUTOTUNE made of it under the load
    // there was, it is explained; and the real machine's readings show the workers' busy time
    // mostly off a core (a sleep is never run, however busy the cores are).
    let sleepy = map_fn(|e: Example, _| {
        std::thread::sleep(Duration::from_millis(2));
        Ok(e)
    });
    let ds = Dataset::range(2000).map_parallel("sleepy", sleepy, Parallelism::Autotune, true);
    let exec = Executor::new(ExecOptions {
        cores: 2,
        ..ExecOptions::default()
    });
    let mut it = exec.iter(&ds, 0).unwrap();
    assert_eq!(it.collect_all().unwrap().len(), 2000);
    let op = it.stats().ops.remove(0);
    assert_explained(&op, 2);
    let read = ProcSampler.read(exec.op_stats(&op.op).counters());
    if cfg!(target_os = "linux") {
        let w = read.workers;
        assert!(w.wall > 0 && w.cpu * 2 < w.wall, "{read:?}");
        assert!(read.process_cpu_ns.is_some() && read.machine_cpu_ns.is_some());
    }
}

#[test]
fn two_autotuned_ops_share_the_cores() {
    let two = |n: u64, f: fn(u64) -> stokehold_core::MapFn| {
        Dataset::range(n)
            .map_parallel("a", f(200), Parallelism::Autotune, true)
            .map_parallel("b", f(200), Parallelism::Autotune, true)
    };
    // Both ops' consumers wait for workers that run all their busy time: the first op to start
    // takes the core slot, the other keeps one worker and says that the slot is held.
    let s = run_on(CPU_BOUND, &two(2000, |_| map_fn(|e: Example, _| Ok(e))), 2);
    assert_eq!(s.ops.len(), 2, "{s:?}");
    let total: usize = s.ops.iter().map(|o| o.parallelism).sum();
    // Each op always has one worker; the extra slots are the cores beyond the first.
    assert_eq!(total, 3, "{}", s.table());
    assert!(
        s.ops
            .iter()
            .any(|o| o.autotune.contains("every core slot is held by other ops")),
        "{}",
        s.table()
    );
    // On real threads: within the cores but for steps past them that the load allowed.
    let exec = Executor::new(ExecOptions {
        cores: 2,
        ..ExecOptions::default()
    });
    let mut it = exec.iter(&two(400, busy), 0).unwrap();
    assert_eq!(it.collect_all().unwrap().len(), 400);
    let s = it.stats();
    assert_eq!(s.ops.len(), 2, "{s:?}");
    let past: usize = s.ops.iter().map(|o| o.parallelism.saturating_sub(2)).sum();
    let total: usize = s.ops.iter().map(|o| o.parallelism).sum();
    assert!(total <= 3 + past, "{}", s.table());
    for op in &s.ops {
        assert_explained(op, 2);
    }
}

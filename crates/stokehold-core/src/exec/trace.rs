//! A window of pipeline activity as a Chrome trace (`chrome://tracing`, Perfetto).
//!
//! When tracing is on ([`ExecOptions::trace_events`](super::ExecOptions)), workers record one
//! complete event ("ph": "X") per element they produce, and the consumer one per wait. The
//! recorder keeps the most recent `capacity` events (a ring), so a long run costs bounded memory
//! and the export shows the latest window.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Instant;

use serde_json::json;

/// One span of activity.
#[derive(Clone, Debug)]
struct Event {
    name: &'static str,
    op: String,
    tid: u64,
    /// The recording thread's name (`stokehold-worker`, `stokehold-prefetch`, the consumer's).
    thread: String,
    start_us: u64,
    dur_us: u64,
}

/// A bounded recorder of spans.
#[derive(Debug)]
pub struct Trace {
    capacity: usize,
    origin: Instant,
    events: Mutex<VecDeque<Event>>,
}

thread_local! {
    static TID: u64 = thread_id();
    static NAME: String = std::thread::current().name().unwrap_or("consumer").to_string();
}

fn thread_id() -> u64 {
    // The numeric id behind ThreadId is unstable API; hash its Debug form, which is stable enough
    // to tell threads apart in a trace.
    let s = format!("{:?}", std::thread::current().id());
    s.bytes()
        .filter(u8::is_ascii_digit)
        .fold(0u64, |a, b| a * 10 + u64::from(b - b'0'))
}

impl Trace {
    /// A recorder of the last `capacity` events (0: off).
    pub fn new(capacity: usize) -> Self {
        Trace {
            capacity,
            origin: Instant::now(),
            events: Mutex::new(VecDeque::new()),
        }
    }

    /// True when events are recorded.
    pub fn enabled(&self) -> bool {
        self.capacity > 0
    }

    /// Records a span `name` of `op` that started at `start` and ends now.
    pub fn span(&self, name: &'static str, op: &str, start: Instant) {
        if self.capacity == 0 {
            return;
        }
        let ev = Event {
            name,
            op: op.to_string(),
            tid: TID.with(|t| *t),
            thread: NAME.with(Clone::clone),
            start_us: start.saturating_duration_since(self.origin).as_micros() as u64,
            dur_us: start.elapsed().as_micros() as u64,
        };
        let mut q = self.events.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() == self.capacity {
            q.pop_front();
        }
        q.push_back(ev);
    }

    /// The recorded spans: (name, start and duration in us, op).
    pub(crate) fn spans(&self) -> Vec<(&'static str, u64, u64, String)> {
        let q = self.events.lock().unwrap_or_else(|e| e.into_inner());
        q.iter()
            .map(|e| (e.name, e.start_us, e.dur_us, e.op.clone()))
            .collect()
    }

    /// The recorded window as Chrome trace JSON (`{"traceEvents": [...]}`), with a
    /// `thread_name` metadata event per thread so the viewer labels each track.
    pub fn to_chrome_json(&self) -> String {
        let q = self.events.lock().unwrap_or_else(|e| e.into_inner());
        let mut threads: Vec<(u64, &str)> = q.iter().map(|e| (e.tid, e.thread.as_str())).collect();
        threads.sort_unstable();
        threads.dedup_by_key(|t| t.0);
        let names = threads.into_iter().map(|(tid, name)| {
            json!({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid,
                   "args": {"name": format!("{name} ({tid})")}})
        });
        let spans = q.iter().map(|e| {
            json!({"name": format!("{} {}", e.op, e.name), "cat": e.name, "ph": "X",
                   "ts": e.start_us, "dur": e.dur_us, "pid": 1, "tid": e.tid,
                   "args": {"op": e.op}})
        });
        let events: Vec<_> = names.chain(spans).collect();
        json!({ "traceEvents": events, "displayTimeUnit": "ms" }).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_latest_window() {
        let t = Trace::new(2);
        for name in ["a", "b", "c"] {
            t.span(name, "op", Instant::now());
        }
        let v: serde_json::Value = serde_json::from_str(&t.to_chrome_json()).unwrap();
        let names: Vec<_> = v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X")
            .map(|e| e["cat"].clone())
            .collect();
        assert_eq!(names, vec!["b", "c"]);
    }

    #[test]
    fn names_its_threads() {
        let t = std::sync::Arc::new(Trace::new(8));
        let t2 = t.clone();
        std::thread::Builder::new()
            .name("stokehold-worker".into())
            .spawn(move || t2.span("element", "map[f]", Instant::now()))
            .unwrap()
            .join()
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&t.to_chrome_json()).unwrap();
        let meta: Vec<_> = v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
            .collect();
        assert_eq!(meta.len(), 1);
        let name = meta[0]["args"]["name"].as_str().unwrap();
        assert!(name.starts_with("stokehold-worker ("), "{name}");
    }
}

//! Stats as OpenMetrics text (what Prometheus scrapes): one family per figure, a `stage` label
//! per row, the caller's labels (a job's `rank`, say) on every sample.
//!
//! Names follow Prometheus' conventions: a `stokehold_` prefix, base units (seconds, bytes),
//! `_total` for counters, `_ratio` for fractions; quantiles as summaries.

use std::fmt::Write;

use super::histogram::Percentiles;
use super::stats::{OpReport, StatsReport};

/// A label value escaped as the text format asks (`\`, `"` and newlines).
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// `{a="x",b="y"}` of `labels` (empty: nothing).
fn label_set(labels: &[(&str, &str)]) -> String {
    if labels.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// One row of a summary: its labels, quantiles and sum.
type SummaryRow<'a> = (&'a [(&'a str, &'a str)], Percentiles, f64);

struct Writer<'a> {
    out: String,
    common: &'a [(&'a str, &'a str)],
}

impl Writer<'_> {
    fn family(&mut self, name: &str, kind: &str, unit: Option<&str>, help: &str) {
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
        if let Some(u) = unit {
            let _ = writeln!(self.out, "# UNIT {name} {u}");
        }
        let _ = writeln!(self.out, "# HELP {name} {help}");
    }

    fn sample(&mut self, name: &str, extra: &[(&str, &str)], value: f64) {
        let labels: Vec<(&str, &str)> = self.common.iter().chain(extra).copied().collect();
        let _ = writeln!(self.out, "{name}{} {value}", label_set(&labels));
    }

    /// A summary family: its quantiles, count and (estimated) sum, per row.
    fn summary(&mut self, name: &str, help: &str, rows: &[SummaryRow<'_>]) {
        if rows.is_empty() {
            return;
        }
        self.family(name, "summary", Some("seconds"), help);
        for (labels, p, sum) in rows {
            for (q, v) in [("0.5", p.p50_s), ("0.9", p.p90_s), ("0.99", p.p99_s)] {
                let with_q: Vec<(&str, &str)> =
                    labels.iter().copied().chain([("quantile", q)]).collect();
                self.sample(name, &with_q, v);
            }
            self.sample(&format!("{name}_count"), labels, p.count as f64);
            self.sample(&format!("{name}_sum"), labels, *sum);
        }
    }
}

impl StatsReport {
    /// The report as OpenMetrics text, ending in `# EOF`; `labels` go on every sample.
    pub fn openmetrics(&self, labels: &[(&str, &str)]) -> String {
        let mut w = Writer {
            out: String::new(),
            common: labels,
        };
        let stage = |o: &OpReport| o.op.clone();
        let names: Vec<String> = self.ops.iter().map(stage).collect();
        let rows: Vec<[(&str, &str); 1]> = names.iter().map(|n| [("stage", n.as_str())]).collect();
        type Get = fn(&OpReport) -> f64;
        let families: [(&str, &str, Option<&str>, &str, Get); 8] = [
            (
                "stokehold_stage_elements",
                "counter",
                None,
                "Elements the stage handed on.",
                |o| o.elements as f64,
            ),
            (
                "stokehold_stage_busy_seconds",
                "counter",
                Some("seconds"),
                "Worker time the stage spent producing elements.",
                |o| o.busy_s,
            ),
            (
                "stokehold_stage_consumer_wait_seconds",
                "counter",
                Some("seconds"),
                "Time the stage's consumer waited for it.",
                |o| o.consumer_wait_s,
            ),
            (
                "stokehold_stage_input_wait_seconds",
                "counter",
                Some("seconds"),
                "Time the stage's workers waited for their input.",
                |o| o.input_wait_s,
            ),
            (
                "stokehold_stage_busy_ratio",
                "gauge",
                Some("ratio"),
                "Busy share of each of the stage's threads since it started.",
                |o| o.busy_per_thread,
            ),
            (
                "stokehold_stage_queue_fill_ratio",
                "gauge",
                Some("ratio"),
                "Mean fill of the stage's buffer, as a share of its capacity.",
                |o| o.queue_fill,
            ),
            (
                "stokehold_stage_parallelism",
                "gauge",
                None,
                "Worker threads of the stage now (0: inline).",
                |o| o.parallelism as f64,
            ),
            (
                "stokehold_stage_capacity",
                "gauge",
                None,
                "Elements the stage's buffer may hold now.",
                |o| o.capacity as f64,
            ),
        ];
        for (name, kind, unit, help, get) in families {
            w.family(name, kind, unit, help);
            let sample = if kind == "counter" {
                format!("{name}_total")
            } else {
                name.to_string()
            };
            for (o, l) in self.ops.iter().zip(&rows) {
                w.sample(&sample, l, get(o));
            }
        }
        let element: Vec<_> = self
            .ops
            .iter()
            .zip(&rows)
            .map(|(o, l)| (&l[..], o.element_time, o.busy_s))
            .collect();
        w.summary(
            "stokehold_stage_element_seconds",
            "Worker time per element (a batch's row: per batch).",
            &element,
        );
        let waits: Vec<_> = self
            .ops
            .iter()
            .zip(&rows)
            .map(|(o, l)| (&l[..], o.consumer_wait, o.consumer_wait_s))
            .collect();
        w.summary(
            "stokehold_stage_wait_seconds",
            "The consumer's wait per element it took from the stage.",
            &waits,
        );
        if let Some(st) = &self.steps {
            w.summary(
                "stokehold_step_next_seconds",
                "Time the training loop spent in each next().",
                &[(&[], st.next, st.next_total_s)],
            );
            w.family(
                "stokehold_step_input_ratio",
                "gauge",
                Some("ratio"),
                "Share of the training loop's time spent waiting in next().",
            );
            w.sample("stokehold_step_input_ratio", &[], st.input_share);
        }
        for (name, help, v) in [
            (
                "stokehold_memory_used_bytes",
                "Bytes held by buffers now.",
                self.memory_used,
            ),
            (
                "stokehold_memory_peak_bytes",
                "Most bytes held at once.",
                self.memory_peak,
            ),
            (
                "stokehold_memory_budget_bytes",
                "The memory budget.",
                self.memory_budget,
            ),
        ] {
            w.family(name, "gauge", Some("bytes"), help);
            w.sample(name, &[], v as f64);
        }
        w.out.push_str("# EOF\n");
        w.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::{Budget, OpStats};

    #[test]
    fn every_stage_is_a_labelled_sample_and_label_values_are_escaped() {
        let s = OpStats::new("map[\"f\"\\x]\n".into());
        s.produced(10, 0);
        let r = StatsReport::new(vec![s.report()], &Budget::new(1 << 20), 2);
        let text = r.openmetrics(&[("rank", "3")]);
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert!(
            text.contains(
                "stokehold_stage_elements_total{rank=\"3\",stage=\"map[\\\"f\\\"\\\\x]\\n\"} 1\n"
            ),
            "{text}"
        );
        assert!(text.contains("# TYPE stokehold_stage_element_seconds summary"));
        assert!(text.contains("stokehold_memory_budget_bytes{rank=\"3\"} 1048576\n"));
        assert!(
            !text.contains("stokehold_step_"),
            "no loop steps recorded: {text}"
        );
    }
}

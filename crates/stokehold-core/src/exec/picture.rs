//! A picture of a pipeline's stats: a self-contained HTML page with SVG (no script, no fetch),
//! the stages as boxes in the order data flows (throughput, busy and wait, queue fill,
//! parallelism, AUTOTUNE's last decision), the training loop after them, the bottleneck the
//! verdict names outlined in red and marked, and, from a recorded window
//! (`with_options(trace_events=N)`), each stage's throughput and the consumer's wait over time.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::stats::{human_secs, OpReport, StatsReport};
use super::trace::Trace;

/// Bins of a timeline.
const BINS: usize = 60;
const BOX_W: usize = 250;
const BOX_H: usize = 196;
/// Characters of a stage's name per line of its box, and lines.
const NAME_W: usize = 34;
const NAME_LINES: usize = 3;
const GAP: usize = 50;
/// The bottleneck's colour, and its mark's text.
pub const BOTTLENECK_RED: &str = "#d62728";
/// The text on the bottleneck's box.
pub const BOTTLENECK_MARK: &str = "BOTTLENECK";

/// One op's activity over a recorded window, in equal bins.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The op's label.
    pub op: String,
    /// Elements finished per second, per bin.
    pub elements_per_s: Vec<f64>,
    /// Share of the bin its consumer spent waiting for it.
    pub wait_share: Vec<f64>,
}

/// The recorded window cut into `BINS` bins: its length in seconds and each op's series.
pub struct Timeline {
    /// Seconds the window covers.
    pub span_s: f64,
    /// One series per op, by label.
    pub series: Vec<Series>,
}

impl Trace {
    /// Each op's throughput and its consumer's wait over the recorded window (`None`: nothing
    /// recorded).
    pub fn timeline(&self) -> Option<Timeline> {
        let spans = self.spans();
        let start = spans.iter().map(|s| s.1).min()?;
        let end = spans.iter().map(|s| s.1 + s.2).max()?;
        let width = ((end - start) as f64 / BINS as f64).max(1.0); // us
        let mut by_op: BTreeMap<String, Series> = BTreeMap::new();
        for (name, at, dur, op) in spans {
            let s = by_op.entry(op.clone()).or_insert_with(|| Series {
                op,
                elements_per_s: vec![0.0; BINS],
                wait_share: vec![0.0; BINS],
            });
            match name {
                "element" => {
                    let bin = (((at + dur - start) as f64 / width) as usize).min(BINS - 1);
                    s.elements_per_s[bin] += 1e6 / width;
                }
                "wait" => {
                    // Spread the wait over the bins it covers.
                    let (mut t, stop) = ((at - start) as f64, (at + dur - start) as f64);
                    while t < stop {
                        let bin = ((t / width) as usize).min(BINS - 1);
                        let edge = ((bin + 1) as f64 * width).min(stop);
                        s.wait_share[bin] += (edge - t).max(0.0) / width;
                        if edge <= t {
                            break;
                        }
                        t = edge;
                    }
                }
                _ => {}
            }
        }
        Some(Timeline {
            span_s: (end - start) as f64 / 1e6,
            series: by_op.into_values().collect(),
        })
    }
}

/// Text for HTML.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `s` cut to `n` characters (with an ellipsis).
fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    s.chars().take(n - 1).collect::<String>() + "…"
}

/// A box's lines of figures, from `y` down, 20 px apart.
fn figures(out: &mut String, x: usize, y: usize, lines: &[String]) {
    for (k, l) in lines.iter().enumerate() {
        let _ = write!(
            out,
            r##"<text x="{}" y="{}" font-size="12" fill="#333">{}</text>"##,
            x + 10,
            y + 20 * k,
            esc(l)
        );
    }
}

fn stage_box(out: &mut String, x: usize, o: &OpReport, bottleneck: bool) {
    let (stroke, width) = if bottleneck {
        (BOTTLENECK_RED, 4)
    } else {
        ("#555", 1)
    };
    let _ = write!(
        out,
        r##"<g class="stage{}"><title>{}</title><rect x="{x}" y="40" width="{BOX_W}" height="{BOX_H}" rx="8" fill="#fff" stroke="{stroke}" stroke-width="{width}"/>"##,
        if bottleneck { " bottleneck" } else { "" },
        esc(&o.op)
    );
    let lines = [
        format!(
            "{:.0} elem/s  {:.1} MB/s",
            o.elements_per_s,
            o.bytes_per_s / 1e6
        ),
        format!(
            "busy {:.0}%  parallelism {}",
            o.busy_per_thread * 100.0,
            o.parallelism
        ),
        format!(
            "element p50 {}  p99 {}",
            human_secs(o.element_time.p50_s),
            human_secs(o.element_time.p99_s)
        ),
        format!(
            "consumer waited {:.2} s  queue {:.0}%",
            o.consumer_wait_s,
            o.queue_fill * 100.0
        ),
        cut(&o.autotune, 38),
    ];
    // The name whole where it fits (the bottleneck's is what the reader looks for).
    let chars: Vec<char> = o.op.chars().collect();
    let mut name: Vec<String> = chars.chunks(NAME_W).map(|c| c.iter().collect()).collect();
    if name.len() > NAME_LINES {
        name.truncate(NAME_LINES);
        name[NAME_LINES - 1] = cut(&(name[NAME_LINES - 1].clone() + "…"), NAME_W);
    }
    for (k, l) in name.iter().enumerate() {
        let _ = write!(
            out,
            r#"<text x="{}" y="{}" font-weight="bold" font-size="12">{}</text>"#,
            x + 10,
            60 + 16 * k,
            esc(l)
        );
    }
    figures(out, x, 66 + 16 * NAME_LINES, &lines);
    if bottleneck {
        let _ = write!(
            out,
            r#"<text x="{}" y="30" font-weight="bold" font-size="15" fill="{BOTTLENECK_RED}">{BOTTLENECK_MARK}</text>"#,
            x + 10
        );
    }
    out.push_str("</g>");
}

/// A line chart of `rows` (label, values per bin) over `span_s` seconds.
fn chart(out: &mut String, title: &str, unit: &str, span_s: f64, rows: &[(String, Vec<f64>)]) {
    const W: f64 = 700.0;
    const H: f64 = 180.0;
    let top = rows
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(0.0f64, f64::max)
        .max(1e-9);
    let colours = [
        "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2",
    ];
    let _ = write!(
        out,
        r##"<h3>{}</h3><svg width="{}" height="{}" xmlns="http://www.w3.org/2000/svg"><rect x="50" y="10" width="{W}" height="{H}" fill="#fafafa" stroke="#999"/><text x="4" y="18" font-size="11">{}</text><text x="4" y="{}" font-size="11">0</text><text x="{}" y="{}" font-size="11">{:.2} s</text>"##,
        esc(title),
        W + 260.0,
        H + 40.0,
        esc(&format!("{top:.3} {unit}")),
        H + 10.0,
        W + 20.0,
        H + 26.0,
        span_s
    );
    for (k, (label, v)) in rows.iter().enumerate() {
        let c = colours[k % colours.len()];
        let n = v.len().max(2) - 1;
        let pts: Vec<String> = v
            .iter()
            .enumerate()
            .map(|(i, y)| {
                format!(
                    "{:.1},{:.1}",
                    50.0 + W * i as f64 / n as f64,
                    10.0 + H - H * y / top
                )
            })
            .collect();
        let _ = write!(
            out,
            r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/><text x="{}" y="{}" font-size="11" fill="{c}">{}</text>"#,
            pts.join(" "),
            W + 60.0,
            24.0 + 16.0 * k as f64,
            esc(&cut(label, 34))
        );
    }
    out.push_str("</svg>");
}

impl StatsReport {
    /// The picture as a self-contained HTML page (see the module docs); `timeline` from the
    /// recorded window, if any.
    pub fn html(&self, timeline: Option<&Timeline>) -> String {
        let n = self.ops.len();
        let width = 20 + (n + 1) * (BOX_W + GAP);
        let mut svg = format!(
            r##"<svg width="{width}" height="{}" xmlns="http://www.w3.org/2000/svg" font-family="sans-serif"><defs><marker id="arrow" markerWidth="10" markerHeight="10" refX="9" refY="5" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>"##,
            BOX_H + 60
        );
        for (k, o) in self.ops.iter().enumerate() {
            let x = 20 + k * (BOX_W + GAP);
            stage_box(
                &mut svg,
                x,
                o,
                self.bottleneck.as_deref() == Some(o.op.as_str()),
            );
            let _ = write!(
                svg,
                r##"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#555" stroke-width="2" marker-end="url(#arrow)"/>"##,
                x + BOX_W,
                40 + BOX_H / 2,
                x + BOX_W + GAP - 2,
                40 + BOX_H / 2
            );
        }
        // The training loop, last.
        let x = 20 + n * (BOX_W + GAP);
        let loop_lines = match &self.steps {
            Some(st) => vec![
                format!("{} steps", st.steps),
                format!("waits in next() {:.0}%", st.input_share * 100.0),
                format!(
                    "next() p50 {}  p99 {}",
                    human_secs(st.next.p50_s),
                    human_secs(st.next.p99_s)
                ),
                format!("between calls p50 {}", human_secs(st.between.p50_s)),
            ],
            None => vec!["no steps recorded".to_string()],
        };
        let _ = write!(
            svg,
            r##"<g class="loop"><rect x="{x}" y="40" width="{BOX_W}" height="{BOX_H}" rx="8" fill="#f3f3ff" stroke="#555"/><text x="{}" y="62" font-weight="bold" font-size="13">training loop</text>"##,
            x + 10
        );
        figures(&mut svg, x, 86, &loop_lines);
        svg.push_str("</g></svg>");
        let mut charts = String::new();
        if let Some(t) = timeline {
            let rows = |f: fn(&super::picture::Series) -> &Vec<f64>| -> Vec<(String, Vec<f64>)> {
                t.series
                    .iter()
                    .filter(|s| f(s).iter().any(|v| *v > 0.0))
                    .map(|s| (s.op.clone(), f(s).clone()))
                    .collect()
            };
            chart(
                &mut charts,
                "Throughput over the recorded window",
                "elem/s",
                t.span_s,
                &rows(|s| &s.elements_per_s),
            );
            chart(
                &mut charts,
                "The consumer's wait over the recorded window",
                "of the time",
                t.span_s,
                &rows(|s| &s.wait_share),
            );
        }
        format!(
            r#"<!DOCTYPE html><html><head><meta charset="utf-8"><title>stokehold stats</title><style>body{{font-family:sans-serif;margin:16px}} .verdict{{font-size:15px;max-width:1100px}} pre{{font-size:12px}}</style></head><body><h2>stokehold pipeline</h2><p class="verdict"><b>verdict:</b> {}</p>{svg}<p>memory: {:.1} MiB used, {:.1} MiB peak, budget {:.1} MiB; cores {}</p>{charts}<pre>{}</pre></body></html>"#,
            esc(&self.verdict),
            self.memory_used as f64 / 1048576.0,
            self.memory_peak as f64 / 1048576.0,
            self.memory_budget as f64 / 1048576.0,
            self.cores,
            esc(&self.table())
        )
    }
}

//! `stokehold top PID|URL...`: the live stats of running pipelines, refreshed in the terminal.
//!
//! A pipeline shows its stats only when its process asks (`stokehold.serve_stats(ds)`, Python's
//! `stokehold.monitor`): a read-only HTTP endpoint on loopback, whose address the process
//! leaves in a per-user folder under its pid. `top` reads `/stats.json` from each endpoint (a
//! pid: every endpoint that process serves; several: the ranks of a job) and prints each one's
//! table, the training loop's step view and the verdict, then the ranks side by side.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Deserialize;
use stokehold_core::exec::stats::human_secs;
use stokehold_core::exec::StatsReport;

/// Options of `stokehold top`.
#[derive(clap::Args)]
pub struct Args {
    /// Pids of processes serving their stats, or endpoint URLs (http://127.0.0.1:PORT).
    #[arg(required = true, value_name = "PID|URL")]
    targets: Vec<String>,
    /// Seconds between refreshes.
    #[arg(long, default_value_t = 2.0)]
    interval: f64,
    /// Frames to show, then exit (0: until Ctrl-C or every endpoint is gone).
    #[arg(long, default_value_t = 0)]
    count: u64,
    /// Write each endpoint's picture (a self-contained HTML page: the stages as boxes, the
    /// bottleneck marked) to this file (several endpoints: FILE-0.html, FILE-1.html, ...) and
    /// exit.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

/// What an endpoint's `/stats.json` holds besides the pipeline's stats: the server's labels.
#[derive(Deserialize)]
struct Served {
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    pid: u32,
}

/// The folder where serving processes leave their addresses (Python's
/// `stokehold.monitor.registry_dir`).
fn registry_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("STOKEHOLD_STATS_DIR") {
        return d.into();
    }
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    std::env::temp_dir().join(format!("stokehold-stats-{uid}"))
}

/// The endpoints `targets` name: URLs as given, pids through the registry folder.
fn endpoints(targets: &[String]) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for t in targets {
        if t.starts_with("http://") {
            out.push(t.trim_end_matches('/').to_string());
            continue;
        }
        let pid: u32 = t.parse().with_context(|| {
            format!("{t:?} is neither a pid nor an http:// URL of a stats endpoint")
        })?;
        let dir = registry_dir();
        let mut found: Vec<(String, String)> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let owner = name.split('-').next()?.parse::<u32>().ok()?;
                (owner == pid && !name.ends_with(".tmp"))
                    .then(|| Some((name, std::fs::read_to_string(e.path()).ok()?)))?
            })
            .collect();
        if found.is_empty() {
            bail!(
                "process {pid} serves no stats (none listed in {}): start it with \
                 stokehold.serve_stats(ds), or give its URL",
                dir.display()
            );
        }
        found.sort();
        out.extend(found.into_iter().map(|(_, url)| url.trim().to_string()));
    }
    Ok(out)
}

/// `GET path` from `url` (http://host:port), the body of a 200 answer.
fn get(url: &str, path: &str) -> anyhow::Result<String> {
    let host = url
        .strip_prefix("http://")
        .context("only http:// endpoints")?;
    let addr = host
        .to_socket_addrs()
        .with_context(|| format!("resolving {host}"))?
        .next()
        .with_context(|| format!("{host} has no address"))?;
    if !addr.ip().is_loopback() {
        bail!("{url}: stats endpoints are on loopback only");
    }
    let timeout = Duration::from_secs(5);
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .with_context(|| format!("{url}{path}: not an HTTP answer"))?;
    let status = head.lines().next().unwrap_or("");
    if status.split_whitespace().nth(1) != Some("200") {
        bail!("{url}{path}: {status}");
    }
    Ok(body.to_string())
}

/// The stats one endpoint serves (`Err`: why there are none).
fn fetch(url: &str) -> anyhow::Result<(Served, Result<StatsReport, String>)> {
    let body = get(url, "/stats.json")?;
    let v: serde_json::Value =
        serde_json::from_str(&body).with_context(|| format!("{url}: not stats"))?;
    let who: Served = serde_json::from_value(v.clone())?;
    // Before a parallel stage ran: no figures, only the server's word on why.
    let report = serde_json::from_value::<StatsReport>(v.clone()).map_err(|e| {
        v["verdict"]
            .as_str()
            .map_or(format!("not stats ({e})"), str::to_string)
    });
    Ok((who, report))
}

/// Writes each endpoint's picture (see `Args::html`).
fn pictures(urls: &[String], path: &std::path::Path) -> anyhow::Result<()> {
    for (k, url) in urls.iter().enumerate() {
        let (_, report) = fetch(url)?;
        let report = report.map_err(|why| anyhow::anyhow!("{url}: {why}"))?;
        let out = if urls.len() == 1 {
            path.to_path_buf()
        } else {
            let stem = path.with_extension("");
            PathBuf::from(format!("{}-{k}.html", stem.display()))
        };
        std::fs::write(&out, report.html(None))
            .with_context(|| format!("writing {}", out.display()))?;
        println!("{url}: {}", out.display());
    }
    Ok(())
}

/// One frame: each endpoint's table, then the ranks side by side.
fn frame(urls: &[String]) -> (String, usize) {
    let mut out = String::new();
    let mut live = 0;
    let mut rows = Vec::new();
    for url in urls {
        let (s, report) = match fetch(url) {
            Ok(s) => s,
            Err(e) => {
                out += &format!("== {url}: {e:#}\n\n");
                continue;
            }
        };
        live += 1;
        let labels: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let who = if labels.is_empty() {
            format!("pid {}", s.pid)
        } else {
            format!("{} (pid {})", labels.join(" "), s.pid)
        };
        out += &format!("== {who}  {url}\n");
        match &report {
            Ok(r) => {
                out += &r.table();
                let share = r.steps.map(|st| (st.input_share, st.next.p50_s));
                rows.push((who, share, r.verdict.clone()));
            }
            Err(why) => out += &format!("verdict: {why}\n"),
        }
        out.push('\n');
    }
    if rows.len() > 1 {
        out += "ranks: waiting in next() (share of the loop's time, median next())\n";
        for (who, share, verdict) in &rows {
            let waits = share.map_or("no steps yet".to_string(), |(s, p50)| {
                format!("{:>5.1}%  {:>9}", 100.0 * s, human_secs(p50))
            });
            let short: String = verdict.chars().take(60).collect();
            out += &format!("  {who:<28} {waits:<18} {short}\n");
        }
        let slowest = rows
            .iter()
            .filter_map(|(w, s, _)| s.map(|(share, _)| (w, share)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((who, share)) = slowest {
            out += &format!(
                "the rank that waits most for input: {who} ({:.1}%)\n",
                100.0 * share
            );
        }
    }
    (out, live)
}

/// Runs `stokehold top`.
pub fn run(args: Args) -> anyhow::Result<()> {
    if !(args.interval.is_finite() && args.interval > 0.0) {
        bail!("--interval must be a positive number of seconds");
    }
    let urls = endpoints(&args.targets)?;
    if let Some(path) = &args.html {
        return pictures(&urls, path);
    }
    let tty = std::io::stdout().is_terminal();
    let mut shown = 0u64;
    loop {
        let (text, live) = frame(&urls);
        let mut out = std::io::stdout().lock();
        if tty {
            write!(out, "\x1b[H\x1b[2J")?; // home, clear: a refreshing view
        }
        write!(out, "{text}")?;
        out.flush()?;
        drop(out);
        shown += 1;
        if live == 0 {
            bail!("no endpoint answers (the processes ended, or closed their servers)");
        }
        if args.count > 0 && shown >= args.count {
            return Ok(());
        }
        std::thread::sleep(Duration::from_secs_f64(args.interval));
    }
}

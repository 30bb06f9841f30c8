//! The demo's printed table: memory, epochs, batches, boundaries, and one verdict per target.

use std::io::{self, Write};

use super::report::{cache_target_bytes, DemoReport, STALL_TARGET_MS};

const MIB: f64 = 1024.0 * 1024.0;

fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / MIB)
}

fn mib_num(bytes: f64) -> String {
    format!("{:.1}", bytes / MIB)
}

/// Milliseconds to 3 decimals, without the "-0.000" that tiny negative figures would print.
fn ms3(v: f64) -> String {
    let v = if v.abs() < 0.0005 { 0.0 } else { v };
    format!("{v:.3}")
}

fn opt_ms(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".into(), |v| format!("{} ms", ms3(v)))
}

fn verdict(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "met",
        Some(false) => "NOT MET",
        None => "not measured",
    }
}

/// Writes the report as a table.
pub fn write_table(r: &DemoReport, out: &mut dyn Write) -> io::Result<()> {
    let o = &r.options;
    writeln!(
        out,
        "stokehold demo: {} clips of {}-{} s at {} Hz int16, {} epochs, batch {}, crop {} s, \
         step {} ms, prefetch {}, seed {}",
        o.clips,
        o.min_seconds,
        o.max_seconds,
        o.sample_rate,
        o.epochs,
        o.batch_size,
        o.crop_seconds,
        o.step_ms,
        o.prefetch,
        o.seed
    )?;
    writeln!(out, "pipeline: {}", r.pipeline)?;
    writeln!(out)?;
    writeln!(
        out,
        "{:<50} {:>14} {:>10} {:>8}",
        "memory", "bytes", "MiB", "x raw"
    )?;
    let raw = r.raw_bytes as f64;
    let row = |out: &mut dyn Write, label: &str, bytes: String, mib: String, ratio: String| {
        writeln!(out, "  {label:<48} {bytes:>14} {mib:>10} {ratio:>8}")
    };
    row(
        out,
        "raw samples",
        r.raw_bytes.to_string(),
        mib_num(raw),
        "1.000".into(),
    )?;
    match r.cache_rss_growth_bytes {
        Some(g) => row(
            out,
            "cache RSS growth (ragged arena + splits)",
            g.to_string(),
            mib_num(g as f64),
            format!("{:.3}", r.cache_ratio.unwrap_or(f64::NAN)),
        )?,
        None => row(
            out,
            "cache RSS growth (no /proc here)",
            "n/a".into(),
            "n/a".into(),
            "n/a".into(),
        )?,
    }
    row(
        out,
        &format!(
            "padded matrix (computed: {} x {} x 2 B)",
            o.clips, r.max_clip_samples
        ),
        r.padded_bytes.to_string(),
        mib_num(r.padded_bytes as f64),
        format!("{:.3}", r.padded_ratio),
    )?;
    writeln!(out, "  cache built in {:.2} s", r.cache_build_seconds)?;
    writeln!(out)?;

    writeln!(
        out,
        "{:<8} {:>10} {:>9}   first-batch checksum",
        "epoch", "time (s)", "batches"
    )?;
    for (e, secs) in r.epoch_seconds.iter().enumerate() {
        let sum = r
            .first_batch_checksums
            .get(e)
            .map_or("n/a".into(), |s| format!("{s:016x}"));
        writeln!(
            out,
            "  {:<6} {secs:>10.3} {:>9}   {sum}",
            e + 1,
            r.batches_per_epoch
        )?;
    }
    writeln!(out)?;

    writeln!(out, "batches")?;
    writeln!(
        out,
        "  steady batch wait (median, step excluded)  {}",
        opt_ms(r.steady_wait_ms)
    )?;
    writeln!(
        out,
        "  steady batch interval (median, with step)  {}",
        opt_ms(r.steady_interval_ms)
    )?;
    writeln!(out)?;

    writeln!(
        out,
        "{:<12} {:>12} {:>12} {:>12} {:>12}",
        "boundary", "gap (ms)", "step (ms)", "wait (ms)", "stall (ms)"
    )?;
    for b in &r.boundaries {
        writeln!(
            out,
            "  {:<10} {:>12.3} {:>12.3} {:>12.3} {:>12}",
            format!("{} -> {}", b.after_epoch + 1, b.after_epoch + 2),
            b.gap_ms,
            b.step_ms,
            b.wait_ms,
            b.stall_ms.map_or_else(|| "n/a".into(), ms3)
        )?;
    }
    writeln!(
        out,
        "  stall = gap - step - steady wait; median {}",
        opt_ms(r.stall_median_ms)
    )?;
    writeln!(out)?;

    writeln!(out, "targets")?;
    let limit = cache_target_bytes(r.raw_bytes);
    let growth = r
        .cache_rss_growth_bytes
        .map_or("n/a".into(), |g| mib(g as f64));
    writeln!(
        out,
        "  cache RSS growth <= 1.05 x raw + 16 MiB ({growth} vs limit {}): {}",
        mib(limit),
        verdict(r.cache_target_met)
    )?;
    writeln!(
        out,
        "  epoch-boundary stall median < {STALL_TARGET_MS} ms ({}): {}",
        opt_ms(r.stall_median_ms),
        match r.stall_target_met {
            None => "not measured (needs >= 2 epochs of >= 2 batches)",
            met => verdict(met),
        }
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milliseconds_never_print_negative_zero() {
        assert_eq!(ms3(-0.0001), "0.000");
        assert_eq!(ms3(-0.0123), "-0.012");
        assert_eq!(opt_ms(Some(0.25)), "0.250 ms");
        assert_eq!(opt_ms(None), "n/a");
    }
}

//! Progress bars that show on a terminal and stay silent everywhere else (pipes, CI logs, tests,
//! Python notebooks capturing stderr), so logs never fill with redraws.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressState, ProgressStyle};

/// A bar of `total` steps labelled `label` on stderr, or a hidden bar when `enabled` is false or
/// stderr is not a terminal. With no known total (`None`, e.g. a stream of unknown length) it is a
/// spinner with the count and the rate, never a full bar at "4000/0".
pub fn bar(total: Option<u64>, label: &str, enabled: bool) -> ProgressBar {
    make(total, label, enabled, false)
}

/// [`bar`] for a count of bytes: positions, totals and rates in KiB / MiB / GiB.
pub fn byte_bar(total: Option<u64>, label: &str, enabled: bool) -> ProgressBar {
    make(total, label, enabled, true)
}

fn make(total: Option<u64>, label: &str, enabled: bool, bytes: bool) -> ProgressBar {
    if !enabled || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = total.map_or_else(ProgressBar::no_length, ProgressBar::new);
    let style = ProgressStyle::with_template(&template(total.is_some(), bytes))
        .expect("the template is valid")
        .with_key("rate", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = w.write_str(&rate(s.per_sec()));
        });
    pb.set_style(style);
    pb.set_prefix(label.to_string());
    pb
}

/// The bar's template: with a known total a bar, the position out of the total, the rate and an
/// ETA; without one a spinner, the count and the rate only.
fn template(known_total: bool, bytes: bool) -> String {
    let (pos, len, rate) = match bytes {
        true => (
            "{binary_bytes}",
            "{binary_total_bytes}",
            "{binary_bytes_per_sec}",
        ),
        false => ("{human_pos}", "{human_len}", "{rate}"),
    };
    match known_total {
        true => format!(
            "{{prefix:>10}} [{{elapsed_precise}}] {{wide_bar}} {pos}/{len} {{msg}} ({rate}, eta {{eta}})"
        ),
        false => format!("{{prefix:>10}} [{{elapsed_precise}}] {{spinner}} {pos} {{msg}} ({rate})"),
    }
}

/// A count per second as people read it: `49,474/s` (indicatif's `{per_sec}` prints
/// `49,473.9396/s`); one decimal under 10/s, where whole numbers would say too little.
fn rate(per_sec: f64) -> String {
    if per_sec < 10.0 {
        return format!("{per_sec:.1}/s");
    }
    format!("{}/s", indicatif::HumanCount(per_sec.round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_a_terminal_bars_are_hidden_known_total_or_not() {
        // Tests run with stderr captured (not a terminal).
        assert!(bar(Some(10), "t", true).is_hidden());
        assert!(bar(None, "t", true).is_hidden());
        assert!(bar(Some(10), "t", false).is_hidden());
        assert!(byte_bar(None, "t", true).is_hidden());
    }

    #[test]
    fn an_unknown_total_shows_a_count_and_a_rate_not_a_bar() {
        for bytes in [false, true] {
            let t = template(false, bytes);
            assert!(
                !t.contains("wide_bar") && !t.contains("len") && !t.contains("eta"),
                "{t}"
            );
            assert!(t.contains("per_sec") || t.contains("{rate}"), "{t}");
            assert!(t.contains("spinner"), "{t}");
            let t = template(true, bytes);
            assert!(t.contains("wide_bar") && t.contains("eta"), "{t}");
            ProgressStyle::with_template(&t).unwrap();
            ProgressStyle::with_template(&template(false, bytes)).unwrap();
        }
    }

    #[test]
    fn rates_print_whole_numbers_with_separators() {
        assert_eq!(rate(49_473.939_6), "49,474/s");
        assert_eq!(rate(3.25), "3.2/s");
    }
}

//! Progress bars that show on a terminal and stay silent everywhere else (pipes, CI logs, tests,
//! Python notebooks capturing stderr), so logs never fill with redraws.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `len` steps labelled `label` on stderr, or a hidden bar when `enabled` is false or
/// stderr is not a terminal.
pub fn bar(len: u64, label: &str, enabled: bool) -> ProgressBar {
    if !enabled || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len);
    let style = ProgressStyle::with_template(
        "{prefix:>10} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg} (eta {eta})",
    )
    .expect("the template is valid");
    pb.set_style(style);
    pb.set_prefix(label.to_string());
    pb
}

//! One module per subcommand (see `lib.rs` for how to add one).

pub mod audio;
pub mod bench;
pub mod demo;
pub mod formats;
pub mod image;
pub mod shard;
pub mod table;
pub mod tfrecord;
pub mod top;
pub mod upload;

/// The error of a verb that meets audio or images in a build without that feature (`make demo`
/// builds the command with `--no-default-features`: the demo needs neither).
#[cfg(not(all(feature = "audio", feature = "image")))]
fn not_built(path: &std::path::Path, what: &str, feature: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{}: {what}, and this stokehold was built without the `{feature}` feature (make demo \
         builds the demo's verbs only): the full command is `cargo build --release -p \
         stokehold-cli`, or `stokehold` after `pip install stokehold`",
        path.display()
    )
}

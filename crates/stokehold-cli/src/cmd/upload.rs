//! The byte bar of an upload to an object store (`write` and `convert` to `s3://...`): the
//! writers write a local staging folder, then upload it (`stokehold_io::storage::write_staged`),
//! reporting the bytes handed to the store through `storage::set_upload_progress`.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use indicatif::ProgressBar;
use stokehold_io::storage;

/// While alive, shows uploads' bytes, total and rate on a byte bar (hidden off a terminal).
pub struct UploadBar {
    bar: Arc<OnceLock<ProgressBar>>,
}

impl UploadBar {
    /// A bar for uploads to `out` when it is a URL (else `None`); `before`, the bar of the write
    /// that precedes the upload, is cleared when the upload starts, so one bar shows at a time.
    pub fn install(out: &Path, enabled: bool, before: Option<ProgressBar>) -> Option<UploadBar> {
        if !storage::is_remote(out) {
            return None;
        }
        let cell: Arc<OnceLock<ProgressBar>> = Arc::new(OnceLock::new());
        let c = cell.clone();
        storage::set_upload_progress(Some(Arc::new(move |done, total| {
            let bar = c.get_or_init(|| {
                if let Some(b) = &before {
                    b.finish_and_clear();
                }
                crate::progress::byte_bar(Some(total), "upload", enabled)
            });
            bar.set_position(done);
        })));
        Some(UploadBar { bar: cell })
    }
}

impl Drop for UploadBar {
    fn drop(&mut self) {
        storage::set_upload_progress(None);
        if let Some(b) = self.bar.get() {
            b.finish_and_clear();
        }
    }
}

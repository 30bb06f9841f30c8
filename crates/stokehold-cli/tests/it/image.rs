//! `stokehold inspect` on the image fixtures of `testdata/image`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/image")
        .join(name)
}

#[test]
fn inspect_prints_image_format_and_size() {
    let files = ["baseline.jpg", "gray16.png", "alpha.webp"].map(fixture);
    let o = Command::new(env!("CARGO_BIN_EXE_stokehold"))
        .arg("inspect")
        .args(&files)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("baseline.jpg: JPEG image, 64x48 (width x height), 3 channels, 8-bit"),
        "{out}"
    );
    assert!(
        out.contains("gray16.png: PNG image, 64x48 (width x height), 1 channel, 16-bit"),
        "{out}"
    );
    assert!(
        out.contains("alpha.webp: WebP image, 64x48 (width x height), 4 channels, 8-bit"),
        "{out}"
    );
}

#[test]
fn inspect_names_a_broken_image() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("cut.png");
    std::fs::write(&bad, &std::fs::read(fixture("rgb8.png")).unwrap()[..20]).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_stokehold"))
        .arg("inspect")
        .arg(&bad)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("cut.png") && err.contains("PNG"), "{err}");
}
